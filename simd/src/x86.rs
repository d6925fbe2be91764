//! x86-64: the tokens, the vectors and the AVX-512 transposes.
//!
//! # Why the vectors are safe
//!
//! An AVX instruction on a CPU without AVX is undefined behaviour, so a
//! safe method that issues one must only be reachable where the CPU has
//! it. Here every constructor of [`F64x4`] and [`F64x8`] takes a token
//! ([`Avx2Token`], [`Avx512Token`]), and a token is made only by detection
//! or by `unsafe` code that promises the same. A vector value therefore
//! proves that its instructions exist, and its methods need no further
//! check. (A vector cannot be forged: its field is private and it has no
//! `Default`; `transmute` is `unsafe`.)
//!
//! The methods are `#[inline(always)]`: inside a function compiled with
//! the set (`#[target_feature(enable = "avx2,fma")]` or
//! `"avx512f,avx2,fma"`) each becomes its one instruction. Called from
//! elsewhere they are still correct, as calls.

use std::arch::x86_64::*;

/// Proof that this CPU has AVX2 and FMA (and AVX). `Copy` and zero-sized.
#[derive(Debug, Clone, Copy)]
pub struct Avx2Token(());

impl Avx2Token {
    /// The token where the CPU has AVX2 and FMA, else `None`.
    #[inline]
    pub fn detect() -> Option<Avx2Token> {
        (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
            .then_some(Avx2Token(()))
    }

    /// The token without a check.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA, for instance inside a function
    /// compiled with `#[target_feature(enable = "avx2,fma")]` (whose
    /// callers made that promise).
    #[inline(always)]
    pub unsafe fn new_unchecked() -> Avx2Token {
        Avx2Token(())
    }
}

/// Proof that this CPU has AVX-512F, AVX2 and FMA. `Copy` and zero-sized.
#[derive(Debug, Clone, Copy)]
pub struct Avx512Token(());

impl Avx512Token {
    /// The token where the CPU has AVX-512F, AVX2 and FMA, else `None`.
    #[inline]
    pub fn detect() -> Option<Avx512Token> {
        (is_x86_feature_detected!("avx512f") && Avx2Token::detect().is_some())
            .then_some(Avx512Token(()))
    }

    /// The token without a check.
    ///
    /// # Safety
    /// The CPU must have AVX-512F, AVX2 and FMA.
    #[inline(always)]
    pub unsafe fn new_unchecked() -> Avx512Token {
        Avx512Token(())
    }

    /// The AVX2 token this one implies.
    #[inline(always)]
    pub fn avx2(self) -> Avx2Token {
        Avx2Token(())
    }
}

/// Four doubles in an AVX register; built only with an [`Avx2Token`].
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct F64x4(__m256d);

/// Eight doubles in an AVX-512 register; built only with an
/// [`Avx512Token`].
#[derive(Clone, Copy, Debug)]
#[repr(transparent)]
pub struct F64x8(__m512d);

// Every `unsafe` block below issues an instruction of the vector's set
// (AVX/AVX2/FMA for `F64x4`, AVX-512F for `F64x8`): the existence of
// `self` or of the token argument proves the CPU has it (module doc). Blocks
// that also touch memory say what more they rely on.

impl F64x4 {
    /// Lanes.
    pub const LANES: usize = 4;

    /// `v` in every lane.
    #[inline(always)]
    pub fn splat(_: Avx2Token, v: f64) -> F64x4 {
        // SAFETY: see above the impl.
        F64x4(unsafe { _mm256_set1_pd(v) })
    }

    /// Zero in every lane.
    #[inline(always)]
    pub fn zero(t: Avx2Token) -> F64x4 {
        F64x4::splat(t, 0.0)
    }

    /// `s[..4]`. Panics where `s` is shorter.
    #[inline(always)]
    pub fn load(t: Avx2Token, s: &[f64]) -> F64x4 {
        assert!(s.len() >= 4, "F64x4::load of {} values: need 4", s.len());
        // SAFETY: four readable values, checked.
        unsafe { F64x4::load_ptr(t, s.as_ptr()) }
    }

