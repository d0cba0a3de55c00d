//! Runs a benchmark: lays out the test file, runs each job of the matrix with a Sample of the
//! machine before and after it, and removes what it created on every exit path (done, error,
//! Ctrl-C, panic). Results so far are kept when it is stopped.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::engine;
use super::job::{EngineJob, Progress};
use super::result::{JobResult, RunFigures};
use super::spec::{size_label, Cache, Engine, Fsync, JobSpec, Mode};
use super::target::{self, Target, TargetKind};
use crate::bpf::BpfCollector;
use crate::collect::{self, Sampler, SystemRoot};
use crate::sample::Sample;

/// Everything a run needs, validated.
#[derive(Clone, Debug)]
pub struct Plan {
    pub target: Target,
    pub jobs: Vec<JobSpec>,
    pub runtime: Duration,
    pub time_based: bool,
    /// The engine of direct and buffered jobs (mmap jobs always use threads).
    pub engine: Engine,
    pub fsync: Fsync,
    pub cache: Cache,
    pub drop_caches: bool,
    /// The I/O buffers in transparent huge pages (`--huge-pages`), else ordinary pages.
    pub huge_pages: bool,
    /// Said before the first job (e.g. write jobs dropped for a read-only target).
    pub notes: Vec<String>,
}

/// JSON: the whole document of `ioscope bench --json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BenchReport {
    pub machine: Machine,
    pub settings: Settings,
    pub jobs: Vec<JobResult>,
    /// What the run had to say: O_DIRECT refused, cold-cache checks, Ctrl-C.
    pub notes: Vec<String>,
    /// Stopped by Ctrl-C (or a signal) before every job ran.
    pub interrupted: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Machine {
    pub hostname: String,
    pub kernel: String,
    pub cpus: usize,
    pub mem_total_bytes: u64,
    pub ioscope_version: String,
    pub started_unix_ms: u64,
}

/// The settings that decide the results: the run's own and the kernel's tuning knobs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    pub path: String,
    pub target: String,
    pub size: u64,
    pub runtime_s: f64,
    pub time_based: bool,
    /// "io_uring" or "threads": the engine of the direct and buffered jobs.
    pub engine: String,
    pub cache: String,
    pub fsync: String,
    pub drop_caches: bool,
    /// The I/O buffers were in transparent huge pages (`--huge-pages`), not ordinary pages.
    pub huge_pages: bool,
    pub filesystem: String,
    pub device: Option<String>,
    pub read_ahead_kb: Option<u64>,
    pub scheduler: Option<String>,
    pub nr_requests: Option<u64>,
    pub max_sectors_kb: Option<u64>,
    pub rotational: Option<bool>,
    pub logical_block_size: Option<u64>,
    pub hw_queues: Option<u64>,
    pub dio_offset_align: u64,
    pub dio_mem_align: u64,
    pub dirty_ratio: u64,
    pub dirty_background_ratio: u64,
    pub dirty_bytes: u64,
    pub dirty_background_bytes: u64,
    pub dirty_expire_centisecs: u64,
    pub dirty_writeback_centisecs: u64,
}

/// What the runner tells its front end (text output or the TUI) as it goes.
#[derive(Clone, Debug)]
pub enum Event {
    Note(String),
    /// Laying out the test file: bytes written so far of the total.
    Layout {
        done: u64,
        total: u64,
    },
    JobStarted {
        index: usize,
        spec: JobSpec,
    },
    JobDone {
        index: usize,
        result: Box<JobResult>,
    },
}

/// Removes the test file when dropped: on success, on error, and on a panic's unwinding. While it
/// lives, the test file's path is where [`on_fatal_signal`] finds it, and `lock` holds the file's
/// flock: a later run that can take the lock knows the run that made the file is dead.
struct Cleanup {
    path: Option<PathBuf>,
    lock: Option<File>,
}

impl Cleanup {
    fn new(path: Option<PathBuf>) -> Cleanup {
        if let Some(p) = &path {
            if let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) {
                let old = TEST_FILE.swap(c.into_raw(), Ordering::SeqCst);
                if !old.is_null() {
                    // SAFETY: every non-null pointer stored in TEST_FILE came from CString::into_raw.
                    drop(unsafe { std::ffi::CString::from_raw(old) });
                }
            }
        }
        Cleanup { path, lock: None }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(p) = &self.path {
            let _ = std::fs::remove_file(p);
            let old = TEST_FILE.swap(std::ptr::null_mut(), Ordering::SeqCst);
            if !old.is_null() {
                // SAFETY: see Cleanup::new.
                drop(unsafe { std::ffi::CString::from_raw(old) });
            }
        }
    }
}

