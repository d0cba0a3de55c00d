//! The page-cache programs: `filemap:*` (accesses, insertions, evictions), `writeback:*` (dirtying,
//! throttling, the kernel's dirty limits) and `iomap:iomap_dio_rw_begin` (direct I/O). They count
//! per process (tgid) into a per-CPU hash map and system-wide into a per-CPU array; userspace sums
//! the CPUs. What each counter means: ioscope_common::page_cache.

use aya_ebpf::{
    bindings::{BPF_F_NO_PREALLOC, BPF_NOEXIST},
    helpers::{bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{btf_tracepoint, fentry, fexit, kprobe, map, raw_tracepoint, tracepoint},
    maps::{Array, LruHashMap, PerCpuArray, PerCpuHashMap},
    programs::{
        BtfTracePointContext, FEntryContext, FExitContext, ProbeContext, RawTracePointContext,
        TracePointContext,
    },
};

use crate::kernel::{Mem, Plain, Probe};
use ioscope_common::fallback::{read_pages_range, FnLayout};
use ioscope_common::iowait::{CAUSE_DIRECT_IO, CAUSE_DIRTY_THROTTLE, CAUSE_OTHER, CAUSE_PAGE_CACHE_READ};
use ioscope_common::page_cache::{
    continues_read, folio_pages, range_pages, rss_growth, AddHead, CacheCounters, CacheLayout, CacheScratch,
    DioMemo, DirtyStateRecord, WriteMemo, CACHE_MAX_PROCESSES, NO_ORDER, RSS_LAST_MAX, TASK_KNOWN,
    TASK_STALE, TASK_UNTRACKED,
};

/// Field offsets, written by the loader from the tracefs format files.
#[unsafe(no_mangle)]
static CACHE_LAYOUT: CacheLayout = CacheLayout::UNSET;

/// Offsets in the kernel's structs for the programs on kernel functions (the fallbacks for the
/// filemap tracepoints before Linux 6.12), written by the loader from the kernel's BTF.
#[unsafe(no_mangle)]
static FN_LAYOUT: FnLayout = FnLayout::UNSET;

/// One field of FN_LAYOUT (volatile: the loader rewrites it before load).
macro_rules! fn_layout {
    ($field:ident) => {
        // SAFETY: a plain read of a static; see CACHE_LAYOUT.
        unsafe { core::ptr::read_volatile(&raw const FN_LAYOUT.$field) }
    };
}

/// One field of CACHE_LAYOUT: the busiest programs read only what they use ([`layout`] copies all
/// of it, ~40 loads).
macro_rules! cache_layout {
    ($field:ident) => {
        // SAFETY: a plain read of a static; see CACHE_LAYOUT.
        unsafe { core::ptr::read_volatile(&raw const CACHE_LAYOUT.$field) }
    };
}

/// Allocated on insert: a per-CPU value per possible tgid preallocated would cost
/// CACHE_MAX_PROCESSES × CPUs × 144 bytes up front.
#[map]
static CACHE_PROCS: PerCpuHashMap<u32, CacheCounters> =
    PerCpuHashMap::with_max_entries(CACHE_MAX_PROCESSES, BPF_F_NO_PREALLOC);

#[map]
static CACHE_TOTALS: PerCpuArray<CacheCounters> = PerCpuArray::with_max_entries(1, 0);

#[map]
static CACHE_SCRATCH: PerCpuArray<CacheScratch> = PerCpuArray::with_max_entries(1, 0);

#[map]
static DIO_MEMO: PerCpuArray<DioMemo> = PerCpuArray::with_max_entries(1, 0);

#[map]
static WRITE_MEMO: PerCpuArray<WriteMemo> = PerCpuArray::with_max_entries(1, 0);

#[map]
static RSS_LAST: LruHashMap<u32, u64> = LruHashMap::with_max_entries(RSS_LAST_MAX, 0);

#[map]
static DIRTY_STATE: Array<DirtyStateRecord> = Array::with_max_entries(1, 0);

#[inline(always)]
fn layout() -> CacheLayout {
    // SAFETY: a plain read of a static the loader may have rewritten before load; volatile so the
    // compiler cannot fold the compiled-in UNSET value.
    unsafe { core::ptr::read_volatile(&raw const CACHE_LAYOUT) }
}

/// (tgid, tid) of the current task.
#[inline(always)]
fn current_ids() -> (u32, u32) {
    let id = bpf_get_current_pid_tgid();
    ((id >> 32) as u32, id as u32)
}

/// The thread writing ioscope's own output (its reports, its recording; ioscope_common::page_cache::
/// IGNORED_TID_GLOBAL), whose insertions and dirtying are not counted; 0: none. Set before load.
#[unsafe(no_mangle)]
static IGNORED_TID: u32 = 0;

/// Whether `tid` is the thread whose writes are not counted.
#[inline(always)]
fn ignored(tid: u32) -> bool {
    // SAFETY: a plain read of a global the loader may have set (volatile: not folded to 0).
    let ignored = unsafe { core::ptr::read_volatile(&raw const IGNORED_TID) };
    ignored != 0 && ignored == tid
}

/// This CPU's system-wide counters.
#[inline(always)]
fn totals() -> Option<&'static mut CacheCounters> {
    // SAFETY: this CPU's slot; tracing programs do not nest on one CPU, so nobody else writes it now.
    CACHE_TOTALS.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

/// This CPU's slot of the read path (readahead's programs keep their part of it there too).
#[inline(always)]
pub(crate) fn scratch() -> Option<&'static mut CacheScratch> {
    // SAFETY: as for totals().
    CACHE_SCRATCH.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

/// This CPU's counters of the current process, created (with its comm) on first use.
#[inline(always)]
fn process(tgid: u32) -> Option<&'static mut CacheCounters> {
    let counters = entry(tgid)?;
    if counters.comm[0] == 0 {
        set_comm(counters);
    }
    Some(counters)
}

