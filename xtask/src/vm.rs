//! `cargo xtask vm [--arch x86_64|arm64] --kernel 5.10|6.1|6.12|newest [-- FILTER...]`: the kernel
//! lab. Boots one of Debian's cloud kernels of that architecture under qemu (TCG: this machine's KVM
//! is nested PVM and does not boot them; arm64 under `qemu-system-aarch64 -M virt -cpu max`) with
//! the static `ioscope` of that architecture from `cargo xtask dist`, an ext4 and an xfs disk, and
//! runs the in-guest suite (`lab-guest`, xtask/src/bin/lab-guest.rs, built for the same
//! architecture) once: one boot per kernel, every check in it. The guest's busybox is Debian's
//! busybox-static of the architecture (this machine's own for x86-64).
//!
//! Everything downloaded or unpacked stays outside the checkout, in `$IOSCOPE_LAB_CACHE`
//! (default /var/cache/ioscope-lab): `debs/` (apt-get download), `kernels/<package>/` (dpkg -x),
//! `apt-<suite>-<arch>/` (a private apt configuration for suites this machine's sources lack; the
//! system's apt is never modified), `runs/<series>/` (the last run's initramfs, disks, console log
//! and `report.txt`: the architecture, the exact kernel and packages, and each check's verdict;
//! `runs/arm64-<series>/` on arm64, `-no-trampoline` appended for such runs), `busybox-<arch>/`.
//!
//! `newest` is the newest 7.x Debian serves, resolved at each run from trixie-backports and sid, so
//! a new Debian kernel is tested with no code change. Debian packages it either whole
//! (`linux-image-V-cloud-ARCH[-unsigned]`, the kernel at /boot/vmlinuz-V) or, from 6.16 on, split
//! in three: `linux-binary-unsigned-V-cloud-ARCH` (usr/lib/modules/V/vmlinuz.unsigned),
//! `linux-modules-V-cloud-ARCH` (the .ko files) and `linux-base-V-cloud-ARCH` (modules.builtin,
//! config); its `linux-image-V-cloud-ARCH` is then only a meta package. Both are handled.

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
    /// The guest's architecture: x86_64 (amd64) or arm64 (aarch64).
    #[arg(long, default_value = "x86_64")]
    arch: String,
    /// Kernel series: 5.10, 6.1 or 6.12 (Debian's newest cloud build of it), or `newest` (the
    /// newest 7.x in trixie-backports and sid; `7.x` is the same).
    #[arg(long)]
    kernel: String,
    /// Wall-clock limit for the whole guest run, seconds (TCG runs 10-50x slower than the host);
    /// default 900, 1500 for `newest`, whose suite adds the churn check (6-7 minutes of it).
    #[arg(long)]
    timeout: Option<u64>,
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
    let target = arch_of(&args.arch).with_context(|| {
        format!(
            "--arch {}: not an architecture of the lab, which boots x86_64 (amd64) and arm64 (aarch64)",
            args.arch
        )
    })?;
    let series = if args.kernel == NEWEST_COLUMN { NEWEST } else { args.kernel.as_str() };
    let Some(source) = source_of(series) else {
        bail!(
            "--kernel {series}: not a kernel series of the lab, which knows {} (6.18 is this machine's own)",
            known_series()
        );
    };
    let started = Instant::now();
    let cache = cache_dir();
    std::fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    // Downloads and unpacking one run at a time (CI runs two VMs at once): they share apt's lists
    // and the cache. Released before the boot.
    let fetching =
        std::fs::File::create(cache.join(".fetch.lock")).context("creating the lab's fetch lock")?;
    fetching.lock().context("waiting for another lab run's downloads")?;
    let arch = target.dist.deb;
    // Before any download: say at once what is missing.
    if !runs(target.qemu) {
        bail!(
            "{} is missing: apt-get install {} (or run `cargo xtask setup`)",
            target.qemu,
            target.qemu_package
        );
    }
    dist::ensure_tools(target.dist)?;
    let kernel = match source {
        Source::Suite(suite) => fetch_kernel(&cache, series, suite, arch, args.offline),
        Source::Newest => fetch_newest(&cache, arch, args.offline),
    }
    .with_context(|| format!("kernel {series}: getting Debian's cloud-{arch} kernel packages"))?;
    println!("kernel {series} ({arch}): {} ({})", kernel.release, kernel.packages.join(", "));

    let ioscope = dist::build_ioscope(target.dist)?;
    let guest = dist::build_static(target.dist, "xtask", &["--bin", "lab-guest"], "lab-guest")?;
    let busybox = busybox(&cache, target.dist, args.offline)?;
    drop(fetching);

    let run_dir = cache.join("runs").join(run_name(arch, series, args.no_trampoline));
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir).with_context(|| format!("clearing {}", run_dir.display()))?;
    }
    std::fs::create_dir_all(&run_dir)?;
    let initrd = build_initramfs(&kernel, &busybox, &ioscope, &guest, &run_dir)?;
    let disks = make_disks(&run_dir)?;
    let prepared = started.elapsed();

    let log = run_dir.join("console.log");
    let cmdline = format!(
        "console={} panic=-1 loglevel=4 lab_kernel={} lab_filter={} lab_no_trampoline={}",
        target.console,
        column_name(arch, series),
        if args.filter.is_empty() { "-".to_string() } else { args.filter.join(",") },
        u8::from(args.no_trampoline)
    );
    let outcome = boot(
        target,
        &kernel.vmlinuz,
        &initrd,
        &disks,
        &cmdline,
        &log,
        Duration::from_secs(args.timeout.unwrap_or_else(|| {
            let base = if series == NEWEST { 1500 } else { 900 };
            // qemu's TCG translates arm64 code more slowly than x86-64's.
            if target.dist == dist::AARCH64 {
                base * 3 / 2
            } else {
                base
            }
        })),
    )?;
    let label = format!("{arch} {series}");
    let report = outcome.judge(&label, &log);
    let kept = run_dir.join("report.txt");
    std::fs::write(&kept, outcome.report(&label, &kernel, &report))
        .with_context(|| format!("writing {}", kept.display()))?;
    println!(
        "kernel {label}: prepared in {:.0} s, guest ran {:.0} s (console log {})",
        prepared.as_secs_f64(),
        outcome.wall.as_secs_f64(),
        log.display()
    );
    println!("kernel {label}: report kept in {}", kept.display());
    report
}

