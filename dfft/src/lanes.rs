//! A 1D complex FFT that transforms [`LANES`] lines at once, one line per
//! SIMD lane.
//!
//! The lines are held "across lanes": row `k` of the work buffer holds value
//! `k` of every line, real parts first, then imaginary parts
//! (`[re_0 .. re_7, im_0 .. im_7]`). A pass of the Stockham autosort
//! algorithm (decimation in time, radices 2, 3, 4, 5 and 8 and any other prime
//! up to [`MAX_PRIME`]) reads whole rows of one buffer and writes whole rows
//! of the other, so every operation is the same element-wise operation on
//! every lane. Lines that neighbour each other in memory along another axis
//! load into a row as they lie (a strided transform needs no gather into
//! lines), and lines that are contiguous are transposed into rows.
//!
//! **Bits.** Each lane goes through the same sequence of IEEE additions,
//! subtractions and multiplications (no fused multiply-add, no
//! reassociation) whatever the other lanes hold, how many lanes are in use,
//! and which instruction set runs it (AVX-512, AVX2 or plain Rust, chosen
//! at run time). A line therefore has the same bits in every grouping and
//! on every rank count; the tests check lane independence and the
//! instruction sets against each other.

use num_complex::Complex64;
use rustfft::{Fft, FftDirection, FftPlanner};
use std::sync::Arc;

/// Lines transformed together.
pub(crate) const LANES: usize = 8;
/// `f64` values in one row of the work buffer.
const ROW: usize = 2 * LANES;
/// The largest prime factor the engine takes; a length with a larger one
/// has no lane plan.
pub(crate) const MAX_PRIME: usize = 13;

/// [`LANES`] `f64` values in a vector register (or two, or an array), and
/// the operations the passes use on them: one IEEE operation per lane, the
/// same on every implementation.
///
/// The implementations with intrinsics ([`Z`] for AVX-512F, [`Y`] for
/// AVX2) execute those instructions in safe methods. They are private to
/// this module and used only inside the functions compiled for their
/// instruction set, which run only after [`Simd::detect`] found it on the
/// CPU: that is the contract that makes them sound.
trait Lane: Copy {
    /// `s[..LANES]`.
    fn load(s: &[f64]) -> Self;
    /// Into `d[..LANES]`.
    fn store(self, d: &mut [f64]);
    fn splat(x: f64) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn neg(self) -> Self;

    /// The real and the imaginary parts of the [`LANES`] complex values
    /// interleaved in `s[..2 LANES]`.
    #[inline(always)]
    fn split(s: &[f64]) -> (Self, Self) {
        let s = &s[..ROW];
        let (mut re, mut im) = ([0.0; LANES], [0.0; LANES]);
        for j in 0..LANES {
            re[j] = s[2 * j];
            im[j] = s[2 * j + 1];
        }
        (Self::load(&re), Self::load(&im))
    }

    /// The inverse of [`Lane::split`].
    #[inline(always)]
    fn join(re: Self, im: Self, d: &mut [f64]) {
        let (mut r, mut i) = ([0.0; LANES], [0.0; LANES]);
        re.store(&mut r);
        im.store(&mut i);
        for (j, c) in d[..ROW].chunks_exact_mut(2).enumerate() {
            c[0] = r[j];
            c[1] = i[j];
        }
    }

    /// `m[i][j]` becomes `m[j][i]`.
    #[inline(always)]
    fn transpose(m: &mut [Self; LANES]) {
        let mut a = [[0.0; LANES]; LANES];
        for (row, v) in a.iter_mut().zip(m.iter()) {
            v.store(row);
        }
        for (i, v) in m.iter_mut().enumerate() {
            let mut col = [0.0; LANES];
            for j in 0..LANES {
                col[j] = a[j][i];
            }
            *v = Self::load(&col);
        }
    }
}

/// Plain Rust, one lane after another.
#[derive(Clone, Copy)]
struct Pf([f64; LANES]);

impl Lane for Pf {
    #[inline(always)]
    fn load(s: &[f64]) -> Self {
        Pf(s[..LANES].try_into().expect("lanes"))
    }
    #[inline(always)]
    fn store(self, d: &mut [f64]) {
        d[..LANES].copy_from_slice(&self.0);
    }
    #[inline(always)]
    fn splat(x: f64) -> Self {
        Pf([x; LANES])
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        let mut r = self.0;
        for j in 0..LANES {
            r[j] += o.0[j];
        }
        Pf(r)
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        let mut r = self.0;
        for j in 0..LANES {
            r[j] -= o.0[j];
        }
        Pf(r)
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        let mut r = self.0;
        for j in 0..LANES {
            r[j] *= o.0[j];
        }
        Pf(r)
    }
    #[inline(always)]
    fn neg(self) -> Self {
        let mut r = self.0;
        for x in r.iter_mut() {
            *x = -*x;
        }
        Pf(r)
    }
}

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// AVX2: two 256-bit registers. Its methods execute AVX instructions: see
/// [`Lane`] for when they may run.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Y(__m256d, __m256d);

