//! Marks in recordings: the format round trip, older recordings, `--from mark:N`, compare
//! `FILE@mark:1..mark:2`, and bad marks.

use std::path::{Path, PathBuf};

use ioscope::record::{Mark, Recording, RecordingWriter};

use crate::common::ioscope_output as run;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// The samples of a real recording written again with two marks: after sample 3 (note with an
/// escape sequence and a newline) and after sample 8.
fn marked(dir: &Path) -> (PathBuf, Vec<u64>) {
    let mut src = Recording::open(&repo("assets/demo/readahead-waste.rec")).unwrap();
    let path = dir.join("marked.rec");
    let mut w = RecordingWriter::create(&path, &src.header, false).unwrap();
    let mut mono = Vec::new();
    for i in 0..src.len() {
        let s = src.sample(i).unwrap().clone();
        mono.push(s.mono_ns);
        w.write_sample(&s).unwrap();
        if i == 3 || i == 8 {
            let note = if i == 3 { "fsync \u{1b}[31mstall\nhere" } else { "" };
            w.write_mark(&Mark { mono_ns: s.mono_ns + 1, wall_unix_ms: s.wall_unix_ms, note: note.into() })
                .unwrap();
        }
    }
    (path, mono)
}

#[test]
fn marks_round_trip_between_samples() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mono) = marked(dir.path());
    let mut rec = Recording::open(&path).unwrap();
    assert_eq!(rec.len(), mono.len(), "marks are not samples");
    assert_eq!(rec.marks.len(), 2);
    assert_eq!(rec.marks[0].mono_ns, mono[3] + 1);
    // One line, no control characters.
    assert_eq!(rec.marks[0].note, "fsync  [31mstall here");
    // Every sample decodes, in and across the marks' segment.
    for i in (0..rec.len()).rev() {
        assert_eq!(rec.sample(i).unwrap().mono_ns, mono[i]);
    }
    assert!(rec.problem.is_none());
}

#[test]
fn older_recordings_still_replay() {
    // The first release's recording, and a demo recorded in format 1 with eBPF (the old
    // small-vs-large-writes demo, kept when the demos were re-recorded with marks).
    for f in [
        "tests/fixtures/recordings/v1-demo-small-vs-large-writes.rec",
        "tests/fixtures/recordings/v1-ioscope-0.1.0.rec",
    ] {
        let rec = Recording::open(&repo(f)).unwrap();
        assert_eq!(rec.header.format_version, 1, "{f} is an older recording");
        assert!(rec.marks.is_empty());
        let (code, out, err) = run(&["replay", repo(f).to_str().unwrap(), "--json"]);
        assert_eq!(code, 0, "{f}: {err}");
        assert_eq!(out.lines().count(), rec.len() - 1, "{f}");
    }
}

#[test]
fn from_mark_and_compare_between_marks() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = marked(dir.path());
    let p = path.to_str().unwrap();
    let (code, all, err) = run(&["replay", p, "--json"]);
    assert_eq!(code, 0, "{err}");
    let (code, from2, err) = run(&["replay", p, "--json", "--from", "mark:2"]);
    assert_eq!(code, 0, "{err}");
    // Mark 2 is just after sample 8: the intervals that start at sample 9 or later.
    assert_eq!(from2.lines().count(), all.lines().count() - 9);
    let (code, between, err) = run(&["replay", p, "--json", "--from", "mark:1", "--to", "mark:2"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(between.lines().count(), 4, "samples 4 to 8: the intervals 4→5 .. 7→8");

    let (code, out, err) =
        run(&["compare", &format!("{p}@mark:1..mark:2"), &format!("{p}@mark:2.."), "--json"]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(doc["a"]["source"].as_str().unwrap().ends_with("@mark:1..mark:2"), "{doc}");
    assert_eq!(doc["a"]["intervals"], 4);

    for args in [
        vec!["replay", p, "--json", "--from", "mark:3"],
        vec!["replay", p, "--json", "--from", "mark:0"],
        vec!["replay", p, "--json", "--from", "mark:2", "--to", "mark:1"],
    ] {
        let (code, _, err) = run(&args);
        assert_eq!((code, err.lines().count()), (2, 1), "{args:?}: {err}");
    }
    let (code, _, err) = run(&["compare", &format!("{p}@mark:1..mark:5"), p]);
    assert_eq!((code, err.lines().count()), (2, 1), "{err}");
    assert!(err.contains("2 marks"), "{err}");
}

#[test]
fn anonymize_keeps_marks_and_replaces_their_notes() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = marked(dir.path());
    let out = dir.path().join("anon.rec");
    let (code, _, err) = run(&["anonymize", path.to_str().unwrap(), out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (a, b) = (Recording::open(&path).unwrap(), Recording::open(&out).unwrap());
    assert_eq!(a.marks.len(), b.marks.len());
    assert_eq!(a.marks[0].mono_ns, b.marks[0].mono_ns);
    assert!(b.marks[0].note.starts_with("note"), "{:?}", b.marks[0]);
    assert_eq!(b.marks[1].note, "");
}
