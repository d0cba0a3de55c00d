//! Recordings kept in the repository, replayed through today's Model and View:
//! - `tests/fixtures/recordings/v1-*.rec`, made by ioscope 0.1.0 (format 1), must stay readable by
//!   every later ioscope: never regenerate it; add a new file when the format changes.
//! - `assets/demo/*.rec`, the stories' demo recordings (assets/demo/README.md).
//!
//! Accept changed snapshots with `INSTA_UPDATE=always cargo test --test offline replay_snapshots::`, then read
//! them.

use std::path::PathBuf;

use ioscope::record::Recording;
use ioscope::replay::player::Player;
use ioscope::replay::{self, tui, ReplayOutput};
use ioscope::ui::{Body, Overlay, UiState};
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
        s.views.stack.focus = ioscope::ui::Pane::Processes;
        s.views.processes.sort.column = ioscope::ui::ProcSort::Write;
    }));
}

/// Every model of a recording with its position (the sample it ends at).
fn models(rel: &str) -> Vec<(usize, ioscope::model::Model)> {
    let mut rec = Recording::open(&path(rel)).unwrap();
    let all: Vec<_> = replay::models(&mut rec, None, None).collect::<anyhow::Result<_>>().unwrap();
    all.into_iter().enumerate().map(|(i, m)| (i + 1, m)).collect()
}

/// The position where `score` is highest (the first one on ties).
fn argmax(models: &[(usize, ioscope::model::Model)], score: impl Fn(&ioscope::model::Model) -> f64) -> usize {
    let mut best = (0, f64::MIN);
    for (pos, m) in models {
        let s = score(m);
        if s > best.1 {
            best = (*pos, s);
        }
    }
    best.0
}

/// The demo's reader: dd (the cold read) or cat (the warm reads), whichever reads most.
fn reader(m: &ioscope::model::Model) -> Option<&ioscope::model::ProcessModel> {
    m.processes
        .iter()
        .filter(|p| &*p.comm == "dd" || &*p.comm == "cat")
        .max_by(|a, b| a.rchar_s.total_cmp(&b.rchar_s))
}

const COLD_WARM: &str = "assets/demo/cold-vs-warm-read.rec";
const SMALL_LARGE: &str = "assets/demo/small-vs-large-writes.rec";
const DIRTY: &str = "assets/demo/dirty-threshold-stall.rec";
const READAHEAD: &str = "assets/demo/readahead-waste.rec";

#[test]
fn demo_cold_vs_warm_read() {
    let all = models(COLD_WARM);
    // Cold: dd's reads come from the disk (read_bytes ≈ rchar). Warm: dd reads the same file
    // from the page cache, many times faster, with no disk reads.
    let cold = argmax(&all, |m| reader(m).filter(|p| &*p.comm == "dd").map_or(0.0, |p| p.read_bytes_s));
    let warm = argmax(&all, |m| reader(m).map_or(0.0, |p| p.cache_estimate_bytes_s));
    let (c, w) = (reader(&all[cold - 1].1).unwrap(), reader(&all[warm - 1].1).unwrap());
    assert!(c.read_bytes_s > 20e6 && c.read_bytes_s > 0.8 * c.rchar_s, "cold: {c:?}");
    assert!(w.rchar_s > 2.0 * c.rchar_s && w.read_bytes_s < 0.05 * w.rchar_s, "warm: {w:?}");
    assert!(warm > cold);
    let filter = |s: &mut UiState| {
        s.views.processes.sort.column = ioscope::ui::ProcSort::Rchar;
        s.views.stack.focus = ioscope::ui::Pane::Processes;
    };
    insta::assert_snapshot!("demo_cold_read_160x48", screen(COLD_WARM, cold, 160, 48, filter));
    insta::assert_snapshot!("demo_warm_read_160x48", screen(COLD_WARM, warm, 160, 48, filter));
    insta::assert_snapshot!("demo_cold_read_80x24", screen(COLD_WARM, cold, 80, 24, filter));
}

