//! ioscope's dirty thresholds against the kernel's own, from the `writeback:global_dirty_state`
//! tracepoint (root only).
//!
//! The kernel runs domain_dirty_limits() — and fires the tracepoint — whenever /proc/vmstat is read
//! (it prints nr_dirty_threshold) and whenever a writer enters balance_dirty_pages(). The first
//! check uses the machine's current settings; the second sets byte limits small enough that a
//! writer on a loop-device filesystem crosses the freerun point, so the event comes from the real
//! throttling path, and with the background limit above the dirty limit (the kernel halves it).
//! Settings are restored by a Drop guard, even when an assertion fails.

use crate::common;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ioscope::collect::{collect, SystemRoot};
use ioscope::model::Model;

const TRACEFS: &str = "/sys/kernel/tracing";

/// Both tests read global kernel state and one changes it: never run them concurrently.
static SERIAL: Mutex<()> = Mutex::new(());

/// A private tracefs instance with only writeback:global_dirty_state enabled; removed on drop.
struct TraceInstance {
    dir: PathBuf,
}

impl TraceInstance {
    fn new() -> TraceInstance {
        if !Path::new(TRACEFS).join("instances").is_dir() {
            common::run("mount", &["-t", "tracefs", "nodev", TRACEFS]);
        }
        let dir = Path::new(TRACEFS).join(format!("instances/ioscope-dirty-test-{}", std::process::id()));
        let _ = fs::remove_dir(&dir);
        fs::create_dir(&dir).expect("create tracefs instance");
        let inst = TraceInstance { dir };
        fs::write(inst.event_dir().join("enable"), "1").expect("enable writeback:global_dirty_state");
        inst
    }

    fn event_dir(&self) -> PathBuf {
        self.dir.join("events/writeback/global_dirty_state")
    }

    /// (pid, bg_thresh, thresh) of every event recorded so far, in pages.
    fn events(&self) -> Vec<(u32, u64, u64)> {
        let text = fs::read_to_string(self.dir.join("trace")).expect("read trace");
        text.lines()
            .filter(|l| !l.starts_with('#') && l.contains("global_dirty_state:"))
            .map(|l| {
                // "  cat-10247   [000] .....   414.39: global_dirty_state: dirty=.. bg_thresh=593919 thresh=1189291 .."
                // The comm may hold spaces and dashes: the pid is what follows the last '-' before
                // the "[CPU]" column.
                let cpu_column = l
                    .match_indices('[')
                    .map(|(i, _)| i)
                    .find(|&i| l[i + 1..].split_once(']').is_some_and(|(n, _)| n.parse::<u32>().is_ok()))
                    .unwrap_or_else(|| panic!("no [CPU] column in {l:?}"));
                let task = l[..cpu_column].trim();
                let pid = task.rsplit_once('-').and_then(|(_, p)| p.parse().ok()).unwrap_or(0);
                let value = |key: &str| -> u64 {
                    let word = l.split_whitespace().find_map(|w| w.strip_prefix(key));
                    word.and_then(|w| w.parse().ok()).unwrap_or_else(|| panic!("no {key} in {l:?}"))
                };
                (pid, value("bg_thresh="), value("thresh="))
            })
            .collect()
    }

    fn clear(&self) {
        fs::write(self.dir.join("trace"), "").unwrap();
    }
}

impl Drop for TraceInstance {
    fn drop(&mut self) {
        let _ = fs::write(self.event_dir().join("enable"), "0");
        let _ = fs::remove_dir(&self.dir);
    }
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

#[track_caller]
fn within_one_percent(ours_pages: u64, kernel_pages: u64, what: &str) {
    let diff = ours_pages.abs_diff(kernel_pages) as f64;
    assert!(
        diff <= kernel_pages as f64 / 100.0,
        "{what}: ioscope {ours_pages} pages vs kernel {kernel_pages} pages (more than 1% apart)"
    );
}

#[test]
fn thresholds_match_the_kernel_with_current_settings() {
    let _group = common::live_group(module_path!());
    if !common::require_root("live_dirty_thresholds") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let trace = TraceInstance::new();
    // collect() reads /proc/vmstat, which makes the kernel compute (and trace) its limits.
    let sample = collect(&SystemRoot::live());
    let me = gettid();
    let (_, kernel_bg, kernel_thresh) = *trace
        .events()
        .iter()
        .rev()
        .find(|e| e.0 == me)
        .expect("no global_dirty_state event from our /proc/vmstat read");
    let m = Model::compute(None, &sample, Default::default()).memory;
    let page = sample.page_size;
    eprintln!(
        "kernel: thresh {kernel_thresh} bg {kernel_bg}; ioscope: thresh {} bg {} ({}/{})",
        m.dirty_threshold / page,
        m.dirty_background_threshold / page,
        m.dirty_source,
        m.dirty_background_source
    );
    within_one_percent(m.dirty_threshold / page, kernel_thresh, "dirty threshold");
    within_one_percent(m.dirty_background_threshold / page, kernel_bg, "background threshold");
    // /proc/vmstat printed the same computation.
    assert_eq!(sample.vmstat.kernel_dirty_threshold_pages, Some(kernel_thresh));
    assert_eq!(sample.vmstat.kernel_dirty_background_threshold_pages, Some(kernel_bg));
}

#[test]
fn thresholds_match_the_kernel_under_a_throttled_writer_with_byte_limits() {
    let _group = common::live_group(module_path!());
    if !common::require_root("live_dirty_thresholds") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let lo = common::LoopDevice::with_fs(256, "ext4");
    let guard = common::DirtySettingsGuard::save();
    // 16 MiB = 4096 pages; the background limit (32 MiB = 8192 pages) is not below it, so the
    // kernel uses 4096 / 2 = 2048. Freerun is (2048 + 4096) / 2 = 3072 pages = 12 MiB dirty.
    guard.set("dirty_bytes", 16 << 20);
    guard.set("dirty_background_bytes", 32 << 20);
    let trace = TraceInstance::new();

    // Write 64 MiB without syncing: past 12 MiB dirty the writer enters balance_dirty_pages().
    let writer = std::thread::spawn({
        let path = lo.mount_point().join("dirty");
        move || {
            let mut f = fs::File::create(path).unwrap();
            let chunk = vec![0x5a_u8; 1 << 20];
            for _ in 0..64 {
                f.write_all(&chunk).unwrap();
            }
            gettid()
        }
    });
    let writer_tid = writer.join().unwrap();
    let events = trace.events();
    let from_writer: Vec<_> = events.iter().filter(|e| e.0 == writer_tid).collect();
    assert!(!from_writer.is_empty(), "the writer never reached balance_dirty_pages: {events:?}");

    trace.clear();
    let sample = collect(&SystemRoot::live());
    let m = Model::compute(None, &sample, Default::default()).memory;
    drop(guard);
    let page = sample.page_size;
    assert_eq!(page, 4096, "the expected page counts below assume 4 KiB pages");
    for &&(_, bg, thresh) in &from_writer {
        assert_eq!((bg, thresh), (2048, 4096), "the kernel's limits for 16 MiB / 32 MiB");
    }
    // DIV_ROUND_UP(16 MiB, 4096) = 4096 pages; bg 8192 ≥ 4096 → 4096 / 2 = 2048.
    assert_eq!((m.dirty_threshold / page, m.dirty_source), (4096, "bytes"));
    assert_eq!((m.dirty_background_threshold / page, m.dirty_background_source), (2048, "bytes"));
}
