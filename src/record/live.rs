//! `R` in the live TUI: record the session to a file in the current directory while it runs. The
//! same format as `ioscope record`; the event loop hands every new Sample to [`LiveRecorder`].

use std::path::PathBuf;

use crate::collect::SystemRoot;
use crate::record::format::RecordingWriter;
use crate::record::host_facts;
use crate::sample::Sample;

pub struct LiveRecorder {
    writer: RecordingWriter,
    path: PathBuf,
}

impl LiveRecorder {
    /// Starts a recording whose first sample is `latest` (the one on screen), so the next sample
    /// already makes an interval. The file is `ioscope-HOST-YYYYmmdd-HHMMSS.rec` in the current
    /// directory; an existing file is never overwritten.
    pub fn start(latest: &Sample, interval_s: f64, utc_offset_s: i64) -> anyhow::Result<LiveRecorder> {
        let name = file_name(&latest.host.hostname, latest.wall_unix_ms, utc_offset_s);
        let header = host_facts::header(&SystemRoot::live(), latest, interval_s, "ioscope (R in the TUI)");
        // Two recordings started within one second get -2, -3, ...: the TUI has no --force, and
        // an existing file is never overwritten.
        let mut n = 1;
        let (path, mut writer) = loop {
            let path = match n {
                1 => PathBuf::from(&name),
                _ => PathBuf::from(name.replace(".rec", &format!("-{n}.rec"))),
            };
            match crate::record::format::open_output(&path, false) {
                Ok(file) => break (path.clone(), RecordingWriter::start(file, &path, &header)?),
                Err(_) if path.exists() && n < 100 => n += 1,
                Err(e) => return Err(e),
            }
        };
        writer
            .write_sample(latest)
            .map_err(|e| anyhow::anyhow!("cannot write to {}: {e}", path.display()))?;
        Ok(LiveRecorder { writer, path })
    }

    pub fn write(&mut self, sample: &Sample) -> anyhow::Result<()> {
        self.writer
            .write_sample(sample)
            .map_err(|e| anyhow::anyhow!("recording stopped: cannot write to {}: {e}", self.path.display()))
    }

    pub fn progress(&self) -> Progress {
        Progress {
            path: self.path.display().to_string(),
            frames: self.writer.frames(),
            bytes: self.writer.bytes(),
        }
    }

    /// Ends the recording (fsync) and says where it is.
    pub fn finish(mut self) -> String {
        let _ = self.writer.sync();
        format!(
            "recorded {} samples ({} bytes) to {}; replay with: ioscope replay {}",
            self.writer.frames(),
            self.writer.bytes(),
            self.path.display(),
            self.path.display()
        )
    }
}

/// Where a running recording is: the file, samples and bytes written so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Progress {
    pub path: String,
    pub frames: u64,
    pub bytes: u64,
}

/// What starting, stopping or feeding the recording came to; the caller shows it (the live TUI:
/// the header's REC indicator and notice line).
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Recording (just started, or one more sample written).
    Recording(Progress),
    /// The recording ended (stopped, or a write failed): why, and where it is.
    Stopped(String),
    /// No recording was started, and why.
    NotStarted(String),
}

/// `R`: starts recording from `latest`, or stops the running recording.
pub fn toggle(
    rec: &mut Option<LiveRecorder>,
    latest: Option<&Sample>,
    interval_s: f64,
    utc_offset_s: i64,
) -> Outcome {
    if let Some(r) = rec.take() {
        return Outcome::Stopped(r.finish());
    }
    let Some(latest) = latest else {
        return Outcome::NotStarted("no sample yet: press R again in a moment".into());
    };
    match LiveRecorder::start(latest, interval_s, utc_offset_s) {
        Ok(r) => {
            let progress = r.progress();
            *rec = Some(r);
            Outcome::Recording(progress)
        }
        Err(e) => Outcome::NotStarted(format!("cannot record: {e:#}")),
    }
}

/// Appends a new sample to a running recording (None when none runs); a write error stops it
/// and says why.
pub fn on_sample(rec: &mut Option<LiveRecorder>, sample: &Sample) -> Option<Outcome> {
    let r = rec.as_mut()?;
    Some(match r.write(sample) {
        Ok(()) => Outcome::Recording(r.progress()),
        Err(e) => {
            *rec = None;
            Outcome::Stopped(format!("{e:#}"))
        }
    })
}

/// `ioscope-HOST-YYYYmmdd-HHMMSS.rec`, local time; characters unsafe in file names become '_'.
pub fn file_name(hostname: &str, wall_unix_ms: u64, utc_offset_s: i64) -> String {
    let local = (wall_unix_ms / 1000) as i64 + utc_offset_s;
    let (days, secs) = (local.div_euclid(86_400), local.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let host: String = hostname
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' })
        .collect();
    let host = if host.is_empty() { "host".to_string() } else { host };
    format!("ioscope-{host}-{y:04}{m:02}{d:02}-{:02}{:02}{:02}.rec", secs / 3600, secs / 60 % 60, secs % 60)
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_sample_nothing_starts_and_without_a_recording_samples_are_not_written() {
        let mut rec = None;
        assert_eq!(
            toggle(&mut rec, None, 1.0, 0),
            Outcome::NotStarted("no sample yet: press R again in a moment".into())
        );
        assert!(rec.is_none());
        assert_eq!(on_sample(&mut rec, &Sample::default()), None);
    }

    #[test]
    fn file_names_carry_host_and_local_time() {
        // 2026-11-22 13:05:09 UTC.
        let ms = 1_795_352_709_000;
        assert_eq!(file_name("db-1", ms, 0), "ioscope-db-1-20261122-130509.rec");
        assert_eq!(file_name("db/1 x", ms, 3600), "ioscope-db_1_x-20261122-140509.rec");
        assert_eq!(file_name("", 0, 0), "ioscope-host-19700101-000000.rec");
        // A leap day and a negative offset across midnight.
        assert_eq!(file_name("h", 951_782_400_000, 0), "ioscope-h-20000229-000000.rec");
        assert_eq!(file_name("h", 951_782_400_000, -60), "ioscope-h-20000228-235900.rec");
    }
}
