//! Accuracy against independent references: the direct transform formula,
//! polynomials with exact derivatives and integrals, smooth functions with
//! analytic derivatives and integrals, and two-point boundary value problems.

mod common;

use approx::{abs_diff_eq, assert_abs_diff_eq, assert_relative_eq, relative_eq};
use chebyshev::num_complex::Complex;
use chebyshev::{Condition, Order, Parallelism, RadialGrid, Side, Transform};
use common::*;
use faer::prelude::*;
use faer::Mat;

const EPS: f64 = f64::EPSILON;
const SIZES: [usize; 11] = [3, 4, 5, 8, 9, 10, 17, 33, 64, 65, 129];

fn plan(nr: usize) -> (RadialGrid, Transform) {
    let g = RadialGrid::new(nr, RI, RO).unwrap();
    let t = Transform::new(&g);
    (g, t)
}

#[test]
fn grid_points_follow_the_seed_formula() {
    for nr in SIZES {
        let (g, _) = plan(nr);
        let n = (nr - 1) as f64;
        assert_eq!(g.x()[0], 1.0);
        assert_eq!(g.x()[nr - 1], -1.0);
        assert_eq!(g.r()[0], RO);
        assert_eq!(g.r()[nr - 1], RI);
        for k in 0..nr {
            // x_k = cos((k - 1) pi / (Nr - 1)) for the seed's 1-based k.
            let want = (k as f64 * std::f64::consts::PI / n).cos();
            // Both are cos of k pi / n, the angle possibly rounded in
            // another order: the two results differ by at most one
            // rounding of the angle plus one of cos each, 2 ulps of 1
            // (measured 3.9e-16 = 1.75 eps, at the bound's edge by design:
            // the grid must be the seed formula to the last ulp or two).
            assert!(
                abs_diff_eq!(g.x()[k], want, epsilon = 2.0 * EPS),
                "nr {nr} k {k}: {} vs {want}",
                g.x()[k]
            );
            assert_eq!(g.x()[k], -g.x()[nr - 1 - k], "antisymmetry");
            let r = (RO - RI) / 2.0 * want + (RO + RI) / 2.0;
            // r = h x + m adds at most 2 roundings of values below 2
            // (4 eps) to x's 2 ulps scaled by h = 1/2. Measured 2.2e-16,
            // a 4x margin.
            assert!(
                abs_diff_eq!(g.r()[k], r, epsilon = 4.0 * EPS),
                "nr {nr} k {k}: {} vs {r}",
                g.r()[k]
            );
        }
        assert!(g.x().windows(2).all(|w| w[0] > w[1]));
        assert_eq!(g.map_factor(), 2.0 / (RO - RI));
        assert_eq!(g.norm(), (2.0 / n).sqrt());
    }
}

#[test]
fn fast_transform_equals_direct_formula() {
    let mut rng = Rng::new(1);
    for nr in SIZES {
        let (_, t) = plan(nr);
        let ncols = 5;
        let data = rng.vec(nr * ncols);
        let mut fast = data.clone();
        t.to_spectral(&mut fast, Parallelism::None).unwrap();
        let im = rng.vec(nr * ncols);
        let mut cplx: Vec<Complex<f64>> = data
            .iter()
            .zip(&im)
            .map(|(&re, &im)| Complex::new(re, im))
            .collect();
        t.to_grid(&mut cplx, Parallelism::None).unwrap();
        for j in 0..ncols {
            let col = j * nr..(j + 1) * nr;
            let want = direct_transform(&data[col.clone()]);
            let want_im = direct_transform(&im[col.clone()]);
            let scale = max_abs(&want).max(1.0);
            // A fast DCT's round-off grows as eps log2 N: 8 eps log2 N
            // times the output scale. Measured at most 0.14 of this bound
            // (7x margin).
            let tol = 8.0 * EPS * (nr as f64).log2().max(1.0) * scale;
            let got_re: Vec<f64> = cplx[col.clone()].iter().map(|z| z.re).collect();
            let got_im: Vec<f64> = cplx[col.clone()].iter().map(|z| z.im).collect();
            let (e_re, e_cre, e_cim) = (
                max_diff(&fast[col.clone()], &want),
                max_diff(&got_re, &want),
                max_diff(&got_im, &want_im),
            );
            assert!(e_re < tol, "real nr {nr}: {e_re:e} >= {tol:e}");
            assert!(e_cre < tol, "complex re nr {nr}: {e_cre:e} >= {tol:e}");
            assert!(e_cim < tol, "complex im nr {nr}: {e_cim:e} >= {tol:e}");
        }
    }
}

