//! Project automation, run as `cargo xtask TASK` (an alias in
//! `.cargo/config.toml` for `cargo run --release --package xtask --`).
//!
//! - `cargo xtask bitexact [--mpi] [--orders 2,4,...] [--suite all|heat3d|multigrid|spectral|pfc|dynamo|flow]`:
//!   heat3d gives the same field bits for every rank count, process grid,
//!   exchange mode and backend ([`bitexact::heat3d`]); the `poisson` app the
//!   same solution and residual history for every rank count, overlap,
//!   communication avoidance and agglomeration threshold
//!   ([`bitexact::poisson`]); heat3d's spectral operator and the pfc app the
//!   same field for every rank count, process grid and `dfft` reshape
//!   protocol ([`bitexact::spectral`], [`bitexact::pfc`], sharing
//!   [`bitexact::fft_suite`]); the dynamo app the same state for every rank
//!   count, 1d/2d process grid, transposition protocol and queue length
//!   ([`mod@bitexact::dynamo`]); the flow app the same velocity and pressure
//!   for every rank count, overlap and communication avoidance
//!   ([`mod@bitexact::flow`]).
//! - `cargo xtask bench dynamo [--case 0|1] [--perf]`: the Christensen et
//!   al. (2001) benchmark values against the published ones, and the time
//!   per step with its phases ([`mod@bench::dynamo`]).
//! - `cargo xtask bench flow [--permeability] [--taylor-green] [--bed]
//!   [--perf] [--quick]`: the drag of sphere arrays against Zick and Homsy
//!   (1982) and Hasimoto (1959) with the observed order, the Taylor-Green
//!   energy decay, a random bed's iteration counts, the cost of a step
//!   ([`mod@bench::flow`]).
//! - `cargo xtask bench fft [--sizes 64,128,256] [--kinds c2c,r2c]`:
//!   `dfft`'s local 3D transforms on one core against FFTW (linked by a
//!   `dfft` example behind the `fftw` feature) and scipy's pocketfft;
//!   table, `fft.json` and `fft.png` ([`bench::fft`]).
//! - `cargo xtask bench heat3d [--quick] [--out DIR]`: weak scaling, the
//!   order sweep against a memory-bandwidth reference, blocking vs overlap;
//!   tables, `heat3d.json` and `heat3d.png` ([`bench::heat3d`]).
//! - `cargo xtask bench imex | chebyshev | exact-sum | halo [-- ARGS]`: the
//!   benchmarks that live in their crates, with their references.
//! - `cargo xtask bench sht-transpose [--quick]`: the distributed SHT's
//!   theta and l transposition algorithms vs queue length
//!   ([`bench::sht_transpose`]).
//! - `cargo xtask msrv`: every crate's `rust-version` is at least the newest
//!   its dependencies declare ([`msrv`]).
//! - `cargo xtask ci`: everything CI checks, in order, stopping at the first
//!   failure ([`ci`]).

mod bench;
mod bitexact;
mod ci;
mod flags;
mod gpu;
mod msrv;
mod plot;
mod stream;
mod util;

use clap::Parser;
use flags::{Cli, Task};

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
