//! Ghost-cell classification and the grid-line wall correction for
//! no-slip (Dirichlet) walls.

use crate::body::Body;
use crate::cutcell::check_box;
use crate::grid::{Location, MacGrid, Region};
use crate::{IbmError, Result};
use comm::IndexBox;

/// What a grid point of one component is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PointKind {
    /// Signed distance `> 0`: an unknown of the flow solve.
    Fluid,
    /// Distance `<= 0` and no fluid neighbour along the 6 grid directions.
    Solid,
    /// Distance `<= 0` with at least one fluid neighbour: its value is the
    /// extrapolation of that neighbour through the wall.
    Ghost,
}

/// The side of a point along an axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// Towards lower indices (`-e_d`).
    Lower,
    /// Towards higher indices (`+e_d`).
    Upper,
}

impl Side {
    /// `-1` or `+1`.
    pub fn sign(self) -> i64 {
        match self {
            Side::Lower => -1,
            Side::Upper => 1,
        }
    }
}

/// The link of a fluid point to one of its 6 grid neighbours in a
/// 7-point stencil.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Link {
    /// The neighbour is fluid (or the point is not fluid): the ordinary
    /// coupling `beta / h^2 (u_nb - u)`.
    Open,
    /// The neighbour is a ghost; the wall crosses the grid line at the
    /// fraction `t` in `[t_min, 1]` of the way to it.
    Wall {
        /// The wall fraction, clamped below at [`GhostOptions::t_min`].
        t: f64,
    },
}

impl Link {
    /// The coefficient `w_d` of `-u` in the link's term of the discrete
    /// `div(beta grad u)`: `beta / h^2` when open, `beta / (t h^2)` at a wall.
    #[inline]
    pub fn diagonal(self, beta: f64, h: f64) -> f64 {
        match self {
            Link::Open => beta / (h * h),
            Link::Wall { t } => beta / (t * h * h),
        }
    }

    /// The coefficient of `u_nb`: `beta / h^2` when open, `0` at a wall
    /// (the face to the ghost is cut).
    #[inline]
    pub fn neighbour(self, beta: f64, h: f64) -> f64 {
        match self {
            Link::Open => beta / (h * h),
            Link::Wall { .. } => 0.0,
        }
    }

    /// The known part of the term for a wall moving at `u_wall`:
    /// `beta u_wall / (t h^2)` (zero when open or for a wall at rest). The
    /// link's whole term is `neighbour u_nb - diagonal u + wall_term`.
    #[inline]
    pub fn wall_term(self, beta: f64, h: f64, u_wall: f64) -> f64 {
        match self {
            Link::Open => 0.0,
            Link::Wall { t } => beta * u_wall / (t * h * h),
        }
    }

    /// The ghost value that makes the linear profile through the fluid
    /// point and the ghost take `u_wall` at the wall: `(u_wall - (1 - t)
    /// u_fluid) / t`, i.e. `-(1 - t)/t u_fluid` at rest (Gibou et al.
    /// 2002); `None` for an open link.
    #[inline]
    pub fn ghost_value(self, u_fluid: f64, u_wall: f64) -> Option<f64> {
        match self {
            Link::Open => None,
            Link::Wall { t } => Some((u_wall - (1.0 - t) * u_fluid) / t),
        }
    }
}

/// Options of [`GhostPoints`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GhostOptions {
    /// The smallest wall fraction used in [`Link::Wall`] (default 1e-3):
    /// a wall closer to a fluid point than `t_min h` is treated as if it
    /// were at `t_min h`. This bounds the diagonal at `beta / (t_min h^2)`
    /// (the condition number of the operator grows like `1 / t`) at the
    /// price of a wall displaced by less than `t_min h`, an error of
    /// `O(t_min h |du/dn|)` next to the wall, below the scheme's `O(h^2)`
    /// for `t_min <= h / L`.
    pub t_min: f64,
}

impl Default for GhostOptions {
    fn default() -> Self {
        GhostOptions { t_min: 1e-3 }
    }
}

