//! The kernel's BTF layout of the iomap events' structs, which the iomap programs' BTF tracepoint
//! twins read (the files family's `file_iomap_iter`, the page-cache family's direct I/O): found
//! once per start for both.

use anyhow::Result;
use ioscope_common::files::IomapBtfLayout;

use super::kernel_btf::KernelBtf;

/// The kernel's BTF layout of the iomap events' structs ([`iomap_btf_layout`]), found once for
/// the families that use it (the files' and the page cache's iomap programs).
pub struct IomapBtf(Result<IomapBtfLayout, String>);

impl IomapBtf {
    /// The layout, found the first time it is asked for.
    pub fn of<'s>(setup: &'s mut super::family::Setup) -> &'s Result<IomapBtfLayout, String> {
        let btf = setup.btf;
        let found = setup.shared.get_or_insert_with(|| {
            IomapBtf(match btf {
                Some(k) => iomap_btf_layout(k).map_err(|e| format!("{e:#}")),
                None => Err("no kernel BTF".to_string()),
            })
        });
        &found.0
    }

    /// The BTF the iomap programs' BTF tracepoint twins attach with: when the layout was found
    /// and BTF tracepoints are allowed.
    pub fn aya<'a>(setup: &super::family::Setup<'a>) -> Option<&'a aya::Btf> {
        let found = setup.shared.get::<IomapBtf>().is_some_and(|l| l.0.is_ok());
        setup.btf.filter(|_| found && setup.options.btf_tracepoints).map(|k| k.aya())
    }
}

/// Where the iomap programs' BTF twins find the iomap events' fields in the kernel's structs (see
/// [`IomapBtfLayout`]), each checked for the size the programs load.
pub fn iomap_btf_layout(btf: &KernelBtf) -> Result<IomapBtfLayout> {
    let field = |strukt: &str, member: &str, size: u32| btf.offset_sized(strukt, member, size);
    // Optional: the direction is `iov_iter.data_source` (a bool, Linux 5.14+), or before it the
    // WRITE bit (bit 0) of `iov_iter.type` (`iov_iter_rw()`), whose low byte comes first on a
    // little-endian machine: the programs read one byte there and test bit 0. Without either,
    // `iomap_iter` tells the direction.
    let data_source = field("iov_iter", "data_source", 1)
        .ok()
        .or_else(|| field("iov_iter", "type", 4).ok().filter(|_| cfg!(target_endian = "little")));
    let (kiocb_pos, inode_size) = (field("kiocb", "ki_pos", 8)?, field("inode", "i_size", 8)?);
    Ok(IomapBtfLayout {
        configured: 1,
        iter_inode: field("iomap_iter", "inode", 8)?,
        iter_flags: field("iomap_iter", "flags", 4)?,
        inode_sb: field("inode", "i_sb", 8)?,
        inode_ino: field("inode", "i_ino", 8)?,
        sb_dev: field("super_block", "s_dev", 4)?,
        kiocb_filp: field("kiocb", "ki_filp", 8)?,
        kiocb_flags: field("kiocb", "ki_flags", 4)?,
        file_inode: field("file", "f_inode", 8)?,
        iov_count: field("iov_iter", "count", 8)?,
        dio_direction: u32::from(data_source.is_some()),
        iov_data_source: data_source.unwrap_or(0),
        kiocb_pos,
        inode_size,
    })
}
