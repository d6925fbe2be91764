//! Column-wise dense kernels whose result for one column does not depend on the other columns.
//!
//! Every column follows exactly the textbook sequence of IEEE operations:
//!
//! * forward substitution with the unit lower factor, column-oriented:
//!   `y_i <- y_i - L_ik * y_k` for `k = 0, 1, ..., i - 1`, in that order;
//! * back substitution with the upper factor: `y_k <- y_k / U_kk`, then
//!   `y_i <- y_i - U_ik * y_k` for `k = n - 1, ..., i + 1`, in that order;
//! * products `y = M x`: `y_i <- 0`, then `y_i <- y_i + M_ik * x_k` for `k = 0, 1, ...`.
//!
//! Each product is rounded before the addition (Rust never contracts `a - b * c` into a fused
//! multiply-add), and unrolling over `k` or over columns, or vectorising over `i`, keeps that
//! per-element sequence. So a column gives the same bits whether it is solved alone, in a
//! batch of any size, or on a machine with a different SIMD width: this is what makes the
//! implicit solves independent of how modes are distributed over ranks.

/// Number of right-hand sides processed together (sharing each load of a factor column).
pub(crate) const COLUMNS: usize = 4;

/// Scratch length (in `f64`) that [`solve_columns`] needs for dimension `n`.
pub(crate) fn solve_scratch_len(n: usize) -> usize {
    n * COLUMNS
}

/// Solves `(P^T L U) X = B` in place for the `ncols` columns of `rhs` (column-major, `n` rows),
/// where `lu` holds `L` (unit lower, strictly below the diagonal) and `U` (upper) column-major
/// and row `i` of `P B` is row `perm[i]` of `B`. `scratch` holds at least
/// [`solve_scratch_len`]`(n)` values. Lengths are checked by the caller.
pub(crate) fn solve_columns(
    lu: &[f64],
    perm: &[usize],
    n: usize,
    rhs: &mut [f64],
    ncols: usize,
    scratch: &mut [f64],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if simd::Isa::Avx512.available() {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            unsafe { solve_columns_avx512(lu, perm, n, rhs, ncols, scratch) };
            return;
        }
        if simd::Isa::Avx2.available() {
            // SAFETY: the CPU supports AVX2, checked just above.
            unsafe { solve_columns_avx2(lu, perm, n, rhs, ncols, scratch) };
            return;
        }
    }
    solve_columns_generic(lu, perm, n, rhs, ncols, scratch);
}

