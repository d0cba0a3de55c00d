//! Disk I/O, page cache, dirtying and throttling per cgroup v2 (JSON `cgroups[]`), and where the
//! cgroup's files exist, the kernel's own per-cgroup figures.
//!
//! The eBPF figures are the per-process rows of the interval added up by the process's cgroup:
//!
//! ```text
//! read_bytes_s, write_bytes_s, read_iops, write_iops = Σ io_processes[] of the cgroup
//!     (disk I/O credited at submission: block_io_start runs in the submitter's context, which
//!      gives its cgroup id; flusher writeback is the kernel threads', in the root cgroup)
//! accesses_s, misses_s = Σ cache_processes[] of the cgroup (per second)
//! hit_pct        = 100 × Σ hits / Σ accesses            (null without accesses)
//! dirtied_pages_s = Σ dirtied / interval
//! throttled_ms_s  = Σ ms paused in balance_dirty_pages / interval
//! ```
//!
//! A process's page-cache counts go to the cgroup the probes last saw it in (read when its entry
//! is made, at exec, at a rename and when it is moved, `cgroup:cgroup_attach_task`): a process
//! moved to another cgroup takes its interval along.
//!
//! Sync calls per cgroup are the sync probes' rows added up by the caller's cgroup (the cgroup of
//! each (process, call, file)'s last call; src/model/syncs.rs has the per-row figures):
//!
//! ```text
//! sync_calls          = Σ completed calls since ioscope started
//! sync_calls_interval = Σ Δcalls over the interval
//! sync_p99_s          = p99 of the added-up log2 µs histograms (interpolated, at most sync_max_s)
//! sync_max_s          = the longest completed call          (both null without a completed call)
//! sync_running        = calls in progress now; sync_running_s = the age of the oldest
//! ```
//!
//! I/O wait per cgroup is the I/O-wait model's (src/model/iowait.rs), beside the other figures:
//!
//! ```text
//! io_wait_s, io_wait_by_cause_s = iowait.cgroups[] of the same id (Σ seconds its threads were
//!     blocked on I/O in the interval, by cause); 0 when none waited, null without the probes
//! ```
//!
//! The files' figures (`io_stat`, `io_pressure`, `memory_pressure`, `memory`) are rates of the
//! cumulative counters between the two samples (null when the file is missing, e.g. v2 without
//! the io controller: then on a hybrid host the v1 `blkio` counters, `io_stat.source` says which).

use std::collections::BTreeMap;

use serde::Serialize;

use super::cgroup_names::{self, CgroupName};
use super::counter::{delta, per_second};
use super::io_processes::IoProcessModel;
use super::iowait::IowaitModel;
use super::page_cache::{hit_pct, PageCacheProcessModel};
use super::psi::{self, PsiView};
use crate::model::block::percentile;
use crate::sample::cgroups::CgroupSample;
use crate::sample::Sample;

