//! The mmap reader of the readahead checks, written once for the live test
//! (tests/live/live_readahead.rs) and the kernel lab's guest (xtask/src/bin/lab-guest.rs), both
//! through xtask's library (src/lib.rs): random pages of a shared read-only mapping are touched, so each
//! page fault is the kernel's read-around to serve (or, with MADV_RANDOM, one page's read).

use std::fs::File;
use std::os::fd::AsRawFd;

/// The page size the touches step by.
pub const PAGE: u64 = 4096;
/// Random pages the reader touches.
pub const TOUCHES: u64 = 1000;

/// Maps `f` shared and read-only (with MADV_RANDOM when `random`) and reads one byte of each of
/// TOUCHES pseudo-random pages (xorshift, the same pages every run). The mapping is left in place
/// for the rest of the process (the live test's child keeps it until its parent has sampled).
pub fn touch_random_pages(f: &File, random: bool) {
    let len = f.metadata().expect("the mapped file's size").len() as usize;
    // SAFETY: a shared read-only mapping of a file nobody truncates while we read it.
    let p =
        unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0) };
    assert_ne!(p, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
    if random {
        // SAFETY: advice on our own mapping.
        assert_eq!(unsafe { libc::madvise(p, len, libc::MADV_RANDOM) }, 0);
    }
    let pages = len as u64 / PAGE;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut sum = 0u64;
    for _ in 0..TOUCHES {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = (x % pages * PAGE) as usize;
        // SAFETY: off is within the mapping.
        sum = sum.wrapping_add(u64::from(unsafe { std::ptr::read_volatile((p as *const u8).add(off)) }));
    }
    std::hint::black_box(sum);
}
