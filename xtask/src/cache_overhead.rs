//! `cargo xtask cache-overhead`: what the page-cache probes cost a cached-read workload.
//!
//! fio does 4 KiB buffered random reads (psync, one job) of a file that is fully in the page cache,
//! for a few seconds at a time, alternately without and with `ioscope --batch` running (its eBPF
//! programs attached, so every read() runs the `mm_filemap_get_pages` program). Rounds alternate so
//! that drift in the machine's load hits both sides alike; the medians are compared. The target
//! (README "Page cache"): with ioscope, at least 95 % of the throughput without.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;

const TARGET_RATIO: f64 = 0.95;

#[derive(Debug, Parser)]
#[command(name = "cargo xtask cache-overhead", about = "Cached-read throughput with and without ioscope")]
struct Args {
    /// Seconds per fio run.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Runs on each side (alternating).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Size of the cached file, MiB.
    #[arg(long, default_value_t = 256)]
    file_mib: u64,
    /// Directory for the file (on a disk-backed filesystem, not tmpfs).
    #[arg(long, default_value = "/var/tmp")]
    dir: PathBuf,
}

pub fn run(args: &[String]) -> Result<()> {
    let args = Args::try_parse_from(std::iter::once("cache-overhead".to_string()).chain(args.iter().cloned()))?;
    if Command::new("fio").arg("--version").output().is_err() {
        bail!("fio is not installed (apt-get install fio)");
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("xtask has no parent directory")?;
    let bin = crate::perf::build_release(root)?;
    let file = args.dir.join(format!("ioscope-cache-overhead-{}", std::process::id()));
    let _cleanup = RemoveOnDrop(file.clone());
    make_cached_file(&file, args.file_mib)?;
    println!(
        "cache-overhead: fio 4 KiB buffered random reads of a cached {} MiB file, {} s × {} rounds per side",
        args.file_mib, args.seconds, args.rounds
    );

    let mut without = Vec::new();
    let mut with = Vec::new();
    for round in 1..=args.rounds {
        let a = fio_iops(&file, args.seconds)?;
        let mut ioscope = Command::new(&bin)
            .args(["--batch", "--interval", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting ioscope --batch")?;
        // eBPF load and attach before measuring.
        std::thread::sleep(Duration::from_secs(2));
        let b = fio_iops(&file, args.seconds);
        let _ = ioscope.kill();
        let _ = ioscope.wait();
        let b = b?;
        println!("  round {round}: without {a:.0} IOPS, with ioscope {b:.0} IOPS ({:.1} %)", 100.0 * b / a);
        without.push(a);
        with.push(b);
    }
    let (a, b) = (median(&mut without), median(&mut with));
    let ratio = b / a;
    let ok = ratio >= TARGET_RATIO;
    println!(
        "median: without {a:.0} IOPS, with ioscope {b:.0} IOPS: {:.1} % (target ≥ {:.0} %) {}",
        100.0 * ratio,
        100.0 * TARGET_RATIO,
        if ok { "PASS" } else { "FAIL" }
    );
    if !ok {
        bail!("cached-read throughput with ioscope is below {:.0} % of without", 100.0 * TARGET_RATIO);
    }
    Ok(())
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn make_cached_file(path: &Path, mib: u64) -> Result<()> {
    use std::io::{Read, Write};
    let mut f = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let block: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    for _ in 0..mib {
        f.write_all(&block)?;
    }
    f.sync_all()?;
    drop(f);
    // Read it back so every page is cached before measuring.
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    while f.read(&mut buf)? > 0 {}
    Ok(())
}

/// One fio run; read IOPS from its terse output (field 8 of version 3).
fn fio_iops(file: &Path, seconds: u64) -> Result<f64> {
    let out = Command::new("fio")
        .args([
            "--name=cached",
            &format!("--filename={}", file.display()),
            "--rw=randread",
            "--bs=4k",
            "--ioengine=psync",
            "--invalidate=0",
            "--time_based",
            &format!("--runtime={seconds}"),
            "--output-format=terse",
            "--terse-version=3",
        ])
        .output()
        .context("running fio")?;
    if !out.status.success() {
        bail!("fio failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    parse_terse_read_iops(&text).with_context(|| format!("no read IOPS in fio's output: {text}"))
}

fn parse_terse_read_iops(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("3;"))?;
    line.split(';').nth(7)?.parse().ok()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terse_v3_read_iops_is_field_8() {
        let line = "3;fio-3.33;cached;0;0;4194304;838860;209715;5000;0;0";
        assert_eq!(parse_terse_read_iops(line), Some(209715.0));
        assert_eq!(parse_terse_read_iops("garbage"), None);
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
