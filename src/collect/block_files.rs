//! Block requests → files (README "Block requests to files"). The kernel sends a rate-limited
//! sample of completed requests (disk, sector, size, rwbs flags, submitter; src/bpf/block_files.rs);
//! each is matched against the extent maps of the files the files pane knows (FIEMAP on the path
//! the resolver found, plus the partition's start sector from sysfs), in this order:
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
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ioscope_common::block::{RWBS_META, RWBS_READ, RWBS_WRITE};
use ioscope_common::block_files::RqEvent;

use super::files::{kernel_dev, FileId};
use crate::sample::{BlockFilesSample, BlockTargetCounters, FileIoSample};

/// Files with an extent map at once (the least recently active go first).
pub const MAX_MAPPED_FILES: usize = 1024;
/// FIEMAP calls per sample.
pub const MAX_FIEMAP_PER_READ: usize = 128;
/// Extents read per file; a more fragmented file is mapped in part.
pub const MAX_EXTENTS_PER_FILE: usize = 16384;
/// A map with unplaced (delayed) extents is read again at most this often while the file is
/// otherwise unchanged.
pub const UNSETTLED_REFRESH: Duration = Duration::from_millis(500);
/// A target without mapped bytes for this long leaves the Sample (and counts from 0 if it
/// comes back, so an interval's delta stays right).
pub const KEEP_IDLE: Duration = Duration::from_secs(10);
/// A file's map is dropped when the file was not active for this long.
pub const FORGET_MAP: Duration = Duration::from_secs(30);
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

/// Where a filesystem's block device sits on its disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub disk: (u32, u32),
    pub start_sector: u64,
}

/// sysfs: a partition's disk and start sector, or the device itself at 0.
pub fn placement(sys: &Path, dev: (u32, u32)) -> Option<Placement> {
    let dir = sys.join(format!("dev/block/{}:{}", dev.0, dev.1));
    if !dir.exists() {
        return None;
    }
    if !dir.join("partition").exists() {
        return Some(Placement { disk: dev, start_sector: 0 });
    }
    let start = std::fs::read_to_string(dir.join("start")).ok()?.trim().parse().ok()?;
    let parent = std::fs::read_to_string(dir.join("../dev")).ok()?;
    let (a, b) = parent.trim().split_once(':')?;
    Some(Placement { disk: (a.parse().ok()?, b.parse().ok()?), start_sector: start })
}

/// One extent as FIEMAP reports it (bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
    pub flags: u32,
}

/// FIEMAP_EXTENT_* (include/uapi/linux/fiemap.h).
pub const FIEMAP_EXTENT_LAST: u32 = 0x1;
pub const FIEMAP_EXTENT_UNKNOWN: u32 = 0x2;
pub const FIEMAP_EXTENT_DELALLOC: u32 = 0x4;
pub const FIEMAP_EXTENT_ENCODED: u32 = 0x8;
pub const FIEMAP_EXTENT_NOT_ALIGNED: u32 = 0x100;
pub const FIEMAP_EXTENT_DATA_INLINE: u32 = 0x200;
pub const FIEMAP_EXTENT_DATA_TAIL: u32 = 0x400;
/// Extents whose bytes are not (or not only) at `physical`: not mapped.
const NOT_PLACED: u32 = FIEMAP_EXTENT_UNKNOWN
    | FIEMAP_EXTENT_DELALLOC
    | FIEMAP_EXTENT_ENCODED
    | FIEMAP_EXTENT_NOT_ALIGNED
    | FIEMAP_EXTENT_DATA_INLINE
    | FIEMAP_EXTENT_DATA_TAIL;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FiemapHead {
    fm_start: u64,
    fm_length: u64,
    fm_flags: u32,
    fm_mapped_extents: u32,
    fm_extent_count: u32,
    fm_reserved: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FiemapExtent {
    fe_logical: u64,
    fe_physical: u64,
    fe_length: u64,
    fe_reserved64: [u64; 2],
    fe_flags: u32,
    fe_reserved: [u32; 3],
}

/// _IOWR('f', 11, struct fiemap).
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
const BATCH: usize = 256;

#[repr(C)]
struct FiemapBuf {
    head: FiemapHead,
    extents: [FiemapExtent; BATCH],
}

/// The file's extents (without FIEMAP_FLAG_SYNC: asking must not cause writeback), at most `max`.
pub fn fiemap(f: &File, max: usize) -> std::io::Result<Vec<Extent>> {
    let mut out = Vec::new();
    let mut start = 0u64;
    loop {
        let mut buf = Box::new(FiemapBuf {
            head: FiemapHead {
                fm_start: start,
                fm_length: u64::MAX - start,
                fm_extent_count: BATCH as u32,
                ..Default::default()
            },
            extents: [FiemapExtent::default(); BATCH],
        });
        // SAFETY: the buffer is a struct fiemap followed by fm_extent_count extents, as the ioctl
        // expects; it lives across the call.
        let r = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FIEMAP as _, &mut *buf as *mut FiemapBuf) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = (buf.head.fm_mapped_extents as usize).min(BATCH);
        if n == 0 {
            return Ok(out);
        }
        for e in &buf.extents[..n] {
            out.push(Extent {
                logical: e.fe_logical,
                physical: e.fe_physical,
                length: e.fe_length,
                flags: e.fe_flags,
            });
        }
        let last = &buf.extents[n - 1];
        if last.fe_flags & FIEMAP_EXTENT_LAST != 0 || out.len() >= max || n < BATCH {
            out.truncate(max);
            return Ok(out);
        }
        start = last.fe_logical + last.fe_length;
    }
}

