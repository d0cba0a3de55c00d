//! Process pane (procfs only): per-process I/O rates from /proc/PID/io, each process's own I/O,
//! and the I/O of the processes that exited in the interval (see [`compute`]).

use serde::Serialize;

use std::collections::HashMap;

use super::counter::{delta, per_second};
use crate::sample::{ProcIoCounters, ProcessIo, Sample};

/// JSON: `processes[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProcessModel {
    pub pid: u32,
    pub comm: std::sync::Arc<str>,
    /// Bytes this process caused to be fetched from storage, per second (read_bytes).
    pub read_bytes_s: f64,
    /// Bytes this process caused to be sent to storage (dirtied), per second (write_bytes).
    pub write_bytes_s: f64,
    pub rchar_s: f64,
    pub wchar_s: f64,
    pub cancelled_write_bytes_s: f64,
    /// Estimate of bytes read served from the page cache: max(0, Δrchar − Δread_bytes) per second.
    /// An estimate: rchar also counts pipes, sockets and ttys.
    pub cache_estimate_bytes_s: f64,
    /// False when /proc/PID/io was unreadable (another user's process without privileges).
    pub io_readable: bool,
    /// The parent's pid (0 when unknown); on an exited row, the process whose /proc/PID/io
    /// received the exited processes' counters.
    pub ppid: u32,
    /// An exited row: the I/O of `ppid`'s children that exited in the interval (and of its
    /// threads that ended, after their last read), not `ppid`'s own. `pid` and `comm` are the
    /// child's when one child seen before left (pid 0 when several did, comm [`EXITED`] when
    /// their names differ or none was seen: a child that lived less than a sample).
    pub exited: bool,
    /// On an exited row, the children of `ppid` seen before that left in the interval.
    pub exited_pids: Vec<u32>,
    /// The process's effective uid (the owner of /proc/PID) and its name from /etc/passwd (the
    /// uid as a number when not there); null when not read (older recordings, exited rows).
    pub uid: Option<u32>,
    pub user: Option<std::sync::Arc<str>>,
    /// /proc/PID/cmdline, arguments joined by spaces (`postgres: checkpointer`, `fio --name=a`);
    /// "" for a kernel thread; null until read (off the sampling thread: a process's first
    /// sample may lack it). Untrusted text, escaped by every view.
    pub cmdline: Option<std::sync::Arc<str>>,
}

/// The comm of an exited row whose children's names are not known or differ.
pub const EXITED: &str = "<exited>";

impl ProcessModel {
    /// The name a person reads: the comm, a kworker's without its varying workqueue
    /// ([`super::names::person_name`]).
    pub fn name(&self) -> std::borrow::Cow<'_, str> {
        super::names::person_name(&self.comm)
    }

    /// Whether the process did I/O in the interval: any rate above zero.
    pub fn active(&self) -> bool {
        [self.read_bytes_s, self.write_bytes_s, self.rchar_s, self.wchar_s, self.cancelled_write_bytes_s]
            .iter()
            .any(|&r| r > 0.0)
    }
}

/// JSON's `processes[]`: the processes with I/O in the interval ([`ProcessModel::active`]).
pub fn serialize_active<S: serde::Serializer>(processes: &[ProcessModel], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(processes.iter().filter(|p| p.active()))
}