#[cfg(target_arch = "x86_64")]
impl Lane for Y {
    #[inline(always)]
    fn load(s: &[f64]) -> Self {
        let s = &s[..LANES];
        // SAFETY: `s` holds LANES values (unaligned loads); AVX is present
        // (the trait's contract).
        unsafe {
            Y(
                _mm256_loadu_pd(s.as_ptr()),
                _mm256_loadu_pd(s.as_ptr().add(4)),
            )
        }
    }
    #[inline(always)]
    fn store(self, d: &mut [f64]) {
        let d = &mut d[..LANES];
        // SAFETY: `d` holds LANES values; AVX is present.
        unsafe {
            _mm256_storeu_pd(d.as_mut_ptr(), self.0);
            _mm256_storeu_pd(d.as_mut_ptr().add(4), self.1);
        }
    }
    #[inline(always)]
    fn splat(x: f64) -> Self {
        // SAFETY: AVX is present.
        unsafe { Y(_mm256_set1_pd(x), _mm256_set1_pd(x)) }
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        // SAFETY: AVX is present.
        unsafe { Y(_mm256_add_pd(self.0, o.0), _mm256_add_pd(self.1, o.1)) }
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        // SAFETY: AVX is present.
        unsafe { Y(_mm256_sub_pd(self.0, o.0), _mm256_sub_pd(self.1, o.1)) }
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        // SAFETY: AVX is present.
        unsafe { Y(_mm256_mul_pd(self.0, o.0), _mm256_mul_pd(self.1, o.1)) }
    }
    #[inline(always)]
    fn neg(self) -> Self {
        // SAFETY: AVX is present. Flipping the sign bit is IEEE negation.
        unsafe {
            let m = _mm256_set1_pd(-0.0);
            Y(_mm256_xor_pd(self.0, m), _mm256_xor_pd(self.1, m))
        }
    }
}

/// AVX-512F: one 512-bit register. Its methods execute AVX-512F
/// instructions: see [`Lane`] for when they may run.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Z(__m512d);

#[cfg(target_arch = "x86_64")]
impl Lane for Z {
    #[inline(always)]
    fn load(s: &[f64]) -> Self {
        let s = &s[..LANES];
        // SAFETY: `s` holds LANES values (unaligned load); AVX-512F is
        // present (the trait's contract).
        unsafe { Z(_mm512_loadu_pd(s.as_ptr())) }
    }
    #[inline(always)]
    fn store(self, d: &mut [f64]) {
        let d = &mut d[..LANES];
        // SAFETY: `d` holds LANES values; AVX-512F is present.
        unsafe { _mm512_storeu_pd(d.as_mut_ptr(), self.0) }
    }
    #[inline(always)]
    fn splat(x: f64) -> Self {
        // SAFETY: AVX-512F is present.
        unsafe { Z(_mm512_set1_pd(x)) }
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        // SAFETY: AVX-512F is present.
        unsafe { Z(_mm512_add_pd(self.0, o.0)) }
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        // SAFETY: AVX-512F is present.
        unsafe { Z(_mm512_sub_pd(self.0, o.0)) }
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        // SAFETY: AVX-512F is present.
        unsafe { Z(_mm512_mul_pd(self.0, o.0)) }
    }
    #[inline(always)]
    fn neg(self) -> Self {
        // SAFETY: AVX-512F is present. Flipping the sign bit (an integer
        // xor, which AVX-512F has) is IEEE negation.
        unsafe {
            let m = _mm512_set1_epi64(i64::MIN);
            Z(_mm512_castsi512_pd(_mm512_xor_si512(
                _mm512_castpd_si512(self.0),
                m,
            )))
        }
    }
    #[inline(always)]
    fn split(s: &[f64]) -> (Self, Self) {
        let s = &s[..ROW];
        // SAFETY: `s` holds 2 LANES values; AVX-512F is present.
        unsafe {
            let a = _mm512_loadu_pd(s.as_ptr());
            let b = _mm512_loadu_pd(s.as_ptr().add(LANES));
            let even = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
            let odd = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
            (
                Z(_mm512_permutex2var_pd(a, even, b)),
                Z(_mm512_permutex2var_pd(a, odd, b)),
            )
        }
    }
    #[inline(always)]
    fn join(re: Self, im: Self, d: &mut [f64]) {
        let d = &mut d[..ROW];
        // SAFETY: `d` holds 2 LANES values; AVX-512F is present.
        unsafe {
            let lo = _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0);
            let hi = _mm512_set_epi64(15, 7, 14, 6, 13, 5, 12, 4);
            _mm512_storeu_pd(d.as_mut_ptr(), _mm512_permutex2var_pd(re.0, lo, im.0));
            _mm512_storeu_pd(
                d.as_mut_ptr().add(LANES),
                _mm512_permutex2var_pd(re.0, hi, im.0),
            );
        }
    }
    #[inline(always)]
    fn transpose(m: &mut [Self; LANES]) {
        // SAFETY: AVX-512F is present. Pairs of rows interleave within
        // 128-bit lanes, then 128-bit lanes are gathered twice.
        unsafe {
            let r = [
                m[0].0, m[1].0, m[2].0, m[3].0, m[4].0, m[5].0, m[6].0, m[7].0,
            ];
            let t: [__m512d; 8] = [
                _mm512_unpacklo_pd(r[0], r[1]),
                _mm512_unpackhi_pd(r[0], r[1]),
                _mm512_unpacklo_pd(r[2], r[3]),
                _mm512_unpackhi_pd(r[2], r[3]),
                _mm512_unpacklo_pd(r[4], r[5]),
                _mm512_unpackhi_pd(r[4], r[5]),
                _mm512_unpacklo_pd(r[6], r[7]),
                _mm512_unpackhi_pd(r[6], r[7]),
            ];
            for h in 0..2 {
                let (t0, t2, t4, t6) = (t[h], t[2 + h], t[4 + h], t[6 + h]);
                let u = _mm512_shuffle_f64x2::<0x88>(t0, t2);
                let v = _mm512_shuffle_f64x2::<0xDD>(t0, t2);
                let w = _mm512_shuffle_f64x2::<0x88>(t4, t6);
                let x = _mm512_shuffle_f64x2::<0xDD>(t4, t6);
                m[h] = Z(_mm512_shuffle_f64x2::<0x88>(u, w));
                m[4 + h] = Z(_mm512_shuffle_f64x2::<0xDD>(u, w));
                m[2 + h] = Z(_mm512_shuffle_f64x2::<0x88>(v, x));
                m[6 + h] = Z(_mm512_shuffle_f64x2::<0xDD>(v, x));
            }
        }
    }
}

