//! Opening the files a user names without letting another user steer root: the files ioscope
//! writes (`record -o`, `R`, `bench -o`) and the files it reads (recordings, bench reports).
//! Nothing here knows about ioscope; see src/README.md ("Files a user names").
//!
//! - [`create`] makes a new file with `O_CREAT|O_EXCL|O_NOFOLLOW` in the directory the path
//!   names (resolved once; the file's own name is never followed): a link, a FIFO or a device
//!   planted there is refused, never written through. `replace` (`--force`) replaces a regular
//!   file only, by writing a temporary file beside it and renaming it over the old name, so a
//!   link or a hard link planted at the name is replaced and its target untouched. `stream`
//!   (`--stream`) writes into an existing FIFO or character device; the open waits for a FIFO's
//!   reader without blocking (`O_NONBLOCK`, polled), as long as the caller's `keep_waiting` says.
//! - [`open_input`] opens a file to read: `O_PATH` first, `fstat`, and only a regular file is
//!   opened for reading (through `/proc/self/fd`, the same inode), so a FIFO never blocks and a
//!   device is never opened.
//!
//! A refusal is a [`Refused`] error: bad input, one line, exit code 2.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

/// A path ioscope refuses to write or read (a link, a FIFO, a device, an existing file without
/// --force): bad input, reported in one line with the usage exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// Whether `err` is (or wraps, also inside an `io::Error`) a [`Refused`].
pub fn is_refused(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.is::<Refused>()
            || e.downcast_ref::<io::Error>()
                .and_then(|io| io.get_ref())
                .is_some_and(|inner| inner.is::<Refused>())
    })
}

fn refused<T>(msg: String) -> anyhow::Result<T> {
    Err(anyhow::Error::new(Refused(msg)))
}

/// What [`create`] may do with what is already at the path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CreateOptions {
    /// `--force`: replace an existing regular file (by a new file renamed over it).
    pub replace: bool,
    /// `--stream`: write into an existing FIFO or character device.
    pub stream: bool,
}

/// What a path's last component is, for messages ("is a FIFO").
fn kind_of(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFREG => "a regular file",
        libc::S_IFDIR => "a directory",
        libc::S_IFLNK => "a symbolic link",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        _ => "not a regular file",
    }
}

/// A file [`create`] opened for writing.
pub struct Output {
    file: File,
    how: How,
}

enum How {
    /// Created where nothing was; `dir` and `name` let [`Output::discard`] remove it.
    New { dir: OwnedFd, name: CString },
    /// A temporary file to rename over `name` on [`Output::commit`] (removed if dropped before).
    Replacing { dir: OwnedFd, tmp: CString, name: CString },
    /// Standard output, a FIFO or a character device; nothing to rename or remove.
    Stream,
    /// Committed: the file is in place.
    Done,
}

impl Output {
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// True for standard output, a FIFO or a character device.
    pub fn is_stream(&self) -> bool {
        matches!(self.how, How::Stream)
    }

