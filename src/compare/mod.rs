//! `ioscope compare A B`: two recordings (or two time ranges of one) side by side. Per metric: the
//! time-weighted average and the 95th percentile of its per-interval values in A and in B, the delta
//! of the averages and its % change; grouped by pane, the biggest relative changes first. Settings that differ
//! between the two headers (sysctls, queue settings) come first: they are usually the point.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::model::Model;
use crate::record::RecordingHeader;
use crate::replay::flatten::numbers;

pub mod tui;

/// `ioscope compare`'s arguments.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The "before": FILE, or FILE@FROM..TO for a time range of it (offsets from its start; either
    /// end may be left out, e.g. run.rec@..60 or run.rec@2m..).
    #[arg(value_name = "A")]
    pub a: String,
    /// The "after", the same way.
    #[arg(value_name = "B")]
    pub b: String,
    /// One JSON document instead of the TUI or text table.
    #[arg(long, conflicts_with = "text")]
    pub json: bool,
    /// The text table, even on a terminal (without a terminal it is the default).
    #[arg(long)]
    pub text: bool,
    /// Do not use colours (also when NO_COLOR is set and not empty).
    #[arg(long)]
    pub no_color: bool,
    /// Show at most this many metrics per pane in the text table (all with --json).
    #[arg(long, value_name = "N", default_value = "15", value_parser = crate::util::parse_top)]
    pub top: u64,
}

impl CompareArgs {
    /// Parses the two ranges. `no_color_env` is the NO_COLOR environment variable's value.
    pub fn options(&self, no_color_env: Option<&std::ffi::OsStr>) -> Result<CompareOptions, clap::Error> {
        let parse = |s: &str| {
            RangeSpec::parse(s).map_err(|e| clap::Error::raw(clap::error::ErrorKind::InvalidValue, e))
        };
        Ok(CompareOptions {
            a: parse(&self.a)?,
            b: parse(&self.b)?,
            json: self.json,
            top: usize::try_from(self.top).unwrap_or(usize::MAX),
            text: self.text,
            color: crate::util::wants_color(self.no_color, no_color_env),
        })
    }
}

/// A recording and an optional time range of it: `FILE` or `FILE@FROM..TO`.
#[derive(Clone, Debug, PartialEq)]
pub struct RangeSpec {
    pub path: PathBuf,
    pub from: Option<Duration>,
    pub to: Option<Duration>,
}

impl RangeSpec {
    pub fn parse(s: &str) -> Result<RangeSpec, String> {
        let whole = || RangeSpec { path: PathBuf::from(s), from: None, to: None };
        let Some((path, range)) = s.rsplit_once('@') else { return Ok(whole()) };
        let Some((from, to)) = range.split_once("..") else {
            // An '@' that is not a range belongs to the file name.
            return Ok(whole());
        };
        let end = |t: &str| -> Result<Option<Duration>, String> {
            if t.is_empty() {
                Ok(None)
            } else {
                crate::util::parse_duration(t).map(Some).map_err(|e| format!("in '{s}': {e}"))
            }
        };
        let (from, to) = (end(from)?, end(to)?);
        if let (Some(f), Some(t)) = (from, to) {
            if t <= f {
                return Err(format!("in '{s}': the range's end must be after its start"));
            }
        }
        if path.is_empty() {
            return Err(format!("'{s}' names no file before '@'"));
        }
        Ok(RangeSpec { path: PathBuf::from(path), from, to })
    }

