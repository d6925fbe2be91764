//! The Chebyshev radial discretisation of a spherical-shell spectral code
//! (MagIC-style): a Gauss-Lobatto grid on `[ri, ro]`, batched fast DCT-I
//! transforms between grid values and Chebyshev coefficients, first and
//! second radial derivatives (dense collocation matrices and the spectral
//! recurrence on batches), boundary rows for Dirichlet, Neumann and Robin
//! conditions, and Clenshaw-Curtis radial and shell integrals.
//!
//! - [`RadialGrid`]: the points, [`d1_matrix`](RadialGrid::d1_matrix) and
//!   [`d2_matrix`](RadialGrid::d2_matrix),
//!   [`boundary_row`](RadialGrid::boundary_row) and
//!   [`spectral_boundary_row`](RadialGrid::spectral_boundary_row), the
//!   basis matrices [`spectral_matrix`](RadialGrid::spectral_matrix), and
//!   [`clenshaw_curtis_weights`](RadialGrid::clenshaw_curtis_weights),
//!   [`integrate`](RadialGrid::integrate),
//!   [`integrate_shell`](RadialGrid::integrate_shell).
//! - [`Transform`]: a plan (built once, reusable, scratch-size query, no
//!   allocation in the `_with_scratch` calls) for
//!   [`to_spectral`](Transform::to_spectral) / [`to_grid`](Transform::to_grid),
//!   [`spectral_derivative`](Transform::spectral_derivative),
//!   [`spectral_second_derivative`](Transform::spectral_second_derivative),
//!   and the grid-to-grid [`derivative`](Transform::derivative) and
//!   [`derivatives`](Transform::derivatives), on real (`f64`) or complex
//!   (`Complex<f64>`) columns, serial or over rayon ([`Parallelism`]).
//!
//! # Grid
//!
//! With `N = Nr - 1` and 0-based `k = 0..=N` (the seed's `k - 1`):
//!
//! ```text
//! x_k = cos(pi k / N),            x_0 = 1, x_N = -1
//! r_k = (ro - ri)/2 x_k + (ro + ri)/2,   r_0 = ro (outer), r_N = ri (inner)
//! ```
//!
//! # Normalisation (the convention of the MagIC paper)
//!
//! With `C_n(x) = cos(n arccos x)`, `c = sqrt(2 / N)` and `sum''` meaning
//! that the first and the last term of the sum are halved:
//!
//! ```text
//! f(r_k) = c sum''_{n=0}^{N} f_n C_n(x_k)        (to_grid)
//! f_n    = c sum''_{k=0}^{N} f(r_k) C_n(x_k)     (to_spectral)
//! ```
//!
//! Because `sum''_k C_n(x_k) C_m(x_k) = (N / 2) delta_nm` (`N` for
//! `n = m = 0` or `N`) the two are exact inverses, and since the matrix
//! `c h_j cos(pi i j / N)` (`h_0 = h_N = 1/2`, else 1) is the same in both
//! directions, it is an involution: `to_spectral` and `to_grid` are one
//! operation. It is `c` times a DCT-I, computed by rustdct's `plan_dct1`
//! for real columns and, for complex columns, by one complex FFT of length
//! `2N` of the evenly extended column (real and imaginary parts at once).
//! The number of coefficients equals the number of points (`Nc = Nr`).
//!
//! The interpolant is `p(x) = sum_n a_n C_n(x)` with the usual coefficients
//! `a_n = c h_n f_n`.
//!
//! # Derivatives
//!
//! In this normalisation the spectral coefficients `d_n` of `df/dr` follow
//! from those of `f` by
//!
//! ```text
//! d_{N} = d_{N+1} = 0,
//! d_{n-1} = d_{n+1} + 2 n h_n s f_n,   n = N, ..., 1,   s = 2 / (ro - ri)
//! ```
//!
//! which is the textbook `c_{n-1} b_{n-1} = b_{n+1} + 2 n a_n` (with
//! `c_0 = 2`) rewritten for `f_n` and `d_n`: the halving at `n = 0` is
//! absorbed by the `''` of the sums and only the top coefficient carries
//! `h_N = 1/2`. Columns are independent and are processed by the same code
//! in every batch and thread split, so batched, column-by-column, serial and
//! parallel results are bitwise identical.
//!
//! The collocation matrices act on grid values: `(D1 f)_k = f'(r_k)` and
//! `(D2 f)_k = f''(r_k)` of the interpolant, with the map factor included.
//!
//! # Example
//!
//! ```
//! use chebyshev::{Condition, Parallelism, RadialGrid, Side, Transform};
//! use num_complex::Complex;
//!
//! # fn main() -> Result<(), chebyshev::ChebyshevError> {
//! // The dynamo-benchmark shell, 17 points.
//! let grid = RadialGrid::new(17, 7.0 / 13.0, 20.0 / 13.0)?;
//! let plan = Transform::new(&grid);
//! let nr = grid.nr();
//!
//! // Two complex columns f_lm(r): r^3 and i r^2.
//! let mut f = Vec::new();
//! f.extend(grid.r().iter().map(|r| Complex::new(r * r * r, 0.0)));
//! f.extend(grid.r().iter().map(|r| Complex::new(0.0, r * r)));
//!
//! // Grid -> spectral -> grid round trip.
//! let mut g = f.clone();
//! plan.to_spectral(&mut g, Parallelism::None)?;
//! plan.to_grid(&mut g, Parallelism::None)?;
//! assert!(f.iter().zip(&g).all(|(a, b)| (a - b).norm() < 1e-14));
//!
//! // First and second r-derivatives on the grid, exact for polynomials.
//! let (mut df, mut ddf) = (vec![Complex::default(); 2 * nr], vec![Complex::default(); 2 * nr]);
//! plan.derivatives(&f, &mut df, &mut ddf, Parallelism::Rayon(2))?;
//! for (k, r) in grid.r().iter().enumerate() {
//!     assert!((df[k].re - 3.0 * r * r).abs() < 1e-12);
//!     assert!((ddf[nr + k].im - 2.0).abs() < 1e-11);
//! }
//!
//! // The same through the dense collocation matrix.
//! let d1 = grid.d1_matrix();
//! let re: Vec<f64> = f[..nr].iter().map(|z| z.re).collect();
//! let df_dense = d1.dot(&ndarray::ArrayView1::from(&re[..]));
//! assert!((df_dense[0] - df[0].re).abs() < 1e-12);
//!
//! // A Robin row 2 f + f' at the outer boundary, and a shell integral.
//! let row = grid.boundary_row(Side::Outer, Condition::Robin { a: 2.0, b: 1.0 })?;
//! let ro = grid.ro();
//! let val: f64 = row.iter().zip(&re).map(|(w, v)| w * v).sum();
//! assert!((val - (2.0 * ro.powi(3) + 3.0 * ro * ro)).abs() < 1e-12);
//! let ones = vec![1.0; nr];
//! let vol = grid.integrate_shell(&ones)?; // int r^2 dr
//! assert!((vol - (ro.powi(3) - grid.ri().powi(3)) / 3.0).abs() < 1e-14);
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod error;
mod grid;
mod transform;

pub use error::{ChebyshevError, Result};
pub use grid::{Condition, Order, RadialGrid, Side};
pub use transform::{Parallelism, Scalar, Transform};

pub use ndarray;
pub use num_complex;
