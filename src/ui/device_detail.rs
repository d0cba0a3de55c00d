//! The eBPF detail of one device (Enter on the devices pane): latency split into queue and device
//! time with percentiles, request-size and latency histograms for reads and writes, the rwbs flag
//! breakdown, queue depth beside iostat's aqu-sz, the cross-check with /proc/diskstats, and a plain
//! note where %util misleads.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;

use ioscope_common::block::log2_bucket_range;

use crate::model::block::{BlockDeviceModel, BlockDirModel, Percentiles};
use crate::model::files::FileModel;
use crate::model::{DeviceModel, Model};
use crate::ui::columns::{self, Column};
use crate::ui::format::{self, Units};
use crate::ui::io_processes::{IoProcessesView, IoSort};
use crate::ui::table::Sort;
use crate::ui::theme::{Level, Theme};
use crate::ui::view::{Context, View};

/// The detail of the device selected in the devices pane (the context's): no state of its own but
/// the sort of its submitters' table, the eBPF process table's.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DeviceDetailView {
    pub submitters: Sort<IoSort>,
}

impl View for DeviceDetailView {
    fn title(&self, ctx: &Context) -> String {
        match ctx.device {
            Some(d) => {
                format!("{}  block layer (eBPF)  Enter/Esc back  j/k other device", format::text(&d.name))
            }
            None => "Device detail".to_string(),
        }
    }

    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Context) {
        render(self, frame, area, ctx)
    }

    fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[("j k", "other device"), ("f", "its files"), ("Enter Esc", "back")]
    }
}

fn render(view: &DeviceDetailView, frame: &mut Frame, area: Rect, ctx: &Context) {
    let (model, theme) = (ctx.model, ctx.theme);
    let Some(d) = ctx.device else {
        let block = title_block("Device detail", &theme);
        let inner = block.inner(area);
        frame.render_widget(block, area);
        frame.render_widget(Paragraph::new(Span::styled("no device to show", theme.dim())), inner);
        return;
    };
    let block = title_block(&view.title(ctx), &theme);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(b) = d.bpf.as_ref().and_then(|b| b.block.as_ref()) else {
        let msg = why_nothing(model, d);
        frame.render_widget(Paragraph::new(Span::styled(msg, theme.dim())).wrap(Wrap { trim: true }), inner);
        return;
    };
    let summary = summary_lines(d, b, ctx);
    // The summary, latency table and flags always fit first; the histograms get what is left.
    // The summary, latency table (4), flags (2) and the blank line above the submitters (1).
    let fixed = summary.len() as u16 + 4 + 2 + 1;
    let hist_h = histogram_height(b, inner.width >= WIDE).min(inner.height.saturating_sub(fixed));
    let [top, lat, flags, hists, _, subs] = Layout::vertical([
        Constraint::Length(summary.len() as u16),
        Constraint::Length(4),
        Constraint::Length(2),
        Constraint::Length(hist_h),
        Constraint::Length(1),
        Constraint::Fill(1),
    ])
    .areas(inner);
    frame.render_widget(Paragraph::new(summary), top);
    let table = columns::table(latency_columns(b, ctx.units), lat.width, theme.table_header());
    frame.render_widget(table, lat);
    frame.render_widget(Paragraph::new(flag_lines(b, ctx)).wrap(Wrap { trim: true }), flags);
    render_histograms(frame, hists, b, ctx);
    // Which files the requests were for (block requests mapped by extent), then who sent them.
    let top = top_files(model, &d.name);
    // Title, header, rows, and a blank line before the submitters.
    let files_h = if top.is_empty() || subs.height < 10 { 0 } else { top.len() as u16 + 3 };
    let [files_area, subs] = Layout::vertical([Constraint::Length(files_h), Constraint::Fill(1)]).areas(subs);
    if files_h > 0 {
        render_top_files(frame, files_area, model, &top, ctx);
    }
    // Who sends the I/O to this device (the per-submitter view, filtered to it).
    if subs.height >= 3 {
        let submitters = IoProcessesView { sort: view.submitters, ..Default::default() };
        let rows: Vec<_> = submitters.visible(ctx).into_iter().filter(|p| p.device == d.name).collect();
        let [title, table_area] = Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(subs);
        let text =
            if rows.is_empty() { "no submitter in this interval" } else { "submitters (b: all disks)" };
        frame.render_widget(Paragraph::new(Span::styled(text, theme.table_header())), title);
        if !rows.is_empty() {
            let table =
                columns::table(submitters.columns(&rows, ctx), table_area.width, theme.table_header());
            frame.render_widget(table, table_area);
        }
    }
}

