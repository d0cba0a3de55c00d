//! The readahead fallbacks (kernels without `readahead:*`, before Linux 6.18): programs on the
//! entry of the functions those tracepoints sit in (`page_cache_sync_ra()`,
//! `page_cache_async_ra()`, `page_cache_ra_order()`, `page_cache_ra_unbounded()`), reading from
//! their arguments what the tracepoints' records hold. The offsets come from the kernel's BTF at
//! run time (see ebpf/README.md).

/// Read-only global holding [`RaFnLayout`], set by the loader before load.
pub const RA_FN_LAYOUT_GLOBAL: &str = "RA_FN_LAYOUT";

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaFnLayout {
    /// 0: the programs do nothing.
    pub configured: u32,
    /// `struct readahead_control`: `mapping` (pointer), `ra` (pointer), `_index` (u64): the
    /// tracepoints' `index` is `readahead_index(ractl)`.
    pub ractl_mapping: u32,
    pub ractl_ra: u32,
    pub ractl_index: u32,
    /// `struct address_space`: `host` (pointer to the inode).
    pub mapping_host: u32,
    /// `struct inode`: `i_sb` (pointer), `i_ino` (u64); `struct super_block`: `s_dev` (u32): the
    /// records' `s_dev` and `i_ino`.
    pub inode_sb: u32,
    pub inode_ino: u32,
    pub sb_dev: u32,
    /// `struct file_ra_state`: `size`, `ra_pages` (u32), `mmap_miss` (its low 16 bits: u16 since
    /// Linux 6.10, u32 before).
    pub ra_size: u32,
    pub ra_ra_pages: u32,
    pub ra_mmap_miss: u32,
    /// 1 when the page-cache fallbacks on `filemap_fault()` and `filemap_map_pages()` run (no
    /// `mm_filemap_fault` / `mm_filemap_map_pages`, before 6.12): they then also mark readahead
    /// pages used, reading the file from `vmf->vma->vm_file->f_mapping` and the faulting page from
    /// `vmf->pgoff`.
    pub vm_configured: u32,
    pub vmf_vma: u32,
    pub vmf_pgoff: u32,
    pub vma_file: u32,
    pub file_mapping: u32,
}

impl RaFnLayout {
    pub const UNSET: RaFnLayout = RaFnLayout {
        configured: 0,
        ractl_mapping: 0,
        ractl_ra: 0,
        ractl_index: 0,
        mapping_host: 0,
        inode_sb: 0,
        inode_ino: 0,
        sb_dev: 0,
        ra_size: 0,
        ra_ra_pages: 0,
        ra_mmap_miss: 0,
        vm_configured: 0,
        vmf_vma: 0,
        vmf_pgoff: 0,
        vma_file: 0,
        file_mapping: 0,
    };
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], u32 fields only, every bit pattern valid.
    unsafe impl aya::Pod for super::RaFnLayout {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_has_no_hidden_padding() {
        assert_eq!(core::mem::size_of::<RaFnLayout>(), 16 * 4);
    }
}
