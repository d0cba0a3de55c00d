//! The tools building the eBPF object needs: rustup's nightly toolchain (the bpf target is built
//! from source with `-Z build-std`) and bpf-linker, which links against nightly's own libLLVM.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{bail, Context, Result};

pub const NIGHTLY: &str = "nightly";

/// The workspace root (xtask's parent directory).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives inside the workspace").to_path_buf()
}

/// Runs a command to completion, capturing its output; Err only when it cannot be started.
fn output(cmd: &mut Command) -> std::io::Result<Output> {
    cmd.output()
}

fn stdout_of(cmd: &mut Command) -> Result<String> {
    let out = output(cmd).with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Fails with instructions when rustup or the nightly toolchain is missing.
pub fn require_nightly() -> Result<()> {
    if output(Command::new("rustup").arg("--version")).is_err() {
        bail!(
            "rustup is not installed: building the eBPF object needs rustup's nightly toolchain \
             (https://rustup.rs). Building ioscope itself does not: it embeds assets/ioscope.bpf.o."
        );
    }
    let ok = output(Command::new("rustc").arg(format!("+{NIGHTLY}")).arg("--version"))
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        bail!(
            "the nightly toolchain is not installed: run `rustup toolchain install {NIGHTLY} \
             --component rust-src`, then `cargo xtask setup`. (Only needed to rebuild the eBPF \
             object; building ioscope uses the committed assets/ioscope.bpf.o.)"
        );
    }
    Ok(())
}

/// Nightly's sysroot: its `lib/` holds the libLLVM that bpf-linker must use.
pub fn nightly_sysroot() -> Result<PathBuf> {
    let out = stdout_of(Command::new("rustc").arg(format!("+{NIGHTLY}")).args(["--print", "sysroot"]))?;
    Ok(PathBuf::from(out.trim()))
}

/// The LLVM major version nightly's rustc was built with ("LLVM version: 22.1.2" → 22).
pub fn nightly_llvm_major() -> Result<u32> {
    let out = stdout_of(Command::new("rustc").arg(format!("+{NIGHTLY}")).args(["--version", "--verbose"]))?;
    parse_llvm_major(&out).with_context(|| format!("no `LLVM version:` line in `rustc +nightly -vV`:\n{out}"))
}

fn parse_llvm_major(version_verbose: &str) -> Option<u32> {
    let v = version_verbose.lines().find_map(|l| l.strip_prefix("LLVM version:"))?.trim();
    v.split('.').next()?.parse().ok()
}

/// The shared libLLVM in nightly's `lib/` (`libLLVM.so.22.1-rust-1.97.0-nightly`): bpf-linker
/// links against it by its soname.
pub fn nightly_libllvm(sysroot: &Path) -> Result<PathBuf> {
    let lib = sysroot.join("lib");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&lib)
        .with_context(|| format!("reading {}", lib.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("libLLVM.so."))
        .map(|e| e.path())
        .collect();
    found.sort();
    found.pop().with_context(|| format!("no libLLVM.so.* in {}", lib.display()))
}

/// How bpf-linker can be run, if at all: `Some(None)` as it is, `Some(Some(dir))` only with `dir`
/// on LD_LIBRARY_PATH (an install whose rpath points to a folder that has since gone), None when
/// it is missing or broken either way.
pub fn bpf_linker_runs(sysroot: &Path) -> Option<Option<OsString>> {
    let runs = |ld: Option<&OsString>| {
        let mut cmd = Command::new("bpf-linker");
        cmd.arg("--version");
        if let Some(dir) = ld {
            cmd.env("LD_LIBRARY_PATH", dir);
        }
        output(&mut cmd).map(|o| o.status.success()).unwrap_or(false)
    };
    if runs(None) {
        return Some(None);
    }
    let ld = OsString::from(sysroot.join("lib"));
    runs(Some(&ld)).then_some(Some(ld))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llvm_major_from_rustc_verbose_version() {
        let vv =
            "rustc 1.97.0-nightly (59807616e 2026-11-01)\nbinary: rustc\nhost: x86_64-unknown-linux-gnu\n\
                  release: 1.97.0-nightly\nLLVM version: 22.1.4\n";
        assert_eq!(parse_llvm_major(vv), Some(22));
        assert_eq!(parse_llvm_major("rustc 1.0\n"), None);
    }
}
