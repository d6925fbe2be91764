//! One level's fields, stencil and kernels (smoothing, residual, transfer).

use crate::coef::BoxCoef;
use crate::kernels::{self, ConstRow, Isa};
use crate::problem::{Boundary, Poisson};
use crate::MgError;
use comm::Communicator;
use halo::{Exchanger, Field, FieldLayout, Region, Topology};

/// The 7-point operator of one level on this rank's padded box.
#[derive(Debug)]
pub(crate) enum Stencil {
    /// `beta = 1`: the off-diagonal weights are `1/h²` per axis; the
    /// diagonal is `2 Σ 1/h²` plus a per-axis wall term (`+1/h²` next to a
    /// Dirichlet face, `-1/h²` next to a Neumann face), indexed by padded
    /// index along that axis. Ghost cells beyond walls hold 0.
    Const { ih2: [f64; 3], wall: [Vec<f64>; 3] },
    /// Variable face coefficients or a shift: `w[d][x]` is the weight of
    /// the lower face along `d` of padded cell `x` (0 on walls and closed
    /// faces), `diag` and `inv_diag` the diagonal (faces plus shift) and its
    /// inverse (0 on cells that do not exist and on inactive cells, whose
    /// diagonal is 0).
    Var {
        w: [Vec<f64>; 3],
        diag: Vec<f64>,
        inv_diag: Vec<f64>,
    },
}

/// The global geometry of a box on one level: what the kernels need to map
/// padded indices to global ones.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BoxGeom {
    /// Level global shape.
    pub global: [usize; 3],
    /// Global index of the first owned cell.
    pub lo: [usize; 3],
    /// Owned extent.
    pub n: [usize; 3],
    /// Allocated ghost width (all axes).
    pub g: usize,
}

impl BoxGeom {
    /// Global index (possibly -1 or `global`) of padded index `x` on axis `d`.
    pub fn global_of(&self, d: usize, x: usize) -> i64 {
        self.lo[d] as i64 + x as i64 - self.g as i64
    }

    /// The padded owned region.
    pub fn owned(&self) -> Region {
        Region {
            lo: [self.g; 3],
            hi: [0, 1, 2].map(|d| self.g + self.n[d]),
        }
    }

    /// Parity offset: the colour of padded `(i, j, k)` is
    /// `(parity + i + j + k) % 2`, i.e. the parity of the **global** index
    /// sum, whatever the ghost width (`-g` per axis is `+g` modulo 2, so
    /// `3g` is added rather than subtracted to stay unsigned).
    pub fn parity(&self) -> usize {
        self.lo[0] + self.lo[1] + self.lo[2] + 3 * self.g
    }
}

