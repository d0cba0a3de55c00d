//! `ioscope bench`: direct and buffered I/O side by side, with what the system did during each run.
//!
//! - [`spec`]: the job matrix from the flags (pure).
//! - [`target`]: the file, directory or device, and the safety rules.
//! - [`engine`]: the I/O engines — [`uring`] (io_uring) and a pread/pwrite thread pool — and their
//!   latency [`histogram`]; [`buffers`]: their I/O buffers (in huge pages).
//! - [`runner`]: layout, cache preparation, a Sample before and after each job, cleanup.
//! - [`result`]: the per-job figures and the "what bound it" line (pure, from two Samples).
//! - [`report`]: the text table, JSON and `--compare`; [`view`]: the TUI bench view.

pub mod buffers;
pub mod cli;
pub mod engine;
pub mod histogram;
pub mod job;
pub mod report;
pub mod result;
pub mod runner;
pub mod spec;
pub mod target;
pub mod tui;
pub mod uring;
pub mod view;
