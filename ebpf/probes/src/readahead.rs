//! The readahead programs: `readahead:*` give each thread's current window; a folio the same
//! thread inserts inside it is remembered until it is used (read or faulted) or evicted unused.
//! What each counter means: ioscope_common::readahead.
//!
//! Cost on the cached read path (`mm_filemap_get_pages`): nothing but array reads while nothing
//! is pending anywhere or while this CPU's last read of the same file found nothing pending and
//! nothing was read ahead since (RA_SHARED's epoch, the read path's per-CPU slot); otherwise a
//! lookup of the mapping and of the file; the folio walk only runs for a file with readahead pages
//! pending.

use core::intrinsics::{atomic_xadd, AtomicOrdering};

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{map, tracepoint},
    maps::{Array, HashMap, LruHashMap, PerCpuArray},
    programs::TracePointContext,
};
use ioscope_common::page_cache::{CacheScratch, NO_ORDER};
use ioscope_common::readahead::{
    binds, in_window, is_readahead, use_bucket, use_from, RaBind, RaFileKey, RaFileStats, RaLastRead,
    RaLayout, RaNoWindow, RaPage, RaPageKey, RaReadMemo, RaShared, RaThreadBind, RaTotals, RaWindow,
    NO_REQ_COUNT, RA_BINDS_MAX, RA_BIO_WALK_MAX, RA_FILES_MAX, RA_LAST_READ_MAX, RA_MAPPINGS_MAX,
    RA_PAGES_MAX, RA_TRIGGERS, RA_WALK_MAX, RA_WINDOWS_MAX,
};

#[unsafe(no_mangle)]
static RA_LAYOUT: RaLayout = RaLayout::UNSET;

#[map]
static RA_PAGES: HashMap<RaPageKey, RaPage> = HashMap::with_max_entries(RA_PAGES_MAX, 0);

#[map]
static RA_FILES: HashMap<RaFileKey, RaFileStats> = HashMap::with_max_entries(RA_FILES_MAX, 0);

/// RA_FILES's insert counter (ioscope_common::inserts).
#[map]
static RA_FILES_INSERTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

#[map]
static RA_WINDOWS: LruHashMap<u32, RaWindow> = LruHashMap::with_max_entries(RA_WINDOWS_MAX, 0);

#[map]
static RA_MAPPINGS: LruHashMap<u64, RaFileKey> = LruHashMap::with_max_entries(RA_MAPPINGS_MAX, 0);

#[map]
static RA_BINDS: LruHashMap<u32, RaThreadBind> = LruHashMap::with_max_entries(RA_BINDS_MAX, 0);

#[map]
static RA_LAST_READ: LruHashMap<u32, RaLastRead> = LruHashMap::with_max_entries(RA_LAST_READ_MAX, 0);

#[map]
static RA_SHARED: Array<RaShared> = Array::with_max_entries(1, 0);

#[map]
static RA_TOTALS: PerCpuArray<RaTotals> = PerCpuArray::with_max_entries(1, 0);

#[map]
static RA_NO_WINDOW: PerCpuArray<RaNoWindow> = PerCpuArray::with_max_entries(1, 0);

/// One field of RA_LAYOUT: the programs on every insertion and eviction read only what they use
/// ([`layout`] copies all of it).
macro_rules! ra_layout {
    ($field:ident) => {
        // SAFETY: see page_cache::layout().
        unsafe { core::ptr::read_volatile(&raw const RA_LAYOUT.$field) }
    };
}

#[inline(always)]
fn layout() -> RaLayout {
    // SAFETY: see page_cache::layout().
    unsafe { core::ptr::read_volatile(&raw const RA_LAYOUT) }
}

/// # Safety
/// `offset` must come from this kernel's format file for the running event.
#[inline(always)]
unsafe fn field<T>(ctx: &TracePointContext, offset: u32) -> Result<T, i64> {
    unsafe { ctx.read_at::<T>(offset as usize) }.map_err(i64::from)
}

/// Adds to a counter shared by all CPUs.
#[inline(always)]
fn add(p: &mut u64, delta: u64) {
    // SAFETY: a valid, aligned pointer into a map value; lowers to XADD (result unused).
    unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(p as *mut u64, delta) };
}

