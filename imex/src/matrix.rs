//! A small dense, column-major, real matrix: the exchange type for per-degree operators.

use std::ops::{Index, IndexMut};

use crate::ImexError;

/// A dense real matrix stored column-major (entry `(i, j)` at `data[i + j * nrows]`).
///
/// This is the exchange type for the per-degree operators `A_l` and `L_l`. It converts from and
/// to [`ndarray::Array2`] and can be built from column-major or row-major buffers.
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    nrows: usize,
    ncols: usize,
    data: Vec<f64>,
}

impl Matrix {
    /// An `nrows x ncols` matrix of zeros.
    pub fn zeros(nrows: usize, ncols: usize) -> Self {
        Self {
            nrows,
            ncols,
            data: vec![0.0; nrows * ncols],
        }
    }

    /// The `n x n` identity.
    pub fn identity(n: usize) -> Self {
        let mut m = Self::zeros(n, n);
        for i in 0..n {
            m.data[i + i * n] = 1.0;
        }
        m
    }

    /// An `nrows x ncols` matrix with entry `(i, j)` equal to `f(i, j)`.
    pub fn from_fn(nrows: usize, ncols: usize, mut f: impl FnMut(usize, usize) -> f64) -> Self {
        let mut data = Vec::with_capacity(nrows * ncols);
        for j in 0..ncols {
            for i in 0..nrows {
                data.push(f(i, j));
            }
        }
        Self { nrows, ncols, data }
    }

    /// Wraps a column-major buffer. Fails unless `data.len() == nrows * ncols`.
    pub fn from_col_major(nrows: usize, ncols: usize, data: Vec<f64>) -> Result<Self, ImexError> {
        let expected = nrows * ncols;
        if data.len() != expected {
            return Err(ImexError::LengthMismatch {
                what: "column-major matrix data",
                expected,
                got: data.len(),
            });
        }
        Ok(Self { nrows, ncols, data })
    }

    /// Copies a row-major buffer. Fails unless `data.len() == nrows * ncols`.
    pub fn from_row_major(nrows: usize, ncols: usize, data: &[f64]) -> Result<Self, ImexError> {
        let expected = nrows * ncols;
        if data.len() != expected {
            return Err(ImexError::LengthMismatch {
                what: "row-major matrix data",
                expected,
                got: data.len(),
            });
        }
        Ok(Self::from_fn(nrows, ncols, |i, j| data[i * ncols + j]))
    }

    /// Copies any 2-D ndarray view (of any strides).
    pub fn from_ndarray(a: ndarray::ArrayView2<'_, f64>) -> Self {
        let (nrows, ncols) = a.dim();
        Self::from_fn(nrows, ncols, |i, j| a[(i, j)])
    }

    /// Copies into an (row-major, standard layout) [`ndarray::Array2`].
    pub fn to_ndarray(&self) -> ndarray::Array2<f64> {
        ndarray::Array2::from_shape_fn((self.nrows, self.ncols), |(i, j)| self[(i, j)])
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }

    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }

    /// Entry `(i, j)`, or `None` outside the matrix.
    pub fn get(&self, i: usize, j: usize) -> Option<f64> {
        (i < self.nrows && j < self.ncols).then(|| self.data[i + j * self.nrows])
    }

    /// Column `j` as a contiguous slice, or `None` if `j >= ncols`.
    pub fn col(&self, j: usize) -> Option<&[f64]> {
        (j < self.ncols).then(|| &self.data[j * self.nrows..(j + 1) * self.nrows])
    }

    /// The column-major data.
    pub fn as_slice(&self) -> &[f64] {
        &self.data
    }

    /// The column-major data, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [f64] {
        &mut self.data
    }

    /// The column-major data, by value.
    pub fn into_vec(self) -> Vec<f64> {
        self.data
    }

    /// The product `self * x` for a vector `x` of length `ncols`, or `None` on a length mismatch.
    pub fn mul_vec(&self, x: &[f64]) -> Option<Vec<f64>> {
        if x.len() != self.ncols {
            return None;
        }
        let mut y = vec![0.0; self.nrows];
        for (j, &xj) in x.iter().enumerate() {
            for (yi, &a) in y
                .iter_mut()
                .zip(&self.data[j * self.nrows..(j + 1) * self.nrows])
            {
                *yi += a * xj;
            }
        }
        Some(y)
    }
}

impl From<ndarray::Array2<f64>> for Matrix {
    fn from(a: ndarray::Array2<f64>) -> Self {
        Self::from_ndarray(a.view())
    }
}

impl Index<(usize, usize)> for Matrix {
    type Output = f64;

    /// Entry `(i, j)`; panics outside the matrix, like slice indexing (use [`Matrix::get`] for a
    /// checked read).
    fn index(&self, (i, j): (usize, usize)) -> &f64 {
        assert!(i < self.nrows && j < self.ncols, "index out of bounds");
        &self.data[i + j * self.nrows]
    }
}

impl IndexMut<(usize, usize)> for Matrix {
    fn index_mut(&mut self, (i, j): (usize, usize)) -> &mut f64 {
        assert!(i < self.nrows && j < self.ncols, "index out of bounds");
        &mut self.data[i + j * self.nrows]
    }
}
