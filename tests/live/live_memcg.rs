//! `ioscope serve` in a memory cgroup with a tight limit: the eBPF maps are kernel memory charged
//! to the cgroup (not in RSS), and ioscope used to be OOM-killed before its first scrape at 56–60
//! MiB. Now it sizes its maps to what the limit leaves (src/bpf/map_memory.rs): at 64 MiB it runs
//! with eBPF (its maps shrunk), at 60 MiB with eBPF or without and saying why, at 40 MiB without
//! and saying why; it is never killed, answers every scrape and exits 0 on SIGTERM.
//!
//! The cgroup is made for the test (v1 memory controller where mounted, else v2) and removed
//! after. `IOSCOPE_MEMCG_BIN` runs another build of ioscope instead (to show the test fails on
//! one that does not size its maps).

use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::exporter::{value, Exporter};

/// A memory cgroup with a limit, removed on drop (its processes killed first).
struct MemCgroup {
    dir: PathBuf,
    v1: bool,
}

impl MemCgroup {
    fn new(limit: u64) -> Option<MemCgroup> {
        let name = format!("ioscope-live-memcg-{}-{limit}", std::process::id());
        let v1 = PathBuf::from("/sys/fs/cgroup/memory");
        let cg = if v1.join("memory.limit_in_bytes").exists() {
            MemCgroup { dir: v1.join(name), v1: true }
        } else {
            let v2 = PathBuf::from("/sys/fs/cgroup");
            let controllers = std::fs::read_to_string(v2.join("cgroup.subtree_control")).unwrap_or_default();
            if !controllers.split_whitespace().any(|c| c == "memory") {
                return None;
            }
            MemCgroup { dir: v2.join(name), v1: false }
        };
        std::fs::create_dir(&cg.dir).expect("create the memory cgroup");
        let file = if cg.v1 { "memory.limit_in_bytes" } else { "memory.max" };
        std::fs::write(cg.dir.join(file), limit.to_string()).expect("set the memory limit");
        Some(cg)
    }

    /// A command that runs `ioscope ARGS` inside the cgroup.
    fn command(&self) -> Command {
        let bin = std::env::var("IOSCOPE_MEMCG_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_ioscope").into());
        let mut cmd = Command::new("sh");
        // $0 is the cgroup, "$@" the binary and its arguments.
        cmd.args(["-c", r#"echo $$ > "$0/cgroup.procs" && exec "$@""#]).arg(&self.dir).arg(bin);
        cmd
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.dir.join(file)).unwrap_or_default()
    }

    /// A counter of a "key value" file of the cgroup.
    fn field(&self, file: &str, key: &str) -> u64 {
        self.read(file)
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or(0)
    }

    /// OOM kills in the cgroup so far.
    fn oom_kills(&self) -> u64 {
        if self.v1 {
            self.field("memory.oom_control", "oom_kill")
        } else {
            self.field("memory.events", "oom_kill")
        }
    }

    /// The cgroup's peak use and its kernel memory now, bytes.
    fn peak_and_kernel(&self) -> (u64, u64) {
        if self.v1 {
            let n = |f: &str| self.read(f).trim().parse().unwrap_or(0);
            (n("memory.max_usage_in_bytes"), n("memory.kmem.usage_in_bytes"))
        } else {
            (self.read("memory.peak").trim().parse().unwrap_or(0), self.field("memory.stat", "kernel"))
        }
    }
}

