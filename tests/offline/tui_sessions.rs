//! The replay TUI and the live TUI's `R` key, end to end: the real binary in a detached tmux
//! session, driven by keys, read back with `tmux capture-pane`. Every wait polls for what the
//! screen must show (with a generous limit), so a slow machine is not a failure.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ioscope::record::Recording;

/// A detached tmux session, killed on drop (also when an assertion fails).
pub(crate) struct Tmux {
    name: String,
}

impl Tmux {
    pub(crate) fn start(test: &str, cwd: &Path, command: &str) -> Option<Tmux> {
        Tmux::start_sized(test, cwd, command, (160, 48))
    }

    /// A session of `size` (columns, rows).
    pub(crate) fn start_sized(test: &str, cwd: &Path, command: &str, size: (u16, u16)) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            common::skip(test, "tmux is not installed");
            return None;
        }
        let name = format!("ioscope-test-{test}-{}", std::process::id());
        let status = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &name,
                "-x",
                &size.0.to_string(),
                "-y",
                &size.1.to_string(),
                "-c",
            ])
            .arg(cwd)
            // Keep the pane open after ioscope exits, so its last words can be read.
            .arg(format!("{command}; echo IOSCOPE-EXIT=$?; sleep 60"))
            .status()
            .unwrap();
        assert!(status.success());
        Some(Tmux { name })
    }

    pub(crate) fn screen(&self) -> String {
        let out = Command::new("tmux").args(["capture-pane", "-p", "-t", &self.name]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub(crate) fn keys(&self, keys: &[&str]) {
        let status = Command::new("tmux").args(["send-keys", "-t", &self.name]).args(keys).status().unwrap();
        assert!(status.success());
    }

    /// Polls until the screen satisfies `ok`, or fails with the screen after 30 s.
    pub(crate) fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "waited for {what}; the screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["kill-session", "-t", &self.name]).status();
    }
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ioscope")
}

#[test]
fn replay_tui_steps_jumps_plays_and_quits() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo/small-vs-large-writes.rec");
    let n = Recording::open(&demo).unwrap().len();
    let dir = tempfile::tempdir().unwrap();
    let cmd = format!("{} replay {}", bin(), demo.display());
    let Some(t) = Tmux::start("replay", dir.path(), &cmd) else { return };
    t.wait_for("the first frame", |s| s.contains("REPLAY") && s.contains(&format!("#2/{n}")));
    t.keys(&["Right", "Right"]);
    t.wait_for("two steps", |s| s.contains(&format!("#4/{n}")));
    t.keys(&["End"]);
    t.wait_for("the end", |s| s.contains(&format!("#{n}/{n}")));
    t.keys(&["t", "5", "Enter"]);
    let s = t.wait_for("go to 5 s", |s| s.contains("0:05/"));
    assert!(s.contains("⏸ pause"));
    // Panes keep their keys: focus the processes and sort by write.
    t.keys(&["3", "s", "s"]);
    t.wait_for("sorted by write", |s| s.contains("sort write"));
    t.keys(&[">", ">", ">", ">", "Space"]);
    t.wait_for("playing at ×16 to the end", |s| s.contains(&format!("#{n}/{n}")) && s.contains("×16"));
    t.keys(&["q"]);
    t.wait_for("a clean exit", |s| s.contains("IOSCOPE-EXIT=0"));
}

#[test]
fn live_tui_r_records_the_session() {
    // --no-bpf: no eBPF and no sudo prompt, so this runs unprivileged too.
    let dir = tempfile::tempdir().unwrap();
    let cmd = format!("{} --no-bpf -i 0.25", bin());
    let Some(t) = Tmux::start("record", dir.path(), &cmd) else { return };
    t.wait_for("the first frame", |s| s.contains("Devices"));
    t.keys(&["R"]);
    t.wait_for("the REC indicator", |s| s.contains("● REC ioscope-"));
    // At least four samples written: the indicator counts them.
    t.wait_for("four samples", |s| {
        s.split("samples")
            .next()
            .and_then(|l| l.split_whitespace().last())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
            >= 4
    });
    t.keys(&["b"]);
    t.wait_for("the baseline view", |s| s.contains("Δ vs baseline"));
    t.keys(&["R"]);
    let s = t.wait_for("the stop notice", |s| s.contains("recorded") && !s.contains("● REC"));
    // The notice sits right of the PSI figures, never over them, and ends with the file's name.
    let line = s.lines().find(|l| l.contains("recorded")).expect("the notice's line");
    assert!(line.contains("PSI") && line.contains(".rec"), "{line}");
    t.keys(&["q"]);
    t.wait_for("a clean exit", |s| s.contains("IOSCOPE-EXIT=0"));
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let mut rec = Recording::open(&files[0]).unwrap();
    assert!(rec.len() >= 4 && rec.problem.is_none());
    assert_eq!(rec.header.interval_s, 0.25);
    assert!(rec.sample(rec.len() - 1).unwrap().processes.len() > 1);
}

