//! Per-process identity and I/O counters from /proc/PID/{stat,comm,io}.
//!
//! Cost matters here: the kernel spends several microseconds per open() of a /proc/PID file and
//! more to format /proc/PID/stat, and a machine has hundreds of processes. So a [`ProcessReader`]
//! that lives across samples keeps each process's `comm` and `io` files open and re-reads them with
//! pread: /proc/PID/stat (for the start time) is read once per process, open() happens once per
//! process. An open /proc/PID file stays bound to the process it was opened for: once that process
//! exits, reads fail (ESRCH) even if the pid is reused, so a cached entry never mixes two processes.
//!
//! `comm` is re-read only when the io counters moved since the last sample, or after
//! [`COMM_REFRESH`] samples: an exec always moves them (the kernel reads the new program's header
//! with `kernel_read`, which counts in `syscr` and `rchar` before the new name is set), so a
//! process that did nothing keeps its name, and only a rename without I/O (`prctl(PR_SET_NAME)`,
//! a write to /proc/PID/comm) is seen up to that many samples late. That halves the reads of an
//! idle machine's hundreds of processes. Where `io` is unreadable, `comm` is read every sample.
//!
//! At sub-second intervals [`ProcessReader::read_sampled`] does a full pass (list /proc, re-read
//! every process) only once per [`FULL_PASS_NS`]; the samples in between re-read only the
//! processes whose counters moved at their last read and those the caller names as active (the
//! eBPF maps saw them do I/O), and a process new to the list is read at once when it is named.
//! The others' counters are carried with the time they were read (`ProcessIo::io_read_ns`), so
//! the model divides a delta by the time it took, not by the interval. A process that exited
//! between two full passes stays listed until the next one (or until it is re-read).
//!
//! While the eBPF maps watch (`watched`: the page-cache programs see every read, write, fault and
//! dirtied page of a file, the block programs every request, each credited to its process), a
//! full pass also carries the processes whose counters stood still at their last
//! [`STILL_READS`] reads and that the maps did not name: each is re-read every
//! [`STILL_PASS_EVERY`]th pass (~5 s), at once when named. On an idle machine most processes are
//! such (kernel threads, sleeping daemons), and their reads were most of a full pass. What the
//! maps do not see, I/O on pipes and sockets (`rchar`, `wchar`) of a process idle until then,
//! shows up to that much later, averaged over the time since its last read.
//!
//! A process's /proc/PID/io is not only its own I/O: the kernel adds to it the totals of each
//! thread that ends and of each child it reaps (`wait_task_zombie` adds the child's counters to
//! the parent's). So when its counters move (and at its first read) the reader also sums its
//! threads' own counters, /proc/PID/task/TID/io, plus the last counters read of its threads that
//! ended: `ProcessIo::own`. It reads io, the threads, io again (up to three times, until io stood
//! still while the threads were read) and records how far io moved in `own_slack`. When a
//! process leaves the list, its parent (its nearest ancestor still listed) is read again after
//! that, so the parent's counters in the sample already hold what the kernel added when it reaped
//! the child. A process whose parent is no longer listed has its `ppid` read again (it was
//! reparented).

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use procfs::process::Stat;
use procfs::FromRead;

use crate::sample::{ProcIoCounters, ProcessIo};
use crate::util::pread_whole;

/// File descriptors kept free for everything else ioscope opens.
const FD_HEADROOM: u64 = 256;
/// A kept-open process whose io counters did not move has its `comm` re-read after this many
/// samples anyway (see the module comment).
pub const COMM_REFRESH: u32 = 10;
/// Between full passes of [`ProcessReader::read_sampled`] ([`crate::util::SLOW_REFRESH`]: with its
/// slack a 1 s interval whose samples come a few ms early still gets a full pass every time).
pub const FULL_PASS_NS: u64 = crate::util::SLOW_REFRESH.as_nanos() as u64;
/// While the eBPF maps watch for I/O, a process whose counters stood still at its last
/// [`STILL_READS`] reads is re-read by every [`STILL_PASS_EVERY`]th full pass only (spread over
/// the passes by pid), or at once when the maps name it (see the module comment).
pub const STILL_READS: u32 = 5;
pub const STILL_PASS_EVERY: u32 = 5;

