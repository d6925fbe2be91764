//! One level's fields, stencil and kernels (smoothing, residual, transfer).

use crate::problem::{Boundary, Poisson};
use halo::{Field, FieldLayout, Region};

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
    /// Builds the stencil of level `level` for the padded box `geom`.
    pub fn new(problem: &Poisson, level: usize, geom: &BoxGeom, layout: &FieldLayout) -> Self {
        let h = problem.h().map(|x| x * (1u64 << level) as f64);
        let ih2 = h.map(|x| 1.0 / (x * x));
        let faces = problem.faces();
        let per = problem.periodic();
        let p = layout.padded();
        let n = geom.global.map(|x| x as i64);
        if !problem.is_variable() {
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
            return Stencil::Const { ih2, wall };
        }
        let len = layout.padded_len();
        let s = layout.strides();
        let mut w = [vec![0.0; len], vec![0.0; len], vec![0.0; len]];
        let mut diag = vec![0.0; len];
        let mut inv_diag = vec![0.0; len];
        for i in 0..p[0] {
            for j in 0..p[1] {
                for k in 0..p[2] {
                    let x = i * s[0] + j * s[1] + k;
                    let gp = [
                        geom.global_of(0, i),
                        geom.global_of(1, j),
                        geom.global_of(2, k),
                    ];
                    let exists = (0..3).all(|d| per[d] || (gp[d] >= 0 && gp[d] < n[d]));
                    if !exists {
                        continue;
                    }
                    let mut dsum = 0.0;
                    for d in 0..3 {
                        let mut up = gp;
                        up[d] += 1;
                        let lower_wall = !per[d] && gp[d] == 0;
                        let upper_wall = !per[d] && gp[d] == n[d] - 1;
                        let bl = problem.beta(level, d, gp) * ih2[d];
                        let bu = problem.beta(level, d, up) * ih2[d];
                        w[d][x] = if lower_wall { 0.0 } else { bl };
                        let wall_term = |b: Boundary, v: f64| match b {
                            Boundary::Dirichlet => 2.0 * v,
                            _ => 0.0,
                        };
                        dsum += if lower_wall {
                            wall_term(faces[d][0], bl)
                        } else {
                            bl
                        };
                        dsum += if upper_wall {
                            wall_term(faces[d][1], bu)
                        } else {
                            bu
                        };
                    }
                    let dsum = dsum + problem.alpha(level, gp);
                    diag[x] = dsum;
                    // A cell whose faces are all closed and without shift
                    // is inactive: smoothing leaves it at 0.
                    inv_diag[x] = if dsum > 0.0 { 1.0 / dsum } else { 0.0 };
                }
            }
        }
        Stencil::Var { w, diag, inv_diag }
    }
}