#[test]
fn chebyshev_polynomial_has_one_coefficient() {
    // f = C_m(x) on the grid has f_m = 1 / c (times 2 at the ends, where
    // the '' halves the term) and no other coefficient.
    for nr in [5, 17, 64] {
        let (g, t) = plan(nr);
        let n = nr - 1;
        for m in [0, 1, 3, n] {
            let mut f: Vec<f64> = (0..nr)
                .map(|k| (std::f64::consts::PI * ((m * k) % (2 * n)) as f64 / n as f64).cos())
                .collect();
            t.to_spectral(&mut f, Parallelism::None).unwrap();
            let want_m = if m == 0 || m == n { 2.0 } else { 1.0 } / g.norm();
            for (i, v) in f.iter().enumerate() {
                let want = if i == m { want_m } else { 0.0 };
                // Round-off of an nr-term DCT of values <= 1, scaled by
                // c: measured at most 1.8e-15 (nr 64), 1e-14 is a 5.6x margin.
                assert!(
                    abs_diff_eq!(*v, want, epsilon = 1e-14),
                    "nr {nr} m {m} i {i}: {v} vs {want}"
                );
            }
        }
    }
}

#[test]
fn transforms_round_trip() {
    let mut rng = Rng::new(2);
    for nr in SIZES.into_iter().chain([257, 513, 1025]) {
        let (_, t) = plan(nr);
        let data = rng.vec(nr * 7);
        let mut v = data.clone();
        t.to_spectral(&mut v, Parallelism::None).unwrap();
        t.to_grid(&mut v, Parallelism::None).unwrap();
        let err = rel_err(&v, &data);
        // Two DCTs of round-off eps log2 N each; measured at most 8.9e-16
        // (nr up to 1025), 1e-14 is an 11x margin.
        assert!(err < 1e-14, "real nr {nr}: {err:e} >= 1e-14");

        let cdata: Vec<Complex<f64>> = data.iter().map(|&x| Complex::new(x, -0.5 * x)).collect();
        let mut c = cdata.clone();
        t.to_grid(&mut c, Parallelism::None).unwrap();
        t.to_spectral(&mut c, Parallelism::None).unwrap();
        let err = c
            .iter()
            .zip(&cdata)
            .fold(0.0f64, |m, (a, b)| m.max((a - b).norm()));
        // As the real path; measured at most 1.2e-15 relative, 8.6x margin.
        let tol = 1e-14 * max_abs(&data);
        assert!(err < tol, "complex nr {nr}: {err:e} >= {tol:e}");
    }
}

/// Max-norm errors of every derivative path for a polynomial of degree
/// `nr - 1`, relative to the max of the exact derivative.
fn polynomial_errors(nr: usize, seed: u64) -> [f64; 8] {
    let (g, t) = plan(nr);
    let mut rng = Rng::new(seed);
    let p = Poly::random(&mut rng, nr - 1, RI - 0.1, RO + 0.1);
    let ev: Vec<_> = g.r().iter().map(|&r| p.eval(r)).collect();
    let f: Vec<f64> = ev.iter().map(|e| e.0).collect();
    let d1: Vec<f64> = ev.iter().map(|e| e.1).collect();
    let d2: Vec<f64> = ev.iter().map(|e| e.2).collect();

    let m1 = matvec(&g.d1_matrix(), &f);
    let m2 = matvec(&g.d2_matrix(), &f);

    let (mut t1, mut t2) = (vec![0.0; nr], vec![0.0; nr]);
    t.derivatives(&f, &mut t1, &mut t2, Parallelism::None)
        .unwrap();
    let mut only1 = vec![0.0; nr];
    t.derivative(&f, &mut only1, Parallelism::None).unwrap();
    assert_eq!(only1, t1, "derivative and derivatives agree bitwise");

    let mut coef = f.clone();
    t.to_spectral(&mut coef, Parallelism::None).unwrap();
    let (mut s1, mut s2) = (vec![0.0; nr], vec![0.0; nr]);
    t.spectral_derivative(&coef, &mut s1, Parallelism::None)
        .unwrap();
    t.spectral_second_derivative(&coef, &mut s2, Parallelism::None)
        .unwrap();
    let b1 = matvec(&g.spectral_matrix(Order::First), &coef);
    let b2 = matvec(&g.spectral_matrix(Order::Second), &coef);
    t.to_grid(&mut s1, Parallelism::None).unwrap();
    t.to_grid(&mut s2, Parallelism::None).unwrap();
    [
        rel_err(&m1, &d1),
        rel_err(&m2, &d2),
        rel_err(&t1, &d1),
        rel_err(&t2, &d2),
        rel_err(&s1, &d1),
        rel_err(&s2, &d2),
        rel_err(&b1, &d1),
        rel_err(&b2, &d2),
    ]
}