    /// Four doubles from `p`.
    ///
    /// # Safety
    /// `p..p + 4` readable (any alignment).
    #[inline(always)]
    pub unsafe fn load_ptr(_: Avx2Token, p: *const f64) -> F64x4 {
        // SAFETY: the caller's contract; see above the impl.
        F64x4(unsafe { _mm256_loadu_pd(p) })
    }

    /// The vector of a register that AVX code computed.
    #[inline(always)]
    pub fn from_raw(_: Avx2Token, r: __m256d) -> F64x4 {
        F64x4(r)
    }

    /// The register.
    #[inline(always)]
    pub fn raw(self) -> __m256d {
        self.0
    }

    /// The token this vector proves.
    #[inline(always)]
    pub fn token(self) -> Avx2Token {
        Avx2Token(())
    }

    /// To `s[..4]`. Panics where `s` is shorter.
    #[inline(always)]
    pub fn store(self, s: &mut [f64]) {
        assert!(s.len() >= 4, "F64x4::store into {} values: need 4", s.len());
        // SAFETY: four writable values, checked.
        unsafe { self.store_ptr(s.as_mut_ptr()) }
    }

    /// Four doubles to `p`.
    ///
    /// # Safety
    /// `p..p + 4` writable (any alignment).
    #[inline(always)]
    pub unsafe fn store_ptr(self, p: *mut f64) {
        // SAFETY: the caller's contract.
        unsafe { _mm256_storeu_pd(p, self.0) }
    }

    /// Four doubles to `p` with a non-temporal store (the line is not read
    /// first; order it with an `sfence` before other threads read it).
    ///
    /// # Safety
    /// `p..p + 4` writable and `p` aligned to 32 bytes.
    #[inline(always)]
    pub unsafe fn stream(self, p: *mut f64) {
        // SAFETY: the caller's contract.
        unsafe { _mm256_stream_pd(p, self.0) }
    }

    /// Lanes `from..4` to `p + from..p + 4`; memory of the other lanes is
    /// not touched.
    ///
    /// # Safety
    /// `p + from..p + 4` writable and `from < 4`.
    #[inline(always)]
    pub unsafe fn store_from(self, p: *mut f64, from: usize) {
        // SAFETY: the caller's contract; the mask stores only the lanes
        // `i > from - 1`.
        unsafe {
            let lane = _mm256_setr_epi64x(0, 1, 2, 3);
            let mask = _mm256_cmpgt_epi64(lane, _mm256_set1_epi64x(from as i64 - 1));
            _mm256_maskstore_pd(p, mask, self.0)
        }
    }

    /// The four lanes.
    #[inline(always)]
    pub fn to_array(self) -> [f64; 4] {
        let mut x = [0.0; 4];
        self.store(&mut x);
        x
    }

    /// `self * b + c` a lane, rounded once (`f64::mul_add`'s value).
    #[inline(always)]
    pub fn fma(self, b: F64x4, c: F64x4) -> F64x4 {
        // SAFETY: see above the impl (FMA).
        F64x4(unsafe { _mm256_fmadd_pd(self.0, b.0, c.0) })
    }

    /// `self` with lane `lane` replaced by `v` (no lane where `lane >= 4`).
    #[inline(always)]
    pub fn with_lane(self, lane: usize, v: f64) -> F64x4 {
        // SAFETY: see above the impl (AVX2 compare).
        F64x4(unsafe {
            let sel = _mm256_cmpeq_epi64(
                _mm256_set1_epi64x(lane as i64),
                _mm256_setr_epi64x(0, 1, 2, 3),
            );
            _mm256_blendv_pd(self.0, _mm256_set1_pd(v), _mm256_castsi256_pd(sel))
        })
    }

    /// Lane `i` is lane `i - 1` of `self`, lane 0 the last lane of `prev`:
    /// the values one place back along a row stored as `prev, self`.
    #[inline(always)]
    pub fn back(self, prev: F64x4) -> F64x4 {
        // SAFETY: see above the impl. `t` = [p2, p3, c0, c1], then
        // [t1, c0, t3, c2] = [p3, c0, c1, c2].
        F64x4(unsafe {
            let t = _mm256_permute2f128_pd::<0x03>(self.0, prev.0);
            _mm256_shuffle_pd::<0b0101>(t, self.0)
        })
    }

