//! Comparison maths: two sets of models, per metric the time-weighted average and the 95th
//! percentile of its per-interval values on each side, the delta of the averages and its % change,
//! grouped by pane. `ioscope compare` (two recordings) and the TUI's baseline (a pinned moment
//! against now) both use it; metrics are the Model's own JSON keys ([`super::flatten`]).

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
        "major" | "minor" | "pid" | "ppid" | "total" | "dirty_expire_centisecs" | "dirty_writeback_centisecs"
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
}
