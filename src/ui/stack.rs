//! The stack: the memory, devices, process and page-cache panes one above the other, the body's
//! bottom view. Its own state is which pane has the focus, whether it fills the body (`z`) and
//! which table the process pane shows (`d`); its keys say which pane a key is for, and the owner
//! ([`crate::ui::state::UiState`]) hands the key to that pane's view. The stack's keys keep working
//! under the other views (the device detail follows the devices' selection).

use crossterm::event::KeyCode;

/// One pane of the stack, with its focus key (1–4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pane {
    Memory,
    #[default]
    Devices,
    Processes,
    /// Page cache per process (eBPF), or the /proc estimate without it.
    PageCache,
}

impl Pane {
    pub const ORDER: [Pane; 4] = [Pane::Memory, Pane::Devices, Pane::Processes, Pane::PageCache];

    fn index(self) -> usize {
        Pane::ORDER.iter().position(|p| *p == self).unwrap_or(0)
    }

    pub fn next(self) -> Pane {
        Pane::ORDER[(self.index() + 1) % Pane::ORDER.len()]
    }

    pub fn previous(self) -> Pane {
        Pane::ORDER[(self.index() + Pane::ORDER.len() - 1) % Pane::ORDER.len()]
    }

    /// The key that focuses it, shown on its rule.
    pub fn key(self) -> char {
        match self {
            Pane::Memory => '1',
            Pane::Devices => '2',
            Pane::Processes => '3',
            Pane::PageCache => '4',
        }
    }

    /// The compare groups (`model::compare`) whose deltas the pane shows against a baseline.
    pub fn compare_groups(self) -> &'static [&'static str] {
        match self {
            Pane::Memory => &["memory", "psi"],
            Pane::Devices => &["devices"],
            Pane::Processes => &["processes", "syncs"],
            Pane::PageCache => &["cache"],
        }
    }
}

/// Which table the process pane shows: /proc/PID/io per process, or (`d`) the eBPF disk I/O per
/// submitter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProcessTable {
    #[default]
    Proc,
    Submitters,
}

/// The stack's own state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackView {
    pub focus: Pane,
    /// `z`: the focused pane fills the body.
    pub zoomed: bool,
    pub process_table: ProcessTable,
}

/// What a key means to the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackKey {
    /// The stack's own state changed (focus, zoom): draw again.
    Redraw,
    /// `d`: the process pane shows its other table, from its first row in its natural order.
    SwitchedProcessTable,
    /// The key belongs to this pane's view.
    Pane(Pane),
    /// Not a key of the stack nor of its panes.
    None,
}

impl StackView {
    /// The stack's keys: focus (Tab, 1-4), zoom and `d`; the sort keys (`s`, `r`) go to the page
    /// cache or the devices when they have the focus, else to the processes; `a` to the processes, `P` and `i` to
    /// the devices, whatever has the focus; the selection keys to the focused pane.
    pub fn handle_key(&mut self, code: KeyCode) -> StackKey {
        match code {
            KeyCode::Tab => self.focus = self.focus.next(),
            KeyCode::BackTab => self.focus = self.focus.previous(),
            KeyCode::Char(c @ '1'..='4') => self.focus = Pane::ORDER[c as usize - '1' as usize],
            KeyCode::Char('z') => self.zoomed = !self.zoomed,
            KeyCode::Char('d') => {
                self.process_table = match self.process_table {
                    ProcessTable::Proc => ProcessTable::Submitters,
                    ProcessTable::Submitters => ProcessTable::Proc,
                };
                return StackKey::SwitchedProcessTable;
            }
            KeyCode::Char('s' | 'r') if matches!(self.focus, Pane::PageCache | Pane::Devices) => {
                return StackKey::Pane(self.focus)
            }
            KeyCode::Char('s' | 'r' | 'a' | 'L') => return StackKey::Pane(Pane::Processes),
            KeyCode::Char('P' | 'i') => return StackKey::Pane(Pane::Devices),
            code if crate::ui::table::step_of(code).is_some() => return StackKey::Pane(self.focus),
            KeyCode::Left | KeyCode::Right => return StackKey::Pane(self.focus),
            _ => return StackKey::None,
        }
        StackKey::Redraw
    }

    /// The keys the stack offers (key, what it does), for the footer and the help.
    pub fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[("Tab 1-4", "focus"), ("z", "zoom"), ("d", "eBPF / proc processes")]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_say_which_pane_they_are_for() {
        let mut s = StackView::default();
        assert_eq!(s.handle_key(KeyCode::Char('4')), StackKey::Redraw);
        assert_eq!(s.focus, Pane::PageCache);
        assert_eq!(s.handle_key(KeyCode::Char('s')), StackKey::Pane(Pane::PageCache));
        assert_eq!(s.handle_key(KeyCode::Char('a')), StackKey::Pane(Pane::Processes));
        assert_eq!(s.handle_key(KeyCode::Char('P')), StackKey::Pane(Pane::Devices));
        assert_eq!(s.handle_key(KeyCode::PageDown), StackKey::Pane(Pane::PageCache));
        s.handle_key(KeyCode::Char('1'));
        assert_eq!(s.handle_key(KeyCode::Char('r')), StackKey::Pane(Pane::Processes));
        s.handle_key(KeyCode::Char('2'));
        assert_eq!(s.handle_key(KeyCode::Char('s')), StackKey::Pane(Pane::Devices));
        assert_eq!(s.handle_key(KeyCode::Right), StackKey::Pane(Pane::Devices));
        s.handle_key(KeyCode::Char('1'));
        assert_eq!(s.handle_key(KeyCode::Char('j')), StackKey::Pane(Pane::Memory));
        assert_eq!(s.handle_key(KeyCode::Char('d')), StackKey::SwitchedProcessTable);
        assert_eq!(s.process_table, ProcessTable::Submitters);
        assert_eq!(s.handle_key(KeyCode::Char('x')), StackKey::None);
    }
}