/// This CPU's counters of process `tgid` (not necessarily the current one: no comm is set).
#[inline(always)]
fn entry(tgid: u32) -> Option<&'static mut CacheCounters> {
    let counters = match CACHE_PROCS.get_ptr_mut(tgid) {
        Some(p) => p,
        None => {
            // NOEXIST: when another CPU created the entry meanwhile, ours is there already (zero).
            let _ = CACHE_PROCS.insert(tgid, CacheCounters::default(), u64::from(BPF_NOEXIST));
            CACHE_PROCS.get_ptr_mut(tgid)?
        }
    };
    // SAFETY: this CPU's value for `tgid`, see totals().
    Some(unsafe { &mut *counters })
}

#[inline(always)]
fn set_comm(counters: &mut CacheCounters) {
    if let Ok(comm) = bpf_get_current_comm() {
        counters.comm = comm;
        // SAFETY: helpers without preconditions.
        counters.comm_ns = unsafe { bpf_ktime_get_ns() };
        counters.cgroup_id = unsafe { bpf_get_current_cgroup_id() };
    }
}

/// A process moved to cgroup `cgroup_id` (crate::cgroup_move): when it has an entry, this CPU's
/// value takes the new cgroup and the leader's `comm` as the newest (userspace takes both from the
/// newest CPU). A process without an entry reads its cgroup when it is made.
#[inline(always)]
pub(crate) fn moved(tgid: u32, cgroup_id: u64, comm: [u8; 16]) {
    if let Some(p) = CACHE_PROCS.get_ptr_mut(tgid) {
        // SAFETY: this CPU's value, see totals().
        let p = unsafe { &mut *p };
        p.comm = comm;
        // SAFETY: helper without preconditions.
        p.comm_ns = unsafe { bpf_ktime_get_ns() };
        p.cgroup_id = cgroup_id;
    }
}

/// `sched:sched_process_exec`: the process has its new name now; a process that used the cache
/// before exec (a forked shell) would otherwise keep the old one. No field is read.
#[tracepoint]
pub fn sched_process_exec(_ctx: TracePointContext) -> u32 {
    if let Some(p) = CACHE_PROCS.get_ptr_mut(current_ids().0) {
        // SAFETY: this CPU's value, see totals().
        set_comm(unsafe { &mut *p });
    }
    0
}

/// `task:task_rename`: a task's name changes: at exec, and without exec by `prctl(PR_SET_NAME)`
/// (a shell running a built-in applet in a forked child, a program naming itself). The process's
/// entry takes the new name when its main thread is renamed (a thread's own name is not the
/// process's). Raised before the name is copied: the new one is read from the record.
#[tracepoint]
pub fn cache_task_rename(ctx: TracePointContext) -> u32 {
    try_rename(&ctx).unwrap_or(0)
}

fn try_rename(ctx: &TracePointContext) -> Result<u32, i64> {
    // SAFETY (both): see layout(); one field each, not the whole layout.
    let (ok, pid_at, comm_at) = unsafe {
        (
            core::ptr::read_volatile(&raw const CACHE_LAYOUT.rename_ok),
            core::ptr::read_volatile(&raw const CACHE_LAYOUT.rename_pid),
            core::ptr::read_volatile(&raw const CACHE_LAYOUT.rename_newcomm),
        )
    };
    if ok == 0 {
        return Ok(0);
    }
    // SAFETY: offsets from the format file.
    let pid = unsafe { field::<i32>(ctx, pid_at)? } as u32;
    let (tgid, _) = current_ids();
    // The renamed task is the current one in every caller but a write to /proc/PID/comm; the
    // process's name is its main thread's.
    if pid != tgid {
        return Ok(0);
    }
    if let Some(p) = CACHE_PROCS.get_ptr_mut(tgid) {
        // SAFETY: offset from the format file; this CPU's value, see totals().
        let comm = unsafe { field::<[u8; 16]>(ctx, comm_at)? };
        let p = unsafe { &mut *p };
        p.comm = comm;
        // SAFETY: helpers without preconditions.
        p.comm_ns = unsafe { bpf_ktime_get_ns() };
        p.cgroup_id = unsafe { bpf_get_current_cgroup_id() };
    }
    Ok(0)
}

