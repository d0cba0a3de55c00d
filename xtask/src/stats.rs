//! The overhead benchmarks' statistics: on a shared machine single runs swing by more than the
//! effect measured, so a verdict comes with how sure it is. Each benchmark yields paired ratios
//! (a run with ioscope over the adjacent run without); their median is the estimate, and a
//! bootstrap of that median gives a 95 % interval. The verdict is PASS or FAIL only when the
//! whole interval is on one side of the target; otherwise the point estimate is reported as
//! inconclusive, and more pairs narrow the interval.

/// The median (sorts `v`); NaN for an empty slice.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// A 95 % percentile-bootstrap interval of the median of `samples` (2,000 resamples, a fixed
/// seed: the same runs always give the same interval).
pub fn median_interval(samples: &[f64]) -> (f64, f64) {
    const RESAMPLES: usize = 2000;
    if samples.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    // xorshift64*: plenty for resampling indices, and no dependency.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut medians = Vec::with_capacity(RESAMPLES);
    let mut resample = vec![0.0; samples.len()];
    for _ in 0..RESAMPLES {
        for r in resample.iter_mut() {
            *r = samples[(next() % samples.len() as u64) as usize];
        }
        medians.push(median(&mut resample));
    }
    medians.sort_by(f64::total_cmp);
    (medians[RESAMPLES * 25 / 1000], medians[RESAMPLES * 975 / 1000 - 1])
}

/// The verdict for "at least `target`" given the interval (lo, hi).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
    /// The interval straddles the target: the runs cannot tell.
    Inconclusive,
}

pub fn at_least(target: f64, (lo, hi): (f64, f64)) -> Verdict {
    if lo >= target {
        Verdict::Pass
    } else if hi < target {
        Verdict::Fail
    } else {
        Verdict::Inconclusive
    }
}

impl Verdict {
    /// The verdict with the point estimate's side of the target, for the report line.
    pub fn describe(self, estimate_meets_target: bool) -> &'static str {
        match (self, estimate_meets_target) {
            (Verdict::Pass, _) => "PASS",
            (Verdict::Fail, _) => "FAIL",
            (Verdict::Inconclusive, true) => {
                "inconclusive (the median meets the target; more pairs narrow the interval)"
            }
            (Verdict::Inconclusive, false) => {
                "inconclusive (the median misses the target; more pairs narrow the interval)"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&mut []).is_nan());
    }

    #[test]
    fn interval_is_narrow_for_steady_runs_and_wide_for_noisy_ones() {
        let steady = [0.98, 0.985, 0.99, 0.98, 0.99, 0.985, 0.98, 0.99];
        let (lo, hi) = median_interval(&steady);
        assert!(lo >= 0.98 && hi <= 0.99 && lo <= hi, "({lo}, {hi})");
        assert_eq!(at_least(0.97, (lo, hi)), Verdict::Pass);
        assert_eq!(at_least(0.995, (lo, hi)), Verdict::Fail);
        let noisy = [0.88, 1.07, 0.93, 1.02, 0.95, 1.11, 0.9, 0.99];
        let (lo, hi) = median_interval(&noisy);
        assert!(lo <= 0.93 && hi >= 1.02, "({lo}, {hi})");
        assert_eq!(at_least(0.97, (lo, hi)), Verdict::Inconclusive);
    }

    #[test]
    fn the_same_runs_give_the_same_interval() {
        let runs = [0.91, 0.97, 1.01, 0.95, 0.99];
        assert_eq!(median_interval(&runs), median_interval(&runs));
    }
}
