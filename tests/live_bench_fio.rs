//! ioscope bench agrees with fio: the same four jobs on the same file of an ext4 on a loop device
//! (direct I/O to an image on the real disk), each run by both tools back to back in alternating
//! order. The median over the rounds of the per-round ratio ioscope/fio must be within 15 % for
//! MB/s and IOPS, and within 20 % for the p50 latency of the jobs that make enough requests.
//!
//! Both tools run the same way: io_uring with QD requests in flight (fio `ioengine=io_uring
//! iodepth=QD`), or where io_uring is unavailable QD threads doing pread/pwrite (fio `psync
//! numjobs=QD`); I/O buffers as each tool has them by default, in ordinary pages (fio's
//! `--mem=malloc`, ioscope's: src/bench/buffers.rs); latency from submission to completion (fio's `lat`, so `--lat_percentiles=1`); the write job's time includes its final
//! fsync (fio `end_fsync=1`: fio counts it in the job's runtime too).
//!
//! Where the CPU, not the device, is the limit, the tools part: 4 KiB direct random reads at QD32
//! on this 2-vCPU VM run ~90–120k IOPS through a loop device, and a bpftrace profile of both tools
//! on that job found fio's threads with 3.4× ioscope's user-space CPU for the same number of
//! requests (1,126 against 335 samples at 2,999 Hz, 35,389 and 38,003 requests: fio's per-request
//! bookkeeping), so fio completed 20–25 % fewer requests in clean-clone CI runs, every round. fio
//! is not tuned to hide that. That job is judged instead by what must hold whichever tool is the
//! faster one: ioscope reaches at least fio's throughput less the tolerance (a bench that keeps
//! fewer requests in flight than asked falls below it), each request is one read the device
//! completed (its /proc/diskstats, within 2 %), and Little's law ties its figures together: mean
//! latency × IOPS = the 32 requests in flight, within 10 %. Both tools' CPU per request is
//! printed beside the ratios.
//!
//! Noise: a round runs the two tools within a second of each other, so load from other work
//! shifts both runs of a round alike and the median of the ratios ignores the odd round it did
//! not. When a job misses the tolerance after the first rounds, it gets more rounds and the median
//! over all of them is judged: passing needs agreement most of the time, so a tool that is really
//! 20 % off still fails. Needs root and fio; skips otherwise unless IOSCOPE_REQUIRE_BPF=1.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

const ROUNDS: usize = 7;
/// Rounds added to a job that missed the tolerance after [`ROUNDS`].
const EXTRA_ROUNDS: usize = 6;
const THROUGHPUT_TOLERANCE: f64 = 0.15;
const LATENCY_TOLERANCE: f64 = 0.20;
const SIZE: &str = "512m";

struct Job {
    name: &'static str,
    /// ioscope bench flags (besides the file, --json, --size and --engine).
    ioscope: Vec<String>,
    /// fio flags (besides the common ones and the engine).
    fio: Vec<String>,
    qd: u32,
    /// fio's side of its JSON: "read" or "write".
    dir: &'static str,
    check_p50: bool,
    /// Judged by fio's figures both ways (true), or by the floor, the device and Little's law
    /// where the CPU limits fio (false, see the module's comment).
    fio_both_ways: bool,
}

#[derive(Debug, Clone, Copy)]
struct Figures {
    mb_s: f64,
    iops: f64,
    p50_us: f64,
    p99_us: f64,
    mean_us: f64,
    /// CPU time per request (µs): the tool's own user + system time.
    cpu_us_per_req: f64,
    /// ioscope only: requests made, and reads the device completed during the run.
    requests: u64,
    device_reads: u64,
}

