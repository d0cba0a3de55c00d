//! Memory pane: /proc/meminfo gauges, the kernel's dirty thresholds, and /proc/vmstat rates.

use serde::Serialize;

use super::counter::rate;
use crate::sample::{DirtySettings, Sample, ZoneInfo};

/// Bytes unless named otherwise. JSON: `memory.*`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MemoryModel {
    pub total: u64,
    pub free: u64,
    pub available: u64,
    pub buffers: u64,
    pub cached: u64,
    pub shmem: u64,
    pub dirty: u64,
    pub writeback: u64,
    pub active_file: u64,
    pub inactive_file: u64,
    pub mapped: u64,
    pub slab_reclaimable: u64,
    /// Memory the kernel counts as dirtyable (free − reserves + file LRU), bytes.
    pub dirtyable: u64,
    /// Above this much dirty memory the flusher threads start background writeback.
    pub dirty_background_threshold: u64,
    /// Above this much dirty memory writers are throttled in balance_dirty_pages().
    pub dirty_threshold: u64,
    /// "ratio" or "bytes": which vm setting produced each threshold.
    pub dirty_background_source: &'static str,
    pub dirty_source: &'static str,
    /// The kernel's own thresholds as /proc/vmstat printed them (bytes), None where it does not:
    /// they should match `dirty_threshold` / `dirty_background_threshold` to within the pages that
    /// were freed or allocated between reading /proc/meminfo and /proc/vmstat.
    pub kernel_dirty_threshold: Option<u64>,
    pub kernel_dirty_background_threshold: Option<u64>,
    pub dirty_expire_centisecs: u64,
    pub dirty_writeback_centisecs: u64,
    pub rates: VmRates,
}

/// Per-second rates from /proc/vmstat. JSON: `memory.rates.*`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct VmRates {
    pub pgpgin_kb_s: f64,
    pub pgpgout_kb_s: f64,
    pub majfault_s: f64,
    pub refault_file_s: f64,
    pub scan_s: f64,
    pub steal_s: f64,
    pub dirtied_pages_s: f64,
    pub written_pages_s: f64,
}

/// The global dirty limits in pages, and which setting produced each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirtyLimits {
    pub dirtyable_pages: u64,
    pub background_pages: u64,
    pub threshold_pages: u64,
    pub background_source: &'static str,
    pub threshold_source: &'static str,
}

/// `totalreserve_pages` as mm/page_alloc.c `calculate_totalreserve_pages()` sums it: for every
/// zone, `min(managed, max(lowmem_reserve[]) + high watermark)`.
///
/// zoneinfo's `high` line includes the current `boost`, but the kernel computed the reserve when the
/// watermarks were last set up, which also resets the boost to 0 (`__setup_per_zone_wmarks`), so
/// the boost is taken back out.
pub fn total_reserve_pages(zones: &[ZoneInfo]) -> u64 {
    zones
        .iter()
        .map(|z| {
            let high = z.high_wmark_pages.saturating_sub(z.watermark_boost_pages);
            z.managed_pages.min(z.max_lowmem_reserve_pages + high)
        })
        .sum()
}

