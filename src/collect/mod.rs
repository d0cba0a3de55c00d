//! Collectors: read procfs and sysfs (and, through [`crate::bpf`], the eBPF maps) into a [`Sample`].
//!
//! Every reader takes a [`SystemRoot`] so tests can point it at fixture copies of /proc and /sys.

use std::path::Path;

use crate::bpf::BpfCollector;
use crate::sample::{Sample, Unavailable};
pub use crate::util::monotonic_ns;
pub use processes::ProcessReader;
pub use read::Files;
pub use root::{SystemRoot, FIXTURE_DEFAULT_PAGE_SIZE};

pub mod cgroups;
pub mod clock;
pub mod disks;
pub mod host;
pub mod identity;
pub mod memory;
pub mod processes;
pub mod psi;
mod read;
mod root;

/// Reads everything procfs and sysfs offer into a Sample (bpf and clocks left default).
/// Files that are missing or unreadable leave their part empty rather than failing the sample.
pub fn collect(root: &SystemRoot) -> Sample {
    let files = &mut Files::one_shot();
    collect_with(root, Some(&mut ProcessReader::one_shot()), &mut disks::SettingsCache::default(), files)
}

/// [`collect`] with a process reader that may keep files open from one sample to the next; None
/// leaves the per-process list empty (a consumer that shows no process rows). `settings` keeps
/// the block settings between samples (see [`disks::SettingsCache`]); `files` may keep the
/// procfs and sysfs files open (see [`Files`]).
pub fn collect_with(
    root: &SystemRoot,
    process_reader: Option<&mut ProcessReader>,
    settings: &mut disks::SettingsCache,
    files: &mut Files,
) -> Sample {
    // diskstats first: `Sampler::sample` stamps the clock just before, and iostat's rates are the
    // ones most sensitive to the interval.
    let before = files.out_of_fds();
    let disks = disks::diskstats(root, files);
    let disks_failed = files.out_of_fds() != before;
    collect_after_disks(root, disks, disks_failed, process_reader, settings, files)
}

/// The parts read between two checks of [`Files::out_of_fds`]: each is unavailable when the count
/// moved while it was read.
struct Parts {
    unavailable: Vec<Unavailable>,
}

impl Parts {
    fn read<T>(&mut self, part: &str, files: &mut Files, f: impl FnOnce(&mut Files) -> T) -> T {
        let before = files.out_of_fds();
        let out = f(files);
        if files.out_of_fds() != before {
            self.lost(part);
        }
        out
    }

    fn lost(&mut self, part: &str) {
        if !self.unavailable.iter().any(|u| u.part == part) {
            self.unavailable.push(Unavailable { part: part.into(), reason: read::OUT_OF_FDS.into() });
        }
    }
}

/// [`collect_with`] given /proc/diskstats as read (or known unchanged) just now. meminfo and
/// vmstat are read back to back: the dirty-threshold formula combines MemFree with vmstat's file
/// LRU sizes, and vmstat carries the kernel's own thresholds to check it against.
/// `disks_failed`: /proc/diskstats could not be read for want of file descriptors.
fn collect_after_disks(
    root: &SystemRoot,
    disks: Vec<crate::sample::DiskStat>,
    disks_failed: bool,
    process_reader: Option<&mut ProcessReader>,
    settings: &mut disks::SettingsCache,
    files: &mut Files,
) -> Sample {
    let mut parts = Parts { unavailable: Vec::new() };
    if disks_failed {
        parts.lost(Unavailable::DISKS);
    }
    let memory = parts.read(Unavailable::MEMORY, files, |f| memory::meminfo(root, f));
    let vmstat = parts.read(Unavailable::VMSTAT, files, |f| memory::vmstat(root, f));
    let (block_settings, lost) = settings.read(root, &disks, files);
    let (dirty_settings, zones, host, slow_lost) = settings.read_slow(root, files);
    for part in lost.into_iter().chain(slow_lost) {
        parts.lost(part);
    }
    let psi = parts.read(Unavailable::PSI, files, |f| psi::read(root, f));
    Sample {
        mono_ns: 0,
        wall_unix_ms: 0,
        host,
        page_size: root.page_size(),
        memory,
        vmstat,
        dirty_settings,
        zones,
        psi,
        disks,
        block_settings,
        processes: process_reader.map(|r| r.read(&root.proc)).unwrap_or_default(),
        bpf: Default::default(),
        cgroups: Vec::new(),
        unavailable: parts.unavailable,
    }
}

/// Wall clock, milliseconds since the Unix epoch (display only).
pub fn wall_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Takes live samples: procfs/sysfs plus the eBPF maps, stamped with the monotonic and wall clocks.
/// Used by the TUI's sampling task, `--once`, `--batch` and (later) the recorder.
pub struct Sampler {
    root: SystemRoot,
    bpf: BpfCollector,
    /// None: no per-process rows (see [`Sampler::without_processes`]).
    processes: Option<ProcessReader>,
    cgroups: cgroups::CgroupFiles,
    settings: disks::SettingsCache,
    files: Files,
    activity: BpfActivity,
    /// /proc/diskstats as last read, keyed by the block programs' event count read just before
    /// it (see [`Sampler::diskstats`]).
    disks: crate::bpf::inserts::Reuse<u64, Vec<crate::sample::DiskStat>>,
}

