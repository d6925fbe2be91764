//! IMEX time stepping for per-degree dense radial operators, as in spectral codes for
//! spherical shells (MagIC's "l-loop").
//!
//! For every held spherical harmonic mode `(l, m)` the stepper integrates
//!
//! ```text
//! A_l du/dt = L_l u + N(u, t)
//! ```
//!
//! with `u` the `nr` radial values (or Chebyshev coefficients) of the mode, `A_l` and `L_l`
//! dense real `nr x nr` matrices per degree, `L_l u` treated implicitly and `N` explicitly.
//! Each implicit stage solves, per degree, one real system
//!
//! ```text
//! M_l X = B_l,     M_l = A_l - dt b0 L_l   (some rows replaced by boundary conditions)
//! ```
//!
//! for all right-hand sides of that degree at once: the real and imaginary parts of every
//! held order `m` packed as the `2 nm` columns of one column-major `nr x 2 nm` block (see
//! [`ModeLayout`]). `M_l` is LU-factored once per `dt b0` and the factors are kept until that
//! changes; [`Stepper::factorizations`] counts refactorisations per degree.
//!
//! # Schemes
//!
//! [`Scheme::from_name`] accepts `cnab2`, `sbdf1`, `sbdf2`, `sbdf3` (IMEX multistep, Ascher,
//! Ruuth & Wetton 1995, and the MagIC paper's CNAB2) and `ars222`, `ars343` (Ascher, Ruuth &
//! Spiteri 1997), `bpr353` (Boscarino, Pareschi & Russo 2013) (IMEX DIRK with an explicit
//! first stage). The weights and tableaux are public data ([`MultistepWeights`],
//! [`DirkTableau`]); see [`Scheme`] for start-up and variable-step rules.
//!
//! # Distribution independence
//!
//! The solve of one column uses the same IEEE operations in the same order whether it is
//! solved alone or batched with any other columns ([`LuFactors::solve_columns`]), and the
//! factors of `M_l` depend only on `l`, `dt` and the operators. So the result for mode
//! `(l, m)` has the same bits whichever other modes the rank holds, and on any number of
//! threads. The backends' own multi-right-hand-side solves ([`SolveMode::Native`]) do not
//! give that guarantee and are an explicit opt-out.
//!
//! # Checkpoint and restart
//!
//! [`Stepper::export_meta`] (the scalar state: time, steps, step sizes, filled history) and
//! [`Stepper::export_mode`] (per mode `(l, m)`, the history entries later steps read, as plain
//! `f64`s in an order independent of the layout and the thread count) give everything that
//! determines the future steps besides the operators, the state block and the boundary values;
//! [`Stepper::import_meta`] and [`Stepper::import_mode`] load it into a fresh stepper holding
//! any set of modes, which then continues bit for bit like the uninterrupted run. See
//! [`StepperMeta`] for the data order.
//!
//! # Backends
//!
//! [`FaerLu`] (pure Rust, default) and [`LapackLu`] (`dgetrf`/`dgetrs` from the system
//! OpenBLAS, feature `lapack`; without the feature [`LapackLu::new`] returns
//! [`ImexError::BackendUnavailable`]). [`AnyLu`] picks one by name at run time. The stepper is
//! generic over [`LuBackend`].
//!
//! # Example
//!
//! Three decoupled radial "points" with `A = I`, `L = -diag(1, 2, 3)` and a constant explicit
//! forcing `N = 1` on degree 1 (orders 0 and 1): `u(t) = 1/k + (u0 - 1/k) e^{-k t}`.
//!
//! ```
//! use imex::{DegreeOperator, Matrix, ModeBlock, ModeLayout, Scheme, Stepper};
//! use num_complex::Complex64;
//!
//! # fn main() -> Result<(), imex::ImexError> {
//! let nr = 3;
//! let layout = ModeLayout::new(nr, [(1, vec![0, 1])])?;
//! let lin = Matrix::from_fn(nr, nr, |i, j| if i == j { -((i + 1) as f64) } else { 0.0 });
//! let ops = vec![DegreeOperator::new(1, Matrix::identity(nr), lin)];
//! let scheme: Scheme = "sbdf3".parse()?;
//! let mut stepper = Stepper::new(scheme, layout.clone(), ops)?;
//!
//! let mut u = ModeBlock::zeros(&layout);
//! u.set_mode(1, 1, &[Complex64::new(2.0, -1.0); 3])?;
//! let dt = 1e-3;
//! for _ in 0..1000 {
//!     stepper.step(dt, &mut u, |_t, _u, n| n.fill(1.0))?;
//! }
//! for (i, v) in u.mode_complex(1, 1).unwrap().iter().enumerate() {
//!     let k = (i + 1) as f64;
//!     let exact_re = 1.0 / k + (2.0 - 1.0 / k) * (-k).exp();
//!     let exact_im = 1.0 / k + (-1.0 - 1.0 / k) * (-k).exp();
//!     assert!((v.re - exact_re).abs() < 1e-8 && (v.im - exact_im).abs() < 1e-8);
//! }
//! assert_eq!(stepper.factorizations(1), Some(2)); // BPR353 start-up, then SBDF3
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod error;
mod kernels;
mod layout;
mod lu;
mod matrix;
mod scheme;
mod stepper;

pub use error::ImexError;
pub use layout::{ModeBlock, ModeLayout};
pub use lu::{AnyLu, AnyScratch, FaerLu, FaerScratch, LapackLu, LuBackend, LuFactors};
pub use matrix::Matrix;
pub use scheme::{DirkTableau, MultistepScheme, MultistepWeights, Scheme, SchemeKind};
pub use stepper::{
    BoundaryRow, DegreeOperator, DegreeThreads, SolveMode, StepProgress, Stepper, StepperMeta,
    StepperOptions,
};

// The `lapack` crate declares the LAPACK symbols; this links the system OpenBLAS that
// provides them.
#[cfg(feature = "lapack")]
use openblas_src as _;
