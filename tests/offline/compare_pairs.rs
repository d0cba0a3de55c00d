//! `compare` on real before/after pairs (tests/fixtures/recordings/make_pairs.sh records them):
//! the change the user made is within the top 5 rows of its pane, and what merely churned
//! (kworkers, a process appearing with a tiny rate, a latency on a handful of requests) does not
//! lead.
//!
//! - redis-always → redis-everysec: Redis' `appendfsync always` (an fdatasync per write) then
//!   `everysec`. The loop device's writes per second fall from ~135 to ~5, the fdatasync calls
//!   of redis-server from ~45/s to none (a background thread then syncs once a second).
//! - cache-outgrows → cache-fits: a random reader of a 160 MiB file in a 64 MiB memory cgroup,
//!   then in 512 MiB. The loop device's reads fall from ~5,000/s to 0, python3's hit % rises
//!   from ~45 to 100.

use std::path::PathBuf;

use ioscope::compare::{self, CompareOptions, Comparison, RangeSpec};
use ioscope::model::compare::MetricComparison;

fn pair(a: &str, b: &str) -> Comparison {
    let spec = |f: &str| {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/recordings").join(f);
        RangeSpec { path: p, from: None, to: None }
    };
    let opts = CompareOptions { a: spec(a), b: spec(b), json: true, top: 15, text: true, color: false };
    compare::build(&opts).unwrap()
}

fn pane<'a>(c: &'a Comparison, name: &str) -> &'a [MetricComparison] {
    &c.panes.iter().find(|p| p.pane == name).unwrap().metrics
}

/// The rank (from 1) of the first row whose name is one of `names`.
fn rank(rows: &[MetricComparison], names: &[&str]) -> usize {
    rows.iter().position(|m| names.contains(&m.metric.as_str())).map_or(usize::MAX, |i| i + 1)
}

fn listing(rows: &[MetricComparison]) -> String {
    rows.iter()
        .take(8)
        .map(|m| {
            format!(
                "{} {:.3} → {:.3} score {:.3}{}",
                m.metric,
                m.a_avg,
                m.b_avg,
                m.score,
                if m.within_noise { " ~" } else { "" }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// No pane is led by a kworker, nor by a row whose larger side is under 1 % of the largest of
/// its unit in the pane.
fn churn_does_not_lead(c: &Comparison) {
    for p in &c.panes {
        let Some(top) = p.metrics.first() else { continue };
        assert!(
            !top.metric.contains("kworker"),
            "{} led by {}:\n{}",
            p.pane,
            top.metric,
            listing(&p.metrics)
        );
        assert!(top.score > 0.0, "{} led by a row without a change:\n{}", p.pane, listing(&p.metrics));
    }
}

#[test]
fn redis_always_to_everysec_puts_the_write_and_fsync_rates_on_top() {
    let c = pair("redis-always.rec", "redis-everysec.rec");
    let dev = pane(&c, "devices");
    let w = rank(dev, &["loop0 w_s", "loop0 bpf.write_iops", "loop0 bpf.block.write.iops"]);
    assert!(w <= 5, "the device's writes rank {w}:\n{}", listing(dev));
    let ws = dev.iter().find(|m| m.metric == "loop0 w_s").unwrap();
    assert!(ws.a_avg > 100.0 && ws.b_avg < 10.0, "{ws:?}");
    let syncs = pane(&c, "syncs");
    let s = rank(syncs, &["redis-server calls_s"]);
    assert!(s <= 5, "redis-server's fsync rate ranks {s}:\n{}", listing(syncs));
    let calls = &syncs[s - 1];
    assert!(calls.a_avg > 20.0 && calls.b_avg == 0.0, "{calls:?}");
    churn_does_not_lead(&c);
    // The 4 KiB "new" reads of a device busy writing rank below its writes.
    if let Some(r) = dev.iter().position(|m| m.metric == "loop0 rkb_s") {
        assert!(r + 1 > w, "loop0 rkb_s at {} above the writes at {w}", r + 1);
    }
}

#[test]
fn a_reader_outgrowing_memory_then_fitting_puts_device_reads_and_hit_pct_on_top() {
    let c = pair("cache-outgrows.rec", "cache-fits.rec");
    let dev = pane(&c, "devices");
    let r = rank(dev, &["loop0 r_s", "loop0 rkb_s", "loop0 bpf.read_iops", "loop0 bpf.read_bytes_s"]);
    assert!(r <= 5, "the device's reads rank {r}:\n{}", listing(dev));
    let rs = dev.iter().find(|m| m.metric == "loop0 r_s").unwrap();
    assert!(rs.a_avg > 1000.0 && rs.b_avg == 0.0 && rs.change_pct == Some(-100.0), "{rs:?}");
    let cache = pane(&c, "cache");
    let h = rank(cache, &["python3 hit_pct"]);
    assert!(h <= 5, "python3's hit % ranks {h}:\n{}", listing(cache));
    let hit = &cache[h - 1];
    assert!(hit.a_avg < 70.0 && hit.b_avg > 99.0 && hit.unit == "%", "{hit:?}");
    let misses = rank(cache, &["python3 misses_s"]);
    assert!(misses <= 20, "python3's misses/s rank {misses}:\n{}", listing(cache));
    churn_does_not_lead(&c);
}

#[test]
fn the_text_table_marks_noise_and_names_the_sync_pane() {
    let c = pair("redis-always.rec", "redis-everysec.rec");
    let t = compare::text(&c, 5);
    assert!(t.contains("Sync calls"), "{t}");
    // Labels, not JSON keys.
    assert!(t.contains("redis-server calls/s") && !t.contains("calls_s"), "{t}");
    assert!(t.contains("~ marks a change within"), "{t}");
}
