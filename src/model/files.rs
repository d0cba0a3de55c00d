//! Per-file disk I/O for one interval (src/model/README.md, "Files"), from the per-file counters in two
//! Samples (src/bpf/resolve/files.rs keeps a file's counters continuous while it is in the Samples):
//!
//! ```text
//! disk_read_bytes    = Δinserted_pages × page size   (pages read from disk: read bios submitted
//!                      for the file's pages; a hole's zero-filled pages excluded)
//! readahead_bytes    = Δreadahead_pages × page size  (of those, outside the range the read or
//!                      fault asked for)
//! demand_read_bytes  = disk_read_bytes − readahead_bytes
//! dirtied_bytes      = Δdirtied_pages × page size
//! writeback_bytes    = Δmax(writeback_pages × page size, fs_writeback_bytes)
//!                      (writeback_single_inode's `wrote`; the filesystem's own count, which also
//!                      sees fsync's writeback, where it has one: ext4, iomap filesystems)
//! direct_read_bytes  = Δdio_read_bytes, direct_write_bytes = Δdio_write_bytes
//! disk_bytes         = disk_read_bytes + writeback_bytes + direct_read_bytes + direct_write_bytes
//! block_read_bytes   = Δread_bytes, block_write_bytes = Δwrite_bytes of the file's (or label's)
//!                      row in bpf.block_files: the sampled block requests mapped to it by extent
//! cached_pct         = 100 × cached pages × page size / size, at most 100 (null for an empty
//!                      file or when the file could not be opened)
//! ```
//! Each `_s` is the value over the interval's seconds. Δ of a counter that went down (the kernel
//! evicted and began the file's entry again) is its new value.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::sample::{BlockTargetCounters, FileIoSample, FileProcess, Sample};

use super::bpf::BpfModel;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FileModel {
    /// A path naming the file (" (deleted)" when unlinked); null while unknown (show `dev:inode`).
    pub path: Option<String>,
    /// "major:minor" of the filesystem (or of the disk, for writeback not matched to one).
    pub dev: String,
    pub device: String,
    pub ino: u64,
    pub disk_read_bytes: u64,
    pub disk_read_bytes_s: f64,
    pub readahead_bytes: u64,
    pub readahead_bytes_s: f64,
    pub demand_read_bytes: u64,
    pub demand_read_bytes_s: f64,
    pub dirtied_bytes: u64,
    pub dirtied_bytes_s: f64,
    pub writeback_bytes: u64,
    pub writeback_bytes_s: f64,
    pub direct_read_bytes: u64,
    pub direct_read_bytes_s: f64,
    pub direct_write_bytes: u64,
    pub direct_write_bytes_s: f64,
    pub disk_bytes: u64,
    pub disk_bytes_s: f64,
    /// Bytes of the sampled block requests mapped to this file (or label) through extent maps.
    pub block_read_bytes: u64,
    pub block_read_bytes_s: f64,
    pub block_write_bytes: u64,
    pub block_write_bytes_s: f64,
    /// The disk those requests were made of (its name), when any.
    pub block_disk: Option<String>,
    pub cached_pct: Option<f64>,
    pub cached_bytes: Option<u64>,
    /// From cachestat only (null with the mincore fallback).
    pub dirty_bytes: Option<u64>,
    pub size_bytes: Option<u64>,
    pub processes: Vec<FileProcess>,
    /// For an inode without a path, what it is when known: `[vda metadata/journal]` for a block
    /// device's own cache; for a row of block requests that belong to no known file,
    /// `[vda journal]`, `[vda metadata]` or `[vda unknown]` (ino 0).
    pub label: Option<String>,
}

/// Share of the requests with data the kernel sent for mapping in the interval (the rest were
/// over the rate limit or found the ring buffer full).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BlockFilesModel {
    pub sent: u64,
    pub not_sent: u64,
    /// 100 × sent / (sent + not sent); null without requests.
    pub sampled_pct: Option<f64>,
    pub rate_limit_s: u64,
    pub mapped_files: u64,
    pub extents: u64,
}

impl BlockFilesModel {
    /// Whether the mapped bytes are all of the interval's requests (sampled ≥ 99.95 %), so that a
    /// file's mapped bytes per second are its disk rate. Otherwise they are a sample: a file's
    /// part of the sampled bytes is meaningful, its mapped bytes per second are not (the requests
    /// not sent are dropped by a rate limit and a full ring, not drawn evenly from every file).
    pub fn whole(&self) -> bool {
        self.sampled_pct.is_none_or(|p| p >= 99.95)
    }
}

