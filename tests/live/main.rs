//! The live tests, one binary: they need root (IOSCOPE_REQUIRE_BPF=1 makes a skip a failure) and
//! make real I/O on loop devices, load the eBPF programs and check ioscope against fio, iostat,
//! bpftrace, debugfs and Prometheus. Each module was once its own test binary, and still runs as
//! one: every test holds its module's turn (`common::live_group`), so tests of one module may run
//! side by side but never beside another module's I/O. `cargo test --test live live_iostat::` runs
//! one module. A test waiting for its turn counts as running: libtest's "has been running for over
//! 60 seconds" then means another module's tests are still going.

#[path = "../common/mod.rs"]
mod common;
// xtask's library (dev-dependency): the fio agreement harness (shared with `cargo xtask
// bench-fio`), the readahead checks' mmap reader (with the kernel lab's guest) and the mmap column
// writer (with `cargo xtask mmap-writer` and the real-software suite).
use xtask::{fio_agree, mmap_touch, mmap_writer};

mod live_bench;
mod live_bench_fio;
mod live_block;
mod live_block_files;
mod live_block_json;
mod live_bpf;
mod live_cgroups;
mod live_dirty_thresholds;
mod live_exited;
mod live_fds;
mod live_file_names;
mod live_files;
mod live_hostile_names;
mod live_iostat;
mod live_iowait;
mod live_loopdev;
mod live_marks;
mod live_memcg;
mod live_mmap_store;
mod live_page_cache;
mod live_prometheus;
mod live_quit;
mod live_readahead;
mod live_syncs;
