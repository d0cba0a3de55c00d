//! Where a replay is and how it moves: position, play/pause, speed, the go-to-time prompt. Pure:
//! the replay loop feeds it keys and the time that passed, and reads the position back, so every
//! binding is unit-tested without a terminal or a file.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind};

/// Replay speeds `<` and `>` step through.
pub const SPEEDS: [f64; 6] = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0];
/// PgUp / PgDn move this much recorded time.
pub const JUMP: Duration = Duration::from_secs(60);

#[derive(Clone, Debug, PartialEq)]
pub struct Player {
    /// Each sample's offset from the first one (monotonic clock), ns: 8 bytes a sample, for
    /// recordings of millions.
    offsets: Vec<u64>,
    /// Wall clock of each sample, ms since the Unix epoch (for "go to 14:05:10").
    walls: Vec<u64>,
    /// The sample shown: the model is the one between `pos - 1` and `pos` (rates pending at 0).
    pub pos: usize,
    pub playing: bool,
    /// Index into SPEEDS.
    speed: usize,
    /// Recorded time played since `pos` was reached, scaled by the speed.
    progress: Duration,
    /// The text typed after `t`, while the go-to prompt is open.
    pub goto: Option<String>,
    /// Why the last go-to was refused, or the mark jumped to, until the next key.
    pub message: Option<String>,
    /// The recording's marks: the sample shown for each (the first at or after it) and its note.
    pub marks: Vec<(usize, String)>,
}

/// What the replay loop must do after a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlayerAction {
    /// The key was not the player's: give it to the panes' key handler.
    NotMine,
    /// The player's state changed (position or not): draw again.
    Redraw,
}

impl Player {
    pub fn new(mono_ns: &[u64], wall_unix_ms: &[u64]) -> Player {
        let t0 = mono_ns.first().copied().unwrap_or(0);
        let offsets = mono_ns.iter().map(|&t| t.saturating_sub(t0)).collect();
        Player {
            offsets,
            walls: wall_unix_ms.to_vec(),
            // The first sample alone has no rates: start on the second when there is one.
            pos: usize::from(mono_ns.len() > 1),
            playing: false,
            speed: 1,
            progress: Duration::ZERO,
            goto: None,
            message: None,
            marks: Vec::new(),
        }
    }

    /// Sets the marks from their offsets from the first sample, and their notes.
    pub fn set_marks(&mut self, marks: &[(Duration, String)]) {
        self.marks = marks
            .iter()
            .map(|(offset, note)| {
                let at = u64::try_from(offset.as_nanos()).unwrap_or(u64::MAX);
                let i = self.offsets.partition_point(|&o| o < at).min(self.len().saturating_sub(1));
                (i, note.clone())
            })
            .collect();
    }

