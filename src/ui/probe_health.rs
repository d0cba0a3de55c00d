//! The probe-health view (`e`): every eBPF program, where and how it is attached (a tracepoint, or
//! a kernel function standing in for a missing one), attached or not and why, events
//! per second; events the probes could not use; how full each map is; the kernel memory the maps
//! take. It says plainly what ioscope is and is not measuring.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

use crate::model::block_health::LostCounter;
use crate::model::Model;
use crate::ui::columns::{self, Column};
use crate::ui::format;
use crate::ui::table::Selection;
use crate::ui::theme::{Level, Theme};
use crate::ui::view::{Context, View, ViewAction};

/// Map fill from which the view warns (the map is bounded; when full, requests go untracked).
const FILL_WARN: f64 = 50.0;
const FILL_CRIT: f64 = 90.0;
/// Maps listed by their kernel memory (the largest; the rest are summed on one row).
const MEMORY_ROWS: usize = 8;

/// The probe health view (`e`): the programs table's scroll.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProbeHealthView {
    pub selection: Selection,
}

impl View for ProbeHealthView {
    fn title(&self, _ctx: &Context) -> String {
        "eBPF probe health  e/Esc back".to_string()
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Context) {
        render(frame, area, &self.title(ctx), &self.selection, ctx)
    }

    /// The selection keys scroll the programs (Esc and `e` are the general keys).
    fn handle_key(&mut self, code: crossterm::event::KeyCode) -> Option<ViewAction> {
        self.selection.handle_key(code).then_some(ViewAction::Redraw)
    }

    fn follow(&mut self, ctx: &Context) {
        self.selection.follow(ctx.model.bpf.programs.iter().map(|p| p.program.clone()));
    }

    fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[("↑↓", "program"), ("Enter", "device detail"), ("e Esc", "back")]
    }
}

