//! The mmap column writer: an append-only column store's I/O, written once for the live test
//! (tests/live/live_mmap_store.rs, through xtask's library), `cargo xtask mmap-writer`
//! and the real-software suite. Two patterns:
//!
//! - [`append_columns`]: column files extended with `ftruncate` and filled row by row through
//!   `MAP_SHARED` mappings. Every first touch of a page faults on a hole: the kernel's mmap
//!   read-around brings the pages around it into the cache, which the filesystem zero-fills
//!   without reading the disk (ext4's readpages marks a hole's folio up to date, no bio).
//! - [`update_random_pages`]: existing columns mapped with `MADV_RANDOM` and one value written in
//!   each of some pseudo-random pages: each fault reads its one page from the disk (no
//!   read-around) and dirties it in the same fault.
//!
//! [`MemoryLimit`] runs either under a memory limit (cgroup v1's memory controller where it is
//! bound there, else cgroup v2's `memory.max`), so evicted pages are faulted in again.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The page size the writer steps by.
pub const PAGE: u64 = 4096;

/// A shared read-write mapping of all of `f`, unmapped on drop.
struct Mapping {
    p: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(f: &File, len: usize, random: bool) -> io::Result<Mapping> {
        // SAFETY: a shared mapping of an open file of at least `len` bytes, used only through
        // this struct while it lives.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: advice on our own mapping.
        if random && unsafe { libc::madvise(p, len, libc::MADV_RANDOM) } != 0 {
            let e = io::Error::last_os_error();
            // SAFETY: the mapping just made.
            unsafe { libc::munmap(p, len) };
            return Err(e);
        }
        Ok(Mapping { p: p.cast(), len })
    }

    fn put(&self, at: u64, value: u64) {
        assert!(at as usize + 8 <= self.len);
        // SAFETY: inside the mapping (checked above); 8-byte aligned by every caller.
        unsafe { std::ptr::write_volatile(self.p.add(at as usize).cast::<u64>(), value) };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping, not used after this.
        unsafe { libc::munmap(self.p.cast(), self.len) };
    }
}

/// The path of column `i` in `dir`.
pub fn column_path(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("col-{i:03}"))
}

/// Creates `files` columns in `dir` (`col-000`, …), each extended to `bytes_per_file` with
/// `ftruncate` (all of it a hole) and filled through a shared mapping, one 8-byte value per column
/// per row, rows in order (the columns' pages fill side by side, as an appender's do). Nothing is
/// synced: writeback is the kernel's. Returns the columns' paths.
pub fn append_columns(dir: &Path, files: usize, bytes_per_file: u64) -> io::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    let mut maps = Vec::new();
    for i in 0..files {
        let path = column_path(dir, i);
        let f = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
        f.set_len(bytes_per_file)?;
        maps.push(Mapping::new(&f, bytes_per_file as usize, false)?);
        paths.push(path);
    }
    for row in 0..bytes_per_file / 8 {
        for (col, m) in maps.iter().enumerate() {
            m.put(row * 8, row.wrapping_mul(31).wrapping_add(col as u64) | 1);
        }
    }
    Ok(paths)
}

/// Maps the existing file `path` shared with `MADV_RANDOM` and writes one value into each of
/// `touches` pseudo-random pages (xorshift, the same pages every run). Returns how many distinct
/// pages were written (what the faults had to read, when none was cached).
pub fn update_random_pages(path: &Path, touches: u64) -> io::Result<u64> {
    let f = OpenOptions::new().read(true).write(true).open(path)?;
    let len = f.metadata()?.len();
    let pages = len / PAGE;
    if pages == 0 {
        return Ok(0);
    }
    let m = Mapping::new(&f, len as usize, true)?;
    let mut seen = vec![false; pages as usize];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..touches {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let page = x % pages;
        seen[page as usize] = true;
        m.put(page * PAGE + (x >> 40) % (PAGE / 8) * 8, x);
    }
    Ok(seen.iter().filter(|&&s| s).count() as u64)
}

