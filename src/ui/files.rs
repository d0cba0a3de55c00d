//! Files view (`f`): which files the disk is reading and writing in this interval, with the
//! readahead / demand split, dirtying, writeback credited to the file, direct I/O, cache residency
//! and the processes involved. Opened from a device's detail it shows that device's files; from
//! the process pane, the selected process's files. `/` filters by path, device or process.

use std::cmp::Ordering;

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::model::files::FileModel;
use crate::ui::columns::Column;
use crate::ui::format::{self, Units};
use crate::ui::table;
use crate::ui::table::{Selection, Sort, SortColumn};
use crate::ui::view::{pane_block, Context, View, ViewAction};

/// The files view's sort key; `s` cycles through them in this order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FileSort {
    /// Disk bytes (read into the cache + written back + direct): what keeps the disk busy.
    #[default]
    Disk,
    Read,
    Readahead,
    Dirtied,
    Writeback,
    Direct,
    /// Bytes of the sampled block requests mapped to the file through its extents.
    Block,
    Cached,
    Path,
}

impl FileSort {
    pub fn next(self) -> FileSort {
        use FileSort::*;
        match self {
            Disk => Read,
            Read => Readahead,
            Readahead => Dirtied,
            Dirtied => Writeback,
            Writeback => Direct,
            Direct => Block,
            Block => Cached,
            Cached => Path,
            Path => Disk,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            FileSort::Disk => "disk",
            FileSort::Read => "read",
            FileSort::Readahead => "readahead",
            FileSort::Dirtied => "dirtied",
            FileSort::Writeback => "writeback",
            FileSort::Direct => "direct",
            FileSort::Block => "blocks",
            FileSort::Cached => "cached%",
            FileSort::Path => "path",
        }
    }

    fn key(self, f: &FileModel) -> f64 {
        match self {
            FileSort::Disk | FileSort::Path => {
                f.disk_bytes_s.max(f.block_read_bytes_s + f.block_write_bytes_s)
            }
            FileSort::Read => f.disk_read_bytes_s,
            FileSort::Readahead => f.readahead_bytes_s,
            FileSort::Dirtied => f.dirtied_bytes_s,
            FileSort::Writeback => f.writeback_bytes_s,
            FileSort::Direct => f.direct_read_bytes_s + f.direct_write_bytes_s,
            FileSort::Block => f.block_read_bytes_s + f.block_write_bytes_s,
            FileSort::Cached => f.cached_pct.unwrap_or(-1.0),
        }
    }
}

impl SortColumn for FileSort {
    fn next(self) -> FileSort {
        FileSort::next(self)
    }
}

/// The files view's own state: its scope, sort and selected row (by `dev:ino`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FilesView {
    pub scope: FileScope,
    pub sort: Sort<FileSort>,
    pub selection: Selection,
}

/// What the view is limited to, fixed when it was opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum FileScope {
    #[default]
    All,
    /// The device selected in the devices pane (opened from its detail view): the context's.
    SelectedDevice,
    /// The process selected in the process pane: the context's.
    SelectedProcess,
}

/// The device name or pid the scope stands for in this model.
enum ScopeFilter {
    All,
    Device(String),
    Pid(u32),
}

impl FilesView {
    fn scope_filter(&self, ctx: &Context) -> ScopeFilter {
        match self.scope {
            FileScope::All => ScopeFilter::All,
            FileScope::SelectedDevice => {
                ctx.device.map_or(ScopeFilter::All, |d| ScopeFilter::Device(d.name.clone()))
            }
            FileScope::SelectedProcess => ctx.pid.map_or(ScopeFilter::All, ScopeFilter::Pid),
        }
    }

