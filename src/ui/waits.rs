//! The waits view (`W`): who is blocked on I/O, for what. Processes by time blocked in the
//! interval (src/model/iowait.rs: % of the interval of the busiest thread, seconds of the threads
//! together, by cause), each followed by its threads that waited when it has more than one or when
//! the one is not its main thread. A pure render of the model's `iowait` part.

use crossterm::event::KeyCode;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

use std::collections::BTreeMap;

use ioscope_common::iowait::CAUSE_NAMES;

use crate::model::iowait::{top_cause, IowaitModel, IowaitProcessModel, IowaitThreadModel};
use crate::ui::columns::Column;
use crate::ui::format;
use crate::ui::syncs::secs;
use crate::ui::theme::{Level, Theme};
use crate::ui::view::{Context, View, ViewAction};

/// Thresholds of the WAIT% colour, as the process pane's `IO wait` column.
const WARN_PCT: f64 = 20.0;
const CRIT_PCT: f64 = 60.0;

/// The waits view's own state: the selected row (a process or a thread).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WaitsView {
    pub selection: crate::ui::table::Selection,
}

/// One row: a process, or one of its threads under it.
enum Row<'a> {
    Process(&'a IowaitProcessModel),
    Thread(&'a IowaitThreadModel),
}

impl Row<'_> {
    /// The row's identity for the selection.
    fn key(&self) -> String {
        match self {
            Row::Process(p) => format!("p{}", p.pid),
            Row::Thread(t) => format!("t{}", t.tid),
        }
    }

    fn wait_pct(&self) -> f64 {
        match self {
            Row::Process(p) => p.wait_pct,
            Row::Thread(t) => t.wait_pct,
        }
    }

    fn wait_s(&self) -> f64 {
        match self {
            Row::Process(p) => p.wait_s,
            Row::Thread(t) => t.wait_s,
        }
    }

    fn by_cause_s(&self) -> &BTreeMap<&'static str, f64> {
        match self {
            Row::Process(p) => &p.by_cause_s,
            Row::Thread(t) => &t.by_cause_s,
        }
    }
}

/// Whether a process passes the `/` filter (its comm, a thread's, or its pid) and the cgroup limit.
fn admitted(p: &IowaitProcessModel, ctx: &Context) -> bool {
    let needle = ctx.filter.to_lowercase();
    let named = needle.is_empty()
        || p.pid.to_string().contains(&needle)
        || p.comm.to_lowercase().contains(&needle)
        || p.threads.iter().any(|t| t.comm.to_lowercase().contains(&needle));
    named && ctx.admits(p.pid, Some(p.cgroup_id))
}

/// The rows in order: the model's processes (the longest wait first), each followed by its
/// threads that waited when they say more than the process's row does.
fn rows<'a>(w: &'a IowaitModel, ctx: &Context) -> Vec<Row<'a>> {
    let mut out = Vec::new();
    for p in w.processes.iter().filter(|p| admitted(p, ctx)) {
        out.push(Row::Process(p));
        if p.threads.len() > 1 || p.threads.iter().any(|t| t.tid != p.pid) {
            out.extend(p.threads.iter().map(Row::Thread));
        }
    }
    out
}

/// A cause's column title.
fn cause_title(cause: &str) -> String {
    match cause {
        "page_cache_read" => "CACHE".into(),
        "direct_io" => "DIRECT".into(),
        "dirty_throttle" => "THROTTLED".into(),
        c => c.replace('_', " ").to_uppercase(),
    }
}

/// A cause and its share of the wait as the CAUSE column shows them: "sync 80%".
pub fn cause_share(cause: &str, share: f64) -> String {
    format!("{} {:.0}%", cause_name(cause), 100.0 * share)
}

/// A cause as the CAUSE column names it.
fn cause_name(cause: &str) -> String {
    match cause {
        "page_cache_read" => "cache read".into(),
        "direct_io" => "direct I/O".into(),
        "dirty_throttle" => "throttled".into(),
        c => c.replace('_', " "),
    }
}

impl View for WaitsView {
    fn title(&self, ctx: &Context) -> String {
        let mut t = "I/O waits: time blocked on I/O this interval, by cause  W/Esc back".to_string();
        if !ctx.filter.is_empty() || ctx.editing_filter {
            t.push_str(&format!("  filter \"{}\"", ctx.filter));
        }
        ctx.cgroup_note(&mut t);
        t
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Context) {
        render(self, frame, area, ctx)
    }

