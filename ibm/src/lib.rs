//! Immersed-boundary geometry for flow solvers on a periodic MAC grid:
//! signed-distance bodies, cut-cell volume fractions and face apertures,
//! and ghost-cell classification with grid-line image points for no-slip
//! walls. The crate knows geometry, not flow.
//!
//! **Conventions.** The domain is the periodic box `[0, L0) x [0, L1) x
//! [0, L2)`. A [`Body`] is a signed distance function: **negative inside
//! the solid, positive in the fluid** (a point at distance exactly 0 counts
//! as solid). A [`MacGrid`] has `n = [n0, n1, n2]` cells of spacing
//! `h = L / n`; cell `p` is `[p h, (p + 1) h)`, its centre `(p + 1/2) h`,
//! the lower face of cell `p` along axis `d` lies at `x_d = p_d h` and the
//! velocity points of component `d` are the centres of those faces,
//! `(p + 1/2 - 1/2 e_d) h` ([`Location`]).
//!
//! - Bodies: [`Packing`] (spheres read from text, written back, or placed
//!   at random for a solid fraction; distance queries through a bucket
//!   grid), [`Lattice`] (simple, body- and face-centred cubic arrays of
//!   equal spheres; [`Lattice::for_solid_fraction`]) and [`Slab`] (a solid
//!   layer between two planes, for tests against plane walls).
//! - [`CutCells`]: per cell of one rank's block plus ghost layers, the
//!   fluid volume fraction `theta(p)` and per axis the fluid aperture of
//!   its lower face `A(d, p)`, from the body's signed distance
//!   interpolated linearly on the Kuhn simplices of adaptively bisected
//!   sub-cells (second order in the leaf size).
//! - [`GhostPoints`]: per point of one staggered component, `Fluid`,
//!   `Solid` or `Ghost`, and for each fluid point per direction either an
//!   [`Link::Open`] link or a [`Link::Wall`] at the fraction `t` of the grid
//!   line where the wall lies, with the linear-extrapolation ghost value
//!   of Gibou et al. (2002) and its stencil correction.
//!
//! Every stored value is a pure function of global indices and
//! coordinates, so blocks of any decomposition see the same bits in the
//! cells they share, ghosts included.
//!
//! ```
//! use comm::IndexBox;
//! use ibm::{CutCells, Lattice, LatticeKind, MacGrid};
//!
//! let lengths = [1.0; 3];
//! let body = Lattice::for_solid_fraction(LatticeKind::Sc, lengths, [1; 3], 0.3)?;
//! let grid = MacGrid::new([16; 3], lengths)?;
//! let cut = CutCells::new(&body, &grid, IndexBox::from_shape([16; 3]), 1)?;
//! let fluid: f64 = cut.owned_volume_fractions().sum::<f64>() / 16f64.powi(3);
//! assert!((fluid - 0.7).abs() < 2e-3);
//! # Ok::<(), ibm::IbmError>(())
//! ```
#![warn(missing_docs)]

mod body;
mod cutcell;
mod ghost;
mod grid;
mod lattice;
mod packing;
mod rng;

pub use body::{Body, Slab};
pub use cutcell::{
    cell_fluid_fraction, face_fluid_aperture, simplex, CutCells, CutOptions, MAX_DEPTH,
};
pub use ghost::{GhostOptions, GhostPoints, Link, PointKind, Side, WallCrossing};
pub use grid::{Location, MacGrid, Region, MAX_EXTENT, MAX_GHOST};
pub use lattice::{Lattice, LatticeKind};
pub use packing::{
    Packing, RandomOptions, Sphere, MAX_RANDOM_FRACTION, MAX_RANDOM_SPHERES, OVERLAP_TOLERANCE,
};

