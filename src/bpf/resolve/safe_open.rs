//! Opening a file ioscope identified, safely: the one way the file tracking opens (or looks up) a
//! path it got from a file name.
//!
//! The rule: ioscope runs as root and never opens a path because a user named it. A file is what
//! the kernel reported, a (device, inode) pair; a path is only a way to reach it, and any user who
//! can write to a directory on the way can redirect it (swap a directory for a symlink to a
//! root-only one, plant a FIFO, a device node, a FUSE mount). So a path is resolved here:
//!
//! - from the mount point of the file's own device, as the mount table gives it (the mount point
//!   itself opened with `RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`), then beneath it with
//!   `openat2(O_PATH | O_NOFOLLOW, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
//!   RESOLVE_NO_XDEV)`: no symlink followed, no `..` out, no other mount entered (a user's FUSE
//!   mount, whose daemon could hang the lookup). On kernels before 5.6 (no `openat2`), the same
//!   by a walk of one component at a time with `O_PATH | O_NOFOLLOW`, each `fstat`-ed (a symlink
//!   or another device refuses);
//! - as an `O_PATH` descriptor, which opens nothing (no FIFO's open, no driver's `open`, no
//!   access time), then `fstat`-ed: it must be a regular file with the device and inode the kernel
//!   reported ([`Refused`] otherwise);
//! - and read only through that descriptor ([`Identified::open`]): reopened as
//!   `/proc/self/fd/N` (a magic link ioscope chose, to the inode it checked) with `O_RDONLY |
//!   O_NONBLOCK | O_NOCTTY`, never by its name again, and checked once more by `fstat`.
//!
//! Files on FUSE filesystems are not looked up at all (their daemon answers the lookup, and may
//! never answer). Whatever is refused is shown without a path (dev:inode) or keeps the path the
//! kernel gave elsewhere (`/proc/PID/fd` of a process holding the file, read with `readlink`).

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use super::mountinfo::{parse_mountinfo, MountInfo};
use super::types::{FileId, FileMeta};

/// Why a path was not taken for the file the kernel reported.
#[derive(Debug)]
pub enum Refused {
    /// No mount of the file's device holds the path.
    NoMount,
    /// The file's filesystem answers lookups from a user's daemon (FUSE).
    Untrusted,
    /// The path could not be resolved without following a link or leaving the mount (`ELOOP`,
    /// `EXDEV`), or does not exist, or anything else the lookup said.
    Lookup(io::Error),
    /// It resolved to something other than a regular file (FIFO, socket, device, directory).
    NotRegular(libc::mode_t),
    /// It resolved to a regular file, but not the one the kernel reported.
    OtherInode,
}

/// A file found at a path and checked to be the regular file the kernel reported: an `O_PATH`
/// descriptor (which opened nothing) and what `fstat` said of it.
#[derive(Debug)]
pub struct Identified {
    fd: OwnedFd,
    id: FileId,
    pub meta: FileMeta,
}

impl Identified {
    /// The file opened read-only: the inode checked, reopened through `/proc/self/fd` (never by
    /// its name), non-blocking, without touching its access time where allowed, and checked
    /// again.
    pub fn open(&self) -> io::Result<File> {
        let proc =
            CString::new(format!("/proc/self/fd/{}", self.fd.as_raw_fd())).map_err(io::Error::other)?;
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
        // SAFETY: a NUL-terminated path; the fd is owned below.
        let mut fd = unsafe { libc::open(proc.as_ptr(), flags | libc::O_NOATIME) };
        if fd < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) {
            // O_NOATIME needs the file's owner or CAP_FOWNER.
            // SAFETY: as above.
            fd = unsafe { libc::open(proc.as_ptr(), flags) };
        }
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new fd this function owns.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let st = fstat(file.as_fd())?;
        if !is_regular(&st) || id_of(&st) != self.id {
            return Err(io::Error::other("the reopened file is not the one checked"));
        }
        Ok(file)
    }
}

