//! Per-file attribution (ioscope_common::files): the page-cache programs call in here with what
//! they already read, so no tracepoint gets a second program; `writeback_single_inode` is the one
//! program of its own (writeback credited to the file, not the flusher).

use aya_ebpf::{
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid},
    macros::{btf_tracepoint, fentry, map, tracepoint},
    maps::{Array, LruHashMap, LruPerCpuHashMap, PerCpuArray},
    programs::{BtfTracePointContext, FEntryContext, TracePointContext},
};
use ioscope_common::files::{
    bdi_dev, demand_pages, folio_bytes_before_eof, is_demand, BioLayout, DemandRecord, DioPending,
    FileCounters, FileInsertRecord, FileKey, FileLayout, ThreadFileRecord, FILE_LAST_INSERT_MAX,
    FILE_MAX_ENTRIES, INSERT_BY_BIO, INSERT_PER_FILE, INSERT_READAHEAD, KEY_BDI_DEV, KEY_SB_DEV, REQ_OP_MASK,
};

use crate::kernel::{kernel_field, Mem, Plain, Probe};

#[unsafe(no_mangle)]
static FILE_LAYOUT: FileLayout = FileLayout::UNSET;

#[unsafe(no_mangle)]
static FILE_BIO_LAYOUT: BioLayout = BioLayout::UNSET;

/// 1 once userspace attached `file_bio_queue_btf` (ioscope_common::files::FILE_BIO_ON_MAP).
#[map]
static FILE_BIO_ON: Array<u32> = Array::with_max_entries(1, 0);

#[map]
static FILE_IO: LruPerCpuHashMap<FileKey, FileCounters> =
    LruPerCpuHashMap::with_max_entries(FILE_MAX_ENTRIES, 0);

/// FILE_IO's insert counter (ioscope_common::inserts).
#[map]
static FILE_IO_INSERTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

#[map]
static FILE_LAST_INSERT: LruHashMap<u32, ThreadFileRecord> =
    LruHashMap::with_max_entries(FILE_LAST_INSERT_MAX, 0);

#[map]
static FILE_DIO_PENDING: PerCpuArray<DioPending> = PerCpuArray::with_max_entries(1, 0);

#[inline(always)]
fn layout() -> FileLayout {
    // SAFETY: see page_cache::layout().
    unsafe { core::ptr::read_volatile(&raw const FILE_LAYOUT) }
}

/// One field of the layout (`layout()` copies all of it: too much for the busiest programs).
macro_rules! layout_field {
    ($($f:ident).+) => {
        // SAFETY: see page_cache::layout().
        unsafe { core::ptr::read_volatile(&raw const FILE_LAYOUT.$($f).+) }
    };
}

/// This CPU's counters of `key`, created on first use.
#[inline(always)]
fn file(key: &FileKey) -> Option<&'static mut FileCounters> {
    let p = match FILE_IO.get_ptr_mut(key) {
        Some(p) => p,
        None => {
            let _ = FILE_IO.insert(key, &FileCounters::default(), 0);
            crate::kernel::count_insert(&FILE_IO_INSERTS);
            FILE_IO.get_ptr_mut(key)?
        }
    };
    // SAFETY: this CPU's value; tracing programs do not nest on one CPU.
    Some(unsafe { &mut *p })
}

/// Records the current process as the file's last user on this CPU (comm only when it changes).
#[inline(always)]
fn touch(c: &mut FileCounters) {
    touch_as(c, (bpf_get_current_pid_tgid() >> 32) as u32);
}

/// [`touch`] where the caller has the current process's `tgid` already (a helper call less).
#[inline(always)]
fn touch_as(c: &mut FileCounters, tgid: u32) {
    if c.tgid != tgid || c.comm[0] == 0 {
        c.tgid = tgid;
        if let Ok(comm) = bpf_get_current_comm() {
            c.comm = comm;
        }
    }
}