/// The pane's tty settings, as `stty -a` prints them.
fn stty_of(t: &Tmux) -> String {
    let tty = Command::new("tmux").args(["display", "-p", "-t", &t.name, "#{pane_tty}"]).output().unwrap();
    let tty = String::from_utf8_lossy(&tty.stdout).trim().to_string();
    let out = Command::new("stty").args(["-F", &tty, "-a"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The newest ioscope under the pane (an earlier one may still be exiting).
fn ioscope_in_pane(t: &Tmux) -> i32 {
    let top = Command::new("tmux").args(["display", "-p", "-t", &t.name, "#{pane_pid}"]).output().unwrap();
    let mut todo = vec![String::from_utf8_lossy(&top.stdout).trim().to_string()];
    let mut found = Vec::new();
    while let Some(pid) = todo.pop() {
        let kids = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        for kid in kids.split_whitespace() {
            if std::fs::read_to_string(format!("/proc/{kid}/comm")).is_ok_and(|c| c.trim() == "ioscope") {
                found.push(kid.parse::<i32>().unwrap());
            }
            todo.push(kid.to_string());
        }
    }
    found.into_iter().max().expect("ioscope runs in the pane")
}

/// Issue 23 item 4: job control like top and htop, in bash. Ctrl-Z gives the terminal back (the
/// shell says Stopped), `fg` redraws in raw mode (keys do not echo, q needs no Enter); a SIGSTOP
/// then SIGCONT without `fg` leaves the process able to end on SIGTERM.
#[test]
fn ctrl_z_suspends_and_fg_resumes_in_raw_mode() {
    let dir = tempfile::tempdir().unwrap();
    let Some(t) = Tmux::start("suspend", dir.path(), "PS1='$ ' bash --norc --noprofile -i") else { return };
    t.wait_for("the shell", |s| s.lines().any(|l| l.trim() == "$"));
    t.keys(&[&format!("{} --no-bpf -i 0.5", bin()), "Enter"]);
    t.wait_for("the first frame", |s| s.contains("Devices"));
    t.keys(&["C-z"]);
    t.wait_for("the shell's Stopped", |s| s.contains("Stopped") && !s.contains("Devices"));
    t.keys(&["fg", "Enter"]);
    t.wait_for("the redrawn screen", |s| s.contains("Devices"));
    let stty = stty_of(&t);
    assert!(stty.contains("-icanon") && stty.contains("-echo ") && stty.contains("-isig"), "{stty}");
    t.keys(&["q"]);
    t.wait_for("the prompt after q", |s| s.lines().any(|l| l.trim() == "$") && !s.contains("Devices"));

    t.keys(&[&format!("{} --no-bpf -i 0.5", bin()), "Enter"]);
    t.wait_for("the first frame", |s| s.contains("Devices"));
    let pid = ioscope_in_pane(&t);
    // SAFETY: signalling the test's own ioscope.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    t.wait_for("the shell's Stopped", |s| s.contains("Stopped"));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    std::thread::sleep(Duration::from_millis(300));
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let start = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z")
    {
        assert!(start.elapsed() < Duration::from_secs(10), "SIGTERM did not end the continued process");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 38.3: in a directory where another user planted FIFOs under the names of the next
/// minute's recordings, `R` records to a free name at once (it used to freeze in open()), and
/// the notice gives the file's absolute path. In a world-writable directory `R` refuses, saying
/// how to choose one; `--record-dir` chooses one.
#[test]
fn live_tui_r_skips_planted_fifos_and_refuses_a_world_writable_directory() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let offset = ioscope::util::local_utc_offset_s();
    let now_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    for s in -5..90i64 {
        let name = ioscope::record::live::file_name(host.trim(), (now_ms as i64 + s * 1000) as u64, offset);
        let c = std::ffi::CString::new(dir.path().join(name).to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }
    let cmd = format!("{} --no-bpf -i 0.25", bin());
    let Some(t) = Tmux::start("planted", dir.path(), &cmd) else { return };
    t.wait_for("the first frame", |s| s.contains("Devices"));
    t.keys(&["R"]);
    t.wait_for("the REC indicator", |s| s.contains("● REC "));
    t.keys(&["R"]);
    let s = t.wait_for("the stop notice", |s| s.contains("recorded") && !s.contains("● REC"));
    // The absolute path (the notice is cut in its middle to the room right of the PSI figures).
    assert!(s.contains(&format!("{}/ioscope-", dir.path().display())), "{s}");
    t.keys(&["q"]);
    t.wait_for("a clean exit", |s| s.contains("IOSCOPE-EXIT=0"));
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| std::fs::symlink_metadata(p).unwrap().file_type().is_file())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(!Recording::open(&files[0]).unwrap().is_empty());
    assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| {
        let p = e.unwrap().path();
        p == files[0] || std::fs::symlink_metadata(&p).unwrap().file_type().is_fifo()
    }));
    drop(t);

    // A world-writable current directory: refused, nothing written.
    let open = tempfile::tempdir().unwrap();
    std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let Some(t) = Tmux::start("worldwritable", open.path(), &cmd) else { return };
    t.wait_for("the first frame", |s| s.contains("Devices"));
    t.keys(&["R"]);
    let s = t.wait_for("the refusal", |s| s.contains("world-writable"));
    assert!(s.contains("--record-dir"), "{s}");
    assert!(!s.contains("● REC"), "{s}");
    t.keys(&["q"]);
    t.wait_for("a clean exit", |s| s.contains("IOSCOPE-EXIT=0"));
    assert_eq!(std::fs::read_dir(open.path()).unwrap().count(), 0);
    drop(t);

    // --record-dir chooses the directory.
    let cmd = format!("{} --no-bpf -i 0.25 --record-dir {}", bin(), dir.path().display());
    let Some(t) = Tmux::start("recorddir", open.path(), &cmd) else { return };
    t.wait_for("the first frame", |s| s.contains("Devices"));
    t.keys(&["R"]);
    t.wait_for("the REC indicator", |s| s.contains("● REC "));
    t.keys(&["R"]);
    t.wait_for("the stop notice", |s| s.contains("recorded") && !s.contains("● REC"));
    t.keys(&["q"]);
    t.wait_for("a clean exit", |s| s.contains("IOSCOPE-EXIT=0"));
    assert_eq!(std::fs::read_dir(open.path()).unwrap().count(), 0);
}

/// Whether `pid` is a process that has not ended (a zombie has).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.contains(") Z") && !s.contains(") X"))
}

/// The TUI's header line and its first pane: a frame drawn, not the shell's screen.
fn drawn(s: &str) -> bool {
    s.lines().next().is_some_and(|l| l.contains("ioscope") && l.contains("help")) && s.contains("Devices")
}

/// Issue 38 item 4: Ctrl-Z then `fg` twenty times in bash. Each resume redraws the whole screen
/// without asking the terminal anything: a cursor-position query made while the event reader
/// owns stdin timed out 2 s after `fg` ("The cursor position could not be read within a normal
/// duration") and ended the TUI with exit code 1 in 5 of 6 trials. Each round waits 2.5 s after
/// `fg` with the process alive and its screen drawn; then `q` exits 0 and the terminal is back in
/// cooked mode.
#[test]
fn ctrl_z_and_fg_twenty_times_keep_the_tui_running() {
    const ROUNDS: usize = 20;
    const AFTER_FG: Duration = Duration::from_millis(2500);
    let dir = tempfile::tempdir().unwrap();
    let Some(t) = Tmux::start("fg20", dir.path(), "PS1='$ ' bash --norc --noprofile -i") else { return };
    t.wait_for("the shell", |s| s.lines().any(|l| l.trim() == "$"));
    t.keys(&[&format!("{} --no-bpf -i 0.5", bin()), "Enter"]);
    t.wait_for("the first frame", drawn);
    let pid = ioscope_in_pane(&t);
    for round in 1..=ROUNDS {
        t.keys(&["C-z"]);
        t.wait_for(&format!("round {round}: the shell's Stopped"), |s| s.contains("Stopped") && !drawn(s));
        // Ctrl-L: readline clears the screen, so the next round's "Stopped" is its own.
        t.keys(&["C-l"]);
        t.wait_for(&format!("round {round}: the cleared shell"), |s| !s.contains("Stopped"));
        let fg = Instant::now();
        t.keys(&["fg", "Enter"]);
        t.wait_for(&format!("round {round}: the redrawn screen"), drawn);
        std::thread::sleep(AFTER_FG.saturating_sub(fg.elapsed()));
        assert!(alive(pid), "round {round}: ioscope ended after fg; the screen:\n{}", t.screen());
        let s = t.screen();
        assert!(drawn(&s), "round {round}: {AFTER_FG:?} after fg the screen is not the TUI's:\n{s}");
    }
    let stty = stty_of(&t);
    assert!(stty.contains("-icanon") && stty.contains("-echo "), "raw mode after the last fg: {stty}");
    t.keys(&["q"]);
    t.wait_for("the prompt after q", |s| s.lines().any(|l| l.trim() == "$") && !drawn(s));
    // Bash takes a job's tty settings as it left them: `stty` run next shows what ioscope
    // restored (readline's own mode applies only while it reads a line).
    t.keys(&["echo IOSCOPE-EXIT=$? TTY=$(stty -a | tr -s ' ;' '\\n\\n' | grep -x -e '-\\?icanon' -e '-\\?echo' -e '-\\?isig' | tr '\\n' ,)", "Enter"]);
    let said = |s: &str| s.lines().find(|l| l.starts_with("IOSCOPE-EXIT=")).map(str::to_string);
    let s = t.wait_for("the exit code", |s| said(s).is_some());
    assert_eq!(said(&s).unwrap().trim_end(), "IOSCOPE-EXIT=0 TTY=isig,icanon,echo,", "after q:\n{s}");
}
