//! The cgroup files (v2 `io.stat`, `io.pressure`, `memory.pressure`, `memory.stat`; on hybrid hosts
//! the v1 `blkio` and `memory` controllers' files where v2 has none) of the cgroups whose
//! processes the eBPF programs saw. Only those: a node with hundreds of idle cgroups costs nothing,
//! and at most [`MAX_CGROUPS`] are read per sample.
//!
//! On a hybrid host (v1 controllers, v2 at /sys/fs/cgroup/unified) a process's v1 cgroups need not
//! have its v2 path, so the v1 paths come from one of the cgroup's processes' `/proc/PID/cgroup`
//! (cached per cgroup); the figure's `source` names the v1 cgroup when its path differs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::collect::{psi, read};
use crate::sample::cgroups::{CgroupIoCounters, CgroupMemory, CgroupSample};
use crate::sample::BpfSample;

/// Most cgroups whose files are read in one sample (the busiest are not chosen: the first seen).
pub const MAX_CGROUPS: usize = 512;

/// Where the hierarchies are mounted, and the v1 paths found per cgroup v2 id.
#[derive(Default)]
pub struct CgroupFiles {
    v2: Option<PathBuf>,
    v1_blkio: Option<PathBuf>,
    v1_memory: Option<PathBuf>,
    /// v2 id → (v1 blkio path, v1 memory path), from a member's /proc/PID/cgroup.
    v1_paths: HashMap<u64, (Option<String>, Option<String>)>,
    /// The v2 files, kept open from one sample to the next when live (see [`read::Files`]).
    files: read::Files,
}

impl CgroupFiles {
    pub fn new() -> CgroupFiles {
        let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        CgroupFiles { files: read::Files::kept(), ..CgroupFiles::from_mounts(&mounts) }
    }

