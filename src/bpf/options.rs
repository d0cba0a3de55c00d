//! [`BpfOptions`]: the choices the collector is started with (the product's defaults, the tests'
//! and the kernel lab's knobs).

/// How the programs are attached.
#[derive(Clone, Debug)]
pub struct BpfOptions {
    /// The block and iomap programs as BTF tracepoints when the kernel allows (else classic
    /// tracepoints).
    pub btf_tracepoints: bool,
    /// A block program's BTF twin to treat as refused by the kernel (tests of the fallback: the
    /// block programs must then all be classic), or `block_claim::REFUSE_CAS`: the kernel's BPF
    /// treated as without compare-and-exchange (the block programs' and `sync_enter`'s `_nocas`
    /// twins). None in the product.
    pub refuse_block_twin: Option<String>,
    /// Tracepoints ("category:event") to treat as missing, as on an older kernel (tests of the
    /// fallbacks that this kernel also has). Empty in the product.
    pub hidden_tracepoints: Vec<String>,
    /// Paths also from /proc and mount walks when the kernel's names have none (see
    /// resolve::files). Tests turn it off to prove the kernel's names alone find them, and
    /// `ioscope serve` without `--top-files` (no per-file series to name). True in the TUI.
    pub path_fallbacks: bool,
    /// Refuse fentry/fexit on purpose, as a kernel without BPF trampolines does, so that the
    /// fallbacks run as their kprobe variants: a test knob (the kernel lab's `--no-trampoline`
    /// run), set by `IOSCOPE_NO_TRAMPOLINE=1`. False in the product.
    pub no_trampoline: bool,
    /// A thread whose page-cache insertions and dirtying are not counted: the one writing
    /// ioscope's own reports or recording ([`BpfOptions::for_output_writer`]). Else at
    /// `--interval 0.1` ioscope's output is the busiest file of a quiet machine, and what the
    /// maps hold for it is read and resolved every sample (ebpf/README.md, "Page cache").
    pub ignored_thread: Option<u32>,
}

impl BpfOptions {
    /// The defaults, with `IOSCOPE_HIDE_TRACEPOINTS` ("category:event,...") as
    /// [`BpfOptions::hidden_tracepoints`]: measuring a fallback beside its tracepoint on one
    /// kernel (the kernel lab's `cost` run). Unset in the product.
    pub fn from_env() -> BpfOptions {
        let hidden = std::env::var("IOSCOPE_HIDE_TRACEPOINTS").unwrap_or_default();
        BpfOptions {
            hidden_tracepoints: hidden.split(',').filter(|t| !t.is_empty()).map(str::to_string).collect(),
            no_trampoline: std::env::var_os("IOSCOPE_NO_TRAMPOLINE").is_some_and(|v| v == "1"),
            ..BpfOptions::default()
        }
    }

    /// [`BpfOptions::from_env`] for a collector whose thread writes ioscope's output: that
    /// thread's own writes are not counted ([`BpfOptions::ignored_thread`]).
    pub fn for_output_writer() -> BpfOptions {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        BpfOptions { ignored_thread: Some(tid), ..BpfOptions::from_env() }
    }
}

impl Default for BpfOptions {
    fn default() -> Self {
        BpfOptions {
            btf_tracepoints: true,
            refuse_block_twin: None,
            hidden_tracepoints: Vec::new(),
            path_fallbacks: true,
            no_trampoline: false,
            ignored_thread: None,
        }
    }
}
