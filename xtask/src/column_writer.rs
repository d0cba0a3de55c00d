//! The stories' mmap column writer (`cargo xtask stories --column-writer ...`, run by the mmap
//! story in a memory cgroup): an append-only column store's writes, through `MAP_SHARED`
//! mappings of files extended with `ftruncate`, and its random stores with `MADV_RANDOM`.
//!
//! A minimal writer of the suite's own; [`run`] is the one entry point the story calls, so another
//! writer can take its place behind it.
//!
//! - `append DIR FILES MIB`: FILES column files of MIB MiB each, created empty and extended with
//!   `ftruncate` (holes), mapped whole, and filled row by row (one 8-byte value per column per
//!   row, every column advancing together), then `msync`ed. The disk is read for nothing but
//!   metadata: every page faulted in is a hole.
//! - `random DIR FILES MIB PAGES`: the files written before, dropped from the cache
//!   (`POSIX_FADV_DONTNEED`), mapped with `MADV_RANDOM`, and PAGES stores of 8 bytes at random
//!   pages: each store's fault reads its page from disk and dirties it; then `msync`.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{bail, Context, Result};

const PAGE: usize = 4096;

/// Runs the writer with its arguments (the words after `--column-writer`).
pub fn run(args: &[String]) -> Result<()> {
    let num = |i: usize| -> Result<usize> {
        args.get(i).with_context(|| format!("argument {i} missing"))?.parse().context("a number")
    };
    match args.first().map(String::as_str) {
        Some("append") => append(Path::new(&args[1]), num(2)?, num(3)?),
        Some("random") => random(Path::new(&args[1]), num(2)?, num(3)?, num(4)?),
        _ => bail!("usage: --column-writer append DIR FILES MIB | random DIR FILES MIB PAGES"),
    }
}

fn column(dir: &Path, i: usize) -> std::path::PathBuf {
    dir.join(format!("col{i:04}.bin"))
}

/// A shared read-write mapping of a whole file, unmapped on drop.
struct Mapping {
    addr: *mut u8,
    len: usize,
    fd: i32,
}

impl Mapping {
    fn open(path: &Path, len: usize, extend: bool) -> Result<Mapping> {
        let c = CString::new(path.as_os_str().as_bytes())?;
        let flags = libc::O_RDWR | libc::O_CLOEXEC | if extend { libc::O_CREAT | libc::O_TRUNC } else { 0 };
        // SAFETY: c is a NUL-terminated path.
        let fd = unsafe { libc::open(c.as_ptr(), flags, 0o644) };
        if fd < 0 {
            bail!("open {}: {}", path.display(), std::io::Error::last_os_error());
        }
        // SAFETY: fd is ours.
        if extend && unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
            bail!("ftruncate {}: {}", path.display(), std::io::Error::last_os_error());
        }
        // SAFETY: a new shared mapping of len bytes of fd.
        let addr = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if addr == libc::MAP_FAILED {
            bail!("mmap {}: {}", path.display(), std::io::Error::last_os_error());
        }
        Ok(Mapping { addr: addr.cast(), len, fd })
    }

    fn store(&mut self, offset: usize, value: u64) {
        assert!(offset + 8 <= self.len);
        // SAFETY: in bounds of the mapping, 8-byte aligned offsets.
        unsafe { std::ptr::write_volatile(self.addr.add(offset).cast::<u64>(), value) };
    }

    fn msync(&self) -> Result<()> {
        // SAFETY: the mapping is ours.
        if unsafe { libc::msync(self.addr.cast(), self.len, libc::MS_SYNC) } != 0 {
            bail!("msync: {}", std::io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping and fd are ours.
        unsafe {
            libc::munmap(self.addr.cast(), self.len);
            libc::close(self.fd);
        }
    }
}

fn append(dir: &Path, files: usize, mib: usize) -> Result<()> {
    let len = mib << 20;
    let mut cols =
        (0..files).map(|i| Mapping::open(&column(dir, i), len, true)).collect::<Result<Vec<_>>>()?;
    for row in 0..len / 8 {
        for (c, m) in cols.iter_mut().enumerate() {
            m.store(row * 8, (row as u64) << 16 | c as u64);
        }
    }
    for m in &cols {
        m.msync()?;
    }
    Ok(())
}

fn random(dir: &Path, files: usize, mib: usize, pages: usize) -> Result<()> {
    let len = mib << 20;
    let mut cols = Vec::with_capacity(files);
    for i in 0..files {
        let m = Mapping::open(&column(dir, i), len, false)?;
        // SAFETY: the fd and the mapping are ours.
        unsafe {
            libc::fdatasync(m.fd);
            libc::posix_fadvise(m.fd, 0, 0, libc::POSIX_FADV_DONTNEED);
            if libc::madvise(m.addr.cast(), len, libc::MADV_RANDOM) != 0 {
                bail!("madvise: {}", std::io::Error::last_os_error());
            }
        }
        cols.push(m);
    }
    // xorshift64: the same pages every run.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let pages_per_file = len / PAGE;
    for n in 0..pages {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let f = (x % files as u64) as usize;
        let p = ((x >> 20) % pages_per_file as u64) as usize;
        cols[f].store(p * PAGE + 8 * (n % 8), n as u64);
    }
    for m in &cols {
        m.msync()?;
    }
    Ok(())
}
