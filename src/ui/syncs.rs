//! The sync-call view (`y`): fsync and friends per process, call and file, calls still running
//! first (with their age), then the slowest; and the memory pane's line for a call running longer
//! than a second. A pure render of the model's `syncs` part.

use crossterm::event::KeyCode;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use crate::model::syncs::{running_longer_than, SyncModel};
use crate::model::Model;
use crate::ui::format;
use crate::ui::state::{Action, UiState};
use crate::ui::theme::{Level, Theme};

/// A running call this old gets a line in the memory pane.
pub const LONG_CALL_S: f64 = 1.0;

/// The sync-call view's own state: the selected row (by pid, call and file).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SyncsView {
    pub selection: crate::ui::table::Selection,
}

/// The view's keys while it is on screen: Esc closes it and j/k/arrows/g/G select a row (`y`
/// opens and closes it).
pub fn handle_key(state: &mut UiState, code: KeyCode) -> Option<Action> {
    if crate::ui::rows::list_step(code).is_some() {
        state.views.syncs.selection.step_key(code);
        return Some(Action::Redraw);
    }
    match code {
        KeyCode::Esc => {
            state.close();
            Some(Action::Redraw)
        }
        _ => None,
    }
}

/// The identities of the rows, in order (what the selection follows).
pub fn row_keys(model: &Model) -> Vec<String> {
    model.syncs.iter().map(|r| format!("{}:{}:{}:{}", r.pid, r.syscall, r.dev, r.ino)).collect()
}

/// Seconds as "840 µs", "12 ms", "4.2 s".
pub fn secs(s: f64) -> String {
    if s <= 0.0 {
        "-".into()
    } else if s < 0.001 {
        format!("{:.0} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{s:.1} s")
    }
}

pub fn render(frame: &mut Frame, area: Rect, model: &Model, state: &UiState) {
    let theme = Theme { color: state.color };
    let u = state.units;
    let block = Block::new().borders(Borders::TOP).border_style(theme.dim()).title(Span::styled(
        "▶ Sync calls (fsync and friends, since ioscope started)  y/Esc back  ↑↓ row ",
        theme.title(true),
    ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let missing = ["syncs", "syncs_io_uring"]
        .iter()
        .filter_map(|p| crate::model::panes::not_live(&model.bpf.panes, p))
        .map(|p| format!("{}: {}", p.title, format::text(&p.needs())))
        .collect::<Vec<_>>();
    if model.syncs.is_empty() {
        let text = if !model.bpf.enabled {
            "eBPF is off: sync calls need the syscalls:sys_enter_/sys_exit_ tracepoints of fsync and friends (run as root)".to_string()
        } else if !missing.is_empty() {
            format!("No sync call seen. {}", missing.join("; "))
        } else {
            "No sync call (fsync, fdatasync, sync_file_range, msync, syncfs, sync, io_uring fsync) since ioscope started."
                .to_string()
        };
        frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), inner);
        return;
    }
    let [note_area, table_area] = ratatui::layout::Layout::vertical([
        Constraint::Length(u16::from(!missing.is_empty())),
        Constraint::Fill(1),
    ])
    .areas(inner);
    if !missing.is_empty() {
        frame.render_widget(Paragraph::new(Span::styled(missing.join("; "), theme.dim())), note_area);
    }
    let header = Row::new([
        "PID",
        "COMM",
        "CALL",
        "CALLS",
        "RUNNING",
        "MEAN",
        "P99",
        "MAX",
        "WRITTEN",
        "OTHERS THR",
        "FILE",
    ])
    .style(theme.table_header());
    let visible = table_area.height.saturating_sub(1) as usize;
    let selected = state.views.syncs.selection.index().min(model.syncs.len().saturating_sub(1));
    let first = selected.saturating_sub(visible.saturating_sub(1));
    let rows: Vec<Row> = model
        .syncs
        .iter()
        .enumerate()
        .skip(first)
        .take(visible)
        .map(|(i, r)| {
            let running = if r.running > 0 {
                let n = if r.running > 1 { format!("{}× ", r.running) } else { String::new() };
                Span::styled(
                    format!("{n}{}", secs(r.running_s)),
                    theme.level(Level::of(r.running_s, LONG_CALL_S, 10.0 * LONG_CALL_S)),
                )
            } else {
                Span::styled("-", theme.dim())
            };
            let row = Row::new(vec![
                Span::raw(r.pid.to_string()),
                Span::raw(format::text(&r.comm)),
                Span::raw(format::text(&r.syscall)),
                Span::raw(r.calls.to_string()),
                running,
                Span::raw(secs(r.mean_s)),
                Span::raw(secs(r.p99_s)),
                Span::styled(secs(r.max_s), theme.level(Level::of(r.max_s, 0.1, LONG_CALL_S))),
                Span::raw(format::bytes(r.written_bytes as f64, u)),
                Span::raw(secs(r.others_throttled_s)),
                Span::raw(format::text(&r.target())),
            ]);
            if i == selected {
                row.style(theme.selected_row())
            } else {
                row
            }
        })
        .collect();
    let widths = [
        Constraint::Length(8),
        Constraint::Length(15),
        Constraint::Length(16),
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Fill(1),
    ];
    frame.render_widget(Table::new(rows, widths).header(header), table_area);
}

/// The memory pane's lines: one per sync call running longer than [`LONG_CALL_S`], as "fsync
/// /data/big.zip by java (4123): 4.2 s so far, 1.9 GB dirty" (the system's dirty memory).
pub fn memory_lines(model: &Model, state: &UiState) -> Vec<Line<'static>> {
    let theme = Theme { color: state.color };
    running_longer_than(&model.syncs, LONG_CALL_S)
        .take(3)
        .map(|r| {
            Line::from(Span::styled(long_call_text(r, model.memory.dirty, state), theme.level(Level::Warn)))
        })
        .collect()
}

fn long_call_text(r: &SyncModel, dirty: u64, state: &UiState) -> String {
    format!(
        "⚠ {} {} by {} ({}): {:.1} s so far, {} dirty",
        format::text(&r.syscall),
        format::text(&r.target()),
        format::text(&r.comm),
        r.pid,
        r.running_s,
        format::bytes(dirty as f64, state.units)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_call_reads_as_the_issue_asks() {
        let r = SyncModel {
            pid: 4123,
            comm: "java".into(),
            syscall: "fsync".into(),
            path: Some("/data/big.zip".into()),
            running: 1,
            running_s: 4.21,
            ..Default::default()
        };
        let state = UiState::new(std::time::Duration::from_secs(1), false);
        assert_eq!(
            long_call_text(&r, 1_900 << 20, &state),
            "⚠ fsync /data/big.zip by java (4123): 4.2 s so far, 1.9G dirty"
        );
        assert_eq!(
            (secs(0.0004), secs(0.012), secs(4.21)),
            ("400 µs".into(), "12 ms".into(), "4.2 s".into())
        );
    }
}
