//! Sync calls (ioscope_common::syncs): the syscall tracepoints of `fsync` and friends and
//! io_uring's fsync, timed from entry (submission) to exit (completion), per process, call and
//! file. The file is found from the fd at the call, in the caller's file table
//! (`task->files->fdt->fd[fd]->f_inode`), with offsets from the kernel's BTF.
//!
//! A system call in progress takes its thread's slot of SYNC_SLOTS (array stores, where a hash
//! map's insert and delete cost ~1 µs per call after the CPU slept), or when another thread holds
//! that slot an entry of SYNC_INFLIGHT, as io_uring's requests do. `sync_enter_nocas` is the
//! entry program for kernels without BPF's compare-and-exchange (before 5.12) or
//! `bpf_get_current_task_btf` (before 5.11): it puts every call in SYNC_INFLIGHT.

use core::intrinsics::{atomic_cxchg, atomic_xadd, AtomicOrdering};

use aya_ebpf::{
    bindings::BPF_F_MMAPABLE,
    helpers::{
        bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_current_task,
        bpf_get_current_task_btf, bpf_ktime_get_ns,
    },
    macros::{map, tracepoint},
    maps::{Array, LruHashMap, LruPerCpuHashMap, PerCpuArray},
    programs::TracePointContext,
};
use ioscope_common::block::log2_bucket;
use ioscope_common::syncs::{
    sync_slot, syscall_kind, uring_kind, SyncInFlight, SyncKey, SyncLayout, SyncMemo, SyncSlot, SyncStats,
    MS_SYNC, REQ_F_FIXED_FILE, SYNC_INFLIGHT_MAX, SYNC_MAX_ENTRIES, SYNC_MSYNC, SYNC_SLOTS_MAX, SYNC_SYNC,
};

use crate::kernel::{kernel_field, Mem, Probe};

#[unsafe(no_mangle)]
static SYNC_LAYOUT: SyncLayout = SyncLayout::UNSET;

#[map]
static SYNC_STATS: LruPerCpuHashMap<SyncKey, SyncStats> =
    LruPerCpuHashMap::with_max_entries(SYNC_MAX_ENTRIES, 0);

#[map]
pub static SYNC_INFLIGHT: LruHashMap<u64, SyncInFlight> = LruHashMap::with_max_entries(SYNC_INFLIGHT_MAX, 0);

/// SYNC_INFLIGHT's insert counter (ioscope_common::inserts).
#[map]
static SYNC_INFLIGHT_INSERTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// This CPU's calls of one key not yet in SYNC_STATS (ioscope_common::syncs::SyncMemo).
#[map]
static SYNC_MEMO: PerCpuArray<SyncMemo> = PerCpuArray::with_max_entries(1, 0);

/// One SyncStats of zeros, the value of a new SYNC_STATS entry.
#[map]
static SYNC_STATS_ZERO: Array<SyncStats> = Array::with_max_entries(1, 0);

/// The system calls running, one slot per thread (ioscope_common::syncs::SyncSlot); userspace
/// reads it through a memory mapping.
#[map]
pub static SYNC_SLOTS: Array<SyncSlot> = Array::with_max_entries(SYNC_SLOTS_MAX, BPF_F_MMAPABLE);

/// io_uring sync requests submitted and not completed: `io_uring_complete` (every completion of
/// every ring) looks for its request in SYNC_INFLIGHT only when this is not 0.
#[map]
pub static SYNC_URING_PENDING: Array<u64> = Array::with_max_entries(1, 0);

macro_rules! layout {
    ($($f:ident).+) => {
        // SAFETY: a read-only global, frozen before load (see page_cache::layout()).
        unsafe { core::ptr::read_volatile(&raw const SYNC_LAYOUT.$($f).+) }
    };
}

/// The record's `__syscall_nr`, and the syscall's arguments from offset 16, 8 bytes each (the
/// layout of every `sys_enter_*` record; userspace checks the formats before attaching).
const NR_OFFSET: usize = 8;
const ARGS_OFFSET: usize = 16;
const _: () = assert!(ARGS_OFFSET == NR_OFFSET + 8);

/// `syscalls:sys_enter_{fsync,fdatasync,sync_file_range,msync,syncfs,sync}`.
#[tracepoint]
pub fn sync_enter(ctx: TracePointContext) -> u32 {
    enter::<true>(&ctx)
}

/// [`sync_enter`] without the slots and the BTF task (kernels before 5.12; see the module's doc).
#[tracepoint]
pub fn sync_enter_nocas(ctx: TracePointContext) -> u32 {
    enter::<false>(&ctx)
}

