//! Number formatting for the panes. Every cell goes through here so that the `u` key (human vs raw
//! units) changes the whole screen consistently.
//!
//! Human mode uses binary prefixes without the "iB" (K = KiB, M = MiB, G = GiB, as top and free -h
//! do) for bytes, and SI prefixes (k, M) for counts. Raw mode prints the number in the unit of the
//! column or label: bytes as integers, kB/s and ms with two decimals like `iostat -x`.

use std::time::Duration;

/// Which way numbers are printed; toggled by `u`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Units {
    #[default]
    Human,
    Raw,
}

const BINARY_SUFFIXES: [&str; 6] = ["", "K", "M", "G", "T", "P"];

/// A size exactly, in the binary units when it is a whole multiple of one: "4K", "1M", "1536"
/// (request sizes, block sizes, histogram edges; never rounded).
pub fn exact_bytes(bytes: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}")
}

/// Bytes (or bytes per second) in binary units: "512", "27.0K", "118M", "24.0G".
/// One decimal below 100 of a unit, none above, so a value takes at most 5 characters.
pub fn human_bytes(v: f64) -> String {
    if !v.is_finite() || v <= 0.0 {
        return "0".to_string();
    }
    if v < 1024.0 {
        return format!("{}", v.round() as u64);
    }
    let mut scaled = v;
    let mut unit = 0;
    // Move up a unit before the printed value would need four integer digits ("1000K").
    while scaled >= 999.5 && unit < BINARY_SUFFIXES.len() - 1 {
        scaled /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        return format!("{}", scaled.round() as u64);
    }
    if scaled < 99.95 {
        format!("{scaled:.1}{}", BINARY_SUFFIXES[unit])
    } else {
        format!("{scaled:.0}{}", BINARY_SUFFIXES[unit])
    }
}

/// A byte quantity: human (see [`human_bytes`]) or the exact integer number of bytes.
pub fn bytes(v: f64, units: Units) -> String {
    match units {
        Units::Human => human_bytes(v),
        Units::Raw => format!("{}", v.max(0.0).round() as u64),
    }
}

/// A count per second (requests, faults, pages): "0", "3.2", "4700", "12.3k", "1.2M" in human mode;
/// two decimals in raw mode, as iostat prints r/s and w/s.
pub fn count(v: f64, units: Units) -> String {
    let v = if v.is_finite() { v.max(0.0) } else { 0.0 };
    match units {
        Units::Raw => format!("{v:.2}"),
        Units::Human => {
            if v == 0.0 {
                "0".to_string()
            } else if v < 99.95 {
                format!("{v:.1}")
            } else if v < 9999.5 {
                format!("{v:.0}")
            } else if v < 999_950.0 {
                format!("{:.1}k", v / 1000.0)
            } else {
                format!("{:.1}M", v / 1_000_000.0)
            }
        }
    }
}

/// Milliseconds (latencies): "0.41", "12.3", "1234" in human mode; two decimals in raw mode.
pub fn millis(v: f64, units: Units) -> String {
    let v = if v.is_finite() { v.max(0.0) } else { 0.0 };
    match units {
        Units::Raw => format!("{v:.2}"),
        Units::Human => {
            if v == 0.0 {
                "0".to_string()
            } else if v < 9.995 {
                format!("{v:.2}")
            } else if v < 99.95 {
                format!("{v:.1}")
            } else {
                format!("{v:.0}")
            }
        }
    }
}

/// A percentage with one decimal, without the sign: "100.0", "42.1".
pub fn percent(v: f64) -> String {
    let v = if v.is_finite() { v.max(0.0) } else { 0.0 };
    format!("{v:.1}")
}

/// Uptime as top shows it: "3d 04:12" (days, hours:minutes) or "4:12" below a day.
pub fn uptime(secs: f64) -> String {
    let total_min = (secs.max(0.0) / 60.0) as u64;
    let (days, hours, mins) = (total_min / 1440, (total_min / 60) % 24, total_min % 60);
    if days > 0 {
        format!("{days}d {hours:02}:{mins:02}")
    } else {
        format!("{hours}:{mins:02}")
    }
}

/// A sampling interval: "250ms", "1s", "2.5s", "60s".
pub fn interval(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{}s", format!("{:.2}", d.as_secs_f64()).trim_end_matches('0'))
    }
}

/// Wall-clock time of day "HH:MM:SS" from Unix milliseconds plus the local UTC offset in seconds.
pub fn clock(unix_ms: u64, utc_offset_s: i64) -> String {
    let local = (unix_ms / 1000) as i64 + utc_offset_s;
    let of_day = local.rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", of_day / 3600, (of_day / 60) % 60, of_day % 60)
}

/// Cuts `s` to at most `max` characters, ending with "…" when something was cut.
pub fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// An untrusted name (file, process, cgroup, device, host: anything a user or a recording
/// chose) for a cell: escaped by [`crate::untrusted::escape`], then cut to `max` characters.
pub fn name(s: &str, max: usize) -> String {
    shorten(&crate::untrusted::escape(s), max)
}

/// An untrusted string for a cell, escaped and whole (see [`name`]).
pub fn text(s: &str) -> String {
    crate::untrusted::escape(s).into_owned()
}

/// `s` cut to `max` characters from the left, keeping its end (a path's file name): "…/wal/0001".
pub fn shorten_start(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max || max < 2 {
        return shorten(s, max);
    }
    let mut out = String::from("…");
    out.extend(s.chars().skip(n - (max - 1)));
    out
}

