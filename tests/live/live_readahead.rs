//! Live readahead accuracy (root only), on a fresh loop-device ext4: a cold sequential read, the
//! write-only-database story through mmap (random 4 KiB touches of a cold 256 MiB mapping, with and
//! without MADV_RANDOM, the cache then dropped so unused read-around pages are evicted), and
//! read_ahead_kb changes. The reader is this test binary re-run as a child, which keeps the file
//! open until the parent has taken its last sample (so the path can be resolved from /proc).

use crate::common;

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;

use common::LoopDevice;
use ioscope::bpf::BpfCollector;
use ioscope::collect::{collect, SystemRoot};
use ioscope::model::readahead::{RaFileModel, ReadaheadModel};
use ioscope::model::Model;
use ioscope::sample::Sample;

const CHILD_MODE: &str = "IOSCOPE_LIVE_RA_CHILD";
const CHILD_FILE: &str = "IOSCOPE_LIVE_RA_FILE";
const READY: &str = "IOSCOPE_LIVE_RA_READY";
const DONE: &str = "IOSCOPE_LIVE_RA_DONE";
use crate::mmap_touch::{self, PAGE, TOUCHES};

static SERIAL: Mutex<()> = Mutex::new(());

/// The random reader's 4 KiB preads.
const PREADS: u64 = 2000;

fn child_main() -> bool {
    let Ok(mode) = std::env::var(CHILD_MODE) else { return false };
    let path = std::env::var(CHILD_FILE).unwrap();
    common::child_signal_and_wait(READY);
    let mut f = File::open(&path).unwrap();
    let mut kept = Vec::new();
    if mode == "small" {
        // `path` is a directory: every file in it read by `cat`, one process each (their paths
        // stay known: this child keeps each file open).
        let mut names: Vec<_> = std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()).collect();
        names.sort();
        for name in names {
            let cat = Command::new("cat").arg(&name).stdout(Stdio::null()).status().unwrap();
            assert!(cat.success(), "cat {}", name.display());
            kept.push(File::open(name).unwrap());
        }
    } else if mode == "pread-random" {
        // A database's random reads: 4 KiB preads at random page offsets (a fixed LCG).
        let pages = f.metadata().unwrap().len() / PAGE;
        let mut buf = vec![0u8; PAGE as usize];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..PREADS {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let page = (x >> 33) % pages;
            // SAFETY: plain syscall into our own buffer.
            let n = unsafe {
                libc::pread(f.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), (page * PAGE) as i64)
            };
            assert_eq!(n, PAGE as isize);
        }
    } else if mode == "seq" {
        let mut buf = vec![0u8; 128 << 10];
        while f.read(&mut buf).unwrap() > 0 {}
    } else {
        mmap_touch::touch_random_pages(&f, mode == "mmap-random");
    }
    // Keep the file open (and mapped) until the parent has sampled.
    common::child_signal_and_wait(DONE);
    true
}

#[test]
fn child_entry_point() {
    let _group = common::live_group(module_path!());
    // Only does something when run as the child (see child_main); a no-op in a normal test run.
    child_main();
}

/// Runs the child in `mode` on `file`: `before` once it is ready, `after` once its work is done
/// (while it still has the file open). Returns what `after` returned.
fn run_child<T>(mode: &str, file: &Path, before: impl FnOnce(), after: impl FnOnce() -> T) -> T {
    let mut child = common::TestChild::spawn(module_path!(), CHILD_MODE, mode, CHILD_FILE, file);
    child.wait_for(READY);
    before();
    child.send(b'g');
    child.wait_for(DONE);
    let r = after();
    child.send(b'x');
    child.finish();
    r
}

/// What a live readahead test holds while it runs: this module's turn among the live groups, the
/// tests' serial lock, and the collector with the readahead probes attached.
struct Live {
    _group: common::LiveGroup,
    _serial: std::sync::MutexGuard<'static, ()>,
    bpf: BpfCollector,
}

/// A live readahead test's start: None (skipped, said why) without root or the probes.
fn begin() -> Option<Live> {
    let group = common::live_group(module_path!());
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !common::require_root("live_readahead") {
        return None;
    }
    Some(Live { _group: group, _serial: serial, bpf: start()? })
}