/// The cgroup hierarchy the memory controller is bound to, where a memory cgroup with a limit is
/// made (here, by `cargo xtask stories` and the live tests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemoryHierarchy {
    /// A cgroup v1 hierarchy with the memory controller (the hybrid layout, where v2 holds the
    /// rest): `memory.limit_in_bytes`.
    V1(PathBuf),
    /// The cgroup v2 hierarchy, its root offering the memory controller (`cgroup.controllers`):
    /// `memory.max`, the controller enabled for the root's children (`cgroup.subtree_control`).
    V2(PathBuf),
}

impl MemoryHierarchy {
    /// Found from this process's mounts (/proc/self/mountinfo), wherever they are mounted
    /// (/sys/fs/cgroup, /sys/fs/cgroup/memory, systemd's /sys/fs/cgroup/unified, …).
    pub fn find() -> io::Result<MemoryHierarchy> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
        Self::from_mountinfo(&mountinfo, |root| std::fs::read_to_string(root.join("cgroup.controllers")).ok())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    "no memory controller: no cgroup v1 hierarchy with it is mounted, and no cgroup v2 root offers it",
                )
            })
    }

    /// The hierarchy from a mountinfo text: a v1 hierarchy whose mount options name `memory`,
    /// else the first v2 mount whose `cgroup.controllers` (read by `controllers` from the mount
    /// point) lists `memory`. A controller is bound to one hierarchy at a time: where v1 has it,
    /// v2 does not offer it.
    pub fn from_mountinfo(
        mountinfo: &str,
        controllers: impl Fn(&Path) -> Option<String>,
    ) -> Option<MemoryHierarchy> {
        // "36 25 0:32 / /sys/fs/cgroup/memory rw,relatime shared:15 - cgroup cgroup rw,memory"
        let mounts = mountinfo.lines().filter_map(|l| {
            let (fields, fs) = l.split_once(" - ")?;
            let point = fields.split(' ').nth(4)?;
            let mut fs = fs.split(' ');
            let (kind, options) = (fs.next()?, fs.nth(1).unwrap_or(""));
            Some((kind, unescape_mount_point(point), options))
        });
        let mut v2 = None;
        for (kind, point, options) in mounts {
            match kind {
                "cgroup" if options.split(',').any(|o| o == "memory") => {
                    return Some(MemoryHierarchy::V1(point));
                }
                "cgroup2" if v2.is_none() => {
                    let offered = controllers(&point).unwrap_or_default();
                    if offered.split_whitespace().any(|c| c == "memory") {
                        v2 = Some(MemoryHierarchy::V2(point));
                    }
                }
                _ => {}
            }
        }
        v2
    }

    pub fn root(&self) -> &Path {
        match self {
            MemoryHierarchy::V1(p) | MemoryHierarchy::V2(p) => p,
        }
    }

    /// The file that holds a cgroup's memory limit.
    pub fn limit_file(&self) -> &'static str {
        match self {
            MemoryHierarchy::V1(_) => "memory.limit_in_bytes",
            MemoryHierarchy::V2(_) => "memory.max",
        }
    }

    pub fn version(&self) -> &'static str {
        match self {
            MemoryHierarchy::V1(_) => "v1",
            MemoryHierarchy::V2(_) => "v2",
        }
    }

    /// Makes cgroup `name` under the root (kept when it exists), on v2 first enabling the memory
    /// controller for the root's children when it is not. Returns its directory.
    pub fn create(&self, name: &str) -> io::Result<PathBuf> {
        if let MemoryHierarchy::V2(root) = self {
            let sub = root.join("cgroup.subtree_control");
            let enabled = std::fs::read_to_string(&sub)?;
            if !enabled.split_whitespace().any(|c| c == "memory") {
                std::fs::write(&sub, "+memory").map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("enabling the memory controller in {}: {e}", sub.display()),
                    )
                })?;
            }
        }
        let dir = self.root().join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(dir),
            Err(e) => Err(e),
        }
    }
}

/// A mount point as mountinfo escapes it (space, tab, newline and backslash as `\ooo`).
fn unescape_mount_point(s: &str) -> PathBuf {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal =
            b.get(i + 1..i + 4).filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |n, c| n.wrapping_mul(8).wrapping_add(c - b'0')));
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(out))
}

