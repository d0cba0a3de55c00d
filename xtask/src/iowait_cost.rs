//! `cargo xtask iowait-cost`: what the I/O-wait probes (`sched_switch`, `sched_wakeup`) cost the
//! context switch, against the floor.
//!
//! Two threads pass a byte back and forth over two pipes: each read blocks, so every round trip is
//! two wake-ups and at least two context switches, the case these programs are hottest in (none
//! of these sleeps is an I/O wait: the programs' fast path). Round trips per second, for a few
//! seconds at a time, without programs, with an empty program on each of the two raw tracepoints
//! (`crate::empty_program`: the kernel's own cost of running any program there), and with
//! `ioscope --batch` running, in an order that turns from round to round; the medians are
//! compared. The target (xtask/README.md): ioscope at least 97 % of the empty programs' rate.
//!
//! On a shared machine the rate follows the other load more than the programs, so each round also
//! counts the two threads' own CPU time (`RUSAGE_THREAD`: user and system, the programs included,
//! since `sched_switch` runs in the task leaving the CPU and `sched_wakeup` in the waker, here the
//! other thread) per round trip, which other tasks' load barely moves, and ioscope's own CPU time
//! meanwhile (its process, its sampling: a cost on a 2-CPU machine the programs do not have).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;

use crate::empty_program::EmptyProgram;
use crate::stats;
use crate::watcher::Ioscope;

const TARGET_RATIO: f64 = 0.97;
const EVENTS: [&str; 2] = ["sched_switch", "sched_wakeup"];

#[derive(Debug, Parser)]
#[command(name = "cargo xtask iowait-cost", about = "Context switches per second with and without ioscope")]
struct Args {
    /// Seconds per run.
    #[arg(long, default_value_t = 3)]
    seconds: u64,
    /// Runs on each side.
    #[arg(long, default_value_t = 7)]
    rounds: usize,
    /// The ioscope binary to run (default: a release build of this tree).
    #[arg(long)]
    bin: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug)]
enum Side {
    Without,
    EmptyPrograms,
    Ioscope,
}

/// CPU time (user + system) of the calling thread, in ns.
fn thread_cpu_ns() -> u64 {
    // SAFETY: an all-zero rusage is valid; getrusage writes into it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` outlives the call.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    ns(ru.ru_utime) + ns(ru.ru_stime)
}

/// CPU time of process `pid` so far (utime + stime, /proc/PID/stat fields 14 and 15), in ns.
fn process_cpu_ns(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rfind(')').map_or("", |i| &stat[i + 1..]);
    let ticks: u64 = rest.split_whitespace().skip(11).take(2).filter_map(|f| f.parse::<u64>().ok()).sum();
    // SAFETY: no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    ticks * 1_000_000_000 / hz
}

/// One run of the ping-pong.
#[derive(Clone, Copy, Debug)]
struct Round {
    /// Round trips per second.
    rate: f64,
    /// The two threads' CPU time per round trip, in ns.
    cpu_ns_per_trip: f64,
}

/// A two-thread pipe ping-pong over `secs`.
fn ping_pong(secs: u64) -> Result<Round> {
    let (mut a_read, mut b_write) = std::io::pipe()?;
    let (mut b_read, mut a_write) = std::io::pipe()?;
    let echo = std::thread::spawn(move || {
        let cpu = thread_cpu_ns();
        let mut byte = [0u8; 1];
        while a_read.read_exact(&mut byte).is_ok() {
            if byte[0] == 0 || a_write.write_all(&byte).is_err() {
                break;
            }
        }
        thread_cpu_ns() - cpu
    });
    let cpu = thread_cpu_ns();
    let mut byte = [1u8; 1];
    let (start, end) = (Instant::now(), Duration::from_secs(secs));
    let mut trips = 0u64;
    while start.elapsed() < end {
        for _ in 0..1000 {
            b_write.write_all(&[1])?;
            b_read.read_exact(&mut byte)?;
        }
        trips += 1000;
    }
    let rate = trips as f64 / start.elapsed().as_secs_f64();
    let mine = thread_cpu_ns() - cpu;
    b_write.write_all(&[0])?;
    let theirs = echo.join().unwrap_or(0);
    Ok(Round { rate, cpu_ns_per_trip: (mine + theirs) as f64 / trips as f64 })
}

