//! Dense LU factorisation backends and the factors they produce.

use std::fmt;

use crate::{kernels, ImexError, Matrix};

/// LU factors with partial pivoting of an `n x n` matrix: `P M = L U`, where row `i` of `P M`
/// is row `perm[i]` of `M`, `L` is unit lower triangular and `U` upper triangular, both packed
/// column-major in one `n x n` buffer (the LAPACK `getrf` layout). The pivots are also kept as
/// LAPACK's 1-based sequential row interchanges (`ipiv`), so every backend can solve with any
/// backend's factors.
#[derive(Clone, PartialEq)]
pub struct LuFactors {
    n: usize,
    lu: Vec<f64>,
    perm: Vec<usize>,
    perm_inv: Vec<usize>,
    ipiv: Vec<i32>,
}

impl fmt::Debug for LuFactors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LuFactors")
            .field("n", &self.n)
            .field("perm", &self.perm)
            .finish_non_exhaustive()
    }
}

impl LuFactors {
    /// Factors from a packed column-major `lu` buffer and the row permutation `perm`.
    ///
    /// Fails if the buffer is not `n x n`, `perm` is not a permutation of `0..n`, or a diagonal
    /// entry of `U` is zero or not finite.
    pub fn from_packed(n: usize, lu: Vec<f64>, perm: Vec<usize>) -> Result<Self, ImexError> {
        if lu.len() != n * n {
            return Err(ImexError::LengthMismatch {
                what: "packed LU factors",
                expected: n * n,
                got: lu.len(),
            });
        }
        if perm.len() != n {
            return Err(ImexError::LengthMismatch {
                what: "row permutation",
                expected: n,
                got: perm.len(),
            });
        }
        let mut perm_inv = vec![usize::MAX; n];
        for (i, &p) in perm.iter().enumerate() {
            if p >= n || perm_inv[p] != usize::MAX {
                return Err(ImexError::InvalidPermutation {
                    position: i,
                    got: p,
                    n,
                });
            }
            perm_inv[p] = i;
        }
        for i in 0..n {
            let d = lu[i + i * n];
            if d == 0.0 || !d.is_finite() {
                return Err(ImexError::Singular { pivot: i });
            }
        }
        // Sequential interchanges that produce `perm`: at step i, row perm[i] (currently at
        // position pos[perm[i]] >= i) is swapped into position i.
        let mut at: Vec<usize> = (0..n).collect(); // at[position] = original row
        let mut pos: Vec<usize> = (0..n).collect(); // pos[original row] = position
        let mut ipiv = Vec::with_capacity(n);
        for i in 0..n {
            let j = pos[perm[i]];
            at.swap(i, j);
            pos[at[i]] = i;
            pos[at[j]] = j;
            ipiv.push(i32::try_from(j + 1).unwrap_or(i32::MAX));
        }
        Ok(Self {
            n,
            lu,
            perm,
            perm_inv,
            ipiv,
        })
    }

    /// Factors from a packed buffer and LAPACK's 1-based sequential interchanges `ipiv`.
    pub fn from_lapack(n: usize, lu: Vec<f64>, ipiv: &[i32]) -> Result<Self, ImexError> {
        if ipiv.len() != n {
            return Err(ImexError::LengthMismatch {
                what: "LAPACK pivots",
                expected: n,
                got: ipiv.len(),
            });
        }
        let mut at: Vec<usize> = (0..n).collect();
        for (i, &p) in ipiv.iter().enumerate() {
            let j = usize::try_from(p).unwrap_or(0).wrapping_sub(1);
            if j >= n || j < i {
                return Err(ImexError::InvalidPivot {
                    position: i,
                    got: p,
                    n,
                });
            }
            at.swap(i, j);
        }
        Self::from_packed(n, lu, at)
    }

    /// The dimension `n`.
    pub fn dim(&self) -> usize {
        self.n
    }

    /// The packed factors, column-major.
    pub fn packed(&self) -> &[f64] {
        &self.lu
    }

    /// The row permutation: row `i` of `P M` is row `perm()[i]` of `M`.
    pub fn perm(&self) -> &[usize] {
        &self.perm
    }

    /// The inverse permutation.
    pub fn perm_inv(&self) -> &[usize] {
        &self.perm_inv
    }

    /// LAPACK's 1-based sequential row interchanges.
    pub fn ipiv(&self) -> &[i32] {
        &self.ipiv
    }

    /// Scratch length (in `f64`) that [`LuFactors::solve_columns`] needs.
    pub fn solve_scratch_len(&self) -> usize {
        kernels::solve_scratch_len(self.n)
    }

