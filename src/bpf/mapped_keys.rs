//! An eBPF array of u64 keys mapped into this process (super::mapping), read and written through
//! atomics. The programs claim free slots (0) with a compare-and-swap; userspace frees them
//! by storing 0.

use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;
use aya::maps::Map;

use super::mapping::Mapping;

pub struct MappedKeys(Mapping<AtomicU64>);

impl MappedKeys {
    /// Maps `map` (`name` for messages), an array of `len` u64 made with `BPF_F_MMAPABLE`.
    pub fn new(map: Map, name: &str, len: u32) -> Result<MappedKeys> {
        Ok(MappedKeys(Mapping::new(map, name, len, true)?))
    }

    /// Every slot's key, in index order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.0.len()).map(|i| self.slot(i).load(Ordering::Relaxed))
    }

    /// Frees slot `i`.
    pub fn clear(&self, i: usize) {
        if i < self.0.len() {
            self.slot(i).store(0, Ordering::Relaxed);
        }
    }

    fn slot(&self, i: usize) -> &AtomicU64 {
        // SAFETY: a slot of the mapping, alive as long as self; shared with the programs through
        // atomics only.
        unsafe { &*self.0.slot(i) }
    }
}
