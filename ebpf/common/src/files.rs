//! Per-file I/O attribution: what the page-cache and writeback programs count per file, keyed by
//! the file's (device, inode), so readahead, writeback and direct I/O are credited to the files
//! they belong to rather than to whichever task (a kworker, kswapd) happened to run them.
//!
//! Two kinds of key (see [`FileKey::kind`]):
//! - [`KEY_SB_DEV`]: `dev` is the filesystem's `s_dev` (`filemap:mm_filemap_add_to_page_cache`,
//!   `iomap:iomap_dio_rw_begin`, and dirtying of a folio the same thread just inserted).
//! - [`KEY_BDI_DEV`]: `dev` is parsed from the backing device's name ("major:minor") of the
//!   `writeback:*` events, which carry no `s_dev`. Userspace merges these onto the filesystem on
//!   that disk (the same as `s_dev` for a whole-disk or loop filesystem, the parent disk for a
//!   partition).
//!
//! Counters (cumulative, per CPU; userspace sums the CPUs with wrapping arithmetic, because a
//! write allocation is taken back on the CPU of the dirtying, which may not be the inserting one):
//! - `inserted_pages`: pages read from disk into the file's cache. With the bio program
//!   ([`BIO_PROGRAM`], BTF kernels): the pages of each read bio submitted for the file's folios
//!   (a hole's zero-filled pages have none); without it, pages added to the page cache less those
//!   dirtied right after by the same thread (a write allocating a page).
//! - `readahead_pages`: of those, the ones outside the range the same thread's last read miss
//!   asked for (`readahead:page_cache_sync_ra`'s `index`, `req_count`) or, with the bio program,
//!   its last fault (`filemap:mm_filemap_fault`'s page, 6.12+): the readahead window, and mmap
//!   read-around.
//! - `dirtied_pages`, `writeback_pages` (`writeback_single_inode`'s `wrote`, in the flusher's or
//!   the syncing task's context), `dio_read_bytes`, `dio_write_bytes`, `fs_writeback_bytes`
//!   (writeback as the filesystem does it, fsync's included; keyed by `s_dev`).

/// The program that counts a file's writeback (`writeback:writeback_single_inode`); the model
/// reads its status by this name to tell "no writeback" from "not traced".
pub const WRITEBACK_PROGRAM: &str = "writeback_single_inode";

/// Per-CPU LRU hash map: [`FileKey`] → [`FileCounters`].
pub const FILE_IO_MAP: &str = "FILE_IO";
/// Per-CPU array of one u64: FILE_IO's inserts, counted after each (see [`crate::inserts`]).
pub const FILE_IO_INSERTS_MAP: &str = "FILE_IO_INSERTS";
/// LRU hash map: thread id → [`ThreadFileRecord`], the folio the thread inserted last and the range
/// its last read miss asked for. Per thread, not per CPU: a writer preempted or migrated between
/// inserting a folio (write_begin) and dirtying it (write_end) must still be recognised. One map
/// for both: an insertion needs both, in one lookup.
pub const FILE_LAST_INSERT_MAP: &str = "FILE_LAST_INSERT";
/// Read-only global holding [`FileLayout`], set by the loader before load.
pub const FILE_LAYOUT_GLOBAL: &str = "FILE_LAYOUT";

/// Most files tracked at once; the least recently updated ones are evicted beyond it.
pub const FILE_MAX_ENTRIES: u32 = 16384;
pub const FILE_LAST_INSERT_MAX: u32 = 8192;
/// [`FileInsertRecord::flags`]: the insertion was counted on the file (`dev`), as readahead.
pub const INSERT_PER_FILE: u32 = 1;
pub const INSERT_READAHEAD: u32 = 2;
/// The insertion was not counted as read (the bio program counts disk reads, [`FILE_BIO_ON_MAP`]):
/// a dirtying that follows it takes nothing back.
pub const INSERT_BY_BIO: u32 = 4;

