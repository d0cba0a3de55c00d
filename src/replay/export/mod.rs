//! `ioscope replay FILE --asciicast OUT.cast / --svg OUT.svg / --html OUT.html`: the replay TUI
//! drawn headlessly, frame by frame. The same [`Replay`] screen as the TUI (same keys, same
//! panes, same timeline) is drawn on a ratatui `Terminal` over a backend that writes into memory:
//! each sample's frame is the escape sequences a terminal of that size would get (ratatui's diff
//! against the frame before), one asciicast event at the sample's recorded time divided by the
//! speed. The SVG is one frame's cells; the page embeds the cast and asciinema's player.
//!
//! Everything is drawn in memory first; the files are created only then, all or none, so bad
//! input (a file that is no recording, a key that does nothing, `--at` outside the recording, an
//! existing file without `--force`) writes nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};

use crate::record::Recording;
use crate::replay::player::SPEEDS;
use crate::replay::tui::{Pressed, Replay};
use crate::safe_fs::{CreateOptions, Refused};

pub mod cast;
pub mod html;
pub mod keys;
pub mod svg;

/// The size an export draws at when `--size` is not given.
pub const DEFAULT_SIZE: (u16, u16) = (120, 40);

/// What to export and how.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportOptions {
    pub asciicast: Option<PathBuf>,
    pub svg: Option<PathBuf>,
    pub html: Option<PathBuf>,
    /// Columns and rows.
    pub size: (u16, u16),
    /// One of the replay's speeds ([`SPEEDS`]).
    pub speed: f64,
    /// The moment of the SVG (offset from the recording's start); the first frame when None.
    pub at: Option<Duration>,
    /// `--keys` as given (parsed by [`keys::parse`]).
    pub keys: String,
    /// Replace existing files.
    pub force: bool,
    pub color: bool,
}

/// `--size COLSxROWS`: 20x5 to 1000x500.
pub fn parse_size(s: &str) -> Result<(u16, u16), String> {
    let bad = || format!("'{s}' is not a size: write COLSxROWS, e.g. 120x40");
    let (c, r) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let (c, r): (u16, u16) = (c.trim().parse().map_err(|_| bad())?, r.trim().parse().map_err(|_| bad())?);
    if !(20..=1000).contains(&c) || !(5..=500).contains(&r) {
        return Err(format!("{s}: the size must be 20x5 to 1000x500"));
    }
    Ok((c, r))
}

/// `--speed`: one of the replay TUI's speeds, so the timeline shows what the cast plays at.
pub fn parse_speed(s: &str) -> Result<f64, String> {
    let speeds = || SPEEDS.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ");
    match s.trim().trim_start_matches(['x', '×']).parse::<f64>() {
        Ok(v) if SPEEDS.contains(&v) => Ok(v),
        _ => Err(format!("'{s}' is not a replay speed ({})", speeds())),
    }
}

fn refuse<T>(msg: String) -> anyhow::Result<T> {
    Err(anyhow::Error::new(Refused(msg)))
}