    /// Solves `M X = B` in place for the `ncols` columns of `rhs` (column-major, `n` rows each).
    ///
    /// Each column follows the same sequence of floating-point operations whatever `ncols` is
    /// and whatever the other columns hold, so a batched solve gives bit-for-bit the result of
    /// solving the columns one at a time (see the crate docs). `scratch` must hold at least
    /// [`LuFactors::solve_scratch_len`] values; nothing is allocated.
    pub fn solve_columns(
        &self,
        rhs: &mut [f64],
        ncols: usize,
        scratch: &mut [f64],
    ) -> Result<(), ImexError> {
        if rhs.len() != self.n * ncols {
            return Err(ImexError::LengthMismatch {
                what: "right-hand sides (n x ncols)",
                expected: self.n * ncols,
                got: rhs.len(),
            });
        }
        if scratch.len() < self.solve_scratch_len() {
            return Err(ImexError::LengthMismatch {
                what: "solve scratch",
                expected: self.solve_scratch_len(),
                got: scratch.len(),
            });
        }
        kernels::solve_columns(&self.lu, &self.perm, self.n, rhs, ncols, scratch);
        Ok(())
    }
}

/// A dense LU backend: factors `n x n` matrices with partial pivoting and offers its own
/// (library) multi-right-hand-side solve.
///
/// The stepper always factors through the backend; it solves with the crate's column-wise
/// kernel ([`LuFactors::solve_columns`], the default, [`crate::SolveMode::ColumnWise`]) or with
/// [`LuBackend::solve_native`] ([`crate::SolveMode::Native`]).
pub trait LuBackend: Send + Sync + fmt::Debug {
    /// Work space of the native solve for one degree, made once and reused.
    type Scratch: Send + fmt::Debug;

    /// A short name (`"faer"`, `"lapack"`).
    fn name(&self) -> &'static str;

    /// Factors the square matrix `m`, consuming it as storage. Fails on a zero or non-finite
    /// pivot ([`ImexError::Singular`]) or a non-square matrix.
    fn factor(&self, m: Matrix) -> Result<LuFactors, ImexError>;

    /// Work space for [`LuBackend::solve_native`] with `ncols` right-hand sides of size `n`.
    fn native_scratch(&self, n: usize, ncols: usize) -> Self::Scratch;

    /// Solves in place with the library's own multi-right-hand-side triangular solves
    /// (faer's blocked solve, LAPACK's `dgetrs`). Its result for one column may depend on the
    /// number of columns; the tests record whether it does.
    fn solve_native(
        &self,
        factors: &LuFactors,
        rhs: &mut [f64],
        ncols: usize,
        scratch: &mut Self::Scratch,
    ) -> Result<(), ImexError>;
}

fn check_square(m: &Matrix) -> Result<usize, ImexError> {
    if m.nrows() != m.ncols() {
        return Err(ImexError::LengthMismatch {
            what: "columns of a square matrix",
            expected: m.nrows(),
            got: m.ncols(),
        });
    }
    Ok(m.nrows())
}

fn check_rhs(n: usize, rhs: &[f64], ncols: usize) -> Result<(), ImexError> {
    if rhs.len() != n * ncols {
        return Err(ImexError::LengthMismatch {
            what: "right-hand sides (n x ncols)",
            expected: n * ncols,
            got: rhs.len(),
        });
    }
    Ok(())
}

/// The pure-Rust backend: faer's partial-pivoting LU (`faer::linalg::lu::partial_pivoting`),
/// run sequentially (`Par::Seq`) with explicitly sized scratch. Parallelism belongs to the
/// stepper, which spreads degrees over threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaerLu;

impl FaerLu {
    /// The faer backend.
    pub fn new() -> Self {
        Self
    }
}

/// Scratch of [`FaerLu::solve_native`].
pub struct FaerScratch {
    buf: faer::dyn_stack::MemBuffer,
    n: usize,
    ncols: usize,
}

impl fmt::Debug for FaerScratch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaerScratch")
            .field("n", &self.n)
            .field("ncols", &self.ncols)
            .finish_non_exhaustive()
    }
}

impl LuBackend for FaerLu {
    type Scratch = FaerScratch;

