//! /proc/diskstats and the /sys/class/block facts of each device listed there.

use std::path::Path;

use super::root::SystemRoot;
use super::{host, memory, read};
use crate::sample::{
    BlockSettings, DirtySettings, DiscardStat, DiskStat, FlushStat, HostInfo, Unavailable, ZoneInfo,
};

/// Every parseable line of /proc/diskstats, in the kernel's order. The kernel has printed 14
/// columns since 2.6, 18 (discards) since 4.18 and 20 (flushes) since 5.5; shorter lines leave the
/// newer groups None.
pub fn diskstats(root: &SystemRoot, files: &mut read::Files) -> Vec<DiskStat> {
    let Some(text) = files.lines(&root.proc.join("diskstats")) else { return Vec::new() };
    text.lines().filter_map(parse_line).collect()
}

/// `disks[i]` for each `i` in `which` re-read from its own `/sys/class/block/NAME/stat` (the same
/// counters as its /proc/diskstats line). False when one cannot be read.
pub fn reread_stats(
    root: &SystemRoot,
    disks: &mut [DiskStat],
    which: &[usize],
    files: &mut read::Files,
) -> bool {
    let class = root.sys.join("class/block");
    for &i in which {
        let Some(d) = disks.get_mut(i) else { return false };
        let Some(stat) = files.record(&class.join(&d.name).join("stat")) else { return false };
        let Some(fresh) = parse_line(&format!("{} {} {} {}", d.major, d.minor, d.name, stat.trim())) else {
            return false;
        };
        *d = fresh;
    }
    true
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
    block_settings_since(root, disks, files, None)
}

/// [`block_settings`], taking the facts fixed for a device's life (partition or not, its start,
/// the logical block size, the hardware queues) from `fixed` when given (the same devices, read
/// before): only the queue's tunables are read then, five files per disk and none per partition
/// instead of nine file operations per device; none for a disk that has never done I/O
/// ([`DiskStat::never_used`]: not a row of the devices pane; a machine's unattached loop devices)
/// and only its size for a disk that had no medium (size 0) and still has none: their settings
/// are taken from `fixed`.
fn block_settings_since(
    root: &SystemRoot,
    disks: &[DiskStat],
    files: &mut read::Files,
    fixed: Option<&[std::sync::Arc<BlockSettings>]>,
) -> Vec<BlockSettings> {
    let class = root.sys.join("class/block");
    let mut out: Vec<BlockSettings> = Vec::with_capacity(disks.len());
    let mut parent: Option<usize> = None;
    for (i, disk) in disks.iter().enumerate() {
        let known = fixed.and_then(|f| f.get(i));
        let dir = class.join(&disk.name);
        // A disk without a medium (size 0: a detached loop device) keeps its tunables while
        // it stays so: only its size is read again. (A known partition reads nothing: it takes
        // its disk's settings as they stand.)
        let empty = |k: &BlockSettings, files: &mut read::Files| {
            k.size_sectors == Some(0) && files.u64(&dir.join("size")) == Some(0)
        };
        let keep = |k: &&std::sync::Arc<BlockSettings>, files: &mut read::Files| {
            !k.is_partition && (disk.never_used() || empty(k, files))
        };
        if let Some(k) = known.filter(|k| keep(k, files)) {
            parent = Some(out.len());
            out.push((**k).clone());
            continue;
        }
        let is_partition = match known {
            Some(k) => k.is_partition,
            None => files.record(&dir.join("partition")).is_some(),
        };
        let settings = if is_partition {
            let mut s = parent.map(|p| out[p].clone()).unwrap_or_default();
            (s.start_sector, s.size_sectors) = match known {
                Some(k) => (k.start_sector, k.size_sectors),
                None => (files.u64(&dir.join("start")), files.u64(&dir.join("size"))),
            };
            s
        } else {
            parent = Some(out.len());
            let mut s = queue_tunables(&dir, files);
            s.size_sectors = files.u64(&dir.join("size"));
            match known {
                Some(k) => (s.logical_block_size, s.hw_queues) = (k.logical_block_size, k.hw_queues),
                None => {
                    s.logical_block_size = files.u64(&dir.join("queue/logical_block_size"));
                    s.hw_queues =
                        std::fs::read_dir(dir.join("mq")).ok().map(|entries| entries.count() as u64);
                }
            }
            s
        };
        out.push(BlockSettings { name: disk.name.clone(), is_partition, ..settings });
    }
    out
}

