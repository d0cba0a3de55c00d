//! Host identity and uptime: /proc/sys/kernel/{hostname,osrelease} and /proc/uptime.

use procfs::{FromRead, Uptime};

use super::read;
use super::SystemRoot;
use crate::sample::HostInfo;

pub fn read(root: &SystemRoot, files: &mut read::Files) -> HostInfo {
    let kernel_dir = root.proc.join("sys/kernel");
    let hostname = files.line(&kernel_dir.join("hostname")).unwrap_or_default();
    let kernel = files.line(&kernel_dir.join("osrelease")).unwrap_or_default();
    HostInfo { hostname, kernel, uptime_s: uptime(root, files) }
}

/// /proc/uptime's first field, seconds (0 when unreadable).
pub fn uptime(root: &SystemRoot, files: &mut read::Files) -> f64 {
    let uptime = files.record(&root.proc.join("uptime")).unwrap_or("");
    Uptime::from_read(uptime.as_bytes()).map(|u| u.uptime).unwrap_or(0.0)
}
