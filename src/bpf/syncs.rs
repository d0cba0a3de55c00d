//! The sync-call probes' userspace half (ioscope_common::syncs): which tracepoints and struct
//! fields this kernel has, attaching, and reading the maps (summed over CPUs). Paths are found by
//! src/bpf/resolve/syncs.rs.

use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use aya::maps::{HashMap as BpfHashMap, MapData, PerCpuArray, PerCpuHashMap};
use aya::programs::TracePoint;
use aya::Ebpf;
use ioscope_common::kernel_dev_major_minor;
use ioscope_common::syncs::{
    kind_name, SyncInFlight, SyncKey, SyncLayout, SyncMemo, SyncSlot, SyncStats, SYNC_ENTER_NOCAS,
    SYNC_INFLIGHT_INSERTS_MAP, SYNC_INFLIGHT_MAP, SYNC_INFLIGHT_MAX, SYNC_MAX_ENTRIES, SYNC_MEMO_MAP,
    SYNC_SLOTS_MAP, SYNC_SLOTS_MAX, SYNC_STATS_MAP, SYSCALL_EVENTS,
};

use super::kernel_btf::KernelBtf;
use super::tracefs;
use crate::sample::syncs::{SyncCallCounters, SyncFile, SyncRunning};
use crate::sample::BpfProgramStatus;

pub const ENTER_PROGRAM: &str = "sync_enter";
pub const EXIT_PROGRAM: &str = "sync_exit";
pub const URING_SUBMIT_PROGRAM: &str = "sync_uring_submit";
pub const URING_COMPLETE_PROGRAM: &str = "sync_uring_complete";
/// The io_uring submission event's names, newest first (`io_uring_submit_sqe` until Linux 6.3
/// renamed it).
pub const URING_SUBMIT_EVENTS: [&str; 2] = ["io_uring_submit_req", "io_uring_submit_sqe"];

/// The syscall numbers of [`SYSCALL_EVENTS`] on this architecture.
fn syscall_numbers() -> [i64; 6] {
    [
        libc::SYS_fsync,
        libc::SYS_fdatasync,
        libc::SYS_sync_file_range,
        libc::SYS_msync,
        libc::SYS_syncfs,
        libc::SYS_sync,
    ]
}