/// One red-black Gauss-Seidel half-sweep over the cells of `colour` in the
/// padded `region`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn smooth(
    st: &Stencil,
    lay: &FieldLayout,
    parity: usize,
    u: &mut [f64],
    f: &[f64],
    region: &Region,
    colour: usize,
    omega: f64,
) {
    let s = lay.strides();
    let (s0, s1) = (s[0], s[1]);
    for i in region.lo[0]..region.hi[0] {
        for j in region.lo[1]..region.hi[1] {
            let k0 = region.lo[2] + (parity + i + j + region.lo[2] + colour) % 2;
            let row = i * s0 + j * s1;
            match st {
                Stencil::Const { ih2, wall } => {
                    let dij = 2.0 * (ih2[0] + ih2[1] + ih2[2]) + wall[0][i] + wall[1][j];
                    let inv_mid = 1.0 / dij;
                    for k in (k0..region.hi[2]).step_by(2) {
                        let x = row + k;
                        let inv = if wall[2][k] == 0.0 {
                            inv_mid
                        } else {
                            1.0 / (dij + wall[2][k])
                        };
                        let nb = ih2[0] * (u[x - s0] + u[x + s0])
                            + ih2[1] * (u[x - s1] + u[x + s1])
                            + ih2[2] * (u[x - 1] + u[x + 1]);
                        let gs = (f[x] + nb) * inv;
                        u[x] = if omega == 1.0 {
                            gs
                        } else {
                            u[x] + omega * (gs - u[x])
                        };
                    }
                }
                Stencil::Var { w, inv_diag, .. } => {
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
}

/// Calls `emit(x, (A u)[x])` for every cell `x` of the padded `region`
/// (`u`'s ghosts must be current).
#[inline(always)]
fn stencil_apply(
    st: &Stencil,
    lay: &FieldLayout,
    u: &[f64],
    region: &Region,
    mut emit: impl FnMut(usize, f64),
) {
    let s = lay.strides();
    let (s0, s1) = (s[0], s[1]);
    for i in region.lo[0]..region.hi[0] {
        for j in region.lo[1]..region.hi[1] {
            let row = i * s0 + j * s1;
            match st {
                Stencil::Const { ih2, wall } => {
                    let dij = 2.0 * (ih2[0] + ih2[1] + ih2[2]) + wall[0][i] + wall[1][j];
                    for k in region.lo[2]..region.hi[2] {
                        let x = row + k;
                        let d = dij + wall[2][k];
                        let nb = ih2[0] * (u[x - s0] + u[x + s0])
                            + ih2[1] * (u[x - s1] + u[x + s1])
                            + ih2[2] * (u[x - 1] + u[x + 1]);
                        emit(x, d * u[x] - nb);
                    }
                }
                Stencil::Var { w, diag, .. } => {
                    for k in region.lo[2]..region.hi[2] {
                        let x = row + k;
                        let nb = (w[0][x] * u[x - s0] + w[0][x + s0] * u[x + s0])
                            + (w[1][x] * u[x - s1] + w[1][x + s1] * u[x + s1])
                            + (w[2][x] * u[x - 1] + w[2][x + 1] * u[x + 1]);
                        emit(x, diag[x] * u[x] - nb);
                    }
                }
            }
        }
    }
}

/// `r = f - A u` over the padded `region` (`u`'s ghosts must be current).
pub(crate) fn residual(
    st: &Stencil,
    lay: &FieldLayout,
    u: &[f64],
    f: &[f64],
    r: &mut [f64],
    region: &Region,
) {
    stencil_apply(st, lay, u, region, |x, au| r[x] = f[x] - au);
}

/// `q = A u` over the padded `region` (`u`'s ghosts must be current),
/// calling `each(u[x], q[x])` for every cell in order.
pub(crate) fn apply(
    st: &Stencil,
    lay: &FieldLayout,
    u: &[f64],
    q: &mut [f64],
    region: &Region,
    mut each: impl FnMut(f64, f64),
) {
    stencil_apply(st, lay, u, region, |x, au| {
        q[x] = au;
        each(u[x], au);
    });
}

/// `coarse_f` (owned, layout `lc`) = 8-cell average of `fine_r` (layout
/// `lf`); the coarse box is the fine box halved.
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
    lc: &FieldLayout,
    coarse_u: &[f64],
    lf: &FieldLayout,
    fine_lo: [usize; 3],
    fine_u: &mut [f64],
) {
    const W: [f64; 4] = [27.0 / 64.0, 9.0 / 64.0, 3.0 / 64.0, 1.0 / 64.0];
    let sf = lf.strides();
    let sc = lc.strides();
    let (gf, gc) = (lf.ghost[0], lc.ghost[0]);
    let [n0, n1, n2] = lf.owned;
    // Fine blocks start at even global indices (coarsening requires even
    // blocks), so local parity equals global parity.
    debug_assert!(fine_lo.iter().all(|x| x % 2 == 0));
    let c = coarse_u;
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
            for k in 0..n2 {
                let dk: isize = if k % 2 == 0 { -1 } else { 1 };
                let x = ((i / 2 + gc) * sc[0] + (j / 2 + gc) * sc[1] + k / 2 + gc) as isize;
                let at = |o: isize| c[(x + o) as usize];
                let v = W[0] * at(0)
                    + W[1] * (at(di) + at(dj) + at(dk))
                    + W[2] * (at(di + dj) + at(di + dk) + at(dj + dk))
                    + W[3] * at(di + dj + dk);
                fine_u[xf + k] += v;
            }
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
