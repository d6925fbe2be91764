//! The gathers and scatters of strided lines through register tiles.
//!
//! A block of `bl` neighbouring strided lines is an `n x bl` matrix whose
//! rows lie `stride` apart in memory; [`Moves::gather`] writes its
//! transpose into `bl` lines `pitch` apart, and [`Moves::scatter`] the
//! reverse. With AVX-512F the inner tiles are transposed in registers
//! (4 x 4 complex values, 8 x 8 real ones: one 64-byte row of the tile per
//! register); elsewhere, and for the edges of a block that do not fill a
//! tile, values move one at a time. Either way every value is copied
//! unchanged, or multiplied by the same `scale` once, so the bits never
//! depend on the path.

use num_complex::Complex64;

/// The part of a block a register-tile path moved: rows `..k` of lines
/// `lo..hi` (whole tiles). The lines start at `lo` so that the strided
/// rows' tile loads or stores fall on 64-byte boundaries (a load or store
/// across two cache lines costs about twice one within a line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Done {
    k: usize,
    lo: usize,
    hi: usize,
}

/// A register-tile gather: moves whole tiles and returns what it moved.
/// Arguments as [`Moves::gather`]'s.
///
/// # Safety
/// AVX-512F must be present.
#[cfg(target_arch = "x86_64")]
type GatherTiles<T> = unsafe fn(&[T], usize, usize, (usize, usize), usize, &mut [T]) -> Done;

/// A register-tile scatter, as [`GatherTiles`] for [`Moves::scatter`].
///
/// # Safety
/// AVX-512F must be present.
#[cfg(target_arch = "x86_64")]
type ScatterTiles<T> = unsafe fn(&[T], (usize, usize), usize, &mut [T], usize, usize, f64) -> Done;

/// Values of `T` from `p` to the next 64-byte boundary (0 on one), or 0
/// where no whole number of values reaches one (`p` not a multiple of the
/// value's size).
pub(crate) fn to_line_boundary<T>(p: *const T) -> usize {
    let (addr, size) = (p as usize, std::mem::size_of::<T>());
    if addr.is_multiple_of(size) {
        (64 - addr % 64) % 64 / size
    } else {
        0
    }
}

/// The first line `lo` of a row starting at `row` whose tiles of `per` values of
/// `T` begin on a 64-byte boundary (at most `per - 1`, and not past `bl`), and
/// the end `hi` of the whole tiles from there. Rows `stride` apart share it
/// when `stride` is a multiple of `per`; otherwise the row at `row` sets it.
#[cfg(target_arch = "x86_64")]
fn tile_lines<T>(row: *const T, per: usize, bl: usize) -> (usize, usize) {
    let lo = to_line_boundary(row).min(bl);
    (lo, lo + (bl - lo) / per * per)
}

/// A value type the strided transforms move.
pub(crate) trait Moves: Copy + std::ops::Mul<f64, Output = Self> {
    /// The type's register-tile gather and scatter.
    #[cfg(target_arch = "x86_64")]
    const TILES: (GatherTiles<Self>, ScatterTiles<Self>);

    /// `block[t * pitch + k] = src[base + k * stride + t]` for `k < n`,
    /// `t < bl`.
    fn gather(
        src: &[Self],
        base: usize,
        stride: usize,
        np: (usize, usize),
        bl: usize,
        block: &mut [Self],
    ) {
        #[cfg(target_arch = "x86_64")]
        let done = if simd::Isa::Avx512.available() {
            // SAFETY: AVX-512F is present (checked just above).
            unsafe { (Self::TILES.0)(src, base, stride, np, bl, block) }
        } else {
            Done::default()
        };
        #[cfg(not(target_arch = "x86_64"))]
        let done = Done::default();
        gather_scalar(src, base, stride, np, bl, block, done);
    }

