//! Block-layer figures from the eBPF probes, per disk: latency split into queue and device time with
//! percentiles, request sizes, rwbs flags, queue depth, and the cross-check against /proc/diskstats.
//!
//! Formulas (src/model/README.md, "Block layer"): every figure is over the interval, from the increase of
//! cumulative counters and histogram buckets between two samples.
//! - iops = Δissued_requests / Δt (each request once, as diskstats counts it: a write in a flush
//!   sequence passes block_rq_complete twice); bytes/s = Δcompleted_bytes / Δt; avg size =
//!   Δissued_bytes / Δissued_requests
//! - queue_ms_avg = Δqueue_ns_sum / Δqueue_count / 10⁶ (request created → issued to the driver);
//!   device_ms_avg = Δdevice_ns_sum / Δdevice_count / 10⁶ (issued → completed)
//! - percentiles from the log2 histogram (see [`percentile`]); max is the upper edge of the highest
//!   non-empty bucket (an upper bound, not an exact value)
//! - queue depth at issue: avg = Δdepth_sum / Δdepth_samples (exact), min/max from the depth buckets
//! - cross-check: eBPF completed bytes of every operation (read, write and other: discard,
//!   write-zeroes, secure erase) vs diskstats Δ(sectors read + written + discarded) × 512; flagged
//!   when the larger is ≥ [`CROSSCHECK_MIN_BYTES`] and they differ by more than
//!   [`CROSSCHECK_TOLERANCE`]. Both sides count the same requests: diskstats counts write-zeroes
//!   and secure erase as writes and discards apart, while `rwbs` calls them `N`, `DE` and `D`
//!   (the probes' "other"), so comparing the sums of all three is exact where reads + writes alone
//!   were not (`mkfs.ext4` zeroes its journal with write-zeroes: 32 MiB diskstats saw as written).
//!   The two sides are read one right after the other (the maps' device counters, then
//!   /proc/diskstats): a request that completes between the reads counts in diskstats' interval
//!   and the probes' next. Such a request was in flight at the maps' read, so a difference no
//!   larger than the requests in flight at either edge (the probes' gauge) × the largest request
//!   they have seen on the disk is not flagged.

use serde::Serialize;

use ioscope_common::block::{depth_bucket_range, log2_bucket_range};

use super::counter::{delta, per_event, per_second};
use crate::sample::{BlockDeviceCounters, BlockDirCounters, DiskStat, RequestsBytes, Sample};

/// Relative difference above which eBPF and /proc/diskstats are said to disagree.
pub const CROSSCHECK_TOLERANCE: f64 = 0.05;
/// Below this many bytes in an interval, a disagreement is left unflagged: a request or two
/// completing between the two reads is then a large share, and tells nothing.
pub const CROSSCHECK_MIN_BYTES: u64 = 1 << 20;

/// p50/p95/p99/max of one histogram over the interval, milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    /// Upper edge of the highest non-empty bucket.
    pub max_ms: f64,
    /// How many requests the histogram holds.
    pub count: u64,
}

/// One direction (read, write, other) of one disk. JSON: `devices[].bpf.block.{read,write,other}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BlockDirModel {
    /// Completed requests and bytes per second.
    pub iops: f64,
    pub bytes_s: f64,
    /// Average request size at issue, bytes (0 without requests).
    pub avg_size: f64,
    /// Average queue time (created → issued) and device time (issued → completed), ms; null without
    /// requests measured.
    pub queue_ms_avg: Option<f64>,
    pub device_ms_avg: Option<f64>,
    pub queue: Option<Percentiles>,
    pub device: Option<Percentiles>,
    /// Share of the issued requests that waited in the I/O scheduler's queue (block_rq_insert), %,
    /// and their average time there, ms.
    pub sched_pct: f64,
    pub sched_ms_avg: Option<f64>,
    /// The interval's histograms (bucket counts, log2: see src/model/README.md): queue and device time in µs,
    /// size in bytes.
    pub queue_hist: Vec<u64>,
    pub device_hist: Vec<u64>,
    pub size_hist: Vec<u64>,
}

