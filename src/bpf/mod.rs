//! The eBPF side of collection: tracefs, loading the embedded object, attaching, reading maps.
//!
//! The kernel programs are built from ebpf/probes by `cargo xtask ebpf` (nightly + bpf-linker) and
//! committed as assets/ioscope.bpf.o (x86-64) and assets/ioscope-aarch64.bpf.o, the one of the
//! architecture being built embedded here: building ioscope needs neither.

pub mod arch;
pub mod block;
pub mod block_claim;
pub mod block_files;
pub mod cgroup;
pub mod cgroup_move;
pub mod file_names;
pub mod files;
pub mod inserts;
pub mod iowait;
pub mod kernel_btf;
pub mod kfunc;
pub mod map_batch;
pub mod map_memory;
pub mod mapped_keys;
pub mod memcg;
pub mod page_cache;
pub mod preload;
pub mod privileges;
pub mod prog_stats;
pub mod readahead;
pub mod readahead_510;
pub mod readahead_fn;
pub mod renamed;
pub mod resolve;
pub mod syncs;
pub mod syncs_510;
pub mod teardown;
pub mod tracefs;

use std::path::PathBuf;

use anyhow::Result;
use aya::programs::TracePoint;
use aya::{Ebpf, EbpfLoader};
use ioscope_common::block::BLOCK_LAYOUT_GLOBAL;
use ioscope_common::block_files::BLOCK_RQ_CONFIG_GLOBAL;
use ioscope_common::fallback::{FnLayout, FN_LAYOUT_GLOBAL};
use ioscope_common::file_names::{NameLayout, NAME_LAYOUT_GLOBAL};
use ioscope_common::files::FILE_LAYOUT_GLOBAL;
use ioscope_common::page_cache::CACHE_LAYOUT_GLOBAL;
use ioscope_common::readahead::RA_LAYOUT_GLOBAL;
use ioscope_common::readahead_510::{Ra510Layout, RA_510_LAYOUT_GLOBAL};
use ioscope_common::readahead_fn::{RaFnLayout, RA_FN_LAYOUT_GLOBAL};

use self::block::BlockMaps;
use self::privileges::Capabilities;
use self::tracefs::TracefsState;
use crate::sample::{BpfProgramStatus, BpfSample, BpfStatus};

/// The compiled kernel programs (see ebpf/probes), built for this architecture's `pt_regs` (see
/// arch). Aligned: aya parses it as an ELF in place.
#[cfg(not(target_arch = "aarch64"))]
static OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/ioscope.bpf.o"));
#[cfg(target_arch = "aarch64")]
static OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/ioscope-aarch64.bpf.o"));

/// How the programs are attached.
#[derive(Clone, Debug)]
pub struct BpfOptions {
    /// The block and iomap programs as BTF tracepoints when the kernel allows (else classic
    /// tracepoints).
    pub btf_tracepoints: bool,
    /// A block program's BTF twin to treat as refused by the kernel (tests of the fallback: the
    /// block programs must then all be classic), or `block_claim::REFUSE_CAS`: the kernel's BPF
    /// treated as without compare-and-exchange (the block programs' and `sync_enter`'s `_nocas`
    /// twins). None in the product.
    pub refuse_block_twin: Option<String>,
    /// Tracepoints ("category:event") to treat as missing, as on an older kernel (tests of the
    /// fallbacks that this kernel also has). Empty in the product.
    pub hidden_tracepoints: Vec<String>,
    /// Paths also from /proc and mount walks when the kernel's names have none (see
    /// resolve::files). Tests turn it off to prove the kernel's names alone find them, and
    /// `ioscope serve` without `--top-files` (no per-file series to name). True in the TUI.
    pub path_fallbacks: bool,
    /// Refuse fentry/fexit on purpose, as a kernel without BPF trampolines does, so that the
    /// fallbacks run as their kprobe variants: a test knob (the kernel lab's `--no-trampoline`
    /// run), set by `IOSCOPE_NO_TRAMPOLINE=1`. False in the product.
    pub no_trampoline: bool,
    /// A thread whose page-cache insertions and dirtying are not counted: the one writing
    /// ioscope's own reports or recording ([`BpfOptions::for_output_writer`]). Else at
    /// `--interval 0.1` ioscope's output is the busiest file of a quiet machine, and what the
    /// maps hold for it is read and resolved every sample (ebpf/README.md, "Page cache").
    pub ignored_thread: Option<u32>,
}

impl BpfOptions {
    /// The defaults, with `IOSCOPE_HIDE_TRACEPOINTS` ("category:event,...") as
    /// [`BpfOptions::hidden_tracepoints`]: measuring a fallback beside its tracepoint on one
    /// kernel (the kernel lab's `cost` run). Unset in the product.
    pub fn from_env() -> BpfOptions {
        let hidden = std::env::var("IOSCOPE_HIDE_TRACEPOINTS").unwrap_or_default();
        BpfOptions {
            hidden_tracepoints: hidden.split(',').filter(|t| !t.is_empty()).map(str::to_string).collect(),
            no_trampoline: std::env::var_os("IOSCOPE_NO_TRAMPOLINE").is_some_and(|v| v == "1"),
            ..BpfOptions::default()
        }
    }

    /// [`BpfOptions::from_env`] for a collector whose thread writes ioscope's output: that
    /// thread's own writes are not counted ([`BpfOptions::ignored_thread`]).
    pub fn for_output_writer() -> BpfOptions {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        BpfOptions { ignored_thread: Some(tid), ..BpfOptions::from_env() }
    }
}

impl Default for BpfOptions {
    fn default() -> Self {
        BpfOptions {
            btf_tracepoints: true,
            refuse_block_twin: None,
            hidden_tracepoints: Vec::new(),
            path_fallbacks: true,
            no_trampoline: false,
            ignored_thread: None,
        }
    }
}

