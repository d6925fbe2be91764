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
//! Cooley-Tukey FFT with radices 4, 2, 3, 5 and 7: each stage reads one
//! buffer and writes the other, in natural order at the end. Lengths with a
//! prime factor above 7 have no plan ([`LaneFft::new`] returns `None`).
//!
//! Every lane sees the same operations in the same order, whatever the
//! vector width the compiler picks for the build's target features (Rust
//! never fuses a multiply and an add on its own), so the AVX-512, AVX2 and
//! portable versions give the same bits.

use crate::legendre::Simd;
use num_complex::Complex64;
use rayon::prelude::*;
use std::f64::consts::PI;

/// Rows transformed together.
pub(crate) const LANES: usize = 8;

/// One value of each of the [`LANES`] rows.
type V = [f64; LANES];

/// [`LANES`] complex values, real and imaginary parts apart.
#[derive(Clone, Copy)]
struct C {
    re: V,
    im: V,
}

const ZV: V = [0.0; LANES];
const ZC: C = C { re: ZV, im: ZV };

#[inline(always)]
fn map2(a: &V, b: &V, f: impl Fn(f64, f64) -> f64) -> V {
    let mut o = ZV;
    for i in 0..LANES {
        o[i] = f(a[i], b[i]);
    }
    o
}

impl C {
    #[inline(always)]
    fn add(&self, o: &C) -> C {
        C {
            re: map2(&self.re, &o.re, |a, b| a + b),
            im: map2(&self.im, &o.im, |a, b| a + b),
        }
    }
    #[inline(always)]
    fn sub(&self, o: &C) -> C {
        C {
            re: map2(&self.re, &o.re, |a, b| a - b),
            im: map2(&self.im, &o.im, |a, b| a - b),
        }
    }
    /// Times the scalar `(c, s)`.
    #[inline(always)]
    fn mul(&self, (c, s): (f64, f64)) -> C {
        C {
            re: map2(&self.re, &self.im, |x, y| x * c - y * s),
            im: map2(&self.re, &self.im, |x, y| x * s + y * c),
        }
    }
    /// Times the real scalar `r`.
    #[inline(always)]
    fn scale(&self, r: f64) -> C {
        C {
            re: self.re.map(|x| x * r),
            im: self.im.map(|x| x * r),
        }
    }
    /// Times `-i` (`inverse = false`) or `i`.
    #[inline(always)]
    fn rot(&self, inverse: bool) -> C {
        if inverse {
            C {
                re: self.im.map(|x| -x),
                im: self.re,
            }
        } else {
            C {
                re: self.im,
                im: self.re.map(|x| -x),
            }
        }
    }
    /// The complex conjugate.
    #[inline(always)]
    fn conj(&self) -> C {
        C {
            re: self.re,
            im: self.im.map(|x| -x),
        }
    }
}

/// The values `v` of `rows` rows (at most [`LANES`]) as lanes, 0 in the
/// others; a whole block with a loop of fixed length, which the compiler
/// turns into shuffles.
#[inline(always)]
fn load(v: &[Complex64], rows: usize) -> C {
    let mut c = ZC;
    if let Ok(v) = <&[Complex64; LANES]>::try_from(&v[..rows.min(v.len())]) {
        for i in 0..LANES {
            c.re[i] = v[i].re;
            c.im[i] = v[i].im;
        }
    } else {
        for (i, x) in v[..rows].iter().enumerate() {
            c.re[i] = x.re;
            c.im[i] = x.im;
        }
    }
    c
}

