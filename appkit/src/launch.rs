//! The `main` of an application: run the body on every rank through
//! [`comm::launch`] (the MPI world under `mpirun` with feature `mpi`, else
//! in-process ranks), keep rank 0's result, print a failure and turn it into
//! the exit status.
//!
//! ```no_run
//! use std::process::ExitCode;
//!
//! fn real_main() -> Result<(), String> {
//!     let steps = 10;
//!     if let Some(sum) = appkit::launch::launch("demo", Some(2), |c| {
//!         Ok::<_, String>(c.size() * steps)
//!     })
//!     .map_err(|e| e.to_string())?
//!     {
//!         println!("{sum}");
//!     }
//!     Ok(())
//! }
//!
//! fn main() -> ExitCode {
//!     appkit::launch::exit_code(real_main())
//! }
//! ```

use comm::Communicator;
use std::fmt::Display;
use std::process::ExitCode;

/// Why a launch did not produce rank 0's result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// `--ranks 0`.
    #[error("--ranks must be at least 1, got 0")]
    NoRanks,
    /// A rank returned an error or panicked; `reason` is its message (the
    /// in-process backend names the rank).
    #[error("{app} failed: {reason}")]
    Failed {
        /// The application's name.
        app: String,
        /// The first failure.
        reason: String,
    },
}

/// Runs `body` on every rank: on the MPI world when the process was started
/// by `mpirun` (feature `mpi` of `comm`), else on `ranks` in-process ranks
/// (default: one per core, [`comm::local::default_ranks`]). Returns rank
/// 0's result in the process that holds rank 0 and `None` in the other MPI
/// processes. A rank's error is kept with its whole chain (`{:#}`, so an
/// `anyhow` error keeps its context) in [`LaunchError::Failed`].
pub fn launch<R, E, F>(app: &str, ranks: Option<usize>, body: F) -> Result<Option<R>, LaunchError>
where
    R: Send,
    E: Display,
    F: Fn(&dyn Communicator) -> Result<R, E> + Sync,
{
    let ranks = ranks.unwrap_or_else(comm::local::default_ranks);
    if ranks == 0 {
        return Err(LaunchError::NoRanks);
    }
    comm::launch(ranks, |c| body(c).map_err(|e| format!("{e:#}"))).map_err(|reason| {
        LaunchError::Failed {
            app: app.to_string(),
            reason,
        }
    })
}

/// The exit status of a `main`: success, or `error: {e:#}` on stderr and
/// failure.
pub fn exit_code<E: Display>(result: Result<(), E>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_zero_result_and_named_failures() {
        let r = launch("demo", Some(3), |c| {
            Ok::<_, String>(c.rank() + 10 * c.size())
        });
        assert_eq!(r, Ok(Some(30)));
        assert_eq!(
            launch("demo", Some(0), |_| Ok::<_, String>(())),
            Err(LaunchError::NoRanks)
        );
        let e = launch("demo", Some(2), |c| {
            if c.rank() == 1 {
                Err("no convergence at step 4".to_string())
            } else {
                c.barrier().map_err(|e| e.to_string())
            }
        })
        .unwrap_err();
        let m = e.to_string();
        assert!(
            m.starts_with("demo failed: ") && m.contains("no convergence at step 4"),
            "{m}"
        );
    }

    #[test]
    fn exit_codes() {
        assert_eq!(exit_code::<String>(Ok(())), ExitCode::SUCCESS);
        assert_eq!(exit_code(Err("bad")), ExitCode::FAILURE);
    }
}
