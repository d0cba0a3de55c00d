//! Everything the user can change on screen, and the pure key handler that changes it: the owner
//! of every view's state, which routes a key to the view it is for and applies the
//! [`ViewAction`] the view returns.
//!
//! `handle_key` knows nothing about terminals or models: the event loop feeds it keys and acts on
//! the returned [`Action`], so every key binding is unit-tested without a terminal.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::model::Model;
use crate::ui::cgroups::CgroupsView;
use crate::ui::devices::DevicesView;
use crate::ui::files::{FileScope, FilesView};
use crate::ui::format::Units;
pub use crate::ui::header::RecordingIndicator;
use crate::ui::header::Status;
use crate::ui::history::History;
use crate::ui::io_processes::IoProcessesView;
use crate::ui::memory::MemoryView;
use crate::ui::page_cache::PageCacheView;
use crate::ui::probe_health::ProbeHealthView;
use crate::ui::processes::ProcessesView;
use crate::ui::readahead::ReadaheadView;
use crate::ui::stack::{Pane, ProcessTable, StackKey, StackView};
use crate::ui::syncs::SyncsView;
use crate::ui::theme::Theme;
use crate::ui::view::{CgroupFilter, Context, View, ViewAction};
use crate::ui::waits::WaitsView;

/// The sampling interval steps `+` and `-` move through (seconds): 0.25 s to 60 s.
pub const INTERVAL_STEPS_MS: [u64; 11] =
    [250, 500, 1000, 2000, 3000, 5000, 10_000, 15_000, 20_000, 30_000, 60_000];

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
    /// `m`: mark this moment of the recording (the note prompt opens if one runs).
    StartMark,
    /// Enter at the mark's note prompt: write the mark with [`UiState::mark_note`].
    AddMark,
}

/// What fills the screen below the header. Views open on top of one another (the files of the
/// device in the detail view, the probe health over anything); Esc goes back to the one below.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Body {
    /// The stack: the memory, devices, process and cache panes (one of them with `z`).
    #[default]
    Stack,
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
    /// `W`: time blocked on I/O per process and thread, by cause (src/ui/waits.rs).
    Waits,
}

/// What is drawn over the body and owns the keyboard while open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overlay {
    /// `?` / F1: the key help.
    Help,
    /// `/`: the process filter is being typed (on the header's line).
    Filter,
    /// After `m` while recording: the mark's note is being typed (shown as the header's notice).
    MarkNote,
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
    /// The note of the mark being made (`m`).
    pub mark_note: crate::ui::line_input::LineInput,
    /// Set with Enter in the cgroup view: the process panes show one cgroup's processes (`C`).
    pub cgroup_filter: Option<CgroupFilter>,
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
    /// The live mode's word on the kernel's BPF run statistics, which it turns on while the
    /// probe-health view is open (None: this mode does not, or the view is closed).
    pub run_stats: Option<String>,
    /// Each view's own state, kept while it is closed.
    pub views: Views,
}

/// The views' own states (sort, selection, options), each type defined in its view's module.
/// A view reads and changes only its own; what every view shares reaches it in a [`Context`].
#[derive(Clone, Debug, Default)]
pub struct Views {
    pub stack: StackView,
    pub memory: MemoryView,
    pub devices: DevicesView,
    /// The process pane's two tables (`d` switches, [`StackView::process_table`]).
    pub processes: ProcessesView,
    pub io_processes: IoProcessesView,
    pub page_cache: PageCacheView,
    pub files: FilesView,
    pub readahead: ReadaheadView,
    pub cgroups: CgroupsView,
    pub syncs: SyncsView,
    pub waits: WaitsView,
    pub probe_health: ProbeHealthView,
    pub help: crate::ui::help::HelpView,
}

