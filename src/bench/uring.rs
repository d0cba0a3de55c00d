//! The io_uring engine: one thread keeps QD requests in flight on one ring, the way fio's
//! `ioengine=io_uring iodepth=QD` does with its defaults (`iodepth_batch_submit=1`,
//! `iodepth_batch_complete_min=1`): each request is submitted as soon as a slot is free, with its
//! own `io_uring_enter`, and the thread then waits for at least one completion.
//!
//! A request's latency runs from just before its submission to the moment its completion is
//! reaped — fio's `lat` (submission + completion latency), the time an application waiting on it
//! would see.
//!
//! Safety of the buffers: the kernel writes into (or reads from) each slot's buffer until the
//! request completes, so nothing returns before every submitted request has completed: errors stop
//! new submissions and the ring is drained first. If even waiting fails, the buffers are leaked
//! rather than freed under the kernel.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::Instant;

use io_uring::{opcode, types, IoUring, Probe};

use super::buffers::IoBuffers;
use super::histogram::Histogram;
use super::job::{finish, EngineJob, EngineResult, Order};
use super::spec::Fsync;

/// Whether io_uring can run reads and writes here; the reason when not (for the note that says
/// the thread pool is used instead).
pub fn available() -> Result<(), String> {
    let ring = IoUring::new(2).map_err(|e| setup_error(&e))?;
    let mut probe = Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| format!("io_uring cannot list its operations ({e}): Linux 5.6+ is needed"))?;
    if !probe.is_supported(opcode::Read::CODE) || !probe.is_supported(opcode::Write::CODE) {
        return Err("this kernel's io_uring has no READ/WRITE operations (Linux 5.6+ is needed)".into());
    }
    Ok(())
}

/// io_uring_setup's refusal in words: which of the usual causes it is.
fn setup_error(e: &std::io::Error) -> String {
    let sysctl = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    match e.raw_os_error() {
        Some(libc::ENOSYS) => "io_uring_setup: not in this kernel (ENOSYS)".into(),
        Some(libc::EPERM) if !sysctl.is_empty() && sysctl != "0" => {
            format!("io_uring_setup: EPERM (kernel.io_uring_disabled = {sysctl})")
        }
        Some(libc::EPERM) => "io_uring_setup: EPERM (a seccomp filter or a container policy)".into(),
        _ => format!("io_uring_setup: {e}"),
    }
}

/// A ring set up as fio sets up its own: completions are run only when this thread asks for them
/// (`COOP_TASKRUN`, `SINGLE_ISSUER`, `DEFER_TASKRUN`: no interrupting the submitter to complete a
/// request), falling back flag by flag on kernels without them (before 6.1 and 5.19).
fn new_ring(qd: u32) -> anyhow::Result<IoUring> {
    let entries = qd.next_power_of_two();
    let tries: [fn(&mut io_uring::Builder); 3] = [
        |b| {
            b.setup_coop_taskrun().setup_single_issuer().setup_defer_taskrun();
        },
        |b| {
            b.setup_coop_taskrun();
        },
        |_| {},
    ];
    let mut last = None;
    for flags in tries {
        let mut b = IoUring::builder();
        flags(&mut b);
        match b.build(entries) {
            Ok(ring) => return Ok(ring),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = Some(e),
            Err(e) => anyhow::bail!(setup_error(&e)),
        }
    }
    anyhow::bail!(setup_error(&last.expect("three tries")))
}

/// IORING_ENTER_GETEVENTS (include/uapi/linux/io_uring.h).
const ENTER_GETEVENTS: u32 = 1;

/// One request slot: its buffer, and the request currently using it.
struct Slot {
    buf: *mut u8,
    offset: u64,
    /// Bytes done so far (a short transfer is resubmitted for the rest).
    done: usize,
    submitted: Instant,
}

