//! The block-layer programs' shared types: `block_io_start`, `block_rq_insert`, `block_rq_issue`
//! and `block_rq_complete` (and `block_rq_merge`, when a request is merged into another and
//! disappears) pair up one request's events in a table of request slots ([`ReqSlot`]), found by a
//! tag: the request's address where the kernel's BTF lets the programs run as BTF tracepoints
//! (they then read the `struct request` itself, see [`RequestLayout`]), else (dev, sector), as
//! classic-tracepoint tools do (their records carry no request pointer).
//!
//! Everything is aggregated in the kernel: per-CPU maps of cumulative counters and log2 histograms,
//! which userspace reads once per interval. The one per-request path to userspace is the
//! rate-limited ring of completed requests for block-to-file mapping (crate::block_files).

/// (program, tracepoint event in category `block`): the slots of the per-program vectors of
/// userspace's `BlockProbeHealth`, in this order in every Sample and so in every recording.
/// `block_io_done` is [`RETIRED`]: its slot stays (0 in new samples) so that older recordings are
/// still read right. Shared with userspace: its loader attaches these, its model reads their
/// health by these names.
pub const PROGRAMS: [(&str, &str); 6] = [
    ("block_io_start", "block_io_start"),
    ("block_rq_insert", "block_rq_insert"),
    ("block_rq_issue", "block_rq_issue"),
    ("block_rq_complete", "block_rq_complete"),
    ("block_io_done", "block_io_done"),
    ("block_rq_merge", "block_rq_merge"),
];
/// No longer traced: its work (crediting the submitter) moved to block_rq_complete, one program
/// run fewer per request (probes/src/block.rs).
pub const RETIRED: &str = "block_io_done";

/// The per-request table: an array of [`REQ_SLOTS`] [`ReqSlot`]s, a request's slot chosen by its
/// tag ([`req_slot`]). An array, not a hash map: its lookup is inlined by the kernel (a hash
/// insert, lookup and delete per request cost more than everything else the programs do), and it
/// cannot fill up with requests whose completion was lost (their slots are simply reused).
pub const BLOCK_REQS_MAP: &str = "BLOCK_REQS";
/// Per-CPU array of [`DevStats`], indexed like [`BLOCK_DEV_SLOTS_MAP`] (a device's index is where
/// its key sits there).
pub const BLOCK_DEV_MAP: &str = "BLOCK_DEV";
/// Array of [`DEV_SLOTS`] [`DevSlot`]s: which device each index of [`BLOCK_DEV_MAP`] counts, and
/// its in-flight count. Arrays, not hash maps: every block event updates its device, and an
/// array lookup is inlined by the kernel where a hash lookup is a function call (on machines
/// with return-thunk mitigations each call and return is a large share of a program's cost).
pub const BLOCK_DEV_SLOTS_MAP: &str = "BLOCK_DEV_SLOTS";
/// Per-CPU array of [`PROCS_MAX`] [`ProcStats`] (the submitter of the I/O, per device), indexed
/// like [`BLOCK_PROC_KEYS_MAP`]. Arrays, as for the devices: a per-CPU hash lookup at every
/// completion cost about as much as all the rest of that program.
pub const BLOCK_PROC_MAP: &str = "BLOCK_PROC";
/// Array of [`PROCS_MAX`] u64 (memory-mappable): which (process, device) each index of
/// [`BLOCK_PROC_MAP`] counts, as [`ProcKey::packed`] (0: free). A program claims a free slot
/// atomically; userspace reads the keys through its mapping and frees the slots of processes that
/// exited. A key may hold two slots (one freed before it in its probe sequence is claimed again):
/// userspace sums them.
pub const BLOCK_PROC_KEYS_MAP: &str = "BLOCK_PROC_KEYS";
/// Per-CPU array of u64 indexed by [`Health`]: events seen and events lost, per program.
pub const BLOCK_HEALTH_MAP: &str = "BLOCK_HEALTH";
/// The read-only global holding [`BlockLayout`], set by the loader before load.
pub const BLOCK_LAYOUT_GLOBAL: &str = "BLOCK_LAYOUT";

/// log2 of [`REQ_SLOTS`].
pub const REQ_SLOT_BITS: u32 = 15;
/// Request slots, in pairs: a request may take either slot of the pair [`req_slot`] picks (the
/// empty one, or the one taken longer ago). Far above any real queue depth (nr_requests ×
/// devices), so that three requests in flight rarely need one pair; when they do the oldest loses
/// its latency and submitter, and [`Health::ReqsFull`] counts it.
pub const REQ_SLOTS: u32 = 1 << REQ_SLOT_BITS;
/// Most (process, device) pairs kept (a power of two). Userspace frees a pair's slot once it has
/// read it after the process exited; a pair finding its [`PROC_PROBES`] slots taken is not
/// credited ([`Health::ProcsFull`] counts its I/O).
pub const PROCS_MAX: u32 = 8192;
/// How many slots from its first ([`ProcKey::first_slot`]) a (process, device) pair may take.
pub const PROC_PROBES: u32 = 8;
/// Most devices tracked: the size of the device table (a power of two).
pub const DEV_SLOTS: u32 = 1024;
/// How many slots from its first ([`dev_slot`]) a device may take (open addressing); a device
/// finding them all taken is not counted ([`Health::DevsFull`]).
pub const DEV_PROBES: u32 = 8;