/// An architecture of the lab: what it ships and how its guest boots.
#[derive(Clone, Copy)]
struct Target {
    dist: dist::Arch,
    qemu: &'static str,
    qemu_package: &'static str,
    /// The machine and CPU options.
    machine: &'static [&'static str],
    /// The kernel's console: the machine's first serial port.
    console: &'static str,
    /// How a disk is attached: `if=virtio` (x86's PCI virtio) or a virtio-blk-pci device.
    disk_device: bool,
}

const X86_64: Target = Target {
    dist: dist::X86_64,
    qemu: "qemu-system-x86_64",
    qemu_package: "qemu-system-x86",
    machine: &["-cpu", "max"],
    console: "ttyS0",
    disk_device: false,
};
/// Debian's arm64 kernels under TCG: the `virt` board, the newest CPU model qemu emulates (with
/// the cheap implementation-defined pointer authentication: the architected one costs TCG much),
/// the PL011 serial port, disks on virtio-blk-pci (the board's PCI bus).
const ARM64: Target = Target {
    dist: dist::AARCH64,
    qemu: "qemu-system-aarch64",
    qemu_package: "qemu-system-arm",
    machine: &["-M", "virt", "-cpu", "max,pauth-impdef=on"],
    console: "ttyAMA0",
    disk_device: true,
};

/// `--arch`: Debian's or Rust's name of it.
fn arch_of(name: &str) -> Option<Target> {
    match name {
        "x86_64" | "amd64" => Some(X86_64),
        "arm64" | "aarch64" => Some(ARM64),
        _ => None,
    }
}

