//! Sync calls per (process, call, file) (src/model/README.md, "Sync calls"), from the sync probes' counters in
//! the Samples (src/sample/syncs.rs). The figures are cumulative since ioscope started (a slow
//! fsync a minute ago still matters; the rows of a process gone go a minute after its last call,
//! src/bpf/syncs.rs SYNC_LINGER), except `calls_interval` and `others_throttled_s`:
//!
//! ```text
//! calls             = completed calls
//! total_s           = Σ call durations (entry → exit; io_uring: submission → completion)
//! mean_s            = total_s / calls
//! p50_s, p99_s      = from the log2 µs histogram, interpolated within the bucket, at most max_s
//! max_s             = the longest completed call
//! running           = calls in progress now; running_s = the age of the oldest of them
//! written_bytes     = bytes the filesystem wrote back in the calling thread during the calls,
//!                     completed and running (ext4_writepages_result, iomap_writeback_folio);
//!                     running_written_bytes: the running calls' part
//! calls_interval    = Δcalls over the interval
//! calls_s           = calls_interval / interval length
//! interval_mean_s   = Δtotal_s / Δcalls over the interval (0 without a call completed in it)
//! interval_p99_s    = from the interval's Δ histogram, as p99_s (at most max_s)
//! others_throttled_s = seconds other processes spent paused in balance_dirty_pages during the
//!                     interval, for a row with a call completed or running in it (else 0)
//! ```

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::model::block::percentile;
use crate::sample::syncs::{SyncCallCounters, SyncFile};
use crate::sample::Sample;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SyncModel {
    pub pid: u32,
    pub comm: String,
    /// The caller's cgroup v2 id (0 when unknown).
    pub cgroup_id: u64,
    pub syscall: String,
    /// The file's path; null when the call has no file (`sync`, `msync`, an io_uring registered
    /// file) or its path is not known (then `dev` and `ino` name it).
    pub path: Option<String>,
    /// "major:minor" of the file's filesystem; empty without a file.
    pub dev: String,
    pub ino: u64,
    pub calls: u64,
    pub calls_interval: u64,
    /// The interval's completed calls per second, their mean and p99 duration.
    pub calls_s: f64,
    pub interval_mean_s: f64,
    pub interval_p99_s: f64,
    pub total_s: f64,
    pub mean_s: f64,
    pub p50_s: f64,
    pub p99_s: f64,
    pub max_s: f64,
    pub running: u32,
    pub running_s: f64,
    pub written_bytes: u64,
    /// Of `written_bytes`, what the running calls wrote back so far: the filesystem reports a
    /// writeback when its writepages call returns, so a call's first big writepages shows 0
    /// until then (the view shows "—").
    pub running_written_bytes: u64,
    pub others_throttled_s: f64,
}

impl SyncModel {
    /// What the call was on, for a line or a cell: the path, else `dev:inode`, else what the call
    /// covers.
    pub fn target(&self) -> String {
        match (&self.path, self.ino) {
            (Some(p), _) => p.clone(),
            (None, 0) => match self.syscall.as_str() {
                "sync" => "(all filesystems)".into(),
                "msync" => "(mapped memory)".into(),
                _ => "(unknown file)".into(),
            },
            (None, ino) => format!("{}:{ino}", self.dev),
        }
    }
}

type Key = (u32, String, u32, u32, u64);

fn key(pid: u32, syscall: &str, f: &SyncFile) -> Key {
    (pid, syscall.to_string(), f.major, f.minor, f.ino)
}

