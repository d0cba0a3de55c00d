//! The eBPF maps' kernel memory: estimated before load, sized to the machine and to its memory
//! cgroup's limit, measured after load.
//!
//! The kernel charges a map's memory to the memory cgroup of the process that creates it (Linux
//! 5.11+), as kernel memory: it shows in the cgroup's usage, not in the process's RSS. Preallocated
//! hash maps and arrays cost their full size at creation, per-CPU ones that size times the number of
//! CPUs. Under a tight limit the maps alone could take what ioscope's own memory then needs, and the
//! OOM killer ends it; so before loading, [`plan`] compares the maps' cost with what the cgroup
//! leaves (src/bpf/memcg.rs) and shrinks the maps that can shrink ([`RESIZABLE`]), or says why eBPF
//! stays off. The figures (xtask/README.md, "eBPF map memory") and the formulas of [`estimate`] are
//! the kernel's `memlock` accounting (`/proc/PID/fdinfo/FD`), which [`memlock`] reads after load.

use std::os::fd::{AsFd, AsRawFd};

use anyhow::{Context, Result};
use ioscope_common::file_names::FILE_NAMES_MAP;
use ioscope_common::files::FILE_IO_MAP;
use ioscope_common::readahead::{RA_FILES_MAP, RA_PAGES_MAP};
use ioscope_common::syncs::SYNC_STATS_MAP;

use crate::sample::BpfMapMemory;

/// Kernel map types (`enum bpf_map_type`) that [`estimate`] knows.
const HASH: u32 = 1;
const ARRAY: u32 = 2;
const PERCPU_HASH: u32 = 5;
const PERCPU_ARRAY: u32 = 6;
const LRU_HASH: u32 = 9;
const LRU_PERCPU_HASH: u32 = 10;
const RINGBUF: u32 = 27;
/// `BPF_F_NO_PREALLOC`: a hash map whose elements are allocated as they are inserted.
pub const NO_PREALLOC: u32 = 1;
/// `BPF_F_MMAPABLE`: an array whose values are page-aligned, to be mapped by userspace.
const MMAPABLE: u32 = 1 << 10;

/// Maps whose size the loader may choose (`EbpfLoader::map_max_entries`), and the fewest entries
/// each may have. All hash maps, whose programs handle a full map (an LRU map forgets its oldest
/// entry; RA_PAGES and RA_FILES refuse the insert and count it, shown as untracked pages and files
/// in the readahead pane): a smaller map loses figures under heavy load, never correctness. The
/// arrays cannot shrink this way: the programs index them by hashes of a compile-time size.
///
/// - RA_PAGES: readahead folios neither used nor evicted yet. 16,384 folios are 64 MiB of
///   readahead pending at once (4 KiB pages), several times what a sequential reader keeps ahead.
/// - FILE_NAMES: file names by inode; a file without one is named from /proc when listed.
/// - FILE_IO: per-file counters (per CPU); 4,096 files active within one interval.
/// - SYNC_STATS: sync calls per (process, file) (per CPU).
/// - RA_FILES: files with readahead pending; userspace removes idle ones every sample.
pub const RESIZABLE: [(&str, u32); 5] = [
    (RA_PAGES_MAP, 16_384),
    (FILE_NAMES_MAP, 4_096),
    (FILE_IO_MAP, 4_096),
    (SYNC_STATS_MAP, 1_024),
    (RA_FILES_MAP, 2_048),
];

/// Most a resizable per-CPU map may cost on a machine with many CPUs (it is halved until it fits,
/// not below its minimum): 16 MiB. FILE_IO's 16,384 files cost 3.8 MiB on 2 CPUs but 84 MiB on 64.
pub const PER_CPU_MAP_BUDGET: u64 = 16 << 20;

/// One map of the object, as compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapDef {
    pub name: String,
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
}

/// The maps of the eBPF object `object`, with their compiled sizes (the globals' sections too).
pub fn object_maps(object: &[u8]) -> Result<Vec<MapDef>> {
    let obj = aya_obj::Object::parse(object).context("parsing the eBPF object")?;
    let mut maps: Vec<MapDef> = obj
        .maps
        .iter()
        .map(|(name, m)| MapDef {
            name: name.clone(),
            map_type: m.map_type(),
            key_size: m.key_size(),
            value_size: m.value_size(),
            max_entries: m.max_entries(),
            flags: m.map_flags(),
        })
        .collect();
    maps.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(maps)
}

