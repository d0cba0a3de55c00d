//! I/O wait on screen: the process pane's `IO wait` column (src/model/iowait.rs: the busiest
//! thread's % of the interval), declared with the pane's other columns and sortable (`s`).

use std::collections::HashMap;

use ratatui::style::Style;

use crate::model::iowait::IowaitModel;
use crate::model::ProcessModel;
use crate::ui::columns::Column;
use crate::ui::theme::{Level, Theme};

/// Thresholds of the column's colour, % of the interval.
const WARN_PCT: f64 = 20.0;
const CRIT_PCT: f64 = 60.0;

/// Each process's IO wait, % of the interval (its busiest thread's); empty without the probes.
pub fn pct_by_pid(w: Option<&IowaitModel>) -> HashMap<u32, f64> {
    w.map(|w| w.processes.iter().map(|p| (p.pid, p.wait_pct)).collect()).unwrap_or_default()
}

/// The `IO wait` column titled `title` of the process pane's rows `procs`: `-` for an exited row,
/// and for every row without the probes (`w` None: unknown, not zero).
pub fn column(title: String, procs: &[&ProcessModel], w: Option<&IowaitModel>, theme: &Theme) -> Column {
    let pct = pct_by_pid(w);
    let mut c = Column::new(title, 0).min_width(7);
    c.cells = procs
        .iter()
        .map(|p| {
            if p.exited || w.is_none() {
                return ("-".to_string(), theme.dim());
            }
            let v = pct.get(&p.pid).copied().unwrap_or(0.0);
            let style = if v > 0.0 { theme.level(Level::of(v, WARN_PCT, CRIT_PCT)) } else { Style::new() };
            (format!("{v:.1}%"), style)
        })
        .collect();
    c
}
