//! The page-cache probes' shared types: what `filemap:*`, `writeback:*` and `iomap:*` programs
//! count per process (tgid) and system-wide, and the tracepoint field offsets they need.
//!
//! What each counter means (src/model/README.md's "Page cache" section defines the hit rate built on them):
//! - `read_pages`: pages requested through the read path (`mm_filemap_get_pages`, range
//!   `index..=last_index`). `filemap_read()` calls `filemap_get_pages()` once per batch of folios
//!   with the *remaining* range of the same call, so a continuation (same thread, file and last
//!   index, a later start) is not counted again.
//! - `mapped_pages`: pages in the fault-around window of `mm_filemap_map_pages`.
//! - `faults`: `mm_filemap_fault` events (one page each).
//! - `inserted_pages`: pages added to the page cache in this task's context
//!   (`mm_filemap_add_to_page_cache`, `1 << order` pages per folio).
//! - `write_inserted_pages`: of those, the ones the same thread dirtied right after inserting them
//!   (`writeback_dirty_folio` on the folio it last inserted): a buffered write allocating new
//!   cache pages, which is not a read miss.
//! - `dirtied_pages`: folios going from clean to dirty (`writeback_dirty_folio`); a folio this
//!   thread just inserted counts its `1 << order` pages, any other one page (the record carries no
//!   size).
//! - `evicted_pages`: `mm_filemap_delete_from_page_cache` (system-wide only: evictions run in
//!   kswapd or whichever task reclaims, not the one that used the page).
//! - `throttled`, `throttle_jiffies`: `balance_dirty_pages` events with a positive pause, and the
//!   sum of those pauses (jiffies; userspace converts with the kernel's HZ).
//! - `dio_*`: `iomap_dio_rw_begin` calls and bytes by direction: direct I/O bypasses the cache.
//! - `rss_file_bytes`: growth of the process's file-backed RSS (`kmem:rss_stat`, member
//!   MM_FILEPAGES, in its own context): the pages its mmap faults mapped. `mm_filemap_map_pages`
//!   only reports a fault-around window and `mm_filemap_fault` one page, while a fault may map a
//!   whole large folio (up to a 2 MiB PMD, with no event of its own): the RSS growth is the count.

use crate::readahead::{RaBind, RaReadMemo};

/// Per-CPU hash map: tgid (u32) → [`CacheCounters`].
pub const CACHE_PROCS_MAP: &str = "CACHE_PROCS";
/// Per-CPU array of one [`CacheCounters`]: the system-wide totals.
pub const CACHE_TOTALS_MAP: &str = "CACHE_TOTALS";
/// Array of one [`DirtyStateRecord`]: the last `global_dirty_state` and throttling seen.
pub const DIRTY_STATE_MAP: &str = "DIRTY_STATE";
/// Read-only global holding [`CacheLayout`], set by the loader before load.
pub const CACHE_LAYOUT_GLOBAL: &str = "CACHE_LAYOUT";
/// Read-only global holding the thread id whose page-cache insertions and dirtying the programs do
/// not count (0: none): the thread writing ioscope's own reports or recording, so that ioscope
/// does not watch itself write (its output was the one busy file of an idle machine).
pub const IGNORED_TID_GLOBAL: &str = "IGNORED_TID";

/// Most processes tracked at once. Entries of exited processes are removed by userspace after it
/// has read them once; a machine with more live processes doing file I/O loses the extra ones
/// (their events are only counted system-wide).
pub const CACHE_MAX_PROCESSES: u32 = 16384;

/// An `order` offset meaning the event has no such field: its page is one page (order 0), as
/// `mm_filemap_add_to_page_cache` and `mm_filemap_delete_from_page_cache` were before folios
/// (Linux 5.10's events are raised per page and carry no order).
pub const NO_ORDER: u32 = u32::MAX;

