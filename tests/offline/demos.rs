//! The demo recordings (`assets/demo/*.rec`, made by `assets/demo/make-demos.sh`) tell their
//! stories: each was recorded with every eBPF program its panes need, lasts 60–120 s, has its
//! moments marked, shows no test process of the project's own, and holds the figures its story is
//! about, in enough intervals to be seen (assets/demo/README.md says where). A re-recording that
//! lost a pane, or a workload that went wrong, fails here.

use std::path::PathBuf;

use ioscope::model::Model;
use ioscope::record::Recording;
use ioscope::replay;

const MIB: f64 = 1024.0 * 1024.0;

/// A demo's recording, its models (one per interval) and the path it was read from.
struct Demo {
    name: &'static str,
    rec: Recording,
    models: Vec<Model>,
}

/// The demo `name` from `IOSCOPE_DEMO_DIR` (to check other recordings, e.g. older ones) or
/// assets/demo.
fn demo(name: &'static str) -> Demo {
    let dir = std::env::var_os("IOSCOPE_DEMO_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/demo"), PathBuf::from);
    let mut rec = Recording::open(&dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let models: Vec<Model> =
        replay::models(&mut rec, None, None).collect::<anyhow::Result<_>>().expect("every sample decodes");
    Demo { name, rec, models }
}

impl Demo {
    /// How many intervals `pred` holds in.
    fn count(&self, pred: impl Fn(&Model) -> bool) -> usize {
        self.models.iter().filter(|m| pred(m)).count()
    }

    /// What every demo needs: eBPF on with its programs attached (not the 1 of 1 of a recording
    /// without the probes), the panes the story names fed, 60–120 s, its moments marked, no test
    /// process of the project in the process list.
    fn common(&self, marks: usize, panes: &[&str]) {
        let name = self.name;
        assert_eq!(self.rec.problem, None, "{name}: the recording is whole");
        let ns = self.rec.mono_ns();
        let secs = (ns.last().unwrap() - ns.first().unwrap()) as f64 / 1e9;
        assert!((60.0..=125.0).contains(&secs), "{name}: {secs:.0} s long, not 60–120 s");
        assert_eq!(self.rec.marks.len(), marks, "{name}: one mark per step of the story");
        let last = self.models.last().expect("samples");
        let attached = last.bpf.programs.iter().filter(|p| p.attached).count();
        assert!(
            last.bpf.enabled && attached >= 10,
            "{name}: eBPF on with its programs, got {attached} attached"
        );
        for pane in panes {
            let fed = self.count(|m| match *pane {
                "cache" => m.cache.is_some(),
                "readahead" => m.readahead.is_some(),
                "files" => !m.files.is_empty(),
                "syncs" => !m.syncs.is_empty(),
                "waits" => m.iowait.as_ref().is_some_and(|w| !w.processes.is_empty()),
                other => panic!("unknown pane {other}"),
            });
            assert!(fed >= 10, "{name}: the {pane} pane has data in {fed} intervals");
        }
        // The project's live tests and benchmark jobs (`live-<hash>`, `live_bench_fio-…`) would be
        // other I/O in the picture, not the story: the recordings are made holding the live-test
        // lock. (Offline test binaries, which other work on a shared machine runs without the
        // lock, may show up.)
        for m in &self.models {
            for p in &m.processes {
                let c = &*p.comm;
                assert!(
                    !(c.starts_with("live-") || c.starts_with("live_")),
                    "{name}: a live test in the picture: {c}"
                );
            }
        }
    }
}

fn loop_dev(m: &Model) -> Option<&ioscope::model::DeviceModel> {
    m.devices.iter().filter(|d| d.name.starts_with("loop")).max_by(|a, b| a.util.total_cmp(&b.util))
}

#[test]
fn cold_vs_warm_read_shows_dd_from_disk_then_from_cache() {
    let d = demo("cold-vs-warm-read.rec");
    // Cold: dd's reads come from the disk: in /proc (read_bytes ≈ rchar) and in the page-cache
    // pane (misses). Warm: each dd reads the same file from the page cache (hits, no disk); the
    // warm runs are over in less than a second, so only the eBPF pane catches every one.
    let cold = |m: &Model| {
        m.processes
            .iter()
            .any(|p| &*p.comm == "dd" && p.rchar_s > 10.0 * MIB && p.read_bytes_s >= 0.9 * p.rchar_s)
            && m.cache_processes.iter().any(|p| p.comm == "dd" && p.disk_read_bytes_s > 10.0 * MIB)
    };
    let warm = |m: &Model| {
        m.cache_processes.iter().any(|p| {
            p.comm == "dd"
                && p.cache_read_bytes_s > 100.0 * MIB
                && p.disk_read_bytes_s <= 0.01 * p.cache_read_bytes_s
        })
    };
    let (n_cold, n_warm) = (d.count(cold), d.count(warm));
    assert!(n_cold >= 10, "dd reads from the disk in {n_cold} intervals");
    assert!(n_warm >= 5, "dd reads from the cache in {n_warm} intervals");
    let last_cold = d.models.iter().rposition(cold);
    let first_warm = d.models.iter().position(warm);
    assert!(last_cold < first_warm, "cold first, then warm");
    // What every demo needs, checked last so that an older recording shows what its story lacks.
    d.common(2, &["cache", "files"]);
}