/// The test file being used, for the fatal-signal handler (null when there is none).
static TEST_FILE: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());

/// Set by SIGINT/SIGTERM/SIGHUP and the other terminating signals (see [`install_stop_handlers`])
/// or by the TUI's Ctrl-C.
pub static STOP: AtomicBool = AtomicBool::new(false);
/// Set by a signal (not a key): the TUI quits once the runner has cleaned up.
pub static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
    SIGNALLED.store(true, Ordering::SeqCst);
}

/// A fault (or abort) cannot be resumed: remove the test file, then die of the signal as before
/// (the handler was reset on entry; unlink and raise are async-signal-safe).
extern "C" fn on_fatal_signal(sig: libc::c_int) {
    let path = TEST_FILE.load(Ordering::SeqCst);
    if !path.is_null() {
        // SAFETY: a valid C string owned by the live Cleanup (leaked while the process dies).
        unsafe { libc::unlink(path) };
    }
    // SAFETY: re-raises with the default action (SA_RESETHAND).
    unsafe { libc::raise(sig) };
}

/// The signals whose default action ends the process, other than SIGINT/SIGTERM/SIGHUP (which the
/// TUI takes through tokio): each stops the benchmark within one request instead, so the test
/// file is removed and the results so far are printed. (SIGPIPE is ignored by Rust programs;
/// SIGKILL and SIGSTOP cannot be caught: a later run removes what a SIGKILL left behind.)
const OTHER_STOP_SIGNALS: [libc::c_int; 10] = [
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGIO,
    libc::SIGPWR,
];

/// Faults and aborts: the test file is removed, then the process dies of the signal.
const FATAL_SIGNALS: [libc::c_int; 7] =
    [libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGABRT, libc::SIGSYS, libc::SIGTRAP];

fn set_handler(sig: libc::c_int, handler: extern "C" fn(libc::c_int), flags: libc::c_int) {
    // SAFETY: a zeroed sigaction with a handler that only touches atomics and async-signal-safe
    // calls; sigemptyset on its own mask.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as libc::sighandler_t;
        sa.sa_flags = flags;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Ctrl-C, kill and a closed terminal stop the benchmark within one request instead of killing
/// the process, so the test file is removed and the results so far are printed.
pub fn install_stop_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        set_handler(sig, on_stop_signal, libc::SA_RESTART);
    }
    install_other_signal_handlers();
}

/// Every catchable terminating signal but SIGINT/SIGTERM/SIGHUP (for the TUI, which hears those
/// through tokio): the others stop the run, faults remove the test file before dying.
pub fn install_other_signal_handlers() {
    for sig in OTHER_STOP_SIGNALS {
        set_handler(sig, on_stop_signal, libc::SA_RESTART);
    }
    for sig in FATAL_SIGNALS {
        set_handler(sig, on_fatal_signal, libc::SA_RESETHAND | libc::SA_NODEFER | libc::SA_ONSTACK);
    }
}

