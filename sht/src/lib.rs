//! Spherical harmonic transforms (SHT) on Gauss-Legendre grids, in the
//! SHTns/MagIC convention, serial or parallel over the order `m`.
//!
//! - [`gauss_legendre`]: Gauss-Legendre nodes and weights (Newton in
//!   `theta` on the Legendre recurrence), accurate to rounding for thousands
//!   of nodes.
//! - [`normalized_legendre`]: the orthonormal associated Legendre functions
//!   at one point.
//! - [`Sht`]: a plan for one grid (`Ntheta` Gauss latitudes, `Nphi`
//!   equispaced longitudes) and one truncation `lmax`, with the full scalar
//!   [`synthesis`](Sht::synthesis) / [`analysis`](Sht::analysis) on batches
//!   of fields, and the two steps separately so a distributed code can put a
//!   transpose between them: the Legendre step for all `m`
//!   ([`legendre_synthesis`](Sht::legendre_synthesis),
//!   [`legendre_analysis`](Sht::legendre_analysis)) or for one `m`
//!   ([`legendre_synthesis_m`](Sht::legendre_synthesis_m),
//!   [`legendre_analysis_m`](Sht::legendre_analysis_m)), and the phi FFT step
//!   ([`phi_synthesis`](Sht::phi_synthesis), [`phi_analysis`](Sht::phi_analysis)).
//! - Vector transforms in spheroidal/toroidal form on the same plan:
//!   [`vector_synthesis`](Sht::vector_synthesis) /
//!   [`vector_analysis`](Sht::vector_analysis),
//!   the horizontal [`gradient`](Sht::gradient) of a scalar, and their
//!   Legendre steps for all `m`
//!   ([`vector_legendre_synthesis`](Sht::vector_legendre_synthesis),
//!   [`vector_legendre_analysis`](Sht::vector_legendre_analysis)) or one `m`
//!   ([`vector_legendre_synthesis_m`](Sht::vector_legendre_synthesis_m),
//!   [`vector_legendre_analysis_m`](Sht::vector_legendre_analysis_m)),
//!   with the scalar intermediate layout for each of `u_theta` and `u_phi`.
//!
//! - [`DistSht`]: the distributed transforms on a `Pi_r x Pi_theta` grid
//!   of ranks (the 1d scheme with `Pi_theta = 1`, the 2d scheme otherwise):
//!   orders `m` dealt snake-like over the theta ranks ([`snake_orders`]),
//!   the theta transposition between the Legendre and the phi steps, the
//!   `l` transposition to the layout holding all radial points of a set of
//!   `(l, m)` ([`snake_degrees`], [`Decomposition`]), each a [`comm::Redistribution`] (the engine `dfft` shares) by P2P, A2AV,
//!   A2AW or A2AP ([`Protocol`], `Auto` measured at plan time) with a
//!   queue length; bit-identical to the serial transform.
//!
//! # Convention
//!
//! Orthonormal spherical harmonics **without** the Condon-Shortley phase:
//!
//! ```text
//! Y_lm(theta, phi) = N_lm P_l^m(cos theta) e^{i m phi},
//! N_lm = sqrt( (2l+1)/(4 pi) * (l-m)!/(l+m)! ),
//! P_l^m(x) = (1 - x^2)^{m/2} d^m/dx^m P_l(x)      (no (-1)^m),
//! ```
//!
//! so `∫ Y_lm conj(Y_l'm') dΩ = δ_ll' δ_mm'`, `Y_10 = sqrt(3/(4 pi)) cos theta`
//! and `Y_11 = sqrt(3/(8 pi)) sin theta e^{i phi}` (positive at `phi = 0`).
//! A real field is stored by its coefficients with `m >= 0` only:
//!
//! ```text
//! f(theta, phi) = sum_{l=0}^{lmax} [ f_l0 Y_l0 + 2 Re sum_{m=1}^{min(l,mmax)} f_lm Y_lm ],
//! f_lm = ∫ f conj(Y_lm) dΩ,
//! ```
//!
//! which is the full complex expansion with `f_{l,-m} = conj(f_lm)` (as in
//! SHTns with orthonormal harmonics). The imaginary part of the `m = 0`
//! coefficients is ignored by synthesis and comes out zero from analysis.
//!
//! # Data layout
//!
//! - Coefficients of one field: `nlm = (lmax+1)(lmax+2)/2` complex values,
//!   **m-major**: all `l = 0..=lmax` for `m = 0`, then `l = 1..=lmax` for
//!   `m = 1`, ...; `(l, m)` is at [`Sht::lm_index`]`(l, m) = m_offset(m) + l - m`.
//!   A batch of fields is field after field.
//! - Grid of one field: `Ntheta * Nphi` reals, **theta-major**: row `j`
//!   (colatitude `theta_j`, north to south, `x_j = cos theta_j` decreasing)
//!   holds `phi_k = 2 pi k / Nphi`, `k = 0..Nphi`. A batch is field after field.
//! - Fourier-Legendre intermediate (between the two steps): for each
//!   `m = 0..=mmax`, for each field, `Ntheta` complex values
//!   `F_m(theta_j) = sum_l f_lm Pbar_lm(cos theta_j)`, index
//!   `(m * nfields + field) * Ntheta + j`, so that each `m` is one contiguous block.
//!
//! # Algorithm
//!
//! The Legendre functions are never tabulated over the latitudes: for each
//! `m` and each northern latitude the normalised three-term recurrence in
//! `l`, `Pbar_lm = (alpha_lm x) Pbar_{l-1,m} + beta_lm Pbar_{l-2,m}`
//! (coefficients precomputed per order, `O(lmax^2)`), runs from the
//! sectoral value `Pbar_mm`. Where the factors stay in range (every order up
//! to `lmax ~ 700`, most orders beyond) it runs scaled, `Pbar_lm = s_lm q_lm`
//! with `s_{l,m} = s_{l-1,m} alpha_lm / 2`, so that
//! `q_lm = (2x) q_{l-1,m} + beta'_lm q_{l-2,m}` costs one multiply and one
//! fused multiply-add; the factors `s_lm` go into the coefficients
//! (synthesis) and the sums (analysis). The sectoral start is kept in an
//! extended exponent (`val * 2^(-280 k)`) so that `sin^m theta` does not
//! underflow near the poles for large `m`; values below `2^-280` are
//! skipped. The plan stores, per order and northern latitude, the degree where the recurrence leaves
//! that negligible range and its two values there (`O(lmax Ntheta)`).
//! Blocks of 32 (AVX-512; 16 in the synthesis and 24 in the analysis of pairs of fields) or 8
//! (AVX2, portable) latitudes advance together through the recurrence, each
//! latitude joining at its own start (the vectors of a block holding no
//! started latitude yet are left out), and whole blocks nearer the pole than
//! the first negligible one are skipped. An opt-in polar threshold
//! (`Sht::set_polar_threshold`) moves the starts to where `|Pbar|` first
//! reaches it, trading accuracy for time. Each
//! value of the recurrence serves both hemispheres: synthesis accumulates
//! the even and odd degrees (`l - m`) apart and combines them as
//! `north = even + odd`, `south = even - odd` (the parity
//! `Pbar_lm(-x) = (-1)^(l+m) Pbar_lm(x)`); analysis folds the two
//! hemispheres into weighted sums and differences first. Fields go through
//! in pairs sharing one recurrence. The instruction set is chosen at run
//! time, but every value is computed by the same sequence of IEEE
//! operations (`mul_add` is correctly rounded with or without hardware FMA,
//! and the analysis sums over latitudes in a fixed order), so the results
//! are the same bits on every x86-64 CPU. With [`Parallelism::Rayon`] the
//! orders `m` (and the phi rows) are spread over rayon's pool; each output
//! is computed by the same sequence of operations as in serial, so the
//! results are bit-identical.
//!
//! The vector transforms reduce to the scalar kernel: with
//! `u = grad_h S + curl(T r_hat)` (the SHTns convention),
//!
//! ```text
//! u_theta = dS/dtheta + (1/sin theta) dT/dphi,
//! u_phi   = (1/sin theta) dS/dphi - dT/dtheta,
//! ```
//!
//! and `sin theta dPbar_lm/dtheta = l eps_{l+1,m} Pbar_{l+1,m} - (l+1) eps_lm Pbar_{l-1,m}`,
//! `eps_lm = sqrt((l^2 - m^2)/(4 l^2 - 1))` (the opposite parity), so
//!
//! ```text
//! sin theta U_theta,m = sum_{k=m}^{lmax+1} Pbar_km [ A_k + i m T_k ],
//! sin theta U_phi,m   = sum_{k=m}^{lmax+1} Pbar_km [ i m S_k - B_k ],
//! A_k = (k-1) eps_km S_{k-1} - (k+2) eps_{k+1,m} S_{k+1}     (B_k: the same with T),
//! ```
//!
//! two scalar Legendre syntheses to degree `lmax + 1` sharing one recurrence,
//! then a division by `sin theta`. Analysis is the exact transpose: with
//! `Q_k, R_k = 2 pi sum_j w_j Pbar_km(x_j) U_{theta,phi},m(theta_j) / sin theta_j`,
//! `l(l+1) S_lm = l eps_{l+1,m} Q_{l+1} - (l+1) eps_lm Q_{l-1} - i m R_l` and
//! `l(l+1) T_lm = -i m Q_l - l eps_{l+1,m} R_{l+1} + (l+1) eps_lm R_{l-1}`
//! (`S_00 = T_00 = 0`); on band-limited fields it inverts synthesis to
//! rounding, since `grad Y_lm . conj(grad Y_l'm)` has degree `<= 2 lmax`
//! in `cos theta` and the Gauss rule integrates it exactly.
//!
//! # Example
//!
//! ```
//! use num_complex::Complex64;
//! use sht::{Parallelism, Sht};
//!
//! let sht = Sht::new(16, None)?; // Nphi = 32, lmax = ceil(2*16/3) = 11
//! let mut coeffs = vec![Complex64::new(0.0, 0.0); sht.nlm()];
//! coeffs[sht.lm_index(1, 0)] = Complex64::new(1.0, 0.0); // Y_10
//! let mut grid = vec![0.0; sht.ntheta() * sht.nphi()];
//! sht.synthesis(&coeffs, &mut grid, Parallelism::None)?;
//! let y10 = (3.0 / (4.0 * std::f64::consts::PI)).sqrt() * sht.cos_theta()[0];
//! assert!((grid[0] - y10).abs() < 1e-14);
//!
//! let mut back = vec![Complex64::new(0.0, 0.0); sht.nlm()];
//! sht.analysis(&grid, &mut back, Parallelism::None)?;
//! assert!((back[sht.lm_index(1, 0)].re - 1.0).abs() < 1e-14);
//! # Ok::<(), sht::ShtError>(())
//! ```
#![warn(missing_docs)]

