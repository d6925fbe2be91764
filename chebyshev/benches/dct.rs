//! DCT-I transform and derivative throughput against dense matrix products
//! doing the same work, side by side in one run.
//!
//! `cargo bench -p parnum-chebyshev --bench dct` (optional arguments: `--quick`
//! for a short run). For each `Nr` in {33, 65, 129, 257} and
//! `lmax` in {63, 127} the batch holds `(lmax + 1)(lmax + 2) / 2` complex
//! columns (all `(l, m)` modes of one field), that is
//! `(lmax + 1)(lmax + 2)` real columns of length `Nr`. The dense baseline is
//! faer's matmul (runtime SIMD dispatch, sequential) with the `Nr x Nr`
//! transform or derivative matrix applied to the same real columns.
//! Everything runs on one thread.

use std::hint::black_box;
use std::time::{Duration, Instant};

use chebyshev::num_complex::Complex;
use chebyshev::{Order, Parallelism, RadialGrid, Transform};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatMut, MatRef, Par};

/// Best time of one call over repeated runs (at least 3, at most ~`budget`).
fn time(budget: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    let mut best = f64::INFINITY;
    let mut reps = 0;
    while reps < 3 || (start.elapsed() < budget && reps < 200) {
        let t0 = Instant::now();
        f();
        best = best.min(t0.elapsed().as_secs_f64());
        reps += 1;
    }
    best
}

fn to_faer(m: &ndarray::Array2<f64>) -> Mat<f64> {
    Mat::from_fn(m.nrows(), m.ncols(), |i, j| m[[i, j]])
}

/// `y = a x` for column-major `x` (`k x ncols`) and `y` (`m x ncols`).
fn dense(a: &Mat<f64>, x: &[f64], y: &mut [f64]) {
    let (m, k) = (a.nrows(), a.ncols());
    let ncols = x.len() / k;
    let xr = MatRef::from_column_major_slice(x, k, ncols);
    let yr = MatMut::from_column_major_slice_mut(y, m, ncols);
    matmul(yr, Accum::Replace, a.as_ref(), xr, 1.0, Par::Seq);
}

struct Row {
    what: &'static str,
    fast: f64,
    dense: f64,
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let budget = Duration::from_millis(if quick { 50 } else { 400 });
    let par = Parallelism::None;
    println!(
        "chebyshev DCT-I vs dense matmul (faer, sequential), one thread; \
         times are per batch, best of repeated runs; cols = real columns of length Nr"
    );
    println!(
        "{:>4} {:>5} {:>6}  {:<28} {:>11} {:>11} {:>11} {:>11} {:>7}",
        "Nr",
        "lmax",
        "cols",
        "operation",
        "fast",
        "fast col/s",
        "dense",
        "dense col/s",
        "dense/fast"
    );
    for lmax in [63usize, 127] {
        let ncplx = (lmax + 1) * (lmax + 2) / 2;
        let ncols = 2 * ncplx;
        for nr in [33usize, 65, 129, 257] {
            let grid = RadialGrid::new(nr, 7.0 / 13.0, 20.0 / 13.0).expect("grid");
            let t = Transform::new(&grid);
            let tm = to_faer(&grid.spectral_matrix(Order::Value));
            let d1 = to_faer(&grid.d1_matrix());
            let d12 = {
                let (a, b) = (grid.d1_matrix(), grid.d2_matrix());
                Mat::from_fn(
                    2 * nr,
                    nr,
                    |i, j| if i < nr { a[[i, j]] } else { b[[i - nr, j]] },
                )
            };

            let x: Vec<f64> = (0..nr * ncols)
                .map(|i| ((i * 7919) % 1000) as f64 / 1000.0 - 0.5)
                .collect();
            let xc: Vec<Complex<f64>> = x
                .chunks_exact(2)
                .map(|p| Complex::new(p[0], p[1]))
                .collect();
            let mut y = vec![0.0; nr * ncols];
            let mut y2 = vec![0.0; 2 * nr * ncols];
            let mut sr = vec![0.0; t.scratch_len::<f64>(par)];
            let mut sc = vec![Complex::default(); t.scratch_len::<Complex<f64>>(par)];
            let mut wr = x.clone();
            let mut wc = xc.clone();
            let mut dc = vec![Complex::default(); xc.len()];
            let mut ddc = vec![Complex::default(); xc.len()];

            let dense_t = time(budget, || dense(&tm, black_box(&x), &mut y));
            let dense_d1 = time(budget, || dense(&d1, black_box(&x), &mut y));
            let dense_d12 = time(budget, || dense(&d12, black_box(&x), &mut y2));
            let rows = [
                Row {
                    what: "transform, real cols",
                    fast: time(budget, || {
                        t.to_spectral_with_scratch(black_box(&mut wr), &mut sr, par)
                            .expect("dct")
                    }),
                    dense: dense_t,
                },
                Row {
                    what: "transform, complex cols",
                    fast: time(budget, || {
                        t.to_spectral_with_scratch(black_box(&mut wc), &mut sc, par)
                            .expect("dct")
                    }),
                    dense: dense_t,
                },
                Row {
                    what: "d/dr, complex cols",
                    fast: time(budget, || {
                        t.derivative_with_scratch(black_box(&xc), &mut dc, &mut sc, par)
                            .expect("d/dr")
                    }),
                    dense: dense_d1,
                },
                Row {
                    what: "d/dr + d2/dr2, complex cols",
                    fast: time(budget, || {
                        t.derivatives_with_scratch(black_box(&xc), &mut dc, &mut ddc, &mut sc, par)
                            .expect("derivatives")
                    }),
                    dense: dense_d12,
                },
            ];
            for r in rows {
                println!(
                    "{:>4} {:>5} {:>6}  {:<28} {:>9.3}ms {:>11.3e} {:>9.3}ms {:>11.3e} {:>7.2}x",
                    nr,
                    lmax,
                    ncols,
                    r.what,
                    r.fast * 1e3,
                    ncols as f64 / r.fast,
                    r.dense * 1e3,
                    ncols as f64 / r.dense,
                    r.dense / r.fast
                );
            }
            black_box((&y, &y2, &wr, &wc, &dc, &ddc));
        }
    }
}
