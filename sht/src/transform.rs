//! The transform plan.

use std::f64::consts::PI;
use std::fmt;
use std::sync::Arc;

use crate::fft::{self, LaneFft};
use num_complex::Complex64;
use rayon::prelude::*;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};

use crate::legendre::{anal, starts, synth, Order, Starts, ZForm, PAD};
use crate::{batch, check_len, gauss_legendre, Kernel, Parallelism, ShtError};
use simd::Isa;

const ZERO: Complex64 = Complex64::new(0.0, 0.0);

thread_local! {
    /// Work buffers kept between calls on this thread (at most `POOL_MAX`),
    /// so that repeated transforms do not allocate (and fault in) their
    /// intermediates every time.
    static POOL: std::cell::RefCell<Vec<Vec<Complex64>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Buffers kept per thread.
const POOL_MAX: usize = 8;

/// Rows per block of the phi steps: the values of one order for this many
/// consecutive rows are read (synthesis) or written (analysis) together.
const PHI_ROWS: usize = 8;

/// A work buffer of `len` values from this thread's pool. Its contents are
/// unspecified: every caller writes all of it before reading.
///
/// The shortest buffer at least `len` long is taken where the pool has one
/// (it is cut, not filled), else the longest, so that buffers given back in
/// any order are not zero-filled again on every call.
pub(crate) fn take(len: usize) -> Vec<Complex64> {
    let mut v = POOL
        .with(|p| {
            let mut p = p.borrow_mut();
            let fits = (0..p.len())
                .filter(|&k| p[k].len() >= len)
                .min_by_key(|&k| p[k].len());
            let k = fits.or_else(|| (0..p.len()).max_by_key(|&k| p[k].len()))?;
            Some(p.swap_remove(k))
        })
        .unwrap_or_default();
    v.resize(len, ZERO);
    v
}

/// A work buffer from this thread's pool whose values start on a 64-byte
/// boundary (where the allocation's address allows it: a multiple of 16
/// bytes, as every allocator gives): the phi step loads and stores the
/// values of eight rows as whole vectors, and a vector across two cache
/// lines costs about twice one within a line. Contents unspecified, as
/// [`take`]'s.
pub(crate) struct Aligned {
    v: Vec<Complex64>,
    at: usize,
    len: usize,
}

impl std::ops::Deref for Aligned {
    type Target = [Complex64];
    fn deref(&self) -> &[Complex64] {
        &self.v[self.at..self.at + self.len]
    }
}

impl std::ops::DerefMut for Aligned {
    fn deref_mut(&mut self) -> &mut [Complex64] {
        &mut self.v[self.at..self.at + self.len]
    }
}

/// [`take`] of `len` values starting on a 64-byte boundary ([`Aligned`]).
pub(crate) fn take_aligned(len: usize) -> Aligned {
    let v = take(len + 3);
    let addr = v.as_ptr() as usize;
    let at = if addr.is_multiple_of(16) {
        (64 - addr % 64) % 64 / 16
    } else {
        0
    };
    Aligned { v, at, len }
}

/// Returns a buffer from [`take_aligned`] to this thread's pool.
pub(crate) fn give_aligned(a: Aligned) {
    give(a.v)
}

/// Returns a buffer from [`take`] to this thread's pool.
pub(crate) fn give(v: Vec<Complex64>) {
    POOL.with(|p| {
        let mut p = p.borrow_mut();
        if p.len() < POOL_MAX {
            p.push(v);
        }
    });
}

/// Where order `m`'s `eps_lm` (`l = m..=lmax + 2`) start in [`Sht`]'s table.
fn eps_offset(lmax: usize, m: usize) -> usize {
    // Orders below m hold lmax - m' + 3 values each.
    m * (lmax + 3) - m * m.saturating_sub(1) / 2
}

/// A spherical harmonic transform plan: a Gauss-Legendre grid of `ntheta`
/// latitudes and `nphi` longitudes, and the truncation `lmax = mmax`.
///
/// Holds the grid, for every order and northern latitude the pair of
/// degrees where the recurrence leaves the negligible range, its two values
/// there and the run of equal starts it belongs to (`(mmax+1) *
/// ceil(ntheta/2)` entries of 24 bytes and 1 KiB of padding per order: 7.9
/// MB at `ntheta = 768`, `mmax = 767`, 137 MB at `ntheta = 4096`, `mmax =
/// 2730`), the pair recurrence of every order up to `l = lmax + 1` (five
/// factors a pair of degrees, `~ 5 lmax^2 / 4` values; no table over the
/// latitudes) and the phi FFT plans. See the crate docs
/// for the convention and the layouts.
pub struct Sht {
    ntheta: usize,
    nphi: usize,
    lmax: usize,
    nnorth: usize,
    theta: Vec<f64>,
    x: Vec<f64>,
    w: Vec<f64>,
    start: Starts,
    w2pi: Vec<f64>,
    sin_theta: Vec<f64>,
    inv_sin: Vec<f64>,
    /// The northern nodes with `legendre::PAD` zeros before and after.
    xpad: Vec<f64>,
    eps: Vec<f64>,
    inv_ll: Vec<f64>,
    /// The pair recurrence of every order, up to `l = lmax + 1`.
    zform: Vec<ZForm>,
    simd: Isa,
    polar: f64,
    r2c: Arc<dyn RealToComplex<f64>>,
    c2r: Arc<dyn ComplexToReal<f64>>,
    /// The phi FFTs eight rows at a time, where `nphi / 2` has no prime
    /// factor above 7 (otherwise `r2c` and `c2r`, row by row).
    lanes: Option<LaneFft>,
}

impl fmt::Debug for Sht {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sht")
            .field("ntheta", &self.ntheta)
            .field("nphi", &self.nphi)
            .field("lmax", &self.lmax)
            .finish_non_exhaustive()
    }
}

