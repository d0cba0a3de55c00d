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
    pub cells: Vec<(String, Style)>,
}

impl Column {
    pub fn new(title: impl Into<String>, priority: u8) -> Column {
        Column { title: title.into(), left: false, priority, min_width: 0, cells: Vec::new() }
    }

    pub fn left(mut self) -> Column {
        self.left = true;
        self
    }

    pub fn min_width(mut self, width: u16) -> Column {
        self.min_width = width;
        self
    }

    pub fn width(&self) -> u16 {
        let widest = self.cells.iter().map(|(s, _)| s.chars().count()).max().unwrap_or(0);
        (widest.max(self.title.chars().count()) as u16).max(self.min_width)
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

/// Builds a table of the columns that fit `available` cells, with `header_style` on the titles.
///
/// Every cell is shown through [`crate::untrusted::escape`] (a no-op for numbers and ordinary
/// names), so that no table shows a name raw, whichever view built it.
pub fn table(mut columns: Vec<Column>, available: u16, header_style: Style) -> Table<'static> {
    for c in &mut columns {
        for (text, _) in &mut c.cells {
            if let std::borrow::Cow::Owned(escaped) = crate::untrusted::escape(text) {
                *text = escaped;
            }
        }
    }
    let sizes: Vec<(u16, u8)> = columns.iter().map(|c| (c.width(), c.priority)).collect();
    let chosen = fit(&sizes, available);
    let rows_n = columns.iter().map(|c| c.cells.len()).max().unwrap_or(0);
    let align = |text: String, left: bool, style: Style| -> Cell<'static> {
        let line = Line::from(Span::styled(text, style));
        Cell::from(if left { line } else { line.right_aligned() })
    };
    let header = Row::new(
        chosen
            .iter()
            .map(|&i| align(columns[i].title.clone(), columns[i].left, Style::new()))
            .collect::<Vec<_>>(),
    )
    .style(header_style);
    let rows: Vec<Row> = (0..rows_n)
        .map(|r| {
            Row::new(
                chosen
                    .iter()
                    .map(|&i| {
                        let (text, style) = columns[i].cells.get(r).cloned().unwrap_or_default();
                        align(text, columns[i].left, style)
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    let widths: Vec<Constraint> = chosen.iter().map(|&i| Constraint::Length(sizes[i].0)).collect();
    Table::new(rows, widths).header(header).column_spacing(SPACING)
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

    #[test]
    fn width_is_the_widest_of_title_and_cells() {
        let mut c = Column::new("r/s", 1);
        c.cells = vec![("4700.0".into(), Style::new()), ("0".into(), Style::new())];
        assert_eq!(c.width(), 6);
        assert_eq!(Column::new("r_await", 1).width(), 7);
        assert_eq!(Column::new("comm", 0).min_width(15).width(), 15);
    }
}
