//! The recording file format, version 1. Written once here; src/record/README.md describes it.
//!
//! ```text
//! file    = magic "IOSCOPE-REC\n" (12 bytes) · format version u16 LE · reserved u16 (0)
//!           · record (header) · record (sample)*
//! record  = kind u8 · payload length u32 LE · CRC-32 (IEEE) of the payload u32 LE · payload
//! kind    = 1 header: JSON of `RecordingHeader`, uncompressed (readable with `head -c`)
//!           2 sample that starts a segment: a new zstd frame begins with this payload
//!           3 sample that continues the current segment's zstd frame
//! sample payload = mono_ns u64 LE · wall_unix_ms u64 LE · the sample's zstd-compressed JSON
//! ```
//!
//! The two clocks in front of each sample let a player build its timeline without decoding.
//!
//! Samples are JSON (serde of [`Sample`], whose `#[serde(default)]` everywhere lets a newer ioscope
//! read an older recording) compressed with one zstd stream per *segment* of
//! [`SEGMENT_FRAMES`] samples. The stream is flushed after every sample, so each record holds exactly
//! one sample's compressed bytes, yet each sample is compressed against the previous ones of its
//! segment (consecutive samples are nearly identical: that is what makes a recording small).
//! Segments make random access cheap: seeking decodes at most one segment.
//!
//! Crash safety: the file is append-only and each record is written with one `write` call; a
//! recorder killed mid-record leaves a short last record, which the reader detects by its length
//! or CRC and ignores, replaying everything before it.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use crate::sample::Sample;

pub const MAGIC: &[u8; 12] = b"IOSCOPE-REC\n";
/// The format this ioscope writes. Readers accept every version up to this one.
pub const FORMAT_VERSION: u16 = 2;
/// Samples per zstd segment: a full-size first frame every minute at 1 s is the price of seeking.
pub const SEGMENT_FRAMES: usize = 60;
/// zstd level: recording runs once a second, so a slower, tighter level costs nothing visible.
const ZSTD_LEVEL: i32 = 9;
/// A record larger than this is taken as corruption (a real sample is well under 1 MiB); a reader
/// never allocates more than this for one record.
const MAX_RECORD: u32 = 16 << 20;

const PREAMBLE_LEN: usize = MAGIC.len() + 4;
const RECORD_HEAD_LEN: usize = 9;
/// mono_ns and wall_unix_ms in front of each sample's compressed bytes.
const CLOCKS_LEN: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordKind {
    Header = 1,
    SegmentStart = 2,
    SegmentContinue = 3,
    /// Version 2: a mark (`m` in the TUI, SIGUSR1 to `ioscope record`), JSON of [`Mark`].
    Mark = 4,
}

impl RecordKind {
    fn from_u8(b: u8) -> Option<RecordKind> {
        match b {
            1 => Some(RecordKind::Header),
            2 => Some(RecordKind::SegmentStart),
            3 => Some(RecordKind::SegmentContinue),
            4 => Some(RecordKind::Mark),
            _ => None,
        }
    }
}

/// The host's static facts, written once at the start of a recording.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RecordingHeader {
    /// The ioscope that wrote the file (CARGO_PKG_VERSION).
    pub ioscope_version: String,
    pub format_version: u16,
    /// When recording started, ms since the Unix epoch.
    pub started_unix_ms: u64,
    /// The sampling interval asked for, seconds (the samples carry their own timestamps).
    pub interval_s: f64,
    pub hostname: String,
    pub kernel: String,
    pub page_size: u64,
    pub cpus: u64,
    /// Block devices and their queue settings at the start.
    pub devices: Vec<crate::sample::BlockSettings>,
    /// /proc/self/mounts of real block-backed filesystems.
    pub mounts: Vec<MountInfo>,
    /// vm.* and block tuning sysctls, name → value as read from /proc/sys.
    pub tuning: std::collections::BTreeMap<String, String>,
    /// The command line that made the recording (for the ticket it gets attached to).
    pub command: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MountInfo {
    pub source: String,
    pub target: String,
    pub fstype: String,
    pub options: String,
}

