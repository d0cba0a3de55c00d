//! A one-line text input (the `/` filter of the live, replay and compare screens): printable keys
//! type, Backspace deletes, Enter keeps the text, Esc clears it. Whether it is being edited is its
//! owner's business (an overlay in the live screen, a flag in compare); it reads as a `&str`.

use std::fmt;
use std::ops::Deref;

use crossterm::event::KeyCode;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LineInput {
    text: String,
}

/// What a key did to the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineEdit {
    /// The text changed (typed or deleted a character).
    Changed,
    /// Enter: editing ends, the text is kept.
    Kept,
    /// Esc: editing ends, the text is cleared.
    Cleared,
    /// Not a key the input uses.
    Ignored,
}

impl LineInput {
    /// Applies one key while editing.
    pub fn handle_key(&mut self, code: KeyCode) -> LineEdit {
        match code {
            KeyCode::Enter => LineEdit::Kept,
            KeyCode::Esc => {
                self.text.clear();
                LineEdit::Cleared
            }
            KeyCode::Backspace => {
                self.text.pop();
                LineEdit::Changed
            }
            KeyCode::Char(c) if !c.is_control() => {
                self.text.push(c);
                LineEdit::Changed
            }
            _ => LineEdit::Ignored,
        }
    }

    pub fn clear(&mut self) {
        self.text.clear();
    }

    /// The text, with the cursor after it while `editing`.
    pub fn with_cursor(&self, editing: bool) -> String {
        if editing {
            format!("{}▏", self.text)
        } else {
            self.text.clone()
        }
    }
}

impl Deref for LineInput {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for LineInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl From<&str> for LineInput {
    fn from(s: &str) -> LineInput {
        LineInput { text: s.to_string() }
    }
}

impl PartialEq<&str> for LineInput {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_deletes_keeps_and_clears() {
        let mut l = LineInput::default();
        for c in "fiqs".chars() {
            assert_eq!(l.handle_key(KeyCode::Char(c)), LineEdit::Changed);
        }
        assert_eq!(l.handle_key(KeyCode::Backspace), LineEdit::Changed);
        assert_eq!(l.handle_key(KeyCode::Tab), LineEdit::Ignored);
        assert_eq!(l, "fiq");
        assert_eq!(l.with_cursor(true), "fiq▏");
        assert_eq!(l.handle_key(KeyCode::Enter), LineEdit::Kept);
        assert_eq!(&*l, "fiq");
        assert_eq!(l.handle_key(KeyCode::Esc), LineEdit::Cleared);
        assert!(l.is_empty());
        assert_eq!(l.handle_key(KeyCode::Backspace), LineEdit::Changed, "deleting nothing is harmless");
    }
}
