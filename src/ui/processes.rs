//! Process pane: per-process I/O rates from /proc/PID/io, sortable and filterable.

use std::cmp::Ordering;

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::model::ProcessModel;
use crate::ui::columns::Column;
use crate::ui::format;
use crate::ui::table::{self, Selection, Sort, SortColumn};
use crate::ui::view::{Context, View, ViewAction};

/// The process pane's sort key. `s` cycles through them in this order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProcSort {
    /// read_bytes + write_bytes per second: who makes the disk busy.
    #[default]
    Disk,
    Read,
    Write,
    Rchar,
    Wchar,
    Cancelled,
    CacheEstimate,
    /// % of the interval the busiest thread was blocked on I/O (eBPF, src/model/iowait.rs).
    IoWait,
    Pid,
    Comm,
}

impl ProcSort {
    pub const ORDER: [ProcSort; 10] = [
        ProcSort::Disk,
        ProcSort::Read,
        ProcSort::Write,
        ProcSort::Rchar,
        ProcSort::Wchar,
        ProcSort::Cancelled,
        ProcSort::CacheEstimate,
        ProcSort::IoWait,
        ProcSort::Pid,
        ProcSort::Comm,
    ];

    fn next_in_order(self) -> ProcSort {
        let i = ProcSort::ORDER.iter().position(|s| *s == self).unwrap_or(0);
        ProcSort::ORDER[(i + 1) % ProcSort::ORDER.len()]
    }

    /// Rates sort biggest first, pid and name in ascending order; `r` flips either.
    pub fn descending_by_default(self) -> bool {
        !matches!(self, ProcSort::Pid | ProcSort::Comm)
    }

    pub fn label(self) -> &'static str {
        match self {
            ProcSort::Disk => "read+write",
            ProcSort::Read => "read",
            ProcSort::Write => "write",
            ProcSort::Rchar => "rchar",
            ProcSort::Wchar => "wchar",
            ProcSort::Cancelled => "cancelled",
            ProcSort::CacheEstimate => "cache est.",
            ProcSort::IoWait => "IO wait",
            ProcSort::Pid => "pid",
            ProcSort::Comm => "comm",
        }
    }
}

impl SortColumn for ProcSort {
    fn next(self) -> ProcSort {
        self.next_in_order()
    }
}

/// The /proc process table's own state: sort, `a`, and the selected row (by pid).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessesView {
    pub sort: Sort<ProcSort>,
    /// `a`: processes without any I/O in the interval too.
    pub show_all: bool,
    /// `L`: the command line (`postgres: checkpointer`) in the name column instead of the comm.
    pub command_line: bool,
    pub selection: Selection,
}

impl ProcessesView {
    /// Whether the sort puts the biggest value first.
    pub fn descending(&self) -> bool {
        self.sort.column.descending_by_default() != self.sort.reversed
    }

    /// Processes with I/O (all with `a`), or, when a filter is set, every process that matches it,
    /// idle or not (the user asked for it by name). Sorted by the chosen column; ties by pid for
    /// stable rows.
    pub fn visible<'a>(&self, ctx: &Context<'a>) -> Vec<&'a ProcessModel> {
        let model = ctx.model;
        let mut rows: Vec<&ProcessModel> = model
            .processes
            .iter()
            .filter(|p| {
                if ctx.filter.is_empty() {
                    self.show_all || has_io(p)
                } else {
                    matches_filter(p, ctx.filter)
                }
            })
            .filter(|p| ctx.admits(p.pid, None))
            .collect();
        let descending = self.descending();
        let io_wait = match self.sort.column {
            ProcSort::IoWait => crate::ui::iowait::pct_by_pid(model.iowait.as_ref()),
            _ => Default::default(),
        };
        let io_wait = |p: &ProcessModel| io_wait.get(&p.pid).copied().unwrap_or(0.0);
        rows.sort_by(|a, b| {
            let ord = compare(a, b, self.sort.column, &io_wait);
            let ord = if descending { ord.reverse() } else { ord };
            ord.then(a.pid.cmp(&b.pid))
        });
        rows
    }

    /// The selected row's pid (the last row's when the selection is past them).
    pub fn selected_pid(&self, ctx: &Context) -> Option<u32> {
        let v = self.visible(ctx);
        v.get(self.selection.index().min(v.len().saturating_sub(1))).map(|p| p.pid)
    }
}