    fn name(&self) -> &'static str {
        "faer"
    }

    fn factor(&self, m: Matrix) -> Result<LuFactors, ImexError> {
        use faer::dyn_stack::{MemBuffer, MemStack};
        use faer::linalg::lu::partial_pivoting::factor::{lu_in_place, lu_in_place_scratch};
        let n = check_square(&m)?;
        let mut data = m.into_vec();
        let mut perm = vec![0usize; n];
        let mut perm_inv = vec![0usize; n];
        {
            let a = faer::MatMut::from_column_major_slice_mut(&mut data, n, n);
            let params = Default::default();
            let mut mem = MemBuffer::new(lu_in_place_scratch::<usize, f64>(
                n,
                n,
                faer::Par::Seq,
                params,
            ));
            lu_in_place(
                a,
                &mut perm,
                &mut perm_inv,
                faer::Par::Seq,
                MemStack::new(&mut mem),
                params,
            );
        }
        LuFactors::from_packed(n, data, perm)
    }

    fn native_scratch(&self, n: usize, ncols: usize) -> FaerScratch {
        use faer::linalg::lu::partial_pivoting::solve::solve_in_place_scratch;
        FaerScratch {
            buf: faer::dyn_stack::MemBuffer::new(solve_in_place_scratch::<usize, f64>(
                n,
                ncols,
                faer::Par::Seq,
            )),
            n,
            ncols,
        }
    }

    fn solve_native(
        &self,
        factors: &LuFactors,
        rhs: &mut [f64],
        ncols: usize,
        scratch: &mut FaerScratch,
    ) -> Result<(), ImexError> {
        use faer::linalg::lu::partial_pivoting::solve::solve_in_place;
        let n = factors.n;
        check_rhs(n, rhs, ncols)?;
        if scratch.n != n || scratch.ncols < ncols {
            *scratch = self.native_scratch(n, ncols);
        }
        let lu = faer::MatRef::from_column_major_slice(&factors.lu, n, n);
        let perm = faer::perm::PermRef::new_checked(&factors.perm, &factors.perm_inv, n);
        let b = faer::MatMut::from_column_major_slice_mut(rhs, n, ncols);
        solve_in_place(
            lu,
            lu,
            perm,
            b,
            faer::Par::Seq,
            faer::dyn_stack::MemStack::new(&mut scratch.buf),
        );
        Ok(())
    }
}

/// The LAPACK backend: `dgetrf` / `dgetrs` through the `lapack` crate, linked against the
/// system OpenBLAS (feature `lapack`). Without the feature, [`LapackLu::new`] returns
/// [`ImexError::BackendUnavailable`].
///
/// OpenBLAS runs `dgetrf` on threads of its own for larger matrices, and that threaded path
/// needs several MiB of stack on the calling thread: on a thread with Rust's default 2 MiB
/// (spawned threads, the test harness) it can overflow. Call
/// [`LapackLu::set_blas_threads`]`(1)` (advisable anyway when the stepper spreads degrees over
/// threads; the same as `OPENBLAS_NUM_THREADS=1`), or call from threads with at least 16 MiB of
/// stack (the stepper's own pool has that).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LapackLu {
    _private: (),
}

impl LapackLu {
    /// The LAPACK backend, or [`ImexError::BackendUnavailable`] without feature `lapack`.
    pub fn new() -> Result<Self, ImexError> {
        if cfg!(feature = "lapack") {
            Ok(Self { _private: () })
        } else {
            Err(ImexError::BackendUnavailable {
                backend: "lapack",
                feature: "lapack",
            })
        }
    }

    /// Whether this build has the LAPACK backend.
    pub const fn available() -> bool {
        cfg!(feature = "lapack")
    }

    /// Sets the number of threads OpenBLAS uses inside one call (`openblas_set_num_threads`).
    /// This is process-wide. Fails with [`ImexError::BackendUnavailable`] without feature
    /// `lapack`.
    pub fn set_blas_threads(threads: usize) -> Result<(), ImexError> {
        #[cfg(feature = "lapack")]
        {
            let n = std::os::raw::c_int::try_from(threads.max(1)).unwrap_or(1);
            // SAFETY: a plain setter exported by the linked OpenBLAS; it takes a thread count.
            unsafe { openblas_set_num_threads(n) };
            Ok(())
        }
        #[cfg(not(feature = "lapack"))]
        {
            let _ = threads;
            Err(ImexError::BackendUnavailable {
                backend: "lapack",
                feature: "lapack",
            })
        }
    }
}

#[cfg(feature = "lapack")]
extern "C" {
    fn openblas_set_num_threads(n: std::os::raw::c_int);
}

#[cfg(feature = "lapack")]
fn lapack_dim(n: usize) -> Result<i32, ImexError> {
    i32::try_from(n).map_err(|_| ImexError::TooLarge {
        got: n,
        max: i32::MAX as usize,
    })
}

impl LuBackend for LapackLu {
    type Scratch = ();