impl Stencil {
    /// The stencil of level `level` for the padded box `geom` with
    /// coefficients `coef` (this rank's box of the level): the constant
    /// one where `coef` holds neither faces nor a shift, else
    /// [`variable`](Self::variable).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        comm: &dyn Communicator,
        problem: &Poisson,
        level: usize,
        geom: &BoxGeom,
        layout: &FieldLayout,
        coef: &BoxCoef,
        faces: &Topology,
        full: &Topology,
    ) -> Result<Self, MgError> {
        if coef.is_variable() {
            Self::variable(comm, problem, level, geom, layout, coef, faces, full)
        } else {
            Ok(Self::constant(problem, level, geom, layout))
        }
    }

    /// The constant-coefficient stencil.
    fn constant(problem: &Poisson, level: usize, geom: &BoxGeom, layout: &FieldLayout) -> Self {
        let h = problem.h().map(|x| x * (1u64 << level) as f64);
        let ih2 = h.map(|x| 1.0 / (x * x));
        let faces = problem.faces();
        let per = problem.periodic();
        let p = layout.padded();
        let n = geom.global.map(|x| x as i64);
        let wall = [0, 1, 2].map(|d| {
            (0..p[d])
                .map(|x| {
                    let gi = geom.global_of(d, x);
                    if per[d] || gi < 0 || gi >= n[d] {
                        return 0.0;
                    }
                    let term = |b: Boundary| match b {
                        Boundary::Dirichlet => ih2[d],
                        Boundary::Neumann => -ih2[d],
                        Boundary::Periodic => 0.0,
                    };
                    let mut t = 0.0;
                    if gi == 0 {
                        t += term(faces[d][0]);
                    }
                    if gi == n[d] - 1 {
                        t += term(faces[d][1]);
                    }
                    t
                })
                .collect()
        });
        Stencil::Const { ih2, wall }
    }

    /// The variable stencil (collective on the level's ranks). Each rank
    /// computes the weights and diagonal of its owned cells from its own
    /// coefficients, the upper face of its last cell along each axis
    /// coming from the neighbour's lower faces by an exchange over the
    /// topology `faces` (or, at a non-periodic high wall, from its own wall
    /// faces); a second exchange over `full` (every neighbour, the whole
    /// ghost width) gives the ghost cells their owners' values, bit for
    /// bit. Ghost cells beyond a non-periodic wall hold 0.
    #[allow(clippy::too_many_arguments)]
    fn variable(
        comm: &dyn Communicator,
        problem: &Poisson,
        level: usize,
        geom: &BoxGeom,
        layout: &FieldLayout,
        coef: &BoxCoef,
        faces: &Topology,
        full: &Topology,
    ) -> Result<Self, MgError> {
        let h = problem.h().map(|x| x * (1u64 << level) as f64);
        let ih2 = h.map(|x| 1.0 / (x * x));
        let bc = problem.faces();
        let per = problem.periodic();
        let s = layout.strides();
        let g = geom.g;
        let (lo, n, global) = (geom.lo, geom.n, geom.global);
        let pad = |p: [usize; 3]| {
            (p[0] - lo[0] + g) * s[0] + (p[1] - lo[1] + g) * s[1] + p[2] - lo[2] + g
        };
        // The coefficients of the lower faces of the owned cells, their
        // upper neighbours' from the exchange, the high wall faces.
        let mut beta = [
            Field::new(*layout),
            Field::new(*layout),
            Field::new(*layout),
        ];
        for (d, f) in beta.iter_mut().enumerate() {
            let v = f.as_mut_slice();
            for i in lo[0]..lo[0] + n[0] {
                for j in lo[1]..lo[1] + n[1] {
                    for k in lo[2]..lo[2] + n[2] {
                        v[pad([i, j, k])] = coef.face(d, [i, j, k]);
                    }
                }
            }
        }
        {
            let [a, b, c] = &mut beta;
            Exchanger::new(faces, 3, CH_SETUP_FACES)?.exchange(comm, &mut [a, b, c])?;
        }
        for (d, f) in beta.iter_mut().enumerate() {
            if per[d] || lo[d] + n[d] != global[d] {
                continue;
            }
            let mut wall = coef.cells;
            wall.lo[d] = global[d];
            wall.hi[d] = global[d] + 1;
            let v = f.as_mut_slice();
            for i in wall.lo[0]..wall.hi[0] {
                for j in wall.lo[1]..wall.hi[1] {
                    for k in wall.lo[2]..wall.hi[2] {
                        v[pad([i, j, k])] = coef.face(d, [i, j, k]);
                    }
                }
            }
        }
        let mut out: [Field; 5] = std::array::from_fn(|_| Field::new(*layout));
        {
            let [w0, w1, w2, dg, idg] = &mut out;
            let (w0, w1, w2) = (w0.as_mut_slice(), w1.as_mut_slice(), w2.as_mut_slice());
            let w = [w0, w1, w2];
            let (dg, idg) = (dg.as_mut_slice(), idg.as_mut_slice());
            let b = [beta[0].as_slice(), beta[1].as_slice(), beta[2].as_slice()];
            for i in lo[0]..lo[0] + n[0] {
                for j in lo[1]..lo[1] + n[1] {
                    for k in lo[2]..lo[2] + n[2] {
                        let gp = [i, j, k];
                        let x = pad(gp);
                        let mut dsum = 0.0;
                        for d in 0..3 {
                            let lower_wall = !per[d] && gp[d] == 0;
                            let upper_wall = !per[d] && gp[d] + 1 == global[d];
                            let bl = b[d][x] * ih2[d];
                            let bu = b[d][x + s[d]] * ih2[d];
                            w[d][x] = if lower_wall { 0.0 } else { bl };
                            let wall_term = |b: Boundary, v: f64| match b {
                                Boundary::Dirichlet => 2.0 * v,
                                _ => 0.0,
                            };
                            dsum += if lower_wall {
                                wall_term(bc[d][0], bl)
                            } else {
                                bl
                            };
                            dsum += if upper_wall {
                                wall_term(bc[d][1], bu)
                            } else {
                                bu
                            };
                        }
                        let dsum = dsum + coef.alpha(gp);
                        dg[x] = dsum;
                        // A cell whose faces are all closed and without
                        // shift is inactive: smoothing leaves it at 0.
                        idg[x] = if dsum > 0.0 { 1.0 / dsum } else { 0.0 };
                    }
                }
            }
        }
        {
            let [a, b, c, d, e] = &mut out;
            Exchanger::new(full, 5, CH_SETUP_STENCIL)?.exchange(comm, &mut [a, b, c, d, e])?;
        }
        let [w0, w1, w2, diag, inv_diag] = out.map(|f| f.as_slice().to_vec());
        Ok(Stencil::Var {
            w: [w0, w1, w2],
            diag,
            inv_diag,
        })
    }
}

/// Channels of the exchanges that build a variable stencil (see the
/// hierarchy's channels; these run once, before any other).
const CH_SETUP_FACES: u16 = 4;
const CH_SETUP_STENCIL: u16 = 5;

/// One red-black Gauss-Seidel half-sweep over the cells of `colour` in the
/// padded `region`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn smooth(
    simd: Isa,
    st: &Stencil,
    lay: &FieldLayout,
    parity: usize,
    u: &mut [f64],
    f: &[f64],
    region: &Region,
    colour: usize,
    omega: f64,
) {
    for i in region.lo[0]..region.hi[0] {
        smooth_plane(simd, st, lay, parity, u, f, region, i, colour, omega);
    }
}

