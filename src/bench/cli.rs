//! `ioscope bench` flags, their checks, and the choice of front end: the TUI bench view on a
//! terminal, else a progress line per job on stderr and the table (or `--json`) on stdout.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use clap::Args;

use crate::safe_fs::Output;

use super::job::Progress;
use super::report;
use super::runner::{self, Event, Plan, STOP};
use super::spec::{self, Cache, Engine, EngineChoice, Fsync, Mode};
use super::target::{self, TargetRequest};

/// Default job matrix: about a minute on a typical disk.
pub const DEFAULT_RW: &str = "read,write,randread,randwrite";
pub const DEFAULT_BS: &str = "4k,1m";
pub const DEFAULT_MODES: &str = "direct,buffered";
pub const DEFAULT_RUNTIME: &str = "3";

#[derive(Clone, Debug, PartialEq, Args)]
#[command(
    after_help = "PATH is a directory (a test file is created there and removed after) or an existing \
    file (read-only jobs unless --write). Each job makes one pass over the file or stops at --runtime. \
    Ctrl-C stops cleanly: the test file is removed and the results so far are printed."
)]
pub struct BenchArgs {
    /// Directory for a temporary test file, or an existing file.
    #[arg(value_name = "PATH")]
    pub path: Option<PathBuf>,

    /// Benchmark a raw block device instead (reads; writes need --destructive).
    #[arg(long, value_name = "DEV")]
    pub device: Option<PathBuf>,

    /// Patterns, comma-separated: read, write, randread, randwrite [default: read,write,randread,randwrite;
    /// reads only for an existing file or device without --write/--destructive].
    #[arg(long, value_name = "LIST")]
    pub rw: Option<String>,

    /// Block sizes, comma-separated, with units (512, 4k, 1m).
    #[arg(long, value_name = "LIST", default_value = DEFAULT_BS)]
    pub bs: String,

    /// Bytes of the file to use (test file default 512M; an existing file or device: all of it, at most 1G).
    #[arg(long, value_name = "SIZE", value_parser = spec::parse_size)]
    pub size: Option<u64>,

    /// Longest time per job (seconds, or 500ms, 2m); a job also ends after one pass over the file.
    #[arg(long, value_name = "TIME", default_value = DEFAULT_RUNTIME, value_parser = spec::parse_runtime)]
    pub runtime: std::time::Duration,

    /// Run every job for the whole --runtime, starting over the file when a pass ends (fio's time_based).
    #[arg(long)]
    pub time_based: bool,

    /// Queue depths, comma-separated: requests in flight (1 to 256).
    #[arg(long, value_name = "LIST", default_value = "1")]
    pub qd: String,

    /// How requests are issued: auto (io_uring where the kernel allows it, else threads),
    /// io_uring (one thread, QD requests in flight), threads (QD threads doing pread/pwrite).
    #[arg(long, value_name = "ENGINE", default_value = "auto", value_parser = spec::parse_engine)]
    pub engine: EngineChoice,

    /// Modes, comma-separated: direct (O_DIRECT), buffered, mmap.
    #[arg(long, value_name = "LIST", default_value = DEFAULT_MODES)]
    pub modes: String,

    /// For writes: none, end (one fsync after the last write), every=N.
    #[arg(long, value_name = "POLICY", default_value = "end", value_parser = spec::parse_fsync)]
    pub fsync: Fsync,

    /// cold: drop the file's pages before each job (posix_fadvise DONTNEED, checked with cachestat); warm: keep them.
    #[arg(long, value_name = "POLICY", default_value = "cold", value_parser = spec::parse_cache)]
    pub cache: Cache,

    /// Before each job, sync and drop every clean page cache on the machine (root).
    #[arg(long)]
    pub drop_caches: bool,

    /// I/O buffers in transparent huge pages instead of ordinary pages (what applications and
    /// fio's default buffers use). A direct request's buffer is then one physically contiguous
    /// segment, so the device gets it whole: large direct requests are not split at the device's
    /// segment limit (fio's --mem=mmaphuge).
    #[arg(long)]
    pub huge_pages: bool,

    /// Allow write jobs on an existing file (its contents are overwritten).
    #[arg(long)]
    pub write: bool,

    /// Replace an existing --output FILE, a regular file only (never a link, nor the file or device
    /// being benchmarked).
    #[arg(long)]
    pub force: bool,

    /// Allow write jobs on a block device (its contents are destroyed).
    #[arg(long)]
    pub destructive: bool,

    /// Print the results as one JSON document on stdout (no TUI).
    #[arg(long)]
    pub json: bool,

    /// Also write the JSON results to FILE (for --compare later).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Compare two --json results: before/after table with deltas and % change; runs nothing.
    #[arg(long, num_args = 2, value_names = ["BEFORE.json", "AFTER.json"])]
    pub compare: Option<Vec<PathBuf>>,

    /// Do not use colours in the bench view.
    #[arg(long)]
    pub no_color: bool,
}

/// A usage problem (exit 2) or a runtime failure (exit 1).
#[derive(Debug)]
pub enum BenchError {
    Usage(String),
    Failed(anyhow::Error),
}

