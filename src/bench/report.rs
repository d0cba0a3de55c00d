//! The bench results as text: the table (direct and buffered of a job on adjacent rows, each with
//! its "what bound it" line), and `--compare BEFORE.json AFTER.json`. The cells are shared with the
//! TUI's bench view, so both print the same numbers the same way.

use std::fmt::Write as _;

use super::result::JobResult;
use super::runner::{BenchReport, Settings};
use super::spec::size_label;

/// The table's columns: (header, width). The first two identify the row.
pub const COLUMNS: [(&str, usize); 17] = [
    ("job", 20),
    ("mode", 8),
    ("MiB/s", 8),
    ("IOPS", 8),
    ("p50", 7),
    ("p99", 7),
    ("p99.9", 7),
    ("max", 7),
    ("disk", 7),
    ("amp", 5),
    ("req-sz", 7),
    ("qd", 5),
    ("hit%", 5),
    ("dirtied", 7),
    ("CPU%", 5),
    ("fsync", 6),
    ("%util", 5),
];

/// A latency in µs: "0.4µs", "8.6µs", "83µs", "1.25ms", "14.2ms", "4.20s".
pub fn latency(us: f64) -> String {
    if !us.is_finite() || us <= 0.0 {
        "-".into()
    } else if us < 9.95 {
        format!("{us:.1}µs")
    } else if us < 999.5 {
        format!("{us:.0}µs")
    } else if us < 9_995.0 {
        format!("{:.2}ms", us / 1000.0)
    } else if us < 999_500.0 {
        format!("{:.1}ms", us / 1000.0)
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

/// A rate or throughput with at most 4 significant digits: "2.61", "412", "2610", "48.2k".
pub fn number(v: f64) -> String {
    if !v.is_finite() || v <= 0.0 {
        "0".into()
    } else if v < 10.0 {
        format!("{v:.2}")
    } else if v < 100.0 {
        format!("{v:.1}")
    } else if v < 9_999.5 {
        format!("{v:.0}")
    } else if v < 999_500.0 {
        format!("{:.1}k", v / 1000.0)
    } else {
        format!("{:.2}M", v / 1e6)
    }
}

fn human(bytes: f64) -> String {
    crate::ui::format::human_bytes(bytes)
}

/// The row of a job: one cell per [`COLUMNS`] entry. `job` is left empty for the second mode of a
/// job, so the pair reads as one block.
pub fn job_cells(r: &JobResult, show_job: bool) -> Vec<String> {
    let job = match r.spec() {
        Some(s) if show_job => s.key(),
        _ => String::new(),
    };
    let mode = r.mode.map(|m| m.name().to_string()).unwrap_or_default();
    if r.skipped.is_some() {
        let mut cells = vec![job, mode, "not run".into()];
        cells.resize(COLUMNS.len(), String::new());
        return cells;
    }
    let has_dev = r.amplification.is_some();
    let dev = |s: String| if has_dev { s } else { "-".into() };
    vec![
        job,
        mode,
        number(r.mib_s()),
        number(r.iops),
        latency(r.lat_p50_us),
        latency(r.lat_p99_us),
        latency(r.lat_p999_us),
        latency(r.lat_max_us),
        dev(human(r.disk_bytes as f64)),
        r.amplification.map(|a| format!("{a:.2}")).unwrap_or_else(|| "-".into()),
        dev(if r.dev_req_kb > 0.0 { human(r.dev_req_kb * 1024.0) } else { "-".into() }),
        dev(format!("{:.1}", r.dev_aqu_sz)),
        r.cache_hit_pct.map(|h| format!("{h:.0}")).unwrap_or_else(|| "-".into()),
        human(r.pages_dirtied as f64 * 4096.0),
        format!("{:.0}", r.cpu_pct),
        if r.fsync_s > 0.0 { format!("{:.2}s", r.fsync_s) } else { "-".into() },
        dev(format!("{:.0}", r.dev_util)),
    ]
}

fn pad_row(cells: &[String]) -> String {
    let mut line = String::new();
    for (i, (cell, (_, w))) in cells.iter().zip(COLUMNS).enumerate() {
        if i < 2 {
            let _ = write!(line, "{cell:<w$} ");
        } else {
            let _ = write!(line, "{cell:>w$} ");
        }
    }
    line.trim_end().to_string()
}

/// The one-line description of what was benchmarked and how the kernel was tuned.
pub fn settings_line(s: &Settings) -> String {
    let dev = s.device.as_deref().unwrap_or("no block device");
    let mut line = format!("{} ({}, {}, {} on {dev})", s.path, s.target, size_label(s.size), s.filesystem);
    let _ = write!(line, "  cache {}  fsync {}  runtime {}s", s.cache, s.fsync, s.runtime_s);
    if !s.engine.is_empty() {
        let _ = write!(line, "  engine {}", s.engine);
    }
    if let Some(ra) = s.read_ahead_kb {
        let _ = write!(line, "  read_ahead_kb {ra}");
    }
    if let Some(sch) = &s.scheduler {
        let _ = write!(line, "  scheduler {sch}");
    }
    let _ = write!(line, "  dirty_ratio {} bg {}", s.dirty_ratio, s.dirty_background_ratio);
    if s.dirty_bytes > 0 || s.dirty_background_bytes > 0 {
        let _ = write!(line, "  dirty_bytes {} bg {}", s.dirty_bytes, s.dirty_background_bytes);
    }
    line
}

/// The whole report as text: settings, the table with a verdict under each row, then the notes.
pub fn format_report(rep: &BenchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ioscope bench  {}  {}  {} CPUs",
        rep.machine.hostname, rep.machine.kernel, rep.machine.cpus
    );
    let _ = writeln!(out, "{}", settings_line(&rep.settings));
    let _ = writeln!(out);
    let header: Vec<String> = COLUMNS.iter().map(|(h, _)| h.to_string()).collect();
    let _ = writeln!(out, "{}", pad_row(&header));
    let mut prev_key = None;
    for r in &rep.jobs {
        let key = r.spec().map(|s| s.key());
        let first = key != prev_key;
        if first && prev_key.is_some() {
            let _ = writeln!(out);
        }
        let _ = writeln!(out, "{}", pad_row(&job_cells(r, first)));
        let mode = r.mode.map(|m| m.name()).unwrap_or("");
        let _ = writeln!(out, "  {mode:>8}: {}", r.verdict);
        prev_key = key;
    }
    if !rep.notes.is_empty() {
        let _ = writeln!(out);
        for n in &rep.notes {
            let _ = writeln!(out, "note: {n}");
        }
    }
    let _ = writeln!(
        out,
        "\nSizes and rates in binary units (K = KiB, M = MiB, G = GiB): MiB/s = 2^20 bytes/s of the application; \
         disk = bytes the device moved; amp = disk / application bytes; req-sz, qd, %util \
         at the device (iostat's areq-sz, aqu-sz, %util); hit% = reads served without the disk; dirtied = pages \
         dirtied machine-wide; CPU% = I/O threads' CPU, % of one core."
    );
    out
}

/// Change from `before` to `after` in percent; None when `before` is 0.
pub fn pct_change(before: f64, after: f64) -> Option<f64> {
    (before != 0.0 && before.is_finite() && after.is_finite()).then(|| (after - before) / before * 100.0)
}

fn delta_cell(before: f64, after: f64) -> String {
    match pct_change(before, after) {
        Some(p) => format!("{p:+.1}%"),
        None => "-".into(),
    }
}

/// The settings that differ between two runs, "read_ahead_kb: 128 → 4096".
pub fn settings_diff(a: &Settings, b: &Settings) -> Vec<String> {
    let (va, vb) = (serde_json::to_value(a).unwrap_or_default(), serde_json::to_value(b).unwrap_or_default());
    let mut out = Vec::new();
    if let (Some(ma), Some(mb)) = (va.as_object(), vb.as_object()) {
        for (k, x) in ma {
            let y = mb.get(k).cloned().unwrap_or(serde_json::Value::Null);
            if *x != y {
                out.push(format!("{k}: {x} → {y}"));
            }
        }
    }
    out
}

/// `--compare`: for every job present in both runs, before → after and the % change of MiB/s, IOPS,
/// p99 and disk bytes; the settings that changed first, the jobs only one side has last.
pub fn format_compare(before: &BenchReport, after: &BenchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "before: {}", settings_line(&before.settings));
    let _ = writeln!(out, "after:  {}", settings_line(&after.settings));
    let diff = settings_diff(&before.settings, &after.settings);
    if diff.is_empty() {
        let _ = writeln!(out, "settings: identical");
    } else {
        let _ = writeln!(out, "settings changed: {}", diff.join(", "));
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<20} {:<8} {:>8} {:>8} {:>7}  {:>8} {:>8} {:>7}  {:>7} {:>7} {:>7}  {:>7} {:>7} {:>7}",
        "job", "mode", "MiB/s", "→", "Δ", "IOPS", "→", "Δ", "p99", "→", "Δ", "disk", "→", "Δ"
    );
    let key = |r: &JobResult| r.spec().map(|s| (s.key(), s.mode));
    for a in &before.jobs {
        let Some(b) = after.jobs.iter().find(|b| key(b) == key(a) && key(a).is_some()) else { continue };
        let (job, mode) = key(a).map(|(k, m)| (k, m.name())).unwrap_or_default();
        if a.skipped.is_some() || b.skipped.is_some() {
            let _ = writeln!(
                out,
                "{job:<20} {mode:<8} not run in {}",
                if a.skipped.is_some() { "before" } else { "after" }
            );
            continue;
        }
        let _ = writeln!(
            out,
            "{job:<20} {mode:<8} {:>8} {:>8} {:>7}  {:>8} {:>8} {:>7}  {:>7} {:>7} {:>7}  {:>7} {:>7} {:>7}",
            number(a.mib_s()),
            number(b.mib_s()),
            delta_cell(a.mb_s, b.mb_s),
            number(a.iops),
            number(b.iops),
            delta_cell(a.iops, b.iops),
            latency(a.lat_p99_us),
            latency(b.lat_p99_us),
            delta_cell(a.lat_p99_us, b.lat_p99_us),
            human(a.disk_bytes as f64),
            human(b.disk_bytes as f64),
            delta_cell(a.disk_bytes as f64, b.disk_bytes as f64),
        );
    }
    let only = |xs: &BenchReport, ys: &BenchReport| -> Vec<String> {
        xs.jobs
            .iter()
            .filter(|x| !ys.jobs.iter().any(|y| key(y) == key(x)))
            .filter_map(|x| key(x).map(|(k, m)| format!("{k} {}", m.name())))
            .collect()
    };
    let (ob, oa) = (only(before, after), only(after, before));
    if !ob.is_empty() {
        let _ = writeln!(out, "\nonly before: {}", ob.join(", "));
    }
    if !oa.is_empty() {
        let _ = writeln!(out, "\nonly after: {}", oa.join(", "));
    }
    let _ = writeln!(
        out,
        "\nΔ = (after − before) / before. Higher MiB/s and IOPS are better; lower p99 is better."
    );
    out
}

