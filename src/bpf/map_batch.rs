//! Reading hash maps many entries per system call: `BPF_MAP_LOOKUP_BATCH` and
//! `BPF_MAP_LOOKUP_AND_DELETE_BATCH` (Linux 5.6+, every hash map type, per-CPU and LRU ones too),
//! and `BPF_MAP_DELETE_BATCH`. aya has no binding for them.
//!
//! Entry by entry, reading a map costs a `get_next_key` and a lookup per entry, and draining it a
//! delete more: three system calls per file for a burst of 20,000 new files, most of a sample's
//! cost. A batch copies [`CHUNK`] entries per call. A kernel without the commands (or a map type
//! without them) answers EINVAL or ENOTSUPP at the first call: the caller falls back to the
//! entry-by-entry reading, and nothing was read or deleted.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use aya::Pod;

// `enum bpf_cmd` (include/uapi/linux/bpf.h): 26 is BPF_MAP_UPDATE_BATCH, which a delete sent by
// mistake made fail (no values to copy: EFAULT), so that every delete fell back to one system call
// per key.
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;
const BPF_MAP_LOOKUP_AND_DELETE_BATCH: libc::c_long = 25;
const BPF_MAP_DELETE_BATCH: libc::c_long = 27;

/// Most entries asked for per call (a hash bucket holding more than this answers ENOSPC: the
/// chunk grows and the call is made again).
pub const CHUNK: usize = 1024;
/// Entries asked for by the first call; each further call asks for twice as many, up to
/// [`CHUNK`]. Most reads find a few entries (a sample at `--interval 0.1` on a quiet machine), and
/// the buffers are sized and zeroed for the entries asked for: 1,024 entries of a per-CPU map
/// were up to 256 KiB each call, a memset and an allocation larger than the rest of the sample's.
pub const FIRST_CHUNK: usize = 32;

/// `union bpf_attr`'s `batch` member (include/uapi/linux/bpf.h).
#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

fn bpf(cmd: libc::c_long, attr: &mut BatchAttr) -> io::Result<()> {
    // SAFETY: `attr` is a valid `bpf_attr.batch` of the size given; the buffers it points to are
    // sized for `count` entries by the callers.
    let r = unsafe {
        libc::syscall(libc::SYS_bpf, cmd, attr as *mut BatchAttr, std::mem::size_of::<BatchAttr>())
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The answer of a kernel or map type without batch operations.
pub fn unsupported(e: &io::Error) -> bool {
    // ENOTSUPP (524) is the kernel's internal "not supported", which the bpf() syscall leaks.
    matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP | 524))
}

/// One entry: its key and its value, one per CPU for a per-CPU map (`cpus` values), else one.
pub struct Entry<K, V> {
    pub key: K,
    pub values: Vec<V>,
}

