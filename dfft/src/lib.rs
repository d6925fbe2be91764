//! Distributed 3D FFTs on bricks, pencils and slabs.
//!
//! - [`Layout`]: a global shape block-decomposed over a process grid, with
//!   the memory order of each local block; [`Layout::bricks`],
//!   [`Layout::pencils`] and [`Layout::slabs`] build the usual families.
//! - [`Reshape`]: a planned move between any two layouts, a
//!   [`comm::Redistribution`] (the engine shared with `sht`) of the box
//!   intersections, with one of five [`Protocol`]s (alltoall padded to the
//!   largest message, alltoallv, strided alltoallw, p2p, pipelined p2p) or
//!   `Auto`, which times them on the real plan and keeps the fastest. Data a
//!   rank keeps never goes through the communicator.
//! - [`Fft3d`]: complex-to-complex and real-to-complex transforms with
//!   selectable normalisation, batching, and spectral output either in the
//!   input layout or transposed (fewer reshapes).
//! - [`kernels`]: the CUDA C source of the device reshapes' pack and unpack
//!   kernels (feature `cuda`), in every build, so that it can be checked
//!   without a GPU (feature `hip`: a test builds it for AMD GPUs).
//!
//! **Minimum-reshape selection.** With [`Selection::MinReshape`] (the
//! default) a plan reshapes only when the next transform axis is not whole,
//! and then into a slab that also holds the axis after it whole when the
//! rank count fits the third axis, so one reshape serves two transforms;
//! with [`Output::Input`] it goes straight into the input layout instead
//! when that holds every remaining axis whole (one reshape, where a slab in
//! another memory order would need a second one back), so it never needs
//! more reshapes than the pencil pipeline. [`Output::Transposed`] leaves
//! the spectrum in the last layout. Reshapes
//! per forward + backward C2C pair on 8 ranks for 64^3 (the same on 32 ranks
//! for 120 x 120 x 115; `cargo run --release -p parnum-dfft --example
//! reshape_table -- NX NY NZ RANKS` prints it for any case):
//!
//! | input layout | pencil pipeline | min-reshape, input layout | min-reshape, transposed |
//! |---|---|---|---|
//! | bricks | 8 | 6 | 4 |
//! | pencils, z whole | 6 | 4 | 2 |
//! | pencils, x whole | 6 | 4 | 4 |
//! | slabs, x split | 4 | 4 | 2 |
//!
//! The axis order of the 1D transforms is fixed (see [`Fft3d`]), which is
//! what makes every layout give the same bits; an x-pencil input therefore
//! still needs two reshapes per transform.
//!
//! **Derivatives with 1D transforms.** [`Derivatives`] takes first, second
//! and mixed derivatives and the Laplacian of a real field, each with 1D
//! transforms along its own axes only, moving only the fields later axes
//! need, and returns them in the input layout. For the gradient with the
//! Hessian diagonal on 4 ranks from z-pencils it moves 6 fields against 14
//! for one 3D forward plus one 3D backward transform per derivative
//! (`cargo run --release -p parnum-dfft --example derivatives -- N RANKS` times
//! both routes and prints their difference).
//!
//! Every result has the same bits as the single-rank transform: the 1D
//! transforms run in a fixed axis order and each line goes through the same
//! 1D plan, whatever the layout, rank count or protocol.
//!
//! ```
//! use comm::local;
//! use dfft::{Fft3d, Layout, Options};
//! use num_complex::Complex64;
//!
//! let sums = local::run(2, |comm| {
//!     let layout = Layout::pencils([8, 6, 4], comm.size(), 2)?;
//!     let mut plan = Fft3d::c2c(comm, &layout, Options::default())?;
//!     let x = vec![Complex64::new(1.0, 0.0); plan.input_len()];
//!     let mut y = vec![Complex64::default(); plan.output_len()];
//!     let mut scratch = vec![Complex64::default(); plan.scratch_len()];
//!     plan.forward(comm, &x, &mut y, &mut scratch)?;
//!     // A constant has all its energy at frequency zero, held by rank 0.
//!     let back = y.clone();
//!     let mut z = vec![Complex64::default(); plan.input_len()];
//!     plan.backward(comm, &back, &mut z, &mut scratch)?;
//!     assert!(z.iter().all(|v| (v.re - 1.0).abs() < 1e-12));
//!     Ok::<_, dfft::FftError>(y.iter().map(|v| v.re).sum::<f64>())
//! })
//! .unwrap();
//! assert!((sums.iter().sum::<f64>() - 192.0).abs() < 1e-9);
//! ```
#![warn(missing_docs)]

