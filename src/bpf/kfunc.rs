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
}

/// Loads `program` for `function` and attaches it.
pub fn attach(ebpf: &mut aya::Ebpf, program: &str, hook: Hook, function: &str, btf: &aya::Btf) -> Result<()> {
    let prog =
        ebpf.program_mut(program).ok_or_else(|| anyhow!("program `{program}` is not in the eBPF object"))?;
    match hook {
        Hook::Fentry => {
            let p: &mut aya::programs::FEntry = prog.try_into()?;
            p.load(function, btf)?;
            p.attach()?;
        }
        Hook::Fexit => {
            let p: &mut aya::programs::FExit = prog.try_into()?;
            p.load(function, btf)?;
            p.attach()?;
        }
    }
    Ok(())
}

/// Loads kprobe `program` and attaches it to the entry of `function`.
pub fn attach_kprobe(ebpf: &mut aya::Ebpf, program: &str, function: &str) -> Result<()> {
    let prog =
        ebpf.program_mut(program).ok_or_else(|| anyhow!("program `{program}` is not in the eBPF object"))?;
    let p: &mut aya::programs::KProbe = prog.try_into()?;
    p.load()?;
    p.attach(function, 0)?;
    Ok(())
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
