//! Block requests → files (src/model/README.md, "Block requests to files"). The kernel sends a rate-limited
//! sample of completed requests (disk, sector, size, rwbs flags, submitter; src/bpf/block_files.rs);
//! each is matched against the extent maps of the files the files pane knows (FIEMAP on the path
//! the resolver found, plus the partition's start sector from sysfs: src/bpf/resolve/extents.rs), in
//! this order:
//!
//! 1. inside the filesystem's journal (ext4's journal inode as its superblock records it, xfs's
//!    internal log) → `journal`; on a disk where no journal could be placed, a request
//!    submitted by a `jbd2/` thread → `journal`;
//! 2. rwbs `M` (the filesystem marked it metadata) → `metadata`;
//! 3. the sectors each known file's extents cover → that file;
//! 4. the rest → `unknown` (files not known, delalloc not yet placed, other filesystems' data,
//!    metadata written back without the `M` flag).
//!
//! Extent maps are cached per file and read again when the file's size or mtime changed, or
//! when its last map had extents without a place yet (delayed allocation), at most
//! [`MAX_FIEMAP_PER_READ`] FIEMAP calls per sample for at most [`MAX_MAPPED_FILES`] files.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ioscope_common::block::{RWBS_META, RWBS_READ, RWBS_WRITE};
use ioscope_common::block_files::RqEvent;

use super::extents::{disk_ranges, fiemap, journal_ranges, mount_sources, placement, Placement};
use super::mountinfo::MountInfo;
use super::safe_open::{open_block_device, Opener};
use super::types::{FileId, FileMeta};
use crate::sample::{BlockFilesSample, BlockTargetCounters, FileIoSample};
use ioscope_common::kernel_dev_major_minor;

/// Most requests per second sent to userspace, all CPUs together: mapping is a sample of the
/// requests above this rate (the probe-health view shows how many were not sent).
pub const RATE_LIMIT_S: u64 = 4000;

/// Requests sent and not sent, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingCounts {
    pub emitted: u64,
    pub rate_dropped: u64,
    pub ring_dropped: u64,
}

/// Files with an extent map at once (the least recently active go first).
pub const MAX_MAPPED_FILES: usize = 1024;
/// FIEMAP calls per sample.
pub const MAX_FIEMAP_PER_READ: usize = 128;
/// Extents read per file; a more fragmented file is mapped in part.
pub const MAX_EXTENTS_PER_FILE: usize = 16384;
/// A map with unplaced (delayed) extents is read again at most this often while the file is
/// otherwise unchanged.
pub const UNSETTLED_REFRESH: Duration = Duration::from_millis(500);
/// How long a disk's name read from sysfs is trusted (a reused major:minor is seen again after).
pub const DISK_NAME_FRESH: Duration = Duration::from_secs(30);
/// A file's map is dropped when the file was not active for this long.
pub const FORGET_MAP: Duration = Duration::from_secs(30);
/// Index entries added and removed one by one at most, for one file's new map or one
/// refresh's forgotten maps; beyond, the index is rebuilt whole.
const INDEX_EDITS_MAX: usize = 64;
/// Mapped requests kept for inspection (tests, debugging).
pub const RECENT_REQUESTS: usize = 4096;

pub const LABEL_METADATA: &str = "metadata";
pub const LABEL_JOURNAL: &str = "journal";
pub const LABEL_UNKNOWN: &str = "unknown";

/// What some sectors of a request belong to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    File(FileId),
    Label(&'static str),
}

/// One request as mapped (kept in [`BlockFileMapper::recent`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MappedRequest {
    /// The disk (major, minor) and the request's first sector on it.
    pub disk: (u32, u32),
    pub sector: u64,
    pub nr_sectors: u32,
    pub rwbs: u32,
    pub comm: String,
    /// Where its bytes went; the bytes add up to the request's.
    pub parts: Vec<(Target, u64)>,
}

