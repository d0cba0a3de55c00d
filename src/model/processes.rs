//! Process pane (procfs only): per-process I/O rates from /proc/PID/io.

use serde::Serialize;

use crate::sample::Sample;

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

pub fn compute(_prev: Option<&Sample>, _cur: &Sample, _secs: f64) -> Vec<ProcessModel> {
    Vec::new()
}
