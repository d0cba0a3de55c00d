//! The readahead probes' userspace half: offsets from tracefs, attaching, and reading RA_FILES
//! into a [`ReadaheadSample`] with each file's path resolved from /proc (a bounded cache).

use std::collections::HashMap as StdHashMap;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use aya::maps::{Array, HashMap, MapData, PerCpuArray};
use aya::Ebpf;
use ioscope_common::kernel_dev_major_minor;
use ioscope_common::readahead::{
    RaFileKey, RaFileStats, RaLayout, RaShared, RaTotals, NO_REQ_COUNT, RA_FILES_INSERTS_MAP, RA_FILES_MAP,
    RA_PAGES_MAX, RA_SHARED_MAP, RA_TOTALS_MAP,
};

use super::counters::Accumulate;
use super::resolve::files::{names, scan_process_dirs, MAX_FDS_PER_SCAN};
use super::tracefs;
use crate::sample::readahead::{RaFileSample, RaOthers, RaQuiet, RaTrigger, ReadaheadSample};
use crate::sample::BpfProgramStatus;
use crate::util::SLOW_REFRESH;

/// Every readahead program: (program, category, event), in the order [`fill_layout`] handles them.
pub const PROBES: [(&str, &str, &str); 9] = [
    ("readahead_sync_ra", "readahead", "page_cache_sync_ra"),
    ("readahead_async_ra", "readahead", "page_cache_async_ra"),
    ("readahead_ra_order", "readahead", "page_cache_ra_order"),
    ("readahead_ra_unbounded", "readahead", "page_cache_ra_unbounded"),
    ("readahead_add_to_page_cache", "filemap", "mm_filemap_add_to_page_cache"),
    ("readahead_delete_from_page_cache", "filemap", "mm_filemap_delete_from_page_cache"),
    ("readahead_get_pages", "filemap", "mm_filemap_get_pages"),
    ("readahead_map_pages", "filemap", "mm_filemap_map_pages"),
    ("readahead_fault", "filemap", "mm_filemap_fault"),
];

/// The regular-tracepoint twin of the raw read-path program (see [`attach`]).
const GET_PAGES: &str = "readahead_get_pages";

/// Files listed last that are looked up one by one (~1.5 µs each) rather than scanning RA_FILES
/// (~30–40 µs: every one of its 8,192 buckets), while nothing was inserted since the last scan.
const KEYS_MAX: usize = 16;
/// Most paths remembered (twice the file map: a path outlives its entry for a while). Beyond it
/// only the listed files' paths are kept (see [`PathCache::bound`]).
const PATH_CACHE_MAX: usize = 2 * ioscope_common::readahead::RA_FILES_MAX as usize;

/// Reads each probe's format file; returns the layout and, per probe, Ok or why not. `hidden`:
/// tracepoints ("category:event") to treat as missing (the lab's cost run, as for the page cache).
pub fn layout(tracefs_dir: &Path, hidden: &[String]) -> (RaLayout, Vec<Result<(), String>>) {
    let mut l = RaLayout::UNSET;
    let results = tracefs::fill_per_probe(
        PROBES.iter().map(|(_, category, event)| (*category, *event)),
        |category, event| {
            if hidden.iter().any(|h| *h == format!("{category}:{event}")) {
                return Err(anyhow!("tracepoint {category}:{event} hidden on request"));
            }
            std::fs::read_to_string(tracefs_dir.join("events").join(category).join(event).join("format"))
                .with_context(|| format!("tracepoint {category}:{event} is not available on this kernel"))
        },
        |i, text| fill_layout(&mut l, i, text),
    );
    (l, results)
}

/// Fills in the offsets of probe `index` (of [`PROBES`]). Events that share a layout in the
/// programs (sync/async, add/delete, get/map pages) must agree, else the second one is refused.
pub fn fill_layout(l: &mut RaLayout, index: usize, text: &str) -> Result<()> {
    let f = tracefs::parse_format(text)?;
    let at = |name: &str, size: u32| -> Result<u32> { Ok(f.field_sized(name, size)?.offset) };
    let same = |what: &str, a: &[u32], b: &[u32]| -> Result<()> {
        if a != b {
            return Err(anyhow!("{} lays out its fields unlike {what}", f.name));
        }
        Ok(())
    };
    match index {
        0 | 1 => {
            let offs = [
                at("s_dev", 4)?,
                at("i_ino", 8)?,
                at("size", 4)?,
                at("ra_pages", 4)?,
                at("mmap_miss", 4)?,
                at("index", 8)?,
            ];
            if l.sync_ok == 1 || l.async_ok == 1 {
                let had = [l.ra_dev, l.ra_ino, l.ra_size, l.ra_ra_pages, l.ra_mmap_miss, l.ra_index];
                same("page_cache_sync_ra", &had, &offs)?;
            }
            [l.ra_dev, l.ra_ino, l.ra_size, l.ra_ra_pages, l.ra_mmap_miss, l.ra_index] = offs;
            if index == 0 {
                // The pages the read miss asked for (demand, not readahead); without it every
                // page of the window counts as readahead.
                l.ra_req_count = f.field_sized("req_count", 8).map_or(NO_REQ_COUNT, |x| x.offset);
                l.sync_ok = 1;
            } else {
                l.async_ok = 1;
            }
        }
        2 => {
            l.order_dev = at("s_dev", 4)?;
            l.order_ino = at("i_ino", 8)?;
            l.order_index = at("index", 8)?;
            l.order_size = at("size", 4)?;
            l.order_ra_pages = at("ra_pages", 4)?;
            l.order_ok = 1;
        }
        3 => {
            l.unbounded_dev = at("s_dev", 4)?;
            l.unbounded_ino = at("i_ino", 8)?;
            l.unbounded_index = at("index", 8)?;
            l.unbounded_nr = at("nr_to_read", 8)?;
            l.unbounded_ok = 1;
        }
        4 | 5 => {
            let offs =
                [at("s_dev", 4)?, at("i_ino", 8)?, at("index", 8)?, super::page_cache::order_field(&f)?];
            if l.add_ok == 1 || l.delete_ok == 1 {
                same(
                    "mm_filemap_add_to_page_cache",
                    &[l.folio_dev, l.folio_ino, l.folio_index, l.folio_order],
                    &offs,
                )?;
            }
            [l.folio_dev, l.folio_ino, l.folio_index, l.folio_order] = offs;
            if index == 4 {
                l.add_ok = 1;
            } else {
                l.delete_ok = 1;
            }
        }
        6 | 7 => {
            let offs = [at("s_dev", 4)?, at("i_ino", 8)?, at("index", 8)?, at("last_index", 8)?];
            if l.get_ok == 1 || l.map_ok == 1 {
                same(
                    "mm_filemap_get_pages",
                    &[l.range_dev, l.range_ino, l.range_index, l.range_last],
                    &offs,
                )?;
            }
            [l.range_dev, l.range_ino, l.range_index, l.range_last] = offs;
            if index == 6 {
                l.get_ok = 1;
            } else {
                l.map_ok = 1;
            }
        }
        8 => {
            l.fault_dev = at("s_dev", 4)?;
            l.fault_ino = at("i_ino", 8)?;
            l.fault_index = at("index", 8)?;
            l.fault_ok = 1;
        }
        _ => return Err(anyhow!("no readahead probe {index}")),
    }
    Ok(())
}

