//! `--keys`: the keys an export presses before its first frame, as text. Each character is its
//! key; `<Name>` names one that is not a character (`<Enter>`, `<Esc>`, `<Down>`, …, `<lt>` for a
//! `<` that starts such a name).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// The names `<Name>` accepts (case-insensitive) and their keys.
const NAMED: &[(&str, KeyCode)] = &[
    ("Enter", KeyCode::Enter),
    ("Esc", KeyCode::Esc),
    ("Tab", KeyCode::Tab),
    ("BackTab", KeyCode::BackTab),
    ("Space", KeyCode::Char(' ')),
    ("Backspace", KeyCode::Backspace),
    ("Up", KeyCode::Up),
    ("Down", KeyCode::Down),
    ("Left", KeyCode::Left),
    ("Right", KeyCode::Right),
    ("PageUp", KeyCode::PageUp),
    ("PgUp", KeyCode::PageUp),
    ("PageDown", KeyCode::PageDown),
    ("PgDn", KeyCode::PageDown),
    ("Home", KeyCode::Home),
    ("End", KeyCode::End),
    ("F1", KeyCode::F(1)),
    ("lt", KeyCode::Char('<')),
];

/// One key of `--keys` and how it was written (for the error that names it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Key {
    pub event: KeyEvent,
    pub text: String,
}

/// Parses `--keys`: an unknown `<Name>` or a control character is refused, naming it.
pub fn parse(s: &str) -> Result<Vec<Key>, String> {
    let mut keys = Vec::new();
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        let key = |code: KeyCode, text: &str| Key {
            event: KeyEvent::new(code, KeyModifiers::NONE),
            text: text.to_string(),
        };
        // `<Name>`: letters and digits between the brackets; any other `<` is the key itself.
        let name = rest.strip_prefix('<').and_then(|r| {
            let end = r.find('>')?;
            let name = &r[..end];
            (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric())).then_some(name)
        });
        if let Some(name) = name {
            let written = &rest[..name.len() + 2];
            let Some(&(_, code)) = NAMED.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) else {
                let known: Vec<String> = NAMED.iter().map(|(n, _)| format!("<{n}>")).collect();
                return Err(format!(
                    "unknown key '{}' in --keys (a character, or one of {})",
                    crate::untrusted::escape(written),
                    known.join(" ")
                ));
            };
            keys.push(key(code, written));
            rest = &rest[written.len()..];
            continue;
        }
        if c.is_control() {
            return Err(format!(
                "unknown key '{}' in --keys (write <Enter>, <Esc>, <Tab> for those)",
                crate::untrusted::escape(&c.to_string())
            ));
        }
        keys.push(key(KeyCode::Char(c), &c.to_string()));
        rest = &rest[c.len_utf8()..];
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(s: &str) -> Vec<KeyCode> {
        parse(s).unwrap().into_iter().map(|k| k.event.code).collect()
    }

    #[test]
    fn characters_and_named_keys() {
        assert_eq!(codes("4"), vec![KeyCode::Char('4')]);
        assert_eq!(
            codes("/dd<Enter><down><PgDn>"),
            vec![
                KeyCode::Char('/'),
                KeyCode::Char('d'),
                KeyCode::Char('d'),
                KeyCode::Enter,
                KeyCode::Down,
                KeyCode::PageDown
            ]
        );
        // A `<` that starts no name is the speed key; `<lt>` writes one before a name.
        assert_eq!(codes("<<>"), vec![KeyCode::Char('<'), KeyCode::Char('<'), KeyCode::Char('>')]);
        assert_eq!(
            codes("<lt>end>"),
            vec![
                KeyCode::Char('<'),
                KeyCode::Char('e'),
                KeyCode::Char('n'),
                KeyCode::Char('d'),
                KeyCode::Char('>')
            ]
        );
        assert_eq!(parse("<Home>").unwrap()[0].text, "<Home>");
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn unknown_names_and_control_characters_are_refused() {
        let e = parse("w<Insert>").unwrap_err();
        assert!(e.starts_with("unknown key '<Insert>' in --keys"), "{e}");
        let e = parse("a\u{1b}[2J").unwrap_err();
        assert!(e.contains("unknown key '\\x1b'") || e.contains("unknown key '\\e'"), "{e}");
    }
}
