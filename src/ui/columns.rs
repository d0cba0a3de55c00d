//! Tables whose columns adapt to the width: every column has a priority, and the most important
//! columns that fit are shown, in their natural order. This is what makes the same pane readable at
//! 80 columns and informative at 200.

use ratatui::layout::Constraint;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row, Table};

/// Space between columns.
pub const SPACING: u16 = 1;

/// One column, already formatted for every row.
pub struct Column {
    pub title: String,
    /// Text columns (names) are left-aligned; numbers are right-aligned.
    pub left: bool,
    /// 0 is shown first; larger numbers are dropped first when space runs out.
    pub priority: u8,
    /// Keeps a column from narrowing when its widest value does (columns would jump every sample).
    pub min_width: u16,
    /// Caps the column's width (longer cells are cut): a hostile 32-character user name does not
    /// push the rates off.
    pub max_width: Option<u16>,
    /// The key column (the name: a file, a process, a device): shown at every width, cut to what
    /// is left when the others do not fit.
    pub key: bool,
    /// A cut key keeps its end (a path's file name) rather than its start.
    pub keep_end: bool,
    pub cells: Vec<(String, Style)>,
}

impl Column {
    pub fn new(title: impl Into<String>, priority: u8) -> Column {
        Column {
            title: title.into(),
            left: false,
            priority,
            min_width: 0,
            max_width: None,
            key: false,
            keep_end: false,
            cells: Vec::new(),
        }
    }

    /// The table's key column, kept at every width (see [`Column::key`]).
    pub fn key(mut self) -> Column {
        self.key = true;
        self
    }

    /// The key column of a table of paths: cut, it keeps the file name (`…/dir/file`).
    pub fn key_keep_end(mut self) -> Column {
        self.key = true;
        self.keep_end = true;
        self
    }

    pub fn left(mut self) -> Column {
        self.left = true;
        self
    }

    pub fn min_width(mut self, width: u16) -> Column {
        self.min_width = width;
        self
    }

    pub fn max_width(mut self, width: u16) -> Column {
        self.max_width = Some(width);
        self
    }

    pub fn width(&self) -> u16 {
        let widest = self.cells.iter().map(|(s, _)| s.chars().count()).max().unwrap_or(0);
        let w = (widest.max(self.title.chars().count()) as u16).max(self.min_width);
        self.max_width.map_or(w, |max| w.min(max.max(self.min_width)))
    }
}

/// Indices (ascending) of the columns to show: taken by priority, then position, while they fit in
/// `available` with their spacing. The first column that does not fit ends the choice: a less
/// important narrow column never jumps ahead of a more important wide one (a lone `ra_kb` without
/// the other settings would only puzzle).
pub fn fit(widths_priorities: &[(u16, u8)], available: u16) -> Vec<usize> {
    let mut order: Vec<usize> = (0..widths_priorities.len()).collect();
    order.sort_by_key(|&i| (widths_priorities[i].1, i));
    let mut used: u32 = 0;
    let mut chosen = Vec::new();
    for i in order {
        let need = widths_priorities[i].0 as u32 + if chosen.is_empty() { 0 } else { SPACING as u32 };
        if used + need > available as u32 {
            break;
        }
        used += need;
        chosen.push(i);
    }
    chosen.sort_unstable();
    chosen
}

/// One column's needs for [`fit_from`]: its width, priority, and whether it is the key column.
#[derive(Clone, Copy, Debug)]
pub struct Need {
    pub width: u16,
    pub priority: u8,
    pub key: bool,
    pub min_width: u16,
}

