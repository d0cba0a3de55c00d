//! File names from the kernel's dentries (ioscope_common::file_names, ebpf/probes/src/file_names.rs):
//! the offsets the programs need, attaching them, and turning FILE_NAMES entries into paths.
//!
//! A path is built from the inode's entry and its ancestors' (each names its parent's inode) up to
//! the filesystem's root, then put under a mount of that filesystem whose root contains it (a bind
//! mount of a subdirectory too). The caller checks the result before using it, by a lookup that
//! follows no link (src/bpf/resolve/files.rs, src/bpf/resolve/safe_open.rs), and calls
//! [`FileNames::forget`] when it no longer names the inode (a rename, a directory swapped for a
//! symlink): the entries go, and the inode's next I/O names it again.

use std::collections::HashMap;

use anyhow::{anyhow, Result};
use aya::maps::{HashMap as BpfHashMap, MapData, PerCpuArray, PerCpuValues};
use aya::Ebpf;
use ioscope_common::file_names::{
    FileName, NameKey, NameLast, NameLayout, FILE_NAMES_LAST_MAP, FILE_NAMES_MAP, NAME_ROOT, NAME_UNLINKED,
};

use super::kernel_btf::KernelBtf;
use super::resolve::types::{FsPath, KernelNames};
use crate::sample::BpfProgramStatus;

/// (program, category, event) of each naming program, and of `file_name_gone`, which flags a
/// deleted file's name unlinked as its pages leave the cache.
pub const PROGRAMS: [(&str, &str, &str); 5] = [
    ("file_name_add", "filemap", "mm_filemap_add_to_page_cache"),
    ("file_name_dirty", "writeback", "writeback_dirty_folio"),
    ("file_name_dio", "iomap", "iomap_dio_rw_begin"),
    ("file_name_wb", "writeback", "writeback_single_inode_start"),
    ("file_name_gone", "filemap", "mm_filemap_delete_from_page_cache"),
];

/// Most directory paths remembered between samples (cleared when full).
const DIR_CACHE_MAX: usize = 8192;
/// Levels followed up a chain (a cycle would be a corrupt map; the kernel stores at most
/// NAME_DEPTH levels per I/O, but a deep tree is named over several I/Os).
const MAX_LEVELS: usize = 256;

/// Where the programs find what they read, from the kernel's BTF; each field checked for the size
/// the programs load.
pub fn layout(btf: &KernelBtf) -> Result<NameLayout> {
    let field = |strukt: &str, member: &str, size: u32| btf.offset_sized(strukt, member, size);
    // The folio overlays the page: before folios (5.15), the event's page has `mapping` there.
    let folio_mapping = field("folio", "mapping", 8).or_else(|_| field("page", "mapping", 8))?;
    let d_name = btf.field("dentry", "d_name")?.offset;
    let d_hash = btf.field("dentry", "d_hash")?.offset;
    let f_path = btf.field("file", "f_path")?.offset;
    Ok(NameLayout {
        configured: 1,
        folio_mapping,
        mapping_host: field("address_space", "host", 8)?,
        inode_sb: field("inode", "i_sb", 8)?,
        inode_ino: field("inode", "i_ino", 8)?,
        inode_generation: field("inode", "i_generation", 4)?,
        inode_dentry: field("inode", "i_dentry", 8)?,
        sb_dev: field("super_block", "s_dev", 4)?,
        dentry_alias: dentry_alias(btf)?,
        dentry_parent: field("dentry", "d_parent", 8)?,
        dentry_inode: field("dentry", "d_inode", 8)?,
        dentry_name_len: d_name + field("qstr", "len", 4)?,
        dentry_name: d_name + field("qstr", "name", 8)?,
        dentry_hash_pprev: d_hash + field("hlist_bl_node", "pprev", 8)?,
        kiocb_filp: field("kiocb", "ki_filp", 8)?,
        file_dentry: f_path + field("path", "dentry", 8)?,
        inode_nlink: field("inode", "i_nlink", 4)?,
    })
}

/// Where a dentry's node in its inode's alias list (`i_dentry`) lies: `d_alias`, in an anonymous
/// union of `struct dentry` (7.x) or in its union `d_u` (5.x, 6.x), whichever the kernel's BTF has.
fn dentry_alias(btf: &KernelBtf) -> Result<u32> {
    let alias = btf.field("dentry", "d_alias").or_else(|direct| {
        btf.field_path("dentry", &["d_u", "d_alias"])
            .map_err(|in_union| anyhow!("no dentry alias list node: {direct:#}; {in_union:#}"))
    })?;
    // An hlist_node: next, pprev.
    if alias.size != 16 {
        anyhow::bail!("struct dentry member `d_alias` is {} bytes, expected 16", alias.size);
    }
    Ok(alias.offset)
}

