//! `cgroup:cgroup_attach_task` (ioscope_common::cgroup_move): the record's layout from its format
//! file, and attaching the program that gives a moved process its new cgroup.

use std::path::Path;

use anyhow::{bail, Result};
use aya::programs::TracePoint;
use aya::Ebpf;
use ioscope_common::cgroup_move::MoveLayout;

use super::tracefs;
use crate::sample::BpfProgramStatus;

pub const PROGRAM: &str = "cgroup_attach_task";
pub const CATEGORY: &str = "cgroup";
pub const EVENT: &str = "cgroup_attach_task";

/// The layout, or why the program cannot run (missing or hidden tracepoint, unknown fields: then
/// a moved process keeps its cgroup in the page-cache figures until its next exec).
pub fn plan(tracefs_dir: &Path, hidden: &[String]) -> Result<MoveLayout, String> {
    (|| -> Result<MoveLayout> {
        if hidden.iter().any(|h| *h == format!("{CATEGORY}:{EVENT}")) {
            bail!("tracepoint {CATEGORY}:{EVENT} hidden on request");
        }
        let f = tracefs::read_event_format(tracefs_dir, CATEGORY, EVENT)?;
        Ok(MoveLayout {
            ok: 1,
            dst_root: f.field_sized("dst_root", 4)?.offset,
            dst_id: f.field_sized("dst_id", 8)?.offset,
            pid: f.field_sized("pid", 4)?.offset,
            comm: f.field_sized("comm", 4)?.offset,
            _pad: 0,
        })
    })()
    .map_err(|e| format!("{e:#}"))
}

/// The load [`attach`] asks for (see super::preload).
pub fn loads(plan: &Result<MoveLayout, String>) -> Vec<super::preload::Planned<'static>> {
    plan.iter().map(|_| (PROGRAM.to_string(), super::preload::How::TracePoint)).collect()
}

/// Loads and attaches the program when the plan found its layout.
pub fn attach(ebpf: &mut Ebpf, plan: &Result<MoveLayout, String>) -> BpfProgramStatus {
    let r = plan.clone().map(|_| ()).and_then(|()| {
        (|| -> Result<()> {
            super::preload::load(ebpf, PROGRAM, super::preload::How::TracePoint)?;
            super::attach::program_of::<TracePoint>(ebpf, PROGRAM)?.attach(CATEGORY, EVENT)?;
            Ok(())
        })()
        .map_err(|e| format!("{e:#}"))
    });
    super::attach::program_status(PROGRAM, CATEGORY, EVENT, r)
}

/// The family of one program: `cgroup_attach_task` gives a moved process its new cgroup in the
/// other families' maps. It has no part of the Sample of its own.
#[derive(Default)]
pub struct CgroupMoveFamily {
    plan: Option<Result<MoveLayout, String>>,
}

impl super::family::Family for CgroupMoveFamily {
    fn name(&self) -> &'static str {
        "cgroup moves"
    }

    fn plan(&mut self, setup: &mut super::family::Setup) {
        self.plan = Some(plan(setup.tracefs, setup.hidden()));
    }

    fn globals<'s>(&'s self, loader: &mut aya::EbpfLoader<'s>) {
        let layout = self.plan.as_ref().and_then(|p| p.as_ref().ok()).unwrap_or(&MoveLayout::UNSET);
        loader.override_global(ioscope_common::cgroup_move::MOVE_LAYOUT_GLOBAL, layout, true);
    }

    fn loads<'a>(
        &'a self,
        _: &super::family::Setup<'a>,
        _: &[super::preload::Planned<'a>],
    ) -> Vec<super::preload::Planned<'a>> {
        self.plan.as_ref().map(loads).unwrap_or_default()
    }

    fn attach(
        &mut self,
        ebpf: &mut Ebpf,
        _: &mut super::family::Setup,
        statuses: &mut Vec<BpfProgramStatus>,
    ) {
        if let Some(plan) = &self.plan {
            statuses.push(attach(ebpf, plan));
        }
    }

    fn read(&mut self, _: &mut super::family::Shared, _: &mut crate::sample::BpfSample) -> Vec<String> {
        Vec::new()
    }
}
