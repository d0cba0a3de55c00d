//! cgroup v2 ids (what `bpf_get_current_cgroup_id()` returns: the cgroup directory's inode number)
//! to paths, for the per-process block, page-cache and sync-call rows (and so the cgroup view). The cgroup2 hierarchy is walked once and again only
//! when an unknown id shows up (at most every few seconds): cheap on machines with hundreds of
//! cgroups, and nothing at all is read when every id is known.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Unknown ids trigger a new walk at most this often.
const RESCAN_EVERY: Duration = Duration::from_secs(5);
/// Deeper cgroup trees than this are not followed (a guard, not a real limit).
const MAX_DEPTH: usize = 32;
/// At most this many cgroups are mapped (a node with 300 pods has ~1,000); the walk stops there.
const MAX_CGROUPS: usize = 65_536;

pub struct CgroupNames {
    root: Option<PathBuf>,
    by_id: HashMap<u64, String>,
    last_scan: Option<Instant>,
}

impl CgroupNames {
    /// Finds the cgroup2 mount (/sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid systems).
    pub fn new() -> CgroupNames {
        let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        CgroupNames::at(cgroup2_mount(&mounts))
    }

    pub fn at(root: Option<PathBuf>) -> CgroupNames {
        CgroupNames { root, by_id: HashMap::new(), last_scan: None }
    }

    /// The cgroup's path below the hierarchy's root ("/" for the root, "/system.slice/x.service"),
    /// or an empty string when unknown (id 0, no cgroup2, or the cgroup is already gone).
    pub fn path(&mut self, id: u64) -> String {
        self.lookup(id).to_string()
    }

    /// The same, borrowed.
    pub fn lookup(&mut self, id: u64) -> &str {
        if id == 0 {
            return "";
        }
        if !self.by_id.contains_key(&id) && self.last_scan.is_none_or(|t| t.elapsed() >= RESCAN_EVERY) {
            if let Some(root) = &self.root {
                self.by_id = scan(root);
            }
            self.last_scan = Some(Instant::now());
        }
        self.by_id.get(&id).map_or("", |p| p.as_str())
    }
}

impl Default for CgroupNames {
    fn default() -> Self {
        CgroupNames::new()
    }
}

/// Where cgroup2 is mounted, from a /proc/mounts text.
fn cgroup2_mount(mounts: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|line| {
        let mut f = line.split_whitespace();
        let (_src, target, fstype) = (f.next(), f.next()?, f.next()?);
        (fstype == "cgroup2").then(|| PathBuf::from(target))
    })
}

/// Every directory below `root`: inode → path relative to root.
fn scan(root: &Path) -> HashMap<u64, String> {
    let mut out = HashMap::new();
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        if out.len() >= MAX_CGROUPS {
            break;
        }
        let Ok(meta) = fs::metadata(&dir) else { continue };
        let rel = dir.strip_prefix(root).map(|p| format!("/{}", p.display())).unwrap_or_default();
        out.insert(meta.ino(), rel);
        if depth >= MAX_DEPTH {
            continue;
        }
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push((e.path(), depth + 1));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cgroup2_mount_on_hybrid_and_unified_systems() {
        let hybrid = "tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n\
                      cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
        assert_eq!(cgroup2_mount(hybrid), Some(PathBuf::from("/sys/fs/cgroup/unified")));
        assert_eq!(
            cgroup2_mount("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        assert_eq!(cgroup2_mount("cgroup /sys/fs/cgroup/cpu cgroup rw 0 0\n"), None);
    }

    #[test]
    fn ids_are_directory_inodes() {
        let dir = tempfile::tempdir().unwrap();
        let svc = dir.path().join("system.slice/db.service");
        fs::create_dir_all(&svc).unwrap();
        let id = fs::metadata(&svc).unwrap().ino();
        let root_id = fs::metadata(dir.path()).unwrap().ino();
        let mut names = CgroupNames::at(Some(dir.path().to_path_buf()));
        assert_eq!(names.path(id), "/system.slice/db.service");
        assert_eq!(names.path(root_id), "/");
        assert_eq!(names.path(0), "");
        // Unknown, and a rescan is not due yet: empty, no walk.
        assert_eq!(names.path(u64::MAX), "");
        assert_eq!(CgroupNames::at(None).path(id), "");
    }
}
