//! The normalised associated Legendre recurrence, with extended exponent
//! for the sectoral start so that high orders do not underflow at the poles.

use std::f64::consts::PI;

use num_complex::Complex64;

/// Scaling unit of the extended exponent: `2^280`.
pub(crate) const BIG: f64 = 1.942668892225729e84; // 2^280
/// `2^-280`.
pub(crate) const INV_BIG: f64 = 5.147557589468029e-85; // 2^-280

/// Sectoral values `Pbar_mm(cos theta) = val * BIG^-k` for `m = 0..=mmax`,
/// pushed to `val` and `k`, for one `sin(theta)`.
pub(crate) fn sectoral(mmax: usize, sin_theta: f64, mut push: impl FnMut(f64, i32)) {
    let mut val = (1.0 / (4.0 * PI)).sqrt();
    let mut k = 0i32;
    for m in 0..=mmax {
        push(val, k);
        let mf = m as f64;
        val *= ((2.0 * mf + 3.0) / (2.0 * mf + 2.0)).sqrt() * sin_theta;
        if val != 0.0 && val < INV_BIG {
            val *= BIG;
            k += 1;
        }
    }
}

/// Recurrence coefficients for order `m`: entry `i` (for `l = m + 1 + i`,
/// up to `l = lend`) is `[alpha_lm, beta_lm]` with
/// `Pbar_lm = (alpha_lm x) Pbar_{l-1,m} + beta_lm Pbar_{l-2,m}`, evaluated as
/// one fused multiply-add ([`step`]); `alpha_lm = sqrt((4 l^2 - 1) / (l^2 - m^2))`,
/// `beta_lm = -alpha_lm / alpha_{l-1,m}` (`beta_{m+1,m} = 0`).
pub(crate) fn coefficients(lend: usize, m: usize, out: &mut Vec<[f64; 2]>) {
    out.clear();
    let mf = m as f64;
    for l in m + 1..=lend {
        let lf = l as f64;
        let a = ((4.0 * lf * lf - 1.0) / ((lf - mf) * (lf + mf))).sqrt();
        let l1 = lf - 1.0;
        let b = ((l1 - mf) * (l1 + mf) / (4.0 * l1 * l1 - 1.0)).sqrt();
        out.push([a, -a * b]);
    }
}

/// One step of the recurrence: `Pbar_l` from `p1 = Pbar_{l-1}` and
/// `p0 = Pbar_{l-2}`. The same operations (and so the same bits) everywhere.
#[inline(always)]
pub(crate) fn step(ab: [f64; 2], x: f64, p1: f64, p0: f64) -> f64 {
    (ab[0] * x).mul_add(p1, ab[1] * p0)
}

/// Runs the recurrence in `l` from the sectoral value `p_start * BIG^-k_start`
/// and calls `visit(l - m, Pbar_lm(x))` for every `l` from the first one where
/// the value is back in the unscaled range. While scaled (`k >= 1`) the stored
/// value stays below 1 in magnitude, so the true value is below `2^-280` and
/// is skipped as negligible.
pub(crate) fn run(
    x: f64,
    p_start: f64,
    k_start: i32,
    ab: &[[f64; 2]],
    mut visit: impl FnMut(usize, f64),
) {
    let n = ab.len();
    let Some((mut i, mut p0, mut p1)) = unscaled_start(x, p_start, k_start, ab) else {
        return;
    };
    loop {
        visit(i, p1);
        if i == n {
            return;
        }
        let p2 = step(ab[i], x, p1, p0);
        p0 = p1;
        p1 = p2;
        i += 1;
    }
}

/// The orthonormal associated Legendre functions
/// `Pbar_lm(cos theta) = N_lm P_l^m(cos theta)` (no Condon-Shortley phase,
/// `N_lm = sqrt((2l+1)/(4 pi) (l-m)!/(l+m)!)`) for `l = m..=lmax` at one
/// point, written to `out[l - m]`, so that `Y_lm = Pbar_lm e^{i m phi}`.
///
/// Uses the same scaled recurrence as the transforms; values below
/// `2^-280` come out as zero. `out` must hold `lmax - m + 1` values and
/// `m <= lmax`; otherwise an error.
pub fn normalized_legendre(
    lmax: usize,
    m: usize,
    theta: f64,
    out: &mut [f64],
) -> Result<(), crate::ShtError> {
    if m > lmax {
        return Err(crate::ShtError::OrderOutOfRange { m, mmax: lmax });
    }
    crate::check_len("out", out.len(), lmax - m + 1)?;
    let (x, s) = (theta.cos(), theta.sin().abs());
    let mut start = (0.0, 0);
    sectoral(m, s, |v, k| start = (v, k));
    let mut ab = Vec::new();
    coefficients(lmax, m, &mut ab);
    out.iter_mut().for_each(|o| *o = 0.0);
    run(x, start.0, start.1, &ab, |i, p| out[i] = p);
    Ok(())
}

