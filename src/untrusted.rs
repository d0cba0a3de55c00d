//! Untrusted strings made safe to show: file names, process names, command lines, cgroup names,
//! host names and everything read from a recording come from users who may be hostile. Every text
//! surface (the TUI, `--once`/`--batch`, `replay --batch`/`--csv`, `compare`, bench's report,
//! error messages) shows them through [`escape`] (or [`Shown`], its `Display` form), so that no
//! terminal control sequence, line break or bidirectional override reaches the terminal; JSON and
//! OpenMetrics keep the exact strings in their own escaping. See src/README.md ("Untrusted
//! strings").
//!
//! The notation, as `ps` and htop show such names but readable back to the character:
//!
//! | What | Shown as |
//! |---|---|
//! | LF, CR, TAB | `\n`, `\r`, `\t` |
//! | other C0 controls (ESC, BEL, …) and DEL | `\x1b`, `\x07`, `\x7f` |
//! | C1 controls U+0080–U+009F (CSI is U+009B) | `\u{9b}` |
//! | bidi and line controls: U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069, U+2028, U+2029 | `\u{202e}` |
//! | a byte that is not UTF-8 (paths given as bytes) | `\xff` |
//!
//! A backslash is shown as itself (systemd's cgroup and unit names hold `\x2d` escapes of their
//! own), so a name may spell an escape literally; what matters is that nothing is interpreted.

use std::borrow::Cow;
use std::fmt;

/// Whether `c` is shown escaped: a control character (C0, DEL, C1) or a bidi/line control.
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
                | '\u{2028}' | '\u{2029}'
        )
}

fn push_escaped(out: &mut String, c: char) {
    use fmt::Write as _;
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// `s` with every character of [`needs_escape`] written in the module's notation; borrowed when
/// nothing needs it (the usual case).
pub fn escape(s: &str) -> Cow<'_, str> {
    escape_except(s, None)
}

/// A whole multi-line report made safe: like [`escape`] but newlines stay line breaks. The text
/// reports pass through it before they are written, a net under the per-name [`escape`] (which
/// also escapes a name's newline, so that it cannot forge a row).
pub fn escape_lines(s: &str) -> Cow<'_, str> {
    escape_except(s, Some('\n'))
}

fn escape_except(s: &str, keep: Option<char>) -> Cow<'_, str> {
    let bad = |c: char| needs_escape(c) && Some(c) != keep;
    let Some(first) = s.find(bad) else { return Cow::Borrowed(s) };
    let mut out = String::with_capacity(s.len() + 8);
    out.push_str(&s[..first]);
    for c in s[first..].chars() {
        if bad(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Bytes that should be text (a path, a name the kernel gave as bytes): valid UTF-8 runs go
/// through [`escape`], each byte that is not UTF-8 is shown as `\xHH`.
pub fn escape_bytes(b: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(b) {
        return escape(s);
    }
    let mut out = String::with_capacity(b.len() + 8);
    for chunk in b.utf8_chunks() {
        out.push_str(&escape(chunk.valid()));
        for byte in chunk.invalid() {
            use fmt::Write as _;
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    Cow::Owned(out)
}

/// A path shown safely (see [`escape_bytes`]); `Path::display` would pass controls through.
pub fn path(p: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    escape_bytes(p.as_os_str().as_bytes()).into_owned()
}

/// An untrusted string in a `format!`: `{}` writes it escaped, and width, fill and alignment
/// (`{:<16}`) apply to the escaped text, so columns stay aligned.
#[derive(Clone, Copy, Debug)]
pub struct Shown<'a>(pub &'a str);

/// [`Shown`] of `s`.
pub fn shown(s: &str) -> Shown<'_> {
    Shown(s)
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&escape(self.0))
    }
}

