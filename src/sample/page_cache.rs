//! The page-cache probes' counters: accesses, additions, dirtying, per process; the
//! kernel's dirty throttling.

use serde::{Deserialize, Serialize};

/// What the page-cache probes (`filemap:*`, `writeback:*`, `iomap:iomap_dio_rw_begin`) counted:
/// cumulative since attach, summed over CPUs. Definitions: ioscope_common::page_cache and the
/// src/model/README.md's "Page cache" section.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PageCacheSample {
    /// The kernel's timer frequency (CONFIG_HZ): throttling pauses are reported in jiffies.
    pub hz: u64,
    /// Which of the counters' tracepoints are attached ("filemap:mm_filemap_get_pages", ...).
    pub attached: std::sync::Arc<Vec<String>>,
    /// True when mmap accesses are counted from `kmem:rss_stat` (pages mapped); false when they
    /// fall back to `mm_filemap_map_pages` windows plus `mm_filemap_fault` events.
    pub rss_mapped: bool,
    /// System-wide totals (every task, kernel threads and exited processes included).
    pub totals: CacheCountersSample,
    /// Per process (tgid). A process that exited since the previous sample is still here once,
    /// with `exited: true` and its final counts, so its last interval is not lost.
    pub processes: Vec<CacheProcessSample>,
    /// The last `writeback:global_dirty_state`, in pages; None until the event fired once.
    pub dirty_state: Option<KernelDirtyState>,
    /// The last `writeback:balance_dirty_pages` that paused a writer; None until one did.
    pub last_throttle: Option<ThrottleRecord>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CacheCountersSample {
    pub read_pages: u64,
    pub mapped_pages: u64,
    pub faults: u64,
    pub inserted_pages: u64,
    pub write_inserted_pages: u64,
    pub dirtied_pages: u64,
    pub evicted_pages: u64,
    pub throttled: u64,
    pub throttle_jiffies: u64,
    pub dio_reads: u64,
    pub dio_read_bytes: u64,
    pub dio_writes: u64,
    pub dio_write_bytes: u64,
    /// Bytes of file pages newly mapped into the process (`kmem:rss_stat` growth).
    pub rss_file_bytes: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CacheProcessSample {
    /// The tgid.
    pub pid: u32,
    pub comm: String,
    /// /proc/PID was gone when this sample was taken: these are its final counts.
    pub exited: bool,
    pub counters: CacheCountersSample,
    /// The process's cgroup v2 id as the probes last read it (0: unknown), and its path below the
    /// cgroup2 mount ("" when unknown).
    pub cgroup_id: u64,
    pub cgroup: String,
}

/// The kernel's global dirty figures as `global_dirty_state` reported them, in pages.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KernelDirtyState {
    pub nr_dirty: u64,
    pub nr_writeback: u64,
    pub background_thresh: u64,
    pub dirty_thresh: u64,
    pub dirty_limit: u64,
    /// CLOCK_MONOTONIC of the event, ns (comparable with `Sample::mono_ns`).
    pub seen_mono_ns: u64,
}

/// The last throttling pause, in pages and jiffies.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ThrottleRecord {
    /// CLOCK_MONOTONIC of the event, ns.
    pub mono_ns: u64,
    pub limit: u64,
    pub setpoint: u64,
    pub dirty: u64,
    pub pause_jiffies: u64,
}
