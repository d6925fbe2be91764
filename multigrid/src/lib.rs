//! Cell-centred geometric multigrid for 7-point operators on [`halo`]
//! fields, with results **bit-identical for any rank count**.
//!
//! - [`Poisson`]: the problem `alpha u - div(beta grad u) = f`: global
//!   shape, box lengths, a [`Boundary`] per face (periodic, Dirichlet,
//!   Neumann), optionally variable face coefficients ([`FaceCoefficient`];
//!   coarse faces average the fine faces they cover; a zero face is closed,
//!   as a cut-cell aperture of a solid face) and a shift ([`CellCoefficient`],
//!   `alpha >= 0`, coarse cells average the fine cells: the Helmholtz
//!   operator of an implicit diffusion step). A cell with every face closed
//!   and no shift is inactive and held at 0. Problems without a Dirichlet
//!   face and without a shift are singular: the right-hand side must have
//!   zero mean (checked with the exact sum of [`comm::exact`]) and the
//!   solution is returned with zero mean.
//! - [`Hierarchy`]: the levels, coarsened by 2 while the global shape is
//!   even (the depth depends on the global shape only). Red-black
//!   Gauss-Seidel with the colour taken from **global** indices, restriction
//!   by the 8-cell average, trilinear prolongation (27/64, 9/64, 3/64,
//!   1/64), rediscretised coarse operators. Coarse levels whose blocks
//!   would become odd, or smaller than [`MgOptions::agglomerate_below`]
//!   cells per rank, are **gathered onto fewer ranks** (a
//!   sub-communicator); the bottom level is solved exactly by a dense
//!   Cholesky factorisation assembled in global order.
//! - Smoothing can **overlap** the halo exchange (post the colour just
//!   updated, smooth the interior of the other colour, finish, smooth the
//!   shell) and be **communication-avoiding** ([`CommAvoiding`]): where
//!   every block extent is at least 4, one 2-deep exchange per red-black
//!   pair replaces the two 1-deep exchanges; the first colour is smoothed
//!   redundantly on a 1-cell ring of ghost cells so the second needs no
//!   exchange. Both are bit-identical to the plain sweep by construction.
//! - [`Hierarchy::vcycle`], [`Hierarchy::solve_mg`] (V-cycles to a relative
//!   residual) and [`Hierarchy::solve_pcg`] (conjugate gradients
//!   preconditioned by one symmetric V-cycle; dot products through
//!   [`comm::exact::allreduce_exact_sums`]). Each reports a [`SolveReport`];
//!   [`Hierarchy::level_stats`] gives time and halo exchanges per level
//!   and phase.
//!
//! Every cell update reads the same operands in the same order whatever the
//! decomposition, every data movement is exact and every global reduction
//! is exact, so the iterates, the residual history and the iteration count
//! do not depend on the rank count, the overlap, communication avoidance or
//! agglomeration.
//!
//! ```
//! use comm::{local, ProcessGrid};
//! use multigrid::{Boundary, Hierarchy, MgOptions, Poisson};
//!
//! let n = 16;
//! let results = local::run(2, |comm| {
//!     let problem = Poisson::new([n; 3], [1.0; 3], [Boundary::Dirichlet; 3])?;
//!     let grid = ProcessGrid::for_shape([n; 3], comm.size(), problem.periodic())?;
//!     let mut mg = Hierarchy::new(comm, grid, &problem, 3, MgOptions::default())?;
//!     let mut f = mg.new_field();
//!     let mut u = mg.new_field();
//!     f.fill_owned(0, &mg.owned(), |_| 1.0);
//!     let report = mg.solve_pcg(comm, &mut u, &f)?;
//!     assert!(report.converged);
//!     Ok::<_, multigrid::MgError>(report.iterations)
//! })
//! .unwrap();
//! assert_eq!(results[0], results[1]);
//! ```
#![warn(missing_docs)]

mod bottom;
mod coef;
#[cfg(feature = "cuda")]
pub mod device;
mod dot;
#[cfg(test)]
mod emulate;
mod hierarchy;
mod kernels;
mod level;
mod problem;
mod transfer;

