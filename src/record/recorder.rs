//! `ioscope record`: sample the live system on the sampling clock's deadlines and append every Sample to a file,
//! without a terminal. Stops after `--duration`, on SIGINT/SIGTERM/SIGHUP, or when killed (the file
//! is valid up to the last whole sample in every case).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::bpf::{BpfCollector, BpfOptions};
use crate::collect::clock::Clock;
use crate::collect::{Sampler, SystemRoot};
use crate::record::format::RecordingWriter;
use crate::record::host_facts;

/// `ioscope record`'s flags.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// The recording to write: a new file (never through a symbolic link), `-` for standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: std::path::PathBuf,
    /// Seconds between samples (fractions allowed, 0.1 to 3600).
    #[arg(short, long, value_name = "SECONDS", default_value = "1", value_parser = crate::util::parse_interval)]
    pub interval: Duration,
    /// Stop after this long: seconds, or with a unit (90s, 5m, 2h), or h:mm:ss.
    #[arg(short, long, value_name = "DURATION", value_parser = crate::util::parse_duration)]
    pub duration: Option<Duration>,
    /// Do not load eBPF programs.
    #[arg(long)]
    pub no_bpf: bool,
    /// Replace FILE if it is an existing regular file (a new file is renamed over it).
    #[arg(long)]
    pub force: bool,
    /// FILE is an existing FIFO or character device to stream into (waits for a FIFO's reader
    /// until --duration ends or Ctrl-C).
    #[arg(long)]
    pub stream: bool,
}

impl RecordArgs {
    /// The options `ioscope record` runs with (clap has checked every value).
    pub fn options(&self) -> RecordOptions {
        RecordOptions {
            output: self.output.clone(),
            interval: self.interval,
            duration: self.duration,
            bpf: !self.no_bpf,
            force: self.force,
            stream: self.stream,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct RecordOptions {
    pub output: PathBuf,
    pub interval: Duration,
    /// Stop after this long; None records until interrupted.
    pub duration: Option<Duration>,
    pub bpf: bool,
    /// Replace an existing regular file instead of refusing.
    pub force: bool,
    /// Write into an existing FIFO or character device.
    pub stream: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);
/// SIGUSR1s received: each adds a mark.
static MARKS_ASKED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

extern "C" fn request_mark(_: libc::c_int) {
    MARKS_ASKED.fetch_add(1, Ordering::SeqCst);
}

extern "C" fn request_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// How often the wait between samples looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

pub fn run(opts: &RecordOptions) -> anyhow::Result<()> {
    // Without SA_RESTART: a write blocked on a stream whose reader stopped reading returns EINTR,
    // and the writer gives up on it (`RecordingWriter::start_stoppable`). SIGALRM ends such a write once
    // --duration is over (2 s of grace for the last sample).
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGALRM] {
        // SAFETY: a zeroed sigaction whose handler only stores to an atomic (async-signal-safe).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = request_stop as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    // SIGUSR1 adds a mark (`kill -USR1 PID`); with SA_RESTART, nothing it interrupts fails.
    // SAFETY: a zeroed sigaction whose handler only adds to an atomic (async-signal-safe).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = request_mark as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
    if let Some(d) = opts.duration {
        // SAFETY: alarm has no preconditions.
        unsafe { libc::alarm((d.as_secs() + 2).min(u32::MAX as u64) as u32) };
    }
    // Before anything slow (loading eBPF), so a bad path is reported at once. A FIFO's reader is
    // awaited only as long as the recording would run, and Ctrl-C or kill ends the wait.
    let started = Instant::now();
    let mut told = false;
    let mut keep_waiting = || {
        if !told {
            eprintln!("ioscope: waiting for a reader on {} (Ctrl-C stops)", opts.output.display());
            told = true;
        }
        !STOP.load(Ordering::SeqCst) && opts.duration.is_none_or(|d| started.elapsed() < d)
    };
    let create = crate::safe_fs::CreateOptions { replace: opts.force, stream: opts.stream };
    let file = crate::safe_fs::create(&opts.output, create, &mut keep_waiting)?
        .commit()
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", opts.output.display()))?;
    let bpf = if opts.bpf {
        BpfCollector::start_with(&BpfOptions::for_output_writer())
    } else {
        BpfCollector::disabled("--no-bpf was given")
    };
    let root = SystemRoot::live();
    let mut sampler = Sampler::new(root.clone(), bpf);
    let first = sampler.sample();
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let header = host_facts::header(&root, &first, opts.interval.as_secs_f64(), &command);
    let mut writer = RecordingWriter::start_stoppable(file, &opts.output, &header, Some(&STOP))?;
    let bpf_note = match (&first.bpf.status.enabled, &first.bpf.status.reason) {
        (true, None) => "eBPF on".to_string(),
        (_, Some(why)) => format!("eBPF off: {why}"),
        (false, None) => "eBPF off".to_string(),
    };
    eprintln!(
        "ioscope: recording to {} every {:.2}s{} ({bpf_note}); Ctrl-C stops",
        opts.output.display(),
        opts.interval.as_secs_f64(),
        opts.duration.map(|d| format!(" for {:.0}s", d.as_secs_f64())).unwrap_or_default(),
    );
    let write_err = |e: std::io::Error| anyhow::anyhow!("cannot write to {}: {e}", opts.output.display());
    writer.write_sample(&first).map_err(write_err)?;
    let start = Instant::now();
    let mut clock = Clock::new(start, opts.interval);
    loop {
        // Late (a slow sample): the missed deadlines are skipped rather than fired back to back.
        let deadline = clock.next(Instant::now());
        if opts.duration.is_some_and(|d| deadline > start + d + Duration::from_millis(1)) {
            break;
        }
        let marked = |w: &mut RecordingWriter| write_asked_marks(w, start);
        if !wait_until(deadline, &mut |_| marked(&mut writer)) {
            break;
        }
        clock.tick();
        let sample = sampler.sample();
        writer.write_sample(&sample).map_err(write_err)?;
    }
    write_asked_marks(&mut writer, start);
    writer.sync().map_err(write_err)?;
    let secs = start.elapsed().as_secs_f64().max(opts.interval.as_secs_f64());
    let skipped = match clock.skipped() {
        0 => String::new(),
        n => format!("; {n} deadlines skipped (a sample took longer than the interval)"),
    };
    eprintln!(
        "ioscope: {} samples, {} bytes ({:.1} KB/min) in {}{skipped}",
        writer.frames(),
        writer.bytes(),
        writer.bytes() as f64 / 1000.0 / secs * 60.0,
        opts.output.display()
    );
    Ok(())
}

/// Writes a mark for each SIGUSR1 not yet marked, timed now (within the 50 ms the wait polls),
/// and says so on stderr.
fn write_asked_marks(w: &mut RecordingWriter, start: Instant) {
    while w.marks() < MARKS_ASKED.load(Ordering::SeqCst) {
        let wall_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mark =
            crate::record::Mark { mono_ns: crate::util::monotonic_ns(), wall_unix_ms, note: String::new() };
        match w.write_mark(&mark) {
            Ok(()) => eprintln!("ioscope: mark {} at {:.1}s", w.marks(), start.elapsed().as_secs_f64()),
            Err(e) => {
                eprintln!("ioscope: cannot write a mark: {e}");
                return;
            }
        }
    }
}

/// Sleeps until `deadline`, calling `between` at every poll; false when a stop signal came first.
fn wait_until(deadline: Instant, between: &mut dyn FnMut(())) -> bool {
    loop {
        between(());
        if STOP.load(Ordering::SeqCst) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        std::thread::sleep((deadline - now).min(STOP_POLL));
    }
}
