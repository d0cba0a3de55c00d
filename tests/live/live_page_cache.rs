//! Live page-cache accuracy (root only): the eBPF hit rate of one process reading a 64 MiB file on
//! a fresh loop-device ext4, cold, warm and half warm, through read() and through mmap; and the
//! pages a buffered writer dirtied. The reader is this test binary re-run as a child (so it is
//! one process whose pid we know), in a mode chosen by an environment variable.
//!
//! Caches are dropped per file with posix_fadvise(POSIX_FADV_DONTNEED), so the rest of the
//! machine keeps its cache and the test is not disturbed by what other processes do.

use crate::common;

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::Mutex;

use common::LoopDevice;
use ioscope::bpf::{BpfCollector, BpfOptions};
use ioscope::collect::{Sampler, SystemRoot};
use ioscope::model::page_cache::{processes, PageCacheProcessModel};
use ioscope::model::Model;
use ioscope::sample::Sample;

/// The child's job: "read", "mmap" or "write:MIB", on the file in CHILD_FILE.
const CHILD_MODE: &str = "IOSCOPE_LIVE_CACHE_CHILD";
const CHILD_FILE: &str = "IOSCOPE_LIVE_CACHE_FILE";

const FILE_MIB: u64 = 64;
const PAGE: u64 = 4096;
const FILE_PAGES: u64 = FILE_MIB * (1 << 20) / PAGE;

/// One collector per test binary run: the tests take turns (they share the machine's counters).
static SERIAL: Mutex<()> = Mutex::new(());

fn child_main() -> bool {
    let Ok(mode) = std::env::var(CHILD_MODE) else { return false };
    let path = std::env::var(CHILD_FILE).unwrap();
    // Started (program and libraries mapped, maybe read from disk if something evicted them):
    // tell the parent, which takes its "before" sample now, and wait for its go.
    common::child_signal_and_wait(READY);
    if mode == "read" {
        // cat's buffer size: 128 KiB read() calls.
        let mut f = File::open(&path).unwrap();
        let mut buf = vec![0u8; 128 << 10];
        while f.read(&mut buf).unwrap() > 0 {}
    } else if mode == "mmap" {
        let f = File::open(&path).unwrap();
        let len = f.metadata().unwrap().len() as usize;
        // SAFETY: a private read-only mapping of a file nobody truncates while we read it.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, f.as_raw_fd(), 0)
        };
        assert_ne!(p, libc::MAP_FAILED);
        let mut sum = 0u64;
        for off in (0..len).step_by(PAGE as usize) {
            // SAFETY: within the mapping.
            sum = sum.wrapping_add(unsafe { std::ptr::read_volatile((p as *const u8).add(off)) } as u64);
        }
        std::hint::black_box(sum);
    } else if mode == "dio-read" {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&path).unwrap();
        // O_DIRECT needs an aligned buffer: a 1 MiB one inside a 1 MiB + 4 KiB allocation.
        let mut raw = vec![0u8; (1 << 20) + 4096];
        let skip = raw.as_ptr().align_offset(4096);
        let buf = &mut raw[skip..skip + (1 << 20)];
        while f.read(buf).unwrap() > 0 {}
    } else if mode == "dio-write" {
        // Plain write(2) calls on an O_DIRECT descriptor: 1 MiB each, aligned, over the whole file.
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(&path).unwrap();
        let mut raw = vec![0x3cu8; (1 << 20) + 4096];
        let skip = raw.as_ptr().align_offset(4096);
        let buf = &mut raw[skip..skip + (1 << 20)];
        for _ in 0..FILE_MIB {
            f.write_all(buf).unwrap();
        }
    } else if let Some(mib) = mode.strip_prefix("write:") {
        let mib: usize = mib.parse().unwrap();
        let mut f = File::create(&path).unwrap();
        let block = vec![0x5au8; 1 << 20];
        for _ in 0..mib {
            f.write_all(&block).unwrap();
        }
    }
    true
}

/// What the child prints once started, before it waits for the go on stdin.
const READY: &str = "IOSCOPE_LIVE_CACHE_CHILD_READY";

/// Runs the child: starts it, waits until it is ready, calls `before` (the first sample, so the
/// child's own start-up is outside the measured interval), lets it work and waits for its exit.
/// Returns its pid and what `before` returned.
fn run_child<T>(mode: &str, file: &Path, before: impl FnOnce() -> T) -> (u32, T) {
    let mut child = common::TestChild::spawn(module_path!(), CHILD_MODE, mode, CHILD_FILE, file);
    let pid = child.pid();
    child.wait_for(READY);
    let b = before();
    child.send(b'g');
    child.finish();
    (pid, b)
}