/// Whether userspace attached `file_bio_queue_btf`: disk reads are then counted per read bio.
#[inline(always)]
pub fn bio_on() -> bool {
    FILE_BIO_ON.get(0).is_some_and(|on| *on != 0)
}

/// `readahead:page_cache_sync_ra`: a read missed; remembers which pages it asked for.
#[tracepoint]
pub fn file_sync_ra(ctx: TracePointContext) -> u32 {
    try_sync_ra(&ctx).unwrap_or(0)
}

fn try_sync_ra(ctx: &TracePointContext) -> Result<u32, i64> {
    let l = layout();
    if l.sync_ra_ok == 0 {
        return Ok(0);
    }
    // SAFETY: offsets from the format file.
    let r = unsafe {
        DemandRecord {
            dev: ctx.read_at::<u32>(l.sync_ra_dev as usize).map_err(i64::from)?,
            _pad: 0,
            ino: ctx.read_at::<u64>(l.sync_ra_ino as usize).map_err(i64::from)?,
            index: ctx.read_at::<u64>(l.sync_ra_index as usize).map_err(i64::from)?,
            req_count: ctx.read_at::<u64>(l.sync_ra_req_count as usize).map_err(i64::from)?,
        }
    };
    set_demand(r);
    Ok(0)
}

/// `file_sync_ra`'s fallback (before Linux 6.18): the entry of `page_cache_sync_ra(ractl,
/// req_count)` (6.1+), where the tracepoint is raised first thing; the record's fields are read
/// from `ractl` as the readahead fallbacks read them (crate::readahead_fn::ractl_file).
#[fentry(function = "page_cache_sync_ra")]
pub fn file_sync_ra_fentry(ctx: FEntryContext) -> i32 {
    // Both arguments read first, at constant offsets from the context.
    let ractl: *const u8 = ctx.arg(0);
    let req_count: u64 = ctx.arg(1);
    on_sync_ra::<Plain>(ractl, req_count);
    0
}

/// `file_sync_ra`'s fallback on 5.10: the entry of `page_cache_sync_ra(ractl, ra, req_count)`.
#[fentry(function = "page_cache_sync_ra")]
pub fn file_sync_ra_510(ctx: FEntryContext) -> i32 {
    let ractl: *const u8 = ctx.arg(0);
    let req_count: u64 = ctx.arg(2);
    on_sync_ra::<Plain>(ractl, req_count);
    0
}

/// A read miss on `ractl` (read with `M`; the kprobe variants in crate::kprobe_fallbacks pass
/// [`Probe`]) asked for `req_count` pages: what `file_sync_ra` records from the tracepoint.
#[inline(always)]
pub(crate) fn on_sync_ra<M: Mem>(ractl: *const u8, req_count: u64) {
    let Some((dev, ino, index, _)) = crate::readahead_fn::ractl_file::<M>(ractl) else { return };
    set_demand(DemandRecord { dev, _pad: 0, ino, index, req_count });
}

/// `filemap:mm_filemap_fault` (from the page-cache program on it): a fault asks for one page. While
/// the bio program counts disk reads, that page is the thread's demand, as a read miss's range is
/// (a fault raises no `page_cache_sync_ra`): of the read-around's bio, the rest is readahead; a
/// MADV_RANDOM fault's one-page bio is all demand.
#[inline(always)]
pub fn on_fault(ctx: &TracePointContext) {
    if layout_field!(fault_ok) == 0 || !FILE_BIO_ON.get(0).is_some_and(|on| *on != 0) {
        return;
    }
    let (dev_at, ino_at, index_at) =
        (layout_field!(fault_dev), layout_field!(fault_ino), layout_field!(fault_index));
    // SAFETY: offsets from the format file.
    let r = unsafe {
        let (Ok(dev), Ok(ino), Ok(index)) = (
            ctx.read_at::<u32>(dev_at as usize),
            ctx.read_at::<u64>(ino_at as usize),
            ctx.read_at::<u64>(index_at as usize),
        ) else {
            return;
        };
        DemandRecord { dev, _pad: 0, ino, index, req_count: 1 }
    };
    set_demand(r);
}

