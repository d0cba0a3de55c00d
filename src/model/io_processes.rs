//! Disk I/O per submitting process and disk (biotop-like), from the block probes: the process that
//! asked for the I/O (block_io_start runs in its context), not the kworker that later issued it.
//! Kernel threads' own I/O (flusher writeback, journal commits) is shown as `writeback`, a loop
//! device's worker's (its reads and writes of the backing file) as `loop`.
//!
//! Formulas: rates are Δcounter / Δt of the (pid, disk) pair's cumulative counters; a pair absent
//! from the previous sample started from zero within the interval (the kernel map creates it at its
//! first I/O), so its whole counters are this interval's: a `dd` that started and exited between two
//! samples is shown for that interval. Latency is block_io_start → block_rq_complete (what the submitter
//! waited): average = Δlat_ns_sum / Δlat_count, p99 from the log2 histogram (see
//! [`super::block::percentile`]). ra_flag % and sync % are shares of the bytes: ra_flag % of requests
//! the kernel flagged readahead (REQ_RAHEAD), which every buffered read miss is, the pages asked for
//! included; not readahead in ioscope's sense (pages beyond what was asked for, src/model/README.md
//! "Readahead"), so no view calls it readahead.

use serde::Serialize;

use std::collections::HashMap;

use super::block::percentile;
use super::counter::{delta, per_event, per_second};
use crate::sample::{BlockProcessCounters, Sample};

/// JSON: `io_processes[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct IoProcessModel {
    pub pid: u32,
    /// The submitter's comm; a kworker's as /proc/PID/comm shows it when the process list has it
    /// (with the workqueue it last ran: `kworker/u8:5-loop2`), which names it for people
    /// ([`super::names::person_name`]: `[loop2]`).
    pub comm: String,
    /// The disk's name from /proc/diskstats (or "major:minor" when it is not listed).
    pub device: String,
    pub major: u32,
    pub minor: u32,
    /// "process"; "loop" for a loop device's worker (a kworker whose workqueue is `loopN`: the
    /// loop device's I/O on its backing file); "writeback" for another kernel thread (flusher,
    /// journal): I/O done on behalf of others, such as dirty pages written back.
    pub kind: &'static str,
    /// cgroup v2 id of the submitter (0 when unknown), and its path ("" when unknown).
    pub cgroup_id: u64,
    pub cgroup: String,
    pub read_bytes_s: f64,
    pub write_bytes_s: f64,
    pub read_iops: f64,
    pub write_iops: f64,
    /// ms; null without completed I/O in the interval.
    pub lat_avg_ms: Option<f64>,
    pub lat_p99_ms: Option<f64>,
    /// Shares of the interval's bytes, %.
    /// Of requests the kernel flagged readahead (REQ_RAHEAD): every buffered read miss, the
    /// pages asked for included. Not readahead (pages beyond what was asked for).
    pub ra_flag_pct: f64,
    pub sync_pct: f64,
    /// The process exited during the interval (shown this once).
    pub exited: bool,
}

/// Rows for every (pid, disk) with I/O done in the interval, busiest first (read + write bytes).
/// None before there is an interval.
pub fn compute(prev: Option<&Sample>, cur: &Sample, secs: f64) -> Vec<IoProcessModel> {
    let Some(prev) = prev else { return Vec::new() };
    let before: HashMap<(u32, u32, u32), &BlockProcessCounters> =
        prev.bpf.io_processes.iter().map(|p| ((p.pid, p.major, p.minor), p)).collect();
    let names: HashMap<(u32, u32), &str> =
        cur.disks.iter().map(|d| ((d.major, d.minor), d.name.as_str())).collect();
    // A kworker's comm in the block maps is the bare `kworker/u8:5`; /proc's says what it ran.
    let proc_comm =
        |pid: u32| cur.processes.binary_search_by_key(&pid, |p| p.pid).ok().map(|i| &*cur.processes[i].comm);
    let zero = BlockProcessCounters::default();
    let mut rows: Vec<IoProcessModel> = cur
        .bpf
        .io_processes
        .iter()
        .filter_map(|c| {
            let p = before.get(&(c.pid, c.major, c.minor)).copied().unwrap_or(&zero);
            let mut r = row(p, c, secs, &names)?;
            if c.kernel_thread && c.comm.starts_with("kworker/") {
                if let Some(comm) = proc_comm(c.pid).filter(|n| n.starts_with(c.comm.as_str())) {
                    r.comm = comm.to_string();
                }
                if super::names::is_loop_worker_comm(&r.comm) {
                    r.kind = "loop";
                }
            }
            Some(r)
        })
        .collect();
    rows.sort_by(|a, b| {
        (b.read_bytes_s + b.write_bytes_s)
            .total_cmp(&(a.read_bytes_s + a.write_bytes_s))
            .then(a.pid.cmp(&b.pid))
    });
    rows
}

