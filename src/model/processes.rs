//! Process pane (procfs only): per-process I/O rates from /proc/PID/io.

use serde::Serialize;

use std::collections::HashMap;

use super::counter::{delta, per_second};
use crate::sample::{ProcIoCounters, ProcessIo, Sample};

/// JSON: `processes[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProcessModel {
    pub pid: u32,
    pub comm: String,
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
            let prev_io = same.and_then(|p| p.io.as_ref());
            let mut model = ProcessModel {
                pid: c.pid,
                comm: c.comm.clone(),
                io_readable: c.io.is_some(),
                ..Default::default()
            };
            if let (Some(p), Some(c)) = (prev_io, c.io.as_ref()) {
                fill_rates(&mut model, p, c, secs);
            }
            model
        })
        .collect();
    out.sort_by_key(|p| p.pid);
    out
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
