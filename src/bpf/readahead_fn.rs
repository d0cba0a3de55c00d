//! The readahead fallbacks (ebpf/probes/src/readahead_fn.rs): where the kernel lacks a
//! `readahead:*` tracepoint (before Linux 6.18), an fentry program on the function it sits in,
//! chosen here from the kernel's BTF, which also gives the offsets the programs read.

use anyhow::{bail, Result};
use aya::Ebpf;
use ioscope_common::readahead_fn::RaFnLayout;

use super::kernel_btf::KernelBtf;
use super::kfunc::{self, Hook, Traceable};
use crate::sample::BpfProgramStatus;

pub use super::ra_fallback::RaFallback;

pub const RA_FALLBACKS: [RaFallback; 4] = [
    RaFallback {
        probe: "readahead_sync_ra",
        program: "readahead_sync_ra_fentry",
        kprobes: Some(kfunc::Kprobes { entry: "readahead_sync_ra_kprobe", ret: None }),
        functions: &["page_cache_sync_ra"],
        second_is_count: false,
    },
    RaFallback {
        probe: "readahead_async_ra",
        program: "readahead_async_ra_fentry",
        kprobes: Some(kfunc::Kprobes { entry: "readahead_async_ra_kprobe", ret: None }),
        functions: &["page_cache_async_ra"],
        second_is_count: false,
    },
    RaFallback {
        probe: "readahead_ra_order",
        program: "readahead_ra_order_fentry",
        kprobes: Some(kfunc::Kprobes { entry: "readahead_ra_order_kprobe", ret: None }),
        functions: &["page_cache_ra_order"],
        second_is_count: false,
    },
    RaFallback {
        probe: "readahead_ra_unbounded",
        program: "readahead_ra_unbounded_fentry",
        kprobes: Some(kfunc::Kprobes { entry: "readahead_ra_unbounded_kprobe", ret: None }),
        functions: &["page_cache_ra_unbounded"],
        second_is_count: true,
    },
];

/// A fallback chosen for this kernel.
#[derive(Clone, Copy, Debug)]
pub struct Planned {
    pub fallback: RaFallback,
    pub function: &'static str,
}

