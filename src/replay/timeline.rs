//! The replay's bottom line: play state, speed, where we are in the recording, a position bar, the
//! wall-clock time of the sample shown, and the go-to prompt. A pure render of the [`Player`].

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::replay::player::Player;
use crate::ui::format;
use crate::ui::theme::Theme;

/// Lines the timeline takes at the bottom of the screen.
pub const HEIGHT: u16 = 1;

/// `h:mm:ss` (or `m:ss` under an hour) of a recorded offset.
pub fn offset_text(d: std::time::Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

pub fn render(frame: &mut Frame, area: Rect, player: &Player, color: bool, utc_offset_s: i64) {
    let theme = Theme { color };
    let state = if player.playing { "▶ play" } else { "⏸ pause" };
    let pos = player.pos;
    let left = vec![
        Span::styled(" REPLAY ", theme.banner()),
        Span::raw(format!(" {state} ×{} ", speed_text(player.speed()))),
        Span::raw(format!("{}/{} ", offset_text(player.offset(pos)), offset_text(player.duration()))),
    ];
    let right = if let Some(text) = &player.goto {
        format!(" go to (90, 1:30, 5m, @hh:mm:ss): {text}▏")
    } else if let Some(msg) = &player.message {
        format!(" {msg}")
    } else {
        // The widest hint that leaves the bar its 10 cells: the speed and jump keys stay at 80
        // columns (the wall clock and the sample number go first).
        let clock = format::clock(player.wall_unix_ms(pos), utc_offset_s);
        let (n, len) = (pos + 1, player.len());
        let marks = if player.marks.is_empty() { "" } else { " '\" mark" };
        let room = (area.width as usize).saturating_sub(left.iter().map(|s| s.width()).sum::<usize>() + 10);
        [
            format!(" {clock} #{n}/{len}  ←→ step PgUp/Dn ±1m Home/End Space play <> speed t go to{marks}"),
            format!(" {clock} #{n}/{len}  ←→ PgUp/Dn step  <> speed  t go to{marks}"),
            format!(" #{n}/{len} ←→ PgUp/Dn step <> speed t go to{marks}"),
            format!(" ←→ PgUp/Dn step <> speed t go to{marks}"),
        ]
        .into_iter()
        .find(|h| h.chars().count() <= room)
        .unwrap_or_else(|| format!(" ←→ step <> speed{marks}"))
    };
    let used: usize = left.iter().map(|s| s.width()).sum();
    let right_w = right.chars().count();
    let width = area.width as usize;
    // The bar gets what is left, at least 10 cells; the key hints are cut first.
    let bar_w = width.saturating_sub(used + right_w).max(10.min(width.saturating_sub(used)));
    let mut spans = left;
    spans.push(Span::styled(bar(player, bar_w), theme.dim()));
    let room = width.saturating_sub(used + bar_w);
    spans.push(Span::raw(format::shorten(&right, room)));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn speed_text(speed: f64) -> String {
    if speed.fract() == 0.0 {
        format!("{speed:.0}")
    } else {
        format!("{speed}")
    }
}

/// `━━━━●────` over the recorded time, `width` cells.
fn bar(player: &Player, width: usize) -> String {
    if width == 0 {
        return String::new();
    }
    let total = player.duration().as_secs_f64();
    let cell = |offset: std::time::Duration| {
        let frac = if total > 0.0 { offset.as_secs_f64() / total } else { 0.0 };
        ((frac * (width - 1) as f64).round() as usize).min(width - 1)
    };
    let at = cell(player.offset(player.pos));
    let marks: Vec<usize> = player.marks.iter().map(|(i, _)| cell(player.offset(*i))).collect();
    (0..width)
        .map(|i| {
            if i != at && marks.contains(&i) {
                '◆'
            } else if i < at {
                '━'
            } else if i == at {
                '●'
            } else {
                '─'
            }
        })
        .collect()
}
