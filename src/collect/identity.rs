//! Who a process runs as and what it was started with: the owner of /proc/PID (its effective uid,
//! as htop and ps read it), named from /etc/passwd, and /proc/PID/cmdline.
//!
//! Reading /proc/PID/cmdline can block: the kernel copies the arguments out of the process's
//! memory under its mmap lock (`access_remote_vm`), so the read waits while another task holds
//! that lock for writing (a long `mmap`/`munmap`, a process stuck in a page fault on a hung NFS
//! mount or a userfaultfd). `ps` and `top` hang there. ioscope never reads it on the sampling
//! thread: a [`Cmdlines`] hands the (pid, start time) pairs to one worker thread, and a sample
//! takes the command lines read so far, without waiting. A read that blocks holds up only the
//! command lines after it (their processes show their comm meanwhile); the sampling goes on.
//!
//! User names come from /etc/passwd, never through NSS (`getpwuid` may ask LDAP or sssd over the
//! network, and wait): a uid not in the file (a directory user, a container's) shows as its
//! number.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most of a command line kept, bytes (the arguments after it are cut, as ps cuts them).
pub const MAX_CMDLINE: usize = 4096;
/// Requests waiting for the worker at most: beyond it (a worker blocked on one process while
/// hundreds start) a process is asked for again at a later sample.
const QUEUE: usize = 1024;

/// A command line from /proc/PID/cmdline's bytes: the arguments (NUL-separated) joined by
/// spaces; a process that rewrote its arguments (`setproctitle`: `postgres: checkpointer`) has
/// its NUL or space padding dropped. Empty for a kernel thread. Not escaped: the views escape it.
pub fn format_cmdline(raw: &[u8]) -> String {
    let raw = &raw[..raw.len().min(MAX_CMDLINE)];
    let trimmed = match raw.iter().rposition(|&b| b != 0 && b != b' ') {
        Some(end) => &raw[..=end],
        None => &[][..],
    };
    let joined: Vec<u8> = trimmed.iter().map(|&b| if b == 0 { b' ' } else { b }).collect();
    String::from_utf8_lossy(&joined).into_owned()
}

type Key = (u32, u64);

/// The worker's answers: (pid, start time), the comm it was asked with, and what it read.
type Answers = Arc<Mutex<Vec<(Key, Arc<str>, Answer)>>>;

/// What the worker found.
#[derive(Debug, PartialEq)]
enum Answer {
    Line(Arc<str>),
    /// The process was gone (or another had its pid, or it is a zombie): not asked again.
    Gone,
    /// No arguments yet: a process caught inside execve (its new memory has no arguments until
    /// the kernel copies them in): asked again at the next sample.
    Later,
}

/// Command lines read off the sampling thread (see the module comment). A process that execs
/// keeps its pid and start time: its command line is asked for again when its comm changes.
pub struct Cmdlines {
    tx: Option<SyncSender<(PathBuf, Key, Arc<str>)>>,
    answers: Answers,
    /// By process: the comm it had when asked, and its command line.
    known: HashMap<Key, (Arc<str>, Arc<str>)>,
    /// Asked for, with the comm then (and gone ones, not to be asked again).
    asked: HashMap<Key, Arc<str>>,
}

impl Cmdlines {
    pub fn new() -> Cmdlines {
        Cmdlines { tx: None, answers: Arc::default(), known: HashMap::new(), asked: HashMap::new() }
    }

    /// The command line of the process (pid, start time, its comm now) under `proc` if read by
    /// now; asks for it otherwise (once per comm). Never waits for the worker.
    pub fn get(&mut self, proc: &Path, pid: u32, start_ticks: u64, comm: &Arc<str>) -> Option<Arc<str>> {
        let key = (pid, start_ticks);
        match self.known.get(&key) {
            Some((c, line)) if c == comm => return Some(line.clone()),
            // It exec'd since: ask again.
            Some(_) => {
                self.known.remove(&key);
                self.asked.remove(&key);
            }
            None => {}
        }
        if self.asked.get(&key).is_none_or(|c| c != comm) && self.ask(proc, key, comm) {
            self.asked.insert(key, comm.clone());
        }
        None
    }

