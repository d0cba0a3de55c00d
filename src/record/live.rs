//! `R` in the live TUI: record the session to a file while it runs, in the directory
//! `--record-dir` or `IOSCOPE_RECORD_DIR` names, else the current one unless it is world-writable
//! ([`record_dir`]). The same format as `ioscope record`; the event loop hands every new Sample
//! to [`LiveRecorder`].

use std::path::{Path, PathBuf};

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
    /// already makes an interval. The file is `ioscope-HOST-YYYYmmdd-HHMMSS.rec` in `dir` (from
    /// [`record_dir`]), created new ([`crate::safe_fs::create`]): a name already taken, by a file,
    /// a link or a FIFO someone planted, is skipped for the next (`-2`, `-3`, ...), never opened.
    pub fn start(
        latest: &Sample,
        interval_s: f64,
        utc_offset_s: i64,
        dir: &Path,
    ) -> anyhow::Result<LiveRecorder> {
        let name = file_name(&latest.host.hostname, latest.wall_unix_ms, utc_offset_s);
        let header = host_facts::header(&SystemRoot::live(), latest, interval_s, "ioscope (R in the TUI)");
        const TRIES: usize = 100;
        let mut n = 1;
        let (path, file) = loop {
            let path = match n {
                1 => dir.join(&name),
                _ => dir.join(name.replace(".rec", &format!("-{n}.rec"))),
            };
            match crate::safe_fs::create(&path, crate::safe_fs::CreateOptions::default(), &mut || false) {
                Ok(out) => break (path, out.commit()?),
                Err(e) if crate::safe_fs::is_refused(&e) && n < TRIES => n += 1,
                Err(e) if crate::safe_fs::is_refused(&e) => {
                    anyhow::bail!("{TRIES} names taken in {} (the last: {e})", dir.display())
                }
                Err(e) => return Err(e),
            }
        };
        let mut writer = RecordingWriter::start(file, &path, &header)?;
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

    /// Appends a mark; its number (1 for the first).
    pub fn mark(&mut self, mark: &crate::record::Mark) -> anyhow::Result<u64> {
        self.writer
            .write_mark(mark)
            .map_err(|e| anyhow::anyhow!("cannot write the mark to {}: {e}", self.path.display()))?;
        Ok(self.writer.marks())
    }

    pub fn progress(&self) -> Progress {
        Progress {
            path: self.path.file_name().unwrap_or(self.path.as_os_str()).to_string_lossy().into_owned(),
            frames: self.writer.frames(),
            bytes: self.writer.bytes(),
        }
    }

    /// Ends the recording (fsync) and says where it is.
    pub fn finish(mut self) -> String {
        let _ = self.writer.sync();
        // The path once, absolute (the recording directory is), in the command that replays it.
        format!(
            "recorded {} samples, {}: ioscope replay {}",
            self.writer.frames(),
            crate::ui::format::human_bytes(self.writer.bytes() as f64),
            self.path.display()
        )
    }
}

/// Where a running recording is: the file's name, samples and bytes written so far.
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
    /// Recording started: where (the notice, with the file's absolute path).
    Started(Progress, String),
    /// Recording: one more sample written.
    Recording(Progress),
    /// The recording ended (stopped, or a write failed): why, and where it is.
    Stopped(String),
    /// No recording was started, and why.
    NotStarted(String),
}

