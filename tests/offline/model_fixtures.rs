//! Fixtures → collect → Model::compute, against values computed by hand from the fixture files.
//!
//! `basic/` is a real capture from this project's VM (tests/fixtures/capture_basic.sh: known I/O on a
//! partitioned loop device between two snapshots); `synthetic/` are small hand-made pairs
//! (tests/fixtures/make_synthetic.py) for wraps, hot-plug, pid reuse, missing PSI and old kernels.
//! Every model is computed with an interval of exactly 2 s, so each expected value below is its
//! counter delta over 2 (the real capture's snapshots were 2.12 s apart by /proc/uptime; the model
//! takes the interval from its caller).

use std::time::Duration;

use ioscope::collect::{collect, SystemRoot};
use ioscope::model::{DeviceModel, Model, ProcessModel};
use ioscope::sample::Sample;

const TWO_SECONDS: Duration = Duration::from_secs(2);

fn sample(case: &str, snapshot: &str) -> Sample {
    let dir = format!("{}/tests/fixtures/{case}/{snapshot}", env!("CARGO_MANIFEST_DIR"));
    assert!(std::path::Path::new(&dir).is_dir(), "missing fixture {dir}");
    collect(&SystemRoot::fixture(dir))
}

fn model(case: &str) -> Model {
    Model::compute(Some(&sample(case, "t0")), &sample(case, "t1"), TWO_SECONDS)
}

fn device<'a>(m: &'a Model, name: &str) -> &'a DeviceModel {
    m.devices.iter().find(|d| d.name == name).unwrap_or_else(|| panic!("no device {name}"))
}

fn process(m: &Model, pid: u32) -> &ProcessModel {
    m.processes.iter().find(|p| p.pid == pid).unwrap_or_else(|| panic!("no pid {pid}"))
}

/// Equal to within float rounding (values like 4/13 are not exact in binary).
#[track_caller]
fn close(actual: f64, expected: f64) {
    assert!((actual - expected).abs() < 1e-9, "got {actual}, expected {expected}");
}

// ---------------------------------------------------------------------------------------------
// basic/: the real capture
// ---------------------------------------------------------------------------------------------

#[test]
fn basic_collects_every_part_of_the_sample() {
    let s = sample("basic", "t1");
    assert_eq!(s.host.hostname, "vm");
    assert_eq!(s.host.kernel, "6.18.44-fc-v669");
    assert_eq!(s.host.uptime_s, 1199.24);
    assert_eq!(s.page_size, 4096);
    // meminfo is kB → bytes: MemTotal 24684084 kB × 1024
    assert_eq!(s.memory.total_bytes, 24684084 * 1024);
    assert_eq!(s.memory.free_bytes, 21390584 * 1024);
    assert_eq!(s.vmstat.nr_free_pages, 1264113);
    assert_eq!(s.zones.len(), 5);
    assert_eq!(s.zones[1].name, "DMA32");
    assert_eq!((s.zones[1].managed_pages, s.zones[1].high_wmark_pages), (772915, 9381));
    assert_eq!(s.zones[1].max_lowmem_reserve_pages, 5120);
    assert_eq!(s.dirty_settings.dirty_ratio, 20);
    assert_eq!(s.dirty_settings.dirty_expire_centisecs, 3000);
    // Kernel order of /proc/diskstats is kept.
    let names: Vec<&str> = s.disks.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["loop0", "loop0p1", "vda"]);
    assert_eq!(s.disks[1].major, 259);
    let io = s.psi.io.as_ref().unwrap();
    assert_eq!((io.some.avg10, io.some.total_us), (6.74, 109269732));
    assert_eq!(io.full.as_ref().unwrap().total_us, 61540921);
    let pids: Vec<u32> = s.processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids, [1, 2, 16333, 16388]);
    assert!(s.processes[0].io.is_none(), "pid 1's io file is absent (unreadable when captured)");
    // comm "io) worker 1" holds ')' and spaces: the stat line is "16388 (io) worker 1) S ..."
    assert_eq!(&*s.processes[3].comm, "io) worker 1");
    assert_eq!(s.processes[3].start_ticks, 119578);
}

