//! The terminal UI: a pure render of `&Model` plus [`UiState`]. Nothing here reads the system or the
//! terminal; the event loop in [`crate::app`] owns both and calls [`draw`].
//!
//! Layout: two header lines, then the memory, devices and process panes stacked. Width is used by
//! the tables (they drop their least important columns first, so 80x24 stays readable and 200
//! columns show everything) and by the sparklines; height by taller sparklines and more rows.
//! `z` gives the focused pane the whole body.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders};
use ratatui::Frame;

use crate::model::Model;

pub mod baseline;
pub mod cgroups;
pub mod columns;
pub mod device_detail;
pub mod devices;
pub mod event_loop;
pub mod files;
pub mod format;
pub mod header;
pub mod help;
pub mod history;
pub mod io_processes;
pub mod iowait;
pub mod line_input;
pub mod memory;
pub mod page_cache;
pub mod panes;
pub mod probe_health;
pub mod processes;
pub mod readahead;
pub mod rows;
pub mod state;
pub mod syncs;
pub mod table;
pub mod terminal;
pub mod theme;

pub use format::Units;
pub use history::History;
pub use state::{Action, Body, Overlay, Pane, ProcSort, UiState};
use theme::Theme;

/// Fewest process rows (title and header included) the stacked layout leaves.
const MIN_PROCESS_HEIGHT: u16 = 5;
/// Extra rows the memory pane takes for taller sparklines when the screen has height to spare.
const SPARKLINE_EXTRA: u16 = 4;

/// Draws a whole screen for `model`.
pub fn draw(frame: &mut Frame, model: &Model, state: &UiState) {
    draw_in(frame, frame.area(), model, state);
}

/// The net under every view's escaping of names ([`crate::untrusted`]): a cell that still holds a
/// control character or a bidi override gets `?` in its place, as `ps` shows such a name. The
/// event loop runs it after each mode's draw; ratatui already drops C0 and C1 controls, not the
/// zero-width bidi overrides, which it appends to the cell before.
pub fn scrub(buf: &mut ratatui::buffer::Buffer) {
    for cell in &mut buf.content {
        if cell.symbol().chars().any(crate::untrusted::needs_escape) {
            cell.set_symbol("?");
        }
    }
}

/// Draws the whole screen for `model` within `area` (replay keeps a line for its timeline).
pub fn draw_in(frame: &mut Frame, area: Rect, model: &Model, state: &UiState) {
    let [header_area, body] =
        Layout::vertical([Constraint::Length(header::HEIGHT), Constraint::Fill(1)]).areas(area);
    header::render(frame, header_area, model, state);
    match state.body {
        Body::Files => {
            let title = files::title(model, state);
            let block = pane_block('f', &title, true, state);
            files::render(frame, body, model, state, block);
        }
        Body::Syncs => syncs::render(frame, body, model, state),
        Body::Readahead => readahead::render(frame, body, model, state),
        Body::Cgroups => cgroups::render(frame, body, model, state),
        Body::ProbeHealth => probe_health::render(frame, body, model, state),
        Body::DeviceDetail => device_detail::render(frame, body, model, state),
        Body::Panes if state.views.panes.zoomed => {
            render_pane(frame, body, state.views.panes.focus, model, state)
        }
        Body::Panes => draw_stacked(frame, body, model, state),
    }
    if state.shows(Overlay::Help) {
        help::render(frame, area, Some(model), state);
    }
}

/// Draws the screen shown before the first sample has arrived.
pub fn draw_starting(frame: &mut Frame, state: &UiState) {
    let area = frame.area();
    let [header_area, _] =
        Layout::vertical([Constraint::Length(header::HEIGHT), Constraint::Fill(1)]).areas(area);
    header::render_starting(frame, header_area, state);
    if state.shows(Overlay::Help) {
        help::render(frame, area, None, state);
    }
}

