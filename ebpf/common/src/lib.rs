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
pub mod inserts;
pub mod iowait;
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

/// Where the current task's identity lies in the kernel's structs, from its BTF: what
/// `bpf_get_current_pid_tgid`, `bpf_get_current_comm` and `bpf_get_current_cgroup_id` return, read
/// with plain loads from `bpf_get_current_task_btf()` instead of a helper call each:
/// `task_struct.pid`, `.tgid` (u32), `.comm` (16 bytes), `.cgroups` (pointer); `css_set.dfl_cgrp`,
/// `cgroup.kn` (pointers); `kernfs_node.id` (u64), the cgroup id on the default (v2) hierarchy,
/// `task->cgroups->dfl_cgrp->kn->id`. Shared by the block and the sync-call layouts.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskLayout {
    pub pid: u32,
    pub tgid: u32,
    pub comm: u32,
    pub cgroups: u32,
    pub css_set_dfl_cgrp: u32,
    pub cgroup_kn: u32,
    pub kn_id: u32,
}

impl TaskLayout {
    pub const UNSET: TaskLayout =
        TaskLayout { pid: 0, tgid: 0, comm: 0, cgroups: 0, css_set_dfl_cgrp: 0, cgroup_kn: 0, kn_id: 0 };
}
