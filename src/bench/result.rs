//! One job's result: what the application saw (throughput, latency) beside what the system did
//! during the run (disk bytes and requests, queue depth, page cache, dirty pages, CPU), and the
//! plain-language line saying what bound it. Everything here is a pure function of the engine's
//! figures and two Samples (before and after the job), so it is tested from hand-made fixtures.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::spec::{size_label, Engine, JobSpec, Mode, Rw};
use crate::model::counter::delta;
use crate::model::Model;
use crate::sample::Sample;

/// The figures the engine (and the runner around it) measured for one job.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunFigures {
    pub ops: u64,
    pub bytes: u64,
    /// First request to the end of the final fsync, seconds.
    pub elapsed_s: f64,
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
    pub lat_p999_us: f64,
    pub lat_max_us: f64,
    pub lat_mean_us: f64,
    /// The final fsync, seconds (0 without one).
    pub fsync_s: f64,
    /// The fsyncs of `--fsync every=N`: their number and total time.
    pub periodic_fsyncs: u64,
    pub periodic_fsync_s: f64,
    /// Δ(utime + stime) of the ioscope process over the job, seconds.
    pub cpu_s: f64,
    /// The file's dirty + writeback pages just before the final fsync (cachestat; the machine's
    /// Dirty + Writeback from meminfo where cachestat is missing), bytes.
    pub dirty_before_fsync_bytes: Option<u64>,
    pub interrupted: bool,
}

/// JSON: `jobs[]`. `mb_s` is in decimal MB (10⁶ bytes) per second; the text and the TUI show
/// [`JobResult::mib_s`] (binary, like every other size they show).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct JobResult {
    pub rw: Option<Rw>,
    /// Block size, bytes.
    pub bs: u64,
    pub mode: Option<Mode>,
    pub qd: u32,
    /// The engine the job ran on: io_uring, or threads (the fallback, and always for mmap).
    pub engine: Option<Engine>,
    /// Application bytes / elapsed / 10⁶.
    pub mb_s: f64,
    /// Requests / elapsed.
    pub iops: f64,
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
    pub lat_p999_us: f64,
    pub lat_max_us: f64,
    pub lat_mean_us: f64,
    /// Bytes the device moved during the job (read + written, from /proc/diskstats).
    pub disk_bytes: u64,
    pub disk_read_bytes: u64,
    pub disk_write_bytes: u64,
    pub disk_reads: u64,
    pub disk_writes: u64,
    /// disk_bytes / application bytes: > 1 is amplification (readahead, metadata), < 1 means the
    /// cache absorbed or served part of it.
    pub amplification: Option<f64>,
    /// Average request size at the device, KiB (iostat's areq-sz over reads and writes).
    pub dev_req_kb: f64,
    /// Average queue depth at the device (iostat's aqu-sz) and its %util.
    pub dev_aqu_sz: f64,
    pub dev_util: f64,
    /// Reads served without the disk: max(0, 1 − disk_read_bytes / bytes) × 100. Buffered and
    /// mmap reads only (null otherwise).
    pub cache_hit_pct: Option<f64>,
    /// Pages dirtied on the whole machine during the job (Δnr_dirtied).
    pub pages_dirtied: u64,
    /// ioscope's CPU time / elapsed × 100: % of one core.
    pub cpu_pct: f64,
    /// The final fsync, seconds.
    pub fsync_s: f64,
    pub periodic_fsyncs: u64,
    pub periodic_fsync_s: f64,
    pub dirty_before_fsync_bytes: Option<u64>,
    pub ops: u64,
    pub bytes: u64,
    pub runtime_s: f64,
    /// The plain-language line: what bound this job.
    pub verdict: String,
    /// Why the job did not run (e.g. O_DIRECT refused), or failed.
    pub skipped: Option<String>,
    /// Stopped early by Ctrl-C: the figures cover the part that ran.
    pub interrupted: bool,
    /// What the cold-cache preparation did ("dropped: 0 of 131072 pages cached").
    pub cache_note: Option<String>,
}

