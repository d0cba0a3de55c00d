//! Paths for the files of sync calls (src/bpf/syncs.rs gives device and inode): the files view's
//! paths first (a file being synced was usually just written, so the files view knows it), else
//! the caller's open files (/proc/PID/fd: a process syncs a file it has open). Answers are cached
//! and checked before each use (super::safe_open: no link followed); an inode not found is looked for again after
//! [`RETRY_AFTER`], so a process syncing a pipe does not cost a scan every sample.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::files::scan_process_dirs;
use super::safe_open::Opener;
use super::types::FileId;
use crate::sample::syncs::SyncFile;
use crate::sample::FileIoSample;

pub const RETRY_AFTER: Duration = Duration::from_secs(10);
/// Most paths (and misses) remembered; beyond it the cache starts afresh.
pub const MAX_CACHED: usize = 4096;
/// Most open files stat-ed per lookup in one process's fds.
const FDS_PER_LOOKUP: usize = 20_000;

pub struct SyncPathResolver {
    proc: PathBuf,
    known: HashMap<FileId, String>,
    missed: HashMap<FileId, Instant>,
    opener: Opener,
    /// The last path known for an inode whose path no longer names it (deleted, or replaced by a
    /// rename): shown as "PATH (deleted)" when no other name is found.
    gone: HashMap<FileId, String>,
}

impl Default for SyncPathResolver {
    fn default() -> Self {
        SyncPathResolver::new(Path::new("/proc"))
    }
}

impl SyncPathResolver {
    pub fn new(proc: &Path) -> SyncPathResolver {
        SyncPathResolver {
            proc: proc.to_path_buf(),
            known: HashMap::new(),
            missed: HashMap::new(),
            opener: Opener::default(),
            gone: HashMap::new(),
        }
    }

    /// Fills the path of every `(file, pid)` that has an inode, from `files` (the files view's
    /// resolved files) or the process's open files.
    pub fn resolve<'a>(
        &mut self,
        wanted: impl Iterator<Item = (&'a mut SyncFile, u32)>,
        files: &[FileIoSample],
        now: Instant,
    ) {
        if self.known.len() + self.missed.len() + self.gone.len() > MAX_CACHED {
            self.known.clear();
            self.missed.clear();
            self.gone.clear();
        }
        let mut pending: Vec<(&mut SyncFile, u32)> = Vec::new();
        for (f, pid) in wanted {
            if f.ino == 0 {
                continue;
            }
            let id = (f.major, f.minor, f.ino);
            if let Some(path) = self.known.get(&id) {
                if names(&mut self.opener, path, id) {
                    f.path = Some(path.clone());
                    continue;
                }
                if let Some(old) = self.known.remove(&id) {
                    self.gone.insert(id, old);
                }
            }
            let from_files = files
                .iter()
                .find(|x| (x.major, x.minor, x.ino) == id)
                .and_then(|x| x.path.clone())
                .filter(|p| names(&mut self.opener, p, id));
            if let Some(path) = from_files {
                self.known.insert(id, path.clone());
                f.path = Some(path);
                continue;
            }
            pending.push((f, pid));
        }
        for (f, pid) in pending {
            let id = (f.major, f.minor, f.ino);
            if let Some(path) = self.known.get(&id) {
                f.path = Some(path.clone());
                continue;
            }
            if self.missed.get(&id).is_some_and(|t| now.duration_since(*t) < RETRY_AFTER) {
                f.path = self.gone.get(&id).map(|p| format!("{p} (deleted)"));
                continue;
            }
            let mut found = HashMap::new();
            let want: HashSet<FileId> = [id].into();
            scan_process_dirs(
                std::iter::once(self.proc.join(pid.to_string())),
                &want,
                &mut found,
                FDS_PER_LOOKUP,
                true,
            );
            match found.remove(&id) {
                Some(path) => {
                    self.missed.remove(&id);
                    self.gone.remove(&id);
                    self.known.insert(id, path.clone());
                    f.path = Some(path);
                }
                None => {
                    self.missed.insert(id, now);
                    f.path = self.gone.get(&id).map(|p| format!("{p} (deleted)"));
                }
            }
        }
    }
}

/// Whether `path` (or an unlinked file's "PATH (deleted)", which cannot be checked) still names
/// the inode, looked up without following any link (super::safe_open).
fn names(opener: &mut Opener, path: &str, id: FileId) -> bool {
    path.ends_with(" (deleted)") || opener.names(Path::new(path), id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_file_the_caller_has_open_is_found_and_cached_and_a_miss_waits() {
        let dir = std::env::temp_dir().join(format!("ioscope-sync-paths-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("data");
        let held = std::fs::File::create(&path).unwrap();
        let m = held.metadata().unwrap();
        let id = (libc::major(m.dev()), libc::minor(m.dev()), m.ino());
        let mut r = SyncPathResolver::default();
        let now = Instant::now();
        let mut f = SyncFile { major: id.0, minor: id.1, ino: id.2, path: None };
        let mut none = SyncFile { major: id.0, minor: id.1, ino: u64::MAX - 1, path: None };
        let pid = std::process::id();
        r.resolve([(&mut f, pid), (&mut none, pid)].into_iter(), &[], now);
        assert_eq!(f.path.as_deref(), Some(path.to_str().unwrap()));
        assert_eq!(none.path, None);
        assert!(r.known.contains_key(&id) && r.missed.contains_key(&(id.0, id.1, u64::MAX - 1)));
        // Renamed: the cached path no longer names it, and is not shown.
        let moved = dir.join("moved");
        std::fs::rename(&path, &moved).unwrap();
        let mut again = SyncFile { path: None, ..f.clone() };
        r.resolve([(&mut again, pid)].into_iter(), &[], now);
        assert_eq!(again.path.as_deref(), Some(moved.to_str().unwrap()));
        // Deleted and closed: the last path, marked, from then on.
        drop(held);
        std::fs::remove_file(&moved).unwrap();
        for _ in 0..2 {
            let mut gone = SyncFile { path: None, ..f.clone() };
            r.resolve([(&mut gone, pid)].into_iter(), &[], now);
            assert_eq!(gone.path, Some(format!("{} (deleted)", moved.display())));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
