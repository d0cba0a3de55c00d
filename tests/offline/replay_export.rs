//! `ioscope replay --asciicast/--svg/--html`: the format of each file, escaping of hostile names,
//! bad input (one line, exit code 2, nothing written), and the outside oracles when they are
//! installed: `asciinema cat` of the cast ends on the replay TUI's screen (both in tmux), and a
//! headless Chromium shows the page's first frame.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ioscope::record::Recording;
use ioscope::replay::export::{self, ExportOptions};
use serde_json::Value;

use crate::common;
use crate::tui_sessions::Tmux;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ioscope")
}

fn demo(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo").join(name)
}

fn ioscope(cwd: &Path, args: &[&str]) -> Output {
    Command::new(bin()).current_dir(cwd).args(args).env_remove("NO_COLOR").output().unwrap()
}

/// The cast's header and its events `(time, data)`, each line checked to be asciicast v2.
fn parse_cast(text: &str) -> (Value, Vec<(f64, String)>) {
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().expect("a header line")).unwrap();
    let events = lines
        .map(|l| {
            let e: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            assert_eq!(e[1], "o", "{l}");
            (e[0].as_f64().expect("a time"), e[2].as_str().expect("text").to_string())
        })
        .collect();
    (header, events)
}

fn options(size: (u16, u16)) -> ExportOptions {
    ExportOptions {
        asciicast: Some("x.cast".into()),
        svg: Some("x.svg".into()),
        html: None,
        size,
        speed: 1.0,
        at: None,
        keys: String::new(),
        force: false,
        color: true,
    }
}

#[test]
fn the_cast_is_asciicast_v2_one_event_per_sample_at_its_time_over_the_speed() {
    let file = demo("small-vs-large-writes.rec");
    let rec = Recording::open(&file).unwrap();
    let (n, mono) = (rec.len(), rec.mono_ns());
    let dir = tempfile::tempdir().unwrap();
    let out = ioscope(
        dir.path(),
        &["replay", file.to_str().unwrap(), "--asciicast", "a.cast", "--size", "100x30", "--speed", "2"],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (header, events) = parse_cast(&std::fs::read_to_string(dir.path().join("a.cast")).unwrap());
    assert_eq!(
        (header["version"].as_u64(), header["width"].as_u64(), header["height"].as_u64()),
        (Some(2), Some(100), Some(30))
    );
    assert_eq!(header["timestamp"].as_u64(), Some(rec.wall_unix_ms()[0] / 1000));
    // The replay starts on the second sample: one frame for each sample from there, then the
    // last frame held for an interval.
    assert_eq!(events.len(), n - 1 + 1);
    for (i, (t, _)) in events[..n - 1].iter().enumerate() {
        let want = (mono[i + 1] - mono[1]) as f64 / 1e9 / 2.0;
        assert!((t - want).abs() < 1e-5, "frame {i} at {t}, sample at {want}");
    }
    assert!(events.windows(2).all(|w| w[0].0 <= w[1].0));
    assert!(events[0].1.starts_with("\x1b[0m\x1b[H\x1b[2J") && events[0].1.contains(" REPLAY "));
    // A frame is ratatui's diff to the one before: the end's frame writes the pause sign.
    assert!(events[n - 2].1.contains('⏸') && !events[n - 3].1.contains('⏸'), "the end pauses, as in the TUI");
    // ratatui moves the cursor over blank cells: the words of the timeline come one by one.
    assert!(events[0].1.contains('▶') && events[0].1.contains("H×2"), "{}", events[0].1);
    assert_eq!(events[n - 1].1, "");
}

#[test]
fn keys_are_pressed_before_the_first_frame_and_from_to_bound_the_frames() {
    let file = demo("small-vs-large-writes.rec");
    let opts = ExportOptions { keys: "3ss".into(), ..options((120, 40)) };
    let plain =
        export::draw(Recording::open(&file).unwrap(), &file, None, None, &options((120, 40)), 0).unwrap();
    let keyed = export::draw(Recording::open(&file).unwrap(), &file, None, None, &opts, 0).unwrap();
    let first = |d: &export::Drawn| parse_cast(&d.cast).1[0].1.clone();
    assert!(!first(&plain).contains("sort write") && first(&keyed).contains("sort write"));
    let d = export::draw(
        Recording::open(&file).unwrap(),
        &file,
        Some(std::time::Duration::from_secs(3)),
        Some(std::time::Duration::from_secs(6)),
        &options((120, 40)),
        0,
    )
    .unwrap();
    let events = parse_cast(&d.cast).1;
    assert!(events[0].1.contains("0:03/"), "starts at --from");
    let mono = Recording::open(&file).unwrap().mono_ns();
    let within = mono.iter().filter(|&&t| (3.0..=6.0).contains(&((t - mono[0]) as f64 / 1e9))).count();
    assert_eq!((d.frames, events.len()), (within, within + 1), "a frame per sample from --from to --to");
    // A still of the moment asked for.
    let at = ExportOptions { at: Some(std::time::Duration::from_secs(5)), ..options((120, 40)) };
    let d = export::draw(Recording::open(&file).unwrap(), &file, None, None, &at, 0).unwrap();
    let svg = d.svg.unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\"") && svg.ends_with("</svg>\n"));
    assert!(svg.contains(">0:05/1:15</tspan>"), "{svg}");
}

