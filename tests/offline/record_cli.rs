//! The `record`, `replay` and `compare` commands as a user runs them: the real binary, real files.
//! Recording with --no-bpf needs no root, so these always run.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ioscope::record::Recording;

use crate::common::ioscope;

use crate::common::ioscope_output as run;

/// Waits (polling the file, no fixed sleep decides the outcome) until `path` holds `n` samples.
fn wait_for_samples(path: &Path, n: usize) {
    let start = Instant::now();
    loop {
        if Recording::open(path).is_ok_and(|r| r.len() >= n) {
            return;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "the recorder never wrote {n} samples");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_killed_recorder_leaves_a_replayable_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.rec");
    let mut child = ioscope()
        .args(["record", "--no-bpf", "-i", "0.1", "-o"])
        .arg(&path)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_samples(&path, 4);
    // SIGKILL: no handler runs, no flush, no fsync.
    child.kill().unwrap();
    child.wait().unwrap();
    let mut rec = Recording::open(&path).unwrap();
    assert!(rec.len() >= 4);
    for i in 0..rec.len() {
        rec.sample(i).unwrap();
    }
    let (code, out, err) = run(&["replay", path.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), rec.len() - 1);
}

#[test]
fn a_duration_ends_the_recording_with_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short.rec");
    let p = path.to_str().unwrap();
    let (code, _, err) = run(&["record", "--no-bpf", "-i", "0.2", "-d", "1", "-o", p]);
    assert_eq!(code, 0, "{err}");
    let rec = Recording::open(&path).unwrap();
    // Six at most (0 s … 1 s every 0.2 s); fewer only if a slow machine made the recorder skip.
    assert!((2..=6).contains(&rec.len()), "{}", rec.len());
    assert!(err.contains(&format!("{} samples", rec.len())), "{err}");
    assert_eq!(rec.header.interval_s, 0.2);
    assert!(rec.header.command.contains("record"));
    // The file is not overwritten without --force: bad input, exit 2.
    let (code, _, err) = run(&["record", "--no-bpf", "-d", "1", "-o", p]);
    assert_eq!(code, 2);
    assert!(err.contains("already exists"), "{err}");
    // Replay it as CSV, compare it with itself.
    let (code, out, _) = run(&["replay", p, "--csv", "memory"]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), rec.len(), "a header and one line per interval");
    let (code, out, err) = run(&["compare", p, p, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for pane in v["panes"].as_array().unwrap() {
        for m in pane["metrics"].as_array().unwrap() {
            assert_eq!(m["delta"], 0.0, "{m}");
        }
    }
}

#[test]
fn sigint_stops_the_recorder_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("int.rec");
    let child = ioscope()
        .args(["record", "--no-bpf", "-i", "0.1", "-o"])
        .arg(&path)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_samples(&path, 2);
    // SAFETY: kill() on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("samples"));
    assert_eq!(Recording::open(&path).unwrap().problem, None);
}

#[test]
fn bad_input_gets_exit_2_or_a_clear_message() {
    for args in [
        &["record"][..],
        &["record", "-o", "/tmp/x.rec", "-i", "0"],
        &["record", "-o", "/tmp/x.rec", "-d", "later"],
        &["replay"],
        &["replay", "x.rec", "--csv", "cpu"],
        &["compare", "a.rec"],
        &["compare", "a.rec@5..1", "b.rec"],
        &["--batch", "replay", "x.rec"],
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.rec");
    std::fs::write(&empty, b"").unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, b"meeting notes\n").unwrap();
    for (file, expected) in [
        (empty.as_path(), "empty"),
        (text.as_path(), "not an ioscope recording"),
        (Path::new("/nonexistent/x.rec"), "cannot read"),
    ] {
        let (code, _, err) = run(&["replay", file.to_str().unwrap(), "--batch"]);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains(expected) && err.starts_with("ioscope: "), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let (code, _, err) = run(&["replay", text.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("not an ioscope recording"), "{err}");
}

/// Issue 23 item 7: a recording streams into a FIFO (with --stream, also with --force, which never
/// replaces the FIFO) and to standard output (`-o -`): nothing tries to fsync a pipe, and what
/// arrives is a whole recording.
#[test]
fn record_streams_into_a_fifo_and_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("stream");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for force in [true, false] {
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        let mut args =
            vec!["record", "--no-bpf", "-i", "0.1", "-d", "1.5", "-o", fifo.to_str().unwrap(), "--stream"];
        if force {
            args.push("--force");
        }
        let (code, _, err) = run(&args);
        assert_eq!(code, 0, "--force {force}: {err}");
        let bytes = reader.join().unwrap();
        let rec = Recording::from_bytes(bytes).unwrap();
        assert!(rec.len() >= 3 && rec.problem.is_none(), "{} samples, {:?}", rec.len(), rec.problem);
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(
            &std::fs::symlink_metadata(&fifo).unwrap().file_type()
        ));
    }
    let out = ioscope().args(["record", "--no-bpf", "-i", "0.1", "-d", "0.5", "-o", "-"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rec = Recording::from_bytes(out.stdout).unwrap();
    assert!(rec.len() >= 3 && rec.problem.is_none());
}

/// Runs ioscope with `args` and returns (exit code, stderr, peak RSS in MB from wait4's rusage).
///
/// The measuring is done by a fresh copy of this test binary ([`measured_child_entry_point`]): a
/// child started by vfork (as `Command` does) takes its parent's peak RSS as its own at exec
/// (the kernel keeps the old mm's high-water mark in the process's maxrss), so spawned from this
/// busy test process the figure was the test binary's peak (141–164 MB with other tests running
/// beside), not ioscope's.
fn run_measured(args: &[&str]) -> (i32, String, f64) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "record_cli::measured_child_entry_point", "--ignored", "--nocapture"])
        .args(["--test-threads=1", "-q"])
        .env("IOSCOPE_MEASURED_ARGS", args.join("\u{1f}"))
        .env("IOSCOPE_MEASURED_BIN", env!("CARGO_BIN_EXE_ioscope"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} from the worker: {text}"))
    };
    let code: i32 = field("MEASURED-CODE=").trim().parse().unwrap();
    let kb: f64 = field("MEASURED-MAXRSS-KB=").trim().parse().unwrap();
    (code, String::from_utf8_lossy(&out.stderr).into_owned(), kb / 1024.0)
}