/// The columns to show (indices, ascending, with their widths) and how far `→` may shift.
///
/// The key columns come first, whatever the width: up to a third of it while the other
/// priority-0 columns still fit, at least their minimum width (never wider than `available`); the other columns are taken by priority as in [`fit`]; the space they leave
/// goes back to the key columns, up to their full width. At offset `k` the key columns keep that
/// width and the others are taken in their order from the `k`-th, while they fit (the sideways
/// scroll). The shifts are 0 when every column fits, else the offset from which the last columns
/// all fit.
pub fn fit_from(needs: &[Need], available: u16, offset: usize) -> (Vec<(usize, u16)>, usize) {
    let others: Vec<usize> = (0..needs.len()).filter(|&i| !needs[i].key).collect();
    let keys: Vec<usize> = (0..needs.len()).filter(|&i| needs[i].key).collect();
    let sp = SPACING as u32;
    let avail = available as u32;
    let gap = |chosen: &[(usize, u16)]| if chosen.is_empty() { 0 } else { sp };
    // The key columns first: up to a third of the width while the other priority-0 columns
    // still fit, never below their minimum.
    let must: u32 =
        others.iter().filter(|&&i| needs[i].priority == 0).map(|&i| needs[i].width as u32 + sp).sum();
    let mut used: u32 = 0;
    let mut key_cols: Vec<(usize, u16)> = Vec::new();
    for &i in &keys {
        let n = needs[i];
        let left = avail.saturating_sub(used + gap(&key_cols));
        let share = (avail / 3).min(left.saturating_sub(must));
        let w = (n.width as u32).min(share.max(n.min_width.max(8) as u32)).min(left);
        if w == 0 {
            break;
        }
        used += w + gap(&key_cols);
        key_cols.push((i, w as u16));
    }
    // The others by priority, then what they leave to the key columns.
    let mut order = others.clone();
    order.sort_by_key(|&i| (needs[i].priority, i));
    let mut by_priority: Vec<(usize, u16)> = Vec::new();
    let mut u = used;
    for i in order {
        let need = needs[i].width as u32 + if key_cols.is_empty() && by_priority.is_empty() { 0 } else { sp };
        if u + need > avail {
            break;
        }
        u += need;
        by_priority.push((i, needs[i].width));
    }
    for (i, w) in key_cols.iter_mut() {
        let more = ((needs[*i].width - *w) as u32).min(avail - u);
        *w += more as u16;
        u += more;
        used += more;
    }
    let base = used;
    let fits_from = |k: usize| -> bool {
        let mut u = base;
        for (j, &i) in others.iter().enumerate().skip(k) {
            u += needs[i].width as u32 + if j == k && base == 0 { 0 } else { sp };
        }
        u <= avail
    };
    let shifts = if by_priority.len() == others.len() {
        0
    } else {
        (1..others.len()).find(|&k| fits_from(k)).unwrap_or(others.len())
    };
    let offset = offset.min(shifts);
    let mut chosen = key_cols;
    if offset == 0 {
        chosen.extend(by_priority);
    } else {
        for &i in others.iter().skip(offset) {
            let need = needs[i].width as u32 + gap(&chosen);
            if used + need > avail {
                break;
            }
            used += need;
            chosen.push((i, needs[i].width));
        }
    }
    chosen.sort_unstable();
    (chosen, shifts)
}

/// Builds a table of the columns that fit `available` cells, with `header_style` on the titles.
///
/// Every cell is shown through [`crate::untrusted::escape`] (a no-op for numbers and ordinary
/// names), so that no table shows a name raw, whichever view built it.
pub fn table(columns: Vec<Column>, available: u16, header_style: Style) -> Table<'static> {
    let rows = columns.iter().map(|c| c.cells.len()).max().unwrap_or(0);
    table_window(columns, available, header_style, 0, 0..rows, false).0
}

