//! Turning the per-file map (src/bpf/files.rs) into [`FileIoSample`]s: writeback keyed by a
//! backing disk merged onto the filesystem mounted from it, a path for each inode without
//! debugfs, and only the files active in the interval in the Sample (recordings stay small).
//!
//! The map is drained each sample (crate::bpf::files::FileMaps::drain): its rows are what
//! happened since the last sample. A file's counters in the Sample run from the sample it entered
//! the Sample in (the Model compares a file absent from the previous Sample with zero); a file idle
//! for one interval leaves it. At most [`MAX_SAMPLE_FILES`] files, the busiest, have rows of their
//! own; the rest are summed into one row labelled `[N other files]`, and paths are looked up
//! for the listed files only.
//!
//! Inode → path, cheapest first, every answer cached and checked again before each use through
//! super::safe_open (a rename makes a cached path stale, a directory swapped for a symlink makes it
//! a lie: it is dropped, never shown wrong nor followed):
//! 0. the name the kernel programs read from the file's dentries at its first I/O
//!    (crate::bpf::file_names): no process has to hold the file open; checked by a lookup
//!    that follows no link and opens nothing but the kernel's regular file (super::safe_open);
//!    0b. on ext2/3/4, the inode opened by its file handle and its path read back
//!    (super::handles): a file renamed since the kernel named it, or never named;
//! 1. /proc/PID/maps and /proc/PID/fd of the processes seen doing the file's I/O, at once when
//!    a file is newly unknown (its opener may close it soon; a handful of processes, so cheap);
//! 2. still unknown and new: /proc/*/fd of every running process, at once (one stat per open
//!    file, at most [`MAX_FDS_PER_SCAN`]). Not their maps: a file's mappers fault its pages
//!    themselves, so step 1 saw them, and reading every process's maps is the costly part;
//! 3. a file still unknown is looked for again after [`WALK_EVERY`] (or as new when it comes back
//!    after an idle interval), in /proc/*/maps and
//!    /proc/*/fd, at most one such scan per [`SCAN_EVERY`]. An unlinked open file shows the
//!    kernel's own "PATH (deleted)". Scans of every process get [`SCAN_CPU_SHARE`] of the time
//!    (cheap on a box with 100,000 open files).
//! 4. A bounded walk, in a background thread, of the filesystem's mount ([`MAX_WALK_ENTRIES`] directory entries, no
//!    crossing into other mounts) for inodes still unknown, at most once per [`WALK_EVERY`],
//!    paced (see `WALK_PACE`), one walk at a time.
//! 5. Otherwise no path: shown as dev:inode.
//!
//! What sysfs says of a device (its disk, its name) is cached for [`SYSFS_FRESH`]; the mount
//! table is re-read each sample but a mount's disk is looked up once in that time too.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ioscope_common::files::{KEY_BDI_DEV, KEY_SB_DEV};
use ioscope_common::kernel_dev_major_minor;

use super::mountinfo::{mounted_path, parse_mountinfo, Mount, MountInfo, MountLine, MountRoot};
use super::safe_open::{Identified, Opener};
use super::types::{FileId, FileMeta, KernelNames};
use crate::bpf::counters::RawFile;
use crate::sample::{FileCacheState, FileIoSample};

pub const MAX_FDS_PER_SCAN: usize = 200_000;
pub const SCAN_EVERY: Duration = Duration::from_secs(10);
/// A scan of every process's fds costs in proportion to the open files on the box (one stat each):
/// a few milliseconds on a desktop, a tenth of a second with 100,000 open files. Such scans get
/// this share of the time that passes (a budget, so a quiet spell lets a burst of new files be
/// looked up at once): on a small box a scan every second or so, with 100,000 open files one scan
/// in about 20 s. Half a percent: the kernel's names (step 0) find nearly every file, and a box
/// whose builds keep making short-lived files nobody holds would otherwise pay the whole share
/// for scans that find nothing, more than ioscope's whole idle target of 1 % of a core.
pub const SCAN_CPU_SHARE: f64 = 0.005;
pub const SCAN_BUDGET_MAX: Duration = Duration::from_millis(100);
/// How long a device's disk and name from sysfs are trusted (devices come and go rarely; a
/// reused major:minor is seen again within this time).
pub const SYSFS_FRESH: Duration = Duration::from_secs(30);
pub const MAX_WALK_ENTRIES: usize = 100_000;
/// The walk's pace: a pause after this many directory entries (about 1,000 entries a second, a
/// few tenths of a percent of one CPU). A full walk then takes a minute or two instead of a
/// burst of a whole CPU-second, which showed as several percent of a core in any few seconds
/// measured; a file found this way was opened by a process long gone, so nothing is urgent.
const WALK_PACE: (usize, Duration) = (250, Duration::from_millis(250));
/// Most files whose cache state is read per sample (one open and one cachestat each).
pub const MAX_CACHE_STATES: usize = 256;
/// A file's cache state is read again only after this many times what its last read took, and
/// never more often than [`crate::util::SLOW_REFRESH`] (once a second: at intervals of a second
/// or more every sample reads it as before): `cachestat` (and `mincore`) walk the file's cached
/// pages, ~20 ns a page here, so a file with gigabytes cached (ioscope's own `--json` output, a
/// database file) would cost milliseconds each sample. A small file's state (microseconds) is
/// read once a second; one whose read took 50 ms (10 GiB cached) every 5 s. At most 1 % of a
/// core per file listed. At `--interval 0.1`, reading every listed file's state every sample
/// was a quarter of ioscope's CPU while other processes wrote files (builds, its own output).
const CACHE_STATE_PACE: u32 = 100;
pub const WALK_EVERY: Duration = Duration::from_secs(30);
/// Most files in one Sample: the busiest; the others are summed into one row labelled
/// `[N other files]` (a burst of new files costs one row, not thousands, and paths are looked up
/// for these only).
pub const MAX_SAMPLE_FILES: usize = 256;

/// The disk a block device's writeback is reported under: itself, or its parent for a partition.
fn bdi_of(sys: &Path, dev: (u32, u32)) -> Option<(u32, u32)> {
    let dir = sys.join(format!("dev/block/{}:{}", dev.0, dev.1));
    if !dir.exists() {
        return None;
    }
    if !dir.join("partition").exists() {
        return Some(dev);
    }
    let parent = std::fs::read_to_string(dir.join("../dev")).ok()?;
    let (a, b) = parent.trim().split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// A device's name from sysfs (`loop0`, `sda1`), or "major:minor".
fn device_name(sys: &Path, dev: (u32, u32)) -> String {
    std::fs::read_link(sys.join(format!("dev/block/{}:{}", dev.0, dev.1)))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| format!("{}:{}", dev.0, dev.1))
}

/// Merges entries keyed by a backing disk onto the filesystem mounted from it (`sb_of_bdi` lists
/// the mounted filesystems' devices per disk). With several candidates (partitions of one disk),
/// the one that already has this inode; when none or several do, the entry stays on the disk.
pub fn merge_bdi(
    raw: Vec<RawFile>,
    sb_of_bdi: impl Fn((u32, u32)) -> Vec<(u32, u32)>,
) -> HashMap<FileId, RawFile> {
    let mut out: HashMap<FileId, RawFile> = HashMap::new();
    let mut bdi_keyed = Vec::new();
    for f in raw {
        if f.key.kind == KEY_SB_DEV {
            let (a, b) = kernel_dev_major_minor(f.key.dev);
            add(out.entry((a, b, f.key.ino)).or_default(), &f);
        } else if f.key.kind == KEY_BDI_DEV {
            bdi_keyed.push(f);
        }
    }
    for f in bdi_keyed {
        let disk = kernel_dev_major_minor(f.key.dev);
        let candidates = sb_of_bdi(disk);
        let target = match candidates.as_slice() {
            [one] => *one,
            many => {
                let with: Vec<_> = many.iter().filter(|d| out.contains_key(&(d.0, d.1, f.key.ino))).collect();
                if with.len() == 1 {
                    *with[0]
                } else {
                    disk
                }
            }
        };
        add(out.entry((target.0, target.1, f.key.ino)).or_default(), &f);
    }
    out
}

fn add(into: &mut RawFile, f: &RawFile) {
    into.inserted_pages += f.inserted_pages;
    into.readahead_pages += f.readahead_pages;
    into.dirtied_pages += f.dirtied_pages;
    into.writeback_pages += f.writeback_pages;
    into.dio_read_bytes += f.dio_read_bytes;
    into.dio_write_bytes += f.dio_write_bytes;
    into.fs_writeback_bytes += f.fs_writeback_bytes;
    for p in &f.processes {
        if !into.processes.iter().any(|q| q.pid == p.pid) {
            into.processes.push(p.clone());
        }
    }
}

