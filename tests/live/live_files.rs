//! Live per-file attribution (root only): known buffered and O_DIRECT reads and writes on named
//! files of fresh ext4 and xfs loop devices are credited to the right paths (±10 %), the writeback
//! after `sync` (done by a flusher thread) included; and paths stay true, on ext4 and on xfs, for a
//! deleted-but-open file, a file renamed while written, a hard link and a second filesystem with
//! the same inode numbers.

use crate::common;

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::sync::Mutex;

use common::LoopDevice;
use ioscope::bpf::BpfCollector;
use ioscope::model::files::{compute, FileModel};
use ioscope::sample::Sample;

const PAGE: u64 = 4096;
const MIB: u64 = 1 << 20;

/// The tests share the machine's probes: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn start(test: &str) -> Option<BpfCollector> {
    if !common::require_root(test) {
        return None;
    }
    let bpf = BpfCollector::start();
    let st = bpf.status().clone();
    let wanted = [
        "filemap:mm_filemap_add_to_page_cache",
        "writeback:writeback_dirty_folio",
        "writeback:writeback_single_inode",
        "iomap:iomap_dio_rw_begin",
    ];
    if !wanted.iter().all(|t| st.programs.iter().any(|p| p.tracepoint == *t && p.attached)) {
        common::skip(test, &format!("per-file probes unavailable: {st:?}"));
        return None;
    }
    Some(bpf)
}

fn sample(bpf: &mut BpfCollector) -> Sample {
    let mut s = Sample { page_size: PAGE, mono_ns: ioscope::collect::monotonic_ns(), ..Default::default() };
    s.bpf = bpf.read();
    s
}

fn files_between(a: &Sample, b: &Sample) -> Vec<FileModel> {
    compute(Some(a), b, (b.mono_ns - a.mono_ns) as f64 / 1e9)
}

fn find<'a>(files: &'a [FileModel], lo: &LoopDevice, ino: u64) -> &'a FileModel {
    let dev = format!("{}:{}", lo.major, lo.minor);
    files.iter().find(|f| f.dev == dev && f.ino == ino).unwrap_or_else(|| {
        let mine: Vec<_> = files.iter().filter(|f| f.dev == dev).collect();
        panic!("no entry for {dev} inode {ino}; this device's files: {mine:#?}")
    })
}

fn drop_cache(f: &File) {
    f.sync_all().unwrap();
    // SAFETY: plain syscall on an open fd.
    assert_eq!(unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) }, 0);
}

/// A 1 MiB buffer aligned for O_DIRECT, inside a slightly larger allocation.
fn aligned(raw: &mut [u8]) -> &mut [u8] {
    let skip = raw.as_ptr().align_offset(4096);
    &mut raw[skip..skip + MIB as usize]
}

