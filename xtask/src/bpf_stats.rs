//! `kernel.bpf_stats_enabled`: while it is 1 the kernel times every run of every BPF program
//! (two clock reads a run) and ioscope reads each program's counters every sample, so a figure
//! taken then is not the one users get. The benchmarks measure with it off ([`BpfStats::off`]),
//! whatever an earlier session or tool left it at, and turn it on only where they want the
//! kernel's per-program timing ([`BpfStats::on`]); the value found is restored on drop.

use anyhow::{Context, Result};

const PATH: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// The setting held for the guard's life; the previous value is restored on drop, however the
/// benchmark ends.
pub struct BpfStats(String);

impl BpfStats {
    fn set(value: &str) -> Result<BpfStats> {
        let old = std::fs::read_to_string(PATH).with_context(|| format!("reading {PATH}"))?;
        let old = old.trim().to_string();
        if old != value {
            std::fs::write(PATH, value).with_context(|| format!("writing {PATH}"))?;
        }
        Ok(BpfStats(old))
    }

    /// The kernel's per-program timing on.
    pub fn on() -> Result<BpfStats> {
        BpfStats::set("1")
    }

    /// The kernel's per-program timing off, as on users' machines; says so when it was on, and
    /// when it cannot be turned off (not root: the benchmark then says what it needs itself).
    pub fn off() -> BpfStats {
        match BpfStats::set("0") {
            Ok(guard) => {
                if guard.0 != "0" {
                    eprintln!(
                        "kernel.bpf_stats_enabled was {}: 0 for the measurement, restored after it",
                        guard.0
                    );
                }
                guard
            }
            Err(e) => {
                eprintln!("kernel.bpf_stats_enabled left as it is: {e:#}");
                BpfStats(std::fs::read_to_string(PATH).unwrap_or_default().trim().to_string())
            }
        }
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        let now = std::fs::read_to_string(PATH).unwrap_or_default();
        if now.trim() != self.0 {
            if let Err(e) = std::fs::write(PATH, &self.0) {
                eprintln!("could not restore {PATH} to {}: {e}", self.0);
            }
        }
    }
}

/// One BPF program's counters as the kernel keeps them while `kernel.bpf_stats_enabled` is 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramRuns {
    pub id: u64,
    /// The program's name as loaded (the kernel keeps 15 bytes); empty for an unnamed one.
    pub name: String,
    pub run_time_ns: u64,
    pub run_cnt: u64,
}

/// The BPF programs process `pid` holds (its bpf-prog descriptors), each once however many
/// descriptors it holds (aya keeps a second one for some attachments), from their fdinfo; the
/// names from the kernel (BPF_OBJ_GET_INFO_BY_FD), empty where it does not give them.
pub fn programs_of(pid: u32) -> Result<Vec<ProgramRuns>> {
    let mut seen = std::collections::HashSet::new();
    let mut programs = Vec::new();
    let dir = format!("/proc/{pid}/fd");
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {dir}"))?.flatten() {
        let target = std::fs::read_link(entry.path());
        if !target.is_ok_and(|t| t.to_string_lossy() == "anon_inode:bpf-prog") {
            continue;
        }
        let fd = entry.file_name();
        let Ok(info) = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.to_string_lossy())) else {
            continue; // closed meanwhile
        };
        let Some(id) = fdinfo_value(&info, "prog_id") else { continue };
        if !seen.insert(id) {
            continue;
        }
        programs.push(ProgramRuns {
            id,
            name: program_name(id).unwrap_or_default(),
            run_time_ns: fdinfo_value(&info, "run_time_ns").unwrap_or(0),
            run_cnt: fdinfo_value(&info, "run_cnt").unwrap_or(0),
        });
    }
    Ok(programs)
}

/// Each program's runs and time between two readings of [`programs_of`] (programs in both).
pub fn delta(before: &[ProgramRuns], after: &[ProgramRuns]) -> Vec<ProgramRuns> {
    after
        .iter()
        .filter_map(|a| {
            let b = before.iter().find(|b| b.id == a.id)?;
            Some(ProgramRuns {
                id: a.id,
                name: a.name.clone(),
                run_time_ns: a.run_time_ns.saturating_sub(b.run_time_ns),
                run_cnt: a.run_cnt.saturating_sub(b.run_cnt),
            })
        })
        .collect()
}

pub fn fdinfo_value(fdinfo: &str, key: &str) -> Option<u64> {
    fdinfo.lines().find_map(|l| l.strip_prefix(key)?.strip_prefix(':')).and_then(|v| v.trim().parse().ok())
}

const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
/// `offsetof(struct bpf_prog_info, name)`: after type, id, tag[8], two lengths, two insn
/// pointers, load_time, created_by_uid, nr_map_ids and map_ids (stable since Linux 4.15).
const PROG_INFO_NAME: usize = 64;
const BPF_OBJ_NAME_LEN: usize = 16;

/// The name of program `id`, from a descriptor of it opened by id (root).
fn program_name(id: u64) -> Option<String> {
    // union bpf_attr for BPF_PROG_GET_FD_BY_ID: prog_id, next_id, open_flags.
    let mut by_id = [0u32; 4];
    by_id[0] = u32::try_from(id).ok()?;
    let fd = crate::empty_program::bpf(BPF_PROG_GET_FD_BY_ID, &mut by_id, "opening a program by id").ok()?;
    let mut info = [0u8; 256];
    // union bpf_attr for BPF_OBJ_GET_INFO_BY_FD: bpf_fd, info_len, info (a pointer).
    #[repr(C)]
    struct InfoAttr {
        bpf_fd: u32,
        info_len: u32,
        info: u64,
    }
    let mut attr = InfoAttr {
        bpf_fd: std::os::fd::AsRawFd::as_raw_fd(&fd) as u32,
        info_len: info.len() as u32,
        info: info.as_mut_ptr() as u64,
    };
    // SAFETY: the attribute points at a buffer of the length it declares, alive for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET_INFO_BY_FD,
            &mut attr as *mut InfoAttr,
            size_of::<InfoAttr>(),
        )
    };
    if rc < 0 {
        return None;
    }
    let name = &info[PROG_INFO_NAME..PROG_INFO_NAME + BPF_OBJ_NAME_LEN];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Some(String::from_utf8_lossy(&name[..end]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_run_time_from_fdinfo() {
        let info = "pos:\t0\nflags:\t02000002\nprog_type:\t5\nrun_time_ns:\t123456\nrun_cnt:\t42\n";
        assert_eq!(fdinfo_value(info, "run_time_ns"), Some(123456));
        assert_eq!(fdinfo_value(info, "run_cnt"), Some(42));
        assert_eq!(fdinfo_value("pos:\t0\n", "run_cnt"), None);
    }

    #[test]
    fn deltas_pair_programs_by_id() {
        let p = |id, name: &str, t, n| ProgramRuns { id, name: name.into(), run_time_ns: t, run_cnt: n };
        let before = [p(1, "a", 100, 10), p(2, "b", 50, 5)];
        let after = [p(1, "a", 400, 13), p(3, "c", 9, 1)];
        assert_eq!(delta(&before, &after), vec![p(1, "a", 300, 3)]);
    }
}
