//! `ioscope anonymize IN OUT`: a copy of a recording with every user-controlled name replaced by a
//! stable pseudonym, its numbers untouched. It goes through the Sample types: every string field
//! of [`Sample`] and [`RecordingHeader`] is either rewritten here or kept on purpose, and the test
//! `every_string_field_is_classified` fails when a field is added without deciding which
//! (src/record/README.md, "Anonymised copies", says what is kept and why).
//!
//! Pseudonyms come from counters in order of first appearance (`host1`, `user2`, `proc3`,
//! `dir4`, `file5.db`, `cg6.service`, `arg7`): one name, one pseudonym within the file, never
//! derived from the name itself. Paths keep their depth, their `.` extensions and a trailing
//! ` (deleted)`; the first directory of the filesystem hierarchy (`/usr`, `/var`, `/home`, ...),
//! procfs and sysfs paths and kernel device names under `/dev` are kept.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

use crate::record::format::{MountInfo, Recording, RecordingHeader, RecordingWriter};
use crate::sample::Sample;

/// `ioscope anonymize`'s arguments.
#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct AnonymizeArgs {
    /// The recording to anonymise.
    #[arg(value_name = "IN")]
    pub input: PathBuf,
    /// The anonymised copy to write: a new file (never through a symbolic link).
    #[arg(value_name = "OUT")]
    pub output: PathBuf,
    /// Leave paths under PREFIX (and PREFIX itself) as they are; may be repeated.
    #[arg(long, value_name = "PREFIX")]
    pub keep: Vec<String>,
    /// Replace OUT if it is an existing regular file (a new file is renamed over it).
    #[arg(long)]
    pub force: bool,
}

/// The first directories of the filesystem hierarchy: named by the distribution, not the user.
const HIERARCHY: &[&str] = &[
    "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "media", "mnt", "opt", "proc", "root",
    "run", "sbin", "srv", "sys", "tmp", "usr", "var",
];

/// Names under /dev given by the kernel or udev on every machine.
const DEV_NAMES: &[&str] = &[
    "shm", "mqueue", "pts", "mapper", "disk", "block", "null", "zero", "full", "random", "urandom", "stdin",
    "stdout", "stderr", "fd", "tty", "console",
];

/// Kinds of names; each has its own counter prefix and its own map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Host,
    User,
    Process,
    Arg,
    Dir,
    File,
    Cgroup,
    Note,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Host => "host",
            Kind::User => "user",
            Kind::Process => "proc",
            Kind::Arg => "arg",
            Kind::Dir => "dir",
            Kind::File => "file",
            Kind::Cgroup => "cg",
            Kind::Note => "note",
        }
    }
}

/// The pseudonyms of one file, and what is kept.
#[derive(Default)]
pub struct Anonymizer {
    names: HashMap<(Kind, String), String>,
    next: u64,
    /// `--keep` prefixes, without a trailing slash.
    keep: Vec<String>,
    /// Names of kernel threads (kworker/u8:0, jbd2/vda1-8): the kernel's, kept wherever they
    /// appear, so that figures grouped by process name (compare's) group as before.
    kernel_threads: HashSet<String>,
    /// Kernel device names (vda, loop0, nvme0n1p1): kept under /dev.
    devices: HashSet<String>,
}

impl Anonymizer {
    pub fn new(keep: &[String]) -> Anonymizer {
        let keep = keep
            .iter()
            .map(|k| if k.len() > 1 { k.trim_end_matches('/').to_string() } else { k.clone() })
            .filter(|k| !k.is_empty())
            .collect();
        Anonymizer { keep, ..Default::default() }
    }

    /// First pass: learns the kernel threads and device names of a sample (before any is
    /// rewritten, so a kernel thread seen later in the file is known from the start).
    pub fn learn(&mut self, s: &Sample) {
        for p in &s.processes {
            if p.pid == 2 || p.ppid == 2 {
                self.kernel_threads.insert(p.comm.to_string());
            }
        }
        for p in s.bpf.io_processes.iter().filter(|p| p.kernel_thread) {
            self.kernel_threads.insert(p.comm.clone());
        }
        self.devices.extend(s.disks.iter().map(|d| d.name.clone()));
        self.devices.extend(s.block_settings.iter().map(|b| b.name.clone()));
    }

    /// The names replaced so far, and their pseudonyms.
    pub fn replaced(&self) -> impl Iterator<Item = (&str, &str)> {
        self.names.iter().map(|((_, k), v)| (k.as_str(), v.as_str()))
    }

