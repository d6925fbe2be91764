//! Cell-centred geometric multigrid for the 7-point Poisson operator on
//! [`halo`] fields, with results **bit-identical for any rank count**.
//!
//! - [`Poisson`]: the problem — global shape, box lengths and a
//!   [`Boundary`] per axis (periodic, or homogeneous Dirichlet on both faces
//!   of the axis). The operator is `A u = -Δu` (symmetric positive
//!   definite; semi-definite when every axis is periodic, in which case the
//!   mean is removed with the reproducible sum of [`comm::exact`]).
//! - [`Hierarchy`]: the levels, coarsened by 2 while every rank's block stays
//!   even and at least 2 (the requested depth is checked on every rank; an
//!   impossible one names the level and size). Red-black Gauss-Seidel with the
//!   colour taken from **global** indices, restriction by the 8-cell average,
//!   trilinear prolongation (27/64, 9/64, 3/64, 1/64), rediscretised coarse
//!   operators, and the bottom level gathered in global order and solved by a
//!   dense Cholesky factorisation on every rank identically.
//! - [`Hierarchy::vcycle`], [`Hierarchy::solve_mg`] (V-cycles to a relative
//!   residual) and [`Hierarchy::solve_pcg`] (conjugate gradients
//!   preconditioned by one symmetric V-cycle; dot products through
//!   [`comm::exact::allreduce_exact_sums`]). Each reports a [`SolveReport`].
//!
//! Every cell update reads the same operands in the same order whatever the
//! decomposition, and every global reduction is exact, so the iterates, the
//! residual history and the iteration count do not depend on the rank count.
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

use comm::exact::{allreduce_exact_sums, ExactSum};
use comm::{BlockDecomposition, CommError, CommExt, Communicator, IndexBox, ProcessGrid};
use halo::{Exchanger, Field, FieldLayout, HaloError, HaloSpec, Neighborhood, Topology};

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
    /// The requested depth cannot be reached on this decomposition.
    #[error("cannot coarsen level {level} (global shape {global:?}): rank {rank} owns {extent} cells on axis {axis}; every rank's block must be even and at least 2 to coarsen (at most {max_levels} levels possible here)")]
    Depth {
        /// The level (0 = finest) that would have to be coarsened.
        level: usize,
        /// Its global shape.
        global: [usize; 3],
        /// The first rank whose block cannot be halved.
        rank: usize,
        /// The axis.
        axis: usize,
        /// That rank's extent on that axis.
        extent: usize,
        /// The deepest hierarchy this decomposition allows.
        max_levels: usize,
    },
    /// The bottom level is too large for the dense solve.
    #[error("the bottom level has global shape {global:?} = {cells} cells, more than the dense-solve limit of {max}; request more levels (or fewer ranks per axis) or raise MgOptions::max_bottom_cells")]
    BottomTooLarge {
        /// Bottom global shape.
        global: [usize; 3],
        /// Its cell count.
        cells: usize,
        /// The limit.
        max: usize,
    },
    /// Any other invalid argument (shapes, lengths, field layouts, options).
    #[error("{0}")]
    Invalid(String),
}

/// Boundary condition of one axis (both faces).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Boundary {
    /// Periodic.
    Periodic,
    /// Homogeneous Dirichlet (`u = 0` on the faces, which lie half a cell
    /// beyond the outermost cell centres).
    Dirichlet,
}

/// The constant-coefficient Poisson problem `-Δu = f` on a box of cells.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Poisson {
    /// Global number of cells per axis.
    pub shape: [usize; 3],
    /// Box lengths per axis.
    pub lengths: [f64; 3],
    /// Boundary condition per axis.
    pub bc: [Boundary; 3],
}

impl Poisson {
    /// A validated problem.
    ///
    /// # Errors
    /// [`MgError::Invalid`] for a zero extent or a non-positive or
    /// non-finite length.
    pub fn new(shape: [usize; 3], lengths: [f64; 3], bc: [Boundary; 3]) -> Result<Self, MgError> {
        if let Some(d) = (0..3).find(|&d| shape[d] == 0) {
            return Err(MgError::Invalid(format!(
                "global shape {shape:?} has extent 0 on axis {d}; every extent must be at least 1"
            )));
        }
        if let Some(d) = (0..3).find(|&d| !(lengths[d].is_finite() && lengths[d] > 0.0)) {
            return Err(MgError::Invalid(format!(
                "box length {} on axis {d} must be positive and finite",
                lengths[d]
            )));
        }
        Ok(Poisson { shape, lengths, bc })
    }

    /// Cell sizes.
    pub fn h(&self) -> [f64; 3] {
        [0, 1, 2].map(|d| self.lengths[d] / self.shape[d] as f64)
    }

