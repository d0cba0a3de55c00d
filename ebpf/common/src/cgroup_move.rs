//! Processes moved to another cgroup without an exec (a shell writing its pid into
//! `cgroup.procs`, as systemd and container runtimes do before they exec; `cgclassify`; a
//! process manager moving a running service). The page-cache programs read a process's cgroup v2
//! id only when its entry is made, at exec and at a rename (ebpf/probes/src/page_cache.rs): one
//! program on `cgroup:cgroup_attach_task` gives a process that moves its new cgroup there and then
//! (ebpf/probes/src/cgroup_move.rs). Block I/O and sync calls read the cgroup at each request or
//! call and need nothing.
//!
//! The event is raised once per move, by the task that writes `cgroup.procs` (not necessarily the
//! one moved), with the moved thread-group leader's pid (`cgroup.threads` moves one thread: the
//! process's entry moves only when it is the leader), the destination's hierarchy id (`dst_root`:
//! 0 is cgroup v2's, every v1 hierarchy has its own), its id (the directory's inode number on v2,
//! a u64 since Linux 5.5) and the leader's comm.

/// Read-only global holding [`MoveLayout`], set by the loader before load.
pub const MOVE_LAYOUT_GLOBAL: &str = "CGROUP_MOVE_LAYOUT";

/// cgroup v2's hierarchy id (the default hierarchy's `hierarchy_id`, the `0::` of /proc/PID/cgroup).
pub const DFL_HIERARCHY_ID: i32 = 0;

/// Offsets of `cgroup:cgroup_attach_task`'s fields in its record (from the format file).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MoveLayout {
    /// 1 when the fields below are set.
    pub ok: u32,
    /// `int dst_root`.
    pub dst_root: u32,
    /// `u64 dst_id`.
    pub dst_id: u32,
    /// `int pid`.
    pub pid: u32,
    /// `__data_loc char[] comm`: a u32 whose low 16 bits are the string's offset in the record.
    pub comm: u32,
    pub _pad: u32,
}

impl MoveLayout {
    pub const UNSET: MoveLayout = MoveLayout { ok: 0, dst_root: 0, dst_id: 0, pid: 0, comm: 0, _pad: 0 };
}

/// The offset in the record of a `__data_loc` field's data.
#[inline(always)]
pub const fn data_loc_offset(loc: u32) -> u32 {
    loc & 0xffff
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], u32 fields only.
    unsafe impl aya::Pod for super::MoveLayout {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_data_loc() {
        assert_eq!(core::mem::size_of::<MoveLayout>(), 24);
        // offset 40, length 5 ("bash\0").
        assert_eq!(data_loc_offset(5 << 16 | 40), 40);
    }
}
