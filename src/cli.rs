//! The command line: clap parses, [`Cli::mode`] checks the combinations clap cannot express and
//! decides which of the three modes runs. Usage errors become one line on stderr and exit code 2.

use std::ffi::OsStr;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

/// Shortest and longest sampling interval accepted, seconds. Below 0.1 s the counters barely move
/// and the sampling itself becomes the load; above an hour a "rate" means little.
pub const MIN_INTERVAL_S: f64 = 0.1;
pub const MAX_INTERVAL_S: f64 = 3600.0;

/// The exit code of a usage error (unknown flag, bad value, bad combination), as clap and BSD
/// sysexits-free tools use it.
pub const USAGE_EXIT_CODE: i32 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "ioscope",
    version,
    about = "Shows why the disk is busy: dirty memory vs. thresholds, iostat -x device stats, per-process I/O",
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

/// Subcommands; without one, ioscope monitors (TUI, --once or --batch).
#[derive(Clone, Debug, PartialEq, clap::Subcommand)]
pub enum Command {
    /// Benchmark direct vs buffered I/O on a file, directory or device, with what the system did.
    Bench(crate::bench::cli::BenchArgs),
}

/// What to run, with every option already validated.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// The interactive terminal UI.
    Interactive { interval: Duration, color: bool, bpf: bool },
    /// Headless output: `--once` (count 1) or `--batch`.
    Headless(HeadlessOptions),
    /// `ioscope bench`.
    Bench(Box<crate::bench::cli::BenchArgs>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct HeadlessOptions {
    pub interval: Duration,
    /// Reports to print; None means until killed or stdout closes.
    pub count: Option<u64>,
    pub format: Format,
    pub bpf: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The `top -b`-like text frame.
    Text,
    /// One pretty-printed JSON document (`--once --json`).
    JsonPretty,
    /// One compact JSON document per line (`--batch --json`).
    JsonLines,
}

impl Cli {
    /// Checks the flag combinations and picks the mode. `no_color_env` is the value of the NO_COLOR
    /// environment variable (passed in so the decision stays a pure function).
    pub fn mode(&self, no_color_env: Option<&OsStr>) -> Result<Mode, clap::Error> {
        let usage = |msg: &str| Cli::command().error(ErrorKind::ArgumentConflict, msg);
        if let Some(Command::Bench(bench)) = &self.command {
            if self.once || self.batch || self.json || self.count.is_some() {
                return Err(usage("--once, --batch, --json and -n are monitor options; bench has its own (ioscope bench --help)"));
            }
            return Ok(Mode::Bench(Box::new(bench.clone())));
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

/// Colour is off with `--no-color`, or when NO_COLOR is set to anything but the empty string
/// (https://no-color.org: "when present and not an empty string").
pub fn wants_color(no_color_flag: bool, no_color_env: Option<&OsStr>) -> bool {
    let env_says_no = no_color_env.is_some_and(|v| !v.is_empty());
    !(no_color_flag || env_says_no)
}

/// Parses `--interval`: seconds as a decimal number within [MIN_INTERVAL_S, MAX_INTERVAL_S].
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let secs: f64 = s.trim().parse().map_err(|_| format!("'{s}' is not a number of seconds"))?;
    // The range check also rejects NaN (every comparison with NaN is false) and infinities.
    if !(MIN_INTERVAL_S..=MAX_INTERVAL_S).contains(&secs) {
        return Err(format!("must be between {MIN_INTERVAL_S} and {MAX_INTERVAL_S} seconds"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses `-n`: a whole number of reports, at least one.
pub fn parse_count(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{s}' is not a whole number of reports")),
    }
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
    fn interval_accepts_fractions_and_the_range_ends() {
        assert_eq!(parse_interval("0.25"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_interval("0.1"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_interval("3600"), Ok(Duration::from_secs(3600)));
    }

    #[test]
    fn interval_rejects_zero_text_nan_and_out_of_range() {
        for bad in ["0", "0.09", "3600.5", "-1", "abc", "", "NaN", "inf"] {
            assert!(parse_interval(bad).is_err(), "{bad:?} should be rejected");
        }
        assert_eq!(parse_interval("abc").unwrap_err(), "'abc' is not a number of seconds");
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
    fn no_color_env_only_counts_when_not_empty() {
        assert!(wants_color(false, None));
        assert!(wants_color(false, Some(OsStr::new(""))));
        assert!(!wants_color(false, Some(OsStr::new("1"))));
        assert!(!wants_color(true, None));
    }
}
