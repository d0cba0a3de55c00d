//! The readahead model from hand-built samples (figures computed by hand in the comments), its
//! view (insta snapshots at 80x24 and 160x48, the file detail), its --batch lines, and its JSON
//! keys against src/model/README.md. Accept changed snapshots with
//! `INSTA_UPDATE=always cargo test --test offline readahead_model::`, after reading them.

use crate::common;
use common::ui::screen;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent};
use ioscope::model::readahead::{waste_pct, WindowTrend};
use ioscope::model::{Model, Stream};
use ioscope::sample::readahead::{RaFileSample, RaOthers, RaQuiet, RaRecent, RaTrigger, ReadaheadSample};
use ioscope::sample::{BlockSettings, DiskStat, MemInfo, Sample};
use ioscope::ui::{Body, UiState};

const LOOP0: u32 = 7 << 20;

fn file(ino: u64, path: Option<&str>, ra: u64, used: u64, wasted: u64, window: u32) -> RaFileSample {
    RaFileSample {
        dev: LOOP0,
        ino,
        path: path.map(String::from),
        ra_pages: ra,
        used_pages: used,
        wasted_pages: wasted,
        last_window: window,
        max_window: 32,
        triggers: vec![RaTrigger { pid: 4242, comm: "columnstore".into() }],
        use_hist: vec![0; 24],
        ..Default::default()
    }
}

fn sample(mono_s: u64, sectors_read: u64, files: Vec<RaFileSample>) -> Sample {
    shared_rows(mono_s, sectors_read, files.into_iter().map(Arc::new).collect())
}