mod dist;
mod fft;
mod gauss;
mod legendre;
mod snake;
mod transform;
mod vector;

/// How a transposition moves its blocks: the protocols of the shared
/// redistribution engine ([`comm::Redistribution`]); `a2av`, `a2aw` and
/// `a2ap` name alltoallv, alltoallw and the padded alltoall.
pub use comm::Protocol;
pub use dist::{DistConfig, DistError, DistSht, Timing, Transposition};
pub use snake::{snake, snake_degrees, snake_orders, Decomposition};

pub use gauss::gauss_legendre;
pub use legendre::normalized_legendre;
pub use transform::Sht;

/// Where the transforms run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Parallelism {
    /// On the calling thread.
    #[default]
    None,
    /// Over the orders `m` (Legendre step) and the latitude rows (phi step)
    /// on rayon's current pool. Bit-identical to [`Parallelism::None`].
    Rayon,
}

/// The Legendre kernels of a transform ([`Sht::kernel`],
/// [`Sht::set_kernel`]): `simd`'s one instruction-set enum. `Avx512` runs
/// 32 latitudes per block (x86-64 with AVX-512F and FMA), `Avx2` 8 (AVX2
/// and FMA), `Portable` 8 on every target; all give the same bits. It
/// parses from `avx512`, `avx2` and `portable` (`FromStr`).
pub use simd::Isa as Kernel;

