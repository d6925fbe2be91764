//! One outcome on every rank of a step that each rank took on its own.
//!
//! A collective code that validates or builds something rank by rank (the
//! coefficients of its own cells, a factorisation that only some ranks
//! hold) must not let one rank fail while the others go on into the next
//! collective call and wait there. [`agree`] turns the ranks' separate
//! outcomes into one: success everywhere, or every rank failing with the
//! message of the lowest rank that failed.
//!
//! ```
//! let got = comm::local::run(3, |c| {
//!     let mine: Result<(), String> = match c.rank() {
//!         0 => Ok(()),
//!         r => Err(format!("bad value in rank {r}'s cells")),
//!     };
//!     Ok::<_, comm::CommError>(comm::agree(c, mine).map_err(|e| e.to_string()))
//! })
//! .unwrap();
//! for r in got {
//!     assert_eq!(r, Err("bad value in rank 1's cells".to_string()));
//! }
//! ```

use crate::{CommError, Communicator, ReduceOp};
use std::fmt::Display;

/// Why [`agree`] did not return `Ok`: the three cases are the whole set (a
/// caller matches them exhaustively).
#[derive(Debug, thiserror::Error)]
pub enum Agreed<E> {
    /// This rank's own error: it was the lowest rank that failed.
    #[error("{0}")]
    Mine(E),
    /// The error of the lowest rank that failed, as its message.
    #[error("{message}")]
    Other {
        /// That rank.
        rank: usize,
        /// Its error, formatted with `{:#}` (an `anyhow` error's causes
        /// included).
        message: String,
    },
    /// The agreement itself failed.
    #[error(transparent)]
    Comm(#[from] CommError),
}

impl<E: Display> Agreed<E> {
    /// The message every rank holds: the same text on every rank.
    pub fn message(&self) -> String {
        match self {
            Agreed::Mine(e) => format!("{e:#}"),
            Agreed::Other { message, .. } => message.clone(),
            Agreed::Comm(e) => e.to_string(),
        }
    }
}

/// One outcome on every rank (collective): `Ok` where every rank's `local`
/// is `Ok`, else, on every rank, the error of the lowest rank whose `local`
/// failed: that rank keeps its own error value ([`Agreed::Mine`]), the
/// others get its message ([`Agreed::Other`]). Costs one allreduce of one
/// integer when every rank succeeded, and two broadcasts more when one
/// failed.
pub fn agree<E: Display>(comm: &dyn Communicator, local: Result<(), E>) -> Result<(), Agreed<E>> {
    let size = comm.size() as i64;
    // The lowest failing rank is the largest of the negated ranks.
    let mut first = [-(if local.is_err() {
        comm.rank() as i64
    } else {
        size
    })];
    comm.allreduce_i64(&mut first, ReduceOp::Max)?;
    let root = -first[0];
    if root == size {
        return Ok(());
    }
    let root = root as usize;
    let mut msg = match &local {
        Err(e) if comm.rank() == root => format!("{e:#}").into_bytes(),
        _ => Vec::new(),
    };
    let mut len = (msg.len() as u64).to_le_bytes();
    comm.broadcast_bytes(&mut len, root)?;
    msg.resize(u64::from_le_bytes(len) as usize, 0);
    comm.broadcast_bytes(&mut msg, root)?;
    match local {
        Err(e) if comm.rank() == root => Err(Agreed::Mine(e)),
        _ => Err(Agreed::Other {
            rank: root,
            message: String::from_utf8_lossy(&msg).into_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_gets_the_lowest_failing_ranks_error() {
        for size in [1, 2, 3, 5] {
            for failing in 0..(1usize << size) {
                let got = crate::local::run(size, |c| {
                    let mine: Result<(), String> = if failing >> c.rank() & 1 == 1 {
                        Err(format!("rank {} failed", c.rank()))
                    } else {
                        Ok(())
                    };
                    Ok::<_, CommError>(match agree(c, mine) {
                        Ok(()) => None,
                        Err(Agreed::Mine(e)) => Some((true, e)),
                        Err(Agreed::Other { rank, message }) => {
                            assert_eq!(message, format!("rank {rank} failed"));
                            Some((false, message))
                        }
                        Err(Agreed::Comm(e)) => panic!("{e}"),
                    })
                })
                .unwrap();
                let lowest = (0..size).find(|r| failing >> r & 1 == 1);
                for (r, g) in got.into_iter().enumerate() {
                    match lowest {
                        None => assert_eq!(g, None, "size {size} failing {failing:b}"),
                        Some(l) => assert_eq!(
                            g,
                            Some((r == l, format!("rank {l} failed"))),
                            "size {size} failing {failing:b} rank {r}"
                        ),
                    }
                }
            }
        }
    }
}
