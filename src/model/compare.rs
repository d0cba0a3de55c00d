//! Comparison maths: two sets of models, per metric the time-weighted average, the 95th
//! percentile and the standard deviation of its per-interval values on each side, the delta of
//! the averages, its % change, how steadily the intervals moved ([`steadiness`]) and the change's
//! score, grouped by pane and ranked by the score.
//! `ioscope compare` (two recordings) and the TUI's baseline (a pinned moment against now) both
//! use it; metrics are the Model's own JSON keys ([`super::flatten`]) plus per-comm hit % and
//! sync calls. The formulas: src/model/README.md, "Comparison".

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::flatten::numbers;
use super::Model;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PaneComparison {
    pub pane: String,
    pub metrics: Vec<MetricComparison>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MetricComparison {
    /// The metric's key: the Model's JSON key, after the device's or process's name.
    pub metric: String,
    /// What a person reads for it ([`metric_label`]): "paged out/s", "loop2 write/s".
    pub label: String,
    /// What the values are in, once multiplied by `scale`: "B/s", "/s", "ms", "%", "B" or ""
    /// (a count).
    pub unit: &'static str,
    /// The values' factor to `unit`: 1024 for a key in kB/KiB (`pgpgout_kb_s`, `wareq_sz`), else 1.
    /// The values themselves stay in the key's unit.
    pub scale: f64,
    pub a_avg: f64,
    pub a_p95: f64,
    pub b_avg: f64,
    pub b_p95: f64,
    /// The standard deviation of the per-interval values on each side (0 for one interval).
    pub a_sd: f64,
    pub b_sd: f64,
    /// b_avg − a_avg.
    pub delta: f64,
    /// delta / |a_avg| × 100; null when a_avg is 0 (the metric appeared).
    pub change_pct: Option<f64>,
    /// How steadily the intervals moved the way the averages did ([`steadiness`]): 1 when every
    /// interval of B is beyond every interval of A, 0 when they overlap as much one way as the
    /// other (or moved against the averages).
    pub steadiness: f64,
    /// The size of the change in its pane's terms ([`score`]); rows come largest first.
    pub score: f64,
    /// |delta| ≤ 2 × its standard error √(a_sd²/n_A + b_sd²/n_B): ranked after every change
    /// beyond its noise.
    pub within_noise: bool,
    /// The same figure under other keys of the same device, process or file ([`merge_aliases`]):
    /// one row, not three, in the rank.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
}

/// The panes of a comparison, in order.
pub const PANES: [&str; 6] = ["memory", "psi", "devices", "processes", "cache", "syncs"];

/// Model keys that are identities, static facts or ioscope's own cross-checks, not measurements.
fn skipped(key: &str) -> bool {
    let last = key.rsplit(['.', ' ']).next().unwrap_or(key);
    matches!(
        last,
        "major"
            | "minor"
            | "pid"
            | "ppid"
            | "uid"
            | "total"
            | "dirty_expire_centisecs"
            | "dirty_writeback_centisecs"
            | "cgroup_id"
            | "samples"
            | "count"
    ) || key.contains("kernel_dirty")
        || key.contains("settings.")
        || key.contains("cross_check.")
        || key.contains("crosscheck.")
}

/// What a metric is in, from its key: a pane's metrics are weighed against those of their unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unit {
    BytesPerSec,
    PerSec,
    Ms,
    Pct,
    Bytes,
    Count,
}

impl Unit {
    pub fn label(self) -> &'static str {
        match self {
            Unit::BytesPerSec => "B/s",
            Unit::PerSec => "/s",
            Unit::Ms => "ms",
            Unit::Pct => "%",
            Unit::Bytes => "B",
            Unit::Count => "",
        }
    }

    /// The noise floor ε: one page (a second), one operation a second, 0.1 ms, one point, one.
    pub fn floor(self) -> f64 {
        match self {
            Unit::BytesPerSec | Unit::Bytes => 4096.0,
            Unit::PerSec | Unit::Pct | Unit::Count => 1.0,
            Unit::Ms => 0.1,
        }
    }

    /// The unit of `key` in `pane`, and the factor turning its values into it (kB → bytes).
    pub fn of(pane: &str, key: &str) -> (Unit, f64) {
        let last = key.rsplit(['.', ' ']).next().unwrap_or(key);
        if last.ends_with("kb_s") {
            (Unit::BytesPerSec, 1024.0)
        } else if last.ends_with("bytes_s") || last.ends_with("char_s") {
            (Unit::BytesPerSec, 1.0)
        } else if last.ends_with("_pct") || last == "util" || last.ends_with("avg10") {
            (Unit::Pct, 1.0)
        } else if last.ends_with("_ms") || last.ends_with("_ms_avg") || last.ends_with("await") {
            (Unit::Ms, 1.0)
        } else if last.ends_with("_sz") && last != "aqu_sz" {
            (Unit::Bytes, 1024.0)
        } else if last == "avg_size"
            || (pane == "memory" && !last.ends_with("_s"))
            || (pane == "cache" && matches!(last, "buffers" | "cached"))
        {
            (Unit::Bytes, 1.0)
        } else if last.ends_with("_s") && !last.ends_with("_ms_s") || last.ends_with("iops") {
            (Unit::PerSec, 1.0)
        } else {
            (Unit::Count, 1.0)
        }
    }
}

/// What a person reads for a metric's key (see [`MetricComparison::metric`]): the name before
/// the last space (a device, a process's name, a sync call's file) kept, the JSON key after it
/// as the TUI labels that figure: `rates.pgpgout_kb_s` → "paged out/s", `loop2 wkb_s` →
/// "loop2 write/s", `fio read_bytes_s` → "fio read/s". A key without a label of its own loses
/// its unit suffix for a plain one (`_bytes_s`, `_kb_s`, `_s` → "/s"; `_pct` → " %"; `_ms` →
/// " ms") and its underscores.
pub fn metric_label(key: &str) -> String {
    let (who, k) = match key.rsplit_once(' ') {
        Some((who, k)) => (Some(who), k),
        None => (None, key),
    };
    let named = match k {
        "rates.pgpgin_kb_s" => "paged in/s",
        "rates.pgpgout_kb_s" => "paged out/s",
        "rates.majfault_s" => "major faults/s",
        "rates.refault_file_s" => "refaults/s",
        "rates.scan_s" => "pages scanned/s",
        "rates.steal_s" => "pages stolen/s",
        "rates.dirtied_pages_s" => "pages dirtied/s",
        "rates.written_pages_s" => "pages written/s",
        "active_file" => "active(file)",
        "inactive_file" => "inactive(file)",
        "slab_reclaimable" => "slab reclaimable",
        "dirty_background_threshold" => "background writeback threshold",
        "dirty_threshold" => "throttle threshold",
        "rkb_s" | "read_bytes_s" | "bpf.read_bytes_s" => "read/s",
        "wkb_s" | "write_bytes_s" | "bpf.write_bytes_s" => "write/s",
        "dkb_s" => "discard/s",
        "r_s" | "bpf.read_iops" => "r/s",
        "w_s" | "bpf.write_iops" => "w/s",
        "d_s" => "discards/s",
        "f_s" => "flushes/s",
        "bpf.other_iops" => "other requests/s",
        "rrqm_s" => "rrqm/s",
        "wrqm_s" => "wrqm/s",
        "rareq_sz" => "rareq-sz",
        "wareq_sz" => "wareq-sz",
        "dareq_sz" => "dareq-sz",
        "aqu_sz" => "aqu-sz",
        "r_await" | "w_await" | "d_await" | "f_await" => k,
        "util" => "%util",
        "in_flight" => "in flight",
        "cancelled_write_bytes_s" => "cancelled/s",
        "cache_estimate_bytes_s" => "cache est./s",
        "hit_pct" => "hit %",
        "calls_s" => "calls/s",
        "mean_ms" => "mean ms",
        "io_wait_ms_s" => "IO wait ms/s",
        _ => "",
    };
    let cause = k.strip_prefix("io_wait.").and_then(|c| c.strip_suffix("_ms_s"));
    let mut label = match cause {
        Some(c) => format!("IO wait {} ms/s", c.replace('_', " ")),
        None if named.is_empty() => plain_label(k),
        None => named.to_string(),
    };
    // The eBPF's own count of a device's requests, beside diskstats' (same label otherwise).
    if k.starts_with("bpf.") && !named.is_empty() {
        label = format!("{label} (eBPF)");
    }
    match who {
        Some(w) => format!("{w} {label}"),
        None => label,
    }
}