/// The current thread's demand: what its last read miss or fault asked for.
#[inline(always)]
fn set_demand(r: DemandRecord) {
    let tid = bpf_get_current_pid_tgid() as u32;
    match FILE_LAST_INSERT.get_ptr_mut(&tid) {
        // SAFETY: this thread's own record, used only by the thread itself.
        Some(p) => unsafe { core::ptr::write_volatile(&raw mut (*p).demand, r) },
        None => {
            let _ = FILE_LAST_INSERT.insert(
                &tid,
                &ThreadFileRecord { insert: FileInsertRecord::default(), demand: r },
                0,
            );
        }
    }
}

/// Where `mm_filemap_add_to_page_cache`'s record has `s_dev`; None when the per-file part is off.
#[inline(always)]
pub fn add_dev_at() -> Option<u32> {
    (layout_field!(add_ok) != 0).then(|| layout_field!(add_dev))
}

/// From `mm_filemap_add_to_page_cache`: `pages` pages at `index` of inode `ino` on `dev` (None:
/// the per-file part is off) entered the cache in thread `tid`: demand when in the range its last
/// read miss asked for, else readahead. The thread's last insert is kept in any case: the
/// page-cache counts ([`on_dirty`]'s result) need it too.
#[inline(always)]
pub fn on_insert(tgid: u32, tid: u32, dev: Option<u32>, ino: u64, index: u64, pages: u64) {
    let mut r = FileInsertRecord { dev: 0, flags: 0, ino, index, pages };
    // One lookup for the read miss and the record to overwrite.
    let thread = FILE_LAST_INSERT.get_ptr_mut(&tid);
    if let Some(dev) = dev {
        let demand = match thread {
            // SAFETY: this thread's own record, used only by the thread itself.
            Some(p) => is_demand(unsafe { &(*p).demand }, dev, ino, index),
            None => false,
        };
        let key = FileKey { dev, kind: KEY_SB_DEV, ino };
        let readahead = !demand;
        // With the bio program on, a page counts as read when a read bio was submitted for it
        // (a hole's page is zeroed without one), not when it enters the cache.
        let by_bio = FILE_BIO_ON.get(0).is_some_and(|on| *on != 0);
        if let Some(c) = file(&key) {
            if !by_bio {
                c.inserted_pages = c.inserted_pages.wrapping_add(pages);
                if readahead {
                    c.readahead_pages = c.readahead_pages.wrapping_add(pages);
                }
            }
            touch_as(c, tgid);
        }
        r.dev = dev;
        r.flags = INSERT_PER_FILE
            | if readahead { INSERT_READAHEAD } else { 0 }
            | if by_bio { INSERT_BY_BIO } else { 0 };
    }
    // Over the thread's record when the map still has it (stores instead of a hash map update,
    // several times dearer; ebpf/README.md, "What an fsync'd write costs").
    match thread {
        // SAFETY: as above.
        Some(p) => unsafe { core::ptr::write_volatile(&raw mut (*p).insert, r) },
        None => {
            let _ = FILE_LAST_INSERT.insert(
                &tid,
                &ThreadFileRecord { insert: r, demand: DemandRecord::default() },
                0,
            );
        }
    }
}

