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

/// A memory cgroup with a limit, made for this process and removed on drop (its processes moved
/// back to the root first): cgroup v1's memory controller when mounted at
/// /sys/fs/cgroup/memory (the hybrid layout), else cgroup v2's `memory.max`.
pub struct MemoryLimit {
    dir: PathBuf,
    procs_root: PathBuf,
}

impl MemoryLimit {
    /// Creates cgroup `name` limited to `bytes` of memory and moves the calling process into it.
    pub fn enter(name: &str, bytes: u64) -> io::Result<MemoryLimit> {
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let (root, limit_file) = if v1.join("memory.limit_in_bytes").exists() {
            (v1.to_path_buf(), "memory.limit_in_bytes")
        } else {
            (PathBuf::from("/sys/fs/cgroup"), "memory.max")
        };
        let dir = root.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        std::fs::write(dir.join(limit_file), bytes.to_string())?;
        std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string())?;
        Ok(MemoryLimit { dir, procs_root: root.join("cgroup.procs") })
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