/// Owns the loaded eBPF programs (when any) and reads their maps into the Sample.
pub struct BpfCollector {
    status: BpfStatus,
    /// Kept alive because dropping it detaches the programs.
    _ebpf: Option<Ebpf>,
    /// The block-layer probes' maps (src/bpf/block.rs).
    block: Option<BlockMaps>,
    page_cache: Option<page_cache::PageCacheMaps>,
    /// The per-file attribution map, and the path/mount bookkeeping that turns it into samples.
    files: Option<files::FileMaps>,
    file_resolver: resolve::files::FileResolver,
    /// The direct I/O pending in the CPUs' memos as of the last sample.
    dio_memos: files::MemoTracker,
    readahead: Option<readahead::ReadaheadMaps>,
    /// Completed requests from `block_rq_complete`, and their mapping to files.
    request_ring: Option<block_files::RequestRing>,
    block_file_mapper: resolve::block_files::BlockFileMapper,
    /// Sync calls (fsync and friends) and the paths of their files.
    syncs: Option<syncs::SyncMaps>,
    sync_attached: std::sync::Arc<Vec<String>>,
    sync_paths: resolve::syncs::SyncPathResolver,
    /// I/O wait per thread and cause (iowait.rs).
    iowait: Option<iowait::IowaitMaps>,
    /// Each program of the status (same order), when attached: to read the kernel's run counts.
    program_fds: Vec<Option<aya::programs::ProgramFd>>,
    prog_stats: prog_stats::StatsCache,
    /// cgroup v2 ids to paths, for the block and page-cache rows (one cache for both).
    cgroups: cgroup::CgroupNames,
    /// How the programs' loads were planned and done (see preload).
    preloaded: preload::Report,
    /// Every map's kernel memory (see map_memory).
    map_memory: map_memory::Measured,
}

impl BpfCollector {
    /// Mounts tracefs if needed, loads the embedded object and attaches every program. Never fails:
    /// whatever cannot be done is described in the status (and the rest still works).
    pub fn start() -> BpfCollector {
        BpfCollector::start_with(&BpfOptions::from_env())
    }

