//! `kernel.bpf_stats_enabled`: while it is 1 the kernel times every run of every BPF program
//! (two clock reads a run) and ioscope reads each program's counters every sample, so a figure
//! taken then is not the one users get. The benchmarks measure with it off ([`BpfStats::off`]),
//! whatever an earlier session or tool left it at, and turn it on only where they want the
//! kernel's per-program timing ([`BpfStats::on`]); the value found is restored on drop.

use anyhow::{Context, Result};

const PATH: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// The setting held for the guard's life; the previous value is restored on drop, however the
/// benchmark ends.
pub struct BpfStats(String);

impl BpfStats {
    fn set(value: &str) -> Result<BpfStats> {
        let old = std::fs::read_to_string(PATH).with_context(|| format!("reading {PATH}"))?;
        let old = old.trim().to_string();
        if old != value {
            std::fs::write(PATH, value).with_context(|| format!("writing {PATH}"))?;
        }
        Ok(BpfStats(old))
    }

    /// The kernel's per-program timing on.
    pub fn on() -> Result<BpfStats> {
        BpfStats::set("1")
    }

    /// The kernel's per-program timing off, as on users' machines; says so when it was on, and
    /// when it cannot be turned off (not root: the benchmark then says what it needs itself).
    pub fn off() -> BpfStats {
        match BpfStats::set("0") {
            Ok(guard) => {
                if guard.0 != "0" {
                    eprintln!(
                        "kernel.bpf_stats_enabled was {}: 0 for the measurement, restored after it",
                        guard.0
                    );
                }
                guard
            }
            Err(e) => {
                eprintln!("kernel.bpf_stats_enabled left as it is: {e:#}");
                BpfStats(std::fs::read_to_string(PATH).unwrap_or_default().trim().to_string())
            }
        }
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        let now = std::fs::read_to_string(PATH).unwrap_or_default();
        if now.trim() != self.0 {
            if let Err(e) = std::fs::write(PATH, &self.0) {
                eprintln!("could not restore {PATH} to {}: {e}", self.0);
            }
        }
    }
}
