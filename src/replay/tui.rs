//! The replay TUI: the live TUI's panes (same [`ui::draw_in`], same [`UiState`] keys: sorting,
//! filtering, zoom, help) driven by a [`Player`] over a [`Recording`] instead of the sampler, with a
//! timeline on the bottom line.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::KeyEvent;
use ratatui::layout::{Constraint, Layout};
use ratatui::Frame;

use crate::model::{Model, Stream};
use crate::record::Recording;
use crate::replay::player::{Player, PlayerAction};
use crate::replay::timeline;
use crate::ui::baseline::Baseline;
use crate::ui::event_loop::{self, Screen, Step};
use crate::ui::history::HISTORY_LEN;
use crate::ui::{self, Action, History, UiState};

/// Redraw at least this often (the clock in the timeline, a lost resize).
const TICK: Duration = Duration::from_secs(1);

/// One replay screen: the panes above, the timeline on the last line. Pure (snapshot-tested).
pub fn draw(frame: &mut Frame, model: &Model, state: &UiState, player: &Player) {
    let [body, line] =
        Layout::vertical([Constraint::Fill(1), Constraint::Length(timeline::HEIGHT)]).areas(frame.area());
    ui::draw_in(frame, body, model, state);
    timeline::render(frame, line, player, state.color, state.utc_offset_s);
}

/// The model shown at `pos`: between the sample before it and it (gauges only at the first one).
pub fn model_at(rec: &mut Recording, pos: usize) -> anyhow::Result<Model> {
    model_after(&mut Stream::new(), None, rec, pos)
}

/// [`model_at`] from a stream whose last sample is that at `shown`: one step on when `pos` is the
/// next position, else the stream starts again from the sample before `pos`.
fn model_after(
    stream: &mut Stream,
    shown: Option<usize>,
    rec: &mut Recording,
    pos: usize,
) -> anyhow::Result<Model> {
    if shown.map(|s| s + 1) != Some(pos) {
        let prev = match pos.checked_sub(1) {
            Some(p) => Some(Arc::new(rec.sample(p)?.clone())),
            None => None,
        };
        stream.restart(prev);
    }
    Ok(stream.advance(rec.sample(pos)?.clone()))
}

/// The sparklines' gauges of every sample (page cache; dirty + writeback), read once at open. Only
/// the memory part of each sample is parsed: the processes are most of a sample's size.
/// Kept in KiB as u32 (8 bytes a sample, up to 4 TiB), as /proc/meminfo gives them.
pub fn gauges(rec: &mut Recording) -> anyhow::Result<Vec<(u32, u32)>> {
    #[derive(serde::Deserialize)]
    struct MemoryOnly {
        #[serde(default)]
        memory: crate::sample::MemInfo,
    }
    let kib = |b: u64| u32::try_from(b >> 10).unwrap_or(u32::MAX);
    (0..rec.len())
        .map(|i| {
            let m = rec.parse_as::<MemoryOnly>(i)?.memory;
            Ok((kib(m.cached_bytes), kib(m.dirty_bytes + m.writeback_bytes)))
        })
        .collect()
}

/// The sparkline history as it was live when sample `pos` arrived.
pub fn history_at(gauges: &[(u32, u32)], pos: usize) -> History {
    let mut h = History::default();
    let end = (pos + 1).min(gauges.len());
    for &(cached, dirty) in &gauges[end.saturating_sub(HISTORY_LEN)..end] {
        let mut m = Model::default();
        m.memory.cached = u64::from(cached) << 10;
        m.memory.dirty = u64::from(dirty) << 10;
        h.push(&m);
    }
    h
}

/// The UI state a replay starts with: the recording's interval in the header.
pub fn initial_state(rec: &Recording, color: bool) -> UiState {
    let interval = Duration::from_secs_f64(rec.header.interval_s.clamp(0.1, 3600.0));
    let mut state = UiState::new(interval, color);
    // UiState clamps to the live +/- steps; a replay shows what was recorded.
    state.interval = interval;
    state.replay = true;
    state
}

