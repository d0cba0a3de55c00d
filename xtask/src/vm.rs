//! `cargo xtask vm --kernel 6.1|6.12|5.10 [-- FILTER...]`: the kernel lab. Boots one of Debian's
//! cloud kernels under qemu (TCG: this machine's KVM is nested PVM and does not boot them) with
//! the static `ioscope` from `cargo xtask dist`, an ext4 and an xfs disk, and runs the in-guest
//! suite (`lab-guest`, xtask/src/bin/lab-guest.rs) once: one boot per kernel, every check in it.
//!
//! Everything downloaded or unpacked stays outside the checkout, in `$IOSCOPE_LAB_CACHE`
//! (default /var/cache/ioscope-lab): `debs/` (apt-get download), `kernels/<package>/` (dpkg -x),
//! `apt-<suite>/` (a private apt configuration for a suite this machine's sources lack; the
//! system's apt is never modified), `runs/<series>/` (the last run's initramfs, disks and console
//! log).

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;

use crate::dist;
use crate::support::KERNELS;

#[derive(Debug, Parser)]
#[command(name = "cargo xtask vm", about = "Run the in-guest suite on a Debian kernel under qemu")]
struct Args {
    /// Kernel series: 5.10, 6.1 or 6.12 (Debian's newest cloud-amd64 build of it).
    #[arg(long)]
    kernel: String,
    /// Wall-clock limit for the whole guest run, seconds (TCG runs 10-50x slower than the host).
    #[arg(long, default_value_t = 900)]
    timeout: u64,
    /// Use the cached kernel package without asking apt for a newer one.
    #[arg(long)]
    offline: bool,
    /// ioscope refuses fentry/fexit (IOSCOPE_NO_TRAMPOLINE=1), as a kernel without BPF
    /// trampolines does: the fallbacks run as kprobes and kretprobes, and every check must pass.
    #[arg(long)]
    no_trampoline: bool,
    /// Only the checks whose names contain one of these strings.
    #[arg(last = true)]
    filter: Vec<String>,
}

/// The marker every line the suite reports starts with (see src/bin/lab-guest.rs).
const MARK: &str = "IOSCOPE-LAB";

pub fn run(args: &[String]) -> Result<()> {
    let args = Args::parse_from(std::iter::once("cargo xtask vm".to_string()).chain(args.iter().cloned()));
    let series = args.kernel.as_str();
    let Some(suite) = suite_of(series) else {
        bail!("--kernel {series}: the lab knows {} (6.18 is this machine's own)", known_series());
    };
    let started = Instant::now();
    let cache = cache_dir();
    let kernel = fetch_kernel(&cache, series, suite, args.offline)
        .with_context(|| format!("kernel {series}: getting Debian's cloud-amd64 kernel package"))?;
    println!("kernel {series}: {} ({})", kernel.release, kernel.package);

    let ioscope = dist::run()?;
    let guest = dist::build_static("xtask", &["--bin", "lab-guest"], "lab-guest")?;

    let run_dir = cache.join("runs").join(series);
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir).with_context(|| format!("clearing {}", run_dir.display()))?;
    }
    std::fs::create_dir_all(&run_dir)?;
    let initrd = build_initramfs(&kernel, &ioscope, &guest, &run_dir)?;
    let disks = make_disks(&run_dir)?;
    let prepared = started.elapsed();

    let log = run_dir.join("console.log");
    let cmdline = format!(
        "console=ttyS0 panic=-1 loglevel=4 lab_kernel={series} lab_filter={} lab_no_trampoline={}",
        if args.filter.is_empty() { "-".to_string() } else { args.filter.join(",") },
        u8::from(args.no_trampoline)
    );
    let outcome = boot(&kernel.vmlinuz, &initrd, &disks, &cmdline, &log, Duration::from_secs(args.timeout))?;
    let report = outcome.judge(series, &log);
    println!(
        "kernel {series}: prepared in {:.0} s, guest ran {:.0} s (console log {})",
        prepared.as_secs_f64(),
        outcome.wall.as_secs_f64(),
        log.display()
    );
    report
}

fn known_series() -> String {
    KERNELS.iter().filter(|k| suite_of(k).is_some()).copied().collect::<Vec<_>>().join(", ")
}

/// The Debian suite whose kernel is of that series.
fn suite_of(series: &str) -> Option<&'static str> {
    match series {
        "5.10" => Some("bullseye"),
        "6.1" => Some("bookworm"),
        "6.12" => Some("trixie"),
        _ => None,
    }
}

