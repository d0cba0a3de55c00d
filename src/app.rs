//! The live TUI: the shared event loop ([`event_loop`]) over models from the sampler.
//!
//! Sampling runs on its own thread (reading procfs and eBPF maps blocks) on the sampling clock,
//! owning the `Sampler` and sending each `Sample` over a channel. Only this loop changes app
//! state: it folds each sample into a Model (its [`Stream`]), feeds the sparkline history and
//! redraws.

use std::sync::mpsc as std_mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossterm::event::KeyEvent;
use ratatui::Frame;
use tokio::sync::mpsc;

use crate::bpf::BpfCollector;
use crate::collect::clock::Clock;
use crate::collect::{Sampler, SystemRoot};
use crate::model::{Model, Stream};
use crate::record::live;
use crate::sample::Sample;
use crate::ui::baseline::Baseline;
use crate::ui::event_loop::{self, Screen, Step};
use crate::ui::state::RecordingIndicator;
use crate::ui::{self, Action, UiState};

/// What the command line decided for the interactive UI.
#[derive(Clone, Debug)]
pub struct AppOptions {
    /// Sampling interval (adjustable at run time with +/-; kept within 0.25 s – 60 s).
    pub interval: Duration,
    /// False with --no-color or when NO_COLOR is set.
    pub color: bool,
    /// False with --no-bpf: eBPF is not even tried.
    pub bpf: bool,
    /// Where `R` records (`--record-dir`, `IOSCOPE_RECORD_DIR`); None: the current directory,
    /// unless it is world-writable ([`live::record_dir`]).
    pub record_dir: Option<std::path::PathBuf>,
}

/// The second sample comes this soon after the first (or after the interval, if shorter), so rates
/// show up quickly instead of after a whole interval.
const FIRST_INTERVAL: Duration = Duration::from_millis(250);
/// Redraw at least this often even without news (keeps the screen right after e.g. a lost resize).
const TICK: Duration = Duration::from_secs(1);

/// Runs the interactive UI until the user quits. Restores the terminal on every exit path.
pub async fn run(opts: AppOptions) -> anyhow::Result<()> {
    let signals = event_loop::Signals::hook()?;
    let mut state = UiState::new(opts.interval, opts.color);
    state.utc_offset_s = crate::util::local_utc_offset_s();
    let (sample_tx, samples) = mpsc::channel::<Sampled>(4);
    let commands = spawn_sampler(opts.bpf, state.interval, sample_tx)?;
    let mut live = Live {
        state,
        samples,
        commands,
        stream: Stream::new(),
        skipped: 0,
        latest: None,
        shown: None,
        latest_seq: 0,
        shown_seq: 0,
        recorder: None,
        pending_mark: None,
        record_dir: opts.record_dir.clone(),
        run_stats: None,
    };
    let result = event_loop::run(signals, &mut live).await;
    if let Some(r) = live.recorder {
        eprintln!("ioscope: {}", r.finish());
    }
    result
}

/// The live screen: models from the sampling thread.
struct Live {
    state: UiState,
    samples: mpsc::Receiver<Sampled>,
    commands: std_mpsc::Sender<Duration>,
    stream: Stream,
    /// The clock's deadlines skipped so far (told in a notice when it grows).
    skipped: u64,
    /// `latest` is the newest model; `shown` is what is on screen (they differ while paused).
    /// Counted rather than compared (a model holding NaN never equals itself).
    latest: Option<Model>,
    shown: Option<Model>,
    latest_seq: u64,
    shown_seq: u64,
    /// `R`: the session's recording, while one runs.
    recorder: Option<live::LiveRecorder>,
    /// `m`: the moment marked (monotonic ns, wall ms) while its note is typed.
    pending_mark: Option<(u64, u64)>,
    record_dir: Option<std::path::PathBuf>,
    /// The kernel's BPF run statistics, held on while the probe-health view is open.
    run_stats: Option<crate::bpf::prog_stats::RunStats>,
}

impl Live {
    /// Turns the kernel's BPF run statistics on when the probe-health view opens (its events/s
    /// and ns/run come from them) and off when it closes; says which on the view.
    fn sync_run_stats(&mut self) {
        let open = self.state.is_open(crate::ui::Body::ProbeHealth);
        if open && self.state.run_stats.is_none() {
            self.state.run_stats = Some(match crate::bpf::prog_stats::RunStats::enable() {
                Ok(held) => {
                    self.run_stats = Some(held);
                    "kernel BPF run statistics on while this view is open (events/s, ns/run; \
                     about 20 ns a run)"
                        .into()
                }
                Err(e) => format!(
                    "kernel BPF run statistics off (BPF_ENABLE_STATS: {e}): events/s and ns/run \
                     need `sysctl kernel.bpf_stats_enabled=1` (about 20 ns a run)"
                ),
            });
        } else if !open && self.state.run_stats.is_some() {
            self.run_stats = None;
            self.state.run_stats = None;
        }
    }
}

impl Screen for Live {
    fn tick(&self) -> Duration {
        TICK
    }

    async fn next(&mut self) -> anyhow::Result<Step> {
        let Sampled { sample, skipped } = self.samples.recv().await.context("the sampling thread stopped")?;
        if let Some(outcome) = live::on_sample(&mut self.recorder, &sample) {
            show_recording(&mut self.state, outcome);
        }
        if skipped > self.skipped {
            self.state.message = Some(late_notice(skipped - self.skipped, skipped));
            self.skipped = skipped;
        }
        self.latest = Some(self.stream.advance(sample));
        self.latest_seq += 1;
        Ok(Step::Redraw)
    }

