//! faer and LAPACK agree (feature `lapack`), and the backend can be chosen by name.

mod common;

use imex::{AnyLu, LuBackend};

#[test]
fn backends_by_name() {
    assert_eq!(AnyLu::from_name("faer").unwrap().name(), "faer");
    assert_eq!(AnyLu::from_name("FAER").unwrap().name(), "faer");
    assert_eq!(AnyLu::from_name("lapack").is_ok(), cfg!(feature = "lapack"));
}

#[cfg(feature = "lapack")]
mod lapack {
    use super::common::{rel_diff, shell_grid, Lcg};
    use imex::{
        AnyLu, DegreeOperator, FaerLu, LapackLu, LuBackend, Matrix, ModeBlock, ModeLayout, Scheme,
        Stepper, StepperOptions,
    };
    use num_complex::Complex64;

    /// OpenBLAS's threaded dgetrf overflows the 2 MiB stacks of test threads.
    fn single_threaded_blas() {
        LapackLu::set_blas_threads(1).unwrap();
    }

    #[test]
    fn faer_and_lapack_factors_solve_alike() {
        single_threaded_blas();
        let mut rng = Lcg(3);
        let lapack = LapackLu::new().unwrap();
        for n in [1, 2, 7, 33, 65, 129, 257] {
            let m = Matrix::from_fn(n, n, |i, j| rng.next() + if i == j { 1.0 } else { 0.0 });
            let f = FaerLu.factor(m.clone()).unwrap();
            let g = lapack.factor(m).unwrap();
            let b = rng.vec(n * 6);
            let (mut x, mut y) = (b.clone(), b.clone());
            let mut s = vec![0.0; f.solve_scratch_len()];
            f.solve_columns(&mut x, 6, &mut s).unwrap();
            g.solve_columns(&mut y, 6, &mut s).unwrap();
            // Two LU solves of the same well-conditioned system (diagonal
            // shift 1) differ by round-off only. Measured at most 4.7e-14
            // (factors) and 4.5e-14 (dgetrs), n up to 257: 21x and 22x
            // margins.
            let d = rel_diff(&x, &y);
            assert!(d < 1e-12, "n={n}: faer and LAPACK differ by {d:e} >= 1e-12");
            // LAPACK's own dgetrs too.
            let mut z = b.clone();
            lapack.solve_native(&g, &mut z, 6, &mut ()).unwrap();
            let dz = rel_diff(&z, &x);
            assert!(dz < 1e-12, "n={n}: dgetrs differs by {dz:e} >= 1e-12");
        }
    }

    #[test]
    fn faer_and_lapack_steppers_agree() {
        single_threaded_blas();
        let nr = 33;
        let (r, d1, d2) = shell_grid(nr - 1, 0.35, 1.35);
        let layout = ModeLayout::full(nr, 5).unwrap();
        let ops: Vec<DegreeOperator> = (0..=5)
            .map(|l| {
                let ll = (l * (l + 1)) as f64;
                let lin = Matrix::from_fn(nr, nr, |i, j| {
                    d2[(i, j)] + 2.0 / r[i] * d1[(i, j)]
                        - if i == j { ll / (r[i] * r[i]) } else { 0.0 }
                });
                let e = |k: usize| (0..nr).map(|j| if j == k { 1.0 } else { 0.0 }).collect();
                DegreeOperator::new(l, Matrix::identity(nr), lin)
                    .with_boundary_row(0, e(0))
                    .with_boundary_row(nr - 1, e(nr - 1))
            })
            .collect();
        for scheme in ["cnab2", "sbdf3", "ars343", "bpr353"] {
            let mut results = Vec::new();
            for backend in [
                AnyLu::from_name("faer").unwrap(),
                AnyLu::from_name("lapack").unwrap(),
            ] {
                let mut s = Stepper::with_backend(
                    Scheme::from_name(scheme).unwrap(),
                    layout.clone(),
                    ops.clone(),
                    backend,
                    StepperOptions::default(),
                )
                .unwrap();
                let mut u = ModeBlock::zeros(&layout);
                for (l, ms) in layout.degrees() {
                    for &m in ms {
                        let v: Vec<Complex64> = r
                            .iter()
                            .map(|&x| {
                                Complex64::new((3.0 * x + m as f64).sin(), (l as f64 * x).cos())
                            })
                            .collect();
                        u.set_mode(l, m, &v).unwrap();
                    }
                }
                for _ in 0..20 {
                    s.step(1e-3, &mut u, |_, u, n| {
                        for (o, &v) in n.as_mut_slice().iter_mut().zip(u.as_slice()) {
                            *o = -v * v;
                        }
                    })
                    .unwrap();
                }
                results.push(u);
            }
            // 20 steps of round-off differences between the backends:
            // measured at most 4.9e-15, a 200x margin.
            let d = rel_diff(results[0].as_slice(), results[1].as_slice());
            assert!(
                d < 1e-12,
                "{scheme}: faer and LAPACK steppers differ by {d:e} >= 1e-12"
            );
        }
    }
}