    /// Takes the worker's answers so far (one short lock), and forgets the processes not in
    /// `listed` (pid, start time; sorted).
    pub fn update(&mut self, listed: &[Key]) {
        if let Ok(mut a) = self.answers.lock() {
            for (key, comm, answer) in a.drain(..) {
                match answer {
                    Answer::Line(line) => {
                        self.known.insert(key, (comm, line));
                    }
                    // Left in `asked`: not asked again.
                    Answer::Gone => {}
                    Answer::Later => {
                        self.asked.remove(&key);
                    }
                }
            }
        }
        let listed = |k: &Key| listed.binary_search(k).is_ok();
        self.known.retain(|k, _| listed(k));
        self.asked.retain(|k, _| listed(k));
    }

    fn ask(&mut self, proc: &Path, key: Key, comm: &Arc<str>) -> bool {
        if self.tx.is_none() {
            let (tx, rx) = sync_channel(QUEUE);
            let answers = self.answers.clone();
            let spawned =
                std::thread::Builder::new().name("ioscope-cmdline".into()).spawn(move || work(&rx, &answers));
            if spawned.is_err() {
                return false;
            }
            self.tx = Some(tx);
        }
        match self.tx.as_ref().map(|tx| tx.try_send((proc.to_path_buf(), key, comm.clone()))) {
            Some(Ok(())) => true,
            Some(Err(TrySendError::Full(_))) | None => false,
            Some(Err(TrySendError::Disconnected(_))) => {
                self.tx = None;
                false
            }
        }
    }
}

impl Default for Cmdlines {
    fn default() -> Self {
        Cmdlines::new()
    }
}

/// The worker: reads each asked command line, then checks the pid still names the process
/// asked for (its start time), so a reused pid never gets another process's arguments.
fn work(rx: &Receiver<(PathBuf, Key, Arc<str>)>, answers: &Answers) {
    let mut buf = vec![0u8; MAX_CMDLINE];
    for (proc, (pid, start_ticks), comm) in rx {
        let cmdline = read_cmdline(&proc, pid, start_ticks, &mut buf);
        match answers.lock() {
            Ok(mut a) => a.push(((pid, start_ticks), comm, cmdline)),
            Err(_) => return,
        }
    }
}

/// PF_KTHREAD in /proc/PID/stat's flags: a kernel thread, whose command line is empty.
const PF_KTHREAD: u32 = 0x0020_0000;

fn read_cmdline(proc: &Path, pid: u32, start_ticks: u64, buf: &mut [u8]) -> Answer {
    use procfs::FromRead;
    let dir = proc.join(pid.to_string());
    let Ok(mut f) = File::open(dir.join("cmdline")) else { return Answer::Gone };
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Answer::Gone,
        }
    }
    let Ok(stat) = procfs::process::Stat::from_file(dir.join("stat")) else { return Answer::Gone };
    if stat.starttime != start_ticks || stat.state == 'Z' {
        return Answer::Gone;
    }
    let line = format_cmdline(&buf[..n]);
    if line.is_empty() && stat.flags & PF_KTHREAD == 0 {
        return Answer::Later;
    }
    Answer::Line(line.into())
}

/// User names by uid from /etc/passwd (see the module comment), read again when a uid is not
/// in it, at most once a minute.
pub struct UserNames {
    path: PathBuf,
    names: HashMap<u32, Arc<str>>,
    read_at: Option<Instant>,
}

/// How long a uid the file lacks waits before the file is read again.
const REREAD: Duration = Duration::from_secs(60);

impl UserNames {
    pub fn new(path: &Path) -> UserNames {
        UserNames { path: path.to_path_buf(), names: HashMap::new(), read_at: None }
    }

