//! Everything the user can change on screen, and the pure key handler that changes it.
//!
//! `handle_key` knows nothing about terminals or models: the event loop feeds it keys and acts on
//! the returned [`Action`], so every key binding is unit-tested without a terminal.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::model::Model;
use crate::ui::format::Units;
use crate::ui::history::History;
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
    PageCache,
}

impl Pane {
    const ORDER: [Pane; 4] = [Pane::Memory, Pane::Devices, Pane::Processes, Pane::PageCache];

    fn index(self) -> usize {
        Pane::ORDER.iter().position(|p| *p == self).unwrap_or(0)
    }

    pub fn next(self) -> Pane {
        Pane::ORDER[(self.index() + 1) % Pane::ORDER.len()]
    }

    pub fn previous(self) -> Pane {
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

/// What fills the screen below the header. Views open on top of one another (the files of the
/// device in the detail view, the probe health over anything); Esc goes back to the one below.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Body {
    /// The memory, devices, process and cache panes (one of them with `z`).
    #[default]
    Panes,
    /// Enter: the selected device's eBPF block-layer detail (src/ui/device_detail.rs).
    DeviceDetail,
    /// `e`: the eBPF probe health (src/ui/probe_health.rs).
    ProbeHealth,
    /// `f`: the files view (src/ui/files.rs).
    Files,
    /// `w`: readahead per device and file (src/ui/readahead.rs).
    Readahead,
    /// `c`: the cgroups (src/ui/cgroups.rs).
    Cgroups,
    /// `y`: the sync calls (src/ui/syncs.rs).
    Syncs,
}

/// What is drawn over the body and owns the keyboard while open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overlay {
    /// `?` / F1: the key help.
    Help,
    /// `/`: the process filter is being typed (on the header's line).
    Filter,
}

#[derive(Clone, Debug)]
pub struct UiState {
    /// The view on screen below the header, and the views under it (Esc goes back to them).
    pub body: Body,
    back: Vec<Body>,
    pub overlay: Option<Overlay>,
    /// The shown model is frozen; sampling goes on so rates are current again on resume.
    pub paused: bool,
    pub units: Units,
    /// False with --no-color / NO_COLOR: no style carries a colour.
    pub color: bool,
    /// The sampling interval asked for (the model's `interval_s` is the one measured).
    pub interval: Duration,
    /// Row filter of the process, cache, files and cgroup tables: substring of comm
    /// (case-insensitive), of the pid, or of a path. Empty = no filter.
    pub filter: crate::ui::line_input::LineInput,
    /// Set with Enter in the cgroup view: the process panes show one cgroup's processes (`C`).
    pub cgroup_filter: Option<crate::ui::cgroups::CgroupFilter>,
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
    /// Each view's own state, kept while it is closed.
    pub views: Views,
}

/// The views' own states (sort, selection, options), each type defined in its view's module.
/// Only a view reads or changes its own; what every view shares is in [`UiState`].
#[derive(Clone, Debug, Default)]
pub struct Views {
    pub panes: crate::ui::panes::PanesView,
    pub devices: crate::ui::devices::DevicesView,
    pub processes: crate::ui::processes::ProcessesView,
    pub page_cache: crate::ui::page_cache::PageCacheView,
    pub files: crate::ui::files::FilesView,
    pub readahead: crate::ui::readahead::ReadaheadView,
    pub cgroups: crate::ui::cgroups::CgroupsView,
    pub syncs: crate::ui::syncs::SyncsView,
}

impl UiState {
    pub fn new(interval: Duration, color: bool) -> UiState {
        UiState {
            body: Body::Panes,
            back: Vec::new(),
            overlay: None,
            paused: false,
            units: Units::Human,
            color,
            interval: clamp_interval(interval),
            filter: Default::default(),
            cgroup_filter: None,
            history: History::default(),
            utc_offset_s: 0,
            baseline: None,
            recording: None,
            message: None,
            replay: false,
            views: Views::default(),
        }
    }

    /// True while `overlay` is open.
    pub fn shows(&self, overlay: Overlay) -> bool {
        self.overlay == Some(overlay)
    }

    /// True while the filter is being typed after `/`.
    pub fn editing_filter(&self) -> bool {
        self.shows(Overlay::Filter)
    }

