//! Coefficients as data (`Hierarchy::with_coefficients`): the same bits as
//! the coefficient functions on any rank count, and the errors of bad data.

use comm::{local, IndexBox, ProcessGrid};
use multigrid::{Boundary, Coefficients, Hierarchy, MgError, MgOptions, Poisson};
use std::sync::Arc;

const D: Boundary = Boundary::Dirichlet;
const P: Boundary = Boundary::Periodic;
const N: Boundary = Boundary::Neumann;

/// A face coefficient with a closed plane (holes in it) across axis 0.
fn beta(d: usize, q: [usize; 3]) -> f64 {
    if d == 0 && q[0] == 8 && !(q[1] + q[2]).is_multiple_of(3) {
        return 0.0;
    }
    0.5 + 0.1 * ((q[0] * 7 + q[1] * 13 + q[2] * 5 + d * 3) % 11) as f64
}

fn alpha(q: [usize; 3]) -> f64 {
    0.25 * ((q[0] + 2 * q[1] + q[2]) % 4) as f64
}

fn problem() -> Poisson {
    Poisson::with_faces([16, 16, 24], [1.0, 0.8, 1.2], [[D, N], [P, P], [N, D]]).unwrap()
}

/// The face data of `cells` written out by hand from the layout the docs
/// give (row-major over the face box: the lower faces, plus the high wall
/// face on a non-periodic axis where the block reaches it).
fn hand_faces(p: &Poisson, cells: IndexBox) -> [Vec<f64>; 3] {
    std::array::from_fn(|d| {
        let mut hi = cells.hi;
        if !p.periodic()[d] && hi[d] == p.shape[d] {
            hi[d] += 1;
        }
        assert_eq!(p.face_box(&cells, d), IndexBox { lo: cells.lo, hi });
        let mut v = Vec::new();
        for i in cells.lo[0]..hi[0] {
            for j in cells.lo[1]..hi[1] {
                for k in cells.lo[2]..hi[2] {
                    v.push(beta(d, [i, j, k]));
                }
            }
        }
        v
    })
}

fn hand_shift(cells: IndexBox) -> Vec<f64> {
    let mut shift = Vec::new();
    for i in cells.lo[0]..cells.hi[0] {
        for j in cells.lo[1]..cells.hi[1] {
            for k in cells.lo[2]..cells.hi[2] {
                shift.push(alpha([i, j, k]));
            }
        }
    }
    shift
}

fn by_hand(p: &Poisson, cells: IndexBox) -> Coefficients {
    Coefficients::constant()
        .with_faces(hand_faces(p, cells))
        .with_shift(hand_shift(cells))
}

/// Solves on `ranks` ranks with functions (`data` false) or data; every
/// rank's values' bits and the iteration count.
fn solve(ranks: usize, data: bool) -> (Vec<(IndexBox, Vec<u64>)>, usize) {
    let out = local::run(ranks, |c| {
        let p = problem();
        let grid = ProcessGrid::for_shape(p.shape, c.size(), p.periodic())?;
        let opts = MgOptions {
            agglomerate_below: 1024,
            ..MgOptions::default()
        };
        let mut mg = if data {
            let cells = Hierarchy::fine_block(p.shape, grid, c.rank())?;
            Hierarchy::with_coefficients(c, grid, &p, 4, opts, by_hand(&p, cells))?
        } else {
            let p = p
                .with_coefficient(Arc::new(beta))
                .with_shift(Arc::new(alpha));
            Hierarchy::new(c, grid, &p, 4, opts)?
        };
        assert!(mg.problem().has_shift() && mg.problem().has_variable_coefficient());
        let mut f = mg.new_field();
        let mut u = mg.new_field();
        f.fill_owned(0, &mg.owned(), |q| {
            ((q[0] * 3 + q[1] * 5 + q[2]) % 7) as f64 - 3.0
        });
        mg.add_boundary_values(&mut f, |d, s, x| 0.3 + d as f64 + s as f64 + x[0])?;
        let rep = mg.solve_pcg(c, &mut u, &f)?;
        assert!(rep.converged, "{rep:?}");
        let bits = u.owned_values(0).iter().map(|v| v.to_bits()).collect();
        Ok::<_, MgError>(((mg.owned(), bits), rep.iterations))
    })
    .unwrap();
    let its = out[0].1;
    (out.into_iter().map(|o| o.0).collect(), its)
}

