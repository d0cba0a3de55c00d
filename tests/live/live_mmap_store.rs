//! Live: an mmap column store's reads, as the files view counts them, against the device's own
//! reads (/proc/diskstats) and the page cache (mincore). A page counts as read from disk only if
//! the disk was read: the read-around of an appender's ftruncate holes (zero-filled, no I/O) is
//! not a disk read nor readahead; the faults of MADV_RANDOM updates that do read the disk (and
//! dirty the page in the same fault) are disk reads. The writer is xtask/src/mmap_writer.rs.

use crate::common;
use crate::mmap_writer;

use std::sync::Mutex;

use common::LoopDevice;
use ioscope::bpf::BpfCollector;
use ioscope::model::files::{compute, FileModel};
use ioscope::sample::Sample;

const PAGE: u64 = 4096;
const MIB: u64 = 1 << 20;

static SERIAL: Mutex<()> = Mutex::new(());

fn start(test: &str) -> Option<BpfCollector> {
    if !common::require_root(test) {
        return None;
    }
    let bpf = BpfCollector::start();
    let st = bpf.status().clone();
    let wanted = ["filemap:mm_filemap_add_to_page_cache", "writeback:writeback_dirty_folio"];
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

/// Bytes the device read between two /proc/diskstats readings.
fn device_read_bytes(before: &[u64], after: &[u64]) -> u64 {
    (after[2] - before[2]) * 512
}

fn row<'a>(files: &'a [FileModel], lo: &LoopDevice, path: &std::path::Path) -> Option<&'a FileModel> {
    let (dev, ino) = (format!("{}:{}", lo.major, lo.minor), common::ino(path));
    files.iter().find(|f| f.dev == dev && f.ino == ino)
}

