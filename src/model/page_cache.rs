//! Page cache (eBPF): the system hit rate (cachestat-like), per-process hit rates (cachetop-like),
//! dirtying, dirty throttling, and a plausibility cross-check against the block layer.
//!
//! The definitions (src/model/README.md, "Page cache"), for one interval, from the probes' cumulative counters:
//!
//! ```text
//! accesses = Δread_pages + Δrss_file_bytes / page size
//!            (without kmem:rss_stat: Δread_pages + Δmapped_pages + Δfaults)
//! misses   = Δinserted_pages − Δwrite_inserted_pages           (never below 0)
//! hits     = accesses − min(misses, accesses)
//! hit %    = 100 × hits / accesses                              (null without accesses)
//! ```
//!
//! Misses can exceed accesses within one interval (readahead inserts pages before they are read);
//! the hit rate is then 0 %, never negative.

use std::collections::HashMap;

use serde::Serialize;

use super::counter::{delta, per_second};
use crate::sample::{CacheCountersSample, PageCacheSample, Sample};

/// One interval's page counts, derived from two sets of cumulative counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PageCacheCounts {
    pub accesses: u64,
    pub misses: u64,
    pub hits: u64,
    /// None when there were no accesses.
    pub hit_pct: Option<f64>,
    pub dirtied: u64,
    pub evicted: u64,
    /// Writers paused by `balance_dirty_pages` (pauses) and the time they slept, ms.
    pub throttle_pauses: u64,
    pub throttled_ms: f64,
    pub dio_reads: u64,
    pub dio_writes: u64,
    pub dio_read_bytes: u64,
    pub dio_write_bytes: u64,
}

impl PageCacheCounts {
    /// The formulas above. `hz` converts throttle pauses from jiffies to ms; `rss_page` is the
    /// page size when mmap accesses come from `kmem:rss_stat`, None for the fallback.
    pub fn between(
        p: &CacheCountersSample,
        c: &CacheCountersSample,
        hz: u64,
        rss_page: Option<u64>,
    ) -> PageCacheCounts {
        let d = |f: fn(&CacheCountersSample) -> u64| delta(f(p), f(c));
        let mapped = match rss_page {
            Some(page) => d(|x| x.rss_file_bytes) / page.max(1),
            None => d(|x| x.mapped_pages) + d(|x| x.faults),
        };
        let accesses = d(|x| x.read_pages) + mapped;
        let misses = d(|x| x.inserted_pages).saturating_sub(d(|x| x.write_inserted_pages));
        let hits = accesses - misses.min(accesses);
        let jiffies = d(|x| x.throttle_jiffies);
        PageCacheCounts {
            accesses,
            misses,
            hits,
            hit_pct: hit_pct(hits, accesses),
            dirtied: d(|x| x.dirtied_pages),
            evicted: d(|x| x.evicted_pages),
            throttle_pauses: d(|x| x.throttled),
            throttled_ms: if hz > 0 { jiffies as f64 * 1000.0 / hz as f64 } else { 0.0 },
            dio_reads: d(|x| x.dio_reads),
            dio_writes: d(|x| x.dio_writes),
            dio_read_bytes: d(|x| x.dio_read_bytes),
            dio_write_bytes: d(|x| x.dio_write_bytes),
        }
    }
}

/// `100 × hits / accesses`, None without accesses.
pub fn hit_pct(hits: u64, accesses: u64) -> Option<f64> {
    (accesses > 0).then(|| 100.0 * hits as f64 / accesses as f64)
}

/// JSON: `cache`. Null without the eBPF page-cache probes.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PageCacheModel {
    /// Pages in the interval, system-wide (all tasks, kernel threads and exited ones included).
    pub accesses: u64,
    pub misses: u64,
    pub hits: u64,
    pub hit_pct: Option<f64>,
    pub dirtied: u64,
    pub evicted: u64,
    /// The same per second.
    pub accesses_s: f64,
    pub misses_s: f64,
    pub hits_s: f64,
    pub dirtied_s: f64,
    pub evicted_s: f64,
    /// /proc/meminfo Buffers and Cached, bytes (the cachestat line shows them).
    pub buffers: u64,
    pub cached: u64,
    /// Throttling in the interval: processes paused, pauses, and their total sleep (ms).
    pub throttled_processes: usize,
    pub throttle_pauses: u64,
    pub throttled_ms: f64,
    /// The kernel's own dirty limits from `writeback:global_dirty_state` (bytes); null until seen.
    pub kernel_dirty: Option<KernelDirtyModel>,
    /// The last throttling pause seen (any time, not only this interval); null until one happened.
    pub last_throttle: Option<LastThrottleModel>,
    pub cross_check: CrossCheck,
    /// Tracepoints whose counters are live; a missing one means its figures read 0.
    pub attached: std::sync::Arc<Vec<String>>,
}