/// The child's row for the interval between two samples (it has exited by `after`).
fn child_row(before: &Sample, after: &Sample, pid: u32) -> PageCacheProcessModel {
    let rows = processes(Some(before), after, 1.0);
    let row =
        rows.into_iter().find(|r| r.pid == pid).unwrap_or_else(|| panic!("pid {pid} not in the sample"));
    assert!(row.exited, "the child has exited: its last interval must still be reported");
    row
}

fn sample(bpf: &mut BpfCollector) -> Sample {
    let mut s = Sample { page_size: PAGE, ..Default::default() };
    s.bpf = bpf.read();
    assert!(s.bpf.page_cache.is_some(), "page-cache maps not read: {:?}", s.bpf.status);
    s
}

/// Writes the file with random-ish content, syncs it, and drops it from the cache.
fn make_file(path: &Path) {
    common::write_patterned_file(path, FILE_MIB);
    drop_cache(path);
}

fn drop_cache(path: &Path) {
    common::drop_file_cache(path);
}

/// Reads the first half of the file into the cache, in this (the parent) process.
fn preread_half(path: &Path) {
    let mut f = File::open(path).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..FILE_MIB / 2 {
        f.read_exact(&mut buf).unwrap();
    }
}

/// What every test here needs: the other tests kept out, root, the page-cache probes and a fresh
/// ext4 loop device. None (after printing why) when the test must skip.
struct Live {
    _serial: std::sync::MutexGuard<'static, ()>,
    bpf: BpfCollector,
    lo: LoopDevice,
}

fn setup() -> Option<Live> {
    setup_with(&BpfOptions::default())
}

fn setup_with(options: &BpfOptions) -> Option<Live> {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !common::require_root("live_page_cache") {
        return None;
    }
    let bpf = start(options)?;
    Some(Live { _serial: serial, bpf, lo: LoopDevice::with_fs(256, "ext4") })
}

fn start(options: &BpfOptions) -> Option<BpfCollector> {
    let bpf = BpfCollector::start_with(options);
    let st = bpf.status().clone();
    let wanted = ["filemap:mm_filemap_get_pages", "filemap:mm_filemap_add_to_page_cache"];
    let ok = wanted.iter().all(|t| st.programs.iter().any(|p| p.tracepoint == *t && p.attached));
    if !ok {
        common::skip("live_page_cache", &format!("page-cache probes unavailable: {:?}", st));
        return None;
    }
    Some(bpf)
}

fn pct(r: &PageCacheProcessModel) -> f64 {
    r.hit_pct.unwrap_or_else(|| panic!("no accesses counted: {r:?}"))
}

/// The three reads of the issue through one access method; returns the rows for the report.
fn cold_warm_half(mode: &str) {
    let Some(Live { _serial, mut bpf, lo }) = setup() else { return };
    let file = lo.mount_point().join("data");
    make_file(&file);

    // Cold.
    let (pid, before) = run_child(mode, &file, || sample(&mut bpf));
    let cold = child_row(&before, &sample(&mut bpf), pid);
    eprintln!("{mode} cold: {cold:?}");
    assert!(pct(&cold) <= 10.0, "{mode} cold hit % {} > 10", pct(&cold));
    let lo_m = FILE_PAGES as f64 * 0.9;
    let hi_m = FILE_PAGES as f64 * 1.1;
    assert!(
        (lo_m..=hi_m).contains(&(cold.misses as f64)),
        "{mode} cold misses {} not ≈ {FILE_PAGES}",
        cold.misses
    );

    // Warm: read again.
    assert_eq!(common::cached_pages(&file), FILE_PAGES, "the whole file is cached after the first read");
    let (pid, before) = run_child(mode, &file, || sample(&mut bpf));
    let warm = child_row(&before, &sample(&mut bpf), pid);
    eprintln!("{mode} warm: {warm:?}");
    assert!(pct(&warm) >= 95.0, "{mode} warm hit % {} < 95", pct(&warm));
    assert!(warm.misses <= FILE_PAGES / 100, "{mode} warm misses {} not ≈ 0", warm.misses);

    // Half warm.
    drop_cache(&file);
    preread_half(&file);
    let (pid, before) = run_child(mode, &file, || sample(&mut bpf));
    let half = child_row(&before, &sample(&mut bpf), pid);
    eprintln!("{mode} half: {half:?}");
    assert!((40.0..=60.0).contains(&pct(&half)), "{mode} half-cached hit % {} not within 40–60", pct(&half));
}

