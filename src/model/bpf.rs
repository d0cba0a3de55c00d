//! The eBPF side of a Model: whether eBPF is on and why not, each program's status, the block
//! probes' health, the eBPF-fed panes' liveness and the maps' memory.

use serde::Serialize;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BpfModel {
    pub enabled: bool,
    pub reason: Option<String>,
    pub programs: std::sync::Arc<Vec<crate::sample::BpfProgramStatus>>,
    /// The block probes' health over the interval; null without them.
    pub block_health: Option<super::block_health::BlockHealthModel>,
    /// Per eBPF-fed pane: live, or what is missing and why (src/model/panes.rs).
    pub panes: std::sync::Arc<Vec<super::panes::PaneStatus>>,
    /// The eBPF maps' kernel memory, bytes: all of them, and each map's (largest first; empty
    /// when eBPF is off). See src/bpf/map_memory.rs.
    pub maps_bytes: u64,
    pub maps: std::sync::Arc<Vec<crate::sample::BpfMapMemory>>,
    /// Each program's runs per second and average ns per run over the interval, from the kernel's
    /// run statistics (`bpf.programs[].run_cnt`, `run_time_ns`): only programs whose run count
    /// moved, so empty while the statistics are off.
    pub runs: Vec<ProgramRuns>,
}

/// JSON: `bpf.runs[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProgramRuns {
    pub program: String,
    pub runs_s: f64,
    pub ns_per_run: Option<f64>,
}

/// The programs' runs over the interval, from the run statistics of both samples.
pub fn runs(
    prev: Option<&crate::sample::Sample>,
    cur: &crate::sample::Sample,
    secs: f64,
) -> Vec<ProgramRuns> {
    use super::counter::{delta, per_second};
    let Some(prev) = prev else { return Vec::new() };
    cur.bpf
        .status
        .programs
        .iter()
        .filter_map(|c| {
            let p = prev.bpf.status.programs.iter().find(|p| p.program == c.program)?;
            let runs = delta(p.run_cnt, c.run_cnt);
            if runs == 0 || c.run_cnt < p.run_cnt {
                return None;
            }
            let ns = delta(p.run_time_ns, c.run_time_ns);
            Some(ProgramRuns {
                program: c.program.clone(),
                runs_s: per_second(runs, secs),
                ns_per_run: (ns > 0).then(|| ns as f64 / runs as f64),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{BpfProgramStatus, Sample};

    fn sample(run_cnt: u64, run_time_ns: u64) -> Sample {
        let mut s = Sample::default();
        s.bpf.status.programs =
            vec![BpfProgramStatus { program: "vfs_read".into(), run_cnt, run_time_ns, ..Default::default() }]
                .into();
        s
    }

    #[test]
    fn runs_are_the_interval_s_run_count_and_time() {
        // 5,000 runs in 0.5 s taking 150,000 ns: 10,000 runs/s at 30 ns a run.
        let r = runs(Some(&sample(1_000, 50_000)), &sample(6_000, 200_000), 0.5);
        assert_eq!(
            r,
            vec![ProgramRuns { program: "vfs_read".into(), runs_s: 10_000.0, ns_per_run: Some(30.0) }]
        );
        // Statistics off (counts that do not move), or no previous sample: nothing.
        assert!(runs(Some(&sample(6_000, 200_000)), &sample(6_000, 200_000), 1.0).is_empty());
        assert!(runs(None, &sample(6_000, 200_000), 1.0).is_empty());
    }
}