impl Sht {
    /// A plan with `nphi = 2 ntheta` and `lmax` given or, with `None`,
    /// `ceil(2 ntheta / 3)` (at most `ntheta - 1`).
    ///
    /// Errors: `ntheta < 2`, `lmax > ntheta - 1`.
    pub fn new(ntheta: usize, lmax: Option<usize>) -> Result<Self, ShtError> {
        Self::with_nphi(ntheta, 2 * ntheta, lmax)
    }

    /// A plan with an explicit even `nphi >= 2 (lmax + 1)`.
    ///
    /// Errors: `ntheta < 2`, `lmax > ntheta - 1`, odd `nphi`, `nphi` too small.
    pub fn with_nphi(ntheta: usize, nphi: usize, lmax: Option<usize>) -> Result<Self, ShtError> {
        if ntheta < 2 {
            return Err(ShtError::TooFewLatitudes { ntheta });
        }
        let lmax = lmax.unwrap_or_else(|| (2 * ntheta).div_ceil(3).min(ntheta - 1));
        if lmax >= ntheta {
            return Err(ShtError::LmaxOutOfRange { lmax, ntheta });
        }
        if !nphi.is_multiple_of(2) {
            return Err(ShtError::OddNphi { nphi });
        }
        if nphi < 2 * (lmax + 1) {
            return Err(ShtError::NphiTooSmall { nphi, mmax: lmax });
        }
        let (theta, x, w) = gauss_legendre(ntheta);
        let nnorth = ntheta.div_ceil(2);
        // The recurrence of each order, up to lmax + 1 (the vector
        // transforms need one degree more).
        let zform: Vec<ZForm> = (0..=lmax).map(|m| ZForm::new(m, lmax + 1)).collect();
        let w2pi = w[..nnorth].iter().map(|w| 2.0 * PI * w).collect();
        let mut xpad = vec![0.0; nnorth + 2 * PAD];
        xpad[PAD..PAD + nnorth].copy_from_slice(&x[..nnorth]);
        let sin_theta: Vec<f64> = theta.iter().map(|t| t.sin()).collect();
        let inv_sin = sin_theta.iter().map(|s| 1.0 / s).collect();
        // `1 / (l (l + 1))` for l = 1..=lmax (index l; 0 at l = 0).
        let inv_ll = (0..=lmax)
            .map(|l| {
                if l == 0 {
                    0.0
                } else {
                    1.0 / (l as f64 * (l as f64 + 1.0))
                }
            })
            .collect();
        // `eps_lm` for l = m..=lmax+2 of every order (the vector transforms).
        let mut eps = Vec::with_capacity(eps_offset(lmax, lmax + 1));
        for m in 0..=lmax {
            eps.extend((m..=lmax + 2).map(|l| crate::vector::eps(l, m)));
        }
        let simd = Isa::detect();
        let start = starts(simd, &x[..nnorth], &sin_theta[..nnorth], &zform, 0.0);
        let mut planner = RealFftPlanner::<f64>::new();
        let r2c = planner.plan_fft_forward(nphi);
        let c2r = planner.plan_fft_inverse(nphi);
        Ok(Self {
            ntheta,
            nphi,
            lmax,
            nnorth,
            theta,
            x,
            w,
            start,
            w2pi,
            sin_theta,
            inv_sin,
            xpad,
            eps,
            inv_ll,
            zform,
            simd,
            polar: 0.0,
            r2c,
            c2r,
            lanes: LaneFft::new(nphi),
        })
    }

