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
use ioscope_common::block::{ReqInfo, REQ_SUBMITTER, RWBS_READ, RWBS_WRITE};
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

#[inline(always)]
fn completed(e: &Event) {
    let req = find(e.tag).map(|s| s.info);
    on_complete(now(), e.dev, e.sector, e.bytes, e.rwbs.0, req.as_ref());
}

/// A request of `bytes` at (`dev`, `sector`) completed at `now_ns`; `req` is what block_io_start
/// recorded for it, when it was seen. Only reads and writes are sent (not flushes, discards).
#[inline(always)]
fn on_complete(now_ns: u64, dev: u32, sector: u64, bytes: u64, rwbs: u32, req: Option<&ReqInfo>) {
    // SAFETY: a plain read of a global the loader may have rewritten before load.
    let c = unsafe { core::ptr::read_volatile(&raw const BLOCK_RQ_CONFIG) };
    if c.enabled == 0 || bytes == 0 || rwbs & (RWBS_READ | RWBS_WRITE) == 0 {
        return;
    }
    let Some(b) = BLOCK_RQ_BUCKET.get_ptr_mut(0) else { return };
    // SAFETY: this CPU's slot; tracing programs do not nest on one CPU.
    let b = unsafe { &mut *b };
    if !admit(b, now_ns, c.cost_ns, c.burst_ns) {
        b.rate_dropped += 1;
        return;
    }
    let Some(mut slot) = BLOCK_RQ_RING.reserve::<RqEvent>(0) else {
        b.ring_dropped += 1;
        return;
    };
    let (tgid, comm) = match req {
        Some(r) if r.flags & REQ_SUBMITTER != 0 => (r.tgid, r.comm),
        _ => (0, [0; 16]),
    };
    slot.write(RqEvent { dev, tgid, sector, nr_sectors: (bytes >> 9) as u32, rwbs, comm });
    // Userspace drains the ring once per interval: no wakeup needed.
    slot.submit(u64::from(BPF_RB_NO_WAKEUP));
    b.emitted += 1;
}
