//! The page-cache probes' userspace half: the offsets each program needs from tracefs, attaching
//! them, and reading their maps into a [`PageCacheSample`] (removing exited processes' entries
//! once they have been read).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use aya::maps::{Array, MapData, PerCpuArray, PerCpuHashMap};
use aya::Ebpf;
use ioscope_common::fallback::FnLayout;
use ioscope_common::page_cache::{
    CacheCounters, CacheLayout, CacheScratch, DioMemo, DirtyStateRecord, WriteMemo, CACHE_PROCS_MAP,
    CACHE_SCRATCH_MAP, CACHE_TOTALS_MAP, DIO_MEMO_MAP, DIRTY_STATE_MAP, NO_ORDER, WRITE_MEMO_MAP,
};

use super::counters::Accumulate;
use super::kernel_btf::KernelBtf;
use super::kfunc::{self, Hook, Kprobes, Traceable};
use super::tracefs::{self, EventFormat};
use crate::sample::{
    BpfProgramStatus, CacheCountersSample, CacheProcessSample, KernelDirtyState, PageCacheSample,
    ThrottleRecord,
};

/// One program of the object and the tracepoint it attaches to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    pub program: &'static str,
    pub category: &'static str,
    pub event: &'static str,
}

const fn probe(program: &'static str, category: &'static str, event: &'static str) -> Probe {
    Probe { program, category, event }
}

/// Every page-cache program, in the order [`fill_layout`] handles them.
pub const PROBES: [Probe; 12] = [
    probe("filemap_get_pages", "filemap", "mm_filemap_get_pages"),
    probe("filemap_map_pages", "filemap", "mm_filemap_map_pages"),
    probe("filemap_fault", "filemap", "mm_filemap_fault"),
    probe("filemap_add_to_page_cache", "filemap", "mm_filemap_add_to_page_cache"),
    probe("filemap_delete_from_page_cache", "filemap", "mm_filemap_delete_from_page_cache"),
    probe("writeback_dirty_folio", "writeback", "writeback_dirty_folio"),
    probe("balance_dirty_pages", "writeback", "balance_dirty_pages"),
    probe("global_dirty_state", "writeback", "global_dirty_state"),
    probe("iomap_dio_rw_begin", "iomap", "iomap_dio_rw_begin"),
    probe("kmem_rss_stat", "kmem", "rss_stat"),
    probe("sched_process_exec", "sched", "sched_process_exec"),
    probe("cache_task_rename", "task", "task_rename"),
];

/// A program on a kernel function standing in for probe `probe` (of [`PROBES`]) where its
/// tracepoint is missing: `program` as `hook` on the first of `functions` the kernel has
/// (see super::kfunc and ebpf/README.md).
#[derive(Clone, Copy, Debug)]
pub struct FnFallback {
    pub probe: &'static str,
    pub program: &'static str,
    pub hook: Hook,
    pub functions: &'static [&'static str],
    /// The same as a kprobe (and a kretprobe for a fexit), tried when the fentry/fexit program
    /// is refused (a function with more arguments than the kernel's BPF trampoline takes, or no
    /// trampolines at all).
    pub kprobes: Option<Kprobes>,
}

/// The fallbacks, for the filemap tracepoints (Linux 6.12+) and iomap_dio_rw_begin (6.5+). A
/// probe may have several, tried in order: the first whose function the kernel has is used.
pub const FN_FALLBACKS: [FnFallback; 5] = [
    FnFallback {
        probe: "filemap_get_pages",
        program: "filemap_get_pages_fexit",
        kprobes: Some(Kprobes {
            entry: "filemap_get_pages_kprobe",
            ret: Some("filemap_get_pages_kretprobe"),
        }),
        hook: Hook::Fexit,
        functions: &["filemap_get_pages"],
    },
    // Before filemap_get_pages() (5.11/5.12 split the buffered read up): the whole read's return
    // (ebpf/probes/src/read_fn.rs).
    FnFallback {
        probe: "filemap_get_pages",
        program: "filemap_read_fexit",
        kprobes: Some(Kprobes { entry: "filemap_read_kprobe", ret: Some("filemap_read_kretprobe") }),
        hook: Hook::Fexit,
        functions: &["generic_file_buffered_read"],
    },
    FnFallback {
        probe: "filemap_map_pages",
        program: "filemap_map_pages_fentry",
        kprobes: Some(Kprobes { entry: "filemap_map_pages_kprobe", ret: None }),
        hook: Hook::Fentry,
        functions: &["filemap_map_pages"],
    },
    FnFallback {
        probe: "filemap_fault",
        program: "filemap_fault_fentry",
        kprobes: Some(Kprobes { entry: "filemap_fault_kprobe", ret: None }),
        hook: Hook::Fentry,
        functions: &["filemap_fault"],
    },
    FnFallback {
        probe: "iomap_dio_rw_begin",
        program: "iomap_dio_rw_fentry",
        kprobes: Some(Kprobes { entry: "iomap_dio_rw_kprobe", ret: None }),
        hook: Hook::Fentry,
        functions: &["__iomap_dio_rw", "iomap_dio_rw"],
    },
];

/// A fallback chosen for this kernel: what to attach where.
#[derive(Clone, Debug)]
pub struct Planned {
    pub fallback: FnFallback,
    pub function: &'static str,
}

/// Chooses, for each probe whose tracepoint is missing (`layouts`), its function fallback when
/// the kernel has one, and fills what that program reads: `fns` (from BTF) and the probe's part of
/// the cache layout. `iomap_btf`: the iomap BTF layout is known (the direct-I/O fallback reads
/// it). A probe without a usable fallback keeps its error, with the fallback's reason added.
pub fn plan_fallbacks(
    layouts: &mut [Result<(), String>],
    cache: &mut CacheLayout,
    fns: &mut FnLayout,
    btf: &KernelBtf,
    traceable: &Traceable,
    iomap_btf: bool,
) -> Vec<Planned> {
    let mut planned = Vec::new();
    for fb in FN_FALLBACKS {
        let Some(i) = PROBES.iter().position(|p| p.program == fb.probe) else { continue };
        let Err(missing) = &layouts[i] else { continue };
        let chosen = kfunc::choose(btf, traceable, fb.functions).and_then(|f| {
            match fb.probe {
                "filemap_get_pages" => fill_get_pages(fns, btf, &f)?,
                "iomap_dio_rw_begin" => {
                    if !iomap_btf {
                        anyhow::bail!("the kernel's BTF lacks the iomap structs' fields");
                    }
                    cache.dio_ok = 1;
                    cache.dio_write_flag = DEFAULT_IOCB_WRITE;
                }
                _ => {}
            }
            Ok(f)
        });
        match chosen {
            Ok(f) => {
                layouts[i] = Ok(());
                planned.push(Planned { fallback: fb, function: f.name });
            }
            Err(e) => layouts[i] = Err(format!("{missing}; no {} fallback: {e:#}", fb.hook.name())),
        }
    }
    planned
}