    /// [`BpfCollector::start`], with choices that tests (and a user comparing) can make.
    pub fn start_with(options: &BpfOptions) -> BpfCollector {
        let caps = match Capabilities::read() {
            Ok(caps) => caps,
            Err(reason) => return BpfCollector::disabled(&reason),
        };
        if let Some(reason) = caps.missing_for_tracing() {
            return BpfCollector::disabled(&reason);
        }
        let tracefs = match locate_tracefs(caps, tracefs::state(), tracefs::mount) {
            Ok(path) => path,
            Err(reason) => return BpfCollector::disabled(&reason),
        };
        raise_memlock_rlimit();

        // Per program, what it needs from tracefs; a program whose needs fail is not attached but
        // the others still are.
        let (mut block_layout, block_ready, block_events) =
            block::layout(&tracefs, &options.hidden_tracepoints);
        // HZ is measured across the (slow) load: a first jiffies reading now.
        let jiffies_before = page_cache::jiffies_now();
        let (mut cache_layout, mut cache_layouts) = page_cache::layout(&tracefs, &options.hidden_tracepoints);
        let (mut file_layout, mut wsi_ready, file_notes) = files::layout(&tracefs);
        let mut file_sync_ra = None;
        let (mut ra_layout, mut ra_layouts) = readahead::layout(&tracefs, &options.hidden_tracepoints);
        let sync_plan_hidden = options.hidden_tracepoints.clone();

        // The kernel's BTF, read once here and shared (struct layouts, the BTF tracepoints and the
        // function fallbacks: see kernel_btf). The programs on the busiest events (every
        // block request, every direct I/O) run as BTF tracepoints where the kernel's BTF
        // describes the structs they read (far cheaper per event: no record is built, the fields
        // are plain loads); else as classic ones.
        let mut btf_notes = Vec::new();
        let btf =
            kernel_btf::KernelBtf::load().map_err(|e| btf_notes.push(format!("no kernel BTF: {e:#}"))).ok();
        let kernel_arch = btf.as_ref().and_then(arch::kernel_arch);
        if let Some(reason) = arch::refusal(arch::object_arch(OBJECT).as_deref(), kernel_arch) {
            return BpfCollector::disabled(&reason);
        }
        let mut block_btf = None;
        let mut iomap_btf = None;
        // Disk reads per file from the read bios (BTF tracepoint only; else from insertions).
        let mut bio_plan: Result<ioscope_common::files::BioLayout, String> =
            Err(if btf.is_some() { "BTF tracepoints off" } else { "no kernel BTF" }.to_string());
        let mut fn_layout = FnLayout::UNSET;
        let mut cache_fallbacks = Vec::new();
        let (mut ra_fn_layout, mut ra_fallbacks) = (RaFnLayout::UNSET, Vec::new());
        let name_layout = match &btf {
            Some(k) => file_names::layout(k).map_err(|e| format!("{e:#}")),
            None => Err("no kernel BTF".to_string()),
        };
        if let Some(k) = &btf {
            if options.btf_tracepoints {
                match block::request_layout(k) {
                    Ok(request) => {
                        block_layout.request = request;
                        block_btf = Some(k.aya());
                    }
                    Err(e) => btf_notes.push(format!("block probes on classic tracepoints: {e:#}")),
                }
            }
            if options.btf_tracepoints {
                bio_plan = files::bio_layout(k).map_err(|e| format!("{e:#}"));
            }
            match files::iomap_btf_layout(k) {
                Ok(l) => {
                    file_layout.btf = l;
                    if options.btf_tracepoints {
                        iomap_btf = Some(k.aya());
                    }
                }
                Err(e) => btf_notes.push(format!("iomap probes on classic tracepoints: {e:#}")),
            }
            // Tracepoints this kernel lacks: programs on the functions they sit in.
            let traceable = (cache_layouts.iter().chain(&ra_layouts).any(|l| l.is_err()))
                .then(|| kfunc::Traceable::read(&tracefs));
            if let (true, Some(traceable)) = (cache_layouts.iter().any(|l| l.is_err()), &traceable) {
                cache_fallbacks = page_cache::plan_fallbacks(
                    &mut cache_layouts,
                    &mut cache_layout,
                    &mut fn_layout,
                    k,
                    traceable,
                    file_layout.btf.configured != 0,
                );
            }
            // The readahead tracepoints (6.18+): fentry on the functions they sit in.
            if let Some(traceable) = &traceable {
                let missing = |program: &str| {
                    let i = readahead::PROBES.iter().position(|(p, _, _)| *p == program)?;
                    ra_layouts[i].as_ref().err().cloned()
                };
                let (layout, planned, refused) = readahead_fn::plan(missing, k, traceable);
                for (program, why) in refused {
                    if let Some(i) = readahead::PROBES.iter().position(|(p, _, _)| *p == program) {
                        ra_layouts[i] = Err(why);
                    }
                }
                (ra_fn_layout, ra_fallbacks) = (layout, planned);
                // The files' split of read pages on the same function (files::SYNC_RA_FALLBACKS).
                let ra_sync = readahead::PROBES.iter().position(|(p, _, _)| *p == "readahead_sync_ra");
                let ra_refused = ra_sync.and_then(|i| ra_layouts[i].as_ref().err().cloned());
                file_sync_ra = files::plan_sync_ra(&mut wsi_ready[1], &ra_fallbacks, ra_refused.as_deref());
                // Faults seen by the page-cache fallbacks use readahead pages too.
                let on_faults = ["filemap_fault", "filemap_map_pages"];
                if cache_fallbacks.iter().any(|p| on_faults.contains(&p.fallback.probe)) {
                    if let Err(e) = readahead_fn::fill_vm(&mut ra_fn_layout, k) {
                        btf_notes
                            .push(format!("readahead: faults without mm_filemap_fault are not uses: {e:#}"));
                    }
                }
            }
            // Reads through the read path's fallback (fexit on filemap_get_pages) are uses too.
            if cache_fallbacks.iter().any(|p| p.fallback.probe == "filemap_get_pages") {
                ra_layout.get_ok = 1;
            }
        }

        let (mut loader, _) = loader_without_kernel_btf();
        loader.override_global(FN_LAYOUT_GLOBAL, &fn_layout, true);
        loader.override_global(BLOCK_LAYOUT_GLOBAL, &block_layout, true);
        loader.override_global(CACHE_LAYOUT_GLOBAL, &cache_layout, true);
        loader.override_global(FILE_LAYOUT_GLOBAL, &file_layout, true);
        let bio_layout = bio_plan.as_ref().copied().unwrap_or(ioscope_common::files::BioLayout::UNSET);
        loader.override_global(ioscope_common::files::BIO_LAYOUT_GLOBAL, &bio_layout, true);
        let ignored_tid: u32 = options.ignored_thread.unwrap_or(0);
        loader.override_global(ioscope_common::page_cache::IGNORED_TID_GLOBAL, &ignored_tid, true);
        loader.override_global(RA_LAYOUT_GLOBAL, &ra_layout, true);
        loader.override_global(RA_FN_LAYOUT_GLOBAL, &ra_fn_layout, true);
        let ra_510 = (ra_fn_layout.configured != 0).then(|| btf.as_ref().map(readahead_510::layout));
        let ra_510 = ra_510.flatten().and_then(|l| l.ok()).unwrap_or(Ra510Layout::UNSET);
        loader.override_global(RA_510_LAYOUT_GLOBAL, &ra_510, true);
        let names_global = name_layout.as_ref().copied().unwrap_or(NameLayout::UNSET);
        loader.override_global(NAME_LAYOUT_GLOBAL, &names_global, true);
        let mut sync_plan = syncs::plan(&tracefs, btf.as_ref(), &sync_plan_hidden);
        // A kernel without compare-and-exchange, as the block programs' test knob says (its
        // `sync_enter` twin: see syncs::attach).
        sync_plan.nocas = options.refuse_block_twin.as_deref() == Some(block_claim::REFUSE_CAS);
        loader.override_global(ioscope_common::syncs::SYNC_LAYOUT_GLOBAL, &sync_plan.layout, true);
        loader.override_global(
            ioscope_common::syncs_510::URING_510_LAYOUT_GLOBAL,
            &sync_plan.uring_510,
            true,
        );
        let move_plan = cgroup_move::plan(&tracefs, &sync_plan_hidden);
        let move_layout = move_plan.clone().unwrap_or(ioscope_common::cgroup_move::MoveLayout::UNSET);
        loader.override_global(ioscope_common::cgroup_move::MOVE_LAYOUT_GLOBAL, &move_layout, true);
        let iowait_plan = iowait::plan(btf.as_ref(), options.btf_tracepoints);
        let iowait_layout = iowait_plan.clone().unwrap_or(ioscope_common::iowait::IowaitLayout::UNSET);
        loader.override_global(ioscope_common::iowait::IOWAIT_LAYOUT_GLOBAL, &iowait_layout, true);
        let rq_config = block_files::config();
        loader.override_global(BLOCK_RQ_CONFIG_GLOBAL, &rq_config, true);
        // The maps sized to the CPUs and to what the memory cgroup leaves, or eBPF off saying why.
        let (map_plan, map_defs, sizing_note) = match size_maps() {
            Ok(sized) => sized,
            Err(reason) => return BpfCollector::disabled(&reason),
        };
        for (map, entries) in &map_plan.sizes {
            loader.map_max_entries(map, *entries);
        }
        let mut ebpf = match loader.load(OBJECT) {
            Ok(ebpf) => ebpf,
            Err(e) => {
                let reason = format!("loading the eBPF object failed: {}", error_text(e));
                return BpfCollector::disabled(&reason);
            }
        };
        // Before any map is taken out of the object.
        let map_memory = map_memory::measure(&ebpf, &map_defs);

        // Every program the attach code below will load, verified on every CPU at once first (the
        // verifier is most of start-up): see preload.
        let cache_fn_btf =
            btf.as_ref().filter(|_| !cache_fallbacks.is_empty()).map(|k| k.aya_with_functions());
        let ra_btf = btf.as_ref().filter(|_| !ra_fallbacks.is_empty()).map(|k| k.aya_with_functions());
        let cache_loads = page_cache::loads(
            &cache_layouts,
            iomap_btf,
            (&cache_fallbacks, cache_fn_btf, options.no_trampoline),
        );
        let planned = |names: &[&str]| cache_loads.iter().any(|(p, _)| names.contains(&p.as_str()));
        let dio_direction_expected = file_layout.btf.dio_direction != 0
            && (planned(&[page_cache::DIO_BTF.1]) || planned(&page_cache::DIO_FENTRY));
        let raw_read_expected = planned(&page_cache::READ_PATH);
        let loads: Vec<preload::Planned> =
            block::loads(&block_ready, &block_events, block_btf, options.refuse_block_twin.as_deref())
                .into_iter()
                .chain(cache_loads.iter().cloned())
                .chain(files::loads(
                    &wsi_ready,
                    iomap_btf,
                    dio_direction_expected,
                    (file_sync_ra, ra_btf, options.no_trampoline),
                ))
                .chain(bio_plan.as_ref().ok().and(btf.as_ref()).map(|k| {
                    (files::BIO_PROGRAM.to_string(), preload::How::BtfTracePoint(files::BIO_EVENT, k.aya()))
                }))
                .chain(file_names::loads(
                    &name_layout,
                    btf.as_ref().map(|k| k.aya()),
                    &options.hidden_tracepoints,
                ))
                .chain(readahead::loads(
                    &ra_layouts,
                    raw_read_expected,
                    &ra_fallbacks,
                    (ra_btf, options.no_trampoline),
                ))
                .chain(syncs::loads(&sync_plan))
                .chain(cgroup_move::loads(&move_plan))
                .chain(iowait::loads(&iowait_plan, btf.as_ref()))
                .collect();
        preload::preload(&mut ebpf, &loads);

        // Every program with whether its needs were met; each is attached on its own, so one that
        // fails leaves the others working (the block programs all as BTF twins or all classic,
        // see block::attach).
        let (mut programs, block_attached, block_fallback_note) = block::attach(
            &mut ebpf,
            &block_ready,
            &block_events,
            block_btf,
            options.refuse_block_twin.as_deref(),
        );
        let request_ring = match block_files::RequestRing::take(&mut ebpf) {
            Ok(r) => Some(r),
            Err(e) => {
                if let Some(p) = programs.iter_mut().find(|p| p.program.starts_with("block_rq_complete")) {
                    p.error.get_or_insert_with(|| format!("no block-to-file mapping: {e:#}"));
                }
                None
            }
        };
        let block = match BlockMaps::take(&mut ebpf, &block_attached) {
            Ok(maps) => Some(maps),
            Err(e) => {
                // Without their maps the programs' counts cannot be read: report them as not working.
                for p in programs.iter_mut() {
                    p.error = Some(format!("{e:#}"));
                }
                None
            }
        };
        let (cache_statuses, page_cache, hz_note) = page_cache::attach(
            &mut ebpf,
            &cache_layouts,
            jiffies_before,
            iomap_btf,
            (&cache_fallbacks, cache_fn_btf, options.no_trampoline),
        );
        programs.extend(cache_statuses);
        let dio_has_direction = file_layout.btf.dio_direction != 0
            && programs.iter().any(|p| {
                (p.program == page_cache::DIO_BTF.1 || page_cache::DIO_FENTRY.contains(&p.program.as_str()))
                    && p.attached
            });
        let (file_statuses, files) = files::attach(
            &mut ebpf,
            wsi_ready,
            iomap_btf,
            dio_has_direction,
            (file_sync_ra, ra_btf, options.no_trampoline),
        );
        programs.extend(file_statuses);
        let bio_btf = match (&bio_plan, &btf) {
            (Ok(_), Some(k)) => Ok(k.aya()),
            (Err(e), _) => Err(e.clone()),
            (Ok(_), None) => Err("no kernel BTF".to_string()),
        };
        programs.push(files::attach_bio(&mut ebpf, bio_btf));
        let (name_statuses, names) = file_names::attach(
            &mut ebpf,
            name_layout.map(|_| ()),
            btf.as_ref().map(|k| k.aya()),
            &options.hidden_tracepoints,
        );
        programs.extend(name_statuses);
        let mut file_resolver = resolve::files::FileResolver::default();
        file_resolver.fallbacks = options.path_fallbacks;
        if let Some(names) = names {
            file_resolver.set_names(names);
        }
        // The read path's program that also feeds readahead (the raw tracepoint or its fallback).
        let raw_read =
            programs.iter().any(|p| page_cache::READ_PATH.contains(&p.program.as_str()) && p.attached);
        let (ra_statuses, mut readahead) = readahead::attach(
            &mut ebpf,
            &ra_layouts,
            raw_read,
            &ra_fallbacks,
            (ra_btf, options.no_trampoline),
        );
        programs.extend(ra_statuses);
        if let Some(ra) = &mut readahead {
            let compiled = ioscope_common::readahead::RA_PAGES_MAX;
            ra.page_map_capacity =
                u64::from(map_plan.entries(ioscope_common::readahead::RA_PAGES_MAP, compiled));
        }
        let (sync_statuses, sync_maps) = syncs::attach(&mut ebpf, &sync_plan);
        let sync_attached =
            sync_statuses.iter().filter(|p| p.attached).map(|p| p.tracepoint.clone()).collect::<Vec<_>>();
        programs.extend(sync_statuses);
        programs.push(cgroup_move::attach(&mut ebpf, &move_plan));
        let (iowait_statuses, iowait) = iowait::attach(&mut ebpf, &iowait_plan, btf.as_ref());
        programs.extend(iowait_statuses);
        let preloaded = preload::finish(&mut ebpf);
        for p in &mut programs {
            p.mechanism = mechanism(&ebpf, &p.program).to_string();
        }
        // A program attached to several events (the sync calls') has its runs counted once, on
        // its first attachment's row.
        let mut counted = std::collections::HashSet::new();
        let program_fds = programs
            .iter()
            .map(|p| {
                let prog =
                    ebpf.program(&p.program).filter(|_| p.attached && counted.insert(p.program.clone()))?;
                prog.fd().ok().and_then(|fd| fd.try_clone().ok())
            })
            .collect();
        let mut status = overall_status(programs);
        for note in btf_notes
            .into_iter()
            .chain(block_fallback_note)
            .chain(hz_note)
            .chain(file_notes)
            .chain(sync_plan.notes)
            .chain(sizing_note)
        {
            status.reason = Some(match status.reason {
                Some(r) => format!("{r}; {note}"),
                None => note,
            });
        }
        BpfCollector {
            status,
            _ebpf: Some(ebpf),
            block,
            page_cache,
            files,
            file_resolver,
            dio_memos: Default::default(),
            readahead,
            request_ring,
            block_file_mapper: Default::default(),
            syncs: sync_maps,
            sync_attached: sync_attached.into(),
            sync_paths: Default::default(),
            iowait,
            program_fds,
            prog_stats: Default::default(),
            cgroups: Default::default(),
            preloaded,
            map_memory,
        }
    }

