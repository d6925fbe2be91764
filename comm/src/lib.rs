//! Communicators for parallel numerics: one trait, two backends, and the
//! bookkeeping every distributed mechanism needs.
//!
//! - [`Communicator`] (with typed helpers in [`CommExt`]): rank and size,
//!   barrier, [`split`](Communicator::split), tagged send/receive,
//!   alltoall(v), the strided all-to-all (A2AW, [`Strided`] layouts),
//!   allgather(v), broadcast and allreduce.
//! - [`scope()`]: non-blocking sends and receives that cannot outlive their
//!   buffers (the requests belong to the scope, which completes them before
//!   it returns); the raw, `unsafe` form is
//!   [`Communicator::isend_raw`] / [`irecv_raw`](Communicator::irecv_raw)
//!   for types that own both their buffers and their requests.
//! - [`Redistribution`]: the one engine that moves strided blocks between
//!   ranks (a `dfft` reshape, an `sht` transposition) by any [`Protocol`]
//!   (alltoall, alltoallv, alltoallw, point-to-point, pipelined), or the
//!   fastest of them measured on the real plan (`Auto`).
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
//!     let mine = [r as f64];
//!     comm::scope(c, |s| {
//!         s.irecv((r + p - 1) % p, 7, &mut got)?;
//!         s.isend((r + 1) % p, 7, &mine)?;
//!         Ok::<_, comm::CommError>(())
//!     })?;
//!     assert_eq!(got[0] as usize, (r + p - 1) % p);
//!     let total = comm::exact::allreduce_exact_sum(c, &[r as f64, 0.1])?;
//!     let max = c.allreduce_scalar(r as f64, ReduceOp::Max)?;
//!     Ok::<_, comm::CommError>((total, max))
//! })
//! .unwrap();
//! assert!(sums.iter().all(|&(t, m)| t == 6.4 && m == 3.0));
//! ```
#![warn(missing_docs)]

mod agree;
mod communicator;
mod error;
pub mod exact;
pub mod grid;
mod launcher;
pub mod local;
#[cfg(feature = "mpi")]
pub mod mpi;
mod redist;
mod scope;

pub use agree::{agree, Agreed};
pub use communicator::{
    as_bytes, as_bytes_mut, validate_peer, validate_tag, validate_v, wait_all, CommExt,
    Communicator, Elem, ReduceOp, Request, RequestImpl, Strided, MAX_USER_TAG,
};
pub use error::{CommError, Result};
pub use grid::{BlockDecomposition, IndexBox, ProcessGrid};
pub use launcher::{is_launched_by_mpirun, launcher_rank, launcher_world_size, LAUNCHER_VARS};
pub use redist::{Protocol, Redistribution, REDIST_TAG};
pub use scope::{scope, scope_in, Req, Scope, ScopeStore};

/// Whether this build has the MPI backend (feature `mpi`): [`launch`] runs
/// on the MPI world under `mpirun` only then.
pub const MPI_ENABLED: bool = cfg!(feature = "mpi");

/// Runs an application body `f` on every rank: on the MPI world when the
/// process was started by `mpirun` (feature `mpi`), else on `ranks`
/// in-process ranks. A build without the `mpi` feature that an MPI launcher
/// started as one of several processes returns an error saying how to build
/// with MPI, instead of running the whole job once per process. Returns rank 0's result in the process that holds rank
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
    #[cfg(not(feature = "mpi"))]
    if let Some(size) = launcher_world_size().filter(|&n| n > 1) {
        return Err(launcher::without_mpi_error(size));
    }
    let mut all = local::run(ranks, f).map_err(|e| e.reason)?;
    Ok(Some(all.swap_remove(0)))
}
