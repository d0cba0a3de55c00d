//! Deltas of cumulative kernel counters.

/// The increase of a cumulative counter between two samples. A counter that went backwards (wrapped
/// at 32 bits, as some /proc/diskstats fields do on 32-bit kernels, or was reset because the device
/// was re-created) is treated as reset: the new value is the delta when it is plausible for a 32-bit
/// wrap, else 0, never a huge bogus number.
pub fn delta(prev: u64, cur: u64) -> u64 {
    if cur >= prev {
        cur - prev
    } else if prev <= u32::MAX as u64 {
        // 32-bit wrap: count the distance through the wrap.
        (u32::MAX as u64 - prev) + cur + 1
    } else {
        0
    }
}

/// Per-second rate of a counter delta; 0 when no time passed.
pub fn rate(prev: u64, cur: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        delta(prev, cur) as f64 / secs
    } else {
        0.0
    }
}
