//! The block-layer probes' userspace half (kernel side: ebpf/probes/src/block.rs): the field
//! offsets each event needs from tracefs (classic programs) and from the kernel's BTF (their BTF
//! tracepoint twins), attaching one of each pair, and reading the maps into the Sample once per
//! interval.
//!
//! Also the two chores only userspace can do: dropping a process's entries from the kernel map
//! once they have been read after the process exited (so short-lived `dd`s are caught, and the map
//! does not fill with the dead), and emptying request slots whose completion never came.

use std::collections::{HashMap as StdHashMap, HashSet};
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use aya::maps::{Array, MapData, PerCpuArray, PerCpuValues};
use aya::programs::ProgramFd;
use aya::Ebpf;

use super::block_files;
use ioscope_common::block::*;
use ioscope_common::kernel_dev_major_minor;

use super::block_claim;
use super::counters::Accumulate;
use super::kernel_btf::KernelBtf;
use super::mapped_keys::MappedKeys;
use super::preload::{How, Planned};
use super::tracefs::{self, EventFormat};
use crate::sample::{
    BlockDeviceCounters, BlockDirCounters, BlockFlagCounters, BlockProbeHealth, BlockProcessCounters,
    BpfDeviceCounters, BpfProgramStatus, BpfSample, RequestsBytes,
};

pub use ioscope_common::block::{PROGRAMS, RETIRED};

/// The programs in the object, loaded and attached: every slot of [`PROGRAMS`] but the retired.
pub fn live_programs() -> impl Iterator<Item = (&'static str, &'static str)> {
    PROGRAMS.into_iter().filter(|(p, _)| *p != RETIRED)
}
pub const CATEGORY: &str = "block";
/// The program on the completion event, after which the block-to-file ring's program must not run.
const COMPLETE: &str = "block_rq_complete";

/// The Sample's per-device issue counts (`BpfSample::rq_issue`, `devices[].bpf` in JSON), from the
/// block_rq_issue program's per-direction counters: one program on that tracepoint serves both.
pub fn issued_counts(d: &BlockDeviceCounters) -> BpfDeviceCounters {
    BpfDeviceCounters {
        major: d.major,
        minor: d.minor,
        read_requests: d.read.issued_requests,
        read_bytes: d.read.issued_bytes,
        write_requests: d.write.issued_requests,
        write_bytes: d.write.issued_bytes,
        other_requests: d.other.issued_requests,
        other_bytes: d.other.issued_bytes,
    }
}

/// How often request slots are checked for staleness (a pass reads all 32,768: one syscall each,
/// ~30 ms, so not every interval), and how old one must be to be emptied.
const PURGE_EVERY: Duration = Duration::from_secs(60);
/// How long the processes of a table that stands still go without a check that they are alive:
/// an exit shows that much later as `exited`, with the same final counters.
pub const LIVENESS_FRESH: Duration = crate::util::SLOW_REFRESH;
const STALE_NS: u64 = 60_000_000_000;
/// `PF_KTHREAD` in /proc/PID/stat's flags field (include/linux/sched.h).
const PF_KTHREAD: u64 = 0x0020_0000;

/// The offsets of one event: `dev`, `sector`, the size (`bytes`, or `nr_sector` for
/// block_rq_complete, which has no `bytes`) and `rwbs`, checked against the sizes the program reads.
pub fn event_layout(format: &EventFormat) -> Result<EventLayout> {
    let dev = format.field_sized("dev", 4)?;
    let sector = format.field_sized("sector", 8)?;
    let (size, in_sectors) = match format.field_sized("bytes", 4) {
        Ok(f) => (f, 0),
        Err(_) => (format.field_sized("nr_sector", 4)?, 1),
    };
    let rwbs = format.field("rwbs")?;
    if (rwbs.size as usize) < RWBS_LEN {
        bail!("tracepoint {} field `rwbs` is {} bytes, expected at least {RWBS_LEN}", format.name, rwbs.size);
    }
    // The usual layout (EventHead from `dev`) is read with one helper call instead of three.
    let size_at = if in_sectors == 1 { HEAD_NR_SECTOR } else { HEAD_BYTES };
    let compact = sector.offset == dev.offset + HEAD_SECTOR && size.offset == dev.offset + size_at;
    // And rwbs right after (bytes/error and a 2-byte ioprio): all of it in one helper call of
    // size_of::<HeadWithRwbs>() bytes, which must lie within the record.
    let record_end = format.fields.iter().map(|f| f.offset + f.size).max().unwrap_or(0);
    let rwbs_in_head = compact
        && rwbs.offset == dev.offset + HEAD_RWBS
        && record_end >= dev.offset + std::mem::size_of::<HeadWithRwbs>() as u32;
    Ok(EventLayout {
        configured: 1,
        dev_offset: dev.offset,
        sector_offset: sector.offset,
        size_offset: size.offset,
        size_in_sectors: in_sectors,
        rwbs_offset: rwbs.offset,
        compact: u32::from(compact),
        rwbs_in_head: u32::from(rwbs_in_head),
    })
}

/// Where the BTF programs find the request's fields, and the values of its flags, in the kernel's
/// BTF (see [`RequestLayout`]), each checked for the size the programs load.
pub fn request_layout(btf: &KernelBtf) -> Result<RequestLayout> {
    let field = |strukt: &str, member: &str, size: u32| btf.offset_sized(strukt, member, size);
    let op = |name: &str| btf.enum_value("req_op", name);
    // The flag bits follow the operation's bits (`__REQ_FAILFAST_DEV = REQ_OP_BITS`).
    let op_bits = btf.enum_value("req_flag_bits", "__REQ_FAILFAST_DEV")?;
    let flag = |name: &str| -> Result<u32> {
        let bit = btf.enum_value("req_flag_bits", name)?;
        if bit >= 32 {
            bail!("request flag {name} is bit {bit}: cmd_flags has 32");
        }
        Ok(1 << bit)
    };
    if op_bits == 0 || op_bits >= 32 {
        bail!("unexpected REQ_OP_BITS {op_bits}");
    }
    Ok(RequestLayout {
        configured: 1,
        rq_q: field("request", "q", 8)?,
        rq_sector: field("request", "__sector", 8)?,
        rq_data_len: field("request", "__data_len", 4)?,
        rq_cmd_flags: field("request", "cmd_flags", 4)?,
        q_disk: field("request_queue", "disk", 8)?,
        disk_major: field("gendisk", "major", 4)?,
        disk_first_minor: field("gendisk", "first_minor", 4)?,
        cmd: CmdFlagValues {
            op_mask: (1 << op_bits) - 1,
            op_read: op("REQ_OP_READ")?,
            op_write: op("REQ_OP_WRITE")?,
            op_flush: op("REQ_OP_FLUSH")?,
            op_discard: op("REQ_OP_DISCARD")?,
            op_secure_erase: op("REQ_OP_SECURE_ERASE")?,
            flag_preflush: flag("__REQ_PREFLUSH")?,
            flag_fua: flag("__REQ_FUA")?,
            flag_rahead: flag("__REQ_RAHEAD")?,
            flag_sync: flag("__REQ_SYNC")?,
            flag_meta: flag("__REQ_META")?,
        },
        task: btf.task_layout()?,
        rq_io_start_time_ns: field("request", "io_start_time_ns", 8)?,
        rq_start_time_ns: field("request", "start_time_ns", 8)?,
        task_plug: field("task_struct", "plug", 8)?,
        // Linux 6.9+ (blk_time_get_ns): without it (0) the programs read the clock instead.
        plug_cur_ktime: field("blk_plug", "cur_ktime", 8).unwrap_or(0),
    })
}

