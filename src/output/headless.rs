//! The `--once` / `--batch` loop: sample, wait an interval, sample, print the Model between them.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use crate::bpf::{BpfCollector, BpfOptions};
use crate::collect::{Sampler, SystemRoot};
use crate::model::Model;
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The `top -b`-like text frame.
    Text,
    /// One pretty-printed JSON document (`--once --json`).
    JsonPretty,
    /// One compact JSON document per line (`--batch --json`).
    JsonLines,
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
        Ok(()) => Ok(()),
    }
}

fn sleep_until(deadline: Instant) {
    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
}

/// Takes a first sample, then every interval another, and writes the Model between each pair.
///
/// The deadlines are fixed multiples of the interval from the start, so the time spent sampling
/// does not make the reports drift later and later; when a sample takes longer than an interval,
/// the missed deadlines are skipped rather than fired back to back. The rates stay exact either
/// way: the Model divides by the samples' own monotonic timestamps, not by the nominal interval.
pub fn report_loop<W: Write>(
    mut sample: impl FnMut() -> Sample,
    mut sleep_until: impl FnMut(Instant),
    mut out: W,
    opts: &HeadlessOptions,
) -> io::Result<()> {
    let start = Instant::now();
    let mut prev = sample();
    let mut tick: u32 = 0;
    let mut written: u64 = 0;
    while opts.count.is_none_or(|n| written < n) {
        tick += 1;
        let mut deadline = start + opts.interval * tick;
        let now = Instant::now();
        if deadline < now {
            // Late: catch up to the next deadline still ahead instead of firing back to back.
            let behind = (now - start).as_secs_f64() / opts.interval.as_secs_f64();
            tick = behind.ceil() as u32;
            deadline = start + opts.interval * tick;
        }
        sleep_until(deadline);
        let cur = sample();
        let model = Model::between(&prev, &cur);
        write_report(&mut out, &model, opts.format, written == 0)?;
        out.flush()?;
        written += 1;
        prev = cur;
    }
    Ok(())
}

/// One report in the chosen format. Text frames after the first are preceded by a blank line,
/// as `top -b` separates its frames.
pub fn write_report<W: Write>(out: &mut W, model: &Model, format: Format, first: bool) -> io::Result<()> {
    match format {
        Format::Text => {
            if !first {
                out.write_all(b"\n")?;
            }
            out.write_all(super::text::format_frame(model).as_bytes())
        }
        Format::JsonPretty => {
            serde_json::to_writer_pretty(&mut *out, model)?;
            out.write_all(b"\n")
        }
        Format::JsonLines => {
            crate::model::json_memo::compact(|| serde_json::to_writer(&mut *out, model))?;
            out.write_all(b"\n")
        }
    }
}