/// Resolves paths of files the kernel reported, from the mount table of ioscope's own mount
/// namespace (`/proc/self/mountinfo`, read again only when it changed).
pub struct Opener {
    info: MountInfo,
    generation: u64,
    /// (device, mount point, FUSE) of each mount.
    mounts: Vec<((u32, u32), PathBuf, bool)>,
}

impl Default for Opener {
    fn default() -> Self {
        Opener { info: MountInfo::new(Path::new("/proc")), generation: 0, mounts: Vec::new() }
    }
}

impl Opener {
    /// `path` resolved without following any link, from the mount point of the device `id` is on,
    /// never leaving that mount; `id`'s regular file, or why not.
    pub fn lookup(&mut self, path: &Path, id: FileId) -> Result<Identified, Refused> {
        self.info.refresh();
        if self.info.generation() != self.generation {
            self.generation = self.info.generation();
            self.mounts = parse_mountinfo(self.info.text())
                .into_iter()
                .map(|m| (m.dev, m.mount_point, m.fstype == "fuse" || m.fstype.starts_with("fuse.")))
                .collect();
        }
        let (_, mount_point, fuse) = self
            .mounts
            .iter()
            .filter(|(dev, mp, _)| *dev == (id.0, id.1) && path.starts_with(mp))
            .max_by_key(|(_, mp, _)| mp.as_os_str().len())
            .ok_or(Refused::NoMount)?;
        if *fuse {
            return Err(Refused::Untrusted);
        }
        let rest = path.strip_prefix(mount_point).map_err(|_| Refused::NoMount)?;
        let dir = open_dir_nofollow(mount_point, libc::O_PATH).map_err(Refused::Lookup)?;
        identify(dir.as_fd(), rest, id)
    }

    /// Whether `path` names `id`'s regular file right now (see [`Opener::lookup`]).
    pub fn names(&mut self, path: &Path, id: FileId) -> bool {
        self.lookup(path, id).is_ok()
    }
}

/// `rest` beneath the directory `dir` (see [`resolve_beneath`]), checked to be `id`'s regular
/// file.
pub fn identify(dir: BorrowedFd, rest: &Path, id: FileId) -> Result<Identified, Refused> {
    let fd = resolve_beneath(dir, rest, libc::O_PATH).map_err(Refused::Lookup)?;
    let st = fstat(fd.as_fd()).map_err(Refused::Lookup)?;
    if !is_regular(&st) {
        return Err(Refused::NotRegular(st.st_mode & libc::S_IFMT));
    }
    if id_of(&st) != id {
        return Err(Refused::OtherInode);
    }
    let mtime_ns = i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec);
    let meta = FileMeta { size: st.st_size as u64, mtime_ns, is_file: true };
    Ok(Identified { fd, id, meta })
}

/// The block device `source` (a mount table's source, under /dev) opened read-only and
/// non-blocking, only if it is the block device `dev`: looked up `O_PATH`, checked by `fstat`,
/// reopened through `/proc/self/fd`.
pub fn open_block_device(source: &Path, dev: (u32, u32)) -> io::Result<File> {
    let c = CString::new(source.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: a NUL-terminated path; the fd is owned below.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd this function owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let is_dev = |st: &libc::stat| {
        st.st_mode & libc::S_IFMT == libc::S_IFBLK
            && (libc::major(st.st_rdev), libc::minor(st.st_rdev)) == dev
    };
    if !is_dev(&fstat(fd.as_fd())?) {
        return Err(io::Error::other("not the mounted block device"));
    }
    let proc = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).map_err(io::Error::other)?;
    let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    // SAFETY: as above.
    let opened = unsafe { libc::open(proc.as_ptr(), flags) };
    if opened < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd this function owns.
    let file = File::from(unsafe { OwnedFd::from_raw_fd(opened) });
    if !is_dev(&fstat(file.as_fd())?) {
        return Err(io::Error::other("not the mounted block device"));
    }
    Ok(file)
}

