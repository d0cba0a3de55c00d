//! The job matrix: what `ioscope bench` runs, parsed from its flags. Pure and unit-tested; nothing
//! here touches the system.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The I/O pattern of a job, named as fio names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    Read,
    Write,
    RandRead,
    RandWrite,
}

impl Rw {
    pub fn is_write(self) -> bool {
        matches!(self, Rw::Write | Rw::RandWrite)
    }
    pub fn is_random(self) -> bool {
        matches!(self, Rw::RandRead | Rw::RandWrite)
    }
    pub fn name(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::RandRead => "randread",
            Rw::RandWrite => "randwrite",
        }
    }
}

/// How the file is accessed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// O_DIRECT: the page cache is bypassed; buffers and offsets are aligned.
    Direct,
    /// Plain pread/pwrite through the page cache (readahead, write-back).
    Buffered,
    /// The file mapped with mmap; reads and writes are memory copies, page faults do the I/O.
    Mmap,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Direct => "direct",
            Mode::Buffered => "buffered",
            Mode::Mmap => "mmap",
        }
    }
}

/// How requests are issued: the engine a job ran with is in its result (`jobs[].engine`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Engine {
    /// One thread keeps QD requests in flight on an io_uring, submitting each as a slot frees
    /// (fio's `ioengine=io_uring iodepth=QD`, with its default batching of one).
    #[serde(rename = "io_uring")]
    IoUring,
    /// QD threads with one synchronous pread/pwrite each (fio's `ioengine=psync numjobs=QD`);
    /// for mmap jobs, QD threads copying to and from the mapping.
    #[serde(rename = "threads")]
    Threads,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::IoUring => "io_uring",
            Engine::Threads => "threads",
        }
    }
}

/// `--engine`: io_uring where the kernel allows it (`auto`), or one of them by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineChoice {
    Auto,
    Only(Engine),
}

pub fn parse_engine(s: &str) -> Result<EngineChoice, String> {
    match s.trim() {
        "auto" => Ok(EngineChoice::Auto),
        "io_uring" | "io-uring" | "uring" => Ok(EngineChoice::Only(Engine::IoUring)),
        "threads" | "psync" => Ok(EngineChoice::Only(Engine::Threads)),
        _ => Err(format!("'{s}' is not an engine: use auto, io_uring, threads")),
    }
}

/// When write jobs call fsync.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "n")]
pub enum Fsync {
    /// Never: the data may still be dirty in memory when the job ends.
    None,
    /// Once, after the last write (fio's `end_fsync=1`); its time is part of the job's.
    End,
    /// After every N writes (fio's `fsync=N`), and once at the end.
    Every(u64),
}

impl fmt::Display for Fsync {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fsync::None => write!(f, "none"),
            Fsync::End => write!(f, "end"),
            Fsync::Every(n) => write!(f, "every={n}"),
        }
    }
}

/// Whether the file's pages are dropped from the page cache before each job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Cache {
    /// `posix_fadvise(DONTNEED)` on the file before each job (and `cachestat` to check it worked).
    Cold,
    /// Leave the cache as the previous job left it.
    Warm,
}

/// One job of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpec {
    pub rw: Rw,
    /// Block size, bytes.
    pub bs: u64,
    pub mode: Mode,
    /// Queue depth: requests in flight (io_uring entries, or threads with one request each).
    pub qd: u32,
}

impl JobSpec {
    /// "randread 4K qd1": the job without its mode (direct and buffered share it).
    pub fn key(&self) -> String {
        format!("{} {} qd{}", self.rw.name(), size_label(self.bs), self.qd)
    }
}

/// Parses a size: a whole number with an optional unit. k/K/KiB = 1024, m/M/MiB = 1024², g/G/GiB,
/// t/T/TiB likewise (binary, as fio and dd read "4k"); kB/MB/GB are decimal (1000). A bare
/// number is bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("'{s}' is not a size (examples: 4k, 1m, 512, 2GiB)"));
    }
    let n: u64 = num.parse().map_err(|_| format!("'{s}' is too large"))?;
    let mult: u64 = match unit.trim() {
        "" | "b" | "B" => 1,
        "k" | "K" | "KiB" | "kiB" => 1 << 10,
        "m" | "M" | "MiB" => 1 << 20,
        "g" | "G" | "GiB" => 1 << 30,
        "t" | "T" | "TiB" => 1 << 40,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        other => return Err(format!("unknown size unit '{other}' in '{s}' (use k, m, g, t)")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("'{s}' is too large"))
}

/// A size the way the user would write it: "4K", "1M", "1536" (exact; never rounded).
pub fn size_label(bytes: u64) -> String {
    crate::ui::format::exact_bytes(bytes)
}

/// Parses a comma-separated list with `item`, rejecting an empty list and duplicates.
pub fn parse_list<T: PartialEq>(s: &str, item: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let v = item(part.trim())?;
        if out.contains(&v) {
            return Err(format!("'{}' is listed twice", part.trim()));
        }
        out.push(v);
    }
    Ok(out)
}

pub fn parse_rw(s: &str) -> Result<Rw, String> {
    match s {
        "read" => Ok(Rw::Read),
        "write" => Ok(Rw::Write),
        "randread" => Ok(Rw::RandRead),
        "randwrite" => Ok(Rw::RandWrite),
        _ => Err(format!("'{s}' is not a pattern: use read, write, randread, randwrite")),
    }
}