    /// Lane `i` is lane `i + 1` of `self`, the last lane lane 0 of `next`:
    /// the values one place on along a row stored as `self, next`.
    #[inline(always)]
    pub fn on(self, next: F64x4) -> F64x4 {
        // SAFETY: see above the impl. `t` = [c2, c3, n0, n1], then
        // [c1, t0, c3, t2] = [c1, c2, c3, n0].
        F64x4(unsafe {
            let t = _mm256_permute2f128_pd::<0x21>(self.0, next.0);
            _mm256_shuffle_pd::<0b0101>(self.0, t)
        })
    }

    /// True when every lane is finite.
    #[inline(always)]
    pub fn all_finite(self) -> bool {
        self.to_array().iter().all(|v| v.is_finite())
    }
}

impl F64x8 {
    /// Lanes.
    pub const LANES: usize = 8;

    /// `v` in every lane.
    #[inline(always)]
    pub fn splat(_: Avx512Token, v: f64) -> F64x8 {
        // SAFETY: see above the impl of `F64x4`.
        F64x8(unsafe { _mm512_set1_pd(v) })
    }

    /// Zero in every lane.
    #[inline(always)]
    pub fn zero(t: Avx512Token) -> F64x8 {
        F64x8::splat(t, 0.0)
    }

    /// `s[..8]`. Panics where `s` is shorter.
    #[inline(always)]
    pub fn load(t: Avx512Token, s: &[f64]) -> F64x8 {
        assert!(s.len() >= 8, "F64x8::load of {} values: need 8", s.len());
        // SAFETY: eight readable values, checked.
        unsafe { F64x8::load_ptr(t, s.as_ptr()) }
    }

    /// Eight doubles from `p`.
    ///
    /// # Safety
    /// `p..p + 8` readable (any alignment).
    #[inline(always)]
    pub unsafe fn load_ptr(_: Avx512Token, p: *const f64) -> F64x8 {
        // SAFETY: the caller's contract.
        F64x8(unsafe { _mm512_loadu_pd(p) })
    }

    /// The vector of a register that AVX-512 code computed.
    #[inline(always)]
    pub fn from_raw(_: Avx512Token, r: __m512d) -> F64x8 {
        F64x8(r)
    }

    /// The register.
    #[inline(always)]
    pub fn raw(self) -> __m512d {
        self.0
    }

    /// The token this vector proves.
    #[inline(always)]
    pub fn token(self) -> Avx512Token {
        Avx512Token(())
    }

    /// To `s[..8]`. Panics where `s` is shorter.
    #[inline(always)]
    pub fn store(self, s: &mut [f64]) {
        assert!(s.len() >= 8, "F64x8::store into {} values: need 8", s.len());
        // SAFETY: eight writable values, checked.
        unsafe { self.store_ptr(s.as_mut_ptr()) }
    }

    /// Eight doubles to `p`.
    ///
    /// # Safety
    /// `p..p + 8` writable (any alignment).
    #[inline(always)]
    pub unsafe fn store_ptr(self, p: *mut f64) {
        // SAFETY: the caller's contract.
        unsafe { _mm512_storeu_pd(p, self.0) }
    }

    /// Eight doubles to `p` with a non-temporal store (the line is not
    /// read first; order it with an `sfence` before other threads read it).
    ///
    /// # Safety
    /// `p..p + 8` writable and `p` aligned to 64 bytes.
    #[inline(always)]
    pub unsafe fn stream(self, p: *mut f64) {
        // SAFETY: the caller's contract.
        unsafe { _mm512_stream_pd(p, self.0) }
    }

    /// Lanes `from..8` to `p + from..p + 8`; memory of the other lanes is
    /// not touched.
    ///
    /// # Safety
    /// `p + from..p + 8` writable and `from < 8`.
    #[inline(always)]
    pub unsafe fn store_from(self, p: *mut f64, from: usize) {
        // SAFETY: the caller's contract; the masked store touches only
        // lanes `from..8`.
        unsafe { _mm512_mask_storeu_pd(p, (0xffu32 << from) as u8, self.0) }
    }