/// Reads all processes; keeps files open between calls (see the module comment).
pub struct ProcessReader {
    open: HashMap<u32, OpenProcess>,
    /// How many processes may hold open files (two each), from RLIMIT_NOFILE.
    max_open: usize,
    buf: Vec<u8>,
    /// The list [`ProcessReader::read_sampled`] returned last, at `last_ns`, and when its last
    /// full pass was (None: none yet).
    last: Vec<ProcessIo>,
    last_ns: u64,
    full_ns: Option<u64>,
    /// Full passes made (which still processes a pass re-reads).
    passes: u32,
    /// The /proc listing, kept open and rewound for each full pass (kept readers only), and the
    /// pids it last gave.
    proc_dir: Option<PidDir>,
    pids: Vec<u32>,
    /// The processes' command lines (kept readers only: read by a worker thread, see
    /// [`super::identity`]) and user names.
    cmdlines: Option<super::identity::Cmdlines>,
    users: super::identity::UserNames,
}

/// A directory stream listing the numeric entries of /proc (the pids), kept open and rewound
/// for each listing: `std::fs::read_dir` allocates two strings per entry, ~250 allocations a
/// listing of an idle machine's /proc, where this allocates none.
struct PidDir {
    dir: std::ptr::NonNull<libc::DIR>,
    path: PathBuf,
}

// SAFETY: the stream is used by one thread at a time (through `&mut self`), as readdir requires.
unsafe impl Send for PidDir {}

impl PidDir {
    fn open(path: &Path) -> Option<PidDir> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
        // SAFETY: `c` is a NUL-terminated path; a null result is handled.
        let dir = std::ptr::NonNull::new(unsafe { libc::opendir(c.as_ptr()) })?;
        Some(PidDir { dir, path: path.to_path_buf() })
    }

    /// The pids listed now, sorted.
    fn pids(&mut self, out: &mut Vec<u32>) {
        out.clear();
        // SAFETY: `dir` is an open stream owned by self; readdir's entry is read before the next
        // call on the stream.
        unsafe {
            libc::rewinddir(self.dir.as_ptr());
            loop {
                let e = libc::readdir(self.dir.as_ptr());
                if e.is_null() {
                    break;
                }
                let name = std::ffi::CStr::from_ptr((*e).d_name.as_ptr()).to_bytes();
                if let Some(pid) = parse_pid(name) {
                    out.push(pid);
                }
            }
        }
        out.sort_unstable();
    }
}

impl Drop for PidDir {
    fn drop(&mut self) {
        // SAFETY: the stream is open and closed only here.
        unsafe { libc::closedir(self.dir.as_ptr()) };
    }
}

/// A /proc entry's name as a pid: decimal digits only, no sign, no leading zero.
fn parse_pid(name: &[u8]) -> Option<u32> {
    if name.is_empty() || name[0] == b'0' || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(name).ok()?.parse().ok()
}

struct OpenProcess {
    start_ticks: u64,
    comm: File,
    /// The name and io counters as last read, and the samples since the name was read.
    last_comm: std::sync::Arc<str>,
    last_io: Option<ProcIoCounters>,
    /// The io counters changed at the last re-read (or the process is new to the reader).
    moved: bool,
    comm_age: u32,
    /// Reads in a row at which the io counters did not move.
    still: u32,
    /// None when /proc/PID/io could not be read (then it is retried each sample: a process's
    /// readability changes when it execs a setuid program or drops privileges).
    io: Option<File>,
    ppid: u32,
    /// The owner of /proc/PID when first read.
    uid: Option<u32>,
    /// The threads' own counters as last read, and the process's `own` and `own_slack`.
    tasks: Tasks,
    last_own: Option<ProcIoCounters>,
    last_slack: Option<ProcIoCounters>,
}

/// A process's threads (tid, own counters as last read, sorted by tid) and the sum of the last
/// counters read of its threads that ended.
#[derive(Default)]
struct Tasks {
    live: Vec<(u32, ProcIoCounters)>,
    ended: ProcIoCounters,
}

impl ProcessReader {
    /// A reader that keeps files open across samples, as many as RLIMIT_NOFILE comfortably allows.
    pub fn new() -> ProcessReader {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: `lim` is a valid, writable rlimit.
        let soft =
            if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 { lim.rlim_cur } else { 0 };
        let max_open = (soft.saturating_sub(FD_HEADROOM) / 2) as usize;
        ProcessReader::with_max_open(max_open)
    }

    fn with_max_open(max_open: usize) -> ProcessReader {
        ProcessReader {
            open: HashMap::new(),
            max_open,
            buf: Vec::with_capacity(4096),
            last: Vec::new(),
            last_ns: 0,
            full_ns: None,
            passes: 0,
            proc_dir: None,
            pids: Vec::new(),
            cmdlines: (max_open > 0).then(super::identity::Cmdlines::new),
            users: super::identity::UserNames::new(Path::new("/etc/passwd")),
        }
    }

    /// A reader that opens, reads and closes every file: for one-off reads and fixtures.
    pub fn one_shot() -> ProcessReader {
        ProcessReader::with_max_open(0)
    }