/// The run's directory under `runs/`: the series (x86-64 keeps its old name), `arm64-` before it,
/// `-no-trampoline` after it: two runs at once never share one.
fn run_name(deb_arch: &str, series: &str, no_trampoline: bool) -> String {
    let arch = if deb_arch == dist::X86_64.deb { String::new() } else { format!("{deb_arch}-") };
    format!("{arch}{series}{}", if no_trampoline { "-no-trampoline" } else { "" })
}

/// The support table's column for a run: the series' (xtask/src/support.rs), `arm64-` before it.
fn column_name(deb_arch: &str, series: &str) -> String {
    if deb_arch == dist::X86_64.deb {
        column_of(series).to_string()
    } else {
        format!("{}{}", crate::support::ARM64_PREFIX, column_of(series))
    }
}

/// Whether a program on PATH starts.
fn runs(program: &str) -> bool {
    Command::new(program).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

/// The guest's busybox: this machine's own for its architecture (busybox-static), else Debian's
/// busybox-static of the guest's (bookworm's, through a private apt configuration), unpacked
/// once into `busybox-<arch>/` of the cache.
fn busybox(cache: &Path, arch: dist::Arch, offline: bool) -> Result<PathBuf> {
    if arch == dist::X86_64 {
        let busybox = PathBuf::from("/bin/busybox");
        if !busybox.exists() {
            bail!("/bin/busybox is missing: apt-get install busybox-static");
        }
        dist::check_static(&busybox)
            .context("the guest needs busybox-static (apt-get install busybox-static)")?;
        return Ok(busybox);
    }
    // The package in `busybox-ARCH/`, unpacked in its `root/`.
    let dir = cache.join(format!("busybox-{}", arch.deb));
    let bin = dir.join("root/bin/busybox");
    if !bin.exists() {
        if offline {
            bail!("no {} busybox in {} (run once without --offline)", arch.deb, dir.display());
        }
        std::fs::create_dir_all(&dir)?;
        // The sources of 6.1's configuration (fetch_kernel): one configuration, one set of lists.
        let sources = ["debian bookworm".to_string(), "debian-security bookworm-security".to_string()];
        let apt = AptConfig::private(cache, "bookworm", arch.deb, &sources)?;
        let deb = download_all(&apt, &dir, &["busybox-static".to_string()])?.remove(0);
        run_ok(Command::new("dpkg").arg("-x").arg(&deb).arg(dir.join("root")))?;
    }
    dist::check_static(&bin)?;
    dist::check_machine(&bin, arch)?;
    Ok(bin)
}

/// The series name of the newest kernel, and its column in the support table.
const NEWEST: &str = "newest";
const NEWEST_COLUMN: &str = "7.x";
/// The major version `newest` looks for, and where.
const NEWEST_MAJOR: u64 = 7;
const NEWEST_SUITES: [&str; 2] = ["trixie-backports", "sid"];

fn known_series() -> String {
    let mut known: Vec<&str> = KERNELS.iter().filter(|k| source_of(k).is_some()).copied().collect();
    known.push(NEWEST);
    known.join(", ")
}

/// Where a series' kernel comes from.
enum Source {
    /// The newest build of the series in a Debian suite (its security updates too).
    Suite(&'static str),
    /// The newest [`NEWEST_MAJOR`].x in [`NEWEST_SUITES`].
    Newest,
}

fn source_of(series: &str) -> Option<Source> {
    match series {
        "5.10" => Some(Source::Suite("bullseye")),
        "6.1" => Some(Source::Suite("bookworm")),
        "6.12" => Some(Source::Suite("trixie")),
        NEWEST => Some(Source::Newest),
        _ => None,
    }
}

/// The support table's column (xtask/src/support.rs) a series' checks are judged by.
fn column_of(series: &str) -> &str {
    if series == NEWEST {
        NEWEST_COLUMN
    } else {
        series
    }
}

fn cache_dir() -> PathBuf {
    std::env::var_os("IOSCOPE_LAB_CACHE")
        .map_or_else(|| PathBuf::from("/var/cache/ioscope-lab"), PathBuf::from)
}

/// An unpacked kernel (one package, or the split packaging's three unpacked together).
struct Kernel {
    /// The package files, `name_version_arch` each.
    packages: Vec<String>,
    /// `uname -r` of the kernel: the directory name under lib/modules.
    release: String,
    /// lib/modules/RELEASE (usr/lib/modules/RELEASE in the split packaging).
    modules: PathBuf,
    vmlinuz: PathBuf,
}

/// The newest `linux-image-<series>.*-cloud-ARCH-unsigned` apt can give (this machine's sources,
/// else a private configuration for the series' suite), downloaded once into the cache and
/// unpacked once.
fn fetch_kernel(cache: &Path, series: &str, suite: &str, arch: &str, offline: bool) -> Result<Kernel> {
    let debs = cache.join("debs");
    std::fs::create_dir_all(&debs).with_context(|| format!("creating {}", debs.display()))?;
    let mut deb = None;
    if !offline {
        let mut apt = AptConfig::System;
        let mut names = apt.candidates(series, arch)?;
        if names.is_empty() {
            let sources = [format!("debian {suite}"), format!("debian-security {suite}-security")];
            apt = AptConfig::private(cache, suite, arch, &sources)?;
            names = apt.candidates(series, arch)?;
        }
        if names.is_empty() {
            eprintln!("kernel {series}: apt offers no linux-image-{series}.*-cloud-{arch}-unsigned");
        }
        // Newest first; a mirror may list a package before it serves it (404): the next one then.
        for name in names.iter().take(8) {
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
        None => newest_cached(&debs, series, arch).with_context(|| {
            format!(
                "no linux-image-{series} cloud-{arch} package could be downloaded or found in {}",
                debs.display()
            )
        })?,
    };
    unpack(cache, &[deb])
}

/// One kernel release's packages: the kernel's and, split, its modules' and base files'.
#[derive(Debug, PartialEq, Eq)]
struct Pick {
    /// `7.3.4+deb13-cloud-amd64`: `uname -r`.
    release: String,
    packages: Vec<String>,
}

/// The kernels of major version `major` among package names, newest first: split packaging
/// (`linux-binary-unsigned-V-cloud-ARCH` with `linux-modules-` and `linux-base-` of the same V, all
/// three present) before the whole one of the same release (`linux-image-V-cloud-ARCH-unsigned`,
/// else `linux-image-V-cloud-ARCH`, which is only a meta package when split ones exist).
fn picks(names: &[String], major: u64, arch: &str) -> Vec<Pick> {
    let has = |n: &str| names.iter().any(|m| m == n);
    let suffix = format!("-cloud-{arch}");
    let of_major = |v: &str| v.split('.').next().and_then(|m| m.parse::<u64>().ok()) == Some(major);
    let mut found: Vec<Pick> = Vec::new();
    for name in names {
        let split = name.strip_prefix("linux-binary-unsigned-").and_then(|r| r.strip_suffix(&suffix));
        let whole_unsigned = name
            .strip_prefix("linux-image-")
            .and_then(|r| r.strip_suffix("-unsigned"))
            .and_then(|r| r.strip_suffix(&suffix));
        let whole = name.strip_prefix("linux-image-").and_then(|r| r.strip_suffix(&suffix));
        let pick = if let Some(v) = split.filter(|v| of_major(v)) {
            let packages =
                vec![name.clone(), format!("linux-modules-{v}{suffix}"), format!("linux-base-{v}{suffix}")];
            packages.iter().all(|p| has(p)).then(|| Pick { release: format!("{v}{suffix}"), packages })
        } else if let Some(v) = whole_unsigned.filter(|v| of_major(v)) {
            let split = format!("linux-binary-unsigned-{v}{suffix}");
            (!has(&split)).then(|| Pick { release: format!("{v}{suffix}"), packages: vec![name.clone()] })
        } else if let Some(v) = whole.filter(|v| of_major(v)) {
            let split = format!("linux-binary-unsigned-{v}{suffix}");
            let unsigned = format!("{name}-unsigned");
            (!has(&split) && !has(&unsigned))
                .then(|| Pick { release: format!("{v}{suffix}"), packages: vec![name.clone()] })
        } else {
            None
        };
        if let Some(p) = pick {
            if !found.iter().any(|f| f.release == p.release) {
                found.push(p);
            }
        }
    }
    found.sort_by_key(|p| std::cmp::Reverse(version_key(&p.release)));
    found
}

/// The newest [`NEWEST_MAJOR`].x kernel of [`NEWEST_SUITES`] (a private apt configuration),
/// downloaded into the cache once and unpacked once; offline, or when apt fails, the newest one in
/// the cache.
fn fetch_newest(cache: &Path, arch: &str, offline: bool) -> Result<Kernel> {
    let debs = cache.join("debs");
    std::fs::create_dir_all(&debs).with_context(|| format!("creating {}", debs.display()))?;
    let what = format!("{NEWEST_MAJOR}.x cloud-{arch} kernel");
    if !offline {
        let sources: Vec<String> = NEWEST_SUITES.iter().map(|s| format!("debian {s}")).collect();
        let apt = AptConfig::private(cache, NEWEST, arch, &sources)?;
        let names = apt.names(&format!("^linux-(image|binary-unsigned|modules|base)-{NEWEST_MAJOR}\\."))?;
        let found = picks(&names, NEWEST_MAJOR, arch);
        if found.is_empty() {
            eprintln!("kernel {NEWEST}: apt offers no {what} in {}", NEWEST_SUITES.join(" or "));
        }
        // Newest first; a mirror may list a package before it serves it (404): the next one then.
        for pick in found.iter().take(3) {
            match download_all(&apt, &debs, &pick.packages) {
                Ok(files) => return unpack(cache, &files),
                Err(e) => eprintln!("  {}: {e:#}", pick.release),
            }
        }
    }
    let cached: Vec<String> = std::fs::read_dir(&debs)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".deb"))
        .map(|n| n.split('_').next().unwrap_or_default().to_string())
        .collect();
    let pick = picks(&cached, NEWEST_MAJOR, arch).into_iter().next().with_context(|| {
        format!(
            "no {what} could be downloaded from {} or found in {}",
            NEWEST_SUITES.join(" or "),
            debs.display()
        )
    })?;
    let files: Vec<PathBuf> = pick.packages.iter().filter_map(|p| cached_deb(&debs, p)).collect();
    unpack(cache, &files)
}

/// Each package's .deb in `debs`, downloaded when not there yet.
fn download_all(apt: &AptConfig, debs: &Path, packages: &[String]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for name in packages {
        if let Some(found) = cached_deb(debs, name) {
            files.push(found);
            continue;
        }
        println!("apt-get download {name}");
        let out = apt.command("apt-get").arg("download").arg(name).current_dir(debs).output()?;
        match cached_deb(debs, name) {
            Some(found) => files.push(found),
            None => {
                // apt's errors only (its warning about downloading as root is noise here).
                let err = String::from_utf8_lossy(&out.stderr);
                let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("E:")).collect();
                bail!("apt-get download {name} failed: {}", errors.join(" "));
            }
        }
    }
    Ok(files)
}