/// Attaches every program whose layout is known and takes the maps. With `raw_read` (the
/// page-cache program on the raw `mm_filemap_get_pages` is attached), that program serves the
/// read path for readahead too and `readahead_get_pages` (a regular tracepoint, whose record costs
/// several times more per read) is not attached.
/// `fallbacks`: programs on kernel functions for the readahead tracepoints the kernel lacks
/// (super::readahead_fn), attached with `fn_btf` (`no_trampoline`: as their kprobe variants).
pub fn attach(
    ebpf: &mut Ebpf,
    layouts: &[Result<(), String>],
    raw_read: bool,
    fallbacks: &[super::readahead_fn::Planned],
    (fn_btf, no_trampoline): (Option<&aya::Btf>, bool),
) -> (Vec<BpfProgramStatus>, Option<ReadaheadMaps>) {
    let mut statuses: Vec<BpfProgramStatus> = PROBES
        .iter()
        .zip(layouts)
        .filter(|((program, _, _), _)| !(raw_read && *program == GET_PAGES))
        .map(|((program, category, event), l)| {
            let tracepoint = format!("{category}:{event}");
            if let Some(s) =
                super::readahead_fn::attach(ebpf, fallbacks, (fn_btf, no_trampoline), program, &tracepoint)
            {
                return s;
            }
            match l {
                Ok(()) => super::attach::attach_tracepoint(ebpf, program, category, event),
                Err(e) => super::attach::program_status(program, category, event, Err(e.clone())),
            }
        })
        .collect();
    // Without a window or an insertion nothing is ever remembered.
    let needed = ["readahead:page_cache_ra_order", "filemap:mm_filemap_add_to_page_cache"];
    let stands_for = |s: &BpfProgramStatus| s.fallback_for.clone().unwrap_or_else(|| s.tracepoint.clone());
    if !needed.iter().all(|t| statuses.iter().any(|s| s.attached && stands_for(s) == *t)) {
        return (statuses, None);
    }
    match ReadaheadMaps::take(ebpf, &statuses) {
        Ok(maps) => (statuses, Some(maps)),
        Err(e) => {
            for s in statuses.iter_mut() {
                s.error.get_or_insert_with(|| format!("{e:#}"));
            }
            (statuses, None)
        }
    }
}

/// The loads [`attach`] will ask for when every first choice holds (see super::preload), with the
/// same arguments.
pub fn loads<'a>(
    layouts: &[Result<(), String>],
    raw_read: bool,
    fallbacks: &'a [super::readahead_fn::Planned],
    (fn_btf, no_trampoline): (Option<&'a aya::Btf>, bool),
) -> Vec<super::preload::Planned<'a>> {
    let mut loads = Vec::new();
    for ((program, _, _), l) in
        PROBES.iter().zip(layouts).filter(|((p, _, _), _)| !(raw_read && *p == GET_PAGES))
    {
        match (fallbacks.iter().find(|f| f.fallback.probe == *program), fn_btf) {
            (Some(plan), Some(btf)) => {
                let fb = plan.fallback;
                let how = (fb.program, super::kfunc::Hook::Fentry);
                loads.extend(super::kfunc::fallback_loads(
                    how,
                    plan.function,
                    btf,
                    fb.kprobes,
                    no_trampoline,
                ));
            }
            _ if l.is_ok() => loads.push((program.to_string(), super::preload::How::TracePoint)),
            _ => {}
        }
    }
    loads
}

pub struct ReadaheadMaps {
    files: HashMap<MapData, RaFileKey, RaFileStats>,
    totals: PerCpuArray<MapData, RaTotals>,
    attached: std::sync::Arc<Vec<String>>,
    paths: PathCache,
    /// Each entry kept in RA_FILES as last read (see [`ReadaheadMaps::read`]): an entry read
    /// unchanged, with nothing pending, is removed.
    last: StdHashMap<RaFileKey, Tracked>,
    /// The kernel reads and deletes in batches (see crate::bpf::map_batch); false once it refused.
    batch: bool,
    /// RA_FILES is not read while it stays empty (see crate::bpf::inserts): on a quiet machine
    /// every entry is removed within two samples.
    gate: super::inserts::EmptyGate,
    /// RA_SHARED: its count of entry changes says whether RA_FILES moved since it was last read.
    shared: Array<MapData, RaShared>,
    /// That count as read just before RA_FILES was last read (scanned or looked up).
    read_updates: Option<u64>,
    /// The triggering processes' names, as read and when: a listed file's triggers' names are
    /// read again only after [`COMM_FRESH`] (an exec renames within that time).
    comms: StdHashMap<u32, (String, std::time::Instant)>,
    /// Each listed file's row as last built, and when its path was last looked up: a file listed
    /// while its counters do not move ([`RA_LINGER`]) has the same row but for the path, checked
    /// again only after [`crate::util::SLOW_REFRESH`].
    rows: StdHashMap<RaFileKey, (std::sync::Arc<RaFileSample>, std::time::Instant)>,
    /// RA_PAGES's size as created (the loader may make it smaller than compiled: see
    /// crate::bpf::map_memory).
    pub(crate) page_map_capacity: u64,
    /// Each read's growth of used and wasted pages per device (and its files with waste), for
    /// the last [`HINT_WINDOW`] ([`ReadaheadSample::recent`]).
    recent: std::collections::VecDeque<(std::time::Instant, StdHashMap<u32, Fates>)>,
    /// When the maps were first read (the window's span until it is full).
    first_read: Option<std::time::Instant>,
}

/// The pages whose fate was settled on one device in one read, and its files with waste (inodes).
#[derive(Clone, Debug, Default)]
struct Fates {
    used: u64,
    wasted: u64,
    wasted_files: Vec<u64>,
}

