//! The normalised associated Legendre functions: the recurrence in `l`
//! ([`normalized_legendre`]) and the kernels' recurrence over pairs of
//! degrees ([`ZForm`]), both with an extended exponent for the sectoral
//! start so that high orders do not underflow at the poles.

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
    leave_scaled(&InL { ab, x }, p_start, k_start)
}

/// A three-term recurrence at one node: `step(i, p1, p0)` is the value
/// after `p1` (index `i`) and `p0` (index `i - 1`), for `i < len()`.
trait Recurrence {
    fn len(&self) -> usize;
    fn step(&self, i: usize, p1: f64, p0: f64) -> f64;
}

/// The recurrence in `l` ([`step`]) at `x`.
struct InL<'a> {
    ab: &'a [[f64; 2]],
    x: f64,
}

impl Recurrence for InL<'_> {
    #[inline(always)]
    fn len(&self) -> usize {
        self.ab.len()
    }
    #[inline(always)]
    fn step(&self, i: usize, p1: f64, p0: f64) -> f64 {
        step(self.ab[i], self.x, p1, p0)
    }
}

/// The pair recurrence ([`zstep`]) at `y = x^2`.
struct InPairs<'a> {
    z: &'a ZForm,
    y: f64,
}

impl Recurrence for InPairs<'_> {
    #[inline(always)]
    fn len(&self) -> usize {
        self.z.ab.len()
    }
    #[inline(always)]
    fn step(&self, k: usize, z1: f64, z0: f64) -> f64 {
        zstep(self.z.ab[k], self.y, z1, z0)
    }
}

/// Runs `rec` from `(0, p_start)` scaled by `BIG^-k_start` (the stored
/// values are the true ones times `BIG^k`) until the values are back in
/// the unscaled range: the index there and its two values, `None` if that
/// is not reached within `rec.len()` steps. While scaled (`k >= 1`) a
/// stored value stays below 1 in magnitude, so the true value is below
/// `2^-280`.
#[inline(always)]
fn leave_scaled(rec: &impl Recurrence, p_start: f64, k_start: i32) -> Option<(usize, f64, f64)> {
    let (mut p0, mut p1, mut k, mut i) = (0.0, p_start, k_start, 0usize);
    while k > 0 {
        if i == rec.len() {
            return None;
        }
        let p2 = rec.step(i, p1, p0);
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
    /// Degrees `l = m..=lend` the call covers: `nd = lend - m + 1`.
    pub nd: usize,
    /// The pair recurrence of the order (see [`ZForm`]), built up to
    /// `l = lmax + 1`; the call uses pairs `k = 0..=kmax`,
    /// `kmax = (lend - m) / 2`.
    pub z: &'a ZForm,
    /// Northern nodes `x_j = cos theta_j`, `j < nn = ceil(ntheta / 2)`,
    /// with [`PAD`] zeros before and after (node `j` at `PAD + j`), so that
    /// a block copies a fixed number of lanes.
    pub xpad: &'a [f64],
    /// Where each northern node's recurrence leaves the scaled range
    /// (see [`Starts`]), computed once per plan up to `l = lmax + 1`.
    pub start: StartsRef<'a>,
    /// Gauss weights of the northern nodes times `2 pi`.
    pub w2pi: &'a [f64],
    /// Number of latitudes (both hemispheres).
    pub nt: usize,
    /// A factor per row (all `nt`), if any: synthesis multiplies each
    /// output row by it, analysis each input row before the weights (the
    /// `1 / sin theta` of the vector transforms, applied in passing).
    pub row_scale: Option<&'a [f64]>,
}

impl Order<'_> {
    /// The number of northern nodes.
    #[inline(always)]
    fn nn(&self) -> usize {
        self.xpad.len() - 2 * PAD
    }

    /// The last pair index of the call.
    #[inline(always)]
    fn kmax(&self) -> usize {
        (self.nd - 1) / 2
    }

    /// The factors `u_k`, `v_k`, `s_k` of [`ZForm`] for the call's pairs
    /// `k = 0..=kmax` (slices of exactly that length, so that loops zipped
    /// over them cover every pair).
    #[inline(always)]
    fn factors(&self) -> (&[f64], &[f64], &[f64]) {
        let k = self.kmax();
        (&self.z.u[..=k], &self.z.v[..=k], &self.z.s[..=k])
    }

    /// The start `(z_{k-1}, z_k)` of northern row `j` at its start pair `k`.
    #[inline(always)]
    fn start_values(&self, j: usize) -> [f64; 2] {
        [self.start.p0[PAD + j], self.start.p1[PAD + j]]
    }
}

/// `e_lm = sqrt((l^2 - m^2) / (4 l^2 - 1))` (0 at `l = m`): `x Pbar_l =
/// e_{l+1} Pbar_{l+1} + e_l Pbar_{l-1}`.
fn e_lm(l: usize, m: usize) -> f64 {
    let (lf, mf) = (l as f64, m as f64);
    ((lf - mf) * (lf + mf) / ((2.0 * lf - 1.0) * (2.0 * lf + 1.0))).sqrt()
}

/// The recurrence of one order in pairs of degrees, in `y = x^2` (the
/// form of Ishioka, J. Meteor. Soc. Japan 96, 2018): one step costs two
/// fused multiply-adds and serves two degrees, where the recurrence in `l`
/// costs two operations a degree.
///
/// With `t_k = Pbar_{m+2k+1} / x` (a polynomial in `y` times `sin^m
/// theta`; `t_{-1} = 0`, `t_0 = Pbar_mm / e_{m+1}`) the relation `x Pbar_l
/// = e_{l+1} Pbar_{l+1} + e_l Pbar_{l-1}` gives
///
/// - `Pbar_{m+2k+1} = x t_k` and `Pbar_{m+2k} = e_{m+2k+1} t_k + e_{m+2k}
///   t_{k-1}`;
/// - applied twice, `e_{l+1} e_{l+2} t_{k+1} = (y - e_{l+1}^2 - e_l^2) t_k -
///   e_l e_{l-1} t_{k-1}` with `l = m + 2k + 1`.
///
/// The kernels run `z_k = t_k / s_k`, with `s_0 = s_1 = 1` and `s_{k+1} =
/// -s_{k-1} e_l e_{l-1} / (e_{l+1} e_{l+2})` chosen so that the step is
/// `z_{k+1} = (A_k y + B_k) z_k + z_{k-1}` (`|s_k|` stays between about
/// `3 / sqrt(m)` and 1.04: 0.092 to 1.04 over every order of lmax 1023,
/// 0.046 to 1.04 of lmax 4095; no overflow at any degree). A synthesis sums `E = sum_k
/// a_k z_k` and `O = sum_k b_k z_k` with `a_k = u_k c_{m+2k} + v_k
/// c_{m+2k+2}`, `b_k = s_k c_{m+2k+1}` (`u_k = s_k e_{m+2k+1}`, `v_k = s_k
/// e_{m+2k+2}`); the northern value is `E + x O`, the southern `E - x O`.
/// An analysis sums `E_k` and `O_k` over the nodes and takes `c_{m+2k} =
/// u_k E_k + v_{k-1} E_{k-1}`, `c_{m+2k+1} = s_k O_k`.
#[derive(Clone, Debug)]
pub(crate) struct ZForm {
    /// `[A_k, B_k]` for the step from pair `k` to `k + 1`.
    pub ab: Vec<[f64; 2]>,
    /// `u_k`, `v_k` and `s_k` for `k = 0..=kmax`.
    pub u: Vec<f64>,
    pub v: Vec<f64>,
    pub s: Vec<f64>,
}

impl ZForm {
    /// The pair recurrence of order `m` for degrees up to `lend >= m`
    /// (pairs `k = 0..=(lend - m) / 2`).
    pub(crate) fn new(m: usize, lend: usize) -> Self {
        let kmax = (lend - m) / 2;
        let e = |l: usize| e_lm(l, m);
        let mut s = Vec::with_capacity(kmax + 2);
        s.extend([1.0, 1.0]);
        for k in 1..=kmax {
            let l = m + 2 * k + 1;
            let next = -s[k - 1] * (e(l) * e(l - 1)) / (e(l + 1) * e(l + 2));
            s.push(next);
        }
        let ab = (0..kmax)
            .map(|k| {
                let l = m + 2 * k + 1;
                let a = s[k] / (s[k + 1] * (e(l + 1) * e(l + 2)));
                let d = e(l + 1) * e(l + 1) + e(l) * e(l);
                [a, -a * d]
            })
            .collect();
        let u = (0..=kmax).map(|k| s[k] * e(m + 2 * k + 1)).collect();
        let v = (0..=kmax).map(|k| s[k] * e(m + 2 * k + 2)).collect();
        s.truncate(kmax + 1);
        ZForm { ab, u, v, s }
    }

    /// `z_0 = Pbar_mm / e_{m+1}` from `Pbar_mm` (`1 / e_{m+1} =
    /// sqrt(2m + 3)`).
    fn z0(m: usize, pmm: f64) -> f64 {
        pmm * (2.0 * m as f64 + 3.0).sqrt()
    }
}

/// One step of the pair recurrence at one node: `z_{k+1}` from `z1 =
/// z_k`, `z0 = z_{k-1}` and `y = x^2`. The kernels' operations.
#[inline(always)]
fn zstep(ab: [f64; 2], y: f64, z1: f64, z0: f64) -> f64 {
    ab[0].mul_add(y, ab[1]).mul_add(z1, z0)
}

