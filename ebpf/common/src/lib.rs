//! Types shared by ioscope's kernel programs and its userspace. `#![no_std]`, `#[repr(C)]`.
//!
//! Everything here has one layout on both sides of the map/global boundary: the kernel program
//! (built for `bpfel-unknown-none`) writes it, userspace (with the `user` feature, through aya)
//! reads it. Only fixed-size integer fields, explicit padding, no enums in the ABI.
#![no_std]

pub mod block;
pub mod block_files;
pub mod files;
pub mod page_cache;
pub mod readahead;

/// Name of the per-CPU hash map `block_rq_issue` counts into: key is the kernel's `dev_t` (u32),
/// value is [`RqIssueCounters`].
pub const RQ_ISSUE_MAP: &str = "RQ_ISSUE";

/// Name of the read-only global holding [`RqIssueLayout`], set by the loader before load.
pub const RQ_ISSUE_LAYOUT_GLOBAL: &str = "RQ_ISSUE_LAYOUT";

/// Most devices the rq_issue map tracks; a machine with more block devices loses the extra ones
/// (the insert fails and that request is not counted) rather than growing kernel memory unbounded.
pub const RQ_ISSUE_MAX_DEVICES: u32 = 4096;

/// Where `block:block_rq_issue`'s fields sit in the tracepoint record, as userspace read them from
/// tracefs (`events/block/block_rq_issue/format`). They vary between kernels, so they are never
/// compiled in: the program counts nothing until `configured` is 1.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RqIssueLayout {
    /// 1 once userspace filled the offsets in; 0 (the compiled-in value) means "count nothing".
    pub configured: u32,
    /// Offset of `dev_t dev` (4 bytes).
    pub dev_offset: u32,
    /// Offset of `unsigned int bytes` (4 bytes).
    pub bytes_offset: u32,
    /// Offset of `char rwbs[]`; the program reads its first [`RWBS_PREFIX_LEN`] bytes.
    pub rwbs_offset: u32,
}

impl RqIssueLayout {
    /// The value compiled into the object: not configured.
    pub const UNSET: RqIssueLayout =
        RqIssueLayout { configured: 0, dev_offset: 0, bytes_offset: 0, rwbs_offset: 0 };
}

/// Per device and CPU: requests and bytes issued to the driver, split by direction.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RqIssueCounters {
    pub read_requests: u64,
    pub read_bytes: u64,
    pub write_requests: u64,
    pub write_bytes: u64,
    pub other_requests: u64,
    pub other_bytes: u64,
}

impl RqIssueCounters {
    /// Counts one request of `bytes` bytes in `direction`. Wrapping: a u64 of bytes does not
    /// overflow in practice, and the kernel side must not contain a panic path.
    #[inline(always)]
    pub fn add(&mut self, direction: Direction, bytes: u64) {
        let (requests, total) = match direction {
            Direction::Read => (&mut self.read_requests, &mut self.read_bytes),
            Direction::Write => (&mut self.write_requests, &mut self.write_bytes),
            Direction::Other => (&mut self.other_requests, &mut self.other_bytes),
        };
        *requests = requests.wrapping_add(1);
        *total = total.wrapping_add(bytes);
    }
}

/// How many leading bytes of `rwbs` decide the direction (see [`Direction::from_rwbs`]).
pub const RWBS_PREFIX_LEN: usize = 2;

/// The data direction of a block request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Read,
    Write,
    /// Flush, discard, secure erase, zone management and other operations that move no user data
    /// in either direction (or none we attribute to reading or writing).
    Other,
}

impl Direction {
    /// Decodes the tracepoint's `rwbs` string, written by the kernel's `blk_fill_rwbs()`
    /// (block/blk-core.c): an optional `F` when the request carries REQ_PREFLUSH, then one letter
    /// for the operation — `W` write, `R` read, `D` discard (`DE` secure erase), `F` flush, `N`
    /// anything else — then flag letters (`F` FUA, `A` readahead, `S` sync, `M` metadata) which are
    /// never `R` or `W`. So the operation letter is byte 0, or byte 1 after a preflush `F`; a write
    /// that also asks for a preflush ("FWS") is a write.
    #[inline(always)]
    pub fn from_rwbs(prefix: [u8; RWBS_PREFIX_LEN]) -> Direction {
        let op = if prefix[0] == b'F' { prefix[1] } else { prefix[0] };
        match op {
            b'R' => Direction::Read,
            b'W' => Direction::Write,
            _ => Direction::Other,
        }
    }
}

/// Bits of a kernel-internal `dev_t` that hold the minor number (include/linux/kdev_t.h,
/// MINORBITS). Tracepoints report this internal form, not the userspace encoding of `stat(2)`.
pub const KERNEL_MINOR_BITS: u32 = 20;

/// Splits a kernel-internal `dev_t` (`major << 20 | minor`) into (major, minor).
#[inline(always)]
pub const fn kernel_dev_major_minor(dev: u32) -> (u32, u32) {
    (dev >> KERNEL_MINOR_BITS, dev & ((1 << KERNEL_MINOR_BITS) - 1))
}

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], only u32/u64 fields with no implicit padding, every bit pattern valid.
    unsafe impl aya::Pod for super::RqIssueCounters {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::RqIssueLayout {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(rwbs: &str) -> Direction {
        let b = rwbs.as_bytes();
        Direction::from_rwbs([b[0], *b.get(1).unwrap_or(&0)])
    }

    #[test]
    fn rwbs_letters_map_to_directions() {
        assert_eq!(dir("R"), Direction::Read);
        assert_eq!(dir("RA"), Direction::Read);
        assert_eq!(dir("RSM"), Direction::Read);
        assert_eq!(dir("W"), Direction::Write);
        assert_eq!(dir("WS"), Direction::Write);
        assert_eq!(dir("WFS"), Direction::Write);
        // Preflush + write: data is written.
        assert_eq!(dir("FWS"), Direction::Write);
        assert_eq!(dir("FWFS"), Direction::Write);
        // Pure flush, preflush+flush, discard, secure erase, zone ops.
        assert_eq!(dir("F"), Direction::Other);
        assert_eq!(dir("FF"), Direction::Other);
        assert_eq!(dir("FS"), Direction::Other);
        assert_eq!(dir("D"), Direction::Other);
        assert_eq!(dir("DE"), Direction::Other);
        assert_eq!(dir("N"), Direction::Other);
    }

    #[test]
    fn counters_add_to_the_right_direction() {
        let mut c = RqIssueCounters::default();
        c.add(Direction::Read, 4096);
        c.add(Direction::Write, 65536);
        c.add(Direction::Write, 512);
        c.add(Direction::Other, 0);
        assert_eq!(
            c,
            RqIssueCounters {
                read_requests: 1,
                read_bytes: 4096,
                write_requests: 2,
                write_bytes: 66048,
                other_requests: 1,
                other_bytes: 0,
            }
        );
    }

    #[test]
    fn kernel_dev_t_splits_at_bit_20() {
        // 7:3 is /dev/loop3; 259:1 an NVMe partition; minor above 255 needs the wide field.
        assert_eq!(kernel_dev_major_minor((7 << 20) | 3), (7, 3));
        assert_eq!(kernel_dev_major_minor((259 << 20) | 1), (259, 1));
        assert_eq!(kernel_dev_major_minor((8 << 20) | 0xfffff), (8, 0xfffff));
    }
}
