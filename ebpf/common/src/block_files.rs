//! Completed block requests sent to userspace one by one, so userspace can map their sectors to
//! files through extent maps (src/bpf/resolve/block_files.rs). `block_rq_complete` calls in here; the
//! emission is rate-limited per CPU by a token bucket ([`admit`]) so its cost stays bounded at any
//! request rate, and every request it does not send is counted ([`RqBucket`]).

/// Ring buffer of [`RqEvent`]s.
pub const BLOCK_RQ_RING_MAP: &str = "BLOCK_RQ_RING";
/// Its size: a few seconds of events at the highest configured rate (40 bytes each).
pub const BLOCK_RQ_RING_BYTES: u32 = 1 << 20;
/// Per-CPU array of one [`RqBucket`].
pub const BLOCK_RQ_BUCKET_MAP: &str = "BLOCK_RQ_BUCKET";
/// Read-only global holding [`RqSampleConfig`], set by the loader before load.
pub const BLOCK_RQ_CONFIG_GLOBAL: &str = "BLOCK_RQ_CONFIG";

/// One completed request: where on which disk, how big, its `rwbs` flags
/// (ioscope_common::block::RwbsFlags bits) and, when block_io_start saw it, who submitted it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RqEvent {
    /// Kernel dev_t of the disk (requests are made of whole disks: sectors count from its start).
    pub dev: u32,
    /// Submitter's tgid, 0 when unknown.
    pub tgid: u32,
    pub sector: u64,
    pub nr_sectors: u32,
    pub rwbs: u32,
    /// Submitter's comm (all zero when unknown).
    pub comm: [u8; 16],
}

/// The token bucket's parameters. `enabled` 0 (the compiled-in value): nothing is sent.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RqSampleConfig {
    pub enabled: u32,
    pub _pad: u32,
    /// Nanoseconds of credit one event costs on a CPU (1e9 / that CPU's events per second).
    pub cost_ns: u64,
    /// Most credit a CPU can save up: bursts of burst_ns / cost_ns events pass at once.
    pub burst_ns: u64,
}

impl RqSampleConfig {
    pub const UNSET: RqSampleConfig = RqSampleConfig { enabled: 0, _pad: 0, cost_ns: 0, burst_ns: 0 };

    /// At most `per_second` events per second over all `cpus` CPUs, bursts of `burst` per CPU.
    pub fn new(per_second: u64, cpus: u64, burst: u64) -> RqSampleConfig {
        let cost_ns = 1_000_000_000 * cpus.max(1) / per_second.max(1);
        RqSampleConfig { enabled: 1, _pad: 0, cost_ns, burst_ns: cost_ns * burst.max(1) }
    }
}

/// Per CPU: the bucket's state and what became of the requests with data.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RqBucket {
    pub credit_ns: u64,
    pub last_ns: u64,
    /// Sent to the ring buffer.
    pub emitted: u64,
    /// Not sent: over the rate.
    pub rate_dropped: u64,
    /// Not sent: the ring buffer was full (userspace did not drain it in time).
    pub ring_dropped: u64,
    /// The completion this CPU's program saw last (its request's tag, 0 when it read no clock)
    /// and the time it read for it: `block_rq_complete`'s program runs next for the same
    /// request and takes this time instead of reading the clock again.
    pub clock_tag: u64,
    pub clock_ns: u64,
}

/// Whether one more event may be sent at `now_ns`: credit grows with time up to `burst_ns`, each
/// event spends `cost_ns`. The first call starts with a full bucket.
#[inline(always)]
pub fn admit(b: &mut RqBucket, now_ns: u64, cost_ns: u64, burst_ns: u64) -> bool {
    let earned = if b.last_ns == 0 { burst_ns } else { now_ns.saturating_sub(b.last_ns) };
    b.last_ns = now_ns;
    let credit = b.credit_ns.saturating_add(earned);
    let credit = if credit > burst_ns { burst_ns } else { credit };
    if credit >= cost_ns {
        b.credit_ns = credit - cost_ns;
        true
    } else {
        b.credit_ns = credit;
        false
    }
}

#[cfg(feature = "user")]
mod user {
    // SAFETY (all): #[repr(C)], u32/u64/u8-array fields without implicit padding (size test
    // below), every bit pattern valid.
    unsafe impl aya::Pod for super::RqEvent {}
    unsafe impl aya::Pod for super::RqSampleConfig {}
    unsafe impl aya::Pod for super::RqBucket {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_have_no_hidden_padding() {
        assert_eq!(core::mem::size_of::<RqEvent>(), 40);
        assert_eq!(core::mem::size_of::<RqSampleConfig>(), 24);
        assert_eq!(core::mem::size_of::<RqBucket>(), 56);
    }

    #[test]
    fn bucket_passes_a_burst_then_the_rate() {
        // 1000 events/s on one CPU, bursts of 4.
        let c = RqSampleConfig::new(1000, 1, 4);
        assert_eq!((c.cost_ns, c.burst_ns), (1_000_000, 4_000_000));
        let mut b = RqBucket::default();
        let t0 = 5_000_000_000;
        let passed = (0..10).filter(|_| admit(&mut b, t0, c.cost_ns, c.burst_ns)).count();
        assert_eq!(passed, 4);
        // 2.5 ms later: two more.
        let passed = (0..10).filter(|_| admit(&mut b, t0 + 2_500_000, c.cost_ns, c.burst_ns)).count();
        assert_eq!(passed, 2);
        // A long pause refills to the burst, not beyond.
        let passed = (0..10).filter(|_| admit(&mut b, t0 + 10_000_000_000, c.cost_ns, c.burst_ns)).count();
        assert_eq!(passed, 4);
        // Two CPUs sharing 1000/s: each may send 500/s.
        assert_eq!(RqSampleConfig::new(1000, 2, 4).cost_ns, 2_000_000);
    }
}
