//! Properties of `halo::Topology` on random shapes, ghost widths,
//! periodicity, neighbourhoods and process grids, built collectively with
//! `comm::local::run`:
//!
//! - validation: built iff every rank's block is at least as thick as the
//!   communicated width across axes with a neighbour; otherwise every rank
//!   returns the same error;
//! - symmetry: what rank `a` sends in direction `d`, its neighbour receives
//!   from direction `-d`, with the same region shape and the same global
//!   cells (periodic wrap included);
//! - send regions lie in owned cells, receive regions in ghost cells, are
//!   disjoint and fill exactly the ghost cells within the communicated width
//!   that have a neighbour (faces only for `Faces`);
//! - `interior(r)` and `shell(r)` partition the owned cells, and the
//!   interior's stencil never reaches a ghost cell that arrives by message.

use comm::{local, BlockDecomposition, ProcessGrid};
use halo::{HaloError, HaloSpec, Neighborhood, Region, Topology};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    global: [usize; 3],
    dims: [usize; 3],
    periodic: [bool; 3],
    ghost: [usize; 3],
    width: [usize; 3],
    full: bool,
    radius: [usize; 3],
}

/// Ghost width 0..=3 per axis and a communicated width up to it.
fn widths() -> impl Strategy<Value = ([usize; 3], [usize; 3])> {
    let axis = (0usize..=3).prop_flat_map(|g| (Just(g), 0..=g));
    [axis.clone(), axis.clone(), axis].prop_map(|a| (a.map(|x| x.0), a.map(|x| x.1)))
}

fn case() -> impl Strategy<Value = Case> {
    (
        [1usize..=9, 1usize..=9, 1usize..=9],
        // At most 3 x 3 x 2 = 18 rank threads per case.
        [1usize..=3, 1usize..=3, 1usize..=2],
        [any::<bool>(), any::<bool>(), any::<bool>()],
        widths(),
        any::<bool>(),
        [0usize..=3, 0usize..=3, 0usize..=3],
    )
        .prop_filter("at least one cell per rank", |(g, d, ..)| {
            (0..3).all(|a| d[a] <= g[a])
        })
        .prop_map(
            |(global, dims, periodic, (ghost, width), full, radius)| Case {
                global,
                dims,
                periodic,
                ghost,
                width,
                full,
                radius,
            },
        )
}

fn spec(c: &Case) -> HaloSpec {
    HaloSpec {
        ghost: c.ghost,
        width: c.width,
        neighborhood: if c.full {
            Neighborhood::Full
        } else {
            Neighborhood::Faces
        },
    }
}

fn cells(r: &Region) -> Vec<[usize; 3]> {
    let mut v = Vec::with_capacity(r.len());
    for i in r.lo[0]..r.hi[0] {
        for j in r.lo[1]..r.hi[1] {
            for k in r.lo[2]..r.hi[2] {
                v.push([i, j, k]);
            }
        }
    }
    v
}

/// The global cell (wrapped on periodic axes) of padded index `p` of a
/// rank's topology; `None` outside the global box on a non-periodic axis.
fn global_of(t: &Topology, c: &Case, p: [usize; 3]) -> Option<[usize; 3]> {
    let o = t.owned();
    let mut g = [0; 3];
    for d in 0..3 {
        let x = o.lo[d] as isize + p[d] as isize - c.ghost[d] as isize;
        let n = c.global[d] as isize;
        g[d] = if c.periodic[d] {
            x.rem_euclid(n) as usize
        } else if (0..n).contains(&x) {
            x as usize
        } else {
            return None;
        };
    }
    Some(g)
}

/// A rank's error message is the validation error itself, or, when another
/// rank returned that error first and the in-process backend failed this
/// rank's last collective receive, `PeerFailed` carrying the same message
/// (`rank k failed: <message>`). The in-process backend checks for a failed
/// peer before taking a message that has already arrived, so which of the
/// two a rank reports is a race (see the report of this test suite).
fn same_error(got: &Option<String>, want: &str) -> bool {
    let Some(m) = got else { return false };
    if m == want {
        return true;
    }
    m.strip_prefix("rank ")
        .and_then(|rest| rest.split_once(" failed: "))
        .is_some_and(|(k, tail)| k.parse::<usize>().is_ok() && tail == want)
}

fn build(c: &Case) -> Result<Vec<Topology>, local::RunError> {
    let grid = ProcessGrid::new(c.dims, c.periodic).unwrap();
    let dec = BlockDecomposition::new(c.global, grid).unwrap();
    let s = spec(c);
    local::run(grid.size(), |comm| Topology::new(comm, &dec, s))
}

