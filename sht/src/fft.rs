//! The real FFTs of the phi step, [`LANES`] latitude rows at a time: every
//! operation acts on one value of each of the rows, so the transforms of
//! the rows run side by side in the lanes of the CPU's vectors, with no
//! shuffle inside the transform. The rows' values of one order are
//! neighbours in the intermediate layout of the transforms (latitude runs
//! fastest), so they come in and go out as whole vectors as well.
//!
//! A real transform of even length `n` is a complex transform of length
//! `h = n / 2` on the even and odd samples as real and imaginary parts,
//! with one pass of pre- or post-processing (`e^{-2 pi i m / n}` twiddles).
//! The complex transform is a self-sorting (Stockham) mixed-radix
//! Cooley-Tukey FFT with radices 8 (4 from `h = 512` on), 4, 6 (a two and
//! a three in one stage), 2, 3, 5 and
//! 7: each stage reads one buffer and writes the other, in natural order at
//! the end. Lengths with a prime factor above 7 have no plan
//! ([`LaneFft::new`] returns `None`).
//!
//! The arithmetic is written once over [`Vx`], a vector of one value of
//! each row: eight AVX-512 lanes, two AVX registers, or a portable array.
//! Every lane sees the same operations in the same order whichever it is
//! (Rust never fuses a multiply and an add on its own), so the AVX-512,
//! AVX2 and portable versions give the same bits. (Written with arrays and
//! closures instead, the compiler left part of the work in scalar
//! instructions and calls: closures do not take the target features of the
//! function around them.)

use num_complex::Complex64;
use rayon::prelude::*;
use simd::Isa;
use std::f64::consts::PI;

/// Rows transformed together.
pub(crate) const LANES: usize = 8;

/// One value of each of the [`LANES`] rows.
type V = [f64; LANES];

/// [`LANES`] complex values, real and imaginary parts apart.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct C {
    re: V,
    im: V,
}

const ZV: V = [0.0; LANES];
const ZC: C = C { re: ZV, im: ZV };

/// One value of each of the [`LANES`] rows in the instruction set's
/// registers: every operation is one IEEE operation per lane, so every
/// implementation gives the same bits.
trait Vx: Copy {
    fn ld(a: &V) -> Self;
    fn st(self, a: &mut V);
    fn splat(x: f64) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// The sign flipped (`-0.0` for `0.0`, as the scalar `-x`).
    fn neg(self) -> Self;
    /// The real and imaginary parts of eight complex values.
    #[inline(always)]
    fn split(v: &[Complex64; LANES]) -> (Self, Self) {
        (
            Self::ld(&std::array::from_fn(|i| v[i].re)),
            Self::ld(&std::array::from_fn(|i| v[i].im)),
        )
    }
    /// Eight complex values from their real and imaginary parts.
    #[inline(always)]
    fn join(re: Self, im: Self, out: &mut [Complex64; LANES]) {
        let (mut r, mut i) = (ZV, ZV);
        re.st(&mut r);
        im.st(&mut i);
        for k in 0..LANES {
            out[k] = Complex64::new(r[k], i[k]);
        }
    }
}

/// The portable lanes: loops of fixed length that the compiler may
/// vectorise.
impl Vx for V {
    #[inline(always)]
    fn ld(a: &V) -> Self {
        *a
    }
    #[inline(always)]
    fn st(self, a: &mut V) {
        *a = self;
    }
    #[inline(always)]
    fn splat(x: f64) -> Self {
        [x; LANES]
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        std::array::from_fn(|i| self[i] + o[i])
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        std::array::from_fn(|i| self[i] - o[i])
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        std::array::from_fn(|i| self[i] * o[i])
    }
    #[inline(always)]
    fn neg(self) -> Self {
        self.map(|x| -x)
    }
}

/// [`LANES`] complex values in registers, real and imaginary parts apart.
#[derive(Clone, Copy)]
struct Cx<X> {
    re: X,
    im: X,
}

impl<X: Vx> Cx<X> {
    #[inline(always)]
    fn ld(c: &C) -> Self {
        Cx {
            re: X::ld(&c.re),
            im: X::ld(&c.im),
        }
    }
    #[inline(always)]
    fn st(self, c: &mut C) {
        self.re.st(&mut c.re);
        self.im.st(&mut c.im);
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        Cx {
            re: self.re.add(o.re),
            im: self.im.add(o.im),
        }
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        Cx {
            re: self.re.sub(o.re),
            im: self.im.sub(o.im),
        }
    }
    /// Times the scalar `(c, s)` (given as vectors).
    #[inline(always)]
    fn mul(self, (c, s): (X, X)) -> Self {
        Cx {
            re: self.re.mul(c).sub(self.im.mul(s)),
            im: self.re.mul(s).add(self.im.mul(c)),
        }
    }
    /// Times the real scalar `r` (given as a vector).
    #[inline(always)]
    fn scale(self, r: X) -> Self {
        Cx {
            re: self.re.mul(r),
            im: self.im.mul(r),
        }
    }
    /// Times `-i` (`inverse = false`) or `i`.
    #[inline(always)]
    fn rot(self, inverse: bool) -> Self {
        if inverse {
            Cx {
                re: self.im.neg(),
                im: self.re,
            }
        } else {
            Cx {
                re: self.im,
                im: self.re.neg(),
            }
        }
    }
    /// The complex conjugate.
    #[inline(always)]
    fn conj(self) -> Self {
        Cx {
            re: self.re,
            im: self.im.neg(),
        }
    }
}

/// `X_m` of the rows from `spec(m)` (0 from `nm` on, and in lanes from
/// `rows` on).
#[inline(always)]
fn spec_at<'s, X: Vx, F: Fn(usize) -> &'s [Complex64]>(
    spec: &F,
    m: usize,
    nm: usize,
    rows: usize,
) -> Cx<X> {
    if m >= nm {
        return Cx::ld(&ZC);
    }
    let v = spec(m);
    match <&[Complex64; LANES]>::try_from(&v[..rows.min(v.len())]) {
        Ok(whole) => {
            let (re, im) = X::split(whole);
            Cx { re, im }
        }
        Err(_) => Cx::ld(&load(v, rows)),
    }
}

/// The values of `d.len()` rows (at most [`LANES`]) as complex numbers.
#[inline(always)]
fn store_rows<X: Vx>(x: Cx<X>, d: &mut [Complex64]) {
    match <&mut [Complex64; LANES]>::try_from(&mut *d) {
        Ok(whole) => X::join(x.re, x.im, whole),
        Err(_) => {
            let mut xm = ZC;
            x.st(&mut xm);
            for (r, v) in d.iter_mut().enumerate() {
                *v = Complex64::new(xm.re[r], xm.im[r]);
            }
        }
    }
}

/// The scalar `(c, s)` as vectors.
#[inline(always)]
fn splat2<X: Vx>((c, s): (f64, f64)) -> (X, X) {
    (X::splat(c), X::splat(s))
}

/// The values `v` of `rows` rows (fewer than [`LANES`]) as lanes, 0 in
/// the others (a whole block goes through [`Vx::split`]).
#[inline(always)]
fn load(v: &[Complex64], rows: usize) -> C {
    let mut c = ZC;
    for (i, x) in v[..rows].iter().enumerate() {
        c.re[i] = x.re;
        c.im[i] = x.im;
    }
    c
}