#[derive(Clone, Copy, PartialEq)]
enum Engine {
    IoUring,
    Threads,
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Every run starts from the same state: what the previous run left dirty on the test filesystem
/// is flushed (syncfs, not a machine-wide sync that would wait for other work's write-back), and
/// before a read the file's cached pages are dropped. Both tools drop them too (fio's
/// `invalidate=1`, ioscope's `--cache cold`), but fio does it after its clock started: after a
/// buffered write left 512 MiB cached, that alone added 20–100 ms to fio's write job.
///
/// The write job overwrites the file's cached (clean) pages instead (fio `--invalidate=0`, ioscope
/// `--cache warm`): on a VM whose freed memory goes back to the host (virtio-balloon free page
/// reporting), writing into freshly allocated pages the host must fault in again ran 2–4× slower,
/// in some runs and not others, whichever tool it was (see cargo xtask bench-fio's `settle`).
fn settle(file: &Path, job: &Job) {
    use std::os::fd::AsRawFd;
    common::run("sync", &["-f", file.to_str().unwrap()]);
    if job.dir == "write" {
        return;
    }
    let f = std::fs::File::open(file).unwrap();
    // SAFETY: a plain syscall on an open descriptor.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0, "posix_fadvise(DONTNEED) on the test file");
}

fn fio(file: &Path, job: &Job, engine: Engine, mem: &str) -> Figures {
    settle(file, job);
    let engine_args = match engine {
        Engine::IoUring => vec!["--ioengine=io_uring".to_string(), format!("--iodepth={}", job.qd)],
        Engine::Threads => {
            vec!["--ioengine=psync".to_string(), format!("--numjobs={}", job.qd), "--group_reporting".into()]
        }
    };
    let out = Command::new("fio")
        .args(["--name=agree", &format!("--filename={}", file.display()), "--output-format=json"])
        .args([&format!("--size={SIZE}"), "--thread", "--disk_util=0", "--lat_percentiles=1"])
        .arg(format!("--mem={mem}"))
        .args(&engine_args)
        .args(&job.fio)
        .output()
        .expect("run fio");
    assert!(out.status.success(), "fio failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("fio json");
    let side = &v["jobs"][0][job.dir];
    let pct = |p: &str| side["lat_ns"]["percentile"][p].as_f64().unwrap_or(0.0) / 1000.0;
    let ios = side["total_ios"].as_f64().unwrap_or(0.0).max(1.0);
    let runtime_s = side["runtime"].as_f64().unwrap_or(0.0) / 1000.0;
    let cpu_pct =
        v["jobs"][0]["usr_cpu"].as_f64().unwrap_or(0.0) + v["jobs"][0]["sys_cpu"].as_f64().unwrap_or(0.0);
    Figures {
        mb_s: side["bw_bytes"].as_f64().unwrap() / 1e6,
        iops: side["iops"].as_f64().unwrap(),
        p50_us: pct("50.000000"),
        p99_us: pct("99.000000"),
        mean_us: side["lat_ns"]["mean"].as_f64().unwrap_or(0.0) / 1000.0,
        cpu_us_per_req: cpu_pct / 100.0 * runtime_s * 1e6 / ios,
        requests: 0,
        device_reads: 0,
    }
}

fn ioscope(file: &Path, job: &Job, engine: Engine, device: &common::LoopDevice) -> Figures {
    settle(file, job);
    let before = device.diskstats();
    let engine_name = match engine {
        Engine::IoUring => "io_uring",
        Engine::Threads => "threads",
    };
    let out = Command::new(env!("CARGO_BIN_EXE_ioscope"))
        .args(["bench", file.to_str().unwrap(), "--json", "--size", SIZE, "--engine", engine_name])
        .args(&job.ioscope)
        .output()
        .expect("run ioscope bench");
    let after = device.diskstats();
    assert!(out.status.success(), "ioscope bench failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("bench json");
    let j = &v["jobs"][0];
    assert!(j["skipped"].is_null(), "job skipped: {j}");
    assert_eq!(j["engine"], engine_name, "the engine is in the job's result");
    assert_eq!(v["settings"]["engine"], engine_name, "and in the settings");
    let requests = j["ops"].as_u64().unwrap();
    Figures {
        mb_s: j["mb_s"].as_f64().unwrap(),
        iops: j["iops"].as_f64().unwrap(),
        p50_us: j["lat_p50_us"].as_f64().unwrap(),
        p99_us: j["lat_p99_us"].as_f64().unwrap(),
        mean_us: j["lat_mean_us"].as_f64().unwrap(),
        cpu_us_per_req: j["cpu_pct"].as_f64().unwrap() / 100.0 * j["runtime_s"].as_f64().unwrap() * 1e6
            / (requests.max(1) as f64),
        requests,
        device_reads: after[0] - before[0],
    }
}

/// Runs `rounds` more rounds of `job`, alternating which tool goes first.
fn rounds(
    file: &Path,
    device: &common::LoopDevice,
    job: &Job,
    (engine, mem): (Engine, &str),
    rounds: usize,
    f: &mut Vec<Figures>,
    i: &mut Vec<Figures>,
) {
    for _ in 0..rounds {
        if f.len().is_multiple_of(2) {
            f.push(fio(file, job, engine, mem));
            i.push(ioscope(file, job, engine, device));
        } else {
            i.push(ioscope(file, job, engine, device));
            f.push(fio(file, job, engine, mem));
        }
    }
}

/// The median per-round ratios ioscope/fio: (MB/s, IOPS, p50, p99).
fn ratios(f: &[Figures], i: &[Figures]) -> [f64; 4] {
    let r = |g: fn(&Figures) -> f64| median(f.iter().zip(i).map(|(a, b)| g(b) / g(a)).collect());
    [r(|x| x.mb_s), r(|x| x.iops), r(|x| x.p50_us), r(|x| x.p99_us)]
}

fn misses(job: &Job, r: &[f64; 4], i: &[Figures]) -> Vec<String> {
    let mut out = Vec::new();
    let too_slow = r[0] < 1.0 - THROUGHPUT_TOLERANCE || r[1] < 1.0 - THROUGHPUT_TOLERANCE;
    let too_fast = r[0] > 1.0 + THROUGHPUT_TOLERANCE || r[1] > 1.0 + THROUGHPUT_TOLERANCE;
    if too_slow || (job.fio_both_ways && too_fast) {
        out.push(format!("{}: ioscope/fio MB/s {:.3}, IOPS {:.3}", job.name, r[0], r[1]));
    }
    let p50_off = if job.fio_both_ways { (r[2] - 1.0).abs() } else { r[2] - 1.0 };
    if job.check_p50 && p50_off > LATENCY_TOLERANCE {
        out.push(format!("{}: ioscope/fio p50 latency {:.3}", job.name, r[2]));
    }
    if !job.fio_both_ways {
        // Each request one device read; mean latency × IOPS = the requests kept in flight.
        let reads = median(i.iter().map(|x| x.device_reads as f64 / x.requests.max(1) as f64).collect());
        if (reads - 1.0).abs() > 0.02 {
            out.push(format!("{}: device reads per ioscope request {reads:.3}", job.name));
        }
        let in_flight = median(i.iter().map(|x| x.mean_us * x.iops / 1e6).collect());
        if (in_flight / job.qd as f64 - 1.0).abs() > 0.10 {
            out.push(format!("{}: mean latency × IOPS = {in_flight:.1} in flight, not {}", job.name, job.qd));
        }
    }
    out
}

fn jobs() -> Vec<Job> {
    vec![
        Job {
            name: "sequential 1 MiB direct reads",
            // 1 s: at ~1 ms a request, 500 ms made one device stall of a few ms a visible share.
            ioscope: words("--rw read --bs 1m --modes direct --qd 1 --runtime 1s --time-based"),
            fio: words("--rw=read --bs=1m --direct=1 --runtime=1s --time_based"),
            qd: 1,
            dir: "read",
            check_p50: true,
            fio_both_ways: true,
        },
        Job {
            name: "4 KiB direct random reads, QD1",
            ioscope: words("--rw randread --bs 4k --modes direct --qd 1 --runtime 500ms"),
            fio: words("--rw=randread --bs=4k --direct=1 --runtime=500ms"),
            qd: 1,
            dir: "read",
            check_p50: true,
            fio_both_ways: true,
        },
        Job {
            name: "4 KiB direct random reads, QD32",
            ioscope: words("--rw randread --bs 4k --modes direct --qd 32 --runtime 500ms"),
            fio: words("--rw=randread --bs=4k --direct=1 --runtime=500ms"),
            qd: 32,
            dir: "read",
            check_p50: true,
            // fio's CPU per request limits it here (see the module's comment).
            fio_both_ways: false,
        },
        Job {
            name: "1 MiB buffered sequential writes, fsync at end",
            ioscope: words(
                "--write --rw write --bs 1m --modes buffered --qd 1 --fsync end --cache warm --runtime 60",
            ),
            fio: words("--rw=write --bs=1m --direct=0 --end_fsync=1 --invalidate=0"),
            qd: 1,
            dir: "write",
            // Each write is a copy into the page cache; the p50 is printed, the fsync is the job.
            check_p50: false,
            fio_both_ways: true,
        },
    ]
}

#[test]
fn bench_agrees_with_fio_on_the_same_jobs() {
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
    // fio lays the file out (written in full and synced), both tools then overwrite or read it.
    common::run(
        "fio",
        &[
            "--name=layout",
            &format!("--filename={}", file.display()),
            &format!("--size={SIZE}"),
            "--rw=write",
            "--bs=1m",
            "--end_fsync=1",
        ],
    );
    let engine = if io_uring_works(&file) { Engine::IoUring } else { Engine::Threads };
    eprintln!(
        "engine: {}",
        if engine == Engine::IoUring {
            "io_uring (both tools)"
        } else {
            "threads / fio psync (no io_uring here)"
        }
    );
    // Both tools' default buffers, in ordinary pages, as users run them: a 1 MiB direct read may
    // need more segments than the device takes per request and reach it split, for both alike
    // (src/bench/buffers.rs; `ioscope bench --huge-pages` and fio's --mem=mmaphuge avoid it).
    let mem = "malloc";
    eprintln!("fio buffers: --mem={mem}");
    let mut failures = Vec::new();
    for job in &jobs() {
        // One unmeasured run of each first: the first run of a job after another job is slower.
        let (mut f, mut i) = (Vec::new(), Vec::new());
        rounds(&file, &lo, job, (engine, mem), 1, &mut f, &mut i);
        let (mut f, mut i) = (Vec::new(), Vec::new());
        rounds(&file, &lo, job, (engine, mem), ROUNDS, &mut f, &mut i);
        let mut r = ratios(&f, &i);
        if !misses(job, &r, &i).is_empty() {
            eprintln!("{}: {:.3?} after {ROUNDS} rounds; {EXTRA_ROUNDS} more", job.name, r);
            rounds(&file, &lo, job, (engine, mem), EXTRA_ROUNDS, &mut f, &mut i);
            r = ratios(&f, &i);
        }
        for (a, b) in f.iter().zip(&i) {
            eprintln!(
                "  fio {:7.1} MB/s {:7.0} IOPS p50 {:7.1} µs | ioscope {:7.1} MB/s {:7.0} IOPS p50 {:7.1} µs",
                a.mb_s, a.iops, a.p50_us, b.mb_s, b.iops, b.p50_us
            );
        }
        let cpu = |v: &[Figures]| median(v.iter().map(|x| x.cpu_us_per_req).collect());
        eprintln!("{}: CPU per request (median): fio {:.1} µs, ioscope {:.1} µs", job.name, cpu(&f), cpu(&i));
        eprintln!(
            "{}: median ioscope/fio over {} rounds: MB/s {:.3} IOPS {:.3} p50 {:.3} p99 {:.3}",
            job.name,
            f.len(),
            r[0],
            r[1],
            r[2],
            r[3]
        );
        failures.extend(misses(job, &r, &i));
    }
    eprintln!("agreement test took {:.0} s", started.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "ioscope bench disagrees with fio:\n{}", failures.join("\n"));
}

/// Whether io_uring works here (fio's engine doubles as the probe).
fn io_uring_works(file: &Path) -> bool {
    Command::new("fio")
        .args([
            "--name=probe",
            &format!("--filename={}", file.display()),
            "--ioengine=io_uring",
            "--rw=read",
            "--bs=4k",
            "--size=4k",
            "--direct=1",
        ])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}