/// The program counting a file's disk reads from the read bios submitted for its pages
/// (`block:block_bio_queue`, BTF tracepoint only).
pub const BIO_PROGRAM: &str = "file_bio_queue_btf";
/// Read-only global holding [`BioLayout`], set by the loader before load.
pub const BIO_LAYOUT_GLOBAL: &str = "FILE_BIO_LAYOUT";
/// Array of one u32, set to 1 by userspace once [`BIO_PROGRAM`] is attached: from then on the
/// insertion no longer counts a page as read (`inserted_pages`, `readahead_pages`); the bio program
/// counts the pages a read bio was submitted for in those same counters.
pub const FILE_BIO_ON_MAP: &str = "FILE_BIO_ON";

pub const KEY_SB_DEV: u32 = 0;
pub const KEY_BDI_DEV: u32 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileKey {
    /// Kernel `dev_t` encoding: major << 20 | minor.
    pub dev: u32,
    /// [`KEY_SB_DEV`] or [`KEY_BDI_DEV`].
    pub kind: u32,
    pub ino: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileCounters {
    pub inserted_pages: u64,
    pub readahead_pages: u64,
    pub dirtied_pages: u64,
    pub writeback_pages: u64,
    pub dio_read_bytes: u64,
    pub dio_write_bytes: u64,
    /// Bytes the filesystem itself sent to writeback (`ext4:ext4_writepages_result`'s
    /// `pages_written`, `iomap:iomap_writeback_folio`'s folio up to EOF): every writeback, also
    /// fsync's, which `writeback_single_inode` does not see.
    pub fs_writeback_bytes: u64,
    /// The last process (not a flusher's writeback) that read, dirtied or did direct I/O on the
    /// file on this CPU, and its comm.
    pub tgid: u32,
    pub _pad: u32,
    pub comm: [u8; 16],
}

/// The folio a thread inserted last, with what it was counted as ([`INSERT_PER_FILE`],
/// [`INSERT_READAHEAD`]). Kept for the page-cache counts too (a write allocating a page), whether
/// or not the per-file part is on.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileInsertRecord {
    pub dev: u32,
    pub flags: u32,
    pub ino: u64,
    pub index: u64,
    pub pages: u64,
}

/// What a read asked for when it missed (`page_cache_sync_ra`): pages `index..index + req_count`
/// of the file. Pages the same thread inserts in that range are demand reads; any other inserted
/// page is readahead.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DemandRecord {
    pub dev: u32,
    pub _pad: u32,
    pub ino: u64,
    pub index: u64,
    pub req_count: u64,
}

/// A thread's value in [`FILE_LAST_INSERT_MAP`]: its last insertion (no pages: none, or taken
/// back by its dirtying) and its last read miss (`req_count` 0: none).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadFileRecord {
    pub insert: FileInsertRecord,
    pub demand: DemandRecord,
}

/// Whether page `index` of (dev, ino) is in the range the thread's read asked for.
#[inline(always)]
pub fn is_demand(r: &DemandRecord, dev: u32, ino: u64, index: u64) -> bool {
    r.dev == dev && r.ino == ino && index >= r.index && index - r.index < r.req_count
}

/// Per-CPU array of one [`DioPending`]. `iomap_dio_rw_begin` has the size of a direct I/O
/// but, for read(2)/write(2), not its direction (the kernel does not set IOCB_WRITE there); the
/// first `iomap_iter` of the same thread on the same file with the DIRECT flag has it (IOMAP_WRITE).
/// The two events follow each other in one system call, so on one CPU: a per-CPU slot instead of
/// a hash map keyed by thread (every direct I/O of every file runs these programs; a hash insert,
/// lookup and delete were most of their cost). A thread moved to another CPU in between, or
/// another thread's direct I/O on this CPU in between, loses that one I/O's bytes.
pub const FILE_DIO_PENDING_MAP: &str = "FILE_DIO_PENDING";

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DioPending {
    pub dev: u32,
    /// The thread whose direct I/O this is; 0 once used.
    pub tid: u32,
    pub ino: u64,
    pub bytes: u64,
}

