//! Memory pane: meminfo gauges, Dirty+Writeback against the kernel's two dirty thresholds, vmstat
//! rates, and the cached/dirty history.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, RenderDirection, Sparkline};
use ratatui::Frame;

use crate::model::MemoryModel;
use crate::ui::format::{self, Units};
use crate::ui::history::History;
use crate::ui::theme::{Level, Theme};
use crate::ui::view::{Context, View};

/// Refaults of file pages per second from which the figure is highlighted: pages evicted and read
/// back soon after mean the page cache is too small for the working set (thrashing).
const REFAULT_WARN: f64 = 100.0;
const REFAULT_CRIT: f64 = 1000.0;
/// Major faults per second: each one waited for the disk.
const MAJFLT_WARN: f64 = 100.0;
const MAJFLT_CRIT: f64 = 1000.0;

/// The throttle threshold sits at this fraction of the gauge, leaving room to show overshoot.
const GAUGE_HEADROOM: f64 = 1.25;

const GAP: &str = "  ";

/// The memory pane: no state of its own (its sparklines draw the context's history).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MemoryView;

impl MemoryView {
    /// Rows the pane needs at `width` (block title included) without sparkline growth.
    ///
    /// The text is laid out as if every figure were as wide as it gets ([`Fit::Widest`]) and the
    /// vmstat rates were known: a value growing from `0` to `15.6G`, or the first interval ending,
    /// does not wrap a line and move the panes below. Only the warnings (a throttled writer, a
    /// long sync call) add rows, while they last.
    pub fn wanted_height(&self, ctx: &Context, width: u16) -> u16 {
        let model = ctx.model;
        let memory = crate::ui::page_cache::memory_for_display(model);
        let top = text_lines_fit(&memory, 1.0, ctx, width, Fit::Widest(WIDEST_BYTES)).len() as u16;
        let extra = (crate::ui::page_cache::memory_lines(ctx).len()
            + crate::ui::syncs::memory_lines(ctx).len()) as u16;
        1 + top + extra + 1
    }
}

impl View for MemoryView {
    /// The first pane's title names the full views (their keys work from every pane), so each is
    /// reachable from what the screen says: 77 columns with the pane number, within 80.
    fn title(&self, _ctx: &Context) -> String {
        "Memory  f files w readahead y syncs c cgroups W waits e probes d submitters".to_string()
    }

    fn render(&self, frame: &mut Frame, inner: Rect, ctx: &Context) {
        render(frame, inner, ctx)
    }
}

fn render(frame: &mut Frame, inner: Rect, ctx: &Context) {
    let model = ctx.model;
    // The kernel's own dirty thresholds when eBPF saw them; the throttling warning below the gauge.
    let memory = crate::ui::page_cache::memory_for_display(model);
    let mut lines = text_lines(&memory, model.interval_s, ctx, inner.width);
    let after_gauge = lines
        .iter()
        .position(|l| l.spans.first().is_some_and(|s| s.content.starts_with("dirty+wb")))
        .map_or(lines.len(), |i| i + 1);
    let extra =
        crate::ui::page_cache::memory_lines(ctx).into_iter().chain(crate::ui::syncs::memory_lines(ctx));
    for (i, l) in extra.enumerate() {
        lines.insert(after_gauge + i, l);
    }
    let text_h = (lines.len() as u16).min(inner.height);
    let [text_area, spark_area] =
        Layout::vertical([Constraint::Length(text_h), Constraint::Fill(1)]).areas(inner);
    frame.render_widget(Paragraph::new(lines), text_area);
    render_history(frame, spark_area, ctx);
}

/// How [`flow`] measures an item.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fit {
    /// As drawn.
    Actual,
    /// A `label value` item's figure (before its unit) as wide as the given number of characters:
    /// the layout the figures may need, for a height that does not change from sample to sample.
    Widest(usize),
}

