//! The live TUI's event loop: one tokio `select!` over terminal input, ticks, samples and signals.
//!
//! Sampling runs on its own thread (reading procfs and eBPF maps blocks), owning the `Sampler` and
//! sending each `Sample` over a channel. Only this loop changes app state: it keeps the previous
//! sample, derives the Model, feeds the sparkline history and redraws.

use std::sync::mpsc as std_mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossterm::event::{Event, EventStream};
use futures_util::StreamExt;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use crate::bpf::BpfCollector;
use crate::collect::{Sampler, SystemRoot};
use crate::model::Model;
use crate::record::live;
use crate::sample::Sample;
use crate::ui::baseline::Baseline;
use crate::ui::terminal::{is_suspend_key, JobControl, TerminalGuard};
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
}

/// The second sample comes this soon after the first (or after the interval, if shorter), so rates
/// show up quickly instead of after a whole interval.
const FIRST_INTERVAL: Duration = Duration::from_millis(250);
/// Redraw at least this often even without news (keeps the screen right after e.g. a lost resize).
const TICK: Duration = Duration::from_secs(1);

/// Runs the interactive UI until the user quits. Restores the terminal on every exit path.
pub async fn run(opts: AppOptions) -> anyhow::Result<()> {
    let mut state = UiState::new(opts.interval, opts.color);
    state.utc_offset_s = crate::util::local_utc_offset_s();
    // Signals are hooked before the terminal changes, so a failure here leaves it untouched.
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut sighup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    let mut job = JobControl::new().context("installing the SIGTSTP/SIGCONT handlers")?;

    let mut guard = TerminalGuard::enter().context("setting up the terminal (is stdout a terminal?)")?;
    // First frame at once, before any sample: the user sees ioscope is alive.
    guard.terminal.draw(|f| ui::draw_starting(f, &state))?;

    let (sample_tx, mut samples) = mpsc::channel::<Sample>(4);
    let commands = spawn_sampler(opts.bpf, state.interval, sample_tx)?;
    let mut events = EventStream::new();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);

    let mut prev: Option<Sample> = None;
    // `latest` is the newest model; `shown` is what is on screen (they differ while paused).
    // Counted rather than compared (a model holding NaN never equals itself).
    let mut latest: Option<Model> = None;
    let mut shown: Option<Model> = None;
    let (mut latest_seq, mut shown_seq) = (0u64, 0u64);
    // `R`: the session's recording, while one runs.
    let mut recorder: Option<live::LiveRecorder> = None;
    loop {
        let mut redraw = false;
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(Event::Key(key))) if is_suspend_key(&key) => {
                    guard.suspend()?;
                    redraw = true;
                }
                Some(Ok(Event::Key(key))) => match state.handle_key(key) {
                    Action::None => {}
                    Action::Redraw => redraw = true,
                    Action::SetInterval(d) => {
                        // The sampler only stops when we do; a send error then is moot.
                        let _ = commands.send(d);
                        redraw = true;
                    }
                    Action::Quit => break,
                    Action::ToggleRecording => {
                        live::toggle(&mut recorder, &mut state, prev.as_ref());
                        redraw = true;
                    }
                    Action::ToggleBaseline => {
                        state.baseline = match state.baseline {
                            Some(_) => None,
                            None => shown.clone().map(|model| Baseline { model }),
                        };
                        redraw = true;
                    }
                },
                Some(Ok(Event::Resize(..))) => redraw = true,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e).context("reading terminal input"),
                // Input closed (terminal gone): nothing more can be asked of us.
                None => break,
            },
            sample = samples.recv() => {
                let cur = sample.context("the sampling thread stopped")?;
                live::on_sample(&mut recorder, &mut state, &cur);
                let model = match &prev {
                    Some(p) => Model::between(p, &cur),
                    None => Model::compute(None, &cur, Duration::ZERO),
                };
                prev = Some(cur);
                latest = Some(model);
                latest_seq += 1;
                redraw = true;
            }
            _ = tick.tick() => redraw = true,
            _ = sigint.recv() => break,
            _ = sigterm.recv() => break,
            _ = sighup.recv() => break,
            _ = job.tstp.recv() => {
                guard.suspend()?;
                redraw = true;
            }
            _ = job.cont.recv() => {
                guard.resume()?;
                redraw = true;
            }
        }
        // Resuming from pause or a new model while running: show the newest.
        if !state.paused && shown_seq != latest_seq {
            if let Some(model) = &latest {
                state.history.push(model);
                shown = Some(model.clone());
                shown_seq = latest_seq;
            }
        }
        if redraw {
            match &shown {
                Some(model) => {
                    state.clamp_selection(model);
                    guard.terminal.draw(|f| ui::draw(f, model, &state))?;
                }
                None => {
                    guard.terminal.draw(|f| ui::draw_starting(f, &state))?;
                }
            }
        }
    }
    drop(guard);
    if let Some(r) = recorder {
        eprintln!("ioscope: {}", r.finish());
    }
    Ok(())
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