fn attribution(fstype: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = &format!("live_files_{fstype}");
    let Some(mut bpf) = start(test) else { return };
    let lo = LoopDevice::with_fs(320, fstype);
    let alpha_path = lo.mount_point().join("alpha");
    let beta_path = lo.mount_point().join("beta");
    // mkfs's requests spent the burst of block requests the kernel sends for mapping: let it refill.
    std::thread::sleep(std::time::Duration::from_millis(600));

    let s0 = sample(&mut bpf);
    // alpha: 16 MiB buffered write, written back by `sync` (the flusher does it), then read cold.
    let mut alpha =
        OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&alpha_path).unwrap();
    let block = vec![0x5au8; MIB as usize];
    for _ in 0..16 {
        alpha.write_all(&block).unwrap();
    }
    // SAFETY: no preconditions.
    unsafe { libc::sync() };
    drop_cache(&alpha);
    let mut alpha_r = File::open(&alpha_path).unwrap();
    let mut buf = vec![0u8; 128 << 10];
    while alpha_r.read(&mut buf).unwrap() > 0 {}
    // beta: 8 MiB O_DIRECT write, then 8 MiB O_DIRECT read.
    let mut beta = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .custom_flags(libc::O_DIRECT)
        .open(&beta_path)
        .unwrap();
    let mut raw = vec![0x33u8; MIB as usize + 4096];
    for _ in 0..8 {
        beta.write_all(aligned(&mut raw)).unwrap();
    }
    let mut beta_r = OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&beta_path).unwrap();
    while beta_r.read(aligned(&mut raw)).unwrap() > 0 {}
    // Both files are still open: their paths come from /proc/self/fd.
    let s1 = sample(&mut bpf);
    let files = files_between(&s0, &s1);

    let a = find(&files, &lo, common::ino(&alpha_path));
    assert_eq!(a.path.as_deref(), Some(alpha_path.to_str().unwrap()), "{a:?}");
    common::within("alpha dirtied", a.dirtied_bytes, 16 * MIB);
    common::within("alpha written back", a.writeback_bytes, 16 * MIB);
    common::within("alpha read from disk", a.disk_read_bytes, 16 * MIB);
    assert_eq!(a.readahead_bytes + a.demand_read_bytes, a.disk_read_bytes);
    // A sequential read: its first 128 KiB read() misses on demand, readahead brings the rest.
    assert!(a.demand_read_bytes >= 128 << 10 && a.readahead_bytes >= 8 * MIB, "{a:?}");
    assert_eq!(a.direct_read_bytes + a.direct_write_bytes, 0, "{a:?}");
    let me = std::process::id();
    assert!(a.processes.iter().any(|p| p.pid == me), "the test process is involved: {a:?}");

    let b = find(&files, &lo, common::ino(&beta_path));
    assert_eq!(b.path.as_deref(), Some(beta_path.to_str().unwrap()), "{b:?}");
    common::within("beta direct write", b.direct_write_bytes, 8 * MIB);
    common::within("beta direct read", b.direct_read_bytes, 8 * MIB);
    assert!(b.disk_read_bytes < MIB, "direct reads do not go through the cache: {b:?}");
    // The block requests, mapped to the files through their extents: all of them when the kernel
    // sent every request (other I/O on the machine can use up the rate limit), else a sample that
    // never exceeds what was done.
    let sampling = ioscope::model::files::block_files(Some(&s0), &s1).expect("request ring");
    let blk = [a.block_write_bytes, a.block_read_bytes, b.block_write_bytes, b.block_read_bytes];
    let want = [16 * MIB, 16 * MIB, 8 * MIB, 8 * MIB];
    let what = ["alpha block writes", "alpha block reads", "beta block writes", "beta block reads"];
    for ((got, want), what) in blk.into_iter().zip(want).zip(what) {
        if sampling.not_sent == 0 {
            common::within(what, got, want);
        } else {
            assert!(got as f64 <= want as f64 * 1.1, "{what}: {got} > {want}");
        }
    }
    eprintln!("{test}: alpha {a:?}\n{test}: beta {b:?}\n{test}: {sampling:?}");
    drop((alpha, alpha_r, beta, beta_r));
}

#[test]
fn ext4_reads_writes_and_writeback_are_credited_to_their_files() {
    let _group = common::live_group(module_path!());
    attribution("ext4");
}

#[test]
fn xfs_reads_writes_and_writeback_are_credited_to_their_files() {
    let _group = common::live_group(module_path!());
    attribution("xfs");
}

