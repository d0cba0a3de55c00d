//! The process pane's eBPF view (`b`): disk I/O per submitting process and disk, biotop-like, from
//! the block probes. Sorted with `s`/`r`, filtered with `/` like the /proc view.

use std::cmp::Ordering;

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::{Block, Paragraph};
use ratatui::Frame;

use crate::model::{IoProcessModel, Model};
use crate::ui::columns::Column;
use crate::ui::format::{self, Units};
use crate::ui::state::{Pane, UiState};
use crate::ui::table;
use crate::ui::theme::Theme;

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

    pub fn next(self) -> IoSort {
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

/// The rows shown: matching the filter (comm, pid or device), sorted; ties by pid then device.
pub fn visible<'a>(model: &'a Model, state: &UiState) -> Vec<&'a IoProcessModel> {
    let needle = state.filter.to_lowercase();
    let mut rows: Vec<&IoProcessModel> = model
        .io_processes
        .iter()
        .filter(|p| {
            needle.is_empty()
                || p.comm.to_lowercase().contains(&needle)
                || p.pid.to_string().contains(&needle)
                || p.device.to_lowercase().contains(&needle)
        })
        .filter(|p| crate::ui::cgroups::admits(model, state, p.pid, Some(p.cgroup_id)))
        .collect();
    let descending = state.views.processes.io_sort.descending_by_default() != state.views.processes.reversed;
    rows.sort_by(|a, b| {
        let ord = compare(a, b, state.views.processes.io_sort);
        let ord = if descending { ord.reverse() } else { ord };
        ord.then(a.pid.cmp(&b.pid)).then(a.device.cmp(&b.device))
    });
    rows
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

pub fn title(model: &Model, state: &UiState) -> String {
    let descending = state.views.processes.io_sort.descending_by_default() != state.views.processes.reversed;
    let arrow = if descending { "▼" } else { "▲" };
    let fallback = crate::model::panes::fallback_note(&model.bpf.panes, &["io_processes"]);
    let mut t = format!(
        "Disk I/O by submitter (eBPF){fallback}  d: /proc view  sort {} {arrow}",
        state.views.processes.io_sort.label()
    );
    if !state.filter.is_empty() || state.editing_filter() {
        t.push_str(&format!("  filter \"{}\"", state.filter));
    }
    let exited = model.io_processes.iter().filter(|p| p.exited).count();
    if exited > 0 {
        t.push_str(&format!("  {exited} exited (shown this interval)"));
    }
    crate::ui::cgroups::title_note(&mut t, state);
    t
}

pub fn render(frame: &mut Frame, area: Rect, model: &Model, state: &UiState, block: Block) {
    let theme = Theme { color: state.color };
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let rows = visible(model, state);
    if rows.is_empty() {
        let missing = crate::model::panes::not_live(&model.bpf.panes, "io_processes");
        let msg = if !model.bpf.enabled {
            format!("eBPF is off: {}", format::text(model.bpf.reason.as_deref().unwrap_or("no reason given")))
        } else if let Some(p) = missing {
            format!("no submitters on this kernel: {}", format::text(p.reason.as_deref().unwrap_or_default()))
        } else if model.interval_s == 0.0 {
            "rates pending: the first interval is not over yet".to_string()
        } else if !state.filter.is_empty() {
            format!("no submitter matches \"{}\"", state.filter)
        } else {
            "no disk I/O completed in this interval".to_string()
        };
        frame.render_widget(Paragraph::new(Span::styled(msg, theme.dim())), inner);
        return;
    }
    let selected =
        (state.views.panes.focus == Pane::Processes).then_some(state.views.processes.selection.index());
    table::render(frame, inner, io_columns(&rows, state), &theme, selected);
}

/// The table's columns for `rows` (also used by the device detail for its submitters).
pub fn io_columns(rows: &[&IoProcessModel], state: &UiState) -> Vec<Column> {
    let theme = Theme { color: state.color };
    let u = state.units;
    let descending = state.views.processes.io_sort.descending_by_default() != state.views.processes.reversed;
    let marker = if descending { "▼" } else { "▲" };
    let title = |name: &str, sorts: &[IoSort]| -> String {
        if sorts.contains(&state.views.processes.io_sort) {
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
    let mut comm = Column::new(title("comm", &[IoSort::Comm]), 0).left().min_width(15);
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
        col(title(&rate("read"), &[IoSort::Read, IoSort::Bytes]), 0, &|p| format::bytes(p.read_bytes_s, u)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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

    fn pids(m: &Model, s: &UiState) -> Vec<u32> {
        visible(m, s).iter().map(|p| p.pid).collect()
    }

    #[test]
    fn sorts_and_filters() {
        let m = model();
        let mut s = UiState::new(Duration::from_secs(1), false);
        assert_eq!(pids(&m, &s), [20, 10, 30]);
        s.views.processes.io_sort = IoSort::LatP99;
        assert_eq!(pids(&m, &s), [20, 10, 30]);
        s.views.processes.reversed = true;
        assert_eq!(pids(&m, &s), [30, 10, 20]);
        s.views.processes.reversed = false;
        s.views.processes.io_sort = IoSort::Comm;
        assert_eq!(pids(&m, &s), [30, 10, 20]);
        // The filter matches comm, pid or disk.
        s.filter = "VDA".into();
        assert_eq!(pids(&m, &s), [30, 20]);
        s.filter = "fi".into();
        assert_eq!(pids(&m, &s), [10]);
    }

    #[test]
    fn sort_keys_cycle() {
        let mut s = IoSort::default();
        for _ in 0..IoSort::ORDER.len() {
            s = s.next();
        }
        assert_eq!(s, IoSort::Bytes);
        assert!(!IoSort::Pid.descending_by_default());
    }
}
