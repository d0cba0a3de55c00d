//! The kernel half of block-to-file mapping (ebpf/probes/src/block_files.rs): the rate limit
//! handed to `block_rq_complete`, draining the ring buffer of completed requests, and the
//! counts of requests sent and not sent. Mapping them to files is src/bpf/resolve/block_files.rs.

use anyhow::{anyhow, Context, Result};
use aya::maps::{MapData, PerCpuArray, RingBuf};
use aya::Ebpf;
use ioscope_common::block_files::{
    RqBucket, RqEvent, RqSampleConfig, BLOCK_RQ_BUCKET_MAP, BLOCK_RQ_RING_MAP,
};

pub use super::resolve::block_files::{RingCounts, RATE_LIMIT_S};

/// Requests one CPU may send at once after a quiet spell.
pub const BURST: u64 = 512;

/// The configuration for this machine's CPUs.
pub fn config() -> RqSampleConfig {
    let cpus = aya::util::nr_cpus().map(|n| n as u64).unwrap_or(1);
    RqSampleConfig::new(RATE_LIMIT_S, cpus, BURST)
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

/// The block-to-file family: the completed requests the block family's `block_rq_complete`
/// companions send ([`RING_PROGRAMS`], attached by the block family), mapped to files through
/// their extents. It reads after the files family: their paths name the files mapped to.
#[derive(Default)]
pub struct BlockFilesFamily {
    config: Option<RqSampleConfig>,
    ring: Option<RequestRing>,
    mapper: super::resolve::block_files::BlockFileMapper,
}

impl BlockFilesFamily {
    /// The block requests mapped most recently (oldest first), for tests and debugging.
    pub fn recent(&self) -> Vec<super::resolve::block_files::MappedRequest> {
        self.mapper.recent().cloned().collect()
    }
}

impl super::family::Family for BlockFilesFamily {
    fn name(&self) -> &'static str {
        "block files"
    }

    fn plan(&mut self, _: &mut super::family::Setup) {}

    fn configure(&mut self, _: &mut super::family::Setup) {
        self.config = Some(config());
    }

    fn globals<'s>(&'s self, loader: &mut aya::EbpfLoader<'s>) {
        let config = self.config.as_ref().unwrap_or(&RqSampleConfig::UNSET);
        loader.override_global(ioscope_common::block_files::BLOCK_RQ_CONFIG_GLOBAL, config, true);
    }

    fn loads<'a>(
        &'a self,
        _: &super::family::Setup<'a>,
        _: &[super::preload::Planned<'a>],
    ) -> Vec<super::preload::Planned<'a>> {
        Vec::new()
    }

    fn attach(
        &mut self,
        ebpf: &mut Ebpf,
        _: &mut super::family::Setup,
        statuses: &mut Vec<crate::sample::BpfProgramStatus>,
    ) {
        match RequestRing::take(ebpf) {
            Ok(r) => self.ring = Some(r),
            Err(e) => {
                if let Some(p) = statuses.iter_mut().find(|p| p.program.starts_with("block_rq_complete")) {
                    p.error.get_or_insert_with(|| format!("no block-to-file mapping: {e:#}"));
                }
            }
        }
    }

    fn read(
        &mut self,
        shared: &mut super::family::Shared,
        sample: &mut crate::sample::BpfSample,
    ) -> Vec<String> {
        let Some(ring) = &mut self.ring else { return Vec::new() };
        let now = std::time::Instant::now();
        let events = ring.drain();
        let resolver = shared.get_or_insert_with(super::resolve::files::FileResolver::default);
        self.mapper.refresh(&sample.files, resolver.checked_meta(), |f| resolver.may_be_dirty(f), now);
        self.mapper.map(&events, now);
        match ring.counts() {
            Ok(counts) => {
                sample.block_files = Some(self.mapper.sample(counts));
                Vec::new()
            }
            Err(e) => vec![format!("{e:#}")],
        }
    }
}