/// A key's plain label: dots and underscores as spaces, its unit suffix as a unit.
fn plain_label(k: &str) -> String {
    let k = k.trim_start_matches("rates.");
    let (stem, unit) = [
        ("_bytes_s", "/s"),
        ("_kb_s", "/s"),
        ("_pages_s", " pages/s"),
        ("_ms_s", " ms/s"),
        ("_s", "/s"),
        ("_avg10", " % (avg10)"),
        ("_pct", " %"),
        ("_ms", " ms"),
        ("_us", " µs"),
    ]
    .iter()
    .find_map(|(suffix, unit)| k.strip_suffix(suffix).map(|s| (s, *unit)))
    .unwrap_or((k, ""));
    format!("{}{unit}", stem.replace(['_', '.'], " "))
}

/// How one interval's value of a metric counts towards its side's average.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Weight {
    /// By the interval's length; an interval without the metric counts as 0 (a rate, a gauge).
    Time,
    /// Only the intervals that have it, each with this weight (a latency or a request size by
    /// its interval's length).
    By(f64),
    /// Only the intervals that have it, each by how many things it is the share or mean of (a
    /// hit % by its accesses, a mean call duration by its calls); its size in its pane is that
    /// count's rate, not its value.
    Count(f64),
}

/// Calls `f(pane, metric, value, weight)` for every metric of one model.
fn for_each_metric(m: &Model, mut f: impl FnMut(&'static str, String, f64, Weight)) {
    let present = Weight::By(if m.interval_s > 0.0 { m.interval_s } else { 1.0 });
    let mut push_by = |pane: &'static str, key: String, v: f64, w: Option<Weight>| {
        if skipped(&key) {
            return;
        }
        // A latency, a request size or a share exists only where something happened.
        let w = w.unwrap_or(match Unit::of(pane, &key).0 {
            Unit::Ms if !key.ends_with("stall_ms") => present,
            Unit::Pct if !key.ends_with("util") && !key.ends_with("avg10") => present,
            Unit::Bytes if pane == "devices" => present,
            _ => Weight::Time,
        });
        f(pane, key, v, w);
    };
    for (k, v) in numbers(&to_value(&m.memory), "") {
        push_by("memory", k, v, None);
    }
    for (k, v) in numbers(&to_value(&m.psi), "") {
        push_by("psi", k, v, None);
    }
    for d in m.devices.iter().filter(|d| !d.is_partition) {
        let t = if m.interval_s > 0.0 { m.interval_s } else { 1.0 };
        for (k, v) in numbers(&to_value(d), "") {
            let w = device_requests(d, &k).map(|rate| Weight::Count(rate * t));
            push_by("devices", format!("{} {k}", d.name), v, w);
        }
    }
    // By the name people read: a kworker's workqueue changes from one sample to the next.
    let mut by_comm: BTreeMap<std::borrow::Cow<'_, str>, BTreeMap<String, f64>> = BTreeMap::new();
    for p in &m.processes {
        for (k, v) in numbers(&to_value(p), "") {
            *by_comm.entry(p.name()).or_default().entry(k).or_default() += v;
        }
    }
    for (comm, metrics) in by_comm {
        for (k, v) in metrics {
            push_by("processes", format!("{comm} {k}"), v, None);
        }
    }
    if let Some(cache) = &m.cache {
        for (k, v) in numbers(&to_value(cache), "") {
            let w = (k == "hit_pct").then_some(Weight::Count(cache.accesses as f64));
            push_by("cache", k, v, w);
        }
    }
    // Per comm, what adds up across processes (per-second rates), and the hit % of their
    // accesses together.
    let mut cache_by_comm: BTreeMap<std::borrow::Cow<'_, str>, (BTreeMap<String, f64>, u64, u64)> =
        BTreeMap::new();
    for p in &m.cache_processes {
        let e = cache_by_comm.entry(super::names::person_name(&p.comm)).or_default();
        for (k, v) in numbers(&to_value(p), "").into_iter().filter(|(k, _)| k.ends_with("_s")) {
            *e.0.entry(k).or_default() += v;
        }
        e.1 += p.accesses;
        e.2 += p.misses.min(p.accesses);
    }
    for (comm, (metrics, accesses, misses)) in cache_by_comm {
        for (k, v) in metrics {
            push_by("cache", format!("{comm} {k}"), v, None);
        }
        if let Some(hit) = super::page_cache::hit_pct(accesses - misses, accesses) {
            push_by("cache", format!("{comm} hit_pct"), hit, Some(Weight::Count(accesses as f64)));
        }
    }
    for_each_iowait_metric(m, &mut push_by);
    for_each_sync_metric(m, push_by);
}