impl BenchArgs {
    /// Parses the lists, applies the safety rules and resolves the target. Nothing is written.
    pub fn plan(&self) -> Result<Plan, BenchError> {
        let usage = BenchError::Usage;
        let sizes = spec::parse_list(&self.bs, spec::parse_bs).map_err(|e| usage(format!("--bs: {e}")))?;
        let qds = spec::parse_list(&self.qd, spec::parse_qd).map_err(|e| usage(format!("--qd: {e}")))?;
        let modes =
            spec::parse_list(&self.modes, spec::parse_mode).map_err(|e| usage(format!("--modes: {e}")))?;
        let explicit_rw = self.rw.is_some();
        let mut rws = spec::parse_list(self.rw.as_deref().unwrap_or(DEFAULT_RW), spec::parse_rw)
            .map_err(|e| usage(format!("--rw: {e}")))?;
        if self.drop_caches && unsafe { libc::geteuid() } != 0 {
            return Err(usage("--drop-caches needs root (it writes /proc/sys/vm/drop_caches)".into()));
        }
        if self.path.is_some() && self.device.is_some() {
            return Err(usage("give either a PATH or --device DEV, not both".into()));
        }
        if self.destructive && self.device.is_none() {
            return Err(usage("--destructive only applies to --device".into()));
        }
        let mut notes = Vec::new();
        // Without an explicit --rw, a read-only target gets the read jobs only (and says so).
        let existing_file = self.path.as_ref().is_some_and(|p| p.is_file());
        let read_only = (existing_file && !self.write) || (self.device.is_some() && !self.destructive);
        if !explicit_rw && read_only {
            rws.retain(|rw| !rw.is_write());
            notes.push(if self.device.is_some() {
                "write jobs skipped: writing to a device needs --destructive".to_string()
            } else {
                "write jobs skipped: the file exists; --write allows overwriting it".to_string()
            });
        }
        let req = TargetRequest {
            path: self.path.clone(),
            device: self.device.clone(),
            size: self.size,
            wants_write: rws.iter().any(|r| r.is_write()),
            write: self.write,
            destructive: self.destructive,
        };
        let target = target::resolve(&req).map_err(|e| usage(format!("{e:#}")))?;
        notes.extend(target.notes.iter().cloned());
        let jobs = spec::matrix(&rws, &sizes, &qds, &modes);
        if let Some(bs) = sizes.iter().find(|&&bs| bs > target.size) {
            return Err(usage(format!(
                "--bs {} is larger than the {} to benchmark",
                spec::size_label(*bs),
                spec::size_label(target.size)
            )));
        }
        if modes.contains(&Mode::Mmap) && target.kind == target::TargetKind::Device {
            return Err(usage("--modes mmap needs a file, not a device".into()));
        }
        let engine = match (self.engine, super::uring::available()) {
            (EngineChoice::Only(e), Ok(())) | (EngineChoice::Only(e @ Engine::Threads), _) => e,
            (EngineChoice::Auto, Ok(())) => Engine::IoUring,
            (EngineChoice::Auto, Err(why)) => {
                notes.push(format!("io_uring unavailable ({why}): the thread-pool engine is used"));
                Engine::Threads
            }
            (EngineChoice::Only(Engine::IoUring), Err(why)) => {
                return Err(usage(format!("--engine io_uring: io_uring is unavailable here ({why})")));
            }
        };
        if rws.iter().all(|r| !r.is_write()) && self.fsync != Fsync::End {
            notes.push("--fsync only applies to write jobs".into());
        }
        Ok(Plan {
            target,
            jobs,
            runtime: self.runtime,
            time_based: self.time_based,
            engine,
            fsync: self.fsync,
            cache: self.cache,
            drop_caches: self.drop_caches,
            huge_pages: self.huge_pages,
            notes,
        })
    }
}