mod col;
#[cfg(feature = "cuda")]
pub mod cuda;
mod deriv;
mod fft;
pub mod kernels;
mod layout;
mod reshape;
mod tile;

pub use deriv::{Derivative, Derivatives};
pub use fft::{C2c, Fft3d, Kind, Normalization, Options, Output, R2c, Selection, Transform};
pub use layout::{Layout, LayoutKind};
pub use reshape::{Protocol, Reshape};

/// The angular wavenumber of index `q` along an axis of `n` points and
/// period `length`, in the transforms' (FFTW's) ordering: `2 pi m /
/// length` with `m = q` up to `n / 2` and `q - n` above it (the negative
/// frequencies). On the halved axis of a real transform (`q <= n / 2`) it
/// is `2 pi q / length`.
pub fn wavenumber(q: usize, n: usize, length: f64) -> f64 {
    let m = if q <= n / 2 {
        q as f64
    } else {
        q as f64 - n as f64
    };
    2.0 * std::f64::consts::PI * m / length
}

/// `|k|^2` of the mode with global spectral index `[i, j, k]` of an
/// `n0 x n1 x n2` grid of box lengths `length`: the sum of the squared
/// [`wavenumber`]s, axis 0 first (a fixed order, so every caller gets the
/// same bits). On the halved axis of a real transform (the last, `k <= n2 /
/// 2`) the index is the wavenumber's own.
///
/// ```
/// use std::f64::consts::PI;
///
/// // The mode (1, -1, 2) of a 8^3 box of side 2 pi: 1 + 1 + 4.
/// let k2 = dfft::k_squared([1, 7, 2], [8; 3], [2.0 * PI; 3]);
/// assert!((k2 - 6.0).abs() < 1e-12);
/// ```
pub fn k_squared(index: [usize; 3], shape: [usize; 3], length: [f64; 3]) -> f64 {
    let w = |d: usize| wavenumber(index[d], shape[d], length[d]);
    w(0).powi(2) + w(1).powi(2) + w(2).powi(2)
}

/// What planning or executing a transform can report.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum FftError {
    /// A communication error (including a failed peer).
    #[error(transparent)]
    Comm(#[from] comm::CommError),
    /// More ranks on an axis than it has points.
    #[error("the process grid puts {ranks} ranks on axis {axis}, which has only {extent} points; use at most {extent} ranks there")]
    GridTooLarge {
        /// The axis.
        axis: usize,
        /// Ranks requested along it.
        ranks: usize,
        /// Its extent.
        extent: usize,
    },
    /// A buffer of the wrong length.
    #[error("{what} buffer holds {got} elements, the plan needs {expected}")]
    LengthMismatch {
        /// Which buffer.
        what: &'static str,
        /// Length required.
        expected: usize,
        /// Length given.
        got: usize,
    },
    /// A device (GPU) call failed (the device error's text).
    #[error("device: {0}")]
    Device(String),
    /// Any other invalid request.
    #[error("{0}")]
    Invalid(String),
}

#[cfg(test)]
mod wavenumber_tests {
    use super::wavenumber;

    /// FFTW's ordering: 0, 1, ..., then the negative frequencies; the
    /// middle index of an even length counts as positive.
    #[test]
    fn indices_map_to_signed_frequencies() {
        let two_pi = 2.0 * std::f64::consts::PI;
        let even: Vec<f64> = (0..8).map(|q| wavenumber(q, 8, two_pi)).collect();
        assert_eq!(even, [0.0, 1.0, 2.0, 3.0, 4.0, -3.0, -2.0, -1.0]);
        let odd: Vec<f64> = (0..7).map(|q| wavenumber(q, 7, two_pi)).collect();
        assert_eq!(odd, [0.0, 1.0, 2.0, 3.0, -3.0, -2.0, -1.0]);
        // The period scales it: 2 pi m / L.
        assert_eq!(wavenumber(5, 8, 0.5), two_pi * -3.0 / 0.5);
    }
}