/// `z[k]` = `(row[2 k], row[2 k + 1])` of the rows of `n` values of `inp`
/// (0 in lanes from `rows` on).
#[inline(always)]
fn rows_in(simd: Simd, inp: &[f64], n: usize, rows: usize, z: &mut [C]) {
    let h = n / 2;
    let mut k0 = 0;
    #[cfg(target_arch = "x86_64")]
    if simd == Simd::Avx512 && rows == LANES && inp.len() >= LANES * n && z.len() >= h {
        k0 = h / 4 * 4;
        // SAFETY: AVX-512F was found (`Simd::Avx512`); the sizes were
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
fn rows_out(simd: Simd, z: &[C], out: &mut [f64], n: usize, rows: usize) {
    let h = n / 2;
    let mut k0 = 0;
    #[cfg(target_arch = "x86_64")]
    if simd == Simd::Avx512 && rows == LANES && out.len() >= LANES * n && z.len() >= h {
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
mod avx512 {
    use super::{C, LANES};
    use std::arch::x86_64::*;

    /// The 8 x 8 transpose of `r` (row `i` of the result holds element `i`
    /// of every input row).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn transpose(r: &[__m512d; 8]) -> [__m512d; 8] {
        // Pairs of rows, interleaved: elements (2 q, 2 q + 1) of rows i, i + 1.
        let t = [
            _mm512_unpacklo_pd(r[0], r[1]),
            _mm512_unpackhi_pd(r[0], r[1]),
            _mm512_unpacklo_pd(r[2], r[3]),
            _mm512_unpackhi_pd(r[2], r[3]),
            _mm512_unpacklo_pd(r[4], r[5]),
            _mm512_unpackhi_pd(r[4], r[5]),
            _mm512_unpacklo_pd(r[6], r[7]),
            _mm512_unpackhi_pd(r[6], r[7]),
        ];
        // Elements {c, c + 4} of rows 0-3 and of rows 4-7, c = 0..4.
        let u = [
            _mm512_shuffle_f64x2::<0x88>(t[0], t[2]),
            _mm512_shuffle_f64x2::<0x88>(t[1], t[3]),
            _mm512_shuffle_f64x2::<0xdd>(t[0], t[2]),
            _mm512_shuffle_f64x2::<0xdd>(t[1], t[3]),
            _mm512_shuffle_f64x2::<0x88>(t[4], t[6]),
            _mm512_shuffle_f64x2::<0x88>(t[5], t[7]),
            _mm512_shuffle_f64x2::<0xdd>(t[4], t[6]),
            _mm512_shuffle_f64x2::<0xdd>(t[5], t[7]),
        ];
        [
            _mm512_shuffle_f64x2::<0x88>(u[0], u[4]),
            _mm512_shuffle_f64x2::<0x88>(u[1], u[5]),
            _mm512_shuffle_f64x2::<0x88>(u[2], u[6]),
            _mm512_shuffle_f64x2::<0x88>(u[3], u[7]),
            _mm512_shuffle_f64x2::<0xdd>(u[0], u[4]),
            _mm512_shuffle_f64x2::<0xdd>(u[1], u[5]),
            _mm512_shuffle_f64x2::<0xdd>(u[2], u[6]),
            _mm512_shuffle_f64x2::<0xdd>(u[3], u[7]),
        ]
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
    /// # Safety
    /// As [`rows_in`], with `out` for `inp`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn rows_out(z: &[C], n: usize, k_end: usize, out: &mut [f64]) {
        debug_assert!(2 * k_end <= n && out.len() >= LANES * n && z.len() >= k_end);
        let p = out.as_mut_ptr();
        let mut c = [_mm512_setzero_pd(); 8];
        for kb in (0..k_end).step_by(4) {
            for j in 0..4 {
                let v = &z[kb + j];
                // SAFETY: eight readable doubles each.
                unsafe {
                    c[2 * j] = _mm512_loadu_pd(v.re.as_ptr());
                    c[2 * j + 1] = _mm512_loadu_pd(v.im.as_ptr());
                }
            }
            let r = transpose(&c);
            for (i, v) in r.iter().enumerate() {
                // SAFETY: 2 kb + 8 <= n: inside row i.
                unsafe { _mm512_storeu_pd(p.add(i * n + 2 * kb), *v) };
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
        // Radices: fours first, then a two, then threes, fives, sevens.
        let mut left = h;
        let mut radices = Vec::new();
        while left.is_multiple_of(4) {
            radices.push(4);
            left /= 4;
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
        simd: Simd,
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
            // SAFETY: `Simd::Avx512` is only made after AVX-512F was found.
            Simd::Avx512 => unsafe { self.c2r_avx512(work, nm, &spec, out, rows) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Simd::Avx2` is only made after AVX2 was found.
            Simd::Avx2 => unsafe { self.c2r_avx2(work, nm, &spec, out, rows) },
            _ => self.c2r_body(Simd::Generic, work, nm, &spec, out, rows),
        }
    }

    /// Analysis of rows `0..rows` (`rows <= LANES`) of `inp` (`rows * n`
    /// values): `put(m, X)` for `m < nm` (`nm <= n / 2`) with `X[r] =
    /// scale * sum_k inp[r * n + k] e^{-2 pi i m k / n}`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn r2c(
        &self,
        simd: Simd,
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
            Simd::Avx512 => unsafe { self.r2c_avx512(work, inp, rows, nm, scale, &mut put) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `c2r`.
            Simd::Avx2 => unsafe { self.r2c_avx2(work, inp, rows, nm, scale, &mut put) },
            _ => self.r2c_body(Simd::Generic, work, inp, rows, nm, scale, &mut put),
        }
    }

    /// [`r2c`](Self::r2c) of every row of `grid` (rows of `n` values),
    /// blocks of [`LANES`] rows in parallel, into `out` row by row (`nm`
    /// orders a row).
    pub(crate) fn r2c_rows_par(
        &self,
        simd: Simd,
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
    unsafe fn c2r_avx512<'s>(
        &self,
        work: &mut Work,
        nm: usize,
        spec: &dyn Fn(usize) -> &'s [Complex64],
        out: &mut [f64],
        rows: usize,
    ) {
        self.c2r_body(Simd::Avx512, work, nm, spec, out, rows)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn c2r_avx2<'s>(
        &self,
        work: &mut Work,
        nm: usize,
        spec: &dyn Fn(usize) -> &'s [Complex64],
        out: &mut [f64],
        rows: usize,
    ) {
        self.c2r_body(Simd::Avx2, work, nm, spec, out, rows)
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
        self.r2c_body(Simd::Avx512, work, inp, rows, nm, scale, put)
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
        self.r2c_body(Simd::Avx2, work, inp, rows, nm, scale, put)
    }

    #[inline(always)]
    fn c2r_body<'s>(
        &self,
        simd: Simd,
        work: &mut Work,
        nm: usize,
        spec: &dyn Fn(usize) -> &'s [Complex64],
        out: &mut [f64],
        rows: usize,
    ) {
        let (h, n) = (self.h, self.n);
        let (z, tmp) = (&mut work.a, &mut work.b);
        // X_m of the rows into `tmp`, 0 from nm on (and in lanes from
        // `rows` on), `X_0` real.
        for (m, t) in tmp.iter_mut().enumerate() {
            *t = if m < nm { load(spec(m), rows) } else { ZC };
        }
        tmp[0].im = ZV;
        // Z_m = (X_m + conj X_{h-m}) + i (X_m - conj X_{h-m}) e^{2 pi i m / n}:
        // the even samples' transform plus i times the odd samples'. X_h
        // (the Nyquist term, beyond `nm`) is 0.
        for m in 0..h {
            let a = tmp[m];
            let b = if m == 0 { ZC } else { tmp[h - m].conj() };
            let (c, s) = self.half[m];
            let e = a.add(&b);
            let o = a.sub(&b).mul((c, -s));
            z[m] = e.add(&o.rot(true));
        }
        let res = self.complex(z, tmp, true);
        // z_k = x_{2k} + i x_{2k+1}.
        rows_out(simd, res, out, n, rows);
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn r2c_body(
        &self,
        simd: Simd,
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
        let res = self.complex(z, tmp, false);
        // X_m = E_m + e^{-2 pi i m / n} O_m with E_m = (Z_m + conj Z_{h-m}) / 2,
        // O_m = (Z_m - conj Z_{h-m}) / (2 i).
        let mut vals = [Complex64::new(0.0, 0.0); LANES];
        for m in 0..nm {
            let a = res[m];
            let b = res[if m == 0 { 0 } else { h - m }].conj();
            let e = a.add(&b);
            let o = a.sub(&b).rot(false);
            let xm = e.add(&o.mul(self.half[m])).scale(0.5 * scale);
            if rows == LANES {
                // A loop of fixed length: shuffles, not single stores
                // that the copy out of `vals` would wait for.
                for (r, v) in vals.iter_mut().enumerate() {
                    *v = Complex64::new(xm.re[r], xm.im[r]);
                }
            } else {
                for (r, v) in vals[..rows].iter_mut().enumerate() {
                    *v = Complex64::new(xm.re[r], xm.im[r]);
                }
            }
            put(m, &vals[..rows]);
        }
    }

    /// The complex transform of `a` (sign `+` when `inverse`), using `b` as
    /// the other buffer; returns the buffer holding the result.
    #[inline(always)]
    fn complex<'w>(&self, a: &'w mut [C], b: &'w mut [C], inverse: bool) -> &'w [C] {
        let (mut src, mut dst) = (a, b);
        for st in &self.stages {
            match st.p {
                4 => radix4(st, src, dst, inverse),
                2 => radix2(st, src, dst, inverse),
                3 => radix3(st, src, dst, inverse),
                _ => radix_any(st, src, dst, inverse),
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
fn radix2(st: &Stage, src: &[C], dst: &mut [C], inverse: bool) {
    let (l, r) = (st.l, src.len() / (2 * st.l));
    for f in 0..l {
        let w = tw(st.tw[f], inverse);
        for j in 0..r {
            let a0 = src[f * r * 2 + j];
            let mut a1 = src[f * r * 2 + r + j];
            if f != 0 {
                a1 = a1.mul(w);
            }
            dst[f * r + j] = a0.add(&a1);
            dst[(f + l) * r + j] = a0.sub(&a1);
        }
    }
}

#[inline(always)]
fn radix4(st: &Stage, src: &[C], dst: &mut [C], inverse: bool) {
    let (l, r) = (st.l, src.len() / (4 * st.l));
    for f in 0..l {
        let w = [1, 2, 3].map(|q| tw(st.tw[f * 3 + q - 1], inverse));
        for j in 0..r {
            let base = f * r * 4 + j;
            let a0 = src[base];
            let (mut a1, mut a2, mut a3) = (src[base + r], src[base + 2 * r], src[base + 3 * r]);
            if f != 0 {
                a1 = a1.mul(w[0]);
                a2 = a2.mul(w[1]);
                a3 = a3.mul(w[2]);
            }
            let s02 = a0.add(&a2);
            let d02 = a0.sub(&a2);
            let s13 = a1.add(&a3);
            let d13 = a1.sub(&a3).rot(inverse);
            dst[f * r + j] = s02.add(&s13);
            dst[(f + l) * r + j] = d02.add(&d13);
            dst[(f + 2 * l) * r + j] = s02.sub(&s13);
            dst[(f + 3 * l) * r + j] = d02.sub(&d13);
        }
    }
}

#[inline(always)]
fn radix3(st: &Stage, src: &[C], dst: &mut [C], inverse: bool) {
    let (l, r) = (st.l, src.len() / (3 * st.l));
    // w_3 = -1/2 -+ i sqrt(3)/2.
    let s3 = 0.75f64.sqrt();
    for f in 0..l {
        let w = [1, 2].map(|q| tw(st.tw[f * 2 + q - 1], inverse));
        for j in 0..r {
            let base = f * r * 3 + j;
            let a0 = src[base];
            let (mut a1, mut a2) = (src[base + r], src[base + 2 * r]);
            if f != 0 {
                a1 = a1.mul(w[0]);
                a2 = a2.mul(w[1]);
            }
            let s = a1.add(&a2);
            let d = a1.sub(&a2).rot(inverse).scale(s3);
            let m = a0.sub(&s.scale(0.5));
            dst[f * r + j] = a0.add(&s);
            dst[(f + l) * r + j] = m.add(&d);
            dst[(f + 2 * l) * r + j] = m.sub(&d);
        }
    }
}

/// Radices 5 and 7: the DFT of the `p` values term by term.
#[inline(always)]
fn radix_any(st: &Stage, src: &[C], dst: &mut [C], inverse: bool) {
    let (p, l) = (st.p, st.l);
    let r = src.len() / (p * l);
    let mut a = [ZC; 7];
    for f in 0..l {
        for j in 0..r {
            let base = f * r * p + j;
            a[0] = src[base];
            for q in 1..p {
                let v = src[base + q * r];
                a[q] = if f == 0 {
                    v
                } else {
                    v.mul(tw(st.tw[f * (p - 1) + q - 1], inverse))
                };
            }
            for g in 0..p {
                let mut acc = a[0];
                for (q, aq) in a.iter().enumerate().take(p).skip(1) {
                    acc = acc.add(&aq.mul(tw(st.root[(g * q) % p], inverse)));
                }
                dst[(f + g * l) * r + j] = acc;
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

    fn simds() -> Vec<Simd> {
        let mut v = vec![Simd::Generic];
        for k in [crate::Kernel::Avx2, crate::Kernel::Avx512] {
            if let Some(s) = Simd::for_kernel(k) {
                v.push(s);
            }
        }
        v
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

    const SIZES: [usize; 12] = [2, 4, 6, 10, 14, 16, 24, 30, 42, 96, 192, 210];

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