/// What the resolver remembers of a file in the Sample: its counters since it entered it (a
/// file absent from the previous Sample starts from zero: the Model compares with zero).
#[derive(Clone, Debug, Default)]
struct Tracked {
    cum: [u64; 7],
    processes: Vec<crate::sample::FileProcess>,
}

/// Processes remembered per file.
const MAX_FILE_PROCESSES: usize = 8;

fn counters(f: &RawFile) -> [u64; 7] {
    [
        f.inserted_pages,
        f.readahead_pages,
        f.dirtied_pages,
        f.writeback_pages,
        f.dio_read_bytes,
        f.dio_write_bytes,
        f.fs_writeback_bytes,
    ]
}

/// The disk bytes an increment stands for (to rank files for [`MAX_SAMPLE_FILES`]).
fn busy_bytes(c: &[u64; 7], page: u64) -> u64 {
    let writeback = (c[3].saturating_mul(page)).max(c[6]);
    c[0].saturating_mul(page).saturating_add(writeback).saturating_add(c[4]).saturating_add(c[5])
}

/// The row the files beyond [`MAX_SAMPLE_FILES`] are summed into.
pub const OTHER_FILES: FileId = (0, 0, 0);

/// Paths, mounts and activity across samples. See the module docs.
pub struct FileResolver {
    proc: PathBuf,
    sys: PathBuf,
    paths: HashMap<FileId, String>,
    tracked: HashMap<FileId, Tracked>,
    last_scan: Option<Instant>,
    /// The time scans of every process may still take: [`SCAN_CPU_SHARE`] of the time passed,
    /// at most [`SCAN_BUDGET_MAX`], less what scans took (see `full_scan`).
    scan_budget: Duration,
    budget_at: Option<Instant>,
    last_walk: HashMap<(u32, u32), Instant>,
    page_size: u64,
    /// Files seen dirtied and not since seen written back without more dirtying
    /// ([`may_hold_dirty_pages`] over samples: a file's counters start over when its entry goes
    /// quiet, its dirty pages stay). Not opened meanwhile. At most [`MAX_DIRTY_FILES`].
    dirty_files: HashSet<FileId>,
    /// The background mount walker, started on first need.
    walker: Option<Walker>,
    /// Inodes opened by their file handle (ext2/3/4), before the process scans.
    handles: super::handles::HandleOpener,
    /// Every path is looked up and opened through it (see super::safe_open).
    opener: Opener,
    /// When each unknown file was last looked for in /proc.
    tried: HashMap<FileId, Instant>,
    sysfs: SysfsCache,
    /// The names the kernel programs read from the dentries (step 0), when they run.
    names: Option<Box<dyn KernelNames>>,
    /// The mount table as of the last sample, and what it was built from (the mount table's
    /// generation, the sysfs cache's start): rebuilt only when either changed.
    mounts: Vec<Mount>,
    mounts_from: Option<(u64, Option<Instant>)>,
    /// Steps 1–4 (/proc, mount walks) after the kernel's names; off only in tests.
    pub fallbacks: bool,
    /// The files whose paths this sample checked, open (see [`Checked`]); closed at the end
    /// of the sample, their metadata kept in `checked_meta` until the next one.
    checked: HashMap<FileId, Checked>,
    checked_meta: HashMap<FileId, FileMeta>,
    mount_table: MountTable,
    /// Each listed file's last cache state and when it may be read again
    /// ([`CACHE_STATE_PACE`]); files not listed in a sample are forgotten.
    cache_states: HashMap<FileId, (Instant, Option<FileCacheState>)>,
    /// Files another view lists without a path (readahead's files with pages pending, named by
    /// no one): the background walks look for them too (see [`FileResolver::look_for`]).
    wanted_elsewhere: HashSet<FileId>,
}

/// Most files other views may ask the walks for at once.
pub const MAX_WANTED_ELSEWHERE: usize = 1024;

/// `/proc/self/mountinfo` parsed, again only when the table changed ([`MountInfo`]).
struct MountTable {
    info: MountInfo,
    generation: u64,
    parsed: Vec<MountLine>,
}

impl MountTable {
    fn new(proc: &Path) -> MountTable {
        MountTable { info: MountInfo::new(proc), generation: 0, parsed: Vec::new() }
    }

    fn read(&mut self) -> &[MountLine] {
        self.info.refresh();
        if self.info.generation() != self.generation {
            self.generation = self.info.generation();
            self.parsed = parse_mountinfo(self.info.text());
        }
        &self.parsed
    }
}

/// A path checked to name its inode, from one lookup (super::safe_open: no link followed, an
/// `O_PATH` descriptor, the regular file the kernel reported): the check, the size and mtime, and
/// the page-cache state (cachestat on the file reopened through that descriptor) cost one path
/// lookup instead of the three a stat, an open for the cache state and the extent map's stat took,
/// per listed file and sample.
struct Checked {
    meta: FileMeta,
    file: Identified,
}

/// `path` looked up safely and checked to be `id`'s regular file; None when it is not.
fn check(opener: &mut Opener, path: &str, id: FileId) -> Option<Checked> {
    let file = opener.lookup(Path::new(path), id).ok()?;
    Some(Checked { meta: file.meta, file })
}

/// Answers from sysfs, per major:minor, forgotten every [`SYSFS_FRESH`].
#[derive(Default)]
struct SysfsCache {
    since: Option<Instant>,
    bdi: HashMap<(u32, u32), Option<(u32, u32)>>,
    name: HashMap<(u32, u32), String>,
    label: HashMap<FileId, Option<String>>,
}

impl SysfsCache {
    fn expire(&mut self, now: Instant) {
        if self.since.is_none_or(|t| now.duration_since(t) >= SYSFS_FRESH) {
            *self = SysfsCache { since: Some(now), ..Default::default() };
        }
    }

    fn bdi(&mut self, sys: &Path, dev: (u32, u32)) -> Option<(u32, u32)> {
        *self.bdi.entry(dev).or_insert_with(|| bdi_of(sys, dev))
    }

    fn name(&mut self, sys: &Path, dev: (u32, u32)) -> String {
        self.name.entry(dev).or_insert_with(|| device_name(sys, dev)).clone()
    }

    /// `id`'s label when it is a block device's or a filesystem's own (see
    /// `block_device_cache_label`).
    fn label(&mut self, sys: &Path, mounts: &[Mount], id: FileId) -> &Option<String> {
        self.label.entry(id).or_insert_with(|| block_device_cache_label(sys, mounts, id))
    }
}

/// A thread walking mounts for inodes (one job at a time); it ends when the resolver is dropped.
struct Walker {
    jobs: std::sync::mpsc::Sender<((u32, u32), PathBuf, HashSet<u64>)>,
    found: std::sync::mpsc::Receiver<(FileId, String)>,
    /// A walk is under way: no new job is queued meanwhile (a paced walk can outlast WALK_EVERY).
    busy: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The walk under way (its device and inodes), and the flag that stops it when no view
    /// wants any of them any more (see [`walk_mount`]).
    current: Option<((u32, u32), HashSet<u64>)>,
    cancel: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Walker {
    fn start() -> Walker {
        let (jobs, job_rx) = std::sync::mpsc::channel::<((u32, u32), PathBuf, HashSet<u64>)>();
        let (found_tx, found) = std::sync::mpsc::channel();
        let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let walking = busy.clone();
        let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cancelled = cancel.clone();
        let _ = std::thread::Builder::new().name("ioscope-file-walk".into()).spawn(move || {
            for (dev, root, wanted) in job_rx {
                for (ino, path) in walk_mount(&root, &wanted, MAX_WALK_ENTRIES, WALK_PACE, &cancelled) {
                    if found_tx.send(((dev.0, dev.1, ino), path)).is_err() {
                        return;
                    }
                }
                walking.store(false, std::sync::atomic::Ordering::Release);
            }
        });
        Walker { jobs, found, busy, current: None, cancel }
    }

    /// Stops the walk under way when none of its inodes is still `unknown`: a walk's finds are
    /// taken only for files a view still lists without a path, and a walk of a large mount
    /// (100,000 entries, paced) runs for a minute or more after a burst's files were all named.
    fn cancel_unless_wanted(&mut self, unknown: &HashSet<FileId>) {
        use std::sync::atomic::Ordering;
        let Some((dev, inodes)) = &self.current else { return };
        if !self.busy.load(Ordering::Acquire) {
            self.current = None;
        } else if !inodes.iter().any(|&ino| unknown.contains(&(dev.0, dev.1, ino))) {
            self.cancel.store(true, Ordering::Release);
            self.current = None;
        }
    }
}

impl Default for FileResolver {
    fn default() -> Self {
        FileResolver::new(Path::new("/proc"), Path::new("/sys"))
    }
}

impl FileResolver {
    pub fn new(proc: &Path, sys: &Path) -> FileResolver {
        FileResolver {
            proc: proc.to_path_buf(),
            sys: sys.to_path_buf(),
            paths: HashMap::new(),
            tracked: HashMap::new(),
            last_scan: None,
            scan_budget: SCAN_BUDGET_MAX,
            budget_at: None,
            last_walk: HashMap::new(),
            // SAFETY: sysconf has no preconditions.
            page_size: u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096),
            dirty_files: HashSet::new(),
            walker: None,
            handles: Default::default(),
            opener: Opener::default(),
            tried: HashMap::new(),
            sysfs: SysfsCache::default(),
            names: None,
            mounts: Vec::new(),
            mounts_from: None,
            fallbacks: true,
            checked: HashMap::new(),
            checked_meta: HashMap::new(),
            mount_table: MountTable::new(proc),
            cache_states: HashMap::new(),
            wanted_elsewhere: HashSet::new(),
        }
    }