/// What can be attached: per syscall, its two events' readiness; io_uring's submission event
/// (which name) or why not.
pub struct SyncPlan {
    pub layout: SyncLayout,
    pub syscalls: Vec<(&'static str, Result<(), String>)>,
    pub uring: Result<&'static str, String>,
    /// The io_uring programs (submission, completion): matched by request address, or on 5.10 by
    /// ring and user_data (super::syncs_510, with its layout).
    pub uring_programs: [&'static str; 2],
    pub uring_510: ioscope_common::syncs_510::Uring510Layout,
    /// Why calls have no file (no BTF for the file table), for the status.
    pub notes: Vec<String>,
    /// The entry program's twin from the start ([`SYNC_ENTER_NOCAS`]: a test's knob; a kernel
    /// that refuses `sync_enter` gets it anyway).
    pub nocas: bool,
}

/// Reads the formats and the kernel's struct layouts the programs need. `hidden`: tracepoints
/// ("category:event") to treat as missing (tests).
pub fn plan(tracefs_dir: &Path, btf: Option<&KernelBtf>, hidden: &[String]) -> SyncPlan {
    let mut l = SyncLayout::UNSET;
    let read = |category: &str, event: &str| {
        if hidden.iter().any(|h| *h == format!("{category}:{event}")) {
            bail!("tracepoint {category}:{event} hidden on request");
        }
        tracefs::read_event_format(tracefs_dir, category, event)
    };
    let mut syscalls = Vec::new();
    for (i, (name, nr)) in SYSCALL_EVENTS.iter().zip(syscall_numbers()).enumerate() {
        let r = (|| -> Result<()> {
            let enter = read("syscalls", &format!("sys_enter_{name}"))?;
            let exit = read("syscalls", &format!("sys_exit_{name}"))?;
            let at = |f: &tracefs::EventFormat, field: &str, offset: u32| -> Result<()> {
                let got = f.field(field)?.offset;
                if got != offset {
                    bail!("tracepoint {} has `{field}` at offset {got}, expected {offset}", f.name);
                }
                Ok(())
            };
            at(&enter, "__syscall_nr", 8)?;
            at(&exit, "__syscall_nr", 8)?;
            match *name {
                "sync" => {}
                "msync" => at(&enter, "flags", 32)?,
                _ => at(&enter, "fd", 16)?,
            }
            Ok(())
        })();
        if r.is_ok() {
            l.nr[i] = nr as u32;
        }
        syscalls.push((*name, r.map_err(|e| format!("{e:#}"))));
    }
    let mut notes = Vec::new();
    let mut uring_programs = [URING_SUBMIT_PROGRAM, URING_COMPLETE_PROGRAM];
    let mut uring_510 = ioscope_common::syncs_510::Uring510Layout::UNSET;
    let uring = (|| -> Result<&'static str> {
        let complete = read("io_uring", "io_uring_complete")?;
        if let Err(no_req) = complete.field_sized("req", 8) {
            // 5.10: matched by ring and user_data (super::syncs_510).
            let submit = read("io_uring", URING_SUBMIT_EVENTS[1]).map_err(|_| no_req)?;
            uring_510 = super::syncs_510::layout(&submit, &complete, btf)?;
            uring_programs = [super::syncs_510::SUBMIT_PROGRAM, super::syncs_510::COMPLETE_PROGRAM];
            return Ok(URING_SUBMIT_EVENTS[1]);
        }
        l.complete_req = complete.field_sized("req", 8)?.offset;
        let mut last = None;
        for event in URING_SUBMIT_EVENTS {
            match read("io_uring", event) {
                Ok(f) => {
                    l.submit_req = f.field_sized("req", 8)?.offset;
                    l.submit_opcode = f.field_sized("opcode", 1)?.offset;
                    l.submit_flags = f.field("flags")?.offset;
                    return Ok(event);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow!("no io_uring submission tracepoint")))
    })()
    .map_err(|e| format!("{e:#}"));
    if let Some(k) = btf {
        // Without these the entry program asks helpers for them (the same values).
        if let Ok(task) = k.task_layout() {
            (l.task, l.task_ok) = (task, 1);
        }
    }
    match btf {
        Some(k) => match file_table_layout(k, &mut l) {
            Ok(()) => {
                if uring.is_ok() && uring_510.configured == 0 {
                    if let Err(e) = uring_fd_layout(k, &mut l) {
                        notes.push(format!("io_uring sync calls without their file: {e:#}"));
                    }
                }
            }
            Err(e) => notes.push(format!("sync calls without their file: {e:#}")),
        },
        None => notes.push("sync calls without their file: no kernel BTF".into()),
    }
    SyncPlan { layout: l, syscalls, uring, uring_programs, uring_510, notes, nocas: false }
}

/// `task->files->fdt->fd[fd]->f_inode`, `->i_ino`, `->i_sb->s_dev`.
fn file_table_layout(k: &KernelBtf, l: &mut SyncLayout) -> Result<()> {
    l.task_files = k.offset_sized("task_struct", "files", 8)?;
    l.files_fdt = k.offset_sized("files_struct", "fdt", 8)?;
    l.fdt_max_fds = k.offset_sized("fdtable", "max_fds", 4)?;
    l.fdt_fd = k.offset_sized("fdtable", "fd", 8)?;
    l.file_inode = k.offset_sized("file", "f_inode", 8)?;
    l.inode_ino = k.offset_sized("inode", "i_ino", 8)?;
    l.inode_sb = k.offset_sized("inode", "i_sb", 8)?;
    l.sb_dev = k.offset_sized("super_block", "s_dev", 4)?;
    l.files_ok = 1;
    Ok(())
}

/// `io_kiocb.cqe.fd`: the request's fd, set at submission.
fn uring_fd_layout(k: &KernelBtf, l: &mut SyncLayout) -> Result<()> {
    let cqe = k.offset_sized("io_kiocb", "cqe", 16)?;
    let fd = k.offset_sized("io_cqe", "fd", 4)?;
    l.req_fd = cqe + fd;
    Ok(())
}

/// The loads [`attach`] asks for (see super::preload): each program, whatever its events.
pub fn loads(plan: &SyncPlan) -> Vec<super::preload::Planned<'static>> {
    [
        if plan.nocas { SYNC_ENTER_NOCAS } else { ENTER_PROGRAM },
        EXIT_PROGRAM,
        plan.uring_programs[0],
        plan.uring_programs[1],
    ]
    .into_iter()
    .map(|p| (p.to_string(), super::preload::How::TracePoint))
    .collect()
}

/// Loads the programs and attaches them to every event the plan found; takes the maps.
pub fn attach(ebpf: &mut Ebpf, plan: &SyncPlan) -> (Vec<BpfProgramStatus>, Option<SyncMaps>) {
    let mut statuses = Vec::new();
    let mut attach_each = |ebpf: &mut Ebpf,
                           mut program: &str,
                           events: Vec<(String, String, Result<(), String>)>| {
        let load = |ebpf: &mut Ebpf, program: &str| {
            super::preload::load(ebpf, program, super::preload::How::TracePoint).map_err(|e| format!("{e:#}"))
        };
        if program == ENTER_PROGRAM && plan.nocas {
            program = SYNC_ENTER_NOCAS;
        }
        let mut loaded = load(ebpf, program);
        if program == ENTER_PROGRAM && loaded.is_err() {
            // Before 5.12 (no compare-and-exchange) or 5.11 (no BTF task): every call in the
            // hash map, its file read with bpf_probe_read_kernel (ebpf/README.md, sync calls).
            program = SYNC_ENTER_NOCAS;
            loaded = load(ebpf, program);
        }
        for (category, event, ready) in events {
            let r = ready.and_then(|()| loaded.clone()).and_then(|()| {
                let tp: &mut TracePoint = ebpf
                    .program_mut(program)
                    .expect("loaded above")
                    .try_into()
                    .map_err(|e| format!("{e:#}"))?;
                tp.attach(&category, &event).map(|_| ()).map_err(|e| format!("{e:#}"))
            });
            statuses.push(super::attach::program_status(program, &category, &event, r));
        }
    };
    let ev = |prefix: &str| -> Vec<(String, String, Result<(), String>)> {
        plan.syscalls
            .iter()
            .map(|(name, r)| ("syscalls".into(), format!("{prefix}_{name}"), r.clone()))
            .collect()
    };
    attach_each(ebpf, ENTER_PROGRAM, ev("sys_enter"));
    attach_each(ebpf, EXIT_PROGRAM, ev("sys_exit"));
    let submit = plan.uring.clone().map(|e| e.to_string());
    attach_each(
        ebpf,
        plan.uring_programs[0],
        vec![(
            "io_uring".into(),
            submit.clone().unwrap_or_else(|_| URING_SUBMIT_EVENTS[0].into()),
            submit.clone().map(|_| ()),
        )],
    );
    attach_each(
        ebpf,
        plan.uring_programs[1],
        vec![("io_uring".into(), "io_uring_complete".into(), submit.map(|_| ()))],
    );
    let maps = (|| -> Result<SyncMaps> {
        let take = |ebpf: &mut Ebpf, name: &str| {
            ebpf.take_map(name).ok_or_else(|| anyhow!("map {name} is not in the eBPF object"))
        };
        Ok(SyncMaps {
            stats: PerCpuHashMap::try_from(take(ebpf, SYNC_STATS_MAP)?)?,
            memo: PerCpuArray::try_from(take(ebpf, SYNC_MEMO_MAP)?)?,
            inflight: BpfHashMap::try_from(take(ebpf, SYNC_INFLIGHT_MAP)?)?,
            slots: MappedSlots::new(take(ebpf, SYNC_SLOTS_MAP)?)?,
            batch: true,
            inflight_gate: super::inserts::EmptyGate::take(ebpf, SYNC_INFLIGHT_INSERTS_MAP)?,
            last_stats: Default::default(),
            idle: std::collections::HashMap::new(),
        })
    })();
    match maps {
        Ok(m) if statuses.iter().any(|s| s.attached) => (statuses, Some(m)),
        Ok(_) => (statuses, None),
        Err(e) => {
            for s in statuses.iter_mut() {
                s.error.get_or_insert_with(|| format!("{e:#}"));
            }
            (statuses, None)
        }
    }
}

pub struct SyncMaps {
    stats: PerCpuHashMap<MapData, SyncKey, SyncStats>,
    /// Each CPU's calls not yet in `stats` (SyncMemo).
    memo: PerCpuArray<MapData, SyncMemo>,
    inflight: BpfHashMap<MapData, u64, SyncInFlight>,
    /// The running system calls' slots (the hash map has the others: io_uring's, a thread whose
    /// slot another holds, every call on kernels before 5.12).
    slots: MappedSlots,
    /// Read in batches (one system call per few hundred entries) until the kernel refuses them.
    batch: bool,
    /// SYNC_INFLIGHT is not read while it stays empty (see crate::bpf::inserts): on a kernel with
    /// the slots, only io_uring's calls and a thread whose slot another holds go there.
    inflight_gate: super::inserts::EmptyGate,
    /// SYNC_STATS as last read, keyed by the memos read just before (see [`SyncMaps::read`]).
    last_stats: super::inserts::Reuse<Vec<SyncMemo>, Vec<(SyncKey, Vec<SyncStats>)>>,
    /// Per key: its calls as last read, when they last changed, and when its process was last
    /// found alive (see [`SyncMaps::drop_exited`]).
    idle: std::collections::HashMap<SyncKey, Idle>,
}

/// What [`SyncMaps::drop_exited`] knows of a key.
struct Idle {
    calls: u64,
    changed_at: std::time::Instant,
    alive_at: Option<std::time::Instant>,
}

/// A row whose process has exited stays this long after its last call, then goes (its entry
/// removed from SYNC_STATS): the rows are the live processes' calls and the last minute's of
/// those gone, not every process that ever called fsync.
pub const SYNC_LINGER: std::time::Duration = std::time::Duration::from_secs(60);

impl SyncMaps {
    /// The completed calls (summed over CPUs) and the running ones, without paths.
    pub fn read(&mut self) -> Result<(Vec<SyncCallCounters>, Vec<SyncRunning>)> {
        // SYNC_STATS is read again only when a memo moved since (every call completed goes to
        // its CPU's memo; a memo's calls go to the map just before the memo takes a new key), or
        // once every SLOW_REFRESH: its batch visits all 4,096 buckets. Memos read before the map
        // moved at any call the map had before it was read.
        let now = std::time::Instant::now();
        let memos_before: Vec<SyncMemo> =
            self.memo.get(&0, 0).context("reading SYNC_MEMO")?.iter().copied().collect();
        let mut entries = match self.last_stats.get(&memos_before, now) {
            Some(entries) => entries.clone(),
            None => {
                let entries = self.stats_entries()?;
                self.last_stats.put(memos_before, entries.clone(), now);
                entries
            }
        };
        // After the map: calls moving from a memo to the map meanwhile are missed for a moment,
        // not counted twice.
        let memos = self.memo.get(&0, 0).context("reading SYNC_MEMO")?;
        add_memos(&mut entries, &memos);
        self.drop_exited(&mut entries, &memos, now);
        let mut calls: Vec<SyncCallCounters> =
            entries.into_iter().map(|(key, per_cpu)| sum_cpus(key, &per_cpu)).collect();
        calls.sort_by(|a, b| (a.pid, &a.syscall, a.file.ino).cmp(&(b.pid, &b.syscall, b.file.ino)));
        let mut running = Vec::new();
        for f in self.inflight_entries()?.into_iter().chain(self.slots.running()) {
            running.push(SyncRunning {
                pid: f.tgid,
                tid: f.tid,
                comm: crate::util::c_string(&f.comm),
                cgroup_id: f.cgroup_id,
                cgroup: String::new(),
                syscall: kind_name(f.kind).to_string(),
                file: file(f.dev, f.ino),
                start_mono_ns: f.start_ns,
                written_bytes: f.written_bytes,
            });
        }
        running.sort_by_key(|r| (r.start_mono_ns, r.tid));
        Ok((calls, running))
    }

