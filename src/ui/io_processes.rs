//! The process pane's eBPF table (`d`): disk I/O per submitting process and disk, biotop-like,
//! from the block probes. Sorted with `s`/`r`, filtered with `/` like the /proc table.

use std::cmp::Ordering;

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::model::IoProcessModel;
use crate::ui::columns::Column;
use crate::ui::format::{self, Units};
use crate::ui::table::{self, Selection, Sort, SortColumn};
use crate::ui::view::{Context, View, ViewAction};

/// The eBPF view's sort key. `s` cycles through them in this order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoSort {
    /// read + write bytes per second.
    #[default]
    Bytes,
    Read,
    Write,
    /// read + write requests per second.
    Iops,
    LatAvg,
    LatP99,
    Pid,
    Comm,
}

impl IoSort {
    const ORDER: [IoSort; 8] = [
        IoSort::Bytes,
        IoSort::Read,
        IoSort::Write,
        IoSort::Iops,
        IoSort::LatAvg,
        IoSort::LatP99,
        IoSort::Pid,
        IoSort::Comm,
    ];

    fn next_in_order(self) -> IoSort {
        let i = IoSort::ORDER.iter().position(|s| *s == self).unwrap_or(0);
        IoSort::ORDER[(i + 1) % IoSort::ORDER.len()]
    }

    pub fn descending_by_default(self) -> bool {
        !matches!(self, IoSort::Pid | IoSort::Comm)
    }

    pub fn label(self) -> &'static str {
        match self {
            IoSort::Bytes => "read+write",
            IoSort::Read => "read",
            IoSort::Write => "write",
            IoSort::Iops => "iops",
            IoSort::LatAvg => "lat avg",
            IoSort::LatP99 => "lat p99",
            IoSort::Pid => "pid",
            IoSort::Comm => "comm",
        }
    }
}

fn compare(a: &IoProcessModel, b: &IoProcessModel, sort: IoSort) -> Ordering {
    let key = |p: &IoProcessModel| -> f64 {
        match sort {
            IoSort::Bytes => p.read_bytes_s + p.write_bytes_s,
            IoSort::Read => p.read_bytes_s,
            IoSort::Write => p.write_bytes_s,
            IoSort::Iops => p.read_iops + p.write_iops,
            IoSort::LatAvg => p.lat_avg_ms.unwrap_or(0.0),
            IoSort::LatP99 => p.lat_p99_ms.unwrap_or(0.0),
            IoSort::Pid => p.pid as f64,
            IoSort::Comm => 0.0,
        }
    };
    match sort {
        IoSort::Comm => a.comm.cmp(&b.comm),
        _ => key(a).total_cmp(&key(b)),
    }
}

impl SortColumn for IoSort {
    fn next(self) -> IoSort {
        self.next_in_order()
    }
}

/// The eBPF process table's own state: sort and the selected row (by pid and disk).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IoProcessesView {
    pub sort: Sort<IoSort>,
    pub selection: Selection,
}

impl IoProcessesView {
    /// Whether the sort puts the biggest value first.
    pub fn descending(&self) -> bool {
        self.sort.column.descending_by_default() != self.sort.reversed
    }

    /// The rows shown: matching the filter (comm, pid or device), sorted; ties by pid then device.
    pub fn visible<'a>(&self, ctx: &Context<'a>) -> Vec<&'a IoProcessModel> {
        let model = ctx.model;
        let needle = ctx.filter.to_lowercase();
        let mut rows: Vec<&IoProcessModel> = model
            .io_processes
            .iter()
            .filter(|p| {
                needle.is_empty()
                    || p.comm.to_lowercase().contains(&needle)
                    || p.pid.to_string().contains(&needle)
                    || p.device.to_lowercase().contains(&needle)
            })
            .filter(|p| ctx.admits(p.pid, Some(p.cgroup_id)))
            .collect();
        let descending = self.descending();
        rows.sort_by(|a, b| {
            let ord = compare(a, b, self.sort.column);
            let ord = if descending { ord.reverse() } else { ord };
            ord.then(a.pid.cmp(&b.pid)).then(a.device.cmp(&b.device))
        });
        rows
    }

    /// The selected row's pid (the last row's when the selection is past them).
    pub fn selected_pid(&self, ctx: &Context) -> Option<u32> {
        let v = self.visible(ctx);
        v.get(self.selection.index().min(v.len().saturating_sub(1))).map(|p| p.pid)
    }
}