fn row(
    p: &BlockProcessCounters,
    c: &BlockProcessCounters,
    secs: f64,
    names: &HashMap<(u32, u32), &str>,
) -> Option<IoProcessModel> {
    let reads = delta(p.read_requests, c.read_requests);
    let writes = delta(p.write_requests, c.write_requests);
    let others = delta(p.other_requests, c.other_requests);
    // An exited process shows once even when its last request came before the previous sample
    // (it exited between the two): the interval it exits in names it, at its rate there.
    if reads + writes + others == 0 && !c.exited {
        return None;
    }
    let read_bytes = delta(p.read_bytes, c.read_bytes);
    let write_bytes = delta(p.write_bytes, c.write_bytes);
    let bytes = read_bytes + write_bytes;
    let lat_count = delta(p.lat_count, c.lat_count);
    let hist: Vec<u64> = c
        .lat_hist
        .iter()
        .enumerate()
        .map(|(i, &v)| delta(p.lat_hist.get(i).copied().unwrap_or(0), v))
        .collect();
    let share = |n: u64| if bytes > 0 { n as f64 / bytes as f64 * 100.0 } else { 0.0 };
    Some(IoProcessModel {
        pid: c.pid,
        comm: c.comm.clone(),
        device: names
            .get(&(c.major, c.minor))
            .map_or_else(|| format!("{}:{}", c.major, c.minor), |n| n.to_string()),
        major: c.major,
        minor: c.minor,
        kind: if c.kernel_thread { "writeback" } else { "process" },
        cgroup_id: c.cgroup_id,
        cgroup: c.cgroup.clone(),
        read_bytes_s: per_second(read_bytes, secs),
        write_bytes_s: per_second(write_bytes, secs),
        read_iops: per_second(reads, secs),
        write_iops: per_second(writes, secs),
        lat_avg_ms: (lat_count > 0).then(|| per_event(delta(p.lat_ns_sum, c.lat_ns_sum), lat_count) / 1e6),
        lat_p99_ms: percentile(&hist, 0.99).map(|us| us / 1000.0),
        ra_flag_pct: share(delta(p.readahead_bytes, c.readahead_bytes)),
        sync_pct: share(delta(p.sync_bytes, c.sync_bytes)),
        exited: c.exited,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::DiskStat;

    fn counters(
        pid: u32,
        comm: &str,
        reads: u64,
        read_bytes: u64,
        writes: u64,
        write_bytes: u64,
    ) -> BlockProcessCounters {
        let mut lat_hist = vec![0; 32];
        lat_hist[11] = reads + writes; // [1024, 2048) µs
        BlockProcessCounters {
            pid,
            major: 7,
            minor: 3,
            comm: comm.into(),
            read_requests: reads,
            read_bytes,
            write_requests: writes,
            write_bytes,
            readahead_bytes: read_bytes / 2,
            sync_bytes: write_bytes,
            lat_ns_sum: (reads + writes) * 1_500_000,
            lat_count: reads + writes,
            lat_hist,
            ..Default::default()
        }
    }

    fn sample(rows: Vec<BlockProcessCounters>) -> Sample {
        let mut s = Sample::default();
        s.disks.push(DiskStat { major: 7, minor: 3, name: "loop3".into(), ..Default::default() });
        s.bpf.io_processes = rows;
        s
    }

    #[test]
    fn rates_shares_and_latency_by_hand() {
        let prev = sample(vec![counters(10, "postgres", 100, 409_600, 0, 0)]);
        // 2 s later: 300 more reads of 4 KiB (half readahead), 50 writes of 64 KiB.
        let cur = sample(vec![counters(10, "postgres", 400, 1_638_400, 50, 3_276_800)]);
        let rows = compute(Some(&prev), &cur, 2.0);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.device.as_str(), r.kind, r.exited), ("loop3", "process", false));
        assert_eq!((r.read_iops, r.write_iops), (150.0, 25.0));
        assert_eq!((r.read_bytes_s, r.write_bytes_s), (614_400.0, 1_638_400.0));
        assert_eq!(r.lat_avg_ms, Some(1.5));
        // 350 in [1024, 2048) µs; rank 347 of 350: 1024 + 1024 × 347/350.
        assert!((r.lat_p99_ms.unwrap() - (1024.0 + 1024.0 * 347.0 / 350.0) / 1000.0).abs() < 1e-9);
        // Readahead: 614400 of 4505600 bytes; sync: 3276800 of 4505600.
        assert!((r.ra_flag_pct - 614_400.0 / 4_505_600.0 * 100.0).abs() < 1e-9);
        assert!((r.sync_pct - 3_276_800.0 / 4_505_600.0 * 100.0).abs() < 1e-9);
    }

    #[test]
    fn a_short_lived_process_is_shown_for_the_interval_it_ran_in() {
        // dd started after the previous sample and exited before this one.
        let mut dd = counters(4242, "dd", 0, 0, 200, 200 * 65536);
        dd.exited = true;
        let mut flusher = counters(77, "kworker/u8:1", 0, 0, 10, 1 << 20);
        flusher.kernel_thread = true;
        let cur = sample(vec![dd, flusher]);
        let rows = compute(Some(&sample(vec![])), &cur, 1.0);
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].pid, rows[0].write_iops, rows[0].exited), (4242, 200.0, true));
        assert_eq!((rows[1].comm.as_str(), rows[1].kind), ("kworker/u8:1", "writeback"));
        // Idle pairs are left out, except a process that exited: it shows once, at its rate
        // there (its last request came before the previous sample); no interval, no rows.
        let idle = compute(Some(&cur), &cur, 1.0);
        assert_eq!(idle.len(), 1);
        assert_eq!((idle[0].pid, idle[0].write_iops, idle[0].exited), (4242, 0.0, true));
        assert!(compute(None, &cur, 1.0).is_empty());
    }

    #[test]
    fn a_loop_worker_is_named_by_its_device_and_not_writeback() {
        let mut worker = counters(90, "kworker/u8:5", 100, 100 * 131_072, 0, 0);
        worker.kernel_thread = true;
        let mut flusher = counters(77, "kworker/u8:1", 0, 0, 10, 1 << 20);
        flusher.kernel_thread = true;
        let mut cur = sample(vec![worker, flusher]);
        for (pid, comm) in [(77, "kworker/u8:1-flush-254:0"), (90, "kworker/u8:5+loop2")] {
            cur.processes.push(crate::sample::ProcessIo { pid, comm: comm.into(), ..Default::default() });
        }
        let rows = compute(Some(&sample(vec![])), &cur, 1.0);
        let row = |pid| rows.iter().find(|r| r.pid == pid).unwrap();
        assert_eq!((row(90).comm.as_str(), row(90).kind), ("kworker/u8:5+loop2", "loop"));
        assert_eq!(crate::model::names::person_name(&row(90).comm), "[loop2]");
        assert_eq!((row(77).comm.as_str(), row(77).kind), ("kworker/u8:1-flush-254:0", "writeback"));
        // Another process under the pid since (its comm is not the worker's): the block map's name.
        cur.processes[1].comm = "bash".into();
        let rows = compute(Some(&sample(vec![])), &cur, 1.0);
        let w = rows.iter().find(|r| r.pid == 90).unwrap();
        assert_eq!((w.comm.as_str(), w.kind), ("kworker/u8:5", "writeback"));
    }

    #[test]
    fn an_unknown_disk_is_named_by_its_numbers() {
        let mut c = counters(1, "x", 1, 4096, 0, 0);
        c.major = 259;
        let rows = compute(Some(&sample(vec![])), &sample(vec![c]), 1.0);
        assert_eq!(rows[0].device, "259:3");
    }
}
