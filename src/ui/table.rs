//! The state every table view shares: which row is selected, kept by the row's identity (a pid, a
//! device name, a file's `dev:ino`) rather than by its index, so the selection stays on the same
//! row when rows re-sort or come and go between two models; and a sort column with its direction.

use std::cell::Cell;

use crossterm::event::KeyCode;
use ratatui::layout::Rect;
use ratatui::widgets::TableState;
use ratatui::Frame;

use crate::ui::columns::{self, Column};
use crate::ui::theme::Theme;

/// Draws `columns` as a table filling `area`, scrolled by `selection`'s state (see
/// [`Selection`]): the rows that fit below the header, "▲ N more" / "▼ N more" in place of the
/// first / last row when rows are hidden above / below, and the columns that fit the width (the
/// key column always, [`columns::fit_from`]), shifted by the column offset (`←`/`→`). `focused`:
/// the selected row is highlighted and kept in view; without the focus the table shows its first
/// rows (the busiest) and no highlight.
pub fn render(
    frame: &mut Frame,
    area: Rect,
    columns: Vec<Column>,
    theme: &Theme,
    selection: &Selection,
    focused: bool,
) {
    if area.height == 0 || area.width == 0 {
        return;
    }
    let rows_n = columns.iter().map(|c| c.cells.len()).max().unwrap_or(0);
    let body = area.height.saturating_sub(1) as usize;
    let selected = selection.index.min(rows_n.saturating_sub(1));
    let top = if focused { scroll(rows_n, body, selected, selection.top.get()) } else { 0 };
    selection.top.set(top);
    let window = Window::of(rows_n, body, top);
    let (table, shifts) = columns::table_window(
        columns,
        area.width,
        theme.table_header(),
        selection.first_column,
        window.first..window.first + window.shown,
        window.up == 1,
    );
    selection.column_shifts.set(shifts);
    let table = table.row_highlight_style(theme.selected_row());
    let mut state = TableState::new().with_selected(focused.then(|| selected.saturating_sub(window.first)));
    let rows_area = Rect { height: (1 + window.up + window.shown) as u16, ..area };
    frame.render_stateful_widget(table, rows_area, &mut state);
    if window.up == 1 {
        let marker = Rect { y: area.y + 1, height: 1, ..area };
        frame.render_widget(more_line(&format!("▲ {} more", window.first), theme), marker);
    }
    if window.down > 0 {
        let y = area.y + (1 + window.up + window.shown) as u16;
        let marker = Rect { y, height: 1, ..area };
        frame.render_widget(more_line(&format!("▼ {} more", window.down), theme), marker);
    }
}

fn more_line(text: &str, theme: &Theme) -> ratatui::widgets::Paragraph<'static> {
    ratatui::widgets::Paragraph::new(ratatui::text::Span::styled(text.to_string(), theme.dim()))
}

/// Which rows a table of `rows` rows shows in `body` lines from row `top`: `up` is 1 when a
/// "▲ N more" line takes the first line, `down` the rows hidden below (a "▼" line takes the last).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub up: usize,
    pub first: usize,
    pub shown: usize,
    pub down: usize,
}

impl Window {
    pub fn of(rows: usize, body: usize, top: usize) -> Window {
        if rows <= body {
            return Window { up: 0, first: 0, shown: rows, down: 0 };
        }
        // Too few lines for markers: plain rows.
        let markers = body >= 3;
        let top = top.min(rows - 1);
        let up = usize::from(markers && top > 0);
        let space = body - up;
        let down_line = usize::from(markers && top + space < rows);
        let shown = (space - down_line).min(rows - top);
        Window { up, first: top, shown, down: if markers { rows - top - shown } else { 0 } }
    }
}

/// The first row to show so that `selected` is in view, moved from `top` only as far as needed
/// (never jumping), and never leaving lines empty while rows are hidden above.
pub fn scroll(rows: usize, body: usize, selected: usize, top: usize) -> usize {
    if rows <= body || body == 0 {
        return 0;
    }
    // The last first row: the last row in view, a "▲" line above (when there is room for markers).
    let max_top = if body >= 3 { rows - (body - 1) } else { rows - body };
    let mut top = top.min(max_top);
    if selected < top {
        top = selected;
    }
    while top < max_top {
        let w = Window::of(rows, body, top);
        if selected < w.first + w.shown {
            break;
        }
        top += 1;
    }
    top
}

