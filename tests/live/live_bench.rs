//! `ioscope bench` end to end: the safety rules, cleanup on every exit path (Ctrl-C included),
//! results that reflect what the device really did, --json and --compare. The loop-device tests
//! need root and skip otherwise unless IOSCOPE_REQUIRE_BPF=1.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ioscope")).arg("bench").args(args).output().expect("run ioscope bench")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".ioscope-bench"))
        .collect()
}

#[test]
fn bad_input_is_a_usage_error_with_a_message() {
    let _group = common::live_group(module_path!());
    for (args, want) in [
        (&[][..], "nothing to benchmark"),
        (&["/nonexistent/dir"], "cannot use /nonexistent/dir"),
        (&["/tmp", "--bs", "0"], "--bs"),
        (&["/tmp", "--rw", "reed"], "not a pattern"),
        (&["/tmp", "--qd", "0"], "--qd"),
        (&["/tmp", "--modes", "odirect"], "not a mode"),
        (&["--device", "/dev/null"], "not a block device"),
        (&["/tmp", "--destructive"], "--destructive only applies to --device"),
        (&["/tmp", "--engine", "libaio"], "not an engine"),
    ] {
        let o = bench(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "one line: {}", stderr(&o));
    }
}

#[test]
fn an_existing_file_is_never_written_without_write() {
    let _group = common::live_group(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("precious.db");
    std::fs::write(&file, vec![7u8; 1 << 20]).unwrap();
    let o = bench(&[file.to_str().unwrap(), "--rw", "write", "--runtime", "0.2"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("refusing to write to") && stderr(&o).contains("--write"), "{}", stderr(&o));
    // Without --rw, the read jobs run and the writes are skipped with a note.
    let o =
        bench(&[file.to_str().unwrap(), "--bs", "64k", "--modes", "buffered", "--runtime", "0.2", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rws: Vec<&str> = v["jobs"].as_array().unwrap().iter().map(|j| j["rw"].as_str().unwrap()).collect();
    assert_eq!(rws, ["read", "randread"]);
    assert!(v["notes"].to_string().contains("write jobs skipped"), "{}", v["notes"]);
    assert_eq!(std::fs::read(&file).unwrap(), vec![7u8; 1 << 20], "the file was modified");
}

#[test]
fn tmpfs_says_its_direct_results_are_memory_copies() {
    let _group = common::live_group(module_path!());
    let Ok(dir) = tempfile::tempdir_in("/dev/shm") else {
        common::skip("tmpfs_says_its_direct_results_are_memory_copies", "no /dev/shm");
        return;
    };
    let o = bench(&[
        dir.path().to_str().unwrap(),
        "--size",
        "8m",
        "--rw",
        "read",
        "--bs",
        "64k",
        "--runtime",
        "0.2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let notes = v["notes"].to_string();
    // Kernels before 6.6 refuse O_DIRECT on tmpfs (the direct jobs are skipped, saying why);
    // newer ones accept it without a disk behind it.
    assert!(notes.contains("O_DIRECT"), "{notes}");
    let buffered = v["jobs"].as_array().unwrap().iter().find(|j| j["mode"] == "buffered").unwrap();
    assert!(buffered["skipped"].is_null() && buffered["iops"].as_f64().unwrap() > 0.0, "{buffered}");
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn device_writes_need_destructive_and_free_space_is_checked() {
    let _group = common::live_group(module_path!());
    if !common::require_root("device_writes_need_destructive_and_free_space_is_checked") {
        return;
    }
    let lo = common::LoopDevice::new(64);
    let dev = lo.path.to_str().unwrap();
    std::fs::write(dev, vec![0xA5u8; 1 << 20]).unwrap();
    let o = bench(&["--device", dev, "--rw", "write", "--runtime", "0.2"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--destructive"), "{}", stderr(&o));
    // Reading needs nothing more, and leaves the device as it was.
    let o = bench(&["--device", dev, "--bs", "64k", "--runtime", "0.2", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["settings"]["device"], lo.name.as_str());
    assert_eq!(v["jobs"].as_array().unwrap().len(), 4, "read and randread, direct and buffered");
    let head = std::fs::read(dev).unwrap();
    assert!(head[..1 << 20].iter().all(|&b| b == 0xA5), "a read-only run changed the device");

    let small = common::LoopDevice::with_fs(48, "ext4");
    let o = bench(&[small.mount_point().to_str().unwrap(), "--size", "1g"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("not enough free space") && stderr(&o).contains("is free"), "{}", stderr(&o));
    assert!(leftovers(small.mount_point()).is_empty());
}

/// A real run on ext4 over a loop device: the device figures are the loop device's, direct reads
/// move exactly the bytes asked for, buffered sequential reads come in readahead-sized requests,
/// the test file is gone afterwards, and --compare reads two such reports.
#[test]
fn a_run_reports_what_the_device_did_and_cleans_up() {
    let _group = common::live_group(module_path!());
    if !common::require_root("a_run_reports_what_the_device_did_and_cleans_up") {
        return;
    }
    let lo = common::LoopDevice::with_fs(200, "ext4");
    let mnt = lo.mount_point();
    let out = mnt.join("run.json");
    let o = bench(&[
        mnt.to_str().unwrap(),
        "--size",
        "64m",
        "--rw",
        "read,write",
        "--bs",
        "4k,1m",
        // A cap, not the expected time: one pass takes ~1 s idle, but 4 KiB direct reads at QD1
        // with other work on the machine (p99 16 ms at load 11) did not finish one in 5 s.
        "--runtime",
        "60",
        "--json",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["settings"]["device"], lo.name.as_str());
    assert_eq!(v["settings"]["filesystem"], "ext4");
    assert!(v["machine"]["kernel"].as_str().unwrap().len() > 1);
    assert!(
        v["notes"].as_array().unwrap().iter().all(|n| !n.as_str().unwrap().contains("still cached")),
        "{}",
        v["notes"]
    );
    let job = |rw: &str, bs: u64, mode: &str| -> Value {
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["rw"] == rw && j["bs"] == bs && j["mode"] == mode)
            .cloned()
            .unwrap()
    };
    // The engine: io_uring where this kernel allows it, else the thread pool (and a note saying why).
    let engine = v["settings"]["engine"].as_str().unwrap().to_string();
    assert!(engine == "io_uring" || v["notes"].to_string().contains("io_uring unavailable"), "{v}");
    for key in ["machine", "settings"] {
        assert!(v[key].is_object(), "{key}");
    }
    for j in v["jobs"].as_array().unwrap() {
        assert!(j["skipped"].is_null(), "{j}");
        assert_eq!(j["engine"], engine.as_str(), "{j}");
        for key in [
            "rw",
            "bs",
            "mode",
            "qd",
            "mb_s",
            "iops",
            "lat_p50_us",
            "lat_p99_us",
            "lat_max_us",
            "disk_bytes",
            "fsync_s",
        ] {
            assert!(!j[key].is_null(), "jobs[].{key} missing: {j}");
        }
        assert_eq!(j["bytes"], 64u64 << 20, "one pass over the file: {j}");
        for key in ["mb_s", "iops", "lat_p50_us", "lat_p99_us", "lat_max_us"] {
            assert!(j[key].as_f64().unwrap() > 0.0, "{key}: {j}");
        }
        assert!(!j["verdict"].as_str().unwrap().is_empty());
    }
    // Direct 1 MiB reads: the device read what was asked, no more (±2 %), with the cache cold.
    let d = job("read", 1 << 20, "direct");
    let ratio = d["disk_read_bytes"].as_f64().unwrap() / (64u64 << 20) as f64;
    assert!((0.98..1.02).contains(&ratio), "direct read moved {ratio}× the bytes: {d}");
    // Buffered 4 KiB sequential reads: readahead turns them into requests many times larger.
    let b = job("read", 4096, "buffered");
    assert!(b["dev_req_kb"].as_f64().unwrap() >= 16.0, "no readahead? {b}");
    assert!(b["verdict"].as_str().unwrap().starts_with("readahead-fed"), "{b}");
    // Buffered writes with fsync at end: everything reached the disk, and the fsync was timed.
    let w = job("write", 1 << 20, "buffered");
    assert!(w["disk_write_bytes"].as_u64().unwrap() >= 64 << 20, "{w}");
    assert!(w["fsync_s"].as_f64().unwrap() > 0.0, "{w}");
    assert!(w["pages_dirtied"].as_u64().unwrap() >= 16384, "{w}");
    assert!(leftovers(mnt).is_empty(), "test file left behind");
    // --compare: the same report twice is 0 % everywhere.
    let o = bench(&["--compare", out.to_str().unwrap(), out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("settings: identical") && text.contains("+0.0%"), "{text}");
    let o = bench(&["--compare", out.to_str().unwrap(), "/nonexistent.json"]);
    assert!(!o.status.success() && stderr(&o).contains("cannot read /nonexistent.json"), "{}", stderr(&o));
}

/// Ctrl-C in the middle of a job: exit 130, the finished jobs printed, the test file removed.
#[test]
fn ctrl_c_stops_cleanly_and_keeps_the_results() {
    let _group = common::live_group(module_path!());
    if !common::require_root("ctrl_c_stops_cleanly_and_keeps_the_results") {
        return;
    }
    let lo = common::LoopDevice::with_fs(100, "ext4");
    let mnt = lo.mount_point();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ioscope"))
        .args([
            "bench",
            mnt.to_str().unwrap(),
            "--size",
            "16m",
            "--rw",
            "randread",
            "--bs",
            "4k",
            "--qd",
            "1,2",
        ])
        .args(["--modes", "buffered", "--runtime", "60", "--time-based", "--cache", "warm"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first (60 s) job to start; it is the one interrupted. Progress lines go to
    // stderr: "[1/2] randread 4K qd1 …".
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let seen = wait_for_progress(&mut err, "[1/2]");
    // The test file exists while the job runs. Let the job do some requests (it runs for 60 s):
    // a job stopped before its first one is dropped from the results.
    assert_eq!(leftovers(mnt).len(), 1);
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: sending SIGINT to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut err, &mut rest);
    assert_eq!(out.status.code(), Some(130), "{seen}{rest}");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("randread 4K qd1") && table.contains("stopped: 1 of 2 jobs ran"), "{table}");
    assert!(table.contains("stopped after"), "the cut job says so: {table}");
    assert!(!table.contains("randread 4K qd2"), "{table}");
    assert!(leftovers(mnt).is_empty(), "test file left behind after Ctrl-C");
}

/// A filesystem that refuses O_DIRECT (ramfs: no direct I/O at all): one clear reason on each
/// direct job, and the buffered jobs still run.
#[test]
fn a_filesystem_refusing_o_direct_still_runs_the_buffered_jobs() {
    let _group = common::live_group(module_path!());
    if !common::require_root("a_filesystem_refusing_o_direct_still_runs_the_buffered_jobs") {
        return;
    }
    struct Ramfs(tempfile::TempDir);
    impl Drop for Ramfs {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0.path()).status();
        }
    }
    let ramfs = Ramfs(tempfile::tempdir().unwrap());
    common::run("mount", &["-t", "ramfs", "none", ramfs.0.path().to_str().unwrap()]);
    let file = ramfs.0.path().join("data");
    std::fs::write(&file, vec![1u8; 4 << 20]).unwrap();
    let o = bench(&[file.to_str().unwrap(), "--rw", "read", "--bs", "64k", "--runtime", "0.2", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let jobs = v["jobs"].as_array().unwrap();
    let direct = jobs.iter().find(|j| j["mode"] == "direct").unwrap();
    assert!(direct["skipped"].as_str().unwrap().contains("ramfs refuses O_DIRECT"), "{direct}");
    let buffered = jobs.iter().find(|j| j["mode"] == "buffered").unwrap();
    assert!(buffered["skipped"].is_null() && buffered["bytes"] == 4u64 << 20, "{buffered}");
    assert!(v["notes"].to_string().contains("refuses O_DIRECT"), "{}", v["notes"]);
}

/// A loop device over an image with an MBR partition table (one partition from 1 MiB to the end),
/// scanned with `losetup -P`: `/dev/loopNp1` exists. Detached and deleted on drop.
struct PartitionedLoop {
    disk: String,
    part: String,
    image: std::path::PathBuf,
}

impl PartitionedLoop {
    fn new(size_mib: u64) -> PartitionedLoop {
        let image =
            std::path::PathBuf::from(format!("/var/tmp/ioscope-test-part-{}.img", std::process::id()));
        let mut mbr = vec![0u8; 512];
        let sectors = (size_mib << 20) / 512;
        let entry = &mut mbr[446..462];
        entry[4] = 0x83; // Linux
        entry[8..12].copy_from_slice(&2048u32.to_le_bytes());
        entry[12..16].copy_from_slice(&((sectors - 2048) as u32).to_le_bytes());
        mbr[510] = 0x55;
        mbr[511] = 0xAA;
        std::fs::write(&image, &mbr).unwrap();
        std::fs::OpenOptions::new().write(true).open(&image).unwrap().set_len(size_mib << 20).unwrap();
        let disk =
            common::run("losetup", &["--find", "--show", "-P", image.to_str().unwrap()]).trim().to_string();
        let part = format!("{disk}p1");
        // A kernel built without partition-table parsers (this CI VM's: no CONFIG_MSDOS_PARTITION)
        // finds no partition: add it as `partx` does (the BLKPG ioctl), same start and length.
        std::thread::sleep(std::time::Duration::from_millis(50));
        if !Path::new(&part).exists() {
            let len = ((sectors - 2048) as u32).to_string();
            common::run("addpart", &[&disk, "1", "2048", &len]);
        }
        for _ in 0..100 {
            if Path::new(&part).exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(Path::new(&part).exists(), "{part} did not appear after losetup -P");
        PartitionedLoop { disk, part, image }
    }
}

impl Drop for PartitionedLoop {
    fn drop(&mut self) {
        for (cmd, arg) in [("umount", &self.part), ("swapoff", &self.part), ("losetup", &self.disk)] {
            let args: &[&str] = if cmd == "losetup" { &["-d", arg] } else { &[arg] };
            let _ = Command::new(cmd).args(args).stderr(Stdio::null()).status();
        }
        let _ = std::fs::remove_file(&self.image);
    }
}

/// Issue 23 item 1: a whole disk is never written while one of its partitions is mounted, is
/// swap, or is held open exclusively; the partition itself neither. The filesystem stays intact.
#[test]
fn a_device_with_a_partition_in_use_is_never_written() {
    let _group = common::live_group(module_path!());
    if !common::require_root("a_device_with_a_partition_in_use_is_never_written") {
        return;
    }
    let lo = PartitionedLoop::new(64);
    let write = |dev: &str| {
        bench(&[
            "--device",
            dev,
            "--destructive",
            "--rw",
            "write",
            "--bs",
            "64k",
            "--size",
            "4m",
            "--modes",
            "direct",
            "--runtime",
            "0.2",
            "--json",
        ])
    };
    common::run("mkfs.ext4", &["-q", "-F", &lo.part]);
    let mnt = tempfile::tempdir().unwrap();
    common::run("mount", &[&lo.part, mnt.path().to_str().unwrap()]);
    std::fs::write(mnt.path().join("data"), b"precious").unwrap();
    let p1 = Path::new(&lo.part).file_name().unwrap().to_str().unwrap().to_string();
    for (dev, want) in [
        (&lo.disk, format!("its partition {p1} is mounted on {}", mnt.path().display())),
        (&lo.part, format!("it is mounted on {}", mnt.path().display())),
    ] {
        let o = write(dev);
        assert_eq!(o.status.code(), Some(2), "{dev}: {}", stderr(&o));
        assert!(stderr(&o).contains("refusing to write to") && stderr(&o).contains(&want), "{}", stderr(&o));
    }
    common::run("umount", &[mnt.path().to_str().unwrap()]);
    let fsck = Command::new("fsck.ext4").args(["-n", "-f", &lo.part]).output().unwrap();
    assert!(fsck.status.success(), "fsck after the refusals: {}", String::from_utf8_lossy(&fsck.stdout));

    // Active swap on the partition.
    common::run("mkswap", &[&lo.part]);
    common::run("swapon", &[&lo.part]);
    let o = write(&lo.disk);
    common::run("swapoff", &[&lo.part]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("its partition {p1} is active swap")), "{}", stderr(&o));

    // A program holding the partition with O_EXCL (what mkfs, a mount or a database does).
    let held = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_EXCL).open(&lo.part).unwrap()
    };
    let o = write(&lo.disk);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("it is in use"), "{}", stderr(&o));
    drop(held);

    // Nothing uses it any more: the write job runs.
    let o = write(&lo.disk);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Issue 23 item 2: `-o FILE` refuses an existing file unless --force, and never overwrites the
/// file being benchmarked, --force or not.
#[test]
fn output_never_replaces_an_existing_file_without_force_nor_the_benchmarked_file() {
    let _group = common::live_group(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("db.ibd");
    std::fs::write(&data, vec![7u8; 1 << 20]).unwrap();
    let data_s = data.to_str().unwrap();
    let args = ["--bs", "64k", "--modes", "buffered", "--rw", "read", "--runtime", "0.1"];
    let run = |extra: &[&str]| {
        let mut a = vec![data_s];
        a.extend_from_slice(&args);
        a.extend_from_slice(extra);
        bench(&a)
    };
    for extra in
        [&["-o", data_s][..], &["-o", data_s, "--force"], &["--write", "--force", "--output", data_s]]
    {
        let o = run(extra);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("is the file being benchmarked"), "{}", stderr(&o));
        assert_eq!(
            std::fs::read(&data).unwrap(),
            vec![7u8; 1 << 20],
            "{extra:?} changed the benchmarked file"
        );
    }
    // Through a hard link too.
    let link = dir.path().join("link");
    std::fs::hard_link(&data, &link).unwrap();
    let o = run(&["-o", link.to_str().unwrap(), "--force"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));

    let report = dir.path().join("before.json");
    std::fs::write(&report, "keep me").unwrap();
    let o = run(&["-o", report.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("already exists") && stderr(&o).contains("--force"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&report).unwrap(), "keep me");
    let o = run(&["-o", report.to_str().unwrap(), "--force"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(v["jobs"].as_array().unwrap().len(), 1);
    // --force is not --write: the existing file still gets read jobs only.
    let o = bench(&[data_s, "--rw", "write", "--force", "--runtime", "0.1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("add --write"), "{}", stderr(&o));
}

/// Issue 23 item 5: a --size that overflows size + headroom is refused like any other too-large
/// size, not taken as fitting.
#[test]
fn a_size_near_u64_max_is_refused_by_the_free_space_check() {
    let _group = common::live_group(module_path!());
    if !common::require_root("a_size_near_u64_max_is_refused_by_the_free_space_check") {
        return;
    }
    let small = common::LoopDevice::with_fs(48, "ext4");
    let mnt = small.mount_point().to_str().unwrap();
    for size in ["18446744073709551615", "18446744073000000000", "18446744073709551615B"] {
        let o = bench(&[mnt, "--size", size, "--rw", "write", "--runtime", "0.2"]);
        assert_eq!(o.status.code(), Some(2), "--size {size}: {}", stderr(&o));
        assert!(stderr(&o).contains("not enough free space"), "--size {size}: {}", stderr(&o));
        assert!(leftovers(small.mount_point()).is_empty());
    }
}

/// Reads bench's stderr until its progress line names `job` (e.g. "[1/2]": that job has started)
/// and returns what was read; fails the test if stderr ends first.
fn wait_for_progress(err: &mut BufReader<std::process::ChildStderr>, job: &str) -> String {
    let mut seen = String::new();
    let mut buf = Vec::new();
    while !seen.contains(job) {
        buf.clear();
        if err.read_until(b' ', &mut buf).unwrap() == 0 {
            break;
        }
        seen.push_str(&String::from_utf8_lossy(&buf));
    }
    assert!(seen.contains(job), "no progress: {seen}");
    seen
}

/// Starts a long bench on `dir` and returns it once its first job runs (the test file exists).
fn start_long_bench(dir: &Path) -> std::process::Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ioscope"))
        .args(["bench", dir.to_str().unwrap(), "--size", "16m", "--rw", "randread", "--bs", "4k"])
        .args(["--modes", "buffered", "--runtime", "60", "--time-based", "--cache", "warm"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    wait_for_progress(&mut err, "[1/1]");
    // Keep draining stderr so the child never blocks on it.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    child
}

/// Issue 23 item 6: every catchable terminating signal removes the test file; what SIGKILL
/// leaves behind is removed (and said) by the next run; a test file still in use is named by the
/// free-space refusal instead of being counted silently.
#[test]
fn test_files_are_removed_on_every_signal_and_after_sigkill_by_the_next_run() {
    let _group = common::live_group(module_path!());
    if !common::require_root("test_files_are_removed_on_every_signal_and_after_sigkill_by_the_next_run") {
        return;
    }
    let lo = common::LoopDevice::with_fs(100, "ext4");
    let mnt = lo.mount_point();
    for sig in [libc::SIGQUIT, libc::SIGUSR1, libc::SIGUSR2, libc::SIGALRM, libc::SIGTERM] {
        let child = start_long_bench(mnt);
        assert_eq!(leftovers(mnt).len(), 1);
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(130), "signal {sig}");
        assert!(leftovers(mnt).is_empty(), "signal {sig} left {:?}", leftovers(mnt));
    }

    let mut child = start_long_bench(mnt);
    let left = leftovers(mnt);
    assert_eq!(left.len(), 1);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(leftovers(mnt), left, "SIGKILL cannot be caught: the file stays");
    let o =
        bench(&[mnt.to_str().unwrap(), "--size", "4m", "--rw", "read", "--bs", "64k", "--runtime", "0.1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("removed {}", mnt.join(&left[0]).display()))
            && stderr(&o).contains("killed"),
        "{}",
        stderr(&o)
    );
    assert!(leftovers(mnt).is_empty(), "{:?}", leftovers(mnt));

    // A running bench's file is never removed, and a refusal for space names it.
    let mut running = start_long_bench(mnt);
    let theirs = leftovers(mnt);
    let o = bench(&[mnt.to_str().unwrap(), "--size", "95m"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not enough free space")
            && stderr(&o).contains(&theirs[0])
            && stderr(&o).contains("in use by a running ioscope bench"),
        "{}",
        stderr(&o)
    );
    assert_eq!(leftovers(mnt), theirs);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(running.id() as i32, libc::SIGINT) };
    running.wait().unwrap();
    assert!(leftovers(mnt).is_empty());
}
