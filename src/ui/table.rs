//! The state every table view shares: which row is selected, kept by the row's identity (a pid, a
//! device name, a file's `dev:ino`) rather than by its index, so the selection stays on the same
//! row when rows re-sort or come and go between two models; and a sort column with its direction.

use crossterm::event::KeyCode;
use ratatui::layout::Rect;
use ratatui::widgets::TableState;
use ratatui::Frame;

use crate::ui::columns::{self, Column};
use crate::ui::theme::Theme;

/// Draws `columns` as a table filling `area` (the columns that fit its width, see
/// [`columns::table`]), the `selected` row highlighted (None: no highlight, e.g. the pane has not
/// the focus).
pub fn render(frame: &mut Frame, area: Rect, columns: Vec<Column>, theme: &Theme, selected: Option<usize>) {
    let table =
        columns::table(columns, area.width, theme.table_header()).row_highlight_style(theme.selected_row());
    let mut state = TableState::new().with_selected(selected);
    frame.render_stateful_widget(table, area, &mut state);
}

/// The selected row of one table. Keys move the index; before each draw [`Selection::follow`]
/// gets the keys of the rows on screen, in order, and moves the index to where the selected row
/// is now (or keeps the index, clamped, when that row is gone).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    index: usize,
    /// The identity of the row at `index` as of the last `follow`; None after a key moved the
    /// index (the row there is picked at the next `follow`).
    key: Option<String>,
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

/// The keys every sorted table takes: `s` (next column), `r` (reverse) and the selection's
/// navigation keys; false for any other key.
pub fn sorted_table_key<S: SortColumn>(sort: &mut Sort<S>, selection: &mut Selection, code: KeyCode) -> bool {
    match code {
        KeyCode::Char('s') => sort.next_column(),
        KeyCode::Char('r') => sort.reverse(),
        code => return selection.step_key(code),
    }
    true
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
