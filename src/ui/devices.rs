//! Devices pane: `iostat -x` columns per block device, the eBPF issue counts beside them, and the
//! queue settings that explain the numbers (when there is room, and always when zoomed).

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::model::{DeviceModel, Model};
use crate::sample::BlockSettings;
use crate::ui::columns::Column;
use crate::ui::format::{self, Units};
use crate::ui::table::{self, Sort, SortColumn};
use crate::ui::theme::Level;
use crate::ui::view::{Context, View, ViewAction};

/// %util from which a device is highlighted. Only meaningful for single-queue devices: a device
/// serving requests in parallel can show 100 % with capacity to spare (marked with `*`).
const UTIL_WARN: f64 = 60.0;
const UTIL_CRIT: f64 = 90.0;

/// Most device rows the pane asks for when sharing the screen (more scroll, or zoom).
pub const MAX_SHARED_ROWS: u16 = 8;

/// The devices pane's sort key. `s` cycles through them in this order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DevSort {
    /// /proc/diskstats order: rows do not move between samples.
    #[default]
    Kernel,
    Util,
    /// Read + write bytes per second.
    Bytes,
    /// Read + write requests per second.
    Iops,
    Name,
}

impl DevSort {
    pub const ORDER: [DevSort; 5] =
        [DevSort::Kernel, DevSort::Util, DevSort::Bytes, DevSort::Iops, DevSort::Name];

    pub fn label(self) -> &'static str {
        match self {
            DevSort::Kernel => "diskstats order",
            DevSort::Util => "%util",
            DevSort::Bytes => "read+write",
            DevSort::Iops => "r/s+w/s",
            DevSort::Name => "name",
        }
    }

    /// Figures sort biggest first; the kernel's order and names as they come.
    fn descending_by_default(self) -> bool {
        matches!(self, DevSort::Util | DevSort::Bytes | DevSort::Iops)
    }

    fn key(self, d: &DeviceModel) -> f64 {
        match self {
            DevSort::Util => d.util,
            DevSort::Bytes => d.rkb_s + d.wkb_s,
            DevSort::Iops => d.r_s + d.w_s,
            DevSort::Kernel | DevSort::Name => 0.0,
        }
    }
}

impl SortColumn for DevSort {
    fn next(self) -> DevSort {
        let i = DevSort::ORDER.iter().position(|s| *s == self).unwrap_or(0);
        DevSort::ORDER[(i + 1) % DevSort::ORDER.len()]
    }
}

/// The devices pane's own state: the selected device (by name; the detail view shows it), the
/// sort, and which devices are listed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DevicesView {
    pub selection: crate::ui::table::Selection,
    pub sort: Sort<DevSort>,
    /// `P`: partitions too.
    pub show_partitions: bool,
    /// `i`: loop/ram/zram devices even when they did no I/O.
    pub show_idle_virtual: bool,
}

impl DevicesView {
    /// Whole disks (plus partitions with `P`), hiding virtual devices that did no I/O (unless
    /// `i`), sorted by `s` (by default in the model's order: it follows /proc/diskstats, so rows do
    /// not jump between samples); ties keep that order.
    pub fn visible<'a>(&self, model: &'a Model) -> Vec<&'a DeviceModel> {
        let mut rows: Vec<&DeviceModel> = model
            .devices
            .iter()
            .filter(|d| self.show_partitions || !d.is_partition)
            .filter(|d| self.show_idle_virtual || !(d.is_virtual && d.idle))
            .collect();
        let column = self.sort.column;
        let descending = column.descending_by_default() != self.sort.reversed;
        if column != DevSort::Kernel || self.sort.reversed {
            rows.sort_by(|a, b| {
                let ord = match column {
                    DevSort::Name => a.name.cmp(&b.name),
                    _ => column.key(a).total_cmp(&column.key(b)),
                };
                if descending {
                    ord.reverse()
                } else {
                    ord
                }
            });
        }
        rows
    }

    /// How many devices the toggles hide (shown in the pane title so nothing vanishes silently).
    pub fn hidden(&self, model: &Model) -> usize {
        model.devices.len() - self.visible(model).len()
    }

    /// The selected device among those listed (the last when the selection is past them).
    pub fn selected<'a>(&self, model: &'a Model) -> Option<&'a DeviceModel> {
        let devices = self.visible(model);
        devices.get(self.selection.index().min(devices.len().saturating_sub(1))).copied()
    }

    /// Rows the pane wants: title, table header, one per visible device (at least one line for a
    /// message), capped when sharing the screen.
    pub fn wanted_height(&self, model: &Model) -> u16 {
        let n = self.visible(model).len().max(1) as u16;
        2 + n.min(MAX_SHARED_ROWS)
    }
}