/// Value `k` of [`LANES`] lines: real parts, then imaginary parts.
#[derive(Clone, Copy)]
struct P<S> {
    re: S,
    im: S,
}

impl<S: Lane> P<S> {
    #[inline(always)]
    fn zero() -> Self {
        P {
            re: S::splat(0.0),
            im: S::splat(0.0),
        }
    }

    #[inline(always)]
    fn load(buf: &[f64], row: usize) -> Self {
        let s = &buf[row * ROW..row * ROW + ROW];
        P {
            re: S::load(&s[..LANES]),
            im: S::load(&s[LANES..]),
        }
    }

    #[inline(always)]
    fn store(self, buf: &mut [f64], row: usize) {
        let s = &mut buf[row * ROW..row * ROW + ROW];
        self.re.store(&mut s[..LANES]);
        self.im.store(&mut s[LANES..]);
    }

    #[inline(always)]
    fn add(self, o: Self) -> Self {
        P {
            re: self.re.add(o.re),
            im: self.im.add(o.im),
        }
    }

    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        P {
            re: self.re.sub(o.re),
            im: self.im.sub(o.im),
        }
    }

    /// Times the real constant `c`.
    #[inline(always)]
    fn scale(self, c: f64) -> Self {
        let c = S::splat(c);
        P {
            re: self.re.mul(c),
            im: self.im.mul(c),
        }
    }

    /// Times `w = c + i s`: `(a c - b s) + i (a s + b c)`.
    #[inline(always)]
    fn mul(self, (c, s): (f64, f64)) -> Self {
        let (c, s) = (S::splat(c), S::splat(s));
        P {
            re: self.re.mul(c).sub(self.im.mul(s)),
            im: self.re.mul(s).add(self.im.mul(c)),
        }
    }

    /// Times `i`.
    #[inline(always)]
    fn i(self) -> Self {
        P {
            re: self.im.neg(),
            im: self.re,
        }
    }

    /// Times `-i`.
    #[inline(always)]
    fn neg_i(self) -> Self {
        P {
            re: self.im,
            im: self.re.neg(),
        }
    }

    /// Times `-i` (`FWD` true) or `i` (`FWD` false): the quarter turn of
    /// the transform's sign.
    #[inline(always)]
    fn rot<const FWD: bool>(self) -> Self {
        if FWD {
            self.neg_i()
        } else {
            self.i()
        }
    }
}

/// The constants of one radix's butterfly.
#[derive(Debug, Clone)]
struct Consts {
    /// `cos(2 pi m / r)` and `sign * sin(2 pi m / r)` for `m < r`.
    w: Vec<(f64, f64)>,
}

/// One Stockham pass: radix `radix`, `ns` (the product of the radices
/// before it) butterflies per group, twiddles `tw[k * (radix - 1) + r - 1]`
/// (the `r`-th power of `exp(sign 2 pi i k / (ns radix))`).
#[derive(Debug, Clone)]
struct Pass {
    radix: usize,
    ns: usize,
    tw: Vec<(f64, f64)>,
    consts: Consts,
}

/// `exp(sign 2 pi i num / den)`, from the angle reduced to the first
/// octant so that the symmetric values come out exactly symmetric.
fn unit(num: usize, den: usize, forward: bool) -> (f64, f64) {
    let num = num % den;
    // Reduce to the first octant by exact integer symmetry where the
    // denominator allows it.
    let (c, s) = if den % 8 == 0 {
        let o = den / 8;
        let q = num / o;
        let rem = num % o;
        // The angle within its octant, measured from the octant's start
        // (even octants) or end (odd octants).
        let t = |m: usize| {
            if m == o {
                let h = std::f64::consts::FRAC_1_SQRT_2;
                return (h, h);
            }
            let a = 2.0 * std::f64::consts::PI * m as f64 / den as f64;
            (a.cos(), a.sin())
        };
        let (cr, sr) = if q % 2 == 0 { t(rem) } else { t(o - rem) };
        // (cos, sin) of the angle q*45deg +- r.
        match q {
            0 => (cr, sr),
            1 => (sr, cr),
            2 => (-sr, cr),
            3 => (-cr, sr),
            4 => (-cr, -sr),
            5 => (-sr, -cr),
            6 => (sr, -cr),
            _ => (cr, -sr),
        }
    } else {
        let a = 2.0 * std::f64::consts::PI * num as f64 / den as f64;
        (a.cos(), a.sin())
    };
    if forward {
        (c, -s)
    } else {
        (c, s)
    }
}

/// A 1D complex FFT of one length and direction, run on [`LANES`] lines at
/// once. Unnormalised: the forward transform is
/// `X_q = sum_k x_k exp(-2 pi i q k / n)`, the inverse has `+`.
#[derive(Debug, Clone)]
pub(crate) struct LanePlan {
    n: usize,
    passes: Vec<Pass>,
    forward: bool,
    simd: Simd,
}

