//! The cgroup view (`c`): per cgroup v2, disk I/O credited at submission, page-cache hit rate,
//! dirtying, throttling and sync-call latency (eBPF), and the cgroup's own files (io.stat or v1 blkio, PSI,
//! memory.stat). Sorted with `s`/`r`, filtered with `/` (name or path); Enter limits the process
//! panes to the selected cgroup (`C` clears that). A pure render of the model's `cgroups`.

use crossterm::event::KeyCode;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

use crate::model::cgroups::CgroupModel;
use crate::ui::columns::Column;
use crate::ui::format::{self, Units};
use crate::ui::table;
use crate::ui::theme::Level;
pub use crate::ui::view::CgroupFilter;
use crate::ui::view::{Context, View, ViewAction};

/// The view's sort key; `s` cycles through them in this order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CgroupSort {
    /// read + write bytes per second (eBPF).
    #[default]
    Bytes,
    Read,
    Write,
    Iops,
    /// Page-cache misses per second.
    Misses,
    Dirtied,
    Throttled,
    /// The longest sync call, completed or running.
    Sync,
    /// Seconds its threads were blocked on I/O in the interval (eBPF).
    IoWait,
    /// io.pressure some avg10.
    IoPressure,
    Name,
}

impl CgroupSort {
    const ORDER: [CgroupSort; 11] = [
        CgroupSort::Bytes,
        CgroupSort::Read,
        CgroupSort::Write,
        CgroupSort::Iops,
        CgroupSort::Misses,
        CgroupSort::Dirtied,
        CgroupSort::Throttled,
        CgroupSort::Sync,
        CgroupSort::IoWait,
        CgroupSort::IoPressure,
        CgroupSort::Name,
    ];

    pub fn next(self) -> CgroupSort {
        let i = CgroupSort::ORDER.iter().position(|s| *s == self).unwrap_or(0);
        CgroupSort::ORDER[(i + 1) % CgroupSort::ORDER.len()]
    }

    pub fn label(self) -> &'static str {
        match self {
            CgroupSort::Bytes => "read+write",
            CgroupSort::Read => "read",
            CgroupSort::Write => "write",
            CgroupSort::Iops => "iops",
            CgroupSort::Misses => "misses",
            CgroupSort::Dirtied => "dirtied",
            CgroupSort::Throttled => "throttled",
            CgroupSort::Sync => "sync max",
            CgroupSort::IoWait => "io wait",
            CgroupSort::IoPressure => "io psi",
            CgroupSort::Name => "name",
        }
    }

    fn key(self, c: &CgroupModel) -> f64 {
        match self {
            CgroupSort::Bytes => c.read_bytes_s + c.write_bytes_s,
            CgroupSort::Read => c.read_bytes_s,
            CgroupSort::Write => c.write_bytes_s,
            CgroupSort::Iops => c.read_iops + c.write_iops,
            CgroupSort::Misses => c.misses_s,
            CgroupSort::Dirtied => c.dirtied_pages_s,
            CgroupSort::Throttled => c.throttled_ms_s,
            CgroupSort::Sync => sync_longest(c),
            CgroupSort::IoWait => c.io_wait_s.unwrap_or(0.0),
            CgroupSort::IoPressure => c.io_pressure.as_ref().map_or(0.0, |p| p.some_avg10),
            CgroupSort::Name => 0.0,
        }
    }
}

/// The cgroup's longest sync call: completed, or running for longer.
fn sync_longest(c: &CgroupModel) -> f64 {
    c.sync_max_s.unwrap_or(0.0).max(c.sync_running_s)
}

impl crate::ui::table::SortColumn for CgroupSort {
    fn next(self) -> CgroupSort {
        CgroupSort::next(self)
    }
}

/// The cgroup view's own state: sort, the selected row (by cgroup id) and the rows on screen
/// (id, name) as of the last model, for Enter.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CgroupsView {
    pub sort: crate::ui::table::Sort<CgroupSort>,
    pub selection: crate::ui::table::Selection,
    pub rows: Vec<(u64, String)>,
}

impl CgroupsView {
    /// Whether the sort puts the biggest value first.
    fn descending(&self) -> bool {
        (self.sort.column != CgroupSort::Name) != self.sort.reversed
    }

