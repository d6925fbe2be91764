//! Convergence, reproducibility, communication counts and errors.

use comm::{local, CommExt, Communicator, IndexBox, ProcessGrid};
use multigrid::{
    Boundary, CommAvoiding, FaceCoefficient, Hierarchy, MgError, MgOptions, Poisson, SolveReport,
};
use std::f64::consts::PI;
use std::sync::Arc;

const D: Boundary = Boundary::Dirichlet;
const P: Boundary = Boundary::Periodic;
const N: Boundary = Boundary::Neumann;

type Fx = dyn Fn([f64; 3]) -> f64 + Sync;

struct Out {
    rep: SolveReport,
    err: f64,
    owned: IndexBox,
    vals: Vec<f64>,
    ranks: Vec<usize>,
}

#[allow(clippy::too_many_arguments)]
/// Solves `problem` on `comm`: rhs from `rhs` at cell centres plus the
/// boundary values `bv`; max error against `exact` (if given).
fn solve(
    comm: &dyn Communicator,
    problem: &Poisson,
    levels: usize,
    pcg: bool,
    opts: MgOptions,
    rhs: &Fx,
    bv: Option<&(dyn Fn(usize, usize, [f64; 3]) -> f64 + Sync)>,
    exact: Option<&Fx>,
) -> Result<Out, MgError> {
    let grid = ProcessGrid::for_shape(problem.shape, comm.size(), problem.periodic())?;
    let mut mg = Hierarchy::new(comm, grid, problem, levels, opts)?;
    let mut f = mg.new_field();
    let mut u = mg.new_field();
    f.fill_owned(0, &mg.owned(), |p| rhs(problem.cell_centre(p)));
    if let Some(g) = bv {
        mg.add_boundary_values(&mut f, g)?;
    }
    let rep = if pcg {
        mg.solve_pcg(comm, &mut u, &f)?
    } else {
        mg.solve_mg(comm, &mut u, &f)?
    };
    let vals = u.owned_values(0);
    let b = mg.owned();
    let mut err: f64 = 0.0;
    if let Some(ex) = exact {
        let mut t = 0;
        for i in b.lo[0]..b.hi[0] {
            for j in b.lo[1]..b.hi[1] {
                for k in b.lo[2]..b.hi[2] {
                    err = err.max((vals[t] - ex(problem.cell_centre([i, j, k]))).abs());
                    t += 1;
                }
            }
        }
        err = comm.allreduce_scalar(err, comm::ReduceOp::Max)?;
    }
    Ok(Out {
        rep,
        err,
        owned: b,
        vals,
        ranks: mg.level_ranks(),
    })
}

/// A rough, deterministic right-hand side (all frequencies present).
fn rough(x: [f64; 3]) -> f64 {
    // Cell centres of the unit box with n <= 128 are multiples of 1/256:
    // the keys are exact integers.
    let k = x.map(|t| (t * 4096.0).round() as u64);
    let h = k[0].wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ k[1].wrapping_mul(0xC2B2_AE3D_27D4_EB4F).rotate_left(21)
        ^ k[2].wrapping_mul(0x1656_67B1_9E37_79F9).rotate_left(42);
    let h = h.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> 11) as f64 / (1u64 << 53) as f64 - 0.5
}

/// A rough right-hand side with exactly zero sum over the cells of the unit
/// box (odd about its centre), for singular problems.
fn rough0(x: [f64; 3]) -> f64 {
    rough(x) - rough([1.0 - x[0], 1.0 - x[1], 1.0 - x[2]])
}

fn deepest(n: [usize; 3]) -> usize {
    // Bottom at 2 or 3 cells per axis at most: stop where the bottom has
    // at most 64 cells.
    let mut l = Hierarchy::max_levels(n);
    while l > 1 && n.iter().map(|&x| x >> (l - 1)).product::<usize>() < 8 {
        l -= 1;
    }
    l
}

fn order(errs: &[f64]) -> f64 {
    (errs[0] / errs[1]).log2()
}

