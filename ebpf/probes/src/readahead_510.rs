//! The readahead fallbacks before `readahead_control.ra` (Linux 5.10), where the `file_ra_state`
//! is the second argument of `page_cache_sync_ra(ractl, ra, req_count)` and
//! `page_cache_async_ra(ractl, ra, page, req_count)`, and where `page_cache_ra_order()` does not
//! exist: a window is handed to `do_page_cache_ra(ractl, nr_to_read, lookahead_size)`. Each
//! program reads what the 6.18 tracepoint's record holds and calls the tracepoint programs' code
//! (crate::readahead), as crate::readahead_fn does on 6.1 to 6.17. `page_cache_ra_unbounded()`
//! has the same signature there: its fallback is readahead_fn's. Offsets:
//! ioscope_common::readahead_510; why this measures the same thing: ebpf/README.md.

use aya_ebpf::{macros::fentry, programs::FEntryContext};
use ioscope_common::readahead_510::Ra510Layout;

use crate::kernel::{Mem, Plain};
use crate::readahead::{on_order, on_ra_event};
use crate::readahead_fn::ractl_file;

#[unsafe(no_mangle)]
static RA_510_LAYOUT: Ra510Layout = Ra510Layout::UNSET;

/// One field of RA_510_LAYOUT (volatile: the loader rewrites it before load).
macro_rules! ra_510 {
    ($field:ident) => {
        // SAFETY: a read-only global the loader fills before load.
        unsafe { core::ptr::read_volatile(&raw const RA_510_LAYOUT.$field) }
    };
}

/// `readahead:page_cache_sync_ra`'s fallback on 5.10: the entry of `page_cache_sync_ra(ractl, ra,
/// req_count)` (the tracepoint is raised first thing in its successor of the same name).
#[fentry(function = "page_cache_sync_ra")]
pub fn readahead_sync_ra_510(ctx: FEntryContext) -> i32 {
    let req_count: u64 = ctx.arg(2);
    on_decision::<Plain>(ctx.arg(0), ctx.arg(1), false, req_count);
    0
}

/// `readahead:page_cache_async_ra`'s fallback on 5.10: the entry of `page_cache_async_ra(ractl,
/// ra, page, req_count)`.
#[fentry(function = "page_cache_async_ra")]
pub fn readahead_async_ra_510(ctx: FEntryContext) -> i32 {
    on_decision::<Plain>(ctx.arg(0), ctx.arg(1), true, 0);
    0
}

/// A sync (or `is_async`) readahead decision on `ractl` with the state `ra` (both read with `M`;
/// the kprobe variants in crate::kprobe_fallbacks call it with [`crate::kernel::Probe`]).
#[inline(always)]
pub(crate) fn on_decision<M: Mem>(ractl: *const u8, ra: *const u8, is_async: bool, req_count: u64) {
    if ra_510!(configured) == 0 {
        return;
    }
    let Some((dev, ino, index, _)) = ractl_file::<M>(ractl) else { return };
    let ra_pages: u32 = M::get(ra, ra_510!(ra_ra_pages));
    // Its low 16 bits, as the later kernels' fallbacks read it.
    let mmap_miss: u16 = M::get(ra, ra_510!(ra_mmap_miss));
    on_ra_event(is_async, dev, ino, index, req_count, ra_pages, u32::from(mmap_miss));
}

/// `readahead:page_cache_ra_order`'s fallback on 5.10: the entry of `do_page_cache_ra(ractl,
/// nr_to_read, lookahead_size)`. Where 6.1+ call `page_cache_ra_order(ractl, ra, order)` with the
/// window just set in `ra` (`ondemand_readahead()`'s end, mmap read-around in
/// `do_sync_mmap_readahead()`), 5.10 calls this with `ractl->_index = ra->start` and
/// `nr_to_read = ra->size`; its other callers (`force_page_cache_ra()`, a small random read)
/// pass a range that is not the file's window, raise no `page_cache_ra_order` on 6.1+ either,
/// and are left to the unbounded read's program. The window is the file's `f_ra`: the state both
/// window setters were given. A readahead without a file (`ractl->file` NULL) has no window here.
#[fentry(function = "do_page_cache_ra")]
pub fn readahead_ra_order_510(ctx: FEntryContext) -> i32 {
    // Both arguments read first, at constant offsets from the context.
    let ractl: *const u8 = ctx.arg(0);
    let nr: u64 = ctx.arg(1);
    ra_order::<Plain>(ractl, nr);
    0
}

/// `do_page_cache_ra(ractl, nr_to_read, ...)` entered (`ractl` read with `M`): a window when it is
/// the file's `f_ra` (see readahead_ra_order_510).
#[inline(always)]
pub(crate) fn ra_order<M: Mem>(ractl: *const u8, nr: u64) {
    if ra_510!(configured) == 0 {
        return;
    }
    let file: *const u8 = M::get(ractl, ra_510!(ractl_file));
    if file.is_null() {
        return;
    }
    let Some((dev, ino, index, _)) = ractl_file::<M>(ractl) else { return };
    let start: u64 = M::get(file, ra_510!(file_ra_start));
    let size: u32 = M::get(file, ra_510!(file_ra_size));
    if start != index || u64::from(size) != nr || size == 0 {
        return;
    }
    let ra_pages: u32 = M::get(file, ra_510!(file_ra_pages));
    on_order(dev, ino, index, size, ra_pages);
}