impl View for DevicesView {
    fn title(&self, ctx: &Context) -> String {
        let model = ctx.model;
        let hidden = self.hidden(model);
        // The sort is named once `s` or `r` changed it (the kernel's order needs no word).
        let mut t = String::from("Devices");
        if self.sort != Sort::default() {
            let arrow =
                if self.sort.column.descending_by_default() != self.sort.reversed { "▼" } else { "▲" };
            t.push_str(&format!("  sort {} {arrow}", self.sort.column.label()));
        }
        if model.interval_s == 0.0 {
            t.push_str("  rates pending");
        }
        if hidden > 0 {
            t.push_str(&format!("  {hidden} hidden (P partitions, i idle virtual)"));
        }
        let disagree: Vec<&str> = model
            .devices
            .iter()
            .filter(|d| d.bpf.as_ref().and_then(|b| b.crosscheck.as_ref()).is_some_and(|x| x.mismatch))
            .map(|d| d.name.as_str())
            .collect();
        if !disagree.is_empty() {
            t.push_str(&format!("  ≠ eBPF and diskstats disagree: {} (Enter, e)", disagree.join(" ")));
        } else if model.bpf.enabled {
            t.push_str("  Enter: eBPF detail");
        }
        t
    }

    fn render(&self, frame: &mut Frame, inner: Rect, ctx: &Context) {
        let (model, theme) = (ctx.model, ctx.theme);
        let devices = self.visible(model);
        if devices.is_empty() {
            let msg =
                if model.devices.is_empty() { "no block devices reported" } else { "all devices hidden" };
            frame.render_widget(Paragraph::new(Span::styled(msg, theme.dim())), inner);
            return;
        }
        let (stats_area, settings_area) = if ctx.zoomed {
            // Zoomed: the settings get their own table below the statistics, whatever the width.
            let stats_h = (devices.len() as u16 + 1).min(inner.height.saturating_sub(4).max(2));
            let [a, _, b] =
                Layout::vertical([Constraint::Length(stats_h), Constraint::Length(1), Constraint::Fill(1)])
                    .areas(inner);
            (a, Some(b))
        } else {
            (inner, None)
        };
        let with_settings = settings_area.is_none();
        let columns = stat_columns(model, &devices, ctx, with_settings);
        table::render(frame, stats_area, columns, &theme, &self.selection, ctx.focused);
        if let Some(area) = settings_area {
            let [title_area, table_area] =
                Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(area);
            frame.render_widget(
                Paragraph::new(Line::from(Span::styled("Queue settings (/sys/block/*/queue)", theme.dim()))),
                title_area,
            );
            table::render(
                frame,
                table_area,
                settings_columns(&devices),
                &theme,
                &self.selection,
                ctx.focused,
            );
        }
    }

    /// `P`, `i` and the selection (the stack gives the pane `P` and `i` whatever has the focus).
    fn handle_key(&mut self, code: crossterm::event::KeyCode) -> Option<ViewAction> {
        use crossterm::event::KeyCode;
        match code {
            KeyCode::Char('P') => self.show_partitions = !self.show_partitions,
            KeyCode::Char('i') => self.show_idle_virtual = !self.show_idle_virtual,
            code if table::sorted_table_key(code, &mut self.sort, &mut self.selection) => {}
            _ => return None,
        }
        Some(ViewAction::Redraw)
    }

    fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("↑↓", "device"),
            ("s r", "sort / reverse"),
            ("Enter", "eBPF detail"),
            ("P", "partitions"),
            ("i", "idle virtual"),
        ]
    }

    fn follow(&mut self, ctx: &Context) {
        let names: Vec<String> = self.visible(ctx.model).iter().map(|d| d.name.clone()).collect();
        self.selection.follow(names);
    }
}

/// Builds a column from one formatter applied to every device.
fn col(
    title: &str,
    priority: u8,
    devices: &[&DeviceModel],
    f: impl Fn(&DeviceModel) -> (String, Style),
) -> Column {
    let mut c = Column::new(title, priority);
    c.cells = devices.iter().map(|d| f(d)).collect();
    c
}

