//! The `--batch` text frame's I/O-wait part: the processes blocked on I/O in the interval, with
//! their busiest thread's share of it and their threads' seconds per cause (src/model/iowait.rs).

use std::fmt::Write as _;

use crate::model::Model;
use crate::untrusted::shown;

/// How many processes the frame lists.
pub const TOP_IOWAIT_ROWS: usize = 10;

/// Appends the I/O-wait lines (nothing without a process blocked on I/O in the interval).
pub fn append(s: &mut String, m: &Model) {
    let Some(w) = &m.iowait else { return };
    let rows: Vec<_> = w.processes.iter().filter(|p| p.wait_s > 0.0).take(TOP_IOWAIT_ROWS).collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nI/O wait (% of the interval of the busiest thread; seconds of all threads): pid comm io-wait% wait-s page-cache-read direct-io sync dirty-throttle other threads"
    );
    for p in rows {
        let cause = |c: &str| format!("{:.3}", p.by_cause_s.get(c).copied().unwrap_or(0.0));
        let _ = writeln!(
            s,
            "  {:>7} {:<15} {:>7.1} {:>7.3} {:>10} {:>9} {:>7} {:>9} {:>7} {:>3}",
            p.pid,
            shown(&p.comm),
            p.wait_pct,
            p.wait_s,
            cause("page_cache_read"),
            cause("direct_io"),
            cause("sync"),
            cause("dirty_throttle"),
            cause("other"),
            p.threads.len(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::iowait::{IowaitModel, IowaitProcessModel};

    #[test]
    fn lists_the_processes_that_waited_with_their_causes_and_escapes_names() {
        let mut p = IowaitProcessModel {
            pid: 42,
            comm: "db\x1b]0;x\x07".into(),
            wait_pct: 37.5,
            wait_s: 1.25,
            ..Default::default()
        };
        p.by_cause_s.insert("sync", 0.75);
        p.by_cause_s.insert("direct_io", 0.5);
        let idle = IowaitProcessModel { pid: 43, comm: "idle".into(), total_s: 9.0, ..Default::default() };
        let mut m = Model {
            iowait: Some(IowaitModel { processes: vec![p, idle], cgroups: Vec::new() }),
            ..Default::default()
        };
        let mut s = String::new();
        append(&mut s, &m);
        let rows: Vec<&str> = s.lines().filter(|l| l.starts_with("  ")).collect();
        assert_eq!(rows.len(), 1, "{s}");
        let cells: Vec<&str> = rows[0].split_whitespace().collect();
        assert_eq!(
            cells,
            ["42", r"db\x1b]0;x\x07", "37.5", "1.250", "0.000", "0.500", "0.750", "0.000", "0.000", "0"]
        );
        // Nothing without a wait in the interval.
        m.iowait.as_mut().unwrap().processes.remove(0);
        let mut s = String::new();
        append(&mut s, &m);
        assert!(s.is_empty());
    }
}