/// One wall crossing: the grid line from the fluid point `point` to its
/// ghost neighbour along `axis`, `side`, crossed at `t_exact` (before
/// clamping) of the spacing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WallCrossing {
    /// The fluid point (global index, unwrapped, within the region).
    pub point: [i64; 3],
    /// The axis of the grid line.
    pub axis: usize,
    /// The side of the ghost neighbour.
    pub side: Side,
    /// Where the wall is, as a fraction of the spacing (to 1e-12).
    pub t_exact: f64,
    /// `t_exact` clamped below at `t_min`.
    pub t: f64,
}

/// The ghost-cell geometry of one staggered component on one rank's block
/// with `ghost` layers: each point's [`PointKind`] and, for fluid points,
/// the [`Link`] to each of its 6 neighbours.
///
/// **Method** (Gibou, Fedkiw, Cheng and Kang 2002, J. Comput. Phys. 176,
/// 205-227): along the grid line from a fluid point `x` to a neighbour at
/// `x + s h e_d` that is not fluid, the wall is at `x + t s h e_d`, `t` in
/// `(0, 1]` found by bracketed regula falsi (Illinois) with bisection
/// safeguards on the signed distance to `1e-12` of the spacing. The image
/// point of the ghost on that line is the fluid point itself: the linear
/// profile through `u` at `x` and `0` at the wall gives `u_ghost = -(1 -
/// t)/t u`, so the coupling `beta/h^2 (u_ghost - u)` becomes the diagonal
/// term `-beta/(t h^2) u` and the face to the ghost is cut. The operator
/// stays 7-point and symmetric (second order globally, first order in the
/// local truncation error next to the wall).
///
/// Not implemented: the classic ghost-cell method with image points
/// mirrored along the wall normal and trilinear interpolation there. Its
/// couplings reach 27 points and are not symmetric, which a 7-point
/// multigrid (`multigrid`) cannot take.
///
/// A solid thinner than the spacing between two fluid points is not seen
/// (both links stay open); where a grid line crosses the surface more than
/// once between a fluid point and a ghost, one of the crossings is found.
/// Every value is a pure function of global indices, so overlapping blocks
/// agree to the bit.
#[derive(Debug, Clone)]
pub struct GhostPoints {
    grid: MacGrid,
    region: Region,
    location: Location,
    t_min: f64,
    /// Bits 0-1: kind (0 fluid, 1 solid, 2 ghost); bits 2-7: walls by
    /// direction `2 axis + (side == Upper)`.
    flags: Vec<u8>,
    /// Start of each point's wall fractions in `t`.
    offset: Vec<u32>,
    t: Vec<f64>,
}

const FLUID: u8 = 0;
const SOLID: u8 = 1;
const GHOST: u8 = 2;

impl GhostPoints {
    /// The most points a region of ghost points may hold: a fluid point
    /// has up to 6 wall links and the links are indexed by 32-bit offsets,
    /// so `u32::MAX / 6` (715 827 882, a whole grid of up to 894^3 points).
    pub const MAX_POINTS: usize = (u32::MAX / 6) as usize;

    /// The ghost geometry of the points at `location` of `block` of `grid`
    /// with `ghost` layers, with the default [`GhostOptions`].
    pub fn new(
        body: &dyn Body,
        grid: &MacGrid,
        location: Location,
        block: IndexBox,
        ghost: usize,
    ) -> Result<Self> {
        GhostPoints::with_options(body, grid, location, block, ghost, GhostOptions::default())
    }