    /// [`ProcessReader::read`] for a sampler whose sample is stamped `now_ns` (CLOCK_MONOTONIC):
    /// a full pass once per [`FULL_PASS_NS`], in between only the processes whose counters moved
    /// at their last read and the pids in `active` (sorted); `watched`: the eBPF maps name every
    /// process doing file or disk I/O in `active`, so full passes may carry the still ones (see
    /// the module comment).
    pub fn read_sampled(
        &mut self,
        proc: &Path,
        now_ns: u64,
        active: &[u32],
        watched: bool,
    ) -> Vec<ProcessIo> {
        let full = match self.full_ns {
            None => true,
            Some(t) => now_ns.saturating_sub(t) >= FULL_PASS_NS,
        };
        let mut out = if full {
            self.full_ns = Some(now_ns);
            self.passes = self.passes.wrapping_add(1);
            let carry = watched.then_some(active);
            self.read_full(proc, carry)
        } else {
            self.read_partial(proc, active)
        };
        let last = std::mem::take(&mut self.last);
        self.reread_ancestors_of_gone(proc, &last, &mut out);
        self.identify(proc, &mut out);
        self.last.clone_from(&out);
        self.last_ns = now_ns;
        out
    }

    /// Each process's user name and command line (as far as read: see [`super::identity`]).
    fn identify(&mut self, proc: &Path, out: &mut [ProcessIo]) {
        if let Some(c) = self.cmdlines.as_mut() {
            let keys: Vec<(u32, u64)> = out.iter().map(|p| (p.pid, p.start_ticks)).collect();
            c.update(&keys);
            for p in out.iter_mut() {
                p.cmdline = c.get(proc, p.pid, p.start_ticks, &p.comm);
            }
        }
        for p in out.iter_mut() {
            p.user = p.uid.map(|uid| self.users.name(uid));
        }
    }

    /// The samples between full passes: re-reads the moving and the active, carries the rest.
    fn read_partial(&mut self, proc: &Path, active: &[u32]) -> Vec<ProcessIo> {
        let last = std::mem::take(&mut self.last);
        let mut out = Vec::with_capacity(last.len() + 8);
        for mut p in last {
            let named = active.contains(&p.pid);
            let moved = self.open.get(&p.pid).is_some_and(|e| e.moved);
            if !named && !moved {
                p.io_read_ns.get_or_insert(self.last_ns);
                out.push(p);
                continue;
            }
            let cached = match self.open.get_mut(&p.pid) {
                Some(entry) => reread(entry, p.pid, proc, &mut self.buf),
                None => None,
            };
            let process = match cached {
                Some(p) => Some(p),
                None => {
                    self.open.remove(&p.pid);
                    self.read_new(p.pid, proc)
                }
            };
            out.extend(process);
        }
        // Named processes the list does not have yet (started since the last full pass).
        let new: Vec<ProcessIo> = active
            .iter()
            .filter(|&&pid| out.binary_search_by_key(&pid, |p| p.pid).is_err())
            .filter_map(|&pid| self.read_new(pid, proc))
            .collect();
        if !new.is_empty() {
            out.extend(new);
            out.sort_unstable_by_key(|p| p.pid);
            out.dedup_by_key(|p| p.pid);
        }
        out
    }

    /// All processes under `proc`, sorted by pid. A process that exits while we read it is skipped;
    /// one whose io file we may not read (another user's, without privileges) is kept with `io: None`.
    pub fn read(&mut self, proc: &Path) -> Vec<ProcessIo> {
        let mut out = self.read_full(proc, None);
        if self.max_open > 0 {
            let last = std::mem::take(&mut self.last);
            self.reread_ancestors_of_gone(proc, &last, &mut out);
            self.identify(proc, &mut out);
            self.last.clone_from(&out);
        } else {
            self.identify(proc, &mut out);
        }
        out
    }

    /// Reads again, through its open files, the nearest listed ancestor of each process of `last`
    /// that `out` no longer has (see the module comment).
    fn reread_ancestors_of_gone(&mut self, proc: &Path, last: &[ProcessIo], out: &mut [ProcessIo]) {
        let listed = |out: &[ProcessIo], p: &ProcessIo| {
            out.binary_search_by_key(&p.pid, |o| o.pid).is_ok_and(|i| out[i].start_ticks == p.start_ticks)
        };
        let mut ancestors: Vec<u32> = Vec::new();
        for gone in last.iter().filter(|p| !listed(out, p)) {
            let mut ppid = gone.ppid;
            // Up through the parents that left too (a shell and the children it reaped).
            for _ in 0..64 {
                match last.binary_search_by_key(&ppid, |p| p.pid) {
                    Ok(i) if !listed(out, &last[i]) && ppid != 0 => ppid = last[i].ppid,
                    _ => break,
                }
            }
            if ppid != 0 {
                ancestors.push(ppid);
            }
        }
        ancestors.sort_unstable();
        ancestors.dedup();
        for pid in ancestors {
            let Ok(i) = out.binary_search_by_key(&pid, |o| o.pid) else { continue };
            let Some(entry) = self.open.get_mut(&pid) else { continue };
            if let Some(p) = reread(entry, pid, proc, &mut self.buf) {
                out[i] = p;
            }
        }
    }

