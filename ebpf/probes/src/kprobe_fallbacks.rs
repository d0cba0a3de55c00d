//! kprobe and kretprobe variants of the fentry/fexit fallbacks (page_cache.rs, read_fn.rs,
//! readahead_fn.rs, readahead_510.rs, files.rs), for kernels that have kprobes but refuse fentry/fexit (no BPF trampoline:
//! arm64 before 6.0, kernels built without it, or a function the trampoline cannot take).
//! Userspace attaches them only when the fentry/fexit program is refused (src/bpf/kfunc.rs).
//!
//! Each runs the fentry/fexit program's own body, with the kernel's memory read through
//! `bpf_probe_read_kernel` ([`Probe`]): a kprobe's arguments are plain numbers to the verifier.
//! A kretprobe sees only the return value: the entry's arguments are kept in [`KPROBE_ARGS`],
//! keyed by the thread (`pid_tgid`), by a kprobe on the same function's entry, and taken back at
//! its return.

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid,
    macros::{kprobe, kretprobe, map},
    maps::LruHashMap,
    programs::{ProbeContext, RetProbeContext},
};

use crate::files::on_sync_ra;
use crate::kernel::Probe;
use crate::page_cache::{fault, fn_layout_configured, get_pages_done, map_pages};
use crate::read_fn::buffered_read_done;
use crate::readahead_510;
use crate::readahead_fn::{on_decision, on_decision_asked, ra_order, ra_unbounded};

/// Threads inside a function with a kretprobe: its first two arguments as the entry saw them.
/// LRU: a return the kernel missed (more threads inside than kretprobe instances) leaves an entry
/// that is pushed out, never a full map.
#[map]
static KPROBE_ARGS: LruHashMap<u64, [u64; 2]> = LruHashMap::with_max_entries(4096, 0);

/// Keeps the current thread's first two arguments for its return.
#[inline(always)]
fn keep(ctx: &ProbeContext) {
    let (Some(a), Some(b)) = (ctx.arg::<u64>(0), ctx.arg::<u64>(1)) else { return };
    let _ = KPROBE_ARGS.insert(&bpf_get_current_pid_tgid(), &[a, b], 0);
}

/// The current thread's arguments as its entry kept them, forgotten.
#[inline(always)]
fn take() -> Option<[u64; 2]> {
    let key = bpf_get_current_pid_tgid();
    // SAFETY: a copy out of the map's value, made before the entry is removed.
    let args = unsafe { KPROBE_ARGS.get(&key) }.copied()?;
    let _ = KPROBE_ARGS.remove(&key);
    Some(args)
}

/// The entry of `filemap_get_pages(iocb, count or iter, ...)`: its arguments kept.
#[kprobe(function = "filemap_get_pages")]
pub fn filemap_get_pages_kprobe(ctx: ProbeContext) -> u32 {
    if fn_layout_configured() {
        keep(&ctx);
    }
    0
}

/// `filemap_get_pages_fexit`'s variant: its return, when 0, counts the read the entry saw.
#[kretprobe(function = "filemap_get_pages")]
pub fn filemap_get_pages_kretprobe(ctx: RetProbeContext) -> u32 {
    let Some([iocb, second]) = take() else { return 0 };
    if ctx.ret::<i32>() != 0 {
        return 0;
    }
    get_pages_done::<Probe>(iocb as *const u8, second as *const u8);
    0
}

/// The entry of `generic_file_buffered_read(iocb, iter, written)` (5.10): `iocb` kept, and
/// `written` (the third argument) in the second slot.
#[kprobe(function = "generic_file_buffered_read")]
pub fn filemap_read_kprobe(ctx: ProbeContext) -> u32 {
    if !fn_layout_configured() {
        return 0;
    }
    let (Some(iocb), Some(written)) = (ctx.arg::<u64>(0), ctx.arg::<u64>(2)) else { return 0 };
    let _ = KPROBE_ARGS.insert(&bpf_get_current_pid_tgid(), &[iocb, written], 0);
    0
}

/// `filemap_read_fexit`'s variant: the read's return.
#[kretprobe(function = "generic_file_buffered_read")]
pub fn filemap_read_kretprobe(ctx: RetProbeContext) -> u32 {
    let Some([iocb, written]) = take() else { return 0 };
    buffered_read_done::<Probe>(iocb as *const u8, written as i64, ctx.ret::<i64>());
    0
}

/// `filemap_map_pages_fentry`'s variant.
#[kprobe(function = "filemap_map_pages")]
pub fn filemap_map_pages_kprobe(ctx: ProbeContext) -> u32 {
    let (Some(vmf), Some(index), Some(last)) = (ctx.arg::<u64>(0), ctx.arg::<u64>(1), ctx.arg::<u64>(2))
    else {
        return 0;
    };
    map_pages::<Probe>(vmf as *const u8, index, last);
    0
}