    /// Leaves out of `entries`, and removes from SYNC_STATS, the keys of processes gone whose
    /// calls have not moved for [`SYNC_LINGER`]; a key a CPU's memo still holds calls of stays
    /// (removed, the memo's calls would make it again and be counted twice). A process's
    /// liveness is checked at most once per [`super::block::LIVENESS_FRESH`] while its calls stay.
    fn drop_exited(
        &mut self,
        entries: &mut Vec<(SyncKey, Vec<SyncStats>)>,
        memos: &[SyncMemo],
        now: std::time::Instant,
    ) {
        let mut idle = std::collections::HashMap::with_capacity(entries.len());
        let mut gone = Vec::new();
        entries.retain(|(key, per_cpu)| {
            let calls = per_cpu.iter().map(|s| s.calls).sum::<u64>();
            let held = memos.iter().any(|m| m.key == *key && m.stats.calls != 0);
            let mut i = self.idle.remove(key);
            if gone_quiet(&mut i, calls, held, now, || crate::util::process_exists(key.tgid)) {
                gone.push(*key);
                return false;
            }
            idle.extend(i.map(|i| (*key, i)));
            true
        });
        self.idle = idle;
        if !gone.is_empty() {
            for key in &gone {
                let _ = self.stats.remove(key);
            }
            // The map changed under the reused read.
            self.last_stats = Default::default();
        }
    }

