//! Live cgroup view (root only): two cgroups made by the test under the cgroup v2 hierarchy (the
//! unified mount on a hybrid host), one process in each, started inside its cgroup (moved there
//! before exec): one writes 64 MiB with O_DIRECT, the other reads a cold 32 MiB file with
//! buffered reads, then reads it again warm. The model's JSON `cgroups[]` must credit each cgroup
//! its own bytes within 5 %, and give the reader a cold hit rate near 0 % and a warm one near 100 %
//! (the writer: no misses, and no accesses but its own code's pages). The cgroups are removed afterwards, even when the
//! test fails.

mod common;

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::LoopDevice;
use ioscope::bpf::BpfCollector;
use ioscope::collect::{Sampler, SystemRoot};
use ioscope::model::Model;

const CHILD_MODE: &str = "IOSCOPE_LIVE_CGROUP_CHILD";
const CHILD_FILE: &str = "IOSCOPE_LIVE_CGROUP_FILE";
const READY: &str = "IOSCOPE_LIVE_CGROUP_CHILD_READY";
const WRITE_MIB: u64 = 64;
const READ_MIB: u64 = 32;
const MIB: f64 = (1 << 20) as f64;

/// The child's job after its go: "dio-write" (WRITE_MIB MiB, 1 MiB O_DIRECT writes) or "read"
/// (the file with 128 KiB buffered reads; after a second go, again).
fn child_main() -> bool {
    let Ok(mode) = std::env::var(CHILD_MODE) else { return false };
    let path = std::env::var(CHILD_FILE).unwrap();
    common::child_signal_and_wait(READY);
    if mode == "dio-write" {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_DIRECT)
            .open(&path)
            .unwrap();
        let mut raw = vec![0x3cu8; (1 << 20) + 4096];
        let skip = raw.as_ptr().align_offset(4096);
        let buf = &mut raw[skip..skip + (1 << 20)];
        for _ in 0..WRITE_MIB {
            f.write_all(buf).unwrap();
        }
    } else {
        let read_all = || {
            let mut f = File::open(&path).unwrap();
            let mut buf = vec![0u8; 128 << 10];
            while f.read(&mut buf).unwrap() > 0 {}
        };
        read_all();
        common::child_signal_and_wait(READY);
        read_all();
    }
    true
}

/// A cgroup v2 directory made for the test; its processes are moved out and it is removed on drop.
struct TestCgroup {
    dir: PathBuf,
    root: PathBuf,
}

impl TestCgroup {
    fn new(root: &Path, name: &str) -> TestCgroup {
        let dir = root.join(format!("ioscope-test-{}-{name}", std::process::id()));
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        TestCgroup { dir, root: root.to_path_buf() }
    }

    fn id(&self) -> u64 {
        std::fs::metadata(&self.dir).unwrap().ino()
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.split_whitespace() {
            let _ = std::fs::write(self.root.join("cgroup.procs"), pid);
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// This test binary re-run as a child in `cgroup` (moved there between fork and exec, so the
/// probes see it there from its first page-cache access).
struct Child {
    child: std::process::Child,
    out: std::io::BufReader<std::process::ChildStdout>,
}

impl Child {
    fn spawn(cgroup: &TestCgroup, mode: &str, file: &Path) -> Child {
        let procs = CString::new(cgroup.dir.join("cgroup.procs").to_str().unwrap()).unwrap();
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "child_entry_point", "--nocapture", "--test-threads=1"])
            .env(CHILD_MODE, mode)
            .env(CHILD_FILE, file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        // SAFETY: only async-signal-safe calls (open, write, close) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let n = libc::write(fd, b"0\n".as_ptr().cast(), 2);
                libc::close(fd);
                if n < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        Child { child, out }
    }

    fn wait_ready(&mut self) {
        use std::io::BufRead;
        let mut line = String::new();
        while !line.contains(READY) {
            line.clear();
            assert!(self.out.read_line(&mut line).unwrap() > 0, "child ended before {READY}");
        }
    }

    fn go(&mut self) {
        self.child.stdin.as_mut().unwrap().write_all(b"g").unwrap();
    }

    fn finish(mut self) {
        drop(self.child.stdin.take());
        std::io::copy(&mut self.out, &mut std::io::sink()).unwrap();
        assert!(self.child.wait().unwrap().success(), "child failed");
    }
}

fn cgroup2_mount() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
    })
}

/// The cgroup's row of the model's JSON, by id.
fn row(model: &Model, id: u64) -> serde_json::Value {
    let json = serde_json::to_value(model).unwrap();
    json["cgroups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"].as_u64() == Some(id))
        .cloned()
        .unwrap_or_else(|| panic!("cgroup {id} not in cgroups[]: {}", json["cgroups"]))
}

