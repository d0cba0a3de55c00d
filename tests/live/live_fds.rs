//! File descriptors (issue 38 item 6): ioscope holds a bounded number of files whatever the number
//! of block devices, and when descriptors run out it says so instead of printing blank fields as
//! facts ("PSI not available (kernel without PSI)", dirty thresholds "above 0", "eBPF needs root").
use crate::common;

use std::io::Read;
use std::process::Command;
use std::time::{Duration, Instant};

use common::exporter::Exporter;
use common::LoopDevice;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_ioscope")
}

/// `ioscope ARGS` with its open-file limit, soft and hard, set to `limit` (so that raising the
/// soft limit to the hard one cannot help; dash sets both without -H or -S).
fn limited(limit: u64) -> Command {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &format!("ulimit -n {limit} && exec \"$0\" \"$@\""), bin()]);
    cmd
}

fn kernel_file(name: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/kernel/{name}")).unwrap().trim().to_string()
}

/// The checks on one `--once` text report: each figure is right or said to be unavailable for
/// want of descriptors, never a blank presented as a fact.
fn check_report(limit: u64, out: &str) {
    let header = out.lines().next().unwrap_or("");
    let host = format!("host {}  kernel {}", kernel_file("hostname"), kernel_file("osrelease"));
    assert!(
        header.contains(&host) || header.contains("host unavailable (too many open files)"),
        "limit {limit}: the header is neither the host nor says why not: {header}\n{out}"
    );
    let psi = out.lines().find(|l| l.starts_with("PSI:")).unwrap_or("");
    if std::path::Path::new("/proc/pressure/io").exists() {
        assert!(!psi.contains("kernel without PSI"), "limit {limit}: {psi}\n{out}");
        assert!(
            psi.contains("some ") || psi.contains("unavailable (too many open files)"),
            "limit {limit}: {psi}"
        );
    }
    let dirty = out.lines().find(|l| l.starts_with("Dirty:")).unwrap_or("");
    assert!(
        !dirty.contains("above 0 B") && !dirty.contains("above 0 ("),
        "limit {limit}: a zero threshold shown as a fact: {dirty}\n{out}"
    );
    let bpf = out.lines().find(|l| l.starts_with("eBPF:")).unwrap_or("");
    assert!(!bpf.contains("needs root"), "limit {limit}: root told it needs root: {bpf}\n{out}");
}

/// `ulimit -n` from 10 to 128 (soft and hard), as root with eBPF asked for: every report is
/// right or says what is unavailable and why; a run that cannot start at all says why and exits
/// non-zero.
#[test]
fn a_low_open_file_limit_gives_right_figures_or_says_too_many_open_files() {
    let _group = common::live_group(module_path!());
    if !common::require_root("a_low_open_file_limit_gives_right_figures_or_says_too_many_open_files") {
        return;
    }
    let mut said = Vec::new();
    for limit in [10, 16, 24, 32, 40, 64, 128] {
        let out = limited(limit).args(["--once", "-i", "0.3"]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            assert!(
                stderr.to_lowercase().contains("too many open files"),
                "limit {limit}: failed without saying why: {stderr}\n{stdout}"
            );
            said.push(format!("{limit}: error"));
            continue;
        }
        check_report(limit, &stdout);
        let unavailable = stdout.lines().find(|l| l.starts_with("Unavailable:")).unwrap_or("complete");
        said.push(format!("{limit}: {unavailable}"));
    }
    eprintln!("{}", said.join("\n"));
    // Short of descriptors for the eBPF programs (they fail to load, and say why), the procfs
    // figures are read whole; with the programs loaded (128 here) they may take what the files
    // needed, and then the report says which parts are unavailable (checked above).
    assert!(said.iter().any(|s| s.ends_with("complete")), "{said:?}");
}

/// 200 loop devices that did I/O and a limit of 1024 descriptors, soft and hard (the usual soft
/// limit; kept open, their sysfs files took ~9 each): `serve` answers with every device, holds a
/// bounded number of descriptors, and `--once` is complete.
#[test]
fn two_hundred_block_devices_hold_few_descriptors() {
    let _group = common::live_group(module_path!());
    if !common::require_root("two_hundred_block_devices_hold_few_descriptors") {
        return;
    }
    const DEVICES: usize = 200;
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let started = Instant::now();
    // Detached and deleted on drop, also when an assertion fails.
    let devices: Vec<LoopDevice> = (0..DEVICES).map(|_| LoopDevice::new_in(dir.path(), 1)).collect();
    for d in &devices {
        // One read each: a device that never did I/O has its settings skipped.
        let mut buf = vec![0u8; 4096];
        std::fs::File::open(&d.path).unwrap().read_exact(&mut buf).unwrap();
    }
    eprintln!("{DEVICES} loop devices set up in {:?}", started.elapsed());

    let ex = Exporter::start_with(limited(1024), &["--no-bpf", "-i", "0.5"]);
    // Several samples, with the settings re-read.
    std::thread::sleep(Duration::from_secs(3));
    let body = ex.scrape();
    for d in &devices {
        assert!(body.contains(&format!("device=\"{}\"", d.name)), "{} missing from the scrape", d.name);
    }
    let fds = std::fs::read_dir(format!("/proc/{}/fd", ex.child.id())).unwrap().count();
    eprintln!("ioscope serve holds {fds} descriptors with {DEVICES} more block devices");
    assert!(fds < 150, "{fds} descriptors open: not bounded (kept sysfs files per device?)");

    let out = limited(1024).args(["--once", "--no-bpf", "-i", "0.3"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    check_report(1024, &String::from_utf8_lossy(&out.stdout));
    let out = limited(1024).args(["--once", "--json", "--no-bpf", "-i", "0.3"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["unavailable"], serde_json::json!([]), "nothing unavailable");
    assert_eq!(doc["header"]["hostname"], kernel_file("hostname"));
    for d in &devices {
        let row = doc["devices"].as_array().unwrap().iter().find(|r| r["name"] == d.name.as_str());
        let row = row.unwrap_or_else(|| panic!("{} missing from --once --json", d.name));
        assert!(row["settings"]["size_sectors"] == 2048, "{}: {}", d.name, row["settings"]);
    }
}