pub use coef::Coefficients;
pub use hierarchy::{Hierarchy, MG_FIELDS, PCG_FIELDS};
pub use problem::{Boundary, CellCoefficient, FaceCoefficient, Poisson};

use comm::CommError;
use halo::HaloError;

/// What building a problem or hierarchy, or solving, can report.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MgError {
    /// A communication error.
    #[error(transparent)]
    Comm(#[from] CommError),
    /// A halo error.
    #[error(transparent)]
    Halo(#[from] HaloError),
    /// The requested depth cannot be reached: a level's global shape cannot
    /// be halved.
    #[error("cannot coarsen level {level} (global shape {global:?}): extent {extent} on axis {axis} is odd or below 2; this shape allows at most {max_levels} levels")]
    Depth {
        /// The level (0 = finest) that would have to be coarsened.
        level: usize,
        /// Its global shape.
        global: [usize; 3],
        /// The axis.
        axis: usize,
        /// The extent on that axis.
        extent: usize,
        /// The deepest hierarchy the shape allows.
        max_levels: usize,
    },
    /// The fine decomposition has a block that cannot be halved.
    #[error("rank {rank} owns {extent} cells on axis {axis} of the fine level (global shape {global:?}); coarsening needs every rank's block to be even: choose a shape or rank count with even blocks, or 1 level")]
    Decomposition {
        /// The first rank with an odd block.
        rank: usize,
        /// The axis.
        axis: usize,
        /// Its extent.
        extent: usize,
        /// The fine global shape.
        global: [usize; 3],
    },
    /// The bottom level is too large for the dense solve.
    #[error("the bottom level has global shape {global:?} = {cells} cells, more than the dense-solve limit of {max}; request more levels or raise MgOptions::max_bottom_cells")]
    BottomTooLarge {
        /// Bottom global shape.
        global: [usize; 3],
        /// Its cell count.
        cells: usize,
        /// The limit.
        max: usize,
    },
    /// A singular problem (no Dirichlet face) with a right-hand side whose
    /// mean is not zero: it has no solution.
    #[error("the problem is singular (no Dirichlet face) and the right-hand side has mean {mean:e} (|sum f| / sum |f| = {relative:e} > 1e-10); subtract the mean or fix the boundary fluxes")]
    Incompatible {
        /// Mean of the right-hand side.
        mean: f64,
        /// `|sum f| / sum |f|`.
        relative: f64,
    },
    /// A vector of the solve holds a NaN or an infinity: the right-hand
    /// side (or the initial guess, through the first residual), or an
    /// iterate that overflowed. Every rank returns it, naming the first
    /// such cell (global index, row-major order).
    #[error("{what} is not finite (NaN or infinite) {}, iteration {iteration}", at_cell(.cell))]
    NotFinite {
        /// Which vector: "the right-hand side", "the residual", "A p".
        what: &'static str,
        /// The first non-finite cell (global index); `None` where every
        /// cell is finite and only the norm or dot product overflowed.
        cell: Option<[usize; 3]>,
        /// The CG iteration (0: before the first).
        iteration: usize,
    },
    /// Any other invalid argument (shapes, lengths, field layouts, options).
    #[error("{0}")]
    Invalid(String),
    /// A device failure (feature `cuda`): too little memory (the bytes
    /// needed and free), a kernel that does not compile, a driver error.
    #[error("device: {0}")]
    Device(String),
}

/// Where a `NotFinite` error lies, for its message.
fn at_cell(cell: &Option<[usize; 3]>) -> String {
    match cell {
        Some(c) => format!("at cell {c:?}"),
        None => "in its norm (every cell finite: the sum overflowed)".to_string(),
    }
}

/// Where communication-avoiding smoothing may engage (it does only on
/// levels where every rank's block extent is at least 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommAvoiding {
    /// On the finest level (the user's fields then carry 2 ghost layers).
    pub fine: bool,
    /// On the coarser levels.
    pub coarse: bool,
}