/// From `writeback_dirty_folio`: folio `index` of `ino` became dirty in thread `tid`. When the
/// thread inserted that very folio just before, it was a write allocating a page, not a read:
/// the insertion is taken back and the dirtying counted on the filesystem's key with its size,
/// and its pages are returned (else 0).
#[inline(always)]
pub fn on_dirty(ctx: &TracePointContext, tgid: u32, tid: u32, ino: u64, index: u64) -> u64 {
    let dirty_ok = layout_field!(dirty_ok) != 0;
    if let Some(p) = FILE_LAST_INSERT.get_ptr_mut(&tid) {
        // SAFETY: this thread's own record, used only by the thread itself.
        let r = unsafe { (*p).insert };
        // A record taken back has no pages (an insertion has at least one): it stays in the map
        // for the thread's next insertion to overwrite.
        if r.pages != 0 && r.ino == ino && r.index == index {
            // SAFETY: as above.
            unsafe { core::ptr::write_volatile(&raw mut (*p).insert.pages, 0) };
            if dirty_ok && r.flags & INSERT_PER_FILE != 0 {
                let key = FileKey { dev: r.dev, kind: KEY_SB_DEV, ino };
                if let Some(c) = file(&key) {
                    if r.flags & INSERT_BY_BIO == 0 {
                        c.inserted_pages = c.inserted_pages.wrapping_sub(r.pages);
                        if r.flags & INSERT_READAHEAD != 0 {
                            c.readahead_pages = c.readahead_pages.wrapping_sub(r.pages);
                        }
                    }
                    c.dirtied_pages = c.dirtied_pages.wrapping_add(r.pages);
                    touch_as(c, tgid);
                }
            }
            return r.pages;
        }
    }
    if !dirty_ok {
        return 0;
    }
    let name_at = layout_field!(dirty_name) as usize;
    // SAFETY: offset from the format file.
    let Ok(name) = (unsafe { ctx.read_at::<[u8; 32]>(name_at) }) else { return 0 };
    let Some(dev) = bdi_dev(&name) else { return 0 };
    if let Some(c) = file(&FileKey { dev, kind: KEY_BDI_DEV, ino }) {
        c.dirtied_pages = c.dirtied_pages.wrapping_add(1);
        touch_as(c, tgid);
    }
    0
}

/// One field of the bio layout.
macro_rules! bio_field {
    ($f:ident) => {
        // SAFETY: see page_cache::layout().
        unsafe { core::ptr::read_volatile(&raw const FILE_BIO_LAYOUT.$f) }
    };
}

/// `block:block_bio_queue` as a BTF tracepoint: a bio enters the block layer (raised once per bio,
/// also for a bio split later; a stacked device's clone is skipped). A read bio whose first page
/// is a page-cache folio not yet up to date is the disk read of that file's pages: counted on the
/// file in pages (rounded up), demand where the thread's last read miss asked for them, the rest
/// readahead. A hole's pages (zeroed by the filesystem, marked up to date, no bio) are not.
#[btf_tracepoint(function = "block_bio_queue")]
pub fn file_bio_queue_btf(ctx: BtfTracePointContext) -> i32 {
    if bio_field!(configured) == 0 {
        return 0;
    }
    let bio: *const u8 = if bio_field!(bio_arg1) != 0 { ctx.arg(1) } else { ctx.arg(0) };
    let opf: u32 = kernel_field(bio, bio_field!(bio_opf));
    if opf & REQ_OP_MASK != bio_field!(op_read) {
        return 0;
    }
    let flags: u16 = kernel_field(bio, bio_field!(bio_flags));
    if u32::from(flags) >> (bio_field!(cloned_bit) & 15) & 1 != 0 {
        return 0;
    }
    let size: u32 = kernel_field(bio, bio_field!(bio_size));
    if size == 0 {
        return 0;
    }
    let vec: *const u8 = kernel_field(bio, bio_field!(bio_io_vec));
    let page: *const u8 = kernel_field(vec, bio_field!(bvec_page));
    // A tail page of a large folio: its folio's fields are the head's, read through the helper
    // (the head's address is a number, not a pointer the verifier knows).
    let head: u64 = Probe::get(page, bio_field!(page_head));
    let found =
        if head & 1 != 0 { bio_file::<Probe>((head - 1) as *const u8) } else { bio_file::<Plain>(page) };
    let Some((dev, ino, index)) = found else { return 0 };
    let shift = bio_field!(page_shift) & 31;
    let pages = (u64::from(size) + (1 << shift) - 1) >> shift;
    crate::readahead::on_read_bio(dev, ino, index, pages);
    let tid = bpf_get_current_pid_tgid() as u32;
    let demand = match FILE_LAST_INSERT.get_ptr(&tid) {
        // SAFETY: this thread's own record, used only by the thread itself.
        Some(p) => demand_pages(unsafe { &(*p).demand }, dev, ino, index, pages),
        None => 0,
    };
    if let Some(c) = file(&FileKey { dev, kind: KEY_SB_DEV, ino }) {
        c.inserted_pages = c.inserted_pages.wrapping_add(pages);
        c.readahead_pages = c.readahead_pages.wrapping_add(pages - demand);
        touch(c);
    }
    0
}

