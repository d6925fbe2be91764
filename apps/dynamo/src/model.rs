//! The physics: operators per degree (the l-loop) and the nonlinear terms
//! on the grid (the radial loop) of a Boussinesq dynamo in a rotating
//! spherical shell.
//!
//! # Equations (MagIC's scaling: gap `d`, viscous time `d^2/nu`)
//!
//! ```text
//! du/dt + (2/E) z x u = -grad P + lap u + (Ra/Pr) (r/ro) T r_hat + u x w + (1/(E Pm)) j x B
//! dB/dt = curl(u x B) + (1/Pm) lap B
//! dT/dt + u . grad T = (1/Pr) lap T
//! div u = div B = 0,    w = curl u,  j = curl B
//! ```
//!
//! with `P` the pressure divided by `E` and including `|u|^2 / 2`
//! (the advection is written `u . grad u = w x u + grad |u|^2/2`).
//!
//! # Potentials
//!
//! `u = curl curl (W r_hat) + curl (Z r_hat)`, `B = curl curl (G r_hat) +
//! curl (H r_hat)`. For one harmonic of degree `l` (`L = l (l+1)`) and in
//! the spheroidal/toroidal convention of `sht` (`u_h = grad_1 S + curl_1 (T
//! r_hat)` on the unit sphere):
//!
//! ```text
//! u_r = L W / r^2,     S_u = W' / r,   T_u = Z / r
//! w_r = L Z / r^2,     S_w = Z' / r,   T_w = -(W'' - L W / r^2) / r
//! ```
//!
//! and the same for `B`, `j` with `G`, `H`.
//!
//! # The implicit systems (one per degree, all orders together)
//!
//! - `W`, `P`, `T` in one system of `3 Nr` unknowns: the radial component
//!   of the momentum equation (rows `a`), its horizontal divergence (the
//!   spheroidal part, rows `b`) and the heat equation, so that the
//!   pressure is solved with `W` as in MagIC and the buoyancy term is
//!   implicit:
//!
//!   ```text
//!   (L/r^2) dW/dt  = (L/r^2) (W'' - L W/r^2) - P' + (Ra/Pr)(r/ro) T + F_r
//!   dW'/dt         = (W'' - L W/r^2)' - P + r S_F
//!   dT/dt          = (1/Pr)(T'' + 2 T'/r - L T/r^2) - (u . grad T)
//!   ```
//!
//!   with `F = u x w - (2/E) z x u + (1/(E Pm)) j x B` on the grid
//!   (`F_r` its radial coefficient, `S_F` its spheroidal one). Boundary
//!   rows: `W = 0` replaces rows `a` and `W' = 0` rows `b` at both walls
//!   (no slip), `T = 0` (`T_00 = sqrt(4 pi)` at `ri`) the heat equation's.
//! - `Z`: `dZ/dt = Z'' - L Z/r^2 + r T_F`, `Z = 0` at both walls.
//! - `G`: `dG/dt = (1/Pm)(G'' - L G/r^2) + r T_V`, `V = u x B`; potential
//!   field matching: `G' + l G / r = 0` at `ro`, `G' - (l+1) G / r = 0` at
//!   `ri` (insulating inner core).
//! - `H`: `dH/dt = (1/Pm)(H'' - L H/r^2) + V_r - (r S_V)'`, `H = 0` at both walls.
//!
//! For `l = 0` only `T` is a field: the rows of `W`, `P`, `Z`, `G`, `H`
//! are all replaced by `x = 0`.

use chebyshev::RadialGrid;
use imex::{DegreeOperator, Matrix};

/// Physical parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Physics {
    /// Ekman number `E = nu / (Omega d^2)`.
    pub ekman: f64,
    /// Rayleigh number `Ra = alpha g0 dT d^3 / (nu kappa)` (MagIC's).
    pub rayleigh: f64,
    /// Prandtl number `Pr = nu / kappa`.
    pub prandtl: f64,
    /// Magnetic Prandtl number `Pm = nu / eta`; `None` for non-magnetic convection.
    pub magnetic_prandtl: Option<f64>,
}

impl Physics {
    /// `1 / (E Pm)`, the Lorentz force factor (0 without a field).
    pub fn lorentz(&self) -> f64 {
        self.magnetic_prandtl
            .map_or(0.0, |pm| 1.0 / (self.ekman * pm))
    }
}

fn dot_rows(a: &[f64], n: usize, i: usize, b: &[f64], j: usize) -> f64 {
    (0..n).map(|k| a[i * n + k] * b[k * n + j]).sum()
}

/// The four implicit systems of one degree.
#[derive(Debug, Clone)]
pub struct DegreeOperators {
    /// `W`, `P`, `T` (`3 Nr`).
    pub wpt: DegreeOperator,
    /// `Z` (`Nr`).
    pub z: DegreeOperator,
    /// `G` (`Nr`).
    pub g: DegreeOperator,
    /// `H` (`Nr`).
    pub h: DegreeOperator,
}

/// Row-major dense matrices of the collocation derivatives, shared by the
/// operators of every degree.
#[derive(Debug, Clone)]
pub struct Collocation {
    n: usize,
    r: Vec<f64>,
    ro: f64,
    d1: Vec<f64>,
    d2: Vec<f64>,
    /// `D1 D2`, the third derivative of the interpolant.
    d3: Vec<f64>,
}