    /// The Legendre kernels in use; the best this CPU supports unless
    /// [`set_kernel`](Self::set_kernel) chose others.
    pub fn kernel(&self) -> Kernel {
        self.simd
    }

    /// Switches to the Legendre kernels `kernel`. Every kernel gives the
    /// same bits (the same IEEE operations in the same order), only the
    /// speed differs; this is here to test that and to measure them.
    ///
    /// # Errors
    /// [`ShtError::KernelUnavailable`] when this build or this CPU lacks
    /// them (AVX-512 needs `avx512f` + `fma` at run
    /// time, AVX2 `avx2` + `fma`); the kernels in use stay.
    pub fn set_kernel(&mut self, kernel: Kernel) -> Result<(), ShtError> {
        match kernel.require() {
            Ok(s) => {
                self.simd = s;
                Ok(())
            }
            Err(e) => Err(ShtError::KernelUnavailable {
                kernel,
                best: e.best,
            }),
        }
    }

    /// Opt-in polar threshold (default 0, off): the Legendre kernels skip,
    /// for each order and latitude, the leading pairs of degrees `(m + 2k,
    /// m + 2k + 1)` where `|Pbar_{m+2k+1,m}(x_j) / x_j| < eps` (`x_j = cos
    /// theta_j`; near the poles the values of high orders grow with `l`
    /// from far below `eps`; from the first pair at or above it on, every
    /// degree is kept). Those values are taken as
    /// zero, which saves work at high orders and costs accuracy: measured
    /// round-trip errors (synthesis then analysis, random coefficients) in
    /// the crate README. With `eps = 0` only the values below `2^-280` are
    /// skipped and round trips hold to about 1e-13. Recomputes the starts
    /// of the plan (`O(lmax^2 ntheta)`); the bits of every kernel, of the
    /// per-`m` steps and of `Parallelism` still agree with each other for
    /// one threshold, but differ from those without it.
    ///
    /// Errors: `eps` negative, not finite, or `>= 1`.
    pub fn set_polar_threshold(&mut self, eps: f64) -> Result<(), ShtError> {
        if !(0.0..1.0).contains(&eps) {
            return Err(ShtError::PolarThreshold {
                eps: eps.to_string(),
            });
        }
        let nn = self.nnorth;
        self.start = starts(
            self.simd,
            &self.x[..nn],
            &self.sin_theta[..nn],
            &self.zform,
            eps,
        );
        self.polar = eps;
        Ok(())
    }

    /// The polar threshold (see [`set_polar_threshold`](Self::set_polar_threshold)); 0 by default.
    pub fn polar_threshold(&self) -> f64 {
        self.polar
    }

    /// Number of latitudes.
    pub fn ntheta(&self) -> usize {
        self.ntheta
    }
    /// Number of longitudes.
    pub fn nphi(&self) -> usize {
        self.nphi
    }
    /// Largest degree.
    pub fn lmax(&self) -> usize {
        self.lmax
    }
    /// Largest order (equal to `lmax`).
    pub fn mmax(&self) -> usize {
        self.lmax
    }
    /// Number of coefficients of one field, `(lmax+1)(lmax+2)/2`.
    pub fn nlm(&self) -> usize {
        (self.lmax + 1) * (self.lmax + 2) / 2
    }
    /// Index of the first coefficient (`l = m`) of order `m`.
    pub fn m_offset(&self, m: usize) -> usize {
        m * (self.lmax + 1) - m * m.saturating_sub(1) / 2
    }
    /// Index of `(l, m)` in the m-major layout, `m <= l <= lmax`.
    pub fn lm_index(&self, l: usize, m: usize) -> usize {
        self.m_offset(m) + l - m
    }
    /// Colatitudes `theta_j` (north to south).
    pub fn theta(&self) -> &[f64] {
        &self.theta
    }
    /// `cos theta_j`, the Gauss nodes (decreasing).
    pub fn cos_theta(&self) -> &[f64] {
        &self.x
    }
    /// Gauss weights `w_j` (sum 2).
    pub fn weights(&self) -> &[f64] {
        &self.w
    }
    /// Longitude `phi_k = 2 pi k / nphi`.
    pub fn phi(&self, k: usize) -> f64 {
        2.0 * PI * k as f64 / self.nphi as f64
    }
    /// Length of the Fourier-Legendre intermediate of one field, `(mmax+1) ntheta`.
    pub fn spectral_len(&self) -> usize {
        (self.lmax + 1) * self.ntheta
    }