/// The mapping's sampling over the interval; null without the request ring.
pub fn block_files(prev: Option<&Sample>, cur: &Sample) -> Option<BlockFilesModel> {
    let c = cur.bpf.block_files.as_ref()?;
    let p = prev.and_then(|p| p.bpf.block_files.as_ref()).unwrap_or(c);
    let sent = delta(p.emitted, c.emitted);
    let not_sent = delta(p.rate_dropped + p.ring_dropped, c.rate_dropped + c.ring_dropped);
    let all = sent + not_sent;
    Some(BlockFilesModel {
        sent,
        not_sent,
        sampled_pct: (all > 0).then(|| 100.0 * sent as f64 / all as f64),
        rate_limit_s: c.rate_limit_s,
        mapped_files: c.mapped_files,
        extents: c.extents,
    })
}

/// A file's writeback so far: the larger of the two counts (the filesystem's own count also
/// sees fsync; writeback_single_inode is there for filesystems without one).
pub fn writeback_so_far(f: &FileIoSample, page: u64) -> u64 {
    (f.writeback_pages * page).max(f.fs_writeback_bytes)
}

impl FileModel {
    /// What the row keeps the disk busy with: the probes' disk bytes, or the bytes of the block
    /// requests mapped to it when those are more (a label row has only those).
    pub fn busy_bytes(&self) -> u64 {
        self.disk_bytes.max(self.block_read_bytes + self.block_write_bytes)
    }

    /// The name to show: the path, else the label, else `dev:inode`.
    pub fn name(&self) -> String {
        self.path
            .clone()
            .or_else(|| self.label.clone())
            .unwrap_or_else(|| format!("{}:{}", self.dev, self.ino))
    }
}

fn delta(prev: u64, cur: u64) -> u64 {
    if cur >= prev {
        cur - prev
    } else {
        cur
    }
}

/// Files with I/O in the interval, the most disk bytes first (then by name). Empty for the first
/// sample: there is no interval yet.
pub fn compute(prev: Option<&Sample>, cur: &Sample, secs: f64) -> Vec<FileModel> {
    let Some(prev) = prev else { return Vec::new() };
    let before: HashMap<(u32, u32, u64), &FileIoSample> =
        prev.bpf.files.iter().map(|f| ((f.major, f.minor, f.ino), f)).collect();
    let page = cur.page_size.max(1);
    let rate = |v: u64| if secs > 0.0 { v as f64 / secs } else { 0.0 };
    let mut block = block_deltas(prev, cur);
    let mut out: Vec<FileModel> = cur
        .bpf
        .files
        .iter()
        .filter_map(|c| {
            let zero = FileIoSample::default();
            let p = before.get(&(c.major, c.minor, c.ino)).copied().unwrap_or(&zero);
            let d = |f: fn(&FileIoSample) -> u64| delta(f(p), f(c));
            let read = d(|f| f.inserted_pages) * page;
            let readahead = (d(|f| f.readahead_pages) * page).min(read);
            let dirtied = d(|f| f.dirtied_pages) * page;
            let writeback = delta(writeback_so_far(p, page), writeback_so_far(c, page));
            let dio_r = d(|f| f.dio_read_bytes);
            let dio_w = d(|f| f.dio_write_bytes);
            let disk = read + writeback + dio_r + dio_w;
            let id = (c.major, c.minor, c.ino);
            let (blk_r, blk_w, blk_disk) = block.remove(&Target::File(id)).unwrap_or_default();
            if disk == 0 && dirtied == 0 && blk_r + blk_w == 0 {
                return None;
            }
            let cache = c.cache.as_ref();
            Some(FileModel {
                path: c.path.clone(),
                dev: format!("{}:{}", c.major, c.minor),
                device: c.device.clone(),
                ino: c.ino,
                disk_read_bytes: read,
                disk_read_bytes_s: rate(read),
                readahead_bytes: readahead,
                readahead_bytes_s: rate(readahead),
                demand_read_bytes: read - readahead,
                demand_read_bytes_s: rate(read - readahead),
                dirtied_bytes: dirtied,
                dirtied_bytes_s: rate(dirtied),
                writeback_bytes: writeback,
                writeback_bytes_s: rate(writeback),
                direct_read_bytes: dio_r,
                direct_read_bytes_s: rate(dio_r),
                direct_write_bytes: dio_w,
                direct_write_bytes_s: rate(dio_w),
                disk_bytes: disk,
                disk_bytes_s: rate(disk),
                block_read_bytes: blk_r,
                block_read_bytes_s: rate(blk_r),
                block_write_bytes: blk_w,
                block_write_bytes_s: rate(blk_w),
                block_disk: blk_disk,
                cached_pct: cache.and_then(|s| cached_pct(s.cached_pages, s.size_bytes, page)),
                cached_bytes: cache.map(|s| s.cached_pages * page),
                dirty_bytes: cache.and_then(|s| s.dirty_pages).map(|p| p * page),
                size_bytes: cache.map(|s| s.size_bytes),
                processes: c.processes.clone(),
                label: c.label.clone(),
            })
        })
        .collect();
    // Mapped files the per-file counters did not list, and the labels.
    for (target, (r, w, disk)) in block {
        if r + w == 0 {
            continue;
        }
        let t = &target_rows(cur)[&target];
        let label = t.label.as_ref().map(|l| format!("[{} {l}]", t.disk));
        let (dev, ino) = match &target {
            Target::File((a, b, ino)) => (format!("{a}:{b}"), *ino),
            Target::Label(..) => (format!("{}:{}", t.major, t.minor), 0),
        };
        out.push(FileModel {
            path: t.path.clone(),
            dev,
            device: t.disk.clone(),
            ino,
            block_read_bytes: r,
            block_read_bytes_s: rate(r),
            block_write_bytes: w,
            block_write_bytes_s: rate(w),
            block_disk: disk,
            label,
            ..Default::default()
        });
    }
    out.sort_by(|a, b| b.busy_bytes().cmp(&a.busy_bytes()).then_with(|| a.name().cmp(&b.name())));
    out
}

