//! The command line: the tasks and their options (the `--help` text).

use crate::{bench, bitexact, ci, gpu};
use clap::{Parser, Subcommand};

/// Project automation for the parnum workspace.
#[derive(Debug, Parser)]
#[command(name = "xtask", bin_name = "cargo xtask", about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) task: Task,
}

/// The tasks.
#[derive(Debug, Subcommand)]
pub(crate) enum Task {
    /// The apps' hashes (heat3d, poisson, pfc, dynamo, flow) must not depend on ranks, grid, options, protocol or backend.
    Bitexact(bitexact::Args),
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        target: bench::Target,
    },
    /// What CI runs: fmt, clippy, tests, the MPI self-test, both bitexact suites.
    Ci(ci::Args),
    /// The GPU suite (needs a CUDA device): device tests, heat3d's device
    /// bits against the host's for every order, rank count and mode, the
    /// spectral operator on cuFFT, bad input. `--stage DIR` builds it for a
    /// GPU machine without a Rust toolchain.
    Gpu(gpu::Args),
    /// Every crate declares at least the rust-version its dependencies need.
    Msrv,
}
