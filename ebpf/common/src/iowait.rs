//! I/O wait: how long each thread slept waiting for I/O (the kernel's `in_iowait`: `io_schedule()`
//! and friends), from the moment it blocked (`sched:sched_switch`, the thread leaving the CPU not
//! runnable with `in_iowait` set) to its wake-up (`sched:sched_wakeup`), summed per thread and
//! cause. The cause is decided when the thread blocks, from the last hint the other programs left
//! for the thread (a page-cache read, a direct I/O, a sync call, dirty throttling).
//!
//! Programs (ebpf/probes/src/iowait.rs): `iowait_switch` and `iowait_wakeup`, BTF tracepoints.

/// Memory-mappable array of [`IowaitThread`], one slot per thread id ([`iowait_slot`]).
pub const IOWAIT_THREADS_MAP: &str = "IOWAIT_THREADS";
/// Array of u64 hints, one per thread id ([`iowait_slot`]): [`hint`].
pub const IOWAIT_HINTS_MAP: &str = "IOWAIT_HINTS";
/// Read-only global holding [`IowaitLayout`], set by the loader before load.
pub const IOWAIT_LAYOUT_GLOBAL: &str = "IOWAIT_LAYOUT";
pub const IOWAIT_SWITCH_PROGRAM: &str = "iowait_switch";
pub const IOWAIT_WAKEUP_PROGRAM: &str = "iowait_wakeup";

/// Slots of both arrays (a power of two): threads whose ids are equal modulo this share a slot.
pub const IOWAIT_SLOTS_MAX: u32 = 4096;

/// The causes, as indexes of [`IowaitThread::ns`].
pub const CAUSE_OTHER: u32 = 0;
pub const CAUSE_PAGE_CACHE_READ: u32 = 1;
pub const CAUSE_DIRECT_IO: u32 = 2;
pub const CAUSE_SYNC: u32 = 3;
pub const CAUSE_DIRTY_THROTTLE: u32 = 4;
/// Causes counted (room is left in [`IowaitThread::ns`] for more).
pub const IOWAIT_CAUSES: usize = 5;
/// Length of [`IowaitThread::ns`].
pub const IOWAIT_CAUSE_SLOTS: usize = 8;
/// Each cause's name (JSON keys, Prometheus' `cause` label).
pub const CAUSE_NAMES: [&str; IOWAIT_CAUSES] =
    ["other", "page_cache_read", "direct_io", "sync", "dirty_throttle"];

/// Where the programs read a `task_struct`, from the kernel's BTF: `in_iowait` (a one-bit field:
/// the byte holding it and the bit's mask in that byte, little-endian), the state (`__state`, or
/// the low 4 bytes of `state` before 5.14), `pid` and `tgid`. `configured` is 0 when the programs
/// are not attached: the other programs leave no hints then.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IowaitLayout {
    pub in_iowait: u32,
    pub in_iowait_mask: u32,
    pub state: u32,
    pub pid: u32,
    pub tgid: u32,
    pub configured: u32,
}

impl IowaitLayout {
    pub const UNSET: IowaitLayout =
        IowaitLayout { in_iowait: 0, in_iowait_mask: 0, state: 0, pid: 0, tgid: 0, configured: 0 };
}

/// One thread's I/O wait, cumulative since the thread took the slot (`tid` changes when another
/// thread takes it: its counts start from 0).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IowaitThread {
    pub tid: u32,
    pub tgid: u32,
    /// The thread's cgroup (v2 id) when it last blocked.
    pub cgroup_id: u64,
    /// When the wait in progress started (`bpf_ktime_get_ns`, CLOCK_MONOTONIC); 0: not waiting.
    pub start_ns: u64,
    /// The cause of the wait in progress (or the last one).
    pub cause: u32,
    pub _pad: u32,
    /// Nanoseconds waited per cause, waits ended.
    pub ns: [u64; IOWAIT_CAUSE_SLOTS],
    /// Waits ended.
    pub waits: u64,
    /// The thread's name when it took the slot.
    pub comm: [u8; 16],
}

/// The slot of thread `tid`: thread ids are handed out in sequence, so their low bits spread them.
#[inline(always)]
pub const fn iowait_slot(tid: u32) -> u32 {
    tid & (IOWAIT_SLOTS_MAX - 1)
}

/// A hint: thread `tid` is on a path whose waits are `cause` (one u64, stored at once).
#[inline(always)]
pub const fn hint(tid: u32, cause: u32) -> u64 {
    ((tid as u64) << 8) | (cause as u64 & 0xff)
}

/// The cause a hint gives thread `tid`: another thread's hint (sharing the slot) gives none.
#[inline(always)]
pub const fn hint_cause(hint: u64, tid: u32) -> u32 {
    if hint >> 8 == tid as u64 {
        let c = (hint & 0xff) as u32;
        if (c as usize) < IOWAIT_CAUSES {
            return c;
        }
    }
    CAUSE_OTHER
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], u32/u64 fields and byte arrays without implicit padding.
    unsafe impl aya::Pod for super::IowaitThread {}
    // SAFETY: as above (u32 only).
    unsafe impl aya::Pod for super::IowaitLayout {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_is_its_threads_only() {
        assert_eq!(hint_cause(hint(4242, CAUSE_SYNC), 4242), CAUSE_SYNC);
        // Another thread of the same slot.
        let other = 4242 + IOWAIT_SLOTS_MAX;
        assert_eq!(iowait_slot(other), iowait_slot(4242));
        assert_eq!(hint_cause(hint(other, CAUSE_DIRECT_IO), 4242), CAUSE_OTHER);
        // Thread ids up to the kernel's largest pid_max (2^22) are kept whole.
        let big = (1 << 22) - 1;
        assert_eq!(hint_cause(hint(big, CAUSE_DIRTY_THROTTLE), big), CAUSE_DIRTY_THROTTLE);
        assert_eq!(hint_cause(0, 4242), CAUSE_OTHER);
        assert_eq!(hint_cause(hint(7, 200), 7), CAUSE_OTHER);
    }

    #[test]
    fn the_thread_record_has_no_padding() {
        assert_eq!(
            core::mem::size_of::<IowaitThread>(),
            4 + 4 + 8 + 8 + 4 + 4 + 8 * IOWAIT_CAUSE_SLOTS + 8 + 16
        );
        assert_eq!(core::mem::size_of::<IowaitThread>() % 8, 0);
    }
}