/// A memory cgroup with a limit, made for this process and removed on drop (its processes moved
/// back to the root first), in the hierarchy the memory controller is bound to
/// ([`MemoryHierarchy`]: cgroup v1's on the hybrid layout, else cgroup v2's `memory.max`).
pub struct MemoryLimit {
    dir: PathBuf,
    procs_root: PathBuf,
}

impl MemoryLimit {
    /// Creates cgroup `name` limited to `bytes` of memory and moves the calling process into it.
    pub fn enter(name: &str, bytes: u64) -> io::Result<MemoryLimit> {
        let h = MemoryHierarchy::find()?;
        let dir = h.create(name)?;
        std::fs::write(dir.join(h.limit_file()), bytes.to_string())?;
        std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string())?;
        Ok(MemoryLimit { dir, procs_root: h.root().join("cgroup.procs") })
    }
}

impl Drop for MemoryLimit {
    fn drop(&mut self) {
        if let Ok(procs) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for pid in procs.split_whitespace() {
                let _ = std::fs::write(&self.procs_root, pid);
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This VM's mounts: systemd's hybrid layout, memory on v1, v2 at /sys/fs/cgroup/unified
    /// (offering only hugetlb).
    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:15 - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    /// A pure-v2 machine (systemd's unified layout).
    const UNIFIED: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    fn offering(list: &'static str) -> impl Fn(&Path) -> Option<String> {
        move |_| Some(list.to_string())
    }

    #[test]
    fn the_hybrid_layout_puts_the_limit_on_v1() {
        let h = MemoryHierarchy::from_mountinfo(HYBRID, offering("hugetlb")).unwrap();
        assert_eq!(h, MemoryHierarchy::V1("/sys/fs/cgroup/memory".into()));
        assert_eq!(h.limit_file(), "memory.limit_in_bytes");
    }

    #[test]
    fn a_unified_layout_puts_the_limit_on_v2_where_it_is_mounted() {
        let asked = std::cell::RefCell::new(Vec::new());
        let h = MemoryHierarchy::from_mountinfo(UNIFIED, |p| {
            asked.borrow_mut().push(p.to_path_buf());
            Some("cpuset cpu io memory hugetlb pids rdma misc\n".into())
        })
        .unwrap();
        assert_eq!(h, MemoryHierarchy::V2("/sys/fs/cgroup".into()));
        assert_eq!(h.limit_file(), "memory.max");
        assert_eq!(*asked.borrow(), [PathBuf::from("/sys/fs/cgroup")]);
        // systemd's hybrid layout with memory left to v2: v2 at /sys/fs/cgroup/unified.
        let hybrid_v2 = HYBRID.replace("rw,memory", "rw,blkio");
        let h = MemoryHierarchy::from_mountinfo(&hybrid_v2, offering("memory pids")).unwrap();
        assert_eq!(h, MemoryHierarchy::V2("/sys/fs/cgroup/unified".into()));
    }

    #[test]
    fn no_memory_controller_is_no_hierarchy() {
        assert_eq!(MemoryHierarchy::from_mountinfo(UNIFIED, offering("cpu io pids")), None);
        assert_eq!(MemoryHierarchy::from_mountinfo(UNIFIED, |_| None), None);
        let no_memory = HYBRID.replace("rw,memory", "rw,blkio");
        assert_eq!(MemoryHierarchy::from_mountinfo(&no_memory, offering("hugetlb")), None);
        // "memory_recursiveprot" (a v2 option) and "name=memory" are not the controller.
        let v1_named = "40 31 0:37 / /cg rw - cgroup cgroup rw,name=memory,memory_x\n";
        assert_eq!(MemoryHierarchy::from_mountinfo(v1_named, offering("")), None);
    }

    #[test]
    fn escaped_mount_points_are_unescaped() {
        let m = "35 31 0:32 / /mnt/cg\\040memory\\134x rw - cgroup cgroup rw,nosuid,memory\n";
        let h = MemoryHierarchy::from_mountinfo(m, offering("")).unwrap();
        assert_eq!(h.root(), Path::new("/mnt/cg memory\\x"));
    }
}
