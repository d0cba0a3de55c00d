//! Per-process I/O counters (/proc/PID/io).

use serde::{Deserialize, Serialize};

/// One process's /proc/PID/io and identity.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcessIo {
    pub pid: u32,
    pub comm: std::sync::Arc<str>,
    /// starttime from /proc/PID/stat (clock ticks since boot): with pid, it tells a reused pid apart.
    pub start_ticks: u64,
    /// None when /proc/PID/io cannot be read (another user's process without privileges).
    pub io: Option<ProcIoCounters>,
    /// When `io` was read (CLOCK_MONOTONIC ns) if not in this sample: a sampler at a sub-second
    /// interval re-reads an idle process's counters only about once a second and carries them in
    /// between (`collect::processes`). None: read in this sample, at the sample's `mono_ns`.
    /// The model divides a process's deltas by the time between its two reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io_read_ns: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcIoCounters {
    pub rchar: u64,
    pub wchar: u64,
    pub syscr: u64,
    pub syscw: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub cancelled_write_bytes: u64,
}
