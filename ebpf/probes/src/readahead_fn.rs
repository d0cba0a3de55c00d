//! The readahead fallbacks for kernels without `readahead:*` (before Linux 6.18): fentry programs
//! on the functions those tracepoints sit in, each reading from its arguments what the
//! tracepoint's record holds, and feeding the same counters (crate::readahead). Offsets: see
//! ioscope_common::readahead_fn; why this measures the same thing: ebpf/README.md.

use aya_ebpf::{macros::fentry, programs::FEntryContext};
use ioscope_common::readahead_fn::RaFnLayout;

use crate::kernel::{Mem, Plain};
use crate::readahead::{on_order, on_ra_event, on_unbounded};

#[unsafe(no_mangle)]
static RA_FN_LAYOUT: RaFnLayout = RaFnLayout::UNSET;

/// One field of RA_FN_LAYOUT (volatile: the loader rewrites it before load).
macro_rules! ra_fn {
    ($field:ident) => {
        // SAFETY: a read-only global the loader fills before load.
        unsafe { core::ptr::read_volatile(&raw const RA_FN_LAYOUT.$field) }
    };
}

/// What every readahead tracepoint records of its `readahead_control`: the file (its inode's
/// `s_dev` and `i_ino`), `readahead_index(ractl)`, and its `file_ra_state`.
#[inline(always)]
pub fn ractl_file<M: Mem>(ractl: *const u8) -> Option<(u32, u64, u64, *const u8)> {
    if ra_fn!(configured) == 0 {
        return None;
    }
    let mapping: *const u8 = M::get(ractl, ra_fn!(ractl_mapping));
    let (dev, ino) = mapping_file::<M>(mapping);
    let index: u64 = M::get(ractl, ra_fn!(ractl_index));
    let ra: *const u8 = M::get(ractl, ra_fn!(ractl_ra));
    Some((dev, ino, index, ra))
}

/// The (s_dev, i_ino) of a `struct address_space`'s inode.
#[inline(always)]
fn mapping_file<M: Mem>(mapping: *const u8) -> (u32, u64) {
    let inode: *const u8 = M::get(mapping, ra_fn!(mapping_host));
    let sb: *const u8 = M::get(inode, ra_fn!(inode_sb));
    (M::get(sb, ra_fn!(sb_dev)), M::get(inode, ra_fn!(inode_ino)))
}

/// Called by the page-cache fallbacks on `filemap_map_pages(vmf, start, end)` (`last`: `end`) and
/// `filemap_fault(vmf)` (None: the one page `vmf->pgoff`), where `mm_filemap_map_pages` and
/// `mm_filemap_fault` are missing: the pages a fault maps, as those tracepoints report them, mark
/// readahead pages used (crate::readahead::use_mapped). `vmf` is read with `M`.
#[inline(always)]
pub fn on_vm_fault<M: Mem>(vmf: *const u8, range: Option<(u64, u64)>) {
    if ra_fn!(vm_configured) == 0 || !crate::readahead::any_pending() {
        return;
    }
    let vma: *const u8 = M::get(vmf, ra_fn!(vmf_vma));
    let file: *const u8 = M::get(vma, ra_fn!(vma_file));
    if file.is_null() {
        return;
    }
    let mapping: *const u8 = M::get(file, ra_fn!(file_mapping));
    let (dev, ino) = mapping_file::<M>(mapping);
    let (index, last) = match range {
        Some(r) => r,
        None => {
            let pgoff: u64 = M::get(vmf, ra_fn!(vmf_pgoff));
            (pgoff, pgoff)
        }
    };
    crate::readahead::use_mapped(dev, ino, index, last);
}

/// `readahead:page_cache_sync_ra`'s fallback: the entry of `page_cache_sync_ra(ractl, req_count)`,
/// where the tracepoint is raised first thing.
#[fentry(function = "page_cache_sync_ra")]
pub fn readahead_sync_ra_fentry(ctx: FEntryContext) -> i32 {
    // Both arguments read first, at constant offsets from the context.
    let ractl: *const u8 = ctx.arg(0);
    let req_count: u64 = ctx.arg(1);
    on_decision_asked::<Plain>(ractl, false, req_count);
    0
}

/// `readahead:page_cache_async_ra`'s fallback: the entry of `page_cache_async_ra(ractl, folio,
/// req_count)`.
#[fentry(function = "page_cache_async_ra")]
pub fn readahead_async_ra_fentry(ctx: FEntryContext) -> i32 {
    on_decision::<Plain>(ctx.arg(0), true);
    0
}

/// A sync (or `is_async`) readahead decision on `ractl` (read with `M`), without the pages its
/// miss asked for: every page of its window counts as readahead.
#[inline(always)]
pub(crate) fn on_decision<M: Mem>(ractl: *const u8, is_async: bool) {
    on_decision_asked::<M>(ractl, is_async, 0);
}

/// A sync (or `is_async`) readahead decision on `ractl` (read with `M`) whose read miss asked for
/// `req_count` pages (0 for async readahead): those are demand, not readahead.
#[inline(always)]
pub(crate) fn on_decision_asked<M: Mem>(ractl: *const u8, is_async: bool, req_count: u64) {
    let Some((dev, ino, index, ra)) = ractl_file::<M>(ractl) else { return };
    let ra_pages: u32 = M::get(ra, ra_fn!(ra_ra_pages));
    // Its low 16 bits: a u16 since Linux 6.10, a u32 before (see the loader).
    let mmap_miss: u16 = M::get(ra, ra_fn!(ra_mmap_miss));
    let req_count = if is_async { 0 } else { req_count };
    on_ra_event(is_async, dev, ino, index, req_count, ra_pages, u32::from(mmap_miss));
}

/// `readahead:page_cache_ra_order`'s fallback: the entry of `page_cache_ra_order(ractl, ra, ...)`;
/// the window is `ra->size` pages from `readahead_index(ractl)`, as the tracepoint records it.
#[fentry(function = "page_cache_ra_order")]
pub fn readahead_ra_order_fentry(ctx: FEntryContext) -> i32 {
    ra_order::<Plain>(ctx.arg(0));
    0
}

/// `page_cache_ra_order(ractl, ...)` entered (`ractl` read with `M`).
#[inline(always)]
pub(crate) fn ra_order<M: Mem>(ractl: *const u8) {
    let Some((dev, ino, index, ra)) = ractl_file::<M>(ractl) else { return };
    let size: u32 = M::get(ra, ra_fn!(ra_size));
    let ra_pages: u32 = M::get(ra, ra_fn!(ra_ra_pages));
    on_order(dev, ino, index, size, ra_pages);
}

/// `readahead:page_cache_ra_unbounded`'s fallback: the entry of `page_cache_ra_unbounded(ractl,
/// nr_to_read, lookahead_size)`.
#[fentry(function = "page_cache_ra_unbounded")]
pub fn readahead_ra_unbounded_fentry(ctx: FEntryContext) -> i32 {
    // Both arguments read first, at constant offsets from the context.
    let ractl: *const u8 = ctx.arg(0);
    let nr: u64 = ctx.arg(1);
    ra_unbounded::<Plain>(ractl, nr);
    0
}

/// `page_cache_ra_unbounded(ractl, nr_to_read, ...)` entered (`ractl` read with `M`).
#[inline(always)]
pub(crate) fn ra_unbounded<M: Mem>(ractl: *const u8, nr: u64) {
    let Some((dev, ino, index, _)) = ractl_file::<M>(ractl) else { return };
    on_unbounded(dev, ino, index, nr);
}
