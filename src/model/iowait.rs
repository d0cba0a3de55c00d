//! I/O wait per process, thread and cgroup, by cause (src/model/README.md, "I/O wait"), from the
//! I/O-wait probes' per-thread counters in the Samples (src/sample/iowait.rs):
//!
//! ```text
//! thread wait_s      = Δ(ns blocked, all causes) / 1e9 over the interval
//! thread wait_pct    = 100 × wait_s / interval (at most 100)
//! process wait_pct   = its busiest thread's wait_pct (as htop's and iotop's per-task IO column)
//! process wait_s     = Σ its threads' wait_s (threads together: may exceed the interval)
//! by_cause_s         = the same Σ per cause (keys: ioscope_common::iowait::CAUSE_NAMES)
//! total_s, total_by_cause_s = cumulative seconds of the threads in their slots now
//! cgroup wait_s, by_cause_s = Σ of the threads that last blocked in the cgroup
//! top cause, share   = the cause with the most of by_cause_s, its seconds / Σ by_cause_s
//! ```

use std::collections::{BTreeMap, HashMap};

use ioscope_common::iowait::CAUSE_NAMES;
use serde::Serialize;

use crate::sample::iowait::IowaitThreadSample;
use crate::sample::Sample;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct IowaitModel {
    /// Processes with a thread seen waiting since ioscope started, the longest wait in the
    /// interval first.
    pub processes: Vec<IowaitProcessModel>,
    /// cgroups whose threads waited in the interval, the longest first.
    pub cgroups: Vec<IowaitCgroupModel>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct IowaitProcessModel {
    pub pid: u32,
    pub comm: String,
    /// The cgroup (v2 id) its busiest thread last blocked in.
    pub cgroup_id: u64,
    /// % of the interval its busiest thread was blocked.
    pub wait_pct: f64,
    /// Seconds its threads were blocked in the interval, together.
    pub wait_s: f64,
    pub by_cause_s: BTreeMap<&'static str, f64>,
    pub total_s: f64,
    pub total_by_cause_s: BTreeMap<&'static str, f64>,
    /// Threads that waited in the interval, the longest first.
    pub threads: Vec<IowaitThreadModel>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct IowaitThreadModel {
    pub tid: u32,
    pub comm: String,
    pub wait_pct: f64,
    pub wait_s: f64,
    pub by_cause_s: BTreeMap<&'static str, f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct IowaitCgroupModel {
    pub cgroup_id: u64,
    pub wait_s: f64,
    pub by_cause_s: BTreeMap<&'static str, f64>,
}

/// Seconds per cause from nanoseconds indexed as CAUSE_NAMES (causes a recording of another
/// version has beyond them are counted as `other`).
fn by_cause(ns: &[u64]) -> BTreeMap<&'static str, f64> {
    let mut out: BTreeMap<&'static str, f64> = CAUSE_NAMES.iter().map(|c| (*c, 0.0)).collect();
    for (i, n) in ns.iter().enumerate() {
        let name = CAUSE_NAMES.get(i).copied().unwrap_or(CAUSE_NAMES[0]);
        *out.entry(name).or_default() += *n as f64 / 1e9;
    }
    out
}

fn add(into: &mut BTreeMap<&'static str, f64>, from: &BTreeMap<&'static str, f64>) {
    for (k, v) in from {
        *into.entry(k).or_default() += v;
    }
}

/// The thread's nanoseconds per cause in the interval: its counts less those of the previous
/// sample when the same thread held them (a thread new since, or one that took another's slot,
/// counts from 0).
fn interval_ns(prev: Option<&IowaitThreadSample>, cur: &IowaitThreadSample) -> Vec<u64> {
    match prev.filter(|p| p.pid == cur.pid) {
        Some(p) => cur
            .ns_by_cause
            .iter()
            .enumerate()
            .map(|(i, n)| n.saturating_sub(p.ns_by_cause.get(i).copied().unwrap_or(0)))
            .collect(),
        None => cur.ns_by_cause.clone(),
    }
}

/// None without the probes.
pub fn compute(prev: Option<&Sample>, cur: &Sample, secs: f64) -> Option<IowaitModel> {
    let s = cur.bpf.iowait.as_ref()?;
    let before: HashMap<u32, &IowaitThreadSample> = prev
        .and_then(|p| p.bpf.iowait.as_ref())
        .map(|p| p.threads.iter().map(|t| (t.tid, t)).collect())
        .unwrap_or_default();
    let pct = |wait_s: f64| if secs > 0.0 { (100.0 * wait_s / secs).min(100.0) } else { 0.0 };
    let mut procs: BTreeMap<u32, IowaitProcessModel> = BTreeMap::new();
    let mut cgroups: BTreeMap<u64, IowaitCgroupModel> = BTreeMap::new();
    for t in &s.threads {
        // Without a previous sample there is no interval: only the totals.
        let ns = if prev.is_some() {
            interval_ns(before.get(&t.tid).copied(), t)
        } else {
            vec![0; t.ns_by_cause.len()]
        };
        let causes = by_cause(&ns);
        let wait_s: f64 = causes.values().sum();
        let p = procs.entry(t.pid).or_insert_with(|| IowaitProcessModel {
            pid: t.pid,
            comm: t.comm.clone(),
            cgroup_id: t.cgroup_id,
            by_cause_s: by_cause(&[]),
            total_by_cause_s: by_cause(&[]),
            ..Default::default()
        });
        // The process's name is its main thread's.
        if t.tid == t.pid {
            p.comm = t.comm.clone();
        }
        add(&mut p.total_by_cause_s, &by_cause(&t.ns_by_cause));
        p.total_s += t.total_ns() as f64 / 1e9;
        if wait_s <= 0.0 {
            continue;
        }
        let thread_pct = pct(wait_s);
        if thread_pct > p.wait_pct || p.threads.is_empty() {
            p.wait_pct = thread_pct;
            p.cgroup_id = t.cgroup_id;
        }
        p.wait_s += wait_s;
        add(&mut p.by_cause_s, &causes);
        let c = cgroups.entry(t.cgroup_id).or_insert_with(|| IowaitCgroupModel {
            cgroup_id: t.cgroup_id,
            by_cause_s: by_cause(&[]),
            ..Default::default()
        });
        c.wait_s += wait_s;
        add(&mut c.by_cause_s, &causes);
        p.threads.push(IowaitThreadModel {
            tid: t.tid,
            comm: t.comm.clone(),
            wait_pct: thread_pct,
            wait_s,
            by_cause_s: causes,
        });
    }
    let desc = |a: f64, b: f64| b.total_cmp(&a);
    let mut processes: Vec<IowaitProcessModel> = procs.into_values().collect();
    for p in &mut processes {
        p.threads.sort_by(|a, b| desc(a.wait_s, b.wait_s).then(a.tid.cmp(&b.tid)));
    }
    processes.sort_by(|a, b| {
        desc(a.wait_pct, b.wait_pct)
            .then(desc(a.wait_s, b.wait_s))
            .then(desc(a.total_s, b.total_s))
            .then(a.pid.cmp(&b.pid))
    });
    let mut cgroups: Vec<IowaitCgroupModel> = cgroups.into_values().collect();
    cgroups.sort_by(|a, b| desc(a.wait_s, b.wait_s).then(a.cgroup_id.cmp(&b.cgroup_id)));
    Some(IowaitModel { processes, cgroups })
}

impl IowaitModel {
    /// The process `pid`'s row.
    pub fn process(&self, pid: u32) -> Option<&IowaitProcessModel> {
        self.processes.iter().find(|p| p.pid == pid)
    }
}

/// The cause with the most seconds in `by_cause_s` and its share of them (0..=1); None when no
/// cause has any (a tie goes to the cause named first in `CAUSE_NAMES`, `other` last).
pub fn top_cause(by_cause_s: &BTreeMap<&'static str, f64>) -> Option<(&'static str, f64)> {
    let all: f64 = by_cause_s.values().sum();
    let rank = |c: &str| {
        if c == CAUSE_NAMES[0] {
            usize::MAX
        } else {
            CAUSE_NAMES.iter().position(|n| *n == c).unwrap_or(usize::MAX - 1)
        }
    };
    by_cause_s
        .iter()
        .filter(|(_, s)| **s > 0.0)
        .max_by(|a, b| a.1.total_cmp(b.1).then(rank(b.0).cmp(&rank(a.0))))
        .map(|(c, s)| (*c, s / all))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::iowait::IowaitSample;

    fn thread(tid: u32, pid: u32, cgroup_id: u64, ns: &[u64]) -> IowaitThreadSample {
        IowaitThreadSample {
            tid,
            pid,
            comm: format!("t{tid}"),
            cgroup_id,
            ns_by_cause: ns.to_vec(),
            waits: 1,
        }
    }

    fn sample(threads: Vec<IowaitThreadSample>) -> Sample {
        let mut s = Sample::default();
        s.bpf.iowait = Some(IowaitSample { threads });
        s
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn busiest_thread_gives_the_percentage_and_threads_add_up_in_seconds() {
        // Process 10: thread 10 waits 0.5 s of page-cache reads, thread 11 0.25 s of sync and
        // 0.5 s of direct I/O, over 2 s. Thread 12 of process 20 is new in the interval.
        let prev = sample(vec![thread(10, 10, 1, &[0, S, 0, 0, 0]), thread(11, 10, 1, &[0, 0, S, 0, 0])]);
        let cur = sample(vec![
            thread(10, 10, 1, &[0, S + S / 2, 0, 0, 0]),
            thread(11, 10, 7, &[0, 0, S + S / 2, S / 4, 0]),
            thread(12, 20, 7, &[S / 10, 0, 0, 0, 0]),
        ]);
        let m = compute(Some(&prev), &cur, 2.0).unwrap();
        let p = m.process(10).unwrap();
        // Thread 11: 0.75 s of 2 s.
        assert!((p.wait_pct - 37.5).abs() < 1e-9, "{p:?}");
        assert_eq!(p.cgroup_id, 7);
        assert!((p.wait_s - 1.25).abs() < 1e-9);
        assert!((p.by_cause_s["page_cache_read"] - 0.5).abs() < 1e-9);
        assert!((p.by_cause_s["direct_io"] - 0.5).abs() < 1e-9);
        assert!((p.by_cause_s["sync"] - 0.25).abs() < 1e-9);
        assert!((p.total_s - 3.25).abs() < 1e-9);
        assert_eq!(p.threads.iter().map(|t| t.tid).collect::<Vec<_>>(), vec![11, 10]);
        assert_eq!(m.processes[0].pid, 10);
        let q = m.process(20).unwrap();
        assert!((q.wait_pct - 5.0).abs() < 1e-9);
        // cgroup 7: 0.75 + 0.1 s; cgroup 1: 0.5 s.
        assert_eq!(m.cgroups.iter().map(|c| c.cgroup_id).collect::<Vec<_>>(), vec![7, 1]);
        assert!((m.cgroups[0].wait_s - 0.85).abs() < 1e-9);
    }

    #[test]
    fn a_slot_taken_by_another_process_counts_from_zero_and_pct_is_capped() {
        let prev = sample(vec![thread(10, 10, 1, &[0, 5 * S])]);
        // Thread id 10 reused by process 30: its counts are its own.
        let cur = sample(vec![thread(10, 30, 1, &[0, 3 * S])]);
        let m = compute(Some(&prev), &cur, 2.0).unwrap();
        let p = m.process(30).unwrap();
        assert_eq!(p.wait_pct, 100.0);
        assert!((p.wait_s - 3.0).abs() < 1e-9);
        // No previous sample: totals only.
        let first = compute(None, &cur, 0.0).unwrap();
        assert_eq!(first.process(30).unwrap().wait_s, 0.0);
        assert!((first.process(30).unwrap().total_s - 3.0).abs() < 1e-9);
        assert!(compute(None, &Sample::default(), 0.0).is_none());
    }

    #[test]
    fn the_top_cause_is_the_longest_and_its_share_of_all() {
        let mut c = by_cause(&[S / 4, S / 4, 0, S / 2, 0]);
        assert_eq!(top_cause(&c), Some(("sync", 0.5)));
        // A tie: the named cause before `other`.
        c = by_cause(&[S, 0, 0, 0, S]);
        assert_eq!(top_cause(&c), Some(("dirty_throttle", 0.5)));
        assert_eq!(top_cause(&by_cause(&[])), None);
    }
}