    /// A full pass; with `carry` (the processes named active, sorted), the still processes not
    /// named and not due this pass keep their last row.
    fn read_full(&mut self, proc: &Path, carry: Option<&[u32]>) -> Vec<ProcessIo> {
        if self.proc_dir.as_ref().is_none_or(|d| d.path != proc) {
            self.proc_dir = PidDir::open(proc);
        }
        let Some(dir) = self.proc_dir.as_mut() else { return Vec::new() };
        let mut pids = std::mem::take(&mut self.pids);
        dir.pids(&mut pids);
        if self.max_open == 0 {
            // A one-shot reader keeps nothing open (a fixture tree may be replaced).
            self.proc_dir = None;
        }
        // Forget processes that are gone (their files close here).
        self.open.retain(|pid, _| pids.binary_search(pid).is_ok());

        // The rows to carry (given back to self.last after the pass).
        let last = std::mem::take(&mut self.last);
        let mut out = Vec::with_capacity(pids.len());
        for &pid in &pids {
            if let Some(active) = carry {
                let still = self.open.get(&pid).is_some_and(|e| e.still >= STILL_READS);
                let due = (self.passes.wrapping_add(pid)) % STILL_PASS_EVERY == 0;
                if still && !due && active.binary_search(&pid).is_err() {
                    if let Ok(i) = last.binary_search_by_key(&pid, |p| p.pid) {
                        let mut p = last[i].clone();
                        p.io_read_ns.get_or_insert(self.last_ns);
                        out.push(p);
                        continue;
                    }
                }
            }
            let cached = match self.open.get_mut(&pid) {
                Some(entry) => reread(entry, pid, proc, &mut self.buf),
                None => None,
            };
            let process = match cached {
                Some(p) => Some(p),
                None => {
                    self.open.remove(&pid);
                    self.read_new(pid, proc)
                }
            };
            out.extend(process);
        }
        // A process whose parent left was reparented (to init or a subreaper): its ppid again.
        for p in out.iter_mut().filter(|p| p.ppid != 0 && pids.binary_search(&p.ppid).is_err()) {
            if let Ok(stat) = Stat::from_file(proc.join(p.pid.to_string()).join("stat")) {
                p.ppid = u32::try_from(stat.ppid).unwrap_or(0);
                if let Some(entry) = self.open.get_mut(&p.pid) {
                    entry.ppid = p.ppid;
                }
            }
        }
        self.pids = pids;
        self.last = last;
        out
    }

    /// First read of a process: stat for comm and start time, then io; keeps comm and io open when
    /// the fd budget allows.
    fn read_new(&mut self, pid: u32, proc: &Path) -> Option<ProcessIo> {
        let dir = proc.join(pid.to_string());
        // procfs finds comm between the first '(' and the *last* ')', so a comm holding spaces or
        // ')' (e.g. "a) b") parses correctly.
        let stat = Stat::from_file(dir.join("stat")).ok()?;
        let ppid = u32::try_from(stat.ppid).unwrap_or(0);
        let uid = std::fs::metadata(&dir).ok().map(|m| std::os::unix::fs::MetadataExt::uid(&m));
        let io_file = File::open(dir.join("io")).ok();
        let io = io_file.as_ref().and_then(|f| read_io(f, &mut self.buf));
        let mut tasks = Tasks::default();
        let (io, own, own_slack) = match (io, &io_file) {
            (Some(io), Some(f)) => {
                let (io, own, slack) = read_with_own(f, io, proc, pid, &mut tasks, &mut self.buf);
                (Some(io), own, slack)
            }
            (io, _) => (io, None, None),
        };
        if self.open.len() < self.max_open {
            if let Ok(comm) = File::open(dir.join("comm")) {
                let entry = OpenProcess {
                    start_ticks: stat.starttime,
                    comm,
                    last_comm: stat.comm.as_str().into(),
                    last_io: io.clone(),
                    moved: true,
                    comm_age: 0,
                    still: 0,
                    io: if io.is_some() { io_file } else { None },
                    ppid,
                    uid,
                    tasks,
                    last_own: own.clone(),
                    last_slack: own_slack.clone(),
                };
                self.open.insert(pid, entry);
            }
        }
        Some(ProcessIo {
            pid,
            comm: stat.comm.into(),
            start_ticks: stat.starttime,
            io,
            io_read_ns: None,
            ppid,
            own,
            own_slack,
            uid,
            user: None,
            cmdline: None,
        })
    }
}

