//! `cargo xtask serve-perf`: what `ioscope serve` costs, against its targets (xtask/README.md):
//! a scrape under 20 ms at the default series count with ~500 processes, under 1 % of one core
//! at a 15 s scrape interval with 1 s sampling, and RSS under 30 MB.
//!
//! Builds the release binary, tops the machine up to ~500 processes with idle `sleep` children,
//! starts `ioscope serve --interval 1` on a free port, then (1) times N back-to-back scrapes from
//! request to last byte, on fresh connections as Prometheus's first scrape would be, and (2)
//! scrapes every 15 s for the measured period, counting the exporter's CPU ticks (utime+stime)
//! and reading VmHWM/VmRSS at the end. `ioscope --batch --interval 1 > /dev/null` runs beside it
//! as the floor of the same run: the same sampling and Model with no server, so what the exporter
//! adds is told apart from what the machine's activity costs every sampler (the probes' maps grow
//! with it).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;

use crate::perf::{
    build_release, clock_ticks_per_second, count_processes, cpu_ticks, mb, memory, verdict, Fillers,
};

const SCRAPE_TARGET: Duration = Duration::from_millis(20);
const CPU_TARGET_PERCENT: f64 = 1.0;
const RSS_TARGET_BYTES: u64 = 30_000_000;
const WARM_UP: Duration = Duration::from_secs(3);

#[derive(Debug, Parser)]
#[command(name = "cargo xtask serve-perf", about = "Measure ioscope serve's scrape time, CPU and memory")]
struct Args {
    /// Seconds of CPU measurement (scraped every 15 s), after a 3 s warm-up.
    #[arg(long, default_value_t = 120)]
    seconds: u64,
    /// Back-to-back scrapes timed.
    #[arg(long, default_value_t = 200)]
    scrapes: usize,
    /// Top the machine up to this many processes with idle `sleep` children.
    #[arg(long, default_value_t = 500)]
    processes: usize,
    /// Run ioscope with --no-bpf (procfs only).
    #[arg(long)]
    no_bpf: bool,
    /// Extra arguments for `ioscope serve` (e.g. "--top-processes 20").
    #[arg(long, allow_hyphen_values = true)]
    serve_args: Option<String>,
}

pub fn run(args: &[String]) -> Result<()> {
    let args = Args::try_parse_from(std::iter::once("serve-perf".to_string()).chain(args.iter().cloned()))?;
    // Measured as users run it: the kernel's per-program timing off (crate::bpf_stats).
    let _bpf_stats = crate::bpf_stats::BpfStats::off();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("xtask has no parent directory")?;
    let bin = build_release(root)?;
    let ticks_per_s = clock_ticks_per_second();
    let fillers = Fillers::spawn(args.processes.saturating_sub(count_processes()?))?;
    let total = count_processes()?;

    let mut cmd = Command::new(&bin);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--interval", "1"]);
    if args.no_bpf {
        cmd.arg("--no-bpf");
    }
    if let Some(extra) = &args.serve_args {
        cmd.args(extra.split_whitespace());
    }
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn()?;
    let pid = child.id();
    let mut err = BufReader::new(child.stderr.take().context("stderr")?);
    let port = loop {
        let mut line = String::new();
        if err.read_line(&mut line)? == 0 {
            bail!("ioscope serve ended before listening");
        }
        if let Some(rest) = line.split("http://127.0.0.1:").nth(1) {
            break rest.split('/').next().unwrap_or("").parse::<u16>()?;
        }
    };
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let mut batch_cmd = Command::new(&bin);
    batch_cmd.args(["--batch", "--interval", "1"]);
    if args.no_bpf {
        batch_cmd.arg("--no-bpf");
    }
    let mut batch = batch_cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
    let result = measure(&args, port, pid, batch.id(), ticks_per_s, total, fillers.0.len());
    let _ = batch.kill();
    let _ = batch.wait();
    let _ = child.kill();
    let _ = child.wait();
    drop(fillers);
    result
}

