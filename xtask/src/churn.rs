//! `cargo xtask churn`: what a burst of new files costs ioscope (issue 19's file churn).
//!
//! Builds the release binary, makes a fresh ext4 (or xfs) loop mount, starts
//! `ioscope --batch --json --interval 1` and, after a warm-up, measures its CPU while idle, then
//! creates N small files (4 KiB each), syncs, drops them from the cache and reads them back (the
//! issue's "20,000 files created and read"), and measures ioscope's CPU (utime+stime from
//! /proc/PID/stat) over the seconds that follow the burst's start. From the JSON it wrote, it
//! counts the file rows of the loop device and how many had a path, and the largest sample.
//!
//! `--bursts N --every S` repeats the burst every S seconds (issue 19's long run: `--bursts 30
//! --every 60 --files 5000 --interval 0.1`), each in a directory of its own, and checks after each
//! one that ioscope's CPU is back under 1 % of a core from 10 s after the burst's start to the
//! next one, and that every sample's size follows the file rows in it (a fixed part, the median
//! size of the samples without file rows, plus at most a bounded size per row).
//!
//! `--short-lived` has each burst done by short-lived processes (`xtask churn --worker`, 100 files
//! each, xtask/src/churn_worker.rs), which also delete their files after reading them: the paths of
//! files whose process and name are both gone by the next sample (issue 39). Judged on the paths
//! only: at least 95 % of the file rows must keep theirs (a deleted file's is "PATH (deleted)"). Such a run is
//! judged on those, as issue 19's long run is, and on the paths; the idle CPU before the first
//! burst and each burst's CPU are reported. The burst's 0.3 s is the target of the one burst of
//! 20,000 files at a 1 s interval, where ioscope's own floor over the 15 s is ~0.05 s; at 0.1 s it
//! is ~0.13 s, and the long run's bursts are of 5,000 files.

