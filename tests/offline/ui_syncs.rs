//! The sync-call view (`y`) and the memory pane's line for a long call, drawn from a model made
//! by hand: the running call first with its age, the path, the figures; and what the view says
//! when the probes are missing.

use crate::common;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ioscope::model::panes::PaneStatus;
use ioscope::model::syncs::SyncModel;
use ioscope::model::Model;
use ioscope::ui::{Body, UiState};

fn screen(model: &Model, state: &UiState) -> String {
    common::ui::screen(model, state, 140, 30)
}

fn model() -> Model {
    let mut m = Model { interval_s: 1.0, ..Default::default() };
    m.bpf.enabled = true;
    m.memory.dirty = 1_900 << 20;
    m.memory.writeback = 1_100 << 20;
    m.syncs = vec![
        SyncModel {
            pid: 4123,
            comm: "java".into(),
            syscall: "fsync".into(),
            path: Some("/data/big.zip".into()),
            dev: "8:1".into(),
            ino: 12,
            running: 1,
            running_s: 4.2,
            written_bytes: 800 << 20,
            running_written_bytes: 800 << 20,
            others_throttled_s: 0.7,
            ..Default::default()
        },
        SyncModel {
            pid: 977,
            comm: "mysqld".into(),
            syscall: "fdatasync".into(),
            path: Some("/var/lib/mysql/ib_logfile0".into()),
            dev: "8:1".into(),
            ino: 40,
            calls: 310,
            total_s: 9.3,
            mean_s: 0.03,
            p50_s: 0.002,
            p99_s: 1.8,
            max_s: 2.4,
            written_bytes: 5 << 20,
            calls_interval: 12,
            calls_s: 12.0,
            interval_mean_s: 0.0063,
            interval_p99_s: 0.0091,
            ..Default::default()
        },
        SyncModel {
            pid: 5120,
            comm: "postgres".into(),
            syscall: "fdatasync".into(),
            path: Some("/var/lib/postgresql/15/main/pg_wal/000000010000000000000042".into()),
            dev: "8:1".into(),
            ino: 77,
            calls: 547,
            total_s: 0.66,
            mean_s: 0.0012,
            p99_s: 0.004,
            max_s: 0.009,
            running: 1,
            running_s: 0.3,
            ..Default::default()
        },
        SyncModel {
            pid: 6380,
            comm: "bio_aof_fsync".into(),
            syscall: "fdatasync".into(),
            path: Some("/srv/redis/appendonlydir/appendonly.aof.3.incr.aof (deleted)".into()),
            dev: "8:1".into(),
            ino: 91,
            calls: 20,
            mean_s: 0.002,
            max_s: 0.004,
            ..Default::default()
        },
    ];
    m
}

#[test]
fn the_view_lists_the_running_call_first_and_the_memory_pane_names_it() {
    let m = model();
    let mut state = UiState::new(Duration::from_secs(1), false);
    let main = screen(&m, &state);
    assert!(
        main.contains("⚠ fsync /data/big.zip by java (4123): 4.2 s so far, 1.9G dirty + 1.1G writeback"),
        "{main}"
    );
    state.handle_key(KeyEvent::new(KeyCode::Char('y'), KeyModifiers::NONE));
    assert!(state.body == Body::Syncs);
    let view = screen(&m, &state);
    let lines: Vec<&str> = view.lines().collect();
    let java = lines.iter().position(|l| l.contains("/data/big.zip")).expect("the running call's row");
    let mysql = lines.iter().position(|l| l.contains("ib_logfile0")).expect("the completed calls' row");
    assert!(java < mysql, "{view}");
    // OTHERS THR, the least important column, is left to wider screens (below).
    for cell in ["4123", "java", "fsync", "4.2 s", "800M"] {
        assert!(lines[java].contains(cell), "{cell} missing in {}", lines[java]);
    }
    for cell in ["310", "30 ms", "2.4 s", "fdatasync", "12.0", "6 ms", "9 ms"] {
        assert!(lines[mysql].contains(cell), "{cell} missing in {}", lines[mysql]);
    }
    // A running call that has reported no writeback yet: not 0.
    let pg = lines.iter().find(|l| l.contains("5120")).expect("the postgres row");
    assert!(pg.contains("—") && pg.contains("000000010000000000000042"), "{pg}");
    assert!(view.contains(".3.incr.aof (deleted)"), "{view}");
    // At 80×24 the file column keeps the file name and cuts the start of the path.
    let small = common::ui::screen(&m, &state, 80, 24);
    assert!(!small.contains("pg_wal/00000001000000 "), "{small}");
    insta::assert_snapshot!("syncs_view_80x24", small);
    let wide = common::ui::screen(&m, &state, 200, 12);
    assert!(wide.lines().any(|l| l.contains("4123") && l.contains("700 ms")), "{wide}");
    assert!(wide.lines().any(|l| l.contains("977") && l.contains("1.8 s")), "{wide}");
    assert!(
        wide.contains("…/pg_wal/000000010000000000000042")
            || wide.contains("/var/lib/postgresql/15/main/pg_wal/000000010000000000000042"),
        "{wide}"
    );
    state.handle_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    assert!(state.body != Body::Syncs);
}

#[test]
fn without_the_probes_the_view_says_what_is_missing() {
    let mut m = Model::default();
    m.bpf.enabled = true;
    m.bpf.panes = vec![PaneStatus {
        pane: "syncs",
        title: "sync calls (fsync and friends)",
        live: false,
        missing: vec!["syscalls:sys_enter_fsync".into()],
        reason: Some("needs tracepoint syscalls:sys_enter_fsync".into()),
        ..Default::default()
    }]
    .into();
    let mut state = UiState::new(Duration::from_secs(1), false);
    state.open(Body::Syncs);
    let view = screen(&m, &state);
    assert!(view.contains("needs syscalls:sys_enter_fsync"), "{view}");
    m.bpf = Default::default();
    let off = screen(&m, &state);
    assert!(off.contains("eBPF is off"), "{off}");
}
