//! Sync calls (`fsync`, `fdatasync`, `sync_file_range`, `msync(MS_SYNC)`, `syncfs`, `sync`, and
//! io_uring's fsync and sync_file_range): per (process, call, file), how many, how long (total,
//! max, log2 histogram in µs), and the bytes the call itself wrote back; and the calls still
//! running, with their start, so a long call shows while it runs.
//!
//! Programs (ebpf/probes/src/syncs.rs): one on every `syscalls:sys_enter_*` of the six calls and
//! one on every `sys_exit_*` (the syscall number in the record tells which call it is), and one
//! each on `io_uring:io_uring_submit_req` and `io_uring:io_uring_complete`.

use crate::block::HIST_BUCKETS;

/// Per-CPU LRU hash map: [`SyncKey`] → [`SyncStats`], cumulative.
pub const SYNC_STATS_MAP: &str = "SYNC_STATS";
/// Per-CPU array of one [`SyncMemo`].
pub const SYNC_MEMO_MAP: &str = "SYNC_MEMO";
/// LRU hash map: thread id (a syscall) or io_uring request address → [`SyncInFlight`].
pub const SYNC_INFLIGHT_MAP: &str = "SYNC_INFLIGHT";
/// Per-CPU array of one u64: SYNC_INFLIGHT's inserts, counted after each (see [`crate::inserts`]).
pub const SYNC_INFLIGHT_INSERTS_MAP: &str = "SYNC_INFLIGHT_INSERTS";
/// Memory-mappable array of [`SyncSlot`]: the system calls running now, one slot per thread id
/// (a thread whose slot another thread holds goes to [`SYNC_INFLIGHT_MAP`]).
pub const SYNC_SLOTS_MAP: &str = "SYNC_SLOTS";
/// Read-only global holding [`SyncLayout`], set by the loader before load.
pub const SYNC_LAYOUT_GLOBAL: &str = "SYNC_LAYOUT";

pub const SYNC_MAX_ENTRIES: u32 = 4096;
pub const SYNC_INFLIGHT_MAX: u32 = 4096;
/// Slots of [`SYNC_SLOTS_MAP`] (a power of two).
pub const SYNC_SLOTS_MAX: u32 = 1024;
/// The entry program's twin for kernels whose BPF has no compare-and-exchange (before 5.12) or
/// no `bpf_get_current_task_btf` (before 5.11): every call in [`SYNC_INFLIGHT_MAP`].
pub const SYNC_ENTER_NOCAS: &str = "sync_enter_nocas";

/// The calls, as [`SyncKey::kind`].
pub const SYNC_FSYNC: u32 = 0;
pub const SYNC_FDATASYNC: u32 = 1;
pub const SYNC_FILE_RANGE: u32 = 2;
pub const SYNC_MSYNC: u32 = 3;
pub const SYNC_SYNCFS: u32 = 4;
pub const SYNC_SYNC: u32 = 5;
pub const SYNC_URING_FSYNC: u32 = 6;
pub const SYNC_URING_FILE_RANGE: u32 = 7;
/// The system calls traced (the first six kinds), in kind order.
pub const SYNC_SYSCALLS: usize = 6;
pub const SYNC_KINDS: usize = 8;

/// The call's name as users know it.
pub const fn kind_name(kind: u32) -> &'static str {
    match kind {
        SYNC_FSYNC => "fsync",
        SYNC_FDATASYNC => "fdatasync",
        SYNC_FILE_RANGE => "sync_file_range",
        SYNC_MSYNC => "msync",
        SYNC_SYNCFS => "syncfs",
        SYNC_SYNC => "sync",
        SYNC_URING_FSYNC => "io_uring fsync",
        SYNC_URING_FILE_RANGE => "io_uring sync_file_range",
        _ => "?",
    }
}

/// The tracepoint event names of the system calls (`sys_enter_<name>`, `sys_exit_<name>`).
pub const SYSCALL_EVENTS: [&str; SYNC_SYSCALLS] =
    ["fsync", "fdatasync", "sync_file_range", "msync", "syncfs", "sync"];