/// Runs `ioscope bench` to its exit code: 0 done, 1 failure, 2 bad input, 130 stopped by Ctrl-C.
pub fn main(args: &BenchArgs, no_color_env: Option<&std::ffi::OsStr>) -> ExitCode {
    match run(args, no_color_env) {
        Ok(code) => code,
        Err(BenchError::Usage(msg)) => {
            eprintln!("ioscope bench: {}", crate::untrusted::escape_lines(&msg));
            ExitCode::from(crate::util::USAGE_EXIT_CODE as u8)
        }
        Err(BenchError::Failed(e)) => {
            eprintln!("ioscope bench: {}", crate::untrusted::escape_lines(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

/// Exit code after Ctrl-C (128 + SIGINT), as shells report it; the results so far were printed.
pub const INTERRUPTED_EXIT_CODE: u8 = 130;

fn run(args: &BenchArgs, no_color_env: Option<&std::ffi::OsStr>) -> Result<ExitCode, BenchError> {
    if let Some(files) = &args.compare {
        let read = |p| report::read_report(p).map_err(failed_or_refused);
        let (before, after) = (read(&files[0])?, read(&files[1])?);
        // The reports are files anyone may have written: their names and paths are shown escaped.
        print!("{}", crate::untrusted::escape_lines(&report::format_compare(&before, &after)));
        return Ok(ExitCode::SUCCESS);
    }
    let plan = args.plan()?;
    let mut output = match &args.output {
        Some(out) => Some(open_output(out, &plan.target, args.force)?),
        None => None,
    };
    let result = run_plan(args, &plan, no_color_env, &mut output);
    // A failed run leaves no report: a file created for it is removed, an old one kept.
    if let Some(out) = output {
        out.discard();
    }
    result
}

/// A refused input or output (a FIFO, a device, a link: [`crate::safe_fs::Refused`]) is a usage
/// error; anything else a failure.
fn failed_or_refused(e: anyhow::Error) -> BenchError {
    if crate::safe_fs::is_refused(&e) {
        BenchError::Usage(format!("{e:#}"))
    } else {
        BenchError::Failed(e)
    }
}

/// Opens `-o FILE` before the run, so a bad path fails now and not after a minute of
/// benchmarking: a new file, or with --force a replacement written beside the old one and renamed
/// over it once the report is in ([`crate::safe_fs::create`]: never through a link). The file or
/// device being benchmarked is refused always; a FIFO or a device too (the report goes to a
/// regular file; `--json` prints it on standard output).
fn open_output(out: &std::path::Path, target: &target::Target, force: bool) -> Result<Output, BenchError> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    if let Ok(meta) = std::fs::metadata(out) {
        let same = std::fs::metadata(&target.path).is_ok_and(|t| {
            (t.dev(), t.ino()) == (meta.dev(), meta.ino())
                || (t.file_type().is_block_device()
                    && meta.file_type().is_block_device()
                    && t.rdev() == meta.rdev())
        });
        if same {
            return Err(BenchError::Usage(format!(
                "--output {} is the {} being benchmarked: refusing to overwrite it with the report",
                out.display(),
                if target.kind == target::TargetKind::Device { "device" } else { "file" }
            )));
        }
    }
    if std::fs::symlink_metadata(out).is_ok_and(|m| m.file_type().is_fifo() || m.file_type().is_char_device())
    {
        return Err(BenchError::Usage(format!(
            "--output {} is not a regular file: the report is written to a file (--json prints it on standard output)",
            out.display()
        )));
    }
    let opts = crate::safe_fs::CreateOptions { replace: force, stream: false };
    crate::safe_fs::create(out, opts, &mut || false)
        .map_err(|e| BenchError::Usage(format!("--output: {e:#}")))
}

fn run_plan(
    args: &BenchArgs,
    plan: &Plan,
    no_color_env: Option<&std::ffi::OsStr>,
    output: &mut Option<Output>,
) -> Result<ExitCode, BenchError> {
    let tui = !args.json && std::io::stdout().is_terminal();
    let report = if tui {
        let color = crate::util::wants_color(args.no_color, no_color_env);
        super::tui::run(plan, color).map_err(BenchError::Failed)?
    } else {
        runner::install_stop_handlers();
        let progress = Progress::default();
        let total = plan.jobs.len();
        let mut stderr = std::io::stderr();
        let mut on_event = |ev: Event| {
            let _ = match ev {
                Event::Note(n) => writeln!(stderr, "note: {n}"),
                Event::Layout { done, total } if done == total => {
                    writeln!(stderr, "laid out the {} test file", spec::size_label(total))
                }
                Event::Layout { .. } => Ok(()),
                Event::JobStarted { index, spec } => {
                    write!(stderr, "[{}/{total}] {} {} … ", index + 1, spec.key(), spec.mode.name())
                }
                Event::JobDone { result, .. } => writeln!(stderr, "{}", result.verdict),
            };
        };
        runner::run(plan, &STOP, &progress, &mut on_event).map_err(BenchError::Failed)?
    };
    let json = serde_json::to_string_pretty(&report).map_err(|e| BenchError::Failed(e.into()))?;
    if let (Some(mut out), Some(path)) = (output.take(), &args.output) {
        let failed =
            |e: std::io::Error| BenchError::Failed(anyhow::anyhow!("writing {}: {e}", path.display()));
        if let Err(e) = out.file().write_all(format!("{json}\n").as_bytes()) {
            out.discard();
            return Err(failed(e));
        }
        out.commit().map_err(failed)?;
    }
    let mut stdout = std::io::stdout();
    let printed = if args.json {
        writeln!(stdout, "{json}")
    } else {
        write!(stdout, "{}", crate::untrusted::escape_lines(&report::format_report(&report)))
    };
    if let Err(e) = printed {
        // A closed pipe, or a terminal that hung up (EIO): nobody is left to read the table.
        if e.kind() != std::io::ErrorKind::BrokenPipe && e.raw_os_error() != Some(libc::EIO) {
            return Err(BenchError::Failed(e.into()));
        }
    }
    if report.interrupted || STOP.load(Ordering::Relaxed) {
        return Ok(ExitCode::from(INTERRUPTED_EXIT_CODE));
    }
    Ok(ExitCode::SUCCESS)
}
