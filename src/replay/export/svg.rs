//! A still of one screen as SVG: ratatui's [`Buffer`] cell by cell, each cell's colours and
//! attributes, on a monospace grid. The cells hold text from a recording (file and process names
//! from hostile users): XML's special characters are escaped and any character XML cannot hold
//! becomes U+FFFD.

use std::fmt::Write as _;

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

/// Font size, cell width and line height, in pixels.
const FONT_PX: f64 = 14.0;
const CELL_W: f64 = 8.4;
const CELL_H: f64 = 18.0;
/// The margin around the screen.
const PAD: f64 = 8.0;
/// The terminal's default colours.
const DEFAULT_FG: &str = "#d3d7cf";
const DEFAULT_BG: &str = "#1e1e1e";
/// The 16 ANSI colours (Tango, as many terminals have them).
const ANSI: [&str; 16] = [
    "#2e3436", "#cc0000", "#4e9a06", "#c4a000", "#3465a4", "#75507b", "#06989a", "#d3d7cf", "#555753",
    "#ef2929", "#8ae234", "#fce94f", "#729fcf", "#ad7fa8", "#34e2e2", "#eeeeec",
];

/// A colour as `#rrggbb`; `None` for the terminal's default.
fn hex(c: Color) -> Option<String> {
    let ansi = |i: usize| Some(ANSI[i].to_string());
    match c {
        Color::Reset => None,
        Color::Black => ansi(0),
        Color::Red => ansi(1),
        Color::Green => ansi(2),
        Color::Yellow => ansi(3),
        Color::Blue => ansi(4),
        Color::Magenta => ansi(5),
        Color::Cyan => ansi(6),
        Color::Gray => ansi(7),
        Color::DarkGray => ansi(8),
        Color::LightRed => ansi(9),
        Color::LightGreen => ansi(10),
        Color::LightYellow => ansi(11),
        Color::LightBlue => ansi(12),
        Color::LightMagenta => ansi(13),
        Color::LightCyan => ansi(14),
        Color::White => ansi(15),
        Color::Rgb(r, g, b) => Some(format!("#{r:02x}{g:02x}{b:02x}")),
        Color::Indexed(i) => Some(indexed(i)),
    }
}

/// xterm's 256-colour palette: the 16 ANSI colours, a 6×6×6 cube, 24 greys.
fn indexed(i: u8) -> String {
    match i {
        0..=15 => ANSI[usize::from(i)].to_string(),
        16..=231 => {
            let n = i - 16;
            let level = |v: u8| if v == 0 { 0 } else { 55 + 40 * v };
            format!("#{:02x}{:02x}{:02x}", level(n / 36), level(n / 6 % 6), level(n % 6))
        }
        232..=255 => {
            let v = 8 + 10 * (i - 232);
            format!("#{v:02x}{v:02x}{v:02x}")
        }
    }
}

/// `s` as XML character data or attribute value.
pub fn xml_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Not XML characters (C0 controls), or controls a viewer could act on.
            c if crate::untrusted::needs_escape(c) || c == '\u{fffe}' || c == '\u{ffff}' => {
                out.push('\u{fffd}')
            }
            c => out.push(c),
        }
    }
    out
}

/// How one cell is drawn, its colours resolved.
#[derive(Clone, PartialEq)]
struct Look {
    fg: Option<String>,
    bg: Option<String>,
    bold: bool,
    dim: bool,
    italic: bool,
    underline: bool,
    strike: bool,
}

fn look(cell: &ratatui::buffer::Cell) -> Look {
    let m = cell.modifier;
    let (mut fg, mut bg) = (hex(cell.fg), hex(cell.bg));
    if m.contains(Modifier::REVERSED) {
        let f = fg.unwrap_or_else(|| DEFAULT_FG.to_string());
        let b = bg.unwrap_or_else(|| DEFAULT_BG.to_string());
        (fg, bg) = (Some(b), Some(f));
    }
    if m.contains(Modifier::HIDDEN) {
        fg = Some(bg.clone().unwrap_or_else(|| DEFAULT_BG.to_string()));
    }
    Look {
        fg,
        bg,
        bold: m.contains(Modifier::BOLD),
        dim: m.contains(Modifier::DIM),
        italic: m.contains(Modifier::ITALIC),
        underline: m.contains(Modifier::UNDERLINED),
        strike: m.contains(Modifier::CROSSED_OUT),
    }
}

/// The cells of one row: (first column, columns spanned, text, look), a wide character spanning
/// two columns.
fn cells(buf: &Buffer, y: u16) -> Vec<(u16, u16, String, Look)> {
    let area = buf.area;
    let mut out = Vec::new();
    let mut x = area.x;
    while x < area.x + area.width {
        let cell = &buf[(x, y)];
        let sym = cell.symbol();
        let width = ratatui::text::Span::raw(sym).width().clamp(1, 2) as u16;
        let text = if sym.is_empty() { " ".to_string() } else { sym.to_string() };
        out.push((x - area.x, width.min(area.x + area.width - x), text, look(cell)));
        x += width;
    }
    out
}

