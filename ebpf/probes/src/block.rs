//! The block layer, request by request: `block:block_io_start` (in the submitter's context: who
//! asked for the I/O), `block:block_rq_insert` (into the I/O scheduler's queue), `block:block_rq_issue`
//! (to the driver) and `block:block_rq_complete` (by the device: the request is done, and credited
//! to its submitter). The events of one request meet in its slot of the request table BLOCK_REQS
//! (see ioscope_common::block::ReqSlot); everything is summed in per-CPU maps that userspace reads
//! once per interval.
//!
//! Each event has two programs: a BTF tracepoint (`*_btf`), which gets the `struct request` itself
//! (its address is the request's tag; its fields are read with plain loads at offsets from the
//! kernel's BTF), and a classic tracepoint reading the event's record (tag: dev and sector), used
//! where BTF is missing. Userspace attaches one of the two.
//!
//! Every program here runs for every request of every disk (twice per I/O on a loop device: the
//! loop device's and its backing disk's), so each helper call and map operation counts: the request
//! table is an array (inlined lookups), the BTF programs read the submitter from its task, and
//! `block:block_io_done` is not traced (its work, crediting the submitter, is done at
//! block_rq_complete, which sees the same request a moment earlier).

use core::intrinsics::{atomic_cxchg, atomic_xadd, AtomicOrdering};

use crate::kernel::kernel_field;
use aya_ebpf::{
    bindings::BPF_F_MMAPABLE,
    helpers::{
        bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_current_task_btf,
        bpf_ktime_get_ns,
    },
    macros::{btf_tracepoint, map, tracepoint},
    maps::{Array, PerCpuArray},
    programs::{BtfTracePointContext, TracePointContext},
};
use ioscope_common::block::{
    classic_tag, depth_bucket, dev_key, dev_slot, kernel_mkdev, log2_bucket, req_slot, settle_start,
    BlockLayout, CmdFlagValues, DevSlot, DevStats, EventHead, EventLayout, HeadWithRwbs, Health, ProcKey,
    ProcStats, ReqInfo, ReqSlot, RwbsFlags, DEV_PROBES, DEV_SLOTS, DIR_OTHER, HEALTH_COUNTERS, PROCS_MAX,
    PROC_PROBES, REQ_IN_FLIGHT, REQ_SLOTS, REQ_START_FROM_RQ, REQ_START_SEEN, REQ_SUBMITTER, RWBS_FLAG_COUNT,
    RWBS_LEN, RWBS_READAHEAD, RWBS_SYNC,
};
use ioscope_common::block_claim::{dev_claim, proc_claim};

/// Field offsets of the events and of the kernel's request, written by the loader before load.
#[unsafe(no_mangle)]
static BLOCK_LAYOUT: BlockLayout = BlockLayout::UNSET;

/// One event's layout, or one field of it. A plain read of a static the loader may have rewritten
/// before load; volatile so the compiled-in UNSET is not folded. Only the part named is copied (a
/// copy of the whole layout is dozens of loads per event).
macro_rules! layout {
    ($($field:ident).+) => {
        // SAFETY: see above.
        unsafe { core::ptr::read_volatile(&raw const BLOCK_LAYOUT.$($field).+) }
    };
}

#[map]
static BLOCK_REQS: Array<ReqSlot> = Array::with_max_entries(REQ_SLOTS, 0);
#[map]
static BLOCK_DEV_SLOTS: Array<DevSlot> = Array::with_max_entries(DEV_SLOTS, 0);
#[map]
static BLOCK_DEV: PerCpuArray<DevStats> = PerCpuArray::with_max_entries(DEV_SLOTS, 0);
#[map]
static BLOCK_PROC_KEYS: Array<u64> = Array::with_max_entries(PROCS_MAX, BPF_F_MMAPABLE);
#[map]
static BLOCK_PROC: PerCpuArray<ProcStats> = PerCpuArray::with_max_entries(PROCS_MAX, 0);
#[map]
static BLOCK_HEALTH: PerCpuArray<u64> = PerCpuArray::with_max_entries(HEALTH_COUNTERS, 0);
/// 1 once this kernel has been seen to stamp `request.start_time_ns` after block_io_start (see
/// ioscope_common::block::settle_start): a kernel's behaviour, learnt from its first such request.
#[map]
static BLOCK_START_STAMPED_LATE: Array<u32> = Array::with_max_entries(1, 0);

/// A request whose slot is taken by another within this time of its start may still have been in
/// flight (counted as a loss: Health::ReqsFull); an older one had lost its completion.
const LIVE_REQUEST_NS: u64 = 5_000_000_000;

#[tracepoint]
pub fn block_io_start(ctx: TracePointContext) -> u32 {
    classic_io_start::<true>(&ctx)
}