/// The span the readahead waste hint weighs (crate::model::readahead): a device's waste over the
/// last 10 s, so the hint holds while waste goes on rather than come and go with each interval.
pub const HINT_WINDOW: std::time::Duration = std::time::Duration::from_secs(10);

/// Sums the fates of the reads in `recent` per device; its files with waste are the distinct
/// inodes (a file wasting in several reads counts once).
fn recent_fates(
    recent: &std::collections::VecDeque<(std::time::Instant, StdHashMap<u32, Fates>)>,
    secs: f64,
) -> Vec<crate::sample::readahead::RaRecent> {
    type Sums = (u64, u64, std::collections::HashSet<u64>);
    let mut by_dev: std::collections::BTreeMap<u32, Sums> = std::collections::BTreeMap::new();
    for (_, m) in recent {
        for (dev, f) in m {
            let e = by_dev.entry(*dev).or_default();
            e.0 += f.used;
            e.1 += f.wasted;
            e.2.extend(f.wasted_files.iter().copied());
        }
    }
    by_dev
        .into_iter()
        .map(|(dev, (used, wasted, files))| crate::sample::readahead::RaRecent {
            dev,
            secs,
            used_pages: used,
            wasted_pages: wasted,
            wasted_files: files.len() as u64,
        })
        .collect()
}

/// How long a triggering process's name is used before it is read again.
pub const COMM_FRESH: std::time::Duration = std::time::Duration::from_secs(1);

impl ReadaheadMaps {
    fn take(ebpf: &mut Ebpf, statuses: &[BpfProgramStatus]) -> Result<ReadaheadMaps> {
        let mut take =
            |name: &str| ebpf.take_map(name).ok_or_else(|| anyhow!("map {name} is not in the eBPF object"));
        let files = HashMap::try_from(take(RA_FILES_MAP)?)?;
        let totals = PerCpuArray::try_from(take(RA_TOTALS_MAP)?)?;
        let shared = Array::try_from(take(RA_SHARED_MAP)?)?;
        let gate = super::inserts::EmptyGate::take(ebpf, RA_FILES_INSERTS_MAP)?;
        // What each stands for: the tracepoint, also when a fallback feeds it.
        let attached = statuses
            .iter()
            .filter(|s| s.attached)
            .map(|s| s.fallback_for.clone().unwrap_or_else(|| s.tracepoint.clone()))
            .collect::<Vec<_>>();
        Ok(ReadaheadMaps {
            files,
            totals,
            attached: attached.into(),
            paths: PathCache::default(),
            last: StdHashMap::new(),
            batch: true,
            gate,
            shared,
            read_updates: None,
            comms: StdHashMap::new(),
            rows: StdHashMap::new(),
            page_map_capacity: u64::from(RA_PAGES_MAX),
            recent: std::collections::VecDeque::new(),
            first_read: None,
        })
    }

    /// The entries of the files listed last (see [`super::inserts::Need::Keys`]), looked up one
    /// by one; a file gone from the map is skipped.
    fn looked_up(&self) -> Vec<(RaFileKey, RaFileStats)> {
        self.last.keys().filter_map(|k| Some((*k, self.files.get(k, 0).ok()?))).collect()
    }

    /// Every RA_FILES entry, in batches when the kernel has them (else entry by entry).
    fn entries(&mut self) -> Result<Vec<(RaFileKey, RaFileStats)>> {
        if self.batch {
            use aya::maps::IterableMap;
            use std::os::fd::AsFd;
            let fd = self.files.map().fd().as_fd();
            let max = ioscope_common::readahead::RA_FILES_MAX as usize;
            let read = super::map_batch::lookup_if_supported::<RaFileKey, RaFileStats>(
                &mut self.batch,
                fd,
                None,
                false,
                max,
            );
            if let Some(entries) = read.context("reading RA_FILES")? {
                return Ok(entries
                    .into_iter()
                    .filter_map(|e| Some((e.key, e.values.into_iter().next()?)))
                    .collect());
            }
        }
        self.files.iter().collect::<Result<_, _>>().context("reading RA_FILES")
    }

    /// Removes entries from RA_FILES (in batches when the kernel has them).
    fn remove(&mut self, keys: &[RaFileKey]) {
        if self.batch {
            use aya::maps::IterableMap;
            use std::os::fd::AsFd;
            if super::map_batch::delete(self.files.map().fd().as_fd(), keys).is_ok() {
                return;
            }
        }
        for key in keys {
            let _ = self.files.remove(key);
        }
    }