fn render(frame: &mut Frame, area: Rect, title: &str, selection: &Selection, ctx: &Context) {
    let (model, theme) = (ctx.model, ctx.theme);
    let block = Block::new()
        .borders(Borders::TOP)
        .border_style(theme.dim())
        .title(Span::styled(format!("▶ {title} "), theme.title(true)));
    let inner = block.inner(area);
    frame.render_widget(block, area);

    let status = match (model.bpf.enabled, &model.bpf.reason) {
        (true, None) => Line::from("eBPF on: every program attached"),
        (true, Some(why)) => Line::from(Span::styled(
            format!("eBPF partly on: {}", crate::ui::format::text(why)),
            theme.level(Level::Warn),
        )),
        (false, why) => Line::from(Span::styled(
            format!("eBPF off: {}", crate::ui::format::text(why.as_deref().unwrap_or("no reason given"))),
            theme.level(Level::Critical),
        )),
    };
    let programs = &model.bpf.programs;
    let health = model.bpf.block_health.as_ref();
    // Where events/s and ns/run come from for the programs that count no events of their own.
    let stats_note = match ctx.run_stats {
        Some(word) if word.contains(" off ") => {
            Some(Span::styled(word.to_string(), theme.level(Level::Warn)))
        }
        Some(word) => Some(Span::styled(word.to_string(), theme.dim())),
        None if model.bpf.enabled && model.bpf.runs.is_empty() && !programs.is_empty() => Some(Span::styled(
            "no BPF run statistics in these samples: events/s, ns/run need them (live, this view \
             turns them on; or sysctl kernel.bpf_stats_enabled=1)",
            theme.dim(),
        )),
        None => None,
    };
    // The note wraps at words: a little slack over its length in lines.
    let note_h = stats_note
        .as_ref()
        .map_or(0, |n| (n.content.chars().count() + 12).div_ceil(inner.width.max(1) as usize));
    let status_h = 1 + note_h as u16;
    let status = match stats_note {
        Some(note) => vec![status, Line::from(note)],
        None => vec![status],
    };
    // When the screen is short, the counters that never moved are left out (and said to be 0).
    let all_lost: Vec<&LostCounter> = health.map(|h| h.lost.iter().collect()).unwrap_or_default();
    let memory_rows = memory_rows(model).len();
    let needed = status_h as usize
        + programs.len()
        + 1
        + all_lost.len()
        + 1
        + health.map_or(0, |h| h.maps.len())
        + 1
        + memory_rows
        + usize::from(memory_rows > 0);
    let lost: Vec<&LostCounter> = if needed > inner.height as usize {
        all_lost.iter().copied().filter(|l| l.total > 0).collect()
    } else {
        all_lost.clone()
    };
    let hidden_zero = all_lost.len() - lost.len();
    let lost_rows = lost.len() as u16;
    let map_rows = health.map_or(0, |h| h.maps.len()) as u16;
    // The programs take what the other tables leave (at least a few rows; they scroll).
    let others = status_h
        + (lost_rows + 1)
        + if health.is_some() { map_rows + 1 } else { 0 }
        + (memory_rows as u16 + u16::from(memory_rows > 0));
    let prog_h = (programs.len() as u16 + 1).min(inner.height.saturating_sub(others).max(6));
    let [status_area, prog_area, lost_area, map_area, memory_area] = Layout::vertical([
        Constraint::Length(status_h),
        Constraint::Length(prog_h),
        Constraint::Length(lost_rows + 1),
        Constraint::Length(if health.is_some() { map_rows + 1 } else { 0 }),
        Constraint::Length(memory_rows as u16 + u16::from(memory_rows > 0)),
    ])
    .areas(inner);
    frame.render_widget(Paragraph::new(status).wrap(Wrap { trim: true }), status_area);
    if programs.is_empty() {
        return;
    }

    let u = ctx.units;
    // Programs: the block probes' event counts where known (the foundation's counter has none).
    let events = |name: &str| health.and_then(|h| h.programs.iter().find(|p| p.program == name));
    // Every program's runs over the interval while the kernel's run statistics are on.
    let runs = |name: &str| model.bpf.runs.iter().find(|r| r.program == name);
    let mut cols = vec![
        col("program", 0, programs.iter().map(|p| (p.program.clone(), Style::new())).collect())
            .left()
            .min_width(20)
            .key(),
        col("attached to", 0, programs.iter().map(|p| (p.tracepoint.clone(), Style::new())).collect()).left(),
        col(
            "mechanism",
            0,
            programs
                .iter()
                .map(|p| {
                    let how = if p.mechanism.is_empty() { "tracepoint" } else { p.mechanism.as_str() };
                    match &p.fallback_for {
                        Some(tp) => (format!("{how}, for {tp}"), theme.level(Level::Warn)),
                        None => (how.to_string(), Style::new()),
                    }
                })
                .collect(),
        )
        .left(),
        col(
            "state",
            0,
            programs
                .iter()
                .map(|p| match (p.attached, &p.error) {
                    (true, None) => ("attached".to_string(), theme.good()),
                    (true, Some(e)) => (format!("attached, {e}"), theme.level(Level::Warn)),
                    (false, e) => (
                        format!("off: {}", e.as_deref().unwrap_or("not attached")),
                        theme.level(Level::Critical),
                    ),
                })
                .collect(),
        )
        .left(),
        col(
            "events/s",
            1,
            programs
                .iter()
                .map(|p| {
                    // While the statistics are on, a program missing from the runs did not run.
                    let stats_on = !model.bpf.runs.is_empty();
                    let per_s = events(&p.program)
                        .map(|e| e.events_s)
                        .or(runs(&p.program).map(|r| r.runs_s))
                        .or(stats_on.then_some(0.0));
                    (per_s.map_or("-".into(), |v| format::count(v, u)), Style::new())
                })
                .collect(),
        ),
        col(
            "missed",
            1,
            programs
                .iter()
                .map(|p| match events(&p.program) {
                    Some(e) if e.missed > 0 => (e.missed.to_string(), theme.level(Level::Warn)),
                    Some(e) => (e.missed.to_string(), Style::new()),
                    None => ("-".into(), Style::new()),
                })
                .collect(),
        ),
        col(
            "ns/run",
            3,
            programs
                .iter()
                .map(|p| {
                    // The interval's (block programs), else the average since start.
                    let ns = events(&p.program)
                        .and_then(|e| e.ns_per_run)
                        .or(runs(&p.program).and_then(|r| r.ns_per_run))
                        .or_else(|| {
                            (p.run_cnt > 0 && p.run_time_ns > 0)
                                .then(|| p.run_time_ns as f64 / p.run_cnt as f64)
                        });
                    (ns.map_or("-".into(), |ns| format!("{ns:.0}")), Style::new())
                })
                .collect(),
        ),
        col(
            "total",
            2,
            programs
                .iter()
                .map(|p| {
                    let total =
                        events(&p.program).map(|e| e.events_total).or((p.run_cnt > 0).then_some(p.run_cnt));
                    (total.map_or("-".into(), |t| t.to_string()), Style::new())
                })
                .collect(),
        ),
    ];
    cols.retain(|c| !c.cells.is_empty());
    crate::ui::table::render(frame, prog_area, cols, &theme, selection, true);
    render_memory(frame, memory_area, model, &theme);

    let Some(h) = health else { return };
    let title =
        if hidden_zero > 0 { format!("lost ({hidden_zero} more at 0)") } else { "lost or untracked".into() };
    let lost = vec![
        col(&title, 0, lost.iter().map(|l| (l.what.to_string(), Style::new())).collect()).left(),
        col(
            "interval",
            0,
            lost.iter()
                .map(|l| {
                    let style = if l.interval > 0 { theme.level(Level::Warn) } else { Style::new() };
                    (l.interval.to_string(), style)
                })
                .collect(),
        ),
        col("total", 0, lost.iter().map(|l| (l.total.to_string(), Style::new())).collect()),
        col("effect", 1, lost.iter().map(|l| (l.effect.to_string(), theme.dim())).collect()).left(),
    ];
    frame.render_widget(columns::table(lost, lost_area.width, theme.table_header()), lost_area);
    let maps = vec![
        col("map", 0, h.maps.iter().map(|m| (m.map.to_string(), Style::new())).collect()).left(),
        col("entries", 0, h.maps.iter().map(|m| (m.entries.to_string(), Style::new())).collect()),
        col("capacity", 0, h.maps.iter().map(|m| (m.capacity.to_string(), Style::new())).collect()),
        col(
            "fill%",
            0,
            h.maps
                .iter()
                .map(|m| {
                    (format::percent(m.fill_pct), theme.level(Level::of(m.fill_pct, FILL_WARN, FILL_CRIT)))
                })
                .collect(),
        ),
    ];
    frame.render_widget(columns::table(maps, map_area.width, theme.table_header()), map_area);
}

