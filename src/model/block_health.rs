//! The block probes' own health, for the probe-health view and `bpf.block_health` in JSON: events
//! per second per program, events that could not be tracked, and how full each map is. Users of
//! tracing tools suffer silent breakage; these figures say what is and is not being measured.

use serde::Serialize;

use super::counter::{delta, per_second};
use crate::sample::{BlockProbeHealth, Sample};

/// JSON: `bpf.block_health.programs[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProgramHealth {
    pub program: String,
    pub tracepoint: String,
    pub events_s: f64,
    pub events_total: u64,
    /// Runs the kernel skipped (another BPF program was running on that CPU): events this program
    /// never saw, in the interval and since attach.
    pub missed: u64,
    pub missed_total: u64,
    /// Average cost of one run in the interval, ns, when the kernel times programs
    /// (`sysctl kernel.bpf_stats_enabled=1`); null otherwise.
    pub ns_per_run: Option<f64>,
}

/// JSON: `bpf.block_health.lost[]`: events the probes saw but could not fully use.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LostCounter {
    pub what: &'static str,
    /// In this interval, and since attach.
    pub interval: u64,
    pub total: u64,
    /// What it costs the figures.
    pub effect: &'static str,
}

/// JSON: `bpf.block_health.maps[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MapFill {
    pub map: &'static str,
    pub entries: u64,
    pub capacity: u64,
    pub fill_pct: f64,
}

/// JSON: `bpf.block_health`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BlockHealthModel {
    pub programs: Vec<ProgramHealth>,
    pub lost: Vec<LostCounter>,
    pub maps: Vec<MapFill>,
}

/// None when the block probes are not loaded (no events vector in the sample).
pub fn compute(prev: Option<&Sample>, cur: &Sample, secs: f64) -> Option<BlockHealthModel> {
    let c = &cur.bpf.block_health;
    if c.events.is_empty() {
        return None;
    }
    // Without a previous read of the probes, no interval: rates and interval counts are 0.
    let p = prev.map(|p| &p.bpf.block_health).filter(|p| !p.events.is_empty()).unwrap_or(c);
    let programs = ioscope_common::block::PROGRAMS
        .iter()
        .enumerate()
        .filter(|(_, (program, _))| *program != ioscope_common::block::RETIRED)
        .map(|(i, (program, event))| {
            let now = c.events.get(i).copied().unwrap_or(0);
            let before = p.events.get(i).copied().unwrap_or(now);
            let missed = c.missed.get(i).copied().unwrap_or(0);
            let missed_before = p.missed.get(i).copied().unwrap_or(missed);
            ProgramHealth {
                program: program.to_string(),
                tracepoint: format!("block:{event}"),
                events_s: per_second(delta(before, now), secs),
                events_total: now,
                missed: delta(missed_before, missed),
                missed_total: missed,
                ns_per_run: {
                    let get =
                        |h: &BlockProbeHealth, v: fn(&BlockProbeHealth) -> &Vec<u64>| v(h).get(i).copied();
                    let runs = get(c, |h| &h.run_cnt).zip(get(p, |h| &h.run_cnt)).map(|(c, p)| delta(p, c));
                    let ns =
                        get(c, |h| &h.run_time_ns).zip(get(p, |h| &h.run_time_ns)).map(|(c, p)| delta(p, c));
                    match (runs, ns) {
                        (Some(runs), Some(ns)) if runs > 0 && ns > 0 => Some(ns as f64 / runs as f64),
                        _ => None,
                    }
                },
            }
        })
        .collect();
    let lost = |what, f: fn(&BlockProbeHealth) -> u64, effect| LostCounter {
        what,
        interval: delta(f(p), f(c)),
        total: f(c),
        effect,
    };
    let fill = |map, entries: u64, capacity: u64| MapFill {
        map,
        entries,
        capacity,
        fill_pct: if capacity > 0 { entries as f64 / capacity as f64 * 100.0 } else { 0.0 },
    };
    let skipped = |h: &BlockProbeHealth| h.missed.iter().sum::<u64>();
    Some(BlockHealthModel {
        programs,
        lost: vec![
            LostCounter {
                what: "runs skipped by the kernel",
                interval: delta(skipped(p), skipped(c)),
                total: skipped(c),
                effect: "events unseen (another BPF program ran on the CPU)",
            },
            lost("request slot taken over", |h| h.reqs_full, "requests without latency or submitter"),
            lost("process map full", |h| h.procs_full, "I/O not credited to a process"),
            lost("device map full", |h| h.devs_full, "devices not counted"),
            lost("issue without start", |h| h.issue_unmatched, "no queue time (started before attach)"),
            lost(
                "completion without issue",
                |h| h.complete_unmatched,
                "no device time (also: empty preflush writes the flush machinery completes)",
            ),
            lost("field read errors", |h| h.read_errors, "events dropped"),
            lost("stale requests evicted", |h| h.stale_evicted, "completions never seen"),
        ]
        .into_iter()
        .chain(block_files_lost(prev, cur))
        .collect(),
        maps: vec![
            fill("BLOCK_REQS", c.reqs_entries, c.reqs_capacity),
            fill("BLOCK_PROC", c.procs_entries, c.procs_capacity),
            fill("BLOCK_DEV", c.devs_entries, c.devs_capacity),
        ],
    })
}

