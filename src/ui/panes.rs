//! The stacked panes (memory, devices, processes, page cache): their own state and keys. Their
//! keys keep working under the other views (the device detail follows the devices' selection).

use crossterm::event::KeyCode;

use crate::ui::state::{toggle, Action, Pane, UiState};

/// Which pane has the focus, and whether it fills the body (`z`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PanesView {
    pub focus: Pane,
    pub zoomed: bool,
}

/// The panes' keys: focus (Tab, 1-4), zoom, the focused table's selection and sort, and the
/// tables' options (`d`, `a`, `P`, `i`).
pub fn handle_key(state: &mut UiState, code: KeyCode) -> Action {
    match code {
        KeyCode::Tab => focus(state, state.views.panes.focus.next()),
        KeyCode::BackTab => focus(state, state.views.panes.focus.previous()),
        KeyCode::Char('1') => focus(state, Pane::Memory),
        KeyCode::Char('2') => focus(state, Pane::Devices),
        KeyCode::Char('3') => focus(state, Pane::Processes),
        KeyCode::Char('4') => focus(state, Pane::PageCache),
        KeyCode::Char('z') => toggle(&mut state.views.panes.zoomed),
        KeyCode::Char('s') if state.views.panes.focus == Pane::PageCache => {
            state.views.page_cache.sort.next_column();
            Action::Redraw
        }
        KeyCode::Char('r') if state.views.panes.focus == Pane::PageCache => {
            state.views.page_cache.sort.reverse();
            Action::Redraw
        }
        KeyCode::Char('s') => {
            state.views.processes.next_sort();
            Action::Redraw
        }
        KeyCode::Char('r') => toggle(&mut state.views.processes.reversed),
        KeyCode::Char('d') => {
            state.views.processes.io_view = !state.views.processes.io_view;
            state.views.processes.selection.reset();
            state.views.processes.reversed = false;
            Action::Redraw
        }
        KeyCode::Char('a') => toggle(&mut state.views.processes.show_all),
        KeyCode::Char('P') => toggle(&mut state.views.devices.show_partitions),
        KeyCode::Char('i') => toggle(&mut state.views.devices.show_idle_virtual),
        code => match crate::ui::table::step_of(code) {
            Some(by) => move_selection(state, by),
            None => Action::None,
        },
    }
}

fn focus(state: &mut UiState, pane: Pane) -> Action {
    state.views.panes.focus = pane;
    Action::Redraw
}

/// Moves the focused table's selection (the memory pane has none).
fn move_selection(state: &mut UiState, by: i64) -> Action {
    let selection = match state.views.panes.focus {
        Pane::Devices => &mut state.views.devices.selection,
        Pane::Processes => &mut state.views.processes.selection,
        Pane::PageCache => &mut state.views.page_cache.selection,
        Pane::Memory => return Action::None,
    };
    selection.step(by);
    Action::Redraw
}
