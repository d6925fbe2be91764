//! Cut-cell geometry against exact values: fluid volume and wetted area of
//! one sphere and of a simple cubic array, bit-identity across block
//! decompositions, and the errors on bad input.
//!
//! Bounds. On a leaf of size `l = h / 2^depth` the linear interpolant on
//! the Kuhn simplices of a distance whose level sets have curvature `1/R`
//! (Hessian norm `1/R` near the surface) is off by at most `e = 3 l^2 /
//! (8 R)` (half the Hessian times the squared circumradius `3 l^2 / 4`),
//! so the reconstructed surface lies within `e` of the true one and the
//! fluid volume within `A e`, `A` the surface area. The distance of a
//! sphere is convex, its interpolant lies above it: the fluid volume is
//! overestimated, the error is in `[0, A e]`.
//!
//! The wetted area from the apertures is the norm of each cell's wall area
//! vector: for a patch of a sphere inside a cell (diameter at most `h
//! sqrt(3)`, angular radius at most `h sqrt(3) / (2 R)`) the norm falls
//! short of the patch area by at most half the mean squared angle, `3 h^2
//! / (8 R^2)`; the interpolated surface adds at most `3 l^2 / (8 R^2)`.

use comm::grid::block_range;
use comm::IndexBox;
use ibm::{
    Body, CutCells, CutOptions, GhostPoints, IbmError, Lattice, LatticeKind, Location, MacGrid,
    Packing, Side,
};
use std::f64::consts::PI;

