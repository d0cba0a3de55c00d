//! The sampling clock: when a mode takes its next Sample (src/README.md, "One stream of Models").
//!
//! Deadlines are fixed multiples of the interval from an anchor, so the time spent sampling does
//! not push each sample later than the last (no drift). When a sample (or anything else) made the
//! loop miss deadlines, those are skipped, not fired back to back, and counted. A new interval
//! counts from the last deadline taken. The clock only computes instants from the `now` it is
//! given: each mode waits in its own way (a channel, a stop flag, a sleep), and tests drive it
//! with made-up instants.

use std::time::{Duration, Instant};

/// Deadlines `first`, `first + interval`, `first + 2 × interval`, …
#[derive(Clone, Debug)]
pub struct Clock {
    first: Instant,
    interval: Duration,
    /// The next deadline's index from `first`.
    k: u32,
    /// The deadline of the last sample taken ([`Clock::tick`]).
    last: Instant,
    /// The next deadline is due at once (a new interval shorter than the time since the last
    /// deadline): it is not late however long the loop takes to get to it.
    at_once: bool,
    skipped: u64,
}

impl Clock {
    /// A clock whose first sample was taken at `start`: the next is due at `start + interval`.
    pub fn new(start: Instant, interval: Duration) -> Clock {
        let interval = interval.max(Duration::from_nanos(1));
        Clock { first: start + interval, interval, k: 0, last: start, at_once: false, skipped: 0 }
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Deadlines passed without a sample (the loop was late by a whole interval or more), since
    /// the clock started.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The next sample's deadline, asked at `now`: the next on the grid or, when that has already
    /// passed, the first one still ahead (the ones passed are skipped and counted). Asking again
    /// before [`Clock::tick`] gives the same deadline (or a later one, if it has passed since).
    pub fn next(&mut self, now: Instant) -> Instant {
        let due = self.deadline();
        if due < now && !self.at_once {
            let behind = (now - self.first).as_nanos();
            let step = self.interval.as_nanos();
            let ahead = u32::try_from(behind.div_ceil(step)).unwrap_or(u32::MAX);
            self.skipped += u64::from(ahead - self.k);
            self.k = ahead;
        }
        self.deadline()
    }

    /// The deadline [`Clock::next`] gave was reached: a sample is being taken for it.
    pub fn tick(&mut self) {
        self.last = self.deadline();
        self.k = self.k.saturating_add(1);
        self.at_once = false;
    }

    /// A new interval (the TUI's +/- keys), asked at `now`: the next deadline is the last
    /// sample's deadline plus `interval` (at once if that has passed: not a late sample), and
    /// every `interval` from there.
    pub fn set_interval(&mut self, interval: Duration, now: Instant) {
        self.interval = interval.max(Duration::from_nanos(1));
        self.first = (self.last + self.interval).max(now);
        self.at_once = self.first == now;
        self.k = 0;
    }

    fn deadline(&self) -> Instant {
        self.first + self.interval * self.k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A made-up monotonic clock: a loop that samples for `cost` then waits for the deadline.
    struct FakeTime {
        now: Instant,
    }

    impl FakeTime {
        fn sample(&mut self, cost: Duration) {
            self.now += cost;
        }
        fn wait_until(&mut self, deadline: Instant) {
            self.now = self.now.max(deadline);
        }
    }

    #[test]
    fn deadlines_do_not_drift_over_many_ticks() {
        let mut time = FakeTime { now: Instant::now() };
        let start = time.now;
        let mut clock = Clock::new(start, 100 * MS);
        // Every sample costs 7 ms: a sleep of the interval after each would end 7 × 1000 ms late.
        for n in 1..=1000u32 {
            time.sample(7 * MS);
            let deadline = clock.next(time.now);
            assert_eq!(deadline, start + 100 * MS * n);
            time.wait_until(deadline);
            clock.tick();
        }
        assert_eq!(time.now, start + 100 * MS * 1000);
        assert_eq!(clock.skipped(), 0);
    }

    #[test]
    fn a_late_tick_is_skipped_and_counted() {
        let start = Instant::now();
        let mut clock = Clock::new(start, 100 * MS);
        assert_eq!(clock.next(start + 10 * MS), start + 100 * MS);
        clock.tick();
        // The sample for 100 ms took until 350 ms: 200 and 300 passed, 400 is next.
        assert_eq!(clock.next(start + 350 * MS), start + 400 * MS);
        assert_eq!(clock.skipped(), 2);
        // Asked again: the same deadline, nothing counted twice.
        assert_eq!(clock.next(start + 360 * MS), start + 400 * MS);
        assert_eq!(clock.skipped(), 2);
        clock.tick();
        // Back on the grid.
        assert_eq!(clock.next(start + 420 * MS), start + 500 * MS);
        assert_eq!(clock.skipped(), 2);
        // Exactly on a deadline is not late.
        clock.tick();
        assert_eq!(clock.next(start + 600 * MS), start + 600 * MS);
        assert_eq!(clock.skipped(), 2);
    }

    #[test]
    fn an_interval_change_takes_effect_at_the_next_deadline() {
        let start = Instant::now();
        let mut clock = Clock::new(start, 1000 * MS);
        assert_eq!(clock.next(start), start + 1000 * MS);
        clock.tick();
        // While waiting for 2000 ms, at 1200 ms, the interval becomes 500 ms: the next deadline
        // is the last one (1000) plus 500, then every 500.
        assert_eq!(clock.next(start + 1200 * MS), start + 2000 * MS);
        clock.set_interval(500 * MS, start + 1200 * MS);
        assert_eq!(clock.interval(), 500 * MS);
        assert_eq!(clock.next(start + 1200 * MS), start + 1500 * MS);
        clock.tick();
        assert_eq!(clock.next(start + 1510 * MS), start + 2000 * MS);
        clock.tick();
        // Longer: from the last deadline (2000) plus 3000.
        clock.set_interval(3000 * MS, start + 2100 * MS);
        assert_eq!(clock.next(start + 2100 * MS), start + 5000 * MS);
        clock.tick();
        // Shorter than the time already waited (at 7500, 5000 + 1000 has passed): at once, and
        // not counted as late.
        clock.set_interval(1000 * MS, start + 7500 * MS);
        assert_eq!(clock.next(start + 7500 * MS), start + 7500 * MS);
        // Asked a moment later (the loop got there late): still that one, not late either.
        assert_eq!(clock.next(start + 7501 * MS), start + 7500 * MS);
        clock.tick();
        assert_eq!(clock.next(start + 7600 * MS), start + 8500 * MS);
        assert_eq!(clock.skipped(), 0);
    }
}
