//! What the benchmark runs against, and the safety rules: a test file in a directory (created,
//! removed after), an existing file (read-only unless --write), or a block device (read-only unless
//! --destructive). Also the facts the jobs need: size, free space, the block device under the file,
//! the filesystem, and O_DIRECT's alignment.

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Serialize;

use super::spec::size_label;

/// Room left on the filesystem beyond the test file, so a benchmark never fills a disk: 256 MiB,
/// or a tenth of a small filesystem.
pub const FREE_SPACE_HEADROOM: u64 = 256 << 20;

pub fn headroom(fs_total: u64) -> u64 {
    FREE_SPACE_HEADROOM.min(fs_total / 10)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// A test file ioscope created in a directory and removes afterwards.
    TestFile,
    /// A file that existed before.
    ExistingFile,
    /// A raw block device.
    Device,
}

#[derive(Clone, Debug, Serialize)]
pub struct Target {
    pub kind: TargetKind,
    /// The file (or device) the jobs read and write.
    pub path: PathBuf,
    /// Bytes of the file the jobs use.
    pub size: u64,
    /// Write jobs allowed (a test file; --write on a file; --destructive on a device).
    pub writable: bool,
    /// "ext4", "xfs", "tmpfs", ... or "block device".
    pub fs_type: String,
    /// The /proc/diskstats name of the block device holding the file (None on tmpfs, overlay...).
    pub device: Option<String>,
    pub device_major: u32,
    pub device_minor: u32,
    /// O_DIRECT alignment for offsets and sizes, and for buffer addresses (statx STATX_DIOALIGN,
    /// else the device's logical block size). 0 = O_DIRECT is not supported here.
    pub dio_offset_align: u64,
    pub dio_mem_align: u64,
    /// Why O_DIRECT is not available, when it is not.
    pub dio_note: Option<String>,
    /// A device benchmarked with writes, opened with O_EXCL for the whole run: nothing can mount
    /// it, swapon it or stack a device on it while the jobs overwrite it.
    #[serde(skip)]
    pub exclusive: Option<std::sync::Arc<fs::File>>,
    /// The file the jobs use, held open (an `O_PATH` descriptor for an existing file, the laid-out
    /// test file): each job reopens this inode through `/proc/self/fd`, never the path again, so a
    /// name swapped for a link meanwhile (a test file in a world-writable directory) is not
    /// followed. None for a device.
    #[serde(skip)]
    pub pinned: Option<std::sync::Arc<fs::File>>,
    /// What resolving did that the user should hear (stale test files removed).
    #[serde(skip)]
    pub notes: Vec<String>,
}

/// What the user asked for on the command line.
#[derive(Clone, Debug, Default)]
pub struct TargetRequest {
    pub path: Option<PathBuf>,
    pub device: Option<PathBuf>,
    /// --size, if given.
    pub size: Option<u64>,
    /// Write jobs are in the matrix.
    pub wants_write: bool,
    /// --write: overwriting an existing file is allowed.
    pub write: bool,
    /// --destructive: writing to a block device is allowed.
    pub destructive: bool,
}

/// The default size of a test file created in a directory.
pub const DEFAULT_TEST_FILE_SIZE: u64 = 512 << 20;

/// Checks the request against the safety rules and the system, and describes the target.
/// Nothing is created or written here; the only change is the removal of test files that killed
/// runs left in the directory (said in `notes`).
pub fn resolve(req: &TargetRequest) -> anyhow::Result<Target> {
    match (&req.path, &req.device) {
        (Some(_), Some(_)) => bail!("give either a PATH or --device DEV, not both"),
        (None, None) => bail!("nothing to benchmark: give a directory, a file, or --device DEV"),
        (None, Some(dev)) => resolve_device(dev, req),
        (Some(path), None) => resolve_path(path, req),
    }
}

