//! Everything the user can change on screen, and the pure key handler that changes it.
//!
//! `handle_key` knows nothing about terminals or models: the event loop feeds it keys and acts on
//! the returned [`Action`], so every key binding is unit-tested without a terminal.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::model::Model;
use crate::ui::format::Units;
use crate::ui::history::History;
use crate::ui::io_processes::{self, IoSort};
use crate::ui::rows;

/// The sampling interval steps `+` and `-` move through (seconds): 0.25 s to 60 s.
pub const INTERVAL_STEPS_MS: [u64; 11] =
    [250, 500, 1000, 2000, 3000, 5000, 10_000, 15_000, 20_000, 30_000, 60_000];

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pane {
    Memory,
    #[default]
    Devices,
    Processes,
    /// Page cache per process (eBPF), or the /proc estimate without it.
    Cache,
}

impl Pane {
    const ORDER: [Pane; 4] = [Pane::Memory, Pane::Devices, Pane::Processes, Pane::Cache];

    fn index(self) -> usize {
        Pane::ORDER.iter().position(|p| *p == self).unwrap_or(0)
    }

    fn next(self) -> Pane {
        Pane::ORDER[(self.index() + 1) % Pane::ORDER.len()]
    }

    fn previous(self) -> Pane {
        Pane::ORDER[(self.index() + Pane::ORDER.len() - 1) % Pane::ORDER.len()]
    }
}

/// The process pane's sort key. `s` cycles through them in this order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProcSort {
    /// read_bytes + write_bytes per second: who makes the disk busy.
    #[default]
    Disk,
    Read,
    Write,
    Rchar,
    Wchar,
    Cancelled,
    CacheEstimate,
    Pid,
    Comm,
}

impl ProcSort {
    const ORDER: [ProcSort; 9] = [
        ProcSort::Disk,
        ProcSort::Read,
        ProcSort::Write,
        ProcSort::Rchar,
        ProcSort::Wchar,
        ProcSort::Cancelled,
        ProcSort::CacheEstimate,
        ProcSort::Pid,
        ProcSort::Comm,
    ];

    pub fn next(self) -> ProcSort {
        let i = ProcSort::ORDER.iter().position(|s| *s == self).unwrap_or(0);
        ProcSort::ORDER[(i + 1) % ProcSort::ORDER.len()]
    }

    /// Rates sort biggest first, pid and name in ascending order; `r` flips either.
    pub fn descending_by_default(self) -> bool {
        !matches!(self, ProcSort::Pid | ProcSort::Comm)
    }

    pub fn label(self) -> &'static str {
        match self {
            ProcSort::Disk => "read+write",
            ProcSort::Read => "read",
            ProcSort::Write => "write",
            ProcSort::Rchar => "rchar",
            ProcSort::Wchar => "wchar",
            ProcSort::Cancelled => "cancelled",
            ProcSort::CacheEstimate => "cache est.",
            ProcSort::Pid => "pid",
            ProcSort::Comm => "comm",
        }
    }
}

/// What the event loop must do after a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing changed on screen.
    None,
    /// UI state changed: draw again.
    Redraw,
    /// The user changed the sampling interval: tell the sampler, then draw again.
    SetInterval(Duration),
    Quit,
    /// `R`: start or stop recording the live session to a file.
    ToggleRecording,
    /// `b`: mark the model on screen as the baseline, or clear it.
    ToggleBaseline,
}

/// What the header shows while the live session is being recorded (`R`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordingIndicator {
    pub path: String,
    pub frames: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug)]
