//! The schemes' data: exact literature weights, order conditions, published digits.

use approx::{abs_diff_eq, assert_abs_diff_eq, assert_relative_eq};
use imex::{DirkTableau, Scheme, SchemeKind};

#[test]
fn names_round_trip() {
    for name in Scheme::NAMES {
        let s: Scheme = name.parse().unwrap();
        assert_eq!(s.name().to_ascii_lowercase(), *name);
        assert_eq!(s.to_string(), s.name());
    }
    assert_eq!(Scheme::from_name("Bpr353").unwrap().order(), 3);
    assert_eq!(Scheme::sbdf3().kind(), SchemeKind::Multistep);
    assert_eq!(Scheme::ars343().kind(), SchemeKind::Dirk);
    assert!(Scheme::sbdf3().startup_tableau().is_some());
    assert!(Scheme::sbdf2().startup_tableau().is_none());
}

#[test]
fn multistep_weights_are_the_published_ones() {
    let w = Scheme::cnab2().multistep().unwrap().weights().clone();
    assert_eq!(
        (w.a, w.b_exp, w.b_imp),
        (vec![1.0, 0.0], vec![1.5, -0.5], vec![0.5, 0.5, 0.0])
    );
    let w = Scheme::sbdf2().multistep().unwrap().weights().clone();
    // Ascher, Ruuth & Wetton (1995): (3/2, -2, 1/2) and (2, -1), divided by 3/2.
    assert_eq!(w.a, vec![4.0 / 3.0, -1.0 / 3.0]);
    assert_eq!(w.b_exp, vec![4.0 / 3.0, -2.0 / 3.0]);
    assert_eq!(w.b_imp, vec![2.0 / 3.0, 0.0, 0.0]);
    let w = Scheme::sbdf3().multistep().unwrap().weights().clone();
    // (11/6, -3, 3/2, -1/3) and (3, -3, 1), divided by 11/6.
    assert_eq!(w.a, vec![18.0 / 11.0, -9.0 / 11.0, 2.0 / 11.0]);
    assert_eq!(w.b_exp, vec![18.0 / 11.0, -18.0 / 11.0, 6.0 / 11.0]);
    assert_eq!(w.b_imp, vec![6.0 / 11.0, 0.0, 0.0, 0.0]);
}

/// Order conditions of a multistep scheme on the unit grid `t_{n+1-j} = 1 - j`: exactness for
/// `u = t^q`, `q <= p`, of both the implicit and the explicit formula.
#[test]
fn multistep_order_conditions() {
    for name in ["sbdf1", "cnab2", "sbdf2", "sbdf3"] {
        let s = Scheme::from_name(name).unwrap();
        let p = s.order();
        let w = s.multistep().unwrap().weights();
        let k = w.a.len();
        let t = |j: usize| 1.0 - j as f64;
        for q in 0..=p as i32 {
            let u = |x: f64| x.powi(q);
            let du = |x: f64| {
                if q == 0 {
                    0.0
                } else {
                    q as f64 * x.powi(q - 1)
                }
            };
            let lhs = u(1.0) - (1..=k).map(|j| w.a[j - 1] * u(t(j))).sum::<f64>();
            let imp: f64 = (0..=k).map(|j| w.b_imp[j] * du(t(j))).sum();
            let exp: f64 = (1..=k).map(|j| w.b_exp[j - 1] * du(t(j))).sum();
            // Both sides are sums of <= 4 terms of size <= 36 (weights <= 3
            // times q t^(q-1) <= 12), so round-off below ~40 eps ~ 9e-15:
            // the bound is derived. Measured at most 1.1e-16 (implicit) and
            // 4.4e-16 (explicit).
            assert!(
                abs_diff_eq!(lhs, imp, epsilon = 1e-14),
                "{name} implicit q={q}: {lhs} vs {imp}"
            );
            assert!(
                abs_diff_eq!(lhs, exp, epsilon = 1e-14),
                "{name} explicit q={q}: {lhs} vs {exp}"
            );
        }
        // ... and not exact one order higher (the order is not more than claimed).
        let q = p as i32 + 1;
        let u = |x: f64| x.powi(q);
        let du = |x: f64| q as f64 * x.powi(q - 1);
        let lhs = u(1.0) - (1..=k).map(|j| w.a[j - 1] * u(t(j))).sum::<f64>();
        let exp: f64 = (1..=k).map(|j| w.b_exp[j - 1] * du(t(j))).sum();
        // Measured 1.0 to 9.8 (the error constants): 1e-3 sits far above
        // the 1e-14 round-off of the exact orders and 1000x below these.
        assert!(
            (lhs - exp).abs() > 1e-3,
            "{name} explicit exact at q={q}: {lhs} vs {exp}"
        );
    }
}