/// The kernel's global dirty thresholds, exactly as mm/page-writeback.c (6.x) computes them.
///
/// `global_dirtyable_memory()`, in pages:
///   `dirtyable = (free − min(free, totalreserve_pages)) + nr_inactive_file + nr_active_file + 1`
/// (the +1 is the kernel's: "ensure that we never return 0"; highmem is not subtracted on 64-bit).
///
/// `domain_dirty_limits()`, with ratios scaled "per PAGE_SIZE for higher precision", integer
/// arithmetic throughout:
///   `ratio = dirty_ratio × PAGE_SIZE / 100`, `bg_ratio = dirty_background_ratio × PAGE_SIZE / 100`
///   `thresh = dirty_bytes ? DIV_ROUND_UP(dirty_bytes, PAGE_SIZE) : ratio × dirtyable / PAGE_SIZE`
///   `bg_thresh = dirty_background_bytes ? DIV_ROUND_UP(.., PAGE_SIZE) : bg_ratio × dirtyable / PAGE_SIZE`
///   `thresh = min(thresh, u32::MAX)`; `if bg_thresh >= thresh { bg_thresh = thresh / 2 }`
/// (the boost the kernel gives real-time tasks is left out: ioscope reports the limits of an
/// ordinary writer).
pub fn dirty_limits(
    free_pages: u64,
    file_lru_pages: u64,
    total_reserve_pages: u64,
    settings: &DirtySettings,
    page_size: u64,
) -> DirtyLimits {
    let page = page_size as u128;
    let dirtyable = (free_pages - free_pages.min(total_reserve_pages)) + file_lru_pages + 1;
    let ratio = settings.dirty_ratio as u128 * page / 100;
    let bg_ratio = settings.dirty_background_ratio as u128 * page / 100;
    let (mut thresh, threshold_source) = if settings.dirty_bytes > 0 {
        ((settings.dirty_bytes as u128).div_ceil(page), "bytes")
    } else {
        (ratio * dirtyable as u128 / page, "ratio")
    };
    let (mut bg_thresh, background_source) = if settings.dirty_background_bytes > 0 {
        ((settings.dirty_background_bytes as u128).div_ceil(page), "bytes")
    } else {
        (bg_ratio * dirtyable as u128 / page, "ratio")
    };
    thresh = thresh.min(u32::MAX as u128);
    if bg_thresh >= thresh {
        bg_thresh = thresh / 2;
    }
    DirtyLimits {
        dirtyable_pages: dirtyable,
        background_pages: bg_thresh as u64,
        threshold_pages: thresh as u64,
        background_source,
        threshold_source,
    }
}

pub fn compute(prev: Option<&Sample>, cur: &Sample, secs: f64) -> MemoryModel {
    let m = &cur.memory;
    let page_size = if cur.page_size > 0 { cur.page_size } else { 4096 };
    // The free-page count the kernel feeds global_dirtyable_memory() is NR_FREE_PAGES, which
    // si_meminfo() also prints as MemFree; vanilla /proc/vmstat's nr_free_pages is the same counter.
    // Kernels that initialise memory lazily (deferred_init=lazy) count not-yet-initialised pages in
    // MemFree and in the dirty limits but not in nr_free_pages, so MemFree is the one that matches
    // the kernel everywhere. Without meminfo, fall back to vmstat.
    let free_pages = if m.total_bytes > 0 { m.free_bytes / page_size } else { cur.vmstat.nr_free_pages };
    let limits = dirty_limits(
        free_pages,
        cur.vmstat.nr_inactive_file + cur.vmstat.nr_active_file,
        total_reserve_pages(&cur.zones),
        &cur.dirty_settings,
        page_size,
    );
    let bytes = |pages: u64| pages.saturating_mul(page_size);
    MemoryModel {
        total: m.total_bytes,
        free: m.free_bytes,
        available: m.available_bytes,
        buffers: m.buffers_bytes,
        cached: m.cached_bytes,
        shmem: m.shmem_bytes,
        dirty: m.dirty_bytes,
        writeback: m.writeback_bytes,
        active_file: m.active_file_bytes,
        inactive_file: m.inactive_file_bytes,
        mapped: m.mapped_bytes,
        slab_reclaimable: m.slab_reclaimable_bytes,
        dirtyable: bytes(limits.dirtyable_pages),
        dirty_background_threshold: bytes(limits.background_pages),
        dirty_threshold: bytes(limits.threshold_pages),
        dirty_background_source: limits.background_source,
        dirty_source: limits.threshold_source,
        kernel_dirty_threshold: cur.vmstat.kernel_dirty_threshold_pages.map(bytes),
        kernel_dirty_background_threshold: cur.vmstat.kernel_dirty_background_threshold_pages.map(bytes),
        dirty_expire_centisecs: cur.dirty_settings.dirty_expire_centisecs,
        dirty_writeback_centisecs: cur.dirty_settings.dirty_writeback_centisecs,
        rates: prev.map(|p| vm_rates(p, cur, secs)).unwrap_or_default(),
    }
}