#[test]
fn manufactured_second_order() {
    let sines = |k: f64| {
        move |x: [f64; 3]| (k * PI * x[0]).sin() * (k * PI * x[1]).sin() * (k * PI * x[2]).sin()
    };
    for (bc, k) in [([D; 3], 1.0), ([P; 3], 2.0), ([P, D, D], 2.0)] {
        let mut errs = vec![];
        for n in [16, 32] {
            let u = sines(k);
            let lam = 3.0 * (k * PI).powi(2);
            let f = move |x: [f64; 3]| lam * u(x);
            let p = Poisson::new([n; 3], [1.0; 3], bc).unwrap();
            let ex = sines(k);
            let out = local::run(2, |c| {
                solve(
                    c,
                    &p,
                    deepest([n; 3]),
                    true,
                    MgOptions::default(),
                    &f,
                    None,
                    Some(&ex),
                )
            })
            .unwrap();
            assert!(out[0].rep.converged, "{bc:?} n={n}: {:?}", out[0].rep);
            errs.push(out[0].err);
        }
        let rate = order(&errs);
        eprintln!("manufactured {bc:?}: errors {errs:?}, order {rate:.3}");
        // Second order: measured 1.95-1.99 (n = 16, 32, 64); the window
        // leaves room for the pre-asymptotic term at n = 16 and still fails
        // a first-order (1.0) or a wrongly scaled (< 1.9, > 2.2) operator.
        assert!(rate > 1.9 && rate < 2.2, "{bc:?}: order {rate}");
    }
}

/// u = cos(pi x) cos(2 pi y) (1 + z²)... with inhomogeneous Dirichlet and
/// Neumann faces through add_boundary_values.
#[test]
fn inhomogeneous_dirichlet_and_neumann_second_order() {
    let u = |x: [f64; 3]| (PI * x[0]).cos() * (2.0 * PI * x[1]).sin() + x[2] * x[2] * x[0];
    let lap =
        |x: [f64; 3]| -5.0 * PI * PI * (PI * x[0]).cos() * (2.0 * PI * x[1]).sin() + 2.0 * x[0];
    let f = move |x: [f64; 3]| -lap(x);
    // Gradient for the Neumann values.
    let grad = |x: [f64; 3]| {
        [
            -PI * (PI * x[0]).sin() * (2.0 * PI * x[1]).sin() + x[2] * x[2],
            2.0 * PI * (PI * x[0]).cos() * (2.0 * PI * x[1]).cos(),
            2.0 * x[2] * x[0],
        ]
    };
    // x: Neumann low, Dirichlet high; y: Dirichlet both; z: Neumann both
    // (not singular: Dirichlet faces exist).
    let faces = [[N, D], [D, D], [N, N]];
    let bv = move |axis: usize, side: usize, x: [f64; 3]| {
        let b = faces[axis][side];
        if b == D {
            u(x)
        } else {
            let s = if side == 0 { -1.0 } else { 1.0 };
            s * grad(x)[axis]
        }
    };
    let mut errs = vec![];
    for n in [16, 32] {
        let p = Poisson::with_faces([n; 3], [1.0; 3], faces).unwrap();
        let out = local::run(4, |c| {
            solve(
                c,
                &p,
                deepest([n; 3]),
                true,
                MgOptions::default(),
                &f,
                Some(&bv),
                Some(&u),
            )
        })
        .unwrap();
        assert!(out[0].rep.converged);
        errs.push(out[0].err);
    }
    let rate = order(&errs);
    eprintln!("inhomogeneous D/N: errors {errs:?}, order {rate:.3}");
    // Second order, measured 1.98; wider than the homogeneous window for
    // the boundary-value term, still far from first order.
    assert!(rate > 1.85 && rate < 2.3, "order {rate}");
}

