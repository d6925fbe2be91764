//! A rank that fails (returns an error or panics) in the middle of a
//! multigrid solve makes every other rank fail with `CommError::PeerFailed`
//! naming it (wrapped in `MgError::Comm` or `MgError::Halo`), in bounded
//! time, under the in-process backend (`comm::local::run`), with and without
//! coarse levels agglomerated onto fewer ranks.
//!
//! Time bound: the in-process backend reports a receive that waits too long
//! as `CommError::Timeout` after 300 s by default (`COMM_TIMEOUT_SECS`, which
//! these tests must not set: tests run in parallel threads of one process).
//! A run that returns in under 20 s with `PeerFailed` on every surviving rank
//! cannot have been rescued by that timeout: the failure was propagated, not
//! waited out. (The work itself takes well under a second; 20 s leaves room
//! for a loaded 2-core machine.)

use comm::{local, CommError, CommExt, ProcessGrid, ReduceOp};
use halo::{Field, HaloError};
use multigrid::{Boundary, Hierarchy, MgError, MgOptions, Poisson};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Well below the 300 s deadlock timeout; see the module comment.
const BOUND: Duration = Duration::from_secs(20);
const STEPS: usize = 4;
/// The step at which the failing rank fails.
const FAIL_STEP: usize = 2;
const RANKS: usize = 4;
const N: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// Returns an error instead of the V-cycle of `FAIL_STEP`.
    ErrorBeforeVcycle,
    /// Panics instead of the V-cycle of `FAIL_STEP`.
    PanicBeforeVcycle,
    /// Calls `solve_pcg` with a field of the wrong layout: the library
    /// itself returns an error on that rank only, while the others are in
    /// the solve.
    BadField,
    /// Leaves `solve_mg` after 2 cycles (its iteration limit, the others
    /// have 50) and fails: the others are in the middle of their solve.
    LeavesSolveEarly,
}

type Seen = Vec<Option<MgError>>;

fn peer_failed(e: &MgError) -> Option<usize> {
    match e {
        MgError::Comm(CommError::PeerFailed { rank, .. })
        | MgError::Halo(HaloError::Comm(CommError::PeerFailed { rank, .. })) => Some(*rank),
        _ => None,
    }
}

/// `STEPS` steps of (V-cycle or solve, global sum) on `RANKS` ranks; rank
/// `failed` fails at `FAIL_STEP` as told. `agglomerate_below` 512 gathers
/// every coarse level of 16^3 onto fewer ranks, 0 none of them.
fn run_case(below: usize, failed: usize, fault: Fault) -> (Duration, local::RunError, Seen, usize) {
    let seen: Mutex<Seen> = Mutex::new(vec![None; RANKS]);
    let coarse_ranks = Mutex::new(0);
    let t = Instant::now();
    let res = local::run(RANKS, |comm| {
        let me = comm.rank();
        let record = |e: MgError| {
            seen.lock().unwrap()[me] = Some(e.clone());
            e
        };
        let problem = Poisson::new([N; 3], [1.0; 3], [Boundary::Dirichlet; 3])?;
        let grid = ProcessGrid::for_shape([N; 3], RANKS, problem.periodic())?;
        let opts = MgOptions {
            agglomerate_below: below,
            tol: 1e-14,
            max_iter: 50,
            ..MgOptions::default()
        };
        let mut mg = Hierarchy::new(comm, grid, &problem, 4, opts)?;
        *coarse_ranks.lock().unwrap() = mg.level_ranks()[1];
        let mut f = mg.new_field();
        f.fill_owned(0, &mg.owned(), |[i, j, k]| ((i * 7 + j * 3 + k) % 5) as f64);
        let mut u = mg.new_field();
        for step in 0..STEPS {
            let fail_now = me == failed && step == FAIL_STEP;
            match fault {
                Fault::ErrorBeforeVcycle if fail_now => {
                    return Err(MgError::Invalid(format!("injected failure on rank {me}")));
                }
                Fault::PanicBeforeVcycle if fail_now => panic!("injected panic on rank {me}"),
                Fault::ErrorBeforeVcycle | Fault::PanicBeforeVcycle => {
                    mg.vcycle(comm, &mut u, &f).map_err(record)?;
                }
                Fault::BadField => {
                    let mut v = if fail_now {
                        Field::<f64>::new(halo::FieldLayout {
                            components: 2,
                            ..mg.layout()
                        })
                    } else {
                        mg.new_field()
                    };
                    let r = mg.solve_pcg(comm, &mut v, &f);
                    if fail_now {
                        let e = r.expect_err("a field of the wrong layout is an error");
                        assert!(matches!(e, MgError::Invalid(_)), "{e:?}");
                        return Err(e);
                    }
                    r.map_err(record)?;
                }
                Fault::LeavesSolveEarly => {
                    if fail_now {
                        mg.set_options(MgOptions {
                            max_iter: 2,
                            ..opts
                        })?;
                    }
                    let mut v = mg.new_field();
                    let rep = mg.solve_mg(comm, &mut v, &f).map_err(record)?;
                    if fail_now {
                        assert!(!rep.converged && rep.iterations == 2, "{rep:?}");
                        return Err(MgError::Invalid(format!(
                            "injected failure on rank {me}: not converged in 2 cycles"
                        )));
                    }
                }
            }
            let local: f64 = u.owned_values(0).iter().sum();
            comm.allreduce_scalar(local, ReduceOp::Sum)
                .map_err(|e| record(e.into()))?;
        }
        Ok::<_, MgError>(())
    });
    let elapsed = t.elapsed();
    (
        elapsed,
        res.expect_err("a rank failed, so the run fails"),
        seen.into_inner().unwrap(),
        coarse_ranks.into_inner().unwrap(),
    )
}

