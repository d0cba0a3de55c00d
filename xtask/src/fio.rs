//! Running fio and reading its terse (version 3) report, for the overhead benchmarks.

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