/// Which processes the eBPF maps saw doing I/O since the last sample: a block-layer or page-cache
/// counter of theirs moved (the maps hold cumulative counters per process), or they touched a
/// file in the interval (the files map is drained each sample).
#[derive(Default)]
struct BpfActivity {
    /// Per pid, a sum of its cumulative map counters at the last sample.
    last: std::collections::HashMap<u32, u64>,
    next: std::collections::HashMap<u32, u64>,
}

impl BpfActivity {
    fn active(&mut self, bpf: &crate::sample::BpfSample) -> Vec<u32> {
        let mut next = std::mem::take(&mut self.next);
        next.clear();
        for p in bpf.io_processes.iter().filter(|p| !p.exited) {
            let sum = p.read_requests + p.write_requests + p.other_requests + p.read_bytes + p.write_bytes;
            *next.entry(p.pid).or_default() += sum;
        }
        for p in bpf.page_cache.iter().flat_map(|c| &c.processes).filter(|p| !p.exited) {
            let c = &p.counters;
            let sum = c.read_pages + c.mapped_pages + c.faults + c.inserted_pages + c.write_inserted_pages;
            *next.entry(p.pid).or_default() +=
                sum + c.dirtied_pages + c.evicted_pages + c.dio_reads + c.dio_writes;
        }
        let mut active: Vec<u32> =
            next.iter().filter(|(pid, sum)| self.last.get(pid) != Some(sum)).map(|(pid, _)| *pid).collect();
        active.extend(bpf.files.iter().flat_map(|f| &f.processes).map(|p| p.pid));
        active.sort_unstable();
        active.dedup();
        self.next = std::mem::replace(&mut self.last, next);
        active
    }
}

impl Sampler {
    pub fn new(root: SystemRoot, bpf: BpfCollector) -> Sampler {
        // Kept open only for the live /proc and /sys (see Files::kept).
        let files = if root.proc == Path::new("/proc") { Files::kept() } else { Files::one_shot() };
        Sampler {
            root,
            bpf,
            processes: Some(ProcessReader::new()),
            cgroups: cgroups::CgroupFiles::new(),
            settings: disks::SettingsCache::default(),
            files,
            activity: BpfActivity::default(),
            disks: Default::default(),
        }
    }

    /// Leaves `Sample::processes` empty: /proc/PID/{comm,io} of every process is the largest
    /// procfs cost of a sample (two reads per process, ~3 ms with 500 processes), wasted on a
    /// consumer that shows no process rows (`ioscope serve` without `--top-processes`). The eBPF
    /// per-process rows (block I/O, page cache) are not affected.
    pub fn without_processes(mut self) -> Sampler {
        self.processes = None;
        self
    }

    /// /proc/diskstats, or the lines last read when the block programs say nothing changed them
    /// since: they counted no event (every request's start, insertion, issue, completion and
    /// merge is one) and no request was in flight at that read. Devices whose I/O does not pass
    /// those events (bio-based: device-mapper, md, zram) are re-read from their own
    /// `/sys/class/block/NAME/stat` then. Read whole anyway once every SLOW_REFRESH. The kernel
    /// formats every device's line on each read of /proc/diskstats (its in-flight count walks the
    /// device's request tags): ~75 µs of a quiet 0.1 s sample, more after a burst of I/O left
    /// the caches cold.
    ///
    /// `events` is the count read before the clock was stamped. A completion counted then but not
    /// yet accounted in diskstats leaves its request in flight at that read, so the next sample
    /// reads again; a program run the kernel skipped (recursion) shows at the next read.
    fn diskstats(&mut self, events: Option<u64>) -> Vec<crate::sample::DiskStat> {
        let now = std::time::Instant::now();
        let idle = |d: &&Vec<crate::sample::DiskStat>| d.iter().all(|d| d.in_flight == 0);
        if let Some(last) = events.and_then(|e| self.disks.get(&e, now)).filter(idle) {
            if let Some(bio) = self.settings.bio_based(last) {
                let mut disks = last.clone();
                if disks::reread_stats(&self.root, &mut disks, &bio, &mut self.files) {
                    return disks;
                }
            }
        }
        let disks = disks::diskstats(&self.root, &mut self.files);
        if let Some(e) = events {
            self.disks.put(e, disks.clone(), now);
        }
        disks
    }

    pub fn sample(&mut self) -> Sample {
        let events = self.bpf.family_mut::<crate::bpf::block::BlockFamily>().and_then(|b| b.events());
        let mono_ns = monotonic_ns();
        let wall_unix_ms = wall_unix_ms();
        let before = self.files.out_of_fds();
        let disks = self.diskstats(events);
        let disks_failed = self.files.out_of_fds() != before;
        let mut s =
            collect_after_disks(&self.root, disks, disks_failed, None, &mut self.settings, &mut self.files);
        s.mono_ns = mono_ns;
        s.wall_unix_ms = wall_unix_ms;
        s.bpf = self.bpf.read();
        s.cgroups = self.cgroups.read(&s.bpf);
        // The processes after the maps: those the probes saw busy are re-read at once between
        // the reader's full passes (see `ProcessReader::read_sampled`).
        if let Some(reader) = self.processes.as_mut() {
            let active = self.activity.active(&s.bpf);
            let watched = s.bpf.status.enabled && s.bpf.page_cache.is_some();
            s.processes = reader.read_sampled(&self.root.proc, mono_ns, &active, watched);
        }
        s
    }
}
