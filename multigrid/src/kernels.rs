//! Row kernels of the constant-coefficient 7-point stencil (red-black
//! smoothing, residual, operator application), portable and AVX2, chosen at
//! run time.
//!
//! Every kernel performs, for every cell, the same IEEE operations in the
//! same order in both versions (no fused multiply-add, no reassociation), so
//! the AVX2 and portable kernels give the same bits; `tests` checks it on
//! odd row lengths and every colour offset.
//!
//! A red-black half-sweep updates cells of one colour, which read only
//! cells of the other colour. The AVX2 kernel computes four consecutive
//! cells of a row at once (both colours, contiguous loads) and blends the
//! new values of the updated colour with the old values of the other
//! before storing, so a cell of the other colour is written back unchanged
//! and the values the updated cells read are never modified in the pass.

/// The instruction set the row kernels use. With [`Isa::Avx512`], the
/// smoothing and residual rows run on AVX-512F, eight cells at a time, and
/// the rest on AVX2.
pub(crate) use simd::Isa;

/// The constants of one row of the constant-coefficient stencil: the
/// per-axis weights `1/h²`, the diagonal of the row's cells without the
/// wall term of the fast axis (`dij`) and that wall term per padded index
/// (`wall2`, non-zero only next to a Dirichlet or Neumann face).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConstRow<'a> {
    pub ih2: [f64; 3],
    pub dij: f64,
    pub wall2: &'a [f64],
    /// Strides of the first two axes.
    pub s0: usize,
    pub s1: usize,
}

/// Checks that every cell `row + k`, `k` in `lo..hi`, and its six
/// neighbours lie inside a buffer of `len` values (and `wall2` covers
/// `lo..hi`): the contract of the unchecked AVX2 loads and stores.
#[inline]
fn check_bounds(c: &ConstRow<'_>, row: usize, lo: usize, hi: usize, len: usize) {
    if lo < hi {
        assert!(
            row + lo >= c.s0.max(c.s1).max(1)
                && row + hi + c.s0.max(c.s1) <= len
                && hi <= c.wall2.len(),
            "row kernel out of bounds"
        );
    }
}

/// The neighbour sum of cell `x`, in the order every kernel uses.
#[inline(always)]
fn nb_scalar(c: &ConstRow<'_>, u: &[f64], x: usize) -> f64 {
    c.ih2[0] * (u[x - c.s0] + u[x + c.s0])
        + c.ih2[1] * (u[x - c.s1] + u[x + c.s1])
        + c.ih2[2] * (u[x - 1] + u[x + 1])
}

/// Over-relaxed Gauss-Seidel update of cell `x` (`inv` the inverse
/// diagonal).
#[inline(always)]
fn relax_scalar(c: &ConstRow<'_>, u: &mut [f64], f: &[f64], x: usize, inv: f64, omega: f64) {
    let gs = (f[x] + nb_scalar(c, u, x)) * inv;
    u[x] = if omega == 1.0 {
        gs
    } else {
        u[x] + omega * (gs - u[x])
    };
}

