//! Bad input is an error naming the expected value and the one it got, never a panic.

use imex::{
    AnyLu, DegreeOperator, DirkTableau, FaerLu, ImexError, LapackLu, LuBackend, LuFactors, Matrix,
    ModeBlock, ModeLayout, Scheme, Stepper,
};
use num_complex::Complex64;

fn ops(nr: usize, ls: &[usize]) -> Vec<DegreeOperator> {
    ls.iter()
        .map(|&l| DegreeOperator::new(l, Matrix::identity(nr), Matrix::identity(nr)))
        .collect()
}

#[test]
fn unknown_scheme_lists_the_valid_names() {
    let e = Scheme::from_name("rk4").unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("\"rk4\""), "{msg}");
    for name in Scheme::NAMES {
        assert!(msg.contains(name), "{msg} lacks {name}");
    }
    assert!(matches!(
        "crank".parse::<Scheme>(),
        Err(ImexError::UnknownScheme { .. })
    ));
    // Case and surrounding blanks do not matter.
    assert_eq!(Scheme::from_name(" CNAB2 ").unwrap().name(), "CNAB2");
    let e = AnyLu::from_name("mkl").unwrap_err();
    assert!(e.to_string().contains("faer, lapack"), "{e}");
}

#[test]
fn wrong_matrix_sizes() {
    let layout = ModeLayout::full(4, 1).unwrap();
    let mut bad = ops(4, &[0, 1]);
    bad[1].linear = Matrix::zeros(4, 3);
    let e = Stepper::new(Scheme::cnab2(), layout.clone(), bad).unwrap_err();
    assert_eq!(
        e,
        ImexError::MatrixShape {
            what: "linear operator L_l",
            l: 1,
            expected_rows: 4,
            expected_cols: 4,
            got_rows: 4,
            got_cols: 3
        }
    );
    assert_eq!(
        e.to_string(),
        "linear operator L_l of degree l = 1 is 4 x 3, expected 4 x 4"
    );
    let mut bad = ops(4, &[0, 1]);
    bad[0].mass = Matrix::identity(5);
    assert!(matches!(
        Stepper::new(Scheme::cnab2(), layout.clone(), bad),
        Err(ImexError::MatrixShape {
            what: "mass matrix A_l",
            l: 0,
            got_rows: 5,
            ..
        })
    ));
    // Boundary rows: length, index, duplicates, finiteness.
    let mut bad = ops(4, &[0, 1]);
    bad[0].boundary_rows.push(imex::BoundaryRow {
        row: 0,
        coeffs: vec![1.0; 3],
    });
    assert!(matches!(
        Stepper::new(Scheme::cnab2(), layout.clone(), bad),
        Err(ImexError::MatrixShape {
            what: "boundary row",
            expected_cols: 4,
            got_cols: 3,
            ..
        })
    ));
    let bad = vec![
        ops(4, &[0])[0].clone().with_boundary_row(4, vec![1.0; 4]),
        ops(4, &[1])[0].clone(),
    ];
    assert_eq!(
        Stepper::new(Scheme::cnab2(), layout.clone(), bad).unwrap_err(),
        ImexError::BoundaryRowIndex {
            l: 0,
            row: 4,
            nr: 4
        }
    );
    let bad = vec![
        ops(4, &[0])[0].clone(),
        ops(4, &[1])[0]
            .clone()
            .with_boundary_row(2, vec![1.0; 4])
            .with_boundary_row(2, vec![0.0; 4]),
    ];
    assert_eq!(
        Stepper::new(Scheme::cnab2(), layout.clone(), bad).unwrap_err(),
        ImexError::DuplicateBoundaryRow { l: 1, row: 2 }
    );
    let mut bad = ops(4, &[0, 1]);
    bad[1].mass[(2, 3)] = f64::NAN;
    assert_eq!(
        Stepper::new(Scheme::cnab2(), layout, bad).unwrap_err(),
        ImexError::NonFinite {
            what: "mass matrix A_l",
            l: 1,
            row: 2,
            col: 3
        }
    );
    // Matrix constructors.
    assert_eq!(
        Matrix::from_col_major(3, 3, vec![0.0; 8]).unwrap_err(),
        ImexError::LengthMismatch {
            what: "column-major matrix data",
            expected: 9,
            got: 8
        }
    );
    assert!(Matrix::from_row_major(2, 3, &[0.0; 7]).is_err());
    assert_eq!(Matrix::identity(2).get(2, 0), None);
    assert!(matches!(
        FaerLu.factor(Matrix::zeros(3, 2)),
        Err(ImexError::LengthMismatch { .. })
    ));
}

