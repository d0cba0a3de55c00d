//! `cargo xtask dist`: one static `ioscope` for any x86-64 Linux (musl, release), at
//! `target/dist/ioscope`. The kernel lab (`cargo xtask vm`) boots this very file: what ships is
//! what is tested.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::toolchain::project_root;

pub const MUSL: &str = "x86_64-unknown-linux-musl";

/// Builds the static binary and returns its path (target/dist/ioscope).
pub fn run() -> Result<PathBuf> {
    let bin = build_static("ioscope", &["--bin", "ioscope"], "ioscope")?;
    let out = project_root().join("target/dist");
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let dest = out.join("ioscope");
    std::fs::copy(&bin, &dest).with_context(|| format!("copying {} to {}", bin.display(), dest.display()))?;
    let size = std::fs::metadata(&dest)?.len();
    println!("{} ({:.1} MiB, static, {MUSL})", dest.display(), size as f64 / 1048576.0);
    Ok(dest)
}

/// `cargo build --release --target x86_64-unknown-linux-musl` for one package's binary, checked
/// to be static; returns the built file.
pub fn build_static(package: &str, select: &[&str], artifact: &str) -> Result<PathBuf> {
    ensure_musl_target()?;
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(project_root())
        .args(["build", "--release", "--target", MUSL, "-p", package])
        .args(select)
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!("cargo build --release --target {MUSL} -p {package} failed ({status})");
    }
    let bin = project_root().join("target").join(MUSL).join("release").join(artifact);
    check_static(&bin)?;
    Ok(bin)
}

/// The musl target for rustup, and musl-gcc for the C parts (zstd's): added or explained.
fn ensure_musl_target() -> Result<()> {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l.trim() == MUSL))
        .unwrap_or(false);
    if !installed {
        println!("rustup target add {MUSL}");
        let ok = Command::new("rustup").args(["target", "add", MUSL]).status().map(|s| s.success());
        if !matches!(ok, Ok(true)) {
            bail!("the {MUSL} target is missing and `rustup target add {MUSL}` failed");
        }
    }
    if Command::new("musl-gcc").arg("--version").output().is_err() {
        bail!("musl-gcc is missing: install musl-tools (apt-get install musl-tools)");
    }
    Ok(())
}

/// Fails unless the file is an ELF executable with no program interpreter (PT_INTERP) and no
/// dynamic section (PT_DYNAMIC with DT_NEEDED would mean shared libraries): a static binary.
pub fn check_static(path: &Path) -> Result<()> {
    let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if data.len() < 64 || &data[..4] != b"\x7fELF" || data[4] != 2 {
        bail!("{} is not a 64-bit ELF file", path.display());
    }
    let u16_at = |o: usize| u16::from_le_bytes([data[o], data[o + 1]]) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(data[o..o + 4].try_into().unwrap());
    let phoff = u64::from_le_bytes(data[32..40].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    for i in 0..phnum {
        let o = phoff + i * phentsize;
        if o + 4 > data.len() {
            bail!("{}: truncated program headers", path.display());
        }
        // PT_INTERP = 3: a dynamic loader (ld-linux, ld-musl) would be needed to run it.
        if u32_at(o) == 3 {
            bail!("{} is dynamically linked (it has a program interpreter)", path.display());
        }
    }
    Ok(())
}
