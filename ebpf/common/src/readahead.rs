//! The readahead probes' shared types. `readahead:*` tracepoints tell which range each readahead
//! window covers; a folio inserted into the page cache (`mm_filemap_add_to_page_cache`) by the same
//! thread inside its last window was brought in by readahead and is remembered in [`RA_PAGES_MAP`]
//! until it is either **used** (a read, `mm_filemap_get_pages`, or a fault, `mm_filemap_fault` /
//! `mm_filemap_map_pages`, covers it) or **wasted** (`mm_filemap_delete_from_page_cache` evicts it
//! first). Per file (device, inode) the programs count into [`RaFileStats`]; src/model/README.md's
//! "Readahead" section defines the figures built on them.

/// Hash map: [`RaPageKey`] → [`RaPage`], the readahead folios neither used nor evicted yet.
pub const RA_PAGES_MAP: &str = "RA_PAGES";
/// Folios remembered at once. A plain hash map, not an LRU one, so that a full map refuses the
/// insert and the refusal is counted ([`RaTotals::untracked_pages`]) instead of silently forgetting
/// an older folio (which would later look like neither used nor wasted).
pub const RA_PAGES_MAX: u32 = 262_144;
/// Hash map: [`RaFileKey`] → [`RaFileStats`].
pub const RA_FILES_MAP: &str = "RA_FILES";
/// Per-CPU array of one u64: RA_FILES's inserts, counted after each (see [`crate::inserts`]).
pub const RA_FILES_INSERTS_MAP: &str = "RA_FILES_INSERTS";
/// Files tracked at once; userspace removes files idle with nothing pending.
pub const RA_FILES_MAX: u32 = 8192;
/// Per-CPU array of one [`RaTotals`].
pub const RA_TOTALS_MAP: &str = "RA_TOTALS";
/// LRU hash map: thread id → its last readahead window ([`RaWindow`]).
pub const RA_WINDOWS_MAP: &str = "RA_WINDOWS";
pub const RA_WINDOWS_MAX: u32 = 4096;
/// LRU hash map: `struct address_space *` (the raw `mm_filemap_get_pages` argument) → the file's
/// [`RaFileKey`]. The cached-read path is traced as a raw tracepoint (no record: far cheaper), which
/// names the file only by its mapping's address; the binding is learnt from a readahead event of
/// the same thread just before (see [`RaBind`]).
pub const RA_MAPPINGS_MAP: &str = "RA_MAPPINGS";
pub const RA_MAPPINGS_MAX: u32 = 8192;
/// LRU hash map: thread id → its last readahead event ([`RaThreadBind`]), for the read that
/// follows it when the thread moved to another CPU while the read waited for its pages (the
/// per-CPU [`RaBind`] is then on the CPU it left).
pub const RA_BINDS_MAP: &str = "RA_BINDS";
pub const RA_BINDS_MAX: u32 = 1024;
/// How long after its readahead event a thread's [`RaThreadBind`] may bind a read (ns): the read
/// waits for the pages the event asked for, seconds at worst on a slow disk.
pub const RA_BIND_NS: u64 = 10_000_000_000;
/// Array of one [`RaShared`]: what every CPU's cached-read path checks before any lookup.
pub const RA_SHARED_MAP: &str = "RA_SHARED";
/// Per-CPU array of one [`RaNoWindow`]: the insertion path's memo of a thread without a window.
pub const RA_NO_WINDOW_MAP: &str = "RA_NO_WINDOW";
/// Read-only global holding [`RaLayout`], set by the loader before load.
pub const RA_LAYOUT_GLOBAL: &str = "RA_LAYOUT";
/// Buckets of the time-to-first-use histogram: bucket `b` holds [2^b, 2^(b+1)) µs (bucket 0 also
/// holds < 1 µs), the last one everything from 2^(N-1) µs on.
pub const RA_USE_BUCKETS: usize = 24;
/// Most processes remembered per file as the ones triggering its readahead.
pub const RA_TRIGGERS: usize = 4;
/// Most folios one access event walks (a read batch is at most 31 folios).
pub const RA_WALK_MAX: u32 = 64;
/// Most folios one read bio marks read from disk ([`RaPage::disk`]): 1.5 MiB of 4 KiB folios, a
/// loop device's 2560 KiB read-around bios (138-320 pages) whole; a bio's folios past it count as
/// a hole's. The verifier walks every iteration of the loop, and its states are charged to the
/// loader's memory cgroup: at 1,024 `ioscope serve` under a 60 MiB limit was OOM-killed while
/// loading in 3 of 5 starts (copy_verifier_state in bpf_prog_load), at 384 in none of 4.
pub const RA_BIO_WALK_MAX: u32 = 384;
/// Most pages a read may have taken without an `mm_filemap_get_pages` event of its own (see
/// [`use_from`]).
pub const RA_GAP_MAX: u64 = 64;
/// LRU hash, thread id → [`RaLastRead`]: each thread's last read of a file with readahead pages
/// pending.
pub const RA_LAST_READ_MAP: &str = "RA_LAST_READ";
pub const RA_LAST_READ_MAX: u32 = 1024;

