//! Small, forgiving file readers shared by the collectors: a missing or unreadable file is `None`,
//! never an error, because a sample with one part empty is still useful.

use std::path::Path;

/// The whole file as text, or None when it cannot be read.
pub fn text(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// A file holding one unsigned integer (sysfs attributes, /proc/sys values).
pub fn u64_file(path: &Path) -> Option<u64> {
    text(path)?.trim().parse().ok()
}

/// A file holding one line of text, without its trailing newline.
pub fn line_file(path: &Path) -> Option<String> {
    Some(text(path)?.trim_end().to_string())
}
