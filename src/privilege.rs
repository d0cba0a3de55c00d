//! Getting the privileges eBPF needs, only when they are missing and only by asking.
//!
//! Loading the probes needs root, or CAP_BPF plus CAP_PERFMON (which capabilities count is
//! [`crate::bpf::capabilities`]'s knowledge, reused here). When an interactive run lacks them and `sudo` is there, ioscope re-runs itself
//! through sudo after saying why; if sudo is missing, declined or fails, it carries on without eBPF
//! (the procfs panes still work, the eBPF status says what is missing). Headless runs never prompt.
//!
//! [`decide`] is the whole policy as a pure function; [`elevate_if_needed`] gathers its inputs from
//! the real process and acts on the answer.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::bpf::capabilities::Capabilities;

/// Set (to "1") in the environment of the sudo'd re-run, so it never tries sudo a second time.
pub const REEXEC_MARKER: &str = "IOSCOPE_SUDO_REEXEC";

/// Environment that survives sudo's env reset: the terminal type and colour wishes, where `R`
/// records, and our marker.
const PRESERVED_ENV: &str = "TERM,COLORTERM,NO_COLOR,IOSCOPE_RECORD_DIR,IOSCOPE_SUDO_REEXEC";

/// Everything the decision depends on, read from the process by [`Facts::gather`].
#[derive(Clone, Debug, PartialEq)]
pub struct Facts {
    pub euid_is_root: bool,
    /// The effective capabilities allow loading and attaching tracing programs (CAP_BPF and
    /// CAP_PERFMON, or CAP_SYS_ADMIN), as [`crate::bpf::capabilities`] judges it.
    pub has_bpf_caps: bool,
    /// eBPF was asked for (no `--no-bpf`).
    pub bpf_wanted: bool,
    /// The interactive UI is starting (not `--once`/`--batch`).
    pub interactive: bool,
    pub stdin_is_terminal: bool,
    /// Where `sudo` is, when it is on PATH.
    pub sudo: Option<PathBuf>,
    /// We are the re-run already (the marker is set).
    pub already_reexecuted: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Nothing to do: privileged already, or eBPF not wanted.
    Proceed,
    /// Carry on without the privileges; the reason is for the record (the eBPF status shows its own).
    ProceedUnprivileged(&'static str),
    /// Re-run through this sudo.
    Elevate(PathBuf),
}

/// The policy. Order matters: the "no need" answers come before the "cannot" ones.
pub fn decide(f: &Facts) -> Decision {
    if !f.bpf_wanted || f.euid_is_root || f.has_bpf_caps {
        return Decision::Proceed;
    }
    if f.already_reexecuted {
        return Decision::ProceedUnprivileged("already re-run through sudo and still not privileged");
    }
    if !f.interactive {
        return Decision::ProceedUnprivileged("headless modes never ask for a password");
    }
    if !f.stdin_is_terminal {
        return Decision::ProceedUnprivileged("no terminal to ask for a sudo password on");
    }
    match &f.sudo {
        Some(path) => Decision::Elevate(path.clone()),
        None => Decision::ProceedUnprivileged("sudo is not installed"),
    }
}

/// The first executable file called `name` in the colon-separated `path_var` (as a shell finds it).
pub fn find_in_path(name: &str, path_var: &OsString) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path_var)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

impl Facts {
    pub fn gather(bpf_wanted: bool, interactive: bool) -> Facts {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        Facts {
            euid_is_root: euid == 0,
            has_bpf_caps: Capabilities::current().missing_for_tracing().is_none(),
            bpf_wanted,
            interactive,
            stdin_is_terminal: std::io::stdin().is_terminal(),
            sudo: std::env::var_os("PATH").and_then(|p| find_in_path("sudo", &p)),
            already_reexecuted: std::env::var_os(REEXEC_MARKER).is_some(),
        }
    }
}

