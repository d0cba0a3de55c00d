//! The cgroup view (`c`): its rows with the names people know, the process panes limited to one
//! cgroup (Enter, `C` clears), and what it says when the kernel or the privileges cannot feed it.

use crate::cache_box;
use crate::common;
use common::ui::press as key;

use std::time::Duration;

use crossterm::event::KeyCode;
use ioscope::model::cgroups::CgroupModel;
use ioscope::model::{cgroup_names, panes, Model};
use ioscope::sample::{BpfProgramStatus, BpfStatus};
use ioscope::ui::{Body, UiState};

fn screen(model: &Model, state: &UiState) -> String {
    common::ui::screen(model, state, 200, 40)
}

const POD: &str = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod8c5e3b4a_1f2d_4c6b_9a7e_0d1c2b3a4f5e.slice/cri-containerd-3f1c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a.scope";

fn status(get_pages_error: Option<&str>) -> BpfStatus {
    let prog = common::ui::program;
    BpfStatus {
        enabled: true,
        reason: None,
        programs: vec![
            prog("block:block_io_start", None),
            prog("block:block_rq_complete", None),
            prog("filemap:mm_filemap_get_pages", get_pages_error),
            prog("filemap:mm_filemap_add_to_page_cache", None),
        ]
        .into(),
    }
}

/// The cache box with two cgroups: a pod's container (its processes: the box's cache rows) and
/// a systemd service.
fn model(get_pages_error: Option<&str>) -> Model {
    let mut m = cache_box::with_cache();
    m.bpf.enabled = true;
    m.bpf.panes = panes::compute(&status(get_pages_error));
    let pod_pids: Vec<u32> = m.cache_processes.iter().map(|p| p.pid).collect();
    for p in &mut m.cache_processes {
        p.cgroup_id = 40;
    }
    let row = |id: u64, path: &str, read: f64, pids: Vec<u32>| CgroupModel {
        id,
        path: path.into(),
        name: cgroup_names::parse(path),
        pids,
        read_bytes_s: read,
        hit_pct: Some(12.5),
        ..Default::default()
    };
    m.cgroups = vec![row(40, POD, 50e6, pod_pids), row(41, "/system.slice/postgresql.service", 1e6, vec![1])];
    m
}

#[test]
fn the_view_names_pods_and_services_and_limits_the_panes_to_one() {
    let m = model(None);
    let mut s = UiState::new(Duration::from_secs(1), false);
    key(&mut s, KeyCode::Char('c'));
    let text = screen(&m, &s);
    assert!(text.contains("pod 8c5e3b4a-1f2d-4c6b-9a7e-0d1c2b3a4f5e ctr 3f1c2a9b8d7e"), "{text}");
    assert!(text.contains("postgresql.service"), "{text}");
    assert!(text.contains("kubernetes") && text.contains("12.5"), "{text}");
    // Enter on the first row (the pod, the busiest): the page-cache pane shows its processes only.
    s.clamp_selection(&m);
    key(&mut s, KeyCode::Enter);
    assert!(s.body != Body::Cgroups);
    // The page-cache pane zoomed, so that every row is in view.
    key(&mut s, KeyCode::Char('4'));
    key(&mut s, KeyCode::Char('z'));
    let limited = screen(&m, &s);
    assert!(limited.contains("cgroup pod 8c5e3b4a"), "{limited}");
    for p in &m.cache_processes {
        assert!(limited.contains(&p.pid.to_string()), "pid {} missing: {limited}", p.pid);
    }
    key(&mut s, KeyCode::Char('z'));
    // The service's cgroup has none of them.
    key(&mut s, KeyCode::Char('c'));
    key(&mut s, KeyCode::Down);
    s.clamp_selection(&m);
    key(&mut s, KeyCode::Enter);
    let other = s.views.page_cache.visible_rows(&s.context(&m));
    assert!(other.is_empty(), "{other:?}");
    key(&mut s, KeyCode::Char('C'));
    assert_eq!(s.views.page_cache.visible_rows(&s.context(&m)).len(), m.cache_processes.len());
}

#[test]
fn without_ebpf_the_view_says_what_it_needs() {
    let mut m = cache_box::with_cache();
    m.cgroups.clear();
    m.bpf.enabled = false;
    m.bpf.reason = Some("not root: eBPF needs CAP_BPF and CAP_PERFMON".into());
    m.bpf.panes =
        panes::compute(&BpfStatus { enabled: false, reason: m.bpf.reason.clone(), programs: vec![].into() });
    let mut s = UiState::new(Duration::from_secs(1), false);
    key(&mut s, KeyCode::Char('c'));
    let text = screen(&m, &s);
    assert!(text.contains("eBPF is off (not root: eBPF needs CAP_BPF and CAP_PERFMON)"), "{text}");
    assert!(text.contains("block and page-cache probes"), "{text}");
}

#[test]
fn a_missing_tracepoint_is_named_under_the_rows() {
    let m = model(Some("tracepoint is not available on this kernel"));
    let mut s = UiState::new(Duration::from_secs(1), false);
    key(&mut s, KeyCode::Char('c'));
    let text = screen(&m, &s);
    assert!(text.contains("cgroups: page cache, dirtying and throttling: needs tracepoint"), "{text}");
    assert!(text.contains("filemap:mm_filemap_get_pages (kernel 6.12+)"), "{text}");
}

