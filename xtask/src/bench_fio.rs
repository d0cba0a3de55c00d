//! `cargo xtask bench-fio DIR`: ioscope bench against fio on the real disk under DIR — the
//! documented benchmark behind xtask/README.md's "bench-fio" (the CI test,
//! tests/live/live_bench_fio.rs, does the same on a loop device). Release build; the jobs, both
//! tools' runs, the tolerances and the verdict are the harness the test uses
//! (xtask/src/fio_agree.rs): for each job one warm-up round (not counted), then ROUNDS rounds of
//! both tools back to back, alternating which goes first; the median of the per-round ratios
//! ioscope/fio is reported with PASS/FAIL against the tolerances. The 4K QD32 job is judged as in
//! the test (ioscope's floor and Little's law; the device's reads are not counted here).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Parser;

use crate::fio_agree::{
    self, median, DeviceIo, Engine, Figures, Tools, LATENCY_TOLERANCE, THROUGHPUT_TOLERANCE,
};

#[derive(Debug, Parser)]
#[command(name = "cargo xtask bench-fio", about = "Compare ioscope bench with fio on a real disk")]
struct Args {
    /// Directory on the disk to measure (a 1 GiB file is created there and removed after).
    dir: PathBuf,
    /// Rounds per job (after one warm-up round that is not counted).
    #[arg(long, default_value_t = 9)]
    rounds: usize,
    /// Seconds per run of the time-limited jobs.
    #[arg(long, default_value_t = 2)]
    runtime: u32,
    /// Both tools' engine: auto (io_uring where it works here), io_uring, or threads (ioscope's
    /// pread/pwrite threads against fio's psync, one thread per request in flight).
    #[arg(long, default_value = "auto")]
    engine: String,
}

const FILE_SIZE: &str = "1g";

struct Remove(PathBuf);

impl Drop for Remove {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `/sys/dev/block/MAJ:MIN/stat` of the block device holding `file`.
fn device_stat_path(file: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(file).with_context(|| format!("stat {}", file.display()))?.dev();
    let path = PathBuf::from(format!("/sys/dev/block/{}:{}/stat", libc::major(dev), libc::minor(dev)));
    if !path.exists() {
        bail!("{} is not on a block device ({} is missing)", file.display(), path.display());
    }
    Ok(path)
}

pub fn run(args: &[String]) -> Result<()> {
    let a = Args::try_parse_from(std::iter::once("bench-fio".to_string()).chain(args.iter().cloned()))?;
    // Measured as users run it: the kernel's per-program timing off (crate::bpf_stats).
    let _bpf_stats = crate::bpf_stats::BpfStats::off();
    let chosen = match a.engine.as_str() {
        "auto" => None,
        "io_uring" => Some(Engine::IoUring),
        "threads" | "psync" => Some(Engine::Threads),
        other => bail!("--engine {other}: use auto, io_uring or threads"),
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("workspace root")?.to_path_buf();
    let bin = crate::perf::build_release(&root)?;
    let file = a.dir.join(".ioscope-fio-agree.tmp");
    if file.exists() {
        bail!("{} exists; remove it first", file.display());
    }
    let _remove = Remove(file.clone());
    fio_agree::lay_out(&file, FILE_SIZE)?;
    let mem = "malloc";
    println!("fio buffers: --mem={mem}");
    let engine = chosen.unwrap_or_else(|| Engine::detect(&file));
    println!("engine: {}", engine.describe());
    // The device under the file (a partition has its own counters), for the request sizes it saw.
    let stat = device_stat_path(&file)?;
    let device_io = || {
        let text = std::fs::read_to_string(&stat).unwrap_or_default();
        let fields: Vec<u64> = text.split_whitespace().filter_map(|f| f.parse().ok()).collect();
        DeviceIo::from_fields(&fields)
    };
    let tools = Tools {
        file: &file,
        size: FILE_SIZE,
        ioscope: &bin,
        engine,
        mem,
        device_io: Some(&device_io),
        judge_device_reads: false,
    };
    let rt = format!("{}s", a.runtime);
    let header = ["job", "fio MB/s", "IOPS", "p50 µs", "p99 µs", "ios MB/s", "IOPS", "p50 µs", "p99 µs"];
    println!(
        "{:<31} {:>9} {:>9} {:>8} {:>8} | {:>9} {:>9} {:>8} {:>8} | ioscope/fio: MB/s IOPS p50 p99  verdict",
        header[0], header[1], header[2], header[3], header[4], header[5], header[6], header[7], header[8]
    );
    let mut all_ok = true;
    for job in &fio_agree::jobs(&rt, &rt, "600") {
        // As in the CI test: a miss gets as many rounds again, judged together with the first.
        let o = tools.agree(job, a.rounds, a.rounds)?;
        let ok = o.misses.is_empty();
        all_ok &= ok;
        let [rm, ri, r50, r99] = o.ratios;
        let med = |v: &[Figures], g: fn(&Figures) -> f64| median(v.iter().map(g).collect());
        let (f, i) = (&o.fio, &o.ioscope);
        println!(
            "{:<31} {:>9.1} {:>9.0} {:>8.1} {:>8.1} | {:>9.1} {:>9.0} {:>8.1} {:>8.1} | {:>6.3} {:>6.3} {:>6.3} {:>6.3}  {}",
            job.name,
            med(f, |x| x.mb_s),
            med(f, |x| x.iops),
            med(f, |x| x.p50_us),
            med(f, |x| x.p99_us),
            med(i, |x| x.mb_s),
            med(i, |x| x.iops),
            med(i, |x| x.p50_us),
            med(i, |x| x.p99_us),
            rm,
            ri,
            r50,
            r99,
            if ok { "PASS" } else { "FAIL" }
        );
        let rounds: Vec<String> = f.iter().zip(i).map(|(a, b)| format!("{:.2}", b.mb_s / a.mb_s)).collect();
        println!("{:<31} MB/s ratio per round: {}", "", rounds.join(" "));
        let cpu = |v: &[Figures]| median(v.iter().map(|x| x.cpu_us_per_req).collect());
        println!("{:<31} CPU per request (median): fio {:.1} µs, ioscope {:.1} µs", "", cpu(f), cpu(i));
        let kib = |x: &Figures| x.device_kib_per_req.map_or("?".to_string(), |k| format!("{k:.0}"));
        let sizes: Vec<String> = f.iter().zip(i).map(|(a, b)| format!("{}/{}", kib(a), kib(b))).collect();
        println!("{:<31} KiB per device request per round, fio/ioscope: {}", "", sizes.join(" "));
        if let Some(first) = o.first_rounds {
            println!("{:<31} missed after {} rounds ({first:.3?}): {} more", "", a.rounds, a.rounds);
        }
        for miss in &o.misses {
            println!("{:<31} {miss}", "");
        }
    }
    println!(
        "\nmedians of {} rounds after a warm-up round (twice that for a job that missed at first); ratios are the median over rounds of ioscope/fio. PASS: MB/s and IOPS within \
         {:.0}%, p50 of the reads within {:.0}% (p99, and the write's p50, shown, not judged); the QD32 job, where fio's CPU \
         is the limit: ioscope at least fio less the tolerance and mean latency × IOPS = 32 within 10%",
        a.rounds,
        THROUGHPUT_TOLERANCE * 100.0,
        LATENCY_TOLERANCE * 100.0
    );
    if !all_ok {
        bail!("ioscope and fio disagree beyond the tolerances");
    }
    Ok(())
}
