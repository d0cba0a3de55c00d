//! A latency histogram with bounded memory and bounded relative error, so a job can record every
//! request (millions of them) and still report p50/p99/p99.9 exactly enough to compare with fio.
//!
//! Log-linear buckets: values below 2·SUB nanoseconds have a bucket each; above, each power of two
//! is split into SUB equal buckets. With SUB = 64 a bucket is at most 1/64 (1.6 %) of its value
//! wide, and the reported value (the bucket's middle) is within 0.8 % of every value in it.

const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// Enough buckets for any u64 nanosecond value.
const BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * SUB as usize;

#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
    sum: u128,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: vec![0; BUCKETS], total: 0, max: 0, sum: 0 }
    }
}

fn bucket_of(v: u64) -> usize {
    if v < 2 * SUB {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros(); // ≥ SUB_BITS + 1
    let shift = msb - SUB_BITS;
    // (shift + 1) groups of SUB below this power of two, then the top SUB_BITS bits below the msb.
    ((shift as u64 + 1) * SUB + ((v >> shift) - SUB)) as usize
}

/// The range [low, high) of values that land in bucket `b`.
fn bucket_range(b: usize) -> (u64, u64) {
    let b = b as u64;
    if b < 2 * SUB {
        return (b, b + 1);
    }
    let shift = b / SUB - 1;
    let low = (SUB + b % SUB) << shift;
    (low, low.saturating_add(1 << shift))
}

impl Histogram {
    pub fn record(&mut self, ns: u64) {
        self.counts[bucket_of(ns)] += 1;
        self.total += 1;
        self.max = self.max.max(ns);
        self.sum += ns as u128;
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    pub fn max_ns(&self) -> u64 {
        self.max
    }

    pub fn mean_ns(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }

    /// The value at or below which `pct` percent of the recorded values lie (the nearest-rank
    /// method: the ⌈pct/100 × n⌉-th smallest value), as the middle of its bucket, never above max.
    pub fn percentile_ns(&self, pct: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((pct / 100.0 * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (low, high) = bucket_range(b);
                return (low + (high - low - 1) / 2).min(self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_number_line() {
        let mut expected_low = 0;
        for b in 0..BUCKETS - 1 {
            let (low, high) = bucket_range(b);
            assert_eq!(low, expected_low, "bucket {b}");
            assert!(high > low);
            assert_eq!(bucket_of(low), b);
            assert_eq!(bucket_of(high - 1), b);
            expected_low = high;
            if high > 1 << 62 {
                break;
            }
        }
        assert!(bucket_of(u64::MAX) < BUCKETS);
    }

    #[test]
    fn relative_error_is_below_one_percent() {
        for v in [130u64, 1_000, 12_345, 999_999, 4_200_000_000] {
            let (low, high) = bucket_range(bucket_of(v));
            let mid = low + (high - low - 1) / 2;
            let err = (mid as f64 - v as f64).abs() / v as f64;
            assert!(err < 0.008, "{v}: mid {mid} err {err}");
        }
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let mut h = Histogram::default();
        // 1..=100 µs: p50 is the 50th value (50 µs), p99 the 99th, max 100 µs.
        for us in 1..=100u64 {
            h.record(us * 1000);
        }
        let near = |got: u64, want: u64| (got as f64 - want as f64).abs() / (want as f64) < 0.01;
        assert!(near(h.percentile_ns(50.0), 50_000), "{}", h.percentile_ns(50.0));
        assert!(near(h.percentile_ns(99.0), 99_000));
        assert!(near(h.percentile_ns(99.9), 100_000));
        assert_eq!(h.max_ns(), 100_000);
        assert_eq!(h.count(), 100);
        assert!((h.mean_ns() - 50_500.0).abs() < 1e-6);
        // Small values are exact.
        let mut s = Histogram::default();
        s.record(7);
        s.record(9);
        assert_eq!(s.percentile_ns(50.0), 7);
        let mut m = Histogram::default();
        m.merge(&s);
        m.merge(&h);
        assert_eq!((m.count(), m.max_ns()), (102, 100_000));
        assert_eq!(Histogram::default().percentile_ns(99.0), 0);
    }
}