/// A file's entry changed its pages pending by `delta` (wrapping: a negative change is its two's
/// complement; never 0): adds it to the pages pending and counts the change (see
/// [`entry_changed`]).
#[inline(always)]
fn pending_changed(delta: u64) {
    if let Some(p) = RA_SHARED.get_ptr_mut(0) {
        // SAFETY: a valid, aligned pointer into the array's value.
        unsafe {
            add(&mut (*p).pending, delta);
            add(&mut (*p).updates, 1);
        }
    }
}

/// A file's entry changed: counts the change (RaShared::updates), after it is made. (Not an
/// add of 0 to the pending pages: LLVM makes that an atomic load, which 5.10's verifier
/// refuses.)
#[inline(always)]
fn entry_changed() {
    if let Some(p) = RA_SHARED.get_ptr_mut(0) {
        // SAFETY: a valid, aligned pointer into the array's value.
        add(unsafe { &mut (*p).updates }, 1);
    }
}

/// Some file may have gained pending pages where it had none: cached reads' memos are stale.
#[inline(always)]
fn bump_epoch() {
    if let Some(p) = RA_SHARED.get_ptr_mut(0) {
        // SAFETY: a valid, aligned pointer into the array's value.
        add(unsafe { &mut (*p).epoch }, 1);
    }
}

#[inline(always)]
fn totals() -> Option<&'static mut RaTotals> {
    // SAFETY: this CPU's slot; tracing programs do not nest on one CPU.
    RA_TOTALS.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

#[inline(always)]
fn file(dev: u32, ino: u64) -> Option<&'static mut RaFileStats> {
    let key = RaFileKey { dev, _pad: 0, ino };
    // SAFETY: a pointer into the map's value, valid for this program run.
    RA_FILES.get_ptr_mut(&key).map(|p| unsafe { &mut *p })
}

/// The file's stats, created on its first readahead event (a full map is counted).
#[inline(always)]
fn file_or_new(dev: u32, ino: u64) -> Option<&'static mut RaFileStats> {
    if let Some(f) = file(dev, ino) {
        return Some(f);
    }
    let key = RaFileKey { dev, _pad: 0, ino };
    if RA_FILES.insert(&key, &RaFileStats::ZERO, u64::from(BPF_NOEXIST)).is_err() && file(dev, ino).is_none()
    {
        if let Some(t) = totals() {
            t.untracked_files += 1;
        }
        return None;
    }
    crate::kernel::count_insert(&RA_FILES_INSERTS);
    file(dev, ino)
}

/// Remembers the current process as one triggering this file's readahead.
#[inline(always)]
fn note_trigger(f: &mut RaFileStats) {
    let tgid = (bpf_get_current_pid_tgid() >> 32) as u32;
    for i in 0..RA_TRIGGERS {
        if f.triggers[i] == tgid {
            return;
        }
        if f.triggers[i] == 0 {
            f.triggers[i] = tgid;
            return;
        }
    }
}

#[tracepoint]
pub fn readahead_sync_ra(ctx: TracePointContext) -> u32 {
    try_ra_event(&ctx, false).unwrap_or(0)
}

#[tracepoint]
pub fn readahead_async_ra(ctx: TracePointContext) -> u32 {
    try_ra_event(&ctx, true).unwrap_or(0)
}

/// A readahead decision (the window is computed after it: see try_order).
fn try_ra_event(ctx: &TracePointContext, is_async: bool) -> Result<u32, i64> {
    let l = layout();
    if (is_async && l.async_ok == 0) || (!is_async && l.sync_ok == 0) {
        return Ok(0);
    }
    // SAFETY: offsets from the format file.
    let (dev, ino, ra_pages, mmap_miss) = unsafe {
        (
            field::<u32>(ctx, l.ra_dev)?,
            field::<u64>(ctx, l.ra_ino)?,
            field::<u32>(ctx, l.ra_ra_pages)?,
            field::<u32>(ctx, l.ra_mmap_miss)?,
        )
    };
    // SAFETY: offset from the format file.
    let index = unsafe { field::<u64>(ctx, l.ra_index)? };
    let req_count = if is_async || l.ra_req_count == NO_REQ_COUNT {
        0
    } else {
        // SAFETY: offset from the format file.
        unsafe { field::<u64>(ctx, l.ra_req_count)? }
    };
    on_ra_event(is_async, dev, ino, index, req_count, ra_pages, mmap_miss);
    Ok(0)
}

