//! The `?` overlay: every key, what the less obvious figures mean, and the full eBPF status (the
//! header only has room for a shortened reason).

use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};
use ratatui::Frame;

use crate::model::Model;
use crate::ui::theme::Theme;
use crate::untrusted::shown;

/// Every key binding, as `UiState::handle_key` implements it (a test checks the two agree).
pub const KEYS: [(&str, &str); 21] = [
    ("q  Ctrl-C", "quit"),
    ("Ctrl-Z", "suspend to the shell (fg resumes)"),
    ("?  F1", "this help (Esc closes it)"),
    ("Tab  S-Tab", "focus the next / previous pane"),
    ("1 2 3 4", "focus memory / devices / processes / page cache"),
    ("↑ ↓  j k", "select a row (also PgUp PgDn, Home g, End G)"),
    ("z", "zoom the focused pane (devices: + queue settings); Esc unzooms"),
    ("s  r", "sort processes / page cache by the next column / reverse"),
    ("/", "filter processes by comm or pid; Enter keeps, Esc clears"),
    ("a  P  i", "show idle processes / partitions / idle loop+ram devices"),
    ("u", "units: human (K M G = KiB MiB GiB) / raw"),
    ("p  Space", "pause the display (sampling goes on)"),
    ("+ -", "sampling interval, 0.25 s … 60 s"),
    ("b", "baseline: panes show deltas against now; b again clears"),
    ("R  m", "record to ./ioscope-HOST-DATE.rec, R again stops / m: mark"),
    ("Enter", "eBPF detail of the selected device; Esc closes"),
    ("e  d", "eBPF probe health / processes by disk I/O submitter (eBPF)"),
    ("f", "files by disk I/O (of the detail's device / selected process)"),
    ("w", "readahead: pages read ahead, used, wasted per file; Enter detail"),
    ("c  C", "cgroups: I/O, cache, PSI; Enter limits panes to one, C clears"),
    ("y", "sync calls (fsync and friends) per process and file, running first"),
];

/// The keys of `ioscope replay` (crate::replay::player); shown instead of the live-only ones.
pub const REPLAY_KEYS: [(&str, &str); 6] = [
    ("Space  p", "play / pause"),
    ("→ ←  l h", "step one sample"),
    ("PgDn PgUp", "one minute of recorded time forward / back"),
    ("Home  End", "the start / the end"),
    ("> <", "speed ×0.5 … ×16"),
    ("t  ' \"", "go to a time (90, 1:30, @14:05:10) / next, previous mark"),
];

/// Live-only keys, left out of the replay's help: pausing, the interval and recording.
const LIVE_ONLY: [&str; 3] = ["p  Space", "+ -", "R  m"];

const NOTES: [&str; 4] = [
    "PSI: some/full % of the last 10 s stalled, then stall ms in this interval.",
    "%util*: several hardware queues; 100 % is not saturation.",
    "cache est.: rchar − read_bytes, an estimate (rchar counts pipes, sockets too).",
    "dirty gauge: │ background writeback starts, ┃ writers are throttled.",
];

/// The help over `area`; `replay`: the player's keys instead of the live-only ones.
pub fn render(frame: &mut Frame, area: Rect, model: Option<&Model>, theme: Theme, replay: bool) {
    let replay_keys: &[(&str, &str)] = if replay { &REPLAY_KEYS } else { &[] };
    let mut lines: Vec<Line> = replay_keys
        .iter()
        .chain(KEYS.iter().filter(|(k, _)| !(replay && LIVE_ONLY.contains(k))))
        .map(|(k, what)| {
            Line::from(vec![Span::styled(format!("{k:>11}  "), theme.table_header()), Span::raw(*what)])
        })
        .collect();
    lines.push(Line::from(""));
    lines.extend(NOTES.iter().map(|n| Line::from(Span::styled(*n, theme.dim()))));
    if let Some(m) = model {
        let bpf = match (m.bpf.enabled, &m.bpf.reason) {
            (true, None) => "eBPF: on".to_string(),
            (true, Some(why)) => format!("eBPF: partly on: {}", shown(why)),
            (false, Some(why)) => format!("eBPF: off: {}", shown(why)),
            (false, None) => "eBPF: off".to_string(),
        };
        lines.push(Line::from(""));
        lines.push(Line::from(bpf));
        for p in m.bpf.programs.iter().filter(|p| !p.attached) {
            let err = p.error.as_deref().unwrap_or("not attached");
            lines.push(Line::from(Span::styled(
                format!("  {} ({}): {}", shown(&p.program), shown(&p.tracepoint), shown(err)),
                theme.dim(),
            )));
        }
    }
    let width = area.width.min(84);
    let height = (lines.len() as u16 + 2).min(area.height);
    let [popup] = Layout::horizontal([Constraint::Length(width)]).flex(Flex::Center).areas(area);
    let [popup] = Layout::vertical([Constraint::Length(height)]).flex(Flex::Center).areas(popup);
    frame.render_widget(Clear, popup);
    let block = Block::bordered().title(Span::styled(" ioscope help ", theme.title(true)));
    frame.render_widget(Paragraph::new(lines).block(block).wrap(Wrap { trim: false }), popup);
}