/// A report is ~1.5 KB a job: 4 MiB is thousands of jobs. Read no more than that.
pub const MAX_REPORT_BYTES: u64 = 4 << 20;
/// A job is a few objects and strings: bounds what parsing allocates (see [`crate::bounded`]).
const REPORT_JSON_LIMITS: crate::bounded::JsonCounts =
    crate::bounded::JsonCounts { objects: 50_000, strings: 200_000 };

/// Reads a `--json` report for `--compare`, with a message that names the file. Reads at most
/// [`MAX_REPORT_BYTES`] (`/dev/zero` is refused after 4 MiB).
pub fn read_report(path: &std::path::Path) -> anyhow::Result<BenchReport> {
    use anyhow::Context;
    let text = crate::bounded::read_capped(path, MAX_REPORT_BYTES)
        .with_context(|| format!("cannot read {} as a bench report", path.display()))?;
    crate::bounded::check_json(&text, REPORT_JSON_LIMITS)
        .map_err(|why| anyhow::anyhow!("{} is not an ioscope bench --json report ({why})", path.display()))?;
    let rep: BenchReport = serde_json::from_slice(&text)
        .with_context(|| format!("{} is not an ioscope bench --json report", path.display()))?;
    anyhow::ensure!(
        !rep.jobs.is_empty(),
        "{} has no jobs: is it an `ioscope bench --json` report?",
        path.display()
    );
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::spec::{Mode, Rw};

    fn job(rw: Rw, mode: Mode, mb_s: f64, iops: f64, p99: f64) -> JobResult {
        JobResult {
            rw: Some(rw),
            bs: 4096,
            mode: Some(mode),
            qd: 1,
            mb_s,
            iops,
            lat_p99_us: p99,
            ops: 10,
            amplification: Some(1.0),
            disk_bytes: 1 << 20,
            verdict: "IOPS-bound: test".into(),
            ..Default::default()
        }
    }

    #[test]
    fn cells_formats() {
        assert_eq!(latency(83.2), "83µs");
        assert_eq!(latency(0.41), "0.4µs");
        assert_eq!(latency(1250.0), "1.25ms");
        assert_eq!(latency(14_200.0), "14.2ms");
        assert_eq!(latency(4_200_000.0), "4.20s");
        assert_eq!(latency(0.0), "-");
        assert_eq!(number(2.612), "2.61");
        assert_eq!(number(2610.0), "2610");
        assert_eq!(number(48_210.0), "48.2k");
        assert_eq!(pct_change(100.0, 115.0), Some(15.0));
        assert_eq!(pct_change(0.0, 1.0), None);
    }

    #[test]
    fn compare_matches_jobs_and_lists_changed_settings() {
        let mut before = BenchReport::default();
        before.settings.read_ahead_kb = Some(128);
        before.jobs = vec![
            job(Rw::Read, Mode::Buffered, 100.0, 25_000.0, 200.0),
            job(Rw::Write, Mode::Direct, 50.0, 1.0, 1.0),
        ];
        let mut after = before.clone();
        after.settings.read_ahead_kb = Some(4096);
        after.jobs = vec![
            job(Rw::Read, Mode::Buffered, 250.0, 62_500.0, 100.0),
            job(Rw::RandRead, Mode::Direct, 1.0, 1.0, 1.0),
        ];
        let text = format_compare(&before, &after);
        assert!(text.contains("settings changed: read_ahead_kb: 128 → 4096"), "{text}");
        let row = text.lines().find(|l| l.starts_with("read 4K qd1")).expect(&text);
        assert!(row.contains("+150.0%") && row.contains("-50.0%"), "{row}");
        assert!(text.contains("only before: write 4K qd1 direct"), "{text}");
        assert!(text.contains("only after: randread 4K qd1 direct"), "{text}");
    }

    #[test]
    fn report_pairs_modes_and_prints_verdicts() {
        let mut rep = BenchReport {
            jobs: vec![
                job(Rw::Read, Mode::Direct, 2.61, 2610.0, 500.0),
                job(Rw::Read, Mode::Buffered, 120.0, 30_000.0, 20.0),
            ],
            ..Default::default()
        };
        rep.jobs.push(JobResult::skipped(
            &crate::bench::spec::JobSpec { rw: Rw::Write, bs: 4096, mode: Mode::Direct, qd: 1 },
            "tmpfs refuses O_DIRECT".into(),
        ));
        let text = format_report(&rep);
        let lines: Vec<&str> = text.lines().collect();
        let i = lines.iter().position(|l| l.starts_with("read 4K qd1")).expect(&text);
        assert!(lines[i].contains("direct") && lines[i].contains("2610"), "{}", lines[i]);
        // 2.61 MB/s (JSON's decimal mb_s) is 2.49 MiB/s, the unit of the disk column beside it.
        assert!(lines[i].split_whitespace().nth(4) == Some("2.49"), "{}", lines[i]);
        assert!(text.contains(" MiB/s ") && !text.contains("MB/s"), "{text}");
        assert!(lines[i + 1].contains("direct: IOPS-bound"), "{}", lines[i + 1]);
        assert!(lines[i + 2].trim_start().starts_with("buffered"), "{}", lines[i + 2]);
        assert!(text.contains("not run: tmpfs refuses O_DIRECT"));
    }
}
