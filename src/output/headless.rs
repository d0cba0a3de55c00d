//! The reports of `--once` and `--batch` (and `replay --batch`/`--json`): a Model as a text frame
//! or as JSON. The loop that samples and writes them is the headless mode's (src/headless.rs).

use std::io::{self, Write};

use super::json_memo::JsonLines;
use crate::model::Model;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The `top -b`-like text frame.
    Text,
    /// One pretty-printed JSON document (`--once --json`).
    JsonPretty,
    /// One compact JSON document per line (`--batch --json`).
    JsonLines,
}

/// A series of reports in one format: frames after the first are separated as [`write_report`]
/// says; JSON lines reuse the JSON of the parts that did not change ([`JsonLines`]).
pub struct Reports {
    format: Format,
    written: u64,
    json: JsonLines,
}

impl Reports {
    pub fn new(format: Format) -> Reports {
        Reports { format, written: 0, json: JsonLines::default() }
    }

    /// Reports written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The next report.
    pub fn write<W: Write>(&mut self, out: &mut W, model: &Model) -> io::Result<()> {
        match self.format {
            Format::JsonLines => {
                self.json.write(&mut *out, model)?;
                out.write_all(b"\n")?;
            }
            format => write_report(out, model, format, self.written == 0)?,
        }
        self.written += 1;
        Ok(())
    }
}

/// One report in the chosen format. Text frames after the first are preceded by a blank line,
/// as `top -b` separates its frames.
pub fn write_report<W: Write>(out: &mut W, model: &Model, format: Format, first: bool) -> io::Result<()> {
    match format {
        Format::Text => {
            if !first {
                out.write_all(b"\n")?;
            }
            out.write_all(super::text::format_frame(model).as_bytes())
        }
        Format::JsonPretty => {
            serde_json::to_writer_pretty(&mut *out, model)?;
            out.write_all(b"\n")
        }
        Format::JsonLines => {
            serde_json::to_writer(&mut *out, model)?;
            out.write_all(b"\n")
        }
    }
}
