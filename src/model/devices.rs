//! Devices pane: sysstat's `iostat -x` formulas over two /proc/diskstats samples.

use serde::Serialize;

use std::collections::HashMap;

use super::counter::{delta, per_event, per_second, was_reset};
use crate::sample::{BlockSettings, BpfDeviceCounters, DiskStat, Sample};

/// One block device. Field names follow iostat -x. JSON: `devices[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DeviceModel {
    pub name: String,
    pub major: u32,
    pub minor: u32,
    pub is_partition: bool,
    /// loop*, ram*, zram* and the like: hidden by default when idle.
    pub is_virtual: bool,
    /// True when the device did no I/O in this interval.
    pub idle: bool,
    pub r_s: f64,
    pub w_s: f64,
    pub rkb_s: f64,
    pub wkb_s: f64,
    pub rrqm_s: f64,
    pub wrqm_s: f64,
    /// Average read request size, kB.
    pub rareq_sz: f64,
    pub wareq_sz: f64,
    /// Average read latency including queueing, ms.
    pub r_await: f64,
    pub w_await: f64,
    pub aqu_sz: f64,
    /// Percent of the interval with at least one request in flight.
    pub util: f64,
    pub in_flight: u64,
    /// Discards (None where the kernel does not report them).
    pub d_s: Option<f64>,
    pub dkb_s: Option<f64>,
    pub d_await: Option<f64>,
    /// Flushes (None where the kernel does not report them).
    pub f_s: Option<f64>,
    pub f_await: Option<f64>,
    pub settings: Option<std::sync::Arc<BlockSettings>>,
    /// What the eBPF `block_rq_issue` probe counted for this device, when eBPF is on.
    pub bpf: Option<BpfDeviceRates>,
}

/// Rates from the block_rq_issue probe. JSON: `devices[].bpf`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BpfDeviceRates {
    pub read_iops: f64,
    pub write_iops: f64,
    pub read_bytes_s: f64,
    pub write_bytes_s: f64,
    pub other_iops: f64,
    /// Device time (issue → complete) of reads and writes together, ms; null without completions.
    pub lat_p50_ms: Option<f64>,
    pub lat_p95_ms: Option<f64>,
    pub lat_p99_ms: Option<f64>,
    /// Average queue time (request created → issued to the driver) of reads and writes, ms.
    pub queue_ms_avg: Option<f64>,
    /// Request sizes issued in the interval: the non-empty log2 buckets.
    pub size_hist: Vec<super::block::SizeBucket>,
    /// eBPF completed bytes vs /proc/diskstats; null on the first interval.
    pub crosscheck: Option<super::block::CrossCheck>,
    /// Everything the block probes measured (src/model/block.rs); null when they are off.
    pub block: Option<super::block::BlockDeviceModel>,
}

/// Names of devices with no hardware behind them (a loop device's I/O is also counted on the disk
/// holding its backing file).
const VIRTUAL_PREFIXES: [&str; 4] = ["loop", "ram", "zram", "nbd"];

/// One row per /proc/diskstats line of `cur`, in the kernel's order.
///
/// The formulas are sysstat's `iostat -x` (common.c compute_ext_disk_stats, iostat.c), with
/// Δ the counter increase over the interval and Δt the interval in seconds:
/// - r/s = Δreads / Δt; rrqm/s = Δreads_merged / Δt; rkB/s = Δsectors_read / 2 / Δt
/// - rareq-sz = Δsectors_read / 2 / Δreads (kB); r_await = Δread_ms / Δreads (0 when Δreads = 0)
/// - the same for writes, for discards (d/s, dkB/s, d_await) and flushes (f/s, f_await)
/// - aqu-sz = Δweighted_io_ms / (Δt × 1000); %util = Δio_ms / (Δt × 1000) × 100, capped at 100
///
/// A device absent from `prev` (new, or renumbered, or re-created with reset counters) shows its
/// gauges with zero rates for this first interval. A device absent from `cur` is dropped, and so
/// is one that has never done any I/O ([`DiskStat::never_used`], as iostat leaves it out), and
/// one without a medium (size 0: a detached loop device keeps the counters of its last use) that
/// did none in the interval, as lsblk leaves those out; unless the block probes counted requests
/// on it. A machine's unattached loop devices and unconfigured zram are not rows; a device's
/// first I/O makes it one, its rates taken from zero.
pub fn compute(prev: Option<&Sample>, cur: &Sample, secs: f64) -> Vec<DeviceModel> {
    let prev_disks: HashMap<(u32, u32), &DiskStat> =
        prev.map(|p| p.disks.iter().map(|d| ((d.major, d.minor), d)).collect()).unwrap_or_default();
    let settings: HashMap<&str, &std::sync::Arc<BlockSettings>> =
        cur.block_settings.iter().map(|b| (b.name.as_str(), b)).collect();
    cur.disks
        .iter()
        .filter_map(|d| {
            let bpf = bpf_rates(prev, cur, d, secs);
            if d.never_used() && bpf.is_none() {
                return None;
            }
            let before = prev_disks.get(&(d.major, d.minor)).copied().filter(|p| is_same_device(p, d));
            let mut model = rates(before, d, secs);
            model.settings = settings.get(d.name.as_str()).map(|s| (*s).clone());
            let empty = model.settings.as_ref().is_some_and(|s| s.size_sectors == Some(0));
            if empty && model.idle && bpf.is_none() {
                return None;
            }
            model.is_partition = model.settings.as_ref().is_some_and(|s| s.is_partition);
            model.bpf = bpf;
            Some(model)
        })
        .collect()
}