/// A sync or async readahead decision on file (dev, ino) at page `index`, a read miss asking for
/// `req_count` pages from it (0 for async readahead) (the tracepoints', or their fallbacks' in
/// crate::readahead_fn).
#[inline(always)]
pub fn on_ra_event(
    is_async: bool,
    dev: u32,
    ino: u64,
    index: u64,
    req_count: u64,
    ra_pages: u32,
    mmap_miss: u32,
) {
    let tid = bpf_get_current_pid_tgid() as u32;
    // The reader waits for these pages next (or for those of the window before).
    crate::iowait::hint(ioscope_common::iowait::CAUSE_PAGE_CACHE_READ);
    // The window this decision opens comes next (try_order, try_unbounded); until then the thread
    // has none, only the pages its miss asked for: those are demand, not readahead.
    let asked = RaWindow {
        dev,
        _pad: 0,
        ino,
        start: 0,
        end: 0,
        demand_start: index,
        demand_end: index.wrapping_add(req_count),
    };
    let _ = RA_WINDOWS.insert(&tid, &asked, 0);
    if let Some(s) = crate::page_cache::scratch() {
        s.ra_bind = RaBind { tid, dev, ino, index };
    }
    // SAFETY: helper without preconditions.
    let at_ns = unsafe { bpf_ktime_get_ns() };
    let _ = RA_BINDS.insert(&tid, &RaThreadBind { dev, _pad: 0, ino, index, at_ns }, 0);
    let Some(f) = file_or_new(dev, ino) else { return };
    add(if is_async { &mut f.async_events } else { &mut f.sync_events }, 1);
    f.max_window = ra_pages;
    f.mmap_miss = mmap_miss;
    note_trigger(f);
    entry_changed();
}

#[tracepoint]
pub fn readahead_ra_order(ctx: TracePointContext) -> u32 {
    try_order(&ctx).unwrap_or(0)
}

fn try_order(ctx: &TracePointContext) -> Result<u32, i64> {
    let l = layout();
    if l.order_ok == 0 {
        return Ok(0);
    }
    // SAFETY: offsets from the format file.
    let (dev, ino, index, size, ra_pages) = unsafe {
        (
            field::<u32>(ctx, l.order_dev)?,
            field::<u64>(ctx, l.order_ino)?,
            field::<u64>(ctx, l.order_index)?,
            field::<u32>(ctx, l.order_size)?,
            field::<u32>(ctx, l.order_ra_pages)?,
        )
    };
    on_order(dev, ino, index, size, ra_pages);
    Ok(0)
}

/// A readahead window of `size` pages from `index` (`page_cache_ra_order`'s, or its fallback's).
#[inline(always)]
pub fn on_order(dev: u32, ino: u64, index: u64, size: u32, ra_pages: u32) {
    let Some(f) = file_or_new(dev, ino) else { return };
    f.max_window = ra_pages;
    open_window(f, dev, ino, index, size as u64);
}

#[tracepoint]
pub fn readahead_ra_unbounded(ctx: TracePointContext) -> u32 {
    try_unbounded(&ctx).unwrap_or(0)
}

fn try_unbounded(ctx: &TracePointContext) -> Result<u32, i64> {
    let l = layout();
    if l.unbounded_ok == 0 {
        return Ok(0);
    }
    // SAFETY: offsets from the format file.
    let (dev, ino, index, nr) = unsafe {
        (
            field::<u32>(ctx, l.unbounded_dev)?,
            field::<u64>(ctx, l.unbounded_ino)?,
            field::<u64>(ctx, l.unbounded_index)?,
            field::<u64>(ctx, l.unbounded_nr)?,
        )
    };
    on_unbounded(dev, ino, index, nr);
    Ok(0)
}

/// `nr` pages read from `index` (`page_cache_ra_unbounded`'s, or its fallback's): a window unless
/// it is inside the thread's current one.
#[inline(always)]
pub fn on_unbounded(dev: u32, ino: u64, index: u64, nr: u64) {
    let tid = bpf_get_current_pid_tgid() as u32;
    // page_cache_ra_order() falls back to this for the rest of its own window: not a new window.
    // SAFETY: a plain copy of this thread's record.
    if let Some(w) = unsafe { RA_WINDOWS.get(&tid) }.copied() {
        if in_window(&w, dev, ino, index) {
            return;
        }
    }
    let Some(f) = file_or_new(dev, ino) else { return };
    open_window(f, dev, ino, index, nr);
}