/// -div(beta grad u) = f with beta = 1 + x y z (smooth), all-Neumann faces
/// with zero flux of the exact solution u = cos(pi x) cos(pi y) cos(pi z):
/// a singular problem whose solution is unique up to the mean.
#[test]
fn variable_coefficient_singular_neumann_second_order() {
    let beta = |x: [f64; 3]| 1.0 + x[0] * x[1] * x[2];
    let c = |t: f64| (PI * t).cos();
    let s = |t: f64| (PI * t).sin();
    let u = move |x: [f64; 3]| c(x[0]) * c(x[1]) * c(x[2]);
    // f = -div(beta grad u) = -beta lap u - grad beta . grad u
    let f = move |x: [f64; 3]| {
        let lap = -3.0 * PI * PI * u(x);
        let gu = [
            -PI * s(x[0]) * c(x[1]) * c(x[2]),
            -PI * c(x[0]) * s(x[1]) * c(x[2]),
            -PI * c(x[0]) * c(x[1]) * s(x[2]),
        ];
        let gb = [x[1] * x[2], x[0] * x[2], x[0] * x[1]];
        -beta(x) * lap - (gb[0] * gu[0] + gb[1] * gu[1] + gb[2] * gu[2])
    };
    let mut errs = vec![];
    for n in [16usize, 32] {
        let h = 1.0 / n as f64;
        let coef: FaceCoefficient = Arc::new(move |d, p: [usize; 3]| {
            let mut x = [0, 1, 2].map(|e| (p[e] as f64 + 0.5) * h);
            x[d] -= 0.5 * h;
            beta(x)
        });
        let p = Poisson::new([n; 3], [1.0; 3], [N; 3])
            .unwrap()
            .with_coefficient(coef);
        // The discrete rhs is made exactly compatible by removing the
        // round-off-free cell mean of f; the exact solution has zero mean.
        let out = local::run(2, |cm| {
            let grid = ProcessGrid::for_shape(p.shape, cm.size(), p.periodic())?;
            let mut mg = Hierarchy::new(cm, grid, &p, deepest([n; 3]), MgOptions::default())?;
            let mut rhs = mg.new_field();
            rhs.fill_owned(0, &mg.owned(), |q| f(p.cell_centre(q)));
            // Subtract the discrete mean (a consistent source for the
            // Neumann problem at this resolution).
            let vals = rhs.owned_values(0);
            let sum = comm::exact::allreduce_exact_sum(cm, &vals)?;
            let mean = sum / (n * n * n) as f64;
            rhs.fill_owned(0, &mg.owned(), |q| f(p.cell_centre(q)) - mean);
            let mut sol = mg.new_field();
            let rep = mg.solve_pcg(cm, &mut sol, &rhs)?;
            let v = sol.owned_values(0);
            let b = mg.owned();
            let mut err: f64 = 0.0;
            let mut t = 0;
            for i in b.lo[0]..b.hi[0] {
                for j in b.lo[1]..b.hi[1] {
                    for k in b.lo[2]..b.hi[2] {
                        err = err.max((v[t] - u(p.cell_centre([i, j, k]))).abs());
                        t += 1;
                    }
                }
            }
            let err = cm.allreduce_scalar(err, comm::ReduceOp::Max)?;
            Ok::<_, MgError>((rep, err))
        })
        .unwrap();
        assert!(out[0].0.converged, "{:?}", out[0].0);
        errs.push(out[0].1);
    }
    let rate = order(&errs);
    eprintln!("variable coefficient, Neumann: errors {errs:?}, order {rate:.3}");
    assert!(rate > 1.85 && rate < 2.3, "order {rate}");
}

/// Asymptotic residual factor per V-cycle (power iteration on the error
/// equation, 40 cycles) at n = 32 and 64 (n = 128 is in
/// `cargo xtask bench multigrid`).
fn factor(n: usize, bc: Boundary, pre: usize, post: usize, omega: f64) -> f64 {
    let p = Poisson::new([n; 3], [1.0; 3], [bc; 3]).unwrap();
    let opts = MgOptions {
        pre_sweeps: pre,
        post_sweeps: post,
        omega,
        ..MgOptions::default()
    };
    let out = local::run(1, |c| {
        let g = ProcessGrid::for_shape(p.shape, 1, p.periodic())?;
        let mut mg = Hierarchy::new(c, g, &p, deepest([n; 3]), opts)?;
        mg.vcycle_factor(c, 40)
    })
    .unwrap();
    out[0]
}

