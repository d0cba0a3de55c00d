//! The I/O buffers of a job: one anonymous mapping holding every request's buffer, in ordinary
//! pages by default, as an application's (and fio's default buffers) are, or with `--huge-pages`
//! in transparent huge pages where the kernel gives them.
//!
//! What huge pages change: a direct request is handed to the device as a list of physically contiguous
//! segments, and a device takes at most `max_segments` of them per request (virtio-blk: 254). A
//! 1 MiB buffer in 4 KiB pages is 256 segments unless some neighbouring pages happen to be
//! physically adjacent, so whether each 1 MiB read reached the disk as one request or as two
//! (1016 KiB + 8 KiB) depended on the page allocator's luck at the start of the run — and on this
//! project's virtio disk that alone moved 1 MiB direct reads between ~0.9 and ~1.8 GB/s, for fio
//! (`--mem=mmap`) as much as for ioscope (traced with bpftrace on block:block_rq_issue). In one
//! huge page a buffer is a single segment, so the device sees the request size the job asked for,
//! every run. fio does the same with `--mem=mmaphuge`. That is not what applications see, nor
//! fio with its defaults (1 MiB direct reads here: ~2.7 GB/s in huge pages, 1.0–1.3 GB/s in
//! ordinary ones), so it is an option: the default measures what a user's program would get.
//! Ordinary pages are asked for explicitly (MADV_NOHUGEPAGE), or with transparent huge pages set
//! to "always" a large mapping would get them anyway.
//!
//! Not from the heap either: where malloc places a 1 MiB buffer (a fresh mapping or inside an
//! arena, depending on what was freed before) changed 1 MiB buffered writes by ~25 % on the test VM
//! (fio's `--mem=malloc` vs `--mem=mmap`: write p50 ~155 vs ~120 µs).

use anyhow::Context;

/// The transparent huge page size (the kernel's `hpage_pmd_size`), 2 MiB where it cannot be read.
fn huge_page_size() -> usize {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .filter(|&n: &usize| n.is_power_of_two())
        .unwrap_or(2 << 20)
}

/// `count` buffers of `len` bytes each, every one aligned to `align` (O_DIRECT's memory alignment;
/// at least a page), filled with a non-zero pattern, unmapped on drop.
pub(super) struct IoBuffers {
    map: *mut libc::c_void,
    map_len: usize,
    base: *mut u8,
    stride: usize,
    len: usize,
    count: usize,
}

// SAFETY: plain memory; each request (thread or ring slot) uses only its own buffer `ptr(i)`.
unsafe impl Send for IoBuffers {}
unsafe impl Sync for IoBuffers {}

impl IoBuffers {
    pub(super) fn new(count: usize, len: usize, align: usize, huge_pages: bool) -> anyhow::Result<IoBuffers> {
        let huge = if huge_pages { huge_page_size() } else { 4096 };
        let align = align.max(4096).next_power_of_two();
        let stride = len.max(1).next_multiple_of(align);
        let used = (stride * count.max(1)).next_multiple_of(huge);
        // Where the buffers start: on a huge page boundary (when in huge pages) and aligned.
        let start = huge.max(align);
        // Over-mapped by that much so that they can.
        let map_len = used + start;
        // SAFETY: a fresh private anonymous mapping; checked for MAP_FAILED.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(anyhow::Error::new(std::io::Error::last_os_error()))
                .with_context(|| format!("cannot map {count} I/O buffers of {len} bytes"));
        }
        let offset = (map as usize).next_multiple_of(start) - map as usize;
        // SAFETY: offset < start, so base..base+used lies inside the mapping.
        let base = unsafe { (map as *mut u8).add(offset) };
        // Asked before the first touch, so the pages are huge (or not) from the start. Huge pages
        // are refused (EINVAL) where the kernel has no transparent huge pages, and not given when
        // they are set to "never": the buffers are then in small pages.
        let advice = if huge_pages { libc::MADV_HUGEPAGE } else { libc::MADV_NOHUGEPAGE };
        // SAFETY: advice on our own fresh mapping.
        unsafe { libc::madvise(base as *mut libc::c_void, used, advice) };
        let b = IoBuffers { map, map_len, base, stride, len, count };
        // Non-zero, non-repeating content, so no layer can shortcut zero pages; this also faults
        // every page in before the clock starts.
        for i in 0..count {
            // SAFETY: buffer i is len bytes inside the mapping (i < count, stride >= len).
            let slice = unsafe { std::slice::from_raw_parts_mut(b.ptr(i), len) };
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ i as u64;
            for chunk in slice.chunks_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
            }
        }
        Ok(b)
    }

    /// The start of buffer `i` (`len` bytes).
    pub(super) fn ptr(&self, i: usize) -> *mut u8 {
        assert!(i < self.count, "buffer {i} of {}", self.count);
        // SAFETY: i < count, so the offset stays inside the mapping.
        unsafe { self.base.add(i * self.stride) }
    }

    /// Bytes of the buffers' mapping in huge pages (AnonHugePages of its /proc/self/smaps entry);
    /// None where smaps cannot be read.
    pub(super) fn huge_bytes(&self) -> Option<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        anon_huge_bytes(&smaps, self.map as usize, self.map as usize + self.map_len)
    }

    /// Bytes the buffers occupy (what is in huge pages when all of it is).
    pub(super) fn used_bytes(&self) -> u64 {
        (self.stride * (self.count.max(1) - 1) + self.len) as u64
    }
}

