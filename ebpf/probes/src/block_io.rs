//! The block layer, request by request: `block:block_io_start` (in the submitter's context: who
//! asked for the I/O), `block:block_rq_insert` (into the I/O scheduler's queue), `block:block_rq_issue`
//! (to the driver) and `block:block_rq_complete` (by the device: the request is done, and credited
//! to its submitter). The events of one request are paired by (dev, sector) in BLOCK_REQS;
//! everything is summed in per-CPU maps that userspace reads once per interval (see
//! ioscope_common::block).
//!
//! Every program here runs for every request of every disk (twice per I/O on a loop device: the
//! loop device's and its backing disk's), so each helper call counts: `block:block_io_done` is not
//! traced, its work (crediting the submitter) is done at block_rq_complete, which sees the same
//! request a moment earlier.

use core::intrinsics::{atomic_xadd, AtomicOrdering};

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{map, tracepoint},
    maps::{Array, HashMap, PerCpuArray, PerCpuHashMap},
    programs::TracePointContext,
};
use ioscope_common::block::{
    depth_bucket, log2_bucket, BlockLayout, DevStats, EventHead, EventLayout, HeadWithRwbs, Health, ProcKey,
    ProcStats, ReqInfo, ReqKey, RwbsFlags, DEVS_MAX, HEALTH_COUNTERS, PROCS_MAX, REQS_MAX, REQ_IN_FLIGHT,
    REQ_SUBMITTER, RWBS_FLAG_COUNT, RWBS_LEN, RWBS_READAHEAD, RWBS_SYNC,
};

/// Field offsets of the events, written by the loader from tracefs before load.
#[unsafe(no_mangle)]
static BLOCK_LAYOUT: BlockLayout = BlockLayout::UNSET;

#[map]
static BLOCK_REQS: HashMap<ReqKey, ReqInfo> = HashMap::with_max_entries(REQS_MAX, 0);
#[map]
static BLOCK_DEV: PerCpuHashMap<u32, DevStats> = PerCpuHashMap::with_max_entries(DEVS_MAX, 0);
#[map]
static BLOCK_PROC: PerCpuHashMap<ProcKey, ProcStats> = PerCpuHashMap::with_max_entries(PROCS_MAX, 0);
#[map]
static BLOCK_INFLIGHT: HashMap<u32, u64> = HashMap::with_max_entries(DEVS_MAX, 0);
#[map]
static BLOCK_HEALTH: PerCpuArray<u64> = PerCpuArray::with_max_entries(HEALTH_COUNTERS, 0);
/// All-zero values to insert new entries from: DevStats and ProcStats are too big for the 512-byte
/// eBPF stack. Never written.
#[map]
static BLOCK_ZERO_DEV: Array<DevStats> = Array::with_max_entries(1, 0);
#[map]
static BLOCK_ZERO_PROC: Array<ProcStats> = Array::with_max_entries(1, 0);

#[tracepoint]
pub fn block_io_start(ctx: TracePointContext) -> u32 {
    count_health(Health::IoStartEvents);
    on_result(try_io_start(&ctx))
}

#[tracepoint]
pub fn block_rq_insert(ctx: TracePointContext) -> u32 {
    count_health(Health::RqInsertEvents);
    on_result(try_rq_insert(&ctx))
}

#[tracepoint]
pub fn block_rq_issue(ctx: TracePointContext) -> u32 {
    count_health(Health::RqIssueEvents);
    on_result(try_rq_issue(&ctx))
}

#[tracepoint]
pub fn block_rq_complete(ctx: TracePointContext) -> u32 {
    count_health(Health::RqCompleteEvents);
    on_result(try_rq_complete(&ctx))
}

#[tracepoint]
pub fn block_rq_merge(ctx: TracePointContext) -> u32 {
    count_health(Health::RqMergeEvents);
    on_result(try_rq_merge(&ctx))
}

