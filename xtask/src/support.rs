//! The kernel support table: per feature (a pane, or a figure of one) and kernel series, the
//! mechanism that feeds it, or what is missing. The README's "Kernel support" table is generated
//! from it (`cargo xtask support-table`, checked by a test), and the kernel lab's guest
//! (src/bin/lab-guest.rs) checks every cell on its kernel: a `Works` cell must pass its accuracy
//! check; a `Missing` one must be reported missing, with a reason, by ioscope itself
//! (`bpf.panes[]`). The 6.18 column is this machine's kernel, checked by the host's live tests
//! (tests/live_*.rs); the 7.x column is the newest 7.x Debian serves (`cargo xtask vm --kernel
//! newest`, which prints and keeps the exact version it ran). The arm64 columns are Debian's
//! cloud-arm64 kernels of the same series (`cargo xtask vm --arch arm64`), their cells x86-64's
//! except where [`ARM64_DIFFERENCES`] says.

/// The kernel series of the table's columns.
pub const KERNELS: [&str; 5] = ["5.10", "6.1", "6.12", "6.18", "7.x"];

pub enum Cell {
    /// Claimed: the mechanism that feeds it.
    Works(&'static str),
    /// Not available on that kernel: what is missing.
    Missing(&'static str),
    /// Not verified on that kernel (no lab run).
    Untested(&'static str),
}

pub struct Feature {
    /// The check's name in the lab (`cargo xtask vm -- ID`).
    pub id: &'static str,
    /// The row's label in the README.
    pub label: &'static str,
    /// The pane's name in ioscope's `bpf.panes[]` (eBPF features), which says why it is missing.
    pub pane: Option<&'static str>,
    /// One cell per [`KERNELS`] entry.
    pub cells: [Cell; 5],
}

impl Feature {
    /// This feature's cell for a kernel series (`arm64-6.1` for an arm64 column: its difference from
    /// x86-64's, else x86-64's cell of the series); None for a series not in the table.
    pub fn cell(&self, kernel: &str) -> Option<&Cell> {
        if let Some(series) = kernel.strip_prefix(ARM64_PREFIX) {
            if !ARM64_KERNELS.contains(&series) {
                return None;
            }
            let differs = ARM64_DIFFERENCES.iter().find(|(id, k, _)| *id == self.id && *k == series);
            return differs.map(|(_, _, c)| c).or_else(|| self.cell(series));
        }
        KERNELS.iter().position(|k| *k == kernel).map(|i| &self.cells[i])
    }
}

/// The arm64 columns' kernel series (Debian's cloud-arm64 kernels in the lab), and their prefix in
/// the lab's column names (`arm64-6.1`: one word, as the guest's kernel command line passes it).
pub const ARM64_KERNELS: [&str; 4] = ["5.10", "6.1", "6.12", "7.x"];
pub const ARM64_PREFIX: &str = "arm64-";

/// Where an arm64 kernel differs from the x86-64 kernel of its series: (feature id, series, cell).
/// Every other arm64 cell is x86-64's of the same series, checked on arm64 by the lab.
/// Debian's arm64 6.1 refuses fentry/fexit (error 524: no BPF trampoline for its functions), so its
/// fallbacks run as their kprobe variants there.
pub static ARM64_DIFFERENCES: &[(&str, &str, Cell)] = &[
    (
        "cache_hit",
        "6.1",
        Works("kretprobe filemap_get_pages (fallback; no fentry/fexit on arm64 6.1), filemap:mm_filemap_add_to_page_cache"),
    ),
    (
        "readahead_seq",
        "6.1",
        Works("kprobe page_cache_ra_order, page_cache_sync_ra, page_cache_async_ra (fallbacks), kretprobe filemap_get_pages"),
    ),
    ("readahead_mmap", "6.1", Works("kprobe page_cache_ra_order (fallback), kprobe filemap_fault, filemap_map_pages")),
    ("cgroups_cache", "6.1", Works("kretprobe filemap_get_pages (fallback), cgroup:cgroup_attach_task")),
    // Debian's 5.10.0-32-cloud-arm64 (bullseye's newest arm64 build its mirror serves): no
    // iomap_dio_rw_begin tracepoint, and its BTF lacks the iomap structs' fields that the
    // __iomap_dio_rw fallback reads; ioscope reports the pane missing, saying so.
    ("files_direct", "5.10", Missing("iomap:iomap_dio_rw_begin (6.5), or the iomap structs in the kernel's BTF")),
    ("cache_hit", "5.10", Works("kretprobe generic_file_buffered_read (fallback; no fentry/fexit on arm64 5.10), filemap:mm_filemap_add_to_page_cache (a page each)")),
];

use Cell::{Missing, Works};

/// Where the submitter of block I/O comes from: the per-process and the per-cgroup disk I/O alike.
const SUBMITTER: [Cell; 5] = [
    Works("block:block_getrq (fallback for block_io_start)"),
    Works("block:block_getrq (fallback for block_io_start)"),
    Works("block:block_io_start"),
    Works("block:block_io_start (BTF)"),
    Works("block:block_io_start (BTF)"),
];

const PROCFS: Cell = Works("procfs");
/// 5.10's verifier refuses a compare-and-exchange (`BPF_ATOMIC | BPF_CMPXCHG`, Linux 5.12+) with
/// which the block programs claim their shared device and process slots: their `_nocas` twins
/// claim by a map insert there (ebpf/README.md).
const NOCAS: Cell =
    Works("block:block_rq_issue (slots claimed by map insert: no BPF compare-and-exchange before 5.12)");
/// 5.10 has writeback:writeback_dirty_page, the folio tracepoint's older name, with its fields.
const DIRTY_PAGE: Cell = Works("writeback:writeback_dirty_page (writeback_dirty_folio's older name)");
const DIRTY: Cell = Works("writeback:writeback_dirty_folio");
const WB_EXT4: Cell = Works("ext4:ext4_writepages_result");
const SYNCS: Cell = Works("syscalls:sys_enter_fsync, sys_exit_fsync");

/// The table. Its cells are what the lab verified (see each check in src/bin/lab-guest.rs).
pub const FEATURES: &[Feature] = &[
    Feature {
        id: "devices_diskstats",
        label: "Devices: iostat -x columns",
        pane: None,
        cells: [
            Works("/proc/diskstats"),
            Works("/proc/diskstats"),
            Works("/proc/diskstats"),
            Works("/proc/diskstats"),
            Works("/proc/diskstats"),
        ],
    },
    Feature {
        id: "dirty_thresholds",
        label: "Memory: dirty thresholds (equal to the kernel's)",
        pane: None,
        cells: [PROCFS, PROCFS, PROCFS, PROCFS, PROCFS],
    },
    Feature {
        id: "nonroot",
        label: "Without root: procfs panes, eBPF off with the reason",
        pane: None,
        cells: [PROCFS, PROCFS, PROCFS, PROCFS, PROCFS],
    },
    Feature {
        id: "no_btf",
        label: "Without BTF: procfs panes, the reason in the header",
        pane: None,
        cells: [PROCFS, PROCFS, PROCFS, PROCFS, PROCFS],
    },
    Feature {
        id: "devices_bpf",
        label: "Devices: eBPF request counts",
        pane: Some("devices_bpf"),
        cells: [
            NOCAS,
            Works("block:block_rq_issue"),
            Works("block:block_rq_issue (BTF)"),
            Works("block:block_rq_issue (BTF)"),
            Works("block:block_rq_issue (BTF)"),
        ],
    },
    Feature {
        id: "io_submitter",
        label: "Disk I/O by submitting process",
        pane: Some("io_processes"),
        cells: SUBMITTER,
    },
    Feature {
        id: "cache_hit",
        label: "Page cache: hit % per process",
        pane: Some("cache"),
        cells: [
            Works("fexit generic_file_buffered_read (fallback), filemap:mm_filemap_add_to_page_cache (a page each)"),
            Works("fexit filemap_get_pages (fallback), filemap:mm_filemap_add_to_page_cache"),
            Works("filemap:mm_filemap_get_pages, mm_filemap_add_to_page_cache"),
            Works("filemap:mm_filemap_get_pages, mm_filemap_add_to_page_cache"),
            Works("filemap:mm_filemap_get_pages, mm_filemap_add_to_page_cache"),
        ],
    },
    Feature {
        id: "files_read",
        label: "Files: disk reads per file",
        pane: Some("files"),
        cells: [
            Works("filemap:mm_filemap_add_to_page_cache (pages entering the cache, holes' included: no `enum req_op` for the read bios)"),
            Works("block:block_bio_queue (BTF: pages of the read bios)"),
            Works("block:block_bio_queue (BTF: pages of the read bios)"),
            Works("block:block_bio_queue (BTF: pages of the read bios)"),
            Works("block:block_bio_queue (BTF: pages of the read bios)"),
        ],
    },
    Feature {
        id: "files_dirty_ext4",
        label: "Files: dirtied bytes per file (ext4)",
        pane: Some("files"),
        cells: [DIRTY_PAGE, DIRTY, DIRTY, DIRTY, DIRTY],
    },
    Feature {
        id: "files_writeback_ext4",
        label: "Files: written-back bytes per file (ext4)",
        pane: Some("files_writeback_ext4"),
        cells: [WB_EXT4, WB_EXT4, WB_EXT4, WB_EXT4, WB_EXT4],
    },
    Feature {
        id: "files_dirty_xfs",
        label: "Files: dirtied bytes per file (xfs)",
        pane: Some("files"),
        cells: [DIRTY_PAGE, DIRTY, DIRTY, DIRTY, DIRTY],
    },
    Feature {
        id: "files_writeback_xfs",
        label: "Files: written-back bytes per file (xfs)",
        pane: Some("files_writeback_iomap"),
        cells: [
            Works("iomap:iomap_writepage (iomap_writeback_folio's older name; a page each)"),
            Works("iomap:iomap_writepage (iomap_writeback_folio's older name)"),
            Works("iomap:iomap_writepage (iomap_writeback_folio's older name)"),
            Works("iomap:iomap_writeback_folio"),
            Works("iomap:iomap_writeback_folio"),
        ],
    },
    Feature {
        id: "files_direct",
        label: "Files and processes: direct I/O bytes",
        pane: Some("direct_io"),
        cells: [
            Works("fentry __iomap_dio_rw (fallback for iomap_dio_rw_begin)"),
            Works("kprobe __iomap_dio_rw (fallback: fentry takes 6 arguments before 6.6)"),
            Works("iomap:iomap_dio_rw_begin (BTF)"),
            Works("iomap:iomap_dio_rw_begin (BTF)"),
            Works("iomap:iomap_dio_rw_begin (BTF)"),
        ],
    },
    Feature {
        id: "readahead_seq",
        label: "Readahead: sequential windows, used %",
        pane: Some("readahead"),
        cells: [
            Works("fentry do_page_cache_ra, page_cache_sync_ra, page_cache_async_ra (fallbacks), fexit generic_file_buffered_read"),
            Works("fentry page_cache_ra_order, page_cache_sync_ra, page_cache_async_ra (fallbacks), fexit filemap_get_pages"),
            Works("fentry page_cache_ra_order, page_cache_sync_ra, page_cache_async_ra (fallbacks)"),
            Works("readahead:page_cache_ra_order, page_cache_sync_ra, page_cache_async_ra"),
            Works("readahead:page_cache_ra_order, page_cache_sync_ra, page_cache_async_ra"),
        ],
    },
    Feature {
        id: "readahead_mmap",
        label: "Readahead: mmap read-around wasted",
        pane: Some("readahead"),
        cells: [
            Works("fentry do_page_cache_ra (fallback), fentry filemap_fault, filemap_map_pages"),
            Works("fentry page_cache_ra_order (fallback), fentry filemap_fault, filemap_map_pages"),
            Works("fentry page_cache_ra_order (fallback), filemap:mm_filemap_fault"),
            Works("readahead:page_cache_ra_order, filemap:mm_filemap_fault"),
            Works("readahead:page_cache_ra_order, filemap:mm_filemap_fault"),
        ],
    },
    Feature {
        id: "syncs",
        label: "Sync calls: fsync latency per process and file",
        pane: Some("syncs"),
        cells: [SYNCS, SYNCS, SYNCS, SYNCS, SYNCS],
    },
    Feature {
        id: "syncs_io_uring",
        label: "Sync calls: io_uring fsync latency per process and file",
        pane: Some("syncs_io_uring"),
        cells: [
            Works("io_uring:io_uring_submit_sqe, io_uring_complete (matched by ring and user_data: no `req`)"),
            Works("io_uring:io_uring_submit_sqe, io_uring_complete"),
            Works("io_uring:io_uring_submit_req, io_uring_complete"),
            Works("io_uring:io_uring_submit_req, io_uring_complete"),
            Works("io_uring:io_uring_submit_req, io_uring_complete"),
        ],
    },
    Feature {
        id: "cgroups_io",
        label: "cgroups: disk I/O by submitter",
        pane: Some("cgroups_io"),
        cells: SUBMITTER,
    },
    Feature {
        id: "cgroups_cache",
        label: "cgroups: page-cache hit %, a process moved without exec",
        pane: Some("cgroups_cache"),
        cells: [
            Works("fexit generic_file_buffered_read (fallback), cgroup:cgroup_attach_task"),
            Works("fexit filemap_get_pages (fallback), cgroup:cgroup_attach_task"),
            Works("filemap:mm_filemap_get_pages, cgroup:cgroup_attach_task"),
            Works("filemap:mm_filemap_get_pages, cgroup:cgroup_attach_task"),
            Works("filemap:mm_filemap_get_pages, cgroup:cgroup_attach_task"),
        ],
    },
];

fn cell_text(c: &Cell) -> String {
    match c {
        Cell::Works(how) => format!("✓ {how}"),
        Cell::Missing(what) => format!("✗ needs {what}"),
        Cell::Untested(why) => format!("untested ({why})"),
    }
}

/// The README's table (markdown), generated from [`FEATURES`]: the x86-64 columns, then the arm64
/// ones, where a cell equal to x86-64's of the same series reads "✓ as x86-64".
pub fn markdown() -> String {
    let arm64: Vec<String> = ARM64_KERNELS.iter().map(|k| format!("arm64 {k}")).collect();
    let columns = KERNELS.len() + arm64.len();
    let mut s = format!(
        "| Feature | {} | {} |\n|---|{}\n",
        KERNELS.join(" | "),
        arm64.join(" | "),
        "---|".repeat(columns)
    );
    for f in FEATURES {
        let mut cells: Vec<String> = f.cells.iter().map(cell_text).collect();
        for k in ARM64_KERNELS {
            let differs = ARM64_DIFFERENCES.iter().find(|(id, s, _)| *id == f.id && *s == k);
            cells.push(match differs {
                Some((_, _, c)) => cell_text(c),
                None => "✓ as x86-64".to_string(),
            });
        }
        s.push_str(&format!("| {} | {} |\n", f.label, cells.join(" | ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README carries the table as generated (`cargo xtask support-table`).
    #[test]
    fn the_readme_carries_this_table() {
        let readme = include_str!("../../README.md");
        assert!(
            readme.contains(&markdown()),
            "README.md's kernel support table differs from xtask/src/support.rs: paste the output of \
             `cargo xtask support-table` into README.md"
        );
    }

    /// An arm64 column is x86-64's of its series except where [`ARM64_DIFFERENCES`] says; a
    /// series the table lacks has no cell.
    #[test]
    fn arm64_cells_are_x86s_unless_listed() {
        let f = &FEATURES[0];
        assert!(std::ptr::eq(f.cell("arm64-6.1").unwrap(), f.cell("6.1").unwrap()));
        assert!(f.cell("arm64-6.18").is_none() && f.cell("arm64-4.19").is_none());
        for (id, series, cell) in ARM64_DIFFERENCES {
            let f = FEATURES.iter().find(|f| f.id == *id).unwrap_or_else(|| panic!("no feature {id}"));
            assert!(ARM64_KERNELS.contains(series), "{id}: no arm64 column {series}");
            assert!(std::ptr::eq(f.cell(&format!("{ARM64_PREFIX}{series}")).unwrap(), cell));
        }
        assert!(markdown().starts_with("| Feature | 5.10 | 6.1 | 6.12 | 6.18 | 7.x | arm64 5.10 |"));
    }

    /// Every pane named here is one ioscope reports in `bpf.panes[]` (src/model/panes.rs).
    #[test]
    fn panes_are_ioscopes() {
        let panes = include_str!("../../src/model/panes.rs");
        for f in FEATURES {
            if let Some(p) = f.pane {
                assert!(
                    panes.contains(&format!("(\"{p}\",")) || panes.contains(&format!("\"{p}\",\n")),
                    "{}: no pane {p}",
                    f.id
                );
            }
        }
    }
}