    /// Every SYNC_STATS entry with its per-CPU values, in batches where the kernel has them.
    fn stats_entries(&mut self) -> Result<Vec<(SyncKey, Vec<SyncStats>)>> {
        super::map_batch::per_cpu_hash_entries(
            &self.stats,
            &mut self.batch,
            SYNC_MAX_ENTRIES as usize,
            SYNC_STATS_MAP,
        )
    }

    /// Every SYNC_INFLIGHT entry (the calls running now), in batches where the kernel has them.
    fn inflight_entries(&mut self) -> Result<Vec<SyncInFlight>> {
        let now = std::time::Instant::now();
        if !self.inflight_gate.needed(now) {
            return Ok(Vec::new());
        }
        let entries = self.inflight_entries_now()?;
        self.inflight_gate.scanned(entries.is_empty(), now);
        Ok(entries)
    }

    fn inflight_entries_now(&mut self) -> Result<Vec<SyncInFlight>> {
        use aya::maps::IterableMap;
        use std::os::fd::AsFd;
        let fd = self.inflight.map().fd().as_fd();
        let read = super::map_batch::lookup_if_supported::<u64, SyncInFlight>(
            &mut self.batch,
            fd,
            None,
            false,
            SYNC_INFLIGHT_MAX as usize,
        );
        if let Some(entries) = read.context("reading SYNC_INFLIGHT")? {
            return Ok(entries.into_iter().filter_map(|e| e.values.into_iter().next()).collect());
        }
        Ok(self.inflight.iter().filter_map(|e| e.ok().map(|(_, f)| f)).collect())
    }
}

/// SYNC_SLOTS mapped into this process: the running calls are read with plain loads, no system
/// call (super::mapping).
struct MappedSlots(super::mapping::Mapping<SyncSlot>);

impl MappedSlots {
    fn new(map: aya::maps::Map) -> Result<MappedSlots> {
        Ok(MappedSlots(super::mapping::Mapping::new(map, SYNC_SLOTS_MAP, SYNC_SLOTS_MAX, false)?))
    }