    /// The rows shown: matching the filter (name, path or kind), sorted; ties by path.
    pub fn visible<'a>(&self, ctx: &Context<'a>) -> Vec<&'a CgroupModel> {
        let needle = ctx.filter.to_lowercase();
        let mut rows: Vec<&CgroupModel> = ctx
            .model
            .cgroups
            .iter()
            .filter(|c| {
                needle.is_empty()
                    || c.path.to_lowercase().contains(&needle)
                    || c.name.name.to_lowercase().contains(&needle)
                    || c.name.kind.contains(&needle)
            })
            .collect();
        let sort = self.sort.column;
        let descending = self.descending();
        rows.sort_by(|a, b| {
            let ord = match sort {
                CgroupSort::Name => label(a).cmp(&label(b)),
                _ => sort.key(a).total_cmp(&sort.key(b)),
            };
            let ord = if descending { ord.reverse() } else { ord };
            ord.then(a.path.cmp(&b.path))
        });
        rows
    }
}

impl View for CgroupsView {
    fn title(&self, ctx: &Context) -> String {
        let arrow = if self.descending() { "▼" } else { "▲" };
        let mut title = format!(
            "cgroups  c/Esc back  Enter: limit the panes to it  sort {} {arrow}",
            self.sort.column.label()
        );
        if !ctx.filter.is_empty() || ctx.editing_filter {
            title.push_str(&format!("  filter \"{}\"", ctx.filter));
        }
        title
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Context) {
        render(self, frame, area, ctx)
    }

    /// Esc closes, Enter limits the panes to the selected cgroup, `s`/`r` sort,
    /// j/k/arrows/PgUp/PgDn/g/G select (`c` opens and closes the view, `C` clears the panes'
    /// cgroup limit, `/` is the general filter).
    fn handle_key(&mut self, code: KeyCode) -> Option<ViewAction> {
        match code {
            KeyCode::Esc => return Some(ViewAction::Close),
            KeyCode::Enter => {
                let rows = &self.rows;
                if let Some((id, name)) = rows.get(self.selection.index().min(rows.len().saturating_sub(1))) {
                    return Some(ViewAction::LimitToCgroup(CgroupFilter { id: *id, name: name.clone() }));
                }
            }
            code if table::sorted_table_key(code, &mut self.sort, &mut self.selection) => {}
            _ => return None,
        }
        Some(ViewAction::Redraw)
    }

    fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[("↑↓", "cgroup"), ("Enter", "limit the panes to it"), ("s r", "sort / reverse"), ("c Esc", "back")]
    }

    /// The rows on screen (id, name), what Enter picks from, and the selection by cgroup id.
    fn follow(&mut self, ctx: &Context) {
        self.rows = self.visible(ctx).iter().map(|c| (c.id, label(c))).collect();
        let ids: Vec<String> = self.rows.iter().map(|(id, _)| id.to_string()).collect();
        self.selection.follow(ids);
    }
}

/// The name shown for a cgroup: the parsed name, or its path when it says nothing more.
pub fn label(c: &CgroupModel) -> String {
    if c.name.name.is_empty() {
        c.path.clone()
    } else {
        c.name.name.clone()
    }
}

fn render(view: &CgroupsView, frame: &mut Frame, area: Rect, ctx: &Context) {
    let (model, theme) = (ctx.model, ctx.theme);
    let block = Block::new()
        .borders(Borders::TOP)
        .border_style(theme.dim())
        .title(Span::styled(format!("▶ {} ", view.title(ctx)), theme.title(true)));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let rows = view.visible(ctx);
    if rows.is_empty() {
        let io = crate::model::panes::not_live(&model.bpf.panes, "cgroups_io");
        let msg = if !model.bpf.enabled {
            format!(
                "eBPF is off ({}): the cgroup view needs the block and page-cache probes (run as root)",
                crate::ui::format::text(model.bpf.reason.as_deref().unwrap_or("no reason given"))
            )
        } else if let Some(p) = io {
            format!(
                "no disk I/O per cgroup on this kernel: {}",
                crate::ui::format::text(p.reason.as_deref().unwrap_or_default())
            )
        } else if model.interval_s == 0.0 {
            "rates pending: the first interval is not over yet".to_string()
        } else if !ctx.filter.is_empty() {
            format!("no cgroup matches \"{}\"", ctx.filter)
        } else {
            "no cgroup did disk or page-cache I/O in this interval".to_string()
        };
        frame.render_widget(Paragraph::new(Span::styled(msg, theme.dim())).wrap(Wrap { trim: true }), inner);
        return;
    }
    // A pane that is not live says so on the last line.
    let missing: Vec<String> = ["cgroups_io", "cgroups_cache", "syncs"]
        .iter()
        .filter_map(|p| crate::model::panes::not_live(&model.bpf.panes, p))
        .map(|p| format!("{}: {}", p.title, crate::ui::format::text(p.reason.as_deref().unwrap_or_default())))
        .collect();
    let (table_area, note_area) = if missing.is_empty() || inner.height < 4 {
        (inner, None)
    } else {
        let [t, n] = ratatui::layout::Layout::vertical([
            ratatui::layout::Constraint::Fill(1),
            ratatui::layout::Constraint::Length(1),
        ])
        .areas(inner);
        (t, Some(n))
    };
    table::render(frame, table_area, view.columns(&rows, ctx), &theme, &view.selection, true);
    if let Some(area) = note_area {
        frame.render_widget(Paragraph::new(Span::styled(missing.join("; "), theme.dim())), area);
    }
}

