//! The Gauss-Lobatto grid of a shell and everything built from it alone:
//! collocation derivative matrices, boundary rows, Chebyshev basis matrices
//! and Clenshaw-Curtis quadrature.

use std::f64::consts::PI;

use ndarray::Array2;

use crate::error::{ChebyshevError, Result};

/// Which boundary of the shell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The outer boundary `r = ro`: grid index 0 (`x = 1`).
    Outer,
    /// The inner boundary `r = ri`: grid index `Nr - 1` (`x = -1`).
    Inner,
}

/// A boundary condition at one side, `a f + b df/dr = g`; the right-hand
/// side `g` belongs to the system, not to the row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Condition {
    /// `f = g`.
    Dirichlet,
    /// `df/dr = g`.
    Neumann,
    /// `a f + b df/dr = g` (finite `a`, `b`, not both zero).
    Robin {
        /// Coefficient of `f`.
        a: f64,
        /// Coefficient of `df/dr`.
        b: f64,
    },
}

/// Derivative order of a basis matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Order {
    /// The function itself.
    Value,
    /// `d/dr`.
    First,
    /// `d^2/dr^2`.
    Second,
}

/// `sin(pi p / q)` with exact argument reduction (`q > 0`), so that
/// symmetric angles give symmetric values and `sin(pi) = 0` exactly.
fn sin_pi(p: i64, q: i64) -> f64 {
    let mut p = p.rem_euclid(2 * q);
    let mut sign = 1.0;
    if p >= q {
        p -= q;
        sign = -1.0;
    }
    if 2 * p > q {
        p = q - p;
    }
    sign * (PI * p as f64 / q as f64).sin()
}

/// `cos(pi p / q)` with exact argument reduction.
fn cos_pi(p: i64, q: i64) -> f64 {
    sin_pi(q - 2 * p, 2 * q)
}

/// `(-1)^n` as a float.
fn alt(n: usize) -> f64 {
    if n % 2 == 0 {
        1.0
    } else {
        -1.0
    }
}

/// The Gauss-Lobatto collocation grid of a spherical shell `[ri, ro]`.
///
/// Points are ordered from the outer to the inner boundary, as in MagIC:
/// `x_k = cos(pi k / (Nr - 1))` for `k = 0..Nr` (0-based; the seed's
/// `k - 1`), so `x_0 = 1` (`r_0 = ro`) and `x_{Nr-1} = -1` (`r_{Nr-1} = ri`),
/// mapped by `r_k = (ro - ri)/2 x_k + (ro + ri)/2`. The end points are set to
/// `ro` and `ri` exactly and the `x_k` are computed as
/// `sin(pi (Nr - 1 - 2k) / (2 (Nr - 1)))`, which is exactly antisymmetric.
///
/// Any finite interval `ri < ro` is accepted (a shell has `ri >= 0`, but the
/// map does not need it).
#[derive(Debug, Clone, PartialEq)]
pub struct RadialGrid {
    nr: usize,
    ri: f64,
    ro: f64,
    half: f64,
    dxdr: f64,
    x: Vec<f64>,
    r: Vec<f64>,
}

impl RadialGrid {
    /// Builds the grid of `nr >= 3` points on the finite interval `ri < ro`.
    ///
    /// # Errors
    /// [`ChebyshevError::TooFewPoints`] for `nr < 3`,
    /// [`ChebyshevError::InvalidShell`] for non-finite or unordered bounds.
    pub fn new(nr: usize, ri: f64, ro: f64) -> Result<Self> {
        if nr < 3 {
            return Err(ChebyshevError::TooFewPoints { nr });
        }
        let half = 0.5 * ro - 0.5 * ri;
        let mid = 0.5 * ro + 0.5 * ri;
        let dxdr = 1.0 / half;
        let finite = ri.is_finite() && ro.is_finite() && (ro - ri).is_finite();
        if !(finite && ri < ro && half > 0.0 && dxdr.is_finite()) {
            return Err(ChebyshevError::InvalidShell { ri, ro });
        }
        let n = (nr - 1) as i64;
        let x: Vec<f64> = (0..nr as i64).map(|k| sin_pi(n - 2 * k, 2 * n)).collect();
        let mut r: Vec<f64> = x.iter().map(|&xk| half * xk + mid).collect();
        r[0] = ro;
        r[nr - 1] = ri;
        Ok(Self {
            nr,
            ri,
            ro,
            half,
            dxdr,
            x,
            r,
        })
    }