#[test]
fn small_vs_large_writes_show_high_util_either_way() {
    let d = demo("small-vs-large-writes.rec");
    let busy = |m: &Model, lo: f64, hi: f64| {
        loop_dev(m).is_some_and(|l| l.util >= 90.0 && (lo..hi).contains(&l.wareq_sz) && l.aqu_sz >= 1.0)
    };
    let small = d.count(|m| busy(m, 1.0, 8.01));
    let large = d.count(|m| busy(m, 256.0, 1e9));
    assert!(small >= 10, "%util ≥ 90 with ≤ 8 KiB writes and a queue in {small} intervals");
    assert!(large >= 10, "%util ≥ 90 with ≥ 256 KiB writes and a queue in {large} intervals");
    // What every demo needs, checked last so that an older recording shows what its story lacks.
    d.common(2, &[]);
}

#[test]
fn dirty_threshold_stall_shows_throttled_writers_and_a_long_fsync() {
    let d = demo("dirty-threshold-stall.rec");
    // dd, the big writer, most of the time; the small writer too, when it dirties a page while
    // dirty memory is over the limit.
    for (who, least) in [("dd", 10), ("wal-writer", 1)] {
        let n = d.count(|m| m.cache_processes.iter().any(|p| p.comm == who && p.throttled_ms > 0.0));
        assert!(n >= least, "{who} throttled (by name, in the page-cache pane) in {n} intervals");
    }
    let banner = d.count(|m| m.cache.as_ref().is_some_and(|c| c.throttled_processes > 0));
    assert!(banner >= 10, "writers throttled in {banner} intervals");
    let long_fsync = d.models.iter().flat_map(|m| &m.syncs).any(|s| {
        s.comm == "dd"
            && s.path.as_deref().is_some_and(|p| p.ends_with("/big"))
            && (s.max_s >= 2.0 || s.running_s >= 2.0)
    });
    assert!(long_fsync, "dd's fsync of .../big lasts over 2 s, with its path");
    // What every demo needs, checked last so that an older recording shows what its story lacks.
    d.common(2, &["cache", "syncs", "files"]);
}

#[test]
fn readahead_waste_shows_its_hint() {
    let d = demo("readahead-waste.rec");
    let hinted = d.count(|m| {
        m.readahead
            .as_ref()
            .is_some_and(|r| r.hints.iter().any(|h| h.contains("lower read_ahead_kb on loop")))
    });
    assert!(hinted >= 10, "the readahead hint shows in {hinted} intervals");
    let wasted = d.count(|m| {
        m.readahead
            .as_ref()
            .is_some_and(|r| r.files.iter().any(|f| f.path.ends_with("/table.db") && f.wasted_pages >= 256))
    });
    assert!(wasted >= 10, "table.db wastes read-ahead pages in {wasted} intervals");
    // What every demo needs, checked last so that an older recording shows what its story lacks.
    d.common(2, &["readahead", "files", "cache"]);
}

#[test]
fn iowait_shows_who_waits_for_what() {
    let d = demo("iowait-who-waits.rec");
    for (who, cause) in [("backup", "page_cache_read"), ("db-query", "direct_io"), ("wal-writer", "sync")] {
        let n = d.count(|m| {
            m.iowait.as_ref().is_some_and(|w| {
                w.processes.iter().any(|p| {
                    p.comm == who
                        && p.wait_pct >= 20.0
                        && p.by_cause_s.get(cause).copied().unwrap_or(0.0) >= 0.5 * p.wait_s
                })
            })
        });
        assert!(n >= 10, "{who} blocked on the disk mostly for {cause} in {n} intervals");
    }
    // What every demo needs, checked last so that an older recording shows what its story lacks.
    d.common(1, &["waits", "cache", "syncs"]);
}