#[tracepoint]
pub fn block_rq_insert(ctx: TracePointContext) -> u32 {
    classic_rq_insert::<true>(&ctx)
}

#[tracepoint]
pub fn block_rq_issue(ctx: TracePointContext) -> u32 {
    classic_rq_issue::<true>(&ctx)
}

#[tracepoint]
pub fn block_rq_complete(ctx: TracePointContext) -> u32 {
    classic_rq_complete::<true>(&ctx)
}

/// The classic programs' bodies. `CAS`: slots are claimed with a compare-and-exchange (Linux
/// 5.12+), else by a map insert (the `_nocas` twins in block_claim.rs; see [`open_slot`]).
#[inline(always)]
pub(crate) fn classic_io_start<const CAS: bool>(ctx: &TracePointContext) -> u32 {
    count_health(Health::IoStartEvents);
    on_result(classic_event(ctx, &layout!(io_start)).map(|e| {
        let t = now();
        io_start::<CAS>(&e, current_submitter(), t, REQ_START_SEEN, || t)
    }))
}

#[inline(always)]
pub(crate) fn classic_rq_insert<const CAS: bool>(ctx: &TracePointContext) -> u32 {
    count_health(Health::RqInsertEvents);
    on_result(classic_event(ctx, &layout!(rq_insert)).map(|e| {
        let t = now();
        if let Some(s) = find(e.tag) {
            s.info.insert_ns = t;
        } else {
            insert_first_seen::<CAS>(&e, t);
        }
    }))
}

#[inline(always)]
pub(crate) fn classic_rq_issue<const CAS: bool>(ctx: &TracePointContext) -> u32 {
    count_health(Health::RqIssueEvents);
    on_result(classic_event(ctx, &layout!(rq_issue)).map(|e| rq_issue::<CAS>(&e)))
}

#[inline(always)]
pub(crate) fn classic_rq_complete<const CAS: bool>(ctx: &TracePointContext) -> u32 {
    count_health(Health::RqCompleteEvents);
    on_result(classic_event(ctx, &layout!(rq_complete)).map(|e| rq_complete::<CAS>(&e)))
}

/// A classic block_rq_complete record as an [`Event`] (block_files.rs reads it too).
#[inline(always)]
pub(crate) fn classic_complete_event(ctx: &TracePointContext) -> Option<Event> {
    classic_event(ctx, &layout!(rq_complete)).ok()
}

#[tracepoint]
pub fn block_rq_merge(ctx: TracePointContext) -> u32 {
    count_health(Health::RqMergeEvents);
    on_result(classic_event(&ctx, &layout!(rq_merge)).map(|e| rq_merge(&e)))
}

/// `TP_PROTO(struct request *rq)`. No clock: the request's start is the kernel's own stamp,
/// read at issue (see REQ_START_FROM_RQ).
#[btf_tracepoint(function = "block_io_start")]
pub fn block_io_start_btf(ctx: BtfTracePointContext) -> i32 {
    count_health(Health::IoStartEvents);
    let task = current_task();
    on_result(btf_event(&ctx, None).map(|e| {
        io_start::<true>(&e, current_submitter_btf(task), e.kernel_start_ns, REQ_START_FROM_RQ, now)
    }));
    0
}

/// The request is usually in the table already (block_io_start put it there): then only its
/// address is needed, and the time is the block layer's own (see [`block_clock`]).
#[btf_tracepoint(function = "block_rq_insert")]
pub fn block_rq_insert_btf(ctx: BtfTracePointContext) -> i32 {
    count_health(Health::RqInsertEvents);
    if layout!(request.configured) == 0 {
        return 0;
    }
    let rq: *const u8 = ctx.arg(0);
    if let Some(s) = find(address_tag(rq)) {
        s.info.insert_ns = block_clock(current_task());
    } else {
        on_result(btf_event(&ctx, None).map(|e| insert_first_seen::<true>(&e, block_clock(current_task()))));
    }
    0
}

#[btf_tracepoint(function = "block_rq_issue")]
pub fn block_rq_issue_btf(ctx: BtfTracePointContext) -> i32 {
    count_health(Health::RqIssueEvents);
    on_result(btf_event(&ctx, None).map(|e| rq_issue::<true>(&e)));
    0
}

/// `TP_PROTO(struct request *rq, blk_status_t error, unsigned int nr_bytes)`: the bytes completed
/// are `nr_bytes`, as in the classic event's `nr_sector`.
#[btf_tracepoint(function = "block_rq_complete")]
pub fn block_rq_complete_btf(ctx: BtfTracePointContext) -> i32 {
    count_health(Health::RqCompleteEvents);
    let nr_bytes: u32 = ctx.arg(2);
    on_result(btf_event(&ctx, Some(nr_bytes)).map(|e| rq_complete::<true>(&e)));
    0
}

