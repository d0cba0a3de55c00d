//! Running fio and reading its terse (version 3) report, for the overhead benchmarks; and the
//! huge pages fio's `--mem=mmaphuge` buffers need, for the comparison with `ioscope bench`.

use std::process::Command;

use anyhow::{bail, Context, Result};

/// The read side of one fio run (fio's HOWTO, "Terse output", version 3): field 6 read KiB, 8 read
/// IOPS, 9 read runtime (ms), 88 and 89 user and system CPU (percent of the runtime).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReadFigures {
    pub kib: f64,
    pub iops: f64,
    pub runtime_ms: f64,
    pub usr_pct: f64,
    pub sys_pct: f64,
}

/// A time-based job of 4 KiB random reads of `target` for `seconds`, plus `extra` options.
pub fn randread_4k(name: &str, target: &std::path::Path, seconds: u64, extra: &[&str]) -> Vec<String> {
    read_job(name, target, "randread", "4k", seconds, extra)
}

/// A time-based read job (`rw`: fio's `--rw`, `read` or `randread`) of blocks of `bs` (fio's
/// `--bs`) from `target` for `seconds`, plus `extra` options.
pub fn read_job(
    name: &str,
    target: &std::path::Path,
    rw: &str,
    bs: &str,
    seconds: u64,
    extra: &[&str],
) -> Vec<String> {
    let mut args = vec![
        format!("--name={name}"),
        format!("--filename={}", target.display()),
        format!("--rw={rw}"),
        format!("--bs={bs}"),
        "--time_based".into(),
        format!("--runtime={seconds}"),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// Runs fio with `args` (a job on the command line) and returns its read figures.
pub fn run(args: &[String]) -> Result<ReadFigures> {
    let out = Command::new("fio")
        .args(args)
        .args(["--output-format=terse", "--terse-version=3"])
        .output()
        .context("running fio")?;
    if !out.status.success() {
        bail!("fio failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    parse_terse(&text).with_context(|| format!("no read figures in fio's output: {text}"))
}

/// Huge pages (hugetlbfs, what fio's `--mem=mmaphuge` maps) set aside for this run: the pool
/// (`/proc/sys/vm/nr_hugepages`) is raised by what is missing and put back on drop.
pub struct HugePages {
    restore: Option<u64>,
}

const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";

impl HugePages {
    /// Makes sure `free` huge pages are free (root when the pool must grow).
    pub fn reserve(free: u64) -> Result<HugePages> {
        let have = meminfo_field("HugePages_Free").context("HugePages_Free in /proc/meminfo")?;
        if have >= free {
            return Ok(HugePages { restore: None });
        }
        let total: u64 = std::fs::read_to_string(NR_HUGEPAGES)?.trim().parse()?;
        std::fs::write(NR_HUGEPAGES, (total + free - have).to_string())
            .with_context(|| format!("writing {NR_HUGEPAGES}"))?;
        let pages = HugePages { restore: Some(total) };
        let now = meminfo_field("HugePages_Free").unwrap_or(0);
        if now < free {
            bail!("only {now} of {free} huge pages could be set aside (memory too fragmented?)");
        }
        Ok(pages)
    }
}

impl Drop for HugePages {
    fn drop(&mut self) {
        if let Some(n) = self.restore {
            let _ = std::fs::write(NR_HUGEPAGES, n.to_string());
        }
    }
}

fn meminfo_field(name: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':')?.split_whitespace().next()?.parse().ok())
}

pub fn parse_terse(text: &str) -> Option<ReadFigures> {
    let line = text.lines().find(|l| l.starts_with("3;"))?;
    let f: Vec<&str> = line.split(';').collect();
    let num = |i: usize| -> Option<f64> { f.get(i - 1)?.trim_end_matches('%').parse().ok() };
    Some(ReadFigures {
        kib: num(6)?,
        iops: num(8)?,
        runtime_ms: num(9)?,
        usr_pct: num(88)?,
        sys_pct: num(89)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terse_v3_read_figures() {
        let mut f: Vec<String> = vec!["0".into(); 93];
        f[0] = "3".into();
        f[5] = "4194304".into();
        f[7] = "209715".into();
        f[8] = "5000".into();
        f[87] = "10.000000%".into();
        f[88] = "40.000000%".into();
        let r = parse_terse(&format!("fio-3.33\n{}\n", f.join(";"))).unwrap();
        assert_eq!(
            r,
            ReadFigures { kib: 4194304.0, iops: 209715.0, runtime_ms: 5000.0, usr_pct: 10.0, sys_pct: 40.0 }
        );
        assert_eq!(parse_terse("garbage"), None);
        assert_eq!(parse_terse("3;x;y"), None, "too few fields");
    }
}