/// The selected row of one table. Keys move the index; before each draw [`Selection::follow`]
/// gets the keys of the rows on screen, in order, and moves the index to where the selected row
/// is now (or keeps the index, clamped, when that row is gone).
///
/// It also keeps how the table is scrolled: the first row shown (set by [`render`], moved only as
/// far as the selected row needs) and the column offset `←`/`→` move while columns are hidden.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    index: usize,
    /// The identity of the row at `index` as of the last `follow`; None after a key moved the
    /// index (the row there is picked at the next `follow`).
    key: Option<String>,
    /// The first row shown at the last draw.
    top: Cell<usize>,
    /// Columns other than the key column skipped from the left (`→`).
    first_column: usize,
    /// How far `→` may go, as of the last draw (0: every column is shown).
    column_shifts: Cell<usize>,
}

impl Selection {
    /// The selected row's index among the rows on screen (may be past the end until the next
    /// `follow`: renderers clamp it).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The selected row's identity as of the last [`Selection::follow`].
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// Selects the row at `index` (the row there is the one kept from the next `follow` on).
    pub fn select_index(&mut self, index: usize) {
        self.index = index;
        self.key = None;
    }

    /// Back to the first row.
    pub fn reset(&mut self) {
        self.select_index(0);
        self.top.set(0);
    }

    /// The first row shown at the last draw.
    pub fn top(&self) -> usize {
        self.top.get()
    }

    /// The column offset (`←`/`→`).
    pub fn first_column(&self) -> usize {
        self.first_column
    }

    /// `←`/`→`: shows the columns hidden on the right (left); false when no column is hidden that
    /// way, or for another key.
    pub fn column_key(&mut self, code: KeyCode) -> bool {
        match code {
            KeyCode::Right if self.first_column < self.column_shifts.get() => self.first_column += 1,
            KeyCode::Left if self.first_column > 0 => self.first_column -= 1,
            KeyCode::Right | KeyCode::Left => return self.column_shifts.get() > 0,
            _ => return false,
        }
        true
    }

    /// The keys every table shares: the selection's steps and the column scroll.
    pub fn handle_key(&mut self, code: KeyCode) -> bool {
        self.step_key(code) || self.column_key(code)
    }

    /// Moves by `by` rows (never above the first; past the last is clamped by `follow`).
    pub fn step(&mut self, by: i64) {
        let index = (self.index as i64).saturating_add(by).max(0) as usize;
        self.select_index(index);
    }

    /// Moves by the rows a navigation key stands for; false for any other key.
    pub fn step_key(&mut self, code: KeyCode) -> bool {
        match step_of(code) {
            Some(by) => {
                self.step(by);
                true
            }
            None => false,
        }
    }

    /// Given the identities of the rows now on screen, in order: the selection moves to the
    /// selected row's new place; when that row is gone (or none was known) the index is kept,
    /// clamped to the rows, and the row there becomes the selected one.
    pub fn follow<I>(&mut self, keys: I)
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let keys: Vec<I::Item> = keys.into_iter().collect();
        if let Some(pos) = self.key.as_deref().and_then(|k| keys.iter().position(|r| r.as_ref() == k)) {
            self.index = pos;
            return;
        }
        self.index = self.index.min(keys.len().saturating_sub(1));
        self.key = keys.get(self.index).map(|k| k.as_ref().to_string());
    }
}

/// Rows a navigation key moves the selection by: ↑↓ j k one, PgUp PgDn ten, Home g End G to the
/// ends (past them on purpose: `follow` clamps).
pub fn step_of(code: KeyCode) -> Option<i64> {
    match code {
        KeyCode::PageDown => Some(10),
        KeyCode::PageUp => Some(-10),
        _ => list_step(code),
    }
}

/// How far a list-moving key moves the selection (↓ j, ↑ k, Home g, End G); None for any other key
/// (the views without pages leave PgUp and PgDn to the panes).
pub fn list_step(code: KeyCode) -> Option<i64> {
    match code {
        KeyCode::Down | KeyCode::Char('j') => Some(1),
        KeyCode::Up | KeyCode::Char('k') => Some(-1),
        KeyCode::Home | KeyCode::Char('g') => Some(i64::MIN / 2),
        KeyCode::End | KeyCode::Char('G') => Some(i64::MAX / 2),
        _ => None,
    }
}

/// The keys of a sortable table: `s` the next column, `r` the other direction, then the
/// selection's and the columns' ([`Selection::handle_key`]). False for any other key.
pub fn sorted_table_key<S: SortColumn>(code: KeyCode, sort: &mut Sort<S>, selection: &mut Selection) -> bool {
    match code {
        KeyCode::Char('s') => sort.next_column(),
        KeyCode::Char('r') => sort.reverse(),
        code => return selection.handle_key(code),
    }
    true
}

