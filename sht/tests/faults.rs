//! A rank that fails (returns an error or panics) in the middle of a
//! distributed spherical harmonic transform (`DistSht`: the theta
//! transposition inside synthesis and analysis, the `l` transposition of
//! `to_lm` / `from_lm`) makes every other rank fail with
//! `CommError::PeerFailed` naming it (wrapped in `DistError::Comm`), in
//! bounded time, under the in-process backend (`comm::local::run`).
//!
//! Time bound: the in-process backend reports a receive that waits too long
//! as `CommError::Timeout` after 300 s by default (`COMM_TIMEOUT_SECS`, which
//! these tests must not set: tests run in parallel threads of one process).
//! A run that returns in under 20 s with `PeerFailed` on every surviving rank
//! cannot have been rescued by that timeout: the failure was propagated, not
//! waited out. (The work itself takes milliseconds; 20 s leaves room for a
//! loaded 2-core machine.)

use comm::{local, CommError, CommExt, ReduceOp};
use num_complex::Complex64;
use sht::{DistConfig, DistError, DistSht, Protocol};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Well below the 300 s deadlock timeout; see the module comment.
const BOUND: Duration = Duration::from_secs(20);
const STEPS: usize = 4;
/// The step at which the failing rank fails.
const FAIL_STEP: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// Returns an error instead of calling `synthesis`: its theta peers
    /// wait in the theta transposition.
    ErrorBeforeSynthesis,
    /// Calls `synthesis` with a grid buffer one value short: the library
    /// itself returns an error on that rank only.
    BadGridBuffer,
    /// Panics instead of calling `to_lm`: its radial peers wait in the `l`
    /// transposition.
    PanicBeforeToLm,
    /// Returns an error between `to_lm` and `from_lm`.
    ErrorBetweenToLmAndFromLm,
}

/// Where a surviving rank saw the failure, in the order of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Synthesis,
    Analysis,
    ToLm,
    FromLm,
    Reduction,
}

type Seen = Vec<Option<(usize, Stage, DistError)>>;

fn injected(rank: usize) -> DistError {
    DistError::Invalid(format!("injected failure on rank {rank}"))
}

/// `STEPS` steps of (synthesis, analysis, to_lm, from_lm, global sum) on a
/// `pi_r x pi_theta` grid; rank `failed` fails at `FAIL_STEP` as told.
fn run_case(
    pi_r: usize,
    pi_theta: usize,
    alg: Protocol,
    failed: usize,
    fault: Fault,
) -> (Duration, local::RunError, Seen) {
    let n = pi_r * pi_theta;
    let cfg = DistConfig {
        theta_protocol: alg,
        l_protocol: alg,
        ..DistConfig::new(12, 4, pi_r, pi_theta)
    };
    let seen: Mutex<Seen> = Mutex::new(vec![None; n]);
    let t = Instant::now();
    let res = local::run(n, |comm| {
        let me = comm.rank();
        let record = |step: usize, stage: Stage, e: DistError| {
            seen.lock().unwrap()[me] = Some((step, stage, e.clone()));
            e
        };
        let mut d = DistSht::new(comm, &cfg)?;
        let mut coeffs: Vec<Complex64> = (0..d.level_len())
            .map(|i| Complex64::new(1.0 / (1 + i) as f64, 0.0))
            .collect();
        let mut grid = vec![0.0; d.grid_len()];
        let mut lm = vec![Complex64::default(); d.lm_len()];
        for step in 0..STEPS {
            let fail_now = me == failed && step == FAIL_STEP;
            if fail_now && fault == Fault::ErrorBeforeSynthesis {
                return Err(injected(me));
            }
            if fail_now && fault == Fault::BadGridBuffer {
                let n = grid.len() - 1;
                let e = d
                    .synthesis(&coeffs, &mut grid[..n])
                    .expect_err("a short grid buffer is an error");
                return Err(e);
            }
            d.synthesis(&coeffs, &mut grid)
                .map_err(|e| record(step, Stage::Synthesis, e))?;
            d.analysis(&grid, &mut coeffs)
                .map_err(|e| record(step, Stage::Analysis, e))?;
            if fail_now && fault == Fault::PanicBeforeToLm {
                panic!("injected panic on rank {me}");
            }
            d.to_lm(&coeffs, &mut lm)
                .map_err(|e| record(step, Stage::ToLm, e))?;
            if fail_now && fault == Fault::ErrorBetweenToLmAndFromLm {
                return Err(injected(me));
            }
            d.from_lm(&lm, &mut coeffs)
                .map_err(|e| record(step, Stage::FromLm, e))?;
            let local: f64 = coeffs.iter().map(|c| c.re).sum();
            comm.allreduce_scalar(local, ReduceOp::Sum)
                .map_err(|e| record(step, Stage::Reduction, e.into()))?;
        }
        Ok::<_, DistError>(())
    });
    let elapsed = t.elapsed();
    (
        elapsed,
        res.expect_err("a rank failed, so the run fails"),
        seen.into_inner().unwrap(),
    )
}