    /// The rows shown: in scope, matching the filter (path, device or process), sorted.
    pub fn visible<'a>(&self, ctx: &Context<'a>) -> Vec<&'a FileModel> {
        let scope = self.scope_filter(ctx);
        let needle = ctx.filter.to_lowercase();
        let mut rows: Vec<&FileModel> = ctx
            .model
            .files
            .iter()
            .filter(|f| match &scope {
                ScopeFilter::All => true,
                ScopeFilter::Device(d) => &f.device == d || f.block_disk.as_ref() == Some(d),
                ScopeFilter::Pid(pid) => f.processes.iter().any(|p| p.pid == *pid),
            })
            .filter(|f| {
                needle.is_empty()
                    || f.name().to_lowercase().contains(&needle)
                    || f.device.to_lowercase().contains(&needle)
                    || f.processes
                        .iter()
                        .any(|p| p.comm.to_lowercase().contains(&needle) || p.pid.to_string() == needle)
            })
            .collect();
        let sort = self.sort.column;
        rows.sort_by(|a, b| {
            let o = if sort == FileSort::Path {
                a.name().cmp(&b.name())
            } else {
                sort.key(b).partial_cmp(&sort.key(a)).unwrap_or(Ordering::Equal)
            };
            let o = if self.sort.reversed { o.reverse() } else { o };
            o.then_with(|| a.name().cmp(&b.name()))
        });
        rows
    }
}

impl View for FilesView {
    fn title(&self, ctx: &Context) -> String {
        let model = ctx.model;
        let fallback = crate::model::panes::fallback_note(
            &model.bpf.panes,
            &["files", "files_readahead", "files_writeback_ext4", "files_writeback_iomap", "direct_io"],
        );
        let mut t = format!(
            "Files{fallback}  sort {}{}",
            self.sort.column.label(),
            if self.sort.reversed { " (rev)" } else { "" }
        );
        match self.scope_filter(ctx) {
            ScopeFilter::All => {}
            ScopeFilter::Device(d) => t.push_str(&format!("  device {}", format::text(&d))),
            ScopeFilter::Pid(p) => t.push_str(&format!("  pid {p}")),
        }
        if !ctx.filter.is_empty() || ctx.editing_filter {
            t.push_str(&format!("  filter \"{}\"", ctx.filter));
        }
        t.push_str("  (f/Esc close, s r sort)");
        t
    }

    /// Draws its rule like a focused pane's, with the `f` key.
    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Context) {
        let (model, theme) = (ctx.model, ctx.theme);
        let block = pane_block('f', &self.title(ctx), true, theme);
        let inner = block.inner(area);
        frame.render_widget(block, area);
        let msg = |m: String| Paragraph::new(Span::styled(m, theme.dim()));
        if !model.bpf.enabled {
            let why = model.bpf.reason.clone().unwrap_or_default();
            frame.render_widget(
                msg(format!("per-file I/O needs the eBPF probes: {}", format::text(&why))),
                inner,
            );
            return;
        }
        if !crate::model::files::available(model) {
            frame.render_widget(
                msg("no per-file data: these samples were taken without per-file attribution".into()),
                inner,
            );
            return;
        }
        if model.interval_s == 0.0 {
            frame.render_widget(msg("per-file rates pending: first interval not over yet".into()), inner);
            return;
        }
        let rows = self.visible(ctx);
        let [table_area, foot] = Layout::vertical([Constraint::Fill(1), Constraint::Length(1)]).areas(inner);
        if rows.is_empty() {
            let m = if ctx.filter.is_empty() {
                "no file had disk I/O in this interval".to_string()
            } else {
                format!("no file matches \"{}\"", ctx.filter)
            };
            frame.render_widget(msg(m), table_area);
        } else {
            table::render(
                frame,
                table_area,
                file_columns(&rows, ctx, inner.width),
                &theme,
                &self.selection,
                true,
            );
        }
        let sampled = match model.block_files.as_ref().and_then(|b| b.sampled_pct) {
            Some(p) if p < 99.95 => format!(" ({p:.0}% of requests sampled)"),
            _ => String::new(),
        };
        // Figures this kernel cannot give, named before the legend (not shown as zeros).
        let missing: Vec<String> =
            ["files_readahead", "direct_io", "files_writeback_ext4", "files_writeback_iomap"]
                .iter()
                .filter_map(|id| crate::model::panes::not_live(&model.bpf.panes, id))
                .map(|p| {
                    format!("no {}: {}; ", p.title.trim_start_matches("files: "), format::text(&p.needs()))
                })
                .collect();
        let foot_text = format!(
        "{}{} files with I/O; read = pages read into the cache (ra = readahead), wb = written back, dio = direct I/O, \
         blk = block requests mapped by extent{sampled}",
        missing.concat(),
        crate::model::files::file_rows(&model.files)
    );
        frame.render_widget(msg(format::shorten(&foot_text, inner.width as usize)), foot);
    }

    /// `s`/`r` sort (back to the first row), the arrows and PgUp/PgDn/g/G select; `f`, Esc and the
    /// rest are the general keys.
    fn handle_key(&mut self, code: crossterm::event::KeyCode) -> Option<ViewAction> {
        use crossterm::event::KeyCode;
        match code {
            KeyCode::Char('s') => {
                self.sort.next_column();
                self.selection.reset();
            }
            code if table::sorted_table_key(code, &mut self.sort, &mut self.selection) => {}
            _ => return None,
        }
        Some(ViewAction::Redraw)
    }

    fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[("↑↓", "file"), ("s r", "sort / reverse"), ("f Esc", "close")]
    }

    /// The identities (`dev:ino`) of the rows on screen, in order.
    fn follow(&mut self, ctx: &Context) {
        let keys: Vec<String> = self.visible(ctx).iter().map(|f| format!("{}:{}", f.dev, f.ino)).collect();
        self.selection.follow(keys);
    }
}

