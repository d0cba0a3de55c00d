//! The fio agreement harness: the four jobs, how each tool runs them, the tolerances and the
//! verdict, written once for `cargo xtask bench-fio` (xtask/src/bench_fio.rs: a real disk, the
//! release build) and the live test tests/live/live_bench_fio.rs (a loop device, the test build,
//! CI), through xtask's library (src/lib.rs).
//!
//! Like for like: the same file and region (one file fio laid out); io_uring with QD requests in
//! flight (fio `ioengine=io_uring iodepth=QD`), or where io_uring is unavailable QD threads doing
//! pread/pwrite (fio `psync numjobs=QD`); each tool's default I/O buffers, in ordinary pages (fio's
//! `--mem=malloc`, ioscope's: src/bench/buffers.rs; `ioscope bench --huge-pages` and fio's
//! `--mem=mmaphuge` avoid the split of a 1 MiB direct read into more segments than the device
//! takes); latency from submission to completion (fio's `lat`, so `--lat_percentiles=1`); the write
//! job's time includes its final fsync (fio `end_fsync=1`: fio counts it in the job's runtime too).
//! Every run starts from the same state (see [`Tools::settle`]); a round runs both tools back to
//! back, alternating which goes first, and the median over the rounds of the per-round ratio
//! ioscope/fio is judged.
//!
//! Where the CPU, not the device, is the limit, the tools part: 4 KiB direct random reads at QD32
//! on a 2-vCPU VM run ~90–120k IOPS through a loop device, and a bpftrace profile of both tools on
//! that job found fio's threads with 3.4× ioscope's user-space CPU for the same number of requests
//! (fio's per-request bookkeeping), so fio completed 20–25 % fewer requests in clean-clone CI runs,
//! every round. fio is not tuned to hide that. That job ([`Job::fio_both_ways`] false) is judged
//! instead by what must hold whichever tool is the faster one: ioscope reaches at least fio's
//! throughput less the tolerance (a bench that keeps fewer requests in flight than asked falls
//! below it), each request is one read the device completed (where the caller counts the device's
//! reads, within 2 %), and Little's law ties its figures together: mean latency × IOPS = the
//! requests in flight, within 10 %.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// ioscope/fio MB/s and IOPS must be within this of 1.
pub const THROUGHPUT_TOLERANCE: f64 = 0.15;
/// ioscope/fio p50 latency of the jobs that judge it must be within this of 1.
pub const LATENCY_TOLERANCE: f64 = 0.20;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Engine {
    IoUring,
    Threads,
}