/// A device's entry in the device table. `key` is [`dev_key`] of its kernel dev_t (0: free),
/// set once, atomically, by the first program to see the device.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DevSlot {
    pub key: u64,
    /// Requests issued to the driver and not yet completed (atomic adds from every CPU).
    pub in_flight: u64,
    /// 1 while the kernel stamps this device's requests with their issue time
    /// (`request.io_start_time_ns`, set after block_rq_issue when the queue keeps I/O statistics,
    /// as with writeback throttling on): block_rq_issue then needs no clock read of its own.
    /// Learnt at each completion (BTF programs only).
    pub kernel_stamps_issue: u32,
    pub _pad: u32,
}

/// The device table's key of kernel dev_t `dev`: never 0 (a free slot), dev 0 included.
#[inline(always)]
pub fn dev_key(dev: u32) -> u64 {
    (1 << 32) | u64::from(dev)
}

/// The first slot device `dev` may take (Fibonacci hashing, see [`req_slot`]).
#[inline(always)]
pub fn dev_slot(dev: u32) -> u32 {
    (u64::from(dev).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - DEV_SLOTS.trailing_zeros())) as u32
}

/// Buckets of the log2 histograms (latency in µs, request size in bytes): see [`log2_bucket`].
pub const HIST_BUCKETS: usize = 32;
/// Buckets of the queue-depth histogram: see [`depth_bucket`].
pub const DEPTH_BUCKETS: usize = 48;
/// How many bytes of `rwbs` are decoded into [`RwbsFlags`].
pub const RWBS_LEN: usize = 8;

/// Where one event's fields are, from its tracefs format file. `configured` 0: the program does
/// nothing (its format could not be read or lacked a field).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventLayout {
    pub configured: u32,
    /// `dev_t dev` (4 bytes).
    pub dev_offset: u32,
    /// `sector_t sector` (8 bytes).
    pub sector_offset: u32,
    /// `unsigned int bytes`, or `unsigned int nr_sector` when `size_in_sectors` is 1 (4 bytes).
    pub size_offset: u32,
    pub size_in_sectors: u32,
    /// `char rwbs[]`: its first [`RWBS_LEN`] bytes are read (the field is 8 or 10 bytes).
    pub rwbs_offset: u32,
    /// 1 when dev, sector and the size sit as in [`EventHead`] from `dev_offset` (every kernel
    /// since the block events have had `nr_sector`/`bytes`): one read of the head instead of three.
    pub compact: u32,
    /// 1 when, on top of `compact`, `rwbs` starts [`HEAD_RWBS`] bytes after `dev` (after `ioprio`,
    /// as since Linux 6.x): the head and rwbs in one read of [`HEAD_WITH_RWBS_LEN`] bytes. Every
    /// block program runs for every request, and each helper call is a large share of its cost.
    pub rwbs_in_head: u32,
}

impl EventLayout {
    pub const UNSET: EventLayout = EventLayout {
        configured: 0,
        dev_offset: 0,
        sector_offset: 0,
        size_offset: 0,
        size_in_sectors: 0,
        rwbs_offset: 0,
        compact: 0,
        rwbs_in_head: 0,
    };
}

/// The usual start of a block event record, from `dev`: `dev_t dev; sector_t sector; unsigned int
/// nr_sector;` then `unsigned int bytes` (block_rq_complete has `int error` there instead).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventHead {
    pub dev: u32,
    pub _pad: u32,
    pub sector: u64,
    pub nr_sector: u32,
    pub bytes: u32,
}

/// Offsets within [`EventHead`].
pub const HEAD_SECTOR: u32 = 8;
pub const HEAD_NR_SECTOR: u32 = 16;
pub const HEAD_BYTES: u32 = 20;
/// Offset of `rwbs` from `dev` when it follows `bytes`/`error` and a 2-byte `ioprio`.
pub const HEAD_RWBS: u32 = 26;

/// [`EventHead`] then `ioprio` and the first [`RWBS_LEN`] bytes of `rwbs` (see
/// [`EventLayout::rwbs_in_head`]), and 6 bytes of whatever follows (`rwbs` is 10 bytes since
/// Linux 6.x; the loader checks the record is that long).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeadWithRwbs {
    pub dev: u32,
    pub _pad: u32,
    pub sector: u64,
    pub nr_sector: u32,
    /// `bytes`, or block_rq_complete's `error`.
    pub bytes: u32,
    pub ioprio: u16,
    pub rwbs: [u8; RWBS_LEN],
    pub _tail: [u8; 6],
}

/// The layouts of all the events, in one global.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockLayout {
    pub io_start: EventLayout,
    pub rq_insert: EventLayout,
    pub rq_issue: EventLayout,
    pub rq_complete: EventLayout,
    pub rq_merge: EventLayout,
    /// For the BTF tracepoint programs, which read the request itself.
    pub request: RequestLayout,
}

impl BlockLayout {
    pub const UNSET: BlockLayout = BlockLayout {
        io_start: EventLayout::UNSET,
        rq_insert: EventLayout::UNSET,
        rq_issue: EventLayout::UNSET,
        rq_complete: EventLayout::UNSET,
        rq_merge: EventLayout::UNSET,
        request: RequestLayout::UNSET,
    };
}

