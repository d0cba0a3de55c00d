//! The type of a readahead fallback's table entry, shared by the 6.1+ table
//! (super::readahead_fn) and 5.10's (super::readahead_510), which each plan or check.

use super::kfunc;

/// A readahead tracepoint program and its fallback.
#[derive(Clone, Copy, Debug)]
pub struct RaFallback {
    /// The tracepoint program (src/bpf/readahead.rs PROBES) it stands in for.
    pub probe: &'static str,
    pub program: &'static str,
    /// Its kprobe variant (ebpf/probes/src/kprobe_fallbacks.rs), where fentry is refused.
    pub kprobes: Option<kfunc::Kprobes>,
    /// The functions it can attach to, best first.
    pub functions: &'static [&'static str],
    /// The function's second parameter is a count (not a pointer) the program reads.
    pub second_is_count: bool,
}