#[test]
fn basic_iostat_columns_of_a_whole_disk() {
    let m = model("basic");
    let vda = device(&m, "vda");
    // vda t0: 197053 12806 13381018 5886098 22561 52069 14761304 180618 0 155184 6115917 19165 65 8792776 48737 1291 462
    // vda t1: 197055 12806 13381170 5886106 22581 52069 14763504 180623 0 155192 6115930 19168 65 8792920 48737 1294 462
    close(vda.r_s, 1.0); // (197055 − 197053) reads / 2 s
    close(vda.rrqm_s, 0.0); // (12806 − 12806) / 2
    close(vda.rkb_s, 38.0); // (13381170 − 13381018) = 152 sectors / 2 / 2 s
    close(vda.rareq_sz, 38.0); // 152 sectors / 2 / 2 reads
    close(vda.r_await, 4.0); // (5886106 − 5886098) = 8 ms / 2 reads
    close(vda.w_s, 10.0); // (22581 − 22561) = 20 writes / 2 s
    close(vda.wrqm_s, 0.0);
    close(vda.wkb_s, 550.0); // (14763504 − 14761304) = 2200 sectors / 2 / 2 s
    close(vda.wareq_sz, 55.0); // 2200 / 2 / 20 writes
    close(vda.w_await, 0.25); // (180623 − 180618) = 5 ms / 20 writes
    close(vda.aqu_sz, 0.0065); // (6115930 − 6115917) = 13 ms / (2 s × 1000)
    close(vda.util, 0.4); // (155192 − 155184) = 8 ms / 2000 ms × 100
    assert_eq!(vda.in_flight, 0);
    close(vda.d_s.unwrap(), 1.5); // (19168 − 19165) = 3 discards / 2 s
    close(vda.dkb_s.unwrap(), 36.0); // (8792920 − 8792776) = 144 sectors / 2 / 2 s
    close(vda.d_await.unwrap(), 0.0); // (48737 − 48737) ms / 3
    close(vda.f_s.unwrap(), 1.5); // (1294 − 1291) = 3 flushes / 2 s
    close(vda.f_await.unwrap(), 0.0); // (462 − 462) ms / 3
    assert!(!vda.is_virtual && !vda.is_partition && !vda.idle);
    let settings = vda.settings.as_ref().unwrap();
    assert_eq!(settings.scheduler.as_deref(), Some("mq-deadline"));
    assert_eq!((settings.read_ahead_kb, settings.nr_requests), (Some(8192), Some(256)));
    assert_eq!((settings.max_sectors_kb, settings.logical_block_size), (Some(4096), Some(512)));
    assert_eq!((settings.rotational, settings.hw_queues), (Some(true), Some(1)));
    assert!(vda.bpf.is_none(), "eBPF is off in fixtures");
}