/// The packages unpacked together (once) under `kernels/<first package's file name>/`: the kernel
/// release is the one directory under [usr/]lib/modules, the kernel /boot/vmlinuz-RELEASE or
/// [usr/]lib/modules/RELEASE/vmlinuz[.unsigned].
fn unpack(cache: &Path, debs: &[PathBuf]) -> Result<Kernel> {
    let files: Vec<String> = debs
        .iter()
        .map(|d| d.file_name().unwrap_or_default().to_string_lossy().trim_end_matches(".deb").to_string())
        .collect();
    let first = files.first().context("no package to unpack")?;
    let root = cache.join("kernels").join(first);
    if !root.join(".unpacked").exists() {
        if root.exists() {
            std::fs::remove_dir_all(&root)?;
        }
        std::fs::create_dir_all(&root)?;
        for deb in debs {
            run_ok(Command::new("dpkg").arg("-x").arg(deb).arg(&root))?;
        }
        std::fs::write(root.join(".unpacked"), "")?;
    }
    let (modules, release) = ["lib/modules", "usr/lib/modules"]
        .iter()
        .map(|d| root.join(d))
        .find_map(|dir| {
            let release = std::fs::read_dir(&dir)
                .ok()?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .next()?;
            Some((dir.join(&release), release))
        })
        .with_context(|| format!("{}: no kernel release under [usr/]lib/modules", root.display()))?;
    let vmlinuz = [
        root.join("boot").join(format!("vmlinuz-{release}")),
        modules.join("vmlinuz.unsigned"),
        modules.join("vmlinuz"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .with_context(|| {
        format!("no kernel image (boot/vmlinuz-{release}, vmlinuz[.unsigned]) in {}", files.join(", "))
    })?;
    Ok(Kernel { packages: files, release, modules, vmlinuz })
}

fn cached_deb(debs: &Path, package: &str) -> Option<PathBuf> {
    let prefix = format!("{package}_");
    std::fs::read_dir(debs).ok()?.filter_map(|e| e.ok()).map(|e| e.path()).find(|p| {
        p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
            && p.extension().is_some_and(|e| e == "deb")
    })
}

fn newest_cached(debs: &Path, series: &str, arch: &str) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(debs)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.ends_with(".deb") && is_series_package(n.split('_').next().unwrap(), series, arch)
        })
        .collect();
    found.sort_by_key(|p| version_key(&p.file_name().unwrap().to_string_lossy()));
    found.pop()
}

