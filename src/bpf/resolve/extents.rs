//! Where files and journals are on a disk: a file's extents (FIEMAP), a filesystem device's place
//! on its disk (sysfs), and the journal's place read from the filesystem's superblock. Used by
//! src/bpf/resolve/block_files.rs to map block requests to files.

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// Where a filesystem's block device sits on its disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    pub disk: (u32, u32),
    pub start_sector: u64,
}

/// sysfs: a partition's disk and start sector, or the device itself at 0.
pub fn placement(sys: &Path, dev: (u32, u32)) -> Option<Placement> {
    let dir = sys.join(format!("dev/block/{}:{}", dev.0, dev.1));
    if !dir.exists() {
        return None;
    }
    if !dir.join("partition").exists() {
        return Some(Placement { disk: dev, start_sector: 0 });
    }
    let start = std::fs::read_to_string(dir.join("start")).ok()?.trim().parse().ok()?;
    let parent = std::fs::read_to_string(dir.join("../dev")).ok()?;
    let (a, b) = parent.trim().split_once(':')?;
    Some(Placement { disk: (a.parse().ok()?, b.parse().ok()?), start_sector: start })
}

/// One extent as FIEMAP reports it (bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
    pub flags: u32,
}

/// FIEMAP_EXTENT_* (include/uapi/linux/fiemap.h).
pub const FIEMAP_EXTENT_LAST: u32 = 0x1;
pub const FIEMAP_EXTENT_UNKNOWN: u32 = 0x2;
pub const FIEMAP_EXTENT_DELALLOC: u32 = 0x4;
pub const FIEMAP_EXTENT_ENCODED: u32 = 0x8;
pub const FIEMAP_EXTENT_NOT_ALIGNED: u32 = 0x100;
pub const FIEMAP_EXTENT_DATA_INLINE: u32 = 0x200;
pub const FIEMAP_EXTENT_DATA_TAIL: u32 = 0x400;
/// Extents whose bytes are not (or not only) at `physical`: not mapped.
const NOT_PLACED: u32 = FIEMAP_EXTENT_UNKNOWN
    | FIEMAP_EXTENT_DELALLOC
    | FIEMAP_EXTENT_ENCODED
    | FIEMAP_EXTENT_NOT_ALIGNED
    | FIEMAP_EXTENT_DATA_INLINE
    | FIEMAP_EXTENT_DATA_TAIL;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FiemapHead {
    fm_start: u64,
    fm_length: u64,
    fm_flags: u32,
    fm_mapped_extents: u32,
    fm_extent_count: u32,
    fm_reserved: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FiemapExtent {
    fe_logical: u64,
    fe_physical: u64,
    fe_length: u64,
    fe_reserved64: [u64; 2],
    fe_flags: u32,
    fe_reserved: [u32; 3],
}

/// _IOWR('f', 11, struct fiemap).
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
const BATCH: usize = 256;

#[repr(C)]
struct FiemapBuf {
    head: FiemapHead,
    extents: [FiemapExtent; BATCH],
}

/// The file's extents (without FIEMAP_FLAG_SYNC: asking must not cause writeback), at most `max`.
pub fn fiemap(f: &File, max: usize) -> std::io::Result<Vec<Extent>> {
    let mut out = Vec::new();
    let mut start = 0u64;
    loop {
        let mut buf = Box::new(FiemapBuf {
            head: FiemapHead {
                fm_start: start,
                fm_length: u64::MAX - start,
                fm_extent_count: BATCH as u32,
                ..Default::default()
            },
            extents: [FiemapExtent::default(); BATCH],
        });
        // SAFETY: the buffer is a struct fiemap followed by fm_extent_count extents, as the ioctl
        // expects; it lives across the call.
        let r = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FIEMAP as _, &mut *buf as *mut FiemapBuf) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = (buf.head.fm_mapped_extents as usize).min(BATCH);
        if n == 0 {
            return Ok(out);
        }
        for e in &buf.extents[..n] {
            out.push(Extent {
                logical: e.fe_logical,
                physical: e.fe_physical,
                length: e.fe_length,
                flags: e.fe_flags,
            });
        }
        let last = &buf.extents[n - 1];
        if last.fe_flags & FIEMAP_EXTENT_LAST != 0 || out.len() >= max || n < BATCH {
            out.truncate(max);
            return Ok(out);
        }
        start = last.fe_logical + last.fe_length;
    }
}

/// Extents as sector ranges on the disk, and whether some had no place yet.
pub fn disk_ranges(extents: &[Extent], place: Placement) -> (Vec<(u64, u64)>, bool) {
    let mut unsettled = false;
    let mut out = Vec::new();
    for e in extents {
        if e.flags & NOT_PLACED != 0 || e.length == 0 {
            unsettled = true;
            continue;
        }
        let start = place.start_sector + e.physical / 512;
        out.push((start, start + e.length.div_ceil(512)));
    }
    (out, unsettled)
}

/// A filesystem's journal or log, as sector ranges of its device (not of the disk), from the
/// superblock at the start of `dev_head` (at least 2 KiB of the device). Depth-0 ext4 journals
/// (the journal inode's extents fit in the superblock's copy of it) and internal xfs logs.
pub fn journal_ranges(dev_head: &[u8]) -> Vec<(u64, u64)> {
    ext4_journal(dev_head).or_else(|| xfs_log(dev_head)).unwrap_or_default()
}

