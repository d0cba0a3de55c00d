//! `cgroup:cgroup_attach_task` (ioscope_common::cgroup_move): a process moved to another cgroup v2
//! without an exec takes its new cgroup in the page-cache programs' entry at once.

use aya_ebpf::{macros::tracepoint, programs::TracePointContext};
use ioscope_common::cgroup_move::{data_loc_offset, MoveLayout, DFL_HIERARCHY_ID};

#[unsafe(no_mangle)]
static CGROUP_MOVE_LAYOUT: MoveLayout = MoveLayout::UNSET;

#[tracepoint]
pub fn cgroup_attach_task(ctx: TracePointContext) -> u32 {
    try_move(&ctx).unwrap_or(0)
}

fn try_move(ctx: &TracePointContext) -> Result<u32, i64> {
    // SAFETY: a read-only global, frozen before load (see page_cache::layout()).
    let l = unsafe { core::ptr::read_volatile(&raw const CGROUP_MOVE_LAYOUT) };
    if l.ok == 0 {
        return Ok(0);
    }
    // SAFETY (all reads): offsets from the format file; a wrong one only reads a wrong value.
    let root = unsafe { ctx.read_at::<i32>(l.dst_root as usize) }.map_err(i64::from)?;
    if root != DFL_HIERARCHY_ID {
        return Ok(0);
    }
    let id = unsafe { ctx.read_at::<u64>(l.dst_id as usize) }.map_err(i64::from)?;
    let pid = unsafe { ctx.read_at::<i32>(l.pid as usize) }.map_err(i64::from)?;
    let loc = unsafe { ctx.read_at::<u32>(l.comm as usize) }.map_err(i64::from)?;
    // The string is NUL-terminated within its 16 bytes (TASK_COMM_LEN); what the 16 bytes read
    // past the NUL is cleared.
    let mut comm = unsafe { ctx.read_at::<[u8; 16]>(data_loc_offset(loc) as usize) }.unwrap_or([0; 16]);
    let mut ended = false;
    let mut i = 0;
    while i < 16 {
        if ended {
            comm[i] = 0;
        } else if comm[i] == 0 {
            ended = true;
        }
        i += 1;
    }
    crate::page_cache::moved(pid as u32, id, comm);
    Ok(0)
}