    /// Scalar synthesis of a batch: `coeffs` (`nfields * nlm`) to `grid`
    /// (`nfields * ntheta * nphi`).
    pub fn synthesis(
        &self,
        coeffs: &[Complex64],
        grid: &mut [f64],
        par: Parallelism,
    ) -> Result<(), ShtError> {
        let nf = batch("coeffs", coeffs.len(), self.nlm())?;
        check_len("grid", grid.len(), nf * self.ntheta * self.nphi)?;
        let mut spec = take_aligned(nf * self.spectral_len());
        self.legendre_synthesis(coeffs, &mut spec, par)?;
        let r = self.phi_synthesis(&spec, grid, par);
        give_aligned(spec);
        r
    }

    /// Scalar analysis of a batch: `grid` (`nfields * ntheta * nphi`) to
    /// `coeffs` (`nfields * nlm`).
    pub fn analysis(
        &self,
        grid: &[f64],
        coeffs: &mut [Complex64],
        par: Parallelism,
    ) -> Result<(), ShtError> {
        let nf = batch("grid", grid.len(), self.ntheta * self.nphi)?;
        check_len("coeffs", coeffs.len(), nf * self.nlm())?;
        let mut spec = take_aligned(nf * self.spectral_len());
        self.phi_analysis(grid, &mut spec, par)?;
        let r = self.legendre_analysis(&spec, coeffs, par);
        give_aligned(spec);
        r
    }

    /// Legendre step of synthesis for all `m`: `coeffs` (`nfields * nlm`)
    /// to the Fourier-Legendre intermediate `spec` (`nfields * spectral_len()`).
    pub fn legendre_synthesis(
        &self,
        coeffs: &[Complex64],
        spec: &mut [Complex64],
        par: Parallelism,
    ) -> Result<(), ShtError> {
        let nf = batch("coeffs", coeffs.len(), self.nlm())?;
        check_len("spec", spec.len(), nf * self.spectral_len())?;
        let (nlm, lmax) = (self.nlm(), self.lmax);
        let one = |(m, out): (usize, &mut [Complex64])| {
            let nl = lmax - m + 1;
            let off = self.m_offset(m);
            if nf == 1 {
                // One field: its coefficients of order m are contiguous.
                self.synth_kernel(m, lmax, nf, &coeffs[off..off + nl], out);
                return;
            }
            let mut cm = take(0);
            cm.clear();
            for f in 0..nf {
                cm.extend_from_slice(&coeffs[f * nlm + off..f * nlm + off + nl]);
            }
            self.synth_kernel(m, lmax, nf, &cm, out);
            give(cm);
        };
        let chunk = nf * self.ntheta;
        match par {
            Parallelism::None => spec.chunks_mut(chunk).enumerate().for_each(one),
            Parallelism::Rayon => spec
                .par_chunks_mut(chunk)
                .enumerate()
                .with_max_len(1)
                .for_each(one),
        }
        Ok(())
    }

    /// Legendre step of analysis for all `m`: the intermediate `spec`
    /// (`nfields * spectral_len()`, phi-analysed) to `coeffs` (`nfields * nlm`).
    pub fn legendre_analysis(
        &self,
        spec: &[Complex64],
        coeffs: &mut [Complex64],
        par: Parallelism,
    ) -> Result<(), ShtError> {
        let nf = batch("spec", spec.len(), self.spectral_len())?;
        check_len("coeffs", coeffs.len(), nf * self.nlm())?;
        let chunk = nf * self.ntheta;
        if let (1, Parallelism::None) = (nf, par) {
            // One field in order: straight into `coeffs`.
            for (m, input) in spec.chunks(chunk).enumerate() {
                let off = self.m_offset(m);
                let out = &mut coeffs[off..off + self.lmax - m + 1];
                self.anal_kernel(m, self.lmax, nf, input, out);
            }
            return Ok(());
        }
        let one = |(m, input): (usize, &[Complex64])| {
            let mut out = vec![ZERO; nf * (self.lmax - m + 1)];
            self.anal_kernel(m, self.lmax, nf, input, &mut out);
            out
        };
        let per_m: Vec<Vec<Complex64>> = match par {
            Parallelism::None => spec.chunks(chunk).enumerate().map(one).collect(),
            Parallelism::Rayon => spec
                .par_chunks(chunk)
                .enumerate()
                .with_max_len(1)
                .map(one)
                .collect(),
        };
        let nlm = self.nlm();
        for (m, out) in per_m.iter().enumerate() {
            let nl = self.lmax - m + 1;
            let off = self.m_offset(m);
            for f in 0..nf {
                coeffs[f * nlm + off..f * nlm + off + nl]
                    .copy_from_slice(&out[f * nl..(f + 1) * nl]);
            }
        }
        Ok(())
    }