#[inline(always)]
fn enter<const SLOTS: bool>(ctx: &TracePointContext) -> u32 {
    // SAFETY: offsets of every sys_enter record (checked against the formats by userspace): the
    // number and the first argument in one read (each read is a helper call).
    let Ok(head) = (unsafe { ctx.read_at::<[u64; 2]>(NR_OFFSET) }) else { return 0 };
    let (nr, arg0) = (head[0] as u32 as i32, head[1]);
    let nrs = layout!(nr);
    let Some(kind) = syscall_kind(&nrs, nr as u32) else { return 0 };
    crate::iowait::hint(ioscope_common::iowait::CAUSE_SYNC);
    let mut file = (0, 0);
    if kind == SYNC_MSYNC {
        // msync(start, len, flags): only MS_SYNC waits for I/O.
        // SAFETY: as above.
        let Ok(flags) = (unsafe { ctx.read_at::<u64>(ARGS_OFFSET + 16) }) else { return 0 };
        if flags & MS_SYNC == 0 {
            return 0;
        }
    }
    // SAFETY: helper without preconditions (5.11+: only in the SLOTS program, see the module's doc).
    let task = if SLOTS { (unsafe { bpf_get_current_task_btf() }) as *const u8 } else { core::ptr::null() };
    if kind != SYNC_MSYNC && kind != SYNC_SYNC {
        // The first argument is the fd.
        file = if SLOTS { fd_file_btf(task, arg0 as u32) } else { fd_file(arg0 as u32) };
    }
    let caller = if SLOTS && layout!(task_ok) != 0 { Caller::of_task(task) } else { Caller::current() };
    let tid = caller.pid_tgid & 0xffff_ffff;
    if SLOTS {
        if let Some(slot) = claim(tid) {
            // SAFETY: the slot this thread claimed: nobody else writes it until it frees it.
            unsafe {
                let call = &raw mut (*slot).call;
                core::ptr::write_volatile(&raw mut (*call).start_ns, 0);
                let mut f = in_flight(kind, file, &caller);
                let start_ns = f.start_ns;
                f.start_ns = 0;
                core::ptr::write_volatile(call, f);
                // Last: the start says the slot is whole (see SyncSlot).
                core::ptr::write_volatile(&raw mut (*call).start_ns, start_ns);
            }
            return 0;
        }
    }
    start(tid, kind, file, &caller);
    0
}

/// Thread `tid`'s slot, claimed for it (or still held by it: a call whose exit was not seen);
/// None when another thread holds it.
#[inline(always)]
fn claim(tid: u64) -> Option<*mut SyncSlot> {
    if tid == 0 {
        return None;
    }
    let p = SYNC_SLOTS.get_ptr_mut(sync_slot(tid))?;
    // SAFETY: a valid pointer into the array; the key is changed only atomically or by its owner.
    let prev = unsafe {
        atomic_cxchg::<u64, { AtomicOrdering::SeqCst }, { AtomicOrdering::SeqCst }>(&raw mut (*p).key, 0, tid)
            .0
    };
    (prev == 0 || prev == tid).then_some(p)
}

/// Thread `tid`'s slot when the thread holds it.
#[inline(always)]
fn own_slot(tid: u64) -> Option<*mut SyncSlot> {
    let p = SYNC_SLOTS.get_ptr_mut(sync_slot(tid))?;
    // SAFETY: a valid pointer into the array.
    (tid != 0 && unsafe { core::ptr::read_volatile(&raw const (*p).key) } == tid).then_some(p)
}

/// `syscalls:sys_exit_*` of the same calls.
#[tracepoint]
pub fn sync_exit(_ctx: TracePointContext) -> u32 {
    let key = bpf_get_current_pid_tgid() & 0xffff_ffff;
    crate::iowait::hint(ioscope_common::iowait::CAUSE_OTHER);
    // One `finish` below (each is a default SyncStats on the stack).
    let f = match own_slot(key) {
        // SAFETY: this thread's slot; freed (start, then key: see SyncSlot) after the copy.
        Some(slot) => unsafe {
            let call = &raw mut (*slot).call;
            let f = core::ptr::read_volatile(call);
            core::ptr::write_volatile(&raw mut (*call).start_ns, 0);
            core::ptr::write_volatile(&raw mut (*slot).key, 0);
            f
        },
        None => {
            // SAFETY: a plain copy of this thread's entry.
            let Some(f) = (unsafe { SYNC_INFLIGHT.get(&key) }).copied() else { return 0 };
            let _ = SYNC_INFLIGHT.remove(&key);
            f
        }
    };
    if f.start_ns != 0 {
        finish(&f);
    }
    0
}