/// One row per process of `cur`, and one exited row per process that received exited
/// children's counters, ordered by pid (the UI sorts as it likes).
///
/// Rates are Δcounter / Δt of the process's own counters (`ProcessIo::own`: its threads' own
/// counters, ended threads' last reads included), or of /proc/PID/io where those were not read
/// (older recordings); the page-cache estimate is `max(0, Δrchar − Δread_bytes) / Δt`. A process
/// is the same one only if both pid and start time match (a reused pid is a new process); a
/// process that started since the previous sample (its start time, [`started_after`]) has all
/// its counters as the interval's; another new process, or one whose io was unreadable in either
/// sample, has zero rates.
///
/// What /proc/PID/io gained beyond the process's own counters is what the kernel added when
/// the process reaped children (their totals) or its threads ended (their counters after their
/// last read): `max(0, Δ(io − own) − slack)` per counter, less the last counters seen of each
/// child that left the list in the interval (its rows showed those already; a child whose parent
/// left too counts against its nearest listed ancestor). What remains is an exited row of its own.
pub fn compute(prev: Option<&Sample>, cur: &Sample, secs: f64) -> Vec<ProcessModel> {
    let before: HashMap<u32, &ProcessIo> =
        prev.map(|p| p.processes.iter().map(|p| (p.pid, p)).collect()).unwrap_or_default();
    let now: HashMap<u32, &ProcessIo> = cur.processes.iter().map(|p| (p.pid, p)).collect();
    let listed = |p: &ProcessIo| now.get(&p.pid).is_some_and(|c| c.start_ticks == p.start_ticks);
    // The processes that left, by their nearest ancestor still listed.
    let mut gone_by_ancestor: HashMap<u32, Vec<&ProcessIo>> = HashMap::new();
    for gone in prev.iter().flat_map(|s| &s.processes).filter(|p| !listed(p)) {
        let mut ppid = gone.ppid;
        for _ in 0..64 {
            match before.get(&ppid) {
                Some(a) if ppid != 0 && !listed(a) => ppid = a.ppid,
                _ => break,
            }
        }
        if ppid != 0 {
            gone_by_ancestor.entry(ppid).or_default().push(gone);
        }
    }
    let mut out: Vec<ProcessModel> = Vec::with_capacity(cur.processes.len() + 4);
    for c in &cur.processes {
        let same = before.get(&c.pid).filter(|p| p.start_ticks == c.start_ticks);
        let mut model = ProcessModel {
            pid: c.pid,
            comm: c.comm.clone(),
            io_readable: c.io.is_some(),
            ppid: c.ppid,
            uid: c.uid,
            user: c.user.clone(),
            cmdline: c.cmdline.clone(),
            ..Default::default()
        };
        let mut exited = None;
        if let (Some(p), Some(c_io)) = (same, c.io.as_ref()) {
            if let Some(p_io) = p.io.as_ref() {
                let secs = read_secs(prev, cur, p, c, secs);
                match (p.own.as_ref(), c.own.as_ref()) {
                    (Some(p_own), Some(c_own)) => {
                        fill_rates(&mut model, p_own, c_own, secs);
                        let gone = gone_by_ancestor.get(&c.pid).map(Vec::as_slice).unwrap_or_default();
                        exited = exited_row(c, (p_io, p_own), (c_io, c_own), gone, secs);
                    }
                    _ => fill_rates(&mut model, p_io, c_io, secs),
                }
            }
        } else if let (Some(prev), None) = (prev, same) {
            // Started since the previous sample: all its counters are this interval's.
            if started_after(prev, c) {
                if let Some(c_io) = c.own.as_ref().or(c.io.as_ref()) {
                    fill_rates(&mut model, &ProcIoCounters::default(), c_io, secs);
                }
            }
        }
        out.push(model);
        out.extend(exited);
    }
    out.sort_by_key(|p| (p.pid, p.exited, p.ppid));
    out
}

/// Whether `p` started after `prev` was taken: its start time (clock ticks of 1/100 s since boot,
/// CLOCK_BOOTTIME) at or after the previous sample's uptime (the same clock, read just before that
/// sample's processes).
fn started_after(prev: &Sample, p: &ProcessIo) -> bool {
    prev.host.uptime_s > 0.0 && p.start_ticks as f64 / 100.0 >= prev.host.uptime_s
}

/// The exited row of `parent` (see [`compute`]), None when nothing remains.
fn exited_row(
    parent: &ProcessIo,
    (p_io, p_own): (&ProcIoCounters, &ProcIoCounters),
    (c_io, c_own): (&ProcIoCounters, &ProcIoCounters),
    gone: &[&ProcessIo],
    secs: f64,
) -> Option<ProcessModel> {
    let slack = parent.own_slack.clone().unwrap_or_default();
    let before = p_io.saturating_sub(p_own);
    let after = c_io.saturating_sub(c_own).saturating_sub(&slack);
    let mut added = after.saturating_sub(&before);
    for g in gone {
        added = added.saturating_sub(g.io.as_ref().unwrap_or(&ProcIoCounters::default()));
    }
    if added.is_zero() {
        return None;
    }
    let (pid, comm): (u32, std::sync::Arc<str>) = match gone {
        [one] => (one.pid, one.comm.clone()),
        [first, rest @ ..] if rest.iter().all(|g| g.comm == first.comm) => (0, first.comm.clone()),
        _ => (0, EXITED.into()),
    };
    let mut row = ProcessModel {
        pid,
        comm,
        io_readable: true,
        ppid: parent.pid,
        exited: true,
        exited_pids: gone.iter().map(|g| g.pid).collect(),
        ..Default::default()
    };
    if let [one] = gone {
        (row.uid, row.user, row.cmdline) = (one.uid, one.user.clone(), one.cmdline.clone());
    }
    fill_rates(&mut row, &ProcIoCounters::default(), &added, secs);
    // Syscall counts alone (no bytes) make no row: the rates are of bytes.
    row.active().then_some(row)
}

