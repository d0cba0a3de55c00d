//! Snapshots of the files view (`f`) from tests/fixtures/models/files_box.rs, and the per-file
//! part of `--batch` and `--json`. Review a changed snapshot by reading it; accept with
//! `INSTA_UPDATE=always cargo test --test offline ui_files_snapshots::`.

use crate::block_box;
use crate::common;
use crate::files_box;
use common::ui::{press, screen};

use crossterm::event::KeyCode;
use ioscope::ui::{Body, Pane, UiState};

fn state() -> UiState {
    common::ui::state(&[])
}

#[test]
fn files_view_80x24() {
    let mut s = state();
    press(&mut s, KeyCode::Char('f'));
    assert!(s.body == Body::Files);
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
    s.views.stack.focus = Pane::Devices;
    let loop0 = s.views.devices.visible(&m).iter().position(|d| d.name == "loop0").unwrap();
    s.views.devices.selection.select_index(loop0);
    press(&mut s, KeyCode::Enter);
    press(&mut s, KeyCode::Char('f'));
    let rows = s.views.files.visible(&s.context(&m));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].device, "loop0");
    insta::assert_snapshot!(screen(&m, &s, 160, 48));
    // Esc closes the files view, then the detail.
    press(&mut s, KeyCode::Esc);
    assert!(s.body != Body::Files && s.body == Body::DeviceDetail);
}

#[test]
fn files_of_the_selected_process_and_filters() {
    let m = files_box::with_files();
    let mut s = state();
    s.views.stack.focus = Pane::Processes;
    let rows = s.views.processes.visible(&s.context(&m));
    s.views.processes.selection.select_index(rows.iter().position(|p| p.pid == 2301).unwrap());
    press(&mut s, KeyCode::Char('f'));
    let v = s.views.files.visible(&s.context(&m));
    assert_eq!(v.iter().map(|f| f.ino).collect::<Vec<_>>(), vec![524_301]);
    assert_eq!(v[0].name(), "259:0:524301", "no path yet: dev:inode");
    // A filter by path, device or process name, from the whole list.
    let mut s = state();
    press(&mut s, KeyCode::Char('f'));
    s.filter = "pg_wal".into();
    assert_eq!(s.views.files.visible(&s.context(&m)).len(), 1);
    s.filter = "fio".into();
    assert_eq!(s.views.files.visible(&s.context(&m))[0].path.as_deref(), Some("/mnt/bench/fio.0.0"));
    s.filter = "loop0".into();
    assert_eq!(s.views.files.visible(&s.context(&m)).len(), 1);
    // `s` sorts by the next column: read.
    s.filter.clear();
    press(&mut s, KeyCode::Char('s'));
    assert_eq!(s.views.files.visible(&s.context(&m))[0].ino, 524_301);
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
        "block_read_bytes",
        "block_write_bytes",
        "block_read_bytes_s",
        "block_write_bytes_s",
        "block_disk",
        "label",
    ] {
        assert!(f.get(k).is_some(), "files[].{k} missing: {f}");
    }
    for k in ["sent", "not_sent", "sampled_pct", "rate_limit_s", "mapped_files", "extents"] {
        assert!(v["block_files"].get(k).is_some(), "block_files.{k} missing: {}", v["block_files"]);
    }
    // fio's file first: 65 MiB of direct I/O in the second.
    assert_eq!(f["path"], "/mnt/bench/fio.0.0");
    assert_eq!(f["direct_write_bytes"], 61 << 20);
    assert_eq!(f["dev"], "7:0");
}

