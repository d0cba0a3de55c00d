//! ioscope's eBPF programs. Each `#[tracepoint]` entry only adapts the return value; the work is in
//! a `try_*` function returning `Result` so `?` can be used on every fallible helper call.
#![no_std]
#![no_main]
// The atomic add for the shared in-flight counters (block.rs): the bpf target has no AtomicU64 RMW.
#![allow(internal_features)]
#![feature(core_intrinsics)]

mod block;
mod block_claim;
mod block_files;
mod cgroup_move;
mod file_names;
mod files;
mod iowait;
mod kernel;
mod kprobe_fallbacks;
mod page_cache;
mod read_fn;
mod readahead;
mod readahead_510;
mod readahead_fn;
mod syncs;
mod syncs_510;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier rejects any program that could reach here, so this loop is never run.
    loop {}
}

/// GPL: bpf_probe_read_kernel and other tracing helpers are only offered to GPL programs.
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";

/// The architecture whose `struct pt_regs` the kprobe programs read their arguments from (aya-ebpf
/// picks the register layout by `--cfg bpf_target_arch`, which `cargo xtask ebpf` sets per object),
/// NUL-padded. ioscope reads this section before loading and refuses an object built for another
/// architecture than its own: its kprobes would read the wrong registers (src/bpf/arch.rs).
#[unsafe(link_section = "ioscope_arch")]
#[unsafe(no_mangle)]
static IOSCOPE_ARCH: [u8; 16] = arch_name();

const fn arch_name() -> [u8; 16] {
    #[cfg(bpf_target_arch = "x86_64")]
    let name = b"x86_64";
    #[cfg(bpf_target_arch = "aarch64")]
    let name = b"aarch64";
    #[cfg(not(any(bpf_target_arch = "x86_64", bpf_target_arch = "aarch64")))]
    let name = b"unknown";
    let mut out = [0u8; 16];
    let mut i = 0;
    while i < name.len() {
        out[i] = name[i];
        i += 1;
    }
    out
}
