//! Quitting does not wait for the kernel to detach the eBPF programs (src/bpf/teardown.rs): the
//! process ends as soon as its output is written, and a child it leaves behind holds the
//! programs until the parent is gone, then detaches them and ends too.

use crate::common;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The live (not zombie) processes whose process group is `pgid`, by /proc.
fn group_members(pgid: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, rest)| rest) else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() != Some(&"Z") && fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid) {
            pids.push(pid);
        }
    }
    pids
}

#[test]
fn once_ends_when_its_output_is_written_and_the_programs_detach_after() {
    let _group = common::live_group(module_path!());
    if !common::require_root("once_ends_when_its_output_is_written") {
        return;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_ioscope"))
        .args(["--once", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = child.id();
    // The time the last of the output arrived (the end of file comes only at exit).
    let (mut json, mut last_data) = (Vec::new(), Instant::now());
    let mut stdout = child.stdout.take().unwrap();
    let mut chunk = [0u8; 65536];
    loop {
        match stdout.read(&mut chunk).unwrap() {
            0 => break,
            n => (json.extend_from_slice(&chunk[..n]), last_data = Instant::now()).0,
        }
    }
    let status = child.wait().unwrap();
    let exit_after_output = last_data.elapsed();
    assert!(status.success());
    let sample: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(sample["bpf"]["enabled"], true, "eBPF must be on for this test: {}", sample["bpf"]);
    // Detaching the full set one after another took 2.6 s here, from one thread each 1.3 s.
    assert!(
        exit_after_output < Duration::from_millis(700),
        "exit took {exit_after_output:?} after the output"
    );

    // The child left behind wakes when its parent is gone (its descriptors are gone from /proc
    // from then on, while the kernel detaches) and must not outlive the detaching.
    let start = Instant::now();
    while !group_members(pgid).is_empty() {
        assert!(start.elapsed() < Duration::from_secs(60), "the programs' keeper is still alive after 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}