#[test]
fn basic_iostat_columns_of_the_loop_disk_and_its_partition() {
    let m = model("basic");
    // loop0 t0: 1885 0 15438 59 729 308 118944 63 0 100 134 8 0 522248 0 56 10
    // loop0 t1: 1894 0 15960 62 742 315 129068 67 0 108 144 17 9 630326 2 59 12
    let lo = device(&m, "loop0");
    close(lo.r_s, 4.5); // 9 reads / 2 s
    close(lo.rkb_s, 130.5); // 522 sectors / 2 / 2 s
    close(lo.rareq_sz, 29.0); // 522 / 2 / 9
    close(lo.r_await, 3.0 / 9.0); // 3 ms / 9 reads
    close(lo.w_s, 6.5); // 13 writes / 2 s
    close(lo.wrqm_s, 3.5); // (315 − 308) = 7 merges / 2 s
    close(lo.wkb_s, 2531.0); // 10124 sectors / 2 / 2 s
    close(lo.wareq_sz, 10124.0 / 2.0 / 13.0); // = 389.38…
    close(lo.w_await, 4.0 / 13.0); // 4 ms / 13 writes
    close(lo.aqu_sz, 0.005); // 10 ms / 2000
    close(lo.util, 0.4); // 8 ms / 2000 × 100
    close(lo.d_s.unwrap(), 4.5); // 9 discards (fstrim) / 2 s
    close(lo.dkb_s.unwrap(), 27019.5); // (630326 − 522248) = 108078 sectors / 2 / 2 s
    close(lo.d_await.unwrap(), 2.0 / 9.0); // 2 ms / 9
    close(lo.f_s.unwrap(), 1.5); // (59 − 56) = 3 flushes (fsync) / 2 s
    close(lo.f_await.unwrap(), 2.0 / 3.0); // (12 − 10) = 2 ms / 3
    assert!(lo.is_virtual && !lo.is_partition);

    // loop0p1 t0: 109 0 1284 10 19 71 8970 4 0 16 15 2 0 129026 0 0 0
    // loop0p1 t1: 118 0 1806 12 32 78 19094 9 0 24 24 11 9 237104 2 0 0
    let p1 = device(&m, "loop0p1");
    close(p1.r_s, 4.5); // 9 reads (4 of them the worker's 64 KiB O_DIRECT reads) / 2 s
    close(p1.r_await, 2.0 / 9.0); // (12 − 10) ms / 9
    close(p1.w_await, 5.0 / 13.0); // (9 − 4) ms / 13
    close(p1.aqu_sz, 0.0045); // (24 − 15) = 9 ms / 2000
    close(p1.f_s.unwrap(), 0.0); // the kernel counts flushes on the whole disk only
    close(p1.f_await.unwrap(), 0.0); // 0 flushes → 0, not NaN
    assert!(p1.is_partition && p1.is_virtual);
    let s = p1.settings.as_ref().unwrap();
    assert_eq!(s.start_sector, Some(2048));
    // A partition has no queue: it shows its disk's (loop0's) settings.
    assert_eq!((s.read_ahead_kb, s.scheduler.as_deref(), s.hw_queues), (Some(2560), Some("none"), Some(1)));
}

#[test]
fn basic_dirty_thresholds_equal_what_the_kernel_printed() {
    let m = model("basic").memory;
    // MemFree 21390584 kB / 4 = 5347646 free pages.
    // reserve: DMA min(3840, 8139 + 45) = 3840; DMA32 min(772915, 5120 + 9381) = 14501;
    //          Normal min(1310720, 0 + 15912) = 15912; Movable min(0, 0 + 32) = 0; Device 0 → 34253
    // dirtyable = 5347646 − 34253 + 324221 + 411468 + 1 = 6049083 pages
    assert_eq!(m.dirtyable, 6049083 * 4096);
    // thresh = (20 × 4096 / 100 = 819) × 6049083 / 4096 = 4954198977 / 4096 = 1209521 pages
    assert_eq!(m.dirty_threshold, 1209521 * 4096);
    // bg = (10 × 4096 / 100 = 409) × 6049083 / 4096 = 2474074947 / 4096 = 604022 pages
    assert_eq!(m.dirty_background_threshold, 604022 * 4096);
    assert_eq!((m.dirty_source, m.dirty_background_source), ("ratio", "ratio"));
    // ... and /proc/vmstat at t1 printed nr_dirty_threshold 1209521, nr_dirty_background_threshold 604022.
    assert_eq!(m.kernel_dirty_threshold, Some(m.dirty_threshold));
    assert_eq!(m.kernel_dirty_background_threshold, Some(m.dirty_background_threshold));
}

