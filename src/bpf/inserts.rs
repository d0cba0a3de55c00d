//! Scans skipped while a hash map stays empty (ioscope_common::inserts). A batch read visits every
//! bucket of a hash map, full or not: FILE_IO's 16,384, RA_FILES's 8,192 and SYNC_INFLIGHT's
//! 4,096 took ~60 µs of a quiet machine's sample (~6 % of a core's 1 % at `--interval 0.1`),
//! each sample, to find nothing. The programs count each insert into these maps after it; a map
//! the last scan left empty whose count has not moved since is still empty, and one system call
//! (the counter's per-CPU values) replaces the scan.

use std::time::Instant;

use anyhow::{anyhow, Result};
use aya::maps::{MapData, PerCpuArray};
use aya::Ebpf;

/// One map's insert counter and what the last scan of the map found.
pub struct EmptyGate {
    counter: PerCpuArray<MapData, u64>,
    /// The count read before the last scan, when that scan left the map empty.
    empty_at: Option<u64>,
    /// The count read by the last [`EmptyGate::needed`] that asked for a scan.
    pending: Option<u64>,
    /// When the map was last scanned: at least every [`crate::util::SLOW_REFRESH`] regardless.
    scanned_at: Option<Instant>,
    /// The count read before the last scan, whatever it left.
    scanned_count: Option<u64>,
}

/// What a read of a map needs, by [`EmptyGate::need`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// The map is empty, as the last scan left it.
    Nothing,
    /// Nothing was inserted since the last scan, and nothing the caller knows of updated an
    /// entry since its last read (`steady`): the map holds what that read found.
    Same,
    /// Nothing was inserted since the last scan: the keys it left (and the caller kept) are all
    /// the map can hold, and looking them up one by one gives what a scan would.
    Keys,
    /// A scan, then [`EmptyGate::scanned`].
    Scan,
}

impl EmptyGate {
    /// Takes the counter map `name` out of the loaded object.
    pub fn take(ebpf: &mut Ebpf, name: &str) -> Result<EmptyGate> {
        let map = ebpf.take_map(name).ok_or_else(|| anyhow!("map {name} is not in the eBPF object"))?;
        Ok(EmptyGate {
            counter: PerCpuArray::try_from(map)?,
            empty_at: None,
            pending: None,
            scanned_at: None,
            scanned_count: None,
        })
    }

    /// Whether the map must be scanned now: not when the last scan left it empty, nothing was
    /// inserted since, and that scan is recent. A counter that cannot be read asks for a scan.
    pub fn needed(&mut self, now: Instant) -> bool {
        let (count, recent) = self.observe(now);
        if !scan(count, recent, self.empty_at) {
            return false;
        }
        self.pending = count;
        true
    }

    /// [`EmptyGate::needed`], for a map the programs only insert into and whose reader keeps
    /// the keys a scan leaves: while nothing was inserted since the last scan, which is recent,
    /// the `kept` keys are all the map holds, and up to `keys_max` of them are looked up instead
    /// of visiting every bucket.
    /// `steady`: no entry was updated since the caller's last read (by a counter of its own).
    pub fn need(&mut self, now: Instant, kept: usize, keys_max: usize, steady: bool) -> Need {
        let (count, recent) = self.observe(now);
        let need = decide(count, recent, self.empty_at, self.scanned_count, kept <= keys_max, steady);
        if need == Need::Scan {
            self.pending = count;
        }
        need
    }

    /// The insert count summed over the CPUs (None when unreadable), and whether the last scan
    /// is recent (within [`crate::util::SLOW_REFRESH`]).
    fn observe(&self, now: Instant) -> (Option<u64>, bool) {
        let count = self.counter.get(&0, 0).ok().map(|v| v.iter().fold(0u64, |a, b| a.wrapping_add(*b)));
        let recent = self.scanned_at.is_some_and(|t| now.duration_since(t) < crate::util::SLOW_REFRESH);
        (count, recent)
    }

    /// After the scan [`EmptyGate::needed`] asked for: whether it left the map empty (every
    /// entry drained or removed; false when unsure).
    pub fn scanned(&mut self, left_empty: bool, now: Instant) {
        let count = self.pending.take();
        self.empty_at = if left_empty { count } else { None };
        self.scanned_count = count;
        self.scanned_at = Some(now);
    }
}

/// A map's last read, kept with what counters read just before it said (the key), for maps that
/// are never empty but updated in place: CACHE_PROCS, SYNC_STATS, the block tables. Every count
/// the programs make in such a map also moves a counter userspace reads anyway (and moves it
/// first, or in the same run), so while a fresh read of those counters equals the key, the map
/// holds what was last read. Reused for at most [`crate::util::SLOW_REFRESH`] after the read.
pub struct Reuse<K, V> {
    last: Option<(K, V, Instant)>,
}

