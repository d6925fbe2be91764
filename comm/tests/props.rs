//! Properties of the plan builders of `comm::grid`: `ProcessGrid` (the grid
//! of `for_shape` is the documented optimum with its tie rules) and
//! `BlockDecomposition` (blocks tile the global box, sizes differ by at most
//! one, the owner lookup agrees with the boxes, empty ranks are errors).

use comm::grid::block_range;
use comm::{BlockDecomposition, IndexBox, ProcessGrid};
use proptest::prelude::*;

/// Shared face cells between distinct ranks, as documented on
/// `ProcessGrid::for_shape` ("sum over ranks of the faces shared with a
/// neighbour"): every cut plane across axis `d` is one face of the global
/// cross-section; a periodic axis split `k` ways has `k` cuts (the wrap-around
/// one included), a non-periodic one `k - 1`; an unsplit axis has none (its
/// periodic neighbour is the rank itself).
fn surface(shape: [usize; 3], dims: [usize; 3], periodic: [bool; 3]) -> u128 {
    (0..3)
        .filter(|&d| dims[d] > 1)
        .map(|d| {
            let cuts = if periodic[d] { dims[d] } else { dims[d] - 1 } as u128;
            let face: u128 = (0..3)
                .filter(|&e| e != d)
                .map(|e| shape[e] as u128)
                .product();
            cuts * face
        })
        .sum()
}

/// Every factorisation `a * b * c = n` that leaves no rank empty.
fn candidates(shape: [usize; 3], n: usize) -> Vec<[usize; 3]> {
    let mut v = vec![];
    for a in 1..=n {
        for b in 1..=n {
            if n % (a * b) == 0 {
                let dims = [a, b, n / (a * b)];
                if (0..3).all(|d| dims[d] <= shape[d]) {
                    v.push(dims);
                }
            }
        }
    }
    v
}

/// The documented choice, by brute force: smallest surface; ties to the
/// fewest ranks on the last axis, then the most balanced grid (smallest sum
/// of squares), then the grid that splits the slower axes (lexicographically
/// largest dims).
fn documented_best(shape: [usize; 3], n: usize, periodic: [bool; 3]) -> Option<[usize; 3]> {
    candidates(shape, n).into_iter().min_by_key(|&d| {
        (
            surface(shape, d, periodic),
            d[2],
            d.iter().map(|x| x * x).sum::<usize>(),
            std::cmp::Reverse(d),
        )
    })
}

fn shape3() -> impl Strategy<Value = [usize; 3]> {
    [1usize..=14, 1usize..=14, 1usize..=14]
}

fn periodic3() -> impl Strategy<Value = [bool; 3]> {
    [any::<bool>(), any::<bool>(), any::<bool>()]
}

