//! The eBPF object embedded in ioscope: the one of the architecture being built.

/// The compiled kernel programs (see ebpf/probes), built for this architecture's `pt_regs` (see
/// arch). Aligned: aya parses it as an ELF in place.
#[cfg(not(target_arch = "aarch64"))]
pub(super) static OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/ioscope.bpf.o"));
#[cfg(target_arch = "aarch64")]
pub(super) static OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/ioscope-aarch64.bpf.o"));
