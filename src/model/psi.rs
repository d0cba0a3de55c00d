//! Pressure stall information from /proc/pressure/{io,memory}.

use serde::Serialize;

use super::counter::delta;
use crate::sample::{PsiResource, Sample};

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

pub fn compute(prev: Option<&Sample>, cur: &Sample, _secs: f64) -> PsiModel {
    PsiModel {
        io: cur.psi.io.as_ref().map(|c| view(prev.and_then(|p| p.psi.io.as_ref()), c)),
        memory: cur.psi.memory.as_ref().map(|c| view(prev.and_then(|p| p.psi.memory.as_ref()), c)),
    }
}

/// avg10 is the kernel's own running average; the stall in this interval is
/// `Δtotal_us / 1000` ms (0 on the first sample or when the previous sample lacked the line).
pub(crate) fn view(prev: Option<&PsiResource>, cur: &PsiResource) -> PsiView {
    let stall_ms = |p: Option<u64>, c: u64| p.map(|p| delta(p, c) as f64 / 1000.0).unwrap_or(0.0);
    PsiView {
        some_avg10: cur.some.avg10,
        full_avg10: cur.full.as_ref().map(|f| f.avg10),
        some_stall_ms: stall_ms(prev.map(|p| p.some.total_us), cur.some.total_us),
        full_stall_ms: cur
            .full
            .as_ref()
            .map(|f| stall_ms(prev.and_then(|p| p.full.as_ref()).map(|p| p.total_us), f.total_us)),
    }
}
