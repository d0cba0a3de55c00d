//! Live sync-call latency (root only; issue 21): a process dirties 512 MiB on an ext4 loop device
//! and syncs it with `fsync`, `fdatasync`, `sync_file_range` and an io_uring fsync, timing the
//! call itself. ioscope must show each call on the right path and process with its latency within
//! 10 % of the measured one and the bytes it wrote back, show it while it runs (past a second)
//! with its age, and show a second process's small fsync made during the big one with its
//! inflated latency (the small calls are timed by their callers too: ioscope must agree with
//! each, and the inflation it shows, the slowest made during the big call over the fastest on the
//! idle filesystem, must be the callers' own within 10 % and over 2 ×; several are tried one after
//! another while the big call runs, so that a loaded machine's timing, or a big call ending early,
//! does not decide the outcome).
//!
//! To be slow enough to watch, the loop device does direct I/O to its image, takes requests of at
//! most 4 KiB (`max_sectors_kb`) and holds at most 8 at a time (`nr_requests`): 512 MiB then takes
//! 2.1–2.9 s to write back here on a day the host's disk wrote it in 1.0 s with the queue's
//! default 128 (too fast to be seen running past a second, which the test needs; 1.0–1.2 s with
//! 32, 1.5–1.8 s with 16). Fewer is slower still (4: 4.3–5.0 s) but leaves the small fsyncs made
//! meanwhile barely slowed (2.1–3.2 × idle against 4.5–16 × with 8): ext4's commit waits for the
//! big file's writes in flight, and there are fewer. (768 MiB is not written back by the call: the
//! flusher takes most of it before, at this device's share of the dirty limit.)

use crate::common;

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{LoopDevice, TestChild};
use ioscope::bpf::BpfCollector;
use ioscope::model::syncs::{compute, SyncModel};
use ioscope::sample::Sample;

const MIB: u64 = 1 << 20;
const BIG_MIB: u64 = 512;
const MODE_VAR: &str = "IOSCOPE_SYNC_TEST_MODE";
const FILE_VAR: &str = "IOSCOPE_SYNC_TEST_FILE";
/// The writer's name, set with prctl so the call is told apart from the test's own threads.
const WRITER_COMM: &str = "syncwriter";
/// The small fsync's mode and its callers' name.
const SMALL: &str = "small fsync";
const SMALL_COMM: &str = "syncsmall";
/// Small fsyncs tried on the idle filesystem, and at most during the big one.
const SMALL_IDLE: usize = 3;
const SMALL_DURING: usize = 5;

/// The worker: dirties BIG_MIB MiB of its file (4 KiB for the small fsync), says "written",
/// waits for the go, makes one sync call of its mode, writes the call's duration (ns) to
/// FILE.took and exits.
#[test]
fn child_entry_point() {
    let _group = common::live_group(module_path!());
    let (Ok(mode), Ok(file)) = (std::env::var(MODE_VAR), std::env::var(FILE_VAR)) else { return };
    let name = std::ffi::CString::new(if mode == SMALL { SMALL_COMM } else { WRITER_COMM }).unwrap();
    // SAFETY: PR_SET_NAME with a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
    let mut f = OpenOptions::new().create(true).truncate(true).write(true).open(&file).unwrap();
    if mode == SMALL {
        f.write_all(&[0x5au8; 4096]).unwrap();
    } else {
        let chunk = vec![0x5au8; MIB as usize];
        for _ in 0..BIG_MIB {
            f.write_all(&chunk).unwrap();
        }
    }
    common::child_signal_and_wait("written");
    let fd = f.as_raw_fd();
    let t = Instant::now();
    // SAFETY: plain syscalls on an fd we own.
    let rc = unsafe {
        match mode.as_str() {
            "fsync" | SMALL => libc::fsync(fd),
            "fdatasync" => libc::fdatasync(fd),
            "sync_file_range" => libc::sync_file_range(
                fd,
                0,
                0,
                libc::SYNC_FILE_RANGE_WAIT_BEFORE
                    | libc::SYNC_FILE_RANGE_WRITE
                    | libc::SYNC_FILE_RANGE_WAIT_AFTER,
            ),
            "io_uring fsync" => uring_fsync(fd),
            other => panic!("unknown mode {other}"),
        }
    };
    let took = t.elapsed();
    assert_eq!(rc, 0, "{mode} failed: {}", std::io::Error::last_os_error());
    std::fs::write(format!("{file}.took"), took.as_nanos().to_string()).unwrap();
}