/// `openat2(2)` is missing (before Linux 5.6): the walk of [`walk_beneath`] instead.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

fn openat2(dir: RawFd, path: &Path, flags: i32, resolve: u64) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // `struct open_how` (include/uapi/linux/openat2.h; libc's is non-exhaustive).
    #[repr(C)]
    struct OpenHow {
        flags: u64,
        mode: u64,
        resolve: u64,
    }
    let how = OpenHow { flags: (flags | libc::O_CLOEXEC) as u64, mode: 0, resolve };
    // SAFETY: a NUL-terminated path and a live open_how of the size given; the fd is owned below.
    let fd =
        unsafe { libc::syscall(libc::SYS_openat2, dir, c.as_ptr(), &raw const how, size_of::<OpenHow>()) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        if matches!(e.raw_os_error(), Some(libc::ENOSYS)) {
            NO_OPENAT2.store(true, Ordering::Relaxed);
        }
        return Err(e);
    }
    // SAFETY: a new fd this function owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// An absolute directory path (a mount point from the mount table) opened with `flags` (`O_PATH`,
/// `O_RDONLY`) without following any symlink or magic link on the way; other mounts may be crossed
/// (a mount point lies below others).
pub fn open_dir_nofollow(dir: &Path, flags: i32) -> io::Result<OwnedFd> {
    let flags = flags | libc::O_DIRECTORY | libc::O_NOFOLLOW;
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
        match openat2(libc::AT_FDCWD, dir, flags, resolve) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {}
            other => return other,
        }
    }
    let rest = dir.strip_prefix("/").map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let root = open_raw(libc::AT_FDCWD, Path::new("/"), libc::O_PATH | libc::O_DIRECTORY)?;
    walk_beneath(root.as_fd(), rest, flags, false)
}

/// `rest` (relative) beneath the directory `dir`, opened with `flags` (`O_PATH`, or `O_RDONLY |
/// O_DIRECTORY`): no symlink or magic link followed, no `..` above `dir`, no mount crossed.
pub fn resolve_beneath(dir: BorrowedFd, rest: &Path, flags: i32) -> io::Result<OwnedFd> {
    // openat2 refuses other flags beside O_PATH (EINVAL).
    let flags = match flags & libc::O_PATH {
        0 => flags | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
        _ => flags | libc::O_NOFOLLOW,
    };
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let resolve = libc::RESOLVE_BENEATH
            | libc::RESOLVE_NO_SYMLINKS
            | libc::RESOLVE_NO_MAGICLINKS
            | libc::RESOLVE_NO_XDEV;
        let rest = if rest.as_os_str().is_empty() { Path::new(".") } else { rest };
        match openat2(dir.as_raw_fd(), rest, flags, resolve) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {}
            other => return other,
        }
    }
    walk_beneath(dir, rest, flags, true)
}

