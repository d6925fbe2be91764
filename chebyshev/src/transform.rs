//! The batched DCT-I transform plan and the spectral derivatives.

use std::fmt;
use std::ops::{Add, Mul};
use std::sync::Arc;

use num_complex::Complex;
use rayon::prelude::*;
use rustdct::rustfft::{Fft, FftPlanner};
use rustdct::{Dct1, DctPlanner};

use crate::error::{ChebyshevError, Result};
use crate::grid::RadialGrid;

/// How a batched operation spreads its columns over threads (in the style
/// of faer's `Parallelism`).
///
/// Columns are cut into contiguous blocks, one per task, and each column is
/// transformed by the same code whatever the block: results are bitwise
/// identical for every setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Parallelism {
    /// On the calling thread.
    #[default]
    None,
    /// On rayon's current pool, in `n` tasks (`0`: one per thread of the
    /// pool, `rayon::current_num_threads()`).
    Rayon(usize),
}

impl Parallelism {
    /// The number of tasks (and of scratch blocks) this setting asks for.
    pub fn tasks(self) -> usize {
        match self {
            Parallelism::None => 1,
            Parallelism::Rayon(0) => rayon::current_num_threads().max(1),
            Parallelism::Rayon(n) => n,
        }
    }
}

mod sealed {
    use super::Transform;

    pub trait Sealed: Sized {
        const ZERO: Self;
        /// Scratch elements one task needs for one column at a time.
        fn scratch_per_task(t: &Transform) -> usize;
        /// `col <- c * DCT-I(col)` (the involution of the crate).
        fn dct(t: &Transform, col: &mut [Self], scratch: &mut [Self]);
    }
}
use sealed::Sealed;

/// The element types of a batch: `f64` (real columns) and `Complex<f64>`
/// (complex columns such as the `f_lm(r)` of a spherical-harmonic field,
/// whose real and imaginary parts are transformed alike). Sealed.
pub trait Scalar:
    Sealed + Copy + Send + Sync + Add<Output = Self> + Mul<f64, Output = Self> + 'static
{
}
impl Scalar for f64 {}
impl Scalar for Complex<f64> {}

impl Sealed for f64 {
    const ZERO: Self = 0.0;
    fn scratch_per_task(t: &Transform) -> usize {
        t.dct.get_scratch_len()
    }
    fn dct(t: &Transform, col: &mut [f64], scratch: &mut [f64]) {
        t.dct.process_dct1_with_scratch(col, scratch);
        col.iter_mut().for_each(|v| *v *= t.norm);
    }
}

impl Sealed for Complex<f64> {
    const ZERO: Self = Complex { re: 0.0, im: 0.0 };
    fn scratch_per_task(t: &Transform) -> usize {
        t.fft_len + t.fft.get_inplace_scratch_len()
    }
    /// One complex FFT of length `2 (Nr - 1)` of the even extension of the
    /// column: its output is `2 DCT-I(re) + 2i DCT-I(im)`, so real and
    /// imaginary parts are transformed in one pass, each column on its own.
    fn dct(t: &Transform, col: &mut [Complex<f64>], scratch: &mut [Complex<f64>]) {
        let (buf, fft_scratch) = scratch.split_at_mut(t.fft_len);
        let nr = col.len();
        buf[..nr].copy_from_slice(col);
        for (dst, src) in buf[nr..].iter_mut().zip(col[1..nr - 1].iter().rev()) {
            *dst = *src;
        }
        t.fft.process_with_scratch(buf, fft_scratch);
        let f = t.half_norm;
        for (dst, src) in col.iter_mut().zip(buf.iter()) {
            *dst = Complex::new(src.re * f, src.im * f);
        }
    }
}

/// A planned Chebyshev transform on a [`RadialGrid`]: grid values to
/// spectral coefficients and back through a fast DCT-I, and `r`-derivatives
/// through the spectral recurrence, on batches of columns.
///
/// Batches are slices of `ncols` contiguous columns of length `Nr` (column
/// `j` is `data[j * Nr..(j + 1) * Nr]`, ordered like the grid from `ro` to
/// `ri`, or by Chebyshev degree in spectral space); `ncols` is
/// `data.len() / Nr`. Built once, executed many times: the `_with_scratch`
/// methods do not allocate.
#[derive(Clone)]
pub struct Transform {
    grid: RadialGrid,
    dct: Arc<dyn Dct1<f64>>,
    fft: Arc<dyn Fft<f64>>,
    fft_len: usize,
    norm: f64,
    half_norm: f64,
    /// `fac[n] = 2 n h_n (2 / (ro - ri))`: the spectral-recurrence factors.
    fac: Vec<f64>,
}

