//! Process names for people: a process's comm, except a kernel workqueue worker's (kworker).
//!
//! /proc/PID/comm of a kworker is `kworker/POOL` followed by `-DESC` (or `+DESC` while it runs a
//! work item): DESC is the workqueue of the last work item it ran, or what that item named
//! (`set_worker_desc`). It changes from one work item to the next, so a comm keyed table (compare,
//! the baseline) would get a new row for every workqueue a worker happened to run. The name shown
//! keeps the pool (`kworker/u8:0`) and drops the workqueue, except where the workqueue says what the
//! worker does for whom: a loop device's worker (`[loop2]`: it reads and writes the loop device's
//! backing file) and writeback (`[flush-254:0]`, the flusher of that disk; `[writeback]`). A rescuer
//! (`kworker/R-WQ`, one per workqueue, its name fixed) keeps its name. See src/model/README.md
//! ("Processes").

use std::borrow::Cow;

/// The name a person reads for a process whose comm (as /proc/PID/comm shows it) is `comm` (see
/// the module comment): `kworker/u8:5-loop2` → `[loop2]`, `kworker/u8:1-flush-254:0` →
/// `[flush-254:0]`, `kworker/u8:0-kvfree_rcu_reclaim` → `kworker/u8:0`; anything else as it is.
pub fn person_name(comm: &str) -> Cow<'_, str> {
    let Some(rest) = comm.strip_prefix("kworker/") else { return Cow::Borrowed(comm) };
    if rest.starts_with("R-") {
        return Cow::Borrowed(comm);
    }
    let Some(cut) = rest.find(['-', '+']) else { return Cow::Borrowed(comm) };
    let (pool, desc) = (&rest[..cut], &rest[cut + 1..]);
    // A pool is "CPU:ID", "uNODE:ID" or either with "H" (high priority): anything else is not a
    // worker's name (a process may call itself "kworker/...").
    let pool_ok = !pool.is_empty() && pool.bytes().all(|b| b.is_ascii_digit() || b"u:H".contains(&b));
    if !pool_ok || desc.is_empty() {
        return Cow::Borrowed(comm);
    }
    if is_loop_worker(desc) || desc.starts_with("flush-") || desc == "writeback" {
        Cow::Owned(format!("[{desc}]"))
    } else {
        Cow::Borrowed(&comm[..comm.len() - desc.len() - 1])
    }
}

/// Whether a worker named `comm` (/proc/PID/comm) was last running a loop device's work:
/// `kworker/u8:5-loop2`, `kworker/u8:5+loop2`.
pub fn is_loop_worker_comm(comm: &str) -> bool {
    person_name(comm).strip_prefix('[').and_then(|s| s.strip_suffix(']')).is_some_and(is_loop_worker)
}

/// `loop` and a device number: the loop driver's per-device workqueue.
fn is_loop_worker(desc: &str) -> bool {
    desc.strip_prefix("loop").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names read from /proc/*/comm on a 6.18 kernel (the test VM, under cargo, dd on a loop
    /// device and a flusher at work), and what a person is shown.
    #[test]
    fn kworkers_lose_their_varying_workqueue_and_keep_what_says_who_they_work_for() {
        for (comm, shown) in [
            ("kworker/u8:0-kvfree_rcu_reclaim", "kworker/u8:0"),
            ("kworker/u8:3-events_unbound", "kworker/u8:3"),
            ("kworker/u8:6-ext4-rsv-conversion", "kworker/u8:6"),
            ("kworker/0:0-virtio_vsock", "kworker/0:0"),
            ("kworker/0:0H-events_highpri", "kworker/0:0H"),
            ("kworker/1:1H-kblockd", "kworker/1:1H"),
            ("kworker/0:1+events", "kworker/0:1"),
            ("kworker/u8:5-loop0", "[loop0]"),
            ("kworker/u8:3+loop2", "[loop2]"),
            ("kworker/u8:1-flush-254:0", "[flush-254:0]"),
            ("kworker/u8:2-writeback", "[writeback]"),
            // Rescuers: one per workqueue, named once.
            ("kworker/R-writeback", "kworker/R-writeback"),
            ("kworker/R-dio/vda", "kworker/R-dio/vda"),
            ("kworker/R-ext4-rsv-conversion", "kworker/R-ext4-rsv-conversion"),
            // Idle, never ran anything: no workqueue.
            ("kworker/u9:0", "kworker/u9:0"),
            // Not kworkers (or a process calling itself one): as they are.
            ("jbd2/vda1-8", "jbd2/vda1-8"),
            ("postgres", "postgres"),
            ("kworker/evil-loop2", "kworker/evil-loop2"),
            ("kworker/u8:1-", "kworker/u8:1-"),
            ("kworker", "kworker"),
            ("kworker/u8:5-loopy", "kworker/u8:5"),
        ] {
            assert_eq!(person_name(comm), shown, "{comm}");
        }
        assert!(is_loop_worker_comm("kworker/u8:5-loop0"));
        assert!(is_loop_worker_comm("kworker/u8:5+loop12"));
        assert!(!is_loop_worker_comm("kworker/u8:1-flush-7:2"));
        assert!(!is_loop_worker_comm("loop2"));
        assert!(!is_loop_worker_comm("kworker/u8:5-loop"));
    }

    /// Every kworker's name on this machine, read now: a name shown never holds a workqueue that
    /// is not a loop device's or writeback's, and a non-kworker is never renamed.
    #[test]
    fn every_comm_on_this_machine_gets_a_stable_name() {
        let Ok(dir) = std::fs::read_dir("/proc") else { return };
        let mut kworkers = 0;
        for e in dir.flatten() {
            let Ok(comm) = std::fs::read_to_string(e.path().join("comm")) else { continue };
            let comm = comm.trim_end_matches('\n');
            let shown = person_name(comm);
            if !comm.starts_with("kworker/") {
                assert_eq!(shown, comm);
                continue;
            }
            kworkers += 1;
            if comm.starts_with("kworker/R-") {
                assert_eq!(shown, comm);
            } else if let Some(inner) = shown.strip_prefix('[') {
                assert!(
                    inner.starts_with("loop") || inner.starts_with("flush-") || inner == "writeback]",
                    "{comm}"
                );
            } else {
                assert!(!shown.contains(['-', '+']), "{comm} → {shown}");
                assert!(comm.starts_with(&*shown), "{comm} → {shown}");
            }
        }
        // Linux always has kworkers; a /proc without them is not a Linux /proc.
        assert!(kworkers > 0 || !std::path::Path::new("/proc/self/comm").exists());
    }
}
