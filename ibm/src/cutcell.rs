//! Cut-cell geometry: fluid volume fractions and face apertures.

use crate::body::Body;
use crate::grid::{MacGrid, Region};
use crate::{IbmError, Result};
use comm::IndexBox;

/// The deepest sub-sampling [`CutOptions::depth`] accepted.
pub const MAX_DEPTH: u32 = 5;

/// How cut cells are integrated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CutOptions {
    /// Bisection levels below the grid cell (default 1: leaves of `h / 2`),
    /// at most [`MAX_DEPTH`]. The error of a fraction is second order in
    /// the leaf size `h / 2^depth`; a cut cell costs up to `(2^depth +
    /// 1)^3` distance evaluations (27 at depth 1, 125 at depth 2).
    pub depth: u32,
}

impl Default for CutOptions {
    fn default() -> Self {
        CutOptions { depth: 1 }
    }
}

impl CutOptions {
    fn check(self) -> Result<()> {
        if self.depth > MAX_DEPTH {
            return Err(IbmError::Depth {
                value: self.depth,
                max: MAX_DEPTH,
            });
        }
        Ok(())
    }
}

/// Fluid volume fractions and face apertures of one rank's block of cells
/// and `ghost` layers around it.
///
/// **Method.** A cell (or face) whose centre is farther from the surface
/// than its half-diagonal is all fluid or all solid (the signed distance is
/// 1-Lipschitz). Otherwise it is bisected into 8 sub-cells (4 sub-faces)
/// with the same test at each level, down to [`CutOptions::depth`] levels;
/// a leaf that is still cut takes the signed distance at its corners,
/// interpolates it linearly on the 6 Kuhn tetrahedra of the cube (the 2
/// triangles of a face, split along the diagonal through its lowest
/// corner, the faces of those tetrahedra) and integrates the fluid part
/// `phi > 0` in closed form ([`simplex`]). The interpolation error of a
/// distance with surface curvature `1/R` is at most `3 l^2 / (8 R)` on a
/// leaf of size `l`, so fractions and apertures converge at second order
/// in `l = h / 2^depth` (measured in the README: fluid volume of a sphere
/// and an SC array, wetted area).
///
/// Every value is a pure function of the global (wrapped) cell index: a
/// block of any decomposition stores the same bits as any other block for
/// the cells, ghost cells included, that they share.
///
/// **Layout**: the arrays follow [`Region`] (row-major over the block plus
/// ghosts, last axis fastest; the layout of a `halo` field component).
#[derive(Debug, Clone)]
pub struct CutCells {
    grid: MacGrid,
    region: Region,
    options: CutOptions,
    theta: Vec<f64>,
    aperture: [Vec<f64>; 3],
}

impl CutCells {
    /// The geometry of `body` on `block` of `grid` with `ghost` layers,
    /// at the default [`CutOptions`].
    pub fn new(body: &dyn Body, grid: &MacGrid, block: IndexBox, ghost: usize) -> Result<Self> {
        CutCells::with_options(body, grid, block, ghost, CutOptions::default())
    }

    /// [`CutCells::new`] with options. Errors: a body on a different box,
    /// a block that is empty or outside the grid, a depth above
    /// [`MAX_DEPTH`].
    pub fn with_options(
        body: &dyn Body,
        grid: &MacGrid,
        block: IndexBox,
        ghost: usize,
        options: CutOptions,
    ) -> Result<Self> {
        options.check()?;
        check_box(body, grid)?;
        let region = Region::new(block, ghost, grid.shape())?;
        let n = region.len();
        let mut theta = Vec::with_capacity(n);
        let mut aperture = [(); 3].map(|_| Vec::with_capacity(n));
        let mut cell = Cell::new(body, grid, options.depth);
        for i in 0..n {
            cell.set(grid.wrap(region.global(i)));
            match cell.uniform() {
                Some(v) => {
                    theta.push(v);
                    for a in aperture.iter_mut() {
                        a.push(v);
                    }
                }
                None => {
                    theta.push(cell.volume(0, [0; 3]));
                    for (d, a) in aperture.iter_mut().enumerate() {
                        a.push(cell.face(d, 0, [0; 2]));
                    }
                }
            }
        }
        Ok(CutCells {
            grid: *grid,
            region,
            options,
            theta,
            aperture,
        })
    }

    /// The grid.
    pub fn grid(&self) -> &MacGrid {
        &self.grid
    }

    /// The block, its ghost layers and the array layout.
    pub fn region(&self) -> &Region {
        &self.region
    }

    /// The options the values were computed with.
    pub fn options(&self) -> CutOptions {
        self.options
    }