/// The seconds between a process's two reads of /proc/PID/io: the samples' `secs` unless either
/// read was carried from an earlier sample (`ProcessIo::io_read_ns`), then the time between the
/// reads themselves (0 when both are the same read: no rate, the counters did not change).
fn read_secs(prev: Option<&Sample>, cur: &Sample, p: &ProcessIo, c: &ProcessIo, secs: f64) -> f64 {
    if p.io_read_ns.is_none() && c.io_read_ns.is_none() {
        return secs;
    }
    let prev_ns = p.io_read_ns.or(prev.map(|s| s.mono_ns)).unwrap_or(0);
    let cur_ns = c.io_read_ns.unwrap_or(cur.mono_ns);
    cur_ns.saturating_sub(prev_ns) as f64 / 1e9
}

fn fill_rates(m: &mut ProcessModel, p: &ProcIoCounters, c: &ProcIoCounters, secs: f64) {
    let read_bytes = delta(p.read_bytes, c.read_bytes);
    let rchar = delta(p.rchar, c.rchar);
    m.read_bytes_s = per_second(read_bytes, secs);
    m.write_bytes_s = per_second(delta(p.write_bytes, c.write_bytes), secs);
    m.rchar_s = per_second(rchar, secs);
    m.wchar_s = per_second(delta(p.wchar, c.wchar), secs);
    m.cancelled_write_bytes_s = per_second(delta(p.cancelled_write_bytes, c.cancelled_write_bytes), secs);
    m.cache_estimate_bytes_s = per_second(rchar.saturating_sub(read_bytes), secs);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(mono_ns: u64, wchar: u64, io_read_ns: Option<u64>) -> Sample {
        let io = ProcIoCounters { wchar, ..Default::default() };
        let p = ProcessIo {
            pid: 7,
            comm: "w".into(),
            start_ticks: 3,
            io: Some(io),
            io_read_ns,
            ..Default::default()
        };
        Sample { mono_ns, processes: vec![p], ..Default::default() }
    }

    /// A process whose counters were carried between a sampler's full passes: no rate while
    /// carried, and at its next read the delta over the time since its last read (1 s), not over
    /// the interval (0.1 s).
    #[test]
    fn carried_counters_are_divided_by_the_time_between_their_reads() {
        let s0 = sample(1_000_000_000, 1000, None);
        let s1 = sample(1_100_000_000, 1000, Some(1_000_000_000));
        let s9 = sample(1_900_000_000, 1000, Some(1_000_000_000));
        let s10 = sample(2_000_000_000, 5000, None);
        assert_eq!(compute(Some(&s0), &s1, 0.1)[0].wchar_s, 0.0);
        assert_eq!(compute(Some(&s1), &s9, 0.1)[0].wchar_s, 0.0);
        assert_eq!(compute(Some(&s9), &s10, 0.1)[0].wchar_s, 4000.0);
        // Both read in their samples: the samples' interval, as before.
        let a = sample(0, 0, None);
        let b = sample(500_000_000, 100, None);
        assert_eq!(compute(Some(&a), &b, 0.5)[0].wchar_s, 200.0);
    }

    const MIB: u64 = 1 << 20;

    fn reads(read_bytes: u64, rchar: u64) -> ProcIoCounters {
        ProcIoCounters { read_bytes, rchar, syscr: rchar / 4096, ..Default::default() }
    }

    /// A process whose own counters were read: `io` its /proc/PID/io, `own` its threads' sum.
    fn proc(pid: u32, ppid: u32, comm: &str, io: ProcIoCounters, own: ProcIoCounters) -> ProcessIo {
        ProcessIo {
            pid,
            ppid,
            comm: comm.into(),
            start_ticks: u64::from(pid) * 10,
            io: Some(io),
            own: Some(own),
            ..Default::default()
        }
    }

    fn at(mono_ns: u64, processes: Vec<ProcessIo>) -> Sample {
        Sample { mono_ns, processes, ..Default::default() }
    }

    fn row(rows: &[ProcessModel], pid: u32, exited: bool) -> &ProcessModel {
        rows.iter().find(|p| p.pid == pid && p.exited == exited).expect("row")
    }

    /// `bash -c 'cat FILE; sleep 4'`: cat read 256 MiB between two samples and was never seen;
    /// bash reaped it, so bash's /proc/PID/io gained cat's totals while bash's own thread read
    /// 10 bytes. bash shows its 10 bytes, the exited row cat's 256 MiB, with bash as its parent.
    #[test]
    fn a_reaped_child_never_seen_is_an_exited_row_not_its_parents_rate() {
        let bash0 = reads(0, 5000);
        let prev = at(0, vec![proc(100, 1, "bash", bash0.clone(), bash0.clone())]);
        let own = reads(0, 5010);
        let io = own.saturating_add(&reads(256 * MIB, 256 * MIB + 900));
        let cur = at(2_000_000_000, vec![proc(100, 1, "bash", io, own)]);
        let rows = compute(Some(&prev), &cur, 2.0);
        assert_eq!(rows.len(), 2, "{rows:?}");
        let bash = row(&rows, 100, false);
        assert_eq!((bash.read_bytes_s, bash.rchar_s, bash.exited), (0.0, 5.0, false));
        let cat = row(&rows, 0, true);
        assert_eq!((cat.ppid, &*cat.comm, cat.exited_pids.len()), (100, EXITED, 0));
        assert_eq!(cat.read_bytes_s, (128 * MIB) as f64);
        assert_eq!(cat.rchar_s, (128 * MIB + 450) as f64);
        assert!(cat.active());
        // Nothing more reaped in the next interval: no exited row.
        let next = at(3_000_000_000, cur.processes.clone());
        assert_eq!(compute(Some(&cur), &next, 1.0).len(), 1);
    }

    /// pgbench disconnects: a backend seen with 6.4 GiB read reads 100 MiB more and exits; the
    /// postmaster's /proc/PID/io gains its 6.5 GiB. The postmaster shows nothing, the exited row
    /// (the backend's pid and name) the last 100 MiB.
    #[test]
    fn a_child_seen_before_it_left_shows_only_what_it_did_since() {
        let pm = reads(0, 1000);
        let backend = reads(6400 * MIB, 6400 * MIB);
        let prev = at(
            0,
            vec![
                proc(50, 1, "postgres", pm.clone(), pm.clone()),
                proc(60, 50, "postgres", backend.clone(), backend),
            ],
        );
        let pm_io = pm.saturating_add(&reads(6500 * MIB, 6500 * MIB));
        let cur = at(1_000_000_000, vec![proc(50, 1, "postgres", pm_io, pm)]);
        let rows = compute(Some(&prev), &cur, 1.0);
        assert_eq!(row(&rows, 50, false).read_bytes_s, 0.0);
        let exited = row(&rows, 60, true);
        assert_eq!((exited.ppid, &*exited.comm, exited.exited_pids.as_slice()), (50, "postgres", &[60][..]));
        assert_eq!(exited.read_bytes_s, (100 * MIB) as f64);
        // Per command, postgres read what its backends read, once.
        let total: f64 = rows.iter().filter(|p| &*p.comm == "postgres").map(|p| p.read_bytes_s).sum();
        assert_eq!(total, (100 * MIB) as f64);
    }

    /// An interactive shell runs `bash -c 'cat F; cat G'`: bash (seen, 10 bytes) and one cat (seen,
    /// 100 MiB) leave in the same interval, the second cat never seen. The shell gained bash's
    /// totals (bash's own 12 bytes, the first cat's 150 MiB, the second's 30 MiB); the exited row
    /// under the shell holds what they did since last seen: 2 bytes and 80 MiB.
    #[test]
    fn children_leaving_with_their_parent_count_against_the_nearest_listed_ancestor() {
        let sh = reads(0, 0);
        let prev = at(
            0,
            vec![
                proc(10, 1, "sh", sh.clone(), sh.clone()),
                proc(20, 10, "bash", reads(0, 10), reads(0, 10)),
                proc(30, 20, "cat", reads(100 * MIB, 100 * MIB), reads(100 * MIB, 100 * MIB)),
            ],
        );
        let sh_io = reads(180 * MIB, 180 * MIB + 12);
        let cur = at(1_000_000_000, vec![proc(10, 1, "sh", sh_io, sh)]);
        let rows = compute(Some(&prev), &cur, 1.0);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(row(&rows, 10, false).rchar_s, 0.0);
        let exited = row(&rows, 0, true);
        assert_eq!((exited.ppid, &*exited.comm), (10, EXITED), "two names: none chosen");
        assert_eq!(exited.exited_pids, vec![20, 30]);
        assert_eq!((exited.read_bytes_s, exited.rchar_s), ((80 * MIB) as f64, (80 * MIB + 2) as f64));
    }

    /// A busy process whose io moved while its threads were read: the slack is not taken for an
    /// exited child; a child that was reaped without giving its counters (SIGCHLD ignored) takes
    /// nothing from its parent.
    #[test]
    fn io_moving_during_the_read_and_autoreaped_children_make_no_exited_row() {
        let prev = at(0, vec![proc(7, 1, "dd", reads(1000, 1000), reads(1000, 1000))]);
        let mut busy = proc(7, 1, "dd", reads(1_000_000, 1_000_000), reads(999_000, 999_000));
        busy.own_slack = Some(reads(1000, 1000));
        let cur = at(1_000_000_000, vec![busy]);
        let rows = compute(Some(&prev), &cur, 1.0);
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].read_bytes_s, 998_000.0);

        let parent = reads(0, 0);
        let prev = at(
            0,
            vec![
                proc(7, 1, "d", parent.clone(), parent.clone()),
                proc(8, 7, "w", reads(MIB, MIB), reads(MIB, MIB)),
            ],
        );
        let cur = at(1_000_000_000, vec![proc(7, 1, "d", parent.clone(), parent)]);
        assert_eq!(compute(Some(&prev), &cur, 1.0).len(), 1);
    }

    /// Without `own` (an older recording, unreadable threads) the rate is /proc/PID/io's, as
    /// before, and no exited row is made.
    #[test]
    fn without_own_counters_the_rate_is_proc_pid_io() {
        let mut p0 = proc(7, 1, "x", reads(0, 0), reads(0, 0));
        let mut p1 = proc(7, 1, "x", reads(MIB, MIB), reads(0, 0));
        p0.own = None;
        p1.own = None;
        let rows = compute(Some(&at(0, vec![p0])), &at(1_000_000_000, vec![p1]), 1.0);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].read_bytes_s, MIB as f64);
    }

    /// A child that started since the previous sample shows all its counters in its first
    /// interval (then, gone, only what it did since): each of its bytes is shown once. One that
    /// was only not listed before (between full passes) has no rate yet.
    #[test]
    fn a_process_started_in_the_interval_shows_all_its_counters() {
        let sh = reads(0, 0);
        let mut prev = at(0, vec![proc(10, 1, "sh", sh.clone(), sh.clone())]);
        prev.host.uptime_s = 500.0;
        // Started at 500.5 s of uptime, half a second after the previous sample.
        let mut cat = proc(30, 10, "cat", reads(40 * MIB, 40 * MIB), reads(40 * MIB, 40 * MIB));
        cat.start_ticks = 50_050;
        let mut old = proc(31, 10, "old", reads(MIB, MIB), reads(MIB, MIB));
        old.start_ticks = 10;
        let mut cur = at(1_000_000_000, vec![proc(10, 1, "sh", sh.clone(), sh.clone()), cat, old]);
        cur.host.uptime_s = 501.0;
        let rows = compute(Some(&prev), &cur, 1.0);
        assert_eq!(row(&rows, 30, false).read_bytes_s, (40 * MIB) as f64);
        assert_eq!(row(&rows, 31, false).read_bytes_s, 0.0);
        // cat reads 24 MiB more and is reaped: sh gains its 64 MiB, the exited row shows 24.
        let old = cur.processes[2].clone();
        let mut next = at(2_000_000_000, vec![proc(10, 1, "sh", reads(64 * MIB, 64 * MIB), sh), old]);
        next.host.uptime_s = 502.0;
        let rows = compute(Some(&cur), &next, 1.0);
        assert_eq!(row(&rows, 30, true).read_bytes_s, (24 * MIB) as f64);
        assert_eq!(row(&rows, 10, false).read_bytes_s, 0.0);
    }
}
