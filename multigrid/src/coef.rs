//! The coefficients as data: what a rank holds of one level's face
//! coefficients and shift, how a coarse level's are made from a fine
//! level's on the same rank, and how they move between decompositions.
//!
//! The solver reads nothing else: the face coefficient functions of a
//! [`Poisson`] only fill the fine level's arrays, once, over the rank's
//! block ([`Poisson::coefficients_on`]).

use crate::problem::Poisson;
use crate::MgError;
use comm::{Communicator, Elem, IndexBox, Protocol, Redistribution, Strided};

/// The face coefficients and shift of one rank's block of the fine level,
/// as arrays (the data [`Hierarchy::with_coefficients`] takes).
///
/// - `faces[d]` holds the coefficient of every face along axis `d` of the
///   block, over the box [`Poisson::face_box`] (`block`, `d`): the lower
///   face of each cell of the block and, where the block reaches a
///   non-periodic high wall along `d`, the wall face as well. Row-major,
///   the last axis fastest. Values finite and non-negative; 0 closes a
///   face. Without faces every coefficient is 1.
/// - `shift` holds `alpha` of every cell of the block, row-major. Values
///   finite and non-negative. Without a shift the operator has none.
///
/// Both are pure data: blocks of any decomposition that agree on the
/// global values give the same bits.
///
/// [`Hierarchy::with_coefficients`]: crate::Hierarchy::with_coefficients
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Coefficients {
    pub(crate) faces: Option<[Vec<f64>; 3]>,
    pub(crate) shift: Option<Vec<f64>>,
}

impl Coefficients {
    /// Every face coefficient 1, no shift.
    pub fn constant() -> Self {
        Coefficients::default()
    }

    /// The same with the face coefficients `faces` (see the type's docs).
    pub fn with_faces(mut self, faces: [Vec<f64>; 3]) -> Self {
        self.faces = Some(faces);
        self
    }

    /// The same with the shift `shift` (see the type's docs).
    pub fn with_shift(mut self, shift: Vec<f64>) -> Self {
        self.shift = Some(shift);
        self
    }

    /// Whether face coefficients were given.
    pub fn has_faces(&self) -> bool {
        self.faces.is_some()
    }

    /// Whether a shift was given.
    pub fn has_shift(&self) -> bool {
        self.shift.is_some()
    }
}

/// The faces along `d` whose coefficients the data of the cells `cells`
/// of a level of global shape `global` holds: their lower faces, and the
/// high wall face where the box reaches a non-periodic high wall.
pub(crate) fn face_box(
    cells: &IndexBox,
    global: [usize; 3],
    periodic: [bool; 3],
    d: usize,
) -> IndexBox {
    let mut b = *cells;
    if !cells.is_empty() && !periodic[d] && cells.hi[d] == global[d] {
        b.hi[d] += 1;
    }
    b
}

/// The position of global index `p` in the row-major array of box `b`.
#[inline]
fn at(b: &IndexBox, p: [usize; 3]) -> usize {
    let s = b.shape();
    ((p[0] - b.lo[0]) * s[1] + (p[1] - b.lo[1])) * s[2] + (p[2] - b.lo[2])
}

/// One level's coefficients on one box of its cells.
#[derive(Debug, Clone)]
pub(crate) struct BoxCoef {
    /// The cells (global indices of the level).
    pub cells: IndexBox,
    /// The level's global shape.
    pub global: [usize; 3],
    pub periodic: [bool; 3],
    /// Over `face_box(cells, .., d)`; `None`: every coefficient 1.
    pub faces: Option<[Vec<f64>; 3]>,
    /// Over `cells`; `None`: no shift.
    pub shift: Option<Vec<f64>>,
}