/// A thread's last read of a file with readahead pages pending, in [`RA_LAST_READ_MAP`]: the
/// file's mapping (as the read events give it), and the first and last page of the event's range.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaLastRead {
    pub mapping: u64,
    pub index: u64,
    pub last: u64,
}

/// Where the readahead pages a read of `index..` of `mapping` uses begin. `filemap_get_pages()`
/// raises `mm_filemap_get_pages` only on its usual return: when the last folio of its batch is
/// not up to date (its readahead I/O in flight) and the wait for it gives up, it drops that folio
/// and returns the rest without the event, and the read's next call, starting at the dropped
/// folio, raises it (a read may make several such calls in a row).
/// The event's range is the rest of the read (`index` to the page of the read's end), so every
/// call of one `read()` has the same `last`. The folios those batches returned were read all the
/// same, some inserted after the previous event (by the readahead they triggered):
/// - the event inside the thread's previous one (`prev`), past its `index`, is a later call of the
///   same read: the pages from that `index` on were read;
/// - the event starting past `prev`'s `last` by at most [`RA_GAP_MAX`] pages is the next read of
///   the same sequential reader: the pages between were read. (A thread that seeks forward over
///   fewer pages than that has the readahead pages it skipped counted used.)
#[inline(always)]
pub fn use_from(prev: Option<RaLastRead>, mapping: u64, index: u64) -> u64 {
    match prev {
        Some(p) if p.mapping == mapping && p.index < index && index <= p.last => p.index,
        Some(p) if p.mapping == mapping && p.last < index && index - p.last - 1 <= RA_GAP_MAX => p.last + 1,
        _ => index,
    }
}

/// Field offsets of every program, from tracefs; `*_ok` is 1 when userspace found them all.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaLayout {
    /// `page_cache_sync_ra` and `page_cache_async_ra` share one record layout.
    pub sync_ok: u32,
    pub async_ok: u32,
    pub ra_dev: u32,
    pub ra_ino: u32,
    pub ra_size: u32,
    pub ra_ra_pages: u32,
    pub ra_mmap_miss: u32,

    pub order_ok: u32,
    pub order_dev: u32,
    pub order_ino: u32,
    pub order_index: u32,
    pub order_size: u32,
    pub order_ra_pages: u32,

    pub unbounded_ok: u32,
    pub unbounded_dev: u32,
    pub unbounded_ino: u32,
    pub unbounded_index: u32,
    pub unbounded_nr: u32,

    /// `mm_filemap_add_to_page_cache` and `mm_filemap_delete_from_page_cache` share one layout.
    pub add_ok: u32,
    pub delete_ok: u32,
    pub folio_dev: u32,
    pub folio_ino: u32,
    pub folio_index: u32,
    /// `page_cache::NO_ORDER` where the events have no `order` (before folios, 5.10: one page each).
    pub folio_order: u32,

    /// `mm_filemap_get_pages` and `mm_filemap_map_pages` share one layout.
    pub get_ok: u32,
    pub map_ok: u32,
    pub range_dev: u32,
    pub range_ino: u32,
    pub range_index: u32,
    pub range_last: u32,

    pub fault_ok: u32,
    pub fault_dev: u32,
    pub fault_ino: u32,
    pub fault_index: u32,

    /// `index` of the sync/async readahead record (to bind the read that follows to the file).
    pub ra_index: u32,
    /// `req_count` of the sync readahead record (the pages the read miss asked for), or
    /// [`NO_REQ_COUNT`] when the record has none (then no page is taken for demand).
    pub ra_req_count: u32,
}

