//! The command line: clap parses, [`Cli::mode`] checks the combinations clap cannot express and
//! decides which of the three modes runs. Usage errors become one line on stderr and exit code 2.

use std::ffi::OsStr;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, Subcommand};

use crate::output::headless::{Format, HeadlessOptions};
use crate::util::{parse_count, parse_duration, parse_interval, parse_top, wants_color};

#[derive(Debug, Parser)]
#[command(
    name = "ioscope",
    version,
    about = "Shows why the disk is busy: dirty memory vs. thresholds, iostat -x device stats, per-process I/O",
    args_conflicts_with_subcommands = true,
    after_help = "Without --once or --batch, ioscope runs the interactive terminal UI. \
                  eBPF panes need root (or CAP_BPF+CAP_PERFMON); when run from a terminal without \
                  them, ioscope re-runs itself through sudo unless --no-bpf is given."
)]
pub struct Cli {
    /// Seconds between samples (fractions allowed, 0.1 to 3600).
    #[arg(short, long, value_name = "SECONDS", default_value = "1", value_parser = parse_interval)]
    pub interval: Duration,

    /// Do not use colours (also when the NO_COLOR environment variable is set and not empty).
    #[arg(long)]
    pub no_color: bool,

    /// Do not load eBPF programs: procfs/sysfs panes only, and never ask for sudo.
    #[arg(long)]
    pub no_bpf: bool,

    /// Take two samples one interval apart, print one report and exit.
    #[arg(long, conflicts_with = "batch")]
    pub once: bool,

    /// Print a plain-text report every interval, like `top -b`, instead of the interactive UI.
    #[arg(short, long)]
    pub batch: bool,

    /// With --batch: stop after COUNT reports (default: run until killed).
    #[arg(short = 'n', long = "count", value_name = "COUNT", value_parser = parse_count)]
    pub count: Option<u64>,

    /// With --once: one JSON document; with --batch: one JSON document per line (NDJSON).
    #[arg(long)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands; without one, ioscope is the live monitor (TUI, --once or --batch).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Benchmark direct vs buffered I/O on a file, directory or device, with what the system did.
    Bench(crate::bench::cli::BenchArgs),
    /// Export the figures to Prometheus: an HTTP server answering GET /metrics.
    Serve(ServeArgs),
    /// Record samples to a file, without a terminal (replay it with `ioscope replay FILE`).
    Record(RecordArgs),
    /// Replay a recording in the TUI, or print it with --batch, --json or --csv.
    Replay(ReplayArgs),
    /// Compare two recordings, or two time ranges of one: average and p95 per metric.
    Compare(CompareArgs),
}

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The recording to write (refused if it exists, unless --force).
    #[arg(short, long, value_name = "FILE")]
    pub output: std::path::PathBuf,
    /// Seconds between samples (fractions allowed, 0.1 to 3600).
    #[arg(short, long, value_name = "SECONDS", default_value = "1", value_parser = parse_interval)]
    pub interval: Duration,
    /// Stop after this long: seconds, or with a unit (90s, 5m, 2h), or h:mm:ss.
    #[arg(short, long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Do not load eBPF programs.
    #[arg(long)]
    pub no_bpf: bool,
    /// Overwrite FILE if it exists.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
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
    /// Start at this offset from the recording's start (seconds, 90s, 5m, h:mm:ss).
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub from: Option<Duration>,
    /// End at this offset from the recording's start.
    #[arg(long, value_name = "TIME", value_parser = parse_duration)]
    pub to: Option<Duration>,
    /// Do not use colours (also when NO_COLOR is set and not empty).
    #[arg(long)]
    pub no_color: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address and port to listen on (any address other than loopback only when given here).
    #[arg(long, value_name = "ADDR:PORT", default_value = crate::serve::DEFAULT_LISTEN)]
    pub listen: std::net::SocketAddr,
    /// Seconds between samples (fractions allowed, 0.1 to 3600); scrapes read the latest.
    #[arg(short, long, value_name = "SECONDS", default_value = "1", value_parser = parse_interval)]
    pub interval: Duration,
    /// Also export the N processes with the most disk I/O (pid and comm labels).
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_series_top)]
    pub top_processes: usize,
    /// Also export the N files with the most disk I/O (device and path labels; needs eBPF).
    #[arg(long, value_name = "N", default_value = "0", value_parser = parse_series_top)]
    pub top_files: usize,
    /// Also export disk I/O per cgroup (one series per cgroup and disk; needs eBPF).
    #[arg(long)]
    pub cgroups: bool,
    /// Do not load eBPF programs: the procfs and sysfs figures only.
    #[arg(long)]
    pub no_bpf: bool,
}