/// The same device with counters that moved forward (or wrapped plausibly): a re-created device
/// (e.g. a loop device detached and attached again) has the same numbers but restarted counters.
fn is_same_device(prev: &DiskStat, cur: &DiskStat) -> bool {
    prev.name == cur.name
        && !was_reset(prev.reads_completed, cur.reads_completed)
        && !was_reset(prev.writes_completed, cur.writes_completed)
        && !was_reset(prev.sectors_read, cur.sectors_read)
        && !was_reset(prev.sectors_written, cur.sectors_written)
}

fn rates(prev: Option<&DiskStat>, cur: &DiskStat, secs: f64) -> DeviceModel {
    // With no previous sample the deltas are taken against the current values: all zero.
    let p = prev.unwrap_or(cur);
    let reads = delta(p.reads_completed, cur.reads_completed);
    let writes = delta(p.writes_completed, cur.writes_completed);
    let sectors_read = delta(p.sectors_read, cur.sectors_read);
    let sectors_written = delta(p.sectors_written, cur.sectors_written);
    let ms = secs * 1000.0;
    let fraction_busy = |d_ms: u64| if ms > 0.0 { d_ms as f64 / ms } else { 0.0 };

    // Discards and flushes exist only on newer kernels; a previous sample without them gives zeros.
    let discards = cur.discards.as_ref().map(|c| {
        let pd = p.discards.as_ref().unwrap_or(c);
        let n = delta(pd.completed, c.completed);
        let sectors = delta(pd.sectors, c.sectors);
        (per_second(n, secs), per_second(sectors, secs) / 2.0, per_event(delta(pd.ms, c.ms), n), n)
    });
    let flushes = cur.flushes.as_ref().map(|c| {
        let pf = p.flushes.as_ref().unwrap_or(c);
        let n = delta(pf.completed, c.completed);
        (per_second(n, secs), per_event(delta(pf.ms, c.ms), n), n)
    });
    let completed = reads + writes + discards.map_or(0, |d| d.3) + flushes.map_or(0, |f| f.2);

    DeviceModel {
        name: cur.name.clone(),
        major: cur.major,
        minor: cur.minor,
        is_partition: false,
        is_virtual: VIRTUAL_PREFIXES.iter().any(|prefix| cur.name.starts_with(prefix)),
        idle: completed == 0 && cur.in_flight == 0,
        r_s: per_second(reads, secs),
        w_s: per_second(writes, secs),
        rkb_s: per_second(sectors_read, secs) / 2.0,
        wkb_s: per_second(sectors_written, secs) / 2.0,
        rrqm_s: per_second(delta(p.reads_merged, cur.reads_merged), secs),
        wrqm_s: per_second(delta(p.writes_merged, cur.writes_merged), secs),
        rareq_sz: per_event(sectors_read, reads) / 2.0,
        wareq_sz: per_event(sectors_written, writes) / 2.0,
        r_await: per_event(delta(p.read_ms, cur.read_ms), reads),
        w_await: per_event(delta(p.write_ms, cur.write_ms), writes),
        aqu_sz: fraction_busy(delta(p.weighted_io_ms, cur.weighted_io_ms)),
        util: (fraction_busy(delta(p.io_ms, cur.io_ms)) * 100.0).min(100.0),
        in_flight: cur.in_flight,
        d_s: discards.map(|d| d.0),
        dkb_s: discards.map(|d| d.1),
        d_await: discards.map(|d| d.2),
        f_s: flushes.map(|f| f.0),
        f_await: flushes.map(|f| f.1),
        settings: None,
        bpf: None,
    }
}