/// The file (dev, ino) and page index of a head page `folio` being read: None unless it is a
/// page-cache folio (a mapping with an inode) not yet up to date (a direct read's user pages and
/// anonymous pages are up to date; a hole's folio is marked so without a bio).
#[inline(always)]
fn bio_file<M: Mem>(folio: *const u8) -> Option<(u32, u64, u64)> {
    let flags: u64 = M::get(folio, bio_field!(page_flags));
    if flags >> (bio_field!(uptodate_bit) & 63) & 1 != 0 {
        return None;
    }
    let mapping: *const u8 = M::get(folio, bio_field!(folio_mapping));
    if mapping.is_null() {
        return None;
    }
    let host: *const u8 = M::get(mapping, bio_field!(mapping_host));
    if host.is_null() {
        return None;
    }
    let sb: *const u8 = M::get(host, bio_field!(inode_sb));
    let dev: u32 = M::get(sb, bio_field!(sb_dev));
    let ino: u64 = M::get(host, bio_field!(inode_ino));
    let index: u64 = M::get(folio, bio_field!(folio_index));
    (dev != 0 && ino != 0).then_some((dev, ino, index))
}

/// The file of an `iomap_dio_rw_begin` record: (dev, ino).
#[inline(always)]
pub fn dio_file(ctx: &TracePointContext) -> Option<(u32, u64)> {
    let l = layout();
    if l.dio_ok == 0 {
        return None;
    }
    // SAFETY: offsets from the format file.
    unsafe {
        Some((ctx.read_at::<u32>(l.dio_dev as usize).ok()?, ctx.read_at::<u64>(l.dio_ino as usize).ok()?))
    }
}

/// The file of the kiocb of an `iomap_dio_rw_begin` BTF tracepoint: (dev, ino), as the record has
/// them (`file_inode(iocb->ki_filp)->i_sb->s_dev`, `->i_ino`).
#[inline(always)]
pub fn dio_file_btf<M: Mem>(iocb: *const u8) -> Option<(u32, u64)> {
    if layout_field!(btf.configured) == 0 {
        return None;
    }
    let filp: *const u8 = M::get(iocb, layout_field!(btf.kiocb_filp));
    Some(inode_file::<M>(M::get(filp, layout_field!(btf.file_inode))))
}

/// The offsets of `iov_iter.count` and `kiocb.ki_flags` for the `iomap_dio_rw_begin` BTF
/// tracepoint (the iomap part of the BTF layout lives here), or None when not configured.
#[inline(always)]
pub fn dio_args_btf() -> Option<(u32, u32)> {
    if layout_field!(btf.configured) == 0 {
        return None;
    }
    Some((layout_field!(btf.iov_count), layout_field!(btf.kiocb_flags)))
}

/// The offset of `iov_iter.data_source` when the `iomap_dio_rw_begin` twin takes the direction
/// from it (and `iomap_iter` is not traced), else None.
#[inline(always)]
pub fn dio_direction_btf() -> Option<u32> {
    (layout_field!(btf.dio_direction) != 0).then(|| layout_field!(btf.iov_data_source))
}

