//! The live TUI's event loop: one tokio `select!` over terminal input, ticks and samples.

use std::time::Duration;

/// What the command line decided for the interactive UI.
#[derive(Clone, Debug)]
pub struct AppOptions {
    /// Sampling interval (adjustable at run time with +/-).
    pub interval: Duration,
    /// False with --no-color or when NO_COLOR is set.
    pub color: bool,
    /// False with --no-bpf: eBPF is not even tried.
    pub bpf: bool,
}

/// Runs the interactive UI until the user quits. Restores the terminal on every exit path.
pub async fn run(_opts: AppOptions) -> anyhow::Result<()> {
    anyhow::bail!("the interactive UI is not built yet")
}
