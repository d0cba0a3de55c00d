//! The `--batch` text frame's page-cache part: the cachestat-like system line, the throttling
//! state, the cross-check, and the top processes by cache misses (cachetop-like).

use std::fmt::Write as _;

use crate::model::page_cache::{PageCacheModel, PageCacheProcessModel};
use crate::model::Model;
use crate::ui::format::human_bytes;

/// How many processes the frame lists (the most misses, then the most accesses).
pub const TOP_CACHE_PROCESSES: usize = 10;

/// Appends the page-cache lines (nothing for the first sample; one line without the probes).
pub fn append(s: &mut String, m: &Model) {
    if m.interval_s == 0.0 {
        return;
    }
    let Some(c) = &m.cache else {
        let _ = writeln!(s, "Page cache: no eBPF hit rate (probes off); see the processes' cache est./s");
        return;
    };
    system_lines(s, c, m.interval_s);
    process_table(s, &m.cache_processes);
}

fn system_lines(s: &mut String, c: &PageCacheModel, secs: f64) {
    let hit = c.hit_pct.map_or("-".to_string(), |p| format!("{p:.1}%"));
    let _ = writeln!(
        s,
        "Page cache: hits {:.1}/s, misses {:.1}/s, hit ratio {hit}, dirtied {:.1}/s, evicted {:.1}/s \
         (pages); buffers {}, cached {}",
        c.hits_s,
        c.misses_s,
        c.dirtied_s,
        c.evicted_s,
        human_bytes(c.buffers as f64),
        human_bytes(c.cached as f64)
    );
    if let Some(k) = &c.kernel_dirty {
        let _ = writeln!(
            s,
            "Kernel dirty limits (global_dirty_state): background {}, threshold {}, limit {}",
            human_bytes(k.background_threshold as f64),
            human_bytes(k.threshold as f64),
            human_bytes(k.limit as f64)
        );
    }
    if c.throttled_processes > 0 {
        let _ = writeln!(
            s,
            "THROTTLED: {} processes paused {:.0} ms ({:.0} ms/s) in balance_dirty_pages",
            c.throttled_processes,
            c.throttled_ms,
            c.throttled_ms / secs
        );
    }
    if let Some(why) = &c.cross_check.mismatch {
        let _ = writeln!(s, "Cross-check: {}", crate::untrusted::shown(why));
    }
}

fn process_table(s: &mut String, rows: &[PageCacheProcessModel]) {
    let mut rows: Vec<&PageCacheProcessModel> = rows.iter().collect();
    rows.sort_by(|a, b| b.misses.cmp(&a.misses).then(b.accesses.cmp(&a.accesses)).then(a.pid.cmp(&b.pid)));
    let _ = writeln!(
        s,
        "{:>7} {:<15} {:>9} {:>9} {:>6} {:>9} {:>10} {:>10} {:>9}  note",
        "pid", "comm", "accesses", "misses", "hit%", "dirtied", "cache/s", "disk/s", "thr ms"
    );
    for p in rows.iter().take(TOP_CACHE_PROCESSES) {
        let mut notes = Vec::new();
        if p.direct_io {
            notes.push("direct-io");
        }
        if p.exited {
            notes.push("exited");
        }
        let _ = writeln!(
            s,
            "{:>7} {:<15.15} {:>9} {:>9} {:>6} {:>9} {:>10} {:>10} {:>9.0}  {}",
            p.pid,
            crate::untrusted::shown(&p.comm),
            p.accesses,
            p.misses,
            p.hit_pct.map_or("-".to_string(), |h| format!("{h:.1}")),
            p.dirtied,
            human_bytes(p.cache_read_bytes_s),
            human_bytes(p.disk_read_bytes_s),
            p.throttled_ms,
            notes.join(",")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_the_system_line_and_processes_by_misses() {
        let row = |pid, comm: &str, accesses, misses| PageCacheProcessModel {
            pid,
            comm: comm.into(),
            accesses,
            misses,
            hit_pct: Some(100.0 * (accesses - misses) as f64 / accesses as f64),
            cache_read_bytes_s: ((accesses - misses) * 4096) as f64,
            disk_read_bytes_s: (misses * 4096) as f64,
            ..Default::default()
        };
        let mut exited = row(7, "cat", 16384, 16384);
        exited.exited = true;
        let m = Model {
            interval_s: 1.0,
            cache: Some(PageCacheModel {
                accesses: 16484,
                misses: 16384,
                hits: 100,
                hit_pct: Some(100.0 * 100.0 / 16484.0),
                hits_s: 100.0,
                misses_s: 16384.0,
                throttled_processes: 1,
                throttled_ms: 120.0,
                ..Default::default()
            }),
            cache_processes: vec![row(5, "postgres", 100, 0), exited],
            ..Default::default()
        };
        let mut s = String::new();
        append(&mut s, &m);
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0].starts_with("Page cache: hits 100.0/s, misses 16384.0/s, hit ratio 0.6%"), "{s}");
        assert_eq!(lines[1], "THROTTLED: 1 processes paused 120 ms (120 ms/s) in balance_dirty_pages");
        assert!(lines[3].contains("cat") && lines[3].ends_with("exited"), "{s}");
        assert!(lines[4].contains("postgres"), "{s}");
        let mut off = String::new();
        append(&mut off, &Model { interval_s: 1.0, ..Default::default() });
        assert!(off.starts_with("Page cache: no eBPF hit rate"), "{off}");
    }
}
