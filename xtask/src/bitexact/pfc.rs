//! The pfc suite of `cargo xtask bitexact`: the phase-field crystal app
//! (semi-implicit spectral steps through `dfft`) must give the same field
//! bits for every rank count and reshape protocol, and (with `--mpi`) under
//! MPI as in-process.
//!
//! Every case runs pfc on [`PERIODS`] x [`POINTS_PER_PERIOD`] points (an
//! uneven 21 x 14 x 21 grid) from the noise initial condition for [`STEPS`]
//! steps with diagnostics every step (three forward and two backward
//! distributed transforms per step), and compares its field hash with the
//! in-process 1-rank run with the default protocol (see
//! [`super::fft_suite`], which also checks that every reshape used the
//! protocol asked for). pfc chooses its own process grid. In-process: ranks
//! [`RANKS`] x every concrete protocol and `auto`; MPI: `mpirun -np`
//! [`MPI_RANKS`] x the same protocols.

use super::fft_suite;
use crate::util;
use anyhow::Result;

/// BCC periods per axis.
pub const PERIODS: [usize; 3] = [3, 2, 3];
/// Grid points per period.
pub const POINTS_PER_PERIOD: usize = 7;
/// Steps per run.
pub const STEPS: usize = 10;
/// In-process rank counts.
pub const RANKS: &[(usize, &[Option<[usize; 3]>])] = &[
    (1, &[None]),
    (2, &[None]),
    (3, &[None]),
    (4, &[None]),
    (6, &[None]),
    (8, &[None]),
];
/// MPI process counts.
pub const MPI_RANKS: &[(usize, &[Option<[usize; 3]>])] =
    &[(1, &[None]), (2, &[None]), (4, &[None])];

/// The arguments every case passes to pfc.
fn args() -> Vec<String> {
    [
        "--periods",
        &util::triple(PERIODS),
        "--points-per-period",
        &POINTS_PER_PERIOD.to_string(),
        "--initial",
        "noise",
        "--steps",
        &STEPS.to_string(),
        "--diag-every",
        "1",
        "-q",
    ]
    .map(String::from)
    .to_vec()
}

/// Runs the pfc suite (in-process, or under MPI when `mpi`) with `jobs`
/// in-process cases at a time.
pub fn run(mpi: bool, jobs: usize) -> Result<()> {
    fft_suite::run_app("pfc", "pfc", args(), (RANKS, MPI_RANKS), mpi, jobs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bitexact::fft_suite::Backend;

    #[test]
    fn suite_sizes() {
        let p = fft_suite::protocols().unwrap();
        assert_eq!(
            fft_suite::cases(RANKS, &p, Backend::InProcess).len(),
            6 * p.len() - 1
        );
        assert_eq!(
            fft_suite::cases(MPI_RANKS, &p, Backend::Mpi).len(),
            3 * p.len()
        );
    }
}