    fn key(&mut self, key: KeyEvent, _height: u16) -> anyhow::Result<Step> {
        let state = &mut self.state;
        Ok(match state.handle_key(key) {
            Action::None => Step::Idle,
            Action::Redraw => Step::Redraw,
            Action::SetInterval(d) => {
                // The sampler only stops when we do; a send error then is moot.
                let _ = self.commands.send(d);
                Step::Redraw
            }
            Action::Quit => Step::Quit,
            Action::ToggleRecording => {
                let outcome = live::toggle(
                    &mut self.recorder,
                    self.stream.latest().map(|s| &**s),
                    state.interval.as_secs_f64(),
                    state.utc_offset_s,
                    self.record_dir.as_deref(),
                );
                show_recording(state, outcome);
                Step::Redraw
            }
            Action::StartMark => {
                match self.recorder {
                    Some(_) => {
                        // The mark is the moment of `m`, whatever time the note takes.
                        let wall = crate::collect::wall_unix_ms();
                        self.pending_mark = Some((crate::util::monotonic_ns(), wall));
                        state.open_mark_note();
                    }
                    None => state.message = Some("m marks a recording: press R to record first".into()),
                }
                Step::Redraw
            }
            Action::AddMark => {
                let note = state.mark_note.to_string();
                state.mark_note.clear();
                if let (Some(rec), Some((mono_ns, wall_unix_ms))) =
                    (&mut self.recorder, self.pending_mark.take())
                {
                    state.message =
                        Some(match rec.mark(&crate::record::Mark { mono_ns, wall_unix_ms, note }) {
                            Ok(n) => format!("mark {n} made (' and \" jump to it in replay)"),
                            Err(e) => format!("{e:#}"),
                        });
                }
                Step::Redraw
            }
            Action::ToggleBaseline => {
                state.baseline = match state.baseline {
                    Some(_) => None,
                    None => self.shown.clone().map(|model| Baseline { model }),
                };
                Step::Redraw
            }
        })
    }

    fn settle(&mut self) -> anyhow::Result<Step> {
        self.sync_run_stats();
        // Resuming from pause or a new model while running: show the newest.
        if !self.state.paused && self.shown_seq != self.latest_seq {
            if let Some(model) = &self.latest {
                self.state.history.push(model);
                self.shown = Some(model.clone());
                self.shown_seq = self.latest_seq;
            }
        }
        Ok(Step::Idle)
    }

    fn draw(&mut self, frame: &mut Frame) {
        match &self.shown {
            Some(model) => {
                self.state.clamp_selection(model);
                ui::draw(frame, model, &self.state);
            }
            None => ui::draw_starting(frame, &self.state),
        }
    }
}

/// The recorder's outcome on screen: the header's REC indicator, or a notice saying what happened.
fn show_recording(state: &mut UiState, outcome: live::Outcome) {
    match outcome {
        live::Outcome::Started(p, notice) => {
            state.recording = Some(RecordingIndicator { path: p.path, frames: p.frames, bytes: p.bytes });
            state.message = Some(notice);
        }
        live::Outcome::Recording(p) => {
            state.recording = Some(RecordingIndicator { path: p.path, frames: p.frames, bytes: p.bytes })
        }
        live::Outcome::Stopped(message) => {
            state.recording = None;
            state.message = Some(message);
        }
        live::Outcome::NotStarted(message) => state.message = Some(message),
    }
}

/// A sample from the sampling thread, with the clock's count of skipped deadlines so far.
struct Sampled {
    sample: Sample,
    skipped: u64,
}

/// The notice when sampling fell behind its clock.
fn late_notice(now: u64, all: u64) -> String {
    format!("a sample took longer than the interval: {now} skipped ({all} since start)")
}

/// Starts the sampling thread. It takes a sample at once, the second one after
/// `min(FIRST_INTERVAL, interval)` (or as soon as eBPF has loaded, if later), then one on each of
/// the clock's deadlines ([`Clock`]); a new interval arrives on the returned channel and counts
/// from the last deadline. It ends when the UI drops either channel.
fn spawn_sampler(
    bpf: bool,
    interval: Duration,
    samples: mpsc::Sender<Sampled>,
) -> anyhow::Result<std_mpsc::Sender<Duration>> {
    let (tx, commands) = std_mpsc::channel::<Duration>();
    thread::Builder::new()
        .name("ioscope-sampler".into())
        .spawn(move || {
            let send = |sample: Sample, clock: &Clock| {
                samples.blocking_send(Sampled { sample, skipped: clock.skipped() }).is_ok()
            };
            // The first sample is taken before eBPF loads (BTF parsing and attaching take a while),
            // so the gauges are on screen at once; eBPF figures join from the next sample on.
            let startup = if bpf { "starting…" } else { "--no-bpf" };
            let mut sampler = Sampler::new(SystemRoot::live(), BpfCollector::disabled(startup));
            let mut clock = Clock::new(Instant::now(), interval);
            if !send(sampler.sample(), &clock) {
                return;
            }
            if bpf {
                sampler = Sampler::new(SystemRoot::live(), BpfCollector::start());
            }
            // The second deadline: soon after the first (at once if loading eBPF took longer).
            clock.set_interval(FIRST_INTERVAL.min(interval), Instant::now());
            let mut first = true;
            loop {
                let deadline = clock.next(Instant::now());
                let now = Instant::now();
                if now < deadline {
                    match commands.recv_timeout(deadline - now) {
                        Ok(d) => {
                            clock.set_interval(d, Instant::now());
                            first = false;
                            continue;
                        }
                        Err(std_mpsc::RecvTimeoutError::Timeout) => {}
                        Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
                    }
                }
                clock.tick();
                if !send(sampler.sample(), &clock) {
                    return;
                }
                if std::mem::take(&mut first) {
                    clock.set_interval(interval, Instant::now());
                }
            }
        })
        .context("starting the sampling thread")?;
    Ok(tx)
}