impl View for ProcessesView {
    fn title(&self, ctx: &Context) -> String {
        let arrow = if self.descending() { "▼" } else { "▲" };
        let mut t = format!("Processes  sort {} {arrow}", self.sort.column.label());
        if !ctx.filter.is_empty() || ctx.editing_filter {
            t.push_str(&format!("  filter \"{}\"", ctx.filter));
            if ctx.editing_filter {
                t.push_str(" (Enter keep, Esc clear)");
            }
        } else if !self.show_all {
            let idle = ctx.model.processes.iter().filter(|p| !has_io(p)).count();
            if idle > 0 {
                t.push_str(&format!("  {idle} without I/O hidden (a)"));
            }
        }
        if self.sort.column == ProcSort::IoWait && ctx.model.iowait.is_none() {
            t.push_str("  IO wait needs the eBPF probes");
        }
        ctx.cgroup_note(&mut t);
        t
    }

    fn render(&self, frame: &mut Frame, inner: Rect, ctx: &Context) {
        let theme = ctx.theme;
        let procs = self.visible(ctx);
        if procs.is_empty() {
            let msg = if ctx.model.interval_s == 0.0 {
                "rates pending: the first interval is not over yet".to_string()
            } else if !ctx.filter.is_empty() {
                format!("no process matches \"{}\"", ctx.filter)
            } else {
                "no process did I/O in this interval (a: show all)".to_string()
            };
            frame.render_widget(Paragraph::new(Span::styled(msg, theme.dim())), inner);
            return;
        }
        table::render(frame, inner, self.columns(&procs, ctx), &theme, &self.selection, ctx.focused);
    }

    /// `s`, `r`, `a` and the selection.
    fn handle_key(&mut self, code: crossterm::event::KeyCode) -> Option<ViewAction> {
        use crossterm::event::KeyCode;
        match code {
            KeyCode::Char('a') => self.show_all = !self.show_all,
            KeyCode::Char('L') => self.command_line = !self.command_line,
            code if table::sorted_table_key(code, &mut self.sort, &mut self.selection) => {}
            _ => return None,
        }
        Some(ViewAction::Redraw)
    }

    fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("↑↓", "process"),
            ("s r", "sort / reverse"),
            ("a", "idle too"),
            ("L", "command line"),
            ("d", "eBPF submitters"),
            ("f", "its files"),
        ]
    }

    /// An exited row is told apart from its child's own row (same pid) and from others (pid 0).
    fn follow(&mut self, ctx: &Context) {
        let keys: Vec<String> = self
            .visible(ctx)
            .iter()
            .map(|p| if p.exited { format!("x{}:{}", p.ppid, p.pid) } else { p.pid.to_string() })
            .collect();
        self.selection.follow(keys);
    }
}

/// True when the process did any I/O in the interval (disk or syscall level).
pub fn has_io(p: &ProcessModel) -> bool {
    p.read_bytes_s + p.write_bytes_s + p.rchar_s + p.wchar_s + p.cancelled_write_bytes_s > 0.0
}

/// True when `filter` is a case-insensitive substring of the comm or a substring of the pid.
pub fn matches_filter(p: &ProcessModel, filter: &str) -> bool {
    if filter.is_empty() {
        return true;
    }
    let needle = filter.to_lowercase();
    p.comm.to_lowercase().contains(&needle) || p.pid.to_string().contains(&needle)
}

/// `io_wait`: a process's IO wait % (0 without the probes), for [`ProcSort::IoWait`].
fn compare(
    a: &ProcessModel,
    b: &ProcessModel,
    sort: ProcSort,
    io_wait: &dyn Fn(&ProcessModel) -> f64,
) -> Ordering {
    let key = |p: &ProcessModel| -> f64 {
        match sort {
            ProcSort::Disk => p.read_bytes_s + p.write_bytes_s,
            ProcSort::Read => p.read_bytes_s,
            ProcSort::Write => p.write_bytes_s,
            ProcSort::Rchar => p.rchar_s,
            ProcSort::Wchar => p.wchar_s,
            ProcSort::Cancelled => p.cancelled_write_bytes_s,
            ProcSort::CacheEstimate => p.cache_estimate_bytes_s,
            ProcSort::IoWait => io_wait(p),
            ProcSort::Pid => p.pid as f64,
            ProcSort::Comm => 0.0,
        }
    };
    match sort {
        ProcSort::Comm => a.comm.cmp(&b.comm),
        _ => key(a).total_cmp(&key(b)),
    }
}

