//! Derivatives with 1D transforms against analytic derivatives, across
//! rank counts and layouts.

use comm::local;
use dfft::{Derivative, Derivatives, FftError, Layout, Protocol};
use std::f64::consts::PI;

const L: [f64; 3] = [1.0, 2.0, 1.5];
/// Wavenumbers of the test field.
const M: [f64; 3] = [2.0, 3.0, 1.0];

fn kk(d: usize) -> f64 {
    2.0 * PI * M[d] / L[d]
}

/// f = sin(k0 x + 0.3) cos(k1 y) sin(k2 z + 1).
fn field(x: [f64; 3]) -> f64 {
    (kk(0) * x[0] + 0.3).sin() * (kk(1) * x[1]).cos() * (kk(2) * x[2] + 1.0).sin()
}

/// The derivatives of `field`.
fn exact(d: Derivative, x: [f64; 3]) -> f64 {
    let (s0, c0) = (kk(0) * x[0] + 0.3).sin_cos();
    let (s1, c1) = (kk(1) * x[1]).sin_cos();
    let (s2, c2) = (kk(2) * x[2] + 1.0).sin_cos();
    // Per axis: value, first and second derivative factors.
    let f = [
        [s0, kk(0) * c0, -kk(0) * kk(0) * s0],
        [c1, -kk(1) * s1, -kk(1) * kk(1) * c1],
        [s2, kk(2) * c2, -kk(2) * kk(2) * s2],
    ];
    let term = |p: [usize; 3]| f[0][p[0]] * f[1][p[1]] * f[2][p[2]];
    match d {
        Derivative::D1(a) => term(std::array::from_fn(|i| usize::from(i == a))),
        Derivative::D2(a) => term(std::array::from_fn(|i| 2 * usize::from(i == a))),
        Derivative::Mixed(a, b) => term(std::array::from_fn(|i| usize::from(i == a || i == b))),
        Derivative::Laplacian => (0..3)
            .map(|a| term(std::array::from_fn(|i| 2 * usize::from(i == a))))
            .sum(),
    }
}

fn all_requests() -> Vec<Derivative> {
    use Derivative::*;
    vec![
        D1(0),
        D1(1),
        D1(2),
        D2(0),
        D2(1),
        D2(2),
        Mixed(0, 1),
        Mixed(0, 2),
        Mixed(1, 2),
        Laplacian,
    ]
}

