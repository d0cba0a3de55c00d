//! I/O wait per thread (ioscope_common::iowait): `sched:sched_switch` starts a wait when the task
//! leaving the CPU has `in_iowait` set and blocks (not preempted, not runnable); `sched:sched_wakeup`
//! ends it, adding the time to the thread's slot under the cause decided at the block, from the
//! thread's hint ([`hint`], left by the page-cache, direct-I/O, sync-call and throttling programs).
//! Both are BTF tracepoints: the task is a typed pointer, its fields plain loads at offsets from
//! the kernel's BTF (read-only global, frozen before load).

use aya_ebpf::{
    bindings::BPF_F_MMAPABLE,
    helpers::{bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{btf_tracepoint, map},
    maps::Array,
    programs::BtfTracePointContext,
};
use ioscope_common::iowait::{
    hint_cause, iowait_slot, IowaitLayout, IowaitThread, IOWAIT_CAUSES, IOWAIT_CAUSE_SLOTS, IOWAIT_SLOTS_MAX,
};

use crate::kernel::kernel_field;

#[unsafe(no_mangle)]
static IOWAIT_LAYOUT: IowaitLayout = IowaitLayout::UNSET;

/// The threads' waits; userspace reads it through a memory mapping.
#[map]
static IOWAIT_THREADS: Array<IowaitThread> = Array::with_max_entries(IOWAIT_SLOTS_MAX, BPF_F_MMAPABLE);

/// Each thread's hint (ioscope_common::iowait::hint).
#[map]
static IOWAIT_HINTS: Array<u64> = Array::with_max_entries(IOWAIT_SLOTS_MAX, 0);

macro_rules! layout {
    ($f:ident) => {
        // SAFETY: a read-only global, frozen before load (see page_cache::layout()).
        unsafe { core::ptr::read_volatile(&raw const IOWAIT_LAYOUT.$f) }
    };
}

/// The current thread is on a path whose waits are `cause` (ioscope_common::iowait's causes).
/// One store; nothing when the I/O-wait programs are not planned.
#[inline(always)]
pub(crate) fn hint(cause: u32) {
    if layout!(configured) == 0 {
        return;
    }
    let tid = bpf_get_current_pid_tgid() as u32;
    if let Some(p) = IOWAIT_HINTS.get_ptr_mut(iowait_slot(tid)) {
        // SAFETY: a valid, aligned element; one 8-byte store (a reader sees the old or the new).
        unsafe { core::ptr::write_volatile(p, ioscope_common::iowait::hint(tid, cause)) };
    }
}

/// Whether task `task` has `in_iowait` set: the fast path of both programs, one load.
#[inline(always)]
fn in_iowait(task: *const u8) -> bool {
    let byte: u8 = kernel_field(task, layout!(in_iowait));
    u32::from(byte) & layout!(in_iowait_mask) != 0
}

/// `sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next[, unsigned int
/// prev_state])` (the state argument is 5.18+: the state is read from the task instead). Raised in
/// `__schedule()` before the switch: the current task is still `prev`.
#[btf_tracepoint(function = "sched_switch")]
pub fn iowait_switch(ctx: BtfTracePointContext) -> i32 {
    let prev: *const u8 = ctx.arg(1);
    if !in_iowait(prev) {
        return 0;
    }
    let preempt: u64 = ctx.arg(0);
    // A preempted task stays runnable; a state of 0 (TASK_RUNNING) did not block either (a
    // signal, or woken before it slept).
    if preempt & 0xff != 0 || kernel_field::<u32>(prev, layout!(state)) == 0 {
        return 0;
    }
    blocked(prev);
    0
}

#[inline(always)]
fn blocked(prev: *const u8) {
    let tid: u32 = kernel_field(prev, layout!(pid));
    let i = iowait_slot(tid);
    // SAFETY: a plain copy of the element.
    let cause = IOWAIT_HINTS.get(i).map_or(0, |h| hint_cause(*h, tid));
    let Some(t) = IOWAIT_THREADS.get_ptr_mut(i) else { return };
    let tgid: u32 = kernel_field(prev, layout!(tgid));
    // SAFETY: a valid element; written by the thread's own switch (here) and its wake-up, which
    // comes after this under the run queue's lock.
    unsafe {
        if core::ptr::read_volatile(&raw const (*t).tid) != tid {
            // The slot is this thread's from now on, its counts from 0.
            core::ptr::write_volatile(&raw mut (*t).tid, 0);
            core::ptr::write_volatile(&raw mut (*t).start_ns, 0);
            let mut n = 0;
            while n < IOWAIT_CAUSE_SLOTS {
                core::ptr::write_volatile(&raw mut (*t).ns[n], 0);
                n += 1;
            }
            core::ptr::write_volatile(&raw mut (*t).waits, 0);
            core::ptr::write_volatile(&raw mut (*t).tgid, tgid);
            // The current task is `prev` (see iowait_switch).
            core::ptr::write_volatile(&raw mut (*t).comm, bpf_get_current_comm().unwrap_or([0; 16]));
            core::ptr::write_volatile(&raw mut (*t).tid, tid);
        }
        core::ptr::write_volatile(&raw mut (*t).cgroup_id, bpf_get_current_cgroup_id());
        core::ptr::write_volatile(&raw mut (*t).cause, cause);
        // Last: the start says a wait is in progress.
        core::ptr::write_volatile(&raw mut (*t).start_ns, bpf_ktime_get_ns());
    }
}

/// `sched_wakeup(struct task_struct *p)`: raised in `try_to_wake_up()` once the task is runnable
/// again, a few instructions after delay accounting ends its wait (ebpf/README.md, I/O wait).
/// `in_iowait` is still set then: the task clears it when it runs.
#[btf_tracepoint(function = "sched_wakeup")]
pub fn iowait_wakeup(ctx: BtfTracePointContext) -> i32 {
    let p: *const u8 = ctx.arg(0);
    if !in_iowait(p) {
        return 0;
    }
    let tid: u32 = kernel_field(p, layout!(pid));
    let Some(t) = IOWAIT_THREADS.get_ptr_mut(iowait_slot(tid)) else { return 0 };
    // SAFETY: a valid element (see blocked()).
    unsafe {
        if core::ptr::read_volatile(&raw const (*t).tid) != tid {
            return 0;
        }
        let start = core::ptr::read_volatile(&raw const (*t).start_ns);
        if start == 0 {
            return 0;
        }
        let cause = core::ptr::read_volatile(&raw const (*t).cause) as usize;
        if cause >= IOWAIT_CAUSES {
            return 0;
        }
        let took = bpf_ktime_get_ns().saturating_sub(start);
        let ns = &raw mut (*t).ns[cause];
        core::ptr::write_volatile(ns, core::ptr::read_volatile(ns).wrapping_add(took));
        let waits = &raw mut (*t).waits;
        core::ptr::write_volatile(waits, core::ptr::read_volatile(waits).wrapping_add(1));
        core::ptr::write_volatile(&raw mut (*t).start_ns, 0);
    }
    0
}
