//! Deltas against a baseline: `b` marks the model on screen, and until `b` clears it every pane
//! shows, instead of its usual table, its metrics then and now, the difference and the % change,
//! the biggest changes first. The metrics and their order are `compare`'s (one formula for both).

use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row, Table};
use ratatui::Frame;

use crate::model::compare::{compare_models, MetricComparison};
use crate::model::Model;
use crate::ui::format;
use crate::ui::theme::Theme;

/// The model marked with `b`.
#[derive(Clone, Debug, PartialEq)]
pub struct Baseline {
    pub model: Model,
}

/// A pane's metrics (those of the compare `groups` it shows) that differ between the baseline and
/// now, biggest relative change first.
pub fn deltas(groups: &[&str], baseline: &Baseline, model: &Model) -> Vec<MetricComparison> {
    let mut out: Vec<MetricComparison> =
        compare_models(std::slice::from_ref(&baseline.model), std::slice::from_ref(model))
            .into_iter()
            .filter(|p| groups.contains(&p.pane.as_str()))
            .flat_map(|p| {
                let prefix = if p.pane == "psi" { "psi " } else { "" };
                p.metrics.into_iter().map(move |mut m| {
                    m.metric = format!("{prefix}{}", m.metric);
                    m.label = format!("{prefix}{}", m.label);
                    m
                })
            })
            .filter(|m| m.delta != 0.0)
            .collect();
    out.sort_by(crate::model::compare::order);
    out
}

/// The title suffix of a pane showing deltas.
pub fn title(name: &str, baseline: &Baseline, utc_offset_s: i64) -> String {
    format!(
        "{name}  Δ vs baseline {} (b clears)",
        format::clock(baseline.model.header.wall_unix_ms, utc_offset_s)
    )
}

/// Draws the deltas of a pane showing the compare `groups` in `inner` (below the pane's rule).
pub fn render(
    frame: &mut Frame,
    inner: Rect,
    groups: &[&str],
    model: &Model,
    baseline: &Baseline,
    theme: Theme,
) {
    let rows = deltas(groups, baseline, model);
    if rows.is_empty() {
        let msg = Line::from(Span::styled("no change since the baseline", theme.dim()));
        frame.render_widget(Paragraph::new(msg), inner);
        return;
    }
    let name_w = inner.width.saturating_sub(5 * 10).clamp(12, 48);
    let header = Row::new(["metric", "baseline", "now", "delta", "change"]).style(theme.table_header());
    let body = rows.iter().map(|m| {
        let change = m.change_pct.map_or_else(|| "new".to_string(), |p| format!("{p:+.0}%"));
        let v = |x: f64| format::quantity(x * m.scale, m.unit);
        let delta = if m.delta > 0.0 { format!("+{}", v(m.delta)) } else { v(m.delta) };
        Row::new([
            format::name(&m.label, name_w as usize),
            format!("{:>9}", v(m.a_avg)),
            format!("{:>9}", v(m.b_avg)),
            format!("{delta:>9}"),
            format!("{change:>8}"),
        ])
    });
    let widths = [
        Constraint::Length(name_w),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(8),
    ];
    frame.render_widget(Table::new(body, widths).header(header), inner);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_of_the_focused_pane_biggest_first_unchanged_left_out() {
        let mut before = Model::default();
        before.memory.dirty = 100;
        before.memory.cached = 1000;
        before.memory.free = 50;
        let mut now = before.clone();
        now.memory.dirty = 400;
        now.memory.cached = 1100;
        let base = Baseline { model: before.clone() };
        let d = deltas(&["memory", "psi"], &base, &now);
        let names: Vec<&str> = d.iter().map(|m| m.metric.as_str()).collect();
        assert_eq!(names, ["dirty", "cached"]);
        assert_eq!((d[0].a_avg, d[0].b_avg, d[0].change_pct), (100.0, 400.0, Some(300.0)));
        let mut busy = before.clone();
        busy.memory.rates.pgpgout_kb_s = 1024.0;
        let d = deltas(&["memory", "psi"], &Baseline { model: busy }, &now);
        let paged = d.iter().find(|m| m.metric == "rates.pgpgout_kb_s").unwrap();
        assert_eq!(paged.label, "paged out/s", "a label, not the JSON key");
        // 1024 kB/s (KiB) shown in the TUI's units: 1.0M/s.
        assert_eq!(format::quantity(paged.a_avg * paged.scale, paged.unit), "1.0M/s");
        assert!(deltas(&["devices"], &base, &now).is_empty());
    }
}
