//! Process pane (procfs only): per-process I/O rates from /proc/PID/io.

use serde::Serialize;

use std::collections::HashMap;

use super::counter::{delta, per_second};
use crate::sample::{ProcIoCounters, ProcessIo, Sample};

/// JSON: `processes[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProcessModel {
    pub pid: u32,
    pub comm: std::sync::Arc<str>,
    /// Bytes this process caused to be fetched from storage, per second (read_bytes).
    pub read_bytes_s: f64,
    /// Bytes this process caused to be sent to storage (dirtied), per second (write_bytes).
    pub write_bytes_s: f64,
    pub rchar_s: f64,
    pub wchar_s: f64,
    pub cancelled_write_bytes_s: f64,
    /// Estimate of bytes read served from the page cache: max(0, Δrchar − Δread_bytes) per second.
    /// An estimate: rchar also counts pipes, sockets and ttys.
    pub cache_estimate_bytes_s: f64,
    /// False when /proc/PID/io was unreadable (another user's process without privileges).
    pub io_readable: bool,
}

impl ProcessModel {
    /// Whether the process did I/O in the interval: any rate above zero.
    pub fn active(&self) -> bool {
        [self.read_bytes_s, self.write_bytes_s, self.rchar_s, self.wchar_s, self.cancelled_write_bytes_s]
            .iter()
            .any(|&r| r > 0.0)
    }
}

/// JSON's `processes[]`: the processes with I/O in the interval ([`ProcessModel::active`]).
pub fn serialize_active<S: serde::Serializer>(processes: &[ProcessModel], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(processes.iter().filter(|p| p.active()))
}

/// One row per process of `cur`, ordered by pid (the UI sorts as it likes).
///
/// Rates are Δcounter / Δt of /proc/PID/io; the page-cache estimate is
/// `max(0, Δrchar − Δread_bytes) / Δt`. A process is the same one only if both pid and start time
/// match (a reused pid is a new process); a new process, or one whose io was unreadable in either
/// sample, has zero rates. Processes that exited are dropped.
pub fn compute(prev: Option<&Sample>, cur: &Sample, secs: f64) -> Vec<ProcessModel> {
    let before: HashMap<u32, &ProcessIo> =
        prev.map(|p| p.processes.iter().map(|p| (p.pid, p)).collect()).unwrap_or_default();
    let mut out: Vec<ProcessModel> = cur
        .processes
        .iter()
        .map(|c| {
            let same = before.get(&c.pid).filter(|p| p.start_ticks == c.start_ticks);
            let mut model = ProcessModel {
                pid: c.pid,
                comm: c.comm.clone(),
                io_readable: c.io.is_some(),
                ..Default::default()
            };
            if let (Some(p), Some(c_io)) = (same, c.io.as_ref()) {
                if let Some(p_io) = p.io.as_ref() {
                    fill_rates(&mut model, p_io, c_io, read_secs(prev, cur, p, c, secs));
                }
            }
            model
        })
        .collect();
    out.sort_by_key(|p| p.pid);
    out
}

/// The seconds between a process's two reads of /proc/PID/io: the samples' `secs` unless either
/// read was carried from an earlier sample (`ProcessIo::io_read_ns`), then the time between the
/// reads themselves (0 when both are the same read: no rate, the counters did not change).
fn read_secs(prev: Option<&Sample>, cur: &Sample, p: &ProcessIo, c: &ProcessIo, secs: f64) -> f64 {
    if p.io_read_ns.is_none() && c.io_read_ns.is_none() {
        return secs;
    }
    let prev_ns = p.io_read_ns.or(prev.map(|s| s.mono_ns)).unwrap_or(0);
    let cur_ns = c.io_read_ns.unwrap_or(cur.mono_ns);
    cur_ns.saturating_sub(prev_ns) as f64 / 1e9
}

fn fill_rates(m: &mut ProcessModel, p: &ProcIoCounters, c: &ProcIoCounters, secs: f64) {
    let read_bytes = delta(p.read_bytes, c.read_bytes);
    let rchar = delta(p.rchar, c.rchar);
    m.read_bytes_s = per_second(read_bytes, secs);
    m.write_bytes_s = per_second(delta(p.write_bytes, c.write_bytes), secs);
    m.rchar_s = per_second(rchar, secs);
    m.wchar_s = per_second(delta(p.wchar, c.wchar), secs);
    m.cancelled_write_bytes_s = per_second(delta(p.cancelled_write_bytes, c.cancelled_write_bytes), secs);
    m.cache_estimate_bytes_s = per_second(rchar.saturating_sub(read_bytes), secs);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(mono_ns: u64, wchar: u64, io_read_ns: Option<u64>) -> Sample {
        let io = ProcIoCounters { wchar, ..Default::default() };
        let p = ProcessIo { pid: 7, comm: "w".into(), start_ticks: 3, io: Some(io), io_read_ns };
        Sample { mono_ns, processes: vec![p], ..Default::default() }
    }

    /// A process whose counters were carried between a sampler's full passes: no rate while
    /// carried, and at its next read the delta over the time since its last read (1 s), not over
    /// the interval (0.1 s).
    #[test]
    fn carried_counters_are_divided_by_the_time_between_their_reads() {
        let s0 = sample(1_000_000_000, 1000, None);
        let s1 = sample(1_100_000_000, 1000, Some(1_000_000_000));
        let s9 = sample(1_900_000_000, 1000, Some(1_000_000_000));
        let s10 = sample(2_000_000_000, 5000, None);
        assert_eq!(compute(Some(&s0), &s1, 0.1)[0].wchar_s, 0.0);
        assert_eq!(compute(Some(&s1), &s9, 0.1)[0].wchar_s, 0.0);
        assert_eq!(compute(Some(&s9), &s10, 0.1)[0].wchar_s, 4000.0);
        // Both read in their samples: the samples' interval, as before.
        let a = sample(0, 0, None);
        let b = sample(500_000_000, 100, None);
        assert_eq!(compute(Some(&a), &b, 0.5)[0].wchar_s, 200.0);
    }
}
