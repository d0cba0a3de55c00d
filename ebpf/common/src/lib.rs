//! Types shared by ioscope's kernel programs and its userspace. `#![no_std]`, `#[repr(C)]`.
//!
//! Everything here has one layout on both sides of the map/global boundary: the kernel program
//! (built for `bpfel-unknown-none`) writes it, userspace (with the `user` feature, through aya)
//! reads it. Only fixed-size integer fields, explicit padding, no enums in the ABI.
#![no_std]

pub mod block;
pub mod block_claim;
pub mod block_files;
pub mod cgroup_move;
pub mod fallback;
pub mod file_names;
pub mod files;
pub mod page_cache;
pub mod readahead;
pub mod readahead_510;
pub mod readahead_fn;
pub mod syncs;
pub mod syncs_510;

/// Bits of a kernel-internal `dev_t` that hold the minor number (include/linux/kdev_t.h,
/// MINORBITS). Tracepoints report this internal form, not the userspace encoding of `stat(2)`.
pub const KERNEL_MINOR_BITS: u32 = 20;

/// Splits a kernel-internal `dev_t` (`major << 20 | minor`) into (major, minor).
#[inline(always)]
pub const fn kernel_dev_major_minor(dev: u32) -> (u32, u32) {
    (dev >> KERNEL_MINOR_BITS, dev & ((1 << KERNEL_MINOR_BITS) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_dev_t_splits_at_bit_20() {
        // 7:3 is /dev/loop3; 259:1 an NVMe partition; minor above 255 needs the wide field.
        assert_eq!(kernel_dev_major_minor((7 << 20) | 3), (7, 3));
        assert_eq!(kernel_dev_major_minor((259 << 20) | 1), (259, 1));
        assert_eq!(kernel_dev_major_minor((8 << 20) | 0xfffff), (8, 0xfffff));
    }
}