/// Every (process, call, file) with a completed or running call, the longest running first, then
/// the slowest.
pub fn compute(prev: Option<&Sample>, cur: &Sample, secs: f64) -> Vec<SyncModel> {
    let Some(s) = &cur.bpf.syncs else { return Vec::new() };
    let before: HashMap<Key, &SyncCallCounters> = prev
        .and_then(|p| p.bpf.syncs.as_ref())
        .map(|p| p.calls.iter().map(|c| (key(c.pid, &c.syscall, &c.file), c)).collect())
        .unwrap_or_default();
    let throttled = throttled_s_by_pid(prev, cur);
    let mut rows: BTreeMap<Key, SyncModel> = BTreeMap::new();
    for c in &s.calls {
        let r = row(&mut rows, c.pid, &c.comm, c.cgroup_id, &c.syscall, &c.file);
        fill_completed(r, c);
        let was = before.get(&key(c.pid, &c.syscall, &c.file)).copied();
        let zero = SyncCallCounters::default();
        // A row whose counters went back (a reused pid's new row) starts from zero.
        let base = match was {
            Some(w) if w.calls <= c.calls => Some(w),
            _ if prev.is_some() => Some(&zero),
            _ => None,
        };
        if let Some(w) = base {
            fill_interval(r, w, c, secs);
        }
    }
    for x in &s.running {
        let r = row(&mut rows, x.pid, &x.comm, x.cgroup_id, &x.syscall, &x.file);
        r.running += 1;
        let age = cur.mono_ns.saturating_sub(x.start_mono_ns) as f64 / 1e9;
        r.running_s = r.running_s.max(age);
        r.written_bytes += x.written_bytes;
        r.running_written_bytes += x.written_bytes;
    }
    let mut out: Vec<SyncModel> = rows.into_values().collect();
    for r in &mut out {
        if r.running > 0 || r.calls_interval > 0 {
            r.others_throttled_s = throttled.iter().filter(|(pid, _)| **pid != r.pid).map(|(_, s)| s).sum();
        }
    }
    out.sort_by(|a, b| b.running_s.total_cmp(&a.running_s).then(b.max_s.total_cmp(&a.max_s)));
    out
}

fn fill_completed(r: &mut SyncModel, c: &SyncCallCounters) {
    r.calls = c.calls;
    r.total_s = c.total_ns as f64 / 1e9;
    r.max_s = c.max_ns as f64 / 1e9;
    r.mean_s = if c.calls > 0 { r.total_s / c.calls as f64 } else { 0.0 };
    let q = |q: f64| percentile(&c.hist, q).map_or(0.0, |us| (us / 1e6).min(r.max_s));
    r.p50_s = q(0.50);
    r.p99_s = q(0.99);
    r.written_bytes = c.written_bytes;
}

/// The interval's figures: the calls completed since `was`.
fn fill_interval(r: &mut SyncModel, was: &SyncCallCounters, c: &SyncCallCounters, secs: f64) {
    r.calls_interval = c.calls - was.calls;
    if r.calls_interval == 0 {
        return;
    }
    r.calls_s = if secs > 0.0 { r.calls_interval as f64 / secs } else { 0.0 };
    r.interval_mean_s = c.total_ns.saturating_sub(was.total_ns) as f64 / 1e9 / r.calls_interval as f64;
    let hist: Vec<u64> = c
        .hist
        .iter()
        .enumerate()
        .map(|(i, n)| n.saturating_sub(was.hist.get(i).copied().unwrap_or(0)))
        .collect();
    r.interval_p99_s = percentile(&hist, 0.99).map_or(0.0, |us| (us / 1e6).min(r.max_s));
}

/// The row of (pid, syscall, file), made on first use.
fn row<'a>(
    rows: &'a mut BTreeMap<Key, SyncModel>,
    pid: u32,
    comm: &str,
    cgroup_id: u64,
    syscall: &str,
    f: &SyncFile,
) -> &'a mut SyncModel {
    let r = rows.entry(key(pid, syscall, f)).or_insert_with(|| SyncModel {
        pid,
        comm: comm.to_string(),
        cgroup_id,
        syscall: syscall.to_string(),
        dev: if f.ino == 0 { String::new() } else { format!("{}:{}", f.major, f.minor) },
        ino: f.ino,
        ..Default::default()
    });
    if r.path.is_none() {
        r.path = f.path.clone();
    }
    r
}

/// Seconds each process spent throttled in balance_dirty_pages over the interval (page-cache
/// probes' per-process pause jiffies).
fn throttled_s_by_pid(prev: Option<&Sample>, cur: &Sample) -> HashMap<u32, f64> {
    let (Some(p), Some(c)) = (prev.and_then(|p| p.bpf.page_cache.as_ref()), cur.bpf.page_cache.as_ref())
    else {
        return HashMap::new();
    };
    if c.hz == 0 {
        return HashMap::new();
    }
    let was: HashMap<u32, u64> = p.processes.iter().map(|x| (x.pid, x.counters.throttle_jiffies)).collect();
    c.processes
        .iter()
        .filter_map(|x| {
            let d = x.counters.throttle_jiffies.saturating_sub(was.get(&x.pid).copied().unwrap_or(0));
            (d > 0).then(|| (x.pid, d as f64 / c.hz as f64))
        })
        .collect()
}

