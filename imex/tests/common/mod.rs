//! Helpers shared by the integration tests: a Chebyshev collocation matrix (Trefethen's
//! `cheb`), a deterministic random generator and small dense linear algebra.
#![allow(dead_code)]

use imex::Matrix;

/// Chebyshev Gauss-Lobatto points `x_j = cos(pi j / n)`, `j = 0..=n`, and the differentiation
/// matrix on them (Trefethen, Spectral Methods in MATLAB, `cheb.m`), with the differences
/// `x_i - x_j` computed from the sine identity and the diagonal from the negative sum trick.
pub fn cheb(n: usize) -> (Vec<f64>, Matrix) {
    let pi = std::f64::consts::PI;
    let nf = n as f64;
    let x: Vec<f64> = (0..=n).map(|j| (pi * j as f64 / nf).cos()).collect();
    if n == 0 {
        return (vec![1.0], Matrix::zeros(1, 1));
    }
    let c = |j: usize| {
        let s = if j.is_multiple_of(2) { 1.0 } else { -1.0 };
        if j == 0 || j == n {
            2.0 * s
        } else {
            s
        }
    };
    let mut d = Matrix::zeros(n + 1, n + 1);
    for i in 0..=n {
        let mut sum = 0.0;
        for j in 0..=n {
            if i != j {
                let (fi, fj) = (i as f64, j as f64);
                let dx =
                    2.0 * (pi * (fi + fj) / (2.0 * nf)).sin() * (pi * (fj - fi) / (2.0 * nf)).sin();
                d[(i, j)] = c(i) / c(j) / dx;
                sum += d[(i, j)];
            }
        }
        d[(i, i)] = -sum;
    }
    (x, d)
}

/// Chebyshev points mapped to `[ri, ro]` (`r_0 = ro`, `r_n = ri`) with the first and second
/// derivative matrices.
pub fn shell_grid(n: usize, ri: f64, ro: f64) -> (Vec<f64>, Matrix, Matrix) {
    let (x, d) = cheb(n);
    let scale = 2.0 / (ro - ri);
    let r: Vec<f64> = x
        .iter()
        .map(|&x| ri + 0.5 * (x + 1.0) * (ro - ri))
        .collect();
    let d1 = Matrix::from_fn(n + 1, n + 1, |i, j| d[(i, j)] * scale);
    let d2 = matmul(&d1, &d1);
    (r, d1, d2)
}

pub fn matmul(a: &Matrix, b: &Matrix) -> Matrix {
    Matrix::from_fn(a.nrows(), b.ncols(), |i, j| {
        (0..a.ncols()).map(|k| a[(i, k)] * b[(k, j)]).sum()
    })
}

pub fn transpose(a: &Matrix) -> Matrix {
    Matrix::from_fn(a.ncols(), a.nrows(), |i, j| a[(j, i)])
}

/// A deterministic generator of uniform numbers in [-0.5, 0.5).
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    }

    pub fn matrix(&mut self, n: usize, m: usize) -> Matrix {
        Matrix::from_fn(n, m, |_, _| self.next())
    }

    pub fn vec(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.next()).collect()
    }
}

/// An orthogonal matrix from Gram-Schmidt on a random one.
pub fn orthogonal(n: usize, rng: &mut Lcg) -> Matrix {
    let a = rng.matrix(n, n);
    let mut q = Matrix::zeros(n, n);
    for j in 0..n {
        let mut v: Vec<f64> = (0..n).map(|i| a[(i, j)]).collect();
        for k in 0..j {
            let dot: f64 = (0..n).map(|i| q[(i, k)] * v[i]).sum();
            for (i, vi) in v.iter_mut().enumerate() {
                *vi -= dot * q[(i, k)];
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        for (i, vi) in v.iter().enumerate() {
            q[(i, j)] = vi / norm;
        }
    }
    q
}

/// The max-abs difference of two slices relative to the max-abs of the second.
pub fn rel_diff(a: &[f64], b: &[f64]) -> f64 {
    let num = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    let den = b.iter().map(|x| x.abs()).fold(0.0, f64::max);
    num / den.max(f64::MIN_POSITIVE)
}

/// Least-squares slope of log2(err) against log2(dt).
pub fn fit_slope(dts: &[f64], errs: &[f64]) -> f64 {
    let xs: Vec<f64> = dts.iter().map(|d| d.log2()).collect();
    let ys: Vec<f64> = errs.iter().map(|e| e.log2()).collect();
    let n = xs.len() as f64;
    let mx = xs.iter().sum::<f64>() / n;
    let my = ys.iter().sum::<f64>() / n;
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    sxy / sxx
}
