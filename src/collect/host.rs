//! Host identity and uptime: /proc/sys/kernel/{hostname,osrelease} and /proc/uptime.

use procfs::{FromRead, Uptime};

use super::read;
use super::root::SystemRoot;
use crate::sample::HostInfo;

pub fn read(root: &SystemRoot, files: &mut read::Files) -> HostInfo {
    let kernel_dir = root.proc.join("sys/kernel");
    let hostname = files.line(&kernel_dir.join("hostname")).unwrap_or_default();
    let kernel = files.line(&kernel_dir.join("osrelease")).unwrap_or_default();
    HostInfo { hostname, kernel, uptime_s: uptime(root, files) }
}

/// /proc/uptime's first field, seconds (0 when unreadable). For the live /proc, the clock it
/// prints (CLOCK_BOOTTIME, through the vDSO: no file read each sample), cut to centiseconds as it
/// prints it.
pub fn uptime(root: &SystemRoot, files: &mut read::Files) -> f64 {
    if root.is_live() {
        let ns = crate::util::clock_ns(libc::CLOCK_BOOTTIME);
        return (ns / 1_000_000_000) as f64 + ((ns % 1_000_000_000) / 10_000_000) as f64 / 100.0;
    }
    let uptime = files.record(&root.proc.join("uptime")).unwrap_or("");
    Uptime::from_read(uptime.as_bytes()).map(|u| u.uptime).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clock is what /proc/uptime prints: read between two reads of the file, it lies
    /// between them.
    #[test]
    fn the_live_uptime_is_proc_uptimes() {
        let file = || {
            let text = std::fs::read_to_string("/proc/uptime").unwrap();
            text.split_whitespace().next().unwrap().parse::<f64>().unwrap()
        };
        let before = file();
        let clock = uptime(&SystemRoot::live(), &mut read::Files::kept());
        let after = file();
        assert!(before <= clock && clock <= after, "{before} <= {clock} <= {after}");
        assert!((clock * 100.0 - (clock * 100.0).round()).abs() < 1e-3, "centiseconds, as the file: {clock}");
    }
}
