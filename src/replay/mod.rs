//! `ioscope replay`: a recording's Samples fed through the same Model and View as live data. The
//! TUI is [`tui`]; `--batch`, `--json` and `--csv` are here and reuse [`crate::output`].

use std::io::{self, Write};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde_json::Value;

use crate::model::flatten;
use crate::model::{Model, Stream};
use crate::output::headless::{Format, Reports};
use crate::record::marks::TimePoint;
use crate::record::Recording;
use crate::sample::Sample;

pub mod openmetrics;
pub mod player;
pub mod timeline;
pub mod tui;

/// `ioscope replay`'s flags.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The recording to replay.
    pub file: std::path::PathBuf,
    /// Print a text report per sample instead of the TUI.
    #[arg(short, long, conflicts_with = "csv")]
    pub batch: bool,
    /// Print one JSON model per sample (NDJSON) instead of the TUI.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the recording as OpenMetrics with timestamps, for
    /// `promtool tsdb create-blocks-from openmetrics` (backfilling Prometheus).
    #[arg(long, conflicts_with_all = ["csv", "batch", "json"])]
    pub openmetrics: bool,
    /// Print one pane's series as CSV: memory, devices or processes.
    #[arg(long, value_name = "PANE", value_parser = ["memory", "devices", "processes"])]
    pub csv: Option<String>,
    /// Start at this offset from the recording's start (seconds, 90s, 5m, h:mm:ss), or at a
    /// mark (mark:1 is the first).
    #[arg(long, value_name = "TIME", value_parser = TimePoint::parse)]
    pub from: Option<TimePoint>,
    /// End at this offset from the recording's start, or at a mark (mark:N).
    #[arg(long, value_name = "TIME", value_parser = TimePoint::parse)]
    pub to: Option<TimePoint>,
    /// Do not use colours (also when NO_COLOR is set and not empty).
    #[arg(long)]
    pub no_color: bool,
}