fn check(c: &Case) -> Result<(), TestCaseError> {
    let grid = ProcessGrid::new(c.dims, c.periodic).unwrap();
    let dec = BlockDecomposition::new(c.global, grid).unwrap();
    // The documented validation: a rank thinner than the width across an
    // axis that has a neighbour (more than one rank, or periodic).
    let thin = (0..grid.size()).find_map(|r| {
        let s = dec.box_of(r).shape();
        (0..3)
            .find(|&d| (c.dims[d] > 1 || c.periodic[d]) && c.width[d] > 0 && s[d] < c.width[d])
            .map(|d| (r, d))
    });
    let topos = match build(c) {
        Err(e) => {
            prop_assert!(thin.is_some(), "refused a valid topology: {}", e);
            let (r, d) = thin.unwrap();
            let want = HaloError::WidthAboveExtent {
                rank: r,
                axis: d,
                extent: dec.box_of(r).shape()[d],
                width: c.width[d],
            }
            .to_string();
            // Every rank reports the same error, naming the first thin rank.
            for (q, m) in e.ranks.iter().enumerate() {
                prop_assert!(same_error(m, &want), "rank {}: {:?}, want {}", q, m, want);
            }
            return Ok(());
        }
        Ok(t) => t,
    };
    prop_assert!(
        thin.is_none(),
        "accepted a rank thinner than the width: {:?}",
        thin
    );
    let p = grid.size();
    for (a, ta) in topos.iter().enumerate() {
        prop_assert_eq!(ta.rank(), a);
        prop_assert_eq!(ta.owned(), dec.box_of(a));
        let lay = ta.layout(1);
        let owned = lay.owned_region();
        let padded = lay.padded();
        // Which neighbours exist: every allowed direction whose axes all
        // communicate and whose grid neighbour exists.
        for o in offsets() {
            let nz = o.iter().filter(|&&x| x != 0).count();
            let allowed = (c.full || nz == 1) && (0..3).all(|d| o[d] == 0 || c.width[d] > 0);
            let want = if allowed { grid.neighbor(a, o) } else { None };
            let got: Vec<usize> = ta
                .neighbors()
                .iter()
                .filter(|n| n.offset == o)
                .map(|n| n.rank)
                .collect();
            prop_assert_eq!(
                got,
                want.into_iter().collect::<Vec<_>>(),
                "rank {} offset {:?}",
                a,
                o
            );
        }
        // Fixed order: offsets in lexicographic order.
        let offs: Vec<[isize; 3]> = ta.neighbors().iter().map(|n| n.offset).collect();
        prop_assert!(offs.windows(2).all(|w| w[0] < w[1]));
        let mut filled = vec![0u8; padded.iter().product()];
        let idx = |q: [usize; 3]| (q[0] * padded[1] + q[1]) * padded[2] + q[2];
        for nb in ta.neighbors() {
            prop_assert!(nb.rank < p);
            // Send: owned cells only; receive: ghost cells only, inside the
            // padded box.
            for q in cells(&nb.send) {
                prop_assert!(owned.contains(q), "send cell {:?} not owned", q);
            }
            for q in cells(&nb.recv) {
                prop_assert!((0..3).all(|d| q[d] < padded[d]));
                prop_assert!(!owned.contains(q), "recv cell {:?} is owned", q);
                filled[idx(q)] += 1;
            }
            prop_assert!(!nb.send.is_empty());
            // Symmetry: the neighbour receives from the opposite direction,
            // from us, a region of the same shape holding the same global
            // cells in the same (row-major) order.
            let back = nb.offset.map(|x| -x);
            let tb = &topos[nb.rank];
            let mirror: Vec<_> = tb
                .neighbors()
                .iter()
                .filter(|m| m.offset == back && m.rank == a)
                .collect();
            prop_assert_eq!(
                mirror.len(),
                1,
                "rank {} has no mirror of rank {} {:?}",
                nb.rank,
                a,
                nb.offset
            );
            let m = mirror[0];
            prop_assert_eq!(m.recv.shape(), nb.send.shape());
            let sent: Vec<_> = cells(&nb.send)
                .into_iter()
                .map(|q| global_of(ta, c, q))
                .collect();
            let got: Vec<_> = cells(&m.recv)
                .into_iter()
                .map(|q| global_of(tb, c, q))
                .collect();
            prop_assert!(sent.iter().all(Option::is_some));
            prop_assert_eq!(
                sent,
                got,
                "rank {} -> rank {} offset {:?}",
                a,
                nb.rank,
                nb.offset
            );
        }
        // The receive regions fill exactly the ghost cells within the
        // communicated width whose direction is allowed and has a
        // neighbour, each once.
        for i in 0..padded[0] {
            for j in 0..padded[1] {
                for k in 0..padded[2] {
                    let q = [i, j, k];
                    if owned.contains(q) {
                        prop_assert_eq!(filled[idx(q)], 0);
                        continue;
                    }
                    let mut o = [0isize; 3];
                    let mut within = true;
                    for d in 0..3 {
                        let (lo, hi) = (owned.lo[d], owned.hi[d]);
                        if q[d] < lo {
                            o[d] = -1;
                            within &= lo - q[d] <= c.width[d];
                        } else if q[d] >= hi {
                            o[d] = 1;
                            within &= q[d] - hi < c.width[d];
                        }
                    }
                    let nz = o.iter().filter(|&&x| x != 0).count();
                    let want = within && (c.full || nz == 1) && grid.neighbor(a, o).is_some();
                    prop_assert_eq!(filled[idx(q)], u8::from(want), "rank {} ghost {:?}", a, q);
                }
            }
        }
        check_interior(ta, c)?;
    }
    Ok(())
}