/// The pair index `k` at which the scaled pair recurrence from the
/// sectoral value `p_start * BIG^-k_start` reaches the unscaled range, with
/// `(z_{k-1}, z_k)` there; `None` if it does not within `z`. While scaled
/// the values `t_k = s_k z_k` are below `2^-280` (`|s_k| <= 1.04`, see
/// [`ZForm`]), negligible.
#[inline(always)]
fn unscaled_zstart(
    m: usize,
    y: f64,
    p_start: f64,
    k_start: i32,
    z: &ZForm,
) -> Option<(usize, f64, f64)> {
    leave_scaled(&InPairs { z, y }, ZForm::z0(m, p_start), k_start)
}

/// The polar threshold: from the unscaled start `(k, z0, z1)`, the first
/// pair index where `|Pbar_{m+2k+1} / x| = |s_k z_k| >= eps`, with its two
/// values; `None` if the values stay below `eps` up to the last pair.
/// `eps = 0` keeps the start.
#[inline(always)]
fn zabove_threshold(
    y: f64,
    (mut k, mut z0, mut z1): (usize, f64, f64),
    z: &ZForm,
    eps: f64,
) -> Option<(usize, f64, f64)> {
    while (z.s[k] * z1).abs() < eps {
        if k == z.ab.len() {
            return None;
        }
        let z2 = zstep(z.ab[k], y, z1, z0);
        z0 = z1;
        z1 = z2;
        k += 1;
    }
    Some((k, z0, z1))
}

/// The starts of the pair recurrence of a plan (see [`ZForm`]), one entry
/// per order and northern node: `z_{i-1} = p0`, `z_i = p1` at the pair
/// index `i`; all lower pairs are negligible (below `2^-280`, or the polar
/// threshold). `i = u32::MAX`: negligible for every degree of the plan.
/// Separate arrays, so that a block's set-up reads each as one contiguous
/// run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Starts {
    /// First pair index `k` in the unscaled range.
    pub i: Vec<u32>,
    /// The two values there (`p0 = 0` at `i = 0`); zero where negligible.
    /// Each order's run of `nn` nodes has [`PAD`]
    /// zeros before and after it (node `j` of order `m` at `m (nn + 2 PAD)
    /// + PAD + j`), so that a block copies a fixed number of lanes.
    pub p0: Vec<f64>,
    pub p1: Vec<f64>,
    /// The first node of the run of equal `i` that ends at this node (of
    /// the same order, counted from the pole): nodes `j0..=j` share one
    /// start exactly when `run[j] <= j0`.
    pub run: Vec<u32>,
    /// Nodes per order.
    pub nn: usize,
}

/// The zeros around each order's values in [`Starts`] and around the nodes
/// in [`Order::xpad`]: a block's lanes reach at most `LMAX_LANES - 1` rows
/// before the pole's row 0 and fewer than `LMAX_LANES` past the last row.
pub(crate) const PAD: usize = LMAX_LANES;

impl Starts {
    /// `len` entries, all negligible for every degree.
    fn none(len: usize) -> Self {
        Starts {
            i: vec![u32::MAX; len],
            p0: vec![0.0; len],
            p1: vec![0.0; len],
            run: vec![0; len],
            nn: 0,
        }
    }

    /// The entries of order `m`.
    pub(crate) fn order(&self, m: usize) -> StartsRef<'_> {
        let (nn, w) = (self.nn, self.nn + 2 * PAD);
        StartsRef {
            i: &self.i[m * nn..(m + 1) * nn],
            p0: &self.p0[m * w..(m + 1) * w],
            p1: &self.p1[m * w..(m + 1) * w],
            run: &self.run[m * nn..(m + 1) * nn],
        }
    }

    /// The values of `nn` nodes per order of `orders` orders padded (see
    /// the fields), and the runs filled in.
    fn finish(&mut self, nn: usize, orders: usize) {
        let w = nn + 2 * PAD;
        let mut p0 = vec![0.0; orders * w];
        let mut p1 = vec![0.0; orders * w];
        for m in 0..orders {
            let r = m * nn..(m + 1) * nn;
            p0[m * w + PAD..m * w + PAD + nn].copy_from_slice(&self.p0[r.clone()]);
            p1[m * w + PAD..m * w + PAD + nn].copy_from_slice(&self.p1[r.clone()]);
            let (i, run) = (&self.i[r.clone()], &mut self.run[r]);
            for j in 0..nn {
                run[j] = if j > 0 && i[j] == i[j - 1] {
                    run[j - 1]
                } else {
                    j as u32
                };
            }
        }
        (self.p0, self.p1, self.nn) = (p0, p1, nn);
    }
}

/// A range of [`Starts`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct StartsRef<'a> {
    pub i: &'a [u32],
    pub p0: &'a [f64],
    pub p1: &'a [f64],
    pub run: &'a [u32],
}

/// Width of the per-lane partial sums of analysis: fixed, so that the
/// summation order (and so the bits) does not depend on the block width.
const PART: usize = 8;

/// The partial sums of one pair entry of analysis: `PART` real parts, then
/// `PART` imaginary parts, on cache lines of their own (a vector of eight
/// never straddles two lines, wherever the allocator put the buffer).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Part([f64; 2 * PART]);

/// The sum of a degree's `PART` partial sums, in the grouping every kernel
/// uses: `((p0 + p1) + (p2 + p3)) + ((p4 + p5) + (p6 + p7))`.
#[inline(always)]
fn tree8(p: &[f64]) -> f64 {
    ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))
}

/// The instruction set the kernels run on: `simd::Isa`, chosen once at
/// run time. Every set computes every value by the same sequence of IEEE
/// operations (fused multiply-adds included: without hardware FMA
/// `mul_add` is the correctly rounded library call), so the results are
/// bit-identical whichever is chosen; only the speed differs. `Avx512`
/// runs 32 latitudes per block (16 in the synthesis of pairs of fields, 24
/// in their analysis), `Avx2` 8 in the synthesis and 16 in the analysis
/// (with 8, each multiply-add into the partial sums took a load and a
/// store of its own: the analysis at lmax 1023 ran 3.1x the AVX-512 time
/// instead of 1.8x), `Portable` 8.
pub(crate) use simd::Isa;

/// A vector of `W` doubles: the operations the kernels use, each one IEEE
/// operation per element (`fma` fused, one rounding), so that every width
/// gives the same bits.
///
/// The vectors are `simd`'s, built with their instruction set's token
/// (`()` for the portable [`S1`]); a kernel takes the token once and gets
/// it back from any vector it holds ([`Vf::token`]).
trait Vf: Copy {
    /// Proof that the CPU runs these vectors.
    type Token: Copy;
    /// Elements.
    const W: usize;
    /// The token this vector proves.
    fn token(self) -> Self::Token;
    fn splat(t: Self::Token, v: f64) -> Self;
    /// From `s[..W]`.
    fn load(t: Self::Token, s: &[f64]) -> Self;
    /// To `s[..W]`.
    fn store(self, s: &mut [f64]);
    fn mul(self, o: Self) -> Self;
    /// `self * b + c`, rounded once.
    fn fma(self, b: Self, c: Self) -> Self;
    /// `self` with element `lane < W` replaced by `v`.
    fn with_lane(self, lane: usize, v: f64) -> Self;

    /// The weighted sums and differences of the two hemispheres for `W`
    /// rows (analysis): lane `i` of `((sre, sim), (dre, dim))` is `(a + b)
    /// w[i]` and `(a - b) w[i]` with `a = north[i]`, `b = south[W - 1 - i]`
    /// (the southern rows run the other way), as `Complex64` computes them;
    /// with `scale = Some((sn, ss))`, `a = north[i] * sn[i]` and `b =
    /// south[W - 1 - i] * ss[W - 1 - i]`.
    #[inline(always)]
    fn hemi(
        tk: Self::Token,
        north: &[Complex64],
        south: &[Complex64],
        w: &[f64],
        scale: Option<(&[f64], &[f64])>,
    ) -> ((Self, Self), (Self, Self)) {
        let mut t = [[0.0; 8]; 4];
        for i in 0..Self::W {
            let (mut a, mut b) = (north[i], south[Self::W - 1 - i]);
            if let Some((sn, ss)) = scale {
                (a, b) = (a * sn[i], b * ss[Self::W - 1 - i]);
            }
            let (sv, dv) = ((a + b) * w[i], (a - b) * w[i]);
            (t[0][i], t[1][i], t[2][i], t[3][i]) = (sv.re, sv.im, dv.re, dv.im);
        }
        (
            (Self::load(tk, &t[0]), Self::load(tk, &t[1])),
            (Self::load(tk, &t[2]), Self::load(tk, &t[3])),
        )
    }

    /// The sums of eight pair entries of analysis: `out[i] =
    /// (tree8(p[i][..PART]), tree8(p[i][PART..]))`.
    #[inline(always)]
    fn reduce8(_: Self::Token, p: &[Part], out: &mut [Complex64]) {
        for i in 0..8 {
            out[i] = Complex64::new(tree8(&p[i].0[..PART]), tree8(&p[i].0[PART..]));
        }
    }