    fn describe(&self) -> String {
        let t = |d: Option<Duration>| d.map(crate::replay::timeline::offset_text).unwrap_or_default();
        match (self.from, self.to) {
            (None, None) => self.path.display().to_string(),
            _ => format!("{}@{}..{}", self.path.display(), t(self.from), t(self.to)),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct CompareOptions {
    pub a: RangeSpec,
    pub b: RangeSpec,
    pub json: bool,
    /// Metrics per pane in the text table.
    pub top: usize,
    /// Print the text table even on a terminal (otherwise a terminal gets the TUI).
    pub text: bool,
    pub color: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Comparison {
    pub a: Side,
    pub b: Side,
    pub settings_changed: Vec<SettingChange>,
    pub panes: Vec<PaneComparison>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Side {
    pub source: String,
    pub hostname: String,
    pub kernel: String,
    /// Intervals (models) the statistics are over.
    pub intervals: usize,
    pub seconds: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SettingChange {
    pub name: String,
    pub a: Option<String>,
    pub b: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PaneComparison {
    pub pane: String,
    pub metrics: Vec<MetricComparison>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MetricComparison {
    pub metric: String,
    pub a_avg: f64,
    pub a_p95: f64,
    pub b_avg: f64,
    pub b_p95: f64,
    /// b_avg − a_avg.
    pub delta: f64,
    /// delta / |a_avg| × 100; null when a_avg is 0 (the metric appeared).
    pub change_pct: Option<f64>,
}

const PANES: [&str; 5] = ["memory", "psi", "devices", "processes", "cache"];

/// Model keys that are identities or static facts, not measurements.
fn skipped(key: &str) -> bool {
    let last = key.rsplit(['.', ' ']).next().unwrap_or(key);
    matches!(
        last,
        "major" | "minor" | "pid" | "total" | "dirty_expire_centisecs" | "dirty_writeback_centisecs"
    ) || key.contains("kernel_dirty")
        || key.contains("settings.")
}

/// Calls `f(pane, metric, value)` for every metric of one model.
fn for_each_metric(m: &Model, mut f: impl FnMut(&'static str, String, f64)) {
    let mut push = |pane: &'static str, key: String, v: f64| {
        if !skipped(&key) {
            f(pane, key, v);
        }
    };
    for (k, v) in numbers(&to_value(&m.memory), "") {
        push("memory", k, v);
    }
    for (k, v) in numbers(&to_value(&m.psi), "") {
        push("psi", k, v);
    }
    for d in m.devices.iter().filter(|d| !d.is_partition) {
        for (k, v) in numbers(&to_value(d), "") {
            push("devices", format!("{} {k}", d.name), v);
        }
    }
    let mut by_comm: BTreeMap<&str, BTreeMap<String, f64>> = BTreeMap::new();
    for p in &m.processes {
        for (k, v) in numbers(&to_value(p), "") {
            *by_comm.entry(&p.comm).or_default().entry(k).or_default() += v;
        }
    }
    for (comm, metrics) in by_comm {
        for (k, v) in metrics {
            push("processes", format!("{comm} {k}"), v);
        }
    }
    if let Some(cache) = &m.cache {
        for (k, v) in numbers(&to_value(cache), "") {
            push("cache", k, v);
        }
    }
    // Per comm, only what adds up across processes: per-second rates (not hit %).
    let mut cache_by_comm: BTreeMap<&str, BTreeMap<String, f64>> = BTreeMap::new();
    for p in &m.cache_processes {
        for (k, v) in numbers(&to_value(p), "").into_iter().filter(|(k, _)| k.ends_with("_s")) {
            *cache_by_comm.entry(&p.comm).or_default().entry(k).or_default() += v;
        }
    }
    for (comm, metrics) in cache_by_comm {
        for (k, v) in metrics {
            push("cache", format!("{comm} {k}"), v);
        }
    }
}

/// Values kept per metric for its p95: all of them up to this many (the p95 is exact), then a
/// uniform sample of this many (reservoir sampling), so a side's memory does not grow with its
/// length.
pub const P95_RESERVOIR: usize = 512;

/// One metric over one side's intervals.
#[derive(Clone, Debug, Default)]
struct MetricStats {
    /// Σ interval length × value, and Σ value.
    sum_wv: f64,
    sum_v: f64,
    /// Intervals that had the metric (in the others it counts as 0).
    seen: usize,
    reservoir: Vec<f64>,
}

/// One side of a comparison, summarised as its models stream by: per metric the sums of the
/// time-weighted average and a bounded sample for the p95. A process (by comm) or device absent
/// from a model did no I/O in it: its metrics count as 0 there, so averages are over the same
/// intervals on both sides.
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
        let w = m.interval_s;
        let metrics = &mut self.metrics;
        let rng = &mut self.rng;
        for_each_metric(m, |pane, key, v| {
            let st = metrics.entry(pane).or_default().entry(key).or_default();
            st.sum_wv += w * v;
            st.sum_v += v;
            st.seen += 1;
            if st.reservoir.len() < P95_RESERVOIR {
                st.reservoir.push(v);
            } else {
                // xorshift64*: deterministic, so the same files always give the same table.
                *rng = if *rng == 0 { 0x9E37_79B9_7F4A_7C15 } else { *rng };
                *rng ^= *rng >> 12;
                *rng ^= *rng << 25;
                *rng ^= *rng >> 27;
                let j = (rng.wrapping_mul(0x2545_F491_4F6C_DD1D) % st.seen as u64) as usize;
                if j < P95_RESERVOIR {
                    st.reservoir[j] = v;
                }
            }
        });
        self.intervals += 1;
        self.seconds += w;
    }

    /// The time-weighted average (the plain mean when the interval lengths sum to 0).
    fn average(&self, st: &MetricStats) -> f64 {
        if self.seconds > 0.0 {
            st.sum_wv / self.seconds
        } else if self.intervals > 0 {
            st.sum_v / self.intervals as f64
        } else {
            0.0
        }
    }

    /// The nearest-rank p95 over every interval (absent ones as 0): exact while the reservoir
    /// holds every value, else over the sample, each value standing for seen / sample size.
    fn p95(&self, st: &MetricStats) -> f64 {
        let n = self.intervals.max(st.seen);
        if n == 0 {
            return 0.0;
        }
        let zeros = (n - st.seen) as f64;
        let w = if st.reservoir.is_empty() { 0.0 } else { st.seen as f64 / st.reservoir.len() as f64 };
        let mut items: Vec<(f64, f64)> = st.reservoir.iter().map(|&v| (v, w)).collect();
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

/// Compares two sets of models: metrics both sides show as all-zero are left out; within a pane the
/// biggest |% change| comes first (a metric that appeared from 0 before all), ties by |delta|.
pub fn compare_models(a: &[Model], b: &[Model]) -> Vec<PaneComparison> {
    let (mut sa, mut sb) = (Accumulator::default(), Accumulator::default());
    a.iter().for_each(|m| sa.push(m));
    b.iter().for_each(|m| sb.push(m));
    compare_accumulated(&sa, &sb)
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
            let mut metrics: Vec<MetricComparison> = keys
                .into_iter()
                .filter_map(|k| {
                    let (va, vb) = (ma.get(k).unwrap_or(&none), mb.get(k).unwrap_or(&none));
                    let (a_avg, b_avg) = (sa.average(va), sb.average(vb));
                    let (a_p95, b_p95) = (sa.p95(va), sb.p95(vb));
                    if [a_avg, b_avg, a_p95, b_p95].iter().all(|x| *x == 0.0) {
                        return None;
                    }
                    let delta = b_avg - a_avg;
                    let change_pct = (a_avg != 0.0).then(|| delta / a_avg.abs() * 100.0);
                    Some(MetricComparison {
                        metric: k.clone(),
                        a_avg,
                        a_p95,
                        b_avg,
                        b_p95,
                        delta,
                        change_pct,
                    })
                })
                .collect();
            let rank = |m: &MetricComparison| m.change_pct.map_or(f64::INFINITY, f64::abs);
            metrics.sort_by(|x, y| rank(y).total_cmp(&rank(x)).then(y.delta.abs().total_cmp(&x.delta.abs())));
            PaneComparison { pane: pane.to_string(), metrics }
        })
        .collect()
}

/// Sysctls and per-device queue settings whose values differ between the two headers.
pub fn settings_changed(a: &RecordingHeader, b: &RecordingHeader) -> Vec<SettingChange> {
    let mut ma = a.tuning.clone();
    let mut mb = b.tuning.clone();
    for (h, m) in [(a, &mut ma), (b, &mut mb)] {
        for d in h.devices.iter().filter(|d| !d.is_partition) {
            let mut put = |k: &str, v: Option<String>| {
                if let Some(v) = v {
                    m.insert(format!("{} {k}", d.name), v);
                }
            };
            put("read_ahead_kb", d.read_ahead_kb.map(|v| v.to_string()));
            put("scheduler", d.scheduler.clone());
            put("nr_requests", d.nr_requests.map(|v| v.to_string()));
            put("max_sectors_kb", d.max_sectors_kb.map(|v| v.to_string()));
        }
    }
    let mut names: Vec<&String> = ma.keys().chain(mb.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|n| ma.get(*n) != mb.get(*n))
        .map(|n| SettingChange { name: n.clone(), a: ma.get(n).cloned(), b: mb.get(n).cloned() })
        .collect()
}

/// Streams a recording's models (one sample decoded at a time) into a summary.
fn load(spec: &RangeSpec) -> anyhow::Result<(RecordingHeader, Accumulator)> {
    let mut rec = crate::replay::open(&spec.path)?;
    let header = rec.header.clone();
    let mut acc = Accumulator::default();
    for model in crate::replay::models(&mut rec, spec.from, spec.to) {
        acc.push(&model?);
    }
    if acc.intervals == 0 {
        anyhow::bail!("{}: no intervals in that range (at least two samples are needed)", spec.describe());
    }
    Ok((header, acc))
}

pub fn build(opts: &CompareOptions) -> anyhow::Result<Comparison> {
    let (ha, a) = load(&opts.a)?;
    let (hb, b) = load(&opts.b)?;
    let side = |spec: &RangeSpec, h: &RecordingHeader, acc: &Accumulator| Side {
        source: spec.describe(),
        hostname: h.hostname.clone(),
        kernel: h.kernel.clone(),
        intervals: acc.intervals,
        seconds: acc.seconds,
    };
    Ok(Comparison {
        a: side(&opts.a, &ha, &a),
        b: side(&opts.b, &hb, &b),
        settings_changed: settings_changed(&ha, &hb),
        panes: compare_accumulated(&a, &b),
    })
}

pub fn run(opts: &CompareOptions) -> anyhow::Result<()> {
    let c = build(opts)?;
    if !opts.json && !opts.text && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return tui::run(&c, opts.color);
    }
    let mut out = std::io::stdout().lock();
    let r = if opts.json {
        serde_json::to_writer_pretty(&mut out, &c).map_err(std::io::Error::from).and_then(|_| writeln!(out))
    } else {
        out.write_all(text(&c, opts.top).as_bytes())
    };
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

/// A compact number: three significant figures with K/M/G (powers of 1000) for big ones.
pub fn num(x: f64) -> String {
    let a = x.abs();
    let (v, unit) = if a >= 1e9 {
        (x / 1e9, "G")
    } else if a >= 1e6 {
        (x / 1e6, "M")
    } else if a >= 1e3 {
        (x / 1e3, "K")
    } else {
        (x, "")
    };
    let digits = if v.abs() >= 100.0 || v == 0.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$}{unit}")
}

/// The text table: settings that differ, then each pane's `top` biggest changes.
pub fn text(c: &Comparison, top: usize) -> String {
    let mut s = String::new();
    let side = |name: &str, x: &Side| {
        format!(
            "{name}: {}  ({} {}, {} intervals, {:.0} s)\n",
            x.source, x.hostname, x.kernel, x.intervals, x.seconds
        )
    };
    s += &side("A", &c.a);
    s += &side("B", &c.b);
    if !c.settings_changed.is_empty() {
        s += "\nSettings that differ\n";
        for ch in &c.settings_changed {
            let v = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
            s += &format!("  {:<40} {} → {}\n", ch.name, v(&ch.a), v(&ch.b));
        }
    }
    for pane in &c.panes {
        s += &format!(
            "\n{:<40} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}\n",
            title(&pane.pane),
            "A avg",
            "A p95",
            "B avg",
            "B p95",
            "delta",
            "change"
        );
        if pane.metrics.is_empty() {
            s += "  (no activity on either side)\n";
        }
        for m in pane.metrics.iter().take(top) {
            let change = match m.change_pct {
                Some(p) => format!("{p:+.0}%"),
                None => "new".into(),
            };
            s += &format!(
                "  {:<38} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}\n",
                crate::ui::format::shorten(&m.metric, 38),
                num(m.a_avg),
                num(m.a_p95),
                num(m.b_avg),
                num(m.b_p95),
                if m.delta > 0.0 { format!("+{}", num(m.delta)) } else { num(m.delta) },
                change
            );
        }
        if pane.metrics.len() > top {
            s += &format!("  … {} more (--top N, or --json for all)\n", pane.metrics.len() - top);
        }
    }
    s
}

fn title(pane: &str) -> &'static str {
    match pane {
        "memory" => "Memory (bytes; rates per second)",
        "psi" => "Pressure (PSI: % and ms per interval)",
        "devices" => "Devices (iostat -x)",
        "cache" => "Page cache (eBPF: pages per interval; per comm, rates per second)",
        _ => "Processes (summed by comm, per second)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_specs() {
        assert_eq!(
            RangeSpec::parse("a.rec").unwrap(),
            RangeSpec { path: "a.rec".into(), from: None, to: None }
        );
        let r = RangeSpec::parse("x@y.rec@1m..90").unwrap();
        assert_eq!(r.path, PathBuf::from("x@y.rec"));
        assert_eq!((r.from, r.to), (Some(Duration::from_secs(60)), Some(Duration::from_secs(90))));
        assert_eq!(RangeSpec::parse("a@..30").unwrap().from, None);
        assert_eq!(RangeSpec::parse("mail@host.rec").unwrap().path, PathBuf::from("mail@host.rec"));
        assert!(RangeSpec::parse("a@60..30").is_err());
        assert!(RangeSpec::parse("a@x..").is_err());
        assert!(RangeSpec::parse("@1..2").is_err());
    }

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

    fn model(util: f64, comm_write: &[(&str, f64)]) -> Model {
        let mut m = Model::default();
        m.devices.push(crate::model::DeviceModel { name: "vda".into(), util, ..Default::default() });
        for (i, (comm, w)) in comm_write.iter().enumerate() {
            m.processes.push(crate::model::ProcessModel {
                pid: i as u32 + 1,
                comm: comm.to_string(),
                write_bytes_s: *w,
                ..Default::default()
            });
        }
        m
    }

    #[test]
    fn deltas_percentages_ordering_and_absent_processes_count_as_zero() {
        // A: util 10, 20; "db" writes 100 then is gone. B: util 50, 50; "db" writes 100, 300
        // (two processes named db the second time, summed), "fio" appears.
        let a = vec![model(10.0, &[("db", 100.0)]), model(20.0, &[])];
        let b =
            vec![model(50.0, &[("db", 100.0)]), model(50.0, &[("db", 100.0), ("db", 200.0), ("fio", 7.0)])];
        let panes = compare_models(&a, &b);
        let dev = &panes.iter().find(|p| p.pane == "devices").unwrap().metrics;
        let util = dev.iter().find(|m| m.metric == "vda util").unwrap();
        assert_eq!((util.a_avg, util.b_avg, util.delta), (15.0, 50.0, 35.0));
        assert!((util.change_pct.unwrap() - 233.333).abs() < 0.01);
        assert_eq!((util.a_p95, util.b_p95), (20.0, 50.0));
        let procs = &panes.iter().find(|p| p.pane == "processes").unwrap().metrics;
        assert_eq!(procs[0].metric, "fio write_bytes_s", "appeared from zero: first");
        assert_eq!(procs[0].change_pct, None);
        let db = procs.iter().find(|m| m.metric == "db write_bytes_s").unwrap();
        // A: 100, 0 → 50; B: 100, 300 → 200: +300 %.
        assert_eq!((db.a_avg, db.b_avg, db.change_pct), (50.0, 200.0, Some(300.0)));
        assert!(!procs.iter().any(|m| m.metric.ends_with(" pid")), "identities are not metrics");
        assert!(!procs.iter().any(|m| m.metric.ends_with("read_bytes_s")), "all-zero metrics are left out");
        let t = text(&Comparison { panes, ..Default::default() }, 1);
        assert!(t.contains("fio write_bytes_s"), "{t}");
        assert!(t.contains("new"), "{t}");
        assert!(t.contains("… 1 more"), "{t}");
    }

    #[test]
    fn changed_settings_are_listed() {
        let mut a = RecordingHeader::default();
        a.tuning.insert("vm.dirty_ratio".into(), "20".into());
        a.tuning.insert("vm.swappiness".into(), "60".into());
        let mut b = a.clone();
        b.tuning.insert("vm.dirty_ratio".into(), "5".into());
        b.devices.push(crate::sample::BlockSettings {
            name: "vda".into(),
            read_ahead_kb: Some(4096),
            ..Default::default()
        });
        let ch = settings_changed(&a, &b);
        assert_eq!(ch.len(), 2);
        assert_eq!(
            (ch[0].name.as_str(), ch[0].a.as_deref(), ch[0].b.as_deref()),
            ("vda read_ahead_kb", None, Some("4096"))
        );
        assert_eq!(
            (ch[1].name.as_str(), ch[1].a.as_deref(), ch[1].b.as_deref()),
            ("vm.dirty_ratio", Some("20"), Some("5"))
        );
    }

    #[test]
    fn numbers_are_compact() {
        assert_eq!(num(0.0), "0");
        assert_eq!(num(1.234), "1.23");
        assert_eq!(num(12.34), "12.3");
        assert_eq!(num(123.4), "123");
        assert_eq!(num(2_600.0), "2.60K");
        assert_eq!(num(-104_857_600.0), "-105M");
    }
}
