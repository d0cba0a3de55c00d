//! `cargo xtask churn`: what a burst of new files costs ioscope (issue 19's file churn).
//!
//! Builds the release binary, makes a fresh ext4 (or xfs) loop mount, starts
//! `ioscope --batch --json --interval 1` and, after a warm-up, measures its CPU while idle, then
//! creates N small files (4 KiB each), syncs, drops them from the cache and reads them back (the
//! issue's "20,000 files created and read"), and measures ioscope's CPU (utime+stime from
//! /proc/PID/stat) over the seconds that follow the burst's start. From the JSON it wrote, it
//! counts the file rows of the loop device and how many had a path, and the largest sample.

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
}

pub fn run(args: &[String]) -> Result<()> {
    let args = ChurnArgs::try_parse_from(std::iter::once("churn".to_string()).chain(args.iter().cloned()))?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("xtask has no parent directory")?;
    let bin = build_release(root)?;
    let tick = 1.0 / clock_ticks_per_second();
    let fs = Mounted::new(&args.fstype)?;
    let json_path = fs.dir.join("samples.json");
    let json = std::fs::File::create(&json_path)?;
    let mut ioscope = Command::new(&bin)
        .args(["--batch", "--json", "--interval", "1"])
        .stdout(Stdio::from(json))
        .stderr(Stdio::null())
        .spawn()
        .context("starting ioscope")?;
    let pid = ioscope.id();
    let measured = (|| -> Result<(f64, f64, Duration)> {
        std::thread::sleep(WARM_UP);
        let t0 = cpu_ticks(pid)?;
        std::thread::sleep(Duration::from_secs(args.idle_seconds));
        let idle = (cpu_ticks(pid)? - t0) as f64 * tick;
        let start = Instant::now();
        let t1 = cpu_ticks(pid)?;
        burst(&fs.mount, args.files)?;
        let took = start.elapsed();
        let rest = Duration::from_secs(args.seconds).saturating_sub(took);
        std::thread::sleep(rest);
        let burst_cpu = (cpu_ticks(pid)? - t1) as f64 * tick;
        Ok((idle, burst_cpu, took))
    })();
    let _ = ioscope.kill();
    let _ = ioscope.wait();
    let (idle, burst_cpu, took) = measured?;
    let (rows, with_path, largest, samples) = count_paths(&json_path, fs.dev)?;
    let idle_pct = 100.0 * idle / args.idle_seconds as f64;
    println!(
        "ioscope churn: {} files of 4 KiB on a fresh {} loop mount ({}:{}), created + synced + read cold in {:.1} s",
        args.files,
        args.fstype,
        fs.dev.0,
        fs.dev.1,
        took.as_secs_f64()
    );
    println!(
        "  idle ({} s before): {idle:.2} s CPU = {idle_pct:.2} % of a core (target < {IDLE_CPU_TARGET_PERCENT} %): {}",
        args.idle_seconds,
        verdict(idle_pct < IDLE_CPU_TARGET_PERCENT)
    );
    println!(
        "  burst ({} s from its start): {burst_cpu:.2} s CPU (target < {BURST_CPU_TARGET_S} s): {}",
        args.seconds,
        verdict(burst_cpu < BURST_CPU_TARGET_S)
    );
    println!(
        "  file rows of the loop device in {samples} samples: {rows}, with a path: {with_path} ({:.1} %); largest sample {:.0} KB",
        if rows > 0 { 100.0 * with_path as f64 / rows as f64 } else { 0.0 },
        largest as f64 / 1000.0
    );
    if burst_cpu >= BURST_CPU_TARGET_S || idle_pct >= IDLE_CPU_TARGET_PERCENT || with_path < rows {
        bail!("a target was missed");
    }
    Ok(())
}

/// Creates `n` 4 KiB files in 100 directories, syncs, drops their pages, and reads them back.
fn burst(mount: &Path, n: usize) -> Result<()> {
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

/// File rows of device `dev` in the JSON samples (label rows left out), how many had a path, the
/// largest sample's size in bytes, and the samples read.
fn count_paths(json: &Path, dev: (u32, u32)) -> Result<(usize, usize, usize, usize)> {
    let want = format!("{}:{}", dev.0, dev.1);
    let (mut rows, mut with_path, mut largest, mut samples) = (0, 0, 0, 0);
    for line in std::io::BufReader::new(std::fs::File::open(json)?).lines() {
        let line = line?;
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        samples += 1;
        largest = largest.max(line.len());
        for f in v.get("files").and_then(|f| f.as_array()).into_iter().flatten() {
            if f.get("dev").and_then(|d| d.as_str()) != Some(want.as_str())
                || f.get("label").is_some_and(|l| !l.is_null())
            {
                continue;
            }
            rows += 1;
            with_path += usize::from(f.get("path").is_some_and(|p| !p.is_null()));
        }
    }
    Ok((rows, with_path, largest, samples))
}

/// A fresh filesystem on a loop device over a sparse image in /var/tmp, mounted; all undone on drop.
struct Mounted {
    dir: PathBuf,
    mount: PathBuf,
    loop_dev: String,
    dev: (u32, u32),
}

impl Mounted {
    fn new(fstype: &str) -> Result<Mounted> {
        let dir = PathBuf::from(format!("/var/tmp/ioscope-churn-{}", std::process::id()));
        let mount = dir.join("m");
        std::fs::create_dir_all(&mount)?;
        let image = dir.join("disk.img");
        std::fs::File::create(&image)?.set_len(1 << 30)?;
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