    /// `dst[base + k * stride + t] = block[t * pitch + k] * scale` (no
    /// multiplication when `scale` is 1).
    fn scatter(
        block: &[Self],
        np: (usize, usize),
        bl: usize,
        dst: &mut [Self],
        base: usize,
        stride: usize,
        scale: f64,
    ) {
        #[cfg(target_arch = "x86_64")]
        let done = if simd::Isa::Avx512.available() {
            // SAFETY: AVX-512F is present (checked just above).
            unsafe { (Self::TILES.1)(block, np, bl, dst, base, stride, scale) }
        } else {
            Done::default()
        };
        #[cfg(not(target_arch = "x86_64"))]
        let done = Done::default();
        scatter_scalar(block, np, bl, dst, base, stride, scale, done);
    }
}

impl Moves for Complex64 {
    #[cfg(target_arch = "x86_64")]
    const TILES: (GatherTiles<Self>, ScatterTiles<Self>) = (avx512::gather_c, avx512::scatter_c);
}

impl Moves for f64 {
    #[cfg(target_arch = "x86_64")]
    const TILES: (GatherTiles<Self>, ScatterTiles<Self>) = (avx512::gather_r, avx512::scatter_r);
}

/// The values of a complex slice, real and imaginary parts interleaved.
pub(crate) fn flat(c: &[Complex64]) -> &[f64] {
    // SAFETY: `Complex64` is `repr(C)` with two `f64` fields and no
    // padding, so `c` is `2 c.len()` initialised `f64` values with `f64`
    // alignment.
    unsafe { std::slice::from_raw_parts(c.as_ptr().cast(), 2 * c.len()) }
}

/// [`flat`] for a mutable slice.
pub(crate) fn flat_mut(c: &mut [Complex64]) -> &mut [f64] {
    // SAFETY: as in `flat`; the borrow is unique.
    unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr().cast(), 2 * c.len()) }
}

/// Pairs of values of a real slice of even length as complex values (real
/// part first).
pub(crate) fn as_complex(r: &[f64]) -> &[Complex64] {
    assert!(r.len().is_multiple_of(2), "an odd number of real values");
    // SAFETY: as in `as_complex_mut`, for a shared borrow.
    unsafe { std::slice::from_raw_parts(r.as_ptr().cast(), r.len() / 2) }
}

/// Pairs of values of a real slice of even length as complex values (real
/// part first).
pub(crate) fn as_complex_mut(r: &mut [f64]) -> &mut [Complex64] {
    assert!(r.len().is_multiple_of(2), "an odd number of real values");
    // SAFETY: `Complex64` is `repr(C)` with two `f64` fields and no
    // padding, so its alignment is `f64`'s and `r.len() / 2` of them cover
    // exactly the `r.len()` initialised values; the borrow is unique.
    unsafe { std::slice::from_raw_parts_mut(r.as_mut_ptr().cast(), r.len() / 2) }
}

/// Rows of the scalar path moved together.
const TILE: usize = 4;

/// The parts of a block outside `done` (rows `..done.k` of lines
/// `done.lo..done.hi`, which a tiled path already moved): the rows from
/// `done.k` on for every line, and the rows before it for the lines
/// before `done.lo` and from `done.hi` on.
fn rest(done: Done, n: usize, bl: usize) -> [(std::ops::Range<usize>, std::ops::Range<usize>); 3] {
    [
        (0..bl, done.k..n),
        (0..done.lo, 0..done.k),
        (done.hi..bl, 0..done.k),
    ]
}

/// The part of a gather outside `done`, a value at a time.
#[allow(clippy::too_many_arguments)]
fn gather_scalar<T: Copy>(
    src: &[T],
    base: usize,
    stride: usize,
    (n, pitch): (usize, usize),
    bl: usize,
    block: &mut [T],
    done: Done,
) {
    let block = &mut block[..bl * pitch];
    for (lines, rows) in rest(done, n, bl) {
        if lines.is_empty() {
            continue;
        }
        let mut k = rows.start;
        while k + TILE <= rows.end {
            let r: [&[T]; TILE] = std::array::from_fn(|q| &src[base + (k + q) * stride..][..bl]);
            for t in lines.clone() {
                let d: &mut [T; TILE] = (&mut block[t * pitch + k..][..TILE])
                    .try_into()
                    .expect("tile");
                for q in 0..TILE {
                    d[q] = r[q][t];
                }
            }
            k += TILE;
        }
        for k in k..rows.end {
            let r = &src[base + k * stride..][..bl];
            for t in lines.clone() {
                block[t * pitch + k] = r[t];
            }
        }
    }
}