/// [`RaLayout::ra_req_count`] when `page_cache_sync_ra` has no `req_count`.
pub const NO_REQ_COUNT: u32 = u32::MAX;

impl RaLayout {
    pub const UNSET: RaLayout = RaLayout {
        sync_ok: 0,
        async_ok: 0,
        ra_dev: 0,
        ra_ino: 0,
        ra_size: 0,
        ra_ra_pages: 0,
        ra_mmap_miss: 0,
        order_ok: 0,
        order_dev: 0,
        order_ino: 0,
        order_index: 0,
        order_size: 0,
        order_ra_pages: 0,
        unbounded_ok: 0,
        unbounded_dev: 0,
        unbounded_ino: 0,
        unbounded_index: 0,
        unbounded_nr: 0,
        add_ok: 0,
        delete_ok: 0,
        folio_dev: 0,
        folio_ino: 0,
        folio_index: 0,
        folio_order: 0,
        get_ok: 0,
        map_ok: 0,
        range_dev: 0,
        range_ino: 0,
        range_index: 0,
        range_last: 0,
        fault_ok: 0,
        fault_dev: 0,
        fault_ino: 0,
        fault_index: 0,
        ra_index: 0,
        ra_req_count: NO_REQ_COUNT,
    };
}

/// A file: its filesystem's device (the kernel's `dev_t`, major << 20 | minor) and inode.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RaFileKey {
    pub dev: u32,
    pub _pad: u32,
    pub ino: u64,
}

/// A folio of a file, by the index of its first page.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RaPageKey {
    pub dev: u32,
    pub _pad: u32,
    pub ino: u64,
    pub index: u64,
}

/// A readahead folio waiting for its first use.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaPage {
    /// bpf_ktime_get_ns() at insertion.
    pub inserted_ns: u64,
    pub pages: u64,
    /// 1 once the disk read it: a read bio covered it, or the bio program is not attached (then
    /// every inserted folio counts as read). A folio still at 0 when used or evicted was never
    /// read from disk (a hole's, zero-filled by the filesystem): neither read ahead, used nor
    /// wasted ([`RaFileStats::hole_pages`]).
    pub disk: u64,
}

/// A thread's last readahead window: pages `start..end` of file (dev, ino), and the pages
/// `demand_start..demand_end` its read miss asked for (`page_cache_sync_ra`'s `index` and
/// `req_count`; empty for async readahead and mmap read-around). A page inserted in the window
/// and outside the asked range is readahead (ioscope's one meaning of it: pages beyond what was
/// asked for); a page in the asked range is demand, even though the kernel reads it through its
/// readahead code. A readahead event sets an empty window with the asked range; the window
/// opened right after it keeps that range.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaWindow {
    pub dev: u32,
    pub _pad: u32,
    pub ino: u64,
    pub start: u64,
    pub end: u64,
    pub demand_start: u64,
    pub demand_end: u64,
}