/// Records the thread's new window `index..index+size` and counts it.
#[inline(always)]
fn open_window(f: &mut RaFileStats, dev: u32, ino: u64, index: u64, size: u64) {
    let tid = bpf_get_current_pid_tgid() as u32;
    // The pages the thread's read miss asked for, when this window is its decision's.
    // SAFETY: a plain copy of this thread's record.
    let (demand_start, demand_end) = match unsafe { RA_WINDOWS.get(&tid) }.copied() {
        Some(a) if a.dev == dev && a.ino == ino => (a.demand_start, a.demand_end),
        _ => (0, 0),
    };
    let w =
        RaWindow { dev, _pad: 0, ino, start: index, end: index.wrapping_add(size), demand_start, demand_end };
    let _ = RA_WINDOWS.insert(&tid, &w, 0);
    // After the insert: an insertion that reads the count before it finds the window by lookup.
    if let Some(p) = RA_SHARED.get_ptr_mut(0) {
        // SAFETY: a valid, aligned pointer into the array's value.
        add(unsafe { &mut (*p).windows }, 1);
    }
    add(&mut f.windows, 1);
    add(&mut f.window_pages, size);
    f.last_window = size as u32;
    // SAFETY: helper without preconditions.
    f.last_ns = unsafe { bpf_ktime_get_ns() };
    note_trigger(f);
    entry_changed();
}

#[tracepoint]
pub fn readahead_add_to_page_cache(ctx: TracePointContext) -> u32 {
    try_add(&ctx).unwrap_or(0)
}

fn try_add(ctx: &TracePointContext) -> Result<u32, i64> {
    if ra_layout!(add_ok) == 0 {
        return Ok(0);
    }
    let tid = bpf_get_current_pid_tgid() as u32;
    // A thread that had no window on this CPU's last insertion, none opened anywhere since (a
    // writer's page per write): no lookup (ioscope_common::readahead::RaNoWindow).
    // SAFETY: a valid, aligned pointer into the array's value.
    let windows =
        RA_SHARED.get_ptr_mut(0).map(|p| unsafe { core::ptr::read_volatile(&raw const (*p).windows) });
    // SAFETY: this CPU's slot; tracing programs do not nest on one CPU.
    let memo = RA_NO_WINDOW.get_ptr_mut(0).map(|p| unsafe { &mut *p });
    let (Some(windows), Some(memo)) = (windows, memo) else { return Ok(0) };
    if memo.holds(tid, windows) {
        return Ok(0);
    }
    // SAFETY: a plain copy of this thread's record.
    let Some(w) = (unsafe { RA_WINDOWS.get(&tid) }).copied() else {
        *memo = RaNoWindow { tid, _pad: 0, windows };
        return Ok(0);
    };
    let l = layout();
    // SAFETY: offsets from the format file.
    let (dev, ino, index) = unsafe {
        (field::<u32>(ctx, l.folio_dev)?, field::<u64>(ctx, l.folio_ino)?, field::<u64>(ctx, l.folio_index)?)
    };
    // Before folios (5.10) the event has no `order`: one page per event.
    // SAFETY: offset from the format file.
    let order = if l.folio_order == NO_ORDER { 0 } else { unsafe { field::<u8>(ctx, l.folio_order)? } };
    if !is_readahead(&w, dev, ino, index) {
        return Ok(0);
    }
    let Some(f) = file(dev, ino) else { return Ok(0) };
    let order = if order > 20 { 0 } else { order };
    let pages = 1u64 << order;
    if f.remembered() == 0 {
        bump_epoch();
    }
    // With the bio program on, the folio counts as read ahead once a read bio covers it
    // (on_read_bio): a hole's folio is zero-filled without one.
    let by_bio = crate::files::bio_on();
    let key = RaPageKey { dev, _pad: 0, ino, index };
    // SAFETY: helper without preconditions.
    let page = RaPage { inserted_ns: unsafe { bpf_ktime_get_ns() }, pages, disk: u64::from(!by_bio) };
    if RA_PAGES.insert(&key, &page, 0).is_err() {
        // Whether the disk reads it is never known: counted read ahead and untracked, as before.
        add(&mut f.ra_pages, pages);
        add(&mut f.untracked_pages, pages);
        entry_changed();
        if let Some(t) = totals() {
            t.untracked_pages += pages;
        }
    } else {
        add(if by_bio { &mut f.unread_pages } else { &mut f.ra_pages }, pages);
        f.orders_seen |= 1 << order;
        pending_changed(pages);
    }
    Ok(0)
}