impl UiState {
    pub fn new(interval: Duration, color: bool) -> UiState {
        UiState {
            body: Body::Stack,
            back: Vec::new(),
            overlay: None,
            paused: false,
            units: Units::Human,
            color,
            interval: clamp_interval(interval),
            filter: Default::default(),
            mark_note: Default::default(),
            cgroup_filter: None,
            history: History::default(),
            utc_offset_s: 0,
            baseline: None,
            recording: None,
            message: None,
            replay: false,
            run_stats: None,
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
            Some(Overlay::MarkNote) => return self.edit_mark_note(key.code),
            // The help hides the views: keys that would change them invisibly are ignored.
            Some(Overlay::Help) => {
                return match key.code {
                    KeyCode::Char('q') => Action::Quit,
                    KeyCode::Char('?') | KeyCode::Esc | KeyCode::F(1) => {
                        self.overlay = None;
                        self.views.help.reset();
                        Action::Redraw
                    }
                    code if self.views.help.handle_key(code) => Action::Redraw,
                    _ => Action::None,
                };
            }
            None => {}
        }
        let view: Option<&mut dyn View> = match self.body {
            Body::Files => Some(&mut self.views.files),
            Body::Readahead => Some(&mut self.views.readahead),
            Body::Cgroups => Some(&mut self.views.cgroups),
            Body::Syncs => Some(&mut self.views.syncs),
            Body::Waits => Some(&mut self.views.waits),
            Body::ProbeHealth => Some(&mut self.views.probe_health),
            Body::Stack | Body::DeviceDetail => None,
        };
        if let Some(done) = view.and_then(|v| v.handle_key(key.code)) {
            return self.apply(done);
        }
        self.global_key(key.code).unwrap_or_else(|| self.session_key(key.code))
    }

    /// Does what a view's key asked for.
    fn apply(&mut self, done: ViewAction) -> Action {
        match done {
            ViewAction::Redraw => {}
            ViewAction::Close => self.close(),
            ViewAction::LimitToCgroup(limit) => {
                self.cgroup_filter = Some(limit);
                self.close();
                self.reset_process_selections();
                self.views.page_cache.selection.reset();
            }
        }
        Action::Redraw
    }

    /// Both process tables back to their first row.
    fn reset_process_selections(&mut self) {
        self.views.processes.selection.reset();
        self.views.io_processes.selection.reset();
    }