/// `R`: starts recording from `latest` into the directory [`record_dir`] picks from `chosen`
/// (`--record-dir` or `IOSCOPE_RECORD_DIR`), or stops the running recording.
pub fn toggle(
    rec: &mut Option<LiveRecorder>,
    latest: Option<&Sample>,
    interval_s: f64,
    utc_offset_s: i64,
    chosen: Option<&Path>,
) -> Outcome {
    if let Some(r) = rec.take() {
        return Outcome::Stopped(r.finish());
    }
    let Some(latest) = latest else {
        return Outcome::NotStarted("no sample yet: press R again in a moment".into());
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let dir = match record_dir(chosen, &cwd) {
        Ok(d) => d,
        Err(why) => return Outcome::NotStarted(format!("cannot record: {why}")),
    };
    match LiveRecorder::start(latest, interval_s, utc_offset_s, &dir) {
        Ok(r) => {
            let progress = r.progress();
            let notice = format!("recording to {} (R stops)", r.path.display());
            *rec = Some(r);
            Outcome::Started(progress, notice)
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

/// Where `R` records, as an absolute path: the directory the user chose (`--record-dir`,
/// `IOSCOPE_RECORD_DIR`), else `cwd` unless it is world-writable (another user could plant names
/// there: the recording would still never be written through them, but could be made to fail,
/// so the user is asked to choose).
pub fn record_dir(chosen: Option<&Path>, cwd: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(d) = chosen {
        let abs = std::fs::canonicalize(d).map_err(|e| format!("--record-dir {}: {e}", d.display()))?;
        if !abs.is_dir() {
            return Err(format!("--record-dir {}: not a directory", d.display()));
        }
        return Ok(abs);
    }
    let abs = std::fs::canonicalize(cwd).map_err(|e| format!("the current directory: {e}"))?;
    let mode = std::fs::metadata(&abs).map_err(|e| format!("{}: {e}", abs.display()))?.permissions().mode();
    if mode & 0o002 != 0 {
        return Err(format!(
            "{} is world-writable; choose a directory with --record-dir DIR or IOSCOPE_RECORD_DIR",
            abs.display()
        ));
    }
    Ok(abs)
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
            toggle(&mut rec, None, 1.0, 0, None),
            Outcome::NotStarted("no sample yet: press R again in a moment".into())
        );
        assert!(rec.is_none());
        assert_eq!(on_sample(&mut rec, &Sample::default()), None);
    }

    #[test]
    fn the_record_directory_is_the_chosen_one_else_a_current_one_others_cannot_write() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mine = dir.path().join("mine");
        let open = dir.path().join("open");
        std::fs::create_dir(&mine).unwrap();
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let abs = |p: &Path| std::fs::canonicalize(p).unwrap();
        assert_eq!(record_dir(None, &mine), Ok(abs(&mine)));
        let err = record_dir(None, &open).unwrap_err();
        assert!(err.contains("world-writable") && err.contains("--record-dir"), "{err}");
        // Chosen explicitly, any directory goes (names are still never followed there).
        assert_eq!(record_dir(Some(&open), &mine), Ok(abs(&open)));
        assert_eq!(record_dir(Some(&mine), &open), Ok(abs(&mine)));
        assert!(record_dir(Some(&dir.path().join("missing")), &mine).is_err());
        // A relative choice comes back absolute.
        assert!(record_dir(Some(Path::new(".")), &mine).unwrap().is_absolute());
    }

    #[test]
    fn names_taken_by_planted_fifos_links_or_files_are_skipped_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        let mut latest = Sample::default();
        latest.host.hostname = "h".into();
        latest.wall_unix_ms = 1_795_352_709_000;
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "secret").unwrap();
        let base = file_name("h", latest.wall_unix_ms, 0);
        let fifo = std::ffi::CString::new(dir.path().join(&base).to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::os::unix::fs::symlink(&victim, dir.path().join(base.replace(".rec", "-2.rec"))).unwrap();
        std::fs::write(dir.path().join(base.replace(".rec", "-3.rec")), "mine").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let d = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let r = LiveRecorder::start(&latest, 1.0, 0, &d).map(|r| r.path.clone());
            tx.send(r.map_err(|e| e.to_string())).unwrap();
        });
        let path = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("R blocked").unwrap();
        assert_eq!(path, dir.path().join(base.replace(".rec", "-4.rec")));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret");
        assert_eq!(std::fs::read_to_string(dir.path().join(base.replace(".rec", "-3.rec"))).unwrap(), "mine");
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