/// `linux-image-6.1.0-56-cloud-amd64-unsigned` is of series 6.1; `linux-image-6.12.117+deb12-…`
/// is not.
fn is_series_package(name: &str, series: &str, arch: &str) -> bool {
    let Some(rest) = name.strip_prefix(&format!("linux-image-{series}")) else { return false };
    rest.starts_with(['.', '-']) && rest.ends_with(&format!("-cloud-{arch}-unsigned"))
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
    /// `name` names the configuration's directory; each of `sources` is an archive of
    /// deb.debian.org and a suite ("debian-security bookworm-security"), its main component
    /// listed for `arch` only.
    fn private(cache: &Path, name: &str, arch: &str, sources: &[String]) -> Result<AptConfig> {
        let dir = cache.join(format!("apt-{name}-{arch}"));
        for sub in ["lists/partial", "cache/archives/partial"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        let list = dir.join("sources.list");
        let keyring = "/usr/share/keyrings/debian-archive-keyring.gpg";
        let lines: String = sources
            .iter()
            .map(|s| format!("deb [arch={arch} signed-by={keyring}] http://deb.debian.org/{s} main\n"))
            .collect();
        // A new set of sources is a new configuration: its lists are fetched again.
        let changed = std::fs::read_to_string(&list).ok().as_deref() != Some(lines.as_str());
        std::fs::write(&list, &lines)?;
        let opts = vec![
            format!("Dir::Etc::sourcelist={}", list.display()),
            "Dir::Etc::sourceparts=/nonexistent".to_string(),
            format!("Dir::State::Lists={}", dir.join("lists").display()),
            format!("Dir::Cache={}", dir.join("cache").display()),
            format!("APT::Architecture={arch}"),
            format!("APT::Architectures={arch}"),
        ];
        let apt = AptConfig::Private(opts);
        // The lists are refreshed once a day.
        let stamp = dir.join("updated");
        let fresh = std::fs::metadata(&stamp)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().unwrap_or_default() < Duration::from_secs(86400));
        if !fresh || changed {
            println!("apt-get update ({name}, private lists in {})", dir.display());
            let out = apt.command("apt-get").arg("update").output()?;
            if !out.status.success() {
                bail!("apt-get update for {name} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
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
    fn candidates(&self, series: &str, arch: &str) -> Result<Vec<String>> {
        let mut names = self.names(&format!("^linux-image-{}", series.replace('.', "\\.")))?;
        names.retain(|n| is_series_package(n, series, arch));
        names.sort_by_key(|n| std::cmp::Reverse(version_key(n)));
        names.dedup();
        Ok(names)
    }

    /// The names of the packages apt knows that match a regular expression.
    fn names(&self, pattern: &str) -> Result<Vec<String>> {
        let out = self
            .command("apt-cache")
            .args(["search", "--names-only", pattern])
            .output()
            .context("running apt-cache")?;
        if !out.status.success() {
            bail!("apt-cache search failed: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_string)
            .collect())
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
fn build_initramfs(
    kernel: &Kernel,
    busybox: &Path,
    ioscope: &Path,
    guest: &Path,
    run_dir: &Path,
) -> Result<PathBuf> {
    let root = run_dir.join("initramfs");
    for d in ["bin", "sbin", "dev", "proc", "sys", "tmp", "mnt/ext4", "mnt/xfs", "modules", "etc"] {
        std::fs::create_dir_all(root.join(d))?;
    }
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
    let dir = &kernel.modules;
    let mut files = HashMap::new();
    collect_modules(&dir.join("kernel"), &mut files)?;
    // modules.builtin lists the built-in ones ("kernel/drivers/virtio/virtio_pci.ko"): a wanted
    // module neither there nor a file is missing from the kernel.
    let builtin: HashSet<String> = std::fs::read_to_string(dir.join("modules.builtin"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.rsplit('/').next()?.strip_suffix(".ko").map(module_key))
        .collect();
    let mut order = Vec::new();
    let mut seen = HashSet::new();
    for m in WANTED_MODULES {
        if !builtin.is_empty() && !builtin.contains(&module_key(m)) && !files.contains_key(&module_key(m)) {
            println!("kernel {}: has no module {m}, neither built in nor as a file", kernel.release);
        }
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
    target: Target,
    vmlinuz: &Path,
    initrd: &Path,
    disks: &[PathBuf],
    cmdline: &str,
    log: &Path,
    limit: Duration,
) -> Result<Outcome> {
    let mut cmd = Command::new(target.qemu);
    cmd.args(target.machine)
        .args(["-accel", "tcg", "-m", "2G", "-smp", "1"])
        .args(["-nographic", "-no-reboot", "-nic", "none", "-monitor", "none", "-serial", "stdio"])
        .arg("-kernel")
        .arg(vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .arg("-append")
        .arg(cmdline);
    for (i, d) in disks.iter().enumerate() {
        if target.disk_device {
            cmd.arg("-drive").arg(format!("file={},if=none,id=disk{i},format=raw,cache=unsafe", d.display()));
            cmd.arg("-device").arg(format!("virtio-blk-pci,drive=disk{i}"));
        } else {
            cmd.arg("-drive").arg(format!("file={},if=virtio,format=raw,cache=unsafe", d.display()));
        }
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {} (apt-get install {})", target.qemu, target.qemu_package))?;
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
    /// What `report.txt` keeps of a run: the kernel (its `uname -r`, as the guest saw it, and
    /// the packages it came from), the suite's lines and the verdict.
    fn report(&self, label: &str, kernel: &Kernel, verdict: &Result<()>) -> String {
        let mut s = format!("kernel {label}: {}\npackages: {}\n", kernel.release, kernel.packages.join(", "));
        for l in &self.lines {
            if let Some((_, rest)) = l.split_once(MARK) {
                s.push_str(&format!("{MARK}{rest}\n"));
            }
        }
        match verdict {
            Ok(()) => s.push_str("verdict: passed\n"),
            Err(e) => s.push_str(&format!("verdict: {e:#}\n")),
        }
        s
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// Names as trixie-backports and sid listed them (November 2026), and the old packaging.
    #[test]
    fn picks_the_newest_release_in_either_packaging() {
        let listed = names(&[
            "linux-base-7.2.12+deb13-cloud-amd64",
            "linux-binary-unsigned-7.2.12+deb13-cloud-amd64",
            "linux-modules-7.2.12+deb13-cloud-amd64",
            "linux-image-7.2.12+deb13-cloud-amd64",
            "linux-base-7.3.4+deb13-cloud-amd64",
            "linux-binary-unsigned-7.3.4+deb13-cloud-amd64",
            "linux-modules-7.3.4+deb13-cloud-amd64",
            "linux-image-7.3.4+deb13-cloud-amd64",
            "linux-image-7.3.4+deb13-cloud-amd64-dbg",
            "linux-binary-unsigned-7.2.13+deb14-cloud-amd64",
            "linux-modules-7.2.13+deb14-cloud-amd64",
            "linux-base-7.2.13+deb14-cloud-amd64",
            // Split, but its modules are not listed: not a whole kernel.
            "linux-binary-unsigned-7.4.1+deb14-cloud-amd64",
            "linux-base-7.4.1+deb14-cloud-amd64",
            "linux-image-7.10.2+deb14-cloud-arm64",
            "linux-image-6.12.57+deb13-cloud-amd64-unsigned",
        ]);
        let found = picks(&listed, 7, "amd64");
        let releases: Vec<&str> = found.iter().map(|p| p.release.as_str()).collect();
        assert_eq!(
            releases,
            ["7.3.4+deb13-cloud-amd64", "7.2.13+deb14-cloud-amd64", "7.2.12+deb13-cloud-amd64"]
        );
        assert_eq!(
            found[0].packages,
            [
                "linux-binary-unsigned-7.3.4+deb13-cloud-amd64",
                "linux-modules-7.3.4+deb13-cloud-amd64",
                "linux-base-7.3.4+deb13-cloud-amd64"
            ]
        );
        assert_eq!(picks(&listed, 7, "arm64")[0].packages, ["linux-image-7.10.2+deb14-cloud-arm64"]);
        // The old packaging: the kernel and its modules in one package, unsigned preferred.
        let old = names(&[
            "linux-image-7.0.4+deb13-cloud-amd64",
            "linux-image-7.0.4+deb13-cloud-amd64-unsigned",
            "linux-image-7.0.10+deb13-cloud-amd64",
        ]);
        let found = picks(&old, 7, "amd64");
        assert_eq!(
            found,
            [
                Pick {
                    release: "7.0.10+deb13-cloud-amd64".into(),
                    packages: vec!["linux-image-7.0.10+deb13-cloud-amd64".into()]
                },
                Pick {
                    release: "7.0.4+deb13-cloud-amd64".into(),
                    packages: vec!["linux-image-7.0.4+deb13-cloud-amd64-unsigned".into()]
                },
            ]
        );
        assert!(picks(&old, 8, "amd64").is_empty());
    }

    #[test]
    fn arches_name_their_runs_and_columns() {
        assert!(arch_of("arm64").is_some_and(|t| t.qemu == "qemu-system-aarch64" && t.console == "ttyAMA0"));
        assert!(arch_of("aarch64").is_some_and(|t| t.dist == dist::AARCH64));
        assert!(arch_of("amd64").is_some_and(|t| t.dist == dist::X86_64));
        assert!(arch_of("riscv64").is_none());
        assert_eq!(run_name("amd64", "6.1", false), "6.1");
        assert_eq!(run_name("arm64", "6.1", true), "arm64-6.1-no-trampoline");
        assert_eq!(column_name("amd64", NEWEST), "7.x");
        assert_eq!(column_name("arm64", NEWEST), "arm64-7.x");
        assert!(!column_name("arm64", "6.12").contains(' '), "one word on the kernel command line");
        // The guest finds the arm64 column's cells in the support table.
        let f = &crate::support::FEATURES[0];
        assert!(f.cell(&column_name("arm64", "5.10")).is_some());
    }

    #[test]
    fn series_map_to_their_source_and_table_column() {
        assert!(matches!(source_of("6.1"), Some(Source::Suite("bookworm"))));
        assert!(matches!(source_of(NEWEST), Some(Source::Newest)));
        assert!(source_of("6.18").is_none() && source_of("7.3").is_none());
        assert_eq!(column_of(NEWEST), "7.x");
        assert_eq!(column_of("6.12"), "6.12");
        assert!(known_series().ends_with("6.12, newest"), "{}", known_series());
    }
}