/// The kernel's dirty limits, bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct KernelDirtyModel {
    pub dirty: u64,
    pub writeback: u64,
    pub background_threshold: u64,
    pub threshold: u64,
    /// What `balance_dirty_pages()` throttles against: trails `threshold` when it changes.
    pub limit: u64,
    /// Seconds since the kernel last reported them.
    pub age_s: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LastThrottleModel {
    pub age_s: f64,
    /// Bytes: the limit and setpoint of the throttling domain, and the dirty memory it saw.
    pub limit: u64,
    pub setpoint: u64,
    pub dirty: u64,
    pub pause_ms: f64,
}

/// Misses × page size against what the block layer read in the same interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CrossCheck {
    pub misses_bytes: u64,
    /// Direct reads (bypass the cache, still read by the disk).
    pub dio_read_bytes: u64,
    /// /proc/vmstat pgpgin (kB → bytes): every block read, all devices.
    pub pgpgin_bytes: u64,
    /// /proc/diskstats sectors read × 512, whole disks only (partitions are inside them).
    pub disk_read_bytes: u64,
    /// None when plausible; otherwise what does not add up.
    pub mismatch: Option<String>,
}

/// Below this many bytes in an interval the comparison says nothing (metadata, timing).
const CROSS_CHECK_FLOOR: u64 = 8 << 20;

impl CrossCheck {
    /// Flags a gross mismatch: misses more than twice what the block layer read (counting error),
    /// or the block layer reading over four times what misses and direct reads explain (reads
    /// outside the page cache the probes see: swap-in, raw device reads with O_DIRECT elsewhere,
    /// filesystem metadata, or a probe that is not attached). A loop device doubles both sides
    /// (its own bio and the backing file's read), so ratios are used, not differences.
    pub fn new(
        misses_bytes: u64,
        dio_read_bytes: u64,
        pgpgin_bytes: u64,
        disk_read_bytes: u64,
    ) -> CrossCheck {
        let explained = misses_bytes + dio_read_bytes;
        let mismatch = if misses_bytes > CROSS_CHECK_FLOOR && misses_bytes > 2 * pgpgin_bytes {
            Some(format!(
                "cache misses ({} MiB) exceed twice what the disks read (pgpgin {} MiB)",
                misses_bytes >> 20,
                pgpgin_bytes >> 20
            ))
        } else if pgpgin_bytes > CROSS_CHECK_FLOOR && pgpgin_bytes > 4 * explained {
            Some(format!(
                "the disks read {} MiB (pgpgin) but cache misses and direct reads explain only {} MiB",
                pgpgin_bytes >> 20,
                explained >> 20
            ))
        } else {
            None
        };
        CrossCheck { misses_bytes, dio_read_bytes, pgpgin_bytes, disk_read_bytes, mismatch }
    }
}

/// JSON: `cache_processes[]`. Only processes with page-cache activity in the interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PageCacheProcessModel {
    pub pid: u32,
    pub comm: String,
    pub accesses: u64,
    pub misses: u64,
    pub hit_pct: Option<f64>,
    pub dirtied: u64,
    /// Time paused in `balance_dirty_pages` in the interval, ms.
    pub throttled_ms: f64,
    /// The interval's counts per second.
    pub accesses_s: f64,
    pub misses_s: f64,
    pub dirtied_s: f64,
    /// Bytes per second read from the cache (hits) and brought in from disk (misses).
    pub cache_read_bytes_s: f64,
    pub disk_read_bytes_s: f64,
    pub dirtied_bytes_s: f64,
    /// Ms paused per second of the interval.
    pub throttled_ms_s: f64,
    /// Direct I/O in the interval: it bypasses the cache (not counted as hits or misses).
    pub direct_io: bool,
    pub dio_read_bytes_s: f64,
    pub dio_write_bytes_s: f64,
    /// The process exited during the interval: these are its last counts.
    pub exited: bool,
    /// The cgroup v2 id and path the probes last saw the process in (0 and "" when unknown).
    pub cgroup_id: u64,
    pub cgroup: String,
}

impl PageCacheProcessModel {
    fn active(&self) -> bool {
        self.accesses + self.misses + self.dirtied > 0 || self.throttled_ms > 0.0 || self.direct_io
    }
}