/// Where the fields the page-cache programs read sit in each tracepoint's record, from tracefs.
/// Each `*_ok` is 1 once userspace found every field that program needs; a program whose flag is 0
/// counts nothing (and userspace does not attach it).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheLayout {
    pub get_pages_ok: u32,
    pub get_pages_dev: u32,
    pub get_pages_ino: u32,
    pub get_pages_index: u32,
    pub get_pages_last_index: u32,

    pub map_pages_ok: u32,
    pub map_pages_index: u32,
    pub map_pages_last_index: u32,

    pub add_ok: u32,
    pub add_ino: u32,
    pub add_index: u32,
    /// [`NO_ORDER`] on kernels whose event has no `order` (before folios: one page each).
    pub add_order: u32,

    pub delete_ok: u32,
    pub delete_order: u32,

    pub dirty_ok: u32,
    pub dirty_ino: u32,
    pub dirty_index: u32,

    pub bdp_ok: u32,
    pub bdp_limit: u32,
    pub bdp_setpoint: u32,
    pub bdp_dirty: u32,
    pub bdp_pause: u32,

    pub gds_ok: u32,
    pub gds_nr_dirty: u32,
    pub gds_nr_writeback: u32,
    pub gds_background_thresh: u32,
    pub gds_dirty_thresh: u32,
    pub gds_dirty_limit: u32,

    pub dio_ok: u32,
    pub dio_count: u32,
    pub dio_ki_flags: u32,
    /// The `IOCB_WRITE` bit of `ki_flags`, from the event's print format.
    pub dio_write_flag: u32,

    pub rss_ok: u32,
    pub rss_mm_id: u32,
    pub rss_curr: u32,
    pub rss_member: u32,
    pub rss_size: u32,
    /// `MM_FILEPAGES` in the event's `member` symbols (0 on every kernel so far).
    pub rss_file_member: u32,

    /// `task:task_rename`: `pid` (i32) and `newcomm` (char[16]).
    pub rename_ok: u32,
    pub rename_pid: u32,
    pub rename_newcomm: u32,
}

impl CacheLayout {
    /// The value compiled into the object: nothing configured.
    pub const UNSET: CacheLayout = CacheLayout {
        get_pages_ok: 0,
        get_pages_dev: 0,
        get_pages_ino: 0,
        get_pages_index: 0,
        get_pages_last_index: 0,
        map_pages_ok: 0,
        map_pages_index: 0,
        map_pages_last_index: 0,
        add_ok: 0,
        add_ino: 0,
        add_index: 0,
        add_order: 0,
        delete_ok: 0,
        delete_order: 0,
        dirty_ok: 0,
        dirty_ino: 0,
        dirty_index: 0,
        bdp_ok: 0,
        bdp_limit: 0,
        bdp_setpoint: 0,
        bdp_dirty: 0,
        bdp_pause: 0,
        gds_ok: 0,
        gds_nr_dirty: 0,
        gds_nr_writeback: 0,
        gds_background_thresh: 0,
        gds_dirty_thresh: 0,
        gds_dirty_limit: 0,
        dio_ok: 0,
        dio_count: 0,
        dio_ki_flags: 0,
        dio_write_flag: 0,
        rss_ok: 0,
        rss_mm_id: 0,
        rss_curr: 0,
        rss_member: 0,
        rss_size: 0,
        rss_file_member: 0,
        rename_ok: 0,
        rename_pid: 0,
        rename_newcomm: 0,
    };
}

/// Per process (and once system-wide): cumulative page-cache counters. See the module docs.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheCounters {
    pub read_pages: u64,
    pub mapped_pages: u64,
    pub faults: u64,
    pub inserted_pages: u64,
    pub write_inserted_pages: u64,
    pub dirtied_pages: u64,
    pub evicted_pages: u64,
    pub throttled: u64,
    pub throttle_jiffies: u64,
    pub dio_reads: u64,
    pub dio_read_bytes: u64,
    pub dio_writes: u64,
    pub dio_write_bytes: u64,
    /// Bytes of file pages newly mapped into the process's page tables (`kmem:rss_stat`, MM_FILEPAGES
    /// growth): what mmap accesses really map, PMD-sized and fault-around mappings included.
    pub rss_file_bytes: u64,
    /// bpf_ktime_get_ns() when `comm` was set on this CPU: userspace takes the newest CPU's comm
    /// (an exec renames the process after it may already have touched the cache).
    pub comm_ns: u64,
    /// The process's cgroup v2 id (`bpf_get_current_cgroup_id()`), read with the comm: when the
    /// entry is created on this CPU, at exec and at a rename (not on the read path: it costs one
    /// helper call per entry). Userspace takes the one of the newest comm, and credits the
    /// process's counts to that cgroup (0: never set here, or no cgroup v2).
    pub cgroup_id: u64,
    /// The task's comm when the entry was created on this CPU (zeros when never set here).
    pub comm: [u8; 16],
}

