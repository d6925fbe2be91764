//! Exact sums of many values (norms, dot products, means) feeding
//! [`comm::exact`]'s reproducible reduction, with a vectorised fast path.
//!
//! Values are collected in blocks of [`BLOCK`]. With AVX2, a block whose
//! values are finite, not all zero and within a range of exponents is split
//! without error into [`LEVELS`] parts on fixed grids (the error-free
//! extraction of Rump, Ogita and Oishi, "Accurate floating-point summation
//! part I", SIAM J. Sci. Comput. 31, 2008, `ExtractScalar`): for
//! `σ = 2^k` and `|x| <= 2^-M σ`, `q = (σ + x) - σ` and `x' = x - q` are
//! exact, `x = q + x'`, `|q| <= 2^-M σ`, `|x'| <= 2^-53 σ` and `q` is a
//! multiple of `2^-53 σ`; the `q` of at most `2^M` values therefore sum
//! exactly in any order, in plain floating point. Each level's sum is added
//! to the [`ExactSum`]; whatever is left after the last level (values more
//! than about `2^110` below the block's largest) is split again the same
//! way, relative to its own largest value, a few times at most, then
//! added value by value; every block the fast path declines goes through
//! [`ExactSum::add_slice`].
//! The accumulated exact value, and so every rounded result, is therefore
//! the one `add_slice` of the raw values gives, on any CPU.

use comm::exact::ExactSum;
use simd::Isa;

/// Values per block (at most `2^M`).
const BLOCK: usize = 4096;
/// `2^M >= BLOCK`: the sum of a level's parts stays below its `σ`.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const M: i32 = 12;
/// Extraction levels: each takes `53 - M = 41` bits below the previous.
const LEVELS: usize = 3;

/// An exact accumulator fed value by value or by rows.
#[derive(Debug)]
pub(crate) struct Acc {
    sum: ExactSum,
    /// `BLOCK` values, the first `len` of them pending.
    buf: Box<[f64]>,
    len: usize,
    simd: Isa,
    /// The largest magnitude in `buf[..len]` and whether every value there
    /// is finite, when every pending value came through the AVX-512
    /// [`push_products`](Self::push_products) (which finds them while it
    /// writes the products, so that the extraction needs one pass over the
    /// block instead of two); `None` otherwise.
    scan: Option<(f64, bool)>,
}

impl Acc {
    pub fn new(simd: Isa) -> Self {
        Acc {
            sum: ExactSum::new(),
            buf: vec![0.0; BLOCK].into_boxed_slice(),
            len: 0,
            simd,
            scan: None,
        }
    }

    #[inline]
    pub fn push(&mut self, x: f64) {
        self.scan = None;
        self.buf[self.len] = x;
        self.len += 1;
        if self.len == BLOCK {
            self.flush();
        }
    }

    /// Adds every value of `xs`.
    pub fn push_slice(&mut self, mut xs: &[f64]) {
        while !xs.is_empty() {
            self.scan = None;
            let take = (BLOCK - self.len).min(xs.len());
            self.buf[self.len..self.len + take].copy_from_slice(&xs[..take]);
            self.len += take;
            xs = &xs[take..];
            if self.len == BLOCK {
                self.flush();
            }
        }
    }

    /// Adds the rounded products `a[i] * b[i]`.
    pub fn push_products(&mut self, mut a: &[f64], mut b: &[f64]) {
        assert_eq!(a.len(), b.len());
        while !a.is_empty() {
            let take = (BLOCK - self.len).min(a.len());
            let dst = &mut self.buf[self.len..self.len + take];
            match self.simd {
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => {
                    // SAFETY: this crate makes `Isa::Avx512` only through `Isa::detect`
                    // after it found AVX-512F on this CPU.
                    let (m, finite) = unsafe { avx512::products(dst, &a[..take], &b[..take]) };
                    self.scan = match (self.len, self.scan) {
                        (0, _) => Some((m, finite)),
                        (_, Some((m0, f0))) => Some((m0.max(m), f0 && finite)),
                        (_, None) => None,
                    };
                }
                _ => {
                    self.scan = None;
                    for ((d, x), y) in dst.iter_mut().zip(&a[..take]).zip(&b[..take]) {
                        *d = x * y;
                    }
                }
            }
            self.len += take;
            a = &a[take..];
            b = &b[take..];
            if self.len == BLOCK {
                self.flush();
            }
        }
    }

