//! The API contract: errors for every bad input (never a panic), batched
//! equals column by column bitwise, parallel equals serial bitwise, and
//! the complex path agrees with the real one on each part.

mod common;

use approx::assert_abs_diff_eq;
use chebyshev::num_complex::Complex;
use chebyshev::{ChebyshevError, Condition, Parallelism, RadialGrid, Side, Transform};
use common::*;

type C = Complex<f64>;

fn plan(nr: usize) -> Transform {
    Transform::new(&RadialGrid::new(nr, RI, RO).unwrap())
}

#[test]
fn too_few_points() {
    for nr in [0, 1, 2] {
        let e = RadialGrid::new(nr, RI, RO).unwrap_err();
        assert_eq!(e, ChebyshevError::TooFewPoints { nr });
        assert!(e.to_string().contains(&format!("Nr = {nr}")), "{e}");
    }
    assert!(RadialGrid::new(3, RI, RO).is_ok());
}

#[test]
fn invalid_shells() {
    let bad = [
        (1.0, 1.0),
        (2.0, 1.0),
        (f64::NAN, 1.0),
        (0.0, f64::NAN),
        (f64::NEG_INFINITY, 1.0),
        (0.0, f64::INFINITY),
        (-f64::MAX, f64::MAX),
        (0.0, 5e-324),
    ];
    for (ri, ro) in bad {
        match RadialGrid::new(9, ri, ro) {
            Err(ChebyshevError::InvalidShell { .. }) => {}
            other => panic!("[{ri}, {ro}]: {other:?}"),
        }
    }
    let e = RadialGrid::new(9, 2.0, 1.0).unwrap_err();
    assert!(e.to_string().contains("ri, ro] = [2, 1]"), "{e}");
    // A full sphere and a negative interval are fine.
    assert!(RadialGrid::new(9, 0.0, 1.0).is_ok());
    assert!(RadialGrid::new(9, -3.0, -1.0).is_ok());
}

#[test]
fn batch_length_errors() {
    let t = plan(9);
    let mut bad = vec![0.0; 9 * 3 + 1];
    let e = t.to_spectral(&mut bad, Parallelism::None).unwrap_err();
    assert_eq!(
        e,
        ChebyshevError::NotWholeColumns {
            what: "data",
            nr: 9,
            len: 28
        }
    );
    assert!(
        e.to_string().contains("28") && e.to_string().contains("Nr = 9"),
        "{e}"
    );
    let mut badc = vec![C::default(); 10];
    assert!(matches!(
        t.to_grid(&mut badc, Parallelism::Rayon(2)),
        Err(ChebyshevError::NotWholeColumns { len: 10, .. })
    ));

    let f = vec![0.0; 18];
    let mut out = vec![0.0; 27];
    let e = t.derivative(&f, &mut out, Parallelism::None).unwrap_err();
    assert_eq!(
        e,
        ChebyshevError::LengthMismatch {
            what: "df",
            expected: 18,
            got: 27
        }
    );
    assert!(e.to_string().contains("expected length 18, got 27"), "{e}");
    let e = t
        .spectral_derivative(&f, &mut out, Parallelism::None)
        .unwrap_err();
    assert_eq!(
        e,
        ChebyshevError::LengthMismatch {
            what: "out",
            expected: 18,
            got: 27
        }
    );
    let e = t
        .spectral_second_derivative(&f[..17], &mut out, Parallelism::None)
        .unwrap_err();
    assert_eq!(
        e,
        ChebyshevError::NotWholeColumns {
            what: "coeffs",
            nr: 9,
            len: 17
        }
    );
    let mut ok = vec![0.0; 18];
    let e = t
        .derivatives(&f, &mut ok, &mut out, Parallelism::None)
        .unwrap_err();
    assert_eq!(
        e,
        ChebyshevError::LengthMismatch {
            what: "ddf",
            expected: 18,
            got: 27
        }
    );
    let e = t
        .derivatives(&f, &mut out, &mut ok, Parallelism::None)
        .unwrap_err();
    assert_eq!(
        e,
        ChebyshevError::LengthMismatch {
            what: "df",
            expected: 18,
            got: 27
        }
    );
    let mut ok2 = ok.clone();
    let e = t
        .derivatives(&f[..5], &mut ok, &mut ok2, Parallelism::None)
        .unwrap_err();
    assert_eq!(
        e,
        ChebyshevError::NotWholeColumns {
            what: "f",
            nr: 9,
            len: 5
        }
    );
}