/// One IORING_OP_FSYNC on `fd`, waited for; its result (0 on success).
fn uring_fsync(fd: i32) -> i32 {
    let mut ring = io_uring::IoUring::new(2).expect("io_uring");
    let sqe = io_uring::opcode::Fsync::new(io_uring::types::Fd(fd)).build().user_data(7);
    // SAFETY: the entry refers to no buffer.
    unsafe { ring.submission().push(&sqe).expect("queue the fsync") };
    ring.submit_and_wait(1).expect("submit");
    let result = ring.completion().next().expect("a completion").result();
    result
}

fn sample(bpf: &mut BpfCollector) -> Sample {
    let mut s = Sample { page_size: 4096, mono_ns: ioscope::collect::monotonic_ns(), ..Default::default() };
    s.bpf = bpf.read();
    s
}

fn rows(prev: &Sample, cur: &Sample) -> Vec<SyncModel> {
    compute(Some(prev), cur, (cur.mono_ns - prev.mono_ns) as f64 / 1e9)
}

fn find<'a>(rows: &'a [SyncModel], pid: u32, syscall: &str, path: &Path) -> Option<&'a SyncModel> {
    rows.iter().find(|r| r.pid == pid && r.syscall == syscall && r.path.as_deref() == path.to_str())
}

/// The row of `pid`'s `syscall` on the inode of `path` (dd has exited by the time it is read, so
/// its file may have no path yet: nobody holds it open).
fn find_ino<'a>(rows: &'a [SyncModel], pid: u32, syscall: &str, path: &Path) -> Option<&'a SyncModel> {
    use std::os::unix::fs::MetadataExt;
    let ino = std::fs::metadata(path).unwrap().ino();
    rows.iter().find(|r| r.pid == pid && r.syscall == syscall && r.ino == ino)
}

/// A small fsync's worker, started and its 4 KiB written before it is needed.
struct Small {
    child: TestChild,
    file: PathBuf,
}

impl Small {
    fn ready(dir: &Path, name: &str) -> Small {
        let file = dir.join(name);
        let mut child = TestChild::spawn(module_path!(), MODE_VAR, SMALL, FILE_VAR, &file);
        child.wait_for("written");
        Small { child, file }
    }

    /// Makes the call; (pid, the file, the call's duration as its caller timed it).
    fn call(mut self) -> SmallCall {
        let pid = self.child.pid();
        self.child.send(b'g');
        self.child.finish();
        let took = std::fs::read_to_string(format!("{}.took", self.file.display())).unwrap();
        SmallCall { pid, file: self.file, took_s: took.trim().parse::<f64>().unwrap() / 1e9 }
    }
}

#[derive(Debug)]
struct SmallCall {
    pid: u32,
    file: PathBuf,
    took_s: f64,
}

impl SmallCall {
    /// ioscope's latency of the call, checked against the caller's own timing (10 % + 1 ms: a
    /// call of a few ms also spans the tracepoints' and the clock reads' µs).
    fn seen(&self, rows: &[SyncModel], failures: &mut Vec<String>) -> Option<f64> {
        let Some(r) = find_ino(rows, self.pid, "fsync", &self.file) else {
            failures.push(format!("no row for the small fsync {self:?}"));
            return None;
        };
        if r.comm != SMALL_COMM || r.calls != 1 || (r.max_s - self.took_s).abs() > 0.1 * self.took_s + 0.001 {
            failures.push(format!(
                "small fsync {self:?}: ioscope {:.4} s, comm {:?}, calls {}",
                r.max_s, r.comm, r.calls
            ));
        }
        Some(r.max_s)
    }
}

