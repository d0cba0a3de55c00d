//! Attaching one program: a tracepoint, a BTF tracepoint, and the status each family lists for
//! its programs. Shared by the families; it imports none of them.

use anyhow::Result;
use aya::programs::TracePoint;
use aya::Ebpf;

use super::preload;
use crate::sample::BpfProgramStatus;

/// Loads `program` (a BTF tracepoint twin of a program on `category:event`) for `event` and
/// attaches it; its status on success.
pub(super) fn attach_btf_tracepoint(
    ebpf: &mut Ebpf,
    program: &str,
    category: &str,
    event: &str,
    btf: &aya::Btf,
) -> Result<BpfProgramStatus> {
    preload::load(ebpf, program, preload::How::BtfTracePoint(event, btf))?;
    program_of::<aya::programs::BtfTracePoint>(ebpf, program)?.attach()?;
    Ok(BpfProgramStatus {
        mechanism: "BTF tracepoint".into(),
        ..program_status(program, category, event, Ok(()))
    })
}

/// Loads and attaches one tracepoint program of the object.
pub(super) fn attach_tracepoint(
    ebpf: &mut Ebpf,
    program: &str,
    category: &str,
    event: &str,
) -> BpfProgramStatus {
    let result = (|| -> Result<()> {
        preload::load(ebpf, program, preload::How::TracePoint)?;
        program_of::<TracePoint>(ebpf, program)?.attach(category, event)?;
        Ok(())
    })();
    program_status(program, category, event, result.map_err(|e| format!("{e:#}")))
}

/// Program `program` of `ebpf` as a `T` (a kind of program).
pub(super) fn program_of<'a, T>(ebpf: &'a mut Ebpf, program: &str) -> Result<&'a mut T>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    let prog = ebpf
        .program_mut(program)
        .ok_or_else(|| anyhow::anyhow!("program `{program}` is not in the eBPF object"))?;
    Ok(prog.try_into()?)
}

pub(super) fn program_status(
    program: &str,
    category: &str,
    event: &str,
    result: Result<(), String>,
) -> BpfProgramStatus {
    BpfProgramStatus {
        program: program.to_string(),
        tracepoint: format!("{category}:{event}"),
        attached: result.is_ok(),
        error: result.err(),
        ..Default::default()
    }
}

/// How `program` is attached, from its type in the loaded object.
pub(super) fn mechanism(ebpf: &Ebpf, program: &str) -> &'static str {
    use aya::programs::Program;
    match ebpf.program(program) {
        Some(Program::TracePoint(_)) => "tracepoint",
        Some(Program::BtfTracePoint(_)) => "btf_tracepoint",
        Some(Program::RawTracePoint(_)) => "raw_tracepoint",
        Some(Program::FEntry(_)) => "fentry",
        Some(Program::FExit(_)) => "fexit",
        Some(Program::KProbe(p)) if matches!(p.kind(), aya::programs::ProbeKind::Return) => "kretprobe",
        Some(Program::KProbe(_)) => "kprobe",
        Some(_) => "other",
        None => "unknown",
    }
}
