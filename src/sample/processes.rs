//! Per-process I/O counters (/proc/PID/io).

use serde::{Deserialize, Serialize};

/// One process's /proc/PID/io and identity.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcessIo {
    pub pid: u32,
    pub comm: std::sync::Arc<str>,
    /// starttime from /proc/PID/stat (clock ticks since boot): with pid, it tells a reused pid apart.
    pub start_ticks: u64,
    /// None when /proc/PID/io cannot be read (another user's process without privileges).
    pub io: Option<ProcIoCounters>,
    /// When `io` was read (CLOCK_MONOTONIC ns) if not in this sample: a sampler at a sub-second
    /// interval re-reads an idle process's counters only about once a second and carries them in
    /// between (`collect::processes`). None: read in this sample, at the sample's `mono_ns`.
    /// The model divides a process's deltas by the time between its two reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io_read_ns: Option<u64>,
    /// The parent's pid (`ppid` of /proc/PID/stat; 0 when unknown, as in older recordings).
    #[serde(skip_serializing_if = "is_zero")]
    pub ppid: u32,
    /// The I/O the process did itself: the sum of its live threads' /proc/PID/task/TID/io and
    /// of the last counters read of its threads that ended. `io` holds more: the kernel adds a
    /// reaped child's totals (and an ended thread's) to the process's /proc/PID/io. None when not
    /// read (older recordings, unreadable threads); read with `io`, carried with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own: Option<ProcIoCounters>,
    /// How much `io` moved while `own` was being read (the reader reads io, own, io again, up to
    /// three times, until io stands still); None when it did not move.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_slack: Option<ProcIoCounters>,
    /// The owner of /proc/PID: the process's effective uid (root for a process that is not
    /// dumpable, as ps and htop show it). None when not read (older recordings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    /// `uid`'s name from /etc/passwd, or the uid as a number (`collect::identity`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<std::sync::Arc<str>>,
    /// /proc/PID/cmdline, the arguments joined by spaces (at most 4096 bytes; empty for a kernel
    /// thread); None until read (it is read off the sampling thread, so a process's first samples
    /// may lack it) or when it could not be. Untrusted: whatever the process wrote there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cmdline: Option<std::sync::Arc<str>>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcIoCounters {
    pub rchar: u64,
    pub wchar: u64,
    pub syscr: u64,
    pub syscw: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub cancelled_write_bytes: u64,
}

impl ProcIoCounters {
    /// Every counter of `self` less `other`'s, each at least 0.
    pub fn saturating_sub(&self, other: &ProcIoCounters) -> ProcIoCounters {
        self.zip(other, u64::saturating_sub)
    }

    /// Every counter of `self` plus `other`'s.
    pub fn saturating_add(&self, other: &ProcIoCounters) -> ProcIoCounters {
        self.zip(other, u64::saturating_add)
    }

    /// True when every counter is 0.
    pub fn is_zero(&self) -> bool {
        *self == ProcIoCounters::default()
    }

    fn zip(&self, o: &ProcIoCounters, f: fn(u64, u64) -> u64) -> ProcIoCounters {
        ProcIoCounters {
            rchar: f(self.rchar, o.rchar),
            wchar: f(self.wchar, o.wchar),
            syscr: f(self.syscr, o.syscr),
            syscw: f(self.syscw, o.syscw),
            read_bytes: f(self.read_bytes, o.read_bytes),
            write_bytes: f(self.write_bytes, o.write_bytes),
            cancelled_write_bytes: f(self.cancelled_write_bytes, o.cancelled_write_bytes),
        }
    }
}