/// Always 0 (a non-zero return would also write the event to the perf buffer). A failed field read
/// is counted; the map-full cases are counted where they happen.
fn on_result(r: Result<(), Lost>) -> u32 {
    if let Err(Lost::Read) = r {
        count_health(Health::ReadErrors);
    }
    0
}

enum Lost {
    /// The program is not configured (its format was not usable): nothing to do.
    Off,
    Read,
}

#[derive(Default)]
struct Event {
    dev: u32,
    sector: u64,
    bytes: u64,
    rwbs: RwbsFlags,
}

/// One event's layout. A plain read of a static the loader may have rewritten before load;
/// volatile so the compiled-in UNSET is not folded. Only the event's own part is copied.
macro_rules! layout {
    ($event:ident) => {
        // SAFETY: see above.
        unsafe { core::ptr::read_volatile(&raw const BLOCK_LAYOUT.$event) }
    };
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

fn now() -> u64 {
    // SAFETY: no arguments, no preconditions.
    unsafe { bpf_ktime_get_ns() }
}

fn key(e: &Event) -> ReqKey {
    ReqKey { dev: e.dev, _pad: 0, sector: e.sector }
}

fn count_health(h: Health) {
    if let Some(p) = BLOCK_HEALTH.get_ptr_mut(h as u32) {
        // SAFETY: this CPU's slot; tracing programs do not nest on one CPU.
        unsafe { *p += 1 };
    }
}

/// Adds `by` to bucket `i` without a panic path (an index out of range is ignored).
#[inline(always)]
fn bump<const N: usize>(hist: &mut [u64; N], i: usize, by: u64) {
    if let Some(slot) = hist.get_mut(i) {
        *slot += by;
    }
}

/// Adds `delta` (wrapping: u64::MAX is −1) to the device's in-flight count, creating it at 0. Shared
/// by all CPUs, so atomic; the result is not used (the bpf target's XADD returns nothing).
fn inflight_add(dev: u32, delta: u64) -> Option<*mut u64> {
    let p = match BLOCK_INFLIGHT.get_ptr_mut(dev) {
        Some(p) => p,
        None => {
            // Another CPU may create it in between: then NOEXIST fails and the lookup finds theirs.
            let _ = BLOCK_INFLIGHT.insert(dev, 0u64, u64::from(BPF_NOEXIST));
            BLOCK_INFLIGHT.get_ptr_mut(dev)?
        }
    };
    // SAFETY: a valid, aligned pointer into the map's value. The bpf target offers no AtomicU64
    // read-modify-write, but the intrinsic lowers to the XADD instruction when its result is unused.
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(p, delta) };
    Some(p)
}

fn dev_stats(dev: u32) -> Option<*mut DevStats> {
    if let Some(p) = BLOCK_DEV.get_ptr_mut(dev) {
        return Some(p);
    }
    let zero = BLOCK_ZERO_DEV.get(0)?;
    if BLOCK_DEV.insert(dev, zero, u64::from(BPF_NOEXIST)).is_err() && BLOCK_DEV.get_ptr_mut(dev).is_none() {
        count_health(Health::DevsFull);
        return None;
    }
    BLOCK_DEV.get_ptr_mut(dev)
}

fn proc_stats(k: &ProcKey) -> Option<*mut ProcStats> {
    if let Some(p) = BLOCK_PROC.get_ptr_mut(k) {
        return Some(p);
    }
    let zero = BLOCK_ZERO_PROC.get(0)?;
    if BLOCK_PROC.insert(k, zero, u64::from(BPF_NOEXIST)).is_err() && BLOCK_PROC.get_ptr_mut(k).is_none() {
        count_health(Health::ProcsFull);
        return None;
    }
    BLOCK_PROC.get_ptr_mut(k)
}