/// What the `filemap_get_pages` fallback reads, from BTF: the file's mapping and position from
/// the kiocb, and the count (an argument, or the iov_iter's before 6.5).
fn fill_get_pages(fns: &mut FnLayout, btf: &KernelBtf, f: &kfunc::Function) -> Result<()> {
    let field = |strukt: &str, member: &str, size: u32| btf.offset_sized(strukt, member, size);
    let first_is_kiocb = f.params.first().is_some_and(|p| p.pointer && p.name == "iocb");
    let Some(count) = f.params.get(1).filter(|_| first_is_kiocb) else {
        anyhow::bail!("{}'s parameters are not (iocb, count or iter, ...)", f.name);
    };
    fns.kiocb_filp = field("kiocb", "ki_filp", 8)?;
    fns.kiocb_pos = field("kiocb", "ki_pos", 8)?;
    fns.file_mapping = field("file", "f_mapping", 8)?;
    if count.pointer {
        fns.get_pages_iter = 1;
        fns.iov_count = field("iov_iter", "count", 8)?;
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    fns.page_shift = page.trailing_zeros();
    fns.configured = 1;
    Ok(())
}

/// `IOCB_WRITE` on the kernels this was written against (include/linux/fs.h), used when the
/// event's print format does not name the bit.
const DEFAULT_IOCB_WRITE: u32 = 1 << 18;

/// Reads each probe's format file and fills its part of the layout. Returns the layout and, per
/// probe (in [`PROBES`] order), Ok or why it cannot be attached.
/// `hidden`: tracepoints ("category:event") to treat as missing (tests).
pub fn layout(tracefs_dir: &Path, hidden: &[String]) -> (CacheLayout, Vec<Result<(), String>>) {
    let mut layout = CacheLayout::UNSET;
    let results = tracefs::fill_per_probe(
        PROBES.iter().map(|p| (p.category, p.event)),
        |category, event| {
            if hidden.iter().any(|h| *h == format!("{category}:{event}")) {
                return Err(anyhow!("tracepoint {category}:{event} hidden on request"));
            }
            // Under an older name where the kernel has only that (see super::renamed).
            super::renamed::read_format(tracefs_dir, category, event).map(|(t, _)| t)
        },
        |i, text| fill_layout(&mut layout, i, text),
    );
    (layout, results)
}

/// Fills in the offsets of probe `index` (of [`PROBES`]) from its format file's text.
pub fn fill_layout(l: &mut CacheLayout, index: usize, text: &str) -> Result<()> {
    let f = tracefs::parse_format(text)?;
    let u64_at = |name: &str| -> Result<u32> { Ok(f.field_sized(name, 8)?.offset) };
    match index {
        0 => {
            l.get_pages_dev = f.field_sized("s_dev", 4)?.offset;
            l.get_pages_ino = u64_at("i_ino")?;
            l.get_pages_index = u64_at("index")?;
            l.get_pages_last_index = u64_at("last_index")?;
            l.get_pages_ok = 1;
        }
        1 => {
            l.map_pages_index = u64_at("index")?;
            l.map_pages_last_index = u64_at("last_index")?;
            l.map_pages_ok = 1;
        }
        // filemap_fault reads no field.
        2 => {}
        3 => {
            l.add_ino = u64_at("i_ino")?;
            l.add_index = u64_at("index")?;
            l.add_order = order_field(&f)?;
            l.add_ok = 1;
        }
        4 => {
            l.delete_order = order_field(&f)?;
            l.delete_ok = 1;
        }
        5 => {
            l.dirty_ino = u64_at("ino")?;
            l.dirty_index = u64_at("index")?;
            l.dirty_ok = 1;
        }
        6 => {
            l.bdp_limit = u64_at("limit")?;
            l.bdp_setpoint = u64_at("setpoint")?;
            l.bdp_dirty = u64_at("dirty")?;
            l.bdp_pause = u64_at("pause")?;
            l.bdp_ok = 1;
        }
        7 => {
            l.gds_nr_dirty = u64_at("nr_dirty")?;
            l.gds_nr_writeback = u64_at("nr_writeback")?;
            l.gds_background_thresh = u64_at("background_thresh")?;
            l.gds_dirty_thresh = u64_at("dirty_thresh")?;
            l.gds_dirty_limit = u64_at("dirty_limit")?;
            l.gds_ok = 1;
        }
        8 => {
            l.dio_count = u64_at("count")?;
            l.dio_ki_flags = f.field_sized("ki_flags", 4)?.offset;
            l.dio_write_flag = write_flag(text).unwrap_or(DEFAULT_IOCB_WRITE);
            l.dio_ok = 1;
        }
        9 => {
            l.rss_mm_id = f.field_sized("mm_id", 4)?.offset;
            l.rss_curr = f.field_sized("curr", 4)?.offset;
            l.rss_member = f.field_sized("member", 4)?.offset;
            l.rss_size = u64_at("size")?;
            l.rss_file_member = symbol_value(text, "MM_FILEPAGES").unwrap_or(0);
            l.rss_ok = 1;
        }
        // sched_process_exec reads no field (it renames the process after exec).
        10 => {}
        // A renamed process's new name (`pid` is the task renamed).
        11 => {
            l.rename_pid = f.field_sized("pid", 4)?.offset;
            l.rename_newcomm = f.field_sized("newcomm", 16)?.offset;
            l.rename_ok = 1;
        }
        _ => return Err(anyhow!("no page-cache probe number {index}")),
    }
    Ok(())
}

/// The folio order (one byte). Kernels before folios had no `order` field: their events are raised
/// per page (`__add_to_page_cache_locked()`, `__delete_from_page_cache()` on 5.10), so the page is
/// one page ([`NO_ORDER`]). Large folios in the page cache (5.18) came after the field.
pub(super) fn order_field(f: &EventFormat) -> Result<u32> {
    match f.field_sized("order", 1) {
        Ok(field) => Ok(field.offset),
        Err(_) if f.fields.iter().all(|x| x.name != "order") && f.fields.iter().any(|x| x.name == "pfn") => {
            Ok(NO_ORDER)
        }
        Err(e) => Err(e),
    }
}

/// The `IOCB_WRITE` bit as the event prints it: `{ (1 << 18), "WRITE" }` in the print fmt.
pub fn write_flag(format_text: &str) -> Option<u32> {
    let fmt = format_text.split_once("print fmt:")?.1;
    let at = fmt.find("\"WRITE\"")?;
    let before = &fmt[..at];
    let shift = before.rsplit_once("(1 <<")?.1;
    let digits: String = shift.trim_start().chars().take_while(|c| c.is_ascii_digit()).collect();
    let bit: u32 = digits.parse().ok()?;
    (bit < 32).then(|| 1u32 << bit)
}

/// Attaches every page-cache program whose layout is known (`layouts` from [`layout`], in
/// [`PROBES`] order) and takes the maps. Returns each program's status and the maps when at
/// least one program is attached.
/// `iomap_dio_rw_begin` runs as its BTF tracepoint twin when `iomap_btf` is given and the twin
/// loads. `no_trampoline`: the fallbacks' fentry/fexit programs are refused on purpose (tests of
/// their kprobe variants).
pub fn attach(
    ebpf: &mut Ebpf,
    layouts: &[Result<(), String>],
    jiffies_before: Option<((u64, u64), Instant)>,
    iomap_btf: Option<&aya::Btf>,
    (fallbacks, fn_btf, no_trampoline): (&[Planned], Option<&aya::Btf>, bool),
) -> (Vec<BpfProgramStatus>, Option<PageCacheMaps>, Option<String>) {
    // Before the read path, so that its task memo works from the first reads (the switch
    // program turns the memo on for a CPU by running there).
    let switch_status = attach_task_cache(ebpf);
    // A kretprobe's entry kprobe: a row of its own (its runs are timed too).
    let mut entries = Vec::new();
    let mut statuses: Vec<BpfProgramStatus> = PROBES
        .iter()
        .zip(layouts)
        .map(|(p, l)| {
            // The tracepoint missing, a program on the function it sits in.
            if let (Some(plan), Some(btf)) =
                (fallbacks.iter().find(|f| f.fallback.probe == p.program), fn_btf)
            {
                let fb = plan.fallback;
                let mut status = BpfProgramStatus {
                    program: fb.program.to_string(),
                    tracepoint: plan.function.to_string(),
                    attached: true,
                    mechanism: fb.hook.name().to_string(),
                    fallback_for: Some(format!("{}:{}", p.category, p.event)),
                    ..Default::default()
                };
                let how = (fb.program, fb.hook);
                match kfunc::attach_fallback(ebpf, how, plan.function, btf, fb.kprobes, no_trampoline) {
                    Ok(attached) => {
                        let template = status;
                        let mut rows = attached.into_iter().map(|a| BpfProgramStatus {
                            program: a.program.to_string(),
                            mechanism: a.mechanism.to_string(),
                            ..template.clone()
                        });
                        status = rows.next().unwrap_or_else(|| template.clone());
                        entries.extend(rows);
                    }
                    Err(e) => {
                        status.attached = false;
                        status.error = Some(e);
                    }
                }
                return status;
            }
            // The hot read path as a raw tracepoint first (no record is built: far cheaper).
            if p.program == GET_PAGES_RAW.0 {
                if let Ok(status) = attach_raw(ebpf, GET_PAGES_RAW.1, p) {
                    return status;
                }
            }
            // Direct I/O as a BTF tracepoint (its flag value still comes from the format).
            if let (Some(btf), true, Ok(())) = (iomap_btf, p.program == DIO_BTF.0, l) {
                if let Ok(status) =
                    super::attach::attach_btf_tracepoint(ebpf, DIO_BTF.1, p.category, p.event, btf)
                {
                    return status;
                }
            }
            match l {
                Ok(()) => super::renamed::attach_tracepoint(ebpf, p.program, p.category, p.event),
                Err(e) => super::attach::program_status(p.program, p.category, p.event, Err(e.clone())),
            }
        })
        .collect();
    statuses.extend(entries);
    if !statuses.iter().any(|s| s.attached) {
        return (statuses, None, None);
    }
    statuses.push(switch_status);
    let (hz, hz_note) = match measure_hz(jiffies_before) {
        Ok(hz) => (hz, None),
        Err(e) => {
            (FALLBACK_HZ, Some(format!("kernel HZ unknown ({e}): throttle times assume {FALLBACK_HZ}")))
        }
    };
    match PageCacheMaps::take(ebpf, &statuses, hz) {
        Ok(maps) => (statuses, Some(maps), hz_note),
        Err(e) => {
            // Without the maps nothing can be read: report every page-cache program as not working.
            for s in statuses.iter_mut() {
                s.error.get_or_insert_with(|| format!("{e:#}"));
            }
            (statuses, None, hz_note)
        }
    }
}

/// The loads [`attach`] will ask for when every first choice holds (see super::preload), with the
/// same arguments.
pub fn loads<'a>(
    layouts: &[Result<(), String>],
    iomap_btf: Option<&'a aya::Btf>,
    (fallbacks, fn_btf, no_trampoline): (&'a [Planned], Option<&'a aya::Btf>, bool),
) -> Vec<super::preload::Planned<'a>> {
    use super::preload::How;
    let mut loads = vec![("cache_sched_switch".to_string(), How::RawTracePoint)];
    for (p, l) in PROBES.iter().zip(layouts) {
        if let (Some(plan), Some(btf)) = (fallbacks.iter().find(|f| f.fallback.probe == p.program), fn_btf) {
            let fb = plan.fallback;
            loads.extend(kfunc::fallback_loads(
                (fb.program, fb.hook),
                plan.function,
                btf,
                fb.kprobes,
                no_trampoline,
            ));
        } else if p.program == GET_PAGES_RAW.0 {
            loads.push((GET_PAGES_RAW.1.to_string(), How::RawTracePoint));
        } else if let (Some(btf), true, Ok(())) = (iomap_btf, p.program == DIO_BTF.0, l) {
            loads.push((DIO_BTF.1.to_string(), How::BtfTracePoint(p.event, btf)));
        } else if l.is_ok() {
            loads.push((p.program.to_string(), How::TracePoint));
        }
    }
    loads
}