/// A full red-black sweep in one pass over memory: colour `first` over the
/// padded region `ra`, then the other colour over `rb`, with the same result
/// as [`smooth`] over `ra` followed by [`smooth`] over `rb` (see
/// [`smooth_passes`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn smooth_pair(
    simd: Isa,
    st: &Stencil,
    lay: &FieldLayout,
    parity: usize,
    u: &mut [f64],
    f: &[f64],
    ra: &Region,
    rb: &Region,
    first: usize,
    omega: f64,
) {
    smooth_passes(
        simd,
        st,
        lay,
        parity,
        u,
        f,
        &[(*ra, first), (*rb, 1 - first)],
        omega,
    );
}

/// Colour passes `(region, colour)` of alternating colours, in one pass
/// over memory, with the same result as [`smooth`] for each in turn.
///
/// The passes advance together along the slowest axis, each one plane
/// behind the one before it: in step `i`, pass `p` updates plane `i - p`,
/// passes in order. A pass reads only cells of the other colour, at most
/// one plane away. When pass `p` updates plane `q`, pass `p - 1` (the other
/// colour) has finished planes up to `q + 1`, and pass `p + 1` (the other
/// colour again) has not yet touched planes above `q - 2`; so every cell
/// reads the values it reads in the sequential order. Each plane of `u` and
/// `f` is then brought from memory once for all the passes.
#[allow(clippy::too_many_arguments)]
pub(crate) fn smooth_passes(
    simd: Isa,
    st: &Stencil,
    lay: &FieldLayout,
    parity: usize,
    u: &mut [f64],
    f: &[f64],
    passes: &[(Region, usize)],
    omega: f64,
) {
    smooth_passes_then(simd, st, lay, parity, u, f, passes, omega, &mut |_, _| {});
}

/// [`smooth_passes`], calling `done(u, i)` for every plane `i` the passes
/// cover, in order, as soon as the last pass has updated it (no later pass
/// writes it): `u`'s plane `i` then holds its final values, so a reduction
/// over it (the PCG's dot products of the preconditioned residual) can
/// run while the plane is still in cache.
#[allow(clippy::too_many_arguments)]
pub(crate) fn smooth_passes_then(
    simd: Isa,
    st: &Stencil,
    lay: &FieldLayout,
    parity: usize,
    u: &mut [f64],
    f: &[f64],
    passes: &[(Region, usize)],
    omega: f64,
    done: &mut dyn FnMut(&[f64], usize),
) {
    debug_assert!(passes.windows(2).all(|w| w[0].1 != w[1].1));
    let Some(lo) = passes
        .iter()
        .filter(|p| !p.0.is_empty())
        .map(|p| p.0.lo[0])
        .min()
    else {
        return;
    };
    let hi = passes.iter().map(|p| p.0.hi[0]).max().unwrap_or(lo);
    for i in lo..hi + passes.len() {
        for (p, (region, colour)) in passes.iter().enumerate() {
            // Plane i - p, if it is one of this pass's.
            if i >= p && i - p >= region.lo[0] && i - p < region.hi[0] && !region.is_empty() {
                smooth_plane(simd, st, lay, parity, u, f, region, i - p, *colour, omega);
            }
        }
        // Pass p last touches plane i - p in step i: plane i + 1 - n is
        // final after this step.
        if i + 1 >= passes.len() && (lo..hi).contains(&(i + 1 - passes.len())) {
            done(u, i + 1 - passes.len());
        }
    }
}

/// The rows of plane `i` of `region`, cells of `colour`.
#[allow(clippy::too_many_arguments)]
fn smooth_plane(
    simd: Isa,
    st: &Stencil,
    lay: &FieldLayout,
    parity: usize,
    u: &mut [f64],
    f: &[f64],
    region: &Region,
    i: usize,
    colour: usize,
    omega: f64,
) {
    let s = lay.strides();
    let (s0, s1) = (s[0], s[1]);
    match st {
        Stencil::Const { ih2, wall } => {
            // The rows of the plane in one kernel call; a row's diagonal
            // without its fast-axis wall term is `base + wall[1][j]`, the
            // per-row sum `2 (Σ 1/h²) + wall[0][i] + wall[1][j]` in its
            // order.
            let base = 2.0 * (ih2[0] + ih2[1] + ih2[2]) + wall[0][i];
            let c = ConstRow {
                ih2: *ih2,
                dij: base,
                wall2: &wall[2],
                s0,
                s1,
            };
            let (jlo, jhi) = (region.lo[1], region.hi[1].max(region.lo[1]));
            let lo = region.lo[2];
            kernels::smooth_rows(
                simd,
                &c,
                base,
                &wall[1][jlo..jhi],
                u,
                f,
                i * s0 + jlo * s1,
                lo,
                (parity + i + jlo + lo + colour) % 2,
                region.hi[2],
                omega,
            );
        }
        Stencil::Var { w, inv_diag, .. } => {
            for j in region.lo[1]..region.hi[1] {
                let k0 = region.lo[2] + (parity + i + j + region.lo[2] + colour) % 2;
                let row = i * s0 + j * s1;
                for k in (k0..region.hi[2]).step_by(2) {
                    let x = row + k;
                    let nb = (w[0][x] * u[x - s0] + w[0][x + s0] * u[x + s0])
                        + (w[1][x] * u[x - s1] + w[1][x + s1] * u[x + s1])
                        + (w[2][x] * u[x - 1] + w[2][x + 1] * u[x + 1]);
                    let gs = (f[x] + nb) * inv_diag[x];
                    let v = if omega == 1.0 {
                        gs
                    } else {
                        u[x] + omega * (gs - u[x])
                    };
                    // Inactive cells (zero diagonal) are held at 0,
                    // whatever a coarse correction added to them.
                    u[x] = if inv_diag[x] == 0.0 { 0.0 } else { v };
                }
            }
        }
    }
}