#[test]
fn child_entry_point() {
    let _group = common::live_group(module_path!());
    // Does the child's work when run as the child; nothing otherwise.
    child_main();
}

#[test]
fn read_hit_rate_cold_warm_and_half() {
    let _group = common::live_group(module_path!());
    if std::env::var_os(CHILD_MODE).is_some() {
        return;
    }
    cold_warm_half("read");
}

#[test]
fn mmap_hit_rate_cold_warm_and_half() {
    let _group = common::live_group(module_path!());
    if std::env::var_os(CHILD_MODE).is_some() {
        return;
    }
    cold_warm_half("mmap");
}

#[test]
fn buffered_write_dirties_its_pages() {
    let _group = common::live_group(module_path!());
    if std::env::var_os(CHILD_MODE).is_some() {
        return;
    }
    let Some(Live { _serial, mut bpf, lo }) = setup() else { return };
    let file = lo.mount_point().join("written");
    let mib = 32u64;
    let (pid, before) = run_child(&format!("write:{mib}"), &file, || sample(&mut bpf));
    let row = child_row(&before, &sample(&mut bpf), pid);
    eprintln!("write {mib} MiB: {row:?}");
    let expected = mib * (1 << 20) / PAGE;
    let (lo_d, hi_d) = (expected as f64 * 0.9, expected as f64 * 1.1);
    assert!((lo_d..=hi_d).contains(&(row.dirtied as f64)), "dirtied {} not ≈ {expected}", row.dirtied);
    // Allocating cache pages for a write is not a read miss.
    assert!(row.misses <= expected / 100, "a pure writer shows {} misses", row.misses);
    assert!(!row.direct_io);
}

#[test]
fn direct_io_is_marked_counts_neither_hits_nor_misses_and_has_its_direction() {
    let _group = common::live_group(module_path!());
    direct_io_checks(true);
}

/// The same with the classic tracepoint programs for the iomap events (kernels without BTF).
#[test]
fn direct_io_with_classic_tracepoints_has_its_direction_too() {
    let _group = common::live_group(module_path!());
    direct_io_checks(false);
}

fn direct_io_checks(btf: bool) {
    if std::env::var_os(CHILD_MODE).is_some() {
        return;
    }
    let Some(Live { _serial, mut bpf, lo }) =
        setup_with(&BpfOptions { btf_tracepoints: btf, ..Default::default() })
    else {
        return;
    };
    let attached = |name: &str| bpf.status().programs.iter().any(|p| p.program == name && p.attached);
    // Where the kernel has BTF (every kernel CI runs on) the twin must attach when asked for, and
    // then it reads the direction from the iov_iter (Linux 6.1+): iomap_iter, two runs per direct
    // I/O, is not traced at all. Else the classic programs take the direction from iomap_iter.
    let expected = btf && common::kernel_has_btf();
    let iter_traced = ["file_iomap_iter", "file_iomap_iter_btf"].iter().any(|p| attached(p));
    assert_eq!(
        (attached("iomap_dio_rw_begin_btf"), iter_traced),
        (expected, !expected),
        "BTF twin attached as asked, iomap_iter only without it: {:?}",
        bpf.status()
    );
    let file = lo.mount_point().join("data");
    make_file(&file);
    let (pid, before) = run_child("dio-read", &file, || sample(&mut bpf));
    let row = child_row(&before, &sample(&mut bpf), pid);
    eprintln!("dio read: {row:?}");
    assert!(row.direct_io, "O_DIRECT reads are marked");
    let size = (FILE_MIB << 20) as f64;
    // Interval of 1 s in child_row: the rate is the byte count.
    assert!(
        (size..=size + (1 << 20) as f64).contains(&row.dio_read_bytes_s),
        "direct reads {} bytes, file {size}",
        row.dio_read_bytes_s
    );
    assert!(row.misses <= FILE_PAGES / 100, "direct reads counted as {} misses", row.misses);
    assert_eq!(common::cached_pages(&file), 0, "O_DIRECT left the file out of the cache");

    // Plain write(2) on an O_DIRECT descriptor: on 6.18 its iomap_dio_rw_begin record lacks
    // IOCB_WRITE, so the direction must come from the iov_iter or iomap_iter, or these bytes show
    // as reads.
    let (pid, before) = run_child("dio-write", &file, || sample(&mut bpf));
    let row = child_row(&before, &sample(&mut bpf), pid);
    eprintln!("dio write: {row:?}");
    assert!(row.direct_io, "O_DIRECT writes are marked");
    assert!(
        (size..=size + (1 << 20) as f64).contains(&row.dio_write_bytes_s),
        "direct writes {} bytes, file {size}",
        row.dio_write_bytes_s
    );
    assert_eq!(row.dio_read_bytes_s, 0.0, "no direct read was done");
    assert_eq!(row.dirtied, 0, "O_DIRECT writes dirty no page");
}

