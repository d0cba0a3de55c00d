//! /proc/meminfo, /proc/vmstat, the dirty settings and /proc/zoneinfo.

use serde::{Deserialize, Serialize};

/// /proc/meminfo, converted from kB to bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemInfo {
    pub total_bytes: u64,
    pub free_bytes: u64,
    pub available_bytes: u64,
    pub buffers_bytes: u64,
    pub cached_bytes: u64,
    pub shmem_bytes: u64,
    pub dirty_bytes: u64,
    pub writeback_bytes: u64,
    pub active_file_bytes: u64,
    pub inactive_file_bytes: u64,
    pub mapped_bytes: u64,
    pub slab_reclaimable_bytes: u64,
}

/// Cumulative counters from /proc/vmstat (pages or events since boot).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VmStat {
    /// Current number of free pages (a gauge, not a counter): input of the dirtyable-memory formula.
    pub nr_free_pages: u64,
    pub nr_inactive_file: u64,
    pub nr_active_file: u64,
    /// pgpgin / pgpgout count kilobytes (despite the name), as in the kernel's vm_event accounting.
    pub pgpgin: u64,
    pub pgpgout: u64,
    pub pgmajfault: u64,
    pub workingset_refault_file: u64,
    /// pgscan_kswapd + pgscan_direct (+ khugepaged), summed by the collector.
    pub pgscan: u64,
    /// pgsteal_kswapd + pgsteal_direct (+ khugepaged), summed by the collector.
    pub pgsteal: u64,
    pub nr_dirtied: u64,
    pub nr_written: u64,
    /// The kernel's own global dirty thresholds (`nr_dirty_threshold`, `nr_dirty_background_threshold`:
    /// reading /proc/vmstat makes the kernel compute them), in pages. A cross-check of the Model's
    /// formula; None where the kernel does not print them.
    pub kernel_dirty_threshold_pages: Option<u64>,
    pub kernel_dirty_background_threshold_pages: Option<u64>,
}

/// /proc/sys/vm dirty settings, verbatim.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DirtySettings {
    pub dirty_ratio: u64,
    pub dirty_background_ratio: u64,
    pub dirty_bytes: u64,
    pub dirty_background_bytes: u64,
    pub dirty_expire_centisecs: u64,
    pub dirty_writeback_centisecs: u64,
}

/// One zone of /proc/zoneinfo, in pages.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ZoneInfo {
    pub node: u32,
    pub name: String,
    pub managed_pages: u64,
    /// The `high` line: the high watermark *including* the current watermark boost.
    pub high_wmark_pages: u64,
    /// The `boost` line: a temporary raise of the watermarks after fragmentation events.
    pub watermark_boost_pages: u64,
    /// The largest entry of the zone's `protection:` (lowmem_reserve) array.
    pub max_lowmem_reserve_pages: u64,
}
