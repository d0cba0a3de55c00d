//! Live test (root only) of `ioscope --batch --json` with the block probes: a short-lived `dd` and a
//! short-lived `cat`, each finished between two reports, are both caught in `io_processes[]` with
//! exactly the bytes they moved, and the documented `devices[].bpf` keys are there.

use crate::common;

use std::io::{BufRead, BufReader, Lines};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::{Mutex, MutexGuard};

use common::LoopDevice;
use serde_json::Value;

/// Held by each test for its whole run: every ioscope sees all the machine's I/O, so the other
/// tests' processes (fio, dd, cat) would show in this one's counts and tables.
static SERIAL: Mutex<()> = Mutex::new(());

/// Whether the test may run (root), and if so the lock it holds while it runs ([`SERIAL`]).
fn start_test() -> Option<MutexGuard<'static, ()>> {
    common::require_root("live_block_json")
        .then(|| SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
}

/// The ioscope under test, killed and reaped however the test ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `ioscope --batch --json` every 0.5 s for `reports` reports, and its output past the first
/// report; None (the test skipped) when it runs without eBPF.
fn start_ioscope(reports: u32) -> Option<(Running, Lines<BufReader<ChildStdout>>)> {
    start_ioscope_every("0.5", reports)
}

/// [`start_ioscope`] every `interval` seconds.
fn start_ioscope_every(interval: &str, reports: u32) -> Option<(Running, Lines<BufReader<ChildStdout>>)> {
    let mut ioscope = Running(
        Command::new(env!("CARGO_BIN_EXE_ioscope"))
            .args(["--batch", "--json", "--interval", interval, "-n", &reports.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(ioscope.0.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    if first["bpf"]["enabled"] != true {
        common::skip("live_block_json", &format!("eBPF unavailable: {}", first["bpf"]["reason"]));
        return None;
    }
    Some((ioscope, lines))
}

/// Runs a command to completion and returns its pid.
fn run_pid(cmd: &str, args: &[&str]) -> u32 {
    let mut child =
        Command::new(cmd).args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect(cmd);
    let pid = child.id();
    assert!(child.wait().unwrap().success(), "{cmd} {args:?}");
    pid
}

/// Bytes a (pid, disk) row accounts for in one report: rate × interval.
fn bytes(report: &Value, pid: u32, disk: &str, key: &str) -> f64 {
    let interval = report["interval_s"].as_f64().unwrap();
    report["io_processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["pid"].as_u64() == Some(u64::from(pid)) && p["device"] == disk)
        .map(|p| p[key].as_f64().unwrap() * interval)
        .sum()
}

fn exited_in(report: &Value, pid: u32) -> bool {
    report["io_processes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["pid"].as_u64() == Some(u64::from(pid)) && p["exited"] == true)
}

#[test]
fn batch_json_catches_short_lived_dd_and_cat() {
    let _group = common::live_group(module_path!());
    let Some(_serial) = start_test() else { return };
    let lo = LoopDevice::with_fs(64, "ext4");
    let file = lo.mount_point().join("data");
    let path = file.to_str().unwrap().to_string();
    // 4 MiB written around the page cache, so that `cat` has to read it from the disk.
    common::run("dd", &["if=/dev/zero", &format!("of={path}"), "oflag=direct", "bs=1M", "count=4"]);
    common::run("sync", &[]);

    let Some((ioscope, mut lines)) = start_ioscope(60) else { return };

    let dd = run_pid("dd", &["if=/dev/zero", &format!("of={path}.2"), "oflag=direct", "bs=64k", "count=200"]);
    let cat = run_pid("cat", &[&path]);

    // Read reports until both have been reported as exited (a process that exited is reported
    // once, then dropped). Bounded, so a failure cannot hang the test.
    let mut reports = Vec::new();
    for line in lines.by_ref().take(50) {
        let report: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let done = exited_in(&report, dd) && exited_in(&report, cat)
            || reports.iter().any(|r| exited_in(r, dd)) && exited_in(&report, cat)
            || reports.iter().any(|r| exited_in(r, cat)) && exited_in(&report, dd);
        reports.push(report);
        if done {
            break;
        }
    }
    drop(ioscope);

    let total = |pid: u32, key: &str| reports.iter().map(|r| bytes(r, pid, &lo.name, key)).sum::<f64>();
    // Runs of block_io_start / block_rq_complete the kernel skipped (another BPF program was
    // running on the CPU, e.g. other eBPF tools on a shared machine): each may cost one request's
    // credit.
    let skipped: u64 = reports
        .iter()
        .flat_map(|r| r["bpf"]["block_health"]["programs"].as_array().unwrap().iter())
        .filter(|p| p["program"] == "block_io_start" || p["program"] == "block_rq_complete")
        .map(|p| p["missed"].as_u64().unwrap())
        .sum();
    let slack = skipped as f64 * 128.0 * 1024.0 + 1.0;
    let dd_written = total(dd, "write_bytes_s");
    assert!(
        dd_written <= 200.0 * 65536.0 + 1.0 && dd_written >= 200.0 * 65536.0 - slack,
        "dd wrote {dd_written} bytes in the reports ({skipped} runs skipped)"
    );
    let cat_read = total(cat, "read_bytes_s");
    assert!(
        (4.0 * 1048576.0 - slack..4.5 * 1048576.0).contains(&cat_read),
        "cat read {cat_read} bytes in the reports ({skipped} runs skipped)"
    );
    assert!(reports.iter().any(|r| exited_in(r, dd)), "dd never reported as exited");
    assert!(reports.iter().any(|r| exited_in(r, cat)), "cat never reported as exited");

    // The documented keys, in a report where the loop device was busy.
    let busy = reports
        .iter()
        .find(|r| bytes(r, dd, &lo.name, "write_bytes_s") > 0.0)
        .expect("a report with dd's writes");
    let dev = busy["devices"].as_array().unwrap().iter().find(|d| d["name"] == lo.name.as_str()).unwrap();
    let bpf = &dev["bpf"];
    for key in [
        "read_iops",
        "write_iops",
        "read_bytes_s",
        "write_bytes_s",
        "lat_p50_ms",
        "lat_p99_ms",
        "queue_ms_avg",
    ] {
        assert!(bpf[key].is_number(), "devices[].bpf.{key} is {}", bpf[key]);
    }
    let hist = bpf["size_hist"].as_array().unwrap();
    let b64k = hist.iter().find(|b| b["min_bytes"] == 65536).expect("a 64 KiB bucket");
    assert!(b64k["write"].as_u64().unwrap() > 0);
    let row = busy["io_processes"].as_array().unwrap().iter().find(|p| p["pid"] == dd).unwrap();
    for key in ["read_bytes_s", "write_bytes_s", "read_iops", "write_iops"] {
        assert!(row[key].is_number(), "io_processes[].{key}");
    }
    assert_eq!(row["comm"], "dd");
}

/// Entries of the kernel's process table (`block_health.maps`, BLOCK_PROC) in a report.
fn process_table_entries(report: &Value) -> u64 {
    let maps = report["bpf"]["block_health"]["maps"].as_array().unwrap();
    maps.iter().find(|m| m["map"] == "BLOCK_PROC").unwrap()["entries"].as_u64().unwrap()
}

#[test]
fn exited_processes_leave_the_kernel_process_table() {
    let _group = common::live_group(module_path!());
    let Some(_serial) = start_test() else { return };
    let lo = LoopDevice::with_fs(64, "ext4");
    let path = lo.mount_point().join("data").to_str().unwrap().to_string();
    let Some((ioscope, mut lines)) = start_ioscope(40) else { return };
    let mut next = || -> Value { serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap() };
    let before = process_table_entries(&next());
    // 20 processes, each with its own (process, device) entry, all gone when they finish.
    const DDS: u64 = 20;
    for _ in 0..DDS {
        run_pid("dd", &["if=/dev/zero", &format!("of={path}"), "oflag=direct", "bs=4k", "count=4"]);
    }
    // Reported as exited at the next read, then freed; a few kernel threads (journal, writeback)
    // may have taken entries of their own meanwhile.
    let after: Vec<u64> = (0..3).map(|_| process_table_entries(&next())).collect();
    drop(ioscope);
    let last = after[2];
    assert!(last < before + DDS / 2, "process table: {before} entries before 20 dd runs, then {after:?}");
}

/// The block layer's latencies against fio's own: 4 KiB random direct reads at queue depth 32 on a
/// file on a loop device. What ioscope credits fio with (block_io_start → completion, per
/// request) cannot exceed what fio measured from submission to completion, and the queue time
/// (start → issue) cannot exceed that either. (The request's own `start_time_ns`, read at
/// block_io_start, still holds the time of the request struct's previous use, since 6.18 stamps it
/// just after that event: read there, it made fio's latency 2.8 × fio's own figure on this VM's
/// disk.)
#[test]
fn latencies_agree_with_fio() {
    let _group = common::live_group(module_path!());
    let Some(_serial) = start_test() else { return };
    if Command::new("fio").arg("--version").output().is_err() {
        common::skip("live_block_json", "fio is not installed");
        return;
    }
    let lo = LoopDevice::with_fs(128, "ext4");
    let path = lo.mount_point().join("data");
    common::write_patterned_file(&path, 64);
    let Some((ioscope, lines)) = start_ioscope(40) else { return };
    let reader = std::thread::spawn(move || {
        lines.take(8).map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap()).collect::<Vec<_>>()
    });
    let out = common::run(
        "fio",
        &[
            "--name=lat",
            &format!("--filename={}", path.display()),
            "--rw=randread",
            "--bs=4k",
            "--direct=1",
            "--ioengine=libaio",
            "--iodepth=32",
            "--readonly",
            "--time_based",
            "--runtime=3",
            "--output-format=json",
        ],
    );
    let reports = reader.join().unwrap();
    drop(ioscope);
    let fio: Value = serde_json::from_str(&out[out.find('{').unwrap()..]).unwrap();
    let fio_ms = fio["jobs"][0]["read"]["clat_ns"]["mean"].as_f64().unwrap() / 1e6;

    // fio's rows on the loop device, in the reports taken while it ran.
    let rows: Vec<&Value> = reports
        .iter()
        .flat_map(|r| r["io_processes"].as_array().unwrap())
        .filter(|p| p["comm"] == "fio" && p["device"] == lo.name.as_str())
        .filter(|p| p["read_iops"].as_f64().unwrap() > 100.0)
        .collect();
    assert!(!rows.is_empty(), "no fio rows on {}", lo.name);
    // Weighted by requests: the mean over the run, as fio's is.
    let weight: f64 = rows.iter().map(|p| p["read_iops"].as_f64().unwrap()).sum();
    let ours = rows
        .iter()
        .map(|p| p["lat_avg_ms"].as_f64().unwrap() * p["read_iops"].as_f64().unwrap())
        .sum::<f64>()
        / weight;
    assert!(
        ours > 0.0 && ours <= fio_ms * 1.15,
        "fio's mean latency: {ours} ms by ioscope, {fio_ms} ms by fio"
    );
    for r in &reports {
        let Some(dev) = r["devices"].as_array().unwrap().iter().find(|d| d["name"] == lo.name.as_str())
        else {
            continue;
        };
        if dev["bpf"]["read_iops"].as_f64().unwrap_or(0.0) > 100.0 {
            let queue = dev["bpf"]["block"]["read"]["queue_ms_avg"].as_f64().unwrap();
            assert!(queue <= fio_ms, "queue time {queue} ms, above fio's whole latency {fio_ms} ms");
        }
    }
}

/// A device with no request before an interval, then 400 × 64 KiB direct writes in it: the
/// documented `devices[].bpf` rates count them in that same interval (they read 0.0 when a device
/// first seen was taken for "no rate yet", though the probes were on for the whole interval).
#[test]
fn a_device_first_seen_in_an_interval_has_its_rates_in_it() {
    let _group = common::live_group(module_path!());
    let Some(_serial) = start_test() else { return };
    let Some((ioscope, mut lines)) = start_ioscope_every("3", 20) else { return };
    // Just after a report (a sample was taken), a new device (no request before: even udev's
    // probing of it is in the interval) and its writes: they fall in the next interval unless
    // they take longer than it (checked below).
    lines.next().unwrap().unwrap();
    let started = std::time::Instant::now();
    let lo = LoopDevice::new(64);
    common::run(
        "dd",
        &["if=/dev/zero", &format!("of={}", lo.path.display()), "oflag=direct", "bs=64k", "count=400"],
    );
    let dd_secs = started.elapsed().as_secs_f64();
    let mut first = None;
    let mut total_writes = 0.0;
    for line in lines.by_ref().take(3) {
        let report: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let interval = report["interval_s"].as_f64().unwrap();
        let dev =
            report["devices"].as_array().unwrap().iter().find(|d| d["name"] == lo.name.as_str()).cloned();
        let Some(bpf) = dev.map(|d| d["bpf"].clone()).filter(|b| !b.is_null()) else { continue };
        let writes = bpf["write_iops"].as_f64().unwrap() * interval;
        total_writes += writes;
        if first.is_none() && bpf["block"]["write"]["iops"].as_f64().unwrap() > 0.0 {
            first = Some((report.clone(), interval));
        }
    }
    drop(ioscope);
    let (report, interval) = first.expect("the loop device's writes were never reported");
    let dev = report["devices"].as_array().unwrap().iter().find(|d| d["name"] == lo.name.as_str()).unwrap();
    let bpf = &dev["bpf"];
    let writes = bpf["write_iops"].as_f64().unwrap() * interval;
    let bytes = bpf["write_bytes_s"].as_f64().unwrap() * interval;
    let block_writes = bpf["block"]["write"]["iops"].as_f64().unwrap() * interval;
    // The interval the device first appears in: the two counts of its writes agree.
    assert!((writes - block_writes).abs() <= 0.05 * block_writes, "{writes} vs block {block_writes}: {bpf}");
    assert!((bytes - writes * 65536.0).abs() <= 0.05 * bytes.max(1.0), "{bytes} B for {writes} writes");
    assert!((total_writes - 400.0).abs() <= 20.0, "{total_writes} writes reported in all");
    if dd_secs < 2.0 {
        // dd finished well within the interval: all 400 are in it.
        assert!((writes - 400.0).abs() <= 20.0, "{writes} writes in the first interval (dd {dd_secs:.2} s)");
    } else {
        eprintln!("dd took {dd_secs:.2} s: its writes may straddle two intervals");
    }
}

/// `mkfs.ext4` on a fresh 1 GiB loop device zeroes its journal with write-zeroes (diskstats:
/// writes; rwbs: `N`, the probes' "other") and discards the whole device (diskstats: discards;
/// rwbs: `D`). The cross-check counts both on both sides: no interval is flagged, and over the
/// intervals the two totals agree (a model with a real loss is flagged: the unit tests of
/// src/model/block.rs).
#[test]
fn mkfs_ext4_raises_no_crosscheck_alarm() {
    let _group = common::live_group(module_path!());
    let Some(_serial) = start_test() else { return };
    let Some((ioscope, mut lines)) = start_ioscope_every("1", 30) else { return };
    lines.next().unwrap().unwrap();
    let lo = LoopDevice::new(1024);
    common::run("mkfs.ext4", &["-q", "-F", lo.path.to_str().unwrap()]);
    common::run("sync", &[]);
    let (mut bpf_total, mut diskstats_total, mut judged) = (0u64, 0u64, 0);
    for line in lines.by_ref().take(4) {
        let report: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let dev =
            report["devices"].as_array().unwrap().iter().find(|d| d["name"] == lo.name.as_str()).cloned();
        let Some(x) = dev.map(|d| d["bpf"]["crosscheck"].clone()).filter(|x| !x.is_null()) else { continue };
        assert_eq!(x["mismatch"], false, "a false alarm on {}: {x}", lo.name);
        bpf_total += x["bpf_bytes"].as_u64().unwrap();
        diskstats_total += x["diskstats_bytes"].as_u64().unwrap();
        judged += u32::from(x["diskstats_bytes"].as_u64().unwrap() >= 1 << 20);
    }
    drop(ioscope);
    // The discard alone is 1 GiB, the journal's zeroes 32 MiB: the check was judged.
    assert!(judged > 0 && diskstats_total >= 1 << 30, "{diskstats_total} B in diskstats");
    let apart = bpf_total.abs_diff(diskstats_total) as f64 / diskstats_total as f64;
    assert!(apart < 0.01, "eBPF {bpf_total} B vs diskstats {diskstats_total} B");
}

/// 300 × 4 KiB `O_DSYNC` writes on ext4 with a journal: each commit is a preflush + FUA write,
/// which on a loop device (no FUA) the kernel's flush machinery completes twice. The eBPF write
/// IOPS count each write once, as /proc/diskstats (iostat's w/s) does: within 2 % over the run.
#[test]
fn journal_commits_do_not_inflate_the_write_iops() {
    let _group = common::live_group(module_path!());
    let Some(_serial) = start_test() else { return };
    let lo = LoopDevice::with_fs(256, "ext4");
    common::run("sync", &[]);
    let Some((ioscope, mut lines)) = start_ioscope_every("1", 40) else { return };
    lines.next().unwrap().unwrap();
    let started = std::time::Instant::now();
    let file = lo.mount_point().join("f");
    common::run(
        "dd",
        &["if=/dev/zero", &format!("of={}", file.display()), "bs=4k", "count=300", "oflag=dsync"],
    );
    let reports = started.elapsed().as_secs() as usize + 3;
    let (mut bpf, mut diskstats) = (0.0, 0.0);
    for line in lines.by_ref().take(reports) {
        let report: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let interval = report["interval_s"].as_f64().unwrap();
        let dev =
            report["devices"].as_array().unwrap().iter().find(|d| d["name"] == lo.name.as_str()).cloned();
        let Some(dev) = dev else { continue };
        diskstats += dev["w_s"].as_f64().unwrap() * interval;
        if let Some(w) = dev["bpf"]["block"]["write"]["iops"].as_f64() {
            bpf += w * interval;
        }
    }
    drop(ioscope);
    eprintln!("writes: eBPF {bpf:.0}, diskstats {diskstats:.0}");
    assert!(diskstats >= 600.0, "{diskstats} writes in diskstats: the journal did not commit each write");
    assert!((bpf - diskstats).abs() <= 0.02 * diskstats, "eBPF {bpf:.0} writes vs diskstats {diskstats:.0}");
}

/// A loop device's worker reads the loop device's backing file from the disk below: its rows are
/// kind `loop` with /proc's comm (`kworker/u8:5-loop3`, shown as `[loop3]`), never `writeback`.
#[test]
fn a_loop_devices_worker_is_kind_loop_not_writeback() {
    let _group = common::live_group(module_path!());
    let Some(_serial) = start_test() else { return };
    let lo = LoopDevice::new(32);
    let dev = lo.path.to_str().unwrap().to_string();
    common::run("dd", &["if=/dev/urandom", &format!("of={dev}"), "bs=1M", "count=32", "oflag=direct"]);
    let backing = std::fs::read_to_string(format!("/sys/block/{}/loop/backing_file", lo.name)).unwrap();
    common::drop_file_cache(std::path::Path::new(backing.trim()));

    let Some((_ioscope, mut lines)) = start_ioscope(40) else { return };
    // Reads through the loop device, its backing file's cache dropped before each pass (so its
    // worker reads the disk), for as long as the reports below take: a kworker's workqueue is
    // read from /proc/PID/comm at the sample, and names the work it ran last; a single 32 MiB
    // pass ended long before, and under CI's load the worker had run other work by then.
    let script = format!(
        "end=$((SECONDS+6)); while [ $SECONDS -lt $end ]; do \
         dd if={} iflag=nocache count=0 status=none; \
         dd if={dev} of=/dev/null bs=1M iflag=direct status=none; done",
        backing.trim()
    );
    let mut reader = Command::new("bash").args(["-c", &script]).spawn().unwrap();
    let workqueue =
        |comm: &str| comm.ends_with(&format!("-{}", lo.name)) || comm.ends_with(&format!("+{}", lo.name));
    let mut loop_rows = Vec::new();
    for line in lines.by_ref().take(8) {
        let report: Value = serde_json::from_str(&line.unwrap()).unwrap();
        for p in report["io_processes"].as_array().unwrap() {
            let comm = p["comm"].as_str().unwrap();
            if workqueue(comm) {
                assert_eq!(p["kind"], "loop", "{p}");
                loop_rows.push(p.clone());
            }
            assert!(p["kind"] != "loop" || comm.contains("-loop") || comm.contains("+loop"), "{p}");
        }
    }
    // Ends by itself (6 s): a dd killed midway would keep the loop device busy at its detach.
    let _ = reader.wait();
    let read: f64 = loop_rows.iter().map(|p| p["read_bytes_s"].as_f64().unwrap()).sum();
    assert!(read > 0.0, "no row of {}'s worker reading its backing file: {loop_rows:?}", lo.name);
}
