//! Whether this process may load and attach tracing eBPF programs, and what to tell the user if not.
//!
//! Since Linux 5.8, loading a tracing program needs CAP_BPF plus CAP_PERFMON (for tracepoints and
//! bpf_probe_read_kernel); CAP_SYS_ADMIN implies both (and is all older kernels know). Mounting
//! tracefs needs CAP_SYS_ADMIN. Capabilities come from the effective set in /proc/self/status.

use std::fs;

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// The user-facing reason when eBPF cannot be used for lack of privileges.
pub const NEED_PRIVILEGES: &str = "needs root, or CAP_BPF and CAP_PERFMON; run with sudo";

/// The effective capability set of a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    effective: u64,
}

impl Capabilities {
    /// This process's effective capabilities; none when /proc/self/status cannot be read.
    pub fn current() -> Capabilities {
        Capabilities::read().unwrap_or(Capabilities { effective: 0 })
    }

    /// This process's effective capabilities, or why they could not be read (out of file
    /// descriptors: then eBPF is off for that reason, not for a want of privileges).
    pub fn read() -> Result<Capabilities, String> {
        let unread =
            |why: String| format!("eBPF unavailable: cannot read this process's capabilities: {why}");
        let status = fs::read_to_string("/proc/self/status").map_err(|e| unread(e.to_string()))?;
        Capabilities::from_status(&status).ok_or_else(|| unread("no CapEff line in /proc/self/status".into()))
    }

    /// Parses the `CapEff:` line (hex bitmask) of a /proc/PID/status text.
    pub fn from_status(status: &str) -> Option<Capabilities> {
        let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim();
        u64::from_str_radix(hex, 16).ok().map(|effective| Capabilities { effective })
    }

    fn has(self, cap: u32) -> bool {
        self.effective & (1u64 << cap) != 0
    }

    pub fn can_mount(self) -> bool {
        self.has(CAP_SYS_ADMIN)
    }

    /// None when tracing programs can be loaded and attached, else the reason to show.
    pub fn missing_for_tracing(self) -> Option<String> {
        let bpf = self.has(CAP_BPF) || self.has(CAP_SYS_ADMIN);
        let perfmon = self.has(CAP_PERFMON) || self.has(CAP_SYS_ADMIN);
        let missing = match (bpf, perfmon) {
            (true, true) => return None,
            (false, false) => "CAP_BPF and CAP_PERFMON are missing",
            (false, true) => "CAP_BPF is missing",
            (true, false) => "CAP_PERFMON is missing",
        };
        Some(format!("eBPF {NEED_PRIVILEGES} ({missing})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(bits: &[u32]) -> Capabilities {
        Capabilities { effective: bits.iter().fold(0, |acc, b| acc | (1u64 << b)) }
    }

    #[test]
    fn reads_cap_eff_from_proc_status() {
        let root = "Name:\tioscope\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\n\
                    CapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\n";
        let c = Capabilities::from_status(root).unwrap();
        assert!(c.has(CAP_BPF) && c.has(CAP_PERFMON) && c.has(CAP_SYS_ADMIN));
        let nobody = "Name:\tioscope\nCapEff:\t0000000000000000\n";
        assert_eq!(Capabilities::from_status(nobody).unwrap(), caps(&[]));
        assert_eq!(Capabilities::from_status("Name:\tx\n"), None);
        assert_eq!(Capabilities::from_status("CapEff:\tzz\n"), None);
    }

    #[test]
    fn root_and_bpf_plus_perfmon_may_trace() {
        assert_eq!(caps(&[CAP_SYS_ADMIN]).missing_for_tracing(), None);
        assert_eq!(caps(&[CAP_BPF, CAP_PERFMON]).missing_for_tracing(), None);
    }

    #[test]
    fn says_which_capability_is_missing() {
        let none = caps(&[]).missing_for_tracing().unwrap();
        assert_eq!(none, "eBPF needs root, or CAP_BPF and CAP_PERFMON; run with sudo (CAP_BPF and CAP_PERFMON are missing)");
        assert!(caps(&[CAP_BPF]).missing_for_tracing().unwrap().ends_with("(CAP_PERFMON is missing)"));
        assert!(caps(&[CAP_PERFMON]).missing_for_tracing().unwrap().ends_with("(CAP_BPF is missing)"));
    }

    #[test]
    fn only_sys_admin_may_mount() {
        assert!(caps(&[CAP_SYS_ADMIN]).can_mount());
        assert!(!caps(&[CAP_BPF, CAP_PERFMON]).can_mount());
    }
}