fn start() -> Option<BpfCollector> {
    let bpf = BpfCollector::start();
    let st = bpf.status().clone();
    let wanted = ["readahead:page_cache_ra_order", "filemap:mm_filemap_add_to_page_cache"];
    if !wanted.iter().all(|t| st.programs.iter().any(|p| p.tracepoint == *t && p.attached)) {
        common::skip("live_readahead", &format!("readahead probes unavailable: {st:?}"));
        return None;
    }
    Some(bpf)
}

fn sample(bpf: &mut BpfCollector) -> Sample {
    let mut s = collect(&SystemRoot::live());
    s.bpf = bpf.read();
    assert!(s.bpf.readahead.is_some(), "readahead maps not read: {:?}", s.bpf.status);
    s
}

fn make_file(path: &Path, mib: u64) {
    common::write_patterned_file(path, mib);
    drop_cache(path);
}

/// Evicts the file's unmapped pages (POSIX_FADV_DONTNEED).
fn drop_cache(path: &Path) {
    let f = File::open(path).unwrap();
    // SAFETY: plain syscall on an open fd.
    assert_eq!(unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) }, 0);
}

fn set_read_ahead_kb(dev: &LoopDevice, kb: u64) {
    std::fs::write(format!("/sys/block/{}/queue/read_ahead_kb", dev.name), kb.to_string()).unwrap();
}

/// The model's readahead part between the two samples, and the file's row in it (None: no
/// readahead at all on the file).
fn file_row(before: &Sample, after: &Sample, path: &Path) -> (ReadaheadModel, Option<RaFileModel>) {
    let m = Model::between(before, after);
    let ra = m.readahead.expect("readahead model");
    let ino = std::fs::metadata(path).unwrap().ino();
    let row = ra.files.iter().find(|f| f.ino == ino).map(|f| RaFileModel::clone(f));
    if let Some(f) = &row {
        assert!(f.path_known && Path::new(&f.path) == path, "path of {}: {f:?}", path.display());
    }
    (ra, row)
}

/// bpftrace on the same tracepoint, as an independent count: pages added to the page cache for
/// the file while it runs. It prints its count with a kernel timestamp every 100 ms, and the test
/// takes the first count stamped after it asks. (Counting on bpftrace's print at exit failed once in
/// CI: no output within 60 s of SIGINT, and nothing to say why.)
struct Bpftrace {
    child: std::process::Child,
    /// bpftrace's stdout, line by line, from a reader thread (so a bpftrace that never prints
    /// fails the test after a timeout instead of hanging it).
    lines: std::sync::mpsc::Receiver<String>,
    /// bpftrace's stderr, read to its end by a thread (for the failure message).
    errors: Option<std::thread::JoinHandle<String>>,
}

