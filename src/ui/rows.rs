//! Which rows the devices and process tables show, and in what order. Pure functions of the model
//! and the UI state, shared by the renderer and the selection clamping.

use std::cmp::Ordering;

use crate::model::{DeviceModel, Model, ProcessModel};
use crate::ui::state::{ProcSort, UiState};

/// How far a list-moving key moves the selection (↓ j, ↑ k, Home g, End G); None for any other key.
pub fn list_step(code: crossterm::event::KeyCode) -> Option<i64> {
    use crossterm::event::KeyCode;
    match code {
        KeyCode::Down | KeyCode::Char('j') => Some(1),
        KeyCode::Up | KeyCode::Char('k') => Some(-1),
        KeyCode::Home | KeyCode::Char('g') => Some(i64::MIN / 2),
        KeyCode::End | KeyCode::Char('G') => Some(i64::MAX / 2),
        _ => None,
    }
}

/// Whole disks (plus partitions with `P`), hiding virtual devices that did no I/O (unless `i`).
/// Model order is kept: it follows /proc/diskstats, so rows do not jump between samples.
pub fn visible_devices<'a>(model: &'a Model, state: &UiState) -> Vec<&'a DeviceModel> {
    model
        .devices
        .iter()
        .filter(|d| state.views.devices.show_partitions || !d.is_partition)
        .filter(|d| state.views.devices.show_idle_virtual || !(d.is_virtual && d.idle))
        .collect()
}

/// How many devices the current toggles hide (shown in the pane title so nothing vanishes silently).
pub fn hidden_devices(model: &Model, state: &UiState) -> usize {
    model.devices.len() - visible_devices(model, state).len()
}

/// True when the process did any I/O in the interval (disk or syscall level).
pub fn has_io(p: &ProcessModel) -> bool {
    p.read_bytes_s + p.write_bytes_s + p.rchar_s + p.wchar_s + p.cancelled_write_bytes_s > 0.0
}

/// True when `filter` is a case-insensitive substring of the comm or a substring of the pid.
pub fn matches_filter(p: &ProcessModel, filter: &str) -> bool {
    if filter.is_empty() {
        return true;
    }
    let needle = filter.to_lowercase();
    p.comm.to_lowercase().contains(&needle) || p.pid.to_string().contains(&needle)
}

/// Processes with I/O (all with `a`), or, when a filter is set, every process that matches it, idle or
/// not (the user asked for it by name). Sorted by the chosen column; ties by pid for stable rows.
pub fn visible_processes<'a>(model: &'a Model, state: &UiState) -> Vec<&'a ProcessModel> {
    let mut rows: Vec<&ProcessModel> = model
        .processes
        .iter()
        .filter(|p| {
            if state.filter.is_empty() {
                state.views.processes.show_all || has_io(p)
            } else {
                matches_filter(p, &state.filter)
            }
        })
        .filter(|p| crate::ui::cgroups::admits(model, state, p.pid, None))
        .collect();
    let descending = state.views.processes.descending();
    rows.sort_by(|a, b| {
        let ord = compare(a, b, state.views.processes.sort);
        let ord = if descending { ord.reverse() } else { ord };
        ord.then(a.pid.cmp(&b.pid))
    });
    rows
}