    /// Fluid volume fraction in `[0, 1]` of cell `p` (global index, wrapped
    /// periodically), or `None` when the region does not hold it.
    #[inline]
    pub fn volume_fraction(&self, p: [i64; 3]) -> Option<f64> {
        self.region.index(p).map(|i| self.theta[i])
    }

    /// Fluid aperture in `[0, 1]` (open fraction of the area) of the lower
    /// face along axis `d` of cell `p` (global index, wrapped), or `None`
    /// when `d > 2` or the region does not hold `p`.
    #[inline]
    pub fn aperture(&self, d: usize, p: [i64; 3]) -> Option<f64> {
        let a = self.aperture.get(d)?;
        self.region.index(p).map(|i| a[i])
    }

    /// All volume fractions in the layout of [`Region`].
    pub fn volume_fractions(&self) -> &[f64] {
        &self.theta
    }

    /// All apertures of the lower faces along `d` in the layout of
    /// [`Region`] (`None` when `d > 2`).
    pub fn apertures(&self, d: usize) -> Option<&[f64]> {
        self.aperture.get(d).map(Vec::as_slice)
    }

    /// The volume fractions of the owned block in row-major order.
    pub fn owned_volume_fractions(&self) -> impl Iterator<Item = f64> + '_ {
        self.region.owned().map(|i| self.theta[i])
    }

    /// The area vector of the wall inside cell `p` by the divergence
    /// theorem: `sum_d S_d (A(d, p + e_d) - A(d, p)) e_d` with `S_d` the
    /// area of a face normal to `d`. It points out of the solid into the
    /// fluid, and its norm is the wall area when the wall is planar in the
    /// cell. `None` unless the region holds `p` and `p + e_d` for every `d`.
    pub fn wall_area(&self, p: [i64; 3]) -> Option<[f64; 3]> {
        let h = self.grid.spacing();
        let mut v = [0.0; 3];
        for d in 0..3 {
            let mut q = p;
            q[d] += 1;
            let s = h[(d + 1) % 3] * h[(d + 2) % 3];
            v[d] = s * (self.aperture(d, q)? - self.aperture(d, p)?);
        }
        Some(v)
    }
}

pub(crate) fn check_box(body: &dyn Body, grid: &MacGrid) -> Result<()> {
    let (b, g) = (body.lengths(), grid.lengths());
    let close = (0..3).all(|d| (b[d] - g[d]).abs() <= 1e-12 * g[d]);
    if close {
        Ok(())
    } else {
        Err(IbmError::BoxMismatch { body: b, grid: g })
    }
}

/// Fluid volume fraction of cell `p` (global index, wrapped) of `grid`,
/// by the method of [`CutCells`] (the same bits); the body is assumed to
/// be on the grid's box.
pub fn cell_fluid_fraction(
    body: &dyn Body,
    grid: &MacGrid,
    p: [i64; 3],
    options: CutOptions,
) -> f64 {
    let mut cell = Cell::new(body, grid, options.depth.min(MAX_DEPTH));
    cell.set(grid.wrap(p));
    match cell.uniform() {
        Some(v) => v,
        None => cell.volume(0, [0; 3]),
    }
}

/// Fluid aperture of the lower face along `d` (0, 1 or 2; others give
/// `NaN`) of cell `p` (global index, wrapped) of `grid`, by the method of
/// [`CutCells`] (the same bits).
pub fn face_fluid_aperture(
    body: &dyn Body,
    grid: &MacGrid,
    d: usize,
    p: [i64; 3],
    options: CutOptions,
) -> f64 {
    if d > 2 {
        return f64::NAN;
    }
    let mut cell = Cell::new(body, grid, options.depth.min(MAX_DEPTH));
    cell.set(grid.wrap(p));
    match cell.uniform() {
        Some(v) => v,
        None => cell.face(d, 0, [0; 2]),
    }
}

/// One grid cell being integrated: the signed distance on the nodes of its
/// level-`depth` lattice, evaluated on first use. A node with local index
/// `m` (0 to `2^depth` per axis) sits at `(q 2^depth + m) h 2^-depth`,
/// so a node shared by two levels, two sub-cells or a cell and its faces
/// is evaluated at the same coordinates (scaling by powers of two is
/// exact), and so are the sub-cell centres of the levels above `depth`.
struct Cell<'a> {
    body: &'a dyn Body,
    depth: u32,
    h: [f64; 3],
    /// `h 2^-depth`.
    ell: [f64; 3],
    q: [usize; 3],
    side: usize,
    vals: Vec<f64>,
    stamp: Vec<u32>,
    generation: u32,
}