impl CommAvoiding {
    /// Nowhere.
    pub const OFF: CommAvoiding = CommAvoiding {
        fine: false,
        coarse: false,
    };
    /// On every level where blocks allow it.
    pub const ALL: CommAvoiding = CommAvoiding {
        fine: true,
        coarse: true,
    };
}

/// Solver options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MgOptions {
    /// Red-black sweeps before the coarse correction (default 2).
    pub pre_sweeps: usize,
    /// Black-red sweeps after the coarse correction (default 2).
    pub post_sweeps: usize,
    /// Relaxation factor of the sweeps (default 1.15: over-relaxed
    /// red-black Gauss-Seidel; 1.0 is plain Gauss-Seidel). On the 3-D
    /// Poisson problem 1.15 takes the asymptotic V(1,1) factor from 0.23 to
    /// 0.12 and V(2,2) from 0.115 to 0.066 (n = 128).
    pub omega: f64,
    /// Relative residual `||f - A u|| / ||f||` to reach (default 1e-10).
    pub tol: f64,
    /// Iteration (cycle) limit of the solvers (default 200).
    pub max_iter: usize,
    /// Largest bottom level (global cells) for the dense solve (default
    /// 1728). Fixed at build time.
    pub max_bottom_cells: usize,
    /// Overlap the halo exchanges of the sweeps with interior work
    /// (default true).
    pub overlap: bool,
    /// Communication-avoiding smoothing (default [`CommAvoiding::ALL`]).
    /// Fixed at build time.
    pub comm_avoiding: CommAvoiding,
    /// Coarse levels with fewer owned cells per rank than this are gathered
    /// onto fewer ranks (default 512; 0 gathers only where a block would be
    /// odd). Fixed at build time.
    pub agglomerate_below: usize,
}

impl Default for MgOptions {
    fn default() -> Self {
        MgOptions {
            pre_sweeps: 2,
            post_sweeps: 2,
            omega: 1.15,
            tol: 1e-10,
            max_iter: 200,
            max_bottom_cells: 1728,
            overlap: true,
            comm_avoiding: CommAvoiding::ALL,
            agglomerate_below: 512,
        }
    }
}

/// What a solve did.
#[derive(Debug, Clone, PartialEq)]
pub struct SolveReport {
    /// V-cycles (for [`Hierarchy::solve_mg`]) or CG iterations.
    pub iterations: usize,
    /// Relative residual 2-norms, starting with the initial guess's.
    pub residuals: Vec<f64>,
    /// Whether the tolerance was reached.
    pub converged: bool,
    /// Halo exchanges (posts) this solve performed on this rank, all levels.
    pub halo_events: u64,
    /// Of those, the exchanges inside the smoothing sweeps.
    pub smooth_events: u64,
    /// V-cycles run (one per iteration for both solvers).
    pub vcycles: usize,
}

/// Time (seconds) and exchanges of one level on this rank, accumulated
/// since the hierarchy was built or [`Hierarchy::reset_stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LevelStats {
    /// Global shape of the level.
    pub global: [usize; 3],
    /// Ranks holding the level (fewer than the communicator where the level
    /// is agglomerated).
    pub ranks: usize,
    /// Whether communication-avoiding smoothing is engaged on the level.
    pub comm_avoiding: bool,
    /// Smoothing kernels.
    pub smooth_s: f64,
    /// Residual kernels.
    pub residual_s: f64,
    /// Restriction and prolongation kernels.
    pub transfer_s: f64,
    /// Halo exchanges (posting, waiting, unpacking), not overlapped work.
    pub halo_s: f64,
    /// Moving the coarser level to and from its ranks (agglomeration), or
    /// the bottom solve on the bottom level.
    pub coarse_s: f64,
    /// Exchanges inside the sweeps.
    pub smooth_events: u64,
    /// All exchanges.
    pub halo_events: u64,
    /// Visits of the level (V-cycles that reached it on this rank).
    pub visits: u64,
}
