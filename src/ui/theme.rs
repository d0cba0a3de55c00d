//! Styles. With colour off (`--no-color`, NO_COLOR) no style carries a colour at all; emphasis then
//! relies on modifiers (bold, reverse), which NO_COLOR permits, and on text markers.

use ratatui::style::{Color, Modifier, Style};

/// How alarming a figure is; picks its colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Normal,
    Warn,
    Critical,
}

impl Level {
    /// `value` against two thresholds: below `warn` is normal, from `crit` on critical.
    pub fn of(value: f64, warn: f64, crit: f64) -> Level {
        if value >= crit {
            Level::Critical
        } else if value >= warn {
            Level::Warn
        } else {
            Level::Normal
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }

    /// Labels and secondary text.
    pub fn dim(&self) -> Style {
        self.fg(Color::DarkGray)
    }

    pub fn title(&self, focused: bool) -> Style {
        if focused {
            self.fg(Color::Cyan).add_modifier(Modifier::BOLD | Modifier::REVERSED)
        } else {
            self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
        }
    }

    pub fn table_header(&self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }

    pub fn selected_row(&self) -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }

    pub fn level(&self, level: Level) -> Style {
        match level {
            Level::Normal => Style::new(),
            Level::Warn => self.fg(Color::Yellow).add_modifier(Modifier::BOLD),
            Level::Critical => self.fg(Color::Red).add_modifier(Modifier::BOLD),
        }
    }

    /// A figure that is healthy but worth a glance (e.g. a busy device below saturation).
    pub fn good(&self) -> Style {
        self.fg(Color::Green)
    }

    pub fn cached(&self) -> Style {
        self.fg(Color::Blue)
    }

    pub fn dirty(&self) -> Style {
        self.fg(Color::Magenta)
    }

    /// Banner for "PAUSED" and the filter indicator.
    pub fn banner(&self) -> Style {
        self.fg(Color::Black).bg_if(self.color, Color::Yellow).add_modifier(Modifier::BOLD)
    }
}

trait BgIf {
    fn bg_if(self, on: bool, c: Color) -> Style;
}

impl BgIf for Style {
    fn bg_if(self, on: bool, c: Color) -> Style {
        if on {
            self.bg(c)
        } else {
            self.add_modifier(Modifier::REVERSED)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_color_means_no_colour_in_any_style() {
        let t = Theme { color: false };
        let styles = [
            t.dim(),
            t.title(true),
            t.title(false),
            t.table_header(),
            t.selected_row(),
            t.level(Level::Normal),
            t.level(Level::Warn),
            t.level(Level::Critical),
            t.good(),
            t.cached(),
            t.dirty(),
            t.banner(),
        ];
        for s in styles {
            assert_eq!((s.fg, s.bg), (None, None), "{s:?}");
        }
        assert_eq!(Theme { color: true }.level(Level::Critical).fg, Some(Color::Red));
    }

    #[test]
    fn levels() {
        assert_eq!(Level::of(1.0, 5.0, 20.0), Level::Normal);
        assert_eq!(Level::of(5.0, 5.0, 20.0), Level::Warn);
        assert_eq!(Level::of(25.0, 5.0, 20.0), Level::Critical);
    }
}