impl View for IoProcessesView {
    fn title(&self, ctx: &Context) -> String {
        let model = ctx.model;
        let descending = self.descending();
        let arrow = if descending { "▼" } else { "▲" };
        let fallback = crate::model::panes::fallback_note(&model.bpf.panes, &["io_processes"]);
        let mut t = format!(
            "Disk I/O by submitter (eBPF){fallback}  d: /proc view  sort {} {arrow}",
            self.sort.column.label()
        );
        if !ctx.filter.is_empty() || ctx.editing_filter {
            t.push_str(&format!("  filter \"{}\"", ctx.filter));
        }
        let exited = model.io_processes.iter().filter(|p| p.exited).count();
        if exited > 0 {
            t.push_str(&format!("  {exited} exited (shown this interval)"));
        }
        ctx.cgroup_note(&mut t);
        t
    }

    fn render(&self, frame: &mut Frame, inner: Rect, ctx: &Context) {
        let (model, theme) = (ctx.model, ctx.theme);
        let rows = self.visible(ctx);
        if rows.is_empty() {
            let missing = crate::model::panes::not_live(&model.bpf.panes, "io_processes");
            let msg = if !model.bpf.enabled {
                format!(
                    "eBPF is off: {}",
                    format::text(model.bpf.reason.as_deref().unwrap_or("no reason given"))
                )
            } else if let Some(p) = missing {
                format!(
                    "no submitters on this kernel: {}",
                    format::text(p.reason.as_deref().unwrap_or_default())
                )
            } else if model.interval_s == 0.0 {
                "rates pending: the first interval is not over yet".to_string()
            } else if !ctx.filter.is_empty() {
                format!("no submitter matches \"{}\"", ctx.filter)
            } else {
                "no disk I/O completed in this interval".to_string()
            };
            frame.render_widget(Paragraph::new(Span::styled(msg, theme.dim())), inner);
            return;
        }
        table::render(frame, inner, self.columns(&rows, ctx), &theme, &self.selection, ctx.focused);
    }

    /// `s`, `r` and the selection.
    fn handle_key(&mut self, code: crossterm::event::KeyCode) -> Option<ViewAction> {
        table::sorted_table_key(code, &mut self.sort, &mut self.selection).then_some(ViewAction::Redraw)
    }

    fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[("↑↓", "process"), ("s r", "sort / reverse"), ("d", "/proc view"), ("f", "its files")]
    }

    fn follow(&mut self, ctx: &Context) {
        let keys: Vec<String> = self.visible(ctx).iter().map(|p| format!("{}:{}", p.pid, p.device)).collect();
        self.selection.follow(keys);
    }
}

