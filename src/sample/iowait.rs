//! The I/O-wait probes' raw figures (ioscope_common::iowait) as they go into a
//! [`crate::sample::Sample`]: per thread, cumulative nanoseconds blocked waiting for I/O, by cause,
//! since the thread was first seen waiting. src/model/iowait.rs derives the figures.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct IowaitSample {
    /// Every thread seen waiting for I/O since the probes attached (and still in its slot).
    pub threads: Vec<IowaitThreadSample>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct IowaitThreadSample {
    pub tid: u32,
    /// The thread's process (tgid).
    pub pid: u32,
    /// The thread's name when it was first seen waiting.
    pub comm: String,
    /// cgroup v2 id of the thread when it last blocked.
    pub cgroup_id: u64,
    /// Nanoseconds blocked per cause, cumulative, the wait in progress included; indexed as
    /// `ioscope_common::iowait::CAUSE_NAMES` (a recording of another version may have fewer or
    /// more: the model reads what is there).
    pub ns_by_cause: Vec<u64>,
    /// Waits ended.
    pub waits: u64,
}

impl IowaitThreadSample {
    /// Nanoseconds blocked, all causes.
    pub fn total_ns(&self) -> u64 {
        self.ns_by_cause.iter().fold(0u64, |a, n| a.saturating_add(*n))
    }
}