impl Engine {
    /// io_uring where it works here (fio's engine doubles as the probe), threads otherwise.
    pub fn detect(file: &Path) -> Engine {
        let works = Command::new("fio")
            .args(["--name=probe", &format!("--filename={}", file.display())])
            .args(["--ioengine=io_uring", "--rw=read", "--bs=4k", "--size=4k", "--direct=1"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if works {
            Engine::IoUring
        } else {
            Engine::Threads
        }
    }

    /// `ioscope bench --engine` and the bench's JSON name.
    pub fn name(self) -> &'static str {
        match self {
            Engine::IoUring => "io_uring",
            Engine::Threads => "threads",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Engine::IoUring => "io_uring (both tools)",
            Engine::Threads => "threads / fio psync",
        }
    }

    /// fio's engine flags for `qd` requests in flight.
    fn fio_args(self, qd: u32) -> Vec<String> {
        match self {
            Engine::IoUring => vec!["--ioengine=io_uring".into(), format!("--iodepth={qd}")],
            Engine::Threads => {
                vec!["--ioengine=psync".into(), format!("--numjobs={qd}"), "--group_reporting".into()]
            }
        }
    }
}

pub struct Job {
    pub name: &'static str,
    /// ioscope bench flags (besides the file, --json, --size and --engine).
    pub ioscope: Vec<String>,
    /// fio flags (besides the common ones and the engine).
    pub fio: Vec<String>,
    pub qd: u32,
    /// fio's side of its JSON: "read" or "write".
    pub dir: &'static str,
    /// Whether the p50 is judged: not for the buffered write, whose per-write latency is a copy
    /// into the page cache (the fsync is the job).
    pub check_p50: bool,
    /// Judged by fio's figures both ways (true), or by the floor, the device and Little's law
    /// where the CPU limits fio (false, see the module's comment).
    pub fio_both_ways: bool,
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

/// The four jobs: sequential reads run for `seq_runtime` (time-based), random reads up to
/// `rand_runtime`, the buffered write of the whole file up to `write_limit` (durations as both
/// tools take them: "1s", "500ms").
pub fn jobs(seq_runtime: &str, rand_runtime: &str, write_limit: &str) -> Vec<Job> {
    let randread = |qd: u32, name| Job {
        name,
        ioscope: words(&format!("--rw randread --bs 4k --modes direct --qd {qd} --runtime {rand_runtime}")),
        fio: words(&format!("--rw=randread --bs=4k --direct=1 --runtime={rand_runtime}")),
        qd,
        dir: "read",
        check_p50: true,
        fio_both_ways: qd == 1,
    };
    vec![
        Job {
            name: "seq 1M direct read QD1",
            ioscope: words(&format!("--rw read --bs 1m --modes direct --qd 1 --runtime {seq_runtime} --time-based")),
            fio: words(&format!("--rw=read --bs=1m --direct=1 --runtime={seq_runtime} --time_based")),
            qd: 1,
            dir: "read",
            check_p50: true,
            fio_both_ways: true,
        },
        randread(1, "4K direct randread QD1"),
        // fio's CPU per request limits it at QD32 (see the module's comment).
        randread(32, "4K direct randread QD32"),
        Job {
            name: "1M buffered write, fsync at end",
            ioscope: words(&format!(
                "--write --rw write --bs 1m --modes buffered --qd 1 --fsync end --cache warm --runtime {write_limit}"
            )),
            fio: words("--rw=write --bs=1m --direct=0 --end_fsync=1 --invalidate=0"),
            qd: 1,
            dir: "write",
            check_p50: false,
            fio_both_ways: true,
        },
    ]
}

#[derive(Debug, Clone, Copy)]
pub struct Figures {
    pub mb_s: f64,
    pub iops: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
    /// CPU time per request (µs): the tool's own user + system time.
    pub cpu_us_per_req: f64,
    /// ioscope only: requests made, and reads the device completed during the run (where the
    /// caller counts them).
    pub requests: u64,
    pub device_reads: Option<u64>,
    /// The mean size of the requests the device completed during the run (KiB), where the caller
    /// reads the device's counters: below the size issued when requests were split.
    pub device_kib_per_req: Option<f64>,
}

/// Both tools on one file, the same way.
pub struct Tools<'a> {
    pub file: &'a Path,
    /// The region both tools use, from the file's start ("512m").
    pub size: &'a str,
    /// The ioscope binary.
    pub ioscope: &'a Path,
    pub engine: Engine,
    /// fio's `--mem`.
    pub mem: &'a str,
    /// What the device below the file has completed so far (its /proc/diskstats), when known:
    /// the mean request size is reported for both tools.
    pub device_io: Option<&'a dyn Fn() -> DeviceIo>,
    /// Whether ioscope's device reads per request are judged (one each, [`misses`]): on a loop
    /// device, where a request is never split; not on a real disk, where a 1 MiB read may be.
    pub judge_device_reads: bool,
}

/// What a block device has completed: reads, and requests and 512-byte sectors (reads +
/// writes).
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceIo {
    pub reads: u64,
    pub requests: u64,
    pub sectors: u64,
}

impl DeviceIo {
    /// From a /proc/diskstats line's fields after the name (reads, merged, sectors, ms, writes,
    /// merged, sectors, ...).
    pub fn from_fields(f: &[u64]) -> DeviceIo {
        let at = |i: usize| f.get(i).copied().unwrap_or(0);
        DeviceIo { reads: at(0), requests: at(0) + at(4), sectors: at(2) + at(6) }
    }

    /// The mean request size in KiB between `self` (earlier) and `later`.
    fn kib_per_req(self, later: DeviceIo) -> Option<f64> {
        let n = later.requests.checked_sub(self.requests).filter(|&n| n > 0)?;
        Some(later.sectors.saturating_sub(self.sectors) as f64 / 2.0 / n as f64)
    }
}

/// fio lays the file out: written in full and synced; both tools then overwrite or read it.
pub fn lay_out(file: &Path, size: &str) -> Result<()> {
    run(Command::new("fio").args([
        "--name=layout",
        &format!("--filename={}", file.display()),
        &format!("--size={size}"),
        "--rw=write",
        "--bs=1m",
        "--end_fsync=1",
    ]))
    .map(drop)
}

fn run(cmd: &mut Command) -> Result<Vec<u8>> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
    }
    Ok(out.stdout)
}