impl Default for ProcessReader {
    fn default() -> Self {
        ProcessReader::new()
    }
}

/// Re-reads a process through its open files. None when the process is gone (or became
/// unreadable), which sends the caller to a fresh read.
fn reread(entry: &mut OpenProcess, pid: u32, proc: &Path, buf: &mut Vec<u8>) -> Option<ProcessIo> {
    let io = match &entry.io {
        Some(f) => match pread_whole(f, buf) {
            Ok(bytes) => Some(parse_io(bytes)?),
            // The process exited between the two reads.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return None,
            Err(_) => {
                entry.io = None;
                None
            }
        },
        None => {
            // Retry: readability can change (setuid exec, dropped privileges).
            let f = File::open(io_path(proc, pid)).ok();
            let io = f.as_ref().and_then(|f| read_io(f, buf));
            if io.is_some() {
                entry.io = f;
            }
            io
        }
    };
    // The name again unless the counters say nothing happened (and it is not due a refresh); the
    // read also tells a process that exited (ESRCH) when io is not readable.
    entry.comm_age += 1;
    if io.is_none() || io != entry.last_io || entry.comm_age >= COMM_REFRESH {
        let comm = pread_whole(&entry.comm, buf).ok()?;
        entry.last_comm = String::from_utf8_lossy(comm.strip_suffix(b"\n").unwrap_or(comm)).into();
        entry.comm_age = 0;
    }
    entry.moved = io != entry.last_io;
    entry.still = if entry.moved { 0 } else { entry.still.saturating_add(1) };
    // The threads again when the counters moved (or were never summed): standing still, the
    // threads did nothing and none that did anything ended.
    let io = match (io, &entry.io) {
        (Some(c), Some(f)) if entry.moved || entry.last_own.is_none() => {
            let (c, own, slack) = read_with_own(f, c, proc, pid, &mut entry.tasks, buf);
            entry.last_own = own;
            entry.last_slack = slack;
            Some(c)
        }
        (io, _) => {
            if io.is_none() {
                entry.last_own = None;
                entry.last_slack = None;
            }
            io
        }
    };
    entry.last_io.clone_from(&io);
    Some(ProcessIo {
        pid,
        comm: entry.last_comm.clone(),
        start_ticks: entry.start_ticks,
        io,
        io_read_ns: None,
        ppid: entry.ppid,
        own: entry.last_own.clone(),
        own_slack: entry.last_slack.clone(),
        uid: entry.uid,
        user: None,
        cmdline: None,
    })
}

/// Reads the threads' own counters between two reads of io (`first`, then `f` again), up to three
/// times until io did not move meanwhile: (io as last read, own, how far io moved during the last
/// try if it did). own is None when a thread's counters could not be read.
fn read_with_own(
    f: &File,
    first: ProcIoCounters,
    proc: &Path,
    pid: u32,
    tasks: &mut Tasks,
    buf: &mut Vec<u8>,
) -> (ProcIoCounters, Option<ProcIoCounters>, Option<ProcIoCounters>) {
    let mut before = first;
    let mut moved = ProcIoCounters::default();
    let mut own = None;
    for _ in 0..3 {
        own = read_own(proc, pid, tasks, buf);
        let Some(after) = read_io(f, buf) else { return (before, own, None) };
        moved = after.saturating_sub(&before);
        before = after;
        if moved.is_zero() || own.is_none() {
            return (before, own, None);
        }
    }
    (before, own, Some(moved))
}

/// The sum of the process's threads' own counters (/proc/PID/task/TID/io) and of the last
/// counters read of its threads that ended; updates `tasks`. None when a thread's counters could
/// not be read (permissions) or the process is gone.
fn read_own(proc: &Path, pid: u32, tasks: &mut Tasks, buf: &mut Vec<u8>) -> Option<ProcIoCounters> {
    use std::os::unix::ffi::OsStrExt;
    let task = proc.join(pid.to_string()).join("task");
    let mut live: Vec<(u32, ProcIoCounters)> = Vec::with_capacity(tasks.live.len().max(1));
    for e in std::fs::read_dir(&task).ok()? {
        let Ok(e) = e else { continue };
        let Some(tid) = parse_pid(e.file_name().as_bytes()) else { continue };
        let gone = |e: &std::io::Error| {
            e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH)
        };
        let file = match File::open(e.path().join("io")) {
            Ok(f) => f,
            // The thread ended since the listing.
            Err(e) if gone(&e) => continue,
            Err(_) => return None,
        };
        match pread_whole(&file, buf) {
            Ok(bytes) => live.push((tid, parse_io(bytes)?)),
            Err(e) if gone(&e) => continue,
            Err(_) => return None,
        }
    }
    live.sort_unstable_by_key(|t| t.0);
    for (tid, last) in &tasks.live {
        if live.binary_search_by_key(tid, |t| t.0).is_err() {
            tasks.ended = tasks.ended.saturating_add(last);
        }
    }
    tasks.live = live;
    Some(tasks.live.iter().fold(tasks.ended.clone(), |sum, t| sum.saturating_add(&t.1)))
}

