//! The eBPF side of collection: tracefs, loading the embedded object, attaching, reading maps.
//!
//! The programs come in families (`family::Family`, one per part of the Sample), registered in
//! [`families`]; [`BpfCollector`] runs each phase over them and knows none by name (see
//! src/bpf/README.md, "Adding a family").
//!
//! The kernel programs are built from ebpf/probes by `cargo xtask ebpf` (nightly + bpf-linker) and
//! committed as assets/ioscope.bpf.o (x86-64) and assets/ioscope-aarch64.bpf.o, the one of the
//! architecture being built embedded here: building ioscope needs neither.

pub mod arch;
pub mod attach;
pub mod block;
pub mod block_claim;
pub mod block_files;
pub mod capabilities;
pub mod cgroup;
pub mod cgroup_move;
pub mod counters;
pub mod family;
pub mod file_names;
pub mod files;
pub mod inserts;
pub mod iomap;
pub mod iowait;
pub mod kernel_btf;
pub mod kfunc;
pub mod map_batch;
pub mod map_memory;
pub mod mapped_keys;
mod mapping;
pub mod memcg;
mod object;
mod options;
pub mod page_cache;
pub mod preload;
pub mod prog_stats;
mod ra_fallback;
pub mod readahead;
pub mod readahead_510;
pub mod readahead_fn;
pub mod renamed;
pub mod resolve;
pub mod syncs;
pub mod syncs_510;
pub mod teardown;
pub mod tracefs;

use std::any::Any;
use std::path::PathBuf;

use anyhow::Result;
use aya::{Ebpf, EbpfLoader};

use self::attach::mechanism;
use self::capabilities::Capabilities;
pub use self::family::{Family, Setup, Shared};
use self::object::OBJECT;
pub use self::options::BpfOptions;
use self::tracefs::TracefsState;
use crate::sample::{BpfProgramStatus, BpfSample, BpfStatus};

/// The families of programs, in the order they are set up, attached (the status lists their
/// programs in this order) and read: one line each (see src/bpf/README.md, "Adding a family").
/// A family reads after those whose part of the Sample it uses (the files' paths name the
/// readahead, sync and block-to-file rows).
pub fn families() -> Vec<Box<dyn Family>> {
    vec![
        Box::new(block::BlockFamily::default()),
        Box::new(page_cache::PageCacheFamily::default()),
        Box::new(files::FilesFamily::default()),
        Box::new(file_names::FileNamesFamily::default()),
        Box::new(readahead::ReadaheadFamily::default()),
        Box::new(syncs::SyncsFamily::default()),
        Box::new(cgroup_move::CgroupMoveFamily::default()),
        Box::new(block_files::BlockFilesFamily::default()),
        Box::new(iowait::IowaitFamily::default()),
    ]
}

