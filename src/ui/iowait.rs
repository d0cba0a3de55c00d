//! I/O wait on screen: the process pane's `IO wait` column (src/model/iowait.rs: the busiest
//! thread's % of the interval).

use ratatui::style::Style;

use crate::model::iowait::IowaitModel;
use crate::model::ProcessModel;
use crate::ui::columns::Column;
use crate::ui::theme::{Level, Theme};

/// Thresholds of the column's colour, % of the interval.
const WARN_PCT: f64 = 20.0;
const CRIT_PCT: f64 = 60.0;

/// The `IO wait` column of the process pane's rows `procs` (an exited row has none: `-`).
pub fn column(procs: &[&ProcessModel], w: &IowaitModel, theme: &Theme) -> Column {
    let pct: std::collections::HashMap<u32, f64> = w.processes.iter().map(|p| (p.pid, p.wait_pct)).collect();
    let mut c = Column::new("IO wait".to_string(), 1).min_width(7);
    c.cells = procs
        .iter()
        .map(|p| {
            if p.exited {
                return ("-".to_string(), theme.dim());
            }
            let v = pct.get(&p.pid).copied().unwrap_or(0.0);
            let style = if v > 0.0 { theme.level(Level::of(v, WARN_PCT, CRIT_PCT)) } else { Style::new() };
            (format!("{v:.1}%"), style)
        })
        .collect();
    c
}
