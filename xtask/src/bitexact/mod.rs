//! `cargo xtask bitexact [--mpi] [--orders 2,4,...]`: heat3d must produce
//! the same bits for every rank count, process grid and exchange mode, and
//! (with `--mpi`) under MPI as in-process ([`self::heat3d`]). The
//! distributed SHT suite of [`sht::bitexact`] runs first.
//!
//! `--suite` picks these (SHT and heat3d), the multigrid suite of
//! [`poisson`] (the `poisson` app), the suites over `dfft`'s reshape
//! protocols ([`spectral`]: heat3d's spectral operator; [`pfc`]: the pfc
//! app), the dynamo app's ([`mod@dynamo`]), the flow app's
//! ([`mod@flow`]), or all of them (the default).
//!
//! Every app suite runs through one runner ([`runner::Suite`]): its cases
//! implement [`runner::Case`] (their columns, their reference, how to run
//! and what to compare), and the runner runs the references, then the
//! cases, prints one table and fails on any failed or differing run.

pub(crate) mod dynamo;
pub(crate) mod fft_suite;
pub(crate) mod flow;
pub(crate) mod heat3d;
pub(crate) mod pfc;
pub(crate) mod poisson;
mod runner;
pub(crate) mod sht;
pub(crate) mod spectral;

pub(crate) use self::heat3d::{N, ORDERS};
use anyhow::{bail, Result};

/// Options of `cargo xtask bitexact`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Run the MPI suite (under mpirun, -np 1, 2, 4) instead of the
    /// in-process one, compared against in-process 1-rank runs.
    #[arg(long)]
    pub mpi: bool,
    /// Stencil orders to check (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = ORDERS)]
    pub orders: Vec<usize>,
    /// In-process cases run at the same time.
    #[arg(long, default_value_t = 2)]
    pub jobs: usize,
    /// Which suites to run.
    #[arg(long, value_enum, default_value_t = Suite::All)]
    pub suite: Suite,
}

/// The suites of `cargo xtask bitexact`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Suite {
    /// Every suite.
    All,
    /// The SHT and heat3d suites.
    Heat3d,
    /// The `poisson` app only ([`poisson`]).
    Multigrid,
    /// heat3d's spectral operator over ranks, grids and reshape protocols
    /// ([`spectral`]).
    Spectral,
    /// The pfc app over ranks and reshape protocols ([`pfc`]).
    Pfc,
    /// The dynamo app over ranks, 1d/2d grids, transposition protocols and
    /// queue lengths ([`mod@dynamo`]).
    Dynamo,
    /// The flow app over ranks, overlap and communication avoidance
    /// ([`mod@flow`]).
    Flow,
}

/// Runs the selected suites (every one even when an earlier one failed);
/// fails if any case of any of them failed or differed.
pub fn run(args: &Args) -> Result<()> {
    let wanted = |s: Suite| args.suite == Suite::All || args.suite == s;
    let mut failed: Vec<&str> = vec![];
    let mut outcome = |name, r: Result<()>| {
        if let Err(e) = r {
            eprintln!("xtask: bitexact {name}: {e:#}");
            failed.push(name);
        }
    };
    if wanted(Suite::Heat3d) {
        outcome("heat3d", heat3d::run_heat3d(args));
    }
    if wanted(Suite::Multigrid) {
        outcome("multigrid", poisson::run(args.mpi, args.jobs));
    }
    if wanted(Suite::Spectral) {
        outcome("spectral", spectral::run(args.mpi, args.jobs));
    }
    if wanted(Suite::Pfc) {
        outcome("pfc", pfc::run(args.mpi, args.jobs));
    }
    if wanted(Suite::Dynamo) {
        outcome("dynamo", dynamo::bitexact(args.mpi, args.jobs));
    }
    if wanted(Suite::Flow) {
        outcome("flow", flow::bitexact(args.mpi, args.jobs));
    }
    if !failed.is_empty() {
        bail!("bit-exactness suite(s) failed: {}", failed.join(", "));
    }
    Ok(())
}