    /// Number of collocation points `Nr`.
    pub fn nr(&self) -> usize {
        self.nr
    }

    /// Inner radius `ri`.
    pub fn ri(&self) -> f64 {
        self.ri
    }

    /// Outer radius `ro`.
    pub fn ro(&self) -> f64 {
        self.ro
    }

    /// The Gauss-Lobatto points `x_k` in `[-1, 1]`, from `1` down to `-1`.
    pub fn x(&self) -> &[f64] {
        &self.x
    }

    /// The radii `r_k`, from `ro` down to `ri`.
    pub fn r(&self) -> &[f64] {
        &self.r
    }

    /// The map factor `dx/dr = 2 / (ro - ri)` that every `r`-derivative carries.
    pub fn map_factor(&self) -> f64 {
        self.dxdr
    }

    /// The transform normalisation `c = sqrt(2 / (Nr - 1))`.
    pub fn norm(&self) -> f64 {
        (2.0 / (self.nr - 1) as f64).sqrt()
    }

    /// The `''` weight of index `i`: `1/2` for the first and last, else `1`.
    pub(crate) fn h(&self, i: usize) -> f64 {
        if i == 0 || i == self.nr - 1 {
            0.5
        } else {
            1.0
        }
    }

    fn index(&self, side: Side) -> usize {
        match side {
            Side::Outer => 0,
            Side::Inner => self.nr - 1,
        }
    }

    /// `x_i - x_j` through `2 sin(pi (i + j) / 2N) sin(pi (j - i) / 2N)`,
    /// free of the cancellation of the plain difference.
    fn x_diff(&self, i: usize, j: usize) -> f64 {
        let q = 2 * (self.nr as i64 - 1);
        let (i, j) = (i as i64, j as i64);
        2.0 * sin_pi(i + j, q) * sin_pi(j - i, q)
    }

    /// `C_ij = (c_i / c_j) (-1)^(i+j)` with `c_0 = c_N = 2`, else 1.
    fn c_ratio(&self, i: usize, j: usize) -> f64 {
        let c = |k: usize| if k == 0 || k == self.nr - 1 { 2.0 } else { 1.0 };
        c(i) / c(j) * alt(i + j)
    }

    /// Row `i` of the first-derivative matrix in `x`, with the diagonal
    /// from the negative-sum trick; rows of the lower half come from the
    /// upper half by the antisymmetry `D_{N-i, N-j} = -D_{ij}`.
    fn d1x_row(&self, i: usize) -> Vec<f64> {
        let n = self.nr - 1;
        if 2 * i > n {
            let mut row = self.d1x_row(n - i);
            row.reverse();
            row.iter_mut().for_each(|v| *v = -*v);
            return row;
        }
        let mut row = vec![0.0; self.nr];
        if 2 * i == n {
            // The middle row (x = 0) is exactly antisymmetric, diagonal 0.
            for j in 0..i {
                row[j] = self.c_ratio(i, j) / self.x_diff(i, j);
                row[n - j] = -row[j];
            }
            return row;
        }
        let mut sum = 0.0;
        for (j, v) in row.iter_mut().enumerate() {
            if j != i {
                *v = self.c_ratio(i, j) / self.x_diff(i, j);
                sum += *v;
            }
        }
        row[i] = -sum;
        row
    }