pub struct UiState {
    pub focus: Pane,
    /// The focused pane fills the screen below the header.
    pub zoomed: bool,
    pub help: bool,
    /// The shown model is frozen; sampling goes on so rates are current again on resume.
    pub paused: bool,
    pub units: Units,
    /// False with --no-color / NO_COLOR: no style carries a colour.
    pub color: bool,
    /// The sampling interval asked for (the model's `interval_s` is the one measured).
    pub interval: Duration,
    pub sort: ProcSort,
    /// True when the sort runs against `sort`'s natural direction.
    pub sort_reversed: bool,
    /// Process filter: substring of comm (case-insensitive) or of the pid. Empty = no filter.
    pub filter: String,
    /// True while the user types the filter after `/`.
    pub editing_filter: bool,
    pub show_partitions: bool,
    /// Show loop/ram/zram devices even when they did no I/O.
    pub show_idle_virtual: bool,
    /// Show processes without any I/O in the interval too.
    pub show_all_processes: bool,
    /// Selected row of the devices and process tables (index into the visible rows).
    pub selected_device: usize,
    pub selected_process: usize,
    pub history: History,
    /// Local time zone offset for the header clock, seconds east of UTC (0 in tests).
    pub utc_offset_s: i64,
    /// Set with `b`: the panes show their deltas against it until `b` clears it.
    pub baseline: Option<crate::ui::baseline::Baseline>,
    /// Set while `R` records the session.
    pub recording: Option<RecordingIndicator>,
    /// A one-line notice in the header (e.g. why recording could not start), until the next key.
    pub message: Option<String>,
    /// True in `ioscope replay`: the help shows the player's keys.
    pub replay: bool,
    /// Enter: the selected device's eBPF block-layer detail fills the body (Enter or Esc closes).
    pub device_detail: bool,
    /// `e`: the eBPF probe-health view fills the body.
    pub probe_health: bool,
    /// `b`: the process pane shows disk I/O per submitter (eBPF) instead of /proc/PID/io.
    pub io_view: bool,
    pub io_sort: IoSort,
    /// The cache pane's sort key and direction (`s`, `r` while it has the focus).
    pub cache_sort: crate::ui::cache::CacheSort,
    pub cache_sort_reversed: bool,
    pub selected_cache: usize,
    /// `f`: the files view fills the body (src/ui/files.rs), limited to `files_scope`.
    pub files_view: bool,
    pub files_scope: crate::ui::files::FileScope,
    pub files_sort: crate::ui::files::FileSort,
    pub files_sort_reversed: bool,
    pub selected_file: usize,
    /// `w`: the readahead view fills the body; Enter there opens the selected file's detail.
    pub readahead_view: bool,
    pub readahead_detail: bool,
    pub selected_readahead: usize,
    /// `y`: the sync-call view fills the body (src/ui/syncs.rs).
    pub syncs_view: bool,
    pub selected_sync: usize,
}

impl UiState {
    pub fn new(interval: Duration, color: bool) -> UiState {
        UiState {
            focus: Pane::default(),
            zoomed: false,
            help: false,
            paused: false,
            units: Units::Human,
            color,
            interval: clamp_interval(interval),
            sort: ProcSort::default(),
            sort_reversed: false,
            filter: String::new(),
            editing_filter: false,
            show_partitions: false,
            show_idle_virtual: false,
            show_all_processes: false,
            selected_device: 0,
            selected_process: 0,
            history: History::default(),
            utc_offset_s: 0,
            baseline: None,
            recording: None,
            message: None,
            replay: false,
            device_detail: false,
            probe_health: false,
            io_view: false,
            io_sort: IoSort::default(),
            cache_sort: Default::default(),
            cache_sort_reversed: false,
            selected_cache: 0,
            files_view: false,
            files_scope: Default::default(),
            files_sort: Default::default(),
            files_sort_reversed: false,
            selected_file: 0,
            readahead_view: false,
            readahead_detail: false,
            selected_readahead: 0,
            syncs_view: false,
            selected_sync: 0,
        }
    }

    /// Whether the current sort puts the biggest value first.
    pub fn sort_descending(&self) -> bool {
        self.sort.descending_by_default() != self.sort_reversed
    }

