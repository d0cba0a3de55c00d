//! Where the collectors read: [`SystemRoot`], the real /proc and /sys or a fixture's copies.

use std::path::{Path, PathBuf};

use super::read;

/// Where /proc and /sys are: the real ones live, fixture directories in tests.
#[derive(Clone, Debug)]
pub struct SystemRoot {
    pub proc: PathBuf,
    pub sys: PathBuf,
}

/// The page size assumed for a fixture root that does not record its own.
pub const FIXTURE_DEFAULT_PAGE_SIZE: u64 = 4096;

impl SystemRoot {
    pub fn live() -> Self {
        SystemRoot { proc: PathBuf::from("/proc"), sys: PathBuf::from("/sys") }
    }

    /// A fixture snapshot: `dir/proc` and `dir/sys`.
    pub fn fixture(dir: impl AsRef<Path>) -> Self {
        let dir = dir.as_ref();
        SystemRoot { proc: dir.join("proc"), sys: dir.join("sys") }
    }

    /// These files are the running machine's (/proc itself, not a fixture): what they print may
    /// be asked of the kernel directly.
    pub fn is_live(&self) -> bool {
        self.proc == Path::new("/proc")
    }

    /// The page size of the machine these files describe. Live it is `sysconf(_SC_PAGESIZE)`; a
    /// fixture cannot be asked, so it may carry a `page_size` file next to its `proc` directory
    /// (default 4096, the page size of the machine the fixtures were captured on).
    pub fn page_size(&self) -> u64 {
        if self.is_live() {
            // SAFETY: sysconf has no preconditions; it returns -1 only for an unknown name.
            let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            if size > 0 {
                return size as u64;
            }
        }
        let recorded = self.proc.parent().and_then(|dir| read::u64_file(&dir.join("page_size")));
        recorded.unwrap_or(FIXTURE_DEFAULT_PAGE_SIZE)
    }
}