/// Extents as sector ranges on the disk, and whether some had no place yet.
pub fn disk_ranges(extents: &[Extent], place: Placement) -> (Vec<(u64, u64)>, bool) {
    let mut unsettled = false;
    let mut out = Vec::new();
    for e in extents {
        if e.flags & NOT_PLACED != 0 || e.length == 0 {
            unsettled = true;
            continue;
        }
        let start = place.start_sector + e.physical / 512;
        out.push((start, start + e.length.div_ceil(512)));
    }
    (out, unsettled)
}

/// A filesystem's journal or log, as sector ranges of its device (not of the disk), from the
/// superblock at the start of `dev_head` (at least 2 KiB of the device). Depth-0 ext4 journals
/// (the journal inode's extents fit in the superblock's copy of it) and internal xfs logs.
pub fn journal_ranges(dev_head: &[u8]) -> Vec<(u64, u64)> {
    ext4_journal(dev_head).or_else(|| xfs_log(dev_head)).unwrap_or_default()
}

fn le16(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?)))
}
fn le32(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?)))
}
fn be32(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?)))
}
fn be64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// ext4: the superblock at 1024 keeps a copy of the journal inode's i_block (`s_jnl_blocks`,
/// when `s_jnl_backup_type` is 1); with an extent tree of depth 0 it lists the journal's extents.
fn ext4_journal(b: &[u8]) -> Option<Vec<(u64, u64)>> {
    let sb = b.get(1024..2048)?;
    if le16(sb, 0x38)? != 0xEF53 || le32(sb, 0x5C)? & 0x4 == 0 || le32(sb, 0xE4)? != 0 {
        return None;
    }
    if *sb.get(0xFD)? != 1 {
        return None;
    }
    let block = 1024u64 << le32(sb, 0x18)?.min(16);
    let ib = sb.get(0x10C..0x10C + 60)?;
    if le16(ib, 0)? != 0xF30A || le16(ib, 6)? != 0 {
        return None;
    }
    let n = le16(ib, 2)?.min(4) as usize;
    let mut out = Vec::new();
    for i in 0..n {
        let e = 12 + 12 * i;
        let mut len = le16(ib, e + 4)?;
        if len > 32768 {
            len -= 32768;
        }
        let start = le16(ib, e + 6)? << 32 | le32(ib, e + 8)?;
        out.push((start * block / 512, (start + len) * block / 512));
    }
    Some(out)
}

/// xfs: the primary superblock at 0 (big-endian) places an internal log at `sb_logstart`
/// (AG-relative block number: AG in the high bits, `sb_agblklog` bits of block).
fn xfs_log(b: &[u8]) -> Option<Vec<(u64, u64)>> {
    if b.get(0..4)? != b"XFSB" {
        return None;
    }
    let block = be32(b, 4)?;
    let logstart = be64(b, 48)?;
    let agblocks = be32(b, 84)?;
    let logblocks = be32(b, 96)?;
    let agblklog = u32::from(*b.get(124)?);
    if logstart == 0 || agblklog >= 64 {
        return None;
    }
    let ag = logstart >> agblklog;
    let agbno = logstart & ((1u64 << agblklog) - 1);
    let start = (ag * agblocks + agbno) * block / 512;
    Some(vec![(start, start + logblocks * block / 512)])
}

/// /proc/self/mountinfo: (mount id, major:minor, fs type, mount source) per line.
fn mount_sources(text: &str) -> Vec<(u64, (u32, u32), String, String)> {
    text.lines()
        .filter_map(|l| {
            let id = l.split(' ').next()?.parse().ok()?;
            let dev = l.split(' ').nth(2)?;
            let (maj, min) = dev.split_once(':')?;
            let mut tail = l.split(" - ").nth(1)?.split(' ');
            let (fstype, source) = (tail.next()?, tail.next()?);
            Some((id, (maj.parse().ok()?, min.parse().ok()?), fstype.to_string(), source.to_string()))
        })
        .collect()
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
}