/// Re-runs ioscope through sudo when [`decide`] says so. Returns only when we carry on in this
/// process (no need, or sudo missing/declined/failed); on success this process *becomes* the sudo'd
/// ioscope (exec), so its exit status and signals are the user's directly.
pub fn elevate_if_needed(bpf_wanted: bool, interactive: bool) {
    let Decision::Elevate(sudo) = decide(&Facts::gather(bpf_wanted, interactive)) else { return };
    eprintln!(
        "ioscope: the eBPF panes need root (or CAP_BPF and CAP_PERFMON); asking sudo. \
         Run with --no-bpf to skip this and see the procfs panes only."
    );
    if !sudo_validates(&sudo) {
        eprintln!("ioscope: sudo did not succeed; continuing without eBPF.");
        return;
    }
    let err = reexec_through(&sudo);
    eprintln!("ioscope: could not run sudo ({err}); continuing without eBPF.");
}

/// `sudo -v`: asks for the password (if sudo wants one) without running anything. Done as a child
/// we wait for, so that a refusal, a wrong password or Ctrl-C at the prompt leaves us running
/// unprivileged instead of ending the program; the exec that follows reuses sudo's cached
/// credentials and does not ask again (unless sudoers sets timestamp_timeout=0).
fn sudo_validates(sudo: &Path) -> bool {
    let Ok(mut child) = Command::new(sudo).arg("-v").spawn() else { return false };
    // Ctrl-C at the password prompt goes to the whole foreground process group: ignore it here
    // while sudo handles it, so "declined" means "carry on". The child was forked before this
    // point, so it keeps the default disposition.
    // SAFETY: installing SIG_IGN and restoring the previous handler touches no Rust state.
    let previous = unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    let ok = child.wait().is_ok_and(|s| s.success());
    // SAFETY: as above; `previous` came from signal() itself.
    unsafe { libc::signal(libc::SIGINT, previous) };
    ok
}

/// Replaces this process with `sudo --preserve-env=… <this exe> <same args>`. Returns only on error.
fn reexec_through(sudo: &Path) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return e,
    };
    Command::new(sudo)
        .arg(format!("--preserve-env={PRESERVED_ENV}"))
        .arg("--")
        .arg(exe)
        .args(std::env::args_os().skip(1))
        .env(REEXEC_MARKER, "1")
        .exec()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A normal user at a terminal on a laptop with sudo installed: the one case that elevates.
    fn laptop() -> Facts {
        Facts {
            euid_is_root: false,
            has_bpf_caps: false,
            bpf_wanted: true,
            interactive: true,
            stdin_is_terminal: true,
            sudo: Some(PathBuf::from("/usr/bin/sudo")),
            already_reexecuted: false,
        }
    }

    #[test]
    fn unprivileged_interactive_user_with_sudo_elevates() {
        assert_eq!(decide(&laptop()), Decision::Elevate(PathBuf::from("/usr/bin/sudo")));
    }

    #[test]
    fn root_capabilities_or_no_bpf_need_nothing() {
        assert_eq!(decide(&Facts { euid_is_root: true, ..laptop() }), Decision::Proceed);
        assert_eq!(decide(&Facts { has_bpf_caps: true, ..laptop() }), Decision::Proceed);
        assert_eq!(decide(&Facts { bpf_wanted: false, ..laptop() }), Decision::Proceed);
        // Root without sudo installed (this VM, containers): still just proceed.
        assert_eq!(decide(&Facts { euid_is_root: true, sudo: None, ..laptop() }), Decision::Proceed);
    }

    #[test]
    fn never_prompts_without_a_terminal_headless_or_twice() {
        for f in [
            Facts { stdin_is_terminal: false, ..laptop() },
            Facts { interactive: false, ..laptop() },
            Facts { already_reexecuted: true, ..laptop() },
            Facts { sudo: None, ..laptop() },
        ] {
            assert!(matches!(decide(&f), Decision::ProceedUnprivileged(_)), "{f:?}");
        }
    }

    #[test]
    fn find_in_path_wants_an_executable_file() {
        use std::os::unix::fs::PermissionsExt;
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let plain = a.path().join("sudo");
        std::fs::write(&plain, "").unwrap(); // not executable: skipped
        let exe = b.path().join("sudo");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths([a.path(), b.path()]).unwrap();
        assert_eq!(find_in_path("sudo", &path), Some(exe));
        assert_eq!(find_in_path("sudo", &std::env::join_paths([a.path()]).unwrap()), None);
    }
}
