//! Headless output: --json and --batch.
