//! Small, forgiving file readers shared by the collectors: a missing or unreadable file is `None`,
//! never an error, because a sample with one part empty is still useful.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use crate::util::pread_all;

/// The whole file as text, or None when it cannot be read.
pub fn text(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// A file holding one unsigned integer (sysfs attributes, /proc/sys values).
pub fn u64_file(path: &Path) -> Option<u64> {
    text(path)?.trim().parse().ok()
}

/// How long [`Files`] keeps a file open that no sample read (a device gone, a setting no longer
/// asked for).
pub const KEEP_UNUSED: Duration = Duration::from_secs(10);

/// Where the collectors read their procfs and sysfs files: opened and closed on every read
/// ([`Files::one_shot`]: fixtures, one-off reads), or kept open and read again with `pread` from
/// offset 0 ([`Files::kept`]: the live Sampler). procfs and sysfs generate a file's text afresh on
/// each read from offset 0, so a kept file reads what a fresh open would, without the open, the
/// `statx` std's `read_to_string` adds, and the close: three of the four system calls per file,
/// every sample. A kept file that cannot be read any more (a device removed: sysfs answers
/// ENODEV) is closed and opened again once; files no read asked for in [`KEEP_UNUSED`] are closed.
/// How long a kept [`Files`] trusts that a file it could not open is still missing: a cgroup
/// controller enabled or a file created shows within it, as a changed setting does.
pub const MISSING_FRESH: Duration = crate::util::SLOW_REFRESH;

#[derive(Default)]
pub struct Files {
    keep: bool,
    open: HashMap<PathBuf, (File, Instant)>,
    /// Kept files that could not be opened, and when: not tried again for [`MISSING_FRESH`] (a
    /// v2 root cgroup has no `io.stat`, a whole disk no `partition`: a failed path lookup per
    /// file and sample otherwise).
    missing: HashMap<PathBuf, Instant>,
    buf: Vec<u8>,
    swept: Option<Instant>,
}

impl Files {
    /// Opens, reads and closes every file.
    pub fn one_shot() -> Files {
        Files::default()
    }

    /// Keeps files open across reads (only for the live /proc and /sys: a fixture file replaced
    /// by another would still be read through the old one).
    pub fn kept() -> Files {
        Files { keep: true, ..Files::default() }
    }

    /// The whole file as text, or None when it cannot be read.
    pub fn text(&mut self, path: &Path) -> Option<&str> {
        if !self.keep {
            self.buf = std::fs::read(path).ok()?;
            return std::str::from_utf8(&self.buf).ok();
        }
        let now = Instant::now();
        self.sweep(now);
        let fresh = match self.open.get_mut(path) {
            Some((f, used)) => {
                *used = now;
                pread_all(f, &mut self.buf).is_err()
            }
            None => true,
        };
        if fresh {
            self.open.remove(path);
            if self.missing.get(path).is_some_and(|t| now.duration_since(*t) < MISSING_FRESH) {
                return None;
            }
            let Ok(f) = File::open(path) else {
                self.missing.insert(path.to_path_buf(), now);
                return None;
            };
            self.missing.remove(path);
            pread_all(&f, &mut self.buf).ok()?;
            self.open.insert(path.to_path_buf(), (f, now));
        }
        std::str::from_utf8(&self.buf).ok()
    }

    /// A file holding one unsigned integer.
    pub fn u64(&mut self, path: &Path) -> Option<u64> {
        self.text(path)?.trim().parse().ok()
    }

    /// A file holding one line of text, without its trailing newline.
    pub fn line(&mut self, path: &Path) -> Option<String> {
        Some(self.text(path)?.trim_end().to_string())
    }

    /// How many files are kept open.
    pub fn kept_open(&self) -> usize {
        self.open.len()
    }

    fn sweep(&mut self, now: Instant) {
        if self.swept.is_some_and(|t| now.duration_since(t) < KEEP_UNUSED) {
            return;
        }
        self.swept = Some(now);
        self.open.retain(|_, (_, used)| now.duration_since(*used) < KEEP_UNUSED);
        self.missing.retain(|_, at| now.duration_since(*at) < MISSING_FRESH);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept file is read again from its start (a live /proc file changes under it) and reads
    /// what a fresh open reads; a file that goes away is None, not its last text.
    #[test]
    fn kept_files_read_the_current_text() {
        let mut kept = Files::kept();
        let uptime = |f: &mut Files| f.text(Path::new("/proc/uptime")).map(str::to_string);
        let a = uptime(&mut kept).expect("/proc/uptime");
        std::thread::sleep(Duration::from_millis(30));
        let b = uptime(&mut kept).expect("/proc/uptime again");
        assert_eq!(kept.kept_open(), 1);
        assert_ne!(a, b, "the second read is the kernel's current text");
        let first: f64 = b.split_whitespace().next().unwrap().parse().unwrap();
        let fresh: f64 =
            text(Path::new("/proc/uptime")).unwrap().split_whitespace().next().unwrap().parse().unwrap();
        assert!((fresh - first).abs() < 1.0, "{first} vs {fresh}");
        let missing = Path::new("/proc/no-such-file");
        assert_eq!(kept.text(missing), None);
        assert_eq!(kept.missing.len(), 1, "a missing kept file is remembered");
        assert_eq!(
            Files::one_shot().u64(Path::new("/proc/sys/kernel/pid_max")),
            u64_file(Path::new("/proc/sys/kernel/pid_max"))
        );
    }

    #[test]
    fn a_missing_kept_file_is_tried_again_after_missing_fresh() {
        let dir = std::env::temp_dir().join(format!("ioscope-missing-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("later");
        let mut kept = Files::kept();
        assert_eq!(kept.text(&path), None);
        std::fs::write(&path, "7\n").unwrap();
        // Not looked up again at once: still missing for this reader.
        assert_eq!(kept.u64(&path), None);
        std::thread::sleep(MISSING_FRESH);
        assert_eq!(kept.u64(&path), Some(7), "seen once MISSING_FRESH passed");
        // A one-shot reader never remembers.
        assert_eq!(Files::one_shot().u64(&path), Some(7));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
