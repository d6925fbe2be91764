//! Properties of the multigrid hierarchy builder on random global shapes,
//! boundary conditions, requested depths, agglomeration thresholds and rank
//! counts:
//!
//! - the depth depends on the global shape only: `max_levels` is one more
//!   than the number of times every extent can be halved, a deeper request
//!   is refused with the same error on every rank count, and a valid
//!   request gives the same levels and shapes on every rank count;
//! - each coarse shape is half the one above it;
//! - the ranks per level are as documented: all ranks on the fine level,
//!   never more on a coarser level; a coarse smoothing level keeps its
//!   parent's ranks when their blocks stay even and hold at least
//!   `agglomerate_below` cells per rank, and is gathered onto fewer ranks
//!   (whose blocks are even, with at least that many cells per rank, or
//!   one rank) otherwise; the bottom is solved on the ranks of the level
//!   above it.

use comm::{local, BlockDecomposition, ProcessGrid};
use multigrid::{Boundary, Hierarchy, MgError, MgOptions, Poisson};
use proptest::prelude::*;

const RANK_COUNTS: [usize; 5] = [1, 2, 3, 4, 8];
/// The dense bottom solve's limit in these tests: small, so that building
/// a hierarchy never factors a large matrix (the default is 1728 cells).
const MAX_BOTTOM: usize = 216;

/// Factors of two in `x >= 1`.
fn twos(x: usize) -> usize {
    x.trailing_zeros() as usize
}

/// Whether every block of `shape` on `grid` is even and at least 2.
fn even_blocks(shape: [usize; 3], grid: ProcessGrid) -> bool {
    let Ok(dec) = BlockDecomposition::new(shape, grid) else {
        return false;
    };
    (0..grid.size()).all(|r| dec.box_of(r).shape().iter().all(|&e| e >= 2 && e % 2 == 0))
}

#[derive(Debug, Clone)]
struct Case {
    shape: [usize; 3],
    bc: [Boundary; 3],
    /// Requested levels (may exceed the maximum).
    levels: usize,
    below: usize,
}

fn boundary() -> impl Strategy<Value = Boundary> {
    prop_oneof![
        Just(Boundary::Periodic),
        Just(Boundary::Dirichlet),
        Just(Boundary::Neumann)
    ]
}

fn case() -> impl Strategy<Value = Case> {
    // Extents odd * 2^k with odd in {1, 3} and k in 1..=4 (2 to 48): deep
    // hierarchies with tiny bottoms (at most 27 cells, so the dense bottom
    // solve costs nothing) and at most 48^3 fine cells.
    let extent = (prop_oneof![Just(1usize), Just(3)], 1usize..=4).prop_map(|(o, k)| o << k);
    (
        [extent.clone(), extent.clone(), extent],
        [boundary(), boundary(), boundary()],
        // The requested depth relative to the maximum: 0 = the maximum,
        // 1 = one more (refused), 2.. = shallower.
        0usize..6,
        prop_oneof![Just(0usize), Just(8), Just(64), Just(512)],
    )
        .prop_map(|(shape, bc, rel, below)| {
            let max = Hierarchy::max_levels(shape);
            let levels = match rel {
                0 => max,
                1 => max + 1,
                r => max.saturating_sub(r - 1).max(1),
            };
            Case {
                shape,
                bc,
                levels,
                below,
            }
        })
}

/// What one rank count gave: levels, shapes and ranks per level, or the
/// error of every rank.
type Built = Result<(usize, Vec<[usize; 3]>, Vec<usize>), Vec<Option<String>>>;

fn build(c: &Case, p: usize) -> Option<Built> {
    let problem = Poisson::new(c.shape, [1.0; 3], c.bc).unwrap();
    let grid = ProcessGrid::for_shape(c.shape, p, problem.periodic()).ok()?;
    let opts = MgOptions {
        agglomerate_below: c.below,
        max_bottom_cells: MAX_BOTTOM,
        ..MgOptions::default()
    };
    let r = local::run(p, |comm| {
        let h = Hierarchy::new(comm, grid, &problem, c.levels, opts)?;
        Ok::<_, MgError>((h.num_levels(), h.level_shapes(), h.level_ranks()))
    });
    Some(match r {
        Ok(v) => {
            // Every rank sees the same hierarchy.
            assert!(v.iter().all(|x| *x == v[0]), "ranks disagree: {v:?}");
            Ok(v.into_iter().next().unwrap())
        }
        Err(e) => Err(e.ranks),
    })
}

