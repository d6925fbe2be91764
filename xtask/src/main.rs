//! Project automation, run as `cargo xtask TASK` (an alias in
//! `.cargo/config.toml` for `cargo run --release --package xtask --`).
//!
//! - `cargo xtask bitexact [--mpi] [--orders 2,4,...] [--suite all|heat3d|multigrid|spectral|pfc|dynamo|flow]`:
//!   heat3d gives the same field bits for every rank count, process grid,
//!   exchange mode and backend ([`bitexact`]); the `poisson` app the same
//!   solution and residual history for every rank count, overlap,
//!   communication avoidance and agglomeration threshold ([`bitexact_mg`]);
//!   heat3d's spectral operator and the pfc app the same field for every
//!   rank count, process grid and `dfft` reshape protocol
//!   ([`bitexact_spectral`], [`bitexact_pfc`], sharing [`fft_suite`]);
//!   the dynamo app the same state for every rank count, 1d/2d process grid,
//!   transposition protocol and queue length ([`mod@dynamo`]); the flow app
//!   the same velocity and pressure for every rank count, overlap and
//!   communication avoidance ([`mod@flow`]).
//! - `cargo xtask bench dynamo [--case 0|1] [--perf]`: the Christensen et
//!   al. (2001) benchmark values against the published ones, and the time
//!   per step with its phases ([`mod@dynamo`]).
//! - `cargo xtask bench flow [--permeability] [--taylor-green] [--bed]
//!   [--perf] [--quick]`: the drag of sphere arrays against Zick and Homsy
//!   (1982) and Hasimoto (1959) with the observed order, the Taylor-Green
//!   energy decay, a random bed's iteration counts, the cost of a step
//!   ([`mod@flow`]).
//! - `cargo xtask bench fft [--sizes 64,128,256] [--kinds c2c,r2c]`:
//!   `dfft`'s local 3D transforms on one core against FFTW (linked by a
//!   `dfft` example behind the `fftw` feature) and scipy's pocketfft;
//!   table, `fft.json` and `fft.png` ([`fft_bench`]).
//! - `cargo xtask bench heat3d [--quick] [--out DIR]`: weak scaling, the
//!   order sweep against a memory-bandwidth reference, blocking vs overlap;
//!   tables, `heat3d.json` and `heat3d.png` ([`mod@bench`]).
//! - `cargo xtask bench imex | chebyshev | exact-sum | halo [-- ARGS]`: the
//!   benchmarks that live in their crates, with their references.
//! - `cargo xtask bench sht-transpose [--quick]`: the distributed SHT's
//!   theta and l transposition algorithms vs queue length ([`sht_dist`]).
//! - `cargo xtask msrv`: every crate's `rust-version` is at least the newest
//!   its dependencies declare ([`msrv`]).
//! - `cargo xtask ci`: everything CI checks, in order, stopping at the first
//!   failure ([`ci`]).

mod bench;
mod bench_mg;
mod bitexact;
mod bitexact_mg;
mod bitexact_pfc;
mod bitexact_spectral;
mod ci;
mod cost;
mod dynamo;
mod fft_bench;
mod fft_dist;
mod fft_suite;
mod flow;
mod gpu;
mod gpu_scaling;
mod msrv;
mod plot;
mod sht_bench;
mod sht_dist;
mod stream;
mod util;

use clap::{Parser, Subcommand};

/// Project automation for the parnum workspace.
#[derive(Debug, Parser)]
#[command(name = "xtask", bin_name = "cargo xtask", about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

/// The tasks.
#[derive(Debug, Subcommand)]
enum Task {
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

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match &cli.task {
        Task::Bitexact(a) => bitexact::run(a),
        Task::Bench { target } => bench::run(target),
        Task::Ci(a) => ci::run(a),
        Task::Gpu(a) => gpu::run(a),
        Task::Msrv => msrv::run(),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
