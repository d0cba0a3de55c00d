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
///
/// Descriptors are bounded: at most [`MAX_KEPT`] files are kept (the ones read every sample;
/// what is read once a second or less, such as each device's settings, is read through
/// [`Files::unkept`]), and when an open fails for want of descriptors (EMFILE, ENFILE) the kept
/// files are closed and the open tried once more. A read that still fails so is counted
/// ([`Files::out_of_fds`]): the collector marks its part of the sample unavailable rather than
/// leave it blank as if the kernel had nothing (see [`crate::sample::Unavailable`]).
/// How long a kept [`Files`] trusts that a file it could not open is still missing: a cgroup
/// controller enabled or a file created shows within it, as a changed setting does.
pub const MISSING_FRESH: Duration = crate::util::SLOW_REFRESH;

/// The most files a kept [`Files`] holds open.
pub const MAX_KEPT: usize = 64;

/// Why a part of a sample could not be read when an open failed with EMFILE or ENFILE.
pub const OUT_OF_FDS: &str = "too many open files";

/// The open or read failed for want of file descriptors (the process's or the system's).
fn is_out_of_fds(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// How a kept file is read: what tells its end ([`Files::text`], [`Files::record`],
/// [`Files::lines`]).
#[derive(Clone, Copy)]
enum Shape {
    Records,
    OneRecord,
    Lines,
}

/// The longest line [`Files::lines`] expects (a /proc/diskstats line of 20 fields is ~200 bytes).
const LONGEST_LINE: usize = 1024;
/// The smallest buffer a seq_file fills per read (a page).
const SEQ_PAGE: usize = 4096;

impl Shape {
    fn read<'a>(self, f: &File, buf: &'a mut Vec<u8>) -> std::io::Result<&'a [u8]> {
        match self {
            Shape::Records => pread_all(f, buf),
            Shape::OneRecord => crate::util::pread_whole(f, buf),
            // The first read ended well short of a page: the next line did not stop it, the end
            // of the file did.
            Shape::Lines => crate::util::pread_until(f, buf, |n, _| n + LONGEST_LINE < SEQ_PAGE),
        }
    }
}

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
    /// Reads that failed for want of file descriptors, ever.
    out_of_fds: u64,
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

    /// The whole file as text, or None when it cannot be read: read until the kernel has
    /// nothing more (any seq_file, however many records and pages).
    pub fn text(&mut self, path: &Path) -> Option<&str> {
        self.read(path, Shape::Records)
    }

    /// A file the kernel writes as one record at each read: a `single_open` proc file
    /// (/proc/meminfo, /proc/uptime, /proc/pressure/*), a sysfs, cgroup or sysctl attribute. One
    /// read that leaves room in the buffer is all of it ([`crate::util::pread_whole`]): the read
    /// for the end of the file is skipped.
    pub fn record(&mut self, path: &Path) -> Option<&str> {
        self.read(path, Shape::OneRecord)
    }

    /// A seq_file of short lines (/proc/diskstats, /proc/vmstat): the kernel fills a read with
    /// lines until the next would not fit in its page-sized buffer (at least 4 KiB), so a read
    /// that returned less than that page less the longest line is the whole file, and the read
    /// for the end is skipped (for /proc/diskstats it walks the disk list again to find none).
    pub fn lines(&mut self, path: &Path) -> Option<&str> {
        self.read(path, Shape::Lines)
    }

    /// Runs `f` with this reader opening, reading and closing every file (none kept): for files
    /// read once a second or less, one or more per device, which would otherwise hold
    /// descriptors in proportion to the number of devices.
    pub fn unkept<T>(&mut self, f: impl FnOnce(&mut Files) -> T) -> T {
        let keep = std::mem::replace(&mut self.keep, false);
        let out = f(self);
        self.keep = keep;
        out
    }

    /// How many reads have failed for want of file descriptors so far: a collector compares
    /// the count before and after its reads.
    pub fn out_of_fds(&self) -> u64 {
        self.out_of_fds
    }

    fn read(&mut self, path: &Path, shape: Shape) -> Option<&str> {
        if !self.keep {
            match std::fs::read(path) {
                Ok(bytes) => self.buf = bytes,
                Err(e) => {
                    self.out_of_fds += u64::from(is_out_of_fds(&e));
                    return None;
                }
            }
            return std::str::from_utf8(&self.buf).ok();
        }
        let now = Instant::now();
        self.sweep(now);
        let fresh = match self.open.get_mut(path) {
            Some((f, used)) => {
                *used = now;
                shape.read(f, &mut self.buf).is_err()
            }
            None => true,
        };
        if fresh {
            self.open.remove(path);
            if self.missing.get(path).is_some_and(|t| now.duration_since(*t) < MISSING_FRESH) {
                return None;
            }
            let f = match File::open(path) {
                // Out of descriptors: the kept files are only a saving, give them back.
                Err(e) if is_out_of_fds(&e) => {
                    self.open.clear();
                    File::open(path)
                }
                other => other,
            };
            let f = match f {
                Ok(f) => f,
                Err(e) if is_out_of_fds(&e) => {
                    self.out_of_fds += 1;
                    return None;
                }
                Err(_) => {
                    self.missing.insert(path.to_path_buf(), now);
                    return None;
                }
            };
            self.missing.remove(path);
            shape.read(&f, &mut self.buf).ok()?;
            if self.open.len() < MAX_KEPT {
                self.open.insert(path.to_path_buf(), (f, now));
            }
        }
        std::str::from_utf8(&self.buf).ok()
    }

    /// A file holding one unsigned integer.
    pub fn u64(&mut self, path: &Path) -> Option<u64> {
        self.record(path)?.trim().parse().ok()
    }

    /// A file holding one line of text, without its trailing newline.
    pub fn line(&mut self, path: &Path) -> Option<String> {
        Some(self.record(path)?.trim_end().to_string())
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

    /// A kept reader holds at most MAX_KEPT files however many it reads, none read through
    /// `unkept`, and every file still reads whole.
    #[test]
    fn kept_files_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let mut kept = Files::kept();
        for i in 0..MAX_KEPT + 40 {
            let path = dir.path().join(format!("f{i}"));
            std::fs::write(&path, format!("{i}\n")).unwrap();
            assert_eq!(kept.u64(&path), Some(i as u64));
            assert_eq!(kept.u64(&path), Some(i as u64), "read again");
        }
        assert_eq!(kept.kept_open(), MAX_KEPT);
        let mut fresh = Files::kept();
        let path = dir.path().join("f0");
        assert_eq!(fresh.unkept(|f| f.u64(&path)), Some(0));
        assert_eq!(fresh.kept_open(), 0, "nothing kept through unkept");
        assert_eq!(fresh.u64(&path), Some(0));
        assert_eq!(fresh.kept_open(), 1, "kept again after unkept");
        assert_eq!(fresh.out_of_fds(), 0);
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

    /// Every shape reads the whole file, short or long: a file of lines over several pages, one
    /// line, /proc/diskstats and /proc/vmstat (one read, or the end found), /proc/kallsyms (many
    /// pages of lines), /proc/meminfo (one record).
    #[test]
    fn every_shape_reads_the_whole_file() {
        let dir = std::env::temp_dir().join(format!("ioscope-shapes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let long = dir.join("long");
        let text: String = (0..2000).map(|i| format!("line {i} {}\n", "x".repeat(i % 90))).collect();
        std::fs::write(&long, &text).unwrap();
        let short = dir.join("short");
        std::fs::write(&short, "one line\n").unwrap();
        let mut kept = Files::kept();
        for _ in 0..2 {
            assert_eq!(kept.lines(&long), Some(text.as_str()));
            assert_eq!(kept.text(&long), Some(text.as_str()));
            assert_eq!(kept.record(&long), Some(text.as_str()));
            assert_eq!(kept.lines(&short), Some("one line\n"));
            assert_eq!(kept.record(&short), Some("one line\n"));
        }
        std::fs::remove_dir_all(&dir).unwrap();
        // Live files change between reads: compare the names on each line.
        // /proc/kallsyms: megabytes of short lines, a page per read.
        for proc_file in ["/proc/diskstats", "/proc/vmstat", "/proc/kallsyms"] {
            let path = Path::new(proc_file);
            let names = |t: &str| {
                t.lines()
                    .map(|l| {
                        l.split_whitespace()
                            .filter(|w| w.parse::<u64>().is_err())
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .collect::<Vec<_>>()
            };
            // Loop devices come and go in diskstats, and BPF programs loaded by anyone add and
            // remove kallsyms lines: a reading counts when the file's names were the same just
            // before and just after it (a reader that loses or repeats lines fails every time).
            let mut tries = 0;
            loop {
                let before = names(&std::fs::read_to_string(path).unwrap());
                let read = names(kept.lines(path).unwrap());
                let after = names(&std::fs::read_to_string(path).unwrap());
                if before != after && tries < 20 {
                    tries += 1;
                    continue;
                }
                assert_eq!(read, before, "{proc_file}");
                break;
            }
        }
        let meminfo = Path::new("/proc/meminfo");
        let keys =
            |t: &str| t.lines().map(|l| l.split(':').next().unwrap_or("").to_string()).collect::<Vec<_>>();
        assert_eq!(keys(kept.record(meminfo).unwrap()), keys(&std::fs::read_to_string(meminfo).unwrap()));
    }
}