/// What block_rq_issue counted for this device, matched by major:minor. None when eBPF is off, the
/// probe has not seen the device, or there is no interval the probes covered whole (no previous
/// sample, or eBPF was not on in it): counts since attach are not a rate, and are not shown as 0.
/// A device absent from a previous sample that had eBPF on started from zero within the interval
/// (the probes were attached the whole time and its first request is in this interval): its
/// counters are all of this interval.
fn bpf_rates(prev: Option<&Sample>, cur: &Sample, disk: &DiskStat, secs: f64) -> Option<BpfDeviceRates> {
    if !cur.bpf.status.enabled {
        return None;
    }
    let prev = prev.filter(|p| p.bpf.status.enabled)?;
    let find = |s: &Sample| -> Option<BpfDeviceCounters> {
        s.bpf.rq_issue.iter().find(|c| (c.major, c.minor) == (disk.major, disk.minor)).cloned()
    };
    let c = find(cur)?;
    let p = find(prev).unwrap_or_default();
    let r = |a: u64, b: u64| per_second(delta(a, b), secs);
    Some(BpfDeviceRates {
        read_iops: r(p.read_requests, c.read_requests),
        write_iops: r(p.write_requests, c.write_requests),
        read_bytes_s: r(p.read_bytes, c.read_bytes),
        write_bytes_s: r(p.write_bytes, c.write_bytes),
        other_iops: r(p.other_requests, c.other_requests),
        ..block_rates(Some(prev), cur, disk, secs)
    })
}