/// The value of `name` in a `__print_symbolic(..., { 0, "MM_FILEPAGES" }, ...)` of the print fmt.
pub fn symbol_value(format_text: &str, name: &str) -> Option<u32> {
    let fmt = format_text.split_once("print fmt:")?.1;
    let at = fmt.find(&format!("\"{name}\""))?;
    let open = fmt[..at].rfind('{')?;
    fmt[open + 1..at].trim().trim_end_matches(',').trim().parse().ok()
}

/// The direct-I/O fallback's program (on `__iomap_dio_rw`): reads as the BTF twin does.
pub const DIO_FENTRY: [&str; 2] = ["iomap_dio_rw_fentry", "iomap_dio_rw_kprobe"];

/// The read path's programs that also feed readahead: the raw tracepoint, or a fallback doing the
/// work (a fexit, or its kretprobe variant).
pub const READ_PATH: [&str; 5] = [
    "filemap_get_pages_raw",
    "filemap_get_pages_fexit",
    "filemap_read_fexit",
    "filemap_get_pages_kretprobe",
    "filemap_read_kretprobe",
];

/// The probe that has a BTF-tracepoint twin, and the twin's program name.
pub const DIO_BTF: (&str, &str) = ("iomap_dio_rw_begin", "iomap_dio_rw_begin_btf");

