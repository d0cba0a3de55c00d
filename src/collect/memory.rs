//! /proc/meminfo, /proc/vmstat, /proc/sys/vm/dirty_* and /proc/zoneinfo.

use super::read;
use super::root::SystemRoot;
use crate::sample::{DirtySettings, MemInfo, VmStat, ZoneInfo};

/// /proc/meminfo, in bytes.
pub fn meminfo(root: &SystemRoot, files: &mut read::Files) -> MemInfo {
    parse_meminfo(files.record(&root.proc.join("meminfo")).unwrap_or(""))
}

/// The text of /proc/meminfo: "Name:   value kB" lines (a few, such as HugePages_Total, carry no
/// unit). Hand-parsed like [`parse_vmstat`] (procfs's parser builds a map of ~55 owned names per
/// call): only the names used are looked at, and their values converted from kB. A text without
/// MemTotal (not meminfo, or cut short) reads as all zero, as it did through procfs.
pub fn parse_meminfo(text: &str) -> MemInfo {
    let mut m = MemInfo::default();
    let mut total = None;
    for line in text.lines() {
        let Some((key, rest)) = line.split_once(':') else { continue };
        let field = match key {
            "MemTotal" => &mut m.total_bytes,
            "MemFree" => &mut m.free_bytes,
            "MemAvailable" => &mut m.available_bytes,
            "Buffers" => &mut m.buffers_bytes,
            "Cached" => &mut m.cached_bytes,
            "Shmem" => &mut m.shmem_bytes,
            "Dirty" => &mut m.dirty_bytes,
            "Writeback" => &mut m.writeback_bytes,
            "Active(file)" => &mut m.active_file_bytes,
            "Inactive(file)" => &mut m.inactive_file_bytes,
            "Mapped" => &mut m.mapped_bytes,
            "SReclaimable" => &mut m.slab_reclaimable_bytes,
            _ => continue,
        };
        let mut words = rest.split_whitespace();
        let Some(Ok(n)) = words.next().map(str::parse::<u64>) else { continue };
        *field = match words.next() {
            Some("kB") => n.saturating_mul(1024),
            _ => n,
        };
        if key == "MemTotal" {
            total = Some(*field);
        }
    }
    if total.is_none() {
        return MemInfo::default();
    }
    m
}

/// /proc/vmstat. Reclaim counters are split by reclaimer (kswapd, direct, khugepaged, and since 6.14
/// proactive `memory.reclaim`); we sum the reclaimers. `pgscan_anon`/`pgscan_file` are the same
/// events split another way, so adding them too would count every page twice.
pub fn vmstat(root: &SystemRoot, files: &mut read::Files) -> VmStat {
    parse_vmstat(files.lines(&root.proc.join("vmstat")).unwrap_or(""))
}