/// The kernel memory map `def` takes with `entries` entries on `cpus` CPUs, in bytes, as the
/// kernel's `memlock` figure counts it (Linux 6.x `map_mem_usage`): values rounded up to 8 bytes,
/// 16-byte hash buckets for the entries rounded up to a power of two, a 48-byte header per hash
/// element (plus an 8-byte per-CPU pointer, or a spare element per CPU for plain preallocated
/// hash maps), per-CPU values times `cpus`. A map without preallocation is counted with its
/// buckets and 1,024 elements (it grows as it is used). Within 0.1% of `memlock` for every map of
/// the object on this kernel (the `estimate_matches_memlock` live check in tests/live).
pub fn estimate(def: &MapDef, entries: u32, cpus: u32) -> u64 {
    let r8 = |x: u32| u64::from(x).div_ceil(8) * 8;
    let (n, k, v, c) = (u64::from(entries), r8(def.key_size), r8(def.value_size), u64::from(cpus.max(1)));
    const HEADER: u64 = 320;
    const ELEM: u64 = 48;
    let buckets = n.next_power_of_two() * 16;
    let prealloc = def.flags & NO_PREALLOC == 0;
    let elems = |n: u64| if prealloc { n } else { n.min(1024) };
    if def.map_type == ARRAY && def.flags & MMAPABLE != 0 {
        // Header and values each in whole pages.
        return 4096 + (n * v).div_ceil(4096) * 4096;
    }
    HEADER
        + match def.map_type {
            ARRAY => n * v,
            PERCPU_ARRAY => n * (v * c + 8),
            HASH => buckets + elems(n + c) * (ELEM + k + v),
            LRU_HASH => buckets + elems(n) * (ELEM + k + v),
            PERCPU_HASH | LRU_PERCPU_HASH => buckets + elems(n) * (ELEM + k + 8 + v * c),
            RINGBUF => n + 2 * 4096,
            _ => n * (k + v),
        }
}

/// The sizes chosen for the maps: the compiled ones but where [`plan`] shrank them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// (map, entries) of the maps not at their compiled size.
    pub sizes: Vec<(&'static str, u32)>,
    /// What all the maps are estimated to take ([`estimate`]).
    pub bytes: u64,
    /// Shrunk to fit the memory cgroup's limit (not only for the CPU count).
    pub for_limit: bool,
}

impl Plan {
    /// The entries map `name` is given (its compiled size when not resized).
    pub fn entries(&self, name: &str, compiled: u32) -> u32 {
        self.sizes.iter().find(|(n, _)| *n == name).map_or(compiled, |(_, e)| *e)
    }
}

/// Sizes the maps of `defs` for `cpus` CPUs and, when given, a budget of `budget` bytes: each
/// resizable per-CPU map halved while it costs more than [`PER_CPU_MAP_BUDGET`], then, while the
/// total is over the budget, the resizable map costing most halved (not below its minimum). Err
/// with the smallest total when even that is over the budget.
pub fn plan(defs: &[MapDef], cpus: u32, budget: Option<u64>) -> Result<Plan, u64> {
    let mut entries: Vec<u32> = defs.iter().map(|d| d.max_entries).collect();
    let min = |d: &MapDef| RESIZABLE.iter().find(|(n, _)| *n == d.name).map(|(_, m)| (*m).min(d.max_entries));
    let cost = |i: usize, e: &[u32]| estimate(&defs[i], e[i], cpus);
    for (i, d) in defs.iter().enumerate() {
        let Some(m) = min(d) else { continue };
        if matches!(d.map_type, PERCPU_HASH | LRU_PERCPU_HASH) {
            while cost(i, &entries) > PER_CPU_MAP_BUDGET && entries[i] / 2 >= m {
                entries[i] /= 2;
            }
        }
    }
    let total = |e: &[u32]| (0..defs.len()).map(|i| cost(i, e)).sum::<u64>();
    let mut for_limit = false;
    if let Some(budget) = budget {
        while total(&entries) > budget {
            let largest = (0..defs.len())
                .filter(|&i| min(&defs[i]).is_some_and(|m| entries[i] / 2 >= m))
                .max_by_key(|&i| cost(i, &entries));
            let Some(i) = largest else { return Err(total(&entries)) };
            entries[i] /= 2;
            for_limit = true;
        }
    }
    let sizes = defs
        .iter()
        .zip(&entries)
        .filter(|(d, e)| **e != d.max_entries)
        .filter_map(|(d, e)| Some((RESIZABLE.iter().find(|(n, _)| *n == d.name)?.0, *e)))
        .collect();
    Ok(Plan { sizes, bytes: total(&entries), for_limit })
}

