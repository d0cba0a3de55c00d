//! The `--batch` text frame: what the TUI shows, as plain lines a log or `grep` can take, like
//! `top -b`. Sizes use the TUI's human units (binary: K = KiB, M = MiB, G = GiB, said once in the
//! header line), the device columns too (iostat -x's, as the TUI shows them: read/s and write/s in
//! bytes per second, request sizes in bytes); counts per second in the TUI's k (1000).

use std::fmt::Write as _;

use crate::model::{DeviceModel, Model, ProcessModel, PsiView};
use crate::ui::format::{human_bytes, uptime, Units};
use crate::untrusted::shown as esc;

/// The frame's units, said once in its header line.
pub const UNITS: &str = "(K/M/G = KiB/MiB/GiB)";

/// How many processes the frame lists (the busiest by read+write bytes per second).
pub const TOP_PROCESSES: usize = 10;

/// The whole frame, newline-terminated, header line first. The time is shown in local time.
pub fn format_frame(m: &Model) -> String {
    format_frame_at(m, &local_time(m.header.wall_unix_ms))
}

/// [`format_frame`] with the header's time already formatted (tests pass a fixed string).
///
/// Every name is escaped where it is written ([`crate::untrusted`]); the whole frame then goes
/// through [`crate::untrusted::escape_lines`], so that a string a part forgot to escape still
/// cannot reach the terminal as a control sequence.
pub fn format_frame_at(m: &Model, time: &str) -> String {
    let s = frame(m, time);
    crate::untrusted::escape_lines(&s).into_owned()
}

fn frame(m: &Model, time: &str) -> String {
    let mut s = String::new();
    let h = &m.header;
    let (hostname, kernel) = match m.unavailable(crate::sample::Unavailable::HOST) {
        Some(why) => (format!("unavailable ({why})"), format!("unavailable ({why})")),
        None => (h.hostname.clone(), h.kernel.clone()),
    };
    let _ = writeln!(
        s,
        "ioscope {time}  host {}  kernel {}  up {}  interval {:.2} s  {UNITS}",
        esc(&hostname),
        esc(&kernel),
        uptime(h.uptime_s),
        m.interval_s
    );
    unavailable_line(&mut s, m);
    memory_lines(&mut s, m);
    psi_line(&mut s, m);
    bpf_line(&mut s, m);
    s.push('\n');
    device_table(&mut s, &m.devices);
    s.push('\n');
    process_table(&mut s, &m.processes);
    super::block_text::append(&mut s, m);
    if m.interval_s > 0.0 {
        s.push('\n');
        super::page_cache_text::append(&mut s, m);
        if crate::model::files::available(m) {
            s.push('\n');
            super::files_text::append(&mut s, m);
        }
    }
    super::readahead_text::append(&mut s, m);
    super::cgroups_text::append(&mut s, m);
    super::syncs_text::append(&mut s, m);
    super::iowait_text::append(&mut s, m);
    s
}

/// What could not be read, said once before the figures (their own lines say it again).
fn unavailable_line(s: &mut String, m: &Model) {
    if m.unavailable.is_empty() {
        return;
    }
    let parts: Vec<String> = m.unavailable.iter().map(|u| format!("{} ({})", u.part, u.reason)).collect();
    let _ =
        writeln!(s, "Unavailable: {}; ioscope's open-file limit (ulimit -n) is too low", parts.join(", "));
}

fn memory_lines(s: &mut String, m: &Model) {
    let mem = &m.memory;
    let _ = writeln!(
        s,
        "Memory: total {}, free {}, available {}, buffers {}, cached {}, shmem {}",
        bytes(mem.total),
        bytes(mem.free),
        bytes(mem.available),
        bytes(mem.buffers),
        bytes(mem.cached),
        bytes(mem.shmem)
    );
    if let Some(why) = m.dirty_unavailable() {
        let _ = writeln!(
            s,
            "Dirty:  dirty {}, writeback {}; thresholds unavailable ({why})",
            bytes(mem.dirty),
            bytes(mem.writeback)
        );
    } else {
        dirty_line(s, m);
    }
    paging_line(s, m);
}

