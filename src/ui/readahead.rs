//! The readahead view (`w`): per device and per file, pages read ahead, used and evicted unused
//! (wasted), the windows, and plain-language hints; Enter opens the selected file's detail with the
//! time-to-first-use histogram. A pure render of the model's `readahead` part.

use crossterm::event::KeyCode;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use crate::model::readahead::{RaFileModel, ReadaheadModel, HIGH_WASTE_PCT};
use crate::ui::columns::Column;
use crate::ui::format;
use crate::ui::table::Selection;
use crate::ui::theme::{Level, Theme};
use crate::ui::view::{Context, View, ViewAction};

/// The readahead view's own state: the selected file (by `dev:ino`) and whether its detail is open.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReadaheadView {
    /// Enter: the selected file's detail fills the view.
    pub detail: bool,
    pub selection: crate::ui::table::Selection,
}

impl View for ReadaheadView {
    fn title(&self, ctx: &Context) -> String {
        let keys = if self.detail { "Enter/Esc back" } else { "w/Esc back  ↑↓ file  Enter detail" };
        format!(
            "Readahead{}  {keys}",
            crate::model::panes::fallback_note(&ctx.model.bpf.panes, &["readahead"])
        )
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Context) {
        render(self, frame, area, ctx)
    }

    /// Esc closes (the detail first), Enter opens the selected file's detail, j/k/arrows/g/G
    /// select (`w` opens and closes it).
    fn handle_key(&mut self, code: KeyCode) -> Option<ViewAction> {
        if crate::ui::table::list_step(code).is_some() || matches!(code, KeyCode::Left | KeyCode::Right) {
            self.selection.handle_key(code);
            return Some(ViewAction::Redraw);
        }
        match code {
            KeyCode::Esc if self.detail => self.detail = false,
            KeyCode::Esc => return Some(ViewAction::Close),
            KeyCode::Enter => self.detail = !self.detail,
            _ => return None,
        }
        Some(ViewAction::Redraw)
    }

    fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[("↑↓", "file"), ("Enter", "detail"), ("w Esc", "back")]
    }

    /// The identities of the file rows, in order.
    fn follow(&mut self, ctx: &Context) {
        let Some(ra) = ctx.model.readahead.as_ref() else {
            return self.selection.follow(Vec::<String>::new());
        };
        self.selection.follow(
            ra.files.iter().map(|f| format!("{}:{}:{}", f.dev, f.ino, f.label.as_deref().unwrap_or(""))),
        );
    }
}

fn render(view: &ReadaheadView, frame: &mut Frame, area: Rect, ctx: &Context) {
    let (model, theme) = (ctx.model, ctx.theme);
    let block = Block::new()
        .borders(Borders::TOP)
        .border_style(theme.dim())
        .title(Span::styled(format!("▶ {} ", view.title(ctx)), theme.title(true)));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(ra) = model.readahead.as_ref() else {
        let why = match crate::model::panes::not_live(&model.bpf.panes, "readahead") {
            Some(p) if model.bpf.enabled => format!(
                "no readahead on this kernel: {} (see the probe health view, e)",
                format::text(p.reason.as_deref().unwrap_or_default())
            ),
            _ if model.bpf.enabled => {
                "readahead figures pending: the first interval is not over yet".to_string()
            }
            _ => "eBPF is off: readahead needs the readahead:* and filemap:* tracepoints (run as root)"
                .to_string(),
        };
        frame.render_widget(Paragraph::new(why).wrap(Wrap { trim: true }), inner);
        return;
    };
    let selected = view.selection.index().min(ra.files.len().saturating_sub(1));
    if view.detail {
        if let Some(f) = ra.files.get(selected) {
            return render_detail(frame, inner, f, ctx);
        }
    }
    let hint_lines = hint_lines(ra, &theme);
    // Rows the wrapped hints take (each hint wraps at the width), at most a third of the view.
    let width = inner.width.max(8) as usize;
    let wrapped: usize = hint_lines.iter().map(|l| l.width().div_ceil(width - width / 8).max(1)).sum();
    let hint_h = (wrapped as u16).min(inner.height / 3).max(1);
    let dev_h = (ra.devices.len() as u16 + 1).max(2);
    let [dev_area, hint_area, file_area] =
        Layout::vertical([Constraint::Length(dev_h), Constraint::Length(hint_h), Constraint::Fill(1)])
            .areas(inner);
    render_devices(frame, dev_area, ra, ctx);
    frame.render_widget(Paragraph::new(hint_lines).wrap(Wrap { trim: true }), hint_area);
    render_files(frame, file_area, ra, &view.selection, ctx);
}