/// Requests with one rwbs flag. JSON: `devices[].bpf.block.flags[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FlagModel {
    /// read, write, discard, flush, sync, metadata, readahead, fua.
    pub flag: &'static str,
    pub iops: f64,
    pub bytes_s: f64,
    /// Share of all requests issued in the interval, %.
    pub share_pct: f64,
}

/// Requests in flight as each request was issued (itself included), over the interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DepthModel {
    pub min: u64,
    pub avg: f64,
    /// Exact below 32; above, the upper edge of its log2 bucket.
    pub max: u64,
    pub samples: u64,
}

/// eBPF completed bytes against /proc/diskstats over the interval. JSON: `devices[].bpf.crosscheck`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CrossCheck {
    pub bpf_bytes: u64,
    pub diskstats_bytes: u64,
    /// |bpf − diskstats| / max(bpf, diskstats) × 100.
    pub diff_pct: f64,
    /// True when they disagree by more than the tolerance on enough bytes to mean it.
    pub mismatch: bool,
}

/// Everything the block probes say about one disk. JSON: `devices[].bpf.block`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BlockDeviceModel {
    pub read: BlockDirModel,
    pub write: BlockDirModel,
    pub other: BlockDirModel,
    pub flags: Vec<FlagModel>,
    /// None when no request was issued in the interval.
    pub depth: Option<DepthModel>,
    /// Requests issued and not completed now (a gauge), as the probes count them.
    pub in_flight: u64,
    /// Average queue time of reads and writes together, ms.
    pub queue_ms_avg: Option<f64>,
}

/// A size histogram bucket with requests in it. JSON: `devices[].bpf.size_hist[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SizeBucket {
    /// Requests of at least `min_bytes` and below `max_bytes` (null: no upper bound).
    pub min_bytes: u64,
    pub max_bytes: Option<u64>,
    pub read: u64,
    pub write: u64,
}

/// The probes' counters for `disk` in a sample.
fn find<'a>(s: &'a Sample, disk: &DiskStat) -> Option<&'a BlockDeviceCounters> {
    s.bpf.block_devices.iter().find(|c| (c.major, c.minor) == (disk.major, disk.minor))
}

/// The block model of one disk, or None when the probes have not seen it (eBPF off, a partition,
/// a bio-based device such as dm or md, or no request yet). A device absent from a `prev` taken
/// with the probes on started from zero within the interval: its counters are all of this
/// interval. With no previous sample, or one taken before the probes were on, there is no
/// interval they covered: None.
pub fn device(prev: Option<&Sample>, cur: &Sample, disk: &DiskStat, secs: f64) -> Option<BlockDeviceModel> {
    let prev = prev.filter(|p| p.bpf.status.enabled)?;
    let c = find(cur, disk)?;
    let zero = BlockDeviceCounters::default();
    let p = find(prev, disk).unwrap_or(&zero);
    let issued = |d: &BlockDirCounters, pd: &BlockDirCounters| delta(pd.issued_requests, d.issued_requests);
    let all_issued = issued(&c.read, &p.read) + issued(&c.write, &p.write) + issued(&c.other, &p.other);
    Some(BlockDeviceModel {
        read: dir(&p.read, &c.read, secs),
        write: dir(&p.write, &c.write, secs),
        other: dir(&p.other, &c.other, secs),
        flags: flags(p, c, all_issued, secs),
        depth: depth(p, c),
        in_flight: c.in_flight,
        queue_ms_avg: {
            let n = delta(p.read.queue_count, c.read.queue_count)
                + delta(p.write.queue_count, c.write.queue_count);
            let ns = delta(p.read.queue_ns_sum, c.read.queue_ns_sum)
                + delta(p.write.queue_ns_sum, c.write.queue_ns_sum);
            (n > 0).then(|| per_event(ns, n) / 1e6)
        },
    })
}