/// `out[k - lo] = f[x] - (A u)[x]` (`f = None`: `(A u)[x]`) for the cells
/// `x` of padded row `(i, j)`, `k` in `lo..hi` (`u`'s ghosts must be
/// current).
#[allow(clippy::too_many_arguments)]
fn residual_line(
    simd: Isa,
    st: &Stencil,
    lay: &FieldLayout,
    u: &[f64],
    f: Option<&[f64]>,
    i: usize,
    j: usize,
    lo: usize,
    hi: usize,
    out: &mut [f64],
) {
    let s = lay.strides();
    let (s0, s1) = (s[0], s[1]);
    let row = i * s0 + j * s1;
    match st {
        Stencil::Const { ih2, wall } => {
            let c = ConstRow {
                ih2: *ih2,
                dij: 2.0 * (ih2[0] + ih2[1] + ih2[2]) + wall[0][i] + wall[1][j],
                wall2: &wall[2],
                s0,
                s1,
            };
            kernels::residual_row(simd, &c, u, f, row, lo, hi, out);
        }
        Stencil::Var { w, diag, .. } => {
            for k in lo..hi {
                let x = row + k;
                let nb = (w[0][x] * u[x - s0] + w[0][x + s0] * u[x + s0])
                    + (w[1][x] * u[x - s1] + w[1][x + s1] * u[x + s1])
                    + (w[2][x] * u[x - 1] + w[2][x + 1] * u[x + 1]);
                let au = diag[x] * u[x] - nb;
                out[k - lo] = match f {
                    Some(f) => f[x] - au,
                    None => au,
                };
            }
        }
    }
}

/// `r = f - A u` over the padded `region` (`u`'s ghosts must be current).
pub(crate) fn residual(
    simd: Isa,
    st: &Stencil,
    lay: &FieldLayout,
    u: &[f64],
    f: &[f64],
    r: &mut [f64],
    region: &Region,
) {
    let s = lay.strides();
    let (lo, hi) = (region.lo[2], region.hi[2]);
    for i in region.lo[0]..region.hi[0] {
        for j in region.lo[1]..region.hi[1] {
            let row = i * s[0] + j * s[1];
            residual_line(
                simd,
                st,
                lay,
                u,
                Some(f),
                i,
                j,
                lo,
                hi,
                &mut r[row + lo..row + hi],
            );
        }
    }
}

/// `q = A u` over the padded `region` (`u`'s ghosts must be current),
/// calling `each(u_row, q_row)` for every row of the region in order.
pub(crate) fn apply(
    simd: Isa,
    st: &Stencil,
    lay: &FieldLayout,
    u: &[f64],
    q: &mut [f64],
    region: &Region,
    mut each: impl FnMut(&[f64], &[f64]),
) {
    let s = lay.strides();
    let (lo, hi) = (region.lo[2], region.hi[2]);
    for i in region.lo[0]..region.hi[0] {
        for j in region.lo[1]..region.hi[1] {
            let row = i * s[0] + j * s[1];
            let out = &mut q[row + lo..row + hi];
            residual_line(simd, st, lay, u, None, i, j, lo, hi, out);
            each(&u[row + lo..row + hi], out);
        }
    }
}

/// The PCG's search-direction update fused with the operator: over the
/// rows of the padded `region`, `x += alpha p` (the previous step's
/// solution update, when `alpha` is given) and `p = z + beta p`, then
/// `q = A p`, calling `each(p_row, q_row)` for every row in order, in one
/// pass over memory: plane `i` is updated one step before the operator
/// reads it as the plane above plane `i - 1`. The same bits as the
/// updates over the whole region followed by [`apply`], provided `p`'s
/// ghosts need no refresh after the update (no neighbour to exchange
/// with: the operator then reads the same ghost values either way).
#[allow(clippy::too_many_arguments)]
pub(crate) fn update_apply(
    simd: Isa,
    st: &Stencil,
    lay: &FieldLayout,
    x_alpha: Option<(&mut [f64], f64)>,
    p: &mut [f64],
    z: &[f64],
    beta: f64,
    q: &mut [f64],
    region: &Region,
    mut each: impl FnMut(&[f64], &[f64]),
) {
    let s = lay.strides();
    let (lo, hi) = (region.lo[2], region.hi[2]);
    let mut x_alpha = x_alpha;
    for i in region.lo[0]..=region.hi[0] {
        if i < region.hi[0] {
            for j in region.lo[1]..region.hi[1] {
                let r = i * s[0] + j * s[1] + lo..i * s[0] + j * s[1] + hi;
                if let Some((x, alpha)) = x_alpha.as_mut() {
                    let alpha = *alpha;
                    for (x, p) in x[r.clone()].iter_mut().zip(&p[r.clone()]) {
                        *x += alpha * p;
                    }
                }
                for (p, z) in p[r.clone()].iter_mut().zip(&z[r]) {
                    *p = z + beta * *p;
                }
            }
        }
        if i > region.lo[0] {
            for j in region.lo[1]..region.hi[1] {
                let row = (i - 1) * s[0] + j * s[1];
                let out = &mut q[row + lo..row + hi];
                residual_line(simd, st, lay, p, None, i - 1, j, lo, hi, out);
                each(&p[row + lo..row + hi], out);
            }
        }
    }
}

