//! io_uring sync calls where `io_uring:io_uring_complete` has no request address (`req`; Debian's
//! 5.10): a request is keyed by its ring (`ctx`) and its `user_data`, which both events carry
//! (ebpf/probes/src/syncs_510.rs). Offsets from the format files; the file from BTF.

/// Read-only global holding [`Uring510Layout`], set by the loader before load.
pub const URING_510_LAYOUT_GLOBAL: &str = "URING_510_LAYOUT";

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Uring510Layout {
    /// 0: the programs do nothing.
    pub configured: u32,
    /// The submission event's `ctx`, `user_data` (u64), `opcode` (u8), `req` (u64).
    pub submit_ctx: u32,
    pub submit_user_data: u32,
    pub submit_opcode: u32,
    pub submit_req: u32,
    /// `io_uring_complete`'s `ctx`, `user_data`.
    pub complete_ctx: u32,
    pub complete_user_data: u32,
    /// `io_kiocb.file` (the request's file, set before the submission event), plus one: 0 when
    /// unknown (the calls are then without their file).
    pub req_file_plus_one: u32,
}

impl Uring510Layout {
    pub const UNSET: Uring510Layout = Uring510Layout {
        configured: 0,
        submit_ctx: 0,
        submit_user_data: 0,
        submit_opcode: 0,
        submit_req: 0,
        complete_ctx: 0,
        complete_user_data: 0,
        req_file_plus_one: 0,
    };
}

/// The in-flight key of a request: its ring's address and its `user_data`, mixed, with the top
/// bit set so that it never equals a thread id (the syscalls' key).
#[inline(always)]
pub fn uring_key(ring: u64, user_data: u64) -> u64 {
    (ring ^ user_data.rotate_left(29)) | 1 << 63
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], u32 fields only, every bit pattern valid.
    unsafe impl aya::Pod for super::Uring510Layout {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_has_no_hidden_padding() {
        assert_eq!(core::mem::size_of::<Uring510Layout>(), 8 * 4);
    }

    #[test]
    fn keys_are_never_thread_ids_and_differ_per_request() {
        let ring = 0xffff_8880_1234_5000;
        for ud in [0, 1, 7, u64::MAX, 0x7fff_dead_beef] {
            assert!(uring_key(ring, ud) > u64::from(u32::MAX));
        }
        assert_ne!(uring_key(ring, 1), uring_key(ring, 2));
        assert_ne!(uring_key(ring, 1), uring_key(ring + 0x1000, 1));
    }
}
