//! Live test (root only): a child's I/O is the child's. The kernel adds a reaped child's
//! counters to its parent's /proc/PID/io; `ioscope --batch --json` must show the parent (`bash`)
//! at ≈ 0 and the children's reads (`cat`, live rows and the exited rows under bash) at what the
//! loop device read (/proc/diskstats, the oracle), with eBPF and without (`--no-bpf`).

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::LoopDevice;
use serde_json::Value;

const MIB: u64 = 1 << 20;

/// Runs `script` (given the files as $1, $2, …) under `bash -c` while `ioscope --batch --json`
/// reports every second; returns bash's pid, the reports and the bytes the device read meanwhile.
fn run(lo: &LoopDevice, files: &[String], script: &str, bpf: bool) -> (u32, Vec<Value>, u64) {
    let mut args = vec!["--batch", "--json", "--interval", "1", "-n", "14"];
    if !bpf {
        args.push("--no-bpf");
    }
    let mut ioscope = Command::new(env!("CARGO_BIN_EXE_ioscope"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(ioscope.stdout.take().unwrap()).lines();
    // The first report: ioscope has its baseline.
    let _: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let before = lo.diskstats()[2] * 512;
    let mut bash = Command::new("bash").arg("-c").arg(script).arg("bash").args(files).spawn().unwrap();
    let pid = bash.id();
    let started = Instant::now();
    assert!(bash.wait().unwrap().success());
    let read = lo.diskstats()[2] * 512 - before;
    assert!(started.elapsed() < Duration::from_secs(11), "the script ran past the reports");
    let reports: Vec<Value> =
        lines.map_while(Result::ok).map(|l| serde_json::from_str(&l).unwrap()).collect();
    let _ = ioscope.kill();
    let _ = ioscope.wait();
    (pid, reports, read)
}

/// Bytes read (rate × interval) over all reports by the rows `keep` selects.
fn read_bytes(reports: &[Value], keep: impl Fn(&Value) -> bool) -> u64 {
    let mut sum = 0.0;
    for r in reports {
        let interval = r["interval_s"].as_f64().unwrap();
        for p in r["processes"].as_array().unwrap().iter().filter(|p| keep(p)) {
            sum += p["read_bytes_s"].as_f64().unwrap() * interval;
        }
    }
    sum.round() as u64
}

fn check(bpf: bool, readers: usize, script: &str) {
    let lo = LoopDevice::with_fs(64 + 80 * readers as u64, "ext4");
    let files: Vec<String> = (0..readers)
        .map(|i| {
            let f = lo.mount_point().join(format!("data{i}"));
            common::write_patterned_file(&f, 64);
            common::drop_file_cache(&f);
            f.to_str().unwrap().to_string()
        })
        .collect();
    let (bash, reports, device) = run(&lo, &files, script, bpf);
    let pid = u64::from(bash);
    let is_bash = |p: &Value| p["pid"].as_u64() == Some(pid) && p["exited"] != true;
    // The children's rows: live `cat`s, the exited rows under bash, and, should bash leave in the
    // same interval as they did (a sample late on a loaded host), the exited row under its parent.
    let of_bash = |p: &Value| {
        let exited_pids = p["exited_pids"].as_array().cloned().unwrap_or_default();
        (p["ppid"].as_u64() == Some(pid) && (p["exited"] == true || p["comm"] == "cat"))
            || exited_pids.iter().any(|x| x.as_u64() == Some(pid))
    };
    let parent = read_bytes(&reports, is_bash);
    let children = read_bytes(&reports, of_bash);
    let exited = reports
        .iter()
        .flat_map(|r| r["processes"].as_array().unwrap())
        .filter(|p| p["exited"] == true && of_bash(p))
        .count();
    let what = format!("bpf {bpf}, {readers} readers: bash {parent}, children {children}, device {device}");
    eprintln!("{what}");
    if children.abs_diff(device) > device / 10 {
        for r in &reports {
            eprintln!("-- {}", r["interval_s"]);
            for p in r["processes"].as_array().unwrap().iter().filter(|p| p["read_bytes_s"] != 0.0) {
                eprintln!("{p}");
            }
        }
    }
    assert!(device >= readers as u64 * 64 * MIB, "{what}: the files were read from the device");
    assert!(parent < MIB, "{what}: bash shows its children's reads");
    common::within(&format!("{what}: the children"), children, device);
    assert!(exited >= 1, "{what}: no exited row for bash's children");
}

const ONE: &str = "sleep 1.5; cat \"$1\" >/dev/null; sleep 4";
const MANY: &str = "sleep 1.5; for f in \"$@\"; do cat \"$f\" >/dev/null & done; wait; sleep 4";

#[test]
fn a_reaped_cat_is_not_its_parents_rate() {
    let _group = common::live_group(module_path!());
    if !common::require_root("live_exited") {
        return;
    }
    check(true, 1, ONE);
    check(false, 1, ONE);
}

#[test]
fn several_short_readers_are_not_their_parents_rate() {
    let _group = common::live_group(module_path!());
    if !common::require_root("live_exited") {
        return;
    }
    check(true, 3, MANY);
    check(false, 3, MANY);
}