/// What the terminal backend wrote, read back after each frame.
#[derive(Clone, Default)]
struct Shared(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What was drawn: the cast's text and the SVG, both in memory.
pub struct Drawn {
    pub cast: String,
    pub svg: Option<String>,
    /// The number of frames and of the cast's events.
    pub frames: usize,
}

/// Draws the export of `rec` (named `file`) between `from` and `to`.
pub fn draw(
    rec: Recording,
    file: &Path,
    from: Option<Duration>,
    to: Option<Duration>,
    opts: &ExportOptions,
    utc_offset_s: i64,
) -> anyhow::Result<Drawn> {
    let keys = match keys::parse(&opts.keys) {
        Ok(k) => k,
        Err(e) => return refuse(e),
    };
    let timestamp_s = rec.wall_unix_ms().first().copied().unwrap_or(0) / 1000;
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let title = format!("ioscope replay {}", crate::untrusted::escape(&name));
    let mut replay = Replay::open(rec, opts.color, from, utc_offset_s)?;
    let duration = replay.player.duration();
    for (at, what) in [(from, "--from"), (to, "--to"), (opts.at, "--at")] {
        if let Some(at) = at.filter(|&at| at > duration) {
            return refuse(format!(
                "{what} {} is after the recording's end ({})",
                crate::replay::timeline::offset_text(at),
                crate::replay::timeline::offset_text(duration)
            ));
        }
    }
    replay.player.set_speed(opts.speed);
    for (i, key) in keys.iter().enumerate() {
        match replay.press(key.event) {
            Pressed::Done => {}
            Pressed::Nothing => {
                return refuse(format!(
                    "key '{}' (key {} of --keys) does nothing in the replay at that point",
                    crate::untrusted::escape(&key.text),
                    i + 1
                ))
            }
            Pressed::Quit => return refuse(format!("key '{}' in --keys quits the replay", key.text)),
        }
        replay.show()?;
    }
    // The keys may have moved the player (End, t1:30<Enter>): the export starts where it is.
    let start = replay.player.pos;
    let last = replay.player.len() - 1;
    let end = match to {
        Some(to) => (start..=last).take_while(|&p| replay.player.offset(p) <= to).last().unwrap_or(start),
        None => last,
    };
    let svg_pos = match opts.at {
        Some(at) => {
            let mut p = replay.player.clone();
            p.seek_offset(at);
            if p.pos < start || p.pos > end {
                return refuse(format!(
                    "--at {} is outside the exported frames ({} to {})",
                    crate::replay::timeline::offset_text(at),
                    crate::replay::timeline::offset_text(replay.player.offset(start)),
                    crate::replay::timeline::offset_text(replay.player.offset(end)),
                ));
            }
            p.pos
        }
        None => start,
    };
    let (cols, rows) = opts.size;
    let bytes = Shared::default();
    let backend = CrosstermBackend::new(bytes.clone());
    let mut terminal = Terminal::with_options(
        backend,
        TerminalOptions { viewport: Viewport::Fixed(Rect::new(0, 0, cols, rows)) },
    )?;
    let mut out = cast::header(cols, rows, timestamp_s, &title);
    // A known screen to draw on: attributes off, cleared, the cursor hidden.
    bytes.0.borrow_mut().extend_from_slice(b"\x1b[0m\x1b[H\x1b[2J\x1b[?25l");
    let mut svg_out = None;
    let mut time_s = 0.0;
    let t0 = replay.player.offset(start);
    for pos in start..=end {
        replay.player.pos = pos;
        // Playing, as the TUI after Space; reaching the end pauses.
        replay.player.playing = pos < last;
        replay.show()?;
        let frame = terminal.draw(|f| replay.render(f))?;
        if pos == svg_pos && opts.svg.is_some() {
            svg_out = Some(svg::render(frame.buffer, &title));
        }
        time_s = (replay.player.offset(pos) - t0).as_secs_f64() / opts.speed;
        let frame_bytes = std::mem::take(&mut *bytes.0.borrow_mut());
        cast::event(&mut out, time_s, &String::from_utf8_lossy(&frame_bytes));
    }
    // The last frame stays on screen for an interval before the player stops.
    let hold = replay.state.interval.as_secs_f64() / opts.speed;
    cast::event(&mut out, time_s + hold, "");
    Ok(Drawn { cast: out, svg: svg_out, frames: end - start + 1 })
}

/// Draws the export, then writes every file asked for: each created new (or, with `--force`, in
/// place of a regular file), all or none.
pub fn run(
    rec: Recording,
    file: &Path,
    from: Option<Duration>,
    to: Option<Duration>,
    opts: &ExportOptions,
) -> anyhow::Result<()> {
    use std::io::Write as _;
    let drawn = draw(rec, file, from, to, opts, crate::util::local_utc_offset_s())?;
    let html = opts.html.as_ref().map(|_| {
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        html::page(
            &drawn.cast,
            opts.size.0,
            opts.size.1,
            &format!("ioscope replay {}", crate::untrusted::escape(&name)),
        )
    });
    let files: Vec<(&PathBuf, &str)> = [
        (opts.asciicast.as_ref(), Some(drawn.cast.as_str())),
        (opts.svg.as_ref(), drawn.svg.as_deref()),
        (opts.html.as_ref(), html.as_deref()),
    ]
    .into_iter()
    .filter_map(|(path, text)| Some((path?, text.expect("drawn when asked for"))))
    .collect();
    let create = CreateOptions { replace: opts.force, stream: false };
    // Every file created before any is written: one refused, none is kept.
    let mut outputs = Vec::new();
    for (path, _) in &files {
        match crate::safe_fs::create(path, create, &mut || false) {
            Ok(o) => outputs.push(o),
            Err(e) => {
                outputs.into_iter().for_each(crate::safe_fs::Output::discard);
                return Err(e);
            }
        }
    }
    let mut failed = None;
    for (output, (path, text)) in outputs.iter_mut().zip(&files) {
        if let Err(e) = output.file().write_all(text.as_bytes()).and_then(|()| output.file().flush()) {
            failed = Some(anyhow::Error::new(e).context(format!("cannot write {}", path.display())));
            break;
        }
    }
    if let Some(e) = failed {
        outputs.into_iter().for_each(crate::safe_fs::Output::discard);
        return Err(e);
    }
    for output in outputs {
        output.commit()?;
    }
    Ok(())
}