    /// Uses the names the kernel programs read (see crate::bpf::file_names) before anything else.
    pub fn set_names(&mut self, names: impl KernelNames + 'static) {
        self.names = Some(Box::new(names));
    }

    /// The path of a file keyed as the kernel keys it (dev_t `major << 20 | minor`, inode): the
    /// one found for the files view, else the kernel's name for it, each checked, else None. For
    /// the readahead view, whose files may have left the files view.
    pub fn known_path(&mut self, dev: u32, ino: u64) -> Option<String> {
        let (a, b) = kernel_dev_major_minor(dev);
        let id = (a, b, ino);
        match self.paths.get(&id) {
            Some(p) if p.ends_with(" (deleted)") || names(&mut self.opener, p, id) => return Some(p.clone()),
            Some(_) => {
                self.paths.remove(&id);
            }
            None => {}
        }
        let mounts = std::mem::take(&mut self.mounts);
        let found = self.kernel_name(id, &mounts, false);
        self.mounts = mounts;
        let found = found?;
        self.paths.insert(id, found.clone());
        Some(found)
    }

    /// The path of a file keyed as the kernel keys it, opened by its file handle (see
    /// super::handles; ext2/3/4 only), checked, and remembered as [`FileResolver::known_path`]
    /// gives it. None with the fallbacks off.
    pub fn handle_path(&mut self, dev: u32, ino: u64) -> Option<String> {
        if !self.fallbacks {
            return None;
        }
        let (a, b) = kernel_dev_major_minor(dev);
        let id = (a, b, ino);
        let path = self.handles.path(id, &self.mounts, &mut self.opener)?;
        self.paths.insert(id, path.clone());
        Some(path)
    }

    /// What a file without a path is (`[vda metadata/journal]`, `[vda metadata]`), keyed as the
    /// kernel keys it: a block device's own pages or a filesystem's metadata inode (see
    /// `block_device_cache_label`), which no process has open and no walk finds. Cached as the
    /// files view's labels are.
    pub fn label_of(&mut self, dev: u32, ino: u64) -> Option<String> {
        let (a, b) = kernel_dev_major_minor(dev);
        let id = (a, b, ino);
        self.sysfs.label(&self.sys, &self.mounts, id).clone()
    }

    /// Asks the background walks to look for a file another view lists without a path (keyed as
    /// the kernel keys it); [`FileResolver::known_path`] has its path once found. The requests
    /// are dropped by [`FileResolver::clear_wanted`]: a view asks again each sample.
    pub fn look_for(&mut self, dev: u32, ino: u64) {
        let (a, b) = kernel_dev_major_minor(dev);
        if self.wanted_elsewhere.len() < MAX_WANTED_ELSEWHERE {
            self.wanted_elsewhere.insert((a, b, ino));
        }
    }

    /// Drops the other views' requests (see [`FileResolver::look_for`]).
    pub fn clear_wanted(&mut self) {
        self.wanted_elsewhere.clear();
    }

    /// Whether the kernel named the file keyed as the kernel keys it (one map lookup; its path
    /// is not built nor checked).
    pub fn has_kernel_name(&self, dev: u32, ino: u64) -> bool {
        self.names.as_ref().is_some_and(|n| n.has(dev, ino))
    }

    /// The path the kernel's dentries give `id`, when it still names it (or the dentry was
    /// unlinked: the kernel's own " (deleted)"). A stale one is forgotten: renamed since, the
    /// file is named again at its next I/O. With `keep`, the file opened to check it is kept for
    /// the rest of the sample (see [`Checked`]).
    fn kernel_name(&mut self, id: FileId, mounts: &[Mount], keep: bool) -> Option<String> {
        let kernel = self.names.as_mut()?;
        let dev = (id.0 << ioscope_common::KERNEL_MINOR_BITS) | id.1;
        let fs = kernel.fs_path(dev, id.2)?;
        let roots =
            mounts.iter().map(|m| MountRoot { dev: m.dev, root: &m.root, mount_point: &m.mount_point });
        let path = mounted_path(roots, (id.0, id.1), &fs.path)?;
        let path = path.to_string_lossy().into_owned();
        if fs.unlinked {
            return Some(format!("{path} (deleted)"));
        }
        if let Some(checked) = check(&mut self.opener, &path, id) {
            if keep {
                self.checked.insert(id, checked);
            }
            return Some(path);
        }
        kernel.forget(dev, &fs.chain);
        None
    }

    /// The mount table with each mount's backing device: the last sample's list while nothing it
    /// was built from changed (its paths are three allocations per mount).
    fn mounts(&mut self) -> Vec<Mount> {
        self.mount_table.read();
        let from = Some((self.mount_table.generation, self.sysfs.since));
        if from == self.mounts_from {
            return std::mem::take(&mut self.mounts);
        }
        self.mounts_from = from;
        self.mount_table
            .parsed
            .iter()
            .map(|m| Mount {
                dev: m.dev,
                root: m.root.clone(),
                mount_point: m.mount_point.clone(),
                bdi: self.sysfs.bdi(&self.sys, m.dev),
                fstype: m.fstype.clone(),
            })
            .collect()
    }

    /// The Sample's files: merged, with paths, the recently active ones only.
    pub fn resolve(&mut self, raw: Vec<RawFile>) -> Vec<FileIoSample> {
        self.resolve_at(raw, Instant::now())
    }