/// Where the BTF tracepoint programs find what a block event's record would hold, in this
/// kernel's own structs, with the values of its request flags: all from the kernel's BTF
/// (/sys/kernel/btf/vmlinux) at run time, so no kernel's layout is compiled in. The offsets are
/// constants to the verifier (the global is read-only and frozen before load), which lets the
/// programs load the fields directly instead of through a helper call each.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestLayout {
    /// 0: the BTF programs do nothing (the classic ones are used).
    pub configured: u32,
    /// `struct request`: `q` (pointer), `__sector` (u64), `__data_len` (u32), `cmd_flags` (u32).
    pub rq_q: u32,
    pub rq_sector: u32,
    pub rq_data_len: u32,
    pub rq_cmd_flags: u32,
    /// `struct request_queue`: `disk` (pointer).
    pub q_disk: u32,
    /// `struct gendisk`: `major` and `first_minor` (int): the event's `dev` is their MKDEV.
    pub disk_major: u32,
    pub disk_first_minor: u32,
    /// How to decode `cmd_flags` into `rwbs`.
    pub cmd: CmdFlagValues,
    /// The submitting task, for block_io_start (see [`crate::TaskLayout`]).
    pub task: crate::TaskLayout,
    /// `struct request`: `io_start_time_ns` (u64: when it was issued, see
    /// [`DevSlot::kernel_stamps_issue`]), on the clock bpf_ktime_get_ns reads (ktime_get_ns).
    pub rq_io_start_time_ns: u32,
    /// `struct request`: `start_time_ns` (u64): the kernel's own stamp of the request's start,
    /// read at block_rq_issue and completion, never at block_io_start: recent kernels (6.18 here)
    /// write it just after that event, so there it still holds the time of the request struct's
    /// previous use (found up to a millisecond early). See [`REQ_START_FROM_RQ`].
    pub rq_start_time_ns: u32,
    /// The block layer's clock in a task (`blk_time_get_ns()`): `task_struct.plug` (pointer) and
    /// `blk_plug.cur_ktime` (u64), the time the kernel read once for the task's current batch of
    /// requests and stamps them all with (0: not read yet). Reading it costs two loads where the
    /// clock itself costs ~50 ns in a VM. `plug_cur_ktime` is 0 on kernels before 6.9, whose
    /// plug has no time: the programs read the clock.
    pub task_plug: u32,
    pub plug_cur_ktime: u32,
}

impl RequestLayout {
    pub const UNSET: RequestLayout = RequestLayout {
        configured: 0,
        rq_q: 0,
        rq_sector: 0,
        rq_data_len: 0,
        rq_cmd_flags: 0,
        q_disk: 0,
        disk_major: 0,
        disk_first_minor: 0,
        cmd: CmdFlagValues::UNSET,
        task: crate::TaskLayout::UNSET,
        rq_io_start_time_ns: 0,
        rq_start_time_ns: 0,
        task_plug: 0,
        plug_cur_ktime: 0,
    };
}

/// The values `cmd_flags` is decoded with, as `blk_fill_rwbs()` does: the operation is
/// `cmd_flags & op_mask` (`enum req_op`), the flags are bits (`enum req_flag_bits`). Apart from
/// the offsets so that a program copies only what it uses.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CmdFlagValues {
    pub op_mask: u32,
    pub op_read: u32,
    pub op_write: u32,
    pub op_flush: u32,
    pub op_discard: u32,
    pub op_secure_erase: u32,
    pub flag_preflush: u32,
    pub flag_fua: u32,
    pub flag_rahead: u32,
    pub flag_sync: u32,
    pub flag_meta: u32,
}

impl CmdFlagValues {
    pub const UNSET: CmdFlagValues = CmdFlagValues {
        op_mask: 0,
        op_read: 0,
        op_write: 0,
        op_flush: 0,
        op_discard: 0,
        op_secure_erase: 0,
        flag_preflush: 0,
        flag_fua: 0,
        flag_rahead: 0,
        flag_sync: 0,
        flag_meta: 0,
    };
}

/// The kernel's `MKDEV(major, minor)` (include/linux/kdev_t.h: `MINORBITS` 20): the `dev` of the
/// block events' records.
#[inline(always)]
pub fn kernel_mkdev(major: u32, minor: u32) -> u32 {
    (major << 20) | (minor & 0xf_ffff)
}

/// A request's tag from a classic tracepoint's record: its device and start sector (what
/// identifies a request in flight there). Never 0 (an empty slot's tag).
#[inline(always)]
pub fn classic_tag(dev: u32, sector: u64) -> u64 {
    let tag = sector ^ (u64::from(dev) << 40) ^ (u64::from(dev) >> 24);
    if tag == 0 {
        1
    } else {
        tag
    }
}

/// The slot of the request with `tag` (Fibonacci hashing: the top bits of tag × 2^64/φ, which
/// spreads both request addresses, a fixed size apart, and consecutive sectors).
#[inline(always)]
pub fn req_slot(tag: u64) -> u32 {
    (tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - REQ_SLOT_BITS)) as u32
}

/// One slot of the request table: `tag` 0 is empty.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReqSlot {
    pub tag: u64,
    pub info: ReqInfo,
}

