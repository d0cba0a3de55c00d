//! Prometheus / OpenMetrics exposition of a Sample and its Model: what `ioscope serve` answers on
//! `/metrics` and what `ioscope replay --openmetrics` writes. Every metric is listed, with its
//! type, labels, meaning and source, in README.md beside this file.
//!
//! Counters are the kernel's or the probes' cumulative counters as the Sample holds them, never
//! rates: Prometheus derives rates itself (`rate()`), over any window, with counter resets handled.
//! The two exceptions are sums over entries that the collectors drop (readahead per file, disk I/O
//! per process for the cgroup view): a sum that loses an entry would fall and look like a reset,
//! so [`Totals`] adds up each interval's growth instead, from the Model's interval figures.

pub mod encode;

use std::collections::{BTreeMap, HashMap};

use crate::model::files::writeback_so_far;
use crate::model::page_cache::PageCacheCounts;
use crate::model::Model;
use crate::sample::{BlockDirCounters, CacheCountersSample, Sample};

pub use encode::{Family, Format, Kind};
use ioscope_common::block::{depth_bucket_range, log2_bucket_range, DEPTH_BUCKETS};

/// Which optional, per-entity series to export (unbounded label values are never exported).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportOptions {
    /// The N processes with the most disk I/O (pid and comm labels); 0: none.
    pub top_processes: usize,
    /// The N files with the most disk I/O (device and path labels); 0: none.
    pub top_files: usize,
    /// Per cgroup: disk I/O (cgroup and device labels), page cache, dirty throttling and sync
    /// calls (cgroup label); as many series as cgroups active in the last
    /// [`CGROUP_IDLE_FORGET_S`] seconds.
    pub cgroups: bool,
}

/// What the exporter knows about itself, passed in by `ioscope serve`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SelfStats {
    /// Samples taken since start, and how long the last one took.
    pub samples: u64,
    pub sample_duration_s: f64,
    /// The sampling clock's deadlines skipped since start (a sample took longer than the
    /// interval; src/collect/clock.rs).
    pub samples_skipped: u64,
    /// Scrapes answered before this one, and how long the previous one took to encode.
    pub scrapes: u64,
    pub scrape_duration_s: f64,
    /// HTTP requests refused (unknown path, method, malformed, too large, timed out).
    pub rejected_requests: u64,
}

/// Running sums of interval growth, for counters whose per-entry sources come and go.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    /// Per device name: readahead pages read, used, wasted.
    readahead: BTreeMap<String, [u64; 3]>,
    /// Per (cgroup path, device): bytes read, bytes written, read and write requests.
    cgroups: BTreeMap<(String, String), [u64; 4]>,
    /// Per cgroup path, from the cgroup view (src/model/cgroups.rs): its page cache and sync calls.
    cgroup_activity: BTreeMap<String, CgroupTotals>,
    /// Seconds of intervals observed so far: the clock by which idle cgroups are forgotten.
    elapsed_s: f64,
}

/// One cgroup's running sums from the cgroup view, and when it last did anything.
#[derive(Clone, Debug, Default, PartialEq)]
struct CgroupTotals {
    accesses: u64,
    misses: u64,
    dirtied_pages: u64,
    throttled_s: f64,
    sync_calls: u64,
    /// `Totals::elapsed_s` at the end of the last interval it grew in (disk I/O included).
    last_active_s: f64,
}

/// A cgroup with no disk I/O, page-cache activity or sync call for this long leaves the
/// per-cgroup series (its counters start again from 0 if it comes back: a counter reset, which
/// `rate()` handles). Without it a machine whose containers come and go (Kubernetes) would
/// export every cgroup it ever saw.
pub const CGROUP_IDLE_FORGET_S: f64 = 900.0;

impl Totals {
    /// Adds one interval's growth, from its Model. The cgroup view's bytes and requests are the
    /// Model's per-(process, disk) rates times the interval: the whole counter deltas again.
    pub fn observe(&mut self, model: &Model) {
        if let Some(ra) = &model.readahead {
            for d in &ra.devices {
                let t = self.readahead.entry(d.name.clone()).or_default();
                t[0] += d.ra_pages;
                t[1] += d.used_pages;
                t[2] += d.wasted_pages;
            }
        }
        // The end of this interval: when what grew in it was last active.
        self.elapsed_s += model.interval_s;
        let whole = |rate: f64| (rate * model.interval_s).round().max(0.0) as u64;
        for p in &model.io_processes {
            let grew =
                [whole(p.read_bytes_s), whole(p.write_bytes_s), whole(p.read_iops), whole(p.write_iops)];
            if grew.iter().all(|&g| g == 0) {
                continue;
            }
            let cgroup = if p.cgroup.is_empty() { "unknown".to_string() } else { p.cgroup.clone() };
            self.cgroup_activity.entry(cgroup.clone()).or_default().last_active_s = self.elapsed_s;
            let t = self.cgroups.entry((cgroup, p.device.clone())).or_default();
            for (t, g) in t.iter_mut().zip(grew) {
                *t += g;
            }
        }
        for c in &model.cgroups {
            let grew =
                [whole(c.accesses_s), whole(c.misses_s), whole(c.dirtied_pages_s), c.sync_calls_interval];
            let throttled_s = (c.throttled_ms_s * model.interval_s / 1000.0).max(0.0);
            if grew.iter().all(|&g| g == 0) && throttled_s == 0.0 {
                continue;
            }
            let path = if c.path.is_empty() { "unknown".to_string() } else { c.path.clone() };
            let t = self.cgroup_activity.entry(path).or_default();
            t.accesses += grew[0];
            t.misses += grew[1];
            t.dirtied_pages += grew[2];
            t.sync_calls += grew[3];
            t.throttled_s += throttled_s;
            t.last_active_s = self.elapsed_s;
        }
        let now = self.elapsed_s;
        let idle = |t: &CgroupTotals| now - t.last_active_s > CGROUP_IDLE_FORGET_S;
        let forgotten: Vec<String> =
            self.cgroup_activity.iter().filter(|(_, t)| idle(t)).map(|(path, _)| path.clone()).collect();
        for path in &forgotten {
            self.cgroup_activity.remove(path);
        }
        if !forgotten.is_empty() {
            self.cgroups.retain(|(path, _), _| !forgotten.contains(path));
        }
    }