/// Shared by all CPUs (added to atomically), read by every cached read: one cache line, one
/// lookup.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaShared {
    /// Readahead pages remembered in [`RA_PAGES_MAP`] now, all files. While it is 0 the
    /// cached-read path skips the file lookup altogether.
    pub pending: u64,
    /// Bumped whenever some file may have gained readahead pages pending where it had none: a
    /// file's first pending page, or a mapping newly bound to a file. A cached read that found
    /// nothing pending for its file at epoch E can skip the lookups while the epoch is still E
    /// (see [`RaReadMemo`]).
    pub epoch: u64,
    /// Windows opened so far ([`RA_WINDOWS_MAP`] inserts), for [`RaNoWindow`].
    pub windows: u64,
    /// Changes to [`RA_FILES_MAP`] entries so far, each counted after it is made: while it stays
    /// the same, the entries are what userspace last read (it reads the map again only then).
    pub updates: u64,
}

/// This CPU's last page-cache insertion by a thread that had no window ([`RA_WINDOWS_MAP`] has no
/// entry for `tid`) when [`RaShared::windows`] was `windows`: while both still hold, the thread's
/// next insertions skip that lookup (a writer appending to a file inserts a page per write and
/// never reads ahead).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaNoWindow {
    pub tid: u32,
    pub _pad: u32,
    pub windows: u64,
}

impl RaNoWindow {
    /// Whether thread `tid` is known to have no window while `windows` windows have been opened.
    #[inline(always)]
    pub fn holds(&self, tid: u32, windows: u64) -> bool {
        self.tid == tid && self.windows == windows
    }
}

/// The last sync/async readahead event on this CPU (kept in the read path's per-CPU slot,
/// `page_cache::CacheScratch::ra_bind`): `filemap_get_pages()` runs readahead and then
/// emits `mm_filemap_get_pages` for the same file in the same thread, whose range holds `index`.
/// The first such read binds its mapping to (dev, ino) and clears `tid`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaBind {
    pub tid: u32,
    pub dev: u32,
    pub ino: u64,
    pub index: u64,
}

/// A thread's last readahead event, in [`RA_BINDS_MAP`]: file (dev, ino), the page it was at, and
/// when. Removed by the read it binds (on any CPU).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaThreadBind {
    pub dev: u32,
    pub _pad: u32,
    pub ino: u64,
    pub index: u64,
    pub at_ns: u64,
}

impl RaThreadBind {
    /// Whether a read of `index..=last` at `now_ns` is the one that follows this event.
    #[inline(always)]
    pub fn binds(&self, index: u64, last: u64, now_ns: u64) -> bool {
        self.index >= index && self.index <= last && now_ns.wrapping_sub(self.at_ns) < RA_BIND_NS
    }
}

/// Whether a read of `index..=last` by thread `tid` is the one that follows the bound event.
#[inline(always)]
pub fn binds(b: &RaBind, tid: u32, index: u64, last: u64) -> bool {
    b.tid != 0 && b.tid == tid && b.index >= index && b.index <= last
}

/// This CPU's last cached read that found no readahead page pending for its file: the file's
/// mapping and [`RaShared::epoch`] then (kept in `page_cache::CacheScratch::ra_memo`). Repeated reads of one file on one CPU (the cached-read
/// hot path) then cost no hash lookup at all while nothing new was read ahead anywhere.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaReadMemo {
    pub mapping: u64,
    pub epoch: u64,
}

impl RaReadMemo {
    /// Whether a read of `mapping` at `epoch` is known to have nothing pending. Mapping 0 is never
    /// a file, so the all-zero start value never matches.
    #[inline(always)]
    pub fn idle(&self, mapping: u64, epoch: u64) -> bool {
        mapping != 0 && self.mapping == mapping && self.epoch == epoch
    }
}

