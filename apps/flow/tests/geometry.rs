//! The geometry of a block: the bits of the whole grid's at every point a
//! block holds (its ghost layer included), and memory in proportion to the
//! block, not the grid.

use comm::{BlockDecomposition, IndexBox, ProcessGrid};
use flow::bodies::{build, Bed};
use flow::config::{Bodies, Config, Method};
use flow::geometry::Geometry;

#[global_allocator]
static GLOBAL: testkit::Counting = testkit::Counting;

/// The blocks of `n^3` cells on a `dims` process grid.
fn blocks(n: usize, dims: [usize; 3]) -> Vec<IndexBox> {
    let grid = ProcessGrid::new(dims, [true; 3]).unwrap();
    let dec = BlockDecomposition::new([n; 3], grid).unwrap();
    (0..grid.size()).map(|r| dec.box_of(r)).collect()
}

#[test]
fn a_block_holds_the_bits_of_the_whole_grid() {
    for method in [Method::CutCell, Method::GhostCell] {
        let cfg = Config {
            n: 24,
            bodies: Bodies::Random,
            radius: 0.13,
            solid_fraction: 0.3,
            method,
            ..Config::default()
        };
        let bed = Bed::new(&cfg).unwrap();
        let body = bed.body.as_deref();
        let whole = build(&cfg, body, IndexBox::from_shape([24; 3])).unwrap();
        // Blocks of 12 and of 8 cells, and one with a single block along
        // an axis (its ghost layer wraps onto its own cells).
        for dims in [[2, 2, 2], [3, 1, 2]] {
            for b in blocks(24, dims) {
                let g = build(&cfg, body, b).unwrap();
                let r = g.region();
                // The whole grid's owned point that `p` wraps to.
                let at = |p: [i64; 3]| whole.idx(p.map(|x| x.rem_euclid(24) as usize));
                let same = |a: &[f64], w: &[f64], owned_only: bool, what: &str| {
                    for i in 0..r.len() {
                        let p = r.global(i);
                        let owned = (0..3).all(|d| p[d] >= b.lo[d] as i64 && p[d] < b.hi[d] as i64);
                        if owned_only && !owned {
                            continue;
                        }
                        let j = at(p);
                        assert_eq!(
                            a[i].to_bits(),
                            w[j].to_bits(),
                            "{method:?} {dims:?}: {what} at {p:?} of block {b:?}"
                        );
                    }
                };
                same(&g.theta, &whole.theta, false, "fluid fraction");
                for d in 0..3 {
                    same(&g.aperture[d], &whole.aperture[d], false, "aperture");
                    same(&g.wall[d], &whole.wall[d], true, "wall sum");
                    same(&g.weight[d], &whole.weight[d], true, "weight");
                    let flags = |f: &[bool]| {
                        f.iter()
                            .map(|&x| f64::from(u8::from(x)))
                            .collect::<Vec<_>>()
                    };
                    same(
                        &flags(&g.fluid[d]),
                        &flags(&whole.fluid[d]),
                        false,
                        "fluid flag",
                    );
                }
            }
        }
        // Some of each kind is present: the comparison saw solid, fluid
        // and cut cells.
        assert!(whole.theta.contains(&0.0) && whole.theta.contains(&1.0));
        assert!(whole.theta.iter().any(|&t| t > 0.0 && t < 1.0));
    }
}

/// Bytes per point of the block's region that a geometry holds: ten
/// `f64` arrays and three `bool` arrays.
const GEOMETRY_BYTES: usize = 10 * 8 + 3;

#[test]
fn a_rank_holds_memory_in_proportion_to_its_block() {
    // 256^3 cells over 8 ranks; the bed of the porous benchmark (random
    // spheres at porosity 0.5). Each rank's block is 128^3 cells.
    let n = 256;
    let cfg = Config {
        n,
        bodies: Bodies::Random,
        radius: 0.05,
        solid_fraction: 0.5,
        ..Config::default()
    };
    let bed = Bed::new(&cfg).unwrap();
    let bs = blocks(n, [2, 2, 2]);
    // Two blocks (opposite corners) of the eight: each as its own rank.
    for b in [bs[0], bs[7]] {
        let (peak, g) = testkit::peak_bytes(|| build(&cfg, bed.body.as_deref(), b).unwrap());
        let g: Geometry = g;
        let points = g.region().len();
        assert_eq!(points, 130 * 130 * 130);
        assert_eq!(g.bytes(), GEOMETRY_BYTES * points);
        // The build's peak (measured: 89.9 bytes a point): the geometry
        // it returns (83) and one component's ghost-point classification
        // (a byte a point and the links of the points next to a wall);
        // before that, the cut cells and their copies (64). The copies of
        // the whole grid's arrays, or of a second block, would exceed it.
        let bound = 100 * points as u64;
        assert!(
            peak <= bound,
            "block {b:?}: the build peaked at {peak} bytes, above {bound} (100 a point of its region)"
        );
        // The whole grid's geometry, which every rank held before.
        let whole = (GEOMETRY_BYTES * n * n * n) as u64;
        assert!(
            peak * 4 < whole,
            "block {b:?}: {peak} bytes is not far below the whole grid's {whole}"
        );
    }
}

/// `min_aperture` closes the cut-cell faces open by at most that fraction
/// (their velocity point is no unknown, their aperture 0) and leaves the
/// others as they are; a value out of range, or set on a ghost-cell run, is
/// refused by name.
#[test]
fn nearly_closed_faces_are_closed() {
    let base = Config {
        n: 32,
        bodies: Bodies::Random,
        solid_fraction: 0.5,
        radius: 0.1,
        ..Config::default()
    };
    let bed = Bed::new(&base).unwrap();
    let body = bed.body.as_deref();
    let block = IndexBox::from_shape([32; 3]);
    let open = build(
        &Config {
            min_aperture: 0.0,
            ..base.clone()
        },
        body,
        block,
    )
    .unwrap();
    let closed = build(&base, body, block).unwrap();
    let t = base.min_aperture;
    let mut small = 0;
    for d in 0..3 {
        for i in open.region().owned() {
            let a = open.aperture[d][i];
            if a > 0.0 && a <= t {
                small += 1;
                assert_eq!(closed.aperture[d][i], 0.0);
                assert!(!closed.fluid[d][i]);
            } else {
                assert_eq!(closed.aperture[d][i].to_bits(), a.to_bits());
                assert_eq!(closed.fluid[d][i], open.fluid[d][i]);
            }
        }
    }
    // The bed at porosity 0.5 has such faces at this resolution, as at
    // 128³ (14) and 256³ (48); without any the test would check nothing.
    assert!(small > 0, "no face open by at most {t}");
    for bad in [-1e-3, 1.0, f64::NAN] {
        let e = Config {
            min_aperture: bad,
            ..base.clone()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("min_aperture"), "{e}");
    }
    let e = Config {
        method: Method::GhostCell,
        min_aperture: 0.01,
        ..base
    }
    .validate()
    .unwrap_err();
    assert!(
        e.to_string().contains("applies to method = \"cut-cell\""),
        "{e}"
    );
}