/// `z[k]` = `(row[2 k], row[2 k + 1])` of the rows of `n` values of `inp`
/// (0 in lanes from `rows` on).
#[inline(always)]
fn rows_in(simd: Isa, inp: &[f64], n: usize, rows: usize, z: &mut [C]) {
    let h = n / 2;
    let mut k0 = 0;
    #[cfg(target_arch = "x86_64")]
    if simd == Isa::Avx512 && rows == LANES && inp.len() >= LANES * n && z.len() >= h {
        k0 = h / 4 * 4;
        // SAFETY: AVX-512F was found (`Isa::Avx512`); the sizes were
        // checked just above.
        unsafe { avx512::rows_in(inp, n, k0, z) };
    }
    let _ = simd;
    if rows < LANES {
        z[k0..h].iter_mut().for_each(|v| *v = ZC);
    }
    for (r, row) in inp.chunks(n).take(rows).enumerate() {
        for (k, v) in z.iter_mut().enumerate().take(h).skip(k0) {
            v.re[r] = row[2 * k];
            v.im[r] = row[2 * k + 1];
        }
    }
}

/// The inverse of [`rows_in`] for the first `rows` rows of `out`.
#[inline(always)]
fn rows_out(simd: Isa, z: &[C], out: &mut [f64], n: usize, rows: usize) {
    let h = n / 2;
    let mut k0 = 0;
    #[cfg(target_arch = "x86_64")]
    if simd == Isa::Avx512 && rows == LANES && out.len() >= LANES * n && z.len() >= h {
        k0 = h / 4 * 4;
        // SAFETY: as in `rows_in`.
        unsafe { avx512::rows_out(z, n, k0, out) };
    }
    let _ = simd;
    for (r, row) in out.chunks_mut(n).take(rows).enumerate() {
        for (k, v) in z.iter().enumerate().take(h).skip(k0) {
            row[2 * k] = v.re[r];
            row[2 * k + 1] = v.im[r];
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    use super::{C, LANES};
    use std::arch::x86_64::*;

    /// The 8 x 8 transpose of `r` (row `i` of the result holds element `i`
    /// of every input row).
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) fn transpose(r: &[__m512d; 8]) -> [__m512d; 8] {
        simd::x86::transpose8(*r)
    }

    /// The eight complex values at `p` (sixteen doubles) as their real and
    /// imaginary parts, lane `i` holding value `i` (`reversed`: value
    /// `7 - i`).
    ///
    /// # Safety
    /// AVX-512F present; sixteen readable doubles at `p`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn split8(p: *const f64, reversed: bool) -> (__m512d, __m512d) {
        // SAFETY: sixteen readable doubles (contract).
        let (a, b) = unsafe { (_mm512_loadu_pd(p), _mm512_loadu_pd(p.add(8))) };
        // Real parts at even places, imaginary ones at odd places.
        let (re, im) = if reversed {
            (
                _mm512_setr_epi64(14, 12, 10, 8, 6, 4, 2, 0),
                _mm512_setr_epi64(15, 13, 11, 9, 7, 5, 3, 1),
            )
        } else {
            (
                _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14),
                _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15),
            )
        };
        (
            _mm512_permutex2var_pd(a, re, b),
            _mm512_permutex2var_pd(a, im, b),
        )
    }

    /// The inverse of [`split8`]: eight complex values from their real and
    /// imaginary parts stored to `p`, value `i` from lane `i` (`reversed`:
    /// lane `7 - i`).
    ///
    /// # Safety
    /// AVX-512F present; sixteen writable doubles at `p`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn join8(re: __m512d, im: __m512d, p: *mut f64, reversed: bool) {
        let (lo, hi) = if reversed {
            (
                _mm512_setr_epi64(7, 15, 6, 14, 5, 13, 4, 12),
                _mm512_setr_epi64(3, 11, 2, 10, 1, 9, 0, 8),
            )
        } else {
            (
                _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11),
                _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15),
            )
        };
        // SAFETY: sixteen writable doubles (contract).
        unsafe {
            _mm512_storeu_pd(p, _mm512_permutex2var_pd(re, lo, im));
            _mm512_storeu_pd(p.add(8), _mm512_permutex2var_pd(re, hi, im));
        }
    }

    /// [`super::rows_in`] of 8 whole rows for `k < k_end`.
    ///
    /// # Safety
    /// AVX-512F present; `k_end` a multiple of 4 with `2 k_end <= n`,
    /// `inp` holds 8 rows of `n` values and `z` at least `k_end` entries.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn rows_in(inp: &[f64], n: usize, k_end: usize, z: &mut [C]) {
        debug_assert!(2 * k_end <= n && inp.len() >= LANES * n && z.len() >= k_end);
        let p = inp.as_ptr();
        let mut r = [_mm512_setzero_pd(); 8];
        for kb in (0..k_end).step_by(4) {
            for (i, v) in r.iter_mut().enumerate() {
                // SAFETY: 2 kb + 8 <= 2 k_end <= n: inside row i.
                *v = unsafe { _mm512_loadu_pd(p.add(i * n + 2 * kb)) };
            }
            let c = transpose(&r);
            for j in 0..4 {
                let v = &mut z[kb + j];
                // SAFETY: eight writable doubles each.
                unsafe {
                    _mm512_storeu_pd(v.re.as_mut_ptr(), c[2 * j]);
                    _mm512_storeu_pd(v.im.as_mut_ptr(), c[2 * j + 1]);
                }
            }
        }
    }

    /// [`super::rows_out`] of 8 whole rows for `k < k_end`.
    ///
    /// Every store covers one whole cache line where the rows allow it:
    /// a row that does not start on a 64-byte boundary gets its eight
    /// values a step shifted across two steps' registers (one permute) so
    /// that they land on the line's boundary, with a partial (masked) store
    /// at each end. (A store that straddles two lines costs about twice one
    /// inside a line; a caller's grid rarely starts on a line.)
    ///
    /// # Safety
    /// As [`rows_in`], with `out` for `inp`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn rows_out(z: &[C], n: usize, k_end: usize, out: &mut [f64]) {
        debug_assert!(2 * k_end <= n && out.len() >= LANES * n && z.len() >= k_end);
        if k_end == 0 {
            return;
        }
        let p = out.as_mut_ptr();
        // Row i's values before its first line boundary (0 when it starts
        // on one): each row's pointer is 8-byte aligned (`f64`).
        let lead: [usize; 8] =
            std::array::from_fn(|i| (8 - (p.wrapping_add(i * n) as usize / 8) % 8) % 8);
        let mut c = [_mm512_setzero_pd(); 8];
        let load = |c: &mut [__m512d; 8], kb: usize| {
            for j in 0..4 {
                let v = &z[kb + j];
                // SAFETY: eight readable doubles each; AVX-512F present
                // (this function's contract).
                unsafe {
                    c[2 * j] = _mm512_loadu_pd(v.re.as_ptr());
                    c[2 * j + 1] = _mm512_loadu_pd(v.im.as_ptr());
                }
            }
        };
        if lead.iter().all(|&a| a == 0) {
            for kb in (0..k_end).step_by(4) {
                load(&mut c, kb);
                let r = transpose(&c);
                for (i, v) in r.iter().enumerate() {
                    // SAFETY: 2 kb + 8 <= n: inside row i.
                    unsafe { _mm512_storeu_pd(p.add(i * n + 2 * kb), *v) };
                }
            }
            return;
        }
        // Lane j of the shifted store takes value `lead + j` of the
        // previous step's register (`>= 8`: of the current one).
        let idx: [__m512i; 8] = std::array::from_fn(|i| {
            _mm512_add_epi64(
                _mm512_set1_epi64(lead[i] as i64),
                _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7),
            )
        });
        load(&mut c, 0);
        let mut prev = transpose(&c);
        for (i, v) in prev.iter().enumerate() {
            // The values before the first boundary, masked: lanes
            // `< lead` only, inside row i.
            // SAFETY: 8 <= n doubles of row i at `i n`; masked lanes are
            // not written.
            unsafe { _mm512_mask_storeu_pd(p.add(i * n), ((1u32 << lead[i]) - 1) as u8, *v) };
        }
        for kb in (4..k_end).step_by(4) {
            load(&mut c, kb);
            let r = transpose(&c);
            for i in 0..8 {
                let v = _mm512_permutex2var_pd(prev[i], idx[i], r[i]);
                // SAFETY: values `2 kb - 8 + lead .. 2 kb + lead` of row i,
                // all below 2 kb + 8 <= n.
                unsafe { _mm512_storeu_pd(p.add(i * n + 2 * kb - 8 + lead[i]), v) };
            }
            prev = r;
        }
        let last = 2 * (k_end - 4);
        for (i, v) in prev.iter().enumerate() {
            // The last step's values from the boundary on, masked: lanes
            // `>= lead`.
            // SAFETY: values `last .. last + 8 <= n` of row i; masked lanes
            // are not written.
            unsafe {
                _mm512_mask_storeu_pd(p.add(i * n + last), !(((1u32 << lead[i]) - 1) as u8), *v)
            };
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod vx {
    use super::{Vx, LANES, V};
    use num_complex::Complex64;
    use std::arch::x86_64::*;

    /// The eight lanes in one AVX-512 register. Only used inside functions
    /// compiled with AVX-512F, called after it was found.
    #[derive(Clone, Copy)]
    pub(super) struct Z(__m512d);

    impl Vx for Z {
        #[inline(always)]
        fn ld(a: &V) -> Self {
            // SAFETY: eight readable doubles; AVX-512F present (type doc).
            Z(unsafe { _mm512_loadu_pd(a.as_ptr()) })
        }
        #[inline(always)]
        fn st(self, a: &mut V) {
            // SAFETY: eight writable doubles; AVX-512F present.
            unsafe { _mm512_storeu_pd(a.as_mut_ptr(), self.0) }
        }
        #[inline(always)]
        fn splat(x: f64) -> Self {
            // SAFETY: AVX-512F present.
            Z(unsafe { _mm512_set1_pd(x) })
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            // SAFETY: AVX-512F present.
            Z(unsafe { _mm512_add_pd(self.0, o.0) })
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            // SAFETY: AVX-512F present.
            Z(unsafe { _mm512_sub_pd(self.0, o.0) })
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            // SAFETY: AVX-512F present.
            Z(unsafe { _mm512_mul_pd(self.0, o.0) })
        }
        #[inline(always)]
        fn neg(self) -> Self {
            // SAFETY: AVX-512F present. The sign bit flipped.
            Z(unsafe {
                _mm512_castsi512_pd(_mm512_xor_si512(
                    _mm512_castpd_si512(self.0),
                    _mm512_set1_epi64(i64::MIN),
                ))
            })
        }
        #[inline(always)]
        fn split(v: &[Complex64; LANES]) -> (Self, Self) {
            // SAFETY: sixteen readable doubles (a `Complex64` is two);
            // AVX-512F present.
            let (re, im) = unsafe { crate::fft::avx512::split8(v.as_ptr() as *const f64, false) };
            (Z(re), Z(im))
        }
        #[inline(always)]
        fn join(re: Self, im: Self, out: &mut [Complex64; LANES]) {
            // SAFETY: sixteen writable doubles; AVX-512F present.
            unsafe { crate::fft::avx512::join8(re.0, im.0, out.as_mut_ptr() as *mut f64, false) }
        }
    }

    /// The eight lanes in two AVX registers. Only used inside functions
    /// compiled with AVX2, called after it was found.
    #[derive(Clone, Copy)]
    pub(super) struct Y(__m256d, __m256d);

    impl Vx for Y {
        #[inline(always)]
        fn ld(a: &V) -> Self {
            // SAFETY: eight readable doubles; AVX present (type doc).
            unsafe {
                Y(
                    _mm256_loadu_pd(a.as_ptr()),
                    _mm256_loadu_pd(a.as_ptr().add(4)),
                )
            }
        }
        #[inline(always)]
        fn st(self, a: &mut V) {
            // SAFETY: eight writable doubles; AVX present.
            unsafe {
                _mm256_storeu_pd(a.as_mut_ptr(), self.0);
                _mm256_storeu_pd(a.as_mut_ptr().add(4), self.1);
            }
        }
        #[inline(always)]
        fn splat(x: f64) -> Self {
            // SAFETY: AVX present.
            unsafe { Y(_mm256_set1_pd(x), _mm256_set1_pd(x)) }
        }
        #[inline(always)]
        fn add(self, o: Self) -> Self {
            // SAFETY: AVX present.
            unsafe { Y(_mm256_add_pd(self.0, o.0), _mm256_add_pd(self.1, o.1)) }
        }
        #[inline(always)]
        fn sub(self, o: Self) -> Self {
            // SAFETY: AVX present.
            unsafe { Y(_mm256_sub_pd(self.0, o.0), _mm256_sub_pd(self.1, o.1)) }
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            // SAFETY: AVX present.
            unsafe { Y(_mm256_mul_pd(self.0, o.0), _mm256_mul_pd(self.1, o.1)) }
        }
        #[inline(always)]
        fn neg(self) -> Self {
            // SAFETY: AVX present. The sign bit flipped.
            unsafe {
                let m = _mm256_set1_pd(-0.0);
                Y(_mm256_xor_pd(self.0, m), _mm256_xor_pd(self.1, m))
            }
        }
    }
}

/// One stage: radix `p` on transforms of length `l` done so far.
#[derive(Debug, Clone)]
struct Stage {
    p: usize,
    l: usize,
    /// `e^{-2 pi i f q / (l p)}` at `f * (p - 1) + q - 1`, `f < l`,
    /// `1 <= q < p`, as `(cos, sin)`.
    tw: Vec<(f64, f64)>,
    /// `e^{-2 pi i j / p}` for `j < p` (the generic radices).
    root: Vec<(f64, f64)>,
}

/// `e^{-2 pi i num / den}` as `(cos, sin)`, with `num` reduced modulo
/// `den` first, so that the angle stays below `2 pi` for any `num`.
fn cis(num: usize, den: usize) -> (f64, f64) {
    let (s, c) = (-2.0 * PI * (num % den) as f64 / den as f64).sin_cos();
    (c, s)
}

/// A plan for real transforms of one even length, [`LANES`] rows at a time.
#[derive(Debug, Clone)]
pub(crate) struct LaneFft {
    n: usize,
    h: usize,
    stages: Vec<Stage>,
    /// `e^{-2 pi i m / n}` for `m < h`.
    half: Vec<(f64, f64)>,
}

/// Working space of [`LaneFft`]: two buffers of `h` complex vectors.
#[derive(Default)]
pub(crate) struct Work {
    a: Vec<C>,
    b: Vec<C>,
}

impl Work {
    fn ready(&mut self, h: usize) {
        if self.a.len() != h {
            self.a = vec![ZC; h];
            self.b = vec![ZC; h];
        }
    }
}

impl LaneFft {
    /// The plan for real length `n`, or `None` when `n` is odd, below 2,
    /// or `n / 2` has a prime factor above 7.
    pub(crate) fn new(n: usize) -> Option<Self> {
        if n < 2 || !n.is_multiple_of(2) {
            return None;
        }
        let h = n / 2;
        // Radices: eights first, then fours, a six, then twos, threes, fives,
        // sevens (fewer stages: each reads and writes every value once).
        // From h = 512 on (buffers of 64 KiB and more, past the L1 cache)
        // eights measured slower than fours (sixteen streams of loads and
        // stores a stage instead of eight): fours there.
        let eights = h < 512;
        let mut left = h;
        let mut radices = Vec::new();
        while eights && left.is_multiple_of(8) {
            radices.push(8);
            left /= 8;
        }
        while left.is_multiple_of(4) {
            radices.push(4);
            left /= 4;
        }
        // A two and a three left over as one stage of six (one pass over
        // the buffers fewer).
        if left.is_multiple_of(6) {
            radices.push(6);
            left /= 6;
        }
        for p in [2, 3, 5, 7] {
            while left.is_multiple_of(p) {
                radices.push(p);
                left /= p;
            }
        }
        if left != 1 {
            return None;
        }
        let mut l = 1;
        let mut stages = Vec::new();
        for p in radices {
            let lp = l * p;
            let tw = (0..l)
                .flat_map(|f| (1..p).map(move |q| cis(f * q, lp)))
                .collect();
            let root = (0..p).map(|j| cis(j, p)).collect();
            stages.push(Stage { p, l, tw, root });
            l = lp;
        }
        let half = (0..h).map(|m| cis(m, n)).collect();
        Some(LaneFft { n, h, stages, half })
    }

    /// The real length.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// Synthesis of rows `0..rows` (`rows <= LANES`): `out[r * n + k] =
    /// sum_m X_m e^{2 pi i m k / n}` over all `m`, with the Hermitian half
    /// `X_m = spec(m)[r]` for `m < nm` (`nm <= n / 2`, `X_0` taken as
    /// real, so `X_0.im` is ignored) and 0 above. `spec(m)` gives the
    /// values of order `m` of the rows, row after row.
    pub(crate) fn c2r<'s>(
        &self,
        simd: Isa,
        work: &mut Work,
        nm: usize,
        spec: impl Fn(usize) -> &'s [Complex64],
        out: &mut [f64],
        rows: usize,
    ) {
        assert!(nm <= self.h && rows <= LANES && out.len() >= rows * self.n);
        work.ready(self.h);
        match simd {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::Avx512` is only made after AVX-512F was found.
            Isa::Avx512 => unsafe { self.c2r_avx512(work, nm, &spec, out, rows) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Isa::Avx2` is only made after AVX2 was found.
            Isa::Avx2 => unsafe { self.c2r_avx2(work, nm, &spec, out, rows) },
            _ => self.c2r_body::<V, _>(Isa::Portable, work, nm, &spec, out, rows),
        }
    }

    /// Analysis of rows `0..rows` (`rows <= LANES`) of `inp` (`rows * n`
    /// values): `put(m, X)` for `m < nm` (`nm <= n / 2`) with `X[r] =
    /// scale * sum_k inp[r * n + k] e^{-2 pi i m k / n}`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn r2c(
        &self,
        simd: Isa,
        work: &mut Work,
        inp: &[f64],
        rows: usize,
        nm: usize,
        scale: f64,
        put: impl FnMut(usize, &[Complex64]),
    ) {
        assert!(nm <= self.h && rows <= LANES && inp.len() >= rows * self.n);
        work.ready(self.h);
        let mut put = put;
        match simd {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `c2r`.
            Isa::Avx512 => unsafe { self.r2c_avx512(work, inp, rows, nm, scale, &mut put) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `c2r`.
            Isa::Avx2 => unsafe { self.r2c_avx2(work, inp, rows, nm, scale, &mut put) },
            _ => self.r2c_body::<V>(Isa::Portable, work, inp, rows, nm, scale, &mut put),
        }
    }

    /// [`r2c`](Self::r2c) with the values of order `m` (for `m < nm`)
    /// stored straight to `dst[at(m)..][..rows]` instead of handed to a
    /// callback (`dst` is a plain argument, so the compiler knows the stores
    /// cannot touch the transform's buffers: through a callback's copy or a
    /// slice inside an enum the loop measured slower).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn r2c_to(
        &self,
        simd: Isa,
        work: &mut Work,
        inp: &[f64],
        rows: usize,
        scale: f64,
        nm: usize,
        dst: &mut [Complex64],
        at: impl Fn(usize) -> usize,
    ) {
        assert!(nm <= self.h && rows <= LANES && inp.len() >= rows * self.n);
        work.ready(self.h);
        match simd {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `c2r`.
            Isa::Avx512 => unsafe { self.r2c_to_avx512(work, inp, rows, scale, nm, dst, &at) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `c2r`.
            Isa::Avx2 => unsafe { self.r2c_to_avx2(work, inp, rows, scale, nm, dst, &at) },
            _ => self.r2c_to_body::<V, _>(Isa::Portable, work, inp, rows, scale, nm, dst, &at),
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn r2c_to_avx512<F: Fn(usize) -> usize>(
        &self,
        work: &mut Work,
        inp: &[f64],
        rows: usize,
        scale: f64,
        nm: usize,
        dst: &mut [Complex64],
        at: &F,
    ) {
        self.r2c_to_body::<vx::Z, F>(Isa::Avx512, work, inp, rows, scale, nm, dst, at)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[allow(clippy::too_many_arguments)]
    unsafe fn r2c_to_avx2<F: Fn(usize) -> usize>(
        &self,
        work: &mut Work,
        inp: &[f64],
        rows: usize,
        scale: f64,
        nm: usize,
        dst: &mut [Complex64],
        at: &F,
    ) {
        self.r2c_to_body::<vx::Y, F>(Isa::Avx2, work, inp, rows, scale, nm, dst, at)
    }

    /// [`r2c`](Self::r2c) of every row of `grid` (rows of `n` values),
    /// blocks of [`LANES`] rows in parallel, into `out` row by row (`nm`
    /// orders a row).
    pub(crate) fn r2c_rows_par(
        &self,
        simd: Isa,
        grid: &[f64],
        out: &mut [Complex64],
        nm: usize,
        scale: f64,
    ) {
        let n = self.n;
        grid.par_chunks(LANES * n)
            .zip(out.par_chunks_mut(LANES * nm))
            .for_each_init(Work::default, |work, (block, out)| {
                self.r2c(simd, work, block, block.len() / n, nm, scale, |m, v| {
                    for (r, x) in v.iter().enumerate() {
                        out[r * nm + m] = *x;
                    }
                });
            });
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn c2r_avx512<'s, F: Fn(usize) -> &'s [Complex64]>(
        &self,
        work: &mut Work,
        nm: usize,
        spec: &F,
        out: &mut [f64],
        rows: usize,
    ) {
        self.c2r_body::<vx::Z, F>(Isa::Avx512, work, nm, spec, out, rows)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn c2r_avx2<'s, F: Fn(usize) -> &'s [Complex64]>(
        &self,
        work: &mut Work,
        nm: usize,
        spec: &F,
        out: &mut [f64],
        rows: usize,
    ) {
        self.c2r_body::<vx::Y, F>(Isa::Avx2, work, nm, spec, out, rows)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn r2c_avx512(
        &self,
        work: &mut Work,
        inp: &[f64],
        rows: usize,
        nm: usize,
        scale: f64,
        put: &mut dyn FnMut(usize, &[Complex64]),
    ) {
        self.r2c_body::<vx::Z>(Isa::Avx512, work, inp, rows, nm, scale, put)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn r2c_avx2(
        &self,
        work: &mut Work,
        inp: &[f64],
        rows: usize,
        nm: usize,
        scale: f64,
        put: &mut dyn FnMut(usize, &[Complex64]),
    ) {
        self.r2c_body::<vx::Y>(Isa::Avx2, work, inp, rows, nm, scale, put)
    }

    #[inline(always)]
    fn c2r_body<'s, X: Vx, F: Fn(usize) -> &'s [Complex64]>(
        &self,
        simd: Isa,
        work: &mut Work,
        nm: usize,
        spec: &F,
        out: &mut [f64],
        rows: usize,
    ) {
        let (h, n) = (self.h, self.n);
        let (z, tmp) = (&mut work.a, &mut work.b);
        // Z_m = (X_m + conj X_{h-m}) + i (X_m - conj X_{h-m}) e^{2 pi i m / n}:
        // the even samples' transform plus i times the odd samples'. X_h
        // (the Nyquist term, beyond `nm`) is 0, `X_0` is taken as real.
        // Orders m and h - m need the same two values: both at once, each
        // read from the spectrum once.
        let zero = Cx::<X>::ld(&ZC);
        let mut x0 = spec_at::<X, F>(spec, 0, nm, rows);
        x0.im = X::splat(0.0);
        self.pre(x0, zero, 0).st(&mut z[0]);
        for m in 1..=h / 2 {
            let (xm, xh) = (
                spec_at::<X, F>(spec, m, nm, rows),
                spec_at::<X, F>(spec, h - m, nm, rows),
            );
            self.pre(xm, xh.conj(), m).st(&mut z[m]);
            if h - m != m {
                self.pre(xh, xm.conj(), h - m).st(&mut z[h - m]);
            }
        }
        let res = self.complex::<X>(z, tmp, true);
        // z_k = x_{2k} + i x_{2k+1}.
        rows_out(simd, res, out, n, rows);
    }

    /// `Z_m` of the synthesis from `a = X_m` and `b = conj X_{h-m}`.
    #[inline(always)]
    fn pre<X: Vx>(&self, a: Cx<X>, b: Cx<X>, m: usize) -> Cx<X> {
        let (c, s) = self.half[m];
        let e = a.add(b);
        let o = a.sub(b).mul(splat2((c, -s)));
        e.add(o.rot(true))
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn r2c_body<X: Vx>(
        &self,
        simd: Isa,
        work: &mut Work,
        inp: &[f64],
        rows: usize,
        nm: usize,
        scale: f64,
        put: &mut dyn FnMut(usize, &[Complex64]),
    ) {
        let (h, n) = (self.h, self.n);
        let (z, tmp) = (&mut work.a, &mut work.b);
        rows_in(simd, inp, n, rows, z);
        let res = self.complex::<X>(z, tmp, false);
        // X_m = E_m + e^{-2 pi i m / n} O_m with E_m = (Z_m + conj Z_{h-m}) / 2,
        // O_m = (Z_m - conj Z_{h-m}) / (2 i).
        let half_scale = X::splat(0.5 * scale);
        let mut vals = [Complex64::new(0.0, 0.0); LANES];
        for m in 0..nm {
            let x = self.order(res, h, m, half_scale);
            store_rows(x, &mut vals[..rows]);
            put(m, &vals[..rows]);
        }
    }

    /// [`r2c_body`](Self::r2c_body) storing order `m`'s values straight to
    /// `dst[at(m)..][..rows]`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn r2c_to_body<X: Vx, F: Fn(usize) -> usize>(
        &self,
        simd: Isa,
        work: &mut Work,
        inp: &[f64],
        rows: usize,
        scale: f64,
        nm: usize,
        dst: &mut [Complex64],
        at: &F,
    ) {
        let (h, n) = (self.h, self.n);
        let (z, tmp) = (&mut work.a, &mut work.b);
        rows_in(simd, inp, n, rows, z);
        let half_scale = X::splat(0.5 * scale);
        let Some(last) = self.fusable_last() else {
            let res = self.complex::<X>(z, tmp, false);
            for m in 0..nm {
                let x = self.order(res, h, m, half_scale);
                let o = at(m);
                store_rows(x, &mut dst[o..o + rows]);
            }
            return;
        };
        // The last stage's butterflies straight into the orders: butterfly
        // `f` gives `Z_m` for `m = f + l g` (`g < p`), whose partners `Z_{h
        // - m}` come from butterfly `l - f` (from `f` itself for `f = 0`
        // and `f = l / 2`), so the two are done together and `Z` is never
        // stored. The same operations as the unfused stage and `order`.
        let stages = &self.stages[..self.stages.len() - 1];
        let src = self.stages_of::<X>(stages, z, tmp, false);
        match last.p {
            3 => self.fused_post::<X, F, 3>(last, src, half_scale, nm, rows, dst, at),
            _ => self.fused_post::<X, F, 6>(last, src, half_scale, nm, rows, dst, at),
        }
    }

    /// The fused last stage of radix `P` and the orders (see
    /// [`r2c_to_body`](Self::r2c_to_body)).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn fused_post<X: Vx, F: Fn(usize) -> usize, const P: usize>(
        &self,
        last: &Stage,
        src: &[C],
        half_scale: X,
        nm: usize,
        rows: usize,
        dst: &mut [Complex64],
        at: &F,
    ) {
        let l = last.l;
        // (Method calls, not a closure: a closure would not take the
        // target features of this function.)
        for f in 0..=l / 2 {
            let y = last_butterfly::<X, P>(last, src, f, false);
            if f == 0 {
                // Partner of `m = l g` is `h - l g = l (p - g)` (`Z_0` for `m = 0`).
                self.put_order(0, y[0], y[0], half_scale, nm, rows, dst, at);
                for g in 1..P {
                    self.put_order(l * g, y[g], y[P - g], half_scale, nm, rows, dst, at);
                }
                continue;
            }
            let fp = l - f;
            if fp == f {
                for g in 0..P {
                    self.put_order(f + l * g, y[g], y[P - 1 - g], half_scale, nm, rows, dst, at);
                }
                continue;
            }
            let yp = last_butterfly::<X, P>(last, src, fp, false);
            for g in 0..P {
                self.put_order(
                    f + l * g,
                    y[g],
                    yp[P - 1 - g],
                    half_scale,
                    nm,
                    rows,
                    dst,
                    at,
                );
                self.put_order(
                    fp + l * g,
                    yp[g],
                    y[P - 1 - g],
                    half_scale,
                    nm,
                    rows,
                    dst,
                    at,
                );
            }
        }
    }

    /// Order `m`'s values from `Z_m` and `Z_{h-m}` (see
    /// [`order_of`](Self::order_of)) to `dst[at(m)..][..rows]`, if `m < nm`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn put_order<X: Vx, F: Fn(usize) -> usize>(
        &self,
        m: usize,
        a: Cx<X>,
        zb: Cx<X>,
        half_scale: X,
        nm: usize,
        rows: usize,
        dst: &mut [Complex64],
        at: &F,
    ) {
        if m < nm {
            let o = at(m);
            store_rows(self.order_of(a, zb, m, half_scale), &mut dst[o..o + rows]);
        }
    }

    /// `X_m = E_m + e^{-2 pi i m / n} O_m` times `2 half_scale`, with
    /// `E_m = (Z_m + conj Z_{h-m}) / 2`, `O_m = (Z_m - conj Z_{h-m}) / (2
    /// i)`, from the complex transform `res` of the even and odd samples.
    #[inline(always)]
    fn order<X: Vx>(&self, res: &[C], h: usize, m: usize, half_scale: X) -> Cx<X> {
        let a = Cx::<X>::ld(&res[m]);
        let b = Cx::<X>::ld(&res[if m == 0 { 0 } else { h - m }]);
        self.order_of(a, b, m, half_scale)
    }

    /// [`order`](Self::order) from `a = Z_m` and `zb = Z_{h-m}` (`Z_0`
    /// for `m = 0`).
    #[inline(always)]
    fn order_of<X: Vx>(&self, a: Cx<X>, zb: Cx<X>, m: usize, half_scale: X) -> Cx<X> {
        let b = zb.conj();
        let e = a.add(b);
        let o = a.sub(b).rot(false);
        e.add(o.mul(splat2(self.half[m]))).scale(half_scale)
    }

    /// The complex transform of `a` (sign `+` when `inverse`), using `b` as
    /// the other buffer; returns the buffer holding the result.
    #[inline(always)]
    fn complex<'w, X: Vx>(&self, a: &'w mut [C], b: &'w mut [C], inverse: bool) -> &'w [C] {
        self.stages_of::<X>(&self.stages, a, b, inverse)
    }

    /// The last stage when it can be fused with the step after it: one
    /// transform of length `h` left to join (`r = 1`), radix 3 or 6.
    fn fusable_last(&self) -> Option<&Stage> {
        self.stages
            .last()
            .filter(|st| st.l * st.p == self.h && matches!(st.p, 3 | 6))
    }

    /// The stages `stages` of the complex transform of `a`, as
    /// [`complex`](Self::complex).
    #[inline(always)]
    fn stages_of<'w, X: Vx>(
        &self,
        stages: &[Stage],
        a: &'w mut [C],
        b: &'w mut [C],
        inverse: bool,
    ) -> &'w [C] {
        let (mut src, mut dst) = (a, b);
        for st in stages {
            match st.p {
                8 => radix8::<X>(st, src, dst, inverse),
                4 => radix4::<X>(st, src, dst, inverse),
                2 => radix2::<X>(st, src, dst, inverse),
                3 => radix3::<X>(st, src, dst, inverse),
                6 => radix6::<X>(st, src, dst, inverse),
                _ => radix_any::<X>(st, src, dst, inverse),
            }
            std::mem::swap(&mut src, &mut dst);
        }
        src
    }
}

/// The twiddle `w` conjugated for the inverse transform.
#[inline(always)]
fn tw(w: (f64, f64), inverse: bool) -> (f64, f64) {
    if inverse {
        (w.0, -w.1)
    } else {
        w
    }
}

// Stage of radix p on transforms of length l done so far (h = l p r):
// the input holds, at f r p + r q + j (f < l, q < p, j < r), value f of
// the transform of the subsequence j + r q; the output, at (f + l g) r + j,
// value f + l g of the subsequence j's transform of length l p:
// out = sum_q w_p^{g q} (w_{lp}^{f q} in(f, q, j)).

#[inline(always)]
fn radix2<X: Vx>(st: &Stage, src: &[C], dst: &mut [C], inverse: bool) {
    let (l, r) = (st.l, src.len() / (2 * st.l));
    for f in 0..l {
        let w = splat2::<X>(tw(st.tw[f], inverse));
        for j in 0..r {
            let a0 = Cx::<X>::ld(&src[f * r * 2 + j]);
            let mut a1 = Cx::<X>::ld(&src[f * r * 2 + r + j]);
            if f != 0 {
                a1 = a1.mul(w);
            }
            a0.add(a1).st(&mut dst[f * r + j]);
            a0.sub(a1).st(&mut dst[(f + l) * r + j]);
        }
    }
}

#[inline(always)]
fn radix4<X: Vx>(st: &Stage, src: &[C], dst: &mut [C], inverse: bool) {
    let (l, r) = (st.l, src.len() / (4 * st.l));
    for f in 0..l {
        let w = [
            splat2::<X>(tw(st.tw[f * 3], inverse)),
            splat2::<X>(tw(st.tw[f * 3 + 1], inverse)),
            splat2::<X>(tw(st.tw[f * 3 + 2], inverse)),
        ];
        for j in 0..r {
            let base = f * r * 4 + j;
            let a0 = Cx::<X>::ld(&src[base]);
            let (mut a1, mut a2, mut a3) = (
                Cx::<X>::ld(&src[base + r]),
                Cx::<X>::ld(&src[base + 2 * r]),
                Cx::<X>::ld(&src[base + 3 * r]),
            );
            if f != 0 {
                a1 = a1.mul(w[0]);
                a2 = a2.mul(w[1]);
                a3 = a3.mul(w[2]);
            }
            let y = four(a0, a1, a2, a3, inverse);
            for (g, yg) in y.into_iter().enumerate() {
                yg.st(&mut dst[(f + g * l) * r + j]);
            }
        }
    }
}

/// `v e^{-+2 pi i k / 8}` for `k` 1 or 3 (the sign `+` when `inverse`),
/// `r` = `1 / sqrt 2`.
#[inline(always)]
fn w8<X: Vx>(v: Cx<X>, k: usize, inverse: bool, r: X) -> Cx<X> {
    let (x, y) = (v.re, v.im);
    let (re, im) = match (k, inverse) {
        // (1 - i) / sqrt 2
        (1, false) => (x.add(y), y.sub(x)),
        // (1 + i) / sqrt 2
        (1, true) => (x.sub(y), x.add(y)),
        // (-1 - i) / sqrt 2
        (_, false) => (y.sub(x), x.add(y).neg()),
        // (-1 + i) / sqrt 2
        (_, true) => (x.add(y).neg(), x.sub(y)),
    };
    Cx {
        re: re.mul(r),
        im: im.mul(r),
    }
}

/// The 4-point transform of `b` (sign `+` when `inverse`): the butterfly
/// of [`radix4`] and the two halves of [`radix8`].
#[inline(always)]
fn four<X: Vx>(b0: Cx<X>, b1: Cx<X>, b2: Cx<X>, b3: Cx<X>, inverse: bool) -> [Cx<X>; 4] {
    let (s02, d02) = (b0.add(b2), b0.sub(b2));
    let (s13, d13) = (b1.add(b3), b1.sub(b3).rot(inverse));
    [s02.add(s13), d02.add(d13), s02.sub(s13), d02.sub(d13)]
}

#[inline(always)]
fn radix8<X: Vx>(st: &Stage, src: &[C], dst: &mut [C], inverse: bool) {
    let (l, r) = (st.l, src.len() / (8 * st.l));
    let rt = X::splat(0.5f64.sqrt());
    for f in 0..l {
        let tws = &st.tw[f * 7..f * 7 + 7];
        for j in 0..r {
            let base = f * r * 8 + j;
            // (No closures here: they would not take the target features
            // of the caller, and the vector operations would become calls.)
            let a0 = Cx::<X>::ld(&src[base]);
            let mut a1 = Cx::<X>::ld(&src[base + r]);
            let mut a2 = Cx::<X>::ld(&src[base + 2 * r]);
            let mut a3 = Cx::<X>::ld(&src[base + 3 * r]);
            let mut a4 = Cx::<X>::ld(&src[base + 4 * r]);
            let mut a5 = Cx::<X>::ld(&src[base + 5 * r]);
            let mut a6 = Cx::<X>::ld(&src[base + 6 * r]);
            let mut a7 = Cx::<X>::ld(&src[base + 7 * r]);
            if f != 0 {
                a1 = a1.mul(splat2(tw(tws[0], inverse)));
                a2 = a2.mul(splat2(tw(tws[1], inverse)));
                a3 = a3.mul(splat2(tw(tws[2], inverse)));
                a4 = a4.mul(splat2(tw(tws[3], inverse)));
                a5 = a5.mul(splat2(tw(tws[4], inverse)));
                a6 = a6.mul(splat2(tw(tws[5], inverse)));
                a7 = a7.mul(splat2(tw(tws[6], inverse)));
            }
            let y = eight([a0, a1, a2, a3, a4, a5, a6, a7], inverse, rt);
            for (g, yg) in y.into_iter().enumerate() {
                yg.st(&mut dst[(f + g * l) * r + j]);
            }
        }
    }
}

/// The 8-point transform of `a` (sign `+` when `inverse`; `rt` = `1 /
/// sqrt 2`): the butterfly of [`radix8`].
#[inline(always)]
fn eight<X: Vx>(a: [Cx<X>; 8], inverse: bool, rt: X) -> [Cx<X>; 8] {
    // The 4-point transforms of the even and the odd values.
    let e = four(a[0], a[2], a[4], a[6], inverse);
    let o = four(a[1], a[3], a[5], a[7], inverse);
    let o1 = w8(o[1], 1, inverse, rt);
    let o2 = o[2].rot(inverse);
    let o3 = w8(o[3], 3, inverse, rt);
    [
        e[0].add(o[0]),
        e[1].add(o1),
        e[2].add(o2),
        e[3].add(o3),
        e[0].sub(o[0]),
        e[1].sub(o1),
        e[2].sub(o2),
        e[3].sub(o3),
    ]
}

#[inline(always)]
fn radix3<X: Vx>(st: &Stage, src: &[C], dst: &mut [C], inverse: bool) {
    let (l, r) = (st.l, src.len() / (3 * st.l));
    // w_3 = -1/2 -+ i sqrt(3)/2.
    let s3 = X::splat(0.75f64.sqrt());
    let half = X::splat(0.5);
    for f in 0..l {
        let w = [
            splat2::<X>(tw(st.tw[f * 2], inverse)),
            splat2::<X>(tw(st.tw[f * 2 + 1], inverse)),
        ];
        for j in 0..r {
            let base = f * r * 3 + j;
            let a0 = Cx::<X>::ld(&src[base]);
            let (mut a1, mut a2) = (Cx::<X>::ld(&src[base + r]), Cx::<X>::ld(&src[base + 2 * r]));
            if f != 0 {
                a1 = a1.mul(w[0]);
                a2 = a2.mul(w[1]);
            }
            let y = three(a0, a1, a2, inverse, s3, half);
            for (g, yg) in y.iter().enumerate() {
                yg.st(&mut dst[(f + g * l) * r + j]);
            }
        }
    }
}

/// The `P` outputs of butterfly `f` of a last stage (`r = 1`) of radix `P`
/// (3 or 6, `st.p`): output `g` is value `f + l g` of the transform. The
/// same operations as [`radix3`] and [`radix6`].
#[inline(always)]
fn last_butterfly<X: Vx, const P: usize>(
    st: &Stage,
    src: &[C],
    f: usize,
    inverse: bool,
) -> [Cx<X>; P] {
    let s3 = X::splat(0.75f64.sqrt());
    let half = X::splat(0.5);
    debug_assert_eq!(st.p, P);
    let base = f * P;
    let mut a = [Cx::<X>::ld(&src[base]); P];
    for (q, aq) in a.iter_mut().enumerate().skip(1) {
        let v = Cx::<X>::ld(&src[base + q]);
        *aq = if f == 0 {
            v
        } else {
            v.mul(splat2(tw(st.tw[f * (P - 1) + q - 1], inverse)))
        };
    }
    let mut y = a;
    if P == 3 {
        y.copy_from_slice(&three(a[0], a[1], a[2], inverse, s3, half));
    } else {
        let w1 = splat2::<X>(tw(st.root[1], inverse));
        let w2 = splat2::<X>(tw(st.root[2], inverse));
        let b0 = three(a[0], a[2], a[4], inverse, s3, half);
        let b1 = three(a[1], a[3], a[5], inverse, s3, half);
        let t = [b1[0], b1[1].mul(w1), b1[2].mul(w2)];
        for k in 0..3 {
            y[k] = b0[k].add(t[k]);
            y[k + 3] = b0[k].sub(t[k]);
        }
    }
    y
}

/// Radix 6 as two DFTs of three (the even and the odd inputs) joined by
/// one of two: with `B0`, `B1` the three-point transforms of `a0, a2, a4`
/// and `a1, a3, a5`, `y_k = B0_k + w_6^k B1_k` and `y_{k+3} = B0_k - w_6^k
/// B1_k` for `k < 3`.
#[inline(always)]
fn radix6<X: Vx>(st: &Stage, src: &[C], dst: &mut [C], inverse: bool) {
    let (l, r) = (st.l, src.len() / (6 * st.l));
    let s3 = X::splat(0.75f64.sqrt());
    let half = X::splat(0.5);
    let w1 = splat2::<X>(tw(st.root[1], inverse));
    let w2 = splat2::<X>(tw(st.root[2], inverse));
    for f in 0..l {
        let mut w = [w1; 5];
        for (q, wq) in w.iter_mut().enumerate() {
            *wq = splat2::<X>(tw(st.tw[f * 5 + q], inverse));
        }
        for j in 0..r {
            let base = f * r * 6 + j;
            let mut a = [Cx::<X>::ld(&src[base]); 6];
            for (q, aq) in a.iter_mut().enumerate().skip(1) {
                let v = Cx::<X>::ld(&src[base + q * r]);
                *aq = if f == 0 { v } else { v.mul(w[q - 1]) };
            }
            let b0 = three(a[0], a[2], a[4], inverse, s3, half);
            let b1 = three(a[1], a[3], a[5], inverse, s3, half);
            let t = [b1[0], b1[1].mul(w1), b1[2].mul(w2)];
            for k in 0..3 {
                b0[k].add(t[k]).st(&mut dst[(f + k * l) * r + j]);
                b0[k].sub(t[k]).st(&mut dst[(f + (k + 3) * l) * r + j]);
            }
        }
    }
}

/// The three-point transform of `a0, a1, a2` (`w_3 = -1/2 -+ i sqrt(3)/2`;
/// `s3 = sqrt(3) / 2`, `half = 1 / 2`), for [`radix3`] and [`radix6`].
#[inline(always)]
fn three<X: Vx>(a0: Cx<X>, a1: Cx<X>, a2: Cx<X>, inverse: bool, s3: X, half: X) -> [Cx<X>; 3] {
    let s = a1.add(a2);
    let d = a1.sub(a2).rot(inverse).scale(s3);
    let m = a0.sub(s.scale(half));
    [a0.add(s), m.add(d), m.sub(d)]
}

/// Radices 5 and 7: the DFT of the `p` values term by term.
#[inline(always)]
fn radix_any<X: Vx>(st: &Stage, src: &[C], dst: &mut [C], inverse: bool) {
    let (p, l) = (st.p, st.l);
    let r = src.len() / (p * l);
    let zero = Cx::<X>::ld(&ZC);
    let mut a = [zero; 7];
    for f in 0..l {
        for j in 0..r {
            let base = f * r * p + j;
            a[0] = Cx::ld(&src[base]);
            for q in 1..p {
                let v = Cx::<X>::ld(&src[base + q * r]);
                a[q] = if f == 0 {
                    v
                } else {
                    v.mul(splat2(tw(st.tw[f * (p - 1) + q - 1], inverse)))
                };
            }
            for g in 0..p {
                let mut acc = a[0];
                for (q, aq) in a.iter().enumerate().take(p).skip(1) {
                    acc = acc.add(aq.mul(splat2(tw(st.root[(g * q) % p], inverse))));
                }
                acc.st(&mut dst[(f + g * l) * r + j]);
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

    fn simds() -> Vec<Isa> {
        Isa::available_all().collect()
    }

    /// The plain DFT, term by term (an error of about `n` ulps).
    fn dft(x: &[f64], m: usize) -> (f64, f64) {
        let n = x.len();
        let (mut re, mut im) = (0.0, 0.0);
        for (k, &v) in x.iter().enumerate() {
            let (c, s) = cis(m * k, n);
            re += v * c;
            im += v * s;
        }
        (re, im)
    }

    const SIZES: [usize; 14] = [2, 4, 6, 10, 14, 16, 24, 30, 42, 96, 128, 192, 210, 768];

    #[test]
    fn r2c_is_the_dft_in_every_lane() {
        for n in SIZES {
            let plan = LaneFft::new(n).unwrap();
            for rows in [1, 5, LANES] {
                let inp = noise(rows * n, n as u64);
                let nm = n / 2;
                let mut want = vec![];
                for r in 0..rows {
                    for m in 0..nm {
                        want.push(dft(&inp[r * n..(r + 1) * n], m));
                    }
                }
                let mut seen: Option<Vec<u64>> = None;
                for simd in simds() {
                    let mut got = vec![Complex64::new(f64::NAN, f64::NAN); rows * nm];
                    let mut work = Work::default();
                    plan.r2c(simd, &mut work, &inp, rows, nm, 1.0, |m, v| {
                        for (r, x) in v.iter().enumerate() {
                            got[r * nm + m] = *x;
                        }
                    });
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        let err = (g.re - w.0).abs().max((g.im - w.1).abs());
                        // Measured at most 1.5e-16 n over these sizes
                        // (both sums round about n times): a 10x margin.
                        assert!(
                            err < 1.5e-15 * n as f64,
                            "n {n} rows {rows} {simd:?} value {i}: {g} against {w:?}"
                        );
                    }
                    // Stored straight to their places (order m's rows at
                    // 4 + 2 m rows..): the same values, for all orders and
                    // for the first two thirds (the spheres' truncation;
                    // the others untouched).
                    for keep in [nm, (2 * nm).div_ceil(3)] {
                        let mut to = vec![Complex64::new(f64::NAN, f64::NAN); 2 * rows * nm + 4];
                        let at = |m: usize| 4 + 2 * m * rows;
                        plan.r2c_to(simd, &mut work, &inp, rows, 1.0, keep, &mut to, at);
                        for r in 0..rows {
                            for m in 0..nm {
                                let (a, b) = (to[at(m) + r], got[r * nm + m]);
                                if m >= keep {
                                    assert!(
                                        a.re.is_nan() && a.im.is_nan(),
                                        "n {n}: order {m} written"
                                    );
                                    continue;
                                }
                                assert_eq!(
                                    (a.re.to_bits(), a.im.to_bits()),
                                    (b.re.to_bits(), b.im.to_bits()),
                                    "n {n} rows {rows} {simd:?} keep {keep}: r2c_to differs from r2c"
                                );
                            }
                        }
                    }
                    let bits: Vec<u64> = got
                        .iter()
                        .flat_map(|c| [c.re.to_bits(), c.im.to_bits()])
                        .collect();
                    if let Some(s) = &seen {
                        assert_eq!(s, &bits, "n {n}: {simd:?} differs from the portable bits");
                    }
                    seen = Some(bits);
                }
            }
        }
    }

    #[test]
    fn c2r_is_the_inverse_dft_in_every_lane() {
        for n in SIZES {
            let plan = LaneFft::new(n).unwrap();
            let h = n / 2;
            for (rows, nm) in [(1, h), (3, h), (LANES, h.div_ceil(2))] {
                let raw = noise(2 * rows * nm, 7 + n as u64);
                // spec(m)[r]: the order's values of the rows.
                let spec: Vec<Vec<Complex64>> = (0..nm)
                    .map(|m| {
                        (0..rows)
                            .map(|r| {
                                let i = 2 * (r * nm + m);
                                Complex64::new(raw[i], if m == 0 { 0.0 } else { raw[i + 1] })
                            })
                            .collect()
                    })
                    .collect();
                let mut seen: Option<Vec<u64>> = None;
                for simd in simds() {
                    let mut out = vec![f64::NAN; rows * n];
                    let mut work = Work::default();
                    plan.c2r(simd, &mut work, nm, |m| &spec[m][..], &mut out, rows);
                    for r in 0..rows {
                        for k in 0..n {
                            // X_0 + 2 Re sum_{0 < m < nm} X_m e^{2 pi i m k / n}.
                            let mut want = spec[0][r].re;
                            for (m, s) in spec.iter().enumerate().skip(1) {
                                let (c, sn) = cis(m * k, n);
                                // e^{+...} = (c, -sn).
                                want += 2.0 * (s[r].re * c + s[r].im * sn);
                            }
                            let got = out[r * n + k];
                            // Measured at most 2.6e-16 n: a 10x margin.
                            assert!(
                                (got - want).abs() < 2.6e-15 * n as f64,
                                "n {n} rows {rows} {simd:?} ({r}, {k}): {got} against {want}"
                            );
                        }
                    }
                    let bits: Vec<u64> = out.iter().map(|v| v.to_bits()).collect();
                    if let Some(s) = &seen {
                        assert_eq!(s, &bits, "n {n}: {simd:?} differs from the portable bits");
                    }
                    seen = Some(bits);
                }
            }
        }
    }

    /// The synthesis writes its rows at any offset of the output (the
    /// AVX-512 stores shift to the cache lines of each row): the same bits
    /// at every offset, and nothing written outside the rows.
    #[test]
    fn c2r_writes_only_its_rows_at_any_alignment() {
        for n in [8, 10, 14, 16, 24, 30, 96, 210] {
            let plan = LaneFft::new(n).unwrap();
            let nm = n / 2;
            for rows in [LANES, 3] {
                let raw = noise(2 * rows * nm, 11 + n as u64);
                let spec: Vec<Vec<Complex64>> = (0..nm)
                    .map(|m| {
                        (0..rows)
                            .map(|r| {
                                Complex64::new(raw[2 * (r * nm + m)], raw[2 * (r * nm + m) + 1])
                            })
                            .collect()
                    })
                    .collect();
                for simd in simds() {
                    let mut want: Option<Vec<u64>> = None;
                    for off in 0..LANES {
                        let sentinel = f64::from_bits(0x7ff8_dead_beef_0000);
                        let mut buf = vec![sentinel; rows * n + 2 * LANES];
                        let mut work = Work::default();
                        let out = &mut buf[off..off + rows * n];
                        plan.c2r(simd, &mut work, nm, |m| &spec[m][..], out, rows);
                        let bits: Vec<u64> = out.iter().map(|v| v.to_bits()).collect();
                        assert!(
                            bits.iter().all(|&b| b != sentinel.to_bits()),
                            "n {n} rows {rows} {simd:?} offset {off}: a value not written"
                        );
                        let outside = buf[..off].iter().chain(&buf[off + rows * n..]);
                        assert!(
                            outside
                                .into_iter()
                                .all(|v| v.to_bits() == sentinel.to_bits()),
                            "n {n} rows {rows} {simd:?} offset {off}: written outside the rows"
                        );
                        match &want {
                            Some(w) => assert_eq!(w, &bits, "n {n} {simd:?} offset {off}"),
                            None => want = Some(bits),
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn plans_only_for_even_lengths_with_small_factors() {
        for n in [0, 1, 3, 22, 26, 2 * 11 * 4] {
            assert!(LaneFft::new(n).is_none(), "{n}");
        }
        for n in SIZES {
            assert_eq!(LaneFft::new(n).unwrap().len(), n);
        }
    }
}
