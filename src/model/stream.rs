//! One stream of Models: the one place that keeps the previous Sample and folds the next one into
//! a Model. Every mode turns samples into Models through a [`Stream`]: the live TUI, `--once` and
//! `--batch`, `serve`, the bench's monitor panes, and replay (fed from the file, restarted where
//! the player jumps).
//!
//! A Model is still a pure function of (previous, current, elapsed) ([`Model::compute`]); what a
//! Stream adds is [`Carried`]: parts of the last Model that the next reuses when their inputs did
//! not change. It changes how fast a Model is made, never what it holds.

use std::sync::Arc;
use std::time::Duration;

use super::{panes, readahead, Model};
use crate::sample::Sample;

/// What one Model hands to the next of its stream: the panes' states while the eBPF status is the
/// same ([`panes::compute_reusing`]) and the readahead rows of files whose sample row did not
/// change ([`readahead::compute_reusing`]).
#[derive(Clone, Debug, Default)]
pub struct Carried {
    pub(super) panes: panes::PanesMemo,
    pub(super) readahead: readahead::SteadyRows,
}

/// The previous Sample and what its Model carries to the next.
#[derive(Clone, Debug, Default)]
pub struct Stream {
    prev: Option<Arc<Sample>>,
    carried: Carried,
}

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    /// The Model between the previous Sample and `cur`, elapsed taken from their monotonic clocks
    /// (the gauges only, rates 0, for the first); `cur` becomes the previous one.
    pub fn advance(&mut self, cur: impl Into<Arc<Sample>>) -> Model {
        let cur = cur.into();
        let model = match self.prev.as_deref() {
            Some(prev) => {
                let elapsed = Duration::from_nanos(cur.mono_ns.saturating_sub(prev.mono_ns));
                Model::compute_carrying(Some(prev), &cur, elapsed, &mut self.carried)
            }
            None => Model::compute_carrying(None, &cur, Duration::ZERO, &mut self.carried),
        };
        self.prev = Some(cur);
        model
    }

    /// The last Sample folded in.
    pub fn latest(&self) -> Option<&Arc<Sample>> {
        self.prev.as_ref()
    }

    /// Starts again from `prev` (replay's jumps): the next [`Stream::advance`] gives the Model
    /// between it and the Sample it is given (the first's gauges when None).
    pub fn restart(&mut self, prev: Option<Arc<Sample>>) {
        self.prev = prev;
        self.carried = Carried::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::readahead::{RaFileSample, ReadaheadSample};
    use crate::sample::{BpfProgramStatus, BpfSample, BpfStatus, DiskStat};

    /// Samples one second apart whose eBPF status (one shared program list) and one readahead
    /// row stay the same, as a live run's do, while the disk and another file move.
    fn samples() -> Vec<Sample> {
        let programs = Arc::new(vec![BpfProgramStatus {
            program: "block_io_start".into(),
            tracepoint: "block:block_io_start".into(),
            attached: true,
            ..Default::default()
        }]);
        let steady = Arc::new(RaFileSample {
            dev: 7 << 20,
            ino: 21,
            ra_pages: 40,
            used_pages: 8,
            ..Default::default()
        });
        (0..6u64)
            .map(|i| Sample {
                mono_ns: i * 1_000_000_000,
                page_size: 4096,
                disks: vec![DiskStat {
                    major: 7,
                    name: "loop0".into(),
                    sectors_read: 100 * i * i,
                    ..Default::default()
                }],
                bpf: BpfSample {
                    status: BpfStatus { enabled: true, reason: None, programs: programs.clone() },
                    readahead: Some(ReadaheadSample {
                        files: vec![
                            steady.clone(),
                            Arc::new(RaFileSample {
                                dev: 7 << 20,
                                ino: 22,
                                ra_pages: 10 * i,
                                ..Default::default()
                            }),
                        ],
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            })
            .collect()
    }

    /// A live mode (one stream, sample after sample) and replay (a stream restarted at each
    /// position, as after a jump) give the same Models, and the same as the pure function.
    #[test]
    fn two_modes_fed_the_same_samples_produce_equal_models() {
        let s = samples();
        let mut live = Stream::new();
        let mut replay = Stream::new();
        for (i, cur) in s.iter().enumerate() {
            let live_model = live.advance(cur.clone());
            replay.restart(i.checked_sub(1).map(|p| Arc::new(s[p].clone())));
            let replay_model = replay.advance(cur.clone());
            let pure = match i {
                0 => Model::compute(None, cur, Duration::ZERO),
                _ => Model::between(&s[i - 1], cur),
            };
            assert_eq!(live_model, replay_model, "sample {i}");
            assert_eq!(live_model, pure, "sample {i}");
            assert_eq!(live.latest().map(|l| l.mono_ns), Some(cur.mono_ns));
        }
        let last = live.advance(s[5].clone());
        assert_eq!(last.interval_s, 0.0, "the same sample twice: no time passed");
    }

    /// What the stream carries is reused: the panes' states and the steady readahead row are the
    /// last Model's own (the same allocation), a moving row is built again.
    #[test]
    fn the_stream_carries_what_did_not_change() {
        let s = samples();
        let mut stream = Stream::new();
        stream.advance(s[0].clone());
        let a = stream.advance(s[1].clone());
        let b = stream.advance(s[2].clone());
        assert!(Arc::ptr_eq(&a.bpf.panes, &b.bpf.panes));
        let row = |m: &Model, ino| m.readahead.as_ref().unwrap().files.iter().find(|f| f.ino == ino).cloned();
        assert!(Arc::ptr_eq(&row(&a, 21).unwrap(), &row(&b, 21).unwrap()));
        assert!(!Arc::ptr_eq(&row(&a, 22).unwrap(), &row(&b, 22).unwrap()));
        // Restarted: nothing carried over.
        stream.restart(Some(Arc::new(s[2].clone())));
        let c = stream.advance(s[3].clone());
        assert!(!Arc::ptr_eq(&b.bpf.panes, &c.bpf.panes));
        assert_eq!(*b.bpf.panes, *c.bpf.panes);
    }
}