/// Applies `f` to the system-wide and the current process's counters.
#[inline(always)]
fn count(tgid: u32, f: impl Fn(&mut CacheCounters)) {
    if let Some(t) = totals() {
        f(t);
    }
    if let Some(p) = process(tgid) {
        f(p);
    }
}

/// # Safety
/// `offset` must come from this kernel's format file for the running event (bpf_probe_read_kernel
/// copes with any offset; a wrong one only reads a wrong value).
#[inline(always)]
unsafe fn field<T>(ctx: &TracePointContext, offset: u32) -> Result<T, i64> {
    unsafe { ctx.read_at::<T>(offset as usize) }.map_err(i64::from)
}

/// The folio order at `offset`, or 0 where the event has none ([`NO_ORDER`]: one page per event).
///
/// # Safety
/// As [`field`].
#[inline(always)]
unsafe fn order_at(ctx: &TracePointContext, offset: u32) -> Result<u8, i64> {
    if offset == NO_ORDER {
        return Ok(0);
    }
    unsafe { field::<u8>(ctx, offset) }
}

#[tracepoint]
pub fn filemap_get_pages(ctx: TracePointContext) -> u32 {
    try_get_pages(&ctx).unwrap_or(0)
}

fn try_get_pages(ctx: &TracePointContext) -> Result<u32, i64> {
    let l = layout();
    if l.get_pages_ok == 0 {
        return Ok(0);
    }
    // SAFETY: offsets from the format file (see field()).
    let (dev, ino, index, last) = unsafe {
        (
            field::<u32>(ctx, l.get_pages_dev)?,
            field::<u64>(ctx, l.get_pages_ino)?,
            field::<u64>(ctx, l.get_pages_index)?,
            field::<u64>(ctx, l.get_pages_last_index)?,
        )
    };
    if let Some(s) = scratch() {
        count_read(s, current_ids(), dev, ino, index, last);
    }
    Ok(0)
}

/// The same event as a raw tracepoint: its arguments are `TP_PROTO(struct address_space *mapping,
/// pgoff_t index, pgoff_t last_index)` (the kernel checks the count at attach). No record is built
/// for it, which makes it several times cheaper on the hot read path; the mapping's address
/// identifies the file (dev 0). Userspace falls back to `filemap_get_pages` when it cannot attach.
#[raw_tracepoint(tracepoint = "mm_filemap_get_pages")]
pub fn filemap_get_pages_raw(ctx: RawTracePointContext) -> u32 {
    let mapping: u64 = ctx.arg(0);
    let index: u64 = ctx.arg(1);
    let last: u64 = ctx.arg(2);
    let Some(s) = scratch() else { return 0 };
    let ids = cached_ids(s);
    count_read(s, ids, 0, mapping, index, last);
    // Readahead pages this read uses (one extra program on the hot path would cost a dispatch).
    // The tracepoint misses batches whose last folio was dropped: gaps are filled.
    crate::readahead::on_read_raw(s, ids.1, mapping, index, last, true);
    0
}

/// The same read where the kernel has no `mm_filemap_get_pages` (before Linux 6.12): on the return
/// of `filemap_get_pages()`, the function that tracepoint sits in, when it returns 0 (the
/// tracepoint is raised just before that return, and only there). Its arguments give what the
/// tracepoint reports: the mapping (`iocb->ki_filp->f_mapping`), `index` (`ki_pos` in pages) and
/// the last page of the read (`ki_pos + count`, rounded up, less one). The mapping is turned into
/// a number as the block programs turn a request's address (a distance from a global): the same
/// file gives the same number throughout the run, as the raw tracepoint's address does.
#[fexit(function = "filemap_get_pages")]
pub fn filemap_get_pages_fexit(ctx: FExitContext) -> i32 {
    if fn_layout!(configured) == 0 {
        return 0;
    }
    // Both arguments read first, at constant offsets from the context (the verifier refuses a
    // load through a context pointer moved by a branch's arithmetic).
    let iocb: *const u8 = ctx.arg(0);
    let second: *const u8 = ctx.arg(1);
    if !matches!(ctx.ret::<i32>(), Ok(0)) {
        return 0;
    }
    get_pages_done::<Plain>(iocb, second);
    0
}

/// `filemap_get_pages(iocb, count or iter, ...)` returned 0: its read counted, its arguments read
/// with `M` (the fexit's plain loads, or the kretprobe's probe reads: kprobe_fallbacks.rs).
#[inline(always)]
pub(crate) fn get_pages_done<M: Mem>(iocb: *const u8, second: *const u8) {
    let count: u64 =
        if fn_layout!(get_pages_iter) != 0 { M::get(second, fn_layout!(iov_count)) } else { second as u64 };
    fn_read::<M>(iocb, count, false);
}

/// Whether the loader filled [`FN_LAYOUT`] (a read-path fallback is planned).
#[inline(always)]
pub(crate) fn fn_layout_configured() -> bool {
    fn_layout!(configured) != 0
}

