//! The view tests' screen: a model and a UI state drawn on a test terminal, read back as text.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent};
use ioscope::model::Model;
use ioscope::sample::BpfProgramStatus;
use ioscope::ui::{self, UiState};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

/// A 1 s refresh UI state in colour, with `history` in its sparklines.
pub fn state(history: &[Model]) -> UiState {
    let mut s = UiState::new(Duration::from_secs(1), true);
    for m in history {
        s.history.push(m);
    }
    s
}

/// `model` drawn with `state` on a `w`×`h` test terminal.
pub fn terminal(model: &Model, state: &UiState, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, model, state)).unwrap();
    t
}

/// The text of [`terminal`]'s screen.
pub fn screen(model: &Model, state: &UiState, w: u16, h: u16) -> String {
    terminal(model, state, w, h).backend().to_string()
}

/// One key press, no modifiers.
pub fn press(s: &mut UiState, code: KeyCode) {
    s.handle_key(KeyEvent::from(code));
}

/// The status of the program on tracepoint `tp` ("block:block_io_start"): attached, or not with
/// `error`.
pub fn program(tp: &str, error: Option<&str>) -> BpfProgramStatus {
    BpfProgramStatus {
        program: tp.replace(':', "_"),
        tracepoint: tp.into(),
        attached: error.is_none(),
        error: error.map(str::to_string),
        ..Default::default()
    }
}