#[test]
fn operators_must_match_the_layout() {
    let layout = ModeLayout::new(3, [(0, vec![0]), (2, vec![1, 2])]).unwrap();
    assert_eq!(
        Stepper::new(Scheme::cnab2(), layout.clone(), ops(3, &[0])).unwrap_err(),
        ImexError::MissingOperator { l: 2 }
    );
    let e = Stepper::new(Scheme::cnab2(), layout.clone(), ops(3, &[0, 1, 2])).unwrap_err();
    assert_eq!(
        e,
        ImexError::UnexpectedOperator {
            l: 1,
            held: "0, 2".into()
        }
    );
    assert_eq!(
        Stepper::new(Scheme::cnab2(), layout, ops(3, &[2, 0, 2])).unwrap_err(),
        ImexError::DuplicateDegree {
            l: 2,
            what: "operators"
        }
    );
    assert_eq!(
        ModeLayout::new(3, [(1, vec![0, 2])]).unwrap_err(),
        ImexError::InvalidOrder { l: 1, m: 2 }
    );
    assert_eq!(
        ModeLayout::new(3, [(4, vec![2, 1])]).unwrap_err(),
        ImexError::UnsortedOrders {
            l: 4,
            previous: 2,
            got: 1
        }
    );
    assert_eq!(
        ModeLayout::new(3, [(1, vec![0]), (1, vec![1])]).unwrap_err(),
        ImexError::DuplicateDegree {
            l: 1,
            what: "layout"
        }
    );
    assert_eq!(
        ModeLayout::full(0, 3).unwrap_err(),
        ImexError::InvalidRadialSize { got: 0 }
    );
}

#[test]
fn wrong_block_sizes() {
    let layout = ModeLayout::full(4, 2).unwrap();
    let other = ModeLayout::new(4, [(0, vec![0]), (1, vec![1]), (2, vec![0, 1, 2])]).unwrap();
    let mut s = Stepper::new(Scheme::sbdf2(), layout.clone(), ops(4, &[0, 1, 2])).unwrap();
    let mut wrong = ModeBlock::zeros(&other);
    let e = s.step(0.1, &mut wrong, |_, _, _| {}).unwrap_err();
    let ImexError::LayoutMismatch {
        what,
        expected,
        got,
    } = &e
    else {
        panic!("unexpected {e:?}");
    };
    assert_eq!(*what, "state");
    assert!(expected.contains("1:2") && got.contains("1:1"), "{e}");
    assert_eq!(s.steps(), 0);
    // An explicit callback that swaps in a block of another layout.
    let mut u = ModeBlock::zeros(&layout);
    let e = s
        .step(0.1, &mut u, |_, _, out| *out = ModeBlock::zeros(&other))
        .unwrap_err();
    assert!(matches!(
        e,
        ImexError::LayoutMismatch {
            what: "explicit terms",
            ..
        }
    ));
    assert!(!s.step_in_progress());
    s.step(0.1, &mut u, |_, _, _| {}).unwrap();
    // Data lengths.
    assert_eq!(
        ModeBlock::from_vec(&layout, vec![0.0; 3]).unwrap_err(),
        ImexError::LengthMismatch {
            what: "mode block data",
            expected: 4 * 2 * 6,
            got: 3
        }
    );
    assert!(matches!(
        u.set_mode(1, 1, &[Complex64::new(0.0, 0.0); 3]),
        Err(ImexError::LengthMismatch {
            expected: 4,
            got: 3,
            ..
        })
    ));
    assert_eq!(
        u.set_mode(1, 2, &[Complex64::new(0.0, 0.0); 4])
            .unwrap_err(),
        ImexError::ModeNotHeld { l: 1, m: 2 }
    );
    // Factor-level solves.
    let f = FaerLu.factor(Matrix::identity(4)).unwrap();
    let mut scratch = vec![0.0; f.solve_scratch_len()];
    assert_eq!(
        f.solve_columns(&mut [0.0; 7], 2, &mut scratch).unwrap_err(),
        ImexError::LengthMismatch {
            what: "right-hand sides (n x ncols)",
            expected: 8,
            got: 7
        }
    );
    assert!(matches!(
        f.solve_columns(&mut [0.0; 8], 2, &mut [0.0; 1]),
        Err(ImexError::LengthMismatch {
            what: "solve scratch",
            ..
        })
    ));
    assert_eq!(
        LuFactors::from_packed(2, vec![1.0, 0.0, 0.0, 1.0], vec![0, 0]).unwrap_err(),
        ImexError::InvalidPermutation {
            position: 1,
            got: 0,
            n: 2
        }
    );
    let e = LuFactors::from_lapack(2, vec![1.0, 0.0, 0.0, 1.0], &[3, 2]).unwrap_err();
    assert_eq!(
        e,
        ImexError::InvalidPivot {
            position: 0,
            got: 3,
            n: 2
        }
    );
    assert_eq!(e.to_string(), "LAPACK pivot 0 is 3: expected 1 ..= 2");
    assert_eq!(
        LuFactors::from_packed(2, vec![1.0, 0.0, 0.0, 0.0], vec![0, 1]).unwrap_err(),
        ImexError::Singular { pivot: 1 }
    );
    // Boundary values.
    let mut s = Stepper::new(
        Scheme::cnab2(),
        layout.clone(),
        vec![
            ops(4, &[0])[0]
                .clone()
                .with_boundary_row(0, vec![1.0, 0.0, 0.0, 0.0]),
            ops(4, &[1])[0].clone(),
            ops(4, &[2])[0].clone(),
        ],
    )
    .unwrap();
    assert_eq!(
        s.set_boundary_value(0, 0, 1, Complex64::new(1.0, 0.0))
            .unwrap_err(),
        ImexError::BoundaryIndex {
            l: 0,
            index: 1,
            count: 1
        }
    );
    assert_eq!(
        s.set_boundary_value(3, 0, 0, Complex64::new(1.0, 0.0))
            .unwrap_err(),
        ImexError::ModeNotHeld { l: 3, m: 0 }
    );
    s.set_boundary_value(0, 0, 0, Complex64::new(1.0, 2.0))
        .unwrap();
    assert_eq!(s.boundary_value(0, 0, 0).unwrap(), Complex64::new(1.0, 2.0));
}