/// A read of `count` bytes through `iocb` (a read-path function's argument, read with `M`),
/// counted as the read tracepoint counts it: the file's mapping, and its pages from
/// `iocb->ki_pos`, or up to it when the read has `advanced` it already (at a read's return).
#[inline(always)]
pub(crate) fn fn_read<M: Mem>(iocb: *const u8, count: u64, advanced: bool) {
    let filp: *const u8 = M::get(iocb, fn_layout!(kiocb_filp));
    let mapping: *const u8 = M::get(filp, fn_layout!(file_mapping));
    let mut pos: i64 = M::get(iocb, fn_layout!(kiocb_pos));
    if advanced {
        pos = pos.wrapping_sub(count as i64);
    }
    let Some((index, last)) = read_pages_range(pos, count, fn_layout!(page_shift)) else { return };
    let mapping = M::number(mapping, (&raw const FN_LAYOUT).cast());
    let Some(s) = scratch() else { return };
    let ids = cached_ids(s);
    count_read(s, ids, 0, mapping, index, last);
    // Every return of 0 comes here, a batch whose last folio was dropped included: no gap.
    crate::readahead::on_read_raw(s, ids.1, mapping, index, last, false);
}

/// `mm_filemap_map_pages`'s fallback: the entry of `filemap_map_pages(vmf, start_pgoff,
/// end_pgoff)`, whose last two arguments are the tracepoint's range. The tracepoint is raised at
/// the end, and not when no page of the range was in the cache (the entry counts the range then
/// too: see ebpf/README.md).
#[fentry(function = "filemap_map_pages")]
pub fn filemap_map_pages_fentry(ctx: FEntryContext) -> i32 {
    map_pages::<Plain>(ctx.arg(0), ctx.arg(1), ctx.arg(2));
    0
}

/// `filemap_map_pages(vmf, start_pgoff, end_pgoff)` entered (`vmf` read with `M`).
#[inline(always)]
pub(crate) fn map_pages<M: Mem>(vmf: *const u8, index: u64, last: u64) {
    let pages = range_pages(index, last);
    count(current_ids().0, |c| c.mapped_pages = c.mapped_pages.wrapping_add(pages));
    crate::readahead_fn::on_vm_fault::<M>(vmf, Some((index, last)));
}

/// `mm_filemap_fault`'s fallback: the entry of `filemap_fault(vmf)`, one page asked for.
#[fentry(function = "filemap_fault")]
pub fn filemap_fault_fentry(ctx: FEntryContext) -> i32 {
    fault::<Plain>(ctx.arg(0));
    0
}

/// `filemap_fault(vmf)` entered (`vmf` read with `M`).
#[inline(always)]
pub(crate) fn fault<M: Mem>(vmf: *const u8) {
    count(current_ids().0, |c| c.faults = c.faults.wrapping_add(1));
    crate::iowait::hint(CAUSE_PAGE_CACHE_READ);
    crate::readahead_fn::on_vm_fault::<M>(vmf, None);
}

/// `sched:sched_switch`: another task runs on this CPU from now on; the read path's remembered
/// task is stale. No field is read.
#[raw_tracepoint(tracepoint = "sched_switch")]
pub fn cache_sched_switch(_ctx: RawTracePointContext) -> u32 {
    if let Some(s) = scratch() {
        // SAFETY: a valid, aligned field of this CPU's slot.
        unsafe { core::ptr::write_volatile(&raw mut s.task_state, TASK_STALE) };
    }
    0
}

/// (tgid, tid) of the current task: remembered in this CPU's slot until the next context switch
/// (see CacheScratch::task_state) once a switch has been seen here, else asked for.
#[inline(always)]
fn cached_ids(s: &mut CacheScratch) -> (u32, u32) {
    // SAFETY: a valid, aligned field of this CPU's slot (volatile: the switch program writes it).
    let state = unsafe { core::ptr::read_volatile(&raw const s.task_state) };
    if state == TASK_KNOWN {
        return (s.task_tgid, s.task_tid);
    }
    let ids = current_ids();
    if state == TASK_UNTRACKED {
        return ids;
    }
    // Known first, then the ids, in this order (volatile: kept as written): a context switch in
    // between (a preemptible kernel may switch inside a program) makes it stale again, and a task
    // resumes only after a switch, so another task's ids are never taken for ours.
    // SAFETY: valid, aligned fields of this CPU's slot.
    unsafe {
        core::ptr::write_volatile(&raw mut s.task_state, TASK_KNOWN);
        core::ptr::write_volatile(&raw mut s.task_tgid, ids.0);
        core::ptr::write_volatile(&raw mut s.task_tid, ids.1);
    }
    ids
}