impl<K, V> Default for Reuse<K, V> {
    fn default() -> Self {
        Reuse { last: None }
    }
}

impl<K: PartialEq, V> Reuse<K, V> {
    /// The value last read, when `key` (the counters as read now, before the map) equals the key
    /// read before it and that read is recent; else None: read the map, then [`Reuse::put`].
    pub fn get(&self, key: &K, now: Instant) -> Option<&V> {
        let (k, v, at) = self.last.as_ref()?;
        (k == key && now.duration_since(*at) < crate::util::SLOW_REFRESH).then_some(v)
    }

    /// A fresh read of the map, `key` read just before it.
    pub fn put(&mut self, key: K, value: V, now: Instant) {
        self.last = Some((key, value, now));
    }

    /// The value kept, to drop what the caller removed from the map itself (exited processes).
    pub fn value_mut(&mut self) -> Option<&mut V> {
        self.last.as_mut().map(|(_, v, _)| v)
    }
}

/// [`EmptyGate::needed`]'s decision from the count now, whether the last scan is recent, and the
/// count before the last scan when it left the map empty.
fn scan(count: Option<u64>, recent: bool, empty_at: Option<u64>) -> bool {
    !(recent && count.is_some() && count == empty_at)
}

/// [`EmptyGate::need`]'s decision: also the count before the last scan, and whether the keys it
/// left are few enough to look up.
fn decide(
    count: Option<u64>,
    recent: bool,
    empty_at: Option<u64>,
    scanned: Option<u64>,
    few: bool,
    steady: bool,
) -> Need {
    let no_insert = recent && count.is_some() && count == scanned;
    if !scan(count, recent, empty_at) {
        Need::Nothing
    } else if no_insert && steady {
        Need::Same
    } else if no_insert && few {
        Need::Keys
    } else {
        Need::Scan
    }
}

#[cfg(test)]
mod tests {
    use super::{decide, scan, Need, Reuse};
    use std::time::{Duration, Instant};

    #[test]
    fn a_read_is_reused_while_its_key_holds_and_for_at_most_slow_refresh() {
        let t0 = Instant::now();
        let mut r: Reuse<u64, &str> = Reuse::default();
        assert_eq!(r.get(&1, t0), None, "nothing read yet");
        r.put(1, "read at 1", t0);
        assert_eq!(r.get(&1, t0 + Duration::from_millis(100)), Some(&"read at 1"));
        assert_eq!(r.get(&2, t0 + Duration::from_millis(100)), None, "the counters moved");
        assert_eq!(r.get(&1, t0 + crate::util::SLOW_REFRESH), None, "read again once in a while");
        *r.value_mut().unwrap() = "pruned";
        assert_eq!(r.get(&1, t0), Some(&"pruned"));
    }

    #[test]
    fn a_map_left_empty_is_scanned_again_only_after_an_insert_or_a_while() {
        // Left empty at count 5, nothing inserted since, scanned recently: skipped.
        assert!(!scan(Some(5), true, Some(5)));
        // An insert since (the programs count after inserting): scanned.
        assert!(scan(Some(6), true, Some(5)));
        // Left with entries: always scanned.
        assert!(scan(Some(5), true, None));
        // Not scanned for a while: scanned whatever the count says.
        assert!(scan(Some(5), false, Some(5)));
        // The counter unreadable: scanned.
        assert!(scan(None, true, None));
    }

    #[test]
    fn a_map_left_with_few_keys_and_no_insert_since_has_them_looked_up() {
        // Left with entries at count 5, nothing inserted since, recent: the keys.
        assert_eq!(decide(Some(5), true, None, Some(5), true, false), Need::Keys);
        // Nor any update the caller knows of: what was read, however many.
        assert_eq!(decide(Some(5), true, None, Some(5), false, true), Need::Same);
        // Too many to look up, an insert since, a while since the scan, no counter: a scan.
        assert_eq!(decide(Some(5), true, None, Some(5), false, false), Need::Scan);
        assert_eq!(decide(Some(6), true, None, Some(5), true, true), Need::Scan);
        assert_eq!(decide(Some(5), false, None, Some(5), true, true), Need::Scan);
        assert_eq!(decide(None, true, None, None, true, true), Need::Scan);
        // Left empty and nothing inserted: nothing.
        assert_eq!(decide(Some(5), true, Some(5), Some(5), true, true), Need::Nothing);
    }
}
