//! The read path's fallback on kernels before `filemap_get_pages()` (Linux 5.10, where one
//! function, `generic_file_buffered_read()`, did the whole buffered read): what
//! `filemap:mm_filemap_get_pages` (6.12+) or the fexit on `filemap_get_pages()` (page_cache.rs)
//! count, the pages of a read(2), taken from the read's return: its kiocb's position, which the
//! function has moved past the bytes it read. Userspace picks it (src/bpf/page_cache.rs,
//! FN_FALLBACKS) only where `filemap_get_pages()` is missing.

use aya_ebpf::{macros::fexit, programs::FExitContext};

use crate::kernel::{Mem, Plain};
use crate::page_cache::{fn_layout_configured, fn_read};

/// `generic_file_buffered_read(iocb, iter, written)` returns `written` (what a direct read before
/// it already did) plus the bytes it copied, or an error: the read's pages are the `ret - written`
/// bytes before `iocb->ki_pos`. The return value is read from the context (its slot after the
/// three arguments), not with `bpf_get_func_ret` (5.17+).
#[fexit(function = "generic_file_buffered_read")]
pub fn filemap_read_fexit(ctx: FExitContext) -> i32 {
    if !fn_layout_configured() {
        return 0;
    }
    buffered_read_done::<Plain>(ctx.arg(0), ctx.arg(2), ctx.arg(3));
    0
}

/// `generic_file_buffered_read(iocb, _, written)` returned `ret` (`iocb` read with `M`).
#[inline(always)]
pub(crate) fn buffered_read_done<M: Mem>(iocb: *const u8, written: i64, ret: i64) {
    let done = ret.wrapping_sub(written);
    if ret <= 0 || done <= 0 {
        return;
    }
    fn_read::<M>(iocb, done as u64, true);
}
