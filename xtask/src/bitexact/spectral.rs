//! The spectral suite of `cargo xtask bitexact`: heat3d's spectral operator
//! (`--operator spectral`: r2c and c2r through `dfft`) must give the same
//! field bits for every rank count, process grid and reshape protocol, and
//! (with `--mpi`) under MPI as in-process.
//!
//! Every case runs heat3d on the uneven [`crate::bitexact::N`] for
//! [`STEPS`] exact (integrating-factor) steps, one forward and one backward
//! distributed transform each, and compares its field hash with the
//! in-process 1-rank run with the default protocol (see
//! [`super::fft_suite`], which also checks that every reshape used the
//! protocol asked for). In-process: the rank counts and process grids of
//! [`GRIDS`] (slabs and pencils, the halved axis split or whole) x every
//! concrete protocol and `auto`. MPI: `mpirun -np` 1, 2, 4 on the grids of
//! [`MPI_GRIDS`] x the same protocols.

use super::fft_suite;
use crate::bitexact::N;
use crate::util;
use anyhow::Result;

/// Steps per run.
pub const STEPS: usize = 10;
/// In-process rank counts and process grids (`None`: heat3d's choice).
pub const GRIDS: &[(usize, &[Option<[usize; 3]>])] = &[
    (1, &[None]),
    (2, &[Some([2, 1, 1]), Some([1, 1, 2])]),
    (3, &[Some([3, 1, 1]), Some([1, 3, 1])]),
    (4, &[Some([2, 2, 1]), Some([1, 1, 4])]),
    (6, &[Some([3, 2, 1]), Some([1, 2, 3])]),
    (8, &[Some([2, 2, 2]), Some([4, 2, 1])]),
];
/// MPI process counts and their grids.
pub const MPI_GRIDS: &[(usize, &[Option<[usize; 3]>])] = &[
    (1, &[None]),
    (2, &[Some([2, 1, 1]), Some([1, 1, 2])]),
    (4, &[Some([2, 2, 1]), Some([1, 1, 4])]),
];

/// The arguments every case passes to heat3d.
fn args() -> Vec<String> {
    [
        "--operator",
        "spectral",
        "--n",
        &util::triple(N),
        "--steps",
        &STEPS.to_string(),
        "--warmup",
        "0",
        "--no-vtk",
        "-q",
    ]
    .map(String::from)
    .to_vec()
}

/// Runs the spectral suite (in-process, or under MPI when `mpi`) with
/// `jobs` in-process cases at a time.
pub fn run(mpi: bool, jobs: usize) -> Result<()> {
    fft_suite::run_app("spectral", "heat3d", args(), (GRIDS, MPI_GRIDS), mpi, jobs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bitexact::fft_suite::Backend;

    #[test]
    fn grids_hold_their_rank_counts_and_fit_n() {
        for &(p, gs) in GRIDS.iter().chain(MPI_GRIDS) {
            for g in gs.iter().flatten() {
                assert_eq!(g.iter().product::<usize>(), p, "{g:?}");
                assert!((0..3).all(|d| g[d] <= N[d]), "{g:?}");
            }
        }
    }

    #[test]
    fn suite_sizes() {
        let p = fft_suite::protocols().unwrap();
        assert_eq!(
            fft_suite::cases(GRIDS, &p, Backend::InProcess).len(),
            11 * p.len() - 1
        );
        assert_eq!(
            fft_suite::cases(MPI_GRIDS, &p, Backend::Mpi).len(),
            5 * p.len()
        );
    }
}
