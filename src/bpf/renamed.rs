//! Tracepoints renamed across kernel versions with the same record: a program on the newer name
//! attaches to the older one where the kernel has only that (ebpf/README.md). Only renames whose
//! fields keep their names and types are listed, so the layout read from either format file
//! means the same thing.

use std::path::Path;

use aya::programs::TracePoint;
use aya::Ebpf;

use super::tracefs;
use crate::sample::BpfProgramStatus;

/// (category, event, its older name):
/// - `writeback_dirty_folio` was `writeback_dirty_page` before the folio conversion (Linux 5.17);
///   both record `name`, `ino` and `index` of the page (5.10: one page per event, as a folio of
///   one page later).
/// - `iomap_writeback_folio` (6.17+) was `iomap_writepage`, raised in the same place (where iomap
///   writes one dirty folio back: `iomap_do_writepage()` in 6.1, `iomap_writepage_map()` in 6.12)
///   with the same arguments (inode, `folio_pos()`, `folio_size()`) and the same record (`dev`,
///   `ino`, `size`, `offset`, `length`, of iomap's range class). Before folios (5.10) its
///   `offset` was an `unsigned long` and `length` an `unsigned int` (`page_offset()`,
///   `PAGE_SIZE`): super::files reads either size.
const RENAMED: [(&str, &str, &str); 2] = [
    ("writeback", "writeback_dirty_folio", "writeback_dirty_page"),
    ("iomap", "iomap_writeback_folio", "iomap_writepage"),
];

/// The names `category:event` has had, newest first.
pub fn names(category: &str, event: &'static str) -> Vec<&'static str> {
    let mut v = vec![event];
    v.extend(RENAMED.iter().filter(|(c, e, _)| *c == category && *e == event).map(|(_, _, old)| *old));
    v
}

/// The format file of `category:event` under the first of its [`names`] the kernel has, and that
/// name; the newest name's error when none is there.
pub fn read_format(
    tracefs_dir: &Path,
    category: &str,
    event: &'static str,
) -> anyhow::Result<(String, &'static str)> {
    let read = |name: &str| {
        std::fs::read_to_string(tracefs_dir.join("events").join(category).join(name).join("format"))
    };
    let mut first_err = None;
    for name in names(category, event) {
        match read(name) {
            Ok(text) => return Ok((text, name)),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    Err(anyhow::anyhow!(
        "tracepoint {category}:{event} is not available on this kernel: {}",
        first_err.map_or_else(String::new, |e| e.to_string())
    ))
}

/// [`tracefs::read_event_format`] under the first name the kernel has.
pub fn read_event_format(
    tracefs_dir: &Path,
    category: &str,
    event: &'static str,
) -> anyhow::Result<tracefs::EventFormat> {
    let (text, _) = read_format(tracefs_dir, category, event)?;
    tracefs::parse_format(&text)
}

/// Loads `program` and attaches it to `category:event`, or where the kernel lacks that name, to
/// its older name (the status then names both).
pub fn attach_tracepoint(
    ebpf: &mut Ebpf,
    program: &str,
    category: &str,
    event: &'static str,
) -> BpfProgramStatus {
    let names = names(category, event);
    if names.len() == 1 {
        return super::attach::attach_tracepoint(ebpf, program, category, event);
    }
    let mut attached_to = event;
    let result = (|| -> anyhow::Result<()> {
        super::preload::load(ebpf, program, super::preload::How::TracePoint)?;
        let tp = super::attach::program_of::<TracePoint>(ebpf, program)?;
        let mut first_err = None;
        for name in &names {
            match tp.attach(category, name) {
                Ok(_) => {
                    attached_to = name;
                    return Ok(());
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        Err(first_err.map_or_else(|| anyhow::anyhow!("no event"), anyhow::Error::from))
    })();
    let mut status =
        super::attach::program_status(program, category, attached_to, result.map_err(|e| format!("{e:#}")));
    if attached_to != event {
        status.fallback_for = Some(format!("{category}:{event}"));
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dirty_folio_event_had_a_page_name() {
        assert_eq!(
            names("writeback", "writeback_dirty_folio"),
            ["writeback_dirty_folio", "writeback_dirty_page"]
        );
        assert_eq!(names("filemap", "mm_filemap_fault"), ["mm_filemap_fault"]);
    }

    #[test]
    fn the_older_name_is_read_where_the_newer_is_missing() {
        let dir = std::env::temp_dir().join(format!("ioscope-renamed-{}", std::process::id()));
        let ev = dir.join("events/writeback/writeback_dirty_page");
        std::fs::create_dir_all(&ev).unwrap();
        std::fs::write(ev.join("format"), "name: writeback_dirty_page\n").unwrap();
        let (text, name) = read_format(&dir, "writeback", "writeback_dirty_folio").unwrap();
        assert_eq!((text.as_str(), name), ("name: writeback_dirty_page\n", "writeback_dirty_page"));
        let err = read_format(&dir, "writeback", "no_such_event").unwrap_err();
        assert!(format!("{err:#}").contains("writeback:no_such_event is not available"), "{err:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