/// The calls running longer than `secs`, the oldest first.
pub fn running_longer_than(rows: &[SyncModel], secs: f64) -> impl Iterator<Item = &SyncModel> {
    rows.iter().filter(move |r| r.running > 0 && r.running_s > secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::syncs::{SyncRunning, SyncSample};
    use crate::sample::{CacheCountersSample, CacheProcessSample, PageCacheSample};

    fn file(ino: u64, path: Option<&str>) -> SyncFile {
        SyncFile { major: 7, minor: 1, ino, path: path.map(str::to_string) }
    }

    fn sample(
        mono_s: u64,
        calls: Vec<SyncCallCounters>,
        running: Vec<SyncRunning>,
        throttled: &[(u32, u64)],
    ) -> Sample {
        let mut s = Sample { mono_ns: mono_s * 1_000_000_000, ..Default::default() };
        s.bpf.syncs = Some(SyncSample { attached: Default::default(), calls, running });
        let processes = throttled
            .iter()
            .map(|&(pid, j)| CacheProcessSample {
                pid,
                counters: CacheCountersSample { throttle_jiffies: j, ..Default::default() },
                ..Default::default()
            })
            .collect();
        s.bpf.page_cache = Some(PageCacheSample { hz: 250, processes, ..Default::default() });
        s
    }

    fn done(pid: u32, calls: u64, total_ns: u64, max_ns: u64, hist: Vec<u64>) -> SyncCallCounters {
        SyncCallCounters {
            pid,
            comm: "db".into(),
            syscall: "fsync".into(),
            file: file(12, Some("/data/big.zip")),
            calls,
            total_ns,
            max_ns,
            written_bytes: 1 << 20,
            hist,
            ..Default::default()
        }
    }

    #[test]
    fn completed_and_running_calls_by_hand() {
        // Two calls: 1 ms and 3 ms (buckets of 1000 µs and 3000 µs: 10 and 12).
        let mut hist = vec![0; 32];
        hist[10] = 1;
        hist[12] = 1;
        let prev = sample(
            10,
            vec![done(5, 1, 1_000_000, 1_000_000, {
                let mut h = vec![0; 32];
                h[10] = 1;
                h
            })],
            vec![],
            &[(5, 0), (6, 100)],
        );
        let running = SyncRunning {
            pid: 9,
            tid: 9,
            comm: "java".into(),
            syscall: "fsync".into(),
            file: file(40, None),
            start_mono_ns: 8_500_000_000,
            written_bytes: 4096,
            ..Default::default()
        };
        let cur =
            sample(12, vec![done(5, 2, 4_000_000, 3_000_000, hist)], vec![running], &[(5, 50), (6, 350)]);
        let rows = compute(Some(&prev), &cur, 2.0);
        assert_eq!(rows.len(), 2);
        // The running call first: 3.5 s old; others (pids 5 and 6) were throttled 0.2 + 1.0 s.
        let j = &rows[0];
        assert_eq!((j.pid, j.running, j.calls), (9, 1, 0));
        assert!((j.running_s - 3.5).abs() < 1e-9);
        assert_eq!(j.target(), "7:1:40");
        assert!((j.others_throttled_s - 1.2).abs() < 1e-9);
        let d = &rows[1];
        assert_eq!((d.calls, d.calls_interval, d.written_bytes), (2, 1, 1 << 20));
        assert!((d.total_s - 0.004).abs() < 1e-12 && (d.mean_s - 0.002).abs() < 1e-12);
        assert!((d.max_s - 0.003).abs() < 1e-12);
        // p99 lies in the 2048–4096 µs bucket, capped at the max.
        assert!((d.p99_s - 0.003).abs() < 1e-12, "{}", d.p99_s);
        assert!(d.p50_s >= 0.000512 && d.p50_s <= 0.001024, "{}", d.p50_s);
        // Only pid 6's throttling counts as others' for pid 5.
        assert!((d.others_throttled_s - 1.0).abs() < 1e-9);
        assert_eq!(running_longer_than(&rows, 1.0).count(), 1);
    }

    #[test]
    fn without_the_probes_there_are_no_rows() {
        assert!(compute(None, &Sample::default(), 0.0).is_empty());
    }
}