impl ReplayArgs {
    /// Checks the combinations clap cannot express and picks the output. `no_color_env` is the
    /// NO_COLOR environment variable's value.
    pub fn options(&self, no_color_env: Option<&std::ffi::OsStr>) -> Result<ReplayOptions, clap::Error> {
        use clap::error::ErrorKind;
        let usage = |kind: ErrorKind, msg: &str| clap::Error::raw(kind, msg);
        let a = self;
        if let (Some(TimePoint::Offset(from)), Some(TimePoint::Offset(to))) = (a.from, a.to) {
            if to <= from {
                return Err(usage(ErrorKind::ValueValidation, "--to must be later than --from"));
            }
        }
        if a.to.is_some() && a.csv.is_none() && !a.batch && !a.json && !a.openmetrics {
            return Err(usage(
                ErrorKind::ArgumentConflict,
                "--to needs --batch, --json or --csv (in the TUI, press t to go to a time)",
            ));
        }
        let output = match (&a.csv, a.batch, a.json || a.openmetrics) {
            (None, false, true) if a.openmetrics => ReplayOutput::OpenMetrics,
            (Some(pane), _, _) => {
                ReplayOutput::Csv(pane.parse().map_err(|e: String| usage(ErrorKind::InvalidValue, &e))?)
            }
            (None, _, true) => ReplayOutput::Json,
            (None, true, false) => ReplayOutput::Text,
            (None, false, false) => {
                ReplayOutput::Tui { color: crate::util::wants_color(a.no_color, no_color_env) }
            }
        };
        Ok(ReplayOptions { file: a.file.clone(), output, from: a.from, to: a.to })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ReplayOptions {
    pub file: PathBuf,
    pub output: ReplayOutput,
    /// Offsets from the recording's first sample, or its marks.
    pub from: Option<TimePoint>,
    pub to: Option<TimePoint>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayOutput {
    Tui {
        color: bool,
    },
    Text,
    Json,
    Csv(CsvPane),
    /// OpenMetrics with timestamps, for `promtool tsdb create-blocks-from openmetrics`.
    OpenMetrics,
}

/// The pane whose series `--csv` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CsvPane {
    /// One row per sample: the memory gauges, thresholds, vmstat rates and PSI.
    Memory,
    /// One row per sample and device (idle virtual devices left out).
    Devices,
    /// One row per sample and process that did any I/O.
    Processes,
}

impl FromStr for CsvPane {
    type Err = String;
    fn from_str(s: &str) -> Result<CsvPane, String> {
        match s {
            "memory" => Ok(CsvPane::Memory),
            "devices" => Ok(CsvPane::Devices),
            "processes" => Ok(CsvPane::Processes),
            other => Err(format!("unknown pane '{other}' for --csv (memory, devices or processes)")),
        }
    }
}

/// Opens a recording, printing on stderr why it ends early when its tail is damaged.
pub fn open(path: &std::path::Path) -> anyhow::Result<Recording> {
    let rec = Recording::open(path)?;
    if let Some(problem) = &rec.problem {
        let problem = crate::untrusted::escape_lines(problem);
        eprintln!("ioscope: warning: {}: {problem}", crate::untrusted::path(path));
    }
    if rec.is_empty() {
        anyhow::bail!("{}: the recording holds no samples", path.display());
    }
    Ok(rec)
}

pub fn run(opts: &ReplayOptions) -> anyhow::Result<()> {
    let rec = open(&opts.file)?;
    // A mark the recording lacks is bad input: one line, exit 2.
    let (from, to) = crate::record::marks::resolve_range(&rec, opts.from, opts.to)
        .map_err(|e| anyhow::Error::new(crate::safe_fs::Refused(e)))?;
    match opts.output {
        ReplayOutput::Tui { color } => tui::run(rec, color, from),
        output => {
            let out = io::stdout().lock();
            let printed = match output {
                ReplayOutput::OpenMetrics => openmetrics::write(rec, from, to, out),
                _ => print(rec, output, from, to, out),
            };
            match printed {
                Err(e)
                    if e.downcast_ref::<io::Error>()
                        .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe) =>
                {
                    Ok(())
                }
                r => r,
            }
        }
    }
}

/// The models between consecutive samples, for the intervals that lie within [from, to] (offsets
/// from the first sample's monotonic clock).
pub fn models<'a>(
    rec: &'a mut Recording,
    from: Option<Duration>,
    to: Option<Duration>,
) -> impl Iterator<Item = anyhow::Result<Model>> + 'a {
    intervals(rec, from, to).map(|r| r.map(|(_, model)| model))
}

/// [`models`], each with the interval's later sample.
pub fn intervals<'a>(
    rec: &'a mut Recording,
    from: Option<Duration>,
    to: Option<Duration>,
) -> impl Iterator<Item = anyhow::Result<(Sample, Model)>> + 'a {
    let mut start_ns: Option<u64> = None;
    // The stream's previous sample and its offset.
    let mut stream = Stream::new();
    let mut prev_offset: Option<Duration> = None;
    let from = from.unwrap_or_default();
    rec.samples().filter_map(move |s| {
        let s = match s {
            Ok(s) => std::sync::Arc::new(s),
            Err(e) => return Some(Err(e)),
        };
        let t0 = *start_ns.get_or_insert(s.mono_ns);
        let offset = Duration::from_nanos(s.mono_ns.saturating_sub(t0));
        let wanted = prev_offset.is_some_and(|p| p >= from) && to.is_none_or(|to| offset <= to);
        prev_offset = Some(offset);
        if wanted {
            let model = stream.advance(s.clone());
            Some(Ok((Sample::clone(&s), model)))
        } else {
            // Outside the range: no Model, the stream only moves on.
            stream.restart(Some(s));
            None
        }
    })
}

