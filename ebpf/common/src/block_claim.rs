//! Slot claims without atomics, for kernels whose verifier predates BPF's compare-and-exchange
//! (`BPF_ATOMIC | BPF_CMPXCHG`, Linux 5.12). The block programs share two open-addressed tables
//! (devices, and (process, device) pairs: ioscope_common::block) whose free slots they claim with
//! a compare-and-exchange where the kernel has it. Before 5.12 the `_nocas` twins of the classic
//! programs claim a slot by inserting it into the hash map [`BLOCK_SLOT_CLAIMS_MAP`] with
//! `BPF_NOEXIST`: the map's bucket lock makes exactly one insert win, as the compare-and-exchange
//! does; the winner then stores its key in the table, where every later lookup finds it. Figures,
//! tables and userspace's reading are the same either way; userspace deletes a freed process
//! slot's claim after clearing its key.

use crate::block::{DEV_SLOTS, PROCS_MAX};

/// Hash map: claim key ([`proc_claim`] or [`dev_claim`]) → the table key that holds the slot.
pub const BLOCK_SLOT_CLAIMS_MAP: &str = "BLOCK_SLOT_CLAIMS";
/// Entries of [`BLOCK_SLOT_CLAIMS_MAP`]: one per slot of both tables.
pub const CLAIMS_MAX: u32 = DEV_SLOTS + PROCS_MAX;
/// The suffix of the programs that claim slots this way (`block_rq_issue_nocas`...).
pub const NOCAS_SUFFIX: &str = "_nocas";

/// The claim key of slot `i` of the process table.
#[inline(always)]
pub const fn proc_claim(i: u32) -> u32 {
    i
}

/// The claim key of slot `i` of the device table.
#[inline(always)]
pub const fn dev_claim(i: u32) -> u32 {
    i | (1 << 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_tables_claim_apart() {
        assert_ne!(proc_claim(0), dev_claim(0));
        assert_eq!(dev_claim(DEV_SLOTS - 1) & !(1 << 31), DEV_SLOTS - 1);
        assert!(proc_claim(PROCS_MAX - 1) < dev_claim(0));
    }
}
