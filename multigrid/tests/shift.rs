//! The Helmholtz shift `alpha u - div(beta grad u)` and closed faces
//! (`beta = 0`, cut-cell apertures of solid faces): convergence order,
//! equivalence of a closed plane with a Neumann wall, inactive cells, and
//! the same bits on every rank count.

use comm::{local, ProcessGrid};
use multigrid::{
    Boundary, CellCoefficient, CommAvoiding, FaceCoefficient, Hierarchy, MgError, MgOptions,
    Poisson,
};
use std::f64::consts::PI;
use std::sync::Arc;

const D: Boundary = Boundary::Dirichlet;
const P: Boundary = Boundary::Periodic;
const N: Boundary = Boundary::Neumann;

/// Solves `problem` with MG-PCG on `ranks` ranks; returns every rank's
/// owned box and values and the iteration count.
fn solve(
    problem: &Poisson,
    ranks: usize,
    opts: MgOptions,
    rhs: &(dyn Fn([usize; 3]) -> f64 + Sync),
) -> (Vec<(comm::IndexBox, Vec<f64>)>, usize) {
    let out = local::run(ranks, |cm| {
        let grid = ProcessGrid::for_shape(problem.shape, cm.size(), problem.periodic())?;
        let levels = Hierarchy::max_levels(problem.shape).min(5);
        let mut mg = Hierarchy::new(cm, grid, problem, levels, opts)?;
        let mut f = mg.new_field();
        let mut u = mg.new_field();
        f.fill_owned(0, &mg.owned(), rhs);
        let rep = mg.solve_pcg(cm, &mut u, &f)?;
        assert!(rep.converged, "{rep:?}");
        Ok::<_, MgError>(((mg.owned(), u.owned_values(0)), rep.iterations))
    })
    .unwrap();
    let it = out[0].1;
    (out.into_iter().map(|o| o.0).collect(), it)
}

/// The global field from the ranks' blocks.
fn gather(n: [usize; 3], parts: &[(comm::IndexBox, Vec<f64>)]) -> Vec<f64> {
    let mut g = vec![f64::NAN; n[0] * n[1] * n[2]];
    for (b, v) in parts {
        let mut t = 0;
        for i in b.lo[0]..b.hi[0] {
            for j in b.lo[1]..b.hi[1] {
                for k in b.lo[2]..b.hi[2] {
                    g[(i * n[1] + j) * n[2] + k] = v[t];
                    t += 1;
                }
            }
        }
    }
    g
}