/// How many bytes a direct read at the kiocb's position can read before the end of its file
/// (negative: none).
#[inline(always)]
pub fn dio_bytes_left_btf<M: Mem>(iocb: *const u8) -> i64 {
    let filp: *const u8 = M::get(iocb, layout_field!(btf.kiocb_filp));
    let inode: *const u8 = M::get(filp, layout_field!(btf.file_inode));
    M::get::<i64>(inode, layout_field!(btf.inode_size))
        .saturating_sub(M::get::<i64>(iocb, layout_field!(btf.kiocb_pos)))
}

/// Direct-I/O bytes moved from a CPU's memo (crate::page_cache, DioMemo) to the file's entry.
/// The file's process is not touched: the current task may be another one.
#[inline(always)]
pub fn add_dio_bytes(dev: u32, ino: u64, read_bytes: u64, write_bytes: u64) {
    if let Some(c) = file(&FileKey { dev, kind: KEY_SB_DEV, ino }) {
        c.dio_read_bytes = c.dio_read_bytes.wrapping_add(read_bytes);
        c.dio_write_bytes = c.dio_write_bytes.wrapping_add(write_bytes);
    }
}

/// An inode's (dev, ino) as the iomap events' records have them.
#[inline(always)]
fn inode_file<M: Mem>(inode: *const u8) -> (u32, u64) {
    let sb: *const u8 = M::get(inode, layout_field!(btf.inode_sb));
    (M::get(sb, layout_field!(btf.sb_dev)), M::get(inode, layout_field!(btf.inode_ino)))
}

/// From `iomap_dio_rw_begin`: `bytes` of direct I/O on `file` (None: its identity could not be
/// read). Its direction comes from the thread's next `iomap_iter` (see
/// ioscope_common::files::DioPending) when that program runs; else from `write`, the event's own
/// IOCB_WRITE bit. Returns whether the direction was left to `iomap_iter`, which then also credits
/// the process (crate::page_cache).
#[inline(always)]
pub fn on_dio(file: Option<(u32, u64)>, bytes: u64, write: bool) -> bool {
    let Some((dev, ino)) = file else { return false };
    if layout_field!(iter_ok) != 0 && !write {
        if let Some(slot) = FILE_DIO_PENDING.get_ptr_mut(0) {
            let tid = bpf_get_current_pid_tgid() as u32;
            // SAFETY: this CPU's slot; tracing programs do not nest on one CPU.
            unsafe { *slot = DioPending { dev, tid, ino, bytes } };
            return true;
        }
    }
    count_dio(dev, ino, bytes, write);
    false
}

/// `bytes` of direct I/O in a known direction on file (dev, ino), by the current task.
#[inline(always)]
pub fn count_dio(dev: u32, ino: u64, bytes: u64, write: bool) {
    if let Some(c) = file(&FileKey { dev, kind: KEY_SB_DEV, ino }) {
        if write {
            c.dio_write_bytes = c.dio_write_bytes.wrapping_add(bytes);
        } else {
            c.dio_read_bytes = c.dio_read_bytes.wrapping_add(bytes);
        }
        touch(c);
    }
}

/// `iomap:iomap_iter`: the first direct iteration after `iomap_dio_rw_begin` in this thread
/// tells the direction of the direct I/O waiting in FILE_DIO_PENDING.
#[tracepoint]
pub fn file_iomap_iter(ctx: TracePointContext) -> u32 {
    let l = layout();
    if l.iter_ok == 0 {
        return 0;
    }
    // SAFETY: offset from the format file.
    let Ok(flags) = (unsafe { ctx.read_at::<u32>(l.iter_flags as usize) }) else { return 0 };
    on_iter(flags, l.iter_direct_flag, l.iter_write_flag, || {
        // SAFETY: offsets from the format file.
        unsafe {
            Some((
                ctx.read_at::<u32>(l.iter_dev as usize).ok()?,
                ctx.read_at::<u64>(l.iter_ino as usize).ok()?,
            ))
        }
    });
    0
}

