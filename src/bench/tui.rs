//! The bench's interactive front end: the runner works on its own thread; one tokio `select!` loop
//! owns the screen and hears the runner's events, the monitor's samples (for the memory and devices
//! panes), keys, ticks and signals. q or Ctrl-C stops the run (the test file is removed, the
//! results so far are kept); once finished, q quits. The terminal is restored on every path.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::Frame;
use tokio::sync::mpsc;

use super::job::Progress;
use super::runner::{self, BenchReport, Event, Plan, STOP};
use super::view::{self, BenchView, Running};
use crate::bpf::BpfCollector;
use crate::collect::clock::Clock;
use crate::collect::{Sampler, SystemRoot};
use crate::model::{Model, Stream};
use crate::sample::Sample;
use crate::ui::event_loop::{self, Screen, Step};
use crate::ui::UiState;

/// Redraw period while a job runs (live IOPS and MB/s).
const TICK: Duration = Duration::from_millis(250);
/// The monitor panes' sampling interval.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

pub fn run(plan: &Plan, color: bool) -> anyhow::Result<BenchReport> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(run_async(plan, color))
}

async fn run_async(plan: &Plan, color: bool) -> anyhow::Result<BenchReport> {
    let signals = event_loop::Signals::hook()?;
    runner::install_other_signal_handlers();
    let view = BenchView {
        target_line: view::target_line(&plan.target),
        total_jobs: plan.jobs.len(),
        runtime_s: plan.runtime.as_secs_f64(),
        engine: plan.engine.name().into(),
        scroll: usize::MAX,
        ..Default::default()
    };

    let (ev_tx, events) = mpsc::unbounded_channel::<Event>();
    let progress = Arc::new(Progress::default());
    let bench = {
        let (plan, progress) = (plan.clone(), progress.clone());
        thread::Builder::new().name("ioscope-bench".into()).spawn(move || {
            let mut send = |ev: Event| {
                let _ = ev_tx.send(ev);
            };
            runner::run(&plan, &STOP, &progress, &mut send)
        })?
    };
    let (sample_tx, samples) = mpsc::channel::<Sample>(2);
    spawn_sampler(sample_tx)?;

    let mut screen = BenchScreen {
        view,
        ui: UiState::new(SAMPLE_EVERY, color),
        events,
        events_open: true,
        samples,
        progress,
        stream: Stream::new(),
        model: None,
        job_started: Instant::now(),
    };
    let looped = event_loop::run(signals, &mut screen).await;
    if looped.is_err() {
        // The screen failed: the run stops (its test file is removed) before the error is told.
        STOP.store(true, Ordering::SeqCst);
    }
    let report = match bench.join() {
        Ok(r) => r,
        Err(_) => anyhow::bail!("the benchmark thread panicked (its test file was removed)"),
    };
    looped?;
    report
}

/// The bench screen: the runner's events and the monitor's samples.
struct BenchScreen {
    view: BenchView,
    ui: UiState,
    events: mpsc::UnboundedReceiver<Event>,
    events_open: bool,
    samples: mpsc::Receiver<Sample>,
    progress: Arc<Progress>,
    stream: Stream,
    model: Option<Model>,
    job_started: Instant,
}

impl BenchScreen {
    fn stop(&mut self) {
        STOP.store(true, Ordering::SeqCst);
        self.view.stopping = true;
    }
}

impl Screen for BenchScreen {
    fn tick(&self) -> Duration {
        TICK
    }

    async fn next(&mut self) -> anyhow::Result<Step> {
        let view = &mut self.view;
        tokio::select! {
            ev = self.events.recv(), if self.events_open => match ev {
                Some(Event::Note(n)) => view.notes.push(n),
                Some(Event::Layout { done, total }) => view.layout = Some((done, total)),
                Some(Event::JobStarted { index, spec }) => {
                    self.job_started = Instant::now();
                    view.running = Some(Running { index, spec, elapsed_s: 0.0, ops: 0, bytes: 0 });
                }
                Some(Event::JobDone { result, .. }) => {
                    view.running = None;
                    view.results.push(*result);
                }
                // The runner finished (or failed): its thread is done.
                None => {
                    self.events_open = false;
                    view.finished = true;
                    view.running = None;
                }
            },
            s = self.samples.recv() => if let Some(cur) = s {
                self.model = Some(self.stream.advance(cur));
            },
        }
        Ok(Step::Redraw)
    }

    fn key(&mut self, k: KeyEvent, _height: u16) -> anyhow::Result<Step> {
        if k.kind == KeyEventKind::Release {
            return Ok(Step::Idle);
        }
        let view = &mut self.view;
        let ctrl_c = k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
        match k.code {
            _ if ctrl_c || matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) => {
                if view.finished {
                    return Ok(Step::Quit);
                }
                self.stop();
            }
            KeyCode::Up | KeyCode::Char('k') => {
                view.scroll = view.scroll.min(view.results.len() * 2).saturating_sub(1);
            }
            KeyCode::Down | KeyCode::Char('j') => view.scroll = view.scroll.saturating_add(1),
            KeyCode::End | KeyCode::Char('G') => view.scroll = usize::MAX,
            KeyCode::Home | KeyCode::Char('g') => view.scroll = 0,
            _ => {}
        }
        Ok(Step::Redraw)
    }

    fn interrupt(&mut self) -> Step {
        self.stop();
        Step::Redraw
    }

    fn input_closed(&mut self) -> Step {
        STOP.store(true, Ordering::SeqCst);
        if self.view.finished {
            Step::Quit
        } else {
            Step::Redraw
        }
    }

    fn settle(&mut self) -> anyhow::Result<Step> {
        if let Some(r) = &mut self.view.running {
            r.elapsed_s = self.job_started.elapsed().as_secs_f64();
            r.ops = self.progress.ops.load(Ordering::Relaxed);
            r.bytes = self.progress.bytes.load(Ordering::Relaxed);
        }
        if runner::SIGNALLED.load(Ordering::SeqCst) {
            self.view.stopping = true;
        }
        // A signal (not a key) ends the program once the runner has cleaned up.
        if self.view.finished && self.view.stopping {
            return Ok(Step::Quit);
        }
        Ok(Step::Redraw)
    }

    fn draw(&mut self, frame: &mut Frame) {
        view::draw(frame, &self.view, self.model.as_ref(), &self.ui);
    }

    fn draw_failed(&mut self, e: std::io::Error) -> anyhow::Result<Step> {
        if e.raw_os_error() != Some(libc::EIO) {
            return Err(e.into());
        }
        // The terminal hung up: stop the run (the test file is removed) and end quietly.
        self.stop();
        Ok(Step::Idle)
    }
}

/// Samples the machine every second (on the sampling clock's deadlines) for the memory and devices
/// panes, with eBPF when allowed.
fn spawn_sampler(tx: mpsc::Sender<Sample>) -> anyhow::Result<()> {
    thread::Builder::new()
        .name("ioscope-sampler".into())
        .spawn(move || {
            let mut sampler = Sampler::new(SystemRoot::live(), BpfCollector::start());
            let mut clock = Clock::new(Instant::now(), SAMPLE_EVERY);
            loop {
                if tx.blocking_send(sampler.sample()).is_err() {
                    return;
                }
                let deadline = clock.next(Instant::now());
                thread::sleep(deadline.saturating_duration_since(Instant::now()));
                clock.tick();
            }
        })
        .context("starting the sampling thread")?;
    Ok(())
}