/// io_uring opcodes (include/uapi/linux/io_uring.h, stable ABI).
pub const IORING_OP_FSYNC: u32 = 3;
pub const IORING_OP_SYNC_FILE_RANGE: u32 = 8;
/// `msync`'s MS_SYNC flag (MS_ASYNC calls start no I/O and are not counted).
pub const MS_SYNC: u64 = 4;
/// An io_uring request's REQ_F_FIXED_FILE (IOSQE_FIXED_FILE_BIT 0): its fd indexes the ring's
/// registered files, not the task's table.
pub const REQ_F_FIXED_FILE: u32 = 1;

/// A (process, call, file). The file is its filesystem's `s_dev` (kernel encoding) and inode;
/// both 0 when the call has none (`sync`, `msync`, an io_uring registered file, or the fd could
/// not be read).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SyncKey {
    pub tgid: u32,
    pub kind: u32,
    pub dev: u32,
    pub _pad: u32,
    pub ino: u64,
}

/// Completed calls of one key on one CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncStats {
    pub calls: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Bytes the filesystem wrote back in the calling thread while the calls ran.
    pub written_bytes: u64,
    /// The cgroup v2 id of the caller at its last call.
    pub cgroup_id: u64,
    pub comm: [u8; 16],
    /// Latency, µs, log2 buckets (crate::block::log2_bucket).
    pub hist: [u64; HIST_BUCKETS],
}

/// Calls of `key` completed on this CPU and not yet added to its SYNC_STATS entry: while the calls
/// completing on a CPU are of one (process, call, file), as a process syncing one file makes them,
/// they are counted here (an array's value: no hash lookup per call); the first call of another
/// key moves them to the map. Userspace counts a memo as one more CPU's value of its key.
/// Pending when `stats.calls` is not 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncMemo {
    pub key: SyncKey,
    pub stats: SyncStats,
}

impl Default for SyncStats {
    fn default() -> Self {
        SyncStats {
            calls: 0,
            total_ns: 0,
            max_ns: 0,
            written_bytes: 0,
            cgroup_id: 0,
            comm: [0; 16],
            hist: [0; HIST_BUCKETS],
        }
    }
}

/// A call in progress.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncInFlight {
    /// CLOCK_MONOTONIC at the call's start (bpf_ktime_get_ns), ns.
    pub start_ns: u64,
    pub written_bytes: u64,
    pub cgroup_id: u64,
    pub ino: u64,
    pub dev: u32,
    pub kind: u32,
    pub tgid: u32,
    pub tid: u32,
    pub comm: [u8; 16],
}

/// A system call running in thread `key` (0: a free slot). `call.start_ns` is 0 while the slot is
/// being filled or emptied: the program claims `key` (compare-and-exchange from 0), writes the
/// call and its start last; at the exit it zeroes the start, then the key. So a reader that sees
/// the same non-zero key and start before and after copying the call has a whole one.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncSlot {
    pub key: u64,
    pub call: SyncInFlight,
}

/// The slot of thread id `key` in [`SYNC_SLOTS_MAP`]: thread ids are handed out in sequence, so
/// their low bits spread them.
#[inline(always)]
pub const fn sync_slot(key: u64) -> u32 {
    (key as u32) & (SYNC_SLOTS_MAX - 1)
}

/// What the programs need to know, from tracefs and the kernel's BTF.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncLayout {
    /// The syscall number of each traced call (SYSCALL_EVENTS order); u32::MAX when not traced.
    pub nr: [u32; SYNC_SYSCALLS],
    /// The fd's file can be found: `task_struct.files`, `files_struct.fdt`, `fdtable.max_fds`,
    /// `fdtable.fd`, `file.f_inode`, `inode.i_ino`, `inode.i_sb`, `super_block.s_dev`.
    pub files_ok: u32,
    pub task_files: u32,
    pub files_fdt: u32,
    pub fdt_max_fds: u32,
    pub fdt_fd: u32,
    pub file_inode: u32,
    pub inode_ino: u32,
    pub inode_sb: u32,
    pub sb_dev: u32,
    /// The caller read from its task with plain loads at `task`'s offsets (see
    /// [`crate::TaskLayout`]). 0 in `task_ok`: the helpers.
    pub task_ok: u32,
    pub task: crate::TaskLayout,
    /// `req`, `opcode`, `flags` of `io_uring_submit_req` (or `io_uring_submit_sqe`), `req` of
    /// `io_uring_complete`; `io_kiocb.cqe.fd` (0 when unknown: no file for io_uring calls).
    pub submit_req: u32,
    pub submit_opcode: u32,
    pub submit_flags: u32,
    pub complete_req: u32,
    pub req_fd: u32,
}

