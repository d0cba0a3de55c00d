//! Live eBPF test (root only): the `block:block_rq_issue` probe counts exactly the requests a `dd`
//! issued to a fresh loop device, and agrees with /proc/diskstats. Skips with a printed reason when
//! not root or when eBPF cannot be attached, unless IOSCOPE_REQUIRE_BPF=1 makes that a failure.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use common::LoopDevice;
use ioscope::bpf::BpfCollector;
use ioscope::sample::BpfDeviceCounters;

/// Set in the environment of the unprivileged re-run of this test binary (see below).
const UNPRIVILEGED_CHILD: &str = "IOSCOPE_LIVE_BPF_UNPRIVILEGED_CHILD";

fn counters_for(bpf: &mut BpfCollector, lo: &LoopDevice) -> BpfDeviceCounters {
    let sample = bpf.read();
    assert_eq!(sample.status.reason, None, "reading the maps failed");
    sample
        .rq_issue
        .into_iter()
        .find(|d| (d.major, d.minor) == (lo.major, lo.minor))
        .unwrap_or(BpfDeviceCounters { major: lo.major, minor: lo.minor, ..Default::default() })
}

fn max_io_bytes(lo: &LoopDevice) -> u64 {
    let kb = std::fs::read_to_string(format!("/sys/block/{}/queue/max_sectors_kb", lo.name)).unwrap();
    kb.trim().parse::<u64>().unwrap() * 1024
}

/// Requests the block layer makes of `count` direct I/Os of `bs` bytes each: one per I/O unless
/// it is larger than the queue's max_sectors_kb, in which case it is split.
fn expected_requests(count: u64, bs: u64, max_io: u64) -> u64 {
    count * bs.div_ceil(max_io)
}

#[test]
fn block_rq_issue_counts_what_dd_did_and_agrees_with_diskstats() {
    let _group = common::live_group(module_path!());
    if std::env::var_os(UNPRIVILEGED_CHILD).is_some() || !common::require_root("live_bpf") {
        return;
    }
    let mut bpf = BpfCollector::start();
    let status = bpf.status().clone();
    if !status.enabled {
        common::skip("live_bpf", &format!("eBPF unavailable: {}", status.reason.unwrap_or_default()));
        return;
    }
    assert_eq!(status.reason, None);
    let rq_issue =
        status.programs.iter().find(|p| p.program == "block_rq_issue_btf").expect("block_rq_issue_btf");
    assert_eq!(rq_issue.tracepoint, "block:block_rq_issue");
    assert!(rq_issue.attached);
    assert!(status.programs.iter().all(|p| p.attached), "every program attaches here: {:?}", status.programs);
    // Every program this kernel runs was verified ahead, on several CPUs at once (bpf::preload):
    // none loaded late (one after another) nor ahead for nothing.
    let loaded: std::collections::HashSet<&str> =
        status.programs.iter().map(|p| p.program.as_str()).collect();
    let preloaded = bpf.preload_report();
    assert_eq!((preloaded.planned, preloaded.late, preloaded.unused), (loaded.len(), 0, 0), "{preloaded:?}");

    let lo = LoopDevice::new(32);
    let dev = lo.path.to_str().unwrap();
    let bpf_before = counters_for(&mut bpf, &lo);
    let disk_before = lo.diskstats();

    common::run("dd", &["if=/dev/zero", &format!("of={dev}"), "oflag=direct", "bs=64k", "count=200"]);
    common::run("dd", &[&format!("if={dev}"), "of=/dev/null", "iflag=direct", "bs=4k", "count=500"]);

    let bpf_after = counters_for(&mut bpf, &lo);
    let disk_after = lo.diskstats();
    eprintln!("live_bpf {}: before {bpf_before:?}\n after {bpf_after:?}", lo.name);
    let d = |f: fn(&BpfDeviceCounters) -> u64| f(&bpf_after) - f(&bpf_before);
    let disk = |i: usize| disk_after[i] - disk_before[i];

    // What dd did, in requests the driver saw (split at max_sectors_kb; direct I/O of one
    // synchronous dd is never merged with another request).
    let max_io = max_io_bytes(&lo);
    assert_eq!(d(|c| c.write_requests), expected_requests(200, 65536, max_io), "write requests");
    assert_eq!(d(|c| c.write_bytes), 200 * 65536, "write bytes");
    assert_eq!(d(|c| c.read_requests), expected_requests(500, 4096, max_io), "read requests");
    assert_eq!(d(|c| c.read_bytes), 500 * 4096, "read bytes");

    // The kernel's own accounting of the same device: completed requests and 512-byte sectors.
    assert_eq!(d(|c| c.read_requests), disk(0), "BPF read requests vs diskstats reads completed");
    assert_eq!(d(|c| c.read_bytes), disk(2) * 512, "BPF read bytes vs diskstats sectors read");
    assert_eq!(d(|c| c.write_requests), disk(4), "BPF write requests vs diskstats writes completed");
    assert_eq!(d(|c| c.write_bytes), disk(6) * 512, "BPF write bytes vs diskstats sectors written");
    // Neither dd flushes or discards; diskstats counts discard requests at [11] and flushes at [15].
    let flushes_and_discards = disk(11) + disk(15);
    assert_eq!(d(|c| c.other_requests), flushes_and_discards, "other requests vs flushes + discards");
}