#[test]
fn non_positive_or_non_finite_dt() {
    let layout = ModeLayout::full(3, 1).unwrap();
    let mut s = Stepper::new(Scheme::ars222(), layout.clone(), ops(3, &[0, 1])).unwrap();
    let mut u = ModeBlock::zeros(&layout);
    u.fill(1.0);
    for dt in [0.0, -1e-3, f64::NAN, f64::INFINITY, -0.0] {
        let e = s.step(dt, &mut u, |_, _, _| {}).unwrap_err();
        assert!(matches!(e, ImexError::InvalidTimeStep { got } if got.to_bits() == dt.to_bits()));
        assert!(e.to_string().contains("positive and finite"), "{e}");
    }
    assert!(u.as_slice().iter().all(|&v| v == 1.0));
    assert_eq!((s.steps(), s.time()), (0, 0.0));
    assert_eq!(s.factorizations(0), Some(0));
    assert!(matches!(
        s.restart(f64::NAN),
        Err(ImexError::InvalidTime { got }) if got.is_nan()
    ));
}

#[test]
fn singular_operators_name_the_degree() {
    let layout = ModeLayout::full(3, 1).unwrap();
    let zero = vec![
        DegreeOperator::new(0, Matrix::identity(3), Matrix::zeros(3, 3)),
        DegreeOperator::new(1, Matrix::zeros(3, 3), Matrix::zeros(3, 3)),
    ];
    let mut s = Stepper::new(Scheme::cnab2(), layout.clone(), zero).unwrap();
    let mut u = ModeBlock::zeros(&layout);
    let e = s.step(0.1, &mut u, |_, _, _| {}).unwrap_err();
    assert!(
        matches!(e, ImexError::SingularOperator { l: 1, coefficient, pivot: 0 } if coefficient == 0.05),
        "{e:?}"
    );
    assert!(!s.step_in_progress());
}

#[test]
fn invalid_tableaux() {
    let ok = || {
        (
            vec![vec![0.0, 0.0], vec![1.0, 0.0]],
            vec![vec![0.0, 0.0], vec![0.0, 1.0]],
            vec![1.0, 0.0],
            vec![0.0, 1.0],
            vec![0.0, 1.0],
        )
    };
    let (ae, ai, be, bi, c) = ok();
    assert!(DirkTableau::new("euler", 1, ae, ai, be, bi, c).is_ok());
    let (mut ae, ai, be, bi, c) = ok();
    ae[0][1] = 0.5;
    let e = DirkTableau::new("x", 1, ae, ai, be, bi, c).unwrap_err();
    assert!(e.to_string().contains("strictly lower triangular"), "{e}");
    let (ae, mut ai, be, bi, c) = ok();
    ai[0][0] = 0.5;
    let e = DirkTableau::new("x", 1, ae, ai, be, bi, c).unwrap_err();
    assert!(e.to_string().contains("must be explicit"), "{e}");
    let (ae, ai, be, bi, _) = ok();
    let e = DirkTableau::new("x", 1, ae, ai, be, bi, vec![0.0, 0.5]).unwrap_err();
    assert!(e.to_string().contains("expected c[1] = 0.5"), "{e}");
    let (ae, ai, be, _, c) = ok();
    let e = DirkTableau::new("x", 1, ae, ai, be, vec![1.0], c).unwrap_err();
    assert!(e.to_string().contains("2 entries, got 1"), "{e}");
}

#[test]
fn lapack_backend_availability() {
    assert_eq!(LapackLu::new().is_ok(), LapackLu::available());
    assert_eq!(LapackLu::set_blas_threads(1).is_ok(), LapackLu::available());
    match LapackLu::new() {
        Ok(b) => assert_eq!(b.name(), "lapack"),
        Err(e) => {
            assert_eq!(
                e,
                ImexError::BackendUnavailable {
                    backend: "lapack",
                    feature: "lapack"
                }
            );
            assert!(e.to_string().contains("without feature \"lapack\""));
            assert!(AnyLu::from_name("lapack").is_err());
        }
    }
}
