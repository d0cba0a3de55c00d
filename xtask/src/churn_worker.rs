//! One short-lived process's share of a file churn, written once for `cargo xtask churn
//! --short-lived` (xtask/src/churn.rs) and the kernel lab's `churn_paths` check
//! (xtask/src/bin/lab-guest.rs), both through xtask's library (src/lib.rs), and run it in processes of
//! their own, each exiting when done.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;

/// Files each worker process handles.
pub const PER_WORKER: u64 = 100;

/// Files FIRST..FIRST+N of 4 KiB in DIR/d<i % 100>/f<i>: created, synced (syncfs), dropped from
/// the page cache, read back (disk reads) and deleted.
pub fn churn_worker(dir: &str, first: u64, n: u64) -> Result<(), String> {
    let block = [0x5au8; 4096];
    let paths: Vec<String> = (first..first + n).map(|i| format!("{dir}/d{}/f{i}", i % 100)).collect();
    for p in &paths {
        let parent = std::path::Path::new(p).parent().unwrap_or(std::path::Path::new(dir));
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        std::fs::File::create(p).and_then(|mut f| f.write_all(&block)).map_err(|e| format!("{p}: {e}"))?;
    }
    let d = std::fs::File::open(dir).map_err(|e| format!("{dir}: {e}"))?;
    // SAFETY: syncfs on a descriptor we own.
    if unsafe { libc::syncfs(d.as_raw_fd()) } != 0 {
        return Err(format!("syncfs({dir}): {}", std::io::Error::last_os_error()));
    }
    for p in &paths {
        let f = std::fs::File::open(p).map_err(|e| format!("{p}: {e}"))?;
        // SAFETY: advice on a descriptor we own.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(format!("posix_fadvise({p}): error {rc}"));
        }
    }
    let mut buf = [0u8; 4096];
    for p in &paths {
        let mut f = std::fs::File::open(p).map_err(|e| format!("{p}: {e}"))?;
        f.read(&mut buf).map_err(|e| format!("{p}: {e}"))?;
    }
    for p in &paths {
        std::fs::remove_file(p).map_err(|e| format!("{p}: {e}"))?;
    }
    Ok(())
}

/// Runs `exe args… DIR FIRST N` for each share of `files`, one after another, each to its end.
pub fn run_workers(exe: &std::path::Path, args: &[&str], dir: &str, files: u64) -> Result<u64, String> {
    let mut spawned = 0;
    for first in (0..files).step_by(PER_WORKER as usize) {
        let n = PER_WORKER.min(files - first);
        let out = std::process::Command::new(exe)
            .args(args)
            .args([dir, &first.to_string(), &n.to_string()])
            .stderr(std::process::Stdio::piped())
            .output()
            .map_err(|e| format!("starting a churn worker: {e}"))?;
        if !out.status.success() {
            return Err(format!("churn worker {first}: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        spawned += 1;
    }
    Ok(spawned)
}
