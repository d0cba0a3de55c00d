//! `cargo xtask overhead --fsync`: the fsync-heavy job of issue 21. fio writes 4 KiB blocks and
//! calls fsync after each (`--fsync=1`, psync, one job) to a file on a fresh ext4 filesystem on the
//! benchmark's loop device (direct I/O to the disk below), so every I/O runs the sync-call probes
//! (entry, exit) beside the block, page-cache, per-file and writeback ones. `--dir` puts the file
//! on an existing filesystem instead (a real disk's). Its floor (`--floor`) is an empty program on
//! every event ioscope attaches to ([`attached_events`]), not only the block layer's. Judged
//! against it twice: ioscope's IOPS ≥ 98 % of the empty programs' (median of the pairs), and, from
//! the kernel's own timing, ioscope's programs above the empty programs under 2 % of a write +
//! fsync (a measure the shared disk's noise does not reach).

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

/// The job's file in an existing directory, removed on drop.
pub struct JobFile {
    pub path: PathBuf,
}

impl JobFile {
    pub fn new(dir: &Path) -> Result<JobFile> {
        if !dir.is_dir() {
            bail!("--dir {}: not a directory", dir.display());
        }
        Ok(JobFile { path: dir.join(format!("ioscope-overhead-fsync-{}", std::process::id())) })
    }
}

impl Drop for JobFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One attachment of one of ioscope's programs: the event and how the program runs there.
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    pub category: String,
    pub event: String,
    /// Raw or BTF tracepoint (the event's arguments, no record): else a classic one.
    pub raw: bool,
}

impl Attachment {
    /// The empty program on the same event, of the same kind.
    pub fn attach_empty(&self) -> Result<crate::empty_program::EmptyProgram> {
        if self.raw {
            crate::empty_program::EmptyProgram::attach(&self.event)
        } else {
            crate::empty_program::EmptyProgram::attach_tracepoint(&self.category, &self.event)
        }
    }
}

/// Every attachment of `bin`'s programs on this kernel, from its own report (`--once --json`:
/// `bpf.programs[]`, one row per program and event).
pub fn attached_events(bin: &Path) -> Result<Vec<Attachment>> {
    let out = Command::new(bin)
        .args(["--once", "--json", "--interval", "0.1"])
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    if !out.status.success() {
        bail!("{} --once --json failed: {}", bin.display(), String::from_utf8_lossy(&out.stderr));
    }
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).context("its --json output")?;
    attachments(&json)
}

fn attachments(json: &serde_json::Value) -> Result<Vec<Attachment>> {
    let programs = json["bpf"]["programs"].as_array().context("no bpf.programs in the report")?;
    let mut events = Vec::new();
    for p in programs.iter().filter(|p| p["attached"].as_bool() == Some(true)) {
        let (tracepoint, mechanism) = (p["tracepoint"].as_str(), p["mechanism"].as_str());
        let (Some(tracepoint), Some(mechanism)) = (tracepoint, mechanism) else { continue };
        let Some((category, event)) = tracepoint.split_once(':') else { continue };
        let raw = match mechanism {
            "raw_tracepoint" | "btf_tracepoint" => true,
            "tracepoint" => false,
            // fentry, kprobe: not on the kernels this runs on; no floor for them.
            other => bail!("{tracepoint}: no empty program for mechanism {other}"),
        };
        events.push(Attachment { category: category.into(), event: event.into(), raw });
    }
    if events.is_empty() {
        bail!("ioscope attached no program");
    }
    Ok(events)
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
    fn attachments_are_read_from_the_report_with_their_kind() {
        let json = serde_json::json!({"bpf": {"programs": [
            {"program": "a", "tracepoint": "block:block_io_start", "mechanism": "btf_tracepoint", "attached": true},
            {"program": "b", "tracepoint": "syscalls:sys_enter_fsync", "mechanism": "tracepoint", "attached": true},
            {"program": "b", "tracepoint": "syscalls:sys_enter_sync", "mechanism": "tracepoint", "attached": false},
            {"program": "c", "tracepoint": "sched:sched_switch", "mechanism": "raw_tracepoint", "attached": true},
        ]}});
        let a = attachments(&json).unwrap();
        let names: Vec<_> = a.iter().map(|a| (a.category.as_str(), a.event.as_str(), a.raw)).collect();
        assert_eq!(
            names,
            [
                ("block", "block_io_start", true),
                ("syscalls", "sys_enter_fsync", false),
                ("sched", "sched_switch", true)
            ]
        );
        let fentry = serde_json::json!({"bpf": {"programs": [
            {"program": "f", "tracepoint": "filemap:mm_filemap_get_pages", "mechanism": "fexit", "attached": true},
        ]}});
        assert!(attachments(&fentry).is_err());
    }

    #[test]
    fn write_iops_is_field_49() {
        let mut f: Vec<String> = (1..=130).map(|i| i.to_string()).collect();
        f[0] = "3".into();
        f[48] = "1234.5".into();
        assert_eq!(write_iops(&f.join(";")), Some(1234.5));
        assert_eq!(write_iops("nothing"), None);
    }
}