fn measure(
    args: &Args,
    port: u16,
    pid: u32,
    batch: u32,
    ticks_per_s: f64,
    total: usize,
    fillers: usize,
) -> Result<()> {
    let started = Instant::now();
    while scrape(port).map(|(status, _)| status).ok() != Some(200) {
        if started.elapsed() > Duration::from_secs(60) {
            bail!("no 200 from /metrics within 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(WARM_UP);
    println!(
        "ioscope serve-perf: {total} processes ({fillers} idle sleep fillers), --interval 1, eBPF {}, serve args: {}",
        if args.no_bpf { "off (--no-bpf)" } else { "on" },
        args.serve_args.as_deref().unwrap_or("(default)")
    );

    let mut times = Vec::with_capacity(args.scrapes);
    let mut size = 0usize;
    let mut series = 0usize;
    for _ in 0..args.scrapes {
        let t = Instant::now();
        let (status, body) = scrape(port)?;
        times.push(t.elapsed());
        if status != 200 {
            bail!("scrape answered {status}");
        }
        size = body.len();
        series = body.lines().filter(|l| !l.starts_with('#')).count();
    }
    times.sort();
    let pct = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    let (p50, p95, max) = (pct(0.5), pct(0.95), *times.last().context("no scrapes")?);
    println!(
        "scrape ({} back to back, {series} series, {} KB): median {:.2} ms, p95 {:.2} ms, max {:.2} ms  {}",
        args.scrapes,
        size / 1000,
        ms(p50),
        ms(p95),
        ms(max),
        verdict(p95 < SCRAPE_TARGET)
    );

    // Steady state: one scrape every 15 s.
    let t0 = Instant::now();
    let ticks0 = cpu_ticks(pid)?;
    let batch0 = cpu_ticks(batch)?;
    let until = t0 + Duration::from_secs(args.seconds);
    while Instant::now() < until {
        scrape(port)?;
        std::thread::sleep(Duration::from_secs(15).min(until.saturating_duration_since(Instant::now())));
    }
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu_pct = 100.0 * (cpu_ticks(pid)? - ticks0) as f64 / ticks_per_s / elapsed;
    let batch_pct = 100.0 * (cpu_ticks(batch)? - batch0) as f64 / ticks_per_s / elapsed;
    let (hwm, rss) = memory(pid)?;
    let (batch_hwm, batch_rss) = memory(batch)?;
    println!(
        "floor, ioscope --batch --interval 1 in the same run: CPU {batch_pct:.2} %, peak RSS {:.1} MB, RSS at the end {:.1} MB",
        mb(batch_hwm),
        mb(batch_rss)
    );
    println!(
        "CPU over {} s (15 s scrapes, 1 s sampling): {cpu_pct:.2} % of one core  {}",
        args.seconds,
        verdict(cpu_pct < CPU_TARGET_PERCENT)
    );
    println!(
        "memory: peak RSS (VmHWM) {:.1} MB, RSS at the end {:.1} MB  {}",
        mb(hwm),
        mb(rss),
        verdict(rss < RSS_TARGET_BYTES)
    );
    println!(
        "the exporter's own share (serve minus the --batch floor): CPU {:+.2} % of one core, RSS {:+.1} MB",
        cpu_pct - batch_pct,
        mb(rss) - mb(batch_rss)
    );
    if p95 >= SCRAPE_TARGET || cpu_pct >= CPU_TARGET_PERCENT || rss >= RSS_TARGET_BYTES {
        bail!("a target was missed");
    }
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// GET /metrics on a fresh connection: status and body.
fn scrape(port: u16) -> Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
    let mut buf = String::new();
    s.read_to_string(&mut buf)?;
    let (head, body) = buf.split_once("\r\n\r\n").context("no HTTP head")?;
    let status = head.split_whitespace().nth(1).context("no status")?.parse()?;
    Ok((status, body.to_string()))
}
