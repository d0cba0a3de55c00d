//! Which eBPF-fed panes (and figures of panes) the running kernel feeds, and for the others what
//! is missing and why: a pane whose programs did not attach says so, in the TUI and in the JSON
//! (`bpf.panes[]`), instead of showing zeros or "-".
//!
//! A pure function of the programs' attach status. Each pane needs one or more events; a need is
//! met when a program on any of its alternatives attached (an alternative is what a program's
//! status names in `tracepoint`: a tracepoint "category:event", or a fallback's own name).

use std::sync::Arc;

use serde::Serialize;

use crate::sample::{BpfProgramStatus, BpfStatus};

/// One pane's (or figure's) state.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PaneStatus {
    /// Stable id: `devices_bpf`, `io_processes`, `cache`, `files`, `files_readahead`, `files_writeback_ext4`,
    /// `files_writeback_iomap`, `direct_io`, `readahead`, `cgroups_io`, `cgroups_cache`, `syncs`,
    /// `syncs_io_uring`.
    pub pane: &'static str,
    /// What the user sees it as.
    pub title: &'static str,
    /// Every need is met: the figures are live.
    pub live: bool,
    /// Fed (in part) by a fallback for a tracepoint the kernel lacks: `sources` says which.
    pub fallback: bool,
    /// The events that feed it (the first attached alternative of each need).
    pub sources: Vec<String>,
    /// Needs not met: the event wanted (the first alternative), each once.
    pub missing: Vec<String>,
    /// Why it is not live, for the user: "needs tracepoint readahead:page_cache_ra_order (kernel
    /// 6.18+): <attach error>"; null when live.
    pub reason: Option<String>,
}

/// A need: any one of these events.
type Need = &'static [&'static str];

/// (pane, title, needs). Alternatives are tried in order; fallbacks add theirs after the
/// tracepoint.
const PANES: &[(&str, &str, &[Need])] = &[
    ("devices_bpf", "devices: eBPF request counts", &[&["block:block_rq_issue"]]),
    (
        "io_processes",
        "disk I/O by submitting process",
        &[&["block:block_io_start"], &["block:block_rq_complete"]],
    ),
    (
        "cache",
        "page cache: accesses and hit %",
        &[&["filemap:mm_filemap_get_pages"], &["filemap:mm_filemap_add_to_page_cache"]],
    ),
    (
        "files",
        "files: disk reads and dirtied bytes",
        &[&["filemap:mm_filemap_add_to_page_cache"], &["writeback:writeback_dirty_folio"]],
    ),
    // Only the files' own program on it counts (not the readahead pane's): see [`only`].
    ("files_readahead", "files: readahead split of reads", &[&["readahead:page_cache_sync_ra"]]),
    ("files_writeback_ext4", "files: writeback on ext4", &[&["ext4:ext4_writepages_result"]]),
    (
        "files_writeback_iomap",
        "files: writeback on iomap filesystems (xfs)",
        &[&["iomap:iomap_writeback_folio"]],
    ),
    ("direct_io", "direct I/O per file and process", &[&["iomap:iomap_dio_rw_begin"]]),
    (
        "readahead",
        "readahead",
        &[&["readahead:page_cache_ra_order"], &["filemap:mm_filemap_add_to_page_cache"]],
    ),
    (
        "cgroups_io",
        "cgroups: disk I/O by submitter",
        &[&["block:block_io_start"], &["block:block_rq_complete"]],
    ),
    (
        "cgroups_cache",
        "cgroups: page cache, dirtying and throttling",
        &[&["filemap:mm_filemap_get_pages"], &["filemap:mm_filemap_add_to_page_cache"]],
    ),
    (
        "syncs",
        "sync calls (fsync and friends)",
        &[&["syscalls:sys_enter_fsync"], &["syscalls:sys_exit_fsync"]],
    ),
    (
        "syncs_io_uring",
        "io_uring sync calls",
        &[&["io_uring:io_uring_submit_req", "io_uring:io_uring_submit_sqe"], &["io_uring:io_uring_complete"]],
    ),
];

/// The programs that count for `pane` (by name prefix) where other panes' programs sit on the
/// same event: the files' split of reads is `file_sync_ra`'s (or its fallbacks'), not
/// `readahead_sync_ra`'s.
fn only(pane: &str) -> Option<&'static str> {
    (pane == "files_readahead").then_some("file_sync_ra")
}