#[test]
fn vcycle_residual_factor_is_small_and_grid_independent() {
    for bc in [D, P] {
        // Default over-relaxed sweeps (omega = 1.15) and plain Gauss-Seidel.
        let f22: Vec<f64> = [32, 64]
            .iter()
            .map(|&n| factor(n, bc, 2, 2, 1.15))
            .collect();
        let f11: Vec<f64> = [32, 64]
            .iter()
            .map(|&n| factor(n, bc, 1, 1, 1.15))
            .collect();
        let g22: Vec<f64> = [32, 64].iter().map(|&n| factor(n, bc, 2, 2, 1.0)).collect();
        eprintln!(
            "{bc:?}: omega 1.15: V(2,2) {f22:.4?}, V(1,1) {f11:.4?}; omega 1: V(2,2) {g22:.4?}"
        );
        // Bounds: 0.12 is the design goal for V(2,2) (textbook red-black
        // Gauss-Seidel reaches about 0.1; measured 0.062-0.067 with omega
        // 1.15, 0.108-0.114 with omega 1); V(1,1) measured 0.116-0.125,
        // bounded by 0.23, about the square root of the V(2,2) goal, the
        // rate half the smoothing work allows. Growth from n = 32 to 64 by
        // more than 10 % would mean the factor is not grid independent.
        for (f, bound) in [(&f22, 0.12), (&f11, 0.23), (&g22, 0.12)] {
            assert!(f.iter().all(|&x| x <= bound), "{bc:?}: {f:?} > {bound}");
            assert!(f[1] <= f[0] * 1.1, "{bc:?}: factor grows {f:?}");
        }
    }
    // n = 128, Dirichlet, default sweeps: still within the bounds and flat
    // (measured 0.066 and 0.120 by 100 cycles; 30 cycles here).
    let p = Poisson::new([128; 3], [1.0; 3], [D; 3]).unwrap();
    for (pre, post, bound) in [(2, 2, 0.12), (1, 1, 0.23)] {
        let opts = MgOptions {
            pre_sweeps: pre,
            post_sweeps: post,
            ..MgOptions::default()
        };
        let f = local::run(1, |c| {
            let g = ProcessGrid::for_shape(p.shape, 1, p.periodic())?;
            let mut mg = Hierarchy::new(c, g, &p, deepest([128; 3]), opts)?;
            mg.vcycle_factor(c, 30)
        })
        .unwrap()[0];
        eprintln!("n = 128: V({pre},{post}) {f:.4}");
        assert!(f <= bound, "n = 128 V({pre},{post}): {f} > {bound}");
    }
    // The factor estimate must see a slow smoother: one sweep of plain
    // Gauss-Seidel without the coarse grid help is far above 0.23.
    let weak = factor(32, D, 1, 0, 1.0);
    assert!(weak > 0.3, "V(1,0) factor {weak}");
}

#[test]
fn pcg_iterations_do_not_grow() {
    for bc in [[D; 3], [P; 3], [N, N, D]] {
        let mut its = vec![];
        for n in [16usize, 32, 64] {
            let p = Poisson::new([n; 3], [1.0; 3], bc).unwrap();
            let out = local::run(1, |c| {
                solve(
                    c,
                    &p,
                    deepest([n; 3]),
                    true,
                    MgOptions::default(),
                    &rough0,
                    None,
                    None,
                )
            })
            .unwrap_or_else(|e| panic!("{bc:?} n={n}: {e}"));
            assert!(out[0].rep.converged);
            its.push(out[0].rep.iterations);
        }
        eprintln!("PCG {bc:?} iterations n=16,32,64: {its:?}");
        assert!(
            its[2] <= its[0] + 1 && its[1] <= its[0] + 1,
            "{bc:?}: {its:?}"
        );
    }
}

fn assemble(n: [usize; 3], parts: &[Out]) -> Vec<u64> {
    let mut g = vec![0u64; n.iter().product()];
    for o in parts {
        let b = o.owned;
        let mut t = 0;
        for i in b.lo[0]..b.hi[0] {
            for j in b.lo[1]..b.hi[1] {
                for k in b.lo[2]..b.hi[2] {
                    g[(i * n[1] + j) * n[2] + k] = o.vals[t].to_bits();
                    t += 1;
                }
            }
        }
    }
    g
}