    pub fn from_mounts(mounts: &str) -> CgroupFiles {
        let mut out = CgroupFiles::default();
        for line in mounts.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(target), Some(fstype), Some(opts)) = (f.get(1), f.get(2), f.get(3)) else { continue };
            let has = |o: &str| opts.split(',').any(|x| x == o);
            match *fstype {
                "cgroup2" if out.v2.is_none() => out.v2 = Some(PathBuf::from(target)),
                "cgroup" if has("blkio") => out.v1_blkio = Some(PathBuf::from(target)),
                "cgroup" if has("memory") => out.v1_memory = Some(PathBuf::from(target)),
                _ => {}
            }
        }
        out
    }

    /// The files of every cgroup named in the sample's block and page-cache rows, and of those with a
    /// sync call running.
    pub fn read(&mut self, bpf: &BpfSample) -> Vec<CgroupSample> {
        // id → (path, a live member's pid).
        let mut seen: Vec<(u64, &str, u32)> = Vec::new();
        let rows = bpf.io_processes.iter().map(|p| (p.cgroup_id, p.cgroup.as_str(), p.pid, p.exited));
        let cache = bpf.page_cache.iter().flat_map(|pc| &pc.processes);
        let rows = rows.chain(cache.map(|p| (p.cgroup_id, p.cgroup.as_str(), p.pid, p.exited)));
        // Running sync calls (completed ones are cumulative: their cgroups are not all busy).
        let running = bpf.syncs.iter().flat_map(|s| &s.running);
        let rows = rows.chain(running.map(|r| (r.cgroup_id, r.cgroup.as_str(), r.pid, false)));
        for (id, path, pid, exited) in rows {
            if id == 0 || path.is_empty() {
                continue;
            }
            let full = seen.len() >= MAX_CGROUPS;
            match seen.iter_mut().find(|s| s.0 == id) {
                Some(s) if s.2 == 0 && !exited => s.2 = pid,
                Some(_) => {}
                None if !full => seen.push((id, path, if exited { 0 } else { pid })),
                None => {}
            }
        }
        self.v1_paths.retain(|id, _| seen.iter().any(|s| s.0 == *id));
        seen.sort_by_key(|s| s.0);
        seen.into_iter().map(|(id, path, pid)| self.read_one(id, path, pid)).collect()
    }

    fn read_one(&mut self, id: u64, path: &str, pid: u32) -> CgroupSample {
        let dir = self.v2.as_ref().map(|root| root.join(path.trim_start_matches('/')));
        let files = &mut self.files;
        let mut file = |name: &str, parse: &mut dyn FnMut(&str)| {
            if let Some(text) = dir.as_ref().and_then(|d| files.record(&d.join(name))) {
                parse(text);
            }
        };
        let mut s = CgroupSample { id, path: path.to_string(), ..Default::default() };
        file("io.stat", &mut |t| s.io = Some(parse_io_stat(t)));
        file("io.pressure", &mut |t| s.io_pressure = psi::parse(t));
        file("memory.pressure", &mut |t| s.memory_pressure = psi::parse(t));
        file("memory.stat", &mut |t| s.memory = parse_memory_stat(t, false));
        if let Some(m) = s.memory.as_mut() {
            let mut limits = Vec::new();
            file("memory.max", &mut |t| limits.push(parse_limit(t)));
            file("memory.high", &mut |t| limits.push(parse_limit(t)));
            m.limit_bytes = limits.into_iter().flatten().min();
        }
        if s.io.is_some() && s.memory.is_some() {
            return s;
        }
        // v2 has no io or memory controller here: the v1 ones (hybrid hosts). Not for the v2
        // root, whose processes sit in any v1 cgroup, nor when the v1 cgroup is v1's root (the
        // whole machine, not this cgroup).
        if (self.v1_blkio.is_none() && self.v1_memory.is_none()) || path == "/" {
            return s;
        }
        let (blkio, memory) = match self.v1_paths.get(&id) {
            Some(p) => p.clone(),
            None if pid != 0 => {
                let text = read::text(Path::new(&format!("/proc/{pid}/cgroup"))).unwrap_or_default();
                let not_root = |p: Option<String>| p.filter(|p| p != "/");
                let p = (not_root(v1_path(&text, "blkio")), not_root(v1_path(&text, "memory")));
                self.v1_paths.insert(id, p.clone());
                p
            }
            None => (None, None),
        };
        let label = |controller: &str, v1: &str| {
            if v1 == path {
                controller.to_string()
            } else {
                format!("{controller} {v1}")
            }
        };
        if s.io.is_none() {
            if let (Some(root), Some(p)) = (&self.v1_blkio, &blkio) {
                let d = root.join(p.trim_start_matches('/'));
                let bytes = read::text(&d.join("blkio.throttle.io_service_bytes_recursive"));
                let ops = read::text(&d.join("blkio.throttle.io_serviced_recursive"));
                if let (Some(bytes), Some(ops)) = (bytes, ops) {
                    let (read_bytes, write_bytes) = parse_blkio(&bytes);
                    let (reads, writes) = parse_blkio(&ops);
                    s.io = Some(CgroupIoCounters {
                        source: label("blkio", p),
                        read_bytes,
                        write_bytes,
                        reads,
                        writes,
                    });
                }
            }
        }
        if s.memory.is_none() {
            if let (Some(root), Some(p)) = (&self.v1_memory, &memory) {
                let d = root.join(p.trim_start_matches('/'));
                let limit = read::text(&d.join("memory.limit_in_bytes")).and_then(|t| parse_limit(&t));
                s.memory = read::text(&d.join("memory.stat"))
                    .and_then(|t| parse_memory_stat(&t, true))
                    .map(|m| CgroupMemory { source: label("memory v1", p), limit_bytes: limit, ..m });
            }
        }
        s
    }
}

/// v2 `io.stat`: one line per device, `MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N`
/// (more keys on some kernels); summed over the devices.
pub fn parse_io_stat(text: &str) -> CgroupIoCounters {
    let mut c = CgroupIoCounters { source: "io.stat".into(), ..Default::default() };
    for (key, value) in text.split_whitespace().filter_map(|kv| kv.split_once('=')) {
        let v: u64 = value.parse().unwrap_or(0);
        match key {
            "rbytes" => c.read_bytes += v,
            "wbytes" => c.write_bytes += v,
            "rios" => c.reads += v,
            "wios" => c.writes += v,
            _ => {}
        }
    }
    c
}

/// v1 `blkio.throttle.io_service*_recursive`: `MAJ:MIN Read N` ... `Total N`; (Read, Write) summed.
pub fn parse_blkio(text: &str) -> (u64, u64) {
    let (mut r, mut w) = (0, 0);
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if let [_dev, op, n] = f[..] {
            let n: u64 = n.parse().unwrap_or(0);
            match op {
                "Read" => r += n,
                "Write" => w += n,
                _ => {}
            }
        }
    }
    (r, w)
}

/// At or above this a limit is "none": v1 shows an unlimited cgroup as its page counter's maximum
/// (2^63 − 1 rounded down to a page, 8 EiB); no machine has 4 EiB of memory.
const NO_LIMIT: u64 = 1 << 62;

/// A memory limit file (v2 `memory.max`/`memory.high`, v1 `memory.limit_in_bytes`): bytes, or
/// None for no limit (v2 `max`, v1's huge value) or an unreadable text.
pub fn parse_limit(text: &str) -> Option<u64> {
    text.trim().parse::<u64>().ok().filter(|&v| v < NO_LIMIT)
}

