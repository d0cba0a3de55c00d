//! ioscope bench agrees with fio: the same four jobs on the same file of an ext4 on a loop device
//! (direct I/O to an image on the real disk), each run by both tools back to back in alternating
//! order. The median over the rounds of the per-round ratio ioscope/fio must be within 15 % for
//! MB/s and IOPS, and within 20 % for the p50 latency of the jobs that make enough requests; the
//! QD32 job, where fio's CPU is the limit, by ioscope's floor, the device's reads (its
//! /proc/diskstats, one per request) and Little's law. The harness, its method and tolerances are
//! the one `cargo xtask bench-fio` uses: xtask/src/fio_agree.rs.
//!
//! Noise: a round runs the two tools within a second of each other, so load from other work
//! shifts both runs of a round alike and the median of the ratios ignores the odd round it did
//! not. When a job misses the tolerance after the first rounds, it gets more rounds and the median
//! over all of them is judged. Needs root and fio; skips otherwise unless IOSCOPE_REQUIRE_BPF=1.

use crate::common;
use crate::fio_agree::{self, median, DeviceIo, Engine, Figures, Tools};

use std::path::Path;
use std::process::Command;
use std::time::Instant;

const ROUNDS: usize = 7;
/// Rounds added to a job that missed the tolerance after [`ROUNDS`].
const EXTRA_ROUNDS: usize = 6;
const SIZE: &str = "512m";

#[test]
fn bench_agrees_with_fio_on_the_same_jobs() {
    let _group = common::live_group(module_path!());
    let test = "bench_agrees_with_fio_on_the_same_jobs";
    if !common::require_root(test) {
        return;
    }
    if Command::new("fio").arg("--version").output().is_err() {
        common::skip(test, "fio is not installed");
        return;
    }
    let started = Instant::now();
    let lo = common::LoopDevice::ext4_direct_io_in(Path::new("/var/tmp"), 700);
    assert!(lo.direct_io(), "the loop device should do direct I/O to its image");
    let file = lo.mount_point().join("agree.dat");
    fio_agree::lay_out(&file, SIZE).unwrap();
    let engine = Engine::detect(&file);
    eprintln!("engine: {}", engine.describe());
    // Both tools' default buffers, in ordinary pages, as users run them.
    let mem = "malloc";
    eprintln!("fio buffers: --mem={mem}");
    let device_io = || DeviceIo::from_fields(&lo.diskstats());
    let tools = Tools {
        file: &file,
        size: SIZE,
        ioscope: Path::new(env!("CARGO_BIN_EXE_ioscope")),
        engine,
        mem,
        device_io: Some(&device_io),
        judge_device_reads: true,
    };
    let mut failures = Vec::new();
    // 1 s for the sequential reads: at ~1 ms a request, 500 ms made one device stall of a few ms
    // a visible share.
    for job in &fio_agree::jobs("1s", "500ms", "60") {
        let o = tools.agree(job, ROUNDS, EXTRA_ROUNDS).unwrap();
        if let Some(first) = o.first_rounds {
            eprintln!("{}: {first:.3?} after {ROUNDS} rounds; {EXTRA_ROUNDS} more", job.name);
        }
        for (a, b) in o.fio.iter().zip(&o.ioscope) {
            let kib = |x: &Figures| x.device_kib_per_req.unwrap_or(f64::NAN);
            eprintln!(
                "  fio {:7.1} MB/s {:7.0} IOPS p50 {:7.1} µs {:5.0} KiB/device request | ioscope {:7.1} MB/s {:7.0} IOPS p50 {:7.1} µs {:5.0} KiB",
                a.mb_s,
                a.iops,
                a.p50_us,
                kib(a),
                b.mb_s,
                b.iops,
                b.p50_us,
                kib(b)
            );
        }
        let cpu = |v: &[Figures]| median(v.iter().map(|x| x.cpu_us_per_req).collect());
        eprintln!(
            "{}: CPU per request (median): fio {:.1} µs, ioscope {:.1} µs",
            job.name,
            cpu(&o.fio),
            cpu(&o.ioscope)
        );
        let r = o.ratios;
        eprintln!(
            "{}: median ioscope/fio over {} rounds: MB/s {:.3} IOPS {:.3} p50 {:.3} p99 {:.3}",
            job.name,
            o.fio.len(),
            r[0],
            r[1],
            r[2],
            r[3]
        );
        failures.extend(o.misses);
    }
    eprintln!("agreement test took {:.0} s", started.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "ioscope bench disagrees with fio:\n{}", failures.join("\n"));
}