    /// The eight lanes.
    #[inline(always)]
    pub fn to_array(self) -> [f64; 8] {
        let mut x = [0.0; 8];
        self.store(&mut x);
        x
    }

    /// `self * b + c` a lane, rounded once (`f64::mul_add`'s value).
    #[inline(always)]
    pub fn fma(self, b: F64x8, c: F64x8) -> F64x8 {
        // SAFETY: see above the impl of `F64x4`.
        F64x8(unsafe { _mm512_fmadd_pd(self.0, b.0, c.0) })
    }

    /// `self` with lane `lane` replaced by `v` (no lane where `lane >= 8`).
    #[inline(always)]
    pub fn with_lane(self, lane: usize, v: f64) -> F64x8 {
        let mask = if lane < 8 { 1u8 << lane } else { 0 };
        // SAFETY: see above the impl of `F64x4`.
        F64x8(unsafe { _mm512_mask_blend_pd(mask, self.0, _mm512_set1_pd(v)) })
    }

    /// Lane `i` is lane `i - 1` of `self`, lane 0 the last lane of `prev`.
    #[inline(always)]
    pub fn back(self, prev: F64x8) -> F64x8 {
        // SAFETY: see above the impl of `F64x4`. Lanes 7.. of `self:prev`.
        F64x8(unsafe {
            _mm512_castsi512_pd(_mm512_alignr_epi64::<7>(
                _mm512_castpd_si512(self.0),
                _mm512_castpd_si512(prev.0),
            ))
        })
    }

    /// Lane `i` is lane `i + 1` of `self`, the last lane lane 0 of `next`.
    #[inline(always)]
    pub fn on(self, next: F64x8) -> F64x8 {
        // SAFETY: see above the impl of `F64x4`. Lanes 1.. of `next:self`.
        F64x8(unsafe {
            _mm512_castsi512_pd(_mm512_alignr_epi64::<1>(
                _mm512_castpd_si512(next.0),
                _mm512_castpd_si512(self.0),
            ))
        })
    }

    /// True when every lane is finite.
    #[inline(always)]
    pub fn all_finite(self) -> bool {
        self.to_array().iter().all(|v| v.is_finite())
    }

    /// The 8 x 8 transpose: lane `j` of row `i` of the result is lane `i`
    /// of row `j` of `r`.
    #[inline(always)]
    pub fn transpose(r: [F64x8; 8]) -> [F64x8; 8] {
        // SAFETY: the vectors prove AVX-512F (module doc).
        unsafe { transpose8(r.map(F64x8::raw)) }.map(F64x8)
    }

