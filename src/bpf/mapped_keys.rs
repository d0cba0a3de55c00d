//! An eBPF array of u64 keys created memory-mappable (`BPF_F_MMAPABLE`), mapped into this process:
//! the whole table is read with plain loads, not one syscall per slot, which makes it cheap to scan
//! every interval. The programs claim free slots (0) with a compare-and-swap; userspace frees them
//! by storing 0.

use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Result};
use aya::maps::{Map, MapData};

pub struct MappedKeys {
    /// Keeps the map (and so the mapping's object) alive while mapped.
    _map: MapData,
    keys: NonNull<AtomicU64>,
    len: usize,
    mapped_bytes: usize,
}

// SAFETY: the mapping is shared memory accessed only through atomics; the pointer is not tied to
// the thread that made it.
unsafe impl Send for MappedKeys {}

impl MappedKeys {
    /// Maps `map` (`name` for messages), an array of `len` u64 made with `BPF_F_MMAPABLE`.
    pub fn new(map: Map, name: &str, len: u32) -> Result<MappedKeys> {
        let Map::Array(map) = map else { bail!("map {name} is not an array") };
        let len = len as usize;
        // SAFETY: no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let mapped_bytes = (len * 8).div_ceil(page) * page;
        // SAFETY: a fresh shared mapping of the map's fd; the kernel checks the length and that
        // the map is mmapable, and the values of an mmapable array start at offset 0, 8 bytes each.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                map.fd().as_fd().as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            bail!("mapping map {name} into memory: {}", std::io::Error::last_os_error());
        }
        let keys = NonNull::new(p.cast::<AtomicU64>()).expect("mmap returned null without failing");
        Ok(MappedKeys { _map: map, keys, len, mapped_bytes })
    }

    /// Every slot's key, in index order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.len).map(|i| self.slot(i).load(Ordering::Relaxed))
    }

    /// Frees slot `i`.
    pub fn clear(&self, i: usize) {
        if i < self.len {
            self.slot(i).store(0, Ordering::Relaxed);
        }
    }

    fn slot(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.len);
        // SAFETY: in bounds of the mapping (len × 8 ≤ mapped_bytes), aligned (page-aligned base),
        // alive as long as self.
        unsafe { &*self.keys.as_ptr().add(i) }
    }
}

impl Drop for MappedKeys {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new, not used after this.
        unsafe { libc::munmap(self.keys.as_ptr().cast(), self.mapped_bytes) };
    }
}