#[test]
fn basic_memory_gauges_and_vmstat_rates() {
    let m = model("basic").memory;
    assert_eq!(m.total, 24684084 * 1024);
    assert_eq!(m.available, 24190648 * 1024);
    assert_eq!(m.buffers, 9252 * 1024);
    assert_eq!(m.cached, 2942440 * 1024);
    assert_eq!(m.shmem, 8936 * 1024);
    assert_eq!(m.dirty, 504 * 1024);
    assert_eq!(m.writeback, 0);
    assert_eq!(m.active_file, 1645872 * 1024);
    assert_eq!(m.inactive_file, 1296884 * 1024);
    assert_eq!(m.mapped, 16032 * 1024);
    assert_eq!(m.slab_reclaimable, 157820 * 1024);
    assert_eq!((m.dirty_expire_centisecs, m.dirty_writeback_centisecs), (3000, 500));
    let r = &m.rates;
    close(r.pgpgin_kb_s, 170.5); // (6700565 − 6700224) = 341 KB / 2 s
    close(r.pgpgout_kb_s, 1067.0); // (7438402 − 7436268) = 2134 KB / 2 s
    close(r.majfault_s, 1.0); // (10513 − 10511) / 2
    close(r.refault_file_s, 2.0); // (1248661 − 1248657) / 2
    close(r.dirtied_pages_s, 354.0); // (3208602 − 3207894) = 708 / 2
    close(r.written_pages_s, 263.5); // (1846971 − 1846444) = 527 / 2
    close(r.scan_s, 0.0); // no reclaim on this VM
    close(r.steal_s, 0.0);
}

#[test]
fn basic_psi() {
    let psi = model("basic").psi;
    let io = psi.io.unwrap();
    close(io.some_avg10, 6.74); // the kernel's own avg10 at t1
    close(io.some_stall_ms, 8.87); // (109269732 − 109260862) = 8870 µs / 1000
    close(io.full_avg10.unwrap(), 5.91);
    close(io.full_stall_ms.unwrap(), 6.314); // (61540921 − 61534607) = 6314 µs / 1000
    let mem = psi.memory.unwrap();
    close(mem.some_stall_ms, 0.0);
    assert_eq!(mem.full_stall_ms, Some(0.0));
}

#[test]
fn basic_process_rates() {
    let m = model("basic");
    // The worker, t0 → t1: rchar 1719995 → 3030718, wchar 2531 → 1313256, read_bytes 1048576 →
    // 1315840, write_bytes 12288 → 1323008, cancelled_write_bytes 0 → 262144.
    let w = process(&m, 16388);
    assert_eq!(&*w.comm, "io) worker 1");
    close(w.read_bytes_s, 133632.0); // 267264 / 2 (its 4 × 64 KiB O_DIRECT reads + 5 KiB)
    close(w.write_bytes_s, 655360.0); // 1310720 / 2 (1 MiB kept + 256 KiB deleted)
    close(w.rchar_s, 655361.5); // 1310723 / 2
    close(w.wchar_s, 655362.5); // 1310725 / 2
    close(w.cancelled_write_bytes_s, 131072.0); // 262144 / 2 (the deleted 256 KiB)
    close(w.cache_estimate_bytes_s, 521729.5); // (1310723 − 267264) / 2 (the cached 1 MiB re-read)
    assert!(w.io_readable);
    // The capture shell: rchar 2383917 → 4559739, read_bytes 931840 → 1017856
    let sh = process(&m, 16333);
    close(sh.rchar_s, 1087911.0); // 2175822 / 2
    close(sh.cache_estimate_bytes_s, 1044903.0); // (2175822 − 86016) / 2
    let init = process(&m, 1);
    assert!(!init.io_readable);
    close(init.read_bytes_s, 0.0);
    let pids: Vec<u32> = m.processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids, [1, 2, 16333, 16388], "ordered by pid");
    // JSON lists the two with I/O; init (unreadable) and pid 2 (no I/O) are counted.
    let v = serde_json::to_value(&m).unwrap();
    let listed: Vec<u64> =
        v["processes"].as_array().unwrap().iter().map(|p| p["pid"].as_u64().unwrap()).collect();
    assert_eq!(listed, [16333, 16388], "only the processes with I/O in the interval");
    assert_eq!((v["processes_idle"].as_u64(), v["processes_unreadable"].as_u64()), (Some(2), Some(1)));
}

#[test]
fn first_sample_has_gauges_and_zero_rates() {
    let cur = sample("basic", "t1");
    let m = Model::compute(None, &cur, Duration::ZERO);
    assert_eq!(m.interval_s, 0.0);
    let vda = device(&m, "vda");
    assert_eq!((vda.r_s, vda.w_s, vda.util, vda.r_await), (0.0, 0.0, 0.0, 0.0));
    assert_eq!(vda.d_s, Some(0.0));
    assert!(vda.idle);
    assert_eq!(m.memory.dirty_threshold, 1209521 * 4096, "thresholds need one sample only");
    assert_eq!(m.memory.rates.pgpgin_kb_s, 0.0);
    assert_eq!(m.psi.io.as_ref().unwrap().some_stall_ms, 0.0);
    assert_eq!(m.psi.io.as_ref().unwrap().some_avg10, 6.74);
    assert_eq!(process(&m, 16388).read_bytes_s, 0.0);
}