    fn name(&self) -> &'static str {
        "lapack"
    }

    #[cfg(feature = "lapack")]
    fn factor(&self, m: Matrix) -> Result<LuFactors, ImexError> {
        let n = check_square(&m)?;
        let ni = lapack_dim(n)?;
        let mut data = m.into_vec();
        let mut ipiv = vec![0i32; n];
        let mut info = 0i32;
        if n > 0 {
            // SAFETY: `data` is n x n column-major with leading dimension n, `ipiv` has n
            // entries, as dgetrf requires.
            unsafe { lapack::dgetrf(ni, ni, &mut data, ni.max(1), &mut ipiv, &mut info) };
        }
        if info < 0 {
            return Err(ImexError::Lapack {
                routine: "dgetrf",
                info,
            });
        }
        if info > 0 {
            return Err(ImexError::Singular {
                pivot: (info - 1) as usize,
            });
        }
        LuFactors::from_lapack(n, data, &ipiv)
    }

    #[cfg(not(feature = "lapack"))]
    fn factor(&self, _m: Matrix) -> Result<LuFactors, ImexError> {
        Err(ImexError::BackendUnavailable {
            backend: "lapack",
            feature: "lapack",
        })
    }

    fn native_scratch(&self, _n: usize, _ncols: usize) {}

    #[cfg(feature = "lapack")]
    fn solve_native(
        &self,
        factors: &LuFactors,
        rhs: &mut [f64],
        ncols: usize,
        _scratch: &mut (),
    ) -> Result<(), ImexError> {
        let n = factors.n;
        check_rhs(n, rhs, ncols)?;
        if n == 0 || ncols == 0 {
            return Ok(());
        }
        let ni = lapack_dim(n)?;
        let nc = lapack_dim(ncols)?;
        let mut info = 0i32;
        // SAFETY: the factors are n x n with leading dimension n and n pivots; `rhs` is
        // n x ncols column-major with leading dimension n, as dgetrs requires.
        unsafe {
            lapack::dgetrs(
                b'N',
                ni,
                nc,
                &factors.lu,
                ni,
                &factors.ipiv,
                rhs,
                ni,
                &mut info,
            )
        };
        if info != 0 {
            return Err(ImexError::Lapack {
                routine: "dgetrs",
                info,
            });
        }
        Ok(())
    }

    #[cfg(not(feature = "lapack"))]
    fn solve_native(
        &self,
        _factors: &LuFactors,
        _rhs: &mut [f64],
        _ncols: usize,
        _scratch: &mut (),
    ) -> Result<(), ImexError> {
        Err(ImexError::BackendUnavailable {
            backend: "lapack",
            feature: "lapack",
        })
    }
}

/// A backend chosen at run time (from configuration) by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnyLu {
    /// [`FaerLu`].
    Faer(FaerLu),
    /// [`LapackLu`].
    Lapack(LapackLu),
}

/// Scratch of [`AnyLu`].
#[derive(Debug)]
pub enum AnyScratch {
    /// For [`FaerLu`].
    Faer(FaerScratch),
    /// For [`LapackLu`].
    Lapack,
}

impl AnyLu {
    /// The names [`AnyLu::from_name`] accepts.
    pub const NAMES: &'static [&'static str] = &["faer", "lapack"];

    /// The backend with this name (case-insensitive). `"lapack"` fails with
    /// [`ImexError::BackendUnavailable`] when the feature is off.
    pub fn from_name(name: &str) -> Result<Self, ImexError> {
        match name.trim().to_ascii_lowercase().as_str() {
            "faer" => Ok(Self::Faer(FaerLu)),
            "lapack" => Ok(Self::Lapack(LapackLu::new()?)),
            _ => Err(ImexError::UnknownBackend {
                got: name.to_string(),
                valid: Self::NAMES.join(", "),
            }),
        }
    }
}

impl std::str::FromStr for AnyLu {
    type Err = ImexError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_name(s)
    }
}

impl LuBackend for AnyLu {
    type Scratch = AnyScratch;

    fn name(&self) -> &'static str {
        match self {
            Self::Faer(b) => b.name(),
            Self::Lapack(b) => b.name(),
        }
    }

    fn factor(&self, m: Matrix) -> Result<LuFactors, ImexError> {
        match self {
            Self::Faer(b) => b.factor(m),
            Self::Lapack(b) => b.factor(m),
        }
    }

    fn native_scratch(&self, n: usize, ncols: usize) -> AnyScratch {
        match self {
            Self::Faer(b) => AnyScratch::Faer(b.native_scratch(n, ncols)),
            Self::Lapack(_) => AnyScratch::Lapack,
        }
    }

    fn solve_native(
        &self,
        factors: &LuFactors,
        rhs: &mut [f64],
        ncols: usize,
        scratch: &mut AnyScratch,
    ) -> Result<(), ImexError> {
        match (self, scratch) {
            (Self::Faer(b), AnyScratch::Faer(s)) => b.solve_native(factors, rhs, ncols, s),
            (Self::Faer(b), s) => {
                let mut fresh = b.native_scratch(factors.n, ncols);
                let r = b.solve_native(factors, rhs, ncols, &mut fresh);
                *s = AnyScratch::Faer(fresh);
                r
            }
            (Self::Lapack(b), _) => b.solve_native(factors, rhs, ncols, &mut ()),
        }
    }
}
