//! The exposition formats: Prometheus text 0.0.4 and OpenMetrics 1.0.0, from one list of metric
//! families. Both are written here rather than with the `prometheus-client` crate: that crate
//! writes OpenMetrics only, keeps its own live counters (ours are the kernel's, read into a
//! Sample) and has no per-sample timestamps, which `replay --openmetrics` needs.
//!
//! The differences between the two formats that matter here:
//!
//! | | text 0.0.4 | OpenMetrics 1.0.0 |
//! |---|---|---|
//! | counter family name | with `_total` (`# TYPE x_total counter`) | without (`# TYPE x counter`) |
//! | unit | not declared | `# UNIT x bytes` |
//! | info metric | a gauge named `x_info` | type `info`, family `x`, sample `x_info` |
//! | timestamp | integer milliseconds | seconds, with fractions |
//! | end | nothing | `# EOF` |

use std::fmt::Write;

/// Which exposition format to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `text/plain; version=0.0.4`: what Prometheus has always scraped.
    Text,
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
}

impl Format {
    /// The format a scraper asked for in its `Accept` header: OpenMetrics when it names
    /// `application/openmetrics-text` (Prometheus does, with a higher q than text/plain, unless
    /// configured otherwise), else text. A q of 0 means "not acceptable" and is honoured.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else { return Format::Text };
        let wants = accept.split(',').any(|part| {
            let mut params = part.split(';').map(str::trim);
            let media = params.next().unwrap_or("");
            let q_zero = params.any(|p| {
                p.strip_prefix("q=").and_then(|q| q.trim().parse::<f64>().ok()).is_some_and(|q| q <= 0.0)
            });
            media.eq_ignore_ascii_case("application/openmetrics-text") && !q_zero
        });
        if wants {
            Format::OpenMetrics
        } else {
            Format::Text
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
    /// A constant 1 whose labels carry text (build version, why eBPF is off).
    Info,
}

/// One sample line: the suffix after the family name (`_total`, `_bucket`, ...), its labels
/// already rendered as `a="x",b="y"`, and the value.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub suffix: &'static str,
    pub labels: String,
    pub value: f64,
}

/// A metric family. `name` is the OpenMetrics family name: without `_total` for counters and
/// without `_info` for info metrics (the writer adds them).
#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    /// "bytes", "seconds", or "" (OpenMetrics requires the name to end with `_<unit>`).
    pub unit: &'static str,
    pub help: &'static str,
    pub points: Vec<Point>,
}

/// Label pairs; values are escaped when rendered.
pub type Labels<'a> = [(&'a str, &'a str)];

impl Family {
    pub fn new(kind: Kind, name: &'static str, unit: &'static str, help: &'static str) -> Family {
        debug_assert!(unit.is_empty() || name.ends_with(&format!("_{unit}")), "{name} must end in _{unit}");
        debug_assert!(!name.ends_with("_total"), "{name}: counters are named without _total");
        Family { name, kind, unit, help, points: Vec::new() }
    }

    /// A counter's, gauge's or info metric's value for one label set.
    pub fn add(&mut self, labels: &Labels, value: f64) {
        let suffix = match self.kind {
            Kind::Counter => "_total",
            Kind::Info => "_info",
            Kind::Gauge => "",
            Kind::Histogram => panic!("{}: a histogram takes add_histogram", self.name),
        };
        self.points.push(Point { suffix, labels: render_labels(labels), value });
    }

    /// One histogram: `buckets` are (upper bound, observations at or below it), cumulative and
    /// ascending, without +Inf (added from `count`).
    pub fn add_histogram(&mut self, labels: &Labels, buckets: &[(f64, u64)], sum: f64, count: u64) {
        debug_assert_eq!(self.kind, Kind::Histogram);
        let base = render_labels(labels);
        let with_le = |le: &str| {
            if base.is_empty() {
                format!("le=\"{le}\"")
            } else {
                format!("{base},le=\"{le}\"")
            }
        };
        for &(le, n) in buckets {
            self.points.push(Point {
                suffix: "_bucket",
                labels: with_le(&format_value(le)),
                value: n as f64,
            });
        }
        self.points.push(Point { suffix: "_bucket", labels: with_le("+Inf"), value: count as f64 });
        self.points.push(Point { suffix: "_sum", labels: base.clone(), value: sum });
        self.points.push(Point { suffix: "_count", labels: base, value: count as f64 });
    }
}

/// `a="x",b="y"` with the values escaped as both formats require (backslash, quote, newline).
pub fn render_labels(labels: &Labels) -> String {
    let mut s = String::new();
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(k);
        s.push_str("=\"");
        for c in v.chars() {
            match c {
                '\\' => s.push_str("\\\\"),
                '"' => s.push_str("\\\""),
                '\n' => s.push_str("\\n"),
                c => s.push(c),
            }
        }
        s.push('"');
    }
    s
}

/// A value as both formats spell it: integers without a fraction, `+Inf`, `-Inf`, `NaN`.
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The family's metadata lines (`# HELP`, `# TYPE`, and `# UNIT` in OpenMetrics).
pub fn write_header(out: &mut String, f: &Family, format: Format) {
    let (name, kind) = match (format, f.kind) {
        (Format::Text, Kind::Counter) => (format!("{}_total", f.name), "counter"),
        (Format::Text, Kind::Info) => (format!("{}_info", f.name), "gauge"),
        (_, Kind::Counter) => (f.name.to_string(), "counter"),
        (_, Kind::Info) => (f.name.to_string(), "info"),
        (_, Kind::Gauge) => (f.name.to_string(), "gauge"),
        (_, Kind::Histogram) => (f.name.to_string(), "histogram"),
    };
    let help = f.help.replace('\\', "\\\\").replace('\n', "\\n");
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    if format == Format::OpenMetrics && !f.unit.is_empty() {
        let _ = writeln!(out, "# UNIT {name} {}", f.unit);
    }
}