fn cache_dir() -> PathBuf {
    std::env::var_os("IOSCOPE_LAB_CACHE")
        .map_or_else(|| PathBuf::from("/var/cache/ioscope-lab"), PathBuf::from)
}

/// An unpacked kernel package.
struct Kernel {
    package: String,
    /// `uname -r` of the kernel: the directory name under lib/modules.
    release: String,
    root: PathBuf,
    vmlinuz: PathBuf,
}

/// The newest `linux-image-<series>.*-cloud-amd64-unsigned` apt can give (this machine's sources,
/// else a private configuration for the series' suite), downloaded once into the cache and
/// unpacked once.
fn fetch_kernel(cache: &Path, series: &str, suite: &str, offline: bool) -> Result<Kernel> {
    let debs = cache.join("debs");
    std::fs::create_dir_all(&debs).with_context(|| format!("creating {}", debs.display()))?;
    let mut deb = None;
    if !offline {
        let mut apt = AptConfig::System;
        let mut names = apt.candidates(series)?;
        if names.is_empty() {
            apt = AptConfig::private(cache, suite)?;
            names = apt.candidates(series)?;
        }
        if names.is_empty() {
            eprintln!("kernel {series}: apt offers no linux-image-{series}.*-cloud-amd64-unsigned");
        }
        // Newest first; a mirror may list a package before it serves it (404): the next one then.
        for name in names.iter().take(4) {
            if let Some(found) = cached_deb(&debs, name) {
                deb = Some(found);
                break;
            }
            println!("apt-get download {name}");
            let out = apt.command("apt-get").arg("download").arg(name).current_dir(&debs).output()?;
            if let Some(found) = cached_deb(&debs, name) {
                deb = Some(found);
                break;
            }
            // apt's errors only (its warning about downloading as root is noise here).
            let err = String::from_utf8_lossy(&out.stderr);
            let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("E:")).collect();
            eprintln!("  failed: {}", errors.join(" "));
        }
    }
    let deb = match deb {
        Some(d) => d,
        // Offline, or apt failed: the newest package of the series already in the cache.
        None => newest_cached(&debs, series).with_context(|| {
            format!(
                "no linux-image-{series} cloud-amd64 package could be downloaded or found in {}",
                debs.display()
            )
        })?,
    };
    let file = deb.file_name().unwrap().to_string_lossy().into_owned();
    let package = file.split('_').next().unwrap().to_string();
    let root = cache.join("kernels").join(&package);
    if !root.join(".unpacked").exists() {
        if root.exists() {
            std::fs::remove_dir_all(&root)?;
        }
        std::fs::create_dir_all(&root)?;
        run_ok(Command::new("dpkg").arg("-x").arg(&deb).arg(&root))?;
        std::fs::write(root.join(".unpacked"), "")?;
    }
    let modules = root.join("lib/modules");
    let release = std::fs::read_dir(&modules)
        .with_context(|| format!("{}: no lib/modules", root.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .next()
        .context("no kernel release under lib/modules")?;
    let vmlinuz = root.join("boot").join(format!("vmlinuz-{release}"));
    if !vmlinuz.exists() {
        bail!("{} is missing from {package}", vmlinuz.display());
    }
    Ok(Kernel { package, release, root, vmlinuz })
}

fn cached_deb(debs: &Path, package: &str) -> Option<PathBuf> {
    let prefix = format!("{package}_");
    std::fs::read_dir(debs).ok()?.filter_map(|e| e.ok()).map(|e| e.path()).find(|p| {
        p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
            && p.extension().is_some_and(|e| e == "deb")
    })
}

fn newest_cached(debs: &Path, series: &str) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(debs)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.ends_with(".deb") && is_series_package(n.split('_').next().unwrap(), series)
        })
        .collect();
    found.sort_by_key(|p| version_key(&p.file_name().unwrap().to_string_lossy()));
    found.pop()
}

/// `linux-image-6.1.0-56-cloud-amd64-unsigned` is of series 6.1; `linux-image-6.12.117+deb12-…`
/// is not.
fn is_series_package(name: &str, series: &str) -> bool {
    let Some(rest) = name.strip_prefix(&format!("linux-image-{series}")) else { return false };
    rest.starts_with(['.', '-']) && rest.ends_with("-cloud-amd64-unsigned")
}