/// A moment marked while recording, with an optional one-line note (user text: escaped wherever
/// it is shown).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Mark {
    /// CLOCK_MONOTONIC when it was marked, ns (comparable with the samples' `mono_ns`).
    pub mono_ns: u64,
    pub wall_unix_ms: u64,
    pub note: String,
}

/// Longest note kept, in characters (a longer one is cut).
pub const MAX_NOTE_CHARS: usize = 200;
/// A mark record larger than this is damage.
const MAX_MARK_RECORD: usize = 4096;

/// Appends samples to a recording. Every record reaches the file before `write_sample` returns.
pub struct RecordingWriter {
    file: File,
    encoder: Option<zstd::stream::write::Encoder<'static, Vec<u8>>>,
    in_segment: usize,
    frames: u64,
    bytes: u64,
    marks: u64,
    /// Set by a stop signal: a write interrupted (EINTR) while it is set gives up.
    stop: Option<&'static std::sync::atomic::AtomicBool>,
}

impl RecordingWriter {
    /// Creates `path` (a new regular file; an existing one is replaced only when `overwrite`; never
    /// through a link: [`crate::safe_fs::create`]) and writes the preamble and header.
    pub fn create(path: &Path, header: &RecordingHeader, overwrite: bool) -> anyhow::Result<RecordingWriter> {
        let opts = crate::safe_fs::CreateOptions { replace: overwrite, stream: false };
        let file = crate::safe_fs::create(path, opts, &mut || false)?
            .commit()
            .with_context(|| format!("cannot create {}", path.display()))?;
        RecordingWriter::start(file, path, header)
    }

    /// Writes the preamble and header to a file from [`crate::safe_fs::create`].
    pub fn start(file: File, path: &Path, header: &RecordingHeader) -> anyhow::Result<RecordingWriter> {
        RecordingWriter::start_stoppable(file, path, header, None)
    }

    /// [`RecordingWriter::start`], with a write blocked on a stream (a FIFO whose reader stopped
    /// reading) giving up when a signal interrupts it while `stop` is set (the signal handler
    /// must not restart system calls).
    pub fn start_stoppable(
        file: File,
        path: &Path,
        header: &RecordingHeader,
        stop: Option<&'static std::sync::atomic::AtomicBool>,
    ) -> anyhow::Result<RecordingWriter> {
        let mut w =
            RecordingWriter { file, encoder: None, in_segment: 0, frames: 0, bytes: 0, marks: 0, stop };
        let mut head = Vec::with_capacity(PREAMBLE_LEN);
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        head.extend_from_slice(&0u16.to_le_bytes());
        let mut header = header.clone();
        header.format_version = FORMAT_VERSION;
        let json = serde_json::to_vec(&header)?;
        push_record(&mut head, RecordKind::Header, &json);
        w.write_raw(&head).with_context(|| format!("cannot write to {}", path.display()))?;
        Ok(w)
    }

    /// Appends one sample as one record.
    pub fn write_sample(&mut self, sample: &Sample) -> io::Result<()> {
        let kind = if self.encoder.is_none() || self.in_segment >= SEGMENT_FRAMES {
            self.encoder = Some(zstd::stream::write::Encoder::new(Vec::new(), ZSTD_LEVEL)?);
            self.in_segment = 0;
            RecordKind::SegmentStart
        } else {
            RecordKind::SegmentContinue
        };
        let enc = self.encoder.as_mut().expect("set above");
        serde_json::to_writer(&mut *enc, sample)?;
        // A zstd flush ends the block: everything written so far can be decoded from the output.
        enc.flush()?;
        let compressed = std::mem::take(enc.get_mut());
        let mut payload = Vec::with_capacity(CLOCKS_LEN + compressed.len());
        payload.extend_from_slice(&sample.mono_ns.to_le_bytes());
        payload.extend_from_slice(&sample.wall_unix_ms.to_le_bytes());
        payload.extend_from_slice(&compressed);
        let mut rec = Vec::with_capacity(RECORD_HEAD_LEN + payload.len());
        push_record(&mut rec, kind, &payload);
        self.write_raw(&rec)?;
        self.in_segment += 1;
        self.frames += 1;
        Ok(())
    }