/// The cross-check of `disk` over the interval; None when there is no interval or the probes have
/// not seen the disk.
pub fn crosscheck(prev: Option<&Sample>, cur: &Sample, disk: &DiskStat) -> Option<CrossCheck> {
    let prev = prev?;
    let c = find(cur, disk)?;
    // A previous sample without eBPF: the two sources cover different spans, no comparison. With
    // eBPF on in it, a device absent from it had no request yet: its counters start from zero.
    if !prev.bpf.status.enabled {
        return None;
    }
    let zero = BlockDeviceCounters::default();
    let p = find(prev, disk).unwrap_or(&zero);
    let pd = prev.disks.iter().find(|d| (d.major, d.minor) == (disk.major, disk.minor))?;
    // All operations on both sides (see the module doc): write-zeroes are writes to diskstats and
    // "other" to rwbs; discards are apart in diskstats (since 4.18) and "other" to rwbs.
    let bpf_bytes = delta(p.read.completed_bytes, c.read.completed_bytes)
        + delta(p.write.completed_bytes, c.write.completed_bytes)
        + delta(p.other.completed_bytes, c.other.completed_bytes);
    let discarded = |d: &DiskStat| d.discards.as_ref().map_or(0, |x| x.sectors);
    let diskstats_bytes = (delta(pd.sectors_read, disk.sectors_read)
        + delta(pd.sectors_written, disk.sectors_written)
        + delta(discarded(pd), discarded(disk)))
        * 512;
    let at_edges = (p.in_flight + c.in_flight).saturating_mul(largest_request(c));
    Some(compare(bpf_bytes, diskstats_bytes, at_edges))
}

/// The most bytes one request of the disk can have carried: the upper edge of the highest
/// non-empty size bucket over every request the probes have seen on it (0 when none).
fn largest_request(c: &BlockDeviceCounters) -> u64 {
    [&c.read, &c.write, &c.other]
        .iter()
        .filter_map(|d| d.size_hist.iter().rposition(|&n| n > 0))
        .max()
        .map_or(0, |b| log2_bucket_range(b).1.saturating_sub(1))
}

/// The comparison rule, on its own for testing. `at_edges`: the bytes requests in flight at the
/// interval's edges can carry (a difference up to that is the reads' order, not a disagreement).
pub fn compare(bpf_bytes: u64, diskstats_bytes: u64, at_edges: u64) -> CrossCheck {
    let larger = bpf_bytes.max(diskstats_bytes);
    let diff = bpf_bytes.abs_diff(diskstats_bytes);
    let diff_pct = if larger > 0 { diff as f64 / larger as f64 * 100.0 } else { 0.0 };
    CrossCheck {
        bpf_bytes,
        diskstats_bytes,
        diff_pct,
        mismatch: larger >= CROSSCHECK_MIN_BYTES
            && diff_pct > CROSSCHECK_TOLERANCE * 100.0
            && diff > at_edges,
    }
}

fn hist_delta(p: &[u64], c: &[u64]) -> Vec<u64> {
    c.iter().enumerate().map(|(i, &v)| delta(p.get(i).copied().unwrap_or(0), v)).collect()
}

fn dir(p: &BlockDirCounters, c: &BlockDirCounters, secs: f64) -> BlockDirModel {
    let issued = delta(p.issued_requests, c.issued_requests);
    let queue_count = delta(p.queue_count, c.queue_count);
    let device_count = delta(p.device_count, c.device_count);
    let sched = delta(p.sched_requests, c.sched_requests);
    let ms_avg = |sum: u64, n: u64| (n > 0).then(|| per_event(sum, n) / 1e6);
    let queue_hist = hist_delta(&p.queue_hist, &c.queue_hist);
    let device_hist = hist_delta(&p.device_hist, &c.device_hist);
    BlockDirModel {
        // Issued, not completed: a write in a flush sequence (a preflush or FUA write on a device
        // without FUA: ext4's journal commits) passes block_rq_complete twice, when its data is
        // done and, with 0 bytes, when the sequence ends; diskstats (iostat's w/s) counts it once.
        iops: per_second(issued, secs),
        bytes_s: per_second(delta(p.completed_bytes, c.completed_bytes), secs),
        avg_size: per_event(delta(p.issued_bytes, c.issued_bytes), issued),
        queue_ms_avg: ms_avg(delta(p.queue_ns_sum, c.queue_ns_sum), queue_count),
        device_ms_avg: ms_avg(delta(p.device_ns_sum, c.device_ns_sum), device_count),
        queue: latency_percentiles(&queue_hist),
        device: latency_percentiles(&device_hist),
        sched_pct: if issued > 0 { sched as f64 / issued as f64 * 100.0 } else { 0.0 },
        sched_ms_avg: ms_avg(delta(p.sched_ns_sum, c.sched_ns_sum), sched),
        queue_hist,
        device_hist,
        size_hist: hist_delta(&p.size_hist, &c.size_hist),
    }
}