fn hint_lines(ra: &ReadaheadModel, theme: &Theme) -> Vec<Line<'static>> {
    if ra.hints.is_empty() {
        return vec![Line::from(Span::styled(
            "No readahead waste worth a hint in this interval.",
            theme.dim(),
        ))];
    }
    ra.hints
        .iter()
        .map(|h| Line::from(Span::styled(format!("⚠ {}", format::text(h)), theme.level(Level::Warn))))
        .collect()
}

fn pct(v: Option<f64>) -> String {
    v.map(format::percent).unwrap_or_else(|| "-".into())
}

fn waste_style(theme: &Theme, v: Option<f64>) -> ratatui::style::Style {
    match v {
        Some(w) => theme.level(Level::of(w, HIGH_WASTE_PCT / 2.0, HIGH_WASTE_PCT)),
        None => theme.dim(),
    }
}

fn render_devices(frame: &mut Frame, area: Rect, ra: &ReadaheadModel, ctx: &Context) {
    let (theme, u) = (ctx.theme, ctx.units);
    let header = Row::new(["Device", "ra_kb", "RA pg/s", "used/s", "wasted/s", "waste%", "RA%rd", "pending"])
        .style(theme.table_header());
    let rows: Vec<Row> = ra
        .devices
        .iter()
        .map(|d| {
            Row::new(vec![
                Span::raw(format::text(&d.name)),
                Span::raw(d.read_ahead_kb.map(|k| k.to_string()).unwrap_or_else(|| "-".into())),
                Span::raw(format::count(d.ra_pages_s, u)),
                Span::raw(format::count(d.used_pages_s, u)),
                Span::raw(format::count(d.wasted_pages_s, u)),
                Span::styled(pct(d.waste_pct), waste_style(&theme, d.waste_pct)),
                Span::raw(pct(d.ra_read_share_pct)),
                Span::raw(d.pending_pages.to_string()),
            ])
        })
        .collect();
    let widths = [12, 6, 8, 8, 8, 6, 6, 8].map(Constraint::Length);
    let rows =
        if rows.is_empty() { vec![Row::new(["(no readahead seen yet)"]).style(theme.dim())] } else { rows };
    frame.render_widget(Table::new(rows, widths).header(header), area);
}

