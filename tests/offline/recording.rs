//! The recording format: round trip, segments, and every kind of damaged file (truncated at every
//! byte, corrupt, empty, not ioscope, newer version), plus replay/compare output over recordings.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ioscope::collect::{collect, SystemRoot};
use ioscope::compare::{self, CompareOptions, RangeSpec};
use ioscope::record::format::{MAGIC, SEGMENT_FRAMES};
use ioscope::record::{Recording, RecordingHeader, RecordingWriter, FORMAT_VERSION};
use ioscope::replay::{self, CsvPane, ReplayOutput};
use ioscope::sample::Sample;

fn fixture(snapshot: &str) -> Sample {
    collect(&SystemRoot::fixture(format!("{}/tests/fixtures/basic/{snapshot}", env!("CARGO_MANIFEST_DIR"))))
}

/// `n` samples one second apart: the fixture's t0 with vda writing 2200 sectors (1100 kB) in 20
/// requests every second, every other counter still.
fn samples(n: usize) -> Vec<Sample> {
    let t0 = fixture("t0");
    (0..n)
        .map(|i| {
            let mut s = t0.clone();
            let vda = s.disks.iter_mut().find(|d| d.name == "vda").expect("fixture has vda");
            vda.sectors_written += 2200 * i as u64;
            vda.writes_completed += 20 * i as u64;
            s.mono_ns = 1_000_000_000 * (100 + i as u64);
            s.wall_unix_ms = 1_763_800_000_000 + 1000 * i as u64;
            s
        })
        .collect()
}

fn header() -> RecordingHeader {
    RecordingHeader { hostname: "fixture".into(), interval_s: 1.0, ..Default::default() }
}

fn write(path: &Path, samples: &[Sample]) {
    let mut w = RecordingWriter::create(path, &header(), false).unwrap();
    for s in samples {
        w.write_sample(s).unwrap();
    }
}

fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    (dir, path)
}

#[test]
fn round_trip_across_segments() {
    let (_dir, path) = tmp("a.rec");
    let n = SEGMENT_FRAMES * 2 + 5;
    let originals = samples(n);
    write(&path, &originals);
    let mut rec = Recording::open(&path).unwrap();
    assert_eq!(rec.problem, None);
    assert_eq!(rec.len(), n);
    assert_eq!(rec.header.hostname, "fixture");
    assert_eq!(rec.header.format_version, FORMAT_VERSION);
    assert_eq!(rec.mono_ns()[3], originals[3].mono_ns);
    assert_eq!(rec.wall_unix_ms()[n - 1], originals[n - 1].wall_unix_ms);
    // Random access in any order, across segment boundaries.
    for i in [n - 1, 0, SEGMENT_FRAMES, SEGMENT_FRAMES - 1, 7, n - 2] {
        assert_eq!(rec.sample(i).unwrap(), &originals[i], "sample {i}");
    }
    assert!(rec.sample(n).is_err());
    let all: Vec<Sample> = rec.samples().collect::<anyhow::Result<_>>().unwrap();
    assert_eq!(all, originals);
    // The sequential decoder (partial parses) crosses segment boundaries too.
    assert_eq!(rec.all_as::<Sample>().unwrap(), originals);
}