/// Without privileges, start() must not panic or fail: eBPF is off and the reason says what is
/// missing. Run as root, this re-runs itself (the same test binary, only the child part) as
/// nobody through `setpriv`, which drops every capability.
#[test]
fn unprivileged_start_reports_what_is_missing() {
    let _group = common::live_group(module_path!());
    if std::env::var_os(UNPRIVILEGED_CHILD).is_some() {
        let mut bpf = BpfCollector::start();
        let sample = bpf.read();
        println!("UNPRIVILEGED_STATUS {}", serde_json::to_string(&sample.status).unwrap());
        return;
    }
    if !common::require_root("live_bpf unprivileged") {
        return;
    }
    // A copy of this test binary where nobody can reach it: the checkout may sit under a
    // directory only root may enter (e.g. /root).
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = dir.path().join("live_bpf");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--"])
        .arg(&exe)
        .args(["--exact", &common::test_name(module_path!(), "unprivileged_start_reports_what_is_missing")])
        .args(["--nocapture", "--test-threads=1"])
        .env(UNPRIVILEGED_CHILD, "1")
        .output()
        .expect("run setpriv (util-linux)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "unprivileged run failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The libtest harness prints "test NAME ... " first, on the same line as our marker.
    let json = stdout
        .split_once("UNPRIVILEGED_STATUS ")
        .and_then(|(_, rest)| rest.lines().next())
        .unwrap_or_else(|| panic!("no status line in: {stdout}"));
    let status: ioscope::sample::BpfStatus = serde_json::from_str(json).unwrap();
    assert!(!status.enabled);
    let reason = status.reason.clone().unwrap();
    assert!(reason.contains("needs root, or CAP_BPF and CAP_PERFMON; run with sudo"), "{reason}");
    assert!(status.programs.is_empty());
    // The sync-call and cgroup views, drawn from this status, say what they lack and why.
    let mut m = ioscope::model::Model::default();
    m.bpf.enabled = false;
    m.bpf.reason = Some(reason.clone());
    m.bpf.panes = ioscope::model::panes::compute(&status);
    for (key, needs) in [('y', "sync calls need"), ('c', "the cgroup view needs")] {
        let mut state = ioscope::ui::UiState::new(std::time::Duration::from_secs(1), false);
        state.handle_key(crossterm::event::KeyEvent::new(
            crossterm::event::KeyCode::Char(key),
            crossterm::event::KeyModifiers::NONE,
        ));
        let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(240, 30)).unwrap();
        t.draw(|f| ioscope::ui::draw(f, &m, &state)).unwrap();
        let text = t.backend().to_string();
        assert!(text.contains("eBPF is off") && text.contains(needs), "view {key}: {text}");
    }
}

/// `bpf(2)` on a `union bpf_attr` laid out as `words` (zero-padded to the kernel's size).
fn bpf_call(cmd: libc::c_long, words: &[u64]) -> i64 {
    let mut attr = [0u64; 16];
    attr[..words.len()].copy_from_slice(words);
    // SAFETY: `attr` is a zeroed bpf_attr of 128 bytes holding the fields the command reads; the
    // pointers in it point to live buffers of the map's key and value sizes.
    unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), std::mem::size_of_val(&attr)) }
}

/// `map_batch::delete` removes exactly the keys it is given, in batches (the readahead map's
/// entries read unchanged are removed this way every sample), and reading in batches sees the rest.
#[test]
fn batch_delete_removes_exactly_the_keys_given() {
    let _group = common::live_group(module_path!());
    if std::env::var_os(UNPRIVILEGED_CHILD).is_some() || !common::require_root("live_bpf") {
        return;
    }
    use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};
    const N: u64 = 3000;
    // BPF_MAP_CREATE: map_type HASH (1), key_size 8, value_size 8, max_entries N.
    let fd = bpf_call(0, &[1 | (8 << 32), 8 | (N << 32)]);
    assert!(fd >= 0, "BPF_MAP_CREATE: {}", std::io::Error::last_os_error());
    // SAFETY: a descriptor the kernel just returned, owned here.
    let map = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let raw = fd as u64;
    for k in 0..N {
        let v = k * 10;
        // BPF_MAP_UPDATE_ELEM: map_fd, key, value, flags BPF_ANY.
        let r = bpf_call(2, &[raw, &k as *const u64 as u64, &v as *const u64 as u64, 0]);
        assert_eq!(r, 0, "BPF_MAP_UPDATE_ELEM: {}", std::io::Error::last_os_error());
    }
    // SAFETY: `map` stays open for the borrow's life.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd as i32) };
    let gone: Vec<u64> = (0..N).filter(|k| k % 3 != 0).collect();
    // A key not in the map is skipped, the others deleted.
    let asked: Vec<u64> = gone.iter().copied().chain([N + 7]).collect();
    let deleted = ioscope::bpf::map_batch::delete(borrowed, &asked).expect("batch delete");
    assert_eq!(deleted, gone.len());
    let mut left: Vec<(u64, u64)> =
        ioscope::bpf::map_batch::lookup::<u64, u64>(borrowed, None, false, 10_000)
            .unwrap()
            .into_iter()
            .map(|e| (e.key, e.values[0]))
            .collect();
    left.sort_unstable();
    let want: Vec<(u64, u64)> = (0..N).filter(|k| k % 3 == 0).map(|k| (k, k * 10)).collect();
    assert_eq!(left, want);
    drop(map);
}