/// Per file, cumulative (shared by all CPUs: counters are added atomically).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaFileStats {
    /// `page_cache_sync_ra` / `page_cache_async_ra` events.
    pub sync_events: u64,
    pub async_events: u64,
    /// Windows submitted (`page_cache_ra_order`, or `page_cache_ra_unbounded` when not inside one).
    pub windows: u64,
    /// Sum of the windows' sizes (pages): with `windows`, the mean window of an interval.
    pub window_pages: u64,
    /// Pages inserted inside a window and read from disk (with the bio program: when a read bio
    /// covers them; without it: when inserted), then those used, then those evicted unused.
    pub ra_pages: u64,
    pub used_pages: u64,
    pub wasted_pages: u64,
    /// Readahead pages not remembered because [`RA_PAGES_MAP`] was full (neither used nor wasted
    /// will ever be known for them).
    pub untracked_pages: u64,
    /// Pages inserted inside a window that no read bio covered yet (a wrapping count: a bio or a
    /// hole's end subtracts them). Only the bio program's attach makes it non-zero.
    pub unread_pages: u64,
    /// Pages inserted inside a window, then used or evicted without a read bio ever covering them:
    /// a hole's, zero-filled by the filesystem, which the disk never read.
    pub hole_pages: u64,
    /// The last window's size, the file's `ra_pages` (its maximum window) and `mmap_miss`.
    pub last_window: u32,
    pub max_window: u32,
    pub mmap_miss: u32,
    /// Bit `o` set once a folio of order `o` was remembered (which alignments an access tries).
    pub orders_seen: u32,
    /// Processes (tgid) that triggered readahead on this file, first come.
    pub triggers: [u32; RA_TRIGGERS],
    /// bpf_ktime_get_ns() of the last readahead event.
    pub last_ns: u64,
    /// Time from insertion to first use, log2 µs buckets (see [`RA_USE_BUCKETS`]).
    pub use_hist: [u64; RA_USE_BUCKETS],
}

impl RaFileStats {
    pub const ZERO: RaFileStats = RaFileStats {
        sync_events: 0,
        async_events: 0,
        windows: 0,
        window_pages: 0,
        ra_pages: 0,
        used_pages: 0,
        wasted_pages: 0,
        untracked_pages: 0,
        unread_pages: 0,
        hole_pages: 0,
        last_window: 0,
        max_window: 0,
        mmap_miss: 0,
        orders_seen: 0,
        triggers: [0; RA_TRIGGERS],
        last_ns: 0,
        use_hist: [0; RA_USE_BUCKETS],
    };

    /// Pages read ahead whose fate is not known yet.
    #[inline(always)]
    pub fn pending(&self) -> u64 {
        self.ra_pages
            .saturating_sub(self.used_pages)
            .saturating_sub(self.wasted_pages)
            .saturating_sub(self.untracked_pages)
    }

    /// Folios the probes still remember for this file: those read ahead and pending, and those
    /// no read bio covered yet ([`Self::unread_pages`]).
    #[inline(always)]
    pub fn remembered(&self) -> u64 {
        self.pending().wrapping_add(self.unread_pages)
    }
}

impl Default for RaFileStats {
    fn default() -> Self {
        RaFileStats::ZERO
    }
}

/// System-wide, per CPU: what could not be tracked.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RaTotals {
    /// Readahead pages refused by the full [`RA_PAGES_MAP`].
    pub untracked_pages: u64,
    /// Readahead events of files refused by the full [`RA_FILES_MAP`].
    pub untracked_files: u64,
}

/// The log2 bucket of a time to first use in ns.
#[inline(always)]
pub fn use_bucket(ns: u64) -> usize {
    let us = ns / 1000;
    if us == 0 {
        return 0;
    }
    let b = (63 - us.leading_zeros()) as usize;
    if b >= RA_USE_BUCKETS {
        RA_USE_BUCKETS - 1
    } else {
        b
    }
}

/// Whether a folio at `index` lies inside the window.
#[inline(always)]
pub fn in_window(w: &RaWindow, dev: u32, ino: u64, index: u64) -> bool {
    w.dev == dev && w.ino == ino && index >= w.start && index < w.end
}

/// Whether a folio at `index` of file (dev, ino) inserted by the window's thread is readahead:
/// inside the window and not among the pages its read miss asked for.
#[inline(always)]
pub fn is_readahead(w: &RaWindow, dev: u32, ino: u64, index: u64) -> bool {
    in_window(w, dev, ino, index) && !(index >= w.demand_start && index < w.demand_end)
}

