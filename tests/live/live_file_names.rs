//! Live file names from the kernel's dentries (root only): on fresh ext4 and xfs loop devices, the
//! issue's files case run by a shell whose `cat` and `dd`s have all exited before the sample (a
//! cold 32 MiB read, 16 MiB `oflag=direct`, 8 MiB buffered + `sync`): every file has its real path
//! in that sample, and readahead's file too, with the /proc and mount-walk fallbacks off, so the
//! kernel's names alone must find them.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use common::LoopDevice;
use ioscope::bpf::{BpfCollector, BpfOptions};
use ioscope::model::files::compute;
use ioscope::sample::Sample;

const PAGE: u64 = 4096;
const MIB: u64 = 1 << 20;

static SERIAL: Mutex<()> = Mutex::new(());

fn sample(bpf: &mut BpfCollector) -> Sample {
    let mut s = Sample { page_size: PAGE, mono_ns: ioscope::collect::monotonic_ns(), ..Default::default() };
    s.bpf = bpf.read();
    s
}

fn sh(script: &str) {
    let st = Command::new("sh").arg("-c").arg(script).status().unwrap();
    assert!(st.success(), "{script}: {st}");
}

fn files_case(fstype: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = &format!("live_file_names_{fstype}");
    if !common::require_root(test) {
        return;
    }
    let lo = LoopDevice::with_fs(320, fstype);
    let m = lo.mount_point();
    let dir = m.join("sub/dir");
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big");
    // Written and dropped from the cache before the probes start: its name is read at the cat.
    sh(&format!("head -c {} /dev/urandom > {} && sync", 32 * MIB, big.display()));
    let f = std::fs::File::open(&big).unwrap();
    f.sync_all().unwrap();
    // SAFETY: plain syscall on an open fd.
    assert_eq!(
        unsafe { libc::posix_fadvise(std::os::fd::AsRawFd::as_raw_fd(&f), 0, 0, libc::POSIX_FADV_DONTNEED) },
        0
    );
    drop(f);

    let options = BpfOptions { path_fallbacks: false, ..Default::default() };
    let mut bpf = BpfCollector::start_with(&options);
    let st = bpf.status().clone();
    let named = ["file_name_add", "file_name_dirty", "file_name_dio"];
    if !named.iter().all(|n| st.programs.iter().any(|p| p.program == *n && p.attached)) {
        common::skip(test, &format!("file-name programs unavailable: {st:?}"));
        return;
    }
    let direct = m.join("direct");
    let buffered = m.join("sub/buffered");
    let s0 = sample(&mut bpf);
    sh(&format!(
        "cat {} > /dev/null && dd if=/dev/zero of={} bs=1M count=16 oflag=direct 2>/dev/null && \
         dd if=/dev/zero of={} bs=1M count=8 2>/dev/null && sync",
        big.display(),
        direct.display(),
        buffered.display()
    ));
    let s1 = sample(&mut bpf);
    let files = compute(Some(&s0), &s1, (s1.mono_ns - s0.mono_ns) as f64 / 1e9);
    let dev = format!("{}:{}", lo.major, lo.minor);
    let row = |p: &Path| {
        let i = common::ino(p);
        files.iter().find(|f| f.dev == dev && f.ino == i).unwrap_or_else(|| {
            let mine: Vec<_> = files.iter().filter(|f| f.dev == dev).collect();
            panic!("no entry for {dev} inode {i} ({}); this device's files: {mine:#?}", p.display())
        })
    };
    let b = row(&big);
    assert_eq!(b.path.as_deref(), Some(big.to_str().unwrap()), "{b:?}");
    common::within("big read from disk", b.disk_read_bytes, 32 * MIB);
    let d = row(&direct);
    assert_eq!(d.path.as_deref(), Some(direct.to_str().unwrap()), "{d:?}");
    common::within("direct written", d.direct_write_bytes, 16 * MIB);
    let w = row(&buffered);
    assert_eq!(w.path.as_deref(), Some(buffered.to_str().unwrap()), "{w:?}");
    common::within("buffered dirtied", w.dirtied_bytes, 8 * MIB);
    common::within("buffered written back", w.writeback_bytes, 8 * MIB);
    // Readahead's view of the cat: the same path.
    let ra = s1.bpf.readahead.as_ref().expect("readahead probes");
    let kdev = (lo.major << 20) | lo.minor;
    let r = ra.files.iter().find(|f| f.dev == kdev && f.ino == common::ino(&big));
    let r = r.unwrap_or_else(|| panic!("readahead has no row for {}: {:?}", big.display(), ra.files));
    assert_eq!(r.path.as_deref(), Some(big.to_str().unwrap()), "{r:?}");
}

#[test]
fn ext4_files_nobody_holds_open_have_their_paths() {
    let _group = common::live_group(module_path!());
    files_case("ext4");
}

#[test]
fn xfs_files_nobody_holds_open_have_their_paths() {
    let _group = common::live_group(module_path!());
    files_case("xfs");
}