    pub fn resolve_at(&mut self, raw: Vec<RawFile>, now: Instant) -> Vec<FileIoSample> {
        self.sysfs.expire(now);
        let mounts = self.mounts();
        let merged = merge_bdi(raw, |disk| {
            let mut devs: Vec<(u32, u32)> =
                mounts.iter().filter(|m| m.bdi == Some(disk)).map(|m| m.dev).collect();
            devs.sort();
            devs.dedup();
            devs
        });
        // The files active in the interval (the rows are what the programs counted since the
        // last drain), the busiest first; beyond MAX_SAMPLE_FILES summed into one row.
        let page = self.page_size;
        let mut active: Vec<(FileId, RawFile, [u64; 7])> = merged
            .into_iter()
            .map(|(id, f)| {
                let c = counters(&f);
                (id, f, c)
            })
            .filter(|(_, _, c)| c.iter().any(|&v| v != 0))
            .collect();
        active.sort_by_key(|(id, _, c)| (std::cmp::Reverse(busy_bytes(c, page)), *id));
        let mut others = (0usize, [0u64; 7]);
        if active.len() > MAX_SAMPLE_FILES {
            // Among the files as busy as the last one listed, those the kernel named first.
            let (names, paths) = (&self.names, &self.paths);
            prefer_at_cutoff(
                &mut active,
                MAX_SAMPLE_FILES,
                |(_, _, c)| busy_bytes(c, page),
                |(id, _, _)| {
                    let dev = (id.0 << ioscope_common::KERNEL_MINOR_BITS) | id.1;
                    paths.contains_key(id) || names.as_ref().is_some_and(|n| n.has(dev, id.2))
                },
            );
            for (_, _, c) in active.drain(MAX_SAMPLE_FILES..) {
                others.0 += 1;
                for (o, v) in others.1.iter_mut().zip(c) {
                    *o = o.saturating_add(v);
                }
            }
        }
        // Files not active in this interval leave the Sample and are forgotten.
        let mut before = std::mem::take(&mut self.tracked);
        let mut out = Vec::new();
        let mut row = |id: FileId,
                       inc: [u64; 7],
                       procs: &[crate::sample::FileProcess],
                       tracked: &mut HashMap<FileId, Tracked>| {
            let mut t = before.remove(&id).unwrap_or_default();
            for (c, v) in t.cum.iter_mut().zip(inc) {
                *c = c.saturating_add(v);
            }
            let mut processes: Vec<_> = procs.to_vec();
            processes.extend(t.processes.iter().filter(|p| !procs.iter().any(|q| q.pid == p.pid)).cloned());
            processes.truncate(MAX_FILE_PROCESSES);
            processes.sort_by_key(|p| p.pid);
            t.processes = processes.clone();
            let c = t.cum;
            tracked.insert(id, t);
            FileIoSample {
                major: id.0,
                minor: id.1,
                ino: id.2,
                device: String::new(),
                path: None,
                inserted_pages: c[0],
                readahead_pages: c[1],
                dirtied_pages: c[2],
                writeback_pages: c[3],
                dio_read_bytes: c[4],
                dio_write_bytes: c[5],
                fs_writeback_bytes: c[6],
                processes,
                cache: None,
                label: None,
            }
        };
        let mut tracked = HashMap::new();
        for (id, f, c) in &active {
            let mut r = row(*id, *c, &f.processes, &mut tracked);
            r.device = self.sysfs.name(&self.sys, (id.0, id.1));
            out.push(r);
        }
        if others.0 > 0 {
            let mut r = row(OTHER_FILES, others.1, &[], &mut tracked);
            r.label = Some(format!("[{} other files]", others.0));
            out.push(r);
        }
        self.tracked = tracked;
        // A file that went quiet and comes back (opened again later, perhaps by another process)
        // is looked up afresh at once: WALK_EVERY paces the retries of files active without a path.
        for id in before.keys() {
            self.tried.remove(id);
        }
        self.find_paths(&mut out, &mounts, now);
        self.mounts = mounts;
        // Paths of files long gone from the Sample (a churn of new files) are not kept forever.
        if self.paths.len() > 8 * MAX_SAMPLE_FILES {
            let (tracked, elsewhere) = (&self.tracked, &self.wanted_elsewhere);
            self.paths.retain(|id, _| tracked.contains_key(id) || elsewhere.contains(id));
        }
        out.sort_by_key(|f| (f.major, f.minor, f.ino));
        out
    }

    fn find_paths(&mut self, files: &mut [FileIoSample], mounts: &[Mount], now: Instant) {
        // Cached answers still naming the same inode; the others are dropped.
        let mut unknown: HashSet<FileId> = HashSet::new();
        for f in files.iter().filter(|f| (f.major, f.minor, f.ino) != OTHER_FILES) {
            let id = (f.major, f.minor, f.ino);
            if let Some(p) = self.paths.get(&id) {
                if p.ends_with(" (deleted)") {
                    continue;
                }
                if let Some(checked) = check(&mut self.opener, p, id) {
                    self.checked.insert(id, checked);
                    continue;
                }
                self.paths.remove(&id);
            }
            unknown.insert(id);
        }
        // The names the kernel read from the dentries at the file's I/O: no process needed.
        if self.names.is_some() {
            for id in unknown.clone() {
                if let Some(p) = self.kernel_name(id, mounts, true) {
                    self.paths.insert(id, p);
                    unknown.remove(&id);
                }
            }
        }
        // A block device's own pages (metadata, journal: on the bdev pseudo-filesystem, or keyed
        // by the disk at writeback) are no process's open file, so no scan looks for them (their
        // rows are labelled below). Else the metadata reads of the mount walk below, and every
        // journal commit, would set off scans of every process's fds on an idle machine. (A real
        // file whose inode number is its own disk's dev_t, without a kernel name, stays unnamed.)
        unknown.retain(|&id| self.sysfs.label(&self.sys, mounts, id).is_none());
        if !self.fallbacks {
            unknown.clear();
        }
        // A file whose kernel name is stale (renamed after its I/O) or missing, on a filesystem
        // whose handles need only the inode number: opened by its handle, its path read back
        // (see super::handles). Once per file like the scans below (new, or due for a retry).
        let due: Vec<FileId> = unknown
            .iter()
            .filter(|id| self.tried.get(id).is_none_or(|t| now.duration_since(*t) >= WALK_EVERY))
            .copied()
            .collect();
        for id in due {
            if let Some(p) = self.handles.path(id, mounts, &mut self.opener) {
                self.paths.insert(id, p);
                unknown.remove(&id);
            }
        }
        // A file newly unknown: at once, the fds and maps of the processes seen doing its I/O
        // (its opener may close it soon), then every process's fds. A file due for a retry (a
        // file nobody has open, like a deleted temporary, is retried only every WALK_EVERY):
        // every process's maps and fds, at most every SCAN_EVERY.
        let new: HashSet<FileId> =
            unknown.iter().filter(|id| !self.tried.contains_key(id)).copied().collect();
        if !new.is_empty() {
            let pids: HashSet<u32> = files
                .iter()
                .filter(|f| new.contains(&(f.major, f.minor, f.ino)))
                .flat_map(|f| f.processes.iter().map(|p| p.pid))
                .collect();
            let dirs = pids.iter().map(|pid| self.proc.join(pid.to_string()));
            scan_process_dirs(dirs, &new, &mut self.paths, MAX_FDS_PER_SCAN, true);
            // Loop devices' backing files: read and written by the loop driver's kernel threads,
            // held by no process, but named in sysfs.
            for (id, path) in loop_backing_files(&self.sys, &new, &mut self.opener) {
                self.paths.entry(id).or_insert(path);
            }
            unknown.retain(|id| !self.paths.contains_key(id));
            let full_ok = self.scan_allowed(now);
            if full_ok && new.iter().any(|id| unknown.contains(id)) {
                self.full_scan(&mut unknown, false);
            }
            // Marked tried once every process was looked through (or the file was found); until
            // then it stays new, for the next sample's scan.
            for id in new.iter().filter(|id| full_ok || !unknown.contains(id)) {
                self.tried.insert(*id, now);
            }
        }
        let retry =
            unknown.iter().any(|id| self.tried.get(id).is_some_and(|t| now.duration_since(*t) >= WALK_EVERY));
        let scan_ok =
            self.last_scan.is_none_or(|t| now.duration_since(t) >= SCAN_EVERY) && self.scan_allowed(now);
        if retry && scan_ok {
            self.last_scan = Some(now);
            for id in &unknown {
                self.tried.insert(*id, now);
            }
            self.full_scan(&mut unknown, true);
        }
        if self.tried.len() > 4 * ioscope_common::files::FILE_MAX_ENTRIES as usize {
            self.tried.retain(|_, t| now.duration_since(*t) < WALK_EVERY);
        }
        // Besides this view's unknown files, those other views asked for (see look_for).
        let paths = &self.paths;
        self.wanted_elsewhere.retain(|id| !paths.contains_key(id));
        if self.fallbacks {
            unknown.extend(self.wanted_elsewhere.iter().copied());
        }
        // What the background walks found since (checked again: the tree may have changed).
        if let Some(w) = &self.walker {
            while let Ok((id, path)) = w.found.try_recv() {
                if unknown.contains(&id) && names(&mut self.opener, &path, id) {
                    unknown.remove(&id);
                    self.paths.insert(id, path);
                }
            }
        }
        if let Some(w) = &mut self.walker {
            w.cancel_unless_wanted(&unknown);
        }
        // A background walk of a mount that still has unknown inodes, one walk at a time.
        let devs: HashSet<(u32, u32)> = unknown.iter().map(|id| (id.0, id.1)).collect();
        for dev in devs {
            if self.last_walk.get(&dev).is_some_and(|t| now.duration_since(*t) < WALK_EVERY) {
                continue;
            }
            let Some(m) = mounts.iter().find(|m| m.dev == dev) else { continue };
            let walker = self.walker.get_or_insert_with(Walker::start);
            if walker.busy.swap(true, std::sync::atomic::Ordering::AcqRel) {
                break;
            }
            self.last_walk.insert(dev, now);
            let wanted: HashSet<u64> =
                unknown.iter().filter(|id| (id.0, id.1) == dev).map(|id| id.2).collect();
            walker.cancel.store(false, std::sync::atomic::Ordering::Release);
            walker.current = Some((dev, wanted.clone()));
            let _ = walker.jobs.send((dev, m.mount_point.clone(), wanted));
        }
        for f in files.iter() {
            let id = (f.major, f.minor, f.ino);
            if may_hold_dirty_pages(f, self.page_size) {
                if self.dirty_files.len() < MAX_DIRTY_FILES {
                    self.dirty_files.insert(id);
                }
            } else if f.dirtied_pages == 0 && (f.writeback_pages > 0 || f.fs_writeback_bytes > 0) {
                // Written back since its last dirtying.
                self.dirty_files.remove(&id);
            }
        }
        let mut cache_budget = MAX_CACHE_STATES;
        let mut cache_states = HashMap::with_capacity(files.len().min(MAX_CACHE_STATES));
        for f in files.iter_mut() {
            let id = (f.major, f.minor, f.ino);
            if id == OTHER_FILES {
                continue;
            }
            f.path = self.paths.get(&id).cloned();
            if f.path.is_none() {
                f.label = self.sysfs.label(&self.sys, mounts, id).clone();
            }
            if cache_budget == 0 {
                continue;
            }
            // The last state while its read is not due (see CACHE_STATE_PACE).
            if let Some((due, last)) = self.cache_states.remove(&id).filter(|(due, _)| now < *due) {
                f.cache = last.clone();
                cache_states.insert(id, (due, last));
                continue;
            }
            let page = self.page_size;
            // Not while it may hold dirty pages: the close of our read-only descriptor would
            // write them back (ext4's auto_da_alloc after a truncation to 0, xfs's flush on
            // release after one), changing what is observed. Its state is unknown meanwhile.
            if may_hold_dirty_pages(f, page) || self.dirty_files.contains(&id) {
                f.cache = None;
                continue;
            }
            // Read on the file found to check its path (reopened through its descriptor); a path
            // found this sample by the fallbacks (from a process's open file) is looked up as
            // safely first.
            let started = Instant::now();
            let looked_up;
            let file = match self.checked.get(&id) {
                Some(c) => Some(&c.file),
                None => {
                    let path = f.path.as_deref().filter(|p| !p.ends_with(" (deleted)"));
                    looked_up = path.and_then(|p| self.opener.lookup(Path::new(p), id).ok());
                    looked_up.as_ref()
                }
            };
            f.cache = file.and_then(|i| {
                let opened = i.open().ok()?;
                super::file_cache::cache_state_of(&opened, i.meta.size, page)
            });
            let took = started.elapsed();
            let wait = (took * CACHE_STATE_PACE).max(crate::util::SLOW_REFRESH);
            cache_states.insert(id, (now + wait, f.cache.clone()));
            cache_budget -= usize::from(f.cache.is_some());
        }
        self.cache_states = cache_states;
        // Closed now; what fstat said stays for the extent maps (`checked_meta`).
        self.checked_meta.clear();
        self.checked_meta.extend(self.checked.drain().map(|(id, c)| (id, c.meta)));
    }

