//! Snapshots of the TUI bench view: the results table (direct and buffered of each job on adjacent
//! rows with their verdicts), the live progress line and the monitor panes below. Rendered from
//! hand-built results and the busy_box model. Accept changes with
//! `INSTA_UPDATE=always cargo test --test offline bench_view_snapshots::`, then read the .snap files.

use crate::busy_box;

use std::time::Duration;

use ioscope::bench::result::{verdict, JobResult};
use ioscope::bench::spec::{JobSpec, Mode, Rw};
use ioscope::bench::view::{self, BenchView, Running};
use ioscope::model::Model;
use ioscope::ui::UiState;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn result(rw: Rw, bs: u64, mode: Mode, f: impl FnOnce(&mut JobResult)) -> JobResult {
    let mut r = JobResult { rw: Some(rw), bs, mode: Some(mode), qd: 1, ..Default::default() };
    f(&mut r);
    r.verdict = verdict(&r);
    r
}

/// The cloud-disk story: 1 KiB direct reads IOPS-bound, buffered reads fed by readahead; a 1 GiB
/// buffered write whose final fsync dominates, its direct twin throughput-bound.
fn results() -> Vec<JobResult> {
    vec![
        result(Rw::Read, 1024, Mode::Direct, |r| {
            (r.mb_s, r.iops, r.ops, r.bytes, r.runtime_s) = (2.67, 2610.0, 7830, 7830 * 1024, 3.0);
            (r.lat_p50_us, r.lat_p99_us, r.lat_p999_us, r.lat_max_us, r.lat_mean_us) =
                (371.0, 612.0, 1480.0, 4210.0, 383.0);
            (r.disk_bytes, r.disk_read_bytes, r.disk_reads) = (7830 * 1024, 7830 * 1024, 7830);
            (r.amplification, r.dev_req_kb, r.dev_aqu_sz, r.dev_util, r.cpu_pct) =
                (Some(1.0), 1.0, 0.98, 99.0, 6.0);
        }),
        result(Rw::Read, 1024, Mode::Buffered, |r| {
            (r.mb_s, r.iops, r.ops, r.bytes, r.runtime_s) = (118.0, 115_234.0, 345_702, 354_000_000, 3.0);
            (r.lat_p50_us, r.lat_p99_us, r.lat_p999_us, r.lat_max_us, r.lat_mean_us) =
                (2.0, 41.0, 380.0, 5120.0, 8.6);
            (r.disk_bytes, r.disk_read_bytes, r.disk_reads) = (356_515_840, 356_515_840, 2720);
            (r.amplification, r.dev_req_kb, r.dev_aqu_sz, r.dev_util, r.cpu_pct) =
                (Some(1.007), 128.0, 1.9, 97.0, 31.0);
            r.cache_hit_pct = Some(0.0);
        }),
        result(Rw::Write, 1 << 20, Mode::Direct, |r| {
            (r.mb_s, r.iops, r.ops, r.bytes, r.runtime_s) = (412.0, 393.0, 1024, 1 << 30, 2.6);
            (r.lat_p50_us, r.lat_p99_us, r.lat_p999_us, r.lat_max_us, r.lat_mean_us) =
                (2480.0, 4100.0, 6020.0, 6020.0, 2540.0);
            (r.disk_bytes, r.disk_write_bytes, r.disk_writes) = (1 << 30, 1 << 30, 2048);
            (r.amplification, r.dev_req_kb, r.dev_aqu_sz, r.dev_util, r.cpu_pct) =
                (Some(1.0), 512.0, 1.9, 98.0, 2.0);
            r.fsync_s = 0.01;
        }),
        result(Rw::Write, 1 << 20, Mode::Buffered, |r| {
            (r.mb_s, r.iops, r.ops, r.bytes, r.runtime_s) = (221.0, 211.0, 1024, 1 << 30, 4.86);
            (r.lat_p50_us, r.lat_p99_us, r.lat_p999_us, r.lat_max_us, r.lat_mean_us) =
                (310.0, 1900.0, 8800.0, 8800.0, 640.0);
            (r.disk_bytes, r.disk_write_bytes, r.disk_writes) = (1 << 30, 1 << 30, 2100);
            (r.amplification, r.dev_req_kb, r.dev_aqu_sz, r.dev_util, r.cpu_pct) =
                (Some(1.0), 499.0, 30.0, 86.0, 14.0);
            (r.fsync_s, r.dirty_before_fsync_bytes, r.pages_dirtied) = (4.2, Some(1_000_000_000), 262_144);
        }),
    ]
}

fn bench_view(running: bool) -> BenchView {
    BenchView {
        target_line: "/data/.ioscope-bench-4242.tmp (test file, removed after, 1G, ext4 on nvme0n1p2)".into(),
        total_jobs: 8,
        runtime_s: 3.0,
        engine: "io_uring".into(),
        results: results(),
        notes: vec!["cold cache: 0 of 262144 pages cached after DONTNEED (checked with cachestat)".into()],
        running: running.then_some(Running {
            index: 4,
            spec: JobSpec { rw: Rw::RandRead, bs: 4096, mode: Mode::Direct, qd: 32 },
            elapsed_s: 1.25,
            ops: 61_000,
            bytes: 61_000 * 4096,
        }),
        layout: Some((1 << 30, 1 << 30)),
        finished: !running,
        stopping: false,
        scroll: usize::MAX,
    }
}

fn screen(view: &BenchView, model: Option<&Model>, w: u16, h: u16) -> String {
    let ui = UiState::new(Duration::from_secs(1), false);
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| view::draw(f, view, model, &ui)).unwrap();
    t.backend().to_string()
}

#[test]
fn running_80x24() {
    insta::assert_snapshot!(screen(&bench_view(true), Some(&busy_box::busy()), 80, 24));
}

#[test]
fn running_160x48() {
    insta::assert_snapshot!(screen(&bench_view(true), Some(&busy_box::busy()), 160, 48));
}

#[test]
fn finished_160x48() {
    insta::assert_snapshot!(screen(&bench_view(false), Some(&busy_box::busy()), 160, 48));
}

#[test]
fn laying_out_before_the_first_sample_80x24() {
    let v = BenchView {
        target_line: "/data/.ioscope-bench-4242.tmp (test file, removed after, 1G, ext4 on nvme0n1p2)".into(),
        total_jobs: 8,
        runtime_s: 3.0,
        layout: Some((300 << 20, 1 << 30)),
        scroll: usize::MAX,
        ..Default::default()
    };
    insta::assert_snapshot!(screen(&v, None, 80, 24));
}