    /// The calls in the slots now: a slot read whole (the same key and start before and after
    /// the copy; see SyncSlot), else skipped (a call starting or ending as it is read).
    fn running(&self) -> Vec<SyncInFlight> {
        use std::ptr::{addr_of, read_volatile};
        let mut out = Vec::new();
        for i in 0..self.0.len() {
            let slot = self.0.slot(i);
            // SAFETY: as above; volatile: the programs write the slot meanwhile.
            let (key, start) = unsafe {
                (read_volatile(addr_of!((*slot).key)), read_volatile(addr_of!((*slot).call.start_ns)))
            };
            if key == 0 || start == 0 {
                continue;
            }
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            // SAFETY: as above.
            let call = unsafe { read_volatile(addr_of!((*slot).call)) };
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            // SAFETY: as above.
            let again = unsafe {
                (read_volatile(addr_of!((*slot).key)), read_volatile(addr_of!((*slot).call.start_ns)))
            };
            if again == (key, start) && call.start_ns == start {
                out.push(call);
            }
        }
        out
    }
}

fn file(dev: u32, ino: u64) -> SyncFile {
    let (major, minor) = kernel_dev_major_minor(dev);
    SyncFile { major, minor, ino, path: None }
}

/// Whether a key whose calls now number `calls` belongs to a process gone for good and is quiet:
/// no call for [`SYNC_LINGER`], none of them held in a memo (`held`). `idle` is what was known of
/// it (updated; None: first seen); `alive` checks its process, at most once per
/// [`super::block::LIVENESS_FRESH`].
fn gone_quiet(
    idle: &mut Option<Idle>,
    calls: u64,
    held: bool,
    now: std::time::Instant,
    alive: impl FnOnce() -> bool,
) -> bool {
    let i = match idle.take() {
        Some(i) if i.calls == calls => idle.insert(i),
        _ => idle.insert(Idle { calls, changed_at: now, alive_at: None }),
    };
    if held || now.duration_since(i.changed_at) < SYNC_LINGER {
        return false;
    }
    if i.alive_at.is_some_and(|t| now.duration_since(t) < super::block::LIVENESS_FRESH) {
        return false;
    }
    if alive() {
        i.alive_at = Some(now);
        return false;
    }
    true
}

/// Each CPU's pending calls (SyncMemo) as one more value of their key (a new entry when the map
/// has none).
pub fn add_memos(entries: &mut Vec<(SyncKey, Vec<SyncStats>)>, memos: &[SyncMemo]) {
    for m in memos.iter().filter(|m| m.stats.calls != 0) {
        match entries.iter_mut().find(|(k, _)| *k == m.key) {
            Some((_, per_cpu)) => per_cpu.push(m.stats),
            None => entries.push((m.key, vec![m.stats])),
        }
    }
}

/// One key's per-CPU values added up (max: the largest).
pub fn sum_cpus(key: SyncKey, per_cpu: &[SyncStats]) -> SyncCallCounters {
    let mut c = SyncCallCounters {
        pid: key.tgid,
        syscall: kind_name(key.kind).to_string(),
        file: file(key.dev, key.ino),
        hist: vec![0; ioscope_common::block::HIST_BUCKETS],
        ..Default::default()
    };
    let mut latest = 0;
    for s in per_cpu {
        c.calls += s.calls;
        c.total_ns = c.total_ns.wrapping_add(s.total_ns);
        c.max_ns = c.max_ns.max(s.max_ns);
        c.written_bytes = c.written_bytes.wrapping_add(s.written_bytes);
        for (h, n) in c.hist.iter_mut().zip(s.hist) {
            *h += n;
        }
        if s.calls > latest {
            latest = s.calls;
            c.comm = crate::util::c_string(&s.comm);
            c.cgroup_id = s.cgroup_id;
        }
    }
    c
}

/// The sync-calls family: fsync and friends per process and file, and the calls still running.
#[derive(Default)]
pub struct SyncsFamily {
    plan: Option<SyncPlan>,
    maps: Option<SyncMaps>,
    /// "category:event" of each attached program's events.
    attached: std::sync::Arc<Vec<String>>,
    paths: super::resolve::syncs::SyncPathResolver,
}

impl super::family::Family for SyncsFamily {
    fn name(&self) -> &'static str {
        "syncs"
    }