/// [`ReqInfo::flags`]: the submitter (tgid, comm, cgroup) is known (block_io_start saw it).
pub const REQ_SUBMITTER: u32 = 1;
/// [`ReqInfo::flags`]: counted in the device's in-flight figure (issued, not yet completed).
pub const REQ_IN_FLIGHT: u32 = 2;
/// [`ReqInfo::flags`]: `start_ns` is when the request was made or queued (block_io_start saw it,
/// or its kernel stamp settled, or block_rq_insert saw it first), so its queue time is known.
pub const REQ_START_SEEN: u32 = 4;
/// [`ReqInfo::flags`]: the start is the kernel's own stamp (`request.start_time_ns`), not yet
/// read: `start_ns` holds what the field held at block_io_start (BTF programs), and the start is
/// settled at issue or completion by [`settle_start`]. It saves block_io_start a clock read
/// (~50 ns here, on every request).
pub const REQ_START_FROM_RQ: u32 = 8;

/// How a request's start settles from the kernel's stamp: `at_io_start` is what
/// `request.start_time_ns` held at block_io_start, `now` what it holds at issue or completion.
/// `stamped_late`: this kernel has been seen to stamp the field after block_io_start.
///
/// - Changed to a later time: the kernel stamped it after the event (6.18 does, in
///   `blk_account_io_start`): that is the start, and the kernel is known to stamp late.
/// - Changed to an earlier time: a request merged into this one started earlier (the kernel keeps
///   the earlier start): that is the start.
/// - Unchanged and not 0 on a kernel not known to stamp late: it stamped before the event
///   (earlier kernels, at allocation): that is the start.
/// - Otherwise (0, or unchanged on a kernel that stamps late: a request the kernel keeps no
///   statistics for, such as a passthrough command or one on a disk with iostats off) the start
///   is unknown: None.
#[inline(always)]
pub fn settle_start(at_io_start: u64, now: u64, stamped_late: bool) -> (Option<u64>, bool) {
    if now > at_io_start {
        (Some(now), true)
    } else if now != 0 && (now < at_io_start || !stamped_late) {
        (Some(now), stamped_late)
    } else {
        (None, stamped_late)
    }
}

/// What is known about a request in flight. Times are bpf_ktime_get_ns (CLOCK_MONOTONIC), 0 = not
/// seen.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReqInfo {
    /// block_io_start (the request was created), or the first event seen for it.
    pub start_ns: u64,
    /// block_rq_insert: the request entered the I/O scheduler's queue (direct issue skips it).
    pub insert_ns: u64,
    /// block_rq_issue: handed to the driver (0 when the kernel stamps it in the request itself,
    /// see [`DevSlot::kernel_stamps_issue`], and not yet issued otherwise).
    pub issue_ns: u64,
    pub cgroup_id: u64,
    pub tgid: u32,
    pub bytes: u32,
    pub flags: u32,
    /// [`RwbsFlags`] bits of the request.
    pub rwbs: u32,
    pub comm: [u8; 16],
    /// Kernel dev_t of the request's disk (to take it off that disk's in-flight count when its
    /// slot is reused before its completion was seen).
    pub dev: u32,
    pub _pad: u32,
}

/// The data direction of a request (index into [`DevStats::dirs`]).
pub const DIR_READ: usize = 0;
pub const DIR_WRITE: usize = 1;
/// Flush, discard and other operations.
pub const DIR_OTHER: usize = 2;

/// One direction of one device, cumulative. Histograms: see [`log2_bucket`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirStats {
    /// block_rq_issue: requests and bytes handed to the driver.
    pub issued_requests: u64,
    pub issued_bytes: u64,
    /// block_rq_complete: requests and bytes completed (nr_sector × 512): what /proc/diskstats
    /// counts, at the same moment.
    pub completed_requests: u64,
    pub completed_bytes: u64,
    /// Queue time (request created → issued to the driver), for the requests whose start was seen.
    /// Counted when the request completes (its issue time may be the kernel's own stamp, which
    /// is only written after block_rq_issue), as are the scheduler time and the device time.
    pub queue_ns_sum: u64,
    pub queue_count: u64,
    /// Device time (issue → complete).
    pub device_ns_sum: u64,
    pub device_count: u64,
    /// Requests that went through the I/O scheduler's queue (block_rq_insert), and their time
    /// there (insert → issue).
    pub sched_requests: u64,
    pub sched_ns_sum: u64,
    /// Queue time, µs, log2 buckets.
    pub queue_hist: [u64; HIST_BUCKETS],
    /// Device time, µs, log2 buckets.
    pub device_hist: [u64; HIST_BUCKETS],
    /// Request size at issue, bytes, log2 buckets.
    pub size_hist: [u64; HIST_BUCKETS],
}

/// One device, cumulative, per CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DevStats {
    pub dirs: [DirStats; 3],
    /// Per [`RwbsFlags`] bit (index = bit number): requests and bytes issued with that flag.
    pub flag_requests: [u64; RWBS_FLAG_COUNT],
    pub flag_bytes: [u64; RWBS_FLAG_COUNT],
    /// Requests in flight on the device as each request is issued (itself included): see
    /// [`depth_bucket`].
    pub depth_hist: [u64; DEPTH_BUCKETS],
    pub depth_sum: u64,
    pub depth_samples: u64,
}