/// The loads [`attach`] will ask for (see super::preload), with the same arguments.
pub fn loads<'a>(
    layout: &Result<NameLayout, String>,
    btf: Option<&'a aya::Btf>,
    hidden: &[String],
) -> Vec<super::preload::Planned<'a>> {
    let (Ok(_), Some(btf)) = (layout, btf) else { return Vec::new() };
    PROGRAMS
        .iter()
        .filter(|(_, category, event)| !hidden.iter().any(|h| *h == format!("{category}:{event}")))
        .map(|(program, _, event)| (program.to_string(), super::preload::How::BtfTracePoint(event, btf)))
        .collect()
}

/// Attaches the naming programs (`configured`: the layout was found; `hidden`: tracepoints to
/// treat as missing) and takes the map. Without any program attached there is nothing to read.
pub fn attach(
    ebpf: &mut Ebpf,
    layout: Result<(), String>,
    btf: Option<&aya::Btf>,
    hidden: &[String],
) -> (Vec<BpfProgramStatus>, Option<FileNames>) {
    let mut statuses = Vec::new();
    for (program, category, event) in PROGRAMS {
        let why_not = match (&layout, btf) {
            (Err(e), _) => Some(format!("no file names from dentries: {e}")),
            (_, None) => Some("no file names from dentries: no kernel BTF".to_string()),
            _ if hidden.iter().any(|h| *h == format!("{category}:{event}")) => {
                Some(format!("tracepoint {category}:{event} is not available on this kernel"))
            }
            _ => None,
        };
        let status = match (why_not, btf) {
            (None, Some(btf)) => super::attach::attach_btf_tracepoint(ebpf, program, category, event, btf)
                .unwrap_or_else(|e| {
                    super::attach::program_status(program, category, event, Err(format!("{e:#}")))
                }),
            (why, _) => super::attach::program_status(program, category, event, Err(why.unwrap_or_default())),
        };
        statuses.push(status);
    }
    if !statuses.iter().any(|s| s.attached) {
        return (statuses, None);
    }
    let maps = (|| -> Result<FileNames> {
        let mut take =
            |name: &str| ebpf.take_map(name).ok_or_else(|| anyhow!("map {name} is not in the eBPF object"));
        let names = BpfHashMap::try_from(take(FILE_NAMES_MAP)?)?;
        let last = PerCpuArray::try_from(take(FILE_NAMES_LAST_MAP)?)?;
        Ok(FileNames { names, last, dirs: HashMap::new() })
    })();
    match maps {
        Ok(names) => (statuses, Some(names)),
        Err(e) => {
            for s in statuses.iter_mut() {
                s.error.get_or_insert_with(|| format!("{e:#}"));
            }
            (statuses, None)
        }
    }
}

pub struct FileNames {
    names: BpfHashMap<MapData, NameKey, FileName>,
    last: PerCpuArray<MapData, NameLast>,
    /// Directory (kernel dev_t, inode) → its path in the filesystem (ends without '/').
    dirs: HashMap<(u32, u64), String>,
}

impl KernelNames for FileNames {
    /// The path of inode `ino` of filesystem `dev` (kernel dev_t) inside it, when the kernel named
    /// it and all its ancestors.
    fn fs_path(&mut self, dev: u32, ino: u64) -> Option<FsPath> {
        let lookup = |ino: u64| self.names.get(&NameKey { dev, _pad: 0, ino }, 0).ok();
        let file = lookup(ino)?;
        let unlinked = file.flags & NAME_UNLINKED != 0;
        if file.flags & NAME_ROOT != 0 {
            return Some(FsPath { path: "/".into(), unlinked, chain: vec![ino] });
        }
        let mut chain = vec![ino];
        let mut names = vec![String::from_utf8_lossy(file.name_bytes()).into_owned()];
        let mut parent = file.parent_ino;
        let mut prefix = None;
        for _ in 0..MAX_LEVELS {
            if let Some(p) = self.dirs.get(&(dev, parent)) {
                prefix = Some(p.clone());
                break;
            }
            let dir = lookup(parent)?;
            chain.push(parent);
            if dir.flags & NAME_ROOT != 0 {
                prefix = Some(String::new());
                break;
            }
            names.push(String::from_utf8_lossy(dir.name_bytes()).into_owned());
            parent = dir.parent_ino;
        }
        let mut path = prefix?;
        // The directories' paths on the way down, remembered for their other files.
        if self.dirs.len() + names.len() > DIR_CACHE_MAX {
            self.dirs.clear();
        }
        for (i, name) in names.iter().enumerate().rev() {
            path.push('/');
            path.push_str(name);
            if i > 0 {
                self.dirs.insert((dev, chain[i]), path.clone());
            }
        }
        Some(FsPath { path, unlinked, chain })
    }

    /// Whether the kernel named inode `ino` of filesystem `dev` (its own entry only: one lookup).
    fn has(&self, dev: u32, ino: u64) -> bool {
        self.names.get(&NameKey { dev, _pad: 0, ino }, 0).is_ok()
    }