/// `memory.stat`: v2 `file`, `file_dirty`, `file_writeback`, or v1 (hierarchical)
/// `total_cache`, `total_dirty`, `total_writeback`. None without the file-cache line.
pub fn parse_memory_stat(text: &str, v1: bool) -> Option<CgroupMemory> {
    let keys = if v1 {
        ["total_cache", "total_dirty", "total_writeback"]
    } else {
        ["file", "file_dirty", "file_writeback"]
    };
    let get =
        |k: &str| text.lines().find_map(|l| l.strip_prefix(k)?.strip_prefix(' ')?.trim().parse::<u64>().ok());
    Some(CgroupMemory {
        source: if v1 { "memory v1" } else { "memory.stat" }.into(),
        file_bytes: get(keys[0])?,
        dirty_bytes: get(keys[1]).unwrap_or(0),
        writeback_bytes: get(keys[2]).unwrap_or(0),
        limit_bytes: None,
    })
}

/// The v1 path of `controller` in a `/proc/PID/cgroup` text (`4:memory:/a/b`; `2:cpu,cpuacct:/x`).
pub fn v1_path(text: &str, controller: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, list, path) = (f.next()?, f.next()?, f.next()?);
        list.split(',').any(|c| c == controller).then(|| path.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_stat_sums_devices_and_ignores_other_keys() {
        let t = "253:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n\
                 7:0 rbytes=100 wbytes=0 rios=3 wios=0 dbytes=0 dios=0 cost.usage=5\n";
        let c = parse_io_stat(t);
        assert_eq!((c.read_bytes, c.write_bytes, c.reads, c.writes), (4196, 8192, 4, 2));
        assert_eq!(c.source, "io.stat");
    }

    #[test]
    fn blkio_sums_read_and_write_lines() {
        let t = "7:0 Read 1024\n7:0 Write 2048\n7:0 Sync 3072\n7:0 Async 0\n7:0 Discard 0\n7:0 Total 3072\n\
                 8:0 Read 1\n8:0 Write 0\nTotal 3073\n";
        assert_eq!(parse_blkio(t), (1025, 2048));
    }

    #[test]
    fn memory_stat_v2_and_v1() {
        let v2 = "anon 1\nfile 409600\nkernel 5\nfile_mapped 0\nfile_dirty 4096\nfile_writeback 8192\n";
        let m = parse_memory_stat(v2, false).unwrap();
        assert_eq!((m.file_bytes, m.dirty_bytes, m.writeback_bytes), (409600, 4096, 8192));
        let v1 = "cache 1\ndirty 2\nwriteback 3\ntotal_cache 100\ntotal_dirty 20\ntotal_writeback 30\n";
        let m = parse_memory_stat(v1, true).unwrap();
        assert_eq!((m.file_bytes, m.dirty_bytes, m.writeback_bytes), (100, 20, 30));
        assert_eq!(parse_memory_stat("anon 1\n", false), None);
    }

    #[test]
    fn memory_limits_and_no_limit() {
        assert_eq!(parse_limit("314572800\n"), Some(300 << 20));
        assert_eq!(parse_limit("max\n"), None, "v2 unlimited");
        assert_eq!(parse_limit("9223372036854771712\n"), None, "v1 unlimited (4 KiB pages)");
        assert_eq!(parse_limit("9223372036854710272\n"), None, "v1 unlimited (64 KiB pages)");
        assert_eq!(parse_limit(""), None);
    }

    #[test]
    fn v1_paths_from_proc_pid_cgroup() {
        let t = "9:name=systemd:/\n7:blkio:/\n4:memory:/process_api/3e49\n2:cpu,cpuacct:/x\n0::/\n";
        assert_eq!(v1_path(t, "memory").as_deref(), Some("/process_api/3e49"));
        assert_eq!(v1_path(t, "blkio").as_deref(), Some("/"));
        assert_eq!(v1_path(t, "cpuacct").as_deref(), Some("/x"));
        assert_eq!(v1_path("0::/a\n", "blkio"), None);
    }

    #[test]
    fn mounts_of_a_hybrid_host() {
        let m = "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n\
                 cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0\n\
                 cgroup /sys/fs/cgroup/blkio cgroup rw,relatime,blkio 0 0\n\
                 cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n";
        let f = CgroupFiles::from_mounts(m);
        assert_eq!(f.v2, Some(PathBuf::from("/sys/fs/cgroup/unified")));
        assert_eq!(f.v1_blkio, Some(PathBuf::from("/sys/fs/cgroup/blkio")));
        assert_eq!(f.v1_memory, Some(PathBuf::from("/sys/fs/cgroup/memory")));
    }
}
