//! The one event loop of every full-screen mode (live, replay, compare, bench): a tokio `select!`
//! over terminal input, the screen's own source of news (samples, playback, a benchmark's runner),
//! a redraw tick, the quit signals and job control. The terminal guard, resize, Ctrl-Z /
//! SIGTSTP / SIGCONT and the quit signals are handled here once; what a key, a piece of news or a
//! signal means is the [`Screen`]'s business. The terminal is restored on every exit path (the
//! guard's Drop; its panic hook).

use std::future::Future;
use std::time::Duration;

use anyhow::Context;
use crossterm::event::{Event, EventStream, KeyEvent};
use futures_util::StreamExt;
use ratatui::Frame;
use tokio::signal::unix::{signal, SignalKind};

use crate::ui::terminal::{is_suspend_key, JobControl, TerminalGuard};

/// What the loop does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing to show.
    Idle,
    /// Draw the screen again.
    Redraw,
    /// Leave the loop (the terminal is restored).
    Quit,
}

impl Step {
    /// The more pressing of two steps.
    fn and(self, other: Step) -> Step {
        match (self, other) {
            (Step::Quit, _) | (_, Step::Quit) => Step::Quit,
            (Step::Redraw, _) | (_, Step::Redraw) => Step::Redraw,
            _ => Step::Idle,
        }
    }
}

/// One full-screen mode over its source of models.
pub trait Screen {
    /// The longest time between two draws (a clock, live rates, a lost resize).
    fn tick(&self) -> Duration;

    /// Waits for the source's next news (a sample, the playback's next position, a runner
    /// event) and takes it in. Must be cancel-safe: a key or a tick may come first.
    fn next(&mut self) -> impl Future<Output = anyhow::Result<Step>>;

    /// A key press (Ctrl-Z excepted: the loop suspends); `height` is the terminal's.
    fn key(&mut self, key: KeyEvent, height: u16) -> anyhow::Result<Step>;

    /// Draws the whole screen.
    fn draw(&mut self, frame: &mut Frame);

    /// After every event (key, news, tick, signal): brings the screen up to date (e.g. the
    /// playback's position) and has a last word on the step.
    fn settle(&mut self) -> anyhow::Result<Step> {
        Ok(Step::Idle)
    }

    /// SIGINT, SIGTERM or SIGHUP: quit, unless the screen must clean up first.
    fn interrupt(&mut self) -> Step {
        Step::Quit
    }

    /// The terminal's input is gone: nothing more can be asked of us.
    fn input_closed(&mut self) -> Step {
        Step::Quit
    }

    /// Drawing failed (e.g. the terminal hung up): an error ends the loop, unless the screen
    /// copes.
    fn draw_failed(&mut self, e: std::io::Error) -> anyhow::Result<Step> {
        Err(e.into())
    }
}

/// What woke the loop.
enum Wake {
    Input(Option<std::io::Result<Event>>),
    News(anyhow::Result<Step>),
    Tick,
    Interrupt,
    Stop,
    Continue,
}

/// The signals the loop hears: installed first, before the terminal changes or any thread starts
/// work that a signal must be able to stop cleanly (a failure here leaves everything untouched).
pub struct Signals {
    sigint: tokio::signal::unix::Signal,
    sigterm: tokio::signal::unix::Signal,
    sighup: tokio::signal::unix::Signal,
    job: JobControl,
}

impl Signals {
    /// Needs a tokio runtime.
    pub fn hook() -> anyhow::Result<Signals> {
        Ok(Signals {
            sigint: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
            sigterm: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
            sighup: signal(SignalKind::hangup()).context("installing the SIGHUP handler")?,
            job: JobControl::new().context("installing the SIGTSTP/SIGCONT handlers")?,
        })
    }
}

/// Runs `screen` full-screen until it quits.
pub async fn run<S: Screen>(signals: Signals, screen: &mut S) -> anyhow::Result<()> {
    let Signals { mut sigint, mut sigterm, mut sighup, mut job } = signals;
    let mut guard = TerminalGuard::enter().context("setting up the terminal (is stdout a terminal?)")?;
    let mut events = EventStream::new();
    let mut tick = tokio::time::interval(screen.tick());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // First frame at once: the user sees ioscope is alive.
    let mut step = Step::Redraw;
    loop {
        if step == Step::Redraw {
            let drawn = guard.terminal.draw(|f| {
                screen.draw(f);
                crate::ui::scrub(f.buffer_mut());
            });
            if let Err(e) = drawn {
                step = screen.draw_failed(e)?.and(screen.settle()?);
                if step == Step::Quit {
                    break;
                }
            }
        }
        let wake = tokio::select! {
            event = events.next() => Wake::Input(event),
            news = screen.next() => Wake::News(news),
            _ = tick.tick() => Wake::Tick,
            _ = sigint.recv() => Wake::Interrupt,
            _ = sigterm.recv() => Wake::Interrupt,
            _ = sighup.recv() => Wake::Interrupt,
            _ = job.tstp.recv() => Wake::Stop,
            _ = job.cont.recv() => Wake::Continue,
        };
        step = match wake {
            Wake::Input(Some(Ok(Event::Key(key)))) if is_suspend_key(&key) => {
                guard.suspend()?;
                Step::Redraw
            }
            Wake::Input(Some(Ok(Event::Key(key)))) => {
                let height = guard.terminal.size()?.height;
                screen.key(key, height)?
            }
            Wake::Input(Some(Ok(Event::Resize(..)))) => Step::Redraw,
            Wake::Input(Some(Ok(_))) => Step::Idle,
            Wake::Input(Some(Err(e))) => return Err(e).context("reading terminal input"),
            Wake::Input(None) => screen.input_closed(),
            Wake::News(news) => news?,
            Wake::Tick => Step::Redraw,
            Wake::Interrupt => screen.interrupt(),
            Wake::Stop => {
                guard.suspend()?;
                Step::Redraw
            }
            Wake::Continue => {
                guard.resume()?;
                Step::Redraw
            }
        }
        .and(screen.settle()?);
        if step == Step::Quit {
            break;
        }
    }
    drop(guard);
    Ok(())
}