/// Counts a read request of pages `index..=last` of file (dev, ino), unless it continues the same
/// thread's previous request (see ioscope_common::page_cache::continues_read). Everything stays in
/// this CPU's scratch slot `s` while one process keeps reading here (no hash lookup, no other map
/// on the hot path): the system-wide count, and the process's share, which moves to its
/// CACHE_PROCS entry when another process reads on this CPU.
#[inline(always)]
fn count_read(s: &mut CacheScratch, (tgid, tid): (u32, u32), dev: u32, ino: u64, index: u64, last: u64) {
    let pages = if continues_read(s, tid, dev, ino, index, last) { 0 } else { range_pages(index, last) };
    s.get_pages_tid = tid;
    s.get_pages_dev = dev;
    s.get_pages_ino = ino;
    s.get_pages_index = index;
    s.get_pages_last = last;
    if pages == 0 {
        return;
    }
    s.read_pages = s.read_pages.wrapping_add(pages);
    if s.pending_tgid == tgid {
        s.pending_read_pages = s.pending_read_pages.wrapping_add(pages);
        return;
    }
    if s.pending_read_pages > 0 {
        if let Some(old) = entry(s.pending_tgid) {
            old.read_pages = old.read_pages.wrapping_add(s.pending_read_pages);
        }
    }
    // The new reader's entry exists from now on (with its comm), even if its pages stay pending.
    let _ = process(tgid);
    s.pending_tgid = tgid;
    s.pending_read_pages = pages;
}

#[tracepoint]
pub fn filemap_map_pages(ctx: TracePointContext) -> u32 {
    try_map_pages(&ctx).unwrap_or(0)
}

fn try_map_pages(ctx: &TracePointContext) -> Result<u32, i64> {
    let l = layout();
    if l.map_pages_ok == 0 {
        return Ok(0);
    }
    // SAFETY: offsets from the format file.
    let (index, last) =
        unsafe { (field::<u64>(ctx, l.map_pages_index)?, field::<u64>(ctx, l.map_pages_last_index)?) };
    let pages = range_pages(index, last);
    count(current_ids().0, |c| c.mapped_pages = c.mapped_pages.wrapping_add(pages));
    Ok(0)
}

#[tracepoint]
pub fn filemap_fault(ctx: TracePointContext) -> u32 {
    // No field is read here: every event is one page asked for by a fault. Unconditional on the
    // layout. The per-file part reads the page (its demand) only while disk reads come from bios.
    count(current_ids().0, |c| c.faults = c.faults.wrapping_add(1));
    crate::iowait::hint(CAUSE_PAGE_CACHE_READ);
    crate::files::on_fault(&ctx);
    0
}

#[tracepoint]
pub fn filemap_add_to_page_cache(ctx: TracePointContext) -> u32 {
    try_add(&ctx).unwrap_or(0)
}

fn try_add(ctx: &TracePointContext) -> Result<u32, i64> {
    if cache_layout!(add_ok) == 0 {
        return Ok(0);
    }
    let (add_ino, add_index, add_order) =
        (cache_layout!(add_ino), cache_layout!(add_index), cache_layout!(add_order));
    let dev_at = crate::files::add_dev_at();
    // SAFETY: offsets from the format file (AddHead: where the fields follow each other).
    let (ino, index, order, dev) = unsafe {
        if AddHead::fits(add_ino, add_index, dev_at, add_order) {
            let h = field::<AddHead>(ctx, add_ino)?;
            (h.ino, h.index, if add_order == NO_ORDER { 0 } else { h.order }, dev_at.map(|_| h.dev))
        } else {
            let dev = match dev_at {
                Some(at) => Some(field::<u32>(ctx, at)?),
                None => None,
            };
            (field::<u64>(ctx, add_ino)?, field::<u64>(ctx, add_index)?, order_at(ctx, add_order)?, dev)
        }
    };
    let pages = folio_pages(order);
    let (tgid, tid) = current_ids();
    if ignored(tid) {
        return Ok(0);
    }
    count_written(tgid, pages, 0, 0);
    crate::files::on_insert(tgid, tid, dev, ino, index, pages);
    Ok(0)
}

#[tracepoint]
pub fn filemap_delete_from_page_cache(ctx: TracePointContext) -> u32 {
    try_delete(&ctx).unwrap_or(0)
}

fn try_delete(ctx: &TracePointContext) -> Result<u32, i64> {
    let l = layout();
    if l.delete_ok == 0 {
        return Ok(0);
    }
    // SAFETY: offset from the format file.
    let order = unsafe { order_at(ctx, l.delete_order)? };
    // System-wide only: the evicting task (kswapd, a reclaiming allocator) is not the page's user.
    if let Some(t) = totals() {
        t.evicted_pages = t.evicted_pages.wrapping_add(folio_pages(order));
    }
    Ok(0)
}

#[tracepoint]
pub fn writeback_dirty_folio(ctx: TracePointContext) -> u32 {
    try_dirty(&ctx).unwrap_or(0)
}

