//! Reading the kernel's own structs from BTF tracepoint programs.

/// A field of a kernel struct at `offset` from `base`, with a plain load. For pointers a BTF
/// tracepoint got from the kernel (its arguments and the pointers read from them) only: the
/// verifier knows their type and checks the access against the kernel's BTF, which needs the
/// offset to be a constant to it (the layouts are read-only globals, frozen before load), and
/// makes a faulting load read 0. The offsets come from the kernel's BTF at run time
/// (src/bpf/kernel_btf.rs), with each field's size checked by the loader.
#[inline(always)]
pub fn kernel_field<T: Copy>(base: *const u8, offset: u32) -> T {
    // SAFETY: see above.
    unsafe { core::ptr::read(base.wrapping_add(offset as usize).cast::<T>()) }
}

/// How a program reads kernel memory: [`Plain`] loads (BTF tracepoints, fentry/fexit: pointers the
/// verifier knows the type of) or [`Probe`] reads through `bpf_probe_read_kernel` (kprobes: their
/// arguments are plain numbers to the verifier). One body serves both.
pub trait Mem {
    fn get<T: Copy>(base: *const u8, offset: u32) -> T;

    /// A kernel object's address as a number that identifies it for the run (a map key): for a
    /// [`Plain`] pointer, its distance from `global` (the verifier lets a typed pointer become a
    /// number only that way); a [`Probe`] read's pointer is a number already.
    fn number(p: *const u8, global: *const u8) -> u64;
}

pub struct Plain;

impl Mem for Plain {
    #[inline(always)]
    fn get<T: Copy>(base: *const u8, offset: u32) -> T {
        kernel_field(base, offset)
    }

    #[inline(always)]
    fn number(p: *const u8, global: *const u8) -> u64 {
        (p as u64).wrapping_sub(global as u64)
    }
}

pub struct Probe;

impl Mem for Probe {
    /// A failed read gives zeros (a null pointer, a 0), as a faulting plain load does.
    #[inline(always)]
    fn get<T: Copy>(base: *const u8, offset: u32) -> T {
        // SAFETY: the helper copes with any address; zeros are a valid value of every T used
        // here (integers and pointers).
        unsafe {
            aya_ebpf::helpers::bpf_probe_read_kernel(base.wrapping_add(offset as usize).cast::<T>())
                .unwrap_or_else(|_| core::mem::zeroed())
        }
    }

    /// Not moved by a global: the verifier refuses arithmetic between a number it cannot bound
    /// and a map's address.
    #[inline(always)]
    fn number(p: *const u8, _global: *const u8) -> u64 {
        p as u64
    }
}

/// Counts one insert into a map in its insert counter (ioscope_common::inserts), after the insert.
#[inline(always)]
pub(crate) fn count_insert(counter: &aya_ebpf::maps::PerCpuArray<u64>) {
    if let Some(n) = counter.get_ptr_mut(0) {
        // SAFETY: this CPU's slot; tracing programs do not nest on one CPU.
        unsafe { *n = (*n).wrapping_add(1) };
    }
}