/// `coarse_f` (owned, layout `lc`) = 8-cell average of the residual
/// `f - A u` of the owned fine cells (layout `lf`), without storing the
/// fine residual: each coarse row's four fine rows are computed into
/// `scratch` (at least `4 × 2 × lc.owned[2]` values) and averaged at once.
/// The same bits as [`residual`] followed by [`restrict`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn residual_restrict(
    simd: Isa,
    st: &Stencil,
    lf: &FieldLayout,
    u: &[f64],
    f: &[f64],
    lc: &FieldLayout,
    coarse_f: &mut [f64],
    scratch: &mut [f64],
) {
    let sc = lc.strides();
    let (gf, gc) = (lf.ghost[0], lc.ghost[0]);
    let [n0, n1, n2] = lc.owned;
    let m = 2 * n2;
    let (r00, rest) = scratch.split_at_mut(m);
    let (r01, rest) = rest.split_at_mut(m);
    let (r10, rest) = rest.split_at_mut(m);
    let r11 = &mut rest[..m];
    for i in 0..n0 {
        for j in 0..n1 {
            let (fi, fj) = (2 * i + gf, 2 * j + gf);
            let line = |di: usize, dj: usize, out: &mut [f64]| {
                residual_line(simd, st, lf, u, Some(f), fi + di, fj + dj, gf, gf + m, out)
            };
            line(0, 0, r00);
            line(0, 1, r01);
            line(1, 0, r10);
            line(1, 1, r11);
            let xc = (i + gc) * sc[0] + (j + gc) * sc[1] + gc;
            for (k, c) in coarse_f[xc..xc + n2].iter_mut().enumerate() {
                let (x, y) = (2 * k, 2 * k + 1);
                let a = (r00[x] + r00[y]) + (r01[x] + r01[y]);
                let b = (r10[x] + r10[y]) + (r11[x] + r11[y]);
                *c = 0.125 * (a + b);
            }
        }
    }
}

/// `coarse_f` (owned, layout `lc`) = 8-cell average of `fine_r` (layout
/// `lf`); the coarse box is the fine box halved.
#[cfg(test)]
pub(crate) fn restrict(lf: &FieldLayout, fine_r: &[f64], lc: &FieldLayout, coarse_f: &mut [f64]) {
    let sf = lf.strides();
    let sc = lc.strides();
    let (gf, gc) = (lf.ghost[0], lc.ghost[0]);
    let [n0, n1, n2] = lc.owned;
    for i in 0..n0 {
        for j in 0..n1 {
            let xf = (2 * i + gf) * sf[0] + (2 * j + gf) * sf[1] + gf;
            let xc = (i + gc) * sc[0] + (j + gc) * sc[1] + gc;
            for k in 0..n2 {
                let x = xf + 2 * k;
                let r = fine_r;
                let a = (r[x] + r[x + 1]) + (r[x + sf[1]] + r[x + sf[1] + 1]);
                let b = (r[x + sf[0]] + r[x + sf[0] + 1])
                    + (r[x + sf[0] + sf[1]] + r[x + sf[0] + sf[1] + 1]);
                coarse_f[xc + k] = 0.125 * (a + b);
            }
        }
    }
}

/// `fine_u += P coarse_u` (trilinear: 27/64, 9/64, 3/64, 1/64; `coarse_u`'s
/// ghosts, edges and corners included, must be current). `coarse_lo` and
/// `fine_lo` are the global indices of the first owned cells (the parity of
/// a fine cell within its parent comes from its global index).
pub(crate) fn prolong_add(
    simd: Isa,
    lc: &FieldLayout,
    coarse_u: &[f64],
    lf: &FieldLayout,
    fine_lo: [usize; 3],
    fine_u: &mut [f64],
) {
    let sf = lf.strides();
    let sc = lc.strides();
    let (gf, gc) = (lf.ghost[0], lc.ghost[0]);
    let [n0, n1, n2] = lf.owned;
    // Fine blocks start at even global indices (coarsening requires even
    // blocks), so local parity equals global parity.
    debug_assert!(fine_lo.iter().all(|x| x % 2 == 0));
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
            let xf = (i + gf) * sf[0] + (j + gf) * sf[1] + gf;
            let x0 = (i / 2 + gc) * sc[0] + (j / 2 + gc) * sc[1] + gc;
            kernels::prolong_row(simd, coarse_u, x0, di, dj, &mut fine_u[xf..xf + n2]);
        }
    }
}

