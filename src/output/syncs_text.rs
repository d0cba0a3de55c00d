//! The `--batch` text frame's sync-call part: the calls running now and the slowest (process,
//! call, file) rows since ioscope started.

use std::fmt::Write as _;

use crate::model::Model;
use crate::ui::syncs::{rate, secs};
use crate::untrusted::shown;

/// How many rows the frame lists.
pub const TOP_SYNC_ROWS: usize = 10;

/// Appends the sync-call lines (nothing without a call seen).
pub fn append(s: &mut String, m: &Model) {
    if m.syncs.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nSync calls (now = this interval, the rest since start): pid comm call now/s now-mean now-p99 calls running mean p99 max written others-throttled file"
    );
    for r in m.syncs.iter().take(TOP_SYNC_ROWS) {
        let running = if r.running > 0 { secs(r.running_s) } else { "-".into() };
        let _ = writeln!(
            s,
            "  {:>7} {:<15} {:<16} {:>6} {:>8} {:>8} {:>6} {:>8} {:>8} {:>8} {:>8} {:>10} {:>8} {}",
            r.pid,
            shown(&r.comm),
            shown(&r.syscall),
            rate(r.calls_s),
            if r.calls_interval > 0 { secs(r.interval_mean_s) } else { "-".into() },
            if r.calls_interval > 0 { secs(r.interval_p99_s) } else { "-".into() },
            r.calls,
            running,
            secs(r.mean_s),
            secs(r.p99_s),
            secs(r.max_s),
            if r.running > 0 && r.running_written_bytes == 0 {
                "-".to_string()
            } else {
                crate::ui::format::human_bytes(r.written_bytes as f64)
            },
            secs(r.others_throttled_s),
            shown(&r.target())
        );
    }
}