/// After a burst of new files, a sample holds only the rows active in its interval: one file read
/// cold afterwards is the device's only file row (the burst's rows were drained and are gone).
#[test]
fn a_sample_after_a_burst_holds_only_the_active_files() {
    let _group = common::live_group(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "live_file_names_burst";
    if !common::require_root(test) {
        return;
    }
    let lo = LoopDevice::with_fs(128, "ext4");
    let m = lo.mount_point().to_path_buf();
    let mut bpf = BpfCollector::start_with(&BpfOptions { path_fallbacks: false, ..Default::default() });
    if !bpf.status().programs.iter().any(|p| p.program == "file_name_add" && p.attached) {
        common::skip(test, "file-name programs unavailable");
        return;
    }
    let _ = sample(&mut bpf);
    sh(&format!("for i in $(seq 1 600); do echo $i > {}/f$i; done; sync", m.display()));
    let burst = sample(&mut bpf);
    let dev = (lo.major, lo.minor);
    let own_cache = (lo.major << 20 | lo.minor) as u64;
    let mine = |s: &Sample| -> Vec<(u64, Option<String>)> {
        s.bpf
            .files
            .iter()
            .filter(|f| (f.major, f.minor) == dev && f.ino != own_cache && f.label.is_none())
            .map(|f| (f.ino, f.path.clone()))
            .collect()
    };
    assert!(mine(&burst).len() >= 200, "the burst's files: {:?}", mine(&burst).len());
    let one = m.join("f7");
    let f = std::fs::File::open(&one).unwrap();
    // SAFETY: plain syscall on an open fd.
    assert_eq!(
        unsafe { libc::posix_fadvise(std::os::fd::AsRawFd::as_raw_fd(&f), 0, 0, libc::POSIX_FADV_DONTNEED) },
        0
    );
    drop(f);
    sh(&format!("cat {} > /dev/null", one.display()));
    let after = sample(&mut bpf);
    let rows = mine(&after);
    assert!(rows.contains(&(common::ino(&one), Some(one.to_str().unwrap().to_string()))), "{rows:?}");
    // None of the burst's other files (a directory's or the journal's late write may show).
    let burst_inos: Vec<u64> =
        (1..=600).filter(|&i| i != 7).map(|i| common::ino(&m.join(format!("f{i}")))).collect();
    let stale: Vec<_> = rows.iter().filter(|(i, _)| burst_inos.contains(i)).collect();
    assert!(stale.is_empty(), "rows of files idle in the interval: {stale:?} (all rows: {rows:?})");
}

/// A file whose kernel name the LRU name map lost before its writeback (more new files dirtied
/// after it, on another filesystem, than FILE_NAMES holds, none sampled in between) is named again
/// as it is written back (`file_name_wb`, at `sync -f` of its filesystem): its row in the next
/// sample has its path, with the fallbacks off.
#[test]
fn a_file_written_back_after_a_burst_of_names_has_its_path() {
    let _group = common::live_group(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "live_file_names_writeback";
    if !common::require_root(test) {
        return;
    }
    let burst = ioscope_common::file_names::FILE_NAMES_MAX as usize + 1000;
    let lo = LoopDevice::with_fs(64, "ext4");
    // ext4's default 16 KiB per inode: room for the burst's inodes.
    let other = LoopDevice::with_fs(448, "ext4");
    let mut bpf = BpfCollector::start_with(&BpfOptions { path_fallbacks: false, ..Default::default() });
    if !bpf.status().programs.iter().any(|p| p.program == "file_name_wb" && p.attached) {
        common::skip(test, "file_name_wb unavailable");
        return;
    }
    let _ = sample(&mut bpf);
    let first = lo.mount_point().join("first");
    std::fs::write(&first, vec![1u8; MIB as usize]).unwrap();
    let dir = other.mount_point().join("burst");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..burst {
        std::fs::write(dir.join(format!("f{i}")), [7u8; PAGE as usize]).unwrap();
    }
    sh(&format!("sync -f {}", first.display()));
    let s = sample(&mut bpf);
    let ino = common::ino(&first);
    let row = s.bpf.files.iter().find(|f| (f.major, f.minor) == (lo.major, lo.minor) && f.ino == ino);
    let row = row.expect("the first file's row");
    assert!(row.writeback_pages > 0 || row.fs_writeback_bytes > 0, "{row:?}");
    assert_eq!(row.path.as_deref(), Some(first.to_str().unwrap()), "{row:?}");
}

/// A file written under a temporary name and renamed after its writeback, as builds and package
/// managers leave them: the name the kernel recorded at its I/O is stale and nobody holds it open,
/// so no process scan can find it. On ext4 its handle opens the inode and gives its new path in
/// the very sample; on xfs (whose handles need the generation) the sample has no stale path.
fn renamed_case(fstype: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = &format!("live_file_names_renamed_{fstype}");
    if !common::require_root(test) {
        return;
    }
    let lo = LoopDevice::with_fs(320, fstype);
    let m = lo.mount_point();
    let mut bpf = BpfCollector::start();
    if !bpf.status().programs.iter().any(|p| p.program == "file_name_dirty" && p.attached) {
        common::skip(test, "file-name programs unavailable");
        return;
    }
    let tmp = m.join("out.tmp.1234");
    let done = m.join("out.bin");
    let s0 = sample(&mut bpf);
    sh(&format!(
        "dd if=/dev/zero of={} bs=64k count=4 conv=fsync 2>/dev/null && mv {} {}",
        tmp.display(),
        tmp.display(),
        done.display()
    ));
    let s1 = sample(&mut bpf);
    let files = compute(Some(&s0), &s1, (s1.mono_ns - s0.mono_ns) as f64 / 1e9);
    let (dev, ino) = (format!("{}:{}", lo.major, lo.minor), common::ino(&done));
    let row =
        files.iter().find(|f| f.dev == dev && f.ino == ino).unwrap_or_else(|| panic!("no row: {files:#?}"));
    common::within("renamed file dirtied", row.dirtied_bytes, 256 << 10);
    let want = (fstype == "ext4").then(|| done.to_str().unwrap());
    assert_eq!(row.path.as_deref(), want, "{row:?}");
}

#[test]
fn ext4_a_file_renamed_after_its_io_has_its_new_path_from_its_handle() {
    let _group = common::live_group(module_path!());
    renamed_case("ext4");
}

#[test]
fn xfs_a_file_renamed_after_its_io_shows_no_stale_path() {
    let _group = common::live_group(module_path!());
    renamed_case("xfs");
}