/// Red-black update of the cells `row + k` for `k = k0, k0 + 2, ... < hi`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn smooth_row(
    simd: Isa,
    c: &ConstRow<'_>,
    u: &mut [f64],
    f: &[f64],
    row: usize,
    k0: usize,
    hi: usize,
    omega: f64,
) {
    if k0 >= hi {
        return;
    }
    check_bounds(c, row, k0, hi, u.len().min(f.len()));
    #[cfg(target_arch = "x86_64")]
    if simd == Isa::Avx512 && row + hi + 8 + c.s0.max(c.s1) <= u.len().min(f.len()) {
        // SAFETY: `Isa::detect` found AVX-512F on this CPU; `check_bounds`
        // and the condition above cover the cells `k0..hi`, their
        // neighbours, and whole chunks of eight from `k0` (up to `hi + 7`,
        // read but not written).
        // (One row: its diagonal `c.dij + 0.0` is `c.dij`, which is
        // positive.)
        unsafe { avx512::smooth_rows(c, c.dij, &[0.0], u, f, row, k0, 0, hi, omega) };
        return;
    }
    let inv_mid = 1.0 / c.dij;
    // The cells next to a wall of the fast axis (their own diagonal) are
    // done one at a time; the rest of the row shares `inv_mid`.
    // Updated cells: lo, lo + 2, ... below end.
    let mut lo = k0;
    let mut end = k0 + (hi - 1 - k0) / 2 * 2 + 1;
    while lo < end && c.wall2[lo] != 0.0 {
        relax_scalar(c, u, f, row + lo, 1.0 / (c.dij + c.wall2[lo]), omega);
        lo += 2;
    }
    while lo < end && c.wall2[end - 1] != 0.0 {
        let k = end - 1;
        relax_scalar(c, u, f, row + k, 1.0 / (c.dij + c.wall2[k]), omega);
        end = k.saturating_sub(1);
    }
    if lo >= end {
        return;
    }
    debug_assert!((lo..end).step_by(2).all(|k| c.wall2[k] == 0.0));
    match simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::detect` found AVX2 on this CPU (this crate's `Isa` values come
        // from it alone), and `check_bounds` above checked every cell and
        // neighbour of `lo..end` (a sub-range of `k0..hi`).
        Isa::Avx2 => unsafe { avx2::smooth(c, u, f, row, lo, end, inv_mid, omega) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 is present with AVX-512 (Isa::detect checks both);
        // bounds as above.
        // (Avx512 near the end of the array: the AVX2 kernel.)
        Isa::Avx512 => unsafe { avx2::smooth(c, u, f, row, lo, end, inv_mid, omega) },
        _ => {
            for k in (lo..end).step_by(2) {
                relax_scalar(c, u, f, row + k, inv_mid, omega);
            }
        }
    }
}

/// [`smooth_row`] on `wall1.len()` rows in turn: row `t` starts at
/// `row0 + t c.s1`, has the diagonal `base + wall1[t]` (`c.dij` is not
/// used; the same sum as the per-row `dij` when `base` holds the terms
/// before the second axis's wall term) and the cells of the colour from
/// `k0 = lo + (par + t) % 2` below `hi`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn smooth_rows(
    simd: Isa,
    c: &ConstRow<'_>,
    base: f64,
    wall1: &[f64],
    u: &mut [f64],
    f: &[f64],
    row0: usize,
    lo: usize,
    par: usize,
    hi: usize,
    omega: f64,
) {
    let rows = wall1.len();
    if rows == 0 || lo >= hi {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let len = u.len().min(f.len());
        let last = row0 + (rows - 1) * c.s1;
        // The first and the last row (rows in between lie between them).
        check_bounds(c, row0, lo, hi, len);
        check_bounds(c, last, lo, hi, len);
        if simd == Isa::Avx512 && last + hi + 8 + c.s0.max(c.s1) <= len {
            // SAFETY: `Isa::detect` found AVX-512F on this CPU; the checks
            // above cover, in every row, the cells `lo..hi` (so `k0..hi`),
            // their neighbours and whole chunks of eight from `k0` (up to
            // `hi + 7`, read but not written).
            unsafe { avx512::smooth_rows(c, base, wall1, u, f, row0, lo, par, hi, omega) };
            return;
        }
    }
    for (t, &w1) in wall1.iter().enumerate() {
        let ct = ConstRow {
            dij: base + w1,
            ..*c
        };
        smooth_row(
            simd,
            &ct,
            u,
            f,
            row0 + t * c.s1,
            lo + (par + t) % 2,
            hi,
            omega,
        );
    }
}

/// `out[o + k - lo] = f[row + k] - (A u)[row + k]` for `k` in `lo..hi`
/// (`f = None`: `out = A u`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn residual_row(
    simd: Isa,
    c: &ConstRow<'_>,
    u: &[f64],
    f: Option<&[f64]>,
    row: usize,
    lo: usize,
    hi: usize,
    out: &mut [f64],
) {
    if lo >= hi {
        return;
    }
    check_bounds(c, row, lo, hi, u.len());
    let out = &mut out[..hi - lo];
    if let Some(f) = f {
        assert!(row + hi <= f.len(), "row kernel out of bounds");
    }
    match simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 was detected (Isa::detect checks it for both sets);
        // `check_bounds` checked `u` and `wall2`, the assertion `f`, and
        // `out` has `hi - lo` values.
        Isa::Avx2 => unsafe { avx2::residual(c, u, f, row, lo, hi, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::detect` found AVX-512F on this CPU; bounds as for
        // AVX2 (the last step's loads and store are masked to `lo..hi`).
        Isa::Avx512 => unsafe { avx512::residual(c, u, f, row, lo, hi, out) },
        _ => {
            for k in lo..hi {
                let x = row + k;
                let d = c.dij + c.wall2[k];
                let au = d * u[x] - nb_scalar(c, u, x);
                out[k - lo] = match f {
                    Some(f) => f[x] - au,
                    None => au,
                };
            }
        }
    }
}

/// Trilinear weights of the prolongation: the parent, a face neighbour, an
/// edge neighbour, the corner neighbour of the parent.
const W: [f64; 4] = [27.0 / 64.0, 9.0 / 64.0, 3.0 / 64.0, 1.0 / 64.0];

