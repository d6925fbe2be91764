//! The error type of the crate.

use thiserror::Error;

/// Everything that can go wrong when building or applying a Chebyshev plan.
///
/// Every variant names the bad value and, where there is one, the value that
/// was expected. No function of this crate panics on bad input; it returns
/// one of these instead.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ChebyshevError {
    /// Fewer than 3 Gauss-Lobatto points were requested.
    #[error("Nr = {nr} collocation points is too few: need Nr >= 3")]
    TooFewPoints {
        /// The requested number of points.
        nr: usize,
    },
    /// The shell bounds are not finite or not ordered (`ri < ro` is required).
    #[error("invalid shell [ri, ro] = [{ri}, {ro}]: need finite ri < ro with finite ro - ri")]
    InvalidShell {
        /// The requested inner radius.
        ri: f64,
        /// The requested outer radius.
        ro: f64,
    },
    /// A batch buffer whose length is not a whole number of columns of length `Nr`.
    #[error("{what}: length {len} is not a whole number of columns of length Nr = {nr}")]
    NotWholeColumns {
        /// Which argument.
        what: &'static str,
        /// The column length `Nr` of the plan.
        nr: usize,
        /// The length that came.
        len: usize,
    },
    /// A buffer of the wrong length (a single column, or an output batch
    /// that does not match its input batch).
    #[error("{what}: expected length {expected}, got {got}")]
    LengthMismatch {
        /// Which argument.
        what: &'static str,
        /// The required length.
        expected: usize,
        /// The length that came.
        got: usize,
    },
    /// The scratch buffer is shorter than the plan requires.
    #[error("scratch too small: expected at least {expected} elements, got {got}")]
    ScratchTooSmall {
        /// The required length (see `Transform::scratch_len`).
        expected: usize,
        /// The length that came.
        got: usize,
    },
    /// Robin coefficients that are not finite, or both zero.
    #[error("invalid Robin condition a f + b f' = g with a = {a}, b = {b}: need finite a, b, not both zero")]
    InvalidRobin {
        /// Coefficient of `f`.
        a: f64,
        /// Coefficient of `f'`.
        b: f64,
    },
}

/// `Result` with [`ChebyshevError`].
pub type Result<T> = std::result::Result<T, ChebyshevError>;