impl Tools<'_> {
    /// Every run starts from the same state: what the previous run left dirty on the filesystem is
    /// flushed (syncfs, not a machine-wide sync that would wait for other work's write-back), and
    /// before a read the file's cached pages are dropped. Both tools drop them too (fio's
    /// `invalidate=1`, ioscope's `--cache cold`), but fio does it after its clock started: after a
    /// buffered write left 512 MiB cached, that alone added 20–100 ms to fio's write job.
    ///
    /// The write job overwrites the file's cached (clean) pages instead (fio `--invalidate=0`,
    /// ioscope `--cache warm`): on a VM whose freed memory goes back to the host (virtio-balloon
    /// free page reporting, ~2 s after it is freed), a write into page-cache pages the host must
    /// fault in again ran 2–4× slower, in some runs and not others, whichever tool it was (one
    /// round's ratio 2.26, the next 5.64, then 0.56). Overwriting cached pages allocates nothing.
    pub fn settle(&self, job: &Job) -> Result<()> {
        use std::os::fd::AsRawFd;
        run(Command::new("sync").arg("-f").arg(self.file))?;
        if job.dir == "write" {
            return Ok(());
        }
        let f = std::fs::File::open(self.file).with_context(|| format!("open {}", self.file.display()))?;
        // SAFETY: a plain syscall on an open descriptor.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            bail!("posix_fadvise(DONTNEED) on {}: error {rc}", self.file.display());
        }
        Ok(())
    }

    pub fn fio(&self, job: &Job) -> Result<Figures> {
        self.settle(job)?;
        let io_before = self.device_io.map(|f| f());
        let out = run(Command::new("fio")
            .args(["--name=agree", &format!("--filename={}", self.file.display()), "--output-format=json"])
            .args([&format!("--size={}", self.size), "--thread", "--disk_util=0", "--lat_percentiles=1"])
            .arg(format!("--mem={}", self.mem))
            .args(self.engine.fio_args(job.qd))
            .args(&job.fio))?;
        let io_after = self.device_io.map(|f| f());
        let v: Value = serde_json::from_slice(&out).context("fio's JSON")?;
        let side = &v["jobs"][0][job.dir];
        let num = |v: &Value, what: &str| v.as_f64().with_context(|| format!("fio's JSON has no {what}"));
        let pct = |p: &str| side["lat_ns"]["percentile"][p].as_f64().unwrap_or(0.0) / 1000.0;
        let ios = side["total_ios"].as_f64().unwrap_or(0.0).max(1.0);
        let runtime_s = side["runtime"].as_f64().unwrap_or(0.0) / 1000.0;
        let cpu_pct =
            v["jobs"][0]["usr_cpu"].as_f64().unwrap_or(0.0) + v["jobs"][0]["sys_cpu"].as_f64().unwrap_or(0.0);
        Ok(Figures {
            mb_s: num(&side["bw_bytes"], "bw_bytes")? / 1e6,
            iops: num(&side["iops"], "iops")?,
            p50_us: pct("50.000000"),
            p99_us: pct("99.000000"),
            mean_us: side["lat_ns"]["mean"].as_f64().unwrap_or(0.0) / 1000.0,
            cpu_us_per_req: cpu_pct / 100.0 * runtime_s * 1e6 / ios,
            requests: 0,
            device_reads: None,
            device_kib_per_req: io_before.zip(io_after).and_then(|(b, a)| b.kib_per_req(a)),
        })
    }

    pub fn ioscope(&self, job: &Job) -> Result<Figures> {
        self.settle(job)?;
        let io_before = self.device_io.map(|f| f());
        let out = run(Command::new(self.ioscope)
            .arg("bench")
            .arg(self.file)
            .args(["--json", "--size", self.size, "--engine", self.engine.name()])
            .args(&job.ioscope))?;
        let io_after = self.device_io.map(|f| f());
        let v: Value = serde_json::from_slice(&out).context("ioscope bench's JSON")?;
        let j = &v["jobs"][0];
        if !j["skipped"].is_null() {
            bail!("job skipped: {j}");
        }
        if j["engine"] != self.engine.name() || v["settings"]["engine"] != self.engine.name() {
            bail!("the engine is not {} in the job's result and the settings: {v}", self.engine.name());
        }
        let num = |k: &str| j[k].as_f64().with_context(|| format!("ioscope bench's JSON has no {k}"));
        let requests = j["ops"].as_u64().context("ioscope bench's JSON has no ops")?;
        Ok(Figures {
            mb_s: num("mb_s")?,
            iops: num("iops")?,
            p50_us: num("lat_p50_us")?,
            p99_us: num("lat_p99_us")?,
            mean_us: num("lat_mean_us")?,
            cpu_us_per_req: num("cpu_pct")? / 100.0 * num("runtime_s")? * 1e6 / (requests.max(1) as f64),
            requests,
            device_reads: io_before
                .zip(io_after)
                .filter(|_| self.judge_device_reads)
                .map(|(b, a)| a.reads - b.reads),
            device_kib_per_req: io_before.zip(io_after).and_then(|(b, a)| b.kib_per_req(a)),
        })
    }

    /// `n` more rounds of `job`, alternating which tool goes first.
    pub fn rounds(&self, job: &Job, n: usize, f: &mut Vec<Figures>, i: &mut Vec<Figures>) -> Result<()> {
        for _ in 0..n {
            if f.len().is_multiple_of(2) {
                f.push(self.fio(job)?);
                i.push(self.ioscope(job)?);
            } else {
                i.push(self.ioscope(job)?);
                f.push(self.fio(job)?);
            }
        }
        Ok(())
    }

    /// One unmeasured round first (the first run of a job after another job met a different disk
    /// and page cache than the ones after it), then `rounds`; a job that misses the tolerance then
    /// gets `extra` more and the median over all of them is judged: passing needs agreement most
    /// of the time, so a tool that is really 20 % off still fails.
    pub fn agree(&self, job: &Job, rounds: usize, extra: usize) -> Result<Outcome> {
        self.rounds(job, 1, &mut Vec::new(), &mut Vec::new())?;
        let (mut fio, mut ioscope) = (Vec::new(), Vec::new());
        self.rounds(job, rounds, &mut fio, &mut ioscope)?;
        let mut r = ratios(&fio, &ioscope);
        let first_rounds = if misses(job, &r, &ioscope).is_empty() {
            None
        } else {
            let first = r;
            self.rounds(job, extra, &mut fio, &mut ioscope)?;
            r = ratios(&fio, &ioscope);
            Some(first)
        };
        let misses = misses(job, &r, &ioscope);
        Ok(Outcome { fio, ioscope, ratios: r, first_rounds, misses })
    }
}

