//! Leaf helpers every layer may use, and which use nothing of ioscope: the command-line value
//! parsers (durations, intervals, counts), the colour choice, the usage exit code, and the clocks.
//! Nothing here knows about samples, models or views; see src/README.md ("Layers").

use std::ffi::OsStr;
use std::time::Duration;

/// Shortest and longest sampling interval accepted, seconds. Below 0.1 s the counters barely move
/// and the sampling itself becomes the load; above an hour a "rate" means little.
pub const MIN_INTERVAL_S: f64 = 0.1;
/// How often a sampler at a sub-second interval re-reads what rarely changes (the processes'
/// full pass, the block, dirty and zone settings, the programs' counters while statistics are
/// off): once a second, with 5 % slack, so that at an interval of a second or more each sample,
/// even one that comes a few ms early, reads everything as before.
pub const SLOW_REFRESH: std::time::Duration = std::time::Duration::from_millis(950);
pub const MAX_INTERVAL_S: f64 = 3600.0;

/// The exit code of a usage error (unknown flag, bad value, bad combination), as clap and BSD
/// sysexits-free tools use it.
pub const USAGE_EXIT_CODE: i32 = 2;

/// Parses a length of time: plain seconds ("90", "0.5"), with a unit ("250ms", "90s", "5m", "2h"),
/// or a clock-like "m:ss" / "h:mm:ss".
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let bad = || format!("'{s}' is not a time (use seconds, 250ms, 90s, 5m, 2h or h:mm:ss)");
    let secs = if t.contains(':') {
        let parts: Vec<&str> = t.split(':').collect();
        if parts.len() > 3 {
            return Err(bad());
        }
        let mut total = 0.0;
        for (i, part) in parts.iter().enumerate() {
            let v: f64 = part.parse().map_err(|_| bad())?;
            // Minutes and seconds after the first field stay below 60; the first may be anything.
            if i > 0 && !(0.0..60.0).contains(&v) {
                return Err(bad());
            }
            total = total * 60.0 + v;
        }
        total
    } else {
        let (num, mult) = match t.char_indices().last() {
            _ if t.ends_with("ms") => (&t[..t.len() - 2], 0.001),
            Some((i, 's')) => (&t[..i], 1.0),
            Some((i, 'm')) => (&t[..i], 60.0),
            Some((i, 'h')) => (&t[..i], 3600.0),
            _ => (t, 1.0),
        };
        num.parse::<f64>().map_err(|_| bad())? * mult
    };
    if !secs.is_finite() || !(0.0..=365.0 * 86400.0).contains(&secs) {
        return Err(bad());
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Colour is off with `--no-color`, or when NO_COLOR is set to anything but the empty string
/// (https://no-color.org: "when present and not an empty string").
pub fn wants_color(no_color_flag: bool, no_color_env: Option<&OsStr>) -> bool {
    let env_says_no = no_color_env.is_some_and(|v| !v.is_empty());
    !(no_color_flag || env_says_no)
}

/// Parses `--interval`: a time as [`parse_duration`] takes it ("1", "0.5", "500ms", "1s", "2m")
/// within [MIN_INTERVAL_S, MAX_INTERVAL_S].
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if !(MIN_INTERVAL_S..=MAX_INTERVAL_S).contains(&d.as_secs_f64()) {
        return Err(format!("must be between {MIN_INTERVAL_S} and {MAX_INTERVAL_S} seconds (100ms to 1h)"));
    }
    Ok(d)
}

/// Parses `-n`: a whole number of reports, at least one.
pub fn parse_count(s: &str) -> Result<u64, String> {
    parse_positive(s, "reports")
}

/// Parses `compare --top`: a whole number of metrics per pane, at least one (a number too large
/// for u64 means "all").
pub fn parse_top(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) && t.parse::<u64>().is_err() {
        return Ok(u64::MAX);
    }
    parse_positive(s, "metrics")
}

fn parse_positive(s: &str, what: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(_) if !s.trim().is_empty() && s.trim().bytes().all(|b| b.is_ascii_digit()) => {
            Err(format!("'{s}' is too large"))
        }
        Err(_) => Err(format!("'{s}' is not a whole number of {what}")),
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the elapsed time between two samples is measured on it, so that a
/// wall-clock step (NTP, suspend) never distorts a rate.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// A clock in nanoseconds (CLOCK_MONOTONIC, CLOCK_BOOTTIME: both exist on every kernel ioscope
/// runs on).
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Seconds east of UTC of the local time zone, for the header clock (0 when unknown).
pub fn local_utc_offset_s() -> i64 {
    // SAFETY: time() and localtime_r() only write to the tm struct we own.
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() {
            0
        } else {
            tm.tm_gmtoff
        }
    }
}

/// [`pread_all`] for a small file that the kernel generates whole at each read (a `single_open`
/// proc file: /proc/PID/io, /proc/PID/comm): one read that leaves room in `buf` is all of it, so
/// the second read (which has the kernel generate the file again only to find its end) is
/// skipped. A read that fills `buf` goes on as [`pread_all`].
pub fn pread_whole<'a>(f: &std::fs::File, buf: &'a mut Vec<u8>) -> std::io::Result<&'a [u8]> {
    pread_until(f, buf, |n, room| n < room)
}