/// The kernel's own dirty-limit figures as last reported, and the last throttling seen.
/// `global_dirty_state` fires whenever the kernel computes its global limits (in
/// `balance_dirty_pages()`, and whenever /proc/vmstat is read).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirtyStateRecord {
    /// Number of `global_dirty_state` events seen (0: the figures below are not set).
    pub seen: u64,
    pub nr_dirty: u64,
    pub nr_writeback: u64,
    pub background_thresh: u64,
    pub dirty_thresh: u64,
    /// The dirty limit the throttling actually uses (it trails `dirty_thresh` smoothly).
    pub dirty_limit: u64,
    /// bpf_ktime_get_ns() of the last `global_dirty_state`.
    pub seen_ns: u64,
    /// The last throttling pause (`balance_dirty_pages` with pause > 0): when, and its figures.
    pub throttle_ns: u64,
    pub throttle_limit: u64,
    pub throttle_setpoint: u64,
    pub throttle_dirty: u64,
    pub throttle_pause_jiffies: u64,
}

/// Per CPU: what the previous event on this CPU left for the next one to correlate with, and
/// everything else the cached-read path (`mm_filemap_get_pages`, the busiest event there is)
/// reads or writes while one process keeps reading on this CPU, readahead's part included. Its
/// cost there is mostly cache misses (each read's 4 KiB copy flushes much of L1) and lookups, so
/// what it needs per CPU is kept in this one 104-byte slot rather than in several maps.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheScratch {
    /// The thread of the last `mm_filemap_get_pages`, and its record.
    pub get_pages_tid: u32,
    pub get_pages_dev: u32,
    pub get_pages_ino: u64,
    pub get_pages_index: u64,
    pub get_pages_last: u64,
    /// Read pages counted on this CPU for `pending_tgid` and not yet added to its CACHE_PROCS
    /// entry: the hot read path only touches this per-CPU slot while the same process keeps
    /// reading, and moves the pages to the hash map when another process reads here. Userspace
    /// adds the pending pages when it reads the maps.
    pub pending_tgid: u32,
    /// Whether `task_tgid`/`task_tid` are the task running on this CPU: one of `TASK_*`.
    pub task_state: u32,
    pub pending_read_pages: u64,
    /// The task running on this CPU, as the read path last asked (`bpf_get_current_pid_tgid`),
    /// while `task_state` is [`TASK_KNOWN`]: `sched:sched_switch` makes it [`TASK_STALE`] at every
    /// context switch, so the busiest path asks once per time slice instead of once per read (a
    /// helper call was most of its cost).
    pub task_tgid: u32,
    pub task_tid: u32,
    /// This CPU's share of the system-wide read pages (CacheCounters::read_pages of CACHE_TOTALS
    /// is not used for them: one map fewer on the read path). Userspace adds it to the totals.
    pub read_pages: u64,
    /// Readahead's per-CPU state on the read path (see `readahead::RaBind`, `RaReadMemo`).
    pub ra_bind: RaBind,
    pub ra_memo: RaReadMemo,
}

/// `task_state`: no context switch seen on this CPU yet, so the `sched_switch` program may not be
/// attached (or not yet): the task is asked for at every read.
pub const TASK_UNTRACKED: u32 = 0;
/// `task_state`: a context switch happened since the task was remembered; ask again.
pub const TASK_STALE: u32 = 1;
/// `task_state`: `task_tgid`/`task_tid` are the running task.
pub const TASK_KNOWN: u32 = 2;

/// Per-CPU array of one [`WriteMemo`].
pub const WRITE_MEMO_MAP: &str = "WRITE_MEMO";

/// Page-cache insertions and dirtyings counted on this CPU for process `tgid` and not yet added to
/// its CACHE_PROCS entry (`inserted_pages`, `dirtied_pages`, `write_inserted_pages` of
/// [`CacheCounters`]): the first event of a process on a CPU is counted in its entry (creating it,
/// with the process's name), the following ones only here, until another process inserts or
/// dirties a page on this CPU and they move to the map. A buffered writer (a page inserted and
/// dirtied per 4 KiB write) thus costs no hash lookup per page for its process's counts.
/// Userspace adds the pending counts to the process's row when it reads the maps. `used`: 1 once
/// `tgid` is set (a pid of 0 is a process too).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteMemo {
    pub tgid: u32,
    pub used: u32,
    pub inserted_pages: u64,
    pub dirtied_pages: u64,
    pub write_inserted_pages: u64,
}