    /// Legendre synthesis for one order `m` and a batch of fields:
    /// `coeffs_l` holds, field after field, `f_lm` for `l = m..=lmax`;
    /// `out_theta` receives, field after field, `F_m(theta_j)` for all `ntheta` latitudes.
    pub fn legendre_synthesis_m(
        &self,
        m: usize,
        coeffs_l: &[Complex64],
        out_theta: &mut [Complex64],
    ) -> Result<(), ShtError> {
        if m > self.lmax {
            return Err(ShtError::OrderOutOfRange { m, mmax: self.lmax });
        }
        let nf = batch("coeffs_l", coeffs_l.len(), self.lmax - m + 1)?;
        check_len("out_theta", out_theta.len(), nf * self.ntheta)?;
        self.synth_kernel(m, self.lmax, nf, coeffs_l, out_theta);
        Ok(())
    }

    /// Legendre analysis for one order `m` and a batch of fields: from
    /// `in_theta` (field after field, `F_m(theta_j)` as given by
    /// [`phi_analysis`](Self::phi_analysis)) to `coeffs_l` (field after field,
    /// `f_lm` for `l = m..=lmax`).
    pub fn legendre_analysis_m(
        &self,
        m: usize,
        in_theta: &[Complex64],
        coeffs_l: &mut [Complex64],
    ) -> Result<(), ShtError> {
        if m > self.lmax {
            return Err(ShtError::OrderOutOfRange { m, mmax: self.lmax });
        }
        let nf = batch("in_theta", in_theta.len(), self.ntheta)?;
        check_len("coeffs_l", coeffs_l.len(), nf * (self.lmax - m + 1))?;
        self.anal_kernel(m, self.lmax, nf, in_theta, coeffs_l);
        Ok(())
    }

    /// Phi step of synthesis: the intermediate `spec` to `grid`
    /// (`f = F_0 + 2 Re sum_{m>0} F_m e^{i m phi}` on every row, by a c2r FFT).
    pub fn phi_synthesis(
        &self,
        spec: &[Complex64],
        grid: &mut [f64],
        par: Parallelism,
    ) -> Result<(), ShtError> {
        let nf = batch("spec", spec.len(), self.spectral_len())?;
        check_len("grid", grid.len(), nf * self.ntheta * self.nphi)?;
        let (nt, nh, nphi) = (self.ntheta, self.nphi / 2 + 1, self.nphi);
        if let Some(lanes) = &self.lanes {
            // `LANES` rows at a time, side by side in the lanes: row `r`
            // of order `m` is `spec[m * nf * nt + r]`, so a block's values
            // of one order are neighbours. The next block's values of each
            // order are asked for while this block's are read: they are a
            // whole column apart from those of the next order.
            let (all, nm, simd) = (nf * nt, self.lmax + 1, self.simd);
            let block = |work: &mut fft::Work, (b, out): (usize, &mut [f64])| {
                let row0 = b * fft::LANES;
                let rows = out.len() / nphi;
                let next = (row0 + fft::LANES).min(all);
                let next_end = (next + fft::LANES).min(all);
                let orders = |m: usize| {
                    let col = m * all;
                    crate::legendre::prefetch(&spec[col + next..col + next_end]);
                    &spec[col + row0..col + row0 + rows]
                };
                lanes.c2r(simd, work, nm, orders, out, rows);
            };
            match par {
                Parallelism::None => {
                    let mut work = fft::Work::default();
                    grid.chunks_mut(fft::LANES * nphi)
                        .enumerate()
                        .for_each(|r| block(&mut work, r));
                }
                Parallelism::Rayon => grid
                    .par_chunks_mut(fft::LANES * nphi)
                    .enumerate()
                    .for_each_init(fft::Work::default, block),
            }
            return Ok(());
        }
        let scratch_len = self.c2r.get_scratch_len();
        let init = || (vec![ZERO; PHI_ROWS * nh], vec![ZERO; scratch_len]);
        // `PHI_ROWS` rows at a time (rows `row0..`, one per chunk of
        // `nphi`); `bufs` and `scratch` are reused (the FFT may overwrite
        // its input, so every entry of `bufs` is set each time). The rows
        // of one order are gathered together: consecutive latitudes are
        // neighbours in `spec`, so each cache line serves several rows.
        let block = |(bufs, scratch): &mut (Vec<Complex64>, Vec<Complex64>),
                     (b, out): (usize, &mut [f64])|
         -> Result<(), ShtError> {
            let row0 = b * PHI_ROWS;
            let nr = out.len() / nphi;
            // Row `f * nt + j` of order `m` is `spec[(m * nf + f) * nt + j]`.
            // The next block's values of each order are asked for now: a
            // block's rows of one order are a whole column apart from those
            // of the next order, so without it every one is a cache miss
            // that the FFTs of this block can hide.
            let next = (row0 + PHI_ROWS).min(nf * nt);
            let next_end = (next + PHI_ROWS).min(nf * nt);
            for m in 0..=self.lmax {
                let col = m * nf * nt;
                crate::legendre::prefetch(&spec[col + next..col + next_end]);
                let src = &spec[col + row0..col + row0 + nr];
                for (r, v) in src.iter().enumerate() {
                    bufs[r * nh + m] = *v;
                }
            }
            for (buf, row) in bufs.chunks_mut(nh).zip(out.chunks_mut(nphi)) {
                buf[self.lmax + 1..].iter_mut().for_each(|v| *v = ZERO);
                buf[0].im = 0.0;
                self.c2r
                    .process_with_scratch(buf, row, scratch)
                    .map_err(|e| ShtError::Fft(e.to_string()))?;
            }
            Ok(())
        };
        match par {
            Parallelism::None => {
                let mut bufs = init();
                grid.chunks_mut(PHI_ROWS * nphi)
                    .enumerate()
                    .try_for_each(|r| block(&mut bufs, r))
            }
            Parallelism::Rayon => grid
                .par_chunks_mut(PHI_ROWS * nphi)
                .enumerate()
                .try_for_each_init(init, block),
        }
    }