fn draw_stacked(frame: &mut Frame, body: Rect, model: &Model, state: &UiState) {
    let mut mem_h = memory::wanted_height(model, state, body.width);
    let mut dev_h = devices::wanted_height(model, state);
    if state.baseline.is_some() {
        // Deltas are a metric per row: a device has a dozen, so give them room.
        dev_h = dev_h.max(body.height / 3);
    }
    // Squeeze devices to one row, then memory, before the process pane goes below its minimum.
    let over = |m: u16, d: u16| (m + d + MIN_PROCESS_HEIGHT).saturating_sub(body.height);
    dev_h -= over(mem_h, dev_h).min(dev_h.saturating_sub(3));
    mem_h -= over(mem_h, dev_h).min(mem_h.saturating_sub(2));
    // A tall screen: taller sparklines, as long as the processes keep plenty of room.
    if body.height.saturating_sub(mem_h + dev_h) > 4 * MIN_PROCESS_HEIGHT {
        mem_h += SPARKLINE_EXTRA;
    }
    let [mem, dev, procs] =
        Layout::vertical([Constraint::Length(mem_h), Constraint::Length(dev_h), Constraint::Fill(1)])
            .areas(body);
    render_pane(frame, mem, Pane::Memory, model, state);
    render_pane(frame, dev, Pane::Devices, model, state);
    // Processes and page cache share the rest: both when there is room for two, else the one
    // that has the focus (processes by default; `4` shows the cache).
    if procs.height >= 2 * MIN_PROCESS_HEIGHT + 2 {
        let [p, c] = Layout::vertical([Constraint::Fill(1); 2]).areas(procs);
        render_pane(frame, p, Pane::Processes, model, state);
        render_pane(frame, c, Pane::PageCache, model, state);
    } else if state.views.panes.focus == Pane::PageCache {
        render_pane(frame, procs, Pane::PageCache, model, state);
    } else {
        render_pane(frame, procs, Pane::Processes, model, state);
    }
}

fn render_pane(frame: &mut Frame, area: Rect, pane: Pane, model: &Model, state: &UiState) {
    let (key, title) = match pane {
        Pane::Memory => ('1', "Memory".to_string()),
        Pane::Devices => ('2', devices::title(model, state)),
        Pane::Processes if state.views.processes.io_view => ('3', io_processes::title(model, state)),
        Pane::Processes => ('3', processes::title(model, state)),
        Pane::PageCache => ('4', page_cache::title(model, state)),
    };
    if let Some(baseline) = &state.baseline {
        let title = baseline::title(&title, baseline, state);
        let block = pane_block(key, &title, state.views.panes.focus == pane, state);
        return baseline::render(frame, area, pane, model, baseline, state, block);
    }
    let block = pane_block(key, &title, state.views.panes.focus == pane, state);
    match pane {
        Pane::Memory => memory::render(frame, area, model, state, block),
        Pane::Devices => devices::render(frame, area, model, state, block),
        Pane::Processes if state.views.processes.io_view => {
            io_processes::render(frame, area, model, state, block)
        }
        Pane::Processes => processes::render(frame, area, model, state, block),
        Pane::PageCache => page_cache::render(frame, area, model, state, block),
    }
}

/// A top rule carrying the pane's title: its focus key, name and state. The focused pane is marked
/// with ▶ as well as by style, so focus shows without colour.
fn pane_block(key: char, title: &str, focused: bool, state: &UiState) -> Block<'static> {
    let theme = Theme { color: state.color };
    let marker = if focused { '▶' } else { ' ' };
    // Titles name devices, processes and cgroups.
    let title = &*crate::untrusted::escape(title);
    let name_end = title.find("  ").unwrap_or(title.len());
    let (name, rest) = title.split_at(name_end);
    Block::new().borders(Borders::TOP).border_style(theme.dim()).title(Line::from(vec![
        Span::styled(format!("{marker}{key} {name} "), theme.title(focused)),
        Span::styled(
            if rest.is_empty() { String::new() } else { format!(" {} ", rest.trim_start()) },
            theme.dim(),
        ),
    ]))
}