#[cfg(feature = "user")]
mod user {
    // SAFETY (all): #[repr(C)], u32/u64 fields and arrays laid out without implicit padding
    // (explicit `_pad`), every bit pattern valid.
    unsafe impl aya::Pod for super::RaLayout {}
    unsafe impl aya::Pod for super::RaFileKey {}
    unsafe impl aya::Pod for super::RaPageKey {}
    unsafe impl aya::Pod for super::RaPage {}
    unsafe impl aya::Pod for super::RaWindow {}
    unsafe impl aya::Pod for super::RaFileStats {}
    unsafe impl aya::Pod for super::RaTotals {}
    unsafe impl aya::Pod for super::RaShared {}
    unsafe impl aya::Pod for super::RaBind {}
    unsafe impl aya::Pod for super::RaReadMemo {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_after_a_batch_without_its_event_uses_from_the_previous_reads_end() {
        let prev = Some(RaLastRead { mapping: 0xabc, index: 1, last: 32 });
        // The same file: from just after the thread's previous read.
        assert_eq!(use_from(prev, 0xabc, 64), 33);
        // Contiguous: from the read itself.
        assert_eq!(use_from(prev, 0xabc, 33), 33);
        // Another file, a jump past RA_GAP_MAX, a read backwards, no previous read: its own start.
        assert_eq!(use_from(prev, 0xabd, 64), 64);
        assert_eq!(use_from(prev, 0xabc, 33 + RA_GAP_MAX), 33);
        assert_eq!(use_from(prev, 0xabc, 34 + RA_GAP_MAX), 34 + RA_GAP_MAX);
        let read_at_20 = Some(RaLastRead { mapping: 0xabc, index: 20, last: 51 });
        assert_eq!(use_from(read_at_20, 0xabc, 10), 10);
        assert_eq!(use_from(read_at_20, 0xabc, 20), 20);
        assert_eq!(use_from(None, 0xabc, 64), 64);
    }

    /// One 128 KiB read's calls as a 6.18 kernel made them under load (bpftrace on
    /// `mm_filemap_get_pages` and the readahead events, the flaky live test's reads): the event
    /// `2..=32`, then calls each ending its batch at a folio just read ahead (async readahead at
    /// 12, 16, 24 and 32, the folios at 16, 24 and 32 inserted then), not up to date yet, so
    /// dropped without an event, then the event `32..=32`. The folios at 16 and 24 were read by
    /// those calls: the second event uses from the first one's index, not from its own (from
    /// its own, they stayed pending: 16 pages of the 1 MiB file).
    #[test]
    fn a_later_call_of_the_same_read_uses_from_the_previous_events_index() {
        let first = RaLastRead { mapping: 0xabc, index: 2, last: 32 };
        assert_eq!(use_from(Some(first), 0xabc, 32), 2);
        assert_eq!(use_from(Some(first), 0xabc, 3), 2);
        // The next read (from 33): the previous read's range is behind it.
        let last_call = RaLastRead { mapping: 0xabc, index: 32, last: 32 };
        assert_eq!(use_from(Some(last_call), 0xabc, 33), 33);
        // Its first call dropped its batch's last folio: the next call's event fills from 33.
        assert_eq!(use_from(Some(last_call), 0xabc, 48), 33);
        // Another file's read never fills.
        assert_eq!(use_from(Some(first), 0xabd, 32), 32);
    }

    #[test]
    fn a_read_memo_holds_only_for_its_mapping_and_epoch() {
        let m = RaReadMemo { mapping: 0xffff_8880_1234_5000, epoch: 7 };
        assert!(m.idle(0xffff_8880_1234_5000, 7));
        assert!(!m.idle(0xffff_8880_1234_5000, 8), "something was read ahead since");
        assert!(!m.idle(0xffff_8880_9999_0000, 7), "another file");
        assert!(!RaReadMemo::default().idle(0, 0), "the start value names no file");
    }

    #[test]
    fn first_use_buckets_are_log2_microseconds() {
        assert_eq!(use_bucket(999), 0);
        assert_eq!(use_bucket(1_000), 0);
        assert_eq!(use_bucket(2_000), 1);
        assert_eq!(use_bucket(3_999), 1);
        assert_eq!(use_bucket(1_024_000), 10);
        assert_eq!(use_bucket(u64::MAX), RA_USE_BUCKETS - 1);
    }