pub fn run(rec: Recording, color: bool, from: Option<Duration>) -> anyhow::Result<()> {
    if !std::io::stdout().is_terminal() {
        anyhow::bail!("replaying in the TUI needs a terminal on stdout; use --batch, --json or --csv");
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(run_loop(rec, color, from))
}

async fn run_loop(rec: Recording, color: bool, from: Option<Duration>) -> anyhow::Result<()> {
    let mut replay = Replay::open(rec, color, from, crate::util::local_utc_offset_s())?;
    let signals = event_loop::Signals::hook()?;
    replay.last = Instant::now();
    event_loop::run(signals, &mut replay).await
}

/// The replay screen: models from the recording at the player's position. The TUI's event loop
/// drives it; the exports ([`crate::replay::export`]) drive the same one frame by frame.
pub struct Replay {
    rec: Recording,
    gauges: Vec<(u32, u32)>,
    pub state: UiState,
    pub player: Player,
    /// The models, fed from the file: one step at a time while playing, started again at a jump.
    stream: Stream,
    /// The position on screen and its model.
    shown: (usize, Model),
    last: Instant,
}

/// What a key did to the replay screen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pressed {
    /// The player or the panes took it.
    Done,
    /// Neither knew it here: nothing changed.
    Nothing,
    Quit,
}

impl Replay {
    /// The screen at the start of a replay (at `from` when given), the timeline's clock at
    /// `utc_offset_s` from UTC.
    pub fn open(
        mut rec: Recording,
        color: bool,
        from: Option<Duration>,
        utc_offset_s: i64,
    ) -> anyhow::Result<Replay> {
        let mut state = initial_state(&rec, color);
        state.utc_offset_s = utc_offset_s;
        let mut player = Player::new(&rec.mono_ns(), &rec.wall_unix_ms());
        let marks: Vec<(Duration, String)> = (1..=rec.marks.len())
            .filter_map(|n| Some((rec.mark_offset(n).ok()?, rec.marks[n - 1].note.clone())))
            .collect();
        player.set_marks(&marks);
        if let Some(from) = from {
            player.seek_offset(from);
        }
        let gauges = gauges(&mut rec)?;
        let mut stream = Stream::new();
        let model = model_after(&mut stream, None, &mut rec, player.pos)?;
        state.history = history_at(&gauges, player.pos);
        let shown = (player.pos, model);
        Ok(Replay { rec, gauges, state, player, stream, shown, last: Instant::now() })
    }

    /// A key, as the replay TUI takes it.
    pub fn press(&mut self, key: KeyEvent) -> Pressed {
        let state = &mut self.state;
        // The prompt, filter and help overlay own the keyboard while open.
        let panes_first = state.overlay.is_some();
        if !panes_first && self.player.handle_key(key, state.utc_offset_s) == PlayerAction::Redraw {
            return Pressed::Done;
        }
        let interval = state.interval;
        match state.handle_key(key) {
            Action::Quit => return Pressed::Quit,
            // +/- change the live sampler's interval: a recording's is fixed.
            Action::SetInterval(_) => state.interval = interval,
            Action::ToggleBaseline => {
                state.baseline = match state.baseline {
                    Some(_) => None,
                    None => Some(Baseline { model: self.shown.1.clone() }),
                };
            }
            Action::ToggleRecording => {
                state.message = Some("R records live sessions; this is already a recording".into());
            }
            Action::StartMark | Action::AddMark => {
                state.message = Some("m marks a live recording; here ' and \" jump to its marks".into());
            }
            Action::None => return Pressed::Nothing,
            Action::Redraw => {}
        }
        Pressed::Done
    }

    /// Draws the whole screen.
    pub fn render(&mut self, frame: &mut Frame) {
        let model = &self.shown.1;
        self.state.clamp_selection(model);
        draw(frame, model, &self.state, &self.player);
    }

    /// Brings the model on screen to the player's position.
    pub fn show(&mut self) -> anyhow::Result<()> {
        if self.shown.0 != self.player.pos {
            let model = model_after(&mut self.stream, Some(self.shown.0), &mut self.rec, self.player.pos)?;
            self.state.history = history_at(&self.gauges, self.player.pos);
            self.shown = (self.player.pos, model);
        }
        Ok(())
    }
}

impl Screen for Replay {
    fn tick(&self) -> Duration {
        TICK
    }

    async fn next(&mut self) -> anyhow::Result<Step> {
        // The player's next sample is due (or the clock in the timeline moves on).
        tokio::time::sleep(self.player.due_in().unwrap_or(TICK).min(TICK)).await;
        Ok(Step::Redraw)
    }

    fn key(&mut self, key: KeyEvent, _height: u16) -> anyhow::Result<Step> {
        Ok(match self.press(key) {
            Pressed::Quit => Step::Quit,
            Pressed::Done | Pressed::Nothing => Step::Redraw,
        })
    }

    fn settle(&mut self) -> anyhow::Result<Step> {
        let now = Instant::now();
        self.player.advance(now - self.last);
        self.last = now;
        self.show()?;
        // The replay screen is drawn after every event, as the timeline moves.
        Ok(Step::Redraw)
    }

    fn draw(&mut self, frame: &mut Frame) {
        self.render(frame);
    }
}