/// The index `i = l - m` at which the scaled recurrence from
/// `(p_start, k_start)` reaches the unscaled range, with `(p_{i-1}, p_i)`
/// there; `None` if it does not within `ab` (`l <= m + ab.len()`).
#[inline(always)]
pub(crate) fn unscaled_start(
    x: f64,
    p_start: f64,
    k_start: i32,
    ab: &[[f64; 2]],
) -> Option<(usize, f64, f64)> {
    let (mut p0, mut p1, mut k, mut i) = (0.0, p_start, k_start, 0usize);
    while k > 0 {
        if i == ab.len() {
            return None;
        }
        let p2 = step(ab[i], x, p1, p0);
        p0 = p1;
        p1 = p2;
        i += 1;
        if p1.abs() > 1.0 {
            p0 *= INV_BIG;
            p1 *= INV_BIG;
            k -= 1;
        }
    }
    Some((i, p0, p1))
}

/// What the Legendre kernels need for one order `m`.
#[derive(Clone, Copy)]
pub(crate) struct Order<'a> {
    /// Recurrence coefficients for `l = m + 1..=lend` (see [`coefficients`]);
    /// the kernels cover `l = m..=lend`, `ab.len() + 1` degrees.
    pub ab: &'a [[f64; 2]],
    /// Northern nodes `x_j = cos theta_j`, `j < ceil(ntheta / 2)`.
    pub x: &'a [f64],
    /// Where each northern node's recurrence leaves the scaled range
    /// (see [`Start`]), computed once per plan up to `l = lmax + 1`.
    pub start: &'a [Start],
    /// Gauss weights of the northern nodes times `2 pi`.
    pub w2pi: &'a [f64],
    /// Number of latitudes (both hemispheres).
    pub nt: usize,
}

/// The unscaled start of the recurrence of one order at one node:
/// `Pbar_{m+i-1,m} = p[0]`, `Pbar_{m+i,m} = p[1]` with `i = i`; all lower
/// degrees are negligible (below `2^-280`). `i = u32::MAX`: negligible for
/// every degree of the plan.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Start {
    /// First degree index `l - m` in the unscaled range.
    pub i: u32,
    /// The two values there.
    pub p: [f64; 2],
}

impl Start {
    /// No unscaled value up to the plan's last degree.
    pub(crate) const NONE: Start = Start {
        i: u32::MAX,
        p: [0.0; 2],
    };
}

/// Width of the per-lane partial sums of analysis: fixed, so that the
/// summation order (and so the bits) does not depend on the block width.
const PART: usize = 8;

/// The SIMD instruction set the kernels were compiled for, chosen once at
/// run time. Every variant computes every value by the same sequence of
/// IEEE operations (fused multiply-adds included: without hardware FMA
/// `mul_add` is the correctly rounded library call), so the results are
/// bit-identical whichever is chosen; only the speed differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Simd {
    /// AVX-512F + FMA: 16 latitudes per block.
    Avx512,
    /// AVX2 + FMA: 8 latitudes per block.
    Avx2,
    /// Portable code, 8 latitudes per block.
    Generic,
}

impl Simd {
    /// The best set this CPU supports.
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Simd::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Simd::Avx2;
            }
        }
        Simd::Generic
    }
}

/// Legendre synthesis for one order: for each of the `nf` fields,
/// `out[f * nt + j] = sum_{i} c[f * nd + i] Pbar_{m+i,m}(x_j)` over the
/// `nd = ab.len() + 1` degrees, both hemispheres (parity).
pub(crate) fn synth(simd: Simd, o: &Order<'_>, nf: usize, c: &[Complex64], out: &mut [Complex64]) {
    match simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Simd::detect` found AVX-512F and FMA on this CPU.
        Simd::Avx512 => unsafe { synth_avx512(o, nf, c, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Simd::detect` found AVX2 and FMA on this CPU.
        Simd::Avx2 => unsafe { synth_avx2(o, nf, c, out) },
        _ => synth_impl::<8>(o, nf, c, out),
    }
}