fn check(pi_r: usize, pi_theta: usize, alg: Protocol, failed: usize, fault: Fault) {
    let (elapsed, err, seen) = run_case(pi_r, pi_theta, alg, failed, fault);
    assert!(
        elapsed < BOUND,
        "took {elapsed:?}: the failure was waited out, not propagated"
    );
    assert_eq!(err.rank, failed, "{err}");
    if fault == Fault::BadGridBuffer {
        assert!(err.reason.contains("grid"), "{}", err.reason);
    } else {
        assert!(err.reason.contains("injected"), "{}", err.reason);
    }
    // Rank (ir, it) is ir * pi_theta + it.
    let (fr, ft) = (failed / pi_theta, failed % pi_theta);
    for (r, s) in seen.iter().enumerate() {
        if r == failed {
            assert!(s.is_none(), "the failed rank recorded {s:?}");
            continue;
        }
        let (step, stage, e) = s
            .as_ref()
            .unwrap_or_else(|| panic!("rank {r} did not fail: {err:?}"));
        assert!(
            matches!(e, DistError::Comm(CommError::PeerFailed { rank, .. }) if *rank == failed),
            "{alg:?} {fault:?}: rank {r}: {e:?}"
        );
        // A peer of the failed rank in the transposition it skipped cannot
        // complete that transposition: it failed there or earlier (earlier
        // is possible: the in-process backend fails every later receive,
        // even one whose message has already arrived).
        let (ir, it) = (r / pi_theta, r % pi_theta);
        let limit = match fault {
            // Theta peers share the level block (same ir).
            Fault::ErrorBeforeSynthesis | Fault::BadGridBuffer if ir == fr && pi_theta > 1 => {
                Some(Stage::Synthesis)
            }
            // Radial peers share the theta block (same it).
            Fault::PanicBeforeToLm if it == ft && pi_r > 1 => Some(Stage::ToLm),
            _ => None,
        };
        if let Some(limit) = limit {
            assert!(
                (*step, *stage) <= (FAIL_STEP, limit),
                "{fault:?}: rank {r} got past {limit:?} of step {FAIL_STEP}: failed at {step} {stage:?}"
            );
        }
    }
}

#[test]
fn error_in_the_theta_transposition() {
    check(2, 2, Protocol::P2p, 1, Fault::ErrorBeforeSynthesis);
    check(1, 3, Protocol::Alltoallw, 0, Fault::ErrorBeforeSynthesis);
}

#[test]
fn library_error_in_synthesis() {
    check(2, 2, Protocol::Alltoallv, 2, Fault::BadGridBuffer);
    check(1, 4, Protocol::Alltoall, 3, Fault::BadGridBuffer);
}

#[test]
fn panic_in_the_l_transposition() {
    check(2, 2, Protocol::Alltoall, 3, Fault::PanicBeforeToLm);
    // The 1d scheme: the l transposition is the only communication.
    check(3, 1, Protocol::P2p, 1, Fault::PanicBeforeToLm);
}

#[test]
fn error_between_the_l_transpositions() {
    check(
        2,
        2,
        Protocol::Alltoallw,
        0,
        Fault::ErrorBetweenToLmAndFromLm,
    );
    check(
        4,
        1,
        Protocol::Alltoallv,
        2,
        Fault::ErrorBetweenToLmAndFromLm,
    );
}