fn check(c: &Case) -> Result<(), TestCaseError> {
    let max = Hierarchy::max_levels(c.shape);
    let bottom = c.shape.map(|x| x >> (c.levels.min(max) - 1));
    let periodic = c.bc.map(|b| b == Boundary::Periodic);
    let mut first: Option<(usize, Vec<[usize; 3]>)> = None;
    for p in RANK_COUNTS {
        let Some(built) = build(c, p) else { continue };
        let fine = ProcessGrid::for_shape(c.shape, p, periodic).unwrap();
        match built {
            Err(ranks) => {
                // Refused on every rank, for a documented reason.
                let msgs: Vec<&str> = ranks.iter().map(|m| m.as_deref().unwrap_or("")).collect();
                prop_assert!(msgs.iter().all(|m| !m.is_empty()), "{:?}", msgs);
                if c.levels > max {
                    // The depth error names the largest depth: the shape's.
                    let want = format!("at most {max} levels");
                    prop_assert!(msgs.iter().all(|m| m.contains(&want)), "{:?}", msgs);
                } else if bottom.iter().product::<usize>() > MAX_BOTTOM {
                    prop_assert!(
                        msgs.iter()
                            .all(|m| m.contains("more than the dense-solve limit")),
                        "{:?}",
                        msgs
                    );
                } else {
                    prop_assert!(
                        c.levels > 1 && !even_blocks(c.shape, fine),
                        "refused {:?} on {} ranks: {:?}",
                        c,
                        p,
                        msgs
                    );
                    prop_assert!(
                        msgs.iter()
                            .all(|m| m.contains("coarsening needs every rank's block to be even")),
                        "{:?}",
                        msgs
                    );
                }
            }
            Ok((levels, shapes, ranks)) => {
                prop_assert!(c.levels <= max);
                prop_assert!(bottom.iter().product::<usize>() <= MAX_BOTTOM);
                prop_assert!(c.levels == 1 || even_blocks(c.shape, fine));
                prop_assert_eq!(levels, c.levels);
                prop_assert_eq!(shapes.len(), levels);
                prop_assert_eq!(shapes[0], c.shape);
                for l in 1..levels {
                    prop_assert_eq!(shapes[l], shapes[l - 1].map(|x| x / 2));
                    prop_assert!((0..3).all(|d| shapes[l][d] * 2 == shapes[l - 1][d]));
                }
                prop_assert_eq!(shapes[levels - 1], bottom);
                check_ranks(c, p, fine, &shapes, &ranks)?;
                // The same levels for every rank count.
                match &first {
                    None => first = Some((levels, shapes)),
                    Some(f) => prop_assert_eq!(f, &(levels, shapes), "rank count {}", p),
                }
            }
        }
    }
    Ok(())
}

fn check_ranks(
    c: &Case,
    p: usize,
    fine: ProcessGrid,
    shapes: &[[usize; 3]],
    ranks: &[usize],
) -> Result<(), TestCaseError> {
    let levels = shapes.len();
    prop_assert_eq!(ranks.len(), levels);
    prop_assert_eq!(ranks[0], p);
    prop_assert!(ranks.windows(2).all(|w| w[1] <= w[0]), "ranks {:?}", ranks);
    if levels == 1 {
        return Ok(());
    }
    // The bottom is solved on the ranks of the last smoothing level.
    prop_assert_eq!(ranks[levels - 1], ranks[levels - 2]);
    let periodic = fine.periodic();
    let fits = |shape: [usize; 3], g: ProcessGrid| {
        let cells: usize = shape.iter().product();
        even_blocks(shape, g) && (g.size() == 1 || cells / g.size() >= c.below)
    };
    // Smoothing levels 1..levels-1: the grid is the parent's while the rank
    // count stays, else the `for_shape` grid of the new count.
    let mut grid = fine;
    for l in 1..levels - 1 {
        if ranks[l] == ranks[l - 1] {
            prop_assert!(
                fits(shapes[l], grid),
                "level {} kept {} ranks it cannot use: {:?}",
                l,
                ranks[l],
                ranks
            );
        } else {
            prop_assert!(
                !fits(shapes[l], grid),
                "level {} gathered needlessly: {:?}",
                l,
                ranks
            );
            grid = ProcessGrid::for_shape(shapes[l], ranks[l], periodic).unwrap();
            prop_assert!(
                fits(shapes[l], grid),
                "level {} gathered onto {} ranks that do not fit: {:?}",
                l,
                ranks[l],
                ranks
            );
        }
    }
    Ok(())
}

proptest! {
    // 48 random cases, each building the hierarchy on up to 5 rank counts
    // (1 to 8 threads) over at most 48^3 cells: about 10-30 ms a case.
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn hierarchy_depends_on_the_shape_only(c in case()) {
        check(&c)?;
    }

    /// The maximum depth: halving while every extent is even, i.e. one
    /// more than the fewest factors of two of an extent.
    #[test]
    fn max_levels_counts_factors_of_two(shape in [1usize..=4096, 1usize..=4096, 1usize..=4096]) {
        let want = 1 + shape.iter().map(|&x| twos(x)).min().unwrap();
        prop_assert_eq!(Hierarchy::max_levels(shape), want);
    }
}