/// The probe that has a raw-tracepoint twin, and the twin's program name.
const GET_PAGES_RAW: (&str, &str) = ("filemap_get_pages", "filemap_get_pages_raw");

/// Attaches `cache_sched_switch` (raw `sched_switch`): once it has run on a CPU, the read path
/// there may remember the current task until the next switch (see CacheScratch::task_state).
fn attach_task_cache(ebpf: &mut Ebpf) -> BpfProgramStatus {
    const PROGRAM: &str = "cache_sched_switch";
    let r = load_and_attach_raw(ebpf, PROGRAM, "sched_switch");
    BpfProgramStatus {
        mechanism: "raw tracepoint".into(),
        ..super::attach::program_status(PROGRAM, "sched", "sched_switch", r.map_err(|e| format!("{e:#}")))
    }
}

/// Attaches `program` as a raw tracepoint on `p.event`. Its arguments are the event's `TP_PROTO`
/// (the kernel refuses the attach when the program reads more of them than there are).
fn attach_raw(ebpf: &mut Ebpf, program: &str, p: &Probe) -> Result<BpfProgramStatus> {
    load_and_attach_raw(ebpf, program, p.event)?;
    Ok(BpfProgramStatus {
        mechanism: "raw tracepoint".into(),
        ..super::attach::program_status(program, p.category, p.event, Ok(()))
    })
}

/// Loads raw-tracepoint program `program` and attaches it to `event`.
fn load_and_attach_raw(ebpf: &mut Ebpf, program: &str, event: &str) -> Result<()> {
    super::preload::load(ebpf, program, super::preload::How::RawTracePoint)?;
    super::attach::program_of::<aya::programs::RawTracePoint>(ebpf, program)?.attach(event)?;
    Ok(())
}

/// The maps as userspace sees them.
pub struct PageCacheMaps {
    procs: PerCpuHashMap<MapData, u32, CacheCounters>,
    /// CACHE_PROCS is read in batches while the kernel has them (map_batch).
    batch: bool,
    totals: PerCpuArray<MapData, CacheCounters>,
    dirty: Array<MapData, DirtyStateRecord>,
    scratch: PerCpuArray<MapData, CacheScratch>,
    dio_memo: PerCpuArray<MapData, DioMemo>,
    write_memo: PerCpuArray<MapData, WriteMemo>,
    hz: u64,
    attached: std::sync::Arc<Vec<String>>,
    /// CACHE_PROCS as last read, keyed by what the counters outside it said just before (see
    /// [`PageCacheMaps::read`]).
    last: super::inserts::Reuse<QuietKey, Vec<(u32, Vec<CacheCounters>)>>,
    /// When the processes of CACHE_PROCS were last checked for being alive: while the map is
    /// reused (nothing counted) at most once per [`super::block::LIVENESS_FRESH`].
    alive_checked: Option<std::time::Instant>,
}

/// What moves whenever a program counts anything in a process's CACHE_PROCS entry: the totals
/// (every count goes there too), each CPU's pending read pages and read count, and the write and
/// direct-I/O memos. Equal in two samples: no process's counts moved in between.
#[derive(Clone, PartialEq)]
pub struct QuietKey {
    totals: Vec<CacheCounters>,
    reads: Vec<(u64, u32, u64)>,
    write_memos: Vec<(u32, u64, u64, u64)>,
    dio_memos: Vec<(u32, u32, u64, u64, u64, u64, u64)>,
}

/// Each CPU's counters outside CACHE_PROCS: the totals, the read path's slot, the memos.
struct Outside {
    totals: Vec<CacheCounters>,
    scratch: Vec<CacheScratch>,
    writes: Vec<WriteMemo>,
    dio: Vec<DioMemo>,
}

impl QuietKey {
    fn of(o: &Outside) -> QuietKey {
        let (scratch, writes, dio) = (&o.scratch, &o.writes, &o.dio);
        QuietKey {
            totals: o.totals.clone(),
            reads: scratch.iter().map(|s| (s.read_pages, s.pending_tgid, s.pending_read_pages)).collect(),
            write_memos: writes
                .iter()
                .map(|m| (m.tgid, m.inserted_pages, m.dirtied_pages, m.write_inserted_pages))
                .collect(),
            dio_memos: dio
                .iter()
                .map(|m| (m.tgid, m.dev, m.ino, m.reads, m.read_bytes, m.writes, m.write_bytes))
                .collect(),
        }
    }
}

impl PageCacheMaps {
    /// Takes the three maps out of the loaded object. `statuses` are the page-cache programs'
    /// attach results (to record which counters are live).
    pub fn take(ebpf: &mut Ebpf, statuses: &[BpfProgramStatus], hz: u64) -> Result<PageCacheMaps> {
        let mut take =
            |name: &str| ebpf.take_map(name).ok_or_else(|| anyhow!("map {name} is not in the eBPF object"));
        let procs = PerCpuHashMap::try_from(take(CACHE_PROCS_MAP)?)?;
        let totals = PerCpuArray::try_from(take(CACHE_TOTALS_MAP)?)?;
        let dirty = Array::try_from(take(DIRTY_STATE_MAP)?)?;
        let scratch = PerCpuArray::try_from(take(CACHE_SCRATCH_MAP)?)?;
        let dio_memo = PerCpuArray::try_from(take(DIO_MEMO_MAP)?)?;
        let write_memo = PerCpuArray::try_from(take(WRITE_MEMO_MAP)?)?;
        let attached =
            statuses.iter().filter(|s| s.attached).map(|s| s.tracepoint.clone()).collect::<Vec<_>>();
        Ok(PageCacheMaps {
            procs,
            totals,
            dirty,
            scratch,
            dio_memo,
            write_memo,
            hz,
            attached: attached.into(),
            batch: true,
            last: Default::default(),
            alive_checked: None,
        })
    }

    /// The per-CPU counters outside CACHE_PROCS, as of now.
    fn outside(&self) -> Result<Outside> {
        Ok(Outside {
            totals: self.totals.get(&0, 0).context("reading CACHE_TOTALS")?.iter().copied().collect(),
            scratch: self.scratch.get(&0, 0).context("reading CACHE_SCRATCH")?.iter().copied().collect(),
            writes: self.write_memo.get(&0, 0).context("reading WRITE_MEMO")?.iter().copied().collect(),
            dio: self.dio_memo.get(&0, 0).context("reading DIO_MEMO")?.iter().copied().collect(),
        })
    }

