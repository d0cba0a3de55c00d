//! The cgroup files' raw figures as they go into a [`crate::sample::Sample`] (recorded and replayed
//! like every other counter), for the cgroups whose processes the eBPF programs saw doing I/O.
//! The eBPF figures per cgroup are not here: they are the per-process counters (each carries its
//! cgroup id and path), added up by the model (src/model/cgroups.rs).

use serde::{Deserialize, Serialize};

use super::psi::PsiResource;

/// One cgroup's files, read at sample time. Every part is None when its file is missing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CgroupSample {
    /// cgroup v2 id (the directory's inode number: what `bpf_get_current_cgroup_id()` returns).
    pub id: u64,
    /// Path below the cgroup2 mount ("/system.slice/nginx.service").
    pub path: String,
    /// Disk I/O the kernel charged to the cgroup, summed over devices: v2 `io.stat`, or on a
    /// hybrid host the v1 `blkio` controller's throttle counters (see `source`).
    pub io: Option<CgroupIoCounters>,
    /// v2 `io.pressure` and `memory.pressure` (PSI per cgroup).
    pub io_pressure: Option<PsiResource>,
    pub memory_pressure: Option<PsiResource>,
    /// Page cache of the cgroup: v2 `memory.stat` (`file`, `file_dirty`, `file_writeback`), or the
    /// v1 memory controller's `memory.stat` (`total_cache`, `total_dirty`, `total_writeback`).
    pub memory: Option<CgroupMemory>,
}

/// Cumulative bytes and operations (v2 `io.stat`'s rbytes, wbytes, rios, wios; v1
/// `blkio.throttle.io_service_bytes_recursive` / `io_serviced_recursive` Read and Write).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CgroupIoCounters {
    /// "io.stat" (v2) or "blkio" (v1, hybrid hosts), and the v1 path when it differs.
    pub source: String,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub reads: u64,
    pub writes: u64,
}

/// Gauges, bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CgroupMemory {
    /// "memory.stat" (v2) or "memory v1".
    pub source: String,
    pub file_bytes: u64,
    pub dirty_bytes: u64,
    pub writeback_bytes: u64,
    /// The memory limit, bytes: the smaller of v2 `memory.max` and `memory.high`, or v1
    /// `memory.limit_in_bytes`; None when unlimited (v2 `max`, v1's page-counter maximum).
    pub limit_bytes: Option<u64>,
}