/// The walk for kernels without `openat2`: one component at a time, each opened `O_PATH |
/// O_NOFOLLOW` from the last and `fstat`-ed: a symlink (opened as itself) refuses with `ELOOP`;
/// with `same_dev`, a component on another device (a mount) with `EXDEV`; `..` with `EXDEV`.
/// (A bind mount of the same filesystem is not told apart: the device is the same.)
fn walk_beneath(dir: BorrowedFd, rest: &Path, flags: i32, same_dev: bool) -> io::Result<OwnedFd> {
    let dev = fstat(dir)?.st_dev;
    let names: Vec<&std::ffi::OsStr> = rest
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(n) => Ok(n),
            _ => Err(io::Error::from_raw_os_error(libc::EXDEV)),
        })
        .collect::<io::Result<_>>()?;
    let mut cur: Option<OwnedFd> = None;
    for name in &names {
        let at = cur.as_ref().map_or(dir.as_raw_fd(), |f| f.as_raw_fd());
        let next = open_raw(at, Path::new(name), libc::O_PATH | libc::O_NOFOLLOW)?;
        let st = fstat(next.as_fd())?;
        if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        if same_dev && st.st_dev != dev {
            return Err(io::Error::from_raw_os_error(libc::EXDEV));
        }
        cur = Some(next);
    }
    let last = match cur {
        Some(fd) => fd,
        None => dir.try_clone_to_owned()?,
    };
    if flags & libc::O_DIRECTORY == 0 {
        // O_PATH asked: the last component is open as that already.
        return Ok(last);
    }
    let st = fstat(last.as_fd())?;
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
    }
    if flags & libc::O_PATH != 0 {
        return Ok(last);
    }
    // A directory to read: reopened through the checked descriptor (never by name).
    let proc = format!("/proc/self/fd/{}", last.as_raw_fd());
    let fd = open_raw(libc::AT_FDCWD, Path::new(&proc), flags & !libc::O_NOFOLLOW)?;
    let again = fstat(fd.as_fd())?;
    if (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino) {
        return Err(io::Error::other("the reopened directory is not the one checked"));
    }
    Ok(fd)
}

