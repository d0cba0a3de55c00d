//! /proc/diskstats and the block queue settings (/sys/block/NAME/queue).

use serde::{Deserialize, Serialize};

/// One line of /proc/diskstats (Documentation/admin-guide/iostats.rst). Time fields are ms.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DiskStat {
    pub major: u32,
    pub minor: u32,
    pub name: String,
    pub reads_completed: u64,
    pub reads_merged: u64,
    pub sectors_read: u64,
    pub read_ms: u64,
    pub writes_completed: u64,
    pub writes_merged: u64,
    pub sectors_written: u64,
    pub write_ms: u64,
    /// A gauge: requests in flight right now.
    pub in_flight: u64,
    pub io_ms: u64,
    pub weighted_io_ms: u64,
    /// Kernel 4.18+; None when the line is shorter.
    pub discards: Option<DiscardStat>,
    /// Kernel 5.5+; None when the line is shorter.
    pub flushes: Option<FlushStat>,
}

impl DiskStat {
    /// Every counter and gauge zero: the device has done no I/O since it was created (a loop
    /// device never attached, an unconfigured zram). iostat leaves such devices out too.
    pub fn never_used(&self) -> bool {
        let d = self;
        [d.reads_completed, d.reads_merged, d.sectors_read, d.read_ms, d.writes_completed]
            .into_iter()
            .chain([d.writes_merged, d.sectors_written, d.write_ms, d.in_flight, d.io_ms, d.weighted_io_ms])
            .chain(d.discards.iter().flat_map(|x| [x.completed, x.merged, x.sectors, x.ms]))
            .chain(d.flushes.iter().flat_map(|x| [x.completed, x.ms]))
            .all(|n| n == 0)
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DiscardStat {
    pub completed: u64,
    pub merged: u64,
    pub sectors: u64,
    pub ms: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FlushStat {
    pub completed: u64,
    pub ms: u64,
}

/// /sys/class/block/NAME facts for one block device.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BlockSettings {
    pub name: String,
    /// True when /sys/class/block/NAME/partition exists.
    pub is_partition: bool,
    /// queue/read_ahead_kb (of the parent disk for a partition).
    pub read_ahead_kb: Option<u64>,
    /// The active scheduler, the bracketed word of queue/scheduler ("none", "mq-deadline", ...).
    pub scheduler: Option<String>,
    pub nr_requests: Option<u64>,
    pub rotational: Option<bool>,
    pub max_sectors_kb: Option<u64>,
    pub logical_block_size: Option<u64>,
    /// Partition start in 512-byte sectors (for partitions only).
    pub start_sector: Option<u64>,
    /// Number of hardware queues (entries of mq/); more than one means %util understates capacity.
    pub hw_queues: Option<u64>,
    /// The device's size in 512-byte sectors (/sys/class/block/NAME/size): 0 for a device
    /// without a medium (a detached loop device, an empty drive, an unconfigured zram).
    pub size_sectors: Option<u64>,
}