pub fn run(args: &[String]) -> Result<()> {
    let args = Args::try_parse_from(std::iter::once("iowait-cost".to_string()).chain(args.iter().cloned()))?;
    // Measured as users run it: the kernel's per-program timing off (crate::bpf_stats).
    let _bpf_stats = crate::bpf_stats::BpfStats::off();
    let bin = match &args.bin {
        Some(b) => b.clone(),
        None => {
            let root =
                Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("xtask has no parent directory")?;
            crate::perf::build_release(root)?
        }
    };
    println!(
        "iowait-cost: pipe ping-pong of two threads, {} s × {} rounds per side",
        args.seconds, args.rounds
    );
    // ioscope's own CPU time over its rounds, and their wall time.
    let (mut ioscope_cpu_ns, mut ioscope_wall_ns) = (0u64, 0u64);
    let mut run = |side: Side| -> Result<Round> {
        match side {
            Side::Without => ping_pong(args.seconds),
            Side::EmptyPrograms => {
                let _programs = EVENTS.iter().map(|e| EmptyProgram::attach(e)).collect::<Result<Vec<_>>>()?;
                ping_pong(args.seconds)
            }
            Side::Ioscope => {
                let ioscope = Ioscope::start(&bin)?;
                let (cpu, t) = (process_cpu_ns(ioscope.pid()), Instant::now());
                let r = ping_pong(args.seconds)?;
                ioscope_cpu_ns += process_cpu_ns(ioscope.pid()).saturating_sub(cpu);
                ioscope_wall_ns += t.elapsed().as_nanos() as u64;
                Ok(r)
            }
        }
    };
    let sides = [Side::Without, Side::EmptyPrograms, Side::Ioscope];
    let (mut without, mut floor, mut with) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..args.rounds {
        for i in 0..sides.len() {
            let side = sides[(round + i) % sides.len()];
            let r = run(side)?;
            println!(
                "  round {}: {side:?} {:.0} round trips/s, {:.0} ns CPU per round trip",
                round + 1,
                r.rate,
                r.cpu_ns_per_trip
            );
            match side {
                Side::Without => without.push(r),
                Side::EmptyPrograms => floor.push(r),
                Side::Ioscope => with.push(r),
            }
        }
    }
    let rates = |v: &[Round]| v.iter().map(|r| r.rate).collect::<Vec<_>>();
    let cpus = |v: &[Round]| v.iter().map(|r| r.cpu_ns_per_trip).collect::<Vec<_>>();
    let ratios: Vec<f64> = with.iter().zip(&floor).map(|(w, f)| w.rate / f.rate).collect();
    let (lo, hi) = stats::median_interval(&ratios);
    let estimate = stats::median(&mut ratios.clone());
    let verdict = stats::at_least(TARGET_RATIO, (lo, hi));
    println!(
        "median round trips/s: without {:.0}, empty programs {:.0}, ioscope {:.0}",
        stats::median(&mut rates(&without)),
        stats::median(&mut rates(&floor)),
        stats::median(&mut rates(&with))
    );
    println!(
        "ioscope / empty programs: {:.1} % (95 % interval {:.1}–{:.1} %), target ≥ {:.0} %: {}",
        100.0 * estimate,
        100.0 * lo,
        100.0 * hi,
        100.0 * TARGET_RATIO,
        verdict.describe(estimate >= TARGET_RATIO)
    );
    // The CPU-bound rate: the floor's CPU time per round trip over ioscope's, round by round.
    let cpu_ratios: Vec<f64> =
        with.iter().zip(&floor).map(|(w, f)| f.cpu_ns_per_trip / w.cpu_ns_per_trip).collect();
    let (clo, chi) = stats::median_interval(&cpu_ratios);
    let cpu_estimate = stats::median(&mut cpu_ratios.clone());
    println!(
        "median CPU ns per round trip: without {:.0}, empty programs {:.0}, ioscope {:.0}",
        stats::median(&mut cpus(&without)),
        stats::median(&mut cpus(&floor)),
        stats::median(&mut cpus(&with))
    );
    println!(
        "empty programs' CPU per round trip / ioscope's: {:.1} % (95 % interval {:.1}–{:.1} %), target ≥ {:.0} %: {}",
        100.0 * cpu_estimate,
        100.0 * clo,
        100.0 * chi,
        100.0 * TARGET_RATIO,
        stats::at_least(TARGET_RATIO, (clo, chi)).describe(cpu_estimate >= TARGET_RATIO)
    );
    if ioscope_wall_ns > 0 {
        println!(
            "ioscope's own CPU while it ran: {:.1} % of one CPU",
            100.0 * ioscope_cpu_ns as f64 / ioscope_wall_ns as f64
        );
    }
    Ok(())
}