/// Legendre analysis for one order: for each of the `nf` fields,
/// `out[f * nd + i] = sum_j 2 pi w_j F[f * nt + j] Pbar_{m+i,m}(x_j)`.
pub(crate) fn anal(
    simd: Simd,
    o: &Order<'_>,
    nf: usize,
    input: &[Complex64],
    out: &mut [Complex64],
) {
    match simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Simd::detect` found AVX-512F and FMA on this CPU.
        Simd::Avx512 => unsafe { anal_avx512(o, nf, input, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Simd::detect` found AVX2 and FMA on this CPU.
        Simd::Avx2 => unsafe { anal_avx2(o, nf, input, out) },
        _ => anal_impl::<8>(o, nf, input, out),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn synth_avx512(o: &Order<'_>, nf: usize, c: &[Complex64], out: &mut [Complex64]) {
    synth_impl::<16>(o, nf, c, out)
}
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn synth_avx2(o: &Order<'_>, nf: usize, c: &[Complex64], out: &mut [Complex64]) {
    synth_impl::<8>(o, nf, c, out)
}
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn anal_avx512(o: &Order<'_>, nf: usize, input: &[Complex64], out: &mut [Complex64]) {
    anal_impl::<16>(o, nf, input, out)
}
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn anal_avx2(o: &Order<'_>, nf: usize, input: &[Complex64], out: &mut [Complex64]) {
    anal_impl::<8>(o, nf, input, out)
}

/// The latitudes of the block starting at northern row `jb`: nodes, and
/// the starts of the lanes with a non-negligible value up to `l = m + n`,
/// sorted by degree (`(i, lane)`, `count` of them), and the smallest such `i`.
#[inline(always)]
fn block_start<const L: usize>(o: &Order<'_>, jb: usize) -> ([f64; L], [(usize, usize); L], usize) {
    let n = o.ab.len();
    let nq = L.min(o.x.len() - jb);
    let mut x = [0.0; L];
    let mut ev = [(usize::MAX, 0usize); L];
    let mut count = 0;
    for q in 0..nq {
        x[q] = o.x[jb + q];
        let i = o.start[jb + q].i as usize;
        if i <= n {
            // Insertion by degree, then lane.
            let mut k = count;
            while k > 0 && ev[k - 1].0 > i {
                ev[k] = ev[k - 1];
                k -= 1;
            }
            ev[k] = (i, q);
            count += 1;
        }
    }
    (x, ev, count)
}

/// Advances the `L` lanes one degree: `p0 <- step(p1, p0)` (the caller
/// swaps the roles of the two arrays every other degree, no copies).
#[inline(always)]
fn step_lanes<const L: usize>(ab: [f64; 2], x: &[f64; L], p1: &[f64; L], p0: &mut [f64; L]) {
    for q in 0..L {
        p0[q] = step(ab, x[q], p1[q], p0[q]);
    }
}

#[inline(always)]
fn synth_impl<const L: usize>(o: &Order<'_>, nf: usize, c: &[Complex64], out: &mut [Complex64]) {
    let nd = o.ab.len() + 1;
    let nt = o.nt;
    out.iter_mut().for_each(|v| *v = Complex64::new(0.0, 0.0));
    let mut f = 0;
    while f < nf {
        if nf - f >= 2 {
            synth_group::<L, 2>(o, &c[f * nd..(f + 2) * nd], &mut out[f * nt..(f + 2) * nt]);
            f += 2;
        } else {
            synth_group::<L, 1>(o, &c[f * nd..(f + 1) * nd], &mut out[f * nt..(f + 1) * nt]);
            f += 1;
        }
    }
}

/// Accumulates `acc[g] += c[g][i] * p` (real and imaginary parts) for the `G` fields.
#[inline(always)]
fn accumulate<const L: usize, const G: usize>(
    acc: &mut [[[f64; L]; 2]; G],
    c: &[Complex64],
    nd: usize,
    i: usize,
    p: &[f64; L],
) {
    for g in 0..G {
        let cc = c[g * nd + i];
        for q in 0..L {
            acc[g][0][q] = cc.re.mul_add(p[q], acc[g][0][q]);
            acc[g][1][q] = cc.im.mul_add(p[q], acc[g][1][q]);
        }
    }
}

/// Synthesis of `G` fields (`c`: `G * nd`, `out`: `G * nt`, zeroed) over
/// blocks of `L` northern latitudes, from the equator to the pole; the
/// recurrence is shared by the `G` fields. Every lane sees the same
/// operations whatever `L` and `G` (the results do not depend on them).
#[inline(always)]
fn synth_group<const L: usize, const G: usize>(
    o: &Order<'_>,
    c: &[Complex64],
    out: &mut [Complex64],
) {
    let (nn, nt, ab) = (o.x.len(), o.nt, o.ab);
    let n = ab.len();
    let nd = n + 1;
    for jb in (0..nn).step_by(L).rev() {
        let (x, ev, ne) = block_start::<L>(o, jb);
        // Once a whole block is negligible, so are all blocks nearer the
        // pole (smaller sin^m theta): they stay zero.
        if ne == 0 {
            break;
        }
        let i0 = ev[0].0;
        // Accumulators by parity of i = l - m: [0] even (symmetric about
        // the equator), [1] odd (antisymmetric).
        let mut acc = [[[[0.0; L]; 2]; G]; 2];
        // All lanes together from the first start, two degrees per turn so
        // that the parity of each accumulator is fixed; a lane joins at its
        // own start (before, its values are zero and add exact zeros).
        let mut p0 = [0.0; L];
        let mut p1 = [0.0; L];
        let (pa, pb) = (i0 & 1, 1 - (i0 & 1));
        let mut a = acc[pa];
        let mut b = acc[pb];
        let mut i = i0;
        let mut e = 0;
        loop {
            while e < ne && ev[e].0 == i {
                let st = o.start[jb + ev[e].1].p;
                (p0[ev[e].1], p1[ev[e].1]) = (st[0], st[1]);
                e += 1;
            }
            accumulate::<L, G>(&mut a, c, nd, i, &p1);
            if i == n {
                break;
            }
            step_lanes::<L>(ab[i], &x, &p1, &mut p0);
            i += 1;
            while e < ne && ev[e].0 == i {
                let st = o.start[jb + ev[e].1].p;
                (p1[ev[e].1], p0[ev[e].1]) = (st[0], st[1]);
                e += 1;
            }
            accumulate::<L, G>(&mut b, c, nd, i, &p0);
            if i == n {
                break;
            }
            step_lanes::<L>(ab[i], &x, &p0, &mut p1);
            i += 1;
        }
        acc[pa] = a;
        acc[pb] = b;
        for q in 0..L.min(nn - jb) {
            let j = jb + q;
            let js = nt - 1 - j;
            for g in 0..G {
                let e = Complex64::new(acc[0][g][0][q], acc[0][g][1][q]);
                let d = Complex64::new(acc[1][g][0][q], acc[1][g][1][q]);
                out[g * nt + j] = e + d;
                if js != j {
                    out[g * nt + js] = e - d;
                }
            }
        }
    }
}

#[inline(always)]
fn anal_impl<const L: usize>(o: &Order<'_>, nf: usize, input: &[Complex64], out: &mut [Complex64]) {
    let nd = o.ab.len() + 1;
    let nt = o.nt;
    // Per-lane partial sums, index (field * nd + i), [re, im] x PART lanes.
    let mut part = vec![[[0.0; PART]; 2]; 2 * nd];
    let mut f = 0;
    while f < nf {
        let g = if nf - f >= 2 { 2 } else { 1 };
        part.iter_mut().for_each(|p| *p = [[0.0; PART]; 2]);
        if g == 2 {
            anal_group::<L, 2>(o, &input[f * nt..(f + 2) * nt], &mut part);
        } else {
            anal_group::<L, 1>(o, &input[f * nt..(f + 1) * nt], &mut part);
        }
        for (k, p) in part[..g * nd].iter().enumerate() {
            let (mut sr, mut si) = (0.0, 0.0);
            for r in 0..PART {
                sr += p[0][r];
                si += p[1][r];
            }
            out[f * nd + k] = Complex64::new(sr, si);
        }
        f += g;
    }
}

/// Adds `sd * p` of the `L` lanes to the `PART` partial sums, the lane
/// `q + PART h` of the block into partial `q`, highest `h` first (the
/// order the 8-lane blocks nearer the equator would give).
#[inline(always)]
fn deposit<const L: usize, const G: usize>(
    part: &mut [[[f64; PART]; 2]],
    sd: &[[[f64; L]; 2]; G],
    nd: usize,
    i: usize,
    p: &[f64; L],
) {
    for g in 0..G {
        let d = &mut part[g * nd + i];
        for h in (0..L / PART).rev() {
            for r in 0..PART {
                let q = h * PART + r;
                d[0][r] = sd[g][0][q].mul_add(p[q], d[0][r]);
                d[1][r] = sd[g][1][q].mul_add(p[q], d[1][r]);
            }
        }
    }
}

/// Analysis of `G` fields (`input`: `G * nt`) into the partial sums
/// `part[g * nd + i]`, over blocks of `L` northern latitudes from the
/// equator to the pole. The partial sum of lane `r` receives the rows
/// `j = r mod PART` in decreasing `j`, whatever `L`.
#[inline(always)]
fn anal_group<const L: usize, const G: usize>(
    o: &Order<'_>,
    input: &[Complex64],
    part: &mut [[[f64; PART]; 2]],
) {
    let (nn, nt, ab) = (o.x.len(), o.nt, o.ab);
    let n = ab.len();
    let nd = n + 1;
    for jb in (0..nn).step_by(L).rev() {
        let (x, ev, ne) = block_start::<L>(o, jb);
        if ne == 0 {
            break;
        }
        let i0 = ev[0].0;
        // Weighted sums (even i) and differences (odd i) of the two
        // hemispheres, [parity][field][re, im][lane].
        let mut sd = [[[[0.0; L]; 2]; G]; 2];
        for q in 0..L.min(nn - jb) {
            let j = jb + q;
            let js = nt - 1 - j;
            let wj = o.w2pi[j];
            for g in 0..G {
                let a = input[g * nt + j];
                let (s, d) = if js != j {
                    let b = input[g * nt + js];
                    ((a + b) * wj, (a - b) * wj)
                } else {
                    (a * wj, Complex64::new(0.0, 0.0))
                };
                sd[0][g][0][q] = s.re;
                sd[0][g][1][q] = s.im;
                sd[1][g][0][q] = d.re;
                sd[1][g][1][q] = d.im;
            }
        }
        // All lanes together from the first start (see `synth_group`).
        let mut p0 = [0.0; L];
        let mut p1 = [0.0; L];
        let (sa, sb) = (sd[i0 & 1], sd[1 - (i0 & 1)]);
        let mut i = i0;
        let mut e = 0;
        loop {
            while e < ne && ev[e].0 == i {
                let st = o.start[jb + ev[e].1].p;
                (p0[ev[e].1], p1[ev[e].1]) = (st[0], st[1]);
                e += 1;
            }
            deposit::<L, G>(part, &sa, nd, i, &p1);
            if i == n {
                break;
            }
            step_lanes::<L>(ab[i], &x, &p1, &mut p0);
            i += 1;
            while e < ne && ev[e].0 == i {
                let st = o.start[jb + ev[e].1].p;
                (p1[ev[e].1], p0[ev[e].1]) = (st[0], st[1]);
                e += 1;
            }
            deposit::<L, G>(part, &sb, nd, i, &p0);
            if i == n {
                break;
            }
            step_lanes::<L>(ab[i], &x, &p0, &mut p1);
            i += 1;
        }
    }
}

/// The [`Start`] of every order `m <= mmax` at every northern node, index
/// `m * x.len() + j`, for degrees up to `lend`; `rec`/`rec_off` hold the
/// recurrence coefficients of each order (up to `lend`). From the equator
/// to the pole: once a node is negligible for every degree, so are the
/// nodes nearer the pole (smaller `sin^m theta`), which are not computed.
pub(crate) fn starts(
    simd: Simd,
    x: &[f64],
    sin_theta: &[f64],
    mmax: usize,
    rec: &[[f64; 2]],
    rec_off: &[usize],
) -> Vec<Start> {
    match simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Simd::detect` found FMA on this CPU.
        Simd::Avx512 | Simd::Avx2 => unsafe { starts_fma(x, sin_theta, mmax, rec, rec_off) },
        _ => starts_impl(x, sin_theta, mmax, rec, rec_off),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn starts_fma(
    x: &[f64],
    sin_theta: &[f64],
    mmax: usize,
    rec: &[[f64; 2]],
    rec_off: &[usize],
) -> Vec<Start> {
    starts_impl(x, sin_theta, mmax, rec, rec_off)
}

#[inline(always)]
fn starts_impl(
    x: &[f64],
    sin_theta: &[f64],
    mmax: usize,
    rec: &[[f64; 2]],
    rec_off: &[usize],
) -> Vec<Start> {
    let nn = x.len();
    let mut pv = vec![0.0; (mmax + 1) * nn];
    let mut pk = vec![0; (mmax + 1) * nn];
    for j in 0..nn {
        let mut m = 0;
        sectoral(mmax, sin_theta[j], |v, k| {
            pv[m * nn + j] = v;
            pk[m * nn + j] = k;
            m += 1;
        });
    }
    let mut out = vec![Start::NONE; (mmax + 1) * nn];
    for m in 0..=mmax {
        let ab = &rec[rec_off[m]..rec_off[m + 1]];
        for j in (0..nn).rev() {
            let k = m * nn + j;
            match unscaled_start(x[j], pv[k], pk[k], ab) {
                Some((i, p0, p1)) => {
                    out[k] = Start {
                        i: i as u32,
                        p: [p0, p1],
                    }
                }
                None => break,
            }
        }
    }
    out
}