    /// The two hemispheres of `W` rows (synthesis): `north[i] = e + d` and
    /// `south[W - 1 - i] = e - d` of lane `i`, as `Complex64` computes them;
    /// with `scale = Some((sn, ss))` times `sn[i]` and `ss[W - 1 - i]`.
    #[inline(always)]
    fn store_hemi(
        e: (Self, Self),
        d: (Self, Self),
        north: &mut [Complex64],
        south: &mut [Complex64],
        scale: Option<(&[f64], &[f64])>,
    ) {
        let mut t = [[0.0; 8]; 4];
        e.0.store(&mut t[0]);
        e.1.store(&mut t[1]);
        d.0.store(&mut t[2]);
        d.1.store(&mut t[3]);
        for i in 0..Self::W {
            let (e, d) = (
                Complex64::new(t[0][i], t[1][i]),
                Complex64::new(t[2][i], t[3][i]),
            );
            let (n, so) = (e + d, e - d);
            (north[i], south[Self::W - 1 - i]) = match scale {
                Some((sn, ss)) => (n * sn[i], so * ss[Self::W - 1 - i]),
                None => (n, so),
            };
        }
    }
}

/// One double (the portable kernels).
#[derive(Clone, Copy)]
struct S1(f64);

impl Vf for S1 {
    type Token = ();
    const W: usize = 1;
    #[inline(always)]
    fn token(self) {}
    #[inline(always)]
    fn splat(_: (), v: f64) -> Self {
        S1(v)
    }
    #[inline(always)]
    fn load(_: (), s: &[f64]) -> Self {
        S1(s[0])
    }
    #[inline(always)]
    fn store(self, s: &mut [f64]) {
        s[0] = self.0;
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        S1(self.0 * o.0)
    }
    #[inline(always)]
    fn fma(self, b: Self, c: Self) -> Self {
        S1(self.0.mul_add(b.0, c.0))
    }
    #[inline(always)]
    fn with_lane(self, _lane: usize, v: f64) -> Self {
        S1(v)
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Part, Vf, PART};
    use num_complex::Complex64;
    use simd::{Avx2Token, Avx512Token, F64x4, F64x8};
    use std::arch::x86_64::*;

    impl Vf for F64x4 {
        type Token = Avx2Token;
        const W: usize = 4;
        #[inline(always)]
        fn token(self) -> Avx2Token {
            F64x4::token(self)
        }
        #[inline(always)]
        fn splat(t: Avx2Token, v: f64) -> Self {
            F64x4::splat(t, v)
        }
        #[inline(always)]
        fn load(t: Avx2Token, s: &[f64]) -> Self {
            F64x4::load(t, s)
        }
        #[inline(always)]
        fn store(self, s: &mut [f64]) {
            F64x4::store(self, s)
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            self * o
        }
        #[inline(always)]
        fn fma(self, b: Self, c: Self) -> Self {
            F64x4::fma(self, b, c)
        }
        #[inline(always)]
        fn with_lane(self, lane: usize, v: f64) -> Self {
            F64x4::with_lane(self, lane, v)
        }
    }

    // The `unsafe` blocks of this impl issue AVX-512F instructions: the
    // token or the vectors prove the CPU has them.
    impl Vf for F64x8 {
        type Token = Avx512Token;
        const W: usize = 8;
        #[inline(always)]
        fn token(self) -> Avx512Token {
            F64x8::token(self)
        }
        #[inline(always)]
        fn splat(t: Avx512Token, v: f64) -> Self {
            F64x8::splat(t, v)
        }
        #[inline(always)]
        fn load(t: Avx512Token, s: &[f64]) -> Self {
            F64x8::load(t, s)
        }
        #[inline(always)]
        fn store(self, s: &mut [f64]) {
            F64x8::store(self, s)
        }
        #[inline(always)]
        fn mul(self, o: Self) -> Self {
            self * o
        }
        #[inline(always)]
        fn fma(self, b: Self, c: Self) -> Self {
            F64x8::fma(self, b, c)
        }
        #[inline(always)]
        fn with_lane(self, lane: usize, v: f64) -> Self {
            F64x8::with_lane(self, lane, v)
        }
        #[inline(always)]
        fn hemi(
            t: Avx512Token,
            north: &[Complex64],
            south: &[Complex64],
            w: &[f64],
            scale: Option<(&[f64], &[f64])>,
        ) -> ((Self, Self), (Self, Self)) {
            assert!(north.len() >= 8 && south.len() >= 8 && w.len() >= 8);
            // SAFETY: AVX-512F present (`t`); sixteen readable doubles in
            // each of `north` and `south` (eight `Complex64`), eight in `w`
            // (and in each scale, checked by `scales`).
            unsafe {
                use crate::fft::avx512::split8;
                // The southern rows run the other way.
                let (mut ar, mut ai) = split8(north.as_ptr() as *const f64, false);
                let (mut br, mut bi) = split8(south.as_ptr() as *const f64, true);
                if let Some(sc) = scale {
                    let (sn, ss) = scales(sc);
                    (ar, ai) = (_mm512_mul_pd(ar, sn), _mm512_mul_pd(ai, sn));
                    (br, bi) = (_mm512_mul_pd(br, ss), _mm512_mul_pd(bi, ss));
                }
                let wv = _mm512_loadu_pd(w.as_ptr());
                (
                    (
                        F64x8::from_raw(t, _mm512_mul_pd(_mm512_add_pd(ar, br), wv)),
                        F64x8::from_raw(t, _mm512_mul_pd(_mm512_add_pd(ai, bi), wv)),
                    ),
                    (
                        F64x8::from_raw(t, _mm512_mul_pd(_mm512_sub_pd(ar, br), wv)),
                        F64x8::from_raw(t, _mm512_mul_pd(_mm512_sub_pd(ai, bi), wv)),
                    ),
                )
            }
        }
        #[inline(always)]
        fn reduce8(_: Avx512Token, p: &[Part], out: &mut [Complex64]) {
            assert!(p.len() >= 8 && out.len() >= 8);
            // SAFETY: AVX-512F present (the token); `p` holds eight rows of sixteen
            // doubles, `out` sixteen writable doubles.
            unsafe {
                let mut re = [_mm512_setzero_pd(); 8];
                let mut im = [_mm512_setzero_pd(); 8];
                for i in 0..8 {
                    re[i] = _mm512_loadu_pd(p[i].0.as_ptr());
                    im[i] = _mm512_loadu_pd(p[i].0.as_ptr().add(PART));
                }
                let (sr, si) = (hsum8(&re), hsum8(&im));
                crate::fft::avx512::join8(sr, si, out.as_mut_ptr() as *mut f64, false);
            }
        }
        #[inline(always)]
        fn store_hemi(
            e: (Self, Self),
            d: (Self, Self),
            north: &mut [Complex64],
            south: &mut [Complex64],
            scale: Option<(&[f64], &[f64])>,
        ) {
            assert!(north.len() >= 8 && south.len() >= 8);
            // SAFETY: AVX-512F present (the vectors); sixteen writable
            // doubles in each of `north` and `south` (eight readable in each
            // scale, checked by `scales`).
            unsafe {
                let (mut sr, mut si) = (
                    _mm512_add_pd(e.0.raw(), d.0.raw()),
                    _mm512_add_pd(e.1.raw(), d.1.raw()),
                );
                let (mut dr, mut di) = (
                    _mm512_sub_pd(e.0.raw(), d.0.raw()),
                    _mm512_sub_pd(e.1.raw(), d.1.raw()),
                );
                if let Some(sc) = scale {
                    let (sn, ss) = scales(sc);
                    (sr, si) = (_mm512_mul_pd(sr, sn), _mm512_mul_pd(si, sn));
                    (dr, di) = (_mm512_mul_pd(dr, ss), _mm512_mul_pd(di, ss));
                }
                // The southern rows run the other way.
                use crate::fft::avx512::join8;
                join8(sr, si, north.as_mut_ptr() as *mut f64, false);
                join8(dr, di, south.as_mut_ptr() as *mut f64, true);
            }
        }
    }

    /// Lane `i`: [`super::tree8`] of `v[i]`'s eight lanes, the same
    /// additions in the same grouping: pairs of neighbours, then pairs of
    /// those, then the two halves.
    ///
    /// # Safety
    /// AVX-512F must be present.
    #[inline(always)]
    unsafe fn hsum8(v: &[__m512d; 8]) -> __m512d {
        // (Functions, not closures: a closure would not take the kernel's
        // target features, and the intrinsics would become calls.)
        /// Lanes (a elements 2j + 2j+1, b the same), j = 0..4.
        #[inline(always)]
        unsafe fn pair(a: __m512d, b: __m512d) -> __m512d {
            // SAFETY: AVX-512F by the contract of `hsum8`.
            unsafe { _mm512_add_pd(_mm512_unpacklo_pd(a, b), _mm512_unpackhi_pd(a, b)) }
        }
        /// 128-bit lanes 0 + 1 and 2 + 3 of `a`, then of `b`.
        #[inline(always)]
        unsafe fn quad(a: __m512d, b: __m512d) -> __m512d {
            // SAFETY: as in `pair`.
            unsafe {
                _mm512_add_pd(
                    _mm512_shuffle_f64x2::<0x88>(a, b),
                    _mm512_shuffle_f64x2::<0xdd>(a, b),
                )
            }
        }
        // SAFETY: AVX-512F by the contract.
        unsafe {
            let a = [
                pair(v[0], v[1]),
                pair(v[2], v[3]),
                pair(v[4], v[5]),
                pair(v[6], v[7]),
            ];
            // 128-bit lanes: (v[4k], v[4k+1]) first half, then second half,
            // then (v[4k+2], v[4k+3]) the same; then the halves added: lane
            // i the whole sum of v[i].
            quad(quad(a[0], a[1]), quad(a[2], a[3]))
        }
    }