    fn plan(&mut self, setup: &mut super::family::Setup) {
        let mut sync_plan = plan(setup.tracefs, setup.btf, setup.hidden());
        // A kernel without compare-and-exchange, as the block programs' test knob says (its
        // `sync_enter` twin: see attach).
        sync_plan.nocas = setup.options.refuse_block_twin.as_deref() == Some(super::block_claim::REFUSE_CAS);
        self.plan = Some(sync_plan);
    }

    fn globals<'s>(&'s self, loader: &mut aya::EbpfLoader<'s>) {
        let Some(plan) = &self.plan else { return };
        loader.override_global(ioscope_common::syncs::SYNC_LAYOUT_GLOBAL, &plan.layout, true);
        loader.override_global(ioscope_common::syncs_510::URING_510_LAYOUT_GLOBAL, &plan.uring_510, true);
    }

    fn loads<'a>(
        &'a self,
        _: &super::family::Setup<'a>,
        _: &[super::preload::Planned<'a>],
    ) -> Vec<super::preload::Planned<'a>> {
        self.plan.as_ref().map(loads).unwrap_or_default()
    }

    fn attach(
        &mut self,
        ebpf: &mut Ebpf,
        _: &mut super::family::Setup,
        statuses: &mut Vec<BpfProgramStatus>,
    ) {
        let Some(plan) = &self.plan else { return };
        let (programs, maps) = attach(ebpf, plan);
        self.attached =
            programs.iter().filter(|p| p.attached).map(|p| p.tracepoint.clone()).collect::<Vec<_>>().into();
        statuses.extend(programs);
        self.maps = maps;
    }

    fn notes(&mut self) -> Vec<String> {
        self.plan.as_mut().map(|p| std::mem::take(&mut p.notes)).unwrap_or_default()
    }

    fn read(&mut self, _: &mut super::family::Shared, sample: &mut crate::sample::BpfSample) -> Vec<String> {
        let Some(maps) = &mut self.maps else { return Vec::new() };
        match maps.read() {
            Ok((mut calls, mut running)) => {
                let wanted = calls
                    .iter_mut()
                    .map(|c| (&mut c.file, c.pid))
                    .chain(running.iter_mut().map(|r| (&mut r.file, r.pid)));
                self.paths.resolve(wanted, &sample.files, std::time::Instant::now());
                let attached = self.attached.clone();
                sample.syncs = Some(crate::sample::syncs::SyncSample { attached, calls, running });
                Vec::new()
            }
            Err(e) => vec![format!("{e:#}")],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_calls_in_the_memos_join_their_key() {
        let key = |tgid| SyncKey { tgid, kind: 0, dev: 7 << 20 | 2, _pad: 0, ino: 12 };
        let stats = |calls, max_ns| SyncStats { calls, total_ns: calls * 1000, max_ns, ..Default::default() };
        let mut entries = vec![(key(9), vec![stats(3, 5000), stats(1, 1000)])];
        let memos = [
            SyncMemo { key: key(9), stats: stats(2, 9000) },
            SyncMemo { key: key(10), stats: stats(1, 700) },
            // Nothing pending: no row.
            SyncMemo { key: key(11), stats: stats(0, 0) },
        ];
        add_memos(&mut entries, &memos);
        let sums: Vec<_> = entries.into_iter().map(|(k, v)| sum_cpus(k, &v)).collect();
        assert_eq!(sums.len(), 2);
        assert_eq!((sums[0].pid, sums[0].calls, sums[0].total_ns, sums[0].max_ns), (9, 6, 6000, 9000));
        assert_eq!((sums[1].pid, sums[1].calls, sums[1].max_ns), (10, 1, 700));
    }

    #[test]
    fn a_gone_processs_row_goes_a_minute_after_its_last_call() {
        let t0 = std::time::Instant::now();
        let at = |s: u64| t0 + std::time::Duration::from_secs(s);
        let mut idle = None;
        let dead = || false;
        assert!(!gone_quiet(&mut idle, 1, false, at(0), dead), "a new row stays");
        assert!(!gone_quiet(&mut idle, 1, false, at(59), dead), "a minute not over");
        assert!(!gone_quiet(&mut idle, 2, false, at(100), dead), "a new call starts the minute again");
        assert!(!gone_quiet(&mut idle, 2, false, at(159), dead));
        assert!(!gone_quiet(&mut idle, 2, true, at(170), dead), "a memo still holds calls of the key");
        assert!(gone_quiet(&mut idle, 2, false, at(170), dead), "quiet a minute, process gone");
        // A live process's rows stay, its liveness asked at most once per LIVENESS_FRESH.
        let mut idle = None;
        let asked = std::cell::Cell::new(0);
        let alive = || {
            asked.set(asked.get() + 1);
            true
        };
        assert!(!gone_quiet(&mut idle, 1, false, at(0), alive));
        assert_eq!(asked.get(), 0, "not asked within the minute");
        assert!(!gone_quiet(&mut idle, 1, false, at(61), alive));
        let later = at(61) + crate::bpf::block::LIVENESS_FRESH / 2;
        assert!(!gone_quiet(&mut idle, 1, false, later, alive));
        assert_eq!(asked.get(), 1, "asked once per LIVENESS_FRESH");
        assert!(!gone_quiet(&mut idle, 1, false, at(63), alive));
        assert_eq!(asked.get(), 2);
    }

    #[test]
    fn cpus_add_up_and_the_max_is_the_largest() {
        let key = SyncKey { tgid: 9, kind: 1, dev: 7 << 20 | 2, _pad: 0, ino: 12 };
        let mut comm = [0u8; 16];
        comm[..4].copy_from_slice(b"java");
        let mut a = SyncStats {
            calls: 2,
            total_ns: 3_000,
            max_ns: 2_000,
            written_bytes: 4096,
            comm,
            ..Default::default()
        };
        a.hist[11] = 2;
        let mut b = SyncStats { calls: 1, total_ns: 9_000, max_ns: 9_000, ..Default::default() };
        b.hist[4] = 1;
        let c = sum_cpus(key, &[a, b, SyncStats::default()]);
        assert_eq!(
            (c.pid, c.syscall.as_str(), c.file.major, c.file.minor, c.file.ino),
            (9, "fdatasync", 7, 2, 12)
        );
        assert_eq!((c.calls, c.total_ns, c.max_ns, c.written_bytes), (3, 12_000, 9_000, 4096));
        assert_eq!((c.hist[11], c.hist[4]), (2, 1));
        assert_eq!(c.comm, "java");
    }
}
