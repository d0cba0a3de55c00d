//! Live block-to-file mapping (root only): block requests ioscope maps to files through extent
//! maps agree with debugfs (`icheck` the filesystem block, `ncheck` the inode) on a fresh ext4
//! loop device, journal and metadata requests get labels rather than files, and writeback driven
//! by fsync (not by the flusher) is credited to the file on ext4 and xfs.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::Mutex;

use common::LoopDevice;
use ioscope::bpf::resolve::block_files::{MappedRequest, Target, LABEL_JOURNAL, LABEL_METADATA};
use ioscope::bpf::BpfCollector;
use ioscope::model::files::{compute, FileModel};
use ioscope::sample::Sample;
use ioscope_common::block::RWBS_META;

const MIB: u64 = 1 << 20;

/// The tests share the machine's probes: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn start(test: &str, wanted: &[&str]) -> Option<BpfCollector> {
    if !common::require_root(test) {
        return None;
    }
    let bpf = BpfCollector::start();
    let st = bpf.status().clone();
    let missing: Vec<_> =
        wanted.iter().filter(|t| !st.programs.iter().any(|p| p.tracepoint == **t && p.attached)).collect();
    let ring_off =
        st.programs.iter().any(|p| p.error.as_deref().is_some_and(|e| e.contains("block-to-file")));
    if !missing.is_empty() || ring_off {
        common::skip(test, &format!("probes unavailable ({missing:?}): {st:?}"));
        return None;
    }
    Some(bpf)
}

fn sample(bpf: &mut BpfCollector) -> Sample {
    let mut s = Sample { page_size: 4096, mono_ns: ioscope::collect::monotonic_ns(), ..Default::default() };
    s.bpf = bpf.read();
    s
}

/// `debugfs -R "<cmd>" dev`'s output lines after the header, split on whitespace/tab.
fn debugfs(dev: &Path, cmd: &str) -> Vec<Vec<String>> {
    let out = common::run("debugfs", &["-R", cmd, dev.to_str().unwrap()]);
    out.lines().skip(1).map(|l| l.split('\t').map(|s| s.trim().to_string()).collect()).collect()
}

/// fs block → inode (None for a block no inode owns), for many blocks in one debugfs run.
fn icheck(dev: &Path, blocks: &BTreeSet<u64>) -> BTreeMap<u64, Option<u64>> {
    let list: Vec<String> = blocks.iter().map(|b| b.to_string()).collect();
    debugfs(dev, &format!("icheck {}", list.join(" ")))
        .into_iter()
        .filter_map(|f| Some((f.first()?.parse().ok()?, f.get(1).and_then(|i| i.parse().ok()))))
        .collect()
}

/// inode → path relative to the filesystem's root.
fn ncheck(dev: &Path, inodes: &BTreeSet<u64>) -> BTreeMap<u64, String> {
    let list: Vec<String> = inodes.iter().map(|b| b.to_string()).collect();
    debugfs(dev, &format!("ncheck {}", list.join(" ")))
        .into_iter()
        .filter_map(|f| Some((f.first()?.parse().ok()?, f.get(1)?.clone())))
        .collect()
}

fn mine(bpf: &BpfCollector, lo: &LoopDevice) -> Vec<MappedRequest> {
    bpf.family::<ioscope::bpf::block_files::BlockFilesFamily>()
        .map(|f| f.recent())
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.disk == (lo.major, lo.minor))
        .collect()
}

fn drop_cache(f: &File) {
    // SAFETY: plain syscall on an open fd.
    assert_eq!(unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) }, 0);
}

