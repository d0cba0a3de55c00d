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
    pub block_settings: Vec<BlockSettings>,
    pub processes: Vec<ProcessIo>,
    pub bpf: BpfSample,
    /// The cgroup files of the cgroups the eBPF programs saw doing I/O (src/collect/cgroups.rs);
    /// empty without eBPF and in recordings made before they were read.
    pub cgroups: Vec<crate::sample_cgroup::CgroupSample>,
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

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Psi {
    /// None when /proc/pressure/io is absent (kernel without PSI, or psi=0).
    pub io: Option<PsiResource>,
    pub memory: Option<PsiResource>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PsiResource {
    pub some: PsiLine,
    pub full: Option<PsiLine>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PsiLine {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    /// Cumulative stall time, microseconds.
    pub total_us: u64,
}

/// One line of /proc/diskstats (Documentation/admin-guide/iostats.rst). Time fields are ms.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DiskStat {
    pub major: u32,
    pub minor: u32,
    pub name: String,
    pub reads_completed: u64,
    pub reads_merged: u64,
    pub sectors_read: u64,
    pub read_ms: u64,
    pub writes_completed: u64,
    pub writes_merged: u64,
    pub sectors_written: u64,
    pub write_ms: u64,
    /// A gauge: requests in flight right now.
    pub in_flight: u64,
    pub io_ms: u64,
    pub weighted_io_ms: u64,
    /// Kernel 4.18+; None when the line is shorter.
    pub discards: Option<DiscardStat>,
    /// Kernel 5.5+; None when the line is shorter.
    pub flushes: Option<FlushStat>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DiscardStat {
    pub completed: u64,
    pub merged: u64,
    pub sectors: u64,
    pub ms: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FlushStat {
    pub completed: u64,
    pub ms: u64,
}

/// /sys/class/block/NAME facts for one block device.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockSettings {
    pub name: String,
    /// True when /sys/class/block/NAME/partition exists.
    pub is_partition: bool,
    /// queue/read_ahead_kb (of the parent disk for a partition).
    pub read_ahead_kb: Option<u64>,
    /// The active scheduler, the bracketed word of queue/scheduler ("none", "mq-deadline", ...).
    pub scheduler: Option<String>,
    pub nr_requests: Option<u64>,
    pub rotational: Option<bool>,
    pub max_sectors_kb: Option<u64>,
    pub logical_block_size: Option<u64>,
    /// Partition start in 512-byte sectors (for partitions only).
    pub start_sector: Option<u64>,
    /// Number of hardware queues (entries of mq/); more than one means %util understates capacity.
    pub hw_queues: Option<u64>,
}

/// One process's /proc/PID/io and identity.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcessIo {
    pub pid: u32,
    pub comm: String,
    /// starttime from /proc/PID/stat (clock ticks since boot): with pid, it tells a reused pid apart.
    pub start_ticks: u64,
    /// None when /proc/PID/io cannot be read (another user's process without privileges).
    pub io: Option<ProcIoCounters>,
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
    pub readahead: Option<crate::sample_readahead::ReadaheadSample>,
    /// Block requests mapped to files through extent maps (src/bpf/resolve/block_files.rs); None
    /// when the request ring buffer is not available.
    pub block_files: Option<BlockFilesSample>,
    /// Sync calls (fsync and friends); None when their probes are not attached.
    pub syncs: Option<crate::sample_syncs::SyncSample>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BpfStatus {
    pub enabled: bool,
    /// Why eBPF is off (or partly off): what is missing and what to do. None when all is well.
    pub reason: Option<String>,
    /// Per program: name, tracepoint, attached, and the error when not.
    pub programs: Vec<BpfProgramStatus>,
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
    /// running on that CPU (`bpf_prog_info.recursion_misses`): events lost to this probe.
    pub missed: Vec<u64>,
    /// Per program: time spent in it and its runs, counted by the kernel only while
    /// `kernel.bpf_stats_enabled` is 1 (else zeros).
    pub run_time_ns: Vec<u64>,
    pub run_cnt: Vec<u64>,
}

/// What the page-cache probes (`filemap:*`, `writeback:*`, `iomap:iomap_dio_rw_begin`) counted:
/// cumulative since attach, summed over CPUs. Definitions: ioscope_common::page_cache and the
/// README's "Page cache" section.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PageCacheSample {
    /// The kernel's timer frequency (CONFIG_HZ): throttling pauses are reported in jiffies.
    pub hz: u64,
    /// Which of the counters' tracepoints are attached ("filemap:mm_filemap_get_pages", ...).
    pub attached: Vec<String>,
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

/// One file's cumulative I/O counters from the per-file probes (ioscope_common::files), with the
/// writeback keyed by its backing device already merged onto the filesystem, and the path found
/// for it when the sample was taken.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FileIoSample {
    /// The filesystem's device (`s_dev`), or the backing disk's when writeback could not be
    /// matched to one mounted filesystem.
    pub major: u32,
    pub minor: u32,
    pub ino: u64,
    /// The device's name (`loop0`, `sda1`) or "major:minor".
    pub device: String,
    /// A path known to name this inode (checked by stat when taken), ending in " (deleted)" for
    /// an open file that was unlinked; None while unknown (shown as dev:inode).
    pub path: Option<String>,
    pub inserted_pages: u64,
    pub readahead_pages: u64,
    pub dirtied_pages: u64,
    pub writeback_pages: u64,
    pub dio_read_bytes: u64,
    pub dio_write_bytes: u64,
    /// Bytes the filesystem wrote back (ext4_writepages_result, iomap_writeback_folio): fsync's
    /// writeback too. 0 on filesystems without those events.
    pub fs_writeback_bytes: u64,
    /// Processes last seen reading, dirtying or doing direct I/O on it (one per CPU at most).
    pub processes: Vec<FileProcess>,
    /// Its page-cache residency (for a file with a path it could be opened by).
    pub cache: Option<FileCacheState>,
    /// What an inode without a path is, when ioscope can tell: a block device's own cache
    /// (filesystem metadata and journal read and written through the device).
    pub label: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FileProcess {
    pub pid: u32,
    pub comm: String,
}

/// A file's page-cache residency when the sample was taken (src/bpf/resolve/file_cache.rs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FileCacheState {
    /// "cachestat" or "mincore" (which has no dirty/writeback/eviction figures).
    pub source: String,
    pub size_bytes: u64,
    pub cached_pages: u64,
    pub dirty_pages: Option<u64>,
    pub writeback_pages: Option<u64>,
    pub evicted_pages: Option<u64>,
    pub recently_evicted_pages: Option<u64>,
}

/// Completed block requests mapped to files through the files' extent maps, cumulative since
/// the collector started (README "Block requests to files").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockFilesSample {
    /// Per disk and target (a file, or a label): what the sampled requests carried.
    pub targets: Vec<BlockTargetCounters>,
    /// Requests with data completed and sent by the kernel / not sent (over the rate, or the
    /// ring buffer full).
    pub emitted: u64,
    pub rate_dropped: u64,
    pub ring_dropped: u64,
    /// The kernel's limit, events per second over all CPUs.
    pub rate_limit_s: u64,
    /// Files with an extent map, their extents, and FIEMAP calls that failed (cumulative).
    pub mapped_files: u64,
    pub extents: u64,
    pub fiemap_errors: u64,
}

/// Where sampled requests of one disk went: a file (`ino` non-zero, on filesystem
/// `fs_major:fs_minor`) or a `label` ("metadata", "journal", "unknown").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockTargetCounters {
    /// The disk the requests were made of, and its name.
    pub major: u32,
    pub minor: u32,
    pub disk: String,
    pub fs_major: u32,
    pub fs_minor: u32,
    pub ino: u64,
    pub path: Option<String>,
    pub label: Option<String>,
    pub read_requests: u64,
    pub read_bytes: u64,
    pub write_requests: u64,
    pub write_bytes: u64,
}