#[test]
fn derivatives_of_polynomials_are_exact() {
    // Rounding bounds: D1 ~ N^2 eps, D2 ~ N^4 eps in the worst case, and
    // the polynomials (degree Nr - 1, roots spread over the shell) stay
    // well below; we demand 2 N^2 eps and 2 N^3 eps. Missing one degree
    // (or a wrong factor) would give errors of order 1e-3 or more.
    // Measured: at most 0.23 of tol1 and 0.11 of tol2 (4x and 9x margins).
    for nr in [3, 4, 5, 8, 9, 16, 17, 33, 65] {
        for seed in 0..3 {
            let e = polynomial_errors(nr, 100 + seed);
            let n = nr as f64;
            let (tol1, tol2) = (2.0 * n * n * EPS, 2.0 * n * n * n * EPS);
            println!("nr {nr:3}: D1 {:.1e} D2 {:.1e} dct1 {:.1e} dct2 {:.1e} rec1 {:.1e} rec2 {:.1e} B1 {:.1e} B2 {:.1e}",
                e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]);
            for (i, err) in e.iter().enumerate() {
                let tol = if i % 2 == 0 { tol1 } else { tol2 };
                assert!(*err < tol, "nr {nr} path {i}: {err:e} >= {tol:e}");
            }
        }
    }
}

#[test]
fn derivative_matrices_are_consistent() {
    for nr in [3, 4, 9, 33, 64] {
        let (g, _) = plan(nr);
        let d1 = g.d1_matrix();
        let d2 = g.d2_matrix();
        let n = nr - 1;
        let s = g.map_factor();
        for i in 0..nr {
            let sum1: f64 = d1.row(i).sum();
            let sum2: f64 = d2.row(i).sum();
            let scale1 = d1.row(i).iter().fold(0.0f64, |m, v| m.max(v.abs()));
            let scale2 = d2.row(i).iter().fold(0.0f64, |m, v| m.max(v.abs()));
            // Exact row sums are 0 (derivative of a constant); summing nr
            // terms of size <= scale rounds by at most nr eps scale.
            // Measured at most 0.10 and 0.19 of these bounds.
            let (tol1, tol2) = (nr as f64 * EPS * scale1, nr as f64 * EPS * scale2);
            assert!(sum1.abs() <= tol1, "D1 row sum {sum1:e} > {tol1:e}");
            assert!(sum2.abs() <= tol2, "D2 row sum {sum2:e} > {tol2:e}");
            for j in 0..nr {
                assert_eq!(d1[[n - i, n - j]], -d1[[i, j]], "D1 antisymmetry");
                assert_eq!(d2[[n - i, n - j]], d2[[i, j]], "D2 symmetry");
            }
        }
        // Corner entries: D1[0,0] = (2 N^2 + 1) / 6 in x.
        let nn = n as f64;
        let want = (2.0 * nn * nn + 1.0) / 6.0 * s;
        // Round-off only, whichever way the library computes the entry.
        // Measured at most 5e-16 relative (nr up to 64), 1e-13 is a 200x
        // margin.
        assert_relative_eq!(d1[[0, 0]], want, epsilon = 0.0, max_relative = 1e-13);
        // D2 against D1 * D1.
        let d11 = d1.dot(&d1);
        let scale = d2.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let diff = (&d11 - &d2).iter().fold(0.0f64, |m, v| m.max(v.abs()));
        // Round-off of the nr-term products. Measured at most 9.8e-16
        // relative (nr 64); was 1e-12 (1000x margin), tightened to 1e-13,
        // a 100x margin.
        assert!(
            diff < 1e-13 * scale,
            "D2 vs D1^2: {diff:e} >= 1e-13 * {scale:e}"
        );
    }
}

