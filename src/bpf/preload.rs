//! Loading (verifying) the programs on every CPU at once, ahead of attaching them in order.
//!
//! The kernel's verifier is most of start-up's time, and the loads are independent once the maps
//! exist. So `start_with` first lists the loads each module will ask for on this kernel (each
//! module's `loads`, from the same plan its `attach` reads), [`preload`] runs them on a few threads,
//! and the attach code, unchanged in its order and fallbacks, then asks for each program through
//! [`load`]: a program preloaded the same way is taken as it is (or its error returned, the very
//! error a load of its own would have given), anything else is loaded there and then. So the plan
//! only has to be right to be fast: a fallback taken, a program planned one way and asked another,
//! is loaded as before (a *late* load); a program planned and never asked for is unloaded at the
//! end ([`finish`]). The preloaded results wait in a thread-local table, filled and consumed on
//! the thread that runs `start_with`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Mutex;

use anyhow::{anyhow, Result};
use aya::programs::{BtfTracePoint, FEntry, FExit, KProbe, Program, ProgramError, RawTracePoint, TracePoint};
use aya::{Btf, Ebpf};

/// How a program is loaded: its kind and, for the BTF-typed kinds, the event or function it is
/// verified against.
#[derive(Clone, Copy)]
pub enum How<'a> {
    TracePoint,
    RawTracePoint,
    KProbe,
    BtfTracePoint(&'a str, &'a Btf),
    FEntry(&'a str, &'a Btf),
    FExit(&'a str, &'a Btf),
}

impl How<'_> {
    /// What makes two loads of one program the same (the BTF is the kernel's either way).
    fn key(&self) -> Key {
        match self {
            How::TracePoint => (0, String::new()),
            How::RawTracePoint => (1, String::new()),
            How::KProbe => (2, String::new()),
            How::BtfTracePoint(t, _) => (3, t.to_string()),
            How::FEntry(f, _) => (4, f.to_string()),
            How::FExit(f, _) => (5, f.to_string()),
        }
    }

    /// Loads `prog` as this says.
    fn load(&self, prog: &mut Program) -> Result<(), ProgramError> {
        match *self {
            How::TracePoint => <&mut TracePoint>::try_from(prog)?.load(),
            How::RawTracePoint => <&mut RawTracePoint>::try_from(prog)?.load(),
            How::KProbe => <&mut KProbe>::try_from(prog)?.load(),
            How::BtfTracePoint(event, btf) => <&mut BtfTracePoint>::try_from(prog)?.load(event, btf),
            How::FEntry(function, btf) => <&mut FEntry>::try_from(prog)?.load(function, btf),
            How::FExit(function, btf) => <&mut FExit>::try_from(prog)?.load(function, btf),
        }
    }
}

/// One load a module plans: which program, how.
pub type Planned<'a> = (String, How<'a>);

/// How the preloading went: the loads planned, those asked for otherwise or not planned (loaded
/// one after another, as before), those planned and never asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub planned: usize,
    pub late: usize,
    pub unused: usize,
}

/// What makes two loads of one program the same (see [`How::key`]).
type Key = (u8, String);

struct Table {
    done: HashMap<String, (Key, Result<(), ProgramError>)>,
    report: Report,
}

thread_local! {
    static TABLE: RefCell<Option<Table>> = const { RefCell::new(None) };
}

/// Threads that verify at once: one per CPU, two at least (even on one CPU the attach code then
/// waits for no single long load), at most four.
fn workers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 4)
}

/// Loads the `planned` programs of `ebpf` on several threads and keeps the results for [`load`]
/// on this thread. A name missing from the object, or planned twice, is left to [`load`].
pub fn preload(ebpf: &mut Ebpf, planned: &[Planned]) {
    let mut by_name: HashMap<&str, How> = HashMap::new();
    for (program, how) in planned {
        by_name.entry(program.as_str()).or_insert(*how);
    }
    // In the plan's order (the attach code's), taken by whichever thread is free: the first asked
    // for are the first done.
    let order: HashMap<&str, usize> =
        planned.iter().enumerate().map(|(i, (p, _))| (p.as_str(), i)).rev().collect();
    let mut queue: Vec<(usize, &str, &mut Program, How)> = ebpf
        .programs_mut()
        .filter_map(|(name, prog)| Some((*order.get(name)?, name, prog, *by_name.get(name)?)))
        .collect();
    queue.sort_by_key(|(i, ..)| std::cmp::Reverse(*i));
    let count = queue.len();
    let queue = Mutex::new(queue);
    let results = Mutex::new(Vec::with_capacity(count));
    std::thread::scope(|scope| {
        for _ in 0..workers().min(count) {
            scope.spawn(|| loop {
                let Some((_, name, prog, how)) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop() else {
                    return;
                };
                let result = how.load(prog);
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((name.to_string(), (how.key(), result)));
            });
        }
    });
    let done: HashMap<_, _> = results.into_inner().unwrap_or_else(|e| e.into_inner()).into_iter().collect();
    let report = Report { planned: done.len(), ..Report::default() };
    TABLE.with(|t| *t.borrow_mut() = Some(Table { done, report }));
}

/// Loads `program` as `how` says, or takes its preloaded result when it was preloaded so.
pub fn load(ebpf: &mut Ebpf, program: &str, how: How) -> Result<()> {
    let prog =
        ebpf.program_mut(program).ok_or_else(|| anyhow!("program `{program}` is not in the eBPF object"))?;
    let preloaded = TABLE.with(|t| {
        let mut t = t.borrow_mut();
        let t = t.as_mut()?;
        let found = t.done.remove(program);
        if !matches!(&found, Some((key, _)) if *key == how.key()) {
            t.report.late += 1;
        }
        found
    });
    match preloaded {
        Some((key, result)) if key == how.key() => Ok(result?),
        Some((_, Ok(()))) => {
            // Loaded for another event or function than asked: again, as asked.
            unload(prog);
            Ok(how.load(prog)?)
        }
        _ => Ok(how.load(prog)?),
    }
}

/// Ends the preloading on this thread: unloads the programs preloaded and never asked for, and
/// says how it went.
pub fn finish(ebpf: &mut Ebpf) -> Report {
    let Some(mut table) = TABLE.with(|t| t.borrow_mut().take()) else { return Report::default() };
    for (name, (_, result)) in table.done.drain() {
        if result.is_ok() {
            table.report.unused += 1;
            if let Some(prog) = ebpf.program_mut(&name) {
                unload(prog);
            }
        }
    }
    table.report
}

/// Detaches and unloads `program` (what dropping it does), ignoring errors (nothing to report on
/// the way out). Kinds not listed are left to the drop.
pub(super) fn unload(program: &mut aya::programs::Program) {
    use aya::programs::Program;
    let _ = match program {
        Program::TracePoint(p) => p.unload(),
        Program::BtfTracePoint(p) => p.unload(),
        Program::RawTracePoint(p) => p.unload(),
        Program::KProbe(p) => p.unload(),
        Program::FEntry(p) => p.unload(),
        Program::FExit(p) => p.unload(),
        _ => Ok(()),
    };
}
