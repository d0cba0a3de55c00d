//! io_uring sync calls where `io_uring:io_uring_complete` has no `req` (Debian's 5.10;
//! ioscope_common::syncs_510): the submission and the completion are matched by the request's
//! ring and `user_data`, which both events carry. The rest is crate::syncs' code: the same maps,
//! start and finish; the file is the request's (`req->file`, resolved before the submission event).

use aya_ebpf::{macros::tracepoint, programs::TracePointContext};
use ioscope_common::syncs::uring_kind;
use ioscope_common::syncs_510::{uring_key, Uring510Layout};

use crate::kernel::{Mem, Probe};
use crate::syncs::{file_id, uring_complete, uring_pending, uring_start};

#[unsafe(no_mangle)]
static URING_510_LAYOUT: Uring510Layout = Uring510Layout::UNSET;

#[inline(always)]
fn layout() -> Uring510Layout {
    // SAFETY: a read-only global, frozen before load (see page_cache::layout()).
    unsafe { core::ptr::read_volatile(&raw const URING_510_LAYOUT) }
}

/// `io_uring:io_uring_submit_sqe` (5.10): an fsync or sync_file_range request starts.
#[tracepoint]
pub fn sync_uring_submit_510(ctx: TracePointContext) -> u32 {
    let l = layout();
    if l.configured == 0 {
        return 0;
    }
    // SAFETY: offsets from the format file.
    let Ok(opcode) = (unsafe { ctx.read_at::<u8>(l.submit_opcode as usize) }) else { return 0 };
    let Some(kind) = uring_kind(u32::from(opcode)) else { return 0 };
    // SAFETY: as above.
    let (Ok(ring), Ok(user_data), Ok(req)) = (unsafe {
        (
            ctx.read_at::<u64>(l.submit_ctx as usize),
            ctx.read_at::<u64>(l.submit_user_data as usize),
            ctx.read_at::<u64>(l.submit_req as usize),
        )
    }) else {
        return 0;
    };
    let file = if l.req_file_plus_one != 0 {
        file_id(Probe::get(req as *const u8, l.req_file_plus_one - 1))
    } else {
        (0, 0)
    };
    uring_start(uring_key(ring, user_data), kind, file);
    0
}

/// `io_uring:io_uring_complete` (5.10): every completion of every ring; a sync request's ends its
/// call.
#[tracepoint]
pub fn sync_uring_complete_510(ctx: TracePointContext) -> u32 {
    let Some(p) = uring_pending() else { return 0 };
    let l = layout();
    // SAFETY: offsets from the format file.
    let (Ok(ring), Ok(user_data)) = (unsafe {
        (ctx.read_at::<u64>(l.complete_ctx as usize), ctx.read_at::<u64>(l.complete_user_data as usize))
    }) else {
        return 0;
    };
    uring_complete(uring_key(ring, user_data), p);
    0
}