    /// eBPF off on purpose (`--no-bpf`) or impossible; `reason` is shown to the user.
    pub fn disabled(reason: &str) -> BpfCollector {
        BpfCollector {
            status: BpfStatus {
                enabled: false,
                reason: Some(reason.to_string()),
                programs: Default::default(),
            },
            _ebpf: None,
            block: None,
            page_cache: None,
            files: None,
            file_resolver: Default::default(),
            dio_memos: Default::default(),
            readahead: None,
            request_ring: None,
            block_file_mapper: Default::default(),
            syncs: None,
            sync_attached: Default::default(),
            sync_paths: Default::default(),
            iowait: None,
            program_fds: Vec::new(),
            prog_stats: Default::default(),
            cgroups: Default::default(),
            preloaded: Default::default(),
            map_memory: Default::default(),
        }
    }

    /// How the programs' loads went: how many were verified ahead on several CPUs, how many were
    /// loaded one by one after all (a fallback taken), how many ahead for nothing.
    pub fn preload_report(&self) -> preload::Report {
        self.preloaded
    }

    /// The status as of `start()` (what is attached and why anything is not).
    pub fn status(&self) -> &BpfStatus {
        &self.status
    }

    /// How many block-layer events (a request's start, insertion, issue, completion, merge) the
    /// block programs have counted so far; None when they do not run or the count cannot be read.
    /// The count read here is the one the next [`BpfCollector::read`] keys its block tables by.
    pub fn block_events(&mut self) -> Option<u64> {
        self.block.as_mut()?.events_now().ok()
    }