fn compare(a: &ProcessModel, b: &ProcessModel, sort: ProcSort) -> Ordering {
    let key = |p: &ProcessModel| -> f64 {
        match sort {
            ProcSort::Disk => p.read_bytes_s + p.write_bytes_s,
            ProcSort::Read => p.read_bytes_s,
            ProcSort::Write => p.write_bytes_s,
            ProcSort::Rchar => p.rchar_s,
            ProcSort::Wchar => p.wchar_s,
            ProcSort::Cancelled => p.cancelled_write_bytes_s,
            ProcSort::CacheEstimate => p.cache_estimate_bytes_s,
            ProcSort::Pid => p.pid as f64,
            ProcSort::Comm => 0.0,
        }
    };
    match sort {
        ProcSort::Comm => a.comm.cmp(&b.comm),
        _ => key(a).total_cmp(&key(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn proc(pid: u32, comm: &str, read: f64, write: f64) -> ProcessModel {
        ProcessModel {
            pid,
            comm: comm.into(),
            read_bytes_s: read,
            write_bytes_s: write,
            io_readable: true,
            ..Default::default()
        }
    }

    fn dev(name: &str, is_partition: bool, is_virtual: bool, idle: bool) -> DeviceModel {
        DeviceModel { name: name.into(), is_partition, is_virtual, idle, ..Default::default() }
    }

    fn state() -> UiState {
        UiState::new(Duration::from_secs(1), false)
    }

    fn pids(rows: &[&ProcessModel]) -> Vec<u32> {
        rows.iter().map(|p| p.pid).collect()
    }

    fn model() -> Model {
        Model {
            processes: vec![
                proc(10, "fio", 0.0, 100.0),
                proc(20, "postgres", 50.0, 10.0),
                proc(30, "sleep", 0.0, 0.0),
                proc(40, "Fiona", 200.0, 0.0),
                proc(1234, "kworker/u8:2", 0.0, 60.0),
            ],
            devices: vec![
                dev("vda", false, false, false),
                dev("vda1", true, false, false),
                dev("loop0", false, true, true),
                dev("loop1", false, true, false),
                dev("nvme0n1", false, false, true),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn default_sort_is_read_plus_write_descending_and_idle_processes_are_hidden() {
        let m = model();
        let s = state();
        // fio 100, postgres 60 (50+10), Fiona 200, kworker 60: ties broken by pid.
        assert_eq!(pids(&visible_processes(&m, &s)), vec![40, 10, 20, 1234]);
    }

    #[test]
    fn reverse_and_other_columns() {
        let m = model();
        let mut s = state();
        s.views.processes.reversed = true;
        assert_eq!(pids(&visible_processes(&m, &s)), vec![20, 1234, 10, 40]);
        s.views.processes.reversed = false;
        s.views.processes.sort = ProcSort::Write;
        assert_eq!(pids(&visible_processes(&m, &s)), vec![10, 1234, 20, 40]);
        s.views.processes.sort = ProcSort::Comm;
        // Byte order: upper case sorts before lower case.
        assert_eq!(pids(&visible_processes(&m, &s)), vec![40, 10, 1234, 20]);
        s.views.processes.sort = ProcSort::Pid;
        s.views.processes.show_all = true;
        assert_eq!(pids(&visible_processes(&m, &s)), vec![10, 20, 30, 40, 1234]);
    }

    #[test]
    fn filter_matches_comm_case_insensitively_or_pid_and_includes_idle_matches() {
        let m = model();
        let mut s = state();
        s.filter = "FI".into();
        assert_eq!(pids(&visible_processes(&m, &s)), vec![40, 10]);
        s.filter = "123".into();
        assert_eq!(pids(&visible_processes(&m, &s)), vec![1234]);
        s.filter = "sleep".into();
        assert_eq!(pids(&visible_processes(&m, &s)), vec![30], "an idle match is still shown");
        s.filter = "nothing".into();
        assert!(visible_processes(&m, &s).is_empty());
    }

    #[test]
    fn devices_hide_partitions_and_idle_virtual_by_default() {
        let m = model();
        let mut s = state();
        let names = |s: &UiState| visible_devices(&m, s).iter().map(|d| d.name.clone()).collect::<Vec<_>>();
        // An idle physical disk stays; a busy loop device stays.
        assert_eq!(names(&s), vec!["vda", "loop1", "nvme0n1"]);
        assert_eq!(hidden_devices(&m, &s), 2);
        s.views.devices.show_partitions = true;
        assert_eq!(names(&s), vec!["vda", "vda1", "loop1", "nvme0n1"]);
        s.views.devices.show_idle_virtual = true;
        assert_eq!(names(&s), vec!["vda", "vda1", "loop0", "loop1", "nvme0n1"]);
        assert_eq!(hidden_devices(&m, &s), 0);
    }
}
