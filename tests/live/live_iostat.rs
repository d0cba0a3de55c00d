//! ioscope's device columns against sysstat's `iostat -x` on a loop device (root only).
//!
//! Timing, so that both tools count exactly the same requests:
//!
//! ```text
//! 0 ms      iostat starts and takes its first reading (within a few ms)
//! 300 ms    ioscope's first sample
//! 400 ms    the burst of O_DIRECT I/O starts (sync: each request completes before the next)
//! ≤1700 ms  the burst has ended (asserted)
//! ≥2000 ms  iostat's second reading (first reading + 2 s)
//! 2300 ms   ioscope's second sample (first + 2 s)
//! ```
//!
//! Both windows contain the whole burst and the loop device does nothing else, so the counter
//! deltas are identical; both intervals are 2 s (iostat measures its own with /proc/uptime, to
//! 10 ms), so rates agree within 2% and per-request averages to iostat's 2-decimal rounding.

use crate::common;

use std::fs::OpenOptions;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ioscope::bpf::BpfCollector;
use ioscope::collect::{monotonic_ns, Sampler, SystemRoot};
use ioscope::model::Model;

const INTERVAL: Duration = Duration::from_secs(2);

/// A 4096-aligned buffer, as O_DIRECT requires.
struct Aligned {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let layout = std::alloc::Layout::from_size_align(len, 4096).unwrap();
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Aligned { ptr, layout }
    }
    fn slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr points to layout.size() initialised bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

/// 150 writes of 64 KiB, then 400 reads of 4 KiB and 100 of 16 KiB, all O_DIRECT.
fn burst(dev: &std::path::Path) {
    let f = OpenOptions::new().read(true).write(true).custom_flags(libc::O_DIRECT).open(dev).unwrap();
    let mut big = Aligned::new(64 << 10);
    big.slice().fill(0xa5);
    for i in 0..150u64 {
        f.write_all_at(big.slice(), i * (64 << 10)).unwrap();
    }
    let mut small = Aligned::new(4 << 10);
    for i in 0..400u64 {
        // Every other 4 KiB block, so that nothing could be merged even in principle.
        f.read_exact_at(small.slice(), i * (8 << 10)).unwrap();
    }
    let mut mid = Aligned::new(16 << 10);
    for i in 0..100u64 {
        f.read_exact_at(mid.slice(), (32 << 20) + i * (64 << 10)).unwrap();
    }
}

fn field(disk: &serde_json::Value, key: &str) -> f64 {
    disk[key].as_f64().unwrap_or_else(|| panic!("iostat JSON has no {key}: {disk}"))
}

#[track_caller]
fn within_percent(ours: f64, theirs: f64, percent: f64, what: &str) {
    let slack = theirs.abs() * percent / 100.0 + 0.01; // + iostat's last printed digit
    assert!((ours - theirs).abs() <= slack, "{what}: ioscope {ours} vs iostat {theirs} (±{percent}%)");
}

#[track_caller]
fn to_rounding(ours: f64, theirs: f64, what: &str) {
    assert!((ours - theirs).abs() <= 0.0051, "{what}: ioscope {ours} vs iostat {theirs} (2 decimals)");
}