proptest! {
    // 64 cases per property: each runs in well under a millisecond (the
    // largest global box is 14^3 cells), so the file stays fast.
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// `for_shape` returns a grid iff some factorisation leaves no rank
    /// empty; the grid holds exactly `n` ranks, fits the shape, and is the
    /// documented optimum including its tie rules.
    #[test]
    fn for_shape_is_the_documented_optimum(
        shape in shape3(),
        n in 1usize..=40,
        periodic in periodic3(),
    ) {
        let got = ProcessGrid::for_shape(shape, n, periodic);
        match documented_best(shape, n, periodic) {
            None => {
                let e = got.expect_err("no factorisation fits, so an error").to_string();
                // The error names the rank count and the shape.
                prop_assert!(e.contains(&format!("{n} ranks")), "{e}");
                prop_assert!(e.contains(&format!("{shape:?}")), "{e}");
            }
            Some(best) => {
                let g = got.expect("a factorisation fits");
                prop_assert_eq!(g.dims().iter().product::<usize>(), n);
                prop_assert_eq!(g.size(), n);
                prop_assert!((0..3).all(|d| g.dims()[d] <= shape[d]));
                prop_assert_eq!(g.periodic(), periodic);
                prop_assert_eq!(g.dims(), best, "shape {:?} n {} periodic {:?}", shape, n, periodic);
            }
        }
    }

    /// More ranks than cells can never fit: always an error.
    #[test]
    fn more_ranks_than_cells_is_an_error(shape in shape3(), extra in 1usize..20) {
        let cells: usize = shape.iter().product();
        prop_assert!(ProcessGrid::for_shape(shape, cells + extra, [true; 3]).is_err());
    }

    /// Coordinates and ranks are inverse bijections (row-major, last axis
    /// fastest), and neighbour relations are symmetric.
    #[test]
    fn coords_and_neighbours(
        dims in [1usize..=4, 1usize..=4, 1usize..=4],
        periodic in periodic3(),
        off in [-1isize..=1, -1isize..=1, -1isize..=1],
    ) {
        let g = ProcessGrid::new(dims, periodic).unwrap();
        for r in 0..g.size() {
            let c = g.coords(r);
            prop_assert!((0..3).all(|d| c[d] < dims[d]));
            prop_assert_eq!(g.rank_of(c), r);
            // Last axis fastest: rank r + 1 differs in the last coordinate
            // unless it wraps.
            if r + 1 < g.size() && c[2] + 1 < dims[2] {
                prop_assert_eq!(g.coords(r + 1), [c[0], c[1], c[2] + 1]);
            }
            match g.neighbor(r, off) {
                Some(s) => {
                    prop_assert!(s < g.size());
                    prop_assert_eq!(g.neighbor(s, off.map(|x| -x)), Some(r));
                }
                None => {
                    // Only past a non-periodic edge.
                    let past_edge = (0..3).any(|d| {
                        let x = c[d] as isize + off[d];
                        !periodic[d] && (x < 0 || x >= dims[d] as isize)
                    });
                    prop_assert!(past_edge);
                }
            }
        }
    }

    /// A zero dimension is an error; any positive dimensions are accepted.
    #[test]
    fn explicit_grid_validation(dims in [0usize..=3, 0usize..=3, 0usize..=3]) {
        prop_assert_eq!(ProcessGrid::new(dims, [false; 3]).is_ok(), !dims.contains(&0));
    }

    /// `block_range` splits `n` into `parts` contiguous blocks whose sizes
    /// differ by at most one, the larger ones first.
    #[test]
    fn block_range_tiles(n in 1usize..200, parts in 1usize..50) {
        let parts = parts.min(n);
        let mut next = 0;
        let mut sizes = vec![];
        for i in 0..parts {
            let (s, l) = block_range(n, parts, i);
            prop_assert_eq!(s, next);
            prop_assert!(l >= 1);
            next += l;
            sizes.push(l);
        }
        prop_assert_eq!(next, n);
        prop_assert!(sizes.windows(2).all(|w| w[0] >= w[1] && w[0] - w[1] <= 1));
    }

    /// The boxes tile the global box exactly: every index is owned by
    /// exactly one rank, the owner lookup names the rank whose box holds it,
    /// and along each axis the block extents differ by at most one.
    #[test]
    fn decomposition_tiles_and_owner_agrees(
        global in shape3(),
        dims in [1usize..=5, 1usize..=5, 1usize..=5],
        periodic in periodic3(),
    ) {
        let grid = ProcessGrid::new(dims, periodic).unwrap();
        let dec = match BlockDecomposition::new(global, grid) {
            Ok(d) => d,
            Err(e) => {
                // Refused exactly when an axis has more ranks than cells,
                // and the message names that axis.
                let d = (0..3).find(|&d| dims[d] > global[d]);
                prop_assert!(d.is_some(), "refused a valid decomposition: {}", e);
                let e = e.to_string();
                prop_assert!(e.contains(&format!("axis {}", d.unwrap())), "{}", e);
                return Ok(());
            }
        };
        prop_assert!((0..3).all(|d| dims[d] <= global[d]));
        prop_assert_eq!(dec.global(), global);
        let idx = |p: [usize; 3]| (p[0] * global[1] + p[1]) * global[2] + p[2];
        let mut owner = vec![usize::MAX; global.iter().product()];
        let mut total = 0;
        for r in 0..grid.size() {
            let b = dec.box_of(r);
            prop_assert!(!b.is_empty(), "rank {} is empty", r);
            prop_assert!((0..3).all(|d| b.hi[d] <= global[d]));
            total += b.len();
            for i in b.lo[0]..b.hi[0] {
                for j in b.lo[1]..b.hi[1] {
                    for k in b.lo[2]..b.hi[2] {
                        let slot = &mut owner[idx([i, j, k])];
                        prop_assert_eq!(*slot, usize::MAX, "index {:?} owned twice", [i, j, k]);
                        *slot = r;
                    }
                }
            }
        }
        prop_assert_eq!(total, global.iter().product::<usize>());
        for i in 0..global[0] {
            for j in 0..global[1] {
                for k in 0..global[2] {
                    let p = [i, j, k];
                    prop_assert_eq!(dec.owner(p), owner[idx(p)], "owner of {:?}", p);
                    prop_assert!(dec.box_of(dec.owner(p)).contains(p));
                }
            }
        }
        for d in 0..3 {
            let ext: Vec<usize> = (0..grid.size()).map(|r| dec.box_of(r).shape()[d]).collect();
            let (mn, mx) = (ext.iter().min().unwrap(), ext.iter().max().unwrap());
            prop_assert!(mx - mn <= 1, "axis {} extents {:?}", d, ext);
        }
    }

    /// The decomposition of a `for_shape` grid never leaves a rank empty.
    #[test]
    fn for_shape_grids_decompose(global in shape3(), n in 1usize..=40) {
        if let Ok(g) = ProcessGrid::for_shape(global, n, [false; 3]) {
            let dec = BlockDecomposition::new(global, g).unwrap();
            prop_assert!((0..n).all(|r| !dec.box_of(r).is_empty()));
        }
    }

    /// Box intersection is the set intersection.
    #[test]
    fn intersection_is_pointwise(
        a in ([0usize..6, 0usize..6, 0usize..6], [0usize..6, 0usize..6, 0usize..6]),
        b in ([0usize..6, 0usize..6, 0usize..6], [0usize..6, 0usize..6, 0usize..6]),
    ) {
        let a = IndexBox { lo: a.0, hi: a.1 };
        let b = IndexBox { lo: b.0, hi: b.1 };
        let c = a.intersect(&b);
        let mut n = 0;
        for i in 0..6 {
            for j in 0..6 {
                for k in 0..6 {
                    let p = [i, j, k];
                    prop_assert_eq!(c.contains(p), a.contains(p) && b.contains(p));
                    n += usize::from(c.contains(p));
                }
            }
        }
        prop_assert_eq!(c.len(), n);
    }
}
