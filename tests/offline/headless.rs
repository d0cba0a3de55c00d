//! The headless loop and the text frame, from hand-built Samples and Models (no system access).

use std::cell::Cell;
use std::io::{self, Write};
use std::time::Duration;

use ioscope::headless::{report_loop, HeadlessOptions};
use ioscope::model::{DeviceModel, Model, ProcessModel, PsiView};
use ioscope::output::headless::Format;
use ioscope::output::text::format_frame_at;
use ioscope::sample::Sample;

const MIB: u64 = 1024 * 1024;

/// Samples exactly one second apart on the monotonic clock, counting how many were taken.
fn one_per_second(taken: &Cell<u64>) -> impl FnMut() -> Sample + '_ {
    move || {
        let n = taken.get();
        taken.set(n + 1);
        Sample { mono_ns: n * 1_000_000_000, ..Default::default() }
    }
}

fn opts(count: Option<u64>, format: Format) -> HeadlessOptions {
    HeadlessOptions { interval: Duration::from_millis(1), count, format, bpf: false }
}

#[test]
fn json_lines_one_per_interval_with_the_samples_elapsed_time() {
    let taken = Cell::new(0);
    let mut out = Vec::new();
    report_loop(one_per_second(&taken), |_| {}, &mut out, &opts(Some(3), Format::JsonLines)).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3);
    for line in lines {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        // Elapsed comes from the Samples' mono_ns (1 s apart), not from the 1 ms nominal interval.
        assert_eq!(v["interval_s"], 1.0);
    }
    assert_eq!(taken.get(), 4, "three reports need four samples");
}

#[test]
fn once_pretty_json_is_a_single_document() {
    let taken = Cell::new(0);
    let mut out = Vec::new();
    report_loop(one_per_second(&taken), |_| {}, &mut out, &opts(Some(1), Format::JsonPretty)).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert!(v["memory"]["dirty_threshold"].is_u64());
    assert!(String::from_utf8(out).unwrap().lines().count() > 1, "--once --json is pretty-printed");
}

#[test]
fn text_frames_are_separated_by_one_blank_line() {
    let taken = Cell::new(0);
    let mut out = Vec::new();
    report_loop(one_per_second(&taken), |_| {}, &mut out, &opts(Some(2), Format::Text)).unwrap();
    let text = String::from_utf8(out).unwrap();
    let second = text.find("\nioscope ").expect("two frames");
    let first = &text[..second + 1];
    assert!(first.ends_with("\n\n") && !first.ends_with("\n\n\n"), "{text}");
}

/// A stdout whose reader has gone away.
struct ClosedPipe;
impl Write for ClosedPipe {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::ErrorKind::BrokenPipe.into())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_closed_output_stops_the_loop_at_once() {
    let taken = Cell::new(0);
    let err = report_loop(one_per_second(&taken), |_| {}, ClosedPipe, &opts(None, Format::Text)).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    assert_eq!(taken.get(), 2, "no sampling after the first failed write");
}

fn device(name: &str, is_virtual: bool, idle: bool) -> DeviceModel {
    DeviceModel { name: name.into(), is_virtual, idle, ..Default::default() }
}

fn process(pid: u32, comm: &str, read: f64, write: f64) -> ProcessModel {
    ProcessModel {
        pid,
        comm: comm.into(),
        read_bytes_s: read,
        write_bytes_s: write,
        io_readable: true,
        ..Default::default()
    }
}

fn frame_model() -> Model {
    let mut m = Model { interval_s: 1.0, ..Default::default() };
    m.header.hostname = "db1".into();
    m.header.kernel = "6.18.0".into();
    m.header.uptime_s = 90_061.0; // 1 day, 1 hour, 1 minute, 1 second
    m.memory.total = 8 * 1024 * MIB;
    m.memory.dirty = 100 * MIB;
    m.memory.dirty_threshold = 400 * MIB;
    m.memory.dirty_background_threshold = 200 * MIB;
    m.memory.dirty_source = "ratio";
    m.memory.dirty_background_source = "bytes";
    m.memory.rates.pgpgout_kb_s = 2048.0;
    m.psi.io =
        Some(PsiView { some_avg10: 12.5, full_avg10: Some(3.25), some_stall_ms: 40.0, full_stall_ms: None });
    m.devices = vec![
        DeviceModel {
            w_s: 3700.0,
            wkb_s: 100_000.0,
            wareq_sz: 27.03,
            w_await: 1.5,
            aqu_sz: 5.55,
            util: 100.0,
            ..device("nvme0n1", false, false)
        },
        device("loop0", true, true),
        device("loop1", true, false),
        device("sdb", false, true),
    ];
    m.processes = (1..=12).map(|i| process(i, "worker", 0.0, i as f64 * 1024.0)).collect();
    m.processes.push(ProcessModel {
        user: Some("postgres".into()),
        cmdline: Some("postgres: checkpointer \x1b[2J".into()),
        ..process(100, "postgres", 2.0 * MIB as f64, 0.0)
    });
    m.processes.push(process(200, "sleepy", 0.0, 0.0));
    m.processes.push(ProcessModel { io_readable: false, ..process(300, "sshd", 0.0, 0.0) });
    m.bpf.reason = Some("--no-bpf was given".into());
    m
}