/// The radices of `n`, in the order the passes take them; `None` when `n`
/// has a prime factor above [`MAX_PRIME`].
fn radices(mut n: usize) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    // The power of two in radix-8 passes, with one or two radix-4 passes
    // for the rest (a radix-2 pass only for 2 itself): 2^7 = 8 4 4.
    let twos = n.trailing_zeros() as usize;
    n >>= twos;
    let (eights, fours, two) = match twos % 3 {
        0 => (twos / 3, 0, 0),
        2 => (twos / 3, 1, 0),
        _ if twos >= 4 => (twos / 3 - 1, 2, 0),
        _ => (0, 0, 1),
    };
    out.extend(std::iter::repeat(8).take(eights));
    out.extend(std::iter::repeat(4).take(fours));
    out.extend(std::iter::repeat(2).take(two));
    let mut p = 3;
    while n > 1 {
        if p > MAX_PRIME {
            return None;
        }
        while n % p == 0 {
            out.push(p);
            n /= p;
        }
        p += 2;
    }
    Some(out)
}

impl LanePlan {
    /// The plan for length `n` (at least 1) in one direction, or `None` when
    /// `n` has a prime factor above [`MAX_PRIME`].
    pub fn new(n: usize, forward: bool) -> Option<Self> {
        assert!(n >= 1, "a lane plan needs a length of at least 1");
        let rs = radices(n)?;
        let mut passes = Vec::with_capacity(rs.len());
        let mut ns = 1;
        for &radix in &rs {
            let span = ns * radix;
            let mut tw = Vec::with_capacity(ns * (radix - 1));
            for k in 0..ns {
                for r in 1..radix {
                    tw.push(unit(r * k, span, forward));
                }
            }
            let w = (0..radix).map(|m| unit(m, radix, forward)).collect();
            passes.push(Pass {
                radix,
                ns,
                tw,
                consts: Consts { w },
            });
            ns = span;
        }
        Some(LanePlan {
            n,
            passes,
            forward,
            simd: Simd::detect(),
        })
    }

    /// The length.
    pub fn len(&self) -> usize {
        self.n
    }

    /// `f64` values of the work buffers [`transform`] needs: two per group
    /// of lanes.
    pub fn buffer_len(&self) -> usize {
        GROUPS * group_len(self.n)
    }

    #[cfg(test)]
    fn with_simd(mut self, simd: Simd) -> Self {
        self.simd = simd;
        self
    }
}

/// The instruction set the passes are compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Simd {
    Portable,
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx2,
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Avx512,
}

impl Simd {
    fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return Simd::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                return Simd::Avx2;
            }
        }
        Simd::Portable
    }
}

/// Every pass, from `a` to `b` and back; returns whether the result is in
/// `b`.
#[inline(always)]
fn run_passes<S: Lane>(plan: &LanePlan, a: &mut [f64], b: &mut [f64]) -> bool {
    for (i, p) in plan.passes.iter().enumerate() {
        let (src, dst) = if i % 2 == 0 {
            (&*a, &mut *b)
        } else {
            (&*b, &mut *a)
        };
        if plan.forward {
            pass::<S, true>(plan.n, p, src, dst);
        } else {
            pass::<S, false>(plan.n, p, src, dst);
        }
    }
    plan.passes.len() % 2 == 1
}

/// The butterfly of one radix.
trait Bfly<const R: usize> {
    fn apply<S: Lane, const FWD: bool>(v: &mut [P<S>; R], c: &Consts);
}

struct R2;
struct R3;
struct R4;
struct R5;
struct R8;
/// A prime radix by the DFT's definition.
struct Prime;

#[inline(always)]
fn pass<S: Lane, const FWD: bool>(n: usize, p: &Pass, src: &[f64], dst: &mut [f64]) {
    match p.radix {
        2 => radix_pass::<S, 2, R2, FWD>(n, p, src, dst),
        3 => radix_pass::<S, 3, R3, FWD>(n, p, src, dst),
        4 => radix_pass::<S, 4, R4, FWD>(n, p, src, dst),
        5 => radix_pass::<S, 5, R5, FWD>(n, p, src, dst),
        8 => radix_pass::<S, 8, R8, FWD>(n, p, src, dst),
        7 => radix_pass::<S, 7, Prime, FWD>(n, p, src, dst),
        11 => radix_pass::<S, 11, Prime, FWD>(n, p, src, dst),
        13 => radix_pass::<S, 13, Prime, FWD>(n, p, src, dst),
        r => unreachable!("radix {r} is not planned"),
    }
}

/// One pass of radix `R`: for butterfly `j = b ns + k`, the inputs are
/// rows `j + r n / R`, twiddled by `w^(r k)`, and the outputs go to rows
/// `b ns R + k + r ns`.
#[inline(always)]
fn radix_pass<S: Lane, const R: usize, B: Bfly<R>, const FWD: bool>(
    n: usize,
    p: &Pass,
    src: &[f64],
    dst: &mut [f64],
) {
    let q = n / R;
    let ns = p.ns;
    for b in 0..q / ns {
        for k in 0..ns {
            let j = b * ns + k;
            let mut v = [P::zero(); R];
            for r in 0..R {
                v[r] = P::load(src, j + r * q);
            }
            if k != 0 {
                let tw = &p.tw[k * (R - 1)..(k + 1) * (R - 1)];
                for r in 1..R {
                    v[r] = v[r].mul(tw[r - 1]);
                }
            }
            B::apply::<S, FWD>(&mut v, &p.consts);
            let d = b * ns * R + k;
            for r in 0..R {
                v[r].store(dst, d + r * ns);
            }
        }
    }
}

impl Bfly<2> for R2 {
    #[inline(always)]
    fn apply<S: Lane, const FWD: bool>(v: &mut [P<S>; 2], _: &Consts) {
        let [a, b] = *v;
        *v = [a.add(b), a.sub(b)];
    }
}