/// `s` cut to `max` characters in its middle, keeping its start and its end (a metric's name and
/// its key): "redis-server fdat…aof calls_s".
pub fn shorten_middle(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max || max < 3 {
        return shorten(s, max);
    }
    let head = (max - 1) / 3;
    let tail = max - 1 - head;
    let mut out: String = s.chars().take(head).collect();
    out.push('…');
    out.extend(s.chars().skip(n - tail));
    out
}

/// A value of a metric in `unit` (compare's units: "B/s", "B", "/s", "ms", "%", ""): bytes in the
/// TUI's binary units with the sign kept ("-1.5M/s", "27.0K"), anything else [`num`].
pub fn quantity(x: f64, unit: &str) -> String {
    let sign = if x < 0.0 { "-" } else { "" };
    match unit {
        "B/s" => format!("{sign}{}/s", human_bytes(x.abs())),
        "B" => format!("{sign}{}", human_bytes(x.abs())),
        _ => num(x),
    }
}

/// A compact number: three significant figures with k/M/G (powers of 1000, the TUI's k for
/// counts, so a K is always KiB) for big ones.
pub fn num(x: f64) -> String {
    let a = x.abs();
    let (v, unit) = if a >= 1e9 {
        (x / 1e9, "G")
    } else if a >= 1e6 {
        (x / 1e6, "M")
    } else if a >= 1e3 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    let digits = if v.abs() >= 100.0 || v == 0.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_uses_binary_units_and_at_most_five_chars() {
        assert_eq!(human_bytes(0.0), "0");
        assert_eq!(human_bytes(512.0), "512");
        assert_eq!(human_bytes(1023.0), "1023");
        assert_eq!(human_bytes(1024.0), "1.0K");
        assert_eq!(human_bytes(27.0 * 1024.0), "27.0K");
        assert_eq!(human_bytes(118.0 * 1024.0 * 1024.0), "118M");
        assert_eq!(human_bytes(24.0 * 1024.0 * 1024.0 * 1024.0), "24.0G");
        // 999.6 KiB would print as "1000K": it moves up to MiB instead.
        assert_eq!(human_bytes(999.6 * 1024.0), "1.0M");
        assert_eq!(human_bytes(-5.0), "0");
        assert_eq!(human_bytes(f64::NAN), "0");
        for v in [1.0, 1500.0, 99_999.0, 1e7, 5e9, 3e12, 9.9e14] {
            assert!(human_bytes(v).len() <= 5, "{v} -> {}", human_bytes(v));
        }
    }

    #[test]
    fn raw_bytes_are_exact_integers() {
        assert_eq!(bytes(25_769_803_776.0, Units::Raw), "25769803776");
        assert_eq!(bytes(25_769_803_776.0, Units::Human), "24.0G");
    }

    #[test]
    fn counts_in_human_and_raw() {
        assert_eq!(count(0.0, Units::Human), "0");
        assert_eq!(count(3.24, Units::Human), "3.2");
        assert_eq!(count(4700.0, Units::Human), "4700");
        assert_eq!(count(12_345.0, Units::Human), "12.3k");
        assert_eq!(count(2_500_000.0, Units::Human), "2.5M");
        assert_eq!(count(4700.0, Units::Raw), "4700.00");
    }

    #[test]
    fn millis_keep_precision_where_it_matters() {
        assert_eq!(millis(0.414, Units::Human), "0.41");
        assert_eq!(millis(12.34, Units::Human), "12.3");
        assert_eq!(millis(1234.4, Units::Human), "1234");
        assert_eq!(millis(12.345, Units::Raw), "12.35");
    }

    #[test]
    fn uptime_interval_and_clock() {
        assert_eq!(uptime(59.0), "0:00");
        assert_eq!(uptime(4.0 * 3600.0 + 12.0 * 60.0 + 7.0), "4:12");
        assert_eq!(uptime(3.0 * 86_400.0 + 4.0 * 3600.0 + 12.0 * 60.0), "3d 04:12");
        assert_eq!(interval(Duration::from_millis(250)), "250ms");
        assert_eq!(interval(Duration::from_secs(1)), "1s");
        assert_eq!(interval(Duration::from_millis(2500)), "2.5s");
        // 2026-11-22 12:34:56 UTC.
        let ms = 1_795_350_896_000;
        assert_eq!(clock(ms, 0), "12:34:56");
        assert_eq!(clock(ms, 3600), "13:34:56");
        assert_eq!(clock(ms, -13 * 3600), "23:34:56");
    }

    #[test]
    fn shorten_start_and_middle_keep_the_end() {
        assert_eq!(shorten_start("/data/pg_wal/000000010000", 10), "…000010000");
        assert_eq!(shorten_start("/a/b", 10), "/a/b");
        assert_eq!(shorten_middle("redis-server fdatasync /aof calls_s", 16), "redis…of calls_s");
        assert_eq!(shorten_middle("abc", 10), "abc");
    }

    #[test]
    fn shorten_marks_the_cut() {
        assert_eq!(shorten("--no-bpf", 20), "--no-bpf");
        assert_eq!(shorten("tracefs is not mounted", 10), "tracefs i…");
        assert_eq!(shorten("abc", 0), "");
    }

    #[test]
    fn numbers_are_compact() {
        assert_eq!(num(0.0), "0");
        assert_eq!(num(1.234), "1.23");
        assert_eq!(num(12.34), "12.3");
        assert_eq!(num(123.4), "123");
        assert_eq!(num(2_600.0), "2.60k");
        assert_eq!(quantity(-1.5 * 1024.0 * 1024.0, "B/s"), "-1.5M/s");
        assert_eq!(quantity(27.0 * 1024.0, "B"), "27.0K");
        assert_eq!(quantity(2_600.0, "/s"), "2.60k");
        assert_eq!(num(-104_857_600.0), "-105M");
    }
}