/// The same as a BTF tracepoint: `TP_PROTO(struct iomap_iter *iter, const void *ops, unsigned long
/// caller)`, read with plain loads.
#[btf_tracepoint(function = "iomap_iter")]
pub fn file_iomap_iter_btf(ctx: BtfTracePointContext) -> i32 {
    if layout_field!(iter_ok) == 0 || layout_field!(btf.configured) == 0 {
        return 0;
    }
    let iter: *const u8 = ctx.arg(0);
    let flags: u32 = kernel_field(iter, layout_field!(btf.iter_flags));
    on_iter(flags, layout_field!(iter_direct_flag), layout_field!(iter_write_flag), || {
        Some(inode_file::<Plain>(kernel_field(iter, layout_field!(btf.iter_inode))))
    });
    0
}

/// An iteration with `flags` (IOMAP_DIRECT and IOMAP_WRITE: `direct_flag`, `write_flag`) over
/// `file` (read only when needed: most iterations are not the first direct one after a
/// dio_rw_begin).
#[inline(always)]
fn on_iter(flags: u32, direct_flag: u32, write_flag: u32, file: impl FnOnce() -> Option<(u32, u64)>) {
    if flags & direct_flag == 0 {
        return;
    }
    let Some(slot) = FILE_DIO_PENDING.get_ptr_mut(0) else { return };
    // SAFETY: this CPU's slot; tracing programs do not nest on one CPU.
    let slot = unsafe { &mut *slot };
    // Nothing waiting (the usual case: the I/O's later iterations): no helper call.
    if slot.tid == 0 || slot.tid != bpf_get_current_pid_tgid() as u32 {
        return;
    }
    let p = *slot;
    let Some((dev, ino)) = file() else { return };
    if dev != p.dev || ino != p.ino {
        return;
    }
    slot.tid = 0;
    let write = flags & write_flag != 0;
    count_dio(dev, ino, p.bytes, write);
    crate::page_cache::count_dio_process(p.bytes, write);
}

/// `writeback_single_inode`'s `name` and `ino`, read in one go where they follow each other.
#[repr(C)]
#[derive(Clone, Copy)]
struct NameIno {
    name: [u8; 32],
    ino: u64,
}

/// `writeback:writeback_single_inode`: `wrote` pages of the inode were written back by this call
/// (flusher thread, sync, fsync). Credited to the file; the writing task is not its user.
#[tracepoint]
pub fn writeback_single_inode(ctx: TracePointContext) -> u32 {
    try_writeback_single_inode(&ctx).unwrap_or(0)
}

fn try_writeback_single_inode(ctx: &TracePointContext) -> Result<u32, i64> {
    if layout_field!(wsi_ok) == 0 {
        return Ok(0);
    }
    let (wsi_name, wsi_ino, wsi_wrote) =
        (layout_field!(wsi_name), layout_field!(wsi_ino), layout_field!(wsi_wrote));
    // SAFETY: offsets from the format file; `ino` follows `name` in every kernel's record (one
    // read, not two, where it does: each read is a helper call).
    let (name, ino, wrote) = unsafe {
        let (name, ino) = if wsi_ino == wsi_name.wrapping_add(32) {
            let h = ctx.read_at::<NameIno>(wsi_name as usize).map_err(i64::from)?;
            (h.name, h.ino)
        } else {
            (
                ctx.read_at::<[u8; 32]>(wsi_name as usize).map_err(i64::from)?,
                ctx.read_at::<u64>(wsi_ino as usize).map_err(i64::from)?,
            )
        };
        (name, ino, ctx.read_at::<u64>(wsi_wrote as usize).map_err(i64::from)?)
    };
    if wrote == 0 || wrote > 1 << 40 {
        return Ok(0);
    }
    let Some(dev) = bdi_dev(&name) else { return Ok(0) };
    if let Some(c) = file(&FileKey { dev, kind: KEY_BDI_DEV, ino }) {
        c.writeback_pages = c.writeback_pages.wrapping_add(wrote);
    }
    Ok(0)
}

