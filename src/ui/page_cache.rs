//! Page cache pane (cachetop-like): the system line (cachestat-like), then per process accesses,
//! misses, hit %, pages dirtied, bytes read from the cache vs from disk, and time paused by dirty
//! throttling. Without the eBPF probes it falls back to the /proc/PID/io estimate, labelled so.
//! Also the memory pane's additions: the kernel's own dirty limits and the throttling warning.

use std::cmp::Ordering;

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::model::page_cache::{PageCacheModel, PageCacheProcessModel};
use crate::model::panes::{self, PaneStatus};
use crate::model::{MemoryModel, Model, ProcessModel};
use crate::ui::columns::Column;
use crate::ui::format::{self, Units};
use crate::ui::processes::matches_filter;
use crate::ui::table;
use crate::ui::theme::{Level, Theme};
use crate::ui::view::{Context, View, ViewAction};

/// Hit rates below these are highlighted (only for processes doing a fair amount of access).
const HIT_WARN: f64 = 90.0;
const HIT_CRIT: f64 = 50.0;
/// Accesses per second below which a process's hit rate is not highlighted (a few pages of a
/// starting process say nothing).
const HIT_MIN_ACCESSES_S: f64 = 100.0;

/// The cache pane's sort key; `s` cycles through them in this order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PageCacheSort {
    /// Pages brought in from disk: who makes the disk read.
    #[default]
    Misses,
    Accesses,
    HitPct,
    Dirtied,
    Throttled,
    Pid,
    Comm,
}

impl PageCacheSort {
    const ORDER: [PageCacheSort; 7] = [
        PageCacheSort::Misses,
        PageCacheSort::Accesses,
        PageCacheSort::HitPct,
        PageCacheSort::Dirtied,
        PageCacheSort::Throttled,
        PageCacheSort::Pid,
        PageCacheSort::Comm,
    ];

    pub fn next(self) -> PageCacheSort {
        let i = PageCacheSort::ORDER.iter().position(|s| *s == self).unwrap_or(0);
        PageCacheSort::ORDER[(i + 1) % PageCacheSort::ORDER.len()]
    }

    /// Counts sort biggest first; the hit rate worst first; pid and comm ascending.
    fn ascending_by_default(self) -> bool {
        matches!(self, PageCacheSort::HitPct | PageCacheSort::Pid | PageCacheSort::Comm)
    }

    pub fn label(self) -> &'static str {
        match self {
            PageCacheSort::Misses => "misses",
            PageCacheSort::Accesses => "accesses",
            PageCacheSort::HitPct => "hit%",
            PageCacheSort::Dirtied => "dirtied",
            PageCacheSort::Throttled => "throttled",
            PageCacheSort::Pid => "pid",
            PageCacheSort::Comm => "comm",
        }
    }
}

impl crate::ui::table::SortColumn for PageCacheSort {
    fn next(self) -> PageCacheSort {
        PageCacheSort::next(self)
    }
}

/// The cache pane's own state: sort (`s`, `r` while it has the focus) and the selected row (by pid).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PageCacheView {
    pub sort: crate::ui::table::Sort<PageCacheSort>,
    pub selection: crate::ui::table::Selection,
}

impl PageCacheView {
    fn ascending(&self) -> bool {
        self.sort.column.ascending_by_default() != self.sort.reversed
    }

    /// The eBPF rows shown: matching the filter, sorted; ties by pid.
    pub fn visible_rows<'a>(&self, ctx: &Context<'a>) -> Vec<&'a PageCacheProcessModel> {
        let model = ctx.model;
        let mut rows: Vec<&PageCacheProcessModel> = model
            .cache_processes
            .iter()
            .filter(|p| {
                let probe = ProcessModel { pid: p.pid, comm: p.comm.as_str().into(), ..Default::default() };
                matches_filter(&probe, ctx.filter) && ctx.admits(p.pid, Some(p.cgroup_id))
            })
            .collect();
        let asc = self.ascending();
        rows.sort_by(|a, b| {
            let ord = compare(a, b, self.sort.column);
            let ord = if asc { ord } else { ord.reverse() };
            ord.then(a.pid.cmp(&b.pid))
        });
        rows
    }
}

fn compare(a: &PageCacheProcessModel, b: &PageCacheProcessModel, sort: PageCacheSort) -> Ordering {
    let key = |p: &PageCacheProcessModel| -> f64 {
        match sort {
            PageCacheSort::Misses => p.misses as f64,
            PageCacheSort::Accesses => p.accesses as f64,
            // No accesses sorts after every real rate.
            PageCacheSort::HitPct => p.hit_pct.unwrap_or(f64::INFINITY),
            PageCacheSort::Dirtied => p.dirtied as f64,
            PageCacheSort::Throttled => p.throttled_ms,
            PageCacheSort::Pid => p.pid as f64,
            PageCacheSort::Comm => 0.0,
        }
    };
    match sort {
        PageCacheSort::Comm => a.comm.cmp(&b.comm),
        _ => key(a).total_cmp(&key(b)),
    }
}