/// Up to `max` entries of a hash map (a few more when the last call's bucket held more than
/// the entries left to read: a bucket is copied whole), deleted as they are read when `delete`. `cpus`: the number
/// of possible CPUs for a per-CPU map (each value then comes once per CPU, 8-byte aligned), None
/// for a plain map. An error at the first call returns it (nothing was read); a later one ends
/// the reading with what was read (the rest stays in the map for the next time).
pub fn lookup<K: Pod, V: Pod>(
    fd: BorrowedFd<'_>,
    cpus: Option<usize>,
    delete: bool,
    max: usize,
) -> io::Result<Vec<Entry<K, V>>> {
    let (key_size, value_size) = (std::mem::size_of::<K>(), std::mem::size_of::<V>());
    let (per_value, per_entry) = match cpus {
        Some(n) => (value_size.next_multiple_of(8), value_size.next_multiple_of(8) * n.max(1)),
        None => (value_size, value_size),
    };
    let cmd = if delete { BPF_MAP_LOOKUP_AND_DELETE_BATCH } else { BPF_MAP_LOOKUP_BATCH };
    let mut out = Vec::new();
    let mut chunk = FIRST_CHUNK.min(CHUNK).min(max.max(1));
    // The position token: a bucket index (u32) for hash maps; sized generously.
    let (mut token_in, mut token_out) = ([0u64; 4], [0u64; 4]);
    let mut first = true;
    let (mut keys, mut values) = (Vec::new(), Vec::new());
    while out.len() < max {
        keys.resize(chunk * key_size, 0u8);
        values.resize(chunk * per_entry, 0u8);
        let mut attr = BatchAttr {
            in_batch: if first { 0 } else { token_in.as_ptr() as u64 },
            out_batch: token_out.as_mut_ptr() as u64,
            keys: keys.as_mut_ptr() as u64,
            values: values.as_mut_ptr() as u64,
            count: chunk as u32,
            map_fd: fd.as_raw_fd() as u32,
            ..Default::default()
        };
        let r = bpf(cmd, &mut attr);
        let done = match &r {
            Ok(()) => false,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => true,
            // A bucket holds more entries than the chunk: nothing was copied; grow it.
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && attr.count == 0 && chunk < 1 << 20 => {
                chunk *= 4;
                continue;
            }
            Err(_) if first => return r.map(|()| Vec::new()),
            Err(_) => true,
        };
        let n = (attr.count as usize).min(chunk);
        for i in 0..n {
            // SAFETY: K and V are Pod (any bit pattern valid); each read stays inside its buffer.
            let key = unsafe { std::ptr::read_unaligned(keys[i * key_size..].as_ptr() as *const K) };
            let base = i * per_entry;
            let values = (0..cpus.unwrap_or(1).max(1))
                .map(|c| unsafe {
                    std::ptr::read_unaligned(values[base + c * per_value..].as_ptr() as *const V)
                })
                .collect();
            out.push(Entry { key, values });
        }
        if done {
            break;
        }
        first = false;
        token_in = token_out;
        // A grown chunk (ENOSPC above) may have read past `max`: the loop then ends.
        chunk = (chunk * 2).min(CHUNK.max(chunk)).min(max.saturating_sub(out.len()).max(1));
    }
    Ok(out)
}

