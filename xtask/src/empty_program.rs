//! An eBPF program that does nothing (`r0 = 0; exit`), attached to a raw tracepoint for as long
//! as it is held: the floor of any eBPF tool on that event. What remains of a tool's overhead
//! above it is the tool's own; the floor itself is the kernel's cost of running a program there
//! at all (the tracepoint's call, `bpf_trace_run`, the indirect calls, which retpolines make dear).
//!
//! Loaded with the bpf(2) system call directly: two instructions need no object file, and the
//! benchmark must not depend on the project's own loader, which is what it compares against.

use std::os::fd::{FromRawFd, OwnedFd};

use anyhow::{bail, Result};

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_RAW_TRACEPOINT_OPEN: libc::c_long = 17;
const BPF_PROG_TYPE_RAW_TRACEPOINT: u32 = 17;
const BPF_PROG_TYPE_TRACEPOINT: u32 = 5;
const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `_IO('$', 8)` and `_IOW('$', 8, __u32)`: PERF_EVENT_IOC_SET_BPF; `_IO('$', 0)`: ..._ENABLE.
const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// `mov r0, 0` and `exit`, as the kernel's `struct bpf_insn` (code, regs, off, imm) in memory.
const RETURN_ZERO: [u64; 2] = [0x0000_0000_0000_00b7, 0x0000_0000_0000_0095];

/// The leading fields of `union bpf_attr` for BPF_PROG_LOAD; the rest of the union stays zero.
#[repr(C)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    rest: [u8; 96],
}

/// The leading fields of `union bpf_attr` for BPF_RAW_TRACEPOINT_OPEN.
#[repr(C)]
struct RawTracepointOpenAttr {
    name: u64,
    prog_fd: u32,
    rest: [u8; 52],
}

/// The leading fields of `struct perf_event_attr` (PERF_ATTR_SIZE_VER0 is 64 bytes).
#[repr(C)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// The program and its attachment: detached when dropped.
pub struct EmptyProgram {
    _link: OwnedFd,
    prog: OwnedFd,
}

impl EmptyProgram {
    /// Attaches the empty program to the raw tracepoint `event` (e.g. `mm_filemap_get_pages`): the
    /// floor of a raw or BTF tracepoint program there.
    pub fn attach(event: &str) -> Result<EmptyProgram> {
        let prog = load(BPF_PROG_TYPE_RAW_TRACEPOINT)?;
        let name = std::ffi::CString::new(event)?;
        let mut open = RawTracepointOpenAttr {
            name: name.as_ptr() as u64,
            prog_fd: std::os::fd::AsRawFd::as_raw_fd(&prog) as u32,
            rest: [0; 52],
        };
        let link =
            bpf(BPF_RAW_TRACEPOINT_OPEN, &mut open, &format!("attaching it to raw tracepoint {event}"))?;
        Ok(EmptyProgram { _link: link, prog })
    }

    /// Attaches the empty program to the classic tracepoint `category:event` (through a perf
    /// event, as aya attaches tracepoint programs): the floor of a classic tracepoint program
    /// there, the record the kernel builds for it included.
    pub fn attach_tracepoint(category: &str, event: &str) -> Result<EmptyProgram> {
        let prog = load(BPF_PROG_TYPE_TRACEPOINT)?;
        let id_path = format!("/sys/kernel/tracing/events/{category}/{event}/id");
        let id: u64 = std::fs::read_to_string(&id_path)
            .map_err(|e| anyhow::anyhow!("reading {id_path}: {e}"))?
            .trim()
            .parse()?;
        let mut attr = PerfEventAttr {
            type_: PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: id,
            sample_period: 1,
            sample_type: 0,
            read_format: 0,
            flags: 0,
            wakeup_events: 1,
            bp_type: 0,
            config1: 0,
        };
        // SAFETY: a perf_event_attr of the size it declares; pid -1, cpu 0 (a tracepoint's programs
        // run on every CPU), no group, close-on-exec.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &mut attr as *mut PerfEventAttr,
                -1,
                0,
                -1,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            bail!("perf_event_open for {category}:{event}: {}", std::io::Error::last_os_error());
        }
        // SAFETY: a new descriptor the kernel just gave us, owned by nobody else.
        let link = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let raw = std::os::fd::AsRawFd::as_raw_fd(&link);
        // SAFETY: ioctls on the perf event just opened, with the program's descriptor.
        unsafe {
            if libc::ioctl(raw, PERF_EVENT_IOC_SET_BPF as _, std::os::fd::AsRawFd::as_raw_fd(&prog)) < 0
                || libc::ioctl(raw, PERF_EVENT_IOC_ENABLE as _, 0) < 0
            {
                bail!(
                    "attaching the empty program to {category}:{event}: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
        Ok(EmptyProgram { _link: link, prog })
    }
}

impl EmptyProgram {
    /// The kernel's count of the program's runs and their total time (`run_cnt`, `run_time_ns`
    /// in its fdinfo: counted while `kernel.bpf_stats_enabled` is 1), as the kernel times
    /// every program: the floor the lab's cost run divides by (src/bin/lab-guest.rs).
    #[allow(dead_code)] // only the lab's guest reads it; the host benchmarks time the workload
    pub fn runs(&self) -> Result<(u64, u64)> {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.prog);
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))?;
        let value = |key: &str| -> Result<u64> {
            info.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':')?.trim().parse().ok())
                .ok_or_else(|| anyhow::anyhow!("no {key} in the program's fdinfo"))
        };
        Ok((value("run_cnt")?, value("run_time_ns")?))
    }
}

/// Loads `mov r0, 0; exit` as a program of type `prog_type`.
fn load(prog_type: u32) -> Result<OwnedFd> {
    let license = c"GPL";
    let mut load = ProgLoadAttr {
        prog_type,
        insn_cnt: RETURN_ZERO.len() as u32,
        insns: RETURN_ZERO.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 0,
        log_size: 0,
        log_buf: 0,
        kern_version: 0,
        prog_flags: 0,
        rest: [0; 96],
    };
    bpf(BPF_PROG_LOAD, &mut load, "loading the empty program")
}

/// bpf(2) with `attr`, returning the new file descriptor.
pub fn bpf<T>(cmd: libc::c_long, attr: &mut T, what: &str) -> Result<OwnedFd> {
    // SAFETY: `attr` is a #[repr(C)] prefix of union bpf_attr, zero beyond the fields set, and
    // every pointer in it outlives the call.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>()) };
    if fd < 0 {
        bail!("{what}: {} (root, or CAP_BPF and CAP_PERFMON, is needed)", std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor the kernel just gave us, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_prefixes_have_the_kernels_offsets() {
        // union bpf_attr, BPF_PROG_LOAD: insns at 8, license at 16, kern_version at 40.
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, insns), 8);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, license), 16);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, kern_version), 40);
        // BPF_RAW_TRACEPOINT_OPEN: name at 0, prog_fd at 8.
        assert_eq!(std::mem::offset_of!(RawTracepointOpenAttr, prog_fd), 8);
        // perf_event_attr: PERF_ATTR_SIZE_VER0, wakeup_events at 48, config1 at 56.
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 64);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, wakeup_events), 48);
    }
}