// ---------------------------------------------------------------------------------------------
// synthetic/wrap: 32-bit wrap, a re-created device, dirty_background_bytes ≥ the dirty limit
// ---------------------------------------------------------------------------------------------

#[test]
fn wrap_counters_wrap_at_32_bits() {
    let m = model("synthetic/wrap");
    // sda t0: 4294967290 0 1000 4294967000 100 5 800 300 0 4294966796 4294967100
    // sda t1: 4 0 1160 200 140 7 1120 380 1 1500 600
    let sda = device(&m, "sda");
    close(sda.r_s, 5.0); // (2^32 − 4294967290) + 4 = 10 reads / 2 s
    close(sda.rkb_s, 40.0); // (1160 − 1000) = 160 sectors / 2 / 2 s
    close(sda.rareq_sz, 8.0); // 160 / 2 / 10
    close(sda.r_await, 49.6); // (2^32 − 4294967000) + 200 = 496 ms / 10 reads
    close(sda.w_s, 20.0); // 40 / 2
    close(sda.wrqm_s, 1.0); // 2 / 2
    close(sda.wkb_s, 80.0); // 320 / 2 / 2
    close(sda.wareq_sz, 4.0); // 320 / 2 / 40
    close(sda.w_await, 2.0); // 80 ms / 40
    close(sda.util, 100.0); // (2^32 − 4294966796) + 1500 = 2000 ms / 2000 ms × 100
    close(sda.aqu_sz, 0.398); // (2^32 − 4294967100) + 600 = 796 ms / 2000
    assert_eq!(sda.in_flight, 1);
    assert_eq!((sda.d_s, sda.f_s), (None, None), "14-column lines have no discards or flushes");
}

#[test]
fn wrap_recreated_device_restarts_instead_of_a_bogus_wrap() {
    let m = model("synthetic/wrap");
    // loop0: 5000 reads → 3. A 32-bit wrap would be 4294962299 reads; it is a new device instead.
    let lo = device(&m, "loop0");
    assert_eq!((lo.r_s, lo.rkb_s, lo.util, lo.aqu_sz), (0.0, 0.0, 0.0, 0.0));
    assert!(lo.idle && lo.is_virtual);
}

#[test]
fn wrap_background_bytes_above_the_limit_are_halved() {
    let m = model("synthetic/wrap").memory;
    // MemFree 409600 kB / 4 = 102400 pages; reserve: DMA min(3840, 2000 + 15) = 2015,
    // Normal min(258000, 0 + (750 high − 50 boost)) = 700 → 2715
    // dirtyable = 102400 − 2715 + 20480 + 25600 + 1 = 145766
    assert_eq!(m.dirtyable, 145766 * 4096);
    // thresh = 819 × 145766 / 4096 = 119382354 / 4096 = 29146
    assert_eq!((m.dirty_threshold, m.dirty_source), (29146 * 4096, "ratio"));
    // bg = DIV_ROUND_UP(200000000, 4096) = 48829 ≥ 29146 → 29146 / 2 = 14573
    assert_eq!((m.dirty_background_threshold, m.dirty_background_source), (14573 * 4096, "bytes"));
}

// ---------------------------------------------------------------------------------------------
// synthetic/hotplug: devices and processes coming and going, memory PSI without "full"
// ---------------------------------------------------------------------------------------------