/// The submitter of I/O on one device.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ProcKey {
    pub tgid: u32,
    pub dev: u32,
}

impl ProcKey {
    /// The key as [`BLOCK_PROC_KEYS_MAP`] holds it: never 0 (a free slot), tgid 0 and dev 0 included.
    #[inline(always)]
    pub fn packed(&self) -> u64 {
        (1 << 63) | (u64::from(self.tgid) << 32) | u64::from(self.dev)
    }

    /// The key a [`packed`](Self::packed) value stands for; None for a free slot (0).
    pub fn unpacked(packed: u64) -> Option<ProcKey> {
        (packed != 0).then_some(ProcKey { tgid: ((packed >> 32) as u32) & !(1 << 31), dev: packed as u32 })
    }

    /// The first slot the pair may take (Fibonacci hashing, see [`req_slot`]).
    #[inline(always)]
    pub fn first_slot(&self) -> u32 {
        (self.packed().wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - PROCS_MAX.trailing_zeros())) as u32
    }
}

/// What one process submitted to one device, counted when each request is done
/// (block_rq_complete), cumulative, per CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcStats {
    /// comm of the submitting thread, as block_io_start saw it (empty on CPUs that never inserted).
    pub comm: [u8; 16],
    pub cgroup_id: u64,
    pub read_requests: u64,
    pub read_bytes: u64,
    pub write_requests: u64,
    pub write_bytes: u64,
    pub other_requests: u64,
    /// Bytes of readahead (`A`) and synchronous (`S`) requests.
    pub readahead_bytes: u64,
    pub sync_bytes: u64,
    /// Whole-I/O latency (block_io_start → block_rq_complete): what the submitter waited.
    pub lat_ns_sum: u64,
    pub lat_count: u64,
    /// The same, µs, log2 buckets.
    pub lat_hist: [u64; HIST_BUCKETS],
}

/// Indices of the health counters ([`BLOCK_HEALTH_MAP`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Health {
    IoStartEvents = 0,
    RqInsertEvents = 1,
    RqIssueEvents = 2,
    RqCompleteEvents = 3,
    /// A request lost its slot before it completed (another request took it): its latency and
    /// submitter are not counted.
    ReqsFull = 4,
    /// A process's I/O could not be credited: the process map was full.
    ProcsFull = 5,
    /// A device could not be counted: the device map was full.
    DevsFull = 6,
    /// Issue of a request whose start was not seen (started before attach, or not via io_start).
    IssueUnmatched = 7,
    /// Completion of a request whose issue was not seen (issued before attach, or evicted).
    CompleteUnmatched = 8,
    /// A tracepoint field could not be read.
    ReadErrors = 9,
    RqMergeEvents = 10,
    /// Request slots in use: +1 when a request takes an empty slot, −1 when it leaves it. Per
    /// CPU it may go below zero (wrapping); the sum over CPUs is the table's fill.
    SlotsUsed = 11,
    /// Device-table slots claimed (once per device, ever): userspace rescans the table only when
    /// this changes, and otherwise reads just the slots it knows.
    DevSlotsClaimed = 12,
}

pub const HEALTH_COUNTERS: u32 = 13;

/// `rwbs` decoded (the kernel's `blk_fill_rwbs()`, block/blk-core.c): an optional `F` (preflush),
/// then the operation (`R` read, `W` write, `D` discard, `DE` secure erase, `F` flush, `N` other),
/// then flags: `F` FUA, `A` readahead, `S` sync, `M` metadata.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RwbsFlags(pub u32);

pub const RWBS_READ: u32 = 1 << 0;
pub const RWBS_WRITE: u32 = 1 << 1;
pub const RWBS_DISCARD: u32 = 1 << 2;
/// A flush: the operation is a flush, or a preflush precedes the operation.
pub const RWBS_FLUSH: u32 = 1 << 3;
pub const RWBS_SYNC: u32 = 1 << 4;
pub const RWBS_META: u32 = 1 << 5;
pub const RWBS_READAHEAD: u32 = 1 << 6;
pub const RWBS_FUA: u32 = 1 << 7;
pub const RWBS_FLAG_COUNT: usize = 8;

impl RwbsFlags {
    /// Decodes the first bytes of `rwbs` (NUL-terminated).
    #[inline(always)]
    pub fn parse(rwbs: &[u8; RWBS_LEN]) -> RwbsFlags {
        let mut flags = 0u32;
        let mut i = 0usize;
        // A leading `F` is a preflush when an operation letter follows, else it is the flush
        // operation itself ("F", or "FS" for a sync flush).
        if rwbs[0] == b'F' && matches!(rwbs[1], b'R' | b'W' | b'D' | b'F' | b'N') {
            flags |= RWBS_FLUSH;
            i = 1;
        }
        // The operation letter.
        match rwbs[i] {
            b'R' => flags |= RWBS_READ,
            b'W' => flags |= RWBS_WRITE,
            b'D' => flags |= RWBS_DISCARD,
            b'F' => flags |= RWBS_FLUSH,
            _ => {}
        }
        i += 1;
        // The flag letters after it (an `E` after `D` marks secure erase: nothing to count).
        while i < RWBS_LEN {
            match rwbs[i] {
                0 => break,
                b'F' => flags |= RWBS_FUA,
                b'A' => flags |= RWBS_READAHEAD,
                b'S' => flags |= RWBS_SYNC,
                b'M' => flags |= RWBS_META,
                _ => {}
            }
            i += 1;
        }
        RwbsFlags(flags)
    }