/// JSON: `cgroups[]`, the busiest disk users first.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CgroupModel {
    /// cgroup v2 id (the directory's inode number; 0: processes whose cgroup is not known).
    pub id: u64,
    /// Path below the cgroup2 mount ("" when not known yet).
    pub path: String,
    #[serde(flatten)]
    pub name: CgroupName,
    /// Processes seen in the interval (pids of the block and page-cache rows).
    pub pids: Vec<u32>,
    pub read_bytes_s: f64,
    pub write_bytes_s: f64,
    pub read_iops: f64,
    pub write_iops: f64,
    pub accesses_s: f64,
    pub misses_s: f64,
    pub hit_pct: Option<f64>,
    pub dirtied_pages_s: f64,
    pub throttled_ms_s: f64,
    /// Sync calls (fsync and friends) of the cgroup's processes since ioscope started.
    pub sync_calls: u64,
    pub sync_calls_interval: u64,
    pub sync_p99_s: Option<f64>,
    pub sync_max_s: Option<f64>,
    pub sync_running: u32,
    pub sync_running_s: f64,
    /// Seconds its threads were blocked on I/O in the interval, together, and per cause (the
    /// I/O-wait model's `iowait.cgroups[]`); null without the I/O-wait probes.
    pub io_wait_s: Option<f64>,
    pub io_wait_by_cause_s: Option<BTreeMap<&'static str, f64>>,
    /// The cgroup's `io.stat` (or v1 blkio) rates; null when neither file exists.
    pub io_stat: Option<CgroupIoRates>,
    pub io_pressure: Option<PsiView>,
    pub memory_pressure: Option<PsiView>,
    /// `memory.stat` gauges; null when the file does not exist.
    pub memory: Option<CgroupMemoryModel>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CgroupIoRates {
    /// "io.stat", or "blkio" (v1; "blkio /path" when the v1 cgroup's path differs from v2's).
    pub source: String,
    pub read_bytes_s: f64,
    pub write_bytes_s: f64,
    pub read_iops: f64,
    pub write_iops: f64,
}

/// Bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CgroupMemoryModel {
    pub source: String,
    pub file: u64,
    pub dirty: u64,
    pub writeback: u64,
    /// The memory limit (smaller of v2 `memory.max` and `memory.high`, or v1
    /// `memory.limit_in_bytes`); null when unlimited.
    pub limit: Option<u64>,
}

#[derive(Default)]
struct Acc {
    path: String,
    pids: Vec<u32>,
    read_bytes_s: f64,
    write_bytes_s: f64,
    read_iops: f64,
    write_iops: f64,
    accesses: u64,
    misses: u64,
    hits: u64,
    dirtied: u64,
    throttled_ms: f64,
}

impl Acc {
    fn pid(&mut self, pid: u32, path: &str) {
        if !self.pids.contains(&pid) {
            self.pids.push(pid);
        }
        if self.path.is_empty() {
            self.path = path.to_string();
        }
    }
}

