//! Gauss-Legendre nodes and weights.

use std::f64::consts::PI;

/// `(P_n(x), P_{n-1}(x))` by the three-term recurrence.
fn legendre_pair(n: usize, x: f64) -> (f64, f64) {
    let mut p0 = 1.0;
    let mut p1 = x;
    if n == 0 {
        return (1.0, 0.0);
    }
    for l in 2..=n {
        let lf = l as f64;
        let p2 = ((2.0 * lf - 1.0) * x * p1 - (lf - 1.0) * p0) / lf;
        p0 = p1;
        p1 = p2;
    }
    (p1, p0)
}

/// Gauss-Legendre quadrature on `[-1, 1]` with `n` nodes.
///
/// Returns `(theta, x, w)`: colatitudes `theta_j` in `(0, pi)` increasing
/// (north to south), nodes `x_j = cos(theta_j)` decreasing, and weights
/// `w_j` (summing to 2). Newton's method in `theta` on the Legendre
/// recurrence from Tricomi's initial guess; the mirror half follows by
/// symmetry, so `x[n - 1 - j] == -x[j]` and `w[n - 1 - j] == w[j]` exactly.
/// An empty vector for `n = 0`.
pub fn gauss_legendre(n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut theta = vec![0.0; n];
    let mut x = vec![0.0; n];
    let mut w = vec![0.0; n];
    let nf = n as f64;
    for j in 0..n.div_ceil(2) {
        // Tricomi: x_k ~ (1 - 1/(8n^2) + 1/(8n^3)) cos(pi (4k - 1) / (4n + 2)), k = j + 1.
        let t0 = PI * (4.0 * (j as f64 + 1.0) - 1.0) / (4.0 * nf + 2.0);
        let x0 = (1.0 - 1.0 / (8.0 * nf * nf) + 1.0 / (8.0 * nf * nf * nf)) * t0.cos();
        let mut t = x0.clamp(-1.0, 1.0).acos();
        if 2 * j + 1 == n {
            t = PI / 2.0;
        } else {
            for it in 0..100 {
                let (c, s) = (t.cos(), t.sin());
                let (pn, pm) = legendre_pair(n, c);
                // dP_n/dtheta = n (x P_n - P_{n-1}) / sin(theta)
                let dt = pn * s / (nf * (c * pn - pm));
                t -= dt;
                if dt.abs() <= 1e-16 * t.abs() || it == 99 {
                    break;
                }
            }
        }
        let (c, s) = if 2 * j + 1 == n {
            (0.0, 1.0)
        } else {
            (t.cos(), t.sin())
        };
        // w = 2 / ((1 - x^2) P_n'(x)^2) with (1 - x^2) P_n' = n (P_{n-1} - x P_n):
        // keeping the P_n term makes w stationary to first order in the node error.
        let (pn, pm) = legendre_pair(n, c);
        let d = pm - c * pn;
        let wj = 2.0 * s * s / (nf * nf * d * d);
        theta[j] = t;
        x[j] = c;
        w[j] = wj;
        theta[n - 1 - j] = PI - t;
        x[n - 1 - j] = -c;
        w[n - 1 - j] = wj;
    }
    (theta, x, w)
}
