//! `cargo xtask overhead`: what ioscope's eBPF probes cost the I/O they watch. fio runs 4 KiB random
//! direct reads at queue depth 32 on a block device, alternately without and with ioscope running
//! (`--batch`, eBPF on, 1 s interval), several times; the IOPS with ioscope must be ≥ 97 % of the
//! IOPS without, and ioscope's own CPU (its process; the probes' cost lands in the I/O threads and
//! so in the IOPS) under 2 % of one core.
//!
//! IOPS on a shared machine are noisy, so the probes' own cost is also measured directly: with
//! `kernel.bpf_stats_enabled` set for the run (restored afterwards), the kernel times every run of
//! every program; the sum over ioscope's programs (from /proc/PID/fdinfo of its bpf-prog fds),
//! divided by the I/Os fio did, is the probes' cost per I/O, independent of the noise.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;

use crate::empty_program::EmptyProgram;
use crate::perf::{build_release, clock_ticks_per_second, cpu_ticks};
use crate::stats;
use crate::watcher::Ioscope;

const IOPS_TARGET_RATIO: f64 = 0.97;
/// The fsync job's target (issue 21): ioscope's IOPS at least this share of the empty programs'
/// (`--floor`), or of fio's alone without it.
const FSYNC_TARGET_RATIO: f64 = 0.98;
const CPU_TARGET_PERCENT: f64 = 2.0;

#[derive(Debug, Parser)]
#[command(name = "cargo xtask overhead", about = "Measure the eBPF probes' cost to fio's IOPS")]
struct OverheadArgs {
    /// Pairs of fio runs (each pair: one without, one with ioscope, and with --floor one with the
    /// empty programs; the order turns from pair to pair).
    #[arg(long, default_value_t = 10)]
    pairs: u32,
    /// Seconds per fio run.
    #[arg(long, default_value_t = 6)]
    seconds: u32,
    /// Block device to read (read-only use). Default: a fresh 1 GiB loop device over a file in
    /// /var/tmp, detached afterwards.
    #[arg(long, conflicts_with = "file")]
    device: Option<PathBuf>,
    /// A file on a real disk's filesystem to read with direct I/O instead of a device (the case of
    /// a machine whose disk cannot be opened raw, and the realistic one: one block request per
    /// I/O, the disk setting the pace). Created with 1 GiB of data if missing, and then removed.
    #[arg(long)]
    file: Option<PathBuf>,
    /// The default loop device reads its file through the page cache (pure CPU, the worst case for
    /// the probes: every microsecond is the I/O path's own) instead of with direct I/O on the disk
    /// below (the realistic case: the disk sets the pace).
    #[arg(long)]
    buffered_loop: bool,
    /// Also run each pair with an empty eBPF program on each of the block events ioscope traces
    /// instead of ioscope: the kernel's own cost of running any program on every request, which
    /// no tool can go below.
    #[arg(long)]
    floor: bool,
    /// The fsync-heavy job instead of direct reads: 4 KiB writes, each followed by fsync
    /// (`--fsync=1`), to a file on ext4 made on the loop device (src/overhead_fsync.rs).
    #[arg(long, conflicts_with_all = ["device", "file", "buffered_loop"])]
    fsync: bool,
    /// With --fsync: write the job's file in this directory of an existing filesystem (a real
    /// disk's, e.g. /var/tmp: the realistic case, one filesystem and no loop device doubling each
    /// request) instead of on ext4 made on a loop device.
    #[arg(long, requires = "fsync", conflicts_with = "ram")]
    dir: Option<PathBuf>,
    /// The loop device's image in /dev/shm (tmpfs, buffered): its flushes cost nothing, so every
    /// microsecond of an fsync is the kernel's own path and the probes' (the worst case for the
    /// sync probes, and one the shared disk's noise does not reach).
    #[arg(long, conflicts_with_all = ["device", "file"])]
    ram: bool,
    /// The ioscope binary to measure (e.g. `cargo xtask dist`'s static one) instead of building
    /// target/release/ioscope.
    #[arg(long)]
    ioscope: Option<PathBuf>,
}

/// What runs beside fio in one run.
#[derive(Clone, Copy, Debug)]
enum Side {
    Without,
    EmptyPrograms,
    Ioscope,
}