    /// The counters as of now, for the files whose entry changed in the last [`RA_LINGER`]. An
    /// entry read unchanged with nothing pending is removed from RA_FILES and left out of the
    /// sample (no activity in the interval: no row); the programs make it again from zero at the
    /// file's next readahead, and a file absent from the previous sample counts from zero in the
    /// model, so the figures stay right. An entry with pages still pending stays in RA_FILES (its
    /// pages' first use or eviction is counted there), but once unchanged for [`RA_LINGER`] it
    /// has no row, only its device's [`RaQuiet`] gauge; listed again at its next change, its row
    /// counts from where it went quiet ([`RaFileSample::pending_before`]). The map thus holds the
    /// files active in the last two intervals and those with pages pending, and a sample's rows
    /// are the files active lately, not every file whose pages stay cached: after a burst of
    /// new files the map empties within two samples and the rows go within [`RA_LINGER`]. An
    /// increment landing between an entry's read and its removal is lost (microseconds, as for
    /// FILE_IO).
    /// `known` is what the files view already resolved, (kernel dev_t, inode) → path: used before
    /// looking through the triggering processes. The resolver gives the path the kernel named
    /// the file by (src/bpf/file_names.rs), checked, else the one its file handle opens.
    pub fn read(
        &mut self,
        known: &StdHashMap<(u32, u64), String>,
        resolver: &mut super::resolve::files::FileResolver,
    ) -> Result<ReadaheadSample> {
        let now = std::time::Instant::now();
        // No entry changed since the last read (the programs count each change after making it,
        // and the count is read before the map): the map holds what that read found.
        let updates = self.shared.get(&0, 0).ok().map(|s| s.updates);
        let steady = updates.is_some() && self.read_updates == updates;
        let need = self.gate.need(now, self.last.len(), KEYS_MAX, steady);
        let scan = need == super::inserts::Need::Scan;
        let entries = match need {
            super::inserts::Need::Nothing => Vec::new(),
            super::inserts::Need::Same => self.last.iter().map(|(k, t)| (*k, t.stats)).collect(),
            super::inserts::Need::Keys => self.looked_up(),
            super::inserts::Need::Scan => self.entries()?,
        };
        if matches!(need, super::inserts::Need::Keys | super::inserts::Need::Scan) {
            self.read_updates = updates;
        }
        // This sample's files without a path ask the walks again below.
        resolver.clear_wanted();
        // Changed (or pending) entries stay; the others are removed (see keep_in_sample). Those
        // quiet for RA_LINGER stay without a row.
        let mut kept: Vec<(RaFileKey, RaFileStats, u64)> = Vec::with_capacity(entries.len());
        let mut removed = Vec::new();
        let mut last = StdHashMap::with_capacity(entries.len().min(RA_ROWS));
        let mut quiet: Vec<RaQuiet> = Vec::new();
        let mut fates: StdHashMap<u32, Fates> = StdHashMap::new();
        for (key, s) in entries {
            let before = self.last.get(&key);
            let used = s.used_pages.saturating_sub(before.map_or(0, |t| t.stats.used_pages));
            let wasted = s.wasted_pages.saturating_sub(before.map_or(0, |t| t.stats.wasted_pages));
            if used + wasted > 0 {
                let f = fates.entry(key.dev).or_default();
                f.used += used;
                f.wasted += wasted;
                if wasted > 0 {
                    f.wasted_files.push(key.ino);
                }
            }
            if !keep_in_sample(before.map(|t| &t.stats), &s) {
                removed.push(key);
                continue;
            }
            match before {
                Some(t) if t.stats == s && now.duration_since(t.changed_at) >= RA_LINGER => {
                    // Quiet: no row. The row it had ends here; a later one counts from now.
                    let base = if t.listed { Some(s) } else { t.base };
                    last.insert(key, Tracked { stats: s, changed_at: t.changed_at, base, listed: false });
                    add_quiet(&mut quiet, key.dev, s.pending());
                }
                _ => kept.push((key, s, activity(before.map(|t| &t.stats), &s))),
            }
        }
        if scan {
            // Every entry read removed below: the map is empty but for inserts since.
            self.gate.scanned(kept.is_empty() && last.is_empty(), now);
        }
        // At most RA_ROWS files with a row (every file with pages pending, then the most active):
        // the rest are summed per device and removed, so that their next readahead counts from
        // zero (the model would otherwise count their cumulative counters again).
        kept.sort_by(|a, b| (b.1.pending() > 0).cmp(&(a.1.pending() > 0)).then(b.2.cmp(&a.2)));
        // Among the files as active as the last one listed, those whose path is known first.
        let cache = &self.paths.known;
        super::resolve::files::prefer_at_cutoff(
            &mut kept,
            RA_ROWS,
            |(_, s, activity)| (s.pending() > 0, *activity),
            |(k, _, _)| {
                let key = (k.dev, k.ino);
                known.contains_key(&key) || cache.contains_key(&key) || resolver.has_kernel_name(k.dev, k.ino)
            },
        );
        let mut others: Vec<RaOthers> = Vec::new();
        let mut files = Vec::with_capacity(kept.len().min(RA_ROWS));
        // Each process is asked at most once per COMM_FRESH, whatever the number of its files.
        let now = std::time::Instant::now();
        let comms = &mut self.comms;
        comms.retain(|_, (_, at)| now.duration_since(*at) < COMM_FRESH);
        let mut rows = StdHashMap::with_capacity(kept.len().min(RA_ROWS));
        for (i, (key, s, _)) in kept.into_iter().enumerate() {
            let before = self.last.get(&key);
            if i >= RA_ROWS && s.remembered() == 0 {
                removed.push(key);
                add_other(&mut others, key.dev, before.map(|t| &t.stats), &s);
                continue;
            }
            // Unchanged since the last read (lingering, or its pages still pending): the same row.
            let unchanged = before.is_some_and(|t| t.stats == s && t.listed);
            let changed_at = match before {
                Some(t) if t.stats == s => t.changed_at,
                _ => now,
            };
            // Listed again after a quiet spell: its row counts from where it went quiet.
            let base = before.and_then(|t| t.base);
            last.insert(key, Tracked { stats: s, changed_at, base, listed: true });
            if let Some((row, at)) =
                self.rows.remove(&key).filter(|(_, at)| unchanged && now.duration_since(*at) < SLOW_REFRESH)
            {
                if row.path.is_none() && row.label.is_none() {
                    resolver.look_for(key.dev, key.ino);
                }
                files.push(row.clone());
                rows.insert(key, (row, at));
                continue;
            }
            let triggers: Vec<RaTrigger> = s
                .triggers
                .iter()
                .filter(|&&pid| pid != 0)
                .map(|&pid| RaTrigger {
                    pid,
                    comm: comms.entry(pid).or_insert_with(|| (comm_of(pid), now)).0.clone(),
                })
                .collect();
            let kernel_name =
                &mut |dev, ino| resolver.known_path(dev, ino).or_else(|| resolver.handle_path(dev, ino));
            let path = self.paths.resolve(key.dev, key.ino, &triggers, known, kernel_name);
            // A block device's or a filesystem's own metadata is labelled so, not looked for.
            let label = if path.is_none() { resolver.label_of(key.dev, key.ino) } else { None };
            // Listed while its pages are pending, whoever named it: the files view's background
            // walks look for it too.
            if path.is_none() && label.is_none() && s.pending() != 0 {
                resolver.look_for(key.dev, key.ino);
            }
            let mut row = match &base {
                Some(b) => {
                    let mut row = to_sample(&key, &since(&s, b), path, triggers);
                    row.pending_before = b.pending();
                    row
                }
                None => to_sample(&key, &s, path, triggers),
            };
            row.label = label;
            let row = std::sync::Arc::new(row);
            rows.insert(key, (row.clone(), now));
            files.push(row);
        }
        self.paths.bound(last.keys().map(|k| (k.dev, k.ino)));
        self.last = last;
        self.rows = rows;
        self.remove(&removed);
        files.sort_by_key(|f| (f.dev, f.ino));
        others.sort_by_key(|o| o.dev);
        quiet.sort_by_key(|q| q.dev);
        let first_read = *self.first_read.get_or_insert(now);
        self.recent.push_back((now, fates));
        while self.recent.front().is_some_and(|(at, _)| now.duration_since(*at) > HINT_WINDOW) {
            self.recent.pop_front();
        }
        let span = now.duration_since(first_read).min(HINT_WINDOW).as_secs_f64();
        let per_cpu = self.totals.get(&0, 0).context("reading RA_TOTALS")?;
        Ok(ReadaheadSample {
            attached: self.attached.clone(),
            files,
            others,
            quiet,
            untracked_pages: per_cpu.iter().map(|t| t.untracked_pages).sum(),
            untracked_files: per_cpu.iter().map(|t| t.untracked_files).sum(),
            page_map_capacity: self.page_map_capacity,
            recent: recent_fates(&self.recent, span),
        })
    }
}