/// Sets the ghosts of `u` (layout `lay`, box `geom`) beyond walls to the
/// reflection of the adjacent owned plane, edges and corners included:
/// odd (`-u`, linear extrapolation to 0 on the face) for Dirichlet, even
/// (`u`, zero normal derivative) for Neumann. Axes are processed in order,
/// so edge and corner ghosts reflect already reflected values.
pub(crate) fn reflect_walls(problem: &Poisson, geom: &BoxGeom, lay: &FieldLayout, u: &mut [f64]) {
    let p = lay.padded();
    let s = lay.strides();
    let faces = problem.faces();
    let g = geom.g;
    for d in 0..3 {
        if faces[d][0] == Boundary::Periodic {
            continue;
        }
        let (a, b) = ((d + 1) % 3, (d + 2) % 3);
        let low = (geom.lo[d] == 0).then_some((g - 1, g, faces[d][0]));
        let high = (geom.lo[d] + geom.n[d] == geom.global[d]).then_some((
            g + geom.n[d],
            g + geom.n[d] - 1,
            faces[d][1],
        ));
        for (ghost, inner, bc) in low.into_iter().chain(high) {
            let sign = if bc == Boundary::Dirichlet { -1.0 } else { 1.0 };
            for ia in 0..p[a] {
                for ib in 0..p[b] {
                    let mut gi = [0; 3];
                    gi[d] = ghost;
                    gi[a] = ia;
                    gi[b] = ib;
                    let mut q = gi;
                    q[d] = inner;
                    let xg = gi[0] * s[0] + gi[1] * s[1] + gi[2];
                    let xq = q[0] * s[0] + q[1] * s[1] + q[2];
                    u[xg] = sign * u[xq];
                }
            }
        }
    }
}

/// Copies the owned values of `src` into the owned cells of `dst` (same
/// owned shape, any ghost widths).
pub(crate) fn copy_owned(src: &Field, dst: &mut Field) {
    let (ls, ld) = (src.layout(), dst.layout());
    debug_assert_eq!(ls.owned, ld.owned);
    let (rs, rd) = (ls.owned_region(), ld.owned_region());
    let (ss, sd) = (ls.strides(), ld.strides());
    let n = ls.owned;
    let (a, b) = (src.as_slice(), dst.as_mut_slice());
    for i in 0..n[0] {
        for j in 0..n[1] {
            let xs = (i + rs.lo[0]) * ss[0] + (j + rs.lo[1]) * ss[1] + rs.lo[2];
            let xd = (i + rd.lo[0]) * sd[0] + (j + rd.lo[1]) * sd[1] + rd.lo[2];
            b[xd..xd + n[2]].copy_from_slice(&a[xs..xs + n[2]]);
        }
    }
}

