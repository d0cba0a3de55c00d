//! The shared table (src/ui/table.rs) in every view, with long names: a 255-byte path, a 15-byte
//! comm, a kworker. Each table keeps its key column at 80x24 and 120x40, says how many rows are
//! hidden ("▲ N more", "▼ N more"), and keeps the selected row in view.
//! Accept changed snapshots with `INSTA_UPDATE=always cargo test --test offline ui_tables::`.

use crate::common;

use crossterm::event::{KeyCode, KeyEvent};
use ioscope::model::syncs::SyncModel;
use ioscope::model::{DeviceModel, Model, ProcessModel};
use ioscope::sample::BpfProgramStatus;
use ioscope::ui::{Body, Overlay, Pane, UiState};

/// A path of 255 bytes ending in the file's name.
fn long_path() -> String {
    let name = "/wal-000000000000000000042.log";
    let mut dir = String::from("/srv");
    while dir.len() + name.len() + 12 <= 255 {
        dir.push_str("/nested-dir");
    }
    let mut p = format!("{dir}{name}");
    while p.len() < 255 {
        p.insert(4, 'x');
    }
    assert_eq!(p.len(), 255);
    p
}

fn model() -> Model {
    let mut m = Model { interval_s: 1.0, ..Default::default() };
    m.bpf.enabled = true;
    let comms = ["abcdefghijklmno", "kworker/u8:0-kvfree_rcu_reclaim", "postgres", "fio"];
    m.processes = (0..40)
        .map(|i| ProcessModel {
            pid: 1000 + i,
            comm: comms[i as usize % comms.len()].into(),
            read_bytes_s: (40 - i) as f64 * 1e6,
            write_bytes_s: i as f64 * 1e5,
            rchar_s: 1e6,
            wchar_s: 1e5,
            io_readable: true,
            user: Some(["postgres", "root", "a-very-long-user-name"][i as usize % 3].into()),
            cmdline: Some(match i % 4 {
                0 => format!("/usr/bin/worker --id={i} \x1b]0;pwned\x07").into(),
                1 => "".into(),
                2 => "postgres: checkpointer".into(),
                _ => format!("fio --name=job{i} --rw=read").into(),
            }),
            ..Default::default()
        })
        .collect();
    m.devices = (0..12)
        .map(|i| DeviceModel {
            name: if i == 0 { "nvme0n1".into() } else { format!("loop{i}") },
            is_virtual: i > 0,
            r_s: 100.0 * i as f64,
            rkb_s: 400.0 * i as f64,
            util: 5.0 * i as f64,
            ..Default::default()
        })
        .collect();
    m.syncs = (0..20)
        .map(|i| SyncModel {
            pid: 2000 + i,
            comm: if i % 2 == 0 { "abcdefghijklmno".into() } else { "postgres".into() },
            syscall: "fdatasync".into(),
            path: Some(if i == 0 { long_path() } else { format!("/var/lib/db/file{i}") }),
            dev: "8:1".into(),
            ino: i as u64,
            calls: 10 + i as u64,
            calls_interval: 2,
            calls_s: 2.0,
            interval_mean_s: 0.004,
            interval_p99_s: 0.009,
            mean_s: 0.003,
            max_s: 0.2,
            ..Default::default()
        })
        .collect();
    m.bpf.programs = std::sync::Arc::new(
        (0..50)
            .map(|i| BpfProgramStatus {
                program: format!("prog_{i:02}_block_rq_issue"),
                tracepoint: "block:block_rq_issue".into(),
                attached: true,
                mechanism: "tracepoint".into(),
                ..Default::default()
            })
            .collect(),
    );
    m
}

fn state() -> UiState {
    common::ui::state(&[])
}

fn press(s: &mut UiState, m: &Model, code: KeyCode) {
    s.clamp_selection(m);
    s.handle_key(KeyEvent::from(code));
    s.clamp_selection(m);
}

