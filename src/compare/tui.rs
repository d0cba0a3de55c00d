//! `ioscope compare` on a terminal: the comparison as a scrollable screen, one pane's metrics or
//! all, filtered by name. A pure render of ([`Comparison`], [`CompareView`]); the loop below only
//! feeds it keys.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::compare::Comparison;
use crate::model::compare::MetricComparison;
use crate::ui::event_loop::{self, Screen, Step};
use crate::ui::format;
use crate::ui::theme::{Level, Theme};

use crate::model::compare::PANES;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompareView {
    /// First line shown of the scrolled body.
    pub scroll: usize,
    /// None: all panes; Some(i): PANES[i] only.
    pub pane: Option<usize>,
    /// Metric-name filter (case-insensitive substring).
    pub filter: crate::ui::line_input::LineInput,
    pub editing_filter: bool,
    pub color: bool,
}

/// What a key did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewAction {
    None,
    Redraw,
    Quit,
}

impl CompareView {
    pub fn handle_key(&mut self, key: KeyEvent, page: usize) -> ViewAction {
        if key.kind == KeyEventKind::Release {
            return ViewAction::None;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return ViewAction::Quit;
        }
        if self.editing_filter {
            use crate::ui::line_input::LineEdit;
            match self.filter.handle_key(key.code) {
                LineEdit::Changed => {}
                LineEdit::Kept | LineEdit::Cleared => self.editing_filter = false,
                LineEdit::Ignored => return ViewAction::None,
            }
            self.scroll = 0;
            return ViewAction::Redraw;
        }
        let page = page.max(1);
        match key.code {
            KeyCode::Char('q') => return ViewAction::Quit,
            KeyCode::Down | KeyCode::Char('j') => self.scroll += 1,
            KeyCode::Up | KeyCode::Char('k') => self.scroll = self.scroll.saturating_sub(1),
            KeyCode::PageDown | KeyCode::Char(' ') => self.scroll += page,
            KeyCode::PageUp => self.scroll = self.scroll.saturating_sub(page),
            KeyCode::Home | KeyCode::Char('g') => self.scroll = 0,
            KeyCode::End | KeyCode::Char('G') => self.scroll = usize::MAX / 2,
            KeyCode::Tab => self.pane = next_pane(self.pane, 1),
            KeyCode::BackTab => self.pane = next_pane(self.pane, PANES.len()),
            KeyCode::Char(c @ '0'..='6') => {
                self.pane = (c != '0').then(|| c as usize - '1' as usize);
                self.scroll = 0;
            }
            KeyCode::Char('/') => self.editing_filter = true,
            KeyCode::Esc if !self.filter.is_empty() => self.filter.clear(),
            _ => return ViewAction::None,
        }
        ViewAction::Redraw
    }
}

/// All → memory → psi → devices → processes → cache → syncs → all (`by` = 1 forward, PANES.len() backward).
fn next_pane(cur: Option<usize>, by: usize) -> Option<usize> {
    let i = cur.map_or(0, |p| p + 1);
    let n = (i + by) % (PANES.len() + 1);
    (n > 0).then(|| n - 1)
}

fn matches(m: &MetricComparison, filter: &str) -> bool {
    let f = filter.to_lowercase();
    filter.is_empty() || m.label.to_lowercase().contains(&f) || m.metric.to_lowercase().contains(&f)
}

/// The scrolled body: settings that differ, then each pane's heading and metrics.
pub fn body_lines(c: &Comparison, view: &CompareView, width: u16) -> Vec<Line<'static>> {
    let theme = Theme { color: view.color };
    let name_w = (width as usize).saturating_sub(6 * 10 + 2).clamp(16, 60);
    let mut lines = Vec::new();
    if view.pane.is_none() && !c.settings_changed.is_empty() {
        lines.push(Line::from(Span::styled("Settings that differ", theme.table_header())));
        for ch in &c.settings_changed {
            let v = |o: &Option<String>| o.as_deref().map_or("-".to_string(), crate::ui::format::text);
            let name = crate::untrusted::shown(&ch.name);
            lines.push(Line::from(format!("  {name:<name_w$} {} → {}", v(&ch.a), v(&ch.b))));
        }
        lines.push(Line::from(""));
    }
    for (i, pane) in c.panes.iter().enumerate() {
        if view.pane.is_some_and(|p| PANES.get(p) != Some(&pane.pane.as_str())) {
            continue;
        }
        let shown: Vec<&MetricComparison> =
            pane.metrics.iter().filter(|m| matches(m, &view.filter)).collect();
        let heading = format!(
            "{} {:<w$} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
            i + 1,
            pane_title(&pane.pane),
            "A avg",
            "A p95",
            "B avg",
            "B p95",
            "delta",
            "change",
            w = name_w
        );
        lines.push(Line::from(Span::styled(heading, theme.table_header())));
        if shown.is_empty() {
            let why = if pane.metrics.is_empty() {
                "no activity on either side"
            } else {
                "no metric matches the filter"
            };
            lines.push(Line::from(Span::styled(format!("  ({why})"), theme.dim())));
        }
        for m in shown {
            let change = crate::compare::change_text(m);
            let v = |x: f64| format::quantity(x * m.scale, m.unit);
            let delta = if m.delta > 0.0 { format!("+{}", v(m.delta)) } else { v(m.delta) };
            // Big changes stand out (by score: doubling at full share is 0.69); the direction's
            // meaning depends on the metric; a change within its noise is dimmed.
            let style = match m.score {
                _ if m.within_noise => theme.dim(),
                s if s >= 1.0 => theme.level(Level::Critical),
                s if s >= 0.25 => theme.level(Level::Warn),
                _ => Style::default(),
            };
            lines.push(Line::from(vec![
                Span::raw(format!(
                    "  {:<name_w$} {:>9} {:>9} {:>9} {:>9} ",
                    format::shorten_middle(&crate::untrusted::escape(&m.label), name_w),
                    v(m.a_avg),
                    v(m.a_p95),
                    v(m.b_avg),
                    v(m.b_p95)
                )),
                Span::styled(format!("{delta:>9} {change:>8}"), style),
            ]));
        }
        lines.push(Line::from(""));
    }
    lines
}