/// The screen in `buf` as a standalone SVG document; `title` (escaped here) is its `<title>`.
pub fn render(buf: &Buffer, title: &str) -> String {
    let (cols, rows) = (buf.area.width, buf.area.height);
    let width = f64::from(cols) * CELL_W + 2.0 * PAD;
    let height = f64::from(rows) * CELL_H + 2.0 * PAD;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\" xml:space=\"preserve\" style=\"white-space: pre\" \
         font-family=\"'DejaVu Sans Mono', 'Liberation Mono', Menlo, Consolas, monospace\" \
         font-size=\"{FONT_PX}\">\n<title>{}</title>\n\
         <rect width=\"100%\" height=\"100%\" fill=\"{DEFAULT_BG}\"/>\n",
        xml_text(title)
    );
    for y in 0..rows {
        let row = cells(buf, buf.area.y + y);
        let top = PAD + f64::from(y) * CELL_H;
        // Backgrounds: one rectangle per run of cells of one colour.
        let mut i = 0;
        while i < row.len() {
            let bg = &row[i].3.bg;
            let mut j = i;
            while j < row.len() && &row[j].3.bg == bg {
                j += 1;
            }
            if let Some(bg) = bg {
                let x = PAD + f64::from(row[i].0) * CELL_W;
                let w = f64::from(row[j - 1].0 + row[j - 1].1 - row[i].0) * CELL_W;
                let _ = writeln!(
                    s,
                    "<rect x=\"{x:.1}\" y=\"{top:.1}\" width=\"{w:.1}\" height=\"{CELL_H}\" fill=\"{bg}\"/>"
                );
            }
            i = j;
        }
        // Text: one tspan per word (a run of one look without a blank), placed at its column and
        // stretched to its cells: neither whitespace handling nor a glyph the font lacks can shift
        // the columns after it.
        let baseline = top + CELL_H * 0.75;
        let mut spans = String::new();
        let blank = |i: usize| row[i].2.trim().is_empty();
        let mut i = 0;
        while i < row.len() {
            if blank(i) {
                i += 1;
                continue;
            }
            let mut j = i;
            let mut text = String::new();
            while j < row.len() && row[j].3 == row[i].3 && !blank(j) {
                text.push_str(&row[j].2);
                j += 1;
            }
            let l = &row[i].3;
            let x = PAD + f64::from(row[i].0) * CELL_W;
            let w = f64::from(row[j - 1].0 + row[j - 1].1 - row[i].0) * CELL_W;
            let _ = write!(
                spans,
                "<tspan x=\"{x:.1}\" textLength=\"{w:.1}\" lengthAdjust=\"spacingAndGlyphs\" fill=\"{}\"",
                l.fg.as_deref().unwrap_or(DEFAULT_FG)
            );
            if l.bold {
                spans.push_str(" font-weight=\"bold\"");
            }
            if l.dim {
                spans.push_str(" fill-opacity=\"0.6\"");
            }
            if l.italic {
                spans.push_str(" font-style=\"italic\"");
            }
            match (l.underline, l.strike) {
                (true, true) => spans.push_str(" text-decoration=\"underline line-through\""),
                (true, false) => spans.push_str(" text-decoration=\"underline\""),
                (false, true) => spans.push_str(" text-decoration=\"line-through\""),
                (false, false) => {}
            }
            let _ = write!(spans, ">{}</tspan>", xml_text(&text));
            i = j;
        }
        if !spans.is_empty() {
            let _ = writeln!(s, "<text y=\"{baseline:.1}\">{spans}</text>");
        }
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::layout::Rect;
    use ratatui::style::Style;

    #[test]
    fn hostile_text_is_escaped_and_colours_kept() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 20, 2));
        buf.set_string(0, 0, "<a&b>\u{7}", Style::default().fg(Color::Red).bg(Color::Indexed(21)));
        buf.set_string(0, 1, "日本", Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD));
        let svg = render(&buf, "t</title><script>");
        assert!(svg.contains(">&lt;a&amp;b&gt;</tspan>"), "{svg}");
        // ratatui drops control characters from a cell; any that reach the SVG are replaced.
        assert_eq!(
            xml_text("a\u{7}\u{1b}[2J\u{202e}\u{ffff}'\""),
            "a\u{fffd}\u{fffd}[2J\u{fffd}\u{fffd}&apos;&quot;"
        );
        assert!(svg.contains("<title>t&lt;/title&gt;&lt;script&gt;</title>"));
        assert!(!svg.contains("<script"));
        assert!(svg.contains("fill=\"#cc0000\"") && svg.contains("fill=\"#0000ff\""), "{svg}");
        // Reversed: the default colours swapped; the wide characters span four cells.
        assert!(svg.contains(&format!("fill=\"{DEFAULT_BG}\" font-weight=\"bold\">日本")), "{svg}");
        assert!(svg.contains(&format!("textLength=\"{:.1}\"", 4.0 * CELL_W)), "{svg}");
        assert_eq!(indexed(196), "#ff0000");
        assert_eq!(indexed(232), "#080808");
    }
}