    /// Phi step of analysis: `grid` to the intermediate `spec`, by an r2c FFT
    /// per row: `F_m(theta_j) = (1/nphi) sum_k f(theta_j, phi_k) e^{-i m phi_k}`.
    pub fn phi_analysis(
        &self,
        grid: &[f64],
        spec: &mut [Complex64],
        par: Parallelism,
    ) -> Result<(), ShtError> {
        let nf = batch("grid", grid.len(), self.ntheta * self.nphi)?;
        check_len("spec", spec.len(), nf * self.spectral_len())?;
        let (nt, nh, mm) = (self.ntheta, self.nphi / 2 + 1, self.lmax + 1);
        let scale = 1.0 / self.nphi as f64;
        if let (Some(lanes), Parallelism::None) = (&self.lanes, par) {
            // `LANES` rows at a time, each order's values of the rows
            // straight into their place (neighbours there).
            let (all, nphi) = (nf * nt, self.nphi);
            let mut work = fft::Work::default();
            for (b, block) in grid.chunks(fft::LANES * nphi).enumerate() {
                let (row0, rows) = (b * fft::LANES, block.len() / nphi);
                let at = |m: usize| m * all + row0;
                lanes.r2c_to(self.simd, &mut work, block, rows, scale, mm, spec, at);
            }
            return Ok(());
        }
        let scratch_len = self.r2c.get_scratch_len();
        let init = || {
            (
                vec![0.0; self.nphi],
                vec![ZERO; nh],
                vec![ZERO; scratch_len],
            )
        };
        if let Parallelism::None = par {
            // `PHI_ROWS` rows at a time, straight into the intermediate
            // layout: the rows' values of one order are neighbours there.
            // Each row's spectrum goes straight into its place in `bufs`.
            let mut inp = vec![0.0; self.nphi];
            let mut scratch = vec![ZERO; scratch_len];
            let mut bufs = vec![ZERO; PHI_ROWS * nh];
            for (b, rows) in grid.chunks(PHI_ROWS * self.nphi).enumerate() {
                let nr = rows.len() / self.nphi;
                for (row, out) in rows.chunks(self.nphi).zip(bufs.chunks_mut(nh)) {
                    inp.copy_from_slice(row);
                    self.r2c
                        .process_with_scratch(&mut inp, out, &mut scratch)
                        .map_err(|e| ShtError::Fft(e.to_string()))?;
                }
                let row0 = b * PHI_ROWS;
                // As in synthesis: the next block's places, asked for ahead.
                let next = (row0 + PHI_ROWS).min(nf * nt);
                let next_end = (next + PHI_ROWS).min(nf * nt);
                for m in 0..mm {
                    let col = m * nf * nt;
                    crate::legendre::prefetch(&spec[col + next..col + next_end]);
                    let dst = &mut spec[m * nf * nt + row0..m * nf * nt + row0 + nr];
                    for (r, d) in dst.iter_mut().enumerate() {
                        *d = bufs[r * nh + m] * scale;
                    }
                }
            }
            return Ok(());
        }
        // In parallel into `rows` (row-major, `mm` orders per row): blocks
        // of `LANES` rows, or row by row; then transposed into the
        // intermediate layout.
        let mut rows = take(nf * nt * mm);
        #[allow(clippy::type_complexity)]
        let one = |(inp, buf, scratch): &mut (Vec<f64>, Vec<Complex64>, Vec<Complex64>),
                   (row, out): (&[f64], &mut [Complex64])|
         -> Result<(), ShtError> {
            inp.copy_from_slice(row);
            self.r2c
                .process_with_scratch(inp, buf, scratch)
                .map_err(|e| ShtError::Fft(e.to_string()))?;
            for (o, b) in out.iter_mut().zip(buf.iter()) {
                *o = b * scale;
            }
            Ok(())
        };
        let filled = match &self.lanes {
            Some(lanes) => {
                lanes.r2c_rows_par(self.simd, grid, &mut rows, mm, scale);
                Ok(())
            }
            None => grid
                .par_chunks(self.nphi)
                .zip(rows.par_chunks_mut(mm))
                .try_for_each_init(init, one),
        };
        filled?;
        for m in 0..mm {
            for (r, s) in spec[m * nf * nt..(m + 1) * nf * nt].iter_mut().enumerate() {
                *s = rows[r * mm + m];
            }
        }
        give(rows);
        Ok(())
    }