/// The most per-process or per-file series sets `serve` exports: each is a label value that
/// Prometheus indexes, and churns as the top list changes.
pub const MAX_TOP: usize = 1000;

fn parse_series_top(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n <= MAX_TOP => Ok(n),
        Ok(_) => Err(format!("at most {MAX_TOP} (each is a set of series in Prometheus)")),
        Err(_) => Err(format!("'{s}' is not a whole number")),
    }
}

#[derive(Debug, Args)]
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
    #[arg(long, value_name = "N", default_value = "15", value_parser = parse_top)]
    pub top: u64,
}

/// What to run, with every option already validated.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// The interactive terminal UI.
    Interactive { interval: Duration, color: bool, bpf: bool },
    /// Headless output: `--once` (count 1) or `--batch`.
    Headless(HeadlessOptions),
    /// `ioscope record`.
    Record(crate::record::recorder::RecordOptions),
    /// `ioscope replay`.
    Replay(crate::replay::ReplayOptions),
    /// `ioscope compare`.
    Compare(crate::compare::CompareOptions),
    /// `ioscope bench`.
    Bench(Box<crate::bench::cli::BenchArgs>),
    /// `ioscope serve`.
    Serve(crate::serve::ServeOptions),
}

impl Cli {
    /// Checks the flag combinations and picks the mode. `no_color_env` is the value of the NO_COLOR
    /// environment variable (passed in so the decision stays a pure function).
    pub fn mode(&self, no_color_env: Option<&OsStr>) -> Result<Mode, clap::Error> {
        let usage = |msg: &str| Cli::command().error(ErrorKind::ArgumentConflict, msg);
        if let Some(command) = &self.command {
            return subcommand_mode(command, no_color_env);
        }
        if self.count.is_some() && !self.batch {
            return Err(usage("-n/--count only makes sense with --batch"));
        }
        if self.json && !(self.once || self.batch) {
            return Err(usage("--json needs --once (one document) or --batch (one document per line)"));
        }
        let bpf = !self.no_bpf;
        if self.once || self.batch {
            let format = match (self.json, self.once) {
                (false, _) => Format::Text,
                (true, true) => Format::JsonPretty,
                (true, false) => Format::JsonLines,
            };
            let count = if self.once { Some(1) } else { self.count };
            return Ok(Mode::Headless(HeadlessOptions { interval: self.interval, count, format, bpf }));
        }
        Ok(Mode::Interactive {
            interval: self.interval,
            color: wants_color(self.no_color, no_color_env),
            bpf,
        })
    }
}