fn flags(p: &BlockDeviceCounters, c: &BlockDeviceCounters, all: u64, secs: f64) -> Vec<FlagModel> {
    let (pf, cf) = (&p.flags, &c.flags);
    let list: [(&'static str, &RequestsBytes, &RequestsBytes); 8] = [
        ("read", &pf.read, &cf.read),
        ("write", &pf.write, &cf.write),
        ("discard", &pf.discard, &cf.discard),
        ("flush", &pf.flush, &cf.flush),
        ("sync", &pf.sync, &cf.sync),
        ("metadata", &pf.metadata, &cf.metadata),
        ("ra_flag", &pf.readahead, &cf.readahead),
        ("fua", &pf.fua, &cf.fua),
    ];
    list.iter()
        .map(|(flag, p, c)| {
            let n = delta(p.requests, c.requests);
            FlagModel {
                flag,
                iops: per_second(n, secs),
                bytes_s: per_second(delta(p.bytes, c.bytes), secs),
                share_pct: if all > 0 { n as f64 / all as f64 * 100.0 } else { 0.0 },
            }
        })
        .collect()
}

fn depth(p: &BlockDeviceCounters, c: &BlockDeviceCounters) -> Option<DepthModel> {
    let samples = delta(p.depth_samples, c.depth_samples);
    if samples == 0 {
        return None;
    }
    let hist = hist_delta(&p.depth_hist, &c.depth_hist);
    let lowest = hist.iter().position(|&n| n > 0)?;
    let highest = hist.iter().rposition(|&n| n > 0)?;
    Some(DepthModel {
        min: depth_bucket_range(lowest).0,
        avg: per_event(delta(p.depth_sum, c.depth_sum), samples),
        max: depth_bucket_range(highest).1,
        samples,
    })
}

/// The value below which a fraction `q` (0..1) of a log2 histogram lies: the bucket holding the
/// request of rank ⌈q × total⌉, linearly interpolated within that bucket's range. The open last
/// bucket is taken as [low, 2 × low). None for an empty histogram.
pub fn percentile(hist: &[u64], q: f64) -> Option<f64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut before = 0u64;
    for (b, &n) in hist.iter().enumerate() {
        if n > 0 && before + n >= rank {
            let (low, high) = bucket_bounds(b);
            return Some(low + (high - low) * (rank - before) as f64 / n as f64);
        }
        before += n;
    }
    None
}

/// A log2 bucket's range as floats, the open last bucket closed at twice its low end.
fn bucket_bounds(b: usize) -> (f64, f64) {
    let (low, high) = log2_bucket_range(b);
    let high = if high == u64::MAX { low.saturating_mul(2) } else { high };
    (low as f64, high as f64)
}

/// p50/p95/p99/max of a latency histogram in µs, as ms.
pub fn latency_percentiles(hist: &[u64]) -> Option<Percentiles> {
    let ms = |q: f64| percentile(hist, q).map(|us| us / 1000.0);
    let highest = hist.iter().rposition(|&n| n > 0)?;
    Some(Percentiles {
        p50_ms: ms(0.50)?,
        p95_ms: ms(0.95)?,
        p99_ms: ms(0.99)?,
        max_ms: bucket_bounds(highest).1 / 1000.0,
        count: hist.iter().sum(),
    })
}

/// Read and write histograms added bucket by bucket.
pub fn merged(a: &[u64], b: &[u64]) -> Vec<u64> {
    let n = a.len().max(b.len());
    (0..n).map(|i| a.get(i).copied().unwrap_or(0) + b.get(i).copied().unwrap_or(0)).collect()
}