    /// The kernels' view of order `m`, degrees `l = m..=lend` (`lend <= lmax + 1`).
    fn order(&self, m: usize, lend: usize) -> Order<'_> {
        Order {
            nd: lend - m + 1,
            z: &self.zform[m],
            xpad: &self.xpad,
            start: self.start.order(m),
            w2pi: &self.w2pi,
            nt: self.ntheta,
            row_scale: None,
        }
    }

    /// The eight-row phi FFTs, where `nphi` allows them.
    pub(crate) fn lanes(&self) -> Option<&LaneFft> {
        self.lanes.as_ref()
    }

    /// The vector instruction set of the kernels.
    pub(crate) fn simd(&self) -> Isa {
        self.simd
    }

    /// `1 / (l (l + 1))` for `l = 0..=lmax` (0 at `l = 0`).
    pub(crate) fn inv_ll(&self) -> &[f64] {
        &self.inv_ll
    }

    /// `eps_lm` (see `vector::eps`) for `l = m..=lmax + 2`, index `l - m`.
    pub(crate) fn eps_m(&self, m: usize) -> &[f64] {
        &self.eps[eps_offset(self.lmax, m)..eps_offset(self.lmax, m + 1)]
    }

    /// Legendre synthesis of order `m` over `l = m..=lend` for `nf` fields:
    /// `out[f * ntheta + j] = sum_l cm[f * (lend - m + 1) + l - m] Pbar_lm(x_j)`.
    pub(crate) fn synth_kernel(
        &self,
        m: usize,
        lend: usize,
        nf: usize,
        cm: &[Complex64],
        out: &mut [Complex64],
    ) {
        synth(self.simd, &self.order(m, lend), nf, cm, [out, &mut []]);
    }

    /// The Legendre synthesis of the vector transforms, over `l =
    /// m..=lmax + 1` for `2 nf` fields: the first `nf` to `out_t`, the
    /// others to `out_p`, each row `j` times `1 / sin theta_j`.
    pub(crate) fn synth_kernel_vector(
        &self,
        m: usize,
        nf: usize,
        cm: &[Complex64],
        out_t: &mut [Complex64],
        out_p: &mut [Complex64],
    ) {
        let o = Order {
            row_scale: Some(&self.inv_sin),
            ..self.order(m, self.lmax + 1)
        };
        synth(self.simd, &o, 2 * nf, cm, [out_t, out_p]);
    }

    /// The Legendre analysis of the vector transforms, over `l =
    /// m..=lmax + 1` for `2 nf` fields (`nf` in `in_t`, then `nf` in
    /// `in_p`), each row `j` taken times `1 / sin theta_j`.
    pub(crate) fn anal_kernel_vector(
        &self,
        m: usize,
        nf: usize,
        in_t: &[Complex64],
        in_p: &[Complex64],
        out: &mut [Complex64],
    ) {
        let o = Order {
            row_scale: Some(&self.inv_sin),
            ..self.order(m, self.lmax + 1)
        };
        anal(self.simd, &o, 2 * nf, [in_t, in_p], out);
    }

    /// Legendre analysis of order `m` over `l = m..=lend` for `nf` fields:
    /// `out[f * (lend - m + 1) + l - m] = 2 pi sum_j w_j F[f * ntheta + j] Pbar_lm(x_j)`.
    pub(crate) fn anal_kernel(
        &self,
        m: usize,
        lend: usize,
        nf: usize,
        input: &[Complex64],
        out: &mut [Complex64],
    ) {
        anal(self.simd, &self.order(m, lend), nf, [input, &[]], out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan's runs of equal starts against a direct comparison over
    /// every pair of nodes of every order; its padded start values `(z_{k-1},
    /// z_k)`, times the pair factors `s`, against `t_k = Pbar_{m+2k+1} / x`
    /// from [`crate::normalized_legendre`] (see `legendre::ZForm`), and zero
    /// around them and where negligible. With and without a polar threshold
    /// (which spreads the starts over more pairs), and an odd `ntheta` (a
    /// node at the equator, `x = 0`, where `t_0 = Pbar_mm sqrt(2m + 3)`).
    #[test]
    fn runs_and_padded_starts_match_a_direct_check() {
        // Windows of eight nodes with one start, and all windows.
        let mut uniform_blocks = (0, 0);
        for (nt, lmax, eps) in [(48, 31, 0.0), (97, 80, 1e-8), (192, 127, 1e-10)] {
            let mut sht = Sht::new(nt, Some(lmax)).unwrap();
            sht.set_polar_threshold(eps).unwrap();
            let nn = sht.nnorth;
            for m in 0..=lmax {
                let s = sht.start.order(m);
                assert_eq!((s.i.len(), s.p0.len()), (nn, nn + 2 * PAD));
                assert!(s.p0[..PAD]
                    .iter()
                    .chain(&s.p0[PAD + nn..])
                    .all(|&v| v == 0.0));
                assert!(s.p1[..PAD]
                    .iter()
                    .chain(&s.p1[PAD + nn..])
                    .all(|&v| v == 0.0));
                for j in 0..nn {
                    for j0 in 0..=j {
                        let same = s.i[j0..=j].iter().all(|&i| i == s.i[j]);
                        assert_eq!(s.run[j] as usize <= j0, same, "m {m} nodes {j0}..={j}");
                        if j - j0 == 7 {
                            uniform_blocks.0 += same as usize;
                            uniform_blocks.1 += 1;
                        }
                    }
                    let (p0, p1) = (s.p0[PAD + j], s.p1[PAD + j]);
                    if s.i[j] == u32::MAX {
                        assert_eq!((p0, p1), (0.0, 0.0));
                        continue;
                    }
                    let k = s.i[j] as usize;
                    // Degrees up to lmax + 2: the last pair's odd degree.
                    let mut pb = vec![0.0; lmax + 3 - m];
                    crate::normalized_legendre(lmax + 2, m, sht.theta[j], &mut pb).unwrap();
                    let x = sht.x[j];
                    // t_k from the recurrence in l (at the equator node, t_0
                    // only: every start there is at k = 0).
                    let t = |k: usize| {
                        if x == 0.0 {
                            assert_eq!(k, 0, "m {m}: the equator starts at once");
                            pb[0] * (2.0 * m as f64 + 3.0).sqrt()
                        } else {
                            pb[2 * k + 1] / x
                        }
                    };
                    let z = &sht.zform[m];
                    // The pair recurrence and the one in l round differently:
                    // a few hundred steps of rounding at most (lmax 127).
                    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs();
                    assert!(close(p1 * z.s[k], t(k)), "m {m} node {j}: {p1} vs {}", t(k));
                    if k == 0 {
                        assert_eq!(p0, 0.0);
                    } else {
                        assert!(close(p0 * z.s[k - 1], t(k - 1)), "m {m} node {j}");
                    }
                }
            }
        }
        // Both kinds of windows occur, so both answers were checked.
        assert!(uniform_blocks.0 > 0 && uniform_blocks.0 < uniform_blocks.1);
    }
}