/// Submitter context: remember who asked for this request, and when.
fn try_io_start(ctx: &TracePointContext) -> Result<(), Lost> {
    let mut e = Event::default();
    read_event(ctx, &layout!(io_start), &mut e)?;
    let k = key(&e);
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    let info = ReqInfo {
        start_ns: now(),
        insert_ns: 0,
        issue_ns: 0,
        // SAFETY: no arguments, no preconditions.
        cgroup_id: unsafe { bpf_get_current_cgroup_id() },
        tgid,
        bytes: e.bytes as u32,
        flags: REQ_SUBMITTER,
        rwbs: e.rwbs.0,
        comm: bpf_get_current_comm().unwrap_or([0; 16]),
    };
    // Usually new: one insert. Otherwise a request still tracked at the same place is superseded
    // (its completion was lost): its share of the in-flight count goes with it, or the count would
    // drift up forever.
    if BLOCK_REQS.insert(k, info, u64::from(BPF_NOEXIST)).is_err() {
        match BLOCK_REQS.get_ptr_mut(k) {
            Some(old) => {
                // SAFETY: a valid pointer into the map; one request's events do not race each other.
                unsafe {
                    if (*old).flags & REQ_IN_FLIGHT != 0 {
                        inflight_add(e.dev, u64::MAX);
                    }
                    *old = info;
                }
            }
            None => count_health(Health::ReqsFull),
        }
    }
    Ok(())
}

/// Into the scheduler's queue.
fn try_rq_insert(ctx: &TracePointContext) -> Result<(), Lost> {
    let mut e = Event::default();
    read_event(ctx, &layout!(rq_insert), &mut e)?;
    let k = key(&e);
    let t = now();
    match BLOCK_REQS.get_ptr_mut(k) {
        // SAFETY: a valid pointer into the map; one request's events do not race each other.
        Some(p) => unsafe { (*p).insert_ns = t },
        None => {
            let info =
                ReqInfo { start_ns: t, insert_ns: t, rwbs: e.rwbs.0, bytes: e.bytes as u32, ..zero_info() };
            if BLOCK_REQS.insert(k, info, u64::from(BPF_NOEXIST)).is_err() {
                count_health(Health::ReqsFull);
            }
        }
    }
    Ok(())
}

fn zero_info() -> ReqInfo {
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
    }
}

/// To the driver: size, flags, queue time, queue depth.
fn try_rq_issue(ctx: &TracePointContext) -> Result<(), Lost> {
    let mut e = Event::default();
    read_event(ctx, &layout!(rq_issue), &mut e)?;
    let k = key(&e);
    let t = now();
    let dir = e.rwbs.direction();

    // Queue and scheduler times, and the in-flight count, from the tracked request.
    let mut queue_ns = None;
    let mut sched_ns = None;
    let mut counted_in_flight = false;
    match BLOCK_REQS.get_ptr_mut(k) {
        Some(p) => {
            // SAFETY: a valid pointer into the map; one request's events do not race each other.
            let r = unsafe { &mut *p };
            if r.start_ns != 0 && r.issue_ns == 0 {
                queue_ns = Some(t.saturating_sub(r.start_ns));
            }
            if r.insert_ns != 0 && r.issue_ns == 0 {
                sched_ns = Some(t.saturating_sub(r.insert_ns));
            }
            r.issue_ns = t;
            // Bios merged into the request since it was created: its size now is what it carries.
            r.bytes = e.bytes as u32;
            if r.flags & REQ_IN_FLIGHT == 0 {
                r.flags |= REQ_IN_FLIGHT;
                counted_in_flight = true;
            }
        }
        None => {
            count_health(Health::IssueUnmatched);
            let info = ReqInfo {
                start_ns: t,
                issue_ns: t,
                flags: REQ_IN_FLIGHT,
                rwbs: e.rwbs.0,
                bytes: e.bytes as u32,
                ..zero_info()
            };
            if BLOCK_REQS.insert(k, info, u64::from(BPF_NOEXIST)).is_ok() {
                counted_in_flight = true;
            } else {
                count_health(Health::ReqsFull);
            }
        }
    }
    let depth = if counted_in_flight {
        // SAFETY: a valid pointer into the map (read after our own increment).
        inflight_add(e.dev, 1).map(|p| unsafe { core::ptr::read_volatile(p) })
    } else {
        None
    };

    let Some(s) = dev_stats(e.dev) else { return Ok(()) };
    // SAFETY: this CPU's copy of the device's value.
    let s = unsafe { &mut *s };
    if let Some(d) = s.dirs.get_mut(dir) {
        d.issued_requests += 1;
        d.issued_bytes += e.bytes;
        bump(&mut d.size_hist, log2_bucket(e.bytes), 1);
        if let Some(ns) = queue_ns {
            d.queue_ns_sum += ns;
            d.queue_count += 1;
            bump(&mut d.queue_hist, log2_bucket(ns / 1000), 1);
        }
        if let Some(ns) = sched_ns {
            d.sched_ns_sum += ns;
            d.sched_requests += 1;
        }
    }
    let mut bit = 0usize;
    while bit < RWBS_FLAG_COUNT {
        if e.rwbs.0 & (1 << bit) != 0 {
            bump(&mut s.flag_requests, bit, 1);
            bump(&mut s.flag_bytes, bit, e.bytes);
        }
        bit += 1;
    }
    if let Some(depth) = depth {
        bump(&mut s.depth_hist, depth_bucket(depth), 1);
        s.depth_sum += depth;
        s.depth_samples += 1;
    }
    Ok(())
}

