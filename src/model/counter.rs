//! Deltas of cumulative kernel counters.

/// The increase of a cumulative counter between two samples.
///
/// A counter that went backwards either wrapped or was reset. Some /proc/diskstats fields are 32-bit
/// even on 64-bit kernels (the `_ms` fields are printed as `unsigned int`) and all are on 32-bit
/// kernels, so a wrap at 2^32 is real; it is accepted when the distance through the wrap is less
/// than half the 32-bit range (2^31: 24 days of busy milliseconds in one interval). Anything else is
/// a reset (device re-created, counter cleared) and yields 0, never a huge bogus number.
pub fn delta(prev: u64, cur: u64) -> u64 {
    if cur >= prev {
        return cur - prev;
    }
    const WRAP: u64 = 1 << 32;
    if prev < WRAP {
        let through_wrap = WRAP - prev + cur;
        if through_wrap < WRAP / 2 {
            return through_wrap;
        }
    }
    0
}

/// True when `cur < prev` is not explained by a plausible 32-bit wrap: the thing was reset.
pub fn was_reset(prev: u64, cur: u64) -> bool {
    cur < prev && delta(prev, cur) == 0
}

/// Per-second rate of a counter delta; 0 when no time passed.
pub fn rate(prev: u64, cur: u64, secs: f64) -> f64 {
    per_second(delta(prev, cur), secs)
}

/// `count / secs`, or 0 when no time passed.
pub fn per_second(count: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        count as f64 / secs
    } else {
        0.0
    }
}

/// `numerator / count`, or 0 when the count is 0 (iostat's convention for averages over no I/O).
pub fn per_event(numerator: u64, count: u64) -> f64 {
    if count > 0 {
        numerator as f64 / count as f64
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forward_is_plain_difference() {
        assert_eq!(delta(100, 250), 150);
        assert_eq!(delta(7, 7), 0);
    }

    #[test]
    fn near_the_top_of_32_bits_is_a_wrap() {
        // 4294967290 → 10: 6 steps to 2^32, then 10 more.
        assert_eq!(delta(4_294_967_290, 10), 16);
        assert!(!was_reset(4_294_967_290, 10));
    }

    #[test]
    fn implausible_wrap_or_64_bit_decrease_is_a_reset() {
        // A re-created loop device: 1000 → 5 would be a 4.29e9 "wrap": it is a reset.
        assert_eq!(delta(1000, 5), 0);
        assert!(was_reset(1000, 5));
        // A value above 32 bits cannot have wrapped at 32 bits.
        assert_eq!(delta(1 << 40, 3), 0);
    }

    #[test]
    fn rates_need_time() {
        assert_eq!(rate(0, 10, 2.0), 5.0);
        assert_eq!(rate(0, 10, 0.0), 0.0);
        assert_eq!(per_event(30, 0), 0.0);
        assert_eq!(per_event(30, 4), 7.5);
    }
}
