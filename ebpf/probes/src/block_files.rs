//! Completed block requests, rate-limited, to userspace (ioscope_common::block_files): the one
//! thing block-to-file mapping needs from the kernel. Called from `block_rq_complete` only, and
//! kept here so the block-layer programs stay as they are.

use aya_ebpf::{
    bindings::BPF_RB_NO_WAKEUP,
    macros::map,
    maps::{PerCpuArray, RingBuf},
};
use ioscope_common::block::{ReqInfo, REQ_SUBMITTER, RWBS_READ, RWBS_WRITE};
use ioscope_common::block_files::{admit, RqBucket, RqEvent, RqSampleConfig, BLOCK_RQ_RING_BYTES};

#[unsafe(no_mangle)]
static BLOCK_RQ_CONFIG: RqSampleConfig = RqSampleConfig::UNSET;

#[map]
static BLOCK_RQ_RING: RingBuf = RingBuf::with_byte_size(BLOCK_RQ_RING_BYTES, 0);
#[map]
static BLOCK_RQ_BUCKET: PerCpuArray<RqBucket> = PerCpuArray::with_max_entries(1, 0);

/// A request of `bytes` at (`dev`, `sector`) completed at `now_ns`; `req` is what block_io_start
/// recorded for it, when it was seen. Only reads and writes are sent (not flushes, discards).
#[inline(always)]
pub fn on_complete(now_ns: u64, dev: u32, sector: u64, bytes: u64, rwbs: u32, req: Option<&ReqInfo>) {
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