/// The system line, or None without the probes (or for the first sample).
pub fn compute(prev: Option<&Sample>, cur: &Sample, secs: f64) -> Option<PageCacheModel> {
    let c = cur.bpf.page_cache.as_ref()?;
    let zero = PageCacheSample::default();
    // The first sample after attach: counts since attach are not an interval's.
    let p = match prev.and_then(|p| p.bpf.page_cache.as_ref()) {
        Some(p) => p,
        None if prev.is_some() => &zero,
        None => return None,
    };
    let page = cur.page_size.max(1);
    let rss_page = c.rss_mapped.then_some(page);
    let t = PageCacheCounts::between(&p.totals, &c.totals, c.hz, rss_page);
    let procs = processes(prev, cur, secs);
    let pgpgin_bytes = prev.map(|p| delta(p.vmstat.pgpgin, cur.vmstat.pgpgin) * 1024).unwrap_or(0);
    let disk_read_bytes = prev.map(|p| disk_read_sectors(p, cur) * 512).unwrap_or(0);
    let age = |ns: u64| cur.mono_ns.saturating_sub(ns) as f64 / 1e9;
    Some(PageCacheModel {
        accesses: t.accesses,
        misses: t.misses,
        hits: t.hits,
        hit_pct: t.hit_pct,
        dirtied: t.dirtied,
        evicted: t.evicted,
        accesses_s: per_second(t.accesses, secs),
        misses_s: per_second(t.misses, secs),
        hits_s: per_second(t.hits, secs),
        dirtied_s: per_second(t.dirtied, secs),
        evicted_s: per_second(t.evicted, secs),
        buffers: cur.memory.buffers_bytes,
        cached: cur.memory.cached_bytes,
        throttled_processes: procs.iter().filter(|p| p.throttled_ms > 0.0).count(),
        throttle_pauses: t.throttle_pauses,
        throttled_ms: t.throttled_ms,
        kernel_dirty: c.dirty_state.as_ref().map(|d| KernelDirtyModel {
            dirty: d.nr_dirty * page,
            writeback: d.nr_writeback * page,
            background_threshold: d.background_thresh * page,
            threshold: d.dirty_thresh * page,
            limit: d.dirty_limit * page,
            age_s: age(d.seen_mono_ns),
        }),
        last_throttle: c.last_throttle.as_ref().map(|l| LastThrottleModel {
            age_s: age(l.mono_ns),
            limit: l.limit * page,
            setpoint: l.setpoint * page,
            dirty: l.dirty * page,
            pause_ms: if c.hz > 0 { l.pause_jiffies as f64 * 1000.0 / c.hz as f64 } else { 0.0 },
        }),
        cross_check: CrossCheck::new(t.misses * page, t.dio_read_bytes, pgpgin_bytes, disk_read_bytes),
        attached: c.attached.clone(),
    })
}

/// Δ sectors read of whole disks (a partition's reads are also its disk's).
fn disk_read_sectors(prev: &Sample, cur: &Sample) -> u64 {
    let partition: HashMap<&str, bool> =
        cur.block_settings.iter().map(|b| (b.name.as_str(), b.is_partition)).collect();
    let before: HashMap<(u32, u32), u64> =
        prev.disks.iter().map(|d| ((d.major, d.minor), d.sectors_read)).collect();
    cur.disks
        .iter()
        .filter(|d| !partition.get(d.name.as_str()).copied().unwrap_or(false))
        .filter_map(|d| before.get(&(d.major, d.minor)).map(|&b| delta(b, d.sectors_read)))
        .sum()
}