struct Outcome {
    took_s: f64,
    row: SyncModel,
    /// The oldest age ioscope gave the running call, and the time since the go at that sample.
    running_seen: Option<(f64, f64)>,
    /// The small fsyncs made while the big call ran (each returned before it did).
    small: Vec<SmallCall>,
}

/// Runs one worker of `mode` on `dir` and watches it through ioscope until its call returns.
fn watch(bpf: &mut BpfCollector, dir: &Path, mode: &str, with_small: bool) -> Outcome {
    let file: PathBuf = dir.join(format!("big-{}", mode.replace(' ', "-")));
    let took_file = PathBuf::from(format!("{}.took", file.display()));
    let mut child = TestChild::spawn(module_path!(), MODE_VAR, mode, FILE_VAR, &file);
    child.wait_for("written");
    let pid = child.pid();
    let mut waiting: Vec<Small> = if with_small {
        (0..SMALL_DURING).map(|i| Small::ready(dir, &format!("small-during-{i}"))).collect()
    } else {
        Vec::new()
    };
    let mut prev = sample(bpf);
    let go = ioscope::collect::monotonic_ns();
    child.send(b'g');
    let mut running_seen = None;
    let mut small = Vec::new();
    // Generous: under load the calls took 15–26 s with 128 requests in flight, and 8 may make them
    // several times longer.
    let deadline = Instant::now() + Duration::from_secs(300);
    while !took_file.exists() {
        assert!(Instant::now() < deadline, "{mode}: the call did not return in 300 s");
        std::thread::sleep(Duration::from_millis(200));
        let cur = sample(bpf);
        let r = rows(&prev, &cur);
        if let Some(row) = find(&r, pid, mode, &file).filter(|row| row.running > 0 && row.running_s > 1.0) {
            running_seen.get_or_insert((row.running_s, (cur.mono_ns - go) as f64 / 1e9));
            // One small fsync after the other while the big call runs; only those that returned
            // before it count.
            if let Some(s) = waiting.pop() {
                let call = s.call();
                if !took_file.exists() {
                    small.push(call);
                }
            }
        }
        prev = cur;
    }
    child.finish();
    for s in waiting {
        s.call();
    }
    let took_s = std::fs::read_to_string(&took_file).unwrap().trim().parse::<f64>().unwrap() / 1e9;
    let cur = sample(bpf);
    let r = rows(&prev, &cur);
    let row = find(&r, pid, mode, &file)
        .unwrap_or_else(|| {
            let mine: Vec<_> = r.iter().filter(|x| x.pid == pid).collect();
            panic!("{mode}: no row for pid {pid} on {}; its rows: {mine:#?}", file.display())
        })
        .clone();
    std::fs::remove_file(&file).unwrap();
    Outcome { took_s, row, running_seen, small }
}