fn within(actual: f64, expected: f64, pct: f64) -> bool {
    (actual - expected).abs() <= expected * pct / 100.0
}

#[test]
fn child_entry_point() {
    child_main();
}

#[test]
fn cgroups_are_credited_their_own_bytes_and_hit_rates() {
    if !common::require_root("cgroups_are_credited_their_own_bytes_and_hit_rates") {
        return;
    }
    let Some(v2) = cgroup2_mount() else {
        common::skip("cgroups_are_credited_their_own_bytes_and_hit_rates", "no cgroup2 mount");
        return;
    };
    let lo = LoopDevice::ext4_direct_io_in(Path::new("/var/tmp"), 256);
    let mnt = lo.mount_point().to_path_buf();
    let reads = mnt.join("cold.bin");
    common::write_patterned_file(&reads, READ_MIB);
    // Cold: drop the file's pages (it is synced), not the machine's cache.
    let f = File::open(&reads).unwrap();
    // SAFETY: a valid descriptor; advice only.
    assert_eq!(unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) }, 0);
    drop(f);

    let bpf = BpfCollector::start();
    if !bpf.status().enabled {
        common::skip("cgroups_are_credited_their_own_bytes_and_hit_rates", "eBPF could not be loaded");
        return;
    }
    let mut sampler = Sampler::new(SystemRoot::live(), bpf);
    let (cw, cr) = (TestCgroup::new(&v2, "w"), TestCgroup::new(&v2, "r"));
    let mut writer = Child::spawn(&cw, "dio-write", &mnt.join("direct.bin"));
    let mut reader = Child::spawn(&cr, "read", &reads);
    writer.wait_ready();
    reader.wait_ready();
    let before = sampler.sample();
    writer.go();
    reader.go();
    reader.wait_ready();
    writer.finish();
    let cold = sampler.sample();
    reader.go();
    reader.finish();
    let warm = sampler.sample();

    let m = Model::between(&before, &cold);
    let (w, r) = (row(&m, cw.id()), row(&m, cr.id()));
    let bytes = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap() * m.interval_s;
    eprintln!("writer cgroup: {w}\nreader cgroup: {r}");
    assert_eq!(w["path"].as_str().unwrap(), format!("/{}", cw.dir.file_name().unwrap().to_str().unwrap()));
    let written = bytes(&w, "write_bytes_s");
    assert!(within(written, WRITE_MIB as f64 * MIB, 5.0), "writer cgroup: {:.2} MiB written", written / MIB);
    let read = bytes(&r, "read_bytes_s");
    assert!(within(read, READ_MIB as f64 * MIB, 5.0), "reader cgroup: {:.2} MiB read", read / MIB);
    // Neither is credited the other's I/O.
    assert!(bytes(&w, "read_bytes_s") < 0.05 * READ_MIB as f64 * MIB, "writer cgroup read: {w}");
    assert!(bytes(&r, "write_bytes_s") < 0.05 * WRITE_MIB as f64 * MIB, "reader cgroup wrote: {r}");
    assert!(w["write_iops"].as_f64().unwrap() > 0.0 && r["read_iops"].as_f64().unwrap() > 0.0);
    // Hit rates: the cold read misses (nearly) everything, the direct writer has no cache accesses.
    let cold_hit = r["hit_pct"].as_f64().expect("the reader's accesses");
    assert!(cold_hit <= 5.0, "cold read hit rate {cold_hit:.1} %");
    let accesses = r["accesses_s"].as_f64().unwrap() * m.interval_s;
    let pages = (READ_MIB << 20) as f64 / 4096.0;
    assert!(within(accesses, pages, 5.0), "reader accesses {accesses:.0}, file pages {pages}");
    // Direct writes are no page-cache accesses: the writer's only accesses are its own code's
    // pages being mapped as it runs (hits), a few hundred at most against the 16,384 written.
    let w_accesses = w["accesses_s"].as_f64().unwrap() * m.interval_s;
    assert!(w_accesses < 0.05 * (WRITE_MIB << 20) as f64 / 4096.0, "writer accesses {w_accesses:.0}: {w}");
    assert!(w["misses_s"].as_f64().unwrap() * m.interval_s < 16.0, "writer misses: {w}");

    let m = Model::between(&cold, &warm);
    let r = row(&m, cr.id());
    let warm_hit = r["hit_pct"].as_f64().expect("the reader's accesses");
    assert!(warm_hit >= 95.0, "warm read hit rate {warm_hit:.1} %: {r}");
    assert!(r["read_bytes_s"].as_f64().unwrap() * m.interval_s < 0.05 * READ_MIB as f64 * MIB, "{r}");
}
