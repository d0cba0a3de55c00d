//! The I/O-wait probes' userspace half (ioscope_common::iowait): the `task_struct` fields the
//! programs read (from the kernel's BTF), attaching the two BTF tracepoints, and reading the
//! threads' slots through a memory mapping (plain loads, no system call).

use anyhow::{anyhow, Result};
use aya::Ebpf;
use ioscope_common::iowait::{
    IowaitLayout, IowaitThread, IOWAIT_CAUSES, IOWAIT_SLOTS_MAX, IOWAIT_SWITCH_PROGRAM, IOWAIT_THREADS_MAP,
    IOWAIT_WAKEUP_PROGRAM,
};

use super::kernel_btf::KernelBtf;
use crate::sample::iowait::{IowaitSample, IowaitThreadSample};
use crate::sample::BpfProgramStatus;

/// The programs and their events.
const PROGRAMS: [(&str, &str); 2] =
    [(IOWAIT_SWITCH_PROGRAM, "sched_switch"), (IOWAIT_WAKEUP_PROGRAM, "sched_wakeup")];

/// The layout the programs need, or why they cannot run on this kernel.
pub fn plan(btf: Option<&KernelBtf>, btf_tracepoints: bool) -> Result<IowaitLayout, String> {
    let k = btf.ok_or("no kernel BTF")?;
    if !btf_tracepoints {
        return Err("BTF tracepoints off".into());
    }
    (|| -> Result<IowaitLayout> {
        let (in_iowait, mask) = k.bit_field("task_struct", "in_iowait")?;
        // `__state` (5.14+), else the low half of `long state` (little-endian).
        let state = k
            .offset_sized("task_struct", "__state", 4)
            .or_else(|_| k.offset_sized("task_struct", "state", 8))?;
        for (_, event) in PROGRAMS {
            k.tracepoint_args(event)?;
        }
        Ok(IowaitLayout {
            in_iowait,
            in_iowait_mask: u32::from(mask),
            state,
            pid: k.offset_sized("task_struct", "pid", 4)?,
            tgid: k.offset_sized("task_struct", "tgid", 4)?,
            configured: 1,
        })
    })()
    .map_err(|e| format!("{e:#}"))
}

/// The loads [`attach`] asks for (see super::preload).
pub fn loads<'a>(
    plan: &Result<IowaitLayout, String>,
    btf: Option<&'a KernelBtf>,
) -> Vec<super::preload::Planned<'a>> {
    match (plan, btf) {
        (Ok(_), Some(k)) => PROGRAMS
            .iter()
            .map(|(p, event)| (p.to_string(), super::preload::How::BtfTracePoint(event, k.aya())))
            .collect(),
        _ => Vec::new(),
    }
}

/// Attaches both programs (or neither: a wait without its end, or an end without its start,
/// counts nothing) and maps the threads' slots.
pub fn attach(
    ebpf: &mut Ebpf,
    plan: &Result<IowaitLayout, String>,
    btf: Option<&KernelBtf>,
) -> (Vec<BpfProgramStatus>, Option<IowaitMaps>) {
    let mut statuses = Vec::new();
    for (program, event) in PROGRAMS {
        let r = match (plan, btf) {
            (Err(e), _) => Err(e.clone()),
            (Ok(_), None) => Err("no kernel BTF".into()),
            (Ok(_), Some(k)) => super::attach::attach_btf_tracepoint(ebpf, program, "sched", event, k.aya())
                .map(|_| ())
                .map_err(|e| format!("{e:#}")),
        };
        statuses.push(super::attach::program_status(program, "sched", event, r));
    }
    if !statuses.iter().all(|s| s.attached) {
        return (statuses, None);
    }
    let maps = ebpf
        .take_map(IOWAIT_THREADS_MAP)
        .ok_or_else(|| anyhow!("map {IOWAIT_THREADS_MAP} is not in the eBPF object"))
        .and_then(MappedThreads::new);
    match maps {
        Ok(slots) => (statuses, Some(IowaitMaps { slots, last: Default::default() })),
        Err(e) => {
            for s in statuses.iter_mut() {
                s.error.get_or_insert_with(|| format!("{e:#}"));
            }
            (statuses, None)
        }
    }
}

/// The family of the two scheduler programs: how long each thread waits for I/O, by cause (the
/// `iowait` part of the Sample).
#[derive(Default)]
pub struct IowaitFamily {
    plan: Option<Result<IowaitLayout, String>>,
    maps: Option<IowaitMaps>,
}

