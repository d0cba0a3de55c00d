//! Output: the reports of `--once` and `--batch` as text frames or JSON ([`headless`]), the panes'
//! text forms, and the Prometheus/OpenMetrics encoding. It only formats: the modes sample.

pub mod block_text;
pub mod cgroups_text;
pub mod files_text;
pub mod headless;
pub mod iowait_text;
pub mod json_memo;
pub mod page_cache_text;
pub mod prometheus;
pub mod readahead_text;
pub mod syncs_text;
pub mod text;
