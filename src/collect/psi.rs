//! /proc/pressure/{io,memory}. Hand-parsed rather than with procfs, whose records hold f32 averages
//! (0.12 would become 0.1199999973) and which refuses a file without a `full` line.

use super::read;
use super::root::SystemRoot;
use crate::sample::{Psi, PsiLine, PsiResource};

pub fn read(root: &SystemRoot, files: &mut read::Files) -> Psi {
    let mut resource = |name: &str| files.record(&root.proc.join("pressure").join(name)).and_then(parse);
    Psi { io: resource("io"), memory: resource("memory") }
}

/// Parses "some avg10=0.12 avg60=0.05 avg300=0.01 total=123456\nfull ...". None when there is no
/// valid `some` line (the file exists but PSI is unusable).
pub fn parse(text: &str) -> Option<PsiResource> {
    let mut some = None;
    let mut full = None;
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let slot = match words.next() {
            Some("some") => &mut some,
            Some("full") => &mut full,
            _ => continue,
        };
        let mut parsed = PsiLine::default();
        for word in words {
            let Some((key, value)) = word.split_once('=') else { continue };
            match key {
                "avg10" => parsed.avg10 = value.parse().ok()?,
                "avg60" => parsed.avg60 = value.parse().ok()?,
                "avg300" => parsed.avg300 = value.parse().ok()?,
                "total" => parsed.total_us = value.parse().ok()?,
                _ => {}
            }
        }
        *slot = Some(parsed);
    }
    Some(PsiResource { some: some?, full })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_some_and_full() {
        let r = parse("some avg10=4.35 avg60=1.64 avg300=1.88 total=12476057\nfull avg10=3.90 avg60=1.46 avg300=1.57 total=10418889\n").unwrap();
        assert_eq!(r.some.avg10, 4.35);
        assert_eq!(r.some.total_us, 12476057);
        assert_eq!(r.full.unwrap().avg300, 1.57);
    }

    #[test]
    fn full_line_is_optional_and_some_is_required() {
        assert!(parse("some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n").unwrap().full.is_none());
        assert!(parse("full avg10=0.00 avg60=0.00 avg300=0.00 total=7\n").is_none());
        assert!(parse("some avg10=x avg60=0.00 avg300=0.00 total=7\n").is_none());
    }
}