/// One sample line, with a timestamp (Unix milliseconds) when given.
pub fn write_point(out: &mut String, f: &Family, p: &Point, format: Format, timestamp_ms: Option<u64>) {
    out.push_str(f.name);
    out.push_str(p.suffix);
    if !p.labels.is_empty() {
        out.push('{');
        out.push_str(&p.labels);
        out.push('}');
    }
    out.push(' ');
    out.push_str(&format_value(p.value));
    match (timestamp_ms, format) {
        (None, _) => {}
        (Some(ms), Format::Text) => {
            let _ = write!(out, " {ms}");
        }
        (Some(ms), Format::OpenMetrics) => {
            let _ = write!(out, " {}.{:03}", ms / 1000, ms % 1000);
        }
    }
    out.push('\n');
}

/// A whole exposition: every family with at least one point, then `# EOF` in OpenMetrics.
pub fn encode(families: &[Family], format: Format) -> String {
    let mut out = String::with_capacity(families.iter().map(|f| 64 + f.points.len() * 80).sum());
    for f in families.iter().filter(|f| !f.points.is_empty()) {
        write_header(&mut out, f, format);
        for p in &f.points {
            write_point(&mut out, f, p, format, None);
        }
    }
    if format == Format::OpenMetrics {
        out.push_str("# EOF\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn families() -> Vec<Family> {
        let mut c = Family::new(Kind::Counter, "x_read_bytes", "bytes", "Bytes read.");
        c.add(&[("device", "sda")], 4096.0);
        let mut g = Family::new(Kind::Gauge, "x_dirty_bytes", "bytes", "Dirty.");
        g.add(&[], 0.5);
        let mut h = Family::new(Kind::Histogram, "x_duration_seconds", "seconds", "Time.");
        h.add_histogram(&[("op", "read")], &[(0.001, 2), (0.002, 3)], 0.0035, 4);
        let mut i = Family::new(Kind::Info, "x_build", "", "Build.");
        i.add(&[("version", "1\"2\\3\n")], 1.0);
        let empty = Family::new(Kind::Gauge, "x_unused", "", "Never set.");
        vec![c, g, h, i, empty]
    }

    #[test]
    fn text_format_names_counters_with_total_and_info_as_gauge() {
        let text = encode(&families(), Format::Text);
        assert_eq!(
            text,
            "# HELP x_read_bytes_total Bytes read.\n# TYPE x_read_bytes_total counter\n\
             x_read_bytes_total{device=\"sda\"} 4096\n\
             # HELP x_dirty_bytes Dirty.\n# TYPE x_dirty_bytes gauge\nx_dirty_bytes 0.5\n\
             # HELP x_duration_seconds Time.\n# TYPE x_duration_seconds histogram\n\
             x_duration_seconds_bucket{op=\"read\",le=\"0.001\"} 2\n\
             x_duration_seconds_bucket{op=\"read\",le=\"0.002\"} 3\n\
             x_duration_seconds_bucket{op=\"read\",le=\"+Inf\"} 4\n\
             x_duration_seconds_sum{op=\"read\"} 0.0035\nx_duration_seconds_count{op=\"read\"} 4\n\
             # HELP x_build_info Build.\n# TYPE x_build_info gauge\n\
             x_build_info{version=\"1\\\"2\\\\3\\n\"} 1\n"
        );
    }

    #[test]
    fn openmetrics_declares_units_and_ends_with_eof() {
        let om = encode(&families(), Format::OpenMetrics);
        assert!(om.starts_with(
            "# HELP x_read_bytes Bytes read.\n# TYPE x_read_bytes counter\n# UNIT x_read_bytes bytes\n"
        ));
        assert!(om.contains("\nx_read_bytes_total{device=\"sda\"} 4096\n"));
        assert!(om.contains("# TYPE x_build info\n"));
        assert!(om.contains("\nx_build_info{version="));
        assert!(om.ends_with("\n# EOF\n"));
        assert!(!om.contains("x_unused"));
    }

    #[test]
    fn timestamps_are_milliseconds_in_text_and_seconds_in_openmetrics() {
        let f = &families()[1];
        let mut out = String::new();
        write_point(&mut out, f, &f.points[0], Format::Text, Some(1_700_000_000_042));
        write_point(&mut out, f, &f.points[0], Format::OpenMetrics, Some(1_700_000_000_042));
        assert_eq!(out, "x_dirty_bytes 0.5 1700000000042\nx_dirty_bytes 0.5 1700000000.042\n");
    }

    #[test]
    fn values_are_spelled_as_prometheus_parses_them() {
        assert_eq!(format_value(3.0), "3");
        assert_eq!(format_value(1e-6), "0.000001");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(1.8446744073709552e19), "18446744073709552000");
    }

    #[test]
    fn accept_header_picks_openmetrics_only_when_asked() {
        let prometheus_default = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                                  version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus_default)), Format::OpenMetrics);
        assert_eq!(Format::negotiate(Some("text/plain;version=0.0.4")), Format::Text);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Text);
        assert_eq!(Format::negotiate(None), Format::Text);
        assert_eq!(Format::negotiate(Some("application/openmetrics-text; q=0")), Format::Text);
    }
}