/// Offsets of the fields the per-file counting needs beyond the page-cache layout.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileLayout {
    /// `s_dev` of `mm_filemap_add_to_page_cache`.
    pub add_ok: u32,
    pub add_dev: u32,
    /// `name` (char[32], the bdi) of `writeback_dirty_folio`.
    pub dirty_ok: u32,
    pub dirty_name: u32,
    /// `dev`, `ino` of `iomap_dio_rw_begin`.
    pub dio_ok: u32,
    pub dio_dev: u32,
    pub dio_ino: u32,
    /// `name`, `ino`, `wrote` of `writeback_single_inode`.
    pub wsi_ok: u32,
    pub wsi_name: u32,
    pub wsi_ino: u32,
    pub wsi_wrote: u32,
    /// `s_dev`, `i_ino`, `index`, `req_count` of `readahead:page_cache_sync_ra`.
    pub sync_ra_ok: u32,
    pub sync_ra_dev: u32,
    pub sync_ra_ino: u32,
    pub sync_ra_index: u32,
    pub sync_ra_req_count: u32,
    /// `dev`, `ino`, `flags` of `iomap:iomap_iter`, and its WRITE and DIRECT bits.
    pub iter_ok: u32,
    pub iter_dev: u32,
    pub iter_ino: u32,
    pub iter_flags: u32,
    pub iter_write_flag: u32,
    pub iter_direct_flag: u32,
    /// log2 of the page size (ext4 counts pages).
    pub page_shift: u32,
    /// `dev`, `ino`, `pages_written` of `ext4:ext4_writepages_result`.
    pub ewr_ok: u32,
    pub ewr_dev: u32,
    pub ewr_ino: u32,
    pub ewr_pages: u32,
    /// `dev`, `ino`, `size`, `offset`, `length` of `iomap:iomap_writeback_folio`.
    pub iwf_ok: u32,
    pub iwf_dev: u32,
    pub iwf_ino: u32,
    pub iwf_size: u32,
    pub iwf_offset: u32,
    pub iwf_length: u32,
    /// 1 where `length` is an `unsigned int` (4 bytes): the pre-folio `iomap:iomap_writepage`
    /// (5.10: `offset` an `unsigned long` file position, `length` the page's size).
    pub iwf_short_length: u32,
    /// `s_dev`, `i_ino`, `index` of `filemap:mm_filemap_fault` (6.12+): the page a fault asks
    /// for is the thread's demand while the bio program counts disk reads.
    pub fault_ok: u32,
    pub fault_dev: u32,
    pub fault_ino: u32,
    pub fault_index: u32,
    /// For the BTF tracepoint twins of the iomap programs.
    pub btf: IomapBtfLayout,
}

/// Where the BTF tracepoint twins of `iomap_iter` and `iomap_dio_rw_begin` find what those
/// events' records would hold, in the kernel's own structs (offsets from its BTF at run time;
/// see ioscope_common::block::RequestLayout for why that makes them cheap). The flag values
/// (IOMAP_DIRECT, IOMAP_WRITE, IOCB_WRITE) still come from the events' formats.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IomapBtfLayout {
    /// 0: the twins do nothing (the classic programs are used).
    pub configured: u32,
    /// `struct iomap_iter`: `inode` (pointer), `flags` (u32).
    pub iter_inode: u32,
    pub iter_flags: u32,
    /// `struct inode`: `i_sb` (pointer), `i_ino` (u64).
    pub inode_sb: u32,
    pub inode_ino: u32,
    /// `struct super_block`: `s_dev` (u32): the events' `dev`.
    pub sb_dev: u32,
    /// `struct kiocb`: `ki_filp` (pointer), `ki_flags` (u32).
    pub kiocb_filp: u32,
    pub kiocb_flags: u32,
    /// `struct file`: `f_inode` (pointer).
    pub file_inode: u32,
    /// `struct iov_iter`: `count` (u64): the event's `count`.
    pub iov_count: u32,
    /// 1 when `struct iov_iter` has `data_source` (bool, Linux 5.14+: true when the iterator is the
    /// source of the data, i.e. a write), or before it `type` (WRITE is its bit 0), at
    /// `iov_data_source` (bit 0 of the byte there tells): the `iomap_dio_rw_begin` twin then
    /// knows the direct I/O's direction itself, and `iomap_iter` (two runs per direct I/O, on the
    /// hot path) is not traced at all.
    pub dio_direction: u32,
    pub iov_data_source: u32,
    /// `struct kiocb`: `ki_pos` (i64); `struct inode`: `i_size` (i64). With `dio_direction`: a
    /// direct read is counted for what it can read before the end of the file (a read at the end,
    /// as every read loop ends with, asks for a whole buffer and reads nothing).
    pub kiocb_pos: u32,
    pub inode_size: u32,
}

