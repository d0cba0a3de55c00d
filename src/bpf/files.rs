//! The per-file attribution's userspace half: the extra offsets it needs from tracefs, attaching
//! `writeback_single_inode`, and reading the FILE_IO map (summed over CPUs). Merging writeback
//! keyed by a backing device onto its filesystem and finding paths is src/bpf/resolve/files.rs.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use aya::maps::{Array, MapData, PerCpuHashMap};
use aya::Ebpf;
use ioscope_common::files::{
    BioLayout, FileCounters, FileKey, FileLayout, FILE_BIO_ON_MAP, FILE_IO_INSERTS_MAP, FILE_IO_MAP,
    KEY_SB_DEV,
};
use ioscope_common::page_cache::DioMemo;

use super::counters::Accumulate;
use super::kernel_btf::KernelBtf;
use super::kfunc::{Hook, Kprobes};
use super::tracefs;
use crate::sample::{BpfProgramStatus, FileProcess};

pub const CATEGORY: &str = "writeback";
pub const EVENT: &str = "writeback_single_inode";
pub use ioscope_common::files::BIO_PROGRAM;
pub use ioscope_common::files::WRITEBACK_PROGRAM as PROGRAM;

/// Reads the four format files the per-file counting needs. Each part whose fields are missing
/// stays off (its `*_ok` is 0); the error says which. Returns the layout and whether
/// `writeback_single_inode` can be attached.
pub fn layout(tracefs_dir: &Path) -> (FileLayout, [Result<(), String>; 5], Vec<String>) {
    let mut l = FileLayout::UNSET;
    let mut notes = Vec::new();
    let read = |category: &str, event: &str| tracefs::read_event_format(tracefs_dir, category, event);
    let mut note = |what: &str, r: Result<()>| {
        if let Err(e) = r {
            notes.push(format!("per-file {what} off: {e:#}"));
        }
    };
    note(
        "reads",
        read("filemap", "mm_filemap_add_to_page_cache").and_then(|f| {
            l.add_dev = f.field_sized("s_dev", 4)?.offset;
            l.add_ok = 1;
            Ok(())
        }),
    );
    // Optional, without a note (before 6.12 there is no such event): a fault's page as demand.
    let _ = read("filemap", "mm_filemap_fault").and_then(|f| {
        l.fault_dev = f.field_sized("s_dev", 4)?.offset;
        l.fault_ino = f.field_sized("i_ino", 8)?.offset;
        l.fault_index = f.field_sized("index", 8)?.offset;
        l.fault_ok = 1;
        Ok(())
    });
    note(
        "dirtying",
        super::renamed::read_event_format(tracefs_dir, "writeback", "writeback_dirty_folio").and_then(|f| {
            l.dirty_name = f.field_sized("name", 32)?.offset;
            l.dirty_ok = 1;
            Ok(())
        }),
    );
    note(
        "direct I/O",
        read("iomap", "iomap_dio_rw_begin").and_then(|f| {
            l.dio_dev = f.field_sized("dev", 4)?.offset;
            l.dio_ino = f.field_sized("ino", 8)?.offset;
            l.dio_ok = 1;
            Ok(())
        }),
    );
    let sync_ra = read("readahead", "page_cache_sync_ra").and_then(|f| {
        l.sync_ra_dev = f.field_sized("s_dev", 4)?.offset;
        l.sync_ra_ino = f.field_sized("i_ino", 8)?.offset;
        l.sync_ra_index = f.field_sized("index", 8)?.offset;
        l.sync_ra_req_count = f.field_sized("req_count", 8)?.offset;
        l.sync_ra_ok = 1;
        Ok(())
    });
    let iter_text = std::fs::read_to_string(tracefs_dir.join("events/iomap/iomap_iter/format"));
    let iter = read("iomap", "iomap_iter").and_then(|f| {
        let text = iter_text.as_deref().unwrap_or("");
        l.iter_dev = f.field_sized("dev", 4)?.offset;
        l.iter_ino = f.field_sized("ino", 8)?.offset;
        l.iter_flags = f.field_sized("flags", 4)?.offset;
        l.iter_write_flag =
            flag_bit(text, "WRITE").ok_or_else(|| anyhow!("iomap_iter prints no WRITE flag"))?;
        l.iter_direct_flag =
            flag_bit(text, "DIRECT").ok_or_else(|| anyhow!("iomap_iter prints no DIRECT flag"))?;
        l.iter_ok = 1;
        Ok(())
    });
    let wsi = read(CATEGORY, EVENT).and_then(|f| {
        l.wsi_name = f.field_sized("name", 32)?.offset;
        l.wsi_ino = f.field_sized("ino", 8)?.offset;
        l.wsi_wrote = f.field_sized("wrote", 8)?.offset;
        l.wsi_ok = 1;
        Ok(())
    });
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    l.page_shift = page.trailing_zeros();
    let ewr = read("ext4", "ext4_writepages_result").and_then(|f| {
        l.ewr_dev = f.field_sized("dev", 4)?.offset;
        l.ewr_ino = f.field_sized("ino", 8)?.offset;
        l.ewr_pages = f.field_sized("pages_written", 4)?.offset;
        l.ewr_ok = 1;
        Ok(())
    });
    let iwf =
        super::renamed::read_event_format(tracefs_dir, "iomap", "iomap_writeback_folio").and_then(|f| {
            l.iwf_dev = f.field_sized("dev", 4)?.offset;
            l.iwf_ino = f.field_sized("ino", 8)?.offset;
            l.iwf_size = f.field_sized("size", 8)?.offset;
            l.iwf_offset = f.field_sized("offset", 8)?.offset;
            // Before folios (5.10) iomap_writepage's `length` was an `unsigned int` (the page's
            // size; `offset` its file position, an `unsigned long`).
            match f.field_sized("length", 4) {
                Ok(short) => {
                    l.iwf_length = short.offset;
                    l.iwf_short_length = 1;
                }
                Err(_) => l.iwf_length = f.field_sized("length", 8)?.offset,
            }
            l.iwf_ok = 1;
            Ok(())
        });
    let text = |r: Result<()>| r.map_err(|e| format!("{e:#}"));
    (l, [text(wsi), text(sync_ra), text(iter), text(ewr), text(iwf)], notes)
}