    /// The cumulative counters as of now.
    pub fn read(&mut self) -> BpfSample {
        // Every program's kernel-timed runs (bpf_stats): what each mechanism costs per event.
        let stats = self.prog_stats.read(&self.program_fds);
        // Copied only when a count moved (never while bpf_stats is off): the list is shared.
        let moved = |(p, s): (&BpfProgramStatus, &Option<prog_stats::ProgStats>)| {
            s.is_some_and(|s| (p.run_cnt, p.run_time_ns) != (s.run_cnt, s.run_time_ns))
        };
        if self.status.programs.iter().zip(stats).any(moved) {
            let programs = std::sync::Arc::make_mut(&mut self.status.programs);
            for (p, stats) in programs.iter_mut().zip(stats) {
                let Some(stats) = stats else { continue };
                p.run_cnt = stats.run_cnt;
                p.run_time_ns = stats.run_time_ns;
            }
        }
        self.map_memory.refresh();
        let mut sample = BpfSample {
            status: self.status.clone(),
            maps: self.map_memory.maps.clone(),
            ..Default::default()
        };
        if let Some(block) = &mut self.block {
            if let Err(e) = block.read(&mut sample) {
                sample.status.reason = Some(format!("{e:#}"));
            }
        }
        if let Some(maps) = &mut self.page_cache {
            match maps.read() {
                Ok(pc) => sample.page_cache = Some(pc),
                Err(e) => sample.status.reason = Some(format!("{e:#}")),
            }
        }
        cgroup::name_rows(&mut sample, &mut self.cgroups);
        if let Some(maps) = &mut self.files {
            let memos = &mut self.dio_memos;
            let raw = maps.drain(files::DRAIN_BUDGET).and_then(|mut raw| {
                if let Some(cache) = &self.page_cache {
                    files::add_dio_memos(&mut raw, &memos.growth(&cache.dio_memos()?));
                }
                Ok(raw)
            });
            match raw {
                Ok(raw) => sample.files = self.file_resolver.resolve(raw),
                Err(e) => sample.status.reason = Some(format!("{e:#}")),
            }
        }
        if let Some(maps) = &mut self.readahead {
            // The files view's paths, keyed as the readahead map keys files (kernel dev_t, inode).
            let known: std::collections::HashMap<(u32, u64), String> = sample
                .files
                .iter()
                .filter_map(|f| Some((((f.major << 20) | f.minor, f.ino), f.path.clone()?)))
                .collect();
            match maps.read(&known, &mut self.file_resolver) {
                Ok(ra) => sample.readahead = Some(ra),
                Err(e) => sample.status.reason = Some(format!("{e:#}")),
            }
        }
        if let Some(maps) = &mut self.syncs {
            match maps.read() {
                Ok((mut calls, mut running)) => {
                    let wanted = calls
                        .iter_mut()
                        .map(|c| (&mut c.file, c.pid))
                        .chain(running.iter_mut().map(|r| (&mut r.file, r.pid)));
                    self.sync_paths.resolve(wanted, &sample.files, std::time::Instant::now());
                    let attached = self.sync_attached.clone();
                    sample.syncs = Some(crate::sample::syncs::SyncSample { attached, calls, running });
                }
                Err(e) => sample.status.reason = Some(format!("{e:#}")),
            }
        }
        if let Some(maps) = &mut self.iowait {
            sample.iowait = Some(maps.read());
        }
        // After the files: their paths name the files whose extents the requests are mapped to.
        if let Some(ring) = &mut self.request_ring {
            let now = std::time::Instant::now();
            let events = ring.drain();
            let resolver = &self.file_resolver;
            self.block_file_mapper.refresh(
                &sample.files,
                resolver.checked_meta(),
                |f| resolver.may_be_dirty(f),
                now,
            );
            self.block_file_mapper.map(&events, now);
            match ring.counts() {
                Ok(counts) => sample.block_files = Some(self.block_file_mapper.sample(counts)),
                Err(e) => sample.status.reason = Some(format!("{e:#}")),
            }
        }
        sample
    }