/// `filemap_fault_fentry`'s variant.
#[kprobe(function = "filemap_fault")]
pub fn filemap_fault_kprobe(ctx: ProbeContext) -> u32 {
    let Some(vmf) = ctx.arg::<u64>(0) else { return 0 };
    fault::<Probe>(vmf as *const u8);
    0
}

/// `readahead_sync_ra_fentry`'s variant.
#[kprobe(function = "page_cache_sync_ra")]
pub fn readahead_sync_ra_kprobe(ctx: ProbeContext) -> u32 {
    let (Some(ractl), Some(req_count)) = (ctx.arg::<u64>(0), ctx.arg::<u64>(1)) else { return 0 };
    on_decision_asked::<Probe>(ractl as *const u8, false, req_count);
    0
}

/// `readahead_async_ra_fentry`'s variant.
#[kprobe(function = "page_cache_async_ra")]
pub fn readahead_async_ra_kprobe(ctx: ProbeContext) -> u32 {
    let Some(ractl) = ctx.arg::<u64>(0) else { return 0 };
    on_decision::<Probe>(ractl as *const u8, true);
    0
}

/// `readahead_ra_order_fentry`'s variant.
#[kprobe(function = "page_cache_ra_order")]
pub fn readahead_ra_order_kprobe(ctx: ProbeContext) -> u32 {
    let Some(ractl) = ctx.arg::<u64>(0) else { return 0 };
    ra_order::<Probe>(ractl as *const u8);
    0
}

/// `readahead_ra_unbounded_fentry`'s variant.
#[kprobe(function = "page_cache_ra_unbounded")]
pub fn readahead_ra_unbounded_kprobe(ctx: ProbeContext) -> u32 {
    let (Some(ractl), Some(nr)) = (ctx.arg::<u64>(0), ctx.arg::<u64>(1)) else { return 0 };
    ra_unbounded::<Probe>(ractl as *const u8, nr);
    0
}

/// `readahead_sync_ra_510`'s variant (5.10): `page_cache_sync_ra(ractl, ra, req_count)`.
#[kprobe(function = "page_cache_sync_ra")]
pub fn readahead_sync_ra_510_kprobe(ctx: ProbeContext) -> u32 {
    let (Some(ractl), Some(ra), Some(req_count)) = (ctx.arg::<u64>(0), ctx.arg::<u64>(1), ctx.arg::<u64>(2))
    else {
        return 0;
    };
    readahead_510::on_decision::<Probe>(ractl as *const u8, ra as *const u8, false, req_count);
    0
}

/// `readahead_async_ra_510`'s variant (5.10): `page_cache_async_ra(ractl, ra, page, req_count)`.
#[kprobe(function = "page_cache_async_ra")]
pub fn readahead_async_ra_510_kprobe(ctx: ProbeContext) -> u32 {
    let (Some(ractl), Some(ra)) = (ctx.arg::<u64>(0), ctx.arg::<u64>(1)) else { return 0 };
    readahead_510::on_decision::<Probe>(ractl as *const u8, ra as *const u8, true, 0);
    0
}

/// `readahead_ra_order_510`'s variant (5.10): `do_page_cache_ra(ractl, nr_to_read, ...)`.
#[kprobe(function = "do_page_cache_ra")]
pub fn readahead_ra_order_510_kprobe(ctx: ProbeContext) -> u32 {
    let (Some(ractl), Some(nr)) = (ctx.arg::<u64>(0), ctx.arg::<u64>(1)) else { return 0 };
    readahead_510::ra_order::<Probe>(ractl as *const u8, nr);
    0
}

/// `file_sync_ra_fentry`'s variant: `page_cache_sync_ra(ractl, req_count)` (6.1+).
#[kprobe(function = "page_cache_sync_ra")]
pub fn file_sync_ra_kprobe(ctx: ProbeContext) -> u32 {
    let (Some(ractl), Some(req_count)) = (ctx.arg::<u64>(0), ctx.arg::<u64>(1)) else { return 0 };
    on_sync_ra::<Probe>(ractl as *const u8, req_count);
    0
}

/// `file_sync_ra_510`'s variant (5.10): `page_cache_sync_ra(ractl, ra, req_count)`.
#[kprobe(function = "page_cache_sync_ra")]
pub fn file_sync_ra_510_kprobe(ctx: ProbeContext) -> u32 {
    let (Some(ractl), Some(req_count)) = (ctx.arg::<u64>(0), ctx.arg::<u64>(2)) else { return 0 };
    on_sync_ra::<Probe>(ractl as *const u8, req_count);
    0
}