    /// The flags `blk_fill_rwbs()` would print for a request's `cmd_flags` (see
    /// [`RwbsFlags::parse`]), from the values in `l`.
    #[inline(always)]
    pub fn from_cmd_flags(opf: u32, l: &CmdFlagValues) -> RwbsFlags {
        let mut flags = 0u32;
        if opf & l.flag_preflush != 0 {
            flags |= RWBS_FLUSH;
        }
        let op = opf & l.op_mask;
        if op == l.op_read {
            flags |= RWBS_READ;
        } else if op == l.op_write {
            flags |= RWBS_WRITE;
        } else if op == l.op_discard || op == l.op_secure_erase {
            flags |= RWBS_DISCARD;
        } else if op == l.op_flush {
            flags |= RWBS_FLUSH;
        }
        if opf & l.flag_fua != 0 {
            flags |= RWBS_FUA;
        }
        if opf & l.flag_rahead != 0 {
            flags |= RWBS_READAHEAD;
        }
        if opf & l.flag_sync != 0 {
            flags |= RWBS_SYNC;
        }
        if opf & l.flag_meta != 0 {
            flags |= RWBS_META;
        }
        RwbsFlags(flags)
    }

    /// The [`DevStats::dirs`] index.
    #[inline(always)]
    pub fn direction(self) -> usize {
        if self.0 & RWBS_READ != 0 {
            DIR_READ
        } else if self.0 & RWBS_WRITE != 0 {
            DIR_WRITE
        } else {
            DIR_OTHER
        }
    }
}

/// Log2 bucket of `v`: 0 for 0, else ⌊log2 v⌋ + 1, capped at [`HIST_BUCKETS`] − 1. Bucket b ≥ 1
/// holds [2^(b−1), 2^b). Written without `leading_zeros` (the bpf target has no such instruction)
/// and without branches: the verifier walks every path of a program, and the six branches of a
/// binary search made up to 64 paths of everything after a histogram update (block_rq_issue:
/// 43,000 verified instructions with them, 9,900 without; the load time of a program is in
/// proportion, and was most of ioscope's start-up).
/// `nonzero(t)` is 1 when t ≠ 0: t | −t has its top bit set exactly then. (The negation goes
/// through `black_box`, or LLVM sees `t != 0` and, the bpf target having no set-on-condition
/// instruction, compiles it back into a branch.)
#[inline(always)]
pub fn log2_bucket(v: u64) -> usize {
    #[inline(always)]
    fn nonzero(t: u64) -> u64 {
        (t | core::hint::black_box(t.wrapping_neg())) >> 63
    }
    let mut v = v;
    let mut b = nonzero(v);
    for log_shift in [5u32, 4, 3, 2, 1, 0] {
        let s = nonzero(v >> (1u32 << log_shift)) << log_shift;
        v >>= s;
        b += s;
    }
    (b as usize).min(HIST_BUCKETS - 1)
}

/// The values a log2 bucket holds: [low, high) (the last bucket is open-ended: high = u64::MAX).
pub fn log2_bucket_range(b: usize) -> (u64, u64) {
    match b {
        0 => (0, 1),
        _ if b >= HIST_BUCKETS - 1 => (1 << (HIST_BUCKETS - 2), u64::MAX),
        _ => (1 << (b - 1), 1 << b),
    }
}

/// Queue-depth bucket: exact below 32 (bucket d holds depth d), then log2: bucket 32 holds
/// 32–63, 33 holds 64–127, …, capped at [`DEPTH_BUCKETS`] − 1.
#[inline(always)]
pub fn depth_bucket(depth: u64) -> usize {
    if depth < 32 {
        return depth as usize;
    }
    // log2_bucket(32) = 6.
    let b = 32 + log2_bucket(depth) - 6;
    if b >= DEPTH_BUCKETS {
        DEPTH_BUCKETS - 1
    } else {
        b
    }
}

/// The depths a depth bucket holds: [low, high] inclusive.
pub fn depth_bucket_range(b: usize) -> (u64, u64) {
    if b < 32 {
        return (b as u64, b as u64);
    }
    let shift = (b - 32 + 5) as u32;
    let low = 1u64 << shift;
    if b >= DEPTH_BUCKETS - 1 {
        (low, u64::MAX)
    } else {
        (low, (low << 1) - 1)
    }
}

#[cfg(feature = "user")]
mod user {
    // SAFETY (all): #[repr(C)], only u32/u64/u8-array fields laid out without implicit padding
    // (checked by the size tests below), every bit pattern valid.
    unsafe impl aya::Pod for super::BlockLayout {}
    unsafe impl aya::Pod for super::ReqSlot {}
    unsafe impl aya::Pod for super::ReqInfo {}
    unsafe impl aya::Pod for super::DevStats {}
    unsafe impl aya::Pod for super::DevSlot {}
    unsafe impl aya::Pod for super::ProcKey {}
    unsafe impl aya::Pod for super::ProcStats {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(s: &str) -> u32 {
        let mut b = [0u8; RWBS_LEN];
        b[..s.len()].copy_from_slice(s.as_bytes());
        RwbsFlags::parse(&b).0
    }