    /// The stack's keys (they keep working under the other views): its own, or its panes' through
    /// the pane's view.
    fn stack_key(&mut self, code: KeyCode) -> Action {
        let pane = match self.views.stack.handle_key(code) {
            StackKey::Redraw => return Action::Redraw,
            StackKey::None => return Action::None,
            StackKey::SwitchedProcessTable => {
                self.reset_process_selections();
                self.views.processes.sort.reversed = false;
                self.views.io_processes.sort.reversed = false;
                return Action::Redraw;
            }
            StackKey::Pane(pane) => pane,
        };
        let done = match pane {
            Pane::Memory => self.views.memory.handle_key(code),
            Pane::Devices => self.views.devices.handle_key(code),
            // The table on screen first; `a` is the /proc table's whichever is shown.
            Pane::Processes => match self.views.stack.process_table {
                ProcessTable::Submitters => self.views.io_processes.handle_key(code),
                ProcessTable::Proc => None,
            }
            .or_else(|| self.views.processes.handle_key(code)),
            Pane::PageCache => self.views.page_cache.handle_key(code),
        };
        done.map_or(Action::None, |done| self.apply(done))
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
            KeyCode::Char('W') => self.toggle(Body::Waits),
            KeyCode::Char('e') => self.toggle(Body::ProbeHealth),
            KeyCode::Enter if self.body == Body::ProbeHealth => {
                // The selected device's detail instead, or back from it.
                self.close();
                self.toggle_device_detail();
            }
            KeyCode::Enter if matches!(self.body, Body::Stack | Body::DeviceDetail) => {
                self.toggle_device_detail()
            }
            KeyCode::Esc if self.body != Body::Stack => self.close(),
            KeyCode::Esc if self.views.stack.zoomed => self.views.stack.zoomed = false,
            KeyCode::Esc if !self.filter.is_empty() => {
                self.filter.clear();
                self.reset_process_selections();
            }
            KeyCode::Esc => return Some(Action::None),
            _ => return None,
        }
        Some(Action::Redraw)
    }

    /// The live session's keys (pause, interval, units, baseline, recording); the rest go to the
    /// stack (src/ui/stack.rs), whose keys keep working under the other views.
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
            KeyCode::Char('m') => Action::StartMark,
            KeyCode::Char('+') => self.step_interval(true),
            KeyCode::Char('-') => self.step_interval(false),
            code => self.stack_key(code),
        }
    }

    /// Opens the mark's note prompt.
    pub fn open_mark_note(&mut self) {
        self.mark_note.clear();
        self.overlay = Some(Overlay::MarkNote);
        self.show_mark_note();
    }

    fn show_mark_note(&mut self) {
        let note = crate::untrusted::escape(&self.mark_note.with_cursor(true)).into_owned();
        self.message = Some(format!("mark note (Enter marks, Esc cancels): {note}"));
    }

    /// While typing the mark's note: Enter marks, Esc cancels.
    fn edit_mark_note(&mut self, code: KeyCode) -> Action {
        use crate::ui::line_input::LineEdit;
        match self.mark_note.handle_key(code) {
            LineEdit::Changed => self.show_mark_note(),
            LineEdit::Kept => {
                self.overlay = None;
                return Action::AddMark;
            }
            LineEdit::Cleared => {
                self.overlay = None;
                self.message = Some("no mark made".into());
            }
            LineEdit::Ignored => {
                self.show_mark_note();
                return Action::None;
            }
        }
        Action::Redraw
    }

    /// While typing after `/`: the filter applies as it is typed; Enter keeps it, Esc clears it.
    fn edit_filter(&mut self, code: KeyCode) -> Action {
        use crate::ui::line_input::LineEdit;
        match self.filter.handle_key(code) {
            LineEdit::Changed => {}
            LineEdit::Kept | LineEdit::Cleared => self.overlay = None,
            LineEdit::Ignored => return Action::None,
        }
        self.reset_process_selections();
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
            self.views.stack.focus = Pane::Devices;
        }
    }

    /// Opens the files view (scoped to the device in the detail view, or to the selected process
    /// when the process pane has the focus) or closes it.
    fn toggle_files_view(&mut self) {
        self.views.files.selection.reset();
        if !self.is_open(Body::Files) {
            self.views.files.scope = if self.is_open(Body::DeviceDetail) {
                FileScope::SelectedDevice
            } else if self.views.stack.focus == Pane::Processes {
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

    /// What every view may read, for `model`: no view has the focus yet ([`Context::with_focus`]).
    pub fn context<'a>(&'a self, model: &'a Model) -> Context<'a> {
        self.context_with(model, &self.views)
    }

    /// The context with the selections of `views` (those of `self` while they are taken out).
    fn context_with<'a>(&'a self, model: &'a Model, views: &Views) -> Context<'a> {
        let mut ctx = Context {
            theme: Theme { color: self.color },
            units: self.units,
            filter: &self.filter,
            editing_filter: self.editing_filter(),
            cgroup_filter: self.cgroup_filter.as_ref(),
            zoomed: views.stack.zoomed,
            run_stats: self.run_stats.as_deref(),
            ..Context::new(model, &self.history)
        };
        ctx.device = views.devices.selected(model);
        ctx.pid = match views.stack.process_table {
            ProcessTable::Proc => views.processes.selected_pid(&ctx),
            ProcessTable::Submitters => views.io_processes.selected_pid(&ctx),
        };
        ctx
    }

    /// The view of a stack's pane (the process pane's: the table it shows).
    pub fn pane_view(&self, pane: Pane) -> &dyn View {
        match pane {
            Pane::Memory => &self.views.memory,
            Pane::Devices => &self.views.devices,
            Pane::Processes if self.views.stack.process_table == ProcessTable::Submitters => {
                &self.views.io_processes
            }
            Pane::Processes => &self.views.processes,
            Pane::PageCache => &self.views.page_cache,
        }
    }

    /// What the header shows of the session.
    pub fn status(&self) -> Status<'_> {
        Status {
            theme: Theme { color: self.color },
            interval: self.interval,
            utc_offset_s: self.utc_offset_s,
            filter: &self.filter,
            editing_filter: self.editing_filter(),
            paused: self.paused,
            recording: self.recording.as_ref(),
            message: self.message.as_deref(),
        }
    }

    /// Before each draw: every table's selection follows its row into the rows `model` has now
    /// (rows come, go and re-sort every sample), by the row's identity.
    pub fn clamp_selection(&mut self, model: &Model) {
        // Taken out to be changed while the context reads the rest; followed in the order their
        // rows depend on each other (the files view is scoped to the device's or process's).
        let mut views = std::mem::take(&mut self.views);
        views.devices.follow(&self.context_with(model, &views));
        let ctx = self.context_with(model, &views);
        match views.stack.process_table {
            ProcessTable::Proc => views.processes.follow(&ctx),
            ProcessTable::Submitters => views.io_processes.follow(&ctx),
        }
        views.page_cache.follow(&ctx);
        let ctx = self.context_with(model, &views);
        if self.is_open(Body::Files) {
            views.files.follow(&ctx);
        }
        if self.is_open(Body::Readahead) {
            views.readahead.follow(&ctx);
        }
        if self.is_open(Body::Cgroups) {
            views.cgroups.follow(&ctx);
        }
        if self.is_open(Body::Syncs) {
            views.syncs.follow(&ctx);
        }
        if self.is_open(Body::Waits) {
            views.waits.follow(&ctx);
        }
        if self.is_open(Body::ProbeHealth) {
            views.probe_health.follow(&ctx);
        }
        self.views = views;
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
    use crate::ui::processes::ProcSort;

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
        s.handle_key(key('3'));
        let mut seen = vec![s.views.processes.sort.column];
        for _ in 1..ProcSort::ORDER.len() {
            assert_eq!(s.handle_key(key('s')), Action::Redraw);
            seen.push(s.views.processes.sort.column);
        }
        assert_eq!(seen, ProcSort::ORDER.to_vec());
        s.handle_key(key('s'));
        assert_eq!(s.views.processes.sort.column, ProcSort::Disk);
    }

    #[test]
    fn reverse_flips_direction_and_a_new_column_resets_it() {
        let mut s = state();
        s.handle_key(key('3'));
        assert!(s.views.processes.descending());
        s.handle_key(key('r'));
        assert!(!s.views.processes.descending());
        s.handle_key(key('s'));
        assert_eq!(s.views.processes.sort.column, ProcSort::Read);
        assert!(s.views.processes.descending());
        s.views.processes.sort.column = ProcSort::Pid;
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
        assert_eq!(s.views.processes.sort.column, ProcSort::Disk);
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
        assert_eq!(s.views.stack.focus, Pane::Devices);
        s.handle_key(code(KeyCode::Tab));
        assert_eq!(s.views.stack.focus, Pane::Processes);
        s.handle_key(code(KeyCode::Tab));
        assert_eq!(s.views.stack.focus, Pane::PageCache);
        s.handle_key(code(KeyCode::Tab));
        assert_eq!(s.views.stack.focus, Pane::Memory);
        s.handle_key(code(KeyCode::BackTab));
        assert_eq!(s.views.stack.focus, Pane::PageCache);
        s.handle_key(code(KeyCode::BackTab));
        assert_eq!(s.views.stack.focus, Pane::Processes);
        s.handle_key(key('1'));
        assert_eq!(s.views.stack.focus, Pane::Memory);
        s.handle_key(key('2'));
        assert_eq!(s.views.stack.focus, Pane::Devices);
        s.handle_key(key('3'));
        assert_eq!(s.views.stack.focus, Pane::Processes);
    }

    #[test]
    fn zoom_toggles_and_esc_unzooms_before_clearing_the_filter() {
        let mut s = state();
        s.filter = "fio".into();
        s.handle_key(key('z'));
        assert!(s.views.stack.zoomed);
        s.handle_key(code(KeyCode::Esc));
        assert!(!s.views.stack.zoomed);
        assert_eq!(s.filter, "fio");
        s.handle_key(key('z'));
        s.handle_key(key('z'));
        assert!(!s.views.stack.zoomed);
    }

    #[test]
    fn selection_moves_in_the_focused_table_only() {
        let mut s = state();
        s.views.stack.focus = Pane::Processes;
        s.handle_key(key('j'));
        s.handle_key(code(KeyCode::Down));
        assert_eq!((s.views.processes.selection.index(), s.views.devices.selection.index()), (2, 0));
        s.handle_key(key('k'));
        s.handle_key(key('k'));
        s.handle_key(key('k'));
        assert_eq!(s.views.processes.selection.index(), 0, "never below the first row");
        s.views.stack.focus = Pane::Memory;
        assert_eq!(s.handle_key(key('j')), Action::None);
        s.views.stack.focus = Pane::Devices;
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
        let selected_pid = |s: &UiState, m: &Model| {
            s.views.processes.visible(&s.context(m))[s.views.processes.selection.index()].pid
        };
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
        s.views.processes.sort.column = ProcSort::Pid;
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
        assert_eq!((s.body, s.views.stack.focus), (Body::DeviceDetail, Pane::Devices));
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
        assert_eq!(s.body, Body::Stack);
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
        assert_eq!(s.body, Body::Stack);
        assert_eq!(s.handle_key(code(KeyCode::Esc)), Action::None);
    }

    #[test]
    fn sort_keys_act_on_the_cache_pane_when_it_has_the_focus() {
        let mut s = state();
        s.handle_key(key('4'));
        assert_eq!(s.views.stack.focus, Pane::PageCache);
        let first = s.views.page_cache.sort.column;
        s.handle_key(key('s'));
        assert_ne!(s.views.page_cache.sort.column, first);
        assert_eq!(s.views.processes.sort.column, ProcSort::Disk, "the process sort is untouched");
        s.handle_key(key('r'));
        assert!(s.views.page_cache.sort.reversed && !s.views.processes.sort.reversed);
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
        assert!(!s.views.stack.zoomed);
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
        // m: the event loop opens the note prompt (when recording); Enter marks, Esc does not.
        assert_eq!(s.handle_key(key('m')), Action::StartMark);
        s.open_mark_note();
        for c in "hi\x1b".chars() {
            s.handle_key(key(c));
        }
        assert!(s.message.as_deref().is_some_and(|m| m.contains("hi") && !m.contains('\x1b')));
        assert_eq!(s.handle_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)), Action::AddMark);
        assert_eq!(&*s.mark_note, "hi");
        s.open_mark_note();
        s.handle_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
        assert_eq!((s.overlay, s.message.as_deref()), (None, Some("no mark made")));
        assert_eq!(s.handle_key(key('r')), Action::Redraw, "lower-case r still reverses the sort");
    }

    #[test]
    fn key_releases_are_ignored() {
        let mut s = state();
        let mut release = key('q');
        release.kind = KeyEventKind::Release;
        assert_eq!(s.handle_key(release), Action::None);
    }

    #[test]
    fn d_switches_the_process_table_each_with_its_own_sort_from_its_natural_order() {
        let mut s = state();
        s.handle_key(key('3'));
        s.handle_key(key('r'));
        s.handle_key(key('j'));
        assert!(s.views.processes.sort.reversed);
        assert_eq!(s.handle_key(key('d')), Action::Redraw);
        assert_eq!(s.views.stack.process_table, ProcessTable::Submitters);
        assert!(!s.views.processes.sort.reversed && !s.views.io_processes.sort.reversed);
        assert_eq!(s.views.io_processes.selection.index(), 0);
        // s, r and the selection go to the table on screen; a to the /proc table's option.
        s.handle_key(key('s'));
        s.handle_key(key('r'));
        s.handle_key(key('j'));
        assert_eq!(s.views.io_processes.sort.column, crate::ui::io_processes::IoSort::Read);
        assert!(s.views.io_processes.sort.reversed);
        assert_eq!((s.views.io_processes.selection.index(), s.views.processes.selection.index()), (1, 0));
        assert_eq!(s.views.processes.sort.column, ProcSort::Disk);
        s.handle_key(key('a'));
        assert!(s.views.processes.show_all);
        s.handle_key(key('d'));
        assert_eq!(s.views.stack.process_table, ProcessTable::Proc);
        assert!(!s.views.io_processes.sort.reversed, "back to the natural order");
    }

    #[test]
    fn enter_in_the_cgroup_view_limits_the_panes_and_c_clears_it() {
        let cg = |id: u64, path: &str, write: f64, pids: &[u32]| crate::model::cgroups::CgroupModel {
            id,
            path: path.into(),
            name: crate::model::cgroup_names::parse(path),
            pids: pids.to_vec(),
            write_bytes_s: write,
            ..Default::default()
        };
        let m = Model {
            interval_s: 1.0,
            cgroups: vec![
                cg(2, "/system.slice/postgresql.service", 500.0, &[20]),
                cg(3, "/user.slice", 10.0, &[30]),
            ],
            ..Default::default()
        };
        let mut s = state();
        s.views.processes.selection.select_index(2);
        s.handle_key(key('c'));
        s.clamp_selection(&m);
        s.handle_key(key('j'));
        s.clamp_selection(&m);
        assert_eq!(s.handle_key(code(KeyCode::Enter)), Action::Redraw);
        assert_eq!(s.body, Body::Stack, "the cgroup view closed");
        assert_eq!(s.cgroup_filter.as_ref().map(|f| f.id), Some(3));
        assert_eq!(s.views.processes.selection.index(), 0);
        let ctx = s.context(&m);
        assert!(ctx.admits(30, None) && !ctx.admits(20, None));
        s.handle_key(key('C'));
        assert_eq!(s.cgroup_filter, None);
    }

    /// The keys a view offers for the footer, as the footer writes them.
    fn offered(keys: &[(&str, &str)]) -> Vec<KeyCode> {
        keys.iter()
            .flat_map(|(k, _)| k.split_whitespace())
            .flat_map(|token| match token {
                "↑↓" => vec![KeyCode::Up, KeyCode::Down],
                "1-4" => ('1'..='4').map(KeyCode::Char).collect(),
                "Tab" => vec![KeyCode::Tab],
                "Enter" => vec![KeyCode::Enter],
                "Esc" => vec![KeyCode::Esc],
                t if t.chars().count() == 1 => vec![KeyCode::Char(t.chars().next().unwrap())],
                t => panic!("a key the test cannot press: {t:?}"),
            })
            .collect()
    }

    #[test]
    fn every_key_a_view_offers_does_something_while_it_is_on_screen() {
        let m = Model::default();
        let panes = [
            (Pane::Memory, ProcessTable::Proc),
            (Pane::Devices, ProcessTable::Proc),
            (Pane::Processes, ProcessTable::Proc),
            (Pane::Processes, ProcessTable::Submitters),
            (Pane::PageCache, ProcessTable::Proc),
        ];
        for (pane, table) in panes {
            let fresh = || {
                let mut s = state();
                s.views.stack.focus = pane;
                s.views.stack.process_table = table;
                s
            };
            let s = fresh();
            let keys = offered(s.pane_view(pane).keys()).into_iter().chain(offered(s.views.stack.keys()));
            for code in keys {
                let mut s = fresh();
                assert_ne!(s.handle_key(KeyEvent::from(code)), Action::None, "{pane:?} {table:?}: {code:?}");
            }
        }
        let full: [(Body, char, &dyn View); 7] = [
            (Body::ProbeHealth, 'e', &ProbeHealthView::default()),
            (Body::Files, 'f', &FilesView::default()),
            (Body::Readahead, 'w', &ReadaheadView::default()),
            (Body::Cgroups, 'c', &CgroupsView::default()),
            (Body::Syncs, 'y', &SyncsView::default()),
            (Body::Waits, 'W', &WaitsView::default()),
            (Body::DeviceDetail, '\n', &crate::ui::device_detail::DeviceDetailView::default()),
        ];
        for (body, opens, view) in full {
            for code in offered(view.keys()) {
                let mut s = state();
                let open = if opens == '\n' { KeyCode::Enter } else { KeyCode::Char(opens) };
                s.handle_key(KeyEvent::from(open));
                s.clamp_selection(&m);
                assert_eq!(s.body, body);
                assert_ne!(s.handle_key(KeyEvent::from(code)), Action::None, "{body:?}: {code:?}");
            }
        }
    }
}

