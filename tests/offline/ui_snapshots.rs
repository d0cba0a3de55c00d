//! Whole-screen snapshots of the TUI rendered from hand-built models (tests/fixtures/models). They
//! are the specification of what the user sees: review a changed snapshot by reading it.
//! Accept new or changed ones with `INSTA_UPDATE=always cargo test --test offline ui_snapshots::`.

use crate::block_box;
use crate::busy_box;
use crate::common;
use common::ui::{screen, terminal};

use std::time::Duration;

use ioscope::ui::{self, Body, Overlay, Pane, UiState};
use ratatui::backend::TestBackend;
use ratatui::style::Color;
use ratatui::Terminal;

fn state() -> UiState {
    common::ui::state(&busy_box::history_points())
}

#[test]
fn main_80x24() {
    insta::assert_snapshot!(screen(&busy_box::busy(), &state(), 80, 24));
}

#[test]
fn main_160x48() {
    insta::assert_snapshot!(screen(&busy_box::busy(), &state(), 160, 48));
}

#[test]
fn main_200x60() {
    insta::assert_snapshot!(screen(&busy_box::busy(), &state(), 200, 60));
}

#[test]
fn help_80x24() {
    let mut s = state();
    s.overlay = Some(Overlay::Help);
    insta::assert_snapshot!(screen(&busy_box::no_psi_no_bpf(), &s, 80, 24));
}

#[test]
fn zoomed_devices_80x24() {
    let mut s = state();
    s.views.stack.focus = Pane::Devices;
    s.views.stack.zoomed = true;
    s.views.devices.show_partitions = true;
    s.views.devices.show_idle_virtual = true;
    insta::assert_snapshot!(screen(&busy_box::busy(), &s, 80, 24));
}

#[test]
fn zoomed_devices_200x60() {
    let mut s = state();
    s.views.stack.focus = Pane::Devices;
    s.views.stack.zoomed = true;
    insta::assert_snapshot!(screen(&busy_box::busy(), &s, 200, 60));
}

#[test]
fn filtered_processes_80x24() {
    let mut s = state();
    s.views.stack.focus = Pane::Processes;
    s.filter = "FIO".into();
    s.views.processes.selection.select_index(1);
    insta::assert_snapshot!(screen(&busy_box::busy(), &s, 80, 24));
}

#[test]
fn processes_zoomed_raw_units_sorted_by_pid_120x40() {
    let mut s = state();
    s.views.stack.focus = Pane::Processes;
    s.views.stack.zoomed = true;
    s.units = ui::Units::Raw;
    s.views.processes.sort.column = ui::ProcSort::Pid;
    s.views.processes.show_all = true;
    insta::assert_snapshot!(screen(&busy_box::busy(), &s, 120, 40));
}

#[test]
fn psi_absent_and_bpf_off_80x24() {
    let mut s = state();
    s.paused = true;
    insta::assert_snapshot!(screen(&busy_box::no_psi_no_bpf(), &s, 80, 24));
}

#[test]
fn first_sample_rates_pending_80x24() {
    let s = UiState::new(Duration::from_secs(2), true);
    insta::assert_snapshot!(screen(&busy_box::first_sample(), &s, 80, 24));
}

#[test]
fn starting_screen_before_any_sample() {
    let s = UiState::new(Duration::from_secs(1), true);
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    t.draw(|f| ui::draw_starting(f, &s)).unwrap();
    let text = t.backend().to_string();
    assert!(text.contains("taking the first sample"), "{text}");
}

/// NO_COLOR: not a single cell may carry a colour; with colour on, the saturated vda is red.
#[test]
fn no_color_renders_without_any_colour() {
    let mut s = state();
    s.color = false;
    s.overlay = None;
    for (w, h) in [(80, 24), (200, 60)] {
        let t = terminal(&busy_box::busy(), &s, w, h);
        for cell in t.backend().buffer().content() {
            assert_eq!(
                (cell.fg, cell.bg),
                (Color::Reset, Color::Reset),
                "cell {:?} at {w}x{h}",
                cell.symbol()
            );
        }
    }
    let t = terminal(&busy_box::busy(), &state(), 80, 24);
    let red = t.backend().buffer().content().iter().filter(|c| c.fg == Color::Red).count();
    assert!(red > 0, "colour on: the 100 % util and the PSI io figures are red");
}