/// ext4's block allocator builds its buddy bitmaps in the page cache of an inode of its own,
/// numbered 1 (never a file's), computing them from the block bitmaps: those pages enter the
/// cache without a disk read, so (a page counts as read only if the disk was read) that inode
/// reads nothing, and a row it has is labelled as the device's metadata, never looked for (as a
/// file without a path it set off a walk of the whole mount; the label itself is unit-tested in
/// src/bpf/resolve/files.rs). Remounted without the bitmap prefetch (which loads the buddies at
/// mount, before the first sample), so the first allocation loads them in the interval.
#[test]
fn ext4s_allocator_cache_is_labelled_metadata_and_reads_nothing() {
    let _group = common::live_group(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "ext4s_allocator_cache_is_labelled_metadata_and_reads_nothing";
    let Some(mut bpf) = start(test) else { return };
    let lo = LoopDevice::with_fs(64, "ext4");
    let mnt = lo.mount_point().to_str().unwrap().to_string();
    common::run("umount", &[&mnt]);
    common::run("mount", &["-t", "ext4", "-o", "no_prefetch_block_bitmaps", lo.path.to_str().unwrap(), &mnt]);
    let s0 = sample(&mut bpf);
    let mut f = File::create(lo.mount_point().join("data")).unwrap();
    f.write_all(&vec![0x11u8; MIB as usize]).unwrap();
    f.sync_all().unwrap();
    let s1 = sample(&mut bpf);
    let files = files_between(&s0, &s1);
    let dev = format!("{}:{}", lo.major, lo.minor);
    if let Some(row) = files.iter().find(|f| f.dev == dev && f.ino == 1) {
        let want = format!("[{} metadata]", lo.name);
        assert_eq!((row.path.as_deref(), row.label.as_deref()), (None, Some(want.as_str())), "{row:?}");
        assert_eq!(row.disk_read_bytes, 0, "the buddy cache is computed, not read: {row:?}");
    }
}

fn write_mib(f: &mut File, mib: u64) {
    let block = vec![0x11u8; MIB as usize];
    for _ in 0..mib {
        f.write_all(&block).unwrap();
    }
    // sync(2), not fsync: the flusher writes it back (fsync's own writeback: tests/live/live_block_files.rs).
    // SAFETY: no preconditions.
    unsafe { libc::sync() };
}

#[test]
fn ext4_paths_stay_true_for_deleted_renamed_linked_and_twin_files() {
    let _group = common::live_group(module_path!());
    paths_stay_true("ext4");
}

#[test]
fn xfs_paths_stay_true_for_deleted_renamed_linked_and_twin_files() {
    let _group = common::live_group(module_path!());
    paths_stay_true("xfs");
}

fn paths_stay_true(fstype: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = &format!("live_files_paths_{fstype}");
    let Some(mut bpf) = start(test) else { return };
    // xfs needs 300 MiB at least.
    let size = if fstype == "xfs" { 320 } else { 128 };
    let lo = LoopDevice::with_fs(size, fstype);
    let twin = LoopDevice::with_fs(size, fstype);
    let m = lo.mount_point();
    // The first file of each fresh ext4: the same inode number on two filesystems.
    let a = m.join("twin");
    let b = twin.mount_point().join("twin");
    let mut fa = File::create(&a).unwrap();
    let mut fb = File::create(&b).unwrap();
    assert_eq!(common::ino(&a), common::ino(&b), "fresh {fstype}s number their first file alike");

    // Renamed while written: a sample while it has its first name caches that name.
    let old = m.join("old-name");
    let new = m.join("new-name");
    let mut renamed = File::create(&old).unwrap();
    let s0 = sample(&mut bpf);
    write_mib(&mut renamed, 2);
    let s1 = sample(&mut bpf);
    let f = files_between(&s0, &s1);
    assert_eq!(find(&f, &lo, common::ino(&old)).path.as_deref(), Some(old.to_str().unwrap()));
    std::fs::rename(&old, &new).unwrap();
    write_mib(&mut renamed, 2);

    // Deleted while open.
    let gone = m.join("gone");
    let mut deleted =
        OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&gone).unwrap();
    let gone_ino = common::ino(&gone);
    std::fs::remove_file(&gone).unwrap();
    write_mib(&mut deleted, 2);

    // A hard link, written through one name and closed.
    let h1 = m.join("link-1");
    let h2 = m.join("link-2");
    let mut linked = File::create(&h1).unwrap();
    std::fs::hard_link(&h1, &h2).unwrap();
    let linked_ino = common::ino(&h1);
    write_mib(&mut linked, 2);
    drop(linked);

    write_mib(&mut fa, 1);
    write_mib(&mut fb, 3);

    let s2 = sample(&mut bpf);
    let f = files_between(&s1, &s2);
    let r = find(&f, &lo, common::ino(&new));
    assert_eq!(r.path.as_deref(), Some(new.to_str().unwrap()), "renamed: {r:?}");
    common::within("renamed written back", r.writeback_bytes, 2 * MIB);

    let d = find(&f, &lo, gone_ino);
    let want = format!("{} (deleted)", gone.display());
    assert!(d.path.is_none() || d.path.as_deref() == Some(want.as_str()), "deleted: {d:?}");
    assert_eq!(d.path.as_deref(), Some(want.as_str()), "an open deleted file is found through /proc");

    let l = find(&f, &lo, linked_ino);
    let names = [h1.to_str().unwrap(), h2.to_str().unwrap()];
    assert!(l.path.as_deref().is_none_or(|p| names.contains(&p)), "hard link: {l:?}");
    common::within("hard link written back", l.writeback_bytes, 2 * MIB);

    let ta = find(&f, &lo, common::ino(&a));
    let tb = find(&f, &twin, common::ino(&b));
    assert_eq!(ta.path.as_deref(), Some(a.to_str().unwrap()));
    assert_eq!(tb.path.as_deref(), Some(b.to_str().unwrap()));
    common::within("twin a written back", ta.writeback_bytes, MIB);
    common::within("twin b written back", tb.writeback_bytes, 3 * MIB);
    drop((renamed, deleted, fa, fb));
}