/// Ranks 1, 2, 3, 4, 6, 8 x overlap x communication avoidance x
/// agglomeration threshold x both solvers: one solution, one history.
#[test]
fn bit_identical_across_ranks_and_options() {
    let n = [24; 3];
    for (bc, pcg) in [([D; 3], true), ([P, D, N], false), ([P; 3], true)] {
        let p = Poisson::with_faces(n, [1.0; 3], bc.map(|b| [b, b])).unwrap();
        let rhs = rough0;
        let mut reference: Option<(Vec<u64>, Vec<u64>)> = None;
        let mut agglomerated = false;
        for ranks in [1, 2, 3, 4, 6, 8] {
            for overlap in [false, true] {
                for ca in [CommAvoiding::OFF, CommAvoiding::ALL] {
                    for below in [0, 512, usize::MAX] {
                        let opts = MgOptions {
                            overlap,
                            comm_avoiding: ca,
                            agglomerate_below: below,
                            ..MgOptions::default()
                        };
                        let out =
                            local::run(ranks, |c| solve(c, &p, 4, pcg, opts, &rhs, None, None))
                                .unwrap_or_else(|e| panic!("{bc:?} ranks {ranks}: {e}"));
                        assert!(out[0].rep.converged, "{bc:?} {:?}", out[0].rep);
                        agglomerated |= out[0].ranks.iter().any(|&r| r < ranks);
                        let sol = assemble(n, &out);
                        let hist: Vec<u64> =
                            out[0].rep.residuals.iter().map(|x| x.to_bits()).collect();
                        for o in &out {
                            assert_eq!(o.rep.residuals, out[0].rep.residuals);
                        }
                        let what = format!("{bc:?} pcg={pcg} ranks={ranks} overlap={overlap} ca={ca:?} below={below}");
                        match &reference {
                            None => reference = Some((sol, hist)),
                            Some((s0, h0)) => {
                                assert_eq!(h0, &hist, "{what}: residual history differs");
                                assert!(s0 == &sol, "{what}: solution differs");
                            }
                        }
                    }
                }
            }
        }
        assert!(agglomerated, "no configuration agglomerated a level");
    }
}

#[test]
fn comm_avoiding_halves_smoothing_exchanges() {
    // 32^3 on 1 and 2 ranks, 3 levels: smoothing on 32^3 and 16^3 (blocks
    // >= 4 everywhere), bottom 8^3. One V(2,2)-cycle: 2 levels x 8
    // exchanges plain, 2 x 4 communication-avoiding.
    for ranks in [1, 2] {
        let mut counts = vec![];
        for ca in [CommAvoiding::OFF, CommAvoiding::ALL] {
            let p = Poisson::new([32; 3], [1.0; 3], [D; 3]).unwrap();
            let opts = MgOptions {
                comm_avoiding: ca,
                tol: 0.0,
                max_iter: 1,
                ..MgOptions::default()
            };
            let out =
                local::run(ranks, |c| solve(c, &p, 3, false, opts, &rough, None, None)).unwrap();
            counts.push((out[0].rep.smooth_events, out[0].rep.halo_events));
        }
        eprintln!(
            "ranks {ranks}: (smoothing, all) exchanges per V(2,2): off {:?}, on {:?}",
            counts[0], counts[1]
        );
        assert_eq!(counts[0].0, 16);
        assert_eq!(counts[1].0, 8);
        // Per level 1 residual exchange and 1 coarse-correction exchange,
        // plus the 2 fine residuals of solve_mg.
        assert_eq!(counts[0].1, 16 + 2 * 2 + 2);
        assert_eq!(counts[1].1, 8 + 2 * 2 + 2);
    }
    // Blocks of extent 2 on the coarse level: no engagement there.
    let p = Poisson::new([16; 3], [1.0; 3], [D; 3]).unwrap();
    let opts = MgOptions {
        tol: 0.0,
        max_iter: 1,
        ..MgOptions::default()
    };
    let out = local::run(8, |c| solve(c, &p, 3, false, opts, &rough, None, None)).unwrap();
    // Fine 8^3 blocks engage (4 exchanges), the 4^3-per-2-rank... 16/2 = 8
    // -> coarse 8^3 on 2x2x2 gives blocks of 4: engages too unless
    // agglomerated (512 cells / 8 ranks = 64 < 512 cells: agglomerated to
    // one rank, 8^3 block, engages).
    assert_eq!(out[0].rep.smooth_events, 8, "{:?}", out[0].ranks);
}

