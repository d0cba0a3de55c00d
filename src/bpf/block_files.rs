//! The kernel half of block-to-file mapping (ebpf/probes/src/block_files.rs): the rate limit
//! handed to `block_rq_complete`, draining the ring buffer of completed requests, and the
//! counts of requests sent and not sent. Mapping them to files is src/bpf/resolve/block_files.rs.

use anyhow::{anyhow, Context, Result};
use aya::maps::{MapData, PerCpuArray, RingBuf};
use aya::Ebpf;
use ioscope_common::block_files::{
    RqBucket, RqEvent, RqSampleConfig, BLOCK_RQ_BUCKET_MAP, BLOCK_RQ_RING_MAP,
};

/// Most requests per second sent to userspace, all CPUs together: mapping is a sample of the
/// requests above this rate (the probe-health view shows how many were not sent).
pub const RATE_LIMIT_S: u64 = 4000;
/// Requests one CPU may send at once after a quiet spell.
pub const BURST: u64 = 512;

/// The configuration for this machine's CPUs.
pub fn config() -> RqSampleConfig {
    let cpus = aya::util::nr_cpus().map(|n| n as u64).unwrap_or(1);
    RqSampleConfig::new(RATE_LIMIT_S, cpus, BURST)
}

/// Requests sent and not sent, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingCounts {
    pub emitted: u64,
    pub rate_dropped: u64,
    pub ring_dropped: u64,
}

/// The programs that send completed requests to the ring (classic, BTF), one beside each kind of
/// block program and on the same event as `block_rq_complete`, attached before it: a tracepoint
/// runs its programs in the order they were attached, so the request's slot still holds its
/// submitter when they run (ebpf/probes/src/block_files.rs says why they are programs of their own).
pub const RING_PROGRAMS: (&str, &str) = ("block_rq_files", "block_rq_files_btf");

pub struct RequestRing {
    ring: RingBuf<MapData>,
    buckets: PerCpuArray<MapData, RqBucket>,
}

impl RequestRing {
    pub fn take(ebpf: &mut Ebpf) -> Result<RequestRing> {
        let ring = ebpf
            .take_map(BLOCK_RQ_RING_MAP)
            .ok_or_else(|| anyhow!("map {BLOCK_RQ_RING_MAP} is not in the eBPF object"))?;
        let buckets = ebpf
            .take_map(BLOCK_RQ_BUCKET_MAP)
            .ok_or_else(|| anyhow!("map {BLOCK_RQ_BUCKET_MAP} is not in the eBPF object"))?;
        Ok(RequestRing {
            ring: RingBuf::try_from(ring).context("map BLOCK_RQ_RING")?,
            buckets: PerCpuArray::try_from(buckets).context("map BLOCK_RQ_BUCKET")?,
        })
    }

    /// Every request waiting in the ring, oldest first.
    pub fn drain(&mut self) -> Vec<RqEvent> {
        let mut out = Vec::new();
        while let Some(item) = self.ring.next() {
            if item.len() >= std::mem::size_of::<RqEvent>() {
                // SAFETY: RqEvent is plain old data and the item holds at least its size; the read
                // is unaligned-safe.
                out.push(unsafe { std::ptr::read_unaligned(item.as_ptr().cast::<RqEvent>()) });
            }
        }
        out
    }

    pub fn counts(&self) -> Result<RingCounts> {
        let per_cpu = self.buckets.get(&0, 0).context("reading BLOCK_RQ_BUCKET")?;
        Ok(per_cpu.iter().fold(RingCounts::default(), |a, b| RingCounts {
            emitted: a.emitted + b.emitted,
            rate_dropped: a.rate_dropped + b.rate_dropped,
            ring_dropped: a.ring_dropped + b.ring_dropped,
        }))
    }
}