/// The events ioscope's programs run on for every request of this benchmark (raw tracepoint
/// names): the block layer's, and direct I/O's on the loop device's backing file (or on --file).
const BLOCK_EVENTS: [&str; 5] =
    ["block_io_start", "block_rq_insert", "block_rq_issue", "block_rq_complete", "iomap_dio_rw_begin"];

pub fn run(args: &[String]) -> Result<()> {
    let args =
        OverheadArgs::try_parse_from(std::iter::once("overhead".to_string()).chain(args.iter().cloned()))?;
    // Measured as users run it: the kernel's per-program timing off (crate::bpf_stats).
    let _bpf_stats = crate::bpf_stats::BpfStats::off();
    // SAFETY: no preconditions.
    if unsafe { libc_geteuid() } != 0 {
        bail!("cargo xtask overhead needs root (eBPF, and a loop device unless --device is given)");
    }
    if args.pairs == 0 || args.seconds == 0 {
        bail!("--pairs and --seconds must be at least 1");
    }
    which("fio")?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("xtask has no parent directory")?;
    let bin = match &args.ioscope {
        Some(b) => b.clone(),
        None => build_release(root)?,
    };
    let loopdev;
    let _created;
    let device = match (&args.device, &args.file, &args.dir) {
        (Some(d), _, _) => d.clone(),
        (None, Some(f), _) => {
            _created = TestFile::ensure(f)?;
            f.clone()
        }
        (None, None, Some(dir)) => dir.clone(),
        (None, None, None) => {
            loopdev = LoopDevice::new(!args.buffered_loop && !args.ram, args.ram)?;
            loopdev.path.clone()
        }
    };
    let ticks_per_s = clock_ticks_per_second();
    let mount = if args.fsync && args.dir.is_none() {
        Some(crate::overhead_fsync::Ext4Mount::new(&device)?)
    } else {
        None
    };
    let _job_file;
    let fsync_file = match (&mount, &args.dir) {
        (Some(m), _) => Some(m.dir.join("fio-fsync")),
        (None, Some(dir)) => {
            _job_file = crate::overhead_fsync::JobFile::new(dir)?;
            Some(_job_file.path.clone())
        }
        (None, None) => None,
    };
    // The floor of the fsync job: an empty program on every event ioscope's programs attach to
    // (the block events are not all of them there: the sync calls', the page cache's, writeback's).
    let floor_events = if args.fsync && args.floor {
        let events = crate::overhead_fsync::attached_events(&bin)?;
        println!(
            "floor: an empty program on each of ioscope's {} attachments (same events, same kind: raw for \
             raw and BTF tracepoints, classic for classic ones)",
            events.len()
        );
        Some(events)
    } else {
        None
    };
    let fio = |device: &Path, seconds: u32| match &fsync_file {
        Some(f) => crate::overhead_fsync::fio_fsync(f, seconds),
        None => fio(device, seconds),
    };
    if args.fsync {
        println!(
            "fsync job: fio 4 KiB writes, fsync after each (--fsync=1, psync), {}",
            match &args.dir {
                Some(d) => format!("in {} (an existing filesystem)", d.display()),
                None => "on ext4 on the loop device".to_string(),
            }
        );
    }
    println!(
        "ioscope overhead: fio {} on {}{}, {} s per run, {} pairs (alternating order)",
        if args.fsync {
            "4 KiB writes with fsync after each"
        } else {
            "4 KiB randread, direct, libaio, iodepth 32"
        },
        device.display(),
        match (&args.device, args.buffered_loop) {
            (Some(_), _) => "",
            (None, _) if args.file.is_some() => " (a file on a real disk's filesystem)",
            (None, _) if args.dir.is_some() => "",
            (None, _) if args.ram => " (loop device over a file in /dev/shm: CPU-bound, the worst case)",
            (None, true) => " (loop device over a file, buffered: CPU-bound, the worst case)",
            (None, false) => " (loop device over a file, direct I/O to the disk below)",
        },
        args.seconds,
        args.pairs
    );

    // One run of fio beside `side`; returns (IOPS, ioscope's CPU in % of a core when it ran).
    let run = |side: Side| -> Result<(f64, Option<f64>)> {
        match side {
            Side::Without => Ok((fio(&device, args.seconds)?, None)),
            Side::EmptyPrograms => {
                let _programs = match &floor_events {
                    Some(events) => events.iter().map(|e| e.attach_empty()).collect::<Result<Vec<_>>>()?,
                    None => {
                        BLOCK_EVENTS.iter().map(|e| EmptyProgram::attach(e)).collect::<Result<Vec<_>>>()?
                    }
                };
                Ok((fio(&device, args.seconds)?, None))
            }
            Side::Ioscope => {
                let ioscope = Ioscope::start(&bin)?;
                let t0 = Instant::now();
                let c0 = cpu_ticks(ioscope.pid())?;
                let iops = fio(&device, args.seconds)?;
                let c1 = cpu_ticks(ioscope.pid())?;
                let wall = t0.elapsed().as_secs_f64();
                Ok((iops, Some((c1 - c0) as f64 / ticks_per_s / wall * 100.0)))
            }
        }
    };
    let sides: &[Side] = if args.floor {
        &[Side::Without, Side::EmptyPrograms, Side::Ioscope]
    } else {
        &[Side::Without, Side::Ioscope]
    };
    let (mut without, mut with, mut floor, mut cpu) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for pair in 0..args.pairs as usize {
        // The order turns from pair to pair, so that a drift in the machine's load hits every
        // side alike.
        for i in 0..sides.len() {
            let side = sides[(pair + i) % sides.len()];
            let (iops, ioscope_cpu) = run(side)?;
            let (label, cpu_note) = match side {
                Side::Without => {
                    without.push(iops);
                    ("without ioscope", String::new())
                }
                Side::EmptyPrograms => {
                    floor.push(iops);
                    ("empty programs", String::new())
                }
                Side::Ioscope => {
                    with.push(iops);
                    let percent = ioscope_cpu.unwrap_or(0.0);
                    cpu.push(percent);
                    ("with ioscope", format!("   ioscope CPU {percent:.2} %"))
                }
            };
            println!("  pair {}: {label:<15}{iops:>10.0} IOPS{cpu_note}", pair + 1);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let mut ratios = pair_ratios(&with, &without);
    let (lo, hi) = stats::median_interval(&ratios);
    let ratio = stats::median(&mut ratios);
    let target = if args.fsync { FSYNC_TARGET_RATIO } else { IOPS_TARGET_RATIO };
    let mut iops_verdict = stats::at_least(target, (lo, hi));
    let cpu_mean = mean(&cpu);
    println!(
        "IOPS with ioscope: median of the pairs {:.1} % of without (95 % interval {:.1} … {:.1} %; pairs \
         {:.1} % … {:.1} %; means {:.0} vs {:.0}; target ≥ {:.0} %)  {}",
        ratio * 100.0,
        lo * 100.0,
        hi * 100.0,
        ratios[0] * 100.0,
        ratios[ratios.len() - 1] * 100.0,
        mean(&with),
        mean(&without),
        target * 100.0,
        iops_verdict.describe(ratio >= target)
    );
    if !floor.is_empty() {
        let mut empty = pair_ratios(&floor, &without);
        let (elo, ehi) = stats::median_interval(&empty);
        let mut above = pair_ratios(&with, &floor);
        let (alo, ahi) = stats::median_interval(&above);
        println!(
            "empty programs on the same tracepoints (the kernel's floor for any eBPF tool): median of the \
             pairs {:.1} % of without (95 % interval {:.1} … {:.1} %); ioscope {:.1} % of the empty programs \
             ({:.1} … {:.1} %)",
            stats::median(&mut empty) * 100.0,
            elo * 100.0,
            ehi * 100.0,
            stats::median(&mut above) * 100.0,
            alo * 100.0,
            ahi * 100.0
        );
        if args.fsync {
            // The fsync job is judged against the floor: what ioscope's programs cost above what
            // any program there costs.
            iops_verdict = stats::at_least(FSYNC_TARGET_RATIO, (alo, ahi));
            println!(
                "ioscope against the empty programs: target ≥ {:.0} %  {}",
                FSYNC_TARGET_RATIO * 100.0,
                iops_verdict.describe(stats::median(&mut above) >= FSYNC_TARGET_RATIO)
            );
        }
    }
    // One more run with the kernel timing every program run (that timing has a cost of its own,
    // so it is kept out of the IOPS comparison above).
    let mut kernel_timed_share = None;
    {
        let _stats = crate::bpf_stats::BpfStats::on()?;
        if args.fsync {
            kernel_timed_share = kernel_timed_per_write(
                &bin,
                floor_events.as_deref(),
                || fio(&device, args.seconds),
                args.seconds,
            )?;
        } else {
            let ioscope = Ioscope::start(&bin)?;
            let t0 = Instant::now();
            let (ns0, runs0) = probe_run_time_ns(ioscope.pid())?;
            let iops = fio(&device, args.seconds)?;
            let (ns1, runs1) = probe_run_time_ns(ioscope.pid())?;
            let wall = t0.elapsed().as_secs_f64();
            // Every block request on the machine passes the probes (fio's, the disk's below a
            // loop device, anyone else's), so the cost is per request, and the share of a core is
            // the total.
            let requests = (runs1 - runs0).max(1);
            let ns_per_request = (ns1 - ns0) as f64 / requests as f64;
            let core = (ns1 - ns0) as f64 / 1e9 / wall * 100.0;
            println!(
                "probes' own cost, timed by the kernel (kernel.bpf_stats_enabled): {ns_per_request:.0} ns per \
                 block request, {:.0} requests/s on the machine, {core:.1} % of one core (fio at {iops:.0} IOPS)",
                requests as f64 / wall
            );
        }
    }
    println!(
        "ioscope CPU under that load: {cpu_mean:.2} % of one core (target < {CPU_TARGET_PERCENT} %)  {}",
        verdict(cpu_mean < CPU_TARGET_PERCENT)
    );
    println!(
        "note: on a shared or busy machine run-to-run noise can exceed the difference measured; the \
         interval says how far"
    );
    let kernel_timed_fail = kernel_timed_share.is_some_and(|share| share >= 1.0 - FSYNC_TARGET_RATIO);
    if iops_verdict == stats::Verdict::Fail || cpu_mean >= CPU_TARGET_PERCENT || kernel_timed_fail {
        bail!("overhead above target");
    }
    Ok(())
}

/// The fsync job's programs timed by the kernel, per fio write (each write is one write + fsync
/// and every program on its path runs for it): the empty programs' total when `floor` is given
/// (one run with them attached), then ioscope's, program by program (one run beside it); what
/// ioscope's take above the floor, and that as a share of a write at the IOPS of the same run
/// (returned; None without a floor).
fn kernel_timed_per_write(
    bin: &Path,
    floor: Option<&[crate::overhead_fsync::Attachment]>,
    fio: impl Fn() -> Result<f64>,
    seconds: u32,
) -> Result<Option<f64>> {
    use crate::bpf_stats::{delta, programs_of};
    let floor_ns = match floor {
        Some(events) => {
            let _programs = events.iter().map(|e| e.attach_empty()).collect::<Result<Vec<_>>>()?;
            let me = std::process::id();
            let before = programs_of(me)?;
            let iops = fio()?;
            let runs = delta(&before, &programs_of(me)?);
            let ns: u64 = runs.iter().map(|p| p.run_time_ns).sum();
            let n: u64 = runs.iter().map(|p| p.run_cnt).sum();
            let writes = (iops * f64::from(seconds)).max(1.0);
            println!(
                "kernel-timed, the empty programs: {:.2} µs per write + fsync ({:.1} runs of {:.0} ns; fio at \
                 {iops:.0} IOPS)",
                ns as f64 / writes / 1000.0,
                n as f64 / writes,
                ns as f64 / n.max(1) as f64
            );
            Some(ns as f64 / writes)
        }
        None => None,
    };
    let ioscope = Ioscope::start(bin)?;
    let before = programs_of(ioscope.pid())?;
    let iops = fio()?;
    let mut runs = delta(&before, &programs_of(ioscope.pid())?);
    drop(ioscope);
    runs.retain(|p| p.run_cnt > 0);
    runs.sort_by_key(|p| std::cmp::Reverse(p.run_time_ns));
    let writes = (iops * f64::from(seconds)).max(1.0);
    let ns: u64 = runs.iter().map(|p| p.run_time_ns).sum();
    let n: u64 = runs.iter().map(|p| p.run_cnt).sum();
    println!(
        "kernel-timed, ioscope's programs: {:.2} µs per write + fsync ({:.1} runs; fio at {iops:.0} IOPS, a write \
         + fsync every {:.0} µs); the costliest:",
        ns as f64 / writes / 1000.0,
        n as f64 / writes,
        1e6 / iops.max(1.0)
    );
    for p in runs.iter().take(12) {
        println!(
            "    {:<16} {:>5.2} runs, {:>4.0} ns a run: {:>4.0} ns per write",
            p.name,
            p.run_cnt as f64 / writes,
            p.run_time_ns as f64 / p.run_cnt as f64,
            p.run_time_ns as f64 / writes
        );
    }
    if let Some(floor_ns) = floor_ns {
        let above = ns as f64 / writes - floor_ns;
        let share = above / (1e9 / iops.max(1.0));
        println!(
            "kernel-timed, above the empty programs: {:.2} µs per write + fsync, {:.1} % of a write at {iops:.0} \
             IOPS (target < {:.0} %)  {}",
            above / 1000.0,
            share * 100.0,
            (1.0 - FSYNC_TARGET_RATIO) * 100.0,
            verdict(share < 1.0 - FSYNC_TARGET_RATIO)
        );
        return Ok(Some(share));
    }
    Ok(None)
}

/// Each pair's IOPS of side `x` over side `y` (runs of one pair are adjacent), sorted.
fn pair_ratios(x: &[f64], y: &[f64]) -> Vec<f64> {
    let mut r: Vec<f64> = x.iter().zip(y).map(|(x, y)| x / y).collect();
    r.sort_by(f64::total_cmp);
    r
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "FAIL"
    }
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

fn which(tool: &str) -> Result<()> {
    let found = Command::new("sh").args(["-c", &format!("command -v {tool}")]).output()?.status.success();
    if !found {
        bail!("{tool} is not installed (apt-get install {tool})");
    }
    Ok(())
}

/// (Σ run_time_ns, max run_cnt) over the BPF programs process `pid` holds. The most frequent
/// program runs once per block request (block_io_start, issue, completion), so the max run count
/// is the number of requests on the machine.
fn probe_run_time_ns(pid: u32) -> Result<(u64, u64)> {
    let programs = crate::bpf_stats::programs_of(pid)?;
    Ok((programs.iter().map(|p| p.run_time_ns).sum(), programs.iter().map(|p| p.run_cnt).max().unwrap_or(0)))
}

/// One fio run; returns the read IOPS.
fn fio(target: &Path, seconds: u32) -> Result<f64> {
    let args = crate::fio::randread_4k(
        "ioscope-overhead",
        target,
        u64::from(seconds),
        &["--direct=1", "--ioengine=libaio", "--iodepth=32", "--readonly"],
    );
    Ok(crate::fio::run(&args)?.iops)
}

/// A file for `--file`: an existing one is used as is; a missing one is written (1 GiB of
/// non-zero data, so no filesystem can skip it as sparse) and removed on drop.
struct TestFile(Option<PathBuf>);

impl TestFile {
    const SIZE: usize = 1 << 30;

    fn ensure(path: &Path) -> Result<TestFile> {
        if path.exists() {
            if !path.is_file() {
                bail!("--file {}: not a regular file", path.display());
            }
            return Ok(TestFile(None));
        }
        use std::io::Write;
        let mut f =
            std::fs::File::create_new(path).with_context(|| format!("creating {}", path.display()))?;
        let guard = TestFile(Some(path.to_path_buf()));
        let chunk: Vec<u8> = (0..1usize << 20).map(|i| (i % 251) as u8 | 1).collect();
        for _ in 0..Self::SIZE / chunk.len() {
            f.write_all(&chunk).with_context(|| format!("writing {}", path.display()))?;
        }
        f.sync_all()?;
        Ok(guard)
    }
}

impl Drop for TestFile {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A 1 GiB loop device over a file in /var/tmp (written once, so reads are real), detached on drop.
/// With `direct`, the loop driver reads the file with O_DIRECT: every read reaches the disk.
struct LoopDevice {
    path: PathBuf,
    image: PathBuf,
}

impl LoopDevice {
    fn new(direct: bool, ram: bool) -> Result<LoopDevice> {
        let dir = if ram { "/dev/shm" } else { "/var/tmp" };
        let image = PathBuf::from(format!("{dir}/ioscope-overhead-{}.img", std::process::id()));
        let status = Command::new("dd")
            .args(["if=/dev/zero", &format!("of={}", image.display()), "bs=1M", "count=1024", "status=none"])
            .status()?;
        if !status.success() {
            bail!("writing {} failed", image.display());
        }
        let direct_io = if direct { "--direct-io=on" } else { "--direct-io=off" };
        let out = Command::new("losetup").args(["--find", "--show", direct_io]).arg(&image).output()?;
        if !out.status.success() {
            let _ = std::fs::remove_file(&image);
            bail!("losetup failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        Ok(LoopDevice { path, image })
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.path).status();
        let _ = std::fs::remove_file(&self.image);
    }
}