    /// The row factors of eight lanes: `sn[i]` for lane `i` and, for the
    /// southern rows (which run the other way), `ss[7 - i]`.
    ///
    /// # Safety
    /// AVX-512F must be present.
    #[inline(always)]
    unsafe fn scales((sn, ss): (&[f64], &[f64])) -> (__m512d, __m512d) {
        assert!(sn.len() >= 8 && ss.len() >= 8);
        // SAFETY: eight readable doubles in each (checked); AVX-512F by the
        // contract.
        unsafe {
            let rev = _mm512_setr_epi64(7, 6, 5, 4, 3, 2, 1, 0);
            (
                _mm512_loadu_pd(sn.as_ptr()),
                _mm512_permutexvar_pd(rev, _mm512_loadu_pd(ss.as_ptr())),
            )
        }
    }
}

/// Latitudes per block at most (AVX-512, one field: four vectors of eight).
const LMAX_LANES: usize = 32;

/// Legendre synthesis for one order: for each of the `nf` fields,
/// `out[f * nt + j] = sum_{i} c[f * nd + i] Pbar_{m+i,m}(x_j)` over the
/// `nd = o.nd` degrees (by the pair recurrence, [`ZForm`]), both
/// hemispheres (parity), times
/// `o.row_scale[j]` if given. `out` is the two slices `out[0]` and
/// `out[1]` one after the other: whole fields of `nt` rows each, `nf` in all.
pub(crate) fn synth(
    simd: Isa,
    o: &Order<'_>,
    nf: usize,
    c: &[Complex64],
    out: [&mut [Complex64]; 2],
) {
    match simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::detect` found AVX-512F and FMA on this CPU.
        Isa::Avx512 => unsafe { synth_avx512(o, nf, c, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::detect` found AVX2 and FMA on this CPU.
        Isa::Avx2 => unsafe { synth_avx2(o, nf, c, out) },
        _ => synth_impl::<S1, 8, 8>((), o, nf, c, out),
    }
}

/// Legendre analysis for one order: for each of the `nf` fields,
/// `out[f * nd + i] = sum_j 2 pi w_j F[f * nt + j] Pbar_{m+i,m}(x_j)`,
/// `F[f * nt + j]` times `o.row_scale[j]` if given. `input` is the two
/// slices one after the other (as `out` of [`synth`]).
pub(crate) fn anal(
    simd: Isa,
    o: &Order<'_>,
    nf: usize,
    input: [&[Complex64]; 2],
    out: &mut [Complex64],
) {
    match simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::detect` found AVX-512F and FMA on this CPU.
        Isa::Avx512 => unsafe { anal_avx512(o, nf, input, out) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::detect` found AVX2 and FMA on this CPU.
        Isa::Avx2 => unsafe { anal_avx2(o, nf, input, out) },
        _ => anal_impl::<S1, 8, 8>((), o, nf, input, out),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn synth_avx512(o: &Order<'_>, nf: usize, c: &[Complex64], out: [&mut [Complex64]; 2]) {
    // SAFETY: AVX-512F, AVX2 and FMA are present (this function's
    // contract, which `synth` keeps through `Isa::detect`).
    let t = unsafe { simd::Avx512Token::new_unchecked() };
    synth_impl::<simd::F64x8, 4, 2>(t, o, nf, c, out)
}
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn synth_avx2(o: &Order<'_>, nf: usize, c: &[Complex64], out: [&mut [Complex64]; 2]) {
    // SAFETY: AVX2 and FMA are present (as above).
    let t = unsafe { simd::Avx2Token::new_unchecked() };
    synth_impl::<simd::F64x4, 2, 2>(t, o, nf, c, out)
}
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn anal_avx512(o: &Order<'_>, nf: usize, input: [&[Complex64]; 2], out: &mut [Complex64]) {
    // SAFETY: as in `synth_avx512`.
    let t = unsafe { simd::Avx512Token::new_unchecked() };
    anal_impl::<simd::F64x8, 4, 3>(t, o, nf, input, out)
}
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn anal_avx2(o: &Order<'_>, nf: usize, input: [&[Complex64]; 2], out: &mut [Complex64]) {
    // SAFETY: as in `synth_avx2`.
    let t = unsafe { simd::Avx2Token::new_unchecked() };
    // 16 lanes a block: two multiply-adds a load and store of the partial
    // sums (see `Isa`).
    anal_impl::<simd::F64x4, 4, 4>(t, o, nf, input, out)
}

/// A block of `lanes` northern latitudes (see [`first_base`]). One is
/// kept per kernel call and refilled for each block ([`Block::fill`]), so
/// that no block builds or copies the whole struct.
struct Block {
    /// The row of lane 0 (negative for the block nearest the pole when the
    /// lanes reach past it).
    base: isize,
    /// The lanes `q0..q1` hold rows `0..nn`; the others are empty.
    q0: usize,
    q1: usize,
    /// Nodes (zero in the empty lanes).
    x: [f64; LMAX_LANES],
    /// The lanes with a non-negligible value up to the last pair,
    /// sorted by the pair index of their start: `(i, lane)`.
    ev: [(u32, u32); LMAX_LANES],
    /// How many lanes are in `ev` (in a block whose lanes all start at one
    /// pair, `ev` is not written: only the entries from `ne0` on are
    /// read).
    ne: usize,
    /// How many of them start at the first pair `i0`.
    ne0: usize,
    /// The first pair index at which a lane starts.
    i0: usize,
    /// The lowest lane that starts at `i0`.
    qmin: usize,
    /// `z_{i0-1}` of the lanes that start at `i0`, zero in the others.
    p0: [f64; LMAX_LANES],
    /// `z_{i0}` likewise.
    p1: [f64; LMAX_LANES],
}

impl Block {
    const EMPTY: Block = Block {
        base: 0,
        q0: 0,
        q1: 0,
        x: [0.0; LMAX_LANES],
        ev: [(0, 0); LMAX_LANES],
        ne: 0,
        ne0: 0,
        i0: 0,
        qmin: 0,
        p0: [0.0; LMAX_LANES],
        p1: [0.0; LMAX_LANES],
    };

    /// The block whose lane 0 is row `base` (`lanes` lanes): `x`, `p0`,
    /// `p1` and the first `ne` of `ev` are set, as a fresh block would have
    /// them; lanes outside rows `0..nn` stay empty (never started).
    #[inline(always)]
    fn fill(&mut self, o: &Order<'_>, base: isize, lanes: usize) {
        let n = o.kmax();
        let nn = o.nn() as isize;
        let q0 = (-base).max(0) as usize;
        let q1 = (nn - base).min(lanes as isize) as usize;
        let (r0, nq) = ((base + q0 as isize) as usize, q1 - q0);
        (self.base, self.q0, self.q1) = (base, q0, q1);
        // All LMAX_LANES lanes from the padded arrays (a copy of a fixed
        // size, no call): zeros outside rows 0..nn.
        let at = (PAD as isize + base) as usize;
        let lanes_at = |v: &[f64]| -> [f64; LMAX_LANES] {
            match v[at..at + LMAX_LANES].try_into() {
                Ok(a) => a,
                Err(_) => unreachable!("a slice of LMAX_LANES"),
            }
        };
        self.x = lanes_at(o.xpad);
        self.ne = 0;
        self.ne0 = 0;
        let si = &o.start.i[r0..r0 + nq];
        let i0 = si[0];
        if i0 as usize <= n && o.start.run[r0 + nq - 1] as usize <= r0 {
            // Every lane starts at the same pair (most blocks): no
            // sorting, no events, and the start values as they are.
            self.p0 = lanes_at(o.start.p0);
            self.p1 = lanes_at(o.start.p1);
            (self.ne, self.ne0, self.i0, self.qmin) = (nq, nq, i0 as usize, q0);
            return;
        }
        self.p0 = [0.0; LMAX_LANES];
        self.p1 = [0.0; LMAX_LANES];
        // From the equator side: the starts do not decrease towards the
        // pole, so that the insertion appends. (The order of the lanes of
        // one pair does not matter: they join together.)
        for (k, &i) in si.iter().enumerate().rev() {
            let q = q0 + k;
            if i as usize <= n {
                // Insertion by pair index.
                let mut k = self.ne;
                while k > 0 && self.ev[k - 1].0 > i {
                    self.ev[k] = self.ev[k - 1];
                    k -= 1;
                }
                self.ev[k] = (i, q as u32);
                self.ne += 1;
            }
        }
        if self.ne > 0 {
            let i0 = self.ev[0].0;
            self.qmin = usize::MAX;
            while self.ne0 < self.ne && self.ev[self.ne0].0 == i0 {
                let q = self.ev[self.ne0].1 as usize;
                let st = o.start_values(self.row(q));
                self.p0[q] = st[0];
                self.p1[q] = st[1];
                self.qmin = self.qmin.min(q);
                self.ne0 += 1;
            }
            self.i0 = i0 as usize;
        }
    }

    /// The row of lane `q` (a lane in `q0..q1`).
    #[inline(always)]
    fn row(&self, q: usize) -> usize {
        (self.base + q as isize) as usize
    }

    /// Entry `e` of the sorted starts as `(pair index, lane)`.
    #[inline(always)]
    fn event(&self, e: usize) -> (usize, usize) {
        let (i, q) = self.ev[e];
        (i as usize, q as usize)
    }
}

/// Asks for the cache lines of `s` (a hint: nothing is read, nothing can
/// fault). The kernels ask for the next block's starts and data one block
/// ahead, and for a block's output rows before computing it: those rows
/// and starts lie a whole column of an order apart from the ones just
/// used, too far apart for the hardware prefetchers, and a miss there
/// stalled the kernels for a fifth of their time at lmax 511.
#[inline(always)]
pub(crate) fn prefetch<T>(s: &[T]) {
    let (p, bytes) = (s.as_ptr().cast::<u8>(), std::mem::size_of_val(s));
    let mut off = 0;
    while off < bytes {
        simd::prefetch_read(p.wrapping_add(off));
        off += 64;
    }
    if bytes > 0 {
        // The last line, whatever the alignment of the first.
        simd::prefetch_read(p.wrapping_add(bytes - 1));
    }
}

/// The rows of the block whose lane 0 is row `base`, `lanes` northern
/// latitudes clipped to the `nn` northern rows, of one field `v` (all its
/// rows): the northern range and its southern mirror.
#[inline(always)]
fn prefetch_rows<T>(v: &[T], nn: usize, base: isize, lanes: usize) {
    let (lo, hi) = rows_of(base, lanes, nn);
    let nt = v.len();
    prefetch(&v[lo..hi]);
    prefetch(&v[nt - hi..nt - lo]);
}

/// The starts of the block at `base` (see [`prefetch_rows`]).
#[inline(always)]
fn prefetch_starts(o: &Order<'_>, base: isize, lanes: usize) {
    let (lo, hi) = rows_of(base, lanes, o.nn());
    prefetch(&o.start.i[lo..hi]);
    prefetch(&o.start.p0[PAD + lo..PAD + hi]);
    prefetch(&o.start.p1[PAD + lo..PAD + hi]);
    prefetch(&o.start.run[hi.saturating_sub(1).max(lo)..hi]);
}

/// The rows `0..nn` among `base..base + lanes` (an empty range if none).
#[inline(always)]
fn rows_of(base: isize, lanes: usize, nn: usize) -> (usize, usize) {
    let hi = (base + lanes as isize).clamp(0, nn as isize) as usize;
    let lo = base.clamp(0, hi as isize) as usize;
    (lo, hi)
}

/// The row of lane 0 of the first block (the one at the equator): blocks
/// of `lanes` rows end at the first multiple of [`PART`] at or past the
/// `nn` northern rows, so that at most `PART - 1` lanes of that block are
/// empty, and the empty lanes of the block at the pole are whole vectors
/// below the first started lane, which the pair loops skip. (Blocks that
/// start at row 0 would leave up to `lanes - PART` empty lanes at the
/// equator, where every lane runs.) Lane `q` holds row `base + q` with
/// `base` a multiple of `PART`, so a row's partial sum in analysis is the
/// same for every block width.
#[inline(always)]
fn first_base(nn: usize, lanes: usize) -> isize {
    nn.next_multiple_of(PART) as isize - lanes as isize
}

/// Loads `NV` vectors from `s` (`NV * W` values).
#[inline(always)]
fn load_lanes<V: Vf, const NV: usize>(t: V::Token, s: &[f64]) -> [V; NV] {
    // A loop, not `array::from_fn`: a closure does not take the target
    // features of the kernel around it, and its vector loads were left
    // as calls.
    let mut v = [V::splat(t, 0.0); NV];
    for (k, vk) in v.iter_mut().enumerate() {
        *vk = V::load(t, &s[k * V::W..]);
    }
    v
}

/// `x * x`, vector by vector (the `y` of the pair recurrence).
#[inline(always)]
fn squared<V: Vf, const NV: usize>(x: &[V; NV]) -> [V; NV] {
    let mut v = *x;
    for vk in v.iter_mut() {
        *vk = vk.mul(*vk);
    }
    v
}

/// Whether lanes `qa..qb` (one vector) all hold rows of the block and
/// none of them is the equator row of an odd `nt` (whose mirror is itself):
/// then rows `row(qa)..row(qb)` and their mirrors `nt - row(qb)..nt -
/// row(qa)` are two separate runs.
#[inline(always)]
fn whole_vector(blk: &Block, qa: usize, qb: usize, nt: usize) -> bool {
    qa >= blk.q0 && qb <= blk.q1 && 2 * blk.row(qb - 1) + 1 < nt
}

/// Stores `NV` vectors to an array of lanes.
#[inline(always)]
fn store_lanes<V: Vf, const NV: usize>(v: &[V; NV]) -> [f64; LMAX_LANES] {
    let mut s = [0.0; LMAX_LANES];
    for k in 0..NV {
        v[k].store(&mut s[k * V::W..]);
    }
    s
}

/// Lane `q` of `p` set to `val` (a blend; constant indices into `p` only,
/// so that it stays in registers).
#[inline(always)]
fn set_lane<V: Vf, const NV: usize>(p: &mut [V; NV], q: usize, val: f64) {
    for (k, pk) in p.iter_mut().enumerate() {
        if k == q / V::W {
            *pk = pk.with_lane(q % V::W, val);
        }
    }
}

/// Advances the lanes one pair: `p0 <- (A y + B) p1 + p0` (the caller
/// swaps the roles of the two arrays every other pair; see [`ZForm`]);
/// vectors below `K` are left alone (all their lanes are zero and stay
/// zero).
#[inline(always)]
fn step_lanes<V: Vf, const NV: usize, const K: usize>(
    ab: [f64; 2],
    y: &[V; NV],
    p1: &[V; NV],
    p0: &mut [V; NV],
) {
    let t = y[0].token();
    let (a, b) = (V::splat(t, ab[0]), V::splat(t, ab[1]));
    for k in K..NV {
        p0[k] = a.fma(y[k], b).fma(p1[k], p0[k]);
    }
}

/// The first vector of a block holding a started lane, `qmin` the lowest
/// started lane (at most 3 and `NV - 1`: the pair loops come in four
/// variants).
#[inline(always)]
fn first_active<V: Vf, const NV: usize>(qmin: usize) -> usize {
    (qmin / V::W).min(NV - 1).min(3)
}

/// The loop over pair indices between two starts of a block.
struct Pairs<'a, C> {
    /// Synthesis: the pair coefficients (`a_k`, `b_k` at `2k`, `2k + 1`).
    c: C,
    /// Pair coefficients a field (`2 (kmax + 1)`).
    nv: usize,
    ab: &'a [[f64; 2]],
    /// The loop ends before `k + 2 > stop`.
    stop: usize,
}