/// The bit of flag `name` in a `__print_flags(..., { (1 << N), "NAME" }, ...)` of a print fmt.
pub fn flag_bit(format_text: &str, name: &str) -> Option<u32> {
    let fmt = format_text.split_once("print fmt:")?.1;
    let at = fmt.find(&format!("\"{name}\""))?;
    let open = fmt[..at].rfind('{')?;
    let inner = fmt[open + 1..at].trim().trim_end_matches(',').trim();
    let shift = inner.trim_start_matches('(').strip_prefix("1 <<")?.trim().trim_end_matches(')').trim();
    let bit: u32 = shift.parse().ok()?;
    (bit < 32).then(|| 1u32 << bit)
}

/// The program with a BTF tracepoint twin, and the twin.
const ITER_PROGRAM: (&str, &str) = ("file_iomap_iter", "file_iomap_iter_btf");

/// Where `file_bio_queue_btf` finds the bio's first page, its folio and file (see [`BioLayout`]),
/// each field checked for the size the program loads.
pub fn bio_layout(btf: &KernelBtf) -> Result<BioLayout> {
    let field = |strukt: &str, member: &str, size: u32| btf.offset_sized(strukt, member, size);
    let bio_arg1 = match btf.tracepoint_args(BIO_EVENT)? {
        1 => 0,
        2 => 1,
        n => anyhow::bail!("block_bio_queue passes {n} arguments (1 or 2 expected)"),
    };
    let bio_size = btf.field_path("bio", &["bi_iter", "bi_size"])?;
    if bio_size.size != 4 {
        anyhow::bail!("struct bio member `bi_iter.bi_size` is {} bytes, expected 4", bio_size.size);
    }
    // Folios (5.16+) have the page's `mapping` and `index` at the same places; 6.16+ renamed the
    // page's `index`, so the folio's names come first.
    let (folio_mapping, folio_index) = match (field("folio", "mapping", 8), field("folio", "index", 8)) {
        (Ok(m), Ok(i)) => (m, i),
        _ => (field("page", "mapping", 8)?, field("page", "index", 8)?),
    };
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    Ok(BioLayout {
        configured: 1,
        bio_arg1,
        bio_opf: field("bio", "bi_opf", 4)?,
        bio_flags: field("bio", "bi_flags", 2)?,
        bio_size: bio_size.offset,
        bio_io_vec: field("bio", "bi_io_vec", 8)?,
        bvec_page: field("bio_vec", "bv_page", 8)?,
        page_flags: field("page", "flags", 8)?,
        page_head: field("page", "compound_head", 8)?,
        folio_mapping,
        folio_index,
        mapping_host: field("address_space", "host", 8)?,
        inode_sb: field("inode", "i_sb", 8)?,
        inode_ino: field("inode", "i_ino", 8)?,
        sb_dev: field("super_block", "s_dev", 4)?,
        op_read: btf.enum_value("req_op", "REQ_OP_READ")?,
        // An anonymous enum in every kernel's blk_types.h (its value moved: 2 in 4.x, 1 since).
        cloned_bit: btf.enum_value("", "BIO_CLONED")?.min(15),
        uptodate_bit: btf.enum_value("pageflags", "PG_uptodate")?.min(63),
        page_shift: page.trailing_zeros(),
    })
}

