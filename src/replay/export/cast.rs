//! asciicast v2 (asciinema's format): a JSON header line, then one `[time, "o", text]` line per
//! piece of terminal output, `time` in seconds from the start.

use std::fmt::Write as _;

/// The header line: the terminal's size, the recording's start (Unix seconds) and a title.
pub fn header(cols: u16, rows: u16, timestamp_s: u64, title: &str) -> String {
    // In the order asciinema writes it.
    let title = serde_json::to_string(title).expect("a string serializes");
    let mut line = format!(
        "{{\"version\": 2, \"width\": {cols}, \"height\": {rows}, \"timestamp\": {timestamp_s}, \
         \"title\": {title}, \"env\": {{\"TERM\": \"xterm-256color\"}}}}"
    );
    line.push('\n');
    line
}

/// One output event: `text` written at `time_s`.
pub fn event(out: &mut String, time_s: f64, text: &str) {
    let text = serde_json::to_string(text).expect("a string serializes");
    // Microseconds, as asciinema writes them.
    let _ = writeln!(out, "[{time_s:.6}, \"o\", {text}]");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_events_are_json_lines() {
        let h = header(120, 40, 1_700_000_000, "a \"quoted\" <name>\n");
        let v: serde_json::Value = serde_json::from_str(h.trim_end()).unwrap();
        assert_eq!(
            (v["version"].as_u64(), v["width"].as_u64(), v["height"].as_u64()),
            (Some(2), Some(120), Some(40))
        );
        assert_eq!(v["title"], "a \"quoted\" <name>\n");
        let mut out = String::new();
        event(&mut out, 1.0 / 3.0, "\u{1b}[1;1Hé\"");
        event(&mut out, 2.0, "");
        let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines[0], serde_json::json!([0.333333, "o", "\u{1b}[1;1Hé\""]));
        assert_eq!(lines[1], serde_json::json!([2.0, "o", ""]));
    }
}