    /// The 4 x 4 transpose of complex values, each a pair of adjacent
    /// lanes: pair `j` of row `i` of the result is pair `i` of row `j` of
    /// `r`.
    #[inline(always)]
    pub fn transpose_pairs(r: [F64x8; 4]) -> [F64x8; 4] {
        // SAFETY: as in `transpose`.
        unsafe { transpose_pairs4(r.map(F64x8::raw)) }.map(F64x8)
    }
}

// The lane-wise arithmetic, one IEEE operation a lane: `+`, `-`, `*`.
macro_rules! arith {
    ($v:ident, $($tr:ident $f:ident $intr:ident),*) => {$(
        impl std::ops::$tr for $v {
            type Output = $v;
            #[inline(always)]
            fn $f(self, o: $v) -> $v {
                // SAFETY: `self` proves the instruction set (module doc).
                $v(unsafe { $intr(self.0, o.0) })
            }
        }
    )*};
}
arith!(F64x4, Add add _mm256_add_pd, Sub sub _mm256_sub_pd, Mul mul _mm256_mul_pd);
arith!(F64x8, Add add _mm512_add_pd, Sub sub _mm512_sub_pd, Mul mul _mm512_mul_pd);

/// The 8 x 8 transpose of doubles: lane `j` of row `i` of the result is
/// lane `i` of row `j` of `r` (24 shuffles). For AVX-512 code; safe code
/// uses [`F64x8::transpose`].
///
/// # Safety
/// The CPU must have AVX-512F: a `#[target_feature(enable = "avx512f")]`
/// function calls this without `unsafe`, any other caller promises it.
#[inline]
#[target_feature(enable = "avx512f")]
pub fn transpose8(r: [__m512d; 8]) -> [__m512d; 8] {
    // Pairs of rows interleaved: lanes (2q, 2q + 1) of rows i, i + 1.
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
    // Lanes {c, c + 4} of rows 0-3 and of rows 4-7, c < 4.
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

/// The 4 x 4 transpose of 128-bit elements (complex doubles): element `j`
/// of row `i` of the result is element `i` of row `j` of `r` (8 shuffles).
/// For AVX-512 code; safe code uses [`F64x8::transpose_pairs`].
///
/// # Safety
/// As [`transpose8`].
#[inline]
#[target_feature(enable = "avx512f")]
pub fn transpose_pairs4(r: [__m512d; 4]) -> [__m512d; 4] {
    let u0 = _mm512_shuffle_f64x2::<0x44>(r[0], r[1]);
    let u1 = _mm512_shuffle_f64x2::<0xEE>(r[0], r[1]);
    let u2 = _mm512_shuffle_f64x2::<0x44>(r[2], r[3]);
    let u3 = _mm512_shuffle_f64x2::<0xEE>(r[2], r[3]);
    [
        _mm512_shuffle_f64x2::<0x88>(u0, u2),
        _mm512_shuffle_f64x2::<0xDD>(u0, u2),
        _mm512_shuffle_f64x2::<0x88>(u1, u3),
        _mm512_shuffle_f64x2::<0xDD>(u1, u3),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values with every kind of bit pattern a lane might hold.
    fn values(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                f64::from_bits(s >> 2) - 0.5 * f64::from_bits(s >> 3)
            })
            .collect()
    }

    #[test]
    fn f64x4_is_the_scalar_operations_lane_by_lane() {
        let Some(t) = Avx2Token::detect() else {
            eprintln!("no AVX2 + FMA here: nothing to compare");
            return;
        };
        let (a, b, c) = (values(4, 1), values(4, 2), values(4, 3));
        let (va, vb, vc) = (F64x4::load(t, &a), F64x4::load(t, &b), F64x4::load(t, &c));
        let bits = |v: [f64; 4]| v.map(f64::to_bits);
        let each = |f: &dyn Fn(usize) -> f64| bits(std::array::from_fn(f));
        assert_eq!(bits((va + vb).to_array()), each(&|i| a[i] + b[i]));
        assert_eq!(bits((va - vb).to_array()), each(&|i| a[i] - b[i]));
        assert_eq!(bits((va * vb).to_array()), each(&|i| a[i] * b[i]));
        assert_eq!(
            bits(va.fma(vb, vc).to_array()),
            each(&|i| a[i].mul_add(b[i], c[i]))
        );
        assert_eq!(F64x4::splat(t, 2.5).to_array(), [2.5; 4]);
        for lane in 0..5 {
            let w = va.with_lane(lane, 7.0).to_array();
            for i in 0..4 {
                assert_eq!(
                    w[i].to_bits(),
                    if i == lane { 7.0f64 } else { a[i] }.to_bits()
                );
            }
        }
        let row = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0];
        let (p, x, n) = (
            F64x4::load(t, &row),
            F64x4::load(t, &row[4..]),
            F64x4::load(t, &row[8..]),
        );
        assert_eq!(x.back(p).to_array(), [3.0, 4.0, 5.0, 6.0]);
        assert_eq!(x.on(n).to_array(), [5.0, 6.0, 7.0, 8.0]);
        for from in 0..4 {
            let mut out = [-1.0; 4];
            // SAFETY: four writable values, `from < 4`.
            unsafe { x.store_from(out.as_mut_ptr(), from) };
            for i in 0..4 {
                assert_eq!(out[i], if i >= from { row[4 + i] } else { -1.0 });
            }
        }
        assert!(x.all_finite());
        assert!(!x.with_lane(2, f64::NAN).all_finite());
    }