/// Adds `bytes` of filesystem writeback to (s_dev `dev`, `ino`).
#[inline(always)]
fn count_fs_writeback(dev: u32, ino: u64, bytes: u64) {
    if bytes == 0 {
        return;
    }
    crate::syncs::on_writeback(bytes);
    if let Some(c) = file(&FileKey { dev, kind: KEY_SB_DEV, ino }) {
        c.fs_writeback_bytes = c.fs_writeback_bytes.wrapping_add(bytes);
    }
}

/// `ext4:ext4_writepages_result`: ext4 wrote back `pages_written` pages of the inode, whoever
/// asked (flusher, sync, fsync).
#[tracepoint]
pub fn file_ext4_writepages(ctx: TracePointContext) -> u32 {
    try_ext4_writepages(&ctx).unwrap_or(0)
}

fn try_ext4_writepages(ctx: &TracePointContext) -> Result<u32, i64> {
    if layout_field!(ewr_ok) == 0 {
        return Ok(0);
    }
    let (ewr_dev, ewr_ino, ewr_pages) =
        (layout_field!(ewr_dev), layout_field!(ewr_ino), layout_field!(ewr_pages));
    // SAFETY: offsets from the format file; one read where the fields are as in every kernel's
    // record (`dev`, `ino` 8 bytes on, `ret`, `pages_written`), else one per field.
    let (dev, ino, pages) = unsafe {
        if ewr_ino == ewr_dev.wrapping_add(8) && ewr_pages == ewr_dev.wrapping_add(20) {
            let w = ctx.read_at::<[u32; 6]>(ewr_dev as usize).map_err(i64::from)?;
            (w[0], u64::from(w[2]) | u64::from(w[3]) << 32, w[5] as i32)
        } else {
            (
                ctx.read_at::<u32>(ewr_dev as usize).map_err(i64::from)?,
                ctx.read_at::<u64>(ewr_ino as usize).map_err(i64::from)?,
                ctx.read_at::<i32>(ewr_pages as usize).map_err(i64::from)?,
            )
        }
    };
    if pages > 0 {
        count_fs_writeback(dev, ino, (pages as u64) << (layout_field!(page_shift) & 31));
    }
    Ok(0)
}

/// `iomap:iomap_writeback_folio`: an iomap filesystem (xfs, ...) writes a dirty folio back.
#[tracepoint]
pub fn file_iomap_writeback(ctx: TracePointContext) -> u32 {
    try_iomap_writeback(&ctx).unwrap_or(0)
}

fn try_iomap_writeback(ctx: &TracePointContext) -> Result<u32, i64> {
    let l = layout();
    if l.iwf_ok == 0 {
        return Ok(0);
    }
    // SAFETY: offsets from the format file.
    let (dev, ino, size) = unsafe {
        (
            ctx.read_at::<u32>(l.iwf_dev as usize).map_err(i64::from)?,
            ctx.read_at::<u64>(l.iwf_ino as usize).map_err(i64::from)?,
            ctx.read_at::<i64>(l.iwf_size as usize).map_err(i64::from)?,
        )
    };
    // SAFETY: as above.
    let (offset, length) = unsafe {
        let offset = ctx.read_at::<i64>(l.iwf_offset as usize).map_err(i64::from)?;
        if l.iwf_short_length != 0 {
            // 5.10's iomap_writepage: an `unsigned int` (one page).
            (offset, u64::from(ctx.read_at::<u32>(l.iwf_length as usize).map_err(i64::from)?))
        } else {
            (offset, ctx.read_at::<u64>(l.iwf_length as usize).map_err(i64::from)?)
        }
    };
    count_fs_writeback(dev, ino, folio_bytes_before_eof(size, offset, length));
    Ok(0)
}