    /// Row `i` of the second-derivative matrix in `x`:
    /// `D2_ij = 2 D1_ij (D1_ii - 1 / (x_i - x_j))` off the diagonal
    /// (Welfert; Weideman and Reddy), negative sum on it, and the symmetry
    /// `D2_{N-i, N-j} = D2_{ij}`.
    fn d2x_row(&self, i: usize) -> Vec<f64> {
        let n = self.nr - 1;
        if 2 * i > n {
            let mut row = self.d2x_row(n - i);
            row.reverse();
            return row;
        }
        let d1 = self.d1x_row(i);
        let entry = |j: usize| 2.0 * d1[j] * (d1[i] - 1.0 / self.x_diff(i, j));
        let mut row = vec![0.0; self.nr];
        let mut sum = 0.0;
        if 2 * i == n {
            // The middle row is exactly symmetric.
            for j in 0..i {
                row[j] = entry(j);
                row[n - j] = row[j];
                sum += 2.0 * row[j];
            }
        } else {
            for (j, v) in row.iter_mut().enumerate() {
                if j != i {
                    *v = entry(j);
                    sum += *v;
                }
            }
        }
        row[i] = -sum;
        row
    }

    /// Row `i` of [`d1_matrix`](Self::d1_matrix) (with the map factor).
    fn d1_row(&self, i: usize) -> Vec<f64> {
        let s = self.dxdr;
        let mut row = self.d1x_row(i);
        row.iter_mut().for_each(|v| *v *= s);
        row
    }

    /// The dense first-derivative collocation matrix in `r`:
    /// `(D1 f)_k = df/dr (r_k)` for the interpolant of the values `f_k`.
    ///
    /// Built as the standard Chebyshev matrix (Trefethen's `cheb`) with the
    /// differences `x_i - x_j` from a trigonometric identity, the diagonal
    /// from the negative-sum trick (so `D1 * 1 = 0` up to one rounding) and
    /// the lower half from the antisymmetry, times `2 / (ro - ri)`.
    /// Row-major `Nr x Nr`.
    pub fn d1_matrix(&self) -> Array2<f64> {
        let mut m = Array2::zeros((self.nr, self.nr));
        for i in 0..self.nr {
            for (dst, v) in m.row_mut(i).iter_mut().zip(self.d1_row(i)) {
                *dst = v;
            }
        }
        m
    }

    /// The dense second-derivative collocation matrix in `r`, built from
    /// the explicit recursion (not as `D1 * D1`), negative-sum diagonal,
    /// times `(2 / (ro - ri))^2`. Row-major `Nr x Nr`.
    pub fn d2_matrix(&self) -> Array2<f64> {
        let s2 = self.dxdr * self.dxdr;
        let mut m = Array2::zeros((self.nr, self.nr));
        for i in 0..self.nr {
            for (dst, v) in m.row_mut(i).iter_mut().zip(self.d2x_row(i)) {
                *dst = v * s2;
            }
        }
        m
    }

    /// The collocation row that replaces the equation at `side` for the
    /// condition `a f + b df/dr = g`: `e_k` (Dirichlet), row `k` of
    /// [`d1_matrix`](Self::d1_matrix) (Neumann, bit for bit), or
    /// `a e_k + b D1[k, :]` (Robin), where `k` is the grid index of `side`.
    ///
    /// # Errors
    /// [`ChebyshevError::InvalidRobin`] for non-finite or all-zero `a`, `b`.
    pub fn boundary_row(&self, side: Side, condition: Condition) -> Result<Vec<f64>> {
        let k = self.index(side);
        match condition {
            Condition::Dirichlet => {
                let mut row = vec![0.0; self.nr];
                row[k] = 1.0;
                Ok(row)
            }
            Condition::Neumann => Ok(self.d1_row(k)),
            Condition::Robin { a, b } => {
                check_robin(a, b)?;
                let mut row = self.d1_row(k);
                row.iter_mut().for_each(|v| *v *= b);
                row[k] += a;
                Ok(row)
            }
        }
    }

