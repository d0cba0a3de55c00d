//! `kill -USR1` of a headless `ioscope record` adds a mark to the recording, at the time of the
//! signal, and the recording goes on.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ioscope::record::Recording;

fn wait_for_samples(path: &std::path::Path, n: usize) -> Recording {
    let start = Instant::now();
    loop {
        if let Ok(r) = Recording::open(path) {
            if r.len() >= n {
                return r;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(60), "the recorder never wrote {n} samples");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigusr1_marks_a_headless_recording() {
    let _group = common::live_group(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("marked.rec");
    let child = Command::new(env!("CARGO_BIN_EXE_ioscope"))
        .args(["record", "--no-bpf", "-i", "0.2", "-o"])
        .arg(&path)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    wait_for_samples(&path, 3);
    let before = ioscope::util::monotonic_ns();
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGUSR1) }, 0);
    let rec = wait_for_samples(&path, 6);
    let n = rec.len();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGUSR1) }, 0);
    wait_for_samples(&path, n + 3);
    let after = ioscope::util::monotonic_ns();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the recorder went on after the marks and stopped cleanly");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mark 1 at") && err.contains("mark 2 at"), "{err}");

    let rec = Recording::open(&path).unwrap();
    assert_eq!(rec.marks.len(), 2, "{:?}", rec.marks);
    let mono = rec.mono_ns();
    for m in &rec.marks {
        assert!(m.mono_ns >= before && m.mono_ns <= after, "{m:?}");
        assert!(m.note.is_empty());
    }
    // The first mark lies between the samples around the signal: after sample 3, before the
    // 6th had been written.
    assert!(rec.marks[0].mono_ns > mono[2] && rec.marks[0].mono_ns < mono[n - 1] + 300_000_000);
    // `--from mark:2` replays from there.
    let json = Command::new(env!("CARGO_BIN_EXE_ioscope"))
        .args(["replay", path.to_str().unwrap(), "--json", "--from", "mark:2"])
        .output()
        .unwrap();
    assert!(json.status.success());
    let all = Command::new(env!("CARGO_BIN_EXE_ioscope"))
        .args(["replay", path.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let lines = |o: &[u8]| String::from_utf8_lossy(o).lines().count();
    assert!(lines(&json.stdout) >= 1 && lines(&json.stdout) < lines(&all.stdout) - 3);
}