/// The name of the BTF tracepoint twin of block program `program` (ebpf/probes/src/block.rs).
pub fn btf_twin(program: &str) -> String {
    format!("{program}_btf")
}

/// Attaches every live program, in [`live_programs`] order: their BTF twins when `request` (the
/// kernel's BTF and the request layout from it) is there and every twin loads and attaches, else
/// the classic tracepoint programs whose formats were read (`ready`). All of one kind, never a
/// mix: the two kinds tag a request differently (its address, its device and sector), so a BTF
/// block_io_start and a classic block_rq_issue would never find each other's requests. Returns
/// each one's status and the name of the program attached in each slot of [`PROGRAMS`] (to read
/// its run counts), and a note when a BTF twin was refused. `refuse`: a twin to treat as refused
/// (tests of the fallback). `events`: where each program attaches ([`layout`]'s choice); with the
/// submitter on a fallback event (no request address) the programs are all classic.
pub fn attach(
    ebpf: &mut Ebpf,
    ready: &[Result<(), String>],
    events: &BlockEvents,
    request: Option<&aya::Btf>,
    refuse: Option<&str>,
) -> (Vec<BpfProgramStatus>, Vec<Option<String>>, Option<String>) {
    let live: Vec<(usize, &str, &str)> = PROGRAMS
        .into_iter()
        .enumerate()
        .filter(|(_, (p, _))| *p != RETIRED)
        .map(|(slot, (program, event))| (slot, program, events.event_of(program, event)))
        .collect();
    let mut attached = vec![None; PROGRAMS.len()];
    let mut note = None;
    let request = match (request, events.io_start_fallback()) {
        (Some(_), true) => {
            note = Some(format!(
                "block probes on classic tracepoints: the submitter comes from {CATEGORY}:{} \
                 ({CATEGORY}:{} is Linux 6.5+), which carries no request address",
                events.io_start, IO_START_EVENTS[0]
            ));
            None
        }
        (r, _) => r,
    };
    if let Some(btf) = request {
        match attach_twins(ebpf, &live, btf, refuse) {
            Ok(statuses) => {
                for &(slot, program, _) in &live {
                    attached[slot] = Some(btf_twin(program));
                }
                return (statuses, attached, None);
            }
            Err(refused) => {
                note = Some(format!(
                    "block probes fell back to classic tracepoints, all of them (BTF tracepoint refused: \
                     {refused})"
                ))
            }
        }
    }
    let mut statuses = Vec::new();
    // Before Linux 5.12 the slot-claiming programs load as their twins (see block_claim); tests
    // ask for them by name.
    let mut nocas = refuse == Some(block_claim::REFUSE_CAS);
    if nocas {
        note = Some(block_claim::NOTE.to_string());
    }
    for (&(slot, program, event), ready) in live.iter().zip(ready) {
        if program == COMPLETE && ready.is_ok() {
            // Before the completion's own program: see block_files::RING_PROGRAMS.
            statuses.push(super::attach::attach_tracepoint(
                ebpf,
                block_files::RING_PROGRAMS.0,
                CATEGORY,
                event,
            ));
        }
        let mut status = match ready {
            Ok(()) => {
                let twin = block_claim::twin(program);
                let first = match &twin {
                    Some(twin) if nocas => twin.as_str(),
                    _ => program,
                };
                let status = super::attach::attach_tracepoint(ebpf, first, CATEGORY, event);
                match twin {
                    Some(twin)
                        if !nocas && status.error.as_deref().is_some_and(block_claim::refused_atomics) =>
                    {
                        nocas = true;
                        note = Some(match note.take() {
                            Some(n) => format!("{n}; {}", block_claim::NOTE),
                            None => block_claim::NOTE.to_string(),
                        });
                        super::attach::attach_tracepoint(ebpf, &twin, CATEGORY, event)
                    }
                    _ => status,
                }
            }
            Err(e) => super::attach::program_status(program, CATEGORY, event, Err(e.clone())),
        };
        if program == "block_io_start" && events.io_start_fallback() {
            status.fallback_for = Some(format!("{CATEGORY}:{}", IO_START_EVENTS[0]));
        }
        if status.attached {
            attached[slot] = Some(status.program.clone());
        }
        statuses.push(status);
    }
    (statuses, attached, note)
}

/// The loads [`attach`] will ask for when every first choice holds (see super::preload): the BTF
/// twins, else the classic programs whose formats were read. None with `refuse` (a test).
pub fn loads<'a>(
    ready: &[Result<(), String>],
    events: &BlockEvents,
    request: Option<&'a aya::Btf>,
    refuse: Option<&str>,
) -> Vec<Planned<'a>> {
    if refuse.is_some() {
        return Vec::new();
    }
    let live = live_programs().map(|(program, event)| (program, events.event_of(program, event)));
    let mut loads = Vec::new();
    match request.filter(|_| !events.io_start_fallback()) {
        Some(btf) => {
            for (program, event) in live {
                if program == COMPLETE {
                    loads.push((block_files::RING_PROGRAMS.1.to_string(), How::BtfTracePoint(event, btf)));
                }
                loads.push((btf_twin(program), How::BtfTracePoint(event, btf)));
            }
        }
        None => {
            for ((program, _), _) in live.zip(ready).filter(|(_, r)| r.is_ok()) {
                if program == COMPLETE {
                    loads.push((block_files::RING_PROGRAMS.0.to_string(), How::TracePoint));
                }
                loads.push((program.to_string(), How::TracePoint));
            }
        }
    }
    loads
}