fn resolve_device(dev: &Path, req: &TargetRequest) -> anyhow::Result<Target> {
    let meta = fs::metadata(dev).with_context(|| format!("cannot use --device {}", dev.display()))?;
    if !meta.file_type().is_block_device() {
        bail!("{} is not a block device (give a file or directory as PATH instead)", dev.display());
    }
    if req.wants_write && !req.destructive {
        bail!(
            "refusing to write to block device {}: write jobs destroy its contents; add --destructive, \
             or use --rw read,randread",
            dev.display()
        );
    }
    let (major, minor) = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
    let exclusive = if req.wants_write {
        let claimed = device_in_use(major, minor).map_or_else(|| claim(dev), Err);
        match claimed {
            Ok(file) => Some(std::sync::Arc::new(file)),
            Err(why) => bail!("refusing to write to {}: {why}", dev.display()),
        }
    } else {
        None
    };
    let file = fs::File::open(dev).with_context(|| format!("cannot open {}", dev.display()))?;
    let dev_size =
        block_device_size(&file).with_context(|| format!("cannot read the size of {}", dev.display()))?;
    let size = match req.size {
        Some(s) if s > dev_size => {
            bail!("--size {} is larger than {} ({})", size_label(s), dev.display(), size_label(dev_size))
        }
        Some(s) => s,
        None => dev_size.min(DEFAULT_TEST_FILE_SIZE * 2),
    };
    let name = sysfs_name(major, minor);
    let lbs = name.as_deref().and_then(logical_block_size).unwrap_or(512);
    Ok(Target {
        kind: TargetKind::Device,
        path: dev.to_path_buf(),
        size,
        writable: req.destructive,
        fs_type: "block device".into(),
        device: name,
        device_major: major,
        device_minor: minor,
        dio_offset_align: lbs,
        dio_mem_align: lbs,
        dio_note: None,
        exclusive,
        pinned: None,
        notes: Vec::new(),
    })
}

fn resolve_path(path: &Path, req: &TargetRequest) -> anyhow::Result<Target> {
    let meta = fs::metadata(path).with_context(|| format!("cannot use {}", path.display()))?;
    let ft = meta.file_type();
    if ft.is_block_device() {
        bail!(
            "{} is a block device: use --device {} (and --destructive for writes)",
            path.display(),
            path.display()
        );
    }
    let mut notes = Vec::new();
    let (kind, file_path, size, writable) = if meta.is_dir() {
        let size = req.size.unwrap_or(DEFAULT_TEST_FILE_SIZE);
        // Test files of killed runs (SIGKILL, a crash, a power cut) go first: they are ours.
        let mut kept = Vec::new();
        for stale in stale_test_files(path) {
            let label = format!("{} ({}", stale.path.display(), size_label_approx(stale.bytes));
            // Only a dead run's file is removed.
            match &stale.owner {
                Some(owner) => kept.push(format!("{label}, {owner})")),
                None => match fs::remove_file(&stale.path) {
                    Ok(()) => notes
                        .push(format!("removed {label}), the test file of an earlier run that was killed")),
                    Err(e) => kept.push(format!("{label}, left by a killed run; cannot remove it: {e})")),
                },
            }
        }
        let (free, total) = free_bytes(path)?;
        let headroom = headroom(total);
        if size.checked_add(headroom).is_none_or(|need| free < need) {
            let others = if kept.is_empty() {
                String::new()
            } else {
                format!("; other bench test files there: {}", kept.join(", "))
            };
            bail!(
                "not enough free space in {}: the test file needs {} plus {} headroom, {} is free \
                 (use a smaller --size){others}",
                path.display(),
                size_label_approx(size),
                size_label_approx(headroom),
                size_label_approx(free)
            );
        }
        let name = format!(".ioscope-bench-{}.tmp", std::process::id());
        (TargetKind::TestFile, path.join(name), size, true)
    } else if ft.is_file() {
        if req.wants_write && !req.write {
            bail!(
                "refusing to write to {}: it exists and write jobs would overwrite it; add --write, \
                 or use --rw read,randread",
                path.display()
            );
        }
        let len = meta.len();
        let size = match req.size {
            Some(s) if s > len => bail!(
                "--size {} is larger than {} ({} bytes); reads stay within the file",
                size_label(s),
                path.display(),
                len
            ),
            Some(s) => s,
            None => len,
        };
        if size == 0 {
            bail!("{} is empty: nothing to read", path.display());
        }
        (TargetKind::ExistingFile, path.to_path_buf(), size, req.write)
    } else if ft.is_fifo() || ft.is_char_device() || ft.is_socket() {
        bail!(
            "{} is not a regular file: bench reads a regular file, a directory or --device DEV",
            path.display()
        );
    } else {
        bail!("{} is neither a directory, a regular file nor a block device", path.display());
    };
    let dev = meta.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let device = if major == 0 { None } else { sysfs_name(major, minor) };
    let fs_type = filesystem_type(path, major, minor).unwrap_or_else(|| "unknown".into());
    let (off, mem) = dio_alignment(path, device.as_deref());
    // The existing file the user named, pinned: the jobs reopen this inode, whatever the name
    // becomes meanwhile (O_PATH opens nothing; a regular file was checked above).
    let pinned = if kind == TargetKind::ExistingFile {
        use std::os::unix::fs::OpenOptionsExt;
        let f = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        let now = f.metadata().with_context(|| format!("cannot open {}", path.display()))?;
        if !now.is_file() || (now.dev(), now.ino()) != (meta.dev(), meta.ino()) {
            bail!("{} changed while it was being opened", path.display());
        }
        Some(std::sync::Arc::new(f))
    } else {
        None
    };
    Ok(Target {
        kind,
        path: file_path,
        size,
        writable,
        fs_type,
        device,
        device_major: major,
        device_minor: minor,
        dio_offset_align: off,
        dio_mem_align: mem,
        dio_note: None,
        exclusive: None,
        pinned,
        notes,
    })
}

