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
pub mod iowait;
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
    /// The parts of this sample that could not be read although the kernel has them (ioscope
    /// ran out of file descriptors): their fields are empty and are shown as unavailable, never
    /// as figures. Empty normally (and then not written) and in recordings made before it existed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<Unavailable>,
}

/// A part of a [`Sample`] that could not be read, and why.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Unavailable {
    /// The part: [`Unavailable::HOST`] and the other constants.
    pub part: String,
    /// Why, for people ("too many open files").
    pub reason: String,
}

impl Unavailable {
    /// `host` (name, kernel).
    pub const HOST: &str = "host";
    /// `memory` (/proc/meminfo).
    pub const MEMORY: &str = "memory";
    /// `vmstat` (/proc/vmstat).
    pub const VMSTAT: &str = "vmstat";
    /// `dirty_settings` (/proc/sys/vm/dirty_*).
    pub const DIRTY_SETTINGS: &str = "dirty_settings";
    /// `zones` (/proc/zoneinfo).
    pub const ZONES: &str = "zones";
    /// `psi` (/proc/pressure/*).
    pub const PSI: &str = "psi";
    /// `disks` (/proc/diskstats).
    pub const DISKS: &str = "disks";
    /// `block_settings` (/sys/class/block/NAME/...).
    pub const BLOCK_SETTINGS: &str = "block_settings";
    /// The parts the dirty thresholds are computed from.
    pub const DIRTY_INPUTS: [&str; 4] = [Self::MEMORY, Self::VMSTAT, Self::DIRTY_SETTINGS, Self::ZONES];
}

impl Sample {
    /// Why `part` could not be read in this sample, if it could not.
    pub fn unavailable(&self, part: &str) -> Option<&str> {
        self.unavailable.iter().find(|u| u.part == part).map(|u| u.reason.as_str())
    }
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
