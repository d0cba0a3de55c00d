//! io_uring sync calls where `io_uring:io_uring_complete` has no `req` (Debian's 5.10;
//! ebpf/probes/src/syncs_510.rs): both events carry the ring (`ctx`) and the request's
//! `user_data`, which match a completion to its submission instead of the request's address.

use anyhow::Result;
use ioscope_common::syncs_510::Uring510Layout;

use super::kernel_btf::KernelBtf;
use super::tracefs::EventFormat;

pub const SUBMIT_PROGRAM: &str = "sync_uring_submit_510";
pub const COMPLETE_PROGRAM: &str = "sync_uring_complete_510";

/// The layout from the formats of the submission event (`submit`) and `io_uring_complete`, when
/// the completion has `ctx` and `user_data` but no `req`. `btf` gives `io_kiocb.file` (the calls
/// are without their file when it is missing).
pub fn layout(
    submit: &EventFormat,
    complete: &EventFormat,
    btf: Option<&KernelBtf>,
) -> Result<Uring510Layout> {
    let at =
        |f: &EventFormat, name: &str, size: u32| -> Result<u32> { Ok(f.field_sized(name, size)?.offset) };
    Ok(Uring510Layout {
        configured: 1,
        submit_ctx: at(submit, "ctx", 8)?,
        submit_user_data: at(submit, "user_data", 8)?,
        submit_opcode: at(submit, "opcode", 1)?,
        submit_req: at(submit, "req", 8)?,
        complete_ctx: at(complete, "ctx", 8)?,
        complete_user_data: at(complete, "user_data", 8)?,
        req_file_plus_one: btf.and_then(|k| k.offset_sized("io_kiocb", "file", 8).ok()).map_or(0, |o| o + 1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::tracefs::parse_format;

    /// Debian 5.10.251's records (from its BTF's `trace_event_raw_*` structs).
    const SUBMIT_5_10: &str = "name: io_uring_submit_sqe\nID: 1\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:void * ctx;\toffset:8;\tsize:8;\tsigned:0;\n\
        \tfield:void * req;\toffset:16;\tsize:8;\tsigned:0;\n\
        \tfield:u8 opcode;\toffset:24;\tsize:1;\tsigned:0;\n\
        \tfield:u64 user_data;\toffset:32;\tsize:8;\tsigned:0;\n\
        \tfield:u32 flags;\toffset:40;\tsize:4;\tsigned:0;\n\
        \tfield:bool force_nonblock;\toffset:44;\tsize:1;\tsigned:0;\n\
        \tfield:bool sq_thread;\toffset:45;\tsize:1;\tsigned:0;\n\nprint fmt: \"\"\n";
    const COMPLETE_5_10: &str = "name: io_uring_complete\nID: 2\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:void * ctx;\toffset:8;\tsize:8;\tsigned:0;\n\
        \tfield:u64 user_data;\toffset:16;\tsize:8;\tsigned:0;\n\
        \tfield:int res;\toffset:24;\tsize:4;\tsigned:1;\n\
        \tfield:unsigned cflags;\toffset:28;\tsize:4;\tsigned:0;\n\nprint fmt: \"\"\n";

    #[test]
    fn requests_are_matched_by_ring_and_user_data() {
        let (s, c) = (parse_format(SUBMIT_5_10).unwrap(), parse_format(COMPLETE_5_10).unwrap());
        let l = layout(&s, &c, None).unwrap();
        assert_eq!(
            (l.configured, l.submit_ctx, l.submit_user_data, l.submit_opcode, l.submit_req),
            (1, 8, 32, 24, 16)
        );
        assert_eq!((l.complete_ctx, l.complete_user_data, l.req_file_plus_one), (8, 16, 0));
        // A completion without user_data cannot be matched.
        let bare = parse_format(&COMPLETE_5_10.replace("user_data", "data")).unwrap();
        assert!(layout(&s, &bare, None).is_err());
    }
}