fn pane_title(pane: &str) -> &'static str {
    match pane {
        "memory" => "Memory",
        "psi" => "Pressure (PSI)",
        "devices" => "Devices",
        "cache" => "Page cache",
        "syncs" => "Sync calls",
        _ => "Processes (by comm)",
    }
}

/// Lines above and below the scrolled body.
const TOP: u16 = 3;
const BOTTOM: u16 = 1;

/// The body's height on a screen of `height` lines (what PgUp/PgDn move).
pub fn page(height: u16) -> usize {
    height.saturating_sub(TOP + BOTTOM) as usize
}

pub fn draw(frame: &mut Frame, c: &Comparison, view: &mut CompareView) {
    let theme = Theme { color: view.color };
    let [top, body, bottom] =
        Layout::vertical([Constraint::Length(TOP), Constraint::Fill(1), Constraint::Length(BOTTOM)])
            .areas(frame.area());
    let side = |name: &str, s: &crate::compare::Side| {
        Line::from(vec![
            Span::styled(format!(" {name} "), theme.banner()),
            Span::raw(format!(
                " {}  ({} {}, {} intervals, {:.0} s)",
                crate::untrusted::shown(&s.source),
                crate::untrusted::shown(&s.hostname),
                crate::untrusted::shown(&s.kernel),
                s.intervals,
                s.seconds
            )),
        ])
    };
    let scope = match view.pane {
        None => "all panes".to_string(),
        Some(p) => pane_title(PANES[p]).to_string(),
    };
    let filter = if view.editing_filter || !view.filter.is_empty() {
        format!("  filter \"{}\"", view.filter.with_cursor(view.editing_filter))
    } else {
        String::new()
    };
    let info = Line::from(Span::styled(
        format!(
            " ioscope compare: {scope}{filter}   avg/p95 per interval, delta = B − A, change = delta / A, ~ within noise, K/M/G = KiB/MiB/GiB"
        ),
        theme.dim(),
    ));
    frame.render_widget(Paragraph::new(vec![side("A", &c.a), side("B", &c.b), info]), top);
    let lines = body_lines(c, view, body.width);
    let max_scroll = lines.len().saturating_sub(body.height as usize);
    view.scroll = view.scroll.min(max_scroll);
    frame.render_widget(Paragraph::new(lines).scroll((view.scroll as u16, 0)), body);
    let keys = " q quit  ↑↓ PgUp PgDn Home End scroll  Tab 0-6 pane  / filter (Enter keeps, Esc clears)";
    frame.render_widget(
        Paragraph::new(Span::styled(format::shorten(keys, bottom.width as usize), theme.dim())),
        bottom,
    );
}

pub fn run(c: &Comparison, color: bool) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut screen = CompareScreen { c, view: CompareView { color, ..Default::default() } };
    runtime.block_on(async { event_loop::run(event_loop::Signals::hook()?, &mut screen).await })
}

/// The compare screen: one comparison, no news; keys scroll and filter it.
struct CompareScreen<'a> {
    c: &'a Comparison,
    view: CompareView,
}

impl Screen for CompareScreen<'_> {
    fn tick(&self) -> Duration {
        Duration::from_secs(60)
    }

    async fn next(&mut self) -> anyhow::Result<Step> {
        std::future::pending().await
    }

    fn key(&mut self, key: KeyEvent, height: u16) -> anyhow::Result<Step> {
        Ok(match self.view.handle_key(key, page(height)) {
            ViewAction::Quit => Step::Quit,
            // Drawn after every key, as before.
            ViewAction::None | ViewAction::Redraw => Step::Redraw,
        })
    }

    fn draw(&mut self, frame: &mut Frame) {
        draw(frame, self.c, &mut self.view);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    #[test]
    fn keys_scroll_pick_a_pane_filter_and_quit() {
        let mut v = CompareView::default();
        v.handle_key(key(KeyCode::PageDown), 20);
        v.handle_key(key(KeyCode::Down), 20);
        assert_eq!(v.scroll, 21);
        v.handle_key(key(KeyCode::Home), 20);
        assert_eq!(v.scroll, 0);
        v.handle_key(key(KeyCode::Tab), 20);
        assert_eq!(v.pane, Some(0));
        v.handle_key(key(KeyCode::BackTab), 20);
        v.handle_key(key(KeyCode::BackTab), 20);
        assert_eq!(v.pane, Some(5));
        v.handle_key(key(KeyCode::Char('3')), 20);
        assert_eq!(v.pane, Some(2));
        v.handle_key(key(KeyCode::Char('0')), 20);
        assert_eq!(v.pane, None);
        v.handle_key(key(KeyCode::Char('/')), 20);
        for c in "qwk".chars() {
            v.handle_key(key(KeyCode::Char(c)), 20);
        }
        assert_eq!(v.filter, "qwk", "typing a filter does not quit");
        v.handle_key(key(KeyCode::Enter), 20);
        assert_eq!(v.handle_key(key(KeyCode::Esc), 20), ViewAction::Redraw);
        assert_eq!(v.filter, "");
        assert_eq!(v.handle_key(key(KeyCode::Char('q')), 20), ViewAction::Quit);
    }
}
