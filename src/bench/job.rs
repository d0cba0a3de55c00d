//! What every engine shares: the job ([`EngineJob`]), its result ([`EngineResult`]), the live
//! counters ([`Progress`]), the order blocks are visited in ([`Order`]) and the end of a job
//! ([`finish`]). The engines (`engine.rs`'s thread pool, `uring.rs`) import it; it imports neither.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::histogram::Histogram;
use super::spec::{Engine, Fsync, JobSpec};

/// Live counters a UI can poll while a job runs.
#[derive(Debug, Default)]
pub struct Progress {
    pub ops: AtomicU64,
    pub bytes: AtomicU64,
}

impl Progress {
    pub fn reset(&self) {
        self.ops.store(0, Ordering::Relaxed);
        self.bytes.store(0, Ordering::Relaxed);
    }
}

/// What one job needs besides its spec.
pub struct EngineJob<'a> {
    pub spec: JobSpec,
    /// io_uring or threads; mmap jobs always run on threads.
    pub engine: Engine,
    /// Bytes of the file to use, from offset 0.
    pub size: u64,
    pub runtime: Duration,
    /// Keep going over the file again until the runtime is up (fio's `time_based`).
    pub time_based: bool,
    pub fsync: Fsync,
    /// Buffer address alignment (O_DIRECT needs it; harmless otherwise). Offsets and lengths are
    /// multiples of the block size, which the runner checks against O_DIRECT's offset alignment.
    pub mem_align: u64,
    /// The buffers in transparent huge pages (see bench::buffers), else ordinary pages.
    pub huge_pages: bool,
    /// Set by Ctrl-C: the job stops within one request.
    pub stop: &'a AtomicBool,
    pub progress: &'a Progress,
    /// Seed of the random order (fixed, so runs are repeatable).
    pub seed: u64,
    /// Called just before the final fsync (the runner notes the dirty memory it will flush).
    pub before_final_fsync: &'a (dyn Fn() + Sync),
}

#[derive(Clone, Debug, Default)]
pub struct EngineResult {
    pub latency: Histogram,
    pub ops: u64,
    pub bytes: u64,
    /// From the first request to the end of the final fsync (what the user waits for).
    pub elapsed: Duration,
    /// Time in the final fsync (msync for mmap).
    pub final_fsync: Duration,
    /// Time in all the fsyncs of `every=N`, and their number.
    pub periodic_fsync: Duration,
    pub periodic_fsyncs: u64,
    /// CPU time (user + system) of the I/O threads: syscalls, copies, page-cache work.
    pub cpu: Duration,
    /// Bytes of the I/O buffers, and how many of them were in huge pages (None: not known).
    pub buffer_bytes: u64,
    pub buffer_huge_bytes: Option<u64>,
    pub interrupted: bool,
}

/// The order blocks are visited in a random job: a shuffled permutation (each block once), as fio
/// does by default. Over 64 M blocks that would cost too much memory, so blocks are then drawn with
/// replacement (fio's `norandommap`).
pub(super) enum Order {
    Sequential,
    Shuffled(Vec<u32>),
    Drawn(u64),
}

const MAX_PERMUTATION: u64 = 64 << 20;

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

impl Order {
    pub(super) fn new(random: bool, blocks: u64, seed: u64) -> Order {
        if !random {
            return Order::Sequential;
        }
        if blocks > MAX_PERMUTATION {
            return Order::Drawn(seed | 1);
        }
        let mut v: Vec<u32> = (0..blocks as u32).collect();
        let mut x = seed | 1;
        for i in (1..v.len()).rev() {
            let j = (xorshift(&mut x) % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
        Order::Shuffled(v)
    }

    /// The block of the `n`-th request.
    pub(super) fn block(&self, n: u64, blocks: u64) -> u64 {
        match self {
            Order::Sequential => n,
            Order::Shuffled(v) => v[n as usize] as u64,
            Order::Drawn(seed) => {
                let mut x = seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
                xorshift(&mut x);
                xorshift(&mut x) % blocks
            }
        }
    }
}

/// The end of a job, the same for every engine: the final fsync of a write job (its time counts in
/// the job's elapsed time, as with fio's `end_fsync=1`), then the elapsed time from `start`.
pub(super) fn finish(
    job: &EngineJob,
    out: &mut EngineResult,
    start: Instant,
    sync: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    out.ops = out.latency.count();
    out.bytes = out.ops * job.spec.bs;
    out.interrupted = job.stop.load(Ordering::Relaxed);
    if job.spec.rw.is_write() && job.fsync != Fsync::None && !out.interrupted {
        (job.before_final_fsync)();
        let t = Instant::now();
        sync()?;
        out.final_fsync = t.elapsed();
    }
    out.elapsed = start.elapsed();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffled_order_visits_every_block_once() {
        let o = Order::new(true, 1000, 42);
        let mut seen: Vec<u64> = (0..1000).map(|n| o.block(n, 1000)).collect();
        assert_ne!(seen[..10], (0..10).collect::<Vec<u64>>()[..], "not shuffled");
        seen.sort_unstable();
        assert_eq!(seen, (0..1000).collect::<Vec<u64>>());
        let d = Order::Drawn(7);
        assert!((0..1000).all(|n| d.block(n, 10) < 10));
    }
}
