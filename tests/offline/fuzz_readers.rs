//! Issue 23's fuzz target, in the normal suite: the recording reader and the bench `--json`
//! reader get a few thousand damaged inputs each (bit flips, overwritten bytes and length fields,
//! cuts, insertions, duplicated chunks, random bytes; for recordings also damage behind a
//! recomputed checksum, so it reaches the zstd and JSON layers) from a fixed seed, for a bounded
//! time. No input may panic, hang, or make the reader allocate more than 100 MB: a counting
//! global allocator in this test binary records the peak of live heap bytes.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ioscope::bench::report::read_report;
use ioscope::bench::runner::BenchReport;
use ioscope::record::{Recording, RecordingHeader, RecordingWriter};
use ioscope::sample::{ProcIoCounters, ProcessIo, Sample};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new > l.size() {
                let now = LIVE.fetch_add(new - l.size(), Ordering::Relaxed) + new - l.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const LIMIT: usize = 100 << 20;
/// Per reader: a few seconds of inputs (CI-friendly), or this many, whichever ends first.
const BUDGET: Duration = Duration::from_secs(4);
const MAX_INPUTS: usize = 4000;

/// xorshift64: the same inputs on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len().max(1));
        match rng.below(8) {
            0 if !v.is_empty() => v[at] ^= 1 << rng.below(8),
            1 if !v.is_empty() => v[at] = rng.next() as u8,
            2 => v.truncate(at),
            3 => {
                let n = rng.below(64);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                v.splice(at.min(v.len())..at.min(v.len()), bytes);
            }
            4 if at + 4 <= v.len() => {
                // A length-like field: huge, zero or off by a little.
                let x: u32 = [u32::MAX, 0, 1 << 30, rng.next() as u32][rng.below(4)];
                v[at..at + 4].copy_from_slice(&x.to_le_bytes());
            }
            5 if !v.is_empty() => {
                let end = (at + rng.below(256)).min(v.len());
                let chunk = v[at..end].to_vec();
                v.splice(at..at, chunk);
            }
            6 => v = (0..rng.below(512)).map(|_| rng.next() as u8).collect(),
            _ => {}
        }
    }
    v
}

/// Recomputes each record's CRC (recording layout: 16-byte preamble, then kind u8 · len u32 ·
/// crc u32 · payload), so damage inside a payload gets past the checksum.
fn fix_checksums(v: &mut [u8]) {
    let mut pos = 16;
    while pos + 9 <= v.len() {
        let len = u32::from_le_bytes(v[pos + 1..pos + 5].try_into().unwrap()) as usize;
        let Some(end) = (pos + 9).checked_add(len).filter(|&e| e <= v.len()) else { break };
        let crc = crc32fast::hash(&v[pos + 9..end]);
        v[pos + 5..pos + 9].copy_from_slice(&crc.to_le_bytes());
        pos = end;
    }
}

/// The two tests measure one at a time (the counters are process-wide).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `f` and returns the peak of heap bytes it added.
fn peak_of(f: impl FnOnce()) -> usize {
    let base = LIVE.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    f();
    PEAK.load(Ordering::SeqCst).saturating_sub(base)
}

fn seed_recording() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seed.rec");
    let header = RecordingHeader { hostname: "fuzz".into(), interval_s: 1.0, ..Default::default() };
    let mut w = RecordingWriter::create(&path, &header, false).unwrap();
    let processes = (0..5)
        .map(|i| ProcessIo {
            pid: i,
            comm: format!("p{i}").into(),
            start_ticks: 1,
            io: Some(ProcIoCounters::default()),
            io_read_ns: None,
            ..Default::default()
        })
        .collect();
    let mut s = Sample { processes, ..Default::default() };
    for i in 0..4u64 {
        s.mono_ns = 1_000_000_000 * (1 + i);
        s.processes[0].io.as_mut().unwrap().read_bytes += 4096 * i;
        w.write_sample(&s).unwrap();
    }
    drop(w);
    std::fs::read(path).unwrap()
}

#[test]
fn the_recording_reader_survives_damaged_inputs_without_panic_or_ballooning() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let seed = seed_recording();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let start = Instant::now();
    let (mut inputs, mut opened, mut worst) = (0, 0, 0);
    while inputs < MAX_INPUTS && start.elapsed() < BUDGET {
        let mut input = mutate(&mut rng, &seed);
        if rng.below(2) == 0 {
            fix_checksums(&mut input);
        }
        let t = Instant::now();
        let peak = peak_of(|| {
            let outcome = std::panic::catch_unwind(|| {
                let Ok(mut rec) = Recording::from_bytes(input.clone()) else { return false };
                for i in 0..rec.len() {
                    let _ = rec.sample(i);
                }
                // Backwards too: the decoder restarts its segment.
                for i in (0..rec.len()).rev() {
                    let _ = rec.sample(i);
                }
                true
            });
            match outcome {
                Ok(true) => opened += 1,
                Ok(false) => {}
                Err(_) => panic!("the recording reader panicked on input {inputs}: {input:?}"),
            }
        });
        assert!(t.elapsed() < Duration::from_secs(2), "input {inputs} took {:?}", t.elapsed());
        assert!(peak < LIMIT, "input {inputs} made the reader allocate {peak} bytes");
        worst = worst.max(peak);
        inputs += 1;
    }
    eprintln!("{inputs} recordings ({opened} opened), worst peak {} KiB", worst >> 10);
    assert!(inputs >= 200 && opened > 0, "{inputs} inputs, {opened} opened");
}

#[test]
fn the_bench_report_reader_survives_damaged_inputs_without_panic_or_ballooning() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let report = BenchReport { jobs: vec![Default::default(), Default::default()], ..Default::default() };
    let seed = serde_json::to_vec_pretty(&report).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    let mut rng = Rng(0x5eed_1234_abcd_0002);
    let start = Instant::now();
    let mut inputs = 0;
    let mut worst = 0;
    // Structured damage too: many empty jobs, each a whole struct of defaults.
    let many = format!("{{\"jobs\":[{}{{}}]}}", "{},".repeat(400_000));
    for extra in [many.into_bytes(), b"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[".repeat(2000)] {
        std::fs::write(&path, &extra).unwrap();
        let peak = peak_of(|| assert!(std::panic::catch_unwind(|| read_report(&path).is_err()).unwrap()));
        assert!(peak < LIMIT, "structured input made the reader allocate {peak} bytes");
    }
    while inputs < MAX_INPUTS && start.elapsed() < BUDGET {
        let input = mutate(&mut rng, &seed);
        std::fs::write(&path, &input).unwrap();
        let peak = peak_of(|| {
            if std::panic::catch_unwind(|| {
                let _ = read_report(&path);
            })
            .is_err()
            {
                panic!("the report reader panicked on {:?}", String::from_utf8_lossy(&input));
            }
        });
        assert!(peak < LIMIT, "input {inputs} made the reader allocate {peak} bytes");
        worst = worst.max(peak);
        inputs += 1;
    }
    eprintln!("{inputs} reports, worst peak {} KiB", worst >> 10);
    assert!(inputs >= 200);
}