impl Bfly<4> for R4 {
    #[inline(always)]
    fn apply<S: Lane, const FWD: bool>(v: &mut [P<S>; 4], _: &Consts) {
        let [a, b, c, d] = *v;
        let t0 = a.add(c);
        let t1 = a.sub(c);
        let t2 = b.add(d);
        let t3 = b.sub(d).rot::<FWD>();
        *v = [t0.add(t2), t1.add(t3), t0.sub(t2), t1.sub(t3)];
    }
}

impl Bfly<8> for R8 {
    #[inline(always)]
    fn apply<S: Lane, const FWD: bool>(v: &mut [P<S>; 8], c: &Consts) {
        // Two radix-4 butterflies on the even and the odd inputs, then the
        // eighth-turn twiddles and four radix-2 butterflies.
        let h = std::f64::consts::FRAC_1_SQRT_2;
        let mut e = [v[0], v[2], v[4], v[6]];
        let mut o = [v[1], v[3], v[5], v[7]];
        R4::apply::<S, FWD>(&mut e, c);
        R4::apply::<S, FWD>(&mut o, c);
        // o[1] exp(-+ i pi / 4), o[2] (-+i), o[3] exp(-+ 3 i pi / 4).
        let o1 = o[1].add(o[1].rot::<FWD>()).scale(h);
        let o2 = o[2].rot::<FWD>();
        let o3 = o[3].rot::<FWD>().sub(o[3]).scale(h);
        *v = [
            e[0].add(o[0]),
            e[1].add(o1),
            e[2].add(o2),
            e[3].add(o3),
            e[0].sub(o[0]),
            e[1].sub(o1),
            e[2].sub(o2),
            e[3].sub(o3),
        ];
    }
}

impl Bfly<3> for R3 {
    #[inline(always)]
    fn apply<S: Lane, const FWD: bool>(v: &mut [P<S>; 3], c: &Consts) {
        let [a, b, d] = *v;
        // w = exp(sign 2 pi i / 3) = -1/2 + i s.
        let s = c.w[1].1;
        let t = b.add(d);
        let m = a.sub(t.scale(0.5));
        let r = b.sub(d).scale(s).i();
        *v = [a.add(t), m.add(r), m.sub(r)];
    }
}

impl Bfly<5> for R5 {
    #[inline(always)]
    fn apply<S: Lane, const FWD: bool>(v: &mut [P<S>; 5], c: &Consts) {
        let [x0, x1, x2, x3, x4] = *v;
        let (c1, s1) = c.w[1];
        let (c2, s2) = c.w[2];
        let t1 = x1.add(x4);
        let t2 = x2.add(x3);
        let t3 = x1.sub(x4);
        let t4 = x2.sub(x3);
        let a1 = x0.add(t1.scale(c1)).add(t2.scale(c2));
        let a2 = x0.add(t1.scale(c2)).add(t2.scale(c1));
        // i (s1 t3 + s2 t4) and i (s2 t3 - s1 t4), with the signed sines.
        let ib1 = t3.scale(s1).add(t4.scale(s2)).i();
        let ib2 = t3.scale(s2).sub(t4.scale(s1)).i();
        *v = [
            x0.add(t1).add(t2),
            a1.add(ib1),
            a2.add(ib2),
            a2.sub(ib2),
            a1.sub(ib1),
        ];
    }
}

impl<const R: usize> Bfly<R> for Prime {
    /// `y_q = sum_r x_r w^(q r)`.
    #[inline(always)]
    fn apply<S: Lane, const FWD: bool>(v: &mut [P<S>; R], c: &Consts) {
        let x = *v;
        for (q, y) in v.iter_mut().enumerate() {
            let mut acc = x[0];
            for r in 1..R {
                acc = acc.add(x[r].mul(c.w[(q * r) % R]));
            }
            *y = acc;
        }
    }
}

/// The values of a complex slice, real and imaginary parts interleaved.
fn flat(c: &[Complex64]) -> &[f64] {
    // SAFETY: `Complex64` is `repr(C)` with two `f64` fields, so `c` is
    // `2 c.len()` initialised `f64` values with `f64` alignment.
    unsafe { std::slice::from_raw_parts(c.as_ptr().cast(), 2 * c.len()) }
}

/// [`flat`] for a mutable slice.
fn flat_mut(c: &mut [Complex64]) -> &mut [f64] {
    // SAFETY: as in `flat`; the borrow is unique.
    unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr().cast(), 2 * c.len()) }
}

/// `f64` values between a buffer and the next: three cache lines, so that
/// rows at the same index of different buffers (4 KiB multiples apart
/// otherwise) fall into different L1 sets.
const SKEW: usize = 24;

/// `f64` values of one group's two buffers, the second starting at
/// `n ROW + SKEW`.
fn group_len(n: usize) -> usize {
    2 * (n * ROW + SKEW)
}

/// Groups of [`LANES`] lines one [`transform`] takes: neighbouring lines
/// are read and written a row of `GROUPS LANES` values at a time.
pub(crate) const GROUPS: usize = 8;

/// Loads row `k` of `gl <= LANES` neighbouring lines (`s[..gl]`) into `d`;
/// unused lanes are zero.
#[inline(always)]
fn load_row<S: Lane>(s: &[Complex64], gl: usize, d: &mut [f64]) {
    let d = &mut d[..ROW];
    if gl == LANES {
        let (re, im) = S::split(flat(&s[..LANES]));
        re.store(&mut d[..LANES]);
        im.store(&mut d[LANES..]);
    } else {
        d.fill(0.0);
        for (j, v) in s[..gl].iter().enumerate() {
            d[j] = v.re;
            d[LANES + j] = v.im;
        }
    }
}