/// Most files listed in the detail view.
const TOP_FILES: usize = 5;

/// The files (and labels) the sampled block requests of `disk` were mapped to, most bytes first.
pub fn top_files<'a>(model: &'a Model, disk: &str) -> Vec<&'a FileModel> {
    let mut v: Vec<&FileModel> = model
        .files
        .iter()
        .filter(|f| f.block_disk.as_deref() == Some(disk) && f.block_read_bytes + f.block_write_bytes > 0)
        .collect();
    v.sort_by(|a, b| {
        (b.block_read_bytes + b.block_write_bytes)
            .cmp(&(a.block_read_bytes + a.block_write_bytes))
            .then_with(|| a.name().cmp(&b.name()))
    });
    v.truncate(TOP_FILES);
    v
}

fn render_top_files(frame: &mut Frame, area: Rect, model: &Model, top: &[&FileModel], ctx: &Context) {
    let theme = ctx.theme;
    let [title, table_area, _] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(top.len() as u16 + 1),
        Constraint::Fill(1),
    ])
    .areas(area);
    // Below 100 % the mapped bytes are a sample of the disk's requests: as a rate they would read
    // as the file's disk rate (9 % sampled: 7.5 M/s for a file fio read at 60 MB/s). Then the
    // columns are each file's part of the sampled bytes instead.
    let bf = model.block_files.as_ref();
    let whole = bf.is_none_or(|b| b.whole());
    let sampled = match bf.and_then(|b| b.sampled_pct) {
        Some(p) if !whole => format!(", {p:.0}% of requests sampled: % of sampled bytes"),
        _ => String::new(),
    };
    let text = format!("files by disk bytes (block requests mapped by extent{sampled}; f: all)");
    frame.render_widget(Paragraph::new(Span::styled(text, theme.table_header())), title);
    let u = ctx.units;
    let total: u64 = model
        .files
        .iter()
        .filter(|f| f.block_disk == top[0].block_disk)
        .map(|f| f.block_read_bytes + f.block_write_bytes)
        .sum();
    let part = |b: u64| format!("{:.0}%", 100.0 * b as f64 / total.max(1) as f64);
    let figure = |bytes: u64, per_s: f64| match (bytes, whole) {
        (0, _) => "-".to_string(),
        (_, true) => format::bytes(per_s, u),
        (_, false) => part(bytes),
    };
    let mut file = Column::new("file", 0).left().min_width(20);
    file.cells = top.iter().map(|f| (f.name(), Style::new())).collect();
    let mut read = Column::new(if whole { "read/s" } else { "read" }, 0);
    read.cells =
        top.iter().map(|f| (figure(f.block_read_bytes, f.block_read_bytes_s), Style::new())).collect();
    let mut write = Column::new(if whole { "write/s" } else { "write" }, 0);
    write.cells =
        top.iter().map(|f| (figure(f.block_write_bytes, f.block_write_bytes_s), Style::new())).collect();
    let mut share = Column::new("share", 1);
    share.cells =
        top.iter().map(|f| (part(f.block_read_bytes + f.block_write_bytes), Style::new())).collect();
    let table = columns::table(vec![file, read, write, share], table_area.width, theme.table_header());
    frame.render_widget(table, table_area);
}

/// From this width on, the queue-time histogram is shown beside the other two.
const WIDE: u16 = 150;

