//! `ioscope record`: sample the live system at a fixed interval and append every Sample to a file,
//! without a terminal. Stops after `--duration`, on SIGINT/SIGTERM/SIGHUP, or when killed (the file
//! is valid up to the last whole sample in every case).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::bpf::{BpfCollector, BpfOptions};
use crate::collect::{Sampler, SystemRoot};
use crate::record::format::{open_output, RecordingWriter};
use crate::record::host_facts;

/// `ioscope record`'s flags.
#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// The recording to write (refused if it exists, unless --force).
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
    /// Overwrite FILE if it exists.
    #[arg(long)]
    pub force: bool,
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
    /// Overwrite an existing file instead of refusing.
    pub force: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn request_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// How often the wait between samples looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

pub fn run(opts: &RecordOptions) -> anyhow::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { libc::signal(sig, request_stop as *const () as libc::sighandler_t) };
    }
    let file = open_output(&opts.output, opts.force)?;
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
    let mut writer = RecordingWriter::start(file, &opts.output, &header)?;
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
    let mut tick: u32 = 0;
    loop {
        tick += 1;
        let deadline = start + opts.interval * tick;
        if opts.duration.is_some_and(|d| deadline > start + d + Duration::from_millis(1)) {
            break;
        }
        if !wait_until(deadline) {
            break;
        }
        let sample = sampler.sample();
        writer.write_sample(&sample).map_err(write_err)?;
        // Late (a slow sample): skip the missed deadlines rather than firing back to back.
        let late = start.elapsed().as_secs_f64() / opts.interval.as_secs_f64();
        tick = tick.max(late.floor() as u32);
    }
    writer.sync().map_err(write_err)?;
    let secs = start.elapsed().as_secs_f64().max(opts.interval.as_secs_f64());
    eprintln!(
        "ioscope: {} samples, {} bytes ({:.1} KB/min) in {}",
        writer.frames(),
        writer.bytes(),
        writer.bytes() as f64 / 1000.0 / secs * 60.0,
        opts.output.display()
    );
    Ok(())
}

/// Sleeps until `deadline`; false when a stop signal came first.
fn wait_until(deadline: Instant) -> bool {
    loop {
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