    /// The block requests mapped most recently (oldest first), for tests and debugging.
    pub fn recent_block_requests(&self) -> Vec<resolve::block_files::MappedRequest> {
        self.block_file_mapper.recent().cloned().collect()
    }
}

/// Detaching a classic tracepoint program waits for the kernel's RCU grace periods (closing its
/// perf event runs tracepoint_synchronize_unregister): 20–70 ms each, over a second for all of
/// them one after the other, which every `--once` and every quit waited for. Detached from one
/// thread each, the waits overlap.
impl Drop for BpfCollector {
    fn drop(&mut self) {
        if teardown::hand_over_to_child() {
            // Nothing detaches here: the objects are closed by this process's exit, which only
            // drops its references; the child's exit detaches them.
            std::mem::forget(self._ebpf.take());
            return;
        }
        let Some(ebpf) = self._ebpf.as_mut() else { return };
        std::thread::scope(|scope| {
            for (_, program) in ebpf.programs_mut() {
                scope.spawn(move || unload(program));
            }
        });
    }
}

/// Detaches and unloads `program` (what dropping it does), ignoring errors (nothing to report on
/// the way out). Kinds not listed are left to the drop.
fn unload(program: &mut aya::programs::Program) {
    use aya::programs::Program;
    let _ = match program {
        Program::TracePoint(p) => p.unload(),
        Program::BtfTracePoint(p) => p.unload(),
        Program::RawTracePoint(p) => p.unload(),
        Program::KProbe(p) => p.unload(),
        Program::FEntry(p) => p.unload(),
        Program::FExit(p) => p.unload(),
        _ => Ok(()),
    };
}

/// An object loader that has not parsed the kernel's BTF, and whether that could be avoided.
///
/// The object has no CO-RE relocations, so the loader needs no kernel BTF (kernel_btf's test
/// `object_needs_no_kernel_btf_to_load`), but aya's `EbpfLoader::new()` parses all of
/// /sys/kernel/btf/vmlinux before `.btf(None)` can say so (aya issue #1172): 0.25 s and a 17 MB
/// peak here, most of what is left of start-up and memory once our own lookups are cheap. So the
/// loader is made on a thread of its own that has its own mount namespace (unshare: the rest of
/// the process and the machine see nothing of it) in which the file is covered by an empty one:
/// the parse fails at once and the loader has no BTF, as `.btf(None)` asks. Where that cannot be
/// done (no CAP_SYS_ADMIN: CAP_BPF and CAP_PERFMON suffice for the rest) the loader parses as
/// aya does and the BTF is then dropped.
fn loader_without_kernel_btf() -> (EbpfLoader<'static>, bool) {
    let made = std::thread::spawn(|| hide_kernel_btf_from_this_thread().then(EbpfLoader::new)).join();
    match made {
        Ok(Some(loader)) => (loader, true),
        _ => {
            let mut loader = EbpfLoader::new();
            loader.btf(None);
            (loader, false)
        }
    }
}

/// Gives the calling thread a private mount namespace in which the kernel's BTF file reads as
/// empty. False (nothing changed that matters) when any step fails.
fn hide_kernel_btf_from_this_thread() -> bool {
    use std::ffi::CString;
    let (Ok(btf), Ok(root), Ok(null)) =
        (CString::new(kernel_btf::VMLINUX_BTF), CString::new("/"), CString::new("/dev/null"))
    else {
        return false;
    };
    // SAFETY: plain syscalls with valid NUL-terminated strings. unshare(CLONE_FS | CLONE_NEWNS)
    // affects this thread only; the mounts are made in its new namespace, and private (MS_PRIVATE)
    // first so that nothing propagates back to the namespace the machine uses.
    unsafe {
        libc::unshare(libc::CLONE_FS | libc::CLONE_NEWNS) == 0
            && libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) == 0
            && libc::mount(null.as_ptr(), btf.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null())
                == 0
    }
}

/// Finds mounted tracefs, or mounts it when allowed; Err is the reason to show the user.
fn locate_tracefs(
    caps: Capabilities,
    state: TracefsState,
    mount: impl FnOnce() -> Result<PathBuf>,
) -> Result<PathBuf, String> {
    match state {
        TracefsState::Readable(path) => Ok(path),
        TracefsState::Unreadable(path, error) => Err(format!(
            "tracefs at {} cannot be read ({error}); it is root-only by default: run ioscope with sudo",
            path.display()
        )),
        TracefsState::Absent if !caps.can_mount() => Err(format!(
            "tracefs is not mounted at {0} and mounting it needs CAP_SYS_ADMIN: \
             run `sudo mount -t tracefs nodev {0}` or run ioscope with sudo",
            tracefs::TRACEFS_MOUNT
        )),
        TracefsState::Absent => mount().map_err(|e| format!("tracefs is not mounted and {e:#}")),
    }
}