    fn pseudonym(&mut self, kind: Kind, name: &str, keep_extension: bool) -> String {
        if name.is_empty() {
            return String::new();
        }
        if let Some(p) = self.names.get(&(kind, name.to_string())) {
            return p.clone();
        }
        self.next += 1;
        let mut p = format!("{}{}", kind.prefix(), self.next);
        if keep_extension {
            if let Some(ext) = extension(name) {
                p.push('.');
                p.push_str(ext);
            }
        }
        self.names.insert((kind, name.to_string()), p.clone());
        p
    }

    fn kept_path(&self, path: &str) -> bool {
        self.keep.iter().any(|k| {
            path == k
                || (path.starts_with(k.as_str()) && (k.ends_with('/') || path[k.len()..].starts_with('/')))
        })
    }

    /// A file or directory path: each component replaced by its own pseudonym (so a directory
    /// keeps one name in every path under it), depth, extensions and ` (deleted)` kept.
    pub fn path(&mut self, path: &str) -> String {
        self.path_as(path, false)
    }

    /// A directory's path (a mount point): its last component named as a directory, as in the
    /// paths of the files under it.
    pub fn dir_path(&mut self, path: &str) -> String {
        self.path_as(path, true)
    }

    fn path_as(&mut self, path: &str, directory: bool) -> String {
        if self.kept_path(path) {
            return path.to_string();
        }
        let (body, deleted) = match path.strip_suffix(" (deleted)") {
            Some(b) => (b, " (deleted)"),
            None => (path, ""),
        };
        let parts: Vec<&str> = body.split('/').collect();
        let absolute = body.starts_with('/');
        let top = if absolute { parts.get(1).copied() } else { None };
        // procfs names are the kernel's; so are sysfs's, but for the cgroup tree in it.
        if top == Some("proc") || (top == Some("sys") && !body.starts_with("/sys/fs/cgroup/")) {
            return path.to_string();
        }
        if body.starts_with("/sys/fs/cgroup/") {
            let rest = &body["/sys/fs/cgroup".len()..];
            return format!("/sys/fs/cgroup{}{deleted}", self.cgroup(rest));
        }
        let last = parts.len() - 1;
        let mut out = Vec::with_capacity(parts.len());
        for (i, c) in parts.iter().enumerate() {
            let kept = c.is_empty()
                || *c == "."
                || *c == ".."
                || (absolute && i == 1 && HIERARCHY.contains(c))
                || (top == Some("dev") && i >= 2 && (DEV_NAMES.contains(c) || self.devices.contains(*c)));
            out.push(if kept {
                c.to_string()
            } else {
                self.pseudonym(if i == last && !directory { Kind::File } else { Kind::Dir }, c, true)
            });
        }
        out.join("/") + deleted
    }

    /// A cgroup path ("/system.slice/nginx.service"): each component replaced, its unit type kept.
    pub fn cgroup(&mut self, path: &str) -> String {
        if self.kept_path(path) {
            return path.to_string();
        }
        path.split('/')
            .map(|c| if c.is_empty() { String::new() } else { self.pseudonym(Kind::Cgroup, c, true) })
            .collect::<Vec<_>>()
            .join("/")
    }

    /// A process name: a kernel thread's is kept (wherever it appears: a user's process that
    /// takes a kernel thread's name keeps it too).
    pub fn comm(&mut self, comm: &str) -> String {
        if self.kernel_threads.contains(comm) || is_kworker(comm) {
            return comm.to_string();
        }
        self.pseudonym(Kind::Process, comm, false)
    }

    pub fn host(&mut self, name: &str) -> String {
        self.pseudonym(Kind::Host, name, false)
    }

    /// A user name: root and a bare uid are kept (the uid is a number, kept anyway).
    pub fn user(&mut self, name: &str) -> String {
        if name == "root" || name.bytes().all(|b| b.is_ascii_digit()) {
            return name.to_string();
        }
        self.pseudonym(Kind::User, name, false)
    }

    /// A mark's note (free text): replaced whole.
    pub fn note(&mut self, note: &str) -> String {
        self.pseudonym(Kind::Note, note, false)
    }

    /// A command line, word by word: the program like a process name (or a path), paths as
    /// paths, option names (`-x`, `--name`, the `key` of `--key=value`, dd's operand keys) and numbers kept, every
    /// other word replaced.
    pub fn cmdline(&mut self, cmdline: &str) -> String {
        let mut out = Vec::new();
        for (i, word) in cmdline.split(' ').enumerate() {
            out.push(if i == 0 {
                if word.contains('/') {
                    self.path(word)
                } else {
                    self.pseudonym(Kind::Process, word, false)
                }
            } else {
                self.arg(word)
            });
        }
        out.join(" ")
    }

    fn arg(&mut self, word: &str) -> String {
        if word.is_empty() || is_number(word) || is_option_name(word) {
            return word.to_string();
        }
        if let Some((key, value)) = word.split_once('=') {
            let key_kept = is_option_name(key) || DD_OPERANDS.contains(&key);
            if key_kept {
                return format!("{key}={}", self.arg_value(value));
            }
        }
        self.arg_value(word)
    }