/// The running tool's plausibility check: on a cold 64 MiB read, misses × page size and what the
/// block layer read (pgpgin, diskstats) agree, and nothing is flagged.
#[test]
fn cross_check_agrees_with_the_block_layer_on_a_cold_read() {
    let _group = common::live_group(module_path!());
    if std::env::var_os(CHILD_MODE).is_some() {
        return;
    }
    let Some(Live { _serial, bpf, lo }) = setup() else { return };
    let file = lo.mount_point().join("data");
    make_file(&file);
    let mut sampler = Sampler::new(SystemRoot::live(), bpf);
    let (_, before) = run_child("read", &file, || sampler.sample());
    let after = sampler.sample();
    let m = Model::between(&before, &after);
    let check = m.cache.expect("page-cache model").cross_check;
    eprintln!("cross-check: {check:?}");
    assert_eq!(check.mismatch, None);
    // The file's 64 MiB at least, read through the loop device (and its backing file).
    assert!(check.misses_bytes >= FILE_MIB << 20, "{check:?}");
    assert!(check.pgpgin_bytes >= FILE_MIB << 20, "{check:?}");
    let ratio = check.misses_bytes as f64 / check.pgpgin_bytes as f64;
    assert!((0.5..=2.0).contains(&ratio), "misses vs pgpgin ratio {ratio}: {check:?}");
}

/// A writer past a 16 MiB dirty limit is paused in balance_dirty_pages: its row shows the time,
/// the system line counts it, and the kernel's own limits (global_dirty_state) are the ones set.
#[test]
fn a_writer_past_the_dirty_limit_is_shown_throttled() {
    let _group = common::live_group(module_path!());
    if std::env::var_os(CHILD_MODE).is_some() {
        return;
    }
    let Some(Live { _serial, mut bpf, lo }) = setup() else { return };
    let file = lo.mount_point().join("dirty");
    let guard = common::DirtySettingsGuard::save();
    // 16 MiB = 4096 pages; background 32 MiB is not below it, so the kernel uses 2048.
    guard.set("dirty_bytes", 16 << 20);
    guard.set("dirty_background_bytes", 32 << 20);
    let (pid, mut before) = run_child("write:64", &file, || sample(&mut bpf));
    before.mono_ns = 1;
    let mut after = sample(&mut bpf);
    drop(guard);
    after.mono_ns = 1_000_000_001;
    let row = child_row(&before, &after, pid);
    eprintln!("throttled writer: {row:?}");
    assert!(row.throttled_ms > 0.0, "the writer was never paused");
    let expected = 64 * (1 << 20) / PAGE;
    assert!(
        (expected as f64 * 0.9..=expected as f64 * 1.1).contains(&(row.dirtied as f64)),
        "dirtied {} not ≈ {expected}",
        row.dirtied
    );
    let m = ioscope::model::page_cache::compute(Some(&before), &after, 1.0).unwrap();
    assert!(m.throttled_processes >= 1 && m.throttled_ms >= row.throttled_ms, "{m:?}");
    let k = m.kernel_dirty.expect("global_dirty_state seen");
    // The last event may come from after the settings were restored; the throttle record is from
    // the writer's own pauses, against its 16 MiB limit.
    let t = m.last_throttle.expect("a throttle record");
    assert!(t.limit <= 16 << 20, "throttle limit {} above the 16 MiB set", t.limit);
    assert!(k.threshold > 0);
}

