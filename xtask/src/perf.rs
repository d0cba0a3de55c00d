//! `cargo xtask perf`: measures ioscope's own cost on this machine against its targets.
//!
//! Builds the release binary, tops the machine up to ~500 processes with idle `sleep` children (the
//! per-process scan of /proc is the cost that grows with the machine), then runs two ioscopes side
//! by side for a while: `--batch` with its output thrown away, and the TUI inside a detached tmux
//! session. It reads their CPU time (utime+stime from /proc/PID/stat) and memory (VmHWM, VmRSS from
//! /proc/PID/status), and times the TUI's first frame by polling `tmux capture-pane` for the
//! header. Figures are printed with pass/fail; any miss makes the command fail.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;

/// The targets (xtask/README.md, "cargo xtask perf").
const CPU_TARGET_PERCENT: f64 = 1.0;
const RSS_TARGET_BYTES: u64 = 30_000_000;
const FIRST_FRAME_TARGET: Duration = Duration::from_millis(200);
/// How long to wait for a first frame before calling it a failure.
const FIRST_FRAME_GIVE_UP: Duration = Duration::from_secs(10);
/// Start-up (eBPF load, first samples) is not steady-state cost: CPU is measured after this.
const WARM_UP: Duration = Duration::from_secs(3);

#[derive(Debug, Parser)]
#[command(name = "cargo xtask perf", about = "Measure ioscope's CPU, memory and first-frame time")]
struct PerfArgs {
    /// Seconds of steady-state measurement (after a 3 s warm-up).
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// Top the machine up to this many processes with idle `sleep` children.
    #[arg(long, default_value_t = 500)]
    processes: usize,
    /// Run ioscope with --no-bpf (procfs only).
    #[arg(long)]
    no_bpf: bool,
    /// Run a fio load in this directory for the whole run (buffered 4 KiB random reads and writes
    /// over 8 files of 64 MiB, libaio at depth 8, plus an fsync every 64 writes): the TUI's and
    /// --batch's memory under I/O, every probe firing. Their CPU is then the load's to read, not
    /// idle cost (the target is for an idle machine).
    #[arg(long)]
    fio: Option<PathBuf>,
    /// Text whose appearance in the tmux pane marks the TUI's first frame with data (default: this
    /// machine's hostname, which the header shows once the first sample is drawn).
    #[arg(long)]
    expect: Option<String>,
}

