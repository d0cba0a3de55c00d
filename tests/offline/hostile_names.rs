//! Hostile names through every output (issue 38.1). Every string of two Samples (file paths,
//! process names, cgroups, devices, the host name and kernel, the probes' reasons: a crafted
//! recording controls them all) and of the recording header gets a suffix of terminal controls,
//! then goes through the `--once`/`--batch` text frame, `replay --batch`, `replay --csv`,
//! `compare --text`, and the live, replay and compare TUIs. Each output is scanned for ESC, CSI,
//! OSC, DCS, C1, BEL, CR, a line a name forged, and bidi overrides, and must show the names
//! escaped; `replay --json` and `--openmetrics` must keep the exact strings in their own escaping.

use std::path::Path;
use std::sync::Arc;

use crossterm::event::KeyCode;
use ioscope::collect::{collect, SystemRoot};
use ioscope::compare::{self, CompareOptions, RangeSpec};
use ioscope::model::Model;
use ioscope::output::headless::{write_report, Format};
use ioscope::record::{Recording, RecordingHeader, RecordingWriter};
use ioscope::replay::{self, CsvPane, ReplayOutput};
use ioscope::sample::cgroups::{CgroupIoCounters, CgroupSample};
use ioscope::sample::iowait::{IowaitSample, IowaitThreadSample};
use ioscope::sample::readahead::{RaFileSample, RaTrigger, ReadaheadSample};
use ioscope::sample::syncs::{SyncCallCounters, SyncFile, SyncRunning, SyncSample};
use ioscope::sample::{CacheCountersSample, CacheProcessSample, PageCacheSample, Sample};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::Value;

use crate::common::ui::{press, screen, state};
use crate::{block_box, files_box};

/// The attacks, one per run: an OSC window title and an OSC 52 clipboard write; a DCS XTGETTCAP
/// request (the terminal answers on stdin); a clear screen; a bare CR; a newline forging a row;
/// a C1 CSI and NEL; a right-to-left override.
pub(crate) const SUFFIXES: &[&str] = &[
    "\x1b]0;OWNED\x07\x1b]52;c;b3duZWQ=\x07",
    "\x1bP+q544e\x1b\\",
    "\x1b[2J\x1b[H",
    "\rOVERWRITE",
    "\nFORGED row",
    "\u{9b}2J\u{85}",
    "\u{202e}txt.exe",
];

const CGROUP: &str = "/system.slice/app.service";

fn root(snapshot: &str) -> SystemRoot {
    SystemRoot::fixture(format!("{}/tests/fixtures/basic/{snapshot}", env!("CARGO_MANIFEST_DIR")))
}