fn try_dirty(ctx: &TracePointContext) -> Result<u32, i64> {
    // A writer dirtying a page has left any read or direct I/O it made before: a wait from now on
    // is another cause's (throttling says so just before its sleep).
    crate::iowait::hint(CAUSE_OTHER);
    if cache_layout!(dirty_ok) == 0 {
        return Ok(0);
    }
    let (dirty_ino, dirty_index) = (cache_layout!(dirty_ino), cache_layout!(dirty_index));
    // SAFETY: offsets from the format file; `index` follows `ino` in every kernel's record (one
    // read, not two, where it does).
    let (ino, index) = unsafe {
        if dirty_index == dirty_ino.wrapping_add(8) {
            let [ino, index] = field::<[u64; 2]>(ctx, dirty_ino)?;
            (ino, index)
        } else {
            (field::<u64>(ctx, dirty_ino)?, field::<u64>(ctx, dirty_index)?)
        }
    };
    let (tgid, tid) = current_ids();
    if ignored(tid) {
        return Ok(0);
    }
    // The folio this thread inserted just before (a buffered write allocating cache pages): its
    // size is known, and its insertion was not a read miss.
    let allocated = crate::files::on_dirty(ctx, tgid, tid, ino, index);
    let dirtied = if allocated > 0 { allocated } else { 1 };
    count_written(tgid, 0, dirtied, allocated);
    Ok(0)
}

/// Adds pages inserted, dirtied and write-inserted by process `tgid` to the totals and to the
/// process: in this CPU's memo while the same process goes on inserting and dirtying here, else
/// (the memo's counts moved to their process's entry first) in its entry, created with its name
/// (see ioscope_common::page_cache::WriteMemo).
#[inline(always)]
fn count_written(tgid: u32, inserted: u64, dirtied: u64, write_inserted: u64) {
    let add = |c: &mut CacheCounters| {
        c.inserted_pages = c.inserted_pages.wrapping_add(inserted);
        c.dirtied_pages = c.dirtied_pages.wrapping_add(dirtied);
        c.write_inserted_pages = c.write_inserted_pages.wrapping_add(write_inserted);
    };
    if let Some(t) = totals() {
        add(t);
    }
    // SAFETY: this CPU's slot; tracing programs do not nest on one CPU.
    let Some(m) = WRITE_MEMO.get_ptr_mut(0).map(|p| unsafe { &mut *p }) else {
        if let Some(p) = process(tgid) {
            add(p);
        }
        return;
    };
    if m.used != 0 && m.tgid == tgid {
        m.inserted_pages = m.inserted_pages.wrapping_add(inserted);
        m.dirtied_pages = m.dirtied_pages.wrapping_add(dirtied);
        m.write_inserted_pages = m.write_inserted_pages.wrapping_add(write_inserted);
        return;
    }
    if m.pending() {
        if let Some(p) = entry(m.tgid) {
            p.inserted_pages = p.inserted_pages.wrapping_add(m.inserted_pages);
            p.dirtied_pages = p.dirtied_pages.wrapping_add(m.dirtied_pages);
            p.write_inserted_pages = p.write_inserted_pages.wrapping_add(m.write_inserted_pages);
        }
    }
    m.tgid = tgid;
    m.used = 1;
    // SAFETY: valid, aligned fields. Volatile: adjacent zero stores would become a memset call.
    unsafe {
        core::ptr::write_volatile(&raw mut m.inserted_pages, 0);
        core::ptr::write_volatile(&raw mut m.dirtied_pages, 0);
        core::ptr::write_volatile(&raw mut m.write_inserted_pages, 0);
    }
    if let Some(p) = process(tgid) {
        add(p);
    }
}

#[tracepoint]
pub fn balance_dirty_pages(ctx: TracePointContext) -> u32 {
    try_balance_dirty_pages(&ctx).unwrap_or(0)
}

fn try_balance_dirty_pages(ctx: &TracePointContext) -> Result<u32, i64> {
    // Raised just before the throttled writer's sleep (`io_schedule_timeout()`).
    crate::iowait::hint(CAUSE_DIRTY_THROTTLE);
    let l = layout();
    if l.bdp_ok == 0 {
        return Ok(0);
    }
    // SAFETY: offset from the format file.
    let pause = unsafe { field::<i64>(ctx, l.bdp_pause)? };
    // The kernel also reports the decision not to sleep (pause <= 0): not a throttle.
    if pause <= 0 {
        return Ok(0);
    }
    let pause = pause as u64;
    count(current_ids().0, |c| {
        c.throttled = c.throttled.wrapping_add(1);
        c.throttle_jiffies = c.throttle_jiffies.wrapping_add(pause);
    });
    if let Some(d) = DIRTY_STATE.get_ptr_mut(0) {
        // SAFETY: offsets from the format file.
        let (limit, setpoint, dirty) = unsafe {
            (
                field::<u64>(ctx, l.bdp_limit)?,
                field::<u64>(ctx, l.bdp_setpoint)?,
                field::<u64>(ctx, l.bdp_dirty)?,
            )
        };
        // SAFETY: the one shared slot. Concurrent writers may mix two records' fields; each field
        // is a plain 8-byte store, and the figures are only shown, never used in a formula.
        let d = unsafe { &mut *d };
        d.throttle_ns = unsafe { bpf_ktime_get_ns() };
        d.throttle_limit = limit;
        d.throttle_setpoint = setpoint;
        d.throttle_dirty = dirty;
        d.throttle_pause_jiffies = pause;
    }
    Ok(0)
}

#[tracepoint]
pub fn global_dirty_state(ctx: TracePointContext) -> u32 {
    try_global_dirty_state(&ctx).unwrap_or(0)
}

