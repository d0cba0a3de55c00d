//! A family of eBPF programs: the probes behind one part of the Sample (block, page cache, files,
//! readahead, syncs...), and the one interface [`super::BpfCollector`] drives them through.
//!
//! The collector knows no family by name: it runs each phase over the registered ones
//! ([`super::families`], one line per family) in their order, and every family's programs, maps,
//! notes and read errors are its own. What one family's plan needs from another's (a fallback that
//! one planned, a map another reads, the file resolver several use) passes through [`Shared`], by
//! type: the type is declared in the family that provides it.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::path::Path;

use aya::{Ebpf, EbpfLoader};

use super::kernel_btf::KernelBtf;
use super::options::BpfOptions;
use super::{kfunc, map_memory, preload};
use crate::sample::{BpfProgramStatus, BpfSample};

/// One family's part of setting up and reading the eBPF programs, phase by phase. Each phase runs
/// over every family in the registration order before the next phase starts.
pub trait Family: Any + Send {
    /// Its name in the status ("block", "page cache", ...): read errors are listed under it.
    fn name(&self) -> &'static str;

    /// Kernel layout facts: the tracepoints' formats in tracefs, struct offsets from the
    /// kernel's BTF, the fallbacks this kernel needs. Publishes in `setup.shared` what other
    /// families' plans use.
    fn plan(&mut self, setup: &mut Setup);

    /// Last choices that depend on the other families' plans (all planned by now).
    fn configure(&mut self, _setup: &mut Setup) {}

    /// Sets the object's globals it owns (its layouts) in `loader`: every one of them, also when
    /// it cannot run (then unset: its programs do nothing).
    fn globals<'s>(&'s self, loader: &mut EbpfLoader<'s>);

    /// The programs it will load and how, verified ahead on every CPU (see preload). `earlier`:
    /// the loads the families before it planned.
    fn loads<'a>(&'a self, setup: &Setup<'a>, earlier: &[preload::Planned<'a>]) -> Vec<preload::Planned<'a>>;

    /// Loads and attaches its programs (with their fallbacks), takes its maps, and appends one
    /// status row per program to `statuses` (which holds the earlier families' rows).
    fn attach(&mut self, ebpf: &mut Ebpf, setup: &mut Setup, statuses: &mut Vec<BpfProgramStatus>);

    /// What the status should say about how it runs (BTF refused, a fallback taken...), once
    /// attached.
    fn notes(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// Reads its maps into its part of `sample`; the errors met (each is kept, under the
    /// family's name). `shared` holds what the families publish for each other's reads.
    fn read(&mut self, shared: &mut Shared, sample: &mut BpfSample) -> Vec<String>;
}

/// What the families share while they are set up: the options, tracefs, the kernel's BTF, the
/// maps' sizes, and [`Shared`].
pub struct Setup<'k> {
    pub options: &'k BpfOptions,
    pub tracefs: &'k Path,
    /// The kernel's BTF, read once for all families; None without it.
    pub btf: Option<&'k KernelBtf>,
    /// The maps' sizes as created (set before the object is loaded).
    pub map_plan: map_memory::Plan,
    /// What the families publish for each other.
    pub shared: Shared,
    traceable: Option<kfunc::Traceable>,
}

impl<'k> Setup<'k> {
    pub fn new(options: &'k BpfOptions, tracefs: &'k Path, btf: Option<&'k KernelBtf>) -> Setup<'k> {
        Setup {
            options,
            tracefs,
            btf,
            map_plan: Default::default(),
            shared: Shared::default(),
            traceable: None,
        }
    }

    /// The kernel functions that can be traced (read from tracefs the first time it is asked
    /// for: a family that needs no fallback never reads it).
    pub fn traceable(&mut self) -> &kfunc::Traceable {
        self.traceable.get_or_insert_with(|| kfunc::Traceable::read(self.tracefs))
    }

    /// [`Setup::traceable`] when a family already read it, without reading it.
    pub fn traceable_if_read(&self) -> Option<&kfunc::Traceable> {
        self.traceable.as_ref()
    }

    /// Whether a tracepoint ("category:event") is to be treated as missing (tests of fallbacks).
    pub fn hidden(&self) -> &'k [String] {
        &self.options.hidden_tracepoints
    }
}

/// Values of distinct types, one of each, that families publish for each other: set up and read
/// in one place, the type declared by the family that provides it.
#[derive(Default)]
pub struct Shared {
    values: HashMap<TypeId, Box<dyn Any + Send>>,
}

impl Shared {
    /// Publishes `value` (replacing the one of its type).
    pub fn put<T: Any + Send>(&mut self, value: T) {
        self.values.insert(TypeId::of::<T>(), Box::new(value));
    }

    pub fn get<T: Any + Send>(&self) -> Option<&T> {
        self.values.get(&TypeId::of::<T>())?.downcast_ref()
    }

    pub fn get_mut<T: Any + Send>(&mut self) -> Option<&mut T> {
        self.values.get_mut(&TypeId::of::<T>())?.downcast_mut()
    }

    /// The value of type `T`, made by `make` when none was published yet.
    pub fn get_or_insert_with<T: Any + Send>(&mut self, make: impl FnOnce() -> T) -> &mut T {
        let value = self.values.entry(TypeId::of::<T>()).or_insert_with(|| Box::new(make()));
        value.downcast_mut().expect("a value is stored under its own type")
    }
}

/// The read errors of the families, each under its family's name ("page cache: reading ..."),
/// added to the status `reason` after what it already says: none is lost when several fail.
pub fn add_read_errors(reason: &mut Option<String>, errors: &[(&str, String)]) {
    for (family, error) in errors {
        let line = format!("{family}: {error}");
        *reason = Some(match reason.take() {
            Some(r) => format!("{r}; {line}"),
            None => line,
        });
    }
}