/// The whole file from offset 0 (proc and sysfs files are generated on each read from 0), into
/// `buf` (its capacity kept from one read to the next).
pub fn pread_all<'a>(f: &std::fs::File, buf: &'a mut Vec<u8>) -> std::io::Result<&'a [u8]> {
    pread_until(f, buf, |_, _| false)
}

/// Reads from offset 0 until the end, or until `whole(n, room)` says the first read's `n` bytes
/// (of `room` asked for) are all of the file.
pub fn pread_until<'a>(
    f: &std::fs::File,
    buf: &'a mut Vec<u8>,
    whole: impl Fn(usize, usize) -> bool,
) -> std::io::Result<&'a [u8]> {
    buf.clear();
    buf.resize(buf.capacity().max(4096), 0);
    let mut len = 0;
    loop {
        match std::os::unix::fs::FileExt::read_at(f, &mut buf[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => {
                let first = len == 0;
                len += n;
                if first && whole(n, buf.len()) {
                    break;
                }
                if len == buf.len() {
                    buf.resize(len * 2, 0);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                buf.clear();
                return Err(e);
            }
        }
    }
    buf.truncate(len);
    Ok(&buf[..len])
}

/// The process `tgid` exists (as `/proc/TGID` would): `kill(tgid, 0)`, which finds the pid
/// without the path walk and dentry lookup of a stat of /proc/TGID (EPERM: it exists, not ours).
pub fn process_exists(tgid: u32) -> bool {
    // 0 would ask about our process group; /proc/0 does not exist.
    if tgid == 0 || tgid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let rc = unsafe { libc::kill(tgid as libc::pid_t, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Raises the soft limit on open files (RLIMIT_NOFILE) to the hard limit, as Go's runtime and
/// node_exporter do at start: the usual soft limit of 1024 is a historical default for
/// `select(2)`, which ioscope does not use, and the eBPF maps and programs, the kept /proc files
/// and the exporter's connections all take descriptors. A hard limit of "unlimited" is capped at
/// the kernel's `fs.nr_open`. Returns the soft limit in force afterwards (0 when unknown).
pub fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 0;
    }
    let mut want = lim.rlim_max;
    if want == libc::RLIM_INFINITY {
        let nr_open =
            std::fs::read_to_string("/proc/sys/fs/nr_open").ok().and_then(|t| t.trim().parse().ok());
        want = nr_open.unwrap_or(lim.rlim_cur);
    }
    if want > lim.rlim_cur {
        let raised = libc::rlimit { rlim_cur: want, rlim_max: lim.rlim_max };
        // SAFETY: setting our own limit within the hard one; on failure the old one stands.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return want;
        }
    }
    lim.rlim_cur
}

/// The soft limit on open files (0 when unknown).
pub fn fd_limit() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur
    } else {
        0
    }
}

/// A kernel C string in a fixed buffer (a task's `comm`: NUL-terminated unless full) as text,
/// invalid UTF-8 replaced.
pub fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// A /proc/self/mountinfo (or /proc/mounts) field with its octal escapes undone: the kernel writes
/// space, tab, newline and backslash as `\ooo` (`\040` for a space). A backslash not followed by
/// three octal digits of a byte stays as it is.
pub fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal =
            b.get(i + 1..i + 4).filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c))).and_then(|d| {
                u8::try_from(
                    u32::from(d[0] - b'0') * 64 + u32::from(d[1] - b'0') * 8 + u32::from(d[2] - b'0'),
                )
                .ok()
            });
        match (b[i], octal) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_accepts_fractions_and_the_range_ends() {
        assert_eq!(parse_interval("0.25"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_interval("0.1"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_interval("3600"), Ok(Duration::from_secs(3600)));
    }

    #[test]
    fn interval_takes_the_spellings_a_duration_takes() {
        assert_eq!(parse_interval("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_interval("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_interval("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_interval("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_interval("0:30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_interval("50ms").unwrap_err(), "must be between 0.1 and 3600 seconds (100ms to 1h)");
        assert_eq!(parse_interval("2h").unwrap_err(), "must be between 0.1 and 3600 seconds (100ms to 1h)");
    }

    #[test]
    fn interval_rejects_zero_text_nan_and_out_of_range() {
        for bad in ["0", "0.09", "3600.5", "-1", "abc", "", "NaN", "inf"] {
            assert!(parse_interval(bad).is_err(), "{bad:?} should be rejected");
        }
        assert_eq!(
            parse_interval("1x").unwrap_err(),
            "'1x' is not a time (use seconds, 250ms, 90s, 5m, 2h or h:mm:ss)"
        );
    }

    #[test]
    fn durations_in_every_spelling() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1:30"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1:02:03"), Ok(Duration::from_secs(3723)));
        assert_eq!(parse_duration("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        for bad in ["", "x", "-1", "5d", "ms", "5 ms", "1:2:3:4", "1:75", "0:75", "1:-5", "inf", "NaN"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn no_color_env_only_counts_when_not_empty() {
        assert!(wants_color(false, None));
        assert!(wants_color(false, Some(OsStr::new(""))));
        assert!(!wants_color(false, Some(OsStr::new("1"))));
        assert!(!wants_color(true, None));
    }
}
