//! The terminal UI: a pure render of `&Model` plus [`UiState`]. Nothing here reads the system or the
//! terminal; the event loop in [`crate::app`] owns both and calls [`draw`].
//!
//! Layout: two header lines, then the memory, devices and process panes stacked. Width is used by
//! the tables (they drop their least important columns first, so 80x24 stays readable and 200
//! columns show everything) and by the sparklines; height by taller sparklines and more rows.
//! `z` gives the focused pane the whole body.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::widgets::Block;
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
pub mod probe_health;
pub mod processes;
pub mod readahead;
pub mod stack;
pub mod state;
pub mod syncs;
pub mod table;
pub mod terminal;
pub mod theme;
pub mod view;
pub mod waits;

pub use format::Units;
pub use history::History;
pub use processes::ProcSort;
pub use stack::Pane;
pub use state::{Action, Body, Overlay, UiState};
use view::{draw_block, pane_block, Context, View};

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
    header::render(frame, header_area, model, &state.status());
    let ctx = Context { screen: area, ..state.context(model) };
    let views = &state.views;
    let full: Option<&dyn View> = match state.body {
        Body::Files => Some(&views.files),
        Body::Syncs => Some(&views.syncs),
        Body::Waits => Some(&views.waits),
        Body::Readahead => Some(&views.readahead),
        Body::Cgroups => Some(&views.cgroups),
        Body::ProbeHealth => Some(&views.probe_health),
        Body::DeviceDetail | Body::Stack => None,
    };
    if let Some(view) = full {
        view.render(frame, body, &ctx.with_focus(true));
    } else if state.body == Body::DeviceDetail {
        // Its submitters are sorted like the eBPF process table.
        let detail = device_detail::DeviceDetailView { submitters: views.io_processes.sort };
        detail.render(frame, body, &ctx.with_focus(true));
    } else if views.stack.zoomed {
        render_pane(frame, body, views.stack.focus, &ctx, state);
    } else {
        draw_stack(frame, body, &ctx, state);
    }
    if state.shows(Overlay::Help) {
        help::render(frame, area, Some(model), ctx.theme, state.replay, &views.help);
    }
}

/// Draws the screen shown before the first sample has arrived.
pub fn draw_starting(frame: &mut Frame, state: &UiState) {
    let area = frame.area();
    let [header_area, _] =
        Layout::vertical([Constraint::Length(header::HEIGHT), Constraint::Fill(1)]).areas(area);
    let theme = theme::Theme { color: state.color };
    header::render_starting(frame, header_area, theme);
    if state.shows(Overlay::Help) {
        help::render(frame, area, None, theme, state.replay, &state.views.help);
    }
}

/// The devices pane's height in the stack (rule and header included), from the body's height
/// alone: devices coming and going (idle loop devices) never move the panes below; more devices
/// than rows scroll ("▼ N more").
pub fn devices_height(body_height: u16) -> u16 {
    2 + (body_height / 8).clamp(3, devices::MAX_SHARED_ROWS)
}

fn draw_stack(frame: &mut Frame, body: Rect, ctx: &Context, state: &UiState) {
    let mut mem_h = state.views.memory.wanted_height(ctx, body.width);
    let mut dev_h = devices_height(body.height);
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
    render_pane(frame, mem, Pane::Memory, ctx, state);
    render_pane(frame, dev, Pane::Devices, ctx, state);
    // Processes and page cache share the rest: both when there is room for two, else the one
    // that has the focus (processes by default; `4` shows the cache).
    if procs.height >= 2 * MIN_PROCESS_HEIGHT + 2 {
        let [p, c] = Layout::vertical([Constraint::Fill(1); 2]).areas(procs);
        render_pane(frame, p, Pane::Processes, ctx, state);
        render_pane(frame, c, Pane::PageCache, ctx, state);
    } else if state.views.stack.focus == Pane::PageCache {
        render_pane(frame, procs, Pane::PageCache, ctx, state);
    } else {
        render_pane(frame, procs, Pane::Processes, ctx, state);
    }
}

/// One pane of the stack: its rule with its key and title, then its view (or its deltas against
/// the baseline).
fn render_pane(frame: &mut Frame, area: Rect, pane: Pane, ctx: &Context, state: &UiState) {
    let ctx = ctx.with_focus(state.views.stack.focus == pane);
    let view = state.pane_view(pane);
    let title = view.title(&ctx);
    if let Some(base) = &state.baseline {
        let title = baseline::title(&title, base, state.utc_offset_s);
        let inner = draw_block(frame, area, pane_block(pane.key(), &title, ctx.focused, ctx.theme));
        return baseline::render(frame, inner, pane.compare_groups(), ctx.model, base, ctx.theme);
    }
    let inner = draw_block(frame, area, pane_block(pane.key(), &title, ctx.focused, ctx.theme));
    view.render(frame, inner, &ctx);
}

/// A pane of the stack drawn alone in `area` under a rule of its own (`ioscope bench` shows the
/// memory and devices panes beside its runs): its height at `width` is [`pane_height`].
pub fn draw_pane(frame: &mut Frame, area: Rect, pane: Pane, block: Block, model: &Model, state: &UiState) {
    let ctx = state.context(model).with_focus(state.views.stack.focus == pane);
    let inner = draw_block(frame, area, block);
    state.pane_view(pane).render(frame, inner, &ctx);
}

/// The rows the memory or devices pane asks for at `width` (0 for the others, which take what is
/// left), rule included.
pub fn pane_height(pane: Pane, model: &Model, state: &UiState, width: u16) -> u16 {
    match pane {
        Pane::Memory => state.views.memory.wanted_height(&state.context(model), width),
        Pane::Devices => state.views.devices.wanted_height(model),
        Pane::Processes | Pane::PageCache => 0,
    }
}

/// The title of a pane of the stack, as its rule shows it.
pub fn pane_title(pane: Pane, model: &Model, state: &UiState) -> String {
    state.pane_view(pane).title(&state.context(model))
}