#[btf_tracepoint(function = "block_rq_merge")]
pub fn block_rq_merge_btf(ctx: BtfTracePointContext) -> i32 {
    count_health(Health::RqMergeEvents);
    on_result(btf_event(&ctx, None).map(|e| rq_merge(&e)));
    0
}

/// Always 0 (a non-zero return would also write the event to the perf buffer). A failed field read
/// is counted; the map-full cases are counted where they happen.
#[inline(always)]
fn on_result(r: Result<(), Lost>) -> u32 {
    if let Err(Lost::Read) = r {
        count_health(Health::ReadErrors);
    }
    0
}

pub(crate) enum Lost {
    /// The program is not configured (its format was not usable): nothing to do.
    Off,
    Read,
}

/// One event of one request.
#[derive(Default)]
pub(crate) struct Event {
    /// The request's tag in the request table: its address (BTF), or from (dev, sector).
    pub(crate) tag: u64,
    pub(crate) dev: u32,
    pub(crate) sector: u64,
    pub(crate) bytes: u64,
    pub(crate) rwbs: RwbsFlags,
    /// The kernel's own issue time of the request, 0 when unknown (classic events carry none;
    /// see RequestLayout::rq_io_start_time_ns).
    pub(crate) kernel_issue_ns: u64,
    /// The kernel's own start stamp of the request as it is at this event, 0 when unknown
    /// (classic events; see RequestLayout::rq_start_time_ns).
    pub(crate) kernel_start_ns: u64,
}

/// A number for the request at `rq`, unique while it exists: its distance from a fixed address
/// (a global's). The verifier lets no arithmetic but subtraction turn a kernel pointer into a
/// number, and only for privileged programs; a 0 (an empty slot's tag) is impossible.
#[inline(always)]
fn address_tag(rq: *const u8) -> u64 {
    (rq as u64).wrapping_sub(&raw const BLOCK_LAYOUT as u64)
}

/// The event as the classic record would hold it, from the request (BTF programs). `nr_bytes`:
/// block_rq_complete's argument (the bytes completed); other events take the request's size.
#[inline(always)]
pub(crate) fn btf_event(ctx: &BtfTracePointContext, nr_bytes: Option<u32>) -> Result<Event, Lost> {
    if layout!(request.configured) == 0 {
        return Err(Lost::Off);
    }
    let rq: *const u8 = ctx.arg(0);
    let q: *const u8 = kernel_field(rq, layout!(request.rq_q));
    let disk: *const u8 = kernel_field(q, layout!(request.q_disk));
    // The events' `dev`: `rq->q->disk ? disk_devt(rq->q->disk) : 0`.
    let dev = if disk.is_null() {
        0
    } else {
        kernel_mkdev(
            kernel_field::<u32>(disk, layout!(request.disk_major)),
            kernel_field::<u32>(disk, layout!(request.disk_first_minor)),
        )
    };
    let bytes = match nr_bytes {
        Some(n) => n,
        None => kernel_field::<u32>(rq, layout!(request.rq_data_len)),
    };
    let cmd: CmdFlagValues = layout!(request.cmd);
    Ok(Event {
        tag: address_tag(rq),
        dev,
        sector: kernel_field::<u64>(rq, layout!(request.rq_sector)),
        bytes: u64::from(bytes),
        rwbs: RwbsFlags::from_cmd_flags(kernel_field::<u32>(rq, layout!(request.rq_cmd_flags)), &cmd),
        kernel_issue_ns: kernel_field(rq, layout!(request.rq_io_start_time_ns)),
        kernel_start_ns: kernel_field(rq, layout!(request.rq_start_time_ns)),
    })
}

/// Fills `e` from the record. An out-parameter, not a returned Event: a BPF subprogram may not
/// return a pointer into its caller's stack, which is how a returned struct is compiled.
fn read_event(ctx: &TracePointContext, l: &EventLayout, e: &mut Event) -> Result<(), Lost> {
    if l.configured == 0 {
        return Err(Lost::Off);
    }
    // SAFETY: read_at goes through bpf_probe_read, which copes with any offset; the offsets come
    // from this kernel's own format file, checked for size by the loader. Each read is a helper
    // call (a large share of a program's cost), so the usual layout is read in one go.
    unsafe {
        let (dev, sector, size, rwbs) = if l.rwbs_in_head != 0 {
            let h: HeadWithRwbs = ctx.read_at(l.dev_offset as usize).map_err(|_| Lost::Read)?;
            (h.dev, h.sector, if l.size_in_sectors != 0 { h.nr_sector } else { h.bytes }, h.rwbs)
        } else {
            let (dev, sector, size) = if l.compact != 0 {
                let head: EventHead = ctx.read_at(l.dev_offset as usize).map_err(|_| Lost::Read)?;
                (head.dev, head.sector, if l.size_in_sectors != 0 { head.nr_sector } else { head.bytes })
            } else {
                let dev: u32 = ctx.read_at(l.dev_offset as usize).map_err(|_| Lost::Read)?;
                let sector: u64 = ctx.read_at(l.sector_offset as usize).map_err(|_| Lost::Read)?;
                let size: u32 = ctx.read_at(l.size_offset as usize).map_err(|_| Lost::Read)?;
                (dev, sector, size)
            };
            let rwbs: [u8; RWBS_LEN] = ctx.read_at(l.rwbs_offset as usize).map_err(|_| Lost::Read)?;
            (dev, sector, size, rwbs)
        };
        e.dev = dev;
        e.sector = sector;
        e.bytes = if l.size_in_sectors != 0 { u64::from(size) << 9 } else { u64::from(size) };
        e.rwbs = RwbsFlags::parse(&rwbs);
    }
    Ok(())
}