/// The map data behind one of aya's map kinds (the kinds the object has).
fn map_data(map: &aya::maps::Map) -> Option<&aya::maps::MapData> {
    use aya::maps::Map;
    match map {
        Map::Array(m)
        | Map::PerCpuArray(m)
        | Map::HashMap(m)
        | Map::PerCpuHashMap(m)
        | Map::LruHashMap(m)
        | Map::PerCpuLruHashMap(m)
        | Map::RingBuf(m)
        | Map::Unsupported(m) => Some(m),
        _ => None,
    }
}

/// The kernel's `memlock` and `max_entries` of the map open as `fd` (`/proc/self/fdinfo`).
pub fn memlock(fd: impl AsFd) -> Result<(u64, u32)> {
    let path = format!("/proc/self/fdinfo/{}", fd.as_fd().as_raw_fd());
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let field = |name: &str| {
        text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.trim().parse::<u64>().ok())
    };
    let bytes = field("memlock").with_context(|| format!("no memlock in {path}"))?;
    Ok((bytes, field("max_entries").unwrap_or(0) as u32))
}

/// Every map of `ebpf` (loaded: before any is taken) with its kernel memory, largest first, and a
/// descriptor of each that grows as it is used (not preallocated), to measure again
/// ([`Measured::refresh`]).
pub fn measure(ebpf: &aya::Ebpf, defs: &[MapDef]) -> Measured {
    let mut maps = Vec::new();
    let mut growing = Vec::new();
    for (name, map) in ebpf.maps() {
        let Some(data) = map_data(map) else { continue };
        let Ok((bytes, entries)) = memlock(data.fd()) else { continue };
        let def = defs.iter().find(|d| d.name == name);
        if def.is_some_and(|d| d.flags & NO_PREALLOC != 0 && matches!(d.map_type, HASH | PERCPU_HASH)) {
            if let Ok(fd) = data.fd().as_fd().try_clone_to_owned() {
                growing.push((name.to_string(), fd));
            }
        }
        maps.push(BpfMapMemory {
            map: name.to_string(),
            entries,
            compiled_entries: def.map_or(entries, |d| d.max_entries),
            bytes,
        });
    }
    sort(&mut maps);
    Measured { maps: maps.into(), growing }
}

/// Largest first, then by name.
fn sort(maps: &mut [BpfMapMemory]) {
    maps.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.map.cmp(&b.map)));
}

/// The maps' memory as measured, shared by every sample, and the maps to measure again.
#[derive(Default)]
pub struct Measured {
    pub maps: std::sync::Arc<Vec<BpfMapMemory>>,
    growing: Vec<(String, std::os::fd::OwnedFd)>,
}