/// A block-request row's key: a file by (fs major, fs minor, inode), a label by (disk, label).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Target {
    File((u32, u32, u64)),
    Label((u32, u32), String),
}

fn target_of(t: &BlockTargetCounters) -> Target {
    match &t.label {
        Some(l) => Target::Label((t.major, t.minor), l.clone()),
        None => Target::File((t.fs_major, t.fs_minor, t.ino)),
    }
}

fn target_rows(s: &Sample) -> HashMap<Target, &BlockTargetCounters> {
    s.bpf.block_files.iter().flat_map(|b| b.targets.iter()).map(|t| (target_of(t), t)).collect()
}

/// Per target: (read bytes, write bytes, disk name) mapped in the interval.
fn block_deltas(prev: &Sample, cur: &Sample) -> BTreeMap<Target, (u64, u64, Option<String>)> {
    let before = target_rows(prev);
    target_rows(cur)
        .into_iter()
        .map(|(k, c)| {
            let (pr, pw) = before.get(&k).map_or((0, 0), |p| (p.read_bytes, p.write_bytes));
            let v = (delta(pr, c.read_bytes), delta(pw, c.write_bytes), Some(c.disk.clone()));
            (k, v)
        })
        .collect()
}

/// How many rows are files (not the journal/metadata/unknown rows of block requests).
pub fn file_rows(files: &[FileModel]) -> usize {
    files.iter().filter(|f| f.label.is_none() || f.ino != 0).count()
}

/// Whether the model's samples carried per-file data: eBPF on, by an ioscope that collects it
/// (its status lists the per-file writeback program, attached or not). False for recordings made
/// before per-file attribution existed, so they do not claim "no file had I/O".
/// Takes a Model or its [`BpfModel`] (the only part it reads).
pub fn available(m: &impl AsRef<BpfModel>) -> bool {
    let bpf = m.as_ref();
    bpf.enabled && bpf.programs.iter().any(|p| p.program == ioscope_common::files::WRITEBACK_PROGRAM)
}

