//! `ioscope compare`'s entry: the comparison on the terminal ([`super::tui`]) or written out as
//! JSON or text. Above both the comparison (mod.rs) and its screen, which imports it.

use std::io::Write;

use super::{build, text, tui, CompareOptions};

pub fn run(opts: &CompareOptions) -> anyhow::Result<()> {
    let c = build(opts)?;
    if !opts.json && !opts.text && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return tui::run(&c, opts.color);
    }
    let mut out = std::io::stdout().lock();
    let r = if opts.json {
        serde_json::to_writer_pretty(&mut out, &c).map_err(std::io::Error::from).and_then(|_| writeln!(out))
    } else {
        out.write_all(text(&c, opts.top).as_bytes())
    };
    match r {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}
