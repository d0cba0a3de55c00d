//! `cargo xtask cache-overhead`: what the page-cache probes cost a cached-read workload.
//!
//! fio does 4 KiB buffered random reads (psync, one job) of a file that is fully in the page cache
//! (or, with `--cat`, what `cat` of a cached file does: sequential 128 KiB reads), for a few
//! seconds at a time, without and with `ioscope --batch` running (its eBPF programs attached, so
//! every read() runs the `mm_filemap_get_pages` program), in an order that alternates from round to
//! round so that drift in the machine's load hits both sides alike; the medians are compared. The target
//! (xtask/README.md, "cargo xtask cache-overhead"): with ioscope, at least 95 % of the throughput without.
//!
//! Throughput alone measures the neighbours on a shared machine (other work taking the CPUs), so
//! the verdict uses fio's own CPU time per read (its usr + sys share of the run, from fio's
//! report): the throughput one CPU gets is its inverse, and the probes' cost is all in it (they
//! run inside fio's read() calls). Raw IOPS are printed too.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Parser;

use crate::empty_program::EmptyProgram;
use crate::stats;
use crate::watcher::Ioscope;

const TARGET_RATIO: f64 = 0.95;

#[derive(Debug, Parser)]
#[command(name = "cargo xtask cache-overhead", about = "Cached-read throughput with and without ioscope")]
struct Args {
    /// Seconds per fio run.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Runs on each side (alternating).
    #[arg(long, default_value_t = 9)]
    rounds: usize,
    /// Size of the cached file, MiB.
    #[arg(long, default_value_t = 256)]
    file_mib: u64,
    /// Directory for the file (on a disk-backed filesystem, not tmpfs).
    #[arg(long, default_value = "/var/tmp")]
    dir: PathBuf,
    /// Read as `cat` does (sequential reads of 128 KiB, its buffer size) instead of 4 KiB random
    /// reads (the harshest case: the probes' cost per read() is fixed, the read is at its smallest).
    #[arg(long)]
    cat: bool,
    /// Also run each round with an empty eBPF program on the same tracepoint instead of ioscope:
    /// the kernel's own cost of running any program on every read, which no tool can go below.
    #[arg(long)]
    floor: bool,
}

/// What runs beside fio in one run.
#[derive(Clone, Copy, Debug)]
enum Side {
    Without,
    EmptyProgram,
    Ioscope,
}

/// The read pattern of one run: fio's `--rw` and the read size in KiB.
#[derive(Clone, Copy, Debug)]
struct Pattern {
    rw: &'static str,
    kib: u64,
}

impl Pattern {
    fn of(args: &Args) -> Pattern {
        if args.cat {
            Pattern { rw: "read", kib: 128 }
        } else {
            Pattern { rw: "randread", kib: 4 }
        }
    }

    fn describe(self) -> String {
        match self.rw {
            "read" => format!("sequential {} KiB reads (as cat does)", self.kib),
            _ => format!("{} KiB random reads", self.kib),
        }
    }
}