/// The inverse of [`gather_scalar`], over the same part.
#[allow(clippy::too_many_arguments)]
fn scatter_scalar<T: Copy + std::ops::Mul<f64, Output = T>>(
    block: &[T],
    (n, pitch): (usize, usize),
    bl: usize,
    dst: &mut [T],
    base: usize,
    stride: usize,
    scale: f64,
    done: Done,
) {
    let block = &block[..bl * pitch];
    let f = |v: T| if scale == 1.0 { v } else { v * scale };
    for (lines, rows) in rest(done, n, bl) {
        if lines.is_empty() {
            continue;
        }
        for k in rows {
            let row = &mut dst[base + k * stride..][..bl];
            for t in lines.clone() {
                row[t] = f(block[t * pitch + k]);
            }
        }
    }
}

/// The register-tile paths. Each returns the part it moved ([`Done`]), and
/// the caller moves the rest.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::{flat, flat_mut, tile_lines, Done};
    use num_complex::Complex64;
    use simd::prefetch_read as prefetch;
    use simd::x86::{transpose8 as t8, transpose_pairs4 as t4};
    use std::arch::x86_64::*;

    /// Rows ahead of the tile that a gather or scatter prefetches.
    const PF: usize = 8;

    /// Complex gather in 4 x 4 tiles.
    ///
    /// The bounds of every tile are checked once up front; the loops then
    /// address rows through raw pointers (slices of the four rows kept the
    /// compiler short of registers: it reloaded them from the stack at
    /// every tile).
    ///
    /// # Safety
    /// AVX-512F must be present.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn gather_c(
        src: &[Complex64],
        base: usize,
        stride: usize,
        (n, pitch): (usize, usize),
        bl: usize,
        block: &mut [Complex64],
    ) -> Done {
        let k0 = n / 4 * 4;
        let (lo, hi) = tile_lines(src[base..].as_ptr(), 4, bl);
        let done = Done { k: k0, lo, hi };
        if k0 == 0 || lo == hi {
            return done;
        }
        // The last value a tile reads and the last it writes.
        assert!(base + (k0 - 1) * stride + hi <= src.len() && n <= pitch);
        let block = &mut block[..bl * pitch];
        let (sp, bp) = (flat(src).as_ptr(), flat_mut(block).as_mut_ptr());
        for k in (0..k0).step_by(4) {
            // Row k + q of the tiles starts at value `2 (base + (k + q)
            // stride)` of the flat source.
            let row = 2 * (base + k * stride);
            // The rows PF ahead, fetched while these move: rows far apart
            // are short streams the hardware prefetcher does not follow.
            let ahead = (k + PF + 4 <= n).then_some(2 * (base + (k + PF) * stride));
            for t in (lo..hi).step_by(4) {
                if let Some(a) = ahead {
                    for q in 0..4 {
                        prefetch(sp.wrapping_add(a + 2 * (q * stride + t)));
                    }
                }
                // SAFETY: AVX-512F is present (this function's contract);
                // rows k..k + 4 < k0 and values t..t + 4 <= hi of each are
                // inside `src` (asserted above).
                let r: [__m512d; 4] = std::array::from_fn(|q| unsafe {
                    _mm512_loadu_pd(sp.add(row + 2 * (q * stride + t)))
                });
                for (j, c) in t4(r).into_iter().enumerate() {
                    // SAFETY: line t + j < bl, values k..k + 4 <= n <=
                    // pitch of it: inside `block`.
                    unsafe { _mm512_storeu_pd(bp.add(2 * ((t + j) * pitch + k)), c) };
                }
            }
        }
        done
    }

    /// Complex scatter in 4 x 4 tiles (raw pointers after one bounds
    /// check, as [`gather_c`]).
    ///
    /// # Safety
    /// AVX-512F must be present.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn scatter_c(
        block: &[Complex64],
        (n, pitch): (usize, usize),
        bl: usize,
        dst: &mut [Complex64],
        base: usize,
        stride: usize,
        scale: f64,
    ) -> Done {
        let k0 = n / 4 * 4;
        let (lo, hi) = tile_lines(dst[base..].as_ptr(), 4, bl);
        let done = Done { k: k0, lo, hi };
        if k0 == 0 || lo == hi {
            return done;
        }
        assert!(base + (k0 - 1) * stride + hi <= dst.len() && n <= pitch);
        let block = &block[..bl * pitch];
        let (bp, dp) = (flat(block).as_ptr(), flat_mut(dst).as_mut_ptr());
        let s = _mm512_set1_pd(scale);
        let one = scale == 1.0;
        for k in (0..k0).step_by(4) {
            let row = 2 * (base + k * stride);
            let ahead = (k + PF + 4 <= n).then_some(2 * (base + (k + PF) * stride));
            for t in (lo..hi).step_by(4) {
                if let Some(a) = ahead {
                    for q in 0..4 {
                        prefetch(dp.wrapping_add(a + 2 * (q * stride + t)));
                    }
                }
                // SAFETY: AVX-512F is present (this function's contract);
                // line t + j < bl, values k..k + 4 <= pitch: inside `block`.
                let c: [__m512d; 4] = std::array::from_fn(|j| unsafe {
                    _mm512_loadu_pd(bp.add(2 * ((t + j) * pitch + k)))
                });
                for (q, r) in t4(c).into_iter().enumerate() {
                    let r = if one { r } else { _mm512_mul_pd(r, s) };
                    // SAFETY: row k + q < k0, values t..t + 4 <= hi: inside
                    // `dst` (asserted above).
                    unsafe { _mm512_storeu_pd(dp.add(row + 2 * (q * stride + t)), r) };
                }
            }
        }
        done
    }

    /// Real gather in 8 x 8 tiles (raw pointers after one bounds check,
    /// as [`gather_c`]).
    ///
    /// # Safety
    /// AVX-512F must be present.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn gather_r(
        src: &[f64],
        base: usize,
        stride: usize,
        (n, pitch): (usize, usize),
        bl: usize,
        block: &mut [f64],
    ) -> Done {
        let k0 = n / 8 * 8;
        let (lo, hi) = tile_lines(src[base..].as_ptr(), 8, bl);
        let done = Done { k: k0, lo, hi };
        if k0 == 0 || lo == hi {
            return done;
        }
        assert!(base + (k0 - 1) * stride + hi <= src.len() && n <= pitch);
        let block = &mut block[..bl * pitch];
        let (sp, bp) = (src.as_ptr(), block.as_mut_ptr());
        for k in (0..k0).step_by(8) {
            let row = base + k * stride;
            for t in (lo..hi).step_by(8) {
                // SAFETY: AVX-512F is present (this function's contract);
                // rows k..k + 8 <= k0 and values t..t + 8 <= hi of each
                // are inside `src` (asserted above).
                let r: [__m512d; 8] = std::array::from_fn(|q| unsafe {
                    _mm512_loadu_pd(sp.add(row + q * stride + t))
                });
                for (j, c) in t8(r).into_iter().enumerate() {
                    // SAFETY: line t + j < bl, values k..k + 8 <= n <=
                    // pitch of it: inside `block`.
                    unsafe { _mm512_storeu_pd(bp.add((t + j) * pitch + k), c) };
                }
            }
        }
        done
    }

    /// Real scatter in 8 x 8 tiles (raw pointers after one bounds check,
    /// as [`gather_c`]).
    ///
    /// # Safety
    /// AVX-512F must be present.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn scatter_r(
        block: &[f64],
        (n, pitch): (usize, usize),
        bl: usize,
        dst: &mut [f64],
        base: usize,
        stride: usize,
        scale: f64,
    ) -> Done {
        let k0 = n / 8 * 8;
        let (lo, hi) = tile_lines(dst[base..].as_ptr(), 8, bl);
        let done = Done { k: k0, lo, hi };
        if k0 == 0 || lo == hi {
            return done;
        }
        assert!(base + (k0 - 1) * stride + hi <= dst.len() && n <= pitch);
        let block = &block[..bl * pitch];
        let (bp, dp) = (block.as_ptr(), dst.as_mut_ptr());
        let s = _mm512_set1_pd(scale);
        let one = scale == 1.0;
        for k in (0..k0).step_by(8) {
            let row = base + k * stride;
            for t in (lo..hi).step_by(8) {
                // SAFETY: AVX-512F is present (this function's contract);
                // line t + j < bl, values k..k + 8 <= pitch: inside `block`.
                let c: [__m512d; 8] = std::array::from_fn(|j| unsafe {
                    _mm512_loadu_pd(bp.add((t + j) * pitch + k))
                });
                for (q, r) in t8(c).into_iter().enumerate() {
                    let r = if one { r } else { _mm512_mul_pd(r, s) };
                    // SAFETY: row k + q < k0, values t..t + 8 <= hi: inside
                    // `dst` (asserted above).
                    unsafe { _mm512_storeu_pd(dp.add(row + q * stride + t), r) };
                }
            }
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(i: usize) -> f64 {
        ((i * 2_654_435_761) % 1_000_003) as f64 / 7.0 - 3.0
    }

    /// Gathers and scatters against the definitions, on sizes with and
    /// without edges beyond whole tiles.
    fn check<T: Moves + PartialEq + std::fmt::Debug>(make: impl Fn(usize) -> T) {
        // Every offset of the rows within a cache line (`base`), with
        // strides that keep it row to row (`stride` a multiple of 8) and
        // strides that do not.
        let cases = [
            (16, 8),
            (13, 7),
            (9, 11),
            (32, 64),
            (3, 2),
            (8, 4),
            (5, 17),
            (12, 20),
        ];
        for ((n, bl), base, extra) in cases
            .into_iter()
            .flat_map(|c| (0..8).flat_map(move |b| [(c, b, 5), (c, b, 64 - c.1 % 8)]))
        {
            let stride = bl + extra;
            let pitch = n + 3;
            let src: Vec<T> = (0..base + n * stride).map(&make).collect();
            // The value-at-a-time path alone (what CPUs without AVX-512F
            // run) must give what the tiled path gives.
            let mut scalar = vec![make(999_999); bl * pitch];
            gather_scalar(
                &src,
                base,
                stride,
                (n, pitch),
                bl,
                &mut scalar,
                Done::default(),
            );
            let mut block = vec![make(999_999); bl * pitch];
            T::gather(&src, base, stride, (n, pitch), bl, &mut block);
            assert_eq!(block, scalar, "gather paths differ, n {n} bl {bl}");
            for k in 0..n {
                for t in 0..bl {
                    assert_eq!(
                        block[t * pitch + k],
                        src[base + k * stride + t],
                        "gather n {n} bl {bl}"
                    );
                }
            }
            for scale in [1.0, 0.25] {
                let mut dst: Vec<T> = (0..base + n * stride).map(|i| make(i + 77)).collect();
                let before = dst.clone();
                let mut scalar = dst.clone();
                scatter_scalar(
                    &block,
                    (n, pitch),
                    bl,
                    &mut scalar,
                    base,
                    stride,
                    scale,
                    Done::default(),
                );
                T::scatter(&block, (n, pitch), bl, &mut dst, base, stride, scale);
                assert_eq!(dst, scalar, "scatter paths differ, n {n} bl {bl}");
                for (i, (d, b)) in dst.iter().zip(&before).enumerate() {
                    let inside = i >= base && (i - base) % stride < bl && (i - base) / stride < n;
                    if inside {
                        let (k, t) = ((i - base) / stride, (i - base) % stride);
                        let want = if scale == 1.0 {
                            block[t * pitch + k]
                        } else {
                            block[t * pitch + k] * scale
                        };
                        assert_eq!(*d, want, "scatter n {n} bl {bl} at {i}");
                    } else {
                        assert_eq!(d, b, "scatter wrote outside the block at {i}");
                    }
                }
            }
        }
    }

    #[test]
    fn complex_moves_match_their_definition() {
        check(|i| Complex64::new(value(i), value(i + 1_000)));
    }

    #[test]
    fn real_moves_match_their_definition() {
        check(value);
    }
}