fn render_files(frame: &mut Frame, area: Rect, ra: &ReadaheadModel, selection: &Selection, ctx: &Context) {
    let theme = ctx.theme;
    if ra.files.is_empty() {
        let line = Span::styled("(no file read ahead in this interval)", theme.dim());
        frame.render_widget(Paragraph::new(line), area);
        return;
    }
    let [area, foot] = ratatui::layout::Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(u16::from(ra.untracked_pages_total > 0)),
    ])
    .areas(area);
    let files = &ra.files;
    let col = |title: &str, priority: u8, f: &dyn Fn(&RaFileModel) -> String| {
        let mut c = Column::new(title, priority);
        c.cells = files.iter().map(|r| (f(r), Style::new())).collect();
        c
    };
    let mut file = Column::new("File", 0).left().min_width(20).key_keep_end();
    file.cells = files
        .iter()
        .map(|f| {
            let name = format::text(&f.path);
            if f.path_known {
                (name, Style::new())
            } else {
                (name, theme.dim())
            }
        })
        .collect();
    let mut waste = Column::new("waste%", 0);
    waste.cells = files.iter().map(|f| (pct(f.waste_pct), waste_style(&theme, f.waste_pct))).collect();
    let columns = vec![
        file,
        col("sync", 0, &|f| f.sync_events.to_string()),
        col("async", 0, &|f| f.async_events.to_string()),
        col("window", 0, &|f| format!("{}{}", f.window_pages, f.window_trend.arrow())),
        col("RA pg", 0, &|f| f.ra_pages.to_string()),
        col("used", 0, &|f| f.used_pages.to_string()),
        col("wasted", 0, &|f| f.wasted_pages.to_string()),
        waste,
        col("max", 1, &|f| f.max_window_pages.to_string()),
        col("mmap_miss", 1, &|f| f.mmap_miss.to_string()),
        col("processes", 2, &|f| format::shorten(&format::text(&f.processes.join(" ")), 24)).left(),
    ];
    crate::ui::table::render(frame, area, columns, &theme, selection, true);
    if ra.untracked_pages_total > 0 {
        let text =
            format!("{} readahead pages untracked since start (page map full)", ra.untracked_pages_total);
        frame.render_widget(Paragraph::new(Span::styled(text, theme.dim())), foot);
    }
}

fn render_detail(frame: &mut Frame, area: Rect, f: &RaFileModel, ctx: &Context) {
    let theme = ctx.theme;
    let mut lines = vec![
        Line::from(Span::styled(format::text(&f.path), theme.title(true))),
        Line::from(format!("device {} ({}), inode {}", format::text(&f.device), format::text(&f.dev), f.ino)),
        Line::from(format!(
            "events: {} sync, {} async, {} windows; window {} pages ({} KiB) {}, max {} pages; mmap_miss {}",
            f.sync_events,
            f.async_events,
            f.windows,
            f.window_pages,
            f.window_kb,
            format!("{:?}", f.window_trend).to_lowercase(),
            f.max_window_pages,
            f.mmap_miss
        )),
        Line::from(format!(
            "pages this interval: {} read ahead, {} used, {} wasted (waste {}%), {} pending",
            f.ra_pages,
            f.used_pages,
            f.wasted_pages,
            pct(f.waste_pct),
            f.pending_pages
        )),
        Line::from(format!(
            "triggered by: {}",
            if f.processes.is_empty() { "-".into() } else { format::text(&f.processes.join(", ")) }
        )),
        Line::from(""),
        Line::from(Span::styled("time from readahead to first use (this interval)", theme.table_header())),
    ];
    let max = f.first_use_hist.iter().copied().max().unwrap_or(0);
    let last_used = f.first_use_hist.iter().rposition(|&n| n > 0);
    let first_used = f.first_use_hist.iter().position(|&n| n > 0);
    match (first_used, last_used) {
        (Some(a), Some(b)) => {
            let bar_w = area.width.saturating_sub(24).max(4) as u64;
            for (i, &n) in f.first_use_hist.iter().enumerate().take(b + 1).skip(a) {
                let bar = "█".repeat(((n * bar_w).div_ceil(max.max(1))) as usize);
                lines.push(Line::from(format!("{:>9} {:>8} {bar}", bucket_label(i), n)));
            }
        }
        _ => lines.push(Line::from(Span::styled("(no first use in this interval)", theme.dim()))),
    }
    frame.render_widget(Paragraph::new(lines), area);
}

/// The lower bound of log2 µs bucket `i`: "<2µs", "4µs", "1ms", "2s".
fn bucket_label(i: usize) -> String {
    if i == 0 {
        return "<2µs".into();
    }
    let us = 1u64 << i;
    if us < 1000 {
        format!("≥{us}µs")
    } else if us < 1_000_000 {
        format!("≥{}ms", us / 1000)
    } else {
        format!("≥{}s", us / 1_000_000)
    }
}