use std::io::{BufRead, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;

use crate::perf::{build_release, clock_ticks_per_second, cpu_ticks, verdict};

const BURST_CPU_TARGET_S: f64 = 0.3;
const IDLE_CPU_TARGET_PERCENT: f64 = 1.0;
const WARM_UP: Duration = Duration::from_secs(3);
/// After a burst, ioscope's CPU must be back under [`IDLE_CPU_TARGET_PERCENT`] from this long
/// after its start (issue 19).
const SETTLE: Duration = Duration::from_secs(10);

#[derive(Debug, Parser)]
#[command(name = "cargo xtask churn", about = "Measure ioscope's CPU over a burst of new files")]
struct ChurnArgs {
    /// Files created and read.
    #[arg(long, default_value_t = 20_000)]
    files: usize,
    /// Seconds measured from the burst's start.
    #[arg(long, default_value_t = 15)]
    seconds: u64,
    /// Seconds of idle measurement before the burst.
    #[arg(long, default_value_t = 10)]
    idle_seconds: u64,
    /// ext4 or xfs.
    #[arg(long, default_value = "ext4")]
    fstype: String,
    /// Bursts, one every `--every` seconds.
    #[arg(long, default_value_t = 1)]
    bursts: usize,
    /// Seconds from one burst's start to the next (at least `--seconds`).
    #[arg(long, default_value_t = 15)]
    every: u64,
    /// ioscope's sampling interval (seconds).
    #[arg(long, default_value = "1")]
    interval: String,
    /// Bursts by short-lived processes that delete their files (see the module comment).
    #[arg(long)]
    short_lived: bool,
    /// One short-lived process's share: DIR FIRST N (run by `--short-lived`).
    #[arg(long, hide = true, num_args = 3, value_names = ["DIR", "FIRST", "N"])]
    worker: Option<Vec<String>>,
}

/// `--short-lived`: the share of the file rows that must keep their path.
const SHORT_LIVED_PATH_SHARE: f64 = 0.95;

/// What one burst cost: CPU over `--seconds` from its start, and from [`SETTLE`] after its start
/// to the next burst's.
struct BurstCost {
    took: Duration,
    cpu: f64,
    settled_pct: f64,
}

pub fn run(args: &[String]) -> Result<()> {
    let args = ChurnArgs::try_parse_from(std::iter::once("churn".to_string()).chain(args.iter().cloned()))?;
    if let Some(w) = &args.worker {
        let (first, n) = (w[1].parse().context("FIRST")?, w[2].parse().context("N")?);
        return crate::churn_worker::churn_worker(&w[0], first, n).map_err(anyhow::Error::msg);
    }
    // Measured as users run it: the kernel's per-program timing off (crate::bpf_stats).
    let _bpf_stats = crate::bpf_stats::BpfStats::off();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("xtask has no parent directory")?;
    // Another build to compare against (an older commit's binary), alternating runs.
    let bin = match std::env::var_os("IOSCOPE_CHURN_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => build_release(root)?,
    };
    let tick = 1.0 / clock_ticks_per_second();
    // Room for every burst's files: ext4 makes one inode per 16 KiB, and the long run's 30 bursts
    // of 5,000 files ran out of the 1 GiB image's 65,536 inodes at the 13th.
    let image_bytes = (args.bursts as u64 * args.files as u64 * (32 << 10)).max(1 << 30);
    let fs = Mounted::new(&args.fstype, image_bytes)?;
    // mkfs's writes (and a build's) flushed before ioscope starts: its idle is measured idle.
    crate::perf::flush_writes();
    let json_path = fs.dir.join("samples.json");
    let json = std::fs::File::create(&json_path)?;
    let mut ioscope = Command::new(&bin)
        .args(["--batch", "--json", "--interval", &args.interval])
        .stdout(Stdio::from(json))
        .stderr(Stdio::null())
        .spawn()
        .context("starting ioscope")?;
    let pid = ioscope.id();
    let every = Duration::from_secs(args.every.max(args.seconds));
    let measured = (|| -> Result<(f64, Vec<BurstCost>)> {
        std::thread::sleep(WARM_UP);
        let t0 = cpu_ticks(pid)?;
        std::thread::sleep(Duration::from_secs(args.idle_seconds));
        let idle = (cpu_ticks(pid)? - t0) as f64 * tick;
        let mut costs = Vec::new();
        for i in 0..args.bursts {
            let start = Instant::now();
            let t1 = cpu_ticks(pid)?;
            let dir = fs.mount.join(format!("b{i}"));
            if args.short_lived {
                let me = std::env::current_exe()?;
                let dir = dir.to_string_lossy();
                crate::churn_worker::run_workers(&me, &["churn", "--worker"], &dir, args.files as u64)
                    .map_err(anyhow::Error::msg)?;
            } else {
                burst(&dir, args.files)?;
            }
            let took = start.elapsed();
            std::thread::sleep(SETTLE.saturating_sub(start.elapsed()));
            let t_settled = cpu_ticks(pid)?;
            let settled_at = start.elapsed();
            std::thread::sleep(Duration::from_secs(args.seconds).saturating_sub(start.elapsed()));
            let cpu = (cpu_ticks(pid)? - t1) as f64 * tick;
            std::thread::sleep(every.saturating_sub(start.elapsed()));
            let settled = (cpu_ticks(pid)? - t_settled) as f64 * tick;
            let settled_pct = 100.0 * settled / (start.elapsed() - settled_at).as_secs_f64().max(0.001);
            println!(
                "  burst {}: {:.1} s of work, {cpu:.2} s CPU over {} s; {settled_pct:.2} % of a core from {} s to {} s",
                i + 1,
                took.as_secs_f64(),
                args.seconds,
                SETTLE.as_secs(),
                every.as_secs()
            );
            costs.push(BurstCost { took, cpu, settled_pct });
        }
        Ok((idle, costs))
    })();
    let _ = ioscope.kill();
    let _ = ioscope.wait();
    let (idle, costs) = measured?;
    let c = count_paths(&json_path, fs.dev)?;
    let idle_pct = 100.0 * idle / args.idle_seconds as f64;
    println!(
        "ioscope churn: {} burst(s) of {} files of 4 KiB on a fresh {} loop mount ({}:{}), created + synced + read cold \
         (first in {:.1} s), ioscope --interval {}; load average {}",
        args.bursts,
        args.files,
        args.fstype,
        fs.dev.0,
        fs.dev.1,
        costs.first().map_or(0.0, |b| b.took.as_secs_f64()),
        args.interval,
        crate::perf::load_average()
    );
    // One burst: judged on its CPU and the idle before it; several: on the CPU after each (see
    // the module comment).
    let judged = |ok: bool| {
        if args.bursts > 1 || args.short_lived {
            format!("{} (reported)", if ok { "under" } else { "over" })
        } else {
            verdict(ok).to_string()
        }
    };
    println!(
        "  idle ({} s before): {idle:.2} s CPU = {idle_pct:.2} % of a core (target < {IDLE_CPU_TARGET_PERCENT} %): {}",
        args.idle_seconds,
        judged(idle_pct < IDLE_CPU_TARGET_PERCENT)
    );
    let worst_cpu = costs.iter().map(|b| b.cpu).fold(0.0, f64::max);
    let mut cpus: Vec<f64> = costs.iter().map(|b| b.cpu).collect();
    println!(
        "  burst ({} s from its start): {:.2} s CPU median, {worst_cpu:.2} s worst (target < {BURST_CPU_TARGET_S} s): {}",
        args.seconds,
        crate::stats::median(&mut cpus),
        judged(worst_cpu < BURST_CPU_TARGET_S)
    );
    let worst_settled = costs.iter().map(|b| b.settled_pct).fold(0.0, f64::max);
    let settled_ok = args.bursts < 2 || worst_settled < IDLE_CPU_TARGET_PERCENT;
    if args.bursts > 1 {
        println!(
            "  after each burst, from {} s to the next: {worst_settled:.2} % of a core at worst (target < {IDLE_CPU_TARGET_PERCENT} %): {}",
            SETTLE.as_secs(),
            verdict(settled_ok)
        );
    }
    println!(
        "  file rows of the loop device in {} samples: {}, with a path: {} ({:.1} %); readahead rows {}, with a path: {}",
        c.samples,
        c.rows,
        c.with_path,
        if c.rows > 0 { 100.0 * c.with_path as f64 / c.rows as f64 } else { 0.0 },
        c.ra_rows,
        c.ra_with_path
    );
    println!(
        "  sample size: {:.1} KB without file rows (median), largest {:.0} KB with {} rows; at most {:.0} bytes per row over the median",
        c.floor_bytes as f64 / 1000.0,
        c.largest as f64 / 1000.0,
        c.largest_rows,
        c.bytes_per_row
    );
    if args.short_lived {
        let share = if c.rows > 0 { c.with_path as f64 / c.rows as f64 } else { 0.0 };
        let ok = c.rows > 0 && share >= SHORT_LIVED_PATH_SHARE;
        println!(
            "  short-lived processes, files deleted: {:.1} % of the file rows with a path (target ≥ {:.0} %): {}",
            100.0 * share,
            100.0 * SHORT_LIVED_PATH_SHARE,
            verdict(ok)
        );
        if !ok {
            bail!("a target was missed");
        }
        return Ok(());
    }
    let single_ok = args.bursts > 1 || (worst_cpu < BURST_CPU_TARGET_S && idle_pct < IDLE_CPU_TARGET_PERCENT);
    if !single_ok || !settled_ok || c.with_path < c.rows || c.ra_with_path < c.ra_rows {
        bail!("a target was missed");
    }
    Ok(())
}

/// Creates `n` 4 KiB files in 100 directories, syncs, drops their pages, and reads them back.
fn burst(mount: &Path, n: usize) -> Result<()> {
    std::fs::create_dir_all(mount)?;
    let block = vec![0x5au8; 4096];
    let paths: Vec<PathBuf> = (0..n).map(|i| mount.join(format!("d{}/f{i}", i % 100))).collect();
    for d in 0..100.min(n) {
        std::fs::create_dir_all(mount.join(format!("d{d}")))?;
    }
    for p in &paths {
        std::fs::File::create(p)?.write_all(&block)?;
    }
    // SAFETY: no preconditions.
    unsafe { libc::sync() };
    for p in &paths {
        let f = std::fs::File::open(p)?;
        // SAFETY: plain syscall on an open fd.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
    let mut buf = vec![0u8; 4096];
    for p in &paths {
        let mut f = std::fs::File::open(p)?;
        std::io::Read::read(&mut f, &mut buf)?;
    }
    Ok(())
}

/// What the JSON samples held.
#[derive(Default)]
struct Counted {
    samples: usize,
    /// File rows of the loop device (label rows left out), and how many had a path.
    rows: usize,
    with_path: usize,
    /// The same for readahead's files.
    ra_rows: usize,
    ra_with_path: usize,
    /// The largest sample (bytes) and its file rows (files and readahead files, all devices).
    largest: usize,
    largest_rows: usize,
    /// The median size of the samples without file rows, and the most bytes per row above it.
    floor_bytes: usize,
    bytes_per_row: f64,
}

fn count_paths(json: &Path, dev: (u32, u32)) -> Result<Counted> {
    let want = format!("{}:{}", dev.0, dev.1);
    let mut c = Counted::default();
    let mut sizes: Vec<(usize, usize)> = Vec::new();
    let on_dev = |f: &serde_json::Value| f.get("dev").and_then(|d| d.as_str()) == Some(want.as_str());
    let has_path = |f: &serde_json::Value| f.get("path").is_some_and(|p| !p.is_null());
    for line in std::io::BufReader::new(std::fs::File::open(json)?).lines() {
        let line = line?;
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        c.samples += 1;
        let files = v.get("files").and_then(|f| f.as_array()).map(Vec::as_slice).unwrap_or_default();
        let ra =
            v.pointer("/readahead/files").and_then(|f| f.as_array()).map(Vec::as_slice).unwrap_or_default();
        for f in files {
            if !on_dev(f) || f.get("label").is_some_and(|l| !l.is_null()) {
                continue;
            }
            c.rows += 1;
            c.with_path += usize::from(has_path(f));
        }
        for f in ra.iter().filter(|f| on_dev(f) && f.get("label").is_none_or(|l| l.is_null())) {
            c.ra_rows += 1;
            // The readahead view names a file it has no path for by "major:minor:inode".
            c.ra_with_path += usize::from(f.get("path_known").and_then(|p| p.as_bool()).unwrap_or(false));
        }
        let rows = files.len() + ra.len();
        if line.len() > c.largest {
            (c.largest, c.largest_rows) = (line.len(), rows);
        }
        sizes.push((line.len(), rows));
    }
    let mut empty: Vec<usize> = sizes.iter().filter(|(_, r)| *r == 0).map(|(s, _)| *s).collect();
    empty.sort_unstable();
    c.floor_bytes = empty.get(empty.len() / 2).copied().unwrap_or(0);
    c.bytes_per_row = sizes
        .iter()
        .filter(|(_, r)| *r > 0)
        .map(|(s, r)| s.saturating_sub(c.floor_bytes) as f64 / *r as f64)
        .fold(0.0, f64::max);
    Ok(c)
}

/// A fresh filesystem on a loop device over a sparse image in /var/tmp, mounted; all undone on drop.
struct Mounted {
    dir: PathBuf,
    mount: PathBuf,
    loop_dev: String,
    dev: (u32, u32),
}

impl Mounted {
    fn new(fstype: &str, image_bytes: u64) -> Result<Mounted> {
        let dir = PathBuf::from(format!("/var/tmp/ioscope-churn-{}", std::process::id()));
        let mount = dir.join("m");
        std::fs::create_dir_all(&mount)?;
        let image = dir.join("disk.img");
        std::fs::File::create(&image)?.set_len(image_bytes)?;
        let out = Command::new("losetup").args(["--find", "--show"]).arg(&image).output()?;
        if !out.status.success() {
            bail!("losetup failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let loop_dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let mut m = Mounted { dir, mount, loop_dev, dev: (0, 0) };
        let mkfs = format!("mkfs.{fstype}");
        if !Command::new(&mkfs).arg("-q").arg(&m.loop_dev).status()?.success() {
            bail!("{mkfs} failed");
        }
        if !Command::new("mount").arg(&m.loop_dev).arg(&m.mount).status()?.success() {
            bail!("mount failed");
        }
        let st = std::fs::metadata(&m.loop_dev)?;
        let rdev = std::os::unix::fs::MetadataExt::rdev(&st);
        m.dev = (libc::major(rdev), libc::minor(rdev));
        Ok(m)
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
        let _ = Command::new("losetup").arg("-d").arg(&self.loop_dev).status();
        if std::env::var_os("IOSCOPE_CHURN_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
