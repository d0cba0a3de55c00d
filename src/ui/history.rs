//! Short history of a few memory gauges for the sparklines. Kept in UI state (not in the Model, which
//! is a function of two samples only), fed by the event loop with every new model.

use std::collections::VecDeque;

use crate::model::Model;

/// Enough points for a 200-column-wide sparkline; older points are dropped.
pub const HISTORY_LEN: usize = 512;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    /// Page cache size (meminfo Cached), bytes.
    pub cached: VecDeque<u64>,
    /// Dirty + Writeback, bytes: what the dirty thresholds are compared against.
    pub dirty: VecDeque<u64>,
}

impl History {
    pub fn push(&mut self, model: &Model) {
        push_bounded(&mut self.cached, model.memory.cached);
        push_bounded(&mut self.dirty, model.memory.dirty + model.memory.writeback);
    }

    /// The newest `n` points of a series, oldest first (what a sparkline `n` cells wide shows).
    pub fn last(series: &VecDeque<u64>, n: usize) -> Vec<u64> {
        let skip = series.len().saturating_sub(n);
        series.iter().skip(skip).copied().collect()
    }
}

fn push_bounded(series: &mut VecDeque<u64>, v: u64) {
    if series.len() == HISTORY_LEN {
        series.pop_front();
    }
    series.push_back(v);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(cached: u64, dirty: u64, writeback: u64) -> Model {
        let mut m = Model::default();
        m.memory.cached = cached;
        m.memory.dirty = dirty;
        m.memory.writeback = writeback;
        m
    }

    #[test]
    fn keeps_the_newest_points_and_sums_dirty_and_writeback() {
        let mut h = History::default();
        for i in 0..(HISTORY_LEN as u64 + 10) {
            h.push(&model(i, i, 1));
        }
        assert_eq!(h.cached.len(), HISTORY_LEN);
        assert_eq!(h.cached.front(), Some(&10));
        assert_eq!(h.dirty.back(), Some(&(HISTORY_LEN as u64 + 10)));
        assert_eq!(
            History::last(&h.cached, 3),
            vec![HISTORY_LEN as u64 + 7, HISTORY_LEN as u64 + 8, HISTORY_LEN as u64 + 9]
        );
        let mut short = History::default();
        short.push(&model(5, 0, 0));
        assert_eq!(History::last(&short.cached, 10), vec![5]);
    }
}