/// (mount id, device) of a mounted filesystem.
type MountKey = (u64, (u32, u32));
/// Sectors [start, end).
pub type SectorRange = (u64, u64);
/// Sectors [start, end) of a file's extent on the disk.
pub type ExtentOf = (u64, u64, FileId);

/// A file's extent map.
#[derive(Clone, Debug)]
struct Mapped {
    path: String,
    size: u64,
    mtime_ns: i128,
    disk: (u32, u32),
    ranges: Vec<(u64, u64)>,
    unsettled: bool,
    refreshed: Instant,
    wanted: Instant,
}

#[derive(Clone, Debug, Default)]
struct Counts {
    read_requests: u64,
    read_bytes: u64,
    write_requests: u64,
    write_bytes: u64,
    path: Option<String>,
    changed: Option<Instant>,
    /// The disk's name, read from sysfs when the row was made (not at every sample).
    disk: String,
}

/// Extent maps, journal places and the cumulative counts per (disk, target). See the module docs.
pub struct BlockFileMapper {
    sys: PathBuf,
    files: HashMap<FileId, Mapped>,
    /// Per disk: (start, end, file) sorted by start; rebuilt when a map changed.
    index: HashMap<(u32, u32), Vec<ExtentOf>>,
    index_dirty: bool,
    /// When maps of files no longer active were last looked for.
    last_forget: Option<Instant>,
    /// Per mount (id, device): where its device sits and its journal's ranges on the device
    /// (empty when unknown). By mount id: a loop device reused for another filesystem is new.
    journals: HashMap<MountKey, (Placement, Vec<SectorRange>)>,
    /// The mount table, and per disk its journals' ranges as of the table's generation: read
    /// again when a filesystem is mounted or unmounted, not for every sample with requests.
    mountinfo: MountInfo,
    journal_ranges: (u64, HashMap<(u32, u32), Vec<SectorRange>>),
    /// Each disk's name and when it was read.
    disk_names: HashMap<(u32, u32), (String, Instant)>,
    counts: BTreeMap<((u32, u32), Target), Counts>,
    pub fiemap_errors: u64,
    recent: VecDeque<MappedRequest>,
    /// Files are looked up and opened through it only (super::safe_open).
    opener: Opener,
}

impl Default for BlockFileMapper {
    fn default() -> Self {
        BlockFileMapper::new(Path::new("/sys"), Path::new("/proc"))
    }
}

impl BlockFileMapper {
    pub fn new(sys: &Path, proc: &Path) -> BlockFileMapper {
        BlockFileMapper {
            sys: sys.to_path_buf(),
            files: HashMap::new(),
            index: HashMap::new(),
            index_dirty: false,
            last_forget: None,
            journals: HashMap::new(),
            mountinfo: MountInfo::new(proc),
            journal_ranges: (0, HashMap::new()),
            disk_names: HashMap::new(),
            counts: BTreeMap::new(),
            fiemap_errors: 0,
            recent: VecDeque::new(),
            opener: Opener::default(),
        }
    }

    /// The most recent mapped requests, oldest first.
    pub fn recent(&self) -> impl Iterator<Item = &MappedRequest> {
        self.recent.iter()
    }

    /// Files with a map, and their extents.
    pub fn mapped(&self) -> (u64, u64) {
        (self.files.len() as u64, self.files.values().map(|m| m.ranges.len() as u64).sum())
    }