#[test]
fn hostile_names_reach_no_file_unescaped() {
    let dir = tempfile::tempdir().unwrap();
    let html_attack = "</script><img src=x onerror=alert(1)>&amp;<!--";
    let suffixes = crate::hostile_names::SUFFIXES.iter().copied().chain([html_attack]);
    for (i, suffix) in suffixes.enumerate() {
        let file = crate::hostile_names::recording(dir.path(), &format!("h{i}.rec"), suffix, "20");
        for keys in ["", "f", "w", "3"] {
            let opts = ExportOptions { keys: keys.into(), ..options((160, 48)) };
            let d = export::draw(Recording::open(&file).unwrap(), &file, None, None, &opts, 0).unwrap();
            // The terminal gets ratatui's own CSI sequences, never a name's control characters.
            for (_, data) in parse_cast(&d.cast).1 {
                for (at, c) in data.char_indices() {
                    let ok = match c {
                        '\x1b' => data[at + 1..].starts_with('['),
                        c => {
                            !c.is_control() && !matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
                        }
                    };
                    assert!(ok, "suffix {suffix:?} keys {keys:?}: U+{:04X} in {data:?}", c as u32);
                }
            }
            let svg = d.svg.unwrap();
            assert!(!svg.contains("<img") && !svg.contains("<script") && !svg.contains("<!--"), "{svg}");
            assert!(!svg.chars().any(|c| c.is_control() && c != '\n'), "suffix {suffix:?}");
            let page = export::html::page(&d.cast, 160, 48, &format!("x{suffix}"));
            assert_eq!(page.matches("</script").count(), 2, "the player's script and ours");
            assert!(!page.contains("<img") && page.matches("<!--").count() == 1, "only our licence comment");
        }
    }
}

/// One line on stderr, exit code 2, and the directory as it was.
fn assert_refused(dir: &Path, args: &[&str], says: &str) {
    let before: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    let out = ioscope(dir, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains(says), "{args:?}: {err}");
    let mut after: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    after.sort();
    let mut before = before;
    before.sort();
    assert_eq!(before, after, "{args:?} wrote a file");
}

