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

/// Value `k` of [`LANES`] lines: real parts, then imaginary parts.
#[derive(Clone, Copy)]
struct P {
    re: [f64; LANES],
    im: [f64; LANES],
}

impl P {
    #[inline(always)]
    fn load(buf: &[f64], row: usize) -> P {
        let s: &[f64; ROW] = buf[row * ROW..row * ROW + ROW].try_into().expect("row");
        P {
            re: std::array::from_fn(|j| s[j]),
            im: std::array::from_fn(|j| s[LANES + j]),
        }
    }

    #[inline(always)]
    fn store(self, buf: &mut [f64], row: usize) {
        let s: &mut [f64; ROW] = (&mut buf[row * ROW..row * ROW + ROW])
            .try_into()
            .expect("row");
        for j in 0..LANES {
            s[j] = self.re[j];
            s[LANES + j] = self.im[j];
        }
    }

    #[inline(always)]
    fn add(self, o: P) -> P {
        P {
            re: std::array::from_fn(|j| self.re[j] + o.re[j]),
            im: std::array::from_fn(|j| self.im[j] + o.im[j]),
        }
    }

    #[inline(always)]
    fn sub(self, o: P) -> P {
        P {
            re: std::array::from_fn(|j| self.re[j] - o.re[j]),
            im: std::array::from_fn(|j| self.im[j] - o.im[j]),
        }
    }

    /// Times the real constant `c`.
    #[inline(always)]
    fn scale(self, c: f64) -> P {
        P {
            re: std::array::from_fn(|j| self.re[j] * c),
            im: std::array::from_fn(|j| self.im[j] * c),
        }
    }

    /// Times `w = c + i s`: `(a c - b s) + i (a s + b c)`.
    #[inline(always)]
    fn mul(self, (c, s): (f64, f64)) -> P {
        P {
            re: std::array::from_fn(|j| self.re[j] * c - self.im[j] * s),
            im: std::array::from_fn(|j| self.re[j] * s + self.im[j] * c),
        }
    }