/// The numbers in a package name, in order: sorts 6.1.0-56 after 6.1.0-50, 6.12.117 after 6.12.99.
fn version_key(name: &str) -> Vec<u64> {
    name.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// This machine's apt, or a private configuration (sources, lists, cache) under the lab cache.
enum AptConfig {
    System,
    Private(Vec<String>),
}

impl AptConfig {
    fn private(cache: &Path, suite: &str) -> Result<AptConfig> {
        let dir = cache.join(format!("apt-{suite}"));
        for sub in ["lists/partial", "cache/archives/partial"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        let sources = dir.join("sources.list");
        let keyring = "/usr/share/keyrings/debian-archive-keyring.gpg";
        std::fs::write(
            &sources,
            format!(
                "deb [signed-by={keyring}] http://deb.debian.org/debian {suite} main\n\
                 deb [signed-by={keyring}] http://deb.debian.org/debian-security {suite}-security main\n"
            ),
        )?;
        let opts = vec![
            format!("Dir::Etc::sourcelist={}", sources.display()),
            "Dir::Etc::sourceparts=/nonexistent".to_string(),
            format!("Dir::State::Lists={}", dir.join("lists").display()),
            format!("Dir::Cache={}", dir.join("cache").display()),
        ];
        let apt = AptConfig::Private(opts);
        // The lists are refreshed once a day.
        let stamp = dir.join("updated");
        let fresh = std::fs::metadata(&stamp)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().unwrap_or_default() < Duration::from_secs(86400));
        if !fresh {
            println!("apt-get update ({suite}, private lists in {})", dir.display());
            let out = apt.command("apt-get").arg("update").output()?;
            if !out.status.success() {
                bail!("apt-get update for {suite} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
            }
            std::fs::write(&stamp, "")?;
        }
        Ok(apt)
    }

    fn command(&self, tool: &str) -> Command {
        let mut cmd = Command::new(tool);
        if let AptConfig::Private(opts) = self {
            for o in opts {
                cmd.arg("-o").arg(o);
            }
        }
        cmd
    }

    /// Package names of the series, newest first.
    fn candidates(&self, series: &str) -> Result<Vec<String>> {
        let out = self
            .command("apt-cache")
            .args(["search", "--names-only", &format!("^linux-image-{}", series.replace('.', "\\."))])
            .output()
            .context("running apt-cache")?;
        let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| is_series_package(n, series))
            .map(str::to_string)
            .collect();
        names.sort_by_key(|n| std::cmp::Reverse(version_key(n)));
        names.dedup();
        Ok(names)
    }
}

fn run_ok(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// The modules the guest needs, loaded by /init in this order when the kernel has them as modules.
const WANTED_MODULES: &[&str] = &["virtio_pci", "virtio_blk", "xfs"];

/// A busybox-static initramfs: /init (mounts, modules, the suite, poweroff), busybox, the static
/// ioscope and lab-guest, and the modules the kernel lacks built in (decompressed, with their
/// dependencies first).
fn build_initramfs(kernel: &Kernel, ioscope: &Path, guest: &Path, run_dir: &Path) -> Result<PathBuf> {
    let root = run_dir.join("initramfs");
    for d in ["bin", "sbin", "dev", "proc", "sys", "tmp", "mnt/ext4", "mnt/xfs", "modules", "etc"] {
        std::fs::create_dir_all(root.join(d))?;
    }
    let busybox = Path::new("/bin/busybox");
    if !busybox.exists() {
        bail!("/bin/busybox is missing: apt-get install busybox-static");
    }
    dist::check_static(busybox).context("the guest needs busybox-static (apt-get install busybox-static)")?;
    std::fs::copy(busybox, root.join("bin/busybox"))?;
    std::os::unix::fs::symlink("busybox", root.join("bin/sh"))?;
    std::fs::copy(ioscope, root.join("bin/ioscope"))?;
    std::fs::copy(guest, root.join("bin/lab-guest"))?;
    // A user for the non-root checks.
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n",
    )?;
    std::fs::write(root.join("etc/group"), "root:x:0:\nnogroup:x:65534:\n")?;

    let order = module_order(kernel)?;
    let mut load = String::new();
    for (i, (base, bytes)) in order.iter().enumerate() {
        std::fs::write(root.join("modules").join(format!("{i:02}-{base}")), bytes)?;
        load.push_str(&format!(
            "insmod /modules/{i:02}-{base} || echo \"{MARK} WARN insmod {base} failed\"\n"
        ));
    }
    let init = format!(
        r#"#!/bin/sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
{load}echo "{MARK} BOOTED $(uname -r)"
mount -t ext4 /dev/vda /mnt/ext4 || echo "{MARK} WARN mounting ext4 (/dev/vda) failed"
mount -t xfs /dev/vdb /mnt/xfs || echo "{MARK} WARN mounting xfs (/dev/vdb) failed"
/bin/lab-guest suite
echo "{MARK} EXIT $?"
sync
poweroff -f
"#
    );
    let init_path = root.join("init");
    std::fs::write(&init_path, init)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&init_path, std::fs::Permissions::from_mode(0o755))?;

    let cpio = run_dir.join("initramfs.cpio");
    let list = Command::new("find").arg(".").current_dir(&root).output()?.stdout;
    let mut child = Command::new("cpio")
        .args(["-o", "-H", "newc", "--quiet", "-R", "0:0"])
        .current_dir(&root)
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&cpio)?)
        .spawn()
        .context("running cpio (apt-get install cpio)")?;
    child.stdin.take().unwrap().write_all(&list)?;
    if !child.wait()?.success() {
        bail!("cpio failed building {}", cpio.display());
    }
    Ok(cpio)
}