/// Per-second rates of the vmstat counters. pgpgin/pgpgout already count kilobytes.
fn vm_rates(prev: &Sample, cur: &Sample, secs: f64) -> VmRates {
    let (p, c) = (&prev.vmstat, &cur.vmstat);
    VmRates {
        pgpgin_kb_s: rate(p.pgpgin, c.pgpgin, secs),
        pgpgout_kb_s: rate(p.pgpgout, c.pgpgout, secs),
        majfault_s: rate(p.pgmajfault, c.pgmajfault, secs),
        refault_file_s: rate(p.workingset_refault_file, c.workingset_refault_file, secs),
        scan_s: rate(p.pgscan, c.pgscan, secs),
        steal_s: rate(p.pgsteal, c.pgsteal, secs),
        dirtied_pages_s: rate(p.nr_dirtied, c.nr_dirtied, secs),
        written_pages_s: rate(p.nr_written, c.nr_written, secs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(ratio: u64, bg_ratio: u64, bytes: u64, bg_bytes: u64) -> DirtySettings {
        DirtySettings {
            dirty_ratio: ratio,
            dirty_background_ratio: bg_ratio,
            dirty_bytes: bytes,
            dirty_background_bytes: bg_bytes,
            ..Default::default()
        }
    }

    #[test]
    fn reserve_is_capped_by_managed_and_ignores_boost() {
        let zones = [
            // DMA on this VM: min(3840, 5067 + 73) = 3840
            ZoneInfo {
                managed_pages: 3840,
                high_wmark_pages: 73,
                max_lowmem_reserve_pages: 5067,
                ..Default::default()
            },
            // min(772915, 2048 + (15155 − 100)) = 17103
            ZoneInfo {
                managed_pages: 772915,
                high_wmark_pages: 15155,
                watermark_boost_pages: 100,
                max_lowmem_reserve_pages: 2048,
                ..Default::default()
            },
        ];
        assert_eq!(total_reserve_pages(&zones), 3840 + 17103);
    }

    #[test]
    fn ratio_thresholds_match_hand_arithmetic() {
        // Captured on this VM: MemFree 5752907 pages, file LRU 202026, reserve 31155.
        // dirtyable = 5752907 − 31155 + 202026 + 1 = 5923779
        // ratio = 20×4096/100 = 819; thresh = 4851575001/4096 = 1184466 (integer division)
        // bg_ratio = 10×4096/100 = 409; bg = 2422825611/4096 = 591510
        let l = dirty_limits(5752907, 202026, 31155, &settings(20, 10, 0, 0), 4096);
        assert_eq!(l.dirtyable_pages, 5923779);
        assert_eq!(l.threshold_pages, 1184466);
        assert_eq!(l.background_pages, 591510);
        assert_eq!((l.threshold_source, l.background_source), ("ratio", "ratio"));
    }

    #[test]
    fn free_below_reserve_counts_as_zero_and_never_returns_zero() {
        // free 100 < reserve 500 → 0, + 0 file + 1 = 1 page dirtyable.
        let l = dirty_limits(100, 0, 500, &settings(20, 10, 0, 0), 4096);
        assert_eq!(l.dirtyable_pages, 1);
        // 819×1/4096 = 0; bg 0 ≥ thresh 0 → bg = 0/2 = 0
        assert_eq!((l.threshold_pages, l.background_pages), (0, 0));
    }

    #[test]
    fn bytes_settings_round_up_and_background_is_halved_when_not_below() {
        // dirty_bytes 10000 → DIV_ROUND_UP(10000, 4096) = 3 pages.
        // bg_bytes 20000 → 5 pages ≥ 3 → bg = 3/2 = 1.
        let l = dirty_limits(1000, 0, 0, &settings(20, 10, 10000, 20000), 4096);
        assert_eq!((l.threshold_pages, l.threshold_source), (3, "bytes"));
        assert_eq!((l.background_pages, l.background_source), (1, "bytes"));
    }

    #[test]
    fn threshold_is_capped_at_u32_max_pages() {
        // dirty_bytes of 2^50 bytes = 2^38 pages > u32::MAX → 4294967295; bg ratio 10% of
        // 2^40 pages is far above → halved: 2147483647.
        let l = dirty_limits(1 << 40, 0, 0, &settings(0, 10, 1 << 50, 0), 4096);
        assert_eq!(l.threshold_pages, 4294967295);
        assert_eq!(l.background_pages, 2147483647);
    }
}