/// Loads `program` (a BTF tracepoint twin of a program on `category:event`) for `event` and
/// attaches it; its status on success.
fn attach_btf_tracepoint(
    ebpf: &mut Ebpf,
    program: &str,
    category: &str,
    event: &str,
    btf: &aya::Btf,
) -> Result<BpfProgramStatus> {
    preload::load(ebpf, program, preload::How::BtfTracePoint(event, btf))?;
    program_of::<aya::programs::BtfTracePoint>(ebpf, program)?.attach()?;
    Ok(BpfProgramStatus {
        mechanism: "BTF tracepoint".into(),
        ..program_status(program, category, event, Ok(()))
    })
}

/// Loads and attaches one tracepoint program of the object.
fn attach_tracepoint(ebpf: &mut Ebpf, program: &str, category: &str, event: &str) -> BpfProgramStatus {
    let result = (|| -> Result<()> {
        preload::load(ebpf, program, preload::How::TracePoint)?;
        program_of::<TracePoint>(ebpf, program)?.attach(category, event)?;
        Ok(())
    })();
    program_status(program, category, event, result.map_err(|e| format!("{e:#}")))
}

/// Program `program` of `ebpf` as a `T` (a kind of program).
fn program_of<'a, T>(ebpf: &'a mut Ebpf, program: &str) -> Result<&'a mut T>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    let prog = ebpf
        .program_mut(program)
        .ok_or_else(|| anyhow::anyhow!("program `{program}` is not in the eBPF object"))?;
    Ok(prog.try_into()?)
}

fn program_status(
    program: &str,
    category: &str,
    event: &str,
    result: Result<(), String>,
) -> BpfProgramStatus {
    BpfProgramStatus {
        program: program.to_string(),
        tracepoint: format!("{category}:{event}"),
        attached: result.is_ok(),
        error: result.err(),
        ..Default::default()
    }
}

/// How `program` is attached, from its type in the loaded object.
fn mechanism(ebpf: &Ebpf, program: &str) -> &'static str {
    use aya::programs::Program;
    match ebpf.program(program) {
        Some(Program::TracePoint(_)) => "tracepoint",
        Some(Program::BtfTracePoint(_)) => "btf_tracepoint",
        Some(Program::RawTracePoint(_)) => "raw_tracepoint",
        Some(Program::FEntry(_)) => "fentry",
        Some(Program::FExit(_)) => "fexit",
        Some(Program::KProbe(p)) if matches!(p.kind(), aya::programs::ProbeKind::Return) => "kretprobe",
        Some(Program::KProbe(_)) => "kprobe",
        Some(_) => "other",
        None => "unknown",
    }
}

/// eBPF is enabled when at least one program works; the reason lists the ones that do not.
fn overall_status(programs: Vec<BpfProgramStatus>) -> BpfStatus {
    let failed: Vec<String> = programs
        .iter()
        .filter(|p| !p.attached || p.error.is_some())
        .map(|p| format!("{}: {}", p.tracepoint, p.error.as_deref().unwrap_or("not attached")))
        .collect();
    let working = programs.len() - failed.len();
    let reason = match (failed.is_empty(), working) {
        (true, _) => None,
        (false, 0) => Some(format!("no eBPF program could be attached; {}", failed.join("; "))),
        (false, _) => Some(format!("some eBPF programs are off; {}", failed.join("; "))),
    };
    BpfStatus { enabled: working > 0, reason, programs: programs.into() }
}

/// Memory kept for ioscope itself beside its maps when they are sized to a memory cgroup's limit:
/// what its process grows by after the maps are made (up to 12 MiB of heap and stacks in a debug
/// build) and the verifier's working memory while it checks the programs (5 MiB at the peak of the
/// load), measured in a v1 memory cgroup on this 2-CPU machine (xtask/README.md).
pub const PROCESS_RESERVE: u64 = 20 << 20;

/// The maps' sizes ([`map_memory::plan`]) for this machine's CPUs and what its memory cgroups
/// leave ([`memcg::headroom`]) beyond [`PROCESS_RESERVE`], the object's maps, and a note when
/// they were shrunk for the limit; Err (the reason eBPF is off) when even their smallest sizes do
/// not fit.
fn size_maps() -> Result<(map_memory::Plan, Vec<map_memory::MapDef>, Option<String>), String> {
    let defs = map_memory::object_maps(OBJECT).map_err(|e| format!("{e:#}"))?;
    let cpus = aya::util::nr_cpus().map_or(1, |n| n as u32);
    let headroom = memcg::headroom();
    let budget = headroom.as_ref().map(|h| h.bytes.saturating_sub(PROCESS_RESERVE));
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let limit_text = |h: &memcg::Headroom| {
        format!(
            "the memory limit of cgroup {:?} (v{}) leaves {:.1} MiB ({:.1} MiB limit, {:.1} MiB in use)",
            h.cgroup,
            h.version,
            mib(h.bytes),
            mib(h.limit),
            mib(h.used)
        )
    };
    match (map_memory::plan(&defs, cpus, budget), &headroom) {
        (Ok(plan), Some(h)) if plan.for_limit => {
            let shrunk = plan
                .sizes
                .iter()
                .map(|(map, entries)| {
                    let compiled = defs.iter().find(|d| d.name == *map).map_or(0, |d| d.max_entries);
                    format!("{map} {entries} of {compiled} entries")
                })
                .collect::<Vec<_>>();
            let note = format!(
                "maps shrunk to {:.1} MiB to fit the memory cgroup: {}; {}",
                mib(plan.bytes),
                limit_text(h),
                shrunk.join(", ")
            );
            Ok((plan, defs, Some(note)))
        }
        (Ok(plan), _) => Ok((plan, defs, None)),
        (Err(least), Some(h)) => Err(format!(
            "its maps need {:.1} MiB of kernel memory at their smallest and ioscope {:.0} MiB more, but {}: \
             give it a memory limit of at least {:.0} MiB more, or pass --no-bpf",
            mib(least),
            mib(PROCESS_RESERVE),
            limit_text(h),
            mib((least + PROCESS_RESERVE).saturating_sub(h.bytes)).ceil()
        )),
        // No limit gives no budget, and without a budget the plan cannot fail.
        (Err(least), None) => Err(format!("its maps need {:.1} MiB", mib(least))),
    }
}