    #[test]
    fn a_request_start_settles_from_the_kernels_stamp() {
        // 6.18: stamped just after block_io_start, over the struct's previous use (or 0).
        assert_eq!(settle_start(1_000, 5_000, false), (Some(5_000), true));
        assert_eq!(settle_start(0, 5_000, false), (Some(5_000), true));
        // Earlier kernels: stamped before the event, unchanged since.
        assert_eq!(settle_start(5_000, 5_000, false), (Some(5_000), false));
        // A merged request that started earlier lends its start.
        assert_eq!(settle_start(5_000, 4_000, true), (Some(4_000), true));
        // Not stamped at all: unknown, not the previous use's time.
        assert_eq!(settle_start(1_000, 1_000, true), (None, true));
        assert_eq!(settle_start(0, 0, false), (None, false));
    }

    #[test]
    fn head_with_rwbs_matches_the_record_from_dev() {
        use core::mem::{offset_of, size_of};
        assert_eq!(offset_of!(HeadWithRwbs, sector), HEAD_SECTOR as usize);
        assert_eq!(offset_of!(HeadWithRwbs, nr_sector), HEAD_NR_SECTOR as usize);
        assert_eq!(offset_of!(HeadWithRwbs, bytes), HEAD_BYTES as usize);
        assert_eq!(offset_of!(HeadWithRwbs, rwbs), HEAD_RWBS as usize);
        assert_eq!(size_of::<HeadWithRwbs>(), 40, "no hidden padding");
    }

    #[test]
    fn rwbs_decodes_operation_and_flags() {
        assert_eq!(flags("R"), RWBS_READ);
        assert_eq!(flags("RA"), RWBS_READ | RWBS_READAHEAD);
        assert_eq!(flags("RSM"), RWBS_READ | RWBS_SYNC | RWBS_META);
        assert_eq!(flags("WS"), RWBS_WRITE | RWBS_SYNC);
        // Write with FUA, and a preflush before a sync write with FUA.
        assert_eq!(flags("WFS"), RWBS_WRITE | RWBS_FUA | RWBS_SYNC);
        assert_eq!(flags("FWFS"), RWBS_FLUSH | RWBS_WRITE | RWBS_FUA | RWBS_SYNC);
        // A pure flush, and preflush + flush.
        assert_eq!(flags("F"), RWBS_FLUSH);
        assert_eq!(flags("FF"), RWBS_FLUSH);
        assert_eq!(flags("FS"), RWBS_FLUSH | RWBS_SYNC);
        assert_eq!(flags("D"), RWBS_DISCARD);
        assert_eq!(flags("DE"), RWBS_DISCARD);
        assert_eq!(flags("N"), 0);
        assert_eq!(flags(""), 0);
    }

    /// Linux 6.18's values (`enum req_op`, `enum req_flag_bits`).
    fn layout_6_18() -> CmdFlagValues {
        CmdFlagValues {
            op_mask: 0xff,
            op_read: 0,
            op_write: 1,
            op_flush: 2,
            op_discard: 3,
            op_secure_erase: 5,
            flag_sync: 1 << 11,
            flag_meta: 1 << 12,
            flag_fua: 1 << 17,
            flag_preflush: 1 << 18,
            flag_rahead: 1 << 19,
        }
    }

    #[test]
    fn cmd_flags_decode_as_the_kernel_prints_rwbs() {
        let l = layout_6_18();
        let opf = |op: u32, bits: &[u32]| bits.iter().fold(op, |a, b| a | (1 << b));
        // What blk_fill_rwbs() prints for the same cmd_flags, decoded by parse().
        let cases: [(u32, &str); 10] = [
            (opf(0, &[]), "R"),
            (opf(0, &[19]), "RA"),
            (opf(0, &[11, 12]), "RSM"),
            (opf(1, &[11]), "WS"),
            (opf(1, &[17, 11]), "WFS"),
            (opf(1, &[18, 17, 11]), "FWFS"),
            (opf(2, &[]), "F"),
            (opf(2, &[18]), "FF"),
            (opf(3, &[]), "D"),
            (opf(9, &[]), "N"),
        ];
        for (cmd_flags, rwbs) in cases {
            assert_eq!(RwbsFlags::from_cmd_flags(cmd_flags, &l).0, flags(rwbs), "{rwbs}");
        }
        assert_eq!(RwbsFlags::from_cmd_flags(5, &l).0, flags("DE"));
        // Bits the decoding ignores (e.g. REQ_NOMERGE, REQ_BACKGROUND) change nothing.
        assert_eq!(RwbsFlags::from_cmd_flags(opf(1, &[14, 20]), &l).0, flags("W"));
    }

    #[test]
    fn kernel_mkdev_matches_the_records_dev() {
        // loop0 (7:0), vda (254:0), nvme0n1p3 (259:3): dev as tracefs records hold it.
        assert_eq!(kernel_mkdev(7, 0), 7 << 20);
        assert_eq!(kernel_mkdev(254, 0), 0x0fe0_0000);
        assert_eq!(kernel_mkdev(259, 3), (259 << 20) | 3);
    }

