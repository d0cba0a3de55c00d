//! The `--batch` text frame's cgroup part: the busiest cgroups by disk bytes (eBPF), with their
//! hit rate, dirtying, throttling and I/O pressure (the TUI's cgroup view, `c`, in short).

use std::fmt::Write as _;

use crate::model::Model;
use crate::ui::format::human_bytes;

/// How many cgroups the frame lists.
pub const TOP_CGROUPS: usize = 10;

/// Appends the cgroup table; nothing when no cgroup did I/O (or without eBPF).
pub fn append(s: &mut String, m: &Model) {
    let busy: Vec<_> = m
        .cgroups
        .iter()
        .filter(|c| {
            c.read_bytes_s + c.write_bytes_s + c.accesses_s + c.dirtied_pages_s > 0.0
                || c.sync_running > 0
                || c.sync_calls_interval > 0
        })
        .take(TOP_CGROUPS)
        .collect();
    if busy.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n{:<40} {:>11} {:>11} {:>7} {:>9} {:>9} {:>9} {:>7}  FILE CACHE",
        "CGROUP", "READ/s", "WRITE/s", "HIT%", "DIRTY/s", "THR ms/s", "SYNC MAX", "IO PSI"
    );
    for c in busy {
        let name = if c.name.name.is_empty() { c.path.as_str() } else { c.name.name.as_str() };
        let _ = writeln!(
            s,
            "{:<40} {:>11} {:>11} {:>7} {:>9} {:>9.1} {:>9} {:>7}  {}",
            crate::ui::format::shorten(&crate::untrusted::escape(name), 40),
            format!("{}/s", human_bytes(c.read_bytes_s)),
            format!("{}/s", human_bytes(c.write_bytes_s)),
            c.hit_pct.map_or("-".to_string(), |h| format!("{h:.1}")),
            format!("{:.0}", c.dirtied_pages_s),
            c.throttled_ms_s,
            sync_max(c),
            c.io_pressure.as_ref().map_or("-".to_string(), |p| format!("{:.1}", p.some_avg10)),
            file_cache(c),
        );
    }
}

/// The cgroup's page cache against its memory limit: "292M of 300M limit", "292M, no limit", or
/// "-" without its memory.stat.
fn file_cache(c: &crate::model::cgroups::CgroupModel) -> String {
    c.memory.as_ref().map_or("-".to_string(), |m| match m.limit {
        Some(l) => format!("{} of {} limit", human_bytes(m.file as f64), human_bytes(l as f64)),
        None => format!("{}, no limit", human_bytes(m.file as f64)),
    })
}

/// The longest sync call of the cgroup: "4.2 s" completed, "4.2 s+" still running; "-" without.
fn sync_max(c: &crate::model::cgroups::CgroupModel) -> String {
    let secs = crate::ui::syncs::secs;
    if c.sync_running > 0 && c.sync_running_s >= c.sync_max_s.unwrap_or(0.0) {
        format!("{}+", secs(c.sync_running_s))
    } else {
        c.sync_max_s.map_or("-".to_string(), secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cgroups::CgroupModel;

    #[test]
    fn lists_busy_cgroups_by_name() {
        let mut m = Model::default();
        assert_eq!(
            {
                let mut s = String::new();
                append(&mut s, &m);
                s
            },
            ""
        );
        m.cgroups.push(CgroupModel {
            path: "/system.slice/docker-0123456789abcdef.scope".into(),
            name: crate::model::cgroup_names::parse("/system.slice/docker-0123456789abcdef.scope"),
            write_bytes_s: 2.0 * 1048576.0,
            hit_pct: Some(99.5),
            sync_max_s: Some(0.012),
            sync_running: 1,
            sync_running_s: 4.25,
            ..Default::default()
        });
        let mut s = String::new();
        append(&mut s, &m);
        assert!(s.contains("docker 0123456789ab"), "{s}");
        assert!(s.contains("2.0M/s") && s.contains("99.5"), "{s}");
        assert!(s.contains("SYNC MAX") && s.contains("4.2 s+"), "{s}");
    }

    #[test]
    fn file_cache_says_its_limit() {
        let mut m = Model::default();
        let memory = |limit| crate::model::cgroups::CgroupMemoryModel {
            source: "memory v1 /db".into(),
            file: 292 << 20,
            limit,
            ..Default::default()
        };
        let row = |memory| CgroupModel {
            path: "/db".into(),
            read_bytes_s: 1048576.0,
            memory: Some(memory),
            ..Default::default()
        };
        m.cgroups.push(row(memory(Some(300 << 20))));
        m.cgroups.push(row(memory(None)));
        let mut s = String::new();
        append(&mut s, &m);
        assert!(s.contains("FILE CACHE") && s.contains("292M of 300M limit"), "{s}");
        assert!(s.contains("292M, no limit"), "{s}");
    }
}