/// The kernel release that brought an event, for the reason's hint; None when it is older than
/// any kernel ioscope runs on.
fn since(event: &str) -> Option<&'static str> {
    match event {
        "block:block_io_start" | "block:block_io_done" | "iomap:iomap_dio_rw_begin" => Some("6.5"),
        "filemap:mm_filemap_get_pages" | "filemap:mm_filemap_map_pages" | "filemap:mm_filemap_fault" => {
            Some("6.12")
        }
        e if e.starts_with("readahead:") => Some("6.18"),
        _ => None,
    }
}

/// Every pane's state under this eBPF status.
pub fn compute(status: &BpfStatus) -> Arc<Vec<PaneStatus>> {
    Arc::new(compute_afresh(status))
}

/// The last answer of [`compute_reusing`], handed out again while its inputs are the same. A
/// stream of Models carries it from one Model to the next (`model::stream`).
#[derive(Clone, Debug, Default)]
pub struct PanesMemo {
    last: Option<Answer>,
}

/// One answer of [`compute_reusing`] and the status it was computed from.
#[derive(Clone, Debug)]
struct Answer {
    programs: Arc<Vec<BpfProgramStatus>>,
    enabled: bool,
    reason: Option<String>,
    panes: Arc<Vec<PaneStatus>>,
}

/// [`compute`], reusing the last answer while the status's program list (the same allocation:
/// the collector shares it between the samples of a run), `enabled` and `reason` are the same:
/// each answer is ~50 strings.
pub fn compute_reusing(status: &BpfStatus, memo: &mut PanesMemo) -> Arc<Vec<PaneStatus>> {
    if let Some(last) = memo.last.as_ref() {
        if Arc::ptr_eq(&last.programs, &status.programs)
            && last.enabled == status.enabled
            && last.reason == status.reason
        {
            return last.panes.clone();
        }
    }
    let panes = compute(status);
    // Not kept past its sample when it is large: every pane repeats the reason eBPF is off.
    memo.last = (status.reason.as_ref().is_none_or(|r| r.len() <= MEMO_REASON_MAX)).then(|| Answer {
        programs: status.programs.clone(),
        enabled: status.enabled,
        reason: status.reason.clone(),
        panes: panes.clone(),
    });
    panes
}

/// The longest reason whose answer [`compute_reusing`] keeps (real ones are a few hundred bytes).
const MEMO_REASON_MAX: usize = 4096;

fn compute_afresh(status: &BpfStatus) -> Vec<PaneStatus> {
    PANES
        .iter()
        .map(|&(pane, title, needs)| {
            let mut sources = Vec::new();
            let mut missing = Vec::new();
            let mut why = Vec::new();
            let mut tried = false;
            let mut fallback = false;
            for need in needs {
                // A program on a fallback (ebpf/README.md) stands in for the tracepoint it replaces.
                fn stands_for(p: &BpfProgramStatus) -> &str {
                    p.fallback_for.as_deref().unwrap_or(&p.tracepoint)
                }
                let on_it: Vec<_> = status
                    .programs
                    .iter()
                    .filter(|p| need.contains(&stands_for(p)))
                    .filter(|p| only(pane).is_none_or(|prefix| p.program.starts_with(prefix)))
                    .collect();
                // No program on it at all: a recording from an ioscope that did not have one.
                if on_it.is_empty() {
                    continue;
                }
                tried = true;
                let hit =
                    need.iter().find_map(|alt| on_it.iter().find(|p| p.attached && stands_for(p) == *alt));
                match hit {
                    Some(p) if p.fallback_for.is_some() => {
                        let how = if p.mechanism.is_empty() { "tracepoint" } else { p.mechanism.as_str() };
                        sources.push(format!("{how} {} (fallback for {})", p.tracepoint, stands_for(p)));
                        fallback = true;
                    }
                    Some(p) => sources.push(p.tracepoint.clone()),
                    None => {
                        let wanted = need[0];
                        if missing.iter().any(|m| m == wanted) {
                            continue;
                        }
                        missing.push(wanted.to_string());
                        let kind = if wanted.contains(':') { "tracepoint " } else { "" };
                        let mut text = format!("needs {kind}{wanted}");
                        if let Some(v) = since(wanted) {
                            text.push_str(&format!(" (kernel {v}+)"));
                        }
                        // The attach error of a program on it.
                        // Its first line: a verifier's log follows on the next ones.
                        if let Some(e) = on_it.iter().find_map(|p| p.error.as_deref()?.lines().next()) {
                            text.push_str(&format!(": {e}"));
                        }
                        why.push(text);
                    }
                }
            }
            if !tried && status.enabled {
                why.push("no program for it was loaded".to_string());
            }
            let live = status.enabled && tried && missing.is_empty();
            let reason = match (live, status.enabled) {
                (true, _) => None,
                (false, false) => {
                    Some(format!("eBPF is off: {}", status.reason.as_deref().unwrap_or("no reason given")))
                }
                (false, true) => Some(why.join("; ")),
            };
            PaneStatus { pane, title, live, fallback, sources, missing, reason }
        })
        .collect()
}