/// Every live program's BTF twin, or none: at the first one refused, those already attached are
/// unloaded again and the reason returned.
fn attach_twins(
    ebpf: &mut Ebpf,
    live: &[(usize, &str, &str)],
    btf: &aya::Btf,
    refuse: Option<&str>,
) -> Result<Vec<BpfProgramStatus>, String> {
    let mut statuses = Vec::new();
    for (done, &(_, program, event)) in live.iter().enumerate() {
        let twin = btf_twin(program);
        if program == COMPLETE {
            // Before the completion's own program: see block_files::RING_PROGRAMS.
            let ring = super::attach::attach_btf_tracepoint(
                ebpf,
                block_files::RING_PROGRAMS.1,
                CATEGORY,
                event,
                btf,
            );
            statuses.push(ring.unwrap_or_else(|e| {
                super::attach::program_status(
                    block_files::RING_PROGRAMS.1,
                    CATEGORY,
                    event,
                    Err(format!("{e:#}")),
                )
            }));
        }
        let result = if refuse == Some(twin.as_str()) {
            Err(anyhow!("refused on request"))
        } else {
            super::attach::attach_btf_tracepoint(ebpf, &twin, CATEGORY, event, btf)
        };
        match result {
            Ok(status) => statuses.push(status),
            Err(e) => {
                // The refused one too: it may have loaded before its attach failed.
                for &(_, p, _) in &live[..=done] {
                    unload_btf_tracepoint(ebpf, &btf_twin(p));
                }
                unload_btf_tracepoint(ebpf, block_files::RING_PROGRAMS.1);
                return Err(format!("{twin}: {e:#}"));
            }
        }
    }
    Ok(statuses)
}

/// Detaches and unloads BTF tracepoint program `name` if it is loaded.
fn unload_btf_tracepoint(ebpf: &mut Ebpf, name: &str) {
    if let Some(prog) = ebpf.program_mut(name) {
        let tp: Result<&mut aya::programs::BtfTracePoint, _> = prog.try_into();
        if let Ok(tp) = tp {
            let _ = tp.unload();
        }
    }
}

/// Where the submitter is seen, best first: `block_io_start` (Linux 6.5+, in
/// `blk_account_io_start()`), else `block_getrq`, which older kernels raise in the same place for
/// the same requests: in `blk_mq_submit_bio()`, in the submitter's context, once per new request
/// (a bio merged into a request already made raises neither), just before the bio becomes the
/// request (`blk_mq_bio_to_request()`, which calls `blk_account_io_start()`). Its record's `dev`
/// is the whole disk's and `sector` the request's first, as the request events tell them, so the
/// classic tag (device, sector) finds the request at insert, issue and completion. It carries no
/// request address: with it the block programs are all classic (see [`attach`]).
pub const IO_START_EVENTS: [&str; 2] = ["block_io_start", "block_getrq"];

/// The events the block programs attach to, as chosen by [`layout`]: the live programs' events
/// with block_io_start's replaced by the one found (see [`IO_START_EVENTS`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockEvents {
    pub io_start: &'static str,
}

impl BlockEvents {
    /// The event `program` (a live program of [`PROGRAMS`]) attaches to.
    pub fn event_of(&self, program: &str, event: &'static str) -> &'static str {
        if program == "block_io_start" {
            self.io_start
        } else {
            event
        }
    }

    /// Whether the submitter comes from a fallback event (then the BTF twins are not used).
    pub fn io_start_fallback(&self) -> bool {
        self.io_start != IO_START_EVENTS[0]
    }
}

/// Reads the format files. An event whose format is missing or unusable stays unconfigured
/// (its program counts nothing) and its error is returned in its place of [`live_programs`].
/// The request layout for the BTF programs is filled in by the caller. `hidden`: tracepoints
/// ("category:event") to treat as missing (tests of the fallbacks).
pub fn layout(tracefs: &Path, hidden: &[String]) -> (BlockLayout, Vec<Result<(), String>>, BlockEvents) {
    let mut layout = BlockLayout::UNSET;
    let mut results = Vec::new();
    let read = |event: &str| -> Result<EventLayout> {
        if hidden.iter().any(|h| *h == format!("{CATEGORY}:{event}")) {
            bail!("tracepoint {CATEGORY}:{event} hidden on request");
        }
        tracefs::read_event_format(tracefs, CATEGORY, event).and_then(|f| event_layout(&f))
    };
    let mut events = BlockEvents { io_start: IO_START_EVENTS[0] };
    for (_, event) in live_programs() {
        let r = if event == IO_START_EVENTS[0] {
            let first = read(event);
            match first {
                Ok(l) => Ok(l),
                Err(e) => match read(IO_START_EVENTS[1]) {
                    Ok(l) => {
                        events.io_start = IO_START_EVENTS[1];
                        Ok(l)
                    }
                    Err(e2) => Err(anyhow!("{e:#}; fallback {CATEGORY}:{}: {e2:#}", IO_START_EVENTS[1])),
                },
            }
        } else {
            read(event)
        };
        let slot = match event {
            "block_io_start" => &mut layout.io_start,
            "block_rq_insert" => &mut layout.rq_insert,
            "block_rq_issue" => &mut layout.rq_issue,
            "block_rq_complete" => &mut layout.rq_complete,
            _ => &mut layout.rq_merge,
        };
        results.push(match r {
            Ok(l) => {
                *slot = l;
                Ok(())
            }
            Err(e) => Err(format!("{e:#}")),
        });
    }
    (layout, results, events)
}

/// The probe's maps, taken from the loaded object.
pub struct BlockMaps {
    reqs: Array<MapData, ReqSlot>,
    dev_slots: Array<MapData, DevSlot>,
    /// The device table's taken slots as of the last scan, and the claims counted then
    /// (Health::DevSlotsClaimed): a scan reads all 1,024 slots, so it is done only after a claim.
    known_dev_slots: Vec<u32>,
    dev_claims_seen: Option<u64>,
    devs: PerCpuArray<MapData, DevStats>,
    procs: PerCpuArray<MapData, ProcStats>,
    proc_keys: MappedKeys,
    health: PerCpuArray<MapData, u64>,
    /// BLOCK_HEALTH is read in one batch while the kernel has them (map_batch).
    batch: bool,
    last_purge: Instant,
    stale_evicted: u64,
    /// Kernel threads seen, by tgid (they rarely exit; saves reading their stat every interval).
    kthreads: StdHashMap<u32, bool>,
    /// When the table's processes were last checked for being alive (see [`LIVENESS_FRESH`]).
    alive_checked: Option<Instant>,
    /// The attached program's fd in each slot of PROGRAMS (None for the retired one, and for one
    /// not attached), to read the kernel's count of its runs and skipped runs.
    programs: Vec<Option<ProgramFd>>,
    /// Their counters, read each sample only while statistics are on (else once a second: a
    /// recursion miss shows up to a second late, a system call per program less each sample).
    program_stats: super::prog_stats::StatsCache,
    /// The slot claims of the `_nocas` programs, when they run (kernels before 5.12).
    claims: Option<block_claim::Claims>,
    /// What the last read of the device and process tables found, keyed by the health counters
    /// read just before it: reused while those counters stand still (see [`BlockMaps::read`]).
    last_tables: super::inserts::Reuse<[u64; HEALTH_COUNTERS as usize], Tables>,
    /// The health counters [`BlockMaps::events_now`] read for the next [`BlockMaps::read`].
    prefetched: Option<[u64; HEALTH_COUNTERS as usize]>,
    /// The device counters read with `prefetched`, right before /proc/diskstats (see
    /// [`Self::events_now`]).
    prefetched_devices: Option<Vec<BlockDeviceCounters>>,
    /// The issue and completion programs are attached: every request a driver handles is counted.
    sees_requests: bool,
}

/// The device and process tables as read (the processes summed per key, before the liveness
/// check of each sample).
struct Tables {
    devices: Vec<BlockDeviceCounters>,
    processes: StdHashMap<ProcKey, BlockProcessCounters>,
}

/// The health record from the summed BLOCK_HEALTH counters.
fn health_record(health: &[u64; HEALTH_COUNTERS as usize]) -> BlockProbeHealth {
    let get = |h: Health| health[h as usize];
    BlockProbeHealth {
        events: vec![
            get(Health::IoStartEvents),
            get(Health::RqInsertEvents),
            get(Health::RqIssueEvents),
            get(Health::RqCompleteEvents),
            0, // block_io_done: retired
            get(Health::RqMergeEvents),
        ],
        reqs_full: get(Health::ReqsFull),
        procs_full: get(Health::ProcsFull),
        devs_full: get(Health::DevsFull),
        issue_unmatched: get(Health::IssueUnmatched),
        complete_unmatched: get(Health::CompleteUnmatched),
        read_errors: get(Health::ReadErrors),
        ..Default::default()
    }
}

fn take<T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>>(ebpf: &mut Ebpf, name: &str) -> Result<T> {
    let map = ebpf.take_map(name).ok_or_else(|| anyhow!("map {name} is not in the eBPF object"))?;
    T::try_from(map).with_context(|| format!("map {name}"))
}

impl BlockMaps {
    /// `attached`: the program attached in each slot of [`PROGRAMS`] (from [`attach`]).
    pub fn take(ebpf: &mut Ebpf, attached: &[Option<String>]) -> Result<BlockMaps> {
        Ok(BlockMaps {
            reqs: take(ebpf, BLOCK_REQS_MAP)?,
            dev_slots: take(ebpf, BLOCK_DEV_SLOTS_MAP)?,
            known_dev_slots: Vec::new(),
            dev_claims_seen: None,
            devs: take(ebpf, BLOCK_DEV_MAP)?,
            procs: take(ebpf, BLOCK_PROC_MAP)?,
            proc_keys: MappedKeys::new(
                ebpf.take_map(BLOCK_PROC_KEYS_MAP)
                    .ok_or_else(|| anyhow!("map {BLOCK_PROC_KEYS_MAP} is not in the eBPF object"))?,
                BLOCK_PROC_KEYS_MAP,
                PROCS_MAX,
            )?,
            health: take(ebpf, BLOCK_HEALTH_MAP)?,
            batch: true,
            last_purge: Instant::now(),
            stale_evicted: 0,
            kthreads: StdHashMap::new(),
            alive_checked: None,
            program_stats: Default::default(),
            claims: block_claim::Claims::take(ebpf, attached),
            last_tables: Default::default(),
            prefetched: None,
            prefetched_devices: None,
            sees_requests: ["block_rq_issue", "block_rq_complete"]
                .iter()
                .all(|p| PROGRAMS.iter().zip(attached).any(|((slot, _), a)| slot == p && a.is_some())),
            programs: attached
                .iter()
                .map(|name| {
                    let name = name.as_deref()?;
                    ebpf.program(name).and_then(|p| p.fd().ok()).and_then(|fd| fd.try_clone().ok())
                })
                .collect(),
        })
    }