    /// Each CPU's pending direct I/O (see DioMemo), for the files' rows: read after FILE_IO, so
    /// that counts moving from a memo to the map meanwhile are missed for a moment, not doubled.
    pub fn dio_memos(&self) -> Result<Vec<DioMemo>> {
        let memos = self.dio_memo.get(&0, 0).context("reading DIO_MEMO")?;
        Ok(memos.iter().copied().filter(DioMemo::pending).collect())
    }

    /// The counters as of now. Processes whose /proc entry is gone are reported once more (as
    /// exited, with their final counts) and then removed from the map.
    pub fn read(&mut self) -> Result<PageCacheSample> {
        // Values first, liveness second, and a process found dead read once more: its counts
        // read after its death are final (read before it, its last I/O could still come in, and
        // be lost with the entry removed below).
        // In batches where the kernel has them: two system calls for a quiet machine's dozen
        // processes instead of two per process. Not even that while nothing counted since the
        // last read (the counters outside the map say so): the batch visits every one of the
        // map's 16,384 buckets, most of a quiet sample's page-cache cost at `--interval 0.1`.
        // The key is what those counters said *before* the map was read: the programs count the
        // totals a moment before the process, so a count whose totals the key has seen had its
        // process's count done before the map was read (unless the program was preempted in
        // between for longer than the read took). The map is read anyway once every SLOW_REFRESH.
        let now = std::time::Instant::now();
        let before = self.outside()?;
        let quiet = QuietKey::of(&before);
        let mut reused = false;
        let (entries, outside) = match self.last.get(&quiet, now) {
            Some(entries) => {
                reused = true;
                (entries.clone(), before)
            }
            None => {
                let entries = super::map_batch::per_cpu_hash_entries(
                    &self.procs,
                    &mut self.batch,
                    usize::MAX,
                    CACHE_PROCS_MAP,
                )?;
                // Read again after the map, as they are reported (never less than the processes').
                let after = self.outside()?;
                self.last.put(quiet, entries.clone(), now);
                (entries, after)
            }
        };
        // Counters that stand still are final whenever their process exits: checked once per
        // LIVENESS_FRESH then, not every sample (a kill(2) per process).
        let checked =
            self.alive_checked.is_some_and(|t| now.duration_since(t) < super::block::LIVENESS_FRESH);
        let gone: Vec<u32> = if reused && checked {
            Vec::new()
        } else {
            self.alive_checked = Some(now);
            entries.iter().map(|e| e.0).filter(|&pid| !crate::util::process_exists(pid)).collect()
        };
        let mut processes = Vec::with_capacity(entries.len());
        for (pid, mut per_cpu) in entries {
            if gone.contains(&pid) {
                if let Ok(last) = self.procs.get(&pid, 0) {
                    per_cpu = last.iter().copied().collect();
                }
            }
            let (counters, comm) = sum_cpus(&per_cpu);
            processes.push(CacheProcessSample {
                pid,
                comm,
                exited: gone.contains(&pid),
                counters,
                cgroup_id: newest_cgroup(&per_cpu),
                cgroup: String::new(),
            });
        }
        for pid in &gone {
            let _ = self.procs.remove(pid);
        }
        if let Some(entries) = self.last.value_mut() {
            entries.retain(|(pid, _)| !gone.contains(pid));
        }
        // Read pages still pending in the CPUs' scratch slots belong to their process too.
        let Outside { totals, scratch, writes: write_memos, dio } = outside;
        let dio: Vec<DioMemo> = dio.into_iter().filter(DioMemo::pending).collect();
        add_pending(&mut processes, &scratch, &dio, &write_memos, crate::util::process_exists);
        processes.sort_by_key(|p| p.pid);
        let totals = system_totals(&totals, &scratch);
        let d = self.dirty.get(&0, 0).context("reading DIRTY_STATE")?;
        Ok(PageCacheSample {
            hz: self.hz,
            rss_mapped: self.attached.iter().any(|t| t == "kmem:rss_stat"),
            attached: self.attached.clone(),
            totals,
            processes,
            dirty_state: (d.seen > 0).then_some(KernelDirtyState {
                nr_dirty: d.nr_dirty,
                nr_writeback: d.nr_writeback,
                background_thresh: d.background_thresh,
                dirty_thresh: d.dirty_thresh,
                dirty_limit: d.dirty_limit,
                seen_mono_ns: d.seen_ns,
            }),
            last_throttle: (d.throttle_ns > 0).then_some(ThrottleRecord {
                mono_ns: d.throttle_ns,
                limit: d.throttle_limit,
                setpoint: d.throttle_setpoint,
                dirty: d.throttle_dirty,
                pause_jiffies: d.throttle_pause_jiffies,
            }),
        })
    }
}

/// The system-wide counters: CACHE_TOTALS summed over the CPUs, and the read pages, which the
/// read path counts in each CPU's scratch slot instead (CacheScratch::read_pages).
fn system_totals(per_cpu: &[CacheCounters], scratch: &[CacheScratch]) -> CacheCountersSample {
    let (mut totals, _) = sum_cpus(per_cpu);
    totals.read_pages += scratch.iter().map(|s| s.read_pages).sum::<u64>();
    totals
}

/// Adds each CPU's pending read pages, direct I/O and written pages (CacheScratch, DioMemo,
/// WriteMemo) to their process's row (a new row when the process has none: then its name comes
/// from /proc, and it is marked exited when /proc no longer has it).
pub fn add_pending(
    processes: &mut Vec<CacheProcessSample>,
    per_cpu: &[CacheScratch],
    dio_memos: &[DioMemo],
    write_memos: &[WriteMemo],
    exists: impl Fn(u32) -> bool,
) {
    fn row<'a>(
        processes: &'a mut Vec<CacheProcessSample>,
        pid: u32,
        exists: &impl Fn(u32) -> bool,
    ) -> &'a mut CacheCountersSample {
        let i = match processes.iter().position(|p| p.pid == pid) {
            Some(i) => i,
            None => {
                processes.push(CacheProcessSample {
                    pid,
                    comm: String::new(),
                    exited: !exists(pid),
                    counters: CacheCountersSample::default(),
                    ..Default::default()
                });
                processes.len() - 1
            }
        };
        &mut processes[i].counters
    }
    for s in per_cpu.iter().filter(|s| s.pending_read_pages > 0) {
        row(processes, s.pending_tgid, &exists).read_pages += s.pending_read_pages;
    }
    for m in dio_memos.iter().filter(|m| m.pending()) {
        let c = row(processes, m.tgid, &exists);
        c.dio_reads += m.reads;
        c.dio_read_bytes += m.read_bytes;
        c.dio_writes += m.writes;
        c.dio_write_bytes += m.write_bytes;
    }
    for m in write_memos.iter().filter(|m| m.pending()) {
        let c = row(processes, m.tgid, &exists);
        c.inserted_pages += m.inserted_pages;
        c.dirtied_pages += m.dirtied_pages;
        c.write_inserted_pages += m.write_inserted_pages;
    }
}