/// Lines the histograms need: a title plus the span of non-empty buckets of the tallest one.
fn histogram_height(b: &BlockDeviceModel, wide: bool) -> u16 {
    let span = |r: &[u64], w: &[u64]| {
        let n = r.len().max(w.len());
        let busy: Vec<usize> =
            (0..n).filter(|&i| r.get(i).copied().unwrap_or(0) + w.get(i).copied().unwrap_or(0) > 0).collect();
        match (busy.first(), busy.last()) {
            (Some(lo), Some(hi)) => hi - lo + 1,
            _ => 1,
        }
    };
    let mut tallest =
        span(&b.read.device_hist, &b.write.device_hist).max(span(&b.read.size_hist, &b.write.size_hist));
    if wide {
        tallest = tallest.max(span(&b.read.queue_hist, &b.write.queue_hist));
    }
    tallest as u16 + 1
}

fn title_block(title: &str, theme: &Theme) -> Block<'static> {
    Block::new()
        .borders(Borders::TOP)
        .border_style(theme.dim())
        .title(Span::styled(format!("▶2 {title} "), theme.title(true)))
}

/// Why a device has no eBPF figures, in words the user can act on.
fn why_nothing(model: &Model, d: &DeviceModel) -> String {
    if !model.bpf.enabled {
        return format!(
            "eBPF is off: {}",
            format::text(model.bpf.reason.as_deref().unwrap_or("no reason given"))
        );
    }
    if model.interval_s == 0.0 {
        return "rates pending: the first interval is not over yet".into();
    }
    if d.is_partition {
        return format!(
            "{} is a partition: the block layer makes its requests of the whole disk, so the eBPF \
             figures are on the disk's row",
            format::text(&d.name)
        );
    }
    format!(
        "no request seen on {} since the probes attached: it is idle, or it is a bio-based device \
         (device-mapper, md) whose I/O the block layer sends to the disks below it.",
        format::text(&d.name)
    )
}

fn summary_lines(d: &DeviceModel, b: &BlockDeviceModel, ctx: &Context) -> Vec<Line<'static>> {
    let (theme, u) = (ctx.theme, ctx.units);
    let kb = |v: f64| format::human_bytes(v * 1024.0);
    // Each line fits 80 columns: the area is exactly as tall as the number of lines.
    let mut lines = vec![Line::from(format!(
        "r/s {}  w/s {}  rareq-sz {}  wareq-sz {}  %util {}  aqu-sz {:.2}",
        format::count(d.r_s, u),
        format::count(d.w_s, u),
        kb(d.rareq_sz),
        kb(d.wareq_sz),
        format::percent(d.util),
        d.aqu_sz,
    ))];
    let depth = match &b.depth {
        Some(q) => {
            let max = if q.max == u64::MAX { "huge".to_string() } else { q.max.to_string() };
            format!("min {}  avg {:.1}  max {max}", q.min, q.avg)
        }
        None => "no request issued".into(),
    };
    lines.push(Line::from(format!("queue depth at issue  {depth}  in flight now {}", b.in_flight)));
    if let Some(x) = d.bpf.as_ref().and_then(|b| b.crosscheck.as_ref()) {
        let text = format!(
            "eBPF vs /proc/diskstats  {} vs {} ({:.1} % apart)",
            format::human_bytes(x.bpf_bytes as f64),
            format::human_bytes(x.diskstats_bytes as f64),
            x.diff_pct
        );
        lines.push(if x.mismatch {
            Line::from(vec![
                Span::styled(format!("≠ {text}"), theme.level(Level::Critical)),
                Span::raw("  see probe health (e)"),
            ])
        } else {
            Line::from(Span::styled(format!("{text}  agree"), theme.dim()))
        });
    }
    if let Some(note) = util_note(d, b) {
        lines.push(Line::from(Span::styled(note, theme.level(Level::Warn))));
    }
    lines
}

/// The %util honesty note: %util is the share of time with at least one request in flight, which
/// says "busy" but not "saturated" for a device that serves requests in parallel.
pub fn util_note(d: &DeviceModel, b: &BlockDeviceModel) -> Option<String> {
    let s = d.settings.as_ref()?;
    let queues = s.hw_queues.unwrap_or(1);
    if queues <= 1 && s.rotational != Some(false) {
        return None;
    }
    let why = if queues > 1 { format!("{queues} hw queues") } else { "non-rotational".into() };
    let depth = b.depth.as_ref().map(|q| format!(" (avg {:.1})", q.avg)).unwrap_or_default();
    Some(format!("%util ≠ saturation here ({why}, parallel): read p99 and depth{depth}"))
}

