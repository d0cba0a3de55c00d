//! The raw, serializable snapshot of the machine's counters at one instant.
//!
//! A `Sample` holds only what the kernel reported (cumulative counters, current gauges, settings),
//! never anything derived from two samples: rates, ratios and thresholds are the `Model`'s job, so a
//! recording of Samples can be replayed through a newer Model. Everything is in the kernel's own
//! units unless a field's name says otherwise (`_bytes`, `_kb`, `_pages`, `_ms`, `_us`).
//!
//! Every struct here uses `#[serde(default)]` so that a newer ioscope can read an older recording
//! that lacks fields added since.

use serde::{Deserialize, Serialize};

mod block;
mod bpf;
pub mod cgroups;
mod disks;
mod files;
mod memory;
mod page_cache;
mod processes;
mod psi;
pub mod readahead;
pub mod syncs;

pub use block::*;
pub use bpf::*;
pub use disks::*;
pub use files::*;
pub use memory::*;
pub use page_cache::*;
pub use processes::*;
pub use psi::*;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Sample {
    /// CLOCK_MONOTONIC at collection, nanoseconds: the elapsed time between samples comes from here.
    pub mono_ns: u64,
    /// Wall clock at collection, milliseconds since the Unix epoch (for display only).
    pub wall_unix_ms: u64,
    pub host: HostInfo,
    /// Page size in bytes (`sysconf(_SC_PAGESIZE)`); /proc/vmstat and zoneinfo count in pages.
    pub page_size: u64,
    pub memory: MemInfo,
    pub vmstat: VmStat,
    pub dirty_settings: DirtySettings,
    /// Per-zone figures from /proc/zoneinfo needed for the kernel's dirtyable-memory formula.
    pub zones: Vec<ZoneInfo>,
    pub psi: Psi,
    /// One entry per line of /proc/diskstats (whole disks and partitions).
    pub disks: Vec<DiskStat>,
    /// Settings from /sys/block/NAME/queue for whole disks (partitions inherit their disk's).
    pub block_settings: Vec<std::sync::Arc<BlockSettings>>,
    pub processes: Vec<ProcessIo>,
    pub bpf: BpfSample,
    /// The cgroup files of the cgroups the eBPF programs saw doing I/O (src/collect/cgroups.rs);
    /// empty without eBPF and in recordings made before they were read.
    pub cgroups: Vec<crate::sample::cgroups::CgroupSample>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HostInfo {
    pub hostname: String,
    /// `uname -r`.
    pub kernel: String,
    /// /proc/uptime, first field, seconds.
    pub uptime_s: f64,
}