    #[test]
    fn request_tags_spread_over_the_slots() {
        assert_ne!(classic_tag(0, 0), 0, "0 marks an empty slot");
        assert_ne!(classic_tag(7 << 20, 8), classic_tag(254 << 20, 8), "same sector, other disk");
        // 64 requests in flight 4 KiB apart, and 64 request addresses 448 bytes apart (a tag
        // set's requests): no two share a slot.
        let distinct = |slot: &dyn Fn(u64) -> u32| {
            let mut slots = [0u32; 64];
            for (i, s) in slots.iter_mut().enumerate() {
                *s = slot(i as u64);
            }
            slots.sort_unstable();
            slots.windows(2).all(|w| w[0] != w[1])
        };
        assert!(distinct(&|i| req_slot(classic_tag(7 << 20, 1000 + 8 * i))));
        assert!(distinct(&|i| req_slot(0xffff_8880_1234_0000 + 448 * i)));
        assert!((0..1000u64).all(|i| req_slot(i * 4096) < REQ_SLOTS));
    }

    #[test]
    fn rwbs_direction() {
        assert_eq!(RwbsFlags(flags("RA")).direction(), DIR_READ);
        assert_eq!(RwbsFlags(flags("FWS")).direction(), DIR_WRITE);
        assert_eq!(RwbsFlags(flags("FF")).direction(), DIR_OTHER);
        assert_eq!(RwbsFlags(flags("D")).direction(), DIR_OTHER);
    }

    #[test]
    fn log2_buckets_match_their_ranges() {
        assert_eq!(log2_bucket(0), 0);
        assert_eq!(log2_bucket(1), 1);
        assert_eq!(log2_bucket(2), 2);
        assert_eq!(log2_bucket(3), 2);
        assert_eq!(log2_bucket(4096), 13);
        assert_eq!(log2_bucket(8191), 13);
        assert_eq!(log2_bucket(65536), 17);
        assert_eq!(log2_bucket(u64::MAX), HIST_BUCKETS - 1);
        for v in [0u64, 1, 2, 3, 5, 100, 4095, 4096, 27 * 1024, 400 * 1024, 1 << 29, 1 << 30, 1 << 40] {
            let (lo, hi) = log2_bucket_range(log2_bucket(v));
            assert!(lo <= v && v < hi, "{v} not in [{lo}, {hi})");
        }
    }

    #[test]
    fn depth_buckets_are_exact_then_log2() {
        for d in 0..32 {
            assert_eq!(depth_bucket(d), d as usize);
            assert_eq!(depth_bucket_range(d as usize), (d, d));
        }
        assert_eq!(depth_bucket(32), 32);
        assert_eq!(depth_bucket(63), 32);
        assert_eq!(depth_bucket(64), 33);
        assert_eq!(depth_bucket_range(32), (32, 63));
        assert_eq!(depth_bucket_range(33), (64, 127));
        assert_eq!(depth_bucket(u64::MAX), DEPTH_BUCKETS - 1);
        for d in [32u64, 100, 128, 255, 256, 1000, 1 << 20] {
            let (lo, hi) = depth_bucket_range(depth_bucket(d));
            assert!(lo <= d && d <= hi, "{d} not in [{lo}, {hi}]");
        }
    }

    #[test]
    fn process_keys_pack_and_unpack() {
        let k = ProcKey { tgid: 4_194_303, dev: (259 << 20) | 7 };
        assert_eq!(ProcKey::unpacked(k.packed()), Some(k));
        let zero = ProcKey { tgid: 0, dev: 0 };
        assert_ne!(zero.packed(), 0);
        assert_eq!(ProcKey::unpacked(zero.packed()), Some(zero));
        assert_eq!(ProcKey::unpacked(0), None);
        assert!(k.first_slot() < PROCS_MAX);
        // Neighbouring pids of one device land apart.
        let a = ProcKey { tgid: 1000, dev: 8 }.first_slot();
        let b = ProcKey { tgid: 1001, dev: 8 }.first_slot();
        assert!(a.abs_diff(b) >= PROC_PROBES);
    }

    #[test]
    fn shared_structs_have_no_hidden_padding() {
        use core::mem::size_of;
        assert_eq!(size_of::<EventLayout>(), 8 * 4);
        assert_eq!(size_of::<EventHead>(), 24);
        assert_eq!(size_of::<ReqInfo>(), 4 * 8 + 4 * 4 + 16 + 2 * 4);
        assert_eq!(size_of::<ReqSlot>(), 8 + size_of::<ReqInfo>());
        assert_eq!(size_of::<RequestLayout>(), 30 * 4);
        assert_eq!(size_of::<DevSlot>(), 3 * 8);
        assert_eq!(size_of::<CmdFlagValues>(), 11 * 4);
        assert_eq!(size_of::<DirStats>(), (10 + 3 * HIST_BUCKETS) * 8);
        assert_eq!(
            size_of::<DevStats>(),
            3 * size_of::<DirStats>() + (2 * RWBS_FLAG_COUNT + DEPTH_BUCKETS + 2) * 8
        );
        assert_eq!(size_of::<ProcStats>(), 16 + (10 + HIST_BUCKETS) * 8);
    }
}