/// The thread writing ioscope's own output (`BpfOptions::ignored_thread`) is not counted: its
/// writes make no file row and no page-cache count, while another thread of the same process
/// writing the same way is counted in full. And that after quiet samples, in which the maps'
/// scans are skipped while nothing moves (src/bpf/inserts.rs, page_cache.rs's QuietKey): the
/// first write after them is in the very next sample.
#[test]
fn the_output_threads_own_writes_are_not_counted_and_quiet_maps_are_read_at_the_next_write() {
    let _group = common::live_group(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "live_files_ignored_thread";
    if start(test).is_none() {
        return;
    }
    // SAFETY: gettid has no preconditions.
    let me_tid = unsafe { libc::gettid() } as u32;
    let options = ioscope::bpf::BpfOptions { ignored_thread: Some(me_tid), ..Default::default() };
    let mut bpf = BpfCollector::start_with(&options);
    let lo = LoopDevice::with_fs(64, "ext4");
    let (mine, theirs) = (lo.mount_point().join("mine"), lo.mount_point().join("theirs"));
    let write = |path: &std::path::Path| {
        let mut f = File::create(path).unwrap();
        let block = vec![0x22u8; MIB as usize];
        for _ in 0..2 {
            f.write_all(&block).unwrap();
        }
    };
    // Quiet samples: the scans stop once a sample finds nothing new.
    let mut s0 = sample(&mut bpf);
    for _ in 0..4 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        s0 = sample(&mut bpf);
    }
    write(&mine);
    std::thread::scope(|s| {
        s.spawn(|| write(&theirs));
    });
    let s1 = sample(&mut bpf);
    let files = files_between(&s0, &s1);
    let t = find(&files, &lo, common::ino(&theirs));
    common::within("the other thread's file dirtied", t.dirtied_bytes, 2 * MIB);
    let dev = format!("{}:{}", lo.major, lo.minor);
    let ino = common::ino(&mine);
    assert!(
        !files.iter().any(|f| f.dev == dev && f.ino == ino && f.dirtied_bytes > 0),
        "the ignored thread's file was counted: {files:#?}"
    );
    // The process's page-cache counts: the other thread's 2 MiB dirtied, not this one's.
    let me = std::process::id();
    let dirtied = |s: &Sample| {
        let pc = s.bpf.page_cache.as_ref().expect("page-cache maps");
        pc.processes.iter().find(|p| p.pid == me).map(|p| p.counters.dirtied_pages).unwrap_or(0)
    };
    common::within("the process's dirtied pages", (dirtied(&s1) - dirtied(&s0)) * PAGE, 2 * MIB);
}