/// A utilisation at or above this is a busy device: the job waited for it.
pub const DEVICE_BUSY_UTIL: f64 = 90.0;
/// Requests at least this large make a device throughput-bound rather than IOPS-bound, KiB.
pub const LARGE_REQUEST_KB: f64 = 128.0;
/// A final fsync taking at least this share of the job is what the user waited for.
pub const FSYNC_DOMINATES: f64 = 0.25;
/// CPU use (% of one core, per thread) at which a job is CPU-bound.
pub const CPU_BOUND_PCT: f64 = 80.0;

impl JobResult {
    /// A job that did not run.
    pub fn skipped(spec: &JobSpec, why: String) -> JobResult {
        JobResult {
            rw: Some(spec.rw),
            bs: spec.bs,
            mode: Some(spec.mode),
            qd: spec.qd,
            verdict: format!("not run: {why}"),
            skipped: Some(why),
            ..Default::default()
        }
    }

    /// Combines the engine's figures with what the device (`device`, a /proc/diskstats name) and
    /// the memory counters did between `before` and `after`.
    pub fn from_run(
        spec: &JobSpec,
        f: &RunFigures,
        before: &Sample,
        after: &Sample,
        device: Option<&str>,
    ) -> JobResult {
        let secs = f.elapsed_s;
        let per_s = |n: f64| if secs > 0.0 { n / secs } else { 0.0 };
        let mut r = JobResult {
            rw: Some(spec.rw),
            bs: spec.bs,
            mode: Some(spec.mode),
            qd: spec.qd,
            mb_s: per_s(f.bytes as f64) / 1e6,
            iops: per_s(f.ops as f64),
            lat_p50_us: f.lat_p50_us,
            lat_p99_us: f.lat_p99_us,
            lat_p999_us: f.lat_p999_us,
            lat_max_us: f.lat_max_us,
            lat_mean_us: f.lat_mean_us,
            pages_dirtied: delta(before.vmstat.nr_dirtied, after.vmstat.nr_dirtied),
            cpu_pct: per_s(f.cpu_s) * 100.0,
            fsync_s: f.fsync_s,
            periodic_fsyncs: f.periodic_fsyncs,
            periodic_fsync_s: f.periodic_fsync_s,
            dirty_before_fsync_bytes: f.dirty_before_fsync_bytes,
            ops: f.ops,
            bytes: f.bytes,
            runtime_s: secs,
            interrupted: f.interrupted,
            ..Default::default()
        };
        let disk = |s: &Sample| device.and_then(|d| s.disks.iter().find(|x| x.name == d).cloned());
        if let (Some(b), Some(a)) = (disk(before), disk(after)) {
            r.disk_read_bytes = delta(b.sectors_read, a.sectors_read) * 512;
            r.disk_write_bytes = delta(b.sectors_written, a.sectors_written) * 512;
            r.disk_reads = delta(b.reads_completed, a.reads_completed);
            r.disk_writes = delta(b.writes_completed, a.writes_completed);
            r.disk_bytes = r.disk_read_bytes + r.disk_write_bytes;
            let requests = r.disk_reads + r.disk_writes;
            r.dev_req_kb = if requests > 0 { r.disk_bytes as f64 / 1024.0 / requests as f64 } else { 0.0 };
            // aqu-sz and %util: the devices pane's formulas, over the job's duration.
            let model = Model::compute(Some(before), after, Duration::from_secs_f64(secs.max(0.0)));
            if let Some(m) = model.devices.iter().find(|m| Some(m.name.as_str()) == device) {
                r.dev_aqu_sz = m.aqu_sz;
                r.dev_util = m.util;
            }
        }
        if f.bytes > 0 {
            r.amplification = device.map(|_| r.disk_bytes as f64 / f.bytes as f64);
        }
        if !spec.rw.is_write() && spec.mode != Mode::Direct && f.bytes > 0 && device.is_some() {
            r.cache_hit_pct = Some((1.0 - r.disk_read_bytes as f64 / f.bytes as f64).max(0.0) * 100.0);
        }
        r.verdict = verdict(&r);
        r
    }