/// Every screen size in between renders without panicking, down to absurdly small terminals.
#[test]
fn odd_sizes_do_not_panic() {
    let m = busy_box::busy();
    let mut s = state();
    for (w, h) in [(1, 1), (10, 3), (40, 10), (79, 23), (100, 30), (149, 29), (150, 30), (300, 100)] {
        for zoom in [false, true] {
            for help in [false, true] {
                s.views.stack.zoomed = zoom;
                s.overlay = help.then_some(Overlay::Help);
                terminal(&m, &s, w, h);
            }
        }
    }
}

// The block probes (issue 3): the devices pane with latency and the cross-check flag, the device
// detail on Enter, the probe-health view, and the per-submitter process view.

#[test]
fn block_main_160x48() {
    insta::assert_snapshot!(screen(&block_box::busy_with_block(), &state(), 160, 48));
}

fn detail_state(device: usize) -> UiState {
    let mut s = state();
    s.views.stack.focus = Pane::Devices;
    s.open(Body::DeviceDetail);
    s.views.devices.selection.select_index(device);
    s
}

#[test]
fn block_device_detail_80x24() {
    // Visible rows: loop0, vda, nvme0n1 (idle loop1 and the vda1 partition are hidden).
    insta::assert_snapshot!(screen(&block_box::busy_with_block(), &detail_state(1), 80, 24));
}

#[test]
fn block_device_detail_160x48() {
    insta::assert_snapshot!(screen(&block_box::busy_with_block(), &detail_state(1), 160, 48));
}

fn wide_detail(width: u16, height: u16) -> String {
    screen(&block_box::wide_histograms(), &detail_state(1), width, height)
}

// Histograms with more buckets than lines: merged into wider buckets at 80x24, every bucket on its
// own line when there is room; the counts beside their bars at every width.
#[test]
fn device_detail_wide_histograms_80x24() {
    insta::assert_snapshot!(wide_detail(80, 24));
}

#[test]
fn device_detail_wide_histograms_120x40() {
    insta::assert_snapshot!(wide_detail(120, 40));
}

#[test]
fn device_detail_wide_histograms_230x50() {
    insta::assert_snapshot!(wide_detail(230, 50));
}

#[test]
fn device_detail_histograms_show_every_count_and_use_the_width() {
    for (w, h) in [(120, 40), (200, 60), (230, 50)] {
        let s = wide_detail(w, h);
        // The 8K write bucket and the 4K read bucket, each count whole beside its bar.
        let row =
            s.lines().find(|l| l.contains(" 8K ")).unwrap_or_else(|| panic!("no 8K row at {w}x{h}:\n{s}"));
        assert!(row.contains(" 123.5k "), "{w}x{h}: {row}");
        let row = s.lines().find(|l| l.contains(" 4K ")).unwrap();
        assert!(row.contains(" 81.9k "), "{w}x{h}: {row}");
        // The histograms use the width: their rows reach the right tenth of the screen.
        let reach =
            s.lines().filter(|l| l.contains('█')).map(|l| l.trim_end_matches([' ', '"']).chars().count());
        assert!(
            reach.max().unwrap() as u16 >= w * 9 / 10,
            "{w}x{h}: histograms leave the right side empty\n{s}"
        );
    }
    // At 80x24 the lines do not hold every bucket: wider buckets, the whole range still shown.
    let s = wide_detail(80, 24);
    assert!(s.contains("8µs–32µs "), "the fastest requests are shown: {s}");
    assert!(s.contains("32ms–131ms "), "the slowest requests are shown: {s}");
    assert!(s.contains(" 4K ") && s.contains(" 1M "), "every request size is shown: {s}");
}

#[test]
fn block_device_detail_mismatch_and_util_note_80x24() {
    // loop0: eBPF saw 20 MB where diskstats counted 26.2 MiB; non-rotational, so %util misleads.
    insta::assert_snapshot!(screen(&block_box::busy_with_block(), &detail_state(0), 80, 24));
}

#[test]
fn block_device_detail_without_block_figures_says_why_80x24() {
    // The idle NVMe disk: the probes never saw a request on it.
    insta::assert_snapshot!(screen(&block_box::busy_with_block(), &detail_state(2), 80, 24));
}

#[test]
fn block_probe_health_80x24() {
    let mut s = state();
    s.open(Body::ProbeHealth);
    insta::assert_snapshot!(screen(&block_box::busy_with_block(), &s, 80, 24));
}