/// A table's sort column and whether it runs against the column's natural direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sort<S> {
    pub column: S,
    pub reversed: bool,
}

/// A sort column `s` cycles through.
pub trait SortColumn: Copy + PartialEq {
    fn next(self) -> Self;
}

impl<S: SortColumn> Sort<S> {
    /// `s`: the next column, in its natural direction.
    pub fn next_column(&mut self) {
        self.column = self.column.next();
        self.reversed = false;
    }

    /// `r`: the other direction.
    pub fn reverse(&mut self) {
        self.reversed = !self.reversed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selected_row_stays_selected_when_rows_re_sort() {
        let mut s = Selection::default();
        s.follow(["10", "20", "30"]);
        s.step(1);
        s.follow(["10", "20", "30"]);
        assert_eq!((s.index(), s.key()), (1, Some("20")));
        // The next model sorts 20 first, then last: the selection goes with it.
        s.follow(["20", "30", "10"]);
        assert_eq!((s.index(), s.key()), (0, Some("20")));
        s.follow(["30", "10", "20"]);
        assert_eq!((s.index(), s.key()), (2, Some("20")));
        // The row is gone: the index stays, clamped, on the row now there.
        s.follow(["30", "10"]);
        assert_eq!((s.index(), s.key()), (1, Some("10")));
        s.follow(Vec::<String>::new());
        assert_eq!((s.index(), s.key()), (0, None));
    }

    /// Checks the invariants of one frame: the selected row is among the rows shown, the first
    /// row shown is `top`, and the lines add up to the body.
    fn in_view(rows: usize, body: usize, selected: usize, top: usize) -> Window {
        let w = Window::of(rows, body, top);
        assert_eq!(w.first, top);
        assert!(w.first <= selected && selected < w.first + w.shown, "{selected} not in {w:?}");
        assert!(w.up + w.shown + usize::from(w.down > 0) <= body);
        assert_eq!(w.up, usize::from(top > 0), "a marker says rows are hidden above");
        assert_eq!(w.first + w.shown + w.down, rows);
        w
    }

    #[test]
    fn the_selection_and_the_top_row_stay_in_view_while_rows_come_and_go() {
        // 10 lines under the header, 30 rows, the selection walking down: the top row moves only
        // when the selection would leave the window, one row at a time.
        let mut top = 0;
        for selected in 0..30 {
            let next = scroll(30, 10, selected, top);
            assert!(next == top || next == top + 1 || (top == 0 && next == 2), "{top} → {next}: no jump");
            top = next;
            in_view(30, 10, selected, top);
        }
        assert_eq!(Window::of(30, 10, top), Window { up: 1, first: 21, shown: 9, down: 0 });
        // Back up: the top row stays until the selection reaches it.
        let at = scroll(30, 10, 25, top);
        assert_eq!(at, top, "the selection is in view: nothing moves");
        assert_eq!(scroll(30, 10, 20, top), 20);
        // Rows come and go under a fixed selection (row 12): the top row stays where it was
        // while the selection is in view, and comes up when rows below are gone.
        let mut top = scroll(30, 10, 12, 0);
        in_view(30, 10, 12, top);
        for rows in [31, 40, 25, 20, 14, 13] {
            let next = scroll(rows, 10, 12, top);
            in_view(rows, 10, 12, next);
            assert!(next <= top, "{rows} rows: the top row never moves down while the selection is in view");
            top = next;
        }
        // As many rows as lines: no scrolling, no marker.
        assert_eq!(scroll(10, 10, 9, 5), 0);
        assert_eq!(Window::of(10, 10, 0), Window { up: 0, first: 0, shown: 10, down: 0 });
        // Selection at the start of a long table: "▼ N more".
        assert_eq!(Window::of(1000, 10, 0), Window { up: 0, first: 0, shown: 9, down: 991 });
    }

    #[test]
    fn keys_move_the_index_and_pick_the_row_there() {
        let mut s = Selection::default();
        assert!(s.step_key(KeyCode::End));
        s.follow(["a", "b", "c"]);
        assert_eq!((s.index(), s.key()), (2, Some("c")));
        assert!(s.step_key(KeyCode::PageUp));
        assert_eq!(s.index(), 0, "never above the first row");
        assert!(!s.step_key(KeyCode::Char('x')));
        s.follow(["c", "a", "b"]);
        assert_eq!((s.index(), s.key()), (0, Some("c")));
    }
}