    #[test]
    fn windows_are_half_open_and_per_file() {
        let w = RaWindow { dev: 7, _pad: 0, ino: 12, start: 32, end: 64, demand_start: 0, demand_end: 0 };
        assert!(in_window(&w, 7, 12, 32));
        assert!(in_window(&w, 7, 12, 63));
        assert!(!in_window(&w, 7, 12, 64));
        assert!(!in_window(&w, 7, 12, 31));
        assert!(!in_window(&w, 8, 12, 40));
        assert!(!in_window(&w, 7, 13, 40));
    }

    #[test]
    fn pages_a_read_miss_asked_for_are_not_readahead() {
        // A random 8 KiB pread at page 40: the kernel reads pages 40..42 through its readahead
        // code (a window of 2); none of it is readahead.
        let w = RaWindow { dev: 7, _pad: 0, ino: 12, start: 40, end: 42, demand_start: 40, demand_end: 42 };
        assert!(!is_readahead(&w, 7, 12, 40));
        assert!(!is_readahead(&w, 7, 12, 41));
        // A sequential miss at page 0 asking for 4 pages with a window of 32: 28 are readahead.
        let w = RaWindow { dev: 7, _pad: 0, ino: 12, start: 0, end: 32, demand_start: 0, demand_end: 4 };
        assert_eq!((0..40).filter(|&i| is_readahead(&w, 7, 12, i)).count(), 28);
        // Async readahead and mmap read-around ask for nothing.
        let w = RaWindow { dev: 7, _pad: 0, ino: 12, start: 64, end: 128, demand_start: 0, demand_end: 0 };
        assert_eq!((0..200).filter(|&i| is_readahead(&w, 7, 12, i)).count(), 64);
    }

    #[test]
    fn a_read_binds_when_it_is_the_same_threads_and_covers_the_event() {
        let b = RaBind { tid: 9, dev: 7, ino: 12, index: 256 };
        assert!(binds(&b, 9, 256, 511));
        assert!(binds(&b, 9, 0, 256));
        assert!(!binds(&b, 9, 0, 0), "a read of another file (index 0 only) right after");
        assert!(!binds(&b, 8, 256, 511));
        assert!(!binds(&RaBind { tid: 0, ..b }, 0, 256, 511), "a consumed bind");
    }

    #[test]
    fn pending_is_what_is_neither_used_wasted_nor_untracked() {
        let s = RaFileStats {
            ra_pages: 100,
            used_pages: 60,
            wasted_pages: 30,
            untracked_pages: 4,
            ..RaFileStats::ZERO
        };
        assert_eq!(s.pending(), 6);
        assert_eq!(RaFileStats { unread_pages: 3, ..s }.remembered(), 9);
    }

    #[test]
    fn sizes_have_no_hidden_padding() {
        assert_eq!(core::mem::size_of::<RaLayout>(), 36 * 4);
        assert_eq!(core::mem::size_of::<RaBind>(), 24);
        assert_eq!(core::mem::size_of::<RaNoWindow>(), 16);
        assert_eq!(core::mem::size_of::<RaShared>(), 32);
        assert_eq!(core::mem::size_of::<RaPageKey>(), 24);
        assert_eq!(core::mem::size_of::<RaWindow>(), 48);
        assert_eq!(
            core::mem::size_of::<RaFileStats>(),
            10 * 8 + 4 * 4 + RA_TRIGGERS * 4 + 8 + RA_USE_BUCKETS * 8
        );
    }

    #[test]
    fn a_thread_without_a_window_is_known_until_a_window_opens() {
        let memo = RaNoWindow { tid: 42, _pad: 0, windows: 7 };
        assert!(memo.holds(42, 7));
        assert!(!memo.holds(42, 8), "a window opened since: look again");
        assert!(!memo.holds(43, 7), "another thread");
    }
}
