//! ioscope's entry point: parse the command line, get privileges if needed, run the chosen mode.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use ioscope::cli::{self, Cli, Mode};
use ioscope::{app, headless, privilege};

fn main() -> ExitCode {
    // Before anything opens a file or sizes a cache by the limit (see raise_fd_limit).
    ioscope::util::raise_fd_limit();
    // Whatever the mode: quit at once, the kernel detaches the programs afterwards.
    ioscope::bpf::teardown::detach_in_background_on_drop();
    run()
}

fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let mode = match cli.mode(std::env::var_os("NO_COLOR").as_deref()) {
        Ok(mode) => mode,
        Err(e) => return usage_error(&e),
    };
    let result = match mode {
        Mode::Interactive { interval, color, bpf, record_dir } => {
            interactive(app::AppOptions { interval, color, bpf, record_dir })
        }
        Mode::Headless(opts) => headless::run(&opts),
        Mode::Record(opts) => ioscope::record::recorder::run(&opts),
        Mode::Replay(opts) => ioscope::replay::run(&opts),
        Mode::Compare(opts) => ioscope::compare::run(&opts),
        Mode::Serve(opts) => ioscope::serve::run(&opts),
        Mode::Anonymize(args) => ioscope::record::anonymize::run(&args),
        Mode::Bench(args) => {
            return ioscope::bench::cli::main(&args, std::env::var_os("NO_COLOR").as_deref())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Errors echo paths and names (a recording's, a user's): shown escaped.
            eprintln!("ioscope: {}", ioscope::untrusted::escape_lines(&format!("{e:#}")));
            // A refused file (a link, a FIFO, an existing file without --force) is bad input.
            if ioscope::safe_fs::is_refused(&e) {
                ExitCode::from(ioscope::util::USAGE_EXIT_CODE as u8)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// `--help` and `--version` print normally and succeed; real usage errors are one line and exit 2.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind::{DisplayHelp, DisplayVersion};
    if matches!(e.kind(), DisplayHelp | DisplayVersion) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    eprintln!("{}", ioscope::untrusted::escape(&cli::one_line_error(e)));
    ExitCode::from(ioscope::util::USAGE_EXIT_CODE as u8)
}

fn interactive(opts: app::AppOptions) -> anyhow::Result<()> {
    if !std::io::stdout().is_terminal() {
        anyhow::bail!("the interactive UI needs a terminal on stdout; use --batch or --once --json");
    }
    // Before any thread or terminal state exists: on success this process becomes `sudo ioscope`.
    privilege::elevate_if_needed(opts.bpf, true);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(app::run(opts))
}