    /// Which axes are periodic (for [`ProcessGrid`]).
    pub fn periodic(&self) -> [bool; 3] {
        self.bc.map(|b| b == Boundary::Periodic)
    }

    /// Whether the operator is singular (every axis periodic).
    pub fn is_singular(&self) -> bool {
        self.bc.iter().all(|&b| b == Boundary::Periodic)
    }

    /// The centre of the cell with global index `p`.
    pub fn cell_centre(&self, p: [usize; 3]) -> [f64; 3] {
        let h = self.h();
        [0, 1, 2].map(|d| (p[d] as f64 + 0.5) * h[d])
    }
}

/// Solver options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MgOptions {
    /// Red-black sweeps before the coarse correction (default 2).
    pub pre_sweeps: usize,
    /// Red-black sweeps after the coarse correction (default 2).
    pub post_sweeps: usize,
    /// Relaxation factor of the red-black sweeps (default 1.0: plain
    /// Gauss-Seidel; about 1.15 over-relaxes, which in 3-D improves the
    /// red-black smoothing factor).
    pub omega: f64,
    /// Relative residual `||f - A u|| / ||f||` to reach (default 1e-10).
    pub tol: f64,
    /// Iteration (cycle) limit of the solvers (default 200).
    pub max_iter: usize,
    /// Largest bottom level (global cells) for the dense solve (default 1728).
    pub max_bottom_cells: usize,
}

