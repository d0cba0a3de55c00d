//! The `--batch` text frame's readahead part: one line per device, the files with the most
//! readahead (most wasted first), and the hints.

use std::fmt::Write as _;

use crate::model::Model;
use crate::untrusted::shown;

/// How many files the frame lists.
pub const TOP_READAHEAD_FILES: usize = 10;

/// Appends the readahead lines (nothing for the first sample or without the probes).
pub fn append(s: &mut String, m: &Model) {
    let Some(ra) = &m.readahead else { return };
    if m.interval_s == 0.0 {
        return;
    }
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |p| format!("{p:.1}%"));
    let _ = writeln!(
        s,
        "Readahead (pages/s): device  read_ahead_kb  read-ahead  used  wasted  waste  RA share of disk reads"
    );
    for d in &ra.devices {
        let _ = writeln!(
            s,
            "  {:<10} {:>6} {:>10.1} {:>8.1} {:>8.1} {:>6} {:>6}",
            shown(&d.name),
            d.read_ahead_kb.map_or("-".to_string(), |k| k.to_string()),
            d.ra_pages_s,
            d.used_pages_s,
            d.wasted_pages_s,
            pct(d.waste_pct),
            pct(d.ra_read_share_pct)
        );
    }
    if !ra.files.is_empty() {
        let _ = writeln!(
            s,
            "  {:>6} {:>6} {:>8} {:>7} {:>7} {:>7} {:>6}  file (pages in the interval)",
            "sync", "async", "window", "RA", "used", "wasted", "waste"
        );
        for f in ra.files.iter().take(TOP_READAHEAD_FILES) {
            let _ = writeln!(
                s,
                "  {:>6} {:>6} {:>7}{} {:>7} {:>7} {:>7} {:>6}  {} [{}]",
                f.sync_events,
                f.async_events,
                f.window_pages,
                f.window_trend.arrow(),
                f.ra_pages,
                f.used_pages,
                f.wasted_pages,
                pct(f.waste_pct),
                shown(&f.path),
                shown(&f.processes.join(" "))
            );
        }
    }
    for h in &ra.hints {
        let _ = writeln!(s, "  hint: {}", shown(h));
    }
    if ra.untracked_pages_total > 0 {
        let _ = writeln!(
            s,
            "  {} readahead pages untracked since start: page map full",
            ra.untracked_pages_total
        );
    }
}