impl fmt::Debug for Transform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transform")
            .field("nr", &self.grid.nr())
            .field("ri", &self.grid.ri())
            .field("ro", &self.grid.ro())
            .field("fft_len", &self.fft_len)
            .field("norm", &self.norm)
            .finish_non_exhaustive()
    }
}

impl Transform {
    /// Plans the transforms of `grid` (rustdct's DCT-I for real columns,
    /// a rustfft complex FFT of length `2 (Nr - 1)` for complex ones).
    pub fn new(grid: &RadialGrid) -> Self {
        let nr = grid.nr();
        let fft_len = 2 * (nr - 1);
        let dct = DctPlanner::new().plan_dct1(nr);
        let fft = FftPlanner::new().plan_fft_forward(fft_len);
        let norm = grid.norm();
        let s = grid.map_factor();
        let fac = (0..nr).map(|n| 2.0 * n as f64 * grid.h(n) * s).collect();
        Self {
            grid: grid.clone(),
            dct,
            fft,
            fft_len,
            norm,
            half_norm: 0.5 * norm,
            fac,
        }
    }

    /// The grid this plan was built on.
    pub fn grid(&self) -> &RadialGrid {
        &self.grid
    }

    /// Column length `Nr`.
    pub fn nr(&self) -> usize {
        self.grid.nr()
    }

    /// Scratch elements of type `T` that the `_with_scratch` methods need
    /// under `par`: one block per task (`par.tasks()` blocks; query it in
    /// the rayon pool that will run the call when using `Rayon(0)`).
    pub fn scratch_len<T: Scalar>(&self, par: Parallelism) -> usize {
        T::scratch_per_task(self).max(1) * par.tasks().max(1)
    }

    /// Grid values to spectral coefficients, in place, on every column:
    /// `f_n = c sum''_k f(r_k) C_n(x_k)`. Allocates its scratch.
    ///
    /// # Errors
    /// [`ChebyshevError::NotWholeColumns`] if `data.len()` is not a multiple of `Nr`.
    pub fn to_spectral<T: Scalar>(&self, data: &mut [T], par: Parallelism) -> Result<()> {
        let mut scratch = vec![T::ZERO; self.scratch_len::<T>(par)];
        self.to_spectral_with_scratch(data, &mut scratch, par)
    }

    /// [`to_spectral`](Self::to_spectral) with caller-provided scratch of at
    /// least [`scratch_len`](Self::scratch_len) elements; does not allocate.
    ///
    /// # Errors
    /// As [`to_spectral`](Self::to_spectral), and
    /// [`ChebyshevError::ScratchTooSmall`].
    pub fn to_spectral_with_scratch<T: Scalar>(
        &self,
        data: &mut [T],
        scratch: &mut [T],
        par: Parallelism,
    ) -> Result<()> {
        let ncols = self.columns("data", data.len())?;
        let (per, scratch) = self.scratch::<T>(scratch, par)?;
        self.run1(data, ncols, scratch, per, par, |col, s| {
            T::dct(self, col, s)
        });
        Ok(())
    }

    /// Spectral coefficients to grid values, in place, on every column:
    /// `f(r_k) = c sum''_n f_n C_n(x_k)`. The same operation as
    /// [`to_spectral`](Self::to_spectral) (the normalised DCT-I is its own
    /// inverse), named for the direction.
    ///
    /// # Errors
    /// As [`to_spectral`](Self::to_spectral).
    pub fn to_grid<T: Scalar>(&self, data: &mut [T], par: Parallelism) -> Result<()> {
        self.to_spectral(data, par)
    }

    /// [`to_grid`](Self::to_grid) with caller-provided scratch.
    ///
    /// # Errors
    /// As [`to_spectral_with_scratch`](Self::to_spectral_with_scratch).
    pub fn to_grid_with_scratch<T: Scalar>(
        &self,
        data: &mut [T],
        scratch: &mut [T],
        par: Parallelism,
    ) -> Result<()> {
        self.to_spectral_with_scratch(data, scratch, par)
    }

    /// Spectral coefficients of `df/dr` from those of `f`, on every column,
    /// by the recurrence `d_{n-1} = d_{n+1} + 2 n h_n f_n (2 / (ro - ri))`
    /// from `d_{Nr-1} = d_{Nr} = 0` (see the crate docs). Needs no scratch.
    ///
    /// # Errors
    /// [`ChebyshevError::NotWholeColumns`] for `coeffs`,
    /// [`ChebyshevError::LengthMismatch`] if `out` differs in length.
    pub fn spectral_derivative<T: Scalar>(
        &self,
        coeffs: &[T],
        out: &mut [T],
        par: Parallelism,
    ) -> Result<()> {
        let ncols = self.columns("coeffs", coeffs.len())?;
        self.same_len("out", coeffs.len(), out.len())?;
        self.run_io(coeffs, out, ncols, par, |src, dst| {
            dst.copy_from_slice(src);
            self.recurrence(dst);
        });
        Ok(())
    }