/// Owns the loaded eBPF programs (when any) and reads their maps into the Sample, family by
/// family.
pub struct BpfCollector {
    status: BpfStatus,
    /// Kept alive because dropping it detaches the programs.
    _ebpf: Option<Ebpf>,
    families: Vec<Box<dyn Family>>,
    /// What the families published for each other's reads (the file resolver, cgroup names...).
    shared: Shared,
    /// Each program of the status (same order), when attached: to read the kernel's run counts.
    program_fds: Vec<Option<aya::programs::ProgramFd>>,
    prog_stats: prog_stats::StatsCache,
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
        BpfCollector::start_families(options, families())
    }

    /// [`BpfCollector::start_with`] for the given families: each phase (plan, configure, load,
    /// attach) runs over all of them in their order before the next.
    pub fn start_families(options: &BpfOptions, mut families: Vec<Box<dyn Family>>) -> BpfCollector {
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

        // The kernel's BTF, read once here and shared (struct layouts, the BTF tracepoints and the
        // function fallbacks: see kernel_btf).
        let mut notes = Vec::new();
        let btf = kernel_btf::KernelBtf::load().map_err(|e| notes.push(format!("no kernel BTF: {e:#}"))).ok();
        let kernel_arch = btf.as_ref().and_then(arch::kernel_arch);
        if let Some(reason) = arch::refusal(arch::object_arch(OBJECT).as_deref(), kernel_arch) {
            return BpfCollector::disabled(&reason);
        }
        let mut setup = Setup::new(options, &tracefs, btf.as_ref());
        // Per program, what it needs from tracefs and BTF; a program whose needs fail is not
        // attached but the others still are.
        for family in &mut families {
            family.plan(&mut setup);
        }
        let (mut loader, _) = loader_without_kernel_btf();
        for family in &mut families {
            family.configure(&mut setup);
        }
        for family in &families {
            family.globals(&mut loader);
        }
        // The maps sized to the CPUs and to what the memory cgroup leaves, or eBPF off saying why.
        let (map_plan, map_defs, sizing_note) = match size_maps() {
            Ok(sized) => sized,
            Err(reason) => return BpfCollector::disabled(&reason),
        };
        for (map, entries) in &map_plan.sizes {
            loader.map_max_entries(map, *entries);
        }
        setup.map_plan = map_plan;
        let mut ebpf = match loader.load(OBJECT) {
            Ok(ebpf) => ebpf,
            Err(e) => {
                let reason = format!("loading the eBPF object failed: {}", error_text(e));
                return BpfCollector::disabled(&reason);
            }
        };
        // Before any map is taken out of the object.
        let map_memory = map_memory::measure(&ebpf, &map_defs);

        // Every program the families will load, verified on every CPU at once first (the
        // verifier is most of start-up): see preload.
        let mut loads: Vec<preload::Planned> = Vec::new();
        for family in &families {
            let more = family.loads(&setup, &loads);
            loads.extend(more);
        }
        preload::preload(&mut ebpf, &loads);
        drop(loads);

        // Every program with whether its needs were met; each is attached on its own, so one that
        // fails leaves the others working.
        let mut programs = Vec::new();
        for family in &mut families {
            family.attach(&mut ebpf, &mut setup, &mut programs);
        }
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
        let family_notes = families.iter_mut().flat_map(|f| f.notes()).collect::<Vec<_>>();
        for note in notes.into_iter().chain(family_notes).chain(sizing_note) {
            status.reason = Some(match status.reason {
                Some(r) => format!("{r}; {note}"),
                None => note,
            });
        }
        BpfCollector {
            status,
            _ebpf: Some(ebpf),
            families,
            shared: setup.shared,
            program_fds,
            prog_stats: Default::default(),
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
            families: Vec::new(),
            shared: Default::default(),
            program_fds: Vec::new(),
            prog_stats: Default::default(),
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

    /// The registered family of type `F` (for what only it knows: the block events counted so
    /// far, the requests mapped to files...); None when it is not running.
    pub fn family<F: Family>(&self) -> Option<&F> {
        self.families.iter().find_map(|f| (f.as_ref() as &dyn Any).downcast_ref::<F>())
    }

    /// [`BpfCollector::family`], to change.
    pub fn family_mut<F: Family>(&mut self) -> Option<&mut F> {
        self.families.iter_mut().find_map(|f| (f.as_mut() as &mut dyn Any).downcast_mut::<F>())
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
        read_families(&mut self.families, &mut self.shared, &mut sample);
        sample
    }
}

/// Each family's part of `sample`, in the families' order; every read error is kept in the
/// status (see [`family::add_read_errors`]).
fn read_families(families: &mut [Box<dyn Family>], shared: &mut Shared, sample: &mut BpfSample) {
    let mut errors = Vec::new();
    for family in families.iter_mut() {
        let name = family.name();
        errors.extend(family.read(shared, sample).into_iter().map(|e| (name, e)));
    }
    family::add_read_errors(&mut sample.status.reason, &errors);
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
                scope.spawn(move || preload::unload(program));
            }
        });
    }
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
    use super::attach::program_status;
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
    /// A family that attaches nothing and whose reads fail with `errors`.
    struct Failing(&'static str, Vec<&'static str>);

    impl Family for Failing {
        fn name(&self) -> &'static str {
            self.0
        }
        fn plan(&mut self, _: &mut Setup) {}
        fn globals<'s>(&'s self, _: &mut EbpfLoader<'s>) {}
        fn loads<'a>(&'a self, _: &Setup<'a>, _: &[preload::Planned<'a>]) -> Vec<preload::Planned<'a>> {
            Vec::new()
        }
        fn attach(&mut self, _: &mut Ebpf, _: &mut Setup, _: &mut Vec<BpfProgramStatus>) {}
        fn read(&mut self, shared: &mut Shared, sample: &mut BpfSample) -> Vec<String> {
            // What the families before it published is there for it.
            *shared.get_or_insert_with(|| 0u32) += 1;
            sample.files.push(Default::default());
            self.1.iter().map(|e| e.to_string()).collect()
        }
    }

    /// Several families' reads fail in one sample: every error is in the status, under its
    /// family's name and after what the status said, none overwriting another; the families
    /// that read fine still gave their part.
    #[test]
    fn every_familys_read_error_is_kept_under_its_name() {
        let mut families: Vec<Box<dyn Family>> = vec![
            Box::new(Failing("block", vec!["reading BLOCK_DEVS: Input/output error (os error 5)"])),
            Box::new(Failing("files", vec![])),
            Box::new(Failing("page cache", vec!["reading CACHE_PROCS: ENOMEM", "reading DIO_MEMO: EFAULT"])),
        ];
        let mut shared = Shared::default();
        let mut sample = BpfSample::default();
        sample.status.reason = Some("some eBPF programs are off; block:block_rq_issue: EPERM".into());
        read_families(&mut families, &mut shared, &mut sample);
        assert_eq!(
            sample.status.reason.as_deref(),
            Some(
                "some eBPF programs are off; block:block_rq_issue: EPERM; \
                 block: reading BLOCK_DEVS: Input/output error (os error 5); \
                 page cache: reading CACHE_PROCS: ENOMEM; page cache: reading DIO_MEMO: EFAULT"
            )
        );
        assert_eq!(sample.files.len(), 3, "each family read its part");
        assert_eq!(shared.get::<u32>(), Some(&3));

        // Without a reason before, the first error starts it; without errors, nothing is said.
        let mut sample = BpfSample::default();
        read_families(&mut families[..2], &mut shared, &mut sample);
        assert_eq!(
            sample.status.reason.as_deref(),
            Some("block: reading BLOCK_DEVS: Input/output error (os error 5)")
        );
        let mut sample = BpfSample::default();
        read_families(&mut families[1..2], &mut shared, &mut sample);
        assert_eq!(sample.status.reason, None);
    }

    /// The programs of several families fail to attach: the status lists each, in order.
    #[test]
    fn every_failed_attach_is_listed() {
        let s = overall_status(vec![
            prog("block_rq_issue", Some("EPERM")),
            prog("block_rq_complete", None),
            program_status("cache_add", "filemap", "mm_filemap_add_to_page_cache", Err("no field".into())),
            program_status("sync_enter", "syscalls", "sys_enter_fsync", Err("EINVAL".into())),
        ]);
        assert!(s.enabled);
        assert_eq!(
            s.reason.as_deref(),
            Some(
                "some eBPF programs are off; block:block_rq_issue: EPERM; \
                 filemap:mm_filemap_add_to_page_cache: no field; syscalls:sys_enter_fsync: EINVAL"
            )
        );
    }

    /// The registered families are each found by their type, once.
    #[test]
    fn each_registered_family_is_found_by_its_type() {
        let mut c = BpfCollector::disabled("test");
        c.families = families();
        assert!(c.family::<block::BlockFamily>().is_some());
        assert!(c.family_mut::<block_files::BlockFilesFamily>().is_some());
        let names: Vec<&str> = c.families.iter().map(|f| f.name()).collect();
        let unique: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
    }

    /// Every fentry/fexit fallback (the page-cache ones, 6.1+'s and 5.10's readahead ones, the
    /// files' split of reads on both signatures) has its kprobe variant, a kretprobe too for a
    /// fexit, each a program of that kind in the embedded object: a kernel without trampolines (arm64 before 6.0) loses no pane for want of one.
    #[test]
    fn every_function_fallback_has_its_kprobe_variant_in_the_object() {
        use aya_obj::ProgramSection as S;
        use kfunc::Hook;
        let object = aya_obj::Object::parse(object::OBJECT).unwrap();
        let section = |name: &str| object.programs.get(name).map(|p| p.section.clone());
        let page_cache = page_cache::FN_FALLBACKS.iter().map(|f| (f.program, f.hook, f.kprobes));
        let readahead = readahead_fn::RA_FALLBACKS
            .iter()
            .chain(&readahead_510::RA_FALLBACKS)
            .map(|f| (f.program, Hook::Fentry, f.kprobes));
        let files = files::SYNC_RA_FALLBACKS.iter().map(|(_, p, k)| (*p, Hook::Fentry, Some(*k)));
        let all: Vec<_> = page_cache.chain(readahead).chain(files).collect();
        assert_eq!(all.len(), 15);
        for (program, hook, kprobes) in all {
            match (hook, section(program)) {
                (Hook::Fentry, Some(S::FEntry { .. })) | (Hook::Fexit, Some(S::FExit { .. })) => {}
                (_, other) => panic!("{program}: {other:?} in the object, {hook:?} expected"),
            }
            let k = kprobes.unwrap_or_else(|| panic!("{program} has no kprobe variant"));
            assert!(matches!(section(k.entry), Some(S::KProbe)), "{}: {:?}", k.entry, section(k.entry));
            assert_eq!(k.ret.is_some(), hook == Hook::Fexit, "{program}: a kretprobe only for a fexit");
            if let Some(ret) = k.ret {
                assert!(matches!(section(ret), Some(S::KRetProbe)), "{ret}: {:?}", section(ret));
            }
        }
    }
}