fn try_global_dirty_state(ctx: &TracePointContext) -> Result<u32, i64> {
    let l = layout();
    if l.gds_ok == 0 {
        return Ok(0);
    }
    // SAFETY: offsets from the format file.
    let (nr_dirty, nr_writeback, background, thresh, limit) = unsafe {
        (
            field::<u64>(ctx, l.gds_nr_dirty)?,
            field::<u64>(ctx, l.gds_nr_writeback)?,
            field::<u64>(ctx, l.gds_background_thresh)?,
            field::<u64>(ctx, l.gds_dirty_thresh)?,
            field::<u64>(ctx, l.gds_dirty_limit)?,
        )
    };
    let d = DIRTY_STATE.get_ptr_mut(0).ok_or(-1i64)?;
    // SAFETY: the one shared slot; see try_balance_dirty_pages.
    let d = unsafe { &mut *d };
    d.nr_dirty = nr_dirty;
    d.nr_writeback = nr_writeback;
    d.background_thresh = background;
    d.dirty_thresh = thresh;
    d.dirty_limit = limit;
    d.seen_ns = unsafe { bpf_ktime_get_ns() };
    d.seen = d.seen.wrapping_add(1);
    Ok(0)
}

#[tracepoint]
pub fn iomap_dio_rw_begin(ctx: TracePointContext) -> u32 {
    try_dio(&ctx).unwrap_or(0)
}

fn try_dio(ctx: &TracePointContext) -> Result<u32, i64> {
    let l = layout();
    if l.dio_ok == 0 {
        return Ok(0);
    }
    // SAFETY: offsets from the format file.
    let (bytes, flags) = unsafe { (field::<u64>(ctx, l.dio_count)?, field::<u32>(ctx, l.dio_ki_flags)?) };
    on_dio(l.dio_write_flag, bytes, flags, crate::files::dio_file(ctx));
    Ok(0)
}

/// The same as a BTF tracepoint: `TP_PROTO(struct kiocb *iocb, struct iov_iter *iter, unsigned
/// int dio_flags, size_t done_before)`, read with plain loads (the record's `count` is
/// `iov_iter_count(iter)`, its `flags` `iocb->ki_flags`).
#[btf_tracepoint(function = "iomap_dio_rw_begin")]
pub fn iomap_dio_rw_begin_btf(ctx: BtfTracePointContext) -> i32 {
    dio_begin::<Plain>(ctx.arg(0), ctx.arg(1));
    0
}

/// The fallback where the kernel has no `iomap_dio_rw_begin` (before Linux 6.5): the entry of
/// `__iomap_dio_rw()` (or `iomap_dio_rw()`), the function that raises it first thing, with the
/// same first two arguments.
#[fentry(function = "__iomap_dio_rw")]
pub fn iomap_dio_rw_fentry(ctx: FEntryContext) -> i32 {
    dio_begin::<Plain>(ctx.arg(0), ctx.arg(1));
    0
}

/// The same as a kprobe, where fentry cannot attach (`__iomap_dio_rw` has 7 arguments: BPF
/// trampolines take at most 6 on x86-64 before Linux 6.6). Reads through bpf_probe_read_kernel.
#[kprobe(function = "__iomap_dio_rw")]
pub fn iomap_dio_rw_kprobe(ctx: ProbeContext) -> u32 {
    let (Some(iocb), Some(iter)) = (ctx.arg::<*const u8>(0), ctx.arg::<*const u8>(1)) else { return 0 };
    dio_begin::<Probe>(iocb, iter);
    0
}

/// A direct I/O starting with `iocb` and `iter`, read with `M` (plain loads for BTF pointers).
#[inline(always)]
fn dio_begin<M: Mem>(iocb: *const u8, iter: *const u8) {
    // SAFETY (both): see layout(); one field each, not the whole layout.
    let (dio_ok, write_flag) = unsafe {
        (
            core::ptr::read_volatile(&raw const CACHE_LAYOUT.dio_ok),
            core::ptr::read_volatile(&raw const CACHE_LAYOUT.dio_write_flag),
        )
    };
    let Some((count, ki_flags)) = crate::files::dio_args_btf() else { return };
    if dio_ok == 0 {
        return;
    }
    let bytes: u64 = M::get(iter, count);
    let file = crate::files::dio_file_btf::<M>(iocb);
    if let Some(data_source) = crate::files::dio_direction_btf() {
        // The iterator says which way the data goes: the direction is known here and now.
        // Bit 0: `data_source` (a bool), or WRITE in the low byte of the older `type`.
        let write = M::get::<u8>(iter, data_source) & 1 != 0;
        let bytes = if write {
            bytes
        } else {
            // A read reads no further than the end of the file (the size it asked for is the
            // event's count); at or past the end it reads nothing and is not counted.
            let left = crate::files::dio_bytes_left_btf::<M>(iocb);
            if left <= 0 {
                return;
            }
            bytes.min(left as u64)
        };
        count_dio_memo(file, bytes, write);
        return;
    }
    let flags: u32 = M::get(iocb, ki_flags);
    on_dio(write_flag, bytes, flags, file);
}