/// `--batch`, `--json` or `--csv` on `out`.
pub fn print<W: Write>(
    mut rec: Recording,
    output: ReplayOutput,
    from: Option<Duration>,
    to: Option<Duration>,
    mut out: W,
) -> anyhow::Result<()> {
    let mut written = 0usize;
    let mut csv_columns: Option<Vec<String>> = None;
    let t0 = rec.sample(0)?.wall_unix_ms;
    let mut text = Reports::new(Format::Text);
    let mut json = Reports::new(Format::JsonLines);
    for model in models(&mut rec, from, to) {
        let model = model?;
        match output {
            ReplayOutput::Text => text.write(&mut out, &model)?,
            ReplayOutput::Json => json.write(&mut out, &model)?,
            ReplayOutput::Csv(pane) => write_csv(&mut out, &model, pane, t0, &mut csv_columns)?,
            ReplayOutput::Tui { .. } | ReplayOutput::OpenMetrics => unreachable!("printed elsewhere"),
        }
        written += 1;
    }
    out.flush()?;
    if written == 0 {
        if from.is_none() && to.is_none() {
            anyhow::bail!("the recording holds one sample: a report needs two (the rates are between two)");
        }
        anyhow::bail!("no samples in the chosen time range (a report needs two samples)");
    }
    Ok(())
}

/// The rows of one pane for one model: `(flattened key, value)` lists.
pub fn csv_rows(model: &Model, pane: CsvPane) -> Vec<Vec<(String, Value)>> {
    fn value<T: serde::Serialize>(v: &T) -> Value {
        serde_json::to_value(v).unwrap_or(Value::Null)
    }
    let mut rows = Vec::new();
    match pane {
        CsvPane::Memory => {
            let mut row = Vec::new();
            flatten::flatten(&value(&model.memory), "", &mut row);
            flatten::flatten(&value(&model.psi), "psi", &mut row);
            rows.push(row);
        }
        CsvPane::Devices => {
            for d in model.devices.iter().filter(|d| !(d.idle && d.is_virtual)) {
                let mut row = Vec::new();
                flatten::flatten(&value(d), "", &mut row);
                rows.push(row);
            }
        }
        CsvPane::Processes => {
            for p in &model.processes {
                let busy =
                    p.read_bytes_s + p.write_bytes_s + p.rchar_s + p.wchar_s + p.cancelled_write_bytes_s;
                if busy > 0.0 {
                    let mut row = Vec::new();
                    flatten::flatten(&value(p), "", &mut row);
                    rows.push(row);
                }
            }
        }
    }
    rows
}

/// Writes the rows of one model. The header comes from the first row seen: `time_s` (seconds
/// since the recording's first sample, from the wall clock), `wall_unix_ms`, then the pane's keys.
fn write_csv<W: Write>(
    out: &mut W,
    model: &Model,
    pane: CsvPane,
    t0_unix_ms: u64,
    columns: &mut Option<Vec<String>>,
) -> io::Result<()> {
    let time_s = model.header.wall_unix_ms.saturating_sub(t0_unix_ms) as f64 / 1000.0;
    for row in csv_rows(model, pane) {
        if columns.is_none() {
            let cols: Vec<String> = row.iter().map(|(k, _)| k.clone()).collect();
            let names: Vec<String> = cols.iter().map(|k| crate::untrusted::csv_text(k)).collect();
            writeln!(out, "time_s,wall_unix_ms,{}", names.join(","))?;
            *columns = Some(cols);
        }
        let cols = columns.as_ref().expect("set above");
        let mut line = format!("{time_s:.3},{}", model.header.wall_unix_ms);
        for c in cols {
            line.push(',');
            if let Some((_, v)) = row.iter().find(|(k, _)| k == c) {
                line.push_str(&csv_cell(v));
            }
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// A CSV cell (RFC 4180): numbers as they are (a negative one too), null empty, text escaped and
/// kept from being read as a formula by [`crate::untrusted::csv_text`].
fn csv_cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => {
                format!("{f:.3}").trim_end_matches('0').trim_end_matches('.').to_string()
            }
            _ => n.to_string(),
        },
        Value::Bool(b) => b.to_string(),
        Value::String(s) => crate::untrusted::csv_text(s),
        other => crate::untrusted::csv_text(&other.to_string()),
    }
}