fn subcommand_mode(command: &Command, no_color_env: Option<&OsStr>) -> Result<Mode, clap::Error> {
    let usage = |kind: ErrorKind, msg: &str| Cli::command().error(kind, msg);
    Ok(match command {
        Command::Bench(a) => Mode::Bench(Box::new(a.clone())),
        Command::Serve(a) => Mode::Serve(crate::serve::ServeOptions {
            listen: a.listen,
            interval: a.interval,
            export: crate::output::prometheus::ExportOptions {
                top_processes: a.top_processes,
                top_files: a.top_files,
                cgroups: a.cgroups,
            },
            bpf: !a.no_bpf,
        }),
        Command::Record(a) => Mode::Record(crate::record::recorder::RecordOptions {
            output: a.output.clone(),
            interval: a.interval,
            duration: a.duration,
            bpf: !a.no_bpf,
            force: a.force,
        }),
        Command::Replay(a) => {
            if let (Some(from), Some(to)) = (a.from, a.to) {
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
                (None, false, true) if a.openmetrics => crate::replay::ReplayOutput::OpenMetrics,
                (Some(pane), _, _) => crate::replay::ReplayOutput::Csv(
                    pane.parse().map_err(|e: String| usage(ErrorKind::InvalidValue, &e))?,
                ),
                (None, _, true) => crate::replay::ReplayOutput::Json,
                (None, true, false) => crate::replay::ReplayOutput::Text,
                (None, false, false) => {
                    crate::replay::ReplayOutput::Tui { color: wants_color(a.no_color, no_color_env) }
                }
            };
            Mode::Replay(crate::replay::ReplayOptions {
                file: a.file.clone(),
                output,
                from: a.from,
                to: a.to,
            })
        }
        Command::Compare(a) => {
            let parse =
                |s: &str| crate::compare::RangeSpec::parse(s).map_err(|e| usage(ErrorKind::InvalidValue, &e));
            Mode::Compare(crate::compare::CompareOptions {
                a: parse(&a.a)?,
                b: parse(&a.b)?,
                json: a.json,
                top: usize::try_from(a.top).unwrap_or(usize::MAX),
                text: a.text,
                color: wants_color(a.no_color, no_color_env),
            })
        }
    })
}