impl IoProcessesView {
    /// The table's columns for `rows` (also used by the device detail for its submitters).
    pub fn columns(&self, rows: &[&IoProcessModel], ctx: &Context) -> Vec<Column> {
        let theme = ctx.theme;
        let u = ctx.units;
        let descending = self.descending();
        let marker = if descending { "▼" } else { "▲" };
        let title = |name: &str, sorts: &[IoSort]| -> String {
            if sorts.contains(&self.sort.column) {
                format!("{name}{marker}")
            } else {
                name.to_string()
            }
        };
        let col = |name: String, priority: u8, f: &dyn Fn(&IoProcessModel) -> String| -> Column {
            let mut c = Column::new(name, priority);
            c.cells = rows.iter().map(|p| (f(p), Style::new())).collect();
            c
        };
        let ms = |v: Option<f64>| v.map(|v| format::millis(v, u)).unwrap_or_else(|| "-".into());
        let rate = |name: &str| if u == Units::Raw { format!("{name} B/s") } else { format!("{name}/s") };
        let mut pid = Column::new(title("pid", &[IoSort::Pid]), 0).min_width(7);
        pid.cells = rows.iter().map(|p| (p.pid.to_string(), Style::new())).collect();
        let mut comm = Column::new(title("comm", &[IoSort::Comm]), 0).left().min_width(15).key();
        comm.cells = rows
            .iter()
            .map(|p| {
                // Writeback by kernel threads is dimmed and marked: work done on behalf of others. A
                // loop device's worker is named by its device (`[loop2]`), not marked writeback.
                let name = crate::model::names::person_name(&p.comm);
                let (text, style) = match (p.kind, p.exited) {
                    ("writeback", _) => (format!("{name} [wb]"), theme.dim()),
                    ("loop", _) => (name.into_owned(), theme.dim()),
                    (_, true) => (format!("{name} (exited)"), Style::new()),
                    _ => (name.into_owned(), Style::new()),
                };
                (text, style)
            })
            .collect();
        let mut device = Column::new("disk", 0).left().min_width(6);
        device.cells = rows.iter().map(|p| (format::shorten(&p.device, 10), Style::new())).collect();
        vec![
            pid,
            comm,
            device,
            col(title(&rate("read"), &[IoSort::Read, IoSort::Bytes]), 0, &|p| {
                format::bytes(p.read_bytes_s, u)
            }),
            col(title(&rate("write"), &[IoSort::Write, IoSort::Bytes]), 0, &|p| {
                format::bytes(p.write_bytes_s, u)
            }),
            col(title("r/s", &[IoSort::Iops]), 1, &|p| format::count(p.read_iops, u)),
            col(title("w/s", &[IoSort::Iops]), 1, &|p| format::count(p.write_iops, u)),
            col(title("lat avg", &[IoSort::LatAvg]), 2, &|p| ms(p.lat_avg_ms)),
            col(title("lat p99", &[IoSort::LatP99]), 2, &|p| ms(p.lat_p99_ms)),
            col("sync%".into(), 3, &|p| format::percent(p.sync_pct)),
            col("cgroup".into(), 4, &|p| format::shorten(&p.cgroup, 40)).left(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;

    fn row(pid: u32, comm: &str, device: &str, read: f64, write: f64, p99: Option<f64>) -> IoProcessModel {
        IoProcessModel {
            pid,
            comm: comm.into(),
            device: device.into(),
            kind: "process",
            read_bytes_s: read,
            write_bytes_s: write,
            lat_p99_ms: p99,
            ..Default::default()
        }
    }

    fn model() -> Model {
        Model {
            io_processes: vec![
                row(10, "fio", "nvme0n1", 100.0, 0.0, Some(2.0)),
                row(20, "postgres", "vda", 10.0, 500.0, Some(9.0)),
                row(30, "dd", "vda", 0.0, 50.0, None),
            ],
            ..Default::default()
        }
    }

    fn pids(m: &Model, v: &IoProcessesView, filter: &str) -> Vec<u32> {
        let h = crate::ui::history::History::default();
        v.visible(&Context { filter, ..Context::new(m, &h) }).iter().map(|p| p.pid).collect()
    }

    #[test]
    fn sorts_and_filters() {
        let m = model();
        let mut v = IoProcessesView::default();
        assert_eq!(pids(&m, &v, ""), [20, 10, 30]);
        v.sort.column = IoSort::LatP99;
        assert_eq!(pids(&m, &v, ""), [20, 10, 30]);
        v.handle_key(crossterm::event::KeyCode::Char('r'));
        assert_eq!(pids(&m, &v, ""), [30, 10, 20]);
        v.sort.reversed = false;
        v.sort.column = IoSort::Comm;
        assert_eq!(pids(&m, &v, ""), [30, 10, 20]);
        // The filter matches comm, pid or disk.
        assert_eq!(pids(&m, &v, "VDA"), [30, 20]);
        assert_eq!(pids(&m, &v, "fi"), [10]);
    }

    #[test]
    fn sort_keys_cycle() {
        let mut s = IoSort::default();
        for _ in 0..IoSort::ORDER.len() {
            s = SortColumn::next(s);
        }
        assert_eq!(s, IoSort::Bytes);
        assert!(!IoSort::Pid.descending_by_default());
    }
}