/// `io_uring:io_uring_submit_req` (`io_uring_submit_sqe` before Linux 6.1... as named by the
/// kernel): an fsync or sync_file_range request starts, keyed by the request's address.
#[tracepoint]
pub fn sync_uring_submit(ctx: TracePointContext) -> u32 {
    let (opcode_at, req_at, flags_at) = (layout!(submit_opcode), layout!(submit_req), layout!(submit_flags));
    // SAFETY: offsets from the format file.
    let Ok(opcode) = (unsafe { ctx.read_at::<u8>(opcode_at as usize) }) else { return 0 };
    let Some(kind) = uring_kind(u32::from(opcode)) else { return 0 };
    // SAFETY: as above.
    let (Ok(req), Ok(flags)) =
        (unsafe { (ctx.read_at::<u64>(req_at as usize), ctx.read_at::<u32>(flags_at as usize)) })
    else {
        return 0;
    };
    let req_fd = layout!(req_fd);
    let file = if req_fd != 0 && flags & REQ_F_FIXED_FILE == 0 {
        let fd: i32 = Probe::get(req as *const u8, req_fd);
        fd_file(fd as u32)
    } else {
        (0, 0)
    };
    uring_start(req, kind, file);
    0
}

/// `io_uring:io_uring_complete`: every completion of every ring; a sync request's ends its call.
#[tracepoint]
pub fn sync_uring_complete(ctx: TracePointContext) -> u32 {
    let Some(p) = uring_pending() else { return 0 };
    let req_at = layout!(complete_req);
    // SAFETY: offset from the format file.
    let Ok(req) = (unsafe { ctx.read_at::<u64>(req_at as usize) }) else { return 0 };
    uring_complete(req, p);
    0
}

/// An io_uring sync request `key` (its address, or on 5.10 its ring and user_data) of `kind` on
/// `file` was submitted: its call starts, counted in SYNC_URING_PENDING.
#[inline(always)]
pub fn uring_start(key: u64, kind: u32, file: (u32, u64)) {
    if start(key, kind, file, &Caller::current()) {
        if let Some(p) = SYNC_URING_PENDING.get_ptr_mut(0) {
            // SAFETY: a valid pointer into the array; changed only atomically.
            unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(p, 1) };
        }
    }
}

/// The count of io_uring sync requests in flight, when there are any: a completion has nothing to
/// look for otherwise (every completion of every ring raises the event).
#[inline(always)]
pub fn uring_pending() -> Option<*mut u64> {
    let p = SYNC_URING_PENDING.get_ptr_mut(0)?;
    // SAFETY: a valid pointer into the array.
    (unsafe { core::ptr::read_volatile(p) } != 0).then_some(p)
}

/// Request `key` completed: its call ends, if it is a sync call being timed (`pending` from
/// [`uring_pending`]).
#[inline(always)]
pub fn uring_complete(key: u64, pending: *mut u64) {
    // SAFETY: a plain copy of the entry.
    let Some(f) = (unsafe { SYNC_INFLIGHT.get(&key) }).copied() else { return };
    if SYNC_INFLIGHT.remove(&key).is_ok() {
        // SAFETY: a valid pointer into the array, changed only atomically; the add of -1 wraps to
        // a subtraction.
        unsafe { atomic_xadd::<u64, u64, { AtomicOrdering::Relaxed }>(pending, u64::MAX) };
    }
    finish(&f);
}

/// From the writeback programs (crate::files): the filesystem wrote `bytes` back in the current
/// thread; when it is in a sync call, the call wrote them.
#[inline(always)]
pub fn on_writeback(bytes: u64) {
    let key = bpf_get_current_pid_tgid() & 0xffff_ffff;
    if let Some(slot) = own_slot(key) {
        // SAFETY: this thread's slot, changed only by the thread itself while it holds it.
        unsafe {
            let at = &raw mut (*slot).call.written_bytes;
            core::ptr::write_volatile(at, core::ptr::read_volatile(at).wrapping_add(bytes));
        }
        return;
    }
    if let Some(f) = SYNC_INFLIGHT.get_ptr_mut(&key) {
        // SAFETY: the thread's own entry, changed only by the thread itself.
        unsafe { (*f).written_bytes = (*f).written_bytes.wrapping_add(bytes) };
    }
}

