//! Process pane: per-process I/O rates from /proc/PID/io, sortable and filterable.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::{Block, Paragraph};
use ratatui::Frame;

use crate::model::{Model, ProcessModel};
use crate::ui::columns::Column;
use crate::ui::format;
use crate::ui::rows;
use crate::ui::state::{Pane, ProcSort, UiState};
use crate::ui::table;
use crate::ui::theme::Theme;

/// The process pane's own state: the /proc and eBPF (`d`) tables' sort columns, one direction
/// flag for both, `a`, and the selected row (by pid; by pid and device in the eBPF table).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessesView {
    pub sort: ProcSort,
    pub io_sort: crate::ui::io_processes::IoSort,
    /// True when the sort runs against the column's natural direction.
    pub reversed: bool,
    /// `d`: disk I/O per submitter (eBPF) instead of /proc/PID/io.
    pub io_view: bool,
    /// `a`: processes without any I/O in the interval too.
    pub show_all: bool,
    pub selection: crate::ui::table::Selection,
}

impl ProcessesView {
    /// Whether the /proc table's sort puts the biggest value first.
    pub fn descending(&self) -> bool {
        self.sort.descending_by_default() != self.reversed
    }

    /// `s`: the next column of the table on screen, in its natural direction.
    pub fn next_sort(&mut self) {
        if self.io_view {
            self.io_sort = self.io_sort.next();
        } else {
            self.sort = self.sort.next();
        }
        self.reversed = false;
    }
}

/// The identities of the rows on screen, in order (what the selection follows).
pub fn row_keys(model: &Model, state: &UiState) -> Vec<String> {
    if state.views.processes.io_view {
        crate::ui::io_processes::visible(model, state)
            .iter()
            .map(|p| format!("{}:{}", p.pid, p.device))
            .collect()
    } else {
        // An exited row is told apart from its child's own row (same pid) and from others (pid 0).
        rows::visible_processes(model, state)
            .iter()
            .map(|p| if p.exited { format!("x{}:{}", p.ppid, p.pid) } else { p.pid.to_string() })
            .collect()
    }
}

pub fn title(model: &Model, state: &UiState) -> String {
    let arrow = if state.views.processes.descending() { "▼" } else { "▲" };
    let mut t = format!("Processes  sort {} {arrow}", state.views.processes.sort.label());
    if !state.filter.is_empty() || state.editing_filter() {
        t.push_str(&format!("  filter \"{}\"", state.filter));
        if state.editing_filter() {
            t.push_str(" (Enter keep, Esc clear)");
        }
    } else if !state.views.processes.show_all {
        let idle = model.processes.iter().filter(|p| !rows::has_io(p)).count();
        if idle > 0 {
            t.push_str(&format!("  {idle} without I/O hidden (a)"));
        }
    }
    crate::ui::cgroups::title_note(&mut t, state);
    t
}

pub fn render(frame: &mut Frame, area: Rect, model: &Model, state: &UiState, block: Block) {
    let theme = Theme { color: state.color };
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let procs = rows::visible_processes(model, state);
    if procs.is_empty() {
        let msg = if model.interval_s == 0.0 {
            "rates pending: the first interval is not over yet".to_string()
        } else if !state.filter.is_empty() {
            format!("no process matches \"{}\"", state.filter)
        } else {
            "no process did I/O in this interval (a: show all)".to_string()
        };
        frame.render_widget(Paragraph::new(Span::styled(msg, theme.dim())), inner);
        return;
    }
    let selected =
        (state.views.panes.focus == Pane::Processes).then_some(state.views.processes.selection.index());
    table::render(frame, inner, process_columns(&procs, model, state), &theme, selected);
}

fn process_columns(procs: &[&ProcessModel], model: &Model, state: &UiState) -> Vec<Column> {
    let theme = Theme { color: state.color };
    let u = state.units;
    let marker = if state.views.processes.descending() { "▼" } else { "▲" };
    // The sorted column carries the arrow; read+write marks both of its columns.
    let title = |name: &str, sorts: &[ProcSort]| -> String {
        if sorts.contains(&state.views.processes.sort) {
            format!("{name}{marker}")
        } else {
            name.to_string()
        }
    };
    let col = |name: String, priority: u8, f: &dyn Fn(&ProcessModel) -> f64| -> Column {
        let mut c = Column::new(name, priority);
        c.cells = procs
            .iter()
            .map(|p| {
                if p.io_readable {
                    (format::bytes(f(p), u), Style::new())
                } else {
                    // Another user's process without privileges: unknown, not zero.
                    ("-".to_string(), theme.dim())
                }
            })
            .collect();
        c
    };
    let mut pid = Column::new(title("pid", &[ProcSort::Pid]), 0).min_width(7);
    pid.cells = procs
        .iter()
        .map(|p| match (p.exited, p.pid) {
            (true, 0) => ("-".to_string(), theme.dim()),
            (true, pid) => (pid.to_string(), theme.dim()),
            (false, pid) => (pid.to_string(), Style::new()),
        })
        .collect();
    // comm is at most 15 characters (TASK_COMM_LEN): that width always, so columns do not jump.
    let mut comm = Column::new(title("comm", &[ProcSort::Comm]), 0).left().min_width(15);
    comm.cells = procs.iter().map(|p| (comm_label(p), Style::new())).collect();
    let rate_title =
        |name: &str| if u == format::Units::Raw { format!("{name} B/s") } else { format!("{name}/s") };
    let mut columns = vec![
        pid,
        comm,
        col(title(&rate_title("read"), &[ProcSort::Read, ProcSort::Disk]), 0, &|p| p.read_bytes_s),
        col(title(&rate_title("write"), &[ProcSort::Write, ProcSort::Disk]), 0, &|p| p.write_bytes_s),
        col(title(&rate_title("rchar"), &[ProcSort::Rchar]), 1, &|p| p.rchar_s),
        col(title(&rate_title("wchar"), &[ProcSort::Wchar]), 1, &|p| p.wchar_s),
        col(title(&rate_title("cancelled"), &[ProcSort::Cancelled]), 2, &|p| p.cancelled_write_bytes_s),
        col(title(&rate_title("cache est."), &[ProcSort::CacheEstimate]), 1, &|p| p.cache_estimate_bytes_s),
    ];
    if let Some(w) = &model.iowait {
        columns.push(crate::ui::iowait::column(procs, w, &theme));
    }
    columns
}

/// A row's comm; an exited row says so and whose children it was.
pub fn comm_label(p: &ProcessModel) -> String {
    match (p.exited, &*p.comm) {
        (false, comm) => comm.to_string(),
        (true, crate::model::processes::EXITED) => {
            format!("{} of {}", crate::model::processes::EXITED, p.ppid)
        }
        (true, comm) => format!("{comm} <exited, of {}>", p.ppid),
    }
}