/// How long bpftrace may take to attach, and to print a count once asked.
const BPFTRACE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// CLOCK_MONOTONIC in nanoseconds: the clock of bpftrace's `nsecs`.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: writes into our own timespec.
    assert_eq!(unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) }, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Bpftrace {
    fn start(path: &Path) -> Bpftrace {
        let ino = std::fs::metadata(path).unwrap().ino();
        let prog = format!(
            "BEGIN {{ @added = sum(0); printf(\"ready\\n\"); }} \
             tracepoint:filemap:mm_filemap_add_to_page_cache /args->i_ino == {ino}/ \
             {{ @added = sum(1 << args->order); }} \
             interval:ms:100 {{ printf(\"at %lld\\n\", nsecs); print(@added); }}"
        );
        let mut child = Command::new("bpftrace")
            .args(["-e", &prog])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bpftrace is installed (the test's independent check)");
        let lines = common::line_channel(child.stdout.take().unwrap());
        let mut err = child.stderr.take().unwrap();
        let errors = Some(std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
        }));
        let mut bt = Bpftrace { child, lines, errors };
        loop {
            match bt.lines.recv_timeout(BPFTRACE_TIMEOUT) {
                Ok(line) if line == "ready" => return bt,
                Ok(_) => {}
                Err(e) => bt.fail(&format!("did not attach within {BPFTRACE_TIMEOUT:?}: {e}")),
            }
        }
    }

    /// The pages added so far: the first count bpftrace stamped after this call.
    fn added(mut self) -> u64 {
        let asked = monotonic_ns();
        let mut fresh = false;
        loop {
            let line = match self.lines.recv_timeout(BPFTRACE_TIMEOUT) {
                Ok(line) => line,
                Err(e) => self.fail(&format!("no count within {BPFTRACE_TIMEOUT:?}: {e}")),
            };
            if let Some(at) = line.strip_prefix("at ") {
                fresh = at.trim().parse::<u64>().is_ok_and(|at| at > asked);
            } else if let Some(n) = line.strip_prefix("@added:").filter(|_| fresh) {
                match n.trim().parse() {
                    Ok(n) => return n,
                    Err(_) => self.fail(&format!("unreadable count {line:?}")),
                }
            }
        }
    }

    fn fail(&mut self, why: &str) -> ! {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // bpftrace is gone, so its stderr is at its end: the reader returns all of it.
        let errors = self.errors.take().and_then(|h| h.join().ok()).unwrap_or_default();
        panic!("bpftrace {why}; its stderr: {errors}");
    }
}