fn open_raw(dir: RawFd, path: &Path, flags: i32) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: a NUL-terminated path; the fd is owned below.
    let fd = unsafe { libc::openat(dir, c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd this function owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn fstat(fd: BorrowedFd) -> io::Result<libc::stat> {
    // SAFETY: an all-zero stat is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid fd and a live stat buffer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn is_regular(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFREG
}

fn id_of(st: &libc::stat) -> FileId {
    (libc::major(st.st_dev), libc::minor(st.st_dev), st.st_ino)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn id(p: &Path) -> FileId {
        let m = std::fs::symlink_metadata(p).unwrap();
        (libc::major(m.dev()), libc::minor(m.dev()), m.ino())
    }

    /// A tree with every case: a regular file, a symlink to it (last component), a symlinked
    /// directory on the way, a FIFO, a directory; /dev/null stands for a device node.
    fn tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let p = t.path();
        std::fs::create_dir_all(p.join("d/real")).unwrap();
        std::fs::write(p.join("d/real/f"), b"data").unwrap();
        std::os::unix::fs::symlink(p.join("d/real/f"), p.join("d/link")).unwrap();
        std::os::unix::fs::symlink(p.join("d/real"), p.join("d/swapped")).unwrap();
        let fifo = CString::new(p.join("d/fifo").as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        t
    }

    /// Each case, through openat2 and through the walk older kernels take.
    fn cases(beneath: impl Fn(&Path, &Path, FileId) -> Result<Identified, Refused>) {
        let t = tree();
        let p = t.path();
        let f = id(&p.join("d/real/f"));
        let ok = beneath(p, Path::new("d/real/f"), f).expect("a regular file at its path");
        assert_eq!(ok.meta.size, 4);
        let mut data = String::new();
        io::Read::read_to_string(&mut ok.open().unwrap(), &mut data).unwrap();
        assert_eq!(data, "data");
        let lookup_err = |r: Result<Identified, Refused>| match r {
            Err(Refused::Lookup(e)) => e.raw_os_error(),
            other => panic!("{other:?}"),
        };
        // A symlink as the last component, or in a directory on the way: refused, not followed.
        // (O_PATH | O_NOFOLLOW opens a last symlink as itself: not a regular file.)
        let link = beneath(p, Path::new("d/link"), f);
        let refused = |r: &Result<Identified, Refused>| match r {
            Err(Refused::NotRegular(libc::S_IFLNK)) => true,
            Err(Refused::Lookup(e)) => e.raw_os_error() == Some(libc::ELOOP),
            _ => false,
        };
        assert!(refused(&link), "{link:?}");
        assert!(matches!(
            lookup_err(beneath(p, Path::new("d/swapped/f"), f)),
            Some(libc::ELOOP | libc::ENOTDIR)
        ));
        // Out of the directory by `..` or an absolute path.
        assert!(beneath(&p.join("d/real"), Path::new("../real/f"), f).is_err());
        assert!(beneath(p, &p.join("d/real/f"), f).is_err());
        // Not regular files, though the path and inode are right: never opened.
        let fifo = id(&p.join("d/fifo"));
        assert!(matches!(beneath(p, Path::new("d/fifo"), fifo), Err(Refused::NotRegular(libc::S_IFIFO))));
        let dir = id(&p.join("d/real"));
        assert!(matches!(beneath(p, Path::new("d/real"), dir), Err(Refused::NotRegular(libc::S_IFDIR))));
        let null = id(Path::new("/dev/null"));
        assert!(matches!(
            beneath(Path::new("/dev"), Path::new("null"), null),
            Err(Refused::NotRegular(libc::S_IFCHR))
        ));
        // A regular file, but another inode than the kernel's.
        std::fs::write(p.join("d/other"), b"x").unwrap();
        assert!(matches!(beneath(p, Path::new("d/other"), f), Err(Refused::OtherInode)));
        // Gone.
        assert_eq!(lookup_err(beneath(p, Path::new("d/missing"), f)), Some(libc::ENOENT));
    }

    #[test]
    fn only_the_regular_file_the_kernel_reported_is_found_without_following_links() {
        cases(|dir, rest, id| {
            let d = open_dir_nofollow(dir, libc::O_PATH).map_err(Refused::Lookup)?;
            identify(d.as_fd(), rest, id)
        });
    }

    #[test]
    fn the_walk_for_kernels_without_openat2_refuses_the_same() {
        cases(|dir, rest, id| {
            let d = open_dir_nofollow(dir, libc::O_PATH).map_err(Refused::Lookup)?;
            let fd = walk_beneath(d.as_fd(), rest, libc::O_PATH | libc::O_NOFOLLOW, true)
                .map_err(Refused::Lookup)?;
            let st = fstat(fd.as_fd()).map_err(Refused::Lookup)?;
            if !is_regular(&st) {
                return Err(Refused::NotRegular(st.st_mode & libc::S_IFMT));
            }
            if id_of(&st) != id {
                return Err(Refused::OtherInode);
            }
            let meta = FileMeta { size: st.st_size as u64, mtime_ns: 0, is_file: true };
            Ok(Identified { fd, id, meta })
        });
    }

    /// The opener finds the mount of the file's device and resolves from its mount point: a
    /// directory of the path swapped for a symlink is refused, and so is a mount point reached
    /// through one.
    #[test]
    fn the_opener_resolves_from_the_mount_of_the_files_device() {
        let t = tree();
        let p = t.path();
        let f = id(&p.join("d/real/f"));
        let mut o = Opener::default();
        assert!(o.names(&p.join("d/real/f"), f));
        assert!(!o.names(&p.join("d/swapped/f"), f));
        assert!(!o.names(&p.join("d/link"), f));
        // Another device's id for the same path: no mount of that device holds it.
        assert!(matches!(o.lookup(&p.join("d/real/f"), (f.0 + 1, f.1, f.2)), Err(Refused::NoMount)));
        // The mount point itself is looked up without symlinks too.
        assert!(open_dir_nofollow(&p.join("d/swapped"), libc::O_PATH).is_err());
        assert!(open_dir_nofollow(&p.join("d/real"), libc::O_PATH).is_ok());
    }

    #[test]
    fn a_block_device_is_opened_only_if_it_is_the_one_mounted() {
        let null = std::fs::metadata("/dev/null").unwrap();
        let rdev = (libc::major(null.rdev()), libc::minor(null.rdev()));
        // /dev/null is a character device, not a block device.
        assert!(open_block_device(Path::new("/dev/null"), rdev).is_err());
        let t = tree();
        assert!(open_block_device(&t.path().join("d/fifo"), (0, 0)).is_err());
    }
}
