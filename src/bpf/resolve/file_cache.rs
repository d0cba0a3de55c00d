//! A file's page-cache residency: `cachestat(2)` (Linux 6.5+), else `mincore(2)` over a read-only
//! mapping of the file. Both only need the file opened read-only: its data is not read. The file
//! is one super::safe_open found and opened (never a path opened here).

use std::fs::File;
use std::os::fd::AsRawFd;

use crate::sample::FileCacheState;

/// `__NR_cachestat` (the same number on every architecture that has it: the syscall table was
/// unified by then).
const SYS_CACHESTAT: libc::c_long = 451;

/// Files larger than this are not scanned with mincore (its vector is one byte per page).
const MINCORE_MAX_BYTES: u64 = 64 << 30;

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// The cache state of an open file of `size` bytes.
pub fn cache_state_of(file: &File, size: u64, page_size: u64) -> Option<FileCacheState> {
    let mut state = FileCacheState { size_bytes: size, ..Default::default() };
    let range = CachestatRange { off: 0, len: 0 };
    let mut cs = Cachestat::default();
    // SAFETY: valid fd, pointers to live, correctly laid out structs; flags must be 0.
    let rc = unsafe {
        libc::syscall(SYS_CACHESTAT, file.as_raw_fd(), &range as *const _, &mut cs as *mut _, 0u32)
    };
    if rc == 0 {
        state.source = "cachestat".into();
        state.cached_pages = cs.nr_cache;
        state.dirty_pages = Some(cs.nr_dirty);
        state.writeback_pages = Some(cs.nr_writeback);
        state.evicted_pages = Some(cs.nr_evicted);
        state.recently_evicted_pages = Some(cs.nr_recently_evicted);
        return Some(state);
    }
    state.source = "mincore".into();
    state.cached_pages = mincore_pages(file, size, page_size)?;
    Some(state)
}

/// Resident pages of the file by mincore over a shared read-only mapping.
fn mincore_pages(file: &File, size: u64, page_size: u64) -> Option<u64> {
    if size == 0 {
        return Some(0);
    }
    if size > MINCORE_MAX_BYTES || page_size == 0 {
        return None;
    }
    let len = size as usize;
    // SAFETY: a fresh read-only mapping of an open file, unmapped below; nothing reads through it.
    let addr = unsafe {
        libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0)
    };
    if addr == libc::MAP_FAILED {
        return None;
    }
    let pages = size.div_ceil(page_size) as usize;
    let mut vec = vec![0u8; pages];
    // SAFETY: addr..addr+len is our mapping; vec has one byte per page of it.
    let rc = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(addr, len) };
    (rc == 0).then(|| vec.iter().filter(|&&b| b & 1 != 0).count() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_just_written_is_cached_and_both_methods_agree() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = File::create(&path).unwrap();
        f.write_all(&vec![7u8; 64 * 1024]).unwrap();
        f.sync_all().unwrap();
        let file = File::open(&path).unwrap();
        let s = cache_state_of(&file, 64 * 1024, 4096).unwrap();
        assert_eq!(s.size_bytes, 64 * 1024);
        // tmpfs or disk: pages just written are in memory.
        assert_eq!(s.cached_pages, 16, "{s:?}");
        assert_eq!(mincore_pages(&file, 64 * 1024, 4096), Some(16));
    }
}