    /// Opens `body` over the view on screen (a view already open below comes back to the top).
    pub fn open(&mut self, body: Body) {
        if self.body == body {
            return;
        }
        self.back.retain(|b| *b != body);
        self.back.push(self.body);
        self.body = body;
    }

    /// Closes the view on screen: the one below comes back (the panes at the bottom).
    pub fn close(&mut self) {
        self.body = self.back.pop().unwrap_or_default();
    }

    /// A view's key opens it, or closes it where it is open (on screen or under another view).
    pub fn toggle(&mut self, body: Body) {
        if self.body == body {
            self.close();
        } else if self.back.contains(&body) {
            self.back.retain(|b| *b != body);
        } else {
            self.open(body);
        }
    }

    /// True when `body` is on screen or under the view on screen.
    pub fn is_open(&self, body: Body) -> bool {
        self.body == body || self.back.contains(&body)
    }

    /// Applies one key press. Key releases and repeats reported by some terminals are ignored.
    /// An overlay takes the keyboard; then the view on screen has its keys; the rest are global
    /// or the panes' (which keep working under the other views).
    pub fn handle_key(&mut self, key: KeyEvent) -> Action {
        if key.kind == KeyEventKind::Release {
            return Action::None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && matches!(key.code, KeyCode::Char('c') | KeyCode::Char('C')) {
            return Action::Quit;
        }
        self.message = None;
        match self.overlay {
            Some(Overlay::Filter) => return self.edit_filter(key.code),
            // The help hides the views: keys that would change them invisibly are ignored.
            Some(Overlay::Help) => {
                return match key.code {
                    KeyCode::Char('q') => Action::Quit,
                    KeyCode::Char('?') | KeyCode::Esc | KeyCode::F(1) => {
                        self.overlay = None;
                        Action::Redraw
                    }
                    _ => Action::None,
                };
            }
            None => {}
        }
        let view = match self.body {
            Body::Files => crate::ui::files::handle_key(self, key.code),
            Body::Readahead => crate::ui::readahead::handle_key(self, key.code),
            Body::Cgroups => crate::ui::cgroups::handle_key(self, key.code),
            Body::Syncs => crate::ui::syncs::handle_key(self, key.code),
            Body::Panes | Body::DeviceDetail | Body::ProbeHealth => None,
        };
        if let Some(action) = view {
            return action;
        }
        self.global_key(key.code).unwrap_or_else(|| self.session_key(key.code))
    }

    /// Keys that work whatever view is on screen: quit, help, opening and closing views, Esc.
    fn global_key(&mut self, code: KeyCode) -> Option<Action> {
        match code {
            KeyCode::Char('q') => return Some(Action::Quit),
            KeyCode::Char('?') | KeyCode::F(1) => self.overlay = Some(Overlay::Help),
            KeyCode::Char('/') => self.overlay = Some(Overlay::Filter),
            KeyCode::Char('f') => self.toggle_files_view(),
            KeyCode::Char('w') => {
                self.toggle(Body::Readahead);
                self.views.readahead.detail = false;
            }
            KeyCode::Char('c') => self.toggle(Body::Cgroups),
            KeyCode::Char('C') => self.cgroup_filter = None,
            KeyCode::Char('y') => self.toggle(Body::Syncs),
            KeyCode::Char('e') => self.toggle(Body::ProbeHealth),
            KeyCode::Enter if self.body == Body::ProbeHealth => {
                // The selected device's detail instead, or back from it.
                self.close();
                self.toggle_device_detail();
            }
            KeyCode::Enter if matches!(self.body, Body::Panes | Body::DeviceDetail) => {
                self.toggle_device_detail()
            }
            KeyCode::Esc if self.body != Body::Panes => self.close(),
            KeyCode::Esc if self.views.panes.zoomed => self.views.panes.zoomed = false,
            KeyCode::Esc if !self.filter.is_empty() => {
                self.filter.clear();
                self.views.processes.selection.reset();
            }
            KeyCode::Esc => return Some(Action::None),
            _ => return None,
        }
        Some(Action::Redraw)
    }

    /// The live session's keys (pause, interval, units, baseline, recording); the rest go to the
    /// panes (src/ui/panes.rs), which keep their keys under the other views.
    fn session_key(&mut self, code: KeyCode) -> Action {
        match code {
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
            code => crate::ui::panes::handle_key(self, code),
        }
    }

    /// While typing after `/`: the filter applies as it is typed; Enter keeps it, Esc clears it.
    fn edit_filter(&mut self, code: KeyCode) -> Action {
        use crate::ui::line_input::LineEdit;
        match self.filter.handle_key(code) {
            LineEdit::Changed => {}
            LineEdit::Kept | LineEdit::Cleared => self.overlay = None,
            LineEdit::Ignored => return Action::None,
        }
        self.views.processes.selection.reset();
        self.views.page_cache.selection.reset();
        self.views.files.selection.reset();
        Action::Redraw
    }

    /// Enter: the selected device's detail, whichever pane had the focus; or back from it.
    fn toggle_device_detail(&mut self) {
        if self.body == Body::DeviceDetail {
            self.close();
        } else {
            self.open(Body::DeviceDetail);
            self.views.panes.focus = Pane::Devices;
        }
    }

    /// Opens the files view (scoped to the device in the detail view, or to the selected process
    /// when the process pane has the focus) or closes it.
    fn toggle_files_view(&mut self) {
        use crate::ui::files::FileScope;
        self.views.files.selection.reset();
        if !self.is_open(Body::Files) {
            self.views.files.scope = if self.is_open(Body::DeviceDetail) {
                FileScope::SelectedDevice
            } else if self.views.panes.focus == Pane::Processes {
                FileScope::SelectedProcess
            } else {
                FileScope::All
            };
        }
        self.toggle(Body::Files);
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

    /// Before each draw: every table's selection follows its row into the rows `model` has now
    /// (rows come, go and re-sort every sample), by the row's identity.
    pub fn clamp_selection(&mut self, model: &Model) {
        let devices: Vec<String> =
            rows::visible_devices(model, self).iter().map(|d| d.name.clone()).collect();
        self.views.devices.selection.follow(devices);
        let processes = crate::ui::processes::row_keys(model, self);
        self.views.processes.selection.follow(processes);
        let cache = crate::ui::page_cache::row_keys(model, self);
        self.views.page_cache.selection.follow(cache);
        if self.is_open(Body::Files) {
            let files = crate::ui::files::row_keys(model, self);
            self.views.files.selection.follow(files);
        }
        if self.is_open(Body::Readahead) {
            let rows = crate::ui::readahead::row_keys(model);
            self.views.readahead.selection.follow(rows);
        }
        if self.is_open(Body::Cgroups) {
            self.views.cgroups.rows = crate::ui::cgroups::rows_for_keys(model, self);
            let ids: Vec<String> = self.views.cgroups.rows.iter().map(|(id, _)| id.to_string()).collect();
            self.views.cgroups.selection.follow(ids);
        }
        if self.is_open(Body::Syncs) {
            let rows = crate::ui::syncs::row_keys(model);
            self.views.syncs.selection.follow(rows);
        }
    }
}

pub(crate) fn toggle(flag: &mut bool) -> Action {
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
        // Plain 'c' opens the cgroup view.
        assert_eq!(s.handle_key(key('c')), Action::Redraw);
        assert!(s.body == Body::Cgroups);
    }

    #[test]
    fn sort_cycles_through_every_column_and_back() {
        let mut s = state();
        let mut seen = vec![s.views.processes.sort];
        for _ in 0..8 {
            assert_eq!(s.handle_key(key('s')), Action::Redraw);
            seen.push(s.views.processes.sort);
        }
        assert_eq!(seen, ProcSort::ORDER.to_vec());
        s.handle_key(key('s'));
        assert_eq!(s.views.processes.sort, ProcSort::Disk);
    }

    #[test]
    fn reverse_flips_direction_and_a_new_column_resets_it() {
        let mut s = state();
        assert!(s.views.processes.descending());
        s.handle_key(key('r'));
        assert!(!s.views.processes.descending());
        s.handle_key(key('s'));
        assert_eq!(s.views.processes.sort, ProcSort::Read);
        assert!(s.views.processes.descending());
        s.views.processes.sort = ProcSort::Pid;
        assert!(!s.views.processes.descending(), "pid sorts ascending by default");
    }

    #[test]
    fn filter_editing_types_backspaces_keeps_and_clears() {
        let mut s = state();
        s.views.processes.selection.select_index(4);
        s.handle_key(key('/'));
        assert!(s.editing_filter());
        // While typing, bound keys are text: 'q' must not quit, 's' must not sort.
        for c in "fiqs".chars() {
            assert_eq!(s.handle_key(key(c)), Action::Redraw);
        }
        assert_eq!(s.filter, "fiqs");
        assert_eq!(s.views.processes.sort, ProcSort::Disk);
        s.handle_key(code(KeyCode::Backspace));
        s.handle_key(code(KeyCode::Backspace));
        s.handle_key(key('o'));
        assert_eq!(s.filter, "fio");
        assert_eq!(s.views.processes.selection.index(), 0);
        s.handle_key(code(KeyCode::Enter));
        assert!(!s.editing_filter());
        assert_eq!(s.filter, "fio");
        // Esc in normal mode clears a kept filter.
        assert_eq!(s.handle_key(code(KeyCode::Esc)), Action::Redraw);
        assert_eq!(s.filter, "");
        assert_eq!(s.handle_key(code(KeyCode::Esc)), Action::None);
        // Esc while typing clears too.
        s.handle_key(key('/'));
        s.handle_key(key('x'));
        s.handle_key(code(KeyCode::Esc));
        assert!(!s.editing_filter());
        assert_eq!(s.filter, "");
        // Ctrl-C quits even while typing.
        s.handle_key(key('/'));
        assert_eq!(s.handle_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)), Action::Quit);
    }

    #[test]
    fn focus_by_tab_backtab_and_digits() {
        let mut s = state();
        assert_eq!(s.views.panes.focus, Pane::Devices);
        s.handle_key(code(KeyCode::Tab));
        assert_eq!(s.views.panes.focus, Pane::Processes);
        s.handle_key(code(KeyCode::Tab));
        assert_eq!(s.views.panes.focus, Pane::PageCache);
        s.handle_key(code(KeyCode::Tab));
        assert_eq!(s.views.panes.focus, Pane::Memory);
        s.handle_key(code(KeyCode::BackTab));
        assert_eq!(s.views.panes.focus, Pane::PageCache);
        s.handle_key(code(KeyCode::BackTab));
        assert_eq!(s.views.panes.focus, Pane::Processes);
        s.handle_key(key('1'));
        assert_eq!(s.views.panes.focus, Pane::Memory);
        s.handle_key(key('2'));
        assert_eq!(s.views.panes.focus, Pane::Devices);
        s.handle_key(key('3'));
        assert_eq!(s.views.panes.focus, Pane::Processes);
    }

    #[test]
    fn zoom_toggles_and_esc_unzooms_before_clearing_the_filter() {
        let mut s = state();
        s.filter = "fio".into();
        s.handle_key(key('z'));
        assert!(s.views.panes.zoomed);
        s.handle_key(code(KeyCode::Esc));
        assert!(!s.views.panes.zoomed);
        assert_eq!(s.filter, "fio");
        s.handle_key(key('z'));
        s.handle_key(key('z'));
        assert!(!s.views.panes.zoomed);
    }

    #[test]
    fn selection_moves_in_the_focused_table_only() {
        let mut s = state();
        s.views.panes.focus = Pane::Processes;
        s.handle_key(key('j'));
        s.handle_key(code(KeyCode::Down));
        assert_eq!((s.views.processes.selection.index(), s.views.devices.selection.index()), (2, 0));
        s.handle_key(key('k'));
        s.handle_key(key('k'));
        s.handle_key(key('k'));
        assert_eq!(s.views.processes.selection.index(), 0, "never below the first row");
        s.views.panes.focus = Pane::Memory;
        assert_eq!(s.handle_key(key('j')), Action::None);
        s.views.panes.focus = Pane::Devices;
        s.handle_key(code(KeyCode::End));
        assert!(s.views.devices.selection.index() > 1000);
        s.handle_key(code(KeyCode::Home));
        assert_eq!(s.views.devices.selection.index(), 0);
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
        s.views.processes.selection.select_index(99);
        s.views.devices.selection.select_index(5);
        s.clamp_selection(&m);
        assert_eq!((s.views.processes.selection.index(), s.views.devices.selection.index()), (2, 0));
    }

    #[test]
    fn the_selected_process_stays_selected_when_the_rows_re_sort() {
        let model = |rates: [(u32, f64); 3]| Model {
            processes: rates
                .iter()
                .map(|&(pid, w)| crate::model::ProcessModel {
                    pid,
                    comm: format!("w{pid}").into(),
                    write_bytes_s: w,
                    io_readable: true,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let selected_pid =
            |s: &UiState, m: &Model| rows::visible_processes(m, s)[s.views.processes.selection.index()].pid;
        let mut s = state();
        s.handle_key(key('3'));
        let first = model([(1, 300.0), (2, 200.0), (3, 100.0)]);
        s.clamp_selection(&first);
        s.handle_key(key('j'));
        s.clamp_selection(&first);
        assert_eq!(selected_pid(&s, &first), 2);
        // Pid 2 writes most in the next interval: it sorts first, and stays selected.
        let second = model([(1, 100.0), (2, 900.0), (3, 200.0)]);
        s.clamp_selection(&second);
        assert_eq!((s.views.processes.selection.index(), selected_pid(&s, &second)), (0, 2));
        // A new sort column re-sorts the rows on screen: the selection goes with the process.
        s.handle_key(key('s'));
        s.handle_key(key('r'));
        s.views.processes.sort = ProcSort::Pid;
        s.clamp_selection(&second);
        assert_eq!(selected_pid(&s, &second), 2);
        // Gone: the selection stays at its place, on the row now there.
        let third = model([(1, 100.0), (4, 900.0), (3, 200.0)]);
        s.clamp_selection(&third);
        assert_eq!(selected_pid(&s, &third), 3);
    }

    #[test]
    fn views_open_over_one_another_and_esc_goes_back() {
        let mut s = state();
        s.handle_key(code(KeyCode::Enter));
        assert_eq!((s.body, s.views.panes.focus), (Body::DeviceDetail, Pane::Devices));
        s.handle_key(key('f'));
        assert_eq!(s.body, Body::Files);
        assert_eq!(s.views.files.scope, crate::ui::files::FileScope::SelectedDevice);
        s.handle_key(key('e'));
        assert_eq!(s.body, Body::ProbeHealth);
        s.handle_key(code(KeyCode::Esc));
        assert_eq!(s.body, Body::Files);
        s.handle_key(code(KeyCode::Esc));
        assert_eq!(s.body, Body::DeviceDetail);
        // Enter in the probe health view: the device detail instead, and back.
        s.handle_key(key('e'));
        s.handle_key(code(KeyCode::Enter));
        assert_eq!(s.body, Body::Panes);
        s.handle_key(key('e'));
        s.handle_key(code(KeyCode::Enter));
        assert_eq!(s.body, Body::DeviceDetail);
        // A view's key closes it where it is, on screen or under another.
        s.handle_key(key('y'));
        s.handle_key(key('w'));
        assert_eq!(s.body, Body::Readahead);
        s.handle_key(key('y'));
        assert_eq!(s.body, Body::Readahead);
        s.handle_key(key('w'));
        assert_eq!(s.body, Body::DeviceDetail);
        s.handle_key(code(KeyCode::Esc));
        assert_eq!(s.body, Body::Panes);
        assert_eq!(s.handle_key(code(KeyCode::Esc)), Action::None);
    }

    #[test]
    fn sort_keys_act_on_the_cache_pane_when_it_has_the_focus() {
        let mut s = state();
        s.handle_key(key('4'));
        assert_eq!(s.views.panes.focus, Pane::PageCache);
        let first = s.views.page_cache.sort.column;
        s.handle_key(key('s'));
        assert_ne!(s.views.page_cache.sort.column, first);
        assert_eq!(s.views.processes.sort, ProcSort::Disk, "the process sort is untouched");
        s.handle_key(key('r'));
        assert!(s.views.page_cache.sort.reversed && !s.views.processes.reversed);
        s.handle_key(key('j'));
        s.handle_key(key('j'));
        assert_eq!((s.views.page_cache.selection.index(), s.views.processes.selection.index()), (2, 0));
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
        assert!(s.shows(Overlay::Help));
        assert_eq!(s.handle_key(key('z')), Action::None);
        assert!(!s.views.panes.zoomed);
        s.handle_key(code(KeyCode::Esc));
        assert!(!s.shows(Overlay::Help));
        s.handle_key(key('?'));
        s.handle_key(key('?'));
        assert!(!s.shows(Overlay::Help));
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
        assert!(s.views.devices.show_partitions);
        s.handle_key(key('i'));
        assert!(s.views.devices.show_idle_virtual);
        s.handle_key(key('a'));
        assert!(s.views.processes.show_all);
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