#[tracepoint]
pub fn readahead_delete_from_page_cache(ctx: TracePointContext) -> u32 {
    try_delete(&ctx).unwrap_or(0)
}

fn try_delete(ctx: &TracePointContext) -> Result<u32, i64> {
    if ra_layout!(delete_ok) == 0 {
        return Ok(0);
    }
    let (folio_dev, folio_ino, folio_index) =
        (ra_layout!(folio_dev), ra_layout!(folio_ino), ra_layout!(folio_index));
    // SAFETY: offsets from the format file.
    let (dev, ino) = unsafe { (field::<u32>(ctx, folio_dev)?, field::<u64>(ctx, folio_ino)?) };
    let Some(f) = file(dev, ino) else { return Ok(0) };
    if f.remembered() == 0 {
        return Ok(0);
    }
    // SAFETY: offset from the format file.
    let index = unsafe { field::<u64>(ctx, folio_index)? };
    let key = RaPageKey { dev, _pad: 0, ino, index };
    // SAFETY: a plain copy of the value.
    if let Some(p) = unsafe { RA_PAGES.get(&key) }.copied() {
        if RA_PAGES.remove(&key).is_ok() {
            if p.disk == 0 {
                hole(f, p.pages);
            } else {
                add(&mut f.wasted_pages, p.pages);
            }
            pending_changed(p.pages.wrapping_neg());
        }
    }
    Ok(0)
}

/// A remembered folio used or evicted before any read bio covered it: a hole's, zero-filled
/// without the disk; neither read ahead, used nor wasted.
#[inline(always)]
fn hole(f: &mut RaFileStats, pages: u64) {
    add(&mut f.unread_pages, pages.wrapping_neg());
    add(&mut f.hole_pages, pages);
}

/// A read bio of `pages` pages from the folio at `index` of file (dev, ino) (the bio program,
/// crate::files): the remembered folios it covers were read from disk and count as read ahead
/// from now on. Costs one array read while nothing is remembered anywhere, a hash lookup more
/// while this file has no folio waiting for its bio; otherwise a lookup per folio of the bio (at
/// most RA_BIO_WALK_MAX).
#[inline(always)]
pub fn on_read_bio(dev: u32, ino: u64, index: u64, pages: u64) {
    if !any_pending() {
        return;
    }
    let Some(f) = file(dev, ino) else { return };
    if f.unread_pages == 0 {
        return;
    }
    let end = index.wrapping_add(pages);
    let (mut at, mut n, mut read) = (index, 0u32, 0u64);
    // Ends once every unread folio of the file is marked (nothing else in the range to find).
    while n < RA_BIO_WALK_MAX && at < end && read < f.unread_pages {
        let key = RaPageKey { dev, _pad: 0, ino, index: at };
        let step = match RA_PAGES.get_ptr_mut(&key) {
            Some(p) => {
                // SAFETY: a pointer into the map's value; the folio is locked under its I/O, so
                // no other program uses or evicts it meanwhile.
                let p = unsafe { &mut *p };
                if p.disk == 0 {
                    p.disk = 1;
                    read += p.pages;
                }
                p.pages
            }
            None => 1,
        };
        at += if step == 0 { 1 } else { step };
        n += 1;
    }
    if read != 0 {
        add(&mut f.ra_pages, read);
        add(&mut f.unread_pages, read.wrapping_neg());
        entry_changed();
    }
}

#[tracepoint]
pub fn readahead_get_pages(ctx: TracePointContext) -> u32 {
    try_range(&ctx, false).unwrap_or(0)
}

#[tracepoint]
pub fn readahead_map_pages(ctx: TracePointContext) -> u32 {
    try_range(&ctx, true).unwrap_or(0)
}

/// Whether any readahead page is waiting for its first use, anywhere (one array read).
#[inline(always)]
pub fn any_pending() -> bool {
    RA_SHARED.get(0).is_some_and(|s| s.pending != 0)
}

/// Pages `index..=last` of file (dev, ino) mapped by a fault (the fallbacks' in
/// crate::readahead_fn): the readahead pages among them are used.
#[inline(always)]
pub fn use_mapped(dev: u32, ino: u64, index: u64, last: u64) {
    let Some(f) = file(dev, ino) else { return };
    if f.remembered() != 0 {
        use_range(f, dev, ino, index, last);
    }
}