    /// The cgroups with series (tests).
    pub fn cgroup_paths(&self) -> Vec<&str> {
        self.cgroup_activity.keys().map(String::as_str).collect()
    }
}

/// The name /proc/diskstats gives `major:minor`, or "major:minor" when it lists no such device.
fn device_name(s: &Sample, major: u32, minor: u32) -> String {
    s.disks
        .iter()
        .find(|d| d.major == major && d.minor == minor)
        .map(|d| d.name.clone())
        .unwrap_or_else(|| format!("{major}:{minor}"))
}

/// Every metric family for one sample. `self_stats` is None outside `serve` (replay).
pub fn families(
    cur: &Sample,
    model: &Model,
    totals: &Totals,
    opts: &ExportOptions,
    self_stats: Option<&SelfStats>,
) -> Vec<Family> {
    let mut out = Vec::with_capacity(96);
    disks(&mut out, cur);
    block(&mut out, cur);
    memory(&mut out, cur, model);
    page_cache(&mut out, cur);
    readahead(&mut out, totals);
    if opts.cgroups {
        cgroups(&mut out, totals);
    }
    if opts.top_processes > 0 {
        processes(&mut out, cur, model, opts.top_processes);
        iowait(&mut out, model, opts.top_processes);
    }
    if opts.top_files > 0 {
        files(&mut out, cur, model, opts.top_files);
    }
    bpf(&mut out, cur);
    exporter(&mut out, cur, self_stats);
    out
}

/// Pushes a new family and returns it.
fn family<'a>(
    out: &'a mut Vec<Family>,
    kind: Kind,
    name: &'static str,
    unit: &'static str,
    help: &'static str,
) -> &'a mut Family {
    out.push(Family::new(kind, name, unit, help));
    out.last_mut().expect("just pushed")
}

const MS: f64 = 1e-3;

