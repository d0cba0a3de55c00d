//! Pressure stall information from /proc/pressure/{io,memory}.

use serde::Serialize;

use crate::sample::Sample;

/// JSON: `psi.io`, `psi.memory` (null when the kernel has no PSI: absent is said, never shown as 0).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PsiModel {
    pub io: Option<PsiView>,
    pub memory: Option<PsiView>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PsiView {
    /// Percent of the last 10 s in which some task stalled on this resource.
    pub some_avg10: f64,
    /// Percent of the last 10 s in which all non-idle tasks stalled (None where the kernel has no
    /// "full" line).
    pub full_avg10: Option<f64>,
    /// Stall time within this interval, milliseconds (from the cumulative `total=` counters).
    pub some_stall_ms: f64,
    pub full_stall_ms: Option<f64>,
}

pub fn compute(_prev: Option<&Sample>, _cur: &Sample, _secs: f64) -> PsiModel {
    PsiModel::default()
}