#[test]
fn bad_input_is_one_line_exit_2_and_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let rec = demo("readahead-waste.rec");
    let rec = rec.to_str().unwrap();
    std::fs::write(d.join("notes.txt"), "not a recording\n").unwrap();
    std::fs::write(d.join("old.cast"), "keep me").unwrap();
    assert_refused(d, &["replay", "notes.txt", "--asciicast", "a.cast"], "not an ioscope recording");
    assert_refused(
        d,
        &["replay", rec, "--asciicast", "a.cast", "--keys", "Z"],
        "key 'Z' (key 1 of --keys) does nothing",
    );
    assert_refused(
        d,
        &["replay", rec, "--asciicast", "a.cast", "--keys", "w<Insert>"],
        "unknown key '<Insert>'",
    );
    assert_refused(d, &["replay", rec, "--asciicast", "a.cast", "--keys", "q"], "quits the replay");
    assert_refused(
        d,
        &["replay", rec, "--svg", "a.svg", "--at", "10m"],
        "--at 10:00 is after the recording's end",
    );
    assert_refused(
        d,
        &["replay", rec, "--svg", "a.svg", "--from", "5", "--at", "2"],
        "--at 0:02 is outside the exported frames",
    );
    assert_refused(d, &["replay", rec, "--asciicast", "a.cast", "--size", "10x3"], "the size must be");
    assert_refused(d, &["replay", rec, "--asciicast", "a.cast", "--speed", "3"], "is not a replay speed");
    assert_refused(d, &["replay", rec, "--keys", "w"], "need --asciicast, --svg or --html");
    // An existing file without --force, also when it is the second of the files asked for.
    assert_refused(d, &["replay", rec, "--asciicast", "old.cast"], "old.cast already exists");
    assert_refused(
        d,
        &["replay", rec, "--svg", "new.svg", "--asciicast", "old.cast"],
        "old.cast already exists",
    );
    assert_eq!(std::fs::read_to_string(d.join("old.cast")).unwrap(), "keep me");
    let out = ioscope(d, &["replay", rec, "--asciicast", "old.cast", "--force"]);
    assert!(out.status.success());
    assert!(std::fs::read_to_string(d.join("old.cast")).unwrap().starts_with("{\"version\": 2"));
}

/// The oracle: `asciinema cat` of the cast, in a terminal of the cast's size, ends on the screen
/// the replay TUI shows at that size after the same keys at the recording's end.
#[test]
fn asciinema_cat_of_the_cast_ends_on_the_replay_tui_screen() {
    if Command::new("asciinema").arg("--version").output().is_err() {
        common::skip("asciinema_cat", "asciinema is not installed");
        return;
    }
    let file = demo("small-vs-large-writes.rec");
    let n = Recording::open(&file).unwrap().len();
    let dir = tempfile::tempdir().unwrap();
    // Tall enough for every process row: a focused table keeps its first row shown while the
    // selection stays in view (src/ui/table.rs `scroll`), so a table scrolled while the cast played
    // frame by frame may show other rows than the TUI after one jump to the end.
    let size = (100, 50);
    let out = ioscope(
        dir.path(),
        &["replay", file.to_str().unwrap(), "--asciicast", "a.cast", "--size", "100x50", "--keys", "3ss"],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let last = format!("#{n}/{n}");
    let Some(cat) = Tmux::start_sized("export-cat", dir.path(), "asciinema cat a.cast; sleep 60", size)
    else {
        return;
    };
    let cast_screen = cat.wait_for("the cast's end", |s| s.contains(&last));
    let tui_cmd = format!("{} replay {}", bin(), file.display());
    let Some(tui) = Tmux::start_sized("export-tui", dir.path(), &tui_cmd, size) else { return };
    tui.wait_for("the first frame", |s| s.contains("REPLAY"));
    tui.keys(&["3", "s", "s", "End"]);
    let tui_screen = tui.wait_for("the end", |s| s.contains(&last) && s.contains("sort write"));
    assert_eq!(cast_screen, tui_screen);
}

/// The oracle for the page: a headless Chromium (Debian's chromium-headless-shell or chromium)
/// runs the player, which draws the first frame's text.
#[test]
fn a_headless_browser_shows_the_pages_first_frame() {
    let Some(browser) = ["chromium-headless-shell", "chromium"]
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().is_ok_and(|o| o.status.success()))
    else {
        common::skip("html_in_chromium", "no headless Chromium (apt-get install chromium-headless-shell)");
        return;
    };
    let file = demo("dirty-threshold-stall.rec");
    let n = Recording::open(&file).unwrap().len();
    let dir = tempfile::tempdir().unwrap();
    let out = ioscope(dir.path(), &["replay", file.to_str().unwrap(), "--html", "a.html"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let page = dir.path().join("a.html");
    let out = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    // The player's terminal, showing the first frame (the second sample: `#2/N`).
    assert!(dom.contains("ap-term") && dom.contains("REPLAY"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(dom.contains(&format!("#2/{n}")), "the first frame");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("Uncaught"));
}