/// [`sample`] with its rows as given: a row in two samples is the same allocation, as the
/// collector makes it while a file's counters do not move.
fn shared_rows(mono_s: u64, sectors_read: u64, files: Vec<Arc<RaFileSample>>) -> Sample {
    Sample {
        mono_ns: mono_s * 1_000_000_000,
        page_size: 4096,
        memory: MemInfo { total_bytes: 8 << 30, available_bytes: 400 << 20, ..Default::default() },
        disks: vec![DiskStat {
            major: 7,
            minor: 0,
            name: "loop0".into(),
            sectors_read,
            ..Default::default()
        }],
        block_settings: vec![std::sync::Arc::new(BlockSettings {
            name: "loop0".into(),
            read_ahead_kb: Some(128),
            ..Default::default()
        })],
        bpf: ioscope::sample::BpfSample {
            readahead: Some(ReadaheadSample { files, page_map_capacity: 262_144, ..Default::default() }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A row the collector shares between samples (its counters did not move: pages still pending)
/// models as a fresh copy of it does, and from one Model of a stream to the next it is the same
/// row, kept rather than built again; once the device it is on has another name, it is built again.
#[test]
fn a_steady_row_is_modelled_once_and_as_a_fresh_copy_would_be() {
    let mut lib = file(21, Some("/usr/lib/libdb.so"), 40, 8, 0, 32);
    lib.window_pages = 32;
    let steady = Arc::new(lib.clone());
    let moving = |ra| Arc::new(file(22, Some("/db/table"), ra, ra, 0, 16));
    let s: Vec<Sample> =
        (0..4).map(|i| shared_rows(i, 100 * i, vec![steady.clone(), moving(10 * i + 10)])).collect();
    let rows = |m: &Model| {
        let ra = m.readahead.as_ref().expect("readahead");
        let find = |ino| ra.files.iter().find(|f| f.ino == ino).expect("the file's row").clone();
        (find(21), find(22))
    };
    // One stream of Models, as a live mode makes them: it carries the steady row along.
    let mut stream = Stream::new();
    stream.advance(s[0].clone());
    let (lib1, table1) = rows(&stream.advance(s[1].clone()));
    let (lib2, table2) = rows(&stream.advance(s[2].clone()));
    // The same figures as two separate copies of the row give.
    let fresh = Model::between(&sample(1, 100, vec![lib.clone()]), &sample(2, 200, vec![lib.clone()]));
    let fresh_lib = fresh.readahead.as_ref().unwrap().files.iter().find(|f| f.ino == 21).unwrap().clone();
    assert_eq!(*lib1, *fresh_lib);
    assert_eq!(*lib2, *fresh_lib);
    assert_eq!(lib1.pending_pages, 32, "40 read ahead, 8 used");
    assert_eq!(lib1.ra_pages, 0, "nothing new in the interval");
    assert!(Arc::ptr_eq(&lib1, &lib2), "the steady row is kept from the last Model");
    assert!(!Arc::ptr_eq(&table1, &table2), "a moving row is built each time");
    assert_eq!((table1.ra_pages, table2.ra_pages), (10, 10));
    // Another name for the device (loop0 gone, the number reused): built again, with it.
    let mut renamed = s[3].clone();
    renamed.disks[0].name = "loop9".into();
    let (lib3, _) = rows(&stream.advance(renamed));
    assert!(!Arc::ptr_eq(&lib2, &lib3));
    assert_eq!(lib3.device, "loop9");
}

/// A library read once leaves 40 pages pending: listed while active (40 read ahead), then quiet
/// (no row; its pages in loop0's gauge, as one quiet file), then listed again when 10 of them are
/// used, its counters the growth since it went quiet (`pending_before` 40): 10 used in that
/// interval, nothing read ahead, 30 still pending; loop0's gauge follows it throughout.
#[test]
fn a_quiet_files_pages_stay_in_its_devices_gauge_and_its_row_comes_back_counting_from_there() {
    let lib = |ra, used| file(21, Some("/usr/lib/libdb.so"), ra, used, 0, 32);
    let with_quiet = |mut s: Sample, files: u64, pending_pages: u64| {
        let ra = s.bpf.readahead.as_mut().unwrap();
        ra.quiet = vec![RaQuiet { dev: LOOP0, files, pending_pages }];
        s
    };
    let active = sample(1, 0, vec![lib(40, 0)]);
    let quiet = with_quiet(sample(7, 0, vec![]), 1, 40);
    let mut back_row = lib(0, 10);
    back_row.pending_before = 40;
    let back = sample(8, 0, vec![back_row]);
    let device =
        |m: &Model| m.readahead.as_ref().unwrap().devices.iter().find(|d| d.name == "loop0").cloned();

    let m = Model::between(&sample(0, 0, vec![]), &active);
    assert_eq!(device(&m).map(|d| (d.ra_pages, d.pending_pages, d.quiet_files)), Some((40, 40, 0)));

    let m = Model::between(&active, &quiet);
    let ra = m.readahead.as_ref().unwrap();
    assert!(ra.files.is_empty(), "a quiet file has no row: {:?}", ra.files);
    let d = device(&m).expect("loop0 has pages pending");
    assert_eq!((d.ra_pages, d.used_pages, d.pending_pages, d.quiet_files), (0, 0, 40, 1));
    assert_eq!(d.read_ahead_kb, Some(128));

    let m = Model::between(&quiet, &back);
    let ra = m.readahead.as_ref().unwrap();
    let row = ra.files.iter().find(|f| f.ino == 21).expect("listed again");
    assert_eq!((row.ra_pages, row.used_pages, row.pending_pages), (0, 10, 30));
    let d = device(&m).unwrap();
    assert_eq!((d.used_pages, d.pending_pages, d.quiet_files), (10, 30, 0));
}

/// Two seconds in which the mmap'ed column file read 400 pages ahead (100 used, 300 evicted
/// unused) and the log file was read sequentially (64 pages, all used), while loop0 read
/// 4000 sectors.
fn model() -> Model {
    let mut col0 = file(12, Some("/db/col/c1.bin"), 100, 50, 10, 32);
    col0.windows = 3;
    let mut col1 = file(12, Some("/db/col/c1.bin"), 500, 150, 310, 32);
    col1.windows = 16;
    col1.mmap_miss = 40;
    col1.use_hist[3] = 60;
    col1.use_hist[10] = 40;
    let log0 = file(13, None, 0, 0, 0, 16);
    let mut log1 = file(13, None, 64, 64, 0, 32);
    log1.sync_events = 1;
    log1.async_events = 3;
    log1.windows = 4;
    log1.use_hist[1] = 4;
    let prev = sample(10, 1000, vec![col0, log0]);
    let cur = sample(12, 5000, vec![col1, log1]);
    Model::between(&prev, &cur)
}

#[test]
fn per_file_and_per_device_figures_are_interval_differences() {
    let m = model();
    let ra = m.readahead.as_ref().unwrap();
    let col = &ra.files[0];
    assert_eq!(col.path, "/db/col/c1.bin");
    assert_eq!((col.ra_pages, col.used_pages, col.wasted_pages), (400, 100, 300));
    assert_eq!(col.waste_pct, Some(75.0));
    assert_eq!(col.pending_pages, 500 - 150 - 310);
    assert_eq!(col.windows, 13);
    let log = &ra.files[1];
    assert_eq!(log.path, "7:0:13", "an unresolved file shows as device:inode");
    assert_eq!(log.window_trend, WindowTrend::Growing);
    assert_eq!(log.first_use_hist[1], 4);
    let d = &ra.devices[0];
    assert_eq!((d.name.as_str(), d.read_ahead_kb), ("loop0", Some(128)));
    assert_eq!((d.ra_pages, d.used_pages, d.wasted_pages), (464, 164, 300));
    // 300 / (164 + 300), and 464 pages × 4096 = 1,900,544 bytes of 4000 sectors × 512 = 2,048,000.
    assert!((d.waste_pct.unwrap() - 300.0 * 100.0 / 464.0).abs() < 1e-9);
    assert!((d.ra_read_share_pct.unwrap() - 92.8).abs() < 1e-9);
    assert_eq!((d.ra_pages_s, d.wasted_pages_s), (232.0, 150.0));
}

#[test]
fn high_waste_names_the_remedies_that_fit() {
    let m = model();
    let hints = &m.readahead.as_ref().unwrap().hints;
    assert_eq!(hints.len(), 2, "{hints:?}");
    let h = &hints[0];
    // Under 10 % of memory available (400 MiB of 8 GiB): more memory is named; mmap misses: madvise.
    for want in [
        "/db/col/c1.bin",
        "75%",
        "lower read_ahead_kb on loop0 (now 128 KiB)",
        "madvise(MADV_RANDOM)",
        "columnstore(4242)",
        "more memory",
    ] {
        assert!(h.contains(want), "{want:?} not in {h}");
    }
    // The log file is read sequentially (async readahead) with windows at their 32-page maximum.
    assert_eq!(
        hints[1],
        "7:0:13: sequential reader held to 128 KiB windows; raise read_ahead_kb on loop0 (now 128 KiB)"
    );
}

/// An interval of evictions only: the remedy follows how the file was read before it.
fn evictions_only(windows: u64, sync: u64, asynch: u64) -> Vec<String> {
    let mut before = file(20, Some("/db/f"), 1000, 100, 0, 32);
    (before.windows, before.sync_events, before.async_events) = (windows, sync, asynch);
    let mut after = before.clone();
    after.wasted_pages = 900;
    let m = Model::between(&sample(1, 0, vec![before]), &sample(2, 0, vec![after]));
    m.readahead.unwrap().hints
}

#[test]
fn the_remedy_fits_how_the_file_was_read() {
    // Windows no readahead event opened: the read-around of faults on a mapping.
    let h = evictions_only(40, 0, 3);
    assert!(h[0].contains("madvise(MADV_RANDOM)") && h[0].contains("100%"), "{h:?}");
    // Every window opened by read()'s sync/async readahead.
    let h = evictions_only(40, 10, 30);
    assert!(h[0].contains("posix_fadvise(POSIX_FADV_RANDOM)"), "{h:?}");
}

/// 200 column files each wasting 10 pages in the interval (and using 1): none alone is worth a
/// hint (256 pages), the device's 2,000 wasted pages of 2,200 settled are.
fn column_files(recent: Vec<RaRecent>) -> Vec<String> {
    let before: Vec<_> =
        (0..200).map(|i| file(100 + i, Some(&format!("/db/col/{i}.bin")), 64, 10, 20, 32)).collect();
    let after: Vec<_> = before
        .iter()
        .map(|f| {
            let mut a = f.clone();
            (a.ra_pages, a.used_pages, a.wasted_pages) =
                (f.ra_pages + 11, f.used_pages + 1, f.wasted_pages + 10);
            a.mmap_miss = 3;
            a
        })
        .collect();
    let mut cur = sample(2, 0, after);
    cur.bpf.readahead.as_mut().unwrap().recent = recent;
    let m = Model::between(&sample(1, 0, before), &cur);
    m.readahead.unwrap().hints
}

#[test]
fn waste_spread_over_many_files_of_a_device_is_worth_a_hint() {
    // An older recording (no window): the interval's device sums.
    let h = column_files(Vec::new());
    assert_eq!(h.len(), 1, "{h:?}");
    for want in [
        "loop0: 91% of readahead evicted unused (2000 pages across its files)",
        "lower read_ahead_kb on loop0 (now 128 KiB)",
        "madvise(MADV_RANDOM) on the mappings in columnstore(4242)",
    ] {
        assert!(h[0].contains(want), "{want:?} not in {h:?}");
    }
}

#[test]
fn the_device_hint_weighs_the_last_ten_seconds_not_the_interval() {
    // The window holds 5,000 wasted of 6,000 across 180 files: the hint says so, whatever the
    // interval holds.
    let window = |used, wasted| {
        vec![RaRecent { dev: LOOP0, secs: 10.0, used_pages: used, wasted_pages: wasted, wasted_files: 180 }]
    };
    let h = column_files(window(1000, 5000));
    assert_eq!(h.len(), 1, "{h:?}");
    assert!(
        h[0].starts_with(
            "loop0: 83% of readahead evicted unused (5000 pages across 180 files in the last 10 s)"
        ),
        "{h:?}"
    );
    // An interval with no waste at all keeps the hint while the window has it: no flicker.
    let mut quiet = file(12, Some("/db/col/0.bin"), 64, 64, 0, 32);
    quiet.mmap_miss = 3;
    let mut cur = sample(2, 0, vec![quiet.clone()]);
    cur.bpf.readahead.as_mut().unwrap().recent = window(1000, 5000);
    let m = Model::between(&sample(1, 0, vec![quiet]), &cur);
    let h = m.readahead.unwrap().hints;
    assert_eq!(h.len(), 1, "held over the window: {h:?}");
    // A window with little waste: no device hint, though this one interval looked wasteful.
    assert!(column_files(window(5000, 100)).is_empty());
}

/// A column store's interval where 3 of its 32 wasting columns each wasted ≥ 256 pages: the
/// three get their own hints and the device keeps its hint (the rest of its files); a device whose
/// waste is one file's gets that file's hint only.
#[test]
fn a_few_hinted_files_do_not_hide_the_devices_hint() {
    let hints = |wasted_files: u64| {
        let before: Vec<_> =
            (0..3).map(|i| file(300 + i, Some(&format!("/db/col/{i}.bin")), 0, 0, 0, 640)).collect();
        let after: Vec<_> = before
            .iter()
            .map(|f| {
                let mut a = f.clone();
                (a.ra_pages, a.wasted_pages, a.windows) = (320, 320, 1);
                a
            })
            .collect();
        let mut cur = sample(2, 0, after);
        cur.bpf.readahead.as_mut().unwrap().recent =
            vec![RaRecent { dev: LOOP0, secs: 10.0, used_pages: 10, wasted_pages: 5000, wasted_files }];
        Model::between(&sample(1, 0, before), &cur).readahead.unwrap().hints
    };
    let h = hints(32);
    assert_eq!(h.len(), 4, "{h:?}");
    assert!(h[..3].iter().all(|x| x.starts_with("/db/col/")), "{h:?}");
    assert!(h[3].starts_with("loop0: 100% of readahead evicted unused (5000 pages across 32 files"), "{h:?}");
    assert!(h[3].contains("madvise(MADV_RANDOM) on the mappings in columnstore(4242)"), "{h:?}");
    // Only the hinted files wasted pages in the window: their hints say it all.
    let h = hints(3);
    assert_eq!(h.len(), 3, "{h:?}");
    assert!(h.iter().all(|x| x.starts_with("/db/col/")), "{h:?}");
}

#[test]
fn a_random_mmap_reader_is_not_called_sequential() {
    // Async readahead at the 32-page maximum, but most windows were read-around: no "raise" hint.
    let mut before = file(21, Some("/db/g"), 0, 0, 0, 32);
    (before.windows, before.async_events) = (100, 5);
    let mut after = before.clone();
    (after.windows, after.async_events, after.ra_pages, after.used_pages) = (200, 10, 3200, 3200);
    let m = Model::between(&sample(1, 0, vec![before]), &sample(2, 0, vec![after]));
    assert!(m.readahead.unwrap().hints.is_empty());
}

/// The files beyond a sample's rows come as one summed row per device, whose counts are the
/// interval's (not differences), and count in the device's totals.
#[test]
fn a_devices_other_files_are_one_row_in_its_totals() {
    let prev = sample(10, 1000, vec![file(12, Some("/a"), 8, 8, 0, 8)]);
    let mut cur = sample(12, 5000, vec![file(12, Some("/a"), 16, 16, 0, 8)]);
    let others = RaOthers {
        dev: LOOP0,
        files: 300,
        windows: 300,
        ra_pages: 300,
        used_pages: 290,
        wasted_pages: 10,
        ..Default::default()
    };
    cur.bpf.readahead.as_mut().unwrap().others = vec![others];
    let m = Model::between(&prev, &cur);
    let ra = m.readahead.unwrap();
    let row = ra.files.iter().find(|f| f.label.is_some()).expect("a summed row");
    assert_eq!(row.path, "300 other files");
    assert!(!row.path_known);
    assert_eq!(
        (row.ra_pages, row.used_pages, row.wasted_pages, row.device.as_str()),
        (300, 290, 10, "loop0")
    );
    let d = &ra.devices[0];
    assert_eq!((d.ra_pages, d.used_pages, d.wasted_pages), (308, 298, 10));
    assert!(ra.hints.iter().all(|h| !h.contains("other files")), "{:?}", ra.hints);
}

#[test]
fn waste_is_of_the_pages_settled() {
    assert_eq!(waste_pct(0, 0), None);
    assert_eq!(waste_pct(3, 1), Some(25.0));
}

#[test]
fn the_first_sample_has_no_interval() {
    let s = sample(10, 0, vec![file(12, None, 10, 0, 0, 4)]);
    assert!(Model::compute(None, &s, Duration::ZERO).readahead.is_none());
}

fn view() -> UiState {
    let mut s = UiState::new(Duration::from_secs(1), false);
    s.handle_key(KeyEvent::from(KeyCode::Char('w')));
    assert!(s.body == Body::Readahead);
    s
}

#[test]
fn readahead_view_80x24() {
    insta::assert_snapshot!(screen(&model(), &view(), 80, 24));
}

#[test]
fn readahead_view_160x48() {
    insta::assert_snapshot!(screen(&model(), &view(), 160, 48));
}

#[test]
fn readahead_file_detail_160x48() {
    let mut s = view();
    s.handle_key(KeyEvent::from(KeyCode::Enter));
    insta::assert_snapshot!(screen(&model(), &s, 160, 48));
    // Esc closes the detail, then the view.
    s.handle_key(KeyEvent::from(KeyCode::Esc));
    assert!(s.body == Body::Readahead && !s.views.readahead.detail);
    s.handle_key(KeyEvent::from(KeyCode::Esc));
    assert!(s.body != Body::Readahead);
}

#[test]
fn without_the_probes_the_view_says_why() {
    let m = Model::default();
    let text = screen(&m, &view(), 80, 24);
    assert!(text.contains("eBPF is off"), "{text}");
}

#[test]
fn batch_text_lists_devices_files_and_hints() {
    let text = ioscope::output::text::format_frame(&model());
    for want in ["Readahead (pages/s)", "loop0", "/db/col/c1.bin", "7:0:13", "hint: /db/col/c1.bin"] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
}

fn readme_section() -> String {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/model/README.md")).unwrap();
    let start = readme.find("\n## Readahead\n").expect("src/model/README.md has a Readahead section");
    let rest = &readme[start..];
    let end = rest[1..].find("\n## ").map_or(rest.len(), |i| i + 1);
    rest[..end].to_string()
}

#[test]
fn every_readahead_json_key_is_documented_and_the_promised_ones_exist() {
    let json = serde_json::to_value(model()).unwrap();
    let doc = readme_section();
    let ra = &json["readahead"];
    for (list, promised) in [
        ("devices", &["name", "read_ahead_kb", "ra_pages", "used_pages", "wasted_pages"][..]),
        ("files", &["path", "dev", "ino", "ra_pages", "used_pages", "wasted_pages", "window_pages"][..]),
    ] {
        let keys: Vec<String> = ra[list][0].as_object().unwrap().keys().cloned().collect();
        for k in promised {
            assert!(keys.contains(&k.to_string()), "readahead.{list}[].{k} missing");
        }
        for k in &keys {
            assert!(
                doc.contains(&format!("`{k}`")),
                "readahead.{list}[].{k} is not documented in src/model/README.md"
            );
        }
    }
    for k in ra.as_object().unwrap().keys() {
        assert!(doc.contains(&format!("`{k}`")), "readahead.{k} is not documented in src/model/README.md");
    }
}
