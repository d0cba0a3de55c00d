//! `ioscope compare A B`: two recordings (or two time ranges of one) side by side. Per metric: the
//! time-weighted average and the 95th percentile of its per-interval values in A and in B, the delta
//! of the averages and its % change; grouped by pane, the biggest changes in the pane's own terms
//! first (src/model/compare.rs). Settings that differ between the two headers (sysctls, queue
//! settings) come first: they are usually the point.

use std::path::PathBuf;

use serde::Serialize;

use crate::model::compare::{compare_accumulated, Accumulator, MetricComparison, PaneComparison};
use crate::record::marks::TimePoint;
use crate::record::RecordingHeader;

mod run;
pub mod tui;

pub use run::run;

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
    /// An offset from the recording's start, or one of its marks (`mark:N`).
    pub from: Option<TimePoint>,
    pub to: Option<TimePoint>,
}

impl RangeSpec {
    pub fn parse(s: &str) -> Result<RangeSpec, String> {
        let whole = || RangeSpec { path: PathBuf::from(s), from: None, to: None };
        let Some((path, range)) = s.rsplit_once('@') else { return Ok(whole()) };
        let Some((from, to)) = range.split_once("..") else {
            // An '@' that is not a range belongs to the file name.
            return Ok(whole());
        };
        let end = |t: &str| -> Result<Option<TimePoint>, String> {
            if t.is_empty() {
                Ok(None)
            } else {
                TimePoint::parse(t).map(Some).map_err(|e| format!("in '{s}': {e}"))
            }
        };
        let (from, to) = (end(from)?, end(to)?);
        if let (Some(TimePoint::Offset(f)), Some(TimePoint::Offset(t))) = (from, to) {
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
        let t = |d: Option<TimePoint>| d.map(|d| d.to_string()).unwrap_or_default();
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
    // A mark the recording lacks is bad input: one line, exit 2.
    let (from, to) = crate::record::marks::resolve_range(&rec, spec.from, spec.to)
        .map_err(|e| anyhow::Error::new(crate::safe_fs::Refused(format!("{}: {e}", spec.describe()))))?;
    for model in crate::replay::models(&mut rec, from, to) {
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

/// The text table: settings that differ, then each pane's `top` biggest changes. The names come
/// from the recordings: each is escaped, and the whole text goes through
/// [`crate::untrusted::escape_lines`] as the `--batch` frame does.
pub fn text(c: &Comparison, top: usize) -> String {
    let s = table(c, top);
    crate::untrusted::escape_lines(&s).into_owned()
}

fn table(c: &Comparison, top: usize) -> String {
    use crate::untrusted::{escape, shown};
    let mut s = String::new();
    let side = |name: &str, x: &Side| {
        format!(
            "{name}: {}  ({} {}, {} intervals, {:.0} s)\n",
            shown(&x.source),
            shown(&x.hostname),
            shown(&x.kernel),
            x.intervals,
            x.seconds
        )
    };
    s += &side("A", &c.a);
    s += &side("B", &c.b);
    s += UNITS_NOTE;
    s += "\n";
    if !c.settings_changed.is_empty() {
        s += "\nSettings that differ\n";
        for ch in &c.settings_changed {
            let v = |o: &Option<String>| o.as_deref().map_or("-".to_string(), |x| escape(x).into_owned());
            s += &format!("  {:<40} {} → {}\n", shown(&ch.name), v(&ch.a), v(&ch.b));
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
            let v = |x: f64| crate::ui::format::quantity(x * m.scale, m.unit);
            s += &format!(
                "  {:<38} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}\n",
                crate::ui::format::shorten_middle(&escape(&m.label), 38),
                v(m.a_avg),
                v(m.a_p95),
                v(m.b_avg),
                v(m.b_p95),
                if m.delta > 0.0 { format!("+{}", v(m.delta)) } else { v(m.delta) },
                change_text(m)
            );
        }
        if pane.metrics.len() > top {
            s += &format!("  … {} more (--top N, or --json for all)\n", pane.metrics.len() - top);
        }
    }
    s += "\nBiggest changes first: how far each moved, times how steadily its intervals moved (one\n\
          interval's spike is not a change), weighed against the largest of its unit in its pane\n\
          (per device); ~ marks a change within the intervals' noise (ranked last).\n";
    s
}

/// The units of the values, said once under the sides.
pub const UNITS_NOTE: &str =
    "Units: sizes and byte rates in K/M/G = KiB/MiB/GiB; counts in k/M/G = 10³/10⁶/10⁹";

/// The change column: "+12%", "-100%", "new" (A was 0), with "~" after a change within its noise.
pub fn change_text(m: &MetricComparison) -> String {
    let c = match m.change_pct {
        Some(p) => format!("{p:+.0}%"),
        None => "new".into(),
    };
    if m.within_noise {
        format!("{c}~")
    } else {
        c
    }
}

fn title(pane: &str) -> &'static str {
    match pane {
        "memory" => "Memory (sizes; rates per second)",
        "psi" => "Pressure (PSI: % and ms per interval)",
        "devices" => "Devices (iostat -x)",
        "cache" => "Page cache (eBPF: pages per interval; per comm, rates per second)",
        "syncs" => "Sync calls (eBPF: per comm; per comm, call and file)",
        _ => "Processes (summed by name, per second)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::compare::compare_models;
    use crate::model::Model;
    use std::time::Duration;

    #[test]
    fn range_specs() {
        assert_eq!(
            RangeSpec::parse("a.rec").unwrap(),
            RangeSpec { path: "a.rec".into(), from: None, to: None }
        );
        let r = RangeSpec::parse("x@y.rec@1m..90").unwrap();
        assert_eq!(r.path, PathBuf::from("x@y.rec"));
        let off = |s| Some(TimePoint::Offset(Duration::from_secs(s)));
        assert_eq!((r.from, r.to), (off(60), off(90)));
        let r = RangeSpec::parse("run.rec@mark:1..mark:2").unwrap();
        assert_eq!((r.from, r.to), (Some(TimePoint::Mark(1)), Some(TimePoint::Mark(2))));
        assert_eq!(r.describe(), "run.rec@mark:1..mark:2");
        assert!(RangeSpec::parse("a@mark:0..").is_err());
        assert_eq!(RangeSpec::parse("a@..30").unwrap().from, None);
        assert_eq!(RangeSpec::parse("mail@host.rec").unwrap().path, PathBuf::from("mail@host.rec"));
        assert!(RangeSpec::parse("a@60..30").is_err());
        assert!(RangeSpec::parse("a@x..").is_err());
        assert!(RangeSpec::parse("@1..2").is_err());
    }

    fn model(util: f64, comm_write: &[(&str, f64)]) -> Model {
        let mut m = Model::default();
        m.devices.push(crate::model::DeviceModel { name: "vda".into(), util, ..Default::default() });
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
        // 7 B/s appearing beside 200 B/s is no big change: db's ×4 comes first.
        assert_eq!(procs[0].metric, "db write_bytes_s");
        let fio = procs.iter().find(|m| m.metric == "fio write_bytes_s").unwrap();
        assert_eq!(fio.change_pct, None);
        let db = procs.iter().find(|m| m.metric == "db write_bytes_s").unwrap();
        // A: 100, 0 → 50; B: 100, 300 → 200: +300 %.
        assert_eq!((db.a_avg, db.b_avg, db.change_pct), (50.0, 200.0, Some(300.0)));
        assert!(!procs.iter().any(|m| m.metric.ends_with(" pid")), "identities are not metrics");
        assert!(!procs.iter().any(|m| m.metric.ends_with("read_bytes_s")), "all-zero metrics are left out");
        let t = text(&Comparison { panes, ..Default::default() }, 2);
        // Labels, not JSON keys; bytes in the TUI's units.
        assert!(t.contains("fio write/s") && t.contains("db write/s"), "{t}");
        assert!(!t.contains("write_bytes_s"), "{t}");
        assert!(t.contains("200/s"), "{t}");
        assert!(t.contains("new"), "{t}");
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
}
