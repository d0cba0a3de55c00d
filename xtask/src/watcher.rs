//! A running `ioscope --batch --json` for the overhead benchmarks: the "with ioscope" side of
//! their pairs. It counts as started only once its first report is out with eBPF enabled, so a
//! run "with" is never a run without the probes by mistake.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use anyhow::{bail, Context, Result};

/// `ioscope --batch --json` with eBPF on, running until dropped. Started once its first report is
/// out (the probes are attached by then); its output is drained and discarded.
pub struct Ioscope(Child);

impl Ioscope {
    pub fn start(bin: &Path) -> Result<Ioscope> {
        let mut child = Command::new(bin)
            .args(["--batch", "--json", "--interval", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting ioscope")?;
        let mut out = BufReader::new(child.stdout.take().context("no stdout")?);
        let mut first = String::new();
        out.read_line(&mut first)?;
        let running = Ioscope(child);
        if !first.contains("\"enabled\":true") {
            bail!("ioscope runs without eBPF: {}", first.trim());
        }
        std::thread::spawn(move || {
            let mut sink = [0u8; 8192];
            while matches!(out.read(&mut sink), Ok(n) if n > 0) {}
        });
        Ok(running)
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Ioscope {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
