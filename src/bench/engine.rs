//! The I/O engines. A job runs on one of two engines ([`Engine`]); what both share (the job, its
//! result, the block order, the end of a job) is in [`super::job`]:
//!
//! - io_uring ([`super::uring`]): one thread keeps QD requests in flight on a ring — what fio's
//!   `ioengine=io_uring iodepth=QD` does, and the default. At QD32 on 2 CPUs, 32 threads each
//!   blocked in pread cost far more CPU (a wake-up and two context switches per request) than one
//!   submitter, so a thread pool measured ~20–35 % fewer IOPS than fio's io_uring on a fast device.
//! - a pool of QD threads doing synchronous pread/pwrite, one request in flight each (fio's
//!   `ioengine=psync numjobs=QD`): the fallback where io_uring is unavailable
//!   (`kernel.io_uring_disabled`, seccomp, old kernels), and always for mmap, whose "I/O" is memory
//!   copies and page faults.
//!
//! Every job does one pass over the file (sequential: block 0, 1, 2, …; random: each block once, in
//! a shuffled order, like fio's random map) or stops at the runtime, whichever comes first; with
//! `--time-based` it starts over until the runtime is up.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::buffers::IoBuffers;
use super::histogram::Histogram;
use super::job::{finish, EngineJob, EngineResult, Order};
use super::spec::{Engine, Fsync, Mode};

/// The engine a job runs on: mmap jobs copy memory, so they always use threads.
pub fn engine_for(engine: Engine, mode: Mode) -> Engine {
    if mode == Mode::Mmap {
        Engine::Threads
    } else {
        engine
    }
}

/// Runs one job on an already opened file (O_DIRECT set for direct mode). Blocks until done.
pub fn run(file: &File, job: &EngineJob) -> anyhow::Result<EngineResult> {
    let bs = job.spec.bs;
    let blocks = job.size / bs;
    anyhow::ensure!(blocks > 0, "the file ({} bytes) is smaller than one block ({bs} bytes)", job.size);
    let order = Order::new(job.spec.rw.is_random(), blocks, job.seed);
    match engine_for(job.engine, job.spec.mode) {
        Engine::IoUring => super::uring::run(file, job, &order, blocks),
        Engine::Threads => run_threads(file, job, &order, blocks),
    }
}