    /// The events counted so far (every program counts its own first): the health counters are
    /// read now and kept for the next [`BlockMaps::read`], which then reads the tables after them
    /// as it would after its own read of the counters.
    pub fn events_now(&mut self) -> Result<u64> {
        if !self.sees_requests {
            bail!("the block layer's issue and completion programs are not both attached");
        }
        let health = self.health_counters()?;
        self.prefetched = Some(health);
        // The devices' counters now too, so that they and /proc/diskstats (read next) are
        // microseconds apart: read with the other maps, after the rest of /proc, a lone request
        // issued and completed in between was in the eBPF interval and the next diskstats one
        // ("100 % apart" in a quiet interval after mkfs.ext4: ext4's lazy inode-table init).
        self.prefetched_devices = Some(self.devices_now(&health)?);
        let events = [
            Health::IoStartEvents,
            Health::RqInsertEvents,
            Health::RqIssueEvents,
            Health::RqCompleteEvents,
            Health::RqMergeEvents,
        ];
        Ok(events.iter().fold(0u64, |a, h| a.wrapping_add(health[*h as usize])))
    }

    /// The devices' counters as of `health`: the tables as last read while the counts stand still.
    fn devices_now(&mut self, health: &[u64; HEALTH_COUNTERS as usize]) -> Result<Vec<BlockDeviceCounters>> {
        if let Some(last) = self.last_tables.get(health, Instant::now()) {
            return Ok(last.devices.clone());
        }
        let mut devices = Vec::new();
        for (i, slot) in self.device_slots(health[Health::DevSlotsClaimed as usize])? {
            let per_cpu = self.devs.get(&i, 0).context("reading the BLOCK_DEV map")?;
            let mut d = sum_devices(slot.key as u32, &per_cpu);
            d.in_flight = slot.in_flight;
            devices.push(d);
        }
        devices.sort_by_key(|d| (d.major, d.minor));
        Ok(devices)
    }