/// Runs the derivatives on `ranks` ranks; returns each request's field in
/// global order (bits) and the largest error per request.
fn run(
    g: [usize; 3],
    ranks: usize,
    layout: impl Fn(usize) -> Layout + Sync,
    reqs: &[Derivative],
) -> (Vec<Vec<u64>>, Vec<f64>, usize) {
    let out = local::run(ranks, |c| {
        let l = layout(c.size());
        let mut plan = Derivatives::new(c, &l, L, reqs, Protocol::Alltoallv)?;
        let b = l.box_of(c.rank());
        let st = l.strides(c.rank());
        let pos = |i: usize, j: usize, k: usize| {
            [
                i as f64 * L[0] / g[0] as f64,
                j as f64 * L[1] / g[1] as f64,
                k as f64 * L[2] / g[2] as f64,
            ]
        };
        let mut f = vec![0.0; plan.input_len()];
        let mut idx = vec![];
        for i in b.lo[0]..b.hi[0] {
            for j in b.lo[1]..b.hi[1] {
                for k in b.lo[2]..b.hi[2] {
                    let o = (i - b.lo[0]) * st[0] + (j - b.lo[1]) * st[1] + (k - b.lo[2]) * st[2];
                    f[o] = field(pos(i, j, k));
                    idx.push((o, (i * g[1] + j) * g[2] + k, pos(i, j, k)));
                }
            }
        }
        let mut out = vec![0.0; plan.output_len()];
        plan.apply(c, &f, &mut out)?;
        let n = plan.input_len();
        let mut errs = vec![0.0f64; reqs.len()];
        let mut vals = vec![vec![]; reqs.len()];
        for (r, d) in reqs.iter().enumerate() {
            for &(o, gi, x) in &idx {
                errs[r] = errs[r].max((out[r * n + o] - exact(*d, x)).abs());
                vals[r].push((gi, out[r * n + o].to_bits()));
            }
        }
        Ok::<_, FftError>((vals, errs, plan.fields_moved()))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let mut fields = vec![vec![0u64; g.iter().product()]; reqs.len()];
    let mut errs = vec![0.0f64; reqs.len()];
    for (vals, e, _) in &out {
        for r in 0..reqs.len() {
            for &(gi, bits) in &vals[r] {
                fields[r][gi] = bits;
            }
            errs[r] = errs[r].max(e[r]);
        }
    }
    (fields, errs, out[0].2)
}

#[test]
fn derivatives_match_the_analytic_ones() {
    let g = [16, 20, 12];
    let reqs = all_requests();
    let (_, errs, _) = run(g, 1, |p| Layout::bricks(g, p).unwrap(), &reqs);
    let n = *g.iter().max().unwrap() as f64;
    for (d, e) in reqs.iter().zip(&errs) {
        let (p, scale) = match d {
            Derivative::D1(a) => (1, kk(*a)),
            Derivative::D2(a) => (2, kk(*a).powi(2)),
            Derivative::Mixed(a, b) => (2, kk(*a) * kk(*b)),
            Derivative::Laplacian => (2, (0..3).map(|a| kk(a).powi(2)).sum()),
        };
        let bound = 64.0 * f64::EPSILON * n.powi(p) * scale.max(1.0);
        assert!(
            *e < bound,
            "{d:?}: error {e:e} above 64 eps n^p = {bound:e}"
        );
    }
}

#[test]
fn bit_identical_across_ranks_and_layouts_and_moving_only_what_is_needed() {
    let g = [12, 10, 8];
    let reqs = all_requests();
    let (reference, _, _) = run(g, 1, |p| Layout::bricks(g, p).unwrap(), &reqs);
    for ranks in [2, 3, 4] {
        for (name, moved_max, f) in [
            (
                "bricks",
                100,
                Box::new(move |p| Layout::bricks(g, p).unwrap())
                    as Box<dyn Fn(usize) -> Layout + Sync>,
            ),
            (
                "z-pencils",
                100,
                Box::new(move |p| Layout::pencils(g, p, 2).unwrap()),
            ),
        ] {
            let (fields, _, moved) = run(g, ranks, f, &reqs);
            assert!(moved <= moved_max);
            for (r, d) in reqs.iter().enumerate() {
                assert!(
                    fields[r] == reference[r],
                    "{name}, {ranks} ranks: {d:?} differs from 1 rank"
                );
            }
        }
    }
    // A derivative along the contiguous axis of z-pencils moves nothing;
    // one along x moves the field there and the result back.
    let moved = |reqs: &[Derivative]| run(g, 4, |p| Layout::pencils(g, p, 2).unwrap(), reqs).2;
    assert_eq!(moved(&[Derivative::D1(2)]), 0);
    assert_eq!(moved(&[Derivative::D1(0)]), 2);
    // Gradient + Hessian diagonal: x and y stages each move f once and bring
    // two results back.
    use Derivative::*;
    assert_eq!(moved(&[D1(0), D1(1), D1(2), D2(0), D2(1), D2(2)]), 6);
}

#[test]
fn bad_requests_are_errors() {
    local::run(2, |c| {
        let l = Layout::slabs([8, 8, 8], 2, 0)?;
        let e = Derivatives::new(c, &l, [1.0; 3], &[Derivative::Mixed(1, 1)], Protocol::P2p)
            .unwrap_err();
        assert!(e.to_string().contains("two different axes"), "{e}");
        let e = Derivatives::new(c, &l, [1.0; 3], &[Derivative::D1(3)], Protocol::P2p).unwrap_err();
        assert!(e.to_string().contains("valid: 0, 1, 2"), "{e}");
        let e = Derivatives::new(c, &l, [1.0, 0.0, 1.0], &[Derivative::D1(0)], Protocol::P2p)
            .unwrap_err();
        assert!(e.to_string().contains("axis 1"), "{e}");
        // A one-rank layout on two ranks (every axis whole, so no reshape
        // would have caught it): each rank would have taken the whole field.
        let one = Layout::slabs([8, 8, 8], 1, 0)?;
        let e = match Derivatives::new(c, &one, [1.0; 3], &[Derivative::D1(0)], Protocol::P2p) {
            Ok(_) => panic!("a one-rank layout was accepted on two ranks"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("communicator has 2"), "{e}");
        let mut p = Derivatives::new(c, &l, [1.0; 3], &[Derivative::Laplacian], Protocol::P2p)?;
        let e = p.apply(c, &[0.0; 3], &mut [0.0; 3]).unwrap_err();
        assert!(matches!(
            e,
            FftError::LengthMismatch {
                what: "derivative input",
                ..
            }
        ));
        Ok::<_, FftError>(())
    })
    .unwrap();
}
