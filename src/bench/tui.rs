//! The bench's interactive front end: the runner works on its own thread; one tokio `select!` loop
//! owns the screen and hears the runner's events, the monitor's samples (for the memory and devices
//! panes), keys, ticks and signals. q or Ctrl-C stops the run (the test file is removed, the
//! results so far are kept); once finished, q quits. The terminal is restored on every path.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossterm::event::{Event as TermEvent, EventStream, KeyCode, KeyEventKind, KeyModifiers};
use futures_util::StreamExt;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use super::engine::Progress;
use super::runner::{self, BenchReport, Event, Plan, STOP};
use super::view::{self, BenchView, Running};
use crate::bpf::BpfCollector;
use crate::collect::{Sampler, SystemRoot};
use crate::model::Model;
use crate::sample::Sample;
use crate::ui::terminal::TerminalGuard;
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
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut sighup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    runner::install_other_signal_handlers();
    let ui = UiState::new(SAMPLE_EVERY, color);
    let mut view = BenchView {
        target_line: view::target_line(&plan.target),
        total_jobs: plan.jobs.len(),
        runtime_s: plan.runtime.as_secs_f64(),
        engine: plan.engine.name().into(),
        scroll: usize::MAX,
        ..Default::default()
    };

    let (ev_tx, mut events) = mpsc::unbounded_channel::<Event>();
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
    let (sample_tx, mut samples) = mpsc::channel::<Sample>(2);
    spawn_sampler(sample_tx)?;

    let mut guard = TerminalGuard::enter().context("setting up the terminal")?;
    let mut term_events = EventStream::new();
    let mut tick = tokio::time::interval(TICK);
    let mut prev: Option<Sample> = None;
    let mut model: Option<Model> = None;
    let mut job_started = Instant::now();
    let mut events_open = true;
    loop {
        tokio::select! {
            ev = events.recv(), if events_open => match ev {
                Some(Event::Note(n)) => view.notes.push(n),
                Some(Event::Layout { done, total }) => view.layout = Some((done, total)),
                Some(Event::JobStarted { index, spec }) => {
                    job_started = Instant::now();
                    view.running = Some(Running { index, spec, elapsed_s: 0.0, ops: 0, bytes: 0 });
                }
                Some(Event::JobDone { result, .. }) => {
                    view.running = None;
                    view.results.push(*result);
                }
                // The runner finished (or failed): its thread is done.
                None => {
                    events_open = false;
                    view.finished = true;
                    view.running = None;
                }
            },
            s = samples.recv() => if let Some(cur) = s {
                model = Some(match &prev {
                    Some(p) => Model::between(p, &cur),
                    None => Model::compute(None, &cur, Duration::ZERO),
                });
                prev = Some(cur);
            },
            key = term_events.next() => match key {
                Some(Ok(TermEvent::Key(k))) if k.kind != KeyEventKind::Release => {
                    let ctrl_c = k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                    match k.code {
                        _ if ctrl_c || matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) => {
                            if view.finished {
                                break;
                            }
                            STOP.store(true, Ordering::SeqCst);
                            view.stopping = true;
                        }
                        KeyCode::Up | KeyCode::Char('k') => {
                            view.scroll = view.scroll.min(view.results.len() * 2).saturating_sub(1);
                        }
                        KeyCode::Down | KeyCode::Char('j') => view.scroll = view.scroll.saturating_add(1),
                        KeyCode::End | KeyCode::Char('G') => view.scroll = usize::MAX,
                        KeyCode::Home | KeyCode::Char('g') => view.scroll = 0,
                        _ => {}
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e).context("reading terminal input"),
                None => {
                    STOP.store(true, Ordering::SeqCst);
                    if view.finished {
                        break;
                    }
                }
            },
            _ = tick.tick() => {}
            _ = sigint.recv() => { STOP.store(true, Ordering::SeqCst); view.stopping = true; }
            _ = sigterm.recv() => { STOP.store(true, Ordering::SeqCst); view.stopping = true; }
            _ = sighup.recv() => { STOP.store(true, Ordering::SeqCst); view.stopping = true; }
        }
        if let Some(r) = &mut view.running {
            r.elapsed_s = job_started.elapsed().as_secs_f64();
            r.ops = progress.ops.load(Ordering::Relaxed);
            r.bytes = progress.bytes.load(Ordering::Relaxed);
        }
        if runner::SIGNALLED.load(Ordering::SeqCst) {
            view.stopping = true;
        }
        // A signal (not a key) ends the program once the runner has cleaned up.
        if view.finished && view.stopping {
            break;
        }
        guard.terminal.draw(|f| view::draw(f, &view, model.as_ref(), &ui))?;
    }
    drop(guard);
    match bench.join() {
        Ok(r) => r,
        Err(_) => anyhow::bail!("the benchmark thread panicked (its test file was removed)"),
    }
}

/// Samples the machine every second for the memory and devices panes, with eBPF when allowed.
fn spawn_sampler(tx: mpsc::Sender<Sample>) -> anyhow::Result<()> {
    thread::Builder::new()
        .name("ioscope-sampler".into())
        .spawn(move || {
            let mut sampler = Sampler::new(SystemRoot::live(), BpfCollector::start());
            loop {
                let t = Instant::now();
                if tx.blocking_send(sampler.sample()).is_err() {
                    return;
                }
                thread::sleep(SAMPLE_EVERY.saturating_sub(t.elapsed()));
            }
        })
        .context("starting the sampling thread")?;
    Ok(())
}