pub fn parse_mode(s: &str) -> Result<Mode, String> {
    match s {
        "direct" => Ok(Mode::Direct),
        "buffered" => Ok(Mode::Buffered),
        "mmap" => Ok(Mode::Mmap),
        _ => Err(format!("'{s}' is not a mode: use direct, buffered, mmap")),
    }
}

pub fn parse_bs(s: &str) -> Result<u64, String> {
    let bs = parse_size(s)?;
    if bs == 0 {
        return Err("a block size must be at least 1 byte".into());
    }
    if bs > 64 << 20 {
        return Err(format!("block size {s} is over the 64M limit"));
    }
    Ok(bs)
}

pub fn parse_qd(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n @ 1..=256) => Ok(n),
        _ => Err(format!("'{s}' is not a queue depth: use 1 to 256")),
    }
}

pub fn parse_fsync(s: &str) -> Result<Fsync, String> {
    match s.trim() {
        "none" => Ok(Fsync::None),
        "end" => Ok(Fsync::End),
        other => match other.strip_prefix("every=").map(|n| n.parse::<u64>()) {
            Some(Ok(n)) if n > 0 => Ok(Fsync::Every(n)),
            _ => Err(format!("'{s}' is not an fsync policy: use none, end, every=N (N ≥ 1)")),
        },
    }
}

pub fn parse_cache(s: &str) -> Result<Cache, String> {
    match s.trim() {
        "cold" => Ok(Cache::Cold),
        "warm" => Ok(Cache::Warm),
        _ => Err(format!("'{s}' is not a cache policy: use cold or warm")),
    }
}

/// Seconds (fractions allowed) or a number with s/ms/m: "3", "1.5s", "500ms", "2m".
pub fn parse_runtime(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    let v: f64 =
        num.trim().parse().map_err(|_| format!("'{s}' is not a duration (examples: 3, 1.5s, 500ms)"))?;
    let secs = v * mult;
    if !(0.1..=86_400.0).contains(&secs) {
        return Err(format!("runtime '{s}' must be between 0.1 s and 24 h"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The jobs in run order: for each pattern, block size and queue depth, every mode back to back
/// (so direct and buffered of the same job see the same machine state).
pub fn matrix(rws: &[Rw], sizes: &[u64], qds: &[u32], modes: &[Mode]) -> Vec<JobSpec> {
    let mut jobs = Vec::new();
    for &rw in rws {
        for &bs in sizes {
            for &qd in qds {
                for &mode in modes {
                    jobs.push(JobSpec { rw, bs, mode, qd });
                }
            }
        }
    }
    jobs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_and_decimal_units() {
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert!(parse_size("k").unwrap_err().contains("not a size"));
        assert!(parse_size("4q").unwrap_err().contains("unknown size unit 'q'"));
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("20000000t").unwrap_err().contains("too large"));
    }

    #[test]
    fn size_labels_are_exact() {
        assert_eq!(size_label(4096), "4K");
        assert_eq!(size_label(1 << 20), "1M");
        assert_eq!(size_label(1536), "1536");
        assert_eq!(size_label(3 << 30), "3G");
    }

    #[test]
    fn lists_reject_bad_items_and_duplicates() {
        assert_eq!(parse_list("read,randwrite", parse_rw), Ok(vec![Rw::Read, Rw::RandWrite]));
        assert!(parse_list("read,read", parse_rw).unwrap_err().contains("twice"));
        assert!(parse_list("read,", parse_rw).is_err());
        assert!(parse_list("reed", parse_rw).unwrap_err().contains("not a pattern"));
        assert_eq!(parse_list("4k, 1m", parse_bs), Ok(vec![4096, 1 << 20]));
        assert!(parse_bs("0").is_err());
        assert!(parse_bs("128m").is_err());
    }

    #[test]
    fn fsync_cache_qd_runtime() {
        assert_eq!(parse_fsync("every=8"), Ok(Fsync::Every(8)));
        assert_eq!(parse_fsync("end"), Ok(Fsync::End));
        assert!(parse_fsync("every=0").is_err());
        assert!(parse_fsync("sometimes").is_err());
        assert_eq!(parse_cache("warm"), Ok(Cache::Warm));
        assert_eq!(parse_qd("32"), Ok(32));
        assert!(parse_qd("0").is_err() && parse_qd("257").is_err());
        assert_eq!(parse_runtime("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_runtime("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_runtime("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_runtime("0").is_err() && parse_runtime("abc").is_err());
        assert_eq!(parse_engine("auto"), Ok(EngineChoice::Auto));
        assert_eq!(parse_engine("io_uring"), Ok(EngineChoice::Only(Engine::IoUring)));
        assert_eq!(parse_engine("psync"), Ok(EngineChoice::Only(Engine::Threads)));
        assert!(parse_engine("libaio").unwrap_err().contains("not an engine"));
    }

    #[test]
    fn matrix_keeps_modes_of_a_job_together() {
        let jobs = matrix(&[Rw::Read, Rw::Write], &[4096], &[1], &[Mode::Direct, Mode::Buffered]);
        let keys: Vec<String> = jobs.iter().map(|j| format!("{} {}", j.key(), j.mode.name())).collect();
        assert_eq!(
            keys,
            ["read 4K qd1 direct", "read 4K qd1 buffered", "write 4K qd1 direct", "write 4K qd1 buffered"]
        );
    }
}
