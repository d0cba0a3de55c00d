//! The offline tests, one binary: no root and no devices needed. Fixtures (recorded /proc and
//! /sys trees, tracefs formats, recordings), insta snapshots of the views (tests/offline/snapshots),
//! the CLI, recording and replay, the exporter, fuzzed readers and the model. Each module was
//! once its own test binary; `cargo test --test offline ui_snapshots::` runs one.

#[path = "../common/mod.rs"]
mod common;

// Hand-built models the view and text tests share (tests/fixtures/models).
#[path = "../fixtures/models/block_box.rs"]
mod block_box;
#[path = "../fixtures/models/busy_box.rs"]
mod busy_box;
#[path = "../fixtures/models/cache_box.rs"]
mod cache_box;
#[path = "../fixtures/models/files_box.rs"]
mod files_box;

mod anonymize;
mod bench_view_snapshots;
mod block_text;
mod cache_json_keys;
mod cli;
mod compare_pairs;
mod demos;
mod docs;
mod fuzz_readers;
mod headless;
mod hostile_names;
mod marks;
mod model_fixtures;
mod readahead_model;
mod record_cli;
mod recording;
mod replay_export;
mod replay_snapshots;
mod serve;
mod tui_sessions;
mod ui_cache_snapshots;
mod ui_cgroups;
mod ui_files_snapshots;
mod ui_missing_panes;
mod ui_snapshots;
mod ui_syncs;
mod ui_tables;
mod ui_waits;