/// `y = M x` for the `ncols` columns of `x` (column-major, `n` rows), `m` an `n x n`
/// column-major matrix. Lengths are checked by the caller.
pub(crate) fn matvec_columns(m: &[f64], n: usize, x: &[f64], y: &mut [f64], ncols: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if simd::Isa::Avx512.available() {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            unsafe { matvec_columns_avx512(m, n, x, y, ncols) };
            return;
        }
        if simd::Isa::Avx2.available() {
            // SAFETY: the CPU supports AVX2, checked just above.
            unsafe { matvec_columns_avx2(m, n, x, y, ncols) };
            return;
        }
    }
    matvec_columns_generic(m, n, x, y, ncols);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn solve_columns_avx512(
    lu: &[f64],
    perm: &[usize],
    n: usize,
    rhs: &mut [f64],
    ncols: usize,
    scratch: &mut [f64],
) {
    solve_columns_generic(lu, perm, n, rhs, ncols, scratch);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn solve_columns_avx2(
    lu: &[f64],
    perm: &[usize],
    n: usize,
    rhs: &mut [f64],
    ncols: usize,
    scratch: &mut [f64],
) {
    solve_columns_generic(lu, perm, n, rhs, ncols, scratch);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn matvec_columns_avx512(m: &[f64], n: usize, x: &[f64], y: &mut [f64], ncols: usize) {
    matvec_columns_generic(m, n, x, y, ncols);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn matvec_columns_avx2(m: &[f64], n: usize, x: &[f64], y: &mut [f64], ncols: usize) {
    matvec_columns_generic(m, n, x, y, ncols);
}

#[inline(always)]
fn solve_columns_generic(
    lu: &[f64],
    perm: &[usize],
    n: usize,
    rhs: &mut [f64],
    ncols: usize,
    scratch: &mut [f64],
) {
    if n == 0 {
        return;
    }
    let scratch = &mut scratch[..n * COLUMNS];
    let mut chunks = rhs[..n * ncols].chunks_mut(n * COLUMNS);
    for chunk in &mut chunks {
        let w = chunk.len() / n;
        // Gather the permuted right-hand sides.
        for c in 0..w {
            let src = &chunk[c * n..(c + 1) * n];
            let dst = &mut scratch[c * n..(c + 1) * n];
            for (d, &p) in dst.iter_mut().zip(perm) {
                *d = src[p];
            }
        }
        match w {
            4 => solve_block::<4>(lu, n, scratch),
            3 => solve_block::<3>(lu, n, scratch),
            2 => solve_block::<2>(lu, n, scratch),
            _ => solve_block::<1>(lu, n, scratch),
        }
        chunk.copy_from_slice(&scratch[..w * n]);
    }
}

/// Splits the first `W * n` values of `buf` into `W` columns.
#[inline(always)]
fn split_cols<const W: usize>(buf: &mut [f64], n: usize) -> [&mut [f64]; W] {
    let mut rest = &mut buf[..W * n];
    std::array::from_fn(|_| {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(n);
        rest = tail;
        head
    })
}

#[inline(always)]
fn solve_block<const W: usize>(lu: &[f64], n: usize, buf: &mut [f64]) {
    let mut y = split_cols::<W>(buf, n);
    forward::<W>(lu, n, &mut y);
    backward::<W>(lu, n, &mut y);
}

/// Forward substitution with the unit lower factor, four factor columns at a time.
#[inline(always)]
fn forward<const W: usize>(lu: &[f64], n: usize, y: &mut [&mut [f64]; W]) {
    let mut k = 0;
    while k + 4 <= n {
        let c0 = &lu[k * n..(k + 1) * n];
        let c1 = &lu[(k + 1) * n..(k + 2) * n];
        let c2 = &lu[(k + 2) * n..(k + 3) * n];
        let c3 = &lu[(k + 3) * n..(k + 4) * n];
        let mut x = [[0.0f64; 4]; W];
        for (yw, xw) in y.iter_mut().zip(x.iter_mut()) {
            // Finish y_k .. y_{k+3} inside the diagonal block, in the sequential order.
            let x0 = yw[k];
            yw[k + 1] -= c0[k + 1] * x0;
            yw[k + 2] -= c0[k + 2] * x0;
            yw[k + 3] -= c0[k + 3] * x0;
            let x1 = yw[k + 1];
            yw[k + 2] -= c1[k + 2] * x1;
            yw[k + 3] -= c1[k + 3] * x1;
            let x2 = yw[k + 2];
            yw[k + 3] -= c2[k + 3] * x2;
            let x3 = yw[k + 3];
            *xw = [x0, x1, x2, x3];
        }
        let (c0, c1, c2, c3) = (&c0[k + 4..], &c1[k + 4..], &c2[k + 4..], &c3[k + 4..]);
        for (yw, xw) in y.iter_mut().zip(x.iter()) {
            let t = &mut yw[k + 4..];
            let [x0, x1, x2, x3] = *xw;
            for ((((ti, &a0), &a1), &a2), &a3) in t.iter_mut().zip(c0).zip(c1).zip(c2).zip(c3) {
                *ti = *ti - a0 * x0 - a1 * x1 - a2 * x2 - a3 * x3;
            }
        }
        k += 4;
    }
    while k < n {
        let c = &lu[k * n + k + 1..(k + 1) * n];
        for yw in y.iter_mut() {
            let x = yw[k];
            for (ti, &a) in yw[k + 1..].iter_mut().zip(c) {
                *ti -= a * x;
            }
        }
        k += 1;
    }
}

/// Back substitution with the upper factor, four factor columns at a time.
#[inline(always)]
fn backward<const W: usize>(lu: &[f64], n: usize, y: &mut [&mut [f64]; W]) {
    let mut k = n; // columns k.. are done
    while k >= 4 {
        let j = k - 4; // this round handles columns j+3, j+2, j+1, j (descending)
        let c3 = &lu[(j + 3) * n..(j + 4) * n];
        let c2 = &lu[(j + 2) * n..(j + 3) * n];
        let c1 = &lu[(j + 1) * n..(j + 2) * n];
        let c0 = &lu[j * n..(j + 1) * n];
        let mut x = [[0.0f64; 4]; W];
        for (yw, xw) in y.iter_mut().zip(x.iter_mut()) {
            let x3 = yw[j + 3] / c3[j + 3];
            yw[j + 3] = x3;
            yw[j + 2] -= c3[j + 2] * x3;
            yw[j + 1] -= c3[j + 1] * x3;
            yw[j] -= c3[j] * x3;
            let x2 = yw[j + 2] / c2[j + 2];
            yw[j + 2] = x2;
            yw[j + 1] -= c2[j + 1] * x2;
            yw[j] -= c2[j] * x2;
            let x1 = yw[j + 1] / c1[j + 1];
            yw[j + 1] = x1;
            yw[j] -= c1[j] * x1;
            let x0 = yw[j] / c0[j];
            yw[j] = x0;
            *xw = [x3, x2, x1, x0];
        }
        let (c3, c2, c1, c0) = (&c3[..j], &c2[..j], &c1[..j], &c0[..j]);
        for (yw, xw) in y.iter_mut().zip(x.iter()) {
            let t = &mut yw[..j];
            let [x3, x2, x1, x0] = *xw;
            for ((((ti, &a3), &a2), &a1), &a0) in t.iter_mut().zip(c3).zip(c2).zip(c1).zip(c0) {
                *ti = *ti - a3 * x3 - a2 * x2 - a1 * x1 - a0 * x0;
            }
        }
        k = j;
    }
    while k > 0 {
        let j = k - 1;
        let c = &lu[j * n..(j + 1) * n];
        for yw in y.iter_mut() {
            let x = yw[j] / c[j];
            yw[j] = x;
            for (ti, &a) in yw[..j].iter_mut().zip(&c[..j]) {
                *ti -= a * x;
            }
        }
        k = j;
    }
}

#[inline(always)]
fn matvec_columns_generic(m: &[f64], n: usize, x: &[f64], y: &mut [f64], ncols: usize) {
    if n == 0 {
        return;
    }
    let x = &x[..n * ncols];
    let y = &mut y[..n * ncols];
    for (xc, yc) in x.chunks(n * COLUMNS).zip(y.chunks_mut(n * COLUMNS)) {
        match xc.len() / n {
            4 => matvec_block::<4>(m, n, xc, yc),
            3 => matvec_block::<3>(m, n, xc, yc),
            2 => matvec_block::<2>(m, n, xc, yc),
            _ => matvec_block::<1>(m, n, xc, yc),
        }
    }
}

#[inline(always)]
fn matvec_block<const W: usize>(m: &[f64], n: usize, x: &[f64], y: &mut [f64]) {
    let mut yw = split_cols::<W>(y, n);
    for col in yw.iter_mut() {
        col.fill(0.0);
    }
    let mut k = 0;
    while k + 4 <= n {
        let c0 = &m[k * n..(k + 1) * n];
        let c1 = &m[(k + 1) * n..(k + 2) * n];
        let c2 = &m[(k + 2) * n..(k + 3) * n];
        let c3 = &m[(k + 3) * n..(k + 4) * n];
        for (w, col) in yw.iter_mut().enumerate() {
            let xs = &x[w * n + k..w * n + k + 4];
            let (x0, x1, x2, x3) = (xs[0], xs[1], xs[2], xs[3]);
            for ((((ti, &a0), &a1), &a2), &a3) in col.iter_mut().zip(c0).zip(c1).zip(c2).zip(c3) {
                *ti = *ti + a0 * x0 + a1 * x1 + a2 * x2 + a3 * x3;
            }
        }
        k += 4;
    }
    while k < n {
        let c = &m[k * n..(k + 1) * n];
        for (w, col) in yw.iter_mut().enumerate() {
            let xk = x[w * n + k];
            for (ti, &a) in col.iter_mut().zip(c) {
                *ti += a * xk;
            }
        }
        k += 1;
    }
}