/// The event `file_bio_queue_btf` runs on.
pub const BIO_EVENT: &str = "block_bio_queue";

/// Attaches `file_bio_queue_btf` (with `btf`, when [`bio_layout`] succeeded) and, once attached,
/// tells the insertion to leave disk reads to it (FILE_BIO_ON). Without it a page counts as read
/// when it enters the cache (holes' zeroed pages included).
pub fn attach_bio(ebpf: &mut Ebpf, ready: Result<&aya::Btf, String>) -> BpfProgramStatus {
    let attached = ready.and_then(|btf| {
        let status = super::attach::attach_btf_tracepoint(ebpf, BIO_PROGRAM, "block", BIO_EVENT, btf)
            .map_err(|e| format!("{e:#}"))?;
        let mut on: Array<_, u32> = ebpf
            .map_mut(FILE_BIO_ON_MAP)
            .ok_or_else(|| format!("map {FILE_BIO_ON_MAP} is not in the eBPF object"))
            .and_then(|m| Array::try_from(m).map_err(|e| format!("{e:#}")))?;
        on.set(0, 1, 0).map_err(|e| format!("{FILE_BIO_ON_MAP}: {e:#}"))?;
        Ok(status)
    });
    match attached {
        Ok(status) => status,
        Err(e) => super::attach::program_status(BIO_PROGRAM, "block", BIO_EVENT, Err(e)),
    }
}

/// The programs [`attach`] attaches, with their events, in the order of its `ready`.
const PROGRAMS: [(&str, &str, &str); 5] = [
    (PROGRAM, CATEGORY, EVENT),
    ("file_sync_ra", "readahead", "page_cache_sync_ra"),
    ("file_iomap_iter", "iomap", "iomap_iter"),
    ("file_ext4_writepages", "ext4", "ext4_writepages_result"),
    ("file_iomap_writeback", "iomap", "iomap_writeback_folio"),
];

/// `file_sync_ra`'s fallbacks where `readahead:page_cache_sync_ra` is missing (before Linux 6.18):
/// for each readahead fallback on `page_cache_sync_ra()` (super::readahead_fn, 6.1+'s
/// `(ractl, req_count)`; super::readahead_510, 5.10's `(ractl, ra, req_count)`), the files
/// program for the same signature (ebpf/probes/src/files.rs) and its kprobe variant. The files
/// program runs where the readahead one was planned, from the same BTF check, so the two views'
/// split of read pages into demand and readahead rests on the same read misses.
pub const SYNC_RA_FALLBACKS: [(&str, &str, Kprobes); 2] = [
    ("readahead_sync_ra_fentry", "file_sync_ra_fentry", Kprobes { entry: "file_sync_ra_kprobe", ret: None }),
    ("readahead_sync_ra_510", "file_sync_ra_510", Kprobes { entry: "file_sync_ra_510_kprobe", ret: None }),
];

/// `file_sync_ra`'s fallback chosen for this kernel: its program, kprobe variant and function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncRaPlan {
    pub program: &'static str,
    pub kprobes: Kprobes,
    pub function: &'static str,
}

/// The fallback of `file_sync_ra` when its tracepoint is missing (`ready` is its error): the one
/// matching the readahead fallback planned for `page_cache_sync_ra` in `ra_planned`. Without one,
/// `ready` gets why (`ra_refused`: the readahead probe's own refusal, which names the kernel's
/// reason).
pub fn plan_sync_ra(
    ready: &mut Result<(), String>,
    ra_planned: &[super::readahead_fn::Planned],
    ra_refused: Option<&str>,
) -> Option<SyncRaPlan> {
    let Err(why) = ready else { return None };
    let chosen = ra_planned.iter().find_map(|p| {
        let (_, program, kprobes) = SYNC_RA_FALLBACKS.iter().find(|(ra, _, _)| *ra == p.fallback.program)?;
        Some(SyncRaPlan { program, kprobes: *kprobes, function: p.function })
    });
    if chosen.is_none() {
        *why = match ra_refused {
            Some(r) => r.to_string(),
            None => format!("{why}; no fentry fallback planned"),
        };
    }
    chosen
}

