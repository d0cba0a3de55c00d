//! File names from the dentry chain, once per inode (ioscope_common::file_names): programs of their
//! own on the events that bring a file's first I/O (a folio entering the cache, a folio dirtied, a
//! direct I/O), as BTF tracepoints (the events' arguments are the kernel's own pointers). Each is
//! optional: a kernel that refuses one only loses names found that way.

use aya_ebpf::{
    helpers::generated::bpf_probe_read_kernel_str,
    macros::{btf_tracepoint, map},
    maps::{LruHashMap, PerCpuArray},
    programs::BtfTracePointContext,
};
use ioscope_common::file_names::{
    FileName, NameKey, NameLast, NameLayout, FILE_NAMES_MAX, NAME_DEPTH, NAME_LEN, NAME_ROOT, NAME_UNLINKED,
};

use crate::kernel::{kernel_field, Mem, Probe};

#[unsafe(no_mangle)]
static NAME_LAYOUT: NameLayout = NameLayout::UNSET;

#[map]
static FILE_NAMES: LruHashMap<NameKey, FileName> = LruHashMap::with_max_entries(FILE_NAMES_MAX, 0);

#[map]
static FILE_NAMES_LAST: PerCpuArray<NameLast> = PerCpuArray::with_max_entries(1, 0);

#[map]
static FILE_NAMES_SCRATCH: PerCpuArray<FileName> = PerCpuArray::with_max_entries(1, 0);

/// One field of the layout.
macro_rules! name_layout {
    ($f:ident) => {
        // SAFETY: a plain read of a static the loader wrote before load (read-only since).
        unsafe { core::ptr::read_volatile(&raw const NAME_LAYOUT.$f) }
    };
}

/// `filemap:mm_filemap_add_to_page_cache(struct folio *)`: a folio of a file enters the cache.
#[btf_tracepoint(function = "mm_filemap_add_to_page_cache")]
pub fn file_name_add(ctx: BtfTracePointContext) -> i32 {
    if name_layout!(configured) != 0 {
        let folio: *const u8 = ctx.arg(0);
        let mapping: *const u8 = kernel_field(folio, name_layout!(folio_mapping));
        if !mapping.is_null() {
            name_inode(kernel_field(mapping, name_layout!(mapping_host)), 0);
        }
    }
    0
}

/// `writeback:writeback_dirty_folio(struct folio *, struct address_space *)`: a folio is dirtied.
#[btf_tracepoint(function = "writeback_dirty_folio")]
pub fn file_name_dirty(ctx: BtfTracePointContext) -> i32 {
    if name_layout!(configured) != 0 {
        let mapping: *const u8 = ctx.arg(1);
        if !mapping.is_null() {
            name_inode(kernel_field(mapping, name_layout!(mapping_host)), 0);
        }
    }
    0
}

/// `writeback:writeback_single_inode_start(struct inode *, ...)`: an inode's pages go to writeback
/// (the flusher, sync(2)). Names a file whose name the LRU map lost since it was dirtied (a burst
/// of new files written back later): its writeback row gets a path too.
#[btf_tracepoint(function = "writeback_single_inode_start")]
pub fn file_name_wb(ctx: BtfTracePointContext) -> i32 {
    if name_layout!(configured) != 0 {
        name_inode(ctx.arg(0), 0);
    }
    0
}

/// `iomap:iomap_dio_rw_begin(struct kiocb *, ...)`: a direct I/O; its file's own dentry (the name
/// it was opened by) is used.
#[btf_tracepoint(function = "iomap_dio_rw_begin")]
pub fn file_name_dio(ctx: BtfTracePointContext) -> i32 {
    if name_layout!(configured) != 0 {
        let iocb: *const u8 = ctx.arg(0);
        let filp: *const u8 = kernel_field(iocb, name_layout!(kiocb_filp));
        if !filp.is_null() {
            let dentry: *const u8 = kernel_field(filp, name_layout!(file_dentry));
            if !dentry.is_null() {
                let inode: *const u8 = kernel_field(dentry, name_layout!(dentry_inode));
                name_inode(inode, dentry as u64);
            }
        }
    }
    0
}

/// `filemap:mm_filemap_delete_from_page_cache(struct folio *)`: a folio leaves the cache. When its
/// inode has no link left (a deleted file's pages go as the inode is evicted), its stored name is
/// flagged unlinked: the path shown is the kernel's " (deleted)" instead of none once the file is
/// gone (short-lived files created, read and deleted between two samples).
#[btf_tracepoint(function = "mm_filemap_delete_from_page_cache")]
pub fn file_name_gone(ctx: BtfTracePointContext) -> i32 {
    if name_layout!(configured) != 0 {
        let folio: *const u8 = ctx.arg(0);
        let mapping: *const u8 = kernel_field(folio, name_layout!(folio_mapping));
        if !mapping.is_null() {
            mark_unlinked(kernel_field(mapping, name_layout!(mapping_host)));
        }
    }
    0
}