impl Default for MgOptions {
    fn default() -> Self {
        MgOptions {
            pre_sweeps: 2,
            post_sweeps: 2,
            omega: 1.0,
            tol: 1e-10,
            max_iter: 200,
            max_bottom_cells: 1728,
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
    /// Halo exchanges (posts) this solve performed, summed over levels.
    pub halo_events: u64,
}

/// One level of the hierarchy.
#[derive(Debug)]
struct Level {
    global: [usize; 3],
    lo: [usize; 3],
    n: [usize; 3],
    layout: FieldLayout,
    topo: Topology,
    ex: Exchanger<f64>,
    ex_full: Exchanger<f64>,
    /// `1/h²` per axis.
    ih2: [f64; 3],
    /// Extra diagonal per axis and local index (Dirichlet walls).
    wall: [Vec<f64>; 3],
    dirichlet: [bool; 3],
    u: Field,
    f: Field,
    r: Field,
}

impl Level {
    fn new(
        comm: &dyn Communicator,
        problem: &Poisson,
        dec: &BlockDecomposition,
        h: [f64; 3],
    ) -> Result<Self, MgError> {
        let topo = Topology::new(comm, dec, HaloSpec::uniform(1, Neighborhood::Faces))?;
        let full = Topology::new(comm, dec, HaloSpec::uniform(1, Neighborhood::Full))?;
        let owned = topo.owned();
        let global = dec.global();
        let ih2 = h.map(|x| 1.0 / (x * x));
        let dirichlet = problem.bc.map(|b| b == Boundary::Dirichlet);
        let wall = [0, 1, 2].map(|d| {
            (owned.lo[d]..owned.hi[d])
                .map(|g| {
                    if !dirichlet[d] {
                        0.0
                    } else {
                        let c = usize::from(g == 0) + usize::from(g + 1 == global[d]);
                        c as f64 * ih2[d]
                    }
                })
                .collect::<Vec<f64>>()
        });
        let layout = topo.layout(1);
        Ok(Level {
            global,
            lo: owned.lo,
            n: owned.shape(),
            layout,
            ex: Exchanger::new(&topo, 1, 0)?,
            ex_full: Exchanger::new(&full, 1, 1)?,
            topo,
            ih2,
            wall,
            dirichlet,
            u: Field::new(layout),
            f: Field::new(layout),
            r: Field::new(layout),
        })
    }

    /// Blocking face exchange of `u` (ghosts on Dirichlet walls stay 0).
    fn exchange_u(&mut self, comm: &dyn Communicator, events: &mut u64) -> Result<(), MgError> {
        *events += 1;
        self.ex.exchange(comm, &mut [&mut self.u])?;
        Ok(())
    }

    /// One Gauss-Seidel half-sweep over the cells of `colour` (global parity).
    fn smooth_colour(&mut self, colour: usize, omega: f64) {
        let s = self.layout.strides();
        let [n0, n1, n2] = self.n;
        let ih2 = self.ih2;
        let f = self.f.as_slice();
        let mut diag_row = vec![0.0; n2];
        let u = self.u.as_mut_slice();
        for i in 0..n0 {
            for j in 0..n1 {
                let k0 = (colour + self.lo[0] + i + self.lo[1] + j + self.lo[2]) % 2;
                let base = 2.0 * (ih2[0] + ih2[1] + ih2[2]) + self.wall[0][i] + self.wall[1][j];
                for k in (k0..n2).step_by(2) {
                    diag_row[k] = base + self.wall[2][k];
                }
                let row = (i + 1) * s[0] + (j + 1) * s[1] + 1;
                for k in (k0..n2).step_by(2) {
                    let x = row + k;
                    let nb = ih2[0] * (u[x - s[0]] + u[x + s[0]])
                        + ih2[1] * (u[x - s[1]] + u[x + s[1]])
                        + ih2[2] * (u[x - 1] + u[x + 1]);
                    let gs = (f[x] + nb) / diag_row[k];
                    u[x] = if omega == 1.0 {
                        gs
                    } else {
                        u[x] + omega * (gs - u[x])
                    };
                }
            }
        }
    }

    /// `r = f - A u` on the owned cells (`u`'s ghosts must be current).
    fn residual(&mut self) {
        residual_into(self);
    }

    /// Zeroes `u` (ghosts included).
    fn zero_u(&mut self) {
        self.u.as_mut_slice().fill(0.0);
    }

    /// Sets the ghosts of `u` on Dirichlet walls to the odd reflection of the
    /// adjacent owned plane (edges and corners included), after a full
    /// exchange: the linear extrapolation to zero on the wall.
    fn reflect_dirichlet(&mut self) {
        let p = self.layout.padded();
        let s = self.layout.strides();
        let u = self.u.as_mut_slice();
        for d in 0..3 {
            if !self.dirichlet[d] {
                continue;
            }
            let (a, b) = ((d + 1) % 3, (d + 2) % 3);
            let mut planes = Vec::new();
            if self.lo[d] == 0 {
                planes.push((0usize, 1usize));
            }
            if self.lo[d] + self.n[d] == self.global[d] {
                planes.push((self.n[d] + 1, self.n[d]));
            }
            for (ghost, inner) in planes {
                for ia in 0..p[a] {
                    for ib in 0..p[b] {
                        let mut g = [0; 3];
                        g[d] = ghost;
                        g[a] = ia;
                        g[b] = ib;
                        let mut q = g;
                        q[d] = inner;
                        let xg = g[0] * s[0] + g[1] * s[1] + g[2];
                        let xq = q[0] * s[0] + q[1] * s[1] + q[2];
                        u[xg] = -u[xq];
                    }
                }
            }
        }
    }
}

/// Writes `f - A u` into `r` for the owned cells of `lv`.
fn residual_into(lv: &mut Level) {
    let s = lv.layout.strides();
    let [n0, n1, n2] = lv.n;
    let ih2 = lv.ih2;
    let u = lv.u.as_slice();
    let f = lv.f.as_slice();
    let r = lv.r.as_mut_slice();
    for i in 0..n0 {
        for j in 0..n1 {
            let row = (i + 1) * s[0] + (j + 1) * s[1] + 1;
            for k in 0..n2 {
                let x = row + k;
                let d = 2.0 * (ih2[0] + ih2[1] + ih2[2])
                    + lv.wall[0][i]
                    + lv.wall[1][j]
                    + lv.wall[2][k];
                let nb = ih2[0] * (u[x - s[0]] + u[x + s[0]])
                    + ih2[1] * (u[x - s[1]] + u[x + s[1]])
                    + ih2[2] * (u[x - 1] + u[x + 1]);
                r[x] = f[x] - (d * u[x] - nb);
            }
        }
    }
}

/// The dense bottom solve, identical on every rank.
#[derive(Debug)]
struct Bottom {
    /// Lower Cholesky factor, row-major `m x m`.
    chol: Vec<f64>,
    m: usize,
    global: [usize; 3],
    /// Every rank's box on the bottom level, in rank order.
    boxes: Vec<IndexBox>,
}

impl Bottom {
    fn new(
        problem: &Poisson,
        lv: &Level,
        dec: &BlockDecomposition,
        size: usize,
    ) -> Result<Self, MgError> {
        let g = lv.global;
        let m = g[0] * g[1] * g[2];
        let idx = |p: [usize; 3]| (p[0] * g[1] + p[1]) * g[2] + p[2];
        let mut a = vec![0.0; m * m];
        for i in 0..g[0] {
            for j in 0..g[1] {
                for k in 0..g[2] {
                    let p = [i, j, k];
                    let row = idx(p);
                    for d in 0..3 {
                        for side in [-1isize, 1] {
                            let q = p[d] as isize + side;
                            if (q < 0 || q >= g[d] as isize) && problem.bc[d] == Boundary::Dirichlet
                            {
                                // Ghost = -u: this side adds 2/h² to the diagonal.
                                a[row * m + row] += 2.0 * lv.ih2[d];
                                continue;
                            }
                            let q = (q + g[d] as isize) as usize % g[d];
                            let mut pn = p;
                            pn[d] = q;
                            a[row * m + row] += lv.ih2[d];
                            a[row * m + idx(pn)] -= lv.ih2[d];
                        }
                    }
                }
            }
        }
        if problem.is_singular() {
            // A + s e eᵀ: the zero-mean solution for a zero-mean rhs.
            let dmax = (0..m).map(|r| a[r * m + r]).fold(0.0, f64::max);
            let sh = dmax.max(1.0) / m as f64;
            a.iter_mut().for_each(|x| *x += sh);
        }
        // Cholesky, in place, lower triangle.
        for j in 0..m {
            let mut d = a[j * m + j];
            for k in 0..j {
                d -= a[j * m + k] * a[j * m + k];
            }
            if d <= 0.0 {
                return Err(MgError::Invalid(format!(
                    "bottom matrix is not positive definite (pivot {j} = {d})"
                )));
            }
            let d = d.sqrt();
            a[j * m + j] = d;
            for i in j + 1..m {
                let mut v = a[i * m + j];
                for k in 0..j {
                    v -= a[i * m + k] * a[j * m + k];
                }
                a[i * m + j] = v / d;
            }
        }
        Ok(Bottom {
            chol: a,
            m,
            global: g,
            boxes: (0..size).map(|r| dec.box_of(r)).collect(),
        })
    }

    /// Solves `A u = f` on the bottom level: gathers `f` in global order,
    /// solves on every rank, keeps this rank's block.
    fn solve(&self, comm: &dyn Communicator, lv: &mut Level) -> Result<(), MgError> {
        let mine = lv.f.owned_values(0);
        let (all, counts) = comm.allgather_varying(&mine)?;
        let g = self.global;
        let mut b = vec![0.0; self.m];
        let mut off = 0;
        for (bx, &c) in self.boxes.iter().zip(&counts) {
            let mut t = off;
            for i in bx.lo[0]..bx.hi[0] {
                for j in bx.lo[1]..bx.hi[1] {
                    for k in bx.lo[2]..bx.hi[2] {
                        b[(i * g[1] + j) * g[2] + k] = all[t];
                        t += 1;
                    }
                }
            }
            off += c;
        }
        let (l, m) = (&self.chol, self.m);
        for i in 0..m {
            let mut v = b[i];
            for k in 0..i {
                v -= l[i * m + k] * b[k];
            }
            b[i] = v / l[i * m + i];
        }
        for i in (0..m).rev() {
            let mut v = b[i];
            for k in i + 1..m {
                v -= l[k * m + i] * b[k];
            }
            b[i] = v / l[i * m + i];
        }
        lv.zero_u();
        let lo = lv.lo;
        let owned = IndexBox {
            lo,
            hi: [0, 1, 2].map(|d| lo[d] + lv.n[d]),
        };
        lv.u.fill_owned(0, &owned, |[i, j, k]| b[(i * g[1] + j) * g[2] + k]);
        Ok(())
    }
}

/// A multigrid hierarchy for one [`Poisson`] problem on one decomposition.
#[derive(Debug)]
pub struct Hierarchy {
    problem: Poisson,
    opts: MgOptions,
    levels: Vec<Level>,
    bottom: Bottom,
    events: u64,
}

impl Hierarchy {
    /// The deepest hierarchy (number of levels, finest included) that
    /// `grid` allows for `shape`: coarsening by 2 while every rank's block
    /// is even and at least 2 on every axis.
    ///
    /// # Errors
    /// The decomposition's errors.
    pub fn max_levels(shape: [usize; 3], grid: ProcessGrid) -> Result<usize, MgError> {
        Ok(depth_check(shape, grid, usize::MAX)?.unwrap_err())
    }

    /// Builds the hierarchy collectively on `comm` with `levels` levels
    /// (finest included; `levels = 1` solves the fine grid densely).
    ///
    /// # Errors
    /// [`MgError::Depth`] if the depth is impossible on this decomposition
    /// (the same error on every rank), [`MgError::BottomTooLarge`],
    /// [`MgError::Invalid`] for zero levels, bad options or a grid whose
    /// periodicity differs from the boundary conditions, and the halo and
    /// communicator errors (for example a grid that does not match `comm`).
    pub fn new(
        comm: &dyn Communicator,
        grid: ProcessGrid,
        problem: &Poisson,
        levels: usize,
        opts: MgOptions,
    ) -> Result<Self, MgError> {
        if levels == 0 {
            return Err(MgError::Invalid(
                "the hierarchy needs at least 1 level, got 0".into(),
            ));
        }
        if !(opts.tol.is_finite() && opts.tol >= 0.0) {
            return Err(MgError::Invalid(format!(
                "tolerance {} must be finite and >= 0",
                opts.tol
            )));
        }
        if opts.pre_sweeps + opts.post_sweeps == 0 && levels > 1 {
            return Err(MgError::Invalid(
                "a V-cycle needs at least one pre- or post-sweep".into(),
            ));
        }
        if grid.periodic() != problem.periodic() {
            return Err(MgError::Invalid(format!(
                "process grid periodicity {:?} differs from the boundary conditions {:?}",
                grid.periodic(),
                problem.bc
            )));
        }
        if let Err(e) = depth_check(problem.shape, grid, levels)? {
            // Reachable only when fewer levels fit: depth_check returned the
            // failing level's details.
            return Err(e_depth(problem.shape, grid, levels, e)?);
        }
        let mut lvls = Vec::with_capacity(levels);
        let mut shape = problem.shape;
        let mut h = problem.h();
        let mut last_dec = None;
        for l in 0..levels {
            if l > 0 {
                shape = shape.map(|x| x / 2);
                h = h.map(|x| 2.0 * x);
            }
            let dec = BlockDecomposition::new(shape, grid)?;
            lvls.push(Level::new(comm, problem, &dec, h)?);
            last_dec = Some(dec);
        }
        let bl = lvls.last().expect("levels >= 1");
        let cells: usize = bl.global.iter().product();
        if cells > opts.max_bottom_cells {
            return Err(MgError::BottomTooLarge {
                global: bl.global,
                cells,
                max: opts.max_bottom_cells,
            });
        }
        let bottom = Bottom::new(problem, bl, &last_dec.expect("levels >= 1"), comm.size())?;
        Ok(Hierarchy {
            problem: *problem,
            opts,
            levels: lvls,
            bottom,
            events: 0,
        })
    }

    /// The problem.
    pub fn problem(&self) -> &Poisson {
        &self.problem
    }

    /// The options.
    pub fn options(&self) -> &MgOptions {
        &self.opts
    }

    /// Sets the options (the depth and bottom limit are fixed at build time).
    pub fn set_options(&mut self, opts: MgOptions) {
        self.opts = opts;
    }

    /// Number of levels, finest included.
    pub fn num_levels(&self) -> usize {
        self.levels.len()
    }

    /// Global shape of every level, finest first.
    pub fn level_shapes(&self) -> Vec<[usize; 3]> {
        self.levels.iter().map(|l| l.global).collect()
    }

    /// The fine-level topology (faces, ghost width 1).
    pub fn topology(&self) -> &Topology {
        &self.levels[0].topo
    }

    /// The global box this rank owns on the fine level.
    pub fn owned(&self) -> IndexBox {
        self.levels[0].topo.owned()
    }

    /// The layout the solution and right-hand side fields must have.
    pub fn layout(&self) -> FieldLayout {
        self.levels[0].layout
    }

    /// A zero field with [`layout`](Self::layout).
    pub fn new_field(&self) -> Field {
        Field::new(self.layout())
    }

    /// Halo exchanges performed since the hierarchy was built.
    pub fn halo_events(&self) -> u64 {
        self.events
    }

    fn check(&self, what: &str, f: &Field) -> Result<(), MgError> {
        if f.layout() != self.layout() {
            return Err(MgError::Invalid(format!(
                "{what} has layout {:?}, the hierarchy needs {:?} (use Hierarchy::new_field)",
                f.layout(),
                self.layout()
            )));
        }
        Ok(())
    }

    /// One V-cycle for `A u = f`, improving `u` in place (collective).
    ///
    /// # Errors
    /// [`MgError::Invalid`] for fields of the wrong layout; communication
    /// errors.
    pub fn vcycle(
        &mut self,
        comm: &dyn Communicator,
        u: &mut Field,
        f: &Field,
    ) -> Result<(), MgError> {
        self.check("u", u)?;
        self.check("f", f)?;
        self.levels[0]
            .u
            .as_mut_slice()
            .copy_from_slice(u.as_slice());
        self.levels[0]
            .f
            .as_mut_slice()
            .copy_from_slice(f.as_slice());
        self.cycle(comm, 0)?;
        u.as_mut_slice()
            .copy_from_slice(self.levels[0].u.as_slice());
        Ok(())
    }

    /// The recursive V-cycle on level `l` (`levels[l].u` is the initial
    /// guess, `levels[l].f` the rhs).
    fn cycle(&mut self, comm: &dyn Communicator, l: usize) -> Result<(), MgError> {
        let mut ev = 0u64;
        if l + 1 == self.levels.len() {
            self.bottom.solve(comm, &mut self.levels[l])?;
            return Ok(());
        }
        let (pre, post, omega) = (self.opts.pre_sweeps, self.opts.post_sweeps, self.opts.omega);
        {
            let lv = &mut self.levels[l];
            for _ in 0..pre {
                for c in [0, 1] {
                    lv.exchange_u(comm, &mut ev)?;
                    lv.smooth_colour(c, omega);
                }
            }
            lv.exchange_u(comm, &mut ev)?;
            lv.residual();
        }
        {
            let (fine, coarse) = self.levels.split_at_mut(l + 1);
            restrict(&fine[l], &mut coarse[0]);
            coarse[0].zero_u();
        }
        self.events += ev;
        ev = 0;
        self.cycle(comm, l + 1)?;
        {
            let (fine, coarse) = self.levels.split_at_mut(l + 1);
            let c = &mut coarse[0];
            ev += 1;
            c.ex_full.exchange(comm, &mut [&mut c.u])?;
            c.reflect_dirichlet();
            prolong_add(c, &mut fine[l]);
            let lv = &mut fine[l];
            for _ in 0..post {
                for c in [1, 0] {
                    lv.exchange_u(comm, &mut ev)?;
                    lv.smooth_colour(c, omega);
                }
            }
        }
        self.events += ev;
        Ok(())
    }

    /// Removes the global mean of the owned values (reproducible).
    fn remove_mean(&self, comm: &dyn Communicator, x: &mut Field) -> Result<(), MgError> {
        let mut acc = ExactSum::new();
        for_owned(&self.layout(), |i| acc.add(x.as_slice()[i]));
        let s = allreduce_exact_sums(comm, &[acc])?[0];
        let n: usize = self.problem.shape.iter().product();
        let mean = s / n as f64;
        let lay = self.layout();
        let xs = x.as_mut_slice();
        for_owned(&lay, |i| xs[i] -= mean);
        Ok(())
    }

    /// `r = f - A u` on the fine level; returns the exact global `||r||²`.
    fn fine_residual(
        &mut self,
        comm: &dyn Communicator,
        u: &Field,
        f: &Field,
        r: &mut Field,
    ) -> Result<f64, MgError> {
        let lv = &mut self.levels[0];
        lv.u.as_mut_slice().copy_from_slice(u.as_slice());
        lv.f.as_mut_slice().copy_from_slice(f.as_slice());
        self.events += 1;
        lv.ex.exchange(comm, &mut [&mut lv.u])?;
        lv.residual();
        r.as_mut_slice().copy_from_slice(lv.r.as_slice());
        let lay = lv.layout;
        let mut acc = ExactSum::new();
        let rs = r.as_slice();
        for_owned(&lay, |i| acc.add(rs[i] * rs[i]));
        Ok(allreduce_exact_sums(comm, &[acc])?[0])
    }

    fn norm2(&self, comm: &dyn Communicator, x: &Field) -> Result<f64, MgError> {
        let mut acc = ExactSum::new();
        let xs = x.as_slice();
        for_owned(&self.layout(), |i| acc.add(xs[i] * xs[i]));
        Ok(allreduce_exact_sums(comm, &[acc])?[0])
    }

    /// The right-hand side actually solved: `f`, minus its mean when the
    /// problem is singular (all axes periodic).
    fn effective_rhs(&self, comm: &dyn Communicator, f: &Field) -> Result<Field, MgError> {
        let mut b = f.clone();
        if self.problem.is_singular() {
            self.remove_mean(comm, &mut b)?;
        }
        Ok(b)
    }

    /// V-cycles from the initial guess `u` until `||f - A u|| <= tol ||f||`
    /// (collective). For a singular (all-periodic) problem the mean of `f`
    /// is removed first and the returned `u` has zero mean.
    ///
    /// # Errors
    /// [`MgError::Invalid`] for fields of the wrong layout; communication
    /// errors. Not converging within `max_iter` is reported in the
    /// [`SolveReport`], not as an error.
    pub fn solve_mg(
        &mut self,
        comm: &dyn Communicator,
        u: &mut Field,
        f: &Field,
    ) -> Result<SolveReport, MgError> {
        self.check("u", u)?;
        self.check("f", f)?;
        let start = self.events;
        let b = self.effective_rhs(comm, f)?;
        let bn = self.norm2(comm, &b)?.sqrt();
        let scale = if bn > 0.0 { bn } else { 1.0 };
        let mut r = self.new_field();
        let mut res = vec![self.fine_residual(comm, u, &b, &mut r)?.sqrt() / scale];
        let mut it = 0;
        while res[it] > self.opts.tol && it < self.opts.max_iter {
            self.vcycle(comm, u, &b)?;
            if self.problem.is_singular() {
                self.remove_mean(comm, u)?;
            }
            it += 1;
            res.push(self.fine_residual(comm, u, &b, &mut r)?.sqrt() / scale);
        }
        Ok(SolveReport {
            iterations: it,
            converged: res[it] <= self.opts.tol,
            residuals: res,
            halo_events: self.events - start,
        })
    }

    /// Conjugate gradients preconditioned by one V-cycle (zero initial
    /// guess, `pre_sweeps` red-black sweeps going down, `post_sweeps`
    /// black-red sweeps coming up) from the initial guess `u`, until
    /// `||f - A u|| <= tol ||f||` (collective). Dot products use the exact
    /// reproducible reduction; β uses the flexible (Polak-Ribière) form
    /// `(z, r - r_old) / (z_old, r_old)`, which is robust to the small
    /// non-symmetry of average restriction with trilinear prolongation.
    ///
    /// # Errors
    /// As [`solve_mg`](Self::solve_mg).
    pub fn solve_pcg(
        &mut self,
        comm: &dyn Communicator,
        u: &mut Field,
        f: &Field,
    ) -> Result<SolveReport, MgError> {
        self.check("u", u)?;
        self.check("f", f)?;
        let start = self.events;
        let singular = self.problem.is_singular();
        let lay = self.layout();
        let b = self.effective_rhs(comm, f)?;
        let bn = self.norm2(comm, &b)?.sqrt();
        let scale = if bn > 0.0 { bn } else { 1.0 };
        let mut r = self.new_field();
        let mut res = vec![self.fine_residual(comm, u, &b, &mut r)?.sqrt() / scale];
        let mut z = self.new_field();
        let mut p = self.new_field();
        let mut q = self.new_field();
        let mut r_old = self.new_field();
        let mut it = 0;
        if res[0] > self.opts.tol {
            self.precondition(comm, &r, &mut z)?;
            p.as_mut_slice().copy_from_slice(z.as_slice());
            let mut rz = dot_all(comm, &lay, &[(&r, &z)])?[0];
            while it < self.opts.max_iter {
                // q = A p
                {
                    let lv = &mut self.levels[0];
                    lv.u.as_mut_slice().copy_from_slice(p.as_slice());
                    lv.f.as_mut_slice().fill(0.0);
                    self.events += 1;
                    lv.ex.exchange(comm, &mut [&mut lv.u])?;
                    lv.residual();
                    let qs = q.as_mut_slice();
                    let rs = lv.r.as_slice();
                    for_owned(&lay, |i| qs[i] = -rs[i]);
                }
                let pq = dot_all(comm, &lay, &[(&p, &q)])?[0];
                if pq <= 0.0 || !pq.is_finite() {
                    break;
                }
                let alpha = rz / pq;
                r_old.as_mut_slice().copy_from_slice(r.as_slice());
                {
                    let (us, ps, rs, qs) = (
                        u.as_mut_slice(),
                        p.as_slice(),
                        r.as_mut_slice(),
                        q.as_slice(),
                    );
                    for_owned(&lay, |i| {
                        us[i] += alpha * ps[i];
                        rs[i] -= alpha * qs[i];
                    });
                }
                it += 1;
                let rr = dot_all(comm, &lay, &[(&r, &r)])?[0];
                res.push(rr.sqrt() / scale);
                if res[it] <= self.opts.tol {
                    break;
                }
                self.precondition(comm, &r, &mut z)?;
                let d = dot_all(comm, &lay, &[(&z, &r), (&z, &r_old)])?;
                let beta = (d[0] - d[1]) / rz;
                rz = d[0];
                let (ps, zs) = (p.as_mut_slice(), z.as_slice());
                for_owned(&lay, |i| ps[i] = zs[i] + beta * ps[i]);
            }
        }
        if singular {
            self.remove_mean(comm, u)?;
        }
        Ok(SolveReport {
            iterations: it,
            converged: res[it] <= self.opts.tol,
            residuals: res,
            halo_events: self.events - start,
        })
    }

    /// `z = M r`: one V-cycle from zero.
    fn precondition(
        &mut self,
        comm: &dyn Communicator,
        r: &Field,
        z: &mut Field,
    ) -> Result<(), MgError> {
        let lv = &mut self.levels[0];
        lv.zero_u();
        lv.f.as_mut_slice().copy_from_slice(r.as_slice());
        self.cycle(comm, 0)?;
        z.as_mut_slice()
            .copy_from_slice(self.levels[0].u.as_slice());
        if self.problem.is_singular() {
            self.remove_mean(comm, z)?;
        }
        Ok(())
    }
}

/// Exact global dot products of pairs of fields over the owned cells, in one
/// reduction.
fn dot_all(
    comm: &dyn Communicator,
    lay: &FieldLayout,
    pairs: &[(&Field, &Field)],
) -> Result<Vec<f64>, MgError> {
    let accs: Vec<ExactSum> = pairs
        .iter()
        .map(|(a, b)| {
            let (a, b) = (a.as_slice(), b.as_slice());
            let mut acc = ExactSum::new();
            for_owned(lay, |i| acc.add(a[i] * b[i]));
            acc
        })
        .collect();
    Ok(allreduce_exact_sums(comm, &accs)?)
}

/// Calls `f` with the linear index of every owned cell.
fn for_owned(lay: &FieldLayout, mut f: impl FnMut(usize)) {
    let r = lay.owned_region();
    let s = lay.strides();
    for i in r.lo[0]..r.hi[0] {
        for j in r.lo[1]..r.hi[1] {
            let o = i * s[0] + j * s[1];
            for k in r.lo[2]..r.hi[2] {
                f(o + k);
            }
        }
    }
}

/// `coarse.f` = 8-cell average of `fine.r`.
fn restrict(fine: &Level, coarse: &mut Level) {
    let sf = fine.layout.strides();
    let sc = coarse.layout.strides();
    let r = fine.r.as_slice();
    let f = coarse.f.as_mut_slice();
    let [n0, n1, n2] = coarse.n;
    for i in 0..n0 {
        for j in 0..n1 {
            for k in 0..n2 {
                let x = (2 * i + 1) * sf[0] + (2 * j + 1) * sf[1] + 2 * k + 1;
                let a = (r[x] + r[x + 1]) + (r[x + sf[1]] + r[x + sf[1] + 1]);
                let b = (r[x + sf[0]] + r[x + sf[0] + 1])
                    + (r[x + sf[0] + sf[1]] + r[x + sf[0] + sf[1] + 1]);
                f[(i + 1) * sc[0] + (j + 1) * sc[1] + k + 1] = 0.125 * (a + b);
            }
        }
    }
}

/// `fine.u += P coarse.u` (trilinear; `coarse.u`'s ghosts, edges and corners
/// included, must be current).
fn prolong_add(coarse: &Level, fine: &mut Level) {
    const W: [f64; 4] = [27.0 / 64.0, 9.0 / 64.0, 3.0 / 64.0, 1.0 / 64.0];
    let sf = fine.layout.strides();
    let sc = coarse.layout.strides();
    let c = coarse.u.as_slice();
    let u = fine.u.as_mut_slice();
    let [n0, n1, n2] = fine.n;
    for i in 0..n0 {
        let di = if i % 2 == 0 {
            -(sc[0] as isize)
        } else {
            sc[0] as isize
        };
        for j in 0..n1 {
            let dj = if j % 2 == 0 {
                -(sc[1] as isize)
            } else {
                sc[1] as isize
            };
            for k in 0..n2 {
                let dk: isize = if k % 2 == 0 { -1 } else { 1 };
                let x = ((i / 2 + 1) * sc[0] + (j / 2 + 1) * sc[1] + k / 2 + 1) as isize;
                let at = |o: isize| c[(x + o) as usize];
                let v = W[0] * at(0)
                    + W[1] * (at(di) + at(dj) + at(dk))
                    + W[2] * (at(di + dj) + at(di + dk) + at(dj + dk))
                    + W[3] * at(di + dj + dk);
                u[(i + 1) * sf[0] + (j + 1) * sf[1] + k + 1] += v;
            }
        }
    }
}

/// Checks that `levels` levels fit: `Ok(Ok(()))`, or `Ok(Err(max_levels))`
/// when they do not.
fn depth_check(
    shape: [usize; 3],
    grid: ProcessGrid,
    levels: usize,
) -> Result<Result<(), usize>, MgError> {
    let mut s = shape;
    let mut l = 1;
    loop {
        if l >= levels {
            return Ok(Ok(()));
        }
        let dec = BlockDecomposition::new(s, grid)?;
        let ok =
            (0..grid.size()).all(|r| dec.box_of(r).shape().iter().all(|&e| e >= 2 && e % 2 == 0));
        if !ok {
            return Ok(Err(l));
        }
        s = s.map(|x| x / 2);
        l += 1;
    }
}

/// The depth error for the level that cannot be coarsened.
fn e_depth(
    shape: [usize; 3],
    grid: ProcessGrid,
    _levels: usize,
    max_levels: usize,
) -> Result<MgError, MgError> {
    let level = max_levels - 1;
    let global = shape.map(|x| x >> level);
    let dec = BlockDecomposition::new(global, grid)?;
    for rank in 0..grid.size() {
        let sh = dec.box_of(rank).shape();
        if let Some(axis) = (0..3).find(|&d| sh[d] < 2 || sh[d] % 2 != 0) {
            return Ok(MgError::Depth {
                level,
                global,
                rank,
                axis,
                extent: sh[axis],
                max_levels,
            });
        }
    }
    Err(MgError::Invalid("internal: depth check disagrees".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_levels_counts_halvings() {
        let g = ProcessGrid::new([1, 1, 1], [true; 3]).unwrap();
        assert_eq!(Hierarchy::max_levels([16, 16, 16], g).unwrap(), 5);
        assert_eq!(Hierarchy::max_levels([12, 16, 16], g).unwrap(), 3);
        let g = ProcessGrid::new([2, 1, 1], [true; 3]).unwrap();
        assert_eq!(Hierarchy::max_levels([16, 16, 16], g).unwrap(), 4);
    }
}
