//! The hierarchy: levels, their decompositions, the V-cycle and the solvers.

use crate::bottom::Bottom;
use crate::coef::{self, BoxCoef, Coefficients};
use crate::dot::Acc;
use crate::level::{self, BoxGeom, Stencil};
use crate::problem::{self, Boundary, Poisson};
use crate::transfer;
use crate::{LevelStats, MgError, MgOptions, SolveReport};
use comm::exact::{allreduce_exact_sums, ExactSum};
use comm::{
    BlockDecomposition, CommExt, Communicator, IndexBox, ProcessGrid, Redistribution, ReduceOp,
};
use halo::{Exchanger, Field, FieldLayout, HaloSpec, Neighborhood, Region, Topology};
use simd::Isa;
use std::time::Instant;

/// A blocking halo exchange of `u`, counted and timed in `st`.
fn exchange_timed(
    ex: &mut Exchanger<f64>,
    comm: &dyn Communicator,
    u: &mut Field,
    st: &mut LevelStats,
) -> Result<(), MgError> {
    let t = Instant::now();
    st.halo_events += 1;
    ex.exchange(comm, &mut [u])?;
    st.halo_s += t.elapsed().as_secs_f64();
    Ok(())
}

/// Channels of the exchangers (one communicator may carry several levels'
/// messages; each kind gets its own channel).
const CH_FACES: u16 = 0;
const CH_CHILD: u16 = 1;
const CH_CA: u16 = 2;
const CH_CA_F: u16 = 3;

/// The coarser level laid out on this level's ranks: where restriction
/// writes and prolongation reads.
#[derive(Debug)]
struct Child {
    geom: BoxGeom,
    layout: FieldLayout,
    ex_full: Exchanger<f64>,
    /// Every rank's box (on this level's ranks).
    boxes: Vec<IndexBox>,
    f: Field,
    u: Field,
    /// When the next level lives on fewer ranks: the gather of `f` onto
    /// them and the scatter of their `u` back, planned on first use.
    transfers: Option<(Redistribution<f64>, Redistribution<f64>)>,
}

/// This rank's part of one level.
#[derive(Debug)]
struct Work {
    geom: BoxGeom,
    layout: FieldLayout,
    stencil: Stencil,
    /// Faces, width 1.
    ex: Exchanger<f64>,
    /// Communication-avoiding exchangers (full neighbourhood, width 2): `u`,
    /// and `u` with `f`.
    ca: Option<(Exchanger<f64>, Exchanger<f64>)>,
    /// Owned cells reading no ghost in flight (1-cell stencil).
    interior: Region,
    /// Owned cells plus a 1-cell ring on every side with a neighbour.
    grown: Region,
    u: Field,
    f: Field,
    /// Four fine rows of the residual (fused residual and restriction).
    scratch: Vec<f64>,
    /// The row kernels' instruction set.
    simd: Isa,
    /// Whether `f`'s ghost ring is current (communication-avoiding mode).
    f_ghosts: bool,
    /// No neighbour on any side (one rank, no periodic axis): exchanges
    /// move nothing.
    isolated: bool,
    child: Option<Child>,
}

/// One level: its global shape, ranks and (on member ranks) its data.
#[derive(Debug)]
struct Level {
    global: [usize; 3],
    /// Communicator: 0 = the caller's, `k` = `subs[k - 1]`.
    group: usize,
    boxes: Vec<IndexBox>,
    work: Option<Work>,
    stats: LevelStats,
}

/// The most fine-level work fields [`Hierarchy::solve_pcg`] takes (see
/// [`Hierarchy::reserve_fields`]): the residual, the preconditioned
/// residual, the direction, its image, the previous residual and, for a
/// singular problem, the right-hand side less its mean.
pub const PCG_FIELDS: usize = 6;

/// The most fine-level work fields [`Hierarchy::solve_mg`] takes: the
/// residual and, for a singular problem, the right-hand side less its
/// mean.
pub const MG_FIELDS: usize = 2;

/// A multigrid hierarchy for one [`Poisson`] problem on one decomposition.
///
/// Every method taking a communicator must be given the communicator the
/// hierarchy was built on.
pub struct Hierarchy {
    problem: Poisson,
    /// The fine coefficients of this rank's wall faces
    /// ([`add_boundary_values`](Self::add_boundary_values)).
    walls: WallFaces,
    opts: MgOptions,
    /// Smoothing levels (all levels but the bottom; the fine level alone
    /// when the hierarchy has one level).
    levels: Vec<Level>,
    nlevels: usize,
    bottom: Option<Bottom>,
    bottom_stats: LevelStats,
    subs: Vec<Box<dyn Communicator>>,
    rank: usize,
    /// The row kernels' and exact sums' instruction set.
    simd: Isa,
    /// Fine-level work fields of the solvers, kept between calls (fresh
    /// 2^k-byte allocations would be page-faulted in on every solve).
    spare: Vec<Field>,
    /// Seconds inside V-cycles (with the preconditioner's zero start).
    vcycle_s: f64,
}

impl std::fmt::Debug for Hierarchy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hierarchy")
            .field("problem", &self.problem)
            .field("opts", &self.opts)
            .field("levels", &self.level_stats())
            .field("sub_communicators", &self.subs.len())
            .finish()
    }
}

fn comm_of<'a>(
    outer: &'a dyn Communicator,
    subs: &'a [Box<dyn Communicator>],
    group: usize,
) -> &'a dyn Communicator {
    if group == 0 {
        outer
    } else {
        subs[group - 1].as_ref()
    }
}

/// Whether every block of `shape` on `grid` is even and at least 2.
fn even_blocks(
    shape: [usize; 3],
    grid: ProcessGrid,
) -> Result<Option<(usize, usize, usize)>, MgError> {
    let dec = BlockDecomposition::new(shape, grid)?;
    for r in 0..grid.size() {
        let s = dec.box_of(r).shape();
        if let Some(d) = (0..3).find(|&d| s[d] < 2 || s[d] % 2 != 0) {
            return Ok(Some((r, d, s[d])));
        }
    }
    Ok(None)
}

/// What every rank learns of the fine coefficients.
#[derive(Debug, Clone, Copy)]
struct Found {
    /// Some face is closed.
    closed: bool,
    /// Every cell has a positive shift.
    all_shifted: bool,
}

/// Checks the fine coefficients collectively, each rank those of its own
/// block ([`problem::scan`]), that every rank gave the same kinds (faces,
/// shift), then that a shift fixes the constant
/// ([`Poisson::check_shift_fixes`]). Every rank returns the same result:
/// the lowest failing rank's error, or what was found.
fn check_coefficients(
    comm: &dyn Communicator,
    problem: &Poisson,
    fine: &BoxCoef,
) -> Result<Found, MgError> {
    let scan = problem::scan(fine);
    let found = scan.as_ref().copied().unwrap_or_default();
    agree(comm, scan.map(|_| ()))?;
    let kinds = [
        i64::from(fine.faces.is_some()),
        i64::from(fine.shift.is_some()),
    ];
    let mut any = [
        i64::from(found.positive_shift),
        i64::from(found.closed),
        kinds[0],
        kinds[1],
    ];
    comm.allreduce_i64(&mut any, ReduceOp::Max)?;
    let mut all = [i64::from(found.all_shifted), kinds[0], kinds[1]];
    comm.allreduce_i64(&mut all, ReduceOp::Min)?;
    if any[2] != all[1] || any[3] != all[2] {
        return Err(MgError::Invalid(format!(
            "the ranks gave different kinds of coefficients: face coefficients on {} ranks,              a shift on {} (rank {} gave faces: {}, shift: {}); every rank must give the same",
            if any[2] == 0 { "no" } else if all[1] == 0 { "some" } else { "all" },
            if any[3] == 0 { "no" } else if all[2] == 0 { "some" } else { "all" },
            comm.rank(),
            kinds[0] != 0,
            kinds[1] != 0
        )));
    }
    problem.check_shift_fixes(any[0] != 0)?;
    Ok(Found {
        closed: any[1] != 0,
        all_shifted: all[0] != 0,
    })
}

/// One outcome on every rank (collective): `Ok` where every rank's
/// `local` is, else the error of the lowest rank whose `local` failed
/// ([`comm::agree`]), as [`MgError::Invalid`] with that rank's message on
/// the others.
fn agree(comm: &dyn Communicator, local: Result<(), MgError>) -> Result<(), MgError> {
    comm::agree(comm, local).map_err(|e| match e {
        comm::Agreed::Mine(e) => e,
        comm::Agreed::Other { message, .. } => MgError::Invalid(message),
        comm::Agreed::Comm(e) => e.into(),
    })
}

/// The grid a coarse smoothing level runs on, given its parent's.
fn coarse_grid(shape: [usize; 3], parent: ProcessGrid, below: usize) -> ProcessGrid {
    let cells: usize = shape.iter().product();
    let ok = |g: ProcessGrid| {
        matches!(even_blocks(shape, g), Ok(None)) && (cells / g.size() >= below || g.size() == 1)
    };
    if ok(parent) {
        return parent;
    }
    for p in (1..parent.size()).rev() {
        if let Ok(g) = ProcessGrid::for_shape(shape, p, parent.periodic()) {
            if ok(g) {
                return g;
            }
        }
    }
    ProcessGrid::new([1, 1, 1], parent.periodic()).expect("a 1x1x1 grid is valid")
}

fn boxes_of(dec: &BlockDecomposition, p: usize) -> Vec<IndexBox> {
    (0..p).map(|r| dec.box_of(r)).collect()
}

/// The fine coefficients of the wall faces of one rank's block (the
/// planes where it reaches a non-periodic wall), for
/// [`Hierarchy::add_boundary_values`].
#[derive(Debug, Default)]
struct WallFaces {
    /// `[axis][side]`: the plane of faces and their coefficients (none
    /// where the block does not reach that wall or every face is 1).
    planes: [[Option<WallPlane>; 2]; 3],
}