/// Adds the trilinear interpolation of the coarse field `c` to the fine
/// row `fine` (even length): fine cell `k` lies in coarse cell
/// `x0 + k / 2`, its neighbours along the first two axes towards the fine
/// cell are at offsets `di` and `dj`, and along the fast axis at `-1` for
/// even `k`, `+1` for odd `k`.
pub(crate) fn prolong_row(simd: Isa, c: &[f64], x0: usize, di: isize, dj: isize, fine: &mut [f64]) {
    let n = fine.len() / 2;
    if n == 0 {
        return;
    }
    let reach = di.unsigned_abs() + dj.unsigned_abs() + 1;
    assert!(
        fine.len().is_multiple_of(2) && x0 >= reach && x0 + n + reach <= c.len(),
        "prolongation row out of bounds"
    );
    match simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 was detected (Isa::Avx2 and Isa::Avx512 come from
        // Isa::detect only, which checks AVX2 for both); the assertion
        // above covers every coarse value read.
        Isa::Avx2 | Isa::Avx512 => unsafe { avx2::prolong(c, x0, di, dj, fine) },
        _ => {
            for (k, v) in fine.iter_mut().enumerate() {
                *v += prolong_cell(c, x0 + k / 2, di, dj, if k % 2 == 0 { -1 } else { 1 });
            }
        }
    }
}