/// The event from a classic tracepoint's record. Inlined: a subprogram may not return a struct
/// (it would be a pointer into its caller's stack).
#[inline(always)]
pub(crate) fn classic_event(ctx: &TracePointContext, l: &EventLayout) -> Result<Event, Lost> {
    let mut e = Event::default();
    read_event(ctx, l, &mut e)?;
    e.tag = classic_tag(e.dev, e.sector);
    Ok(e)
}

#[inline(always)]
pub(crate) fn now() -> u64 {
    // SAFETY: no arguments, no preconditions.
    unsafe { bpf_ktime_get_ns() }
}

/// The current task, for plain loads of its fields. A helper call (each costs a return through
/// the return thunk here), so a program makes it once.
#[inline(always)]
fn current_task() -> *const u8 {
    // SAFETY: no arguments, no preconditions; returns the current task, never null.
    unsafe { bpf_get_current_task_btf() as *const u8 }
}

/// The time as the block layer reads it in a task (`blk_time_get_ns()`): the current task's plug
/// holds the time the kernel read once for its batch of requests (their start and, where the
/// kernel stamps it, issue times are that time), so a program in the same batch reads it with two
/// loads instead of reading the clock again. Without a plug, a time in it, or the field (before
/// Linux 6.9), the clock. BTF
/// programs in task context only: in an interrupt, `current` is whichever task was interrupted.
/// `task`: the current task ([`current_task`]).
#[inline(always)]
fn block_clock(task: *const u8) -> u64 {
    // 0: the kernel's plug has no time (before Linux 6.9): the clock.
    let cur_ktime = layout!(request.plug_cur_ktime);
    let plug: *const u8 = kernel_field(task, layout!(request.task_plug));
    if cur_ktime != 0 && !plug.is_null() {
        let t: u64 = kernel_field(plug, cur_ktime);
        if t != 0 {
            return t;
        }
    }
    now()
}

#[inline(always)]
fn count_health(h: Health) {
    add_health(h, 1);
}

/// Adds `by` (wrapping: u64::MAX is −1) to this CPU's counter `h`.
#[inline(always)]
fn add_health(h: Health, by: u64) {
    if let Some(p) = BLOCK_HEALTH.get_ptr_mut(h as u32) {
        // SAFETY: this CPU's slot; tracing programs do not nest on one CPU.
        unsafe { *p = (*p).wrapping_add(by) };
    }
}

/// Adds `by` to bucket `i` without a panic path (an index out of range is ignored).
#[inline(always)]
fn bump<const N: usize>(hist: &mut [u64; N], i: usize, by: u64) {
    if let Some(slot) = hist.get_mut(i) {
        *slot += by;
    }
}

/// One of the request table's slots (a valid index: masked).
#[inline(always)]
fn slot_at(i: u32) -> Option<&'static mut ReqSlot> {
    let p = BLOCK_REQS.get_ptr_mut(i & (REQ_SLOTS - 1))?;
    // SAFETY: a valid pointer into the array. One request's events do not race each other; two
    // requests claiming one slot at once is the rare collision the table accepts.
    Some(unsafe { &mut *p })
}

/// The slot holding the request `tag`: either slot of its pair (see ioscope_common::block::REQ_SLOTS).
#[inline(always)]
pub(crate) fn find(tag: u64) -> Option<&'static mut ReqSlot> {
    let first = req_slot(tag) & !1;
    let a = slot_at(first)?;
    if a.tag == tag {
        return Some(a);
    }
    let b = slot_at(first | 1)?;
    (b.tag == tag).then_some(b)
}