impl Drop for MemCgroup {
    fn drop(&mut self) {
        for pid in self.read("cgroup.procs").split_whitespace() {
            if let Ok(pid) = pid.parse::<i32>() {
                // SAFETY: kill(2) on a process of the test's own cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// What `ioscope serve` did under a limit.
#[derive(Debug)]
struct Outcome {
    enabled: bool,
    reason: String,
    scrapes: usize,
    oom_kills: u64,
    exit: Option<i32>,
    peak: u64,
    kernel: u64,
}

/// Runs `ioscope serve` in a cgroup limited to `limit` bytes until eBPF is loaded or given up
/// (at most 60 s), then scrapes it once a second for 5 s, then stops it with SIGTERM.
fn serve_under(limit: u64) -> Option<Outcome> {
    let cg = MemCgroup::new(limit)?;
    let ex = Exporter::start_with(cg.command(), &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let (enabled, reason) = loop {
        // Not answering at all: killed (say so, rather than a connection error).
        let alive = std::net::TcpStream::connect(("127.0.0.1", ex.port)).is_ok();
        assert!(
            alive,
            "ioscope serve gone under {} MiB; OOM kills in its cgroup: {}",
            limit / MIB,
            cg.oom_kills()
        );
        let text = ex.scrape();
        let enabled = value(&text, "ioscope_bpf_enabled") == Some(1.0);
        let reason = text
            .lines()
            .find_map(|l| l.strip_prefix("ioscope_bpf_status_info{reason=\""))
            .map(|r| r.rsplit_once("\"}").map_or(r, |(r, _)| r).to_string())
            .unwrap_or_default();
        // Loaded (on), or off with a reason.
        if enabled || !reason.is_empty() || Instant::now() > deadline {
            break (enabled, reason);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut scrapes = 0;
    for _ in 0..5 {
        std::thread::sleep(Duration::from_secs(1));
        if let Ok((200, _, _)) = ex.try_get("/metrics", &[]) {
            scrapes += 1;
        }
    }
    let (peak, kernel) = cg.peak_and_kernel();
    let oom_kills = cg.oom_kills();
    let status = ex.stop(libc::SIGTERM);
    Some(Outcome { enabled, reason, scrapes, oom_kills, exit: status.code(), peak, kernel })
}

const MIB: u64 = 1 << 20;

#[test]
fn serve_under_a_tight_memory_limit_is_never_killed() {
    let _group = common::live_group(module_path!());
    if !common::require_root("serve_under_a_tight_memory_limit_is_never_killed") {
        return;
    }
    // 60 MiB first: the limit under which the old build was OOM-killed before its first scrape.
    for (limit, must_have_ebpf) in [(60 * MIB, None), (40 * MIB, Some(false)), (64 * MIB, Some(true))] {
        let Some(o) = serve_under(limit) else {
            common::skip("serve_under_a_tight_memory_limit_is_never_killed", "no memory cgroup controller");
            return;
        };
        eprintln!(
            "limit {} MiB: eBPF {}, {} of 5 scrapes, peak use {:.1} MiB, kernel memory {:.1} MiB, \
             OOM kills {}, exit {:?}; {}",
            limit / MIB,
            if o.enabled { "on" } else { "off" },
            o.scrapes,
            o.peak as f64 / MIB as f64,
            o.kernel as f64 / MIB as f64,
            o.oom_kills,
            o.exit,
            o.reason
        );
        let at = format!("under {} MiB: {o:?}", limit / MIB);
        assert_eq!((o.oom_kills, o.exit, o.scrapes), (0, Some(0), 5), "killed or not answering {at}");
        match must_have_ebpf {
            Some(true) => assert!(o.enabled, "eBPF should run {at}"),
            Some(false) => assert!(!o.enabled, "eBPF should be off {at}"),
            None => {}
        }
        if !o.enabled {
            assert!(
                o.reason.contains("its maps need") && o.reason.contains("memory limit of cgroup"),
                "eBPF off without saying it is for the memory limit {at}"
            );
            assert!(!o.reason.contains("  "), "a gap in the reason {at}");
        } else {
            // Their compiled sizes take more than 64 MiB leaves on this machine (xtask/README.md).
            assert!(o.reason.contains("maps shrunk"), "maps not said to be shrunk {at}");
        }
    }
}

/// `bpf.maps[]` and `bpf.maps_bytes` of a JSON report under a 64 MiB limit: every map with its
/// kernel memory, largest first, the total their sum, RA_PAGES shrunk, the cgroup's peak under its
/// limit.
#[test]
fn map_memory_is_reported_and_charged_to_the_cgroup() {
    let _group = common::live_group(module_path!());
    if !common::require_root("map_memory_is_reported_and_charged_to_the_cgroup") {
        return;
    }
    let Some(cg) = MemCgroup::new(64 * MIB) else {
        common::skip("map_memory_is_reported_and_charged_to_the_cgroup", "no memory cgroup controller");
        return;
    };
    let out = cg.command().args(["--batch", "--json", "-n", "2", "-i", "0.5"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let (peak, _) = cg.peak_and_kernel();
    let last = String::from_utf8(out.stdout).unwrap();
    let last = last.lines().last().expect("a JSON report");
    let v: serde_json::Value = serde_json::from_str(last).unwrap();
    let bpf = &v["bpf"];
    assert_eq!(bpf["enabled"], true, "{}", bpf["reason"]);
    let maps = bpf["maps"].as_array().expect("bpf.maps");
    let total: u64 = maps.iter().map(|m| m["bytes"].as_u64().unwrap()).sum();
    assert_eq!(bpf["maps_bytes"].as_u64(), Some(total));
    // Every map of the object, largest first, RA_PAGES shrunk to fit 64 MiB.
    assert!(maps.len() > 30, "{maps:?}");
    assert!(maps.windows(2).all(|w| w[0]["bytes"].as_u64() >= w[1]["bytes"].as_u64()));
    let ra = maps.iter().find(|m| m["map"] == "RA_PAGES").expect("RA_PAGES");
    assert!(ra["entries"].as_u64() < ra["compiled_entries"].as_u64(), "{ra}");
    eprintln!("maps {:.1} MiB, cgroup peak {:.1} MiB", total as f64 / MIB as f64, peak as f64 / MIB as f64);
    assert!(total > 10 * MIB && total < 64 * MIB && peak < 64 * MIB, "maps {total}, peak {peak}");
}