/// Splits `outer` minus `inner` (`inner` inside `outer`) into at most six
/// disjoint, non-empty boxes (without allocating: sweeps call this on every
/// visit).
pub(crate) fn frame(outer: &Region, inner: &Region) -> impl Iterator<Item = Region> {
    let mut out = [Region::default(); 6];
    let mut n = 0;
    if inner.is_empty() {
        out[0] = *outer;
        n = 1;
    } else {
        let mut rest = *outer;
        for d in 0..3 {
            if inner.lo[d] > rest.lo[d] {
                let mut r = rest;
                r.hi[d] = inner.lo[d];
                out[n] = r;
                n += 1;
            }
            if inner.hi[d] < rest.hi[d] {
                let mut r = rest;
                r.lo[d] = inner.hi[d];
                out[n] = r;
                n += 1;
            }
            rest.lo[d] = inner.lo[d];
            rest.hi[d] = inner.hi[d];
        }
    }
    out.into_iter().take(n).filter(|r| !r.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Deterministic values in [-1, 1).
    fn noise(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
            })
            .collect()
    }

    /// A whole odd-sized (or `shape`d) box on one rank, ghost width `g`,
    /// with constant or variable coefficients and mixed walls.
    fn setup(shape: [usize; 3], g: usize, variable: bool) -> (Stencil, FieldLayout, BoxGeom) {
        let faces = [
            [Boundary::Dirichlet, Boundary::Neumann],
            [Boundary::Neumann, Boundary::Dirichlet],
            [Boundary::Dirichlet, Boundary::Dirichlet],
        ];
        let mut p = Poisson::with_faces(shape, [1.0, 1.3, 0.7], faces).unwrap();
        if variable {
            p = p.with_coefficient(Arc::new(|d, q| {
                1.0 + 0.1 * ((q[0] + 2 * q[1] + 3 * q[2] + d) % 5) as f64
            }));
        }
        let lay = FieldLayout {
            owned: shape,
            ghost: [g; 3],
            components: 1,
        };
        let geom = BoxGeom {
            global: shape,
            lo: [0; 3],
            n: shape,
            g,
        };
        let st = comm::local::run(1, |c| {
            use halo::{HaloSpec, Neighborhood};
            let grid = comm::ProcessGrid::new([1; 3], p.periodic())?;
            let dec = comm::BlockDecomposition::new(shape, grid)?;
            let spec = HaloSpec {
                ghost: [g; 3],
                width: [1; 3],
                neighborhood: Neighborhood::Faces,
            };
            let faces = Topology::new(c, &dec, spec)?;
            let full = Topology::new(c, &dec, HaloSpec::uniform(g, Neighborhood::Full))?;
            let cells = comm::IndexBox::from_shape(shape);
            let coef = BoxCoef::fine(&p, cells, p.coefficients_on(&cells))?;
            Stencil::new(c, &p, 0, &geom, &lay, &coef, &faces, &full)
        })
        .unwrap()
        .pop()
        .unwrap();
        (st, lay, geom)
    }

    fn same(a: &[f64], b: &[f64]) -> bool {
        a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
    }

    #[test]
    fn fused_sweep_equals_two_colour_passes_on_any_regions() {
        for (shape, g, variable) in [
            ([7, 5, 9], 1, false),
            ([6, 9, 11], 2, false),
            ([5, 7, 13], 2, true),
        ] {
            let (st, lay, geom) = setup(shape, g, variable);
            let u0 = noise(lay.padded_len(), 1);
            let f = noise(lay.padded_len(), 2);
            let own = geom.owned();
            let mut grown = own;
            for d in 0..3 {
                grown.lo[d] -= 1;
                grown.hi[d] += 1;
            }
            let inner = Region {
                lo: own.lo.map(|x| x + 1),
                hi: own.hi.map(|x| x - 1),
            };
            // The grown box (the ghost ring) only where there are 2 ghosts.
            let pairs = [(own, own), (grown, own), (own, inner), (inner, own)];
            for &(ra, rb) in pairs.iter().filter(|p| g == 2 || p.0 != grown) {
                for first in 0..2 {
                    for simd in Isa::available_all() {
                        let parity = geom.parity();
                        let mut a = u0.clone();
                        smooth(
                            Isa::Portable,
                            &st,
                            &lay,
                            parity,
                            &mut a,
                            &f,
                            &ra,
                            first,
                            1.15,
                        );
                        smooth(
                            Isa::Portable,
                            &st,
                            &lay,
                            parity,
                            &mut a,
                            &f,
                            &rb,
                            1 - first,
                            1.15,
                        );
                        let mut b = u0.clone();
                        smooth_pair(simd, &st, &lay, parity, &mut b, &f, &ra, &rb, first, 1.15);
                        assert!(
                            same(&a, &b),
                            "{shape:?} {simd:?} {ra:?} {rb:?} first {first}"
                        );
                        assert!(!same(&a, &u0));
                        // Two sweeps in one pass: four alternating passes.
                        let mut c = u0.clone();
                        let passes = [(ra, first), (rb, 1 - first), (ra, first), (rb, 1 - first)];
                        smooth_passes(simd, &st, &lay, parity, &mut c, &f, &passes, 1.15);
                        smooth(
                            Isa::Portable,
                            &st,
                            &lay,
                            parity,
                            &mut a,
                            &f,
                            &ra,
                            first,
                            1.15,
                        );
                        smooth(
                            Isa::Portable,
                            &st,
                            &lay,
                            parity,
                            &mut a,
                            &f,
                            &rb,
                            1 - first,
                            1.15,
                        );
                        assert!(same(&a, &c), "4 passes: {shape:?} {simd:?} {ra:?} {rb:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn plane_hook_sees_each_plane_once_with_its_final_values() {
        // The values `done` sees for plane i must be those after all the
        // passes, and every plane of the passes must be reported once, in
        // order, whatever the number of passes.
        for (shape, g, variable) in [([7, 5, 9], 1, false), ([6, 9, 11], 2, true)] {
            let (st, lay, geom) = setup(shape, g, variable);
            let u0 = noise(lay.padded_len(), 5);
            let f = noise(lay.padded_len(), 6);
            let own = geom.owned();
            let mut grown = own;
            if g == 2 {
                for d in 0..3 {
                    grown.lo[d] -= 1;
                    grown.hi[d] += 1;
                }
            }
            let s = lay.strides();
            let plane = |u: &[f64], i: usize| u[i * s[0]..(i + 1) * s[0]].to_vec();
            for n in 1..=4 {
                let passes: Vec<(Region, usize)> = (0..2 * n)
                    .map(|k| (if k % 2 == 0 { grown } else { own }, (k + 1) % 2))
                    .collect();
                for simd in Isa::available_all() {
                    let mut want = u0.clone();
                    smooth_passes(simd, &st, &lay, geom.parity(), &mut want, &f, &passes, 1.15);
                    let mut got = u0.clone();
                    let mut seen = Vec::new();
                    smooth_passes_then(
                        simd,
                        &st,
                        &lay,
                        geom.parity(),
                        &mut got,
                        &f,
                        &passes,
                        1.15,
                        &mut |u, i| {
                            assert!(
                                same(&plane(u, i), &plane(&want, i)),
                                "{shape:?} {n} sweeps {simd:?} plane {i}"
                            );
                            seen.push(i);
                        },
                    );
                    assert!(same(&got, &want));
                    let planes: Vec<usize> = (grown.lo[0]..grown.hi[0]).collect();
                    assert_eq!(seen, planes, "{shape:?} {n} sweeps {simd:?}");
                }
            }
        }
    }

    #[test]
    fn fused_update_and_operator_equal_the_separate_passes() {
        for (shape, g, variable) in [
            ([7, 5, 9], 1, false),
            ([6, 9, 11], 2, true),
            ([1, 3, 2], 1, false),
        ] {
            let (st, lay, geom) = setup(shape, g, variable);
            let own = geom.owned();
            let (x0, p0, z) = (
                noise(lay.padded_len(), 7),
                noise(lay.padded_len(), 8),
                noise(lay.padded_len(), 9),
            );
            let (alpha, beta) = (0.37, -1.3);
            for with_x in [false, true] {
                // The separate passes: updates over the owned rows, then A p.
                let (mut x1, mut p1) = (x0.clone(), p0.clone());
                let s = lay.strides();
                for i in own.lo[0]..own.hi[0] {
                    for j in own.lo[1]..own.hi[1] {
                        for k in own.lo[2]..own.hi[2] {
                            let c = i * s[0] + j * s[1] + k;
                            if with_x {
                                x1[c] += alpha * p1[c];
                            }
                            p1[c] = z[c] + beta * p1[c];
                        }
                    }
                }
                let mut q1 = vec![0.0; lay.padded_len()];
                let mut rows1 = Vec::new();
                apply(Isa::Portable, &st, &lay, &p1, &mut q1, &own, |a, b| {
                    rows1.push((a.to_vec(), b.to_vec()))
                });
                for simd in Isa::available_all() {
                    let (mut x2, mut p2) = (x0.clone(), p0.clone());
                    let mut q2 = vec![0.0; lay.padded_len()];
                    let mut rows2 = Vec::new();
                    update_apply(
                        simd,
                        &st,
                        &lay,
                        with_x.then_some((&mut x2[..], alpha)),
                        &mut p2,
                        &z,
                        beta,
                        &mut q2,
                        &own,
                        |a, b| rows2.push((a.to_vec(), b.to_vec())),
                    );
                    let tag = format!("{shape:?} {simd:?} x {with_x}");
                    assert!(same(&x1, &x2) && same(&p1, &p2) && same(&q1, &q2), "{tag}");
                    assert_eq!(rows1.len(), rows2.len(), "{tag}");
                    for (a, b) in rows1.iter().zip(&rows2) {
                        assert!(same(&a.0, &b.0) && same(&a.1, &b.1), "{tag}");
                    }
                }
                assert!(q1.iter().any(|&v| v != 0.0));
                assert_eq!(rows1.len(), shape[0] * shape[1]);
            }
        }
    }

    #[test]
    fn fused_residual_restriction_equals_residual_then_restriction() {
        for (shape, variable) in [([6, 10, 14], false), ([8, 6, 10], true), ([2, 2, 2], false)] {
            for g in [1, 2] {
                let (st, lf, geom) = setup(shape, g, variable);
                let lc = FieldLayout {
                    owned: shape.map(|x| x / 2),
                    ghost: [1; 3],
                    components: 1,
                };
                let u = noise(lf.padded_len(), 3);
                let f = noise(lf.padded_len(), 4);
                let mut r = vec![0.0; lf.padded_len()];
                residual(Isa::Portable, &st, &lf, &u, &f, &mut r, &geom.owned());
                let mut want = vec![0.0; lc.padded_len()];
                restrict(&lf, &r, &lc, &mut want);
                for simd in Isa::available_all() {
                    let mut got = vec![0.0; lc.padded_len()];
                    let mut scratch = vec![0.0; 4 * shape[2]];
                    residual_restrict(simd, &st, &lf, &u, &f, &lc, &mut got, &mut scratch);
                    assert!(same(&want, &got), "{shape:?} g {g} {simd:?}");
                }
                assert!(want.iter().any(|&x| x != 0.0));
            }
        }
    }

    #[test]
    fn residual_is_the_stencil_on_every_instruction_set() {
        // Against the 7-point formula written out cell by cell (constant
        // coefficients: the wall terms make the diagonal).
        let shape = [5, 7, 9];
        let (st, lay, geom) = setup(shape, 1, false);
        let Stencil::Const { ih2, wall } = &st else {
            panic!("constant coefficients");
        };
        let u = noise(lay.padded_len(), 5);
        let f = noise(lay.padded_len(), 6);
        let s = lay.strides();
        for simd in Isa::available_all() {
            let mut r = vec![0.0; lay.padded_len()];
            residual(simd, &st, &lay, &u, &f, &mut r, &geom.owned());
            for i in 1..6 {
                for j in 1..8 {
                    for k in 1..10 {
                        let x = i * s[0] + j * s[1] + k;
                        let d =
                            2.0 * (ih2[0] + ih2[1] + ih2[2]) + wall[0][i] + wall[1][j] + wall[2][k];
                        let nb = ih2[0] * (u[x - s[0]] + u[x + s[0]])
                            + ih2[1] * (u[x - s[1]] + u[x + s[1]])
                            + ih2[2] * (u[x - 1] + u[x + 1]);
                        assert_eq!(
                            r[x].to_bits(),
                            (f[x] - (d * u[x] - nb)).to_bits(),
                            "{simd:?}"
                        );
                    }
                }
            }
        }
    }
}