impl<'a> Cell<'a> {
    fn new(body: &'a dyn Body, grid: &MacGrid, depth: u32) -> Self {
        let side = (1usize << depth) + 1;
        let h = grid.spacing();
        Cell {
            body,
            depth,
            h,
            ell: level_spacing(h, depth),
            q: [0; 3],
            side,
            vals: vec![0.0; side * side * side],
            stamp: vec![0; side * side * side],
            generation: 0,
        }
    }

    fn set(&mut self, q: [usize; 3]) {
        self.q = q;
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamp.fill(0);
            self.generation = 1;
        }
    }

    /// The distance at local node `m` of the level-`depth` lattice.
    #[inline]
    fn node(&mut self, m: [usize; 3]) -> f64 {
        let i = (m[0] * self.side + m[1]) * self.side + m[2];
        if self.stamp[i] != self.generation {
            let x = [0, 1, 2].map(|d| ((self.q[d] << self.depth) + m[d]) as f64 * self.ell[d]);
            self.vals[i] = self.body.distance(x);
            self.stamp[i] = self.generation;
        }
        self.vals[i]
    }

    /// `Some(0)` or `Some(1)` when the whole cell is solid or fluid by the
    /// distance at its centre, else `None`.
    fn uniform(&mut self) -> Option<f64> {
        let half = level_spacing(self.h, 1);
        let centre = [0, 1, 2].map(|d| (2 * self.q[d] + 1) as f64 * half[d]);
        let dist = self.body.distance(centre);
        let hd = (half[0] * half[0] + half[1] * half[1] + half[2] * half[2]).sqrt();
        if dist > hd {
            Some(1.0)
        } else if dist < -hd {
            Some(0.0)
        } else {
            None
        }
    }

    /// Fluid fraction of the level-`k` sub-cell with local lower node `c`
    /// (in level-`k` units), known to be cut when `k == 0`.
    fn volume(&mut self, k: u32, c: [usize; 3]) -> f64 {
        if k < self.depth {
            if k > 0 {
                let shift = self.depth - k - 1;
                let m = c.map(|v| (2 * v + 1) << shift);
                let dist = self.node(m);
                let half = level_spacing(self.h, k + 1);
                let hd = (half[0] * half[0] + half[1] * half[1] + half[2] * half[2]).sqrt();
                if dist > hd {
                    return 1.0;
                }
                if dist < -hd {
                    return 0.0;
                }
            }
            let mut sum = 0.0;
            for b in 0..8usize {
                let child = [0, 1, 2].map(|d| 2 * c[d] + ((b >> (2 - d)) & 1));
                sum += self.volume(k + 1, child);
            }
            return 0.125 * sum;
        }
        let mut phi = [0.0; 8];
        for (b, v) in phi.iter_mut().enumerate() {
            *v = self.node([0, 1, 2].map(|d| c[d] + ((b >> (2 - d)) & 1)));
        }
        simplex::cube_positive_fraction(&phi)
    }

    /// Fluid fraction of the level-`k` sub-face with local lower node `c`
    /// (axes `d + 1`, `d + 2`) of the lower face along `d`.
    fn face(&mut self, d: usize, k: u32, c: [usize; 2]) -> f64 {
        let (a, b) = ((d + 1) % 3, (d + 2) % 3);
        if k < self.depth || self.depth == 0 {
            let half = level_spacing(self.h, k + 1);
            let dist = if k < self.depth {
                let shift = self.depth - k - 1;
                let mut m = [0; 3];
                m[a] = (2 * c[0] + 1) << shift;
                m[b] = (2 * c[1] + 1) << shift;
                self.node(m)
            } else {
                let mut x = [0.0; 3];
                x[d] = self.q[d] as f64 * self.h[d];
                x[a] = (2 * self.q[a] + 1) as f64 * half[a];
                x[b] = (2 * self.q[b] + 1) as f64 * half[b];
                self.body.distance(x)
            };
            let hd = (half[a] * half[a] + half[b] * half[b]).sqrt();
            if dist > hd {
                return 1.0;
            }
            if dist < -hd {
                return 0.0;
            }
            if k < self.depth {
                let mut sum = 0.0;
                for s in 0..4usize {
                    let child = [2 * c[0] + (s >> 1), 2 * c[1] + (s & 1)];
                    sum += self.face(d, k + 1, child);
                }
                return 0.25 * sum;
            }
        }
        let mut phi = [0.0; 4];
        for (s, v) in phi.iter_mut().enumerate() {
            let mut m = [0; 3];
            m[a] = c[0] + (s >> 1);
            m[b] = c[1] + (s & 1);
            *v = self.node(m);
        }
        simplex::square_positive_fraction(&phi)
    }
}