/// Attaches `writeback_single_inode`, `file_sync_ra`, `file_iomap_iter` and the filesystems'
/// writeback programs (`file_ext4_writepages`, `file_iomap_writeback`) when their layouts are
/// known, and takes the FILE_IO map. The map is read even without them: the page-cache programs
/// fill it too (without `file_sync_ra` every page read counts as readahead).
/// `file_iomap_iter` runs as its BTF tracepoint twin when `iomap_btf` is given and the twin loads.
/// `dio_has_direction`: the `iomap_dio_rw_begin` BTF twin is attached and tells the direction
/// itself (see IomapBtfLayout::dio_direction): then `file_iomap_iter` is not attached (nor listed).
/// `sync_ra`: `file_sync_ra`'s planned fallback ([`plan_sync_ra`]) with the BTF carrying the
/// kernel's functions and whether fentry is refused on request: fentry, else its kprobe variant.
pub fn attach(
    ebpf: &mut Ebpf,
    ready: [Result<(), String>; 5],
    iomap_btf: Option<&aya::Btf>,
    dio_has_direction: bool,
    sync_ra: (Option<SyncRaPlan>, Option<&aya::Btf>, bool),
) -> (Vec<BpfProgramStatus>, Option<FileMaps>) {
    let mut statuses = Vec::new();
    for ((program, category, event), r) in PROGRAMS.into_iter().zip(ready) {
        if program == ITER_PROGRAM.0 && dio_has_direction {
            continue;
        }
        if let (true, Err(_), (Some(plan), Some(btf), no_trampoline)) =
            (program == PROGRAMS[1].0, &r, sync_ra)
        {
            statuses.push(attach_sync_ra(ebpf, plan, btf, no_trampoline, &format!("{category}:{event}")));
            continue;
        }
        if let (Some(btf), true, Ok(())) = (iomap_btf, program == ITER_PROGRAM.0, &r) {
            if let Ok(status) =
                super::attach::attach_btf_tracepoint(ebpf, ITER_PROGRAM.1, category, event, btf)
            {
                statuses.push(status);
                continue;
            }
        }
        statuses.push(match r {
            Ok(()) => super::renamed::attach_tracepoint(ebpf, program, category, event),
            Err(e) => super::attach::program_status(program, category, event, Err(e)),
        });
    }
    let maps = ebpf
        .take_map(FILE_IO_MAP)
        .ok_or_else(|| anyhow!("map {FILE_IO_MAP} is not in the eBPF object"))
        .and_then(|m| Ok(PerCpuHashMap::try_from(m)?))
        .and_then(|io| Ok((io, super::inserts::EmptyGate::take(ebpf, FILE_IO_INSERTS_MAP)?)));
    match maps {
        Ok((io, gate)) => (statuses, Some(FileMaps { io, batch: true, gate })),
        Err(e) => {
            for s in statuses.iter_mut() {
                s.error.get_or_insert_with(|| format!("{e:#}"));
            }
            (statuses, None)
        }
    }
}

/// `file_sync_ra`'s fallback `plan` attached for `tracepoint`, as the readahead fallbacks are.
fn attach_sync_ra(
    ebpf: &mut Ebpf,
    plan: SyncRaPlan,
    btf: &aya::Btf,
    no_trampoline: bool,
    tracepoint: &str,
) -> BpfProgramStatus {
    let mut status = BpfProgramStatus {
        program: plan.program.to_string(),
        tracepoint: plan.function.to_string(),
        attached: true,
        mechanism: Hook::Fentry.name().to_string(),
        fallback_for: Some(tracepoint.to_string()),
        ..Default::default()
    };
    let hook = (plan.program, Hook::Fentry);
    let attached =
        super::kfunc::attach_fallback(ebpf, hook, plan.function, btf, Some(plan.kprobes), no_trampoline);
    super::kfunc::note_attached(&mut status, attached);
    status
}

/// The loads [`attach`] will ask for when every first choice holds (see super::preload), with the
/// same arguments.
pub fn loads<'a>(
    ready: &[Result<(), String>; 5],
    iomap_btf: Option<&'a aya::Btf>,
    dio_has_direction: bool,
    sync_ra: (Option<SyncRaPlan>, Option<&'a aya::Btf>, bool),
) -> Vec<super::preload::Planned<'a>> {
    use super::preload::How;
    let mut loads = Vec::new();
    if let (Err(_), (Some(plan), Some(btf), no_trampoline)) = (&ready[1], sync_ra) {
        let hook = (plan.program, Hook::Fentry);
        loads.extend(super::kfunc::fallback_loads(
            hook,
            plan.function,
            btf,
            Some(plan.kprobes),
            no_trampoline,
        ));
    }
    for ((program, _, event), _) in PROGRAMS.into_iter().zip(ready).filter(|(_, r)| r.is_ok()) {
        match (program == ITER_PROGRAM.0, iomap_btf) {
            (true, _) if dio_has_direction => {}
            (true, Some(btf)) => loads.push((ITER_PROGRAM.1.to_string(), How::BtfTracePoint(event, btf))),
            _ => loads.push((program.to_string(), How::TracePoint)),
        }
    }
    loads
}

pub use super::counters::RawFile;