/// The process pane focused, its selection walked down past the rows in view: the selected row
/// stays in view with "▲ N more" above it; the devices pane says what it hides below.
#[test]
fn stack_with_long_names_and_the_selection_far_down() {
    let m = model();
    for (w, h) in [(80, 24), (120, 40)] {
        let mut s = state();
        press(&mut s, &m, KeyCode::Char('3'));
        for _ in 0..20 {
            press(&mut s, &m, KeyCode::Down);
        }
        let text = common::ui::screen(&m, &s, w, h);
        assert!(text.contains("▲"), "{w}x{h}: rows above are announced\n{text}");
        assert!(text.contains("▼"), "{w}x{h}: rows below are announced\n{text}");
        assert!(text.contains("abcdefghijklmno"), "{w}x{h}: the 15-byte comm is whole\n{text}");
        assert!(text.contains("1020"), "{w}x{h}: the selected row (pid 1020) is in view\n{text}");
        insta::assert_snapshot!(format!("stack_long_names_{w}x{h}"), text);
    }
}

/// USER is a column of its own, cut at 9 and dropped first at 80; `L` shows the command lines
/// (escaped: a terminal sequence in one is shown as text), a kernel thread keeps its comm.
#[test]
fn user_column_and_command_lines() {
    let mut m = model();
    m.processes[0].cmdline = Some("evil \u{1b}]0;pwned\u{7} \u{202e}gnp.exe".into());
    for (w, h) in [(80, 24), (120, 40), (200, 60)] {
        let mut s = state();
        press(&mut s, &m, KeyCode::Char('3'));
        let comm = common::ui::screen(&m, &s, w, h);
        assert!(comm.contains("abcdefghijklmno") && !comm.contains("checkpointer"), "{w}x{h}\n{comm}");
        assert_eq!(comm.contains("USER"), w > 80, "{w}x{h}: USER goes first when narrow\n{comm}");
        if w > 80 {
            assert!(comm.contains("a-very-l…") && !comm.contains("a-very-lo"), "{w}x{h}: cut at 9\n{comm}");
        }
        press(&mut s, &m, KeyCode::Char('L'));
        let cmd = common::ui::screen(&m, &s, w, h);
        assert!(cmd.contains("command") && cmd.contains("postgres: checkpointer"), "{w}x{h}\n{cmd}");
        assert!(cmd.contains("evil \\x1b]0;pwned"), "{w}x{h}: the escape is shown as text\n{cmd}");
        assert!(!cmd.contains('\u{1b}') && !cmd.contains('\u{202e}'), "{w}x{h}");
        assert!(cmd.contains("kworker/u8"), "{w}x{h}: a kernel thread (empty cmdline) keeps its comm\n{cmd}");
        insta::assert_snapshot!(format!("processes_command_lines_{w}x{h}"), cmd);
        press(&mut s, &m, KeyCode::Char('L'));
        assert_eq!(common::ui::screen(&m, &s, w, h), comm, "L again: back to the comm");
    }
}

/// The sync view with a 255-byte path: FILE is kept, cut from the left, its file name shown.
#[test]
fn syncs_keep_the_file_name() {
    let m = model();
    for (w, h) in [(80, 24), (120, 40)] {
        let mut s = state();
        s.open(Body::Syncs);
        let text = common::ui::screen(&m, &s, w, h);
        assert!(text.contains("000042.log"), "{w}x{h}: the file's name\n{text}");
        assert!(text.contains("FILE"), "{w}x{h}: the key column\n{text}");
        insta::assert_snapshot!(format!("syncs_long_path_{w}x{h}"), text);
    }
}

/// `→` scrolls the columns a narrow table hides; the key column stays.
#[test]
fn right_arrow_shows_the_hidden_columns_and_keeps_the_key_column() {
    let m = model();
    let mut s = state();
    s.open(Body::Syncs);
    let before = common::ui::screen(&m, &s, 80, 24);
    assert!(!before.contains("OTHERS THR"), "{before}");
    for _ in 0..12 {
        press(&mut s, &m, KeyCode::Right);
        common::ui::screen(&m, &s, 80, 24);
    }
    let after = common::ui::screen(&m, &s, 80, 24);
    assert!(after.contains("OTHERS THR"), "the last column is reached\n{after}");
    assert!(after.contains("FILE") && after.contains("000042.log"), "the key column stays\n{after}");
}

/// Probe health with 50 programs scrolls: the selection reaches the last program.
#[test]
fn probe_health_scrolls() {
    let m = model();
    for (w, h) in [(80, 24), (120, 40)] {
        let mut s = state();
        press(&mut s, &m, KeyCode::Char('e'));
        assert_eq!(s.body, Body::ProbeHealth);
        let top = common::ui::screen(&m, &s, w, h);
        assert!(top.contains("▼") && !top.contains("prog_49"), "{w}x{h}\n{top}");
        press(&mut s, &m, KeyCode::End);
        let end = common::ui::screen(&m, &s, w, h);
        assert!(end.contains("prog_49") && end.contains("▲"), "{w}x{h}\n{end}");
        insta::assert_snapshot!(format!("probe_health_end_{w}x{h}"), end);
    }
}