/// The block settings as last read, re-read when [`SETTINGS_FRESH`] old or when the disks
/// listed change (a loop device attached, a disk gone). Eight sysfs files per disk are a large
/// part of a sample's cost at `--interval 0.1`; a setting changed by hand shows within a second,
/// and at intervals of a second or more every sample reads them as before (5 % slack for a
/// sample that comes a little early). What does not change while a device exists (partition or
/// not, its start, the logical block size, the hardware queues) is re-read only every
/// [`FIXED_FRESH`] or when the list changes: a loop device re-attached with another block size
/// under the same name shows it within that time.
///
/// The per-device files are opened, read and closed each time ([`read::Files::unkept`]): kept
/// open they held about nine descriptors per device (1,817 with 203 devices), and a machine's
/// hundreds of loop devices exhausted the usual limit of 1024. What could not be read for want of
/// descriptors is said ([`Unavailable`]) and read again at the next sample.
#[derive(Default)]
pub struct SettingsCache {
    at: Option<std::time::Instant>,
    fixed_at: Option<std::time::Instant>,
    settings: Vec<std::sync::Arc<BlockSettings>>,
    /// The settings were last read short of file descriptors.
    settings_lost: bool,
    /// The other files that change by hand, if at all, on the same terms (uptime is read each
    /// time): the dirty settings, the zones' watermarks, the host's name and kernel.
    slow_at: Option<std::time::Instant>,
    slow: (DirtySettings, Vec<ZoneInfo>, HostInfo),
    /// Which of those could not be read for want of file descriptors.
    slow_lost: Vec<&'static str>,
}

/// How long [`SettingsCache`] trusts what it read.
pub const SETTINGS_FRESH: std::time::Duration = crate::util::SLOW_REFRESH;
/// How long [`SettingsCache`] trusts the facts fixed for a device's life.
pub const FIXED_FRESH: std::time::Duration = std::time::Duration::from_secs(10);

impl SettingsCache {
    /// Whether the settings held are `disks`', device for device in the same order.
    fn read_for(&self, disks: &[DiskStat]) -> bool {
        self.settings.len() == disks.len() && self.settings.iter().zip(disks).all(|(s, d)| s.name == d.name)
    }

    /// The devices in `disks` that are not request-based (a disk without hardware queues, `mq/`:
    /// device-mapper, md, zram, a RAM disk; and its partitions): their I/O does not pass the block
    /// layer's request tracepoints. None when `disks` is not the list the settings were last
    /// read for.
    pub fn bio_based(&self, disks: &[DiskStat]) -> Option<Vec<usize>> {
        if !self.read_for(disks) {
            return None;
        }
        let mut out = Vec::new();
        let mut disk_has_queues = false;
        for (i, s) in self.settings.iter().enumerate() {
            if !s.is_partition {
                disk_has_queues = s.hw_queues.is_some_and(|n| n > 0);
            }
            if !disk_has_queues {
                out.push(i);
            }
        }
        Some(out)
    }

    /// The settings of `disks`, and [`Unavailable::BLOCK_SETTINGS`] when they could not all be
    /// read for want of file descriptors.
    pub fn read(
        &mut self,
        root: &SystemRoot,
        disks: &[DiskStat],
        files: &mut read::Files,
    ) -> (Vec<std::sync::Arc<BlockSettings>>, Option<&'static str>) {
        let settings = self.read_at(root, disks, files, std::time::Instant::now());
        (settings, self.settings_lost.then_some(Unavailable::BLOCK_SETTINGS))
    }

    fn read_at(
        &mut self,
        root: &SystemRoot,
        disks: &[DiskStat],
        files: &mut read::Files,
        now: std::time::Instant,
    ) -> Vec<std::sync::Arc<BlockSettings>> {
        let same_disks = self.read_for(disks);
        let fresh =
            |at: Option<std::time::Instant>, within| at.is_some_and(|t| now.duration_since(t) < within);
        if !same_disks || !fresh(self.at, SETTINGS_FRESH) {
            let fixed = (same_disks && fresh(self.fixed_at, FIXED_FRESH)).then_some(&self.settings[..]);
            if fixed.is_none() {
                self.fixed_at = Some(now);
            }
            let before = files.out_of_fds();
            let read = files.unkept(|files| block_settings_since(root, disks, files, fixed));
            self.settings = read.into_iter().map(Into::into).collect();
            self.settings_lost = files.out_of_fds() != before;
            // Short of descriptors: everything is read again at the next sample.
            self.at = (!self.settings_lost).then_some(now);
            if self.settings_lost {
                self.fixed_at = None;
            }
        }
        self.settings.clone()
    }