impl BoxCoef {
    /// The fine level's coefficients of the block `cells` from the user's
    /// data, checked for length.
    pub fn fine(problem: &Poisson, cells: IndexBox, data: Coefficients) -> Result<Self, MgError> {
        let (global, periodic) = (problem.shape, problem.periodic());
        if let Some(f) = &data.faces {
            for (d, v) in f.iter().enumerate() {
                let b = face_box(&cells, global, periodic, d);
                if v.len() != b.len() {
                    return Err(MgError::Invalid(format!(
                        "the face coefficients along axis {d} hold {} values; the block \
                         {:?}..{:?} has {} faces along that axis (faces {:?}..{:?}, the lower \
                         face of each cell and the high wall face where the block reaches a \
                         non-periodic high wall)",
                        v.len(),
                        cells.lo,
                        cells.hi,
                        b.len(),
                        b.lo,
                        b.hi
                    )));
                }
            }
        }
        if let Some(s) = &data.shift {
            if s.len() != cells.len() {
                return Err(MgError::Invalid(format!(
                    "the shift holds {} values; the block {:?}..{:?} has {} cells",
                    s.len(),
                    cells.lo,
                    cells.hi,
                    cells.len()
                )));
            }
        }
        Ok(BoxCoef {
            cells,
            global,
            periodic,
            faces: data.faces,
            shift: data.shift,
        })
    }

    /// Whether the stencil needs per-cell weights.
    pub fn is_variable(&self) -> bool {
        self.faces.is_some() || self.shift.is_some()
    }

    /// The box of the faces along `d`.
    pub fn face_box(&self, d: usize) -> IndexBox {
        face_box(&self.cells, self.global, self.periodic, d)
    }

    /// The coefficient of face `p` along `d` (inside [`face_box`]).
    ///
    /// [`face_box`]: Self::face_box
    #[inline]
    pub fn face(&self, d: usize, p: [usize; 3]) -> f64 {
        match &self.faces {
            None => 1.0,
            Some(f) => f[d][at(&self.face_box(d), p)],
        }
    }

    /// The coefficient of a face given by any global index: periodic axes
    /// wrap, anything else outside the global face range is 0 (the box
    /// must hold the face; the bottom's box is the whole level).
    pub fn face_wrapped(&self, d: usize, p: [i64; 3]) -> f64 {
        let n = self.global.map(|x| x as i64);
        let mut q = [0usize; 3];
        for e in 0..3 {
            let hi = if e == d && !self.periodic[e] {
                n[e] + 1
            } else {
                n[e]
            };
            let v = if self.periodic[e] {
                p[e].rem_euclid(n[e])
            } else {
                p[e]
            };
            if v < 0 || v >= hi {
                return 0.0;
            }
            q[e] = v as usize;
        }
        self.face(d, q)
    }

    /// The shift of cell `p` (inside the box; 0 without a shift).
    #[inline]
    pub fn alpha(&self, p: [usize; 3]) -> f64 {
        match &self.shift {
            None => 0.0,
            Some(s) => s[at(&self.cells, p)],
        }
    }

    /// The coefficients of the coarser level (global shape halved) on the
    /// cells this box covers (its indices halved; the box must be even): a
    /// coarse face is the fixed-order mean of the four fine faces it
    /// covers, a coarse cell's shift the mean of its eight fine cells.
    pub fn coarsen(&self) -> BoxCoef {
        let cells = IndexBox {
            lo: self.cells.lo.map(|x| x / 2),
            hi: self.cells.hi.map(|x| x / 2),
        };
        let mut c = BoxCoef {
            cells,
            global: self.global.map(|x| x / 2),
            periodic: self.periodic,
            faces: None,
            shift: None,
        };
        if self.faces.is_some() {
            c.faces = Some(std::array::from_fn(|d| {
                let b = c.face_box(d);
                let (a, e) = ((d + 1) % 3, (d + 2) % 3);
                let mut v = Vec::with_capacity(b.len());
                for i in b.lo[0]..b.hi[0] {
                    for j in b.lo[1]..b.hi[1] {
                        for k in b.lo[2]..b.hi[2] {
                            let p = [i, j, k];
                            let mut w = [0.0; 4];
                            for (t, (s, r)) in
                                [(0, 0), (0, 1), (1, 0), (1, 1)].into_iter().enumerate()
                            {
                                let mut q = p;
                                q[d] = 2 * p[d];
                                q[a] = 2 * p[a] + s;
                                q[e] = 2 * p[e] + r;
                                w[t] = self.face(d, q);
                            }
                            v.push(0.25 * ((w[0] + w[1]) + (w[2] + w[3])));
                        }
                    }
                }
                v
            }));
        }
        if self.shift.is_some() {
            let b = c.cells;
            let mut v = Vec::with_capacity(b.len());
            for i in b.lo[0]..b.hi[0] {
                for j in b.lo[1]..b.hi[1] {
                    for k in b.lo[2]..b.hi[2] {
                        let p = [i, j, k];
                        let mut w = [0.0; 8];
                        for (t, o) in w.iter_mut().enumerate() {
                            let q = [0, 1, 2].map(|d| 2 * p[d] + ((t >> (2 - d)) & 1));
                            *o = self.alpha(q);
                        }
                        v.push(
                            0.125
                                * (((w[0] + w[1]) + (w[2] + w[3]))
                                    + ((w[4] + w[5]) + (w[6] + w[7]))),
                        );
                    }
                }
            }
            c.shift = Some(v);
        }
        c
    }

