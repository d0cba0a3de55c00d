//! The kernel's counter structs (ioscope_common, shared with the programs) into the Sample's, in
//! one place: one line per pair names the fields that carry over, and [`Accumulate`] is generated
//! from it. A field has the same name in both structs (the compiler checks each). Summing the
//! per-CPU values of a map entry is accumulating each CPU's struct into one Sample row.
//!
//! The Sample's structs (src/sample) are what recordings hold: they keep their own definitions and
//! serialized form; the kernel's layouts may change with the programs.

use ioscope_common::block::{DirStats, ProcStats};
use ioscope_common::files::FileCounters;
use ioscope_common::page_cache::CacheCounters;
use ioscope_common::readahead::RaFileStats;

use crate::sample::readahead::RaFileSample;
use crate::sample::{BlockDirCounters, BlockProcessCounters, CacheCountersSample, FileProcess};
use ioscope_common::files::FileKey;

/// Adds the counters of a `C` (one CPU's values of a map entry) to this Sample row.
pub trait Accumulate<C> {
    fn accumulate(&mut self, from: &C);
}

/// `accumulate!(From => Into: counters...; hists h...; gauges g...)`: the counters added
/// (wrapping: per-CPU values of one entry may be read a moment apart), the histograms added bucket
/// by bucket (the row's grows to the kernel's buckets), the gauges copied (the last CPU's).
macro_rules! accumulate {
    ($from:ty => $into:ty: $($field:ident),+ $(; hists $($hist:ident),+)? $(; gauges $($gauge:ident),+)?) => {
        impl Accumulate<$from> for $into {
            fn accumulate(&mut self, c: &$from) {
                $(self.$field = self.$field.wrapping_add(c.$field);)+
                $($(add_hist(&mut self.$hist, &c.$hist);)+)?
                $($(self.$gauge = c.$gauge;)+)?
            }
        }
    };
}

accumulate!(CacheCounters => CacheCountersSample: read_pages, mapped_pages, faults, inserted_pages,
    write_inserted_pages, dirtied_pages, evicted_pages, throttled, throttle_jiffies, dio_reads,
    dio_read_bytes, dio_writes, dio_write_bytes, rss_file_bytes);

accumulate!(DirStats => BlockDirCounters: issued_requests, issued_bytes, completed_requests,
    completed_bytes, queue_ns_sum, queue_count, device_ns_sum, device_count, sched_requests,
    sched_ns_sum; hists queue_hist, device_hist, size_hist);

accumulate!(ProcStats => BlockProcessCounters: read_requests, read_bytes, write_requests, write_bytes,
    other_requests, readahead_bytes, sync_bytes, lat_ns_sum, lat_count; hists lat_hist);

accumulate!(FileCounters => RawFile: inserted_pages, readahead_pages, dirtied_pages, writeback_pages,
    dio_read_bytes, dio_write_bytes, fs_writeback_bytes);

accumulate!(RaFileStats => RaFileSample: sync_events, async_events, windows, window_pages, ra_pages,
    used_pages, wasted_pages, untracked_pages; hists use_hist; gauges last_window, max_window, mmap_miss);

/// One FILE_IO entry summed over CPUs (src/bpf/files.rs), before src/bpf/resolve/files.rs merges
/// and names it into the Sample's rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawFile {
    pub key: FileKey,
    pub inserted_pages: u64,
    pub readahead_pages: u64,
    pub dirtied_pages: u64,
    pub writeback_pages: u64,
    pub dio_read_bytes: u64,
    pub dio_write_bytes: u64,
    pub fs_writeback_bytes: u64,
    pub processes: Vec<FileProcess>,
}

/// Adds `from` to `into` bucket by bucket, `into` grown to `from`'s buckets first.
pub fn add_hist(into: &mut Vec<u64>, from: &[u64]) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    for (a, b) in into.iter_mut().zip(from) {
        *a = a.wrapping_add(*b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two CPUs' values of one entry summed: every counter of the kernel's struct reaches the
    /// Sample's field of the same name (the oracle is each field set by hand to a distinct value).
    #[test]
    fn page_cache_counters_sum_field_by_field() {
        let cpu = |k: u64| CacheCounters {
            read_pages: k,
            mapped_pages: 2 * k,
            faults: 3 * k,
            inserted_pages: 4 * k,
            write_inserted_pages: 5 * k,
            dirtied_pages: 6 * k,
            evicted_pages: 7 * k,
            throttled: 8 * k,
            throttle_jiffies: 9 * k,
            dio_reads: 10 * k,
            dio_read_bytes: 11 * k,
            dio_writes: 12 * k,
            dio_write_bytes: 13 * k,
            rss_file_bytes: 14 * k,
            ..CacheCounters::default()
        };
        let mut row = CacheCountersSample::default();
        row.accumulate(&cpu(1));
        row.accumulate(&cpu(10));
        let k = 11;
        assert_eq!(
            row,
            CacheCountersSample {
                read_pages: k,
                mapped_pages: 2 * k,
                faults: 3 * k,
                inserted_pages: 4 * k,
                write_inserted_pages: 5 * k,
                dirtied_pages: 6 * k,
                evicted_pages: 7 * k,
                throttled: 8 * k,
                throttle_jiffies: 9 * k,
                dio_reads: 10 * k,
                dio_read_bytes: 11 * k,
                dio_writes: 12 * k,
                dio_write_bytes: 13 * k,
                rss_file_bytes: 14 * k,
            }
        );
    }

    /// A readahead row is the kernel's counters, histogram and gauges as they are.
    #[test]
    fn readahead_row_copies_counters_histogram_and_gauges() {
        let mut s = RaFileStats::ZERO;
        (s.sync_events, s.async_events, s.windows, s.window_pages) = (1, 2, 3, 4);
        (s.ra_pages, s.used_pages, s.wasted_pages, s.untracked_pages) = (5, 6, 7, 8);
        (s.last_window, s.max_window, s.mmap_miss) = (9, 10, 11);
        s.use_hist[2] = 12;
        let mut row = RaFileSample::default();
        row.accumulate(&s);
        assert_eq!((row.sync_events, row.async_events, row.windows, row.window_pages), (1, 2, 3, 4));
        assert_eq!((row.ra_pages, row.used_pages, row.wasted_pages, row.untracked_pages), (5, 6, 7, 8));
        assert_eq!((row.last_window, row.max_window, row.mmap_miss), (9, 10, 11));
        assert_eq!(row.use_hist, s.use_hist.to_vec());
    }

    #[test]
    fn histograms_grow_to_the_kernels_buckets() {
        let mut h = vec![1, 1];
        add_hist(&mut h, &[1, 2, 3]);
        assert_eq!(h, [2, 3, 3]);
    }
}