/// Cached share of a file of `size` bytes, in percent (at most 100: the last page is partial).
pub fn cached_pct(cached_pages: u64, size: u64, page: u64) -> Option<f64> {
    (size > 0).then(|| (100.0 * (cached_pages * page) as f64 / size as f64).min(100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_of_the_requests_is_not_a_rate() {
        let bf = |sent, not_sent| BlockFilesModel {
            sent,
            not_sent,
            sampled_pct: (sent + not_sent > 0).then(|| 100.0 * sent as f64 / (sent + not_sent) as f64),
            ..Default::default()
        };
        // 9 % sent: the mapped bytes are a sample, not the files' disk rate.
        assert!(!bf(90, 910).whole());
        assert!(!bf(999, 1).whole() || bf(9999, 1).whole());
        assert!(bf(100_000, 1).whole(), "99.999 % is all of it to one decimal");
        assert!(bf(500, 0).whole() && bf(0, 0).whole());
    }
    use crate::sample::FileCacheState;

    fn sample(mono_ns: u64, files: Vec<FileIoSample>) -> Sample {
        let mut s = Sample { mono_ns, page_size: 4096, ..Default::default() };
        s.bpf.files = files;
        s
    }

    fn file(ino: u64, inserted: u64, readahead: u64, writeback: u64, dio_w: u64) -> FileIoSample {
        FileIoSample {
            major: 7,
            minor: 0,
            ino,
            device: "loop0".into(),
            path: Some(format!("/mnt/f{ino}")),
            inserted_pages: inserted,
            readahead_pages: readahead,
            writeback_pages: writeback,
            dio_write_bytes: dio_w,
            ..Default::default()
        }
    }

    #[test]
    fn hand_computed_interval() {
        let prev = sample(0, vec![file(12, 100, 60, 0, 0), file(13, 0, 0, 10, 0)]);
        let mut f12 = file(12, 356, 252, 0, 0);
        f12.cache = Some(FileCacheState { size_bytes: 2 << 20, cached_pages: 256, ..Default::default() });
        // File 14 is new in this sample: all of its counters are this interval's.
        let cur = sample(2_000_000_000, vec![f12, file(13, 0, 0, 522, 0), file(14, 0, 0, 0, 1 << 20)]);
        let m = compute(Some(&prev), &cur, 2.0);
        assert_eq!(m.len(), 3);
        // 512 pages written back = 2 MiB, first.
        assert_eq!((m[0].ino, m[0].writeback_bytes, m[0].writeback_bytes_s), (13, 2 << 20, 1_048_576.0));
        // 256 pages read = 1 MiB, 192 of them readahead.
        let f = m.iter().find(|f| f.ino == 12).unwrap();
        assert_eq!((f.disk_read_bytes, f.readahead_bytes, f.demand_read_bytes), (1 << 20, 786_432, 262_144));
        assert_eq!(f.cached_pct, Some(50.0));
        assert_eq!(f.dev, "7:0");
        let f = m.iter().find(|f| f.ino == 14).unwrap();
        assert_eq!((f.direct_write_bytes, f.disk_bytes), (1 << 20, 1 << 20));
        assert_eq!(f.cached_pct, None);
        // No interval yet on the first sample.
        assert!(compute(None, &cur, 0.0).is_empty());
    }

    #[test]
    fn writeback_is_the_larger_count_so_fsync_counts_and_nothing_twice() {
        let wb = |pages: u64, fs: u64| FileIoSample {
            writeback_pages: pages,
            fs_writeback_bytes: fs,
            ..file(12, 0, 0, 0, 0)
        };
        let m = |a: FileIoSample, b: FileIoSample| {
            compute(Some(&sample(0, vec![a])), &sample(1, vec![b]), 1.0)
                .first()
                .map_or(0, |f| f.writeback_bytes)
        };
        // fsync: only the filesystem saw it (2 MiB).
        assert_eq!(m(wb(0, 0), wb(0, 2 << 20)), 2 << 20);
        // The flusher: both saw the same 1 MiB, in different intervals: counted once.
        assert_eq!(m(wb(0, 2 << 20), wb(0, 3 << 20)), 1 << 20);
        assert_eq!(m(wb(0, 3 << 20), wb(256, 3 << 20)), 0);
        // A filesystem without its own count: writeback_single_inode's.
        assert_eq!(m(wb(10, 0), wb(266, 0)), 1 << 20);
    }

    #[test]
    fn unchanged_files_are_not_listed_and_names_fall_back_to_dev_inode() {
        let mut a = file(12, 5, 0, 0, 0);
        a.path = None;
        let m = compute(Some(&sample(0, vec![a.clone()])), &sample(1, vec![a.clone()]), 1.0);
        assert!(m.is_empty());
        let m = compute(Some(&sample(0, vec![])), &sample(1, vec![a]), 1.0);
        assert_eq!(m[0].name(), "7:0:12");
        assert_eq!(cached_pct(3, 10_000, 4096), Some(100.0));
        assert_eq!(cached_pct(0, 0, 4096), None);
    }
}
