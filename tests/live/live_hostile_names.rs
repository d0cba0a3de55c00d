//! Live test (root only) of issue 38.1's repro: a copy of dd named `ESC ] 0 ; EXEC BEL dd` (an
//! OSC window-title sequence) writes a file whose name holds a newline and a clear-screen while
//! `ioscope --batch -n 2` runs. Nothing of the sequences may reach stdout, no line may be forged,
//! and the names must be there, escaped.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;

const COMM: &str = "\x1b]0;EXEC\x07dd";
const FILE: &str = "out\nFORGED\x1b[2J";

#[test]
fn batch_shows_a_hostile_process_and_file_name_escaped() {
    let _group = common::live_group(module_path!());
    if !common::require_root("live_hostile_names") {
        return;
    }
    let dir = tempfile::Builder::new().prefix("ioscope-hostile").tempdir_in("/var/tmp").unwrap();
    let dd = dir.path().join(COMM);
    std::fs::copy("/usr/bin/dd", &dd).unwrap();
    let out = dir.path().join(FILE);
    // dd writes what the test feeds it, synchronously, for the whole of ioscope's run.
    let mut writer = Command::new(&dd)
        .arg(format!("of={}", std::str::from_utf8(out.as_os_str().as_bytes()).unwrap()))
        .args(["oflag=dsync", "bs=64k", "status=none"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = writer.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let chunk = vec![0u8; 65536];
        let end = Instant::now() + Duration::from_secs(4);
        while Instant::now() < end {
            if stdin.write_all(&chunk).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(40));
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let run = Command::new(env!("CARGO_BIN_EXE_ioscope"))
        .args(["--batch", "-n", "2", "--interval", "1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    feeder.join().unwrap();
    assert!(writer.wait().unwrap().success());
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let text = String::from_utf8(run.stdout).expect("the report is UTF-8");
    for (what, bad) in [("ESC", '\x1b'), ("BEL", '\x07'), ("CR", '\r'), ("CSI", '\u{9b}')] {
        assert!(!text.contains(bad), "{what} reached stdout:\n{text}");
    }
    assert!(!text.lines().any(|l| l.trim_start().starts_with("FORGED")), "a file name forged a line:\n{text}");
    let shown = ioscope::untrusted::escape(COMM);
    assert!(text.contains(&*shown), "the process {shown} is not shown:\n{text}");
    if text.contains("Files by disk I/O") {
        let file = ioscope::untrusted::escape(FILE);
        assert!(text.contains(&*file), "the file {file} is not shown:\n{text}");
    }
}