impl Drop for IoBuffers {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped.
        unsafe { libc::munmap(self.map, self.map_len) };
    }
}

/// AnonHugePages (bytes) summed over the VMAs of an smaps text that overlap [start, end): the
/// kernel splits our mapping into several VMAs (the madvised part and the unaligned head and tail).
/// None when no VMA overlaps.
fn anon_huge_bytes(smaps: &str, start: usize, end: usize) -> Option<u64> {
    let mut total = None;
    let mut inside = false;
    for line in smaps.lines() {
        // A VMA header: "7f12a0000000-7f12a0400000 rw-p 00000000 00:00 0".
        let range = line.split_whitespace().next().and_then(|r| r.split_once('-'));
        if let Some((lo, hi)) = range
            .and_then(|(a, b)| Some((usize::from_str_radix(a, 16).ok()?, usize::from_str_radix(b, 16).ok()?)))
        {
            inside = lo < end && hi > start;
            if inside {
                total.get_or_insert(0);
            }
            continue;
        }
        if let (true, Some(kb)) = (inside, line.strip_prefix("AnonHugePages:")) {
            let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().ok()?;
            *total.get_or_insert(0) += kb * 1024;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_separate_and_filled() {
        for (count, len, align, huge) in
            [(1, 4096, 512, false), (4, 1 << 20, 4096, true), (3, 5000, 1 << 21, false)]
        {
            let b = IoBuffers::new(count, len, align, huge).unwrap();
            for i in 0..count {
                assert_eq!(b.ptr(i) as usize % align, 0, "{len} bytes aligned to {align}");
                // SAFETY: the buffer has len bytes.
                let bytes = unsafe { std::slice::from_raw_parts(b.ptr(i), len) };
                assert!(bytes.iter().filter(|&&x| x == 0).count() < len / 64, "mostly non-zero content");
                if i > 0 {
                    assert!(b.ptr(i) as usize >= b.ptr(i - 1) as usize + len, "buffers overlap");
                }
            }
            assert_eq!(b.huge_bytes().is_some(), std::path::Path::new("/proc/self/smaps").exists());
        }
    }

    /// The default buffers are in ordinary pages, even where transparent huge pages are "always"
    /// (what an application's buffers would be); --huge-pages puts them in huge pages where the
    /// kernel gives them.
    #[test]
    fn buffers_are_in_ordinary_pages_unless_huge_pages_are_asked_for() {
        let plain = IoBuffers::new(4, 1 << 20, 4096, false).unwrap();
        if let Some(huge) = plain.huge_bytes() {
            assert_eq!(huge, 0, "ordinary buffers in huge pages");
        }
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
        if !thp.contains("[never]") && !thp.is_empty() {
            let huge = IoBuffers::new(4, 1 << 20, 4096, true).unwrap();
            assert!(huge.huge_bytes().is_some_and(|b| b > 0), "no huge pages given with THP {thp}");
        }
    }

    #[test]
    fn huge_page_bytes_are_summed_over_the_mappings_vmas() {
        let smaps = "\
7f0000000000-7f0000001000 rw-p 00000000 00:00 0
AnonHugePages:         0 kB
7f0000100000-7f0000200000 rw-p 00000000 00:00 0
Rss:                1024 kB
AnonHugePages:         0 kB
7f0000200000-7f0000600000 rw-p 00000000 00:00 0
AnonHugePages:      4096 kB
7f0000600000-7f0000700000 rw-p 00000000 00:00 0
AnonHugePages:         0 kB
7f0000800000-7f0000a00000 rw-p 00000000 00:00 0
AnonHugePages:      2048 kB
";
        assert_eq!(anon_huge_bytes(smaps, 0x7f0000100000, 0x7f0000700000), Some(4096 * 1024));
        assert_eq!(anon_huge_bytes(smaps, 0x7f0000150000, 0x7f0000900000), Some(6144 * 1024));
        assert_eq!(anon_huge_bytes(smaps, 0x7f0000000000, 0x7f0000001000), Some(0));
        assert_eq!(anon_huge_bytes(smaps, 0x7f0000700000, 0x7f0000800000), None, "in the gap");
    }
}