fn smooth_error(nr: usize) -> (f64, f64, f64, f64) {
    let (g, t) = plan(nr);
    let ev: Vec<_> = g.r().iter().map(|&r| smooth(r)).collect();
    let f: Vec<f64> = ev.iter().map(|e| e.0).collect();
    let d1: Vec<f64> = ev.iter().map(|e| e.1).collect();
    let d2: Vec<f64> = ev.iter().map(|e| e.2).collect();
    let (mut t1, mut t2) = (vec![0.0; nr], vec![0.0; nr]);
    t.derivatives(&f, &mut t1, &mut t2, Parallelism::None)
        .unwrap();
    let m1 = matvec(&g.d1_matrix(), &f);
    let m2 = matvec(&g.d2_matrix(), &f);
    (
        max_diff(&t1, &d1),
        max_diff(&t2, &d2),
        max_diff(&m1, &d1),
        max_diff(&m2, &d2),
    )
}

#[test]
fn spectral_convergence_on_a_smooth_function() {
    let e9 = smooth_error(9);
    let e17 = smooth_error(17);
    let e33 = smooth_error(33);
    for (nr, e) in [(9, e9), (17, e17), (33, e33)] {
        println!(
            "exp(r) sin(3r) nr {nr:2}: dct d1 {:.2e} d2 {:.2e}, matrix d1 {:.2e} d2 {:.2e}",
            e.0, e.1, e.2, e.3
        );
    }
    let pick = |e: (f64, f64, f64, f64)| [e.0, e.1, e.2, e.3];
    let fine = RadialGrid::new(1001, RI, RO).unwrap();
    let d1max = fine
        .r()
        .iter()
        .fold(0.0f64, |m, &r| m.max(smooth(r).1.abs()));
    let d2max = fine
        .r()
        .iter()
        .fold(0.0f64, |m, &r| m.max(smooth(r).2.abs()));
    println!("max |f'| {d1max:.3}, max |f''| {d2max:.3}");
    let (a, b, c) = (pick(e9), pick(e17), pick(e33));
    for i in 0..4 {
        // Exponential, not algebraic: the apparent order between 9 and 17
        // points is over 20 (an algebraic O(N^-p) method would show p).
        let order = (a[i] / b[i]).ln() / (17.0f64 / 9.0).ln();
        // Measured apparent orders 29.9 to 32.2 and 9 -> 33 ratios of
        // 1.1e7 to 3.0e8: margins of 1.5x on the order, 11x on the ratio.
        assert!(order > 20.0, "path {i}: apparent order {order} <= 20");
        assert!(a[i] / c[i] > 1e6, "path {i}: ratio {} <= 1e6", a[i] / c[i]);
        // At 33 points only rounding is left (~N^2 eps for d/dr,
        // ~N^4 eps for d2/dr2, relative to the max of the derivative).
        let (scale, floor) = if i % 2 == 0 {
            (d1max, 1e-12)
        } else {
            (d2max, 1e-10)
        };
        // Measured 1.7e-13, 2.5e-11, 3.5e-14, 8.5e-12 for the four paths:
        // margins of 6x, 4x, 29x, 12x.
        let rel = c[i] / scale;
        assert!(
            rel < floor,
            "path {i}: relative error at 33 points {rel:e} >= {floor:e}"
        );
    }
}

