//! Block programs on kernels without BPF's compare-and-exchange (before Linux 5.12): the `_nocas`
//! twins of the classic programs (ebpf/probes/src/block_claim.rs), which claim table slots by a
//! map insert instead (ioscope_common::block_claim). Chosen at load time: the classic program is
//! loaded first, and when the verifier refuses its compare-and-exchange, it and every later block
//! program that claims slots are loaded as their twins (the first such program decides, so the
//! two ways of claiming never run side by side).

use aya::maps::{HashMap, MapData};
use aya::Ebpf;
use ioscope_common::block_claim::{proc_claim, BLOCK_SLOT_CLAIMS_MAP, NOCAS_SUFFIX};

/// The classic block programs that claim slots, each with a `_nocas` twin in the object.
const CLAIMING: [&str; 4] = ["block_io_start", "block_rq_insert", "block_rq_issue", "block_rq_complete"];

/// `BpfOptions::refuse_block_twin`'s value that makes ioscope treat the compare-and-exchange as
/// refused (tests of the twins on a kernel that has it).
pub const REFUSE_CAS: &str = "compare-and-exchange";

/// The status note when the twins are used.
pub const NOTE: &str = "block probes claim table slots by map insert (the kernel's BPF has no \
                        compare-and-exchange before Linux 5.12): the same figures";

/// The twin of classic program `program`, if it has one.
pub fn twin(program: &str) -> Option<String> {
    CLAIMING.contains(&program).then(|| format!("{program}{NOCAS_SUFFIX}"))
}

/// Whether a program's load error is the verifier refusing an atomic instruction it predates:
/// before 5.12 it calls any atomic other than a plain add "reserved fields" of BPF_STX (5.10's
/// wording) or of BPF_XADD.
pub fn refused_atomics(error: &str) -> bool {
    error.contains("BPF_STX uses reserved fields") || error.contains("BPF_XADD uses reserved fields")
}

/// The claims map, for freeing process slots when the twins run.
pub struct Claims(HashMap<MapData, u32, u64>);

impl Claims {
    /// The claims map, when the twins are attached (`attached`: the block programs' names).
    pub fn take(ebpf: &mut Ebpf, attached: &[Option<String>]) -> Option<Claims> {
        if !attached.iter().flatten().any(|p| p.ends_with(NOCAS_SUFFIX)) {
            return None;
        }
        let map = ebpf.take_map(BLOCK_SLOT_CLAIMS_MAP)?;
        HashMap::try_from(map).ok().map(Claims)
    }

    /// Frees process slot `i`'s claim (after its key was cleared): the slot can be claimed again.
    pub fn free_process_slot(&mut self, i: u32) {
        // Absent already is fine: the slot was then never claimed by insert.
        let _ = self.0.remove(&proc_claim(i));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_claiming_programs_have_twins() {
        assert_eq!(twin("block_rq_issue").as_deref(), Some("block_rq_issue_nocas"));
        assert_eq!(twin("block_rq_merge"), None);
        assert_eq!(twin("block_rq_issue_btf"), None);
    }

    #[test]
    fn the_verifiers_refusal_of_cmpxchg_is_recognised() {
        // Debian 5.10's words, as aya reports them (the verifier log's last lines).
        assert!(refused_atomics(
            "the BPF_PROG_LOAD syscall failed. Verifier output: BPF_STX uses reserved fields\nverification time 12 usec"
        ));
        assert!(!refused_atomics("invalid mem access 'inv'"));
    }
}