fn dirty_line(s: &mut String, m: &Model) {
    let mem = &m.memory;
    let share = if mem.dirty_threshold > 0 {
        format!(" ({:.0}% of the throttle threshold)", 100.0 * mem.dirty as f64 / mem.dirty_threshold as f64)
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "Dirty:  dirty {}{share}, writeback {}; background writeback above {} ({}), \
         writers throttled above {} ({}); dirtyable {}",
        bytes(mem.dirty),
        bytes(mem.writeback),
        bytes(mem.dirty_background_threshold),
        source(mem.dirty_background_source),
        bytes(mem.dirty_threshold),
        source(mem.dirty_source),
        bytes(mem.dirtyable)
    );
}

fn paging_line(s: &mut String, m: &Model) {
    let r = &m.memory.rates;
    let _ = writeln!(
        s,
        "Paging: in {}, out {}, major faults {:.1}/s, file refaults {:.1}/s, \
         scanned {:.1}/s, stolen {:.1}/s, dirtied {:.1} pages/s, written {:.1} pages/s",
        rate(r.pgpgin_kb_s * 1024.0),
        rate(r.pgpgout_kb_s * 1024.0),
        r.majfault_s,
        r.refault_file_s,
        r.scan_s,
        r.steal_s,
        r.dirtied_pages_s,
        r.written_pages_s
    );
}

/// The memory model leaves the source empty until it has computed a threshold.
fn source(src: &str) -> std::borrow::Cow<'_, str> {
    if src.is_empty() {
        "?".into()
    } else {
        crate::untrusted::escape(src)
    }
}

fn psi_line(s: &mut String, m: &Model) {
    let lost = m.unavailable(crate::sample::Unavailable::PSI);
    let _ = writeln!(
        s,
        "PSI:    io {}; memory {}",
        psi(m.psi.io.as_ref(), lost),
        psi(m.psi.memory.as_ref(), lost)
    );
}

/// `lost`: why /proc/pressure could not be read (not a kernel without PSI).
fn psi(v: Option<&PsiView>, lost: Option<&str>) -> String {
    let Some(v) = v else {
        return match lost {
            Some(why) => format!("unavailable ({why})"),
            None => "not available (kernel without PSI)".to_string(),
        };
    };
    let mut out = format!("some {:.2}%", v.some_avg10);
    if let Some(full) = v.full_avg10 {
        let _ = write!(out, " full {full:.2}%");
    }
    let _ = write!(out, " (avg10), stalled {:.1} ms", v.some_stall_ms);
    if let Some(full) = v.full_stall_ms {
        let _ = write!(out, " (all tasks {full:.1} ms)");
    }
    out
}

fn bpf_line(s: &mut String, m: &Model) {
    let b = &m.bpf;
    let attached = b.programs.iter().filter(|p| p.attached).count();
    let state = if b.enabled {
        format!("on, {attached}/{} programs attached", b.programs.len())
    } else {
        "off".into()
    };
    match &b.reason {
        Some(reason) => {
            let _ = writeln!(s, "eBPF:   {state}: {}", esc(reason));
        }
        None => {
            let _ = writeln!(s, "eBPF:   {state}");
        }
    }
    if b.enabled {
        for p in b.panes.iter().filter(|p| !p.missing.is_empty()) {
            let _ = writeln!(s, "        no {}: {}", p.title, esc(&p.needs()));
        }
    }
}

/// Idle virtual devices (loop, ram, zram, ...) are noise on most machines: the TUI hides them by
/// default, and so does the frame. Everything else is listed, busy or not.
fn shown(d: &DeviceModel) -> bool {
    !(d.is_virtual && d.idle)
}