#[test]
fn demo_small_vs_large_writes() {
    let all = models(SMALL_LARGE);
    let loop_dev = |m: &ioscope::model::Model| {
        m.devices
            .iter()
            .filter(|d| d.name.starts_with("loop"))
            .max_by(|a, b| a.w_s.total_cmp(&b.w_s))
            .cloned()
    };
    let small = argmax(&all, |m| loop_dev(m).filter(|d| d.wareq_sz < 8.0).map_or(0.0, |d| d.util));
    let large = argmax(&all, |m| loop_dev(m).filter(|d| d.wareq_sz > 256.0).map_or(0.0, |d| d.util));
    let (s, l) = (loop_dev(&all[small - 1].1).unwrap(), loop_dev(&all[large - 1].1).unwrap());
    // Both keep the device busy most of the time; the request size and throughput tell them apart.
    assert!(s.util > 60.0 && l.util > 60.0, "{} {}", s.util, l.util);
    assert!(l.wkb_s > 5.0 * s.wkb_s && l.wareq_sz > 100.0 * s.wareq_sz, "{s:?} {l:?}");
    insta::assert_snapshot!("demo_small_writes_160x48", screen(SMALL_LARGE, small, 160, 48, |_| {}));
    insta::assert_snapshot!("demo_large_writes_160x48", screen(SMALL_LARGE, large, 160, 48, |_| {}));
    insta::assert_snapshot!("demo_small_writes_80x24", screen(SMALL_LARGE, small, 80, 24, |_| {}));
}

#[test]
fn demo_dirty_threshold_stall() {
    let all = models(DIRTY);
    let pos = argmax(&all, |m| {
        if m.memory.dirty_source == "bytes" {
            (m.memory.dirty + m.memory.writeback) as f64
        } else {
            0.0
        }
    });
    let m = &all[pos - 1].1.memory;
    // Past the background threshold: the flushers write and dd is throttled against 256 MiB.
    assert_eq!(m.dirty_threshold, 256 << 20);
    assert!(m.dirty + m.writeback > m.dirty_background_threshold, "{m:?}");
    insta::assert_snapshot!(
        "demo_dirty_stall_160x48",
        screen(DIRTY, pos, 160, 48, |s| s.views.stack.focus = ioscope::ui::Pane::Memory)
    );
    insta::assert_snapshot!("demo_dirty_stall_80x24", screen(DIRTY, pos, 80, 24, |_| {}));
}

/// The demo's database file in the readahead table.
fn table_db(m: &ioscope::model::Model) -> Option<&ioscope::model::readahead::RaFileModel> {
    m.readahead.as_ref()?.files.iter().find(|f| f.path.ends_with("/mnt/table.db")).map(|f| &**f)
}

#[test]
fn demo_readahead_waste() {
    let all = models(READAHEAD);
    let ra = |m: &ioscope::model::Model| table_db(m).map_or(0, |f| f.ra_pages);
    let used = |m: &ioscope::model::Model| table_db(m).map_or(0, |f| f.used_pages);
    let loop0 = |m: &ioscope::model::Model| m.devices.iter().find(|d| d.name == "loop0").cloned().unwrap();
    // Mark 2 starts the touches with MADV_RANDOM: the models before it are the touches without.
    let rec = Recording::open(&path(READAHEAD)).unwrap();
    let second = rec.marks[1].mono_ns;
    let split = rec.mono_ns().iter().position(|&t| t > second).unwrap();
    let (before, after) = (&all[..split - 1], &all[split..]);
    // The moment: one of the drops (POSIX_FADV_DONTNEED, as reclaim), the file's read-around pages
    // evicted unused.
    let pos = argmax(before, |m| table_db(m).map_or(0.0, |f| f.wasted_pages as f64));
    let f = table_db(&all[pos - 1].1).unwrap();
    // Random 4 KiB touches through the mapping with no hint: read-around brings in many times the
    // pages used, and the disk reads mostly readahead.
    let read_ahead: u64 = before.iter().map(|(_, m)| ra(m)).sum();
    let used_before: u64 = before.iter().map(|(_, m)| used(m)).sum();
    assert!(read_ahead > 5 * used_before, "read ahead {read_ahead}, used {used_before}");
    let peak = argmax(before, |m| ra(m) as f64);
    let (d, share) = (loop0(&all[peak - 1].1), all[peak - 1].1.readahead.as_ref().unwrap());
    let dev_ra = share.devices.iter().find(|d| d.name == "loop0").unwrap();
    assert!(dev_ra.ra_read_share_pct.unwrap() > 75.0 && d.rareq_sz > 32.0, "{d:?} {dev_ra:?}");
    // The eviction: most of it was never used, and the view says so.
    assert!(f.wasted_pages > 1000 && f.waste_pct.is_some_and(|w| w > 80.0), "{f:?}");
    let hints = &all[pos - 1].1.readahead.as_ref().unwrap().hints;
    assert!(
        hints.iter().any(|h| h.contains("table.db") && h.contains("lower read_ahead_kb on loop0")),
        "{hints:?}"
    );
    // After mark 2, the same touches with MADV_RANDOM: the disk reads 4 KiB pages, readahead is gone.
    let busiest = argmax(after, |m| loop0(m).r_s);
    let (d, m) = (loop0(&all[busiest - 1].1), &all[busiest - 1].1);
    assert!(d.r_s > 50.0 && d.rareq_sz <= 8.0, "{d:?}");
    let ra_after: u64 = after.iter().map(|(_, m)| ra(m)).sum();
    assert!(ra_after * 10 < read_ahead, "read ahead before {read_ahead}, after {ra_after}");
    assert_eq!(ra(m), 0, "{:?}", table_db(m));
    let view = |s: &mut UiState| s.open(Body::Readahead);
    insta::assert_snapshot!("demo_readahead_waste_160x48", screen(READAHEAD, pos, 160, 48, view));
    insta::assert_snapshot!("demo_readahead_waste_80x24", screen(READAHEAD, pos, 80, 24, view));
    // And while fio reads: read-around pages per second against the pages used.
    insta::assert_snapshot!("demo_readahead_reading_80x24", screen(READAHEAD, peak, 80, 24, view));
}