/// One wall's plane of faces (global face indices) and their coefficients.
type WallPlane = (IndexBox, Vec<f64>);

impl WallFaces {
    fn new(c: &BoxCoef) -> Self {
        let mut w = WallFaces::default();
        if c.faces.is_none() {
            return w;
        }
        for d in 0..3 {
            if c.periodic[d] {
                continue;
            }
            for side in 0..2 {
                let at = if side == 0 { 0 } else { c.global[d] };
                let mut b = c.face_box(d);
                if b.is_empty() || at < b.lo[d] || at >= b.hi[d] {
                    continue;
                }
                b.lo[d] = at;
                b.hi[d] = at + 1;
                let mut v = Vec::with_capacity(b.len());
                for i in b.lo[0]..b.hi[0] {
                    for j in b.lo[1]..b.hi[1] {
                        for k in b.lo[2]..b.hi[2] {
                            v.push(c.face(d, [i, j, k]));
                        }
                    }
                }
                w.planes[d][side] = Some((b, v));
            }
        }
        w
    }

    /// The coefficient of wall face `p` (global face index) along `d` on
    /// `side` (1 where the faces are all 1).
    fn get(&self, d: usize, side: usize, p: [usize; 3]) -> f64 {
        match &self.planes[d][side] {
            None => 1.0,
            Some((b, v)) => {
                let s = b.shape();
                v[((p[0] - b.lo[0]) * s[1] + (p[1] - b.lo[1])) * s[2] + (p[2] - b.lo[2])]
            }
        }
    }
}

impl Hierarchy {
    /// The deepest hierarchy (number of levels, finest included) the global
    /// `shape` allows: halving while every extent is even.
    pub fn max_levels(shape: [usize; 3]) -> usize {
        let mut s = shape;
        let mut l = 1;
        while s.iter().all(|&x| x >= 2 && x % 2 == 0) {
            s = s.map(|x| x / 2);
            l += 1;
        }
        l
    }

    /// Builds the hierarchy collectively on `comm` with `levels` levels
    /// (finest included; `levels = 1` solves the fine grid densely).
    ///
    /// # Errors
    /// [`MgError::Depth`] if the global shape cannot be halved that often,
    /// [`MgError::Decomposition`] if a fine block is odd,
    /// [`MgError::BottomTooLarge`], [`MgError::Invalid`] for zero levels,
    /// bad options, bad face coefficients or a grid whose periodicity
    /// differs from the boundary conditions, and the halo and communicator
    /// errors (for example a grid that does not match `comm`). All ranks
    /// return the same error.
    ///
    /// The coefficient functions of `problem`, if any, are evaluated once
    /// over this rank's block ([`Poisson::coefficients_on`]); the solver
    /// reads only those arrays and what it derives from them
    /// ([`with_coefficients`](Self::with_coefficients)).
    pub fn new(
        comm: &dyn Communicator,
        grid: ProcessGrid,
        problem: &Poisson,
        levels: usize,
        opts: MgOptions,
    ) -> Result<Self, MgError> {
        Self::build(comm, grid, problem, levels, opts, None)
    }

    /// The block of fine cells rank `rank` owns on `grid` (global indices):
    /// the cells whose coefficients it gives to
    /// [`with_coefficients`](Self::with_coefficients).
    ///
    /// # Errors
    /// [`MgError::Comm`] where `grid` cannot decompose `shape` or `rank` is
    /// not one of its ranks.
    pub fn fine_block(
        shape: [usize; 3],
        grid: ProcessGrid,
        rank: usize,
    ) -> Result<IndexBox, MgError> {
        if rank >= grid.size() {
            return Err(MgError::Invalid(format!(
                "rank {rank} is not one of the {} ranks of the process grid",
                grid.size()
            )));
        }
        Ok(BlockDecomposition::new(shape, grid)?.box_of(rank))
    }

    /// Builds the hierarchy collectively, as [`new`](Self::new), with the
    /// fine level's coefficients given as data: this rank's `coefficients`
    /// over its block [`fine_block`](Self::fine_block) (see
    /// [`Coefficients`] for the layout). Each rank holds only its block's
    /// coefficients: the coarse levels' are averaged from the finer
    /// level's on the same rank (moved with the level where it is gathered
    /// onto fewer ranks), the ghost cells' weights come from their owners
    /// by a halo exchange, and the bottom level's are gathered onto the
    /// ranks that solve it. Same bits as [`new`](Self::new) with functions
    /// that give the same values.
    ///
    /// # Errors
    /// As [`new`](Self::new), and [`MgError::Invalid`] where `problem` has
    /// coefficient functions as well, where an array's length does not
    /// match the block (naming the axis and both lengths), or where the
    /// ranks give different kinds of coefficients (faces on some, not on
    /// others).
    pub fn with_coefficients(
        comm: &dyn Communicator,
        grid: ProcessGrid,
        problem: &Poisson,
        levels: usize,
        opts: MgOptions,
        coefficients: Coefficients,
    ) -> Result<Self, MgError> {
        if problem.has_functions() {
            return Err(MgError::Invalid(
                "the problem has coefficient functions (with_coefficient or with_shift) and \
                 coefficients were given as data too: give them one way"
                    .into(),
            ));
        }
        Self::build(comm, grid, problem, levels, opts, Some(coefficients))
    }