impl IomapBtfLayout {
    pub const UNSET: IomapBtfLayout = IomapBtfLayout {
        configured: 0,
        iter_inode: 0,
        iter_flags: 0,
        inode_sb: 0,
        inode_ino: 0,
        sb_dev: 0,
        kiocb_filp: 0,
        kiocb_flags: 0,
        file_inode: 0,
        iov_count: 0,
        dio_direction: 0,
        iov_data_source: 0,
        kiocb_pos: 0,
        inode_size: 0,
    };
}

impl FileLayout {
    pub const UNSET: FileLayout = FileLayout {
        add_ok: 0,
        add_dev: 0,
        dirty_ok: 0,
        dirty_name: 0,
        dio_ok: 0,
        dio_dev: 0,
        dio_ino: 0,
        wsi_ok: 0,
        wsi_name: 0,
        wsi_ino: 0,
        wsi_wrote: 0,
        sync_ra_ok: 0,
        sync_ra_dev: 0,
        sync_ra_ino: 0,
        sync_ra_index: 0,
        sync_ra_req_count: 0,
        iter_ok: 0,
        iter_dev: 0,
        iter_ino: 0,
        iter_flags: 0,
        iter_write_flag: 0,
        iter_direct_flag: 0,
        page_shift: 0,
        ewr_ok: 0,
        ewr_dev: 0,
        ewr_ino: 0,
        ewr_pages: 0,
        iwf_ok: 0,
        iwf_dev: 0,
        iwf_ino: 0,
        iwf_size: 0,
        iwf_offset: 0,
        iwf_length: 0,
        iwf_short_length: 0,
        fault_ok: 0,
        fault_dev: 0,
        fault_ino: 0,
        fault_index: 0,
        btf: IomapBtfLayout::UNSET,
    };
}

/// Where the `block:block_bio_queue` BTF tracepoint program finds what it reads (offsets from the
/// kernel's BTF, each checked for the size loaded): the bio, its first page, the page's folio
/// (head page), the folio's mapping and that mapping's inode.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BioLayout {
    /// 0: the program does nothing.
    pub configured: u32,
    /// The bio is argument 1 (Linux 5.10: `TP_PROTO(struct request_queue *q, struct bio *bio)`),
    /// else argument 0 (5.11+: `TP_PROTO(struct bio *bio)`).
    pub bio_arg1: u32,
    /// `struct bio`: `bi_opf` (u32), `bi_flags` (u16), `bi_iter.bi_size` (u32), `bi_io_vec` (ptr).
    pub bio_opf: u32,
    pub bio_flags: u32,
    pub bio_size: u32,
    pub bio_io_vec: u32,
    /// `struct bio_vec`: `bv_page` (ptr).
    pub bvec_page: u32,
    /// `struct page`: `flags` (8 bytes), `compound_head` (8 bytes: bit 0 set on a tail page, the
    /// head's address plus 1).
    pub page_flags: u32,
    pub page_head: u32,
    /// `struct folio` (5.10: `struct page`): `mapping` (ptr), `index` (u64).
    pub folio_mapping: u32,
    pub folio_index: u32,
    /// `struct address_space`: `host` (ptr).
    pub mapping_host: u32,
    /// `struct inode`: `i_sb` (ptr), `i_ino` (u64); `struct super_block`: `s_dev` (u32).
    pub inode_sb: u32,
    pub inode_ino: u32,
    pub sb_dev: u32,
    /// `REQ_OP_READ` (`enum req_op`), the bit number of `BIO_CLONED` in `bi_flags`, of
    /// `PG_uptodate` in the page flags.
    pub op_read: u32,
    pub cloned_bit: u32,
    pub uptodate_bit: u32,
    /// log2 of the page size.
    pub page_shift: u32,
}