#[test]
fn helmholtz_shift_is_second_order_and_rank_independent() {
    // alpha u - lap u = f on the periodic unit cube with u = sin 2 pi x cos 2 pi y sin 2 pi z
    // and a variable alpha: f = (alpha + 12 pi^2) u.
    let alpha = |x: [f64; 3]| 50.0 + 30.0 * (2.0 * PI * x[1]).cos().powi(2);
    let u =
        |x: [f64; 3]| (2.0 * PI * x[0]).sin() * (2.0 * PI * x[1]).cos() * (2.0 * PI * x[2]).sin();
    let mut errs = vec![];
    let mut hashes = vec![];
    for n in [16usize, 32] {
        let h = 1.0 / n as f64;
        let centre = move |p: [usize; 3]| p.map(|x| (x as f64 + 0.5) * h);
        let a: CellCoefficient = Arc::new(move |p| alpha(centre(p)));
        let prob = Poisson::new([n; 3], [1.0; 3], [P; 3])
            .unwrap()
            .with_shift(a);
        assert!(!prob.is_singular());
        let rhs = move |p: [usize; 3]| {
            let x = centre(p);
            (alpha(x) + 12.0 * PI * PI) * u(x)
        };
        let (parts, it) = solve(&prob, 1, MgOptions::default(), &rhs);
        assert!(it <= 12, "{it} PCG iterations");
        let g = gather([n; 3], &parts);
        let mut err: f64 = 0.0;
        for (i, v) in g.iter().enumerate() {
            let p = [i / (n * n), (i / n) % n, i % n];
            err = err.max((v - u(centre(p))).abs());
        }
        errs.push(err);
        if n == 16 {
            for (ranks, ca) in [
                (1, CommAvoiding::OFF),
                (2, CommAvoiding::ALL),
                (4, CommAvoiding::ALL),
                (8, CommAvoiding::OFF),
            ] {
                let opts = MgOptions {
                    comm_avoiding: ca,
                    ..MgOptions::default()
                };
                let g = gather([n; 3], &solve(&prob, ranks, opts, &rhs).0);
                hashes.push(g.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
            }
        }
    }
    let order = (errs[0] / errs[1]).log2();
    assert!(order > 1.9 && order < 2.2, "errors {errs:?}, order {order}");
    assert!(
        hashes.windows(2).all(|w| w[0] == w[1]),
        "results differ across ranks"
    );
}

#[test]
fn a_closed_plane_is_a_neumann_wall() {
    // Box of 2n cells along x, Dirichlet at both ends, faces at x = n
    // closed: each half is the n-cell problem with a Neumann face there.
    let n = 16usize;
    let f = |x: [f64; 3]| 1.0 + x[0] + (2.0 * PI * x[1]).sin() * (2.0 * PI * x[2]).cos();
    let closed: FaceCoefficient = Arc::new(
        move |d, p: [usize; 3]| {
            if d == 0 && p[0] == n {
                0.0
            } else {
                1.0
            }
        },
    );
    let h = 1.0 / n as f64;
    let whole = Poisson::new([2 * n, n, n], [2.0, 1.0, 1.0], [D, P, P])
        .unwrap()
        .with_coefficient(closed);
    let rhs_whole = move |p: [usize; 3]| {
        // The right half mirrors the left: x -> 2 - x.
        let x = (p[0] as f64 + 0.5) * h;
        let xl = if x < 1.0 { x } else { 2.0 - x };
        f([xl, (p[1] as f64 + 0.5) * h, (p[2] as f64 + 0.5) * h])
    };
    let half = Poisson::with_faces([n, n, n], [1.0; 3], [[D, N], [P, P], [P, P]]).unwrap();
    let rhs_half = move |p: [usize; 3]| f([0, 1, 2].map(|d| (p[d] as f64 + 0.5) * h));
    let opts = MgOptions {
        tol: 1e-12,
        ..MgOptions::default()
    };
    let gw = gather([2 * n, n, n], &solve(&whole, 2, opts, &rhs_whole).0);
    let gh = gather([n; 3], &solve(&half, 1, opts, &rhs_half).0);
    let mut diff: f64 = 0.0;
    let scale = gh.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for i in 0..n {
        for j in 0..n {
            for k in 0..n {
                let a = gh[(i * n + j) * n + k];
                let left = gw[(i * n + j) * n + k];
                let right = gw[((2 * n - 1 - i) * n + j) * n + k];
                diff = diff.max((a - left).abs()).max((a - right).abs());
            }
        }
    }
    // Both solves stop at a relative residual of 1e-12; the solutions
    // agree to a small multiple of that.
    assert!(
        diff <= 1e-9 * scale,
        "closed plane vs Neumann wall: {diff} (scale {scale})"
    );
}

#[test]
fn inactive_cells_stay_zero_and_the_rest_is_rank_independent() {
    // A Dirichlet box with a cube of cells whose faces are all closed.
    let n = 16usize;
    let inside = |p: [usize; 3]| {
        (5..9).contains(&p[0]) && (6..10).contains(&p[1]) && (4..12).contains(&p[2])
    };
    let closed: FaceCoefficient = Arc::new(move |d, p: [usize; 3]| {
        let mut q = p;
        let lower_in = p[d] > 0 && {
            q[d] -= 1;
            inside(q)
        };
        if inside(p) || lower_in {
            0.0
        } else {
            1.0 + 0.5 * (p[0] % 3) as f64
        }
    });
    let prob = Poisson::new([n; 3], [1.0; 3], [D; 3])
        .unwrap()
        .with_coefficient(closed);
    let rhs = move |p: [usize; 3]| {
        if inside(p) {
            0.0
        } else {
            1.0 + (p[1] % 4) as f64
        }
    };
    let mut first: Option<Vec<u64>> = None;
    for (ranks, ca) in [
        (1, CommAvoiding::OFF),
        (2, CommAvoiding::ALL),
        (4, CommAvoiding::ALL),
        (8, CommAvoiding::OFF),
    ] {
        let opts = MgOptions {
            comm_avoiding: ca,
            ..MgOptions::default()
        };
        let (parts, it) = solve(&prob, ranks, opts, &rhs);
        assert!(it < 30, "{it} iterations");
        let g = gather([n; 3], &parts);
        for (i, v) in g.iter().enumerate() {
            let p = [i / (n * n), (i / n) % n, i % n];
            if inside(p) {
                assert_eq!(*v, 0.0, "inactive cell {p:?} = {v}");
            } else {
                assert!(
                    *v > 0.0,
                    "the solution of a positive source is positive: {p:?} = {v}"
                );
            }
        }
        let bits: Vec<u64> = g.iter().map(|v| v.to_bits()).collect();
        match &first {
            None => first = Some(bits),
            Some(b) => assert_eq!(b, &bits, "{ranks} ranks differ from 1"),
        }
    }
}

#[test]
fn negative_shift_is_refused() {
    let a: CellCoefficient = Arc::new(|p| if p == [1, 2, 3] { -1.0 } else { 1.0 });
    let prob = Poisson::new([8; 3], [1.0; 3], [P; 3])
        .unwrap()
        .with_shift(a);
    let e = local::run(1, |cm| {
        let grid = ProcessGrid::for_shape(prob.shape, 1, prob.periodic())?;
        Hierarchy::new(cm, grid, &prob, 2, MgOptions::default()).map(|_| ())
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("shift -1") && e.contains("[1, 2, 3]"), "{e}");
}

#[test]
fn a_shift_of_zero_everywhere_is_refused_without_a_dirichlet_face() {
    // Zero in every cell: the operator of a periodic or Neumann box is
    // then singular although a shift was given.
    let zero: CellCoefficient = Arc::new(|_| 0.0);
    let build = |faces: [[Boundary; 2]; 3]| {
        let prob = Poisson::with_faces([8; 3], [1.0; 3], faces)
            .unwrap()
            .with_shift(zero.clone());
        local::run(1, |cm| {
            let grid = ProcessGrid::for_shape(prob.shape, 1, prob.periodic())?;
            Hierarchy::new(cm, grid, &prob, 2, MgOptions::default()).map(|_| ())
        })
    };
    for faces in [[[P, P]; 3], [[N, N]; 3], [[P, P], [N, N], [P, P]]] {
        let e = build(faces).unwrap_err().to_string();
        assert!(e.contains("0 in every cell"), "{faces:?}: {e}");
    }
    // With a Dirichlet face the operator is definite: accepted.
    build([[D, N], [P, P], [P, P]]).unwrap();
}

#[test]
fn a_closed_off_region_without_shift_is_named() {
    // A Dirichlet box, a positive shift except on a 2 x 2 x 2 block whose
    // outer faces are closed (its inner faces open): the block's constants
    // are a null vector the problem does not declare.
    let n = 8usize;
    let inside = |p: [usize; 3]| (0..3).all(|d| (3..5).contains(&p[d]));
    let closed: FaceCoefficient = Arc::new(move |d, p: [usize; 3]| {
        let mut q = p;
        let lower_in = p[d] > 0 && {
            q[d] -= 1;
            inside(q)
        };
        if inside(p) != lower_in {
            0.0
        } else {
            1.0
        }
    });
    let shift: CellCoefficient = Arc::new(move |p| if inside(p) { 0.0 } else { 2.0 });
    let prob = Poisson::new([n; 3], [1.0; 3], [D; 3])
        .unwrap()
        .with_coefficient(closed)
        .with_shift(shift);
    let e = local::run(1, |cm| {
        let grid = ProcessGrid::for_shape(prob.shape, 1, prob.periodic())?;
        Hierarchy::new(cm, grid, &prob, 1, MgOptions::default()).map(|_| ())
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("singular") && e.contains("zero shift"), "{e}");
}

/// A Dirichlet box of `n^3` cells, shift 2 outside the cells `inside`
/// selects and `inner` in them, whose faces between inside and outside
/// are closed (the wall faces all open).
fn closed_block(
    n: usize,
    inside: impl Fn([usize; 3]) -> bool + Send + Sync + Copy + 'static,
    inner: f64,
) -> Poisson {
    let closed: FaceCoefficient = Arc::new(move |d, p: [usize; 3]| {
        let mut q = p;
        let lower = (p[d] > 0).then(|| {
            q[d] -= 1;
            inside(q)
        });
        let upper = (p[d] < n).then(|| inside(p));
        match (lower, upper) {
            (Some(a), Some(b)) if a != b => 0.0,
            _ => 1.0,
        }
    });
    let shift: CellCoefficient = Arc::new(move |p| if inside(p) { inner } else { 2.0 });
    Poisson::new([n; 3], [1.0; 3], [D; 3])
        .unwrap()
        .with_coefficient(closed)
        .with_shift(shift)
}

/// Every rank's error from building `prob` on a 2 x 1 x 1 grid (rank 0
/// owns cells 0..4 of axis 0, rank 1 cells 4..8 and the high wall faces).
fn errors_on_two_ranks(prob: &Poisson) -> Vec<String> {
    local::run(2, |cm| {
        let grid = ProcessGrid::new([2, 1, 1], prob.periodic())?;
        let built = Hierarchy::new(cm, grid, prob, 2, MgOptions::default());
        Ok::<_, MgError>(built.err().map(|e| e.to_string()).unwrap_or_default())
    })
    .unwrap()
}

#[test]
fn a_bad_value_in_one_ranks_cells_is_every_ranks_error() {
    // Each rank checks its own cells and faces; what rank 1 finds must
    // stop rank 0 too, with the same message.
    let nan_shift: CellCoefficient = Arc::new(|p| if p == [6, 2, 3] { f64::NAN } else { 1.0 });
    let prob = Poisson::new([8; 3], [1.0; 3], [D; 3])
        .unwrap()
        .with_shift(nan_shift);
    let e = errors_on_two_ranks(&prob);
    assert_eq!(e[0], e[1]);
    assert!(
        e[0].contains("shift NaN") && e[0].contains("[6, 2, 3]"),
        "{e:?}"
    );
    // A face of the high wall of axis 0 (index 8), which only rank 1 checks.
    let wall: FaceCoefficient = Arc::new(|d, p| if d == 0 && p == [8, 1, 5] { -2.0 } else { 1.0 });
    let prob = Poisson::new([8; 3], [1.0; 3], [D; 3])
        .unwrap()
        .with_coefficient(wall);
    let e = errors_on_two_ranks(&prob);
    assert_eq!(e[0], e[1]);
    assert!(
        e[0].contains("face coefficient -2 on axis 0 at face index [8, 1, 5]"),
        "{e:?}"
    );
    // A shift positive only in rank 1's cells fixes the constant of a
    // periodic box for every rank.
    let upper: CellCoefficient = Arc::new(|p| if p == [7, 0, 0] { 1.0 } else { 0.0 });
    let prob = Poisson::new([8; 3], [1.0; 3], [P; 3])
        .unwrap()
        .with_shift(upper);
    assert_eq!(errors_on_two_ranks(&prob), ["", ""]);
    // Closed faces only in rank 1's cells: rank 0, which walks the
    // regions, must learn that some face is closed.
    let block =
        |p: [usize; 3]| p[0] >= 5 && p[0] < 7 && (2..4).contains(&p[1]) && (2..4).contains(&p[2]);
    let e = errors_on_two_ranks(&closed_block(8, block, 0.0));
    assert_eq!(e[0], e[1]);
    assert!(
        e[0].contains("cell [5, 2, 2] lies in a region with zero shift closed off"),
        "{e:?}"
    );
}

#[test]
fn a_bottom_that_fails_on_its_ranks_fails_every_rank() {
    // Faces of 1e-14 around the 4^3 block at cells 4..8 of a 16^3 box: not
    // closed (the build's walk takes only zeros), but the block is one
    // bottom cell (3 levels: 4^3 bottom cells) whose pivot, with no shift,
    // is below 1e-12 of the largest: singular at the bottom. On 8 ranks
    // the coarse levels (64 cells a rank) are gathered onto fewer ranks,
    // so the bottom fails only there; every rank must return its error.
    let inside = |p: [usize; 3]| (0..3).all(|d| (4..8).contains(&p[d]));
    let beta: FaceCoefficient = Arc::new(move |d, p: [usize; 3]| {
        let mut q = p;
        let lower = (p[d] > 0).then(|| {
            q[d] -= 1;
            inside(q)
        });
        let upper = (p[d] < 16).then(|| inside(p));
        match (lower, upper) {
            (Some(a), Some(b)) if a != b => 1e-14,
            _ => 1.0,
        }
    });
    let shift: CellCoefficient = Arc::new(move |p| if inside(p) { 0.0 } else { 2.0 });
    let prob = Poisson::new([16; 3], [1.0; 3], [D; 3])
        .unwrap()
        .with_coefficient(beta)
        .with_shift(shift);
    let build = |prob: &Poisson| {
        local::run(8, |cm| {
            let grid = ProcessGrid::new([2, 2, 2], prob.periodic())?;
            let built = Hierarchy::new(cm, grid, prob, 3, MgOptions::default());
            Ok::<_, MgError>(built.map(|h| h.level_stats()).map_err(|e| e.to_string()))
        })
        .unwrap()
    };
    // Without the block, the bottom (the last entry) is on fewer ranks.
    let plain = Poisson::new([16; 3], [1.0; 3], [D; 3]).unwrap();
    let stats = build(&plain).swap_remove(0).unwrap();
    assert!(stats.last().unwrap().ranks < 8, "{stats:?}");
    let errors = build(&prob);
    for (r, e) in errors.iter().enumerate() {
        let e = e.as_ref().err().map_or("built", String::as_str);
        assert!(
            e.contains("singular on the [4, 4, 4]-cell bottom level"),
            "rank {r}: {e}"
        );
        assert_eq!(e, errors[0].as_ref().unwrap_err(), "rank {r}");
    }
}

#[test]
fn a_closed_off_region_inside_one_bottom_cell_is_named_at_build() {
    // The 2 x 2 x 2 block at cells 2..4 is one cell of level 1: on a
    // hierarchy of 3 levels (bottom 2^3 cells) it hides inside one bottom
    // cell, whose faces are all closed and whose shift is 0, which the
    // bottom holds at 0 without seeing the block's null vector.
    let block = |p: [usize; 3]| (0..3).all(|d| (2..4).contains(&p[d]));
    let build = |prob: &Poisson, levels: usize| {
        local::run(1, |cm| {
            let grid = ProcessGrid::for_shape(prob.shape, 1, prob.periodic())?;
            Hierarchy::new(cm, grid, prob, levels, MgOptions::default()).map(|_| ())
        })
    };
    for levels in [1, 2, 3] {
        let e = build(&closed_block(8, block, 0.0), levels)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cell [2, 2, 2] lies in a region with zero shift closed off"),
            "{levels} levels: {e}"
        );
    }
    // A positive shift in one of its cells fixes the block's constant.
    let shift_in_one: CellCoefficient = Arc::new(move |p| {
        if p == [3, 3, 3] || !block(p) {
            2.0
        } else {
            0.0
        }
    });
    let fixed = closed_block(8, block, 0.0).with_shift(shift_in_one);
    build(&fixed, 3).unwrap();
    // A single closed cell without shift is held at 0, not a region.
    let single = |p: [usize; 3]| p == [2, 2, 2];
    build(&closed_block(8, single, 0.0), 3).unwrap();
    // A block that reaches a Dirichlet wall through an open face: its
    // constant is fixed by the wall.
    let at_wall = |p: [usize; 3]| (0..3).all(|d| (0..2).contains(&p[d]));
    let prob = closed_block(8, at_wall, 0.0);
    build(&prob, 3).unwrap();
}