#[test]
fn scratch_errors() {
    let t = plan(33);
    for par in [Parallelism::None, Parallelism::Rayon(3)] {
        let need = t.scratch_len::<f64>(par);
        let needc = t.scratch_len::<C>(par);
        assert!(need > 0 && needc > 0);
        let mut data = vec![1.0; 33 * 4];
        let mut s = vec![0.0; need - 1];
        let e = t
            .to_spectral_with_scratch(&mut data, &mut s, par)
            .unwrap_err();
        assert_eq!(
            e,
            ChebyshevError::ScratchTooSmall {
                expected: need,
                got: need - 1
            }
        );
        assert!(
            e.to_string().contains(&format!("expected at least {need}")),
            "{e}"
        );
        assert_eq!(data, vec![1.0; 33 * 4], "data untouched on error");
        let f = data.clone();
        let mut d = vec![0.0; f.len()];
        assert!(t.derivative_with_scratch(&f, &mut d, &mut s, par).is_err());
        let mut dd = d.clone();
        assert!(t
            .derivatives_with_scratch(&f, &mut d, &mut dd, &mut s, par)
            .is_err());
        let mut cdata = vec![C::default(); 33];
        let mut cs = vec![C::default(); needc - 1];
        assert_eq!(
            t.to_grid_with_scratch(&mut cdata, &mut cs, par)
                .unwrap_err(),
            ChebyshevError::ScratchTooSmall {
                expected: needc,
                got: needc - 1
            }
        );
        // More scratch than needed is fine.
        let mut big = vec![0.0; need + 17];
        t.to_spectral_with_scratch(&mut data, &mut big, par)
            .unwrap();
    }
    assert_eq!(
        t.scratch_len::<f64>(Parallelism::Rayon(3)),
        3 * t.scratch_len::<f64>(Parallelism::None)
    );
}

#[test]
fn robin_and_integral_errors() {
    let g = RadialGrid::new(9, RI, RO).unwrap();
    for (a, b) in [(0.0, 0.0), (f64::NAN, 1.0), (1.0, f64::INFINITY)] {
        let bc = Condition::Robin { a, b };
        for side in [Side::Inner, Side::Outer] {
            assert!(matches!(
                g.boundary_row(side, bc),
                Err(ChebyshevError::InvalidRobin { .. })
            ));
            assert!(matches!(
                g.spectral_boundary_row(side, bc),
                Err(ChebyshevError::InvalidRobin { .. })
            ));
        }
    }
    let e = g.integrate(&[1.0; 8]).unwrap_err();
    assert_eq!(
        e,
        ChebyshevError::LengthMismatch {
            what: "f",
            expected: 9,
            got: 8
        }
    );
    assert!(g.integrate_shell(&[1.0; 10]).is_err());
}

#[test]
fn empty_batches_are_fine() {
    let t = plan(9);
    let mut e: Vec<f64> = vec![];
    t.to_spectral(&mut e, Parallelism::Rayon(4)).unwrap();
    let mut o: Vec<f64> = vec![];
    t.derivative(&[], &mut o, Parallelism::Rayon(4)).unwrap();
    t.spectral_derivative(&[], &mut o, Parallelism::None)
        .unwrap();
    let mut o2: Vec<f64> = vec![];
    t.derivatives(&[], &mut o, &mut o2, Parallelism::Rayon(0))
        .unwrap();
}

/// Every batched operation on `ncols` columns under `par`, as one vector
/// of bit patterns per operation (real then complex).
fn all_ops(t: &Transform, re: &[f64], cx: &[C], par: Parallelism) -> Vec<Vec<u64>> {
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let cbits = |v: &[C]| {
        v.iter()
            .flat_map(|z| [z.re.to_bits(), z.im.to_bits()])
            .collect::<Vec<_>>()
    };
    let mut out = Vec::new();
    let mut s = re.to_vec();
    t.to_spectral(&mut s, par).unwrap();
    out.push(bits(&s));
    let mut d = vec![0.0; re.len()];
    t.spectral_derivative(&s, &mut d, par).unwrap();
    out.push(bits(&d));
    t.spectral_second_derivative(&s, &mut d, par).unwrap();
    out.push(bits(&d));
    let mut dd = vec![0.0; re.len()];
    t.derivatives(re, &mut d, &mut dd, par).unwrap();
    out.push(bits(&d));
    out.push(bits(&dd));
    t.derivative(re, &mut d, par).unwrap();
    out.push(bits(&d));

    let mut s = cx.to_vec();
    t.to_grid(&mut s, par).unwrap();
    out.push(cbits(&s));
    let mut d = vec![C::default(); cx.len()];
    t.spectral_derivative(&s, &mut d, par).unwrap();
    out.push(cbits(&d));
    t.spectral_second_derivative(&s, &mut d, par).unwrap();
    out.push(cbits(&d));
    let mut dd = vec![C::default(); cx.len()];
    t.derivatives(cx, &mut d, &mut dd, par).unwrap();
    out.push(cbits(&d));
    out.push(cbits(&dd));
    t.derivative(cx, &mut d, par).unwrap();
    out.push(cbits(&d));
    out
}