impl BioLayout {
    pub const UNSET: BioLayout = BioLayout {
        configured: 0,
        bio_arg1: 0,
        bio_opf: 0,
        bio_flags: 0,
        bio_size: 0,
        bio_io_vec: 0,
        bvec_page: 0,
        page_flags: 0,
        page_head: 0,
        folio_mapping: 0,
        folio_index: 0,
        mapping_host: 0,
        inode_sb: 0,
        inode_ino: 0,
        sb_dev: 0,
        op_read: 0,
        cloned_bit: 0,
        uptodate_bit: 0,
        page_shift: 0,
    };
}

/// `REQ_OP_BITS` (8 since Linux 4.10): the operation is `bi_opf`'s low byte.
pub const REQ_OP_MASK: u32 = 0xff;

/// Of a read bio's `pages` pages from file page `first`, how many lie inside what the thread's
/// last read miss asked for ([`DemandRecord`] of the same file): demand; the rest is readahead.
#[inline(always)]
pub fn demand_pages(r: &DemandRecord, dev: u32, ino: u64, first: u64, pages: u64) -> u64 {
    if r.dev != dev || r.ino != ino {
        return 0;
    }
    let start = if first > r.index { first } else { r.index };
    let (end_bio, end_req) = (first.saturating_add(pages), r.index.saturating_add(r.req_count));
    let end = if end_bio < end_req { end_bio } else { end_req };
    end.saturating_sub(start)
}

/// A backing device's name "major:minor" as a kernel `dev_t` (major << 20 | minor); None for any
/// other name (btrfs's "btrfs-1", "(unknown)", ...).
#[inline(always)]
pub fn bdi_dev(name: &[u8; 32]) -> Option<u32> {
    let mut major: u32 = 0;
    let mut cur: u32 = 0;
    let mut colon = false;
    let mut digits = 0u32;
    let mut i = 0;
    while i < 24 {
        let c = name[i];
        if c == 0 {
            break;
        }
        if c.is_ascii_digit() {
            cur = cur.wrapping_mul(10).wrapping_add(u32::from(c - b'0'));
            digits += 1;
        } else if c == b':' && !colon && digits > 0 {
            major = cur;
            cur = 0;
            digits = 0;
            colon = true;
        } else {
            return None;
        }
        i += 1;
    }
    if !colon || digits == 0 || major >= 1 << 12 || cur >= 1 << 20 {
        return None;
    }
    Some(major << 20 | cur)
}

