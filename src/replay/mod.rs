//! `ioscope replay`: a recording's Samples fed through the same Model and View as live data. The
//! TUI is [`tui`]; `--batch`, `--json` and `--csv` are here and reuse [`crate::output`].

use std::io::{self, Write};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde_json::Value;

use crate::model::flatten;
use crate::model::Model;
use crate::output::headless::{Format, Reports};
use crate::record::marks::TimePoint;
use crate::record::Recording;

pub mod export;
mod intervals;
pub mod openmetrics;
pub mod player;
pub mod timeline;
pub mod tui;

pub use intervals::{intervals, models};

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
    /// Write the replay TUI, frame by frame, to an asciicast v2 file (asciinema's format).
    #[arg(long, value_name = "OUT.cast", conflicts_with_all = ["csv", "batch", "json", "openmetrics"])]
    pub asciicast: Option<PathBuf>,
    /// Write one moment of the replay TUI (--at) to an SVG picture.
    #[arg(long, value_name = "OUT.svg", conflicts_with_all = ["csv", "batch", "json", "openmetrics"])]
    pub svg: Option<PathBuf>,
    /// Write one self-contained web page that plays the replay (asciinema's player inside).
    #[arg(long, value_name = "OUT.html", conflicts_with_all = ["csv", "batch", "json", "openmetrics"])]
    pub html: Option<PathBuf>,
    /// The terminal size the exports draw at [default: 120x40].
    #[arg(long, value_name = "COLSxROWS", value_parser = export::parse_size)]
    pub size: Option<(u16, u16)>,
    /// The exports' playing speed: 0.5, 1, 2, 4, 8 or 16 [default: 1].
    #[arg(long, value_name = "X", value_parser = export::parse_speed)]
    pub speed: Option<f64>,
    /// The moment --svg shows (offset from the recording's start) [default: the first frame].
    #[arg(long, value_name = "TIME", value_parser = crate::util::parse_duration, requires = "svg")]
    pub at: Option<Duration>,
    /// Keys the exports press before the first frame, as in the TUI: `4`, `w`, `/dd<Enter>`
    /// (`<Enter>`, `<Esc>`, `<Tab>`, `<Down>`, `<End>`, … for keys that are not characters).
    #[arg(long, value_name = "KEYS", value_parser = keys_arg)]
    pub keys: Option<String>,
    /// Replace an export's file if it is an existing regular file.
    #[arg(long)]
    pub force: bool,
}

/// `--keys`, checked for its syntax when parsed.
fn keys_arg(s: &str) -> Result<String, String> {
    export::keys::parse(s).map(|_| s.to_string())
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
        let exporting = a.asciicast.is_some() || a.svg.is_some() || a.html.is_some();
        if a.to.is_some() && a.csv.is_none() && !a.batch && !a.json && !a.openmetrics && !exporting {
            return Err(usage(
                ErrorKind::ArgumentConflict,
                "--to needs --batch, --json, --csv or an export (in the TUI, press t to go to a time)",
            ));
        }
        if !exporting && (a.size.is_some() || a.speed.is_some() || a.keys.is_some() || a.force) {
            return Err(usage(
                ErrorKind::ArgumentConflict,
                "--size, --speed, --keys and --force need --asciicast, --svg or --html",
            ));
        }
        let export = exporting.then(|| export::ExportOptions {
            asciicast: a.asciicast.clone(),
            svg: a.svg.clone(),
            html: a.html.clone(),
            size: a.size.unwrap_or(export::DEFAULT_SIZE),
            speed: a.speed.unwrap_or(1.0),
            at: a.at,
            keys: a.keys.clone().unwrap_or_default(),
            force: a.force,
            color: crate::util::wants_color(a.no_color, no_color_env),
        });
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
        Ok(ReplayOptions { file: a.file.clone(), output, from: a.from, to: a.to, export })
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ReplayOptions {
    pub file: PathBuf,
    pub output: ReplayOutput,
    /// Offsets from the recording's first sample, or its marks.
    pub from: Option<TimePoint>,
    pub to: Option<TimePoint>,
    /// `--asciicast`, `--svg`, `--html`: the TUI drawn to files instead of the terminal.
    pub export: Option<export::ExportOptions>,
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
    let rec = match opts.export {
        // A file that is not a recording is bad input for an export: one line, exit code 2.
        Some(_) => open(&opts.file).map_err(|e| {
            if crate::safe_fs::is_refused(&e) {
                e
            } else {
                anyhow::Error::new(crate::safe_fs::Refused(format!("{e:#}")))
            }
        })?,
        None => open(&opts.file)?,
    };
    // A mark the recording lacks is bad input: one line, exit 2.
    let (from, to) = crate::record::marks::resolve_range(&rec, opts.from, opts.to)
        .map_err(|e| anyhow::Error::new(crate::safe_fs::Refused(e)))?;
    if let Some(export) = &opts.export {
        return export::run(rec, &opts.file, from, to, export);
    }
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
