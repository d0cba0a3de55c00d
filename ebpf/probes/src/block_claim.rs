//! The block programs for kernels without BPF's compare-and-exchange (before Linux 5.12, whose
//! verifier refuses the instruction anywhere in a program: "BPF_STX uses reserved fields"). Each
//! `_nocas` program is its classic twin in block.rs with one difference: a free slot of the
//! device or process table is claimed by a `BPF_NOEXIST` insert into BLOCK_SLOT_CLAIMS (see
//! ioscope_common::block_claim). Userspace attaches these or the classic ones, never both.

use aya_ebpf::{
    bindings::BPF_NOEXIST,
    macros::{map, tracepoint},
    maps::HashMap,
    programs::TracePointContext,
};
use ioscope_common::block_claim::CLAIMS_MAX;

use crate::block::{classic_io_start, classic_rq_complete, classic_rq_insert, classic_rq_issue};

/// Claim key → the table key holding that slot.
#[map]
static BLOCK_SLOT_CLAIMS: HashMap<u32, u64> = HashMap::with_max_entries(CLAIMS_MAX, 0);

/// Claims the free slot whose claim key is `claim` for `key`, as a compare-and-exchange of the
/// slot's key from 0 would: 0 when this call won it (and stored `key` at `p`, the slot's key in its
/// table), else the key that holds it (`key` when another call for the same key won it; u64::MAX,
/// no key, when the claim was deleted between the insert and the lookup: the caller moves on).
#[inline(always)]
pub(crate) fn claim_by_insert(claim: u32, key: u64, p: *mut u64) -> u64 {
    if BLOCK_SLOT_CLAIMS.insert(&claim, &key, u64::from(BPF_NOEXIST)).is_ok() {
        // SAFETY: a valid, aligned pointer into the table's value; only the claim's winner
        // stores a key into a free slot.
        unsafe { core::ptr::write_volatile(p, key) };
        return 0;
    }
    // SAFETY: a value of the map, read once.
    unsafe { BLOCK_SLOT_CLAIMS.get(&claim) }.copied().unwrap_or(u64::MAX)
}

#[tracepoint]
pub fn block_io_start_nocas(ctx: TracePointContext) -> u32 {
    classic_io_start::<false>(&ctx)
}

#[tracepoint]
pub fn block_rq_insert_nocas(ctx: TracePointContext) -> u32 {
    classic_rq_insert::<false>(&ctx)
}

#[tracepoint]
pub fn block_rq_issue_nocas(ctx: TracePointContext) -> u32 {
    classic_rq_issue::<false>(&ctx)
}

#[tracepoint]
pub fn block_rq_complete_nocas(ctx: TracePointContext) -> u32 {
    classic_rq_complete::<false>(&ctx)
}