/// A `.ioscope-bench-PID.tmp` file other than ours in a test directory.
#[derive(Clone, Debug, PartialEq)]
pub struct StaleTestFile {
    pub path: PathBuf,
    pub bytes: u64,
    /// Who still uses it ("in use by the running ioscope bench pid 123"), or None: its run is dead.
    pub owner: Option<String>,
}

/// The bench test files in `dir` left by other runs. A run holds an flock on its test file for
/// its whole life, and the kernel drops the lock when the process dies however it dies (SIGKILL
/// included): a file whose lock can be taken, and whose PID is not a running ioscope (a run of an
/// older ioscope took no lock), belongs to a dead run.
pub fn stale_test_files(dir: &Path) -> Vec<StaleTestFile> {
    use std::os::fd::AsRawFd;
    let Ok(entries) = fs::read_dir(dir) else { return Vec::new() };
    let mut out = Vec::new();
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(".ioscope-bench-")
            .and_then(|n| n.strip_suffix(".tmp"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let path = e.path();
        let Ok(meta) = fs::symlink_metadata(&path) else { continue };
        if !meta.is_file() || pid == std::process::id() {
            continue;
        }
        // Not followed, never blocking: the name is in a directory others may write to.
        let open = {
            use std::os::unix::fs::OpenOptionsExt;
            fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
                .open(&path)
                .ok()
                .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))
        };
        let locked = match open {
            // SAFETY: flock on an open descriptor; the lock goes with the file when it is closed.
            Some(f) => (unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }) != 0,
            None => false,
        };
        let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let owner = if locked {
            Some(format!("in use by a running ioscope bench (pid {pid}, or in another PID namespace)"))
        } else if comm.trim() == "ioscope" {
            Some(format!("perhaps in use by the running ioscope pid {pid}"))
        } else {
            None
        };
        out.push(StaleTestFile { path, bytes: meta.len(), owner });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// Sizes in free-space messages: binary units with one decimal ("1.5G").
pub fn size_label_approx(bytes: u64) -> String {
    crate::ui::format::human_bytes(bytes as f64)
}

/// Bytes available to an unprivileged writer on the filesystem holding `dir` (statvfs f_bavail),
/// and the filesystem's size.
pub fn free_bytes(dir: &Path) -> anyhow::Result<(u64, u64)> {
    let c = CString::new(dir.as_os_str().as_bytes())?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid C string and st a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("statvfs {}", dir.display()));
    }
    Ok((st.f_bavail as u64 * st.f_frsize as u64, st.f_blocks as u64 * st.f_frsize as u64))
}

/// BLKGETSIZE64: a block device's size in bytes.
fn block_device_size(file: &fs::File) -> std::io::Result<u64> {
    use std::os::fd::AsRawFd;
    const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 to the pointer we pass. The request's type is c_ulong in
    // glibc and c_int in musl: `as _` keeps the same bits for either.
    if unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64 as _, &mut size) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(size)
}

/// The kernel's name for a block device number ("vda", "loop3", "nvme0n1p2"), from
/// /sys/dev/block/MAJ:MIN/uevent.
pub fn sysfs_name(major: u32, minor: u32) -> Option<String> {
    let uevent = fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent")).ok()?;
    uevent.lines().find_map(|l| l.strip_prefix("DEVNAME=")).map(str::to_string)
}