/// A text cell of a CSV file (RFC 4180): escaped as above, a cell that a spreadsheet would take
/// for a formula (starting with `=`, `+`, `-`, `@`, TAB or CR) prefixed with `'` as OWASP
/// recommends, and quoted when it holds a comma or a quote. Only text
/// goes through here: numbers (a negative one too) are written as numbers by the caller.
pub fn csv_text(s: &str) -> String {
    let escaped = escape(s);
    let formula = escaped.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let cell = if formula { Cow::Owned(format!("'{escaped}")) } else { escaped };
    if cell.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", cell.replace('"', "\"\""))
    } else {
        cell.into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_names_are_unchanged_and_borrowed() {
        for s in ["postgres", "/var/lib/pg/16/main/base/1", "kworker/u8:2", "system-getty.slice", "a\\x2db", "données ✓ 日本"] {
            assert!(matches!(escape(s), Cow::Borrowed(_)), "{s}");
            assert_eq!(escape_lines(s), s);
        }
    }

    #[test]
    fn controls_and_bidi_are_shown_in_the_documented_notation() {
        assert_eq!(escape("\x1b]0;EXEC\x07dd"), "\\x1b]0;EXEC\\x07dd");
        assert_eq!(escape("a\nb\rc\td\x7f"), "a\\nb\\rc\\td\\x7f");
        assert_eq!(escape("\u{9b}2J\u{90}q"), "\\u{9b}2J\\u{90}q");
        assert_eq!(escape("evil\u{202e}fdp.exe"), "evil\\u{202e}fdp.exe");
        for c in ['\u{61c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{2066}', '\u{2069}', '\u{2028}', '\u{2029}'] {
            assert_eq!(escape(&c.to_string()), format!("\\u{{{:x}}}", c as u32));
        }
        // A zero-width joiner (emoji sequences) and ordinary non-ASCII stay as they are.
        assert_eq!(escape("👩\u{200d}💻"), "👩\u{200d}💻");
        assert_eq!(escape_lines("a\x1bb\nc\r\n"), "a\\x1bb\nc\\r\n");
    }

    #[test]
    fn every_escaped_string_is_free_of_controls() {
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        let e = escape(&all);
        assert!(!e.chars().any(needs_escape));
        assert!(!escape_lines(&all).chars().any(|c| needs_escape(c) && c != '\n'));
    }

    #[test]
    fn bytes_that_are_not_utf8_are_shown_as_hex() {
        assert_eq!(escape_bytes(b"ok"), "ok");
        assert_eq!(escape_bytes(b"a\xffb\x1b\xc3"), "a\\xffb\\x1b\\xc3");
        use std::os::unix::ffi::OsStrExt as _;
        assert_eq!(path(std::path::Path::new(std::ffi::OsStr::from_bytes(b"/tmp/\x1b]0;x\x07\xfe"))), "/tmp/\\x1b]0;x\\x07\\xfe");
    }

    #[test]
    fn shown_pads_the_escaped_text() {
        assert_eq!(format!("[{:<6}]", shown("a\nb")), "[a\\nb  ]");
        assert_eq!(format!("[{:>5}]", shown("ab")), "[   ab]");
        assert_eq!(format!("{}", shown("\u{202e}")), "\\u{202e}");
    }

    #[test]
    fn csv_text_neutralises_formulas_and_quotes() {
        assert_eq!(csv_text("postgres"), "postgres");
        assert_eq!(csv_text("=HYPERLINK(1)"), "'=HYPERLINK(1)");
        assert_eq!(csv_text("+1"), "'+1");
        assert_eq!(csv_text("-2+3"), "'-2+3");
        assert_eq!(csv_text("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv_text("\t=1"), "\\t=1");
        assert_eq!(csv_text("a,b"), "\"a,b\"");
        assert_eq!(csv_text("=a,\"b\""), "\"'=a,\"\"b\"\"\"");
        assert_eq!(csv_text("x\ny\x1b"), "x\\ny\\x1b");
        assert_eq!(csv_text(""), "");
    }
}