    /// Entry `[k, n]` of [`spectral_matrix`](Self::spectral_matrix).
    fn basis_entry(&self, order: Order, k: usize, n: usize) -> f64 {
        let nn = self.nr - 1;
        let ch = self.norm() * self.h(n);
        let nf = n as f64;
        let (q, p) = (nn as i64, (n * k) as i64);
        let t = match order {
            Order::Value => cos_pi(p, q),
            Order::First => {
                let d = if k == 0 {
                    nf * nf
                } else if k == nn {
                    -alt(n) * nf * nf
                } else {
                    nf * sin_pi(p, q) / sin_pi(k as i64, q)
                };
                self.dxdr * d
            }
            Order::Second => {
                let d = if k == 0 {
                    nf * nf * (nf * nf - 1.0) / 3.0
                } else if k == nn {
                    alt(n) * nf * nf * (nf * nf - 1.0) / 3.0
                } else {
                    let (st, ct) = (sin_pi(k as i64, q), cos_pi(k as i64, q));
                    nf * (sin_pi(p, q) * ct - nf * cos_pi(p, q) * st) / (st * st * st)
                };
                self.dxdr * self.dxdr * d
            }
        };
        ch * t
    }

    /// The Chebyshev basis matrix `B[k, n] = c h_n d^m/dr^m C_n(x(r_k))`,
    /// with `h_0 = h_{Nr-1} = 1/2`, `h_n = 1` otherwise (the `''` of the
    /// sums), so that for the spectral coefficients `f_n` of this crate
    /// `sum_n B[k, n] f_n` is the value (`Order::Value`) or `r`-derivative
    /// of the interpolant at `r_k`. `Order::Value` gives the transform
    /// matrix itself (which is its own inverse). These are the matrices of a
    /// Chebyshev-tau/collocation system with spectral unknowns (MagIC's
    /// `rMat`), where `C_n'(x) = n sin(n t) / sin t` and
    /// `C_n''(x) = n (sin(n t) cos t - n cos(n t) sin t) / sin^3 t`
    /// (`x = cos t`) inside and the closed forms at `x = +-1`.
    /// Row-major `Nr x Nr`.
    pub fn spectral_matrix(&self, order: Order) -> Array2<f64> {
        Array2::from_shape_fn((self.nr, self.nr), |(k, n)| self.basis_entry(order, k, n))
    }

    /// The boundary row in spectral space: the row `w` with
    /// `sum_n w_n f_n = a f + b df/dr` at `side` for the spectral
    /// coefficients `f_n`. Its entries are `c h_n C_n(+-1)` and
    /// `c h_n (2 / (ro - ri)) C_n'(+-1)`, with `C_n(1) = 1`,
    /// `C_n(-1) = (-1)^n`, `C_n'(1) = n^2`, `C_n'(-1) = (-1)^(n+1) n^2`;
    /// Dirichlet and Neumann rows equal the boundary rows of
    /// [`spectral_matrix`](Self::spectral_matrix) bit for bit.
    ///
    /// # Errors
    /// [`ChebyshevError::InvalidRobin`] for non-finite or all-zero `a`, `b`.
    pub fn spectral_boundary_row(&self, side: Side, condition: Condition) -> Result<Vec<f64>> {
        let k = self.index(side);
        let row = |order| (0..self.nr).map(move |n| self.basis_entry(order, k, n));
        match condition {
            Condition::Dirichlet => Ok(row(Order::Value).collect()),
            Condition::Neumann => Ok(row(Order::First).collect()),
            Condition::Robin { a, b } => {
                check_robin(a, b)?;
                Ok(row(Order::Value)
                    .zip(row(Order::First))
                    .map(|(v, d)| a * v + b * d)
                    .collect())
            }
        }
    }