/// [`table`] for the rows in `rows` only, the other columns shifted by `offset` ([`fit_from`]),
/// with a line left empty under the header when `gap` (for the "▲ N more" marker); also returns
/// how far the columns may shift.
pub fn table_window(
    mut columns: Vec<Column>,
    available: u16,
    header_style: Style,
    offset: usize,
    rows: std::ops::Range<usize>,
    gap: bool,
) -> (Table<'static>, usize) {
    for c in &mut columns {
        for (text, _) in &mut c.cells {
            if let std::borrow::Cow::Owned(escaped) = crate::untrusted::escape(text) {
                *text = escaped;
            }
        }
    }
    let needs: Vec<Need> = columns
        .iter()
        .map(|c| Need { width: c.width(), priority: c.priority, key: c.key, min_width: c.min_width })
        .collect();
    let (chosen, shifts) = fit_from(&needs, available, offset);
    let align = |text: String, left: bool, style: Style| -> Cell<'static> {
        let line = Line::from(Span::styled(text, style));
        Cell::from(if left { line } else { line.right_aligned() })
    };
    let cut = |c: &Column, text: String, width: u16| -> String {
        if text.chars().count() <= width as usize {
            text
        } else if c.keep_end {
            crate::ui::format::shorten_start(&text, width as usize)
        } else {
            crate::ui::format::shorten(&text, width as usize)
        }
    };
    let header = Row::new(
        chosen
            .iter()
            .map(|&(i, w)| {
                let c = &columns[i];
                align(cut(c, c.title.clone(), w), c.left, Style::new())
            })
            .collect::<Vec<_>>(),
    )
    .style(header_style)
    .bottom_margin(u16::from(gap));
    let rows: Vec<Row> = rows
        .map(|r| {
            Row::new(
                chosen
                    .iter()
                    .map(|&(i, w)| {
                        let c = &columns[i];
                        let (text, style) = c.cells.get(r).cloned().unwrap_or_default();
                        align(cut(c, text, w), c.left, style)
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    let widths: Vec<Constraint> = chosen.iter().map(|&(_, w)| Constraint::Length(w)).collect();
    (Table::new(rows, widths).header(header).column_spacing(SPACING), shifts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_most_important_columns_in_natural_order() {
        // name(10,p0) a(5,p2) b(5,p1) c(20,p3) d(3,p4)
        let cols = [(10, 0), (5, 2), (5, 1), (20, 3), (3, 4)];
        assert_eq!(fit(&cols, 100), vec![0, 1, 2, 3, 4]);
        // 10 + 6 (b) + 6 (a) = 22; c needs 21 more: the choice ends there, d (4) is not taken.
        assert_eq!(fit(&cols, 42), vec![0, 1, 2]);
        assert_eq!(fit(&cols, 43), vec![0, 1, 2, 3]);
        assert_eq!(fit(&cols, 47), vec![0, 1, 2, 3, 4]);
        assert_eq!(fit(&cols, 16), vec![0, 2]);
        assert_eq!(fit(&cols, 9), Vec::<usize>::new());
    }

    fn need(width: u16, priority: u8, key: bool) -> Need {
        Need { width, priority, key, min_width: 0 }
    }

    #[test]
    fn the_key_column_is_kept_and_cut_and_the_others_shift() {
        // pid(7,p0) name(40,key) read(6,p0) write(6,p0) lat(8,p2)
        let mut cols =
            [need(7, 0, false), need(40, 0, true), need(6, 0, false), need(6, 0, false), need(8, 2, false)];
        cols[1].min_width = 15;
        // Everything fits at 80.
        assert_eq!(fit_from(&cols, 80, 0), (vec![(0, 7), (1, 40), (2, 6), (3, 6), (4, 8)], 0));
        // At 40 the name (at least 15) leaves room for pid, read and write (7+6+6 and their
        // spacing: 22), not lat: the 3 cells left go back to the name.
        assert_eq!(fit_from(&cols, 40, 0), (vec![(0, 7), (1, 18), (2, 6), (3, 6)], 2));
        // → skips pid, then read: lat comes into view, the name stays.
        assert_eq!(fit_from(&cols, 40, 1).0, vec![(1, 18), (2, 6), (3, 6)]);
        assert_eq!(fit_from(&cols, 40, 2).0, vec![(1, 18), (3, 6), (4, 8)]);
        assert_eq!(fit_from(&cols, 40, 9).0, vec![(1, 18), (3, 6), (4, 8)], "clamped to the last shift");
        // At 10 columns only the key column is left, cut to the width.
        assert_eq!(fit_from(&cols, 10, 0).0, vec![(1, 10)]);
    }

    #[test]
    fn width_is_the_widest_of_title_and_cells() {
        let mut c = Column::new("r/s", 1);
        c.cells = vec![("4700.0".into(), Style::new()), ("0".into(), Style::new())];
        assert_eq!(c.width(), 6);
        assert_eq!(Column::new("r_await", 1).width(), 7);
        assert_eq!(Column::new("comm", 0).min_width(15).width(), 15);
        let mut user = Column::new("USER", 3).min_width(4).max_width(9);
        user.cells = vec![("a-very-long-user-name".into(), Style::new())];
        assert_eq!(user.width(), 9, "cut to its cap");
    }
}