impl CgroupsView {
    fn columns(&self, rows: &[&CgroupModel], ctx: &Context) -> Vec<Column> {
        let theme = ctx.theme;
        let u = ctx.units;
        let marker = if self.descending() { "▼" } else { "▲" };
        let title = |name: &str, sorts: &[CgroupSort]| -> String {
            if sorts.contains(&self.sort.column) {
                format!("{name}{marker}")
            } else {
                name.to_string()
            }
        };
        let col = |name: String, priority: u8, f: &dyn Fn(&CgroupModel) -> String| -> Column {
            let mut c = Column::new(name, priority);
            c.cells = rows.iter().map(|r| (f(r), Style::new())).collect();
            c
        };
        let rate = |name: &str| if u == Units::Raw { format!("{name} B/s") } else { format!("{name}/s") };
        let dash = || "-".to_string();
        let mut name = Column::new(title("cgroup", &[CgroupSort::Name]), 0).left().min_width(16).key();
        name.cells = rows.iter().map(|c| (format::shorten(&label(c), 64), Style::new())).collect();
        let mut kind = Column::new("kind", 2).left();
        kind.cells = rows.iter().map(|c| (c.name.kind.to_string(), theme.dim())).collect();
        let mut hit = Column::new("hit%", 0);
        hit.cells = rows
            .iter()
            .map(|c| match c.hit_pct {
                Some(h) => (format::percent(h), theme.level(Level::of(100.0 - h, 20.0, 50.0))),
                None => (dash(), theme.dim()),
            })
            .collect();
        let mut throttled = Column::new(title("thr ms/s", &[CgroupSort::Throttled]), 1);
        throttled.cells = rows
            .iter()
            .map(|c| {
                let style = if c.throttled_ms_s > 0.0 {
                    theme.level(Level::of(c.throttled_ms_s, 1.0, 100.0))
                } else {
                    theme.dim()
                };
                (format::count(c.throttled_ms_s, u), style)
            })
            .collect();
        let psi = |v: Option<&crate::model::PsiView>| v.map_or_else(dash, |p| format::percent(p.some_avg10));
        let secs = crate::ui::syncs::secs;
        let mut sync_max = Column::new(title("sync max", &[CgroupSort::Sync]), 1);
        sync_max.cells = rows
            .iter()
            .map(|c| {
                let long = crate::ui::syncs::LONG_CALL_S;
                let style = |s: f64| theme.level(Level::of(s, 0.1, long));
                match c.sync_max_s {
                    _ if c.sync_running > 0 && c.sync_running_s >= c.sync_max_s.unwrap_or(0.0) => {
                        (format!("▶{}", secs(c.sync_running_s)), style(c.sync_running_s))
                    }
                    Some(max) => (secs(max), style(max)),
                    None => (dash(), theme.dim()),
                }
            })
            .collect();
        let mut columns = vec![
            name,
            kind,
            col(title(&rate("read"), &[CgroupSort::Read, CgroupSort::Bytes]), 0, &|c| {
                format::bytes(c.read_bytes_s, u)
            }),
            col(title(&rate("write"), &[CgroupSort::Write, CgroupSort::Bytes]), 0, &|c| {
                format::bytes(c.write_bytes_s, u)
            }),
            col(title("r/s", &[CgroupSort::Iops]), 1, &|c| format::count(c.read_iops, u)),
            col(title("w/s", &[CgroupSort::Iops]), 1, &|c| format::count(c.write_iops, u)),
            hit,
            col(title("miss pg/s", &[CgroupSort::Misses]), 1, &|c| format::count(c.misses_s, u)),
            col(title("dirtied pg/s", &[CgroupSort::Dirtied]), 1, &|c| format::count(c.dirtied_pages_s, u)),
            throttled,
            col("syncs".into(), 2, &|c| {
                if c.sync_calls + u64::from(c.sync_running) == 0 {
                    dash()
                } else {
                    format::count(c.sync_calls as f64, u)
                }
            }),
            col("sync p99".into(), 1, &|c| c.sync_p99_s.map_or_else(dash, secs)),
            sync_max,
        ];
        // I/O wait (src/model/iowait.rs), with the probes (or while sorted by it).
        if ctx.model.iowait.is_some() || self.sort.column == CgroupSort::IoWait {
            let mut wait = Column::new(title("io wait", &[CgroupSort::IoWait]), 1).min_width(7);
            wait.cells = rows
                .iter()
                .map(|c| match c.io_wait_s {
                    Some(s) if s > 0.0 => {
                        (secs(s), theme.level(Level::of(s / ctx.model.interval_s.max(1e-9), 0.2, 0.6)))
                    }
                    _ => (dash(), theme.dim()),
                })
                .collect();
            let mut cause = Column::new("wait cause", 2).left().min_width(10);
            cause.cells = rows
                .iter()
                .map(|c| match c.io_wait_by_cause_s.as_ref().and_then(crate::model::iowait::top_cause) {
                    Some((name, share)) => (crate::ui::waits::cause_share(name, share), Style::new()),
                    None => (dash(), theme.dim()),
                })
                .collect();
            columns.extend([wait, cause]);
        }
        columns.extend([
            col(title("io psi", &[CgroupSort::IoPressure]), 2, &|c| psi(c.io_pressure.as_ref())),
            col("mem psi".into(), 3, &|c| psi(c.memory_pressure.as_ref())),
            col(rate("io.stat rd"), 3, &|c| {
                c.io_stat.as_ref().map_or_else(dash, |i| format::bytes(i.read_bytes_s, u))
            }),
            col(rate("io.stat wr"), 3, &|c| {
                c.io_stat.as_ref().map_or_else(dash, |i| format::bytes(i.write_bytes_s, u))
            }),
            col("file".into(), 4, &|c| {
                c.memory.as_ref().map_or_else(dash, |m| format::bytes(m.file as f64, u))
            }),
            col("mem limit".into(), 4, &|c| {
                c.memory
                    .as_ref()
                    .map_or_else(dash, |m| m.limit.map_or("none".into(), |l| format::bytes(l as f64, u)))
            }),
            col("dirty".into(), 4, &|c| {
                c.memory.as_ref().map_or_else(dash, |m| format::bytes(m.dirty as f64, u))
            }),
            col("wback".into(), 4, &|c| {
                c.memory.as_ref().map_or_else(dash, |m| format::bytes(m.writeback as f64, u))
            }),
            col("procs".into(), 5, &|c| c.pids.len().to_string()),
            col("path".into(), 6, &|c| format::shorten(&c.path, 60)).left(),
        ]);
        columns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cgroup_names;
    use crate::model::Model;

    fn cg(id: u64, path: &str, read: f64, write: f64, pids: &[u32]) -> CgroupModel {
        CgroupModel {
            id,
            path: path.into(),
            name: cgroup_names::parse(path),
            pids: pids.to_vec(),
            read_bytes_s: read,
            write_bytes_s: write,
            ..Default::default()
        }
    }

    fn model() -> Model {
        Model {
            interval_s: 1.0,
            cgroups: vec![
                cg(1, "/", 10.0, 0.0, &[1]),
                cg(2, "/system.slice/postgresql.service", 0.0, 500.0, &[20]),
                cg(3, "/system.slice/docker-0123456789abcdef0123.scope", 100.0, 0.0, &[30, 31]),
            ],
            ..Default::default()
        }
    }

    fn ids(m: &Model, v: &CgroupsView, filter: &str) -> Vec<u64> {
        let h = crate::ui::history::History::default();
        v.visible(&Context { filter, ..Context::new(m, &h) }).iter().map(|c| c.id).collect()
    }

    #[test]
    fn sorts_filters_and_enter_asks_to_limit_the_panes() {
        let m = model();
        let h = crate::ui::history::History::default();
        let mut v = CgroupsView::default();
        assert_eq!(ids(&m, &v, ""), [2, 3, 1]);
        v.handle_key(KeyCode::Char('s')); // read
        assert_eq!(ids(&m, &v, ""), [3, 1, 2]);
        v.handle_key(KeyCode::Char('r'));
        assert_eq!(ids(&m, &v, ""), [2, 1, 3]);
        assert_eq!(ids(&m, &v, "docker"), [3]);
        v.follow(&Context { filter: "docker", ..Context::new(&m, &h) });
        let limit = CgroupFilter { id: 3, name: "docker 0123456789ab".into() };
        assert_eq!(v.handle_key(KeyCode::Enter), Some(ViewAction::LimitToCgroup(limit.clone())));
        let ctx = Context { cgroup_filter: Some(&limit), ..Context::new(&m, &h) };
        assert!(ctx.admits(31, None) && !ctx.admits(20, None));
        assert!(ctx.admits(99, Some(3)) && !ctx.admits(30, Some(2)));
        assert_eq!(v.handle_key(KeyCode::Esc), Some(ViewAction::Close));
    }
}