/// The thread pool: QD threads, each with one synchronous request in flight.
fn run_threads(file: &File, job: &EngineJob, order: &Order, blocks: u64) -> anyhow::Result<EngineResult> {
    let bs = job.spec.bs;
    let map = match job.spec.mode {
        Mode::Mmap => Some(Mapping::new(file, blocks * bs, job.spec.rw.is_write())?),
        _ => None,
    };
    let next = AtomicU64::new(0);
    let writes = AtomicU64::new(0);
    let threads = job.spec.qd as usize;
    // One buffer per thread, mapped and filled before the clock starts (that is not I/O).
    let bufs = IoBuffers::new(threads, bs as usize, job.mem_align as usize, job.huge_pages)?;
    // The clock starts when every thread is ready: all of them and this one meet at a barrier.
    let ready = std::sync::Barrier::new(threads + 1);
    let mut start = Instant::now();
    let results: Vec<anyhow::Result<WorkerResult>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (next, writes, map, ready, bufs) = (&next, &writes, map.as_ref(), &ready, &bufs);
                s.spawn(move || worker(file, job, order, blocks, next, writes, ready, map, bufs, i))
            })
            .collect();
        ready.wait();
        start = Instant::now();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("an I/O thread panicked"))))
            .collect()
    });
    let mut out = EngineResult {
        buffer_bytes: bufs.used_bytes(),
        buffer_huge_bytes: bufs.huge_bytes(),
        ..Default::default()
    };
    for r in results {
        let w = r?;
        out.latency.merge(&w.latency);
        out.periodic_fsync += w.fsync_time;
        out.periodic_fsyncs += w.fsyncs;
        out.cpu += w.cpu;
    }
    finish(job, &mut out, start, || match &map {
        Some(m) => m.sync(),
        None => Ok(file.sync_all()?),
    })?;
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn worker(
    file: &File,
    job: &EngineJob,
    order: &Order,
    blocks: u64,
    next: &AtomicU64,
    writes: &AtomicU64,
    ready: &std::sync::Barrier,
    map: Option<&Mapping>,
    bufs: &IoBuffers,
    slot: usize,
) -> anyhow::Result<WorkerResult> {
    let bs = job.spec.bs;
    ready.wait();
    let buf = bufs.ptr(slot);
    let cpu_start = thread_cpu();
    let deadline = Instant::now() + job.runtime;
    let fd = file.as_raw_fd();
    let is_write = job.spec.rw.is_write();
    let mut hist = Histogram::default();
    let (mut fsync_time, mut fsyncs) = (Duration::ZERO, 0u64);
    loop {
        if job.stop.load(Ordering::Relaxed) {
            break;
        }
        let n = next.fetch_add(1, Ordering::Relaxed);
        if n >= blocks && !job.time_based {
            break;
        }
        let offset = order.block(n % blocks, blocks) * bs;
        let t = Instant::now();
        if t >= deadline {
            break;
        }
        match map {
            Some(m) => m.copy(offset, bs, buf, is_write),
            None => full_io(fd, buf, bs as usize, offset, is_write)?,
        }
        let done = Instant::now();
        hist.record((done - t).as_nanos() as u64);
        job.progress.ops.fetch_add(1, Ordering::Relaxed);
        job.progress.bytes.fetch_add(bs, Ordering::Relaxed);
        if let (true, Fsync::Every(every)) = (is_write, job.fsync) {
            if (writes.fetch_add(1, Ordering::Relaxed) + 1).is_multiple_of(every) {
                let f = Instant::now();
                match map {
                    Some(m) => m.sync()?,
                    None => file.sync_data()?,
                }
                fsync_time += f.elapsed();
                fsyncs += 1;
            }
        }
    }
    Ok(WorkerResult { latency: hist, fsync_time, fsyncs, cpu: thread_cpu().saturating_sub(cpu_start) })
}

struct WorkerResult {
    latency: Histogram,
    fsync_time: Duration,
    fsyncs: u64,
    cpu: Duration,
}