#[test]
fn sync_calls_are_timed_on_their_file_and_process_while_they_run() {
    let _group = common::live_group(module_path!());
    let test = "sync_calls_are_timed_on_their_file_and_process_while_they_run";
    if !common::require_root(test) {
        return;
    }
    let mut bpf = BpfCollector::start();
    let st = bpf.status().clone();
    for tp in ["syscalls:sys_enter_fsync", "syscalls:sys_exit_fsync", "io_uring:io_uring_complete"] {
        if !st.programs.iter().any(|p| p.tracepoint == tp && p.attached) {
            common::skip(test, &format!("{tp} not attached: {:?}", st.reason));
            return;
        }
    }
    let lo = LoopDevice::ext4_direct_io_in(Path::new("/var/tmp"), 1400);
    std::fs::write(format!("/sys/block/{}/queue/max_sectors_kb", lo.name), "4").unwrap();
    std::fs::write(format!("/sys/block/{}/queue/nr_requests", lo.name), "8").unwrap();
    let dir = lo.mount_point().to_path_buf();
    // The flusher leaves the test's dirty pages to the calls: under load a call ran 15-26 s, its
    // pages passed the 30 s expiry and the flusher wrote 40 % of sync_file_range's 512 MiB.
    let dirty = common::DirtySettingsGuard::save();
    dirty.set("dirty_expire_centisecs", 360_000);

    // Small fsyncs on the idle filesystem, for comparison: the fastest (a loaded machine slows
    // some).
    let mut failures = Vec::new();
    let before = sample(&mut bpf);
    let idle: Vec<SmallCall> =
        (0..SMALL_IDLE).map(|i| Small::ready(&dir, &format!("small-idle-{i}")).call()).collect();
    let r = rows(&before, &sample(&mut bpf));
    let idle_s = idle.iter().filter_map(|c| c.seen(&r, &mut failures)).fold(f64::INFINITY, f64::min);
    eprintln!("idle small fsyncs: {idle:?}, ioscope's fastest {idle_s:.4} s");

    for mode in ["fsync", "fdatasync", "sync_file_range", "io_uring fsync"] {
        let o = watch(&mut bpf, &dir, mode, mode == "fsync");
        let row = &o.row;
        eprintln!(
            "{mode}: took {:.3} s, ioscope max {:.3} s, running seen {:?}, written {} MiB, row {row:?}",
            o.took_s,
            row.max_s,
            o.running_seen,
            row.written_bytes / MIB
        );
        let mut check = |ok: bool, what: String| {
            if !ok {
                failures.push(format!("{mode}: {what}"));
            }
        };
        // What the test needs of the machine: a call that runs long enough to be seen running
        // past a second (sampled every 200 ms).
        assert!(
            o.took_s > 1.2 || o.running_seen.is_some(),
            "{mode} took {:.3} s: the loop device is too fast for this test",
            o.took_s
        );
        check(row.comm == WRITER_COMM, format!("comm {:?}", row.comm));
        check(row.calls == 1 && row.running == 0, format!("calls {} running {}", row.calls, row.running));
        let err = (row.max_s - o.took_s).abs() / o.took_s;
        check(
            err <= 0.10,
            format!("latency {:.3} s vs measured {:.3} s ({:.1} %)", row.max_s, o.took_s, err * 100.0),
        );
        check((row.total_s - row.max_s).abs() < 1e-9, format!("total {} vs max {}", row.total_s, row.max_s));
        match o.running_seen {
            Some((age, since_go)) => check(
                age <= since_go + 0.01 && age >= since_go - 0.3,
                format!("running age {age:.3} s, {since_go:.3} s after the go"),
            ),
            None => check(false, "never seen running past 1 s".into()),
        }
        // The writeback of a syscall runs in the caller's thread; io_uring's in an io-wq worker.
        if !mode.starts_with("io_uring") {
            let want = BIG_MIB * MIB;
            check(
                row.written_bytes >= want * 9 / 10 && row.written_bytes <= want * 11 / 10,
                format!("written {} bytes, dirtied {want}", row.written_bytes),
            );
        }
        if mode == "fsync" {
            // Every small call agrees with its caller's timing, and so does the inflation shown:
            // the slowest made during the big call over the fastest idle one. How much there is
            // depends on the disk, not on ioscope: quiet, the calls took 3-7 ms against 0.7-1.1 ms
            // idle (ext4's commit waits for the big file's ordered data in flight); under load
            // ~10, 0.10-0.18 s. Over 2 × only checks the story is there to be seen.
            let r = rows(&before, &sample(&mut bpf));
            let mut small_failures = Vec::new();
            let seen: Vec<f64> = o.small.iter().filter_map(|c| c.seen(&r, &mut small_failures)).collect();
            eprintln!("small fsyncs during the big one: {:?}, ioscope {seen:?}", o.small);
            for f in small_failures {
                check(false, f);
            }
            let callers_idle = idle.iter().map(|c| c.took_s).fold(f64::INFINITY, f64::min);
            let callers = o.small.iter().map(|c| c.took_s).fold(0.0, f64::max) / callers_idle;
            let shown = seen.iter().copied().fold(0.0, f64::max) / idle_s;
            check(
                (shown - callers).abs() <= 0.10 * callers && shown > 2.0,
                format!(
                    "small fsyncs made during the big one shown {shown:.2} × the idle {idle_s:.4} s, \
                     their callers measured {callers:.2} ×: {seen:?} ({} made)",
                    o.small.len()
                ),
            );
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// On a kernel without a tracepoint (hidden here, as on an older kernel) the panes say which is
/// missing, and the calls whose tracepoints exist are still timed.
#[test]
fn a_missing_tracepoint_is_named_and_the_other_calls_still_count() {
    let _group = common::live_group(module_path!());
    let test = "a_missing_tracepoint_is_named_and_the_other_calls_still_count";
    if !common::require_root(test) {
        return;
    }
    let options = ioscope::bpf::BpfOptions {
        hidden_tracepoints: vec!["syscalls:sys_enter_fsync".into(), "io_uring:io_uring_complete".into()],
        ..Default::default()
    };
    let mut bpf = BpfCollector::start_with(&options);
    let before = sample(&mut bpf);
    let panes = ioscope::model::panes::compute(&before.bpf.status);
    let syncs = ioscope::model::panes::find(&panes, "syncs").expect("a syncs pane");
    assert!(!syncs.live && syncs.missing.contains(&"syscalls:sys_enter_fsync".to_string()), "{syncs:?}");
    assert!(syncs.reason.as_deref().unwrap_or("").contains("hidden on request"), "{syncs:?}");
    let uring = ioscope::model::panes::find(&panes, "syncs_io_uring").expect("an io_uring pane");
    assert!(!uring.live && uring.missing.contains(&"io_uring:io_uring_complete".to_string()), "{uring:?}");

    let dir = std::env::temp_dir().join(format!("ioscope-syncs-hidden-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("f");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(&[1u8; 8192]).unwrap();
    f.sync_data().unwrap();
    f.sync_all().unwrap();
    let r = rows(&before, &sample(&mut bpf));
    let mine: Vec<_> = r.iter().filter(|x| x.pid == std::process::id()).collect();
    assert!(
        mine.iter().any(|x| x.syscall == "fdatasync" && x.calls == 1 && x.path.as_deref() == path.to_str()),
        "fdatasync not counted: {mine:#?}"
    );
    assert!(!mine.iter().any(|x| x.syscall == "fsync"), "fsync counted without its tracepoint: {mine:#?}");
    drop(f);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A kernel whose BPF has no compare-and-exchange (before 5.12): the entry program's twin,
/// `sync_enter_nocas`, keeps every call in the hash map instead of its thread's slot; the calls
/// are timed on their file with the bytes they wrote back, as with `sync_enter`.
#[test]
fn without_compare_and_exchange_the_entry_twin_times_calls_the_same() {
    let _group = common::live_group(module_path!());
    let test = "without_compare_and_exchange_the_entry_twin_times_calls_the_same";
    if !common::require_root(test) {
        return;
    }
    let options = ioscope::bpf::BpfOptions {
        refuse_block_twin: Some(ioscope::bpf::block_claim::REFUSE_CAS.into()),
        ..Default::default()
    };
    let mut bpf = BpfCollector::start_with(&options);
    let st = bpf.status().clone();
    let enter: Vec<&str> = st
        .programs
        .iter()
        .filter(|p| p.tracepoint == "syscalls:sys_enter_fsync" && p.attached)
        .map(|p| p.program.as_str())
        .collect();
    if enter.is_empty() {
        common::skip(test, &format!("syscalls:sys_enter_fsync not attached: {:?}", st.reason));
        return;
    }
    assert_eq!(enter, [ioscope_common::syncs::SYNC_ENTER_NOCAS], "{:?}", st.programs);
    let dir = PathBuf::from(format!("/var/tmp/ioscope-syncs-nocas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("f");
    let before = sample(&mut bpf);
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(&vec![1u8; 4 << 20]).unwrap();
    f.sync_all().unwrap();
    let r = rows(&before, &sample(&mut bpf));
    let mine: Vec<_> = r.iter().filter(|x| x.pid == std::process::id()).collect();
    let row = find(&r, std::process::id(), "fsync", &path)
        .unwrap_or_else(|| panic!("fsync not counted: {mine:#?}"));
    assert_eq!((row.calls, row.running), (1, 0), "{row:?}");
    assert!(row.max_s > 0.0 && row.written_bytes >= 4 << 20, "{row:?}");
    drop(f);
    std::fs::remove_dir_all(&dir).unwrap();
}