/// queue/logical_block_size of a device (a partition's is its disk's: sysfs links both).
fn logical_block_size(name: &str) -> Option<u64> {
    let own = format!("/sys/class/block/{name}/queue/logical_block_size");
    let parent = format!("/sys/class/block/{name}/../queue/logical_block_size");
    [own, parent].iter().find_map(|p| fs::read_to_string(p).ok()?.trim().parse().ok())
}

/// Why writing to a device would destroy something in use, or None when nothing uses it. Counts
/// the device and, for a whole disk, each of its partitions: a mounted filesystem
/// (/proc/self/mountinfo, by device number), a holder stacked on it (device-mapper, LVM, md, bcache:
/// /sys/class/block/NAME/holders), active swap (/proc/swaps). For a partition, the disk it is on
/// counts too (a holder of the whole disk, e.g. multipath). [`claim`] then catches any other
/// exclusive user.
fn device_in_use(major: u32, minor: u32) -> Option<String> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let swaps = fs::read_to_string("/proc/swaps").unwrap_or_default();
    for part in related_devices(major, minor) {
        let what = if (part.major, part.minor) == (major, minor) {
            "it".to_string()
        } else {
            format!("{} {}", part.relation, part.name)
        };
        let devnum = format!("{}:{}", part.major, part.minor);
        if let Some(line) = mountinfo.lines().find(|l| l.split_whitespace().nth(2) == Some(devnum.as_str())) {
            let mnt = unescape_mount(line.split_whitespace().nth(4).unwrap_or("?"));
            return Some(format!("{what} is mounted on {mnt}; unmount it first"));
        }
        let holders = format!("/sys/class/block/{}/holders", part.name);
        let held: Vec<String> = fs::read_dir(&holders)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        if !held.is_empty() {
            return Some(format!(
                "{what} is in use by {} (device-mapper, LVM, md or similar; see {holders})",
                held.join(", ")
            ));
        }
        if let Some(swap) = swap_on(&swaps, part.major, part.minor) {
            return Some(format!("{what} is active swap ({swap}); swapoff it first"));
        }
    }
    None
}

/// A block device related to the one benchmarked: itself, its partitions, or the disk it is on.
struct RelatedDevice {
    name: String,
    major: u32,
    minor: u32,
    /// "partition" or "disk" (how it relates to the benchmarked device).
    relation: &'static str,
}

/// The device itself, then each of its partitions (a whole disk) or its disk (a partition), from
/// /sys/dev/block/MAJ:MIN.
fn related_devices(major: u32, minor: u32) -> Vec<RelatedDevice> {
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let name = sysfs_name(major, minor).unwrap_or_else(|| format!("{major}:{minor}"));
    let mut out = vec![RelatedDevice { name, major, minor, relation: "it" }];
    let numbers = |dir: &Path| -> Option<(String, u32, u32)> {
        let dev = fs::read_to_string(dir.join("dev")).ok()?;
        let (ma, mi) = dev.trim().split_once(':')?;
        let uevent = fs::read_to_string(dir.join("uevent")).unwrap_or_default();
        let name = uevent.lines().find_map(|l| l.strip_prefix("DEVNAME="))?.to_string();
        Some((name, ma.parse().ok()?, mi.parse().ok()?))
    };
    if sys.join("partition").exists() {
        if let Some((name, major, minor)) = numbers(&sys.join("..")) {
            out.push(RelatedDevice { name, major, minor, relation: "its disk" });
        }
    } else if let Ok(entries) = fs::read_dir(&sys) {
        let mut parts: Vec<RelatedDevice> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.join("partition").exists())
            .filter_map(|p| numbers(&p))
            .map(|(name, major, minor)| RelatedDevice { name, major, minor, relation: "its partition" })
            .collect();
        parts.sort_by_key(|p| p.minor);
        out.extend(parts);
    }
    out
}

/// The /proc/swaps entry (a partition, or a swap file on a filesystem of the device) whose device
/// is `major:minor`.
fn swap_on(swaps: &str, major: u32, minor: u32) -> Option<String> {
    swaps.lines().skip(1).find_map(|line| {
        let name = unescape_mount(line.split_whitespace().next()?);
        let meta = fs::metadata(&name).ok()?;
        let dev = if meta.file_type().is_block_device() { meta.rdev() } else { meta.dev() };
        (libc::major(dev) == major && libc::minor(dev) == minor).then_some(name)
    })
}

