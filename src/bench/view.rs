//! The TUI bench view: a pure render of [`BenchView`] (what the run has reported so far) plus the
//! monitor's Model, so the results table, the live progress and the system's reaction (the normal
//! memory and devices panes) share one screen. Tested with insta snapshots.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use super::report::{self, COLUMNS};
use super::result::JobResult;
use super::spec::{size_label, JobSpec};
use crate::model::Model;
use crate::ui::theme::Theme;
use crate::ui::{self, Pane, UiState};

/// The job running now and its live counters.
#[derive(Clone, Debug, PartialEq)]
pub struct Running {
    pub index: usize,
    pub spec: JobSpec,
    pub elapsed_s: f64,
    pub ops: u64,
    pub bytes: u64,
}

/// Everything the bench has reported so far: the view's state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BenchView {
    /// What is benchmarked: path, kind, size, filesystem, device.
    pub target_line: String,
    pub total_jobs: usize,
    pub runtime_s: f64,
    /// The engine of the direct and buffered jobs: "io_uring" or "threads".
    pub engine: String,
    pub results: Vec<JobResult>,
    pub notes: Vec<String>,
    pub running: Option<Running>,
    /// Laying out the test file: (bytes written, total).
    pub layout: Option<(u64, u64)>,
    pub finished: bool,
    pub stopping: bool,
    /// First table line shown (↑ ↓ scroll); usize::MAX follows the newest rows.
    pub scroll: usize,
}

/// Lines of the table each result takes: its row and its verdict.
const LINES_PER_RESULT: usize = 2;

impl BenchView {
    /// Table lines when fully shown (header, two per result, one for the running job).
    fn table_lines(&self) -> usize {
        1 + self.results.len() * LINES_PER_RESULT + usize::from(self.running.is_some())
    }
}

/// Draws the whole bench screen.
pub fn draw(frame: &mut Frame, view: &BenchView, model: Option<&Model>, ui: &UiState) {
    let area = frame.area();
    let theme = Theme { color: ui.color };
    // Header (2), progress (1), then the table; the monitor panes get what the table leaves, at
    // least their minimum when the screen is tall enough.
    let [head, progress, body] =
        Layout::vertical([Constraint::Length(2), Constraint::Length(1), Constraint::Fill(1)]).areas(area);
    draw_header(frame, head, view, &theme);
    draw_progress(frame, progress, view, &theme);
    let wanted_table = view.table_lines() as u16 + 1 + view.notes.len().min(3) as u16;
    let panes_min = match model {
        Some(m) if body.height >= 30 => {
            ui::pane_height(Pane::Memory, m, ui, body.width)
                + ui::pane_height(Pane::Devices, m, ui, body.width)
        }
        Some(m) if body.height >= 16 => ui::pane_height(Pane::Devices, m, ui, body.width),
        _ => 0,
    };
    // The table takes what it needs (at least 6 lines, so results show up at once), the panes
    // the rest; on a short screen the table wins and the panes shrink or go.
    let table_h = wanted_table.max(6).min(body.height.saturating_sub(panes_min)).max(3.min(body.height));
    let [table, panes] = Layout::vertical([Constraint::Length(table_h), Constraint::Fill(1)]).areas(body);
    draw_table(frame, table, view, &theme);
    if let Some(m) = model {
        draw_panes(frame, panes, m, ui);
    }
}

fn draw_header(frame: &mut Frame, area: Rect, view: &BenchView, theme: &Theme) {
    let state = if view.stopping && !view.finished {
        "stopping…"
    } else if view.finished {
        "done"
    } else {
        "running"
    };
    let done = view.results.len();
    let lines = vec![
        Line::from(vec![
            Span::styled(" ioscope bench ", theme.banner()),
            Span::raw(format!("  {state}  {done}/{} jobs  ≤{}s each", view.total_jobs, view.runtime_s)),
            Span::raw(if view.engine.is_empty() { String::new() } else { format!("  {}", view.engine) }),
            Span::styled("   q stop/quit  ↑↓ scroll", theme.dim()),
        ]),
        Line::from(Span::raw(format!(" {}", view.target_line))),
    ];
    frame.render_widget(Paragraph::new(lines), area);
}

fn draw_progress(frame: &mut Frame, area: Rect, view: &BenchView, theme: &Theme) {
    let text = if let Some((done, total)) = view.layout.filter(|(d, t)| d < t) {
        format!(" laying out the test file: {} of {}", report_bytes(done), report_bytes(total))
    } else if let Some(r) = &view.running {
        let frac = (r.elapsed_s / view.runtime_s.max(1e-9)).clamp(0.0, 1.0);
        let width = 20usize;
        let filled = (frac * width as f64).round() as usize;
        let secs = r.elapsed_s.max(1e-9);
        format!(
            " ▶ {} {}  [{}{}] {:.1}/{:.0}s  {} IOPS  {} MiB/s",
            r.spec.key(),
            r.spec.mode.name(),
            "█".repeat(filled),
            "·".repeat(width - filled),
            r.elapsed_s,
            view.runtime_s,
            report::number(r.ops as f64 / secs),
            report::number(r.bytes as f64 / secs / 1_048_576.0),
        )
    } else if view.finished {
        format!(" finished: {} jobs; q quits and prints the table", view.results.len())
    } else {
        " starting…".to_string()
    };
    frame.render_widget(Paragraph::new(Span::styled(text, theme.title(true))), area);
}

