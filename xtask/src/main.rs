//! Chores: `cargo xtask setup|ebpf|check-ebpf|dist|vm|support-table|perf|startup|serve-perf|bench-fio|
//! overhead|cache-overhead|stories`. See README "Developing" and xtask/README.md.

mod bench_fio;
mod bpf_stats;
mod cache_overhead;
mod churn;
mod dist;
mod ebpf;
mod fio;
mod iowait_cost;
mod layers;
mod overhead;
mod overhead_fsync;
mod perf;
mod serve_perf;
mod setup;
mod startup;
mod stats;
mod stories;
mod toolchain;
mod vm;
mod watcher;

use clap::{Parser, Subcommand};
// The library part (src/lib.rs), shared with the lab guest and the live tests.
use xtask::{churn_worker, empty_program, fio_agree, mmap_writer, support};

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "ioscope's development chores")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Install what `dist` needs (the musl targets, musl-tools, gcc-aarch64-linux-gnu), the arm64
    /// lab's qemu-system-arm, and what rebuilding the eBPF objects needs: nightly's rust-src and
    /// bpf-linker (built against nightly's own LLVM).
    Setup {
        /// Reinstall bpf-linker even when a working one is on PATH.
        #[arg(long)]
        force: bool,
    },
    /// Build the eBPF programs (ebpf/probes) for each architecture: assets/ioscope.bpf.o (x86-64),
    /// assets/ioscope-aarch64.bpf.o.
    Ebpf,
    /// Rebuild the eBPF object in a temporary directory and fail if the committed one differs.
    CheckEbpf,
    /// Build the static release binaries (x86_64 and aarch64, musl) into target/dist/ioscope-ARCH,
    /// with target/dist/SHA256SUMS.
    Dist,
    /// Boot a Debian kernel under qemu and run the kernel lab's suite in it with the static
    /// binary: `cargo xtask vm [--arch arm64] --kernel 6.1 [-- CHECK...]`.
    Vm {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Fail when a module of src/ imports a higher layer's, peers of one layer import each other
    /// in a cycle, or files of one folder do (the layers: xtask/src/layers.rs, src/README.md).
    Layers,
    /// Print the kernel support table (markdown) that the README carries.
    SupportTable,
    /// Measure ioscope's own CPU, memory and first-frame time (arguments go to the perf tool).
    Perf {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Measure ioscope's start-up (exec to eBPF live, --once wall) and peak memory of --once,
    /// --batch and record (arguments go to the tool).
    Startup {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Measure ioscope's CPU over a burst of new files created and read, and idle, with the paths
    /// it found (arguments go to the tool).
    Churn {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Measure `ioscope serve`: scrape time, CPU at 15 s scrapes, memory (arguments go to the tool).
    ServePerf {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Compare `ioscope bench` with fio on the disk under DIR (arguments go to the tool).
    BenchFio {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Measure what the eBPF probes cost fio's IOPS, with and without ioscope, alternating.
    Overhead {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Context switches per second with and without ioscope's I/O-wait probes.
    IowaitCost {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Cached-read throughput (fio) with and without ioscope's page-cache probes.
    CacheOverhead {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// The mmap column writer (xtask/src/mmap_writer.rs): append FILES columns of MIB MiB each
    /// under DIR through shared mappings of ftruncate-extended files, or with `--random TOUCHES`
    /// write TOUCHES random pages of the existing columns with MADV_RANDOM; optionally under a
    /// memory limit.
    MmapWriter {
        /// Where the columns are (`col-000`, ...).
        #[arg(long)]
        dir: std::path::PathBuf,
        #[arg(long, default_value_t = 8)]
        files: usize,
        /// Each column's size.
        #[arg(long, default_value_t = 64)]
        mib: u64,
        /// Update this many random pages of each existing column (MADV_RANDOM) instead of appending.
        #[arg(long)]
        random: Option<u64>,
        /// Run in a memory cgroup limited to this (cgroup v1's memory controller, else v2).
        #[arg(long)]
        memory_limit_mib: Option<u64>,
    },
    /// Run real software (PostgreSQL, Redis, an mmap column writer) on loop devices and check
    /// ioscope against outside oracles: `cargo xtask stories [postgres] [redis] [mmap]` (root).
    Stories {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Setup { force } => setup::run(force),
        Command::Ebpf => ebpf::build_and_install(),
        Command::CheckEbpf => ebpf::check(),
        Command::Dist => dist::run().map(|_| ()),
        Command::Vm { args } => vm::run(&args),
        Command::Layers => layers::run(),
        Command::SupportTable => {
            print!("{}", support::markdown());
            Ok(())
        }
        Command::Perf { args } => perf::run(&args),
        Command::ServePerf { args } => serve_perf::run(&args),
        Command::Startup { args } => startup::run(&args),
        Command::Churn { args } => churn::run(&args),
        Command::BenchFio { args } => bench_fio::run(&args),
        Command::Overhead { args } => overhead::run(&args),
        Command::CacheOverhead { args } => cache_overhead::run(&args),
        Command::IowaitCost { args } => iowait_cost::run(&args),
        Command::MmapWriter { dir, files, mib, random, memory_limit_mib } => {
            let _limit = match memory_limit_mib {
                Some(m) => Some(mmap_writer::MemoryLimit::enter("ioscope-mmap-writer", m << 20)?),
                None => None,
            };
            match random {
                None => {
                    mmap_writer::append_columns(&dir, files, mib << 20)?;
                    println!("appended {files} columns of {mib} MiB under {}", dir.display());
                }
                Some(touches) => {
                    for i in 0..files {
                        let pages =
                            mmap_writer::update_random_pages(&mmap_writer::column_path(&dir, i), touches)?;
                        println!("column {i}: {pages} distinct pages written");
                    }
                }
            }
            Ok(())
        }
        Command::Stories { args } => stories::run(&args),
    }
}