/// Extent maps, journal places and the cumulative counts per (disk, target). See the module docs.
pub struct BlockFileMapper {
    sys: PathBuf,
    proc: PathBuf,
    files: HashMap<FileId, Mapped>,
    /// Per disk: (start, end, file) sorted by start; rebuilt when a map changed.
    index: HashMap<(u32, u32), Vec<ExtentOf>>,
    index_dirty: bool,
    /// Per mount (id, device): where its device sits and its journal's ranges on the device
    /// (empty when unknown). By mount id: a loop device reused for another filesystem is new.
    journals: HashMap<MountKey, (Placement, Vec<SectorRange>)>,
    counts: BTreeMap<((u32, u32), Target), Counts>,
    pub fiemap_errors: u64,
    recent: VecDeque<MappedRequest>,
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
            proc: proc.to_path_buf(),
            files: HashMap::new(),
            index: HashMap::new(),
            index_dirty: false,
            journals: HashMap::new(),
            counts: BTreeMap::new(),
            fiemap_errors: 0,
            recent: VecDeque::new(),
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

    /// Brings the extent maps of `files` (the files pane's, with paths) up to date.
    pub fn refresh(&mut self, files: &[FileIoSample], now: Instant) {
        let mut budget = MAX_FIEMAP_PER_READ;
        for f in files {
            let Some(path) = f.path.as_deref().filter(|p| !p.ends_with(" (deleted)")) else { continue };
            let id = (f.major, f.minor, f.ino);
            let Ok(meta) = std::fs::metadata(path) else { continue };
            if (libc::major(meta.dev()), libc::minor(meta.dev()), meta.ino()) != id || !meta.is_file() {
                // The path names another inode now: its old map is not this file's.
                if self.files.remove(&id).is_some() {
                    self.index_dirty = true;
                }
                continue;
            }
            let mtime_ns = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
            if let Some(m) = self.files.get_mut(&id) {
                m.wanted = now;
                let same = m.size == meta.len() && m.mtime_ns == mtime_ns && m.path == path;
                let settle_due = m.unsettled && now.duration_since(m.refreshed) >= UNSETTLED_REFRESH;
                if same && !settle_due {
                    continue;
                }
            }
            if budget == 0 {
                continue;
            }
            budget -= 1;
            self.map_file(id, path, meta.len(), mtime_ns, now);
        }
        // Maps of files no longer active go (their blocks may be freed and reused meanwhile).
        let before = self.files.len();
        self.files.retain(|_, m| now.duration_since(m.wanted) < FORGET_MAP);
        self.index_dirty |= self.files.len() != before;
        if self.files.len() > MAX_MAPPED_FILES {
            let mut by_age: Vec<(Instant, FileId)> =
                self.files.iter().map(|(id, m)| (m.wanted, *id)).collect();
            by_age.sort();
            for (_, id) in by_age.iter().take(self.files.len() - MAX_MAPPED_FILES) {
                self.files.remove(id);
            }
            self.index_dirty = true;
        }
    }

    fn map_file(&mut self, id: FileId, path: &str, size: u64, mtime_ns: i128, now: Instant) {
        let Some(place) = placement(&self.sys, (id.0, id.1)) else { return };
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOATIME | libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(path)
            .or_else(|_| std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path));
        let extents = opened.and_then(|f| {
            // Checked again on the open file: the path may have changed since the stat.
            let m = f.metadata()?;
            if (libc::major(m.dev()), libc::minor(m.dev()), m.ino()) != id {
                return Err(std::io::Error::other("path names another inode"));
            }
            fiemap(&f, MAX_EXTENTS_PER_FILE)
        });
        match extents {
            Ok(extents) => {
                let (ranges, unsettled) = disk_ranges(&extents, place);
                self.files.insert(
                    id,
                    Mapped {
                        path: path.to_string(),
                        size,
                        mtime_ns,
                        disk: place.disk,
                        ranges,
                        unsettled,
                        refreshed: now,
                        wanted: now,
                    },
                );
            }
            Err(_) => {
                self.fiemap_errors += 1;
                self.files.remove(&id);
            }
        }
        self.index_dirty = true;
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

    /// The journal ranges on `disk` of every filesystem mounted from it (read once per
    /// filesystem).
    fn journal_on(&mut self, disk: (u32, u32)) -> Vec<(u64, u64)> {
        let text = std::fs::read_to_string(self.proc.join("self/mountinfo")).unwrap_or_default();
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
                let ranges = File::open(&source)
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
        out
    }