/// Completed requests `block_rq_complete` did not send for mapping to files.
fn block_files_lost(prev: Option<&Sample>, cur: &Sample) -> Vec<LostCounter> {
    let Some(c) = cur.bpf.block_files.as_ref() else { return Vec::new() };
    let p = prev.and_then(|p| p.bpf.block_files.as_ref()).unwrap_or(c);
    vec![
        LostCounter {
            what: "requests not mapped: over the rate limit",
            interval: delta(p.rate_dropped, c.rate_dropped),
            total: c.rate_dropped,
            effect: "files' blk figures are a sample",
        },
        LostCounter {
            what: "requests not mapped: ring buffer full",
            interval: delta(p.ring_dropped, c.ring_dropped),
            total: c.ring_dropped,
            effect: "files' blk figures are a sample",
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(events: u64, reqs_full: u64, entries: u64) -> Sample {
        let mut s = Sample::default();
        s.bpf.block_health = BlockProbeHealth {
            events: vec![events, 0, events, events, events],
            missed: vec![0, 0, 0, events / 1000, 0],
            run_time_ns: vec![events * 150, 0, 0, 0, 0],
            run_cnt: vec![events, 0, 0, 0, 0],
            reqs_full,
            reqs_entries: entries,
            reqs_capacity: 16384,
            ..Default::default()
        };
        s
    }

    #[test]
    fn rates_interval_losses_and_fill_by_hand() {
        let h = compute(Some(&sample(1000, 2, 0)), &sample(3000, 7, 4096), 2.0).unwrap();
        assert_eq!(h.programs[0].tracepoint, "block:block_io_start");
        assert_eq!((h.programs[0].events_s, h.programs[0].events_total), (1000.0, 3000));
        assert_eq!(h.programs[1].events_s, 0.0);
        assert_eq!((h.programs[3].missed, h.programs[3].missed_total), (2, 3));
        // 300000 ns over 2000 runs; without kernel timing, no figure.
        assert_eq!((h.programs[0].ns_per_run, h.programs[1].ns_per_run), (Some(150.0), None));
        assert_eq!(
            (h.lost[0].what, h.lost[0].interval, h.lost[0].total),
            ("runs skipped by the kernel", 2, 3)
        );
        let full = &h.lost[1];
        assert_eq!((full.what, full.interval, full.total), ("request slot taken over", 5, 7));
        assert_eq!((h.maps[0].map, h.maps[0].fill_pct), ("BLOCK_REQS", 25.0));
        // No block probes: no health; first read: no interval.
        assert!(compute(None, &Sample::default(), 1.0).is_none());
        // With the request ring: the requests not sent for mapping to files.
        let ring = |rate: u64, ring: u64| {
            let mut s = sample(1000, 2, 0);
            s.bpf.block_files = Some(crate::sample::BlockFilesSample {
                rate_dropped: rate,
                ring_dropped: ring,
                ..Default::default()
            });
            s
        };
        let h = compute(Some(&ring(100, 0)), &ring(160, 3), 1.0).unwrap();
        let n = h.lost.len();
        assert_eq!(
            (h.lost[n - 2].what, h.lost[n - 2].interval, h.lost[n - 2].total),
            ("requests not mapped: over the rate limit", 60, 160)
        );
        assert_eq!((h.lost[n - 1].interval, h.lost[n - 1].total), (3, 3));
        assert_eq!(compute(None, &sample(10, 1, 0), 1.0).unwrap().lost[1].interval, 0);
    }
}
