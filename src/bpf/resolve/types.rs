//! The names the resolvers share: a file's identity ([`FileId`]) and what a check of its path
//! found ([`FileMeta`]).

use std::os::unix::fs::MetadataExt;

/// (major, minor, inode): a file as userspace names devices.
pub type FileId = (u32, u32, u64);

/// What `fstat` said of a file whose path was checked this sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileMeta {
    pub size: u64,
    pub mtime_ns: i128,
    pub is_file: bool,
}

impl FileMeta {
    /// What a stat or fstat said.
    pub fn of(m: &std::fs::Metadata) -> FileMeta {
        let mtime_ns = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
        FileMeta { size: m.len(), mtime_ns, is_file: m.is_file() }
    }
}