/// The help scrolls at 80x24: its last line is reached with End, and it says what is above.
#[test]
fn help_scrolls() {
    let m = model();
    let mut s = state();
    s.overlay = Some(Overlay::Help);
    let top = common::ui::screen(&m, &s, 80, 24);
    assert!(top.contains("▼"), "{top}");
    s.handle_key(KeyEvent::from(KeyCode::End));
    let end = common::ui::screen(&m, &s, 80, 24);
    assert!(end.contains("▲") && end.contains("eBPF: on"), "{end}");
    insta::assert_snapshot!("help_end_80x24", end);
}

/// The devices pane sorts with `s`/`r` when it has the focus, and its height does not depend on
/// how many devices there are (the process pane's title stays on its row).
#[test]
fn devices_sort_and_the_layout_does_not_move() {
    let mut m = model();
    let mut s = state();
    press(&mut s, &m, KeyCode::Char('2'));
    press(&mut s, &m, KeyCode::Char('s'));
    assert_eq!(s.views.processes.sort, Default::default(), "s sorted the devices, not the processes");
    let text = common::ui::screen(&m, &s, 120, 40);
    assert!(text.contains("sort %util ▼"), "{text}");
    let row_of = |text: &str| text.lines().position(|l| l.contains("3 Processes")).expect("process pane");
    let with_12 = row_of(&text);
    m.devices.truncate(2);
    assert_eq!(row_of(&common::ui::screen(&m, &s, 120, 40)), with_12, "fewer devices: same layout");
    let _ = Pane::Devices;
}

/// Consecutive frames keep the panes where they were: the first (rates pending, every figure 0),
/// the next (every memory figure and rate at its widest: `15.6G`, `1023.9M/s`), then one with an
/// idle loop device more. The process pane's title stays on its row at every size.
#[test]
fn the_layout_does_not_jump_between_frames() {
    let first = Model { interval_s: 0.0, ..model() };
    let mut next = model();
    let mem = &mut next.memory;
    for v in [
        &mut mem.total,
        &mut mem.free,
        &mut mem.available,
        &mut mem.buffers,
        &mut mem.cached,
        &mut mem.shmem,
        &mut mem.dirty,
        &mut mem.writeback,
        &mut mem.active_file,
        &mut mem.inactive_file,
        &mut mem.mapped,
        &mut mem.slab_reclaimable,
    ] {
        *v = 16_750_372_454; // 15.6G
    }
    let r = &mut mem.rates;
    for v in [&mut r.pgpgin_kb_s, &mut r.pgpgout_kb_s] {
        *v = 1_048_473.0; // 1023.9M/s
    }
    for v in [&mut r.majfault_s, &mut r.refault_file_s, &mut r.scan_s, &mut r.steal_s] {
        *v = 999_000.0; // 999.0k/s
    }
    (r.dirtied_pages_s, r.written_pages_s) = (999_000.0, 999_000.0);
    let mut more = next.clone();
    more.devices.push(DeviceModel { name: "loop13".into(), is_virtual: true, ..Default::default() });
    let row_of = |m: &Model, s: &UiState, w, h| {
        let text = common::ui::screen(m, s, w, h);
        let row = text.lines().position(|l| l.contains("Processes")).unwrap_or_else(|| panic!("{text}"));
        (row, text.lines().nth(row + 1).unwrap_or_default().to_string())
    };
    for (w, h) in [(60, 15), (80, 24), (120, 40), (200, 60)] {
        for idle in [false, true] {
            let mut s = state();
            if idle {
                press(&mut s, &next, KeyCode::Char('i'));
            }
            let (row, _) = row_of(&first, &s, w, h);
            let (row_next, titles) = row_of(&next, &s, w, h);
            assert_eq!(row_next, row, "{w}x{h}: the second frame moved the process pane");
            let (row_more, titles_more) = row_of(&more, &s, w, h);
            assert_eq!(row_more, row, "{w}x{h} (i: {idle}): an idle device moved the process pane");
            assert_eq!(titles_more, titles, "{w}x{h}: the same columns");
        }
    }
}