/// Rows of the fallback: processes whose /proc/PID/io shows reads, by estimated cache reads.
fn estimate_rows<'a>(ctx: &Context<'a>) -> Vec<&'a ProcessModel> {
    let mut rows: Vec<&ProcessModel> = ctx
        .model
        .processes
        .iter()
        .filter(|p| p.io_readable && p.rchar_s + p.read_bytes_s > 0.0)
        .filter(|p| matches_filter(p, ctx.filter))
        .filter(|p| ctx.admits(p.pid, None))
        .collect();
    rows.sort_by(|a, b| {
        (b.cache_estimate_bytes_s + b.read_bytes_s)
            .total_cmp(&(a.cache_estimate_bytes_s + a.read_bytes_s))
            .then(a.pid.cmp(&b.pid))
    });
    rows
}

impl View for PageCacheView {
    fn title(&self, ctx: &Context) -> String {
        let model = ctx.model;
        let mut t = match model.cache {
            Some(_) => {
                let arrow = if self.ascending() { "▲" } else { "▼" };
                let fallback = panes::fallback_note(&model.bpf.panes, &["cache", "direct_io"]);
                format!("Page cache  eBPF{fallback}  sort {} {arrow}", self.sort.column.label())
            }
            None if model.interval_s == 0.0 => "Page cache".to_string(),
            None if model.bpf.enabled => {
                "Page cache  estimate from /proc/PID/io (page-cache probes off)".to_string()
            }
            None => "Page cache  estimate from /proc/PID/io (eBPF off)".to_string(),
        };
        if !ctx.filter.is_empty() {
            t.push_str(&format!("  filter \"{}\"", ctx.filter));
        }
        ctx.cgroup_note(&mut t);
        t
    }

    fn render(&self, frame: &mut Frame, inner: Rect, ctx: &Context) {
        let (model, theme) = (ctx.model, ctx.theme);
        let Some(cache) = &model.cache else {
            self.render_estimate(frame, inner, ctx);
            return;
        };
        let lines = system_lines(
            cache,
            panes::not_live(&model.bpf.panes, "cache"),
            model.interval_s,
            ctx.units,
            theme,
            inner.width,
        );
        let top_h = (lines.len() as u16).min(inner.height);
        let [top, table_area] =
            Layout::vertical([Constraint::Length(top_h), Constraint::Fill(1)]).areas(inner);
        frame.render_widget(Paragraph::new(lines), top);
        let rows = self.visible_rows(ctx);
        if rows.is_empty() {
            let msg = if !ctx.filter.is_empty() {
                format!("no process matches \"{}\"", ctx.filter)
            } else {
                "no process used the page cache in this interval".to_string()
            };
            frame.render_widget(Paragraph::new(Span::styled(msg, theme.dim())), table_area);
            return;
        }
        table::render(
            frame,
            table_area,
            self.cache_columns(&rows, ctx),
            &theme,
            &self.selection,
            ctx.focused,
        );
    }

    /// `s`, `r` and the selection.
    fn handle_key(&mut self, code: crossterm::event::KeyCode) -> Option<ViewAction> {
        table::sorted_table_key(code, &mut self.sort, &mut self.selection).then_some(ViewAction::Redraw)
    }

    fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[("↑↓", "process"), ("s r", "sort / reverse")]
    }

    /// The identities (pids) of the rows the pane lists now, in order.
    fn follow(&mut self, ctx: &Context) {
        let keys: Vec<String> = match ctx.model.cache {
            Some(_) => self.visible_rows(ctx).iter().map(|p| p.pid.to_string()).collect(),
            None => estimate_rows(ctx).iter().map(|p| p.pid.to_string()).collect(),
        };
        self.selection.follow(keys);
    }
}