fn data(nr: usize, ncols: usize, seed: u64) -> (Vec<f64>, Vec<C>) {
    let mut rng = Rng::new(seed);
    let re = rng.vec(nr * ncols);
    let cx = (0..nr * ncols)
        .map(|_| C::new(rng.uniform(), rng.uniform()))
        .collect();
    (re, cx)
}

#[test]
fn batched_equals_column_by_column_bitwise() {
    for nr in [5, 33, 64] {
        let t = plan(nr);
        let ncols = 23;
        let (re, cx) = data(nr, ncols, nr as u64);
        let batched = all_ops(&t, &re, &cx, Parallelism::None);
        let mut single: Vec<Vec<u64>> = vec![Vec::new(); batched.len()];
        for j in 0..ncols {
            let col = j * nr..(j + 1) * nr;
            let one = all_ops(&t, &re[col.clone()], &cx[col], Parallelism::None);
            for (acc, v) in single.iter_mut().zip(one) {
                acc.extend(v);
            }
        }
        assert_eq!(batched, single, "nr {nr}");
    }
}

#[test]
fn parallel_equals_serial_bitwise() {
    for nr in [9, 65] {
        let t = plan(nr);
        for ncols in [1, 7, 40] {
            let (re, cx) = data(nr, ncols, 7 + ncols as u64);
            let serial = all_ops(&t, &re, &cx, Parallelism::None);
            for par in [
                Parallelism::Rayon(0),
                Parallelism::Rayon(1),
                Parallelism::Rayon(2),
                Parallelism::Rayon(3),
                Parallelism::Rayon(64),
            ] {
                assert_eq!(
                    all_ops(&t, &re, &cx, par),
                    serial,
                    "nr {nr} ncols {ncols} {par:?}"
                );
            }
            // In a pool of another size too.
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(3)
                .build()
                .unwrap();
            let pooled = pool.install(|| all_ops(&t, &re, &cx, Parallelism::Rayon(0)));
            assert_eq!(pooled, serial);
        }
    }
}

#[test]
fn complex_parts_match_the_real_path() {
    let t = plan(33);
    let (re, cx) = data(33, 6, 3);
    let _ = re;
    let mut c = cx.clone();
    t.to_spectral(&mut c, Parallelism::None).unwrap();
    let mut r: Vec<f64> = cx.iter().map(|z| z.re).collect();
    let mut i: Vec<f64> = cx.iter().map(|z| z.im).collect();
    t.to_spectral(&mut r, Parallelism::None).unwrap();
    t.to_spectral(&mut i, Parallelism::None).unwrap();
    for k in 0..c.len() {
        // The complex path transforms both parts with the same DCT but
        // in another order of operations: round-off only. Measured at most
        // 6.7e-16 (3 ulps of values below 1); 1e-15 is a 1.5x margin.
        assert_abs_diff_eq!(c[k].re, r[k], epsilon = 1e-15);
        assert_abs_diff_eq!(c[k].im, i[k], epsilon = 1e-15);
    }
    let mut dc = vec![C::default(); cx.len()];
    t.derivative(&cx, &mut dc, Parallelism::None).unwrap();
    let re_in: Vec<f64> = cx.iter().map(|z| z.re).collect();
    let mut dr = vec![0.0; cx.len()];
    t.derivative(&re_in, &mut dr, Parallelism::None).unwrap();
    let diff = dc
        .iter()
        .zip(&dr)
        .fold(0.0f64, |m, (a, b)| m.max((a.re - b).abs()));
    // Round-off only (same recurrence, other operation order). Measured
    // 4.3e-16 relative (2 eps); was 1e-12 (2300x margin), tightened to
    // 1e-14, a 23x margin.
    let tol = 1e-14 * max_abs(&dr);
    assert!(diff < tol, "{diff:e} >= {tol:e}");
}

#[test]
fn plans_are_reusable_values() {
    let t = plan(17);
    let t2 = t.clone();
    let (re, _) = data(17, 3, 11);
    let mut a = re.clone();
    let mut b = re.clone();
    let mut s = vec![0.0; t.scratch_len::<f64>(Parallelism::None)];
    for _ in 0..3 {
        t.to_spectral_with_scratch(&mut a, &mut s, Parallelism::None)
            .unwrap();
        t2.to_spectral_with_scratch(&mut b, &mut s, Parallelism::None)
            .unwrap();
    }
    assert_eq!(a, b);
    assert_eq!(t.nr(), 17);
    assert_eq!(t.grid().ri(), RI);
    assert!(format!("{t:?}").contains("nr: 17"));
}