fn matvec(t: &DirkTableau, imp: bool, x: &[f64]) -> Vec<f64> {
    let s = t.stages();
    (0..s)
        .map(|i| {
            (0..s)
                .map(|j| if imp { t.a_imp(i, j) } else { t.a_exp(i, j) } * x[j])
                .sum()
        })
        .collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The order conditions of additive (IMEX) Runge-Kutta methods up to order 3, all
/// combinations of the explicit and implicit tableaux (including the coupling conditions).
#[test]
fn dirk_order_conditions() {
    for name in ["ars222", "ars343", "bpr353"] {
        let s = Scheme::from_name(name).unwrap();
        let t = s.tableau().unwrap();
        let n = t.stages();
        let ones = vec![1.0; n];
        let c = t.c().to_vec();
        // Row sums equal c in both tableaux.
        for imp in [false, true] {
            let rs = matvec(t, imp, &ones);
            for i in 0..n {
                // A sum of <= 5 entries of size <= 1: a few ulps of 1.
                // Measured at most 1.1e-16, a 9x margin.
                assert!(
                    abs_diff_eq!(rs[i], c[i], epsilon = 1e-15),
                    "{name} row sum {i}: {} vs {}",
                    rs[i],
                    c[i]
                );
            }
        }
        let bs = [t.b_exp().to_vec(), t.b_imp().to_vec()];
        // Sums of <= 5 products of size <= 1: a few ulps of 1. Measured at
        // most 1.1e-16 over all conditions, a 90x margin.
        let tol = 1e-14;
        for b in &bs {
            assert!(
                abs_diff_eq!(dot(b, &ones), 1.0, epsilon = tol),
                "{name} order 1"
            );
            assert!(
                abs_diff_eq!(dot(b, &c), 0.5, epsilon = tol),
                "{name} order 2"
            );
            if s.order() >= 3 {
                let c2: Vec<f64> = c.iter().map(|x| x * x).collect();
                assert!(
                    abs_diff_eq!(dot(b, &c2), 1.0 / 3.0, epsilon = tol),
                    "{name} b c^2"
                );
                for imp in [false, true] {
                    let ac = matvec(t, imp, &c);
                    assert!(
                        abs_diff_eq!(dot(b, &ac), 1.0 / 6.0, epsilon = tol),
                        "{name} b A c ({imp})"
                    );
                }
            }
        }
        // Not one order more (for the explicit part of the order-2 scheme).
        if s.order() == 2 {
            let c2: Vec<f64> = c.iter().map(|x| x * x).collect();
            // Measured 0.187: far above round-off, 190x above the bound.
            let miss = (dot(&bs[0], &c2) - 1.0 / 3.0).abs();
            assert!(miss > 1e-3, "{name}: b c^2 misses 1/3 by only {miss:e}");
        }
        // Singly diagonal, explicit first stage.
        for i in 1..n {
            assert_eq!(t.a_imp(i, i), t.gamma());
        }
        assert_eq!(t.a_imp(0, 0), 0.0);
    }
}

#[test]
fn irrational_coefficients_to_full_precision() {
    // ARS222: gamma = 1 - 1/sqrt(2), delta = 1 - 1/(2 gamma).
    let t = Scheme::ars222().tableau().unwrap().clone();
    let g = 1.0 - 1.0 / 2f64.sqrt();
    // Derived: gamma to 1 ulp (measured 0.85 of it, the two evaluations
    // round differently), delta to 4 ulps of 1 after one more division and
    // subtraction (measured 3.3e-16, 0.38 of it).
    assert_relative_eq!(t.gamma(), g, epsilon = 0.0, max_relative = f64::EPSILON);
    assert_abs_diff_eq!(t.a_exp(2, 0), 1.0 - 0.5 / g, epsilon = 4.0 * f64::EPSILON);
    assert!(t.stiffly_accurate());
    // ARS343: gamma is the root of 6 g^3 - 18 g^2 + 9 g - 1 in (1/6, 1/2).
    let t = Scheme::ars343().tableau().unwrap().clone();
    let g = t.gamma();
    let residual = 6.0 * g * g * g - 18.0 * g * g + 9.0 * g - 1.0;
    // The terms are up to 18 g^2 ~ 3.4, so the evaluation alone may round
    // by ~1e-15: derived bound (measured 0, gamma is the correctly rounded
    // root).
    assert!(
        residual.abs() < 1e-15,
        "cubic residual {residual:e} >= 1e-15"
    );
    // The printed 10 decimals are within 5e-11 of gamma; 1e-10 doubles
    // that. Measured 8.5e-12.
    assert_abs_diff_eq!(g, 0.4358665215, epsilon = 1e-10);
    assert!(!t.stiffly_accurate());
    // The explicit entries agree with the 10 digits printed by Ascher, Ruuth & Spiteri.
    for (i, j, printed) in [
        (2, 0, 0.3212788860),
        (2, 1, 0.3966543747),
        (3, 0, -0.105858296),
        (3, 1, 0.5529291479),
        (3, 2, 0.5529291479),
    ] {
        // Measured: the printed digits are off by up to 1.36e-10 (they are
        // not all correctly rounded, and -0.105858296 has nine decimals);
        // 2e-10 is a 1.5x margin.
        assert!(
            abs_diff_eq!(t.a_exp(i, j), printed, epsilon = 2e-10),
            "({i}, {j}): {} vs {printed}",
            t.a_exp(i, j)
        );
    }
    // ... and satisfy b^T A A c = 1/24 exactly (the printed ones to 1.3e-11).
    let c = t.c().to_vec();
    let ac = matvec(&t, false, &c);
    let aac = matvec(&t, false, &ac);
    // Nested sums of products of size <= 1 around 1/24 ~ 0.042: 1e-15 is
    // ~10 ulps of 0.1. Measured 0.
    assert_abs_diff_eq!(dot(t.b_exp(), &aac), 1.0 / 24.0, epsilon = 1e-15);
    // BPR353 is rational.
    let t = Scheme::bpr353().tableau().unwrap().clone();
    assert_eq!(t.a_imp(2, 0), 5.0 / 18.0);
    assert_eq!(t.a_exp(2, 0), 4.0 / 9.0);
    assert!(t.stiffly_accurate());
}