    /// Moves the coefficients of this level between two decompositions of
    /// it (collective on `comm`): `from[r]` is rank `r`'s box of cells
    /// now (this rank's must be `self.cells`, or absent where `self` is
    /// `None`), `to[r]` its box afterwards (absent: nothing). The boxes of
    /// `to` may overlap (every rank of a gather receiving the whole
    /// level). Pure data movement: the values arrive bit for bit.
    pub fn moved(
        this: Option<&BoxCoef>,
        comm: &dyn Communicator,
        kind: (bool, bool),
        level: ([usize; 3], [bool; 3]),
        from: &[IndexBox],
        to: &[IndexBox],
    ) -> Result<Option<BoxCoef>, MgError> {
        let (global, periodic) = level;
        let me = comm.rank();
        let mine = to.get(me).copied();
        let fb = |bs: &[IndexBox], d: usize| -> Vec<IndexBox> {
            bs.iter()
                .map(|b| face_box(b, global, periodic, d))
                .collect()
        };
        let faces = if kind.0 {
            let mut out: [Vec<f64>; 3] = Default::default();
            for (d, o) in out.iter_mut().enumerate() {
                let src = this.and_then(|c| c.faces.as_ref()).map(|f| &f[d][..]);
                *o = move_boxes(comm, &fb(from, d), src, &fb(to, d))?;
            }
            Some(out)
        } else {
            None
        };
        let shift = if kind.1 {
            let src = this.and_then(|c| c.shift.as_deref());
            Some(move_boxes(comm, from, src, to)?)
        } else {
            None
        };
        Ok(mine.map(|cells| BoxCoef {
            cells,
            global,
            periodic,
            faces,
            shift,
        }))
    }
}

/// The block `x` of an array over box `b` (row-major, unpadded).
fn block_of(b: &IndexBox, x: &IndexBox) -> Strided {
    if x.is_empty() {
        return Strided::contiguous(0, 0);
    }
    let s = b.shape();
    Strided::nested(at(b, x.lo), x.shape(), [s[1] * s[2], s[2], 1])
}