/// The inverse of [`load_row`] for the first `gl` lanes, times `scale`
/// unless `one`.
#[inline(always)]
fn store_row<S: Lane>(s: &[f64], gl: usize, d: &mut [Complex64], (one, scale): (bool, f64)) {
    let s = &s[..ROW];
    if gl == LANES {
        let (mut re, mut im) = (S::load(&s[..LANES]), S::load(&s[LANES..]));
        if !one {
            let sc = S::splat(scale);
            re = re.mul(sc);
            im = im.mul(sc);
        }
        S::join(re, im, flat_mut(&mut d[..LANES]));
    } else {
        for (j, v) in d[..gl].iter_mut().enumerate() {
            *v = if one {
                Complex64::new(s[j], s[LANES + j])
            } else {
                Complex64::new(s[j] * scale, s[LANES + j] * scale)
            };
        }
    }
}

/// Loads `gl <= LANES` contiguous lines (`line(t)` starts at `src[t n]`)
/// into rows; unused lanes are zero.
#[inline(always)]
fn load_lines<S: Lane>(src: &[Complex64], base: usize, n: usize, gl: usize, buf: &mut [f64]) {
    let src = &src[base..];
    let buf = &mut buf[..n * ROW];
    let quads = if gl == LANES { n / 4 } else { 0 };
    for q in 0..quads {
        // Four values of each line, transposed into the real and imaginary
        // rows of those four values.
        let mut m = [S::splat(0.0); LANES];
        for t in 0..LANES {
            m[t] = S::load(flat(&src[t * n + 4 * q..][..4]));
        }
        S::transpose(&mut m);
        for (h, d) in buf[4 * q * ROW..][..4 * ROW]
            .chunks_exact_mut(LANES)
            .enumerate()
        {
            m[h].store(d);
        }
    }
    let rest = &mut buf[4 * quads * ROW..];
    if gl < LANES {
        rest.fill(0.0);
    }
    for t in 0..gl {
        for k in 4 * quads..n {
            let v = src[t * n + k];
            let d = &mut rest[(k - 4 * quads) * ROW..];
            d[t] = v.re;
            d[LANES + t] = v.im;
        }
    }
}

/// The inverse of [`load_lines`] for the first `gl` lines, times `scale`
/// unless `one`.
#[inline(always)]
fn store_lines<S: Lane>(
    buf: &[f64],
    n: usize,
    gl: usize,
    dst: &mut [Complex64],
    (one, scale): (bool, f64),
) {
    let buf = &buf[..n * ROW];
    let quads = if gl == LANES { n / 4 } else { 0 };
    let sc = S::splat(scale);
    for q in 0..quads {
        let mut m = [S::splat(0.0); LANES];
        for h in 0..LANES {
            m[h] = S::load(&buf[4 * q * ROW + h * LANES..]);
        }
        S::transpose(&mut m);
        for (t, v) in m.into_iter().enumerate() {
            let v = if one { v } else { v.mul(sc) };
            v.store(flat_mut(&mut dst[t * n + 4 * q..][..4]));
        }
    }
    for t in 0..gl {
        for k in 4 * quads..n {
            let (re, im) = (buf[k * ROW + t], buf[k * ROW + LANES + t]);
            dst[t * n + k] = if one {
                Complex64::new(re, im)
            } else {
                Complex64::new(re * scale, im * scale)
            };
        }
    }
}

/// Transforms `bl <= GROUPS LANES` lines from `src` (in place where it is
/// `None`) into `dst` through `plan`, scaling by `scale`: value `k` of line
/// `t` is at `base + k stride + t step`, where either the lines neighbour
/// each other (`step` 1) or each is contiguous (`stride` 1, `step` n).
/// `buf` holds at least [`LanePlan::buffer_len`] values.
#[allow(clippy::too_many_arguments)]
pub(crate) fn transform(
    plan: &LanePlan,
    src: Option<&[Complex64]>,
    dst: &mut [Complex64],
    base: usize,
    at: (usize, usize),
    bl: usize,
    scale: f64,
    buf: &mut [f64],
) {
    assert!(
        bl <= GROUPS * LANES,
        "{bl} lines, at most {}",
        GROUPS * LANES
    );
    assert!(
        at.1 == 1 || at == (1, plan.n),
        "lines at {at:?} are neither neighbours nor contiguous"
    );
    let buf = &mut buf[..plan.buffer_len()];
    match plan.simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Simd::detect` chose Avx512 only where the CPU has
        // AVX-512F.
        Simd::Avx512 => unsafe { transform_avx512(plan, src, dst, base, at, bl, scale, buf) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Simd::detect` chose Avx2 only where the CPU has AVX2.
        Simd::Avx2 => unsafe { transform_avx2(plan, src, dst, base, at, bl, scale, buf) },
        _ => transform_with::<Pf>(plan, src, dst, base, at, bl, scale, buf),
    }
}

/// [`transform`] on AVX-512F.
///
/// # Safety
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn transform_avx512(
    plan: &LanePlan,
    src: Option<&[Complex64]>,
    dst: &mut [Complex64],
    base: usize,
    at: (usize, usize),
    bl: usize,
    scale: f64,
    buf: &mut [f64],
) {
    transform_with::<Z>(plan, src, dst, base, at, bl, scale, buf)
}

