//! The parts of the xtask shared beyond its own command: the workloads and harnesses the live tests
//! (tests/live, through the root crate's dev-dependency on this package), the kernel lab's guest
//! (src/bin/lab-guest.rs) and `cargo xtask` itself each run, written once.

pub mod churn_worker;
pub mod empty_program;
pub mod fio_agree;
pub mod mmap_touch;
pub mod mmap_writer;
pub mod support;
