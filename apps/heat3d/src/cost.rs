//! The spatial error of each operator without running it: the error model
//! behind the method-cost comparison (`cargo xtask bench method-cost`).
//!
//! The Laplacian is a sum of one-dimensional operators and both initial
//! conditions are products of one-dimensional profiles, so the semi-discrete
//! solution (exact in time) of every operator is a product of 1D solutions:
//! per axis, the discrete Fourier coefficient of wavenumber index `q` decays
//! as `exp(-D mu(q) t)`, with `mu = lambda(2 pi q / n) / h^2` for the
//! finite-difference stencil (its symbol) and `mu = k_q^2` for the spectral
//! operator. The RMS error over the grid then follows from 1D sums (see
//! [`model_rms_error`]). It is validated against measured runs in the tests.

use crate::config::{Config, Operator};
use crate::profile;
use anyhow::Result;
use rustfft::num_complex::Complex64;
use rustfft::FftPlanner;

/// The 1D semi-discrete solution of axis `d` at time `t` (time exact).
fn semi_discrete(cfg: &Config, d: usize, t: f64) -> Result<Vec<f64>> {
    let n = cfg.shape()[d];
    let l = cfg.length.get()[d];
    let h = l / n as f64;
    let mut planner = FftPlanner::<f64>::new();
    let mut g: Vec<Complex64> = profile(cfg, d, 0.0)
        .into_iter()
        .map(|x| Complex64::new(x, 0.0))
        .collect();
    planner.plan_fft_forward(n).process(&mut g);
    for (q, c) in g.iter_mut().enumerate() {
        let mu = match cfg.operator {
            Operator::Fd => {
                let theta = 2.0 * std::f64::consts::PI * q as f64 / n as f64;
                stencil::symbol(cfg.order, theta).map_err(anyhow::Error::msg)? / (h * h)
            }
            Operator::Spectral => dfft::wavenumber(q, n, l).powi(2),
        };
        *c *= (-cfg.diffusivity * mu * t).exp() / n as f64;
    }
    planner.plan_fft_inverse(n).process(&mut g);
    Ok(g.into_iter().map(|c| c.re).collect())
}

/// RMS over the grid of (semi-discrete solution - analytic solution) at
/// time `t`, for `cfg`'s operator, grid and initial condition. The error is
/// expanded as a telescoping sum of per-axis differences, so no digits are
/// lost to cancellation even at errors near rounding.
pub fn model_rms_error(cfg: &Config, t: f64) -> Result<f64> {
    // prod a - prod b = (a0 - b0) a1 a2 + b0 (a1 - b1) a2 + b0 b1 (a2 - b2):
    // the sum of squares of this three-term sum over the tensor grid is a
    // sum of nine separable products.
    let mut a = vec![];
    let mut b = vec![];
    for d in 0..3 {
        a.push(semi_discrete(cfg, d, t)?);
        b.push(profile(cfg, d, t));
    }
    let e: Vec<Vec<f64>> = (0..3)
        .map(|d| a[d].iter().zip(&b[d]).map(|(x, y)| x - y).collect())
        .collect();
    let dot = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f64>();
    // Term j: factor on axis d is e (d == j), b (d < j), a (d > j).
    let factor = |j: usize, d: usize| -> &[f64] {
        if d == j {
            &e[d]
        } else if d < j {
            &b[d]
        } else {
            &a[d]
        }
    };
    let mut total = 0.0;
    for i in 0..3 {
        for j in 0..3 {
            total += (0..3)
                .map(|d| dot(factor(i, d), factor(j, d)))
                .product::<f64>();
        }
    }
    let n: usize = cfg.shape().iter().product();
    Ok(cfg.amplitude.abs() * (total.max(0.0) / n as f64).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Initial, Integrator, PerAxis};

    fn measured(cfg: &Config) -> f64 {
        comm::local::run(2, |c| {
            crate::run(c, cfg, false).map_err(|e| format!("{e:#}"))
        })
        .unwrap_or_else(|e| panic!("{e}"))[0]
            .last
            .rms_error
    }

    #[test]
    fn the_model_matches_measured_runs() {
        // RK4 with a step far below the limit: the time error is negligible
        // (the spectral operator's exact step has none).
        for (operator, order, n) in [
            (Operator::Fd, 2, 24),
            (Operator::Fd, 8, 16),
            (Operator::Spectral, 2, 12),
        ] {
            let cfg = Config {
                n: PerAxis::All(n),
                operator,
                order,
                integrator: match operator {
                    Operator::Fd => Integrator::Rk4,
                    Operator::Spectral => Integrator::Euler,
                },
                initial: Initial::Gaussian,
                sigma: 0.1,
                steps: 100,
                dt: Some(1e-5),
                warmup: 0,
                diag_every: 100,
                ..Config::default()
            };
            let t = 100.0 * 1e-5;
            let m = measured(&cfg);
            let model = model_rms_error(&cfg, t).unwrap();
            assert!(
                (m - model).abs() <= 0.01 * model,
                "{operator:?} order {order} n {n}: measured {m:.4e}, model {model:.4e}"
            );
        }
    }
}
