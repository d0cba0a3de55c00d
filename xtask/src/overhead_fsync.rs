//! `cargo xtask overhead --fsync`: the fsync-heavy job of issue 21. fio writes 4 KiB blocks and
//! calls fsync after each (`--fsync=1`, psync, one job) to a file on a fresh ext4 filesystem on the
//! benchmark's loop device (direct I/O to the disk below), so every I/O runs the sync-call probes
//! (entry, exit) beside the block, page-cache, per-file and writeback ones.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// An ext4 filesystem made on `device` and mounted in /var/tmp; unmounted on drop.
pub struct Ext4Mount {
    pub dir: PathBuf,
}

impl Ext4Mount {
    pub fn new(device: &Path) -> Result<Ext4Mount> {
        let run = |cmd: &str, args: &[&str]| -> Result<()> {
            let out = Command::new(cmd).args(args).output().with_context(|| format!("running {cmd}"))?;
            if !out.status.success() {
                bail!("{cmd} {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
            }
            Ok(())
        };
        let dev = device.to_str().context("device path")?;
        run("mkfs.ext4", &["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev])?;
        let dir = PathBuf::from(format!("/var/tmp/ioscope-overhead-fsync-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        run("mount", &["-t", "ext4", dev, dir.to_str().context("mount path")?])?;
        Ok(Ext4Mount { dir })
    }
}

impl Drop for Ext4Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// One time-based run of the fsync job on `file`: its write IOPS (each write followed by fsync).
pub fn fio_fsync(file: &Path, seconds: u32) -> Result<f64> {
    let out = Command::new("fio")
        .args([
            "--name=ioscope-overhead-fsync".to_string(),
            format!("--filename={}", file.display()),
            "--rw=write".into(),
            "--bs=4k".into(),
            "--size=64M".into(),
            "--fsync=1".into(),
            "--ioengine=psync".into(),
            "--time_based".into(),
            format!("--runtime={seconds}"),
            "--output-format=terse".into(),
            "--terse-version=3".into(),
        ])
        .output()
        .context("running fio")?;
    if !out.status.success() {
        bail!("fio failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    write_iops(&text).with_context(|| format!("no write IOPS in fio's output: {text}"))
}

/// The write IOPS of a terse v3 line (field 49: the write status starts at field 47 with its KiB,
/// then bandwidth, then IOPS).
pub fn write_iops(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("3;"))?;
    line.split(';').nth(48)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_iops_is_field_49() {
        let mut f: Vec<String> = (1..=130).map(|i| i.to_string()).collect();
        f[0] = "3".into();
        f[48] = "1234.5".into();
        assert_eq!(write_iops(&f.join(";")), Some(1234.5));
        assert_eq!(write_iops("nothing"), None);
    }
}
