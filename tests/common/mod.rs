//! Helpers shared by the tests (both binaries, tests/offline and tests/live): when a root-only
//! test may run, each live module's turn, and throwaway loop devices (optionally with a mounted
//! filesystem) that are torn down even when the test fails.
#![allow(dead_code)] // the offline binary uses a few of them

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

pub mod exporter;
pub mod ui;

/// Set (to 1) in CI: root/eBPF tests must run and pass instead of skipping.
pub const REQUIRE_ENV: &str = "IOSCOPE_REQUIRE_BPF";

pub fn required() -> bool {
    std::env::var(REQUIRE_ENV).map(|v| v == "1").unwrap_or(false)
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// True when a root-only test may go on. Otherwise prints why it is skipped and returns false, or
/// panics when `IOSCOPE_REQUIRE_BPF=1` says skipping is not allowed.
pub fn require_root(test: &str) -> bool {
    if is_root() {
        return true;
    }
    skip(test, "needs root (loop devices, tracefs, eBPF)")
}

/// Prints the skip reason (or panics when skipping is not allowed) and returns false.
pub fn skip(test: &str, reason: &str) -> bool {
    if required() {
        panic!("{test}: cannot run ({reason}) but {REQUIRE_ENV}=1 requires it");
    }
    eprintln!("SKIPPED {test}: {reason}");
    false
}

/// Which live module's tests are running, and how many of them.
static GROUP: std::sync::Mutex<(Option<&'static str>, usize)> = std::sync::Mutex::new((None, 0));
static GROUP_FREE: std::sync::Condvar = std::sync::Condvar::new();

/// The live tests are one binary, but each module's tests measure the machine's I/O and must not
/// run beside another module's (as when each module was its own binary, run one after the other):
/// every live test starts with `let _group = common::live_group(module_path!());`. Tests of the
/// same module run side by side as before (those that must not hold their module's own lock);
/// a test of another module waits until the running module's tests have all finished.
pub fn live_group(module: &'static str) -> LiveGroup {
    let mut g = GROUP.lock().unwrap_or_else(|e| e.into_inner());
    while g.0.is_some_and(|m| m != module) {
        g = GROUP_FREE.wait(g).unwrap_or_else(|e| e.into_inner());
    }
    *g = (Some(module), g.1 + 1);
    LiveGroup
}

/// A live test's share of its module's turn; the last one of a module to drop ends the turn.
pub struct LiveGroup;

impl Drop for LiveGroup {
    fn drop(&mut self) {
        let mut g = GROUP.lock().unwrap_or_else(|e| e.into_inner());
        g.1 -= 1;
        if g.1 == 0 {
            g.0 = None;
            GROUP_FREE.notify_all();
        }
    }
}

/// The name libtest gives test `f` of the module whose `module_path!()` is `module` (the crate's
/// name left out: `live_syncs::child_entry_point`), to re-run it alone with `--exact`.
pub fn test_name(module: &str, f: &str) -> String {
    let within_crate = module.split_once("::").map_or("", |(_, rest)| rest);
    if within_crate.is_empty() {
        f.to_string()
    } else {
        format!("{within_crate}::{f}")
    }
}

/// Runs a command and returns its stdout, panicking with its stderr on failure.
pub fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot start {cmd}: {e} (is it installed?)"));
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A loop device backed by a sparse image file on a real disk, detached and deleted on drop.
pub struct LoopDevice {
    /// e.g. /dev/loop3
    pub path: PathBuf,
    /// e.g. loop3 (the name in /proc/diskstats and /sys/block)
    pub name: String,
    pub major: u32,
    pub minor: u32,
    /// Where the filesystem is mounted, for `with_fs`.
    pub mount: Option<PathBuf>,
    image: PathBuf,
    workdir: PathBuf,
}

impl LoopDevice {
    /// A bare loop device of `size_mib` MiB. The image lives under /var/tmp (a real disk, not tmpfs).
    pub fn new(size_mib: u64) -> LoopDevice {
        LoopDevice::new_in(Path::new("/var/tmp"), size_mib)
    }

    /// A bare loop device whose image lives under `parent` (e.g. /dev/shm for a device that only
    /// costs CPU, with no real disk below it to share with anything else).
    pub fn new_in(parent: &Path, size_mib: u64) -> LoopDevice {
        let workdir = unique_dir_in(parent);
        let image = workdir.join("disk.img");
        let f = fs::File::create(&image).expect("create loop image");
        f.set_len(size_mib << 20).expect("size loop image");
        drop(f);
        let dev = run("losetup", &["--find", "--show", image.to_str().unwrap()]).trim().to_string();
        let path = PathBuf::from(&dev);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let devnum = fs::read_to_string(format!("/sys/block/{name}/dev")).expect("loop dev number");
        let (major, minor) = devnum.trim().split_once(':').expect("major:minor");
        // A loop device keeps its queue limits across detach: a test that lowered max_sectors_kb
        // (live_syncs makes its fsync slow with 4 KiB requests) left the next user of the device
        // splitting its requests. Each test starts from the block layer's default, 1280 KiB capped
        // by what the device takes.
        let queue = format!("/sys/block/{name}/queue");
        let hw: u64 = fs::read_to_string(format!("{queue}/max_hw_sectors_kb"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1280);
        let _ = fs::write(format!("{queue}/max_sectors_kb"), hw.min(1280).to_string());
        LoopDevice {
            path,
            name,
            major: major.parse().unwrap(),
            minor: minor.parse().unwrap(),
            mount: None,
            image,
            workdir,
        }
    }

    /// A loop device with a fresh `fstype` filesystem (ext4, xfs) mounted in a temporary directory.
    pub fn with_fs(size_mib: u64, fstype: &str) -> LoopDevice {
        LoopDevice::with_fs_in(Path::new("/var/tmp"), size_mib, fstype)
    }

    /// [`LoopDevice::with_fs`] with the image under `parent`.
    pub fn with_fs_in(parent: &Path, size_mib: u64, fstype: &str) -> LoopDevice {
        let mut lo = LoopDevice::new_in(parent, size_mib);
        let dev = lo.path.to_str().unwrap().to_string();
        match fstype {
            // Inode tables and journal zeroed now: no background initialisation (ext4lazyinit's
            // WRITE_ZEROES, which diskstats counts as writes and rwbs shows as `N`) while a test
            // measures the device.
            "ext4" => run("mkfs.ext4", &["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", &dev]),
            "xfs" => run("mkfs.xfs", &["-q", "-f", &dev]),
            other => panic!("unsupported filesystem {other}"),
        };
        let mnt = lo.workdir.join("mnt");
        fs::create_dir(&mnt).unwrap();
        run("mount", &["-t", fstype, &dev, mnt.to_str().unwrap()]);
        lo.mount = Some(mnt);
        lo
    }

    /// A loop device whose image is under `parent` (a real disk) with direct I/O to the image
    /// (`losetup --direct-io=on`): requests go straight to the disk below, with no second copy in
    /// the host's page cache and no write-back of the image that could land in a later
    /// measurement. ext4 is made with its inode tables and journal zeroed at mkfs
    /// (`lazy_itable_init=0,lazy_journal_init=0`), so no background initialisation writes to
    /// the device while the test measures it.
    pub fn ext4_direct_io_in(parent: &Path, size_mib: u64) -> LoopDevice {
        let mut lo = LoopDevice::new_in(parent, size_mib);
        let dev = lo.path.to_str().unwrap().to_string();
        run("losetup", &["--direct-io=on", &dev]);
        run("mkfs.ext4", &["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", &dev]);
        let mnt = lo.workdir.join("mnt");
        fs::create_dir(&mnt).unwrap();
        run("mount", &["-t", "ext4", &dev, mnt.to_str().unwrap()]);
        lo.mount = Some(mnt);
        lo
    }

    /// Whether the loop driver does direct I/O to the image (/sys/block/NAME/loop/dio).
    pub fn direct_io(&self) -> bool {
        fs::read_to_string(format!("/sys/block/{}/loop/dio", self.name))
            .map(|s| s.trim() == "1")
            .unwrap_or(false)
    }

    pub fn mount_point(&self) -> &Path {
        self.mount.as_deref().expect("loop device has no filesystem")
    }

    /// The device's counters from /proc/diskstats, numbered as in Documentation/admin-guide/iostats.rst
    /// less one: `[0]` reads completed, `[2]` sectors read, `[4]` writes completed, `[6]` sectors written.
    pub fn diskstats(&self) -> Vec<u64> {
        let all = fs::read_to_string("/proc/diskstats").unwrap();
        let line = all
            .lines()
            .find(|l| l.split_whitespace().nth(2) == Some(self.name.as_str()))
            .unwrap_or_else(|| panic!("{} not in /proc/diskstats", self.name));
        line.split_whitespace().skip(3).map(|f| f.parse().unwrap()).collect()
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        if let Some(mnt) = &self.mount {
            let mnt = mnt.to_string_lossy().into_owned();
            // Lazy unmount so a file still open by a failed test cannot keep the device busy.
            let ok = Command::new("umount").arg(&mnt).status().map(|s| s.success()).unwrap_or(false);
            if !ok {
                let _ = Command::new("umount").args(["-l", &mnt]).status();
            }
        }
        let _ = Command::new("losetup").arg("-d").arg(&self.path).status();
        let _ = fs::remove_file(&self.image);
        let _ = fs::remove_dir_all(&self.workdir);
    }
}

fn unique_dir_in(parent: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let dir =
        parent.join(format!("ioscope-test-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create test dir {}: {e}", dir.display()));
    dir
}

/// The dirty-page sysctls as they were (the four limits and the expiry age); written back on drop
/// (also when a test panics). Writing a `_bytes` setting zeroes its `_ratio` twin and vice versa,
/// so the non-zero one of each pair is restored.
pub struct DirtySettingsGuard {
    /// (ratio, bytes) pairs.
    saved: Vec<(&'static str, String)>,
    expire: String,
}

impl DirtySettingsGuard {
    const VM: &'static str = "/proc/sys/vm";

    pub fn save() -> DirtySettingsGuard {
        let read = |name: &'static str| (name, fs::read_to_string(Path::new(Self::VM).join(name)).unwrap());
        DirtySettingsGuard {
            saved: vec![
                read("dirty_ratio"),
                read("dirty_bytes"),
                read("dirty_background_ratio"),
                read("dirty_background_bytes"),
            ],
            expire: read("dirty_expire_centisecs").1,
        }
    }

    pub fn set(&self, name: &str, value: u64) {
        fs::write(Path::new(Self::VM).join(name), value.to_string())
            .unwrap_or_else(|e| panic!("set vm.{name}: {e}"));
    }
}

impl Drop for DirtySettingsGuard {
    fn drop(&mut self) {
        for pair in self.saved.chunks(2) {
            let (ratio, bytes) = (&pair[0], &pair[1]);
            let (name, value) = if bytes.1.trim() != "0" { bytes } else { ratio };
            if let Err(e) = fs::write(Path::new(Self::VM).join(name), value.trim()) {
                eprintln!("FAILED to restore vm.{name}={}: {e}", value.trim());
            }
        }
        let path = Path::new(Self::VM).join("dirty_expire_centisecs");
        if let Err(e) = fs::write(path, self.expire.trim()) {
            eprintln!("FAILED to restore vm.dirty_expire_centisecs={}: {e}", self.expire.trim());
        }
    }
}

/// Writes `mib` MiB of patterned (not all-zero, so no filesystem can skip it) content to `path` and
/// syncs it to the disk, so a later read after eviction really comes from the device.
pub fn write_patterned_file(path: &Path, mib: u64) {
    use std::io::Write;
    let mut f = fs::File::create(path).unwrap();
    let mut block = vec![0u8; 1 << 20];
    for i in 0..mib {
        for (j, b) in block.iter_mut().enumerate() {
            *b = (j as u64 * 31 + i * 7) as u8;
        }
        f.write_all(&block).unwrap();
    }
    f.sync_all().unwrap();
}

/// Pages of the file at `path` in the page cache now (mincore on a mapping never touched).
pub fn cached_pages(path: &Path) -> u64 {
    use std::os::fd::AsRawFd;
    let f = fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    if len == 0 {
        return 0;
    }
    // SAFETY: a read-only shared mapping of an open file, only passed to mincore and unmapped.
    unsafe {
        let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0);
        assert_ne!(p, libc::MAP_FAILED, "mmap {}", path.display());
        let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
        let mut vec = vec![0u8; len.div_ceil(page)];
        assert_eq!(libc::mincore(p, len, vec.as_mut_ptr()), 0, "mincore {}", path.display());
        libc::munmap(p, len);
        vec.iter().filter(|&&b| b & 1 == 1).count() as u64
    }
}

/// Drops the file at `path` from the page cache (synced, then POSIX_FADV_DONTNEED) and checks it
/// is gone. One DONTNEED can leave pages still in another CPU's LRU batch (or under writeback),
/// so it is repeated, for up to 2 s, until mincore finds none.
pub fn drop_file_cache(path: &Path) {
    use std::os::fd::AsRawFd;
    let f = fs::File::open(path).unwrap();
    f.sync_all().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        // SAFETY: a valid descriptor; advice only.
        assert_eq!(unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) }, 0);
        let left = cached_pages(path);
        if left == 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{}: {left} pages still cached after POSIX_FADV_DONTNEED for 2 s",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A copy of the running test binary re-run as a worker process (the `child_entry_point` test of
/// `module`, the caller's `module_path!()`, with `mode_var` = mode and `file_var` = file in its
/// environment), talking over its stdio: it prints markers, the parent answers with a byte on its
/// stdin. The live tests use it so that the I/O measured is a process of its own, started and set
/// up before the "before" sample.
pub struct TestChild {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
    stdin: Option<std::process::ChildStdin>,
    mode: String,
}

impl TestChild {
    pub fn spawn(module: &str, mode_var: &str, mode: &str, file_var: &str, file: &Path) -> TestChild {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &test_name(module, "child_entry_point"), "--nocapture", "--test-threads=1"])
            .env(mode_var, mode)
            .env(file_var, file)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        let stdin = child.stdin.take();
        TestChild { child, out, stdin, mode: mode.to_string() }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads the child's output up to a line holding `marker`.
    pub fn wait_for(&mut self, marker: &str) {
        use std::io::BufRead;
        let mut line = String::new();
        while !line.contains(marker) {
            line.clear();
            let n = self.out.read_line(&mut line).unwrap();
            assert!(n > 0, "child {} ended before {marker}", self.mode);
        }
    }

    /// One byte to the child's stdin (its go, see `child_signal_and_wait`).
    pub fn send(&mut self, byte: u8) {
        use std::io::Write;
        self.stdin.as_mut().expect("stdin still open").write_all(&[byte]).unwrap();
    }

    /// Closes its stdin, drains its output (so it never blocks on a full pipe) and checks it
    /// succeeded.
    pub fn finish(mut self) {
        drop(self.stdin.take());
        std::io::copy(&mut self.out, &mut std::io::sink()).unwrap();
        assert!(self.child.wait().unwrap().success(), "child {} failed", self.mode);
    }
}

/// The child's side: prints `marker` and waits for the parent's byte.
pub fn child_signal_and_wait(marker: &str) {
    use std::io::{Read, Write};
    println!("{marker}");
    std::io::stdout().flush().unwrap();
    let mut go = [0u8; 1];
    std::io::stdin().read_exact(&mut go).unwrap();
}

/// Whether the running kernel describes itself in BTF (then ioscope's BTF tracepoint programs
/// must attach).
/// The lines of `from` (a child's stdout or stderr), read on a thread of their own so that the
/// child never blocks on a full pipe; the channel ends with the stream.
pub fn line_channel(from: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(from).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

pub fn kernel_has_btf() -> bool {
    Path::new(ioscope::bpf::kernel_btf::VMLINUX_BTF).exists()
}

/// The inode number of `path`.
pub fn ino(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).unwrap().ino()
}

/// Asserts `got` bytes are within 10 % of `want`.
pub fn within(what: &str, got: u64, want: u64) {
    let (lo, hi) = (want as f64 * 0.9, want as f64 * 1.1);
    assert!((got as f64) >= lo && (got as f64) <= hi, "{what}: {got} bytes, expected {want} ±10%");
}

/// The ioscope binary under test, as a command to give arguments to.
pub fn ioscope() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_ioscope"))
}

/// Runs ioscope with `args` to its end: (exit code, or -1 when killed; stdout; stderr).
pub fn ioscope_output(args: &[&str]) -> (i32, String, String) {
    let out = ioscope().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