/// Runs one job on io_uring. Same contract as the thread pool (`engine::run`).
pub(super) fn run(file: &File, job: &EngineJob, order: &Order, blocks: u64) -> anyhow::Result<EngineResult> {
    let bs = job.spec.bs as usize;
    let qd = job.spec.qd as usize;
    let is_write = job.spec.rw.is_write();
    let fd = types::Fd(file.as_raw_fd());
    let mut ring = new_ring(job.spec.qd)?;
    let bufs = IoBuffers::new(qd, bs, job.mem_align as usize, job.huge_pages)?;
    let mut slots: Vec<Slot> =
        (0..qd).map(|i| Slot { buf: bufs.ptr(i), offset: 0, done: 0, submitted: Instant::now() }).collect();
    let mut free: Vec<usize> = (0..qd).rev().collect();
    let mut out = EngineResult {
        buffer_bytes: bufs.used_bytes(),
        buffer_huge_bytes: bufs.huge_bytes(),
        ..Default::default()
    };
    let mut hist = Histogram::default();
    let mut error: Option<anyhow::Error> = None;
    let (mut next, mut inflight, mut writes) = (0u64, 0usize, 0u64);
    // RUSAGE_SELF, not this thread's: buffered writes the kernel cannot do without blocking run on
    // io_uring's workers, which are threads of this process.
    let cpu_start = process_cpu();
    let start = Instant::now();
    let deadline = start + job.runtime;
    loop {
        // Fill every free slot, one submission each.
        while error.is_none() && !job.stop.load(Ordering::Relaxed) && (next < blocks || job.time_based) {
            let Some(&i) = free.last() else { break };
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            free.pop();
            let s = &mut slots[i];
            s.offset = order.block(next % blocks, blocks) * bs as u64;
            s.done = 0;
            s.submitted = now;
            next += 1;
            if let Err(e) = submit(&mut ring, fd, s, i, bs, is_write) {
                return Err(abandon(bufs, ring, e));
            }
            inflight += 1;
        }
        if inflight == 0 {
            break;
        }
        // Completions already posted (each submission runs the deferred completion work) are
        // reaped without a system call; otherwise wait for one, as fio does.
        if ring.completion().is_empty() {
            match ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(abandon(bufs, ring, anyhow::Error::new(e).context("io_uring_enter waiting")));
                }
            }
        }
        // One completion at a time, each timed when it is taken and its slot refilled at once
        // (fio's iodepth_batch_complete_min = max = 1). Taking them in batches would time a whole
        // batch at once and leave its slots empty while the others are resubmitted.
        let cqe = ring.completion().next();
        let reaped = Instant::now();
        let Some((i, res)) = cqe.map(|c| (c.user_data() as usize, c.result())) else { continue };
        {
            inflight -= 1;
            let s = &mut slots[i];
            if res <= 0 {
                if error.is_none() {
                    error = Some(transfer_error(res, s, bs, is_write));
                }
                free.push(i);
                continue;
            }
            s.done += res as usize;
            if s.done < bs && error.is_none() {
                // A short transfer: ask for the rest, as an application would.
                if let Err(e) = submit(&mut ring, fd, s, i, bs, is_write) {
                    return Err(abandon(bufs, ring, e));
                }
                inflight += 1;
                continue;
            }
            free.push(i);
            if s.done < bs {
                continue;
            }
            hist.record(reaped.saturating_duration_since(s.submitted).as_nanos() as u64);
            job.progress.ops.fetch_add(1, Ordering::Relaxed);
            job.progress.bytes.fetch_add(bs as u64, Ordering::Relaxed);
            if let (true, Fsync::Every(every)) = (is_write, job.fsync) {
                writes += 1;
                if writes.is_multiple_of(every) && error.is_none() {
                    let f = Instant::now();
                    if let Err(e) = file.sync_data() {
                        error = Some(anyhow::Error::new(e).context("fdatasync"));
                    }
                    out.periodic_fsync += f.elapsed();
                    out.periodic_fsyncs += 1;
                }
            }
        }
    }
    if let Some(e) = error {
        return Err(e);
    }
    out.latency = hist;
    out.cpu = process_cpu().saturating_sub(cpu_start);
    finish(job, &mut out, start, || Ok(file.sync_all()?))?;
    Ok(out)
}

/// The ring failed with requests possibly still in flight: their buffers are leaked, never freed
/// while the kernel may still use them.
fn abandon(bufs: IoBuffers, ring: IoUring, e: anyhow::Error) -> anyhow::Error {
    std::mem::forget(bufs);
    std::mem::forget(ring);
    e
}

/// Queues the rest of slot `i`'s request and submits it (one `io_uring_enter`).
fn submit(
    ring: &mut IoUring,
    fd: types::Fd,
    s: &Slot,
    i: usize,
    bs: usize,
    write: bool,
) -> anyhow::Result<()> {
    // SAFETY: s.done < bs, so the pointer and length stay inside the slot's bs-byte buffer.
    let (ptr, len) = (unsafe { s.buf.add(s.done) }, (bs - s.done) as u32);
    let off = s.offset + s.done as u64;
    let entry = if write {
        opcode::Write::new(fd, ptr, len).offset(off).build()
    } else {
        opcode::Read::new(fd, ptr, len).offset(off).build()
    }
    .user_data(i as u64);
    // SAFETY: the buffer outlives the request: `run` drains every request before its buffers are unmapped.
    // The ring has at least QD entries and at most QD requests are queued, so it is never full.
    unsafe { ring.submission().push(&entry) }
        .map_err(|_| anyhow::anyhow!("io_uring submission queue full"))?;
    loop {
        // SAFETY: submits the one entry just queued; GETEVENTS without a minimum only runs the
        // deferred completion work (fio submits with the same flags).
        match unsafe { ring.submitter().enter::<libc::sigset_t>(1, 0, ENTER_GETEVENTS, None) } {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(anyhow::Error::new(e).context("io_uring_enter submitting a request")),
        }
    }
}

fn transfer_error(res: i32, s: &Slot, bs: usize, write: bool) -> anyhow::Error {
    let at = s.offset + s.done as u64;
    if res == 0 {
        return anyhow::anyhow!("unexpected end of file at offset {at}");
    }
    let what = if write { "write" } else { "read" };
    anyhow::Error::new(std::io::Error::from_raw_os_error(-res))
        .context(format!("io_uring {what} of {bs} bytes at offset {}", s.offset))
}

/// This process's CPU time so far (getrusage RUSAGE_SELF: user + system, every thread).
fn process_cpu() -> std::time::Duration {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is a writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| std::time::Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}