    /// Drops a chain's entries (a path that no longer names its inode: renamed, or a directory on
    /// the way was): the kernel names them again at their next I/O.
    fn forget(&mut self, dev: u32, chain: &[u64]) {
        for &ino in chain {
            let _ = self.names.remove(&NameKey { dev, _pad: 0, ino });
            self.dirs.remove(&(dev, ino));
        }
        // Each CPU's memo of the inode it named last, so the next I/O looks again.
        if let Ok(n) = aya::util::nr_cpus() {
            if let Ok(zero) = PerCpuValues::try_from(vec![NameLast::default(); n]) {
                let _ = self.last.set(0, zero, 0);
            }
        }
    }
}

/// The file-names family: paths from the kernel's dentries, handed to the file resolver the files
/// family publishes (it names the files, readahead and block-to-file rows).
#[derive(Default)]
pub struct FileNamesFamily {
    layout: Option<Result<NameLayout, String>>,
}

impl super::family::Family for FileNamesFamily {
    fn name(&self) -> &'static str {
        "file names"
    }

    fn plan(&mut self, setup: &mut super::family::Setup) {
        self.layout = Some(match setup.btf {
            Some(k) => layout(k).map_err(|e| format!("{e:#}")),
            None => Err("no kernel BTF".to_string()),
        });
    }

    fn globals<'s>(&'s self, loader: &mut aya::EbpfLoader<'s>) {
        let layout = self.layout.as_ref().and_then(|l| l.as_ref().ok()).unwrap_or(&NameLayout::UNSET);
        loader.override_global(ioscope_common::file_names::NAME_LAYOUT_GLOBAL, layout, true);
    }

    fn loads<'a>(
        &'a self,
        setup: &super::family::Setup<'a>,
        _: &[super::preload::Planned<'a>],
    ) -> Vec<super::preload::Planned<'a>> {
        let Some(layout) = &self.layout else { return Vec::new() };
        loads(layout, setup.btf.map(|k| k.aya()), setup.hidden())
    }

    fn attach(
        &mut self,
        ebpf: &mut Ebpf,
        setup: &mut super::family::Setup,
        statuses: &mut Vec<BpfProgramStatus>,
    ) {
        let Some(layout) = self.layout.take() else { return };
        let (programs, names) = attach(ebpf, layout.map(|_| ()), setup.btf.map(|k| k.aya()), setup.hidden());
        statuses.extend(programs);
        if let Some(names) = names {
            setup.shared.get_or_insert_with(super::resolve::files::FileResolver::default).set_names(names);
        }
    }

    fn read(&mut self, _: &mut super::family::Shared, _: &mut crate::sample::BpfSample) -> Vec<String> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::super::resolve::mountinfo::{mounted_path, MountRoot};
    use super::*;

    /// 7.x moved `d_alias` out of the union `d_u` into an anonymous union, at the same place; a
    /// kernel with neither gets a reason naming both.
    #[test]
    fn the_alias_node_is_found_in_d_u_or_in_an_anonymous_union() {
        use crate::bpf::kernel_btf::synthetic::dentry;
        assert_eq!(dentry_alias(&dentry(true, true)).unwrap(), 176, "5.x and 6.x: d_u.d_alias");
        assert_eq!(dentry_alias(&dentry(false, true)).unwrap(), 176, "7.x: d_alias");
        for in_d_u in [true, false] {
            let e = format!("{:#}", dentry_alias(&dentry(in_d_u, false)).unwrap_err());
            assert!(e.contains("`d_alias`"), "{e}");
        }
    }

    #[test]
    fn paths_go_under_the_whole_filesystem_first_else_a_bind_mount_that_holds_them() {
        let m = |dev, root: &'static str, mp: &'static str| MountRoot {
            dev,
            root: Path::new(root),
            mount_point: Path::new(mp),
        };
        let mounts = [
            m((7, 0), "/sub", "/srv/bind"),
            m((7, 0), "/", "/mnt/a"),
            m((7, 1), "/data", "/data"),
            m((8, 1), "/", "/"),
        ];
        let at = |dev, p| mounted_path(mounts.iter().cloned(), dev, p);
        assert_eq!(at((7, 0), "/sub/x"), Some(PathBuf::from("/mnt/a/sub/x")));
        assert_eq!(at((7, 1), "/data/x/y"), Some(PathBuf::from("/data/x/y")));
        assert_eq!(at((7, 1), "/other/y"), None);
        assert_eq!(at((8, 1), "/etc/hosts"), Some(PathBuf::from("/etc/hosts")));
        assert_eq!(at((9, 0), "/x"), None);
        // A prefix of a name is not a parent directory.
        assert_eq!(at((7, 1), "/database"), None);
    }
}
