//! The command line: clap parses, [`Cli::mode`] checks the combinations clap cannot express and
//! decides which of the seven modes ([`Mode`]) runs. Usage errors become one line on stderr and exit code 2.

use std::ffi::OsStr;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};

use crate::headless::HeadlessOptions;
use crate::output::headless::Format;
use crate::util::{parse_count, parse_interval, wants_color};

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
    /// Time between samples: seconds (fractions allowed) or 500ms, 1s, 2m; 0.1 s to 1 h.
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

    /// Where `R` in the TUI records [default: the current directory, unless it is world-writable].
    #[arg(long, value_name = "DIR", env = "IOSCOPE_RECORD_DIR")]
    pub record_dir: Option<std::path::PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands; without one, ioscope is the live monitor (TUI, --once or --batch).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Benchmark direct vs buffered I/O on a file, directory or device, with what the system did.
    Bench(crate::bench::cli::BenchArgs),
    /// Export the figures to Prometheus: an HTTP server answering GET /metrics.
    Serve(crate::serve::ServeArgs),
    /// Record samples to a file, without a terminal (replay it with `ioscope replay FILE`).
    Record(crate::record::recorder::RecordArgs),
    /// Replay a recording in the TUI, or print it with --batch, --json or --csv.
    Replay(crate::replay::ReplayArgs),
    /// Compare two recordings, or two time ranges of one: average and p95 per metric.
    Compare(crate::compare::CompareArgs),
    /// Copy a recording with every user-controlled name replaced by a pseudonym (host, paths,
    /// processes, command lines, users, cgroups), its numbers untouched, to share it.
    Anonymize(crate::record::anonymize::AnonymizeArgs),
}

/// What to run, with every option already validated.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// The interactive terminal UI; `record_dir` is where `R` records.
    Interactive { interval: Duration, color: bool, bpf: bool, record_dir: Option<std::path::PathBuf> },
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
    /// `ioscope anonymize`.
    Anonymize(crate::record::anonymize::AnonymizeArgs),
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
            record_dir: self.record_dir.clone(),
        })
    }
}

fn subcommand_mode(command: &Command, no_color_env: Option<&OsStr>) -> Result<Mode, clap::Error> {
    // The subcommands check their own flags; their errors get ioscope's usage line here.
    let in_context = |e: clap::Error| e.format(&mut Cli::command());
    Ok(match command {
        Command::Bench(a) => Mode::Bench(Box::new(a.clone())),
        Command::Serve(a) => Mode::Serve(a.options()),
        Command::Record(a) => Mode::Record(a.options()),
        Command::Replay(a) => Mode::Replay(a.options(no_color_env).map_err(in_context)?),
        Command::Compare(a) => Mode::Compare(a.options(no_color_env).map_err(in_context)?),
        Command::Anonymize(a) => Mode::Anonymize(a.clone()),
    })
}

/// Turns a clap error into the single line we print: clap's text without the "error: " prefix, the
/// usage block or the tips, then clap's suggestion for a misspelt flag, subcommand or value ("did
/// you mean '--interval'?"), then a pointer to --help.
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
    match suggestion(err) {
        Some(s) => format!("ioscope: {msg}; did you mean {s}? (see 'ioscope --help')"),
        None => format!("ioscope: {msg} (see 'ioscope --help')"),
    }
}

/// What clap found close to a misspelt flag, subcommand or value, quoted: `'--interval'`.
fn suggestion(err: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    [ContextKind::SuggestedArg, ContextKind::SuggestedSubcommand, ContextKind::SuggestedValue]
        .iter()
        .find_map(|&kind| match err.get(kind)? {
            ContextValue::String(s) => Some(format!("'{s}'")),
            ContextValue::Strings(v) if !v.is_empty() => {
                Some(v.iter().map(|s| format!("'{s}'")).collect::<Vec<_>>().join(" or "))
            }
            _ => None,
        })
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
            Mode::Interactive { interval: Duration::from_secs(1), color: true, bpf: true, record_dir: None }
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
        assert!(line.contains("'abc' is not a time (use seconds, 250ms, 90s, 5m, 2h or h:mm:ss)"), "{line}");
    }

    #[test]
    fn a_misspelt_flag_or_subcommand_gets_a_did_you_mean() {
        let line = one_line_error(&parse(&["--intervl", "1"]).unwrap_err());
        assert_eq!(
            line,
            "ioscope: unexpected argument '--intervl' found; did you mean '--interval'? (see 'ioscope --help')"
        );
        let line = one_line_error(&parse(&["record", "-o", "x", "--duraton", "5"]).unwrap_err());
        assert!(line.contains("did you mean '--duration'?"), "{line}");
        let line = one_line_error(&parse(&["replay", "x", "--csv", "memry"]).unwrap_err());
        assert!(line.contains("did you mean 'memory'?"), "{line}");
        // Nothing close: no suggestion.
        let line = one_line_error(&parse(&["--zzzzzz"]).unwrap_err());
        assert!(!line.contains("did you mean"), "{line}");
    }

    #[test]
    fn interval_takes_a_unit_as_duration_does() {
        let Mode::Headless(h) = parse(&["--once", "-i", "1s"]).unwrap() else { panic!("expected headless") };
        assert_eq!(h.interval, Duration::from_secs(1));
        let Mode::Headless(h) = parse(&["--once", "-i", "250ms"]).unwrap() else {
            panic!("expected headless")
        };
        assert_eq!(h.interval, Duration::from_millis(250));
        let Mode::Record(r) = parse(&["record", "-o", "x", "-i", "2s", "-d", "90s"]).unwrap() else {
            panic!("expected record")
        };
        assert_eq!((r.interval, r.duration), (Duration::from_secs(2), Some(Duration::from_secs(90))));
        let line = one_line_error(&parse(&["-i", "10ms"]).unwrap_err());
        assert!(line.contains("must be between 0.1 and 3600 seconds (100ms to 1h)"), "{line}");
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