    fn arg_value(&mut self, value: &str) -> String {
        if value.is_empty() || is_number(value) {
            value.to_string()
        } else if value.contains('/') {
            self.path(value)
        } else {
            self.pseudonym(Kind::Arg, value, true)
        }
    }

    /// Mount options: flags and numbers kept, other values replaced.
    fn mount_options(&mut self, options: &str) -> String {
        options
            .split(',')
            .map(|o| match o.split_once('=') {
                Some((k, v)) => format!("{k}={}", self.arg_value(v)),
                None if is_word(&o.replace(|c: char| c.is_ascii_digit() || c == '-', "")) => o.to_string(),
                None => self.arg_value(o),
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The v1 controller label of a cgroup's figures ("blkio /docker/abc", "memory v1 /x"): the
    /// path after the label is a cgroup path.
    fn cgroup_source(&mut self, source: &str) -> String {
        for label in ["blkio ", "memory v1 "] {
            if let Some(path) = source.strip_prefix(label) {
                return format!("{label}{}", self.cgroup(path));
            }
        }
        source.to_string()
    }

    pub fn header(&mut self, h: &mut RecordingHeader) {
        h.hostname = self.host(&h.hostname);
        for m in &mut h.mounts {
            let MountInfo { source, target, fstype: _, options } = m;
            *source = self.path(source);
            *target = self.dir_path(target);
            *options = self.mount_options(options);
        }
        // The recorder's own name is ioscope's; its arguments are the user's.
        let (program, rest) = h.command.split_once(' ').unwrap_or((h.command.as_str(), ""));
        let program_kept = program.rsplit('/').next() == Some("ioscope");
        let rest = match rest.split_once(' ') {
            _ if rest.is_empty() => String::new(),
            Some(("record", args)) if program_kept => format!(" record {}", self.args(args)),
            _ => format!(" {}", self.args(rest)),
        };
        let program = if program_kept { program.to_string() } else { self.cmdline(program) };
        h.command = program + &rest;
    }

    fn args(&mut self, args: &str) -> String {
        args.split(' ').map(|w| self.arg(w)).collect::<Vec<_>>().join(" ")
    }

    /// Rewrites every user-controlled string of `s` (the list: [`USER_FIELDS`]).
    pub fn sample(&mut self, s: &mut Sample) {
        s.host.hostname = self.host(&s.host.hostname);
        for p in &mut s.processes {
            p.comm = Arc::from(self.comm(&p.comm));
            if let Some(u) = &p.user {
                p.user = Some(Arc::from(self.user(u)));
            }
            if let Some(c) = &p.cmdline {
                p.cmdline = Some(Arc::from(self.cmdline(c)));
            }
        }
        let b = &mut s.bpf;
        for p in &mut b.io_processes {
            p.comm = self.comm(&p.comm);
            p.cgroup = self.cgroup(&p.cgroup);
        }
        if let Some(pc) = &mut b.page_cache {
            for p in &mut pc.processes {
                p.comm = self.comm(&p.comm);
                p.cgroup = self.cgroup(&p.cgroup);
            }
        }
        for f in &mut b.files {
            f.path = f.path.as_deref().map(|p| self.path(p));
            for p in &mut f.processes {
                p.comm = self.comm(&p.comm);
            }
        }
        if let Some(ra) = &mut b.readahead {
            for f in &mut ra.files {
                let f = Arc::make_mut(f);
                f.path = f.path.as_deref().map(|p| self.path(p));
                for t in &mut f.triggers {
                    t.comm = self.comm(&t.comm);
                }
            }
        }
        if let Some(bf) = &mut b.block_files {
            for t in &mut bf.targets {
                t.path = t.path.as_deref().map(|p| self.path(p));
            }
        }
        if let Some(iw) = &mut b.iowait {
            for t in &mut iw.threads {
                t.comm = self.comm(&t.comm);
            }
        }
        if let Some(sy) = &mut b.syncs {
            for c in &mut sy.calls {
                c.comm = self.comm(&c.comm);
                c.cgroup = self.cgroup(&c.cgroup);
                c.file.path = c.file.path.as_deref().map(|p| self.path(p));
            }
            for r in &mut sy.running {
                r.comm = self.comm(&r.comm);
                r.cgroup = self.cgroup(&r.cgroup);
                r.file.path = r.file.path.as_deref().map(|p| self.path(p));
            }
        }
        for c in &mut s.cgroups {
            c.path = self.cgroup(&c.path);
            if let Some(io) = &mut c.io {
                io.source = self.cgroup_source(&io.source);
            }
            if let Some(m) = &mut c.memory {
                m.source = self.cgroup_source(&m.source);
            }
        }
    }
}

/// A workqueue worker's name (`kworker/u8:0-events`, `kworker/R-loop2`): the kernel's, and the
/// model groups workers by its pool part (src/model/names.rs), which must group the same way in
/// the copy. Kept even in older recordings that cannot tell kernel threads apart.
pub fn is_kworker(comm: &str) -> bool {
    let Some(rest) = comm.strip_prefix("kworker/") else { return false };
    let pool = rest.split(['-', '+']).next().unwrap_or("");
    rest.starts_with("R-")
        || (!pool.is_empty() && pool.bytes().all(|b| b.is_ascii_digit() || b"u:H".contains(&b)))
}

/// A file name's extension, kept in its pseudonym: 1 to 8 letters or digits after the last dot
/// (not a leading one).
fn extension(name: &str) -> Option<&str> {
    let (stem, ext) = name.rsplit_once('.')?;
    (!stem.is_empty() && (1..=8).contains(&ext.len()) && ext.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then_some(ext)
}

/// A number, maybe with a unit letter: 4096, 1.5, 4k, 1M, 30s, 50%.
fn is_number(w: &str) -> bool {
    let digits = w.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == '%');
    !digits.is_empty()
        && w.len() - digits.len() <= 3
        && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && digits.bytes().any(|b| b.is_ascii_digit())
}

/// `-x` or `--long-name`: an option the program defines.
fn is_option_name(w: &str) -> bool {
    let name = w.strip_prefix("--").or_else(|| w.strip_prefix('-'));
    name.is_some_and(|n| {
        (1..=32).contains(&n.len())
            && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && n.as_bytes()[0].is_ascii_alphabetic()
    })
}

/// The keys of dd's `key=value` operands, kept as option names are; any other bare `key=value`
/// argument is a name (a compiler's `--extern serde_json=PATH` names a crate), replaced whole.
const DD_OPERANDS: [&str; 12] =
    ["if", "of", "bs", "ibs", "obs", "cbs", "count", "skip", "seek", "conv", "iflag", "oflag"];

/// A short lowercase word, as option keys are (`if`, `bs`, `count` of dd's `key=value`).
fn is_word(w: &str) -> bool {
    (1..=16).contains(&w.len()) && w.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

/// What `ioscope anonymize` did: samples written and names replaced.
#[derive(Debug)]
pub struct Summary {
    pub samples: usize,
    pub names: usize,
}

/// Runs `ioscope anonymize`: reads every sample once to learn the kernel's names, then writes the
/// copy. A file that is not a recording, or an existing OUT without --force, is refused before
/// anything is written (exit 2).
pub fn run(args: &AnonymizeArgs) -> anyhow::Result<()> {
    let summary = anonymize(args)?;
    eprintln!(
        "ioscope: wrote {} ({} samples, {} names replaced)",
        crate::untrusted::escape(&args.output.display().to_string()),
        summary.samples,
        summary.names
    );
    Ok(())
}

/// Refused input: bad input, one line, exit 2.
fn refused(e: anyhow::Error) -> anyhow::Error {
    anyhow::Error::new(crate::safe_fs::Refused(format!("{e:#}")))
}

pub fn anonymize(args: &AnonymizeArgs) -> anyhow::Result<Summary> {
    let mut rec = Recording::open(&args.input).map_err(refused)?;
    let shown = args.input.display().to_string();
    if let Some(problem) = &rec.problem {
        eprintln!("ioscope: {}: {}", crate::untrusted::escape(&shown), crate::untrusted::escape(problem));
    }
    let mut anon = Anonymizer::new(&args.keep);
    for i in 0..rec.len() {
        let s = rec.sample(i).map_err(refused)?;
        anon.learn(s);
    }
    let mut header = rec.header.clone();
    anon.header(&mut header);
    let opts = crate::safe_fs::CreateOptions { replace: args.force, stream: false };
    let mut out = crate::safe_fs::create(&args.output, opts, &mut || false)?;
    let written = (|| -> anyhow::Result<usize> {
        let file = out.file().try_clone()?;
        let mut w = RecordingWriter::start(file, &args.output, &header)?;
        let marks = rec.marks.clone();
        let mut next_mark = 0;
        for i in 0..rec.len() {
            let mut s = rec.parse_as::<Sample>(i)?;
            // Marks go where they were: before the first sample after them.
            while let Some(m) = marks.get(next_mark).filter(|m| m.mono_ns <= s.mono_ns) {
                w.write_mark(&crate::record::Mark { note: anon.note(&m.note), ..m.clone() })?;
                next_mark += 1;
            }
            anon.sample(&mut s);
            w.write_sample(&s).with_context(|| format!("cannot write to {}", args.output.display()))?;
        }
        for m in &marks[next_mark..] {
            w.write_mark(&crate::record::Mark { note: anon.note(&m.note), ..m.clone() })?;
        }
        w.sync()?;
        Ok(rec.len())
    })();
    match written {
        Ok(samples) => {
            out.commit().with_context(|| format!("cannot create {}", args.output.display()))?;
            Ok(Summary { samples, names: anon.names.len() })
        }
        Err(e) => {
            out.discard();
            Err(e)
        }
    }
}

/// How each string field (a JSON path, `[]` for an array's elements) of a Sample is treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// A name a user chose: replaced.
    User,
    /// A v1 cgroup figures' source ("blkio /path"): the path after the label replaced.
    CgroupSource,
    /// ioscope's or the kernel's own text (program names, enums, device names, errors): kept.
    Kept,
}

/// Every string field of a [`Sample`] and what [`Anonymizer::sample`] does with it.
pub const SAMPLE_FIELDS: &[(&str, Class)] = &[
    ("host.hostname", Class::User),
    ("host.kernel", Class::Kept),
    ("zones[].name", Class::Kept),
    ("disks[].name", Class::Kept),
    ("block_settings[].name", Class::Kept),
    ("block_settings[].scheduler", Class::Kept),
    ("processes[].comm", Class::User),
    ("processes[].user", Class::User),
    ("processes[].cmdline", Class::User),
    ("bpf.status.reason", Class::Kept),
    ("bpf.status.programs[].program", Class::Kept),
    ("bpf.status.programs[].tracepoint", Class::Kept),
    ("bpf.status.programs[].error", Class::Kept),
    ("bpf.status.programs[].mechanism", Class::Kept),
    ("bpf.status.programs[].fallback_for", Class::Kept),
    ("bpf.io_processes[].comm", Class::User),
    ("bpf.io_processes[].cgroup", Class::User),
    ("bpf.page_cache.attached[]", Class::Kept),
    ("bpf.page_cache.processes[].comm", Class::User),
    ("bpf.page_cache.processes[].cgroup", Class::User),
    ("bpf.files[].device", Class::Kept),
    ("bpf.files[].path", Class::User),
    ("bpf.files[].processes[].comm", Class::User),
    ("bpf.files[].cache.source", Class::Kept),
    ("bpf.files[].label", Class::Kept),
    ("bpf.readahead.attached[]", Class::Kept),
    ("bpf.readahead.files[].path", Class::User),
    ("bpf.readahead.files[].triggers[].comm", Class::User),
    ("bpf.readahead.files[].label", Class::Kept),
    ("bpf.block_files.targets[].disk", Class::Kept),
    ("bpf.block_files.targets[].path", Class::User),
    ("bpf.block_files.targets[].label", Class::Kept),
    ("bpf.syncs.attached[]", Class::Kept),
    ("bpf.syncs.calls[].comm", Class::User),
    ("bpf.syncs.calls[].cgroup", Class::User),
    ("bpf.syncs.calls[].syscall", Class::Kept),
    ("bpf.syncs.calls[].file.path", Class::User),
    ("bpf.syncs.running[].comm", Class::User),
    ("bpf.syncs.running[].cgroup", Class::User),
    ("bpf.syncs.running[].syscall", Class::Kept),
    ("bpf.syncs.running[].file.path", Class::User),
    ("bpf.iowait.threads[].comm", Class::User),
    ("bpf.maps[].map", Class::Kept),
    ("cgroups[].path", Class::User),
    ("cgroups[].io.source", Class::CgroupSource),
    ("cgroups[].memory.source", Class::CgroupSource),
    ("unavailable[].part", Class::Kept),
    ("unavailable[].reason", Class::Kept),
];

/// Every string field of a [`RecordingHeader`] (`{}` for a map's keys and values).
pub const HEADER_FIELDS: &[(&str, Class)] = &[
    ("ioscope_version", Class::Kept),
    ("hostname", Class::User),
    ("kernel", Class::Kept),
    ("devices[].name", Class::Kept),
    ("devices[].scheduler", Class::Kept),
    ("mounts[].source", Class::User),
    ("mounts[].target", Class::User),
    ("mounts[].fstype", Class::Kept),
    ("mounts[].options", Class::User),
    ("tuning{}", Class::Kept),
    ("command", Class::User),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::cgroups::*;
    use crate::sample::readahead::*;
    use crate::sample::syncs::*;
    use crate::sample::*;
    use serde_json::Value;

    /// A Sample with every Option set and every Vec holding one element, so that every field
    /// appears in its JSON; its strings are filled in by [`fill_strings`].
    fn populated() -> Sample {
        let cache = CacheCountersSample::default();
        let file = SyncFile { major: 7, minor: 0, ino: 12, path: Some(String::new()) };
        Sample {
            mono_ns: 1,
            host: HostInfo::default(),
            vmstat: VmStat {
                kernel_dirty_threshold_pages: Some(1),
                kernel_dirty_background_threshold_pages: Some(1),
                ..Default::default()
            },
            zones: vec![ZoneInfo::default()],
            psi: Psi {
                io: Some(PsiResource { some: PsiLine::default(), full: Some(PsiLine::default()) }),
                memory: Some(PsiResource { some: PsiLine::default(), full: Some(PsiLine::default()) }),
            },
            disks: vec![DiskStat {
                discards: Some(DiscardStat::default()),
                flushes: Some(FlushStat::default()),
                ..Default::default()
            }],
            block_settings: vec![Arc::new(BlockSettings {
                read_ahead_kb: Some(1),
                scheduler: Some(String::new()),
                nr_requests: Some(1),
                rotational: Some(false),
                max_sectors_kb: Some(1),
                logical_block_size: Some(1),
                start_sector: Some(1),
                hw_queues: Some(1),
                size_sectors: Some(1),
                ..Default::default()
            })],
            processes: vec![ProcessIo {
                pid: 100,
                ppid: 1,
                io: Some(ProcIoCounters::default()),
                io_read_ns: Some(1),
                own: Some(ProcIoCounters::default()),
                own_slack: Some(ProcIoCounters::default()),
                uid: Some(1000),
                user: Some(Arc::from("")),
                cmdline: Some(Arc::from("")),
                ..Default::default()
            }],
            bpf: BpfSample {
                status: BpfStatus {
                    enabled: true,
                    reason: Some(String::new()),
                    programs: Arc::new(vec![BpfProgramStatus {
                        error: Some(String::new()),
                        fallback_for: Some(String::new()),
                        ..Default::default()
                    }]),
                },
                rq_issue: vec![BpfDeviceCounters::default()],
                block_devices: vec![BlockDeviceCounters {
                    read: dir(),
                    write: dir(),
                    other: dir(),
                    depth_hist: vec![1],
                    ..Default::default()
                }],
                io_processes: vec![BlockProcessCounters {
                    pid: 100,
                    lat_hist: vec![1],
                    ..Default::default()
                }],
                block_health: BlockProbeHealth {
                    events: vec![1],
                    missed: vec![1],
                    run_time_ns: vec![1],
                    run_cnt: vec![1],
                    ..Default::default()
                },
                page_cache: Some(PageCacheSample {
                    attached: Arc::new(vec![String::new()]),
                    processes: vec![CacheProcessSample {
                        pid: 100,
                        counters: cache.clone(),
                        ..Default::default()
                    }],
                    dirty_state: Some(KernelDirtyState::default()),
                    last_throttle: Some(ThrottleRecord::default()),
                    totals: cache,
                    ..Default::default()
                }),
                files: vec![FileIoSample {
                    path: Some(String::new()),
                    processes: vec![FileProcess { pid: 100, comm: String::new() }],
                    cache: Some(FileCacheState {
                        dirty_pages: Some(1),
                        writeback_pages: Some(1),
                        evicted_pages: Some(1),
                        recently_evicted_pages: Some(1),
                        ..Default::default()
                    }),
                    label: Some(String::new()),
                    ..Default::default()
                }],
                readahead: Some(ReadaheadSample {
                    attached: Arc::new(vec![String::new()]),
                    files: vec![Arc::new(RaFileSample {
                        path: Some(String::new()),
                        triggers: vec![RaTrigger { pid: 100, comm: String::new() }],
                        use_hist: vec![1],
                        label: Some(String::new()),
                        ..Default::default()
                    })],
                    others: vec![RaOthers::default()],
                    quiet: vec![RaQuiet::default()],
                    recent: vec![RaRecent::default()],
                    ..Default::default()
                }),
                iowait: Some(crate::sample::iowait::IowaitSample {
                    threads: vec![crate::sample::iowait::IowaitThreadSample {
                        pid: 100,
                        comm: String::new(),
                        ns_by_cause: vec![1],
                        ..Default::default()
                    }],
                }),
                block_files: Some(BlockFilesSample {
                    targets: vec![BlockTargetCounters {
                        path: Some(String::new()),
                        label: Some(String::new()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                syncs: Some(SyncSample {
                    attached: Arc::new(vec![String::new()]),
                    calls: vec![SyncCallCounters {
                        pid: 100,
                        file: file.clone(),
                        hist: vec![1],
                        ..Default::default()
                    }],
                    running: vec![SyncRunning { pid: 100, file, ..Default::default() }],
                }),
                maps: Arc::new(vec![BpfMapMemory::default()]),
            },
            cgroups: vec![CgroupSample {
                io: Some(CgroupIoCounters::default()),
                io_pressure: Some(PsiResource { some: PsiLine::default(), full: Some(PsiLine::default()) }),
                memory_pressure: Some(PsiResource {
                    some: PsiLine::default(),
                    full: Some(PsiLine::default()),
                }),
                memory: Some(CgroupMemory { limit_bytes: Some(1), ..Default::default() }),
                ..Default::default()
            }],
            unavailable: vec![Unavailable::default()],
            ..Default::default()
        }
    }

    fn dir() -> BlockDirCounters {
        BlockDirCounters {
            queue_hist: vec![1],
            device_hist: vec![1],
            size_hist: vec![1],
            ..Default::default()
        }
    }

    fn populated_header() -> RecordingHeader {
        RecordingHeader {
            devices: vec![(*populated().block_settings[0]).clone()],
            mounts: vec![MountInfo::default()],
            tuning: [(String::new(), String::new())].into(),
            ..Default::default()
        }
    }

    /// Walks `v`, calling `leaf` with each string's path; a null or an empty array means the
    /// fixture left a field out (or a new field was added): the test names it.
    fn walk(v: &mut Value, path: &str, leaf: &mut dyn FnMut(&str, &mut Value)) {
        match v {
            Value::Object(m) if path.ends_with("tuning") => {
                let entries: Vec<(String, Value)> = std::mem::take(m).into_iter().collect();
                for (mut k, mut val) in entries {
                    let mut key = Value::String(k.clone());
                    leaf(&format!("{path}{{}}"), &mut key);
                    leaf(&format!("{path}{{}}"), &mut val);
                    k = key.as_str().unwrap().to_string();
                    m.insert(k, val);
                }
            }
            Value::Object(m) => {
                for (k, val) in m.iter_mut() {
                    let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                    walk(val, &p, leaf);
                }
            }
            Value::Array(a) if a.is_empty() => panic!("{path} is an empty array in the fixture"),
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, &format!("{path}[]"), leaf)),
            Value::Null => panic!("{path} is null in the fixture: set it (and classify its strings)"),
            Value::String(_) => leaf(path, v),
            _ => {}
        }
    }

    /// Gives every string leaf a distinct secret: a path of two secret components for a user
    /// field, a label and a cgroup path for a v1 source.
    fn fill_strings(v: &mut Value, table: &[(&str, Class)]) {
        let mut n = 0;
        walk(v, "", &mut |path, leaf| {
            n += 1;
            let class = table.iter().find(|(p, _)| *p == path).map(|x| x.1).unwrap_or_else(|| {
                panic!("{path} is a string field nobody classified: add it to anonymize.rs's tables")
            });
            *leaf = Value::String(match class {
                Class::CgroupSource => format!("blkio /secret{n}a/secret{n}b.slice"),
                _ => format!("/secret{n}a/secret{n}b.db"),
            });
        });
    }

    fn check(before: &mut Value, after: &mut Value, table: &[(&str, Class)]) {
        let mut seen = Vec::new();
        let mut kept = Vec::new();
        walk(before, "", &mut |path, leaf| seen.push((path.to_string(), leaf.as_str().unwrap().to_string())));
        walk(after, "", &mut |_, leaf| kept.push(leaf.as_str().unwrap().to_string()));
        assert_eq!(seen.len(), kept.len());
        let mut checked = HashSet::new();
        for ((path, old), new) in seen.iter().zip(&kept) {
            let class = table.iter().find(|(p, _)| p == path).unwrap().1;
            checked.insert(path.clone());
            match class {
                Class::Kept => assert_eq!(old, new, "{path} must be kept"),
                Class::User | Class::CgroupSource => {
                    let secret = old.split('/').nth(1).unwrap();
                    assert!(!new.contains(secret), "{path}: {old} became {new}");
                    assert!(!new.contains(&secret.replace('a', "b")), "{path}: {old} became {new}");
                }
            }
        }
        for (p, _) in table {
            assert!(checked.contains(*p), "{p} is classified but not in the Sample (renamed?)");
        }
    }

    #[test]
    fn every_string_field_is_classified() {
        let mut v = serde_json::to_value(populated()).unwrap();
        fill_strings(&mut v, SAMPLE_FIELDS);
        let mut s: Sample = serde_json::from_value(v.clone()).unwrap();
        Anonymizer::new(&[]).sample(&mut s);
        check(&mut v, &mut serde_json::to_value(&s).unwrap(), SAMPLE_FIELDS);

        let mut v = serde_json::to_value(populated_header()).unwrap();
        fill_strings(&mut v, HEADER_FIELDS);
        let mut h: RecordingHeader = serde_json::from_value(v.clone()).unwrap();
        Anonymizer::new(&[]).header(&mut h);
        check(&mut v, &mut serde_json::to_value(&h).unwrap(), HEADER_FIELDS);
    }

    #[test]
    fn paths_keep_depth_extensions_and_the_hierarchy() {
        let mut a = Anonymizer::new(&["/srv/public/".to_string()]);
        a.devices.insert("vda1".into());
        assert_eq!(a.path("/home/alice/notes.txt"), "/home/dir1/file2.txt");
        // One name, one pseudonym: the same directory in another path, the same file again.
        assert_eq!(a.path("/home/alice/db/orders.db (deleted)"), "/home/dir1/dir3/file4.db (deleted)");
        assert_eq!(a.path("/home/alice/notes.txt"), "/home/dir1/file2.txt");
        assert_eq!(a.path("relative/x"), "dir5/file6");
        assert_eq!(a.path("/proc/123/status"), "/proc/123/status");
        assert_eq!(a.path("/dev/vda1"), "/dev/vda1");
        assert_eq!(a.path("/dev/shm/secret"), "/dev/shm/file7");
        assert_eq!(a.path("/srv/public/a.log"), "/srv/public/a.log");
        assert_eq!(a.path("/srv/public"), "/srv/public");
        assert_eq!(a.path("/srv/publicity"), "/srv/file8");
        assert_eq!(a.cgroup("/system.slice/nginx.service"), "/cg9.slice/cg10.service");
        assert_eq!(a.cgroup("/"), "/");
        assert_eq!(a.path("/sys/fs/cgroup/system.slice"), "/sys/fs/cgroup/cg9.slice");
    }

    #[test]
    fn command_lines_keep_options_and_numbers() {
        let mut a = Anonymizer::new(&[]);
        assert_eq!(
            a.cmdline("dd if=/data/in.raw of=/dev/null bs=1M count=100 --secret-flag=hunter2 -q acme"),
            "proc1 if=/dir2/file3.raw of=/dev/null bs=1M count=100 --secret-flag=arg4 -q arg5"
        );
        assert_eq!(a.comm("dd"), "proc1");
        // A bare key=value that is not dd's names something (a crate, a variable): replaced whole.
        let rustc =
            Anonymizer::new(&[]).cmdline("rustc --extern serde_json=/t/libserde_json.rlib SECRET_TOKEN=x");
        assert!(!rustc.contains("serde") && !rustc.contains("SECRET"), "{rustc}");
        let mut h = RecordingHeader {
            hostname: "db-prod-7".into(),
            command: "/usr/bin/ioscope record -o /home/bob/x.rec".into(),
            mounts: vec![MountInfo {
                source: "/dev/vda1".into(),
                target: "/srv/data".into(),
                fstype: "ext4".into(),
                options: "rw,relatime,subvol=/customers,commit=5".into(),
            }],
            ..Default::default()
        };
        a.devices.insert("vda1".into());
        a.header(&mut h);
        assert_eq!(h.hostname, "host6");
        // "data" was a directory of dd's input already: one name, one pseudonym.
        assert_eq!(h.mounts[0].target, "/srv/dir2");
        assert_eq!(h.mounts[0].options, "rw,relatime,subvol=/file7,commit=5");
        assert_eq!(h.command, "/usr/bin/ioscope record -o /home/dir8/file9.rec");
        // The files under a mount point are under its pseudonym.
        assert_eq!(a.path("/srv/data/t.csv"), "/srv/dir2/file10.csv");
    }

    #[test]
    fn kernel_threads_and_root_keep_their_names() {
        let mut a = Anonymizer::new(&[]);
        let s = Sample {
            processes: vec![
                ProcessIo { pid: 2, comm: Arc::from("kthreadd"), ..Default::default() },
                ProcessIo { pid: 40, ppid: 2, comm: Arc::from("kworker/u8:0"), ..Default::default() },
                ProcessIo {
                    pid: 41,
                    ppid: 1,
                    comm: Arc::from("backup.sh"),
                    user: Some(Arc::from("root")),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        a.learn(&s);
        let mut t = s.clone();
        a.sample(&mut t);
        let names: Vec<&str> = t.processes.iter().map(|p| &*p.comm).collect();
        // A process that is no kernel thread's child: its name is replaced. A workqueue worker's
        // name is kept wherever it is (older recordings cannot tell kernel threads apart).
        assert_eq!(names, ["kthreadd", "kworker/u8:0", "proc1"]);
        assert_eq!(t.processes[2].user.as_deref(), Some("root"));
        // The same kernel thread in the eBPF tables keeps its name there too.
        assert_eq!(a.comm("kworker/u8:0"), "kworker/u8:0");
        assert_eq!(a.comm("kworker/u8:9-events"), "kworker/u8:9-events");
        assert_eq!(a.comm("kworker/secret"), "proc2");
    }
}