/// The iostat -x columns. `with_settings` adds the queue settings as low-priority columns (they show
/// when the pane is wide enough).
fn stat_columns(model: &Model, devices: &[&DeviceModel], ctx: &Context, with_settings: bool) -> Vec<Column> {
    let theme = ctx.theme;
    let u = ctx.units;
    let pending = model.interval_s == 0.0;
    let plain = |s: String| (s, Style::new());
    // Rates are meaningless before the first interval: shown as "-" rather than a false 0.
    let rate = move |s: String| if pending { plain("-".into()) } else { plain(s) };
    let kb_s = move |kb: f64| match u {
        Units::Human => format::human_bytes(kb * 1024.0),
        Units::Raw => format!("{kb:.2}"),
    };
    let (rkb_title, wkb_title, rsz_title, wsz_title) = match u {
        Units::Human => ("read/s", "write/s", "rareq-sz", "wareq-sz"),
        Units::Raw => ("rkB/s", "wkB/s", "rareq-sz", "wareq-sz"),
    };

    let mut cols = vec![
        col("Device", 0, devices, |d| {
            let style = if d.idle { theme.dim() } else { Style::new() };
            (format::shorten(&d.name, 14), style)
        })
        .left()
        .min_width(7)
        .key(),
        col("r/s", 1, devices, |d| rate(format::count(d.r_s, u))),
        col("w/s", 1, devices, |d| rate(format::count(d.w_s, u))),
        col(rkb_title, 2, devices, |d| rate(kb_s(d.rkb_s))),
        col(wkb_title, 2, devices, |d| rate(kb_s(d.wkb_s))),
        col("rrqm/s", 7, devices, |d| rate(format::count(d.rrqm_s, u))),
        col("wrqm/s", 7, devices, |d| rate(format::count(d.wrqm_s, u))),
        col(rsz_title, 4, devices, |d| rate(kb_s(d.rareq_sz))),
        col(wsz_title, 3, devices, |d| rate(kb_s(d.wareq_sz))),
        col("r_await", 4, devices, |d| rate(format::millis(d.r_await, u))),
        col("w_await", 3, devices, |d| rate(format::millis(d.w_await, u))),
        col("aqu-sz", 2, devices, |d| rate(format::count(d.aqu_sz, Units::Raw))),
        col("%util", 0, devices, |d| {
            if pending {
                return plain("-".into());
            }
            // More than one hardware queue: requests run in parallel and 100 % is not saturation.
            let multi_queue = d.settings.as_ref().and_then(|s| s.hw_queues).is_some_and(|q| q > 1);
            let text = format!("{}{}", format::percent(d.util), if multi_queue { "*" } else { "" });
            let level = if multi_queue { Level::Normal } else { Level::of(d.util, UTIL_WARN, UTIL_CRIT) };
            (text, theme.level(level))
        }),
        col("inflt", 6, devices, |d| plain(d.in_flight.to_string())),
    ];
    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| match v {
        Some(v) if !pending => f(v),
        Some(_) => "-".to_string(),
        None => "".to_string(),
    };
    if devices.iter().any(|d| d.d_s.is_some()) {
        cols.push(col("d/s", 8, devices, |d| plain(opt(d.d_s, &|v| format::count(v, u)))));
        cols.push(col(if u == Units::Raw { "dkB/s" } else { "discard/s" }, 8, devices, |d| {
            plain(opt(d.dkb_s, &|v| kb_s(v)))
        }));
        cols.push(col("d_await", 8, devices, |d| plain(opt(d.d_await, &|v| format::millis(v, u)))));
    }
    if devices.iter().any(|d| d.f_s.is_some()) {
        cols.push(col("f/s", 8, devices, |d| plain(opt(d.f_s, &|v| format::count(v, u)))));
        cols.push(col("f_await", 8, devices, |d| plain(opt(d.f_await, &|v| format::millis(v, u)))));
    }
    if model.bpf.enabled && devices.iter().any(|d| d.bpf.is_some()) {
        // What block_rq_issue saw leave the queue for the driver: requests and bytes per second.
        cols.push(col("bpf iss/s", 5, devices, |d| {
            plain(match &d.bpf {
                Some(b) if !pending => format::count(b.read_iops + b.write_iops + b.other_iops, u),
                Some(_) => "-".into(),
                None => "".into(),
            })
        }));
        cols.push(col(if u == Units::Raw { "bpf kB/s" } else { "bpf B/s" }, 5, devices, |d| {
            match &d.bpf {
                // eBPF and /proc/diskstats disagree: flagged, never a quiet wrong number.
                Some(b) if !pending && b.crosscheck.as_ref().is_some_and(|x| x.mismatch) => (
                    format!("≠{}", kb_s((b.read_bytes_s + b.write_bytes_s) / 1024.0)),
                    theme.level(Level::Critical),
                ),
                Some(b) if !pending => plain(kb_s((b.read_bytes_s + b.write_bytes_s) / 1024.0)),
                Some(_) => plain("-".into()),
                None => plain("".into()),
            }
        }));
        // Device time (issue → complete) p99 and the average queue time, from the block probes.
        let ms = move |v: Option<f64>| {
            if pending {
                "-".into()
            } else {
                v.map(|v| format::millis(v, u)).unwrap_or_default()
            }
        };
        cols.push(col("p99 ms", 5, devices, |d| plain(ms(d.bpf.as_ref().and_then(|b| b.lat_p99_ms)))));
        cols.push(col("q ms", 6, devices, |d| plain(ms(d.bpf.as_ref().and_then(|b| b.queue_ms_avg)))));
    }
    if with_settings {
        cols.extend(settings_columns(devices).into_iter().skip(1).map(|mut c| {
            c.priority = 9;
            c
        }));
    }
    cols
}