#[test]
fn agglomeration_moves_coarse_levels_to_fewer_ranks() {
    let p = Poisson::new([32; 3], [1.0; 3], [D; 3]).unwrap();
    let out = local::run(8, |c| {
        let g = ProcessGrid::for_shape(p.shape, c.size(), p.periodic())?;
        let mg = Hierarchy::new(c, g, &p, 4, MgOptions::default())?;
        Ok::<_, MgError>(mg.level_ranks())
    })
    .unwrap();
    // 32^3: 4096 cells per rank; 16^3: 512 per rank (kept); 8^3 would be 64
    // per rank: gathered onto one rank; the bottom 4^3 with it.
    assert_eq!(out[0], vec![8, 8, 1, 1]);
    let out = local::run(8, |c| {
        let g = ProcessGrid::for_shape(p.shape, c.size(), p.periodic())?;
        let o = MgOptions {
            agglomerate_below: 0,
            ..MgOptions::default()
        };
        let mg = Hierarchy::new(c, g, &p, 4, o)?;
        Ok::<_, MgError>(mg.level_ranks())
    })
    .unwrap();
    assert_eq!(out[0], vec![8, 8, 8, 8]);
}

#[test]
fn errors() {
    // Depth: 16^3 halves 4 times (16, 8, 4, 2, 1): 5 levels at most.
    let e = local::run(2, |c| {
        let p = Poisson::new([16; 3], [1.0; 3], [D; 3])?;
        let g = ProcessGrid::for_shape([16; 3], c.size(), p.periodic())?;
        Hierarchy::new(c, g, &p, 6, MgOptions::default()).map(|_| ())
    })
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("level 4") && msg.contains("at most 5 levels"),
        "{msg}"
    );
    // Odd shape.
    let e = local::run(1, |c| {
        let p = Poisson::new([12, 16, 16], [1.0; 3], [D; 3])?;
        let g = ProcessGrid::for_shape(p.shape, c.size(), p.periodic())?;
        Hierarchy::new(c, g, &p, 4, MgOptions::default()).map(|_| ())
    })
    .unwrap_err();
    assert!(
        e.to_string().contains("level 2") && e.to_string().contains("[3, 4, 4]"),
        "{e}"
    );
    // Odd fine block: 18 cells on 4 ranks along one axis.
    let e = local::run(4, |c| {
        let p = Poisson::new([36, 8, 8], [1.0; 3], [D; 3])?;
        let g = ProcessGrid::new([4, 1, 1], p.periodic())?;
        Hierarchy::new(c, g, &p, 2, MgOptions::default()).map(|_| ())
    })
    .unwrap_err();
    assert!(e.to_string().contains("owns 9 cells on axis 0"), "{e}");
    // Bottom too large.
    let e = local::run(1, |c| {
        let p = Poisson::new([16; 3], [1.0; 3], [D; 3])?;
        let g = ProcessGrid::for_shape(p.shape, c.size(), p.periodic())?;
        Hierarchy::new(c, g, &p, 1, MgOptions::default()).map(|_| ())
    })
    .unwrap_err();
    assert!(e.to_string().contains("dense-solve limit"), "{e}");
    // Inconsistent boundary specification.
    let e = Poisson::with_faces([8; 3], [1.0; 3], [[P, D], [D, D], [D, D]]).unwrap_err();
    assert!(
        e.to_string().contains("axis 0") && e.to_string().contains("periodic"),
        "{e}"
    );
    // Bad coefficient.
    let e = local::run(1, |c| {
        let coef: FaceCoefficient =
            Arc::new(|d, p| if d == 1 && p == [2, 3, 4] { -1.0 } else { 1.0 });
        let p = Poisson::new([8; 3], [1.0; 3], [D; 3])?.with_coefficient(coef);
        let g = ProcessGrid::for_shape(p.shape, c.size(), p.periodic())?;
        Hierarchy::new(c, g, &p, 2, MgOptions::default()).map(|_| ())
    })
    .unwrap_err();
    assert!(e.to_string().contains("[2, 3, 4]"), "{e}");
    // A singular problem with a right-hand side of non-zero mean.
    let e = local::run(2, |c| {
        let p = Poisson::new([8; 3], [1.0; 3], [N, P, N])?;
        let g = ProcessGrid::for_shape(p.shape, c.size(), p.periodic())?;
        let mut mg = Hierarchy::new(c, g, &p, 2, MgOptions::default())?;
        let mut f = mg.new_field();
        f.fill_owned(0, &mg.owned(), |q| 1.0 + q[0] as f64);
        let mut u = mg.new_field();
        mg.solve_pcg(c, &mut u, &f).map(|_| ())
    })
    .unwrap_err();
    assert!(
        e.to_string().contains("singular") && e.to_string().contains("mean"),
        "{e}"
    );
    // Wrong field layout, zero extent, bad length, periodicity mismatch,
    // zero levels, bad omega.
    local::run(1, |c| {
        let p = Poisson::new([16; 3], [1.0; 3], [D; 3])?;
        let g = ProcessGrid::for_shape(p.shape, c.size(), p.periodic())?;
        let mut mg = Hierarchy::new(c, g, &p, 3, MgOptions::default())?;
        let other = Poisson::new([8; 3], [1.0; 3], [D; 3])?;
        let g8 = ProcessGrid::for_shape(other.shape, c.size(), other.periodic())?;
        let small = Hierarchy::new(c, g8, &other, 2, MgOptions::default())?.new_field();
        let mut u = mg.new_field();
        assert!(matches!(
            mg.solve_pcg(c, &mut u, &small),
            Err(MgError::Invalid(_))
        ));
        assert!(Poisson::new([0, 4, 4], [1.0; 3], [D; 3]).is_err());
        assert!(Poisson::new([4; 3], [1.0, -1.0, 1.0], [D; 3]).is_err());
        let gp = ProcessGrid::for_shape(p.shape, 1, [true; 3])?;
        assert!(Hierarchy::new(c, gp, &p, 3, MgOptions::default()).is_err());
        assert!(Hierarchy::new(c, g, &p, 0, MgOptions::default()).is_err());
        let bad = MgOptions {
            omega: 2.5,
            ..MgOptions::default()
        };
        assert!(Hierarchy::new(c, g, &p, 3, bad).is_err());
        Ok::<_, MgError>(())
    })
    .unwrap();
}

