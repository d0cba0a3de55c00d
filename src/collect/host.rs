//! Host identity and uptime: /proc/sys/kernel/{hostname,osrelease} and /proc/uptime.

use procfs::{FromRead, Uptime};

use super::read;
use super::SystemRoot;
use crate::sample::HostInfo;

pub fn read(root: &SystemRoot) -> HostInfo {
    let kernel_dir = root.proc.join("sys/kernel");
    HostInfo {
        hostname: read::line_file(&kernel_dir.join("hostname")).unwrap_or_default(),
        kernel: read::line_file(&kernel_dir.join("osrelease")).unwrap_or_default(),
        uptime_s: Uptime::from_file(root.proc.join("uptime")).map(|u| u.uptime).unwrap_or(0.0),
    }
}