/// Adds up one entry's per-CPU counters; the comm is the one set most recently on any CPU.
pub fn sum_cpus(per_cpu: &[CacheCounters]) -> (CacheCountersSample, String) {
    let mut t = CacheCountersSample::default();
    let mut comm = String::new();
    let mut comm_ns = 0u64;
    for c in per_cpu {
        t.accumulate(c);
        if c.comm[0] != 0 && (comm.is_empty() || c.comm_ns > comm_ns) {
            comm_ns = c.comm_ns;
            comm = crate::util::c_string(&c.comm);
        }
    }
    (t, comm)
}

/// The cgroup id read with the newest comm (the probes read both together; see
/// ioscope_common::page_cache::CacheCounters::cgroup_id); 0 when no CPU set one.
pub fn newest_cgroup(per_cpu: &[CacheCounters]) -> u64 {
    per_cpu.iter().filter(|c| c.cgroup_id != 0).max_by_key(|c| c.comm_ns).map_or(0, |c| c.cgroup_id)
}

/// A reading of the kernel's jiffies counter and CLOCK_MONOTONIC together, from /proc/timer_list
/// (root only): "now at N nsecs" heads the file, "jiffies: J" follows.
pub fn jiffies_reading(timer_list: &str) -> Option<(u64, u64)> {
    let now = timer_list
        .lines()
        .find_map(|l| l.trim().strip_prefix("now at ")?.strip_suffix(" nsecs")?.trim().parse::<u64>().ok())?;
    let jiffies =
        timer_list.lines().find_map(|l| l.trim().strip_prefix("jiffies:")?.trim().parse::<u64>().ok())?;
    Some((now, jiffies))
}

/// The HZ values kernels are configured with (kernel/Kconfig.hz), plus the odd ones some
/// architectures use.
const KNOWN_HZ: [u64; 8] = [24, 48, 100, 128, 250, 256, 300, 1000];

/// HZ from two (ns, jiffies) readings: the rate, snapped to a known value within 10 %.
pub fn hz_from_readings(a: (u64, u64), b: (u64, u64)) -> Option<u64> {
    let ns = b.0.checked_sub(a.0)?;
    let jiffies = b.1.checked_sub(a.1)?;
    if ns < 50_000_000 {
        return None;
    }
    let rate = jiffies as f64 * 1e9 / ns as f64;
    KNOWN_HZ.iter().copied().find(|&hz| (rate - hz as f64).abs() <= hz as f64 * 0.1)
}

/// Measures the kernel's HZ (pauses in `balance_dirty_pages` are in jiffies); `since` is a first
/// reading taken earlier (ideally before the slow eBPF load), so usually no waiting is needed.
/// Falls back to 250 (the most common distribution setting) and says so in the error.
pub fn measure_hz(since: Option<((u64, u64), Instant)>) -> Result<u64, String> {
    let read = || std::fs::read_to_string("/proc/timer_list").ok().and_then(|t| jiffies_reading(&t));
    let (first, at) = match since {
        Some(s) => s,
        None => (read().ok_or("cannot read /proc/timer_list")?, Instant::now()),
    };
    let min = Duration::from_millis(200);
    if at.elapsed() < min {
        std::thread::sleep(min - at.elapsed());
    }
    let second = read().ok_or("cannot read /proc/timer_list")?;
    hz_from_readings(first, second).ok_or_else(|| "jiffies rate is not a known HZ".to_string())
}

/// A first jiffies reading for [`measure_hz`].
pub fn jiffies_now() -> Option<((u64, u64), Instant)> {
    let text = std::fs::read_to_string("/proc/timer_list").ok()?;
    Some((jiffies_reading(&text)?, Instant::now()))
}

/// HZ assumed when it cannot be measured.
pub const FALLBACK_HZ: u64 = 250;

/// The page-cache family: accesses, additions, dirtying and direct I/O per process, the kernel's
/// dirty throttling. Its maps ([`PageCacheMaps`]) are published in the shared values: the files
/// family reads their direct-I/O memos.
#[derive(Default)]
pub struct PageCacheFamily {
    layout: Option<CacheLayout>,
    layouts: Vec<Result<(), String>>,
    fn_layout: Option<FnLayout>,
    fallbacks: Vec<Planned>,
    /// HZ is measured across the (slow) load: the first jiffies reading.
    jiffies_before: Option<((u64, u64), Instant)>,
    /// The thread whose page-cache activity is not counted (BpfOptions::ignored_thread; 0: none).
    ignored_tid: u32,
    notes: Vec<String>,
}

/// The kernel functions (probes) the page-cache family planned fallbacks on
/// ([`FnFallback::probe`]): the readahead family reads faults and reads through them too.
pub struct FallbacksPlanned(pub Vec<&'static str>);

impl PageCacheFamily {
    fn fn_btf<'a>(&self, setup: &super::family::Setup<'a>) -> Option<&'a aya::Btf> {
        setup.btf.filter(|_| !self.fallbacks.is_empty()).map(|k| k.aya_with_functions())
    }
}