/// Block requests of vda mapped to files of its partition vda1 (254:1) and to labels, in two
/// samples one second apart; none of the files is in the per-file counters' list.
fn vda_block_samples() -> (ioscope::sample::Sample, ioscope::sample::Sample) {
    use ioscope::sample::{BlockFilesSample, BlockTargetCounters, Sample};
    let t = |ino: u64, path: Option<&str>, label: Option<&str>, r: u64, w: u64| BlockTargetCounters {
        major: 254,
        minor: 0,
        disk: "vda".into(),
        fs_major: if label.is_some() { 0 } else { 254 },
        fs_minor: if label.is_some() { 0 } else { 1 },
        ino,
        path: path.map(Into::into),
        label: label.map(Into::into),
        read_bytes: r,
        write_bytes: w,
        ..Default::default()
    };
    let rows = |k: u64| {
        vec![
            t(1_311, Some("/var/lib/mysql/ibdata1"), None, k * (3 << 20), k * (9 << 20)),
            t(1_400, Some("/var/lib/mysql/ib_logfile0"), None, 0, k * (2 << 20)),
            t(88, Some("/usr/bin/mysqld"), None, k * (512 << 10), 0),
            t(0, None, Some("journal"), 0, k * (1 << 20)),
            t(0, None, Some("metadata"), k * (256 << 10), k * (128 << 10)),
            t(0, None, Some("unknown"), 0, k * (64 << 10)),
            t(2_000, Some("/var/log/syslog"), None, 0, k * (16 << 10)),
        ]
    };
    let mk = |mono_ns: u64, k: u64| {
        let mut s = Sample { mono_ns, page_size: 4096, ..Default::default() };
        s.bpf.block_files = Some(BlockFilesSample {
            targets: rows(k),
            emitted: 500 * k,
            rate_dropped: 100 * k,
            rate_limit_s: 4000,
            ..Default::default()
        });
        s
    };
    (mk(0, 1), mk(1_000_000_000, 2))
}

#[test]
fn block_requests_become_file_and_label_rows() {
    let (a, b) = vda_block_samples();
    let files = ioscope::model::files::compute(Some(&a), &b, 1.0);
    let names: Vec<String> = files.iter().map(|f| f.name()).collect();
    assert_eq!(
        names,
        [
            "/var/lib/mysql/ibdata1",
            "/var/lib/mysql/ib_logfile0",
            "[vda journal]",
            "/usr/bin/mysqld",
            "[vda metadata]",
            "[vda unknown]",
            "/var/log/syslog"
        ]
    );
    let ib = &files[0];
    assert_eq!(
        (ib.block_read_bytes, ib.block_write_bytes, ib.block_write_bytes_s),
        (3 << 20, 9 << 20, 9_437_184.0)
    );
    assert_eq!(
        (ib.dev.as_str(), ib.ino, ib.block_disk.as_deref(), ib.disk_bytes),
        ("254:1", 1_311, Some("vda"), 0)
    );
    let j = &files[2];
    assert_eq!((j.dev.as_str(), j.ino, j.path.as_deref(), j.device.as_str()), ("254:0", 0, None, "vda"));
    // 500 sent and 100 over the rate in the interval.
    let bf = ioscope::model::files::block_files(Some(&a), &b).unwrap();
    assert_eq!((bf.sent, bf.not_sent, bf.sampled_pct.map(|p| (p * 10.0).round())), (500, 100, Some(833.0)));
}

#[test]
fn device_detail_lists_the_files_its_requests_were_for_160x48() {
    let (a, b) = vda_block_samples();
    let mut m = block_box::busy_with_block();
    m.files = ioscope::model::files::compute(Some(&a), &b, 1.0);
    m.block_files = ioscope::model::files::block_files(Some(&a), &b);
    let mut s = state();
    s.views.stack.focus = Pane::Devices;
    let vda = s.views.devices.visible(&m).iter().position(|d| d.name == "vda").unwrap();
    s.views.devices.selection.select_index(vda);
    press(&mut s, KeyCode::Enter);
    let top = ioscope::ui::device_detail::top_files(&m, "vda");
    assert_eq!(top.len(), 5, "the five with the most bytes");
    assert_eq!(top[0].name(), "/var/lib/mysql/ibdata1");
    insta::assert_snapshot!(screen(&m, &s, 160, 48));
}

#[test]
fn probe_health_counts_the_requests_not_sent_for_mapping_160x48() {
    let (mut prev, mut cur) = block_box::samples();
    let ring = |sent: u64, rate: u64, full: u64| ioscope::sample::BlockFilesSample {
        emitted: sent,
        rate_dropped: rate,
        ring_dropped: full,
        rate_limit_s: 4000,
        ..Default::default()
    };
    prev.bpf.block_files = Some(ring(10_000, 2_000, 0));
    cur.bpf.block_files = Some(ring(14_000, 52_000, 12));
    let mut m = block_box::busy_with_block();
    m.bpf.block_health = ioscope::model::block_health::compute(Some(&prev), &cur, 1.0);
    let lost = &m.bpf.block_health.as_ref().unwrap().lost;
    let rate = lost.iter().find(|l| l.what == "requests not mapped: over the rate limit").unwrap();
    assert_eq!((rate.interval, rate.total), (50_000, 52_000));
    let mut s = state();
    s.open(Body::ProbeHealth);
    insta::assert_snapshot!(screen(&m, &s, 160, 48));
}
