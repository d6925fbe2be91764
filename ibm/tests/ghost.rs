//! Ghost points and wall links: plane walls, the exact crossing on a
//! sphere, the classification rules, and the global second order of the
//! grid-line extrapolation on a 1D Poisson problem.

use comm::IndexBox;
use ibm::{
    Body, GhostOptions, GhostPoints, Link, Location, MacGrid, Packing, PointKind, Side, Slab,
};

const LOCATIONS: [Location; 4] = [
    Location::Centre,
    Location::Face(0),
    Location::Face(1),
    Location::Face(2),
];

/// Walls at `0.2137 L` and `0.8791 L` along `axis` (fluid between them,
/// solid through the periodic boundary); returns the body and the walls.
fn walls(lengths: [f64; 3], axis: usize) -> (Slab, [f64; 2]) {
    let l = lengths[axis];
    let (a, b) = (0.2137 * l, 0.8791 * l);
    let body = Slab::new(axis, 0.5 * (a + b + l), 0.5 * (l - (b - a)), lengths).unwrap();
    (body, [a, b])
}

#[test]
fn plane_walls_linear_profile_vanishes_at_the_wall() {
    let l = [1.0, 0.75, 0.5];
    for axis in 0..3 {
        let (body, wall) = walls(l, axis);
        let shape = [20, 15, 10];
        let grid = MacGrid::new(shape, l).unwrap();
        let h = grid.spacing();
        for loc in LOCATIONS {
            let gp = GhostPoints::new(&body, &grid, loc, IndexBox::from_shape(shape), 0).unwrap();
            let mut n = 0;
            for c in gp.crossings() {
                assert_eq!(c.axis, axis, "plane walls cross only lines along {axis}");
                let x = grid.point(loc, c.point)[axis];
                let s = c.side.sign() as f64;
                // The nearer wall in the direction of the ghost.
                let xw = if s > 0.0 { wall[1] } else { wall[0] };
                assert!(((xw - x) * s / h[axis] - c.t_exact).abs() < 1e-12, "{c:?}");
                // A linear profile vanishing at the wall: u = (xw - x) s.
                let u = (xw - x) * s;
                let link = gp.link(c.point, axis, c.side).unwrap();
                let ug = link.ghost_value(u, 0.0).unwrap();
                let Link::Wall { t } = link else { panic!() };
                assert!(t >= 1e-3);
                // The line through (0, u) and (1, ug) at the wall fraction.
                let at_wall = u + (ug - u) * c.t_exact;
                assert!(at_wall.abs() < 1e-14, "{at_wall:e} at {c:?}");
                n += 1;
            }
            // One crossing per grid line and wall, for lines along `axis`
            // (those of the face component d = axis sit on the faces).
            let lines = shape.iter().product::<usize>() / shape[axis];
            assert_eq!(n, 2 * lines, "{loc:?}");
        }
    }
}

/// Exact crossing of the line `x + tau step e_axis` with the sphere
/// `|y - c| = r` (the image of `c` nearest to `x`), the root in `[0, 1]`.
fn exact_crossing(x: [f64; 3], axis: usize, step: f64, c: [f64; 3], r: f64, l: [f64; 3]) -> f64 {
    let dx: Vec<f64> = (0..3)
        .map(|d| {
            let v = x[d] - c[d];
            v - l[d] * (v / l[d]).round()
        })
        .collect();
    // |dx + tau step e|^2 = r^2: step^2 tau^2 + 2 dx_a step tau + |dx|^2 - r^2.
    let a = step * step;
    let b = 2.0 * dx[axis] * step;
    let cc = dx.iter().map(|v| v * v).sum::<f64>() - r * r;
    let disc = (b * b - 4.0 * a * cc).sqrt();
    // Outside the sphere (cc > 0) moving in: the smaller root.
    let q = -0.5 * (b + b.signum() * disc);
    let (r1, r2) = (q / a, cc / q);
    r1.min(r2)
}