impl Pairs<'_, &[Complex64]> {
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn synth<V: Vf, const NV: usize, const G: usize, const K: usize>(
        &self,
        i: &mut usize,
        y: &[V; NV],
        p0: &mut [V; NV],
        p1: &mut [V; NV],
        e: &mut [[[V; NV]; 2]; G],
        o: &mut [[[V; NV]; 2]; G],
    ) {
        let (c, nv, ab) = (self.c, self.nv, self.ab);
        while *i + 2 <= self.stop {
            let j = *i;
            accumulate::<V, NV, G, K>(e, o, c, nv, j, p1);
            step_lanes::<V, NV, K>(ab[j], y, p1, p0);
            accumulate::<V, NV, G, K>(e, o, c, nv, j + 1, p0);
            step_lanes::<V, NV, K>(ab[j + 1], y, p0, p1);
            *i += 2;
        }
    }
}

impl Pairs<'_, ()> {
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn anal<V: Vf, const NV: usize, const G: usize, const K: usize, const FIRST: bool>(
        &self,
        i: &mut usize,
        y: &[V; NV],
        p0: &mut [V; NV],
        p1: &mut [V; NV],
        part: &mut [Part],
        se: &[[[V; NV]; 2]; G],
        so: &[[[V; NV]; 2]; G],
    ) {
        let (nv, ab) = (self.nv, self.ab);
        // `FIRST` a constant, so that the loop has no test on it.
        while *i + 2 <= self.stop {
            let j = *i;
            deposit::<V, NV, G, K>(part, se, so, nv, j, p1, FIRST);
            step_lanes::<V, NV, K>(ab[j], y, p1, p0);
            deposit::<V, NV, G, K>(part, se, so, nv, j + 1, p0, FIRST);
            step_lanes::<V, NV, K>(ab[j + 1], y, p0, p1);
            *i += 2;
        }
    }
}

