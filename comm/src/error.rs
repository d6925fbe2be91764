//! The error type shared by every communicator operation.

/// Result alias used throughout the crate.
pub type Result<T, E = CommError> = std::result::Result<T, E>;

/// Everything a communicator, a process grid or a decomposition can report.
///
/// Every variant carries the offending value and, where there is one, the
/// valid range, so a message can be acted on without reading the source.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CommError {
    /// Another rank panicked or returned an error; every pending or later
    /// operation of the surviving ranks fails with this instead of hanging.
    #[error("rank {rank} failed: {reason}")]
    PeerFailed {
        /// The rank (in the world communicator) that failed first.
        rank: usize,
        /// Its panic message or error.
        reason: String,
    },
    /// A rank argument outside `0..size`.
    #[error("rank {rank} is out of range for a communicator of size {size} (valid: 0..{size})")]
    InvalidRank {
        /// The rank given.
        rank: usize,
        /// The communicator size.
        size: usize,
    },
    /// A tag outside the user range.
    #[error("tag {tag} is out of range (valid: 0..={max})")]
    InvalidTag {
        /// The tag given.
        tag: u32,
        /// The largest user tag.
        max: u32,
    },
    /// Two lengths that must agree do not.
    #[error("{what}: expected {expected}, got {got}")]
    LengthMismatch {
        /// Which buffer or argument.
        what: String,
        /// The length required.
        expected: usize,
        /// The length received.
        got: usize,
    },
    /// A message arrived whose length differs from the posted receive buffer.
    #[error("message from rank {src} with tag {tag} holds {got} bytes but the receive buffer holds {expected}")]
    MessageTruncated {
        /// Source rank of the message.
        src: usize,
        /// Its tag.
        tag: u32,
        /// Bytes in the receive buffer.
        expected: usize,
        /// Bytes in the message.
        got: usize,
    },
    /// A receive waited longer than the configured limit: a deadlock in the
    /// calling code (mismatched tags or sources) rather than a failed peer.
    #[error("rank {rank} waited more than {seconds} s for {what}; no peer has failed, so the program is probably deadlocked (mismatched source, tag or collective)")]
    Timeout {
        /// The waiting rank.
        rank: usize,
        /// What it waited for.
        what: String,
        /// The limit.
        seconds: u64,
    },
    /// An invalid argument to a process grid, decomposition or collective.
    #[error("{0}")]
    Invalid(String),
    /// The backend was not compiled in.
    #[error("not compiled with {0} support: rebuild with `--features {0}`")]
    NotCompiled(&'static str),
    /// An error reported by the MPI library.
    #[error("MPI error {code} in {call}: {message}")]
    Mpi {
        /// The MPI function.
        call: &'static str,
        /// The MPI error code.
        code: i32,
        /// The MPI error string.
        message: String,
    },
}

impl CommError {
    /// Shorthand for [`CommError::Invalid`].
    pub fn invalid(msg: impl Into<String>) -> Self {
        CommError::Invalid(msg.into())
    }

    /// Shorthand for [`CommError::LengthMismatch`].
    pub fn length(what: impl Into<String>, expected: usize, got: usize) -> Self {
        CommError::LengthMismatch {
            what: what.into(),
            expected,
            got,
        }
    }
}