#[test]
fn baseline_deltas_and_recording_indicator() {
    // Baseline at the small-write phase, now at the large-write phase: every pane shows deltas.
    let all = models(SMALL_LARGE);
    let busiest = |big: bool| {
        argmax(&all, |m| {
            m.devices
                .iter()
                .filter(|d| d.name.starts_with("loop") && (d.wareq_sz > 256.0) == big && d.w_s > 0.0)
                .map(|d| d.util)
                .fold(0.0, f64::max)
        })
    };
    let (small, large) = (busiest(false), busiest(true));
    let baseline = ioscope::ui::baseline::Baseline { model: all[small - 1].1.clone() };
    let with_baseline = |s: &mut UiState| {
        s.baseline = Some(baseline.clone());
        s.recording = Some(ioscope::ui::state::RecordingIndicator {
            path: "ioscope-vm-20261122-130000.rec".into(),
            frames: 42,
            bytes: 31_500,
        });
    };
    let screen_160 = screen(SMALL_LARGE, large, 160, 48, with_baseline);
    assert!(screen_160.contains("Δ vs baseline") && screen_160.contains("● REC"), "{screen_160}");
    insta::assert_snapshot!("baseline_deltas_160x48", screen_160);
    insta::assert_snapshot!("baseline_deltas_80x24", screen(SMALL_LARGE, large, 80, 24, with_baseline));
}

fn compare_screen(w: u16, h: u16, view: &mut ioscope::compare::tui::CompareView) -> String {
    use ioscope::compare::{self, CompareOptions, RangeSpec};
    let spec = |r: &str| RangeSpec::parse(&format!("{}{r}", path(SMALL_LARGE).display())).unwrap();
    let opts = CompareOptions {
        a: spec("@mark:1..mark:2"),
        b: spec("@mark:2.."),
        json: false,
        top: 15,
        text: false,
        color: false,
    };
    let mut c = compare::build(&opts).unwrap();
    // The sources are absolute paths of this checkout: keep the snapshot independent of it.
    c.a.source = "small-vs-large-writes.rec@mark:1..mark:2".into();
    c.b.source = "small-vs-large-writes.rec@mark:2..".into();
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| compare::tui::draw(f, &c, view)).unwrap();
    t.backend().to_string()
}

#[test]
fn compare_small_vs_large_writes_tui() {
    let mut all = ioscope::compare::tui::CompareView::default();
    insta::assert_snapshot!("compare_all_160x48", compare_screen(160, 48, &mut all));
    let mut devices =
        ioscope::compare::tui::CompareView { pane: Some(2), filter: "loop".into(), ..Default::default() };
    let screen = compare_screen(80, 24, &mut devices);
    assert!(screen.contains("wareq-sz") && !screen.contains("Memory"), "{screen}");
    insta::assert_snapshot!("compare_devices_loop_80x24", screen);
}

#[test]
fn replay_help_lists_the_player_keys() {
    let help = screen(V1, 2, 100, 30, |s| s.overlay = Some(Overlay::Help));
    assert!(help.contains("go to a time") && help.contains("play / pause"), "{help}");
    assert!(!help.contains("sampling interval"), "live-only keys are left out: {help}");
    insta::assert_snapshot!("replay_help_100x30", help);
}

#[test]
fn replay_footer_keeps_the_speed_and_jump_keys_at_80_columns() {
    for w in [60, 80, 120] {
        let s = screen(V1, 2, w, 24, |_| {});
        let footer = s.lines().last().unwrap();
        assert!(footer.contains("<> speed") && footer.contains("←→"), "{w}: {footer}");
        assert!(!footer.contains('…'), "{w}: the hint is cut: {footer}");
        if w >= 80 {
            assert!(footer.contains("PgUp/Dn") && footer.contains("t go to"), "{w}: {footer}");
        }
    }
}