/// The help lists every key [`UiState::handle_key`] binds, and every key it lists does something.
#[cfg(test)]
mod help_lists_the_keys {
    use super::{Action, UiState};
    use crate::ui::help::KEYS;
    use crate::ui::stack::Pane;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use std::collections::HashSet;
    use std::time::Duration;

    /// How the help writes a key.
    fn name(key: &KeyEvent) -> String {
        if key.modifiers.contains(KeyModifiers::CONTROL) {
            if let KeyCode::Char(c) = key.code {
                return format!("Ctrl-{}", c.to_ascii_uppercase());
            }
        }
        match key.code {
            KeyCode::Char(' ') => "Space".into(),
            KeyCode::Char(c) => c.to_string(),
            KeyCode::Tab => "Tab".into(),
            KeyCode::BackTab => "S-Tab".into(),
            KeyCode::Esc => "Esc".into(),
            KeyCode::Enter => "Enter".into(),
            KeyCode::Up => "↑".into(),
            KeyCode::Down => "↓".into(),
            KeyCode::PageUp => "PgUp".into(),
            KeyCode::PageDown => "PgDn".into(),
            KeyCode::Home => "Home".into(),
            KeyCode::End => "End".into(),
            KeyCode::F(n) => format!("F{n}"),
            other => format!("{other:?}"),
        }
    }