/// The interpolated value of one fine cell (see [`prolong_row`]).
#[inline(always)]
fn prolong_cell(c: &[f64], x: usize, di: isize, dj: isize, dk: isize) -> f64 {
    let at = |o: isize| c[x.wrapping_add_signed(o)];
    W[0] * at(0)
        + W[1] * (at(di) + at(dj) + at(dk))
        + W[2] * (at(di + dj) + at(di + dk) + at(dj + dk))
        + W[3] * at(di + dj + dk)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::ConstRow;
    use std::arch::x86_64::*;

    /// The neighbour sum of the four cells at `p` (same order as
    /// `nb_scalar`).
    ///
    /// # Safety
    /// AVX2 present; `p - s0 .. p + s0 + 4` (and the same for `s1`, 1)
    /// readable.
    #[inline(always)]
    unsafe fn nb(c: &ConstRow<'_>, p: *const f64, w: [__m256d; 3]) -> __m256d {
        // SAFETY: the caller's contract.
        unsafe {
            let a = _mm256_add_pd(_mm256_loadu_pd(p.sub(c.s0)), _mm256_loadu_pd(p.add(c.s0)));
            let b = _mm256_add_pd(_mm256_loadu_pd(p.sub(c.s1)), _mm256_loadu_pd(p.add(c.s1)));
            let e = _mm256_add_pd(_mm256_loadu_pd(p.sub(1)), _mm256_loadu_pd(p.add(1)));
            _mm256_add_pd(
                _mm256_add_pd(_mm256_mul_pd(w[0], a), _mm256_mul_pd(w[1], b)),
                _mm256_mul_pd(w[2], e),
            )
        }
    }

    /// Red-black update of `row + k`, `k = lo, lo + 2, ... < hi`, with the
    /// common inverse diagonal `inv`.
    ///
    /// # Safety
    /// AVX2 present; every cell `row + k`, `k` in `lo..hi`, and its six
    /// neighbours inside `u` and `f` (what `check_bounds` asserts).
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn smooth(
        c: &ConstRow<'_>,
        u: &mut [f64],
        f: &[f64],
        row: usize,
        lo: usize,
        hi: usize,
        inv: f64,
        omega: f64,
    ) {
        let w = [
            _mm256_set1_pd(c.ih2[0]),
            _mm256_set1_pd(c.ih2[1]),
            _mm256_set1_pd(c.ih2[2]),
        ];
        let vinv = _mm256_set1_pd(inv);
        let vom = _mm256_set1_pd(omega);
        let up = u.as_mut_ptr();
        let fp = f.as_ptr();
        // Chunks of four cells from `lo`: lanes 0 and 2 have the colour.
        // The fast-axis neighbours come from registers rather than from
        // loads at `p - 1` and `p + 1`: a load at `p - 1` would overlap the
        // previous chunk's store and stall. The colour cells need only the
        // values of the other colour, which the pass never changes: `prev`
        // (the previous chunk before its update) gives lane 0's left
        // neighbour, and lane 3's right neighbour (other colour) is unused.
        let mut k = lo;
        // SAFETY: `lo - 1` is the left neighbour of cell `lo` (contract).
        let mut prev = unsafe { _mm256_set1_pd(*up.add(row + lo - 1)) };
        while k + 4 <= hi {
            // SAFETY: cells k .. k + 3 lie in lo..hi (the caller's
            // contract covers them and their neighbours).
            unsafe {
                let p = up.add(row + k);
                let old = _mm256_loadu_pd(p);
                // [prev3, old0, old1, old2] and [old1, old2, old3, old0].
                let left =
                    _mm256_shuffle_pd::<0b0101>(_mm256_permute2f128_pd::<0x21>(prev, old), old);
                let right =
                    _mm256_shuffle_pd::<0b0101>(old, _mm256_permute2f128_pd::<0x01>(old, old));
                let a = _mm256_add_pd(_mm256_loadu_pd(p.sub(c.s0)), _mm256_loadu_pd(p.add(c.s0)));
                let b = _mm256_add_pd(_mm256_loadu_pd(p.sub(c.s1)), _mm256_loadu_pd(p.add(c.s1)));
                let e = _mm256_add_pd(left, right);
                let nb = _mm256_add_pd(
                    _mm256_add_pd(_mm256_mul_pd(w[0], a), _mm256_mul_pd(w[1], b)),
                    _mm256_mul_pd(w[2], e),
                );
                let gs = _mm256_mul_pd(_mm256_add_pd(_mm256_loadu_pd(fp.add(row + k)), nb), vinv);
                let new = if omega == 1.0 {
                    gs
                } else {
                    _mm256_add_pd(old, _mm256_mul_pd(vom, _mm256_sub_pd(gs, old)))
                };
                _mm256_storeu_pd(p, _mm256_blend_pd::<0b0101>(old, new));
                prev = old;
            }
            k += 4;
        }
        // The last one or two cells of the colour (k, k + 2 < hi).
        while k < hi {
            super::relax_scalar(c, u, f, row + k, inv, omega);
            k += 2;
        }
    }

    /// [`super::prolong_row`] on four coarse cells (eight fine cells) at a
    /// time.
    ///
    /// # Safety
    /// AVX2 present; `fine.len()` even and the coarse cells
    /// `x0 - reach .. x0 + fine.len() / 2 + reach` inside `c`, with
    /// `reach = |di| + |dj| + 1`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn prolong(c: &[f64], x0: usize, di: isize, dj: isize, fine: &mut [f64]) {
        use super::W;
        let n = fine.len() / 2;
        let w = W.map(|x| _mm256_set1_pd(x));
        let cp = c.as_ptr();
        let fp = fine.as_mut_ptr();
        let mut m = 0;
        while m + 4 <= n {
            // SAFETY: coarse cells x0 + m - reach .. x0 + m + 4 + reach and
            // fine cells 2 m .. 2 m + 8 are in bounds (the contract).
            unsafe {
                let base = cp.add(x0 + m);
                let ld = |o: isize| _mm256_loadu_pd(base.offset(o));
                let side = |dk: isize| {
                    let f =
                        _mm256_mul_pd(w[1], _mm256_add_pd(_mm256_add_pd(ld(di), ld(dj)), ld(dk)));
                    let e = _mm256_mul_pd(
                        w[2],
                        _mm256_add_pd(_mm256_add_pd(ld(di + dj), ld(di + dk)), ld(dj + dk)),
                    );
                    _mm256_add_pd(
                        _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(w[0], ld(0)), f), e),
                        _mm256_mul_pd(w[3], ld(di + dj + dk)),
                    )
                };
                let (even, odd) = (side(-1), side(1));
                let lo = _mm256_unpacklo_pd(even, odd);
                let hi = _mm256_unpackhi_pd(even, odd);
                let p = fp.add(2 * m);
                let first = _mm256_permute2f128_pd::<0x20>(lo, hi);
                let second = _mm256_permute2f128_pd::<0x31>(lo, hi);
                _mm256_storeu_pd(p, _mm256_add_pd(_mm256_loadu_pd(p), first));
                _mm256_storeu_pd(p.add(4), _mm256_add_pd(_mm256_loadu_pd(p.add(4)), second));
            }
            m += 4;
        }
        for k in 2 * m..2 * n {
            fine[k] += super::prolong_cell(c, x0 + k / 2, di, dj, if k % 2 == 0 { -1 } else { 1 });
        }
    }

    /// `out[k - lo] = f[row + k] - (A u)[row + k]` (or `(A u)` without `f`).
    ///
    /// # Safety
    /// AVX2 present; the cells `row + lo .. row + hi` and their neighbours
    /// inside `u`, the cells inside `f`, `wall2` covering `lo..hi`, and
    /// `out.len() == hi - lo`.
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn residual(
        c: &ConstRow<'_>,
        u: &[f64],
        f: Option<&[f64]>,
        row: usize,
        lo: usize,
        hi: usize,
        out: &mut [f64],
    ) {
        let w = [
            _mm256_set1_pd(c.ih2[0]),
            _mm256_set1_pd(c.ih2[1]),
            _mm256_set1_pd(c.ih2[2]),
        ];
        let vd = _mm256_set1_pd(c.dij);
        let up = u.as_ptr();
        let wp = c.wall2.as_ptr();
        let op = out.as_mut_ptr();
        let mut k = lo;
        while k + 4 <= hi {
            // SAFETY: cells k .. k + 3 lie in lo..hi (the contract).
            unsafe {
                let p = up.add(row + k);
                let d = _mm256_add_pd(vd, _mm256_loadu_pd(wp.add(k)));
                let au = _mm256_sub_pd(_mm256_mul_pd(d, _mm256_loadu_pd(p)), nb(c, p, w));
                let v = match f {
                    Some(f) => _mm256_sub_pd(_mm256_loadu_pd(f.as_ptr().add(row + k)), au),
                    None => au,
                };
                _mm256_storeu_pd(op.add(k - lo), v);
            }
            k += 4;
        }
        for k in k..hi {
            let x = row + k;
            let d = c.dij + c.wall2[k];
            let au = d * u[x] - super::nb_scalar(c, u, x);
            out[k - lo] = match f {
                Some(f) => f[x] - au,
                None => au,
            };
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::ConstRow;
    use std::arch::x86_64::*;

    /// `out[k - lo] = f[row + k] - (A u)[row + k]` (or `(A u)` without
    /// `f`), eight cells a step; a last step of fewer than eight cells has
    /// its loads and store masked to `lo..hi`. Whole steps use plain loads:
    /// masked loads are much slower on some CPUs (AMD Zen 5: at 128³ this
    /// row took about 1.6 instead of 2.6-2.9 ns per cell with them).
    ///
    /// # Safety
    /// AVX-512F present; the cells `row + lo .. row + hi` and their
    /// neighbours inside `u`, the cells inside `f`, `wall2` covering
    /// `lo..hi`, and `out.len() == hi - lo`.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn residual(
        c: &ConstRow<'_>,
        u: &[f64],
        f: Option<&[f64]>,
        row: usize,
        lo: usize,
        hi: usize,
        out: &mut [f64],
    ) {
        let w = [
            _mm512_set1_pd(c.ih2[0]),
            _mm512_set1_pd(c.ih2[1]),
            _mm512_set1_pd(c.ih2[2]),
        ];
        let vd = _mm512_set1_pd(c.dij);
        let up = u.as_ptr();
        let wp = c.wall2.as_ptr();
        let op = out.as_mut_ptr();
        let mut k = lo;
        while k < hi {
            let m: __mmask8 = if hi - k >= 8 {
                0xff
            } else {
                (1u8 << (hi - k)) - 1
            };
            // SAFETY: every load and the store covers the cells
            // k .. min(k + 8, hi) of `lo..hi` only: a whole step (`m` all
            // ones) has k + 8 <= hi, a shorter one is masked, and masked-off
            // lanes are not accessed (the contract covers these cells, their
            // neighbours, `wall2` and `out`).
            unsafe {
                let p = up.add(row + k);
                simd::prefetch_read(p.wrapping_add(c.s0 + PF * c.s1));
                if let Some(f) = f {
                    simd::prefetch_read(f.as_ptr().wrapping_add(row + k + PF * c.s1));
                }
                let ld = |q: *const f64| {
                    if m == 0xff {
                        _mm512_loadu_pd(q)
                    } else {
                        _mm512_maskz_loadu_pd(m, q)
                    }
                };
                let a = _mm512_add_pd(ld(p.sub(c.s0)), ld(p.add(c.s0)));
                let b = _mm512_add_pd(ld(p.sub(c.s1)), ld(p.add(c.s1)));
                let e = _mm512_add_pd(ld(p.sub(1)), ld(p.add(1)));
                let nb = _mm512_add_pd(
                    _mm512_add_pd(_mm512_mul_pd(w[0], a), _mm512_mul_pd(w[1], b)),
                    _mm512_mul_pd(w[2], e),
                );
                let d = _mm512_add_pd(vd, ld(wp.add(k)));
                let au = _mm512_sub_pd(_mm512_mul_pd(d, ld(p)), nb);
                let v = match f {
                    Some(f) => _mm512_sub_pd(ld(f.as_ptr().add(row + k)), au),
                    None => au,
                };
                _mm512_mask_storeu_pd(op.add(k - lo), m, v);
            }
            k += 8;
        }
    }

    /// Rows ahead that the AVX-512 smoother and residual ask for the next
    /// plane's row of `u` (and the row of `f`) in the L1: the plane a pass
    /// meets first comes from memory, and the core's own prefetchers left
    /// the loads waiting. 128³, `poisson --solver mg --ranks 1`, alternated
    /// builds, same hash: level-0 smoothing 0.106-0.108 -> 0.092-0.093 s a
    /// solve (2, 4 and 8 rows ahead alike, 1 row 0.095-0.101), residual
    /// 0.054-0.056 -> 0.049-0.051 s; a V-cycle 26.0-26.2 -> 23.2-23.8 ms.
    const PF: usize = 4;

    /// Red-black update of one row per value of `wall1`: row `t` starts at
    /// `row0 + t s1`, its diagonal without the fast-axis wall term is
    /// `base + wall1[t]` (`c.dij` is not used) and its cells of the colour
    /// are `k0, k0 + 2, ... < hi` with `k0 = lo + (par + t) % 2`. Eight
    /// cells per step from `k0`, lanes 0, 2, 4, 6 of the colour, stored
    /// through a mask (other lanes, and lanes from `hi` on, are not
    /// written). A step holding a cell next to a wall of the fast axis
    /// divides for its own diagonal, `1 / (dij + wall2[k])`, as the portable
    /// kernel does; the others share `1 / dij`. Fast-axis neighbours come
    /// from registers, as in the AVX2 kernel. The rows run inside one call:
    /// the per-row set-up of a call (about 10 ns) was a tenth of a 128-cell
    /// row's time.
    ///
    /// # Safety
    /// AVX-512F present; in every row, every cell `k` in `lo..hi + 8`, and
    /// its six neighbours, inside `u` and `f`; `wall2` covers `lo..hi`.
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn smooth_rows(
        c: &ConstRow<'_>,
        base: f64,
        wall1: &[f64],
        u: &mut [f64],
        f: &[f64],
        row0: usize,
        lo: usize,
        par: usize,
        hi: usize,
        omega: f64,
    ) {
        let w = [
            _mm512_set1_pd(c.ih2[0]),
            _mm512_set1_pd(c.ih2[1]),
            _mm512_set1_pd(c.ih2[2]),
        ];
        let one = _mm512_set1_pd(1.0);
        let vom = _mm512_set1_pd(omega);
        // left[i] = old[i - 1] (lane 0: prev[7]); right[i] = old[i + 1]
        // (lane 7, of the other colour, unused).
        let to_left = _mm512_setr_epi64(15, 0, 1, 2, 3, 4, 5, 6);
        let to_right = _mm512_setr_epi64(1, 2, 3, 4, 5, 6, 7, 0);
        let up = u.as_mut_ptr();
        let fp = f.as_ptr();
        let wp = c.wall2.as_ptr();
        // The cells `clear_lo..clear_hi` (within `lo..hi`) have no wall term
        // of the fast axis (`wall2` is zero there; non-zero only next to a
        // wall, at the ends of the rows): the same in every row.
        let w2 = &c.wall2[lo..hi];
        let clear_lo = lo + w2.iter().position(|&v| v == 0.0).unwrap_or(w2.len());
        let clear_hi = clear_lo
            + c.wall2[clear_lo..hi]
                .iter()
                .position(|&v| v != 0.0)
                .unwrap_or(hi - clear_lo);
        // The inverse diagonal changes only next to walls of the first two
        // axes: divide only when the diagonal changes (the same quotient).
        let mut last = (f64::NAN, 0.0);
        for (t, &w1) in wall1.iter().enumerate() {
            let dij = base + w1;
            if dij.to_bits() != last.0.to_bits() {
                last = (dij, 1.0 / dij);
            }
            let vd = _mm512_set1_pd(dij);
            let inv_mid = _mm512_set1_pd(last.1);
            let row = row0 + t * c.s1;
            let k0 = lo + (par + t) % 2;
            let mut k = k0;
            if k >= hi {
                continue;
            }
            // SAFETY: `k0 - 1` is the left neighbour of cell `k0` (contract).
            let mut prev = unsafe { _mm512_set1_pd(*up.add(row + k0 - 1)) };
            while k < hi {
                // A whole step inside the wall-free cells: the row's common
                // inverse diagonal, every colour lane written (the same
                // operations as the general step, without its mask and
                // wall tests).
                let clear = k >= clear_lo && k + 8 <= clear_hi;
                // Lanes below `hi`, and of those the colour's.
                let live: __mmask8 = if clear || hi - k >= 8 {
                    0xff
                } else {
                    (1u8 << (hi - k)) - 1
                };
                // SAFETY: cells k .. k + 7 and their neighbours are readable
                // (contract); only colour lanes below `hi` are written, and
                // `wall2` is read below `hi` only.
                unsafe {
                    let p = up.add(row + k);
                    simd::prefetch_read(p.wrapping_add(c.s0 + PF * c.s1));
                    simd::prefetch_read(fp.wrapping_add(row + k + PF * c.s1));
                    let old = _mm512_loadu_pd(p);
                    let inv = if clear {
                        inv_mid
                    } else {
                        let walls = _mm512_maskz_loadu_pd(live, wp.add(k));
                        if _mm512_cmpneq_pd_mask(walls, _mm512_setzero_pd()) == 0 {
                            inv_mid
                        } else {
                            _mm512_div_pd(one, _mm512_add_pd(vd, walls))
                        }
                    };
                    let left = _mm512_permutex2var_pd(old, to_left, prev);
                    let right = _mm512_permutexvar_pd(to_right, old);
                    let a =
                        _mm512_add_pd(_mm512_loadu_pd(p.sub(c.s0)), _mm512_loadu_pd(p.add(c.s0)));
                    let b =
                        _mm512_add_pd(_mm512_loadu_pd(p.sub(c.s1)), _mm512_loadu_pd(p.add(c.s1)));
                    let e = _mm512_add_pd(left, right);
                    let nb = _mm512_add_pd(
                        _mm512_add_pd(_mm512_mul_pd(w[0], a), _mm512_mul_pd(w[1], b)),
                        _mm512_mul_pd(w[2], e),
                    );
                    let gs =
                        _mm512_mul_pd(_mm512_add_pd(_mm512_loadu_pd(fp.add(row + k)), nb), inv);
                    let new = if omega == 1.0 {
                        gs
                    } else {
                        _mm512_add_pd(old, _mm512_mul_pd(vom, _mm512_sub_pd(gs, old)))
                    };
                    _mm512_mask_storeu_pd(p, 0x55 & live, new);
                    prev = old;
                }
                k += 8;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic values in [-1, 1).
    fn noise(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 11) as f64 / (1u64 << 52) as f64 - 1.0
            })
            .collect()
    }

    /// A padded `p0 x p1 x p2` box with a row in the middle and a wall term
    /// on both ends of the fast axis.
    fn setup(p2: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>, usize, usize) {
        let (s1, s0) = (p2, p2 * 5);
        let len = s0 * 5;
        let mut wall2 = vec![0.0; p2];
        wall2[1] = 3.5;
        wall2[p2 - 2] = -1.25;
        (
            noise(len, p2 as u64),
            noise(len, 7 + p2 as u64),
            wall2,
            s0,
            s1,
        )
    }

    #[test]
    fn simd_smoothing_matches_portable_bit_for_bit() {
        let sets: Vec<Isa> = Isa::available_all().collect();
        if sets.len() == 1 {
            eprintln!("no AVX2 on this CPU: only the portable kernel exists");
        }
        for p2 in [5, 6, 7, 8, 9, 12, 13, 17, 22, 35] {
            let (u0, f, wall2, s0, s1) = setup(p2);
            let c = ConstRow {
                ih2: [1.3, 0.7, 2.9],
                dij: 7.7,
                wall2: &wall2,
                s0,
                s1,
            };
            let row = 2 * s0 + 2 * s1;
            for omega in [1.0, 1.15] {
                for k0 in 1..4 {
                    for hi in k0..p2 {
                        let mut a = u0.clone();
                        smooth_row(Isa::Portable, &c, &mut a, &f, row, k0, hi, omega);
                        for &simd in &sets[1..] {
                            let mut b = u0.clone();
                            smooth_row(simd, &c, &mut b, &f, row, k0, hi, omega);
                            let same = a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits());
                            assert!(same, "{simd:?}: p2 {p2} k0 {k0} hi {hi} omega {omega}");
                        }
                        let b = a;
                        // Cells of the other colour keep their bits.
                        for k in 0..p2 {
                            if k < k0 || k >= hi || (k - k0) % 2 == 1 {
                                assert_eq!(b[row + k].to_bits(), u0[row + k].to_bits());
                            }
                        }
                        if hi > k0 + 4 {
                            assert_ne!(b[row + k0 + 4], u0[row + k0 + 4]);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn rows_in_one_call_equal_row_by_row() {
        // Several rows with their own second-axis wall terms and alternating
        // colour offsets, against the portable kernel row by row.
        for p2 in [7, 12, 22, 35] {
            let (u0, f, wall2, s0, s1) = setup(p2);
            let c = ConstRow {
                ih2: [1.3, 0.7, 2.9],
                dij: f64::NAN,
                wall2: &wall2,
                s0,
                s1,
            };
            let wall1 = [2.5, 0.0, 0.0, -0.75];
            let base = 7.7;
            let row0 = 2 * s0 + s1;
            for omega in [1.0, 1.15] {
                for (lo, par) in [(1, 0), (1, 1), (2, 0), (2, 1)] {
                    for hi in lo..p2 {
                        let mut a = u0.clone();
                        for (t, &w1) in wall1.iter().enumerate() {
                            let ct = ConstRow {
                                dij: base + w1,
                                ..c
                            };
                            let k0 = lo + (par + t) % 2;
                            smooth_row(
                                Isa::Portable,
                                &ct,
                                &mut a,
                                &f,
                                row0 + t * s1,
                                k0,
                                hi,
                                omega,
                            );
                        }
                        for simd in Isa::available_all() {
                            let mut b = u0.clone();
                            smooth_rows(
                                simd, &c, base, &wall1, &mut b, &f, row0, lo, par, hi, omega,
                            );
                            let same = a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits());
                            assert!(
                                same,
                                "{simd:?}: p2 {p2} lo {lo} par {par} hi {hi} omega {omega}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn simd_residual_matches_portable_bit_for_bit() {
        let sets: Vec<Isa> = Isa::available_all().collect();
        for p2 in [5, 6, 7, 9, 11, 16, 19, 33] {
            let (u, f, wall2, s0, s1) = setup(p2);
            let c = ConstRow {
                ih2: [1.3, 0.7, 2.9],
                dij: 7.7,
                wall2: &wall2,
                s0,
                s1,
            };
            let row = 2 * s0 + 2 * s1;
            for lo in 1..3 {
                for hi in lo..p2 {
                    for with_f in [true, false] {
                        let fo = with_f.then_some(&f[..]);
                        let mut a = vec![0.0; p2];
                        residual_row(Isa::Portable, &c, &u, fo, row, lo, hi, &mut a);
                        for &simd in &sets[1..] {
                            let mut b = vec![0.0; p2];
                            residual_row(simd, &c, &u, fo, row, lo, hi, &mut b);
                            assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
                        }
                        // And the value is the stencil's: f - (d u - nb).
                        if hi > lo {
                            let x = row + lo;
                            let d = c.dij + wall2[lo];
                            let au = d * u[x]
                                - (1.3 * (u[x - s0] + u[x + s0])
                                    + 0.7 * (u[x - s1] + u[x + s1])
                                    + 2.9 * (u[x - 1] + u[x + 1]));
                            let want = if with_f { f[x] - au } else { au };
                            assert_eq!(a[0].to_bits(), want.to_bits());
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn simd_prolongation_matches_portable_bit_for_bit() {
        let (s1, s0) = (23, 23 * 5);
        let c = noise(s0 * 5, 3);
        for n in [1, 2, 3, 4, 5, 7, 8, 9, 16, 19] {
            for (di, dj) in [
                (-(s0 as isize), -(s1 as isize)),
                (s0 as isize, -(s1 as isize)),
                (s0 as isize, s1 as isize),
            ] {
                let x0 = 2 * s0 + 2 * s1 + 1;
                let base = noise(2 * n, 5 + n as u64);
                let mut a = base.clone();
                prolong_row(Isa::Portable, &c, x0, di, dj, &mut a);
                // The portable row is the trilinear formula cell by cell.
                for k in 0..2 * n {
                    let x = x0 + k / 2;
                    let dk: isize = if k % 2 == 0 { -1 } else { 1 };
                    let at = |o: isize| c[(x as isize + o) as usize];
                    let v = 27.0 / 64.0 * at(0)
                        + 9.0 / 64.0 * (at(di) + at(dj) + at(dk))
                        + 3.0 / 64.0 * (at(di + dj) + at(di + dk) + at(dj + dk))
                        + 1.0 / 64.0 * at(di + dj + dk);
                    assert_eq!(a[k].to_bits(), (base[k] + v).to_bits());
                }
                for &simd in &Isa::available_all().collect::<Vec<_>>()[1..] {
                    let mut b = base.clone();
                    prolong_row(simd, &c, x0, di, dj, &mut b);
                    assert!(
                        a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
                        "{simd:?} n {n}"
                    );
                }
            }
        }
    }
}
