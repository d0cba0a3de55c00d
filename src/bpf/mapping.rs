//! An eBPF array created memory-mappable (`BPF_F_MMAPABLE`), mapped into this process: the
//! whole table is read with plain loads, not one system call per slot, which makes it cheap to
//! scan every sample. The values of an mmapable array start at offset 0, one after the other
//! (each 8-byte aligned: the value types here are multiples of 8 bytes).

use std::os::fd::{AsFd, AsRawFd};
use std::ptr::NonNull;

use anyhow::{bail, Result};
use aya::maps::{Map, MapData};

pub struct Mapping<T> {
    /// Keeps the map (and so the mapping's object) alive while mapped.
    _map: MapData,
    base: NonNull<T>,
    len: usize,
    mapped_bytes: usize,
}

// SAFETY: shared memory, read (or written, for MappedKeys) only with volatile loads or atomics;
// the pointer is not tied to the thread that made it.
unsafe impl<T> Send for Mapping<T> {}

impl<T> Mapping<T> {
    /// Maps `map` (`name` for messages), an array of `len` values of T, read-only unless
    /// `writable`.
    pub fn new(map: Map, name: &str, len: u32, writable: bool) -> Result<Mapping<T>> {
        let Map::Array(map) = map else { bail!("map {name} is not an array") };
        let len = len as usize;
        // SAFETY: no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let mapped_bytes = (len * std::mem::size_of::<T>()).div_ceil(page) * page;
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        // SAFETY: a fresh shared mapping of the map's fd; the kernel checks the length and that
        // the map is mmapable.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped_bytes,
                prot,
                libc::MAP_SHARED,
                map.fd().as_fd().as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            bail!("mapping map {name} into memory: {}", std::io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast::<T>()).expect("mmap returned null without failing");
        Ok(Mapping { _map: map, base, len, mapped_bytes })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Slot `i` (panics past the end): inside the mapping, aligned (page-aligned base, values
    /// one after the other), valid as long as self. The programs write it meanwhile: read it
    /// with volatile loads or atomics.
    pub fn slot(&self, i: usize) -> *const T {
        assert!(i < self.len);
        // SAFETY: in bounds of the mapping (len × size_of::<T>() ≤ mapped_bytes).
        unsafe { self.base.as_ptr().add(i) }
    }
}

impl<T> Drop for Mapping<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new, of that length; nothing points into it after this.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.mapped_bytes) };
    }
}
