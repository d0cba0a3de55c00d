//! The `--batch` text frame's files part: the files with the most disk I/O in the interval, and
//! the block requests mapped to them (BLK_R, BLK_W; label rows for journal, metadata, unknown).

use std::fmt::Write as _;

use crate::model::Model;
use crate::ui::format::human_bytes;
use crate::untrusted::shown;

/// How many files the frame lists.
pub const TOP_FILES: usize = 10;

/// Appends the files table (nothing for the first sample or without the probes).
pub fn append(s: &mut String, m: &Model) {
    if m.interval_s == 0.0 || !crate::model::files::available(m) {
        return;
    }
    let sampled = match m.block_files.as_ref().and_then(|b| b.sampled_pct) {
        Some(p) if p < 99.95 => format!("; BLK from {p:.0}% of block requests"),
        _ => String::new(),
    };
    let _ = writeln!(
        s,
        "Files by disk I/O ({} with I/O; bytes/s{sampled}):",
        crate::model::files::file_rows(&m.files)
    );
    if m.files.is_empty() {
        let _ = writeln!(s, "  none in this interval");
        return;
    }
    let _ = writeln!(
        s,
        "{:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:<8} FILE [PROCESSES]",
        "READ", "RA", "DIRTIED", "WB", "DIO_R", "DIO_W", "BLK_R", "BLK_W", "CACHED", "DEV"
    );
    let r = |v: f64| if v == 0.0 { "-".to_string() } else { human_bytes(v) };
    for f in m.files.iter().take(TOP_FILES) {
        let procs: Vec<String> = f.processes.iter().map(|p| format!("{}({})", shown(&p.comm), p.pid)).collect();
        let _ = writeln!(
            s,
            "{:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:<8} {}{}",
            r(f.disk_read_bytes_s),
            r(f.readahead_bytes_s),
            r(f.dirtied_bytes_s),
            r(f.writeback_bytes_s),
            r(f.direct_read_bytes_s),
            r(f.direct_write_bytes_s),
            r(f.block_read_bytes_s),
            r(f.block_write_bytes_s),
            f.cached_pct.map_or("-".into(), |p| format!("{p:.0}%")),
            shown(&f.device),
            shown(&f.name()),
            if procs.is_empty() { String::new() } else { format!(" [{}]", procs.join(" ")) }
        );
    }
}