/// Errors of this crate.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShtError {
    /// Legendre kernels this build or this CPU lacks.
    #[error("the {kernel} Legendre kernels are not available in this build on this CPU (the best available are {best})")]
    KernelUnavailable {
        /// The kernels asked for.
        kernel: Kernel,
        /// The best kernels available.
        best: Kernel,
    },
    /// Fewer than two latitudes.
    #[error("ntheta = {ntheta} is too small: need at least 2 latitudes")]
    TooFewLatitudes {
        /// The value given.
        ntheta: usize,
    },
    /// `lmax` outside `0..=ntheta-1`.
    #[error("lmax = {lmax} is out of range: a Gauss grid of ntheta = {ntheta} allows 0 <= lmax <= {}", ntheta - 1)]
    LmaxOutOfRange {
        /// The value given.
        lmax: usize,
        /// The number of latitudes.
        ntheta: usize,
    },
    /// `nphi` is odd.
    #[error("nphi = {nphi} is odd: the number of longitudes must be even")]
    OddNphi {
        /// The value given.
        nphi: usize,
    },
    /// `nphi` too small to hold orders up to `mmax` without aliasing.
    #[error("nphi = {nphi} is too small for mmax = {mmax}: need nphi >= {}", 2 * (mmax + 1))]
    NphiTooSmall {
        /// The value given.
        nphi: usize,
        /// The largest order.
        mmax: usize,
    },
    /// Order `m` above `mmax`.
    #[error("order m = {m} is out of range: 0 <= m <= {mmax}")]
    OrderOutOfRange {
        /// The value given.
        m: usize,
        /// The largest order.
        mmax: usize,
    },
    /// A buffer of the wrong length.
    #[error("{what} has length {got}, expected {expected}")]
    LengthMismatch {
        /// Which buffer.
        what: &'static str,
        /// The length required.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// A batch buffer whose length is not a positive multiple of one field.
    #[error("{what} has length {got}, expected a positive multiple of {unit} (one field)")]
    BatchLength {
        /// Which buffer.
        what: &'static str,
        /// The length of one field.
        unit: usize,
        /// The length given.
        got: usize,
    },
    /// A polar threshold outside `0 <= eps < 1`.
    #[error("polar threshold eps = {eps} is out of range: need 0 <= eps < 1")]
    PolarThreshold {
        /// The value given, as printed (the error type is `Eq`).
        eps: String,
    },
    /// An error reported by the FFT library.
    #[error("FFT failed: {0}")]
    Fft(String),
}

pub(crate) fn check_len(what: &'static str, got: usize, expected: usize) -> Result<(), ShtError> {
    if got == expected {
        Ok(())
    } else {
        Err(ShtError::LengthMismatch {
            what,
            expected,
            got,
        })
    }
}

/// The number of fields in a batch buffer of length `got`, `unit` per field.
pub(crate) fn batch(what: &'static str, got: usize, unit: usize) -> Result<usize, ShtError> {
    if unit > 0 && got > 0 && got.is_multiple_of(unit) {
        Ok(got / unit)
    } else {
        Err(ShtError::BatchLength { what, unit, got })
    }
}