    /// Esc closes the view and j/k/arrows/g/G select a row (`W` opens and closes it).
    fn handle_key(&mut self, code: KeyCode) -> Option<ViewAction> {
        if crate::ui::table::list_step(code).is_some() || matches!(code, KeyCode::Left | KeyCode::Right) {
            self.selection.handle_key(code);
            return Some(ViewAction::Redraw);
        }
        match code {
            KeyCode::Esc => Some(ViewAction::Close),
            _ => None,
        }
    }

    fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[("↑↓", "process"), ("W Esc", "back")]
    }

    /// The identities of the rows, in order.
    fn follow(&mut self, ctx: &Context) {
        let keys: Vec<String> = ctx
            .model
            .iowait
            .as_ref()
            .map(|w| rows(w, ctx).iter().map(Row::key).collect())
            .unwrap_or_default();
        self.selection.follow(keys);
    }
}

fn render(view: &WaitsView, frame: &mut Frame, area: Rect, ctx: &Context) {
    let (model, theme) = (ctx.model, ctx.theme);
    // The title names the filter, typed by the user: escaped with the rest.
    let title = format::text(&view.title(ctx));
    let block = Block::new()
        .borders(Borders::TOP)
        .border_style(theme.dim())
        .title(Span::styled(format!("▶ {title} "), theme.title(true)));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let empty = |text: String| Paragraph::new(text).wrap(Wrap { trim: true });
    let Some(w) = model.iowait.as_ref() else {
        let text = if !model.bpf.enabled {
            "eBPF is off: I/O waits need the sched:sched_switch and sched:sched_wakeup tracepoints (run as root)"
        } else {
            "The I/O-wait probes are not attached (sched:sched_switch, sched:sched_wakeup): e shows why"
        };
        frame.render_widget(empty(text.to_string()), inner);
        return;
    };
    let rows = rows(w, ctx);
    if rows.is_empty() {
        let text = if ctx.filter.is_empty() && ctx.cgroup_filter.is_none() {
            "No thread has blocked on I/O since ioscope started.".to_string()
        } else {
            "No process blocked on I/O matches the filter.".to_string()
        };
        frame.render_widget(empty(text), inner);
        return;
    }
    crate::ui::table::render(frame, inner, columns(&rows, &theme), &theme, &view.selection, true);
}

/// The view's columns, declared once: the most important first at every width.
fn columns(rows: &[Row], theme: &Theme) -> Vec<Column> {
    let col = |title: &str, priority: u8, f: &dyn Fn(&Row) -> (String, Style)| {
        let mut c = Column::new(title, priority);
        c.cells = rows.iter().map(f).collect();
        c
    };
    let plain = |s: String| (s, Style::new());
    let dim_if_none =
        |s: f64, text: String| if s > 0.0 { (text, Style::new()) } else { ("-".into(), theme.dim()) };
    let mut columns = vec![
        col("PID/TID", 0, &|r| match r {
            Row::Process(p) => plain(p.pid.to_string()),
            Row::Thread(t) => (t.tid.to_string(), theme.dim()),
        })
        .min_width(7),
        col("COMM", 0, &|r| match r {
            Row::Process(p) => plain(format::text(&p.comm)),
            Row::Thread(t) => plain(format!("└ {}", format::text(&t.comm))),
        })
        .left()
        .min_width(16)
        .key(),
        col("WAIT%", 0, &|r| {
            let v = r.wait_pct();
            if v > 0.0 {
                (format!("{v:.1}%"), theme.level(Level::of(v, WARN_PCT, CRIT_PCT)))
            } else {
                ("-".into(), theme.dim())
            }
        })
        .min_width(6),
        col("WAIT", 0, &|r| dim_if_none(r.wait_s(), secs(r.wait_s()))).min_width(7),
        col("CAUSE", 0, &|r| match top_cause(r.by_cause_s()) {
            Some((c, share)) => plain(cause_share(c, share)),
            None => ("-".into(), theme.dim()),
        })
        .left()
        .min_width(15),
    ];
    // The causes, `other` last; the named causes before the cumulative total.
    let order = CAUSE_NAMES.iter().skip(1).chain(CAUSE_NAMES.iter().take(1));
    for (i, cause) in order.enumerate() {
        let f = |r: &Row| {
            let s = r.by_cause_s().get(cause).copied().unwrap_or(0.0);
            dim_if_none(s, secs(s))
        };
        columns.push(col(&cause_title(cause), 1 + i as u8, &f).min_width(7));
    }
    columns.push(col("TOTAL", 1 + CAUSE_NAMES.len() as u8, &|r| match r {
        Row::Process(p) => dim_if_none(p.total_s, secs(p.total_s)),
        Row::Thread(_) => (String::new(), Style::new()),
    }));
    columns
}