/// One row per cgroup with eBPF activity in the interval or with files read in this sample.
pub fn compute(
    prev: Option<&Sample>,
    cur: &Sample,
    secs: f64,
    io: &[IoProcessModel],
    cache: &[PageCacheProcessModel],
    iowait: Option<&IowaitModel>,
) -> Vec<CgroupModel> {
    let Some(prev) = prev else { return Vec::new() };
    let mut by_id: BTreeMap<u64, Acc> = BTreeMap::new();
    for p in io {
        let a = by_id.entry(p.cgroup_id).or_default();
        a.pid(p.pid, &p.cgroup);
        a.read_bytes_s += p.read_bytes_s;
        a.write_bytes_s += p.write_bytes_s;
        a.read_iops += p.read_iops;
        a.write_iops += p.write_iops;
    }
    for p in cache {
        let a = by_id.entry(p.cgroup_id).or_default();
        a.pid(p.pid, &p.cgroup);
        a.accesses += p.accesses;
        a.misses += p.misses;
        a.hits += p.accesses - p.misses.min(p.accesses);
        a.dirtied += p.dirtied;
        a.throttled_ms += p.throttled_ms;
    }
    for f in &cur.cgroups {
        let a = by_id.entry(f.id).or_default();
        if a.path.is_empty() {
            a.path = f.path.clone();
        }
    }
    let syncs = syncs_by_cgroup(prev, cur);
    for (id, s) in &syncs {
        if s.calls_interval > 0 || s.running > 0 {
            let a = by_id.entry(*id).or_default();
            for &pid in &s.pids {
                a.pid(pid, &s.path);
            }
        }
    }
    // A cgroup whose threads waited has a row, with the waiting processes.
    for w in iowait.iter().flat_map(|w| &w.processes).filter(|p| p.wait_s > 0.0) {
        by_id.entry(w.cgroup_id).or_default().pid(w.pid, "");
    }
    for w in iowait.iter().flat_map(|w| &w.cgroups) {
        by_id.entry(w.cgroup_id).or_default();
    }
    let files = |s: &Sample, id: u64| s.cgroups.iter().find(|f| f.id == id).cloned();
    let mut rows: Vec<CgroupModel> = by_id
        .into_iter()
        .map(|(id, mut a)| {
            a.pids.sort_unstable();
            let (p, c) = (files(prev, id), files(cur, id));
            let sync = syncs.get(&id);
            let wait = iowait.map(|w| w.cgroups.iter().find(|c| c.cgroup_id == id));
            let sync_max = sync.filter(|s| s.calls > 0).map(|s| s.max_ns as f64 / 1e9);
            let name = if id == 0 {
                CgroupName { kind: "other", name: "(unknown cgroup)".into(), ..Default::default() }
            } else {
                cgroup_names::parse(&a.path)
            };
            CgroupModel {
                id,
                name,
                pids: a.pids,
                read_bytes_s: a.read_bytes_s,
                write_bytes_s: a.write_bytes_s,
                read_iops: a.read_iops,
                write_iops: a.write_iops,
                accesses_s: per_second(a.accesses, secs),
                misses_s: per_second(a.misses, secs),
                hit_pct: hit_pct(a.hits, a.accesses),
                dirtied_pages_s: per_second(a.dirtied, secs),
                throttled_ms_s: if secs > 0.0 { a.throttled_ms / secs } else { 0.0 },
                sync_calls: sync.map_or(0, |s| s.calls),
                sync_calls_interval: sync.map_or(0, |s| s.calls_interval),
                sync_p99_s: sync_max
                    .and_then(|max| percentile(&sync?.hist, 0.99).map(|us| (us / 1e6).min(max))),
                sync_max_s: sync_max,
                sync_running: sync.map_or(0, |s| s.running),
                sync_running_s: sync.map_or(0.0, |s| s.running_s),
                io_wait_s: wait.map(|c| c.map_or(0.0, |c| c.wait_s)),
                io_wait_by_cause_s: wait.map(|c| c.map(|c| c.by_cause_s.clone()).unwrap_or_default()),
                io_stat: io_rates(p.as_ref(), c.as_ref(), secs),
                io_pressure: c.as_ref().and_then(|c| {
                    let prev = p.as_ref().and_then(|p| p.io_pressure.as_ref());
                    c.io_pressure.as_ref().map(|r| psi::view(prev, r))
                }),
                memory_pressure: c.as_ref().and_then(|c| {
                    let prev = p.as_ref().and_then(|p| p.memory_pressure.as_ref());
                    c.memory_pressure.as_ref().map(|r| psi::view(prev, r))
                }),
                memory: c.as_ref().and_then(|c| c.memory.as_ref()).map(|m| CgroupMemoryModel {
                    source: m.source.clone(),
                    file: m.file_bytes,
                    dirty: m.dirty_bytes,
                    writeback: m.writeback_bytes,
                    limit: m.limit_bytes,
                }),
                path: a.path,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        (b.read_bytes_s + b.write_bytes_s)
            .total_cmp(&(a.read_bytes_s + a.write_bytes_s))
            .then(b.accesses_s.total_cmp(&a.accesses_s))
            .then(a.path.cmp(&b.path))
    });
    rows
}

/// One cgroup's sync calls, added up over its (process, call, file) rows.
#[derive(Default)]
struct SyncAcc {
    path: String,
    pids: Vec<u32>,
    calls: u64,
    calls_interval: u64,
    max_ns: u64,
    hist: Vec<u64>,
    running: u32,
    running_s: f64,
}

/// The sync probes' rows of `cur` by the caller's cgroup id.
fn syncs_by_cgroup(prev: &Sample, cur: &Sample) -> BTreeMap<u64, SyncAcc> {
    let mut out: BTreeMap<u64, SyncAcc> = BTreeMap::new();
    let Some(s) = &cur.bpf.syncs else { return out };
    let was: std::collections::HashMap<_, u64> = prev
        .bpf
        .syncs
        .iter()
        .flat_map(|p| &p.calls)
        .map(|c| ((c.pid, c.syscall.as_str(), c.file.major, c.file.minor, c.file.ino), c.calls))
        .collect();
    for c in &s.calls {
        let a = out.entry(c.cgroup_id).or_default();
        if a.path.is_empty() {
            a.path.clone_from(&c.cgroup);
        }
        let before = was.get(&(c.pid, c.syscall.as_str(), c.file.major, c.file.minor, c.file.ino));
        let new = c.calls.saturating_sub(before.copied().filter(|&b| b <= c.calls).unwrap_or(0));
        if new > 0 && !a.pids.contains(&c.pid) {
            a.pids.push(c.pid);
        }
        a.calls += c.calls;
        a.calls_interval += new;
        a.max_ns = a.max_ns.max(c.max_ns);
        if a.hist.len() < c.hist.len() {
            a.hist.resize(c.hist.len(), 0);
        }
        for (h, n) in a.hist.iter_mut().zip(&c.hist) {
            *h += n;
        }
    }
    for r in &s.running {
        let a = out.entry(r.cgroup_id).or_default();
        if a.path.is_empty() {
            a.path.clone_from(&r.cgroup);
        }
        if !a.pids.contains(&r.pid) {
            a.pids.push(r.pid);
        }
        a.running += 1;
        a.running_s = a.running_s.max(cur.mono_ns.saturating_sub(r.start_mono_ns) as f64 / 1e9);
    }
    out
}

/// Rates of the io counters; null unless both samples have them from the same source.
fn io_rates(p: Option<&CgroupSample>, c: Option<&CgroupSample>, secs: f64) -> Option<CgroupIoRates> {
    let (p, c) = (p?.io.as_ref()?, c?.io.as_ref()?);
    (p.source == c.source).then(|| CgroupIoRates {
        source: c.source.clone(),
        read_bytes_s: per_second(delta(p.read_bytes, c.read_bytes), secs),
        write_bytes_s: per_second(delta(p.write_bytes, c.write_bytes), secs),
        read_iops: per_second(delta(p.reads, c.reads), secs),
        write_iops: per_second(delta(p.writes, c.writes), secs),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::cgroups::CgroupIoCounters;

    fn io_row(pid: u32, cgroup_id: u64, cgroup: &str, read: f64, write: f64) -> IoProcessModel {
        IoProcessModel {
            pid,
            cgroup_id,
            cgroup: cgroup.into(),
            read_bytes_s: read,
            write_bytes_s: write,
            read_iops: read / 4096.0,
            write_iops: write / 4096.0,
            ..Default::default()
        }
    }

    fn cache_row(
        pid: u32,
        cgroup_id: u64,
        accesses: u64,
        misses: u64,
        dirtied: u64,
    ) -> PageCacheProcessModel {
        PageCacheProcessModel {
            pid,
            cgroup_id,
            accesses,
            misses,
            dirtied,
            throttled_ms: 50.0,
            ..Default::default()
        }
    }

    #[test]
    fn rows_add_up_their_processes_and_hit_rate_weighs_accesses() {
        let io = [
            io_row(1, 10, "/a.service", 1000.0, 0.0),
            io_row(1, 10, "/a.service", 500.0, 100.0), // same process, second disk
            io_row(2, 20, "/b.service", 0.0, 8192.0),
        ];
        // a: 100 accesses all missed (a reader process), 300 accesses all hit (another) → 75 %.
        let cache = [cache_row(1, 10, 100, 100, 0), cache_row(3, 10, 300, 0, 4), cache_row(2, 20, 0, 0, 8)];
        let prev = Sample::default();
        let rows = compute(Some(&prev), &Sample::default(), 2.0, &io, &cache, None);
        assert_eq!(rows.len(), 2);
        let a = rows.iter().find(|r| r.id == 10).unwrap();
        assert_eq!((a.read_bytes_s, a.write_bytes_s, a.pids.clone()), (1500.0, 100.0, vec![1, 3]));
        assert_eq!(a.hit_pct, Some(75.0));
        assert_eq!((a.accesses_s, a.misses_s, a.dirtied_pages_s, a.throttled_ms_s), (200.0, 50.0, 2.0, 50.0));
        assert_eq!((a.name.kind, a.name.name.as_str()), ("systemd", "a.service"));
        let b = rows.iter().find(|r| r.id == 20).unwrap();
        assert_eq!((b.write_bytes_s, b.hit_pct), (8192.0, None));
        // The busiest first.
        assert_eq!(rows[0].id, 20);
        // No interval yet: no rows.
        assert!(compute(None, &Sample::default(), 0.0, &io, &cache, None).is_empty());
    }

    #[test]
    fn io_wait_is_the_iowait_models_cgroup_row_and_a_waiting_cgroup_gets_a_row() {
        use crate::model::iowait::{IowaitCgroupModel, IowaitProcessModel};
        let causes = |sync: f64| [("other", 0.0), ("sync", sync)].into_iter().collect::<BTreeMap<_, _>>();
        let w = IowaitModel {
            processes: vec![IowaitProcessModel { pid: 7, cgroup_id: 30, wait_s: 1.5, ..Default::default() }],
            cgroups: vec![IowaitCgroupModel { cgroup_id: 30, wait_s: 1.5, by_cause_s: causes(1.5) }],
        };
        let io = [io_row(1, 10, "/a.service", 1000.0, 0.0)];
        let rows = compute(Some(&Sample::default()), &Sample::default(), 2.0, &io, &[], Some(&w));
        let c = rows.iter().find(|r| r.id == 30).expect("the waiting cgroup's row");
        assert_eq!((c.io_wait_s, c.pids.clone()), (Some(1.5), vec![7]));
        assert_eq!(c.io_wait_by_cause_s.as_ref().unwrap()["sync"], 1.5);
        // Its threads did not wait: 0; without the probes: unknown.
        let a = rows.iter().find(|r| r.id == 10).unwrap();
        assert_eq!(a.io_wait_s, Some(0.0));
        let rows = compute(Some(&Sample::default()), &Sample::default(), 2.0, &io, &[], None);
        assert_eq!((rows.len(), rows[0].io_wait_s), (1, None));
    }

    #[test]
    fn samples_keep_the_raw_figures_and_old_recordings_still_load() {
        // Recordings store Samples as JSON: the cgroup files and the cache rows' cgroups survive.
        let mut s = Sample {
            cgroups: vec![CgroupSample { id: 9, path: "/a".into(), ..Default::default() }],
            ..Default::default()
        };
        s.bpf.page_cache = Some(crate::sample::PageCacheSample {
            processes: vec![crate::sample::CacheProcessSample {
                pid: 5,
                cgroup_id: 9,
                cgroup: "/a".into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        let back: Sample = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        // A sample recorded before: no `cgroups`, cache rows without cgroup fields.
        let old = r#"{"mono_ns":1,"bpf":{"page_cache":{"processes":[{"pid":5,"comm":"cat","counters":{"read_pages":8}}]}}}"#;
        let old: Sample = serde_json::from_str(old).unwrap();
        assert!(old.cgroups.is_empty());
        assert_eq!(old.bpf.page_cache.unwrap().processes[0].cgroup_id, 0);
    }

    #[test]
    fn sync_calls_add_up_per_cgroup_with_their_running_ones() {
        use crate::sample::syncs::{SyncCallCounters, SyncFile, SyncRunning, SyncSample};
        let calls = |pid: u32, ino: u64, cgroup_id: u64, n: u64, bucket: usize, max_ns: u64| {
            let mut hist = vec![0; 32];
            hist[bucket] = n;
            SyncCallCounters {
                pid,
                cgroup_id,
                cgroup: format!("/c{cgroup_id}"),
                syscall: "fsync".into(),
                file: SyncFile { major: 7, minor: 0, ino, path: None },
                calls: n,
                max_ns,
                hist,
                ..Default::default()
            }
        };
        let with = |mono_s: u64, calls: Vec<SyncCallCounters>, running: Vec<SyncRunning>| {
            let mut s = Sample { mono_ns: mono_s * 1_000_000_000, ..Default::default() };
            s.bpf.syncs = Some(SyncSample { attached: Default::default(), calls, running });
            s
        };
        // Cgroup 10: two processes, 99 calls in [1, 2) ms and 1 of 40 ms; cgroup 20: none done,
        // one running for 3 s (no other I/O in the interval: it has a row all the same).
        let prev = with(10, vec![calls(1, 5, 10, 90, 11, 1_900_000)], vec![]);
        let cur = with(
            12,
            vec![calls(1, 5, 10, 99, 11, 1_900_000), calls(2, 6, 10, 1, 16, 40_000_000)],
            vec![SyncRunning {
                pid: 3,
                cgroup_id: 20,
                cgroup: "/c20".into(),
                syscall: "fsync".into(),
                start_mono_ns: 9_000_000_000,
                ..Default::default()
            }],
        );
        let rows = compute(Some(&prev), &cur, 2.0, &[], &[], None);
        let a = rows.iter().find(|r| r.id == 10).unwrap();
        assert_eq!((a.sync_calls, a.sync_calls_interval, a.sync_running), (100, 10, 0));
        assert_eq!((a.pids.clone(), a.path.as_str()), (vec![1, 2], "/c10"));
        assert_eq!(a.sync_max_s, Some(0.04));
        // p99: rank 99 of 100, the 99th of 99 in bucket 11 ([1024, 2048) µs): its upper edge,
        // capped at the longest call of all (40 ms: not reached).
        assert_eq!(a.sync_p99_s, Some(0.002048));
        let b = rows.iter().find(|r| r.id == 20).unwrap();
        assert_eq!((b.sync_calls, b.sync_p99_s, b.sync_max_s, b.sync_running), (0, None, None, 1));
        assert_eq!((b.sync_running_s, b.path.as_str(), b.pids.clone()), (3.0, "/c20", vec![3]));
        // A cgroup whose calls are all older than the interval gets no row for them.
        let rows =
            compute(Some(&cur), &with(13, cur.bpf.syncs.clone().unwrap().calls, vec![]), 1.0, &[], &[], None);
        assert!(rows.is_empty(), "{rows:#?}");
    }

    #[test]
    fn file_figures_are_rates_of_the_same_source() {
        let files = |rb: u64, source: &str| CgroupSample {
            id: 7,
            path: "/x".into(),
            io: Some(CgroupIoCounters {
                source: source.into(),
                read_bytes: rb,
                reads: rb / 4096,
                ..Default::default()
            }),
            ..Default::default()
        };
        let prev = Sample { cgroups: vec![files(4096, "io.stat")], ..Default::default() };
        let cur = Sample { cgroups: vec![files(4096 * 11, "io.stat")], ..Default::default() };
        let rows = compute(Some(&prev), &cur, 2.0, &[], &[], None);
        let io = rows[0].io_stat.as_ref().unwrap();
        assert_eq!((rows[0].path.as_str(), io.read_bytes_s, io.read_iops), ("/x", 20480.0, 5.0));
        let cur = Sample { cgroups: vec![files(4096 * 11, "blkio")], ..Default::default() };
        assert_eq!(compute(Some(&prev), &cur, 2.0, &[], &[], None)[0].io_stat, None);
    }
}