pub fn run(args: &[String]) -> Result<()> {
    let args =
        Args::try_parse_from(std::iter::once("cache-overhead".to_string()).chain(args.iter().cloned()))?;
    // Measured as users run it: the kernel's per-program timing off (crate::bpf_stats).
    let _bpf_stats = crate::bpf_stats::BpfStats::off();
    if Command::new("fio").arg("--version").output().is_err() {
        bail!("fio is not installed (apt-get install fio)");
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("xtask has no parent directory")?;
    let bin = crate::perf::build_release(root)?;
    let file = args.dir.join(format!("ioscope-cache-overhead-{}", std::process::id()));
    let _cleanup = RemoveOnDrop(file.clone());
    make_file(&file, args.file_mib)?;
    // Locking faults in any page the write did not leave cached: the whole file is cached from here.
    let _pinned = PinnedFile::new(&file)?;
    let pattern = Pattern::of(&args);
    println!(
        "cache-overhead: fio buffered {} of a cached {} MiB file, {} s × {} rounds per side",
        pattern.describe(),
        args.file_mib,
        args.seconds,
        args.rounds
    );

    // The file stays cached throughout (PinnedFile), so no run needs to read it in again.
    let run = |side: Side| -> Result<FioRun> {
        match side {
            Side::Without => fio_run(&file, args.seconds, pattern),
            Side::EmptyProgram => {
                let _program = EmptyProgram::attach("mm_filemap_get_pages")?;
                fio_run(&file, args.seconds, pattern)
            }
            Side::Ioscope => {
                let _ioscope = Ioscope::start(&bin)?;
                fio_run(&file, args.seconds, pattern)
            }
        }
    };
    let sides: &[Side] = if args.floor {
        &[Side::Without, Side::EmptyProgram, Side::Ioscope]
    } else {
        &[Side::Without, Side::Ioscope]
    };
    let (mut without, mut with, mut floor) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=args.rounds {
        // The order turns from round to round, so that a drift in the machine's load hits every
        // side alike.
        for i in 0..sides.len() {
            let side = sides[(round + i) % sides.len()];
            let r = run(side)?;
            match side {
                Side::Without => without.push(r),
                Side::EmptyProgram => floor.push(r),
                Side::Ioscope => with.push(r),
            }
        }
        let (a, b) = (&without[round - 1], &with[round - 1]);
        let empty = floor.last().map_or(String::new(), |f| {
            format!(
                "; empty program {:.0} reads/CPU-s ({:.1} %)",
                f.reads_per_cpu_s,
                100.0 * f.reads_per_cpu_s / a.reads_per_cpu_s
            )
        });
        println!(
            "  round {round}: without {:.0} IOPS, {:.0} reads/CPU-s; with ioscope {:.0} IOPS, {:.0} reads/CPU-s ({:.1} %){empty}",
            a.iops,
            a.reads_per_cpu_s,
            b.iops,
            b.reads_per_cpu_s,
            100.0 * b.reads_per_cpu_s / a.reads_per_cpu_s
        );
    }
    let iops = |v: &[FioRun]| stats::median(&mut v.iter().map(|r| r.iops).collect::<Vec<_>>());
    let per_cpu = |v: &[FioRun]| stats::median(&mut v.iter().map(|r| r.reads_per_cpu_s).collect::<Vec<_>>());
    let (a, b) = (per_cpu(&without), per_cpu(&with));
    let ratio = b / a;
    // The rounds' own ratios (each with run over the adjacent run without) say how sure that is.
    let rounds = round_ratios(&with, &without);
    let (lo, hi) = stats::median_interval(&rounds);
    let verdict = stats::at_least(TARGET_RATIO, (lo, hi));
    println!(
        "median IOPS: without {:.0}, with ioscope {:.0} ({:.1} %; depends on the machine's other load)",
        iops(&without),
        iops(&with),
        100.0 * iops(&with) / iops(&without)
    );
    println!(
        "median reads per CPU-second: without {a:.0}, with ioscope {b:.0}: {:.1} % (rounds' ratios: median \
         {:.1} %, 95 % interval {:.1} … {:.1} %; target ≥ {:.0} %) {}",
        100.0 * ratio,
        100.0 * stats::median(&mut rounds.clone()),
        100.0 * lo,
        100.0 * hi,
        100.0 * TARGET_RATIO,
        verdict.describe(ratio >= TARGET_RATIO)
    );
    if !floor.is_empty() {
        let per_round = |x: &[FioRun], y: &[FioRun]| 100.0 * stats::median(&mut round_ratios(x, y));
        println!(
            "empty program on the same tracepoint (the kernel's floor for any eBPF tool): {:.1} % of without \
             (rounds' median {:.1} %); ioscope: rounds' median {:.1} % of the empty program",
            100.0 * per_cpu(&floor) / a,
            per_round(&floor, &without),
            per_round(&with, &floor)
        );
    }
    if verdict == stats::Verdict::Fail {
        bail!("cached-read throughput with ioscope is below {:.0} % of without", 100.0 * TARGET_RATIO);
    }
    Ok(())
}

/// Each round's reads per CPU-second of side `x` over side `y` (runs of one round are adjacent).
fn round_ratios(x: &[FioRun], y: &[FioRun]) -> Vec<f64> {
    x.iter().zip(y).map(|(x, y)| x.reads_per_cpu_s / y.reads_per_cpu_s).collect()
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn make_file(path: &Path, mib: u64) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let block: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    for _ in 0..mib {
        f.write_all(&block)?;
    }
    f.sync_all()?;
    drop(f);
    read_all(path)
}

/// The file's pages locked in memory for as long as this lives (mmap + mlock): a proactive
/// reclaimer (this VM runs DAMON's `pageout` scheme, which samples one page per region and evicts
/// whole regions it thinks idle) otherwise evicts parts of the hot file between and during runs,
/// and the reads that then go to the disk swamp the probes' cost in either side of a round.
struct PinnedFile {
    addr: *mut libc::c_void,
    len: usize,
}

impl PinnedFile {
    fn new(path: &Path) -> Result<PinnedFile> {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let len = f.metadata()?.len() as usize;
        // SAFETY: a fresh read-only shared mapping of an open file; checked below.
        let addr = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0)
        };
        if addr == libc::MAP_FAILED {
            bail!("mmap of {}: {}", path.display(), std::io::Error::last_os_error());
        }
        let pinned = PinnedFile { addr, len };
        // SAFETY: the mapping made above, whole.
        if unsafe { libc::mlock(addr, len) } != 0 {
            bail!("mlock of {} ({len} bytes): {}", path.display(), std::io::Error::last_os_error());
        }
        Ok(pinned)
    }
}