    #[test]
    fn f64x8_is_the_scalar_operations_lane_by_lane() {
        let Some(t) = Avx512Token::detect() else {
            eprintln!("no AVX-512 here: nothing to compare");
            return;
        };
        let (a, b, c) = (values(8, 4), values(8, 5), values(8, 6));
        let (va, vb, vc) = (F64x8::load(t, &a), F64x8::load(t, &b), F64x8::load(t, &c));
        let bits = |v: [f64; 8]| v.map(f64::to_bits);
        let each = |f: &dyn Fn(usize) -> f64| bits(std::array::from_fn(f));
        assert_eq!(bits((va + vb).to_array()), each(&|i| a[i] + b[i]));
        assert_eq!(bits((va - vb).to_array()), each(&|i| a[i] - b[i]));
        assert_eq!(bits((va * vb).to_array()), each(&|i| a[i] * b[i]));
        assert_eq!(
            bits(va.fma(vb, vc).to_array()),
            each(&|i| a[i].mul_add(b[i], c[i]))
        );
        for lane in 0..9 {
            let w = va.with_lane(lane, 7.0).to_array();
            for i in 0..8 {
                assert_eq!(
                    w[i].to_bits(),
                    if i == lane { 7.0f64 } else { a[i] }.to_bits()
                );
            }
        }
        let row: Vec<f64> = (0..24).map(f64::from).collect();
        let (p, x, n) = (
            F64x8::load(t, &row),
            F64x8::load(t, &row[8..]),
            F64x8::load(t, &row[16..]),
        );
        assert_eq!(x.back(p).to_array(), std::array::from_fn(|i| row[7 + i]));
        assert_eq!(x.on(n).to_array(), std::array::from_fn(|i| row[9 + i]));
        for from in 0..8 {
            let mut out = [-1.0; 8];
            // SAFETY: eight writable values, `from < 8`.
            unsafe { x.store_from(out.as_mut_ptr(), from) };
            for i in 0..8 {
                assert_eq!(out[i], if i >= from { row[8 + i] } else { -1.0 });
            }
        }
        assert!(!x.with_lane(7, f64::INFINITY).all_finite());
    }

    #[test]
    fn transposes_move_every_element_to_its_place() {
        let Some(t) = Avx512Token::detect() else {
            eprintln!("no AVX-512 here: nothing to compare");
            return;
        };
        let m: Vec<f64> = (0..64).map(f64::from).collect();
        let rows: [F64x8; 8] = std::array::from_fn(|i| F64x8::load(t, &m[8 * i..]));
        let tr = F64x8::transpose(rows).map(F64x8::to_array);
        for i in 0..8 {
            for j in 0..8 {
                assert_eq!(tr[i][j], m[8 * j + i]);
            }
        }
        // Complex pairs: element (row j, pair i) is values 8 j + 2 i, + 1.
        let rows: [F64x8; 4] = std::array::from_fn(|i| F64x8::load(t, &m[8 * i..]));
        let tr = F64x8::transpose_pairs(rows).map(F64x8::to_array);
        for i in 0..4 {
            for j in 0..4 {
                assert_eq!(
                    [tr[i][2 * j], tr[i][2 * j + 1]],
                    [m[8 * j + 2 * i], m[8 * j + 2 * i + 1]]
                );
            }
        }
    }

    #[test]
    fn a_short_slice_is_refused() {
        let Some(t) = Avx2Token::detect() else {
            eprintln!("no AVX2 + FMA here: nothing to load");
            return;
        };
        let e = std::panic::catch_unwind(|| F64x4::load(t, &[1.0; 3])).unwrap_err();
        assert_eq!(
            e.downcast_ref::<String>().unwrap(),
            "F64x4::load of 3 values: need 4"
        );
        let mut short = [0.0; 7];
        let e = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            F64x4::splat(t, 1.0).store(&mut short[..3])
        }))
        .unwrap_err();
        assert!(e.downcast_ref::<String>().unwrap().contains("need 4"));
    }
}
