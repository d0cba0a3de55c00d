//! Where a range starts or ends: an offset from a recording's start, or one of its marks
//! (`mark:N`, the first is 1), for `replay --from/--to` and `compare FILE@FROM..TO`.

use std::time::Duration;

use crate::record::format::Recording;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimePoint {
    Offset(Duration),
    /// Mark N (1-based) of the recording.
    Mark(usize),
}

impl TimePoint {
    /// `mark:N`, or an offset as `-d` takes it (`90`, `90s`, `5m`, `1:30`).
    pub fn parse(text: &str) -> Result<TimePoint, String> {
        if let Some(n) = text.strip_prefix("mark:") {
            return match n.parse::<usize>() {
                Ok(n) if n >= 1 => Ok(TimePoint::Mark(n)),
                _ => Err(format!("'{text}' is not a mark: marks are mark:1, mark:2, ...")),
            };
        }
        crate::util::parse_duration(text).map(TimePoint::Offset).map_err(|e| e.to_string())
    }

    /// The offset from the recording's first sample; a mark the recording lacks is an error.
    pub fn resolve(self, rec: &Recording) -> Result<Duration, String> {
        match self {
            TimePoint::Offset(d) => Ok(d),
            TimePoint::Mark(n) => rec.mark_offset(n),
        }
    }
}

impl std::fmt::Display for TimePoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimePoint::Offset(d) => {
                let s = d.as_secs();
                if s >= 3600 {
                    write!(f, "{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                } else {
                    write!(f, "{}:{:02}", s / 60, s % 60)
                }
            }
            TimePoint::Mark(n) => write!(f, "mark:{n}"),
        }
    }
}

/// Resolves an optional range's ends; the end must come after the start.
pub fn resolve_range(
    rec: &Recording,
    from: Option<TimePoint>,
    to: Option<TimePoint>,
) -> Result<(Option<Duration>, Option<Duration>), String> {
    let from = from.map(|t| t.resolve(rec)).transpose()?;
    let to = to.map(|t| t.resolve(rec)).transpose()?;
    if let (Some(f), Some(t)) = (from, to) {
        if t <= f {
            return Err("the range's end must be after its start".into());
        }
    }
    Ok((from, to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_and_offsets_parse() {
        assert_eq!(TimePoint::parse("mark:2"), Ok(TimePoint::Mark(2)));
        assert_eq!(TimePoint::parse("90"), Ok(TimePoint::Offset(Duration::from_secs(90))));
        assert_eq!(TimePoint::parse("1:30"), Ok(TimePoint::Offset(Duration::from_secs(90))));
        assert!(TimePoint::parse("mark:0").is_err());
        assert!(TimePoint::parse("mark:").is_err());
        assert!(TimePoint::parse("mark:x").is_err());
        assert_eq!(TimePoint::Mark(3).to_string(), "mark:3");
    }
}