/// The processes column is cut to this many characters.
const PROCESSES_WIDTH: usize = 36;

fn file_columns(rows: &[&FileModel], ctx: &Context, width: u16) -> Vec<Column> {
    let u = ctx.units;
    let plain = |s: String| (s, Style::new());
    let col = |name: &str, priority: u8, f: &dyn Fn(&FileModel) -> String| {
        let mut c = Column::new(name, priority).min_width(7);
        c.cells = rows.iter().map(|r| plain(f(r))).collect();
        c
    };
    let rate = |v: f64| if v == 0.0 { "-".to_string() } else { format::bytes(v, u) };
    // The path takes what the priority-0 numbers leave (about 40 cells), at least 20, and at
    // most 45 % of a wide screen so the other columns stay.
    let path_w = (width as usize).saturating_sub(42).min(width as usize * 45 / 100).max(20);
    let mut path = Column::new("file", 0).left().min_width(20).key_keep_end();
    path.cells = rows.iter().map(|r| plain(shorten_path(&r.name(), path_w))).collect();
    let mut procs = Column::new("processes", 1).left();
    procs.cells = rows
        .iter()
        .map(|r| {
            let names: Vec<String> = r.processes.iter().map(|p| format!("{}({})", p.comm, p.pid)).collect();
            plain(format::shorten(&names.join(" "), PROCESSES_WIDTH))
        })
        .collect();
    vec![
        path,
        col("dev", 1, &|r| r.device.clone()),
        col("read/s", 0, &|r| rate(r.disk_read_bytes_s)),
        col("ra/s", 1, &|r| rate(r.readahead_bytes_s)),
        col("dirty/s", 1, &|r| rate(r.dirtied_bytes_s)),
        col("wb/s", 0, &|r| rate(r.writeback_bytes_s)),
        col("dio r/s", 2, &|r| rate(r.direct_read_bytes_s)),
        col("dio w/s", 2, &|r| rate(r.direct_write_bytes_s)),
        col("dio/s", 0, &|r| rate(r.direct_read_bytes_s + r.direct_write_bytes_s)),
        col("blk r/s", 2, &|r| rate(r.block_read_bytes_s)),
        col("blk w/s", 2, &|r| rate(r.block_write_bytes_s)),
        col("blk/s", 0, &|r| rate(r.block_read_bytes_s + r.block_write_bytes_s)),
        col("cached", 0, &|r| r.cached_pct.map_or("-".into(), |p| format!("{p:.0}%"))),
        col("dirty", 2, &|r| r.dirty_bytes.map_or("-".into(), |b| format::bytes(b as f64, Units::Human))),
        procs,
    ]
}

/// Keeps the end of a path (the file name) when it must be cut: "…/dir/file".
fn shorten_path(p: &str, max: usize) -> String {
    let n = p.chars().count();
    if n <= max || max < 2 {
        return format::shorten(p, max);
    }
    let tail: String = p.chars().skip(n - (max - 1)).collect();
    format!("…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_paths_keep_their_file_name() {
        assert_eq!(shorten_path("/a/b/c/data.db", 8), "…data.db");
        assert_eq!(shorten_path("/a/data", 20), "/a/data");
    }
}
