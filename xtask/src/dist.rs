//! `cargo xtask dist`: one static `ioscope` per architecture, for any Linux of it (musl, release):
//! `target/dist/ioscope-x86_64` and `target/dist/ioscope-aarch64`, each embedding the eBPF object
//! built for its architecture (src/bpf/mod.rs), and `target/dist/SHA256SUMS`. The kernel lab
//! (`cargo xtask vm --arch ...`) boots these very files: what ships is what is tested.
//!
//! The aarch64 build is a cross build: rustup's aarch64-unknown-linux-musl target (its own musl
//! C runtime, `-C link-self-contained=yes`), Debian's `aarch64-linux-gnu-gcc` as the linker and the
//! C compiler of the C parts (zstd's), `-ar` as their archiver, and `+crt-static`.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::toolchain::project_root;

/// An architecture ioscope ships for, with what building and booting it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arch {
    /// Rust's `target_arch`, and the suffix of the shipped file (`ioscope-aarch64`): what `uname -m`
    /// prints on such a machine.
    pub name: &'static str,
    /// Debian's name of it (`arm64`): its kernel and busybox packages.
    pub deb: &'static str,
    /// The rustup target of the static build.
    pub musl: &'static str,
    /// The cross C compiler (also the linker) and archiver; None for the host's own (musl-gcc).
    pub cross: Option<(&'static str, &'static str)>,
}

pub const X86_64: Arch =
    Arch { name: "x86_64", deb: "amd64", musl: "x86_64-unknown-linux-musl", cross: None };
pub const AARCH64: Arch = Arch {
    name: "aarch64",
    deb: "arm64",
    musl: "aarch64-unknown-linux-musl",
    cross: Some(("aarch64-linux-gnu-gcc", "aarch64-linux-gnu-ar")),
};
pub const ARCHES: [Arch; 2] = [X86_64, AARCH64];

/// Debian's package of the cross compiler.
pub const CROSS_PACKAGE: &str = "gcc-aarch64-linux-gnu";

/// `cargo xtask dist`: both binaries and their checksums.
pub fn run() -> Result<Vec<PathBuf>> {
    let files: Vec<PathBuf> = ARCHES.iter().map(|a| build_ioscope(*a)).collect::<Result<_>>()?;
    let out = project_root().join("target/dist");
    let names: Vec<String> =
        files.iter().map(|f| f.file_name().unwrap_or_default().to_string_lossy().into_owned()).collect();
    let sums =
        Command::new("sha256sum").args(&names).current_dir(&out).output().context("running sha256sum")?;
    if !sums.status.success() {
        bail!("sha256sum failed: {}", String::from_utf8_lossy(&sums.stderr).trim());
    }
    std::fs::write(out.join("SHA256SUMS"), &sums.stdout).context("writing target/dist/SHA256SUMS")?;
    println!("{}", out.join("SHA256SUMS").display());
    Ok(files)
}

/// Builds one architecture's static binary and returns its path (target/dist/ioscope-ARCH).
pub fn build_ioscope(arch: Arch) -> Result<PathBuf> {
    let bin = build_static(arch, "ioscope", &["--bin", "ioscope"], "ioscope")?;
    let out = project_root().join("target/dist");
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let dest = out.join(format!("ioscope-{}", arch.name));
    std::fs::copy(&bin, &dest).with_context(|| format!("copying {} to {}", bin.display(), dest.display()))?;
    let size = std::fs::metadata(&dest)?.len();
    println!("{} ({:.1} MiB, static, {})", dest.display(), size as f64 / 1048576.0, arch.musl);
    Ok(dest)
}

/// `cargo build --release --target ARCH-unknown-linux-musl` for one package's binary, checked to be
/// static and of that architecture; returns the built file.
pub fn build_static(arch: Arch, package: &str, select: &[&str], artifact: &str) -> Result<PathBuf> {
    ensure_tools(arch)?;
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(project_root())
        .args(["build", "--release", "--target", arch.musl, "-p", package])
        .args(select);
    if let Some((cc, ar)) = arch.cross {
        let triple = arch.musl.replace('-', "_");
        let upper = triple.to_uppercase();
        cmd.env(format!("CC_{triple}"), cc)
            .env(format!("AR_{triple}"), ar)
            .env(format!("CARGO_TARGET_{upper}_LINKER"), cc)
            .env(
                format!("CARGO_TARGET_{upper}_RUSTFLAGS"),
                "-C link-self-contained=yes -C target-feature=+crt-static",
            );
    }
    let status = cmd.status().context("running cargo build")?;
    if !status.success() {
        bail!("cargo build --release --target {} -p {package} failed ({status})", arch.musl);
    }
    let bin = project_root().join("target").join(arch.musl).join("release").join(artifact);
    check_static(&bin)?;
    check_machine(&bin, arch)?;
    Ok(bin)
}

/// The rustup target (added when missing) and the C compiler of an architecture's build
/// (musl-gcc, or the cross compiler), else an error saying what to install.
pub fn ensure_tools(arch: Arch) -> Result<()> {
    let installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l.trim() == arch.musl))
        .unwrap_or(false);
    if !installed {
        println!("rustup target add {}", arch.musl);
        let ok = Command::new("rustup").args(["target", "add", arch.musl]).status().map(|s| s.success());
        if !matches!(ok, Ok(true)) {
            bail!("the {0} target is missing and `rustup target add {0}` failed", arch.musl);
        }
    }
    match arch.cross {
        None if Command::new("musl-gcc").arg("--version").output().is_err() => {
            bail!("musl-gcc is missing: install musl-tools (apt-get install musl-tools, or `cargo xtask setup`)")
        }
        Some((cc, _)) if Command::new(cc).arg("--version").output().is_err() => bail!(
            "{cc} is missing: the {} binary is cross-compiled with it; apt-get install {CROSS_PACKAGE} \
             (or run `cargo xtask setup`)",
            arch.name
        ),
        _ => Ok(()),
    }
}

/// Fails unless the file is an ELF executable with no program interpreter (PT_INTERP): a static
/// binary, which needs no loader (ld-linux, ld-musl) on the machine it is copied to.
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

/// The ELF machine of an architecture (e_machine: EM_X86_64 62, EM_AARCH64 183).
fn elf_machine(arch: Arch) -> u16 {
    if arch == AARCH64 {
        183
    } else {
        62
    }
}

/// Fails unless the file is an ELF file for `arch`'s processors.
pub fn check_machine(path: &Path, arch: Arch) -> Result<()> {
    let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let machine = data.get(18..20).map(|b| u16::from_le_bytes([b[0], b[1]]));
    if machine != Some(elf_machine(arch)) {
        bail!("{} is not an {} executable (ELF machine {machine:?})", path.display(), arch.name);
    }
    Ok(())
}
