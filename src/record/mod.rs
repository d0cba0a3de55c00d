//! Recordings: raw Samples in an append-only, compressed, checksummed file (see [`format`]), so
//! every derived figure is recomputed on replay by the current Model.

pub mod anonymize;
pub mod format;
pub mod host_facts;
pub mod live;
pub mod marks;
pub mod recorder;

pub use format::{Mark, Recording, RecordingHeader, RecordingWriter, FORMAT_VERSION};