#[test]
fn an_existing_file_is_not_overwritten_without_force() {
    let (_dir, path) = tmp("a.rec");
    std::fs::write(&path, b"precious").unwrap();
    let err = RecordingWriter::create(&path, &header(), false).err().unwrap().to_string();
    assert!(err.contains("already exists") && err.contains("--force"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
    RecordingWriter::create(&path, &header(), true).unwrap();
    assert!(Recording::open(&path).unwrap().is_empty());
}

#[test]
fn truncated_at_every_byte_replays_the_whole_samples_before_the_cut() {
    let (_dir, path) = tmp("a.rec");
    write(&path, &samples(4));
    let full = std::fs::read(&path).unwrap();
    let whole = Recording::from_bytes(full.clone()).unwrap();
    assert_eq!(whole.len(), 4);
    let mut last_len = 0;
    let mut seen_problem = false;
    for cut in 0..full.len() {
        match Recording::from_bytes(full[..cut].to_vec()) {
            Ok(mut rec) => {
                assert!(rec.len() >= last_len && rec.len() < 4, "cut {cut}: {} samples", rec.len());
                last_len = rec.len();
                if let Some(problem) = &rec.problem {
                    seen_problem = true;
                    assert!(problem.contains("truncated"), "{problem}");
                }
                for i in 0..rec.len() {
                    rec.sample(i).unwrap();
                }
            }
            Err(e) => {
                let msg = format!("{e:#}");
                assert_eq!(last_len, 0, "cut {cut} failed after samples were readable: {msg}");
                assert!(msg.contains("empty") || msg.contains("truncated"), "cut {cut}: {msg}");
            }
        }
    }
    assert!(seen_problem);
    assert_eq!(last_len, 3, "a cut inside the last record keeps the three before it");
}

#[test]
fn a_flipped_byte_stops_replay_at_the_damaged_record() {
    let (_dir, path) = tmp("a.rec");
    write(&path, &samples(6));
    let full = std::fs::read(&path).unwrap();
    let mut damaged = full.clone();
    // Walk the records (kind u8, length u32, crc u32, payload) to the fourth sample's payload.
    let mut pos = MAGIC.len() + 4;
    for _ in 0..4 {
        pos += 9 + u32::from_le_bytes(full[pos + 1..pos + 5].try_into().unwrap()) as usize;
    }
    damaged[pos + 9 + 20] ^= 0x55;
    let mut rec = Recording::from_bytes(damaged).unwrap();
    let problem = rec.problem.clone().expect("damage noticed");
    assert!(problem.contains("damaged record") || problem.contains("checksum"), "{problem}");
    assert_eq!(rec.len(), 3, "the three samples before the damaged one");
    let good = Recording::from_bytes(full).map(|mut r| r.sample(1).cloned().unwrap()).unwrap();
    assert_eq!(rec.sample(1).unwrap(), &good);
}

#[test]
fn empty_foreign_newer_and_damaged_header_files_are_refused_clearly() {
    let err = |bytes: &[u8]| format!("{:#}", Recording::from_bytes(bytes.to_vec()).err().expect("refused"));
    assert!(err(b"").contains("the file is empty"));
    assert!(err(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0").contains("not an ioscope recording"));
    assert!(err(b"hello world, this is text").contains("not an ioscope recording"));
    assert!(err(&MAGIC[..5]).contains("truncated"));
    let mut newer = MAGIC.to_vec();
    newer.extend_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    newer.extend_from_slice(&[0, 0]);
    newer.extend_from_slice(b"whatever the future holds");
    let msg = err(&newer);
    assert!(
        msg.contains("newer ioscope") && msg.contains(&format!("version {}", FORMAT_VERSION + 1)),
        "{msg}"
    );
    let mut bad_header = MAGIC.to_vec();
    bad_header.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bad_header.extend_from_slice(&[0, 0, 1]);
    bad_header.extend_from_slice(&3u32.to_le_bytes());
    bad_header.extend_from_slice(&crc32fast::hash(b"{{{").to_le_bytes());
    bad_header.extend_from_slice(b"{{{");
    assert!(err(&bad_header).contains("header is damaged"));
    // Through the file API: the path is in the message, and a missing file says so.
    let (_dir, path) = tmp("nothing.rec");
    let msg = format!("{:#}", Recording::open(&path).err().unwrap());
    assert!(msg.contains("cannot read") && msg.contains("nothing.rec"), "{msg}");
}

#[test]
fn replay_prints_text_json_and_csv_for_a_time_range() {
    let (_dir, path) = tmp("a.rec");
    write(&path, &samples(10));
    let print = |output, from: Option<u64>, to: Option<u64>| {
        let mut out = Vec::new();
        let rec = Recording::open(&path).unwrap();
        replay::print(rec, output, from.map(Duration::from_secs), to.map(Duration::from_secs), &mut out)
            .unwrap();
        String::from_utf8(out).unwrap()
    };
    let json = print(ReplayOutput::Json, None, None);
    assert_eq!(json.lines().count(), 9, "ten samples make nine intervals");
    let first: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    assert_eq!(first["interval_s"], 1.0);
    assert_eq!(first["header"]["wall_unix_ms"], 1_763_800_001_000u64);
    // --from 2 --to 5: the intervals 2→3, 3→4, 4→5.
    assert_eq!(print(ReplayOutput::Json, Some(2), Some(5)).lines().count(), 3);
    let text = print(ReplayOutput::Text, Some(8), None);
    assert_eq!(text.matches("\nioscope ").count() + usize::from(text.starts_with("ioscope ")), 1, "{text}");
    let csv = print(ReplayOutput::Csv(CsvPane::Memory), None, None);
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(&head[..2], ["time_s", "wall_unix_ms"]);
    assert!(
        head.contains(&"dirty_threshold")
            && head.contains(&"rates.pgpgin_kb_s")
            && head.contains(&"psi.io.some_avg10")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 9);
    assert!(rows.iter().all(|r| r.len() == head.len()));
    assert_eq!(rows[0][0], "1.000");
    let devs = print(ReplayOutput::Csv(CsvPane::Devices), None, None);
    let head: Vec<&str> = devs.lines().next().unwrap().split(',').collect();
    let wkb = head.iter().position(|c| *c == "wkb_s").unwrap();
    let name = head.iter().position(|c| *c == "name").unwrap();
    let vda: Vec<&str> =
        devs.lines().find(|l| l.split(',').nth(name) == Some("vda")).unwrap().split(',').collect();
    assert!(vda[wkb].parse::<f64>().unwrap() > 0.0, "{devs}");
    // An empty range is an error, not silence.
    let rec = Recording::open(&path).unwrap();
    let err =
        replay::print(rec, ReplayOutput::Json, Some(Duration::from_secs(60)), None, Vec::new()).unwrap_err();
    assert!(err.to_string().contains("no samples in the chosen time range"));
}

#[test]
fn compare_two_ranges_of_one_recording() {
    let (_dir, path) = tmp("a.rec");
    let mut s = samples(12);
    // Make the second half write four times as fast on vda.
    for (i, x) in s.iter_mut().enumerate().skip(6) {
        let vda = x.disks.iter_mut().find(|d| d.name == "vda").unwrap();
        vda.sectors_written += 3 * 2048 * (i as u64 - 5);
    }
    write(&path, &s);
    let spec = |r: &str| RangeSpec::parse(&format!("{}{r}", path.display())).unwrap();
    let opts =
        CompareOptions { a: spec("@..5"), b: spec("@6.."), json: true, top: 10, text: false, color: false };
    let c = compare::build(&opts).unwrap();
    assert_eq!((c.a.intervals, c.b.intervals), (5, 5));
    let dev = c.panes.iter().find(|p| p.pane == "devices").unwrap();
    let wkb = dev.metrics.iter().find(|m| m.metric == "vda wkb_s").unwrap();
    // A writes 1100 kB/s; B 3 × 2048 sectors = 3072 kB/s more: 4172, +279.27 %.
    assert_eq!((wkb.a_avg, wkb.a_p95, wkb.b_avg, wkb.b_p95), (1100.0, 1100.0, 4172.0, 4172.0), "{wkb:?}");
    assert!((wkb.change_pct.unwrap() - 3072.0 / 11.0).abs() < 1e-9);
    assert_eq!(dev.metrics[0].metric, "vda wkb_s", "the biggest change comes first");
    let json = serde_json::to_value(&c).unwrap();
    assert!(
        json["panes"][2]["metrics"][0]["change_pct"].is_number()
            || json["panes"][2]["metrics"][0]["change_pct"].is_null()
    );
    let err = compare::build(&CompareOptions { a: spec("@100.."), ..opts }).unwrap_err().to_string();
    assert!(err.contains("no intervals in that range"), "{err}");
}

/// Not a test: writes a large recording for the memory measurements of issue 23 (xtask/README.md).
/// `IOSCOPE_BIG_REC=/var/tmp/big.rec IOSCOPE_BIG_MB=1024 cargo test --test offline -- --ignored
/// recording::make_big_recording`: samples of 20,000 processes with random counters (~5 MB of JSON each,
/// hard to compress), appended until the file reaches the size.
#[test]
#[ignore]
fn make_big_recording() {
    let Ok(path) = std::env::var("IOSCOPE_BIG_REC") else { return };
    let mb: u64 = std::env::var("IOSCOPE_BIG_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(1024);
    let mut s = fixture("t0");
    s.processes = (0..20_000u32)
        .map(|i| ioscope::sample::ProcessIo {
            pid: 1000 + i,
            comm: format!("worker-{}", i % 700).into(),
            start_ticks: u64::from(i) * 7,
            io: Some(Default::default()),
            io_read_ns: None,
            ..Default::default()
        })
        .collect();
    let mut w = RecordingWriter::create(Path::new(&path), &header(), true).unwrap();
    let mut x: u64 = 0x1234_5678_9abc_def1;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % 1_000_000
    };
    let mut i = 0u64;
    while w.bytes() < mb << 20 {
        s.mono_ns = 1_000_000_000 * (100 + i);
        s.wall_unix_ms = 1_763_800_000_000 + 1000 * i;
        for p in &mut s.processes {
            let io = p.io.as_mut().unwrap();
            io.read_bytes += rnd() * 4096;
            io.write_bytes += rnd() * 512;
            io.rchar += rnd();
            io.wchar += rnd();
            io.syscr += rnd() % 1000;
        }
        w.write_sample(&s).unwrap();
        i += 1;
    }
    eprintln!("{path}: {i} samples, {} bytes", w.bytes());
}