/// The size histogram's non-empty buckets, read and write side by side.
pub fn size_buckets(m: &BlockDeviceModel) -> Vec<SizeBucket> {
    let n = m.read.size_hist.len().max(m.write.size_hist.len());
    (0..n)
        .filter_map(|b| {
            let read = m.read.size_hist.get(b).copied().unwrap_or(0);
            let write = m.write.size_hist.get(b).copied().unwrap_or(0);
            if read + write == 0 {
                return None;
            }
            let (low, high) = log2_bucket_range(b);
            Some(SizeBucket { min_bytes: low, max_bytes: (high != u64::MAX).then_some(high), read, write })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::DiscardStat;
    use ioscope_common::block::log2_bucket;

    fn hist(entries: &[(usize, u64)]) -> Vec<u64> {
        let mut h = vec![0; 32];
        for &(b, n) in entries {
            h[b] = n;
        }
        h
    }

    #[test]
    fn percentiles_by_hand() {
        // 100 requests: 50 in [128, 256) µs, 45 in [512, 1024) µs, 5 in [8192, 16384) µs.
        let h = hist(&[(8, 50), (10, 45), (14, 5)]);
        let p = latency_percentiles(&h).unwrap();
        // p50: rank 50, the 50th of 50 in bucket 8: 128 + 128 × 50/50 = 256 µs.
        assert_eq!(p.p50_ms, 0.256);
        // p95: rank 95, the 45th of 45 in bucket 10: 512 + 512 × 45/45 = 1024 µs.
        assert_eq!(p.p95_ms, 1.024);
        // p99: rank 99, the 4th of 5 in bucket 14: 8192 + 8192 × 4/5 = 14745.6 µs.
        assert!((p.p99_ms - 14.7456).abs() < 1e-9, "{}", p.p99_ms);
        assert_eq!(p.max_ms, 16.384);
        assert_eq!(p.count, 100);
        // One request in bucket 1 ([1, 2) µs): every percentile is its upper edge.
        assert_eq!(percentile(&hist(&[(1, 1)]), 0.5), Some(2.0));
        assert_eq!(percentile(&hist(&[]), 0.5), None);
        assert!(latency_percentiles(&hist(&[])).is_none());
    }

    #[test]
    fn crosscheck_flags_only_real_disagreement() {
        // 100 MiB vs 94 MiB: 6 % apart → flagged.
        let c = compare(100 << 20, 94 << 20, 0);
        assert!(c.mismatch);
        assert!((c.diff_pct - 6.0).abs() < 1e-9);
        // 100 MiB vs 96 MiB: 4 % → fine.
        assert!(!compare(100 << 20, 96 << 20, 0).mismatch);
        // Tiny intervals are not judged: 64 KiB vs nothing.
        assert!(!compare(65536, 0, 0).mismatch);
        // eBPF saw nothing while diskstats counted 10 MiB: flagged (a quiet wrong number).
        assert!(compare(0, 10 << 20, 0).mismatch);
        assert_eq!(compare(0, 0, 0).diff_pct, 0.0);
        // What requests in flight at the edges could carry is not flagged, a byte more is.
        assert!(!compare(2 << 20, 8192, 2 << 20).mismatch);
        assert!(compare(2 << 20, 8191, (2 << 20) - 8192).mismatch);
    }

    #[test]
    fn crosscheck_counts_write_zeroes_and_discards_on_both_sides() {
        // mkfs.ext4 on a 1 GiB loop device, as bpftrace's block_rq_complete saw it: 40 sectors
        // read, 1,200 written (`WS`), 65,680 zeroed (`NS`, write-zeroes) and 2,097,160 discarded
        // (`DS`); /proc/diskstats: 40 read, 66,880 written, 2,097,160 discarded.
        let mut prev = sample(None, 0);
        let mut c = BlockDeviceCounters { major: 8, minor: 0, ..Default::default() };
        c.read.completed_bytes = 40 * 512;
        c.write.completed_bytes = 1_200 * 512;
        c.other.completed_bytes = (65_680 + 2_097_160) * 512;
        let mut cur = sample(Some(c), 40);
        prev.disks[0].discards = Some(DiscardStat::default());
        cur.disks[0].sectors_written = 66_880;
        cur.disks[0].discards = Some(DiscardStat { completed: 2, merged: 0, sectors: 2_097_160, ms: 0 });
        let x = crosscheck(Some(&prev), &cur, &cur.disks[0]).unwrap();
        assert_eq!(x.bpf_bytes, x.diskstats_bytes);
        assert!(!x.mismatch, "{x:?}");
        // A real loss still shows: without the discard, the probes missing the write-zeroes.
        let mut lost = cur.clone();
        lost.bpf.block_devices[0].other.completed_bytes = 0;
        lost.disks[0].discards = Some(DiscardStat::default());
        let x = crosscheck(Some(&prev), &lost, &lost.disks[0]).unwrap();
        assert!(x.mismatch, "{x:?}");
    }

    #[test]
    fn a_request_completing_between_the_two_reads_is_not_a_disagreement() {
        // After mkfs.ext4, ext4's lazy inode-table init writes 2 MiB in an otherwise quiet
        // interval; it completed after the sample's map read (in flight there) and before its
        // /proc/diskstats read: diskstats 2 MiB, eBPF 0, then the other way round.
        let mut c = BlockDeviceCounters { major: 8, minor: 0, ..Default::default() };
        c.write.size_hist = vec![0; 32];
        c.write.size_hist[log2_bucket(4096)] = 10;
        c.write.completed_bytes = 10 * 4096;
        let prev = sample(Some(c.clone()), 0);
        let mut in_flight = c.clone();
        in_flight.write.size_hist[log2_bucket(2 << 20)] += 1;
        in_flight.in_flight = 1;
        let mut cur = sample(Some(in_flight), 0);
        cur.disks[0].sectors_written = (2 << 20) / 512;
        let x = crosscheck(Some(&prev), &cur, &cur.disks[0]).unwrap();
        assert_eq!((x.bpf_bytes, x.diskstats_bytes), (0, 2 << 20));
        assert!(!x.mismatch, "{x:?}");
        c.write.size_hist[log2_bucket(2 << 20)] += 1;
        c.write.completed_bytes += 2 << 20;
        let mut next = sample(Some(c), 0);
        next.disks[0].sectors_written = (2 << 20) / 512;
        let x = crosscheck(Some(&cur), &next, &next.disks[0]).unwrap();
        assert_eq!((x.bpf_bytes, x.diskstats_bytes), (2 << 20, 0));
        assert!(!x.mismatch, "{x:?}");
        // Over both intervals the two agree; with nothing in flight at the edges, the 2 MiB alone
        // is a disagreement.
        let x = crosscheck(Some(&prev), &next, &next.disks[0]).unwrap();
        assert!(x.bpf_bytes == 2 << 20 && x.diskstats_bytes == 2 << 20 && !x.mismatch);
        cur.bpf.block_devices[0].in_flight = 0;
        assert!(crosscheck(Some(&prev), &cur, &cur.disks[0]).unwrap().mismatch);
    }

    #[test]
    fn a_write_completed_twice_by_a_flush_sequence_counts_once() {
        // 300 × 4 KiB dsync writes on ext4 on a loop device (no FUA), as bpftrace saw them: 901
        // writes issued (300 WS, 601 WSM), 1,202 completions (300 WSM passed again with 0 bytes at
        // the end of their flush sequence); diskstats: 901 writes.
        let c = BlockDirCounters {
            issued_requests: 901,
            completed_requests: 1_202,
            issued_bytes: 901 * 4096,
            completed_bytes: 901 * 4096,
            ..Default::default()
        };
        let m = dir(&BlockDirCounters::default(), &c, 1.0);
        assert_eq!((m.iops, m.bytes_s, m.avg_size), (901.0, 901.0 * 4096.0, 4096.0));
    }

    fn counters(
        read_bytes: u64,
        reads: u64,
        hist_bucket: usize,
        depth: &[(usize, u64)],
        depth_sum: u64,
    ) -> BlockDeviceCounters {
        let mut dir = BlockDirCounters {
            issued_requests: reads,
            issued_bytes: read_bytes,
            completed_requests: reads,
            completed_bytes: read_bytes,
            queue_ns_sum: reads * 1_000_000,
            queue_count: reads,
            device_ns_sum: reads * 3_000_000,
            device_count: reads,
            sched_requests: reads / 2,
            sched_ns_sum: reads / 2 * 500_000,
            queue_hist: vec![0; 32],
            device_hist: vec![0; 32],
            size_hist: vec![0; 32],
        };
        dir.size_hist[hist_bucket] = reads;
        dir.device_hist[12] = reads; // [2048, 4096) µs
        let mut d = BlockDeviceCounters {
            major: 8,
            minor: 0,
            read: dir,
            write: BlockDirCounters::default(),
            other: BlockDirCounters::default(),
            depth_hist: vec![0; 48],
            depth_sum,
            depth_samples: depth.iter().map(|x| x.1).sum(),
            ..Default::default()
        };
        for &(b, n) in depth {
            d.depth_hist[b] = n;
        }
        d.flags.read = RequestsBytes { requests: reads, bytes: read_bytes };
        d.flags.readahead = RequestsBytes { requests: reads / 4, bytes: read_bytes / 4 };
        d
    }

    fn sample(c: Option<BlockDeviceCounters>, sectors_read: u64) -> Sample {
        let mut s = Sample::default();
        s.disks.push(DiskStat { major: 8, minor: 0, name: "sda".into(), sectors_read, ..Default::default() });
        s.bpf.block_devices.extend(c);
        s.bpf.status.enabled = true;
        s
    }

    #[test]
    fn device_model_by_hand() {
        // 2 s: 400 reads of 4 KiB, depth seen at issue 1 (×100), 2 (×200), 40 (×100).
        let prev = sample(Some(counters(0, 0, 13, &[], 0)), 0);
        let cur = sample(
            Some(counters(400 * 4096, 400, 13, &[(1, 100), (2, 200), (32, 100)], 100 + 400 + 4000)),
            3200,
        );
        let m = device(Some(&prev), &cur, &cur.disks[0], 2.0).unwrap();
        assert_eq!(m.read.iops, 200.0);
        assert_eq!(m.read.bytes_s, 819_200.0);
        assert_eq!(m.read.avg_size, 4096.0);
        assert_eq!(m.read.queue_ms_avg, Some(1.0));
        assert_eq!(m.read.device_ms_avg, Some(3.0));
        assert_eq!(m.read.sched_pct, 50.0);
        assert_eq!(m.read.sched_ms_avg, Some(0.5));
        // All in [2048, 4096) µs: the median is the middle of the bucket.
        assert_eq!(m.read.device.as_ref().unwrap().p50_ms, 3.072);
        assert_eq!(m.write.queue_ms_avg, None);
        let d = m.depth.clone().unwrap();
        assert_eq!((d.min, d.max, d.samples), (1, 63, 400));
        assert_eq!(d.avg, 11.25); // 4500 / 400
        let ra = m.flags.iter().find(|f| f.flag == "ra_flag").unwrap();
        assert_eq!((ra.iops, ra.share_pct), (50.0, 25.0));
        let sizes = size_buckets(&m);
        assert_eq!(sizes, vec![SizeBucket { min_bytes: 4096, max_bytes: Some(8192), read: 400, write: 0 }]);
        // The cross-check: 400 × 4 KiB = 1600 KiB by eBPF, 3200 sectors = 1600 KiB by diskstats.
        let x = crosscheck(Some(&prev), &cur, &cur.disks[0]).unwrap();
        assert_eq!((x.bpf_bytes, x.diskstats_bytes, x.mismatch), (1_638_400, 1_638_400, false));
        // Without a previous sample there is no interval; without the device, no eBPF figures.
        assert!(device(None, &cur, &cur.disks[0], 2.0).is_none());
        assert!(device(Some(&prev), &sample(None, 0), &cur.disks[0], 2.0).is_none());
        // A device a previous sample with the probes on lacked had no request yet: its counters
        // started from zero within the interval, and cross-check from zero.
        assert_eq!(device(Some(&sample(None, 0)), &cur, &cur.disks[0], 2.0).unwrap().read.iops, 200.0);
        let x = crosscheck(Some(&sample(None, 0)), &cur, &cur.disks[0]).unwrap();
        assert_eq!((x.bpf_bytes, x.diskstats_bytes), (1_638_400, 1_638_400));
        // A previous sample taken before the probes were on: no interval they covered.
        let mut before_attach = sample(None, 0);
        before_attach.bpf.status.enabled = false;
        assert!(device(Some(&before_attach), &cur, &cur.disks[0], 2.0).is_none());
        assert!(crosscheck(Some(&before_attach), &cur, &cur.disks[0]).is_none());
    }
}
