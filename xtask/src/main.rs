//! Chores: `cargo xtask setup|ebpf|check-ebpf|perf`. See README "Developing".
fn main() {}