fn try_range(ctx: &TracePointContext, mapped: bool) -> Result<u32, i64> {
    let l = layout();
    if (mapped && l.map_ok == 0) || (!mapped && l.get_ok == 0) {
        return Ok(0);
    }
    // SAFETY: offsets from the format file.
    let (dev, ino) = unsafe { (field::<u32>(ctx, l.range_dev)?, field::<u64>(ctx, l.range_ino)?) };
    let Some(f) = file(dev, ino) else { return Ok(0) };
    if f.remembered() == 0 {
        return Ok(0);
    }
    // SAFETY: offsets from the format file.
    let (index, last) = unsafe { (field::<u64>(ctx, l.range_index)?, field::<u64>(ctx, l.range_last)?) };
    use_range(f, dev, ino, index, last);
    Ok(0)
}

/// Called by the page-cache program on the raw `mm_filemap_get_pages` (crate::page_cache): a read
/// by thread `tid` of pages `index..=last` of the file whose `struct address_space` is at
/// `mapping`; `s` is this CPU's slot of the read path. Costs one array read (RA_SHARED) and reads
/// of `s` while no readahead page is pending anywhere, or while this CPU's last read of the same
/// file found none and nothing was read ahead since; otherwise a hash lookup more, and the walk
/// only while this file has pages pending. `fill_gaps`: the reads come from the tracepoint,
/// which misses some batches (ioscope_common::readahead::use_from): while the file has pages
/// pending, each thread's last read of it is kept, and a read that starts past it uses the pages
/// between too.
#[inline(always)]
pub fn on_read_raw(s: &mut CacheScratch, tid: u32, mapping: u64, index: u64, last: u64, fill_gaps: bool) {
    // A bind is only ever made by a readahead event (their programs run only with their layout).
    // The file this read's binding names (used as made, not looked up again: a full LRU map
    // may evict even the entry just made).
    let mut bound = RaFileKey { dev: 0, _pad: 0, ino: 0 };
    if binds(&s.ra_bind, tid, index, last) {
        bound = RaFileKey { dev: s.ra_bind.dev, _pad: 0, ino: s.ra_bind.ino };
        bind(tid, mapping, &bound);
        s.ra_bind.tid = 0;
    }
    let Some(shared) = RA_SHARED.get(0) else { return };
    // Nothing read ahead is waiting anywhere, or not in this file as of this epoch: no lookup
    // (the usual cached read).
    let (pending, epoch) = (shared.pending, shared.epoch);
    if pending == 0 || s.ra_memo.idle(mapping, epoch) {
        return;
    }
    // Reads count as uses only when the get_pages format was understood (checked off the hot
    // path: one field, not layout(), whose volatile copy is dozens of loads).
    // SAFETY: see layout().
    if unsafe { core::ptr::read_volatile(&raw const RA_LAYOUT.get_ok) } == 0 {
        return;
    }
    let idle = RaReadMemo { mapping, epoch };
    // A mapping known for a file with pages pending is that file (the usual case). One not known,
    // or known for a file with none pending, may be this thread's read right after its readahead
    // event on another CPU; the latter also when the mapping's memory was freed with its inode
    // and now holds another file's (the kept binding is then stale).
    let mut key = bound;
    if key.ino == 0 {
        // SAFETY: a plain copy of the value.
        if let Some(k) = unsafe { RA_MAPPINGS.get(&mapping) } {
            key = *k;
        }
    }
    let mut f = if key.ino == 0 { None } else { file(key.dev, key.ino).filter(|f| f.remembered() != 0) };
    if f.is_none() {
        let Some(k) = bind_moved(tid, mapping, index, last) else {
            s.ra_memo = idle;
            return;
        };
        key = k;
        f = file(key.dev, key.ino).filter(|f| f.remembered() != 0);
    }
    let Some(f) = f else {
        s.ra_memo = idle;
        return;
    };
    let mut from = index;
    if fill_gaps {
        // SAFETY: a plain copy of the value.
        from = use_from((unsafe { RA_LAST_READ.get(&tid) }).copied(), mapping, index);
        let _ = RA_LAST_READ.insert(&tid, &RaLastRead { mapping, index, last }, 0);
    }
    // The read's own pages first, with the whole walk; then those its thread read without an
    // event (a walk of their own: a gap of pages already used costs a step per page).
    use_range(f, key.dev, key.ino, index, last);
    if from < index {
        use_range(f, key.dev, key.ino, from, index - 1);
    }
}