    /// [`GhostPoints::new`] with options. Errors: a body on a different
    /// box, a face axis above 2, the errors of [`Region::new`], a region
    /// of more than [`GhostPoints::MAX_POINTS`] points, `t_min` outside
    /// `(0, 1]`.
    pub fn with_options(
        body: &dyn Body,
        grid: &MacGrid,
        location: Location,
        block: IndexBox,
        ghost: usize,
        options: GhostOptions,
    ) -> Result<Self> {
        location.check()?;
        check_box(body, grid)?;
        let t_min = options.t_min;
        if !(t_min > 0.0 && t_min <= 1.0) {
            return Err(IbmError::TMin { value: t_min });
        }
        let region = Region::new(block, ghost, grid.shape())?;
        let n = region.len();
        if n > GhostPoints::MAX_POINTS {
            return Err(IbmError::TooLarge {
                extent: region.extent(),
                max: GhostPoints::MAX_POINTS,
                reason: "up to 6 wall links per point, indexed by 32-bit offsets",
            });
        }
        // Distances on the region widened by one layer.
        let e = region.extent();
        let w = e.map(|v| v + 2);
        let f = region.first().map(|v| v - 1);
        let wide = |k: [usize; 3]| (k[0] * w[1] + k[1]) * w[2] + k[2];
        let mut phi = vec![0.0; w[0] * w[1] * w[2]];
        for k0 in 0..w[0] {
            for k1 in 0..w[1] {
                for k2 in 0..w[2] {
                    let p = [f[0] + k0 as i64, f[1] + k1 as i64, f[2] + k2 as i64];
                    phi[wide([k0, k1, k2])] = body.distance(grid.point(location, p));
                }
            }
        }
        let h = grid.spacing();
        let mut flags = vec![0u8; n];
        let mut offset = vec![0u32; n];
        let mut t = Vec::new();
        for (i, flag) in flags.iter_mut().enumerate() {
            let p = region.global(i);
            let k = [0, 1, 2].map(|d| (p[d] - f[d]) as usize);
            let here = phi[wide(k)];
            offset[i] = t.len() as u32;
            let mut mask = 0u8;
            let mut fluid_nb = false;
            for dir in 0..6 {
                let (axis, side) = (dir / 2, dir % 2);
                let mut kn = k;
                kn[axis] = if side == 1 { k[axis] + 1 } else { k[axis] - 1 };
                let there = phi[wide(kn)];
                if here > 0.0 && there <= 0.0 {
                    let s = if side == 1 { 1.0 } else { -1.0 };
                    let x = grid.point(location, p);
                    t.push(crossing(body, x, axis, s * h[axis], here, there));
                    mask |= 1 << dir;
                }
                fluid_nb |= there > 0.0;
            }
            *flag = if here > 0.0 {
                FLUID
            } else if fluid_nb {
                GHOST
            } else {
                SOLID
            } | (mask << 2);
        }
        Ok(GhostPoints {
            grid: *grid,
            region,
            location,
            t_min,
            flags,
            offset,
            t,
        })
    }

    /// The grid.
    pub fn grid(&self) -> &MacGrid {
        &self.grid
    }

    /// The block, its ghost layers and the layout.
    pub fn region(&self) -> &Region {
        &self.region
    }

    /// Where the points sit.
    pub fn location(&self) -> Location {
        self.location
    }

    /// The smallest wall fraction used in the links.
    pub fn t_min(&self) -> f64 {
        self.t_min
    }

    /// The kind of point `p` (global index, wrapped), or `None` when the
    /// region does not hold it.
    #[inline]
    pub fn kind(&self, p: [i64; 3]) -> Option<PointKind> {
        self.region.index(p).map(|i| decode(self.flags[i]))
    }

    /// The link of point `p` to its neighbour along `axis` on `side`
    /// (`Open` unless `p` is fluid and the neighbour is not), or `None`
    /// when `axis > 2` or the region does not hold `p`.
    #[inline]
    pub fn link(&self, p: [i64; 3], axis: usize, side: Side) -> Option<Link> {
        if axis > 2 {
            return None;
        }
        let i = self.region.index(p)?;
        let dir = 2 * axis + usize::from(side == Side::Upper);
        Some(self.link_at(i, dir))
    }