impl Drop for Bpftrace {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One workload on a fresh file: returns the model and the file's row.
fn measure(
    bpf: &mut BpfCollector,
    dev: &LoopDevice,
    name: &str,
    mib: u64,
    mode: &str,
    evict: bool,
) -> (ReadaheadModel, Option<RaFileModel>, u64) {
    let path = dev.mount_point().join(name);
    make_file(&path, mib);
    let bt = Bpftrace::start(&path);
    let bpf = std::cell::RefCell::new(bpf);
    let mut before = None;
    let after = run_child(
        mode,
        &path,
        || before = Some(sample(&mut bpf.borrow_mut())),
        || {
            if evict {
                drop_cache(&path);
            }
            sample(&mut bpf.borrow_mut())
        },
    );
    let (ra, row) = file_row(before.as_ref().unwrap(), &after, &path);
    (ra, row, bt.added())
}

#[test]
fn cold_sequential_read_is_all_used() {
    let Some(mut live) = begin() else { return };
    let bpf = &mut live.bpf;
    let dev = LoopDevice::with_fs(200, "ext4");
    let (ra, f, added) = measure(bpf, &dev, "seq64", 64, "seq", false);
    let f = f.expect("the file's row");
    eprintln!("sequential: {f:?}; bpftrace: {added} pages added");
    assert!(f.ra_pages.abs_diff(added) <= added / 100, "ours {} vs bpftrace {added}", f.ra_pages);
    let file_pages = 64 * (1 << 20) / PAGE;
    // Readahead brought in the whole file, as the windows saw it; all of it was used.
    assert!(f.ra_pages >= file_pages * 95 / 100 && f.ra_pages <= file_pages + 64, "{f:?}");
    assert!(f.used_pages * 100 >= f.ra_pages * 95, "{f:?}");
    assert!(f.wasted_pages <= file_pages / 100, "{f:?}");
    assert!(f.sync_events >= 1 && f.async_events >= 1, "{f:?}");
    assert!(f.processes.iter().any(|p| p.contains('(')), "{f:?}");
    let d = ra.devices.iter().find(|d| d.name == dev.name).expect("the loop device's row");
    assert!(d.ra_pages >= f.ra_pages && d.read_ahead_kb.is_some(), "{d:?}");
}

/// Small files read by `cat`, one process each: each file's only page is read by cat's one 128
/// KiB read through the kernel's readahead code, but it is a page the read asked for: demand, not
/// readahead, so nothing may stay pending (and count as wasted when evicted), wherever the read
/// wakes. (Before the asked-for range was taken out, each page counted as read ahead; 17–33 of
/// the 50 stayed pending before the per-thread binding, RA_BINDS.)
#[test]
fn small_files_read_whole_are_used_wherever_the_read_wakes() {
    let Some(mut live) = begin() else { return };
    let bpf = &mut live.bpf;
    let dev = LoopDevice::with_fs(64, "ext4");
    let dir = dev.mount_point().join("small");
    std::fs::create_dir(&dir).unwrap();
    const FILES: u64 = 50;
    let files: Vec<_> = (0..FILES).map(|i| dir.join(format!("f{i:03}"))).collect();
    for (i, path) in files.iter().enumerate() {
        std::fs::write(path, vec![b'a' + (i % 26) as u8; 1000 + i]).unwrap();
        File::open(path).unwrap().sync_all().unwrap();
        drop_cache(path);
    }
    let bpf = std::cell::RefCell::new(bpf);
    let mut before = None;
    let after = run_child(
        "small",
        &dir,
        || before = Some(sample(&mut bpf.borrow_mut())),
        || sample(&mut bpf.borrow_mut()),
    );
    let before = before.unwrap();
    let (mut read_ahead, mut used, mut pending) = (0, 0, Vec::new());
    for path in &files {
        let (_, row) = file_row(&before, &after, path);
        let f = row.unwrap_or_else(|| panic!("no readahead row for {}", path.display()));
        read_ahead += f.ra_pages;
        used += f.used_pages;
        if f.pending_pages > 0 {
            eprintln!("pending: {f:?}");
            pending.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    eprintln!("{FILES} small files: {read_ahead} pages read ahead, {used} used, pending in {pending:?}");
    assert_eq!(read_ahead, 0, "the page each read asked for is not readahead");
    assert!(pending.is_empty() && used == 0, "nothing read ahead, nothing pending: {pending:?}");
}

/// A database's random 4 KiB preads of a cold file: each miss goes through the kernel's readahead
/// code (a sync readahead event), yet it reads only the page asked for. Readahead is pages beyond
/// what was asked for, in the readahead view (per file and the device's RA%rd) as in the files
/// view. Oracle: bpftrace's count of pages added; the pages asked for are at most one per pread.
/// (When every page read through the readahead code counted, the view said all 2,000 were
/// readahead and RA%rd 100 %.)
#[test]
fn random_preads_are_not_readahead_in_any_view() {
    let Some(mut live) = begin() else { return };
    let bpf = &mut live.bpf;
    let dev = LoopDevice::with_fs(200, "ext4");
    let path = dev.mount_point().join("rand64");
    make_file(&path, 64);
    let bt = Bpftrace::start(&path);
    let bpf = std::cell::RefCell::new(bpf);
    let mut before = None;
    let after = run_child(
        "pread-random",
        &path,
        || before = Some(sample(&mut bpf.borrow_mut())),
        || sample(&mut bpf.borrow_mut()),
    );
    let before = before.unwrap();
    let added = bt.added();
    let m = Model::between(&before, &after);
    let (ra, row) = file_row(&before, &after, &path);
    let ino = std::fs::metadata(&path).unwrap().ino();
    let file = m.files.iter().find(|f| f.ino == ino).expect("the file's row in the files view");
    let ra_pages = row.as_ref().map_or(0, |f| f.ra_pages);
    let d = ra.devices.iter().find(|d| d.name == dev.name).expect("the loop device's row");
    eprintln!(
        "random preads: readahead view {ra_pages} pages ({row:?}), device {d:?}; files view read {} ra {}; \
         bpftrace: {added} pages added",
        file.disk_read_bytes, file.readahead_bytes
    );
    // The oracle: about one page added per pread (a few land on cached pages).
    assert!((PREADS * 9 / 10..=PREADS + PREADS / 10).contains(&added), "bpftrace {added}");
    assert!(file.disk_read_bytes.abs_diff(added * PAGE) <= added * PAGE / 20, "{file:?}");
    // Pages beyond what was asked for: a few windows at most (a pread that happens to follow the
    // page before it looks sequential to the kernel).
    assert!(ra_pages * 10 <= added, "readahead view: {ra_pages} of {added} pages read ahead");
    assert!(file.readahead_bytes * 10 <= added * PAGE, "files view: {file:?}");
    // The two views agree on the file, and the device's share of its disk reads is small.
    assert!(
        (ra_pages * PAGE).abs_diff(file.readahead_bytes) <= 64 * PAGE,
        "readahead view {ra_pages} pages vs files view {} bytes",
        file.readahead_bytes
    );
    let share = d.ra_read_share_pct.expect("RA%rd");
    assert!(share <= 10.0, "RA%rd {share}");
}

#[test]
fn mmap_random_reads_waste_read_around_unless_madv_random() {
    let Some(mut live) = begin() else { return };
    let bpf = &mut live.bpf;
    let dev = LoopDevice::with_fs(600, "ext4");
    set_read_ahead_kb(&dev, 128);
    let (_, normal, normal_added) = measure(bpf, &dev, "col-normal", 256, "mmap", true);
    let normal = normal.expect("the file's row");
    eprintln!("mmap, normal advice: {normal:?}; bpftrace: {normal_added} pages added");
    let (_, random, random_added) = measure(bpf, &dev, "col-random", 256, "mmap-random", true);
    eprintln!("mmap, MADV_RANDOM: {random:?}; bpftrace: {random_added} pages added");
    let random_ra = random.as_ref().map_or(0, |r| r.ra_pages);
    // Independent check: every page added to the cache for the file came by read-around, and
    // under MADV_RANDOM about one page per touch was added and none read ahead.
    assert!(
        normal.ra_pages.abs_diff(normal_added) <= normal_added / 50,
        "ours {normal:?} bpftrace {normal_added}"
    );
    assert!(
        random_added <= TOUCHES + TOUCHES / 10 && random_ra <= random_added / 10,
        "{random:?} bpftrace {random_added}"
    );
    // Read-around brings several times more pages than the reader touches...
    assert!(normal.ra_pages >= 4 * TOUCHES, "{normal:?}");
    // ...and the ones nobody touched (nor mapped) are evicted unused by the drop.
    assert!(normal.wasted_pages >= normal.ra_pages / 4, "{normal:?}");
    assert!(normal.wasted_pages > 2 * TOUCHES, "{normal:?}");
    // MADV_RANDOM: the pages read ahead fall several-fold.
    assert!(random_ra * 4 <= normal.ra_pages, "normal {normal:?} random {random:?}");
    assert!(normal_added >= 4 * random_added, "bpftrace: normal {normal_added} random {random_added}");
}

#[test]
fn read_ahead_kb_sets_the_windows() {
    let Some(mut live) = begin() else { return };
    let bpf = &mut live.bpf;
    let dev = LoopDevice::with_fs(200, "ext4");
    let mut seen = Vec::new();
    for (i, kb) in [128u64, 1024].into_iter().enumerate() {
        set_read_ahead_kb(&dev, kb);
        let (ra, f, _) = measure(bpf, &dev, &format!("seq-{i}"), 32, "seq", false);
        let f = f.expect("the file's row");
        eprintln!("read_ahead_kb {kb}: {f:?}");
        let d = ra.devices.iter().find(|d| d.name == dev.name).expect("the loop device's row");
        assert_eq!(d.read_ahead_kb, Some(kb));
        assert_eq!(f.max_window_pages, kb * 1024 / PAGE, "{f:?}");
        assert!(f.window_pages <= f.max_window_pages, "{f:?}");
        seen.push(f.windows);
    }
    // Bigger windows: fewer of them for the same file.
    assert!(seen[1] * 3 <= seen[0], "windows per read_ahead_kb: {seen:?}");
}

/// Pages read ahead on a block device's own inode (a buffered read of /dev/loopN, as filesystem
/// metadata is read) are labelled as the device's metadata and journal, in the readahead view
/// as in the files view: no process holds that inode open and no walk can find it. A 4 KiB read
/// leaves the rest of its window (beyond the page asked for) pending, so the row stays listed; it
/// must not set off a walk.
#[test]
fn a_block_devices_own_pages_are_labelled_not_looked_for() {
    let Some(mut live) = begin() else { return };
    let bpf = &mut live.bpf;
    let dev = LoopDevice::new(64);
    let before = sample(bpf);
    let mut f = File::open(&dev.path).unwrap();
    let mut buf = vec![0u8; 4096];
    f.read_exact(&mut buf).unwrap();
    let after = sample(bpf);
    let m = Model::between(&before, &after);
    let ra = m.readahead.expect("readahead model");
    // The bdev filesystem numbers the device's inode with its kernel dev_t.
    let ino = (u64::from(dev.major) << 20) | u64::from(dev.minor);
    let row =
        ra.files.iter().find(|r| r.ino == ino && !r.path_known).unwrap_or_else(|| {
            panic!("no readahead row for {}'s own inode {ino}: {:#?}", dev.name, ra.files)
        });
    let want = format!("[{} metadata/journal]", dev.name);
    assert_eq!(row.label.as_deref(), Some(want.as_str()), "{row:?}");
    assert_eq!(row.path, want, "{row:?}");
    assert!(row.pending_pages > 0 && row.ra_pages >= 3, "{row:?}");
}

/// A file read once, its read-ahead pages (all but the page asked for) left pending: listed while
/// active; quiet for RA_LINGER, no row, its pages still in its device's pending gauge (one quiet
/// file); read to its end, listed again, counting from where it went quiet: the pages pending
/// then now used, only the new windows read ahead (the pages a read miss asked for are not),
/// nothing pending.
#[test]
fn a_quiet_files_pending_pages_leave_the_rows_not_the_gauge() {
    let Some(mut live) = begin() else { return };
    let bpf = &mut live.bpf;
    let dev = LoopDevice::with_fs(64, "ext4");
    set_read_ahead_kb(&dev, 128);
    let path = dev.mount_point().join("quiet");
    make_file(&path, 1);
    let ino = std::fs::metadata(&path).unwrap().ino();
    let device = |ra: &ReadaheadModel| ra.devices.iter().find(|d| d.name == dev.name).cloned();
    let s0 = sample(bpf);
    let mut f = File::open(&path).unwrap();
    let mut first = vec![0u8; 4096];
    f.read_exact(&mut first).unwrap();
    let s1 = sample(bpf);
    let (_, row) = file_row(&s0, &s1, &path);
    let row = row.expect("listed while active");
    let (read_ahead, pending) = (row.ra_pages, row.pending_pages);
    assert!(
        pending > 0 && read_ahead == pending && row.used_pages == 0,
        "the page asked for is not readahead, the rest pending: {row:?}"
    );

    std::thread::sleep(ioscope::bpf::readahead::RA_LINGER + std::time::Duration::from_millis(500));
    let s2 = sample(bpf);
    let (ra, row) = file_row(&s1, &s2, &path);
    assert!(row.is_none(), "quiet for RA_LINGER: no row: {row:?}");
    let d = device(&ra).unwrap_or_else(|| panic!("no {} in {:?}", dev.name, ra.devices));
    assert_eq!((d.pending_pages, d.quiet_files), (pending, 1), "{d:?}");

    // What the page cache holds before the second read (mincore; the mapping is never touched):
    // the page read and the pages pending, unless something evicted them meanwhile.
    let cached_before = common::cached_pages(&path);
    let mut buf = vec![0u8; 128 << 10];
    while f.read(&mut buf).unwrap() > 0 {}
    let s3 = sample(bpf);
    let (ra, row) = file_row(&s2, &s3, &path);
    let d3 = device(&ra);
    let seen = format!("{} pages cached before the second read; device {d3:?}", cached_before);
    let row = row.unwrap_or_else(|| panic!("listed again: {seen}"));
    let pages = 1 << 20 >> 12;
    assert_eq!(row.ino, ino);
    assert!(
        row.ra_pages > 0 && row.ra_pages < pages - read_ahead,
        "the new windows read ahead, beyond the pages read misses asked for: {row:?}; {seen}"
    );
    assert_eq!(
        (row.used_pages, row.pending_pages),
        (row.ra_pages + read_ahead, 0),
        "every page read ahead used, those pending before included: {row:?}; {seen}"
    );
    let d = d3.unwrap();
    assert_eq!((d.pending_pages, d.quiet_files), (0, 0), "{d:?}; {seen}");
}