fn pct(p: &Option<Percentiles>, f: fn(&Percentiles) -> f64, u: Units) -> String {
    p.as_ref().map(|p| format::millis(f(p), u)).unwrap_or_else(|| "-".into())
}

fn latency_columns(b: &BlockDeviceModel, u: Units) -> Vec<Column> {
    let dirs: [(&str, &BlockDirModel); 3] = [("read", &b.read), ("write", &b.write), ("other", &b.other)];
    let col = |title: &str, priority: u8, f: &dyn Fn(&BlockDirModel) -> String| {
        let mut c = Column::new(title, priority);
        c.cells = dirs.iter().map(|(_, d)| (f(d), Style::new())).collect();
        c
    };
    let opt_ms = |v: Option<f64>| v.map(|v| format::millis(v, u)).unwrap_or_else(|| "-".into());
    let mut name = Column::new("(ms)", 0).left();
    name.cells = dirs.iter().map(|(n, _)| (n.to_string(), Style::new())).collect();
    vec![
        name,
        col("iops", 0, &|d| format::count(d.iops, u)),
        col("B/s", 1, &|d| format::bytes(d.bytes_s, u)),
        col("avg sz", 0, &|d| format::bytes(d.avg_size, u)),
        col("queue", 0, &|d| opt_ms(d.queue_ms_avg)),
        col("q p50", 3, &|d| pct(&d.queue, |p| p.p50_ms, u)),
        col("q p99", 2, &|d| pct(&d.queue, |p| p.p99_ms, u)),
        col("device", 0, &|d| opt_ms(d.device_ms_avg)),
        col("d p50", 1, &|d| pct(&d.device, |p| p.p50_ms, u)),
        col("d p95", 2, &|d| pct(&d.device, |p| p.p95_ms, u)),
        col("d p99", 1, &|d| pct(&d.device, |p| p.p99_ms, u)),
        col("d max≤", 2, &|d| pct(&d.device, |p| p.max_ms, u)),
        col("sched%", 4, &|d| format::percent(d.sched_pct)),
    ]
}

fn flag_lines(b: &BlockDeviceModel, ctx: &Context) -> Vec<Line<'static>> {
    let (theme, u) = (ctx.theme, ctx.units);
    let mut spans = vec![Span::styled("flags ", theme.table_header())];
    for f in &b.flags {
        let text = format!("{} {}/s {}% ", f.flag, format::count(f.iops, u), format::percent(f.share_pct));
        let style = if f.iops > 0.0 { Style::new() } else { theme.dim() };
        spans.push(Span::styled(text, style));
        spans.push(Span::styled("· ", theme.dim()));
    }
    spans.pop();
    vec![Line::from(spans)]
}

/// A latency bucket's edge in µs, as text: "0", "512µs", "4ms", "2s".
fn us_label(us: u64) -> String {
    match us {
        0 => "0".into(),
        us if us < 1000 => format!("{us}µs"),
        us if us < 1_000_000 => format!("{}ms", us / 1000),
        us => format!("{}s", us / 1_000_000),
    }
}

/// A histogram to draw: title, read and write buckets, bucket label.
type HistSpec<'a> = (&'a str, &'a [u64], &'a [u64], fn(u64) -> String);

/// Read and write histograms side by side (device time, request size, and queue time when wide).
fn render_histograms(frame: &mut Frame, area: Rect, b: &BlockDeviceModel, ctx: &Context) {
    let wide = area.width >= WIDE;
    let mut specs: Vec<HistSpec> = vec![
        ("device time", &b.read.device_hist, &b.write.device_hist, us_label),
        ("request size", &b.read.size_hist, &b.write.size_hist, format::exact_bytes),
    ];
    if wide {
        specs.push(("queue time", &b.read.queue_hist, &b.write.queue_hist, us_label));
    }
    let areas = Layout::horizontal(vec![Constraint::Ratio(1, specs.len() as u32); specs.len()]).split(area);
    for (i, (name, read, write, label)) in specs.into_iter().enumerate() {
        let lines = histogram_lines(name, read, write, label, areas[i].width, area.height, ctx.theme);
        frame.render_widget(Paragraph::new(lines), areas[i]);
    }
}