/// The (s_dev, inode) of the current task's open file `fd`; zeros when it cannot be read.
#[inline(always)]
fn fd_file(fd: u32) -> (u32, u64) {
    if layout!(files_ok) == 0 {
        return (0, 0);
    }
    // SAFETY: helper without preconditions; the task is only read through bpf_probe_read_kernel.
    let task = unsafe { bpf_get_current_task() } as *const u8;
    let files: *const u8 = Probe::get(task, layout!(task_files));
    let fdt: *const u8 = Probe::get(files, layout!(files_fdt));
    let max: u32 = Probe::get(fdt, layout!(fdt_max_fds));
    if fd >= max || fd >= 1 << 28 {
        return (0, 0);
    }
    let fds: *const u8 = Probe::get(fdt, layout!(fdt_fd));
    file_id(Probe::get(fds, fd * 8))
}

/// [`fd_file`] with plain loads of the task's file table (a helper call each there): `task`, from
/// `bpf_get_current_task_btf` (5.11+), is a pointer the verifier knows the type of, and so are
/// `files` and `fdt`. The table's entry and the file's fields are still read with
/// `bpf_probe_read_kernel` (an index the verifier cannot bound; a pointer read that way).
#[inline(always)]
fn fd_file_btf(task: *const u8, fd: u32) -> (u32, u64) {
    if layout!(files_ok) == 0 {
        return (0, 0);
    }
    let files: *const u8 = kernel_field(task, layout!(task_files));
    let fdt: *const u8 = kernel_field(files, layout!(files_fdt));
    let max: u32 = kernel_field(fdt, layout!(fdt_max_fds));
    if fd >= max || fd >= 1 << 28 {
        return (0, 0);
    }
    let fds: *const u8 = kernel_field(fdt, layout!(fdt_fd));
    file_id(Probe::get(fds, fd * 8))
}

/// The (s_dev, inode) of a `struct file`; zeros when it cannot be read.
#[inline(always)]
pub fn file_id(file: *const u8) -> (u32, u64) {
    if layout!(files_ok) == 0 {
        return (0, 0);
    }
    let inode: *const u8 = Probe::get(file, layout!(file_inode));
    let sb: *const u8 = Probe::get(inode, layout!(inode_sb));
    (Probe::get(sb, layout!(sb_dev)), Probe::get(inode, layout!(inode_ino)))
}

/// Records a call starting now under `key`; false when the map refused it.
#[inline(always)]
pub fn start(key: u64, kind: u32, file: (u32, u64), caller: &Caller) -> bool {
    let ok = SYNC_INFLIGHT.insert(&key, &in_flight(kind, file, caller), 0).is_ok();
    if ok {
        crate::kernel::count_insert(&SYNC_INFLIGHT_INSERTS);
    }
    ok
}

/// The thread making the call: what the helpers `bpf_get_current_pid_tgid`,
/// `bpf_get_current_comm` and `bpf_get_current_cgroup_id` return.
pub struct Caller {
    pid_tgid: u64,
    comm: [u8; 16],
    cgroup_id: u64,
}

impl Caller {
    /// From the helpers: three calls.
    #[inline(always)]
    pub fn current() -> Caller {
        Caller {
            pid_tgid: bpf_get_current_pid_tgid(),
            comm: bpf_get_current_comm().unwrap_or([0; 16]),
            // SAFETY: helper without preconditions.
            cgroup_id: unsafe { bpf_get_current_cgroup_id() },
        }
    }

    /// The same with plain loads from the current task (`bpf_get_current_task_btf`'s), at the
    /// layout's offsets (SyncLayout::task_ok): the cgroup id is the kernfs node id of the task's
    /// cgroup on the default hierarchy, `task->cgroups->dfl_cgrp->kn->id`, as the helper's.
    #[inline(always)]
    fn of_task(task: *const u8) -> Caller {
        let css_set: *const u8 = kernel_field(task, layout!(task.cgroups));
        let cgroup: *const u8 = kernel_field(css_set, layout!(task.css_set_dfl_cgrp));
        let kn: *const u8 = kernel_field(cgroup, layout!(task.cgroup_kn));
        let (pid, tgid): (u32, u32) =
            (kernel_field(task, layout!(task.pid)), kernel_field(task, layout!(task.tgid)));
        Caller {
            pid_tgid: u64::from(tgid) << 32 | u64::from(pid),
            comm: kernel_field(task, layout!(task.comm)),
            cgroup_id: kernel_field(kn, layout!(task.kn_id)),
        }
    }
}