#[test]
fn device_columns_agree_with_iostat() {
    let _group = common::live_group(module_path!());
    if !common::require_root("live_iostat") {
        return;
    }
    if Command::new("iostat").arg("-V").output().is_err() {
        common::skip("live_iostat", "iostat (sysstat) is not installed");
        return;
    }
    let lo = common::LoopDevice::new(256);

    let start = Instant::now();
    let iostat = Command::new("iostat")
        .args(["-d", "-x", "-y", "-o", "JSON", &INTERVAL.as_secs().to_string(), "1", &lo.name])
        .env("LC_ALL", "C")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start iostat");

    let mut sampler = Sampler::new(SystemRoot::live(), BpfCollector::disabled("not needed for this test"));
    std::thread::sleep(Duration::from_millis(300));
    let first = sampler.sample();
    std::thread::sleep(Duration::from_millis(100));
    burst(&lo.path);
    let burst_end = start.elapsed();
    assert!(
        burst_end < Duration::from_millis(1700),
        "the burst took until {burst_end:?}: too slow to fit inside iostat's window; comparison unsound"
    );
    // Sleep until exactly 2 s after the first sample's clock stamp (collection itself takes a few ms).
    let second_due = first.mono_ns + INTERVAL.as_nanos() as u64;
    std::thread::sleep(Duration::from_nanos(second_due.saturating_sub(monotonic_ns())));
    let second = sampler.sample();

    let out = iostat.wait_with_output().expect("iostat output");
    assert!(out.status.success(), "iostat failed: {}", out.status);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("iostat JSON");
    let disks = &json["sysstat"]["hosts"][0]["statistics"][0]["disk"];
    let theirs = disks
        .as_array()
        .and_then(|d| d.iter().find(|d| d["disk_device"] == lo.name.as_str()))
        .unwrap_or_else(|| panic!("{} not in iostat output: {json}", lo.name));

    let model = Model::between(&first, &second);
    let ours = model.devices.iter().find(|d| d.name == lo.name).expect("loop device in the model");
    eprintln!("interval {:.4} s; ioscope: {ours:?}\niostat: {theirs}", model.interval_s);

    // The burst: 150 writes, 500 reads.
    within_percent(ours.r_s * model.interval_s, 500.0, 0.5, "reads in the interval");
    within_percent(ours.w_s * model.interval_s, 150.0, 0.5, "writes in the interval");

    within_percent(ours.r_s, field(theirs, "r/s"), 2.0, "r/s");
    within_percent(ours.w_s, field(theirs, "w/s"), 2.0, "w/s");
    within_percent(ours.rkb_s, field(theirs, "rkB/s"), 2.0, "rkB/s");
    within_percent(ours.wkb_s, field(theirs, "wkB/s"), 2.0, "wkB/s");
    within_percent(ours.aqu_sz, field(theirs, "aqu-sz"), 2.0, "aqu-sz");
    within_percent(ours.util, field(theirs, "util"), 2.0, "%util");
    to_rounding(ours.rareq_sz, field(theirs, "rareq-sz"), "rareq-sz");
    to_rounding(ours.wareq_sz, field(theirs, "wareq-sz"), "wareq-sz");
    to_rounding(ours.r_await, field(theirs, "r_await"), "r_await");
    to_rounding(ours.w_await, field(theirs, "w_await"), "w_await");
    to_rounding(ours.rrqm_s, field(theirs, "rrqm/s"), "rrqm/s");
    to_rounding(ours.wrqm_s, field(theirs, "wrqm/s"), "wrqm/s");
    // (4 KiB × 400 + 16 KiB × 100) / 500 reads = 6.4 KiB per read; 64 KiB per write.
    to_rounding(ours.rareq_sz, 6.4, "rareq-sz of the burst");
    to_rounding(ours.wareq_sz, 64.0, "wareq-sz of the burst");
}

/// A quiet machine's samples reuse /proc/diskstats as last read while the block programs count no
/// event (`Sampler::diskstats`); a request made between two samples must still be in the second.
/// One 4 KiB direct write at a time to a loop device nothing else writes, a sample before and
/// after each, 100 ms apart (`--interval 0.1`): the device's writes stand still across the quiet
/// samples and go up by exactly one across each write.
#[test]
fn a_request_between_two_quiet_samples_is_in_the_second() {
    let _group = common::live_group(module_path!());
    let test = "a_request_between_two_quiet_samples_is_in_the_second";
    if !common::require_root(test) {
        return;
    }
    let lo = common::LoopDevice::new(64);
    let bpf = BpfCollector::start();
    if !bpf.status().enabled {
        common::skip(test, "eBPF could not be loaded");
        return;
    }
    let mut sampler = Sampler::new(SystemRoot::live(), bpf);
    let f = OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(&lo.path).unwrap();
    let mut buf = Aligned::new(4 << 10);
    buf.slice().fill(0x5a);
    let writes = |s: &ioscope::sample::Sample| {
        let d = s.disks.iter().find(|d| d.name == lo.name);
        d.unwrap_or_else(|| panic!("{} not in the sample's diskstats", lo.name)).writes_completed
    };
    let mut last = writes(&sampler.sample());
    for i in 0..20u64 {
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(100));
            assert_eq!(writes(&sampler.sample()), last, "round {i}: no write was made");
        }
        f.write_all_at(buf.slice(), i * (8 << 10)).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let now = writes(&sampler.sample());
        assert_eq!(now, last + 1, "round {i}: one write was made between the samples");
        last = now;
    }
}