/// What building a body, a grid, cut cells or ghost points can report.
/// Every message names the bad value and what would have been valid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum IbmError {
    /// A box length that is not finite and positive.
    #[error("box length {value} along axis {axis} must be finite and positive")]
    Length {
        /// The axis.
        axis: usize,
        /// The length given.
        value: f64,
    },
    /// A grid extent outside `1..=2^40` ([`MAX_EXTENT`]).
    #[error("grid extent {value} along axis {axis} outside the valid range 1..=1099511627776")]
    Shape {
        /// The axis.
        axis: usize,
        /// The extent given.
        value: usize,
    },
    /// An axis number outside `0..3`.
    #[error("axis {value} is not one of 0, 1, 2")]
    Axis {
        /// The axis given.
        value: usize,
    },
    /// A lattice with no lattice cell along some axis.
    #[error("lattice cells {value} along axis {axis} must be at least 1")]
    LatticeCells {
        /// The axis.
        axis: usize,
        /// The count given.
        value: usize,
    },
    /// A sphere radius outside the valid range: `(0, max]` when
    /// `inclusive` (a lattice, whose spheres may touch), `(0, max)`
    /// otherwise (a random packing, whose diameter must be below the box).
    #[error("radius {value} outside the valid range (0, {max}{}", if *.inclusive { "]" } else { ")" })]
    Radius {
        /// The radius given.
        value: f64,
        /// The bound of the valid range.
        max: f64,
        /// Whether `max` itself is valid.
        inclusive: bool,
    },
    /// A solid fraction outside the valid range.
    #[error("solid fraction {value} outside the valid range {range}")]
    SolidFraction {
        /// The fraction given.
        value: f64,
        /// The valid range, in words (for example `(0, 0.5235987755982988]`).
        range: String,
    },
    /// A width (slab half-width) outside the valid range.
    #[error("slab half-width {value} outside the valid range (0, {max})")]
    HalfWidth {
        /// The half-width given.
        value: f64,
        /// The exclusive upper bound (half the box length along the axis).
        max: f64,
    },
    /// A coordinate that is not finite.
    #[error("{what} {value} is not finite")]
    NotFinite {
        /// What the coordinate is.
        what: &'static str,
        /// The value given.
        value: f64,
    },
    /// A line of a packing file that is not four numbers `x y z r`.
    #[error("line {line}: `{text}` is not four finite numbers `x y z r` ({reason})")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// The text of the line.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A sphere with a radius that is not positive.
    #[error("line {line}: sphere radius {radius} must be positive")]
    NonPositiveRadius {
        /// 1-based line number (position in the list for [`Packing::new`]).
        line: usize,
        /// The radius given.
        radius: f64,
    },
    /// A sphere whose diameter is not below the smallest box length.
    #[error(
        "line {line}: sphere diameter {diameter} must be below the smallest box length {limit}"
    )]
    SphereTooLarge {
        /// 1-based line number (position in the list for [`Packing::new`]).
        line: usize,
        /// The diameter.
        diameter: f64,
        /// The smallest box length.
        limit: f64,
    },
    /// Two spheres that overlap (periodic minimum image) by more than
    /// [`OVERLAP_TOLERANCE`] times the smaller radius.
    #[error("spheres of lines {first} and {second} overlap by {depth} (allowed: up to {allowed})")]
    Overlap {
        /// 1-based line number of the first sphere.
        first: usize,
        /// 1-based line number of the second sphere.
        second: usize,
        /// The overlap depth `r1 + r2 - |c1 - c2|`.
        depth: f64,
        /// The largest overlap accepted for this pair.
        allowed: f64,
    },
    /// The overlap relaxation of [`Packing::random`] did not converge.
    #[error("random packing at solid fraction {fraction} did not converge in {sweeps} sweeps (largest overlap {overlap} of radius {radius}, needed below {tolerance})")]
    NotConverged {
        /// The solid fraction asked for.
        fraction: f64,
        /// The sweeps done.
        sweeps: usize,
        /// The largest overlap left.
        overlap: f64,
        /// The sphere radius.
        radius: f64,
        /// The overlap the relaxation had to reach.
        tolerance: f64,
    },
    /// A random packing that would hold too many spheres.
    #[error("random packing of {count} spheres (radius {radius}, solid fraction {fraction}) exceeds the limit of {max} spheres")]
    TooManySpheres {
        /// The sphere count the radius and fraction give.
        count: f64,
        /// The radius given.
        radius: f64,
        /// The solid fraction given.
        fraction: f64,
        /// The most spheres accepted.
        max: usize,
    },
    /// A file that could not be read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's message.
        message: String,
    },
    /// A body and a grid on different boxes.
    #[error("the body's box {body:?} differs from the grid's box {grid:?}")]
    BoxMismatch {
        /// The body's box lengths.
        body: [f64; 3],
        /// The grid's box lengths.
        grid: [f64; 3],
    },
    /// A block that is empty or not inside the grid.
    #[error("block {lo:?}..{hi:?} must be non-empty and inside the grid 0..{shape:?}")]
    Block {
        /// The block's first indices.
        lo: [usize; 3],
        /// The block's end indices.
        hi: [usize; 3],
        /// The grid shape.
        shape: [usize; 3],
    },
    /// A sub-sampling depth above [`MAX_DEPTH`].
    #[error("sub-sampling depth {value} outside the valid range 0..={max}")]
    Depth {
        /// The depth given.
        value: u32,
        /// The largest depth.
        max: u32,
    },
    /// A minimum wall fraction outside `(0, 1]`.
    #[error("minimum wall fraction t_min {value} outside the valid range (0, 1]")]
    TMin {
        /// The value given.
        value: f64,
    },
    /// A ghost width above [`MAX_GHOST`].
    #[error("ghost width {value} outside the valid range 0..={max}")]
    Ghost {
        /// The width given.
        value: usize,
        /// The largest width.
        max: usize,
    },
    /// A region (block plus ghost layers) with more points than the
    /// storage can index: [`Region::MAX_POINTS`] for every per-point
    /// array, [`GhostPoints::MAX_POINTS`] for ghost points.
    #[error("region of {} x {} x {} points (block plus ghost layers) exceeds the limit of {max} points: {reason}", .extent[0], .extent[1], .extent[2])]
    TooLarge {
        /// Points per axis.
        extent: [usize; 3],
        /// The most points accepted.
        max: usize,
        /// What sets the limit.
        reason: &'static str,
    },
    /// A push margin of [`RandomOptions`] that is negative or not finite.
    #[error("push margin {value} outside the valid range [0, inf) (finite)")]
    PushMargin {
        /// The margin given.
        value: f64,
    },
}

/// Result with [`IbmError`].
pub type Result<T> = std::result::Result<T, IbmError>;
