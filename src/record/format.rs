//! The recording file format, version 1. Written once here; README "Recordings" describes it.
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
pub const FORMAT_VERSION: u16 = 1;
/// Samples per zstd segment: a full-size first frame every minute at 1 s is the price of seeking.
pub const SEGMENT_FRAMES: usize = 60;
/// zstd level: recording runs once a second, so a slower, tighter level costs nothing visible.
const ZSTD_LEVEL: i32 = 9;
/// A record larger than this is taken as corruption (a real sample is well under 1 MiB).
const MAX_RECORD: u32 = 64 << 20;

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
}

impl RecordKind {
    fn from_u8(b: u8) -> Option<RecordKind> {
        match b {
            1 => Some(RecordKind::Header),
            2 => Some(RecordKind::SegmentStart),
            3 => Some(RecordKind::SegmentContinue),
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

/// Appends samples to a recording. Every record reaches the file before `write_sample` returns.
pub struct RecordingWriter {
    file: File,
    encoder: Option<zstd::stream::write::Encoder<'static, Vec<u8>>>,
    in_segment: usize,
    frames: u64,
    bytes: u64,
}

impl RecordingWriter {
    /// Creates `path` (refusing to overwrite unless `overwrite`) and writes the preamble and header.
    pub fn create(path: &Path, header: &RecordingHeader, overwrite: bool) -> anyhow::Result<RecordingWriter> {
        RecordingWriter::start(open_output(path, overwrite)?, path, header)
    }

    /// Writes the preamble and header to a file from [`open_output`].
    pub fn start(file: File, path: &Path, header: &RecordingHeader) -> anyhow::Result<RecordingWriter> {
        let mut w = RecordingWriter { file, encoder: None, in_segment: 0, frames: 0, bytes: 0 };
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

    fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes)?;
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

/// Creates the output file, refusing to overwrite an existing one unless `overwrite`: done before
/// anything slow (loading eBPF) so a bad path is reported at once. `-` is standard output, and an
/// existing FIFO or character device is written as a stream (there is nothing in it to lose); a
/// block device is refused even with `overwrite`.
pub fn open_output(path: &Path, overwrite: bool) -> anyhow::Result<File> {
    use std::os::unix::fs::FileTypeExt;
    if path.as_os_str() == "-" {
        use std::os::fd::AsFd;
        let fd = io::stdout().as_fd().try_clone_to_owned().context("cannot use standard output")?;
        return Ok(File::from(fd));
    }
    if let Ok(meta) = std::fs::metadata(path) {
        let ft = meta.file_type();
        if ft.is_block_device() {
            bail!("{} is a block device: refusing to write a recording over it", path.display());
        }
        if ft.is_fifo() || ft.is_char_device() || ft.is_socket() {
            return std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .with_context(|| format!("cannot open {}", path.display()));
        }
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true);
    if overwrite {
        opts.create(true).truncate(true);
    } else {
        opts.create_new(true);
    }
    opts.open(path).map_err(|e| {
        if e.kind() == io::ErrorKind::AlreadyExists {
            anyhow::anyhow!("{} already exists (remove it, or pass --force to overwrite)", path.display())
        } else {
            anyhow::Error::new(e).context(format!("cannot create {}", path.display()))
        }
    })
}

fn push_record(out: &mut Vec<u8>, kind: RecordKind, payload: &[u8]) {
    out.push(kind as u8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Where one sample's record is in the file.
#[derive(Clone, Copy, Debug)]
struct FrameIndex {
    offset: usize,
    len: usize,
    /// Index of the frame that starts this frame's segment.
    segment_start: usize,
    mono_ns: u64,
    wall_unix_ms: u64,
}

/// An opened recording: the compressed bytes, an index of its frames and a cache of the decoded
/// segment. A damaged tail is cut off at open; `problem` says what was wrong.
pub struct Recording {
    pub header: RecordingHeader,
    data: Vec<u8>,
    frames: Vec<FrameIndex>,
    /// Why the recording ends earlier than the file (truncated or corrupt record), if it does.
    pub problem: Option<String>,
    cache: Option<(usize, Vec<Sample>)>,
}

impl Recording {
    pub fn open(path: &Path) -> anyhow::Result<Recording> {
        let data = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        Recording::from_bytes(data).with_context(|| format!("{}", path.display()))
    }

    /// Parses the preamble and header, indexes the frames and checks every one decompresses.
    pub fn from_bytes(data: Vec<u8>) -> anyhow::Result<Recording> {
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
        let mut pos = PREAMBLE_LEN;
        let header = match read_record(&data, &mut pos) {
            Ok((RecordKind::Header, payload)) => serde_json::from_slice::<RecordingHeader>(payload)
                .context("the recording's header is damaged (not valid JSON)")?,
            Ok((kind, _)) => {
                bail!("the recording's first record is a {kind:?}, not its header: the file is damaged")
            }
            Err(RecordError::Truncated) => {
                bail!("the recording is truncated inside its header: nothing to replay")
            }
            Err(RecordError::Corrupt(why)) => bail!("the recording's header is damaged: {why}"),
        };
        let mut rec = Recording { header, data, frames: Vec::new(), problem: None, cache: None };
        rec.index_frames(pos);
        Ok(rec)
    }

    fn index_frames(&mut self, mut pos: usize) {
        let mut segment_start = None;
        let mut decoder: Option<zstd::stream::write::Decoder<'static, Vec<u8>>> = None;
        loop {
            if pos == self.data.len() {
                break;
            }
            let at = pos;
            let n = self.frames.len();
            let (kind, payload) = match read_record(&self.data, &mut pos) {
                Ok(r) => r,
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
            };
            let start = match kind {
                RecordKind::SegmentStart => {
                    decoder = zstd::stream::write::Decoder::new(Vec::new()).ok();
                    n
                }
                RecordKind::SegmentContinue if segment_start.is_some() => segment_start.unwrap_or(0),
                _ => {
                    self.problem = Some(format!(
                        "unexpected {kind:?} record at byte {at}: replaying the {n} samples before it"
                    ));
                    break;
                }
            };
            // Decompressing (not parsing) every frame at open finds damage the CRC cannot (a bug in
            // a writer) and costs little.
            let ok = payload.len() > CLOCKS_LEN
                && decoder.as_mut().is_some_and(|d| {
                    d.get_mut().clear();
                    d.write_all(&payload[CLOCKS_LEN..]).and_then(|_| d.flush()).is_ok()
                        && !d.get_ref().is_empty()
                });
            if !ok {
                self.problem = Some(format!(
                    "sample {n} at byte {at} does not decompress: replaying the {n} samples before it"
                ));
                break;
            }
            segment_start = Some(start);
            let offset = pos - payload.len() + CLOCKS_LEN;
            let u64_at = |i: usize| u64::from_le_bytes(payload[i..i + 8].try_into().expect("8 bytes"));
            self.frames.push(FrameIndex {
                offset,
                len: payload.len() - CLOCKS_LEN,
                segment_start: start,
                mono_ns: u64_at(0),
                wall_unix_ms: u64_at(8),
            });
        }
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Each sample's CLOCK_MONOTONIC stamp, ns, without decoding anything.
    pub fn mono_ns(&self) -> Vec<u64> {
        self.frames.iter().map(|f| f.mono_ns).collect()
    }

    /// Each sample's wall-clock stamp, ms since the Unix epoch.
    pub fn wall_unix_ms(&self) -> Vec<u64> {
        self.frames.iter().map(|f| f.wall_unix_ms).collect()
    }

    /// The file's size in bytes.
    pub fn file_bytes(&self) -> usize {
        self.data.len()
    }

    /// The sample at `index`, decoding its segment if it is not the cached one.
    pub fn sample(&mut self, index: usize) -> anyhow::Result<&Sample> {
        let Some(frame) = self.frames.get(index).copied() else {
            bail!("sample {index} is beyond the recording's {} samples", self.frames.len());
        };
        let start = frame.segment_start;
        if self.cache.as_ref().is_none_or(|(s, _)| *s != start) {
            let end = self.frames[start..].iter().take_while(|f| f.segment_start == start).count() + start;
            self.cache = Some((start, self.decode_segment(start, end)?));
        }
        let (_, samples) = self.cache.as_ref().expect("filled above");
        Ok(&samples[index - start])
    }

    fn decode_segment(&self, start: usize, end: usize) -> anyhow::Result<Vec<Sample>> {
        self.decode_as::<Sample>(start, end)
    }

    /// Frames `start..end` (within one segment, or a run of whole segments) parsed as `T`: a
    /// struct with a few of Sample's fields parses much faster than a whole Sample.
    fn decode_as<T: serde::de::DeserializeOwned>(&self, start: usize, end: usize) -> anyhow::Result<Vec<T>> {
        let mut d = zstd::stream::write::Decoder::new(Vec::new())?;
        let mut out = Vec::with_capacity(end - start);
        for (i, f) in self.frames[start..end].iter().enumerate() {
            if i > 0 && f.segment_start == start + i {
                d = zstd::stream::write::Decoder::new(Vec::new())?;
            }
            d.get_mut().clear();
            d.write_all(&self.data[f.offset..f.offset + f.len])?;
            d.flush()?;
            let value = serde_json::from_slice::<T>(d.get_ref())
                .with_context(|| format!("sample {} of the recording is damaged", start + i))?;
            out.push(value);
        }
        Ok(out)
    }

    /// Every sample parsed as `T` (see [`Recording::decode_as`]), in order.
    pub fn all_as<T: serde::de::DeserializeOwned>(&self) -> anyhow::Result<Vec<T>> {
        self.decode_as(0, self.frames.len())
    }

    /// Every sample in order, decoding one segment at a time.
    pub fn samples(&mut self) -> impl Iterator<Item = anyhow::Result<Sample>> + '_ {
        (0..self.len()).map(move |i| self.sample(i).cloned())
    }
}

enum RecordError {
    Truncated,
    Corrupt(String),
}

fn read_record<'a>(data: &'a [u8], pos: &mut usize) -> Result<(RecordKind, &'a [u8]), RecordError> {
    let head = data.get(*pos..*pos + RECORD_HEAD_LEN).ok_or(RecordError::Truncated)?;
    let kind = RecordKind::from_u8(head[0])
        .ok_or_else(|| RecordError::Corrupt(format!("unknown kind {}", head[0])))?;
    let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]);
    let crc = u32::from_le_bytes([head[5], head[6], head[7], head[8]]);
    if len > MAX_RECORD {
        return Err(RecordError::Corrupt(format!("implausible length {len}")));
    }
    let start = *pos + RECORD_HEAD_LEN;
    let payload = data.get(start..start + len as usize).ok_or(RecordError::Truncated)?;
    if crc32fast::hash(payload) != crc {
        return Err(RecordError::Corrupt("checksum mismatch".into()));
    }
    *pos = start + len as usize;
    Ok((kind, payload))
}