    /// Whether the file may hold dirty pages, as far as the samples tell (see `dirty_files`):
    /// not to be opened.
    pub fn may_be_dirty(&self, f: &FileIoSample) -> bool {
        may_hold_dirty_pages(f, self.page_size) || self.dirty_files.contains(&(f.major, f.minor, f.ino))
    }

    /// What `fstat` said this sample of the files whose paths were checked (by their open file).
    pub fn checked_meta(&self) -> &HashMap<FileId, FileMeta> {
        &self.checked_meta
    }
}

impl FileResolver {
    /// Whether a scan of every process fits the budget, after adding the share of the time passed.
    fn scan_allowed(&mut self, now: Instant) -> bool {
        let passed = self.budget_at.map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        self.budget_at = Some(now);
        self.scan_budget = (self.scan_budget + passed.mul_f64(SCAN_CPU_SHARE)).min(SCAN_BUDGET_MAX);
        !self.scan_budget.is_zero()
    }

    /// Looks through every process's fds (and with `maps`, mappings) for the `unknown` inodes,
    /// paying its time out of the budget.
    fn full_scan(&mut self, unknown: &mut HashSet<FileId>, maps: bool) {
        let started = Instant::now();
        scan_processes(&self.proc, unknown, &mut self.paths, maps);
        unknown.retain(|id| !self.paths.contains_key(id));
        self.scan_budget = self.scan_budget.saturating_sub(started.elapsed());
    }
}

/// Whether the probes saw pages of the file dirtied that they have not seen written back (the
/// writeback of a partial last page counted as a whole page). Closing a descriptor of such a file
/// can start their writeback: ext4 (`auto_da_alloc`, on by default) writes back every dirty page
/// of an inode truncated to 0 at the release of any of its descriptors, a read-only one too
/// (`ext4_release_file` → `ext4_alloc_da_blocks`); xfs flushes on release after a truncation. So
/// ioscope does not open such a file for its cache state (nor, in FileResolver::may_be_dirty,
/// one seen so in an earlier sample and not seen written back since).
pub fn may_hold_dirty_pages(f: &FileIoSample, page_size: u64) -> bool {
    let page = page_size.max(1);
    let written = f.writeback_pages.max(f.fs_writeback_bytes.div_ceil(page));
    f.dirtied_pages > written
}

/// Most files remembered as possibly dirty (beyond it a file's dirty pages are judged by its
/// sample's counters alone).
pub const MAX_DIRTY_FILES: usize = 65_536;

/// Most files [`prefer_at_cutoff`] asks about per call (one map lookup each, ~1 µs): as many as
/// FILE_IO holds, so that a burst's files named are found wherever they are in the tie (the name
/// map's LRU keeps no strict order: with 8,192 a sample had only 128 of its 255 rows named).
pub const MAX_PREFER_PROBES: usize = ioscope_common::files::FILE_MAX_ENTRIES as usize;

/// `items` sorted by `rank` (busiest first), of which the first `keep` get a row: when the files
/// ranked equal to the last one kept go on beyond `keep` (a burst of new files, each read or
/// written alike), moves those `preferred` (a path is known, or the kernel named them) to the front
/// of that group, in their order, asking at most [`MAX_PREFER_PROBES`] of them. Which of equally
/// busy files get a row is otherwise arbitrary (the lowest inodes: in a burst the ones touched
/// first, whose kernel names a burst of more than the name map's 16,384 files has pushed out
/// again by the time of the sample: whole samples of rows without a path).
pub fn prefer_at_cutoff<T, R: PartialEq>(
    items: &mut Vec<T>,
    keep: usize,
    rank: impl Fn(&T) -> R,
    mut preferred: impl FnMut(&T) -> bool,
) {
    if keep == 0 || items.len() <= keep {
        return;
    }
    let at = rank(&items[keep - 1]);
    let lo = items[..keep].iter().rposition(|t| rank(t) != at).map_or(0, |i| i + 1);
    let hi = keep + items[keep..].iter().position(|t| rank(t) != at).unwrap_or(items.len() - keep);
    if hi <= keep {
        return;
    }
    let slots = keep - lo;
    let mut group = items.split_off(lo);
    let after = group.split_off(hi - lo);
    let (mut picked, mut others) = (Vec::with_capacity(slots), Vec::with_capacity(group.len()));
    let mut probes = 0;
    for t in group {
        let ask = picked.len() < slots && probes < MAX_PREFER_PROBES;
        probes += usize::from(ask);
        if ask && preferred(&t) {
            picked.push(t);
        } else {
            others.push(t);
        }
    }
    items.extend(picked);
    items.extend(others);
    items.extend(after);
}

/// The block-device pseudo-filesystem (bdev) numbers each device's inode with the device's
/// kernel dev_t: its pages are what filesystems read and write through the device itself
/// (metadata, journal). Labelled so when `dev` is neither a block device nor a mounted filesystem
/// (the bdev filesystem itself), or when the inode number is the dev_t of the very device (or
/// disk) `dev` is on: the writeback events name only the disk, so a block device's own dirty
/// pages arrive keyed by its disk. Also the metadata a filesystem caches in an inode of its own
/// numbered 1, never a file's: ext2/3/4's block allocator reads its buddy bitmaps into one
/// (`EXT4_BAD_INO`, at every allocation that scans a group), btrfs its metadata btree
/// (`BTRFS_BTREE_INODE_OBJECTID`); looked for as a file, it set off a walk of the whole mount.
/// Only for inodes no path was found for.
fn block_device_cache_label(sys: &Path, mounts: &[Mount], id: FileId) -> Option<String> {
    let (major, minor, ino) = id;
    let fstype = mounts.iter().find(|m| m.dev == (major, minor)).map(|m| m.fstype.as_str());
    if ino == 1 && matches!(fstype, Some("ext2" | "ext3" | "ext4" | "btrfs")) {
        return Some(format!("[{} metadata]", device_name(sys, (major, minor))));
    }
    let dev = u32::try_from(ino).ok()?;
    let (a, b) = kernel_dev_major_minor(dev);
    let on_bdev_fs = !mounts.iter().any(|m| m.dev == (major, minor))
        && !sys.join(format!("dev/block/{major}:{minor}")).exists();
    let own = (a, b) == (major, minor) || bdi_of(sys, (major, minor)) == Some((a, b));
    if !on_bdev_fs && !own {
        return None;
    }
    let block = sys.join(format!("dev/block/{a}:{b}"));
    block.exists().then(|| format!("[{} metadata/journal]", device_name(sys, (a, b))))
}