/// The sync-call columns: p99 and the longest call, a running call's age when it is longer; and
/// without the sync probes, what they need under the rows.
#[test]
fn sync_call_latency_per_cgroup_and_what_it_lacks() {
    let mut m = model(None);
    m.cgroups[0].sync_calls = 120;
    m.cgroups[0].sync_p99_s = Some(0.012);
    m.cgroups[0].sync_max_s = Some(0.4);
    m.cgroups[1].sync_calls = 3;
    m.cgroups[1].sync_max_s = Some(0.2);
    m.cgroups[1].sync_running = 1;
    m.cgroups[1].sync_running_s = 4.25;
    // A kernel without syscall tracing: the sync programs are there, their events are not.
    let mut st = status(None);
    for tp in ["syscalls:sys_enter_fsync", "syscalls:sys_exit_fsync"] {
        std::sync::Arc::make_mut(&mut st.programs).push(BpfProgramStatus {
            program: "sync_enter".into(),
            tracepoint: tp.into(),
            error: Some(format!("tracepoint {tp} not found")),
            ..Default::default()
        });
    }
    m.bpf.panes = panes::compute(&st);
    let mut s = UiState::new(Duration::from_secs(1), false);
    key(&mut s, KeyCode::Char('c'));
    let text = screen(&m, &s);
    let line = |needle: &str| text.lines().find(|l| l.contains(needle)).unwrap_or_default().to_string();
    assert!(line("sync p99").contains("sync max"), "{text}");
    let pod = line("pod 8c5e3b4a");
    assert!(pod.contains("12 ms") && pod.contains("400 ms") && pod.contains("120"), "{pod}");
    assert!(line("postgresql").contains("▶4.2 s"), "{text}");
    // The status has no sync programs: the view says what the column needs.
    assert!(
        text.contains("sync calls (fsync and friends): needs tracepoint syscalls:sys_enter_fsync"),
        "{text}"
    );
    // `s` to the sync sort: the running call's cgroup first.
    for _ in 0..7 {
        key(&mut s, KeyCode::Char('s'));
    }
    assert_eq!(s.views.cgroups.sort.column, ioscope::ui::cgroups::CgroupSort::Sync);
    let rows: Vec<u64> = s.views.cgroups.visible(&s.context(&m)).iter().map(|c| c.id).collect();
    assert_eq!(rows, [41, 40]);
}

/// I/O wait per cgroup: the model's seconds and top cause, sorted with `s`; without the probes the
/// columns are not there.
#[test]
fn io_wait_per_cgroup_with_its_top_cause() {
    let mut m = model(None);
    assert!(!screen(&m, &UiState::new(Duration::from_secs(1), false)).contains("io wait"));
    m.interval_s = 1.0;
    m.iowait = Some(Default::default());
    let causes =
        |sync: f64, read: f64| Some([("other", 0.0), ("sync", sync), ("page_cache_read", read)].into());
    m.cgroups[0].io_wait_s = Some(0.3);
    m.cgroups[0].io_wait_by_cause_s = causes(0.0, 0.3);
    m.cgroups[1].io_wait_s = Some(2.4);
    m.cgroups[1].io_wait_by_cause_s = causes(1.8, 0.6);
    let mut s = UiState::new(Duration::from_secs(1), false);
    key(&mut s, KeyCode::Char('c'));
    let text = screen(&m, &s);
    let line = |needle: &str| text.lines().find(|l| l.contains(needle)).unwrap_or_default().to_string();
    assert!(line("sync max").contains("io wait") && line("sync max").contains("wait cause"), "{text}");
    assert!(
        line("pod 8c5e3b4a").contains("300 ms") && line("pod 8c5e3b4a").contains("cache read 100%"),
        "{text}"
    );
    assert!(line("postgresql").contains("2.4 s") && line("postgresql").contains("sync 75%"), "{text}");
    for _ in 0..8 {
        key(&mut s, KeyCode::Char('s'));
    }
    assert_eq!(s.views.cgroups.sort.column, ioscope::ui::cgroups::CgroupSort::IoWait);
    let rows: Vec<u64> = s.views.cgroups.visible(&s.context(&m)).iter().map(|c| c.id).collect();
    assert_eq!(rows, [41, 40]);
}

/// The file cache beside the memory limit: a cgroup at its 300M limit says so, one without a
/// limit says `none`, one without memory.stat shows neither.
#[test]
fn file_cache_beside_the_memory_limit() {
    let mut m = model(None);
    let memory = |limit| ioscope::model::cgroups::CgroupMemoryModel {
        source: "memory v1".into(),
        file: 292 << 20,
        limit,
        ..Default::default()
    };
    m.cgroups[0].memory = Some(memory(Some(300 << 20)));
    m.cgroups[1].memory = Some(memory(None));
    let mut s = UiState::new(Duration::from_secs(1), false);
    key(&mut s, KeyCode::Char('c'));
    let text = common::ui::screen(&m, &s, 400, 40);
    let line = |needle: &str| text.lines().find(|l| l.contains(needle)).unwrap_or_default().to_string();
    assert!(line("mem psi").contains("mem limit"), "{text}");
    let pod = line("pod 8c5e3b4a");
    assert!(pod.contains("292M") && pod.contains("300M"), "{pod}");
    let pg = line("postgresql");
    assert!(pg.contains("292M") && pg.contains("none"), "{pg}");
}
