//! Per-file I/O from the eBPF probes, and block requests mapped to files.

use serde::{Deserialize, Serialize};

/// One file's cumulative I/O counters from the per-file probes (ioscope_common::files), with the
/// writeback keyed by its backing device already merged onto the filesystem, and the path found
/// for it when the sample was taken.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FileIoSample {
    /// The filesystem's device (`s_dev`), or the backing disk's when writeback could not be
    /// matched to one mounted filesystem.
    pub major: u32,
    pub minor: u32,
    pub ino: u64,
    /// The device's name (`loop0`, `sda1`) or "major:minor".
    pub device: String,
    /// A path known to name this inode (checked by stat when taken), ending in " (deleted)" for
    /// an open file that was unlinked; None while unknown (shown as dev:inode).
    pub path: Option<String>,
    pub inserted_pages: u64,
    pub readahead_pages: u64,
    pub dirtied_pages: u64,
    pub writeback_pages: u64,
    pub dio_read_bytes: u64,
    pub dio_write_bytes: u64,
    /// Bytes the filesystem wrote back (ext4_writepages_result, iomap_writeback_folio): fsync's
    /// writeback too. 0 on filesystems without those events.
    pub fs_writeback_bytes: u64,
    /// Processes last seen reading, dirtying or doing direct I/O on it (one per CPU at most).
    pub processes: Vec<FileProcess>,
    /// Its page-cache residency (for a file with a path it could be opened by).
    pub cache: Option<FileCacheState>,
    /// What an inode without a path is, when ioscope can tell: a block device's own cache
    /// (filesystem metadata and journal read and written through the device).
    pub label: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FileProcess {
    pub pid: u32,
    pub comm: String,
}

/// A file's page-cache residency when the sample was taken (src/bpf/resolve/file_cache.rs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FileCacheState {
    /// "cachestat" or "mincore" (which has no dirty/writeback/eviction figures).
    pub source: String,
    pub size_bytes: u64,
    pub cached_pages: u64,
    pub dirty_pages: Option<u64>,
    pub writeback_pages: Option<u64>,
    pub evicted_pages: Option<u64>,
    pub recently_evicted_pages: Option<u64>,
}

/// Completed block requests mapped to files through the files' extent maps, cumulative since
/// the collector started (src/model/README.md, "Block requests to files").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockFilesSample {
    /// Per disk and target (a file, or a label): what the sampled requests carried.
    pub targets: Vec<BlockTargetCounters>,
    /// Requests with data completed and sent by the kernel / not sent (over the rate, or the
    /// ring buffer full).
    pub emitted: u64,
    pub rate_dropped: u64,
    pub ring_dropped: u64,
    /// The kernel's limit, events per second over all CPUs.
    pub rate_limit_s: u64,
    /// Files with an extent map, their extents, and FIEMAP calls that failed (cumulative).
    pub mapped_files: u64,
    pub extents: u64,
    pub fiemap_errors: u64,
}

/// Where sampled requests of one disk went: a file (`ino` non-zero, on filesystem
/// `fs_major:fs_minor`) or a `label` ("metadata", "journal", "unknown").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockTargetCounters {
    /// The disk the requests were made of, and its name.
    pub major: u32,
    pub minor: u32,
    pub disk: String,
    pub fs_major: u32,
    pub fs_minor: u32,
    pub ino: u64,
    pub path: Option<String>,
    pub label: Option<String>,
    pub read_requests: u64,
    pub read_bytes: u64,
    pub write_requests: u64,
    pub write_bytes: u64,
}
