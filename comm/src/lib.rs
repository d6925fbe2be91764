//! Communicators for parallel numerics: one trait, two backends, and the
//! bookkeeping every distributed mechanism needs.
//!
//! - [`Communicator`] (with typed helpers in [`CommExt`]): rank and size,
//!   barrier, [`split`](Communicator::split), non-blocking tagged
//!   send/receive with [`wait_all`] / [`wait_any`](Communicator::wait_any),
//!   alltoall(v), the strided all-to-all (A2AW, [`Strided`] layouts),
//!   allgather(v), broadcast and allreduce.
//! - [`local`]: the default backend, N ranks as threads of one process with
//!   real message passing (matching by source and tag, non-blocking requests,
//!   collectives built from messages). A rank that panics or returns an
//!   error makes every other rank's communication fail with
//!   [`CommError::PeerFailed`] naming it: no hang.
//! - `mpi` (feature `mpi`): the same trait over rsmpi.
//! - [`grid`]: Cartesian process grids and block decompositions of a global
//!   index box.
//! - [`exact`]: an exact, order-independent f64 accumulator and the
//!   reduction built on it, so global sums have the same bits for any rank
//!   count.
//!
//! ```
//! use comm::{local, CommExt, Communicator, ReduceOp};
//!
//! // Four ranks pass their rank around a ring and sum it exactly.
//! let sums = local::run(4, |c| {
//!     let (r, p) = (c.rank(), c.size());
//!     let mut got = [0.0f64];
//!     let mut rx = c.irecv((r + p - 1) % p, 7, &mut got)?;
//!     c.send((r + 1) % p, 7, &[r as f64])?;
//!     rx.wait()?;
//!     drop(rx);
//!     assert_eq!(got[0] as usize, (r + p - 1) % p);
//!     let total = comm::exact::allreduce_exact_sum(c, &[r as f64, 0.1])?;
//!     let max = c.allreduce_scalar(r as f64, ReduceOp::Max)?;
//!     Ok::<_, comm::CommError>((total, max))
//! })
//! .unwrap();
//! assert!(sums.iter().all(|&(t, m)| t == 6.4 && m == 3.0));
//! ```
#![warn(missing_docs)]

mod communicator;
mod error;
pub mod exact;
pub mod grid;
pub mod local;
#[cfg(feature = "mpi")]
pub mod mpi;

pub use communicator::{
    as_bytes, as_bytes_mut, validate_peer, validate_tag, validate_v, wait_all, CommExt,
    Communicator, Elem, ReduceOp, Request, RequestImpl, Strided, MAX_USER_TAG,
};
pub use error::{CommError, Result};
pub use grid::{BlockDecomposition, IndexBox, ProcessGrid};

/// Runs an application body `f` on every rank: on the MPI world when the
/// process was started by `mpirun` (feature `mpi`), else on `ranks`
/// in-process ranks. Returns rank 0's result in the process that holds rank
/// 0 (`Some`) and `None` in the other MPI processes, or the first failure as
/// text (the in-process backend names the failed rank; under MPI a failed
/// rank prints its error and aborts the job, see `mpi::run`).
///
/// ```
/// let r = comm::launch(3, |c| Ok::<_, String>(c.size())).unwrap();
/// assert_eq!(r, Some(3));
/// ```
pub fn launch<R, E, F>(ranks: usize, f: F) -> std::result::Result<Option<R>, String>
where
    R: Send,
    E: std::fmt::Display,
    F: Fn(&dyn Communicator) -> std::result::Result<R, E> + Sync,
{
    #[cfg(feature = "mpi")]
    if mpi::is_launched_by_mpirun() {
        let (rank, r) = mpi::run(|c| f(c).map(|r| (c.rank(), r)))?;
        return Ok((rank == 0).then_some(r));
    }
    let mut all = local::run(ranks, f).map_err(|e| e.reason)?;
    Ok(Some(all.swap_remove(0)))
}