/// A direct I/O of `bytes` with kiocb `flags` (IOCB_WRITE: `write_flag`) on `file`.
#[inline(always)]
fn on_dio(write_flag: u32, bytes: u64, flags: u32, file: Option<(u32, u64)>) {
    crate::iowait::hint(CAUSE_DIRECT_IO);
    let write = flags & write_flag != 0;
    // A read by the event's own flags may be a plain write(2) (ki_flags lacks IOCB_WRITE there on
    // some kernels): then the files program learns the direction at the thread's next iomap_iter
    // and credits the process through count_dio_process.
    if !crate::files::on_dio(file, bytes, write) {
        count_dio_process(bytes, write);
    }
}

/// Direct I/O of `bytes` by the current process (it bypasses the cache: neither hit nor miss).
#[inline(always)]
pub fn count_dio_process(bytes: u64, write: bool) {
    count(current_ids().0, |c| add_dio(c, 1, bytes, write));
}

#[inline(always)]
fn add_dio(c: &mut CacheCounters, ios: u64, bytes: u64, write: bool) {
    if write {
        c.dio_writes = c.dio_writes.wrapping_add(ios);
        c.dio_write_bytes = c.dio_write_bytes.wrapping_add(bytes);
    } else {
        c.dio_reads = c.dio_reads.wrapping_add(ios);
        c.dio_read_bytes = c.dio_read_bytes.wrapping_add(bytes);
    }
}

/// Direct I/O of `bytes` in a known direction by the current process on `file` (None: its identity
/// could not be read), counted per process, per file and in the totals; repeated I/O of the same
/// process on the same file stays in this CPU's memo (see ioscope_common::page_cache::DioMemo).
#[inline(always)]
fn count_dio_memo(file: Option<(u32, u64)>, bytes: u64, write: bool) {
    crate::iowait::hint(CAUSE_DIRECT_IO);
    let tgid = current_ids().0;
    if let Some(t) = totals() {
        add_dio(t, 1, bytes, write);
    }
    // SAFETY: this CPU's slot; tracing programs do not nest on one CPU.
    let memo = DIO_MEMO.get_ptr_mut(0).map(|p| unsafe { &mut *p });
    let (Some((dev, ino)), Some(m)) = (file, memo) else {
        if let Some(p) = process(tgid) {
            add_dio(p, 1, bytes, write);
        }
        return;
    };
    if m.tgid == tgid && m.dev == dev && m.ino == ino {
        m.add(bytes, write);
        return;
    }
    // Another process or file: the memo's counts move to the maps, and this first I/O of the new
    // pair is counted there directly (creating its entries, named after the current task).
    if m.pending() {
        crate::files::add_dio_bytes(m.dev, m.ino, m.read_bytes, m.write_bytes);
        if let Some(p) = entry(m.tgid) {
            add_dio(p, m.reads, m.read_bytes, false);
            add_dio(p, m.writes, m.write_bytes, true);
        }
    }
    m.tgid = tgid;
    m.dev = dev;
    m.ino = ino;
    // SAFETY: valid, aligned fields. Volatile: adjacent zero stores would become a memset call.
    unsafe {
        core::ptr::write_volatile(&raw mut m.reads, 0);
        core::ptr::write_volatile(&raw mut m.read_bytes, 0);
        core::ptr::write_volatile(&raw mut m.writes, 0);
        core::ptr::write_volatile(&raw mut m.write_bytes, 0);
    }
    crate::files::count_dio(dev, ino, bytes, write);
    if let Some(p) = process(tgid) {
        add_dio(p, 1, bytes, write);
    }
}

#[tracepoint]
pub fn kmem_rss_stat(ctx: TracePointContext) -> u32 {
    try_rss_stat(&ctx).unwrap_or(0)
}

fn try_rss_stat(ctx: &TracePointContext) -> Result<u32, i64> {
    let l = layout();
    if l.rss_ok == 0 {
        return Ok(0);
    }
    // SAFETY: offsets from the format file.
    let (member, curr) = unsafe { (field::<i32>(ctx, l.rss_member)?, field::<u32>(ctx, l.rss_curr)?) };
    // Only file pages, and only the process's own faults (not another task touching its mm).
    if member as u32 != l.rss_file_member || curr == 0 {
        return Ok(0);
    }
    // SAFETY: offsets from the format file.
    let (mm_id, size) = unsafe { (field::<u32>(ctx, l.rss_mm_id)?, field::<i64>(ctx, l.rss_size)?) };
    let size = if size > 0 { size as u64 } else { 0 };
    // SAFETY: a plain copy of a u64 value of this map.
    let last = unsafe { RSS_LAST.get(mm_id) }.copied();
    let _ = RSS_LAST.insert(mm_id, size, 0);
    let bytes = rss_growth(last, size);
    if bytes > 0 {
        count(current_ids().0, |c| c.rss_file_bytes = c.rss_file_bytes.wrapping_add(bytes));
    }
    Ok(0)
}
