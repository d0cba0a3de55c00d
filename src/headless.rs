//! `--once` and `--batch`: sample the live system on the sampling clock, fold the samples into
//! Models and write a report of each on stdout (the reports' formats are `output::headless`'s).

use std::io::{self, Write};
use std::time::{Duration, Instant};

use crate::bpf::{BpfCollector, BpfOptions};
use crate::collect::clock::Clock;
use crate::collect::{Sampler, SystemRoot};
use crate::model::Stream;
use crate::output::headless::{Format, Reports};
use crate::sample::Sample;

/// What `--once` and `--batch` run: how often, how many reports, in which format.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadlessOptions {
    pub interval: Duration,
    /// Reports to print; None means until killed or stdout closes.
    pub count: Option<u64>,
    pub format: Format,
    pub bpf: bool,
}

/// Samples the live system and prints reports on stdout until `opts.count` is reached. A closed
/// stdout (`ioscope --batch | head`) is a normal way to stop, not an error.
pub fn run(opts: &HeadlessOptions) -> anyhow::Result<()> {
    let bpf = if opts.bpf {
        BpfCollector::start_with(&BpfOptions::for_output_writer())
    } else {
        BpfCollector::disabled("--no-bpf was given")
    };
    let mut sampler = Sampler::new(SystemRoot::live(), bpf);
    // One write per report: stdout's own buffer is a line buffer of 1 KiB, which sends a JSON
    // report of tens of kilobytes in dozens of writes.
    let out = io::BufWriter::with_capacity(1 << 16, io::stdout().lock());
    match report_loop(|| sampler.sample(), sleep_until, out, opts) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(anyhow::Error::new(e).context("cannot write to standard output")),
        Ok(_) => Ok(()),
    }
}

fn sleep_until(deadline: Instant) {
    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
}

/// Takes a first sample, then one on each of the clock's deadlines ([`Clock`]: fixed, late ones
/// skipped), and writes the Model between each pair. Returns how many deadlines were skipped.
/// Nothing else is written (stdout is the reports', stderr stays quiet): a report after skipped
/// deadlines shows them in its `interval_s`, and its rates are exact either way, the Model
/// dividing by the samples' own monotonic timestamps, not by the nominal interval.
pub fn report_loop<W: Write>(
    mut sample: impl FnMut() -> Sample,
    mut sleep_until: impl FnMut(Instant),
    mut out: W,
    opts: &HeadlessOptions,
) -> io::Result<u64> {
    let mut clock = Clock::new(Instant::now(), opts.interval);
    let mut stream = Stream::new();
    stream.advance(sample());
    let mut reports = Reports::new(opts.format);
    while opts.count.is_none_or(|n| reports.written() < n) {
        let deadline = clock.next(Instant::now());
        sleep_until(deadline);
        clock.tick();
        let model = stream.advance(sample());
        reports.write(&mut out, &model)?;
        out.flush()?;
    }
    Ok(clock.skipped())
}