    /// The name of `uid`, or the uid as a number when /etc/passwd does not have it.
    pub fn name(&mut self, uid: u32) -> Arc<str> {
        if let Some(n) = self.names.get(&uid) {
            return n.clone();
        }
        if self.read_at.is_none_or(|t| t.elapsed() >= REREAD) {
            self.read_at = Some(Instant::now());
            if let Ok(text) = std::fs::read(&self.path) {
                self.names = parse_passwd(&String::from_utf8_lossy(&text));
            }
            if let Some(n) = self.names.get(&uid) {
                return n.clone();
            }
        }
        let n: Arc<str> = uid.to_string().into();
        self.names.insert(uid, n.clone());
        n
    }
}

/// name:password:uid:... lines; the first name of a uid wins (as getpwuid finds it).
fn parse_passwd(text: &str) -> HashMap<u32, Arc<str>> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let mut f = line.split(':');
        let (Some(name), Some(_), Some(uid)) = (f.next(), f.next(), f.next()) else { continue };
        if let (false, Ok(uid)) = (name.is_empty() || name.starts_with('#'), uid.parse::<u32>()) {
            out.entry(uid).or_insert_with(|| name.into());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_are_arguments_joined_by_spaces() {
        assert_eq!(format_cmdline(b"fio\0--name=a\0--rw=read\0"), "fio --name=a --rw=read");
        // setproctitle pads with NULs or spaces.
        assert_eq!(format_cmdline(b"postgres: checkpointer   \0\0\0\0"), "postgres: checkpointer");
        assert_eq!(format_cmdline(b""), "");
        assert_eq!(format_cmdline(b"\0\0"), "");
        // Not escaped here (the views do), cut at MAX_CMDLINE.
        assert_eq!(format_cmdline(b"a\x1b[2J\0b"), "a\x1b[2J b");
        assert_eq!(format_cmdline(&vec![b'x'; MAX_CMDLINE + 10]).len(), MAX_CMDLINE);
    }

    #[test]
    fn passwd_names_by_uid_first_wins() {
        let names = parse_passwd("root:x:0:0:root:/root:/bin/bash\n#c:x:5:5\n\nbad\ntoor:x:0:0::/:/bin/sh\npostgres:x:110:118::/var/lib/postgresql:/bin/bash\n");
        assert_eq!(names.get(&0).map(|n| &**n), Some("root"));
        assert_eq!(names.get(&110).map(|n| &**n), Some("postgres"));
        assert_eq!(names.len(), 2);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("passwd");
        std::fs::write(&path, "daemon:x:1:1::/:/bin/false\n").unwrap();
        let mut users = UserNames::new(&path);
        assert_eq!(&*users.name(1), "daemon");
        assert_eq!(&*users.name(4242), "4242");
    }

    /// A child's own command line arrives without the sampler waiting, keyed by pid and start
    /// time; once the child is gone it is forgotten.
    #[test]
    fn a_command_line_comes_from_the_worker() {
        use procfs::FromRead;
        let proc = Path::new("/proc");
        // A shell that stays (not exec'ing its last command) with an argument holding a space;
        // `sleep 30 -- "x y"` exits at once (an invalid interval) and the test raced its exit.
        let mut child =
            std::process::Command::new("sh").args(["-c", "sleep 30; true", "x y"]).spawn().unwrap();
        let pid = child.id();
        // Asked once the child runs sh: a command line read before its exec is the parent's.
        for _ in 0..500 {
            if std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sh") {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let start = procfs::process::Stat::from_file(format!("/proc/{pid}/stat")).unwrap().starttime;
        let mut c = Cmdlines::new();
        let comm: Arc<str> = "sh".into();
        let mut got = c.get(proc, pid, start, &comm);
        for _ in 0..200 {
            if got.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            c.update(&[(pid, start)]);
            got = c.get(proc, pid, start, &comm);
        }
        assert_eq!(got.as_deref(), Some("sh -c sleep 30; true x y"));
        // Another start time under the pid: not this command line.
        assert_eq!(c.get(proc, pid, start + 1, &comm), None);
        // Another comm (an exec): asked again, not the old line.
        assert_eq!(c.get(proc, pid, start, &"other".into()), None);
        child.kill().unwrap();
        child.wait().unwrap();
        c.update(&[]);
        assert!(c.known.is_empty() && c.asked.is_empty());
    }
}