impl Drop for PinnedFile {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new(); unmapping also unlocks it.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

/// Reads the file through, so that every page is cached before measuring.
fn read_all(path: &Path) -> Result<()> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    while f.read(&mut buf)? > 0 {}
    Ok(())
}

/// One fio run's figures.
#[derive(Clone, Copy, Debug, PartialEq)]
struct FioRun {
    iops: f64,
    /// Reads done per second of fio's own CPU time (usr + sys).
    reads_per_cpu_s: f64,
}

/// One fio run: buffered reads of the cached file (invalidate=0 keeps it cached).
fn fio_run(file: &Path, seconds: u64, p: Pattern) -> Result<FioRun> {
    let bs = format!("{}k", p.kib);
    let args =
        crate::fio::read_job("cached", file, p.rw, &bs, seconds, &["--ioengine=psync", "--invalidate=0"]);
    let r = crate::fio::run(&args)?;
    reads_per_cpu(&r, p.kib).context("fio reported no CPU time")
}

/// Reads per second of fio's own CPU time: reads of `read_kib` over (usr + sys) share of the
/// runtime.
fn reads_per_cpu(r: &crate::fio::ReadFigures, read_kib: u64) -> Option<FioRun> {
    let cpu_s = (r.usr_pct + r.sys_pct) / 100.0 * r.runtime_ms / 1000.0;
    if cpu_s <= 0.0 {
        return None;
    }
    Some(FioRun { iops: r.iops, reads_per_cpu_s: r.kib / read_kib as f64 / cpu_s })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_per_cpu_second() {
        // 1,048,576 reads of 4 KiB in 5 s with 50 % CPU (2.5 CPU-s).
        let r = crate::fio::ReadFigures {
            kib: 4194304.0,
            iops: 209715.0,
            runtime_ms: 5000.0,
            usr_pct: 10.0,
            sys_pct: 40.0,
        };
        let run = reads_per_cpu(&r, 4).unwrap();
        assert_eq!(run.iops, 209715.0);
        assert_eq!(run.reads_per_cpu_s, 1_048_576.0 / 2.5);
        assert_eq!(reads_per_cpu(&r, 128).unwrap().reads_per_cpu_s, 32_768.0 / 2.5, "128 KiB reads");
        assert_eq!(reads_per_cpu(&crate::fio::ReadFigures { usr_pct: 0.0, sys_pct: 0.0, ..r }, 4), None);
    }
}