/// Four 8 MiB columns appended through shared mappings of ftruncate-extended files: every page
/// the read-around brings in is a hole's, zero-filled without I/O. The disk reads almost nothing
/// (metadata at most), and so must the files view: on the old count (pages entering the cache)
/// the columns read 32 MiB, as much readahead.
#[test]
fn an_appenders_holes_read_around_are_neither_disk_reads_nor_readahead() {
    let _group = common::live_group(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "live_mmap_store_holes";
    let Some(mut bpf) = start(test) else { return };
    let lo = LoopDevice::with_fs(128, "ext4");
    let dir = lo.mount_point().to_path_buf();
    let (s0, d0) = (sample(&mut bpf), lo.diskstats());
    let cols = mmap_writer::append_columns(&dir, 4, 8 * MIB).unwrap();
    let (s1, d1) = (sample(&mut bpf), lo.diskstats());
    let files = compute(Some(&s0), &s1, (s1.mono_ns - s0.mono_ns) as f64 / 1e9);
    let disk = device_read_bytes(&d0, &d1);
    let mut read = 0;
    for c in &cols {
        let f = row(&files, &lo, c).unwrap_or_else(|| panic!("no row for {}: {files:#?}", c.display()));
        // Dirtied through the mapping (in folios: not asserted in pages here).
        assert!(f.dirtied_bytes > 0, "{f:?}");
        assert!(f.readahead_bytes <= f.disk_read_bytes, "{f:?}");
        read += f.disk_read_bytes;
        eprintln!(
            "{test}: {} read {} readahead {} dirtied {}",
            c.display(),
            f.disk_read_bytes,
            f.readahead_bytes,
            f.dirtied_bytes
        );
    }
    eprintln!("{test}: columns read {read} bytes, the device {disk}");
    assert!(read <= disk, "the columns read {read} bytes from disk, the device read {disk}");
}

/// A 16 MiB column written and dropped from the cache, then 1,000 random pages of it updated
/// through a MADV_RANDOM mapping: each fault reads its page (no read-around) and dirties it. The
/// files view counts those reads (on the old count they were taken back as write allocations:
/// 0), as many as the pages mincore finds cached after, and no more than the device read.
#[test]
fn madv_random_faults_that_read_the_disk_are_disk_reads() {
    let _group = common::live_group(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "live_mmap_store_random";
    let Some(mut bpf) = start(test) else { return };
    let lo = LoopDevice::with_fs(128, "ext4");
    let col = mmap_writer::column_path(lo.mount_point(), 0);
    common::write_patterned_file(&col, 16);
    common::drop_file_cache(&col);
    let (s0, d0) = (sample(&mut bpf), lo.diskstats());
    let touched = mmap_writer::update_random_pages(&col, 1000).unwrap();
    let (s1, d1) = (sample(&mut bpf), lo.diskstats());
    let cached = common::cached_pages(&col);
    let files = compute(Some(&s0), &s1, (s1.mono_ns - s0.mono_ns) as f64 / 1e9);
    let disk = device_read_bytes(&d0, &d1);
    let f = row(&files, &lo, &col).unwrap_or_else(|| panic!("no row for the column: {files:#?}"));
    eprintln!("{test}: {touched} pages touched, {cached} cached (mincore), device read {disk}, file {f:?}");
    assert_eq!(cached, touched, "MADV_RANDOM: one page per fault");
    common::within("the column's disk reads", f.disk_read_bytes, touched * PAGE);
    assert!(f.disk_read_bytes <= disk, "more than the device read: {} > {disk}", f.disk_read_bytes);
    assert!(f.dirtied_bytes > 0, "{f:?}");
    // Each fault asked for the page it read: demand, not readahead (readahead means pages beyond
    // what was asked for). Kernels without `mm_filemap_fault` (before 6.12) cannot tell.
    if bpf_has_fault_event() {
        assert_eq!(f.readahead_bytes, 0, "{f:?}");
    }
}

fn bpf_has_fault_event() -> bool {
    std::path::Path::new("/sys/kernel/tracing/events/filemap/mm_filemap_fault").exists()
        || std::path::Path::new("/sys/kernel/debug/tracing/events/filemap/mm_filemap_fault").exists()
}

/// Twelve 8 MiB columns appended through shared mappings of ftruncate-extended files by a process
/// limited to 32 MiB of memory (cgroup v1's memory controller here, v2's elsewhere), so that the
/// written pages are evicted while the appender faults the next ones in: the faults' read-around
/// brings in holes' pages, zero-filled without I/O. The readahead view counts as read ahead only
/// pages a read bio covered: its read-ahead pages are at most what the device read. On the old
/// count (pages inserted in a window) they were the read-around's holes, tens of MiB against the
/// device's few KiB.
#[test]
fn an_appenders_holes_are_not_read_ahead_under_a_memory_limit() {
    let _group = common::live_group(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "live_mmap_store_ra_holes";
    let Some(mut bpf) = start(test) else { return };
    let st = bpf.status().clone();
    let has = |prog: &str| st.programs.iter().any(|p| p.program == prog && p.attached);
    if !has(ioscope::bpf::files::BIO_PROGRAM) || !has("readahead_ra_order") {
        common::skip(test, "no read-bio program or readahead window event: the old count");
        return;
    }
    let lo = LoopDevice::with_fs(160, "ext4");
    let dir = lo.mount_point().to_path_buf();
    let (s0, d0) = (sample(&mut bpf), lo.diskstats());
    let cols = {
        let _limit = mmap_writer::MemoryLimit::enter("ioscope-live-ra-holes", 32 * MIB).unwrap();
        mmap_writer::append_columns(&dir, 12, 8 * MIB).unwrap()
    };
    let (s1, d1) = (sample(&mut bpf), lo.diskstats());
    assert_eq!(cols.len(), 12);
    let secs = (s1.mono_ns - s0.mono_ns) as f64 / 1e9;
    let ra = ioscope::model::readahead::compute(Some(&s0), &s1, secs).expect("a readahead model");
    let dev = format!("{}:{}", lo.major, lo.minor);
    let (ra_pages, used, wasted) = ra
        .devices
        .iter()
        .filter(|d| d.dev == dev)
        .fold((0, 0, 0), |a, d| (a.0 + d.ra_pages, a.1 + d.used_pages, a.2 + d.wasted_pages));
    let disk = device_read_bytes(&d0, &d1);
    eprintln!(
        "{test}: read ahead {} bytes (used {}, wasted {} pages), the device read {disk}",
        ra_pages * PAGE,
        used,
        wasted
    );
    assert!(ra_pages * PAGE <= disk, "read ahead {} bytes, the device read {disk}", ra_pages * PAGE);
    assert!(used * PAGE <= disk && wasted * PAGE <= disk, "used {used}, wasted {wasted} pages");
}