/// `NV` vectors per block for one field at a time, `NV2` for pairs (fewer,
/// so that the accumulators of two fields stay in registers); the results
/// do not depend on the block width.
#[inline(always)]
fn synth_impl<V: Vf, const NV: usize, const NV2: usize>(
    t: V::Token,
    o: &Order<'_>,
    nf: usize,
    c: &[Complex64],
    out: [&mut [Complex64]; 2],
) {
    let (nd, nt) = (o.nd, o.nt);
    let kmax = o.kmax();
    let nv = 2 * (kmax + 1);
    // The pair coefficients `a_k = u_k c_{2k} + v_k c_{2k+2}`, `b_k = s_k
    // c_{2k+1}` (degree indices; zero from `nd` on), in a buffer kept per
    // thread between calls.
    let mut pc = SCALED.with(|p| std::mem::take(&mut *p.borrow_mut()));
    // Every value of the first `nf * nv` is written below.
    if pc.len() < nf * nv {
        pc.resize(nf * nv, Complex64::new(0.0, 0.0));
    }
    let (u, v, s) = o.factors();
    for (dst, src) in pc[..nf * nv].chunks_exact_mut(nv).zip(c.chunks_exact(nd)) {
        // Pairs `k < kmax` read degrees `2k..=2k + 2`, all below `nd`
        // (`kmax = (nd - 1) / 2`): a loop without index checks. The last
        // pair reads past `nd`, where the coefficients are zero.
        let pairs = dst.chunks_exact_mut(2).zip(src.windows(3).step_by(2));
        for ((d, w), ((u, v), s)) in pairs.zip(u.iter().zip(v).zip(s)) {
            d[0] = w[0] * *u + w[2] * *v;
            d[1] = w[1] * *s;
        }
        let at = |i: usize| src.get(i).copied().unwrap_or_default();
        let k = kmax;
        dst[2 * k] = at(2 * k) * u[k] + at(2 * k + 2) * v[k];
        dst[2 * k + 1] = at(2 * k + 1) * s[k];
    }
    let [o0, o1] = out;
    assert_eq!(o0.len() + o1.len(), nf * nt, "whole fields");
    let rows = o0.chunks_exact_mut(nt).chain(o1.chunks_exact_mut(nt));
    for (k, grp) in in_pairs(rows).enumerate() {
        let cg = &pc[2 * k * nv..(2 * k + grp.len()) * nv];
        match grp {
            Group::Two(r) => synth_group::<V, NV2, 2>(t, o, cg, r),
            Group::One(r) => synth_group::<V, NV, 1>(t, o, cg, r),
        }
    }
    SCALED.with(|p| *p.borrow_mut() = pc);
}

/// The fields of a kernel call in the groups the kernels take: pairs (one
/// recurrence for both), the last one alone when their number is odd.
enum Group<T> {
    One([T; 1]),
    Two([T; 2]),
}

impl<T> Group<T> {
    fn len(&self) -> usize {
        match self {
            Group::One(_) => 1,
            Group::Two(_) => 2,
        }
    }
}

/// `rows` (one item per field) in [`Group`]s.
#[inline(always)]
fn in_pairs<T>(mut rows: impl Iterator<Item = T>) -> impl Iterator<Item = Group<T>> {
    std::iter::from_fn(move || {
        let a = rows.next()?;
        Some(match rows.next() {
            Some(b) => Group::Two([a, b]),
            None => Group::One([a]),
        })
    })
}

