//! The sync-call view (`y`): fsync and friends per process, call and file, calls still running
//! first (with their age), then the slowest; and the memory pane's line for a call running longer
//! than a second. A pure render of the model's `syncs` part.

use crossterm::event::KeyCode;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

use crate::model::syncs::{running_longer_than, SyncModel};
use crate::ui::columns::Column;
use crate::ui::format;
use crate::ui::theme::Level;
use crate::ui::view::{Context, View, ViewAction};

/// A running call this old gets a line in the memory pane.
pub const LONG_CALL_S: f64 = 1.0;

/// The sync-call view's own state: the selected row (by pid, call and file).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SyncsView {
    pub selection: crate::ui::table::Selection,
}

impl View for SyncsView {
    fn title(&self, _ctx: &Context) -> String {
        "Sync calls: NOW = this interval, the rest since ioscope started  y/Esc back".to_string()
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Context) {
        render(self, frame, area, ctx)
    }

    /// Esc closes the view and j/k/arrows/g/G select a row (`y` opens and closes it).
    fn handle_key(&mut self, code: KeyCode) -> Option<ViewAction> {
        if crate::ui::table::list_step(code).is_some() || matches!(code, KeyCode::Left | KeyCode::Right) {
            self.selection.handle_key(code);
            return Some(ViewAction::Redraw);
        }
        match code {
            KeyCode::Esc => Some(ViewAction::Close),
            _ => None,
        }
    }

    fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[("↑↓", "call"), ("y Esc", "back")]
    }

    /// The identities of the rows, in order.
    fn follow(&mut self, ctx: &Context) {
        self.selection
            .follow(ctx.model.syncs.iter().map(|r| format!("{}:{}:{}:{}", r.pid, r.syscall, r.dev, r.ino)));
    }
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

fn render(view: &SyncsView, frame: &mut Frame, area: Rect, ctx: &Context) {
    let (model, theme, u) = (ctx.model, ctx.theme, ctx.units);
    let block = Block::new()
        .borders(Borders::TOP)
        .border_style(theme.dim())
        .title(Span::styled(format!("▶ {} ", view.title(ctx)), theme.title(true)));
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
    // The columns that fit, the most important first; FILE is the key column, cut from the left
    // (keeping the file name) when it does not fit.
    let rows = &model.syncs;
    let col = |title: &str, priority: u8, f: &dyn Fn(&SyncModel) -> (String, Style)| {
        let mut c = Column::new(title, priority);
        c.cells = rows.iter().map(f).collect();
        c
    };
    let plain = |s: String| (s, Style::new());
    let now = |r: &SyncModel, v: f64| {
        if r.calls_interval == 0 {
            ("-".to_string(), theme.dim())
        } else {
            (secs(v), theme.level(Level::of(v, 0.1, LONG_CALL_S)))
        }
    };
    let columns = vec![
        col("PID", 0, &|r| plain(r.pid.to_string())).min_width(7),
        col("COMM", 0, &|r| plain(format::text(&r.comm))).left().min_width(15),
        col("CALL", 0, &|r| plain(format::text(&r.syscall))).left().min_width(9),
        col("NOW/S", 0, &|r| plain(rate(r.calls_s))),
        col("NOW MEAN", 0, &|r| now(r, r.interval_mean_s)),
        col("NOW P99", 2, &|r| now(r, r.interval_p99_s)),
        col("RUNNING", 0, &|r| {
            if r.running > 0 {
                let n = if r.running > 1 { format!("{}× ", r.running) } else { String::new() };
                (
                    format!("{n}{}", secs(r.running_s)),
                    theme.level(Level::of(r.running_s, LONG_CALL_S, 10.0 * LONG_CALL_S)),
                )
            } else {
                ("-".to_string(), theme.dim())
            }
        }),
        col("CALLS", 4, &|r| plain(r.calls.to_string())),
        col("MEAN", 5, &|r| plain(secs(r.mean_s))),
        col("P99", 6, &|r| plain(secs(r.p99_s))),
        col("MAX", 3, &|r| (secs(r.max_s), theme.level(Level::of(r.max_s, 0.1, LONG_CALL_S)))),
        col("WRITTEN", 1, &|r| plain(written(r, u))),
        col("OTHERS THR", 7, &|r| plain(secs(r.others_throttled_s))),
        col("FILE", 0, &|r| plain(format::text(&r.target()))).left().min_width(22).key_keep_end(),
    ];
    crate::ui::table::render(frame, table_area, columns, &theme, &view.selection, true);
}

/// Calls per second: "-" for none, "0.5", "12", "1.2K".
pub fn rate(v: f64) -> String {
    if v <= 0.0 {
        "-".into()
    } else if v < 10.0 {
        format!("{v:.1}")
    } else {
        format::num(v)
    }
}

/// WRITTEN: the bytes written back by the calls, or "—" while a running call has reported none
/// yet (the filesystem reports its writeback when a writepages call returns, which for a big
/// fsync may be at its end: a 0 there would not be true).
pub fn written(r: &SyncModel, units: format::Units) -> String {
    if r.running > 0 && r.running_written_bytes == 0 {
        "—".into()
    } else {
        format::bytes(r.written_bytes as f64, units)
    }
}

/// The memory pane's lines: one per sync call running longer than [`LONG_CALL_S`], as "fsync
/// /data/big.zip by java (4123): 4.2 s so far, 1.9 GB dirty + 1.1 GB writeback" (the system's
/// dirty memory and memory under writeback: what a sync may wait for).
pub fn memory_lines(ctx: &Context) -> Vec<Line<'static>> {
    let (model, theme) = (ctx.model, ctx.theme);
    running_longer_than(&model.syncs, LONG_CALL_S)
        .take(3)
        .map(|r| {
            let m = &model.memory;
            Line::from(Span::styled(
                long_call_text(r, m.dirty, m.writeback, ctx.units),
                theme.level(Level::Warn),
            ))
        })
        .collect()
}

fn long_call_text(r: &SyncModel, dirty: u64, writeback: u64, u: format::Units) -> String {
    format!(
        "⚠ {} {} by {} ({}): {:.1} s so far, {} dirty + {} writeback",
        format::text(&r.syscall),
        format::text(&r.target()),
        format::text(&r.comm),
        r.pid,
        r.running_s,
        format::bytes(dirty as f64, u),
        format::bytes(writeback as f64, u)
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
        assert_eq!(
            long_call_text(&r, 1_900 << 20, 1_100 << 20, format::Units::Human),
            "⚠ fsync /data/big.zip by java (4123): 4.2 s so far, 1.9G dirty + 1.1G writeback"
        );
        assert_eq!(
            (secs(0.0004), secs(0.012), secs(4.21)),
            ("400 µs".into(), "12 ms".into(), "4.2 s".into())
        );
    }
}