/// Whether `path` names the regular file `id` right now, looked up without following any link
/// (super::safe_open).
pub fn names(opener: &mut Opener, path: &str, id: FileId) -> bool {
    opener.names(Path::new(path), id)
}

/// Looks for `wanted` inodes among the files running processes have mapped or open.
/// With `maps`, their mappings too.
fn scan_processes(proc: &Path, wanted: &HashSet<FileId>, found: &mut HashMap<FileId, String>, maps: bool) {
    let Ok(dir) = std::fs::read_dir(proc) else { return };
    let pids = dir
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .map(|e| e.path());
    scan_process_dirs(pids, wanted, found, MAX_FDS_PER_SCAN, maps);
}

/// The backing files of the loop devices (`/sys/block/loopN/loop/backing_file`) that still name
/// one of the `wanted` files (looked up safely); a deleted one is left out (its old path names
/// nothing).
fn loop_backing_files(sys: &Path, wanted: &HashSet<FileId>, opener: &mut Opener) -> Vec<(FileId, String)> {
    let Ok(dir) = std::fs::read_dir(sys.join("block")) else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("loop/backing_file")).ok())
        .filter_map(|text| {
            let path = text.trim_end_matches('\n').to_string();
            let id = wanted.iter().find(|&&id| opener.names(Path::new(&path), id))?;
            Some((*id, path))
        })
        .collect()
}

/// Looks for `wanted` inodes among the open files (and with `maps`, the mappings) of the given
/// /proc/PID directories, stat-ing at most `budget` fds.
pub fn scan_process_dirs(
    pid_dirs: impl Iterator<Item = PathBuf>,
    wanted: &HashSet<FileId>,
    found: &mut HashMap<FileId, String>,
    mut budget: usize,
    maps: bool,
) {
    for pid_dir in pid_dirs {
        if budget == 0 || wanted.iter().all(|id| found.contains_key(id)) {
            return;
        }
        if let Some(maps) = maps.then(|| std::fs::read_to_string(pid_dir.join("maps")).ok()).flatten() {
            for (id, path) in maps_files(&maps) {
                if wanted.contains(&id) {
                    found.entry(id).or_insert(path);
                }
            }
        }
        let Ok(fds) = std::fs::read_dir(pid_dir.join("fd")) else { continue };
        for fd in fds.flatten() {
            if budget == 0 {
                return;
            }
            budget -= 1;
            let Ok(m) = std::fs::metadata(fd.path()) else { continue };
            if !m.is_file() {
                continue;
            }
            let id = (libc::major(m.dev()), libc::minor(m.dev()), m.ino());
            if !wanted.contains(&id) || found.contains_key(&id) {
                continue;
            }
            if let Ok(target) = std::fs::read_link(fd.path()) {
                found.insert(id, target.to_string_lossy().into_owned());
            }
        }
    }
}

/// The file-backed mappings of a /proc/PID/maps text: ((major, minor, inode), path).
pub fn maps_files(text: &str) -> Vec<(FileId, String)> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.splitn(6, ' ');
            let (_, _, _, dev, ino) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
            let path = f.next()?.trim_start();
            if !path.starts_with('/') {
                return None;
            }
            let ino: u64 = ino.parse().ok().filter(|&i| i != 0)?;
            let (a, b) = dev.split_once(':')?;
            let id = (u32::from_str_radix(a, 16).ok()?, u32::from_str_radix(b, 16).ok()?, ino);
            Some((id, path.to_string()))
        })
        .collect()
}

/// Walks the tree under `root` (a mount point; not crossing into other filesystems, following no
/// link) looking for `wanted` inode numbers, reading at most `budget` directory entries, pausing
/// `pause` after every `pace_entries`; stops with what it found when `cancel` is set.
fn walk_mount(
    root: &Path,
    wanted: &HashSet<u64>,
    mut budget: usize,
    (pace_entries, pause): (usize, Duration),
    cancel: &std::sync::atomic::AtomicBool,
) -> Vec<(u64, String)> {
    let mut found = Vec::new();
    // Directories still to read, relative to `root`.
    let mut stack = vec![PathBuf::new()];
    let mut seen = 0usize;
    while let Some(rel) = stack.pop() {
        let Ok((_dir, entries)) = read_dir_beneath(root, &rel) else { continue };
        for e in entries.flatten() {
            if budget == 0 || found.len() == wanted.len() || cancel.load(std::sync::atomic::Ordering::Acquire)
            {
                return found;
            }
            budget -= 1;
            seen += 1;
            if seen.is_multiple_of(pace_entries) {
                std::thread::sleep(pause);
            }
            let name = rel.join(e.file_name());
            if wanted.contains(&e.ino()) {
                found.push((e.ino(), root.join(&name).to_string_lossy().into_owned()));
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(name);
            }
        }
    }
    found
}

