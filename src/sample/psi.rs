//! Pressure stall information (/proc/pressure/*).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Psi {
    /// None when /proc/pressure/io is absent (kernel without PSI, or psi=0).
    pub io: Option<PsiResource>,
    pub memory: Option<PsiResource>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PsiResource {
    pub some: PsiLine,
    pub full: Option<PsiLine>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PsiLine {
    pub avg10: f64,
    pub avg60: f64,
    pub avg300: f64,
    /// Cumulative stall time, microseconds.
    pub total_us: u64,
}
