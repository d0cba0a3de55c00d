//! Kernel functions as attach points: the fallbacks for tracepoints a kernel lacks (see
//! ebpf/README.md). A function can carry a program when the kernel's BTF has it (a function of its
//! own, not only inlined: the BTF also gives its parameters, which fentry/fexit programs read
//! directly) and ftrace can patch it (`available_filter_functions`: not `notrace`, not inlined
//! everywhere). Names change across versions, so each fallback lists the names it knows, best
//! first, and the first one that qualifies is used and reported.

use std::collections::HashSet;
use std::path::Path;

use anyhow::{anyhow, Result};

use super::kernel_btf::{KernelBtf, Param};

/// The kernel functions ftrace can trace, as listed by tracefs (None: the list is unreadable, and
/// BTF alone decides; the attach itself then says whether the function can be traced).
pub struct Traceable(Option<HashSet<String>>);

impl Traceable {
    pub fn read(tracefs: &Path) -> Traceable {
        let text = std::fs::read_to_string(tracefs.join("available_filter_functions"))
            .or_else(|_| std::fs::read_to_string("/sys/kernel/debug/tracing/available_filter_functions"));
        Traceable(text.ok().map(|t| Traceable::parse(&t)))
    }

    /// One function a line, a module's followed by ` [module]`.
    fn parse(text: &str) -> HashSet<String> {
        text.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect()
    }

    /// Whether `name` can be traced; true when the list could not be read.
    pub fn contains(&self, name: &str) -> bool {
        self.0.as_ref().is_none_or(|set| set.contains(name))
    }

    #[cfg(test)]
    pub fn from_text(text: &str) -> Traceable {
        Traceable(Some(Traceable::parse(text)))
    }
}

/// The function a fallback attaches to, and its parameters from BTF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    pub name: &'static str,
    pub params: Vec<Param>,
}

/// The first of `names` that the kernel has and can trace; Err says, for each, why not.
pub fn choose(btf: &KernelBtf, traceable: &Traceable, names: &[&'static str]) -> Result<Function> {
    let mut why = Vec::new();
    for &name in names {
        match btf.function_params(name) {
            Err(e) => why.push(format!("{name}: {e:#}")),
            Ok(_) if !traceable.contains(name) => why.push(format!(
                "{name}: not traceable (inlined or notrace: not in available_filter_functions)"
            )),
            Ok(params) => return Ok(Function { name, params }),
        }
    }
    Err(anyhow!("{}", why.join("; ")))
}

/// How a program is attached to a kernel function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    Fentry,
    Fexit,
}

impl Hook {
    pub fn name(self) -> &'static str {
        match self {
            Hook::Fentry => "fentry",
            Hook::Fexit => "fexit",
        }
    }

    /// How a program of this kind is loaded for `function`.
    pub fn how<'a>(self, function: &'a str, btf: &'a aya::Btf) -> super::preload::How<'a> {
        match self {
            Hook::Fentry => super::preload::How::FEntry(function, btf),
            Hook::Fexit => super::preload::How::FExit(function, btf),
        }
    }
}

/// Loads `program` for `function` and attaches it.
pub fn attach(ebpf: &mut aya::Ebpf, program: &str, hook: Hook, function: &str, btf: &aya::Btf) -> Result<()> {
    super::preload::load(ebpf, program, hook.how(function, btf))?;
    match hook {
        Hook::Fentry => {
            super::attach::program_of::<aya::programs::FEntry>(ebpf, program)?.attach()?;
        }
        Hook::Fexit => {
            super::attach::program_of::<aya::programs::FExit>(ebpf, program)?.attach()?;
        }
    }
    Ok(())
}

/// Loads kprobe `program` and attaches it to `function`: its entry, or its return when the
/// program is a kretprobe.
pub fn attach_kprobe(ebpf: &mut aya::Ebpf, program: &str, function: &str) -> Result<()> {
    super::preload::load(ebpf, program, super::preload::How::KProbe)?;
    kprobe(ebpf, program)?.attach(function, 0)?;
    Ok(())
}

fn kprobe<'a>(ebpf: &'a mut aya::Ebpf, program: &str) -> Result<&'a mut aya::programs::KProbe> {
    let prog =
        ebpf.program_mut(program).ok_or_else(|| anyhow!("program `{program}` is not in the eBPF object"))?;
    Ok(prog.try_into()?)
}

/// The kprobe variant of a fentry/fexit fallback (ebpf/probes/src/kprobe_fallbacks.rs): `entry`
/// on the function's entry and, for a fexit, `ret`, a kretprobe on its return that reads the
/// arguments `entry` kept (then `entry` only keeps them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kprobes {
    pub entry: &'static str,
    pub ret: Option<&'static str>,
}