/// This thread's CPU time so far (getrusage RUSAGE_THREAD: user + system).
pub(super) fn thread_cpu() -> Duration {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is a writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// One whole request: pread/pwrite again after a short transfer (a signal, a buffered partial
/// read), as an application would. EINTR is retried.
fn full_io(fd: i32, buf: *mut u8, len: usize, offset: u64, write: bool) -> anyhow::Result<()> {
    let mut done = 0usize;
    while done < len {
        // SAFETY: buf has len bytes; done < len keeps the pointer and length inside it.
        let n = unsafe {
            let p = buf.add(done);
            let off = (offset + done as u64) as libc::off_t;
            if write {
                libc::pwrite(fd, p as *const libc::c_void, len - done, off)
            } else {
                libc::pread(fd, p as *mut libc::c_void, len - done, off)
            }
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            let what = if write { "pwrite" } else { "pread" };
            return Err(anyhow::Error::new(e).context(format!("{what} of {len} bytes at offset {offset}")));
        }
        if n == 0 {
            anyhow::bail!("unexpected end of file at offset {}", offset + done as u64);
        }
        done += n as usize;
    }
    Ok(())
}

/// The file mapped shared: reads and writes become memory copies, page faults do the I/O.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is shared memory; threads copy disjoint blocks to and from it.
unsafe impl Sync for Mapping {}
unsafe impl Send for Mapping {}

impl Mapping {
    fn new(file: &File, len: u64, write: bool) -> anyhow::Result<Mapping> {
        let prot = if write { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        // SAFETY: a fresh mapping of an open file; checked for MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), len as usize, prot, libc::MAP_SHARED, file.as_raw_fd(), 0)
        };
        if ptr == libc::MAP_FAILED {
            return Err(anyhow::Error::new(std::io::Error::last_os_error()).context("mmap of the test file"));
        }
        Ok(Mapping { ptr: ptr as *mut u8, len: len as usize })
    }

    fn copy(&self, offset: u64, len: u64, buf: *mut u8, write: bool) {
        let (off, len) = (offset as usize, len as usize);
        debug_assert!(off + len <= self.len);
        // SAFETY: off + len is within the mapping (blocks × bs) and buf has len bytes.
        unsafe {
            if write {
                std::ptr::copy_nonoverlapping(buf, self.ptr.add(off), len);
            } else {
                std::ptr::copy_nonoverlapping(self.ptr.add(off), buf, len);
                std::hint::black_box(buf);
            }
        }
    }

    fn sync(&self) -> anyhow::Result<()> {
        // SAFETY: msync on our own mapping.
        if unsafe { libc::msync(self.ptr as *mut libc::c_void, self.len, libc::MS_SYNC) } != 0 {
            return Err(anyhow::Error::new(std::io::Error::last_os_error()).context("msync"));
        }
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping what `new` mapped.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::super::job::Progress;
    use super::super::spec::JobSpec;
    use super::*;

    #[test]
    fn a_job_reads_and_writes_a_real_file() {
        // io_uring where this machine allows it (the thread pool is what runs otherwise).
        let mut engines = vec![Engine::Threads];
        match super::super::uring::available() {
            Ok(()) => engines.push(Engine::IoUring),
            Err(why) => eprintln!("io_uring engine not tested: {why}"),
        }
        for engine in engines {
            one_engine_reads_and_writes_a_real_file(engine);
        }
    }

    fn one_engine_reads_and_writes_a_real_file(engine: Engine) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![1u8; 64 * 1024]).unwrap();
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        let stop = AtomicBool::new(false);
        let progress = Progress::default();
        let noop = || {};
        for (rw, mode, qd) in [
            (super::super::spec::Rw::RandRead, Mode::Buffered, 4),
            (super::super::spec::Rw::Write, Mode::Buffered, 1),
            (super::super::spec::Rw::RandWrite, Mode::Mmap, 2),
            (super::super::spec::Rw::RandWrite, Mode::Buffered, 3),
        ] {
            progress.reset();
            let job = EngineJob {
                spec: JobSpec { rw, bs: 4096, mode, qd },
                engine,
                size: 64 * 1024,
                runtime: Duration::from_secs(30),
                time_based: false,
                fsync: Fsync::End,
                mem_align: 512,
                huge_pages: false,
                stop: &stop,
                progress: &progress,
                seed: 1,
                before_final_fsync: &noop,
            };
            let r = run(&file, &job).unwrap();
            assert_eq!((r.ops, r.bytes), (16, 65536), "{engine:?} {rw:?} {mode:?}");
            assert_eq!(progress.ops.load(Ordering::Relaxed), 16);
            assert!(!r.interrupted);
        }
        // The writes put the engine's buffer pattern in every block (the file was all 1s).
        let content = std::fs::read(&path).unwrap();
        assert!(
            content.chunks(4096).all(|b| b.iter().any(|&x| x != 1)),
            "{engine:?}: a block was not written"
        );
        // A file shorter than the job's size: a clear error, after every request in flight ended.
        let read = |qd: u32, size: u64| EngineJob {
            spec: JobSpec { rw: super::super::spec::Rw::Read, bs: 4096, mode: Mode::Buffered, qd },
            engine,
            size,
            runtime: Duration::from_secs(30),
            time_based: false,
            fsync: Fsync::None,
            mem_align: 512,
            huge_pages: false,
            stop: &stop,
            progress: &progress,
            seed: 1,
            before_final_fsync: &noop,
        };
        let e = run(&file, &read(4, 128 * 1024)).unwrap_err();
        assert!(format!("{e:#}").contains("end of file"), "{engine:?}: {e:#}");
        // Time-based: more than one pass, ended by the runtime.
        progress.reset();
        let job = EngineJob { runtime: Duration::from_millis(200), time_based: true, ..read(2, 65536) };
        let r = run(&file, &job).unwrap();
        assert!(r.ops > 16, "time-based ran {} requests: not past the first pass", r.ops);
        // A stop request ends the job before any I/O.
        stop.store(true, Ordering::Relaxed);
        let r = run(&file, &read(1, 65536)).unwrap();
        assert!(r.interrupted && r.ops == 0);
    }
}