/// ext4's auto_da_alloc: after a file is truncated to 0, the release of any descriptor of the
/// inode, a read-only one too, writes back all its dirty pages. ioscope reads a listed file's
/// cache state through a descriptor of its own; it must not do so while the file holds dirty
/// pages, or it starts the writeback it is there to observe (an fsync stall looks smaller).
/// The same holds for the block-request mapping's FIEMAP (the file had block writes before).
/// Oracle: cachestat on the writer's own descriptor (nothing else opens the file). Before the
/// fix all 16,384 dirty pages were written back within the 3 s of sampling.
#[test]
fn reading_cache_state_does_not_write_back_a_truncated_files_dirty_pages() {
    let _group = common::live_group(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "live_files_auto_da_alloc";
    let Some(mut bpf) = start(test) else { return };
    let dirty = common::DirtySettingsGuard::save();
    // Nothing written back by age or by the background threshold while the test runs.
    dirty.set("dirty_expire_centisecs", 60_000);
    dirty.set("dirty_background_bytes", 1 << 30);
    let lo = LoopDevice::with_fs(320, "ext4");
    let path = lo.mount_point().join("truncated");
    common::write_patterned_file(&path, 1);
    // O_TRUNC on a file with data: ext4 marks the inode EXT4_STATE_DA_ALLOC_CLOSE.
    let mut f = OpenOptions::new().write(true).truncate(true).open(&path).unwrap();
    let ino = std::os::unix::fs::MetadataExt::ino(&f.metadata().unwrap());
    let block = vec![0x5au8; MIB as usize];
    for _ in 0..64 {
        f.write_all(&block).unwrap();
    }
    let dirty_pages = |f: &File| {
        let st = ioscope::bpf::resolve::file_cache::cache_state_of(f, 64 * MIB, PAGE).expect("cachestat");
        st.dirty_pages.expect("cachestat's dirty count (Linux 6.5+)")
    };
    let before = dirty_pages(&f);
    assert!(before >= 64 * MIB / PAGE * 95 / 100, "the write left {before} pages dirty");
    // ioscope lists the file (its path from this process's descriptor) for a few seconds: its
    // cache state would be read at least once a second.
    let first = sample(&mut bpf);
    let mut last = first.clone();
    for _ in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(600));
        last = sample(&mut bpf);
    }
    let after = dirty_pages(&f);
    let files = files_between(&first, &last);
    let listed = files.iter().find(|r| r.ino == ino && r.dev == format!("{}:{}", lo.major, lo.minor));
    assert!(listed.is_none_or(|r| r.writeback_bytes == 0), "nothing written back: {listed:?}");
    let in_sample =
        first.bpf.files.iter().find(|r| r.ino == ino && (r.major, r.minor) == (lo.major, lo.minor));
    eprintln!("dirty pages: {before} after the write, {after} after 3 s of sampling; row {listed:?}; sample {in_sample:?}");
    let s = in_sample.expect("the file is in the samples (its dirtying)");
    assert!(s.path.as_deref() == Some(path.to_str().unwrap()), "its path is known: {s:?}");
    assert!(s.cache.is_none(), "no cache state read while dirty pages are pending: {s:?}");
    assert!(
        after >= before * 95 / 100,
        "ioscope's sampling wrote back {} of {before} dirty pages",
        before - after
    );
    // Once written back (fsync), the state is read again.
    f.sync_all().unwrap();
    let s = sample(&mut bpf);
    let row = s.bpf.files.iter().find(|r| r.ino == ino && (r.major, r.minor) == (lo.major, lo.minor));
    let cache = row.and_then(|r| r.cache.as_ref());
    eprintln!("after fsync: {row:?}");
    assert!(cache.is_some_and(|c| c.cached_pages > 0 && c.dirty_pages == Some(0)), "{row:?}");
}