/// [`transform`] on AVX2.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
unsafe fn transform_avx2(
    plan: &LanePlan,
    src: Option<&[Complex64]>,
    dst: &mut [Complex64],
    base: usize,
    at: (usize, usize),
    bl: usize,
    scale: f64,
    buf: &mut [f64],
) {
    transform_with::<Y>(plan, src, dst, base, at, bl, scale, buf)
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn transform_with<S: Lane>(
    plan: &LanePlan,
    src: Option<&[Complex64]>,
    dst: &mut [Complex64],
    base: usize,
    (stride, step): (usize, usize),
    bl: usize,
    scale: f64,
    buf: &mut [f64],
) {
    let n = plan.n;
    let half = n * ROW + SKEW;
    let glen = group_len(n);
    let groups = bl.div_ceil(LANES);
    let gl = |g: usize| LANES.min(bl - g * LANES);
    let neighbours = step == 1 && n > 1;
    let sc = (scale == 1.0, scale);
    if !neighbours {
        // Contiguous lines: one group after another through one pair of
        // buffers, which stays in cache.
        let (a, b) = buf[..glen].split_at_mut(half);
        for g in 0..groups {
            let at = base + g * LANES * n;
            load_lines::<S>(src.unwrap_or(dst), at, n, gl(g), a);
            let out = if run_passes::<S>(plan, a, b) {
                &*b
            } else {
                &*a
            };
            store_lines::<S>(out, n, gl(g), &mut dst[at..], sc);
        }
        return;
    }
    {
        // Neighbouring lines: row by row across every group, long
        // contiguous reads.
        let src = src.unwrap_or(dst);
        for k in 0..n {
            let row = &src[base + k * stride..];
            for g in 0..groups {
                load_row::<S>(&row[g * LANES..], gl(g), &mut buf[g * glen + k * ROW..]);
            }
        }
    }
    let mut out = 0;
    for g in 0..groups {
        let (a, b) = buf[g * glen..][..glen].split_at_mut(half);
        out = if run_passes::<S>(plan, a, b) { half } else { 0 };
    }
    for k in 0..n {
        let row = &mut dst[base + k * stride..];
        for g in 0..groups {
            store_row::<S>(
                &buf[g * glen + out + k * ROW..],
                gl(g),
                &mut row[g * LANES..],
                sc,
            );
        }
    }
}

/// The 1D complex transform of one length and direction that every line
/// of that length goes through: the lane engine where the length's prime
/// factors allow it, else `rustfft`'s plan (one line at a time). The choice
/// depends on the length only, so a line has the same bits in every layout.
#[derive(Clone)]
pub(crate) enum Line1d {
    Lanes(Arc<LanePlan>),
    Rust(Arc<dyn Fft<f64>>),
}

impl std::fmt::Debug for Line1d {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Line1d::Lanes(p) => write!(f, "Lanes({})", p.len()),
            Line1d::Rust(p) => write!(f, "Rust({})", p.len()),
        }
    }
}

impl Line1d {
    /// The transform of length `n` in one direction.
    pub fn new(planner: &mut FftPlanner<f64>, n: usize, forward: bool) -> Self {
        match LanePlan::new(n.max(1), forward) {
            Some(p) if n > 0 => Line1d::Lanes(Arc::new(p)),
            _ => Line1d::Rust(planner.plan_fft(
                n,
                if forward {
                    FftDirection::Forward
                } else {
                    FftDirection::Inverse
                },
            )),
        }
    }

    /// Complex values of scratch the transform needs besides the lines.
    pub fn scratch_len(&self) -> usize {
        match self {
            Line1d::Lanes(p) => p.buffer_len().div_ceil(2),
            Line1d::Rust(p) => p.get_inplace_scratch_len(),
        }
    }

