//! `/proc/self/mountinfo`, read again only when the kernel says the mount table changed: the
//! file is kept open and polled (procfs flags a change of the namespace's mounts with
//! POLLPRI | POLLERR, as util-linux's `findmnt --poll` uses it). A fixture's mountinfo (any other
//! proc directory) is read every time. The file resolver and the block-to-file mapper each keep
//! one, so neither reads and parses the table every sample.
//! [`parse_mountinfo`] reads its lines ([`MountLine`]); a [`Mount`] is a mounted filesystem as the
//! resolvers use it.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// A mounted filesystem: its `s_dev`, where it is mounted, and the disk whose backing device
/// (bdi) its writeback is reported under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub dev: (u32, u32),
    /// The directory of the filesystem the mount shows (`/`, or a bind mount's subdirectory).
    pub root: PathBuf,
    pub mount_point: PathBuf,
    pub bdi: Option<(u32, u32)>,
    pub fstype: String,
}

/// One line of `/proc/self/mountinfo`.
#[derive(Clone, Debug, PartialEq)]
pub struct MountLine {
    pub dev: (u32, u32),
    pub root: PathBuf,
    pub mount_point: PathBuf,
    /// The filesystem type (`ext4`, `xfs`), after the optional fields' ` - `.
    pub fstype: String,
}

/// `/proc/self/mountinfo`'s lines; the first mount of each device comes first (bind mounts and
/// second mounts of the same filesystem follow it).
pub fn parse_mountinfo(text: &str) -> Vec<MountLine> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(' ');
            let (_, _, dev, root, mp) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
            let (maj, min) = dev.split_once(':')?;
            let dev = (maj.parse().ok()?, min.parse().ok()?);
            let fstype = f.skip_while(|&x| x != "-").nth(1).unwrap_or_default().to_string();
            Some(MountLine {
                dev,
                root: PathBuf::from(crate::util::unescape_mountinfo(root)),
                mount_point: PathBuf::from(crate::util::unescape_mountinfo(mp)),
                fstype,
            })
        })
        .collect()
}

/// A mount: its filesystem's device, the directory of the filesystem it shows (`/` unless a bind
/// mount of a subdirectory), and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountRoot<'a> {
    pub dev: (u32, u32),
    pub root: &'a Path,
    pub mount_point: &'a Path,
}

/// Where `fs_path` (a path inside filesystem `dev`) is seen: under the first mount of the whole
/// filesystem, else under the first bind mount whose root contains it.
pub fn mounted_path<'a>(
    mounts: impl Iterator<Item = MountRoot<'a>>,
    dev: (u32, u32),
    fs_path: &str,
) -> Option<PathBuf> {
    let mut best: Option<PathBuf> = None;
    for m in mounts.filter(|m| m.dev == dev) {
        let Ok(rest) = Path::new(fs_path).strip_prefix(m.root) else { continue };
        let p =
            if rest.as_os_str().is_empty() { m.mount_point.to_path_buf() } else { m.mount_point.join(rest) };
        if m.root == Path::new("/") {
            return Some(p);
        }
        best.get_or_insert(p);
    }
    best
}

pub struct MountInfo {
    path: PathBuf,
    live: bool,
    file: Option<File>,
    text: String,
    /// Counts the changes seen; a reader that derived something from the text compares it.
    generation: u64,
}

impl MountInfo {
    pub fn new(proc: &Path) -> MountInfo {
        MountInfo {
            path: proc.join("self/mountinfo"),
            live: proc == Path::new("/proc"),
            file: None,
            text: String::new(),
            generation: 0,
        }
    }

    /// Reads the table again if it changed (always for a fixture). Unreadable or empty, the last
    /// table stays and the file is opened afresh next time (a sample without mounts would have
    /// no kernel names at all).
    pub fn refresh(&mut self) -> &str {
        if !self.live {
            let text = std::fs::read_to_string(&self.path).unwrap_or_default();
            if text != self.text {
                self.text = text;
                self.generation += 1;
            }
            return &self.text;
        }
        let changed = match &self.file {
            Some(f) => {
                let mut pfd = libc::pollfd { fd: f.as_raw_fd(), events: libc::POLLPRI, revents: 0 };
                // SAFETY: one valid pollfd, no wait.
                let n = unsafe { libc::poll(&mut pfd, 1, 0) };
                n != 0 || pfd.revents & (libc::POLLPRI | libc::POLLERR | libc::POLLNVAL) != 0
            }
            None => true,
        };
        if changed {
            if self.file.is_none() {
                self.file = File::open(&self.path).ok();
            }
            let mut buf = Vec::new();
            let text = match &self.file {
                Some(f) => {
                    crate::util::pread_all(f, &mut buf).map(|b| String::from_utf8_lossy(b).into_owned())
                }
                None => Ok(String::new()),
            };
            match text {
                Ok(t) if !t.trim().is_empty() => {
                    if t != self.text {
                        self.text = t;
                        self.generation += 1;
                    }
                }
                _ => self.file = None,
            }
        }
        &self.text
    }

    /// The table as last read.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Changes seen so far: equal generations mean the same text.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixture_table_is_read_every_time_and_counts_its_changes() {
        let proc = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(proc.path().join("self")).unwrap();
        let file = proc.path().join("self/mountinfo");
        std::fs::write(&file, "22 1 254:0 / / rw - ext4 /dev/vda rw\n").unwrap();
        let mut m = MountInfo::new(proc.path());
        assert!(m.refresh().contains("/dev/vda"));
        let first = m.generation();
        m.refresh();
        assert_eq!(m.generation(), first, "the same text is no change");
        std::fs::write(&file, "22 1 7:0 / /mnt rw - xfs /dev/loop0 rw\n").unwrap();
        assert!(m.refresh().contains("/dev/loop0"));
        assert_eq!(m.generation(), first + 1);
    }

    #[test]
    fn the_live_table_is_read_and_kept() {
        let mut m = MountInfo::new(Path::new("/proc"));
        let text = m.refresh().to_string();
        assert!(text.contains(" - "), "{text}");
        assert_eq!(m.generation(), 1);
        assert_eq!(m.text(), text);
    }
}
