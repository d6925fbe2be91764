//! The problem: shape, box, boundary conditions and face coefficients.

use crate::coef::{self, BoxCoef, Coefficients};
use crate::MgError;
use comm::IndexBox;
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
    /// Coefficients given as data ([`Coefficients`]) to the hierarchy
    /// holding this copy: (faces, shift).
    data: (bool, bool),
}

impl fmt::Debug for Poisson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Poisson")
            .field("shape", &self.shape)
            .field("lengths", &self.lengths)
            .field("faces", &self.faces)
            .field(
                "coefficient",
                &if self.has_variable_coefficient() {
                    "variable"
                } else {
                    "constant 1"
                },
            )
            .field("shift", &self.has_shift())
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
            data: (false, false),
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

    /// Whether a shift was given ([`with_shift`](Self::with_shift), or as
    /// data to the hierarchy this problem belongs to).
    pub fn has_shift(&self) -> bool {
        self.shift.is_some() || self.data.1
    }

    /// The boundary conditions, `[axis][low, high]`.
    pub fn faces(&self) -> [[Boundary; 2]; 3] {
        self.faces
    }

    /// Whether the coefficients vary (a [`FaceCoefficient`] was given, or
    /// face coefficients as data to the hierarchy this problem belongs to).
    pub fn has_variable_coefficient(&self) -> bool {
        self.coefficient.is_some() || self.data.0
    }

    /// Whether coefficient functions were given.
    pub(crate) fn has_functions(&self) -> bool {
        self.coefficient.is_some() || self.shift.is_some()
    }

    /// This problem as the hierarchy built with `data` holds it: the
    /// functions dropped (they were evaluated into `data`), what `data`
    /// holds recorded.
    pub(crate) fn with_data(&self, data: &Coefficients) -> Self {
        Poisson {
            coefficient: None,
            shift: None,
            data: (data.has_faces(), data.has_shift()),
            ..self.clone()
        }
    }

    /// The faces along `axis` whose coefficients the data of the block of
    /// cells `cells` holds ([`Coefficients`]): the lower face of each of
    /// its cells and, where the block reaches a non-periodic high wall
    /// along `axis`, the wall face as well (so the boxes of a
    /// decomposition hold every face once).
    pub fn face_box(&self, cells: &IndexBox, axis: usize) -> IndexBox {
        coef::face_box(cells, self.shape, self.periodic(), axis)
    }

    /// The coefficient functions ([`with_coefficient`](Self::with_coefficient),
    /// [`with_shift`](Self::with_shift)) evaluated over the block of cells
    /// `cells`, in the layout [`Coefficients`] describes; constant
    /// coefficients where none were given.
    pub fn coefficients_on(&self, cells: &IndexBox) -> Coefficients {
        let mut c = Coefficients::constant();
        let fill = |b: IndexBox, f: &dyn Fn([usize; 3]) -> f64| {
            let mut v = Vec::with_capacity(b.len());
            for i in b.lo[0]..b.hi[0] {
                for j in b.lo[1]..b.hi[1] {
                    for k in b.lo[2]..b.hi[2] {
                        v.push(f([i, j, k]));
                    }
                }
            }
            v
        };
        if let Some(beta) = &self.coefficient {
            c = c.with_faces(std::array::from_fn(|d| {
                fill(self.face_box(cells, d), &|p| beta(d, p))
            }));
        }
        if let Some(alpha) = &self.shift {
            c = c.with_shift(fill(*cells, &|p| alpha(p)));
        }
        c
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
        !self.has_shift()
            && self
                .faces
                .iter()
                .flatten()
                .all(|&b| b != Boundary::Dirichlet)
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
        if self.has_shift() && !positive && !dirichlet {
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

/// What [`scan`] found in one box.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Scan {
    /// Some cell of the box has a positive shift.
    pub positive_shift: bool,
    /// Some face of the box has coefficient 0 (is closed).
    pub closed: bool,
    /// Every cell of the box has a positive shift.
    pub all_shifted: bool,
}

/// Checks the fine coefficients of one rank's block: the shift of its
/// cells, then per axis its faces (the lower faces of its cells, with the
/// high wall faces where the block reaches a non-periodic high wall):
/// finite and non-negative. The boxes of a decomposition together cover
/// every cell and every face once, so each rank checks only its own; the
/// first bad value of the box is named, by its global index.
pub(crate) fn scan(c: &BoxCoef) -> Result<Scan, MgError> {
    let mut scan = Scan {
        all_shifted: c.shift.is_some(),
        ..Scan::default()
    };
    let b = c.cells;
    if c.shift.is_some() {
        for i in b.lo[0]..b.hi[0] {
            for j in b.lo[1]..b.hi[1] {
                for k in b.lo[2]..b.hi[2] {
                    let v = c.alpha([i, j, k]);
                    if !(v.is_finite() && v >= 0.0) {
                        return Err(MgError::Invalid(format!(
                            "shift {v} at cell {:?} must be finite and non-negative",
                            [i, j, k]
                        )));
                    }
                    scan.positive_shift |= v > 0.0;
                    scan.all_shifted &= v > 0.0;
                }
            }
        }
    }
    if c.faces.is_none() {
        return Ok(scan);
    }
    for d in 0..3 {
        let f = c.face_box(d);
        for i in f.lo[0]..f.hi[0] {
            for j in f.lo[1]..f.hi[1] {
                for k in f.lo[2]..f.hi[2] {
                    let v = c.face(d, [i, j, k]);
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

/// Bits of [`open_bits`]: the lower face along `d` is open (`1 << d`), the
/// cell has a positive shift (`SHIFTED`), the high wall face along `d` is
/// open (`HIGH << d`, cells next to a non-periodic high wall only).
const SHIFTED: u8 = 1 << 3;
const HIGH: u8 = 1 << 4;

/// What [`Poisson::check_closed_regions`] reads of one box of fine cells:
/// a byte a cell (row-major), see [`SHIFTED`] and [`HIGH`].
pub(crate) fn open_bits(c: &BoxCoef) -> Vec<u8> {
    let b = c.cells;
    let mut v = Vec::with_capacity(b.len());
    for i in b.lo[0]..b.hi[0] {
        for j in b.lo[1]..b.hi[1] {
            for k in b.lo[2]..b.hi[2] {
                let p = [i, j, k];
                let mut x = 0u8;
                for d in 0..3 {
                    if c.face(d, p) > 0.0 {
                        x |= 1 << d;
                    }
                    if !c.periodic[d] && p[d] + 1 == c.global[d] {
                        let mut up = p;
                        up[d] += 1;
                        if c.face(d, up) > 0.0 {
                            x |= HIGH << d;
                        }
                    }
                }
                if c.alpha(p) > 0.0 {
                    x |= SHIFTED;
                }
                v.push(x);
            }
        }
    }
    v
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
    /// hold it at 0. `bits` are the [`open_bits`] of the whole fine grid
    /// (the hierarchy gathers them on rank 0 where some face is closed and
    /// some cell has no positive shift). The cells that fix their region's
    /// constant are marked first; then each region of the other cells is
    /// walked once, breadth first over its open faces, and one that meets
    /// no fixing cell and has an open face is named in the error. Memory:
    /// the byte a cell, one bit a cell and the walk's front.
    pub(crate) fn check_closed_regions(&self, bits: &[u8]) -> Result<(), MgError> {
        let n = self.shape;
        let m = n[0] * n[1] * n[2];
        debug_assert_eq!(bits.len(), m);
        let per = self.periodic();
        let idx = |p: [usize; 3]| (p[0] * n[1] + p[1]) * n[2] + p[2];
        let cell = |i: usize| [i / (n[1] * n[2]), (i / n[2]) % n[1], i % n[2]];
        // The neighbour of `p` across its face `side` (0 lower, 1 upper)
        // along `d` and whether that face is open; `None` past a wall. The
        // upper face of `p` is the lower face of that neighbour.
        let across = |p: [usize; 3], d: usize, side: usize| -> Option<([usize; 3], bool)> {
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
                Some((q, bits[idx(p)] & (1 << d) != 0))
            } else {
                if p[d] + 1 == n[d] {
                    if !per[d] {
                        return None;
                    }
                    q[d] = 0;
                } else {
                    q[d] += 1;
                }
                Some((q, bits[idx(q)] & (1 << d) != 0))
            }
        };
        // Whether cell `p` fixes its region's constant: a positive shift,
        // or an open face on a Dirichlet wall.
        let fixes = |p: [usize; 3]| {
            let b = bits[idx(p)];
            b & SHIFTED != 0
                || (0..3).any(|d| {
                    let lo =
                        p[d] == 0 && self.faces[d][0] == Boundary::Dirichlet && b & (1 << d) != 0;
                    let hi = p[d] + 1 == n[d]
                        && self.faces[d][1] == Boundary::Dirichlet
                        && b & (HIGH << d) != 0;
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
                        let Some((q, o)) = across(p, d, side) else {
                            continue;
                        };
                        if !o {
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