    /// Puts the file in place: a replacement is renamed over the old name (whatever is there now
    /// is replaced, never followed). Nothing to do for a new file or a stream.
    pub fn commit(mut self) -> io::Result<File> {
        if let How::Replacing { dir, tmp, name } = &self.how {
            // SAFETY: valid descriptors and C strings.
            if unsafe { libc::renameat(dir.as_raw_fd(), tmp.as_ptr(), dir.as_raw_fd(), name.as_ptr()) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        self.how = How::Done;
        let file = self.file.try_clone()?;
        Ok(file)
    }

    /// Gives up: a file created here (new, or a replacement not yet renamed) is removed, if the
    /// name still is that file.
    pub fn discard(mut self) {
        if let How::New { dir, name } = &self.how {
            unlink_if_same(dir.as_raw_fd(), name, &self.file);
        }
        // A replacement's temporary file goes in drop.
        if matches!(self.how, How::New { .. }) {
            self.how = How::Done;
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if let How::Replacing { dir, tmp, .. } = &self.how {
            unlink_if_same(dir.as_raw_fd(), tmp, &self.file);
        }
    }
}

fn unlink_if_same(dir: RawFd, name: &CString, file: &File) {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = file.metadata() else { return };
    if fstatat(dir, name, libc::AT_SYMLINK_NOFOLLOW)
        .is_ok_and(|st| (st.st_dev, st.st_ino) == (meta.dev(), meta.ino()))
    {
        // SAFETY: valid descriptor and C string.
        unsafe { libc::unlinkat(dir, name.as_ptr(), 0) };
    }
}

fn fstatat(dir: RawFd, name: &CString, flags: libc::c_int) -> io::Result<libc::stat> {
    // SAFETY: a zeroed stat for the kernel to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, C string and stat pointer.
    if unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: a zeroed stat for the kernel to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor and stat pointer.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn openat(dir: RawFd, name: &CString, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
    loop {
        // SAFETY: valid descriptor and C string; the returned descriptor is ours.
        let fd = unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_CLOEXEC, mode as libc::c_uint) };
        if fd >= 0 {
            // SAFETY: a fresh descriptor nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn c_string(s: &OsStr) -> anyhow::Result<CString> {
    CString::new(s.as_bytes()).or_else(|_| refused(format!("{} holds a NUL byte", Path::new(s).display())))
}

/// Clears `O_NONBLOCK` on a descriptor opened with it.
fn set_blocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on our own descriptor.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// How often the open of a FIFO looks again for a reader (and asks `keep_waiting`).
const READER_POLL: Duration = Duration::from_millis(50);

/// Opens `path` for writing: `-` is standard output; a new file is created (mode 0666 less the
/// umask, owned by this process's user) without following anything at its name; see the module
/// documentation for `replace` and `stream`. `keep_waiting` is asked every 50 ms while a FIFO has
/// no reader (with `stream`); once it says no, the open gives up with an error saying so.
pub fn create(
    path: &Path,
    opts: CreateOptions,
    keep_waiting: &mut dyn FnMut() -> bool,
) -> anyhow::Result<Output> {
    use anyhow::Context;
    let shown = path.display();
    if path.as_os_str() == "-" {
        use std::os::fd::AsFd;
        let fd = io::stdout().as_fd().try_clone_to_owned().context("cannot use standard output")?;
        return Ok(Output { file: File::from(fd), how: How::Stream });
    }
    let Some(name) = path.file_name().filter(|_| !path.as_os_str().as_bytes().ends_with(b"/")) else {
        return refused(format!("{shown} names a directory, not a file"));
    };
    let name = c_string(name)?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // The directory is resolved once, as the user wrote it; everything after is relative to it.
    let dir =
        match openat(libc::AT_FDCWD, &c_string(parent.as_os_str())?, libc::O_PATH | libc::O_DIRECTORY, 0) {
            Ok(d) => d,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                return refused(format!("cannot create {shown}: {} is not a directory", parent.display()))
            }
            Err(e) => return Err(e).with_context(|| format!("cannot create {shown}")),
        };
    let d = dir.as_raw_fd();
    let new_flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_NOCTTY;
    match fstatat(d, &name, libc::AT_SYMLINK_NOFOLLOW) {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => match openat(d, &name, new_flags, 0o666) {
            Ok(fd) => Ok(Output { file: File::from(fd), how: How::New { dir, name } }),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                refused(format!("{shown} appeared while it was being created: refusing to touch it"))
            }
            Err(e) => Err(e).with_context(|| format!("cannot create {shown}")),
        },
        Err(e) => Err(e).with_context(|| format!("cannot create {shown}")),
        Ok(st) => match st.st_mode & libc::S_IFMT {
            libc::S_IFREG if opts.replace => {
                let (tmp, fd) = temporary(d, new_flags).with_context(|| format!("cannot create {shown}"))?;
                Ok(Output { file: File::from(fd), how: How::Replacing { dir, tmp, name } })
            }
            libc::S_IFREG => refused(format!("{shown} already exists (remove it, or pass --force to replace it)")),
            libc::S_IFLNK => refused(format!(
                "{shown} is a symbolic link: ioscope never writes through a link (name the file itself, or remove the link)"
            )),
            libc::S_IFIFO | libc::S_IFCHR if opts.stream => {
                let fd = open_stream(d, &name, keep_waiting).with_context(|| format!("cannot write to {shown}"))?;
                Ok(Output { file: File::from(fd), how: How::Stream })
            }
            mode @ (libc::S_IFIFO | libc::S_IFCHR) => refused(format!(
                "{shown} is {}: pass --stream to write into it (--force never replaces one)",
                kind_of(mode)
            )),
            mode => refused(format!("{shown} is {}: refusing to write over it", kind_of(mode))),
        },
    }
}

/// A new file `.ioscope-PID-N.tmp` in `dir`.
fn temporary(dir: RawFd, flags: libc::c_int) -> io::Result<(CString, OwnedFd)> {
    let mut n = 0u32;
    loop {
        let tmp = CString::new(format!(".ioscope-{}-{n}.tmp", std::process::id())).expect("no NUL");
        match openat(dir, &tmp, flags, 0o666) {
            Ok(fd) => return Ok((tmp, fd)),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) && n < 100 => n += 1,
            Err(e) => return Err(e),
        }
    }
}

/// Opens an existing FIFO or character device for writing without blocking: a FIFO with no
/// reader is tried again every [`READER_POLL`] while `keep_waiting` says so.
fn open_stream(
    dir: RawFd,
    name: &CString,
    keep_waiting: &mut dyn FnMut() -> bool,
) -> anyhow::Result<OwnedFd> {
    let flags = libc::O_WRONLY | libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY;
    let fd = loop {
        match openat(dir, name, flags, 0) {
            Ok(fd) => break fd,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                if !keep_waiting() {
                    anyhow::bail!("no reader opened the FIFO");
                }
                std::thread::sleep(READER_POLL);
            }
            Err(e) => return Err(e.into()),
        }
    };
    let st = fstat(fd.as_raw_fd())?;
    if !matches!(st.st_mode & libc::S_IFMT, libc::S_IFIFO | libc::S_IFCHR) {
        return refused(format!("it became {} while it was being opened", kind_of(st.st_mode)));
    }
    set_blocking(fd.as_raw_fd())?;
    Ok(fd)
}