/// I/O wait per comm, its processes' threads together (src/model/iowait.rs): ms blocked per
/// second of the interval, all causes (`COMM io_wait_ms_s`) and per cause that waited
/// (`COMM io_wait.CAUSE_ms_s`), in the processes pane. An interval where the comm did not wait
/// counts as 0 (a rate).
fn for_each_iowait_metric(m: &Model, mut push: impl FnMut(&'static str, String, f64, Option<Weight>)) {
    let Some(iowait) = m.iowait.as_ref().filter(|_| m.interval_s > 0.0) else { return };
    let mut sums: BTreeMap<String, f64> = BTreeMap::new();
    for p in iowait.processes.iter().filter(|p| p.wait_s > 0.0) {
        let comm = super::names::person_name(&p.comm);
        *sums.entry(format!("{comm} io_wait_ms_s")).or_default() += p.wait_s;
        for (cause, s) in p.by_cause_s.iter().filter(|(_, s)| **s > 0.0) {
            *sums.entry(format!("{comm} io_wait.{cause}_ms_s")).or_default() += s;
        }
    }
    for (key, s) in sums {
        push("processes", key, s * 1e3 / m.interval_s, None);
    }
}

/// The sync calls completed in the interval: per comm (all its calls) and per comm, call and
/// file, their rate (`calls_s`) and mean duration (`mean_ms`, weighted by calls).
fn for_each_sync_metric(m: &Model, mut push: impl FnMut(&'static str, String, f64, Option<Weight>)) {
    let secs = m.interval_s;
    let mut sums: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for r in m.syncs.iter().filter(|r| r.calls_interval > 0) {
        let total_s = r.interval_mean_s * r.calls_interval as f64;
        let comm = super::names::person_name(&r.comm);
        for key in [comm.to_string(), format!("{comm} {} {}", r.syscall, r.target())] {
            let e = sums.entry(key).or_default();
            e.0 += r.calls_interval;
            e.1 += total_s;
        }
    }
    for (key, (calls, total_s)) in sums {
        if secs > 0.0 {
            push("syncs", format!("{key} calls_s"), calls as f64 / secs, None);
        }
        let mean_ms = total_s / calls as f64 * 1e3;
        push("syncs", format!("{key} mean_ms"), mean_ms, Some(Weight::Count(calls as f64)));
    }
}

/// A device's latency or request size is a mean over its requests: the requests of the interval
/// it is the mean of (per second), by the direction its key names (`r_await`, `rareq_sz`: reads;
/// `w_`, `d_`, `f_`: writes, discards, flushes; the eBPF latencies and queue time: all of them),
/// so an interval without requests adds nothing to it. None for the device's other metrics
/// (rates, utilisation, queue depth, counts).
fn device_requests(d: &crate::model::DeviceModel, key: &str) -> Option<f64> {
    // aqu_sz is a queue depth averaged over time, not a mean over requests.
    if key == "aqu_sz" || !matches!(Unit::of("devices", key).0, Unit::Ms | Unit::Bytes) {
        return None;
    }
    let (ds, fs) = (d.d_s.unwrap_or(0.0), d.f_s.unwrap_or(0.0));
    Some(match key {
        k if k.starts_with("r_") || k.starts_with("rareq") => d.r_s,
        k if k.starts_with("w_") || k.starts_with("wareq") => d.w_s,
        k if k.starts_with("d_") || k.starts_with("dareq") => ds,
        k if k.starts_with("f_") => fs,
        _ => d.r_s + d.w_s + ds + fs,
    })
}

/// Values kept per metric for its p95: all of them up to this many (the p95 is exact), then a
/// uniform sample of this many (reservoir sampling), so a side's memory does not grow with its
/// length.
pub const P95_RESERVOIR: usize = 512;

/// One metric over one side's intervals.
#[derive(Clone, Debug, Default)]
struct MetricStats {
    /// Σ weight × value, Σ weight × value², Σ weight (for `Weight::By`), Σ value and Σ value².
    sum_wv: f64,
    sum_wv2: f64,
    sum_w: f64,
    sum_v: f64,
    sum_v2: f64,
    /// Averaged over the intervals that have it only (`Weight::By`, `Weight::Count`).
    present_only: bool,
    /// Weighted by a count (`Weight::Count`): its size is Σ weight / seconds.
    counted: bool,
    /// Intervals that had the metric (in the others it counts as 0, unless `present_only`).
    seen: usize,
    /// (value, vote) of each interval kept: 1, or 0 for an interval that adds nothing to the
    /// average (a latency's interval without requests).
    reservoir: Vec<(f64, f64)>,
    /// Σ vote of the intervals seen.
    sum_vote: f64,
}

/// One side of a comparison, summarised as its models stream by: per metric the sums of the
/// weighted average and standard deviation and a bounded sample for the p95. A process (by comm)
/// or device absent from a model did no I/O in it: its rates count as 0 there, so averages are
/// over the same intervals on both sides; a latency, size or hit % is averaged over the
/// intervals that have one.
#[derive(Clone, Debug, Default)]
pub struct Accumulator {
    pub intervals: usize,
    /// Σ interval lengths, seconds.
    pub seconds: f64,
    metrics: BTreeMap<&'static str, BTreeMap<String, MetricStats>>,
    rng: u64,
}

impl Accumulator {
    pub fn push(&mut self, m: &Model) {
        let t = m.interval_s;
        let metrics = &mut self.metrics;
        let rng = &mut self.rng;
        for_each_metric(m, |pane, key, v, weight| {
            let st = metrics.entry(pane).or_default().entry(key).or_default();
            let w = match weight {
                Weight::Time => t,
                Weight::By(w) | Weight::Count(w) => {
                    st.present_only = true;
                    st.counted = matches!(weight, Weight::Count(_));
                    st.sum_w += w;
                    w
                }
            };
            st.sum_wv += w * v;
            st.sum_wv2 += w * v * v;
            st.sum_v += v;
            st.sum_v2 += v * v;
            st.seen += 1;
            // One interval, one vote: a heavy interval (the most requests) is one observation.
            let vote = if matches!(weight, Weight::Time) || w > 0.0 { 1.0 } else { 0.0 };
            st.sum_vote += vote;
            if st.reservoir.len() < P95_RESERVOIR {
                st.reservoir.push((v, vote));
            } else {
                // xorshift64*: deterministic, so the same files always give the same table.
                *rng = if *rng == 0 { 0x9E37_79B9_7F4A_7C15 } else { *rng };
                *rng ^= *rng >> 12;
                *rng ^= *rng << 25;
                *rng ^= *rng >> 27;
                let j = (rng.wrapping_mul(0x2545_F491_4F6C_DD1D) % st.seen as u64) as usize;
                if j < P95_RESERVOIR {
                    st.reservoir[j] = (v, vote);
                }
            }
        });
        self.intervals += 1;
        self.seconds += t;
    }

    /// The weighted mean and standard deviation of the per-interval values: by interval length
    /// over every interval (the plain mean when the lengths sum to 0), or for a present-only
    /// metric by its weights over the intervals that have it.
    fn mean_sd(&self, st: &MetricStats) -> (f64, f64) {
        let (sum, sum2, n) = if st.present_only {
            if st.sum_w > 0.0 {
                (st.sum_wv, st.sum_wv2, st.sum_w)
            } else {
                (st.sum_v, st.sum_v2, st.seen as f64)
            }
        } else if self.seconds > 0.0 {
            (st.sum_wv, st.sum_wv2, self.seconds)
        } else {
            (st.sum_v, st.sum_v2, self.intervals as f64)
        };
        if n <= 0.0 {
            return (0.0, 0.0);
        }
        let mean = sum / n;
        (mean, (sum2 / n - mean * mean).max(0.0).sqrt())
    }

    /// The standard error of the mean: sd / √n, n the intervals it is over.
    fn std_error(&self, st: &MetricStats, sd: f64) -> f64 {
        let n = if st.present_only { st.seen } else { self.intervals.max(st.seen) };
        if n == 0 {
            0.0
        } else {
            sd / (n as f64).sqrt()
        }
    }

    /// What the metric weighs in its pane: for a count-weighted metric its count's rate, else
    /// its average.
    fn size(&self, st: &MetricStats, avg: f64) -> f64 {
        if st.counted {
            let t = if self.seconds > 0.0 { self.seconds } else { self.intervals as f64 };
            if t > 0.0 {
                st.sum_w / t
            } else {
                0.0
            }
        } else {
            avg.abs()
        }
    }

    /// The per-interval values as (value, weight), one vote per interval (none for an interval
    /// that adds nothing to the average: a latency's without requests; an interval without the
    /// metric is a 0, unless present-only); past [`P95_RESERVOIR`] intervals the sample's, scaled
    /// to all the intervals seen.
    fn samples(&self, st: &MetricStats) -> Vec<(f64, f64)> {
        let kept: f64 = st.reservoir.iter().map(|x| x.1).sum();
        let k = if kept > 0.0 { st.sum_vote / kept } else { 0.0 };
        let mut items: Vec<(f64, f64)> =
            st.reservoir.iter().filter(|x| x.1 > 0.0).map(|&(v, w)| (v, w * k)).collect();
        let absent = self.intervals.saturating_sub(st.seen);
        if !st.present_only && absent > 0 {
            items.push((0.0, absent as f64));
        }
        items
    }

    /// The weighted median of [`Self::samples`] (0 without intervals).
    fn median(&self, st: &MetricStats) -> f64 {
        let mut items = self.samples(st);
        let n: f64 = items.iter().map(|x| x.1).sum();
        items.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut acc = 0.0;
        for (v, w) in &items {
            acc += w;
            if acc >= 0.5 * n {
                return *v;
            }
        }
        0.0
    }

    /// The nearest-rank p95 over every interval (absent ones as 0, unless present-only): exact
    /// while the reservoir holds every value, else over the sample, each value standing for seen
    /// / sample size.
    fn p95(&self, st: &MetricStats) -> f64 {
        let n = if st.present_only { st.seen } else { self.intervals.max(st.seen) };
        if n == 0 {
            return 0.0;
        }
        let zeros = (n - st.seen) as f64;
        let w = if st.reservoir.is_empty() { 0.0 } else { st.seen as f64 / st.reservoir.len() as f64 };
        let mut items: Vec<(f64, f64)> = st.reservoir.iter().map(|&(v, _)| (v, w)).collect();
        if zeros > 0.0 {
            items.push((0.0, zeros));
        }
        items.sort_by(|a, b| a.0.total_cmp(&b.0));
        let rank = (0.95 * n as f64).ceil().clamp(1.0, n as f64);
        let mut acc = 0.0;
        for (v, wt) in &items {
            acc += wt;
            if acc >= rank - 1e-9 {
                return *v;
            }
        }
        items.last().map_or(0.0, |x| x.0)
    }
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The mean of `v` (0 when empty).
pub fn average(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The mean of `v` weighted by each interval's length `w` (seconds): Σ wᵢvᵢ / Σ wᵢ. For a rate this
/// is Δcounter over the whole time, as sar averages; an interval stretched by a late sample counts
/// for its real length. Falls back to the plain mean when the weights sum to 0.
pub fn time_weighted_average(v: &[f64], w: &[f64]) -> f64 {
    let total: f64 = w.iter().take(v.len()).sum();
    if total <= 0.0 || w.len() < v.len() {
        return average(v);
    }
    v.iter().zip(w).map(|(x, w)| x * w).sum::<f64>() / total
}

/// The 95th percentile by the nearest-rank method: the smallest value with at least 95 % of the
/// values at or below it (0 when empty).
pub fn p95(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut sorted = v.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let rank = (0.95 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Compares two sets of models: metrics both sides show as all-zero are left out; within a pane
/// the rows are ranked by [`order`].
pub fn compare_models(a: &[Model], b: &[Model]) -> Vec<PaneComparison> {
    let (mut sa, mut sb) = (Accumulator::default(), Accumulator::default());
    a.iter().for_each(|m| sa.push(m));
    b.iter().for_each(|m| sb.push(m));
    compare_accumulated(&sa, &sb)
}

/// How much a metric changed, against its unit's noise floor ε, in ratio terms:
/// |ln((b + ε) / (a + ε))|, symmetric for rises and drops; for a percentage the larger of that and
/// the same of its complement (100 − x: a hit % from 99 to 90 is ten times the misses). `a` and
/// `b` are the sides' averages, or for a tail figure ([`is_tail`]) their medians.
pub fn log_change(unit: Unit, a: f64, b: f64) -> f64 {
    let e = unit.floor();
    let ratio = |a: f64, b: f64| ((b.abs() + e) / (a.abs() + e)).ln().abs();
    let r = ratio(a, b);
    if unit == Unit::Pct && (0.0..=100.0).contains(&a) && (0.0..=100.0).contains(&b) {
        r.max(ratio(100.0 - a, 100.0 - b))
    } else {
        r
    }
}

/// The score of a change: [`log_change`] × its [`steadiness`] × its share of its group, `size`
/// (the larger side's average, or for a hit % or mean duration the larger side's rate of accesses
/// or calls; times [`tail_fraction`] for a tail figure) over the largest `size` among the group's
/// metrics of its unit and kind (`largest`, without the tail fraction). Values in the unit's base (kB as bytes). A group is a pane, or one device in the devices pane.
pub fn score(unit: Unit, a: f64, b: f64, steadiness: f64, size: f64, largest: f64) -> f64 {
    let share = if largest > 0.0 { (size / largest).min(1.0) } else { 0.0 };
    share * steadiness.clamp(0.0, 1.0) * log_change(unit, a, b)
}

/// A tail figure: a per-interval percentile above the median or a maximum (`lat_p99_ms`,
/// `device.max_ms`, `depth.max`). One interval's spike moves its average a lot and is not a
/// change: its [`log_change`] is that of the sides' medians.
pub fn is_tail(key: &str) -> bool {
    let last = key.rsplit(['.', ' ']).next().unwrap_or(key);
    last.split('_').any(|t| matches!(t, "max" | "p90" | "p95" | "p99" | "p999"))
}

/// The share of its distribution's events a figure describes, which is what it weighs beside the
/// mean of the same events ([`score`]'s `size`): 1 for a rate, a mean or a median; for a tail
/// figure ([`is_tail`]) the events in the tail: p90 0.1, p95 0.05, p99 and a maximum 0.01 (a
/// maximum is one event: weighed no more than the 1 % of p99), p999 0.001. A tail moving from a
/// tiny baseline (a 4 µs queue time becoming 16 ms for the largest 5 % of 19 requests/s) is a
/// change for those requests, not for the device: its mean carries the change for all of them.
pub fn tail_fraction(key: &str) -> f64 {
    let last = key.rsplit(['.', ' ']).next().unwrap_or(key);
    last.split('_')
        .map(|t| match t {
            "p90" => 0.1,
            "p95" => 0.05,
            "p99" | "max" => 0.01,
            "p999" => 0.001,
            _ => 1.0,
        })
        .fold(1.0, f64::min)
}

/// How steadily a metric moved: Cliff's δ of the per-interval values, the share of pairs (one
/// interval of A, one of B) where B is above A less the share where it is below, each interval
/// by its weight in `a` and `b` (value, weight: one vote an interval), signed by the averages'
/// `delta` and floored at 0.
/// A rank statistic: a steady 3× rise is 1 however noisy each side is within itself, a burst in
/// one of n intervals moves it by 1/n only, and two sides that overlap as much one way as the
/// other score 0, whatever their averages say. Empty sides: 1 (nothing to weigh the change by).
pub fn steadiness(a: &[(f64, f64)], b: &[(f64, f64)], delta: f64) -> f64 {
    let wa: f64 = a.iter().map(|x| x.1).sum();
    let wb: f64 = b.iter().map(|x| x.1).sum();
    if wa <= 0.0 || wb <= 0.0 {
        return 1.0;
    }
    let mut sorted: Vec<(f64, f64)> = b.to_vec();
    sorted.sort_by(|x, y| x.0.total_cmp(&y.0));
    // below[i]: the weight of sorted[..i].
    let mut below = Vec::with_capacity(sorted.len() + 1);
    below.push(0.0);
    for (_, w) in &sorted {
        below.push(below.last().copied().unwrap_or(0.0) + w);
    }
    let mut net = 0.0;
    for &(v, w) in a {
        let lo = sorted.partition_point(|x| x.0 < v);
        let hi = sorted.partition_point(|x| x.0 <= v);
        let (b_below, b_above) = (below[lo], wb - below[hi]);
        net += w * (b_above - b_below);
    }
    let d = net / (wa * wb);
    (if delta < 0.0 { -d } else { d }).clamp(0.0, 1.0)
}

/// The group a metric is weighed in: its device in the devices pane (devices are apart: a disk's
/// writes do not dwarf a loop device's), else the pane. A mean over requests (a device's latency
/// or request size, weighed by its requests per second) is weighed across the whole pane: a
/// latency matters as much as the requests that saw it, so a disk's few requests' latency does
/// not weigh as much as a busy device's reads.
fn group<'a>(pane: &str, metric: &'a str, counted: bool) -> &'a str {
    if pane == "devices" && !counted {
        metric.split(' ').next().unwrap_or("")
    } else {
        ""
    }
}

/// One row per figure: a metric of the same subject (the key before its last space: a device,
/// process or file; the pane for its own figures) and unit whose statistics on both sides are
/// exactly another's (`w/s (eBPF)` and the block probes' write IOPS are one count under two keys)
/// becomes an alias of the first in `rows`' order, which keeps the shorter key. Figures that merely
/// agree (diskstats' w/s beside eBPF's) differ somewhere and stay apart.
pub fn merge_aliases(rows: Vec<MetricComparison>) -> Vec<MetricComparison> {
    type Key = (String, &'static str, [u64; 8]);
    let key = |m: &MetricComparison| -> Key {
        let stats = [m.a_avg, m.b_avg, m.a_p95, m.b_p95, m.a_sd, m.b_sd, m.steadiness, m.score];
        (m.metric.rsplit_once(' ').map_or("", |(s, _)| s).to_string(), m.unit, stats.map(f64::to_bits))
    };
    let mut seen: std::collections::HashMap<Key, usize> = std::collections::HashMap::new();
    let mut out: Vec<MetricComparison> = Vec::with_capacity(rows.len());
    for m in rows {
        match seen.entry(key(&m)) {
            std::collections::hash_map::Entry::Occupied(e) => {
                let kept = &mut out[*e.get()];
                let alias = if m.metric.len() < kept.metric.len() {
                    kept.label = m.label;
                    std::mem::replace(&mut kept.metric, m.metric)
                } else {
                    m.metric
                };
                kept.aliases.push(alias);
                kept.aliases.extend(m.aliases);
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(out.len());
                out.push(m);
            }
        }
    }
    out
}

/// The rows' order: changes beyond their noise first, then those within it, then those without
/// a score (a latency or hit % one side lacks); within each the larger score, then the larger
/// |delta|, then by name.
pub fn order(x: &MetricComparison, y: &MetricComparison) -> std::cmp::Ordering {
    let tier = |m: &MetricComparison| match () {
        _ if m.score <= 0.0 => 2,
        _ if m.within_noise => 1,
        _ => 0,
    };
    tier(x)
        .cmp(&tier(y))
        .then(y.score.total_cmp(&x.score))
        .then(y.delta.abs().total_cmp(&x.delta.abs()))
        .then(x.metric.cmp(&y.metric))
}

/// A metric while its pane is scored.
struct Scored {
    m: MetricComparison,
    unit: Unit,
    scale: f64,
    counted: bool,
    /// max(size A, size B), in the unit's base.
    size: f64,
    /// The sides' medians, for a tail figure's [`log_change`].
    medians: (f64, f64),
    /// A present-only metric (a latency, a hit %) that one side does not have: no change to
    /// score (the process or device appearing or going shows in its rates).
    one_sided: bool,
}

/// [`compare_models`] over two sides already summarised.
pub fn compare_accumulated(sa: &Accumulator, sb: &Accumulator) -> Vec<PaneComparison> {
    let empty = BTreeMap::new();
    let none = MetricStats::default();
    PANES
        .iter()
        .map(|pane| {
            let (ma, mb) = (sa.metrics.get(pane).unwrap_or(&empty), sb.metrics.get(pane).unwrap_or(&empty));
            let mut keys: Vec<&String> = ma.keys().chain(mb.keys()).collect();
            keys.sort();
            keys.dedup();
            let mut rows: Vec<Scored> = keys
                .into_iter()
                .filter_map(|k| {
                    let (va, vb) = (ma.get(k).unwrap_or(&none), mb.get(k).unwrap_or(&none));
                    let ((a_avg, a_sd), (b_avg, b_sd)) = (sa.mean_sd(va), sb.mean_sd(vb));
                    let (a_p95, b_p95) = (sa.p95(va), sb.p95(vb));
                    if [a_avg, b_avg, a_p95, b_p95].iter().all(|x| *x == 0.0) {
                        return None;
                    }
                    let delta = b_avg - a_avg;
                    let change_pct = (a_avg != 0.0).then(|| delta / a_avg.abs() * 100.0);
                    let (unit, scale) = Unit::of(pane, k);
                    let noise = sa.std_error(va, a_sd).hypot(sb.std_error(vb, b_sd));
                    let present_only = va.present_only || vb.present_only;
                    let m = MetricComparison {
                        metric: k.clone(),
                        label: metric_label(k),
                        unit: unit.label(),
                        scale,
                        a_avg,
                        a_p95,
                        b_avg,
                        b_p95,
                        a_sd,
                        b_sd,
                        delta,
                        change_pct,
                        steadiness: steadiness(&sa.samples(va), &sb.samples(vb), delta),
                        score: 0.0,
                        within_noise: delta.abs() <= 2.0 * noise && noise > 0.0,
                        aliases: Vec::new(),
                    };
                    Some(Scored {
                        m,
                        unit,
                        scale,
                        counted: va.counted || vb.counted,
                        size: sa.size(va, a_avg).max(sb.size(vb, b_avg))
                            * if va.counted || vb.counted { 1.0 } else { scale },
                        medians: (sa.median(va), sb.median(vb)),
                        one_sided: present_only && (va.seen == 0 || vb.seen == 0),
                    })
                })
                .collect();
            let mut largest: BTreeMap<(&str, Unit, bool), f64> = BTreeMap::new();
            for r in &rows {
                let e = largest.entry((group(pane, &r.m.metric, r.counted), r.unit, r.counted)).or_default();
                *e = e.max(r.size);
            }
            let scores: Vec<f64> = rows
                .iter()
                .map(|r| {
                    let top = largest
                        .get(&(group(pane, &r.m.metric, r.counted), r.unit, r.counted))
                        .copied()
                        .unwrap_or(0.0);
                    let (a, b) = if is_tail(&r.m.metric) { r.medians } else { (r.m.a_avg, r.m.b_avg) };
                    if r.one_sided {
                        0.0
                    } else {
                        let size = r.size * tail_fraction(&r.m.metric);
                        score(r.unit, a * r.scale, b * r.scale, r.m.steadiness, size, top)
                    }
                })
                .collect();
            for (r, s) in rows.iter_mut().zip(scores) {
                r.m.score = s;
            }
            let mut metrics: Vec<MetricComparison> = rows.into_iter().map(|r| r.m).collect();
            metrics.sort_by(order);
            let metrics = merge_aliases(metrics);
            PaneComparison { pane: pane.to_string(), metrics }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_and_nearest_rank_p95_by_hand() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(average(&v), 10.5);
        // ceil(0.95 × 20) = 19th smallest.
        assert_eq!(p95(&v), 19.0);
        assert_eq!(p95(&[3.0, 1.0, 2.0]), 3.0);
        assert_eq!(p95(&[]), 0.0);
        assert_eq!(average(&[]), 0.0);
        // 10 for 1 s, then 40 for 2 s (a late sample): (10 + 80) / 3 = 30, not 25.
        assert_eq!(time_weighted_average(&[10.0, 40.0], &[1.0, 2.0]), 30.0);
        assert_eq!(time_weighted_average(&[10.0, 40.0], &[0.0, 0.0]), 25.0);
    }

    fn writers(comm_write: &[(&str, f64)]) -> Model {
        let mut m = Model::default();
        for (i, (comm, w)) in comm_write.iter().enumerate() {
            m.processes.push(crate::model::ProcessModel {
                pid: i as u32 + 1,
                comm: (*comm).into(),
                write_bytes_s: *w,
                ..Default::default()
            });
        }
        m
    }

    fn device(name: &str, r_s: f64, rkb_s: f64, w_s: f64, wkb_s: f64) -> crate::model::DeviceModel {
        crate::model::DeviceModel { name: name.into(), r_s, rkb_s, w_s, wkb_s, ..Default::default() }
    }

    fn with_devices(devices: Vec<crate::model::DeviceModel>) -> Model {
        Model { interval_s: 1.0, devices, ..Default::default() }
    }

    fn metric<'a>(panes: &'a [PaneComparison], pane: &str, name: &str) -> (usize, &'a MetricComparison) {
        let rows = &panes.iter().find(|p| p.pane == pane).unwrap().metrics;
        let i = rows.iter().position(|m| m.metric == name).unwrap_or_else(|| panic!("{name} in {rows:#?}"));
        (i + 1, &rows[i])
    }

    #[test]
    fn rises_and_drops_score_alike_and_tiny_baselines_do_not_win() {
        assert!(
            (log_change(Unit::PerSec, 1000.0, 10.0) - log_change(Unit::PerSec, 10.0, 1000.0)).abs() < 1e-12
        );
        // ln((1000 + 1) / (0 + 1)).
        assert!((score(Unit::PerSec, 1000.0, 0.0, 1.0, 1000.0, 1000.0) - 1001f64.ln()).abs() < 1e-12);
        // A hit % from 99 to 90: ten times the misses, ln((10 + 1) / (1 + 1)).
        assert!((log_change(Unit::Pct, 99.0, 90.0) - (11f64 / 2.0).ln()).abs() < 1e-12);
        // A device writing 40 MB/s at 1000 w/s, then 10 w/s; 4 KB/s of reads appear.
        let a = vec![with_devices(vec![device("vdb", 0.0, 0.0, 1000.0, 40_000.0)]); 4];
        let b = vec![with_devices(vec![device("vdb", 1.0, 4.0, 10.0, 40_000.0)]); 4];
        let panes = compare_models(&a, &b);
        let (w_rank, w) = metric(&panes, "devices", "vdb w_s");
        let (r_rank, r) = metric(&panes, "devices", "vdb rkb_s");
        assert_eq!(w_rank, 1, "{panes:#?}");
        assert!(r_rank > w_rank && r.score < 0.001, "{r:?}");
        assert_eq!((w.unit, r.unit), ("/s", "B/s"));
        assert!(!metric(&panes, "devices", "vdb wkb_s").1.score.is_nan());
    }

    #[test]
    fn a_latency_weighs_by_the_requests_that_saw_it() {
        // A loop device reading 3000 r/s (120 MB/s), then 3 r/s, its latency steady; the host's
        // disk reads 1 r/s in A at 0.3 ms, 2 r/s in B at 12 ms, with idle intervals (no reads:
        // r_await 0, not a latency). The disk's latency, seen by 2 reads a second, ranked above
        // the loop device's −99.9 % reads while every device's latency weighed against its own.
        let dev = |name: &str, r_s: f64, rkb_s: f64, r_await: f64| {
            let mut d = device(name, r_s, rkb_s, 0.0, 0.0);
            d.r_await = r_await;
            d
        };
        let side = |loop_r: f64, loop_kb: f64, vda: &[(f64, f64)]| -> Vec<Model> {
            vda.iter()
                .enumerate()
                .map(|(i, &(r_s, lat))| {
                    // The loop device's reads vary ±20 % (noise), the disk's come and go.
                    let k = if i % 2 == 0 { 0.8 } else { 1.2 };
                    let mut m = with_devices(vec![
                        dev("loop0", loop_r * k, loop_kb * k, 0.9),
                        dev("vda", r_s, r_s * 4.0, lat),
                    ]);
                    m.interval_s = 0.5;
                    m
                })
                .collect()
        };
        let a = side(3000.0, 120_000.0, &[(2.0, 0.3), (0.0, 0.0), (0.0, 0.0), (2.0, 0.3)].repeat(6));
        let b = side(3.0, 120.0, &[(4.0, 12.0), (0.0, 0.0), (4.0, 12.0), (0.0, 0.0)].repeat(6));
        let panes = compare_models(&a, &b);
        let (loop_rank, reads) = metric(&panes, "devices", "loop0 rkb_s");
        let (lat_rank, lat) = metric(&panes, "devices", "vda r_await");
        assert!(loop_rank <= 2 && lat_rank > loop_rank, "{loop_rank} {lat_rank} {panes:#?}");
        // Averaged over the reads, not over idle intervals: 0.3 and 12 ms.
        assert!((lat.a_avg - 0.3).abs() < 1e-9 && (lat.b_avg - 12.0).abs() < 1e-9, "{lat:?}");
        // Share: 2 reads/s of the pane's 3000 (the loop device's r_await's requests).
        assert!(lat.score < 0.01 && reads.score > 1.0, "{lat:?} {reads:?}");
    }

    #[test]
    fn a_change_within_the_noise_ranks_after_a_real_one() {
        // "db" writes 0 or 1000 by turns on both sides (avg 500, sd 500) then 600 on average;
        // "fio" steadily 100, then 200.
        let m = |db: f64, fio: f64| writers(&[("db", db), ("fio", fio)]);
        let a: Vec<Model> = (0..8).map(|i| m(if i % 2 == 0 { 0.0 } else { 1000.0 }, 100.0)).collect();
        let b: Vec<Model> = (0..8).map(|i| m(if i % 2 == 0 { 200.0 } else { 1000.0 }, 200.0)).collect();
        let mut a = a;
        let mut b = b;
        a.iter_mut().chain(b.iter_mut()).for_each(|m| m.interval_s = 1.0);
        let panes = compare_models(&a, &b);
        let (db_rank, db) = metric(&panes, "processes", "db write_bytes_s");
        let (fio_rank, fio) = metric(&panes, "processes", "fio write_bytes_s");
        assert!(db.within_noise && !fio.within_noise, "{db:?} {fio:?}");
        assert_eq!((db.a_sd, db.a_avg, db.b_avg), (500.0, 500.0, 600.0));
        assert!(fio_rank < db_rank);
    }

    #[test]
    fn steadiness_is_cliffs_delta_by_hand() {
        let one = |v: &[f64]| v.iter().map(|&x| (x, 1.0)).collect::<Vec<_>>();
        // Pairs (A, B): (1,2) (1,3) (2,3) above, (2,2) a tie: 3/4 − 0.
        assert_eq!(steadiness(&one(&[1.0, 2.0]), &one(&[2.0, 3.0]), 1.0), 0.75);
        // Against the averages' direction: 0; the same drop seen from A: 0.75.
        assert_eq!(steadiness(&one(&[1.0, 2.0]), &one(&[2.0, 3.0]), -1.0), 0.0);
        assert_eq!(steadiness(&one(&[2.0, 3.0]), &one(&[1.0, 2.0]), -1.0), 0.75);
        // A burst in one of ten intervals: 1/10, however large.
        let quiet = one(&[0.0; 10]);
        let mut burst = one(&[0.0; 9]);
        burst.push((1e9, 1.0));
        assert!((steadiness(&quiet, &burst, 1.0) - 0.1).abs() < 1e-12);
        // Weights: nine intervals of 0 as one item of weight 9.
        assert!((steadiness(&quiet, &[(0.0, 9.0), (1e9, 1.0)], 1.0) - 0.1).abs() < 1e-12);
        // Every B above every A: 1, whatever the spread within each side.
        assert_eq!(steadiness(&one(&[1.0, 50.0, 99.0]), &one(&[100.0, 500.0]), 1.0), 1.0);
        assert!(is_tail("vda bpf.lat_p99_ms") && is_tail("vda bpf.block.read.device.max_ms"));
        assert!(is_tail("vda bpf.block.depth.max") && !is_tail("vda bpf.lat_p50_ms"));
        assert!(!is_tail("vda r_await") && !is_tail("maxwell write_bytes_s"));
    }

    #[test]
    fn a_steady_3x_change_outranks_another_disks_spiky_latency_maximum() {
        // loop0 (the user's device) reads 60..140 r/s, then 3× that, every interval; vda (other
        // people's builds) does more requests than loop0 at a steady 2 ms p99, but in B four of
        // its twenty intervals spike to 1 s. Under the old score (noise σ added to ε) the spike's
        // average (2 → 201.6 ms) outranked the reads' steady ×3.
        let side = |k: f64, spikes: bool| -> Vec<Model> {
            (0..20)
                .map(|i| {
                    let r_s = k * (60.0 + 80.0 * f64::from(i % 5) / 4.0);
                    let mut vda = device("vda", 2000.0, 8000.0, 1000.0, 8000.0);
                    let p99 = if spikes && i % 5 == 2 { 1000.0 } else { 2.0 };
                    vda.bpf = Some(crate::model::BpfDeviceRates {
                        read_iops: 2000.0,
                        write_iops: 1000.0,
                        lat_p99_ms: Some(p99),
                        ..Default::default()
                    });
                    with_devices(vec![device("loop0", r_s, r_s * 4.0, 0.0, 0.0), vda])
                })
                .collect()
        };
        let panes = compare_models(&side(1.0, false), &side(3.0, true));
        let (reads_rank, reads) = metric(&panes, "devices", "loop0 r_s");
        let (p99_rank, p99) = metric(&panes, "devices", "vda bpf.lat_p99_ms");
        assert!((p99.b_avg - 201.6).abs() < 1e-9 && (reads.b_avg / reads.a_avg - 3.0).abs() < 1e-9);
        assert_eq!(reads.steadiness, 1.0, "{reads:?}");
        assert!((p99.steadiness - 0.2).abs() < 1e-9, "{p99:?}");
        assert!(reads_rank <= 2 && p99_rank > reads_rank, "{reads_rank} {p99_rank} {panes:#?}");
        // The medians (2 and 2 ms): no change to score.
        assert!(reads.score > 1.0 && p99.score < 1e-9, "{reads:?} {p99:?}");
    }

    #[test]
    fn a_tail_from_a_tiny_baseline_weighs_as_its_tail_not_as_every_request() {
        // Redis from `appendfsync always` to `everysec` on loop0 over vda: the writes fall from
        // 2000 to 12 a second on loop0 (6000 to 16 on vda); vda's p95 latency rises from 4 µs to
        // 16 ms for the largest 5 % of its few requests. Weighed as all of vda's requests, the p95
        // (ln(16.1 / 0.104) ≈ 5.0) outranked loop0's writes (ln(2001 / 13) ≈ 5.0 × steadiness).
        let side = |always: bool| -> Vec<Model> {
            (0..12)
                .map(|i| {
                    let jitter = f64::from(i % 3);
                    let (loop_w, vda_w, p95) = if always {
                        (2000.0 + jitter, 6000.0 + jitter, 0.004)
                    } else {
                        (12.0 + jitter, 16.0, 16.0)
                    };
                    let mut vda = device("vda", 0.0, 0.0, vda_w, vda_w * 4.0);
                    vda.bpf = Some(crate::model::BpfDeviceRates {
                        write_iops: vda_w,
                        lat_p95_ms: Some(p95),
                        ..Default::default()
                    });
                    with_devices(vec![device("loop0", 0.0, 0.0, loop_w, loop_w * 4.0), vda])
                })
                .collect()
        };
        let panes = compare_models(&side(true), &side(false));
        let (w_rank, w) = metric(&panes, "devices", "loop0 w_s");
        let (p95_rank, p95) = metric(&panes, "devices", "vda bpf.lat_p95_ms");
        assert!(w_rank <= 5 && p95_rank > w_rank, "{w_rank} {p95_rank} {panes:#?}");
        assert_eq!((w.steadiness, p95.steadiness), (1.0, 1.0));
        // The p95 scores 5 % of what it would as a mean over the same requests.
        let (a, b) = (0.004, 16.0);
        assert!((p95.score - 0.05 * log_change(Unit::Ms, a, b)).abs() < 1e-9, "{p95:?}");
        assert_eq!(
            (tail_fraction("vda bpf.block.write.queue.p99_ms"), tail_fraction("vda r_await")),
            (0.01, 1.0)
        );
        assert_eq!((tail_fraction("depth.max"), tail_fraction("lat_p999_ms")), (0.01, 0.001));
    }

    #[test]
    fn one_figure_under_two_keys_is_one_row_with_its_alias() {
        // eBPF's w/s is kept twice in the Model (bpf.write_iops, bpf.block.write.iops); diskstats'
        // w_s agrees on the averages but not interval by interval (p95), so it stays apart.
        let side = |k: f64| -> Vec<Model> {
            (0..6)
                .map(|i| {
                    let w = k * (100.0 + f64::from(i));
                    let mut d = device("loop0", 0.0, 0.0, w + if i == 5 { 1.0 } else { 0.0 }, w * 4.0);
                    d.bpf = Some(crate::model::BpfDeviceRates { write_iops: w, ..Default::default() });
                    d
                })
                .map(|d| with_devices(vec![d]))
                .collect()
        };
        let rows = merge_aliases(compare_models(&side(1.0), &side(3.0)).swap_remove(2).metrics);
        let (w_s, ebpf) = (
            rows.iter().find(|m| m.metric == "loop0 w_s").unwrap(),
            rows.iter().find(|m| m.metric == "loop0 bpf.write_iops").unwrap(),
        );
        assert!(w_s.aliases.is_empty() && ebpf.aliases.is_empty(), "{rows:#?}");
        // Two keys, same statistics: one row under the shorter key, the other its alias.
        let mut twin = ebpf.clone();
        twin.metric = "loop0 bpf.block.write.iops".into();
        let merged = merge_aliases(vec![twin, ebpf.clone(), w_s.clone()]);
        assert_eq!(merged.len(), 2, "{merged:#?}");
        assert_eq!(
            (merged[0].metric.as_str(), merged[0].aliases.clone()),
            ("loop0 bpf.write_iops", vec!["loop0 bpf.block.write.iops".to_string()])
        );
        assert_eq!(merged[0].label, ebpf.label);
        // Another device with the same figures is another row.
        let mut other = ebpf.clone();
        other.metric = "vda bpf.write_iops".into();
        assert_eq!(merge_aliases(vec![ebpf.clone(), other]).len(), 2);
    }

    #[test]
    fn a_noisy_figure_without_a_change_scores_below_a_steady_small_one() {
        // "db" writes 0 or 10 MB/s by turns (8 and 8 intervals, then 7 and 9: +12 % by chance);
        // "fio" steadily 1 MB/s, then 1.2 MB/s (+20 %, a fifth of db's size).
        let m = |db: f64, fio: f64| {
            let mut m = writers(&[("db", db), ("fio", fio)]);
            m.interval_s = 1.0;
            m
        };
        let a: Vec<Model> = (0..16).map(|i| m(if i % 2 == 0 { 0.0 } else { 1e7 }, 1e6)).collect();
        let b: Vec<Model> = (0..16).map(|i| m(if i % 2 == 0 && i < 14 { 0.0 } else { 1e7 }, 1.2e6)).collect();
        let panes = compare_models(&a, &b);
        let (db_rank, db) = metric(&panes, "processes", "db write_bytes_s");
        let (fio_rank, fio) = metric(&panes, "processes", "fio write_bytes_s");
        assert_eq!((db.a_avg, db.b_avg), (5e6, 5.625e6));
        // Cliff's δ: (9·8 − 7·8) / 256.
        assert!((db.steadiness - 0.0625).abs() < 1e-12 && fio.steadiness == 1.0, "{db:?} {fio:?}");
        // By score alone, not only by the noise tier.
        assert!(fio.score > 2.0 * db.score && fio_rank < db_rank, "{db:?} {fio:?}");
    }

    #[test]
    fn metric_labels_are_what_the_panes_say_not_json_keys() {
        for (key, label) in [
            ("rates.pgpgout_kb_s", "paged out/s"),
            ("rates.dirtied_pages_s", "pages dirtied/s"),
            ("dirty_threshold", "throttle threshold"),
            ("cached", "cached"),
            ("io.some_avg10", "io some % (avg10)"),
            ("io.full_stall_ms", "io full stall ms"),
            ("loop2 dkb_s", "loop2 discard/s"),
            ("loop2 wkb_s", "loop2 write/s"),
            ("vda wareq_sz", "vda wareq-sz"),
            ("vda util", "vda %util"),
            ("vda r_await", "vda r_await"),
            ("vda bpf.write_iops", "vda w/s (eBPF)"),
            ("vda bpf.lat_p99_ms", "vda bpf lat p99 ms"),
            ("tmux: server write_bytes_s", "tmux: server write/s"),
            ("[loop2] cache_estimate_bytes_s", "[loop2] cache est./s"),
            ("postgres hit_pct", "postgres hit %"),
            ("postgres fsync /var/lib/pg/wal calls_s", "postgres fsync /var/lib/pg/wal calls/s"),
            ("postgres io_wait_ms_s", "postgres IO wait ms/s"),
            ("postgres io_wait.page_cache_read_ms_s", "postgres IO wait page cache read ms/s"),
        ] {
            assert_eq!(metric_label(key), label, "{key}");
        }
    }

    #[test]
    fn per_comm_hit_pct_by_accesses_and_sync_calls() {
        use crate::model::page_cache::PageCacheProcessModel;
        use crate::model::syncs::SyncModel;
        let cache = |pid: u32, accesses: u64, misses: u64| PageCacheProcessModel {
            pid,
            comm: "postgres".into(),
            accesses,
            misses,
            ..Default::default()
        };
        let sync = |calls: u64, mean_s: f64| SyncModel {
            pid: 7,
            comm: "redis-server".into(),
            syscall: "fdatasync".into(),
            path: Some("/data/aof".into()),
            calls_interval: calls,
            interval_mean_s: mean_s,
            ..Default::default()
        };
        let mk = |procs: Vec<PageCacheProcessModel>, syncs: Vec<SyncModel>| Model {
            interval_s: 2.0,
            cache_processes: procs,
            syncs,
            ..Default::default()
        };
        // Two backends: 900 of 1000 and 0 of 1000 hits → 45 %; then 1990 of 2000 → 99.5 %, and
        // an interval without accesses (not 0 %).
        let a = vec![mk(vec![cache(1, 1000, 100), cache(2, 1000, 1000)], vec![sync(2000, 0.001)])];
        let b = vec![mk(vec![cache(1, 2000, 10)], vec![sync(2, 0.004)]), mk(vec![cache(1, 0, 0)], vec![])];
        let panes = compare_models(&a, &b);
        let (_, hit) = metric(&panes, "cache", "postgres hit_pct");
        assert_eq!((hit.a_avg, hit.b_avg, hit.unit), (45.0, 99.5, "%"));
        let (rank, calls) = metric(&panes, "syncs", "redis-server calls_s");
        assert_eq!(rank, 1);
        // 2000 calls in 2 s; then 2 calls in 4 s.
        assert_eq!((calls.a_avg, calls.b_avg), (1000.0, 0.5));
        let (_, mean) = metric(&panes, "syncs", "redis-server fdatasync /data/aof mean_ms");
        assert_eq!((mean.a_avg, mean.b_avg, mean.unit), (1.0, 4.0, "ms"));
    }

    #[test]
    fn io_wait_per_comm_its_processes_together_and_by_cause() {
        use crate::model::iowait::{IowaitModel, IowaitProcessModel};
        let proc_ = |pid: u32, comm: &str, causes: &[(&'static str, f64)]| IowaitProcessModel {
            pid,
            comm: comm.into(),
            wait_s: causes.iter().map(|c| c.1).sum(),
            by_cause_s: causes.iter().copied().collect(),
            ..Default::default()
        };
        let mk = |procs: Vec<IowaitProcessModel>| Model {
            interval_s: 2.0,
            iowait: Some(IowaitModel { processes: procs, cgroups: vec![] }),
            ..Default::default()
        };
        // Two backends blocked 0.5 s (reads) and 0.3 s (0.1 reads, 0.2 fsync) in 2 s: 400 ms/s;
        // then 1.2 s of fsync in one interval of two (600 ms/s), none in the other (0, not left
        // out): 300 ms/s; and a
        // cp that did not wait (no row).
        let a = vec![mk(vec![
            proc_(1, "postgres", &[("page_cache_read", 0.5), ("sync", 0.0)]),
            proc_(2, "postgres", &[("page_cache_read", 0.1), ("sync", 0.2)]),
        ])];
        let b = vec![mk(vec![proc_(1, "postgres", &[("sync", 1.2)]), proc_(3, "cp", &[])]), mk(vec![])];
        let panes = compare_models(&a, &b);
        let (_, all) = metric(&panes, "processes", "postgres io_wait_ms_s");
        assert!((all.a_avg - 400.0).abs() < 1e-9 && (all.b_avg - 300.0).abs() < 1e-9, "{all:?}");
        assert_eq!(all.label, "postgres IO wait ms/s");
        let (_, read) = metric(&panes, "processes", "postgres io_wait.page_cache_read_ms_s");
        assert!((read.a_avg - 300.0).abs() < 1e-9 && read.b_avg == 0.0, "{read:?}");
        let (_, sync) = metric(&panes, "processes", "postgres io_wait.sync_ms_s");
        assert!((sync.a_avg - 100.0).abs() < 1e-9 && (sync.b_avg - 300.0).abs() < 1e-9, "{sync:?}");
        let keys: Vec<&str> =
            panes.iter().flat_map(|p| p.metrics.iter().map(|m| m.metric.as_str())).collect();
        assert!(!keys.iter().any(|k| k.starts_with("cp ")), "{keys:?}");
    }
}