/// The bytes of a folio of `length` at `offset` that lie before EOF (`size`): what writing it back
/// writes of the file.
#[inline(always)]
pub fn folio_bytes_before_eof(size: i64, offset: i64, length: u64) -> u64 {
    if size <= offset {
        return 0;
    }
    let left = (size - offset) as u64;
    if left < length {
        left
    } else {
        length
    }
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], u32/u64 fields without implicit padding, every bit pattern valid.
    unsafe impl aya::Pod for super::FileKey {}
    // SAFETY: as above (explicit `_pad`, then 16 bytes).
    unsafe impl aya::Pod for super::FileCounters {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::FileInsertRecord {}
    // SAFETY: as above (16 u32).
    unsafe impl aya::Pod for super::FileLayout {}
    // SAFETY: as above (19 u32).
    unsafe impl aya::Pod for super::BioLayout {}
    // SAFETY: as above (explicit `_pad`).
    unsafe impl aya::Pod for super::DemandRecord {}
    // SAFETY: as above (two such records).
    unsafe impl aya::Pod for super::ThreadFileRecord {}
    // SAFETY: as above (explicit `_pad`).
    unsafe impl aya::Pod for super::DioPending {}
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_bio_is_demand_where_it_overlaps_the_read_miss() {
        let r = DemandRecord { dev: 7, _pad: 0, ino: 12, index: 100, req_count: 4 };
        // The miss asked for 100..104: a bio of 100..132 is 4 demand, 28 readahead.
        assert_eq!(super::demand_pages(&r, 7, 12, 100, 32), 4);
        assert_eq!(super::demand_pages(&r, 7, 12, 102, 32), 2);
        assert_eq!(super::demand_pages(&r, 7, 12, 96, 2), 0);
        assert_eq!(super::demand_pages(&r, 7, 12, 104, 8), 0);
        assert_eq!(super::demand_pages(&r, 7, 13, 100, 32), 0);
        assert_eq!(super::demand_pages(&r, 8, 12, 100, 32), 0);
        assert_eq!(super::demand_pages(&r, 7, 12, 90, 200), 4);
    }

    use super::*;

    fn name(s: &str) -> [u8; 32] {
        let mut n = [0u8; 32];
        n[..s.len()].copy_from_slice(s.as_bytes());
        n
    }

    #[test]
    fn bdi_names_parse_as_kernel_dev_t() {
        assert_eq!(bdi_dev(&name("7:0")), Some(7 << 20));
        assert_eq!(bdi_dev(&name("259:12")), Some(259 << 20 | 12));
        assert_eq!(bdi_dev(&name("btrfs-1")), None);
        assert_eq!(bdi_dev(&name("(unknown)")), None);
        assert_eq!(bdi_dev(&name("8:")), None);
        assert_eq!(bdi_dev(&name(":1")), None);
        assert_eq!(bdi_dev(&name("")), None);
    }

    #[test]
    fn sizes_have_no_hidden_padding() {
        assert_eq!(core::mem::size_of::<FileKey>(), 16);
        assert_eq!(core::mem::size_of::<FileCounters>(), 7 * 8 + 8 + 16);
        assert_eq!(core::mem::size_of::<FileInsertRecord>(), 8 + 3 * 8);
        assert_eq!(core::mem::size_of::<FileLayout>(), (38 + 14) * 4);
        assert_eq!(core::mem::size_of::<DioPending>(), 24);
        assert_eq!(core::mem::size_of::<DemandRecord>(), 32);
        assert_eq!(core::mem::size_of::<ThreadFileRecord>(), 64);
    }

    #[test]
    fn a_folio_counts_up_to_eof() {
        assert_eq!(folio_bytes_before_eof(10_000, 8192, 4096), 1808);
        assert_eq!(folio_bytes_before_eof(1 << 20, 0, 16384), 16384);
        assert_eq!(folio_bytes_before_eof(4096, 4096, 4096), 0);
    }

    #[test]
    fn demand_is_the_requested_range_of_the_same_file() {
        let r = DemandRecord { dev: 7 << 20, _pad: 0, ino: 12, index: 100, req_count: 32 };
        assert!(is_demand(&r, 7 << 20, 12, 100));
        assert!(is_demand(&r, 7 << 20, 12, 131));
        assert!(!is_demand(&r, 7 << 20, 12, 132));
        assert!(!is_demand(&r, 7 << 20, 12, 99));
        assert!(!is_demand(&r, 7 << 20, 13, 100));
        assert!(!is_demand(&r, 7 << 20 | 1, 12, 100));
        assert!(!is_demand(&DemandRecord::default(), 0, 0, 0), "no read miss: no demand");
    }
}