fn report_bytes(b: u64) -> String {
    crate::ui::format::human_bytes(b as f64)
}

/// The columns that fit in `width`, dropping the least important first.
fn visible_columns(width: u16) -> Vec<usize> {
    // Most important first: job, mode, MiB/s, IOPS, p99, disk, hit%, p50, fsync, req-sz, qd,
    // amp, max, p99.9, CPU%, %util, dirtied.
    const PRIORITY: [usize; 17] = [0, 1, 2, 3, 5, 8, 12, 4, 15, 10, 11, 9, 7, 6, 14, 16, 13];
    let mut used = 0usize;
    let mut cols = Vec::new();
    for &c in &PRIORITY {
        let w = COLUMNS[c].1 + 1;
        if used + w <= width as usize {
            used += w;
            cols.push(c);
        }
    }
    cols.sort_unstable();
    cols
}

fn row_line(cells: &[String], cols: &[usize], style: Style) -> Line<'static> {
    let mut s = String::new();
    for &c in cols {
        let (_, w) = COLUMNS[c];
        let cell = &cells[c];
        let cell: String = cell.chars().take(w).collect();
        if c < 2 {
            s.push_str(&format!("{cell:<w$} "));
        } else {
            s.push_str(&format!("{cell:>w$} "));
        }
    }
    Line::styled(s.trim_end().to_string(), style)
}

fn draw_table(frame: &mut Frame, area: Rect, view: &BenchView, theme: &Theme) {
    let block = Block::new()
        .borders(Borders::TOP)
        .border_style(theme.dim())
        .title(Span::styled(" Results: direct and buffered of each job side by side ", theme.title(true)));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let cols = visible_columns(inner.width);
    let header: Vec<String> = COLUMNS.iter().map(|(h, _)| h.to_string()).collect();
    let mut lines = vec![row_line(&header, &cols, theme.table_header())];
    let mut body: Vec<Line> = Vec::new();
    let mut prev_key = None;
    for r in &view.results {
        let key = r.spec().map(|s| s.key());
        let first = key != prev_key;
        body.push(row_line(&report::job_cells(r, first), &cols, Style::default()));
        let mode = r.mode.map(|m| m.name()).unwrap_or("");
        body.push(Line::styled(format!("  {mode:>8}: {}", r.verdict), verdict_style(r, theme)));
        prev_key = key;
    }
    if let Some(run) = &view.running {
        let first = Some(run.spec.key()) != prev_key;
        let mut cells = vec![
            if first { run.spec.key() } else { String::new() },
            run.spec.mode.name().to_string(),
            "running…".to_string(),
        ];
        cells.resize(COLUMNS.len(), String::new());
        body.push(row_line(&cells, &cols, theme.dim()));
    }
    let room = inner.height.saturating_sub(1) as usize;
    // Up to three notes under the table, when they leave at least two result lines.
    let mut notes: Vec<Line> = view
        .notes
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(|n| Line::styled(format!("note: {n}"), theme.dim()))
        .collect();
    if room < notes.len() + 2 {
        notes.clear();
    }
    let body_room = room - notes.len();
    // Keep the newest rows in sight while running, unless the user scrolled up.
    let max_start = body.len().saturating_sub(body_room);
    let start = view.scroll.min(max_start);
    lines.extend(body.into_iter().skip(start).take(body_room));
    lines.extend(notes);
    frame.render_widget(Paragraph::new(lines), inner);
}

fn verdict_style(r: &JobResult, theme: &Theme) -> Style {
    if r.skipped.is_some() {
        theme.dim()
    } else if theme.color {
        Style::default().add_modifier(Modifier::ITALIC)
    } else {
        Style::default()
    }
}

fn draw_panes(frame: &mut Frame, area: Rect, model: &Model, ui: &UiState) {
    if area.height < 3 {
        return;
    }
    let theme = Theme { color: ui.color };
    let pane = |title: &str| {
        Block::new()
            .borders(Borders::TOP)
            .border_style(theme.dim())
            .title(Span::styled(format!(" {title} "), theme.title(false)))
    };
    let mem_h = ui::pane_height(Pane::Memory, model, ui, area.width);
    let dev_h = ui::pane_height(Pane::Devices, model, ui, area.width);
    if area.height >= mem_h + dev_h {
        let [m, d] = Layout::vertical([Constraint::Length(mem_h), Constraint::Fill(1)]).areas(area);
        ui::draw_pane(frame, m, Pane::Memory, pane("Memory: the system's reaction"), model, ui);
        let title = ui::pane_title(Pane::Devices, model, ui);
        ui::draw_pane(frame, d, Pane::Devices, pane(&title), model, ui);
    } else {
        let title = ui::pane_title(Pane::Devices, model, ui);
        ui::draw_pane(frame, area, Pane::Devices, pane(&title), model, ui);
    }
}

/// "/mnt/x/.ioscope-bench-123.tmp (test file, 512M, ext4 on loop1)".
pub fn target_line(t: &super::target::Target) -> String {
    let kind = match t.kind {
        super::target::TargetKind::TestFile => "test file, removed after",
        super::target::TargetKind::ExistingFile => "existing file",
        super::target::TargetKind::Device => "block device",
    };
    format!(
        "{} ({kind}, {}, {} on {})",
        crate::untrusted::path(&t.path),
        size_label(t.size),
        crate::untrusted::shown(&t.fs_type),
        crate::untrusted::shown(t.device.as_deref().unwrap_or("no block device"))
    )
}