/// [`lookup`] on a kernel that may lack batches: `Ok(None)` when it refuses them, which
/// `*enabled` then remembers, so that the caller reads entry by entry now and from then on
/// (nothing was read or deleted).
pub fn lookup_if_supported<K: Pod, V: Pod>(
    enabled: &mut bool,
    fd: BorrowedFd<'_>,
    cpus: Option<usize>,
    delete: bool,
    max: usize,
) -> io::Result<Option<Vec<Entry<K, V>>>> {
    if !*enabled {
        return Ok(None);
    }
    match lookup(fd, cpus, delete, max) {
        Ok(entries) => Ok(Some(entries)),
        Err(e) if unsupported(&e) => {
            *enabled = false;
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Every entry of a per-CPU hash map with its values, one per CPU: in batches while `*enabled`
/// (see [`lookup_if_supported`]; at most `max` entries), else listed and looked up one by one (an
/// entry gone between the two, evicted or removed, is skipped). `name` names the map in errors.
pub fn per_cpu_hash_entries<K: Pod, V: Pod>(
    map: &aya::maps::PerCpuHashMap<aya::maps::MapData, K, V>,
    enabled: &mut bool,
    max: usize,
    name: &str,
) -> anyhow::Result<Vec<(K, Vec<V>)>> {
    use anyhow::Context;
    use aya::maps::IterableMap;
    use std::os::fd::AsFd;
    let cpus = aya::util::nr_cpus().map_err(|(what, e)| anyhow::anyhow!("{what}: {e}"))?;
    let read = lookup_if_supported::<K, V>(enabled, map.map().fd().as_fd(), Some(cpus), false, max);
    if let Some(entries) = read.with_context(|| format!("reading {name}"))? {
        return Ok(entries.into_iter().map(|e| (e.key, e.values)).collect());
    }
    let keys: Vec<K> = map.keys().collect::<Result<_, _>>().with_context(|| format!("listing {name}"))?;
    Ok(keys.into_iter().filter_map(|k| Some((k, map.get(&k, 0).ok()?.iter().copied().collect()))).collect())
}

/// Deletes `keys` from a hash map in one call per [`CHUNK`]; keys already gone are skipped.
/// Returns how many were deleted, or the error of a kernel without the command.
pub fn delete<K: Pod>(fd: BorrowedFd<'_>, keys: &[K]) -> io::Result<usize> {
    let mut deleted = 0;
    for part in keys.chunks(CHUNK) {
        let mut rest = part;
        while !rest.is_empty() {
            let mut attr = BatchAttr {
                keys: rest.as_ptr() as u64,
                count: rest.len() as u32,
                map_fd: fd.as_raw_fd() as u32,
                ..Default::default()
            };
            let r = bpf(BPF_MAP_DELETE_BATCH, &mut attr);
            let n = (attr.count as usize).min(rest.len());
            deleted += n;
            match r {
                Ok(()) => break,
                // The key at `n` is no longer in the map (an LRU eviction, a race): skip it.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => rest = rest.get(n + 1..).unwrap_or(&[]),
                Err(e) if deleted == 0 => return Err(e),
                Err(_) => break,
            }
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsFd, FromRawFd, OwnedFd};

    const BPF_MAP_CREATE: libc::c_long = 0;
    const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
    const BPF_MAP_TYPE_HASH: u32 = 1;

    /// A plain hash map of u32 → u64 with `n` entries (keys 0..n), made with `BPF_MAP_CREATE`;
    /// None without the privilege (unless IOSCOPE_REQUIRE_BPF is set).
    fn filled_hash_map(n: u32) -> Option<OwnedFd> {
        // `union bpf_attr` is 128+ bytes; the fields used come first, the rest stays zero.
        let mut create = [0u32; 32];
        create[..4].copy_from_slice(&[BPF_MAP_TYPE_HASH, 4, 8, n]);
        // SAFETY: a zeroed `bpf_attr` of the size given, with the map's type and sizes.
        let fd = unsafe { libc::syscall(libc::SYS_bpf, BPF_MAP_CREATE, create.as_mut_ptr(), 128usize) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            assert!(std::env::var_os("IOSCOPE_REQUIRE_BPF").is_none(), "BPF_MAP_CREATE: {e}");
            return None;
        }
        // SAFETY: the kernel just returned this descriptor, owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        for key in 0..n {
            let value = u64::from(key) * 10;
            // `bpf_attr`'s elem member: map_fd u32, pad, key ptr, value ptr, flags.
            let mut attr = [0u64; 16];
            attr[0] = fd.as_raw_fd() as u64;
            attr[1] = &key as *const u32 as u64;
            attr[2] = &value as *const u64 as u64;
            // SAFETY: the attribute points at a live key and value of the map's sizes.
            let r = unsafe { libc::syscall(libc::SYS_bpf, BPF_MAP_UPDATE_ELEM, attr.as_mut_ptr(), 128usize) };
            assert_eq!(r, 0, "BPF_MAP_UPDATE_ELEM: {}", io::Error::last_os_error());
        }
        Some(fd)
    }

    /// Every limit from 1 to the map's size: a call that meets a bucket holding more entries than
    /// are left to read (ENOSPC, the chunk grows, the bucket comes whole) used to end in an
    /// overflow panic (`max - out.len()`), seen in `ioscope --once --json`. 64 keys in 64 buckets
    /// share buckets for all but a vanishing share of hash seeds.
    #[test]
    fn a_bucket_larger_than_the_entries_left_is_read_whole_without_overflow() {
        let Some(fd) = filled_hash_map(64) else { return };
        for max in 1..=70 {
            let read = lookup::<u32, u64>(fd.as_fd(), None, false, max).expect("batch lookup");
            assert!(read.len() >= max.min(64) && read.len() <= 64, "max {max}: {} entries", read.len());
            for e in &read {
                assert_eq!(e.values, vec![u64::from(e.key) * 10]);
            }
        }
        // Draining: every entry once, whatever the limit of each call.
        let mut seen = Vec::new();
        for _ in 0..64 {
            seen.extend(
                lookup::<u32, u64>(fd.as_fd(), None, true, 3).expect("drain").into_iter().map(|e| e.key),
            );
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..64).collect::<Vec<u32>>());
    }
}
