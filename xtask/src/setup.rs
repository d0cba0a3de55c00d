//! `cargo xtask setup`: what `cargo xtask dist` and the arm64 lab need (the musl targets, Debian's
//! musl-tools, aarch64 cross compiler and qemu-system-arm), nightly's rust-src, and bpf-linker built
//! against nightly's own libLLVM.
//!
//! bpf-linker must use the same LLVM as the rustc that produced the bitcode. Nightly ships it as a
//! shared library (`lib/libLLVM.so.<ver>-rust-<ver>-nightly`) but without the `libLLVM.so` name the
//! linker step of `cargo install` looks for, so we make a prefix folder whose `lib/` holds both
//! names as symlinks and point bpf-linker's build at it with LLVM_PREFIX. bpf-linker bakes that
//! `lib/` into its rpath, so the folder lives in a cache directory that persists (not /tmp).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::dist;
use crate::toolchain::{self, NIGHTLY};

/// The bpf-linker release known to work with this recipe (LLVM 21–23 features, LLVM_PREFIX).
const BPF_LINKER_VERSION: &str = "0.13.0";

pub fn run(force: bool) -> Result<()> {
    dist_tools()?;
    toolchain::require_nightly()?;
    println!("adding rust-src to the {NIGHTLY} toolchain (build-std needs core's source)");
    let status = Command::new("rustup")
        .args(["component", "add", "rust-src", "--toolchain", NIGHTLY])
        .status()
        .context("running rustup")?;
    if !status.success() {
        bail!("`rustup component add rust-src --toolchain {NIGHTLY}` failed ({status})");
    }

    let sysroot = toolchain::nightly_sysroot()?;
    match toolchain::bpf_linker_runs(&sysroot) {
        Some(None) if !force => {
            println!("bpf-linker is installed and runs; nothing to do (--force reinstalls it)");
            return Ok(());
        }
        Some(Some(_)) => println!("bpf-linker is installed but cannot find its libLLVM; reinstalling it"),
        _ => {}
    }

    let llvm_major = toolchain::nightly_llvm_major()?;
    if !(21..=23).contains(&llvm_major) {
        bail!(
            "nightly uses LLVM {llvm_major} but bpf-linker {BPF_LINKER_VERSION} supports LLVM 21 to 23: \
             update BPF_LINKER_VERSION in xtask/src/setup.rs"
        );
    }
    let libllvm = toolchain::nightly_libllvm(&sysroot)?;
    let prefix = cache_dir()?.join("ioscope").join("llvm-prefix");
    make_llvm_prefix(&prefix, &libllvm)?;

    println!("building bpf-linker {BPF_LINKER_VERSION} against {} (takes a few minutes)", libllvm.display());
    let mut install = Command::new("cargo");
    install
        .args(["install", "--locked", "--no-default-features", "--features"])
        .arg(format!("llvm-{llvm_major}"))
        .arg(format!("bpf-linker@{BPF_LINKER_VERSION}"))
        .env("LLVM_PREFIX", &prefix);
    if force || toolchain::bpf_linker_runs(&sysroot).is_some() {
        install.arg("--force");
    }
    let status = install.status().context("running cargo install")?;
    if !status.success() {
        bail!("`cargo install bpf-linker` failed ({status})");
    }
    match toolchain::bpf_linker_runs(&sysroot) {
        Some(None) => {
            println!("bpf-linker installed; `cargo xtask ebpf` can build the eBPF object now");
            Ok(())
        }
        _ => bail!(
            "bpf-linker was installed but `bpf-linker --version` does not run; is ~/.cargo/bin on PATH?"
        ),
    }
}

/// Debian's packages of `cargo xtask dist` (musl-gcc, the aarch64 cross compiler) and of the arm64
/// kernel lab (qemu-system-aarch64).
const DIST_PACKAGES: [&str; 3] = ["musl-tools", dist::CROSS_PACKAGE, "qemu-system-arm"];

/// The rustup targets of both static binaries, and [`DIST_PACKAGES`] through apt-get when missing.
fn dist_tools() -> Result<()> {
    let missing: Vec<&str> = DIST_PACKAGES
        .into_iter()
        .filter(|p| {
            let out = Command::new("dpkg-query").args(["-W", "-f=${Status}", p]).output();
            !out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        })
        .collect();
    if !missing.is_empty() {
        println!("apt-get install {}", missing.join(" "));
        let ok = Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            bail!(
                "installing {} failed: run `apt-get update && apt-get install {}` as root (Debian/Ubuntu)",
                missing.join(", "),
                missing.join(" ")
            );
        }
    }
    for arch in dist::ARCHES {
        dist::ensure_tools(arch)?;
    }
    Ok(())
}

/// $XDG_CACHE_HOME, else ~/.cache.
fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").context("neither XDG_CACHE_HOME nor HOME is set")?;
    Ok(PathBuf::from(home).join(".cache"))
}

/// `PREFIX/lib/libLLVM.so` (what `-lLLVM` finds at build time) and `PREFIX/lib/<soname>` (what the
/// loader looks for through bpf-linker's rpath at run time), both pointing at nightly's libLLVM.
fn make_llvm_prefix(prefix: &Path, libllvm: &Path) -> Result<()> {
    let lib = prefix.join("lib");
    std::fs::create_dir_all(&lib).with_context(|| format!("creating {}", lib.display()))?;
    let soname = libllvm.file_name().context("libLLVM path has no file name")?;
    for name in [std::ffi::OsStr::new("libLLVM.so"), soname] {
        let link = lib.join(name);
        // Replace whatever is there: the link may point to an older nightly.
        if link.symlink_metadata().is_ok() {
            std::fs::remove_file(&link).with_context(|| format!("removing {}", link.display()))?;
        }
        std::os::unix::fs::symlink(libllvm, &link)
            .with_context(|| format!("linking {} to {}", link.display(), libllvm.display()))?;
    }
    Ok(())
}