#[test]
fn sphere_crossings_are_exact_and_classification_holds() {
    let l = [1.0, 1.0, 1.25];
    let (c, r) = ([0.93, 0.48, 0.51], 0.31);
    let body = Packing::single(c, r, l).unwrap();
    let shape = [24, 24, 30];
    let grid = MacGrid::new(shape, l).unwrap();
    let h = grid.spacing();
    for loc in LOCATIONS {
        let gp = GhostPoints::new(&body, &grid, loc, IndexBox::from_shape(shape), 1).unwrap();
        let mut worst: f64 = 0.0;
        let mut count = 0;
        for w in gp.crossings() {
            let x = grid.point(loc, w.point);
            let step = w.side.sign() as f64 * h[w.axis];
            let t = exact_crossing(x, w.axis, step, c, r, l);
            worst = worst.max((t - w.t_exact).abs());
            assert!(w.t_exact > 0.0 && w.t_exact <= 1.0);
            count += 1;
        }
        assert!(worst < 1e-10, "{loc:?}: worst crossing error {worst:e}");
        assert!(count > 1000);
        // Classification rules, on the owned points (neighbours inside
        // the region).
        let [fluid, solid, ghost] = gp.counts();
        assert_eq!(fluid + solid + ghost, shape.iter().product::<usize>());
        let frac = 1.0 - body.solid_fraction();
        assert!((fluid as f64 / (fluid + solid + ghost) as f64 - frac).abs() < 0.01);
        for i in 0..shape[0] as i64 {
            for j in 0..shape[1] as i64 {
                for k in 0..shape[2] as i64 {
                    let p = [i, j, k];
                    let kind = gp.kind(p).unwrap();
                    let phi = body.distance(grid.point(loc, p));
                    let nbs: Vec<([i64; 3], usize, Side)> = (0..6)
                        .map(|dir| {
                            let mut q = p;
                            let side = if dir % 2 == 1 {
                                Side::Upper
                            } else {
                                Side::Lower
                            };
                            q[dir / 2] += side.sign();
                            (q, dir / 2, side)
                        })
                        .collect();
                    let fluid_nb = nbs
                        .iter()
                        .any(|(q, _, _)| gp.kind(*q) == Some(PointKind::Fluid));
                    match kind {
                        PointKind::Fluid => {
                            assert!(phi > 0.0);
                            for (q, axis, side) in &nbs {
                                let link = gp.link(p, *axis, *side).unwrap();
                                let walled = gp.kind(*q) != Some(PointKind::Fluid);
                                assert_eq!(matches!(link, Link::Wall { .. }), walled, "{p:?}");
                                if walled {
                                    assert_eq!(gp.kind(*q), Some(PointKind::Ghost));
                                }
                            }
                        }
                        PointKind::Ghost => assert!(phi <= 0.0 && fluid_nb, "{p:?}"),
                        PointKind::Solid => assert!(phi <= 0.0 && !fluid_nb, "{p:?}"),
                    }
                    if kind != PointKind::Fluid {
                        assert_eq!(gp.links(p).unwrap(), [Link::Open; 6]);
                    }
                }
            }
        }
    }
}