#[test]
fn hotplug_devices_appear_and_disappear() {
    let m = model("synthetic/hotplug");
    let names: Vec<&str> = m.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["sda", "sdc"], "sdb vanished and is dropped; sdc is new");
    let sdc = device(&m, "sdc");
    // New: its 7 lifetime reads are not a rate for this interval.
    assert_eq!((sdc.r_s, sdc.rkb_s, sdc.r_await), (0.0, 0.0, 0.0));
    assert!(sdc.idle);
    assert_eq!(sdc.settings.as_ref().unwrap().hw_queues, Some(2));

    // sda t0: 100 0 800 50 200 0 1600 100 0 120 150 0 0 0 0 10 5
    // sda t1: 300 10 2400 250 600 20 8000 500 2 520 750 4 0 64 8 30 15
    let sda = device(&m, "sda");
    close(sda.r_s, 100.0); // 200 / 2
    close(sda.rrqm_s, 5.0); // 10 / 2
    close(sda.rkb_s, 400.0); // 1600 sectors / 2 / 2
    close(sda.rareq_sz, 4.0); // 1600 / 2 / 200
    close(sda.r_await, 1.0); // 200 ms / 200
    close(sda.w_s, 200.0); // 400 / 2
    close(sda.wrqm_s, 10.0); // 20 / 2
    close(sda.wkb_s, 1600.0); // 6400 / 2 / 2
    close(sda.wareq_sz, 8.0); // 6400 / 2 / 400
    close(sda.w_await, 1.0); // 400 ms / 400
    close(sda.util, 20.0); // 400 ms / 2000 × 100
    close(sda.aqu_sz, 0.3); // 600 / 2000
    assert_eq!(sda.in_flight, 2);
    close(sda.d_s.unwrap(), 2.0); // 4 / 2
    close(sda.dkb_s.unwrap(), 16.0); // 64 / 2 / 2
    close(sda.d_await.unwrap(), 2.0); // 8 ms / 4
    close(sda.f_s.unwrap(), 10.0); // 20 / 2
    close(sda.f_await.unwrap(), 0.5); // 10 ms / 20
    assert!(!sda.idle && !sda.is_virtual);
    assert_eq!(sda.settings.as_ref().unwrap().scheduler.as_deref(), Some("mq-deadline"));
}

#[test]
fn hotplug_processes_reused_pid_new_and_gone() {
    let m = model("synthetic/hotplug");
    let pids: Vec<u32> = m.processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids, [100, 200, 400, 500], "pid 300 exited");
    let pg = process(&m, 100);
    close(pg.rchar_s, 1_500_000.0); // 3000000 / 2
    close(pg.wchar_s, 250_000.0); // 500000 / 2
    close(pg.read_bytes_s, 500_000.0); // 1000000 / 2
    close(pg.write_bytes_s, 200_000.0); // 400000 / 2
    close(pg.cancelled_write_bytes_s, 2048.0); // 4096 / 2
    close(pg.cache_estimate_bytes_s, 1_000_000.0); // (3000000 − 1000000) / 2
                                                   // pid 200's start time changed 6000 → 9000: another process; its rchar 500 → 900000 is no rate.
    let reused = process(&m, 200);
    assert_eq!(&*reused.comm, "new job");
    assert_eq!(reused.rchar_s, 0.0);
    assert!(reused.io_readable);
    assert_eq!(process(&m, 400).rchar_s, 0.0);
    let secret = process(&m, 500);
    assert!(!secret.io_readable);
    assert_eq!(secret.read_bytes_s, 0.0);
}

#[test]
fn hotplug_psi_with_and_without_full() {
    let psi = model("synthetic/hotplug").psi;
    let io = psi.io.unwrap();
    close(io.some_avg10, 2.5);
    close(io.some_stall_ms, 250.0); // (1250000 − 1000000) µs / 1000
    close(io.full_avg10.unwrap(), 1.25);
    close(io.full_stall_ms.unwrap(), 100.0); // (700000 − 600000) µs / 1000
    let mem = psi.memory.unwrap();
    close(mem.some_avg10, 0.1);
    close(mem.some_stall_ms, 3.0); // (8000 − 5000) µs / 1000
    assert_eq!((mem.full_avg10, mem.full_stall_ms), (None, None));
}