pub fn run(args: &[String]) -> Result<()> {
    let args = PerfArgs::try_parse_from(std::iter::once("perf".to_string()).chain(args.iter().cloned()))?;
    // Measured as users run it: the kernel's per-program timing off (crate::bpf_stats).
    let _bpf_stats = crate::bpf_stats::BpfStats::off();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("xtask has no parent directory")?;
    let bin = build_release(root)?;
    let ticks_per_s = clock_ticks_per_second();

    let before = count_processes()?;
    let fillers = Fillers::spawn(args.processes.saturating_sub(before))?;
    let total = count_processes()?;
    println!(
        "ioscope perf: {total} processes ({} idle sleep fillers), --interval 1, eBPF {}, {} s measured after {} s warm-up",
        fillers.0.len(),
        if args.no_bpf { "off (--no-bpf)" } else { "on" },
        args.seconds,
        WARM_UP.as_secs()
    );

    let _fio = match &args.fio {
        Some(dir) => Some(FioLoad::start(dir, args.seconds + WARM_UP.as_secs() + 60)?),
        None => None,
    };
    let mut ioscope_args = vec!["--interval".to_string(), "1".to_string()];
    if args.no_bpf {
        ioscope_args.push("--no-bpf".into());
    }

    // The TUI first, alone, so that its first-frame time is not inflated by the headless run starting.
    let tui = TmuxSession::start(&bin, &ioscope_args)?;
    let expect = match args.expect {
        Some(text) => text,
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .context("reading the hostname")?
            .trim()
            .to_string(),
    };
    let first_frame = tui.wait_for(&expect, FIRST_FRAME_GIVE_UP);
    let tui_pid = tui.pane_pid().ok();

    let mut batch = Command::new(&bin)
        .arg("--batch")
        .args(&ioscope_args)
        .stdout(Stdio::null())
        .stdin(Stdio::null())
        .spawn()
        .context("starting ioscope --batch")?;

    std::thread::sleep(WARM_UP);
    let batch_start = cpu_ticks(batch.id());
    let tui_start = tui_pid.map(cpu_ticks);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(args.seconds));
    let wall = t0.elapsed().as_secs_f64();
    let batch_end = cpu_ticks(batch.id());
    let batch_mem = memory(batch.id());
    let tui_end = tui_pid.map(cpu_ticks);
    let tui_mem = tui_pid.map(memory);
    if let Ok(Some(status)) = batch.try_wait() {
        bail!("ioscope --batch exited early ({status})");
    }
    let _ = batch.kill();
    let _ = batch.wait();
    drop(tui);
    drop(fillers);

    let mut misses = 0;
    let mut report = |label: &str, cpu: Result<f64>, mem: Result<(u64, u64)>| {
        match cpu {
            Ok(pct) => {
                let ok = pct < CPU_TARGET_PERCENT;
                misses += usize::from(!ok);
                println!(
                    "{label:<22} CPU  {pct:>8.3} % of one core   {} (target < {CPU_TARGET_PERCENT} %)",
                    verdict(ok)
                );
            }
            Err(e) => {
                misses += 1;
                println!("{label:<22} CPU  not measured: {e:#}   FAIL");
            }
        }
        match mem {
            Ok((hwm, rss)) => {
                let ok = hwm < RSS_TARGET_BYTES;
                misses += usize::from(!ok);
                println!(
                    "{label:<22} RSS  {:>8.1} MB peak (VmHWM), {:.1} MB now   {} (target < {} MB)",
                    mb(hwm),
                    mb(rss),
                    verdict(ok),
                    mb(RSS_TARGET_BYTES)
                );
            }
            Err(e) => {
                misses += 1;
                println!("{label:<22} RSS  not measured: {e:#}   FAIL");
            }
        }
    };
    let percent = |start: Result<u64>, end: Result<u64>| -> Result<f64> {
        let used = end?.saturating_sub(start?) as f64 / ticks_per_s;
        Ok(100.0 * used / wall)
    };
    report("ioscope --batch", percent(batch_start, batch_end), batch_mem);
    match (tui_start, tui_end, tui_mem) {
        (Some(s), Some(e), Some(m)) => report("ioscope TUI (tmux)", percent(s, e), m),
        _ => report(
            "ioscope TUI (tmux)",
            Err(anyhow::anyhow!("no TUI process")),
            Err(anyhow::anyhow!("no TUI")),
        ),
    }
    match first_frame {
        Ok(t) => {
            let ok = t < FIRST_FRAME_TARGET;
            misses += usize::from(!ok);
            println!(
                "{:<22} {:>8.1} ms   {} (target < {} ms)",
                "TUI first frame",
                t.as_secs_f64() * 1e3,
                verdict(ok),
                FIRST_FRAME_TARGET.as_millis()
            );
        }
        Err(e) => {
            misses += 1;
            println!("{:<22} not measured: {e:#}   FAIL", "TUI first frame");
        }
    }
    if misses > 0 {
        bail!("{misses} performance figure(s) missed their target or could not be measured");
    }
    Ok(())
}

/// The machine's 1, 5 and 15 minute load averages, as /proc/loadavg gives them.
pub(crate) fn load_average() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

pub(crate) fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "FAIL"
    }
}

pub(crate) fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

pub(crate) fn build_release(root: &Path) -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(root)
        .args(["build", "--release", "--package", "ioscope", "--bin", "ioscope"])
        .status()
        .context("running cargo build --release")?;
    if !status.success() {
        bail!("cargo build --release failed ({status})");
    }
    let bin = root.join("target/release/ioscope");
    if !bin.is_file() {
        bail!("{} is missing after the build", bin.display());
    }
    flush_writes();
    Ok(bin)
}

/// Writes what is dirty and waits for it (sync(2)). A build leaves hundreds of MB of dirty pages
/// in target/: a benchmark started right after it measured ioscope watching the flusher write
/// them back, not an idle machine (the churn benchmark's "idle" read 2 % in such runs, 0.9 % in
/// the next one).
pub(crate) fn flush_writes() {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
}

/// USER_HZ: the unit of utime/stime in /proc/PID/stat (100 on every mainstream Linux build).
pub(crate) fn clock_ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|&t| t > 0.0)
        .unwrap_or(100.0)
}

pub(crate) fn count_processes() -> Result<usize> {
    let entries = std::fs::read_dir("/proc").context("reading /proc")?;
    Ok(entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .count())
}

/// utime + stime of a process, in clock ticks.
pub(crate) fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat =
        std::fs::read_to_string(format!("/proc/{pid}/stat")).with_context(|| format!("pid {pid} gone"))?;
    parse_cpu_ticks(&stat).with_context(|| format!("cannot parse /proc/{pid}/stat"))
}

/// The comm field is in parentheses and may hold spaces or parentheses, so fields are counted from
/// the *last* ')': after it come state (field 3) … utime (field 14) and stime (field 15).
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// (VmHWM, VmRSS) in bytes.
pub(crate) fn memory(pid: u32) -> Result<(u64, u64)> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).with_context(|| format!("pid {pid} gone"))?;
    let kb = |key: &str| -> Result<u64> {
        let line = status.lines().find_map(|l| l.strip_prefix(key)).with_context(|| format!("no {key}"))?;
        let n: u64 =
            line.trim().trim_end_matches("kB").trim().parse().with_context(|| format!("bad {key}"))?;
        Ok(n * 1024)
    };
    Ok((kb("VmHWM:")?, kb("VmRSS:")?))
}

