//! tracefs: where it is, mounting it, and parsing an event's `format` file.
//!
//! A tracepoint's record layout (which fields, at which offsets) changes between kernel versions,
//! so the probes never hard-code it: userspace reads `events/CATEGORY/EVENT/format` and hands the
//! offsets to the program. The format file looks like this (fields are separated by tabs):
//!
//! ```text
//! name: block_rq_issue
//! ID: 2104
//! format:
//!     field:unsigned short common_type;    offset:0;    size:2;    signed:0;
//!     ...
//!     field:char rwbs[10];    offset:34;    size:10;    signed:0;
//!
//! print fmt: "..."
//! ```

use std::ffi::CString;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

/// Where tracefs lives on current kernels; `/sys/kernel/debug/tracing` is the legacy place (under
/// debugfs), which aya also looks at when attaching.
pub const TRACEFS_MOUNT: &str = "/sys/kernel/tracing";
const LEGACY_TRACEFS: &str = "/sys/kernel/debug/tracing";

/// One `field:` line of a format file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldFormat {
    /// The field's name without array brackets: `rwbs` for `char rwbs[10]`.
    pub name: String,
    /// The C declaration before the name, as written: `unsigned int`, `char`, `__data_loc char[]`.
    pub c_type: String,
    pub offset: u32,
    pub size: u32,
    pub signed: bool,
}

/// A parsed `events/CATEGORY/EVENT/format` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFormat {
    pub name: String,
    pub id: u32,
    /// In file order, the `common_*` header fields included.
    pub fields: Vec<FieldFormat>,
}

impl EventFormat {
    /// The field called `name`, or an error naming the event and the fields it does have (so a
    /// kernel that renamed a field gives a message that says so).
    pub fn field(&self, name: &str) -> Result<&FieldFormat> {
        self.fields.iter().find(|f| f.name == name).ok_or_else(|| {
            let known: Vec<&str> = self.fields.iter().map(|f| f.name.as_str()).collect();
            anyhow!("tracepoint {} has no field `{name}` (it has: {})", self.name, known.join(", "))
        })
    }

    /// The field called `name`, checked to be exactly `size` bytes: the program reads it with a
    /// fixed-size load, so another size would read garbage.
    pub fn field_sized(&self, name: &str, size: u32) -> Result<&FieldFormat> {
        let f = self.field(name)?;
        if f.size != size {
            bail!("tracepoint {} field `{name}` is {} bytes, expected {size}", self.name, f.size);
        }
        Ok(f)
    }
}

/// Parses the text of a format file.
pub fn parse_format(text: &str) -> Result<EventFormat> {
    let mut name = None;
    let mut id = None;
    let mut fields = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(v) = line.strip_prefix("name:") {
            name = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("ID:") {
            id = Some(v.trim().parse().with_context(|| format!("line {}: bad ID `{}`", i + 1, v.trim()))?);
        } else if line.starts_with("field:") {
            fields.push(parse_field(line).with_context(|| format!("line {}: `{line}`", i + 1))?);
        } else if line.starts_with("print fmt:") {
            break;
        }
    }
    let name = name.ok_or_else(|| anyhow!("no `name:` line: not a tracefs format file"))?;
    let id = id.ok_or_else(|| anyhow!("no `ID:` line in the format of {name}"))?;
    if fields.is_empty() {
        bail!("no `field:` lines in the format of {name}");
    }
    Ok(EventFormat { name, id, fields })
}

/// `field:unsigned int bytes; offset:28; size:4; signed:0;`
fn parse_field(line: &str) -> Result<FieldFormat> {
    let mut decl = None;
    let (mut offset, mut size, mut signed) = (None, None, None);
    for part in line.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once(':').ok_or_else(|| anyhow!("`{part}` is not key:value"))?;
        let value = value.trim();
        match key.trim() {
            "field" => decl = Some(value),
            "offset" => offset = Some(value.parse().with_context(|| format!("bad offset `{value}`"))?),
            "size" => size = Some(value.parse().with_context(|| format!("bad size `{value}`"))?),
            "signed" => signed = Some(value == "1"),
            // Unknown keys are ignored: newer kernels may add some.
            _ => {}
        }
    }
    let decl = decl.ok_or_else(|| anyhow!("no field declaration"))?;
    let (c_type, name) = split_declaration(decl)?;
    Ok(FieldFormat {
        name,
        c_type,
        offset: offset.ok_or_else(|| anyhow!("no offset"))?,
        size: size.ok_or_else(|| anyhow!("no size"))?,
        signed: signed.ok_or_else(|| anyhow!("no signed"))?,
    })
}

