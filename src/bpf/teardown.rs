//! Quitting at once although the kernel is slow to detach eBPF programs.
//!
//! Each eBPF program the kernel detaches waits for RCU grace periods, under locks the releases
//! share: one after another the full set took 2.6 s on this project's 6.18 VM, and from one
//! thread each (`BpfCollector`'s drop) still 1.3–1.6 s, which the user waited for after the
//! screen was restored or `--once` had printed. So a process that is about to end hands the
//! release to a child: just before the collector's programs are dropped, a child is forked that
//! keeps them (its own references to the same kernel objects), gives up everything else (the
//! terminal, pipes, sockets, files), waits for its parent to be gone, then exits, and the
//! kernel detaches the programs then, in the background. The parent's own closes only drop a
//! reference and are instant (so it must not detach them itself: aya's
//! unload does, whoever else holds them). The user's shell, `ssh host ioscope --once` and
//! `ioscope --once | jq` end as soon as the parent does; the programs keep running for about
//! as long as the release takes (a second or two).
//!
//! Only the `ioscope` binary asks for this ([`detach_in_background_on_drop`]): a library user
//! (the tests) that drops a collector and goes on expects its programs gone at once.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};

static IN_BACKGROUND: AtomicBool = AtomicBool::new(false);

/// From now on, dropping a collector leaves its programs to a child that outlives this
/// process (see the module's comment). For a process that ends after its collector is dropped.
pub fn detach_in_background_on_drop() {
    IN_BACKGROUND.store(true, Ordering::Relaxed);
}

/// What an open descriptor of this process is, by its `/proc/self/fd` link.
fn is_bpf_object(target: &str) -> bool {
    matches!(
        target,
        "anon_inode:bpf_link" | "anon_inode:bpf-prog" | "anon_inode:bpf-map" | "anon_inode:[perf_event]"
    )
}

/// This process's descriptors, split into eBPF objects and everything else.
fn open_fds() -> (Vec<RawFd>, Vec<RawFd>) {
    let (mut bpf, mut other) = (Vec::new(), Vec::new());
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return (bpf, other) };
    for entry in dir.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|name| name.parse::<RawFd>().ok()) else {
            continue;
        };
        match std::fs::read_link(entry.path()) {
            Ok(target) if target.to_str().is_some_and(is_bpf_object) => bpf.push(fd),
            // The directory's own descriptor is closed by now, and its number may be reused.
            _ => other.push(fd),
        }
    }
    (bpf, other)
}

/// When asked for, forks the child that keeps this process's eBPF objects until this process
/// has exited, and says whether it did: then the caller must not detach or close anything (aya
/// detaches explicitly, whoever else holds the objects), only forget them.
pub(crate) fn hand_over_to_child() -> bool {
    if !IN_BACKGROUND.load(Ordering::Relaxed) {
        return false;
    }
    let (bpf, other) = open_fds();
    if bpf.is_empty() {
        return false;
    }
    let mut pipe = [0 as RawFd; 2];
    // SAFETY: plain system calls on descriptors this process owns. After fork the child runs
    // only async-signal-safe calls (close, read, _exit) on memory prepared before the fork.
    unsafe {
        if libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return false;
        }
        // The parent's exit closes its descriptors in ascending order: the write end goes
        // above every other one, so the child wakes only when all the parent's are closed.
        let above = bpf.iter().chain(&other).chain(&pipe).max().map_or(0, |fd| fd + 1);
        let write_end = libc::fcntl(pipe[1], libc::F_DUPFD_CLOEXEC, above);
        libc::close(pipe[1]);
        if write_end < 0 {
            libc::close(pipe[0]);
            return false;
        }
        // What the child keeps, ascending (made here: the child must not allocate).
        let mut keep: Vec<RawFd> = bpf.iter().copied().chain([pipe[0]]).collect();
        keep.sort_unstable();
        match libc::fork() {
            0 => {
                // Everything but the eBPF objects and the read end goes, including what another
                // thread may have opened since the listing. Before close_range (5.9): the listing
                // (it may hold the number of its own directory, since reused by the pipe).
                if !close_all_but(&keep) {
                    for &fd in other.iter().filter(|&&fd| fd != pipe[0]) {
                        libc::close(fd);
                    }
                }
                libc::close(write_end);
                // End of file once the parent has exited and closed all its descriptors.
                let mut byte = 0u8;
                while libc::read(pipe[0], (&raw mut byte).cast(), 1) < 0
                    && *libc::__errno_location() == libc::EINTR
                {}
                libc::_exit(0)
            }
            -1 => {
                libc::close(pipe[0]);
                libc::close(write_end);
                false
            }
            _ => {
                libc::close(pipe[0]);
                true
            }
        }
    }
}

/// Closes every descriptor but those in `keep` (ascending), with close_range(2); false where the
/// kernel has no close_range (before 5.9). Async-signal-safe: system calls only, no allocation.
fn close_all_but(keep: &[RawFd]) -> bool {
    // SAFETY: closes descriptors of this (forked, single-threaded) process only.
    let close_range = |first: RawFd, last: u32| unsafe {
        libc::syscall(libc::SYS_close_range, first as u32, last, 0u32) == 0
    };
    let mut next: RawFd = 0;
    for &fd in keep {
        if fd > next && !close_range(next, (fd - 1) as u32) {
            return false;
        }
        next = fd + 1;
    }
    close_range(next, u32::MAX)
}