    /// The application's throughput in MiB/s (2²⁰ bytes): what the table shows.
    pub fn mib_s(&self) -> f64 {
        self.mb_s * 1e6 / MIB
    }

    pub fn spec(&self) -> Option<JobSpec> {
        Some(JobSpec { rw: self.rw?, bs: self.bs, mode: self.mode?, qd: self.qd })
    }
}

/// Bytes for the verdict lines in binary units, as the table's columns: "1.8 GiB", "512 MiB",
/// "4.0 KiB".
pub fn binary_bytes(b: f64) -> String {
    let (v, unit) = if b >= GIB {
        (b / GIB, "GiB")
    } else if b >= MIB {
        (b / MIB, "MiB")
    } else if b >= 1024.0 {
        (b / 1024.0, "KiB")
    } else {
        return format!("{} B", b.round() as u64);
    };
    if v >= 100.0 {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.1} {unit}")
    }
}

/// "2,610": thousands separated, as the verdicts print counts.
pub fn grouped(n: f64) -> String {
    let s = format!("{}", n.max(0.0).round() as u64);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

const MIB: f64 = 1_048_576.0;
const GIB: f64 = 1_073_741_824.0;

/// A size in binary units for request sizes: "1 KiB", "512 KiB", "1 MiB", "27.5 KiB".
fn kib(kb: f64) -> String {
    if kb >= 1024.0 {
        let m = kb / 1024.0;
        if (m - m.round()).abs() < 0.05 {
            format!("{} MiB", m.round())
        } else {
            format!("{m:.1} MiB")
        }
    } else if (kb - kb.round()).abs() < 0.05 {
        format!("{} KiB", kb.round())
    } else {
        format!("{kb:.1} KiB")
    }
}

/// What bound a job, from its numbers alone (prefixed "stopped after N s;" for a job Ctrl-C cut
/// short). The rules, first match wins:
/// 1. not run / no I/O; no block device under the file (tmpfs): memory speed;
/// 2. the final fsync took ≥ 25 % of the job: "fsync at end took 4.2 s: 1.8 GiB dirty" (or, with
///    nothing dirty, the device's cache flush and the journal);
/// 3. buffered or mmap reads with under 1 % of the bytes read from disk: "served from page cache";
/// 4. buffered writes without fsync, under 10 % written to disk: "absorbed by the page cache";
/// 5. reads that moved ≥ 1.5× the bytes from disk: "read amplification … (readahead)";
/// 6. buffered or mmap I/O whose device requests are ≥ 4× the block size: readahead-fed reads,
///    or write-back (writes copied into the cache, the flusher sends large requests);
/// 7. device ≥ 90 % busy: requests ≥ 128 KiB → throughput-bound, else IOPS-bound;
/// 8. CPU ≥ 80 % of a core per thread (up to the job's threads): CPU-bound;
/// 9. QD1: latency-bound (one request at a time × its latency);
/// 10. otherwise: not saturated, with the device's %util and queue depth.
pub fn verdict(r: &JobResult) -> String {
    let mut line = verdict_line(r);
    if let Some(split) = split_note(r) {
        line = format!("{line}; {split}");
    }
    if r.interrupted && r.skipped.is_none() && r.ops > 0 {
        return format!("stopped after {:.1} s; {line}", r.runtime_s);
    }
    line
}

/// A direct job whose requests reached the device in pieces: each request issued became more than
/// one device request (10 % margin for the odd metadata read). In ordinary pages a large direct
/// request is cut at the device's segment limit (`max_segments` pages per request); buffered jobs are
/// the page cache's business, not split requests.
fn split_note(r: &JobResult) -> Option<String> {
    if r.mode != Some(Mode::Direct) || r.ops == 0 || r.skipped.is_some() {
        return None;
    }
    let requests = r.disk_reads + r.disk_writes;
    let per_op = requests as f64 / r.ops as f64;
    if r.amplification.is_none() || per_op < 1.1 {
        return None;
    }
    Some(format!(
        "split: {per_op:.1} device requests of {} per {} request (segment limit)",
        kib(r.dev_req_kb),
        size_label(r.bs)
    ))
}

fn verdict_line(r: &JobResult) -> String {
    if let Some(why) = &r.skipped {
        return format!("not run: {why}");
    }
    if r.ops == 0 {
        return "no requests completed".into();
    }
    let is_write = r.rw.is_some_and(Rw::is_write);
    let mode = r.mode.unwrap_or(Mode::Buffered);
    let bs = size_label(r.bs);
    if r.fsync_s > 0.1 && r.fsync_s >= FSYNC_DOMINATES * r.runtime_s {
        let pct = 100.0 * r.fsync_s / r.runtime_s;
        if r.dirty_before_fsync_bytes.is_some_and(|d| (d as f64) < 0.01 * r.bytes as f64) {
            return format!(
                "fsync at end took {:.1} s with nothing dirty in the page cache: the device's cache flush and \
                 the journal ({pct:.0}% of the job)",
                r.fsync_s
            );
        }
        let dirty = r
            .dirty_before_fsync_bytes
            .map(|d| format!(": {} dirty", binary_bytes(d as f64)))
            .unwrap_or_default();
        return format!(
            "fsync at end took {:.1} s{dirty} ({:.0}% of the job)",
            r.fsync_s,
            100.0 * r.fsync_s / r.runtime_s
        );
    }
    let has_device = r.amplification.is_some();
    if !has_device {
        return format!(
            "no block device under the file (tmpfs, ramfs): memory speed, {} IOPS × {bs}",
            grouped(r.iops)
        );
    }
    if has_device && !is_write && mode != Mode::Direct && (r.disk_read_bytes as f64) < 0.01 * r.bytes as f64 {
        return format!(
            "served from page cache: {} disk reads for {} read",
            grouped(r.disk_reads as f64),
            binary_bytes(r.bytes as f64)
        );
    }
    if has_device
        && is_write
        && mode != Mode::Direct
        && r.fsync_s == 0.0
        && r.periodic_fsyncs == 0
        && (r.disk_write_bytes as f64) < 0.1 * r.bytes as f64
    {
        return format!(
            "absorbed by the page cache: {} written, {} reached the disk (the rest is dirty)",
            binary_bytes(r.bytes as f64),
            binary_bytes(r.disk_write_bytes as f64)
        );
    }
    if has_device && !is_write && r.disk_read_bytes as f64 >= 1.5 * r.bytes as f64 {
        return format!(
            "read amplification {:.1}×: the disk read {} for {} used (readahead in {} requests)",
            r.disk_read_bytes as f64 / r.bytes as f64,
            binary_bytes(r.disk_read_bytes as f64),
            binary_bytes(r.bytes as f64),
            kib(r.dev_req_kb)
        );
    }
    let coalesced = r.dev_req_kb * 1024.0 >= 4.0 * r.bs as f64;
    if has_device && mode != Mode::Direct && coalesced && r.disk_reads + r.disk_writes > 0 {
        if !is_write {
            return format!(
                "readahead-fed: {bs} reads served from pages read ahead in {} requests ({} from disk)",
                kib(r.dev_req_kb),
                binary_bytes(r.disk_read_bytes as f64)
            );
        }
        return format!(
            "write-back: {bs} writes copied into the page cache ({:.0} µs mean); the disk got {} requests",
            r.lat_mean_us,
            kib(r.dev_req_kb)
        );
    }
    if has_device && r.dev_util >= DEVICE_BUSY_UTIL {
        let requests = (r.disk_reads + r.disk_writes) as f64 / r.runtime_s.max(1e-9);
        if r.dev_req_kb >= LARGE_REQUEST_KB {
            return format!(
                "throughput-bound: {} MiB/s at the device in {} requests, {:.0}% busy",
                grouped(r.disk_bytes as f64 / r.runtime_s.max(1e-9) / MIB),
                kib(r.dev_req_kb),
                r.dev_util
            );
        }
        return format!(
            "IOPS-bound: {} IOPS × {} at the device, {:.0}% busy",
            grouped(requests),
            kib(r.dev_req_kb),
            r.dev_util
        );
    }
    if r.cpu_pct >= CPU_BOUND_PCT * r.qd.max(1) as f64 || r.cpu_pct >= CPU_BOUND_PCT * cpus() as f64 {
        return format!(
            "CPU-bound: {:.0}% of a core in ioscope (copies, syscalls); the device was {:.0}% busy",
            r.cpu_pct, r.dev_util
        );
    }
    if r.qd == 1 {
        return format!(
            "latency-bound at QD1: one {bs} request at a time × {:.0} µs mean = {} IOPS",
            r.lat_mean_us,
            grouped(r.iops)
        );
    }
    format!(
        "not saturated: device {:.0}% busy, queue depth {:.1} of {} (mean latency {:.0} µs)",
        r.dev_util, r.dev_aqu_sz, r.qd, r.lat_mean_us
    )
}

/// Online CPUs (the CPU-bound rule caps the threads that can run at once).
fn cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::DiskStat;

    fn sample(
        reads: u64,
        sectors_read: u64,
        writes: u64,
        sectors_written: u64,
        io_ms: u64,
        weighted_ms: u64,
        dirtied: u64,
    ) -> Sample {
        let mut s = Sample::default();
        s.vmstat.nr_dirtied = dirtied;
        s.disks.push(DiskStat {
            major: 7,
            minor: 0,
            name: "loop0".into(),
            reads_completed: reads,
            sectors_read,
            writes_completed: writes,
            sectors_written,
            io_ms,
            weighted_io_ms: weighted_ms,
            ..Default::default()
        });
        s
    }

    fn spec(rw: Rw, bs: u64, mode: Mode, qd: u32) -> JobSpec {
        JobSpec { rw, bs, mode, qd }
    }

    /// The job's result with the test file on loop0 (the device `sample` describes).
    fn on_loop0(spec: JobSpec, f: &RunFigures, before: &Sample, after: &Sample) -> JobResult {
        JobResult::from_run(&spec, f, before, after, Some("loop0"))
    }

    /// 1 KiB direct random reads for 2 s: 5,220 requests, the device 100 % busy (2000 of 2000 ms),
    /// aqu-sz 1.0: the cloud disk's story, computed by hand.
    #[test]
    fn iops_bound_direct_reads() {
        let f = RunFigures {
            ops: 5220,
            bytes: 5220 * 1024,
            elapsed_s: 2.0,
            lat_mean_us: 383.0,
            cpu_s: 0.1,
            ..Default::default()
        };
        let before = sample(100, 800, 0, 0, 1000, 1000, 0);
        let after = sample(100 + 5220, 800 + 5220 * 2, 0, 0, 3000, 3000, 0);
        let r = on_loop0(spec(Rw::RandRead, 1024, Mode::Direct, 1), &f, &before, &after);
        assert_eq!(r.iops, 2610.0);
        assert!((r.mb_s - 2.67264).abs() < 1e-9, "{}", r.mb_s); // 5220 × 1024 / 2 / 10⁶
        assert_eq!((r.disk_reads, r.disk_read_bytes, r.disk_bytes), (5220, 5220 * 1024, 5220 * 1024));
        assert_eq!(r.dev_req_kb, 1.0);
        assert_eq!((r.dev_util, r.dev_aqu_sz), (100.0, 1.0));
        assert_eq!(r.amplification, Some(1.0));
        assert_eq!(r.cache_hit_pct, None, "direct I/O has no cache hits");
        assert!((r.cpu_pct - 5.0).abs() < 1e-9);
        assert_eq!(r.verdict, "IOPS-bound: 2,610 IOPS × 1 KiB at the device, 100% busy");
        let cut = JobResult { interrupted: true, ..r.clone() };
        assert_eq!(
            verdict(&cut),
            "stopped after 2.0 s; IOPS-bound: 2,610 IOPS × 1 KiB at the device, 100% busy"
        );
    }

    /// 1 MiB direct reads that reached the device as two requests each: the split is named.
    #[test]
    fn a_split_direct_request_is_named() {
        let f = RunFigures { ops: 100, bytes: 100 << 20, elapsed_s: 1.0, ..Default::default() };
        let before = sample(0, 0, 0, 0, 0, 0, 0);
        let after = sample(200, 100 * 2048, 0, 0, 500, 500, 0);
        let r = on_loop0(spec(Rw::Read, 1 << 20, Mode::Direct, 1), &f, &before, &after);
        assert_eq!(r.dev_req_kb, 512.0);
        assert!(
            r.verdict.ends_with("; split: 2.0 device requests of 512 KiB per 1M request (segment limit)"),
            "{}",
            r.verdict
        );
        // One device request per request: nothing to name.
        let whole = sample(100, 100 * 2048, 0, 0, 500, 500, 0);
        let r = on_loop0(spec(Rw::Read, 1 << 20, Mode::Direct, 1), &f, &before, &whole);
        assert!(!r.verdict.contains("split"), "{}", r.verdict);
    }

    #[test]
    fn cached_reads_and_readahead_amplification() {
        let f = RunFigures { ops: 1000, bytes: 4_096_000, elapsed_s: 0.5, ..Default::default() };
        let s = sample(10, 10, 0, 0, 0, 0, 0);
        let r = on_loop0(spec(Rw::RandRead, 4096, Mode::Buffered, 1), &f, &s, &s);
        assert_eq!(r.cache_hit_pct, Some(100.0));
        assert_eq!(r.verdict, "served from page cache: 0 disk reads for 3.9 MiB read");
        // 4 KiB random reads where readahead fetched 128 KiB each: 32× the bytes.
        let after = sample(10 + 1000, 10 + 1000 * 256, 0, 0, 400, 400, 0);
        let r = on_loop0(spec(Rw::RandRead, 4096, Mode::Buffered, 1), &f, &s, &after);
        assert_eq!(r.cache_hit_pct, Some(0.0));
        assert_eq!(r.amplification, Some(32.0));
        assert_eq!(
            r.verdict,
            "read amplification 32.0×: the disk read 125 MiB for 3.9 MiB used (readahead in 128 KiB requests)"
        );
    }

    #[test]
    fn final_fsync_and_absorbed_writes() {
        let f = RunFigures {
            ops: 1900,
            bytes: 1900 << 20,
            elapsed_s: 6.0,
            fsync_s: 4.2,
            dirty_before_fsync_bytes: Some(1_900_000_000),
            ..Default::default()
        };
        let before = sample(0, 0, 0, 0, 0, 0, 1000);
        let after = sample(0, 0, 3800, 1900 * 2048, 5000, 40000, 1000 + 1900 * 256);
        let r = on_loop0(spec(Rw::Write, 1 << 20, Mode::Buffered, 1), &f, &before, &after);
        assert_eq!(r.pages_dirtied, 1900 * 256);
        assert_eq!(r.dev_req_kb, 512.0);
        assert_eq!(r.verdict, "fsync at end took 4.2 s: 1.8 GiB dirty (70% of the job)");
        let clean = RunFigures { dirty_before_fsync_bytes: Some(0), ..f.clone() };
        let r2 = on_loop0(spec(Rw::Write, 1 << 20, Mode::Direct, 1), &clean, &before, &after);
        assert_eq!(
            r2.verdict,
            "fsync at end took 4.2 s with nothing dirty in the page cache: the device's cache flush and the journal \
             (70% of the job); split: 2.0 device requests of 512 KiB per 1M request (segment limit)"
        );
        // The same writes with a quick fsync: the flusher's 512 KiB requests for 1 MiB writes are
        // not ≥ 4× larger, so the device decides (5000 ms busy of 6000: not saturated, QD1).
        let fast = RunFigures { fsync_s: 0.5, lat_mean_us: 800.0, ..f.clone() };
        let r = on_loop0(spec(Rw::Write, 1 << 20, Mode::Buffered, 1), &fast, &before, &after);
        assert!(r.verdict.starts_with("latency-bound at QD1"), "{}", r.verdict);
        let r = on_loop0(spec(Rw::Write, 4096, Mode::Buffered, 1), &fast, &before, &after);
        assert_eq!(
            r.verdict,
            "write-back: 4K writes copied into the page cache (800 µs mean); the disk got 512 KiB requests"
        );
        let r = on_loop0(
            spec(Rw::Read, 4096, Mode::Buffered, 1),
            &fast,
            &before,
            &sample(2000, 2000 * 1024, 0, 0, 3000, 3000, 0),
        );
        assert_eq!(
            r.verdict,
            "readahead-fed: 4K reads served from pages read ahead in 512 KiB requests (1000 MiB from disk)"
        );
        let quick = RunFigures { fsync_s: 0.0, dirty_before_fsync_bytes: None, elapsed_s: 1.0, ..f.clone() };
        let r = on_loop0(spec(Rw::Write, 1 << 20, Mode::Buffered, 1), &quick, &before, &before);
        assert_eq!(
            r.verdict,
            "absorbed by the page cache: 1.9 GiB written, 0 B reached the disk (the rest is dirty)"
        );
    }

    #[test]
    fn throughput_latency_cpu_and_unsaturated() {
        // 1 MiB direct reads, device busy, 1 MiB requests.
        let f = RunFigures {
            ops: 400,
            bytes: 400 << 20,
            elapsed_s: 1.0,
            lat_mean_us: 2500.0,
            ..Default::default()
        };
        let before = sample(0, 0, 0, 0, 0, 0, 0);
        let after = sample(400, 400 * 2048, 0, 0, 990, 990, 0);
        let r = on_loop0(spec(Rw::Read, 1 << 20, Mode::Direct, 1), &f, &before, &after);
        assert_eq!(r.verdict, "throughput-bound: 400 MiB/s at the device in 1 MiB requests, 99% busy");
        // The same at 50 % busy and QD1: latency-bound.
        let after = sample(400, 400 * 2048, 0, 0, 500, 500, 0);
        let r = on_loop0(spec(Rw::Read, 1 << 20, Mode::Direct, 1), &f, &before, &after);
        assert_eq!(r.verdict, "latency-bound at QD1: one 1M request at a time × 2500 µs mean = 400 IOPS");
        // QD8, half busy, 95 % CPU: CPU-bound only when ≥ 80 % per thread or all CPUs are busy.
        let cpu = RunFigures { cpu_s: 0.95, ..f.clone() };
        let r = on_loop0(spec(Rw::Read, 1 << 20, Mode::Direct, 1), &cpu, &before, &after);
        assert!(r.verdict.starts_with("CPU-bound: 95% of a core"), "{}", r.verdict);
        let r = on_loop0(spec(Rw::Read, 1 << 20, Mode::Direct, 8), &f, &before, &after);
        assert_eq!(r.verdict, "not saturated: device 50% busy, queue depth 0.5 of 8 (mean latency 2500 µs)");
    }

    #[test]
    fn no_device_means_no_disk_figures_and_skips_say_why() {
        let f = RunFigures { ops: 10, bytes: 40960, elapsed_s: 1.0, ..Default::default() };
        let s = Sample::default();
        let r = JobResult::from_run(&spec(Rw::Read, 4096, Mode::Buffered, 1), &f, &s, &s, None);
        assert_eq!((r.amplification, r.cache_hit_pct), (None, None));
        assert_eq!(r.verdict, "no block device under the file (tmpfs, ramfs): memory speed, 10 IOPS × 4K");
        let skipped =
            JobResult::skipped(&spec(Rw::Read, 4096, Mode::Direct, 1), "tmpfs refuses O_DIRECT".into());
        assert_eq!(skipped.verdict, "not run: tmpfs refuses O_DIRECT");
    }

    #[test]
    fn number_formats() {
        assert_eq!(grouped(2610.4), "2,610");
        assert_eq!(grouped(999.0), "999");
        assert_eq!(grouped(1_234_567.0), "1,234,567");
        assert_eq!(binary_bytes(1_900_000_000.0), "1.8 GiB");
        assert_eq!(binary_bytes(64.0 * MIB), "64.0 MiB");
        assert_eq!(binary_bytes(4096.0), "4.0 KiB");
        assert_eq!(binary_bytes(512.0), "512 B");
        assert_eq!(kib(27.5), "27.5 KiB");
        assert_eq!(kib(1024.0), "1 MiB");
    }
}
