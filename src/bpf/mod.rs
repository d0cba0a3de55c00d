//! The eBPF side of collection: tracefs, loading the embedded object, attaching, reading maps.

use crate::sample::{BpfSample, BpfStatus};

/// Owns the loaded eBPF programs (when any) and reads their maps into the Sample.
pub struct BpfCollector {
    status: BpfStatus,
}

impl BpfCollector {
    /// Mounts tracefs if needed, loads the embedded object and attaches every program. Never fails:
    /// whatever cannot be done is described in the status (and the rest still works).
    pub fn start() -> BpfCollector {
        BpfCollector::disabled("eBPF support is not built yet")
    }

    /// eBPF off on purpose (`--no-bpf`) or impossible; `reason` is shown to the user.
    pub fn disabled(reason: &str) -> BpfCollector {
        BpfCollector {
            status: BpfStatus { enabled: false, reason: Some(reason.to_string()), programs: Vec::new() },
        }
    }

    /// The cumulative counters as of now.
    pub fn read(&mut self) -> BpfSample {
        BpfSample { status: self.status.clone(), ..Default::default() }
    }
}
