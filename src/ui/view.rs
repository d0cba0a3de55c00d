//! What every view is: the [`View`] trait, the small [`Context`] a view renders with beside its own
//! state, and the [`ViewAction`] a key returns for the owner ([`crate::ui::state::UiState`]) to
//! apply. A view sees its own state and the context, never the app's state nor another view's.

use crossterm::event::KeyCode;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders};
use ratatui::Frame;

use crate::model::{DeviceModel, Model};
use crate::ui::format::{self, Units};
use crate::ui::history::History;
use crate::ui::theme::Theme;

/// A view: a pane of the stack (memory, devices, processes, page cache) or a view that fills the
/// body (device detail, probe health, files, readahead, cgroups, sync calls).
pub trait View {
    /// The title: on the pane's rule for a pane of the stack, the first line of a full view.
    fn title(&self, ctx: &Context) -> String;

    /// Draws the view in `area`: a pane draws below the rule the stack drew with its title, a full
    /// view its own title too.
    fn render(&self, frame: &mut Frame, area: Rect, ctx: &Context);

    /// A key while the view has it: what the owner must do, or None when the key is not the view's.
    fn handle_key(&mut self, _code: KeyCode) -> Option<ViewAction> {
        None
    }

    /// The keys the view offers (key, what it does), for the footer and the help.
    fn keys(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// Before each draw: the selection follows its row into the rows `ctx.model` has now (rows
    /// come, go and re-sort every sample), by the row's identity.
    fn follow(&mut self, _ctx: &Context) {}
}

/// What a view's key asks of the owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ViewAction {
    /// The view's own state changed: draw again.
    Redraw,
    /// Close the view (the one under it comes back).
    Close,
    /// Limit the process panes to one cgroup (Enter in the cgroup view) and close the view.
    LimitToCgroup(CgroupFilter),
}

/// The panes' limit to one cgroup (Enter in the cgroup view): its id, and its name for the titles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupFilter {
    pub id: u64,
    pub name: String,
}

/// What every view may read besides its own state: the model, the look, the filters, whether it
/// has the focus, and what the panes have selected (the detail and files views follow it).
#[derive(Clone, Copy)]
pub struct Context<'a> {
    pub model: &'a Model,
    /// The models before this one (the memory pane's sparklines).
    pub history: &'a History,
    pub theme: Theme,
    pub units: Units,
    /// The `/` filter (empty: none), and whether it is being typed.
    pub filter: &'a str,
    pub editing_filter: bool,
    /// The process panes' limit to one cgroup (`C` clears it).
    pub cgroup_filter: Option<&'a CgroupFilter>,
    /// The view has the focus: its selected row is highlighted.
    pub focused: bool,
    /// The pane fills the body (`z`).
    pub zoomed: bool,
    /// The device selected in the devices pane (None when no device is listed).
    pub device: Option<&'a DeviceModel>,
    /// The process selected in the process pane, in the table it shows.
    pub pid: Option<u32>,
    /// The whole terminal.
    pub screen: Rect,
    /// The live mode's word on the kernel's BPF run statistics (UiState::run_stats).
    pub run_stats: Option<&'a str>,
}

impl<'a> Context<'a> {
    /// A context for `model`: no colour, human units, no filter, no focus, nothing selected.
    pub fn new(model: &'a Model, history: &'a History) -> Context<'a> {
        Context {
            model,
            history,
            theme: Theme { color: false },
            units: Units::Human,
            filter: "",
            editing_filter: false,
            cgroup_filter: None,
            focused: false,
            zoomed: false,
            device: None,
            pid: None,
            screen: Rect::default(),
            run_stats: None,
        }
    }

    /// The same context for a view with (or without) the focus.
    pub fn with_focus(self, focused: bool) -> Context<'a> {
        Context { focused, ..self }
    }

    /// Whether a process row passes the cgroup limit: by the row's own cgroup id where it has one
    /// (eBPF rows), else by the cgroup's processes in the interval (/proc rows).
    pub fn admits(&self, pid: u32, cgroup_id: Option<u64>) -> bool {
        let Some(f) = self.cgroup_filter else { return true };
        match cgroup_id {
            Some(id) => id == f.id,
            None => self.model.cgroups.iter().find(|c| c.id == f.id).is_some_and(|c| c.pids.contains(&pid)),
        }
    }

    /// Appends "cgroup NAME (C clears)" to a process pane's title while the panes are limited.
    pub fn cgroup_note(&self, title: &mut String) {
        if let Some(f) = self.cgroup_filter {
            title.push_str(&format!("  cgroup {} (C clears)", format::text(&f.name)));
        }
    }
}

/// A top rule carrying a pane's title: its focus key, name and state. The focused pane is marked
/// with ▶ as well as by style, so focus shows without colour.
pub fn pane_block(key: char, title: &str, focused: bool, theme: Theme) -> Block<'static> {
    let marker = if focused { '▶' } else { ' ' };
    // Titles name devices, processes and cgroups.
    let title = &*crate::untrusted::escape(title);
    let name_end = title.find("  ").unwrap_or(title.len());
    let (name, rest) = title.split_at(name_end);
    Block::new().borders(Borders::TOP).border_style(theme.dim()).title(Line::from(vec![
        Span::styled(format!("{marker}{key} {name} "), theme.title(focused)),
        Span::styled(
            if rest.is_empty() { String::new() } else { format!(" {} ", rest.trim_start()) },
            theme.dim(),
        ),
    ]))
}

/// Draws a pane's rule with `title` over `area`; the area below it.
pub fn draw_block(frame: &mut Frame, area: Rect, block: Block) -> Rect {
    let inner = block.inner(area);
    frame.render_widget(block, area);
    inner
}