#[test]
fn ext4_requests_mapped_to_files_agree_with_debugfs() {
    let _group = common::live_group(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "live_block_files_debugfs";
    let Some(mut bpf) = start(test, &["block:block_rq_complete", "block:block_io_start"]) else { return };
    let lo = LoopDevice::with_fs(256, "ext4");
    let m = lo.mount_point().to_path_buf();
    // A small ext4 has 1 KiB blocks: the filesystem says which.
    let block_size: u64 =
        common::run("stat", &["-f", "-c", "%S", m.to_str().unwrap()]).trim().parse().unwrap();
    // mkfs's requests spent the kernel's burst of sampled requests: let it refill.
    std::thread::sleep(std::time::Duration::from_millis(600));
    let _s0 = sample(&mut bpf);

    // Three files written and fsynced, kept open (their paths come from /proc/self/fd).
    let mut open = Vec::new();
    for name in ["one", "two", "three"] {
        let p = m.join(name);
        common::write_patterned_file(&p, 4);
        open.push((p.clone(), File::open(&p).unwrap()));
    }
    let _s1 = sample(&mut bpf);
    // Metadata: the device's cached buffers dropped, then new inodes need their bitmaps and table.
    common::run("blockdev", &["--flushbufs", lo.path.to_str().unwrap()]);
    let dir = m.join("many");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..200 {
        File::create(dir.join(format!("f{i}"))).unwrap();
    }
    // SAFETY: no preconditions.
    unsafe { libc::sync() };
    let _s2 = sample(&mut bpf);
    // Read back cold, again while too few requests were sent (the machine's other I/O can use up
    // the kernel's rate limit): the mapped requests of every round are kept.
    let whole_file = |r: &MappedRequest| match r.parts.as_slice() {
        [(Target::File((a, b, ino)), _)] if (*a, *b) == (lo.major, lo.minor) => Some(*ino),
        _ => None,
    };
    for _ in 0..5 {
        for (_, f) in &open {
            drop_cache(f);
        }
        for (p, _) in &open {
            let mut f = File::open(p).unwrap();
            let mut buf = vec![0u8; 1 << 20];
            while f.read(&mut buf).unwrap() > 0 {}
        }
        let _s = sample(&mut bpf);
        if mine(&bpf, &lo).iter().filter(|r| whole_file(r).is_some()).count() >= 8 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(600));
    }
    let reqs = mine(&bpf, &lo);

    // Requests wholly in one file: the file debugfs finds at their first and last block.
    let whole: Vec<(&MappedRequest, u64)> = reqs.iter().filter_map(|r| Some((r, whole_file(r)?))).collect();
    assert!(whole.len() >= 4, "too few requests mapped to files: {reqs:#?}");
    let ends = |r: &MappedRequest| {
        let first = r.sector * 512 / block_size;
        let last = (r.sector + u64::from(r.nr_sectors) - 1) * 512 / block_size;
        [first, last]
    };
    let blocks: BTreeSet<u64> = whole.iter().flat_map(|(r, _)| ends(r)).collect();
    let owners = icheck(&lo.path, &blocks);
    let inodes: BTreeSet<u64> = owners.values().flatten().copied().collect();
    let names = ncheck(&lo.path, &inodes);
    let mut checked = 0;
    for (r, ino) in &whole {
        for b in ends(r) {
            let owner = owners.get(&b).copied().flatten();
            assert_eq!(owner, Some(*ino), "block {b} of {r:?}: debugfs says inode {owner:?}");
            let want = names.get(ino).map(|n| m.join(n.trim_start_matches('/')));
            let ours = open.iter().find(|(p, _)| common::ino(p) == *ino).map(|(p, _)| p.clone());
            assert_eq!(ours, want, "inode {ino}: ioscope's file is not debugfs's path");
            checked += 1;
        }
    }
    eprintln!("{test}: {checked} blocks of {} requests agree with debugfs", whole.len());

    // Journal: labelled, never a file; debugfs says its blocks are the journal inode's (8).
    let journal: Vec<&MappedRequest> =
        reqs.iter().filter(|r| r.parts.iter().all(|(t, _)| *t == Target::Label(LABEL_JOURNAL))).collect();
    assert!(!journal.is_empty(), "fsync commits the journal: no request was labelled journal");
    let jblocks: BTreeSet<u64> = journal.iter().take(20).map(|r| ends(r)[0]).collect();
    for (b, owner) in icheck(&lo.path, &jblocks) {
        assert_eq!(owner, Some(8), "block {b} labelled journal belongs to inode {owner:?}");
    }
    // Metadata: every request flagged M has a label and no file.
    for r in &reqs {
        if r.rwbs & RWBS_META != 0 {
            assert!(
                r.parts.iter().all(|(t, _)| matches!(t, Target::Label(_))),
                "labelled request mapped to a file: {r:?}"
            );
        }
    }
    let meta =
        reqs.iter().filter(|r| r.parts.iter().any(|(t, _)| *t == Target::Label(LABEL_METADATA))).count();
    eprintln!("{test}: {} journal and {meta} metadata requests labelled", journal.len());
    drop(open);
}

