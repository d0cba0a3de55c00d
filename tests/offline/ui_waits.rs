//! The waits view (`W`) drawn from a model made by hand: processes by time blocked, the busiest
//! thread's % of the interval, the top cause and its share, the causes' seconds, the threads under
//! a process; and what the view says without the probes.

use crate::common;
use std::collections::BTreeMap;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ioscope::model::iowait::{IowaitModel, IowaitProcessModel, IowaitThreadModel};
use ioscope::model::Model;
use ioscope::ui::{Body, UiState};
use ioscope_common::iowait::CAUSE_NAMES;

/// Seconds per cause, every cause present as the model gives them.
fn causes(of: &[(&'static str, f64)]) -> BTreeMap<&'static str, f64> {
    let mut m: BTreeMap<&'static str, f64> = CAUSE_NAMES.iter().map(|c| (*c, 0.0)).collect();
    for (c, s) in of {
        m.insert(c, *s);
    }
    m
}

fn thread(tid: u32, comm: &str, interval_s: f64, of: &[(&'static str, f64)]) -> IowaitThreadModel {
    let by_cause_s = causes(of);
    let wait_s: f64 = by_cause_s.values().sum();
    IowaitThreadModel { tid, comm: comm.into(), wait_pct: 100.0 * wait_s / interval_s, wait_s, by_cause_s }
}

/// A process from its threads, as src/model/iowait.rs sums them.
fn process(pid: u32, comm: &str, total_s: f64, threads: Vec<IowaitThreadModel>) -> IowaitProcessModel {
    let mut by_cause_s = causes(&[]);
    for t in &threads {
        for (c, s) in &t.by_cause_s {
            *by_cause_s.get_mut(c).unwrap() += s;
        }
    }
    IowaitProcessModel {
        pid,
        comm: comm.into(),
        cgroup_id: 42,
        wait_pct: threads.iter().map(|t| t.wait_pct).fold(0.0, f64::max),
        wait_s: threads.iter().map(|t| t.wait_s).sum(),
        total_by_cause_s: by_cause_s.clone(),
        by_cause_s,
        total_s,
        threads,
    }
}

pub fn model() -> Model {
    let mut m = Model { interval_s: 2.0, ..Default::default() };
    m.bpf.enabled = true;
    let i = m.interval_s;
    m.iowait = Some(IowaitModel {
        processes: vec![
            // A cold cat: one thread, page-cache misses.
            process(
                3100,
                "cat",
                12.4,
                vec![thread(3100, "cat", i, &[("page_cache_read", 1.84), ("other", 0.02)])],
            ),
            // postgres: a backend on its fsync, the WAL writer on the same, a checkpointer throttled.
            process(
                990,
                "postgres",
                48.0,
                vec![
                    thread(990, "postgres", i, &[("sync", 1.1), ("page_cache_read", 0.1)]),
                    thread(1004, "walwriter", i, &[("sync", 0.6)]),
                    thread(1007, "checkpointer", i, &[("dirty_throttle", 0.35), ("sync", 0.05)]),
                ],
            ),
            // fio with direct I/O, its worker thread only.
            process(5200, "fio", 30.0, vec![thread(5203, "fio", i, &[("direct_io", 0.92)])]),
            // Waited before, not in this interval.
            process(77, "jbd2/sda1-8", 3.5, vec![]),
        ],
        cgroups: vec![],
    });
    m
}

fn screen(model: &Model, state: &UiState, w: u16, h: u16) -> String {
    common::ui::screen(model, state, w, h)
}

fn row<'a>(view: &'a str, needle: &str) -> &'a str {
    view.lines().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("no row with {needle} in\n{view}"))
}

#[test]
fn the_view_lists_processes_by_wait_with_their_threads_and_causes() {
    let m = model();
    let mut state = UiState::new(Duration::from_secs(1), false);
    state.handle_key(KeyEvent::new(KeyCode::Char('W'), KeyModifiers::NONE));
    assert!(state.body == Body::Waits);
    state.clamp_selection(&m);
    let wide = screen(&m, &state, 120, 40);
    let lines: Vec<&str> = wide.lines().collect();
    let at = |needle: &str| {
        lines.iter().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle}\n{wide}"))
    };
    // The model's order (the busiest thread first), threads right under their process.
    assert!(at("3100") < at(" 990 ") && at(" 990 ") < at("1004") && at("1004") < at("1007"), "{wide}");
    assert!(at("1007") < at("5200") && at("5200") < at("5203") && at("5203") < at("jbd2"), "{wide}");
    // cat: 1.86 s of 2 s, page-cache reads 99 %.
    let cat = row(&wide, "3100");
    for cell in ["93.0%", "1.9 s", "cache read 99%", "12.4 s"] {
        assert!(cat.contains(cell), "{cell} missing in {cat}");
    }
    // postgres: its busiest thread's % (1.2 s of 2 s), its threads' seconds together, sync first.
    let pg = row(&wide, "postgres");
    for cell in ["60.0%", "2.2 s", "sync 80%", "350 ms", "48.0 s"] {
        assert!(pg.contains(cell), "{cell} missing in {pg}");
    }
    let ckpt = row(&wide, "└ checkpointer");
    for cell in ["20.0%", "400 ms", "throttled 88%"] {
        assert!(ckpt.contains(cell), "{cell} missing in {ckpt}");
    }
    // A single-threaded process has no thread row; a worker that is not the main thread has one.
    assert!(!wide.contains("└ cat"), "{wide}");
    assert!(row(&wide, "└ fio").contains("direct I/O 100%"), "{wide}");
    // Nothing in the interval: dashes, the total since ioscope started.
    let jbd = row(&wide, "jbd2");
    assert!(jbd.contains("3.5 s") && !jbd.contains('%'), "{jbd}");
    insta::assert_snapshot!("waits_view_120x40", wide);
    // At 80x24 the causes' columns give way; the top cause stays.
    let small = screen(&m, &state, 80, 24);
    assert!(row(&small, "postgres").contains("sync 80%"), "{small}");
    insta::assert_snapshot!("waits_view_80x24", small);
    // The filter keeps a process by a thread's name, with its threads.
    let press = |state: &mut UiState, code| state.handle_key(KeyEvent::new(code, KeyModifiers::NONE));
    press(&mut state, KeyCode::Char('/'));
    for c in "walwri".chars() {
        press(&mut state, KeyCode::Char(c));
    }
    press(&mut state, KeyCode::Enter);
    let filtered = screen(&m, &state, 120, 40);
    assert!(filtered.contains("└ walwriter") && !filtered.contains("3100"), "{filtered}");
    state.handle_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    assert!(state.body != Body::Waits);
}

#[test]
fn without_the_probes_the_view_says_so() {
    let mut m = Model::default();
    m.bpf.enabled = true;
    let mut state = UiState::new(Duration::from_secs(1), false);
    state.open(Body::Waits);
    let view = screen(&m, &state, 80, 24);
    assert!(view.contains("probes are not attached") && view.contains("sched:sched_switch"), "{view}");
    m.bpf = Default::default();
    assert!(screen(&m, &state, 80, 24).contains("eBPF is off"));
}