fn setting<T: ToString>(v: Option<T>) -> (String, Style) {
    (v.map(|v| v.to_string()).unwrap_or_else(|| "?".into()), Style::new())
}

/// Queue settings from sysfs, named after their files.
fn settings_columns(devices: &[&DeviceModel]) -> Vec<Column> {
    let get = |d: &DeviceModel| d.settings.clone().unwrap_or_default();
    let s = |d: &DeviceModel, f: &dyn Fn(&BlockSettings) -> (String, Style)| f(&get(d));
    vec![
        col("Device", 0, devices, |d| (format::shorten(&d.name, 14), Style::new())).left().key(),
        col("sched", 1, devices, |d| s(d, &|b| setting(b.scheduler.clone()))).left(),
        col("ra_kb", 1, devices, |d| s(d, &|b| setting(b.read_ahead_kb))),
        col("nr_req", 1, devices, |d| s(d, &|b| setting(b.nr_requests))),
        col("rot", 1, devices, |d| s(d, &|b| setting(b.rotational.map(|r| if r { "yes" } else { "no" })))),
        col("max_kb", 1, devices, |d| s(d, &|b| setting(b.max_sectors_kb))),
        col("hwq", 2, devices, |d| s(d, &|b| setting(b.hw_queues))),
        col("lbs", 2, devices, |d| s(d, &|b| setting(b.logical_block_size))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(name: &str, is_partition: bool, is_virtual: bool, idle: bool) -> DeviceModel {
        DeviceModel { name: name.into(), is_partition, is_virtual, idle, ..Default::default() }
    }

    #[test]
    fn devices_hide_partitions_and_idle_virtual_by_default() {
        let m = Model {
            devices: vec![
                dev("vda", false, false, false),
                dev("vda1", true, false, false),
                dev("loop0", false, true, true),
                dev("loop1", false, true, false),
                dev("nvme0n1", false, false, true),
            ],
            ..Default::default()
        };
        let mut v = DevicesView::default();
        let names = |v: &DevicesView| v.visible(&m).iter().map(|d| d.name.clone()).collect::<Vec<_>>();
        // An idle physical disk stays; a busy loop device stays.
        assert_eq!(names(&v), vec!["vda", "loop1", "nvme0n1"]);
        assert_eq!(v.hidden(&m), 2);
        assert_eq!(v.handle_key(crossterm::event::KeyCode::Char('P')), Some(ViewAction::Redraw));
        assert_eq!(names(&v), vec!["vda", "vda1", "loop1", "nvme0n1"]);
        v.handle_key(crossterm::event::KeyCode::Char('i'));
        assert_eq!(names(&v), vec!["vda", "vda1", "loop0", "loop1", "nvme0n1"]);
        assert_eq!(v.hidden(&m), 0);
    }
}