/// Opens the device with O_EXCL and keeps it: the kernel refuses (EBUSY) while anyone holds the
/// device or one of its partitions exclusively (a mounted filesystem, swap, a device-mapper/md
/// holder, mkfs, a program that opened it with O_EXCL, another bench); once open, nothing else can
/// mount it, swapon it or stack a device on it until the file is closed.
fn claim(dev: &Path) -> Result<fs::File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    match fs::OpenOptions::new().read(true).custom_flags(libc::O_EXCL).open(dev) {
        Ok(f) => Ok(f),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err("it is in use: the kernel refuses \
             exclusive access (a mounted filesystem, swap, a device-mapper/md holder, or a program \
             holding it open; see lsblk and fuser)"
            .to_string()),
        Err(e) => Err(format!("cannot open it exclusively: {e}")),
    }
}

/// The filesystem type holding `path`: the /proc/self/mountinfo entry for the same device whose
/// mount point is the longest prefix of the path.
fn filesystem_type(path: &Path, major: u32, minor: u32) -> Option<String> {
    let canon = fs::canonicalize(path).ok()?;
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let devnum = format!("{major}:{minor}");
    let mut best: Option<(usize, String)> = None;
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else { continue };
        if fields.get(2) != Some(&devnum.as_str()) {
            continue;
        }
        let mnt = unescape_mount(fields.get(4)?);
        if !canon.starts_with(&mnt) {
            continue;
        }
        let len = mnt.len();
        if best.as_ref().is_none_or(|(l, _)| len > *l) {
            best = Some((len, fields.get(sep + 1)?.to_string()));
        }
    }
    best.map(|(_, t)| t)
}

/// mountinfo escapes space, tab, newline and backslash as octal (\040).
fn unescape_mount(s: &str) -> String {
    s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
}

/// O_DIRECT alignment (offset/length, memory) for files in `path`: statx STATX_DIOALIGN (Linux
/// 6.1+), which knows the filesystem's own rules; else the device's logical block size.
/// (0, 0) when the filesystem says it does not support O_DIRECT.
fn dio_alignment(path: &Path, device: Option<&str>) -> (u64, u64) {
    if let Some((off, mem)) = statx_dioalign(path) {
        return (off, mem);
    }
    let lbs = device.and_then(logical_block_size).unwrap_or(4096);
    (lbs, lbs)
}

fn statx_dioalign(path: &Path) -> Option<(u64, u64)> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid C string and stx a writable statx.
    let rc = unsafe { libc::statx(libc::AT_FDCWD, c.as_ptr(), 0, libc::STATX_DIOALIGN, &mut stx) };
    if rc != 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 {
        return None;
    }
    Some((stx.stx_dio_offset_align as u64, stx.stx_dio_mem_align as u64))
}

/// For a directory target, statx on the directory may not report DIOALIGN (some filesystems only
/// answer for regular files): ask again on the test file once it exists.
pub fn refresh_dio_alignment(target: &mut Target) {
    if let Some((off, mem)) = statx_dioalign(&target.path) {
        target.dio_offset_align = off;
        target.dio_mem_align = mem;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headroom_is_256m_or_a_tenth_of_a_small_filesystem() {
        assert_eq!(headroom(100 << 30), 256 << 20);
        assert_eq!(headroom(200 << 20), 20 << 20);
    }

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(unescape_mount("/mnt/my\\040disk"), "/mnt/my disk");
    }

    #[test]
    fn path_and_device_are_exclusive_and_one_is_needed() {
        let both = TargetRequest {
            path: Some("/tmp".into()),
            device: Some("/dev/null".into()),
            ..Default::default()
        };
        assert!(resolve(&both).unwrap_err().to_string().contains("not both"));
        assert!(resolve(&TargetRequest::default()).unwrap_err().to_string().contains("nothing to benchmark"));
    }

    #[test]
    fn a_character_device_is_not_a_block_device() {
        let req = TargetRequest { device: Some("/dev/null".into()), ..Default::default() };
        assert!(resolve(&req).unwrap_err().to_string().contains("not a block device"));
    }
}