thread_local! {
    /// The scaled coefficients of synthesis, kept between calls on this thread.
    static SCALED: std::cell::RefCell<Vec<Complex64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Accumulates `e[g] += c[g][2k] * p` and `o[g] += c[g][2k + 1] * p`
/// (real and imaginary parts) for the `G` fields, vectors `K..NV` (the
/// others hold zeros: adding their products, exact zeros, to sums that
/// start at +0 changes no bit).
#[inline(always)]
fn accumulate<V: Vf, const NV: usize, const G: usize, const K: usize>(
    e: &mut [[[V; NV]; 2]; G],
    o: &mut [[[V; NV]; 2]; G],
    c: &[Complex64],
    nv: usize,
    k: usize,
    p: &[V; NV],
) {
    let t = p[0].token();
    for g in 0..G {
        let (ce, co) = (c[g * nv + 2 * k], c[g * nv + 2 * k + 1]);
        let (er, ei) = (V::splat(t, ce.re), V::splat(t, ce.im));
        let (or, oi) = (V::splat(t, co.re), V::splat(t, co.im));
        for q in K..NV {
            e[g][0][q] = er.fma(p[q], e[g][0][q]);
            e[g][1][q] = ei.fma(p[q], e[g][1][q]);
            o[g][0][q] = or.fma(p[q], o[g][0][q]);
            o[g][1][q] = oi.fma(p[q], o[g][1][q]);
        }
    }
}

/// Synthesis of `G` fields (`c`: `G` fields of pair coefficients, see
/// [`ZForm`]; `out`: `G` fields of `nt` rows) over blocks of `NV * W`
/// northern latitudes, from the equator to the pole; the recurrence is
/// shared by the `G` fields. Every lane sees the same operations whatever
/// the block width and `G` (the results do not depend on them).
#[inline(always)]
fn synth_group<V: Vf, const NV: usize, const G: usize>(
    t: V::Token,
    o: &Order<'_>,
    c: &[Complex64],
    mut out: [&mut [Complex64]; G],
) {
    let lanes = NV * V::W;
    let (nn, nt) = (o.nn(), o.nt);
    let n = o.kmax();
    let ab = &o.z.ab[..n];
    let nv = 2 * (n + 1);
    // The blocks write rows `done..nt - done`; the others are zero.
    let mut done = nn;
    let mut blk = Block::EMPTY;
    let mut base = first_base(nn, lanes);
    while base + (lanes as isize) > 0 {
        blk.fill(o, base, lanes);
        for og in out.iter() {
            prefetch_rows(og, nn, base, lanes);
        }
        prefetch_starts(o, base - lanes as isize, lanes);
        let (ev, ne) = (|e: usize| blk.event(e), blk.ne);
        // Once a whole block is negligible, so are all blocks nearer the
        // pole (smaller sin^m theta): they stay zero.
        if ne == 0 {
            break;
        }
        done = base.max(0) as usize;
        let x = load_lanes::<V, NV>(t, &blk.x);
        let y = squared(&x);
        // All lanes together from the first start, two pairs per turn (so
        // that the roles of `p0` and `p1` alternate without moves); a lane
        // joins at its own start (before, its values are zero and add exact
        // zeros). `ea` sums the even degrees, `oa` the odd ones over `x`.
        let zero = [V::splat(t, 0.0); NV];
        let mut ea = [[zero; 2]; G];
        let mut oa = [[zero; 2]; G];
        let mut p0 = load_lanes::<V, NV>(t, &blk.p0);
        let mut p1 = load_lanes::<V, NV>(t, &blk.p1);
        let mut i = blk.i0;
        let mut e = blk.ne0;
        let mut qmin = blk.qmin;
        loop {
            while e < ne && ev(e).0 == i {
                let st = o.start_values(blk.row(ev(e).1));
                set_lane(&mut p0, ev(e).1, st[0]);
                set_lane(&mut p1, ev(e).1, st[1]);
                qmin = qmin.min(ev(e).1);
                e += 1;
            }
            accumulate::<V, NV, G, 0>(&mut ea, &mut oa, c, nv, i, &p1);
            if i == n {
                break;
            }
            step_lanes::<V, NV, 0>(ab[i], &y, &p1, &mut p0);
            i += 1;
            while e < ne && ev(e).0 == i {
                let st = o.start_values(blk.row(ev(e).1));
                set_lane(&mut p1, ev(e).1, st[0]);
                set_lane(&mut p0, ev(e).1, st[1]);
                qmin = qmin.min(ev(e).1);
                e += 1;
            }
            accumulate::<V, NV, G, 0>(&mut ea, &mut oa, c, nv, i, &p0);
            if i == n {
                break;
            }
            step_lanes::<V, NV, 0>(ab[i], &y, &p0, &mut p1);
            i += 1;
            // Pairs before the next start and the last pair: the same
            // operations without the checks, on the vectors holding a
            // started lane only.
            let stop = if e < ne { ev(e).0.min(n) } else { n };
            let pairs = Pairs { c, nv, ab, stop };
            let (i, y, p0, p1, ea, oa) = (&mut i, &y, &mut p0, &mut p1, &mut ea, &mut oa);
            match first_active::<V, NV>(qmin) {
                0 => pairs.synth::<V, NV, G, 0>(i, y, p0, p1, ea, oa),
                1 => pairs.synth::<V, NV, G, 1>(i, y, p0, p1, ea, oa),
                2 => pairs.synth::<V, NV, G, 2>(i, y, p0, p1, ea, oa),
                _ => pairs.synth::<V, NV, G, 3>(i, y, p0, p1, ea, oa),
            }
        }
        // The odd degrees are `x` times their sum.
        let even = ea;
        let mut odd = oa;
        for og in odd.iter_mut() {
            for part in og.iter_mut() {
                for (v, xv) in part.iter_mut().zip(&x) {
                    *v = v.mul(*xv);
                }
            }
        }
        for (g, og) in out.iter_mut().enumerate() {
            let og = &mut **og;
            let mut lanes_of: Option<[[f64; LMAX_LANES]; 4]> = None;
            for k in 0..NV {
                let (qa, qb) = (k * V::W, (k + 1) * V::W);
                if qb <= blk.q0 || qa >= blk.q1 {
                    continue; // no row of the block
                }
                if whole_vector(&blk, qa, qb, nt) {
                    // Rows j0.. north and their mirror rows south, apart.
                    let j0 = blk.row(qa);
                    let js = nt - j0 - V::W;
                    let (north, south) = og.split_at_mut(js);
                    V::store_hemi(
                        (even[g][0][k], even[g][1][k]),
                        (odd[g][0][k], odd[g][1][k]),
                        &mut north[j0..j0 + V::W],
                        &mut south[..V::W],
                        o.row_scale.map(|s| (&s[j0..j0 + V::W], &s[js..js + V::W])),
                    );
                    continue;
                }
                // (No closure: it would not take the kernel's target
                // features, and the vector stores would become calls.)
                if lanes_of.is_none() {
                    lanes_of = Some([
                        store_lanes(&even[g][0]),
                        store_lanes(&even[g][1]),
                        store_lanes(&odd[g][0]),
                        store_lanes(&odd[g][1]),
                    ]);
                }
                let Some(l) = &lanes_of else {
                    unreachable!("set just above")
                };
                for q in qa.max(blk.q0)..qb.min(blk.q1) {
                    let j = blk.row(q);
                    let js = nt - 1 - j;
                    let e = Complex64::new(l[0][q], l[1][q]);
                    let d = Complex64::new(l[2][q], l[3][q]);
                    og[j] = match o.row_scale {
                        Some(s) => (e + d) * s[j],
                        None => e + d,
                    };
                    if js != j {
                        og[js] = match o.row_scale {
                            Some(s) => (e - d) * s[js],
                            None => e - d,
                        };
                    }
                }
            }
        }
        base -= lanes as isize;
    }
    // The rows nearer the poles than the first negligible block (zero,
    // scaled or not).
    for o in out.iter_mut() {
        o[..done]
            .iter_mut()
            .for_each(|v| *v = Complex64::new(0.0, 0.0));
        o[nt - done..]
            .iter_mut()
            .for_each(|v| *v = Complex64::new(0.0, 0.0));
    }
}

/// The most bytes of partial sums for which analysis takes two fields in
/// one sweep over the blocks (one recurrence for both); above it, each
/// field in its own sweep. At lmax 255 one sweep over two fields keeps
/// 64 KiB of sums in use, more than the L1 data cache, and ran slower than
/// two sweeps that each recompute the recurrence.
const PAIR_SUMS_BYTES: usize = 32 << 10;

/// `NV` and `NV2` as in [`synth_impl`].
#[inline(always)]
fn anal_impl<V: Vf, const NV: usize, const NV2: usize>(
    t: V::Token,
    o: &Order<'_>,
    nf: usize,
    input: [&[Complex64]; 2],
    out: &mut [Complex64],
) {
    let (nd, nt) = (o.nd, o.nt);
    let kmax = o.kmax();
    let nv = 2 * (kmax + 1);
    let (u, v, s) = o.factors();
    // Per-lane partial sums, index (field * nv + 2k or 2k + 1, the even and
    // the odd sums of pair k): PART real parts, then PART imaginary parts;
    // kept per thread between calls, as the pair sums.
    let mut part = PARTS.with(|p| std::mem::take(&mut *p.borrow_mut()));
    part.resize(2 * nv, Part([0.0; 2 * PART]));
    let mut sums = SUMS.with(|p| std::mem::take(&mut *p.borrow_mut()));
    sums.resize(nv, Complex64::new(0.0, 0.0));
    let [i0, i1] = input;
    assert_eq!(i0.len() + i1.len(), nf * nt, "whole fields");
    let rows = i0.chunks_exact(nt).chain(i1.chunks_exact(nt));
    for (k, grp) in in_pairs(rows).enumerate() {
        let (f, g) = (2 * k, grp.len());
        match grp {
            Group::Two([r0, r1]) if 2 * nv * size_of::<Part>() > PAIR_SUMS_BYTES => {
                anal_group::<V, NV, 1>(t, o, [r0], &mut part);
                anal_group::<V, NV, 1>(t, o, [r1], &mut part[nv..]);
            }
            Group::Two(r) => anal_group::<V, NV2, 2>(t, o, r, &mut part),
            Group::One(r) => anal_group::<V, NV, 1>(t, o, r, &mut part),
        }
        // The partial sums of each pair added up, eight at a time, field by
        // field; then the degrees: `c_{2k} = u_k E_k + v_{k-1} E_{k-1}`,
        // `c_{2k+1} = s_k O_k` (see [`ZForm`]).
        for gi in 0..g {
            let p = &part[gi * nv..(gi + 1) * nv];
            let mut q = 0;
            while q + 8 <= nv {
                V::reduce8(t, &p[q..q + 8], &mut sums[q..q + 8]);
                q += 8;
            }
            for (q, p) in p.iter().enumerate().skip(q) {
                sums[q] = Complex64::new(tree8(&p.0[..PART]), tree8(&p.0[PART..]));
            }
            let of = &mut out[(f + gi) * nd..(f + gi + 1) * nd];
            // Degree 0 of the order, then pairs `(2k, 2k + 1)` for `k >= 1`
            // reading the even sums `2k - 2` and `2k` (one loop without
            // index checks), and an odd last degree alone.
            of[0] = sums[0] * u[0];
            if nd > 1 {
                of[1] = sums[1] * s[0];
            }
            let tail = of.len() % 2;
            let (body, last) = of.split_at_mut(nd - tail);
            let sums_k = sums.chunks_exact(2).zip(sums[2..].chunks_exact(2));
            let factors = u[1..].iter().zip(v).zip(&s[1..]);
            for ((c, (prev, cur)), ((u, v), s)) in
                body.chunks_exact_mut(2).skip(1).zip(sums_k).zip(factors)
            {
                c[0] = cur[0] * *u + prev[0] * *v;
                c[1] = cur[1] * *s;
            }
            if tail == 1 && nd > 1 {
                let i = nd - 1;
                let k = i / 2;
                last[0] = sums[i] * u[k] + sums[i - 2] * v[k - 1];
            }
        }
    }
    PARTS.with(|p| *p.borrow_mut() = part);
    SUMS.with(|p| *p.borrow_mut() = sums);
}

thread_local! {
    /// The pair sums of analysis, kept between calls on this thread.
    static SUMS: std::cell::RefCell<Vec<Complex64>> = const { std::cell::RefCell::new(Vec::new()) };
}

thread_local! {
    /// The partial sums of analysis, kept between calls on this thread.
    static PARTS: std::cell::RefCell<Vec<Part>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Adds `se * p` of the lanes to the `PART` partial sums of the even sum
/// of pair `k` (`part[g * nv + 2k]`) and `so * p` to those of its odd sum
/// (`part[g * nv + 2k + 1]`), to zero instead when `first`: lane `r +
/// PART h` of the block into partial `r`, highest `h` first (the order
/// that blocks of `PART` lanes, going from the equator, would give);
/// vectors below `K` hold zeros and are skipped (adding exact zeros to sums
/// that start at +0 changes no bit).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn deposit<V: Vf, const NV: usize, const G: usize, const K: usize>(
    part: &mut [Part],
    se: &[[[V; NV]; 2]; G],
    so: &[[[V; NV]; 2]; G],
    nv: usize,
    k: usize,
    p: &[V; NV],
    first: bool,
) {
    let t = p[0].token();
    let pw = PART / V::W; // vectors per partial-sum group
    for g in 0..G {
        for (par, sd) in [se, so].into_iter().enumerate() {
            let d = &mut part[g * nv + 2 * k + par];
            for c in 0..2 {
                for q in 0..pw {
                    let s = &mut d.0[c * PART + q * V::W..];
                    // The first block to reach a pair starts its sums from
                    // zero in a register (the same bits as from zeros in
                    // memory, which then need not be written first).
                    let mut v = if first {
                        V::splat(t, 0.0)
                    } else {
                        V::load(t, s)
                    };
                    for h in (0..NV / pw).rev() {
                        if h * pw + q >= K {
                            v = sd[g][c][h * pw + q].fma(p[h * pw + q], v);
                        }
                    }
                    v.store(s);
                }
            }
        }
    }
}

/// Analysis of `G` fields (`input`: `G` fields of `nt` rows) into the partial sums
/// `part[g * nv + 2k]` (even) and `part[g * nv + 2k + 1]` (odd) of the
/// pairs `k` (see [`ZForm`]), over blocks of `NV * W` northern latitudes from the
/// equator to the pole. The partial sum `r` receives the rows
/// `j = r mod PART` in decreasing `j`, whatever the block width.
#[inline(always)]
fn anal_group<V: Vf, const NV: usize, const G: usize>(
    t: V::Token,
    o: &Order<'_>,
    input: [&[Complex64]; G],
    part: &mut [Part],
) {
    let lanes = NV * V::W;
    let (nn, nt) = (o.nn(), o.nt);
    let n = o.kmax();
    let ab = &o.z.ab[..n];
    let nv = 2 * (n + 1);
    let mut blk = Block::EMPTY;
    let mut base = first_base(nn, lanes);
    // The first block (at the equator) starts every pair from its first
    // start on; the pairs below it, and all of them when no block has a
    // lane, are zero (the partial sums are not cleared beforehand).
    let mut first = true;
    while base + (lanes as isize) > 0 {
        blk.fill(o, base, lanes);
        let (ev, ne) = (|e: usize| blk.event(e), blk.ne);
        if ne == 0 {
            break;
        }
        if first {
            for g in 0..G {
                part[g * nv..g * nv + 2 * blk.i0].fill(Part([0.0; 2 * PART]));
            }
        }
        let next = base - lanes as isize;
        for ig in input {
            prefetch_rows(ig, nn, next, lanes);
        }
        prefetch_starts(o, next, lanes);
        let x = load_lanes::<V, NV>(t, &blk.x);
        let y = squared(&x);
        let i0 = blk.i0;
        // Weighted sums (even i) and differences (odd i) of the two
        // hemispheres, [parity][field][re, im][vector]: whole vectors of
        // rows at once, the others (partial, or holding the equator row)
        // lane by lane.
        let mut hv = [[[[V::splat(t, 0.0); NV]; 2]; G]; 2];
        for k in 0..NV {
            let (qa, qb) = (k * V::W, (k + 1) * V::W);
            if qb <= blk.q0 || qa >= blk.q1 {
                continue; // no row of the block: zeros
            }
            if whole_vector(&blk, qa, qb, nt) {
                let j0 = blk.row(qa);
                let js = nt - j0 - V::W;
                for (g, ig) in input.iter().enumerate() {
                    let (sv, dv) = V::hemi(
                        t,
                        &ig[j0..j0 + V::W],
                        &ig[js..js + V::W],
                        &o.w2pi[j0..j0 + V::W],
                        o.row_scale.map(|s| (&s[j0..j0 + V::W], &s[js..js + V::W])),
                    );
                    (hv[0][g][0][k], hv[0][g][1][k]) = sv;
                    (hv[1][g][0][k], hv[1][g][1][k]) = dv;
                }
                continue;
            }
            let mut sdl = [[[[0.0; 8]; 2]; G]; 2];
            for q in qa.max(blk.q0)..qb.min(blk.q1) {
                let j = blk.row(q);
                let js = nt - 1 - j;
                let wj = o.w2pi[j];
                for (g, ig) in input.iter().enumerate() {
                    let (mut a, mut b) = (ig[j], ig[js]);
                    if let Some(s) = o.row_scale {
                        (a, b) = (a * s[j], b * s[js]);
                    }
                    let (s, d) = if js != j {
                        ((a + b) * wj, (a - b) * wj)
                    } else {
                        (a * wj, Complex64::new(0.0, 0.0))
                    };
                    let i = q - qa;
                    sdl[0][g][0][i] = s.re;
                    sdl[0][g][1][i] = s.im;
                    sdl[1][g][0][i] = d.re;
                    sdl[1][g][1][i] = d.im;
                }
            }
            for (h, sh) in hv.iter_mut().zip(&sdl) {
                for (hg, sg) in h.iter_mut().zip(sh) {
                    for (hc, sc) in hg.iter_mut().zip(sg) {
                        hc[k] = V::load(t, sc);
                    }
                }
            }
        }
        // The even sums take the weighted sums, the odd ones `x` times the
        // weighted differences (see [`ZForm`]).
        let se = hv[0];
        let mut so = hv[1];
        for sg in so.iter_mut() {
            for sc in sg.iter_mut() {
                for (v, xv) in sc.iter_mut().zip(&x) {
                    *v = v.mul(*xv);
                }
            }
        }
        // All lanes together from the first start (see `synth_group`).
        let mut p0 = load_lanes::<V, NV>(t, &blk.p0);
        let mut p1 = load_lanes::<V, NV>(t, &blk.p1);
        let mut i = i0;
        let mut e = blk.ne0;
        let mut qmin = blk.qmin;
        loop {
            while e < ne && ev(e).0 == i {
                let st = o.start_values(blk.row(ev(e).1));
                set_lane(&mut p0, ev(e).1, st[0]);
                set_lane(&mut p1, ev(e).1, st[1]);
                qmin = qmin.min(ev(e).1);
                e += 1;
            }
            deposit::<V, NV, G, 0>(part, &se, &so, nv, i, &p1, first);
            if i == n {
                break;
            }
            step_lanes::<V, NV, 0>(ab[i], &y, &p1, &mut p0);
            i += 1;
            while e < ne && ev(e).0 == i {
                let st = o.start_values(blk.row(ev(e).1));
                set_lane(&mut p1, ev(e).1, st[0]);
                set_lane(&mut p0, ev(e).1, st[1]);
                qmin = qmin.min(ev(e).1);
                e += 1;
            }
            deposit::<V, NV, G, 0>(part, &se, &so, nv, i, &p0, first);
            if i == n {
                break;
            }
            step_lanes::<V, NV, 0>(ab[i], &y, &p0, &mut p1);
            i += 1;
            // Pairs before the next start and the last pair: the same
            // operations without the checks, on the vectors holding a
            // started lane only.
            let stop = if e < ne { ev(e).0.min(n) } else { n };
            let pairs = Pairs {
                c: (),
                nv,
                ab,
                stop,
            };
            let (i, y, p0, p1) = (&mut i, &y, &mut p0, &mut p1);
            match (first, first_active::<V, NV>(qmin)) {
                (true, 0) => pairs.anal::<V, NV, G, 0, true>(i, y, p0, p1, part, &se, &so),
                (true, 1) => pairs.anal::<V, NV, G, 1, true>(i, y, p0, p1, part, &se, &so),
                (true, 2) => pairs.anal::<V, NV, G, 2, true>(i, y, p0, p1, part, &se, &so),
                (true, _) => pairs.anal::<V, NV, G, 3, true>(i, y, p0, p1, part, &se, &so),
                (false, 0) => pairs.anal::<V, NV, G, 0, false>(i, y, p0, p1, part, &se, &so),
                (false, 1) => pairs.anal::<V, NV, G, 1, false>(i, y, p0, p1, part, &se, &so),
                (false, 2) => pairs.anal::<V, NV, G, 2, false>(i, y, p0, p1, part, &se, &so),
                (false, _) => pairs.anal::<V, NV, G, 3, false>(i, y, p0, p1, part, &se, &so),
            }
        }
        first = false;
        base -= lanes as isize;
    }
    if first {
        part[..G * nv].fill(Part([0.0; 2 * PART]));
    }
}

/// The [`Starts`] of every order `m <= mmax` at every northern node, index
/// `m * x.len() + j`, for the pairs of `zform[m]` (up to `l = lmax + 1`).
/// From the equator to the pole: once a node is negligible for every
/// degree, so are the nodes nearer the pole (smaller `sin^m theta`), which
/// are not computed.
pub(crate) fn starts(simd: Isa, x: &[f64], sin_theta: &[f64], zform: &[ZForm], eps: f64) -> Starts {
    let mut s = match simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Isa::detect` found FMA on this CPU.
        Isa::Avx512 | Isa::Avx2 => unsafe { starts_fma(x, sin_theta, zform, eps) },
        _ => starts_impl(x, sin_theta, zform, eps),
    };
    s.finish(x.len(), zform.len());
    s
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn starts_fma(x: &[f64], sin_theta: &[f64], zform: &[ZForm], eps: f64) -> Starts {
    starts_impl(x, sin_theta, zform, eps)
}

#[inline(always)]
fn starts_impl(x: &[f64], sin_theta: &[f64], zform: &[ZForm], eps: f64) -> Starts {
    let nn = x.len();
    let mmax = zform.len() - 1;
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
    let mut out = Starts::none((mmax + 1) * nn);
    for (m, z) in zform.iter().enumerate() {
        for j in (0..nn).rev() {
            let k = m * nn + j;
            let y = x[j] * x[j];
            match unscaled_zstart(m, y, pv[k], pk[k], z)
                .and_then(|st| zabove_threshold(y, st, z, eps))
            {
                Some((i, p0, p1)) => {
                    (out.i[k], out.p0[k], out.p1[k]) = (i as u32, p0, p1);
                }
                None => break,
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pair recurrence against the recurrence in `l`
    /// ([`normalized_legendre`]): from `z_0`, `x s_k z_k` is
    /// `Pbar_{m+2k+1}` and `u_k z_k + v_{k-1} z_{k-1}` is `Pbar_{m+2k}` at
    /// every degree up to `lmax`, for low, middle and the highest orders,
    /// at nodes from next to the equator to near the pole (where the
    /// sectoral value needs no extended exponent). Fails if a factor of
    /// [`ZForm`] is off (an `e_l` for the wrong degree, a sign of `s`).
    #[test]
    fn pair_recurrence_gives_the_legendre_functions() {
        let lmax = 200;
        let mut checked = 0;
        for m in [0, 1, 2, 17, 100, 199, 200] {
            let z = ZForm::new(m, lmax);
            for theta in [1.55f64, 1.2, 0.7, 0.3] {
                let (x, st) = (theta.cos(), theta.sin());
                let mut pmm = (0.0, 0);
                sectoral(m, st, |v, k| pmm = (v, k));
                if pmm.1 != 0 {
                    continue; // the scaled range: the plan's starts cover it
                }
                let mut p = vec![0.0; lmax - m + 1];
                normalized_legendre(lmax, m, theta, &mut p).unwrap();
                let y = x * x;
                let mut zs = vec![ZForm::z0(m, pmm.0)];
                for (k, &ab) in z.ab.iter().enumerate() {
                    let prev = if k == 0 { 0.0 } else { zs[k - 1] };
                    zs.push(zstep(ab, y, zs[k], prev));
                }
                let big = p.iter().fold(0.0f64, |a, v| a.max(v.abs()));
                for (i, &want) in p.iter().enumerate() {
                    let k = i / 2;
                    let got = if i % 2 == 1 {
                        x * (z.s[k] * zs[k])
                    } else if k == 0 {
                        z.u[0] * zs[0]
                    } else {
                        z.u[k] * zs[k] + z.v[k - 1] * zs[k - 1]
                    };
                    // Two recurrences of up to 200 steps, each rounding
                    // differently: 1e-12 of the largest value.
                    assert!(
                        (got - want).abs() <= 1e-12 * big,
                        "m {m} theta {theta} l {}: {got} vs {want}",
                        m + i
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 2000, "{checked} values checked");
    }
}
