//! The block-layer probes' counters: per device, per direction, per submitting process.

use serde::{Deserialize, Serialize};

/// Cumulative per-device request counters (sum over CPUs), keyed by the device's major:minor.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BpfDeviceCounters {
    pub major: u32,
    pub minor: u32,
    pub read_requests: u64,
    pub read_bytes: u64,
    pub write_requests: u64,
    pub write_bytes: u64,
    /// Requests that are neither read nor write (flush, discard, ...).
    pub other_requests: u64,
    pub other_bytes: u64,
}

/// Cumulative counters of the block-layer probes (`block_io_start`, `block_rq_insert`,
/// `block_rq_issue`, `block_rq_complete`), per whole disk (requests are made of the
/// disk, never of a partition), summed over CPUs. Histograms are log2 buckets
/// (`ioscope_common::block::log2_bucket`): latencies in µs, sizes in bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockDeviceCounters {
    pub major: u32,
    pub minor: u32,
    pub read: BlockDirCounters,
    pub write: BlockDirCounters,
    /// Flushes, discards and other operations.
    pub other: BlockDirCounters,
    pub flags: BlockFlagCounters,
    /// Requests in flight as each request was issued (itself included), depth buckets
    /// (`ioscope_common::block::depth_bucket`), and their exact sum and count.
    pub depth_hist: Vec<u64>,
    pub depth_sum: u64,
    pub depth_samples: u64,
    /// A gauge: requests issued to the driver and not completed, as the probes count them.
    pub in_flight: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockDirCounters {
    pub issued_requests: u64,
    pub issued_bytes: u64,
    pub completed_requests: u64,
    pub completed_bytes: u64,
    /// Request created (block_io_start) → issued, for requests whose creation was seen.
    pub queue_ns_sum: u64,
    pub queue_count: u64,
    /// Issued → completed.
    pub device_ns_sum: u64,
    pub device_count: u64,
    /// Requests that passed through the I/O scheduler's queue (block_rq_insert) and their time
    /// there (insert → issue).
    pub sched_requests: u64,
    pub sched_ns_sum: u64,
    pub queue_hist: Vec<u64>,
    pub device_hist: Vec<u64>,
    pub size_hist: Vec<u64>,
}

/// Requests issued with each `rwbs` flag, and their bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockFlagCounters {
    pub read: RequestsBytes,
    pub write: RequestsBytes,
    pub discard: RequestsBytes,
    /// Flush operations and preflushes (`F` before the operation).
    pub flush: RequestsBytes,
    pub sync: RequestsBytes,
    pub metadata: RequestsBytes,
    pub readahead: RequestsBytes,
    pub fua: RequestsBytes,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RequestsBytes {
    pub requests: u64,
    pub bytes: u64,
}

/// What one process (tgid) submitted to one disk, credited at block_io_start in the submitter's
/// context and counted when the I/O is done. Cumulative since the probes attached (a pair is
/// dropped from the kernel map once it has been read after its process exited).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockProcessCounters {
    pub pid: u32,
    pub major: u32,
    pub minor: u32,
    pub comm: String,
    /// cgroup v2 id of the submitter (the cgroup directory's inode number); 0 when unknown.
    pub cgroup_id: u64,
    /// Its path below the cgroup2 root ("/system.slice/postgresql.service"); empty when unknown.
    pub cgroup: String,
    /// A kernel thread (kworker, flusher, jbd2, ...): its I/O is writeback or filesystem work done on
    /// behalf of others, not a process's own request.
    pub kernel_thread: bool,
    /// The process had exited when this sample was read (this is its last appearance).
    pub exited: bool,
    pub read_requests: u64,
    pub read_bytes: u64,
    pub write_requests: u64,
    pub write_bytes: u64,
    pub other_requests: u64,
    pub readahead_bytes: u64,
    pub sync_bytes: u64,
    /// Whole-I/O latency (block_io_start → block_rq_complete): what the submitter waited.
    pub lat_ns_sum: u64,
    pub lat_count: u64,
    pub lat_hist: Vec<u64>,
}

/// The block probes' own health: events seen, events that could not be tracked, map fill levels.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockProbeHealth {
    /// Events seen per program, in the order of `crate::bpf::block::PROGRAMS`.
    pub events: Vec<u64>,
    /// Requests not tracked because the request map was full.
    pub reqs_full: u64,
    /// I/O not credited to a process because the process map was full.
    pub procs_full: u64,
    pub devs_full: u64,
    /// Issues whose request creation was not seen (no queue time), completions whose issue was not
    /// seen (no device time). Normal for requests in flight at attach; steadily rising means
    /// requests are being lost.
    pub issue_unmatched: u64,
    pub complete_unmatched: u64,
    /// block_io_done events whose start was not seen: recordings made before that program was
    /// retired (see crate::bpf::block::RETIRED); always 0 now.
    pub done_unmatched: u64,
    pub read_errors: u64,
    /// Request entries removed by userspace after a minute without completion.
    pub stale_evicted: u64,
    pub reqs_entries: u64,
    pub reqs_capacity: u64,
    pub procs_entries: u64,
    pub procs_capacity: u64,
    pub devs_entries: u64,
    pub devs_capacity: u64,
    /// Per program (PROGRAMS order): runs the kernel skipped because another BPF program was
    /// running on that CPU (`bpf_prog_info.recursion_misses`): events lost to this probe. Read
    /// at most once a second while `kernel.bpf_stats_enabled` is 0: a miss may show a second late.
    pub missed: Vec<u64>,
    /// Per program: time spent in it and its runs, counted by the kernel only while
    /// `kernel.bpf_stats_enabled` is 1 (else zeros).
    pub run_time_ns: Vec<u64>,
    pub run_cnt: Vec<u64>,
}
