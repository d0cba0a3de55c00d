//! The live TUI: the shared event loop ([`event_loop`]) over models from the sampler.
//!
//! Sampling runs on its own thread (reading procfs and eBPF maps blocks), owning the `Sampler` and
//! sending each `Sample` over a channel. Only this loop changes app state: it keeps the previous
//! sample, derives the Model, feeds the sparkline history and redraws.

use std::sync::mpsc as std_mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossterm::event::KeyEvent;
use ratatui::Frame;
use tokio::sync::mpsc;

use crate::bpf::BpfCollector;
use crate::collect::{Sampler, SystemRoot};
use crate::model::Model;
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
    let (sample_tx, samples) = mpsc::channel::<Sample>(4);
    let commands = spawn_sampler(opts.bpf, state.interval, sample_tx)?;
    let mut live = Live {
        state,
        samples,
        commands,
        prev: None,
        latest: None,
        shown: None,
        latest_seq: 0,
        shown_seq: 0,
        recorder: None,
        record_dir: opts.record_dir.clone(),
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
    samples: mpsc::Receiver<Sample>,
    commands: std_mpsc::Sender<Duration>,
    prev: Option<Sample>,
    /// `latest` is the newest model; `shown` is what is on screen (they differ while paused).
    /// Counted rather than compared (a model holding NaN never equals itself).
    latest: Option<Model>,
    shown: Option<Model>,
    latest_seq: u64,
    shown_seq: u64,
    /// `R`: the session's recording, while one runs.
    recorder: Option<live::LiveRecorder>,
    record_dir: Option<std::path::PathBuf>,
}

impl Screen for Live {
    fn tick(&self) -> Duration {
        TICK
    }

    async fn next(&mut self) -> anyhow::Result<Step> {
        let cur = self.samples.recv().await.context("the sampling thread stopped")?;
        if let Some(outcome) = live::on_sample(&mut self.recorder, &cur) {
            show_recording(&mut self.state, outcome);
        }
        let model = match &self.prev {
            Some(p) => Model::between(p, &cur),
            None => Model::compute(None, &cur, Duration::ZERO),
        };
        self.prev = Some(cur);
        self.latest = Some(model);
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
                    self.prev.as_ref(),
                    state.interval.as_secs_f64(),
                    state.utc_offset_s,
                    self.record_dir.as_deref(),
                );
                show_recording(state, outcome);
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

/// Starts the sampling thread. It takes a sample at once, the second one after
/// `min(FIRST_INTERVAL, interval)`, then one per interval; a new interval arrives on the returned
/// channel and counts from the last sample. It ends when the UI drops either channel.
fn spawn_sampler(
    bpf: bool,
    interval: Duration,
    samples: mpsc::Sender<Sample>,
) -> anyhow::Result<std_mpsc::Sender<Duration>> {
    let (tx, commands) = std_mpsc::channel::<Duration>();
    thread::Builder::new()
        .name("ioscope-sampler".into())
        .spawn(move || {
            let send = |sample: Sample| samples.blocking_send(sample).is_ok();
            // The first sample is taken before eBPF loads (BTF parsing and attaching take a while),
            // so the gauges are on screen at once; eBPF figures join from the next sample on.
            let startup = if bpf { "starting…" } else { "--no-bpf" };
            let mut sampler = Sampler::new(SystemRoot::live(), BpfCollector::disabled(startup));
            let mut taken = Instant::now();
            if !send(sampler.sample()) {
                return;
            }
            if bpf {
                sampler = Sampler::new(SystemRoot::live(), BpfCollector::start());
            }
            let mut interval = interval;
            let mut wait = FIRST_INTERVAL.min(interval);
            loop {
                let mut deadline = taken + wait;
                loop {
                    let now = Instant::now();
                    if now >= deadline {
                        break;
                    }
                    match commands.recv_timeout(deadline - now) {
                        Ok(d) => {
                            interval = d;
                            deadline = taken + d;
                        }
                        Err(std_mpsc::RecvTimeoutError::Timeout) => break,
                        Err(std_mpsc::RecvTimeoutError::Disconnected) => return,
                    }
                }
                wait = interval;
                taken = Instant::now();
                if !send(sampler.sample()) {
                    return;
                }
            }
        })
        .context("starting the sampling thread")?;
    Ok(tx)
}