/// Idle `sleep` processes that make the machine look busy to a /proc scan; killed on drop.
pub(crate) struct Fillers(pub(crate) Vec<Child>);

impl Fillers {
    pub(crate) fn spawn(n: usize) -> Result<Fillers> {
        let mut fillers = Fillers(Vec::with_capacity(n));
        for _ in 0..n {
            let child = Command::new("sleep")
                .arg("3600")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .context("spawning a sleep filler")?;
            fillers.0.push(child);
        }
        Ok(fillers)
    }
}

impl Drop for Fillers {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
        }
        for child in &mut self.0 {
            let _ = child.wait();
        }
    }
}

/// A detached tmux session whose single pane runs the TUI; killed on drop.
struct TmuxSession {
    name: String,
    /// When ioscope was launched in the pane.
    started: Instant,
}

impl TmuxSession {
    /// Creates the session around an idle command first, so that the timer below starts when
    /// ioscope is launched, not when the tmux server starts.
    fn start(bin: &Path, args: &[String]) -> Result<TmuxSession> {
        let name = format!("ioscope-perf-{}", std::process::id());
        tmux(&["new-session", "-d", "-s", &name, "-x", "160", "-y", "50", "sleep", "600"])?;
        let mut session = TmuxSession { name, started: Instant::now() };
        // Keep the pane (and its text) if ioscope exits, so a failure can be shown.
        tmux(&["set-option", "-t", &session.name, "remain-on-exit", "on"])?;
        session.started = Instant::now();
        let mut cmd: Vec<&str> = vec!["respawn-pane", "-k", "-t", &session.name];
        // Several arguments: tmux runs the program directly, without a shell in between.
        let bin = bin.to_str().context("binary path is not UTF-8")?;
        cmd.push(bin);
        cmd.extend(args.iter().map(String::as_str));
        tmux(&cmd)?;
        Ok(session)
    }

    fn capture(&self) -> Result<String> {
        tmux(&["capture-pane", "-p", "-t", &self.name])
    }

    /// Time from launch until `text` is on the screen.
    fn wait_for(&self, text: &str, give_up: Duration) -> Result<Duration> {
        loop {
            let screen = self.capture()?;
            if screen.contains(text) {
                return Ok(self.started.elapsed());
            }
            if self.started.elapsed() > give_up {
                bail!("{text:?} not on screen after {give_up:?}; the pane shows:\n{}", screen.trim_end());
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn pane_pid(&self) -> Result<u32> {
        let pid = tmux(&["display-message", "-p", "-t", &self.name, "#{pane_pid}"])?;
        pid.trim().parse().with_context(|| format!("bad pane pid {pid:?}"))
    }
}

impl Drop for TmuxSession {
    fn drop(&mut self) {
        let _ = tmux(&["kill-session", "-t", &self.name]);
    }
}

fn tmux(args: &[&str]) -> Result<String> {
    let out = Command::new("tmux").args(args).output().context("running tmux (is it installed?)")?;
    if !out.status.success() {
        bail!("tmux {}: {}", args.first().unwrap_or(&""), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A fio job running in the background until dropped.
struct FioLoad(std::process::Child, PathBuf);

impl FioLoad {
    fn start(dir: &Path, seconds: u64) -> Result<FioLoad> {
        let dir = dir.join(format!("ioscope-perf-fio-{}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let child = Command::new("fio")
            .args([
                "--name=ioscope-perf-load".to_string(),
                format!("--directory={}", dir.display()),
                "--rw=randrw".into(),
                "--bs=4k".into(),
                "--size=512m".into(),
                "--nrfiles=8".into(),
                "--ioengine=libaio".into(),
                "--iodepth=8".into(),
                "--fsync=64".into(),
                "--time_based".into(),
                format!("--runtime={seconds}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .context("starting fio (is it installed?)")?;
        println!("fio load: 4 KiB buffered randrw over 8 files in {}, fsync every 64 writes", dir.display());
        Ok(FioLoad(child, dir))
    }
}

impl Drop for FioLoad {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_counted_after_the_last_parenthesis() {
        // comm "a) b" contains a parenthesis and a space; utime 7, stime 5.
        let stat = "42 (a) b) S 1 42 42 0 -1 4194304 100 0 0 0 7 5 0 0 20 0 1 0 300 1000 50";
        assert_eq!(parse_cpu_ticks(stat), Some(12));
        assert_eq!(parse_cpu_ticks("42 (x) S 1"), None);
    }
}