    /// `'` (next) and `"` (previous): the mark after or before the position, if any.
    fn jump_to_mark(&mut self, forward: bool) {
        let found = if forward {
            self.marks.iter().position(|(i, _)| *i > self.pos)
        } else {
            self.marks.iter().rposition(|(i, _)| *i < self.pos)
        };
        match found {
            Some(n) => {
                self.playing = false;
                let (i, note) = self.marks[n].clone();
                self.seek(i);
                let note = if note.is_empty() {
                    String::new()
                } else {
                    format!(": {}", crate::untrusted::escape(&note))
                };
                self.message = Some(format!("mark {}/{}{note}", n + 1, self.marks.len()));
            }
            None if self.marks.is_empty() => self.message = Some("the recording has no marks".into()),
            None => self.message = Some(format!("no mark {}", if forward { "after" } else { "before" })),
        }
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    pub fn speed(&self) -> f64 {
        SPEEDS[self.speed]
    }

    /// Plays at `speed`, one of [`SPEEDS`]; false (unchanged) for any other.
    pub fn set_speed(&mut self, speed: f64) -> bool {
        match SPEEDS.iter().position(|&s| s == speed) {
            Some(i) => {
                self.speed = i;
                true
            }
            None => false,
        }
    }

    pub fn offset(&self, i: usize) -> Duration {
        Duration::from_nanos(self.offsets.get(i).copied().unwrap_or_default())
    }

    pub fn wall_unix_ms(&self, i: usize) -> u64 {
        self.walls.get(i).copied().unwrap_or(0)
    }

    /// The recording's length in recorded time.
    pub fn duration(&self) -> Duration {
        Duration::from_nanos(self.offsets.last().copied().unwrap_or_default())
    }

    pub fn at_end(&self) -> bool {
        self.pos + 1 >= self.len()
    }

    fn seek(&mut self, pos: usize) {
        self.pos = pos.min(self.len().saturating_sub(1));
        self.progress = Duration::ZERO;
    }

    /// The first sample at or after `offset` (the last one if none is).
    pub fn seek_offset(&mut self, offset: Duration) {
        let offset = u64::try_from(offset.as_nanos()).unwrap_or(u64::MAX);
        let i = self.offsets.partition_point(|&o| o < offset);
        self.seek(i);
    }

    /// While playing: how long (wall time) until the next sample is due. None when paused or at end.
    pub fn due_in(&self) -> Option<Duration> {
        if !self.playing || self.at_end() {
            return None;
        }
        let gap = self.offset(self.pos + 1).saturating_sub(self.offset(self.pos));
        Some(gap.saturating_sub(self.progress).div_f64(self.speed()))
    }

    /// Plays `elapsed` wall time: moves over every sample that became due. True when it moved.
    /// Reaching the end pauses.
    pub fn advance(&mut self, elapsed: Duration) -> bool {
        if !self.playing {
            return false;
        }
        let start = self.pos;
        self.progress += elapsed.mul_f64(self.speed());
        while !self.at_end() {
            let gap = self.offset(self.pos + 1).saturating_sub(self.offset(self.pos));
            if self.progress < gap {
                break;
            }
            self.progress -= gap;
            self.pos += 1;
        }
        if self.at_end() {
            self.playing = false;
            self.progress = Duration::ZERO;
        }
        self.pos != start
    }

    /// The player's keys; any other key is `NotMine`.
    pub fn handle_key(&mut self, key: KeyEvent, utc_offset_s: i64) -> PlayerAction {
        if key.kind == KeyEventKind::Release {
            return PlayerAction::NotMine;
        }
        self.message = None;
        if let Some(text) = &mut self.goto {
            match key.code {
                KeyCode::Enter => {
                    let text = std::mem::take(text);
                    self.goto = None;
                    if let Err(e) = self.go_to(&text, utc_offset_s) {
                        self.message = Some(e);
                    }
                }
                KeyCode::Esc => self.goto = None,
                KeyCode::Backspace => {
                    text.pop();
                }
                KeyCode::Char(c) if !c.is_control() => text.push(c),
                _ => {}
            }
            return PlayerAction::Redraw;
        }
        let step = |p: &mut Player, by: i64| {
            p.playing = false;
            let to = (p.pos as i64 + by).max(0) as usize;
            p.seek(to);
        };
        match key.code {
            KeyCode::Char(' ') | KeyCode::Char('p') => {
                if self.at_end() && !self.playing {
                    // Play at the end starts over, like a media player.
                    self.seek(0);
                }
                self.playing = !self.playing;
                self.progress = Duration::ZERO;
            }
            KeyCode::Right | KeyCode::Char('l') => step(self, 1),
            KeyCode::Left | KeyCode::Char('h') => step(self, -1),
            KeyCode::PageDown => self.seek_offset(self.offset(self.pos) + JUMP),
            KeyCode::PageUp => self.seek_offset(self.offset(self.pos).saturating_sub(JUMP)),
            KeyCode::Home => self.seek(usize::from(self.len() > 1)),
            KeyCode::End => self.seek(usize::MAX),
            KeyCode::Char('>') | KeyCode::Char('.') => self.speed = (self.speed + 1).min(SPEEDS.len() - 1),
            KeyCode::Char('<') | KeyCode::Char(',') => self.speed = self.speed.saturating_sub(1),
            KeyCode::Char('t') => self.goto = Some(String::new()),
            KeyCode::Char('\'') => self.jump_to_mark(true),
            KeyCode::Char('"') => self.jump_to_mark(false),
            _ => return PlayerAction::NotMine,
        }
        PlayerAction::Redraw
    }

    /// "90", "1:30", "5m", "+90": offset from the start; "@14:05:10" or "@14:05": that local time
    /// of day within the recording.
    pub fn go_to(&mut self, text: &str, utc_offset_s: i64) -> Result<(), String> {
        let text = text.trim();
        if let Some(clock) = text.strip_prefix('@') {
            let tod = crate::util::parse_duration(clock)
                .map_err(|_| format!("'{clock}' is not a time of day (hh:mm:ss)"))?;
            let first = self.wall_unix_ms(0) as i64 + utc_offset_s * 1000;
            let day_start = first.div_euclid(86_400_000) * 86_400_000;
            let mut target = day_start + tod.as_millis() as i64;
            if target < first {
                // Past midnight within the recording.
                target += 86_400_000;
            }
            let local = |i: usize| self.wall_unix_ms(i) as i64 + utc_offset_s * 1000;
            let last = local(self.len().saturating_sub(1));
            if target > last + 1000 {
                return Err(format!("{clock} is after the recording's end"));
            }
            let i = (0..self.len()).find(|&i| local(i) >= target).unwrap_or(self.len().saturating_sub(1));
            self.seek(i);
            return Ok(());
        }
        let offset = crate::util::parse_duration(text.trim_start_matches('+')).map_err(|e| e.to_string())?;
        if offset > self.duration() + Duration::from_secs(1) {
            return Err(format!("the recording is only {:.0} s long", self.duration().as_secs_f64()));
        }
        self.seek_offset(offset);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::KeyModifiers;

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    /// Samples every second for `n` seconds, the wall clock starting at 12:00:00 UTC.
    fn player(n: u64) -> Player {
        let mono: Vec<u64> = (0..n).map(|i| 5_000_000_000 + i * 1_000_000_000).collect();
        let wall: Vec<u64> = (0..n)
            .map(|i| 1_700_000_000_000 - 1_700_000_000_000 % 86_400_000 + 12 * 3_600_000 + i * 1000)
            .collect();
        Player::new(&mono, &wall)
    }

    #[test]
    fn starts_on_the_second_sample_and_steps_within_bounds() {
        let mut p = player(10);
        assert_eq!(p.pos, 1);
        p.handle_key(key(KeyCode::Right), 0);
        assert_eq!(p.pos, 2);
        for _ in 0..5 {
            p.handle_key(key(KeyCode::Left), 0);
        }
        assert_eq!(p.pos, 0);
        p.handle_key(key(KeyCode::End), 0);
        assert_eq!(p.pos, 9);
        p.handle_key(key(KeyCode::Right), 0);
        assert_eq!(p.pos, 9, "never past the end");
        p.handle_key(key(KeyCode::Home), 0);
        assert_eq!(p.pos, 1);
        assert_eq!(Player::new(&[7], &[0]).pos, 0, "a single sample is shown as it is");
    }

    #[test]
    fn page_keys_jump_a_minute_of_recorded_time() {
        let mut p = player(200);
        p.handle_key(key(KeyCode::PageDown), 0);
        assert_eq!(p.pos, 61);
        p.handle_key(key(KeyCode::PageDown), 0);
        p.handle_key(key(KeyCode::PageDown), 0);
        p.handle_key(key(KeyCode::PageDown), 0);
        assert_eq!(p.pos, 199);
        p.handle_key(key(KeyCode::PageUp), 0);
        assert_eq!(p.pos, 139);
    }

    #[test]
    fn play_advances_by_recorded_time_times_speed_and_stops_at_the_end() {
        let mut p = player(10);
        assert!(!p.advance(Duration::from_secs(5)), "paused: nothing moves");
        p.handle_key(key(KeyCode::Char(' ')), 0);
        assert!(p.playing);
        assert_eq!(p.due_in(), Some(Duration::from_secs(1)));
        assert!(!p.advance(Duration::from_millis(600)));
        assert_eq!(p.due_in(), Some(Duration::from_millis(400)));
        assert!(p.advance(Duration::from_millis(400)));
        assert_eq!(p.pos, 2);
        p.handle_key(key(KeyCode::Char('>')), 0);
        p.handle_key(key(KeyCode::Char('>')), 0);
        assert_eq!(p.speed(), 4.0);
        assert_eq!(p.due_in(), Some(Duration::from_millis(250)));
        p.advance(Duration::from_secs(1));
        assert_eq!(p.pos, 6);
        p.advance(Duration::from_secs(10));
        assert_eq!(p.pos, 9);
        assert!(!p.playing, "the end pauses");
        assert_eq!(p.due_in(), None);
        p.handle_key(key(KeyCode::Char(' ')), 0);
        assert!(p.playing);
        assert_eq!(p.pos, 0, "play at the end starts over");
    }

    #[test]
    fn speed_is_bounded_from_half_to_sixteen() {
        let mut p = player(3);
        for _ in 0..10 {
            p.handle_key(key(KeyCode::Char('<')), 0);
        }
        assert_eq!(p.speed(), 0.5);
        for _ in 0..10 {
            p.handle_key(key(KeyCode::Char('.')), 0);
        }
        assert_eq!(p.speed(), 16.0);
    }

    #[test]
    fn go_to_an_offset_or_a_time_of_day() {
        let mut p = player(300);
        for c in "t1:30".chars() {
            let code = if c == 't' { KeyCode::Char('t') } else { KeyCode::Char(c) };
            assert_eq!(p.handle_key(key(code), 0), PlayerAction::Redraw);
        }
        assert_eq!(p.goto.as_deref(), Some("1:30"));
        p.handle_key(key(KeyCode::Enter), 0);
        assert_eq!((p.pos, p.goto.is_none()), (90, true));
        assert_eq!(p.go_to("@12:02:05", 0), Ok(()));
        assert_eq!(p.pos, 125);
        // 14:02:05 local is 12:02:05 UTC two hours east.
        assert_eq!(p.go_to("@14:02:05", 7200), Ok(()));
        assert_eq!(p.pos, 125);
        assert!(p.go_to("@13:00", 0).unwrap_err().contains("after the recording's end"));
        assert!(p.go_to("10m", 0).unwrap_err().contains("only 299 s long"));
        assert!(p.go_to("soon", 0).is_err());
        // A refused go-to shows its reason until the next key.
        p.handle_key(key(KeyCode::Char('t')), 0);
        p.handle_key(key(KeyCode::Char('x')), 0);
        p.handle_key(key(KeyCode::Enter), 0);
        assert!(p.message.is_some());
        assert_eq!(p.pos, 125);
        p.handle_key(key(KeyCode::Right), 0);
        assert!(p.message.is_none());
    }

    #[test]
    fn quote_keys_jump_between_marks_and_say_their_notes_escaped() {
        let mut p = player(100);
        p.handle_key(key(KeyCode::Char('\'')), 0);
        assert_eq!(p.message.as_deref(), Some("the recording has no marks"));
        p.set_marks(&[
            (Duration::from_millis(10_500), "fsync \x1b[31mstall".into()),
            (Duration::from_secs(40), String::new()),
        ]);
        assert_eq!(p.marks.iter().map(|m| m.0).collect::<Vec<_>>(), [11, 40]);
        p.handle_key(key(KeyCode::Char('\'')), 0);
        assert_eq!(p.pos, 11);
        let msg = p.message.clone().unwrap();
        assert!(msg.starts_with("mark 1/2: fsync ") && !msg.contains('\x1b'), "{msg}");
        p.handle_key(key(KeyCode::Char('\'')), 0);
        assert_eq!((p.pos, p.message.as_deref()), (40, Some("mark 2/2")));
        p.handle_key(key(KeyCode::Char('\'')), 0);
        assert_eq!((p.pos, p.message.as_deref()), (40, Some("no mark after")));
        p.handle_key(key(KeyCode::Char('"')), 0);
        assert_eq!(p.pos, 11);
    }

    #[test]
    fn other_keys_go_to_the_panes() {
        let mut p = player(3);
        assert_eq!(p.handle_key(key(KeyCode::Char('s')), 0), PlayerAction::NotMine);
        assert_eq!(p.handle_key(key(KeyCode::Down), 0), PlayerAction::NotMine);
    }
}