    /// The 6 links of point `p` in the order `(axis 0, Lower), (axis 0,
    /// Upper), (axis 1, Lower), ...`, or `None` outside the region.
    #[inline]
    pub fn links(&self, p: [i64; 3]) -> Option<[Link; 6]> {
        let i = self.region.index(p)?;
        Some(std::array::from_fn(|dir| self.link_at(i, dir)))
    }

    #[inline]
    fn link_at(&self, i: usize, dir: usize) -> Link {
        let mask = self.flags[i] >> 2;
        if mask & (1 << dir) == 0 {
            return Link::Open;
        }
        let rank = (mask & ((1u8 << dir) - 1)).count_ones() as usize;
        Link::Wall {
            t: self.t[self.offset[i] as usize + rank].max(self.t_min),
        }
    }

    /// The kinds of all points in the layout of [`Region`].
    pub fn kinds(&self) -> impl Iterator<Item = PointKind> + '_ {
        self.flags.iter().map(|&f| decode(f))
    }

    /// Counts of `[Fluid, Solid, Ghost]` points in the owned block.
    pub fn counts(&self) -> [usize; 3] {
        let mut c = [0; 3];
        for i in self.region.owned() {
            c[(self.flags[i] & 3) as usize] += 1;
        }
        c
    }

    /// Every wall crossing of the region, point by point in the layout of
    /// [`Region`], directions in the order of [`GhostPoints::links`].
    pub fn crossings(&self) -> impl Iterator<Item = WallCrossing> + '_ {
        (0..self.flags.len()).flat_map(move |i| {
            let mask = self.flags[i] >> 2;
            let p = self.region.global(i);
            let off = self.offset[i] as usize;
            (0..6)
                .filter(move |dir| mask & (1 << dir) != 0)
                .enumerate()
                .map(move |(r, dir)| {
                    let t_exact = self.t[off + r];
                    WallCrossing {
                        point: p,
                        axis: dir / 2,
                        side: if dir % 2 == 1 {
                            Side::Upper
                        } else {
                            Side::Lower
                        },
                        t_exact,
                        t: t_exact.max(self.t_min),
                    }
                })
        })
    }
}

fn decode(f: u8) -> PointKind {
    match f & 3 {
        FLUID => PointKind::Fluid,
        SOLID => PointKind::Solid,
        _ => PointKind::Ghost,
    }
}

/// The root `t` in `(0, 1]` of `tau -> distance(x + tau step e_axis)`, with
/// `f(0) = f0 > 0` and `f(1) = f1 <= 0` (the values at the grid points, so
/// the bracket agrees with the classification), to `1e-12`: Illinois
/// regula falsi, with a bisection step whenever two steps did not halve
/// the bracket.
fn crossing(body: &dyn Body, x: [f64; 3], axis: usize, step: f64, f0: f64, f1: f64) -> f64 {
    const TOL: f64 = 1e-12;
    if f1 == 0.0 {
        return 1.0;
    }
    let f = |tau: f64| {
        let mut y = x;
        y[axis] = x[axis] + tau * step;
        body.distance(y)
    };
    let (mut a, mut fa, mut b, mut fb) = (0.0f64, f0, 1.0f64, f1);
    let mut last = 0i8;
    let mut widths = [1.0f64; 2];
    for it in 0..200 {
        let width = b - a;
        if width <= TOL {
            break;
        }
        let stalled = it >= 2 && width > 0.5 * widths[0];
        widths = [widths[1], width];
        let mut c = (a * fb - b * fa) / (fb - fa);
        if stalled || !(c > a && c < b) {
            c = 0.5 * (a + b);
            last = 0;
        }
        let fc = f(c);
        if fc > 0.0 {
            a = c;
            fa = fc;
            if last == 1 {
                fb *= 0.5;
            }
            last = 1;
        } else if fc < 0.0 {
            b = c;
            fb = fc;
            if last == -1 {
                fa *= 0.5;
            }
            last = -1;
        } else {
            return c;
        }
    }
    let c = (a * fb - b * fa) / (fb - fa);
    if c > a && c < b {
        c
    } else {
        0.5 * (a + b)
    }
}