/// `unsigned int bytes` → ("unsigned int", "bytes"); `char rwbs[10]` → ("char", "rwbs");
/// `__data_loc char[] cmd` → ("__data_loc char[]", "cmd").
fn split_declaration(decl: &str) -> Result<(String, String)> {
    let (c_type, last) =
        decl.rsplit_once(char::is_whitespace).ok_or_else(|| anyhow!("no type in `{decl}`"))?;
    let name = last.split('[').next().unwrap_or(last);
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        bail!("bad field name in `{decl}`");
    }
    Ok((c_type.trim().to_string(), name.to_string()))
}

/// Whether tracefs can be used, as far as can be told before trying.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TracefsState {
    /// Mounted and readable here.
    Readable(PathBuf),
    /// Mounted, but this process may not read it (tracefs is root-only by default); the error text.
    Unreadable(PathBuf, String),
    /// Not mounted at either place.
    Absent,
}

/// Looks for tracefs at /sys/kernel/tracing, then at the legacy debugfs place. A candidate counts
/// when /proc/self/mounts lists tracefs there or the directory has entries (the kernel creates
/// /sys/kernel/tracing as an empty mount point even when nothing is mounted, and the debugfs one
/// is an automount that appears in the mount table only once used).
pub fn state() -> TracefsState {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    for candidate in [TRACEFS_MOUNT, LEGACY_TRACEFS] {
        let path = PathBuf::from(candidate);
        if !mount_table_has_tracefs(&mounts, candidate) && !is_populated(&path) {
            continue;
        }
        return match fs::read_dir(&path) {
            Ok(_) => TracefsState::Readable(path),
            Err(e) => TracefsState::Unreadable(path, e.to_string()),
        };
    }
    TracefsState::Absent
}

/// True when a /proc/mounts text has a tracefs mounted at `dir`.
fn mount_table_has_tracefs(mounts: &str, dir: &str) -> bool {
    mounts.lines().any(|line| {
        let mut fields = line.split_whitespace();
        let (_source, target, fstype) = (fields.next(), fields.next(), fields.next());
        target == Some(dir) && fstype == Some("tracefs")
    })
}

fn is_populated(dir: &Path) -> bool {
    fs::read_dir(dir).map(|mut entries| entries.next().is_some()).unwrap_or(false)
}