fn device_table(s: &mut String, devices: &[DeviceModel]) {
    let _ = writeln!(
        s,
        "{:<12} {:>8} {:>8} {:>10} {:>10} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6}",
        "Device",
        "r/s",
        "w/s",
        "read/s",
        "write/s",
        "rrqm/s",
        "wrqm/s",
        "rareq-sz",
        "wareq-sz",
        "r_await",
        "w_await",
        "aqu-sz",
        "%util"
    );
    let mut any = false;
    let (count, ms) =
        (|v| crate::ui::format::count(v, Units::Human), |v| crate::ui::format::millis(v, Units::Human));
    // The model's kB are KiB (sysstat's kB = 1024 bytes): shown in bytes, as the TUI does.
    let kib = |v: f64| human_bytes(v * 1024.0);
    for d in devices.iter().filter(|d| shown(d)) {
        any = true;
        let _ = writeln!(
            s,
            "{:<12} {:>8} {:>8} {:>10} {:>10} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8} {:>7.2} {:>6.1}",
            esc(&d.name),
            count(d.r_s),
            count(d.w_s),
            kib(d.rkb_s),
            kib(d.wkb_s),
            count(d.rrqm_s),
            count(d.wrqm_s),
            kib(d.rareq_sz),
            kib(d.wareq_sz),
            ms(d.r_await),
            ms(d.w_await),
            d.aqu_sz,
            d.util
        );
    }
    if !any {
        s.push_str("(no block devices to show)\n");
    }
}

fn io_rate(p: &ProcessModel) -> f64 {
    p.read_bytes_s + p.write_bytes_s
}

fn process_table(s: &mut String, processes: &[ProcessModel]) {
    let _ = writeln!(
        s,
        "{:>8} {:<10} {:<16} {:>11} {:>11} {:>11}  COMMAND",
        "PID", "USER", "COMM", "READ/s", "WRITE/s", "CACHE/s"
    );
    let mut busy: Vec<&ProcessModel> = processes.iter().filter(|p| io_rate(p) > 0.0).collect();
    // Busiest first; ties by pid so the order is stable from frame to frame.
    busy.sort_by(|a, b| io_rate(b).total_cmp(&io_rate(a)).then(a.pid.cmp(&b.pid)));
    for p in busy.iter().take(TOP_PROCESSES) {
        let user = p.user.as_deref().map_or_else(|| "-".to_string(), |u| crate::ui::format::name(u, 10));
        let _ = writeln!(
            s,
            "{:>8} {:<10} {:<16} {:>11} {:>11} {:>11}  {}",
            if p.exited && p.pid == 0 { "-".to_string() } else { p.pid.to_string() },
            user,
            esc(&crate::ui::processes::comm_label(p)),
            rate(p.read_bytes_s),
            rate(p.write_bytes_s),
            rate(p.cache_estimate_bytes_s),
            command(p)
        );
    }
    if busy.is_empty() {
        s.push_str("(no process read or wrote storage in this interval)\n");
    }
    let unreadable = processes.iter().filter(|p| !p.io_readable).count();
    if unreadable > 0 {
        let _ = writeln!(
            s,
            "({unreadable} processes with unreadable /proc/PID/io: not ours without root, or gone)"
        );
    }
}

/// The command line (escaped, at most [`COMMAND_WIDTH`] characters); a kernel thread's (empty)
/// as `[comm]`, as ps shows it; "-" when not read.
fn command(p: &ProcessModel) -> String {
    match p.cmdline.as_deref() {
        None => "-".into(),
        Some("") => format!("[{}]", esc(&p.comm)),
        Some(c) => crate::ui::format::name(c, COMMAND_WIDTH),
    }
}

/// The widest command line the process table prints.
pub const COMMAND_WIDTH: usize = 80;

/// Bytes in the TUI's human units (binary, K = KiB), so the two outputs read the same.
fn bytes(n: u64) -> String {
    human_bytes(n as f64)
}

/// A byte rate, "/s" appended.
fn rate(b: f64) -> String {
    format!("{}/s", human_bytes(b))
}

/// "YYYY-MM-DD HH:MM:SS" in the local time zone (TZ / /etc/localtime, via the C library).
fn local_time(unix_ms: u64) -> String {
    // libc marks musl's time_t deprecated (it is to become 64-bit there): it is the type
    // localtime_r takes, whichever it is.
    #[allow(deprecated)]
    let t = (unix_ms / 1000) as libc::time_t;
    // SAFETY: localtime_r writes only into `tm`, which we own; a zeroed tm is a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return format!("@{}", unix_ms / 1000);
    }
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_time_has_the_fixed_shape() {
        let t = local_time(1_700_000_000_000);
        assert_eq!(t.len(), "2023-11-14 22:13:20".len(), "{t}");
        assert!(t.starts_with("2023-11-1"), "{t}");
    }
}