impl super::family::Family for IowaitFamily {
    fn name(&self) -> &'static str {
        "I/O wait"
    }

    fn plan(&mut self, setup: &mut super::family::Setup) {
        self.plan = Some(plan(setup.btf, setup.options.btf_tracepoints));
    }

    fn globals<'s>(&'s self, loader: &mut aya::EbpfLoader<'s>) {
        let layout = self.plan.as_ref().and_then(|p| p.as_ref().ok()).unwrap_or(&IowaitLayout::UNSET);
        loader.override_global(ioscope_common::iowait::IOWAIT_LAYOUT_GLOBAL, layout, true);
    }

    fn loads<'a>(
        &'a self,
        setup: &super::family::Setup<'a>,
        _: &[super::preload::Planned<'a>],
    ) -> Vec<super::preload::Planned<'a>> {
        self.plan.as_ref().map(|p| loads(p, setup.btf)).unwrap_or_default()
    }

    fn attach(
        &mut self,
        ebpf: &mut Ebpf,
        setup: &mut super::family::Setup,
        statuses: &mut Vec<BpfProgramStatus>,
    ) {
        let Some(plan) = &self.plan else { return };
        let (programs, maps) = attach(ebpf, plan, setup.btf);
        statuses.extend(programs);
        self.maps = maps;
    }

    fn read(&mut self, _: &mut super::family::Shared, sample: &mut crate::sample::BpfSample) -> Vec<String> {
        if let Some(maps) = &mut self.maps {
            sample.iowait = Some(maps.read());
        }
        Vec::new()
    }
}

pub struct IowaitMaps {
    slots: MappedThreads,
    /// Per slot: the thread and its counts as last reported (see [`IowaitMaps::read`]).
    last: std::collections::HashMap<u32, (u32, [u64; IOWAIT_CAUSES])>,
}

impl IowaitMaps {
    /// Every thread in a slot, its wait in progress counted up to now. A count never goes down
    /// from one read to the next while the thread keeps its slot: a wait ending as it is read can
    /// be seen neither in progress nor ended for an instant.
    pub fn read(&mut self) -> IowaitSample {
        let now = crate::util::monotonic_ns();
        let mut threads = Vec::new();
        for (i, t) in self.slots.read() {
            let mut ns = [0u64; IOWAIT_CAUSES];
            ns.copy_from_slice(&t.ns[..IOWAIT_CAUSES]);
            let cause = t.cause as usize;
            if t.start_ns != 0 && cause < IOWAIT_CAUSES {
                ns[cause] = ns[cause].saturating_add(now.saturating_sub(t.start_ns));
            }
            if let Some((tid, before)) = self.last.get(&i) {
                if *tid == t.tid {
                    for (n, b) in ns.iter_mut().zip(before) {
                        *n = (*n).max(*b);
                    }
                }
            }
            self.last.insert(i, (t.tid, ns));
            threads.push(IowaitThreadSample {
                tid: t.tid,
                pid: t.tgid,
                comm: crate::util::c_string(&t.comm),
                cgroup_id: t.cgroup_id,
                ns_by_cause: ns.to_vec(),
                waits: t.waits,
            });
        }
        IowaitSample { threads }
    }
}

/// IOWAIT_THREADS mapped into this process.
struct MappedThreads(super::mapping::Mapping<IowaitThread>);

impl MappedThreads {
    fn new(map: aya::maps::Map) -> Result<MappedThreads> {
        Ok(MappedThreads(super::mapping::Mapping::new(map, IOWAIT_THREADS_MAP, IOWAIT_SLOTS_MAX, false)?))
    }

    /// The slots in use, each copied whole (the same thread before and after the copy; a slot
    /// changing hands as it is read is skipped).
    fn read(&self) -> Vec<(u32, IowaitThread)> {
        use std::ptr::{addr_of, read_volatile};
        let mut out = Vec::new();
        for i in 0..self.0.len() {
            let slot = self.0.slot(i);
            // SAFETY: as above; volatile: the programs write the slot meanwhile.
            let tid = unsafe { read_volatile(addr_of!((*slot).tid)) };
            if tid == 0 {
                continue;
            }
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            // SAFETY: as above.
            let t = unsafe { read_volatile(slot) };
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            // SAFETY: as above.
            let again = unsafe { read_volatile(addr_of!((*slot).tid)) };
            if again == tid && t.tid == tid {
                out.push((i as u32, t));
            }
        }
        out
    }
}