/// A slot for the request `tag` (its info is then rewritten by the caller), from its pair: the
/// one it already holds (its completion was lost and the address or sector came round again),
/// else an empty one, else the one taken longer ago. A request still in the slot taken leaves:
/// its share of the in-flight count goes with it (or the count would drift up forever), and when
/// it was recent (so perhaps still in flight: it loses its latency and submitter) it is counted.
#[inline(always)]
fn claim<const CAS: bool>(tag: u64, now_ns: impl Fn() -> u64) -> Option<&'static mut ReqSlot> {
    let first = req_slot(tag) & !1;
    let a = slot_at(first)?;
    let b = slot_at(first | 1)?;
    let s = if a.tag == tag || (a.tag == 0 && b.tag != tag) {
        a
    } else if b.tag == tag || b.tag == 0 || age_key(&b.info) < age_key(&a.info) {
        b
    } else {
        a
    };
    if s.tag == 0 {
        add_health(Health::SlotsUsed, 1);
    } else {
        if s.tag != tag
            && (age_key(&s.info) == u64::MAX || now_ns().saturating_sub(s.info.start_ns) < LIVE_REQUEST_NS)
        {
            count_health(Health::ReqsFull);
        }
        if s.info.flags & REQ_IN_FLIGHT != 0 {
            if let Some((_, d)) = device::<CAS>(s.info.dev) {
                inflight_add(d, u64::MAX);
            }
        }
    }
    s.tag = tag;
    Some(s)
}

/// What orders two requests by age for [`claim`]: the start, or for a start still to be settled
/// (REQ_START_FROM_RQ: `start_ns` is then the request struct's previous stamp, of any age) the
/// newest possible, since its block_io_start just ran.
#[inline(always)]
fn age_key(r: &ReqInfo) -> u64 {
    if r.flags & REQ_START_FROM_RQ != 0 {
        u64::MAX
    } else {
        r.start_ns
    }
}

/// Empties `s`.
#[inline(always)]
fn release(s: &mut ReqSlot) {
    s.tag = 0;
    add_health(Health::SlotsUsed, u64::MAX);
}

/// The device table's entry of kernel dev_t `dev` and its index (in BLOCK_DEV too), taking a
/// free slot the first time the device is seen. None when its slots are all taken by other
/// devices (counted).
#[inline(always)]
fn device<const CAS: bool>(dev: u32) -> Option<(u32, &'static mut DevSlot)> {
    let (i, claimed) = open_slot::<CAS>(
        dev_key(dev),
        dev_slot(dev),
        DEV_SLOTS,
        DEV_PROBES,
        Health::DevsFull,
        dev_claim,
        |i| {
            // SAFETY: a valid pointer into the array.
            BLOCK_DEV_SLOTS.get_ptr_mut(i).map(|p| unsafe { &raw mut (*p).key })
        },
    )?;
    if claimed {
        count_health(Health::DevSlotsClaimed);
    }
    // SAFETY: a valid pointer into the array. Its fields are changed with atomic adds or single
    // stores.
    BLOCK_DEV_SLOTS.get_ptr_mut(i).map(|p| (i, unsafe { &mut *p }))
}

/// Open addressing over a table of `slots` keys (a power of two) shared by all CPUs: the index of
/// `key`, looking from `first` at up to `probes` slots, and whether this call claimed it. A free
/// slot (0) is claimed with a compare-and-swap (`CAS`), else by inserting its claim key
/// (`claim_key(i)`) into a map (block_claim.rs: kernels before 5.12), since two CPUs may meet a new
/// key at once. None (counted as `full`) when the slots looked at all hold other keys.
#[inline(always)]
fn open_slot<const CAS: bool>(
    key: u64,
    first: u32,
    slots: u32,
    probes: u32,
    full: Health,
    claim_key: impl Fn(u32) -> u32,
    key_at: impl Fn(u32) -> Option<*mut u64>,
) -> Option<(u32, bool)> {
    let mut n = 0;
    while n < probes {
        let i = (first + n) & (slots - 1);
        let p = key_at(i)?;
        // SAFETY: a valid, aligned pointer into the map's value (values are 8-byte aligned); a
        // key is only ever changed from 0 by the programs, atomically.
        let k = unsafe { core::ptr::read_volatile(p) };
        if k == key {
            return Some((i, false));
        }
        if k == 0 {
            let old = if CAS {
                // SAFETY: as above.
                unsafe {
                    atomic_cxchg::<u64, { AtomicOrdering::SeqCst }, { AtomicOrdering::SeqCst }>(p, 0, key).0
                }
            } else {
                crate::block_claim::claim_by_insert(claim_key(i), key, p)
            };
            if old == 0 || old == key {
                return Some((i, old == 0));
            }
        }
        n += 1;
    }
    count_health(full);
    None
}

