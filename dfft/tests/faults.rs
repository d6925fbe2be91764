//! A rank that fails (returns an error or panics) in the middle of a
//! distributed FFT or reshape makes every other rank fail with
//! `CommError::PeerFailed` naming it (wrapped in `FftError::Comm`), in
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
use dfft::{Fft3d, FftError, Layout, Options, Protocol, Reshape};
use num_complex::Complex64;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Well below the 300 s deadlock timeout; see the module comment.
const BOUND: Duration = Duration::from_secs(20);
const STEPS: usize = 5;
/// The step at which the failing rank fails.
const FAIL_STEP: usize = 2;
const RANKS: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// Returns an error before calling the transform.
    ErrorBefore,
    /// Calls the transform with a scratch buffer one element short: the
    /// library itself returns `FftError::LengthMismatch` on that rank only.
    BadScratch,
    /// Panics between the two reshapes of a reshape chain.
    PanicBetweenReshapes,
    /// Returns an error between the forward and the backward transform.
    ErrorBetweenForwardAndBackward,
}

type Seen = Vec<Option<FftError>>;

fn injected(rank: usize) -> FftError {
    FftError::Invalid(format!("injected failure on rank {rank}"))
}

/// `STEPS` steps of (forward FFT, reshape chain, backward FFT, global sum)
/// on `RANKS` ranks; rank `failed` fails at `FAIL_STEP` as told.
fn run_case(proto: Protocol, failed: usize, fault: Fault) -> (Duration, local::RunError, Seen) {
    let g = [8, 6, 5];
    let seen: Mutex<Seen> = Mutex::new(vec![None; RANKS]);
    let t = Instant::now();
    let res = local::run(RANKS, |comm| {
        let me = comm.rank();
        let record = |e: FftError| {
            seen.lock().unwrap()[me] = Some(e.clone());
            e
        };
        let bricks = Layout::bricks(g, RANKS)?;
        let zpen = Layout::pencils(g, RANKS, 2)?;
        let xslab = Layout::slabs(g, RANKS, 0)?;
        let opts = Options {
            protocol: proto,
            ..Options::default()
        };
        let mut fft = Fft3d::c2c(comm, &bricks, opts)?;
        let mut r1 = Reshape::<Complex64>::new(comm, &bricks, &zpen, 1, proto)?;
        let mut r2 = Reshape::<Complex64>::new(comm, &zpen, &xslab, 1, proto)?;
        let x: Vec<Complex64> = (0..fft.input_len())
            .map(|i| Complex64::new(i as f64, me as f64))
            .collect();
        let mut y = vec![Complex64::default(); fft.output_len()];
        let mut z = vec![Complex64::default(); fft.input_len()];
        let mut mid = vec![Complex64::default(); r1.output_len()];
        let mut end = vec![Complex64::default(); r2.output_len()];
        let mut scratch = vec![Complex64::default(); fft.scratch_len()];
        for step in 0..STEPS {
            let fail_now = me == failed && step == FAIL_STEP;
            if fail_now && fault == Fault::ErrorBefore {
                return Err(injected(me));
            }
            let s = if fail_now && fault == Fault::BadScratch {
                let n = scratch.len() - 1;
                &mut scratch[..n]
            } else {
                &mut scratch[..]
            };
            let r = fft.forward(comm, &x, &mut y, s);
            if fail_now && fault == Fault::BadScratch {
                // The library refuses the buffer on this rank alone.
                let e = r.expect_err("a short scratch buffer is an error");
                assert!(matches!(e, FftError::LengthMismatch { .. }), "{e:?}");
                return Err(e);
            }
            r.map_err(record)?;
            r1.execute(comm, &x, &mut mid).map_err(record)?;
            if fail_now && fault == Fault::PanicBetweenReshapes {
                panic!("injected panic on rank {me}");
            }
            r2.execute(comm, &mid, &mut end).map_err(record)?;
            if fail_now && fault == Fault::ErrorBetweenForwardAndBackward {
                return Err(injected(me));
            }
            fft.backward(comm, &y, &mut z, &mut scratch)
                .map_err(record)?;
            let local: f64 = end.iter().map(|v| v.re).sum::<f64>() + z[0].re;
            comm.allreduce_scalar(local, ReduceOp::Sum)
                .map_err(|e| record(e.into()))?;
        }
        Ok::<_, FftError>(())
    });
    let elapsed = t.elapsed();
    (
        elapsed,
        res.expect_err("a rank failed, so the run fails"),
        seen.into_inner().unwrap(),
    )
}

fn check(proto: Protocol, failed: usize, fault: Fault) {
    let (elapsed, err, seen) = run_case(proto, failed, fault);
    assert!(
        elapsed < BOUND,
        "took {elapsed:?}: the failure was waited out, not propagated"
    );
    assert_eq!(err.rank, failed, "{err}");
    match fault {
        Fault::BadScratch => assert!(err.reason.contains("scratch"), "{}", err.reason),
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
        assert!(
            matches!(e, FftError::Comm(CommError::PeerFailed { rank, .. }) if *rank == failed),
            "{proto:?} {fault:?}: rank {r}: {e:?}"
        );
    }
}

#[test]
fn error_before_a_transform_every_protocol() {
    for proto in Protocol::ALL {
        check(proto, 1, Fault::ErrorBefore);
    }
}

#[test]
fn library_error_inside_a_transform() {
    check(Protocol::Alltoallv, 0, Fault::BadScratch);
    check(Protocol::P2p, 3, Fault::BadScratch);
}

#[test]
fn panic_between_reshapes() {
    check(Protocol::P2pPipelined, 2, Fault::PanicBetweenReshapes);
    check(Protocol::Alltoall, 0, Fault::PanicBetweenReshapes);
}

#[test]
fn error_between_forward_and_backward() {
    check(Protocol::P2p, 3, Fault::ErrorBetweenForwardAndBackward);
    check(
        Protocol::Alltoallv,
        1,
        Fault::ErrorBetweenForwardAndBackward,
    );
}