    /// Brings the extent maps of `files` (the files pane's, with paths) up to date. `checked`:
    /// what the resolver's check of a path found this sample (FileResolver::checked_meta); the
    /// others are looked up here (super::safe_open).
    pub fn refresh(
        &mut self,
        files: &[FileIoSample],
        checked: &HashMap<FileId, FileMeta>,
        may_be_dirty: impl Fn(&FileIoSample) -> bool,
        now: Instant,
    ) {
        let mut budget = MAX_FIEMAP_PER_READ;
        // A device's place in sysfs, looked up once per refresh (a burst maps hundreds of files
        // of one filesystem).
        let mut places: HashMap<(u32, u32), Option<Placement>> = HashMap::new();
        for f in files {
            let Some(path) = f.path.as_deref().filter(|p| !p.ends_with(" (deleted)")) else { continue };
            let id = (f.major, f.minor, f.ino);
            let meta = match checked.get(&id) {
                Some(m) => *m,
                None => match self.opener.lookup(Path::new(path), id) {
                    Ok(found) => found.meta,
                    Err(super::safe_open::Refused::Lookup(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                        continue
                    }
                    Err(_) => FileMeta { size: 0, mtime_ns: 0, is_file: false },
                },
            };
            if !meta.is_file {
                // The path names another inode now: its old map is not this file's.
                self.set_map(id, None);
                continue;
            }
            let mtime_ns = meta.mtime_ns;
            if let Some(m) = self.files.get_mut(&id) {
                m.wanted = now;
                let same = m.size == meta.size && m.mtime_ns == mtime_ns && m.path == path;
                let settle_due = m.unsettled && now.duration_since(m.refreshed) >= UNSETTLED_REFRESH;
                if same && !settle_due {
                    continue;
                }
                // Changed without writeback or direct writes in the interval (a file appended to
                // through the cache, such as ioscope's own --json output): its new data has no
                // place on the disk yet (delayed allocation), and the writeback that places it
                // is counted in the interval whose requests it sends. Mapped again at most every
                // UNSETTLED_REFRESH meanwhile (FIEMAP of a growing file every sample cost more as
                // it grew: ~70 us a sample for a 20 MB output file at --interval 0.1).
                let placed = f.writeback_pages > 0 || f.fs_writeback_bytes > 0 || f.dio_write_bytes > 0;
                if !placed && m.path == path && now.duration_since(m.refreshed) < UNSETTLED_REFRESH {
                    continue;
                }
            }
            // Not opened while it may hold dirty pages (super::files::may_hold_dirty_pages: the
            // close would start their writeback); its unplaced data has no extents yet anyway.
            if may_be_dirty(f) {
                continue;
            }
            if budget == 0 {
                continue;
            }
            budget -= 1;
            let sys = &self.sys;
            let place = *places.entry((id.0, id.1)).or_insert_with(|| placement(sys, (id.0, id.1)));
            self.map_file(id, path, place, meta.size, mtime_ns, now);
        }
        // Maps of files no longer active go (their blocks may be freed and reused meanwhile),
        // looked for once a second (after a burst ~1,000 files have maps for FORGET_MAP, and
        // every sample went through them), or at once past the bound.
        if self.files.len() <= MAX_MAPPED_FILES
            && self.last_forget.is_some_and(|t| now.duration_since(t) < crate::util::SLOW_REFRESH)
        {
            return;
        }
        self.last_forget = Some(now);
        let mut gone: Vec<FileId> = self
            .files
            .iter()
            .filter(|(_, m)| now.duration_since(m.wanted) >= FORGET_MAP)
            .map(|(id, _)| *id)
            .collect();
        if self.files.len() - gone.len() > MAX_MAPPED_FILES {
            let mut by_age: Vec<(Instant, FileId)> = self
                .files
                .iter()
                .filter(|(_, m)| now.duration_since(m.wanted) < FORGET_MAP)
                .map(|(id, m)| (m.wanted, *id))
                .collect();
            by_age.sort();
            let excess = by_age.len() - MAX_MAPPED_FILES;
            gone.extend(by_age.iter().take(excess).map(|(_, id)| *id));
        }
        if gone.len() > INDEX_EDITS_MAX {
            for id in &gone {
                self.files.remove(id);
            }
            self.index_dirty = true;
        } else {
            for id in gone {
                self.set_map(id, None);
            }
        }
    }

    /// Sets (or, with None, drops) a file's map and keeps the index in step: a map whose
    /// ranges did not change (a growing file's new data has no place until its writeback) leaves
    /// the index as it is; otherwise the file's old ranges are taken out and its new ones put
    /// in by binary search, instead of rebuilding and sorting every file's extents (a file
    /// appended to, such as ioscope's own `--json` output, was remapped every sample at
    /// `-i 0.1`, and the rebuild of ~1,000 files' index cost ~190 us each time). Many ranges
    /// at once mark the whole index for a rebuild.
    fn set_map(&mut self, id: FileId, new: Option<Mapped>) {
        let old = match new {
            Some(m) => self.files.insert(id, m),
            None => self.files.remove(&id),
        };
        if self.index_dirty {
            return;
        }
        let new = self.files.get(&id);
        let same = |a: &Mapped, b: &Mapped| a.disk == b.disk && a.ranges == b.ranges;
        if let (Some(o), Some(n)) = (&old, new) {
            if same(o, n) {
                return;
            }
        }
        let edits = old.as_ref().map_or(0, |m| m.ranges.len()) + new.map_or(0, |m| m.ranges.len());
        if edits > INDEX_EDITS_MAX {
            self.index_dirty = true;
            return;
        }
        if let Some(o) = &old {
            if let Some(v) = self.index.get_mut(&o.disk) {
                for &(s, e) in &o.ranges {
                    if let Ok(i) = v.binary_search(&(s, e, id)) {
                        v.remove(i);
                    }
                }
            }
        }
        if let Some(n) = new {
            let v = self.index.entry(n.disk).or_default();
            for &(s, e) in &n.ranges {
                if let Err(i) = v.binary_search(&(s, e, id)) {
                    v.insert(i, (s, e, id));
                }
            }
        }
    }

    fn map_file(
        &mut self,
        id: FileId,
        path: &str,
        place: Option<Placement>,
        size: u64,
        mtime_ns: i128,
        now: Instant,
    ) {
        let Some(place) = place else { return };
        // Looked up again (the path may have changed since the check) and opened through the
        // descriptor found: `id`'s regular file or nothing.
        let extents = match self.opener.lookup(Path::new(path), id) {
            Ok(found) => found.open().and_then(|f| fiemap(&f, MAX_EXTENTS_PER_FILE)),
            Err(_) => Err(std::io::Error::other("the path does not name the file")),
        };
        match extents {
            Ok(extents) => {
                let (ranges, unsettled) = disk_ranges(&extents, place);
                let mapped = Mapped {
                    path: path.to_string(),
                    size,
                    mtime_ns,
                    disk: place.disk,
                    ranges,
                    unsettled,
                    refreshed: now,
                    wanted: now,
                };
                self.set_map(id, Some(mapped));
            }
            Err(_) => {
                self.fiemap_errors += 1;
                self.set_map(id, None);
            }
        }
    }

    fn rebuild_index(&mut self) {
        if !self.index_dirty {
            return;
        }
        self.index.clear();
        for (id, m) in &self.files {
            let v = self.index.entry(m.disk).or_default();
            v.extend(m.ranges.iter().map(|&(s, e)| (s, e, *id)));
        }
        for v in self.index.values_mut() {
            v.sort_unstable();
        }
        self.index_dirty = false;
    }

    /// The journal ranges on `disk` of every filesystem mounted from it (each filesystem's
    /// superblock read once; the result kept until the mount table changes).
    fn journal_on(&mut self, disk: (u32, u32)) -> Vec<(u64, u64)> {
        self.mountinfo.refresh();
        if self.journal_ranges.0 != self.mountinfo.generation() {
            self.journal_ranges = (self.mountinfo.generation(), HashMap::new());
        }
        if let Some(ranges) = self.journal_ranges.1.get(&disk) {
            return ranges.clone();
        }
        let text = self.mountinfo.text().to_string();
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (mount_id, dev, fstype, source) in mount_sources(&text) {
            if !matches!(fstype.as_str(), "ext4" | "ext3" | "xfs") || !seen.insert(dev) {
                continue;
            }
            let key = (mount_id, dev);
            if !self.journals.contains_key(&key) {
                let Some(place) = placement(&self.sys, dev) else { continue };
                let mut head = vec![0u8; 2048];
                // The mount's source, only if it is the mounted block device itself.
                let ranges = open_block_device(Path::new(&source), dev)
                    .and_then(|mut f| f.read_exact(&mut head))
                    .map(|_| journal_ranges(&head))
                    .unwrap_or_default();
                self.journals.insert(key, (place, ranges));
            }
            let (place, ranges) = &self.journals[&key];
            if place.disk == disk {
                out.extend(ranges.iter().map(|&(s, e)| (s + place.start_sector, e + place.start_sector)));
            }
        }
        self.journal_ranges.1.insert(disk, out.clone());
        out
    }

    /// Maps `events` and adds them to the counts.
    pub fn map(&mut self, events: &[RqEvent], now: Instant) {
        self.rebuild_index();
        let mut journals: HashMap<(u32, u32), Vec<(u64, u64)>> = HashMap::new();
        for e in events.iter() {
            let disk = kernel_dev_major_minor(e.dev);
            if let std::collections::hash_map::Entry::Vacant(slot) = journals.entry(disk) {
                slot.insert(self.journal_on(disk));
            }
        }
        for e in events.iter().filter(|e| e.rwbs & (RWBS_READ | RWBS_WRITE) != 0) {
            let disk = kernel_dev_major_minor(e.dev);
            let journal = journals.get(&disk).map_or(&[][..], |v| v);
            let comm = crate::util::c_string(&e.comm);
            let parts = classify(e, &comm, journal, self.index.get(&disk).map_or(&[][..], |v| v));
            for (t, bytes) in &parts {
                let sys = &self.sys;
                let names = &mut self.disk_names;
                let c = self.counts.entry((disk, t.clone())).or_insert_with(|| {
                    let name = &names.entry(disk).or_insert_with(|| (disk_name(sys, disk), now)).0;
                    Counts { disk: name.clone(), ..Default::default() }
                });
                if e.rwbs & RWBS_READ != 0 {
                    c.read_requests += 1;
                    c.read_bytes += bytes;
                } else if e.rwbs & RWBS_WRITE != 0 {
                    c.write_requests += 1;
                    c.write_bytes += bytes;
                }
                c.changed = Some(now);
                if let Target::File(id) = t {
                    c.path = self.files.get(id).map(|m| m.path.clone());
                }
            }
            if self.recent.len() == RECENT_REQUESTS {
                self.recent.pop_front();
            }
            self.recent.push_back(MappedRequest {
                disk,
                sector: e.sector,
                nr_sectors: e.nr_sectors,
                rwbs: e.rwbs,
                comm,
                parts,
            });
        }
        // A target without mapped bytes in this interval leaves the Sample, like the files view's
        // rows (it counts from 0 if it comes back, so an interval's delta stays right): a sample
        // costs what the interval's requests touched, not every file of the last seconds (after a
        // burst of 5,000 files, cloning and comparing their rows was most of a sample's cost).
        self.counts.retain(|_, c| c.changed == Some(now));
        self.disk_names.retain(|_, (_, read)| now.duration_since(*read) < DISK_NAME_FRESH);
    }

    /// The cumulative counts as Sample rows.
    pub fn targets(&self) -> Vec<BlockTargetCounters> {
        self.counts
            .iter()
            .map(|((disk, t), c)| {
                let (fs, ino, label) = match t {
                    Target::File(id) => ((id.0, id.1), id.2, None),
                    Target::Label(l) => ((0, 0), 0, Some(l.to_string())),
                };
                BlockTargetCounters {
                    major: disk.0,
                    minor: disk.1,
                    disk: c.disk.clone(),
                    fs_major: fs.0,
                    fs_minor: fs.1,
                    ino,
                    path: c.path.clone(),
                    label,
                    read_requests: c.read_requests,
                    read_bytes: c.read_bytes,
                    write_requests: c.write_requests,
                    write_bytes: c.write_bytes,
                }
            })
            .collect()
    }

    /// Everything for the Sample, the kernel's counts included.
    pub fn sample(&self, counts: RingCounts) -> BlockFilesSample {
        let (mapped_files, extents) = self.mapped();
        BlockFilesSample {
            targets: self.targets(),
            emitted: counts.emitted,
            rate_dropped: counts.rate_dropped,
            ring_dropped: counts.ring_dropped,
            rate_limit_s: RATE_LIMIT_S,
            mapped_files,
            extents,
            fiemap_errors: self.fiemap_errors,
        }
    }
}

fn disk_name(sys: &Path, dev: (u32, u32)) -> String {
    std::fs::read_link(sys.join(format!("dev/block/{}:{}", dev.0, dev.1)))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| format!("{}:{}", dev.0, dev.1))
}