/// Adds `delta` (wrapping: u64::MAX is −1) to the device's in-flight count. Shared by all CPUs, so
/// atomic; the result is not used (the bpf target's XADD returns nothing).
#[inline(always)]
fn inflight_add(d: &mut DevSlot, delta: u64) {
    // SAFETY: a valid, aligned pointer into the map's value. The bpf target offers no AtomicU64
    // read-modify-write, but the intrinsic lowers to the XADD instruction when its result is unused.
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(&raw mut d.in_flight, delta) };
}

/// This CPU's counters of the device at index `i` of the device table.
#[inline(always)]
fn dev_stats(i: u32) -> Option<&'static mut DevStats> {
    // SAFETY: this CPU's copy of the device's value.
    BLOCK_DEV.get_ptr_mut(i).map(|p| unsafe { &mut *p })
}

/// This CPU's counters of process `tgid` on device `dev`, taking a slot of the process table the
/// first time the pair is seen.
#[inline(always)]
fn proc_stats<const CAS: bool>(tgid: u32, dev: u32) -> Option<&'static mut ProcStats> {
    let k = ProcKey { tgid, dev };
    let (i, _) = open_slot::<CAS>(
        k.packed(),
        k.first_slot(),
        PROCS_MAX,
        PROC_PROBES,
        Health::ProcsFull,
        proc_claim,
        |i| BLOCK_PROC_KEYS.get_ptr_mut(i),
    )?;
    // SAFETY: this CPU's copy of the slot's value.
    BLOCK_PROC.get_ptr_mut(i).map(|p| unsafe { &mut *p })
}

/// Who submits the request (block_io_start runs in its context).
struct Submitter {
    tgid: u32,
    comm: [u8; 16],
    cgroup_id: u64,
}

/// The submitter from the helpers (classic programs).
#[inline(always)]
fn current_submitter() -> Submitter {
    Submitter {
        tgid: (bpf_get_current_pid_tgid() >> 32) as u32,
        comm: bpf_get_current_comm().unwrap_or([0; 16]),
        // SAFETY: no arguments, no preconditions.
        cgroup_id: unsafe { bpf_get_current_cgroup_id() },
    }
}

/// The same from the task itself with plain loads (BTF programs): one helper call instead of
/// three. The cgroup id is what bpf_get_current_cgroup_id returns: the kernfs node id of the
/// task's cgroup on the default (v2) hierarchy, `task->cgroups->dfl_cgrp->kn->id`.
#[inline(always)]
fn current_submitter_btf(task: *const u8) -> Submitter {
    let css_set: *const u8 = kernel_field(task, layout!(request.task.cgroups));
    let cgroup: *const u8 = kernel_field(css_set, layout!(request.task.css_set_dfl_cgrp));
    let kn: *const u8 = kernel_field(cgroup, layout!(request.task.cgroup_kn));
    Submitter {
        tgid: kernel_field(task, layout!(request.task.tgid)),
        comm: kernel_field(task, layout!(request.task.comm)),
        cgroup_id: kernel_field(kn, layout!(request.task.kn_id)),
    }
}

/// Submitter context: remember who asked for this request, and when: `start` with `start_flag`
/// (REQ_START_SEEN: the time; REQ_START_FROM_RQ: the kernel's stamp as it is now, settled later).
/// `now`: the time, read only when the slot must be taken from another request.
#[inline(always)]
fn io_start<const CAS: bool>(e: &Event, who: Submitter, start: u64, start_flag: u32, now: impl Fn() -> u64) {
    let Some(s) = claim::<CAS>(e.tag, now) else { return };
    // Field by field, the zeros as volatile stores: a struct literal's adjacent zeros become a
    // call to a byte-by-byte memset.
    let r = &mut s.info;
    r.start_ns = start;
    // SAFETY: valid, aligned fields of the slot.
    unsafe {
        core::ptr::write_volatile(&raw mut r.insert_ns, 0);
        core::ptr::write_volatile(&raw mut r.issue_ns, 0);
    }
    r.cgroup_id = who.cgroup_id;
    r.tgid = who.tgid;
    r.bytes = e.bytes as u32;
    r.flags = REQ_SUBMITTER | start_flag;
    r.rwbs = e.rwbs.0;
    r.comm = who.comm;
    r.dev = e.dev;
}

/// Settles the start of a request whose start is the kernel's stamp (REQ_START_FROM_RQ), from
/// the stamp as it is now (`kernel_start_ns`): see ioscope_common::block::settle_start. An
/// unknown start becomes now, without REQ_START_SEEN: no queue time, and its submitter's latency
/// counts from here (`now`: the time, read only then, and by the caller if it has it already);
/// the slot still needs a time for the table's eviction and purge.
#[inline(always)]
fn settle(r: &mut ReqInfo, kernel_start_ns: u64, now: impl Fn() -> u64) {
    let late_flag = BLOCK_START_STAMPED_LATE.get_ptr_mut(0);
    // SAFETY: a valid pointer into the map's value; a u32 written only ever from 0 to 1.
    let late = late_flag.is_some_and(|p| unsafe { core::ptr::read_volatile(p) } != 0);
    let (start, now_late) = settle_start(r.start_ns, kernel_start_ns, late);
    if now_late && !late {
        if let Some(p) = late_flag {
            // SAFETY: as above.
            unsafe { core::ptr::write_volatile(p, 1) };
        }
    }
    r.flags &= !REQ_START_FROM_RQ;
    match start {
        Some(t) => {
            r.start_ns = t;
            r.flags |= REQ_START_SEEN;
        }
        None => r.start_ns = now(),
    }
}