    /// The exact sum of everything added.
    pub fn finish(mut self) -> ExactSum {
        self.flush();
        self.sum
    }

    fn flush(&mut self) {
        if self.len == 0 {
            return;
        }
        let block = &mut self.buf[..self.len];
        self.len = 0;
        let mut scan = self.scan.take();
        // Rounds of extraction: each leaves in `buf` only values far
        // below the largest it saw.
        let mut rounds = 0;
        loop {
            let done: Option<([f64; LEVELS], bool)> = match (self.simd, scan.take()) {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: as below, and `Isa::Avx512` means AVX-512F.
                (Isa::Avx512, Some((m, true))) if m > 0.0 => unsafe { avx512::split(block, m) },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `Isa::Avx2` and `Isa::Avx512` are only made by
                // `Isa::detect` after it found AVX2 on this CPU.
                (Isa::Avx2 | Isa::Avx512, _) => unsafe { avx2::extract(block) },
                _ => None,
            };
            rounds += 1;
            match done {
                Some((parts, rest)) => {
                    for p in parts {
                        // `+ 0.0`: a zero part is +0 (the block holds a
                        // value other than -0.0, which `add_slice` records
                        // the same way).
                        self.sum.add(p + 0.0);
                    }
                    if !rest {
                        break;
                    }
                    if rounds == 4 {
                        for &x in block.iter() {
                            if x != 0.0 {
                                self.sum.add(x);
                            }
                        }
                        break;
                    }
                }
                None => {
                    if rounds == 1 {
                        self.sum.add_slice(block);
                    } else {
                        // Remainders: only -0.0 and +0.0 left, or values
                        // the fast path declines; none changes the flags
                        // that the first round set.
                        for &x in block.iter() {
                            if x != 0.0 {
                                self.sum.add(x);
                            }
                        }
                    }
                    break;
                }
            }
        }
    }
}