    fn build(
        comm: &dyn Communicator,
        grid: ProcessGrid,
        problem: &Poisson,
        levels: usize,
        opts: MgOptions,
        data: Option<Coefficients>,
    ) -> Result<Self, MgError> {
        if levels == 0 {
            return Err(MgError::Invalid(
                "the hierarchy needs at least 1 level, got 0".into(),
            ));
        }
        check_options(&opts)?;
        if opts.pre_sweeps + opts.post_sweeps == 0 && levels > 1 {
            return Err(MgError::Invalid(
                "a V-cycle needs at least one pre- or post-sweep".into(),
            ));
        }
        if grid.periodic() != problem.periodic() {
            return Err(MgError::Invalid(format!(
                "process grid periodicity {:?} differs from the boundary conditions {:?}",
                grid.periodic(),
                problem.faces()
            )));
        }
        if grid.size() != comm.size() {
            return Err(MgError::Invalid(format!(
                "the process grid has {} ranks, the communicator {}",
                grid.size(),
                comm.size()
            )));
        }
        let own = BlockDecomposition::new(problem.shape, grid)?.box_of(comm.rank());
        let data = match data {
            Some(d) => d,
            None => problem.coefficients_on(&own),
        };
        // From here on the problem is its shape, box and conditions, and
        // whether it has faces and a shift: the solver reads the data.
        let problem = &problem.with_data(&data);
        let fine = BoxCoef::fine(problem, own, data);
        agree(comm, fine.as_ref().map(|_| ()).map_err(Clone::clone))?;
        let fine = fine?;
        let found = check_coefficients(comm, problem, &fine)?;
        let max_levels = Self::max_levels(problem.shape);
        let mut shapes = vec![problem.shape];
        for l in 1..levels {
            let s = shapes[l - 1];
            if let Some(axis) = (0..3).find(|&d| s[d] < 2 || s[d] % 2 != 0) {
                return Err(MgError::Depth {
                    level: l - 1,
                    global: s,
                    axis,
                    extent: s[axis],
                    max_levels,
                });
            }
            shapes.push(s.map(|x| x / 2));
        }
        let bshape = shapes[levels - 1];
        let cells: usize = bshape.iter().product();
        if cells > opts.max_bottom_cells {
            return Err(MgError::BottomTooLarge {
                global: bshape,
                cells,
                max: opts.max_bottom_cells,
            });
        }
        if levels > 1 {
            if let Some((rank, axis, extent)) = even_blocks(problem.shape, grid)? {
                return Err(MgError::Decomposition {
                    rank,
                    axis,
                    extent,
                    global: problem.shape,
                });
            }
        }
        // After the cheap checks of the shapes: a walk over the fine cells,
        // which needs all of them, on rank 0 (where a face is closed, the
        // problem is not declared singular and some cell has no positive
        // shift; otherwise no region can be left unfixed).
        if problem.has_variable_coefficient()
            && !problem.is_singular()
            && found.closed
            && !found.all_shifted
        {
            let dec = BlockDecomposition::new(problem.shape, grid)?;
            let bits = problem::open_bits(&fine);
            let whole = IndexBox::from_shape(problem.shape);
            let all = coef::move_boxes(comm, &boxes_of(&dec, grid.size()), Some(&bits), &[whole])?;
            let walk = if comm.rank() == 0 {
                problem.check_closed_regions(&all)
            } else {
                Ok(())
            };
            agree(comm, walk)?;
        }
        let nsmooth = (levels - 1).max(1);
        let mut grids = vec![grid];
        for l in 1..nsmooth {
            grids.push(coarse_grid(shapes[l], grids[l - 1], opts.agglomerate_below));
        }
        let me = comm.rank();
        let mut subs: Vec<Box<dyn Communicator>> = Vec::new();
        // Level l's communicator index on member ranks, None elsewhere.
        let mut groups: Vec<Option<usize>> = vec![Some(0)];
        for l in 1..nsmooth {
            let (p_old, p_new) = (grids[l - 1].size(), grids[l].size());
            let Some(parent_group) = groups[l - 1] else {
                groups.push(None);
                continue;
            };
            if p_new == p_old {
                groups.push(Some(parent_group));
                continue;
            }
            // Every member of the parent communicator takes part in the
            // split; the first p_new ranks form the new one.
            let parent = comm_of(comm, &subs, parent_group);
            match parent.split(if me < p_new { Some(0) } else { None }, me)? {
                Some(c) => {
                    subs.push(c);
                    groups.push(Some(subs.len()));
                }
                None => groups.push(None),
            }
        }
        let walls = WallFaces::new(&fine);
        let kind = (fine.faces.is_some(), fine.shift.is_some());
        let per = problem.periodic();
        // This level's coefficients on its member ranks; the bottom's,
        // the whole level, on the ranks that solve it.
        let mut coef = Some(fine);
        let mut bottom_coef = None;
        let mut lvls = Vec::with_capacity(nsmooth);
        for l in 0..nsmooth {
            let g = grids[l];
            let dec = BlockDecomposition::new(shapes[l], g)?;
            let boxes = boxes_of(&dec, g.size());
            let ca_wanted = if l == 0 {
                opts.comm_avoiding.fine
            } else {
                opts.comm_avoiding.coarse
            };
            let ca =
                ca_wanted && levels > 1 && boxes.iter().all(|b| b.shape().iter().all(|&e| e >= 4));
            let work = match groups[l] {
                None => None,
                Some(gr) => {
                    let c = comm_of(comm, &subs, gr);
                    let child = if levels > 1 {
                        Some((shapes[l + 1], g))
                    } else {
                        None
                    };
                    let here = coef
                        .as_ref()
                        .expect("member ranks hold their level's coefficients");
                    let w = Work::new(c, problem, l, &dec, ca, child, here)?;
                    // The coarser level's coefficients: averaged here,
                    // moved where that level lives on fewer ranks; the
                    // bottom's gathered whole onto this level's ranks.
                    if let Some(ch) = &w.child {
                        let cc = here.coarsen();
                        let cshape = shapes[l + 1];
                        coef = if l + 1 == nsmooth {
                            let whole = IndexBox::from_shape(cshape);
                            bottom_coef = BoxCoef::moved(
                                Some(&cc),
                                c,
                                kind,
                                (cshape, per),
                                &ch.boxes,
                                &vec![whole; c.size()],
                            )?;
                            None
                        } else if groups[l + 1] == groups[l] {
                            Some(cc)
                        } else {
                            let ndec = BlockDecomposition::new(cshape, grids[l + 1])?;
                            BoxCoef::moved(
                                Some(&cc),
                                c,
                                kind,
                                (cshape, per),
                                &ch.boxes,
                                &boxes_of(&ndec, grids[l + 1].size()),
                            )?
                        };
                    } else {
                        // One level: the bottom is the fine level.
                        let whole = IndexBox::from_shape(shapes[l]);
                        bottom_coef = BoxCoef::moved(
                            coef.as_ref(),
                            c,
                            kind,
                            (shapes[l], per),
                            &boxes,
                            &vec![whole; c.size()],
                        )?;
                    }
                    Some(w)
                }
            };
            lvls.push(Level {
                global: shapes[l],
                group: groups[l].unwrap_or(usize::MAX),
                boxes,
                work,
                stats: LevelStats {
                    global: shapes[l],
                    ranks: g.size(),
                    comm_avoiding: ca,
                    ..LevelStats::default()
                },
            });
        }
        // The bottom lives on the last smoothing level's ranks (as its
        // child), or is the fine level itself.
        // Its factorisation fails (a singular or indefinite operator) on
        // those ranks alone, which tell the others.
        let last = &lvls[nsmooth - 1];
        let bottom = match &last.work {
            None => Ok(None),
            Some(w) => {
                let boxes = match &w.child {
                    Some(c) => c.boxes.clone(),
                    None => last.boxes.clone(),
                };
                let whole = bottom_coef
                    .as_ref()
                    .expect("the bottom's ranks hold its coefficients");
                Bottom::new(problem, levels - 1, bshape, boxes, whole).map(Some)
            }
        };
        let (bottom, failed) = match bottom {
            Ok(b) => (b, Ok(())),
            Err(e) => (None, Err(e)),
        };
        agree(comm, failed)?;
        let bottom_stats = LevelStats {
            global: bshape,
            ranks: grids[nsmooth - 1].size(),
            ..LevelStats::default()
        };
        // Every page of the levels' fields written now (their allocation
        // maps pages without touching them): the faults land in the setup,
        // not in the first cycle. (Transfers between levels on different
        // ranks are still planned by the first cycle that needs them.)
        for w in lvls.iter_mut().filter_map(|l| l.work.as_mut()) {
            w.u.as_mut_slice().fill(0.0);
            w.f.as_mut_slice().fill(0.0);
            if let Some(c) = w.child.as_mut() {
                c.u.as_mut_slice().fill(0.0);
                c.f.as_mut_slice().fill(0.0);
            }
        }
        Ok(Hierarchy {
            problem: problem.clone(),
            walls,
            opts,
            levels: lvls,
            nlevels: levels,
            bottom,
            bottom_stats,
            subs,
            rank: me,
            simd: Isa::detect(),
            spare: Vec::new(),
            vcycle_s: 0.0,
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

    /// Changes the run-time options (sweeps, omega, tolerance, iteration
    /// limit, overlap).
    ///
    /// # Errors
    /// [`MgError::Invalid`] if a build-time option (`max_bottom_cells`,
    /// `comm_avoiding`, `agglomerate_below`) differs, or for invalid values.
    pub fn set_options(&mut self, opts: MgOptions) -> Result<(), MgError> {
        check_options(&opts)?;
        if opts.max_bottom_cells != self.opts.max_bottom_cells
            || opts.comm_avoiding != self.opts.comm_avoiding
            || opts.agglomerate_below != self.opts.agglomerate_below
        {
            return Err(MgError::Invalid(
                "max_bottom_cells, comm_avoiding and agglomerate_below are fixed when the hierarchy is built".into(),
            ));
        }
        if opts.pre_sweeps + opts.post_sweeps == 0 && self.nlevels > 1 {
            return Err(MgError::Invalid(
                "a V-cycle needs at least one pre- or post-sweep".into(),
            ));
        }
        self.opts = opts;
        Ok(())
    }

    /// Number of levels, finest and bottom included.
    pub fn num_levels(&self) -> usize {
        self.nlevels
    }

    /// Global shape of every level, finest first.
    pub fn level_shapes(&self) -> Vec<[usize; 3]> {
        let mut v: Vec<[usize; 3]> = self.levels.iter().map(|l| l.global).collect();
        if self.nlevels > 1 {
            v.push(self.bottom_stats.global);
        }
        v
    }

    /// Number of ranks holding each level, finest first (the bottom is
    /// solved on the ranks of the level above it).
    pub fn level_ranks(&self) -> Vec<usize> {
        self.level_stats().iter().map(|s| s.ranks).collect()
    }

    /// Time and exchanges per level on this rank, finest first, the bottom
    /// last (its `coarse_s` is the dense solve).
    pub fn level_stats(&self) -> Vec<LevelStats> {
        let mut v: Vec<LevelStats> = self.levels.iter().map(|l| l.stats).collect();
        if self.nlevels > 1 {
            v.push(self.bottom_stats);
        } else {
            v[0].coarse_s += self.bottom_stats.coarse_s;
        }
        v
    }

    /// Seconds this rank spent inside V-cycles (those of
    /// [`vcycle`](Self::vcycle), [`solve_mg`](Self::solve_mg) and the
    /// preconditioner of [`solve_pcg`](Self::solve_pcg), whose zero initial
    /// guess is included) since the hierarchy was built or the statistics
    /// were reset.
    pub fn vcycle_seconds(&self) -> f64 {
        self.vcycle_s
    }

    /// Zeroes the statistics.
    pub fn reset_stats(&mut self) {
        self.vcycle_s = 0.0;
        for l in &mut self.levels {
            l.stats = LevelStats {
                global: l.stats.global,
                ranks: l.stats.ranks,
                comm_avoiding: l.stats.comm_avoiding,
                ..LevelStats::default()
            };
        }
        self.bottom_stats = LevelStats {
            global: self.bottom_stats.global,
            ranks: self.bottom_stats.ranks,
            ..LevelStats::default()
        };
    }

    fn fine(&self) -> &Work {
        self.levels[0]
            .work
            .as_ref()
            .expect("every rank holds the fine level")
    }

    /// The global box this rank owns on the fine level.
    pub fn owned(&self) -> IndexBox {
        self.levels[0].boxes[self.rank]
    }

    /// The layout the solution and right-hand side fields must have (one
    /// component; ghost width 2 where communication-avoiding smoothing
    /// engages on the fine level, else 1).
    pub fn layout(&self) -> FieldLayout {
        self.fine().layout
    }

    /// A zero field with [`layout`](Self::layout).
    pub fn new_field(&self) -> Field {
        Field::new(self.layout())
    }

    /// Halo exchanges performed on this rank since the hierarchy was built
    /// or the statistics were reset.
    pub fn halo_events(&self) -> u64 {
        self.levels.iter().map(|l| l.stats.halo_events).sum()
    }

    fn smooth_events(&self) -> u64 {
        self.levels.iter().map(|l| l.stats.smooth_events).sum()
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

    /// Adds the contributions of non-zero boundary values to the
    /// right-hand side `f` (fine layout): for a Dirichlet face with value
    /// `g`, `2 beta g / h²` in the adjacent cell; for a Neumann face with
    /// outward normal derivative `g`, `beta g / h`. `g(axis, side, x)` gets
    /// the axis, the side (0 low, 1 high) and the face centre. Periodic
    /// faces are skipped. Local (no communication).
    ///
    /// # Errors
    /// [`MgError::Invalid`] for a field of the wrong layout.
    pub fn add_boundary_values(
        &self,
        f: &mut Field,
        g: impl Fn(usize, usize, [f64; 3]) -> f64,
    ) -> Result<(), MgError> {
        self.check("f", f)?;
        let pr = &self.problem;
        let faces = pr.faces();
        let h = pr.h();
        let n = pr.shape;
        let own = self.owned();
        let lay = self.layout();
        for d in 0..3 {
            for side in 0..2 {
                let bc = faces[d][side];
                if bc == Boundary::Periodic {
                    continue;
                }
                let plane = if side == 0 { 0 } else { n[d] - 1 };
                if plane < own.lo[d] || plane >= own.hi[d] {
                    continue;
                }
                let (a, b) = ((d + 1) % 3, (d + 2) % 3);
                for ia in own.lo[a]..own.hi[a] {
                    for ib in own.lo[b]..own.hi[b] {
                        let mut p = [0usize; 3];
                        p[d] = plane;
                        p[a] = ia;
                        p[b] = ib;
                        let mut face = p;
                        face[d] += side;
                        let beta = self.walls.get(d, side, face);
                        let x = pr.face_centre(d, face);
                        let v = g(d, side, x);
                        let add = match bc {
                            Boundary::Dirichlet => 2.0 * beta * v / (h[d] * h[d]),
                            _ => beta * v / h[d],
                        };
                        let idx = lay.index(0, [0, 1, 2].map(|e| p[e] - own.lo[e] + lay.ghost[e]));
                        f.as_mut_slice()[idx] += add;
                    }
                }
            }
        }
        Ok(())
    }

    /// One V-cycle for `A u = f`, improving `u` in place (collective):
    /// `pre_sweeps` red-black sweeps, the coarse correction, `post_sweeps`
    /// red-black sweeps. The post-sweeps keep the red-black order (rather
    /// than black-red) so that consecutive cycles never repeat a half-sweep;
    /// [`solve_pcg`](Self::solve_pcg) uses the symmetric (black-red) order
    /// its preconditioner needs.
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
        let t = Instant::now();
        let w = self.levels[0].work.as_mut().expect("fine level");
        w.f.as_mut_slice().copy_from_slice(f.as_slice());
        self.vcycle_s += t.elapsed().as_secs_f64();
        self.vcycle_in_place(comm, u)
    }

    /// One V-cycle improving `u` for the right-hand side the fine level
    /// holds (the cycle reads it and may refresh its ghosts, which are
    /// functions of its owned values), timed into the V-cycle seconds.
    fn vcycle_in_place(&mut self, comm: &dyn Communicator, u: &mut Field) -> Result<(), MgError> {
        let t = Instant::now();
        std::mem::swap(&mut self.levels[0].work.as_mut().expect("fine level").u, u);
        let res = self.run_cycle(comm, false, None);
        std::mem::swap(&mut self.levels[0].work.as_mut().expect("fine level").u, u);
        self.vcycle_s += t.elapsed().as_secs_f64();
        res.map(|_| ())
    }

    /// One V-cycle on the fine level's `u` and `f`; `done` as in
    /// [`cycle`]. Returns whether `done` saw every fine plane.
    fn run_cycle(
        &mut self,
        comm: &dyn Communicator,
        symmetric: bool,
        done: Option<FineDone<'_>>,
    ) -> Result<bool, MgError> {
        self.with_ctx(comm, symmetric, |ctx, levels, bottom_stats| {
            cycle(ctx, levels, bottom_stats, done)
        })
    }

    /// Calls `f` with the cycle's context, the smoothing levels and the
    /// bottom's statistics (disjoint borrows of `self`).
    fn with_ctx<R>(
        &mut self,
        comm: &dyn Communicator,
        symmetric: bool,
        f: impl FnOnce(&Ctx<'_>, &mut [Level], &mut LevelStats) -> R,
    ) -> R {
        let Hierarchy {
            problem,
            opts,
            levels,
            bottom,
            bottom_stats,
            subs,
            ..
        } = self;
        let ctx = Ctx {
            outer: comm,
            subs,
            problem,
            opts,
            bottom: bottom.as_ref(),
            symmetric,
        };
        f(&ctx, levels, bottom_stats)
    }

    /// Removes the global mean of the owned values (reproducible).
    fn remove_mean(&self, comm: &dyn Communicator, x: &mut Field) -> Result<(), MgError> {
        let lay = self.layout();
        let mut acc = Acc::new(self.simd);
        let xs = x.as_slice();
        for_rows(&lay, |r| acc.push_slice(&xs[r]));
        let s = allreduce_exact_sums(comm, &[acc.finish()])?[0];
        let n: usize = self.problem.shape.iter().product();
        let mean = s / n as f64;
        let xs = x.as_mut_slice();
        for_rows(&lay, |r| xs[r].iter_mut().for_each(|x| *x -= mean));
        Ok(())
    }

    /// `r = f - A u` on the fine level; returns the exact global `||r||²`.
    fn fine_residual(
        &mut self,
        comm: &dyn Communicator,
        u: &mut Field,
        f: &Field,
        r: &mut Field,
    ) -> Result<f64, MgError> {
        let lv = &mut self.levels[0];
        let w = lv.work.as_mut().expect("fine level");
        exchange_timed(&mut w.ex, comm, u, &mut lv.stats)?;
        let t = Instant::now();
        let own = w.geom.owned();
        level::residual(
            w.simd,
            &w.stencil,
            &w.layout,
            u.as_slice(),
            f.as_slice(),
            r.as_mut_slice(),
            &own,
        );
        lv.stats.residual_s += t.elapsed().as_secs_f64();
        let lay = w.layout;
        let mut acc = Acc::new(w.simd);
        let rs = r.as_slice();
        for_rows(&lay, |r| acc.push_products(&rs[r.clone()], &rs[r]));
        Ok(allreduce_exact_sums(comm, &[acc.finish()])?[0])
    }

    /// `q = A p` on the fine level and the exact global `(p, q)`, in one
    /// pass (collective: one halo exchange, which updates `p`'s ghosts).
    fn apply_dot(
        &mut self,
        comm: &dyn Communicator,
        p: &mut Field,
        q: &mut Field,
    ) -> Result<f64, MgError> {
        let lv = &mut self.levels[0];
        let w = lv.work.as_mut().expect("fine level");
        exchange_timed(&mut w.ex, comm, p, &mut lv.stats)?;
        let t = Instant::now();
        let own = w.geom.owned();
        let mut acc = Acc::new(w.simd);
        level::apply(
            w.simd,
            &w.stencil,
            &w.layout,
            p.as_slice(),
            q.as_mut_slice(),
            &own,
            |pv, au| acc.push_products(pv, au),
        );
        lv.stats.residual_s += t.elapsed().as_secs_f64();
        Ok(allreduce_exact_sums(comm, &[acc.finish()])?[0])
    }

    /// The PCG's `x += alpha p` (when given), `p = z + beta p`, `q = A p`
    /// and the exact global `(p, q)` on the fine level (collective: one
    /// halo exchange of `p`, after the update). Without neighbours the
    /// exchange moves nothing and all of it runs as one pass over memory
    /// (`level::update_apply`); otherwise the updates run as one pass,
    /// then [`apply_dot`](Self::apply_dot). The same bits either way.
    fn update_apply_dot(
        &mut self,
        comm: &dyn Communicator,
        x: Option<(&mut Field, f64)>,
        p: &mut Field,
        z: &Field,
        beta: f64,
        q: &mut Field,
    ) -> Result<f64, MgError> {
        let w = self.levels[0].work.as_ref().expect("fine level");
        if !w.isolated {
            let lay = w.layout;
            let (ps, zs) = (p.as_mut_slice(), z.as_slice());
            match x {
                Some((x, alpha)) => {
                    let xs = x.as_mut_slice();
                    for_rows(&lay, |rg| {
                        let rows = xs[rg.clone()].iter_mut().zip(&mut ps[rg.clone()]);
                        for ((x, p), z) in rows.zip(&zs[rg]) {
                            *x += alpha * *p;
                            *p = z + beta * *p;
                        }
                    });
                }
                None => for_rows(&lay, |rg| {
                    for (p, z) in ps[rg.clone()].iter_mut().zip(&zs[rg]) {
                        *p = z + beta * *p;
                    }
                }),
            }
            return self.apply_dot(comm, p, q);
        }
        let lv = &mut self.levels[0];
        let w = lv.work.as_mut().expect("fine level");
        // Moves nothing; made (and counted) as in the unfused order.
        exchange_timed(&mut w.ex, comm, p, &mut lv.stats)?;
        let t = Instant::now();
        let own = w.geom.owned();
        debug_assert_eq!(own, w.layout.owned_region());
        let mut acc = Acc::new(w.simd);
        level::update_apply(
            w.simd,
            &w.stencil,
            &w.layout,
            x.map(|(x, a)| (x.as_mut_slice(), a)),
            p.as_mut_slice(),
            z.as_slice(),
            beta,
            q.as_mut_slice(),
            &own,
            |pv, au| acc.push_products(pv, au),
        );
        lv.stats.residual_s += t.elapsed().as_secs_f64();
        Ok(allreduce_exact_sums(comm, &[acc.finish()])?[0])
    }

    /// Keeps at least `n` fine-level work fields ready, every page of them
    /// written, so that no solve allocates one or faults its pages in:
    /// [`solve_pcg`](Self::solve_pcg) takes up to [`PCG_FIELDS`],
    /// [`solve_mg`](Self::solve_mg) up to [`MG_FIELDS`] (one fewer each
    /// for a problem that is not singular). A solve without them allocates
    /// its own and keeps them for the next. Each field is the size of
    /// [`new_field`](Self::new_field)'s.
    pub fn reserve_fields(&mut self, n: usize) {
        while self.spare.len() < n {
            let mut f = self.new_field();
            f.as_mut_slice().fill(0.0);
            self.spare.push(f);
        }
    }

    /// A fine-level field from the spares (or a new, zero one). Its values
    /// are left from an earlier solve: the solvers write every owned value
    /// of a work field before reading it, and read its ghosts only after an
    /// exchange (or, beyond walls, where they come from the V-cycle's
    /// zeroed `u`).
    fn take_field(&mut self) -> Field {
        self.spare.pop().unwrap_or_else(|| self.new_field())
    }

    /// Keeps work fields for the next solve.
    fn keep_fields(&mut self, fields: impl IntoIterator<Item = Field>) {
        self.spare.extend(fields);
    }

    /// The right-hand side actually solved when it is not `f` itself: for a
    /// singular problem, `f` minus its (round-off) mean; a mean beyond
    /// round-off is an error.
    fn effective_rhs(
        &mut self,
        comm: &dyn Communicator,
        f: &Field,
    ) -> Result<Option<Field>, MgError> {
        if self.problem.is_singular() {
            let mut b = self.take_field();
            b.as_mut_slice().copy_from_slice(f.as_slice());
            let lay = self.layout();
            let (mut s, mut a) = (Acc::new(self.simd), Acc::new(self.simd));
            let fs = f.as_slice();
            for_rows(&lay, |r| {
                s.push_slice(&fs[r.clone()]);
                fs[r].iter().for_each(|x| a.push(x.abs()));
            });
            let t = allreduce_exact_sums(comm, &[s.finish(), a.finish()])?;
            if t[1] > 0.0 && t[0].abs() > 1e-10 * t[1] {
                let n: usize = self.problem.shape.iter().product();
                return Err(MgError::Incompatible {
                    mean: t[0] / n as f64,
                    relative: t[0].abs() / t[1],
                });
            }
            self.remove_mean(comm, &mut b)?;
            return Ok(Some(b));
        }
        Ok(None)
    }

    /// The asymptotic residual reduction per V-cycle (as
    /// [`vcycle`](Self::vcycle) runs them), by power iteration: `cycles`
    /// V-cycles on `A e = 0` from a deterministic rough initial error
    /// (a hash of the global cell index, so the same on any decomposition),
    /// returning the largest of the last three ratios
    /// `||r_k|| / ||r_(k-1)||`. The error is rescaled when it gets small, so
    /// any number of cycles is safe. Collective.
    ///
    /// # Errors
    /// [`MgError::Invalid`] for fewer than 4 cycles; communication errors.
    pub fn vcycle_factor(
        &mut self,
        comm: &dyn Communicator,
        cycles: usize,
    ) -> Result<f64, MgError> {
        if cycles < 4 {
            return Err(MgError::Invalid(format!(
                "the factor needs at least 4 cycles, got {cycles}"
            )));
        }
        let own = self.owned();
        let n = self.problem.shape;
        let mut u = self.new_field();
        u.fill_owned(0, &own, |p| {
            let g = ((p[0] * n[1] + p[1]) * n[2] + p[2]) as u64;
            let h = (g ^ 0x5851_F42D_4C95_7F2D).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let h = (h ^ (h >> 29)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            (h >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        });
        let f = self.new_field();
        let mut r = self.new_field();
        if self.problem.is_singular() {
            self.remove_mean(comm, &mut u)?;
        }
        let mut prev = self.fine_residual(comm, &mut u, &f, &mut r)?.sqrt();
        let mut ratios = Vec::with_capacity(cycles);
        for _ in 0..cycles {
            self.vcycle(comm, &mut u, &f)?;
            if self.problem.is_singular() {
                self.remove_mean(comm, &mut u)?;
            }
            let mut now = self.fine_residual(comm, &mut u, &f, &mut r)?.sqrt();
            ratios.push(now / prev);
            if now < 1e-150 {
                // Linear in u (f = 0): rescale to stay clear of underflow.
                let lay = self.layout();
                let us = u.as_mut_slice();
                for_rows(&lay, |r| us[r].iter_mut().for_each(|x| *x *= 1e150));
                now *= 1e150;
            }
            prev = now;
        }
        Ok(ratios[cycles - 3..].iter().cloned().fold(0.0, f64::max))
    }

    /// V-cycles from the initial guess `u` until `||f - A u|| <= tol ||f||`
    /// (collective). For a singular problem the returned `u` has zero mean.
    ///
    /// # Errors
    /// [`MgError::Invalid`] for fields of the wrong layout,
    /// [`MgError::Incompatible`] for a singular problem whose `f` has a
    /// non-zero mean; communication errors. Not converging within
    /// `max_iter` is reported in the [`SolveReport`], not as an error.
    pub fn solve_mg(
        &mut self,
        comm: &dyn Communicator,
        u: &mut Field,
        f: &Field,
    ) -> Result<SolveReport, MgError> {
        self.check("u", u)?;
        self.check("f", f)?;
        let (e0, s0) = (self.halo_events(), self.smooth_events());
        let b_own = self.effective_rhs(comm, f)?;
        let b = b_own.as_ref().unwrap_or(f);
        let bn = norm2(comm, self.simd, &self.layout(), b)?.sqrt();
        check_finite(comm, self, bn, "the right-hand side", 0, b)?;
        let scale = if bn > 0.0 { bn } else { 1.0 };
        let mut r = self.take_field();
        let mut res = vec![self.fine_residual(comm, u, b, &mut r)?.sqrt() / scale];
        check_finite(comm, self, res[0], "the residual", 0, &r)?;
        // The right-hand side goes into the fine level once, not once a
        // cycle as `vcycle` copies it (it does not change between cycles).
        let w = self.levels[0].work.as_mut().expect("fine level");
        w.f.as_mut_slice().copy_from_slice(b.as_slice());
        let mut it = 0;
        while res[it] > self.opts.tol && it < self.opts.max_iter {
            self.vcycle_in_place(comm, u)?;
            if self.problem.is_singular() {
                self.remove_mean(comm, u)?;
            }
            it += 1;
            res.push(self.fine_residual(comm, u, b, &mut r)?.sqrt() / scale);
            check_finite(comm, self, res[it], "the residual", it, &r)?;
        }
        self.keep_fields(std::iter::once(r).chain(b_own));
        Ok(SolveReport {
            iterations: it,
            converged: res[it] <= self.opts.tol,
            residuals: res,
            halo_events: self.halo_events() - e0,
            smooth_events: self.smooth_events() - s0,
            vcycles: it,
        })
    }

    /// Conjugate gradients preconditioned by one V-cycle from zero
    /// (`pre_sweeps` red-black sweeps going down, `post_sweeps` black-red
    /// sweeps coming up), from the initial guess `u`, until
    /// `||f - A u|| <= tol ||f||` (collective). Dot products use the exact
    /// reproducible reduction; β uses the flexible (Polak-Ribière) form
    /// `(z, r - r_old) / (z_old, r_old)`, robust to the small non-symmetry
    /// of average restriction with trilinear prolongation.
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
        let (e0, s0) = (self.halo_events(), self.smooth_events());
        let singular = self.problem.is_singular();
        let lay = self.layout();
        let b_own = self.effective_rhs(comm, f)?;
        let b = b_own.as_ref().unwrap_or(f);
        let bn = norm2(comm, self.simd, &lay, b)?.sqrt();
        check_finite(comm, self, bn, "the right-hand side", 0, b)?;
        let scale = if bn > 0.0 { bn } else { 1.0 };
        let mut r = self.take_field();
        let mut res = vec![self.fine_residual(comm, u, b, &mut r)?.sqrt() / scale];
        check_finite(comm, self, res[0], "the residual", 0, &r)?;
        let mut z = self.take_field();
        let mut p = self.take_field();
        let mut q = self.take_field();
        let mut r_old = self.take_field();
        let mut it = 0;
        let mut cycles = 0;
        if res[0] > self.opts.tol {
            self.precondition(comm, &mut r, &mut z, None)?;
            cycles += 1;
            p.as_mut_slice().copy_from_slice(z.as_slice());
            let mut rz = dot_all(comm, self.simd, &lay, &[(&r, &z)])?[0];
            // The step `alpha p` not yet added to `u` (it is added in the
            // pass that next changes `p`), and the `beta` of that pass.
            let mut pending: Option<f64> = None;
            let mut beta = None;
            while it < self.opts.max_iter {
                // q = A p and (p, q) in one pass; after the first
                // iteration with the previous step's `u += alpha p` and
                // `p = z + beta p` in the same pass.
                let pq = match beta {
                    None => self.apply_dot(comm, &mut p, &mut q)?,
                    Some(b) => {
                        let x = pending.take().map(|a| (&mut *u, a));
                        self.update_apply_dot(comm, x, &mut p, &z, b, &mut q)?
                    }
                };
                check_finite(comm, self, pq, "A p", it + 1, &q)?;
                if pq <= 0.0 {
                    break;
                }
                let alpha = rz / pq;
                pending = Some(alpha);
                let mut acc = Acc::new(self.simd);
                // The old residual is kept by exchanging the buffers, not
                // copied.
                std::mem::swap(&mut r, &mut r_old);
                {
                    let (rs, qs, ro) = (r.as_mut_slice(), q.as_slice(), r_old.as_slice());
                    for_rows(&lay, |rg| {
                        let rows = rs[rg.clone()].iter_mut().zip(&ro[rg.clone()]);
                        for ((r, o), q) in rows.zip(&qs[rg.clone()]) {
                            *r = o - alpha * q;
                        }
                        acc.push_products(&rs[rg.clone()], &rs[rg]);
                    });
                }
                it += 1;
                let rr = allreduce_exact_sums(comm, &[acc.finish()])?[0];
                res.push(rr.sqrt() / scale);
                check_finite(comm, self, res[it], "the residual", it, &r)?;
                if res[it] <= self.opts.tol {
                    break;
                }
                // (z, r) and (z, r_old), accumulated in the last
                // post-smoothing pass where it runs as one pass.
                let own = self.precondition(comm, &mut r, &mut z, Some(&r_old))?;
                cycles += 1;
                let sums = match own {
                    Some(s) => s.to_vec(),
                    None => local_dots(self.simd, &lay, &[(&z, &r), (&z, &r_old)]),
                };
                let d = allreduce_exact_sums(comm, &sums)?;
                beta = Some((d[0] - d[1]) / rz);
                rz = d[0];
            }
            if let Some(alpha) = pending {
                let (us, ps) = (u.as_mut_slice(), p.as_slice());
                for_rows(&lay, |rg| {
                    for (u, p) in us[rg.clone()].iter_mut().zip(&ps[rg]) {
                        *u += alpha * p;
                    }
                });
            }
        }
        if singular {
            self.remove_mean(comm, u)?;
        }
        self.keep_fields([r, z, p, q, r_old].into_iter().chain(b_own));
        Ok(SolveReport {
            iterations: it,
            converged: res[it] <= self.opts.tol,
            residuals: res,
            halo_events: self.halo_events() - e0,
            smooth_events: self.smooth_events() - s0,
            vcycles: cycles,
        })
    }

    /// `z = M r`: one V-cycle from zero. With `r_old`, and where the last
    /// post-smoothing runs as one pass over memory and `z` is not changed
    /// after it (a non-singular problem), also this rank's exact sums of
    /// `(z, r)` and `(z, r_old)`, accumulated plane by plane inside that
    /// pass (not reduced); `None` otherwise.
    fn precondition(
        &mut self,
        comm: &dyn Communicator,
        r: &mut Field,
        z: &mut Field,
        r_old: Option<&Field>,
    ) -> Result<Option<[ExactSum; 2]>, MgError> {
        let t = Instant::now();
        {
            // The cycle only reads the fine right-hand side (and may
            // refresh its ghosts): lend r to it instead of copying.
            let w = self.levels[0].work.as_mut().expect("fine level");
            w.u.as_mut_slice().fill(0.0);
            std::mem::swap(&mut w.f, r);
        }
        let lay = self.layout();
        let own = lay.owned_region();
        let s = lay.strides();
        let mut accs = [Acc::new(self.simd), Acc::new(self.simd)];
        let r_old = r_old.filter(|_| !self.problem.is_singular());
        let res = {
            let mut hook = r_old.map(|ro| {
                let ro = ro.as_slice();
                let accs = &mut accs;
                move |z: &[f64], r: &[f64], i: usize| {
                    if i < own.lo[0] || i >= own.hi[0] {
                        return;
                    }
                    for j in own.lo[1]..own.hi[1] {
                        let o = i * s[0] + j * s[1];
                        let rg = o + own.lo[2]..o + own.hi[2];
                        accs[0].push_products(&z[rg.clone()], &r[rg.clone()]);
                        accs[1].push_products(&z[rg.clone()], &ro[rg]);
                    }
                }
            });
            self.run_cycle(comm, true, hook.as_mut().map(|h| h as &mut FineFn<'_>))
        };
        std::mem::swap(&mut self.levels[0].work.as_mut().expect("fine level").f, r);
        self.vcycle_s += t.elapsed().as_secs_f64();
        let fused = res? && r_old.is_some();
        std::mem::swap(&mut self.levels[0].work.as_mut().expect("fine level").u, z);
        if self.problem.is_singular() {
            self.remove_mean(comm, z)?;
        }
        Ok(fused.then(|| accs.map(Acc::finish)))
    }
}

/// What the device path takes from one smoothing level that lives on every
/// rank of the hierarchy's communicator.
#[cfg(feature = "cuda")]
pub(crate) struct LevelView<'a> {
    pub geom: BoxGeom,
    pub layout: FieldLayout,
    pub stencil: &'a Stencil,
    /// The level's face topology (ghost width of the layout, width 1).
    pub faces: &'a Topology,
    /// The coarser level laid out on the same ranks: its box, layout and
    /// full topology (ghost width 1).
    pub child: Option<(BoxGeom, FieldLayout, &'a Topology)>,
    /// Where the level smooths communication-avoiding: its 2-deep full
    /// topology, and the owned cells with the ring that the first colour
    /// covers.
    pub ca: Option<(&'a Topology, Region)>,
}

#[cfg(feature = "cuda")]
impl Hierarchy {
    /// The leading smoothing levels that live on every rank of the
    /// communicator (group 0), finest first.
    pub(crate) fn shared_levels(&self) -> Vec<LevelView<'_>> {
        self.levels
            .iter()
            .take_while(|l| l.group == 0)
            .filter_map(|l| l.work.as_ref())
            .map(|w| LevelView {
                geom: w.geom,
                layout: w.layout,
                stencil: &w.stencil,
                faces: w.ex.topology(),
                child: w
                    .child
                    .as_ref()
                    .map(|c| (c.geom, c.layout, c.ex_full.topology())),
                ca: w.ca.as_ref().map(|(ex, _)| (ex.topology(), w.grown)),
            })
            .collect()
    }

    /// The host child fields of smoothing level `l` (right-hand side,
    /// correction).
    pub(crate) fn child_fields(&mut self, l: usize) -> (&mut Field, &mut Field) {
        let c = self.levels[l]
            .work
            .as_mut()
            .and_then(|w| w.child.as_mut())
            .expect("a smoothing level with a child on this rank");
        (&mut c.f, &mut c.u)
    }

    /// The coarse problem of smoothing level `l` (which lives on every
    /// rank): from its child's right-hand side, the correction into its
    /// child's `u`, on the host (collective).
    pub(crate) fn coarse_of(
        &mut self,
        comm: &dyn Communicator,
        l: usize,
        symmetric: bool,
    ) -> Result<(), MgError> {
        self.with_ctx(comm, symmetric, |ctx, levels, bottom_stats| {
            let (cur, rest) = levels[l..].split_at_mut(1);
            let lv = &mut cur[0];
            let w = lv.work.as_mut().expect("member rank");
            let child = w.child.as_mut().expect("a level with a child");
            coarse(
                ctx,
                comm,
                lv.group,
                child,
                &mut lv.stats,
                rest,
                bottom_stats,
            )
        })
    }

    /// Solves the fine level densely on the host (a one-level hierarchy).
    pub(crate) fn bottom_solve_fine(
        &mut self,
        comm: &dyn Communicator,
        f: &Field,
        u: &mut Field,
    ) -> Result<(), MgError> {
        self.bottom
            .as_ref()
            .expect("every rank holds a one-level hierarchy's bottom")
            .solve(comm, f, u)
    }
}

impl Work {
    /// Builds this rank's part of level `l` on `comm` (decomposition
    /// `dec`), with the coarser level `child = (shape, grid)` laid out on the
    /// same ranks when there is one.
    fn new(
        comm: &dyn Communicator,
        problem: &Poisson,
        l: usize,
        dec: &BlockDecomposition,
        ca: bool,
        child: Option<([usize; 3], ProcessGrid)>,
        coef: &BoxCoef,
    ) -> Result<Self, MgError> {
        let g = if ca { 2 } else { 1 };
        let spec = HaloSpec {
            ghost: [g; 3],
            width: [1; 3],
            neighborhood: Neighborhood::Faces,
        };
        let topo = Topology::new(comm, dec, spec)?;
        let owned = topo.owned();
        let global = dec.global();
        let geom = BoxGeom {
            global,
            lo: owned.lo,
            n: owned.shape(),
            g,
        };
        let layout = topo.layout(1);
        let full = Topology::new(comm, dec, HaloSpec::uniform(g, Neighborhood::Full))?;
        let stencil = Stencil::new(comm, problem, l, &geom, &layout, coef, &topo, &full)?;
        // Whether neither topology has a neighbour (every exchange of the
        // level then moves nothing).
        let mut isolated = topo.neighbors().is_empty();
        let ca_ex = if ca {
            let t2 = Topology::new(comm, dec, HaloSpec::uniform(2, Neighborhood::Full))?;
            isolated &= t2.neighbors().is_empty();
            Some((
                Exchanger::new(&t2, 1, CH_CA)?,
                Exchanger::new(&t2, 2, CH_CA_F)?,
            ))
        } else {
            None
        };
        let interior = topo.interior([1; 3]);
        let per = problem.periodic();
        let mut grown = geom.owned();
        for d in 0..3 {
            if per[d] || owned.lo[d] > 0 {
                grown.lo[d] -= 1;
            }
            if per[d] || owned.hi[d] < global[d] {
                grown.hi[d] += 1;
            }
        }
        let child = match child {
            None => None,
            Some((cshape, grid)) => {
                let cdec = BlockDecomposition::new(cshape, grid)?;
                let ct = Topology::new(comm, &cdec, HaloSpec::uniform(1, Neighborhood::Full))?;
                let co = ct.owned();
                let cl = ct.layout(1);
                Some(Child {
                    geom: BoxGeom {
                        global: cshape,
                        lo: co.lo,
                        n: co.shape(),
                        g: 1,
                    },
                    layout: cl,
                    ex_full: Exchanger::new(&ct, 1, CH_CHILD)?,
                    boxes: boxes_of(&cdec, grid.size()),
                    f: Field::new(cl),
                    u: Field::new(cl),
                    transfers: None,
                })
            }
        };
        Ok(Work {
            geom,
            layout,
            stencil,
            ex: Exchanger::new(&topo, 1, CH_FACES)?,
            ca: ca_ex,
            interior,
            grown,
            u: Field::new(layout),
            f: Field::new(layout),
            scratch: vec![0.0; 4 * geom.n[2]],
            simd: Isa::detect(),
            f_ghosts: false,
            isolated,
            child,
        })
    }

    /// `sweeps` sweeps, each one colour pass in `order[0]` then `order[1]`.
    /// Plain: an exchange (faces, width 1) before each colour. Communication
    /// avoiding: one 2-deep exchange, the first colour on the grown box
    /// (owned cells and the 1-cell ghost ring), the second on the owned box
    /// with no exchange.
    fn smooth(
        &mut self,
        comm: &dyn Communicator,
        sweeps: usize,
        order: [usize; 2],
        opts: &MgOptions,
        st: &mut LevelStats,
        mut done: Option<FineDone<'_>>,
    ) -> Result<bool, MgError> {
        let own = self.geom.owned();
        let ca = self.ca.is_some();
        if self.isolated && sweeps > 0 {
            // No neighbour: the exchanges move nothing (they are still
            // made and counted), and up to four sweeps at a time run as one
            // pass over memory (`level::smooth_passes`, the same bits).
            let outer = if ca { self.grown } else { own };
            let mut left = sweeps;
            while left > 0 {
                let n = left.min(4);
                let mut passes = [(own, 0); 8];
                for k in 0..n {
                    passes[2 * k] = (outer, order[0]);
                    passes[2 * k + 1] = (own, order[1]);
                    for _ in 0..if ca { 1 } else { 2 } {
                        self.exchange_only(comm, ca, st)?;
                    }
                }
                let t = Instant::now();
                let fs = self.f.as_slice();
                let mut noop = |_: &[f64], _: &[f64], _: usize| {};
                // Only the last pass's planes are final.
                let hook: &mut FineFn<'_> = match done.as_mut() {
                    Some(d) if left == n => &mut **d,
                    _ => &mut noop,
                };
                level::smooth_passes_then(
                    self.simd,
                    &self.stencil,
                    &self.layout,
                    self.geom.parity(),
                    self.u.as_mut_slice(),
                    fs,
                    &passes[..2 * n],
                    opts.omega,
                    &mut |u, i| hook(u, fs, i),
                );
                st.smooth_s += t.elapsed().as_secs_f64();
                left -= n;
            }
            return Ok(done.is_some());
        }
        for _ in 0..sweeps {
            if ca {
                let grown = self.grown;
                self.exchange_and_smooth(comm, true, order[0], &grown, Some(&own), opts, st)?;
            } else {
                for &c in &order {
                    self.exchange_and_smooth(comm, false, c, &own, None, opts, st)?;
                }
            }
        }
        Ok(false)
    }

    /// The exchange that [`exchange_and_smooth`](Self::exchange_and_smooth)
    /// makes, without the smoothing.
    fn exchange_only(
        &mut self,
        comm: &dyn Communicator,
        ca: bool,
        st: &mut LevelStats,
    ) -> Result<(), MgError> {
        st.halo_events += 1;
        st.smooth_events += 1;
        let with_f = ca && !self.f_ghosts;
        let t = Instant::now();
        let Work {
            ex,
            ca: ca_ex,
            u,
            f,
            ..
        } = self;
        match (ca, ca_ex.as_mut()) {
            (true, Some((_, ex_uf))) if with_f => ex_uf.exchange(comm, &mut [u, f])?,
            (true, Some((ex_u, _))) => ex_u.exchange(comm, &mut [u])?,
            _ => ex.exchange(comm, &mut [u])?,
        }
        st.halo_s += t.elapsed().as_secs_f64();
        if with_f {
            self.f_ghosts = true;
        }
        Ok(())
    }

    /// Exchanges `u` (and, in communication-avoiding mode when its ghost
    /// ring is stale, `f`: one fused exchange) and smooths `colour` over
    /// `outer`, then the other colour over `then` if given; with overlap,
    /// the interior while the exchange is in flight and the rest of `outer`
    /// after it. Where nothing can overlap (the exchange has no remote
    /// neighbour, or overlap is off) the two colours run as one fused pass
    /// over memory ([`level::smooth_pair`], the same bits).
    #[allow(clippy::too_many_arguments)]
    fn exchange_and_smooth(
        &mut self,
        comm: &dyn Communicator,
        ca: bool,
        colour: usize,
        outer: &Region,
        then: Option<&Region>,
        opts: &MgOptions,
        st: &mut LevelStats,
    ) -> Result<(), MgError> {
        st.halo_events += 1;
        st.smooth_events += 1;
        let with_f = ca && !self.f_ghosts;
        let (parity, omega, inner) = (self.geom.parity(), opts.omega, self.interior);
        let simd = self.simd;
        let overlap = opts.overlap && inner != self.geom.owned();
        // A colour pass over a region; field by field, so that it can run
        // while the exchanger is borrowed by the pending exchange.
        macro_rules! sweep {
            ($region:expr, $colour:expr) => {
                level::smooth(
                    simd,
                    &self.stencil,
                    &self.layout,
                    parity,
                    self.u.as_mut_slice(),
                    self.f.as_slice(),
                    $region,
                    $colour,
                    omega,
                )
            };
        }
        let t = Instant::now();
        let Work {
            ex,
            ca: ca_ex,
            u,
            f,
            ..
        } = self;
        let ex = match (ca, ca_ex.as_mut()) {
            (true, Some((ex_u, ex_uf))) => {
                if with_f {
                    ex_uf
                } else {
                    ex_u
                }
            }
            _ => ex,
        };
        // Arrays, not vectors: a sweep allocates nothing.
        let mut both;
        let mut one;
        let fields: &mut [&mut Field] = if with_f {
            both = [u, f];
            &mut both
        } else {
            one = [u];
            &mut one
        };
        if overlap {
            let pending = ex.post(comm, fields)?;
            st.halo_s += t.elapsed().as_secs_f64();
            let t = Instant::now();
            sweep!(&inner, colour);
            st.smooth_s += t.elapsed().as_secs_f64();
            let t = Instant::now();
            if with_f {
                pending.finish(&mut [&mut self.u, &mut self.f])?;
            } else {
                pending.finish(&mut [&mut self.u])?;
            }
            st.halo_s += t.elapsed().as_secs_f64();
            let t = Instant::now();
            for r in level::frame(outer, &inner) {
                sweep!(&r, colour);
            }
            if let Some(then) = then {
                sweep!(then, 1 - colour);
            }
            st.smooth_s += t.elapsed().as_secs_f64();
        } else {
            ex.exchange(comm, fields)?;
            st.halo_s += t.elapsed().as_secs_f64();
            let t = Instant::now();
            match then {
                Some(then) => level::smooth_pair(
                    simd,
                    &self.stencil,
                    &self.layout,
                    parity,
                    self.u.as_mut_slice(),
                    self.f.as_slice(),
                    outer,
                    then,
                    colour,
                    omega,
                ),
                None => sweep!(outer, colour),
            }
            st.smooth_s += t.elapsed().as_secs_f64();
        }
        if with_f {
            self.f_ghosts = true;
        }
        Ok(())
    }
}

/// What every level's cycle needs besides the levels themselves.
struct Ctx<'a> {
    outer: &'a dyn Communicator,
    subs: &'a [Box<dyn Communicator>],
    problem: &'a Poisson,
    opts: &'a MgOptions,
    bottom: Option<&'a Bottom>,
    /// Post-smoothing in the reverse colour order (a symmetric cycle).
    symmetric: bool,
}

/// Called with the fine level's `u` and `f` and a plane index, once for
/// every plane of the last post-smoothing pass as soon as it is final.
type FineDone<'a> = &'a mut FineFn<'a>;
/// The plane callback itself.
type FineFn<'a> = dyn FnMut(&[f64], &[f64], usize) + 'a;

/// The V-cycle on `levels[0]` (whose `u` is the initial guess and `f` the
/// right-hand side); `levels[1..]` are the coarser smoothing levels.
/// Where the last post-smoothing runs as one pass over memory (see
/// [`Work::smooth`]), `done` is called for each of its planes once final;
/// returns whether it was (otherwise it is not called at all).
fn cycle(
    ctx: &Ctx<'_>,
    levels: &mut [Level],
    bottom_stats: &mut LevelStats,
    done: Option<FineDone<'_>>,
) -> Result<bool, MgError> {
    let (cur, rest) = levels.split_at_mut(1);
    let lv = &mut cur[0];
    let comm = comm_of(ctx.outer, ctx.subs, lv.group);
    let st = &mut lv.stats;
    st.visits += 1;
    let w = lv.work.as_mut().expect("cycle runs on member ranks only");
    w.f_ghosts = false;
    let bottom = ctx.bottom;
    if w.child.is_none() {
        // One level: the dense solve of the fine grid.
        let t = Instant::now();
        bottom
            .expect("bottom on member ranks")
            .solve(comm, &w.f, &mut w.u)?;
        st.coarse_s += t.elapsed().as_secs_f64();
        return Ok(false);
    }
    let opts = ctx.opts;
    w.smooth(comm, opts.pre_sweeps, [0, 1], opts, st, None)?;
    // Residual and restriction.
    exchange_timed(&mut w.ex, comm, &mut w.u, st)?;
    let t = Instant::now();
    let child = w.child.as_mut().expect("checked above");
    level::residual_restrict(
        w.simd,
        &w.stencil,
        &w.layout,
        w.u.as_slice(),
        w.f.as_slice(),
        &child.layout,
        child.f.as_mut_slice(),
        &mut w.scratch,
    );
    st.residual_s += t.elapsed().as_secs_f64();
    // The coarse problem.
    coarse(ctx, comm, lv.group, child, st, rest, bottom_stats)?;
    // Prolongation.
    exchange_timed(&mut child.ex_full, comm, &mut child.u, st)?;
    let t = Instant::now();
    level::reflect_walls(
        ctx.problem,
        &child.geom,
        &child.layout,
        child.u.as_mut_slice(),
    );
    level::prolong_add(
        w.simd,
        &child.layout,
        child.u.as_slice(),
        &w.layout,
        w.geom.lo,
        w.u.as_mut_slice(),
    );
    st.transfer_s += t.elapsed().as_secs_f64();
    // Symmetric (preconditioner): black-red, the reverse of the way down.
    // Stationary cycles: red-black again, so that no half-sweep repeats the
    // one just before it (the last colour of one cycle's post-smoothing
    // would otherwise be the first of the next cycle's pre-smoothing).
    let post_order = if ctx.symmetric { [1, 0] } else { [0, 1] };
    w.smooth(comm, opts.post_sweeps, post_order, opts, st, done)
}

/// The coarse problem of a level whose restricted right-hand side is in
/// `child.f` (on the level's ranks, communicator `comm`, group `group`):
/// the bottom solve, or the V-cycle of the next level (`rest[0]`), moved
/// to and from its ranks where it lives on fewer; leaves the correction in
/// `child.u`.
fn coarse(
    ctx: &Ctx<'_>,
    comm: &dyn Communicator,
    group: usize,
    child: &mut Child,
    st: &mut LevelStats,
    rest: &mut [Level],
    bottom_stats: &mut LevelStats,
) -> Result<(), MgError> {
    let bottom = ctx.bottom;
    if rest.is_empty() {
        let t = Instant::now();
        bottom
            .expect("bottom on member ranks")
            .solve(comm, &child.f, &mut child.u)?;
        let dt = t.elapsed().as_secs_f64();
        bottom_stats.coarse_s += dt;
        bottom_stats.visits += 1;
    } else {
        let next = &mut rest[0];
        let t = Instant::now();
        if next.group == group {
            let nw = next.work.as_mut().expect("same ranks");
            level::copy_owned(&child.f, &mut nw.f);
            nw.u.as_mut_slice().fill(0.0);
            st.coarse_s += t.elapsed().as_secs_f64();
            cycle(ctx, rest, bottom_stats, None)?;
            let t = Instant::now();
            let nw = rest[0].work.as_ref().expect("same ranks");
            level::copy_owned(&nw.u, &mut child.u);
            st.coarse_s += t.elapsed().as_secs_f64();
        } else {
            if child.transfers.is_none() {
                // Collective on this level's ranks, which all get here.
                let next_layout = next.work.as_ref().map(|w| w.layout);
                let down = transfer::plan(
                    comm,
                    &child.boxes,
                    Some(&child.layout),
                    &next.boxes,
                    next_layout.as_ref(),
                )?;
                let up = transfer::plan(
                    comm,
                    &next.boxes,
                    next_layout.as_ref(),
                    &child.boxes,
                    Some(&child.layout),
                )?;
                child.transfers = Some((down, up));
            }
            let (down, up) = child.transfers.as_mut().expect("planned above");
            transfer::execute(
                comm,
                down,
                Some(&child.f),
                next.work.as_mut().map(|w| &mut w.f),
            )?;
            st.coarse_s += t.elapsed().as_secs_f64();
            if let Some(nw) = next.work.as_mut() {
                nw.u.as_mut_slice().fill(0.0);
                cycle(ctx, rest, bottom_stats, None)?;
            }
            let t = Instant::now();
            let next = &rest[0];
            transfer::execute(
                comm,
                up,
                next.work.as_ref().map(|w| &w.u),
                Some(&mut child.u),
            )?;
            st.coarse_s += t.elapsed().as_secs_f64();
        }
    }
    Ok(())
}

/// Exact global `||x||²` over the owned cells.
/// The first cell (global index, row-major) of the owned box `owned`
/// where `x` (laid out as `lay`) holds a NaN or an infinity, over every
/// rank (collective); `None` where there is none.
pub(crate) fn first_non_finite(
    comm: &dyn Communicator,
    lay: &FieldLayout,
    owned: &IndexBox,
    global: [usize; 3],
    x: &Field,
) -> Result<Option<[usize; 3]>, MgError> {
    let (s, g, xs) = (lay.strides(), lay.ghost, x.as_slice());
    let mut first = f64::INFINITY;
    'scan: for i in 0..lay.owned[0] {
        for j in 0..lay.owned[1] {
            for k in 0..lay.owned[2] {
                let v = xs[(i + g[0]) * s[0] + (j + g[1]) * s[1] + k + g[2]];
                if !v.is_finite() {
                    let p = [owned.lo[0] + i, owned.lo[1] + j, owned.lo[2] + k];
                    first = ((p[0] * global[1] + p[1]) * global[2] + p[2]) as f64;
                    break 'scan;
                }
            }
        }
    }
    // Linear indices below 2^53 are exact as doubles.
    let first = comm.allreduce_scalar(first, ReduceOp::Min)?;
    if !first.is_finite() {
        return Ok(None);
    }
    let q = first as usize;
    Ok(Some([
        q / (global[1] * global[2]),
        q / global[2] % global[1],
        q % global[2],
    ]))
}

/// `Err(NotFinite)` naming the first non-finite cell of `x` where `value`
/// (a norm or dot product of it) is not finite (collective: every rank has
/// the same `value`).
pub(crate) fn check_finite(
    comm: &dyn Communicator,
    h: &Hierarchy,
    value: f64,
    what: &'static str,
    iteration: usize,
    x: &Field,
) -> Result<(), MgError> {
    if value.is_finite() {
        return Ok(());
    }
    let cell = first_non_finite(comm, &h.layout(), &h.owned(), h.problem().shape, x)?;
    Err(MgError::NotFinite {
        what,
        cell,
        iteration,
    })
}

fn norm2(comm: &dyn Communicator, simd: Isa, lay: &FieldLayout, x: &Field) -> Result<f64, MgError> {
    Ok(dot_all(comm, simd, lay, &[(x, x)])?[0])
}

/// Exact global dot products of pairs of fields over the owned cells, in one
/// pass and one reduction.
fn dot_all(
    comm: &dyn Communicator,
    simd: Isa,
    lay: &FieldLayout,
    pairs: &[(&Field, &Field)],
) -> Result<Vec<f64>, MgError> {
    Ok(allreduce_exact_sums(comm, &local_dots(simd, lay, pairs))?)
}

/// This rank's exact sums of the products of pairs of fields over the owned
/// cells, in one pass.
fn local_dots(simd: Isa, lay: &FieldLayout, pairs: &[(&Field, &Field)]) -> Vec<ExactSum> {
    let mut accs: Vec<Acc> = pairs.iter().map(|_| Acc::new(simd)).collect();
    for_rows(lay, |r| {
        for (acc, (a, b)) in accs.iter_mut().zip(pairs) {
            acc.push_products(&a.as_slice()[r.clone()], &b.as_slice()[r.clone()]);
        }
    });
    accs.into_iter().map(Acc::finish).collect()
}

/// Calls `f` with the linear index range of every owned row, in order.
fn for_rows(lay: &FieldLayout, mut f: impl FnMut(std::ops::Range<usize>)) {
    let r = lay.owned_region();
    let s = lay.strides();
    for i in r.lo[0]..r.hi[0] {
        for j in r.lo[1]..r.hi[1] {
            let o = i * s[0] + j * s[1];
            f(o + r.lo[2]..o + r.hi[2]);
        }
    }
}

fn check_options(opts: &MgOptions) -> Result<(), MgError> {
    if !(opts.tol.is_finite() && opts.tol >= 0.0) {
        return Err(MgError::Invalid(format!(
            "tolerance {} must be finite and >= 0",
            opts.tol
        )));
    }
    if !(opts.omega.is_finite() && opts.omega > 0.0 && opts.omega < 2.0) {
        return Err(MgError::Invalid(format!(
            "relaxation factor omega = {} must lie in (0, 2)",
            opts.omega
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use comm::local;

    /// Where the spare fields' values and the fine level's `u` and `f`
    /// (which the preconditioner swaps with work fields) live, sorted.
    fn spares(mg: &Hierarchy) -> Vec<usize> {
        let w = mg.levels[0].work.as_ref().expect("fine level");
        let mut p: Vec<usize> = mg
            .spare
            .iter()
            .chain([&w.u, &w.f])
            .map(|f| f.as_slice().as_ptr() as usize)
            .collect();
        p.sort();
        p
    }

    #[test]
    fn the_solvers_take_exactly_the_fields_they_are_said_to() {
        // Dirichlet takes one field fewer than the periodic (singular)
        // problem, which also solves for the right-hand side less its mean.
        for (bc, less) in [(Boundary::Dirichlet, 1), (Boundary::Periodic, 0)] {
            let p = Poisson::new([16; 3], [1.0; 3], [bc; 3]).unwrap();
            for (pcg, most) in [(true, PCG_FIELDS), (false, MG_FIELDS)] {
                let got = local::run(1, |c| {
                    let g = ProcessGrid::for_shape(p.shape, c.size(), p.periodic())?;
                    let levels = Hierarchy::max_levels(p.shape);
                    let mut mg = Hierarchy::new(c, g, &p, levels, MgOptions::default())?;
                    let mut u = mg.new_field();
                    let mut f = mg.new_field();
                    let w = 2.0 * std::f64::consts::PI;
                    // Zero mean on the periodic cell centres.
                    f.fill_owned(0, &mg.owned(), |q| {
                        let x = p.cell_centre(q);
                        (w * x[0]).sin() * (2.0 * w * x[1]).cos() + (w * x[2]).sin()
                    });
                    let mut solve = |mg: &mut Hierarchy| {
                        u.as_mut_slice().fill(0.0);
                        match pcg {
                            true => mg.solve_pcg(c, &mut u, &f).map(|_| ()),
                            false => mg.solve_mg(c, &mut u, &f).map(|_| ()),
                        }
                    };
                    // Without reserved fields a solve keeps those it took.
                    solve(&mut mg)?;
                    let taken = mg.spare.len();
                    // With them, it takes those and makes none.
                    let mut mg2 = Hierarchy::new(c, g, &p, levels, MgOptions::default())?;
                    mg2.reserve_fields(most);
                    let before = spares(&mg2);
                    solve(&mut mg2)?;
                    Ok::<_, MgError>((taken, before == spares(&mg2), mg2.spare.len()))
                })
                .unwrap();
                let (taken, same, kept) = got[0];
                assert_eq!(
                    taken,
                    most - less,
                    "{bc:?}, pcg {pcg}: fields a solve takes"
                );
                assert!(
                    same && kept == most,
                    "{bc:?}, pcg {pcg}: the reserved fields were not enough"
                );
            }
        }
    }
}