/// block_box's model with a program that counts no events of its own (a files probe), whose runs
/// the kernel's run statistics give.
fn with_files_program(runs: bool) -> ioscope::model::Model {
    let mut m = block_box::busy_with_block();
    let mut programs = (*m.bpf.programs).clone();
    programs.push(ioscope::sample::BpfProgramStatus {
        program: "files_vfs_read".into(),
        tracepoint: "syscalls:sys_exit_read".into(),
        attached: true,
        mechanism: "tracepoint".into(),
        run_cnt: 90_000,
        run_time_ns: 2_700_000,
        ..Default::default()
    });
    m.bpf.programs = programs.into();
    if runs {
        m.bpf.runs = vec![ioscope::model::bpf::ProgramRuns {
            program: "files_vfs_read".into(),
            runs_s: 4321.0,
            ns_per_run: Some(31.0),
        }];
    }
    m
}

// Live, the view turns the kernel's run statistics on while it is open: events/s and ns/run of
// every program; where they are off (a replay without them), it says how to turn them on.
#[test]
fn probe_health_run_stats_on_120x40() {
    let mut s = state();
    s.open(Body::ProbeHealth);
    s.run_stats = Some(
        "kernel BPF run statistics on while this view is open (events/s, ns/run; about 20 ns a run)".into(),
    );
    let text = screen(&with_files_program(true), &s, 120, 40);
    let row = text.lines().find(|l| l.contains("files_vfs_read")).unwrap();
    assert!(row.contains("4321") && row.contains(" 31 "), "{row}");
    assert!(!text.contains("bpf_stats_enabled=1"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn probe_health_run_stats_off_says_how_80x24() {
    let mut s = state();
    s.open(Body::ProbeHealth);
    let text = screen(&with_files_program(false), &s, 80, 24);
    assert!(text.contains("bpf_stats_enabled=1"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn block_probe_health_160x48() {
    let mut s = state();
    s.open(Body::ProbeHealth);
    insta::assert_snapshot!(screen(&block_box::busy_with_block(), &s, 160, 48));
}

/// The maps' kernel memory under the programs and the block maps' fill: the total, the largest
/// maps (one shrunk to fit a memory limit: its compiled size beside), the rest summed on one row.
#[test]
fn block_probe_health_with_map_memory_160x48() {
    let mut m = block_box::busy_with_block();
    let map = |name: &str, entries: u32, compiled: u32, bytes: u64| ioscope::sample::BpfMapMemory {
        map: name.into(),
        entries,
        compiled_entries: compiled,
        bytes,
    };
    let mut maps = vec![
        map("BLOCK_DEV", 1024, 1024, 6_299_960),
        map("BLOCK_PROC", 8192, 8192, 5_833_016),
        map("FILE_NAMES", 16_384, 16_384, 5_768_064),
        map("FILE_IO", 16_384, 16_384, 4_064_128),
        map("RA_PAGES", 32_768, 262_144, 3_408_184),
        map("RA_FILES", 8192, 8192, 3_081_824),
        map("SYNC_STATS", 4096, 4096, 2_950_016),
    ];
    maps.extend((0..5).map(|i| map(&format!("SMALL_{i}"), 1, 1, 320)));
    m.bpf.maps_bytes = maps.iter().map(|m| m.bytes).sum();
    m.bpf.maps = maps.into();
    let mut s = state();
    s.open(Body::ProbeHealth);
    insta::assert_snapshot!(screen(&m, &s, 160, 48));
}

#[test]
fn block_io_processes_80x24() {
    let mut s = state();
    s.views.stack.focus = Pane::Processes;
    s.views.stack.process_table = ui::stack::ProcessTable::Submitters;
    insta::assert_snapshot!(screen(&block_box::busy_with_block(), &s, 80, 24));
}

#[test]
fn block_io_processes_zoomed_160x48() {
    let mut s = state();
    s.views.stack.focus = Pane::Processes;
    s.views.stack.process_table = ui::stack::ProcessTable::Submitters;
    s.views.stack.zoomed = true;
    insta::assert_snapshot!(screen(&block_box::busy_with_block(), &s, 160, 48));
}

/// Raw units: the sparklines' peak label ("peak 16320875315", wider than the label's 12 columns)
/// is whole and a space parts it from its sparkline.
#[test]
fn raw_units_peak_label_is_apart_from_its_sparkline() {
    let mut s = state();
    s.units = ui::Units::Raw;
    let text = screen(&busy_box::busy(), &s, 160, 48);
    let peaks: Vec<&str> = text.lines().filter(|l| l.contains("peak ")).collect();
    assert_eq!(peaks.len(), 2, "{text}");
    for l in peaks {
        let after = l.split("peak ").nth(1).unwrap();
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        assert!(digits.len() > 7, "a raw byte count: {l}");
        assert_eq!(after.chars().nth(digits.len()), Some(' '), "{l}");
    }
}