/// The grids `σ` of the extraction levels for a block whose largest
/// magnitude is `m`, or `None` if `m` is zero or subnormal or a grid would
/// leave the normal range.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn grids(m: f64) -> Option<[f64; LEVELS]> {
    if m == 0.0 {
        return None;
    }
    // 2^e > m; the first grid is 2^(e + M), the last 2^(e + M - 41 (LEVELS - 1)).
    let biased = (m.to_bits() >> 52) as i32;
    if biased == 0 {
        return None;
    }
    let e = biased - 1023 + 1;
    let top = e + M;
    let bottom = top - (53 - M) * (LEVELS as i32 - 1);
    if top > 1023 || bottom < -900 {
        return None;
    }
    let pow2 = |k: i32| f64::from_bits(((k + 1023) as u64) << 52);
    Some(std::array::from_fn(|l| pow2(top - (53 - M) * l as i32)))
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::LEVELS;
    use std::arch::x86_64::*;

    /// `dst[i] = a[i] * b[i]` (rounded products, as the portable loop), and
    /// the largest `|dst[i]|` with whether every product is finite.
    ///
    /// # Safety
    /// AVX-512F present; `a`, `b` and `dst` of one length.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn products(dst: &mut [f64], a: &[f64], b: &[f64]) -> (f64, bool) {
        debug_assert!(a.len() == dst.len() && b.len() == dst.len());
        let n = dst.len();
        let big = _mm512_set1_epi64(0x7fef_ffff_ffff_ffff);
        let (mut m0, mut m1) = (_mm512_setzero_pd(), _mm512_setzero_pd());
        let mut bad: __mmask8 = 0;
        let (ap, bp, dp) = (a.as_ptr(), b.as_ptr(), dst.as_mut_ptr());
        let mut look = |x: __m512d, m: &mut __m512d| {
            let v = _mm512_abs_pd(x);
            // Non-finite: magnitude bits above the largest finite double.
            bad |= _mm512_cmpgt_epi64_mask(_mm512_castpd_si512(v), big);
            *m = _mm512_max_pd(*m, v);
        };
        let mut i = 0;
        while i + 16 <= n {
            // SAFETY: i + 16 <= n values of each slice (the contract).
            unsafe {
                let x0 = _mm512_mul_pd(_mm512_loadu_pd(ap.add(i)), _mm512_loadu_pd(bp.add(i)));
                let x1 = _mm512_mul_pd(
                    _mm512_loadu_pd(ap.add(i + 8)),
                    _mm512_loadu_pd(bp.add(i + 8)),
                );
                _mm512_storeu_pd(dp.add(i), x0);
                _mm512_storeu_pd(dp.add(i + 8), x1);
                look(x0, &mut m0);
                look(x1, &mut m1);
            }
            i += 16;
        }
        while i < n {
            let k = (n - i).min(8);
            let live: __mmask8 = if k == 8 { 0xff } else { (1u8 << k) - 1 };
            // SAFETY: the loads and the store are masked to the k values
            // i .. i + k < n (masked-off lanes are not accessed; they are
            // zero, which changes neither the maximum nor the flag).
            unsafe {
                let x = _mm512_mul_pd(
                    _mm512_maskz_loadu_pd(live, ap.add(i)),
                    _mm512_maskz_loadu_pd(live, bp.add(i)),
                );
                _mm512_mask_storeu_pd(dp.add(i), live, x);
                look(x, &mut m0);
            }
            i += k;
        }
        (_mm512_reduce_max_pd(_mm512_max_pd(m0, m1)), bad == 0)
    }

    /// [`super::avx2::extract`] of a block whose largest magnitude `m` is
    /// known (and every value finite), in one pass, eight values a step.
    /// `None` (with `xs` untouched) if the grids would leave the normal
    /// range.
    ///
    /// # Safety
    /// AVX-512F present; `m` the largest `|x|` of `xs`, every value finite,
    /// at most `2^M` values.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn split(xs: &mut [f64], m: f64) -> Option<([f64; LEVELS], bool)> {
        debug_assert!(xs.len() <= 1 << super::M);
        let sig = super::grids(m)?;
        let vs = sig.map(|s| _mm512_set1_pd(s));
        let zero = _mm512_setzero_pd();
        // Two chunks per step, each with its own accumulators.
        let mut acc0 = [zero; LEVELS];
        let mut acc1 = [zero; LEVELS];
        let mut rest: __mmask8 = 0;
        let mut step = |x: __m512d, a: &mut [__m512d; LEVELS]| {
            let mut x = x;
            for l in 0..LEVELS {
                let q = _mm512_sub_pd(_mm512_add_pd(vs[l], x), vs[l]);
                x = _mm512_sub_pd(x, q);
                a[l] = _mm512_add_pd(a[l], q);
            }
            rest |= _mm512_cmp_pd_mask::<_CMP_NEQ_OQ>(x, zero);
            x
        };
        let n = xs.len();
        let p = xs.as_mut_ptr();
        let mut i = 0;
        while i + 16 <= n {
            // SAFETY: i + 16 <= n.
            unsafe {
                let x0 = step(_mm512_loadu_pd(p.add(i)), &mut acc0);
                let x1 = step(_mm512_loadu_pd(p.add(i + 8)), &mut acc1);
                _mm512_storeu_pd(p.add(i), x0);
                _mm512_storeu_pd(p.add(i + 8), x1);
            }
            i += 16;
        }
        while i < n {
            let k = (n - i).min(8);
            let live: __mmask8 = if k == 8 { 0xff } else { (1u8 << k) - 1 };
            // SAFETY: masked to the k values i .. i + k < n; the masked-off
            // lanes are zero, whose parts and remainders are zero.
            unsafe {
                let x = step(_mm512_maskz_loadu_pd(live, p.add(i)), &mut acc0);
                _mm512_mask_storeu_pd(p.add(i), live, x);
            }
            i += k;
        }
        let mut parts = [0.0; LEVELS];
        let mut lanes = [0.0f64; 8];
        for l in 0..LEVELS {
            // The parts are multiples of the level's grid unit well inside
            // the range: any order of these additions is exact.
            let a = _mm512_add_pd(acc0[l], acc1[l]);
            // SAFETY: eight writable doubles.
            unsafe { _mm512_storeu_pd(lanes.as_mut_ptr(), a) };
            parts[l] = lanes.iter().sum();
        }
        Some((parts, rest != 0))
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{LEVELS, M};
    use std::arch::x86_64::*;

    /// Splits `xs` (at most `2^M` values) into [`LEVELS`] exactly summed
    /// parts and leaves the remainders in `xs`; returns the parts and
    /// whether a remainder is non-zero, or `None` (with `xs` untouched) if
    /// a value is not finite, every value is zero, or the grids would leave
    /// the normal range.
    ///
    /// # Safety
    /// AVX2 present.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn extract(xs: &mut [f64]) -> Option<([f64; LEVELS], bool)> {
        debug_assert!(xs.len() <= 1 << M);
        let abs = _mm256_castsi256_pd(_mm256_set1_epi64x(i64::MAX));
        let zero = _mm256_setzero_pd();
        let big = _mm256_set1_epi64x(0x7fef_ffff_ffff_ffff);
        // Four independent maxima (the max has a latency of several
        // cycles; one chain would bound the loop).
        let (mut m0, mut m1, mut m2, mut m3) = (zero, zero, zero, zero);
        let mut bad = _mm256_setzero_si256();
        let chunks = xs.len() / 4;
        let p = xs.as_mut_ptr();
        let look = |c: usize, m: &mut __m256d, bad: &mut __m256i| {
            // SAFETY: the callers keep 4 c + 3 < xs.len().
            let v = unsafe { _mm256_loadu_pd(p.add(4 * c)) };
            let a = _mm256_and_pd(v, abs);
            // Non-finite: magnitude bits above the largest finite double.
            *bad = _mm256_or_si256(*bad, _mm256_cmpgt_epi64(_mm256_castpd_si256(a), big));
            *m = _mm256_max_pd(*m, a);
        };
        let mut c = 0;
        while c + 4 <= chunks {
            look(c, &mut m0, &mut bad);
            look(c + 1, &mut m1, &mut bad);
            look(c + 2, &mut m2, &mut bad);
            look(c + 3, &mut m3, &mut bad);
            c += 4;
        }
        for c in c..chunks {
            look(c, &mut m0, &mut bad);
        }
        let mx = _mm256_max_pd(_mm256_max_pd(m0, m1), _mm256_max_pd(m2, m3));
        let mut lanes = [0.0f64; 4];
        // SAFETY: four writable doubles.
        unsafe { _mm256_storeu_pd(lanes.as_mut_ptr(), mx) };
        let mut m = lanes.iter().cloned().fold(0.0f64, f64::max);
        let mut finite = _mm256_testz_si256(bad, bad) == 1;
        for &x in &xs[4 * chunks..] {
            finite &= x.is_finite();
            m = m.max(x.abs());
        }
        if !finite {
            return None;
        }
        let sig = super::grids(m)?;
        let vs = sig.map(|s| _mm256_set1_pd(s));
        // Two chunks per step, each with its own accumulators.
        let mut acc0 = [zero; LEVELS];
        let mut acc1 = [zero; LEVELS];
        let mut rest = zero;
        let step = |x: __m256d, a: &mut [__m256d; LEVELS], rest: &mut __m256d| {
            let mut x = x;
            for l in 0..LEVELS {
                let q = _mm256_sub_pd(_mm256_add_pd(vs[l], x), vs[l]);
                x = _mm256_sub_pd(x, q);
                a[l] = _mm256_add_pd(a[l], q);
            }
            *rest = _mm256_or_pd(*rest, _mm256_cmp_pd::<_CMP_NEQ_OQ>(x, zero));
            x
        };
        let mut c = 0;
        while c + 2 <= chunks {
            // SAFETY: 4 c + 7 < xs.len().
            unsafe {
                let x0 = step(_mm256_loadu_pd(p.add(4 * c)), &mut acc0, &mut rest);
                let x1 = step(_mm256_loadu_pd(p.add(4 * c + 4)), &mut acc1, &mut rest);
                _mm256_storeu_pd(p.add(4 * c), x0);
                _mm256_storeu_pd(p.add(4 * c + 4), x1);
            }
            c += 2;
        }
        if c < chunks {
            // SAFETY: 4 c + 3 < xs.len().
            unsafe {
                let x0 = step(_mm256_loadu_pd(p.add(4 * c)), &mut acc0, &mut rest);
                _mm256_storeu_pd(p.add(4 * c), x0);
            }
        }
        let acc: [__m256d; LEVELS] = std::array::from_fn(|l| _mm256_add_pd(acc0[l], acc1[l]));
        let mut parts = [0.0; LEVELS];
        let mut nonzero = _mm256_testz_pd(rest, rest) == 0;
        for (l, a) in acc.iter().enumerate() {
            // SAFETY: four writable doubles.
            unsafe { _mm256_storeu_pd(lanes.as_mut_ptr(), *a) };
            parts[l] = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
        }
        for x in &mut xs[4 * chunks..] {
            for l in 0..LEVELS {
                let q = (sig[l] + *x) - sig[l];
                *x -= q;
                parts[l] += q;
            }
            nonzero |= *x != 0.0;
        }
        Some((parts, nonzero))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(n: usize, seed: u64) -> impl Iterator<Item = u64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n).map(move |_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        })
    }

    /// Values of random sign and significand with exponents in `lo..hi`.
    fn spread(n: usize, seed: u64, lo: i32, hi: i32) -> Vec<f64> {
        noise(n, seed)
            .map(|s| {
                let e = lo + (s % (hi - lo) as u64) as i32;
                let m = 1.0 + (s >> 12) as f64 / (1u64 << 52) as f64;
                let v = m * 2f64.powi(e);
                if s & 1 == 1 {
                    -v
                } else {
                    v
                }
            })
            .collect()
    }

    fn reference(xs: &[f64]) -> f64 {
        let mut s = ExactSum::new();
        s.add_slice(xs);
        s.to_f64()
    }

    fn ours(simd: Isa, xs: &[f64]) -> f64 {
        let mut a = Acc::new(simd);
        // Mixed feeding: single values and slices of odd lengths.
        let (head, tail) = xs.split_at(xs.len() / 3);
        head.iter().for_each(|&x| a.push(x));
        for c in tail.chunks(1237) {
            a.push_slice(c);
        }
        a.finish().to_f64()
    }

    fn check(xs: &[f64]) {
        let want = reference(xs);
        for simd in Isa::available_all() {
            let got = ours(simd, xs);
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{simd:?}: {got:e} vs {want:e}"
            );
        }
    }

    #[test]
    fn sums_are_the_exact_sums() {
        // Narrow ranges (the fast path), wide ones (remainders), extreme
        // ones (declined blocks).
        for (lo, hi) in [
            (-3, 3),
            (-40, 2),
            (-120, 0),
            (-600, 600),
            (-1070, -1000),
            (1000, 1023),
        ] {
            for n in [0, 1, 5, 4095, 4096, 4097, 10_001] {
                check(&spread(n, (n as u64) ^ (lo as u64), lo, hi));
            }
        }
    }

    #[test]
    fn cancellation_and_special_values() {
        // x and -x with a tiny value in between: the sum is the tiny value.
        let mut xs = spread(9000, 3, -10, 10);
        let neg: Vec<f64> = xs.iter().map(|x| -x).collect();
        xs.push(1e-200);
        xs.extend(neg);
        check(&xs);
        assert_eq!(ours(Isa::detect(), &xs), 1e-200);
        // Many values just below f64::MAX: the sum overflows to infinity.
        check(&vec![f64::MAX / 3.0; 5000]);
        // Zeros of both signs, all -0.0, NaN and infinities.
        check(&vec![-0.0; 5000]);
        let mut z = vec![-0.0; 5000];
        z[4500] = 0.0;
        check(&z);
        for special in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut v = spread(6000, 9, -5, 5);
            v[100] = special;
            check(&v);
        }
        // The products of a dot product.
        let a = spread(7000, 11, -30, 30);
        let b = spread(7000, 12, -30, 30);
        let mut acc = Acc::new(Isa::detect());
        acc.push_products(&a, &b);
        let p: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
        assert_eq!(acc.finish().to_f64().to_bits(), reference(&p).to_bits());
    }

    #[test]
    fn products_are_summed_exactly_on_every_instruction_set() {
        // Products fed in pieces of odd lengths (blocks made of several
        // calls, calls across blocks), wide and narrow ranges, products that
        // overflow to infinity or are NaN, all-zero blocks, and products fed
        // after single values in the same block.
        let cases: Vec<(Vec<f64>, Vec<f64>)> = vec![
            (spread(9000, 21, -20, 20), spread(9000, 22, -20, 20)),
            (spread(9000, 23, -300, 300), spread(9000, 24, -200, 200)),
            (spread(5000, 25, 500, 600), spread(5000, 26, 500, 600)),
            (spread(5000, 27, -600, -500), spread(5000, 28, -560, -500)),
            (vec![0.0; 5000], spread(5000, 29, -5, 5)),
            (vec![-0.0; 300], vec![1.0; 300]),
            (
                {
                    let mut a = spread(7000, 30, -5, 5);
                    a[4100] = f64::NAN;
                    a
                },
                spread(7000, 31, -5, 5),
            ),
            (
                {
                    let mut a = spread(7000, 32, -5, 5);
                    a[77] = f64::INFINITY;
                    a
                },
                spread(7000, 33, -5, 5),
            ),
        ];
        for (a, b) in &cases {
            let p: Vec<f64> = a.iter().zip(b).map(|(x, y)| x * y).collect();
            let want = reference(&p);
            for simd in Isa::available_all() {
                for pieces in [1, 7, 1000, 4097] {
                    let mut acc = Acc::new(simd);
                    for (ca, cb) in a.chunks(pieces).zip(b.chunks(pieces)) {
                        acc.push_products(ca, cb);
                    }
                    let got = acc.finish().to_f64();
                    assert!(
                        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                        "{simd:?} pieces {pieces}: {got:e} vs {want:e}"
                    );
                }
                // Single values, then products, in one block.
                let mut acc = Acc::new(simd);
                acc.push(p[0]);
                acc.push_products(&a[1..], &b[1..]);
                let got = acc.finish().to_f64();
                assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()));
            }
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn ordinary_blocks_take_the_fast_path() {
        if Isa::detect() == Isa::Portable {
            eprintln!("no AVX2 on this CPU: only the portable path exists");
            return;
        }
        for (lo, hi) in [(-20, 20), (-60, 0)] {
            let mut xs = spread(BLOCK, 1, lo, hi);
            let want = reference(&xs);
            // SAFETY: `Isa::detect` found AVX2.
            let (parts, rest) =
                unsafe { avx2::extract(&mut xs) }.expect("an ordinary block is split");
            assert!(
                !rest,
                "exponents {lo}..{hi}: nothing is left after {LEVELS} levels"
            );
            assert!(xs.iter().all(|&x| x == 0.0));
            let mut s = ExactSum::new();
            parts.iter().for_each(|&p| s.add(p));
            assert_eq!(s.to_f64().to_bits(), want.to_bits());
            if Isa::detect() == Isa::Avx512 {
                // The one-pass split given the largest magnitude.
                let mut ys = spread(BLOCK - 3, 1, lo, hi);
                let m = ys.iter().fold(0.0f64, |m, y| m.max(y.abs()));
                let want = reference(&ys);
                // SAFETY: `Isa::detect` found AVX-512F; `m` is the largest
                // magnitude of finite values.
                let (parts, rest) =
                    unsafe { avx512::split(&mut ys, m) }.expect("an ordinary block is split");
                assert!(!rest && ys.iter().all(|&y| y == 0.0));
                let mut s = ExactSum::new();
                parts.iter().for_each(|&p| s.add(p));
                assert_eq!(s.to_f64().to_bits(), want.to_bits());
            }
        }
        // A value 2^150 below the largest is left over for the next round.
        let mut xs = spread(BLOCK, 2, -5, 5);
        xs[17] = 2f64.powi(-150);
        // SAFETY: as above.
        let (_, rest) = unsafe { avx2::extract(&mut xs) }.expect("split");
        assert!(rest);
        assert_eq!(xs[17], 2f64.powi(-150));
    }
}
