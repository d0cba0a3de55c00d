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
    ("R", "record the session to ./ioscope-HOST-DATE.rec; R again stops"),
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
    ("t", "go to a time: 90, 1:30, 5m, or @14:05:10"),
];

/// Live-only keys, left out of the replay's help: pausing, the interval and recording.
const LIVE_ONLY: [&str; 3] = ["p  Space", "+ -", "R"];

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ui::stack::Pane;
    use crate::ui::state::{Action, UiState};
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