/// Fluid fraction of the box and total wall area (sum of the norms of the
/// cells' wall area vectors), whole box as one block.
fn integrate(body: &dyn Body, n: usize, depth: u32) -> (f64, f64) {
    let grid = MacGrid::new([n; 3], body.lengths()).unwrap();
    let cut = CutCells::with_options(
        body,
        &grid,
        IndexBox::from_shape([n; 3]),
        1,
        CutOptions { depth },
    )
    .unwrap();
    let v: f64 = body.lengths().iter().product();
    let h = grid.spacing();
    let fluid = cut.owned_volume_fractions().sum::<f64>() * h[0] * h[1] * h[2] / v;
    let mut area = 0.0;
    for i in 0..n as i64 {
        for j in 0..n as i64 {
            for k in 0..n as i64 {
                let a = cut.wall_area([i, j, k]).unwrap();
                area += (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt();
            }
        }
    }
    (fluid, area)
}

/// Checks volume and area against the bounds of the module comment at
/// 32^3 and 64^3 (depth 1) and the second-order ratio of the volume
/// errors; returns the errors for the record.
fn check(body: &dyn Body, radius: f64, area_exact: f64) -> Vec<(f64, f64)> {
    let c = body.solid_fraction_exact().unwrap();
    let mut errs = Vec::new();
    for n in [32usize, 64] {
        let depth = 1;
        let h = 1.0 / n as f64;
        let l = h / 2f64.powi(depth as i32);
        let (fluid, area) = integrate(body, n, depth);
        let ev = fluid - (1.0 - c);
        let bound_v = area_exact * 3.0 * l * l / (8.0 * radius);
        assert!(
            ev >= -1e-13 && ev <= bound_v,
            "n = {n}: volume error {ev:e} outside [0, {bound_v:e}]"
        );
        let ea = area / area_exact - 1.0;
        let bound_a = 3.0 * (h * h + l * l) / (8.0 * radius * radius);
        assert!(
            ea.abs() <= bound_a,
            "n = {n}: area error {ea:e} above {bound_a:e}"
        );
        errs.push((ev, ea));
    }
    let ratio = errs[0].0 / errs[1].0;
    assert!(
        ratio > 3.0 && ratio < 5.0,
        "volume error ratio {ratio}: not second order"
    );
    errs
}

#[test]
fn one_sphere_volume_and_area() {
    // Measured: volume 1.53e-4 (32^3), 3.83e-5 (64^3); area -1.43e-3,
    // -3.57e-4.
    let r = 0.3;
    let body = Packing::single([0.51, 0.47, 0.53], r, [1.0; 3]).unwrap();
    let e = check(&body, r, 4.0 * PI * r * r);
    eprintln!("one sphere (volume, area) errors at 32^3, 64^3: {e:?}");
}

#[test]
fn simple_cubic_array_volume_and_area() {
    // One sphere per box, c = 0.4 (r = 0.457, gap 0.085). Measured:
    // volume 2.34e-4 (32^3), 5.84e-5 (64^3); area -6.11e-4, -1.55e-4.
    let body = Lattice::for_solid_fraction(LatticeKind::Sc, [1.0; 3], [1; 3], 0.4).unwrap();
    let r = body.radius();
    let e = check(&body, r, 4.0 * PI * r * r);
    eprintln!("SC c = 0.4 (volume, area) errors at 32^3, 64^3: {e:?}");
}

#[test]
fn faces_agree_with_volumes_on_uniform_cells() {
    let body =
        Lattice::for_solid_fraction(LatticeKind::Bcc, [1.0, 1.5, 1.0], [2, 3, 2], 0.5).unwrap();
    let grid = MacGrid::new([12, 18, 12], body.lengths()).unwrap();
    let cut = CutCells::new(&body, &grid, IndexBox::from_shape([12, 18, 12]), 0).unwrap();
    let mut cut_cells = 0;
    for i in 0..12 {
        for j in 0..18 {
            for k in 0..12 {
                let p = [i, j, k];
                let t = cut.volume_fraction(p).unwrap();
                assert!((0.0..=1.0).contains(&t));
                for d in 0..3 {
                    let a = cut.aperture(d, p).unwrap();
                    assert!((0.0..=1.0).contains(&a));
                    let mut q = p;
                    q[d] += 1;
                    let upper = cut.aperture(d, q).unwrap();
                    // An all-fluid or all-solid cell has all-open or
                    // all-closed faces, and then no wall.
                    if t == 0.0 || t == 1.0 {
                        assert_eq!((a, upper), (t, t), "{p:?} axis {d}");
                        assert_eq!(cut.wall_area(p), Some([0.0; 3]));
                    }
                }
                cut_cells += usize::from(t > 0.0 && t < 1.0);
            }
        }
    }
    assert!(cut_cells > 100);
    // The standalone functions give the same bits.
    for p in [[3, 4, 5], [0, 0, 0], [11, 17, 11], [-1, 18, 25]] {
        let a = ibm::cell_fluid_fraction(&body, &grid, p, CutOptions::default());
        assert_eq!(a.to_bits(), cut.volume_fraction(p).unwrap().to_bits());
        for d in 0..3 {
            let b = ibm::face_fluid_aperture(&body, &grid, d, p, CutOptions::default());
            assert_eq!(b.to_bits(), cut.aperture(d, p).unwrap().to_bits());
        }
    }
    assert_eq!(cut.aperture(3, [0; 3]), None);
}

/// SC lattice on 24^3: the whole box as one block and 2 x 2 x 2 blocks
/// with 2 ghost layers store the same bits for every cell and point they
/// share (ghosts included), for the cut cells and for the ghost points of
/// every staggered component.
#[test]
fn blocks_share_bits() {
    let n = 24;
    let body = Lattice::for_solid_fraction(LatticeKind::Sc, [1.0; 3], [2; 3], 0.45).unwrap();
    let grid = MacGrid::new([n; 3], [1.0; 3]).unwrap();
    let g = 2;
    let whole = CutCells::new(&body, &grid, IndexBox::from_shape([n; 3]), g).unwrap();
    let locations = [
        Location::Centre,
        Location::Face(0),
        Location::Face(1),
        Location::Face(2),
    ];
    let whole_ghost: Vec<GhostPoints> = locations
        .iter()
        .map(|&l| GhostPoints::new(&body, &grid, l, IndexBox::from_shape([n; 3]), g).unwrap())
        .collect();
    let mut compared = 0usize;
    for b in 0..8 {
        let idx = [b >> 2, (b >> 1) & 1, b & 1];
        let mut lo = [0; 3];
        let mut hi = [0; 3];
        for d in 0..3 {
            let (s, len) = block_range(n, 2, idx[d]);
            lo[d] = s;
            hi[d] = s + len;
        }
        let block = IndexBox { lo, hi };
        let part = CutCells::new(&body, &grid, block, g).unwrap();
        let region = *part.region();
        for i in 0..region.len() {
            let p = region.global(i);
            assert_eq!(
                part.volume_fraction(p).unwrap().to_bits(),
                whole.volume_fraction(p).unwrap().to_bits(),
                "{p:?}"
            );
            for d in 0..3 {
                assert_eq!(
                    part.aperture(d, p).unwrap().to_bits(),
                    whole.aperture(d, p).unwrap().to_bits()
                );
            }
            compared += 1;
        }
        for (li, &l) in locations.iter().enumerate() {
            let gp = GhostPoints::new(&body, &grid, l, block, g).unwrap();
            for i in 0..region.len() {
                let p = region.global(i);
                assert_eq!(gp.kind(p), whole_ghost[li].kind(p));
                let (a, b) = (gp.links(p).unwrap(), whole_ghost[li].links(p).unwrap());
                for k in 0..6 {
                    match (a[k], b[k]) {
                        (ibm::Link::Open, ibm::Link::Open) => {}
                        (ibm::Link::Wall { t: s }, ibm::Link::Wall { t }) => {
                            assert_eq!(s.to_bits(), t.to_bits(), "{l:?} {p:?}")
                        }
                        other => panic!("{l:?} {p:?}: {other:?}"),
                    }
                }
            }
        }
    }
    assert_eq!(compared, 8 * 16usize.pow(3));
    // The whole region of a block wraps: index -1 is n - 1.
    assert_eq!(
        whole.volume_fraction([-1, 0, 0]).unwrap().to_bits(),
        whole
            .volume_fraction([n as i64 - 1, 0, 0])
            .unwrap()
            .to_bits()
    );
    let gp = &whole_ghost[0];
    assert!(gp.link([0, 0, 0], 3, Side::Lower).is_none());
}

#[test]
fn bad_input_is_an_error_naming_the_value() {
    let e = MacGrid::new([8, 0, 8], [1.0; 3]).unwrap_err();
    assert_eq!(e, IbmError::Shape { axis: 1, value: 0 });
    let e = MacGrid::new([8; 3], [1.0, f64::NAN, 1.0]).unwrap_err();
    assert!(
        e.to_string().contains("NaN") && e.to_string().contains("axis 1"),
        "{e}"
    );
    let body = Lattice::for_solid_fraction(LatticeKind::Sc, [1.0; 3], [1; 3], 0.2).unwrap();
    let grid = MacGrid::new([8; 3], [2.0, 1.0, 1.0]).unwrap();
    let e = CutCells::new(&body, &grid, IndexBox::from_shape([8; 3]), 0).unwrap_err();
    assert!(matches!(e, IbmError::BoxMismatch { .. }), "{e}");
    let grid = MacGrid::new([8; 3], [1.0; 3]).unwrap();
    let e = CutCells::new(
        &body,
        &grid,
        IndexBox {
            lo: [0; 3],
            hi: [9, 8, 8],
        },
        0,
    )
    .unwrap_err();
    assert!(e.to_string().contains("[9, 8, 8]"), "{e}");
    let e = CutCells::new(
        &body,
        &grid,
        IndexBox {
            lo: [3; 3],
            hi: [3, 8, 8],
        },
        0,
    )
    .unwrap_err();
    assert!(matches!(e, IbmError::Block { .. }), "{e}");
    let e = CutCells::with_options(
        &body,
        &grid,
        IndexBox::from_shape([8; 3]),
        0,
        CutOptions { depth: 9 },
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("depth 9") && e.to_string().contains("0..=5"),
        "{e}"
    );
    let e = GhostPoints::new(
        &body,
        &grid,
        Location::Face(3),
        IndexBox::from_shape([8; 3]),
        0,
    )
    .unwrap_err();
    assert_eq!(e, IbmError::Axis { value: 3 });
    let e = GhostPoints::with_options(
        &body,
        &grid,
        Location::Centre,
        IndexBox::from_shape([8; 3]),
        0,
        ibm::GhostOptions { t_min: 0.0 },
    )
    .unwrap_err();
    assert!(e.to_string().contains("t_min 0"), "{e}");
    let e = Lattice::for_solid_fraction(LatticeKind::Fcc, [1.0; 3], [1; 3], 0.75).unwrap_err();
    assert!(
        e.to_string().contains("0.75") && e.to_string().contains("0.74"),
        "{e}"
    );
    let e = ibm::Slab::new(0, 0.5, 0.5, [1.0; 3]).unwrap_err();
    assert!(e.to_string().contains("(0, 0.5)"), "{e}");
    let e = Packing::read("/nonexistent/ibm.txt", [1.0; 3]).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/ibm.txt"), "{e}");
    // A region of 896^3 points exceeds the ghost points' 32-bit wall-link
    // offsets (checked before anything is allocated); the error names the
    // limit in points.
    let big = MacGrid::new([896; 3], [1.0; 3]).unwrap();
    let e = GhostPoints::new(
        &body,
        &big,
        Location::Centre,
        IndexBox::from_shape([896; 3]),
        0,
    )
    .unwrap_err();
    assert!(
        matches!(e, IbmError::TooLarge { extent: [896, 896, 896], max, .. } if max == GhostPoints::MAX_POINTS),
        "{e}"
    );
    assert!(e.to_string().contains("715827882 points"), "{e}");
    let e = CutCells::new(&body, &grid, IndexBox::from_shape([8; 3]), 1 << 21).unwrap_err();
    assert!(e.to_string().contains("ghost width 2097152"), "{e}");
}