/// The cachestat-like line, and the cross-check's warning when the figures do not add up.
fn system_lines(
    c: &PageCacheModel,
    missing: Option<&PaneStatus>,
    interval_s: f64,
    u: Units,
    theme: Theme,
    width: u16,
) -> Vec<Line<'static>> {
    if interval_s == 0.0 {
        return vec![Line::from(Span::styled(
            "page-cache rates pending: first interval not over yet",
            theme.dim(),
        ))];
    }
    let item = |label: &str, value: String, style: Style| {
        vec![Span::styled(format!("{label} "), theme.dim()), Span::styled(value, style)]
    };
    let per_s = |v: f64| format!("{}/s", format::count(v, u));
    let hit = match (c.hit_pct, missing) {
        // Accesses are not traced on this kernel: what is missing, not a "-" or a 0 %.
        (_, Some(p)) => item("hit", format!("n/a, {}", p.needs()), theme.level(Level::Warn)),
        (Some(p), None) => item("hit", format!("{p:.1}%"), theme.level(hit_level(p, c.accesses_s))),
        (None, None) => item("hit", "-".into(), theme.dim()),
    };
    let items = vec![
        item("hits", per_s(c.hits_s), Style::new()),
        item("misses", per_s(c.misses_s), Style::new()),
        item("dirtied", per_s(c.dirtied_s), Style::new()),
        hit,
        item("evicted", per_s(c.evicted_s), Style::new()),
        item("buffers", format::bytes(c.buffers as f64, u), Style::new()),
        item("cached", format::bytes(c.cached as f64, u), theme.cached()),
    ];
    let mut lines = flow(items, width);
    if let Some(why) = &c.cross_check.mismatch {
        lines.push(Line::from(Span::styled(
            format!("check: {}", format::text(why)),
            theme.level(Level::Warn),
        )));
    }
    lines
}

fn hit_level(pct: f64, accesses_s: f64) -> Level {
    if accesses_s < HIT_MIN_ACCESSES_S {
        Level::Normal
    } else if pct < HIT_CRIT {
        Level::Critical
    } else if pct < HIT_WARN {
        Level::Warn
    } else {
        Level::Normal
    }
}

/// Items left to right, wrapping when the next does not fit.
fn flow(items: Vec<Vec<Span<'static>>>, width: u16) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let mut cur: Vec<Span<'static>> = Vec::new();
    let mut used = 0usize;
    for item in items {
        let w: usize = item.iter().map(|s| s.width()).sum();
        if !cur.is_empty() && used + 2 + w > width as usize {
            lines.push(Line::from(std::mem::take(&mut cur)));
            used = 0;
        }
        if !cur.is_empty() {
            cur.push(Span::raw("  "));
            used += 2;
        }
        cur.extend(item);
        used += w;
    }
    if !cur.is_empty() {
        lines.push(Line::from(cur));
    }
    lines
}

impl PageCacheView {
    fn cache_columns(&self, rows: &[&PageCacheProcessModel], ctx: &Context) -> Vec<Column> {
        let theme = ctx.theme;
        let u = ctx.units;
        let arrow = if self.ascending() { "▲" } else { "▼" };
        let title = |name: &str, sort: Option<PageCacheSort>| -> String {
            if sort == Some(self.sort.column) {
                format!("{name}{arrow}")
            } else {
                name.to_string()
            }
        };
        let col = |name: String, priority: u8, f: &dyn Fn(&PageCacheProcessModel) -> (String, Style)| {
            let mut c = Column::new(name, priority);
            c.cells = rows.iter().map(|p| f(p)).collect();
            c
        };
        let rate = |name: &str| if u == Units::Raw { format!("{name} B/s") } else { format!("{name}/s") };
        let plain = |s: String| (s, Style::new());
        let mut pid = Column::new(title("pid", Some(PageCacheSort::Pid)), 0).min_width(7);
        pid.cells = rows.iter().map(|p| plain(p.pid.to_string())).collect();
        let mut comm = Column::new(title("comm", Some(PageCacheSort::Comm)), 0).left().min_width(15).key();
        comm.cells = rows.iter().map(|p| plain(p.comm.clone())).collect();
        vec![
            pid,
            comm,
            col(title("acc/s", Some(PageCacheSort::Accesses)), 0, &|p| plain(format::count(p.accesses_s, u))),
            col(title("miss/s", Some(PageCacheSort::Misses)), 0, &|p| plain(format::count(p.misses_s, u))),
            col(title("hit%", Some(PageCacheSort::HitPct)), 0, &|p| match p.hit_pct {
                Some(h) => (format!("{h:.1}"), theme.level(hit_level(h, p.accesses_s))),
                None => ("-".into(), theme.dim()),
            }),
            col(rate("from cache"), 1, &|p| plain(format::bytes(p.cache_read_bytes_s, u))),
            col(rate("from disk"), 1, &|p| plain(format::bytes(p.disk_read_bytes_s, u))),
            col(title("dirtied/s", Some(PageCacheSort::Dirtied)), 1, &|p| {
                plain(format::count(p.dirtied_s, u))
            }),
            col(title("throttled ms/s", Some(PageCacheSort::Throttled)), 1, &|p| {
                let style = if p.throttled_ms > 0.0 { theme.level(Level::Critical) } else { Style::new() };
                (format::count(p.throttled_ms_s, u), style)
            }),
            col("note".into(), 2, &|p| {
                let mut notes = Vec::new();
                if p.direct_io {
                    notes.push(format!(
                        "direct I/O r {} w {}",
                        format::bytes(p.dio_read_bytes_s, u),
                        format::bytes(p.dio_write_bytes_s, u)
                    ));
                }
                if p.exited {
                    notes.push("exited".into());
                }
                (notes.join(", "), theme.dim())
            })
            .left(),
        ]
    }