/// What the collector knows of a file's RA_FILES entry between reads.
#[derive(Clone, Copy, Debug)]
struct Tracked {
    /// The counters as last read.
    stats: RaFileStats,
    /// When they were last seen to change (or the entry first read).
    changed_at: std::time::Instant,
    /// The counters when its row last ended (a quiet spell): a row listed again counts from
    /// them. None while it has been listed since it was made.
    base: Option<RaFileStats>,
    /// Whether the last sample had a row for it.
    listed: bool,
}

/// A file with pages pending and no readahead activity for this long has no row of its own (its
/// pages count in its device's [`RaQuiet`] gauge) until its next activity: the rows of a sample
/// are the files active lately, not every file whose read-ahead pages stay cached (every program
/// run leaves its libraries' unused pages pending for as long as they stay cached).
pub const RA_LINGER: std::time::Duration = std::time::Duration::from_secs(5);

/// The counters `s` grew by since `base` (a quiet spell's start); the gauges as they are now.
fn since(s: &RaFileStats, base: &RaFileStats) -> RaFileStats {
    let mut d = *s;
    d.sync_events = s.sync_events.saturating_sub(base.sync_events);
    d.async_events = s.async_events.saturating_sub(base.async_events);
    d.windows = s.windows.saturating_sub(base.windows);
    d.window_pages = s.window_pages.saturating_sub(base.window_pages);
    d.ra_pages = s.ra_pages.saturating_sub(base.ra_pages);
    d.used_pages = s.used_pages.saturating_sub(base.used_pages);
    d.wasted_pages = s.wasted_pages.saturating_sub(base.wasted_pages);
    d.untracked_pages = s.untracked_pages.saturating_sub(base.untracked_pages);
    for (n, b) in d.use_hist.iter_mut().zip(base.use_hist.iter()) {
        *n = n.saturating_sub(*b);
    }
    d
}

/// Adds a quiet file of device `dev` with `pending` pages to the device's gauge.
fn add_quiet(quiet: &mut Vec<RaQuiet>, dev: u32, pending: u64) {
    match quiet.iter_mut().find(|q| q.dev == dev) {
        Some(q) => {
            q.files += 1;
            q.pending_pages += pending;
        }
        None => quiet.push(RaQuiet { dev, files: 1, pending_pages: pending }),
    }
}

pub fn to_sample(
    key: &RaFileKey,
    s: &RaFileStats,
    path: Option<String>,
    triggers: Vec<RaTrigger>,
) -> RaFileSample {
    let mut row = RaFileSample { dev: key.dev, ino: key.ino, path, triggers, ..Default::default() };
    row.accumulate(s);
    row
}

/// Most readahead files with a row of their own in a sample (besides those with pages pending).
pub const RA_ROWS: usize = 256;

/// How much an entry grew since it was last read (pages read ahead, used and wasted, and
/// windows): what ranks the files of a sample.
fn activity(before: Option<&RaFileStats>, now: &RaFileStats) -> u64 {
    let total = |s: &RaFileStats| s.ra_pages + s.used_pages + s.wasted_pages + s.windows;
    total(now).saturating_sub(before.map_or(0, total))
}

/// Adds what file entry `now` of device `dev` counted since it was last read as `before` to the
/// device's summed row.
fn add_other(others: &mut Vec<RaOthers>, dev: u32, before: Option<&RaFileStats>, now: &RaFileStats) {
    let i = match others.iter().position(|o| o.dev == dev) {
        Some(i) => i,
        None => {
            others.push(RaOthers { dev, ..Default::default() });
            others.len() - 1
        }
    };
    let o = &mut others[i];
    let grew = |get: fn(&RaFileStats) -> u64| get(now).saturating_sub(before.map_or(0, get));
    o.files += 1;
    o.sync_events += grew(|s| s.sync_events);
    o.async_events += grew(|s| s.async_events);
    o.windows += grew(|s| s.windows);
    o.ra_pages += grew(|s| s.ra_pages);
    o.used_pages += grew(|s| s.used_pages);
    o.wasted_pages += grew(|s| s.wasted_pages);
}

/// Whether an entry read as `now` stays in RA_FILES and in the sample: it changed since it was
/// last read as `before` (or is new), or folios are still remembered (read ahead and waiting for
/// their first use, or waiting for their read bio): removing it would leave them in RA_PAGES.
fn keep_in_sample(before: Option<&RaFileStats>, now: &RaFileStats) -> bool {
    before != Some(now) || now.remembered() != 0
}

fn comm_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).map(|s| s.trim_end().to_string()).unwrap_or_default()
}

/// Paths of the readahead files: the files view's (checked this sample), else remembered here
/// (checked by `stat` before each use: a renamed file is looked up again, never shown under its
/// old name), else the kernel's name for it, else found in the open files and mappings of the
/// processes that triggered its readahead. A file not found is not looked for again for
/// [`RETRY_AFTER`]: its triggers' fds and maps were read every sample otherwise (hundreds of
/// readlinks a second for one long-lived shell).
///
/// Bounded by [`PATH_CACHE_MAX`] without forgetting a kept file's path: a file whose read-ahead
/// pages stay pending is listed again at their first use or eviction, perhaps long after the
/// kernel's name for it left its LRU map and its reader closed it, and only this cache still knows
/// its path. Clearing the whole cache when full (as it did) left such files without a path for
/// good once a churn of new files had filled it (the 30-minute churn run: 8.5 % of readahead rows).
#[derive(Default)]
struct PathCache {
    known: StdHashMap<(u32, u64), String>,
    tried: StdHashMap<(u32, u64), std::time::Instant>,
    /// Paths are checked without following links (super::resolve::safe_open).
    opener: super::resolve::safe_open::Opener,
}

const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