impl Measured {
    /// Measures the maps that grow again (a copy of the list is made only when one changed).
    pub fn refresh(&mut self) {
        for (name, fd) in &self.growing {
            let Ok((bytes, _)) = memlock(fd) else { continue };
            if self.maps.iter().any(|m| m.map == *name && m.bytes != bytes) {
                let maps = std::sync::Arc::make_mut(&mut self.maps);
                if let Some(m) = maps.iter_mut().find(|m| m.map == *name) {
                    m.bytes = bytes;
                }
                sort(maps);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, map_type: u32, key: u32, value: u32, entries: u32, flags: u32) -> MapDef {
        MapDef { name: name.into(), map_type, key_size: key, value_size: value, max_entries: entries, flags }
    }

    /// The estimates against the kernel's memlock of the same maps, as read from
    /// /proc/PID/fdinfo on this 2-CPU 6.18 kernel (the outside oracle).
    #[test]
    fn estimates_match_the_kernels_memlock() {
        let cases = [
            (def("RA_PAGES", HASH, 24, 16, 262_144, 0), 27_264_064u64),
            (def("RA_FILES", HASH, 16, 296, 8192, 0), 3_081_824),
            (def("FILE_NAMES", LRU_HASH, 16, 272, 16_384, 0), 5_768_064),
            (def("FILE_IO", LRU_PERCPU_HASH, 16, 80, 16_384, 0), 4_064_128),
            (def("SYNC_STATS", LRU_PERCPU_HASH, 24, 312, 4096, 0), 2_950_016),
            (def("BLOCK_DEV", PERCPU_ARRAY, 4, 3072, 1024, 0), 6_299_960),
            (def("BLOCK_PROC", PERCPU_ARRAY, 4, 352, 8192, 0), 5_833_016),
            (def("BLOCK_REQS", ARRAY, 4, 80, 32_768, 0), 2_621_752),
            (def("BLOCK_PROC_KEYS", ARRAY, 4, 8, 8192, MMAPABLE), 69_632),
            (def("BLOCK_RQ_RING", RINGBUF, 0, 0, 1 << 20, 0), 1_065_288),
        ];
        for (d, memlock) in cases {
            let e = estimate(&d, d.max_entries, 2);
            let off = (e as f64 - memlock as f64).abs() / memlock as f64;
            assert!(off < 0.01, "{}: estimated {e}, the kernel says {memlock}", d.name);
        }
    }

    fn object() -> Vec<MapDef> {
        vec![
            def("RA_PAGES", HASH, 24, 16, 262_144, 0),
            def("FILE_IO", LRU_PERCPU_HASH, 16, 80, 16_384, 0),
            def("BLOCK_DEV", PERCPU_ARRAY, 4, 3072, 1024, 0),
        ]
    }

    #[test]
    fn without_a_limit_a_small_machine_keeps_the_compiled_sizes() {
        let p = plan(&object(), 2, None).unwrap();
        assert_eq!(p.sizes, vec![]);
        assert!(!p.for_limit);
        let by_hand: u64 = object().iter().map(|d| estimate(d, d.max_entries, 2)).sum();
        assert_eq!(p.bytes, by_hand);
        // 27.3 MB of readahead pages, 4.1 of files, 6.3 of devices.
        assert!((37_000_000..38_000_000).contains(&p.bytes), "{}", p.bytes);
    }

    #[test]
    fn per_cpu_hash_maps_shrink_with_many_cpus_arrays_cannot() {
        // 16 CPUs: FILE_IO would take 16,384 × (72 + 80 × 16) bytes = 22 MB; halved to ≤ 16 MiB.
        let p = plan(&object(), 16, None).unwrap();
        assert_eq!(p.sizes, vec![(FILE_IO_MAP, 8192)]);
        assert!(estimate(&object()[1], 8192, 16) <= PER_CPU_MAP_BUDGET);
        assert!(estimate(&object()[1], 16_384, 16) > PER_CPU_MAP_BUDGET);
        // Not below its minimum, however many CPUs (64: 4,096 files take 21 MB).
        assert_eq!(plan(&object(), 64, None).unwrap().sizes, vec![(FILE_IO_MAP, 4096)]);
        assert_eq!(plan(&object(), 4096, None).unwrap().entries(FILE_IO_MAP, 16_384), 4096);
        assert!(!p.for_limit);
    }

    #[test]
    fn a_budget_halves_the_costliest_resizable_map_first_down_to_the_minimums() {
        let all = plan(&object(), 2, None).unwrap().bytes;
        // 10 MB less: RA_PAGES (the costliest) halved, once (−13.6 MB).
        let p = plan(&object(), 2, Some(all - 10_000_000)).unwrap();
        assert_eq!(p.sizes, vec![(RA_PAGES_MAP, 131_072)]);
        assert!(p.for_limit && p.bytes <= all - 10_000_000);
        // 12 MB: RA_PAGES halved until FILE_IO (4.1 MB) costs more (RA_PAGES at 32,768: 3.4 MB),
        // then FILE_IO once.
        let p = plan(&object(), 2, Some(12_000_000)).unwrap();
        assert!(p.bytes <= 12_000_000, "{}", p.bytes);
        assert_eq!(p.sizes, vec![(RA_PAGES_MAP, 32_768), (FILE_IO_MAP, 8192)]);
        // Below what the minimums and the arrays take: the smallest total, to say so.
        let least = plan(&object(), 2, Some(1)).unwrap_err();
        let by_hand = estimate(&object()[0], 16_384, 2)
            + estimate(&object()[1], 4096, 2)
            + estimate(&object()[2], 1024, 2);
        assert_eq!(least, by_hand);
        assert_eq!(plan(&object(), 2, Some(least)).unwrap().bytes, least);
    }

    /// The object's own maps: each resizable one is a hash map (the programs handle a full one)
    /// with its minimum below its compiled size.
    #[test]
    fn the_objects_resizable_maps_are_hash_maps() {
        let defs = object_maps(super::super::object::OBJECT).unwrap();
        for (name, min) in RESIZABLE {
            let d =
                defs.iter().find(|d| d.name == name).unwrap_or_else(|| panic!("{name} not in the object"));
            assert!(matches!(d.map_type, HASH | LRU_HASH | LRU_PERCPU_HASH), "{name}: {}", d.map_type);
            assert!(
                min < d.max_entries && min.is_power_of_two() && d.max_entries.is_power_of_two(),
                "{name}"
            );
        }
        // Every map of the object has a formula (no kind left to the generic guess).
        for d in &defs {
            assert!(
                matches!(
                    d.map_type,
                    HASH | ARRAY | PERCPU_HASH | PERCPU_ARRAY | LRU_HASH | LRU_PERCPU_HASH | RINGBUF
                ),
                "{}: type {}",
                d.name,
                d.map_type
            );
        }
    }
}