/// The spacing of level `k`: `h 2^-k` (exact).
#[inline]
fn level_spacing(h: [f64; 3], k: u32) -> [f64; 3] {
    let s = 0.5f64.powi(k as i32);
    h.map(|v| v * s)
}

/// Closed-form measures of the part of a simplex where a linear function is
/// negative (Min and Gibou 2007, in a cancellation-free form), and the
/// cube and square integrals built on them.
pub mod simplex {
    /// The magnitudes of the negative vertex values, the non-negative
    /// values (each in order, padded with zeros), and the number of
    /// negative ones.
    fn split<const N: usize>(phi: [f64; N]) -> ([f64; N], [f64; N], usize) {
        let mut neg = [0.0; N];
        let mut pos = [0.0; N];
        let (mut nn, mut np) = (0, 0);
        for v in phi {
            if v < 0.0 {
                neg[nn] = -v;
                nn += 1;
            } else {
                pos[np] = v;
                np += 1;
            }
        }
        (neg, pos, nn)
    }

    /// Fraction of a triangle where the linear interpolant of the vertex
    /// values `phi` is negative (a value of exactly 0 counts as
    /// non-negative).
    pub fn triangle_negative_fraction(phi: [f64; 3]) -> f64 {
        let (neg, pos, nn) = split(phi);
        match nn {
            0 => 0.0,
            1 => {
                let p = neg[0];
                p * p / ((pos[0] + p) * (pos[1] + p))
            }
            2 => {
                let q = pos[0];
                1.0 - q * q / ((q + neg[0]) * (q + neg[1]))
            }
            _ => 1.0,
        }
    }

    /// Fraction of a tetrahedron where the linear interpolant of the vertex
    /// values `phi` is negative (a value of exactly 0 counts as
    /// non-negative). With `p`, `q` the magnitudes of negative values and
    /// `c`, `d`, `e` the non-negative ones: one negative vertex gives
    /// `p^3 / ((c+p)(d+p)(e+p))`, three give one minus the same for the
    /// positive vertex, and two give `(cd(p^2+pq+q^2) + (c+d)pq(p+q) +
    /// p^2 q^2) / ((c+p)(d+p)(c+q)(d+q))` (the divided difference of the
    /// one-vertex formula, with no cancellation when `p` is close to `q`).
    pub fn tetrahedron_negative_fraction(phi: [f64; 4]) -> f64 {
        let (neg, pos, nn) = split(phi);
        match nn {
            0 => 0.0,
            1 => {
                let p = neg[0];
                p * p * p / ((pos[0] + p) * (pos[1] + p) * (pos[2] + p))
            }
            2 => {
                let (p, q, c, d) = (neg[0], neg[1], pos[0], pos[1]);
                let num =
                    c * d * (p * p + p * q + q * q) + (c + d) * p * q * (p + q) + p * p * q * q;
                num / ((c + p) * (d + p) * (c + q) * (d + q))
            }
            3 => {
                let q = pos[0];
                1.0 - q * q * q / ((q + neg[0]) * (q + neg[1]) * (q + neg[2]))
            }
            _ => 1.0,
        }
    }

    /// Fraction of the unit cube where the piecewise-linear interpolant of
    /// the corner values is positive; corner `b` is `(b >> 2 & 1, b >> 1 &
    /// 1, b & 1)`. The interpolant is linear on the 6 Kuhn tetrahedra
    /// `0 -> e_a -> e_a + e_b -> (1,1,1)`.
    pub fn cube_positive_fraction(phi: &[f64; 8]) -> f64 {
        const PERMS: [[usize; 3]; 6] = [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ];
        if phi.iter().all(|&v| v > 0.0) {
            return 1.0;
        }
        if phi.iter().all(|&v| v <= 0.0) {
            return 0.0;
        }
        let bit = |d: usize| 1usize << (2 - d);
        let mut sum = 0.0;
        for p in PERMS {
            let v1 = bit(p[0]);
            let v2 = v1 | bit(p[1]);
            let t = [-phi[0], -phi[v1], -phi[v2], -phi[7]];
            sum += tetrahedron_negative_fraction(t);
        }
        sum / 6.0
    }