impl PathCache {
    fn resolve(
        &mut self,
        dev: u32,
        ino: u64,
        triggers: &[RaTrigger],
        hints: &StdHashMap<(u32, u64), String>,
        kernel_name: &mut dyn FnMut(u32, u64) -> Option<String>,
    ) -> Option<String> {
        let (major, minor) = kernel_dev_major_minor(dev);
        let id = (major, minor, ino);
        let found = match hints.get(&(dev, ino)) {
            Some(p) if self.known.get(&(dev, ino)) == Some(p) => return Some(p.clone()),
            Some(p) => Some(p.clone()),
            None => match self.known.get(&(dev, ino)) {
                Some(p) if p.ends_with(" (deleted)") || names(&mut self.opener, p, id) => {
                    return Some(p.clone())
                }
                Some(_) => {
                    self.known.remove(&(dev, ino));
                    None
                }
                None => None,
            },
        };
        let now = std::time::Instant::now();
        let found = found.or_else(|| kernel_name(dev, ino)).or_else(|| {
            if self.tried.get(&(dev, ino)).is_some_and(|t| now.duration_since(*t) < RETRY_AFTER) {
                return None;
            }
            if self.tried.len() >= PATH_CACHE_MAX {
                self.tried.clear();
            }
            self.tried.insert((dev, ino), now);
            // The files resolver's /proc lookup, in the triggering processes' fds and maps.
            let mut found = StdHashMap::new();
            let dirs = triggers.iter().map(|t| std::path::PathBuf::from(format!("/proc/{}", t.pid)));
            scan_process_dirs(dirs, &[id].into(), &mut found, MAX_FDS_PER_SCAN, true);
            found.remove(&id)
        })?;
        self.tried.remove(&(dev, ino));
        self.known.insert((dev, ino), found.clone());
        Some(found)
    }

    /// Once more than [`PATH_CACHE_MAX`] paths are remembered, keeps only those of the `listed`
    /// files (this sample's rows, at most the file map's size: they are asked for again next
    /// sample). A file left out is named again by the kernel at its next readahead.
    fn bound(&mut self, listed: impl Iterator<Item = (u32, u64)>) {
        if self.known.len() <= PATH_CACHE_MAX {
            return;
        }
        let listed: std::collections::HashSet<(u32, u64)> = listed.collect();
        self.known.retain(|key, _| listed.contains(key));
    }
}

/// The readahead fallbacks this kernel gets (planned by [`ReadaheadFamily`]), and why
/// `readahead_sync_ra` has none when it has none: the files family runs `file_sync_ra` where
/// the readahead program on `page_cache_sync_ra` runs. Published only when the fallbacks were
/// planned (a readahead or page-cache tracepoint is missing).
pub struct FallbacksPlanned {
    pub planned: Vec<super::readahead_fn::Planned>,
    pub sync_ra_refused: Option<String>,
}

/// The readahead family: windows, pages read ahead and their fate per file.
#[derive(Default)]
pub struct ReadaheadFamily {
    layout: Option<RaLayout>,
    layouts: Vec<Result<(), String>>,
    fn_layout: Option<ioscope_common::readahead_fn::RaFnLayout>,
    fallbacks: Vec<super::readahead_fn::Planned>,
    /// What the 5.10 fallbacks read (super::readahead_510), when they are configured.
    ra_510: Option<ioscope_common::readahead_510::Ra510Layout>,
    notes: Vec<String>,
    maps: Option<ReadaheadMaps>,
}

impl ReadaheadFamily {
    fn fn_btf<'a>(&self, setup: &super::family::Setup<'a>) -> (Option<&'a aya::Btf>, bool) {
        let btf = setup.btf.filter(|_| !self.fallbacks.is_empty()).map(|k| k.aya_with_functions());
        (btf, setup.options.no_trampoline)
    }
}