/// [`run_measured`]'s worker: runs the binary and arguments it is given, passes its stderr on,
/// and prints its exit code and peak RSS.
#[test]
#[ignore = "a worker run by run_measured"]
#[allow(clippy::zombie_processes)] // reaped by wait4, which Child does not know about
fn measured_child_entry_point() {
    let (Some(bin), Some(args)) =
        (std::env::var_os("IOSCOPE_MEASURED_BIN"), std::env::var("IOSCOPE_MEASURED_ARGS").ok())
    else {
        return;
    };
    let mut child = Command::new(bin)
        .args(args.split('\u{1f}'))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: waiting for our own child, with a zeroed rusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { -1 };
    println!("MEASURED-CODE={code}");
    println!("MEASURED-MAXRSS-KB={}", usage.ru_maxrss);
    let _ = &mut child;
}

/// A sparse file of `gib` GiB starting with `head`.
fn sparse_file(path: &Path, head: &[u8], gib: u64) {
    std::fs::write(path, head).unwrap();
    std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(gib << 30).unwrap();
}

/// Issue 23 item 3: inputs are checked before they are read, and read with bounds: a 4 GiB
/// non-recording is refused after its first bytes, a recording followed by 3 GiB of zeros replays
/// its samples, `bench --compare` of a 4 GiB file stops at the cap; each in well under 100 MB.
/// (Devices and FIFOs are not read at all: `readers_refuse_fifos_and_devices_at_once`.)
#[test]
fn big_and_endless_inputs_are_refused_or_read_with_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.bin");
    sparse_file(&junk, b"\x7fELF this is no recording", 4);
    let (code, err, mb) = run_measured(&["replay", junk.to_str().unwrap(), "--json"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not an ioscope recording"), "{err}");
    assert!(mb < 100.0, "replay of a 4 GiB non-recording peaked at {mb:.0} MB");

    let rec = dir.path().join("tail.rec");
    let (code, _, err) = run(&["record", "--no-bpf", "-i", "0.1", "-d", "0.5", "-o", rec.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let len = std::fs::metadata(&rec).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&rec).unwrap().set_len(len + (3 << 30)).unwrap();
    for args in [
        &["replay", rec.to_str().unwrap(), "--json"][..],
        &["compare", rec.to_str().unwrap(), rec.to_str().unwrap(), "--json"],
    ] {
        let (code, err, mb) = run_measured(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(err.contains(&format!("damaged record at byte {len}")), "{err}");
        assert!(mb < 100.0, "{args:?} of a recording with a 3 GiB tail of zeros peaked at {mb:.0} MB");
    }

    let zeros = dir.path().join("zeros.json");
    sparse_file(&zeros, b"", 4);
    let (code, err, mb) = run_measured(&["bench", "--compare", zeros.to_str().unwrap(), "/dev/null"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot read") && err.contains("larger than"), "{err}");
    assert!(mb < 100.0, "bench --compare of a 4 GiB file peaked at {mb:.0} MB");
}

/// Issue 23 item 8: replay and compare keep one sample decoded, not a segment of 60: 62 samples
/// of ~2 MB each (a burst of files makes samples of megabytes; here one long text keeps the test
/// fast) replay and compare in under 100 MB (the old reader held 60 of them, 120 MB).
#[test]
fn replay_and_compare_of_huge_samples_stay_bounded() {
    use ioscope::record::{RecordingHeader, RecordingWriter};
    use ioscope::sample::Sample;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.rec");
    let header = RecordingHeader { interval_s: 1.0, ..Default::default() };
    let mut w = RecordingWriter::create(&path, &header, false).unwrap();
    let mut s = Sample::default();
    for i in 0..62u64 {
        s.mono_ns = 1_000_000_000 * (1 + i);
        s.wall_unix_ms = 1_763_800_000_000 + 1000 * i;
        s.bpf.status.reason = Some(format!("{i}").repeat(2 << 20));
        w.write_sample(&s).unwrap();
    }
    drop(w);
    let p = path.to_str().unwrap();
    for args in [&["replay", p, "--batch"][..], &["compare", p, p]] {
        let (code, err, mb) = run_measured(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(mb < 100.0, "{args:?} peaked at {mb:.0} MB");
    }
}

/// Issue 23 item 9: messages that say what is really wrong.
#[test]
fn wording_of_one_sample_recordings_and_huge_top() {
    use ioscope::record::{RecordingHeader, RecordingWriter};
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one.rec");
    let mut w = RecordingWriter::create(&one, &RecordingHeader::default(), false).unwrap();
    w.write_sample(&ioscope::sample::Sample::default()).unwrap();
    drop(w);
    let (code, _, err) = run(&["replay", one.to_str().unwrap(), "--json"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("holds one sample") && !err.contains("time range"), "{err}");
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/demo/small-vs-large-writes.rec");
    let (code, out, err) = run(&["compare", demo, demo, "--text", "--top", "99999999999999999999"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("more (--top N"), "every metric is shown: {out}");
    let (code, _, err) = run(&["compare", demo, demo, "--top", "x"]);
    assert_eq!(code, 2);
    assert!(err.contains("not a whole number of metrics"), "{err}");
}

/// Runs ioscope with `args`, killing it after `limit`: (exit code or None when it had to be
/// killed, stderr, how long it ran).
fn run_bounded(args: &[&str], limit: Duration) -> (Option<i32>, String, Duration) {
    let start = Instant::now();
    let mut child = ioscope().args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    (code, err, start.elapsed())
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// A file only its owner may read and write, holding "secret".
fn victim(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let victim = dir.join("victim");
    std::fs::write(&victim, "secret").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    victim
}

/// Issue 38.3: a symbolic link planted at `-o` is never written through, with or without --force:
/// one line, exit 2, the link and its target as they were. A hard link to someone else's file is
/// replaced by --force (a new file under that name), never truncated in place.
#[test]
fn record_never_writes_through_a_planted_link() {
    let dir = tempfile::tempdir().unwrap();
    let victim = victim(dir.path());
    let link = dir.path().join("planted.rec");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let l = link.to_str().unwrap();
    for force in [false, true] {
        let mut args = vec!["record", "--no-bpf", "-i", "0.1", "-d", "0.3", "-o", l];
        if force {
            args.push("--force");
        }
        let (code, err, _) = run_bounded(&args, Duration::from_secs(20));
        assert_eq!(code, Some(2), "--force {force}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret", "--force {force}");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    }
    // A dangling link (its target created by the write) is refused too.
    let dangling = dir.path().join("dangling.rec");
    std::os::unix::fs::symlink(dir.path().join("made-by-root"), &dangling).unwrap();
    let (code, err, _) = run_bounded(
        &["record", "--no-bpf", "-d", "0.3", "-o", dangling.to_str().unwrap()],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(!dir.path().join("made-by-root").exists());

    let hard = dir.path().join("hard.rec");
    std::fs::hard_link(&victim, &hard).unwrap();
    let h = hard.to_str().unwrap();
    let (code, err, _) = run_bounded(&["record", "--no-bpf", "-d", "0.3", "-o", h], Duration::from_secs(20));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("already exists") && err.contains("--force"), "{err}");
    let (code, err, _) = run_bounded(
        &["record", "--no-bpf", "-i", "0.1", "-d", "1.5", "-o", h, "--force"],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret");
    assert!(Recording::open(&hard).unwrap().len() >= 2);
    // What is left in the directory: the victim, the two links, the new recording; no temporary file.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);
}

/// Issue 38.3: a FIFO or a device at `-o` is written only when --stream asks for it, and --force
/// never replaces one; waiting for a FIFO's reader ends with -d, SIGINT and SIGTERM.
#[test]
fn record_writes_a_fifo_only_when_asked_and_never_waits_unbounded() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("planted");
    mkfifo(&fifo);
    let f = fifo.to_str().unwrap();
    for args in [
        &["record", "--no-bpf", "-d", "3", "-o", f][..],
        &["record", "--no-bpf", "-d", "3", "-o", f, "--force"],
        &["record", "--no-bpf", "-d", "3", "-o", "/dev/null", "--force"],
    ] {
        let (code, err, took) = run_bounded(args, Duration::from_secs(10));
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("--stream"), "{err}");
        assert!(took < Duration::from_secs(2), "{args:?} took {took:?}");
    }
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    // Asked for, with no reader: -d bounds the wait.
    let (code, err, took) =
        run_bounded(&["record", "--no-bpf", "-d", "1", "-o", f, "--stream"], Duration::from_secs(10));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no reader"), "{err}");
    assert!(took < Duration::from_secs(4), "-d 1 with no reader took {took:?}");
    // ... and so do SIGINT and SIGTERM.
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let start = Instant::now();
        let mut child = ioscope()
            .args(["record", "--no-bpf", "-o", f, "--stream"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        // SAFETY: kill() on our own child's pid.
        unsafe { libc::kill(child.id() as i32, sig) };
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if start.elapsed() > Duration::from_secs(10) {
                child.kill().unwrap();
                panic!("signal {sig} did not end the wait for a reader");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Issue 38.3: replay, compare and bench --compare refuse a FIFO or a device at once with one line
/// and exit 2 (they used to block in open() forever).
#[test]
fn readers_refuse_fifos_and_devices_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("planted.rec");
    mkfifo(&fifo);
    let f = fifo.to_str().unwrap();
    for args in [
        &["replay", f, "--json"][..],
        &["replay", "/dev/null", "--json"],
        &["compare", f, f, "--json"],
        &["bench", "--compare", f, f],
        &["bench", "--compare", "/dev/zero", "/dev/null"],
    ] {
        let (code, err, took) = run_bounded(args, Duration::from_secs(10));
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("not a regular file"), "{args:?}: {err}");
        assert!(took < Duration::from_secs(2), "{args:?} took {took:?}");
    }
}

/// Issue 38.3: `bench -o` never writes through a link either, and --force never replaces a FIFO.
/// (Refused before anything runs, so no I/O is measured here.)
#[test]
fn bench_output_refuses_links_and_fifos_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let victim = victim(dir.path());
    let data = dir.path().join("data");
    std::fs::write(&data, vec![1u8; 1 << 16]).unwrap();
    let link = dir.path().join("report.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let fifo = dir.path().join("fifo.json");
    mkfifo(&fifo);
    for out in [&link, &fifo] {
        let args = [
            "bench",
            data.to_str().unwrap(),
            "--rw",
            "read",
            "--bs",
            "4k",
            "--modes",
            "buffered",
            "--runtime",
            "0.1",
            "-o",
            out.to_str().unwrap(),
            "--force",
        ];
        let (code, err, took) = run_bounded(&args, Duration::from_secs(10));
        assert_eq!(code, Some(2), "{out:?}: {err}");
        assert!(took < Duration::from_secs(2), "{out:?} took {took:?}");
        assert!(!err.contains("\n[1/"), "{err}");
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret");
}

/// Issue 38.3: a reader that opens the FIFO and then stops reading cannot hold the recorder either:
/// a write blocked on the full pipe ends with -d (plus its grace) and with SIGTERM.
#[test]
fn a_stalled_reader_does_not_hold_the_recorder() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("stalled");
    mkfifo(&fifo);
    let f = fifo.to_str().unwrap().to_string();
    for sig in [None, Some(libc::SIGTERM)] {
        // The reader: holds the FIFO open (read and write, so opening does not wait), shrinks the
        // pipe to one page and fills it, and never reads.
        let mut reader = std::fs::OpenOptions::new().read(true).write(true).open(&fifo).unwrap();
        // SAFETY: fcntl on our own descriptor.
        let size = unsafe { libc::fcntl(reader.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) };
        assert!(size >= 4096);
        std::io::Write::write_all(&mut reader, &vec![0u8; size as usize]).unwrap();
        let start = Instant::now();
        let mut child = ioscope()
            .args(["record", "--no-bpf", "-i", "0.1", "-o", &f, "--stream"])
            .args(if sig.is_none() { &["-d", "1"][..] } else { &[] })
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if let Some(sig) = sig {
            std::thread::sleep(Duration::from_millis(1500));
            // SAFETY: kill() on our own child's pid.
            unsafe { libc::kill(child.id() as i32, sig) };
        }
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > Duration::from_secs(15) {
                child.kill().unwrap();
                panic!("{sig:?}: the recorder stayed blocked on a reader that does not read");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(start.elapsed() < Duration::from_secs(8), "{sig:?}: {:?}", start.elapsed());
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(1), "{sig:?}: {err}");
        assert!(err.contains("not reading"), "{sig:?}: {err}");
        drop(reader);
    }
}