    /// Spectral coefficients of `d^2f/dr^2` from those of `f` (the
    /// recurrence twice).
    ///
    /// # Errors
    /// As [`spectral_derivative`](Self::spectral_derivative).
    pub fn spectral_second_derivative<T: Scalar>(
        &self,
        coeffs: &[T],
        out: &mut [T],
        par: Parallelism,
    ) -> Result<()> {
        let ncols = self.columns("coeffs", coeffs.len())?;
        self.same_len("out", coeffs.len(), out.len())?;
        self.run_io(coeffs, out, ncols, par, |src, dst| {
            dst.copy_from_slice(src);
            self.recurrence(dst);
            self.recurrence(dst);
        });
        Ok(())
    }

    /// `df/dr` on the grid from `f` on the grid, on every column
    /// (to spectral, recurrence, to grid: two DCTs per column). Allocates
    /// its scratch.
    ///
    /// # Errors
    /// [`ChebyshevError::NotWholeColumns`] for `f`,
    /// [`ChebyshevError::LengthMismatch`] if `df` differs in length.
    pub fn derivative<T: Scalar>(&self, f: &[T], df: &mut [T], par: Parallelism) -> Result<()> {
        let mut scratch = vec![T::ZERO; self.scratch_len::<T>(par)];
        self.derivative_with_scratch(f, df, &mut scratch, par)
    }

    /// [`derivative`](Self::derivative) with caller-provided scratch.
    ///
    /// # Errors
    /// As [`derivative`](Self::derivative), and [`ChebyshevError::ScratchTooSmall`].
    pub fn derivative_with_scratch<T: Scalar>(
        &self,
        f: &[T],
        df: &mut [T],
        scratch: &mut [T],
        par: Parallelism,
    ) -> Result<()> {
        let ncols = self.columns("f", f.len())?;
        self.same_len("df", f.len(), df.len())?;
        let (per, scratch) = self.scratch::<T>(scratch, par)?;
        self.run2(f, df, ncols, scratch, per, par, |src, dst, s| {
            dst.copy_from_slice(src);
            T::dct(self, dst, s);
            self.recurrence(dst);
            T::dct(self, dst, s);
        });
        Ok(())
    }

    /// `df/dr` and `d^2f/dr^2` on the grid from `f` on the grid, on every
    /// column (three DCTs per column). Allocates its scratch.
    ///
    /// # Errors
    /// [`ChebyshevError::NotWholeColumns`] for `f`,
    /// [`ChebyshevError::LengthMismatch`] if `df` or `ddf` differ in length.
    pub fn derivatives<T: Scalar>(
        &self,
        f: &[T],
        df: &mut [T],
        ddf: &mut [T],
        par: Parallelism,
    ) -> Result<()> {
        let mut scratch = vec![T::ZERO; self.scratch_len::<T>(par)];
        self.derivatives_with_scratch(f, df, ddf, &mut scratch, par)
    }

    /// [`derivatives`](Self::derivatives) with caller-provided scratch.
    ///
    /// # Errors
    /// As [`derivatives`](Self::derivatives), and [`ChebyshevError::ScratchTooSmall`].
    pub fn derivatives_with_scratch<T: Scalar>(
        &self,
        f: &[T],
        df: &mut [T],
        ddf: &mut [T],
        scratch: &mut [T],
        par: Parallelism,
    ) -> Result<()> {
        let ncols = self.columns("f", f.len())?;
        self.same_len("df", f.len(), df.len())?;
        self.same_len("ddf", f.len(), ddf.len())?;
        let (per, scratch) = self.scratch::<T>(scratch, par)?;
        let body = |src: &[T], d1: &mut [T], d2: &mut [T], s: &mut [T]| {
            d1.copy_from_slice(src);
            T::dct(self, d1, s);
            self.recurrence(d1);
            d2.copy_from_slice(d1);
            self.recurrence(d2);
            T::dct(self, d1, s);
            T::dct(self, d2, s);
        };
        let nr = self.nr();
        let tasks = par.tasks().clamp(1, ncols.max(1));
        if ncols == 0 {
            return Ok(());
        }
        if tasks == 1 {
            let s = &mut scratch[..per];
            for ((src, d1), d2) in f
                .chunks_exact(nr)
                .zip(df.chunks_exact_mut(nr))
                .zip(ddf.chunks_exact_mut(nr))
            {
                body(src, d1, d2, s);
            }
        } else {
            let block = ncols.div_ceil(tasks) * nr;
            f.par_chunks(block)
                .zip(df.par_chunks_mut(block))
                .zip(ddf.par_chunks_mut(block))
                .zip(scratch.par_chunks_mut(per))
                .for_each(|(((f, d1), d2), s)| {
                    for ((src, d1), d2) in f
                        .chunks_exact(nr)
                        .zip(d1.chunks_exact_mut(nr))
                        .zip(d2.chunks_exact_mut(nr))
                    {
                        body(src, d1, d2, s);
                    }
                });
        }
        Ok(())
    }

