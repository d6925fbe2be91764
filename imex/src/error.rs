//! The crate's error type.

use thiserror::Error;

/// Everything that can go wrong when building schemes, layouts, operators and steppers, or when
/// stepping. Each variant names the value it got and the value (or range) that was
/// expected.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ImexError {
    /// A scheme name that is not one of [`crate::Scheme::NAMES`].
    #[error("unknown time scheme {got:?}; valid names: {valid}")]
    UnknownScheme {
        /// The name that was asked for.
        got: String,
        /// The valid names, comma separated.
        valid: String,
    },
    /// A backend name that is not one of [`crate::AnyLu::NAMES`].
    #[error("unknown LU backend {got:?}; valid names: {valid}")]
    UnknownBackend {
        /// The name that was asked for.
        got: String,
        /// The valid names, comma separated.
        valid: String,
    },
    /// The backend exists in the API but was not compiled in.
    #[error(
        "LU backend {backend:?} is not available: imex was compiled without feature {feature:?}"
    )]
    BackendUnavailable {
        /// The backend that was asked for.
        backend: &'static str,
        /// The cargo feature that enables it.
        feature: &'static str,
    },
    /// A time step that is zero, negative, NaN or infinite.
    #[error("time step must be positive and finite, got {got}")]
    InvalidTimeStep {
        /// The time step that was passed.
        got: f64,
    },
    /// A time that is NaN or infinite.
    #[error("time must be finite, got {got}")]
    InvalidTime {
        /// The time that was passed.
        got: f64,
    },
    /// The number of radial points (the size of every per-degree matrix) is zero.
    #[error("the number of radial points must be at least 1, got {got}")]
    InvalidRadialSize {
        /// The size that was passed.
        got: usize,
    },
    /// A flat data buffer whose length does not match the shape it is meant to have.
    #[error("{what} has {got} values, expected {expected}")]
    LengthMismatch {
        /// What the buffer is.
        what: &'static str,
        /// The required length.
        expected: usize,
        /// The length passed.
        got: usize,
    },
    /// A per-degree matrix with the wrong shape.
    #[error(
        "{what} of degree l = {l} is {got_rows} x {got_cols}, expected \
         {expected_rows} x {expected_cols}"
    )]
    MatrixShape {
        /// Which matrix (`"mass matrix A_l"`, `"linear operator L_l"`, ...).
        what: &'static str,
        /// The spherical harmonic degree.
        l: usize,
        /// Expected number of rows.
        expected_rows: usize,
        /// Expected number of columns.
        expected_cols: usize,
        /// Rows of the matrix passed.
        got_rows: usize,
        /// Columns of the matrix passed.
        got_cols: usize,
    },
    /// A matrix entry that is NaN or infinite.
    #[error("{what} of degree l = {l} has a non-finite entry at ({row}, {col})")]
    NonFinite {
        /// Which matrix.
        what: &'static str,
        /// The spherical harmonic degree.
        l: usize,
        /// Row of the entry.
        row: usize,
        /// Column of the entry.
        col: usize,
    },
    /// An order m larger than the degree l.
    #[error("order m = {m} is invalid for degree l = {l}: expected 0 <= m <= {l}")]
    InvalidOrder {
        /// The degree.
        l: usize,
        /// The order passed.
        m: usize,
    },
    /// The orders of one degree are not strictly increasing (or repeat).
    #[error(
        "orders of degree l = {l} must be strictly increasing: m = {got} follows m = {previous}"
    )]
    UnsortedOrders {
        /// The degree.
        l: usize,
        /// The order before.
        previous: usize,
        /// The order that does not increase.
        got: usize,
    },
    /// A degree that appears twice in a layout or in the operator list.
    #[error("degree l = {l} is given twice in the {what}")]
    DuplicateDegree {
        /// The degree.
        l: usize,
        /// `"layout"` or `"operators"`.
        what: &'static str,
    },
    /// The layout holds a degree for which no operator was given.
    #[error("no operator was given for degree l = {l}, which the layout holds")]
    MissingOperator {
        /// The degree.
        l: usize,
    },
    /// An operator was given for a degree the layout does not hold.
    #[error(
        "an operator was given for degree l = {l}, which the layout does not hold (held: {held})"
    )]
    UnexpectedOperator {
        /// The degree.
        l: usize,
        /// The degrees the layout holds.
        held: String,
    },
    /// A boundary row whose index is outside the matrix.
    #[error("boundary row {row} of degree l = {l} is out of range: expected row < {nr}")]
    BoundaryRowIndex {
        /// The degree.
        l: usize,
        /// The row index passed.
        row: usize,
        /// The number of radial points.
        nr: usize,
    },
    /// The same row is replaced twice.
    #[error("boundary row {row} of degree l = {l} is given twice")]
    DuplicateBoundaryRow {
        /// The degree.
        l: usize,
        /// The repeated row.
        row: usize,
    },
    /// A boundary-condition index past the number of boundary rows of that degree.
    #[error("boundary condition {index} of degree l = {l} does not exist: the degree has {count}")]
    BoundaryIndex {
        /// The degree.
        l: usize,
        /// The index passed.
        index: usize,
        /// How many boundary rows the degree has.
        count: usize,
    },
    /// A mode (l, m) that the layout does not hold.
    #[error("mode (l = {l}, m = {m}) is not held by this layout")]
    ModeNotHeld {
        /// The degree.
        l: usize,
        /// The order.
        m: usize,
    },
    /// A mode block whose layout differs from the stepper's.
    #[error("{what} has layout {got}, expected {expected}")]
    LayoutMismatch {
        /// Which block (`"state"` or `"explicit terms"`).
        what: &'static str,
        /// The stepper's layout, summarised.
        expected: String,
        /// The block's layout, summarised.
        got: String,
    },
    /// A row permutation that is not a permutation of `0..n`.
    #[error("entry {position} of the row permutation is {got}: expected a permutation of 0..{n} without repeats")]
    InvalidPermutation {
        /// Position of the bad entry.
        position: usize,
        /// Its value.
        got: usize,
        /// The dimension.
        n: usize,
    },
    /// A LAPACK pivot outside `position + 1 ..= n` (1-based).
    #[error("LAPACK pivot {position} is {got}: expected {} ..= {n}", position + 1)]
    InvalidPivot {
        /// Position of the bad pivot.
        position: usize,
        /// Its value.
        got: i32,
        /// The dimension.
        n: usize,
    },
    /// The LU factorisation met a zero (or non-finite) pivot.
    #[error("matrix is singular: pivot {pivot} is zero or not finite")]
    Singular {
        /// Column of the failed pivot.
        pivot: usize,
    },
    /// The matrix `A_l - coefficient L_l` (with boundary rows) of one degree is singular.
    #[error(
        "the implicit matrix of degree l = {l} (A_l - {coefficient:e} L_l with boundary rows) is \
         singular: pivot {pivot} is zero or not finite"
    )]
    SingularOperator {
        /// The degree.
        l: usize,
        /// The coefficient `dt * b0` (0 for the assembly matrix `A_l` with boundary rows).
        coefficient: f64,
        /// Column of the failed pivot.
        pivot: usize,
    },
    /// A matrix too large for the LAPACK backend's 32-bit integers.
    #[error("dimension {got} is too large for LAPACK (expected at most {max})")]
    TooLarge {
        /// The dimension passed.
        got: usize,
        /// The largest allowed.
        max: usize,
    },
    /// A LAPACK routine reported an illegal argument.
    #[error("LAPACK {routine} reported info = {info}")]
    Lapack {
        /// The routine.
        routine: &'static str,
        /// Its `info` output.
        info: i32,
    },
    /// An invalid Butcher tableau for [`crate::DirkTableau::new`].
    #[error("invalid DIRK tableau {name:?}: {reason}")]
    InvalidTableau {
        /// The tableau's name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// [`crate::Stepper::begin_step`] was called while a step is in progress.
    #[error("a step is already in progress (waiting for explicit terms of stage {stage})")]
    StepInProgress {
        /// The stage whose explicit terms are awaited.
        stage: usize,
    },
    /// [`crate::Stepper::advance`] was called without [`crate::Stepper::begin_step`].
    #[error("no step is in progress: call begin_step first")]
    NoStepInProgress,
    /// [`crate::Stepper::import_meta`] got the state of a different scheme.
    #[error("checkpoint was written by scheme {got:?}, this stepper runs {expected:?}")]
    SchemeMismatch {
        /// The stepper's scheme name ([`crate::Scheme::name`]).
        expected: String,
        /// The scheme name in the checkpoint.
        got: String,
    },
    /// [`crate::Stepper::import_meta`] got more filled multistep history entries than the
    /// scheme keeps (or than steps were taken).
    #[error(
        "checkpoint of scheme {scheme:?} claims {got} filled history entries, expected at \
         most {max} (the scheme's history depth, capped by the number of completed steps)"
    )]
    HistoryDepth {
        /// The scheme name.
        scheme: String,
        /// The largest valid count: the history depth (0 for DIRK schemes), at most the number
        /// of completed steps.
        max: usize,
        /// The count in the checkpoint.
        got: usize,
    },
    /// [`crate::Stepper::import_meta`] got a step-size history entry that no stepper
    /// produces: NaN, infinite, negative, or zero where a step has been taken.
    #[error(
        "step-size history entry {index} is {got}, expected finite and >= 0 (and > 0 for \
         the {taken} most recent completed steps)"
    )]
    InvalidStepHistory {
        /// Position in the history (0 = the last step).
        index: usize,
        /// The value passed.
        got: f64,
        /// How many entries must be positive (`min(steps, 2)`).
        taken: usize,
    },
    /// The exported history of one mode does not have the length the stepper expects.
    #[error(
        "history of mode (l = {l}, m = {m}) has {got} values, expected {expected} \
         ({entries} entries of 2 x nr values)"
    )]
    HistoryLength {
        /// The degree.
        l: usize,
        /// The order.
        m: usize,
        /// Number of history entries (A u, N and L u together) the stepper holds.
        entries: usize,
        /// The required number of values.
        expected: usize,
        /// The number of values passed.
        got: usize,
    },
    /// The exported history of one mode holds a NaN or infinite value.
    #[error(
        "history of mode (l = {l}, m = {m}) has the non-finite value {value} at index {index}"
    )]
    NonFiniteHistory {
        /// The degree.
        l: usize,
        /// The order.
        m: usize,
        /// Position of the value in the mode's data.
        index: usize,
        /// The value.
        value: f64,
    },
    /// After [`crate::Stepper::import_meta`], a held mode's history has not been imported
    /// with [`crate::Stepper::import_mode`] yet: the stepper can neither step nor export.
    #[error(
        "the history of mode (l = {l}, m = {m}) has not been imported since import_meta (and \
         maybe others): import every held mode first"
    )]
    IncompleteImport {
        /// The degree of the first such mode in storage order.
        l: usize,
        /// Its order.
        m: usize,
    },
    /// The thread pool for [`crate::DegreeThreads::OwnPool`] could not be built.
    #[error("could not build a thread pool of {threads} threads: {reason}")]
    ThreadPool {
        /// The number of threads asked for.
        threads: usize,
        /// Why it failed.
        reason: String,
    },
}
