//! The readahead view: per file and per device, what readahead brought in over the interval, how
//! much of it was used and how much evicted unused, the windows, and plain-language hints. The
//! formulas are src/model/README.md's "Readahead" section; every count is a difference of the probes'
//! cumulative counters between two samples.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use crate::sample::readahead::{RaFileSample, RaOthers, ReadaheadSample};
use crate::sample::Sample;

/// Waste at or above this share of an interval's settled pages (used + wasted) is called high.
pub const HIGH_WASTE_PCT: f64 = 50.0;
/// ... when at least this many pages were wasted in the interval (1 MiB of 4 KiB pages): a few
/// stray pages are not worth a hint.
pub const HINT_MIN_WASTED_PAGES: u64 = 256;
/// A sequential reader whose window never exceeds this is called small-windowed.
pub const SMALL_WINDOW_KB: u64 = 128;
/// Below this share of MemAvailable, "more memory" is named among the remedies.
pub const LOW_MEMORY_PCT: f64 = 10.0;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReadaheadModel {
    pub devices: Vec<RaDeviceModel>,
    /// Files with readahead activity in the interval or pages still pending; most wasted first.
    /// (Shared: see [`steady_row`].)
    pub files: Vec<Arc<RaFileModel>>,
    /// Readahead pages not tracked in the interval because the page map was full (and since
    /// attach): neither their use nor their waste is counted.
    pub untracked_pages: u64,
    pub untracked_pages_total: u64,
    /// Readahead events of files not tracked because the file map was full, since attach.
    pub untracked_files_total: u64,
    pub hints: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RaDeviceModel {
    /// The block device's name ("loop0"), else "major:minor".
    pub name: String,
    pub dev: String,
    /// The device's read_ahead_kb now (None when unknown: a partition, a virtual filesystem).
    pub read_ahead_kb: Option<u64>,
    /// Pages in the interval: read ahead, used, wasted (summed over the device's files).
    pub ra_pages: u64,
    pub used_pages: u64,
    pub wasted_pages: u64,
    pub ra_pages_s: f64,
    pub used_pages_s: f64,
    pub wasted_pages_s: f64,
    pub waste_pct: Option<f64>,
    /// Readahead bytes as a share of the bytes the disk read (capped at 100).
    pub ra_read_share_pct: Option<f64>,
    /// Pages read ahead and neither used nor evicted yet, in every file of the device (a gauge):
    /// the listed files' and the quiet ones'.
    pub pending_pages: u64,
    /// Files with pages pending but no row: no readahead activity lately (their pages are in
    /// `pending_pages`).
    pub quiet_files: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RaFileModel {
    /// The path when known, else "major:minor:inode"; for a summed row its label.
    pub path: String,
    /// "N other files" on the row that sums a device's files beyond the sample's rows (the
    /// collector's budget); on a file's row without a path, what it is when known (`[vda
    /// metadata/journal]`, `[vda metadata]`, also its `path`); else None.
    pub label: Option<String>,
    pub path_known: bool,
    pub dev: String,
    pub ino: u64,
    /// The device name (as in `devices[].name`).
    pub device: String,
    pub sync_events: u64,
    pub async_events: u64,
    pub windows: u64,
    /// The current (last) window, pages, and how it moved since the previous sample.
    pub window_pages: u64,
    pub window_trend: WindowTrend,
    /// The file's maximum window (the kernel's `ra_pages` for it), pages.
    pub max_window_pages: u64,
    pub ra_pages: u64,
    pub used_pages: u64,
    pub wasted_pages: u64,
    pub waste_pct: Option<f64>,
    pub pending_pages: u64,
    pub mmap_miss: u64,
    /// "comm(pid)" of the processes that triggered readahead on the file.
    pub processes: Vec<String>,
    /// Time from readahead to first use in the interval: log2 µs buckets.
    pub first_use_hist: Vec<u64>,
    /// Windows since the file's row began (first seen, or listed again after a quiet spell) that
    /// no sync/async readahead event opened: the read-around of page faults through a mapping.
    pub read_around_windows: u64,
    /// `window_pages` in KiB (page size from the sample).
    pub window_kb: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WindowTrend {
    #[default]
    Steady,
    Growing,
    Collapsing,
}

impl WindowTrend {
    pub fn arrow(self) -> &'static str {
        match self {
            WindowTrend::Steady => "=",
            WindowTrend::Growing => "↑",
            WindowTrend::Collapsing => "↓",
        }
    }
}

/// Waste % = wasted / (used + wasted) × 100: of the readahead pages whose fate was settled in the
/// interval, the share evicted unused. None when nothing settled.
pub fn waste_pct(used: u64, wasted: u64) -> Option<f64> {
    let settled = used + wasted;
    (settled > 0).then(|| wasted as f64 * 100.0 / settled as f64)
}

/// A cumulative counter's growth; a counter that went back (the file's entry was dropped and made
/// again) counts from zero.
fn grown(prev: u64, cur: u64) -> u64 {
    if cur >= prev {
        cur - prev
    } else {
        cur
    }
}

pub fn compute(prev: Option<&Sample>, cur: &Sample, secs: f64) -> Option<ReadaheadModel> {
    compute_reusing(prev, cur, secs, &mut SteadyRows::default())
}

/// [`compute`], reusing the rows of files that did not change since the Model `steady` was
/// carried from (see [`steady_row`]); `steady` is then this Model's. A stream of Models carries
/// it from one Model to the next (`model::stream`).
pub fn compute_reusing(
    prev: Option<&Sample>,
    cur: &Sample,
    secs: f64,
    steady: &mut SteadyRows,
) -> Option<ReadaheadModel> {
    let c = cur.bpf.readahead.as_ref()?;
    let empty = ReadaheadSample::default();
    // The first sample after attach: counts since attach are not an interval's.
    let p = match prev.and_then(|p| p.bpf.readahead.as_ref()) {
        Some(p) => p,
        None if prev.is_some() => &empty,
        None => return None,
    };
    let page = cur.page_size.max(1);
    let mut files: Vec<Arc<RaFileModel>> = Vec::with_capacity(c.files.len() + c.others.len());
    // Indexed: thousands of files after a burst of new ones (a search per file was quadratic).
    let index: HashMap<(u32, u64), &Arc<RaFileSample>> =
        p.files.iter().map(|o| ((o.dev, o.ino), o)).collect();
    let last_steady = std::mem::take(&mut steady.rows);
    for f in &c.files {
        let m = match index.get(&(f.dev, f.ino)) {
            Some(before) if Arc::ptr_eq(before, f) => steady_row(&last_steady, &mut steady.rows, f, cur),
            before => Arc::new(file_model(before.map(|b| &***b), f, cur)),
        };
        if m.ra_pages + m.used_pages + m.wasted_pages + m.windows + m.pending_pages > 0 {
            files.push(m);
        }
    }
    for o in &c.others {
        files.push(Arc::new(others_model(o, cur)));
    }
    files.sort_by(|a, b| {
        b.wasted_pages.cmp(&a.wasted_pages).then(b.ra_pages.cmp(&a.ra_pages)).then(a.path.cmp(&b.path))
    });

    let mut devices: Vec<RaDeviceModel> = Vec::new();
    for f in &files {
        let d = match devices.iter_mut().find(|d| d.dev == f.dev) {
            Some(d) => d,
            None => {
                devices.push(RaDeviceModel {
                    name: f.device.clone(),
                    dev: f.dev.clone(),
                    read_ahead_kb: read_ahead_kb(cur, &f.device),
                    ..Default::default()
                });
                devices.last_mut().expect("just pushed")
            }
        };
        d.ra_pages += f.ra_pages;
        d.used_pages += f.used_pages;
        d.wasted_pages += f.wasted_pages;
        d.pending_pages += f.pending_pages;
    }
    // Files with pages pending but no row (quiet lately): in their device's gauge.
    for q in &c.quiet {
        let dev = format!("{}:{}", q.dev >> 20, q.dev & ((1 << 20) - 1));
        let name = device_name(cur, q.dev).unwrap_or_else(|| dev.clone());
        let d = match devices.iter_mut().find(|d| d.dev == dev) {
            Some(d) => d,
            None => {
                devices.push(RaDeviceModel {
                    read_ahead_kb: read_ahead_kb(cur, &name),
                    name,
                    dev,
                    ..Default::default()
                });
                devices.last_mut().expect("just pushed")
            }
        };
        d.pending_pages += q.pending_pages;
        d.quiet_files += q.files;
    }
    // A device whose readahead was evicted unused lately (the hint's window) keeps a row.
    for r in c.recent.iter().filter(|r| r.wasted_pages > 0) {
        let dev = format!("{}:{}", r.dev >> 20, r.dev & ((1 << 20) - 1));
        if !devices.iter().any(|d| d.dev == dev) {
            let name = device_name(cur, r.dev).unwrap_or_else(|| dev.clone());
            devices.push(RaDeviceModel {
                read_ahead_kb: read_ahead_kb(cur, &name),
                name,
                dev,
                ..Default::default()
            });
        }
    }
    for d in &mut devices {
        d.ra_pages_s = rate(d.ra_pages, secs);
        d.used_pages_s = rate(d.used_pages, secs);
        d.wasted_pages_s = rate(d.wasted_pages, secs);
        d.waste_pct = waste_pct(d.used_pages, d.wasted_pages);
        d.ra_read_share_pct = prev.and_then(|p| disk_read_bytes(p, cur, &d.name)).and_then(|read| {
            (read > 0).then(|| (d.ra_pages as f64 * page as f64 * 100.0 / read as f64).min(100.0))
        });
    }
    devices.sort_by(|a, b| a.name.cmp(&b.name));
    let mut model = ReadaheadModel {
        untracked_pages: grown(p.untracked_pages, c.untracked_pages),
        untracked_pages_total: c.untracked_pages,
        untracked_files_total: c.untracked_files,
        hints: Vec::new(),
        devices,
        files,
    };
    model.hints = hints(&model, cur);
    Some(model)
}

fn rate(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

/// The last Model's rows of files whose sample row did not change, by the row's address: see
/// [`steady_row`]. Each entry holds the sample row, so the address is not reused while kept.
#[derive(Clone, Debug, Default)]
pub struct SteadyRows {
    rows: RowsByAddress,
}

type RowsByAddress = HashMap<usize, (Arc<RaFileSample>, u64, Arc<RaFileModel>)>;

/// The model of a file whose row is the same in both samples (the collector shares a row whose
/// counters did not move, src/bpf/readahead.rs): every count of the interval is zero, and the row
/// depends only on the sample row, its device's name and the page size. Such rows are files
/// listed for a while after their last activity (src/bpf/readahead.rs RA_LINGER: dozens at
/// `--interval 0.1` after a burst of program starts), so the row built for the last Model is
/// used again when those are the same.
fn steady_row(
    last: &RowsByAddress,
    kept: &mut RowsByAddress,
    f: &Arc<RaFileSample>,
    cur: &Sample,
) -> Arc<RaFileModel> {
    let key = Arc::as_ptr(f) as usize;
    let same_device = |m: &RaFileModel| match device_name_ref(cur, f.dev) {
        Some(name) => m.device == name,
        None => m.device == m.dev,
    };
    let model = match last.get(&key) {
        Some((row, page, m)) if Arc::ptr_eq(row, f) && *page == cur.page_size && same_device(m) => m.clone(),
        _ => Arc::new(file_model(Some(f), f, cur)),
    };
    kept.insert(key, (f.clone(), cur.page_size, model.clone()));
    model
}

fn file_model(prev: Option<&RaFileSample>, f: &RaFileSample, cur: &Sample) -> RaFileModel {
    let d = |get: fn(&RaFileSample) -> u64| grown(prev.map(get).unwrap_or(0), get(f));
    let used = d(|s| s.used_pages);
    let wasted = d(|s| s.wasted_pages);
    let window_trend = match prev.map(|p| p.last_window) {
        Some(w) if f.last_window > w => WindowTrend::Growing,
        Some(w) if f.last_window < w => WindowTrend::Collapsing,
        _ => WindowTrend::Steady,
    };
    let first_use_hist = f
        .use_hist
        .iter()
        .enumerate()
        .map(|(i, &n)| grown(prev.and_then(|p| p.use_hist.get(i).copied()).unwrap_or(0), n))
        .collect();
    let dev = f.dev_name();
    let device = device_name(cur, f.dev).unwrap_or_else(|| dev.clone());
    RaFileModel {
        path: f.path.clone().or_else(|| f.label.clone()).unwrap_or_else(|| format!("{dev}:{}", f.ino)),
        label: f.label.clone(),
        path_known: f.path.is_some(),
        dev,
        ino: f.ino,
        device,
        sync_events: d(|s| s.sync_events),
        async_events: d(|s| s.async_events),
        windows: d(|s| s.windows),
        window_pages: u64::from(f.last_window),
        window_trend,
        max_window_pages: u64::from(f.max_window),
        ra_pages: d(|s| s.ra_pages),
        used_pages: used,
        wasted_pages: wasted,
        waste_pct: waste_pct(used, wasted),
        pending_pages: (f.ra_pages + f.pending_before)
            .saturating_sub(f.used_pages + f.wasted_pages + f.untracked_pages),
        mmap_miss: u64::from(f.mmap_miss),
        processes: f
            .triggers
            .iter()
            .map(|t| format!("{}({})", if t.comm.is_empty() { "?" } else { &t.comm }, t.pid))
            .collect(),
        first_use_hist,
        read_around_windows: f.windows.saturating_sub(f.sync_events + f.async_events),
        window_kb: u64::from(f.last_window) * cur.page_size.max(1) / 1024,
    }
}

/// The summed row of a device's files beyond the sample's rows: its counts are the interval's.
fn others_model(o: &RaOthers, cur: &Sample) -> RaFileModel {
    let dev = format!("{}:{}", o.dev >> 20, o.dev & ((1 << 20) - 1));
    let label = format!("{} other files", o.files);
    RaFileModel {
        path: label.clone(),
        label: Some(label),
        path_known: false,
        device: device_name(cur, o.dev).unwrap_or_else(|| dev.clone()),
        dev,
        sync_events: o.sync_events,
        async_events: o.async_events,
        windows: o.windows,
        ra_pages: o.ra_pages,
        used_pages: o.used_pages,
        wasted_pages: o.wasted_pages,
        waste_pct: waste_pct(o.used_pages, o.wasted_pages),
        first_use_hist: vec![0; ioscope_common::readahead::RA_USE_BUCKETS],
        ..Default::default()
    }
}

/// The block device of a kernel dev_t (major << 20 | minor), from the disks in the sample.
fn device_name(cur: &Sample, dev: u32) -> Option<String> {
    device_name_ref(cur, dev).map(String::from)
}

fn device_name_ref(cur: &Sample, dev: u32) -> Option<&str> {
    let (major, minor) = (dev >> 20, dev & ((1 << 20) - 1));
    cur.disks.iter().find(|d| d.major == major && d.minor == minor).map(|d| d.name.as_str())
}

fn read_ahead_kb(cur: &Sample, name: &str) -> Option<u64> {
    cur.block_settings.iter().find(|b| b.name == name).and_then(|b| b.read_ahead_kb)
}

/// A device's waste across its files: over the last HINT_WINDOW when the sample has it, else over
/// the interval (older recordings). None unless at least [`HINT_MIN_WASTED_PAGES`] were wasted
/// and at least [`HIGH_WASTE_PCT`] of the settled pages; None too when the `hinted` files that got
/// a hint of their own this interval are as many as the files that wasted pages (the device's
/// hint would name no more; in an older recording, when any file got one).
fn device_waste_hint(
    m: &ReadaheadModel,
    d: &RaDeviceModel,
    cur: &Sample,
    low_memory: bool,
    hinted: usize,
) -> Option<String> {
    let recent = cur.bpf.readahead.as_ref().and_then(|r| {
        r.recent.iter().find(|x| format!("{}:{}", x.dev >> 20, x.dev & ((1 << 20) - 1)) == d.dev)
    });
    let (used, wasted, files, span) = match recent {
        Some(r) => {
            (r.used_pages, r.wasted_pages, Some(r.wasted_files), format!(" in the last {:.0} s", r.secs))
        }
        None if cur.bpf.readahead.as_ref().is_some_and(|r| !r.recent.is_empty()) => return None,
        None => (d.used_pages, d.wasted_pages, None, String::new()),
    };
    let pct = waste_pct(used, wasted)?;
    if wasted < HINT_MIN_WASTED_PAGES || pct < HIGH_WASTE_PCT {
        return None;
    }
    if hinted > 0 && files.is_none_or(|n| n <= hinted as u64) {
        return None;
    }
    let dev_files: Vec<&RaFileModel> =
        m.files.iter().filter(|f| f.dev == d.dev && f.label.is_none()).map(|f| &**f).collect();
    let mut who: Vec<&str> = dev_files.iter().flat_map(|f| f.processes.iter().map(String::as_str)).collect();
    who.sort_unstable();
    who.dedup();
    let who = if who.is_empty() { "the application".to_string() } else { who.join(", ") };
    let now = d.read_ahead_kb.map(|kb| format!(" (now {kb} KiB)")).unwrap_or_default();
    let mut remedies = vec![format!("lower read_ahead_kb on {}{now}", d.name)];
    if dev_files.iter().any(|f| f.mmap_miss > 0 || f.read_around_windows > 0) {
        remedies.push(format!("madvise(MADV_RANDOM) on the mappings in {who}"));
    } else {
        remedies.push(format!("posix_fadvise(POSIX_FADV_RANDOM) in {who}"));
    }
    if low_memory {
        remedies.push("more memory (little is available: pages are evicted before use)".into());
    }
    let across = files.map(|n| format!(" across {n} files")).unwrap_or_else(|| " across its files".into());
    Some(format!(
        "{}: {pct:.0}% of readahead evicted unused ({wasted} pages{across}{span}); remedies: {}",
        d.name,
        remedies.join("; ")
    ))
}

fn disk_read_bytes(prev: &Sample, cur: &Sample, name: &str) -> Option<u64> {
    let c = cur.disks.iter().find(|d| d.name == name)?;
    let p = prev.disks.iter().find(|d| d.name == name)?;
    Some(c.sectors_read.saturating_sub(p.sectors_read) * 512)
}

/// Plain-language hints: high waste (with the remedies that fit what was seen: read-around of a
/// mapping calls for madvise, read() for posix_fadvise) and small windows on sequential read()ers
/// (async readahead and no read-around). Waste is weighed per file over the interval, and per
/// device over the last [`crate::bpf::readahead::HINT_WINDOW`] across all its files (waste
/// spread over hundreds of files, none alone worth a hint, and held while it goes on): a device
/// gets one unless its files that got a hint of their own this interval are all that wasted
/// pages (a column store's few files over 256 pages in one interval do not hide the rest).
fn hints(m: &ReadaheadModel, cur: &Sample) -> Vec<String> {
    let mut out = Vec::new();
    // The device of each file that got a waste hint of its own.
    let mut hinted_files: Vec<&str> = Vec::new();
    let mem = &cur.memory;
    let low_memory = mem.total_bytes > 0
        && (mem.available_bytes as f64) * 100.0 / (mem.total_bytes as f64) < LOW_MEMORY_PCT;
    for f in m.files.iter().filter(|f| f.label.is_none()) {
        // Formatted only for a file that gets a hint (most rows get none, every sample).
        let now = || {
            let ra_kb = m.devices.iter().find(|d| d.dev == f.dev).and_then(|d| d.read_ahead_kb);
            ra_kb.map(|kb| format!(" (now {kb} KiB)")).unwrap_or_default()
        };
        if f.wasted_pages >= HINT_MIN_WASTED_PAGES && f.waste_pct.is_some_and(|w| w >= HIGH_WASTE_PCT) {
            let who =
                if f.processes.is_empty() { "the application".to_string() } else { f.processes.join(", ") };
            let now = now();
            let mut remedies = vec![format!("lower read_ahead_kb on {}{now}", f.device)];
            // Read-around on faults (mmap) vs read() readahead: the call that fits.
            if f.mmap_miss > 0 || f.read_around_windows > 0 {
                remedies.push(format!("madvise(MADV_RANDOM) on the mapping in {who}"));
            } else {
                remedies.push(format!("posix_fadvise(POSIX_FADV_RANDOM) in {who}"));
            }
            if low_memory {
                remedies.push("more memory (little is available: pages are evicted before use)".into());
            }
            out.push(format!(
                "{}: {:.0}% of readahead evicted unused ({} pages); remedies: {}",
                f.path,
                f.waste_pct.unwrap_or(0.0),
                f.wasted_pages,
                remedies.join("; ")
            ));
            hinted_files.push(&f.dev);
        } else if f.async_events > 0
            && f.read_around_windows == 0
            && f.window_pages > 0
            && f.window_pages >= f.max_window_pages
        {
            let window_kb = f.max_window_pages * cur.page_size.max(1) / 1024;
            if window_kb <= SMALL_WINDOW_KB {
                let now = now();
                out.push(format!(
                    "{}: sequential reader held to {window_kb} KiB windows; raise read_ahead_kb on {}{now}",
                    f.path, f.device
                ));
            }
        }
    }
    for d in &m.devices {
        let hinted = hinted_files.iter().filter(|&&dev| dev == d.dev).count();
        if let Some(h) = device_waste_hint(m, d, cur, low_memory, hinted) {
            out.push(h);
        }
    }
    if m.untracked_pages > 0 {
        out.push(format!(
            "{} readahead pages not tracked this interval: the page map is full (used/wasted undercounted)",
            m.untracked_pages
        ));
    }
    out
}
