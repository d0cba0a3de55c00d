//! Entering and leaving the full-screen terminal mode. The terminal must come back on every path:
//! normal quit and errors (the guard's Drop), panics (a hook that restores first, then lets the
//! previous hook print the message on a usable terminal), and signals (the event loop quits).
//! Job control as top and htop do it: Ctrl-Z (a key in raw mode) and SIGTSTP give the terminal
//! back and stop; SIGCONT (`fg`) re-enters raw mode and the alternate screen and redraws. A process
//! continued in the background (SIGCONT without `fg`) leaves the terminal to the shell, so a
//! later SIGTERM ends it instead of stopping it again on SIGTTOU.
//!
//! Nothing here asks the terminal anything (no cursor-position or other query): the event reader
//! owns stdin, so an answer would go to it, and the question would time out ("The cursor
//! position could not be read within a normal duration") and end the program. The full-screen
//! viewport never needs the cursor's position: the redraw after `fg` clears the whole screen and
//! forgets what was drawn, so the next frame is written whole.

use std::io::{self, Stdout};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use crossterm::cursor::Show;
use crossterm::execute;
use crossterm::terminal::{disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

/// True while raw mode and the alternate screen are on, so restoring twice is harmless.
static ACTIVE: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

/// Raw mode + alternate screen for as long as it lives.
pub struct TerminalGuard {
    /// Dropped by hand: ratatui's own Drop prints "Failed to show the cursor" on stderr when the
    /// terminal is gone (a hangup), which nobody can act on.
    pub terminal: std::mem::ManuallyDrop<Terminal<CrosstermBackend<Stdout>>>,
}

impl TerminalGuard {
    pub fn enter() -> io::Result<TerminalGuard> {
        install_panic_hook();
        enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        if let Err(e) = execute!(io::stdout(), EnterAlternateScreen) {
            restore();
            return Err(e);
        }
        match Terminal::new(CrosstermBackend::new(io::stdout())) {
            Ok(terminal) => Ok(TerminalGuard { terminal: std::mem::ManuallyDrop::new(terminal) }),
            Err(e) => {
                restore();
                Err(e)
            }
        }
    }
}

impl TerminalGuard {
    /// Ctrl-Z or SIGTSTP: restores the terminal, stops the process (SIGSTOP: SIGTSTP itself is
    /// handled), and once continued re-enters the full screen.
    pub fn suspend(&mut self) -> io::Result<()> {
        restore();
        // SAFETY: stopping ourselves; execution resumes here on SIGCONT.
        unsafe { libc::raise(libc::SIGSTOP) };
        self.resume()
    }

    /// After SIGCONT: raw mode and the alternate screen again, and a full redraw at the next draw
    /// (the shell reset the terminal when the job stopped). Nothing while in the background.
    ///
    /// Not ratatui's `Terminal::clear`, which reads the cursor position from the terminal (see the
    /// module comment): `resize` to the current size (an ioctl) clears the whole screen and resets
    /// the previous frame without asking, so the next draw writes every cell.
    pub fn resume(&mut self) -> io::Result<()> {
        if !foreground() {
            return Ok(());
        }
        enable_raw_mode()?;
        if !ACTIVE.swap(true, Ordering::SeqCst) {
            execute!(io::stdout(), EnterAlternateScreen)?;
        }
        let size = self.terminal.size()?;
        self.terminal.resize(ratatui::layout::Rect::new(0, 0, size.width, size.height))
    }
}

/// True when this process's group owns the terminal (not a background job).
fn foreground() -> bool {
    // SAFETY: tcgetpgrp and getpgrp only read.
    unsafe { libc::tcgetpgrp(libc::STDOUT_FILENO) == libc::getpgrp() }
}

/// Ctrl-Z: in raw mode the terminal sends it as a key instead of a SIGTSTP.
pub fn is_suspend_key(key: &crossterm::event::KeyEvent) -> bool {
    use crossterm::event::{KeyCode, KeyEventKind, KeyModifiers};
    key.kind != KeyEventKind::Release
        && key.code == KeyCode::Char('z')
        && key.modifiers.contains(KeyModifiers::CONTROL)
}

/// SIGTSTP and SIGCONT for an event loop's `select!` (see [`TerminalGuard::suspend`] and
/// [`TerminalGuard::resume`]).
pub struct JobControl {
    pub tstp: tokio::signal::unix::Signal,
    pub cont: tokio::signal::unix::Signal,
}

impl JobControl {
    pub fn new() -> io::Result<JobControl> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(JobControl {
            tstp: signal(SignalKind::from_raw(libc::SIGTSTP))?,
            cont: signal(SignalKind::from_raw(libc::SIGCONT))?,
        })
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
        // With the cursor shown, ratatui's Drop has nothing left to do or to complain about; when
        // it cannot be shown (the terminal hung up), the terminal is left undropped: the process
        // is ending.
        if self.terminal.show_cursor().is_ok() {
            // SAFETY: dropped once, here; the field is never used again.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.terminal) };
        }
    }
}

/// Leaves the alternate screen, shows the cursor and turns raw mode off, once.
/// In the background (continued without `fg`), the shell owns the terminal and already restored
/// it: nothing is written, which would stop the process on SIGTTOU.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) && foreground() {
        // Best effort: there is nobody left to report a failure to.
        let _ = execute!(io::stdout(), LeaveAlternateScreen, Show);
        let _ = disable_raw_mode();
    }
}

fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}
