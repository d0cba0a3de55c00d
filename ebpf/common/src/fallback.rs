//! What the programs on kernel functions (fentry/fexit: the fallbacks for tracepoints a kernel
//! lacks, see ebpf/README.md) need to read the functions' arguments as the tracepoints' records
//! would hold them: offsets in the kernel's structs, from its BTF at run time.

/// Read-only global holding [`FnLayout`], set by the loader before load.
pub const FN_LAYOUT_GLOBAL: &str = "FN_LAYOUT";

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FnLayout {
    /// 0: the function programs do nothing.
    pub configured: u32,
    /// `struct kiocb`: `ki_filp` (pointer), `ki_pos` (i64).
    pub kiocb_filp: u32,
    pub kiocb_pos: u32,
    /// `struct file`: `f_mapping` (pointer).
    pub file_mapping: u32,
    /// `filemap_get_pages()`'s second argument: 1 when it is `struct iov_iter *` (before Linux
    /// 6.5; the count is its `count`, at `iov_count`), 0 when it is `size_t count`.
    pub get_pages_iter: u32,
    pub iov_count: u32,
    /// log2 of the page size.
    pub page_shift: u32,
    pub _pad: u32,
}

impl FnLayout {
    pub const UNSET: FnLayout = FnLayout {
        configured: 0,
        kiocb_filp: 0,
        kiocb_pos: 0,
        file_mapping: 0,
        get_pages_iter: 0,
        iov_count: 0,
        page_shift: 12,
        _pad: 0,
    };
}

/// The pages `index..=last` a read of `count` bytes at byte `pos` asks for, as
/// `mm_filemap_get_pages` reports them (`last_index - 1` of `filemap_get_pages()`, whose
/// `last_index` is the page after the read); None for an empty read or a negative position.
#[inline(always)]
pub fn read_pages_range(pos: i64, count: u64, page_shift: u32) -> Option<(u64, u64)> {
    if pos < 0 || count == 0 || page_shift >= 32 {
        return None;
    }
    let pos = pos as u64;
    let page = 1u64 << page_shift;
    let end = pos.checked_add(count)?.checked_add(page - 1)?;
    Some((pos >> page_shift, (end >> page_shift) - 1))
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], u32 fields only, every bit pattern valid.
    unsafe impl aya::Pod for super::FnLayout {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_asks_for_the_pages_it_touches() {
        assert_eq!(read_pages_range(0, 4096, 12), Some((0, 0)));
        assert_eq!(read_pages_range(0, 4097, 12), Some((0, 1)));
        assert_eq!(read_pages_range(4095, 2, 12), Some((0, 1)));
        assert_eq!(read_pages_range(1 << 20, 128 << 10, 12), Some((256, 287)));
        assert_eq!(read_pages_range(0, 0, 12), None);
        assert_eq!(read_pages_range(-1, 10, 12), None);
    }

    #[test]
    fn the_layout_has_no_hidden_padding() {
        assert_eq!(core::mem::size_of::<FnLayout>(), 8 * 4);
    }
}