pub struct FileMaps {
    io: PerCpuHashMap<MapData, FileKey, FileCounters>,
    /// The kernel drains the map in batches (see crate::bpf::map_batch); false once it refused.
    batch: bool,
    /// No drain while the map stays empty (see crate::bpf::inserts).
    gate: super::inserts::EmptyGate,
}

/// Most FILE_IO entries drained per sample: the whole map. Drained in batches, a sample costs in
/// proportion to the files active since the last one, and every file's row comes in the sample
/// after its I/O, while the kernel's name for it (FILE_NAMES, an LRU a burst overruns) is fresh.
pub const DRAIN_BUDGET: usize = ioscope_common::files::FILE_MAX_ENTRIES as usize;
/// Most entries drained per sample entry by entry (kernels before 5.6, without batches: three
/// system calls an entry): a burst of new files is read over several samples (the kernel's LRU
/// map keeps counting meanwhile) instead of in one costly sample.
pub const DRAIN_BUDGET_ONE_BY_ONE: usize = 4096;

impl FileMaps {
    /// What the programs counted since the last drain, per file, at most `budget` entries: each
    /// entry read is deleted (the programs create it again at the file's next I/O), so the map
    /// holds only the files active since, and reading it costs in proportion to the activity,
    /// not to the map's size. An increment landing between an entry's read and its deletion is
    /// lost (microseconds; the programs update per-CPU values in place, without a lock).
    pub fn drain(&mut self, budget: usize) -> Result<Vec<RawFile>> {
        let now = std::time::Instant::now();
        if !self.gate.needed(now) {
            return Ok(Vec::new());
        }
        let out = self.drain_now(budget)?;
        self.gate.scanned(out.len() < budget.min(DRAIN_BUDGET_ONE_BY_ONE), now);
        Ok(out)
    }

    fn drain_now(&mut self, budget: usize) -> Result<Vec<RawFile>> {
        if self.batch {
            use aya::maps::IterableMap;
            use std::os::fd::AsFd;
            let cpus = aya::util::nr_cpus().map_err(|(what, e)| anyhow!("{what}: {e}"))?;
            let fd = self.io.map().fd().as_fd();
            let drained = super::map_batch::lookup_if_supported::<FileKey, FileCounters>(
                &mut self.batch,
                fd,
                Some(cpus),
                true,
                budget,
            );
            if let Some(entries) = drained.context("draining FILE_IO")? {
                // A key twice (deleted and created again mid-drain) is merged with its twin by
                // the resolver, like the keys of one file on two devices.
                let mut out: Vec<RawFile> = entries.iter().map(|e| sum_cpus(e.key, &e.values)).collect();
                out.sort_by_key(|f| f.key);
                return Ok(out);
            }
        }
        let keys: Vec<FileKey> = self
            .io
            .keys()
            .take(budget.min(DRAIN_BUDGET_ONE_BY_ONE))
            .collect::<Result<_, _>>()
            .context("listing FILE_IO")?;
        let mut out = BTreeMap::new();
        for key in keys {
            // The LRU may evict an entry between listing and lookup.
            let Ok(per_cpu) = self.io.get(&key, 0) else { continue };
            let _ = self.io.remove(&key);
            out.insert(key, sum_cpus(key, &per_cpu));
        }
        Ok(out.into_values().collect())
    }
}

/// How much a file's pending direct I/O in the CPUs' memos (see DioMemo) grew since the last
/// sample: negative when the memo moved into FILE_IO (the drained row has those bytes then).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoGrowth {
    pub dev: u32,
    pub ino: u64,
    pub read_bytes: i64,
    pub write_bytes: i64,
}

/// The memos' pending bytes per file as of the last sample.
#[derive(Default)]
pub struct MemoTracker {
    seen: HashMap<(u32, u64), (u64, u64)>,
}

impl MemoTracker {
    pub fn growth(&mut self, memos: &[DioMemo]) -> Vec<MemoGrowth> {
        let mut now: HashMap<(u32, u64), (u64, u64)> = HashMap::new();
        for m in memos {
            let e = now.entry((m.dev, m.ino)).or_default();
            e.0 = e.0.wrapping_add(m.read_bytes);
            e.1 = e.1.wrapping_add(m.write_bytes);
        }
        let mut out: Vec<MemoGrowth> = now
            .iter()
            .chain(self.seen.iter().filter(|(k, _)| !now.contains_key(k)).map(|(k, _)| (k, &(0, 0))))
            .filter_map(|(&(dev, ino), &(r, w))| {
                let (r0, w0) = self.seen.get(&(dev, ino)).copied().unwrap_or_default();
                let g = MemoGrowth {
                    dev,
                    ino,
                    read_bytes: r.wrapping_sub(r0) as i64,
                    write_bytes: w.wrapping_sub(w0) as i64,
                };
                (g.read_bytes != 0 || g.write_bytes != 0).then_some(g)
            })
            .collect();
        out.sort_by_key(|g| (g.dev, g.ino));
        self.seen = now;
        out
    }
}