    fn render_estimate(&self, frame: &mut Frame, area: Rect, ctx: &Context) {
        let (model, theme) = (ctx.model, ctx.theme);
        if model.interval_s == 0.0 {
            let msg = "rates pending: the first interval is not over yet";
            frame.render_widget(Paragraph::new(Span::styled(msg, theme.dim())), area);
            return;
        }
        let [note, table_area] = Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(area);
        let why = match (&model.bpf.reason, model.bpf.enabled) {
            (Some(r), _) => r.as_str(),
            (None, true) => "the page-cache probes are not attached",
            (None, false) => "eBPF is off",
        };
        frame.render_widget(
            Paragraph::new(Span::styled(
                format!(
                    "no hit rate without eBPF ({}); cache est. = rchar − read_bytes, an estimate",
                    format::text(why)
                ),
                theme.dim(),
            )),
            note,
        );
        let rows = estimate_rows(ctx);
        if rows.is_empty() {
            let msg = "no process read in this interval";
            frame.render_widget(Paragraph::new(Span::styled(msg, theme.dim())), table_area);
            return;
        }
        let u = ctx.units;
        let plain = |s: String| (s, Style::new());
        let mut pid = Column::new("pid", 0).min_width(7);
        pid.cells = rows.iter().map(|p| plain(p.pid.to_string())).collect();
        let mut comm = Column::new("comm", 0).left().min_width(15).key();
        comm.cells = rows.iter().map(|p| plain(p.comm.to_string())).collect();
        let mut est = Column::new("cache est./s", 0);
        est.cells = rows.iter().map(|p| plain(format::bytes(p.cache_estimate_bytes_s, u))).collect();
        let mut disk = Column::new("from disk/s", 0);
        disk.cells = rows.iter().map(|p| plain(format::bytes(p.read_bytes_s, u))).collect();
        table::render(frame, table_area, vec![pid, comm, est, disk], &theme, &self.selection, ctx.focused);
    }
}

/// The memory model the memory pane draws: the kernel's own dirty thresholds (from
/// `writeback:global_dirty_state`) replace the ones computed from /proc once they have been seen.
pub fn memory_for_display(model: &Model) -> std::borrow::Cow<'_, MemoryModel> {
    match model.cache.as_ref().and_then(|c| c.kernel_dirty.as_ref()) {
        Some(k) if k.threshold > 0 => {
            let mut m = model.memory.clone();
            m.dirty_threshold = k.threshold;
            m.dirty_background_threshold = k.background_threshold;
            m.dirty_source = "kernel";
            m.dirty_background_source = "kernel";
            std::borrow::Cow::Owned(m)
        }
        _ => std::borrow::Cow::Borrowed(&model.memory),
    }
}

/// Lines the memory pane adds: the throttling warning (writers paused in the interval), or when
/// the last throttling was.
pub fn memory_lines(ctx: &Context) -> Vec<Line<'static>> {
    let (model, theme) = (ctx.model, ctx.theme);
    let Some(c) = &model.cache else { return Vec::new() };
    let u = ctx.units;
    if c.throttled_processes > 0 && model.interval_s > 0.0 {
        let mut text = format!(
            "⚠ WRITERS THROTTLED: {} process{} paused {} ms ({} ms/s) in balance_dirty_pages",
            c.throttled_processes,
            if c.throttled_processes == 1 { "" } else { "es" },
            format::count(c.throttled_ms, u),
            format::count(c.throttled_ms / model.interval_s, u),
        );
        if let Some(t) = &c.last_throttle {
            text.push_str(&format!(
                "; dirty {} vs setpoint {}, limit {}",
                format::bytes(t.dirty as f64, u),
                format::bytes(t.setpoint as f64, u),
                format::bytes(t.limit as f64, u)
            ));
        }
        return vec![Line::from(Span::styled(text, theme.level(Level::Critical)))];
    }
    match &c.last_throttle {
        Some(t) if t.age_s < 600.0 => vec![Line::from(Span::styled(
            format!("no writer throttled now; last throttle {:.0} s ago", t.age_s),
            theme.dim(),
        ))],
        _ => Vec::new(),
    }
}
