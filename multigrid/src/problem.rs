//! The problem: shape, box, boundary conditions and face coefficients.

use crate::MgError;
use std::fmt;
use std::sync::Arc;

/// Boundary condition of one face of the box.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Boundary {
    /// Periodic (must be given on both faces of an axis).
    Periodic,
    /// Dirichlet: `u` prescribed on the face, which lies half a cell beyond
    /// the outermost cell centres. The operator is homogeneous (`u = 0`);
    /// a non-zero value enters the right-hand side through
    /// [`Hierarchy::add_boundary_values`](crate::Hierarchy::add_boundary_values).
    Dirichlet,
    /// Neumann: the outward normal derivative prescribed on the face
    /// (homogeneous in the operator, values through
    /// [`Hierarchy::add_boundary_values`](crate::Hierarchy::add_boundary_values)).
    Neumann,
}

/// A face-coefficient function `beta(axis, p)`: the coefficient on the
/// **lower** face along `axis` of the cell with global fine-level index `p`
/// (the face between cells `p - e_axis` and `p`). `p[axis]` runs over
/// `0..=shape[axis]` on non-periodic axes (`0` and `shape[axis]` are the
/// walls) and `0..shape[axis]` on periodic ones; the other two indices run
/// over the cells. Values must be finite and non-negative; a zero face is
/// closed (no flux: a cut-cell aperture of a solid face).
pub type FaceCoefficient = Arc<dyn Fn(usize, [usize; 3]) -> f64 + Send + Sync>;

/// A cell-coefficient function `alpha(p)` of the global fine-level cell
/// `p`: the shift of `alpha u - div(beta grad u) = f` (a Helmholtz operator,
/// such as `1/dt - nu lap` of an implicit diffusion step). Values must be
/// finite and non-negative.
pub type CellCoefficient = Arc<dyn Fn([usize; 3]) -> f64 + Send + Sync>;

/// The cell-centred problem `-div(beta grad u) = f` (`beta = 1`: the
/// Poisson equation `-Δu = f`) on a box of cells, discretised by the
/// 7-point stencil with face coefficients.
#[derive(Clone)]
pub struct Poisson {
    /// Global number of cells per axis.
    pub shape: [usize; 3],
    /// Box lengths per axis.
    pub lengths: [f64; 3],
    faces: [[Boundary; 2]; 3],
    coefficient: Option<FaceCoefficient>,
    shift: Option<CellCoefficient>,
}

impl fmt::Debug for Poisson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Poisson")
            .field("shape", &self.shape)
            .field("lengths", &self.lengths)
            .field("faces", &self.faces)
            .field(
                "coefficient",
                &if self.coefficient.is_some() {
                    "variable"
                } else {
                    "constant 1"
                },
            )
            .field("shift", &self.shift.is_some())
            .finish()
    }
}

impl Poisson {
    /// A validated constant-coefficient problem with the same condition on
    /// both faces of each axis.
    ///
    /// # Errors
    /// [`MgError::Invalid`] for a zero extent or a non-positive or
    /// non-finite length.
    pub fn new(shape: [usize; 3], lengths: [f64; 3], bc: [Boundary; 3]) -> Result<Self, MgError> {
        Self::with_faces(shape, lengths, bc.map(|b| [b, b]))
    }

    /// A validated constant-coefficient problem with a condition per face:
    /// `faces[axis] = [low, high]`.
    ///
    /// # Errors
    /// [`MgError::Invalid`] for a zero extent, a non-positive or non-finite
    /// length, or an axis periodic on one face only.
    pub fn with_faces(
        shape: [usize; 3],
        lengths: [f64; 3],
        faces: [[Boundary; 2]; 3],
    ) -> Result<Self, MgError> {
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
        for (d, f) in faces.iter().enumerate() {
            if (f[0] == Boundary::Periodic) != (f[1] == Boundary::Periodic) {
                return Err(MgError::Invalid(format!(
                    "inconsistent boundary specification on axis {d}: low face {:?}, high face {:?}; \
                     a periodic axis must be periodic on both faces",
                    f[0], f[1]
                )));
            }
        }
        Ok(Poisson {
            shape,
            lengths,
            faces,
            coefficient: None,
            shift: None,
        })
    }

    /// The same problem with variable face coefficients (see
    /// [`FaceCoefficient`]; they are checked when a hierarchy is built).
    pub fn with_coefficient(mut self, beta: FaceCoefficient) -> Self {
        self.coefficient = Some(beta);
        self
    }

