//! What this process's memory cgroup leaves before its limit: the room the eBPF maps may take
//! (src/bpf/map_memory.rs). Both hierarchies are read, as a machine may have the memory
//! controller on cgroup v1 (`memory.limit_in_bytes`, `memory.usage_in_bytes`) or v2
//! (`memory.max`, `memory.current`), and every ancestor up to the hierarchy's root, since a
//! parent's limit bounds its children. Page cache not recently used (`inactive_file`) is not
//! counted as used: the kernel reclaims it before it kills anything.
//!
//! The cgroups are the ones the kernel names in /proc/self/cgroup, under the mount points
//! /proc/self/mountinfo lists: no path a user named is opened.

use std::path::{Path, PathBuf};

/// Limits at or above this are "no limit" (v1 writes 2^63 − 4096 for one).
const UNLIMITED: u64 = 1 << 62;

/// The tightest memory cgroup level above this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Headroom {
    /// What is left: limit − (usage − inactive page cache).
    pub bytes: u64,
    pub limit: u64,
    pub used: u64,
    /// The cgroup whose limit it is, as /proc/self/cgroup names it ("/a/b"), and its hierarchy.
    pub cgroup: String,
    pub version: u8,
}

/// The tightest level of this process's memory cgroups; None when no level has a limit (or no
/// memory controller is mounted).
pub fn headroom() -> Option<Headroom> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    headroom_in(&mounts(&mountinfo), &cgroups)
}

/// A memory-controller mount: (hierarchy version, mount point, root of the mount within the
/// hierarchy).
type Mount = (u8, PathBuf, String);

/// The v1 mounts with the memory controller and the v2 mounts, from /proc/self/mountinfo.
fn mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fields: Vec<&str> = left.split(' ').collect();
            let (root, point) = (fields.get(3)?, fields.get(4)?);
            let mut right = right.split(' ');
            let (fstype, _source, options) = (right.next()?, right.next()?, right.next().unwrap_or(""));
            let version = match fstype {
                "cgroup2" => 2,
                "cgroup" if options.split(',').any(|o| o == "memory") => 1,
                _ => return None,
            };
            Some((
                version,
                PathBuf::from(crate::util::unescape_mountinfo(point)),
                crate::util::unescape_mountinfo(root),
            ))
        })
        .collect()
}

/// [`headroom`] from the mounts and the text of /proc/self/cgroup.
pub fn headroom_in(mounts: &[Mount], cgroups: &str) -> Option<Headroom> {
    let mut tightest: Option<Headroom> = None;
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let version = match controllers {
            "" => 2,
            c if c.split(',').any(|c| c == "memory") => 1,
            _ => continue,
        };
        for (_, point, root) in mounts.iter().filter(|(v, _, _)| *v == version) {
            // The path is relative to the hierarchy's root; the mount may show a part of it.
            let Some(rel) = path.strip_prefix(root.trim_end_matches('/')) else { continue };
            let leaf = point.join(rel.trim_start_matches('/'));
            let mut dir = leaf.as_path();
            let mut name = path.to_string();
            loop {
                if let Some(h) = level(dir, version, &name) {
                    if tightest.as_ref().is_none_or(|t| h.bytes < t.bytes) {
                        tightest = Some(h);
                    }
                }
                if dir == point.as_path() {
                    break;
                }
                let Some(parent) = dir.parent() else { break };
                dir = parent;
                name = match name.rsplit_once('/') {
                    Some(("", _)) | None => "/".to_string(),
                    Some((p, _)) => p.to_string(),
                };
            }
        }
    }
    tightest
}

/// One cgroup's limit and use; None without a limit or when its files cannot be read.
fn level(dir: &Path, version: u8, name: &str) -> Option<Headroom> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let (limit, usage, inactive_key) = if version == 1 {
        (read("memory.limit_in_bytes")?, read("memory.usage_in_bytes")?, "total_inactive_file")
    } else {
        (read("memory.max")?, read("memory.current")?, "inactive_file")
    };
    let limit: u64 = limit.trim().parse().ok().filter(|l| *l < UNLIMITED)?;
    let usage: u64 = usage.trim().parse().ok()?;
    let inactive = read("memory.stat")
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(inactive_key)?.strip_prefix(' ')?.trim().parse::<u64>().ok())
        })
        .unwrap_or(0);
    let used = usage.saturating_sub(inactive);
    Some(Headroom { bytes: limit.saturating_sub(used), limit, used, cgroup: name.to_string(), version })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, files: &[(&str, &str)]) {
        std::fs::create_dir_all(dir).unwrap();
        for (f, text) in files {
            std::fs::write(dir.join(f), text).unwrap();
        }
    }

    #[test]
    fn mounts_keep_the_memory_v1_and_the_v2_hierarchies() {
        let info = "\
35 25 0:30 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
36 25 0:31 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu
40 25 0:35 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
41 25 0:36 /sub /mnt/my\\040cg rw - cgroup2 cgroup2 rw
50 25 8:1 / / rw - ext4 /dev/sda1 rw";
        assert_eq!(
            mounts(info),
            vec![
                (2, PathBuf::from("/sys/fs/cgroup/unified"), "/".into()),
                (1, PathBuf::from("/sys/fs/cgroup/memory"), "/".into()),
                (2, PathBuf::from("/mnt/my cg"), "/sub".into()),
            ]
        );
    }

    /// A v1 child with a loose limit under a parent with a tight one, and a v2 cgroup without a
    /// limit: the parent's is the tightest; inactive page cache is not counted as used.
    #[test]
    fn the_tightest_level_of_both_hierarchies_counts() {
        let tmp = tempfile::tempdir().unwrap();
        let v1 = tmp.path().join("v1");
        let v2 = tmp.path().join("v2");
        write(&v1, &[("memory.limit_in_bytes", "9223372036854771712\n"), ("memory.usage_in_bytes", "900\n")]);
        write(
            &v1.join("svc"),
            &[
                ("memory.limit_in_bytes", "67108864\n"),
                ("memory.usage_in_bytes", "10000000\n"),
                ("memory.stat", "cache 5\ntotal_inactive_file 2000000\n"),
            ],
        );
        write(
            &v1.join("svc/child"),
            &[("memory.limit_in_bytes", "100000000\n"), ("memory.usage_in_bytes", "5000000\n")],
        );
        write(&v2.join("a"), &[("memory.max", "max\n"), ("memory.current", "123\n")]);
        let mounts = vec![(1, v1.clone(), "/".to_string()), (2, v2.clone(), "/".to_string())];
        let cgroups = "9:cpu:/\n4:memory:/svc/child\n0::/a\n";
        let h = headroom_in(&mounts, cgroups).unwrap();
        assert_eq!(
            h,
            Headroom {
                bytes: 67_108_864 - 8_000_000,
                limit: 67_108_864,
                used: 8_000_000,
                cgroup: "/svc".into(),
                version: 1
            }
        );
        // A v2 limit tighter than that one wins.
        write(
            &v2.join("a"),
            &[
                ("memory.max", "41943040\n"),
                ("memory.current", "2000000\n"),
                ("memory.stat", "inactive_file 0\n"),
            ],
        );
        let h = headroom_in(&mounts, cgroups).unwrap();
        assert_eq!((h.bytes, h.cgroup.as_str(), h.version), (41_943_040 - 2_000_000, "/a", 2));
        // No limit anywhere: None.
        assert_eq!(headroom_in(&mounts, "4:memory:/\n"), None);
    }
}