/// One histogram as text: a title, then a read bar and a write bar per bucket over the range of
/// non-empty buckets, scaled to the largest bucket of either. When that range has more buckets
/// than `height` leaves lines for, neighbouring buckets are merged (2, 4, 8… per line, aligned so
/// a line keeps its range from one frame to the next) and each line is labelled with its range:
/// the whole distribution stays on screen, in fewer, wider buckets.
pub fn histogram_lines(
    name: &str,
    read: &[u64],
    write: &[u64],
    label: fn(u64) -> String,
    width: u16,
    height: u16,
    theme: Theme,
) -> Vec<Line<'static>> {
    let n = read.len().max(write.len());
    let get = |h: &[u64], i: usize| h.get(i).copied().unwrap_or(0);
    let nonzero: Vec<usize> = (0..n).filter(|&i| get(read, i) + get(write, i) > 0).collect();
    let (Some(&first), Some(&last)) = (nonzero.first(), nonzero.last()) else {
        return vec![
            Line::from(Span::styled(format!("{name}  read | write"), theme.table_header())),
            Line::from(Span::styled("no requests", theme.dim())),
        ];
    };
    let room = height.saturating_sub(1).max(1) as usize;
    let mut per_line = 1usize;
    while last / per_line - first / per_line + 1 > room {
        per_line *= 2;
    }
    // (label, read, write) per line.
    let rows: Vec<(String, u64, u64)> = (first / per_line..=last / per_line)
        .map(|g| {
            let (lo, hi) = (g * per_line, (g * per_line + per_line - 1).min(n - 1));
            let (r, w) = (lo..=hi).fold((0, 0), |(r, w), i| (r + get(read, i), w + get(write, i)));
            let text = if per_line == 1 {
                label(log2_bucket_range(lo).0)
            } else {
                let end = log2_bucket_range(hi).1;
                let end = if end == u64::MAX { "∞".to_string() } else { label(end) };
                format!("{}–{end}", label(log2_bucket_range(lo).0))
            };
            (text, r, w)
        })
        .collect();
    let mut lines = vec![Line::from(Span::styled(format!("{name}  read | write"), theme.table_header()))];
    let max = rows.iter().map(|&(_, r, w)| r.max(w)).max().unwrap_or(1).max(1);
    let chars = |s: &str| s.chars().count();
    let label_w = rows.iter().map(|(l, _, _)| chars(l)).max().unwrap_or(1);
    let count_w = rows.iter().map(|&(_, r, w)| chars(&compact(r)).max(chars(&compact(w)))).max().unwrap_or(1);
    // label, space, bar, space, count, two spaces, bar, space, count, and two spaces before the
    // histogram on the right.
    let bar_w = ((width as usize).saturating_sub(label_w + 2 * count_w + 7) / 2).max(1);
    let bar = |v: u64| {
        let cells = if v == 0 { 0 } else { ((v as f64 / max as f64) * bar_w as f64).ceil() as usize };
        format!("{:<bar_w$}", "█".repeat(cells.min(bar_w)))
    };
    for (text, r, w) in rows {
        lines.push(Line::from(vec![
            Span::raw(format!("{text:>label_w$} ")),
            Span::styled(bar(r), theme.good()),
            Span::raw(format!(" {:>count_w$}  ", compact(r))),
            Span::styled(bar(w), theme.dirty()),
            Span::raw(format!(" {:>count_w$}", compact(w))),
        ]));
    }
    lines
}

fn compact(v: u64) -> String {
    match v {
        0 => String::new(),
        v if v < 10_000 => v.to_string(),
        v => format::count(v as f64, Units::Human),
    }
}