    /// The same problem with the shift `alpha` (see [`CellCoefficient`]):
    /// the operator becomes `alpha u - div(beta grad u)`. Coarse cells take
    /// the mean of the eight fine cells they cover (the restriction is the
    /// 8-cell average, so this is the coarse operator of the averaged
    /// equation). Checked when a hierarchy is built.
    pub fn with_shift(mut self, alpha: CellCoefficient) -> Self {
        self.shift = Some(alpha);
        self
    }

    /// Whether a shift was given ([`with_shift`](Self::with_shift)).
    pub fn has_shift(&self) -> bool {
        self.shift.is_some()
    }

    /// The boundary conditions, `[axis][low, high]`.
    pub fn faces(&self) -> [[Boundary; 2]; 3] {
        self.faces
    }

    /// Whether the coefficients vary (a [`FaceCoefficient`] was given).
    pub fn has_variable_coefficient(&self) -> bool {
        self.coefficient.is_some()
    }

    /// Cell sizes.
    pub fn h(&self) -> [f64; 3] {
        [0, 1, 2].map(|d| self.lengths[d] / self.shape[d] as f64)
    }

    /// Which axes are periodic (for [`comm::ProcessGrid`]).
    pub fn periodic(&self) -> [bool; 3] {
        self.faces.map(|f| f[0] == Boundary::Periodic)
    }

    /// Whether the operator is singular: no face is Dirichlet (every face
    /// periodic or Neumann) and there is no shift, so constants are in its
    /// null space. (With closed faces a shift-free operator may have more
    /// null vectors, one per closed-off region; the solvers handle a
    /// right-hand side that sums to zero over each of them.)
    pub fn is_singular(&self) -> bool {
        self.shift.is_none()
            && self
                .faces
                .iter()
                .flatten()
                .all(|&b| b != Boundary::Dirichlet)
    }

    /// Whether the stencil needs per-cell weights (variable faces or a shift).
    pub(crate) fn is_variable(&self) -> bool {
        self.coefficient.is_some() || self.shift.is_some()
    }

    /// The shift at level `level` of the level cell `p` (inside the box):
    /// the fine value, or the fixed-order mean of the eight cells below.
    pub(crate) fn alpha(&self, level: usize, p: [i64; 3]) -> f64 {
        let Some(alpha) = &self.shift else {
            return 0.0;
        };
        let n = self.shape.map(|x| (x >> level) as i64);
        let per = self.periodic();
        let mut q = [0i64; 3];
        for e in 0..3 {
            q[e] = if per[e] { p[e].rem_euclid(n[e]) } else { p[e] };
            if q[e] < 0 || q[e] >= n[e] {
                return 0.0;
            }
        }
        alpha_rec(alpha.as_ref(), level, q)
    }

    /// The centre of the cell with global index `p`.
    pub fn cell_centre(&self, p: [usize; 3]) -> [f64; 3] {
        let h = self.h();
        [0, 1, 2].map(|d| (p[d] as f64 + 0.5) * h[d])
    }

    /// The centre of the lower face along `axis` of cell `p` (`p[axis]` may
    /// equal `shape[axis]`: the high wall).
    pub fn face_centre(&self, axis: usize, p: [usize; 3]) -> [f64; 3] {
        let mut x = self.cell_centre(p);
        x[axis] -= 0.5 * self.h()[axis];
        x
    }

    /// The face coefficient at level `level` (global shape `shape >> level`)
    /// on the lower face along `d` of the level cell `p` (indices may lie
    /// one cell outside the box: periodic axes wrap; anything else outside
    /// returns 0). Coarse faces average the four fine faces they cover.
    pub(crate) fn beta(&self, level: usize, d: usize, p: [i64; 3]) -> f64 {
        let Some(beta) = &self.coefficient else {
            return 1.0;
        };
        let n = self.shape.map(|x| (x >> level) as i64);
        let per = self.periodic();
        let mut q = [0i64; 3];
        for e in 0..3 {
            let hi = if e == d && !per[e] { n[e] + 1 } else { n[e] };
            q[e] = if per[e] { p[e].rem_euclid(n[e]) } else { p[e] };
            if q[e] < 0 || q[e] >= hi {
                return 0.0;
            }
        }
        beta_rec(beta.as_ref(), level, d, q)
    }