/// Moves the values of the boxes `from[r]` (rank `r`'s, over `src` on this
/// rank) to the boxes `to[r]` (collective; a rank past the end of a list
/// holds nothing on that side). Returns this rank's `to` box's values
/// (empty without one).
pub(crate) fn move_boxes<T: Elem + Default + Copy>(
    comm: &dyn Communicator,
    from: &[IndexBox],
    src: Option<&[T]>,
    to: &[IndexBox],
) -> Result<Vec<T>, MgError> {
    let (p, me) = (comm.size(), comm.rank());
    let empty = IndexBox::default();
    let my_from = from.get(me).copied().unwrap_or(empty);
    let my_to = to.get(me).copied().unwrap_or(empty);
    let send = (0..p)
        .map(|q| match to.get(q) {
            Some(tb) => block_of(&my_from, &my_from.intersect(tb)),
            None => Strided::contiguous(0, 0),
        })
        .collect();
    let recv = (0..p)
        .map(|q| match from.get(q) {
            Some(fb) => block_of(&my_to, &fb.intersect(&my_to)),
            None => Strided::contiguous(0, 0),
        })
        .collect();
    let mut plan = Redistribution::<T>::new(comm, send, recv, Protocol::Alltoallv)?;
    let mut dst = vec![T::default(); my_to.len()];
    plan.execute(comm, src.unwrap_or(&[]), &mut dst)?;
    Ok(dst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Boundary;
    use std::sync::Arc;

    /// The coarse face by the definition, recursively from the fine
    /// function: the mean of the four faces below, in fixed order.
    fn beta_def(
        f: &dyn Fn(usize, [usize; 3]) -> f64,
        level: usize,
        d: usize,
        p: [usize; 3],
    ) -> f64 {
        if level == 0 {
            return f(d, p);
        }
        let (a, b) = ((d + 1) % 3, (d + 2) % 3);
        let mut v = [0.0; 4];
        for (t, (s, r)) in [(0, 0), (0, 1), (1, 0), (1, 1)].into_iter().enumerate() {
            let mut q = p;
            q[d] = 2 * p[d];
            q[a] = 2 * p[a] + s;
            q[b] = 2 * p[b] + r;
            v[t] = beta_def(f, level - 1, d, q);
        }
        0.25 * ((v[0] + v[1]) + (v[2] + v[3]))
    }

    fn alpha_def(f: &dyn Fn([usize; 3]) -> f64, level: usize, p: [usize; 3]) -> f64 {
        if level == 0 {
            return f(p);
        }
        let mut v = [0.0; 8];
        for (t, o) in v.iter_mut().enumerate() {
            *o = alpha_def(
                f,
                level - 1,
                [0, 1, 2].map(|d| 2 * p[d] + ((t >> (2 - d)) & 1)),
            );
        }
        0.125 * (((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])))
    }

    #[test]
    fn coarsening_a_block_twice_is_the_definition_bit_for_bit() {
        let beta = |d: usize, q: [usize; 3]| {
            0.3 + ((q[0] * 5 + q[1] * 3 + q[2] * 7 + d) % 13) as f64 / 7.0
        };
        let alpha = |q: [usize; 3]| ((q[0] + 3 * q[1] + 5 * q[2]) % 9) as f64 / 3.0;
        let p = Poisson::with_faces(
            [16, 8, 24],
            [1.0; 3],
            [
                [Boundary::Dirichlet, Boundary::Neumann],
                [Boundary::Periodic, Boundary::Periodic],
                [Boundary::Neumann, Boundary::Dirichlet],
            ],
        )
        .unwrap()
        .with_coefficient(Arc::new(beta))
        .with_shift(Arc::new(alpha));
        // A block reaching the high walls of axes 0 and 2.
        let cells = IndexBox {
            lo: [8, 4, 16],
            hi: [16, 8, 24],
        };
        let two = BoxCoef::fine(&p, cells, p.coefficients_on(&cells))
            .unwrap()
            .coarsen()
            .coarsen();
        assert_eq!(two.cells.lo, [2, 1, 4]);
        assert_eq!(two.global, [4, 2, 6]);
        for d in 0..3 {
            let b = two.face_box(d);
            assert_eq!(b.hi[d], two.cells.hi[d] + usize::from(d != 1));
            for i in b.lo[0]..b.hi[0] {
                for j in b.lo[1]..b.hi[1] {
                    for k in b.lo[2]..b.hi[2] {
                        let (got, want) =
                            (two.face(d, [i, j, k]), beta_def(&beta, 2, d, [i, j, k]));
                        assert_eq!(got.to_bits(), want.to_bits(), "face {d} {:?}", [i, j, k]);
                    }
                }
            }
        }
        for i in 2..4 {
            for j in 1..2 {
                for k in 4..6 {
                    let (got, want) = (two.alpha([i, j, k]), alpha_def(&alpha, 2, [i, j, k]));
                    assert_eq!(got.to_bits(), want.to_bits());
                }
            }
        }
    }
}
