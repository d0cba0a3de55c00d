//! The `block:block_rq_issue` probe's userspace half: the record layout it needs from tracefs and
//! the per-CPU sums it produces.

use anyhow::{Context, Result};
use aya::maps::{MapData, PerCpuHashMap};
use ioscope_common::{kernel_dev_major_minor, RqIssueCounters, RqIssueLayout, RWBS_PREFIX_LEN};

use super::tracefs::EventFormat;
use crate::sample::BpfDeviceCounters;

/// The program's function name in the object (ebpf/probes/src/block_rq_issue.rs).
pub const PROGRAM: &str = "block_rq_issue";
pub const CATEGORY: &str = "block";
pub const EVENT: &str = "block_rq_issue";

/// The map as userspace sees it: kernel dev_t → one counter set per possible CPU.
pub type RqIssueMap = PerCpuHashMap<MapData, u32, RqIssueCounters>;

/// The offsets the program needs, checked against the sizes it reads: `dev_t dev` and
/// `unsigned int bytes` as 4-byte loads, and at least the first two bytes of `rwbs`.
pub fn layout(format: &EventFormat) -> Result<RqIssueLayout> {
    let dev = format.field_sized("dev", 4)?;
    let bytes = format.field_sized("bytes", 4)?;
    let rwbs = format.field("rwbs")?;
    if (rwbs.size as usize) < RWBS_PREFIX_LEN {
        anyhow::bail!("tracepoint {} field `rwbs` is only {} bytes", format.name, rwbs.size);
    }
    Ok(RqIssueLayout {
        configured: 1,
        dev_offset: dev.offset,
        bytes_offset: bytes.offset,
        rwbs_offset: rwbs.offset,
    })
}

/// Adds up one device's per-CPU counters (each CPU counts only what it issued).
pub fn sum_cpus(dev: u32, per_cpu: &[RqIssueCounters]) -> BpfDeviceCounters {
    let (major, minor) = kernel_dev_major_minor(dev);
    let mut total = BpfDeviceCounters { major, minor, ..Default::default() };
    for c in per_cpu {
        total.read_requests += c.read_requests;
        total.read_bytes += c.read_bytes;
        total.write_requests += c.write_requests;
        total.write_bytes += c.write_bytes;
        total.other_requests += c.other_requests;
        total.other_bytes += c.other_bytes;
    }
    total
}

/// Every device in the map, summed over CPUs, sorted by (major, minor).
pub fn read_map(map: &RqIssueMap) -> Result<Vec<BpfDeviceCounters>> {
    let mut devices = Vec::new();
    for entry in map.iter() {
        let (dev, per_cpu) = entry.context("reading the RQ_ISSUE map")?;
        devices.push(sum_cpus(dev, &per_cpu));
    }
    devices.sort_by_key(|d| (d.major, d.minor));
    Ok(devices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::tracefs::parse_format;

    fn format(name: &str) -> EventFormat {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tracefs").join(name);
        parse_format(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn layout_comes_from_the_format_file() {
        let l = layout(&format("block_rq_issue-6.18.format")).unwrap();
        assert_eq!(l, RqIssueLayout { configured: 1, dev_offset: 8, bytes_offset: 28, rwbs_offset: 34 });
        let old = layout(&format("block_rq_issue-5.4.format")).unwrap();
        assert_eq!(old.rwbs_offset, 32);
    }

    #[test]
    fn layout_fails_on_an_event_without_bytes() {
        let err = layout(&format("block_rq_complete-6.18.format")).unwrap_err().to_string();
        assert!(err.contains("has no field `bytes`"), "{err}");
    }

    #[test]
    fn sums_cpus_and_splits_dev_t() {
        let cpu0 = RqIssueCounters {
            read_requests: 3,
            read_bytes: 12288,
            write_requests: 1,
            write_bytes: 65536,
            other_requests: 0,
            other_bytes: 0,
        };
        let cpu1 = RqIssueCounters {
            read_requests: 2,
            read_bytes: 8192,
            write_requests: 0,
            write_bytes: 0,
            other_requests: 1,
            other_bytes: 0,
        };
        let d = sum_cpus((7 << 20) | 12, &[cpu0, cpu1, RqIssueCounters::default()]);
        assert_eq!(
            d,
            BpfDeviceCounters {
                major: 7,
                minor: 12,
                read_requests: 5,
                read_bytes: 20480,
                write_requests: 1,
                write_bytes: 65536,
                other_requests: 1,
                other_bytes: 0,
            }
        );
    }
}
