//! File names from the kernel's dentries, read once per inode when its I/O is first seen, so a
//! file nobody holds open any more (a `cat` that has exited, a deleted temporary) still has a path.
//!
//! The programs (ebpf/probes/src/file_names.rs) get the inode from the event itself (the folio's
//! mapping's host, or the direct I/O's `struct file`), and, unless the inode is already in
//! [`FILE_NAMES_MAP`] with its generation, store one [`FileName`] per dentry up the parent
//! chain: the entry's own name and its parent's inode number, until an ancestor already named,
//! the filesystem's root, or [`NAME_DEPTH`] levels. Directories are thus stored once for all
//! their files, and the cost is paid once per inode, not per I/O. Userspace (src/bpf/file_names.rs)
//! follows the parents up to the root and joins the names onto the filesystem's mount point,
//! checking the result by `stat` before trusting it; a path that no longer names the inode (a
//! rename) has its entries deleted, so the inode's next I/O names it again.

/// LRU hash map: [`NameKey`] → [`FileName`].
pub const FILE_NAMES_MAP: &str = "FILE_NAMES";
/// Per-CPU array of one [`NameKey`] with its generation: the inode this CPU named or found named
/// last (one array lookup instead of a hash lookup for the next folios of the same file).
pub const FILE_NAMES_LAST_MAP: &str = "FILE_NAMES_LAST";
/// Read-only global holding [`NameLayout`], set by the loader before load.
pub const NAME_LAYOUT_GLOBAL: &str = "NAME_LAYOUT";

/// Inodes (files and their directories) whose names are kept at once.
pub const FILE_NAMES_MAX: u32 = 16384;
/// Dentries read up the parent chain per new inode (beyond: the path is not complete, and
/// userspace falls back to its other ways).
pub const NAME_DEPTH: usize = 16;
/// Bytes of a name kept (NAME_MAX is 255, plus the NUL).
pub const NAME_LEN: usize = 256;

/// [`FileName::flags`]: the dentry is its filesystem's root (its own parent); its name is "/".
pub const NAME_ROOT: u32 = 1;
/// [`FileName::flags`]: the dentry was unhashed (unlinked) when read, or the inode's pages left the
/// cache after its last link was gone (the file was deleted since): the kernel's " (deleted)".
pub const NAME_UNLINKED: u32 = 2;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NameKey {
    /// The filesystem's `s_dev` (kernel encoding, major << 20 | minor), as FILE_IO's keys.
    pub dev: u32,
    pub _pad: u32,
    pub ino: u64,
}

/// What the last naming on a CPU was for.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NameLast {
    pub key: NameKey,
    pub generation: u32,
    pub _pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileName {
    /// The parent directory's inode number (the same as `ino` for the root).
    pub parent_ino: u64,
    /// The inode's `i_generation`: an inode number reused by a new file is named again.
    pub generation: u32,
    /// [`NAME_ROOT`], [`NAME_UNLINKED`].
    pub flags: u32,
    /// The dentry's name as the kernel has it (`d_name`), NUL-terminated.
    pub name: [u8; NAME_LEN],
}

impl Default for FileName {
    fn default() -> Self {
        FileName { parent_ino: 0, generation: 0, flags: 0, name: [0; NAME_LEN] }
    }
}

impl FileName {
    /// The name's bytes (up to the NUL).
    pub fn name_bytes(&self) -> &[u8] {
        let end = self.name.iter().position(|&b| b == 0).unwrap_or(NAME_LEN);
        &self.name[..end]
    }
}

/// Offsets in the kernel's structs, from its BTF at run time (src/bpf/file_names.rs).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NameLayout {
    /// 0: the programs do nothing.
    pub configured: u32,
    /// `struct folio` (or `page`): `mapping`; `struct address_space`: `host`.
    pub folio_mapping: u32,
    pub mapping_host: u32,
    /// `struct inode`: `i_sb`, `i_ino`, `i_generation`, `i_dentry` (its first alias).
    pub inode_sb: u32,
    pub inode_ino: u32,
    pub inode_generation: u32,
    pub inode_dentry: u32,
    /// `struct super_block`: `s_dev`.
    pub sb_dev: u32,
    /// `struct dentry`: `d_u` (where `d_alias` links the inode's aliases), `d_parent`, `d_inode`,
    /// `d_name.len`, `d_name.name`, `d_hash.pprev` (null when unhashed).
    pub dentry_alias: u32,
    pub dentry_parent: u32,
    pub dentry_inode: u32,
    pub dentry_name_len: u32,
    pub dentry_name: u32,
    pub dentry_hash_pprev: u32,
    /// `struct kiocb`: `ki_filp`; `struct file`: `f_path.dentry`.
    pub kiocb_filp: u32,
    pub file_dentry: u32,
    /// `struct inode`: `i_nlink` (0 once its last name is unlinked).
    pub inode_nlink: u32,
}

impl NameLayout {
    pub const UNSET: NameLayout = NameLayout {
        configured: 0,
        folio_mapping: 0,
        mapping_host: 0,
        inode_sb: 0,
        inode_ino: 0,
        inode_generation: 0,
        inode_dentry: 0,
        sb_dev: 0,
        dentry_alias: 0,
        dentry_parent: 0,
        dentry_inode: 0,
        dentry_name_len: 0,
        dentry_name: 0,
        dentry_hash_pprev: 0,
        kiocb_filp: 0,
        file_dentry: 0,
        inode_nlink: 0,
    };
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], fixed-size integer fields with explicit padding; every bit pattern valid.
    unsafe impl aya::Pod for super::NameKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::NameLast {}
    // SAFETY: as above (8 + 4 + 4 + 256 bytes).
    unsafe impl aya::Pod for super::FileName {}
    // SAFETY: as above (u32 only).
    unsafe impl aya::Pod for super::NameLayout {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_have_no_hidden_padding() {
        assert_eq!(core::mem::size_of::<NameKey>(), 16);
        assert_eq!(core::mem::size_of::<NameLast>(), 24);
        assert_eq!(core::mem::size_of::<FileName>(), 16 + NAME_LEN);
        assert_eq!(core::mem::size_of::<NameLayout>(), 17 * 4);
    }

    #[test]
    fn a_name_ends_at_its_nul() {
        let mut n = FileName::default();
        n.name[..5].copy_from_slice(b"alpha");
        assert_eq!(n.name_bytes(), b"alpha");
        n.name = [b'x'; NAME_LEN];
        assert_eq!(n.name_bytes().len(), NAME_LEN);
    }
}