impl super::family::Family for ReadaheadFamily {
    fn name(&self) -> &'static str {
        "readahead"
    }

    fn plan(&mut self, setup: &mut super::family::Setup) {
        use ioscope_common::readahead_fn::RaFnLayout;
        let (mut ra_layout, mut layouts) = layout(setup.tracefs, setup.hidden());
        let mut fn_layout = RaFnLayout::UNSET;
        let position = |program: &str| PROBES.iter().position(|(p, _, _)| *p == program);
        if let Some(k) = setup.btf {
            let cache_fallbacks = setup
                .shared
                .get::<super::page_cache::FallbacksPlanned>()
                .map(|f| f.0.clone())
                .unwrap_or_default();
            // The readahead tracepoints (6.18+): fentry on the functions they sit in. Planned too
            // when the page cache's fallbacks read the traceable functions already.
            let traceable = if layouts.iter().any(|l| l.is_err()) {
                Some(setup.traceable())
            } else {
                setup.traceable_if_read()
            };
            if let Some(traceable) = traceable {
                let missing = |program: &str| layouts[position(program)?].as_ref().err().cloned();
                let (planned_layout, planned, refused) = super::readahead_fn::plan(missing, k, traceable);
                for (program, why) in refused {
                    if let Some(i) = position(program) {
                        layouts[i] = Err(why);
                    }
                }
                (fn_layout, self.fallbacks) = (planned_layout, planned);
                let sync_ra_refused =
                    position("readahead_sync_ra").and_then(|i| layouts[i].as_ref().err().cloned());
                setup.shared.put(FallbacksPlanned { planned: self.fallbacks.clone(), sync_ra_refused });
                // Faults seen by the page-cache fallbacks use readahead pages too.
                let on_faults = ["filemap_fault", "filemap_map_pages"];
                if cache_fallbacks.iter().any(|p| on_faults.contains(p)) {
                    if let Err(e) = super::readahead_fn::fill_vm(&mut fn_layout, k) {
                        self.notes
                            .push(format!("readahead: faults without mm_filemap_fault are not uses: {e:#}"));
                    }
                }
            }
            // Reads through the read path's fallback (fexit on filemap_get_pages) are uses too.
            if cache_fallbacks.contains(&"filemap_get_pages") {
                ra_layout.get_ok = 1;
            }
        }
        (self.layout, self.layouts, self.fn_layout) = (Some(ra_layout), layouts, Some(fn_layout));
    }

    fn configure(&mut self, setup: &mut super::family::Setup) {
        let configured = self.fn_layout.is_some_and(|l| l.configured != 0);
        let ra_510 = configured.then(|| setup.btf.map(super::readahead_510::layout));
        self.ra_510 = ra_510.flatten().and_then(|l| l.ok());
    }

    fn globals<'s>(&'s self, loader: &mut aya::EbpfLoader<'s>) {
        use ioscope_common::readahead_510::{Ra510Layout, RA_510_LAYOUT_GLOBAL};
        use ioscope_common::readahead_fn::{RaFnLayout, RA_FN_LAYOUT_GLOBAL};
        let layout = self.layout.as_ref().unwrap_or(&RaLayout::UNSET);
        loader.override_global(ioscope_common::readahead::RA_LAYOUT_GLOBAL, layout, true);
        loader.override_global(
            RA_FN_LAYOUT_GLOBAL,
            self.fn_layout.as_ref().unwrap_or(&RaFnLayout::UNSET),
            true,
        );
        loader.override_global(
            RA_510_LAYOUT_GLOBAL,
            self.ra_510.as_ref().unwrap_or(&Ra510Layout::UNSET),
            true,
        );
    }

    fn loads<'a>(
        &'a self,
        setup: &super::family::Setup<'a>,
        earlier: &[super::preload::Planned<'a>],
    ) -> Vec<super::preload::Planned<'a>> {
        // The read path's program that also feeds readahead (the raw tracepoint or its fallback).
        let raw_read_expected =
            earlier.iter().any(|(p, _)| super::page_cache::READ_PATH.contains(&p.as_str()));
        loads(&self.layouts, raw_read_expected, &self.fallbacks, self.fn_btf(setup))
    }

    fn attach(
        &mut self,
        ebpf: &mut Ebpf,
        setup: &mut super::family::Setup,
        statuses: &mut Vec<BpfProgramStatus>,
    ) {
        let raw_read =
            statuses.iter().any(|p| super::page_cache::READ_PATH.contains(&p.program.as_str()) && p.attached);
        let (programs, maps) = attach(ebpf, &self.layouts, raw_read, &self.fallbacks, self.fn_btf(setup));
        statuses.extend(programs);
        self.maps = maps.map(|mut ra| {
            let compiled = ioscope_common::readahead::RA_PAGES_MAX;
            ra.page_map_capacity =
                u64::from(setup.map_plan.entries(ioscope_common::readahead::RA_PAGES_MAP, compiled));
            ra
        });
    }

    fn notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    fn read(
        &mut self,
        shared: &mut super::family::Shared,
        sample: &mut crate::sample::BpfSample,
    ) -> Vec<String> {
        let Some(maps) = &mut self.maps else { return Vec::new() };
        // The files view's paths, keyed as the readahead map keys files (kernel dev_t, inode).
        let known: StdHashMap<(u32, u64), String> = sample
            .files
            .iter()
            .filter_map(|f| Some((((f.major << 20) | f.minor, f.ino), f.path.clone()?)))
            .collect();
        let resolver = shared.get_or_insert_with(super::resolve::files::FileResolver::default);
        match maps.read(&known, resolver) {
            Ok(ra) => {
                sample.readahead = Some(ra);
                Vec::new()
            }
            Err(e) => vec![format!("{e:#}")],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window's files with waste are distinct files: 32 columns wasting in every read of the
    /// window are 32 files, not one per read (the hint's "across N files").
    #[test]
    fn recent_fates_count_each_wasting_file_once() {
        let now = std::time::Instant::now();
        let mut recent = std::collections::VecDeque::new();
        for read in 0..3u64 {
            let fates =
                Fates { used: 1, wasted: 10 + read, wasted_files: (0..32).map(|i| 100 + i).collect() };
            let other = Fates { used: 5, wasted: 0, wasted_files: Vec::new() };
            recent.push_back((now, StdHashMap::from([(7 << 20, fates), (8 << 20, other)])));
        }
        recent.push_back((
            now,
            StdHashMap::from([(7 << 20, Fates { wasted_files: vec![999], ..Default::default() })]),
        ));
        let sums = recent_fates(&recent, 10.0);
        assert_eq!(sums.len(), 2);
        let loop0 = sums.iter().find(|r| r.dev == 7 << 20).expect("7:0");
        assert_eq!((loop0.used_pages, loop0.wasted_pages, loop0.wasted_files), (3, 33, 33));
        let other = sums.iter().find(|r| r.dev == 8 << 20).expect("8:0");
        assert_eq!((other.used_pages, other.wasted_pages, other.wasted_files), (15, 0, 0));
    }

    /// In each table (6.1+'s, 5.10's), every fallback stands for one readahead probe, once.
    #[test]
    fn every_fallback_stands_for_a_readahead_probe_once() {
        for table in [&super::super::readahead_fn::RA_FALLBACKS, &super::super::readahead_510::RA_FALLBACKS] {
            for fb in table {
                assert!(PROBES.iter().any(|(p, _, _)| *p == fb.probe), "{}", fb.probe);
                assert_eq!(table.iter().filter(|f| f.probe == fb.probe).count(), 1, "{}", fb.probe);
            }
        }
    }

    fn fixture(category: &str, event: &str) -> Option<String> {
        std::fs::read_to_string(format!("/sys/kernel/tracing/events/{category}/{event}/format")).ok()
    }

    const SYNC_RA: &str = "name: page_cache_sync_ra\nID: 617\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned long i_ino;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:dev_t s_dev;\toffset:16;\tsize:4;\tsigned:0;\n\tfield:unsigned long index;\toffset:24;\tsize:8;\tsigned:0;\n\tfield:unsigned int order;\toffset:32;\tsize:4;\tsigned:0;\n\tfield:unsigned int size;\toffset:36;\tsize:4;\tsigned:0;\n\tfield:unsigned int async_size;\toffset:40;\tsize:4;\tsigned:0;\n\tfield:unsigned int ra_pages;\toffset:44;\tsize:4;\tsigned:0;\n\tfield:unsigned int mmap_miss;\toffset:48;\tsize:4;\tsigned:0;\n\nprint fmt: \"\"\n";

    #[test]
    fn layout_comes_from_the_6_18_format() {
        let mut l = RaLayout::UNSET;
        fill_layout(&mut l, 0, SYNC_RA).unwrap();
        assert_eq!(
            (l.sync_ok, l.ra_dev, l.ra_ino, l.ra_size, l.ra_ra_pages, l.ra_mmap_miss),
            (1, 16, 8, 36, 44, 48)
        );
        assert_eq!(l.ra_req_count, NO_REQ_COUNT, "no req_count: no page is taken for demand");
        let mut with_req = RaLayout::UNSET;
        let req = SYNC_RA.replace(
            "\n\nprint fmt",
            "\n\tfield:unsigned long req_count;\toffset:64;\tsize:8;\tsigned:0;\n\nprint fmt",
        );
        fill_layout(&mut with_req, 0, &req).unwrap();
        assert_eq!(with_req.ra_req_count, 64);
        // The async event with the same layout is accepted, one laid out differently is refused.
        fill_layout(&mut l, 1, &SYNC_RA.replace("sync", "async")).unwrap();
        assert_eq!(l.async_ok, 1);
        let mut l2 = l;
        l2.async_ok = 0;
        let moved = SYNC_RA.replace("offset:48", "offset:52");
        assert!(fill_layout(&mut l2, 1, &moved).unwrap_err().to_string().contains("unlike"));
    }

    /// 5.10's insertions and evictions have no `order` (raised per page): one page each.
    #[test]
    fn insertions_without_order_are_one_page() {
        let add = super::super::page_cache::tests::ADD_5_10;
        let mut l = RaLayout::UNSET;
        fill_layout(&mut l, 4, add).unwrap();
        fill_layout(&mut l, 5, &add.replace("add_to_page_cache", "delete_from_page_cache")).unwrap();
        assert_eq!((l.add_ok, l.delete_ok, l.folio_ino, l.folio_index), (1, 1, 16, 24));
        assert_eq!(l.folio_order, ioscope_common::page_cache::NO_ORDER);
    }

    #[test]
    fn an_entry_stays_while_it_changes_or_has_pages_pending() {
        let s = RaFileStats { ra_pages: 8, used_pages: 8, windows: 1, ..RaFileStats::ZERO };
        assert!(keep_in_sample(None, &s), "a new entry is reported");
        assert!(!keep_in_sample(Some(&s), &s), "read unchanged with nothing pending: removed");
        let more = RaFileStats { used_pages: 4, ..s };
        assert!(keep_in_sample(Some(&more), &s), "changed since the last read");
        let waiting = RaFileStats { used_pages: 6, ..s };
        assert!(keep_in_sample(Some(&waiting), &waiting), "2 pages still pending");
    }

    #[test]
    fn a_row_listed_again_counts_from_its_quiet_spell_and_keeps_the_gauges() {
        let mut base =
            RaFileStats { ra_pages: 40, used_pages: 8, windows: 2, sync_events: 1, ..RaFileStats::ZERO };
        base.use_hist[3] = 8;
        base.last_window = 32;
        let mut now = base;
        now.used_pages = 18;
        now.use_hist[3] = 18;
        now.mmap_miss = 5;
        let d = since(&now, &base);
        assert_eq!((d.ra_pages, d.used_pages, d.windows, d.sync_events, d.use_hist[3]), (0, 10, 0, 0, 10));
        assert_eq!((d.last_window, d.mmap_miss), (32, 5), "gauges as they are now");
        let mut row = to_sample(&RaFileKey { dev: 7 << 20, _pad: 0, ino: 21 }, &d, None, Vec::new());
        row.pending_before = base.pending();
        assert_eq!(row.pending_before, 32);
    }

    #[test]
    fn files_beyond_the_rows_are_summed_as_grown_since_last_read() {
        let before =
            RaFileStats { ra_pages: 8, used_pages: 8, windows: 1, sync_events: 1, ..RaFileStats::ZERO };
        let now = RaFileStats { ra_pages: 24, used_pages: 20, wasted_pages: 4, windows: 3, ..before };
        assert_eq!(activity(Some(&before), &now), 51 - 17);
        assert_eq!(activity(None, &now), 51);
        let mut others = Vec::new();
        add_other(&mut others, 7, Some(&before), &now);
        add_other(&mut others, 7, None, &before);
        add_other(&mut others, 8, None, &before);
        assert_eq!(others.len(), 2);
        let o = &others[0];
        assert_eq!((o.files, o.ra_pages, o.used_pages, o.wasted_pages, o.windows), (2, 24, 20, 4, 3));
        assert_eq!(o.sync_events, 1);
    }

    /// A file whose read-ahead page stays pending is listed sample after sample while a churn of
    /// other files passes through the cache; its path outlives them (the kernel's name and its
    /// reader long gone), and a rename is noticed, not shown under the old name.
    #[test]
    fn a_listed_files_path_outlives_a_churn_of_other_files() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pending");
        std::fs::write(&path, b"x").unwrap();
        let m = std::fs::metadata(&path).unwrap();
        let dev = (libc::major(m.dev()) << ioscope_common::KERNEL_MINOR_BITS) | libc::minor(m.dev());
        let pending = (dev, m.ino());
        let mut cache = PathCache::default();
        let mut none = |_: u32, _: u64| None;
        let named: StdHashMap<_, _> = [(pending, path.to_string_lossy().into_owned())].into();
        assert_eq!(cache.resolve(pending.0, pending.1, &[], &named, &mut none).as_deref(), path.to_str());
        // 100 samples of 256 new files each (named by the files view), beside the pending one.
        let mut next = 1u64 << 40;
        for _ in 0..100 {
            let churn: Vec<(u32, u64)> = (0..RA_ROWS as u64).map(|i| (7 << 20, next + i)).collect();
            next += RA_ROWS as u64;
            let hints: StdHashMap<_, _> = churn.iter().map(|&k| (k, format!("/churn/{}", k.1))).collect();
            for &(d, i) in &churn {
                assert!(cache.resolve(d, i, &[], &hints, &mut none).is_some());
            }
            let listed = cache.resolve(pending.0, pending.1, &[], &StdHashMap::new(), &mut none);
            assert_eq!(listed.as_deref(), path.to_str(), "the pending file keeps its path");
            cache.bound(churn.iter().copied().chain([pending]));
            assert!(cache.known.len() <= PATH_CACHE_MAX + RA_ROWS + 1);
        }
        // Renamed: its old path is not shown (nothing else knows the new one here).
        std::fs::rename(&path, dir.path().join("renamed")).unwrap();
        assert_eq!(cache.resolve(pending.0, pending.1, &[], &StdHashMap::new(), &mut none), None);
    }

    #[test]
    fn a_renamed_field_is_named_in_the_error() {
        let mut l = RaLayout::UNSET;
        let e = fill_layout(&mut l, 0, &SYNC_RA.replace("mmap_miss", "mmap_misses")).unwrap_err();
        assert!(format!("{e:#}").contains("mmap_miss"), "{e:#}");
        assert_eq!(l.sync_ok, 0);
    }

    #[test]
    fn every_probe_reads_this_kernels_format_when_there_is_one() {
        let mut l = RaLayout::UNSET;
        for (i, (_, c, e)) in PROBES.iter().enumerate() {
            if let Some(text) = fixture(c, e) {
                fill_layout(&mut l, i, &text).unwrap();
            }
        }
    }
}