    /// Reads every map into `out` (block_devices, io_processes, block_health).
    pub fn read(&mut self, out: &mut BpfSample) -> Result<()> {
        let health = match self.prefetched.take() {
            Some(h) => h,
            None => self.health_counters()?,
        };
        // Every block program counts its event in BLOCK_HEALTH first: while those counts stand
        // still, no device's or process's counters moved, and the tables as last read are
        // reused (a system call per device and per process slot less, each sample of a quiet
        // machine). Counted before the tables are written, and read here before the tables are,
        // so an event the counts show was in the tables when they were read. Read anyway once
        // every SLOW_REFRESH.
        let now = Instant::now();
        let devices = match self.prefetched_devices.take() {
            Some(d) => d,
            None => self.devices_now(&health)?,
        };
        out.rq_issue = devices.iter().map(issued_counts).collect();
        out.block_devices = devices;

        // The (process, device) pairs and their slots. Which processes are gone is decided
        // *before* reading: their counters read now are final.
        // While the tables stand still a process's counters are final whenever it exits: it is
        // checked once per LIVENESS_FRESH then, not every sample (a kill(2) per process).
        let pairs = process_slots(self.proc_keys.iter());
        let quiet = self.last_tables.get(&health, now).is_some();
        let still = quiet && self.alive_checked.is_some_and(|t| now.duration_since(t) < LIVENESS_FRESH);
        let tgids: HashSet<u32> = if still { HashSet::new() } else { pairs.keys().map(|k| k.tgid).collect() };
        if !still {
            self.alive_checked = Some(now);
        }
        let mut dead = HashSet::new();
        for tgid in tgids {
            match self.kthreads.get(&tgid) {
                Some(_) if crate::util::process_exists(tgid) => {}
                _ => match proc_flags(tgid) {
                    Some(flags) => {
                        self.kthreads.insert(tgid, flags & PF_KTHREAD != 0);
                    }
                    None => {
                        dead.insert(tgid);
                    }
                },
            }
        }
        // The tables kept, borrowed rather than copied (a quiet sample reads them only).
        let last = self.last_tables.get(&health, now);
        let mut processes = Vec::new();
        let mut per_cpu = Vec::new();
        let mut summed = StdHashMap::with_capacity(if quiet { 0 } else { pairs.len() });
        for (key, slots) in &pairs {
            let cached = last.and_then(|last| last.processes.get(key));
            let counters = match cached {
                Some(c) => c.clone(),
                None => {
                    per_cpu.clear();
                    for &i in slots {
                        per_cpu.extend(
                            self.procs.get(&i, 0).context("reading the BLOCK_PROC map")?.iter().copied(),
                        );
                    }
                    sum_process(*key, &per_cpu)
                }
            };
            if !quiet && !dead.contains(&key.tgid) {
                summed.insert(*key, counters.clone());
            }
            let mut p = counters;
            p.exited = dead.contains(&key.tgid);
            p.kernel_thread = self.kthreads.get(&key.tgid).copied().unwrap_or(false)
                || (p.exited && looks_like_kernel_thread(&p.comm));
            processes.push(p);
        }
        processes.sort_by_key(|p| (p.pid, p.major, p.minor));
        self.free_process_slots(pairs.iter().filter(|(k, _)| dead.contains(&k.tgid)).flat_map(|(_, s)| s));
        for tgid in &dead {
            self.kthreads.remove(tgid);
        }
        out.io_processes = processes;
        match self.last_tables.value_mut().filter(|_| quiet) {
            Some(tables) => tables.processes.retain(|key, _| !dead.contains(&key.tgid)),
            None => {
                let tables = Tables { devices: out.block_devices.clone(), processes: summed };
                self.last_tables.put(health, tables, now);
            }
        }

        // Nothing to purge while no slot is taken (the programs' count of taken slots, less
        // those this process emptied, is exactly 0: a count that drifted below stays non-zero,
        // wrapped).
        let taken = health[Health::SlotsUsed as usize].wrapping_sub(self.stale_evicted);
        if self.last_purge.elapsed() >= PURGE_EVERY && taken != 0 {
            self.last_purge = Instant::now();
            self.stale_evicted += self.purge_stale(crate::util::monotonic_ns());
        }
        let mut h = health_record(&health);
        let stats: Vec<super::prog_stats::ProgStats> =
            self.program_stats.read(&self.programs).iter().map(|s| s.unwrap_or_default()).collect();
        h.missed = stats.iter().map(|s| s.recursion_misses).collect();
        h.run_time_ns = stats.iter().map(|s| s.run_time_ns).collect();
        h.run_cnt = stats.iter().map(|s| s.run_cnt).collect();
        h.stale_evicted = self.stale_evicted;
        // Slots taken minus emptied, over all CPUs, less those this process emptied itself.
        h.reqs_entries = health[Health::SlotsUsed as usize].saturating_sub(self.stale_evicted);
        h.reqs_capacity = u64::from(REQ_SLOTS);
        h.procs_entries = self.proc_keys.iter().filter(|&k| k != 0).count() as u64;
        h.procs_capacity = u64::from(PROCS_MAX);
        h.devs_entries = out.block_devices.len() as u64;
        h.devs_capacity = u64::from(DEV_SLOTS);
        out.block_health = h;
        Ok(())
    }

    /// Frees the process table's `slots` (read for the last time): their counters are zeroed on
    /// every CPU, then the key is cleared. A completion of the dead process counted between the
    /// two (its last request, completing just then) would be inherited by the slot's next owner:
    /// a rare count of one request, against a table that would otherwise fill with the dead.
    fn free_process_slots<'a>(&mut self, slots: impl Iterator<Item = &'a u32>) {
        let Ok(cpus) = aya::util::nr_cpus() else { return };
        for &i in slots {
            let zeros = PerCpuValues::try_from(vec![ProcStats::default(); cpus]);
            // Failing to zero leaves the slot taken (freed next time), never a stale count.
            if zeros.is_ok_and(|z| self.procs.set(i, z, 0).is_ok()) {
                self.proc_keys.clear(i as usize);
                if let Some(claims) = &mut self.claims {
                    claims.free_process_slot(i);
                }
            }
        }
    }

    /// The device table's taken slots: (index, slot). The whole table is read only when a device
    /// was added since the last time (slots are never freed), else just the slots known.
    /// `claims`: Health::DevSlotsClaimed, read before the slots.
    fn device_slots(&mut self, claims: u64) -> Result<Vec<(u32, DevSlot)>> {
        if self.dev_claims_seen != Some(claims) {
            // Claims counted first: one made during the scan is found now or by the next scan.
            self.dev_claims_seen = Some(claims);
            self.known_dev_slots.clear();
            for i in 0..DEV_SLOTS {
                let slot = self.dev_slots.get(&i, 0).context("reading the BLOCK_DEV_SLOTS map")?;
                if slot.key != 0 {
                    self.known_dev_slots.push(i);
                }
            }
        }
        let mut slots = Vec::with_capacity(self.known_dev_slots.len());
        for &i in &self.known_dev_slots {
            slots.push((i, self.dev_slots.get(&i, 0).context("reading the BLOCK_DEV_SLOTS map")?));
        }
        Ok(slots)
    }

    /// Every slot of the request table, in batches where the kernel has them: one lookup per slot
    /// was 32,768 system calls, ~45 ms once a minute (~12 ms in batches). A slot unreadable one
    /// by one is skipped.
    fn request_slots(&mut self) -> Vec<(u32, ReqSlot)> {
        use aya::maps::IterableMap;
        use std::os::fd::AsFd;
        let fd = self.reqs.map().fd().as_fd();
        let read = super::map_batch::lookup_if_supported::<u32, ReqSlot>(
            &mut self.batch,
            fd,
            None,
            false,
            REQ_SLOTS as usize,
        );
        match read {
            Ok(Some(entries)) => {
                entries.into_iter().filter_map(|e| Some((e.key, *e.values.first()?))).collect()
            }
            _ => (0..REQ_SLOTS).filter_map(|i| Some((i, self.reqs.get(&i, 0).ok()?))).collect(),
        }
    }

