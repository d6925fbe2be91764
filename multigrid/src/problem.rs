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
/// over the cells. Values must be finite and positive.
pub type FaceCoefficient = Arc<dyn Fn(usize, [usize; 3]) -> f64 + Send + Sync>;

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
        })
    }

    /// The same problem with variable face coefficients (see
    /// [`FaceCoefficient`]; they are checked when a hierarchy is built).
    pub fn with_coefficient(mut self, beta: FaceCoefficient) -> Self {
        self.coefficient = Some(beta);
        self
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
    /// periodic or Neumann), so constants are in its null space.
    pub fn is_singular(&self) -> bool {
        self.faces
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

    /// Checks every fine face coefficient (finite and positive).
    pub(crate) fn check_coefficient(&self) -> Result<(), MgError> {
        let Some(beta) = &self.coefficient else {
            return Ok(());
        };
        let per = self.periodic();
        for d in 0..3 {
            let mut hi = self.shape;
            if !per[d] {
                hi[d] += 1;
            }
            for i in 0..hi[0] {
                for j in 0..hi[1] {
                    for k in 0..hi[2] {
                        let v = beta(d, [i, j, k]);
                        if !(v.is_finite() && v > 0.0) {
                            return Err(MgError::Invalid(format!(
                                "face coefficient {v} on axis {d} at face index {:?} must be positive and finite",
                                [i, j, k]
                            )));
                        }
                    }
                }
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