/// For each readahead probe whose tracepoint is missing (`missing(probe)` is its error), the
/// function fallback the kernel has, and the layout those programs read. A probe without one
/// keeps its error, with the reason added (returned per probe, to replace the error).
pub fn plan(
    missing: impl Fn(&str) -> Option<String>,
    btf: &KernelBtf,
    traceable: &Traceable,
) -> (RaFnLayout, Vec<Planned>, Vec<(&'static str, String)>) {
    let mut planned = Vec::new();
    let mut refused = Vec::new();
    // 5.10: the `file_ra_state` is an argument, not `ractl->ra` (super::readahead_510).
    let ra_arg = super::readahead_510::ra_is_an_argument(btf);
    let table: &[RaFallback] = if ra_arg { &super::readahead_510::RA_FALLBACKS } else { &RA_FALLBACKS };
    let wanted: Vec<_> = table.iter().filter_map(|fb| Some((*fb, missing(fb.probe)?))).collect();
    if wanted.is_empty() {
        return (RaFnLayout::UNSET, planned, refused);
    }
    let layout = fn_layout(btf, ra_arg);
    for (fb, why) in wanted {
        let chosen = layout.as_ref().map_err(|e| anyhow::anyhow!("{e:#}")).and_then(|_| {
            let f = kfunc::choose(btf, traceable, fb.functions)?;
            let ractl_first = f.params.first().is_some_and(|p| p.pointer);
            let second_ok = !fb.second_is_count || f.params.get(1).is_some_and(|p| !p.pointer);
            if !ractl_first || !second_ok {
                bail!("{}'s parameters are not (ractl, ...) as expected", f.name);
            }
            if ra_arg {
                super::readahead_510::check_params(&fb, &f)?;
            }
            Ok(f)
        });
        match chosen {
            Ok(f) => planned.push(Planned { fallback: fb, function: f.name }),
            Err(e) => refused.push((fb.probe, format!("{why}; no fentry fallback: {e:#}"))),
        }
    }
    let layout = if planned.is_empty() { RaFnLayout::UNSET } else { layout.unwrap_or(RaFnLayout::UNSET) };
    (layout, planned, refused)
}

/// The offsets the fallbacks read, from BTF. `ra_arg` (5.10): there is no `ractl->ra`; the
/// programs used there take it from their arguments (`ractl_ra` 0: read and left unused), and
/// need what super::readahead_510::layout finds.
fn fn_layout(btf: &KernelBtf, ra_arg: bool) -> Result<RaFnLayout> {
    let field = |strukt: &str, member: &str, size: u32| btf.offset_sized(strukt, member, size);
    if ra_arg {
        super::readahead_510::layout(btf)?;
    }
    Ok(RaFnLayout {
        configured: 1,
        ractl_mapping: field("readahead_control", "mapping", 8)?,
        ractl_ra: if ra_arg { 0 } else { field("readahead_control", "ra", 8)? },
        ractl_index: field("readahead_control", "_index", 8)?,
        mapping_host: field("address_space", "host", 8)?,
        inode_sb: field("inode", "i_sb", 8)?,
        inode_ino: field("inode", "i_ino", 8)?,
        sb_dev: field("super_block", "s_dev", 4)?,
        ra_size: field("file_ra_state", "size", 4)?,
        ra_ra_pages: field("file_ra_state", "ra_pages", 4)?,
        ra_mmap_miss: mmap_miss(btf)?,
        ..RaFnLayout::UNSET
    })
}

/// `file_ra_state.mmap_miss`: an `unsigned int` before Linux 6.10, an `unsigned short` since; the
/// programs load its low 16 bits (the kernel keeps it under a few thousand; the object is
/// little-endian only).
fn mmap_miss(btf: &KernelBtf) -> Result<u32> {
    let f = btf.field("file_ra_state", "mmap_miss")?;
    if f.size != 2 && f.size != 4 {
        bail!("struct file_ra_state member `mmap_miss` is {} bytes, expected 2 or 4", f.size);
    }
    Ok(f.offset)
}

/// Where the page-cache fallbacks on `filemap_fault()` / `filemap_map_pages()` run (no
/// `mm_filemap_fault` / `mm_filemap_map_pages`), what they read to mark readahead pages used:
/// `vmf->vma->vm_file->f_mapping`, `vmf->pgoff`. Only with the readahead fallbacks configured.
pub fn fill_vm(layout: &mut RaFnLayout, btf: &KernelBtf) -> Result<()> {
    if layout.configured == 0 {
        return Ok(());
    }
    let field = |strukt: &str, member: &str, size: u32| btf.offset_sized(strukt, member, size);
    layout.vmf_vma = field("vm_fault", "vma", 8)?;
    layout.vmf_pgoff = field("vm_fault", "pgoff", 8)?;
    layout.vma_file = field("vm_area_struct", "vm_file", 8)?;
    layout.file_mapping = field("file", "f_mapping", 8)?;
    layout.vm_configured = 1;
    Ok(())
}

/// Attaches the planned fallback of `probe` (the tracepoint `category:event`), if any: fentry, else
/// (refused, or `no_trampoline`) its kprobe variant.
pub fn attach(
    ebpf: &mut Ebpf,
    planned: &[Planned],
    (btf, no_trampoline): (Option<&aya::Btf>, bool),
    probe: &str,
    tracepoint: &str,
) -> Option<BpfProgramStatus> {
    let plan = planned.iter().find(|p| p.fallback.probe == probe)?;
    let btf = btf?;
    let mut status = BpfProgramStatus {
        program: plan.fallback.program.to_string(),
        tracepoint: plan.function.to_string(),
        attached: true,
        mechanism: Hook::Fentry.name().to_string(),
        fallback_for: Some(tracepoint.to_string()),
        ..Default::default()
    };
    let fb = plan.fallback;
    let attached = kfunc::attach_fallback(
        ebpf,
        (fb.program, Hook::Fentry),
        plan.function,
        btf,
        fb.kprobes,
        no_trampoline,
    );
    kfunc::note_attached(&mut status, attached);
    Some(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On this machine's kernel the functions exist (the tracepoints sit in them): the layout is
    /// found and every fallback planned when its tracepoint is treated as missing.
    #[test]
    fn the_fallbacks_are_planned_from_this_kernels_btf() {
        let Ok(btf) = KernelBtf::load() else { return };
        let traceable = Traceable::from_text(
            "page_cache_sync_ra\npage_cache_async_ra\npage_cache_ra_order\npage_cache_ra_unbounded\n",
        );
        let (layout, planned, refused) = plan(|_| Some("hidden".to_string()), &btf, &traceable);
        assert!(refused.is_empty(), "{refused:?}");
        assert_eq!(planned.len(), 4);
        assert_eq!(layout.configured, 1);
        assert_ne!(layout.ractl_index, layout.ractl_mapping);
        let mut layout = layout;
        fill_vm(&mut layout, &btf).unwrap();
        assert_eq!(layout.vm_configured, 1);
        assert_ne!(layout.vmf_pgoff, layout.vmf_vma);
        // Nothing missing: nothing planned.
        let (layout, planned, _) = plan(|_| None, &btf, &traceable);
        assert!(planned.is_empty() && layout.configured == 0);
        // Not traceable: refused with the reason.
        let (_, planned, refused) = plan(|_| Some("hidden".to_string()), &btf, &Traceable::from_text(""));
        assert!(planned.is_empty());
        assert!(
            refused[0].1.contains("hidden; no fentry fallback") && refused[0].1.contains("not traceable")
        );
    }
}