/// The file of `mapping` read by thread `tid` right after its readahead event on another CPU (it
/// slept on the pages' I/O and woke up elsewhere): bound as on the event's CPU.
/// Without it a small file read whole in one call (a 1-page file read with a 128 KiB buffer, as
/// `cat` does) kept its page pending until evicted, then counted wasted.
#[inline(always)]
fn bind_moved(tid: u32, mapping: u64, index: u64, last: u64) -> Option<RaFileKey> {
    // SAFETY: a plain copy of the value.
    let b = (unsafe { RA_BINDS.get(&tid) }).copied()?;
    // SAFETY: helper without preconditions.
    if !b.binds(index, last, unsafe { bpf_ktime_get_ns() }) {
        return None;
    }
    let key = RaFileKey { dev: b.dev, _pad: 0, ino: b.ino };
    bind(tid, mapping, &key);
    Some(key)
}

/// Thread `tid`'s readahead event bound to the read of `mapping` that follows it: the mapping is
/// `key`'s from now on, the thread's kept event is spent, and cached reads' memos are stale.
#[inline(always)]
fn bind(tid: u32, mapping: u64, key: &RaFileKey) {
    let _ = RA_MAPPINGS.insert(&mapping, key, 0);
    let _ = RA_BINDS.remove(&tid);
    bump_epoch();
}

#[tracepoint]
pub fn readahead_fault(ctx: TracePointContext) -> u32 {
    try_fault(&ctx).unwrap_or(0)
}

fn try_fault(ctx: &TracePointContext) -> Result<u32, i64> {
    let l = layout();
    if l.fault_ok == 0 {
        return Ok(0);
    }
    // SAFETY: offsets from the format file.
    let (dev, ino) = unsafe { (field::<u32>(ctx, l.fault_dev)?, field::<u64>(ctx, l.fault_ino)?) };
    let Some(f) = file(dev, ino) else { return Ok(0) };
    if f.remembered() == 0 {
        return Ok(0);
    }
    // SAFETY: offset from the format file.
    let index = unsafe { field::<u64>(ctx, l.fault_index)? };
    use_range(f, dev, ino, index, index);
    Ok(0)
}

/// Marks the remembered folios covering pages `index..=last` used: walks folio by folio from the
/// first one (which may start before `index`: a large folio is found at its aligned head).
#[inline(always)]
fn use_range(f: &mut RaFileStats, dev: u32, ino: u64, index: u64, last: u64) {
    // SAFETY: helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let mut at = index;
    // The folio holding `index` may start before it: try each order seen on this file.
    let orders = f.orders_seen & !1;
    if orders != 0 {
        let mut o = 1u32;
        while o <= 10 {
            if orders & (1 << o) != 0 {
                let head = index & !((1u64 << o) - 1);
                if head != index && take(f, dev, ino, head, now) >= (1u64 << o) {
                    at = head + (1u64 << o);
                    break;
                }
            }
            o += 1;
        }
    }
    let mut n = 0u32;
    while n < RA_WALK_MAX && at <= last {
        let pages = take(f, dev, ino, at, now);
        at += if pages == 0 { 1 } else { pages };
        n += 1;
    }
}

/// Removes the folio whose head is `index` as used, counting it; returns its pages (0 if none).
#[inline(always)]
fn take(f: &mut RaFileStats, dev: u32, ino: u64, index: u64, now: u64) -> u64 {
    let key = RaPageKey { dev, _pad: 0, ino, index };
    // SAFETY: a plain copy of the value.
    let Some(p) = (unsafe { RA_PAGES.get(&key) }).copied() else { return 0 };
    if RA_PAGES.remove(&key).is_err() {
        // Another CPU used or evicted it first.
        return 0;
    }
    pending_changed(p.pages.wrapping_neg());
    if p.disk == 0 {
        hole(f, p.pages);
        return p.pages;
    }
    add(&mut f.used_pages, p.pages);
    let b = use_bucket(now.saturating_sub(p.inserted_ns));
    if b < f.use_hist.len() {
        add(&mut f.use_hist[b], 1);
    }
    p.pages
}