/// Where the bytes of one request go (see the module docs for the order). `files` is the disk's
/// extents sorted by start; `journal` its journal ranges.
pub fn classify(e: &RqEvent, comm: &str, journal: &[(u64, u64)], files: &[ExtentOf]) -> Vec<(Target, u64)> {
    let (start, end) = (e.sector, e.sector + u64::from(e.nr_sectors));
    let n = u64::from(e.nr_sectors);
    let overlap = |s: u64, en: u64| en.min(end).saturating_sub(s.max(start));
    // Where the journal is known, only its sectors are journal (jbd2 also writes the superblock).
    let in_journal = if journal.is_empty() {
        if comm.starts_with("jbd2/") {
            n
        } else {
            0
        }
    } else {
        journal.iter().map(|&(s, en)| overlap(s, en)).sum::<u64>().min(n)
    };
    let mut parts: Vec<(Target, u64)> = Vec::new();
    if in_journal > 0 {
        parts.push((Target::Label(LABEL_JOURNAL), in_journal * 512));
    }
    let rest = n - in_journal;
    if rest == 0 {
        return parts;
    }
    if e.rwbs & RWBS_META != 0 {
        parts.push((Target::Label(LABEL_METADATA), rest * 512));
        return parts;
    }
    let mut covered = 0u64;
    // Extents are sorted by start; those starting before `end` may overlap (a preceding long
    // extent too, so the scan starts at the first one that could reach `start`).
    let from = files.partition_point(|&(s, _, _)| s < start).saturating_sub(64);
    for &(s, en, id) in &files[from..] {
        if s >= end {
            break;
        }
        let o = overlap(s, en);
        if o == 0 {
            continue;
        }
        covered += o;
        let b = o * 512;
        match parts.iter_mut().find(|(t, _)| *t == Target::File(id)) {
            Some((_, v)) => *v += b,
            None => parts.push((Target::File(id), b)),
        }
    }
    let covered = covered.min(rest);
    if covered < rest {
        parts.push((Target::Label(LABEL_UNKNOWN), (rest - covered) * 512));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use ioscope_common::block::RWBS_SYNC;

    fn ev(sector: u64, nr: u32, rwbs: u32) -> RqEvent {
        RqEvent { dev: 7 << 20, sector, nr_sectors: nr, rwbs, ..Default::default() }
    }

    /// The index kept in step map by map is the one a rebuild from every map makes.
    #[test]
    fn the_index_edited_in_place_equals_a_rebuild() {
        let mut m = BlockFileMapper::default();
        let now = Instant::now();
        let map = |disk: (u32, u32), ranges: Vec<(u64, u64)>| Mapped {
            path: String::new(),
            size: 0,
            mtime_ns: 0,
            disk,
            ranges,
            unsettled: false,
            refreshed: now,
            wanted: now,
        };
        let rebuilt = |m: &BlockFileMapper| {
            let mut index: HashMap<(u32, u32), Vec<ExtentOf>> = HashMap::new();
            for (id, f) in &m.files {
                index.entry(f.disk).or_default().extend(f.ranges.iter().map(|&(s, e)| (s, e, *id)));
            }
            index.values_mut().for_each(|v| v.sort_unstable());
            index
        };
        let edited = |m: &BlockFileMapper| {
            let mut index = m.index.clone();
            index.retain(|_, v| !v.is_empty());
            index
        };
        let (vda, loop0) = ((254, 0), (7, 0));
        m.set_map((254, 0, 11), Some(map(vda, vec![(100, 200), (400, 480)])));
        m.set_map((254, 0, 12), Some(map(vda, vec![(200, 300)])));
        m.set_map((7, 0, 13), Some(map(loop0, vec![(8, 16)])));
        assert!(!m.index_dirty);
        assert_eq!(edited(&m), rebuilt(&m));
        // A growing file's new map: one range grew, one came; another file gone.
        m.set_map((254, 0, 11), Some(map(vda, vec![(100, 250), (400, 480), (900, 960)])));
        m.set_map((254, 0, 12), None);
        assert_eq!(edited(&m), rebuilt(&m));
        assert_eq!(
            m.index[&vda],
            vec![(100, 250, (254, 0, 11)), (400, 480, (254, 0, 11)), (900, 960, (254, 0, 11))]
        );
        // Many ranges at once: rebuilt whole, to the same index.
        m.set_map((7, 0, 14), Some(map(loop0, (0..100).map(|i| (1000 + 10 * i, 1005 + 10 * i)).collect())));
        assert!(m.index_dirty);
        m.rebuild_index();
        assert_eq!(edited(&m), rebuilt(&m));
    }

    #[test]
    fn requests_split_over_files_and_the_rest_is_unknown() {
        let a = (7, 0, 12);
        let b = (7, 0, 13);
        let files = vec![(100, 200, a), (200, 208, b), (1000, 2000, a)];
        // Wholly inside a.
        assert_eq!(classify(&ev(120, 8, RWBS_READ), "", &[], &files), vec![(Target::File(a), 4096)]);
        // Across a, b and a hole.
        assert_eq!(
            classify(&ev(196, 16, RWBS_WRITE), "kworker/u8:1", &[], &files),
            vec![(Target::File(a), 2048), (Target::File(b), 4096), (Target::Label(LABEL_UNKNOWN), 2048)]
        );
        // A long extent that starts well before the request.
        assert_eq!(classify(&ev(1900, 8, RWBS_READ), "", &[], &files), vec![(Target::File(a), 4096)]);
        assert_eq!(
            classify(&ev(5000, 8, RWBS_READ), "", &[], &files),
            vec![(Target::Label(LABEL_UNKNOWN), 4096)]
        );
    }

    #[test]
    fn journal_and_metadata_get_labels_before_files() {
        let files = vec![(0, 10_000, (7, 0, 12))];
        let w = RWBS_WRITE | RWBS_SYNC;
        assert_eq!(
            classify(&ev(50, 8, w), "jbd2/loop0-8", &[], &files),
            vec![(Target::Label(LABEL_JOURNAL), 4096)]
        );
        assert_eq!(
            classify(&ev(50, 8, w | RWBS_META), "xfsaild/loop0", &[(40, 60)], &files),
            vec![(Target::Label(LABEL_JOURNAL), 4096)]
        );
        // Where the journal is known, jbd2's other writes (the superblock) are not journal.
        assert_eq!(
            classify(&ev(2, 2, w), "jbd2/loop0-8", &[(40, 60)], &[]),
            vec![(Target::Label(LABEL_UNKNOWN), 1024)]
        );
        // Straddling the journal's start: only its part is journal.
        assert_eq!(
            classify(&ev(36, 8, w | RWBS_META), "mkfs", &[(40, 60)], &files),
            vec![(Target::Label(LABEL_JOURNAL), 2048), (Target::Label(LABEL_METADATA), 2048)]
        );
        assert_eq!(
            classify(&ev(50, 8, RWBS_READ | RWBS_META), "ls", &[(4000, 5000)], &files),
            vec![(Target::Label(LABEL_METADATA), 4096)]
        );
    }
}