    /// The dirty settings, the zones and the host, re-read when [`SETTINGS_FRESH`] old (the
    /// uptime each time), and which of them could not be read for want of file descriptors
    /// ([`Unavailable::DIRTY_SETTINGS`], [`Unavailable::ZONES`], [`Unavailable::HOST`]; all read
    /// again at the next sample then).
    pub fn read_slow(
        &mut self,
        root: &SystemRoot,
        files: &mut read::Files,
    ) -> (DirtySettings, Vec<ZoneInfo>, HostInfo, Vec<&'static str>) {
        let now = std::time::Instant::now();
        if self.slow_at.is_none_or(|t| now.duration_since(t) >= SETTINGS_FRESH) {
            let mut lost = Vec::new();
            let mut part = |name: &'static str, files: &mut read::Files, before: u64| {
                if files.out_of_fds() != before {
                    lost.push(name);
                }
            };
            let before = files.out_of_fds();
            let host = host::read(root, files);
            part(Unavailable::HOST, files, before);
            let before = files.out_of_fds();
            let dirty = memory::dirty_settings(root, files);
            part(Unavailable::DIRTY_SETTINGS, files, before);
            let before = files.out_of_fds();
            let zones = memory::zones(root, files);
            part(Unavailable::ZONES, files, before);
            self.slow = (dirty, zones, host);
            self.slow_at = lost.is_empty().then_some(now);
            self.slow_lost = lost;
        } else {
            self.slow.2.uptime_s = host::uptime(root, files);
        }
        let (dirty, zones, host) = self.slow.clone();
        (dirty, zones, host, self.slow_lost.clone())
    }
}

