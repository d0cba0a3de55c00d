//! Reading untrusted input with bounds: a file read up to a cap (never whole, whatever its size or
//! kind: /dev/zero, a 6 GB file), and a JSON document's element counts checked before it is
//! parsed, since `{}` becomes a whole struct of defaults (hundreds of bytes) and `""` a String
//! (24 bytes): the JSON's size alone does not bound what parsing allocates. The lowest layer:
//! imports nothing of ioscope.

use std::io::Read;
use std::path::Path;

/// Reads at most `cap` bytes of `path`; an error when it holds more. Opens a regular file only
/// (a FIFO, a device or a directory is refused without blocking: [`crate::safe_fs::open_input`]).
pub fn read_capped(path: &Path, cap: u64) -> anyhow::Result<Vec<u8>> {
    let file = crate::safe_fs::open_input(path)?;
    let mut out = Vec::new();
    file.take(cap + 1).read_to_end(&mut out)?;
    if out.len() as u64 > cap {
        anyhow::bail!("it is larger than {} MiB", cap >> 20);
    }
    Ok(out)
}

/// Objects (`{`) and strings outside strings in a JSON text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JsonCounts {
    pub objects: usize,
    pub strings: usize,
}

pub fn json_counts(json: &[u8]) -> JsonCounts {
    let mut c = JsonCounts::default();
    let (mut in_string, mut escaped) = (false, false);
    for &b in json {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
            c.strings += 1;
        } else if b == b'{' {
            c.objects += 1;
        }
    }
    c
}

/// Refuses a JSON text with more objects or strings than `limits` (what a real document of its
/// kind holds, with a wide margin).
pub fn check_json(json: &[u8], limits: JsonCounts) -> Result<(), String> {
    let c = json_counts(json);
    if c.objects > limits.objects {
        return Err(format!("{} objects (at most {} expected)", c.objects, limits.objects));
    }
    if c.strings > limits.strings {
        return Err(format!("{} strings (at most {} expected)", c.strings, limits.strings));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_skip_what_is_inside_strings() {
        assert_eq!(json_counts(br#"{"a":"{\"}","b":[{},{}]}"#), JsonCounts { objects: 3, strings: 3 });
        assert!(check_json(b"[{},{},{}]", JsonCounts { objects: 2, strings: 0 }).is_err());
        assert!(check_json(b"[{},{}]", JsonCounts { objects: 2, strings: 0 }).is_ok());
    }

    #[test]
    fn reading_stops_at_the_cap_and_devices_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::File::create(&big).unwrap().set_len(4 << 20).unwrap();
        let err = read_capped(&big, 1 << 20).unwrap_err();
        assert!(err.to_string().contains("larger than 1 MiB"), "{err}");
        assert_eq!(read_capped(&big, 4 << 20).unwrap().len(), 4 << 20);
        for p in ["/dev/zero", "/"] {
            let err = read_capped(Path::new(p), 10).unwrap_err();
            assert!(err.to_string().contains("not a regular file"), "{err}");
        }
    }
}