impl WriteMemo {
    /// Whether any count is pending.
    pub fn pending(&self) -> bool {
        self.inserted_pages != 0 || self.dirtied_pages != 0 || self.write_inserted_pages != 0
    }
}

/// Per-CPU array of one [`DioMemo`] (apart from [`CacheScratch`]: the cached-read path, the
/// busiest there is, keeps its one small slot to itself).
pub const DIO_MEMO_MAP: &str = "DIO_MEMO";

/// Direct I/O counted on this CPU for process `tgid` on file (`dev`, `ino`) and not yet added to
/// their CACHE_PROCS and FILE_IO entries. The first direct I/O of a (process, file) on a CPU is
/// counted in the maps (creating their entries, with the process's name); the following ones only
/// here, until another process or file does direct I/O on this CPU and they move to the maps. A
/// direct-I/O workload (a database, fio, a loop device's worker) thus costs no hash lookup per
/// I/O. Userspace adds the pending counts to both rows when it reads the maps.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DioMemo {
    pub tgid: u32,
    /// s_dev of the file's filesystem (kernel dev_t), as FILE_IO keys it (KEY_SB_DEV).
    pub dev: u32,
    pub ino: u64,
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
}

impl DioMemo {
    /// Whether any I/O is pending.
    pub fn pending(&self) -> bool {
        self.reads != 0 || self.writes != 0
    }

    /// One more direct I/O of `bytes`.
    #[inline(always)]
    pub fn add(&mut self, bytes: u64, write: bool) {
        if write {
            self.writes = self.writes.wrapping_add(1);
            self.write_bytes = self.write_bytes.wrapping_add(bytes);
        } else {
            self.reads = self.reads.wrapping_add(1);
            self.read_bytes = self.read_bytes.wrapping_add(bytes);
        }
    }
}

/// The start of `mm_filemap_add_to_page_cache`'s record where its fields follow each other, as
/// on every kernel with the event (`i_ino`, `index`, `s_dev`, then `order` when it has one): read
/// with one `bpf_probe_read` instead of one per field (each a helper call). On a kernel without
/// `order` the last bytes read are past the record, in the trace buffer that holds it, and unused.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddHead {
    pub ino: u64,
    pub index: u64,
    pub dev: u32,
    pub order: u8,
    pub _pad: [u8; 3],
}

impl AddHead {
    /// Whether the record at these offsets (`i_ino`, `index`, `s_dev` or None when the per-file
    /// part is off, `order` or [`NO_ORDER`]) has the fields where [`AddHead`] has them.
    pub const fn fits(ino: u32, index: u32, dev: Option<u32>, order: u32) -> bool {
        let Some(dev) = dev else { return false };
        index == ino.wrapping_add(8)
            && dev == ino.wrapping_add(16)
            && (order == NO_ORDER || order == ino.wrapping_add(20))
    }
}

/// Hash map (LRU): the `mm_id` of `kmem:rss_stat` → the file RSS (bytes) last reported.
pub const RSS_LAST_MAP: &str = "RSS_LAST";
pub const RSS_LAST_MAX: u32 = 16384;

/// Bytes of file RSS that are new since the last report for this mm: growth only (unmapping is
/// not an access), and nothing on the first report of an mm (its earlier history is unknown).
#[inline(always)]
pub fn rss_growth(last: Option<u64>, size: u64) -> u64 {
    match last {
        Some(last) if size > last => size - last,
        _ => 0,
    }
}

/// Per-CPU array of one [`CacheScratch`].
pub const CACHE_SCRATCH_MAP: &str = "CACHE_SCRATCH";

/// Whether a `get_pages` record continues the range the same thread's previous record asked for:
/// `filemap_read()` asks again for what is left of one read() after each batch of folios.
#[inline(always)]
pub fn continues_read(s: &CacheScratch, tid: u32, dev: u32, ino: u64, index: u64, last: u64) -> bool {
    s.get_pages_tid == tid
        && s.get_pages_dev == dev
        && s.get_pages_ino == ino
        && s.get_pages_last == last
        && index > s.get_pages_index
        && index <= last
}

