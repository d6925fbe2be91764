//! The exact bottom solve: a dense Cholesky factorisation of the coarsest
//! operator, assembled in global order and applied identically on every
//! rank of the communicator that holds the bottom level.

use crate::coef::BoxCoef;
use crate::problem::{Boundary, Poisson};
use crate::MgError;
use comm::{as_bytes, as_bytes_mut, Communicator, IndexBox};
use halo::Field;
use std::cell::RefCell;

/// The factorised bottom operator.
#[derive(Debug)]
pub(crate) struct Bottom {
    /// Lower Cholesky factor, row-major `m x m`.
    chol: Vec<f64>,
    /// Cells with a non-zero diagonal; the others are held at 0.
    active: Vec<bool>,
    m: usize,
    global: [usize; 3],
    /// Every rank's box on the bottom level, in rank order.
    boxes: Vec<IndexBox>,
    /// Byte counts and displacements of the gather, in rank order.
    counts: Vec<usize>,
    displs: Vec<usize>,
    /// Work buffers of `solve`, kept so a solve allocates nothing: this
    /// rank's values, every rank's in rank order, the global vector.
    scratch: RefCell<[Vec<f64>; 3]>,
}

impl Bottom {
    /// Assembles and factorises level `level` (global shape `global`,
    /// coefficients `coef` over the whole level).
    pub fn new(
        problem: &Poisson,
        level: usize,
        global: [usize; 3],
        boxes: Vec<IndexBox>,
        coef: &BoxCoef,
    ) -> Result<Self, MgError> {
        let g = global;
        let m = g[0] * g[1] * g[2];
        let h = problem.h().map(|x| x * (1u64 << level) as f64);
        let ih2 = h.map(|x| 1.0 / (x * x));
        let faces = problem.faces();
        let idx = |p: [usize; 3]| (p[0] * g[1] + p[1]) * g[2] + p[2];
        let mut a = vec![0.0; m * m];
        for i in 0..g[0] {
            for j in 0..g[1] {
                for k in 0..g[2] {
                    let p = [i, j, k];
                    let row = idx(p);
                    for d in 0..3 {
                        for side in [0usize, 1] {
                            let q = p[d] as i64 + if side == 0 { -1 } else { 1 };
                            let mut face = p.map(|x| x as i64);
                            face[d] += side as i64;
                            let w = coef.face_wrapped(d, face) * ih2[d];
                            if q < 0 || q >= g[d] as i64 {
                                match faces[d][side] {
                                    Boundary::Dirichlet => {
                                        a[row * m + row] += 2.0 * w;
                                        continue;
                                    }
                                    Boundary::Neumann => continue,
                                    Boundary::Periodic => {}
                                }
                            }
                            let q = (q + g[d] as i64) as usize % g[d];
                            let mut pn = p;
                            pn[d] = q;
                            a[row * m + row] += w;
                            a[row * m + idx(pn)] -= w;
                        }
                    }
                }
            }
        }
        for i in 0..g[0] {
            for j in 0..g[1] {
                for k in 0..g[2] {
                    let row = idx([i, j, k]);
                    a[row * m + row] += coef.alpha([i, j, k]);
                }
            }
        }
        // Inactive cells (every face closed, no shift): identity rows, and
        // their right-hand side is ignored (the solution there is 0).
        let active: Vec<bool> = (0..m).map(|r| a[r * m + r] > 0.0).collect();
        for r in 0..m {
            if !active[r] {
                a[r * m + r] = 1.0;
            }
        }
        let dmax = (0..m).map(|r| a[r * m + r]).fold(0.0, f64::max);
        let singular = problem.is_singular();
        if singular {
            // A + s e eᵀ over the active cells: for a zero-mean rhs, the
            // zero-mean solution.
            let sh = dmax.max(1.0) / m as f64;
            for r in (0..m).filter(|&r| active[r]) {
                for c in (0..m).filter(|&c| active[c]) {
                    a[r * m + c] += sh;
                }
            }
        }
        for j in 0..m {
            let mut d = a[j * m + j];
            for k in 0..j {
                d -= a[j * m + k] * a[j * m + k];
            }
            if singular && d <= 1e-12 * dmax && d.is_finite() {
                // Another null vector: a region closed off from the rest
                // (closed faces all around it). Pinning its last cell
                // makes the factorisation definite; the bottom solve is
                // then exact up to a constant on that region.
                d = dmax;
            }
            if !singular && d <= 1e-12 * dmax && d.is_finite() {
                // A null vector the problem does not declare: a region
                // closed off from every Dirichlet face (closed faces all
                // around it) where the shift is 0. Its solution would be
                // fixed only up to a constant the bottom solve cannot pick.
                // (`Poisson::check_closed_regions` refuses such regions when
                // the hierarchy is built; this is the bottom's own check.)
                return Err(MgError::Invalid(format!(
                    "the operator is singular on the {g:?}-cell bottom level (pivot {j} = {d:e} \
                     of at most {dmax:e}): a region with zero shift closed off from every \
                     Dirichlet face by closed faces; give it a positive shift or open a face"
                )));
            }
            if d <= 0.0 || !d.is_finite() {
                return Err(MgError::Invalid(format!(
                    "the bottom matrix ({g:?} cells) is not positive definite (pivot {j} = {d})"
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
        let es = std::mem::size_of::<f64>();
        let counts: Vec<usize> = boxes.iter().map(|b| b.len() * es).collect();
        let displs = counts
            .iter()
            .scan(0, |a, &c| {
                let o = *a;
                *a += c;
                Some(o)
            })
            .collect();
        Ok(Bottom {
            chol: a,
            active,
            m,
            global,
            boxes,
            counts,
            displs,
            scratch: RefCell::new([Vec::new(), vec![0.0; m], vec![0.0; m]]),
        })
    }

    /// Solves `A u = f`: gathers `f`'s owned values in global order on
    /// `comm`, solves on every rank, writes this rank's block into `u`
    /// (ghosts zeroed). `f` and `u` hold this rank's box `boxes[rank]`.
    pub fn solve(&self, comm: &dyn Communicator, f: &Field, u: &mut Field) -> Result<(), MgError> {
        let mut scratch = self.scratch.borrow_mut();
        let [mine, all, b] = &mut *scratch;
        mine.clear();
        let (lay, vals) = (f.layout(), f.as_slice());
        let (r, st) = (lay.owned_region(), lay.strides());
        for i in r.lo[0]..r.hi[0] {
            for j in r.lo[1]..r.hi[1] {
                let o = i * st[0] + j * st[1];
                mine.extend_from_slice(&vals[o + r.lo[2]..o + r.hi[2]]);
            }
        }
        comm.allgatherv_bytes(
            as_bytes(mine),
            as_bytes_mut(all),
            &self.counts,
            &self.displs,
        )?;
        let g = self.global;
        let mut t = 0;
        for bx in &self.boxes {
            for i in bx.lo[0]..bx.hi[0] {
                for j in bx.lo[1]..bx.hi[1] {
                    for k in bx.lo[2]..bx.hi[2] {
                        b[(i * g[1] + j) * g[2] + k] = all[t];
                        t += 1;
                    }
                }
            }
        }
        let (l, m) = (&self.chol, self.m);
        for (v, &on) in b.iter_mut().zip(&self.active) {
            if !on {
                *v = 0.0;
            }
        }
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
        u.as_mut_slice().fill(0.0);
        let owned = self.boxes[comm.rank()];
        u.fill_owned(0, &owned, |[i, j, k]| b[(i * g[1] + j) * g[2] + k]);
        Ok(())
    }
}