/// Opens a file the user named for reading. The path is followed as written (links included: the
/// user chose it), but only a regular file is opened: a FIFO, a device, a socket or a directory
/// is refused without being opened. Errors name the path ("cannot read PATH: ...").
pub fn open_input(path: &Path) -> anyhow::Result<File> {
    use anyhow::Context;
    let shown = path.display();
    let c = c_string(path.as_os_str())?;
    let pinned =
        openat(libc::AT_FDCWD, &c, libc::O_PATH, 0).with_context(|| format!("cannot read {shown}"))?;
    let st = fstat(pinned.as_raw_fd()).with_context(|| format!("cannot read {shown}"))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return refused(format!(
            "{shown} is {}, not a regular file: refusing to read it",
            kind_of(st.st_mode)
        ));
    }
    // The same inode, opened for reading through the O_PATH descriptor; where /proc is missing,
    // by its name again (O_NONBLOCK: a FIFO swapped in meanwhile cannot block; refused below).
    let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
    let proc_path = CString::new(format!("/proc/self/fd/{}", pinned.as_raw_fd())).expect("no NUL");
    let fd = match openat(libc::AT_FDCWD, &proc_path, flags, 0) {
        Ok(fd) => Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => openat(libc::AT_FDCWD, &c, flags, 0),
        Err(e) => Err(e),
    }
    .with_context(|| format!("cannot read {shown}"))?;
    let now = fstat(fd.as_raw_fd()).with_context(|| format!("cannot read {shown}"))?;
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) || now.st_mode & libc::S_IFMT != libc::S_IFREG {
        return refused(format!("{shown} changed while it was being opened: refusing to read it"));
    }
    set_blocking(fd.as_raw_fd()).with_context(|| format!("cannot read {shown}"))?;
    Ok(File::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn never() -> impl FnMut() -> bool {
        || false
    }

    #[test]
    fn a_new_file_is_created_and_an_existing_one_kept_without_replace() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a");
        let mut out = create(&p, CreateOptions::default(), &mut never()).unwrap();
        out.file().write_all(b"one").unwrap();
        out.commit().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        let err = create(&p, CreateOptions::default(), &mut never()).err().unwrap();
        assert!(is_refused(&err) && err.to_string().contains("already exists"), "{err}");
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
    }

    #[test]
    fn replace_renames_over_the_name_and_leaves_a_hard_links_target_alone() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "secret").unwrap();
        let p = dir.path().join("a");
        std::fs::hard_link(&victim, &p).unwrap();
        let replace = CreateOptions { replace: true, stream: false };
        let mut out = create(&p, replace, &mut never()).unwrap();
        out.file().write_all(b"new").unwrap();
        // Until committed, the old content stays.
        assert_eq!(std::fs::read(&p).unwrap(), b"secret");
        // A symbolic link planted meanwhile is replaced, not followed.
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(&victim, &p).unwrap();
        out.commit().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert!(std::fs::symlink_metadata(&p).unwrap().is_file());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2, "no temporary file left");
        // Dropped before commit: the temporary file goes, the old file stays.
        drop(create(&p, replace, &mut never()).unwrap());
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn links_fifos_and_directories_are_refused_and_a_fifo_waits_only_while_asked() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
        let fifo = dir.path().join("fifo");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let all = CreateOptions { replace: true, stream: true };
        for (p, opts, says) in [
            (&link, all, "symbolic link"),
            (&fifo, CreateOptions { replace: true, stream: false }, "--stream"),
            (&dir.path().to_path_buf(), all, "a directory"),
        ] {
            let err = create(p, opts, &mut never()).err().unwrap();
            assert!(is_refused(&err) && format!("{err:#}").contains(says), "{p:?}: {err:#}");
        }
        assert!(!dir.path().join("nowhere").exists());
        let mut asked = 0;
        let err = create(&fifo, all, &mut || {
            asked += 1;
            asked < 3
        })
        .err()
        .unwrap();
        assert_eq!(asked, 3);
        assert!(format!("{err:#}").contains("no reader"), "{err:#}");
        // With a reader, the stream opens.
        let reader = std::thread::spawn({
            let fifo = fifo.clone();
            move || std::fs::read(fifo).unwrap()
        });
        let mut out = create(&fifo, all, &mut || true).unwrap();
        assert!(out.is_stream());
        out.file().write_all(b"streamed").unwrap();
        drop(out);
        assert_eq!(reader.join().unwrap(), b"streamed");
    }

    #[test]
    fn inputs_must_be_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "data").unwrap();
        let mut s = String::new();
        open_input(&p).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "data");
        let fifo = dir.path().join("fifo");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for p in [fifo.as_path(), Path::new("/dev/null"), dir.path()] {
            let err = open_input(p).err().unwrap();
            assert!(is_refused(&err) && err.to_string().contains("not a regular file"), "{err}");
        }
        let err = open_input(&dir.path().join("missing")).err().unwrap();
        assert!(!is_refused(&err) && format!("{err:#}").starts_with("cannot read"), "{err:#}");
    }
}