/// Pages in the inclusive range `index..=last` (0 for a malformed range).
#[inline(always)]
pub fn range_pages(index: u64, last: u64) -> u64 {
    if last >= index {
        last - index + 1
    } else {
        0
    }
}

/// Pages in a folio of `order` (orders above 20 are not real: counted as one page).
#[inline(always)]
pub fn folio_pages(order: u8) -> u64 {
    if order <= 20 {
        1u64 << order
    } else {
        1
    }
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], only u32/u64/u8-array fields laid out without implicit padding, every
    // bit pattern valid.
    unsafe impl aya::Pod for super::CacheLayout {}
    // SAFETY: as above (15 u64 then 16 bytes).
    unsafe impl aya::Pod for super::CacheCounters {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::DirtyStateRecord {}
    // SAFETY: as above (fields ordered so that none needs padding; its size is tested).
    unsafe impl aya::Pod for super::CacheScratch {}
    // SAFETY: as above (two u32 then u64s; its size is tested).
    unsafe impl aya::Pod for super::DioMemo {}
    // SAFETY: as above (two u32 then u64s; its size is tested).
    unsafe impl aya::Pod for super::WriteMemo {}
    // SAFETY: as above.
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_continued_in_the_next_batch_is_not_counted_twice() {
        let s = CacheScratch {
            get_pages_tid: 7,
            get_pages_dev: 1,
            get_pages_ino: 12,
            get_pages_index: 0,
            get_pages_last: 255,
            ..Default::default()
        };
        assert!(continues_read(&s, 7, 1, 12, 31, 255));
        assert!(continues_read(&s, 7, 1, 12, 255, 255));
        // Another thread, file, end, or a start not after the previous one: a new request.
        assert!(!continues_read(&s, 8, 1, 12, 31, 255));
        assert!(!continues_read(&s, 7, 1, 13, 31, 255));
        assert!(!continues_read(&s, 7, 1, 12, 31, 300));
        assert!(!continues_read(&s, 7, 1, 12, 0, 255));
    }

    #[test]
    fn rss_growth_counts_increases_after_the_first_report() {
        assert_eq!(rss_growth(None, 1 << 30), 0);
        assert_eq!(rss_growth(Some(4096), 4096 * 513), 4096 * 512);
        assert_eq!(rss_growth(Some(8192), 4096), 0);
    }

    #[test]
    fn ranges_and_folios_count_pages() {
        assert_eq!(range_pages(0, 31), 32);
        assert_eq!(range_pages(5, 5), 1);
        assert_eq!(range_pages(6, 5), 0);
        assert_eq!(folio_pages(0), 1);
        assert_eq!(folio_pages(9), 512);
        assert_eq!(folio_pages(200), 1);
    }

    #[test]
    fn the_add_record_is_read_in_one_go_only_where_its_fields_follow_each_other() {
        // 6.18 (`order` at 36) and 5.10 (no `order`).
        assert!(AddHead::fits(16, 24, Some(32), 36));
        assert!(AddHead::fits(16, 24, Some(32), NO_ORDER));
        // Per-file part off, or a field elsewhere: one read per field.
        assert!(!AddHead::fits(16, 24, None, 36));
        assert!(!AddHead::fits(16, 24, Some(40), 36));
        assert!(!AddHead::fits(16, 32, Some(32), 36));
        assert!(!AddHead::fits(16, 24, Some(32), 44));
    }

    #[test]
    fn sizes_have_no_hidden_padding() {
        assert_eq!(core::mem::size_of::<CacheLayout>(), 41 * 4);
        assert_eq!(core::mem::size_of::<CacheCounters>(), 16 * 8 + 16);
        assert_eq!(core::mem::size_of::<DirtyStateRecord>(), 12 * 8);
        assert_eq!(core::mem::size_of::<AddHead>(), 3 * 8);
        assert_eq!(core::mem::size_of::<CacheScratch>(), 64 + 24 + 16);
        assert_eq!(core::mem::size_of::<DioMemo>(), 6 * 8);
        assert_eq!(core::mem::size_of::<WriteMemo>(), 4 * 8);
    }
}