impl ProcessesView {
    fn columns(&self, procs: &[&ProcessModel], ctx: &Context) -> Vec<Column> {
        let theme = ctx.theme;
        let u = ctx.units;
        let marker = if self.descending() { "▼" } else { "▲" };
        // The sorted column carries the arrow; read+write marks both of its columns.
        let title = |name: &str, sorts: &[ProcSort]| -> String {
            if sorts.contains(&self.sort.column) {
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
        // The user owning the process, cut at 9 like top's: dropped first when space runs out;
        // absent when no process has one (a recording made before users were read).
        let mut user = Column::new("USER", 3).left().min_width(8).max_width(9);
        user.cells = procs
            .iter()
            .map(|p| match &p.user {
                Some(u) => (u.to_string(), Style::new()),
                None => ("-".to_string(), theme.dim()),
            })
            .collect();
        // comm is at most 15 characters (TASK_COMM_LEN): that width always, so columns do not jump.
        // With `L` the command line instead (escaped by the table, cut to the space left).
        let name = if self.command_line { "command" } else { "comm" };
        let mut comm = Column::new(title(name, &[ProcSort::Comm]), 0).left().min_width(15).key();
        comm.cells = procs
            .iter()
            .map(|p| (if self.command_line { command_label(p) } else { comm_label(p) }, Style::new()))
            .collect();
        let rate_title =
            |name: &str| if u == format::Units::Raw { format!("{name} B/s") } else { format!("{name}/s") };
        let has_users = ctx.model.processes.iter().any(|p| p.user.is_some());
        let mut columns = vec![pid];
        columns.extend(has_users.then_some(user));
        columns.extend([
            comm,
            col(title(&rate_title("read"), &[ProcSort::Read, ProcSort::Disk]), 0, &|p| p.read_bytes_s),
            col(title(&rate_title("write"), &[ProcSort::Write, ProcSort::Disk]), 0, &|p| p.write_bytes_s),
        ]);
        // IO wait: with the probes, or when sorted by it (then `-`: unknown without them).
        let iowait = ctx.model.iowait.as_ref();
        if iowait.is_some() || self.sort.column == ProcSort::IoWait {
            columns.push(crate::ui::iowait::column(
                title("IO wait", &[ProcSort::IoWait]),
                procs,
                iowait,
                &theme,
            ));
        }
        columns.extend([
            col(title(&rate_title("rchar"), &[ProcSort::Rchar]), 1, &|p| p.rchar_s),
            col(title(&rate_title("wchar"), &[ProcSort::Wchar]), 1, &|p| p.wchar_s),
            col(title(&rate_title("cancelled"), &[ProcSort::Cancelled]), 2, &|p| p.cancelled_write_bytes_s),
            col(title(&rate_title("cache est."), &[ProcSort::CacheEstimate]), 1, &|p| {
                p.cache_estimate_bytes_s
            }),
        ]);
        columns
    }
}

/// A row's name for people ([`ProcessModel::name`]); an exited row says so and whose children it
/// was.
pub fn comm_label(p: &ProcessModel) -> String {
    match (p.exited, &*p.name()) {
        (false, comm) => comm.to_string(),
        (true, crate::model::processes::EXITED) => {
            format!("{} of {}", crate::model::processes::EXITED, p.ppid)
        }
        (true, comm) => format!("{comm} <exited, of {}>", p.ppid),
    }
}

/// The name column with `L`: the command line, or the comm where there is none (a kernel thread,
/// an exited row, a process whose command line was not read yet).
pub fn command_label(p: &ProcessModel) -> String {
    match p.cmdline.as_deref() {
        Some(cmd) if !p.exited && !cmd.is_empty() => cmd.to_string(),
        _ => comm_label(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;
    use crate::ui::history::History;

    fn proc(pid: u32, comm: &str, read: f64, write: f64) -> ProcessModel {
        ProcessModel {
            pid,
            comm: comm.into(),
            read_bytes_s: read,
            write_bytes_s: write,
            io_readable: true,
            user: Some("root".into()),
            ..Default::default()
        }
    }

    #[test]
    fn user_column_only_when_users_were_read_and_l_shows_command_lines() {
        let (mut m, h) = (model(), History::default());
        m.processes[1].cmdline = Some("postgres: checkpointer".into());
        m.processes[4].cmdline = Some("".into());
        let mut v = ProcessesView::default();
        let titles = |v: &ProcessesView, m: &Model| -> Vec<String> {
            let ctx = Context::new(m, &h);
            v.columns(&v.visible(&ctx), &ctx).into_iter().map(|c| c.title).collect()
        };
        assert_eq!(titles(&v, &m)[..3], ["pid", "USER", "comm"]);
        assert_eq!(v.handle_key(crossterm::event::KeyCode::Char('L')), Some(ViewAction::Redraw));
        assert_eq!(titles(&v, &m)[2], "command");
        let ctx = Context::new(&m, &h);
        let cols = v.columns(&v.visible(&ctx), &ctx);
        let names: Vec<&str> = cols[2].cells.iter().map(|(c, _)| c.as_str()).collect();
        // Fiona, fio: not read yet; postgres: its command line; the kworker (empty): its comm.
        assert_eq!(names, ["Fiona", "fio", "postgres: checkpointer", "kworker/u8:2"]);
        for p in &mut m.processes {
            p.user = None;
        }
        assert_eq!(titles(&v, &m)[..2], ["pid", "command"], "no user read: no USER column");
    }

    fn pids(rows: &[&ProcessModel]) -> Vec<u32> {
        rows.iter().map(|p| p.pid).collect()
    }

    fn model() -> Model {
        Model {
            processes: vec![
                proc(10, "fio", 0.0, 100.0),
                proc(20, "postgres", 50.0, 10.0),
                proc(30, "sleep", 0.0, 0.0),
                proc(40, "Fiona", 200.0, 0.0),
                proc(1234, "kworker/u8:2", 0.0, 60.0),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn default_sort_is_read_plus_write_descending_and_idle_processes_are_hidden() {
        let (m, h) = (model(), History::default());
        let ctx = Context::new(&m, &h);
        // fio 100, postgres 60 (50+10), Fiona 200, kworker 60: ties broken by pid.
        assert_eq!(pids(&ProcessesView::default().visible(&ctx)), vec![40, 10, 20, 1234]);
    }

    #[test]
    fn reverse_and_other_columns() {
        let (m, h) = (model(), History::default());
        let ctx = Context::new(&m, &h);
        let mut v = ProcessesView::default();
        v.sort.reversed = true;
        assert_eq!(pids(&v.visible(&ctx)), vec![20, 1234, 10, 40]);
        v.sort.reversed = false;
        v.sort.column = ProcSort::Write;
        assert_eq!(pids(&v.visible(&ctx)), vec![10, 1234, 20, 40]);
        v.sort.column = ProcSort::Comm;
        // Byte order: upper case sorts before lower case.
        assert_eq!(pids(&v.visible(&ctx)), vec![40, 10, 1234, 20]);
        v.sort.column = ProcSort::Pid;
        v.show_all = true;
        assert_eq!(pids(&v.visible(&ctx)), vec![10, 20, 30, 40, 1234]);
    }

    #[test]
    fn filter_matches_comm_case_insensitively_or_pid_and_includes_idle_matches() {
        let (m, h) = (model(), History::default());
        let v = ProcessesView::default();
        let with = |filter: &'static str| pids(&v.visible(&Context { filter, ..Context::new(&m, &h) }));
        assert_eq!(with("FI"), vec![40, 10]);
        assert_eq!(with("123"), vec![1234]);
        assert_eq!(with("sleep"), vec![30], "an idle match is still shown");
        assert!(with("nothing").is_empty());
    }

    #[test]
    fn io_wait_sorts_by_the_busiest_threads_share_and_is_a_declared_column() {
        use crate::model::iowait::{IowaitModel, IowaitProcessModel};
        let mut m = model();
        let wait = |pid, wait_pct| IowaitProcessModel { pid, wait_pct, ..Default::default() };
        let mut v = ProcessesView::default();
        v.sort.column = ProcSort::IoWait;
        let h = History::default();
        // Without the probes every row is unknown: ties by pid, the column says `-`.
        let ctx = Context::new(&m, &h);
        assert_eq!(pids(&v.visible(&ctx)), vec![10, 20, 40, 1234]);
        assert!(v.title(&ctx).contains("IO wait needs the eBPF probes"));
        let procs = v.visible(&ctx);
        let cols = v.columns(&procs, &ctx);
        let io =
            cols.iter().find(|c| c.title.starts_with("IO wait")).expect("IO wait column when sorted by it");
        assert!(io.cells.iter().all(|(c, _)| c == "-"));
        // With them: the busiest thread's %, biggest first; a process that never waited is 0.
        m.iowait = Some(IowaitModel {
            processes: vec![wait(20, 35.0), wait(1234, 80.5), wait(10, 2.0)],
            ..Default::default()
        });
        let ctx = Context::new(&m, &h);
        let procs = v.visible(&ctx);
        assert_eq!(pids(&procs), vec![1234, 20, 10, 40]);
        let cols = v.columns(&procs, &ctx);
        let titles: Vec<&str> = cols.iter().map(|c| c.title.as_str()).collect();
        assert_eq!(&titles[..6], ["pid", "USER", "comm", "read/s", "write/s", "IO wait▼"]);
        let cells: Vec<&str> = cols[5].cells.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(cells, ["80.5%", "35.0%", "2.0%", "0.0%"]);
        v.sort.reversed = true;
        assert_eq!(pids(&v.visible(&ctx)), vec![40, 10, 20, 1234]);
    }

    #[test]
    fn sort_keys_cycle_through_every_column() {
        let mut s = ProcSort::default();
        for want in ProcSort::ORDER.iter().skip(1).chain([&ProcSort::Disk]) {
            s = SortColumn::next(s);
            assert_eq!(s, *want);
        }
    }
}