/// A call of `kind` on `file` starting now in thread `caller`.
#[inline(always)]
fn in_flight(kind: u32, (dev, ino): (u32, u64), caller: &Caller) -> SyncInFlight {
    SyncInFlight {
        // SAFETY: helper without preconditions.
        start_ns: unsafe { bpf_ktime_get_ns() },
        written_bytes: 0,
        cgroup_id: caller.cgroup_id,
        ino,
        dev,
        kind,
        tgid: (caller.pid_tgid >> 32) as u32,
        tid: caller.pid_tgid as u32,
        comm: caller.comm,
    }
}

/// Adds a finished call to its (process, call, file) on this CPU: in this CPU's memo while the
/// calls completing here are of one key, else (the memo's calls moved to the map first) the memo
/// takes the new key.
#[inline(always)]
pub fn finish(f: &SyncInFlight) {
    // SAFETY: helper without preconditions.
    let ns = unsafe { bpf_ktime_get_ns() }.saturating_sub(f.start_ns);
    let key = SyncKey { tgid: f.tgid, kind: f.kind, dev: f.dev, _pad: 0, ino: f.ino };
    let Some(m) = SYNC_MEMO.get_ptr_mut(0) else {
        if let Some(s) = stats_entry(&key) {
            add_call(s, f, ns);
        }
        return;
    };
    // SAFETY: this CPU's value; tracing programs do not nest on one CPU.
    let m = unsafe { &mut *m };
    if m.stats.calls != 0 && m.key == key {
        add_call(&mut m.stats, f, ns);
        return;
    }
    if m.stats.calls != 0 {
        if let Some(s) = stats_entry(&m.key) {
            add_stats(s, &m.stats);
        }
    }
    m.key = key;
    zero(&mut m.stats);
    add_call(&mut m.stats, f, ns);
}

/// This CPU's SYNC_STATS value of `key`, created (zero) when missing.
#[inline(always)]
fn stats_entry(key: &SyncKey) -> Option<&'static mut SyncStats> {
    let p = match SYNC_STATS.get_ptr_mut(key) {
        Some(p) => p,
        None => {
            // The zeros from a map, not the stack (a SyncStats is 312 bytes of the 512 a program
            // and the functions it calls may use together: 6.1's verifier counted 544 for
            // sync_exit with one on the stack).
            let zero = SYNC_STATS_ZERO.get_ptr(0)?;
            // SAFETY: a valid pointer into the array, never written.
            let _ = SYNC_STATS.insert(key, unsafe { &*zero }, 0);
            SYNC_STATS.get_ptr_mut(key)?
        }
    };
    // SAFETY: this CPU's value; tracing programs do not nest on one CPU.
    Some(unsafe { &mut *p })
}

/// One call `f` that took `ns`.
#[inline(always)]
fn add_call(s: &mut SyncStats, f: &SyncInFlight, ns: u64) {
    s.calls += 1;
    s.total_ns = s.total_ns.wrapping_add(ns);
    if ns > s.max_ns {
        s.max_ns = ns;
    }
    s.written_bytes = s.written_bytes.wrapping_add(f.written_bytes);
    s.cgroup_id = f.cgroup_id;
    s.comm = f.comm;
    if let Some(slot) = s.hist.get_mut(log2_bucket(ns / 1000)) {
        *slot += 1;
    }
}

/// The calls of `m` (later than `s`'s) added to `s`.
#[inline(always)]
fn add_stats(s: &mut SyncStats, m: &SyncStats) {
    s.calls = s.calls.wrapping_add(m.calls);
    s.total_ns = s.total_ns.wrapping_add(m.total_ns);
    if m.max_ns > s.max_ns {
        s.max_ns = m.max_ns;
    }
    s.written_bytes = s.written_bytes.wrapping_add(m.written_bytes);
    s.cgroup_id = m.cgroup_id;
    s.comm = m.comm;
    let mut i = 0;
    while i < s.hist.len() {
        s.hist[i] = s.hist[i].wrapping_add(m.hist[i]);
        i += 1;
    }
}

/// `s` set to zeros, field by field (volatile: adjacent zero stores would become a memset call).
#[inline(always)]
fn zero(s: &mut SyncStats) {
    // SAFETY: valid, aligned fields.
    unsafe {
        core::ptr::write_volatile(&raw mut s.calls, 0);
        core::ptr::write_volatile(&raw mut s.total_ns, 0);
        core::ptr::write_volatile(&raw mut s.max_ns, 0);
        core::ptr::write_volatile(&raw mut s.written_bytes, 0);
        let mut i = 0;
        while i < s.hist.len() {
            core::ptr::write_volatile(&raw mut s.hist[i], 0);
            i += 1;
        }
    }
}