impl Collocation {
    /// The matrices of `grid`.
    pub fn new(grid: &RadialGrid) -> Self {
        let n = grid.nr();
        let d1: Vec<f64> = grid.d1_matrix().iter().copied().collect();
        let d2: Vec<f64> = grid.d2_matrix().iter().copied().collect();
        let mut d3 = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                d3[i * n + j] = dot_rows(&d1, n, i, &d2, j);
            }
        }
        Collocation {
            n,
            r: grid.r().to_vec(),
            ro: grid.ro(),
            d1,
            d2,
            d3,
        }
    }

    /// The operators of degree `l`.
    pub fn degree(&self, l: usize, p: &Physics) -> DegreeOperators {
        let n = self.n;
        let ll = (l * (l + 1)) as f64;
        let (r, d1, d2, d3) = (&self.r, &self.d1, &self.d2, &self.d3);
        let e = |k: usize, size: usize| {
            let mut v = vec![0.0; size];
            v[k] = 1.0;
            v
        };
        // W, P, T.
        let m3 = 3 * n;
        let mut mass = Matrix::zeros(m3, m3);
        let mut lin = Matrix::zeros(m3, m3);
        let (mw, lw) = (mass.as_mut_slice(), lin.as_mut_slice());
        // Column-major: (i, j) at j * m3 + i.
        let at = |i: usize, j: usize| j * m3 + i;
        let (w0, p0, t0) = (0, n, 2 * n);
        let buoy = p.rayleigh / p.prandtl / self.ro;
        for k in 0..n {
            let rk2 = r[k] * r[k];
            // Rows a_k: radial momentum.
            mw[at(w0 + k, w0 + k)] = ll / rk2;
            for j in 0..n {
                let mut v = ll / rk2 * d2[k * n + j];
                if j == k {
                    v -= ll * ll / (rk2 * rk2);
                }
                lw[at(w0 + k, w0 + j)] = v;
                lw[at(w0 + k, p0 + j)] = -d1[k * n + j];
            }
            lw[at(w0 + k, t0 + k)] = buoy * r[k];
            // Rows b_k: horizontal divergence.
            for j in 0..n {
                mw[at(p0 + k, w0 + j)] = d1[k * n + j];
                lw[at(p0 + k, w0 + j)] = d3[k * n + j] - d1[k * n + j] * ll / (r[j] * r[j]);
            }
            lw[at(p0 + k, p0 + k)] = -1.0;
            // Heat equation.
            mw[at(t0 + k, t0 + k)] = 1.0;
            for j in 0..n {
                let mut v = (d2[k * n + j] + 2.0 / r[k] * d1[k * n + j]) / p.prandtl;
                if j == k {
                    v -= ll / rk2 / p.prandtl;
                }
                lw[at(t0 + k, t0 + j)] = v;
            }
        }
        let mut wpt = DegreeOperator::new(l, mass, lin);
        let last = n - 1;
        if l == 0 {
            for k in 0..2 * n {
                wpt = wpt.with_boundary_row(k, e(k, m3));
            }
        } else {
            let d1_row = |k: usize| {
                let mut v = vec![0.0; m3];
                v[..n].copy_from_slice(&d1[k * n..(k + 1) * n]);
                v
            };
            wpt = wpt
                .with_boundary_row(w0, e(w0, m3))
                .with_boundary_row(w0 + last, e(w0 + last, m3))
                .with_boundary_row(p0, d1_row(0))
                .with_boundary_row(p0 + last, d1_row(last));
        }
        wpt = wpt
            .with_boundary_row(t0, e(t0, m3))
            .with_boundary_row(t0 + last, e(t0 + last, m3));

        // Z, G, H: diffusion operators of Nr unknowns.
        let diffusion = |nu: f64| {
            let mut m = Matrix::zeros(n, n);
            let s = m.as_mut_slice();
            for k in 0..n {
                for j in 0..n {
                    let mut v = d2[k * n + j];
                    if j == k {
                        v -= ll / (r[k] * r[k]);
                    }
                    s[j * n + k] = nu * v;
                }
            }
            m
        };
        let all_zero = |mut op: DegreeOperator| {
            for k in 0..n {
                op = op.with_boundary_row(k, e(k, n));
            }
            op
        };
        let eta = p.magnetic_prandtl.map_or(1.0, |pm| 1.0 / pm);
        let mut z = DegreeOperator::new(l, Matrix::identity(n), diffusion(1.0));
        let mut g = DegreeOperator::new(l, Matrix::identity(n), diffusion(eta));
        let mut h = DegreeOperator::new(l, Matrix::identity(n), diffusion(eta));
        if l == 0 {
            z = all_zero(z);
            g = all_zero(g);
            h = all_zero(h);
        } else {
            let lf = l as f64;
            let robin = |k: usize, a: f64| {
                let mut v: Vec<f64> = d1[k * n..(k + 1) * n].to_vec();
                v[k] += a;
                v
            };
            z = z
                .with_boundary_row(0, e(0, n))
                .with_boundary_row(last, e(last, n));
            g = g
                .with_boundary_row(0, robin(0, lf / r[0]))
                .with_boundary_row(last, robin(last, -(lf + 1.0) / r[last]));
            h = h
                .with_boundary_row(0, e(0, n))
                .with_boundary_row(last, e(last, n));
        }
        DegreeOperators { wpt, z, g, h }
    }
}
