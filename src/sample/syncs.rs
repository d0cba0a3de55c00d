//! The sync-call probes' raw figures as they go into a [`crate::sample::Sample`] (recorded and
//! replayed like every other counter): cumulative per (process, call, file) since the probes
//! attached, and the calls running when the sample was taken. ioscope_common::syncs says what the
//! programs count; src/model/syncs.rs derives the figures.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SyncSample {
    /// "category:event" of each sync program attached.
    pub attached: std::sync::Arc<Vec<String>>,
    /// Completed calls per (process, call, file), cumulative.
    pub calls: Vec<SyncCallCounters>,
    /// Calls in progress.
    pub running: Vec<SyncRunning>,
}

/// The file a sync call was made on: its filesystem's device and inode (0, 0 for `sync`,
/// `msync`, an io_uring registered file), and its path when ioscope found one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SyncFile {
    pub major: u32,
    pub minor: u32,
    pub ino: u64,
    pub path: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SyncCallCounters {
    pub pid: u32,
    pub comm: String,
    /// cgroup v2 id of the caller (its last call).
    pub cgroup_id: u64,
    /// That cgroup's path below the cgroup2 mount ("" when unknown; src/bpf/cgroup.rs).
    pub cgroup: String,
    /// "fsync", "fdatasync", "sync_file_range", "msync", "syncfs", "sync", "io_uring fsync",
    /// "io_uring sync_file_range".
    pub syscall: String,
    pub file: SyncFile,
    pub calls: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Bytes the filesystem wrote back in the calling thread during the calls.
    pub written_bytes: u64,
    /// Latency, µs, log2 buckets (ioscope_common::block::log2_bucket).
    pub hist: Vec<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SyncRunning {
    pub pid: u32,
    /// The calling thread (for io_uring, the submitting one).
    pub tid: u32,
    pub comm: String,
    pub cgroup_id: u64,
    /// As in [`SyncCallCounters::cgroup`].
    pub cgroup: String,
    pub syscall: String,
    pub file: SyncFile,
    /// CLOCK_MONOTONIC at the call's start, ns (comparable with `Sample::mono_ns`).
    pub start_mono_ns: u64,
    /// Written back by the call so far.
    pub written_bytes: u64,
}