fn le16(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?)))
}
fn le32(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?)))
}
fn be32(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?)))
}
fn be64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// ext4: the superblock at 1024 keeps a copy of the journal inode's i_block (`s_jnl_blocks`,
/// when `s_jnl_backup_type` is 1); with an extent tree of depth 0 it lists the journal's extents.
fn ext4_journal(b: &[u8]) -> Option<Vec<(u64, u64)>> {
    let sb = b.get(1024..2048)?;
    if le16(sb, 0x38)? != 0xEF53 || le32(sb, 0x5C)? & 0x4 == 0 || le32(sb, 0xE4)? != 0 {
        return None;
    }
    if *sb.get(0xFD)? != 1 {
        return None;
    }
    let block = 1024u64 << le32(sb, 0x18)?.min(16);
    let ib = sb.get(0x10C..0x10C + 60)?;
    if le16(ib, 0)? != 0xF30A || le16(ib, 6)? != 0 {
        return None;
    }
    let n = le16(ib, 2)?.min(4) as usize;
    let mut out = Vec::new();
    for i in 0..n {
        let e = 12 + 12 * i;
        let mut len = le16(ib, e + 4)?;
        if len > 32768 {
            len -= 32768;
        }
        let start = le16(ib, e + 6)? << 32 | le32(ib, e + 8)?;
        out.push((start * block / 512, (start + len) * block / 512));
    }
    Some(out)
}

/// xfs: the primary superblock at 0 (big-endian) places an internal log at `sb_logstart`
/// (AG-relative block number: AG in the high bits, `sb_agblklog` bits of block).
fn xfs_log(b: &[u8]) -> Option<Vec<(u64, u64)>> {
    if b.get(0..4)? != b"XFSB" {
        return None;
    }
    let block = be32(b, 4)?;
    let logstart = be64(b, 48)?;
    let agblocks = be32(b, 84)?;
    let logblocks = be32(b, 96)?;
    let agblklog = u32::from(*b.get(124)?);
    if logstart == 0 || agblklog >= 64 {
        return None;
    }
    let ag = logstart >> agblklog;
    let agbno = logstart & ((1u64 << agblklog) - 1);
    let start = (ag * agblocks + agbno) * block / 512;
    Some(vec![(start, start + logblocks * block / 512)])
}

/// /proc/self/mountinfo: (mount id, major:minor, fs type, mount source) per line.
pub fn mount_sources(text: &str) -> Vec<(u64, (u32, u32), String, String)> {
    text.lines()
        .filter_map(|l| {
            let id = l.split(' ').next()?.parse().ok()?;
            let dev = l.split(' ').nth(2)?;
            let (maj, min) = dev.split_once(':')?;
            let mut tail = l.split(" - ").nth(1)?.split(' ');
            let (fstype, source) = (tail.next()?, tail.next()?);
            Some((id, (maj.parse().ok()?, min.parse().ok()?), fstype.to_string(), source.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_land_after_the_partition_start_and_delalloc_is_unsettled() {
        let place = Placement { disk: (8, 0), start_sector: 2048 };
        let ext = [
            Extent { logical: 0, physical: 1 << 20, length: 8192, flags: 0 },
            Extent { logical: 8192, physical: 0, length: 4096, flags: FIEMAP_EXTENT_DELALLOC | 2 },
            Extent { logical: 12288, physical: 4 << 20, length: 1000, flags: FIEMAP_EXTENT_LAST },
        ];
        let (r, unsettled) = disk_ranges(&ext, place);
        assert_eq!(r, vec![(2048 + 2048, 2048 + 2048 + 16), (2048 + 8192, 2048 + 8192 + 2)]);
        assert!(unsettled);
    }

    #[test]
    fn superblocks_place_the_journal() {
        // ext4, 4 KiB blocks, journal of 1024 blocks at block 40960 (depth-0 extent tree).
        let mut b = vec![0u8; 2048];
        let sb = 1024;
        b[sb + 0x38..sb + 0x3A].copy_from_slice(&0xEF53u16.to_le_bytes());
        b[sb + 0x18..sb + 0x1C].copy_from_slice(&2u32.to_le_bytes());
        b[sb + 0x5C..sb + 0x60].copy_from_slice(&4u32.to_le_bytes());
        b[sb + 0xFD] = 1;
        let ib = sb + 0x10C;
        b[ib..ib + 2].copy_from_slice(&0xF30Au16.to_le_bytes());
        b[ib + 2..ib + 4].copy_from_slice(&1u16.to_le_bytes());
        b[ib + 12 + 4..ib + 12 + 6].copy_from_slice(&1024u16.to_le_bytes());
        b[ib + 12 + 8..ib + 12 + 12].copy_from_slice(&40960u32.to_le_bytes());
        assert_eq!(journal_ranges(&b), vec![(40960 * 8, (40960 + 1024) * 8)]);
        // xfs, 4 KiB blocks, 2^14 blocks per AG (agblklog 14), log at AG 2 block 100, 2560 blocks.
        let mut x = vec![0u8; 2048];
        x[0..4].copy_from_slice(b"XFSB");
        x[4..8].copy_from_slice(&4096u32.to_be_bytes());
        x[48..56].copy_from_slice(&((2u64 << 14) | 100).to_be_bytes());
        x[84..88].copy_from_slice(&16000u32.to_be_bytes());
        x[96..100].copy_from_slice(&2560u32.to_be_bytes());
        x[124] = 14;
        let start = (2 * 16000 + 100) * 8;
        assert_eq!(journal_ranges(&x), vec![(start, start + 2560 * 8)]);
        assert!(journal_ranges(&[0u8; 2048]).is_empty());
    }

    #[test]
    fn mountinfo_gives_type_and_source() {
        let mi = "36 25 7:3 / /mnt/x rw,relatime shared:1 - ext4 /dev/loop3 rw\n\
                  40 25 0:45 / /run rw - tmpfs tmpfs rw\n";
        assert_eq!(
            mount_sources(mi),
            vec![
                (36, (7, 3), "ext4".into(), "/dev/loop3".into()),
                (40, (0, 45), "tmpfs".into(), "tmpfs".into())
            ]
        );
    }
}
