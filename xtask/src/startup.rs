//! `cargo xtask startup`: how long ioscope takes to be live and how much memory it peaks at.
//!
//! Builds the release binary and runs, alternating with its `--no-bpf` floor (procfs only, no eBPF
//! to load), `ioscope --once --json --interval 0.1`: the wall time to the end, the time to the
//! report's first byte, the CPU time and the peak RSS (getrusage of the child: ru_maxrss is the
//! process's VmHWM). "Live" is the time to the first byte less the interval: exec, every program
//! loaded and attached, the first sample, and one more sample and the JSON rendering on top (an
//! upper bound of exec → eBPF live). Then the peak RSS of `--batch --json` (5 reports at 0.2 s)
//! and of `record` (2 s at 0.2 s). The TUI's memory is `cargo xtask perf`'s.
//!
//! Other work on the machine inflates the times (the kernel's verifier runs on the CPU ioscope
//! asks it to): the load average is printed, and the floor shows what the machine's state costs.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;

use crate::stats::median;

const LIVE_TARGET: Duration = Duration::from_millis(300);
const ONCE_WALL_TARGET: Duration = Duration::from_millis(600);
const RSS_TARGET_BYTES: u64 = 30_000_000;
const INTERVAL: &str = "0.1";

#[derive(Debug, Parser)]
#[command(name = "cargo xtask startup", about = "Measure ioscope's start-up time and peak memory")]
struct StartupArgs {
    /// Runs of each kind (medians are reported).
    #[arg(long, default_value_t = 7)]
    runs: usize,
}

/// One run of a child: what getrusage and the clock say.
#[derive(Clone, Copy, Debug)]
struct Run {
    wall: Duration,
    first_byte: Option<Duration>,
    cpu: Duration,
    max_rss_bytes: u64,
}

pub fn run(args: &[String]) -> Result<()> {
    let args =
        StartupArgs::try_parse_from(std::iter::once("startup".to_string()).chain(args.iter().cloned()))?;
    // Measured as users run it: the kernel's per-program timing off (crate::bpf_stats).
    let _bpf_stats = crate::bpf_stats::BpfStats::off();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("xtask has no parent directory")?;
    let bin = crate::perf::build_release(root)?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "ioscope startup: {} runs each, alternating with --no-bpf; load average {}",
        args.runs,
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );

    let once = |extra: &[&str]| -> Result<Run> {
        let mut a = vec!["--once", "--json", "--interval", INTERVAL];
        a.extend_from_slice(extra);
        measure(&bin, &a)
    };
    let (mut bpf, mut floor) = (Vec::new(), Vec::new());
    for _ in 0..args.runs {
        floor.push(once(&["--no-bpf"])?);
        bpf.push(once(&[])?);
    }
    let interval = Duration::from_secs_f64(INTERVAL.parse()?);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let summary = |runs: &[Run]| {
        let med = |f: &dyn Fn(&Run) -> f64| median(&mut runs.iter().map(f).collect::<Vec<_>>());
        (
            med(&|r| r.first_byte.map_or(f64::NAN, |t| ms(t.saturating_sub(interval)))),
            med(&|r| ms(r.wall)),
            med(&|r| ms(r.cpu)),
            runs.iter().map(|r| r.max_rss_bytes).max().unwrap_or(0),
        )
    };
    let (live, wall, cpu, rss) = summary(&bpf);
    let (f_live, f_wall, f_cpu, f_rss) = summary(&floor);
    println!("  --once --json --interval {INTERVAL}      live ms  wall ms  CPU ms  peak RSS MB");
    println!("  eBPF on (median)                 {live:8.0} {wall:8.0} {cpu:7.0} {:12.1}", rss as f64 / 1e6);
    println!(
        "  --no-bpf floor (median)          {f_live:8.0} {f_wall:8.0} {f_cpu:7.0} {:12.1}",
        f_rss as f64 / 1e6
    );

    let batch = measure(&bin, &["--batch", "--json", "--interval", "0.2", "-n", "5"])?;
    let recording = std::env::temp_dir().join(format!("ioscope-startup-{}.rec", std::process::id()));
    let record = measure(
        &bin,
        &[
            "record",
            "--output",
            recording.to_str().context("temp path")?,
            "--interval",
            "0.2",
            "--duration",
            "2",
        ],
    );
    let _ = std::fs::remove_file(&recording);
    let record = record?;
    println!("  --batch --json (5 at 0.2 s) peak RSS {:.1} MB", batch.max_rss_bytes as f64 / 1e6);
    println!("  record (2 s at 0.2 s) peak RSS      {:.1} MB", record.max_rss_bytes as f64 / 1e6);

    let mut misses = Vec::new();
    let mut check = |what: &str, ok: bool| {
        println!("  {what}: {}", if ok { "PASS" } else { "FAIL" });
        if !ok {
            misses.push(what.to_string());
        }
    };
    check(
        &format!("live (exec to first sample) under {} ms", LIVE_TARGET.as_millis()),
        live < ms(LIVE_TARGET),
    );
    check(&format!("--once wall under {} ms", ONCE_WALL_TARGET.as_millis()), wall < ms(ONCE_WALL_TARGET));
    for (what, bytes) in [("--once", rss), ("--batch", batch.max_rss_bytes), ("record", record.max_rss_bytes)]
    {
        check(
            &format!("{what} peak RSS under {} MB", RSS_TARGET_BYTES / 1_000_000),
            bytes < RSS_TARGET_BYTES,
        );
    }
    if !misses.is_empty() {
        bail!("missed: {}", misses.join("; "));
    }
    Ok(())
}

/// Runs `bin args` to the end with its output read (and dropped): its times and peak RSS.
fn measure(bin: &PathBuf, args: &[&str]) -> Result<Run> {
    let start = Instant::now();
    let mut child = Command::new(bin)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let mut out = child.stdout.take().context("no stdout")?;
    let mut byte = [0u8; 1];
    let first_byte = match out.read(&mut byte)? {
        0 => None,
        _ => Some(start.elapsed()),
    };
    std::io::copy(&mut out, &mut std::io::sink())?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers; the child is ours and not yet reaped (std's Child is dropped
    // without a wait, which is harmless once reaped here).
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    if reaped != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("{} {args:?} failed (status {status})", bin.display());
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Ok(Run {
        wall,
        first_byte,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        max_rss_bytes: usage.ru_maxrss as u64 * 1024,
    })
}
