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
            super::program_of::<TracePoint>(ebpf, PROGRAM)?.attach(CATEGORY, EVENT)?;
            Ok(())
        })()
        .map_err(|e| format!("{e:#}"))
    });
    super::program_status(PROGRAM, CATEGORY, EVENT, r)
}
