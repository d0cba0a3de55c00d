//! The readahead fallbacks before `readahead_control.ra` (Linux 5.10): there the `file_ra_state`
//! is an argument of `page_cache_sync_ra()` / `page_cache_async_ra()`, `page_cache_ra_order()`
//! does not exist, and a window is handed to `do_page_cache_ra(ractl, nr_to_read,
//! lookahead_size)`. What the programs (ebpf/probes/src/readahead_510.rs) read beyond
//! [`crate::readahead_fn::RaFnLayout`]: offsets from the kernel's BTF at run time.

/// Read-only global holding [`Ra510Layout`], set by the loader before load.
pub const RA_510_LAYOUT_GLOBAL: &str = "RA_510_LAYOUT";

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ra510Layout {
    /// 0: the programs do nothing.
    pub configured: u32,
    /// `struct readahead_control`: `file` (pointer; NULL for a readahead without a file).
    pub ractl_file: u32,
    /// `struct file`: its `f_ra` (an embedded `struct file_ra_state`) `start` (u64), `size` and
    /// `ra_pages` (u32), each as one offset from the file.
    pub file_ra_start: u32,
    pub file_ra_size: u32,
    pub file_ra_pages: u32,
    /// `struct file_ra_state` (the argument `ra`): `ra_pages` (u32) and `mmap_miss` (u32 on these
    /// kernels; its low 16 bits are read, as [`crate::readahead_fn::RaFnLayout`] does).
    pub ra_ra_pages: u32,
    pub ra_mmap_miss: u32,
}

impl Ra510Layout {
    pub const UNSET: Ra510Layout = Ra510Layout {
        configured: 0,
        ractl_file: 0,
        file_ra_start: 0,
        file_ra_size: 0,
        file_ra_pages: 0,
        ra_ra_pages: 0,
        ra_mmap_miss: 0,
    };
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], u32 fields only, every bit pattern valid.
    unsafe impl aya::Pod for super::Ra510Layout {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_has_no_hidden_padding() {
        assert_eq!(core::mem::size_of::<Ra510Layout>(), 7 * 4);
    }
}