impl SyncLayout {
    pub const UNSET: SyncLayout = SyncLayout {
        nr: [u32::MAX; SYNC_SYSCALLS],
        files_ok: 0,
        task_files: 0,
        files_fdt: 0,
        fdt_max_fds: 0,
        fdt_fd: 0,
        file_inode: 0,
        inode_ino: 0,
        inode_sb: 0,
        sb_dev: 0,
        task_ok: 0,
        task: crate::TaskLayout::UNSET,
        submit_req: 0,
        submit_opcode: 0,
        submit_flags: 0,
        complete_req: 0,
        req_fd: 0,
    };
}

/// The kind of a traced syscall number; None for any other.
#[inline(always)]
pub fn syscall_kind(nrs: &[u32; SYNC_SYSCALLS], nr: u32) -> Option<u32> {
    let mut i = 0;
    while i < SYNC_SYSCALLS {
        if nrs[i] == nr {
            return Some(i as u32);
        }
        i += 1;
    }
    None
}

/// The kind of an io_uring opcode that syncs; None for any other.
#[inline(always)]
pub fn uring_kind(opcode: u32) -> Option<u32> {
    match opcode {
        IORING_OP_FSYNC => Some(SYNC_URING_FSYNC),
        IORING_OP_SYNC_FILE_RANGE => Some(SYNC_URING_FILE_RANGE),
        _ => None,
    }
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], u32/u64 fields and byte arrays without implicit padding.
    unsafe impl aya::Pod for super::SyncKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::SyncStats {}
    // SAFETY: as above (two of those).
    unsafe impl aya::Pod for super::SyncMemo {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::SyncInFlight {}
    // SAFETY: as above (u32 only).
    unsafe impl aya::Pod for super::SyncLayout {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::SyncSlot {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_have_no_hidden_padding() {
        assert_eq!(core::mem::size_of::<SyncKey>(), 24);
        assert_eq!(core::mem::size_of::<SyncStats>(), 5 * 8 + 16 + 8 * HIST_BUCKETS);
        assert_eq!(core::mem::size_of::<SyncMemo>(), 24 + core::mem::size_of::<SyncStats>());
        assert_eq!(core::mem::size_of::<SyncInFlight>(), 4 * 8 + 4 * 4 + 16);
        assert_eq!(core::mem::size_of::<SyncLayout>(), (SYNC_SYSCALLS + 22) * 4);
        // An mmapable array's values are 8-byte aligned one after the other: no gap to skip.
        assert_eq!(core::mem::size_of::<SyncSlot>(), 8 + core::mem::size_of::<SyncInFlight>());
        assert_eq!(core::mem::size_of::<SyncSlot>() % 8, 0);
    }

    #[test]
    fn threads_in_sequence_take_different_slots() {
        assert!(SYNC_SLOTS_MAX.is_power_of_two());
        assert_eq!(sync_slot(5), 5);
        assert_eq!(sync_slot(u64::from(SYNC_SLOTS_MAX) + 5), 5);
        let mut taken = [false; SYNC_SLOTS_MAX as usize];
        for tid in 1000..1000 + u64::from(SYNC_SLOTS_MAX) {
            let slot = sync_slot(tid) as usize;
            assert!(!taken[slot], "thread {tid} shares slot {slot}");
            taken[slot] = true;
        }
    }

    #[test]
    fn kinds_come_from_syscall_numbers_and_opcodes() {
        let nrs = [74, 75, 277, 26, 306, 162];
        assert_eq!(syscall_kind(&nrs, 74), Some(SYNC_FSYNC));
        assert_eq!(syscall_kind(&nrs, 162), Some(SYNC_SYNC));
        assert_eq!(syscall_kind(&nrs, 0), None);
        assert_eq!(
            syscall_kind(&[u32::MAX; SYNC_SYSCALLS], u32::MAX),
            Some(0),
            "unset numbers match only u32::MAX"
        );
        assert_eq!(uring_kind(3), Some(SYNC_URING_FSYNC));
        assert_eq!(uring_kind(8), Some(SYNC_URING_FILE_RANGE));
        assert_eq!(uring_kind(1), None);
        assert_eq!(kind_name(SYNC_URING_FSYNC), "io_uring fsync");
    }
}