#[test]
fn small_fractions_are_clamped() {
    // A wall 1e-5 h beyond the cell centre 10 (x = 10.5 h).
    let n = 32;
    let h = 1.0 / n as f64;
    let wall = 10.5 * h + 1e-5 * h;
    let body = Slab::new(0, wall + 0.25, 0.25, [1.0; 3]).unwrap();
    let grid = MacGrid::new([n, 1, 1], [1.0; 3]).unwrap();
    for (t_min, expect) in [(1e-3, 1e-3), (1e-6, 1e-5)] {
        let gp = GhostPoints::with_options(
            &body,
            &grid,
            Location::Centre,
            IndexBox::from_shape([n, 1, 1]),
            0,
            GhostOptions { t_min },
        )
        .unwrap();
        assert_eq!(gp.kind([10, 0, 0]), Some(PointKind::Fluid));
        let Some(Link::Wall { t }) = gp.link([10, 0, 0], 0, Side::Upper) else {
            panic!()
        };
        assert!((t - expect).abs() < 1e-12, "{t}");
        let w = gp
            .crossings()
            .find(|w| w.point == [10, 0, 0] && w.side == Side::Upper)
            .unwrap();
        assert!((w.t_exact - 1e-5).abs() < 1e-12);
        assert_eq!(w.t, t);
        // Couplings: the ghost neighbour drops out, the diagonal grows.
        let link = Link::Wall { t };
        assert_eq!(link.neighbour(2.0, h), 0.0);
        assert!((link.diagonal(2.0, h) - 2.0 / (t * h * h)).abs() < 1e-6 / (h * h));
        assert_eq!(Link::Open.diagonal(2.0, h), Link::Open.neighbour(2.0, h));
    }
}

/// `-u'' = 1` between walls at `a` and `b` (off the grid), `u = 0` there:
/// the exact solution is `(x - a)(b - x) / 2`. Each fluid cell centre
/// gets `sum over links (diagonal u - neighbour u_nb) = 1`; the error must
/// fall at second order.
#[test]
fn poisson_1d_converges_at_second_order() {
    let (body, [a, b]) = walls([1.0; 3], 0);
    let mut errors = Vec::new();
    for n in [32usize, 64, 128] {
        let grid = MacGrid::new([n, 1, 1], [1.0; 3]).unwrap();
        let h = grid.spacing()[0];
        let gp = GhostPoints::new(
            &body,
            &grid,
            Location::Centre,
            IndexBox::from_shape([n, 1, 1]),
            0,
        )
        .unwrap();
        let fluid: Vec<i64> = (0..n as i64)
            .filter(|&i| gp.kind([i, 0, 0]) == Some(PointKind::Fluid))
            .collect();
        let m = fluid.len();
        // Tridiagonal system over the contiguous fluid run.
        let (mut lo, mut di, mut up, mut rhs) =
            (vec![0.0; m], vec![0.0; m], vec![0.0; m], vec![1.0; m]);
        for (r, &i) in fluid.iter().enumerate() {
            let links = gp.links([i, 0, 0]).unwrap();
            let (minus, plus) = (links[0], links[1]);
            di[r] = minus.diagonal(1.0, h) + plus.diagonal(1.0, h);
            lo[r] = -minus.neighbour(1.0, h);
            up[r] = -plus.neighbour(1.0, h);
            rhs[r] += minus.wall_term(1.0, h, 0.0) + plus.wall_term(1.0, h, 0.0);
        }
        assert_eq!(
            (lo[0], up[m - 1]),
            (0.0, 0.0),
            "walls at both ends of the run"
        );
        // Thomas algorithm.
        for r in 1..m {
            let w = lo[r] / di[r - 1];
            di[r] -= w * up[r - 1];
            rhs[r] -= w * rhs[r - 1];
        }
        let mut u = vec![0.0; m];
        u[m - 1] = rhs[m - 1] / di[m - 1];
        for r in (0..m - 1).rev() {
            u[r] = (rhs[r] - up[r] * u[r + 1]) / di[r];
        }
        let err = fluid
            .iter()
            .zip(&u)
            .map(|(&i, v)| {
                let x = grid.point(Location::Centre, [i, 0, 0])[0];
                (v - (x - a) * (b - x) / 2.0).abs()
            })
            .fold(0.0, f64::max);
        errors.push(err);
    }
    let orders: Vec<f64> = errors.windows(2).map(|w| (w[0] / w[1]).log2()).collect();
    eprintln!("1D Poisson max errors {errors:?}, orders {orders:?}");
    assert!(
        orders.iter().all(|&p| p > 1.8),
        "orders {orders:?}, errors {errors:?}"
    );
}