    /// Every BLOCK_HEALTH counter summed over the CPUs (wrapping: a per-CPU gauge such as
    /// SlotsUsed may be below zero on one CPU), in one batch read where the kernel has them
    /// (13 lookups a sample otherwise).
    fn health_counters(&mut self) -> Result<[u64; HEALTH_COUNTERS as usize]> {
        use aya::maps::IterableMap;
        use std::os::fd::AsFd;
        let mut sums = [0u64; HEALTH_COUNTERS as usize];
        let cpus = aya::util::nr_cpus().map_err(|(what, e)| anyhow!("{what}: {e}"))?;
        let fd = self.health.map().fd().as_fd();
        let n = HEALTH_COUNTERS as usize;
        let read =
            super::map_batch::lookup_if_supported::<u32, u64>(&mut self.batch, fd, Some(cpus), false, n);
        match read.context("reading the BLOCK_HEALTH map")? {
            Some(entries) if entries.len() == n => {
                for e in entries.iter().filter(|e| (e.key as usize) < n) {
                    sums[e.key as usize] = e.values.iter().fold(0u64, |a, b| a.wrapping_add(*b));
                }
            }
            _ => {
                for (i, sum) in sums.iter_mut().enumerate() {
                    let per_cpu = self.health.get(&(i as u32), 0).context("reading the BLOCK_HEALTH map")?;
                    *sum = per_cpu.iter().fold(0u64, |a, b| a.wrapping_add(*b));
                }
            }
        }
        Ok(sums)
    }

    /// Empties request slots taken more than a minute ago: their completion was lost (a partial
    /// completion moved the sector, a request was issued before attach and its events never
    /// matched, or the kernel skipped a run) and no other request has reused the slot since. One
    /// that still counted as in flight is taken off its device's in-flight figure. Neither is
    /// atomic with the programs (a slot reused or an issue counted at that very moment may be
    /// lost), so only clearly dead slots are touched.
    fn purge_stale(&mut self, now_ns: u64) -> u64 {
        let stale: Vec<(u32, ReqSlot)> = self
            .request_slots()
            .into_iter()
            .filter(|(_, s)| {
                // A start still to be settled holds the kernel's stamp of the request struct's
                // previous use, which can be any age: such a request (not yet issued) is left to
                // be reused.
                s.tag != 0
                    && s.info.flags & REQ_START_FROM_RQ == 0
                    && now_ns.saturating_sub(s.info.start_ns.max(s.info.issue_ns)) > STALE_NS
            })
            .collect();
        // Where each device sits in the device table, looked up once for all the stale requests.
        let device_index: StdHashMap<u64, u32> =
            if stale.iter().any(|(_, s)| s.info.flags & REQ_IN_FLIGHT != 0) {
                let claims = self.health_counters().map(|h| h[Health::DevSlotsClaimed as usize]);
                let slots = claims.and_then(|c| self.device_slots(c));
                slots.unwrap_or_default().into_iter().map(|(i, d)| (d.key, i)).collect()
            } else {
                StdHashMap::new()
            };
        let mut n = 0;
        for (i, s) in stale {
            if self.reqs.set(i, ReqSlot::default(), 0).is_ok() {
                n += 1;
                if s.info.flags & REQ_IN_FLIGHT != 0 {
                    // Not atomic against the programs' adds: a rare count off by one, for a
                    // request long gone anyway. The slot is read afresh for each request.
                    if let Some(&d) = device_index.get(&dev_key(s.info.dev)) {
                        if let Ok(mut slot) = self.dev_slots.get(&d, 0) {
                            slot.in_flight = slot.in_flight.saturating_sub(1);
                            let _ = self.dev_slots.set(d, slot, 0);
                        }
                    }
                }
            }
        }
        n
    }
}

/// The process table's (process, device) pairs, each with the slots it holds (usually one), from
/// the keys of every slot in index order.
fn process_slots(keys: impl Iterator<Item = u64>) -> StdHashMap<ProcKey, Vec<u32>> {
    let mut pairs: StdHashMap<ProcKey, Vec<u32>> = StdHashMap::new();
    for (i, packed) in keys.enumerate() {
        if let Some(key) = ProcKey::unpacked(packed) {
            pairs.entry(key).or_default().push(i as u32);
        }
    }
    pairs
}

/// /proc/PID/stat's flags (field 9), or None when the process is gone.
fn proc_flags(tgid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{tgid}/stat")).ok()?;
    // comm may contain spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(6)?.parse().ok()
}

/// For a process already gone when first seen: kernel threads by their well-known names.
fn looks_like_kernel_thread(comm: &str) -> bool {
    ["kworker/", "jbd2/", "kswapd", "flush-", "xfsaild", "md", "loop"].iter().any(|p| comm.starts_with(p))
}

fn add_vec(into: &mut [u64], from: &[u64]) {
    for (a, b) in into.iter_mut().zip(from) {
        *a += b;
    }
}

/// One device's per-CPU values summed.
pub fn sum_devices(dev: u32, per_cpu: &[DevStats]) -> BlockDeviceCounters {
    let (major, minor) = kernel_dev_major_minor(dev);
    let empty = || BlockDirCounters {
        queue_hist: vec![0; HIST_BUCKETS],
        device_hist: vec![0; HIST_BUCKETS],
        size_hist: vec![0; HIST_BUCKETS],
        ..Default::default()
    };
    let mut out = BlockDeviceCounters {
        major,
        minor,
        read: empty(),
        write: empty(),
        other: empty(),
        depth_hist: vec![0; DEPTH_BUCKETS],
        ..Default::default()
    };
    let mut flag_requests = [0u64; RWBS_FLAG_COUNT];
    let mut flag_bytes = [0u64; RWBS_FLAG_COUNT];
    for c in per_cpu {
        out.read.accumulate(&c.dirs[DIR_READ]);
        out.write.accumulate(&c.dirs[DIR_WRITE]);
        out.other.accumulate(&c.dirs[DIR_OTHER]);
        add_vec(&mut flag_requests, &c.flag_requests);
        add_vec(&mut flag_bytes, &c.flag_bytes);
        add_vec(&mut out.depth_hist, &c.depth_hist);
        out.depth_sum += c.depth_sum;
        out.depth_samples += c.depth_samples;
    }
    let rb = |bit: u32| {
        let i = bit.trailing_zeros() as usize;
        RequestsBytes { requests: flag_requests[i], bytes: flag_bytes[i] }
    };
    out.flags = BlockFlagCounters {
        read: rb(RWBS_READ),
        write: rb(RWBS_WRITE),
        discard: rb(RWBS_DISCARD),
        flush: rb(RWBS_FLUSH),
        sync: rb(RWBS_SYNC),
        metadata: rb(RWBS_META),
        readahead: rb(RWBS_READAHEAD),
        fua: rb(RWBS_FUA),
    };
    out
}

