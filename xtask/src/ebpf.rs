//! `cargo xtask ebpf` and `cargo xtask check-ebpf`: build ebpf/probes for the bpf target, once per
//! architecture ioscope ships for, and keep the committed objects in step with their source:
//! assets/ioscope.bpf.o (x86-64) and assets/ioscope-aarch64.bpf.o. The two differ in the kprobe
//! programs, which read their arguments from the kernel's `struct pt_regs`, laid out per
//! architecture: aya-ebpf picks the layout by `--cfg bpf_target_arch="ARCH"` (its build script
//! reads it back as CARGO_CFG_BPF_TARGET_ARCH), set here for each object. The object names its
//! architecture in its `ioscope_arch` section, which ioscope checks before loading it.
//!
//! The comparison is byte for byte. That is sound because the build is deterministic: the probes
//! crate is built with one codegen unit and no debug info (ebpf/probes/Cargo.toml), so no
//! timestamps or hash-ordered output reach the object, and it is built from a copy of ebpf/ at one
//! fixed path ([`STAGING`]): cargo hashes the absolute path of a path dependency that lies outside
//! the building workspace (ebpf/common, for ebpf/probes) into the crates' symbol names, so builds
//! from two checkouts at different paths would otherwise differ. Dependencies are pinned by
//! ebpf/probes/Cargo.lock (`--locked`), and the toolchain is whatever `nightly` is: a newer nightly
//! may emit different code, which check-ebpf then reports as stale (rebuild and commit).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::toolchain::{self, project_root, NIGHTLY};

const TARGET: &str = "bpfel-unknown-none";
/// The `[[bin]]` name in ebpf/probes/Cargo.toml: bpf-linker writes the object under this name.
const ARTIFACT: &str = "ioscope";
/// The architectures (Rust's `target_arch`) and their committed objects; src/bpf/mod.rs embeds the
/// one of the architecture it is built for.
pub const OBJECTS: [(&str, &str); 2] =
    [("x86_64", "assets/ioscope.bpf.o"), ("aarch64", "assets/ioscope-aarch64.bpf.o")];
/// Where ebpf/ is copied to be built: the same on every machine, so the object's bytes are too.
const STAGING: &str = "/tmp/ioscope-ebpf-build";

/// Copies ebpf/common and ebpf/probes (manifests, lock file, sources; no build output) to
/// [`STAGING`], replacing what a previous build left there, and returns the staged probes crate.
/// The returned lock file serializes builds from several checkouts on one machine.
fn stage_sources() -> Result<(PathBuf, std::fs::File)> {
    let staging = Path::new(STAGING);
    std::fs::create_dir_all(staging).with_context(|| format!("creating {STAGING}"))?;
    let lock = std::fs::File::create(staging.join(".lock")).context("creating the staging lock")?;
    lock.lock().context("waiting for another eBPF build to finish")?;
    let src = project_root().join("ebpf");
    let dst = staging.join("ebpf");
    if dst.exists() {
        std::fs::remove_dir_all(&dst).with_context(|| format!("clearing {}", dst.display()))?;
    }
    for krate in ["common", "probes"] {
        copy_sources(&src.join(krate), &dst.join(krate))?;
    }
    Ok((dst.join("probes"), lock))
}

/// Copies a crate's directory tree, leaving out build output (`target/`).
fn copy_sources(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let (path, target) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            if entry.file_name() != "target" {
                copy_sources(&path, &target)?;
            }
        } else {
            std::fs::copy(&path, &target).with_context(|| format!("copying {}", path.display()))?;
        }
    }
    Ok(())
}