    /// Applies one key press. Key releases and repeats reported by some terminals are ignored.
    pub fn handle_key(&mut self, key: KeyEvent) -> Action {
        if key.kind == KeyEventKind::Release {
            return Action::None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && matches!(key.code, KeyCode::Char('c') | KeyCode::Char('C')) {
            return Action::Quit;
        }
        self.message = None;
        if self.editing_filter {
            return self.edit_filter(key.code);
        }
        if !self.help {
            if let Some(action) = crate::ui::readahead::handle_key(self, key.code) {
                return action;
            }
            if let Some(action) = crate::ui::syncs::handle_key(self, key.code) {
                return action;
            }
        }
        if self.help {
            // The overlay hides the panes: keys that would change them invisibly are ignored.
            return match key.code {
                KeyCode::Char('q') => Action::Quit,
                KeyCode::Char('?') | KeyCode::Esc | KeyCode::F(1) => {
                    self.help = false;
                    Action::Redraw
                }
                _ => Action::None,
            };
        }
        match key.code {
            KeyCode::Char('q') => Action::Quit,
            KeyCode::Char('?') | KeyCode::F(1) => toggle(&mut self.help),
            KeyCode::Char('f') => self.toggle_files_view(),
            KeyCode::Esc if self.files_view => self.toggle_files_view(),
            KeyCode::Char('s') if self.files_view => {
                self.files_sort = self.files_sort.next();
                self.files_sort_reversed = false;
                self.selected_file = 0;
                Action::Redraw
            }
            KeyCode::Char('r') if self.files_view => toggle(&mut self.files_sort_reversed),
            KeyCode::Down | KeyCode::Char('j') if self.files_view => self.move_file(1),
            KeyCode::Up | KeyCode::Char('k') if self.files_view => self.move_file(-1),
            KeyCode::PageDown if self.files_view => self.move_file(10),
            KeyCode::PageUp if self.files_view => self.move_file(-10),
            KeyCode::Home | KeyCode::Char('g') if self.files_view => self.move_file(i64::MIN / 2),
            KeyCode::End | KeyCode::Char('G') if self.files_view => self.move_file(i64::MAX / 2),
            KeyCode::Esc => {
                if self.probe_health {
                    self.probe_health = false;
                } else if self.device_detail {
                    self.device_detail = false;
                } else if self.zoomed {
                    self.zoomed = false;
                } else if !self.filter.is_empty() {
                    self.filter.clear();
                    self.selected_process = 0;
                } else {
                    return Action::None;
                }
                Action::Redraw
            }
            KeyCode::Tab => self.focus(self.focus.next()),
            KeyCode::BackTab => self.focus(self.focus.previous()),
            KeyCode::Char('1') => self.focus(Pane::Memory),
            KeyCode::Char('2') => self.focus(Pane::Devices),
            KeyCode::Char('3') => self.focus(Pane::Processes),
            KeyCode::Char('4') => self.focus(Pane::Cache),
            KeyCode::Down | KeyCode::Char('j') => self.move_selection(1),
            KeyCode::Up | KeyCode::Char('k') => self.move_selection(-1),
            KeyCode::PageDown => self.move_selection(10),
            KeyCode::PageUp => self.move_selection(-10),
            KeyCode::Home | KeyCode::Char('g') => self.move_selection(i64::MIN / 2),
            // Past the end on purpose: clamp_selection pulls it back to the last row.
            KeyCode::End | KeyCode::Char('G') => self.move_selection(i64::MAX / 2),
            KeyCode::Char('z') => toggle(&mut self.zoomed),
            KeyCode::Char('s') if self.focus == Pane::Cache => {
                self.cache_sort = self.cache_sort.next();
                self.cache_sort_reversed = false;
                Action::Redraw
            }
            KeyCode::Char('r') if self.focus == Pane::Cache => toggle(&mut self.cache_sort_reversed),
            KeyCode::Char('s') => {
                if self.io_view {
                    self.io_sort = self.io_sort.next();
                } else {
                    self.sort = self.sort.next();
                }
                self.sort_reversed = false;
                Action::Redraw
            }
            KeyCode::Enter => {
                // The detail of the selected device, whichever pane had the focus.
                self.device_detail = !self.device_detail;
                self.probe_health = false;
                if self.device_detail {
                    self.focus = Pane::Devices;
                }
                Action::Redraw
            }
            KeyCode::Char('e') => {
                self.probe_health = !self.probe_health;
                Action::Redraw
            }
            KeyCode::Char('d') => {
                self.io_view = !self.io_view;
                self.selected_process = 0;
                self.sort_reversed = false;
                Action::Redraw
            }
            KeyCode::Char('r') => toggle(&mut self.sort_reversed),
            KeyCode::Char('/') => {
                self.editing_filter = true;
                Action::Redraw
            }
            KeyCode::Char('a') => toggle(&mut self.show_all_processes),
            KeyCode::Char('P') => toggle(&mut self.show_partitions),
            KeyCode::Char('i') => toggle(&mut self.show_idle_virtual),
            KeyCode::Char('u') => {
                self.units = match self.units {
                    Units::Human => Units::Raw,
                    Units::Raw => Units::Human,
                };
                Action::Redraw
            }
            KeyCode::Char('p') | KeyCode::Char(' ') => toggle(&mut self.paused),
            KeyCode::Char('b') => Action::ToggleBaseline,
            KeyCode::Char('R') => Action::ToggleRecording,
            KeyCode::Char('+') => self.step_interval(true),
            KeyCode::Char('-') => self.step_interval(false),
            _ => Action::None,
        }
    }

    /// While typing after `/`: the filter applies as it is typed; Enter keeps it, Esc clears it.
    fn edit_filter(&mut self, code: KeyCode) -> Action {
        match code {
            KeyCode::Enter => self.editing_filter = false,
            KeyCode::Esc => {
                self.editing_filter = false;
                self.filter.clear();
            }
            KeyCode::Backspace => {
                self.filter.pop();
            }
            KeyCode::Char(c) if !c.is_control() => self.filter.push(c),
            _ => return Action::None,
        }
        self.selected_process = 0;
        self.selected_cache = 0;
        self.selected_file = 0;
        Action::Redraw
    }

    /// Opens the files view (scoped to the device in the detail view, or to the selected process
    /// when the process pane has the focus) or closes it.
    fn toggle_files_view(&mut self) -> Action {
        use crate::ui::files::FileScope;
        self.files_view = !self.files_view;
        self.selected_file = 0;
        if self.files_view {
            self.files_scope = if self.device_detail {
                FileScope::SelectedDevice
            } else if self.focus == Pane::Processes {
                FileScope::SelectedProcess
            } else {
                FileScope::All
            };
        }
        Action::Redraw
    }

    fn move_file(&mut self, by: i64) -> Action {
        self.selected_file = (self.selected_file as i64).saturating_add(by).max(0) as usize;
        Action::Redraw
    }

    fn focus(&mut self, pane: Pane) -> Action {
        self.focus = pane;
        Action::Redraw
    }

    fn move_selection(&mut self, by: i64) -> Action {
        let sel = match self.focus {
            Pane::Devices => &mut self.selected_device,
            Pane::Processes => &mut self.selected_process,
            Pane::Cache => &mut self.selected_cache,
            Pane::Memory => return Action::None,
        };
        *sel = (*sel as i64).saturating_add(by).max(0) as usize;
        Action::Redraw
    }

    fn step_interval(&mut self, up: bool) -> Action {
        let cur = self.interval.as_millis() as u64;
        let next = if up {
            INTERVAL_STEPS_MS.iter().copied().find(|&s| s > cur)
        } else {
            INTERVAL_STEPS_MS.iter().rev().copied().find(|&s| s < cur)
        };
        match next {
            Some(ms) => {
                self.interval = Duration::from_millis(ms);
                Action::SetInterval(self.interval)
            }
            None => Action::None,
        }
    }

    /// Keeps the selected rows within the rows the model has now (they come and go every sample).
    pub fn clamp_selection(&mut self, model: &Model) {
        let devices = rows::visible_devices(model, self).len();
        let processes = if self.io_view {
            io_processes::visible(model, self).len()
        } else {
            rows::visible_processes(model, self).len()
        };
        self.selected_device = self.selected_device.min(devices.saturating_sub(1));
        self.selected_process = self.selected_process.min(processes.saturating_sub(1));
        let cache = crate::ui::cache::row_count(model, self);
        self.selected_cache = self.selected_cache.min(cache.saturating_sub(1));
        if self.files_view {
            let files = crate::ui::files::visible(model, self).len();
            self.selected_file = self.selected_file.min(files.saturating_sub(1));
        }
    }
}

fn toggle(flag: &mut bool) -> Action {
    *flag = !*flag;
    Action::Redraw
}

/// An interval from the command line, kept within the range `+`/`-` offer.
pub fn clamp_interval(d: Duration) -> Duration {
    let min = Duration::from_millis(INTERVAL_STEPS_MS[0]);
    let max = Duration::from_millis(INTERVAL_STEPS_MS[INTERVAL_STEPS_MS.len() - 1]);
    d.clamp(min, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    fn code(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    fn state() -> UiState {
        UiState::new(Duration::from_secs(1), true)
    }

    #[test]
    fn quit_keys() {
        let mut s = state();
        assert_eq!(s.handle_key(key('q')), Action::Quit);
        assert_eq!(s.handle_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)), Action::Quit);
        // Plain 'c' is not bound.
        assert_eq!(s.handle_key(key('c')), Action::None);
    }

    #[test]
    fn sort_cycles_through_every_column_and_back() {
        let mut s = state();
        let mut seen = vec![s.sort];
        for _ in 0..8 {
            assert_eq!(s.handle_key(key('s')), Action::Redraw);
            seen.push(s.sort);
        }
        assert_eq!(seen, ProcSort::ORDER.to_vec());
        s.handle_key(key('s'));
        assert_eq!(s.sort, ProcSort::Disk);
    }

    #[test]
    fn reverse_flips_direction_and_a_new_column_resets_it() {
        let mut s = state();
        assert!(s.sort_descending());
        s.handle_key(key('r'));
        assert!(!s.sort_descending());
        s.handle_key(key('s'));
        assert_eq!(s.sort, ProcSort::Read);
        assert!(s.sort_descending());
        s.sort = ProcSort::Pid;
        assert!(!s.sort_descending(), "pid sorts ascending by default");
    }

    #[test]
    fn filter_editing_types_backspaces_keeps_and_clears() {
        let mut s = state();
        s.selected_process = 4;
        s.handle_key(key('/'));
        assert!(s.editing_filter);
        // While typing, bound keys are text: 'q' must not quit, 's' must not sort.
        for c in "fiqs".chars() {
            assert_eq!(s.handle_key(key(c)), Action::Redraw);
        }
        assert_eq!(s.filter, "fiqs");
        assert_eq!(s.sort, ProcSort::Disk);
        s.handle_key(code(KeyCode::Backspace));
        s.handle_key(code(KeyCode::Backspace));
        s.handle_key(key('o'));
        assert_eq!(s.filter, "fio");
        assert_eq!(s.selected_process, 0);
        s.handle_key(code(KeyCode::Enter));
        assert!(!s.editing_filter);
        assert_eq!(s.filter, "fio");
        // Esc in normal mode clears a kept filter.
        assert_eq!(s.handle_key(code(KeyCode::Esc)), Action::Redraw);
        assert_eq!(s.filter, "");
        assert_eq!(s.handle_key(code(KeyCode::Esc)), Action::None);
        // Esc while typing clears too.
        s.handle_key(key('/'));
        s.handle_key(key('x'));
        s.handle_key(code(KeyCode::Esc));
        assert!(!s.editing_filter);
        assert_eq!(s.filter, "");
        // Ctrl-C quits even while typing.
        s.handle_key(key('/'));
        assert_eq!(s.handle_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)), Action::Quit);
    }

    #[test]
    fn focus_by_tab_backtab_and_digits() {
        let mut s = state();
        assert_eq!(s.focus, Pane::Devices);
        s.handle_key(code(KeyCode::Tab));
        assert_eq!(s.focus, Pane::Processes);
        s.handle_key(code(KeyCode::Tab));
        assert_eq!(s.focus, Pane::Cache);
        s.handle_key(code(KeyCode::Tab));
        assert_eq!(s.focus, Pane::Memory);
        s.handle_key(code(KeyCode::BackTab));
        assert_eq!(s.focus, Pane::Cache);
        s.handle_key(code(KeyCode::BackTab));
        assert_eq!(s.focus, Pane::Processes);
        s.handle_key(key('1'));
        assert_eq!(s.focus, Pane::Memory);
        s.handle_key(key('2'));
        assert_eq!(s.focus, Pane::Devices);
        s.handle_key(key('3'));
        assert_eq!(s.focus, Pane::Processes);
    }

    #[test]
    fn zoom_toggles_and_esc_unzooms_before_clearing_the_filter() {
        let mut s = state();
        s.filter = "fio".into();
        s.handle_key(key('z'));
        assert!(s.zoomed);
        s.handle_key(code(KeyCode::Esc));
        assert!(!s.zoomed);
        assert_eq!(s.filter, "fio");
        s.handle_key(key('z'));
        s.handle_key(key('z'));
        assert!(!s.zoomed);
    }

    #[test]
    fn selection_moves_in_the_focused_table_only() {
        let mut s = state();
        s.focus = Pane::Processes;
        s.handle_key(key('j'));
        s.handle_key(code(KeyCode::Down));
        assert_eq!((s.selected_process, s.selected_device), (2, 0));
        s.handle_key(key('k'));
        s.handle_key(key('k'));
        s.handle_key(key('k'));
        assert_eq!(s.selected_process, 0, "never below the first row");
        s.focus = Pane::Memory;
        assert_eq!(s.handle_key(key('j')), Action::None);
        s.focus = Pane::Devices;
        s.handle_key(code(KeyCode::End));
        assert!(s.selected_device > 1000);
        s.handle_key(code(KeyCode::Home));
        assert_eq!(s.selected_device, 0);
    }

    #[test]
    fn selection_is_clamped_to_the_rows_present() {
        let mut s = state();
        let processes = (1..=3)
            .map(|pid| crate::model::ProcessModel {
                pid,
                comm: "w".into(),
                write_bytes_s: 1.0,
                io_readable: true,
                ..Default::default()
            })
            .collect();
        let m = Model { processes, ..Default::default() };
        s.selected_process = 99;
        s.selected_device = 5;
        s.clamp_selection(&m);
        assert_eq!((s.selected_process, s.selected_device), (2, 0));
    }

    #[test]
    fn sort_keys_act_on_the_cache_pane_when_it_has_the_focus() {
        let mut s = state();
        s.handle_key(key('4'));
        assert_eq!(s.focus, Pane::Cache);
        let first = s.cache_sort;
        s.handle_key(key('s'));
        assert_ne!(s.cache_sort, first);
        assert_eq!(s.sort, ProcSort::Disk, "the process sort is untouched");
        s.handle_key(key('r'));
        assert!(s.cache_sort_reversed && !s.sort_reversed);
        s.handle_key(key('j'));
        s.handle_key(key('j'));
        assert_eq!((s.selected_cache, s.selected_process), (2, 0));
    }

    #[test]
    fn interval_steps_within_bounds() {
        let mut s = state();
        assert_eq!(s.handle_key(key('+')), Action::SetInterval(Duration::from_secs(2)));
        assert_eq!(s.handle_key(key('-')), Action::SetInterval(Duration::from_secs(1)));
        assert_eq!(s.handle_key(key('-')), Action::SetInterval(Duration::from_millis(500)));
        assert_eq!(s.handle_key(key('-')), Action::SetInterval(Duration::from_millis(250)));
        assert_eq!(s.handle_key(key('-')), Action::None, "0.25 s is the floor");
        let mut s = UiState::new(Duration::from_secs(600), true);
        assert_eq!(s.interval, Duration::from_secs(60), "clamped at start");
        assert_eq!(s.handle_key(key('+')), Action::None, "60 s is the ceiling");
        // An odd interval from the command line steps to the neighbouring steps.
        let mut s = UiState::new(Duration::from_millis(1500), true);
        assert_eq!(s.handle_key(key('+')), Action::SetInterval(Duration::from_secs(2)));
        let mut s = UiState::new(Duration::from_millis(1500), true);
        assert_eq!(s.handle_key(key('-')), Action::SetInterval(Duration::from_secs(1)));
    }

    #[test]
    fn help_overlay_swallows_keys_except_close_and_quit() {
        let mut s = state();
        s.handle_key(key('?'));
        assert!(s.help);
        assert_eq!(s.handle_key(key('z')), Action::None);
        assert!(!s.zoomed);
        s.handle_key(code(KeyCode::Esc));
        assert!(!s.help);
        s.handle_key(key('?'));
        s.handle_key(key('?'));
        assert!(!s.help);
        s.handle_key(key('?'));
        assert_eq!(s.handle_key(key('q')), Action::Quit);
    }

    #[test]
    fn toggles_units_pause_partitions_idle_and_all() {
        let mut s = state();
        s.handle_key(key('u'));
        assert_eq!(s.units, Units::Raw);
        s.handle_key(key('u'));
        assert_eq!(s.units, Units::Human);
        s.handle_key(key('p'));
        assert!(s.paused);
        s.handle_key(key('p'));
        assert!(!s.paused);
        s.handle_key(key('P'));
        assert!(s.show_partitions);
        s.handle_key(key('i'));
        assert!(s.show_idle_virtual);
        s.handle_key(key('a'));
        assert!(s.show_all_processes);
    }

    #[test]
    fn baseline_and_recording_keys_ask_the_event_loop() {
        let mut s = state();
        s.message = Some("old news".into());
        assert_eq!(s.handle_key(key('b')), Action::ToggleBaseline);
        assert_eq!(s.message, None, "a key clears the notice");
        assert_eq!(s.handle_key(key('R')), Action::ToggleRecording);
        assert_eq!(s.handle_key(key('r')), Action::Redraw, "lower-case r still reverses the sort");
    }

    #[test]
    fn key_releases_are_ignored() {
        let mut s = state();
        let mut release = key('q');
        release.kind = KeyEventKind::Release;
        assert_eq!(s.handle_key(release), Action::None);
    }
}