/// Adds the memos' growth to their files' rows (a new row when the file has none; a row whose
/// memo moved into it keeps the net, never below zero).
pub fn add_dio_memos(files: &mut Vec<RawFile>, growth: &[MemoGrowth]) {
    for m in growth {
        let key = FileKey { dev: m.dev, kind: KEY_SB_DEV, ino: m.ino };
        let i = match files.iter().position(|f| f.key == key) {
            Some(i) => i,
            None => {
                files.push(RawFile { key, ..Default::default() });
                files.len() - 1
            }
        };
        let f = &mut files[i];
        f.dio_read_bytes = f.dio_read_bytes.saturating_add_signed(m.read_bytes);
        f.dio_write_bytes = f.dio_write_bytes.saturating_add_signed(m.write_bytes);
    }
}

/// Adds up one entry's per-CPU counters with wrapping arithmetic: a write allocation is taken
/// back on the dirtying CPU, which may hold less than the inserting one (the total is right).
pub fn sum_cpus(key: FileKey, per_cpu: &[FileCounters]) -> RawFile {
    let mut f = RawFile { key, ..Default::default() };
    for c in per_cpu {
        f.accumulate(c);
        if c.tgid != 0 && !f.processes.iter().any(|p| p.pid == c.tgid) {
            f.processes.push(FileProcess { pid: c.tgid, comm: crate::util::c_string(&c.comm) });
        }
    }
    // A sum that wrapped below zero (a moment's skew between CPUs' reads) is no pages, not 2^64.
    for v in [&mut f.inserted_pages, &mut f.readahead_pages] {
        if *v > 1 << 62 {
            *v = 0;
        }
    }
    f.processes.sort_by_key(|p| p.pid);
    f
}

/// The per-file family: pages and bytes per file and process (FILE_IO), the read bios, and the
/// path resolver ([`super::resolve::files::FileResolver`]), published for the families that name
/// files.
#[derive(Default)]
pub struct FilesFamily {
    layout: Option<FileLayout>,
    ready: Option<[Result<(), String>; 5]>,
    /// Disk reads per file from the read bios (BTF tracepoint only; else from insertions).
    bio_plan: Option<Result<BioLayout, String>>,
    sync_ra: Option<SyncRaPlan>,
    notes: Vec<String>,
    maps: Option<FileMaps>,
    /// The direct I/O pending in the CPUs' memos as of the last sample.
    dio_memos: MemoTracker,
}

impl FilesFamily {
    fn sync_ra<'a>(
        &self,
        setup: &super::family::Setup<'a>,
    ) -> (Option<SyncRaPlan>, Option<&'a aya::Btf>, bool) {
        let btf = setup.btf.filter(|_| self.sync_ra.is_some()).map(|k| k.aya_with_functions());
        (self.sync_ra, btf, setup.options.no_trampoline)
    }

    fn dio_direction(&self) -> bool {
        self.layout.is_some_and(|l| l.btf.dio_direction != 0)
    }
}