    /// Checks the shift of the fine cells `lo..hi` (global indices) and
    /// the coefficients of their lower faces, with the high wall faces
    /// where the box reaches a non-periodic high wall: finite and
    /// non-negative. The boxes of a decomposition together cover every
    /// cell and every face once, so each rank checks only its own; the
    /// first bad value of the box is named.
    pub(crate) fn scan_coefficients(
        &self,
        lo: [usize; 3],
        hi: [usize; 3],
    ) -> Result<Scan, MgError> {
        let mut scan = Scan::default();
        if let Some(alpha) = &self.shift {
            for i in lo[0]..hi[0] {
                for j in lo[1]..hi[1] {
                    for k in lo[2]..hi[2] {
                        let v = alpha([i, j, k]);
                        if !(v.is_finite() && v >= 0.0) {
                            return Err(MgError::Invalid(format!(
                                "shift {v} at cell {:?} must be finite and non-negative",
                                [i, j, k]
                            )));
                        }
                        scan.positive_shift |= v > 0.0;
                    }
                }
            }
        }
        let Some(beta) = &self.coefficient else {
            return Ok(scan);
        };
        let per = self.periodic();
        for d in 0..3 {
            let mut top = hi;
            if !per[d] && hi[d] == self.shape[d] {
                top[d] += 1;
            }
            for i in lo[0]..top[0] {
                for j in lo[1]..top[1] {
                    for k in lo[2]..top[2] {
                        let v = beta(d, [i, j, k]);
                        scan.closed |= v == 0.0;
                        if !(v.is_finite() && v >= 0.0) {
                            return Err(MgError::Invalid(format!(
                                "face coefficient {v} on axis {d} at face index {:?} must be finite and non-negative",
                                [i, j, k]
                            )));
                        }
                    }
                }
            }
        }
        Ok(scan)
    }