/// Mounts tracefs at /sys/kernel/tracing (`mount -t tracefs nodev /sys/kernel/tracing`); needs
/// CAP_SYS_ADMIN.
pub fn mount() -> Result<PathBuf> {
    let target = CString::new(TRACEFS_MOUNT).expect("no NUL in a constant");
    let fstype = CString::new("tracefs").expect("no NUL in a constant");
    let source = CString::new("nodev").expect("no NUL in a constant");
    // SAFETY: valid NUL-terminated strings, no data argument.
    let rc = unsafe { libc::mount(source.as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        bail!("mounting tracefs at {TRACEFS_MOUNT} failed: {err}");
    }
    if !is_populated(Path::new(TRACEFS_MOUNT)) {
        bail!("mounted tracefs at {TRACEFS_MOUNT} but it is empty");
    }
    Ok(PathBuf::from(TRACEFS_MOUNT))
}

/// The reading loop of a layout that takes one field set per probe: reads each probe's format file
/// with `read(category, event)` and fills the probe's part of the layout with `fill(index, text)`.
/// Returns, per probe in order, Ok or why it cannot be attached (the whole error chain, one line).
pub fn fill_per_probe(
    probes: impl IntoIterator<Item = (&'static str, &'static str)>,
    mut read: impl FnMut(&'static str, &'static str) -> Result<String>,
    mut fill: impl FnMut(usize, &str) -> Result<()>,
) -> Vec<Result<(), String>> {
    probes
        .into_iter()
        .enumerate()
        .map(|(i, (category, event))| {
            read(category, event).and_then(|t| fill(i, &t)).map_err(|e| format!("{e:#}"))
        })
        .collect()
}

/// Reads and parses `TRACEFS/events/CATEGORY/EVENT/format`.
pub fn read_event_format(tracefs: &Path, category: &str, event: &str) -> Result<EventFormat> {
    let path = tracefs.join("events").join(category).join(event).join("format");
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse_format(&text).with_context(|| format!("parsing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tracefs").join(name);
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn parses_block_rq_issue_of_linux_6_18() {
        let f = parse_format(&fixture("block_rq_issue-6.18.format")).unwrap();
        assert_eq!(f.name, "block_rq_issue");
        assert_eq!(f.id, 2104);
        assert_eq!(f.fields.len(), 12);
        assert_eq!(
            f.field("common_pid").unwrap(),
            &FieldFormat {
                name: "common_pid".into(),
                c_type: "int".into(),
                offset: 4,
                size: 4,
                signed: true
            }
        );
        assert_eq!(
            f.field("dev").unwrap(),
            &FieldFormat { name: "dev".into(), c_type: "dev_t".into(), offset: 8, size: 4, signed: false }
        );
        assert_eq!(f.field("bytes").unwrap().offset, 28);
        let rwbs = f.field("rwbs").unwrap();
        assert_eq!((rwbs.c_type.as_str(), rwbs.offset, rwbs.size), ("char", 34, 10));
        let cmd = f.field("cmd").unwrap();
        assert_eq!((cmd.c_type.as_str(), cmd.offset, cmd.size), ("__data_loc char[]", 60, 4));
    }

    #[test]
    fn parses_an_older_layout_with_different_offsets() {
        // Linux 5.4: no ioprio field, so rwbs and comm sit 2 bytes earlier than on 6.18.
        let f = parse_format(&fixture("block_rq_issue-5.4.format")).unwrap();
        assert_eq!(f.id, 1046);
        assert_eq!(f.field("dev").unwrap().offset, 8);
        assert_eq!(f.field("bytes").unwrap().offset, 28);
        assert_eq!(f.field("rwbs").unwrap().offset, 32);
        assert_eq!(f.field("rwbs").unwrap().size, 8);
        assert!(f.field("ioprio").is_err());
    }

    #[test]
    fn missing_field_error_lists_the_fields_there_are() {
        let f = parse_format(&fixture("block_rq_complete-6.18.format")).unwrap();
        let err = f.field("bytes").unwrap_err().to_string();
        assert!(err.contains("block_rq_complete has no field `bytes`"), "{err}");
        assert!(err.contains("nr_sector, error"), "{err}");
    }

    #[test]
    fn field_sized_rejects_a_size_change() {
        let f = parse_format(&fixture("block_rq_issue-6.18.format")).unwrap();
        assert!(f.field_sized("bytes", 4).is_ok());
        let err = f.field_sized("sector", 4).unwrap_err().to_string();
        assert!(err.contains("`sector` is 8 bytes, expected 4"), "{err}");
    }

    #[test]
    fn rejects_text_that_is_not_a_format_file() {
        assert!(parse_format("hello\n").unwrap_err().to_string().contains("not a tracefs format file"));
        let no_fields = "name: x\nID: 3\nformat:\n\nprint fmt: \"\"\n";
        assert!(parse_format(no_fields).unwrap_err().to_string().contains("no `field:` lines"));
        let bad_offset = "name: x\nID: 3\nformat:\n\tfield:int a;\toffset:z;\tsize:4;\tsigned:1;\n";
        let err = format!("{:#}", parse_format(bad_offset).unwrap_err());
        assert!(err.contains("line 4") && err.contains("bad offset `z`"), "{err}");
    }

    #[test]
    fn mount_table_lookup_wants_tracefs_at_that_place() {
        let mounts = "sysfs /sys sysfs rw 0 0\nnodev /sys/kernel/tracing tracefs rw,relatime 0 0\n\
                      debugfs /sys/kernel/debug debugfs rw 0 0\n";
        assert!(mount_table_has_tracefs(mounts, "/sys/kernel/tracing"));
        assert!(!mount_table_has_tracefs(mounts, "/sys/kernel/debug/tracing"));
        assert!(!mount_table_has_tracefs("none /sys/kernel/tracing tmpfs rw 0 0\n", "/sys/kernel/tracing"));
        assert!(!mount_table_has_tracefs("", "/sys/kernel/tracing"));
    }

    #[test]
    fn declarations_split_into_type_and_name() {
        assert_eq!(split_declaration("unsigned int bytes").unwrap(), ("unsigned int".into(), "bytes".into()));
        assert_eq!(split_declaration("char rwbs[10]").unwrap(), ("char".into(), "rwbs".into()));
        assert_eq!(
            split_declaration("__data_loc char[] cmd").unwrap(),
            ("__data_loc char[]".into(), "cmd".into())
        );
        assert!(split_declaration("lonely").is_err());
        assert!(split_declaration("int a-b").is_err());
    }
}
