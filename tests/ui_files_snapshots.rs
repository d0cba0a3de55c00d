//! Snapshots of the files view (`f`) from tests/fixtures/models/files_box.rs, and the per-file
//! part of `--batch` and `--json`. Review a changed snapshot by reading it; accept with
//! `INSTA_UPDATE=always cargo test --test ui_files_snapshots`.

#[path = "fixtures/models/busy_box.rs"]
mod busy_box;
#[path = "fixtures/models/files_box.rs"]
mod files_box;

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent};
use ioscope::model::Model;
use ioscope::ui::{self, Pane, UiState};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn state() -> UiState {
    UiState::new(Duration::from_secs(1), true)
}

fn press(s: &mut UiState, c: KeyCode) {
    s.handle_key(KeyEvent::from(c));
}

fn screen(model: &Model, state: &UiState, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, model, state)).unwrap();
    t.backend().to_string()
}

#[test]
fn files_view_80x24() {
    let mut s = state();
    press(&mut s, KeyCode::Char('f'));
    assert!(s.files_view);
    insta::assert_snapshot!(screen(&files_box::with_files(), &s, 80, 24));
}

#[test]
fn files_view_160x48() {
    let mut s = state();
    press(&mut s, KeyCode::Char('f'));
    insta::assert_snapshot!(screen(&files_box::with_files(), &s, 160, 48));
}

#[test]
fn files_of_the_device_in_the_detail_view_sorted_by_path_160x48() {
    let m = files_box::with_files();
    let mut s = state();
    s.focus = Pane::Devices;
    let loop0 = ioscope::ui::rows::visible_devices(&m, &s).iter().position(|d| d.name == "loop0").unwrap();
    s.selected_device = loop0;
    press(&mut s, KeyCode::Enter);
    press(&mut s, KeyCode::Char('f'));
    let rows = ioscope::ui::files::visible(&m, &s);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].device, "loop0");
    insta::assert_snapshot!(screen(&m, &s, 160, 48));
    // Esc closes the files view, then the detail.
    press(&mut s, KeyCode::Esc);
    assert!(!s.files_view && s.device_detail);
}

#[test]
fn files_of_the_selected_process_and_filters() {
    let m = files_box::with_files();
    let mut s = state();
    s.focus = Pane::Processes;
    let rows = ioscope::ui::rows::visible_processes(&m, &s);
    s.selected_process = rows.iter().position(|p| p.pid == 2301).unwrap();
    press(&mut s, KeyCode::Char('f'));
    let v = ioscope::ui::files::visible(&m, &s);
    assert_eq!(v.iter().map(|f| f.ino).collect::<Vec<_>>(), vec![524_301]);
    assert_eq!(v[0].name(), "259:0:524301", "no path yet: dev:inode");
    // A filter by path, device or process name, from the whole list.
    let mut s = state();
    press(&mut s, KeyCode::Char('f'));
    for c in "pg_wal".chars() {
        s.filter.push(c);
    }
    assert_eq!(ioscope::ui::files::visible(&m, &s).len(), 1);
    s.filter = "fio".into();
    assert_eq!(ioscope::ui::files::visible(&m, &s)[0].path.as_deref(), Some("/mnt/bench/fio.0.0"));
    s.filter = "loop0".into();
    assert_eq!(ioscope::ui::files::visible(&m, &s).len(), 1);
    // `s` sorts by the next column: read.
    s.filter.clear();
    press(&mut s, KeyCode::Char('s'));
    assert_eq!(ioscope::ui::files::visible(&m, &s)[0].ino, 524_301);
    insta::assert_snapshot!(screen(&m, &s, 80, 24));
}

#[test]
fn batch_text_lists_the_files() {
    let text = ioscope::output::text::format_frame(&files_box::with_files());
    let part = &text[text.find("Files by disk I/O").expect("files table")..];
    insta::assert_snapshot!(part);
}

#[test]
fn json_has_the_documented_file_keys() {
    let v = serde_json::to_value(files_box::with_files()).unwrap();
    let f = &v["files"][0];
    for k in [
        "path",
        "dev",
        "ino",
        "disk_read_bytes",
        "readahead_bytes",
        "dirtied_bytes",
        "writeback_bytes",
        "direct_read_bytes",
        "direct_write_bytes",
        "cached_pct",
        "disk_read_bytes_s",
        "readahead_bytes_s",
        "dirtied_bytes_s",
        "writeback_bytes_s",
        "direct_read_bytes_s",
        "direct_write_bytes_s",
    ] {
        assert!(f.get(k).is_some(), "files[].{k} missing: {f}");
    }
    // fio's file first: 65 MiB of direct I/O in the second.
    assert_eq!(f["path"], "/mnt/bench/fio.0.0");
    assert_eq!(f["direct_write_bytes"], 61 << 20);
    assert_eq!(f["dev"], "7:0");
}