/// The wanted modules that the kernel has as modules, after their dependencies (the `depends=`
/// of each module's .modinfo), as (file name, decompressed contents).
fn module_order(kernel: &Kernel) -> Result<Vec<(String, Vec<u8>)>> {
    let dir = kernel.root.join("lib/modules").join(&kernel.release);
    let mut files = HashMap::new();
    collect_modules(&dir.join("kernel"), &mut files)?;
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    for m in WANTED_MODULES {
        add_module(m, &files, &mut order, &mut seen)?;
    }
    Ok(order)
}

fn module_key(name: &str) -> String {
    name.replace('-', "_")
}

fn collect_modules(dir: &Path, out: &mut HashMap<String, PathBuf>) -> Result<()> {
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let e = e?;
        let p = e.path();
        if e.file_type()?.is_dir() {
            collect_modules(&p, out)?;
        } else {
            let n = e.file_name().to_string_lossy().into_owned();
            if let Some((stem, _)) = n.split_once(".ko") {
                out.insert(module_key(stem), p);
            }
        }
    }
    Ok(())
}

/// A module file's contents, decompressed (Debian compresses them with xz since 6.x).
fn read_module(path: &Path) -> Result<Vec<u8>> {
    let name = path.to_string_lossy();
    let tool = if name.ends_with(".xz") {
        "xz"
    } else if name.ends_with(".zst") {
        "zstd"
    } else {
        return std::fs::read(path).with_context(|| format!("reading {name}"));
    };
    let out = Command::new(tool).arg("-dc").arg(path).output().with_context(|| format!("running {tool}"))?;
    if !out.status.success() {
        bail!("{tool} -dc {name} failed");
    }
    Ok(out.stdout)
}

fn add_module(
    name: &str,
    files: &HashMap<String, PathBuf>,
    order: &mut Vec<(String, Vec<u8>)>,
    seen: &mut HashSet<String>,
) -> Result<()> {
    let key = module_key(name);
    if !seen.insert(key.clone()) {
        return Ok(());
    }
    // Not a module file: built in (or absent, which the guest reports when mounting fails).
    let Some(path) = files.get(&key) else { return Ok(()) };
    let bytes = read_module(path)?;
    // .modinfo holds NUL-terminated "key=value" strings, "depends=a,b" among them.
    let depends = bytes
        .windows(8)
        .position(|w| w == b"depends=")
        .map(|at| {
            let rest = &bytes[at + 8..];
            String::from_utf8_lossy(&rest[..rest.iter().position(|&b| b == 0).unwrap_or(0)]).into_owned()
        })
        .unwrap_or_default();
    for dep in depends.split(',').filter(|d| !d.is_empty()) {
        add_module(dep, files, order, seen)?;
    }
    let file = format!("{key}.ko");
    order.push((file, bytes));
    Ok(())
}

