//! A file's path from its inode number alone, through the filesystem's NFS export handle: the
//! inode is opened on its mount with `open_by_handle_at` (as fanotify's FID mode reports files)
//! and the open file's path read back from `/proc/self/fd`. This finds a file nobody holds open
//! and whose name the kernel recorded at its I/O is stale: written under a temporary name and
//! renamed (editors, package managers, compilers: what a build leaves behind), where the scans
//! of every process's fds and the walks of the mount found nothing or took tens of seconds.
//!
//! Only where a handle needs nothing but the inode number: ext2/3/4 encode a file as a 32-bit
//! inode and generation (`FILEID_INO32_GEN`) and accept generation 0 as "any" (ext4_nfs_get_inode
//! checks the generation only when it is not 0). xfs and btrfs check it, and the programs do not
//! record it: their files keep the other fallbacks. Opening by handle needs CAP_DAC_READ_SEARCH
//! (root); without it, or on a filesystem that refuses, the answer is None and nothing is lost.
//! The path is that of the inode's dentry in the kernel's cache, the one the rename moved; an
//! unlinked file reads as the kernel's own "PATH (deleted)". A dentry the kernel had to make
//! anew, not connected to the tree, reads as a bare name: a path is given only when it names the
//! inode (or is the kernel's "(deleted)" one).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use super::mountinfo::Mount;
use super::safe_open::{open_dir_nofollow, Opener};
use super::types::FileId;

/// `FILEID_INO32_GEN` (include/linux/exportfs.h): a 32-bit inode number and its generation.
const FILEID_INO32_GEN: i32 = 1;

/// `struct file_handle` with room for `FILEID_INO32_GEN`'s two 32-bit words.
#[repr(C)]
struct Ino32Handle {
    handle_bytes: u32,
    handle_type: i32,
    ino: u32,
    generation: u32,
}

/// Filesystems whose handles [`HandleOpener`] can make from the inode number.
fn takes_inode_only(fstype: &str) -> bool {
    matches!(fstype, "ext2" | "ext3" | "ext4")
}

/// Opens inodes by handle; remembers a refusal for want of privilege.
#[derive(Default)]
pub struct HandleOpener {
    refused: bool,
}

impl HandleOpener {
    /// The path of `id` through its handle, when its filesystem takes one by inode number and the
    /// path read back names `id`. The mount point is opened for each lookup and closed after it
    /// (a mount point held open would keep the filesystem from being unmounted); lookups are rare
    /// (a file unknown otherwise, at most once per retry time).
    /// The mount point is opened without following a link (super::safe_open), and the path read
    /// back is checked through `opener`.
    pub fn path(&mut self, id: FileId, mounts: &[Mount], opener: &mut Opener) -> Option<String> {
        if self.refused {
            return None;
        }
        let ino = u32::try_from(id.2).ok()?;
        let dev = (id.0, id.1);
        // The whole filesystem's mount rather than a bind mount of a part of it.
        let of_dev = || mounts.iter().filter(|m| m.dev == dev && takes_inode_only(&m.fstype));
        let m = of_dev().find(|m| m.root == Path::new("/")).or_else(|| of_dev().next())?;
        // Read-only, not O_PATH: open_by_handle_at refuses an O_PATH descriptor (EBADF).
        let mount_fd = open_dir_nofollow(&m.mount_point, libc::O_RDONLY).ok()?;
        let mut handle = Ino32Handle { handle_bytes: 8, handle_type: FILEID_INO32_GEN, ino, generation: 0 };
        // SAFETY: `handle` is a struct file_handle followed by its handle_bytes (8) of handle;
        // the kernel reads it only. The returned fd is owned below.
        let fd = unsafe {
            libc::open_by_handle_at(
                mount_fd.as_raw_fd(),
                (&raw mut handle).cast(),
                libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            )
        };
        drop(mount_fd);
        if fd < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) {
                self.refused = true;
            }
            return None;
        }
        // SAFETY: a new fd this function owns.
        let file = unsafe { OwnedFd::from_raw_fd(fd) };
        let path = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()?;
        let path = path.to_string_lossy().into_owned();
        (path.ends_with(" (deleted)") || opener.names(Path::new(&path), id)).then_some(path)
    }
}
