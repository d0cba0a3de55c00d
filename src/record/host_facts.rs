//! The static facts a recording's header carries: who the host is, its devices, mounts and the
//! tuning settings a before/after comparison is usually about.

use std::collections::BTreeMap;

use crate::collect::SystemRoot;
use crate::record::format::{MountInfo, RecordingHeader, FORMAT_VERSION};
use crate::sample::Sample;

/// /proc/sys entries worth keeping with a recording: the writeback and reclaim knobs.
const TUNING_SYSCTLS: &[&str] = &[
    "vm/dirty_ratio",
    "vm/dirty_background_ratio",
    "vm/dirty_bytes",
    "vm/dirty_background_bytes",
    "vm/dirty_expire_centisecs",
    "vm/dirty_writeback_centisecs",
    "vm/swappiness",
    "vm/vfs_cache_pressure",
    "vm/min_free_kbytes",
    "vm/watermark_scale_factor",
    "vm/page-cluster",
    "vm/laptop_mode",
];

/// Builds the header from the first sample (identity, devices) and the files under `root`.
pub fn header(root: &SystemRoot, first: &Sample, interval_s: f64, command: &str) -> RecordingHeader {
    let mut tuning = BTreeMap::new();
    for name in TUNING_SYSCTLS {
        if let Ok(v) = std::fs::read_to_string(root.proc.join("sys").join(name)) {
            tuning.insert(name.replace('/', "."), v.trim().to_string());
        }
    }
    RecordingHeader {
        ioscope_version: env!("CARGO_PKG_VERSION").to_string(),
        format_version: FORMAT_VERSION,
        started_unix_ms: first.wall_unix_ms,
        interval_s,
        hostname: first.host.hostname.clone(),
        kernel: first.host.kernel.clone(),
        page_size: first.page_size,
        cpus: std::thread::available_parallelism().map(|n| n.get() as u64).unwrap_or(0),
        devices: first.block_settings.iter().map(|b| (**b).clone()).collect(),
        mounts: std::fs::read_to_string(root.proc.join("self/mounts"))
            .map(|t| parse_mounts(&t))
            .unwrap_or_default(),
        tuning,
        command: command.to_string(),
    }
}

/// Filesystems on block devices (source under /dev/), from /proc/self/mounts; pseudo filesystems
/// (proc, tmpfs, cgroup...) say nothing about the disk and are left out. Octal escapes (`\040` for
/// a space) are decoded.
pub fn parse_mounts(text: &str) -> Vec<MountInfo> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (source, target, fstype, options) = (f.next()?, f.next()?, f.next()?, f.next()?);
            source.starts_with("/dev/").then(|| MountInfo {
                source: crate::util::unescape_mountinfo(source),
                target: crate::util::unescape_mountinfo(target),
                fstype: fstype.to_string(),
                options: options.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_keep_block_devices_and_decode_escapes() {
        let text = "proc /proc proc rw 0 0\n/dev/vda / ext4 rw,relatime 0 0\n\
                    /dev/loop3 /mnt/my\\040disk xfs rw 0 0\ntmpfs /tmp tmpfs rw 0 0\n";
        let m = parse_mounts(text);
        assert_eq!(m.len(), 2);
        assert_eq!(
            (m[0].source.as_str(), m[0].target.as_str(), m[0].fstype.as_str()),
            ("/dev/vda", "/", "ext4")
        );
        assert_eq!(m[1].target, "/mnt/my disk");
    }
}