/// Runs the plan. `progress` is updated per request for a live display; `events` hears about each
/// step. Returns the report, with the jobs that ran, even when stopped.
pub fn run(
    plan: &Plan,
    stop: &AtomicBool,
    progress: &Progress,
    events: &mut dyn FnMut(Event),
) -> anyhow::Result<BenchReport> {
    let mut target = plan.target.clone();
    let mut sampler =
        Sampler::new(SystemRoot::live(), BpfCollector::disabled("bench samples use procfs only"));
    let first = sampler.sample();
    let mut report = BenchReport {
        machine: machine(&first),
        settings: settings(plan, &first),
        notes: plan.notes.clone(),
        ..Default::default()
    };
    for n in &plan.notes {
        events(Event::Note(n.clone()));
    }
    let mut cleanup = Cleanup::new((target.kind == TargetKind::TestFile).then(|| target.path.clone()));
    if target.kind == TargetKind::TestFile {
        let file = layout(&target.path, target.size, stop, events)?;
        target.pinned = Some(std::sync::Arc::new(file.try_clone().context("holding the test file")?));
        cleanup.lock = Some(file);
        target::refresh_dio_alignment(&mut target);
        report.settings.dio_offset_align = target.dio_offset_align;
        report.settings.dio_mem_align = target.dio_mem_align;
    }
    if stop.load(Ordering::Relaxed) {
        report.interrupted = true;
        report.notes.push("stopped while laying out the test file".into());
        return Ok(report);
    }
    let mut direct_refused: Option<String> = None;
    for (index, spec) in plan.jobs.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            report.interrupted = true;
            break;
        }
        events(Event::JobStarted { index, spec: *spec });
        progress.reset();
        let mut job_notes = Vec::new();
        let result = run_job(
            plan,
            &target,
            spec,
            index,
            stop,
            progress,
            &mut sampler,
            &mut direct_refused,
            &mut job_notes,
        );
        for n in job_notes {
            if !report.notes.contains(&n) {
                events(Event::Note(n.clone()));
                report.notes.push(n);
            }
        }
        let result = match result {
            Ok(r) => r,
            Err(e) => JobResult::skipped(spec, format!("{e:#}")),
        };
        if let Some(note) = &result.cache_note {
            if !report.notes.contains(note) && !note.starts_with("cold cache: 0 of") {
                report.notes.push(note.clone());
            }
        }
        report.interrupted |= result.interrupted;
        // A job stopped before its first request has nothing to report.
        if result.interrupted && result.ops == 0 {
            break;
        }
        events(Event::JobDone { index, result: Box::new(result.clone()) });
        report.jobs.push(result);
    }
    if let Some(why) = direct_refused {
        report.notes.push(why);
    }
    if report.interrupted || stop.load(Ordering::Relaxed) {
        report.interrupted = true;
        report.notes.push(format!("stopped: {} of {} jobs ran", report.jobs.len(), plan.jobs.len()));
    }
    Ok(report)
}

/// Writes the test file once (1 MiB buffered writes, then fsync), like fio's layout step, so read
/// jobs read real blocks and write jobs overwrite allocated ones.
/// Returns the file, flocked: the lock lives as long as the run (see [`target::stale_test_files`]).
fn layout(path: &Path, size: u64, stop: &AtomicBool, events: &mut dyn FnMut(Event)) -> anyhow::Result<File> {
    use std::io::Write;
    // O_EXCL|O_NOFOLLOW: a name planted in the directory is refused, never written through.
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("creating the test file {}", path.display()))?;
    // SAFETY: flock on an open descriptor.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    let chunk: Vec<u8> = (0..1u64 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let mut done = 0;
    let mut last_event = Instant::now();
    while done < size && !stop.load(Ordering::Relaxed) {
        let n = (size - done).min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n]).with_context(|| format!("writing the test file {}", path.display()))?;
        done += n as u64;
        if last_event.elapsed() > Duration::from_millis(100) {
            events(Event::Layout { done, total: size });
            last_event = Instant::now();
        }
    }
    f.sync_all().context("fsync of the test file")?;
    events(Event::Layout { done, total: size });
    Ok(f)
}