/// The widest a human size gets (`15.6G`, `99.9K`; [`format::human_bytes`]).
const WIDEST_BYTES: usize = 5;
/// The widest a human count gets (`999.9k`; [`format::count`]).
const WIDEST_COUNT: usize = 6;

/// The text part: meminfo, the dirty gauge and its legend, the vmstat rates.
fn text_lines(m: &MemoryModel, interval_s: f64, ctx: &Context, width: u16) -> Vec<Line<'static>> {
    text_lines_fit(m, interval_s, ctx, width, Fit::Actual)
}

fn text_lines_fit(
    m: &MemoryModel,
    interval_s: f64,
    ctx: &Context,
    width: u16,
    fit: Fit,
) -> Vec<Line<'static>> {
    let theme = ctx.theme;
    let u = ctx.units;
    let b = |v: u64| format::bytes(v as f64, u);
    let item = |label: &str, value: String, style: Style| {
        vec![Span::styled(format!("{label} "), theme.dim()), Span::styled(value, style)]
    };
    let mut lines = flow(
        vec![
            item("total", b(m.total), Style::new()),
            item("avail", b(m.available), Style::new()),
            item("free", b(m.free), Style::new()),
            item("cached", b(m.cached), theme.cached()),
            item("buffers", b(m.buffers), Style::new()),
            item("shmem", b(m.shmem), Style::new()),
            item("active(file)", b(m.active_file), Style::new()),
            item("inactive(file)", b(m.inactive_file), Style::new()),
            item("mapped", b(m.mapped), Style::new()),
            item("slab reclaimable", b(m.slab_reclaimable), Style::new()),
        ],
        width,
        0,
        fit,
    );
    lines.push(dirty_gauge(m, width, u, theme));
    let (legend, droppable) = dirty_legend(m, u, theme);
    lines.extend(flow(legend, width, droppable, fit));
    if interval_s > 0.0 {
        let rates_fit = if fit == Fit::Actual { fit } else { Fit::Widest(WIDEST_COUNT) };
        lines.extend(flow(rate_items(m, u, theme), width, 0, rates_fit));
    } else {
        lines
            .push(Line::from(Span::styled("vmstat rates pending: first interval not over yet", theme.dim())));
    }
    lines
}

/// Lays items out left to right, wrapping to a new line when the next one does not fit. The last
/// `droppable` items are extras: left out rather than wrapped onto a line of their own. `fit`:
/// whether items are measured as drawn or as wide as their figures may get.
fn flow(items: Vec<Vec<Span<'static>>>, width: u16, droppable: usize, fit: Fit) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    let mut cur: Vec<Span<'static>> = Vec::new();
    let mut used = 0usize;
    let first_droppable = items.len().saturating_sub(droppable);
    for (i, item) in items.into_iter().enumerate() {
        let w: usize = item.iter().map(|s| s.width()).sum::<usize>() + grows_by(&item, fit);
        if !cur.is_empty() && used + GAP.len() + w > width as usize {
            if i >= first_droppable {
                break;
            }
            lines.push(Line::from(std::mem::take(&mut cur)));
            used = 0;
        }
        if !cur.is_empty() {
            cur.push(Span::raw(GAP));
            used += GAP.len();
        }
        cur.extend(item);
        used += w;
    }
    if !cur.is_empty() {
        lines.push(Line::from(cur));
    }
    lines
}

/// How much wider a `label value` item may get under [`Fit::Widest`]: its value's leading figure
/// (digits, `.`, the K/M/G/T or k multiple) up to the given width.
fn grows_by(item: &[Span], fit: Fit) -> usize {
    match (fit, item) {
        (Fit::Widest(widest), [_, value]) => {
            let figure = value
                .content
                .chars()
                .take_while(|c| c.is_ascii_digit() || matches!(c, '.' | 'K' | 'M' | 'G' | 'T' | 'k'))
                .count();
            if figure == 0 {
                0
            } else {
                widest.saturating_sub(figure)
            }
        }
        _ => 0,
    }
}

