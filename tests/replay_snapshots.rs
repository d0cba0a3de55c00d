//! Recordings kept in the repository, replayed through today's Model and View:
//! - `tests/fixtures/recordings/v1-*.rec`, made by ioscope 0.1.0 (format 1), must stay readable by
//!   every later ioscope: never regenerate it; add a new file when the format changes.
//! - `assets/demo/*.rec`, the stories' demo recordings (README "Recordings").
//!
//! Accept changed snapshots with `INSTA_UPDATE=always cargo test --test replay_snapshots`, then read
//! them.

use std::path::PathBuf;

use ioscope::record::Recording;
use ioscope::replay::player::Player;
use ioscope::replay::{self, tui, ReplayOutput};
use ioscope::ui::UiState;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

const V1: &str = "tests/fixtures/recordings/v1-ioscope-0.1.0.rec";

/// The replay screen at sample `pos` (colours off, so the snapshot is the text a user reads).
fn screen(rel: &str, pos: usize, w: u16, h: u16, tweak: impl FnOnce(&mut UiState)) -> String {
    let mut rec = Recording::open(&path(rel)).unwrap();
    let mut player = Player::new(&rec.mono_ns(), &rec.wall_unix_ms());
    player.pos = pos;
    let mut state = tui::initial_state(&rec, false);
    let gauges = tui::gauges(&mut rec).unwrap();
    state.history = tui::history_at(&gauges, pos);
    tweak(&mut state);
    let model = tui::model_at(&mut rec, pos).unwrap();
    state.clamp_selection(&model);
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| tui::draw(f, &model, &state, &player)).unwrap();
    t.backend().to_string()
}

fn batch(rel: &str) -> String {
    let mut out = Vec::new();
    replay::print(Recording::open(&path(rel)).unwrap(), ReplayOutput::Text, None, None, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn v1_recording_is_still_readable() {
    let mut rec = Recording::open(&path(V1)).unwrap();
    assert_eq!(rec.problem, None);
    assert_eq!(rec.header.format_version, 1);
    assert_eq!(rec.header.ioscope_version, "0.1.0");
    assert_eq!(rec.header.interval_s, 0.5);
    assert!(!rec.header.hostname.is_empty() && !rec.header.kernel.is_empty());
    assert!(rec.header.tuning.contains_key("vm.dirty_ratio"));
    assert!(rec.header.mounts.iter().any(|m| m.target == "/"));
    assert_eq!(rec.len(), 5);
    for i in 0..rec.len() {
        let s = rec.sample(i).unwrap();
        assert!(s.processes.len() > 50, "sample {i}: every process was recorded");
        assert!(s.bpf.status.enabled, "the fixture was recorded with eBPF on");
    }
}

#[test]
fn v1_recording_batch_text() {
    insta::assert_snapshot!(batch(V1));
}

#[test]
fn v1_recording_screen_80x24() {
    insta::assert_snapshot!(screen(V1, 2, 80, 24, |_| {}));
}

#[test]
fn v1_recording_screen_160x48_processes_sorted_by_write() {
    insta::assert_snapshot!(screen(V1, 2, 160, 48, |s| {
        s.focus = ioscope::ui::Pane::Processes;
        s.sort = ioscope::ui::ProcSort::Write;
    }));
}
