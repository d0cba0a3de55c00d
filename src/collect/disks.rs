//! /proc/diskstats and the /sys/class/block facts of each device listed there.

use std::path::Path;

use super::SystemRoot;
use super::{host, memory, read};
use crate::sample::{BlockSettings, DirtySettings, DiscardStat, DiskStat, FlushStat, HostInfo, ZoneInfo};

/// Every parseable line of /proc/diskstats, in the kernel's order. The kernel has printed 14
/// columns since 2.6, 18 (discards) since 4.18 and 20 (flushes) since 5.5; shorter lines leave the
/// newer groups None.
pub fn diskstats(root: &SystemRoot, files: &mut read::Files) -> Vec<DiskStat> {
    let Some(text) = files.lines(&root.proc.join("diskstats")) else { return Vec::new() };
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<DiskStat> {
    let d = procfs::DiskStat::from_line(line).ok()?;
    let discards = match (d.discards, d.discards_merged, d.sectors_discarded, d.time_discarding) {
        (Some(completed), Some(merged), Some(sectors), Some(ms)) => {
            Some(DiscardStat { completed, merged, sectors, ms })
        }
        _ => None,
    };
    let flushes = match (d.flushes, d.time_flushing) {
        (Some(completed), Some(ms)) => Some(FlushStat { completed, ms }),
        _ => None,
    };
    Some(DiskStat {
        major: d.major as u32,
        minor: d.minor as u32,
        name: d.name,
        reads_completed: d.reads,
        reads_merged: d.merged,
        sectors_read: d.sectors_read,
        read_ms: d.time_reading,
        writes_completed: d.writes,
        writes_merged: d.writes_merged,
        sectors_written: d.sectors_written,
        write_ms: d.time_writing,
        in_flight: d.in_progress,
        io_ms: d.time_in_progress,
        weighted_io_ms: d.weighted_time_in_progress,
        discards,
        flushes,
    })
}

/// The /sys/class/block facts of each device in `disks`. A partition has no queue of its own, so its
/// queue settings are its disk's. The disk is found from diskstats order: the kernel prints each
/// disk followed by its partitions (diskstats_show walks one gendisk's partition table at a time),
/// which avoids following sysfs symlinks (fixture copies are plain directories).
pub fn block_settings(root: &SystemRoot, disks: &[DiskStat], files: &mut read::Files) -> Vec<BlockSettings> {
    let class = root.sys.join("class/block");
    let mut out: Vec<BlockSettings> = Vec::with_capacity(disks.len());
    let mut parent: Option<usize> = None;
    for disk in disks {
        let dir = class.join(&disk.name);
        let is_partition = files.record(&dir.join("partition")).is_some();
        let settings = if is_partition {
            let mut s = parent.map(|p| out[p].clone()).unwrap_or_default();
            s.start_sector = files.u64(&dir.join("start"));
            s
        } else {
            parent = Some(out.len());
            queue_settings(&dir, files)
        };
        out.push(BlockSettings { name: disk.name.clone(), is_partition, ..settings });
    }
    out
}

/// The block settings as last read, re-read when [`SETTINGS_FRESH`] old or when the disks
/// listed change (a loop device attached, a disk gone). Eight sysfs files per disk are a large
/// part of a sample's cost at `--interval 0.1`; a setting changed by hand shows within a second,
/// and at intervals of a second or more every sample reads them as before (5 % slack for a
/// sample that comes a little early).
#[derive(Default)]
pub struct SettingsCache {
    at: Option<std::time::Instant>,
    settings: Vec<std::sync::Arc<BlockSettings>>,
    /// The other files that change by hand, if at all, on the same terms (uptime is read each
    /// time): the dirty settings, the zones' watermarks, the host's name and kernel.
    slow_at: Option<std::time::Instant>,
    slow: (DirtySettings, Vec<ZoneInfo>, HostInfo),
}

/// How long [`SettingsCache`] trusts what it read.
pub const SETTINGS_FRESH: std::time::Duration = crate::util::SLOW_REFRESH;

impl SettingsCache {
    pub fn read(
        &mut self,
        root: &SystemRoot,
        disks: &[DiskStat],
        files: &mut read::Files,
    ) -> Vec<std::sync::Arc<BlockSettings>> {
        let now = std::time::Instant::now();
        let same_disks = self.settings.len() == disks.len()
            && self.settings.iter().zip(disks).all(|(s, d)| s.name == d.name);
        if !same_disks || self.at.is_none_or(|t| now.duration_since(t) >= SETTINGS_FRESH) {
            self.settings = block_settings(root, disks, files).into_iter().map(Into::into).collect();
            self.at = Some(now);
        }
        self.settings.clone()
    }

    /// The dirty settings, the zones and the host, re-read when [`SETTINGS_FRESH`] old (the
    /// uptime each time).
    pub fn read_slow(
        &mut self,
        root: &SystemRoot,
        files: &mut read::Files,
    ) -> (DirtySettings, Vec<ZoneInfo>, HostInfo) {
        let now = std::time::Instant::now();
        if self.slow_at.is_none_or(|t| now.duration_since(t) >= SETTINGS_FRESH) {
            let host = host::read(root, files);
            self.slow = (memory::dirty_settings(root, files), memory::zones(root, files), host);
            self.slow_at = Some(now);
        } else {
            self.slow.2.uptime_s = host::uptime(root, files);
        }
        self.slow.clone()
    }
}

/// The queue/ and mq/ facts of a whole disk.
fn queue_settings(dir: &Path, files: &mut read::Files) -> BlockSettings {
    let queue = dir.join("queue");
    let mut num = |name: &str| files.u64(&queue.join(name));
    let read_ahead_kb = num("read_ahead_kb");
    let nr_requests = num("nr_requests");
    let rotational = num("rotational").map(|r| r != 0);
    let max_sectors_kb = num("max_sectors_kb");
    let logical_block_size = num("logical_block_size");
    BlockSettings {
        read_ahead_kb,
        scheduler: files.record(&queue.join("scheduler")).and_then(active_scheduler),
        nr_requests,
        rotational,
        max_sectors_kb,
        logical_block_size,
        hw_queues: std::fs::read_dir(dir.join("mq")).ok().map(|entries| entries.count() as u64),
        ..Default::default()
    }
}

/// "mq-deadline kyber [bfq] none" → "bfq"; a queue with a single choice prints it unbracketed
/// ("none"), so a lone word is the active one.
fn active_scheduler(text: &str) -> Option<String> {
    let text = text.trim();
    if let Some(start) = text.find('[') {
        let rest = &text[start + 1..];
        return rest.find(']').map(|end| rest[..end].to_string());
    }
    let mut words = text.split_whitespace();
    match (words.next(), words.next()) {
        (Some(only), None) => Some(only.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_is_the_bracketed_word() {
        assert_eq!(active_scheduler("mq-deadline kyber [bfq] none\n").as_deref(), Some("bfq"));
        assert_eq!(active_scheduler("[none] mq-deadline\n").as_deref(), Some("none"));
        assert_eq!(active_scheduler("none\n").as_deref(), Some("none"));
        assert_eq!(active_scheduler("a b\n"), None);
    }

    #[test]
    fn line_lengths_decide_discards_and_flushes() {
        let old = parse_line("   8       0 sda 1 2 3 4 5 6 7 8 9 10 11").unwrap();
        assert_eq!((old.reads_completed, old.weighted_io_ms), (1, 11));
        assert!(old.discards.is_none() && old.flushes.is_none());
        let mid = parse_line("   8       0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15").unwrap();
        assert_eq!(mid.discards, Some(DiscardStat { completed: 12, merged: 13, sectors: 14, ms: 15 }));
        assert!(mid.flushes.is_none());
        let new = parse_line(" 254       0 vda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17").unwrap();
        assert_eq!(new.flushes, Some(FlushStat { completed: 16, ms: 17 }));
        assert_eq!((new.major, new.minor, new.name.as_str()), (254, 0, "vda"));
        assert!(parse_line("garbage").is_none());
    }
}