fn dirty_level(m: &MemoryModel) -> Level {
    let d = m.dirty + m.writeback;
    if m.dirty_threshold > 0 && d >= m.dirty_threshold {
        Level::Critical
    } else if m.dirty_background_threshold > 0 && d >= m.dirty_background_threshold {
        Level::Warn
    } else {
        Level::Normal
    }
}

/// "dirty+wb 1.2G [████████│······┃···]": the bar is scaled so the throttle threshold (┃) sits at
/// 80 %, the background threshold (│) where it falls.
fn dirty_gauge(m: &MemoryModel, width: u16, u: Units, theme: Theme) -> Line<'static> {
    let d = m.dirty + m.writeback;
    let label = format!("dirty+wb {:>5} ", format::bytes(d as f64, u));
    let bar_w = (width as usize).saturating_sub(label.chars().count() + 2);
    let scale = if m.dirty_threshold > 0 {
        (m.dirty_threshold as f64 * GAUGE_HEADROOM).max(d as f64)
    } else {
        (d as f64).max(1.0)
    };
    let cell = |v: u64| -> Option<usize> {
        (v > 0 && bar_w > 0).then(|| (((v as f64 / scale) * bar_w as f64).round() as usize).min(bar_w - 1))
    };
    let filled = ((d as f64 / scale) * bar_w as f64).round() as usize;
    let bg = cell(m.dirty_background_threshold);
    let thr = cell(m.dirty_threshold);
    let fill_style = match dirty_level(m) {
        Level::Normal => theme.dirty(),
        level => theme.level(level),
    };
    let mut spans = vec![Span::styled(label, theme.dim()), Span::raw("[")];
    for i in 0..bar_w {
        let (ch, style) = if Some(i) == thr {
            ("┃", theme.level(Level::Critical))
        } else if Some(i) == bg {
            ("│", theme.level(Level::Warn))
        } else if i < filled {
            ("█", fill_style)
        } else {
            ("·", theme.dim())
        };
        spans.push(Span::styled(ch, style));
    }
    spans.push(Span::raw("]"));
    Line::from(spans)
}

/// What the gauge compares: dirty and writeback apart, each threshold with the vm setting that
/// produced it, and the dirtyable memory the ratios apply to.
/// Returns the items and how many at the end may be dropped for lack of room.
fn dirty_legend(m: &MemoryModel, u: Units, theme: Theme) -> (Vec<Vec<Span<'static>>>, usize) {
    let b = |v: u64| format::bytes(v as f64, u);
    let level = dirty_level(m);
    let mut items = vec![
        vec![Span::styled("dirty ", theme.dim()), Span::styled(b(m.dirty), theme.level(level))],
        vec![Span::styled("writeback ", theme.dim()), Span::raw(b(m.writeback))],
    ];
    if m.dirty_threshold == 0 {
        items.push(vec![Span::styled("dirty thresholds unknown", theme.dim())]);
        return (items, 0);
    }
    let source = |threshold: u64, source: &str| -> String {
        if source == "ratio" && m.dirtyable > 0 {
            format!("{:.0}% ratio", threshold as f64 * 100.0 / m.dirtyable as f64)
        } else {
            source.to_string()
        }
    };
    items.push(vec![
        Span::styled("│", theme.level(Level::Warn)),
        Span::styled("bg ", theme.dim()),
        Span::raw(format!(
            "{} ({})",
            b(m.dirty_background_threshold),
            source(m.dirty_background_threshold, m.dirty_background_source)
        )),
    ]);
    items.push(vec![
        Span::styled("┃", theme.level(Level::Critical)),
        Span::styled("throttle ", theme.dim()),
        Span::raw(format!("{} ({})", b(m.dirty_threshold), source(m.dirty_threshold, m.dirty_source))),
    ]);
    items.push(vec![Span::styled("of dirtyable ", theme.dim()), Span::raw(b(m.dirtyable))]);
    (items, 1)
}