/// The block probes' figures for the device (all empty when they are off or did not see it).
fn block_rates(prev: Option<&Sample>, cur: &Sample, disk: &DiskStat, secs: f64) -> BpfDeviceRates {
    let Some(b) = super::block::device(prev, cur, disk, secs) else { return BpfDeviceRates::default() };
    let both = super::block::merged(&b.read.device_hist, &b.write.device_hist);
    let lat = super::block::latency_percentiles(&both);
    let queue_ms_avg = b.queue_ms_avg;
    BpfDeviceRates {
        lat_p50_ms: lat.as_ref().map(|l| l.p50_ms),
        lat_p95_ms: lat.as_ref().map(|l| l.p95_ms),
        lat_p99_ms: lat.as_ref().map(|l| l.p99_ms),
        queue_ms_avg,
        size_hist: super::block::size_buckets(&b),
        crosscheck: super::block::crosscheck(prev, cur, disk),
        block: Some(b),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{BpfSample, BpfStatus, FlushStat};

    fn disk(name: &str, io_ms: u64, reads: u64) -> DiskStat {
        DiskStat {
            major: 8,
            minor: 0,
            name: name.into(),
            reads_completed: reads,
            io_ms,
            ..Default::default()
        }
    }

    fn sample(disks: Vec<DiskStat>) -> Sample {
        Sample { disks, ..Default::default() }
    }

    #[test]
    fn util_is_capped_at_100_percent() {
        // 2600 busy ms in a 2 s interval (ms accounting is coarse at the edges) → 130 % → 100.
        let m = compute(Some(&sample(vec![disk("sda", 1000, 0)])), &sample(vec![disk("sda", 3600, 0)]), 2.0);
        assert_eq!(m[0].util, 100.0);
    }

    #[test]
    fn zero_interval_gives_zero_rates_not_infinity() {
        let m = compute(Some(&sample(vec![disk("sda", 0, 0)])), &sample(vec![disk("sda", 10, 5)]), 0.0);
        assert_eq!((m[0].r_s, m[0].util, m[0].aqu_sz), (0.0, 0.0, 0.0));
    }

    #[test]
    fn same_numbers_different_name_is_a_new_device() {
        let m = compute(Some(&sample(vec![disk("sda", 0, 0)])), &sample(vec![disk("sdz", 10, 5)]), 1.0);
        assert_eq!(m[0].r_s, 0.0);
    }

    #[test]
    fn virtual_devices_by_name() {
        let cur =
            sample(["loop3", "ram0", "zram0", "nbd1", "nvme0n1", "sda"].map(|n| disk(n, 4, 1)).to_vec());
        let virt: Vec<bool> = compute(None, &cur, 1.0).iter().map(|d| d.is_virtual).collect();
        assert_eq!(virt, [true, true, true, true, false, false]);
    }

    /// A device that never did I/O (an unattached loop device) is no row; its first I/O makes it
    /// one, with rates from zero, as iostat shows it.
    #[test]
    fn never_used_devices_are_left_out_until_their_first_io() {
        let unused = DiskStat { major: 7, minor: 5, name: "loop5".into(), ..Default::default() };
        let mut used =
            DiskStat { writes_completed: 400, sectors_written: 400 * 128, io_ms: 100, ..unused.clone() };
        let names = |m: &[DeviceModel]| m.iter().map(|d| d.name.clone()).collect::<Vec<_>>();
        let before = sample(vec![disk("sda", 10, 3), unused.clone()]);
        assert_eq!(names(&compute(Some(&before), &before, 1.0)), ["sda"]);
        let after = sample(vec![disk("sda", 10, 3), used.clone()]);
        let m = compute(Some(&before), &after, 2.0);
        assert_eq!(names(&m), ["sda", "loop5"]);
        assert_eq!((m[1].w_s, m[1].wkb_s, m[1].util), (200.0, 12800.0, 5.0));
        // Any counter or gauge that moved is use: a request still in flight, a flush.
        used = DiskStat { in_flight: 1, ..unused.clone() };
        assert!(!used.never_used());
        used = DiskStat { flushes: Some(FlushStat { completed: 1, ms: 0 }), ..unused.clone() };
        assert!(!used.never_used());
        assert!(DiskStat { flushes: Some(FlushStat::default()), ..unused }.never_used());
    }

    /// A detached loop device (size 0) keeps the counters of its last use: no row while idle,
    /// a row in an interval it did I/O in (attached again since the size was read).
    #[test]
    fn devices_without_a_medium_are_rows_only_when_busy() {
        let loop0 =
            |reads: u64| DiskStat { major: 7, minor: 0, name: "loop0".into(), ..disk("loop0", 50, reads) };
        let with_size = |disks: Vec<DiskStat>, size: u64| Sample {
            block_settings: vec![std::sync::Arc::new(BlockSettings {
                name: "loop0".into(),
                size_sectors: Some(size),
                ..Default::default()
            })],
            ..sample(disks)
        };
        let (idle_prev, idle_cur) = (with_size(vec![loop0(9)], 0), with_size(vec![loop0(9)], 0));
        assert!(compute(Some(&idle_prev), &idle_cur, 1.0).is_empty());
        assert_eq!(compute(Some(&idle_prev), &with_size(vec![loop0(9)], 2048), 1.0).len(), 1);
        let busy = compute(Some(&idle_prev), &with_size(vec![loop0(19)], 0), 1.0);
        assert_eq!(busy.iter().map(|d| d.r_s).collect::<Vec<_>>(), [10.0]);
    }

    fn with_bpf(enabled: bool, counters: Vec<BpfDeviceCounters>) -> Sample {
        Sample {
            disks: vec![disk("sda", 1, 1)],
            bpf: BpfSample {
                status: BpfStatus { enabled, ..Default::default() },
                rq_issue: counters,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn counters(reads: u64, bytes: u64) -> BpfDeviceCounters {
        BpfDeviceCounters {
            major: 8,
            minor: 0,
            read_requests: reads,
            read_bytes: bytes,
            other_requests: reads / 2,
            ..Default::default()
        }
    }

    #[test]
    fn bpf_rates_are_matched_by_major_minor() {
        let prev = with_bpf(true, vec![counters(100, 4096)]);
        let cur = with_bpf(true, vec![counters(300, 4096 + 8192)]);
        let bpf = compute(Some(&prev), &cur, 2.0)[0].bpf.clone().unwrap();
        assert_eq!(bpf.read_iops, 100.0); // (300 − 100) / 2
        assert_eq!(bpf.read_bytes_s, 4096.0); // 8192 / 2
        assert_eq!(bpf.other_iops, 50.0); // (150 − 50) / 2

        // First seen in an interval eBPF covered whole: its requests are all of this interval.
        let first = compute(Some(&with_bpf(true, vec![])), &cur, 2.0)[0].bpf.clone().unwrap();
        assert_eq!((first.read_iops, first.read_bytes_s), (150.0, 6144.0));
        // No interval the probes covered (no previous sample, or eBPF off in it): no rate, not 0.
        assert!(compute(None, &cur, 2.0)[0].bpf.is_none());
        assert!(compute(Some(&with_bpf(false, vec![])), &cur, 2.0)[0].bpf.is_none());
        // Not seen, or eBPF off: None.
        assert!(compute(Some(&prev), &with_bpf(true, vec![]), 2.0)[0].bpf.is_none());
        assert!(compute(Some(&prev), &with_bpf(false, vec![counters(300, 0)]), 2.0)[0].bpf.is_none());
    }
}