    /// Transforms one line in place (allocating its scratch).
    #[cfg(test)]
    pub fn process(&self, line: &mut [Complex64]) {
        match self {
            Line1d::Lanes(p) => {
                let mut buf = vec![0.0; p.buffer_len()];
                transform(p, None, line, 0, (1, line.len()), 1, 1.0, &mut buf);
            }
            Line1d::Rust(p) => p.process(line),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The DFT by its definition, summed in extended care (pairwise over a
    /// table of exactly reduced angles).
    fn dft(x: &[Complex64], forward: bool) -> Vec<Complex64> {
        let n = x.len();
        let sign = if forward { -1.0 } else { 1.0 };
        (0..n)
            .map(|q| {
                x.iter()
                    .enumerate()
                    .map(|(k, v)| {
                        let a = sign * 2.0 * std::f64::consts::PI * ((q * k) % n) as f64 / n as f64;
                        v * Complex64::new(a.cos(), a.sin())
                    })
                    .sum()
            })
            .collect()
    }

    fn line(n: usize, seed: u64) -> Vec<Complex64> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        (0..n).map(|_| Complex64::new(next(), next())).collect()
    }

    /// The lines through `plan`, held side by side (value `k` of line `t`
    /// at `k bl + t`) or, with `contiguous`, one after the other.
    fn run_in(plan: &LanePlan, lines: &[Vec<Complex64>], contiguous: bool) -> Vec<Vec<Complex64>> {
        let n = plan.len();
        let bl = lines.len();
        let at = if contiguous { (1, n) } else { (bl, 1) };
        let mut data = vec![Complex64::new(0.0, 0.0); n * bl];
        for (t, l) in lines.iter().enumerate() {
            for k in 0..n {
                data[k * at.0 + t * at.1] = l[k];
            }
        }
        let mut buf = vec![f64::NAN; plan.buffer_len()];
        transform(plan, None, &mut data, 0, at, bl, 1.0, &mut buf);
        (0..bl)
            .map(|t| (0..n).map(|k| data[k * at.0 + t * at.1]).collect())
            .collect()
    }

    fn run_lines(plan: &LanePlan, lines: &[Vec<Complex64>]) -> Vec<Vec<Complex64>> {
        let side = run_in(plan, lines, false);
        let after = run_in(plan, lines, true);
        assert!(
            bits_eq(&side, &after),
            "n {}: the two placements differ",
            plan.len()
        );
        side
    }

    fn bits_eq(a: &[Vec<Complex64>], b: &[Vec<Complex64>]) -> bool {
        let bits = |v: &[Vec<Complex64>]| {
            v.iter()
                .flatten()
                .map(|c| (c.re.to_bits(), c.im.to_bits()))
                .collect::<Vec<_>>()
        };
        bits(a) == bits(b)
    }

    #[test]
    fn radices_cover_smooth_lengths_and_refuse_large_primes() {
        assert_eq!(radices(256), Some(vec![8, 8, 4]));
        assert_eq!(radices(128), Some(vec![8, 4, 4]));
        assert_eq!(radices(16), Some(vec![4, 4]));
        assert_eq!(radices(2), Some(vec![2]));
        assert_eq!(radices(6), Some(vec![2, 3]));
        assert_eq!(radices(512 * 5), Some(vec![8, 8, 8, 5]));
        assert_eq!(
            radices(2 * 3 * 5 * 7 * 11 * 13),
            Some(vec![2, 3, 5, 7, 11, 13])
        );
        assert_eq!(radices(1), Some(vec![]));
        assert_eq!(radices(17), None);
        assert_eq!(radices(3 * 19), None);
    }

    #[test]
    fn matches_the_dft_by_definition() {
        let lengths = (1..=40)
            .chain([
                48, 60, 64, 77, 96, 100, 121, 128, 143, 169, 243, 250, 256, 384, 512,
            ])
            .filter(|&n| radices(n).is_some());
        for n in lengths {
            for forward in [true, false] {
                let plan = LanePlan::new(n, forward).expect("smooth length");
                let lines: Vec<_> = (0..LANES as u64)
                    .map(|s| line(n, 7 * s + n as u64))
                    .collect();
                let got = run_lines(&plan, &lines);
                for (l, g) in lines.iter().zip(&got) {
                    let want = dft(l, forward);
                    let norm = want.iter().map(|v| v.norm_sqr()).sum::<f64>().sqrt();
                    let err = want
                        .iter()
                        .zip(g)
                        .map(|(a, b)| (a - b).norm_sqr())
                        .sum::<f64>()
                        .sqrt();
                    // The FFT's error grows like eps log n; the definition's
                    // own rounding (eps sqrt n per value) dominates the
                    // bound for the larger lengths.
                    let bound = 1e-15 * (n as f64).sqrt() * (2.0 + (n as f64).log2());
                    assert!(
                        err <= bound * norm.max(1e-300),
                        "n {n} forward {forward}: relative error {:.3e} above {bound:.3e}",
                        err / norm
                    );
                }
            }
        }
    }

    #[test]
    fn a_line_has_the_same_bits_in_any_lane_and_company() {
        for n in [12, 64, 105, 143] {
            let plan = LanePlan::new(n, true).unwrap();
            let alone = run_lines(&plan, &[line(n, 1)]);
            for bl in 2..=LANES {
                let mut lines: Vec<_> = (0..bl as u64).map(|s| line(n, 100 + s)).collect();
                lines[bl - 1] = line(n, 1);
                let got = run_lines(&plan, &lines);
                assert!(bits_eq(&got[bl - 1..], &alone), "n {n}, lane {}", bl - 1);
            }
        }
    }

    #[test]
    fn instruction_sets_give_the_same_bits() {
        let best = Simd::detect();
        for n in [8, 30, 64, 91, 256] {
            for forward in [true, false] {
                let lines: Vec<_> = (0..LANES as u64).map(|s| line(n, s)).collect();
                let reference = run_lines(
                    &LanePlan::new(n, forward).unwrap().with_simd(Simd::Portable),
                    &lines,
                );
                for simd in [Simd::Avx2, Simd::Avx512] {
                    if simd == Simd::Avx512 && best != Simd::Avx512 || best == Simd::Portable {
                        continue;
                    }
                    let got =
                        run_lines(&LanePlan::new(n, forward).unwrap().with_simd(simd), &lines);
                    assert!(bits_eq(&reference, &got), "n {n} {simd:?}");
                }
            }
        }
    }

    #[test]
    fn forward_then_inverse_returns_n_times_the_input() {
        for n in [6, 64, 135, 512] {
            let f = LanePlan::new(n, true).unwrap();
            let b = LanePlan::new(n, false).unwrap();
            let lines: Vec<_> = (0..3u64).map(|s| line(n, s)).collect();
            let back = run_lines(&b, &run_lines(&f, &lines));
            for (l, r) in lines.iter().zip(&back) {
                for (x, y) in l.iter().zip(r) {
                    assert!((x * n as f64 - y).norm() <= 1e-13 * n as f64, "n {n}");
                }
            }
        }
    }

    #[test]
    fn twiddles_are_exactly_symmetric_on_octant_lengths() {
        for den in [8, 64, 256] {
            for m in 0..den {
                let (c, s) = unit(m, den, false);
                let (c2, s2) = unit(den - m, den, false);
                assert!(c == c2 && s == -s2, "{m}/{den}");
                // Against the unreduced angle, whose own rounding grows with
                // the angle (one ulp of 2 pi m / den, plus the cosine's).
                let a = 2.0 * std::f64::consts::PI * m as f64 / den as f64;
                let bound = 2.0 * f64::EPSILON * (1.0 + a);
                assert!(
                    (c - a.cos()).abs() <= bound && (s - a.sin()).abs() <= bound,
                    "{m}/{den}"
                );
            }
        }
    }
}