/// A family's name, unit and help, with how to get its value.
type Spec<G> = (&'static str, &'static str, &'static str, G);
/// The same without a unit.
type NamedHelp<G> = (&'static str, &'static str, G);
type DirGet = fn(&BlockDirCounters) -> u64;
type ProcGet = fn(&crate::sample::ProcIoCounters) -> u64;
type CacheGet = fn(&PageCacheCounts) -> u64;
type FileGet<'a> = Box<dyn Fn(&crate::sample::FileIoSample) -> u64 + 'a>;

fn disks(out: &mut Vec<Family>, s: &Sample) {
    use crate::sample::DiskStat;
    type Get = fn(&DiskStat) -> Option<f64>;
    let specs: [(Kind, &'static str, &'static str, &'static str, Get); 15] = [
        (
            Kind::Counter,
            "ioscope_disk_reads_completed",
            "",
            "Reads completed (/proc/diskstats field 1).",
            |d| Some(d.reads_completed as f64),
        ),
        (Kind::Counter, "ioscope_disk_reads_merged", "", "Adjacent reads merged into one request.", |d| {
            Some(d.reads_merged as f64)
        }),
        (Kind::Counter, "ioscope_disk_read_bytes", "bytes", "Bytes read (sectors read × 512).", |d| {
            Some(d.sectors_read as f64 * 512.0)
        }),
        (
            Kind::Counter,
            "ioscope_disk_read_time_seconds",
            "seconds",
            "Time reads spent, summed per request.",
            |d| Some(d.read_ms as f64 * MS),
        ),
        (
            Kind::Counter,
            "ioscope_disk_writes_completed",
            "",
            "Writes completed (/proc/diskstats field 5).",
            |d| Some(d.writes_completed as f64),
        ),
        (Kind::Counter, "ioscope_disk_writes_merged", "", "Adjacent writes merged into one request.", |d| {
            Some(d.writes_merged as f64)
        }),
        (
            Kind::Counter,
            "ioscope_disk_written_bytes",
            "bytes",
            "Bytes written (sectors written × 512).",
            |d| Some(d.sectors_written as f64 * 512.0),
        ),
        (
            Kind::Counter,
            "ioscope_disk_write_time_seconds",
            "seconds",
            "Time writes spent, summed per request.",
            |d| Some(d.write_ms as f64 * MS),
        ),
        (
            Kind::Gauge,
            "ioscope_disk_requests_in_flight",
            "",
            "Requests issued to the device and not completed.",
            |d| Some(d.in_flight as f64),
        ),
        (
            Kind::Counter,
            "ioscope_disk_io_time_seconds",
            "seconds",
            "Time with at least one request in flight (rate() = %util / 100).",
            |d| Some(d.io_ms as f64 * MS),
        ),
        (
            Kind::Counter,
            "ioscope_disk_io_time_weighted_seconds",
            "seconds",
            "Request time summed over requests in flight (rate() = average queue size, aqu-sz).",
            |d| Some(d.weighted_io_ms as f64 * MS),
        ),
        (Kind::Counter, "ioscope_disk_discards_completed", "", "Discards completed (kernel 4.18+).", |d| {
            d.discards.as_ref().map(|x| x.completed as f64)
        }),
        (Kind::Counter, "ioscope_disk_discarded_bytes", "bytes", "Bytes discarded (sectors × 512).", |d| {
            d.discards.as_ref().map(|x| x.sectors as f64 * 512.0)
        }),
        (
            Kind::Counter,
            "ioscope_disk_flushes_completed",
            "",
            "Cache flushes completed (kernel 5.5+).",
            |d| d.flushes.as_ref().map(|x| x.completed as f64),
        ),
        (Kind::Counter, "ioscope_disk_flush_time_seconds", "seconds", "Time flushes spent.", |d| {
            d.flushes.as_ref().map(|x| x.ms as f64 * MS)
        }),
    ];
    for (kind, name, unit, help, get) in specs {
        let f = family(out, kind, name, unit, help);
        for d in &s.disks {
            if let Some(v) = get(d) {
                f.add(&[("device", &d.name)], v);
            }
        }
    }
    let f = family(
        out,
        Kind::Info,
        "ioscope_disk",
        "",
        "A block device's queue settings (/sys/block/NAME/queue); partitions have their disk's.",
    );
    for b in &s.block_settings {
        let rotational = match b.rotational {
            Some(true) => "1",
            Some(false) => "0",
            None => "",
        };
        f.add(
            &[
                ("device", &b.name),
                ("scheduler", b.scheduler.as_deref().unwrap_or("")),
                ("rotational", rotational),
                ("partition", if b.is_partition { "1" } else { "0" }),
            ],
            1.0,
        );
    }
    let f = family(
        out,
        Kind::Gauge,
        "ioscope_disk_read_ahead_bytes",
        "bytes",
        "The device's readahead window (queue/read_ahead_kb).",
    );
    for b in &s.block_settings {
        if let Some(kb) = b.read_ahead_kb {
            f.add(&[("device", &b.name)], kb as f64 * 1024.0);
        }
    }
}

/// The block probes' histograms and counters, per whole disk.
fn block(out: &mut Vec<Family>, s: &Sample) {
    let devs: Vec<_> = s.bpf.block_devices.iter().map(|d| (device_name(s, d.major, d.minor), d)).collect();
    let dirs = |d: &'_ crate::sample::BlockDeviceCounters| {
        [("read", d.read.clone()), ("write", d.write.clone()), ("other", d.other.clone())]
    };
    // Reads and writes of every disk the probes have seen are there from the start, zeros
    // included (a series that appears later has no "before" for Prometheus to subtract);
    // other operations once they happen.
    // Latency buckets: bucket b holds [2^(b-1), 2^b) µs, measured in whole µs (ns / 1000), so every
    // latency in it is below 2^b µs: le = 2^b µs. The last bucket is open: only +Inf.
    let latency = |hist: &[u64]| log2_buckets(hist, |b| log2_bucket_range(b).1 as f64 * 1e-6);
    // Size buckets hold whole bytes [2^(b-1), 2^b): le = 2^b − 1 bytes, exactly.
    let size = |hist: &[u64]| log2_buckets(hist, |b| (log2_bucket_range(b).1 - 1) as f64);
    let f = family(
        out,
        Kind::Histogram,
        "ioscope_disk_request_duration_seconds",
        "seconds",
        "Block request time (eBPF): phase=\"queue\" from the request's creation to its issue to the \
         driver, phase=\"device\" from issue to completion.",
    );
    for (name, d) in &devs {
        for (op, c) in dirs(d) {
            for (phase, hist, ns) in
                [("queue", &c.queue_hist, c.queue_ns_sum), ("device", &c.device_hist, c.device_ns_sum)]
            {
                let (buckets, count) = latency(hist);
                if count > 0 || op != "other" {
                    f.add_histogram(
                        &[("device", name), ("op", op), ("phase", phase)],
                        &buckets,
                        ns as f64 * 1e-9,
                        count,
                    );
                }
            }
        }
    }
    let f = family(
        out,
        Kind::Histogram,
        "ioscope_disk_request_size_bytes",
        "bytes",
        "Size of the block requests issued to the driver (eBPF, block_rq_issue).",
    );
    for (name, d) in &devs {
        for (op, c) in dirs(d) {
            let (buckets, count) = size(&c.size_hist);
            if count > 0 || op != "other" {
                f.add_histogram(&[("device", name), ("op", op)], &buckets, c.issued_bytes as f64, count);
            }
        }
    }
    let f = family(
        out,
        Kind::Histogram,
        "ioscope_disk_queue_depth",
        "",
        "Requests in flight on the device as each request was issued, itself included (eBPF).",
    );
    for (name, d) in &devs {
        let (buckets, count) = depth_buckets(&d.depth_hist);
        if count > 0 {
            f.add_histogram(&[("device", name)], &buckets, d.depth_sum as f64, count);
        }
    }
    let counters: [Spec<DirGet>; 2] = [
        ("ioscope_disk_issued_requests", "", "Block requests issued to the driver (eBPF).", |c| {
            c.issued_requests
        }),
        (
            "ioscope_disk_scheduler_requests",
            "",
            "Requests that went through the I/O scheduler's queue (eBPF, block_rq_insert).",
            |c| c.sched_requests,
        ),
    ];
    for (name, unit, help, get) in counters {
        let f = family(out, Kind::Counter, name, unit, help);
        for (dev, d) in &devs {
            for (op, c) in dirs(d) {
                f.add(&[("device", dev), ("op", op)], get(&c) as f64);
            }
        }
    }
    let f = family(
        out,
        Kind::Counter,
        "ioscope_disk_scheduler_time_seconds",
        "seconds",
        "Time requests spent in the I/O scheduler's queue, insert to issue (eBPF).",
    );
    for (dev, d) in &devs {
        for (op, c) in dirs(d) {
            f.add(&[("device", dev), ("op", op)], c.sched_ns_sum as f64 * 1e-9);
        }
    }
}

/// Cumulative buckets of a log2 histogram: (le of bucket b, observations up to and including b)
/// for every bucket but the open last one, and the total count.
fn log2_buckets(hist: &[u64], le: impl Fn(usize) -> f64) -> (Vec<(f64, u64)>, u64) {
    let mut cum = 0u64;
    let mut buckets = Vec::with_capacity(hist.len());
    for (b, &n) in hist.iter().enumerate() {
        cum += n;
        if b + 1 < ioscope_common::block::HIST_BUCKETS {
            buckets.push((le(b), cum));
        }
    }
    (buckets, cum)
}

/// Depth buckets are exact below 32 and log2 above; Prometheus gets a log2 ladder (1, 2, 4, 8, 16,
/// 31, 63, 127, ...), each le the inclusive top of a bucket so no bucket is split.
fn depth_buckets(hist: &[u64]) -> (Vec<(f64, u64)>, u64) {
    let mut cum = 0u64;
    let mut buckets = Vec::new();
    for (b, &n) in hist.iter().enumerate() {
        cum += n;
        let (_, high) = depth_bucket_range(b);
        let edge = matches!(high, 1 | 2 | 4 | 8 | 16 | 31) || (b >= 32 && b + 1 < DEPTH_BUCKETS);
        if edge {
            buckets.push((high as f64, cum));
        }
    }
    (buckets, cum)
}

fn memory(out: &mut Vec<Family>, s: &Sample, model: &Model) {
    let m = &s.memory;
    let gauges: [(&'static str, &'static str, u64); 11] = [
        ("ioscope_memory_total_bytes", "MemTotal (/proc/meminfo).", m.total_bytes),
        ("ioscope_memory_free_bytes", "MemFree.", m.free_bytes),
        ("ioscope_memory_available_bytes", "MemAvailable.", m.available_bytes),
        ("ioscope_memory_buffers_bytes", "Buffers: block-device page cache.", m.buffers_bytes),
        ("ioscope_memory_cached_bytes", "Cached: file page cache (shmem included).", m.cached_bytes),
        ("ioscope_memory_dirty_bytes", "Dirty: page cache waiting to be written back.", m.dirty_bytes),
        ("ioscope_memory_writeback_bytes", "Writeback: page cache being written back now.", m.writeback_bytes),
        ("ioscope_memory_mapped_bytes", "Mapped: file pages mapped into processes.", m.mapped_bytes),
        ("ioscope_dirty_threshold_bytes", "Dirty memory above which writers are throttled in balance_dirty_pages (the kernel's formula from vm.dirty_ratio or vm.dirty_bytes).", model.memory.dirty_threshold),
        ("ioscope_dirty_background_threshold_bytes", "Dirty memory above which the flusher threads start background writeback (vm.dirty_background_ratio or _bytes).", model.memory.dirty_background_threshold),
        ("ioscope_dirtyable_memory_bytes", "Memory the kernel counts as dirtyable: free minus reserves plus the file LRU.", model.memory.dirtyable),
    ];
    for (name, help, v) in gauges {
        family(out, Kind::Gauge, name, "bytes", help).add(&[], v as f64);
    }
    let page = s.page_size as f64;
    let v = &s.vmstat;
    let counters: [(&'static str, &'static str, &'static str, f64); 4] = [
        (
            "ioscope_vm_dirtied_bytes",
            "bytes",
            "Page cache dirtied (/proc/vmstat nr_dirtied × page size).",
            v.nr_dirtied as f64 * page,
        ),
        (
            "ioscope_vm_written_bytes",
            "bytes",
            "Page cache written back (/proc/vmstat nr_written × page size).",
            v.nr_written as f64 * page,
        ),
        (
            "ioscope_vm_major_faults",
            "",
            "Major page faults: pages read from disk on access (pgmajfault).",
            v.pgmajfault as f64,
        ),
        (
            "ioscope_vm_file_refaults",
            "",
            "File pages read again soon after eviction (workingset_refault_file).",
            v.workingset_refault_file as f64,
        ),
    ];
    for (name, unit, help, value) in counters {
        family(out, Kind::Counter, name, unit, help).add(&[], value);
    }
    let f = family(out, Kind::Counter, "ioscope_pressure_stalled_seconds", "seconds", "Pressure stall time (/proc/pressure): resource=\"io\"|\"memory\", kind=\"some\" (at least one task stalled) or \"full\" (all non-idle tasks).");
    for (resource, r) in [("io", &s.psi.io), ("memory", &s.psi.memory)] {
        if let Some(r) = r {
            f.add(&[("resource", resource), ("kind", "some")], r.some.total_us as f64 * 1e-6);
            if let Some(full) = &r.full {
                f.add(&[("resource", resource), ("kind", "full")], full.total_us as f64 * 1e-6);
            }
        }
    }
}

/// The page-cache counters (eBPF), system-wide, cumulative since the probes attached: the
/// Model's interval formulas (model/page_cache.rs) applied from zero.
fn page_cache(out: &mut Vec<Family>, s: &Sample) {
    let Some(pc) = &s.bpf.page_cache else { return };
    let c = cache_counts(&pc.totals, pc.hz, pc.rss_mapped.then_some(s.page_size));
    let counters: [(&'static str, &'static str, &'static str, f64); 10] = [
        (
            "ioscope_page_cache_accesses",
            "",
            "Page-cache page accesses: pages read plus file pages mapped (eBPF).",
            c.accesses as f64,
        ),
        (
            "ioscope_page_cache_misses",
            "",
            "Page-cache misses: pages inserted to be read (readahead included) (eBPF).",
            c.misses as f64,
        ),
        ("ioscope_page_cache_dirtied_pages", "", "Page-cache pages dirtied (eBPF).", c.dirtied as f64),
        (
            "ioscope_page_cache_evicted_pages",
            "",
            "Page-cache pages evicted or truncated (eBPF).",
            c.evicted as f64,
        ),
        (
            "ioscope_dirty_throttled_seconds",
            "seconds",
            "Time writers slept in balance_dirty_pages, throttled for dirtying too fast (eBPF).",
            c.throttled_ms * 1e-3,
        ),
        (
            "ioscope_dirty_throttle_pauses",
            "",
            "Times a writer was paused by balance_dirty_pages (eBPF).",
            c.throttle_pauses as f64,
        ),
        (
            "ioscope_direct_io_reads",
            "",
            "Direct-I/O read calls (eBPF, iomap_dio_rw_begin).",
            c.dio_reads as f64,
        ),
        (
            "ioscope_direct_io_read_bytes",
            "bytes",
            "Bytes asked for by direct-I/O reads (eBPF).",
            c.dio_read_bytes as f64,
        ),
        ("ioscope_direct_io_writes", "", "Direct-I/O write calls (eBPF).", c.dio_writes as f64),
        (
            "ioscope_direct_io_written_bytes",
            "bytes",
            "Bytes passed to direct-I/O writes (eBPF).",
            c.dio_write_bytes as f64,
        ),
    ];
    for (name, unit, help, value) in counters {
        family(out, Kind::Counter, name, unit, help).add(&[], value);
    }
}

/// The Model's per-interval page-cache counts, taken from zero: cumulative counts.
fn cache_counts(c: &CacheCountersSample, hz: u64, rss_page: Option<u64>) -> PageCacheCounts {
    PageCacheCounts::between(&CacheCountersSample::default(), c, hz, rss_page)
}

fn readahead(out: &mut Vec<Family>, t: &Totals) {
    let f = family(
        out,
        Kind::Counter,
        "ioscope_readahead_pages",
        "",
        "Readahead pages (eBPF) by outcome: \"read\" brought in, \"used\" read by someone before \
         eviction, \"wasted\" evicted unread. Since ioscope started.",
    );
    for (device, [read, used, wasted]) in &t.readahead {
        for (outcome, v) in [("read", read), ("used", used), ("wasted", wasted)] {
            f.add(&[("device", device), ("outcome", outcome)], *v as f64);
        }
    }
}

fn cgroups(out: &mut Vec<Family>, t: &Totals) {
    let specs: [(&'static str, &'static str, &'static str, usize); 4] = [
        ("ioscope_cgroup_disk_read_bytes", "bytes", "Disk bytes read for the cgroup's processes (eBPF, credited to the submitter; since ioscope started).", 0),
        ("ioscope_cgroup_disk_written_bytes", "bytes", "Disk bytes written for the cgroup's processes (eBPF; flusher writeback is the kernel threads').", 1),
        ("ioscope_cgroup_disk_reads", "", "Read requests submitted by the cgroup's processes (eBPF).", 2),
        ("ioscope_cgroup_disk_writes", "", "Write requests submitted by the cgroup's processes (eBPF).", 3),
    ];
    for (name, unit, help, i) in specs {
        let f = family(out, Kind::Counter, name, unit, help);
        for ((cgroup, device), v) in &t.cgroups {
            f.add(&[("cgroup", cgroup), ("device", device)], v[i] as f64);
        }
    }
    type Get = fn(&CgroupTotals) -> f64;
    let activity: [(&'static str, &'static str, &'static str, Get); 5] = [
        ("ioscope_cgroup_page_cache_accesses", "", "Page-cache accesses by the cgroup's processes (eBPF, the cgroup view's accesses).", |t| t.accesses as f64),
        ("ioscope_cgroup_page_cache_misses", "", "Page-cache misses of the cgroup's processes (eBPF, the cgroup view's misses).", |t| t.misses as f64),
        ("ioscope_cgroup_page_cache_dirtied_pages", "pages", "Pages the cgroup's processes dirtied (eBPF).", |t| t.dirtied_pages as f64),
        ("ioscope_cgroup_dirty_throttled_seconds", "seconds", "Time the cgroup's processes were paused by dirty-page throttling (eBPF, balance_dirty_pages).", |t| t.throttled_s),
        ("ioscope_cgroup_sync_calls", "", "Completed sync calls (fsync, fdatasync, sync_file_range, msync, syncfs, sync, io_uring fsync) of the cgroup's processes (eBPF).", |t| t.sync_calls as f64),
    ];
    for (name, unit, help, get) in activity {
        let f = family(out, Kind::Counter, name, unit, help);
        for (cgroup, t) in &t.cgroup_activity {
            f.add(&[("cgroup", cgroup)], get(t));
        }
    }
}

/// The `n` processes with the most disk bytes in the last interval (ties: the most since they
/// started), from /proc/PID/io, and their page-cache counts when the probes run.
fn processes(out: &mut Vec<Family>, s: &Sample, model: &Model, n: usize) {
    let recent: HashMap<u32, f64> =
        model.processes.iter().map(|p| (p.pid, p.read_bytes_s + p.write_bytes_s)).collect();
    let mut ranked: Vec<_> = s.processes.iter().filter_map(|p| p.io.as_ref().map(|io| (p, io))).collect();
    let key = |p: &crate::sample::ProcessIo, io: &crate::sample::ProcIoCounters| {
        (recent.get(&p.pid).copied().unwrap_or(0.0), io.read_bytes + io.write_bytes)
    };
    ranked.sort_by(|a, b| {
        let (ka, kb) = (key(a.0, a.1), key(b.0, b.1));
        kb.0.total_cmp(&ka.0).then(kb.1.cmp(&ka.1)).then(a.0.pid.cmp(&b.0.pid))
    });
    ranked.truncate(n);
    let specs: [Spec<ProcGet>; 4] = [
        (
            "ioscope_process_read_bytes",
            "bytes",
            "Bytes the process caused to be read from storage (/proc/PID/io read_bytes).",
            |io| io.read_bytes,
        ),
        (
            "ioscope_process_written_bytes",
            "bytes",
            "Bytes the process caused to be written to storage, as dirtied (/proc/PID/io write_bytes).",
            |io| io.write_bytes,
        ),
        (
            "ioscope_process_syscall_read_bytes",
            "bytes",
            "Bytes the process read through read()-like calls, cache hits included (/proc/PID/io rchar).",
            |io| io.rchar,
        ),
        (
            "ioscope_process_syscall_written_bytes",
            "bytes",
            "Bytes the process passed to write()-like calls (/proc/PID/io wchar).",
            |io| io.wchar,
        ),
    ];
    let pids: Vec<String> = ranked.iter().map(|(p, _)| p.pid.to_string()).collect();
    for (name, unit, help, get) in specs {
        let f = family(out, Kind::Counter, name, unit, help);
        for ((p, io), pid) in ranked.iter().zip(&pids) {
            f.add(&[("pid", pid), ("comm", &p.comm)], get(io) as f64);
        }
    }
    let Some(pc) = &s.bpf.page_cache else { return };
    let rss_page = pc.rss_mapped.then_some(s.page_size);
    let counts: Vec<_> = ranked
        .iter()
        .zip(&pids)
        .filter_map(|((p, _), pid)| {
            let c = pc.processes.iter().find(|c| c.pid == p.pid)?;
            Some((pid, &p.comm, cache_counts(&c.counters, pc.hz, rss_page)))
        })
        .collect();
    let specs: [NamedHelp<CacheGet>; 2] = [
        ("ioscope_process_page_cache_accesses", "The process's page-cache page accesses (eBPF).", |c| {
            c.accesses
        }),
        ("ioscope_process_page_cache_misses", "The process's page-cache misses (eBPF).", |c| c.misses),
    ];
    for (name, help, get) in specs {
        let f = family(out, Kind::Counter, name, "", help);
        for (pid, comm, c) in &counts {
            f.add(&[("pid", pid), ("comm", comm)], get(c) as f64);
        }
    }
}

/// Seconds blocked on I/O per cause of the `n` processes that waited most (src/model/iowait.rs's
/// order: the interval's busiest thread, then since the threads were first seen).
fn iowait(out: &mut Vec<Family>, model: &Model, n: usize) {
    let Some(m) = &model.iowait else { return };
    let f = family(
        out,
        Kind::Counter,
        "ioscope_process_io_wait_seconds",
        "seconds",
        "Seconds the process's threads were blocked waiting for I/O (the kernel's in_iowait sleeps), by the cause decided when each blocked (eBPF).",
    );
    for p in m.processes.iter().filter(|p| p.total_s > 0.0).take(n) {
        let pid = p.pid.to_string();
        for (cause, secs) in &p.total_by_cause_s {
            f.add(&[("pid", &pid), ("comm", &p.comm), ("cause", cause)], *secs);
        }
    }
}

/// The `n` files with the most disk bytes in the last interval (ties: the most since their
/// counters started), from the per-file probes.
fn files(out: &mut Vec<Family>, s: &Sample, model: &Model, n: usize) {
    let page = s.page_size.max(1);
    let recent: HashMap<(String, u64), u64> =
        model.files.iter().map(|f| ((f.dev.clone(), f.ino), f.busy_bytes())).collect();
    let read = move |f: &crate::sample::FileIoSample| f.inserted_pages * page + f.dio_read_bytes;
    let written = move |f: &crate::sample::FileIoSample| writeback_so_far(f, page) + f.dio_write_bytes;
    let mut ranked: Vec<_> = s
        .bpf
        .files
        .iter()
        .map(|f| {
            (
                recent.get(&(format!("{}:{}", f.major, f.minor), f.ino)).copied().unwrap_or(0),
                read(f) + written(f),
                f,
            )
        })
        .filter(|(r, total, _)| r + total > 0)
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.ino.cmp(&b.2.ino)));
    ranked.truncate(n);
    let named: Vec<_> = ranked
        .iter()
        .map(|(_, _, f)| {
            let path = f
                .path
                .clone()
                .or_else(|| f.label.clone())
                .unwrap_or_else(|| format!("{}:{}:{}", f.major, f.minor, f.ino));
            (f.device.clone(), path, *f)
        })
        .collect();
    let specs: [NamedHelp<FileGet>; 3] = [
        ("ioscope_file_read_bytes", "Disk bytes read for the file: page-cache misses (readahead included) and direct-I/O reads (eBPF).", Box::new(read)),
        ("ioscope_file_written_bytes", "Disk bytes written for the file: writeback and direct-I/O writes (eBPF).", Box::new(written)),
        ("ioscope_file_dirtied_bytes", "Bytes of the file's page cache dirtied (eBPF).", Box::new(move |f| f.dirtied_pages * page)),
    ];
    for (name, help, get) in specs {
        let f = family(out, Kind::Counter, name, "bytes", help);
        for (device, path, file) in &named {
            f.add(&[("device", device), ("path", path)], get(file) as f64);
        }
    }
}

fn bpf(out: &mut Vec<Family>, s: &Sample) {
    let st = &s.bpf.status;
    family(out, Kind::Gauge, "ioscope_bpf_enabled", "", "1 when at least one eBPF program is attached.")
        .add(&[], if st.enabled { 1.0 } else { 0.0 });
    family(
        out,
        Kind::Info,
        "ioscope_bpf_status",
        "",
        "Why eBPF is off or partly off (reason is empty when all is well).",
    )
    .add(&[("reason", st.reason.as_deref().unwrap_or(""))], 1.0);
    let mut per_mechanism: BTreeMap<&str, u64> = BTreeMap::new();
    for p in st.programs.iter().filter(|p| p.attached) {
        *per_mechanism.entry(mechanism(&p.mechanism)).or_default() += 1;
    }
    let f = family(
        out,
        Kind::Gauge,
        "ioscope_bpf_programs_attached",
        "",
        "eBPF programs attached, per mechanism (tracepoint, btf_tracepoint, raw_tracepoint, ...).",
    );
    for (m, n) in &per_mechanism {
        f.add(&[("mechanism", m)], *n as f64);
    }
    let f = family(
        out,
        Kind::Gauge,
        "ioscope_bpf_program_attached",
        "",
        "1 when the program is attached, 0 when it could not be (see ioscope_bpf_status_info).",
    );
    for p in st.programs.iter() {
        f.add(
            &[("program", &p.program), ("event", &p.tracepoint), ("mechanism", mechanism(&p.mechanism))],
            if p.attached { 1.0 } else { 0.0 },
        );
    }
    let h = &s.bpf.block_health;
    let names = crate::bpf::block::PROGRAMS.map(|(slot, _)| slot);
    let f = family(
        out,
        Kind::Counter,
        "ioscope_bpf_program_missed_runs",
        "",
        "Runs of the program the kernel skipped because another eBPF program was running on that CPU: \
         events the probe lost (bpf_prog_info.recursion_misses).",
    );
    for (name, missed) in names.iter().zip(&h.missed).filter(|(n, _)| **n != crate::bpf::block::RETIRED) {
        f.add(&[("program", name)], *missed as f64);
    }
    let mut lost: Vec<(&str, &str, u64)> = Vec::new();
    if !h.events.is_empty() {
        lost.extend([
            ("block", "request_map_full", h.reqs_full),
            ("block", "process_map_full", h.procs_full),
            ("block", "device_map_full", h.devs_full),
        ]);
    }
    if let Some(b) = &s.bpf.block_files {
        lost.extend([
            ("block_files", "rate_limited", b.rate_dropped),
            ("block_files", "ring_full", b.ring_dropped),
        ]);
    }
    if let Some(r) = &s.bpf.readahead {
        lost.extend([
            ("readahead", "page_map_full", r.untracked_pages),
            ("readahead", "file_map_full", r.untracked_files),
        ]);
    }
    let f = family(
        out,
        Kind::Counter,
        "ioscope_bpf_lost_events",
        "",
        "Events the probes saw but could not count, by probe group and reason (a full map, the \
         request ring's rate limit or a full ring).",
    );
    for (probes, reason, n) in lost {
        f.add(&[("probes", probes), ("reason", reason)], n as f64);
    }
}

/// The mechanism label: "unknown" for recordings made before it was recorded.
fn mechanism(m: &str) -> &str {
    if m.is_empty() {
        "unknown"
    } else {
        m
    }
}

fn exporter(out: &mut Vec<Family>, s: &Sample, stats: Option<&SelfStats>) {
    family(out, Kind::Info, "ioscope_build", "", "The ioscope version and the kernel it runs on.")
        .add(&[("version", env!("CARGO_PKG_VERSION")), ("kernel", &s.host.kernel)], 1.0);
    family(
        out,
        Kind::Gauge,
        "ioscope_sample_timestamp_seconds",
        "seconds",
        "Wall-clock time the figures were sampled (Unix seconds).",
    )
    .add(&[], s.wall_unix_ms as f64 / 1000.0);
    let Some(st) = stats else { return };
    family(out, Kind::Counter, "ioscope_samples", "", "Samples taken since start.")
        .add(&[], st.samples as f64);
    family(
        out,
        Kind::Counter,
        "ioscope_samples_skipped",
        "",
        "Sampling deadlines skipped since start because a sample took longer than the interval.",
    )
    .add(&[], st.samples_skipped as f64);
    family(
        out,
        Kind::Gauge,
        "ioscope_sample_duration_seconds",
        "seconds",
        "How long the last sample took to collect.",
    )
    .add(&[], st.sample_duration_s);
    family(out, Kind::Counter, "ioscope_scrapes", "", "Scrapes of /metrics answered before this one.")
        .add(&[], st.scrapes as f64);
    family(
        out,
        Kind::Gauge,
        "ioscope_scrape_duration_seconds",
        "seconds",
        "How long the previous scrape took to encode.",
    )
    .add(&[], st.scrape_duration_s);
    family(
        out,
        Kind::Counter,
        "ioscope_http_rejected_requests",
        "",
        "HTTP requests answered with an error (unknown path, other method).",
    )
    .add(&[], st.rejected_requests as f64);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model of one `interval_s` in which cgroup `path` read `accesses` pages and its process
    /// `pid` wrote `bytes` to vda.
    fn cgroup_model(interval_s: f64, path: &str, accesses: f64, bytes: f64) -> Model {
        let mut m = Model { interval_s, ..Model::default() };
        m.cgroups.push(crate::model::cgroups::CgroupModel {
            path: path.into(),
            accesses_s: accesses / interval_s,
            misses_s: accesses / 4.0 / interval_s,
            throttled_ms_s: 250.0 / interval_s,
            sync_calls_interval: 2,
            ..Default::default()
        });
        if bytes > 0.0 {
            m.io_processes.push(crate::model::io_processes::IoProcessModel {
                cgroup: path.into(),
                device: "vda".into(),
                write_bytes_s: bytes / interval_s,
                ..Default::default()
            });
        }
        m
    }

    fn value(families: &[Family], name: &str, labels: &str) -> Option<f64> {
        let text = encode::encode(families, Format::Text);
        text.lines().find_map(|l| l.strip_prefix(&format!("{name}{{{labels}}} ")).map(|v| v.parse().unwrap()))
    }

    #[test]
    fn io_wait_series_are_the_top_waiters_per_cause() {
        use crate::model::iowait::{IowaitModel, IowaitProcessModel};
        let row = |pid: u32, sync_s: f64| {
            let mut p =
                IowaitProcessModel { pid, comm: format!("p{pid}"), total_s: sync_s, ..Default::default() };
            p.total_by_cause_s.insert("sync", sync_s);
            p.total_by_cause_s.insert("other", 0.0);
            p
        };
        let m = Model {
            iowait: Some(IowaitModel {
                processes: vec![row(7, 2.5), row(8, 1.0), row(9, 0.0)],
                cgroups: Vec::new(),
            }),
            ..Default::default()
        };
        let mut out = Vec::new();
        iowait(&mut out, &m, 1);
        let name = "ioscope_process_io_wait_seconds_total";
        assert_eq!(value(&out, name, r#"pid="7",comm="p7",cause="sync""#), Some(2.5));
        assert_eq!(value(&out, name, r#"pid="7",comm="p7",cause="other""#), Some(0.0));
        // Bounded: the first N processes only.
        assert_eq!(value(&out, name, r#"pid="8",comm="p8",cause="sync""#), None);
        let mut out = Vec::new();
        iowait(&mut out, &m, 10);
        // A process that never waited has no series.
        assert_eq!(value(&out, name, r#"pid="9",comm="p9",cause="sync""#), None);
        assert_eq!(value(&out, name, r#"pid="8",comm="p8",cause="sync""#), Some(1.0));
    }

    #[test]
    fn cgroup_series_add_up_the_cgroup_view_and_forget_idle_cgroups() {
        let mut t = Totals::default();
        t.observe(&cgroup_model(5.0, "/db.slice", 1000.0, 4096.0));
        t.observe(&cgroup_model(5.0, "/db.slice", 600.0, 0.0));
        let mut out = Vec::new();
        cgroups(&mut out, &t);
        let get = |n: &str| value(&out, n, r#"cgroup="/db.slice""#);
        assert_eq!(get("ioscope_cgroup_page_cache_accesses_total"), Some(1600.0));
        assert_eq!(get("ioscope_cgroup_page_cache_misses_total"), Some(400.0));
        assert_eq!(get("ioscope_cgroup_dirty_throttled_seconds_total"), Some(0.5));
        assert_eq!(get("ioscope_cgroup_sync_calls_total"), Some(4.0));
        assert_eq!(
            value(&out, "ioscope_cgroup_disk_written_bytes_total", r#"cgroup="/db.slice",device="vda""#),
            Some(4096.0)
        );
        // Another cgroup stays busy; /db.slice goes idle and leaves the series after 900 s, its
        // disk series with it.
        for _ in 0..(CGROUP_IDLE_FORGET_S / 60.0) as usize {
            t.observe(&cgroup_model(60.0, "/web.slice", 10.0, 0.0));
        }
        assert_eq!(t.cgroup_paths(), ["/db.slice", "/web.slice"], "idle for exactly the limit: kept");
        t.observe(&cgroup_model(60.0, "/web.slice", 10.0, 0.0));
        assert_eq!(t.cgroup_paths(), ["/web.slice"]);
        let mut out = Vec::new();
        cgroups(&mut out, &t);
        let text = encode::encode(&out, Format::Text);
        assert!(!text.contains("/db.slice"), "{text}");
    }

    #[test]
    fn latency_buckets_are_cumulative_with_le_at_the_bucket_top() {
        // 2 requests under 1 µs, 3 in [1, 2) µs, 1 in [4, 8) µs.
        let hist = [2, 3, 0, 1];
        let (b, count) = log2_buckets(&hist, |b| log2_bucket_range(b).1 as f64 * 1e-6);
        assert_eq!(count, 6);
        assert_eq!(b, vec![(1e-6, 2), (2e-6, 5), (4e-6, 5), (8e-6, 6)]);
        let (b, _) = log2_buckets(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7], |b| {
            (log2_bucket_range(b).1 - 1) as f64
        });
        // A 4 KiB request is in bucket 13, [4096, 8192): at or below 8191, above 4095.
        assert_eq!((b[12], b[13]), ((4095.0, 0), (8191.0, 7)));
    }

    #[test]
    fn the_open_last_log2_bucket_is_only_in_inf() {
        let mut hist = vec![0u64; ioscope_common::block::HIST_BUCKETS];
        hist[ioscope_common::block::HIST_BUCKETS - 1] = 4;
        let (b, count) = log2_buckets(&hist, |b| b as f64);
        assert_eq!(b.len(), ioscope_common::block::HIST_BUCKETS - 1);
        assert_eq!((b.last().unwrap().1, count), (0, 4));
    }

    #[test]
    fn depth_ladder_keeps_whole_buckets() {
        let mut hist = vec![0u64; DEPTH_BUCKETS];
        hist[1] = 1; // depth 1
        hist[3] = 2; // depth 3: counted at le=4
        hist[32] = 5; // 32..63
        let (b, count) = depth_buckets(&hist);
        let les: Vec<f64> = b.iter().map(|x| x.0).collect();
        assert_eq!(&les[..8], &[1.0, 2.0, 4.0, 8.0, 16.0, 31.0, 63.0, 127.0]);
        assert_eq!((b[0].1, b[1].1, b[2].1, b[5].1, b[6].1, count), (1, 1, 3, 3, 8, 8));
    }

    #[test]
    fn readahead_totals_do_not_fall_when_a_file_entry_goes() {
        use crate::sample::readahead::{RaFileSample, ReadaheadSample};
        let file = |ino, ra| {
            std::sync::Arc::new(RaFileSample {
                dev: 7 << 20,
                ino,
                ra_pages: ra,
                used_pages: ra,
                ..Default::default()
            })
        };
        let at = |mono_ns, files| Sample {
            mono_ns,
            page_size: 4096,
            bpf: crate::sample::BpfSample {
                readahead: Some(ReadaheadSample { files, ..Default::default() }),
                ..Default::default()
            },
            ..Default::default()
        };
        let s0 = at(0, vec![file(1, 10)]);
        let s1 = at(1_000_000_000, vec![file(1, 30), file(2, 5)]);
        let s2 = at(2_000_000_000, vec![file(2, 6)]);
        let mut t = Totals::default();
        for (p, c) in [(&s0, &s1), (&s1, &s2)] {
            t.observe(&Model::between(p, c));
        }
        let read: u64 = t.readahead.values().map(|v| v[0]).sum();
        assert_eq!(read, 20 + 5 + 1, "growth of each file, never the fall when file 1 left");
    }
}