/// Into the scheduler's queue at `t`, a request not in the table (its block_io_start was missed).
#[inline(always)]
fn insert_first_seen<const CAS: bool>(e: &Event, t: u64) {
    if let Some(s) = claim::<CAS>(e.tag, || t) {
        s.info = ReqInfo { insert_ns: t, ..first_seen(e, t, REQ_START_SEEN) };
    }
}

/// What an event tells of a request first seen there at `t` (its block_io_start was missed).
#[inline(always)]
fn first_seen(e: &Event, t: u64, flags: u32) -> ReqInfo {
    ReqInfo { start_ns: t, flags, rwbs: e.rwbs.0, bytes: e.bytes as u32, ..zero_info(e.dev) }
}

#[inline(always)]
fn zero_info(dev: u32) -> ReqInfo {
    ReqInfo {
        start_ns: 0,
        insert_ns: 0,
        issue_ns: 0,
        cgroup_id: 0,
        tgid: 0,
        bytes: 0,
        flags: 0,
        rwbs: 0,
        comm: [0; 16],
        dev,
        _pad: 0,
    }
}

/// To the driver: size, flags, queue depth. The issue time is kept for the completion, which
/// counts the queue, scheduler and device times; where the kernel stamps it in the request
/// itself (learnt per device at completion) there is no clock to read here.
#[inline(always)]
fn rq_issue<const CAS: bool>(e: &Event) {
    let dir = e.rwbs.direction();
    let dev = device::<CAS>(e.dev);
    let kernel_stamps = matches!(&dev, Some((_, d)) if d.kernel_stamps_issue != 0);
    let mut counted_in_flight = false;
    if let Some(s) = find(e.tag) {
        let r = &mut s.info;
        let issue_ns = if kernel_stamps { 0 } else { now() };
        if r.flags & REQ_START_FROM_RQ != 0 {
            settle(r, e.kernel_start_ns, || if issue_ns != 0 { issue_ns } else { now() });
        }
        r.issue_ns = issue_ns;
        // Bios merged into the request since it was created: its size now is what it carries.
        r.bytes = e.bytes as u32;
        if r.flags & REQ_IN_FLIGHT == 0 {
            r.flags |= REQ_IN_FLIGHT;
            counted_in_flight = true;
        }
    } else {
        count_health(Health::IssueUnmatched);
        // A time for the slot in any case: the table's eviction and purge go by it.
        let t = now();
        if let Some(s) = claim::<CAS>(e.tag, || t) {
            s.info = ReqInfo { issue_ns: t, ..first_seen(e, t, REQ_IN_FLIGHT) };
            counted_in_flight = true;
        }
    }
    let Some((i, d)) = dev else { return };
    let depth = if counted_in_flight {
        inflight_add(d, 1);
        // Read after our own increment.
        // SAFETY: a valid pointer into the map's value.
        Some(unsafe { core::ptr::read_volatile(&raw const d.in_flight) })
    } else {
        None
    };

    let Some(s) = dev_stats(i) else { return };
    if let Some(d) = s.dirs.get_mut(dir) {
        d.issued_requests += 1;
        d.issued_bytes += e.bytes;
        bump(&mut d.size_hist, log2_bucket(e.bytes), 1);
    }
    // Without branches: each doubled the paths the verifier walks through the rest of the
    // program (421,000 verified instructions with them, 43,000 without: 0.5–1.9 s of start-up).
    let mut bit = 0usize;
    while bit < RWBS_FLAG_COUNT {
        let set = u64::from(e.rwbs.0 >> bit) & 1;
        bump(&mut s.flag_requests, bit, set);
        bump(&mut s.flag_bytes, bit, e.bytes & set.wrapping_neg());
        bit += 1;
    }
    if let Some(depth) = depth {
        bump(&mut s.depth_hist, depth_bucket(depth), 1);
        s.depth_sum += depth;
        s.depth_samples += 1;
    }
}