    /// Refuses a shift that is 0 in every cell (`positive`: whether any
    /// rank's [`Scan`] found a positive one) of a problem without a
    /// Dirichlet face: such an operator is singular, which
    /// [`is_singular`](Self::is_singular) (and the solvers' handling of the
    /// null space) takes only from the absence of a shift.
    pub(crate) fn check_shift_fixes(&self, positive: bool) -> Result<(), MgError> {
        let dirichlet = self
            .faces
            .iter()
            .flatten()
            .any(|&b| b == Boundary::Dirichlet);
        if self.shift.is_some() && !positive && !dirichlet {
            return Err(MgError::Invalid(
                "the shift is 0 in every cell and no face is Dirichlet, so the operator \
                 is singular: leave the shift out (the solvers then handle the constant \
                 null space) or make it positive somewhere"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// What [`Poisson::scan_coefficients`] found in one box.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Scan {
    /// Some cell of the box has a positive shift.
    pub positive_shift: bool,
    /// Some face of the box has coefficient 0 (is closed).
    pub closed: bool,
}

impl Poisson {
    /// Checks that every region of cells joined by open faces (coefficient
    /// above 0) has a positive shift somewhere or an open face on a
    /// Dirichlet wall, where the problem is not declared singular: a region
    /// closed off from every Dirichlet face by closed faces, with a zero
    /// shift throughout, holds a constant null vector the problem does not
    /// declare (its solution is fixed only up to that constant, and a
    /// right-hand side with a non-zero sum over it has none). A single cell
    /// with every face closed and no shift is no such region: the solvers
    /// hold it at 0. Only a [`FaceCoefficient`] can close faces, and
    /// `closed` says whether it closes any (from the ranks'
    /// [`scan_coefficients`](Self::scan_coefficients)): without a closed
    /// face the box is one region, which has a Dirichlet face or a positive
    /// shift. Otherwise the cells that fix their region's constant are
    /// marked first; then each region of the other cells is walked once,
    /// breadth first over its open faces, and one that meets no fixing
    /// cell and has an open face is named in the error. Memory: one bit a
    /// cell of the whole grid and the walk's front; the hierarchy runs it
    /// on rank 0 only.
    pub(crate) fn check_closed_regions(&self, closed: bool) -> Result<(), MgError> {
        let Some(beta) = &self.coefficient else {
            return Ok(());
        };
        if self.is_singular() || !closed {
            return Ok(());
        }
        let n = self.shape;
        let m = n[0] * n[1] * n[2];
        let per = self.periodic();
        let idx = |p: [usize; 3]| (p[0] * n[1] + p[1]) * n[2] + p[2];
        let cell = |i: usize| [i / (n[1] * n[2]), (i / n[2]) % n[1], i % n[2]];
        // The neighbour of `p` across its face `side` (0 lower, 1 upper)
        // along `d` and that face's coefficient; `None` past a wall.
        let across = |p: [usize; 3], d: usize, side: usize| -> Option<([usize; 3], f64)> {
            let mut face = p;
            face[d] += side;
            let mut q = p;
            if side == 0 {
                if p[d] == 0 {
                    if !per[d] {
                        return None;
                    }
                    q[d] = n[d] - 1;
                } else {
                    q[d] -= 1;
                }
            } else if p[d] + 1 == n[d] {
                if !per[d] {
                    return None;
                }
                face[d] = 0;
                q[d] = 0;
            } else {
                q[d] += 1;
            }
            Some((q, beta(d, face)))
        };
        // Whether cell `p` fixes its region's constant: a positive shift,
        // or an open face on a Dirichlet wall.
        let fixes = |p: [usize; 3]| {
            self.shift.as_ref().is_some_and(|a| a(p) > 0.0)
                || (0..3).any(|d| {
                    let lo =
                        p[d] == 0 && self.faces[d][0] == Boundary::Dirichlet && beta(d, p) > 0.0;
                    let mut up = p;
                    up[d] += 1;
                    let hi = p[d] + 1 == n[d]
                        && self.faces[d][1] == Boundary::Dirichlet
                        && beta(d, up) > 0.0;
                    lo || hi
                })
        };
        let mut seen = vec![0u64; m.div_ceil(64)];
        let is = |r: &[u64], i: usize| r[i / 64] & (1 << (i % 64)) != 0;
        let mut left = 0usize;
        for i in 0..m {
            if fixes(cell(i)) {
                seen[i / 64] |= 1 << (i % 64);
            } else {
                left += 1;
            }
        }
        if left == 0 {
            return Ok(());
        }
        // A marked cell met by a walk is a fixing one or a cell of the
        // region being walked (regions are disjoint): `fixes` tells which.
        let mut queue = std::collections::VecDeque::new();
        for start in 0..m {
            if is(&seen, start) {
                continue;
            }
            seen[start / 64] |= 1 << (start % 64);
            queue.push_back(start);
            let (mut fixed, mut open) = (false, false);
            while let Some(i) = queue.pop_front() {
                let p = cell(i);
                for d in 0..3 {
                    for side in 0..2 {
                        let Some((q, b)) = across(p, d, side) else {
                            continue;
                        };
                        if b <= 0.0 {
                            continue;
                        }
                        open = true;
                        let j = idx(q);
                        if !is(&seen, j) {
                            seen[j / 64] |= 1 << (j % 64);
                            queue.push_back(j);
                        } else if !fixed && fixes(q) {
                            fixed = true;
                        }
                    }
                }
            }
            if open && !fixed {
                return Err(MgError::Invalid(format!(
                    "cell {:?} lies in a region with zero shift closed off from every Dirichlet \
                     face by closed faces (coefficient 0): the operator is singular there (a \
                     constant on the region is a null vector); give the region a positive shift \
                     somewhere or open one of its faces",
                    cell(start)
                )));
            }
        }
        Ok(())
    }
}

/// The coefficient of a coarse face as the (fixed-order) mean of the four
/// fine faces it covers.
fn beta_rec(
    beta: &(dyn Fn(usize, [usize; 3]) -> f64 + Send + Sync),
    level: usize,
    d: usize,
    p: [i64; 3],
) -> f64 {
    if level == 0 {
        return beta(d, p.map(|x| x as usize));
    }
    let (a, b) = ((d + 1) % 3, (d + 2) % 3);
    let mut v = [0.0; 4];
    for (t, (s, r)) in [(0, 0), (0, 1), (1, 0), (1, 1)].into_iter().enumerate() {
        let mut q = p;
        q[d] = 2 * p[d];
        q[a] = 2 * p[a] + s;
        q[b] = 2 * p[b] + r;
        v[t] = beta_rec(beta, level - 1, d, q);
    }
    0.25 * ((v[0] + v[1]) + (v[2] + v[3]))
}

/// The shift of a coarse cell as the (fixed-order) mean of the eight fine
/// cells it covers.
fn alpha_rec(alpha: &(dyn Fn([usize; 3]) -> f64 + Send + Sync), level: usize, p: [i64; 3]) -> f64 {
    if level == 0 {
        return alpha(p.map(|x| x as usize));
    }
    let mut v = [0.0; 8];
    for (t, o) in v.iter_mut().enumerate() {
        let q = [0, 1, 2].map(|d| 2 * p[d] + ((t >> (2 - d)) & 1) as i64);
        *o = alpha_rec(alpha, level - 1, q);
    }
    0.125 * (((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])))
}
