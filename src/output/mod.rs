//! Headless output: `--once` and `--batch`, as text frames or JSON.
//!
//! [`headless::run`] samples the live system; [`headless::report_loop`] is the same loop over any
//! sample source, clock and writer, so tests drive it with fixture Samples and failing writers.

pub mod block_text;
pub mod cgroups_text;
pub mod files_text;
pub mod headless;
pub mod iowait_text;
pub mod page_cache_text;
pub mod prometheus;
pub mod readahead_text;
pub mod syncs_text;
pub mod text;