/// The queue/ settings of a whole disk that can be changed by hand.
fn queue_tunables(dir: &Path, files: &mut read::Files) -> BlockSettings {
    let queue = dir.join("queue");
    let mut num = |name: &str| files.u64(&queue.join(name));
    let read_ahead_kb = num("read_ahead_kb");
    let nr_requests = num("nr_requests");
    let rotational = num("rotational").map(|r| r != 0);
    let max_sectors_kb = num("max_sectors_kb");
    BlockSettings {
        read_ahead_kb,
        scheduler: files.record(&queue.join("scheduler")).and_then(active_scheduler),
        nr_requests,
        rotational,
        max_sectors_kb,
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
    fn bio_based_devices_are_found_and_reread_from_their_own_stat() {
        let dir = tempfile::tempdir().unwrap();
        let block = dir.path().join("sys/class/block");
        std::fs::create_dir_all(block.join("sda/mq/0")).unwrap();
        for part in ["sda1", "zram0p1"] {
            std::fs::create_dir_all(block.join(part)).unwrap();
            std::fs::write(block.join(part).join("partition"), "1\n").unwrap();
        }
        std::fs::create_dir_all(block.join("dm-0")).unwrap();
        std::fs::create_dir_all(block.join("zram0")).unwrap();
        std::fs::write(block.join("zram0/stat"), "  5 0 40 1 7 0 56 2 0 3 3 0 0 0 0 0 0\n").unwrap();
        let root = SystemRoot::fixture(dir.path());
        let disks = |names: &[&str]| -> Vec<DiskStat> {
            names.iter().map(|name| DiskStat { name: name.to_string(), ..Default::default() }).collect()
        };
        let mut cache = SettingsCache::default();
        let all = disks(&["sda", "sda1", "dm-0", "zram0", "zram0p1"]);
        assert_eq!(cache.bio_based(&all), None, "nothing read yet");
        let mut files = read::Files::one_shot();
        cache.read(&root, &all, &mut files);
        // A device-mapper device and zram have no hardware queues (their I/O is bio-based), nor
        // has a partition of one.
        assert_eq!(cache.bio_based(&all), Some(vec![2, 3, 4]));
        assert_eq!(cache.bio_based(&disks(&["sda", "sda1"])), None, "another list");

        let mut reread = all.clone();
        reread[3].major = 252;
        assert!(reread_stats(&root, &mut reread, &[3], &mut files));
        let z = &reread[3];
        assert_eq!(
            (z.major, z.name.as_str(), z.reads_completed, z.sectors_written, z.io_ms),
            (252, "zram0", 5, 56, 3)
        );
        assert!(z.discards.is_some() && z.flushes.is_some(), "17 fields: discards and flushes");
        assert!(!reread_stats(&root, &mut reread, &[2], &mut files), "dm-0 has no stat file here");
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

    #[test]
    fn the_tunables_are_reread_each_time_and_the_fixed_facts_every_fixed_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let block = dir.path().join("sys/class/block");
        let write = |path: &str, text: &str| {
            let path = block.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        for (name, text) in [
            ("read_ahead_kb", "128\n"),
            ("nr_requests", "64\n"),
            ("rotational", "1\n"),
            ("max_sectors_kb", "512\n"),
            ("logical_block_size", "512\n"),
            ("scheduler", "[mq-deadline] none\n"),
        ] {
            write(&format!("sda/queue/{name}"), text);
        }
        std::fs::create_dir_all(block.join("sda/mq/0")).unwrap();
        write("sda1/partition", "1\n");
        write("sda1/start", "2048\n");
        let root = SystemRoot::fixture(dir.path());
        let disks: Vec<DiskStat> = ["sda", "sda1"]
            .iter()
            .map(|name| DiskStat { name: name.to_string(), reads_completed: 1, ..Default::default() })
            .collect();
        let mut files = read::Files::one_shot();
        let mut cache = SettingsCache::default();
        let t0 = std::time::Instant::now();
        let first = cache.read_at(&root, &disks, &mut files, t0);
        let facts = |s: &[std::sync::Arc<BlockSettings>]| {
            s.iter()
                .map(|s| (s.read_ahead_kb, s.logical_block_size, s.hw_queues, s.is_partition, s.start_sector))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            facts(&first),
            [(Some(128), Some(512), Some(1), false, None), (Some(128), Some(512), Some(1), true, Some(2048))]
        );
        assert_eq!(first[0].scheduler.as_deref(), Some("mq-deadline"));

        // A tunable and a fixed fact changed: within SETTINGS_FRESH nothing is read, after it the
        // tunable is (the partition follows its disk), the fixed fact only after FIXED_FRESH.
        write("sda/queue/read_ahead_kb", "4096\n");
        write("sda/queue/logical_block_size", "4096\n");
        std::fs::create_dir_all(block.join("sda/mq/1")).unwrap();
        let soon = cache.read_at(&root, &disks, &mut files, t0 + SETTINGS_FRESH / 2);
        assert_eq!(soon[0].read_ahead_kb, Some(128));
        let later = cache.read_at(&root, &disks, &mut files, t0 + SETTINGS_FRESH);
        assert_eq!(
            facts(&later),
            [
                (Some(4096), Some(512), Some(1), false, None),
                (Some(4096), Some(512), Some(1), true, Some(2048))
            ]
        );
        let much_later = cache.read_at(&root, &disks, &mut files, t0 + FIXED_FRESH);
        assert_eq!(
            facts(&much_later),
            [
                (Some(4096), Some(4096), Some(2), false, None),
                (Some(4096), Some(4096), Some(2), true, Some(2048))
            ]
        );

        // Another device list is read whole at once.
        let mut fewer = disks.clone();
        fewer.pop();
        write("sda/queue/logical_block_size", "512\n");
        let changed = cache.read_at(&root, &fewer, &mut files, t0 + FIXED_FRESH + SETTINGS_FRESH / 2);
        assert_eq!(facts(&changed), [(Some(4096), Some(512), Some(2), false, None)]);

        // A device that never did I/O keeps its settings until the fixed facts are re-read; once
        // used, its tunables are re-read as any other's.
        let t1 = t0 + FIXED_FRESH + SETTINGS_FRESH;
        let mut unused = fewer.clone();
        unused[0].reads_completed = 0;
        let first = cache.read_at(&root, &unused, &mut files, t1);
        assert_eq!(first[0].read_ahead_kb, Some(4096));
        write("sda/queue/read_ahead_kb", "256\n");
        let later = cache.read_at(&root, &unused, &mut files, t1 + SETTINGS_FRESH);
        assert_eq!(later[0].read_ahead_kb, Some(4096));
        let used = cache.read_at(&root, &fewer, &mut files, t1 + SETTINGS_FRESH * 2);
        assert_eq!(used[0].read_ahead_kb, Some(256));
        write("sda/queue/read_ahead_kb", "512\n");
        let much_later = cache.read_at(&root, &unused, &mut files, t1 + FIXED_FRESH * 2);
        assert_eq!(much_later[0].read_ahead_kb, Some(512));

        // A disk without a medium (a detached loop device): only its size is read again until it
        // has one.
        let t2 = t1 + FIXED_FRESH * 3;
        write("sda/size", "0\n");
        assert_eq!(cache.read_at(&root, &fewer, &mut files, t2)[0].size_sectors, Some(0));
        write("sda/queue/read_ahead_kb", "1024\n");
        let empty = cache.read_at(&root, &fewer, &mut files, t2 + SETTINGS_FRESH);
        assert_eq!((empty[0].size_sectors, empty[0].read_ahead_kb), (Some(0), Some(512)));
        write("sda/size", "2048\n");
        let attached = cache.read_at(&root, &fewer, &mut files, t2 + SETTINGS_FRESH * 2);
        assert_eq!((attached[0].size_sectors, attached[0].read_ahead_kb), (Some(2048), Some(1024)));

        // A partition that never did I/O follows its disk's tunables as they are re-read.
        let t3 = t2 + FIXED_FRESH * 2;
        let mut both = disks.clone();
        both[1].reads_completed = 0;
        assert_eq!(cache.read_at(&root, &both, &mut files, t3)[1].read_ahead_kb, Some(1024));
        write("sda/queue/read_ahead_kb", "2048\n");
        let next = cache.read_at(&root, &both, &mut files, t3 + SETTINGS_FRESH);
        assert_eq!((next[0].read_ahead_kb, next[1].read_ahead_kb), (Some(2048), Some(2048)));
    }
}
