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
pub const KEYS: [(&str, &str); 23] = [
    ("q  Ctrl-C", "quit"),
    ("Ctrl-Z", "suspend to the shell (fg resumes)"),
    ("?  F1", "this help (Esc closes it)"),
    ("Tab  S-Tab", "focus the next / previous pane"),
    ("1 2 3 4", "focus memory / devices / processes / page cache. Devices: r/s w/s d/s f/s reads, writes, discards, flushes a second; rrqm/s wrqm/s merged; -sz average request size; _await ms a request; aqu-sz average queue length; inflt requests in flight now; bpf iss/s requests issued, p99 ms their latency, q ms time queued (eBPF)"),
    ("↑ ↓  j k", "select a row (also PgUp PgDn, Home g, End G); ← → show the columns a narrow table hides"),
    ("z", "zoom the focused pane (devices: + queue settings: sched I/O scheduler, ra_kb readahead KiB, nr_req queue size, rot rotational, max_kb largest request KiB, hwq hardware queues, lbs logical block size); Esc unzooms"),
    ("s  r", "sort the focused table (processes when memory has the focus) by the next column / reverse"),
    ("/", "filter processes by comm or pid; Enter keeps, Esc clears"),
    ("a  P  i", "show idle processes / partitions / idle loop+ram devices"),
    ("L", "processes: command line instead of comm (USER: the owner)"),
    ("u", "units: human (K M G = KiB MiB GiB) / raw"),
    ("p  Space", "pause the display (sampling goes on)"),
    ("+ -", "sampling interval, 0.25 s … 60 s"),
    ("b", "baseline: panes show deltas against now; b again clears"),
    ("R  m", "record to ./ioscope-HOST-DATE.rec, R again stops / m: mark"),
    ("Enter", "eBPF detail of the selected device: q queue time (insert to issue), d device time (issue to done), p50/p95/p99 percentiles, d max≤ upper edge of the slowest bucket, sched% requests through the I/O scheduler; Esc closes"),
    ("e  d", "eBPF probe health / processes by disk I/O submitter (eBPF)"),
    ("f", "files by disk I/O (of the detail's device / selected process)"),
    ("w", "readahead: pages read ahead, used, wasted per file; Enter detail"),
    ("c  C", "cgroups: I/O, cache, PSI; Enter limits panes to one, C clears"),
    ("y", "sync calls (fsync and friends) per process and file, running first"),
    ("W", "I/O waits: time blocked on I/O per process and thread, by cause"),
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

/// The help's own state: how far it is scrolled (clamped to its lines at each draw).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HelpView {
    scroll: std::cell::Cell<usize>,
}

impl HelpView {
    /// ↑↓ j k, PgUp PgDn, Home g, End G scroll; false for any other key.
    pub fn handle_key(&mut self, code: crossterm::event::KeyCode) -> bool {
        let Some(by) = crate::ui::table::step_of(code) else { return false };
        let at = (self.scroll.get() as i64).saturating_add(by).clamp(0, 1 << 20);
        self.scroll.set(at as usize);
        true
    }

    /// Back to the top (the help opens there).
    pub fn reset(&mut self) {
        self.scroll.set(0);
    }
}

/// `text` cut into lines of at most `width` characters at spaces (a longer word is cut).
fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let (n, w) = (line.chars().count(), word.chars().count());
        if n > 0 && n + 1 + w > width {
            out.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push(line);
    out
}

/// The help over `area`, scrolled by `view`; `replay`: the player's keys instead of the live-only
/// ones. Wrapped lines are indented under the description they continue.
pub fn render(
    frame: &mut Frame,
    area: Rect,
    model: Option<&Model>,
    theme: Theme,
    replay: bool,
    view: &HelpView,
) {
    let replay_keys: &[(&str, &str)] = if replay { &REPLAY_KEYS } else { &[] };
    let width = area.width.min(84);
    let inner_w = width.saturating_sub(2).max(1) as usize;
    // Descriptions wrap under themselves, right of the keys.
    let desc_w = inner_w.saturating_sub(13).max(10);
    let mut lines: Vec<Line> = Vec::new();
    for (k, what) in replay_keys.iter().chain(KEYS.iter().filter(|(k, _)| !(replay && LIVE_ONLY.contains(k))))
    {
        for (i, part) in wrap_words(what, desc_w).into_iter().enumerate() {
            let key = if i == 0 { format!("{k:>11}  ") } else { " ".repeat(13) };
            lines.push(Line::from(vec![Span::styled(key, theme.table_header()), Span::raw(part)]));
        }
    }
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
    // Lines once wrapped at the popup's width.
    let wrapped: usize = lines.iter().map(|l| l.width().max(1).div_ceil(inner_w)).sum();
    let height = (wrapped as u16 + 2).min(area.height);
    let body = height.saturating_sub(2) as usize;
    let last_top = wrapped.saturating_sub(body);
    let top = view.scroll.get().min(last_top);
    view.scroll.set(top);
    let [popup] = Layout::horizontal([Constraint::Length(width)]).flex(Flex::Center).areas(area);
    let [popup] = Layout::vertical([Constraint::Length(height)]).flex(Flex::Center).areas(popup);
    frame.render_widget(Clear, popup);
    let mut block = Block::bordered().title(Span::styled(" ioscope help ", theme.title(true)));
    if top > 0 {
        block = block.title_bottom(Span::styled(format!(" ▲ {top} more "), theme.dim()));
    }
    if top < last_top {
        block = block.title_bottom(
            Line::from(Span::styled(format!(" ▼ {} more (↓ PgDn) ", last_top - top), theme.dim()))
                .right_aligned(),
        );
    }
    let scroll = (top.min(u16::MAX as usize) as u16, 0);
    frame.render_widget(Paragraph::new(lines).block(block).wrap(Wrap { trim: false }).scroll(scroll), popup);
}

#[cfg(test)]
mod abbreviation_tests {
    use super::KEYS;

    #[test]
    fn the_devices_and_detail_abbreviations_are_explained_beside_their_keys() {
        let said = |key: &str| KEYS.iter().find(|(k, _)| *k == key).map(|(_, what)| *what).unwrap();
        for label in ["r/s", "rrqm/s", "-sz", "_await", "aqu-sz", "inflt", "bpf iss/s", "p99 ms", "q ms"] {
            assert!(said("1 2 3 4").contains(label), "{label}");
        }
        for label in ["sched", "ra_kb", "nr_req", "rot", "max_kb", "hwq", "lbs"] {
            assert!(said("z").contains(label), "{label}");
        }
        for label in ["q queue", "d device", "p99", "d max≤", "sched%"] {
            assert!(said("Enter").contains(label), "{label}");
        }
    }
}
