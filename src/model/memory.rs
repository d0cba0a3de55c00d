//! Memory pane: /proc/meminfo gauges, the kernel's dirty thresholds, and /proc/vmstat rates.

use serde::Serialize;

use crate::sample::Sample;

/// Bytes unless named otherwise. JSON: `memory.*`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MemoryModel {
    pub total: u64,
    pub free: u64,
    pub available: u64,
    pub buffers: u64,
    pub cached: u64,
    pub shmem: u64,
    pub dirty: u64,
    pub writeback: u64,
    pub active_file: u64,
    pub inactive_file: u64,
    pub mapped: u64,
    pub slab_reclaimable: u64,
    /// Memory the kernel counts as dirtyable (free − reserves + file LRU), bytes.
    pub dirtyable: u64,
    /// Above this much dirty memory the flusher threads start background writeback.
    pub dirty_background_threshold: u64,
    /// Above this much dirty memory writers are throttled in balance_dirty_pages().
    pub dirty_threshold: u64,
    /// "ratio" or "bytes": which vm setting produced each threshold.
    pub dirty_background_source: &'static str,
    pub dirty_source: &'static str,
    pub dirty_expire_centisecs: u64,
    pub dirty_writeback_centisecs: u64,
    pub rates: VmRates,
}

/// Per-second rates from /proc/vmstat. JSON: `memory.rates.*`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VmRates {
    pub pgpgin_kb_s: f64,
    pub pgpgout_kb_s: f64,
    pub majfault_s: f64,
    pub refault_file_s: f64,
    pub scan_s: f64,
    pub steal_s: f64,
    pub dirtied_pages_s: f64,
    pub written_pages_s: f64,
}

pub fn compute(_prev: Option<&Sample>, _cur: &Sample, _secs: f64) -> MemoryModel {
    MemoryModel::default()
}