    /// Maps `events` and adds them to the counts.
    pub fn map(&mut self, events: &[RqEvent], now: Instant) {
        self.rebuild_index();
        let mut journals: HashMap<(u32, u32), Vec<(u64, u64)>> = HashMap::new();
        for e in events.iter().filter(|e| e.rwbs & (RWBS_READ | RWBS_WRITE) != 0) {
            let disk = kernel_dev(e.dev);
            let journal = journals.entry(disk).or_insert_with(|| self.journal_on(disk)).clone();
            let comm = comm_text(&e.comm);
            let parts = classify(e, &comm, &journal, self.index.get(&disk).map_or(&[][..], |v| v));
            for (t, bytes) in &parts {
                let c = self.counts.entry((disk, t.clone())).or_default();
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
        self.counts.retain(|_, c| c.changed.is_some_and(|t| now.duration_since(t) < KEEP_IDLE));
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
                    disk: disk_name(&self.sys, *disk),
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
    pub fn sample(&self, counts: crate::bpf::block_files::RingCounts) -> BlockFilesSample {
        let (mapped_files, extents) = self.mapped();
        BlockFilesSample {
            targets: self.targets(),
            emitted: counts.emitted,
            rate_dropped: counts.rate_dropped,
            ring_dropped: counts.ring_dropped,
            rate_limit_s: crate::bpf::block_files::RATE_LIMIT_S,
            mapped_files,
            extents,
            fiemap_errors: self.fiemap_errors,
        }
    }
}

fn comm_text(c: &[u8; 16]) -> String {
    let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
    String::from_utf8_lossy(&c[..end]).into_owned()
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

    #[test]
    fn extents_land_after_the_partition_start_and_delalloc_is_unsettled() {
        let place = Placement { disk: (8, 0), start_sector: 2048 };
        let ext = [
            Extent { logical: 0, physical: 1 << 20, length: 8192, flags: 0 },
            Extent { logical: 8192, physical: 0, length: 4096, flags: FIEMAP_EXTENT_DELALLOC | 2 },
            Extent { logical: 12288, physical: 4 << 20, length: 1000, flags: FIEMAP_EXTENT_LAST },
        ];
        let (r, unsettled) = disk_ranges(&ext, place);
        assert_eq!(r, vec![(2048 + 2048, 2048 + 2048 + 16), (2048 + 8192, 2048 + 8192 + 2)]);
        assert!(unsettled);
    }

    #[test]
    fn superblocks_place_the_journal() {
        // ext4, 4 KiB blocks, journal of 1024 blocks at block 40960 (depth-0 extent tree).
        let mut b = vec![0u8; 2048];
        let sb = 1024;
        b[sb + 0x38..sb + 0x3A].copy_from_slice(&0xEF53u16.to_le_bytes());
        b[sb + 0x18..sb + 0x1C].copy_from_slice(&2u32.to_le_bytes());
        b[sb + 0x5C..sb + 0x60].copy_from_slice(&4u32.to_le_bytes());
        b[sb + 0xFD] = 1;
        let ib = sb + 0x10C;
        b[ib..ib + 2].copy_from_slice(&0xF30Au16.to_le_bytes());
        b[ib + 2..ib + 4].copy_from_slice(&1u16.to_le_bytes());
        b[ib + 12 + 4..ib + 12 + 6].copy_from_slice(&1024u16.to_le_bytes());
        b[ib + 12 + 8..ib + 12 + 12].copy_from_slice(&40960u32.to_le_bytes());
        assert_eq!(journal_ranges(&b), vec![(40960 * 8, (40960 + 1024) * 8)]);
        // xfs, 4 KiB blocks, 2^14 blocks per AG (agblklog 14), log at AG 2 block 100, 2560 blocks.
        let mut x = vec![0u8; 2048];
        x[0..4].copy_from_slice(b"XFSB");
        x[4..8].copy_from_slice(&4096u32.to_be_bytes());
        x[48..56].copy_from_slice(&((2u64 << 14) | 100).to_be_bytes());
        x[84..88].copy_from_slice(&16000u32.to_be_bytes());
        x[96..100].copy_from_slice(&2560u32.to_be_bytes());
        x[124] = 14;
        let start = (2 * 16000 + 100) * 8;
        assert_eq!(journal_ranges(&x), vec![(start, start + 2560 * 8)]);
        assert!(journal_ranges(&[0u8; 2048]).is_empty());
    }

    #[test]
    fn mountinfo_gives_type_and_source() {
        let mi = "36 25 7:3 / /mnt/x rw,relatime shared:1 - ext4 /dev/loop3 rw\n\
                  40 25 0:45 / /run rw - tmpfs tmpfs rw\n";
        assert_eq!(
            mount_sources(mi),
            vec![
                (36, (7, 3), "ext4".into(), "/dev/loop3".into()),
                (40, (0, 45), "tmpfs".into(), "tmpfs".into())
            ]
        );
    }
}