#[allow(clippy::too_many_arguments)]
fn run_job(
    plan: &Plan,
    target: &Target,
    spec: &JobSpec,
    index: usize,
    stop: &AtomicBool,
    progress: &Progress,
    sampler: &mut Sampler,
    direct_refused: &mut Option<String>,
    notes: &mut Vec<String>,
) -> anyhow::Result<JobResult> {
    if spec.rw.is_write() && !target.writable {
        anyhow::bail!("the target is read-only (see --write / --destructive)");
    }
    if spec.mode == Mode::Direct {
        if let Some(why) = direct_refused {
            anyhow::bail!("{why}");
        }
        let align = target.dio_offset_align;
        if align > 0 && !spec.bs.is_multiple_of(align) {
            anyhow::bail!(
                "O_DIRECT here needs sizes in multiples of {align} bytes ({} on {}); {} is not",
                target.fs_type,
                target.device.as_deref().unwrap_or("?"),
                size_label(spec.bs)
            );
        }
    }
    let file = match open(target, spec) {
        Ok(f) => f,
        Err(e) if spec.mode == Mode::Direct && e.raw_os_error() == Some(libc::EINVAL) => {
            let why = format!(
                "{} refuses O_DIRECT (EINVAL): direct jobs skipped, buffered jobs still run",
                target.fs_type
            );
            *direct_refused = Some(why.clone());
            anyhow::bail!("{why}");
        }
        Err(e) => return Err(e).with_context(|| format!("opening {}", target.path.display())),
    };
    if spec.mode == Mode::Direct && target.device.is_none() && target.kind != TargetKind::Device {
        let note = format!(
            "{} accepts O_DIRECT but has no block device: its direct results are memory copies",
            target.fs_type
        );
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    let cache_note = prepare_cache(plan, &file, target)?;
    let before = sampler.sample();
    let dirty_at_fsync = std::sync::Mutex::new(None);
    // The file's own dirty + writeback pages (cachestat), else the machine's (meminfo).
    let (fd, size) = (file.as_raw_fd(), target.size);
    let note_dirty = || {
        let bytes = match cachestat(fd, size) {
            Ok(c) => (c.nr_dirty + c.nr_writeback) * page_size(),
            Err(_) => {
                let m = collect::memory::meminfo(&SystemRoot::live(), &mut collect::Files::one_shot());
                m.dirty_bytes + m.writeback_bytes
            }
        };
        *dirty_at_fsync.lock().unwrap() = Some(bytes);
    };
    let job = EngineJob {
        spec: *spec,
        engine: plan.engine,
        size: target.size,
        runtime: plan.runtime,
        time_based: plan.time_based,
        fsync: if spec.rw.is_write() { plan.fsync } else { Fsync::None },
        mem_align: target.dio_mem_align,
        huge_pages: plan.huge_pages,
        stop,
        progress,
        seed: 0x5EED_0000 + index as u64,
        before_final_fsync: &note_dirty,
    };
    let r = engine::run(&file, &job)?;
    if let (Mode::Direct, Some(huge), true) = (spec.mode, r.buffer_huge_bytes, plan.huge_pages) {
        // Only direct requests are made of the buffer's pages (see bench::buffers).
        if huge < r.buffer_bytes && spec.bs > 64 << 10 {
            let note = format!(
                "direct {} jobs: the I/O buffers are not all in huge pages ({} of {} KiB; \
                 /sys/kernel/mm/transparent_hugepage/enabled), so a request may reach the device \
                 split in more pieces than the job asks for",
                size_label(spec.bs),
                huge >> 10,
                r.buffer_bytes >> 10
            );
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
    }
    let after = sampler.sample();
    let us = |ns: u64| ns as f64 / 1000.0;
    let figures = RunFigures {
        ops: r.ops,
        bytes: r.bytes,
        elapsed_s: r.elapsed.as_secs_f64(),
        lat_p50_us: us(r.latency.percentile_ns(50.0)),
        lat_p99_us: us(r.latency.percentile_ns(99.0)),
        lat_p999_us: us(r.latency.percentile_ns(99.9)),
        lat_max_us: us(r.latency.max_ns()),
        lat_mean_us: r.latency.mean_ns() / 1000.0,
        fsync_s: r.final_fsync.as_secs_f64(),
        periodic_fsyncs: r.periodic_fsyncs,
        periodic_fsync_s: r.periodic_fsync.as_secs_f64(),
        cpu_s: r.cpu.as_secs_f64(),
        dirty_before_fsync_bytes: *dirty_at_fsync.lock().unwrap(),
        interrupted: r.interrupted,
    };
    let mut result = JobResult::from_run(spec, &figures, &before, &after, target.device.as_deref());
    result.engine = Some(engine::engine_for(plan.engine, spec.mode));
    result.cache_note = cache_note;
    Ok(result)
}

fn open(target: &Target, spec: &JobSpec) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(spec.rw.is_write());
    if spec.mode == Mode::Direct {
        o.custom_flags(libc::O_DIRECT);
    }
    // A file is reopened through the descriptor resolving pinned (the same inode), not by name.
    match &target.pinned {
        Some(f) => o.open(format!("/proc/self/fd/{}", f.as_raw_fd())),
        None => o.open(&target.path),
    }
}

/// `--cache cold`: flush the file's dirty pages (DONTNEED cannot drop dirty ones), drop its pages
/// with posix_fadvise(DONTNEED), and check with cachestat (Linux 6.5+) how many stayed.
/// `--drop-caches`: sync and drop every clean cache on the machine (root).
fn prepare_cache(plan: &Plan, file: &File, target: &Target) -> anyhow::Result<Option<String>> {
    if plan.drop_caches {
        // SAFETY: sync() has no preconditions.
        unsafe { libc::sync() };
        std::fs::write("/proc/sys/vm/drop_caches", "3").context("writing 3 to /proc/sys/vm/drop_caches")?;
    }
    if plan.cache == Cache::Warm {
        return Ok(None);
    }
    if target.device.is_none() && target.kind != TargetKind::Device {
        return Ok(Some(format!(
            "cold cache is not possible on {}: with no block device behind it, the page cache is the file",
            target.fs_type
        )));
    }
    let fd = file.as_raw_fd();
    // SAFETY: plain syscalls on our open descriptor.
    unsafe { libc::fdatasync(fd) };
    let rc = unsafe { libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Ok(Some(format!(
            "cold cache: posix_fadvise(DONTNEED) failed: {}",
            std::io::Error::from_raw_os_error(rc)
        )));
    }
    let pages = target.size.div_ceil(page_size());
    Ok(Some(match cachestat(fd, target.size).map(|c| c.nr_cache) {
        Ok(0) => format!("cold cache: 0 of {pages} pages cached after DONTNEED (checked with cachestat)"),
        Ok(n) => format!(
            "cold cache: {n} of {pages} pages still cached after DONTNEED (mapped or in use elsewhere; \
             --drop-caches as root drops more)"
        ),
        Err(e) => format!("cold cache: DONTNEED done, not verified (cachestat: {e})"),
    }))
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// The cachestat syscall's answer (include/uapi/linux/mman.h), in pages.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CacheStat {
    pub nr_cache: u64,
    pub nr_dirty: u64,
    pub nr_writeback: u64,
    pub nr_evicted: u64,
    pub nr_recently_evicted: u64,
}

/// The cachestat syscall (Linux 6.5+, number 451 on every architecture) over [0, len) of a file.
pub fn cachestat(fd: i32, len: u64) -> std::io::Result<CacheStat> {
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    const SYS_CACHESTAT: libc::c_long = 451;
    let range = Range { off: 0, len };
    let mut st = CacheStat::default();
    // SAFETY: both pointers are to live structs of the kernel's layout.
    let rc =
        unsafe { libc::syscall(SYS_CACHESTAT, fd, &range as *const Range, &mut st as *mut CacheStat, 0u32) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

fn machine(s: &Sample) -> Machine {
    Machine {
        hostname: s.host.hostname.clone(),
        kernel: s.host.kernel.clone(),
        cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        mem_total_bytes: s.memory.total_bytes,
        ioscope_version: env!("CARGO_PKG_VERSION").to_string(),
        started_unix_ms: s.wall_unix_ms,
    }
}

fn settings(plan: &Plan, s: &Sample) -> Settings {
    let t = &plan.target;
    let q = t.device.as_deref().and_then(|d| s.block_settings.iter().find(|b| b.name == d));
    let d = &s.dirty_settings;
    Settings {
        path: t.path.display().to_string(),
        target: match t.kind {
            TargetKind::TestFile => "test file",
            TargetKind::ExistingFile => "existing file",
            TargetKind::Device => "block device",
        }
        .into(),
        size: t.size,
        runtime_s: plan.runtime.as_secs_f64(),
        time_based: plan.time_based,
        engine: plan.engine.name().into(),
        cache: match plan.cache {
            Cache::Cold => "cold",
            Cache::Warm => "warm",
        }
        .into(),
        fsync: plan.fsync.to_string(),
        drop_caches: plan.drop_caches,
        huge_pages: plan.huge_pages,
        filesystem: t.fs_type.clone(),
        device: t.device.clone(),
        read_ahead_kb: q.and_then(|q| q.read_ahead_kb),
        scheduler: q.and_then(|q| q.scheduler.clone()),
        nr_requests: q.and_then(|q| q.nr_requests),
        max_sectors_kb: q.and_then(|q| q.max_sectors_kb),
        rotational: q.and_then(|q| q.rotational),
        logical_block_size: q.and_then(|q| q.logical_block_size),
        hw_queues: q.and_then(|q| q.hw_queues),
        dio_offset_align: t.dio_offset_align,
        dio_mem_align: t.dio_mem_align,
        dirty_ratio: d.dirty_ratio,
        dirty_background_ratio: d.dirty_background_ratio,
        dirty_bytes: d.dirty_bytes,
        dirty_background_bytes: d.dirty_background_bytes,
        dirty_expire_centisecs: d.dirty_expire_centisecs,
        dirty_writeback_centisecs: d.dirty_writeback_centisecs,
    }
}