/// One (process, device)'s per-CPU values summed. comm and cgroup come from whichever CPU wrote them.
pub fn sum_process(key: ProcKey, per_cpu: &[ProcStats]) -> BlockProcessCounters {
    let (major, minor) = kernel_dev_major_minor(key.dev);
    let mut out = BlockProcessCounters {
        pid: key.tgid,
        major,
        minor,
        lat_hist: vec![0; HIST_BUCKETS],
        ..Default::default()
    };
    for c in per_cpu {
        if out.comm.is_empty() && c.comm[0] != 0 {
            out.comm = crate::util::c_string(&c.comm);
        }
        if out.cgroup_id == 0 {
            out.cgroup_id = c.cgroup_id;
        }
        out.accumulate(c);
    }
    out
}

/// The block-layer family: per-disk and per-process request counters, latencies, health.
#[derive(Default)]
pub struct BlockFamily {
    layout: Option<BlockLayout>,
    ready: Vec<Result<(), String>>,
    events: Option<BlockEvents>,
    /// The programs run as BTF tracepoints (the kernel's BTF describes the request).
    btf: bool,
    notes: Vec<String>,
    maps: Option<BlockMaps>,
}

impl BlockFamily {
    /// How many block-layer events (a request's start, insertion, issue, completion, merge) the
    /// programs have counted so far; None when they do not run or the count cannot be read. The
    /// count read here is the one the next read keys its block tables by.
    pub fn events(&mut self) -> Option<u64> {
        self.maps.as_mut()?.events_now().ok()
    }

    fn request_btf<'a>(&self, setup: &super::family::Setup<'a>) -> Option<&'a aya::Btf> {
        setup.btf.filter(|_| self.btf).map(|k| k.aya())
    }
}