/// The entries of `rel` under the mount point `root`, looked up afresh from it without following
/// any link or entering another mount (super::safe_open; the mount is not held open between
/// directories), read through the descriptor found (returned with them: their types may be
/// `lstat`-ed through it).
fn read_dir_beneath(root: &Path, rel: &Path) -> std::io::Result<(std::os::fd::OwnedFd, std::fs::ReadDir)> {
    use std::os::fd::{AsFd, AsRawFd};
    let mount = super::safe_open::open_dir_nofollow(root, libc::O_PATH)?;
    let dir = super::safe_open::resolve_beneath(mount.as_fd(), rel, libc::O_RDONLY | libc::O_DIRECTORY)?;
    let entries = std::fs::read_dir(format!("/proc/self/fd/{}", dir.as_raw_fd()))?;
    Ok((dir, entries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioscope_common::files::FileKey;
    use std::io::Write as _;

    #[test]
    fn a_file_with_pages_dirtied_and_not_written_back_is_not_opened() {
        let f = |dirtied, wb_pages, fs_bytes| FileIoSample {
            dirtied_pages: dirtied,
            writeback_pages: wb_pages,
            fs_writeback_bytes: fs_bytes,
            ..Default::default()
        };
        assert!(!may_hold_dirty_pages(&f(0, 0, 0), 4096), "never dirtied");
        assert!(may_hold_dirty_pages(&f(16_384, 0, 0), 4096), "64 MiB dirtied, none written back");
        assert!(may_hold_dirty_pages(&f(16_384, 100, 400 * 4096), 4096), "some written back");
        assert!(!may_hold_dirty_pages(&f(16_384, 0, 16_384 * 4096), 4096), "fsync'd (ext4, iomap)");
        assert!(!may_hold_dirty_pages(&f(16_384, 16_384, 0), 4096), "the flusher wrote it");
        // iomap counts a folio up to EOF: a 100-byte file's one page, written back.
        assert!(!may_hold_dirty_pages(&f(1, 0, 100), 4096));
    }

    fn raw(dev: u32, kind: u32, ino: u64, writeback: u64, inserted: u64) -> RawFile {
        RawFile {
            key: FileKey { dev, kind, ino },
            writeback_pages: writeback,
            inserted_pages: inserted,
            ..Default::default()
        }
    }

    /// A burst's files all as busy: the rows go to those with a known path among the tied ones,
    /// in their order; the busier ones before them and the rest keep their places.
    #[test]
    fn equally_busy_files_with_a_path_get_the_rows_first() {
        let ranked = |v: &[(u32, u64)]| v.iter().map(|x| x.0).collect::<Vec<_>>();
        let items = vec![(0, 9), (1, 5), (2, 5), (3, 5), (4, 5), (5, 5), (6, 1)];
        let mut v = items.clone();
        prefer_at_cutoff(&mut v, 3, |x| x.1, |x| x.0 >= 4);
        assert_eq!(ranked(&v), [0, 4, 5, 1, 2, 3, 6]);
        // Fewer with a path than rows: those first, then the others in order.
        let mut v = items.clone();
        prefer_at_cutoff(&mut v, 4, |x| x.1, |x| x.0 == 3);
        assert_eq!(ranked(&v), [0, 3, 1, 2, 4, 5, 6]);
        // Nothing tied across the cut, or everything kept: unchanged, nothing asked.
        let mut v = vec![(0, 9), (1, 5), (2, 5), (3, 1), (4, 1)];
        prefer_at_cutoff(&mut v, 3, |x| x.1, |_| panic!("asked"));
        assert_eq!(ranked(&v), [0, 1, 2, 3, 4]);
        prefer_at_cutoff(&mut v, 5, |x| x.1, |_| panic!("asked"));
        // At most MAX_PREFER_PROBES asked: the ones beyond keep their places.
        let mut v: Vec<(u32, u64)> = (0..2 * MAX_PREFER_PROBES as u32).map(|i| (i, 1)).collect();
        let mut asked = 0;
        prefer_at_cutoff(
            &mut v,
            2,
            |x| x.1,
            |x| {
                asked += 1;
                x.0 as usize >= MAX_PREFER_PROBES
            },
        );
        assert_eq!((asked, v[0].0, v[1].0), (MAX_PREFER_PROBES, 0, 1));
    }

    #[test]
    fn writeback_on_a_disk_goes_to_the_filesystem_mounted_from_it() {
        let loop0 = 7 << 20;
        let merged =
            merge_bdi(vec![raw(loop0, KEY_SB_DEV, 12, 0, 5), raw(loop0, KEY_BDI_DEV, 12, 40, 0)], |d| {
                if d == (7, 0) {
                    vec![(7, 0)]
                } else {
                    vec![]
                }
            });
        assert_eq!(merged.len(), 1);
        let f = &merged[&(7, 0, 12)];
        assert_eq!((f.inserted_pages, f.writeback_pages), (5, 40));
    }

    #[test]
    fn partitions_of_one_disk_are_told_apart_by_the_inode_or_left_on_the_disk() {
        let sda = 8 << 20;
        let sda2 = 8 << 20 | 2;
        let parts = |d: (u32, u32)| if d == (8, 0) { vec![(8, 1), (8, 2)] } else { vec![] };
        let merged = merge_bdi(
            vec![
                raw(sda2, KEY_SB_DEV, 99, 0, 1),
                raw(sda, KEY_BDI_DEV, 99, 7, 0),
                raw(sda, KEY_BDI_DEV, 5, 3, 0),
            ],
            parts,
        );
        assert_eq!(merged[&(8, 2, 99)].writeback_pages, 7);
        // Inode 5 is known on neither partition: it stays on the disk, never guessed.
        assert_eq!(merged[&(8, 0, 5)].writeback_pages, 3);
    }

    #[test]
    fn block_device_caches_are_labelled_and_real_inodes_are_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("dev/block/7:0")).unwrap();
        let mount = |dev, fstype: &str| Mount {
            dev,
            root: "/".into(),
            mount_point: "/mnt".into(),
            bdi: Some(dev),
            fstype: fstype.into(),
        };
        let mounts = vec![mount((7, 0), "ext4"), mount((7, 1), "xfs")];
        let label = |id| block_device_cache_label(dir.path(), &mounts, id);
        // ext4's buddy cache: inode 1 of an ext4 mount; on xfs inode 1 is not special.
        assert_eq!(label((7, 0, 1)).as_deref(), Some("[7:0 metadata]"));
        assert_eq!(label((7, 1, 1)), None);
        // On the bdev filesystem (0:3): the inode is the device's dev_t.
        assert_eq!(label((0, 3, 7 << 20)).as_deref(), Some("[7:0 metadata/journal]"));
        assert_eq!(label((0, 3, 12)), None);
        // Keyed by the disk (writeback): only the disk's own dev_t is its cache.
        assert_eq!(label((7, 0, 7 << 20)).as_deref(), Some("[7:0 metadata/journal]"));
        assert_eq!(label((7, 0, 12)), None);
    }

    #[test]
    fn a_block_devices_own_inode_is_labelled_and_never_looked_for_in_processes() {
        let proc = tempfile::tempdir().unwrap();
        let sys = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(sys.path().join("dev/block/7:0")).unwrap();
        let mut r = FileResolver::new(proc.path(), sys.path());
        // Metadata read through loop0's bdev inode (0:3, numbered 7:0's dev_t), and its pages
        // written back keyed by the disk.
        let t = Instant::now();
        let out =
            r.resolve_at(vec![raw(3, KEY_SB_DEV, 7 << 20, 0, 4), raw(7 << 20, KEY_SB_DEV, 7 << 20, 0, 4)], t);
        assert_eq!(out[0].label.as_deref(), Some("[7:0 metadata/journal]"));
        assert_eq!(out[1].label.as_deref(), Some("[7:0 metadata/journal]"));
        assert!(r.tried.is_empty(), "no scan of the processes for them: {:?}", r.tried);
        // A real inode on an unknown filesystem is still looked for.
        let _ = r.resolve_at(vec![raw(3, KEY_SB_DEV, 12, 0, 4)], Instant::now());
        assert_eq!(r.tried.len(), 1);
    }

    #[test]
    fn loop_backing_files_come_from_sysfs_and_must_still_exist() {
        let sys = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        let image = data.path().join("disk.img");
        std::fs::write(&image, b"x").unwrap();
        let m = std::fs::metadata(&image).unwrap();
        for (dev, backing) in [("loop0", image.to_str().unwrap()), ("loop1", "/nonexistent/gone.img")] {
            let d = sys.path().join("block").join(dev).join("loop");
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("backing_file"), format!("{backing}\n")).unwrap();
        }
        std::fs::create_dir_all(sys.path().join("block/vda")).unwrap();
        let id = (libc::major(m.dev()), libc::minor(m.dev()), m.ino());
        let found = loop_backing_files(sys.path(), &HashSet::from([id]), &mut Opener::default());
        assert_eq!(found, vec![(id, image.to_str().unwrap().to_string())]);
    }

    #[test]
    fn scans_of_every_process_get_half_a_percent_of_the_time() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = FileResolver::new(dir.path(), dir.path());
        let t0 = Instant::now();
        assert!(r.scan_allowed(t0), "a fresh resolver may scan at once");
        // A scan that took 100 ms (100,000 open files) overdraws the budget...
        r.scan_budget = Duration::ZERO;
        assert!(!r.scan_allowed(t0));
        // ...which refills by 0.5 % of the time passed: 5 ms per second.
        assert!(r.scan_allowed(t0 + Duration::from_secs(1)));
        assert_eq!(r.scan_budget, Duration::from_millis(5));
        // Capped: a long quiet spell allows a burst of at most 0.1 s.
        assert!(r.scan_allowed(t0 + Duration::from_secs(3600)));
        assert_eq!(r.scan_budget, SCAN_BUDGET_MAX);
    }

    #[test]
    fn mountinfo_and_maps_lines_parse() {
        let mi = "22 1 7:0 / /mnt/a\\040b rw,relatime shared:1 - ext4 /dev/loop0 rw\n\
                  23 1 7:0 /sub\\040dir /srv rw,relatime shared:1 master:2 - ext4 /dev/loop0 rw\n";
        assert_eq!(
            parse_mountinfo(mi),
            vec![
                MountLine {
                    dev: (7, 0),
                    root: "/".into(),
                    mount_point: "/mnt/a b".into(),
                    fstype: "ext4".into()
                },
                MountLine {
                    dev: (7, 0),
                    root: "/sub dir".into(),
                    mount_point: "/srv".into(),
                    fstype: "ext4".into()
                }
            ]
        );
        let maps = "7f00-7f01 r--p 00000000 fd:01 1234    /usr/lib/libc.so.6\n\
                    7f01-7f02 rw-p 00000000 00:00 0 \n\
                    7f02-7f03 r--p 00000000 07:00 12   /mnt/x/data (deleted)\n\
                    7f03-7f04 r--s 00000000 07:00 13 /mnt/db/col file.bin\n";
        assert_eq!(
            maps_files(maps),
            vec![
                ((0xfd, 1, 1234), "/usr/lib/libc.so.6".into()),
                ((7, 0, 12), "/mnt/x/data (deleted)".into()),
                ((7, 0, 13), "/mnt/db/col file.bin".into())
            ]
        );
    }

    #[test]
    fn a_sample_holds_the_files_active_in_its_interval_counting_from_their_return() {
        let dir = std::env::temp_dir();
        let mut r = FileResolver::new(&dir.join("no-proc"), &dir.join("no-sys"));
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        // The rows are what the programs counted since the last drain.
        let f = |n| vec![raw(7 << 20, KEY_SB_DEV, 12, 0, n)];
        assert_eq!(r.resolve_at(f(10), t0)[0].inserted_pages, 10);
        // Active again in the next interval: its counters continue.
        assert_eq!(r.resolve_at(f(5), t0 + s)[0].inserted_pages, 15);
        // Idle for one interval: gone from the sample.
        assert!(r.resolve_at(Vec::new(), t0 + 2 * s).is_empty());
        assert!(r.resolve_at(vec![raw(7 << 20, KEY_SB_DEV, 12, 0, 0)], t0 + 3 * s).is_empty());
        // Active again: what it did since it came back, not its whole history.
        let back = r.resolve_at(f(4), t0 + 4 * s);
        assert_eq!(back[0].inserted_pages, 4);
        assert_eq!((back[0].device.as_str(), back[0].path.as_deref()), ("7:0", None));
    }

    /// A file another view lists without a path (nobody holds it, no kernel name) is found by
    /// the background walk of its mount, and known_path has it from then on.
    #[test]
    fn a_file_another_view_asks_for_is_found_by_the_walk() {
        let proc = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(data.path().join("a/b")).unwrap();
        let file = data.path().join("a/b/pending");
        std::fs::write(&file, b"x").unwrap();
        let m = std::fs::metadata(&file).unwrap();
        let (major, minor) = (libc::major(m.dev()), libc::minor(m.dev()));
        let dev = (major << ioscope_common::KERNEL_MINOR_BITS) | minor;
        std::fs::create_dir_all(proc.path().join("self")).unwrap();
        let line = format!("1 0 {major}:{minor} / {} rw - ext4 x rw\n", data.path().display());
        std::fs::write(proc.path().join("self/mountinfo"), line).unwrap();
        let mut r = FileResolver::new(proc.path(), &data.path().join("no-sys"));
        assert_eq!(r.known_path(dev, m.ino()), None);
        let t0 = Instant::now();
        let mut found = None;
        for i in 0..100 {
            r.clear_wanted();
            r.look_for(dev, m.ino());
            r.resolve_at(Vec::new(), t0 + Duration::from_millis(i * 50));
            found = r.known_path(dev, m.ino());
            if found.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(found.as_deref(), file.to_str());
    }

    /// A walk stops as soon as no view wants any of its inodes: cancelled, it returns what it
    /// found so far (nothing here) instead of reading the rest of the mount.
    #[test]
    fn a_walk_nobody_wants_any_more_stops() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let data = tempfile::tempdir().unwrap();
        let file = data.path().join("wanted");
        std::fs::write(&file, b"x").unwrap();
        let ino = std::fs::metadata(&file).unwrap().ino();
        let wanted = HashSet::from([ino]);
        let pace = (1000, Duration::ZERO);
        let found = walk_mount(data.path(), &wanted, 100, pace, &AtomicBool::new(false));
        assert_eq!(found, [(ino, file.to_string_lossy().into_owned())]);
        assert!(walk_mount(data.path(), &wanted, 100, pace, &AtomicBool::new(true)).is_empty());
        // The resolver's side: the flag is set once the walk's inodes are all named or unlisted.
        let mut w = Walker::start();
        w.busy.store(true, Ordering::Release);
        w.current = Some(((7, 1), HashSet::from([5, 6])));
        w.cancel_unless_wanted(&HashSet::from([(7, 1, 6), (8, 0, 5)]));
        assert!(!w.cancel.load(Ordering::Acquire), "inode 6 is still wanted");
        w.cancel_unless_wanted(&HashSet::from([(8, 0, 5)]));
        assert!(w.cancel.load(Ordering::Acquire), "another device's inode 5 is not the walk's");
        assert!(w.current.is_none());
    }

    #[test]
    fn a_file_back_after_an_idle_interval_is_looked_up_again_at_once() {
        let proc = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        let file = data.path().join("cache16");
        std::fs::write(&file, b"x").unwrap();
        let m = std::fs::metadata(&file).unwrap();
        let dev = (libc::major(m.dev()) << ioscope_common::KERNEL_MINOR_BITS) | libc::minor(m.dev());
        let io = || vec![raw(dev, KEY_SB_DEV, m.ino(), 0, 4)];
        let mut r = FileResolver::new(proc.path(), &data.path().join("no-sys"));
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        // Written while nobody held it (the writer has exited): looked for, not found.
        assert_eq!(r.resolve_at(io(), t0)[0].path, None);
        // Idle, then opened by a process that reads it: named in the interval it comes back in,
        // not WALK_EVERY (30 s) after the first try.
        assert!(r.resolve_at(Vec::new(), t0 + s).is_empty());
        let fd = proc.path().join("4242/fd");
        std::fs::create_dir_all(&fd).unwrap();
        std::os::unix::fs::symlink(&file, fd.join("3")).unwrap();
        let back = r.resolve_at(io(), t0 + 2 * s);
        assert_eq!(back[0].path.as_deref(), file.to_str());
    }

    /// A file's cache state is read again only once what its last read took, times
    /// CACHE_STATE_PACE, and at least SLOW_REFRESH have passed: in between the sample carries
    /// the last state.
    #[test]
    fn a_files_cache_state_is_read_again_only_when_due() {
        let proc = tempfile::tempdir().unwrap();
        let data = tempfile::tempdir().unwrap();
        let file = data.path().join("growing");
        std::fs::write(&file, vec![1u8; 4096]).unwrap();
        let m = std::fs::metadata(&file).unwrap();
        let dev = (libc::major(m.dev()) << ioscope_common::KERNEL_MINOR_BITS) | libc::minor(m.dev());
        let io = || vec![raw(dev, KEY_SB_DEV, m.ino(), 0, 1)];
        let fd = proc.path().join("4242/fd");
        std::fs::create_dir_all(&fd).unwrap();
        std::os::unix::fs::symlink(&file, fd.join("3")).unwrap();
        let mut r = FileResolver::new(proc.path(), &data.path().join("no-sys"));
        let size = |f: &FileIoSample| f.cache.as_ref().map(|c| c.size_bytes);
        let t0 = Instant::now();
        let first = r.resolve_at(io(), t0);
        assert_eq!(first[0].path.as_deref(), file.to_str());
        assert_eq!(size(&first[0]), Some(4096));
        std::fs::OpenOptions::new().append(true).open(&file).unwrap().write_all(&[2u8; 4096]).unwrap();
        // Not due a nanosecond later (a read takes more than a hundredth of that): the last state.
        let soon = r.resolve_at(io(), t0 + Duration::from_nanos(1));
        assert_eq!(size(&soon[0]), Some(4096));
        // Nor a tenth of a second later, as the next sample at `--interval 0.1` would ask, though
        // 100 times a small file's read (microseconds) has long passed.
        let next = r.resolve_at(io(), t0 + Duration::from_millis(100));
        assert_eq!(size(&next[0]), Some(4096));
        // Due ten seconds later (unless a read took 0.1 s): read again.
        let later = r.resolve_at(io(), t0 + Duration::from_secs(10));
        assert_eq!(size(&later[0]), Some(8192));
    }

    #[test]
    fn beyond_the_budget_the_quietest_files_are_one_row() {
        let dir = std::env::temp_dir();
        let mut r = FileResolver::new(&dir.join("no-proc"), &dir.join("no-sys"));
        let t0 = Instant::now();
        let n = MAX_SAMPLE_FILES as u64 + 476;
        let burst: Vec<RawFile> = (1..=n).map(|i| raw(7 << 20, KEY_SB_DEV, i, 0, i)).collect();
        let rows = r.resolve_at(burst, t0);
        assert_eq!(rows.len(), MAX_SAMPLE_FILES + 1);
        // The busiest files have rows of their own; the 476 quietest (1..=476 pages) are one.
        assert!(rows.iter().all(|f| f.ino == 0 || f.ino > 476), "{:?}", rows.iter().map(|f| f.ino).min());
        let other = rows.iter().find(|f| f.label.is_some()).unwrap();
        assert_eq!(other.label.as_deref(), Some("[476 other files]"));
        assert_eq!(other.inserted_pages, 476 * 477 / 2);
        assert_eq!((other.major, other.minor, other.ino), OTHER_FILES);
        // Their sum continues while some files stay beyond the budget.
        let again: Vec<RawFile> = (1..=n).map(|i| raw(7 << 20, KEY_SB_DEV, i, 0, 1000 + i)).collect();
        let rows = r.resolve_at(again, t0 + Duration::from_secs(1));
        let other = rows.iter().find(|f| f.label.is_some()).unwrap();
        assert_eq!(other.inserted_pages, 476 * 477 / 2 + 476 * 1000 + 476 * 477 / 2);
    }
}