#[test]
fn synthetic_vmstat_rates_sum_the_reclaimers_only() {
    let r = model("synthetic/hotplug").memory.rates;
    close(r.pgpgin_kb_s, 1024.0); // 2048 / 2
    close(r.pgpgout_kb_s, 2048.0); // 4096 / 2
    close(r.majfault_s, 5.0); // 10 / 2
    close(r.refault_file_s, 25.0); // 50 / 2
    close(r.scan_s, 60.0); // (80 kswapd + 40 direct) / 2, not the pgscan_file split too
    close(r.steal_s, 40.0); // (60 + 20) / 2
    close(r.dirtied_pages_s, 200.0); // 400 / 2
    close(r.written_pages_s, 150.0); // 300 / 2
}

// ---------------------------------------------------------------------------------------------
// synthetic/old_kernel: 14-column diskstats, no PSI, old vmstat names, dirty_bytes
// ---------------------------------------------------------------------------------------------

#[test]
fn old_kernel_diskstats_without_discards_and_flushes() {
    let m = model("synthetic/old_kernel");
    // sda t0: 1000 100 16000 2000 500 50 8000 1000 0 1500 3000
    // sda t1: 1400 120 22400 2600 700 60 12000 1600 3 2300 4400
    let sda = device(&m, "sda");
    close(sda.r_s, 200.0); // 400 / 2
    close(sda.rrqm_s, 10.0); // 20 / 2
    close(sda.rkb_s, 1600.0); // 6400 / 2 / 2
    close(sda.rareq_sz, 8.0); // 6400 / 2 / 400
    close(sda.r_await, 1.5); // 600 ms / 400
    close(sda.w_s, 100.0); // 200 / 2
    close(sda.wrqm_s, 5.0); // 10 / 2
    close(sda.wkb_s, 1000.0); // 4000 / 2 / 2
    close(sda.wareq_sz, 10.0); // 4000 / 2 / 200
    close(sda.w_await, 3.0); // 600 ms / 200
    close(sda.util, 40.0); // 800 ms / 2000 × 100
    close(sda.aqu_sz, 0.7); // 1400 / 2000
    assert_eq!(sda.in_flight, 3);
    assert_eq!((sda.d_s, sda.dkb_s, sda.d_await, sda.f_s, sda.f_await), (None, None, None, None, None));
    assert_eq!(sda.settings.as_ref().unwrap().scheduler.as_deref(), Some("cfq"));
    let sda1 = device(&m, "sda1");
    assert!(sda1.is_partition);
    let s = sda1.settings.as_ref().unwrap();
    assert_eq!((s.start_sector, s.scheduler.as_deref(), s.nr_requests), (Some(2048), Some("cfq"), Some(64)));
}

#[test]
fn old_kernel_has_no_psi_and_old_refault_name() {
    let m = model("synthetic/old_kernel");
    assert_eq!((m.psi.io.as_ref(), m.psi.memory.as_ref()), (None, None), "absent, not zero");
    assert_eq!(m.header.kernel, "4.14.0-old");
    close(m.memory.rates.refault_file_s, 25.0); // workingset_refault 7000 → 7050, / 2
}

#[test]
fn old_kernel_dirty_bytes_threshold() {
    let m = model("synthetic/old_kernel").memory;
    // thresh from dirty_bytes: DIV_ROUND_UP(100000000, 4096) = 24415 pages (24414.06 rounded up)
    assert_eq!((m.dirty_threshold, m.dirty_source), (24415 * 4096, "bytes"));
    // bg from the ratio: 409 × 145766 / 4096 = 59618294 / 4096 = 14555 (< 24415, kept)
    assert_eq!((m.dirty_background_threshold, m.dirty_background_source), (14555 * 4096, "ratio"));
    assert_eq!(m.kernel_dirty_threshold, None, "this kernel's vmstat does not print it");
}

#[test]
fn missing_root_gives_an_empty_sample_not_a_panic() {
    let s = collect(&SystemRoot::fixture("/nonexistent/ioscope"));
    assert!(s.disks.is_empty() && s.processes.is_empty() && s.zones.is_empty());
    assert_eq!((s.psi.io.is_none(), s.memory.total_bytes), (true, 0));
    let m = Model::compute(Some(&s), &s, TWO_SECONDS);
    assert!(m.devices.is_empty());
}