impl super::family::Family for BlockFamily {
    fn name(&self) -> &'static str {
        "block"
    }

    fn plan(&mut self, setup: &mut super::family::Setup) {
        let (mut block_layout, ready, events) = layout(setup.tracefs, setup.hidden());
        // The programs on the busiest events (every block request) run as BTF tracepoints where
        // the kernel's BTF describes the structs they read (far cheaper per event: no record is
        // built, the fields are plain loads); else as classic ones.
        if let (Some(k), true) = (setup.btf, setup.options.btf_tracepoints) {
            match request_layout(k) {
                Ok(request) => {
                    block_layout.request = request;
                    self.btf = true;
                }
                Err(e) => self.notes.push(format!("block probes on classic tracepoints: {e:#}")),
            }
        }
        (self.layout, self.ready, self.events) = (Some(block_layout), ready, Some(events));
    }

    fn globals<'s>(&'s self, loader: &mut aya::EbpfLoader<'s>) {
        loader.override_global(
            BLOCK_LAYOUT_GLOBAL,
            self.layout.as_ref().unwrap_or(&BlockLayout::UNSET),
            true,
        );
    }

    fn loads<'a>(&'a self, setup: &super::family::Setup<'a>, _: &[Planned<'a>]) -> Vec<Planned<'a>> {
        let Some(events) = &self.events else { return Vec::new() };
        loads(&self.ready, events, self.request_btf(setup), setup.options.refuse_block_twin.as_deref())
    }

    fn attach(
        &mut self,
        ebpf: &mut Ebpf,
        setup: &mut super::family::Setup,
        statuses: &mut Vec<BpfProgramStatus>,
    ) {
        let Some(events) = &self.events else { return };
        let refuse = setup.options.refuse_block_twin.clone();
        let (programs, attached, fallback_note) =
            attach(ebpf, &self.ready, events, self.request_btf(setup), refuse.as_deref());
        self.notes.extend(fallback_note);
        let first = statuses.len();
        statuses.extend(programs);
        match BlockMaps::take(ebpf, &attached) {
            Ok(maps) => self.maps = Some(maps),
            Err(e) => {
                // Without their maps the programs' counts cannot be read: report them as not working.
                for p in &mut statuses[first..] {
                    p.error = Some(format!("{e:#}"));
                }
            }
        }
    }

    fn notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    fn read(&mut self, shared: &mut super::family::Shared, sample: &mut BpfSample) -> Vec<String> {
        let mut errors = Vec::new();
        if let Some(block) = &mut self.maps {
            if let Err(e) = block.read(sample) {
                errors.push(format!("{e:#}"));
            }
        }
        let names = shared.get_or_insert_with(super::cgroup::CgroupNames::default);
        for p in &mut sample.io_processes {
            p.cgroup = names.path(p.cgroup_id);
        }
        errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::tracefs::parse_format;

    fn format(name: &str) -> EventFormat {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tracefs").join(name);
        parse_format(&fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn layouts_come_from_the_format_files() {
        let issue = event_layout(&format("block_rq_issue-6.18.format")).unwrap();
        assert_eq!(
            issue,
            EventLayout {
                configured: 1,
                dev_offset: 8,
                sector_offset: 16,
                size_offset: 28,
                size_in_sectors: 0,
                rwbs_offset: 34,
                compact: 1,
                rwbs_in_head: 1,
            }
        );
        // block_rq_complete has no `bytes`: nr_sector (× 512) instead.
        let complete = event_layout(&format("block_rq_complete-6.18.format")).unwrap();
        assert_eq!((complete.size_offset, complete.size_in_sectors, complete.rwbs_offset), (24, 1, 34));
        assert_eq!((complete.compact, complete.rwbs_in_head), (1, 1));
        // Linux 5.4: an 8-byte rwbs at 32 is still enough, but it is not after an ioprio: read apart.
        let old = event_layout(&format("block_rq_issue-5.4.format")).unwrap();
        assert_eq!((old.rwbs_offset, old.compact, old.rwbs_in_head), (32, 1, 0));
    }

    #[test]
    fn an_event_missing_from_tracefs_leaves_only_its_program_off() {
        // A tracefs with every event but block_io_start (as on kernels before 6.5).
        let dir = tempfile::tempdir().unwrap();
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tracefs");
        for (_, event) in live_programs().filter(|(_, e)| *e != "block_io_start") {
            let events = dir.path().join("events/block").join(event);
            fs::create_dir_all(&events).unwrap();
            let source = if event == "block_rq_complete" {
                "block_rq_complete-6.18.format"
            } else {
                "block_rq_issue-6.18.format"
            };
            fs::copy(fixtures.join(source), events.join("format")).unwrap();
        }
        let (l, results, events) = layout(dir.path(), &[]);
        assert_eq!(results.len(), live_programs().count());
        for ((program, _), r) in live_programs().zip(&results) {
            if program == "block_io_start" {
                let err = r.as_ref().unwrap_err();
                assert!(err.contains("events/block/block_io_start/format"), "{err}");
                assert!(err.contains("fallback block:block_getrq"), "{err}");
            } else {
                assert!(r.is_ok(), "{program}: {r:?}");
            }
        }
        assert_eq!(l.io_start.configured, 0);
        assert_eq!(events.io_start, "block_io_start");
        assert_eq!((l.rq_issue.configured, l.rq_complete.size_in_sectors), (1, 1));

        // With block_getrq there (every kernel has it), the submitter is seen there instead: its
        // record has the request's dev, sector and size (nr_sector) and rwbs.
        let getrq = dir.path().join("events/block/block_getrq");
        fs::create_dir_all(&getrq).unwrap();
        fs::copy(fixtures.join("block_getrq-6.18.format"), getrq.join("format")).unwrap();
        let (l, results, events) = layout(dir.path(), &[]);
        assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
        assert_eq!(events.io_start, "block_getrq");
        assert!(events.io_start_fallback());
        assert_eq!(events.event_of("block_io_start", "block_io_start"), "block_getrq");
        assert_eq!(events.event_of("block_rq_issue", "block_rq_issue"), "block_rq_issue");
        assert_eq!((l.io_start.configured, l.io_start.size_in_sectors, l.io_start.dev_offset), (1, 1, 8));
        // A tracepoint hidden on request is treated as missing.
        let (_, results, _) = layout(dir.path(), &["block:block_getrq".to_string()]);
        assert!(results[0].as_ref().unwrap_err().contains("hidden on request"), "{results:?}");
    }

    #[test]
    fn an_unusual_layout_is_read_field_by_field() {
        let text = "name: x\nID: 1\nformat:\n\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
                    \tfield:sector_t sector;\toffset:24;\tsize:8;\tsigned:0;\n\
                    \tfield:unsigned int bytes;\toffset:32;\tsize:4;\tsigned:0;\n\
                    \tfield:char rwbs[8];\toffset:36;\tsize:8;\tsigned:0;\n";
        let l = event_layout(&parse_format(text).unwrap()).unwrap();
        assert_eq!((l.sector_offset, l.size_offset, l.compact, l.rwbs_in_head), (24, 32, 0, 0));
    }

    #[test]
    fn a_short_rwbs_is_refused() {
        let text = "name: x\nID: 1\nformat:\n\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
                    \tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n\
                    \tfield:unsigned int bytes;\toffset:24;\tsize:4;\tsigned:0;\n\
                    \tfield:char rwbs[6];\toffset:28;\tsize:6;\tsigned:0;\n";
        let err = event_layout(&parse_format(text).unwrap()).unwrap_err().to_string();
        assert!(err.contains("`rwbs` is 6 bytes, expected at least 8"), "{err}");
    }

    fn stats() -> DevStats {
        let d = DirStats {
            issued_requests: 0,
            issued_bytes: 0,
            completed_requests: 0,
            completed_bytes: 0,
            queue_ns_sum: 0,
            queue_count: 0,
            device_ns_sum: 0,
            device_count: 0,
            sched_requests: 0,
            sched_ns_sum: 0,
            queue_hist: [0; HIST_BUCKETS],
            device_hist: [0; HIST_BUCKETS],
            size_hist: [0; HIST_BUCKETS],
        };
        DevStats {
            dirs: [d; 3],
            flag_requests: [0; RWBS_FLAG_COUNT],
            flag_bytes: [0; RWBS_FLAG_COUNT],
            depth_hist: [0; DEPTH_BUCKETS],
            depth_sum: 0,
            depth_samples: 0,
        }
    }

    #[test]
    fn device_values_are_summed_over_cpus() {
        let mut a = stats();
        a.dirs[DIR_WRITE].issued_requests = 3;
        a.dirs[DIR_WRITE].size_hist[17] = 3;
        a.flag_requests[4] = 2; // sync
        a.flag_bytes[4] = 8192;
        a.depth_hist[1] = 3;
        a.depth_sum = 3;
        a.depth_samples = 3;
        let mut b = stats();
        b.dirs[DIR_WRITE].issued_requests = 1;
        b.dirs[DIR_WRITE].size_hist[17] = 1;
        b.dirs[DIR_READ].device_hist[5] = 7;
        b.depth_hist[2] = 1;
        b.depth_sum = 2;
        b.depth_samples = 1;
        let d = sum_devices((7 << 20) | 4, &[a, b]);
        assert_eq!((d.major, d.minor), (7, 4));
        assert_eq!(d.write.issued_requests, 4);
        assert_eq!(d.write.size_hist[17], 4);
        assert_eq!(d.read.device_hist[5], 7);
        assert_eq!(d.flags.sync, RequestsBytes { requests: 2, bytes: 8192 });
        assert_eq!(d.flags.read, RequestsBytes::default());
        assert_eq!((d.depth_hist[1], d.depth_hist[2], d.depth_sum, d.depth_samples), (3, 1, 5, 4));
    }

    #[test]
    fn process_values_are_summed_and_comm_taken_from_the_cpu_that_wrote_it() {
        let zero = ProcStats::default();
        let mut a = zero;
        a.write_requests = 2;
        a.write_bytes = 131072;
        let mut b = zero;
        b.comm[..2].copy_from_slice(b"dd");
        b.cgroup_id = 42;
        b.write_requests = 1;
        b.write_bytes = 65536;
        b.lat_hist[9] = 1;
        let p = sum_process(ProcKey { tgid: 1234, dev: (259 << 20) | 1 }, &[a, b]);
        assert_eq!((p.pid, p.major, p.minor, p.comm.as_str(), p.cgroup_id), (1234, 259, 1, "dd", 42));
        assert_eq!((p.write_requests, p.write_bytes, p.lat_hist[9]), (3, 196608, 1));
    }

    #[test]
    fn a_pair_holding_two_slots_is_read_from_both() {
        let dd = ProcKey { tgid: 1234, dev: 7 << 20 };
        let cat = ProcKey { tgid: 99, dev: 7 << 20 };
        let keys = [0, dd.packed(), cat.packed(), 0, dd.packed()];
        let pairs = process_slots(keys.into_iter());
        assert_eq!(pairs.len(), 2);
        assert_eq!(pairs[&dd], [1, 4]);
        assert_eq!(pairs[&cat], [2]);
    }

    #[test]
    fn proc_flags_marks_kernel_threads() {
        // pid 2 is kthreadd, a kernel thread; this test process is not.
        assert_ne!(proc_flags(2).unwrap() & PF_KTHREAD, 0);
        assert_eq!(proc_flags(std::process::id()).unwrap() & PF_KTHREAD, 0);
        assert_eq!(proc_flags(u32::MAX), None);
        assert!(looks_like_kernel_thread("kworker/u8:1") && !looks_like_kernel_thread("dd"));
    }
}