impl super::family::Family for FilesFamily {
    fn name(&self) -> &'static str {
        "files"
    }

    fn plan(&mut self, setup: &mut super::family::Setup) {
        let (mut file_layout, ready, notes) = layout(setup.tracefs);
        self.notes = notes;
        let off = if setup.btf.is_some() { "BTF tracepoints off" } else { "no kernel BTF" };
        let mut bio_plan = Err(off.to_string());
        if let Some(k) = setup.btf {
            if setup.options.btf_tracepoints {
                bio_plan = bio_layout(k).map_err(|e| format!("{e:#}"));
            }
            match super::iomap::IomapBtf::of(setup) {
                Ok(l) => file_layout.btf = *l,
                Err(e) => self.notes.insert(0, format!("iomap probes on classic tracepoints: {e}")),
            }
        }
        (self.layout, self.ready, self.bio_plan) = (Some(file_layout), Some(ready), Some(bio_plan));
    }

    fn configure(&mut self, setup: &mut super::family::Setup) {
        // The split of read pages on the function the readahead fallback runs on.
        if let (Some(ra), Some(ready)) =
            (setup.shared.get::<super::readahead::FallbacksPlanned>(), &mut self.ready)
        {
            self.sync_ra = plan_sync_ra(&mut ready[1], &ra.planned, ra.sync_ra_refused.as_deref());
        }
    }

    fn globals<'s>(&'s self, loader: &mut aya::EbpfLoader<'s>) {
        let layout = self.layout.as_ref().unwrap_or(&FileLayout::UNSET);
        loader.override_global(ioscope_common::files::FILE_LAYOUT_GLOBAL, layout, true);
        let bio = self.bio_plan.as_ref().and_then(|p| p.as_ref().ok()).unwrap_or(&BioLayout::UNSET);
        loader.override_global(ioscope_common::files::BIO_LAYOUT_GLOBAL, bio, true);
    }

    fn loads<'a>(
        &'a self,
        setup: &super::family::Setup<'a>,
        earlier: &[super::preload::Planned<'a>],
    ) -> Vec<super::preload::Planned<'a>> {
        let Some(ready) = &self.ready else { return Vec::new() };
        let planned = |names: &[&str]| earlier.iter().any(|(p, _)| names.contains(&p.as_str()));
        let dio_direction_expected = self.dio_direction()
            && (planned(&[super::page_cache::DIO_BTF.1]) || planned(&super::page_cache::DIO_FENTRY));
        let mut all =
            loads(ready, super::iomap::IomapBtf::aya(setup), dio_direction_expected, self.sync_ra(setup));
        if let (Some(Ok(_)), Some(k)) = (&self.bio_plan, setup.btf) {
            all.push((BIO_PROGRAM.to_string(), super::preload::How::BtfTracePoint(BIO_EVENT, k.aya())));
        }
        all
    }

    fn attach(
        &mut self,
        ebpf: &mut Ebpf,
        setup: &mut super::family::Setup,
        statuses: &mut Vec<BpfProgramStatus>,
    ) {
        let Some(ready) = self.ready.clone() else { return };
        let dio_has_direction = self.dio_direction()
            && statuses.iter().any(|p| {
                let p_name = p.program.as_str();
                (p_name == super::page_cache::DIO_BTF.1 || super::page_cache::DIO_FENTRY.contains(&p_name))
                    && p.attached
            });
        let (programs, maps) =
            attach(ebpf, ready, super::iomap::IomapBtf::aya(setup), dio_has_direction, self.sync_ra(setup));
        statuses.extend(programs);
        self.maps = maps;
        let bio_btf = match (self.bio_plan.clone(), setup.btf) {
            (Some(Ok(_)), Some(k)) => Ok(k.aya()),
            (Some(Err(e)), _) => Err(e),
            (_, None) | (None, _) => Err("no kernel BTF".to_string()),
        };
        statuses.push(attach_bio(ebpf, bio_btf));
        let resolver = setup.shared.get_or_insert_with(super::resolve::files::FileResolver::default);
        resolver.fallbacks = setup.options.path_fallbacks;
    }

    fn notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    fn read(
        &mut self,
        shared: &mut super::family::Shared,
        sample: &mut crate::sample::BpfSample,
    ) -> Vec<String> {
        let Some(maps) = &mut self.maps else { return Vec::new() };
        let memos = &mut self.dio_memos;
        let cache = shared.get::<super::page_cache::PageCacheMaps>();
        let raw = maps.drain(DRAIN_BUDGET).and_then(|mut raw| {
            if let Some(cache) = cache {
                add_dio_memos(&mut raw, &memos.growth(&cache.dio_memos()?));
            }
            Ok(raw)
        });
        match raw {
            Ok(raw) => {
                let resolver = shared.get_or_insert_with(super::resolve::files::FileResolver::default);
                sample.files = resolver.resolve(raw);
                Vec::new()
            }
            Err(e) => vec![format!("{e:#}")],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The running kernel's bio layout, read from its BTF.
    #[test]
    fn reads_this_kernels_bio_layout() {
        let Some(btf) = super::super::kernel_btf::tests::kernel() else { return };
        let bio = bio_layout(&btf).unwrap();
        assert_eq!((bio.configured, bio.bio_arg1, bio.op_read, bio.page_flags), (1, 0, 0, 0));
        assert!(bio.cloned_bit > 0 && bio.uptodate_bit > 0, "{bio:?}");
    }

    /// `iomap:iomap_writepage` as each class has it: the range class (6.1, 6.12; 6.18's
    /// iomap_writeback_folio) and the page class (5.10), read from a tracefs of only that event.
    #[test]
    fn iomap_writepage_is_read_in_either_class() {
        let field = |decl: &str, offset: u32, size: u32| {
            format!("\tfield:{decl};\toffset:{offset};\tsize:{size};\tsigned:0;\n")
        };
        let format = |fields: &[String]| {
            format!(
                "name: iomap_writepage\nID: 1\nformat:\n{}\n{}\nprint fmt: \"\"\n",
                field("unsigned short common_type", 0, 2),
                fields.concat()
            )
        };
        let range = format(&[
            field("dev_t dev", 8, 4),
            field("u64 ino", 16, 8),
            field("loff_t size", 24, 8),
            field("loff_t offset", 32, 8),
            field("u64 length", 40, 8),
        ]);
        let short = format(&[
            field("dev_t dev", 8, 4),
            field("u64 ino", 16, 8),
            field("loff_t size", 24, 8),
            field("unsigned long offset", 32, 8),
            field("unsigned int length", 40, 4),
        ]);
        for (text, want) in [(range, (0, 32, 40)), (short, (1, 32, 40))] {
            let dir = std::env::temp_dir().join(format!("ioscope-iwf-{}-{}", std::process::id(), want.0));
            let ev = dir.join("events/iomap/iomap_writepage");
            std::fs::create_dir_all(&ev).unwrap();
            std::fs::write(ev.join("format"), text).unwrap();
            let (l, ready, _) = layout(&dir);
            std::fs::remove_dir_all(&dir).unwrap();
            assert!(ready[4].is_ok(), "{:?}", ready[4]);
            assert_eq!((l.iwf_ok, l.iwf_dev, l.iwf_ino, l.iwf_size), (1, 8, 16, 24));
            assert_eq!((l.iwf_short_length, l.iwf_offset, l.iwf_length), want);
        }
    }

    #[test]
    fn pending_direct_io_counts_once_while_pending_and_once_moved() {
        let key = FileKey { dev: 7, kind: KEY_SB_DEV, ino: 12 };
        let memo = |ino, read_bytes, write_bytes| DioMemo {
            tgid: 10,
            dev: 7,
            ino,
            reads: read_bytes / 4096,
            read_bytes,
            writes: write_bytes / 4096,
            write_bytes,
        };
        let mut t = MemoTracker::default();
        // Sample 1: 4 KiB drained, 8 KiB pending on one CPU, 64 KiB of another file on another.
        let mut files = vec![RawFile { key, dio_read_bytes: 4096, ..Default::default() }];
        add_dio_memos(&mut files, &t.growth(&[memo(12, 8192, 0), memo(13, 0, 65536)]));
        assert_eq!(files.len(), 2);
        assert_eq!((files[0].dio_read_bytes, files[0].dio_write_bytes), (12288, 0));
        // A file with no drained row still gets its bytes, under the same key kind.
        assert_eq!(files[1].key, FileKey { dev: 7, kind: KEY_SB_DEV, ino: 13 });
        assert_eq!((files[1].dio_read_bytes, files[1].dio_write_bytes), (0, 65536));
        // Sample 2: the memo of 12 grew by 4 KiB; 13's memo moved into FILE_IO (drained: its 64
        // KiB and 4 KiB more): only the 4 KiB are new.
        let key13 = FileKey { dev: 7, kind: KEY_SB_DEV, ino: 13 };
        let mut files = vec![RawFile { key: key13, dio_write_bytes: 69632, ..Default::default() }];
        add_dio_memos(&mut files, &t.growth(&[memo(12, 12288, 0)]));
        let by = |k: FileKey| files.iter().find(|f| f.key == k).unwrap().clone();
        assert_eq!(by(key).dio_read_bytes, 4096);
        assert_eq!(by(key13).dio_write_bytes, 4096);
        // Sample 3: nothing changed: no rows.
        let mut files = Vec::new();
        add_dio_memos(&mut files, &t.growth(&[memo(12, 12288, 0)]));
        assert!(files.is_empty());
    }

    #[test]
    fn flag_bits_come_from_the_print_format() {
        let text = r#"print fmt: "flags %s", __print_flags(REC->flags, "|", { (1 << 0), "WRITE" }, { (1 << 4), "DIRECT" })"#;
        assert_eq!(flag_bit(text, "WRITE"), Some(1));
        assert_eq!(flag_bit(text, "DIRECT"), Some(16));
        assert_eq!(flag_bit(text, "DAX"), None);
    }

    #[test]
    fn cpus_add_up_and_a_write_taken_back_elsewhere_nets_out() {
        let key = FileKey { dev: 7 << 20, kind: 0, ino: 12 };
        let mut comm = [0u8; 16];
        comm[..2].copy_from_slice(b"dd");
        let cpu0 =
            FileCounters { inserted_pages: 10, readahead_pages: 6, tgid: 5, comm, ..Default::default() };
        let cpu1 = FileCounters {
            inserted_pages: 0u64.wrapping_sub(4),
            readahead_pages: 0u64.wrapping_sub(4),
            dirtied_pages: 4,
            tgid: 5,
            comm,
            ..Default::default()
        };
        let f = sum_cpus(key, &[cpu0, cpu1, FileCounters::default()]);
        assert_eq!((f.inserted_pages, f.readahead_pages, f.dirtied_pages), (6, 2, 4));
        assert_eq!(f.processes, vec![FileProcess { pid: 5, comm: "dd".into() }]);
    }
}
