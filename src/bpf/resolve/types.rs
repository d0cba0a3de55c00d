//! The names the resolvers share: a file's identity ([`FileId`]), what a check of its path found
//! ([`FileMeta`]), and the kernel's names of files as the resolver asks them ([`KernelNames`],
//! answered by the file-names family's map, src/bpf/file_names.rs).

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

/// A file's path inside its filesystem, as the kernel's dentries had it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsPath {
    /// From the filesystem's root, starting with '/'.
    pub path: String,
    /// The file's dentry was unlinked when named.
    pub unlinked: bool,
    /// The inodes of the chain (the file's first): what [`KernelNames::forget`] removes.
    pub chain: Vec<u64>,
}

/// The kernel's names of files (the dentries the file-names programs recorded), looked up by
/// filesystem (kernel dev_t) and inode.
pub trait KernelNames: Send {
    /// The path of inode `ino` of filesystem `dev` inside it, when the kernel named it and all
    /// its ancestors.
    fn fs_path(&mut self, dev: u32, ino: u64) -> Option<FsPath>;
    /// Whether the kernel named inode `ino` of filesystem `dev` (its own entry only).
    fn has(&self, dev: u32, ino: u64) -> bool;
    /// Drops a chain's entries (a path that no longer names its inode): the kernel names them
    /// again at their next I/O.
    fn forget(&mut self, dev: u32, chain: &[u64]);
}