fn offsets() -> Vec<[isize; 3]> {
    let mut v = vec![];
    for x in -1..=1 {
        for y in -1..=1 {
            for z in -1..=1 {
                if [x, y, z] != [0, 0, 0] {
                    v.push([x, y, z]);
                }
            }
        }
    }
    v
}

/// `interior` and `shell` partition the owned cells; the interior keeps
/// `radius` away from every face across which messages arrive.
fn check_interior(t: &Topology, c: &Case) -> Result<(), TestCaseError> {
    let lay = t.layout(1);
    let owned = lay.owned_region();
    let padded = lay.padded();
    let inner = t.interior(c.radius);
    let shell = t.shell(c.radius);
    prop_assert!(shell.len() <= 6);
    let mut count = vec![0u8; padded.iter().product()];
    let idx = |q: [usize; 3]| (q[0] * padded[1] + q[1]) * padded[2] + q[2];
    for r in std::iter::once(&inner).chain(&shell) {
        for q in cells(r) {
            prop_assert!(owned.contains(q), "{:?} outside the owned cells", q);
            count[idx(q)] += 1;
        }
    }
    for q in cells(&owned) {
        prop_assert_eq!(count[idx(q)], 1, "owned cell {:?}", q);
    }
    let remote = t.remote_axes();
    for d in 0..3 {
        // An axis is remote iff some neighbour across it is another rank.
        let want = t
            .neighbors()
            .iter()
            .any(|n| n.offset[d] != 0 && n.rank != t.rank());
        prop_assert_eq!(remote[d], want);
        if !inner.is_empty() && remote[d] {
            prop_assert!(inner.lo[d] >= owned.lo[d] + c.radius[d]);
            prop_assert!(inner.hi[d] + c.radius[d] <= owned.hi[d]);
        }
        if !inner.is_empty() && !remote[d] {
            // Axes without a remote neighbour are not trimmed.
            prop_assert_eq!((inner.lo[d], inner.hi[d]), (owned.lo[d], owned.hi[d]));
        }
    }
    Ok(())
}

proptest! {
    // 64 random topologies per property; each builds at most 18 rank
    // threads on boxes of at most 9^3 cells, a few milliseconds each.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn topology_is_symmetric_and_partitions_cells(c in case()) {
        check(&c)?;
    }

    /// A communicated width above the allocated ghost width is refused on
    /// every rank with the same error naming the axis.
    #[test]
    fn width_above_ghost_is_refused(
        axis in 0usize..3,
        ghost in 0usize..3,
        extra in 1usize..3,
        n in 1usize..=4,
    ) {
        let grid = ProcessGrid::for_shape([8, 8, 8], n, [true; 3]).unwrap();
        let dec = BlockDecomposition::new([8, 8, 8], grid).unwrap();
        let mut s = HaloSpec::uniform(ghost, Neighborhood::Faces);
        s.width[axis] = ghost + extra;
        let e = local::run(n, |comm| Topology::new(comm, &dec, s)).unwrap_err();
        let want = HaloError::WidthAboveGhost { axis, width: ghost + extra, ghost }.to_string();
        for m in &e.ranks {
            prop_assert!(same_error(m, &want), "{:?}, want {}", m, want);
        }
    }
}