/// Done by the device: device time, completed bytes (what /proc/diskstats counts), and the whole
/// request credited to the process that submitted it. A partial completion (an error, or a driver
/// completing in pieces) credits the whole request at its first piece: the later pieces have moved
/// the sector and are not matched (counted as completions without issue).
fn try_rq_complete(ctx: &TracePointContext) -> Result<(), Lost> {
    let mut e = Event::default();
    read_event(ctx, &layout!(rq_complete), &mut e)?;
    let k = key(&e);
    let t = now();
    let dir = e.rwbs.direction();
    let mut device_ns = None;
    let mut submitted = None;
    match BLOCK_REQS.get_ptr(k) {
        Some(p) => {
            // SAFETY: a valid pointer into the map; copied before the entry is removed.
            let r = unsafe { *p };
            let _ = BLOCK_REQS.remove(k);
            if r.issue_ns != 0 {
                device_ns = Some(t.saturating_sub(r.issue_ns));
            }
            if r.flags & REQ_IN_FLIGHT != 0 {
                inflight_add(e.dev, u64::MAX);
            }
            crate::block_files::on_complete(t, e.dev, e.sector, e.bytes, e.rwbs.0, Some(&r));
            if r.flags & REQ_SUBMITTER != 0 {
                submitted = Some(r);
            }
        }
        None => {
            count_health(Health::CompleteUnmatched);
            crate::block_files::on_complete(t, e.dev, e.sector, e.bytes, e.rwbs.0, None);
        }
    }
    if let Some(s) = dev_stats(e.dev) {
        // SAFETY: this CPU's copy of the device's value.
        let s = unsafe { &mut *s };
        if let Some(d) = s.dirs.get_mut(dir) {
            d.completed_requests += 1;
            d.completed_bytes += e.bytes;
            if let Some(ns) = device_ns {
                d.device_ns_sum += ns;
                d.device_count += 1;
                bump(&mut d.device_hist, log2_bucket(ns / 1000), 1);
            }
        }
    }
    if let Some(r) = submitted {
        credit_submitter(&r, e.dev, t);
    }
    Ok(())
}

/// The whole request, done at `t`, credited to the process that submitted it.
#[inline(always)]
fn credit_submitter(r: &ReqInfo, dev: u32, t: u64) {
    let Some(s) = proc_stats(&ProcKey { tgid: r.tgid, dev }) else { return };
    // SAFETY: this CPU's copy of the value.
    let s = unsafe { &mut *s };
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
/// issued or completed itself, so its entry goes (its bytes are carried by the other request).
fn try_rq_merge(ctx: &TracePointContext) -> Result<(), Lost> {
    let mut e = Event::default();
    read_event(ctx, &layout!(rq_merge), &mut e)?;
    let _ = BLOCK_REQS.remove(key(&e));
    Ok(())
}