    /// Times `i` (`FWD` false) or `-i` (`FWD` true): the quarter turn of
    /// the transform's sign.
    #[inline(always)]
    fn rot<const FWD: bool>(self) -> P {
        if FWD {
            P {
                re: self.im,
                im: std::array::from_fn(|j| -self.re[j]),
            }
        } else {
            P {
                re: std::array::from_fn(|j| -self.im[j]),
                im: self.re,
            }
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
    // Radix 8 while at least 8 remains, then one 4 or 2 for the rest of the
    // power of two.
    while n % 8 == 0 {
        out.push(8);
        n /= 8;
    }
    if n % 4 == 0 {
        out.push(4);
        n /= 4;
    }
    if n % 2 == 0 {
        out.push(2);
        n /= 2;
    }
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

    /// `f64` values of the two work buffers [`LanePlan::run`] needs.
    pub fn buffer_len(&self) -> usize {
        2 * self.n * ROW
    }

    /// Transforms the [`LANES`] lines held across lanes in the first
    /// `n * 2 LANES` values of `buf`, using the next as many as work space;
    /// returns the offset of the result in `buf` (0 or `n * 2 LANES`).
    pub fn run(&self, buf: &mut [f64]) -> usize {
        let half = self.n * ROW;
        let (a, b) = buf[..2 * half].split_at_mut(half);
        match self.simd {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Simd::detect` chose Avx512 only where the CPU has
            // AVX-512F.
            Simd::Avx512 => unsafe { run_avx512(self, a, b) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Simd::detect` chose Avx2 only where the CPU has AVX2.
            Simd::Avx2 => unsafe { run_avx2(self, a, b) },
            _ => run_passes(self, a, b),
        }
        if self.passes.len() % 2 == 0 {
            0
        } else {
            half
        }
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

/// # Safety
/// The CPU must support AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn run_avx512(plan: &LanePlan, a: &mut [f64], b: &mut [f64]) {
    run_passes(plan, a, b)
}

/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn run_avx2(plan: &LanePlan, a: &mut [f64], b: &mut [f64]) {
    run_passes(plan, a, b)
}

/// Every pass, from `a` to `b` and back.
#[inline(always)]
fn run_passes(plan: &LanePlan, a: &mut [f64], b: &mut [f64]) {
    for (i, p) in plan.passes.iter().enumerate() {
        let (src, dst) = if i % 2 == 0 {
            (&*a, &mut *b)
        } else {
            (&*b, &mut *a)
        };
        if plan.forward {
            pass::<true>(plan.n, p, src, dst);
        } else {
            pass::<false>(plan.n, p, src, dst);
        }
    }
}

#[inline(always)]
fn pass<const FWD: bool>(n: usize, p: &Pass, src: &[f64], dst: &mut [f64]) {
    match p.radix {
        2 => radix_pass::<2, FWD>(n, p, src, dst, |v, _| {
            let [a, b] = *v;
            *v = [a.add(b), a.sub(b)];
        }),
        3 => radix_pass::<3, FWD>(n, p, src, dst, bfly3::<FWD>),
        4 => radix_pass::<4, FWD>(n, p, src, dst, |v, _| bfly4::<FWD>(v)),
        5 => radix_pass::<5, FWD>(n, p, src, dst, bfly5::<FWD>),
        8 => radix_pass::<8, FWD>(n, p, src, dst, |v, _| bfly8::<FWD>(v)),
        7 => radix_pass::<7, FWD>(n, p, src, dst, bfly_prime::<7>),
        11 => radix_pass::<11, FWD>(n, p, src, dst, bfly_prime::<11>),
        13 => radix_pass::<13, FWD>(n, p, src, dst, bfly_prime::<13>),
        r => unreachable!("radix {r} is not planned"),
    }
}

/// One pass of radix `R`: for butterfly `j = b ns + k`, the inputs are
/// rows `j + r n / R`, twiddled by `w^(r k)`, and the outputs go to rows
/// `b ns R + k + r ns`.
#[inline(always)]
fn radix_pass<const R: usize, const FWD: bool>(
    n: usize,
    p: &Pass,
    src: &[f64],
    dst: &mut [f64],
    bfly: impl Fn(&mut [P; R], &Consts),
) {
    let q = n / R;
    let ns = p.ns;
    for b in 0..q / ns {
        for k in 0..ns {
            let j = b * ns + k;
            let mut v: [P; R] = std::array::from_fn(|r| P::load(src, j + r * q));
            if k != 0 {
                let tw = &p.tw[k * (R - 1)..(k + 1) * (R - 1)];
                for r in 1..R {
                    v[r] = v[r].mul(tw[r - 1]);
                }
            }
            bfly(&mut v, &p.consts);
            let d = b * ns * R + k;
            for (r, x) in v.into_iter().enumerate() {
                x.store(dst, d + r * ns);
            }
        }
    }
}

#[inline(always)]
fn bfly4<const FWD: bool>(v: &mut [P; 4]) {
    let [a, b, c, d] = *v;
    let t0 = a.add(c);
    let t1 = a.sub(c);
    let t2 = b.add(d);
    let t3 = b.sub(d).rot::<FWD>();
    *v = [t0.add(t2), t1.add(t3), t0.sub(t2), t1.sub(t3)];
}

#[inline(always)]
fn bfly8<const FWD: bool>(v: &mut [P; 8]) {
    // Two radix-4 butterflies on the even and the odd inputs, then the
    // eighth-turn twiddles and four radix-2 butterflies.
    let h = std::f64::consts::FRAC_1_SQRT_2;
    let mut e = [v[0], v[2], v[4], v[6]];
    let mut o = [v[1], v[3], v[5], v[7]];
    bfly4::<FWD>(&mut e);
    bfly4::<FWD>(&mut o);
    // o[1] * exp(-+ i pi / 4), o[2] * -+i, o[3] * exp(-+ 3 i pi / 4).
    let o1 = {
        let r = o[1].rot::<FWD>();
        o[1].add(r).scale(h)
    };
    let o2 = o[2].rot::<FWD>();
    let o3 = {
        let r = o[3].rot::<FWD>();
        r.sub(o[3]).scale(h)
    };
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

#[inline(always)]
fn bfly3<const FWD: bool>(v: &mut [P; 3], c: &Consts) {
    let [a, b, d] = *v;
    // w = exp(sign 2 pi i / 3) = -1/2 + i s.
    let s = c.w[1].1;
    let t = b.add(d);
    let m = a.sub(t.scale(0.5));
    // i s (b - d)
    let u = b.sub(d);
    let r = P {
        re: std::array::from_fn(|j| -(u.im[j] * s)),
        im: std::array::from_fn(|j| u.re[j] * s),
    };
    *v = [a.add(t), m.add(r), m.sub(r)];
}

#[inline(always)]
fn bfly5<const FWD: bool>(v: &mut [P; 5], c: &Consts) {
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
    let b1 = t3.scale(s1).add(t4.scale(s2));
    let b2 = t3.scale(s2).sub(t4.scale(s1));
    let i = |u: P| P {
        re: std::array::from_fn(|j| -u.im[j]),
        im: u.re,
    };
    let (ib1, ib2) = (i(b1), i(b2));
    *v = [
        x0.add(t1).add(t2),
        a1.add(ib1),
        a2.add(ib2),
        a2.sub(ib2),
        a1.sub(ib1),
    ];
}

/// The plain DFT of a prime radix: `y_q = sum_r x_r w^(q r)`.
#[inline(always)]
fn bfly_prime<const R: usize>(v: &mut [P; R], c: &Consts) {
    let x = *v;
    for (q, y) in v.iter_mut().enumerate() {
        let mut acc = x[0];
        for r in 1..R {
            acc = acc.add(x[r].mul(c.w[(q * r) % R]));
        }
        *y = acc;
    }
}

/// Loads `bl <= LANES` lines into rows: value `k` of line `t` is
/// `src[base + k * stride + t * step]`; unused lanes are zero.
pub(crate) fn load(
    src: &[Complex64],
    base: usize,
    (stride, step): (usize, usize),
    n: usize,
    bl: usize,
    buf: &mut [f64],
) {
    debug_assert!(bl <= LANES);
    if step == 1 && bl == LANES {
        for (k, d) in buf[..n * ROW].chunks_exact_mut(ROW).enumerate() {
            let s: &[Complex64; LANES] = src[base + k * stride..][..LANES]
                .try_into()
                .expect("row");
            for j in 0..LANES {
                d[j] = s[j].re;
                d[LANES + j] = s[j].im;
            }
        }
        return;
    }
    if step == 1 {
        for (k, d) in buf[..n * ROW].chunks_exact_mut(ROW).enumerate() {
            let s = &src[base + k * stride..][..bl];
            d.fill(0.0);
            for j in 0..bl {
                d[j] = s[j].re;
                d[LANES + j] = s[j].im;
            }
        }
        return;
    }
    if bl < LANES {
        buf[..n * ROW].fill(0.0);
    }
    for t in 0..bl {
        let line = &src[base + t * step..];
        for k in 0..n {
            let v = line[k * stride];
            buf[k * ROW + t] = v.re;
            buf[k * ROW + LANES + t] = v.im;
        }
    }
}

/// The inverse of [`load`] for the first `bl` lanes, each value times
/// `scale` (no multiplication when it is 1).
pub(crate) fn store(
    buf: &[f64],
    n: usize,
    bl: usize,
    dst: &mut [Complex64],
    base: usize,
    (stride, step): (usize, usize),
    scale: f64,
) {
    debug_assert!(bl <= LANES);
    let one = scale == 1.0;
    if step == 1 && bl == LANES {
        for (k, s) in buf[..n * ROW].chunks_exact(ROW).enumerate() {
            let d: &mut [Complex64; LANES] = (&mut dst[base + k * stride..][..LANES])
                .try_into()
                .expect("row");
            for j in 0..LANES {
                d[j] = if one {
                    Complex64::new(s[j], s[LANES + j])
                } else {
                    Complex64::new(s[j] * scale, s[LANES + j] * scale)
                };
            }
        }
        return;
    }
    for t in 0..bl {
        let line = &mut dst[base + t * step..];
        for k in 0..n {
            let (re, im) = (buf[k * ROW + t], buf[k * ROW + LANES + t]);
            line[k * stride] = if one {
                Complex64::new(re, im)
            } else {
                Complex64::new(re * scale, im * scale)
            };
        }
    }
}

/// Transforms `bl <= LANES` lines from `src` (in place where it is `None`)
/// into `dst` through `plan`, at the positions of [`load`] in both, scaling
/// by `scale`; `buf` holds at least [`LanePlan::buffer_len`] values.
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
    let n = plan.len();
    load(src.unwrap_or(dst), base, at, n, bl, buf);
    let o = plan.run(buf);
    store(&buf[o..], n, bl, dst, base, at, scale);
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
        assert!(bits_eq(&side, &after), "n {}: the two placements differ", plan.len());
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
        assert_eq!(radices(128), Some(vec![8, 8, 2]));
        assert_eq!(radices(2 * 3 * 5 * 7 * 11 * 13), Some(vec![2, 3, 5, 7, 11, 13]));
        assert_eq!(radices(1), Some(vec![]));
        assert_eq!(radices(17), None);
        assert_eq!(radices(3 * 19), None);
    }

    #[test]
    fn matches_the_dft_by_definition() {
        let lengths = (1..=40)
            .chain([48, 60, 64, 77, 96, 100, 121, 128, 143, 169, 243, 250, 256, 384, 512])
            .filter(|&n| radices(n).is_some());
        for n in lengths {
            for forward in [true, false] {
                let plan = LanePlan::new(n, forward).expect("smooth length");
                let lines: Vec<_> = (0..LANES as u64).map(|s| line(n, 7 * s + n as u64)).collect();
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
                let reference = run_lines(&LanePlan::new(n, forward).unwrap().with_simd(Simd::Portable), &lines);
                for simd in [Simd::Avx2, Simd::Avx512] {
                    if simd == Simd::Avx512 && best != Simd::Avx512 || best == Simd::Portable {
                        continue;
                    }
                    let got = run_lines(&LanePlan::new(n, forward).unwrap().with_simd(simd), &lines);
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
                assert!((c - a.cos()).abs() <= bound && (s - a.sin()).abs() <= bound, "{m}/{den}");
            }
        }
    }
}