/// Turns a clap error into the single line we print: clap's text without the "error: " prefix, the
/// usage block or the tips, followed by a pointer to --help.
pub fn one_line_error(err: &clap::Error) -> String {
    let rendered = err.render().to_string();
    let mut parts: Vec<&str> = Vec::new();
    // clap's first paragraph is the message; a required-argument error continues it on indented
    // lines. The blank line after it separates tips and usage, which we drop.
    for line in rendered.lines() {
        if line.trim().is_empty() {
            break;
        }
        parts.push(line.trim());
    }
    let msg = parts.join(" ");
    let msg = msg.strip_prefix("error: ").unwrap_or(&msg);
    format!("ioscope: {msg} (see 'ioscope --help')")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::USAGE_EXIT_CODE;

    fn parse(args: &[&str]) -> Result<Mode, clap::Error> {
        let cli = Cli::try_parse_from(std::iter::once("ioscope").chain(args.iter().copied()))?;
        cli.mode(None)
    }

    #[test]
    fn default_is_interactive_with_one_second_colour_and_bpf() {
        assert_eq!(
            parse(&[]).unwrap(),
            Mode::Interactive { interval: Duration::from_secs(1), color: true, bpf: true }
        );
    }

    #[test]
    fn once_json_is_one_pretty_document() {
        let Mode::Headless(h) = parse(&["--once", "--json", "--interval", "0.2", "--no-bpf"]).unwrap() else {
            panic!("expected headless")
        };
        assert_eq!(h.count, Some(1));
        assert_eq!(h.format, Format::JsonPretty);
        assert_eq!(h.interval, Duration::from_millis(200));
        assert!(!h.bpf);
    }

    #[test]
    fn batch_json_is_json_lines_and_count_is_kept() {
        let Mode::Headless(h) = parse(&["--batch", "--json", "-n", "3"]).unwrap() else {
            panic!("expected headless")
        };
        assert_eq!((h.count, h.format, h.bpf), (Some(3), Format::JsonLines, true));
        let Mode::Headless(h) = parse(&["-b"]).unwrap() else { panic!("expected headless") };
        assert_eq!((h.count, h.format), (None, Format::Text));
    }

    #[test]
    fn bad_combinations_are_usage_errors() {
        for args in [
            &["-n", "2"][..],
            &["--json"],
            &["--once", "--batch"],
            &["--batch", "-n", "0"],
            &["--bogus"],
            &["--interval", "0"],
        ] {
            let err = parse(args).expect_err(&format!("{args:?} should fail"));
            assert_eq!(err.exit_code(), USAGE_EXIT_CODE, "{args:?}");
        }
    }

    #[test]
    fn error_is_flattened_to_one_line() {
        let err = parse(&["--interval", "abc"]).unwrap_err();
        let line = one_line_error(&err);
        assert!(!line.contains('\n'), "{line}");
        assert!(line.starts_with("ioscope: invalid value 'abc' for '--interval <SECONDS>'"), "{line}");
        assert!(line.contains("is not a number of seconds"), "{line}");
    }

    #[test]
    fn subcommands_parse_and_keep_the_top_level_flags_apart() {
        let Mode::Record(r) = parse(&["record", "-o", "x.rec", "-i", "0.5", "-d", "1m", "--no-bpf"]).unwrap()
        else {
            panic!("expected record")
        };
        assert_eq!(
            (r.interval, r.duration, r.bpf, r.force),
            (Duration::from_millis(500), Some(Duration::from_secs(60)), false, false)
        );
        assert!(matches!(parse(&["replay", "x.rec", "--json"]).unwrap(), Mode::Replay(_)));
        assert!(matches!(parse(&["compare", "a.rec", "b.rec@1m.."]).unwrap(), Mode::Compare(_)));
        for args in [
            &["record"][..],
            &["record", "-o", "x", "-d", "soon"],
            &["replay"],
            &["replay", "x", "--csv", "bogus"],
            &["replay", "x", "--csv", "memory", "--json"],
            &["replay", "x", "--from", "60", "--to", "30", "--json"],
            &["replay", "x", "--to", "30"],
            &["compare", "a"],
            &["compare", "a@x..y", "b"],
            &["--once", "record", "-o", "x"],
        ] {
            let err = parse(args).expect_err(&format!("{args:?} should fail"));
            assert_eq!(err.exit_code(), USAGE_EXIT_CODE, "{args:?}");
        }
    }

    #[test]
    fn bench_is_a_subcommand_beside_the_monitor_flags() {
        let Mode::Bench(b) = parse(&["bench", "/tmp", "--rw", "read", "--bs", "1k", "--json"]).unwrap()
        else {
            panic!("expected bench")
        };
        assert_eq!(
            (b.path.as_deref(), b.rw.as_deref(), b.bs.as_str(), b.json),
            (Some("/tmp".as_ref()), Some("read"), "1k", true)
        );
        assert!(matches!(parse(&["--once", "--json"]).unwrap(), Mode::Headless(_)));
        for args in [
            &["--once", "bench", "/tmp"][..],
            &["bench", "--fsync", "sometimes"],
            &["bench", "--runtime", "0"],
            &["bench", "--bogus"],
        ] {
            let err = parse(args).expect_err(&format!("{args:?} should fail"));
            assert_eq!(err.exit_code(), USAGE_EXIT_CODE, "{args:?}");
        }
    }

    #[test]
    fn serve_listens_on_loopback_by_default_with_no_per_entity_series() {
        let Mode::Serve(s) = parse(&["serve"]).unwrap() else { panic!("expected serve") };
        assert_eq!(s.listen, crate::serve::DEFAULT_LISTEN.parse().unwrap());
        assert!(s.listen.ip().is_loopback());
        assert_eq!((s.interval, s.bpf), (Duration::from_secs(1), true));
        assert_eq!(s.export, crate::output::prometheus::ExportOptions::default());
        let Mode::Serve(s) =
            parse(&["serve", "--listen", "[::]:9100", "--top-files", "5", "--cgroups", "--no-bpf"]).unwrap()
        else {
            panic!("expected serve")
        };
        assert_eq!((s.listen.port(), s.export.top_files, s.export.cgroups, s.bpf), (9100, 5, true, false));
        for args in [
            &["serve", "--top-processes", "1001"][..],
            &["serve", "--listen", "nowhere"],
            &["serve", "-i", "0"],
        ] {
            assert_eq!(parse(args).unwrap_err().exit_code(), USAGE_EXIT_CODE, "{args:?}");
        }
        assert!(
            matches!(parse(&["replay", "x.rec", "--openmetrics"]).unwrap(), Mode::Replay(r) if r.output == crate::replay::ReplayOutput::OpenMetrics)
        );
        assert!(parse(&["replay", "x.rec", "--openmetrics", "--json"]).is_err());
    }
}