/// Done by the device: device time, queue and scheduler times, completed bytes (what
/// /proc/diskstats counts), and the whole request credited to the process that submitted it. A
/// partial completion (an error, or a driver completing in pieces) credits the whole request at
/// its first piece: with the classic tag the later pieces have moved the sector and are not
/// matched (counted as completions without issue); with the BTF tag they find the slot empty,
/// the same.
#[inline(always)]
fn rq_complete<const CAS: bool>(e: &Event) {
    let t = crate::block_files::completion_time(e.tag);
    let dev = device::<CAS>(e.dev);
    // A copy of the slot's info, fully written on every path (an `Option<ReqInfo>` left LLVM free
    // to read a register never written when it is None, which the verifier refuses).
    let mut info = zero_info(e.dev);
    let mut found = false;
    if let Some(s) = find(e.tag) {
        if s.info.flags & REQ_START_FROM_RQ != 0 {
            // Completed with its issue not seen (a run the kernel skipped): settled now.
            settle(&mut s.info, e.kernel_start_ns, || t);
        }
        info = s.info;
        found = true;
        release(s);
    } else {
        count_health(Health::CompleteUnmatched);
    }
    let tracked = found.then_some(&info);
    // A device the table had no room for is not counted; its submitters still are.
    if let Some((i, d)) = dev {
        complete_on_device(e, t, i, d, tracked);
    }
    if let Some(r) = tracked.filter(|r| r.flags & REQ_SUBMITTER != 0) {
        credit_submitter::<CAS>(r, e.dev, t);
    }
}

/// The completion `e` at `t` on the device at index `i` of the device table: its in-flight
/// count, whether the kernel stamps its requests, completed bytes, and the times of the request
/// when it was tracked.
#[inline(always)]
fn complete_on_device(e: &Event, t: u64, i: u32, d: &mut DevSlot, tracked: Option<&ReqInfo>) {
    let dir = e.rwbs.direction();
    if let Some(r) = tracked {
        if r.flags & REQ_IN_FLIGHT != 0 {
            inflight_add(d, u64::MAX);
        }
    }
    // Whether the kernel stamps this device's requests at issue (BTF programs, reads and writes:
    // passthrough commands never are); the classic programs cannot tell and leave it at 0.
    if dir != DIR_OTHER {
        let stamps = u32::from(e.kernel_issue_ns != 0);
        if d.kernel_stamps_issue != stamps {
            d.kernel_stamps_issue = stamps;
        }
    }
    let Some(ds) = dev_stats(i).and_then(|s| s.dirs.get_mut(dir)) else { return };
    ds.completed_requests += 1;
    ds.completed_bytes += e.bytes;
    let Some(r) = tracked.filter(|r| r.flags & REQ_IN_FLIGHT != 0) else { return };
    let issue_ns = if r.issue_ns != 0 { r.issue_ns } else { e.kernel_issue_ns };
    if issue_ns == 0 {
        return;
    }
    let device_ns = t.saturating_sub(issue_ns);
    ds.device_ns_sum += device_ns;
    ds.device_count += 1;
    bump(&mut ds.device_hist, log2_bucket(device_ns / 1000), 1);
    if r.flags & REQ_START_SEEN != 0 {
        let queue_ns = issue_ns.saturating_sub(r.start_ns);
        ds.queue_ns_sum += queue_ns;
        ds.queue_count += 1;
        bump(&mut ds.queue_hist, log2_bucket(queue_ns / 1000), 1);
    }
    if r.insert_ns != 0 {
        ds.sched_ns_sum += issue_ns.saturating_sub(r.insert_ns);
        ds.sched_requests += 1;
    }
}

/// The whole request, done at `t`, credited to the process that submitted it.
#[inline(always)]
fn credit_submitter<const CAS: bool>(r: &ReqInfo, dev: u32, t: u64) {
    let Some(s) = proc_stats::<CAS>(r.tgid, dev) else { return };
    s.comm = r.comm;
    s.cgroup_id = r.cgroup_id;
    let bytes = u64::from(r.bytes);
    let flags = RwbsFlags(r.rwbs);
    match flags.direction() {
        0 => {
            s.read_requests += 1;
            s.read_bytes += bytes;
        }
        1 => {
            s.write_requests += 1;
            s.write_bytes += bytes;
        }
        _ => s.other_requests += 1,
    }
    if flags.0 & RWBS_READAHEAD != 0 {
        s.readahead_bytes += bytes;
    }
    if flags.0 & RWBS_SYNC != 0 {
        s.sync_bytes += bytes;
    }
    let lat = t.saturating_sub(r.start_ns);
    s.lat_ns_sum += lat;
    s.lat_count += 1;
    bump(&mut s.lat_hist, log2_bucket(lat / 1000), 1);
}

/// A request merged into another before issue (the scheduler's request merging): it will never be
/// issued or completed itself, so its slot is emptied (its bytes are carried by the other request).
#[inline(always)]
fn rq_merge(e: &Event) {
    if let Some(s) = find(e.tag) {
        release(s);
    }
}
