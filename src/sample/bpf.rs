//! What the eBPF programs counted, read from their maps at collection time, and which attached.

use serde::{Deserialize, Serialize};

use super::{
    BlockDeviceCounters, BlockFilesSample, BlockProbeHealth, BlockProcessCounters, BpfDeviceCounters,
    FileIoSample, PageCacheSample,
};

/// What the eBPF programs counted, read from their maps at collection time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BpfSample {
    pub status: BpfStatus,
    /// Cumulative counts from `block:block_rq_issue`, one entry per device seen since attach.
    pub rq_issue: Vec<BpfDeviceCounters>,
    /// Cumulative block-layer counters per disk (src/bpf/block.rs).
    pub block_devices: Vec<BlockDeviceCounters>,
    /// Cumulative per (process, disk) counters of the I/O each process submitted.
    pub io_processes: Vec<BlockProcessCounters>,
    pub block_health: BlockProbeHealth,
    /// The page-cache probes' counters (see [`PageCacheSample`]); None when they are not attached.
    pub page_cache: Option<PageCacheSample>,
    /// Per-file I/O attribution (ioscope_common::files), cumulative; empty without the probes.
    pub files: Vec<FileIoSample>,
    /// The readahead probes' counters; None when they are not attached.
    pub readahead: Option<crate::sample::readahead::ReadaheadSample>,
    /// Block requests mapped to files through extent maps (src/bpf/resolve/block_files.rs); None
    /// when the request ring buffer is not available.
    pub block_files: Option<BlockFilesSample>,
    /// Sync calls (fsync and friends); None when their probes are not attached.
    pub syncs: Option<crate::sample::syncs::SyncSample>,
    /// I/O wait per thread and cause; None when its probes are not attached (and in recordings
    /// made before they existed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iowait: Option<crate::sample::iowait::IowaitSample>,
    /// Every eBPF map with the kernel memory it takes, largest first (src/bpf/map_memory.rs);
    /// empty when eBPF is off. Shared by the samples of a run (copied only when a map that grows
    /// as it is used changed).
    pub maps: std::sync::Arc<Vec<BpfMapMemory>>,
}

/// One eBPF map's kernel memory, as the kernel counts it (`memlock` in /proc/PID/fdinfo).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BpfMapMemory {
    pub map: String,
    /// Entries it was created with, and with which it was compiled: fewer when ioscope shrank it to
    /// the machine's CPUs or its memory cgroup's limit.
    pub entries: u32,
    pub compiled_entries: u32,
    /// Kernel memory, bytes (charged to ioscope's memory cgroup, not in its RSS).
    pub bytes: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BpfStatus {
    pub enabled: bool,
    /// Why eBPF is off (or partly off): what is missing and what to do. None when all is well.
    pub reason: Option<String>,
    /// Per program: name, tracepoint, attached, and the error when not. Shared by every sample
    /// and model of a run (a copy is made only when bpf_stats give a program new run counts):
    /// cloned per sample it was ~300 of a quiet sample's ~1,000 allocations.
    pub programs: std::sync::Arc<Vec<BpfProgramStatus>>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BpfProgramStatus {
    pub program: String,
    /// Where it is attached: "category:event" for a tracepoint, the kernel function's name for
    /// fentry/fexit and kprobes.
    pub tracepoint: String,
    pub attached: bool,
    pub error: Option<String>,
    /// How it is attached: "tracepoint", "btf_tracepoint", "raw_tracepoint", "fentry", "fexit",
    /// "kprobe"... (empty in recordings made before this was recorded).
    pub mechanism: String,
    /// The tracepoint ("category:event") this program stands in for when the kernel lacks it: the
    /// figures it feeds keep their definition (ebpf/README.md says how, and where they cannot).
    pub fallback_for: Option<String>,
    /// The kernel's count of the program's runs and the time they took (bpf_stats, when
    /// `kernel.bpf_stats_enabled` is on; else 0), as of the sample.
    pub run_cnt: u64,
    pub run_time_ns: u64,
}