    /// Appends a mark as one record (its note on one line, at most [`MAX_NOTE_CHARS`]).
    pub fn write_mark(&mut self, mark: &Mark) -> io::Result<()> {
        let note: String =
            mark.note.chars().map(|c| if c.is_control() { ' ' } else { c }).take(MAX_NOTE_CHARS).collect();
        let json = serde_json::to_vec(&Mark { note, ..mark.clone() })?;
        let mut rec = Vec::with_capacity(RECORD_HEAD_LEN + json.len());
        push_record(&mut rec, RecordKind::Mark, &json);
        self.write_raw(&rec)?;
        self.marks += 1;
        Ok(())
    }

    /// Marks written so far.
    pub fn marks(&self) -> u64 {
        self.marks
    }

    fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut done = 0;
        while done < bytes.len() {
            match self.file.write(&bytes[done..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    if self.stop.is_some_and(|s| s.load(std::sync::atomic::Ordering::SeqCst)) {
                        self.bytes += done as u64;
                        return Err(io::Error::new(
                            io::ErrorKind::Interrupted,
                            "stopped while the reader was not reading",
                        ));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Bytes written so far (the file's size).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Makes the file durable (fsync). Not needed for crash safety against a killed process, only
    /// against a power loss; called when recording stops. A stream (a pipe, a FIFO, a terminal,
    /// a socket) has nothing to sync: only a regular file is synced.
    pub fn sync(&mut self) -> io::Result<()> {
        if self.file.metadata().is_ok_and(|m| m.is_file()) {
            self.file.sync_data()
        } else {
            Ok(())
        }
    }
}

fn push_record(out: &mut Vec<u8>, kind: RecordKind, payload: &[u8]) {
    out.push(kind as u8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Where a segment (a zstd stream of up to [`SEGMENT_FRAMES`] samples) starts.
#[derive(Clone, Copy, Debug)]
struct Segment {
    /// Index of its first sample.
    first: usize,
    /// Byte offset of its first record (the record's head).
    offset: u64,
}

/// Largest decompressed sample a reader accepts (JSON bytes): a real sample is a few hundred KB,
/// 2.3 MB during a burst of 8,000 files. A larger one is taken as damage, so one sample can never
/// make the reader balloon.
pub const MAX_SAMPLE_JSON: usize = 16 << 20;
/// Most objects and strings in one sample's JSON: each object is a struct (a process, a file, a
/// device) of a few hundred bytes in memory however short its JSON (`{}` gets every default). The
/// burst sample above has ~10,000 objects.
const SAMPLE_JSON_LIMITS: crate::bounded::JsonCounts =
    crate::bounded::JsonCounts { objects: 50_000, strings: 500_000 };
/// Samples a reader indexes: the index costs ~40 bytes a sample (clocks here and in the player,
/// the sparklines' gauges), so this bounds it to ~80 MB; at 1 s that is 23 days of recording.
pub const MAX_FRAMES: usize = 2_000_000;
/// zstd window a reader allocates at most (2^24 = 16 MiB; the writer's level uses 4 MiB).
const WINDOW_LOG_MAX: u32 = 24;

/// The bytes of a recording: a file read piece by piece (never whole), or bytes in memory.
enum Source {
    File(File),
    Memory(Vec<u8>),
}

impl Source {
    fn len(&self) -> u64 {
        match self {
            Source::File(f) => f.metadata().map(|m| m.len()).unwrap_or(0),
            Source::Memory(v) => v.len() as u64,
        }
    }

    /// Reads up to `buf.len()` bytes at `offset`; fewer only at the end of the data.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Source::File(f) => {
                use std::os::unix::fs::FileExt;
                let mut done = 0;
                while done < buf.len() {
                    match f.read_at(&mut buf[done..], offset + done as u64) {
                        Ok(0) => break,
                        Ok(n) => done += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(done)
            }
            Source::Memory(v) => {
                let start = (offset.min(v.len() as u64)) as usize;
                let n = buf.len().min(v.len() - start);
                buf[..n].copy_from_slice(&v[start..start + n]);
                Ok(n)
            }
        }
    }
}

/// The decompressed output of one sample, refusing to grow past [`MAX_SAMPLE_JSON`].
struct Capped(Vec<u8>);

impl Write for Capped {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if self.0.len() + b.len() > MAX_SAMPLE_JSON {
            return Err(io::Error::other(format!(
                "a sample decompresses to more than {} MiB",
                MAX_SAMPLE_JSON >> 20
            )));
        }
        self.0.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn segment_decoder() -> io::Result<zstd::stream::write::Decoder<'static, Capped>> {
    let mut d = zstd::stream::write::Decoder::new(Capped(Vec::new()))?;
    d.window_log_max(WINDOW_LOG_MAX)?;
    Ok(d)
}

/// Feeds one record's compressed bytes to its segment's decoder: afterwards the decoder's output
/// holds exactly that sample's JSON.
fn decode_into(d: &mut zstd::stream::write::Decoder<'static, Capped>, compressed: &[u8]) -> io::Result<()> {
    d.get_mut().0.clear();
    d.write_all(compressed)?;
    d.flush()
}

/// Refuses JSON with more objects or strings than a real sample has (see [`SAMPLE_JSON_LIMITS`]).
fn check_objects(json: &[u8]) -> anyhow::Result<()> {
    crate::bounded::check_json(json, SAMPLE_JSON_LIMITS).map_err(|why| anyhow::anyhow!("{why} in one sample"))
}

/// Where the sequential decoder is: the segment it decodes and the next sample it would give.
struct Cursor {
    segment: usize,
    next: usize,
    /// Byte offset of the next record.
    pos: u64,
    decoder: zstd::stream::write::Decoder<'static, Capped>,
}

/// An opened recording: the file, an index of its segments and each sample's clocks, and a cursor
/// that decodes one sample at a time. Memory stays bounded whatever the file holds: the file is
/// read record by record (each at most 16 MiB), a sample decompresses to at most
/// [`MAX_SAMPLE_JSON`], one sample is kept decoded. A damaged tail is cut off at open; `problem`
/// says what was wrong.
pub struct Recording {
    pub header: RecordingHeader,
    source: Source,
    segments: Vec<Segment>,
    /// Each sample's (mono_ns, wall_unix_ms).
    clocks: Vec<(u64, u64)>,
    /// Why the recording ends earlier than the file (truncated or corrupt record), if it does.
    pub problem: Option<String>,
    /// The marks, in time order (format version 2; none in older recordings).
    pub marks: Vec<Mark>,
    cursor: Option<Cursor>,
    cache: Option<(usize, Sample)>,
    file_bytes: u64,
}

impl Recording {
    /// Opens a recording, reading the preamble and header first: a file that is not a recording
    /// is refused after its first 16 bytes, whatever its size.
    pub fn open(path: &Path) -> anyhow::Result<Recording> {
        // A regular file only: a FIFO would block, a device is not opened (safe_fs).
        let file = crate::safe_fs::open_input(path)?;
        Recording::from_source(Source::File(file)).with_context(|| format!("{}", path.display()))
    }

    /// Parses the preamble and header, indexes the frames and checks every one decompresses.
    pub fn from_bytes(data: Vec<u8>) -> anyhow::Result<Recording> {
        Recording::from_source(Source::Memory(data))
    }

    fn from_source(source: Source) -> anyhow::Result<Recording> {
        let mut pre = [0u8; PREAMBLE_LEN];
        let got = source.read_at(0, &mut pre)?;
        let data = &pre[..got];
        if data.is_empty() {
            bail!("the file is empty: not an ioscope recording (the recorder may have died before writing)");
        }
        if data.len() < MAGIC.len() || &data[..MAGIC.len()] != MAGIC {
            if MAGIC.starts_with(&data[..data.len().min(MAGIC.len())]) {
                bail!("the recording is truncated inside its first bytes: nothing to replay");
            }
            bail!("not an ioscope recording (it does not start with \"IOSCOPE-REC\")");
        }
        if data.len() < PREAMBLE_LEN {
            bail!("the recording is truncated inside its first bytes: nothing to replay");
        }
        let version = u16::from_le_bytes([data[12], data[13]]);
        if version > FORMAT_VERSION {
            bail!(
                "recorded in format version {version} by a newer ioscope; this ioscope ({}) reads format \
                 versions up to {FORMAT_VERSION}: upgrade ioscope to replay it",
                env!("CARGO_PKG_VERSION")
            );
        }
        if version == 0 {
            bail!("format version 0 is not a valid ioscope recording version (the file is damaged)");
        }
        let mut pos = PREAMBLE_LEN as u64;
        let mut buf = Vec::new();
        let header = match read_record(&source, &mut pos, &mut buf) {
            Ok(RecordKind::Header) => serde_json::from_slice::<RecordingHeader>(&buf)
                .context("the recording's header is damaged (not valid JSON)")?,
            Ok(kind) => {
                bail!("the recording's first record is a {kind:?}, not its header: the file is damaged")
            }
            Err(RecordError::Truncated) => {
                bail!("the recording is truncated inside its header: nothing to replay")
            }
            Err(RecordError::Corrupt(why)) => bail!("the recording's header is damaged: {why}"),
            Err(RecordError::Io(e)) => return Err(e).context("reading the recording's header"),
        };
        let mut rec = Recording {
            header,
            file_bytes: source.len(),
            source,
            segments: Vec::new(),
            clocks: Vec::new(),
            problem: None,
            marks: Vec::new(),
            cursor: None,
            cache: None,
        };
        rec.index_frames(pos, buf)?;
        rec.marks.sort_by_key(|m| m.mono_ns);
        Ok(rec)
    }

    fn index_frames(&mut self, mut pos: u64, mut buf: Vec<u8>) -> anyhow::Result<()> {
        let mut decoder = None;
        loop {
            let at = pos;
            let n = self.clocks.len();
            if n >= MAX_FRAMES {
                self.problem = Some(format!(
                    "the recording holds more than {MAX_FRAMES} samples: replaying the first {n} (byte \
                     {at} on is left out)"
                ));
                break;
            }
            let kind = match read_record(&self.source, &mut pos, &mut buf) {
                Ok(kind) => kind,
                Err(RecordError::Truncated) if at == pos && self.source.read_at(at, &mut [0u8])? == 0 => {
                    break
                }
                Err(RecordError::Truncated) => {
                    self.problem = Some(format!(
                        "the recording is truncated (the recorder was probably killed): replaying the {n} \
                         complete samples before byte {at}"
                    ));
                    break;
                }
                Err(RecordError::Corrupt(why)) => {
                    self.problem = Some(format!(
                        "damaged record at byte {at} ({why}): replaying the {n} samples before it"
                    ));
                    break;
                }
                Err(RecordError::Io(e)) => return Err(e).context(format!("reading the record at byte {at}")),
            };
            match kind {
                RecordKind::Mark => {
                    match serde_json::from_slice::<Mark>(&buf) {
                        Ok(m) if buf.len() <= MAX_MARK_RECORD => self.marks.push(m),
                        _ => {
                            self.problem = Some(format!(
                                "damaged mark at byte {at}: replaying the {n} samples before it"
                            ));
                            break;
                        }
                    }
                    continue;
                }
                RecordKind::SegmentStart => {
                    decoder = Some(segment_decoder()?);
                    self.segments.push(Segment { first: n, offset: at });
                }
                RecordKind::SegmentContinue if decoder.is_some() => {}
                _ => {
                    self.problem = Some(format!(
                        "unexpected {kind:?} record at byte {at}: replaying the {n} samples before it"
                    ));
                    break;
                }
            }
            // Decompressing (not parsing) every frame at open finds damage the CRC cannot (a bug in
            // a writer) and costs little.
            let ok = buf.len() > CLOCKS_LEN
                && decoder.as_mut().is_some_and(|d| {
                    decode_into(d, &buf[CLOCKS_LEN..]).is_ok()
                        && !d.get_ref().0.is_empty()
                        && check_objects(&d.get_ref().0).is_ok()
                });
            if !ok {
                if kind == RecordKind::SegmentStart {
                    self.segments.pop();
                }
                self.problem = Some(format!(
                    "sample {n} at byte {at} does not decompress: replaying the {n} samples before it"
                ));
                break;
            }
            let u64_at = |i: usize| u64::from_le_bytes(buf[i..i + 8].try_into().expect("8 bytes"));
            self.clocks.push((u64_at(0), u64_at(8)));
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.clocks.len()
    }

    /// Mark `n` (1 for the first), as an offset from the first sample.
    pub fn mark_offset(&self, n: usize) -> Result<std::time::Duration, String> {
        let count = self.marks.len();
        let mark = n.checked_sub(1).and_then(|i| self.marks.get(i)).ok_or_else(|| match count {
            0 => format!("mark:{n}: the recording has no marks"),
            1 => format!("mark:{n}: the recording has 1 mark (mark:1)"),
            _ => format!("mark:{n}: the recording has {count} marks (mark:1 to mark:{count})"),
        })?;
        let t0 = self.clocks.first().map_or(mark.mono_ns, |c| c.0);
        Ok(std::time::Duration::from_nanos(mark.mono_ns.saturating_sub(t0)))
    }

    pub fn is_empty(&self) -> bool {
        self.clocks.is_empty()
    }

    /// Each sample's CLOCK_MONOTONIC stamp, ns, without decoding anything.
    pub fn mono_ns(&self) -> Vec<u64> {
        self.clocks.iter().map(|c| c.0).collect()
    }

    /// Each sample's wall-clock stamp, ms since the Unix epoch.
    pub fn wall_unix_ms(&self) -> Vec<u64> {
        self.clocks.iter().map(|c| c.1).collect()
    }

    /// The file's size in bytes.
    pub fn file_bytes(&self) -> usize {
        self.file_bytes as usize
    }

    /// The JSON of sample `index`: decoding goes on from the previous sample when it is the next
    /// one in the same segment (playing forward), else starts over at its segment's first record
    /// (decompressing, not parsing, the samples before it in the segment).
    fn json(&mut self, index: usize) -> anyhow::Result<&[u8]> {
        if index >= self.clocks.len() {
            bail!("sample {index} is beyond the recording's {} samples", self.clocks.len());
        }
        let segment = self.segments.partition_point(|s| s.first <= index) - 1;
        let restart = self.cursor.as_ref().is_none_or(|c| c.segment != segment || c.next > index);
        if restart {
            let seg = self.segments[segment];
            self.cursor =
                Some(Cursor { segment, next: seg.first, pos: seg.offset, decoder: segment_decoder()? });
        }
        let cursor = self.cursor.as_mut().expect("set above");
        let mut buf = Vec::new();
        while cursor.next <= index {
            let at = cursor.pos;
            match read_record(&self.source, &mut cursor.pos, &mut buf) {
                Ok(RecordKind::Mark) => continue,
                Ok(_) if buf.len() > CLOCKS_LEN => {}
                Ok(_) | Err(RecordError::Truncated | RecordError::Corrupt(_)) => {
                    self.cursor = None;
                    bail!("sample {} of the recording is damaged (at byte {at}): the file changed since it was opened", index);
                }
                Err(RecordError::Io(e)) => {
                    self.cursor = None;
                    return Err(e).context(format!("reading sample {index}"));
                }
            }
            if let Err(e) = decode_into(&mut cursor.decoder, &buf[CLOCKS_LEN..]) {
                self.cursor = None;
                return Err(e).context(format!("sample {index} of the recording is damaged"));
            }
            cursor.next += 1;
        }
        Ok(&self.cursor.as_ref().expect("set above").decoder.get_ref().0)
    }

    /// Sample `index` parsed as `T`: a struct with a few of Sample's fields parses much faster
    /// than a whole Sample.
    pub fn parse_as<T: serde::de::DeserializeOwned>(&mut self, index: usize) -> anyhow::Result<T> {
        let json = self.json(index)?;
        check_objects(json).with_context(|| format!("sample {index} of the recording is damaged"))?;
        serde_json::from_slice::<T>(json)
            .with_context(|| format!("sample {index} of the recording is damaged"))
    }

    /// The sample at `index` (the last one asked for is kept decoded).
    pub fn sample(&mut self, index: usize) -> anyhow::Result<&Sample> {
        if self.cache.as_ref().is_none_or(|(i, _)| *i != index) {
            self.cache = None;
            let sample = self.parse_as::<Sample>(index)?;
            self.cache = Some((index, sample));
        }
        Ok(&self.cache.as_ref().expect("filled above").1)
    }

    /// Every sample parsed as `T`, in order: a struct with a few of Sample's fields parses much
    /// faster than a whole Sample.
    pub fn all_as<T: serde::de::DeserializeOwned>(&mut self) -> anyhow::Result<Vec<T>> {
        (0..self.len()).map(|i| self.parse_as::<T>(i)).collect()
    }

    /// Every sample in order, decoding one at a time.
    pub fn samples(&mut self) -> impl Iterator<Item = anyhow::Result<Sample>> + '_ {
        (0..self.len()).map(move |i| self.parse_as::<Sample>(i))
    }
}

enum RecordError {
    Truncated,
    Corrupt(String),
    Io(io::Error),
}

/// Reads the record at `*pos` into `buf` (its payload, CRC checked) and moves `*pos` past it. The
/// length is checked before anything is allocated.
fn read_record(source: &Source, pos: &mut u64, buf: &mut Vec<u8>) -> Result<RecordKind, RecordError> {
    let mut head = [0u8; RECORD_HEAD_LEN];
    let got = source.read_at(*pos, &mut head).map_err(RecordError::Io)?;
    if got == 0 {
        return Err(RecordError::Truncated);
    }
    let kind = RecordKind::from_u8(head[0])
        .ok_or_else(|| RecordError::Corrupt(format!("unknown kind {}", head[0])))?;
    if got < RECORD_HEAD_LEN {
        return Err(RecordError::Truncated);
    }
    let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]);
    let crc = u32::from_le_bytes([head[5], head[6], head[7], head[8]]);
    if len > MAX_RECORD {
        return Err(RecordError::Corrupt(format!("implausible length {len}")));
    }
    let start = *pos + RECORD_HEAD_LEN as u64;
    if start + u64::from(len) > source.len() {
        return Err(RecordError::Truncated);
    }
    buf.clear();
    buf.resize(len as usize, 0);
    if source.read_at(start, buf).map_err(RecordError::Io)? < len as usize {
        return Err(RecordError::Truncated);
    }
    if crc32fast::hash(buf) != crc {
        return Err(RecordError::Corrupt("checksum mismatch".into()));
    }
    *pos = start + len as u64;
    Ok(kind)
}
