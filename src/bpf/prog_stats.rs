//! The kernel's own counters of a program: missed runs, and run time when statistics are on. A tracing program is skipped, and the event
//! lost to it, when it would run while another BPF program is already running on that CPU (for
//! example a completion interrupt arriving during a program in task context: the kernel does not
//! nest them). `bpf_prog_info.recursion_misses` (Linux 5.12+) counts those skips; aya reads the
//! info but offers no accessor for that field, so it is read here with BPF_OBJ_GET_INFO_BY_FD.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};

use aya_obj::generated::{bpf_cmd, bpf_prog_info};

/// `union bpf_attr`'s `info` member: { bpf_fd, info_len, info }.
#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// What the kernel counts about one program's runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgStats {
    /// Runs skipped because another BPF program was running on the CPU.
    pub recursion_misses: u64,
    /// Time spent in the program and runs, counted only while `kernel.bpf_stats_enabled` is 1
    /// (timing every run has a cost, so it is off by default).
    pub run_time_ns: u64,
    pub run_cnt: u64,
}

/// The kernel's counters of one program.
pub fn prog_stats(prog: impl AsFd) -> io::Result<ProgStats> {
    // SAFETY: bpf_prog_info is plain integers; all-zero is a valid value.
    let mut info: bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut attr = InfoAttr {
        bpf_fd: prog.as_fd().as_raw_fd() as u32,
        info_len: std::mem::size_of::<bpf_prog_info>() as u32,
        info: &mut info as *mut bpf_prog_info as u64,
    };
    // SAFETY: attr points at a live, correctly sized struct, and the kernel writes at most info_len
    // bytes into `info`, which outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            bpf_cmd::BPF_OBJ_GET_INFO_BY_FD as libc::c_long,
            &mut attr as *mut InfoAttr,
            std::mem::size_of::<InfoAttr>(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ProgStats {
        recursion_misses: info.recursion_misses,
        run_time_ns: info.run_time_ns,
        run_cnt: info.run_cnt,
    })
}

/// While held, the kernel times every BPF program's runs (`BPF_ENABLE_STATS` with
/// `BPF_STATS_RUN_TIME`, about 20 ns a run): the programs' `run_cnt` and `run_time_ns` move. The
/// kernel counts the holders of such descriptors, so dropping it (or the process ending, however it
/// ends) turns the statistics off again unless `kernel.bpf_stats_enabled` or another holder keeps
/// them on.
#[derive(Debug)]
pub struct RunStats {
    _fd: OwnedFd,
}

/// How many [`RunStats`] this process holds: while one is, [`StatsCache`] re-reads the counters at
/// every sample (the sysctl does not show statistics turned on this way).
static RUN_STATS_HELD: AtomicUsize = AtomicUsize::new(0);

impl RunStats {
    /// Turns the run statistics on (root, or CAP_SYS_ADMIN; Linux 5.8+).
    pub fn enable() -> io::Result<RunStats> {
        // `union bpf_attr`'s `enable_stats` member: { type }; BPF_STATS_RUN_TIME is 0.
        let mut attr: u32 = 0;
        // SAFETY: attr is a live u32, the size of the member the command reads.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                bpf_cmd::BPF_ENABLE_STATS as libc::c_long,
                &mut attr as *mut u32,
                std::mem::size_of::<u32>(),
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        RUN_STATS_HELD.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the kernel returned a new descriptor that nothing else owns.
        Ok(RunStats { _fd: unsafe { OwnedFd::from_raw_fd(fd as RawFd) } })
    }
}

impl Drop for RunStats {
    fn drop(&mut self) {
        RUN_STATS_HELD.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How long [`StatsCache`] keeps the counters while statistics are off.
pub const STATS_FRESH: std::time::Duration = crate::util::SLOW_REFRESH;

/// Every program's counters, re-read each time while `kernel.bpf_stats_enabled` is 1 and at most
/// every [`STATS_FRESH`] while it is 0: the counters do not move while statistics are off, and
/// one `BPF_OBJ_GET_INFO_BY_FD` per program (~50) is a tenth of a sample's cost at
/// `--interval 0.1`. The sysctl itself is read once per [`STATS_FRESH`] too. Statistics turned on
/// (by the sysctl, or by `BPF_ENABLE_STATS`, which the sysctl does not show) are seen within that
/// time.
#[derive(Default)]
pub struct StatsCache {
    at: Option<std::time::Instant>,
    last: Vec<Option<ProgStats>>,
    sysctl: Option<std::fs::File>,
    /// The sysctl as last read, and when.
    enabled: Option<(std::time::Instant, bool)>,
    buf: Vec<u8>,
}

impl StatsCache {
    pub fn read<F: AsFd>(&mut self, fds: &[Option<F>]) -> &[Option<ProgStats>] {
        let now = std::time::Instant::now();
        let stale =
            self.last.len() != fds.len() || self.at.is_none_or(|t| now.duration_since(t) >= STATS_FRESH);
        if stale || self.stats_enabled(now) {
            self.last = fds.iter().map(|fd| fd.as_ref().and_then(|fd| prog_stats(fd).ok())).collect();
            self.at = Some(now);
        }
        &self.last
    }

    /// This process holds a [`RunStats`], or `kernel.bpf_stats_enabled` is not 0 (or cannot be read), as read at most [`STATS_FRESH`] ago.
    fn stats_enabled(&mut self, now: std::time::Instant) -> bool {
        if RUN_STATS_HELD.load(Ordering::Relaxed) > 0 {
            return true;
        }
        if let Some((at, on)) = self.enabled {
            if now.duration_since(at) < STATS_FRESH {
                return on;
            }
        }
        if self.sysctl.is_none() {
            self.sysctl = std::fs::File::open("/proc/sys/kernel/bpf_stats_enabled").ok();
        }
        let on = match &self.sysctl {
            Some(f) => match crate::util::pread_whole(f, &mut self.buf) {
                Ok(text) => text.trim_ascii() != b"0",
                Err(_) => true,
            },
            None => true,
        };
        self.enabled = Some((now, on));
        on
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_a_bpf_program_is_an_error() {
        let f = std::fs::File::open("/proc/self/stat").unwrap();
        assert!(prog_stats(&f).is_err());
    }
}