/// One job's rounds and verdict.
pub struct Outcome {
    pub fio: Vec<Figures>,
    pub ioscope: Vec<Figures>,
    /// The median per-round ratios ioscope/fio: (MB/s, IOPS, p50, p99).
    pub ratios: [f64; 4],
    /// The ratios after the first rounds, when they missed and extra rounds were run.
    pub first_rounds: Option<[f64; 4]>,
    /// What is beyond the tolerances; empty when the tools agree.
    pub misses: Vec<String>,
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The median per-round ratios ioscope/fio: (MB/s, IOPS, p50, p99).
pub fn ratios(f: &[Figures], i: &[Figures]) -> [f64; 4] {
    let r = |g: fn(&Figures) -> f64| median(f.iter().zip(i).map(|(a, b)| g(b) / g(a)).collect());
    [r(|x| x.mb_s), r(|x| x.iops), r(|x| x.p50_us), r(|x| x.p99_us)]
}

/// What is beyond the tolerances, given the median ratios `r` and ioscope's runs `i`.
pub fn misses(job: &Job, r: &[f64; 4], i: &[Figures]) -> Vec<String> {
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
        let reads: Option<Vec<f64>> =
            i.iter().map(|x| x.device_reads.map(|d| d as f64 / x.requests.max(1) as f64)).collect();
        if let Some(reads) = reads {
            let reads = median(reads);
            if (reads - 1.0).abs() > 0.02 {
                out.push(format!("{}: device reads per ioscope request {reads:.3}", job.name));
            }
        }
        let in_flight = median(i.iter().map(|x| x.mean_us * x.iops / 1e6).collect());
        if (in_flight / job.qd as f64 - 1.0).abs() > 0.10 {
            out.push(format!("{}: mean latency × IOPS = {in_flight:.1} in flight, not {}", job.name, job.qd));
        }
    }
    out
}