/// Two readers time-sharing one CPU are each credited with their own reads: the read path
/// remembers the running task per CPU until the next context switch (`sched_switch`), so a stale
/// memory would credit one reader's pages to the other.
#[test]
fn two_readers_sharing_a_cpu_are_each_credited_with_their_own_reads() {
    let _group = common::live_group(module_path!());
    if std::env::var_os(CHILD_MODE).is_some() {
        return;
    }
    let Some(Live { _serial, mut bpf, lo }) = setup() else { return };
    let switch_traced = bpf.status().programs.iter().any(|p| p.program == "cache_sched_switch" && p.attached);
    assert!(switch_traced, "sched_switch program not attached: {:?}", bpf.status());
    // Cold files: each reader misses on its own file's pages, so both accesses and misses must
    // land on the right process.
    let files = ["first", "second"].map(|n| lo.mount_point().join(n));
    for f in &files {
        make_file(f);
    }
    let mut kids: Vec<common::TestChild> = files
        .iter()
        .map(|f| common::TestChild::spawn(module_path!(), CHILD_MODE, "read", CHILD_FILE, f))
        .collect();
    for k in kids.iter_mut() {
        k.wait_for(READY);
        pin_to_cpu0(k.pid());
    }
    let pids: Vec<u32> = kids.iter().map(|k| k.pid()).collect();
    let before = sample(&mut bpf);
    for k in kids.iter_mut() {
        k.send(b'g');
    }
    for k in kids {
        k.finish();
    }
    let after = sample(&mut bpf);
    for pid in pids {
        let row = child_row(&before, &after, pid);
        eprintln!("reader {pid} on cpu 0: {row:?}");
        let (lo_p, hi_p) = (FILE_PAGES as f64 * 0.9, FILE_PAGES as f64 * 1.1);
        assert!((lo_p..=hi_p).contains(&(row.misses as f64)), "misses {} not ≈ {FILE_PAGES}", row.misses);
        assert!(
            (lo_p..=hi_p).contains(&(row.accesses as f64)),
            "accesses {} not ≈ {FILE_PAGES}: another reader's were credited here, or ours elsewhere",
            row.accesses
        );
    }
}

fn pin_to_cpu0(pid: u32) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; plain syscall with valid pointers.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        let rc = libc::sched_setaffinity(pid as libc::pid_t, std::mem::size_of::<libc::cpu_set_t>(), &set);
        assert_eq!(rc, 0, "sched_setaffinity({pid}): {}", std::io::Error::last_os_error());
    }
}

/// With fentry/fexit refused (BpfOptions::no_trampoline, IOSCOPE_NO_TRAMPOLINE=1) the filemap
/// fallbacks never run as fentry/fexit: each is its kprobe variant (a kretprobe and its entry
/// kprobe for the read path) where the kernel has kprobes, else not attached, saying both the
/// refusal and the kprobe's error. Without the knob the refusal, if any, is the kernel's own.
#[test]
fn refused_trampolines_leave_the_fallbacks_to_kprobes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !common::require_root("live_page_cache") {
        return;
    }
    let hidden = ["filemap:mm_filemap_get_pages", "filemap:mm_filemap_map_pages", "filemap:mm_filemap_fault"];
    for no_trampoline in [true, false] {
        let options = BpfOptions {
            hidden_tracepoints: hidden.iter().map(|t| t.to_string()).collect(),
            no_trampoline,
            ..BpfOptions::default()
        };
        let bpf = BpfCollector::start_with(&options);
        let st = bpf.status().clone();
        if !st.enabled || !common::kernel_has_btf() {
            common::skip("live_page_cache", &format!("eBPF or BTF unavailable: {:?}", st.reason));
            return;
        }
        for tp in hidden {
            let rows: Vec<_> = st.programs.iter().filter(|p| p.fallback_for.as_deref() == Some(tp)).collect();
            assert!(!rows.is_empty(), "{tp}: no fallback row: {st:#?}");
            for p in rows {
                let how = p.mechanism.as_str();
                let on_request = p.error.as_deref().is_some_and(|e| e.contains("refused on request"));
                if no_trampoline {
                    assert!(!matches!(how, "fentry" | "fexit") || !p.attached, "{tp}: {p:?}");
                    if p.attached {
                        assert!(matches!(how, "kprobe" | "kretprobe"), "{tp}: {p:?}");
                    } else {
                        assert!(on_request && p.error.as_deref().unwrap().contains("kprobe"), "{tp}: {p:?}");
                    }
                } else {
                    assert!(!on_request, "{tp}: {p:?}");
                }
            }
        }
        let read = st.programs.iter().find(|p| p.fallback_for.as_deref() == Some(hidden[0])).unwrap();
        if no_trampoline && read.attached {
            assert_eq!(
                (read.program.as_str(), read.mechanism.as_str()),
                ("filemap_get_pages_kretprobe", "kretprobe")
            );
            assert!(st.programs.iter().any(|p| p.program == "filemap_get_pages_kprobe" && p.attached));
        }
    }
}