impl super::family::Family for PageCacheFamily {
    fn name(&self) -> &'static str {
        "page cache"
    }

    fn plan(&mut self, setup: &mut super::family::Setup) {
        self.jiffies_before = jiffies_now();
        let (mut cache_layout, mut layouts) = layout(setup.tracefs, setup.hidden());
        let mut fn_layout = FnLayout::UNSET;
        // Tracepoints this kernel lacks: programs on the functions they sit in.
        if let (Some(k), true) = (setup.btf, layouts.iter().any(|l| l.is_err())) {
            let iomap_configured = super::iomap::IomapBtf::of(setup).is_ok();
            self.fallbacks = plan_fallbacks(
                &mut layouts,
                &mut cache_layout,
                &mut fn_layout,
                k,
                setup.traceable(),
                iomap_configured,
            );
        }
        setup.shared.put(FallbacksPlanned(self.fallbacks.iter().map(|p| p.fallback.probe).collect()));
        (self.layout, self.layouts, self.fn_layout) = (Some(cache_layout), layouts, Some(fn_layout));
    }

    fn configure(&mut self, setup: &mut super::family::Setup) {
        self.ignored_tid = setup.options.ignored_thread.unwrap_or(0);
    }

    fn globals<'s>(&'s self, loader: &mut aya::EbpfLoader<'s>) {
        use ioscope_common::page_cache::{CACHE_LAYOUT_GLOBAL, IGNORED_TID_GLOBAL};
        let fn_layout = self.fn_layout.as_ref().unwrap_or(&FnLayout::UNSET);
        loader.override_global(ioscope_common::fallback::FN_LAYOUT_GLOBAL, fn_layout, true);
        loader.override_global(
            CACHE_LAYOUT_GLOBAL,
            self.layout.as_ref().unwrap_or(&CacheLayout::UNSET),
            true,
        );
        loader.override_global(IGNORED_TID_GLOBAL, &self.ignored_tid, true);
    }

    fn loads<'a>(
        &'a self,
        setup: &super::family::Setup<'a>,
        _: &[super::preload::Planned<'a>],
    ) -> Vec<super::preload::Planned<'a>> {
        let iomap_btf = super::iomap::IomapBtf::aya(setup);
        loads(&self.layouts, iomap_btf, (&self.fallbacks, self.fn_btf(setup), setup.options.no_trampoline))
    }

    fn attach(
        &mut self,
        ebpf: &mut Ebpf,
        setup: &mut super::family::Setup,
        statuses: &mut Vec<BpfProgramStatus>,
    ) {
        let iomap_btf = super::iomap::IomapBtf::aya(setup);
        let fallbacks = (&self.fallbacks[..], self.fn_btf(setup), setup.options.no_trampoline);
        let (programs, maps, hz_note) =
            attach(ebpf, &self.layouts, self.jiffies_before, iomap_btf, fallbacks);
        statuses.extend(programs);
        self.notes.extend(hz_note);
        if let Some(maps) = maps {
            setup.shared.put(maps);
        }
    }

    fn notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    fn read(
        &mut self,
        shared: &mut super::family::Shared,
        sample: &mut crate::sample::BpfSample,
    ) -> Vec<String> {
        let mut errors = Vec::new();
        if let Some(maps) = shared.get_mut::<PageCacheMaps>() {
            match maps.read() {
                Ok(pc) => sample.page_cache = Some(pc),
                Err(e) => errors.push(format!("{e:#}")),
            }
        }
        if let Some(pc) = &mut sample.page_cache {
            let names = shared.get_or_insert_with(super::cgroup::CgroupNames::default);
            for p in &mut pc.processes {
                p.cgroup = names.path(p.cgroup_id);
            }
        }
        errors
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tracefs").join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Linux 5.10's events, raised per page: no `order` field (Debian's 5.10, as the lab reads it).
    pub(in crate::bpf) const ADD_5_10: &str = "name: mm_filemap_add_to_page_cache\nID: 470\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:unsigned long pfn;\toffset:8;\tsize:8;\tsigned:0;\n\
        \tfield:unsigned long i_ino;\toffset:16;\tsize:8;\tsigned:0;\n\
        \tfield:unsigned long index;\toffset:24;\tsize:8;\tsigned:0;\n\
        \tfield:dev_t s_dev;\toffset:32;\tsize:4;\tsigned:0;\n\n\
        print fmt: \"dev %d:%d ino %lx page=%p pfn=0x%lx ofs=%lu\"\n";

    #[test]
    fn an_event_without_order_counts_one_page_per_event() {
        let mut l = CacheLayout::UNSET;
        fill_layout(&mut l, 3, ADD_5_10).unwrap();
        fill_layout(
            &mut l,
            4,
            &ADD_5_10.replace("mm_filemap_add_to_page_cache", "mm_filemap_delete_from_page_cache"),
        )
        .unwrap();
        assert_eq!((l.add_ok, l.add_ino, l.add_index, l.add_order), (1, 16, 24, NO_ORDER));
        assert_eq!((l.delete_ok, l.delete_order), (1, NO_ORDER));
        // A folio event whose order field is of another size is still refused, not guessed at.
        let odd = ADD_5_10.replace(
            "\tfield:dev_t s_dev;",
            "\tfield:int order;\toffset:36;\tsize:4;\tsigned:1;\n\tfield:dev_t s_dev;",
        );
        assert!(fill_layout(&mut l, 3, &odd).is_err());
    }

    #[test]
    fn layout_comes_from_the_6_18_format_files() {
        let mut l = CacheLayout::UNSET;
        let files = [
            "mm_filemap_get_pages-6.18.format",
            "mm_filemap_map_pages-6.18.format",
            "mm_filemap_fault-6.18.format",
            "mm_filemap_add_to_page_cache-6.18.format",
            "mm_filemap_delete_from_page_cache-6.18.format",
            "writeback_dirty_folio-6.18.format",
            "balance_dirty_pages-6.18.format",
            "global_dirty_state-6.18.format",
            "iomap_dio_rw_begin-6.18.format",
            "rss_stat-6.18.format",
        ];
        for (i, f) in files.iter().enumerate() {
            fill_layout(&mut l, i, &fixture(f)).unwrap_or_else(|e| panic!("{f}: {e:#}"));
        }
        assert_eq!(
            (l.get_pages_ok, l.get_pages_ino, l.get_pages_dev, l.get_pages_index, l.get_pages_last_index),
            (1, 8, 16, 24, 32)
        );
        assert_eq!((l.map_pages_ok, l.map_pages_index, l.map_pages_last_index), (1, 24, 32));
        assert_eq!((l.add_ok, l.add_ino, l.add_index, l.add_order), (1, 16, 24, 36));
        assert_eq!((l.delete_ok, l.delete_order), (1, 36));
        assert_eq!((l.dirty_ok, l.dirty_ino, l.dirty_index), (1, 40, 48));
        assert_eq!((l.bdp_ok, l.bdp_limit, l.bdp_setpoint, l.bdp_dirty, l.bdp_pause), (1, 40, 48, 56, 112));
        assert_eq!(
            (l.gds_ok, l.gds_nr_dirty, l.gds_nr_writeback, l.gds_background_thresh, l.gds_dirty_thresh),
            (1, 8, 16, 24, 32)
        );
        assert_eq!(l.gds_dirty_limit, 40);
        assert_eq!((l.dio_ok, l.dio_count, l.dio_ki_flags, l.dio_write_flag), (1, 40, 56, 1 << 18));
        assert_eq!(
            (l.rss_ok, l.rss_mm_id, l.rss_curr, l.rss_member, l.rss_size, l.rss_file_member),
            (1, 8, 12, 16, 24, 0)
        );
    }

    #[test]
    fn rss_member_symbols_are_read_from_the_print_format() {
        let text = fixture("rss_stat-6.18.format");
        assert_eq!(symbol_value(&text, "MM_FILEPAGES"), Some(0));
        assert_eq!(symbol_value(&text, "MM_SHMEMPAGES"), Some(3));
        assert_eq!(symbol_value(&text, "MM_NOPE"), None);
    }

    #[test]
    fn a_format_without_a_needed_field_names_it() {
        let mut l = CacheLayout::UNSET;
        // block_rq_issue is no filemap event: get_pages' fields are missing.
        let err = fill_layout(&mut l, 0, &fixture("block_rq_issue-6.18.format")).unwrap_err();
        assert!(format!("{err:#}").contains("has no field `s_dev`"), "{err:#}");
        assert_eq!(l.get_pages_ok, 0);
    }

    #[test]
    fn write_bit_is_read_from_the_print_format() {
        assert_eq!(write_flag(&fixture("iomap_dio_rw_begin-6.18.format")), Some(1 << 18));
        let other = "print fmt: \"%s\", __print_flags(REC->ki_flags, \"|\", { (1 << 17), \"DIRECT\" }, { (1 << 21), \"WRITE\" })";
        assert_eq!(write_flag(other), Some(1 << 21));
        assert_eq!(write_flag("print fmt: \"nothing\""), None);
    }

    #[test]
    fn cpus_are_summed_and_the_comm_taken_from_a_cpu_that_has_it() {
        let mut a = CacheCounters { read_pages: 10, inserted_pages: 3, comm_ns: 50, ..Default::default() };
        let b = CacheCounters { read_pages: 5, throttle_jiffies: 7, ..Default::default() };
        a.comm[..3].copy_from_slice(b"fio");
        let (t, comm) = sum_cpus(&[b, a]);
        assert_eq!((t.read_pages, t.inserted_pages, t.throttle_jiffies), (15, 3, 7));
        assert_eq!(comm, "fio");
        // After an exec on another CPU: the newer name wins.
        let mut c = CacheCounters { comm_ns: 90, ..Default::default() };
        c.comm[..3].copy_from_slice(b"cat");
        let mut d = a;
        d.comm = [0; 16];
        d.comm[..4].copy_from_slice(b"bash");
        assert_eq!(sum_cpus(&[d, c]).1, "cat");
        assert_eq!(sum_cpus(&[c, d]).1, "cat");
    }

    #[test]
    fn read_pages_counted_in_the_scratch_slots_join_the_totals() {
        let cpu0 = CacheCounters { read_pages: 5, faults: 2, ..Default::default() };
        let cpu1 = CacheCounters { faults: 1, ..Default::default() };
        let slot0 = CacheScratch { read_pages: 100, pending_read_pages: 40, ..Default::default() };
        let slot1 = CacheScratch { read_pages: 28, ..Default::default() };
        let t = system_totals(&[cpu0, cpu1], &[slot0, slot1]);
        // The pending pages are a process's share of the slot's read pages, not more of them.
        assert_eq!(t.read_pages, 5 + 100 + 28);
        assert_eq!(t.faults, 3);
    }

    #[test]
    fn pending_read_pages_join_their_process() {
        let mut procs = vec![CacheProcessSample {
            pid: 10,
            comm: "fio".into(),
            counters: CacheCountersSample { read_pages: 100, ..Default::default() },
            ..Default::default()
        }];
        let cpu0 = CacheScratch { pending_tgid: 10, pending_read_pages: 32, ..Default::default() };
        let cpu1 = CacheScratch { pending_tgid: 11, pending_read_pages: 8, ..Default::default() };
        let cpu2 = CacheScratch { pending_tgid: 12, pending_read_pages: 0, ..Default::default() };
        add_pending(&mut procs, &[cpu0, cpu1, cpu2], &[], &[], |pid| pid != 11);
        assert_eq!(procs.len(), 2);
        assert_eq!(procs[0].counters.read_pages, 132);
        assert_eq!((procs[1].pid, procs[1].counters.read_pages, procs[1].exited), (11, 8, true));
    }

    #[test]
    fn pending_direct_io_joins_its_process() {
        let mut procs = vec![CacheProcessSample {
            pid: 10,
            comm: "fio".into(),
            counters: CacheCountersSample { dio_reads: 1, dio_read_bytes: 4096, ..Default::default() },
            ..Default::default()
        }];
        let memo = |tgid, reads, writes| DioMemo {
            tgid,
            dev: 7,
            ino: 12,
            reads,
            read_bytes: reads * 4096,
            writes,
            write_bytes: writes * 65536,
        };
        // fio's pending reads on two CPUs; a gone process's writes; an empty memo adds nothing.
        let cpus = [memo(10, 5, 0), memo(10, 5, 0), memo(13, 0, 2), memo(14, 0, 0)];
        add_pending(&mut procs, &[], &cpus, &[], |pid| pid != 13);
        assert_eq!(procs.len(), 2);
        let fio = &procs[0].counters;
        assert_eq!((fio.dio_reads, fio.dio_read_bytes, fio.dio_writes), (11, 11 * 4096, 0));
        let gone = &procs[1];
        assert_eq!(
            (gone.pid, gone.exited, gone.counters.dio_writes, gone.counters.dio_write_bytes),
            (13, true, 2, 131072)
        );
    }

    #[test]
    fn pending_written_pages_join_their_process() {
        let mut procs = vec![CacheProcessSample {
            pid: 10,
            comm: "fio".into(),
            counters: CacheCountersSample {
                inserted_pages: 1,
                dirtied_pages: 1,
                write_inserted_pages: 1,
                ..Default::default()
            },
            ..Default::default()
        }];
        let memo = |tgid, pages| WriteMemo {
            tgid,
            used: 1,
            inserted_pages: pages,
            dirtied_pages: pages + 1,
            write_inserted_pages: pages,
        };
        // fio's pages pending on two CPUs; a gone process's; a memo with nothing pending.
        let cpus =
            [memo(10, 5), memo(10, 7), memo(13, 2), WriteMemo { tgid: 14, used: 1, ..Default::default() }];
        add_pending(&mut procs, &[], &[], &cpus, |pid| pid != 13);
        assert_eq!(procs.len(), 2);
        let fio = &procs[0].counters;
        assert_eq!((fio.inserted_pages, fio.dirtied_pages, fio.write_inserted_pages), (13, 15, 13));
        let gone = &procs[1];
        assert_eq!(
            (gone.pid, gone.exited, gone.counters.inserted_pages, gone.counters.dirtied_pages),
            (13, true, 2, 3)
        );
    }

    #[test]
    fn hz_is_measured_from_timer_list_and_snapped() {
        let text = "Timer List Version: v0.10\nHRTIMER_MAX_CLOCK_BASES: 8\nnow at 1963878944944 nsecs\n\ncpu: 0\n jiffies: 4295382930\n";
        assert_eq!(jiffies_reading(text), Some((1_963_878_944_944, 4_295_382_930)));
        // 0.2 s at 250 Hz is 50 jiffies; 51 (a tick boundary) still snaps to 250.
        assert_eq!(hz_from_readings((0, 100), (200_000_000, 151)), Some(250));
        assert_eq!(hz_from_readings((0, 100), (200_000_000, 300)), Some(1000));
        assert_eq!(hz_from_readings((0, 100), (200_000_000, 120)), Some(100));
        // Too short to tell, or nonsense.
        assert_eq!(hz_from_readings((0, 100), (10_000_000, 103)), None);
        assert_eq!(hz_from_readings((0, 100), (200_000_000, 100_000)), None);
    }
}