fn io_path(proc: &Path, pid: u32) -> PathBuf {
    proc.join(pid.to_string()).join("io")
}

fn read_io(f: &File, buf: &mut Vec<u8>) -> Option<ProcIoCounters> {
    parse_io(pread_whole(f, buf).ok()?)
}

/// /proc/PID/io: "rchar: 123\nwchar: 45\n...". Hand-parsed: procfs's parser builds a HashMap of
/// owned keys per call, which measured 1.6 µs per process, as much as half the kernel's own cost.
/// None unless all seven counters are present.
fn parse_io(bytes: &[u8]) -> Option<ProcIoCounters> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut io = ProcIoCounters::default();
    let mut seen = 0u8;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else { continue };
        let slot = match key {
            "rchar" => &mut io.rchar,
            "wchar" => &mut io.wchar,
            "syscr" => &mut io.syscr,
            "syscw" => &mut io.syscw,
            "read_bytes" => &mut io.read_bytes,
            "write_bytes" => &mut io.write_bytes,
            "cancelled_write_bytes" => &mut io.cancelled_write_bytes,
            _ => continue,
        };
        *slot = value.trim().parse().ok()?;
        seen += 1;
    }
    (seen == 7).then_some(io)
}

/// Reads every process once, opening and closing each file (no state kept).
pub fn read(proc: &Path) -> Vec<ProcessIo> {
    ProcessReader::one_shot().read(proc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_decimal_names_are_pids() {
        assert_eq!(parse_pid(b"4123"), Some(4123));
        for name in [&b"self"[..], b"", b"0", b"012", b"+5", b"12a", b"99999999999"] {
            assert_eq!(parse_pid(name), None, "{:?}", String::from_utf8_lossy(name));
        }
    }

    /// The kept /proc stream lists what a fresh read_dir does, each time anew: a process started
    /// between two listings is in the second, and gone once reaped.
    #[test]
    fn the_rewound_listing_follows_processes() {
        let fresh = || {
            let mut v: Vec<u32> = std::fs::read_dir("/proc")
                .unwrap()
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect();
            v.sort_unstable();
            v
        };
        let mut dir = PidDir::open(Path::new("/proc")).unwrap();
        let mut pids = Vec::new();
        dir.pids(&mut pids);
        let me = std::process::id();
        assert!(pids.binary_search(&me).is_ok());
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        dir.pids(&mut pids);
        assert!(pids.binary_search(&child.id()).is_ok(), "a new process is listed");
        // Other processes come and go meanwhile: every pid of ours is in both listings.
        let other = fresh();
        assert!(pids.iter().filter(|p| other.binary_search(p).is_err()).count() <= 2);
        child.kill().unwrap();
        child.wait().unwrap();
        dir.pids(&mut pids);
        assert!(pids.binary_search(&child.id()).is_err(), "a reaped process is not");
    }

    #[test]
    fn io_needs_all_seven_counters() {
        let text = b"rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 5\nwrite_bytes: 6\ncancelled_write_bytes: 7\n";
        let io = parse_io(text).unwrap();
        assert_eq!((io.rchar, io.syscw, io.cancelled_write_bytes), (1, 4, 7));
        assert!(parse_io(b"rchar: 1\nwchar: 2\n").is_none());
        assert!(parse_io(b"rchar: x\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 5\nwrite_bytes: 6\ncancelled_write_bytes: 7\n").is_none());
    }
}

#[cfg(test)]
mod live_tests {
    use super::*;
    use std::process::Command;
    use std::time::Duration;

    fn find(all: &[ProcessIo], pid: u32) -> Option<&ProcessIo> {
        all.iter().find(|p| p.pid == pid)
    }

    /// The cached reader must follow a process through exec (same pid and start time, new comm) and
    /// notice when it is gone. Needs only /proc, not root.
    #[test]
    fn cached_reader_follows_exec_and_exit() {
        let proc = Path::new("/proc");
        let mut child = Command::new("sh").args(["-c", "sleep 0.4; exec sleep 30"]).spawn().unwrap();
        let pid = child.id();
        let mut reader = ProcessReader::new();
        let first = find(&reader.read(proc), pid).cloned().expect("child listed");
        assert_eq!(&*first.comm, "sh");
        assert!(first.io.is_some(), "our own child's io is readable");
        std::thread::sleep(Duration::from_millis(900));
        let second = find(&reader.read(proc), pid).cloned().expect("child still listed");
        assert_eq!(&*second.comm, "sleep", "comm is re-read from the open file after exec");
        assert_eq!(second.start_ticks, first.start_ticks);
        assert!(reader.open.contains_key(&pid), "the files stayed open");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(find(&reader.read(proc), pid).is_none());
        assert!(!reader.open.contains_key(&pid), "the files of a gone process are closed");
    }

    /// A rename without I/O (`prctl(PR_SET_NAME)` in a forked child that only polls a flag in
    /// shared memory) is seen within COMM_REFRESH samples, and not re-read before: the name is
    /// kept while the counters stand still.
    #[test]
    fn cached_reader_sees_a_rename_without_io_within_the_refresh() {
        use std::sync::atomic::{AtomicU32, Ordering};
        let proc = Path::new("/proc");
        // SAFETY: a fresh anonymous shared page, unmapped at the end; zero-filled, so a valid
        // AtomicU32 at its start.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(page, libc::MAP_FAILED);
        let flag = unsafe { &*(page as *const AtomicU32) };
        // SAFETY: the child calls only async-signal-safe functions (nanosleep, prctl, _exit) and
        // does no I/O at all; the parent kills and reaps it.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // Every inherited fd closed at once: a test spawning a command on another thread
            // waits for its exec-status pipe, which this copy would otherwise hold open.
            // SAFETY: close_range on our own fds, none of which the child uses.
            unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
            let nap = libc::timespec { tv_sec: 0, tv_nsec: 10_000_000 };
            for _ in 0..6000 {
                if flag.load(Ordering::Acquire) == 1 {
                    // SAFETY: a NUL-terminated name of under 16 bytes.
                    unsafe { libc::prctl(libc::PR_SET_NAME, c"renamed".as_ptr()) };
                    flag.store(2, Ordering::Release);
                }
                // SAFETY: a valid timespec; the remainder is not wanted.
                unsafe { libc::nanosleep(&nap, std::ptr::null_mut()) };
            }
            // SAFETY: ends the child without running the parent's atexit handlers.
            unsafe { libc::_exit(0) };
        }
        let pid = pid as u32;
        let mut reader = ProcessReader::new();
        let before = find(&reader.read(proc), pid).expect("child listed").comm.to_string();
        flag.store(1, Ordering::Release);
        while flag.load(Ordering::Acquire) != 2 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let names: Vec<String> = (0..COMM_REFRESH)
            .map(|_| find(&reader.read(proc), pid).expect("child listed").comm.to_string())
            .collect();
        // SAFETY: our own child, killed then reaped; the page is ours.
        unsafe {
            libc::kill(pid as i32, libc::SIGKILL);
            libc::waitpid(pid as i32, std::ptr::null_mut(), 0);
            libc::munmap(page, 4096);
        }
        assert_ne!(before, "renamed");
        assert_eq!(names[0], before, "an idle process's name is not re-read every sample");
        assert_eq!(names.last().map(String::as_str), Some("renamed"), "{names:?}");
    }

    /// Between full passes only moving and named processes are re-read; an idle one is carried
    /// with the time of its read, and re-read at the next full pass.
    #[test]
    fn sampled_reader_carries_idle_processes_between_full_passes() {
        let proc = Path::new("/proc");
        let idle = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = idle.id();
        // Past its exec, whose reads move its counters.
        std::thread::sleep(Duration::from_millis(200));
        let mut reader = ProcessReader::new();
        let t0 = 5_000_000_000;
        let first = reader.read_sampled(proc, t0, &[], false);
        assert_eq!(find(&first, pid).expect("listed").io_read_ns, None);
        // A new process counts as moved once; then an idle one is carried.
        let _ = reader.read_sampled(proc, t0 + 100_000_000, &[], false);
        let third = reader.read_sampled(proc, t0 + 200_000_000, &[], false);
        assert_eq!(find(&third, pid).expect("still listed").io_read_ns, Some(t0 + 100_000_000));
        let fourth = reader.read_sampled(proc, t0 + 300_000_000, &[], false);
        assert_eq!(find(&fourth, pid).expect("still listed").io_read_ns, Some(t0 + 100_000_000));
        // Named by the caller (eBPF saw it): read now.
        let named = reader.read_sampled(proc, t0 + 400_000_000, &[pid], false);
        assert_eq!(find(&named, pid).expect("still listed").io_read_ns, None);
        // A process started after the full pass is listed as soon as it is named.
        let late = Command::new("sleep").arg("30").spawn().unwrap();
        let late_pid = late.id();
        let partial = reader.read_sampled(proc, t0 + 500_000_000, &[], false);
        assert!(find(&partial, late_pid).is_none(), "not listed between full passes");
        let named = reader.read_sampled(proc, t0 + 600_000_000, &[late_pid], false);
        assert_eq!(find(&named, late_pid).expect("named, so read").comm.as_ref(), "sleep");
        assert!(named.windows(2).all(|w| w[0].pid < w[1].pid), "sorted by pid");
        // A full pass a second after the last one re-reads everyone.
        let full = reader.read_sampled(proc, t0 + 1_000_000_000, &[], false);
        assert!(full.iter().all(|p| p.io_read_ns.is_none()));
        for mut child in [idle, late] {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// While the maps watch, a full pass carries a process still at its last STILL_READS reads,
    /// except every STILL_PASS_EVERY-th pass or when named; unwatched, every pass reads it.
    #[test]
    fn watched_full_passes_carry_still_processes() {
        let proc = Path::new("/proc");
        let mut idle = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = idle.id();
        std::thread::sleep(Duration::from_millis(200));
        let second = 1_000_000_000;
        let t0 = 5 * second;
        let read_at = |reader: &mut ProcessReader, k: u64, active: &[u32], watched: bool| {
            let list = reader.read_sampled(proc, t0 + k * second, active, watched);
            find(&list, pid).expect("listed").io_read_ns
        };
        let mut unwatched = ProcessReader::new();
        let reads: Vec<_> = (0..20).map(|k| read_at(&mut unwatched, k, &[], false)).collect();
        assert!(reads.iter().all(Option::is_none), "{reads:?}");

        let mut reader = ProcessReader::new();
        // Its first read and STILL_READS re-reads at which nothing moved.
        let warm = u64::from(STILL_READS) + 1;
        let reads: Vec<_> = (0..warm).map(|k| read_at(&mut reader, k, &[], true)).collect();
        assert!(reads.iter().all(Option::is_none), "{reads:?}");
        let passes: Vec<_> = (warm..warm + u64::from(STILL_PASS_EVERY))
            .map(|k| (k, read_at(&mut reader, k, &[], true)))
            .collect();
        let read_now: Vec<_> = passes.iter().filter(|(_, at)| at.is_none()).collect();
        assert_eq!(read_now.len(), 1, "one pass in {STILL_PASS_EVERY} re-reads it: {passes:?}");
        let (due, _) = read_now[0];
        // A carried row keeps the time it was read.
        for &(k, at) in &passes {
            if k > *due {
                assert_eq!(at, Some(t0 + due * second), "{passes:?}");
            }
        }
        // Named by the maps: read at the next pass, due or not.
        let k = warm + u64::from(STILL_PASS_EVERY);
        let named = read_at(&mut reader, k, &[pid], true);
        assert_eq!(named, None);
        idle.kill().unwrap();
        idle.wait().unwrap();
    }

    /// A shell that reaped a `dd` (8 MiB through read()): /proc/PID/io holds the dd's counters,
    /// `own` (its thread's) does not; its ppid is ours. The dd, listed while it ran, is gone at the
    /// next read.
    #[test]
    fn own_counters_leave_out_a_reaped_childs() {
        let proc = Path::new("/proc");
        let mut sh = Command::new("sh")
            .args(["-c", "dd if=/dev/zero of=/dev/null bs=1M count=8 2>/dev/null; sleep 30"])
            .spawn()
            .unwrap();
        let pid = sh.id();
        let mut reader = ProcessReader::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let row = loop {
            let all = reader.read(proc);
            let row = find(&all, pid).cloned().expect("sh listed");
            if row.io.as_ref().is_some_and(|io| io.rchar >= 8 << 20) {
                break row;
            }
            assert!(std::time::Instant::now() < deadline, "dd did not run: {row:?}");
            std::thread::sleep(Duration::from_millis(50));
        };
        sh.kill().unwrap();
        sh.wait().unwrap();
        assert_eq!(row.ppid, std::process::id());
        let own = row.own.clone().expect("own read");
        assert!(own.rchar < 1 << 20, "the shell's own reads hold the dd's: {own:?}");
        assert!(row.own_slack.is_none(), "an idle shell's io stood still: {row:?}");
    }

    #[test]
    fn cached_and_one_shot_readers_agree_on_a_fixture() {
        let proc = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/synthetic/hotplug/t1/proc");
        let one_shot = read(&proc);
        let mut cached = ProcessReader::new();
        assert_eq!(cached.read(&proc), one_shot);
        assert_eq!(cached.read(&proc), one_shot, "second read goes through the open files");
        assert_eq!(one_shot.len(), 4);
    }
}