/// The text of /proc/vmstat: "name value" lines. Hand-parsed (procfs's parser builds a map of
/// ~180 owned names per call, most of a sample's memory churn): only the names used are looked at.
pub fn parse_vmstat(text: &str) -> VmStat {
    let mut v = VmStat::default();
    let (mut refault_file, mut refault, mut threshold, mut background) = (None, 0, None, None);
    for line in text.lines() {
        // Only the lines used are split and have their value parsed: ~15 of ~200, told apart
        // by their first bytes before any search for the space.
        let used = matches!(line.as_bytes().first(), Some(b'n' | b'p' | b'w'))
            && (line.starts_with("nr_") || line.starts_with("pg") || line.starts_with("workingset_refault"));
        if !used {
            continue;
        }
        let Some((key, value)) = line.split_once(' ') else { continue };
        let reclaimer = |event: &str| {
            key.strip_prefix(event)
                .is_some_and(|who| matches!(who, "_kswapd" | "_direct" | "_khugepaged" | "_proactive"))
        };
        let wanted = matches!(
            key,
            "nr_free_pages"
                | "nr_inactive_file"
                | "nr_active_file"
                | "pgpgin"
                | "pgpgout"
                | "pgmajfault"
                | "workingset_refault_file"
                | "workingset_refault"
                | "nr_dirtied"
                | "nr_written"
                | "nr_dirty_threshold"
                | "nr_dirty_background_threshold"
        ) || reclaimer("pgscan")
            || reclaimer("pgsteal");
        if !wanted {
            continue;
        }
        let Ok(n) = value.trim().parse::<i64>() else { continue };
        let n = n.max(0) as u64;
        match key {
            "nr_free_pages" => v.nr_free_pages = n,
            "nr_inactive_file" => v.nr_inactive_file = n,
            "nr_active_file" => v.nr_active_file = n,
            "pgpgin" => v.pgpgin = n,
            "pgpgout" => v.pgpgout = n,
            "pgmajfault" => v.pgmajfault = n,
            // Before 5.9 there was only the combined (anon + file) counter.
            "workingset_refault_file" => refault_file = Some(n),
            "workingset_refault" => refault = n,
            "nr_dirtied" => v.nr_dirtied = n,
            "nr_written" => v.nr_written = n,
            "nr_dirty_threshold" => threshold = Some(n),
            "nr_dirty_background_threshold" => background = Some(n),
            _ if reclaimer("pgscan") => v.pgscan += n,
            _ if reclaimer("pgsteal") => v.pgsteal += n,
            _ => {}
        }
    }
    v.workingset_refault_file = refault_file.unwrap_or(refault);
    v.kernel_dirty_threshold_pages = threshold;
    v.kernel_dirty_background_threshold_pages = background;
    v
}

/// /proc/sys/vm/dirty_*; a missing file reads as 0 (which for the `_bytes` settings means "unset").
pub fn dirty_settings(root: &SystemRoot, files: &mut read::Files) -> DirtySettings {
    let vm = root.proc.join("sys/vm");
    let mut get = |name: &str| files.u64(&vm.join(name)).unwrap_or(0);
    DirtySettings {
        dirty_ratio: get("dirty_ratio"),
        dirty_background_ratio: get("dirty_background_ratio"),
        dirty_bytes: get("dirty_bytes"),
        dirty_background_bytes: get("dirty_background_bytes"),
        dirty_expire_centisecs: get("dirty_expire_centisecs"),
        dirty_writeback_centisecs: get("dirty_writeback_centisecs"),
    }
}

/// /proc/zoneinfo (procfs has no parser for it). Only the watermark block's `managed`, `high`,
/// `boost` and `protection:` lines are taken; the per-node and per-cpu blocks have other keys (the
/// per-cpu `high:` carries a colon, so it never matches `high`).
pub fn zones(root: &SystemRoot, files: &mut read::Files) -> Vec<ZoneInfo> {
    files.text(&root.proc.join("zoneinfo")).map(parse_zoneinfo).unwrap_or_default()
}

pub fn parse_zoneinfo(text: &str) -> Vec<ZoneInfo> {
    let mut zones: Vec<ZoneInfo> = Vec::new();
    for line in text.lines() {
        // "Node 0, zone   Normal"
        if let Some(rest) = line.strip_prefix("Node ") {
            let mut parts = rest.split(',');
            let node = parts.next().and_then(|n| n.trim().parse().ok()).unwrap_or(0);
            let name = parts.next().and_then(|z| z.trim().strip_prefix("zone")).unwrap_or("").trim();
            zones.push(ZoneInfo { node, name: name.to_string(), ..Default::default() });
            continue;
        }
        let Some(zone) = zones.last_mut() else { continue };
        let mut words = line.split_whitespace();
        let key = words.next().unwrap_or("");
        let number = || words.clone().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        match key {
            "managed" => zone.managed_pages = number(),
            "high" => zone.high_wmark_pages = number(),
            "boost" => zone.watermark_boost_pages = number(),
            // "protection: (0, 3019, 5067, 5067, 5067)"
            "protection:" => {
                zone.max_lowmem_reserve_pages = line
                    .split(|c: char| !c.is_ascii_digit())
                    .filter_map(|n| n.parse::<u64>().ok())
                    .max()
                    .unwrap_or(0)
            }
            _ => {}
        }
    }
    zones
}