/// Kernels before 5.11 charge BPF maps and programs to RLIMIT_MEMLOCK, whose default (64 KiB or
/// 8 MiB) is too small; later ones use memory cgroups and ignore it. Raising it is harmless there,
/// and when it fails the load error that follows says what went wrong.
fn raise_memlock_rlimit() {
    let unlimited = libc::rlimit { rlim_cur: libc::RLIM_INFINITY, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: plain syscall with a valid pointer.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) };
}

/// An error and its causes on one line ("a: b: c"): aya nests the errno under its own message.
fn error_text(e: impl Into<anyhow::Error>) -> String {
    format!("{:#}", e.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(status_cap_eff: &str) -> Capabilities {
        Capabilities::from_status(&format!("CapEff:\t{status_cap_eff}\n")).unwrap()
    }
    const ROOT: &str = "000001ffffffffff";
    /// CAP_BPF (39) and CAP_PERFMON (38) only.
    const BPF_PERFMON: &str = "000000c000000000";

    /// As root the loader is made without parsing the kernel's BTF, and the machine's view of the
    /// file is untouched.
    #[test]
    fn loader_is_made_without_the_kernel_btf_and_hides_nothing_from_the_rest() {
        let before = std::fs::metadata(kernel_btf::VMLINUX_BTF).map(|m| m.len()).ok();
        let (_, avoided) = loader_without_kernel_btf();
        if Capabilities::current().can_mount() && before.is_some() {
            assert!(avoided, "as root the loader should be made without parsing the kernel's BTF");
        }
        assert_eq!(std::fs::metadata(kernel_btf::VMLINUX_BTF).map(|m| m.len()).ok(), before);
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(
            !mountinfo.contains(kernel_btf::VMLINUX_BTF),
            "a mount over the BTF file leaked: {mountinfo}"
        );
    }

    #[test]
    fn disabled_collector_reports_its_reason_and_no_counts() {
        let mut c = BpfCollector::disabled("eBPF turned off with --no-bpf");
        let s = c.read();
        assert!(!s.status.enabled);
        assert_eq!(s.status.reason.as_deref(), Some("eBPF turned off with --no-bpf"));
        assert!(s.rq_issue.is_empty() && s.status.programs.is_empty());
    }

    #[test]
    fn mounted_tracefs_is_used_as_is() {
        let got = locate_tracefs(caps(BPF_PERFMON), TracefsState::Readable("/t".into()), || {
            panic!("must not mount")
        });
        assert_eq!(got, Ok(PathBuf::from("/t")));
    }

    #[test]
    fn unmounted_tracefs_without_sys_admin_explains_how_to_mount() {
        let err =
            locate_tracefs(caps(BPF_PERFMON), TracefsState::Absent, || panic!("must not mount")).unwrap_err();
        assert!(err.contains("tracefs is not mounted at /sys/kernel/tracing"), "{err}");
        assert!(err.contains("sudo mount -t tracefs nodev /sys/kernel/tracing"), "{err}");
    }

    #[test]
    fn unmounted_tracefs_is_mounted_by_root_and_mount_errors_are_shown() {
        let ok =
            locate_tracefs(caps(ROOT), TracefsState::Absent, || Ok(PathBuf::from("/sys/kernel/tracing")));
        assert_eq!(ok, Ok(PathBuf::from("/sys/kernel/tracing")));
        let err =
            locate_tracefs(caps(ROOT), TracefsState::Absent, || anyhow::bail!("mounting failed: EBUSY"))
                .unwrap_err();
        assert_eq!(err, "tracefs is not mounted and mounting failed: EBUSY");
    }

    #[test]
    fn unreadable_tracefs_says_so_instead_of_not_mounted() {
        let state =
            TracefsState::Unreadable("/sys/kernel/tracing".into(), "Permission denied (os error 13)".into());
        let err = locate_tracefs(caps(BPF_PERFMON), state, || panic!("must not mount")).unwrap_err();
        assert_eq!(
            err,
            "tracefs at /sys/kernel/tracing cannot be read (Permission denied (os error 13)); \
             it is root-only by default: run ioscope with sudo"
        );
    }

    fn prog(name: &str, error: Option<&str>) -> BpfProgramStatus {
        program_status(name, "block", name, error.map(|e| Err(e.to_string())).unwrap_or(Ok(())))
    }

    #[test]
    fn all_attached_is_enabled_without_reason() {
        let s = overall_status(vec![prog("block_rq_issue", None)]);
        assert!(s.enabled);
        assert_eq!(s.reason, None);
        assert_eq!(s.programs[0].tracepoint, "block:block_rq_issue");
        assert!(s.programs[0].attached);
    }

    #[test]
    fn nothing_attached_is_disabled_with_each_error() {
        let s = overall_status(vec![prog("block_rq_issue", Some("EPERM"))]);
        assert!(!s.enabled);
        assert_eq!(
            s.reason.as_deref(),
            Some("no eBPF program could be attached; block:block_rq_issue: EPERM")
        );
        assert!(!s.programs[0].attached);
    }

    #[test]
    fn partly_attached_stays_enabled_and_names_the_failure() {
        let s =
            overall_status(vec![prog("block_rq_issue", None), prog("block_rq_complete", Some("no field"))]);
        assert!(s.enabled);
        assert_eq!(
            s.reason.as_deref(),
            Some("some eBPF programs are off; block:block_rq_complete: no field")
        );
    }
}
