//! A rank that fails (returns an error or panics) before posting a halo
//! exchange, or between `Exchanger::post` and `Pending::finish`, makes every
//! other rank fail with `CommError::PeerFailed` naming it, in bounded time,
//! under the in-process backend (`comm::local::run`).
//!
//! Time bound: the in-process backend reports a receive that waits too long
//! as `CommError::Timeout` after 300 s by default (`COMM_TIMEOUT_SECS`, which
//! these tests must not set: tests run in parallel threads of one process).
//! A run that returns in under 20 s with `PeerFailed` on every surviving rank
//! therefore cannot have been rescued by the deadlock timeout: the failure
//! was propagated, not waited out. (The work itself takes milliseconds; 20 s
//! leaves room for a loaded 2-core machine.)

use comm::{local, BlockDecomposition, CommError, CommExt, ProcessGrid, ReduceOp};
use halo::{Exchanger, Field, HaloError, HaloSpec, Neighborhood, Topology};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Well below the 300 s deadlock timeout; see the module comment.
const BOUND: Duration = Duration::from_secs(20);
const STEPS: usize = 6;
/// The step at which the failing rank fails.
const FAIL_STEP: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq)]
enum When {
    /// Before posting the exchange of `FAIL_STEP`.
    BeforePost,
    /// After `post`, before `finish` (the `Pending` is dropped unfinished).
    BetweenPostAndFinish,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum How {
    Error,
    Panic,
}

/// Where a surviving rank saw the failure (ordered as in a step).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Exchange,
    Reduction,
}

/// Per rank: the step, the stage and the error it failed with.
type Seen = Vec<Option<(usize, Stage, HaloError)>>;

fn fail(how: How, rank: usize) -> HaloError {
    match how {
        How::Error => HaloError::Invalid(format!("injected failure on rank {rank}")),
        How::Panic => panic!("injected panic on rank {rank}"),
    }
}

/// `STEPS` time steps of (halo exchange, global sum) on `grid`; rank
/// `failed` fails at `FAIL_STEP` as told. Returns the time taken and every
/// surviving rank's error with where it came from.
fn run_case(
    dims: [usize; 3],
    neighborhood: Neighborhood,
    failed: usize,
    when: When,
    how: How,
) -> (Duration, local::RunError, Seen) {
    let grid = ProcessGrid::new(dims, [true; 3]).unwrap();
    let n = grid.size();
    let dec = BlockDecomposition::new([8, 8, 8], grid).unwrap();
    let seen: Mutex<Seen> = Mutex::new(vec![None; n]);
    let t = Instant::now();
    let res = local::run(n, |comm| {
        let me = comm.rank();
        let record = |step, stage, e: HaloError| {
            seen.lock().unwrap()[me] = Some((step, stage, e.clone()));
            e
        };
        let topo = Topology::new(comm, &dec, HaloSpec::uniform(1, neighborhood))?;
        let mut u = Field::<f64>::new(topo.layout(2));
        let mut ex = Exchanger::new(&topo, 2, 0)?;
        for step in 0..STEPS {
            u.fill_owned(0, &topo.owned(), |[i, j, k]| (i + j + k + step) as f64);
            if me == failed && step == FAIL_STEP {
                match when {
                    When::BeforePost => return Err(fail(how, me)),
                    When::BetweenPostAndFinish => {
                        let pending = ex.post(comm, &mut [&mut u])?;
                        let e = fail(how, me);
                        drop(pending);
                        return Err(e);
                    }
                }
            }
            ex.exchange(comm, &mut [&mut u])
                .map_err(|e| record(step, Stage::Exchange, e))?;
            let local: f64 = u.owned_values(0).iter().sum();
            comm.allreduce_scalar(local, ReduceOp::Sum)
                .map_err(|e| record(step, Stage::Reduction, e.into()))?;
        }
        Ok::<_, HaloError>(())
    });
    let elapsed = t.elapsed();
    let err = res.expect_err("a rank failed, so the run fails");
    (elapsed, err, seen.into_inner().unwrap())
}

fn check(dims: [usize; 3], neighborhood: Neighborhood, failed: usize, when: When, how: How) {
    let (elapsed, err, seen) = run_case(dims, neighborhood, failed, when, how);
    assert!(
        elapsed < BOUND,
        "took {elapsed:?}: the failure was waited out, not propagated"
    );
    assert_eq!(err.rank, failed, "{err}");
    assert!(err.reason.contains("injected"), "{}", err.reason);
    let grid = ProcessGrid::new(dims, [true; 3]).unwrap();
    for (r, s) in seen.iter().enumerate() {
        if r == failed {
            assert!(s.is_none(), "the failed rank recorded {s:?}");
            continue;
        }
        let (step, stage, e) = s
            .as_ref()
            .unwrap_or_else(|| panic!("rank {r} did not fail: {err:?}"));
        assert!(
            matches!(e, HaloError::Comm(CommError::PeerFailed { rank, reason })
                if *rank == failed && reason.contains("injected")),
            "rank {r}: {e:?}"
        );
        assert!(err.ranks[r]
            .as_ref()
            .unwrap()
            .contains(&format!("rank {failed} failed")));
        // A face neighbour of a rank that never posted cannot complete that
        // exchange (its ghosts would be missing), so it must have failed in
        // it or earlier. (Earlier is possible: the in-process backend fails
        // every later receive, even one whose message had already arrived,
        // such as the broadcast of the previous step's sum.)
        let neighbour = (0..3).any(|d| {
            let mut o = [0; 3];
            o[d] = 1;
            grid.neighbor(r, o) == Some(failed) || {
                o[d] = -1;
                grid.neighbor(r, o) == Some(failed)
            }
        });
        if when == When::BeforePost && neighbour {
            assert!(
                (*step, *stage) <= (FAIL_STEP, Stage::Exchange),
                "rank {r} completed the exchange of step {FAIL_STEP}: failed at {step} {stage:?}"
            );
        }
    }
}

#[test]
fn error_before_post() {
    // 2 x 2 x 1 periodic: rank 3 is no face neighbour of rank 0, so it
    // learns of the failure only through the reduction.
    check(
        [2, 2, 1],
        Neighborhood::Faces,
        0,
        When::BeforePost,
        How::Error,
    );
    check(
        [2, 2, 1],
        Neighborhood::Faces,
        3,
        When::BeforePost,
        How::Error,
    );
}

#[test]
fn error_between_post_and_finish() {
    check(
        [2, 2, 1],
        Neighborhood::Faces,
        1,
        When::BetweenPostAndFinish,
        How::Error,
    );
    check(
        [1, 2, 3],
        Neighborhood::Full,
        4,
        When::BetweenPostAndFinish,
        How::Error,
    );
}

#[test]
fn panic_before_post() {
    check(
        [1, 2, 3],
        Neighborhood::Full,
        2,
        When::BeforePost,
        How::Panic,
    );
}

#[test]
fn panic_between_post_and_finish() {
    check(
        [2, 2, 1],
        Neighborhood::Faces,
        0,
        When::BetweenPostAndFinish,
        How::Panic,
    );
    check(
        [1, 1, 4],
        Neighborhood::Faces,
        2,
        When::BetweenPostAndFinish,
        How::Panic,
    );
}