/// A tool from /sbin or /usr/sbin, which a non-login root shell may not have on PATH.
fn sbin_tool(name: &str) -> PathBuf {
    ["/usr/sbin", "/sbin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| name.into())
}

/// Sparse disk images: ext4 (vda) and xfs (vdb), freshly made for each run.
fn make_disks(run_dir: &Path) -> Result<Vec<PathBuf>> {
    let ext4 = run_dir.join("ext4.img");
    let xfs = run_dir.join("xfs.img");
    for (p, mib) in [(&ext4, 512u64), (&xfs, 512)] {
        std::fs::File::create(p)?.set_len(mib << 20)?;
    }
    // Features 5.10 cannot mount (orphan_file: 5.15) are left out when this mke2fs knows them.
    let without =
        Command::new(sbin_tool("mkfs.ext4")).args(["-F", "-q", "-O", "^orphan_file"]).arg(&ext4).output();
    if !without.is_ok_and(|o| o.status.success()) {
        run_ok(Command::new(sbin_tool("mkfs.ext4")).args(["-F", "-q"]).arg(&ext4))
            .context("mkfs.ext4 (apt-get install e2fsprogs)")?;
    }
    run_ok(Command::new(sbin_tool("mkfs.xfs")).args(["-f", "-q"]).arg(&xfs))
        .context("mkfs.xfs (apt-get install xfsprogs)")?;
    Ok(vec![ext4, xfs])
}

struct Outcome {
    /// The console's lines (also in the log file).
    lines: Vec<String>,
    timed_out: bool,
    wall: Duration,
}

/// Boots qemu and copies its console to the log (and the suite's lines to stdout) until it exits
/// or the time limit passes (then it is killed).
fn boot(
    vmlinuz: &Path,
    initrd: &Path,
    disks: &[PathBuf],
    cmdline: &str,
    log: &Path,
    limit: Duration,
) -> Result<Outcome> {
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(["-accel", "tcg", "-cpu", "max", "-m", "2G", "-smp", "1"])
        .args(["-nographic", "-no-reboot", "-nic", "none", "-monitor", "none", "-serial", "stdio"])
        .arg("-kernel")
        .arg(vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .arg("-append")
        .arg(cmdline);
    for d in disks {
        cmd.arg("-drive").arg(format!("file={},if=virtio,format=raw,cache=unsafe", d.display()));
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().context("starting qemu-system-x86_64 (apt-get install qemu-system-x86)")?;
    let (tx, rx) = mpsc::channel::<String>();
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let tx2 = tx.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(out).split(b'\n').map_while(|l| l.ok()) {
            let _ = tx.send(String::from_utf8_lossy(&line).trim_end_matches('\r').to_string());
        }
    });
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(|l| l.ok()) {
            let _ = tx2.send(format!("[qemu] {line}"));
        }
    });
    let mut file = std::fs::File::create(log)?;
    let mut lines = Vec::new();
    let mut timed_out = false;
    loop {
        let left = limit.saturating_sub(start.elapsed());
        match rx.recv_timeout(left.min(Duration::from_secs(1))) {
            Ok(line) => {
                writeln!(file, "{line}")?;
                if line.contains(MARK) || line.starts_with("[qemu]") {
                    println!("  [{:>4.0}s] {line}", start.elapsed().as_secs_f64());
                }
                lines.push(line);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if start.elapsed() >= limit {
                    timed_out = true;
                    let _ = child.kill();
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let _ = child.wait();
    Ok(Outcome { lines, timed_out, wall: start.elapsed() })
}

impl Outcome {
    /// Ok when the suite ran to its end with no failed check; else an error naming the kernel, the
    /// failed (or last started) checks and the console's last lines.
    fn judge(&self, series: &str, log: &Path) -> Result<()> {
        let mut failed = Vec::new();
        let mut passed = 0;
        let mut last_started = None;
        let mut done = None;
        for l in &self.lines {
            let Some(rest) = l.split_once(MARK).map(|(_, r)| r.trim()) else { continue };
            let mut words = rest.splitn(3, ' ');
            match (words.next(), words.next(), words.next()) {
                (Some("START"), Some(name), _) => last_started = Some(name.to_string()),
                (Some("PASS"), Some(_), _) => passed += 1,
                (Some("FAIL"), Some(name), detail) => {
                    failed.push(format!("{name}: {}", detail.unwrap_or("")))
                }
                (Some("DONE"), _, _) => done = Some(rest.to_string()),
                _ => {}
            }
        }
        let tail = || {
            let n = self.lines.len();
            self.lines[n.saturating_sub(25)..]
                .iter()
                .map(|l| format!("    | {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        if done.is_none() {
            let why = if self.timed_out {
                format!("did not finish within the time limit ({:.0} s)", self.wall.as_secs_f64())
            } else {
                "stopped before the suite finished (guest panic or crash?)".to_string()
            };
            bail!(
                "kernel {series}: the guest {why}; last check started: {}; {} passed, {} failed{}\n  console's last lines ({}):\n{}",
                last_started.as_deref().unwrap_or("none"),
                passed,
                failed.len(),
                if failed.is_empty() { String::new() } else { format!(":\n    {}", failed.join("\n    ")) },
                log.display(),
                tail()
            );
        }
        if !failed.is_empty() {
            bail!(
                "kernel {series}: {} check(s) failed ({passed} passed):\n    {}\n  console's last lines ({}):\n{}",
                failed.len(),
                failed.join("\n    "),
                log.display(),
                tail()
            );
        }
        if passed == 0 {
            bail!("kernel {series}: no check ran (filter matched nothing?)");
        }
        println!("kernel {series}: all {passed} checks passed ({})", done.unwrap_or_default());
        Ok(())
    }
}