/// The state of one pane by id.
pub fn find<'a>(panes: &'a [PaneStatus], pane: &str) -> Option<&'a PaneStatus> {
    panes.iter().find(|p| p.pane == pane)
}

/// The pane's state when it is not live (None when live or not in the table): what the views
/// show in place of its figures.
pub fn not_live<'a>(panes: &'a [PaneStatus], pane: &str) -> Option<&'a PaneStatus> {
    find(panes, pane).filter(|p| !p.live)
}

/// What a view's title adds when fallbacks feed its panes (`ids`): "  [fallback: fentry
/// page_cache_ra_order]", each fallback source once (ebpf/README.md says what each measures);
/// empty when none does.
pub fn fallback_note(panes: &[PaneStatus], ids: &[&str]) -> String {
    let mut used: Vec<&str> = Vec::new();
    for p in panes.iter().filter(|p| p.live && p.fallback && ids.contains(&p.pane)) {
        for s in &p.sources {
            if let Some((how, _)) = s.split_once(" (fallback for ") {
                if !used.contains(&how) {
                    used.push(how);
                }
            }
        }
    }
    match used.is_empty() {
        true => String::new(),
        false => format!("  [fallback: {}]", used.join(", ")),
    }
}

impl PaneStatus {
    /// The short form, for a cell or a line: "needs readahead:page_cache_ra_order (6.18+)", or
    /// eBPF's own reason when it is off.
    pub fn needs(&self) -> String {
        if self.missing.is_empty() {
            return self.reason.clone().unwrap_or_default();
        }
        let each: Vec<String> = self
            .missing
            .iter()
            .map(|m| match since(m) {
                Some(v) => format!("{m} ({v}+)"),
                None => m.clone(),
            })
            .collect();
        format!("needs {}", each.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::BpfProgramStatus;

    fn prog(tracepoint: &str, attached: bool, error: Option<&str>) -> BpfProgramStatus {
        BpfProgramStatus {
            program: tracepoint.replace(':', "_"),
            tracepoint: tracepoint.into(),
            attached,
            error: error.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn a_pane_whose_tracepoint_did_not_attach_says_what_and_why() {
        let status = BpfStatus {
            enabled: true,
            reason: None,
            programs: vec![
                prog("filemap:mm_filemap_add_to_page_cache", true, None),
                prog("readahead:page_cache_ra_order", false, Some("tracepoint not found")),
                prog("block:block_rq_issue", true, None),
            ]
            .into(),
        };
        let panes = compute(&status);
        let ra = find(&panes, "readahead").unwrap();
        assert!(!ra.live);
        assert_eq!(ra.missing, ["readahead:page_cache_ra_order"]);
        assert_eq!(
            ra.reason.as_deref(),
            Some("needs tracepoint readahead:page_cache_ra_order (kernel 6.18+): tracepoint not found")
        );
        let dev = find(&panes, "devices_bpf").unwrap();
        assert!(dev.live && dev.reason.is_none());
        assert_eq!(dev.sources, ["block:block_rq_issue"]);
        // No program on any of its events (an older recording): not live, but nothing named
        // missing.
        let io = find(&panes, "io_processes").unwrap();
        assert!(!io.live && io.missing.is_empty());
        assert_eq!(io.reason.as_deref(), Some("no program for it was loaded"));
    }

    #[test]
    fn a_title_names_the_fallbacks_that_feed_its_panes() {
        let fentry = |function: &str, for_tp: &str| BpfProgramStatus {
            mechanism: "fentry".into(),
            fallback_for: Some(for_tp.into()),
            ..prog(function, true, None)
        };
        let status = BpfStatus {
            enabled: true,
            reason: None,
            programs: vec![
                prog("filemap:mm_filemap_add_to_page_cache", true, None),
                fentry("page_cache_ra_order", "readahead:page_cache_ra_order"),
                prog("block:block_rq_issue", true, None),
            ]
            .into(),
        };
        let panes = compute(&status);
        assert_eq!(fallback_note(&panes, &["readahead"]), "  [fallback: fentry page_cache_ra_order]");
        assert_eq!(
            fallback_note(&panes, &["readahead", "files"]),
            "  [fallback: fentry page_cache_ra_order]"
        );
        assert_eq!(fallback_note(&panes, &["devices_bpf"]), "", "fed by its tracepoint");
        assert_eq!(fallback_note(&panes, &["cache"]), "", "not live: its own message says why");
    }

    /// The files' split of reads is live by its own program only: the readahead pane's program on
    /// the same function says nothing of it.
    #[test]
    fn the_files_split_of_reads_counts_only_its_own_program() {
        let on = |program: &str, attached: bool, error: Option<&str>| BpfProgramStatus {
            program: program.into(),
            mechanism: "kprobe".into(),
            fallback_for: Some("readahead:page_cache_sync_ra".into()),
            ..prog("page_cache_sync_ra", attached, error)
        };
        let status = |programs: Vec<BpfProgramStatus>| BpfStatus {
            enabled: true,
            reason: None,
            programs: programs.into(),
        };
        let refused = status(vec![
            on("readahead_sync_ra_kprobe", true, None),
            on("file_sync_ra_fentry", false, Some("fentry refused: error 524; kprobe: not found")),
        ]);
        let panes = compute(&refused);
        let p = find(&panes, "files_readahead").unwrap();
        assert!(!p.live);
        assert_eq!(
            p.reason.as_deref(),
            Some(
                "needs tracepoint readahead:page_cache_sync_ra (kernel 6.18+): fentry refused: error 524; \
                 kprobe: not found"
            )
        );
        let attached =
            status(vec![on("readahead_sync_ra_kprobe", true, None), on("file_sync_ra_kprobe", true, None)]);
        let panes = compute(&attached);
        let p = find(&panes, "files_readahead").unwrap();
        assert!(p.live && p.fallback, "{p:?}");
        assert_eq!(p.sources, ["kprobe page_cache_sync_ra (fallback for readahead:page_cache_sync_ra)"]);
        // The tracepoint program (6.18+).
        let tp = status(vec![prog("readahead:page_cache_sync_ra", true, None)]);
        assert!(
            !find(&compute(&tp), "files_readahead").unwrap().live,
            "readahead_page_cache_sync_ra is not it"
        );
        let tp = status(vec![BpfProgramStatus {
            program: "file_sync_ra".into(),
            ..prog("readahead:page_cache_sync_ra", true, None)
        }]);
        assert!(find(&compute(&tp), "files_readahead").unwrap().live);
    }

    #[test]
    fn with_ebpf_off_every_pane_gives_ebpfs_reason() {
        let status = BpfStatus { enabled: false, reason: Some("not root".into()), programs: vec![].into() };
        for p in compute(&status).iter() {
            assert!(!p.live);
            assert_eq!(p.reason.as_deref(), Some("eBPF is off: not root"), "{}", p.pane);
        }
    }

    #[test]
    fn the_last_answer_is_reused_only_for_the_same_program_list_and_reason() {
        let mut status = BpfStatus {
            enabled: true,
            reason: None,
            programs: vec![prog("block:block_rq_issue", true, None)].into(),
        };
        let memo = &mut PanesMemo::default();
        let first = compute_reusing(&status, memo);
        assert!(Arc::ptr_eq(&first, &compute_reusing(&status, memo)), "the same status: the same answer");
        assert!(!Arc::ptr_eq(&first, &compute(&status)), "no memo: computed afresh");
        status.reason = Some("a map could not be read".into());
        let other = compute_reusing(&status, memo);
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(*other, compute_afresh(&status));
        // Another list (another run, a recording's sample) is computed afresh.
        status.programs = Arc::new(vec![prog("block:block_rq_issue", false, Some("not found"))]);
        let changed = compute_reusing(&status, memo);
        assert!(!find(&changed, "devices_bpf").unwrap().live);
        assert!(find(&first, "devices_bpf").unwrap().live);
    }
}