#[test]
fn frame_header_memory_and_psi_lines() {
    let f = format_frame_at(&frame_model(), "2026-11-22 12:00:00");
    let lines: Vec<&str> = f.lines().collect();
    assert_eq!(
        lines[0],
        "ioscope 2026-11-22 12:00:00  host db1  kernel 6.18.0  up 1d 01:01  interval 1.00 s  (K/M/G = KiB/MiB/GiB)"
    );
    assert!(lines[1].starts_with("Memory: total 8.0G, "), "{}", lines[1]);
    // 100 MiB dirty against a 400 MiB throttle threshold: 25 %.
    assert!(
        lines[2].starts_with(
            "Dirty:  dirty 100M (25% of the throttle threshold), writeback 0; \
             background writeback above 200M (bytes), writers throttled above 400M (ratio)"
        ),
        "{}",
        lines[2]
    );
    // /proc/vmstat's kB/s in the TUI's units: 2048 KiB/s is 2.0M/s.
    assert!(lines[3].starts_with("Paging: in 0/s, out 2.0M/s, major faults 0.0/s"), "{}", lines[3]);
    assert!(lines[4]
        .starts_with("PSI:    io some 12.50% full 3.25% (avg10), stalled 40.0 ms; memory not available"));
    assert_eq!(lines[5], "eBPF:   off: --no-bpf was given");
}

#[test]
fn frame_device_rows_hide_only_idle_virtual_devices() {
    let f = format_frame_at(&frame_model(), "t");
    let rows: Vec<&str> =
        f.lines().skip_while(|l| !l.starts_with("Device")).skip(1).take_while(|l| !l.is_empty()).collect();
    let names: Vec<&str> = rows.iter().map(|r| r.split_whitespace().next().unwrap()).collect();
    assert_eq!(names, ["nvme0n1", "loop1", "sdb"]);
    // iostat column order in the TUI's units: r/s w/s read/s write/s rrqm/s wrqm/s rareq-sz
    // wareq-sz r_await w_await aqu-sz %util; 100,000 kB/s (KiB) is 97.7 MiB/s, 27.03 KiB 27.0K.
    assert!(f.lines().any(|l| l.starts_with("Device") && l.contains("read/s") && !l.contains("kB")));
    let cols: Vec<&str> = rows[0].split_whitespace().skip(1).collect();
    assert_eq!(cols, ["0", "3700", "0", "97.7M", "0", "0", "0", "27.0K", "0", "1.50", "5.55", "100.0"]);
    assert!(!f.contains("kB/s"), "no kB/s beside the TUI's units:\n{f}");
}

#[test]
fn frame_lists_the_ten_busiest_processes_busiest_first() {
    let f = format_frame_at(&frame_model(), "t");
    let rows: Vec<&str> = f.lines().skip_while(|l| !l.trim_start().starts_with("PID USER")).skip(1).collect();
    let pids: Vec<&str> = rows.iter().take(10).map(|r| r.split_whitespace().next().unwrap()).collect();
    assert_eq!(pids, ["100", "12", "11", "10", "9", "8", "7", "6", "5", "4"]);
    assert!(rows[0].contains("postgres") && rows[0].contains("2.0M/s"), "{}", rows[0]);
    // USER and COMMAND: the names from the model, escaped; "-" where not read.
    assert_eq!(rows[0].split_whitespace().nth(1), Some("postgres"), "{}", rows[0]);
    assert!(rows[0].ends_with("  postgres: checkpointer \\x1b[2J"), "{}", rows[0]);
    assert!(rows[1].ends_with("  -"), "{}", rows[1]);
    assert!(!f.contains("sleepy"), "idle processes are not listed");
    assert_eq!(rows[10], "(1 processes with unreadable /proc/PID/io: not ours without root, or gone)");
}