fn check(below: usize, failed: usize, fault: Fault) {
    let (elapsed, err, seen, coarse) = run_case(below, failed, fault);
    assert!(
        elapsed < BOUND,
        "took {elapsed:?}: the failure was waited out, not propagated"
    );
    // The setting under test: agglomerated coarse levels or not.
    if below == 0 {
        assert_eq!(coarse, RANKS);
    } else {
        assert!(coarse < RANKS, "level 1 on {coarse} ranks");
    }
    assert_eq!(err.rank, failed, "{err}");
    match fault {
        Fault::BadField => assert!(err.reason.contains("layout"), "{}", err.reason),
        _ => assert!(err.reason.contains("injected"), "{}", err.reason),
    }
    for (r, e) in seen.iter().enumerate() {
        if r == failed {
            assert!(e.is_none(), "the failed rank recorded {e:?}");
            continue;
        }
        let e = e
            .as_ref()
            .unwrap_or_else(|| panic!("rank {r} did not fail: {err:?}"));
        assert_eq!(peer_failed(e), Some(failed), "{fault:?}: rank {r}: {e:?}");
    }
}

#[test]
fn error_before_a_vcycle() {
    check(0, 2, Fault::ErrorBeforeVcycle);
    // Rank 3 holds no agglomerated coarse level; rank 0 gathers them.
    check(512, 3, Fault::ErrorBeforeVcycle);
    check(512, 0, Fault::ErrorBeforeVcycle);
}

#[test]
fn panic_before_a_vcycle() {
    check(0, 1, Fault::PanicBeforeVcycle);
    check(512, 0, Fault::PanicBeforeVcycle);
}

#[test]
fn library_error_at_the_start_of_a_pcg_solve() {
    check(512, 1, Fault::BadField);
    check(0, 3, Fault::BadField);
}

#[test]
fn rank_leaving_a_solve_midway() {
    check(512, 2, Fault::LeavesSolveEarly);
    check(0, 0, Fault::LeavesSolveEarly);
}

/// A NaN in the right-hand side, or an infinity in the initial guess, stops
/// every rank with `NotFinite`, naming the first such cell of the whole
/// grid (not only of the rank that holds it), before any cycle.
#[test]
fn a_non_finite_value_stops_every_rank_with_its_cell() {
    let p = Poisson::new([N; 3], [1.0; 3], [Boundary::Dirichlet; 3]).unwrap();
    let bad = [11, 5, 7];
    for ranks in [1, 2, 4] {
        for solver in ["pcg", "mg"] {
            let out = local::run(ranks, |c| {
                let grid = ProcessGrid::for_shape(p.shape, c.size(), p.periodic())?;
                let mut h = Hierarchy::new(c, grid, &p, 3, MgOptions::default())?;
                let owned = h.owned();
                let solve = |h: &mut Hierarchy, u: &mut Field, f: &Field| match solver {
                    "pcg" => h.solve_pcg(c, u, f),
                    _ => h.solve_mg(c, u, f),
                };
                // NaN in f at `bad`.
                let mut f = h.new_field();
                f.fill_owned(0, &owned, |q| if q == bad { f64::NAN } else { 1.0 });
                let mut u = h.new_field();
                let e1 = solve(&mut h, &mut u, &f).unwrap_err();
                // +inf in u at `bad`: the residual is not finite there and
                // at its six neighbours, of which [10, 5, 7] comes first.
                f.fill_owned(0, &owned, |_| 1.0);
                u.fill_owned(0, &owned, |q| if q == bad { f64::INFINITY } else { 0.0 });
                let e2 = solve(&mut h, &mut u, &f).unwrap_err();
                Ok::<_, MgError>((e1, e2))
            })
            .unwrap();
            for (rank, (e1, e2)) in out.iter().enumerate() {
                let at = format!("{solver}, {ranks} ranks, rank {rank}");
                assert!(
                    matches!(e1, MgError::NotFinite { what: "the right-hand side", cell, iteration: 0 } if *cell == Some(bad)),
                    "{at}: {e1}"
                );
                assert!(
                    matches!(
                        e2,
                        MgError::NotFinite {
                            what: "the residual",
                            cell: Some([10, 5, 7]),
                            iteration: 0
                        }
                    ),
                    "{at}: {e2}"
                );
                assert!(e1.to_string().contains("[11, 5, 7]"), "{e1}");
            }
        }
    }
}