    /// Fraction of the unit square where the piecewise-linear interpolant
    /// of the corner values is positive; corner `s` is `(s >> 1, s & 1)`,
    /// split along the diagonal from corner 0 to corner 3 (the traces of
    /// the Kuhn tetrahedra of [`cube_positive_fraction`]).
    pub fn square_positive_fraction(phi: &[f64; 4]) -> f64 {
        if phi.iter().all(|&v| v > 0.0) {
            return 1.0;
        }
        if phi.iter().all(|&v| v <= 0.0) {
            return 0.0;
        }
        let a = triangle_negative_fraction([-phi[0], -phi[2], -phi[3]]);
        let b = triangle_negative_fraction([-phi[0], -phi[1], -phi[3]]);
        0.5 * (a + b)
    }
}

#[cfg(test)]
mod tests {
    use super::simplex::*;
    use crate::rng::Xoshiro256;

    /// Monte Carlo-free check: the negative fraction of a linear function
    /// on the reference tetrahedron by fine midpoint sampling.
    fn sampled_tet(phi: [f64; 4], n: usize) -> f64 {
        // Barycentric grid over the simplex x+y+z <= 1.
        let mut inside = 0usize;
        let mut total = 0usize;
        for i in 0..n {
            for j in 0..n - i {
                for k in 0..n - i - j {
                    let (x, y, z) = (
                        (i as f64 + 0.25) / n as f64,
                        (j as f64 + 0.25) / n as f64,
                        (k as f64 + 0.25) / n as f64,
                    );
                    let w0 = 1.0 - x - y - z;
                    if w0 < 0.0 {
                        continue;
                    }
                    total += 1;
                    let v = w0 * phi[0] + x * phi[1] + y * phi[2] + z * phi[3];
                    if v < 0.0 {
                        inside += 1;
                    }
                }
            }
        }
        inside as f64 / total as f64
    }

    #[test]
    fn tetrahedron_formulas() {
        let mut rng = Xoshiro256::new(1);
        for _ in 0..40 {
            let phi = [0; 4].map(|_| 2.0 * rng.uniform() - 1.0);
            let f = tetrahedron_negative_fraction(phi);
            let g = tetrahedron_negative_fraction(phi.map(|v| -v));
            assert!((f + g - 1.0).abs() < 1e-14, "{phi:?}");
            let s = sampled_tet(phi, 120);
            assert!((f - s).abs() < 0.02, "{phi:?}: {f} vs {s}");
            // Any vertex order gives the same value.
            let r = tetrahedron_negative_fraction([phi[2], phi[0], phi[3], phi[1]]);
            assert!((f - r).abs() < 1e-14);
        }
        // The exact value for a plane through the midpoints of the edges at
        // vertex 0: phi = 2 (x+y+z) - 1 over the tetrahedron is 1/8.
        assert!((tetrahedron_negative_fraction([-1.0, 1.0, 1.0, 1.0]) - 0.125).abs() < 1e-15);
        // Two equal negatives: no cancellation.
        let f = tetrahedron_negative_fraction([-1e-300, -1e-300, 1.0, 1.0]);
        assert!(f.is_finite() && f >= 0.0);
        assert_eq!(tetrahedron_negative_fraction([-1.0, -1.0, 0.0, 0.0]), 1.0);
    }

    #[test]
    fn triangle_and_square() {
        assert!((triangle_negative_fraction([-1.0, 1.0, 1.0]) - 0.25).abs() < 1e-15);
        assert!((triangle_negative_fraction([1.0, -1.0, -1.0]) - 0.75).abs() < 1e-15);
        // A plane x + 0.3 y - 0.4 (positive side) through the unit square:
        // the interpolant is exact, the positive area is exact.
        let f = |x: f64, y: f64| x + 0.3 * y - 0.4;
        let phi = [f(0.0, 0.0), f(0.0, 1.0), f(1.0, 0.0), f(1.0, 1.0)];
        // Area where x > 0.4 - 0.3 y: the integral of 0.6 + 0.3 y is 0.75.
        assert!((square_positive_fraction(&phi) - 0.75).abs() < 1e-14);
        // A cube cut by a plane: fraction of x + y + z > 1.2.
        let g = |b: usize| ((b >> 2) & 1) as f64 + ((b >> 1) & 1) as f64 + (b & 1) as f64 - 1.2;
        let phi: [f64; 8] = std::array::from_fn(g);
        // Exact: the volume where s = x+y+z > 1.2 is 1 - F(1.2) with the
        // Irwin-Hall CDF F(s) = s^3/6 - (s-1)^3/2 for 1 <= s <= 2.
        let exact = 1.0 - (1.2f64.powi(3) / 6.0 - 0.2f64.powi(3) / 2.0);
        assert!((cube_positive_fraction(&phi) - exact).abs() < 1e-14);
    }
}
