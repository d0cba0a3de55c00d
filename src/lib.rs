//! ioscope: why is the disk busy? Collectors produce raw [`sample::Sample`]s, [`model::Model`] derives
//! rates and thresholds from two of them, and the [`ui`] draws a model. Everything after the Sample
//! runs without root, eBPF or a terminal.

pub mod app;
pub mod bench;
pub mod bounded;
pub mod bpf;
pub mod cli;
pub mod collect;
pub mod compare;
pub mod headless;
pub mod model;
pub mod output;
pub mod privilege;
pub mod record;
pub mod replay;
pub mod safe_fs;
pub mod sample;
pub mod serve;
pub mod ui;
pub mod untrusted;
pub mod util;
