//! Devices pane: sysstat's `iostat -x` formulas over two /proc/diskstats samples.

use serde::Serialize;

use crate::sample::{BlockSettings, Sample};

/// One block device. Field names follow iostat -x. JSON: `devices[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DeviceModel {
    pub name: String,
    pub major: u32,
    pub minor: u32,
    pub is_partition: bool,
    /// loop*, ram*, zram* and the like: hidden by default when idle.
    pub is_virtual: bool,
    /// True when the device did no I/O in this interval.
    pub idle: bool,
    pub r_s: f64,
    pub w_s: f64,
    pub rkb_s: f64,
    pub wkb_s: f64,
    pub rrqm_s: f64,
    pub wrqm_s: f64,
    /// Average read request size, kB.
    pub rareq_sz: f64,
    pub wareq_sz: f64,
    /// Average read latency including queueing, ms.
    pub r_await: f64,
    pub w_await: f64,
    pub aqu_sz: f64,
    /// Percent of the interval with at least one request in flight.
    pub util: f64,
    pub in_flight: u64,
    /// Discards (None where the kernel does not report them).
    pub d_s: Option<f64>,
    pub dkb_s: Option<f64>,
    pub d_await: Option<f64>,
    /// Flushes (None where the kernel does not report them).
    pub f_s: Option<f64>,
    pub f_await: Option<f64>,
    pub settings: Option<BlockSettings>,
    /// What the eBPF `block_rq_issue` probe counted for this device, when eBPF is on.
    pub bpf: Option<BpfDeviceRates>,
}

/// Rates from the block_rq_issue probe. JSON: `devices[].bpf`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BpfDeviceRates {
    pub read_iops: f64,
    pub write_iops: f64,
    pub read_bytes_s: f64,
    pub write_bytes_s: f64,
    pub other_iops: f64,
}

pub fn compute(_prev: Option<&Sample>, _cur: &Sample, _secs: f64) -> Vec<DeviceModel> {
    Vec::new()
}