/// One row per map of the largest [`MEMORY_ROWS`] − 1 (by kernel memory), and the rest on one:
/// (map, entries as created, compiled entries, bytes).
fn memory_rows(model: &Model) -> Vec<(String, String, String, u64)> {
    let maps = &model.bpf.maps;
    let row = |m: &crate::sample::BpfMapMemory| {
        let shrunk = m.entries != m.compiled_entries;
        (
            m.map.clone(),
            m.entries.to_string(),
            if shrunk { m.compiled_entries.to_string() } else { String::new() },
            m.bytes,
        )
    };
    if maps.len() <= MEMORY_ROWS {
        return maps.iter().map(row).collect();
    }
    let (top, rest) = maps.split_at(MEMORY_ROWS - 1);
    let mut rows: Vec<_> = top.iter().map(row).collect();
    rows.push((
        format!("{} more maps", rest.len()),
        String::new(),
        String::new(),
        rest.iter().map(|m| m.bytes).sum(),
    ));
    rows
}

/// The maps' kernel memory: the total in the title, then the largest maps.
fn render_memory(frame: &mut Frame, area: Rect, model: &Model, theme: &Theme) {
    let rows = memory_rows(model);
    if rows.is_empty() {
        return;
    }
    let total = format!("map memory: {} in total", format::human_bytes(model.bpf.maps_bytes as f64));
    let cells = |f: fn(&(String, String, String, u64)) -> String| {
        rows.iter().map(|r| (f(r), Style::new())).collect::<Vec<_>>()
    };
    let table = vec![
        col(&total, 0, cells(|r| r.0.clone())).left(),
        col("kernel memory", 0, cells(|r| format::human_bytes(r.3 as f64))),
        col("entries", 0, cells(|r| r.1.clone())),
        col("compiled", 1, cells(|r| r.2.clone())),
    ];
    frame.render_widget(columns::table(table, area.width, theme.table_header()), area);
}

fn col(title: &str, priority: u8, cells: Vec<(String, Style)>) -> Column {
    let mut c = Column::new(title, priority);
    c.cells = cells;
    c
}
