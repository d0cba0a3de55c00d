//! The readahead fallbacks before `readahead_control.ra` (Linux 5.10;
//! ebpf/probes/src/readahead_510.rs): the `file_ra_state` is an argument of
//! `page_cache_sync_ra()` / `page_cache_async_ra()` there, and the window is handed to
//! `do_page_cache_ra()` (no `page_cache_ra_order()`). Chosen by super::readahead_fn::plan when the
//! kernel's BTF has no `readahead_control.ra`; the offsets those programs read come from BTF.

use anyhow::{bail, Result};
use ioscope_common::readahead_510::Ra510Layout;

use super::kernel_btf::KernelBtf;
use super::kfunc::{Function, Kprobes};
use super::ra_fallback::RaFallback;

pub const RA_FALLBACKS: [RaFallback; 4] = [
    RaFallback {
        probe: "readahead_sync_ra",
        program: "readahead_sync_ra_510",
        kprobes: Some(Kprobes { entry: "readahead_sync_ra_510_kprobe", ret: None }),
        functions: &["page_cache_sync_ra"],
        second_is_count: false,
    },
    RaFallback {
        probe: "readahead_async_ra",
        program: "readahead_async_ra_510",
        kprobes: Some(Kprobes { entry: "readahead_async_ra_510_kprobe", ret: None }),
        functions: &["page_cache_async_ra"],
        second_is_count: false,
    },
    RaFallback {
        probe: "readahead_ra_order",
        program: "readahead_ra_order_510",
        kprobes: Some(Kprobes { entry: "readahead_ra_order_510_kprobe", ret: None }),
        functions: &["do_page_cache_ra"],
        second_is_count: true,
    },
    // The same function and arguments as on 6.1+: the same program (it reads no `ra`).
    RaFallback {
        probe: "readahead_ra_unbounded",
        program: "readahead_ra_unbounded_fentry",
        kprobes: Some(Kprobes { entry: "readahead_ra_unbounded_kprobe", ret: None }),
        functions: &["page_cache_ra_unbounded"],
        second_is_count: true,
    },
];

/// The kernel passes the `file_ra_state` as an argument (its `readahead_control` has no `ra`).
pub fn ra_is_an_argument(btf: &KernelBtf) -> bool {
    btf.field("readahead_control", "ra").is_err() && btf.field("readahead_control", "file").is_ok()
}

/// The decisions' programs read `ra` from the second argument: it must be that pointer.
pub fn check_params(fb: &RaFallback, f: &Function) -> Result<()> {
    if fb.second_is_count {
        return Ok(());
    }
    match f.params.get(1) {
        Some(p) if p.pointer && p.name == "ra" => Ok(()),
        _ => bail!("{}'s second parameter is not `ra` (struct file_ra_state *)", f.name),
    }
}

/// What the 5.10 programs read beyond the readahead_fn layout; UNSET where `readahead_control`
/// has `ra` (those kernels use readahead_fn's programs only).
pub fn layout(btf: &KernelBtf) -> Result<Ra510Layout> {
    if !ra_is_an_argument(btf) {
        return Ok(Ra510Layout::UNSET);
    }
    let field = |strukt: &str, member: &str, size: u32| btf.offset_sized(strukt, member, size);
    let f_ra = btf.field("file", "f_ra")?.offset;
    // `mmap_miss`: an `unsigned int` before 6.10; the low 16 bits are read (little-endian).
    let mmap_miss = btf.field("file_ra_state", "mmap_miss")?;
    if mmap_miss.size != 2 && mmap_miss.size != 4 {
        bail!("struct file_ra_state member `mmap_miss` is {} bytes, expected 2 or 4", mmap_miss.size);
    }
    Ok(Ra510Layout {
        configured: 1,
        ractl_file: field("readahead_control", "file", 8)?,
        file_ra_start: f_ra + field("file_ra_state", "start", 8)?,
        file_ra_size: f_ra + field("file_ra_state", "size", 4)?,
        file_ra_pages: f_ra + field("file_ra_state", "ra_pages", 4)?,
        ra_ra_pages: field("file_ra_state", "ra_pages", 4)?,
        ra_mmap_miss: mmap_miss.offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::kernel_btf::Param;

    #[test]
    fn the_decisions_need_ra_as_second_parameter() {
        let param = |name: &str, pointer| Param { name: name.to_string(), pointer };
        let sync = RA_FALLBACKS[0];
        let f = |params| Function { name: "page_cache_sync_ra", params };
        // 5.10's page_cache_sync_ra(ractl, ra, req_count).
        check_params(&sync, &f(vec![param("ractl", true), param("ra", true), param("req_count", false)]))
            .unwrap();
        // 6.1's page_cache_sync_ra(ractl, req_count).
        let e = check_params(&sync, &f(vec![param("ractl", true), param("req_count", false)])).unwrap_err();
        assert!(format!("{e}").contains("not `ra`"), "{e}");
        // A count as second parameter is checked by readahead_fn::plan.
        check_params(&RA_FALLBACKS[2], &f(vec![param("ractl", true), param("nr_to_read", false)])).unwrap();
    }

    /// This machine's kernel (6.18) has `readahead_control.ra`: the 5.10 programs stay unset.
    #[test]
    fn kernels_with_ractl_ra_do_not_use_these() {
        let Ok(btf) = KernelBtf::load() else { return };
        assert!(!ra_is_an_argument(&btf));
        assert_eq!(layout(&btf).unwrap(), Ra510Layout::UNSET);
    }
}