/// Builds ebpf/probes for `arch`'s `pt_regs` into `target_dir` and returns the path of the object.
fn build(target_dir: &Path, arch: &str) -> Result<PathBuf> {
    toolchain::require_nightly()?;
    let sysroot = toolchain::nightly_sysroot()?;
    let ld_library_path = match toolchain::bpf_linker_runs(&sysroot) {
        Some(ld) => ld,
        None => bail!("bpf-linker is not installed or does not run: run `cargo xtask setup`"),
    };
    let (probes, _lock) = stage_sources()?;
    let mut cmd = Command::new("cargo");
    cmd.current_dir(&probes)
        .arg(format!("+{NIGHTLY}"))
        .args(["build", "--release", "--locked", "--target", TARGET, "-Z", "build-std=core"])
        .env("CARGO_TARGET_DIR", target_dir)
        // Flags meant for the host build (ours or the user's) must not reach the bpf target, and
        // `cargo xtask` runs under stable's rustup environment.
        .env_remove("RUSTFLAGS")
        .env("CARGO_ENCODED_RUSTFLAGS", format!("--cfg=bpf_target_arch=\"{arch}\""))
        .env_remove("RUSTC")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTUP_TOOLCHAIN");
    if let Some(dir) = ld_library_path {
        // bpf-linker's rpath points to a prefix folder that is gone: let it find nightly's
        // libLLVM directly (the same library rustc itself loads, so nothing else changes).
        eprintln!(
            "note: bpf-linker only runs with LD_LIBRARY_PATH set; `cargo xtask setup --force` fixes that"
        );
        cmd.env("LD_LIBRARY_PATH", dir);
    }
    let status = cmd.status().context("running cargo +nightly build")?;
    if !status.success() {
        bail!("building the eBPF programs failed ({status})");
    }
    Ok(target_dir.join(TARGET).join("release").join(ARTIFACT))
}

/// `cargo xtask ebpf`: every architecture's object.
pub fn build_and_install() -> Result<()> {
    let root = project_root();
    for (arch, asset) in OBJECTS {
        // One target directory per architecture: the flags differ, so would every cached crate.
        let object = build(&root.join("target/ebpf").join(arch), arch)?;
        let dest = root.join(asset);
        std::fs::copy(&object, &dest)
            .with_context(|| format!("copying {} to {}", object.display(), dest.display()))?;
        let size = std::fs::metadata(&dest)?.len();
        println!("wrote {asset} ({size} bytes, {arch}); commit it with the probe sources");
    }
    Ok(())
}

/// `cargo xtask check-ebpf`: every architecture's object.
pub fn check() -> Result<()> {
    let root = project_root();
    for (arch, asset) in OBJECTS {
        let committed_path = root.join(asset);
        let committed = std::fs::read(&committed_path).with_context(|| {
            format!("reading {}: run `cargo xtask ebpf` and commit it", committed_path.display())
        })?;
        // A fresh target directory: nothing cached can hide a change.
        let scratch = std::env::temp_dir().join(format!("ioscope-check-ebpf-{}-{arch}", std::process::id()));
        let result = build(&scratch, arch).and_then(|object| {
            std::fs::read(&object).with_context(|| format!("reading {}", object.display()))
        });
        let _ = std::fs::remove_dir_all(&scratch);
        let rebuilt = result?;
        if let Some(difference) = describe_difference(&committed, &rebuilt) {
            bail!("{asset} is stale ({difference}): run `cargo xtask ebpf` and commit it");
        }
        println!("{asset} matches its source ({} bytes, {arch})", committed.len());
    }
    Ok(())
}

/// None when equal, else a short description of the first difference.
fn describe_difference(committed: &[u8], rebuilt: &[u8]) -> Option<String> {
    if committed == rebuilt {
        return None;
    }
    if committed.len() != rebuilt.len() {
        return Some(format!("committed {} bytes, rebuilt {} bytes", committed.len(), rebuilt.len()));
    }
    let at = committed.iter().zip(rebuilt).position(|(a, b)| a != b).unwrap_or(0);
    Some(format!("same size, first difference at byte {at}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn difference_is_described() {
        assert_eq!(describe_difference(b"abc", b"abc"), None);
        assert_eq!(describe_difference(b"abc", b"abcd").unwrap(), "committed 3 bytes, rebuilt 4 bytes");
        assert_eq!(describe_difference(b"abc", b"abd").unwrap(), "same size, first difference at byte 2");
    }
}