fn find<'a>(files: &'a [FileModel], lo: &LoopDevice, ino: u64) -> &'a FileModel {
    let dev = format!("{}:{}", lo.major, lo.minor);
    files.iter().find(|f| f.dev == dev && f.ino == ino).unwrap_or_else(|| {
        let mine: Vec<_> = files.iter().filter(|f| f.dev == dev).collect();
        panic!("no entry for {dev} inode {ino}; this device's files: {mine:#?}")
    })
}

/// `dd conv=fsync` of 8 MiB to a named file: fsync, not the flusher, writes it back. Its writeback
/// and the block requests mapped to it are credited to its path.
fn fsync_writeback(fstype: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = &format!("live_block_files_fsync_{fstype}");
    let wanted = ["block:block_rq_complete", "writeback:writeback_single_inode"];
    let Some(mut bpf) = start(test, &wanted) else { return };
    let fs_wb = if fstype == "ext4" { "ext4:ext4_writepages_result" } else { "iomap:iomap_writeback_folio" };
    let st = bpf.status();
    assert!(st.programs.iter().any(|p| p.tracepoint == fs_wb && p.attached), "{fs_wb} not attached: {st:?}");
    let lo = LoopDevice::with_fs(320, fstype);
    let path = lo.mount_point().join("fsynced");
    // Created and held open here, so its path is found through /proc/self/fd; dd writes the same
    // inode (O_TRUNC keeps it).
    let keep = OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
    // mkfs's hundreds of requests spent the kernel's burst of sampled requests: let it refill, so
    // every request of the dd is sent (checked below).
    std::thread::sleep(std::time::Duration::from_millis(600));
    let s0 = sample(&mut bpf);
    let of = format!("of={}", path.display());
    common::run("dd", &["if=/dev/zero", &of, "bs=1M", "count=8", "conv=fsync", "status=none"]);
    let s1 = sample(&mut bpf);
    let files = compute(Some(&s0), &s1, (s1.mono_ns - s0.mono_ns) as f64 / 1e9);
    let f = find(&files, &lo, common::ino(&path));
    eprintln!("{test}: {f:?}");
    assert_eq!(f.path.as_deref(), Some(path.to_str().unwrap()));
    common::within("fsync writeback", f.writeback_bytes, 8 * MIB);
    // The block requests mapped to it: all of them when the kernel sent every request (other
    // I/O on the machine can use up the rate limit meanwhile); never more than were written.
    let sampling = ioscope::model::files::block_files(Some(&s0), &s1).unwrap();
    if sampling.not_sent == 0 {
        common::within("block writes mapped to the file", f.block_write_bytes, 8 * MIB);
    } else {
        eprintln!("{test}: only a sample of the requests was sent: {sampling:?}");
        assert!(f.block_write_bytes <= 8 * MIB, "{f:?}");
    }
    assert_eq!(f.block_disk.as_deref(), Some(lo.name.as_str()));
    // The journal (ext4) or log (xfs) writes the fsync forced are labelled, on the same disk.
    let journal = format!("[{} journal]", lo.name);
    let j = files.iter().find(|f| f.label.as_deref() == Some(journal.as_str()));
    if sampling.not_sent == 0 {
        assert!(j.is_some_and(|j| j.block_write_bytes > 0), "no journal row: {files:#?}");
    }
    drop(keep);
}

#[test]
fn ext4_fsync_writeback_is_credited_to_the_file() {
    let _group = common::live_group(module_path!());
    fsync_writeback("ext4");
}

#[test]
fn xfs_fsync_writeback_is_credited_to_the_file() {
    let _group = common::live_group(module_path!());
    fsync_writeback("xfs");
}