/// The global field of the ranks' blocks.
fn whole(n: [usize; 3], parts: &[(IndexBox, Vec<u64>)]) -> Vec<u64> {
    let mut g = vec![u64::MAX; n[0] * n[1] * n[2]];
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
fn data_gives_the_bits_of_the_functions_on_any_rank_count() {
    let n = problem().shape;
    let (reference, its) = solve(1, false);
    let reference = whole(n, &reference);
    // On 2, 4 and 8 ranks the coarse levels (under 1024 cells a rank) are
    // gathered onto fewer ranks, and their coefficients move with them.
    for ranks in [1, 2, 4, 8] {
        let (parts, it) = solve(ranks, true);
        assert_eq!(it, its, "iterations on {ranks} ranks");
        assert!(
            whole(n, &parts) == reference,
            "data on {ranks} ranks differs from the functions on 1"
        );
    }
}

/// Runs `f` on 2 ranks and returns rank 0's and rank 1's errors.
fn build_err(f: impl Fn(usize, &Poisson, IndexBox) -> Coefficients + Sync) -> [String; 2] {
    let r = local::run(2, |c| {
        let p = problem();
        let grid = ProcessGrid::for_shape(p.shape, c.size(), p.periodic())?;
        let cells = Hierarchy::fine_block(p.shape, grid, c.rank())?;
        let data = f(c.rank(), &p, cells);
        match Hierarchy::with_coefficients(c, grid, &p, 3, MgOptions::default(), data) {
            Ok(_) => Ok::<_, MgError>("built".to_string()),
            Err(e) => Ok(e.to_string()),
        }
    })
    .unwrap();
    [r[0].clone(), r[1].clone()]
}

#[test]
fn bad_data_is_every_ranks_error() {
    // One rank's faces along axis 2 one value short.
    let e = build_err(|r, p, cells| {
        let mut faces = hand_faces(p, cells);
        if r == 1 {
            faces[2].pop();
        }
        Coefficients::constant().with_faces(faces)
    });
    for m in &e {
        assert!(
            m.contains("along axis 2 hold") && m.contains("faces along that axis"),
            "not named: {m}"
        );
    }
    // A shift on one rank only.
    let e = build_err(|r, p, cells| {
        let c = Coefficients::constant().with_faces(hand_faces(p, cells));
        if r == 1 {
            c.with_shift(hand_shift(cells))
        } else {
            c
        }
    });
    for m in &e {
        assert!(m.contains("different kinds"), "not named: {m}");
    }
    // A negative face value on rank 1 is named with its global index.
    let e = build_err(|r, p, cells| {
        let mut faces = hand_faces(p, cells);
        if r == 1 {
            faces[1][0] = -1.0;
        }
        Coefficients::constant().with_faces(faces)
    });
    for m in &e {
        assert!(
            m.contains("face coefficient -1 on axis 1"),
            "not named: {m}"
        );
    }
}

#[test]
fn functions_and_data_together_are_refused() {
    let r = local::run(1, |c| {
        let p = problem().with_shift(Arc::new(alpha));
        let grid = ProcessGrid::for_shape(p.shape, 1, p.periodic())?;
        let cells = Hierarchy::fine_block(p.shape, grid, 0)?;
        Ok::<_, MgError>(
            Hierarchy::with_coefficients(c, grid, &p, 3, MgOptions::default(), by_hand(&p, cells))
                .map(|_| ())
                .unwrap_err()
                .to_string(),
        )
    })
    .unwrap();
    assert!(r[0].contains("give them one way"), "{}", r[0]);
}