    /// In place: the coefficients of `f` become those of `df/dr`.
    fn recurrence<T: Scalar>(&self, a: &mut [T]) {
        let mut d_next = T::ZERO; // d_{n+1}
        let mut d_here = T::ZERO; // d_n
        for n in (1..a.len()).rev() {
            let d_prev = d_next + a[n] * self.fac[n];
            a[n] = d_here;
            d_next = d_here;
            d_here = d_prev;
        }
        a[0] = d_here;
    }

    fn columns(&self, what: &'static str, len: usize) -> Result<usize> {
        let nr = self.nr();
        if len % nr == 0 {
            Ok(len / nr)
        } else {
            Err(ChebyshevError::NotWholeColumns { what, nr, len })
        }
    }

    fn same_len(&self, what: &'static str, expected: usize, got: usize) -> Result<()> {
        if expected == got {
            Ok(())
        } else {
            Err(ChebyshevError::LengthMismatch {
                what,
                expected,
                got,
            })
        }
    }

    /// Checks the scratch and returns the per-task block length and the
    /// part of the scratch in use.
    fn scratch<'s, T: Scalar>(
        &self,
        scratch: &'s mut [T],
        par: Parallelism,
    ) -> Result<(usize, &'s mut [T])> {
        let expected = self.scratch_len::<T>(par);
        if scratch.len() < expected {
            return Err(ChebyshevError::ScratchTooSmall {
                expected,
                got: scratch.len(),
            });
        }
        Ok((T::scratch_per_task(self).max(1), &mut scratch[..expected]))
    }

    /// Runs `body(column, scratch)` on every column of `data`.
    fn run1<T: Scalar>(
        &self,
        data: &mut [T],
        ncols: usize,
        scratch: &mut [T],
        per: usize,
        par: Parallelism,
        body: impl Fn(&mut [T], &mut [T]) + Sync,
    ) {
        let nr = self.nr();
        if ncols == 0 {
            return;
        }
        let tasks = par.tasks().clamp(1, ncols);
        if tasks == 1 {
            let s = &mut scratch[..per];
            data.chunks_exact_mut(nr).for_each(|col| body(col, s));
        } else {
            let block = ncols.div_ceil(tasks) * nr;
            data.par_chunks_mut(block)
                .zip(scratch.par_chunks_mut(per))
                .for_each(|(d, s)| d.chunks_exact_mut(nr).for_each(|col| body(col, s)));
        }
    }

    /// Runs `body(src, dst, scratch)` on every pair of columns.
    #[allow(clippy::too_many_arguments)]
    fn run2<T: Scalar>(
        &self,
        src: &[T],
        dst: &mut [T],
        ncols: usize,
        scratch: &mut [T],
        per: usize,
        par: Parallelism,
        body: impl Fn(&[T], &mut [T], &mut [T]) + Sync,
    ) {
        let nr = self.nr();
        if ncols == 0 {
            return;
        }
        let tasks = par.tasks().clamp(1, ncols);
        if tasks == 1 {
            let s = &mut scratch[..per];
            for (a, b) in src.chunks_exact(nr).zip(dst.chunks_exact_mut(nr)) {
                body(a, b, s);
            }
        } else {
            let block = ncols.div_ceil(tasks) * nr;
            src.par_chunks(block)
                .zip(dst.par_chunks_mut(block))
                .zip(scratch.par_chunks_mut(per))
                .for_each(|((a, b), s)| {
                    for (a, b) in a.chunks_exact(nr).zip(b.chunks_exact_mut(nr)) {
                        body(a, b, s);
                    }
                });
        }
    }

    /// Runs `body(src, dst)` on every pair of columns (no scratch).
    fn run_io<T: Scalar>(
        &self,
        src: &[T],
        dst: &mut [T],
        ncols: usize,
        par: Parallelism,
        body: impl Fn(&[T], &mut [T]) + Sync,
    ) {
        let nr = self.nr();
        if ncols == 0 {
            return;
        }
        let tasks = par.tasks().clamp(1, ncols);
        if tasks == 1 {
            for (a, b) in src.chunks_exact(nr).zip(dst.chunks_exact_mut(nr)) {
                body(a, b);
            }
        } else {
            let block = ncols.div_ceil(tasks) * nr;
            src.par_chunks(block)
                .zip(dst.par_chunks_mut(block))
                .for_each(|(a, b)| {
                    for (a, b) in a.chunks_exact(nr).zip(b.chunks_exact_mut(nr)) {
                        body(a, b);
                    }
                });
        }
    }
}