#[cfg(test)]
mod tests {
    use super::*;
    use procfs::FromRead;

    /// procfs's parser, as the collector used it before: the oracle for the hand-written one.
    fn procfs_vmstat(text: &str) -> VmStat {
        let procfs::VmStat(map) = procfs::VmStat::from_read(text.as_bytes()).unwrap();
        let get = |key: &str| map.get(key).map(|&v| v.max(0) as u64);
        let val = |key: &str| get(key).unwrap_or(0);
        let reclaimers = |event: &str| -> u64 {
            ["kswapd", "direct", "khugepaged", "proactive"]
                .iter()
                .map(|who| val(&format!("{event}_{who}")))
                .sum()
        };
        VmStat {
            nr_free_pages: val("nr_free_pages"),
            nr_inactive_file: val("nr_inactive_file"),
            nr_active_file: val("nr_active_file"),
            pgpgin: val("pgpgin"),
            pgpgout: val("pgpgout"),
            pgmajfault: val("pgmajfault"),
            workingset_refault_file: get("workingset_refault_file")
                .unwrap_or_else(|| val("workingset_refault")),
            pgscan: reclaimers("pgscan"),
            pgsteal: reclaimers("pgsteal"),
            nr_dirtied: val("nr_dirtied"),
            nr_written: val("nr_written"),
            kernel_dirty_threshold_pages: get("nr_dirty_threshold"),
            kernel_dirty_background_threshold_pages: get("nr_dirty_background_threshold"),
        }
    }

    /// procfs's parser, as the collector used it before: the oracle for [`parse_meminfo`].
    fn procfs_meminfo(text: &str) -> MemInfo {
        let Ok(m) = procfs::Meminfo::from_read(text.as_bytes()) else { return MemInfo::default() };
        MemInfo {
            total_bytes: m.mem_total,
            free_bytes: m.mem_free,
            available_bytes: m.mem_available.unwrap_or(0),
            buffers_bytes: m.buffers,
            cached_bytes: m.cached,
            shmem_bytes: m.shmem.unwrap_or(0),
            dirty_bytes: m.dirty,
            writeback_bytes: m.writeback,
            active_file_bytes: m.active_file.unwrap_or(0),
            inactive_file_bytes: m.inactive_file.unwrap_or(0),
            mapped_bytes: m.mapped,
            slab_reclaimable_bytes: m.s_reclaimable.unwrap_or(0),
        }
    }

    #[test]
    fn meminfo_parses_as_procfs_did() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut texts = vec![std::fs::read_to_string("/proc/meminfo").unwrap()];
        for case in ["synthetic/old_kernel/t0", "synthetic/wrap/t1", "basic/t1"] {
            texts.push(std::fs::read_to_string(dir.join(case).join("proc/meminfo")).unwrap());
        }
        for text in &texts {
            let m = parse_meminfo(text);
            assert!(m.total_bytes > 0 && m.free_bytes > 0, "{text}");
            assert_eq!(m, procfs_meminfo(text), "{text}");
        }
        // Nothing like meminfo: nothing, as procfs said.
        assert_eq!(parse_meminfo("garbage\n"), MemInfo::default());
        assert_eq!(parse_meminfo("MemFree: 5 kB\n"), procfs_meminfo("MemFree: 5 kB\n"));
    }

    #[test]
    fn vmstat_parses_as_procfs_did() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/synthetic");
        let mut texts = vec![std::fs::read_to_string("/proc/vmstat").unwrap()];
        for case in ["old_kernel/t0", "old_kernel/t1", "wrap/t0"] {
            texts.push(std::fs::read_to_string(dir.join(case).join("proc/vmstat")).unwrap());
        }
        texts.push(
            "pgscan_kswapd 5\npgscan_direct 7\npgscan_anon 100\npgsteal_proactive 3\nworkingset_refault 9\n"
                .into(),
        );
        for text in &texts {
            assert_eq!(parse_vmstat(text), procfs_vmstat(text), "{text}");
        }
        assert_eq!(parse_vmstat(texts.last().unwrap()).pgscan, 12);
    }
}
