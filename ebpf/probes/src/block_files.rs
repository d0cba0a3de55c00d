//! Completed block requests, rate-limited, to userspace (ioscope_common::block_files): the one
//! thing block-to-file mapping needs from the kernel.
//!
//! Programs of their own on `block_rq_complete`, attached before the block layer's program there
//! (a tracepoint runs its programs in the order they were attached), so the request's slot still
//! holds its submitter. Inside `block_rq_complete` this code multiplied the paths the verifier
//! walks through the rest of that program (203,000 verified instructions there, where the two
//! programs now take 9,800 and 13,000; even an empty non-inlined call made 124,000): most of
//! ioscope's start-up. As a program of its own it costs one more program run per completion.

use aya_ebpf::{
    bindings::BPF_RB_NO_WAKEUP,
    macros::{btf_tracepoint, map, tracepoint},
    maps::{PerCpuArray, RingBuf},
    programs::{BtfTracePointContext, TracePointContext},
};

use crate::block::{btf_event, classic_complete_event, find, now, Event};
use ioscope_common::block::{REQ_SUBMITTER, RWBS_READ, RWBS_WRITE};
use ioscope_common::block_files::{admit, RqBucket, RqEvent, RqSampleConfig, BLOCK_RQ_RING_BYTES};

#[unsafe(no_mangle)]
static BLOCK_RQ_CONFIG: RqSampleConfig = RqSampleConfig::UNSET;

#[map]
static BLOCK_RQ_RING: RingBuf = RingBuf::with_byte_size(BLOCK_RQ_RING_BYTES, 0);
#[map]
static BLOCK_RQ_BUCKET: PerCpuArray<RqBucket> = PerCpuArray::with_max_entries(1, 0);

/// `TP_PROTO(struct request *rq, blk_status_t error, unsigned int nr_bytes)`, as
/// `block_rq_complete_btf` reads it; attached only beside the BTF block programs (same tags).
#[btf_tracepoint(function = "block_rq_complete")]
pub fn block_rq_files_btf(ctx: BtfTracePointContext) -> i32 {
    let nr_bytes: u32 = ctx.arg(2);
    if let Ok(e) = btf_event(&ctx, Some(nr_bytes)) {
        completed(&e);
    }
    0
}

/// The classic twin, beside the classic block programs.
#[tracepoint]
pub fn block_rq_files(ctx: TracePointContext) -> u32 {
    if let Some(e) = classic_complete_event(&ctx) {
        completed(&e);
    }
    0
}

/// The time of completion `tag`, for `block_rq_complete`'s program: the one this CPU's
/// [`completed`] read for it just before (this program is attached first), else the clock's.
/// Taken once: a later event of the same request reads the clock.
#[inline(always)]
pub(crate) fn completion_time(tag: u64) -> u64 {
    if let Some(b) = BLOCK_RQ_BUCKET.get_ptr_mut(0) {
        // SAFETY: this CPU's slot; see `completed`.
        let b = unsafe { &mut *b };
        if b.clock_tag == tag {
            b.clock_tag = 0;
            return b.clock_ns;
        }
    }
    now()
}

/// The request `e` completed now. Only reads and writes are sent (not flushes, discards), within
/// the rate; its slot (what block_io_start recorded for it: the submitter) is looked up only for
/// a request sent, most of them beyond the rate.
#[inline(always)]
fn completed(e: &Event) {
    let (dev, sector, bytes, rwbs) = (e.dev, e.sector, e.bytes, e.rwbs.0);
    // SAFETY: a plain read of a global the loader may have rewritten before load.
    let c = unsafe { core::ptr::read_volatile(&raw const BLOCK_RQ_CONFIG) };
    if c.enabled == 0 {
        return;
    }
    let Some(b) = BLOCK_RQ_BUCKET.get_ptr_mut(0) else { return };
    // SAFETY: this CPU's slot; tracing programs do not nest on one CPU.
    let b = unsafe { &mut *b };
    if bytes == 0 || rwbs & (RWBS_READ | RWBS_WRITE) == 0 {
        // No time for block_rq_complete to take: whatever this CPU left here is another
        // request's.
        b.clock_tag = 0;
        return;
    }
    let t = now();
    b.clock_tag = e.tag;
    b.clock_ns = t;
    if !admit(b, t, c.cost_ns, c.burst_ns) {
        b.rate_dropped += 1;
        return;
    }
    let Some(mut slot) = BLOCK_RQ_RING.reserve::<RqEvent>(0) else {
        b.ring_dropped += 1;
        return;
    };
    let (tgid, comm) = match find(e.tag) {
        Some(s) if s.info.flags & REQ_SUBMITTER != 0 => (s.info.tgid, s.info.comm),
        _ => (0, [0; 16]),
    };
    slot.write(RqEvent { dev, tgid, sector, nr_sectors: (bytes >> 9) as u32, rwbs, comm });
    // Userspace drains the ring once per interval: no wakeup needed.
    slot.submit(u64::from(BPF_RB_NO_WAKEUP));
    b.emitted += 1;
}