    /// Clenshaw-Curtis weights `w_k` for `int_ri^ro f(r) dr ~ sum_k w_k f(r_k)`,
    /// exact for polynomials of degree `<= Nr - 1` (the integral of the
    /// interpolant), all positive. Trefethen's `clencurt` times `(ro - ri) / 2`.
    pub fn clenshaw_curtis_weights(&self) -> Vec<f64> {
        let n = self.nr - 1;
        let q = n as i64;
        let nf = n as f64;
        let mut w = vec![0.0; self.nr];
        let end = if n % 2 == 0 {
            1.0 / (nf * nf - 1.0)
        } else {
            1.0 / (nf * nf)
        };
        w[0] = end * self.half;
        w[n] = end * self.half;
        for (k, wk) in w.iter_mut().enumerate().take(n).skip(1) {
            let mut v = 1.0;
            let kk = k as i64;
            for j in 1..=(n - 1) / 2 {
                let jf = j as f64;
                v -= 2.0 * cos_pi(2 * j as i64 * kk, q) / (4.0 * jf * jf - 1.0);
            }
            if n % 2 == 0 {
                v -= cos_pi(q * kk, q) / (nf * nf - 1.0);
            }
            *wk = 2.0 * v / nf * self.half;
        }
        w
    }

    /// The weights `w_k` with `p(r) = sum_k w_k f(r_k)` for the polynomial
    /// `p` of degree `<= Nr - 1` through the grid values (the second
    /// barycentric form on the Gauss-Lobatto points, whose weights are
    /// `(-1)^k`, halved at both ends); they sum to 1. At a grid point the
    /// weight is 1 there and 0 elsewhere. `r` may lie outside `[ri, ro]`
    /// (extrapolation, ill-conditioned far away).
    pub fn interpolation_weights(&self, r: f64) -> Vec<f64> {
        let x = (2.0 * r - self.ri - self.ro) / (self.ro - self.ri);
        if let Some(k) = self.x.iter().position(|&xk| xk == x) {
            let mut w = vec![0.0; self.nr];
            w[k] = 1.0;
            return w;
        }
        let last = self.nr - 1;
        let t: Vec<f64> = self
            .x
            .iter()
            .enumerate()
            .map(|(k, xk)| {
                let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
                let b = if k == 0 || k == last {
                    0.5 * sign
                } else {
                    sign
                };
                b / (x - xk)
            })
            .collect();
        let s: f64 = t.iter().sum();
        t.into_iter().map(|v| v / s).collect()
    }

    /// `int_ri^ro f(r) dr` by Clenshaw-Curtis from the grid values `f(r_k)`.
    ///
    /// # Errors
    /// [`ChebyshevError::LengthMismatch`] unless `f.len() == Nr`.
    pub fn integrate(&self, f: &[f64]) -> Result<f64> {
        self.check_column("f", f.len())?;
        let w = self.clenshaw_curtis_weights();
        Ok(w.iter().zip(f).map(|(w, f)| w * f).sum())
    }

    /// `int_ri^ro f(r) r^2 dr`, the radial part of a shell volume integral
    /// (the volume integral of a spherically symmetric `f` is `4 pi` times
    /// this), by Clenshaw-Curtis; exact when `f` is a polynomial of degree
    /// `<= Nr - 3`.
    ///
    /// # Errors
    /// [`ChebyshevError::LengthMismatch`] unless `f.len() == Nr`.
    pub fn integrate_shell(&self, f: &[f64]) -> Result<f64> {
        self.check_column("f", f.len())?;
        let w = self.clenshaw_curtis_weights();
        Ok(w.iter()
            .zip(&self.r)
            .zip(f)
            .map(|((w, r), f)| w * (r * r) * f)
            .sum())
    }

    pub(crate) fn check_column(&self, what: &'static str, got: usize) -> Result<()> {
        if got == self.nr {
            Ok(())
        } else {
            Err(ChebyshevError::LengthMismatch {
                what,
                expected: self.nr,
                got,
            })
        }
    }
}

fn check_robin(a: f64, b: f64) -> Result<()> {
    if a.is_finite() && b.is_finite() && (a != 0.0 || b != 0.0) {
        Ok(())
    } else {
        Err(ChebyshevError::InvalidRobin { a, b })
    }
}