/// The text of a fentry/fexit refused on request ([`super::BpfOptions::no_trampoline`]).
pub const REFUSED_ON_REQUEST: &str = "refused on request (IOSCOPE_NO_TRAMPOLINE, a test knob)";

/// A program attached on a kernel function: its name and mechanism ("fentry", "kretprobe"...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attached {
    pub program: &'static str,
    pub mechanism: &'static str,
}

/// The loads [`attach_fallback`] asks for first: `program` as `hook`, or with `no_trampoline` its
/// kprobe variant (see super::preload).
pub fn fallback_loads<'a>(
    (program, hook): (&'static str, Hook),
    function: &'a str,
    btf: &'a aya::Btf,
    kprobes: Option<Kprobes>,
    no_trampoline: bool,
) -> Vec<super::preload::Planned<'a>> {
    use super::preload::How;
    match (no_trampoline, kprobes) {
        (false, _) => vec![(program.to_string(), hook.how(function, btf))],
        (true, None) => Vec::new(),
        (true, Some(k)) => k.ret.into_iter().chain([k.entry]).map(|p| (p.to_string(), How::KProbe)).collect(),
    }
}

/// Records in `status` what [`attach_fallback`] attached (the program and mechanism that run) or
/// why nothing did.
pub fn note_attached(
    status: &mut crate::sample::BpfProgramStatus,
    attached: std::result::Result<Vec<Attached>, String>,
) {
    match attached {
        Ok(attached) => {
            if let Some(a) = attached.first() {
                status.program = a.program.to_string();
                status.mechanism = a.mechanism.to_string();
            }
        }
        Err(e) => {
            status.attached = false;
            status.error = Some(e);
        }
    }
}

/// Attaches fallback `program` as `hook` on `function`, else, when that is refused (or
/// `no_trampoline` refuses it on purpose), its `kprobes` variant. Ok: the programs attached, the
/// one doing the work first (a kretprobe's entry kprobe second); Err: why neither attached.
pub fn attach_fallback(
    ebpf: &mut aya::Ebpf,
    (program, hook): (&'static str, Hook),
    function: &str,
    btf: &aya::Btf,
    kprobes: Option<Kprobes>,
    no_trampoline: bool,
) -> std::result::Result<Vec<Attached>, String> {
    let refused = if no_trampoline {
        REFUSED_ON_REQUEST.to_string()
    } else {
        match attach(ebpf, program, hook, function, btf) {
            Ok(()) => return Ok(vec![Attached { program, mechanism: hook.name() }]),
            Err(e) => format!("{e:#}"),
        }
    };
    let refused = format!("{} refused: {refused}", hook.name());
    let Some(k) = kprobes else { return Err(refused) };
    // The return's program loaded (verified) before the entry is attached, so that a refused
    // kretprobe leaves no entry keeping arguments for nothing.
    if let Some(ret) = k.ret {
        super::preload::load(ebpf, ret, super::preload::How::KProbe)
            .map_err(|e| format!("{refused}; kretprobe: {e:#}"))?;
    }
    // The entry first: a return without its entry's arguments is skipped, never misread.
    attach_kprobe(ebpf, k.entry, function).map_err(|e| format!("{refused}; kprobe: {e:#}"))?;
    let entry = Attached { program: k.entry, mechanism: "kprobe" };
    let Some(ret) = k.ret else { return Ok(vec![entry]) };
    kprobe(ebpf, ret)
        .and_then(|p| Ok(p.attach(function, 0)?))
        .map_err(|e| format!("{refused}; kretprobe: {e:#}"))?;
    Ok(vec![Attached { program: ret, mechanism: "kretprobe" }, entry])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traceable_list_names_functions_with_or_without_module() {
        let t = Traceable::from_text("vfs_read\nfilemap_fault\nvirtblk_probe [virtio_blk]\n");
        assert!(t.contains("vfs_read") && t.contains("virtblk_probe"));
        assert!(!t.contains("__blk_account_io_start"));
        assert!(Traceable(None).contains("anything"), "unknown: BTF decides");
    }

    #[test]
    fn the_first_known_traceable_name_is_chosen_and_each_refusal_said() {
        let Ok(btf) = KernelBtf::load() else { return };
        // vfs_read is in every kernel's BTF; the first name is in none.
        let t = Traceable::from_text("vfs_read\nvfs_write\n");
        let f = choose(&btf, &t, &["no_such_function_ioscope", "vfs_read"]).unwrap();
        assert_eq!(f.name, "vfs_read");
        assert_eq!(f.params.len(), 4);
        let e = choose(&btf, &Traceable::from_text("vfs_write\n"), &["no_such_function_ioscope", "vfs_read"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no_such_function_ioscope: not in the kernel's BTF"), "{e}");
        assert!(e.contains("vfs_read: not traceable"), "{e}");
    }
}