/// Per process, for processes with page-cache activity in the interval, ordered by pid. A process
/// absent from the previous sample started (or was first seen) during the interval: its counts
/// so far all belong to it. Exited processes appear with `exited: true`.
pub fn processes(prev: Option<&Sample>, cur: &Sample, secs: f64) -> Vec<PageCacheProcessModel> {
    let Some(c) = cur.bpf.page_cache.as_ref() else { return Vec::new() };
    let Some(prev) = prev else { return Vec::new() };
    let p = prev.bpf.page_cache.as_ref();
    let before: HashMap<u32, &CacheCountersSample> =
        p.map(|p| p.processes.iter().map(|x| (x.pid, &x.counters)).collect()).unwrap_or_default();
    let zero = CacheCountersSample::default();
    let rss_page = c.rss_mapped.then_some(cur.page_size.max(1));
    let page = cur.page_size.max(1) as f64;
    // The probes record the comm of the thread that first touched the cache on each CPU; the
    // process's own (main thread) name from /proc is preferred while it is alive.
    // An exited process is looked up in the previous sample (its comm after exec, not before).
    // Built once a row is active: most entries of a quiet sample are not (no names copied).
    let mut proc_comm: Option<HashMap<u32, &str>> = None;
    let mut out: Vec<PageCacheProcessModel> = Vec::new();
    for x in &c.processes {
        let k = PageCacheCounts::between(
            before.get(&x.pid).copied().unwrap_or(&zero),
            &x.counters,
            c.hz,
            rss_page,
        );
        let mut m = PageCacheProcessModel {
            pid: x.pid,
            comm: String::new(),
            accesses: k.accesses,
            misses: k.misses,
            hit_pct: k.hit_pct,
            dirtied: k.dirtied,
            throttled_ms: k.throttled_ms,
            accesses_s: per_second(k.accesses, secs),
            misses_s: per_second(k.misses, secs),
            dirtied_s: per_second(k.dirtied, secs),
            cache_read_bytes_s: per_second(k.hits, secs) * page,
            disk_read_bytes_s: per_second(k.misses, secs) * page,
            dirtied_bytes_s: per_second(k.dirtied, secs) * page,
            throttled_ms_s: if secs > 0.0 { k.throttled_ms / secs } else { 0.0 },
            direct_io: k.dio_reads + k.dio_writes > 0,
            dio_read_bytes_s: per_second(k.dio_read_bytes, secs),
            dio_write_bytes_s: per_second(k.dio_write_bytes, secs),
            exited: x.exited,
            cgroup_id: x.cgroup_id,
            cgroup: String::new(),
        };
        if !m.active() {
            continue;
        }
        let names = proc_comm.get_or_insert_with(|| {
            prev.processes.iter().chain(&cur.processes).map(|p| (p.pid, &*p.comm)).collect()
        });
        m.comm = names.get(&x.pid).map(|c| c.to_string()).unwrap_or_else(|| x.comm.clone());
        m.cgroup = x.cgroup.clone();
        out.push(m);
    }
    out.sort_by_key(|p| p.pid);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::CacheProcessSample;

    fn counters(
        read: u64,
        mapped: u64,
        faults: u64,
        inserted: u64,
        write_inserted: u64,
    ) -> CacheCountersSample {
        CacheCountersSample {
            read_pages: read,
            mapped_pages: mapped,
            faults,
            inserted_pages: inserted,
            write_inserted_pages: write_inserted,
            ..Default::default()
        }
    }

    #[test]
    fn hit_rate_of_a_cold_warm_and_half_warm_read() {
        let zero = CacheCountersSample::default();
        // Cold 64 MiB read: 16384 pages asked for, all inserted by readahead.
        let cold = PageCacheCounts::between(&zero, &counters(16384, 0, 0, 16384, 0), 250, None);
        assert_eq!((cold.accesses, cold.misses, cold.hits, cold.hit_pct), (16384, 16384, 0, Some(0.0)));
        // Warm: 16384 asked for, 0 inserted.
        let warm = PageCacheCounts::between(&zero, &counters(16384, 0, 0, 0, 0), 250, None);
        assert_eq!(warm.hit_pct, Some(100.0));
        // Half: 8192 of 16384 inserted → 50 %.
        let half = PageCacheCounts::between(&zero, &counters(16000, 300, 84, 8192, 0), 250, None);
        assert_eq!((half.accesses, half.misses, half.hits), (16384, 8192, 8192));
        assert_eq!(half.hit_pct, Some(50.0));
    }

    #[test]
    fn mmap_accesses_come_from_the_rss_growth_when_rss_stat_is_attached() {
        let zero = CacheCountersSample::default();
        // A half-cached 64 MiB file through mmap: 2 MiB folios are mapped with no map_pages event,
        // so the windows undercount; the RSS growth is the whole file.
        let mut c = counters(0, 2000, 700, 8192, 0);
        c.rss_file_bytes = 16384 * 4096;
        let rss = PageCacheCounts::between(&zero, &c, 250, Some(4096));
        assert_eq!((rss.accesses, rss.misses, rss.hit_pct), (16384, 8192, Some(50.0)));
        let fallback = PageCacheCounts::between(&zero, &c, 250, None);
        assert_eq!((fallback.accesses, fallback.hit_pct), (2700, Some(0.0)));
    }

    #[test]
    fn readahead_ahead_of_reads_gives_zero_not_a_negative_rate() {
        let zero = CacheCountersSample::default();
        let k = PageCacheCounts::between(&zero, &counters(32, 0, 0, 512, 0), 250, None);
        assert_eq!((k.hits, k.hit_pct), (0, Some(0.0)));
        assert_eq!(PageCacheCounts::between(&zero, &zero, 250, None).hit_pct, None, "no accesses: no rate");
    }

    #[test]
    fn pages_a_write_allocated_are_not_misses_and_throttling_is_converted_from_jiffies() {
        let p = counters(0, 0, 0, 100, 100);
        let mut c = counters(0, 0, 0, 100 + 2560 + 3, 100 + 2560);
        c.dirtied_pages = 2560;
        c.throttled = 4;
        c.throttle_jiffies = 50;
        let k = PageCacheCounts::between(&p, &c, 250, None);
        assert_eq!((k.misses, k.dirtied, k.throttle_pauses), (3, 2560, 4));
        assert_eq!(k.throttled_ms, 200.0, "50 jiffies at 250 Hz");
    }

    #[test]
    fn cross_check_flags_gross_mismatches_only() {
        let mib = 1u64 << 20;
        assert_eq!(CrossCheck::new(64 * mib, 0, 70 * mib, 70 * mib).mismatch, None);
        // Loop device: both doubled.
        assert_eq!(CrossCheck::new(128 * mib, 0, 130 * mib, 130 * mib).mismatch, None);
        // Small figures say nothing.
        assert_eq!(CrossCheck::new(4 * mib, 0, 0, 0).mismatch, None);
        let over = CrossCheck::new(64 * mib, 0, 10 * mib, 10 * mib).mismatch.unwrap();
        assert_eq!(over, "cache misses (64 MiB) exceed twice what the disks read (pgpgin 10 MiB)");
        let under = CrossCheck::new(2 * mib, 0, 100 * mib, 100 * mib).mismatch.unwrap();
        assert!(under.starts_with("the disks read 100 MiB"), "{under}");
        // Direct reads explain disk reads.
        assert_eq!(CrossCheck::new(2 * mib, 90 * mib, 100 * mib, 100 * mib).mismatch, None);
    }

    fn sample(mono_ns: u64, procs: Vec<CacheProcessSample>, totals: CacheCountersSample) -> Sample {
        let mut s = Sample { mono_ns, page_size: 4096, ..Default::default() };
        s.bpf.page_cache = Some(PageCacheSample { hz: 250, totals, processes: procs, ..Default::default() });
        s
    }

    fn proc(pid: u32, comm: &str, exited: bool, counters: CacheCountersSample) -> CacheProcessSample {
        CacheProcessSample { pid, comm: comm.into(), exited, counters, ..Default::default() }
    }

    #[test]
    fn exited_and_new_processes_appear_for_their_interval_and_idle_ones_do_not() {
        let prev = sample(
            0,
            vec![
                proc(10, "cat", false, counters(100, 0, 0, 100, 0)),
                proc(11, "idle", false, counters(5, 0, 0, 0, 0)),
            ],
            counters(105, 0, 0, 100, 0),
        );
        let cur = sample(
            2_000_000_000,
            vec![
                proc(10, "cat", true, counters(16484, 0, 0, 100, 0)),
                proc(11, "idle", false, counters(5, 0, 0, 0, 0)),
                proc(12, "dd", false, counters(0, 0, 0, 0, 0)),
                proc(13, "new", false, counters(40, 0, 0, 10, 0)),
            ],
            counters(16529, 0, 0, 110, 0),
        );
        let rows = processes(Some(&prev), &cur, 2.0);
        let pids: Vec<u32> = rows.iter().map(|r| r.pid).collect();
        assert_eq!(pids, vec![10, 13]);
        let cat = &rows[0];
        assert!(cat.exited);
        assert_eq!((cat.accesses, cat.misses, cat.hit_pct), (16384, 0, Some(100.0)));
        assert_eq!(cat.cache_read_bytes_s, 16384.0 * 4096.0 / 2.0);
        let new = &rows[1];
        assert_eq!((new.accesses, new.misses, new.hit_pct), (40, 10, Some(75.0)));
        assert_eq!(new.disk_read_bytes_s, 10.0 * 4096.0 / 2.0);

        let m = compute(Some(&prev), &cur, 2.0).unwrap();
        assert_eq!((m.accesses, m.misses, m.hits), (16424, 10, 16414));
        assert_eq!(m.accesses_s, 8212.0);
        assert!(compute(None, &cur, 0.0).is_none(), "the first sample has no interval");
    }
}