/// Flags the stored name of `inode` (a pointer the verifier knows) unlinked when the inode has no
/// link left and the name is of its generation.
#[inline(always)]
fn mark_unlinked(inode: *const u8) {
    if inode.is_null() {
        return;
    }
    let nlink: u32 = kernel_field(inode, name_layout!(inode_nlink));
    if nlink != 0 {
        return;
    }
    let sb: *const u8 = kernel_field(inode, name_layout!(inode_sb));
    if sb.is_null() {
        return;
    }
    let key = NameKey {
        dev: kernel_field(sb, name_layout!(sb_dev)),
        _pad: 0,
        ino: kernel_field(inode, name_layout!(inode_ino)),
    };
    let generation: u32 = kernel_field(inode, name_layout!(inode_generation));
    let Some(name) = FILE_NAMES.get_ptr_mut(&key) else { return };
    // SAFETY: the stored value; a racing store writes a whole newer name, which this leaves be
    // unless its generation is the same.
    let name = unsafe { &mut *name };
    if name.generation == generation && name.flags & NAME_UNLINKED == 0 {
        name.flags |= NAME_UNLINKED;
    }
}

/// Names `inode` (a pointer the verifier knows) unless this CPU just did, or it is already named
/// with its generation. `dentry`: the dentry to name it by (0: its first alias).
#[inline(always)]
fn name_inode(inode: *const u8, dentry: u64) {
    if inode.is_null() {
        return;
    }
    let sb: *const u8 = kernel_field(inode, name_layout!(inode_sb));
    if sb.is_null() {
        return;
    }
    let key = NameKey {
        dev: kernel_field(sb, name_layout!(sb_dev)),
        _pad: 0,
        ino: kernel_field(inode, name_layout!(inode_ino)),
    };
    let generation: u32 = kernel_field(inode, name_layout!(inode_generation));
    if key.ino == 0 {
        return;
    }
    let Some(last) = FILE_NAMES_LAST.get_ptr_mut(0) else { return };
    // SAFETY: this CPU's slot; tracing programs do not nest on one CPU.
    let last = unsafe { &mut *last };
    if last.key == key && last.generation == generation {
        return;
    }
    *last = NameLast { key, generation, _pad: 0 };
    if named(&key, generation) {
        return;
    }
    let dentry = if dentry != 0 {
        dentry
    } else {
        // The first alias: `i_dentry.first` is the alias's `d_u.d_alias` node.
        let first: u64 = Probe::get(inode, name_layout!(inode_dentry));
        if first == 0 {
            return;
        }
        first.wrapping_sub(u64::from(name_layout!(dentry_alias)))
    };
    walk(key, dentry);
}

/// Whether `key` is stored with `generation`.
#[inline(always)]
fn named(key: &NameKey, generation: u32) -> bool {
    // SAFETY: a plain read of the stored value.
    unsafe { FILE_NAMES.get(key) }.is_some_and(|n| n.generation == generation)
}

/// Stores the names up the chain from `dentry` (the dentry of inode `key`), until an ancestor is
/// already named, the root, or NAME_DEPTH levels.
///
/// Written out level by level, not as a loop: verifiers before Linux 6.4 refuse a bounded loop
/// whose back-edge leaves a helper call ("back-edge from insn 114 to 115" on Debian's 5.10 and
/// 6.1), and the loop's shape is the compiler's choice.
#[inline(always)]
fn walk(key: NameKey, dentry: u64) {
    let Some(s) = FILE_NAMES_SCRATCH.get_ptr_mut(0) else { return };
    // SAFETY: this CPU's scratch value; tracing programs do not nest on one CPU.
    let s = unsafe { &mut *s };
    let mut at = (key, dentry);
    macro_rules! level {
        () => {
            match name_level(s, at.0, at.1) {
                Some(next) => at = next,
                None => return,
            }
        };
    }
    const _: () = assert!(NAME_DEPTH == 16, "walk() writes out NAME_DEPTH levels");
    level!();
    level!();
    level!();
    level!();
    level!();
    level!();
    level!();
    level!();
    level!();
    level!();
    level!();
    level!();
    level!();
    level!();
    level!();
    level!();
    let _ = at;
}

/// Stores the name of `dentry` (of inode `key`) through the scratch value `s`; the parent's key
/// and dentry when the chain goes on (the parent is not the root and not yet named).
#[inline(always)]
fn name_level(s: &mut FileName, key: NameKey, dentry: u64) -> Option<(NameKey, u64)> {
    let d = dentry as *const u8;
    let parent: u64 = Probe::get(d, name_layout!(dentry_parent));
    let inode: u64 = Probe::get(d, name_layout!(dentry_inode));
    if parent == 0 || inode == 0 {
        return None;
    }
    let root = parent == dentry;
    let parent_inode: u64 = Probe::get(parent as *const u8, name_layout!(dentry_inode));
    s.generation = Probe::get(inode as *const u8, name_layout!(inode_generation));
    s.parent_ino =
        if root { key.ino } else { Probe::get(parent_inode as *const u8, name_layout!(inode_ino)) };
    let pprev: u64 = Probe::get(d, name_layout!(dentry_hash_pprev));
    s.flags = if root {
        NAME_ROOT
    } else if pprev == 0 {
        NAME_UNLINKED
    } else {
        0
    };
    let name: u64 = Probe::get(d, name_layout!(dentry_name));
    // SAFETY: the helper copes with any address and writes at most NAME_LEN bytes.
    let n =
        unsafe { bpf_probe_read_kernel_str(s.name.as_mut_ptr().cast(), NAME_LEN as u32, name as *const _) };
    if n <= 0 {
        return None;
    }
    let _ = FILE_NAMES.insert(&key, &*s, 0);
    if root || s.parent_ino == 0 {
        return None;
    }
    let key = NameKey { dev: key.dev, _pad: 0, ino: s.parent_ino };
    if named(&key, Probe::get(parent_inode as *const u8, name_layout!(inode_generation))) {
        return None;
    }
    Some((key, parent))
}
