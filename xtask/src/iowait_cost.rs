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

/// Round trips per second of a two-thread pipe ping-pong over `secs`.
fn ping_pong(secs: u64) -> Result<f64> {
    let (mut a_read, mut b_write) = std::io::pipe()?;
    let (mut b_read, mut a_write) = std::io::pipe()?;
    let echo = std::thread::spawn(move || {
        let mut byte = [0u8; 1];
        while a_read.read_exact(&mut byte).is_ok() {
            if byte[0] == 0 || a_write.write_all(&byte).is_err() {
                break;
            }
        }
    });
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
    b_write.write_all(&[0])?;
    let _ = echo.join();
    Ok(rate)
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
    let run = |side: Side| -> Result<f64> {
        match side {
            Side::Without => ping_pong(args.seconds),
            Side::EmptyPrograms => {
                let _programs = EVENTS.iter().map(|e| EmptyProgram::attach(e)).collect::<Result<Vec<_>>>()?;
                ping_pong(args.seconds)
            }
            Side::Ioscope => {
                let _ioscope = Ioscope::start(&bin)?;
                ping_pong(args.seconds)
            }
        }
    };
    let sides = [Side::Without, Side::EmptyPrograms, Side::Ioscope];
    let (mut without, mut floor, mut with) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..args.rounds {
        for i in 0..sides.len() {
            let side = sides[(round + i) % sides.len()];
            let r = run(side)?;
            println!("  round {}: {side:?} {r:.0} round trips/s", round + 1);
            match side {
                Side::Without => without.push(r),
                Side::EmptyPrograms => floor.push(r),
                Side::Ioscope => with.push(r),
            }
        }
    }
    let ratios: Vec<f64> = with.iter().zip(&floor).map(|(w, f)| w / f).collect();
    let (lo, hi) = stats::median_interval(&ratios);
    let estimate = stats::median(&mut ratios.clone());
    let verdict = stats::at_least(TARGET_RATIO, (lo, hi));
    println!(
        "median round trips/s: without {:.0}, empty programs {:.0}, ioscope {:.0}",
        stats::median(&mut without),
        stats::median(&mut floor),
        stats::median(&mut with)
    );
    println!(
        "ioscope / empty programs: {:.1} % (95 % interval {:.1}–{:.1} %), target ≥ {:.0} %: {}",
        100.0 * estimate,
        100.0 * lo,
        100.0 * hi,
        100.0 * TARGET_RATIO,
        verdict.describe(estimate >= TARGET_RATIO)
    );
    Ok(())
}