    fn all_keys() -> Vec<KeyEvent> {
        let mut codes: Vec<KeyCode> = (' '..='~').map(KeyCode::Char).collect();
        codes.extend([
            KeyCode::Tab,
            KeyCode::BackTab,
            KeyCode::Esc,
            KeyCode::Enter,
            KeyCode::Backspace,
            KeyCode::Up,
            KeyCode::Down,
            KeyCode::Left,
            KeyCode::Right,
            KeyCode::PageUp,
            KeyCode::PageDown,
            KeyCode::Home,
            KeyCode::End,
            KeyCode::Delete,
            KeyCode::Insert,
        ]);
        codes.extend((1..=12).map(KeyCode::F));
        let mut keys: Vec<KeyEvent> =
            codes.into_iter().map(|c| KeyEvent::new(c, KeyModifiers::NONE)).collect();
        keys.push(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        keys
    }

    /// A state in which every binding has something to act on.
    fn busy_state() -> UiState {
        let mut s = UiState::new(Duration::from_secs(1), true);
        s.views.stack.focus = Pane::Processes;
        s.filter = "fio".into();
        s.views.processes.selection.select_index(3);
        s
    }

    fn documented_tokens() -> HashSet<String> {
        KEYS.iter()
            .flat_map(|(k, what)| k.split_whitespace().chain(what.split_whitespace()))
            .map(|t| t.trim_matches(|c: char| matches!(c, ',' | ';' | '(' | ')')).to_string())
            .collect()
    }

    #[test]
    fn every_bound_key_is_in_the_help() {
        let documented = documented_tokens();
        for key in all_keys() {
            if busy_state().handle_key(key) != Action::None {
                assert!(documented.contains(&name(&key)), "{} is bound but not in the help", name(&key));
            }
        }
    }

    #[test]
    fn every_key_in_the_help_does_something() {
        let by_name: Vec<(String, KeyEvent)> = all_keys().into_iter().map(|k| (name(&k), k)).collect();
        for (keys, _) in KEYS {
            for token in keys.split_whitespace() {
                // Ctrl-Z belongs to the event loops (job control), not to the panes' keys.
                if token == "Ctrl-Z" {
                    let z = KeyEvent::new(
                        crossterm::event::KeyCode::Char('z'),
                        crossterm::event::KeyModifiers::CONTROL,
                    );
                    assert!(crate::ui::terminal::is_suspend_key(&z));
                    continue;
                }
                let key = by_name.iter().find(|(n, _)| n == token).map(|(_, k)| *k);
                let key = key.unwrap_or_else(|| panic!("help names a key {token:?} the test cannot press"));
                assert_ne!(busy_state().handle_key(key), Action::None, "{token} does nothing");
            }
        }
    }
}
