//! `block:block_rq_issue`: a request handed to the device driver. Counts requests and bytes per
//! device (kernel dev_t) and direction into a per-CPU hash map that userspace sums.

use aya_ebpf::{
    bindings::BPF_NOEXIST, macros::map, macros::tracepoint, maps::PerCpuHashMap, programs::TracePointContext,
};
use ioscope_common::{Direction, RqIssueCounters, RqIssueLayout, RQ_ISSUE_MAX_DEVICES, RWBS_PREFIX_LEN};

/// Field offsets, written by the loader from the tracefs format file (they differ between kernels).
/// Read with `read_volatile` so the compiler cannot fold the compiled-in `UNSET` value.
#[unsafe(no_mangle)]
static RQ_ISSUE_LAYOUT: RqIssueLayout = RqIssueLayout::UNSET;

#[map]
static RQ_ISSUE: PerCpuHashMap<u32, RqIssueCounters> =
    PerCpuHashMap::with_max_entries(RQ_ISSUE_MAX_DEVICES, 0);

#[tracepoint]
pub fn block_rq_issue(ctx: TracePointContext) -> u32 {
    // Always 0: a non-zero return would also have the kernel record the event into the perf
    // buffer, which nobody reads. An error means one request went uncounted (e.g. the map is full).
    try_block_rq_issue(&ctx).unwrap_or(0)
}

fn try_block_rq_issue(ctx: &TracePointContext) -> Result<u32, i64> {
    // SAFETY: a plain read of a static the loader may have rewritten before load.
    let layout = unsafe { core::ptr::read_volatile(&raw const RQ_ISSUE_LAYOUT) };
    if layout.configured == 0 {
        return Ok(0);
    }
    // SAFETY: read_at goes through bpf_probe_read_kernel, which copes with any offset; the offsets
    // come from this kernel's own format file.
    let dev: u32 = unsafe { ctx.read_at(layout.dev_offset as usize) }.map_err(i64::from)?;
    let bytes: u32 = unsafe { ctx.read_at(layout.bytes_offset as usize) }.map_err(i64::from)?;
    let rwbs: [u8; RWBS_PREFIX_LEN] =
        unsafe { ctx.read_at(layout.rwbs_offset as usize) }.map_err(i64::from)?;
    let direction = Direction::from_rwbs(rwbs);

    // Per-CPU map: this CPU's slot is ours alone while the program runs (tracing programs do not
    // nest on one CPU), so plain adds are exact.
    if let Some(counters) = RQ_ISSUE.get_ptr_mut(dev) {
        // SAFETY: a valid pointer into this CPU's value for `dev`.
        unsafe { (*counters).add(direction, u64::from(bytes)) };
        return Ok(0);
    }
    let mut first = RqIssueCounters::default();
    first.add(direction, u64::from(bytes));
    // NOEXIST: if another CPU created the entry in between, fall back to adding to ours (a new
    // percpu element from a program is zero on every CPU but the inserting one).
    if RQ_ISSUE.insert(dev, first, u64::from(BPF_NOEXIST)).is_err() {
        let counters = RQ_ISSUE.get_ptr_mut(dev).ok_or(-1i64)?;
        // SAFETY: as above.
        unsafe { (*counters).add(direction, u64::from(bytes)) };
    }
    Ok(0)
}