fn rate_items(m: &MemoryModel, u: Units, theme: Theme) -> Vec<Vec<Span<'static>>> {
    let r = &m.rates;
    let item = |label: &str, value: String, style: Style| {
        vec![Span::styled(format!("{label} "), theme.dim()), Span::styled(value, style)]
    };
    // pgpgin/pgpgout count kilobytes.
    let kb_s = |kb: f64| match u {
        Units::Human => format!("{}/s", format::human_bytes(kb * 1024.0)),
        Units::Raw => format!("{kb:.2}kB/s"),
    };
    let per_s = |v: f64| format!("{}/s", format::count(v, u));
    vec![
        item("pgpgin", kb_s(r.pgpgin_kb_s), Style::new()),
        item("pgpgout", kb_s(r.pgpgout_kb_s), Style::new()),
        item("majflt", per_s(r.majfault_s), theme.level(Level::of(r.majfault_s, MAJFLT_WARN, MAJFLT_CRIT))),
        item(
            "refault",
            per_s(r.refault_file_s),
            theme.level(Level::of(r.refault_file_s, REFAULT_WARN, REFAULT_CRIT)),
        ),
        item("scan", per_s(r.scan_s), Style::new()),
        item("steal", per_s(r.steal_s), Style::new()),
        item("dirtied", format!("{} pg/s", format::count(r.dirtied_pages_s, u)), Style::new()),
        item("written", format!("{} pg/s", format::count(r.written_pages_s, u)), Style::new()),
    ]
}

/// Cached and Dirty+Writeback over time, each scaled to its own peak in the visible window (named
/// on the label) so a trend shows even when the value is a sliver of RAM or of the thresholds; the
/// gauge above already draws dirty memory against the thresholds. Side by side on one line, or
/// stacked when there is room.
fn render_history(frame: &mut Frame, area: Rect, ctx: &Context) {
    let theme = ctx.theme;
    if area.height == 0 || area.width < 20 {
        return;
    }
    let h = ctx.history;
    let series = [("cached", &h.cached, theme.cached()), ("dirty+wb", &h.dirty, theme.dirty())];
    let areas: Vec<Rect> = if area.height >= 4 {
        Layout::vertical([Constraint::Fill(1); 2]).split(area).to_vec()
    } else {
        Layout::horizontal([Constraint::Fill(1); 2]).spacing(2).split(area).to_vec()
    };
    for ((name, data, style), a) in series.into_iter().zip(areas) {
        let a = Rect { height: a.height.min(8), ..a };
        // The label is 12 wide, wider for a raw peak ("peak 8393342"), and a space always parts it
        // from the sparkline: the peak in the window the sparkline would have at width 12.
        let peak_text = |peak: u64| format!("peak {}", format::bytes(peak as f64, ctx.units));
        let probe =
            History::last(data, a.width.saturating_sub(12) as usize).iter().copied().max().unwrap_or(0);
        let label_w = (peak_text(probe).chars().count() as u16 + 1).max(12);
        let [label_area, spark_area] =
            Layout::horizontal([Constraint::Length(label_w), Constraint::Fill(1)]).areas(a);
        // Newest point at the right edge: drawn right to left from a newest-first list.
        let mut points = History::last(data, spark_area.width as usize);
        points.reverse();
        let peak = points.iter().copied().max().unwrap_or(0);
        let mut label = vec![Line::from(Span::styled(name, theme.dim()))];
        if a.height >= 2 {
            label.push(Line::from(Span::styled(peak_text(peak), theme.dim())));
        }
        frame.render_widget(Paragraph::new(label), label_area);
        let spark = Sparkline::default()
            .data(&points)
            .max(peak.max(1))
            .style(style)
            .direction(RenderDirection::RightToLeft);
        frame.render_widget(spark, spark_area);
    }
}
