//! The eBPF side of a Model: whether eBPF is on and why not, each program's status, the block
//! probes' health, the eBPF-fed panes' liveness and the maps' memory.

use serde::Serialize;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BpfModel {
    pub enabled: bool,
    pub reason: Option<String>,
    pub programs: std::sync::Arc<Vec<crate::sample::BpfProgramStatus>>,
    /// The block probes' health over the interval; null without them.
    pub block_health: Option<super::block_health::BlockHealthModel>,
    /// Per eBPF-fed pane: live, or what is missing and why (src/model/panes.rs).
    pub panes: std::sync::Arc<Vec<super::panes::PaneStatus>>,
    /// The eBPF maps' kernel memory, bytes: all of them, and each map's (largest first; empty
    /// when eBPF is off). See src/bpf/map_memory.rs.
    pub maps_bytes: u64,
    pub maps: std::sync::Arc<Vec<crate::sample::BpfMapMemory>>,
}