/// PCG stopped by the iteration limit: the solution returned must include
/// the last step (the solver adds `alpha p` to `u` only in the pass that
/// next changes `p`, or at the end), so its true residual is the last one
/// reported; one rank (the fused passes) and two ranks (separate passes)
/// give the same bits.
#[test]
fn pcg_iteration_limit_returns_the_last_step() {
    let n = [16; 3];
    let p = Poisson::new(n, [1.0; 3], [D; 3]).unwrap();
    for max_iter in 1..=3 {
        let opts = MgOptions {
            max_iter,
            tol: 0.0,
            ..MgOptions::default()
        };
        let mut sols = vec![];
        for ranks in [1, 2] {
            let out = local::run(ranks, |c| {
                let grid = ProcessGrid::for_shape(n, c.size(), p.periodic())?;
                let mut mg = Hierarchy::new(c, grid, &p, 4, opts)?;
                let mut f = mg.new_field();
                let mut u = mg.new_field();
                f.fill_owned(0, &mg.owned(), |q| rough(p.cell_centre(q)));
                let rep = mg.solve_pcg(c, &mut u, &f)?;
                // The true residual of the returned u: a solve from it
                // with no iteration reports only that.
                mg.set_options(MgOptions {
                    max_iter: 0,
                    ..opts
                })?;
                let mut again = u.clone();
                let check = mg.solve_pcg(c, &mut again, &f)?;
                Ok::<_, MgError>((rep, check, mg.owned(), u.owned_values(0)))
            })
            .unwrap();
            let (rep, check, _, _) = &out[0];
            assert_eq!(rep.iterations, max_iter);
            let (reported, actual) = (rep.residuals[max_iter], check.residuals[0]);
            assert!(
                (actual - reported).abs() <= 1e-6 * reported,
                "max_iter {max_iter}: reported {reported:e}, true {actual:e}"
            );
            let parts: Vec<Out> = out
                .into_iter()
                .map(|(rep, _, owned, vals)| Out {
                    rep,
                    err: 0.0,
                    owned,
                    vals,
                    ranks: vec![],
                })
                .collect();
            sols.push(assemble(n, &parts));
        }
        assert!(
            sols[0] == sols[1],
            "max_iter {max_iter}: 1 and 2 ranks differ"
        );
    }
}
