//! The readahead probes' raw counters as they go into a [`crate::sample::Sample`] (recorded and
//! replayed like every other counter). Cumulative per file since the file's entry was created;
//! ioscope_common::readahead says what each counts, src/model/README.md's "Readahead" section the figures
//! derived from them.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReadaheadSample {
    /// "category:event" of each readahead program attached.
    pub attached: std::sync::Arc<Vec<String>>,
    /// One row per file (shared: a row whose counters did not move since the last sample is the
    /// same allocation in both, which the Model recognises).
    pub files: Vec<std::sync::Arc<RaFileSample>>,
    /// Per device, the files active in the interval beyond the sample's rows (the collector's
    /// budget, src/bpf/readahead.rs RA_ROWS), summed: counts over the interval, not cumulative.
    pub others: Vec<RaOthers>,
    /// Per device, the files with pages still pending that have no row: no readahead activity
    /// for [`crate::bpf::readahead::RA_LINGER`] (a gauge).
    pub quiet: Vec<RaQuiet>,
    /// Readahead pages never tracked because the page map was full (cumulative, all files).
    pub untracked_pages: u64,
    /// Readahead events lost because the file map was full (cumulative).
    pub untracked_files: u64,
    /// The page map's capacity (folios), to show how close it is to full.
    pub page_map_capacity: u64,
    /// Per device, the pages first used and evicted unused in the last
    /// [`crate::bpf::readahead::HINT_WINDOW`] (all its files, listed or not): what the waste hint
    /// weighs, so that it holds steadily rather than flicker with each interval. Empty in older
    /// recordings (the hint then weighs the interval).
    pub recent: Vec<RaRecent>,
}

/// One device's readahead fate over the last [`crate::bpf::readahead::HINT_WINDOW`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RaRecent {
    /// The filesystem's device as the kernel encodes it (major << 20 | minor).
    pub dev: u32,
    /// The time the counts span (up to the window; less since attach).
    pub secs: f64,
    pub used_pages: u64,
    pub wasted_pages: u64,
    /// Files with pages evicted unused in that time.
    pub wasted_files: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RaFileSample {
    /// The filesystem's device as the kernel encodes it (major << 20 | minor).
    pub dev: u32,
    pub ino: u64,
    /// The file's path when a process using it showed it in /proc (None: not known).
    pub path: Option<String>,
    pub sync_events: u64,
    pub async_events: u64,
    pub windows: u64,
    pub window_pages: u64,
    pub ra_pages: u64,
    pub used_pages: u64,
    pub wasted_pages: u64,
    pub untracked_pages: u64,
    /// Gauges: the last window (pages), the file's maximum window (`ra_pages`), `mmap_miss`.
    pub last_window: u32,
    pub max_window: u32,
    pub mmap_miss: u32,
    /// Processes that triggered readahead on this file.
    pub triggers: Vec<RaTrigger>,
    /// Time from readahead to first use: log2 µs buckets (ioscope_common::readahead::use_bucket).
    pub use_hist: Vec<u64>,
    /// Without a path, what the file is when known: `[vda metadata/journal]` for a block
    /// device's own pages, `[vda metadata]` for a filesystem's metadata inode (as in the files
    /// view).
    pub label: Option<String>,
    /// Pages read ahead before the row's counters start and still pending then: a file listed
    /// again after a quiet spell without a row counts from there (its counters are the growth
    /// since), and its pending pages are `ra_pages + pending_before - used - wasted - untracked`.
    pub pending_before: u64,
}

/// The quiet files of one device: pages read ahead, neither used nor evicted yet, in files with
/// no readahead activity lately (no row of their own).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RaQuiet {
    /// The filesystem's device as the kernel encodes it (major << 20 | minor).
    pub dev: u32,
    pub files: u64,
    pub pending_pages: u64,
}

/// Files of one device summed into one row: what they counted in the interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RaOthers {
    /// The filesystem's device as the kernel encodes it (major << 20 | minor).
    pub dev: u32,
    pub files: u64,
    pub sync_events: u64,
    pub async_events: u64,
    pub windows: u64,
    pub ra_pages: u64,
    pub used_pages: u64,
    pub wasted_pages: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RaTrigger {
    pub pid: u32,
    /// From /proc when the sample was taken (empty once the process is gone).
    pub comm: String,
}

impl RaFileSample {
    /// The file's device as "major:minor".
    pub fn dev_name(&self) -> String {
        format!("{}:{}", self.dev >> 20, self.dev & ((1 << 20) - 1))
    }
}
