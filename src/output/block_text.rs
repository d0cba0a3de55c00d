//! The block probes' part of a text frame (`--once`, `--batch`): per disk what the probes measured
//! (latency split into queue and device time, request sizes, queue depth, the cross-check), and the
//! busiest submitters of disk I/O. Nothing is printed when the probes are off.

use std::fmt::Write;

use crate::model::{DeviceModel, Model};
use crate::ui::format::human_bytes;

/// How many submitters the frame lists.
pub const TOP_SUBMITTERS: usize = 10;

/// Appends the block sections to a frame.
pub fn append(s: &mut String, m: &Model) {
    let devices: Vec<&DeviceModel> =
        m.devices.iter().filter(|d| d.bpf.as_ref().is_some_and(|b| b.block.is_some()) && !d.idle).collect();
    if m.bpf.block_health.is_none() {
        return;
    }
    s.push('\n');
    let _ = writeln!(
        s,
        "{:<12} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6}  vs diskstats",
        "eBPF", "r/s", "w/s", "rsz", "wsz", "queue_ms", "p50_ms", "p99_ms", "depth", "depth_max", "sync%",
    );
    for d in &devices {
        let (Some(bpf), Some(b)) = (d.bpf.as_ref(), d.bpf.as_ref().and_then(|b| b.block.as_ref())) else {
            continue;
        };
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        let share = |flag: &str| b.flags.iter().find(|f| f.flag == flag).map_or(0.0, |f| f.share_pct);
        let check = match &bpf.crosscheck {
            Some(x) if x.mismatch => format!("MISMATCH {:.1}% apart", x.diff_pct),
            Some(x) => format!("agree ({:.1}%)", x.diff_pct),
            None => "-".into(),
        };
        let _ = writeln!(
            s,
            "{:<12} {:>8.1} {:>8.1} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6.1}  {check}",
            crate::untrusted::shown(&d.name),
            b.read.iops,
            b.write.iops,
            human_bytes(b.read.avg_size),
            human_bytes(b.write.avg_size),
            ms(bpf.queue_ms_avg),
            ms(bpf.lat_p50_ms),
            ms(bpf.lat_p99_ms),
            b.depth.as_ref().map_or("-".into(), |q| format!("{:.1}", q.avg)),
            b.depth.as_ref().map_or("-".into(), |q| q.max.to_string()),
            share("sync"),
        );
    }
    if devices.is_empty() {
        s.push_str("(no request completed on any disk in this interval)\n");
    }
    s.push('\n');
    let _ = writeln!(
        s,
        "{:>8} {:<16} {:<10} {:<9} {:>11} {:>11} {:>8} {:>8} {:>8} {:>8}",
        "PID", "SUBMITTER", "DISK", "KIND", "READ/s", "WRITE/s", "R/s", "W/s", "LAT_ms", "P99_ms"
    );
    for p in m.io_processes.iter().take(TOP_SUBMITTERS) {
        let comm = crate::untrusted::escape(&crate::model::names::person_name(&p.comm)).into_owned();
        let comm = if p.exited { format!("{comm} (exited)") } else { comm };
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        let _ = writeln!(
            s,
            "{:>8} {:<16} {:<10} {:<9} {:>11} {:>11} {:>8.1} {:>8.1} {:>8} {:>8}",
            p.pid,
            comm,
            crate::untrusted::shown(&p.device),
            p.kind,
            format!("{}/s", human_bytes(p.read_bytes_s)),
            format!("{}/s", human_bytes(p.write_bytes_s)),
            p.read_iops,
            p.write_iops,
            ms(p.lat_avg_ms),
            ms(p.lat_p99_ms),
        );
    }
    if m.io_processes.is_empty() {
        s.push_str("(no disk I/O completed in this interval)\n");
    }
}