/// Two samples with every pane populated: /proc and /sys of the basic fixture, the block and
/// file probes of block_box and files_box, and page cache, readahead, sync-call and cgroup rows.
fn base() -> (Sample, Sample) {
    let (mut a, mut b) = (collect(&root("t0")), collect(&root("t1")));
    // The fixture's uptimes are 2.12 s apart; the clocks of a live sampler.
    a.mono_ns = 100_000_000_000;
    b.mono_ns = a.mono_ns + 2_120_000_000;
    a.wall_unix_ms = 1_795_350_896_000;
    b.wall_unix_ms = a.wall_unix_ms + 2_120;
    let (ba, bb) = block_box::samples();
    let (fa, fb) = files_box::samples();
    for (i, (s, blk, files)) in [(&mut a, ba, fa), (&mut b, bb, fb)].into_iter().enumerate() {
        let n = i as u64 + 1;
        s.bpf.status.enabled = true;
        s.bpf.status.reason = Some("partly off: a reason".into());
        s.bpf.status.programs = Arc::new(vec![ioscope::sample::BpfProgramStatus {
            program: "block_io_start".into(),
            tracepoint: "block:block_io_start".into(),
            error: Some("not attached: a reason".into()),
            ..Default::default()
        }]);
        s.bpf.block_devices = blk.bpf.block_devices;
        s.bpf.io_processes = blk.bpf.io_processes;
        for p in &mut s.bpf.io_processes {
            p.cgroup_id = 42;
            p.cgroup = CGROUP.into();
        }
        s.bpf.block_health = blk.bpf.block_health;
        s.bpf.files = files.bpf.files;
        s.bpf.block_files = files.bpf.block_files;
        s.bpf.page_cache = Some(PageCacheSample {
            hz: 100,
            processes: vec![CacheProcessSample {
                pid: 990,
                comm: "postgres".into(),
                counters: CacheCountersSample {
                    read_pages: 1000 * n,
                    inserted_pages: 100 * n,
                    dirtied_pages: 50 * n,
                    ..Default::default()
                },
                cgroup_id: 42,
                cgroup: CGROUP.into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        s.bpf.readahead = Some(ReadaheadSample {
            files: vec![Arc::new(RaFileSample {
                dev: 7 << 20,
                ino: 12,
                path: Some("/data/table.db".into()),
                ra_pages: 1000 * n,
                used_pages: 200 * n,
                wasted_pages: 700 * n,
                last_window: 32,
                max_window: 32,
                triggers: vec![RaTrigger { pid: 4242, comm: "columnstore".into() }],
                use_hist: vec![0; 24],
                ..Default::default()
            })],
            page_map_capacity: 262_144,
            ..Default::default()
        });
        let file = |ino, path: &str| SyncFile { major: 253, minor: 0, ino, path: Some(path.into()) };
        s.bpf.syncs = Some(SyncSample {
            calls: vec![SyncCallCounters {
                pid: 990,
                comm: "postgres".into(),
                cgroup_id: 42,
                cgroup: CGROUP.into(),
                syscall: "fsync".into(),
                file: file(77, "/var/lib/pg/wal/0001"),
                calls: 10 * n,
                total_ns: 5_000_000 * n,
                max_ns: 3_000_000,
                written_bytes: n << 20,
                hist: vec![0; 8],
            }],
            running: vec![SyncRunning {
                pid: 991,
                tid: 991,
                comm: "java".into(),
                cgroup_id: 42,
                cgroup: CGROUP.into(),
                syscall: "fdatasync".into(),
                file: file(78, "/srv/app/log"),
                start_mono_ns: s.mono_ns.saturating_sub(4_000_000_000),
                written_bytes: 0,
            }],
            ..Default::default()
        });
        // Two threads of postgres blocked on I/O (the waits view lists both under it).
        let waiting = |tid, comm: &str| IowaitThreadSample {
            tid,
            pid: 990,
            comm: comm.into(),
            cgroup_id: 42,
            ns_by_cause: vec![0, 300_000_000 * n, 0, 100_000_000 * n * u64::from(tid - 989), 0],
            waits: n,
        };
        s.bpf.iowait =
            Some(IowaitSample { threads: vec![waiting(990, "postgres"), waiting(994, "walwriter")] });
        s.cgroups = vec![CgroupSample {
            id: 42,
            path: CGROUP.into(),
            io: Some(CgroupIoCounters {
                source: "io.stat".into(),
                read_bytes: n << 20,
                write_bytes: n << 21,
                ..Default::default()
            }),
            ..Default::default()
        }];
    }
    (a, b)
}

fn poison(v: &mut Value, suffix: &str) {
    match v {
        Value::String(s) => s.push_str(suffix),
        Value::Array(a) => a.iter_mut().for_each(|x| poison(x, suffix)),
        Value::Object(o) => o.values_mut().for_each(|x| poison(x, suffix)),
        _ => {}
    }
}

/// `x` with `suffix` appended to every string in it.
fn hostile<T: serde::Serialize + serde::de::DeserializeOwned>(x: &T, suffix: &str) -> T {
    let mut v = serde_json::to_value(x).unwrap();
    poison(&mut v, suffix);
    serde_json::from_value(v).expect("every string takes any text")
}

/// [`base`] with `suffix` appended to every string. A program of the file probes keeps its name
/// (the probe health view shows the others' hostile names): the files pane needs it.
fn samples(suffix: &str) -> (Sample, Sample) {
    let (a, b) = base();
    let (mut a, mut b) = (hostile(&a, suffix), hostile(&b, suffix));
    for s in [&mut a, &mut b] {
        Arc::make_mut(&mut s.bpf.status.programs).push(ioscope::sample::BpfProgramStatus {
            program: ioscope_common::files::WRITEBACK_PROGRAM.into(),
            tracepoint: "writeback:writeback_single_inode".into(),
            attached: true,
            mechanism: "tracepoint".into(),
            ..Default::default()
        });
    }
    (a, b)
}

fn header(suffix: &str, dirty_ratio: &str) -> RecordingHeader {
    let mut h = RecordingHeader {
        hostname: "host".into(),
        kernel: "6.18".into(),
        interval_s: 1.0,
        ..Default::default()
    };
    h.tuning.insert("vm.dirty_ratio".into(), dirty_ratio.into());
    h.tuning.insert(format!("vm.{suffix}"), "1".into());
    hostile(&h, suffix)
}

/// A recording of four samples (a, b, a', b' with the clocks moved on) under `dir`.
pub(crate) fn recording(dir: &Path, name: &str, suffix: &str, dirty_ratio: &str) -> std::path::PathBuf {
    let (a, b) = samples(suffix);
    let path = dir.join(name);
    let mut w = RecordingWriter::create(&path, &header(suffix, dirty_ratio), false).unwrap();
    let step = b.mono_ns - a.mono_ns;
    for k in 0..2u64 {
        for s in [&a, &b] {
            let mut s = s.clone();
            s.mono_ns += 2 * k * step;
            s.wall_unix_ms += 2 * k * step / 1_000_000;
            w.write_sample(&s).unwrap();
        }
    }
    drop(w);
    path
}

/// The surface `what` shows nothing a terminal would act on, and no line the names forged.
fn assert_clean(what: &str, text: &str) {
    for (i, line) in text.split('\n').enumerate() {
        let bad: Vec<String> = line
            .chars()
            .filter(|&c| {
                c.is_control()
                    || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
            })
            .map(|c| format!("U+{:04X}", c as u32))
            .collect();
        assert!(bad.is_empty(), "{what}: line {i} holds {bad:?}: {line:?}");
        let start = line.trim_start_matches(|c: char| c.is_whitespace() || "│┃|".contains(c));
        assert!(!start.starts_with("FORGED"), "{what}: a name forged line {i}: {line:?}");
    }
}

/// `text` shows (the start of) `suffix` escaped.
fn assert_visible(what: &str, text: &str, suffix: &str) {
    let shown = ioscope::untrusted::escape(suffix);
    let head: String = shown.chars().take(4).collect();
    assert!(text.contains(&head), "{what}: {head:?} ({suffix:?} escaped) is not shown:\n{text}");
}

fn model(suffix: &str) -> Model {
    let (a, b) = samples(suffix);
    Model::between(&a, &b)
}

#[test]
fn the_text_frame_of_once_and_batch_escapes_every_name() {
    for suffix in SUFFIXES {
        let m = model(suffix);
        let mut out = Vec::new();
        write_report(&mut out, &m, Format::Text, false).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_clean("--batch", &text);
        assert_visible("--batch", &text, suffix);
        // The names themselves are there, escaped, not only the host name.
        assert!(text.contains("Files by disk I/O"), "{text}");
        for name in [
            "postgres",
            "/var/lib/pg/wal/0001",
            "/var/lib/postgresql/16/main/base/16384/16397",
            "vda",
            "columnstore",
        ] {
            let escaped = format!("{name}{}", ioscope::untrusted::escape(suffix));
            assert!(text.contains(&escaped), "--batch: {escaped:?} missing:\n{text}");
        }
    }
}

#[test]
fn replay_batch_csv_and_compare_text_escape_every_name() {
    let dir = tempfile::tempdir().unwrap();
    for (i, suffix) in SUFFIXES.iter().enumerate() {
        let a = recording(dir.path(), &format!("a{i}.rec"), suffix, "20");
        let b = recording(dir.path(), &format!("b{i}.rec"), suffix, "40");
        let print = |output| {
            let mut out = Vec::new();
            replay::print(Recording::open(&a).unwrap(), output, None, None, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let text = print(ReplayOutput::Text);
        assert_clean("replay --batch", &text);
        assert_visible("replay --batch", &text, suffix);
        for pane in [CsvPane::Processes, CsvPane::Devices, CsvPane::Memory] {
            let csv = print(ReplayOutput::Csv(pane));
            assert_clean(&format!("replay --csv {pane:?}"), &csv);
            if pane != CsvPane::Memory {
                assert_visible(&format!("replay --csv {pane:?}"), &csv, suffix);
            }
        }
        // JSON keeps the exact strings.
        let json = print(ReplayOutput::Json);
        let first: Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
        assert!(first["header"]["hostname"].as_str().is_some_and(|h| h.ends_with(suffix)), "{first}");
        assert!(
            first["processes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["comm"].as_str().is_some_and(|c| c.ends_with(suffix))),
            "replay --json lost the exact process name"
        );
        // OpenMetrics keeps the exact bytes, with its own escaping of \ " and newline.
        let mut om = Vec::new();
        replay::openmetrics::write(Recording::open(&a).unwrap(), None, None, &mut om).unwrap();
        let om = String::from_utf8(om).unwrap();
        let label = suffix.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
        assert!(om.contains(&format!("{label}\"")), "replay --openmetrics lost the exact label {label:?}");
        for line in om.lines() {
            assert!(line.starts_with('#') || line.starts_with(|c: char| c.is_ascii_alphabetic()), "{line:?}");
        }

        let spec = |p: &Path| RangeSpec::parse(&p.display().to_string()).unwrap();
        let opts =
            CompareOptions { a: spec(&a), b: spec(&b), json: false, top: 100, text: true, color: false };
        let c = compare::build(&opts).unwrap();
        let text = compare::text(&c, 100);
        assert_clean("compare --text", &text);
        assert_visible("compare --text", &text, suffix);
        assert!(text.contains("vm.dirty_ratio"), "{text}");
        for (w, h) in [(80, 24), (160, 48)] {
            let mut view = compare::tui::CompareView::default();
            let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
            t.draw(|f| compare::tui::draw(f, &c, &mut view)).unwrap();
            let screen = t.backend().to_string();
            assert_clean("compare TUI", &screen);
            assert_visible("compare TUI", &screen, suffix);
        }

        // The replay TUI draws the recording's names.
        let mut rec = Recording::open(&a).unwrap();
        let player = replay::player::Player::new(&rec.mono_ns(), &rec.wall_unix_ms());
        let mut st = replay::tui::initial_state(&rec, false);
        let model = replay::tui::model_at(&mut rec, 1).unwrap();
        st.clamp_selection(&model);
        for key in [None, Some(KeyCode::Char('?')), Some(KeyCode::Char('f'))] {
            if let Some(k) = key {
                press(&mut st, k);
            }
            let mut t = Terminal::new(TestBackend::new(160, 48)).unwrap();
            t.draw(|f| replay::tui::draw(f, &model, &st, &player)).unwrap();
            let screen = t.backend().to_string();
            assert_clean(&format!("replay TUI {key:?}"), &screen);
        }
    }
}

#[test]
fn csv_neutralises_formulas_but_not_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let (mut a, mut b) = base();
    for s in [&mut a, &mut b] {
        for (p, name) in s.processes.iter_mut().zip(["=HYPERLINK(1)", "+1", "-2+3", "@SUM(A1)"]) {
            p.comm = name.into();
        }
    }
    let path = dir.path().join("f.rec");
    let mut w = RecordingWriter::create(&path, &header("", "20"), false).unwrap();
    w.write_sample(&a).unwrap();
    w.write_sample(&b).unwrap();
    drop(w);
    let mut out = Vec::new();
    replay::print(
        Recording::open(&path).unwrap(),
        ReplayOutput::Csv(CsvPane::Processes),
        None,
        None,
        &mut out,
    )
    .unwrap();
    let csv = String::from_utf8(out).unwrap();
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let comm = head.iter().position(|c| *c == "comm").unwrap();
    let comms: Vec<&str> = csv.lines().skip(1).map(|l| l.split(',').nth(comm).unwrap()).collect();
    assert!(!comms.is_empty(), "{csv}");
    for c in &comms {
        assert!(!c.starts_with(['=', '+', '-', '@']), "a formula cell: {c} in\n{csv}");
    }
    assert!(comms.iter().any(|c| c.starts_with("'")), "{csv}");
    // Numbers stay numbers: every cell of a numeric column parses. The text columns: comm, and
    // the user and command line (untrusted too: neutralised like comm).
    let text: Vec<usize> = head
        .iter()
        .enumerate()
        .filter(|(_, c)| ["comm", "user", "cmdline"].contains(c))
        .map(|(i, _)| i)
        .collect();
    for line in csv.lines().skip(1) {
        for (i, cell) in line.split(',').enumerate() {
            if text.contains(&i) {
                assert!(!cell.starts_with(['=', '+', '-', '@']), "a formula cell: {cell} in\n{csv}");
            } else if !cell.is_empty() && cell != "true" && cell != "false" {
                assert!(cell.parse::<f64>().is_ok(), "column {} is not a number: {cell}", head[i]);
            }
        }
    }
}

#[test]
fn every_tui_view_escapes_every_name() {
    for suffix in SUFFIXES {
        let m = model(suffix);
        let keys: &[&[KeyCode]] = &[
            &[],
            &[KeyCode::Char('?')],
            &[KeyCode::Char('e')],
            &[KeyCode::Char('d')],
            &[KeyCode::Char('f')],
            &[KeyCode::Char('w')],
            &[KeyCode::Char('w'), KeyCode::Enter],
            &[KeyCode::Char('c')],
            &[KeyCode::Char('y')],
            &[KeyCode::Char('W')],
            &[KeyCode::Char('2'), KeyCode::Enter],
            &[KeyCode::Char('4'), KeyCode::Char('z')],
            &[KeyCode::Char('3'), KeyCode::Char('z')],
        ];
        let mut seen = String::new();
        for seq in keys {
            for (w, h) in [(80, 24), (160, 48)] {
                let mut st = state(std::slice::from_ref(&m));
                st.message = Some(format!("cannot record to ./ioscope-host{suffix}.rec"));
                st.recording = Some(ioscope::ui::state::RecordingIndicator {
                    path: format!("ioscope-host{suffix}.rec"),
                    frames: 3,
                    bytes: 100,
                });
                st.clamp_selection(&m);
                for k in *seq {
                    press(&mut st, *k);
                }
                let s = screen(&m, &st, w, h);
                assert_clean(&format!("TUI {seq:?} {w}x{h}"), &s);
                seen.push_str(&s);
            }
        }
        assert_visible("TUI", &seen, suffix);
        // The baseline view too.
        let mut st = state(std::slice::from_ref(&m));
        st.baseline = Some(ioscope::ui::baseline::Baseline { model: model("") });
        assert_clean("TUI baseline", &screen(&m, &st, 160, 48));
    }
}

/// The screen a user sees at 80x24 with a hostile file name: printed for a human to read
/// (`cargo test --test offline hostile_names::show -- --nocapture --ignored`).
#[test]
#[ignore]
fn show() {
    let m = model("\x1b]0;EXEC\x07dd\u{202e}");
    for keys in [&[][..], &[KeyCode::Char('f')], &[KeyCode::Char('d')]] {
        let mut st = state(std::slice::from_ref(&m));
        for k in keys {
            press(&mut st, *k);
        }
        println!("{}", screen(&m, &st, 80, 24));
    }
    let mut out = Vec::new();
    write_report(&mut out, &m, Format::Text, true).unwrap();
    println!("{}", String::from_utf8(out).unwrap());
}