#[test]
fn clenshaw_curtis_is_exact_for_polynomials() {
    for nr in [3, 4, 5, 8, 9, 16, 17, 33, 64, 65] {
        let (g, _) = plan(nr);
        let w = g.clenshaw_curtis_weights();
        assert!(w.iter().all(|&w| w > 0.0), "positive weights");
        let len = RO - RI;
        for deg in 0..nr {
            // int_ri^ro (r - ri)^deg dr = (ro - ri)^(deg+1) / (deg + 1)
            let f: Vec<f64> = g.r().iter().map(|r| (r - RI).powi(deg as i32)).collect();
            let got = g.integrate(&f).unwrap();
            let want = len.powi(deg as i32 + 1) / (deg + 1) as f64;
            // Clenshaw-Curtis with nr points is exact for degree nr - 1:
            // only the round-off of an nr-term weighted sum, <= 4 nr eps
            // relative for positive terms. Measured at most 0.14 of it.
            assert!(
                relative_eq!(
                    got,
                    want,
                    epsilon = 0.0,
                    max_relative = 4.0 * EPS * nr as f64
                ),
                "nr {nr} deg {deg}: {got} vs {want}"
            );
            // and centred monomials, odd ones integrate to 0 by symmetry
            let mid = 0.5 * (RO + RI);
            let f: Vec<f64> = g.r().iter().map(|r| (r - mid).powi(deg as i32)).collect();
            let got = g.integrate(&f).unwrap();
            let h = 0.5 * len;
            let want = if deg % 2 == 0 {
                2.0 * h.powi(deg as i32 + 1) / (deg + 1) as f64
            } else {
                0.0
            };
            // Exact as above; the terms are at most (len/2)^deg <= 1 and
            // cancel, so an absolute bound of 4.5 eps. Measured at most
            // 2.2e-16, a 4.5x margin.
            assert!(
                abs_diff_eq!(got, want, epsilon = 1e-15),
                "nr {nr} centred deg {deg}: {got} vs {want}"
            );
        }
        // Shell integral of polynomials of degree <= nr - 3: int r^(2+j) dr.
        for j in 0..nr - 2 {
            let f: Vec<f64> = g.r().iter().map(|r| r.powi(j as i32)).collect();
            let got = g.integrate_shell(&f).unwrap();
            let p = j as i32 + 3;
            let want = (RO.powi(p) - RI.powi(p)) / p as f64;
            // r^2 r^j has degree <= nr - 1: exact up to nr-term round-off
            // (one more product than above, 8 nr eps). Measured at most
            // 0.03 of it.
            assert!(
                relative_eq!(
                    got,
                    want,
                    epsilon = 0.0,
                    max_relative = 8.0 * EPS * nr as f64
                ),
                "shell nr {nr} j {j}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn clenshaw_curtis_converges_on_smooth_integrands() {
    let g = RadialGrid::new(33, RI, RO).unwrap();
    // int e^r sin(3r) dr = e^r (sin 3r - 3 cos 3r) / 10
    let anti = |r: f64| r.exp() * ((3.0 * r).sin() - 3.0 * (3.0 * r).cos()) / 10.0;
    let f: Vec<f64> = g.r().iter().map(|&r| smooth(r).0).collect();
    let got = g.integrate(&f).unwrap();
    let want = anti(RO) - anti(RI);
    // At 33 points the quadrature error of this entire integrand is far
    // below round-off; the value is ~0.52 (ulp 1.1e-16), so 1e-15 is ~9 ulps. Measured
    // 2.2e-16, a 4.5x margin.
    assert_abs_diff_eq!(got, want, epsilon = 1e-15);
    // int r^2 e^r dr = e^r (r^2 - 2 r + 2)
    let anti = |r: f64| r.exp() * (r * r - 2.0 * r + 2.0);
    let f: Vec<f64> = g.r().iter().map(|r| r.exp()).collect();
    let got = g.integrate_shell(&f).unwrap();
    let want = anti(RO) - anti(RI);
    // As above for a value of ~4 (ulp 8.9e-16): 1e-14 is ~11 ulps.
    // Measured 0 here (the roundings happened to cancel).
    assert_abs_diff_eq!(got, want, epsilon = 1e-14);
}

#[test]
fn boundary_rows_give_boundary_values() {
    let nr = 33;
    let (g, t) = plan(nr);
    let f: Vec<f64> = g.r().iter().map(|&r| smooth(r).0).collect();
    let mut coef = f.clone();
    t.to_spectral(&mut coef, Parallelism::None).unwrap();
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let d1 = g.d1_matrix();
    let cases = [
        Condition::Dirichlet,
        Condition::Neumann,
        Condition::Robin { a: 2.0, b: -0.5 },
        Condition::Robin { a: 0.0, b: 1.0 },
    ];
    for (side, r, k) in [(Side::Outer, RO, 0), (Side::Inner, RI, nr - 1)] {
        let (v, d, _) = smooth(r);
        for bc in cases {
            let want = match bc {
                Condition::Dirichlet => v,
                Condition::Neumann => d,
                Condition::Robin { a, b } => a * v + b * d,
            };
            let row = g.boundary_row(side, bc).unwrap();
            let srow = g.spectral_boundary_row(side, bc).unwrap();
            let got = dot(&row, &f);
            let sgot = dot(&srow, &coef);
            // 33 points resolve the smooth function to round-off; the
            // Neumann rows have entries ~ s N^2 ~ 2000, so round-off is
            // ~1e-12 absolute. Measured at most 3.7e-13 (grid rows) and
            // 1.8e-12 (spectral rows): margins of 27x and 5.6x.
            assert!(
                abs_diff_eq!(got, want, epsilon = 1e-11),
                "{side:?} {bc:?} grid {got} vs {want}"
            );
            assert!(
                abs_diff_eq!(sgot, want, epsilon = 1e-11),
                "{side:?} {bc:?} spectral {sgot} vs {want}"
            );
        }
        let dir = g.boundary_row(side, Condition::Dirichlet).unwrap();
        assert!(dir
            .iter()
            .enumerate()
            .all(|(j, &v)| v == if j == k { 1.0 } else { 0.0 }));
        let neu = g.boundary_row(side, Condition::Neumann).unwrap();
        assert_eq!(neu, d1.row(k).to_vec(), "Neumann row is D1 row");
        let sdir = g.spectral_boundary_row(side, Condition::Dirichlet).unwrap();
        let sneu = g.spectral_boundary_row(side, Condition::Neumann).unwrap();
        assert_eq!(sdir, g.spectral_matrix(Order::Value).row(k).to_vec());
        assert_eq!(sneu, g.spectral_matrix(Order::First).row(k).to_vec());
        // The closed forms: c h_n C_n(+-1), c h_n s C_n'(+-1).
        let (c, s) = (g.norm(), g.map_factor());
        for n in 0..nr {
            let h = if n == 0 || n == nr - 1 { 0.5 } else { 1.0 };
            let sign = if side == Side::Inner && n % 2 == 1 {
                -1.0
            } else {
                1.0
            };
            let nn = (n * n) as f64;
            assert_eq!(sdir[n], c * h * sign);
            let dsign = if side == Side::Inner { -sign } else { 1.0 };
            // Derived: a product of four rounded factors differs from
            // another evaluation by at most 2 eps relative (measured 0).
            assert!(
                abs_diff_eq!(
                    sneu[n],
                    c * h * s * dsign * nn,
                    epsilon = 2.0 * EPS * (c * s * nn)
                ),
                "{side:?} n {n}: {} vs {}",
                sneu[n],
                c * h * s * dsign * nn
            );
        }
    }
}

#[test]
fn spectral_value_matrix_is_the_transform() {
    let mut rng = Rng::new(9);
    for nr in [3, 9, 33, 64] {
        let (g, t) = plan(nr);
        let b0 = g.spectral_matrix(Order::Value);
        let v = rng.vec(nr);
        let dense = matvec(&b0, &v);
        let mut fast = v.clone();
        t.to_grid(&mut fast, Parallelism::None).unwrap();
        // Derived: an nr-term dense sum with entries <= 1 rounds by at most
        // ~nr eps |v|; 1e-14 nr (45 nr eps) covers it and the DCT's eps
        // log N. Measured at most 1.3e-3 of this bound.
        let (d, tol) = (max_diff(&dense, &fast), 1e-14 * max_abs(&v) * nr as f64);
        assert!(d < tol, "nr {nr}: B0 v vs fast {d:e} >= {tol:e}");
        // involution: B0 * B0 = I
        let id = b0.dot(&b0);
        for i in 0..nr {
            for j in 0..nr {
                let want = if i == j { 1.0 } else { 0.0 };
                // As above: nr-term sums; measured at most 1.8e-15
                // (2.8e-3 of the bound).
                assert!(
                    abs_diff_eq!(id[[i, j]], want, epsilon = 1e-14 * nr as f64),
                    "nr {nr} ({i}, {j}): {} vs {want}",
                    id[[i, j]]
                );
            }
        }
    }
}

/// Solves `A x = b` with faer's partial-pivoting LU.
fn solve(a: &ndarray::Array2<f64>, b: &[f64]) -> Vec<f64> {
    let n = b.len();
    let am = Mat::from_fn(n, n, |i, j| a[[i, j]]);
    let bm = Mat::from_fn(n, 1, |i, _| b[i]);
    let x = am.partial_piv_lu().solve(&bm);
    (0..n).map(|i| x[(i, 0)]).collect()
}

#[test]
fn dirichlet_bvp_with_collocation_matrices() {
    // f'' = -pi^2 sin(pi (r - ri)), f(ri) = 0, f(ro) = sin(pi (ro - ri)).
    let pi = std::f64::consts::PI;
    for nr in [17, 33, 65] {
        let g = RadialGrid::new(nr, RI, RO).unwrap();
        let exact = |r: f64| (pi * (r - RI)).sin();
        let mut a = g.d2_matrix();
        let mut b: Vec<f64> = g.r().iter().map(|&r| -pi * pi * exact(r)).collect();
        for (side, k, r) in [(Side::Outer, 0, RO), (Side::Inner, nr - 1, RI)] {
            let row = g.boundary_row(side, Condition::Dirichlet).unwrap();
            a.row_mut(k).iter_mut().zip(&row).for_each(|(d, s)| *d = *s);
            b[k] = exact(r);
        }
        let x = solve(&a, &b);
        let want: Vec<f64> = g.r().iter().map(|&r| exact(r)).collect();
        let err = max_diff(&x, &want);
        println!("sin BVP nr {nr}: {err:.2e}");
        if nr >= 33 {
            // Spectral accuracy leaves the LU solve's round-off with
            // cond(D2) ~ N^4: measured 1.5e-14 and 4.7e-14 at nr 33 and
            // 65, a 2x margin.
            assert!(err < 1e-13, "nr {nr}: {err:e} >= 1e-13");
        }
    }
}

/// `(r^2 T')' = 0` on the shell: `T = (ri ro / r - ri) / (ro - ri)`.
fn conduction(r: f64) -> (f64, f64) {
    let l = RO - RI;
    ((RI * RO / r - RI) / l, -RI * RO / (r * r) / l)
}

#[test]
fn shell_conduction_profile_grid_and_spectral() {
    for nr in [9, 17, 33] {
        let g = RadialGrid::new(nr, RI, RO).unwrap();
        let t = Transform::new(&g);
        let (d1, d2) = (g.d1_matrix(), g.d2_matrix());
        let (b1, b2) = (
            g.spectral_matrix(Order::First),
            g.spectral_matrix(Order::Second),
        );
        let want: Vec<f64> = g.r().iter().map(|&r| conduction(r).0).collect();
        // Boundary setups: Dirichlet both sides; Neumann at ro; Robin at ri.
        let (t_ri, dt_ri) = conduction(RI);
        let (_, dt_ro) = conduction(RO);
        let setups = [
            (Condition::Dirichlet, 0.0, Condition::Dirichlet, 1.0),
            (Condition::Neumann, dt_ro, Condition::Dirichlet, 1.0),
            (
                Condition::Dirichlet,
                0.0,
                Condition::Robin { a: 1.5, b: 0.25 },
                1.5 * t_ri + 0.25 * dt_ri,
            ),
        ];
        for (outer, g_ro, inner, g_ri) in setups {
            // r^2 T'' + 2 r T' = 0 at the interior points, on grid values
            // (collocation) and on spectral unknowns (MagIC's rMat style).
            let mut a = ndarray::Array2::zeros((nr, nr));
            let mut s = ndarray::Array2::zeros((nr, nr));
            for (k, &r) in g.r().iter().enumerate() {
                for j in 0..nr {
                    a[[k, j]] = r * r * d2[[k, j]] + 2.0 * r * d1[[k, j]];
                    s[[k, j]] = r * r * b2[[k, j]] + 2.0 * r * b1[[k, j]];
                }
            }
            let mut rhs = vec![0.0; nr];
            for (side, k, bc, val) in [
                (Side::Outer, 0, outer, g_ro),
                (Side::Inner, nr - 1, inner, g_ri),
            ] {
                let row = g.boundary_row(side, bc).unwrap();
                let srow = g.spectral_boundary_row(side, bc).unwrap();
                a.row_mut(k).iter_mut().zip(&row).for_each(|(d, v)| *d = *v);
                s.row_mut(k)
                    .iter_mut()
                    .zip(&srow)
                    .for_each(|(d, v)| *d = *v);
                rhs[k] = val;
            }
            let x = solve(&a, &rhs);
            let mut xs = solve(&s, &rhs);
            t.to_grid(&mut xs, Parallelism::None).unwrap();
            let (e, es) = (max_diff(&x, &want), max_diff(&xs, &want));
            println!("conduction nr {nr} {outer:?}/{inner:?}: grid {e:.2e} spectral {es:.2e}");
            if nr == 33 {
                // Measured at most 1.6e-14 (grid) and 7.2e-16 (spectral):
                // 6x and 140x margins under one shared bound.
                assert!(
                    e < 1e-13 && es < 1e-13,
                    "nr {nr} {outer:?} {inner:?}: {e:e} {es:e}, bound 1e-13"
                );
            }
        }
    }
}

/// The barycentric interpolant reproduces every polynomial of degree up
/// to `Nr - 1` (against the polynomial evaluated directly), is exact at
/// the grid points, and its weights sum to 1.
#[test]
fn interpolation_reproduces_polynomials_up_to_the_grid_degree() {
    let (ri, ro) = (7.0 / 13.0, 20.0 / 13.0);
    for nr in [5, 17, 33] {
        let g = RadialGrid::new(nr, ri, ro).unwrap();
        let p = |r: f64| {
            let x = (r - 1.0) * 1.7;
            (0..nr).fold(0.0, |acc, k| acc * x + (k as f64 + 1.0).recip())
        };
        let f: Vec<f64> = g.r().iter().map(|&r| p(r)).collect();
        for r in [ri, 0.6, 1.0, 1.234, ro, g.r()[nr / 2]] {
            let w = g.interpolation_weights(r);
            let v: f64 = w.iter().zip(&f).map(|(a, b)| a * b).sum();
            let sum: f64 = w.iter().sum();
            assert!(
                (sum - 1.0).abs() < 1e-13,
                "nr {nr} r {r}: weights sum to {sum}"
            );
            assert!(
                (v - p(r)).abs() < 1e-12 * p(r).abs().max(1.0),
                "nr {nr} r {r}: {v} against {}",
                p(r)
            );
        }
        // At every grid point the interpolant is the grid value.
        for (k, &r) in g.r().iter().enumerate() {
            let w = g.interpolation_weights(r);
            let v: f64 = w.iter().zip(&f).map(|(a, b)| a * b).sum();
            assert!(
                (v - f[k]).abs() < 1e-12 * f[k].abs().max(1.0),
                "nr {nr} point {k}"
            );
        }
    }
    // Degree Nr is not reproduced: the test can fail.
    let g = RadialGrid::new(5, ri, ro).unwrap();
    let q = |r: f64| r.powi(5);
    let f: Vec<f64> = g.r().iter().map(|&r| q(r)).collect();
    let w = g.interpolation_weights(0.9);
    let v: f64 = w.iter().zip(&f).map(|(a, b)| a * b).sum();
    assert!(
        (v - q(0.9)).abs() > 1e-8,
        "degree 5 on 5 points reproduced: {v}"
    );
}
