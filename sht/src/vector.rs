//! Vector transforms in spheroidal/toroidal form and the horizontal gradient
//! (methods of [`Sht`]).
//!
//! A tangent vector field on the unit sphere is written with two scalar
//! potentials, the spheroidal `S` and the toroidal `T` (the SHTns
//! convention):
//!
//! ```text
//! u = grad_h S + curl(T r_hat) = grad_h S - r_hat x grad_h T,
//! u_theta = dS/dtheta + (1/sin theta) dT/dphi,
//! u_phi   = (1/sin theta) dS/dphi - dT/dtheta.
//! ```
//!
//! For one order `m` the Fourier-Legendre components follow from
//! `sin theta dPbar_lm/dtheta = l eps_{l+1,m} Pbar_{l+1,m} - (l+1) eps_lm Pbar_{l-1,m}`,
//! `eps_lm = sqrt((l^2 - m^2) / (4 l^2 - 1))`, so that
//!
//! ```text
//! sin theta U_theta,m = sum_{k=m}^{lmax+1} Pbar_km [ A_k + i m T_k ],
//! sin theta U_phi,m   = sum_{k=m}^{lmax+1} Pbar_km [ i m S_k - B_k ],
//! A_k = (k-1) eps_km S_{k-1} - (k+2) eps_{k+1,m} S_{k+1}   (B_k: the same with T),
//! ```
//!
//! two scalar Legendre syntheses to degree `lmax + 1` sharing one
//! recurrence (the derivative terms, of the opposite parity, land on the
//! neighbouring degrees). Analysis is the exact transpose: with
//! `Q_k, R_k = 2 pi sum_j w_j Pbar_km(x_j) U_{theta,phi}(theta_j) / sin theta_j`,
//!
//! ```text
//! l(l+1) S_l = l eps_{l+1} Q_{l+1} - (l+1) eps_l Q_{l-1} - i m R_l,
//! l(l+1) T_l = -i m Q_l - l eps_{l+1} R_{l+1} + (l+1) eps_l R_{l-1},
//! ```
//!
//! and `S_00 = T_00 = 0`. It inverts synthesis exactly (to rounding) on
//! band-limited fields, since `grad Y_lm . conj(grad Y_l'm)` is a polynomial
//! of degree `l + l' <= 2 lmax` in `cos theta` that the Gauss rule integrates
//! exactly.

use crate::legendre::Simd;
use num_complex::Complex64;
use rayon::prelude::*;

use crate::transform::{give, take};
use crate::{batch, check_len, Parallelism, Sht, ShtError};

const ZERO: Complex64 = Complex64::new(0.0, 0.0);

/// `eps_lm = sqrt((l^2 - m^2) / (4 l^2 - 1))` (zero for `l = m`); the
/// plan keeps a table of them ([`Sht::eps_m`]).
pub(crate) fn eps(l: usize, m: usize) -> f64 {
    let (lf, mf) = (l as f64, m as f64);
    ((lf - mf) * (lf + mf) / (4.0 * lf * lf - 1.0)).sqrt()
}

/// The coefficients of `sin theta dPbar/dtheta` on the neighbours:
/// `sum_l c_l sin dP_l = sum_k P_k [(k-1) eps_k c_{k-1} - (k+2) eps_{k+1} c_{k+1}]`
/// for `k = m..=lmax+1`, `c` given for `l = m..=lmax` (`nl` values);
/// `eps[i] = eps_{m+i,m}`.
#[inline]
fn dtheta(m: usize, c: &[Complex64], eps: &[f64], k: usize) -> Complex64 {
    let nl = c.len();
    let i = k - m;
    let mut v = ZERO;
    if i >= 1 && i - 1 < nl {
        v += c[i - 1] * ((k as f64 - 1.0) * eps[i]);
    }
    if i + 1 < nl {
        v -= c[i + 1] * ((k as f64 + 2.0) * eps[i + 1]);
    }
    v
}

/// `dst[f nt + j] = src[f nt + j] * s[j]` for every field `f` (`nt =
/// s.len()`), with the widest vectors the CPU has (the same operation on
/// each value whatever the width).
fn scale_rows(simd: Simd, src: &[Complex64], s: &[f64], dst: &mut [Complex64]) {
    #[inline(always)]
    fn body(src: &[Complex64], s: &[f64], dst: &mut [Complex64]) {
        for (d, x) in dst.chunks_mut(s.len()).zip(src.chunks(s.len())) {
            for ((d, x), s) in d.iter_mut().zip(x).zip(s) {
                *d = x * s;
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn avx512(src: &[Complex64], s: &[f64], dst: &mut [Complex64]) {
        body(src, s, dst)
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn avx2(src: &[Complex64], s: &[f64], dst: &mut [Complex64]) {
        body(src, s, dst)
    }
    match simd {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Simd::Avx512` is only made after AVX-512F was found.
        Simd::Avx512 => unsafe { avx512(src, s, dst) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Simd::Avx2` is only made after AVX2 was found.
        Simd::Avx2 => unsafe { avx2(src, s, dst) },
        _ => body(src, s, dst),
    }
}

impl Sht {
    /// Vector synthesis of a batch: the spheroidal and toroidal potentials
    /// `sph`, `tor` (`nfields * nlm` each, the scalar layout) to the
    /// components `vt = u_theta`, `vp = u_phi` (`nfields * ntheta * nphi`
    /// each), `u = grad_h S + curl(T r_hat)` (see the crate docs). The
    /// imaginary parts of the `m = 0` and the `l = 0` coefficients play no part.
    pub fn vector_synthesis(
        &self,
        sph: &[Complex64],
        tor: &[Complex64],
        vt: &mut [f64],
        vp: &mut [f64],
        par: Parallelism,
    ) -> Result<(), ShtError> {
        let nf = batch("sph", sph.len(), self.nlm())?;
        check_len("tor", tor.len(), nf * self.nlm())?;
        self.vector_synthesis_impl(nf, sph, Some(tor), vt, vp, par)
    }

    /// The horizontal gradient `(dS/dtheta, (1/sin theta) dS/dphi)` of a
    /// batch of scalar fields given by their coefficients (`nfields * nlm`),
    /// to `gt`, `gp` (`nfields * ntheta * nphi` each): the spheroidal
    /// synthesis, [`vector_synthesis`](Self::vector_synthesis) with `T = 0`.
    pub fn gradient(
        &self,
        coeffs: &[Complex64],
        gt: &mut [f64],
        gp: &mut [f64],
        par: Parallelism,
    ) -> Result<(), ShtError> {
        let nf = batch("coeffs", coeffs.len(), self.nlm())?;
        self.vector_synthesis_impl(nf, coeffs, None, gt, gp, par)
    }

    fn vector_synthesis_impl(
        &self,
        nf: usize,
        sph: &[Complex64],
        tor: Option<&[Complex64]>,
        vt: &mut [f64],
        vp: &mut [f64],
        par: Parallelism,
    ) -> Result<(), ShtError> {
        let ng = self.ntheta() * self.nphi();
        check_len("vt", vt.len(), nf * ng)?;
        check_len("vp", vp.len(), nf * ng)?;
        let mut st = take(nf * self.spectral_len());
        let mut sp = take(nf * self.spectral_len());
        self.vector_legendre_synthesis_impl(nf, sph, tor, &mut st, &mut sp, par);
        let r = self
            .phi_synthesis(&st, vt, par)
            .and_then(|()| self.phi_synthesis(&sp, vp, par));
        give(st);
        give(sp);
        r
    }

    /// Vector analysis of a batch: the components `vt = u_theta`,
    /// `vp = u_phi` (`nfields * ntheta * nphi` each) to the spheroidal and
    /// toroidal potentials `sph`, `tor` (`nfields * nlm` each); the exact
    /// inverse of [`vector_synthesis`](Self::vector_synthesis) on
    /// band-limited fields (`S_00 = T_00 = 0`).
    pub fn vector_analysis(
        &self,
        vt: &[f64],
        vp: &[f64],
        sph: &mut [Complex64],
        tor: &mut [Complex64],
        par: Parallelism,
    ) -> Result<(), ShtError> {
        let ng = self.ntheta() * self.nphi();
        let nf = batch("vt", vt.len(), ng)?;
        check_len("vp", vp.len(), nf * ng)?;
        check_len("sph", sph.len(), nf * self.nlm())?;
        check_len("tor", tor.len(), nf * self.nlm())?;
        let mut st = take(nf * self.spectral_len());
        let mut sp = take(nf * self.spectral_len());
        let r = self
            .phi_analysis(vt, &mut st, par)
            .and_then(|()| self.phi_analysis(vp, &mut sp, par))
            .and_then(|()| self.vector_legendre_analysis(&st, &sp, sph, tor, par));
        give(st);
        give(sp);
        r
    }

    /// Legendre step of vector synthesis for all `m`: `sph`, `tor`
    /// (`nfields * nlm` each) to the Fourier-Legendre intermediates of
    /// `u_theta` and `u_phi`, `spec_t`, `spec_p` (`nfields * spectral_len()`
    /// each, the scalar intermediate layout), ready for
    /// [`phi_synthesis`](Self::phi_synthesis).
    pub fn vector_legendre_synthesis(
        &self,
        sph: &[Complex64],
        tor: &[Complex64],
        spec_t: &mut [Complex64],
        spec_p: &mut [Complex64],
        par: Parallelism,
    ) -> Result<(), ShtError> {
        let nf = batch("sph", sph.len(), self.nlm())?;
        check_len("tor", tor.len(), nf * self.nlm())?;
        check_len("spec_t", spec_t.len(), nf * self.spectral_len())?;
        check_len("spec_p", spec_p.len(), nf * self.spectral_len())?;
        self.vector_legendre_synthesis_impl(nf, sph, Some(tor), spec_t, spec_p, par);
        Ok(())
    }

    fn vector_legendre_synthesis_impl(
        &self,
        nf: usize,
        sph: &[Complex64],
        tor: Option<&[Complex64]>,
        spec_t: &mut [Complex64],
        spec_p: &mut [Complex64],
        par: Parallelism,
    ) {
        let (nlm, lmax, nt) = (self.nlm(), self.lmax(), self.ntheta());
        let one = |(m, (ot, op)): (usize, (&mut [Complex64], &mut [Complex64]))| {
            let nl = lmax - m + 1;
            let off = self.m_offset(m);
            let gather = |c: &[Complex64]| {
                let mut cm = Vec::with_capacity(nf * nl);
                for f in 0..nf {
                    cm.extend_from_slice(&c[f * nlm + off..f * nlm + off + nl]);
                }
                cm
            };
            let s = gather(sph);
            let t = tor.map(gather);
            self.vector_synth_m(m, nf, &s, t.as_deref(), ot, op);
        };
        let chunk = nf * nt;
        match par {
            Parallelism::None => spec_t
                .chunks_mut(chunk)
                .zip(spec_p.chunks_mut(chunk))
                .enumerate()
                .for_each(one),
            Parallelism::Rayon => spec_t
                .par_chunks_mut(chunk)
                .zip(spec_p.par_chunks_mut(chunk))
                .enumerate()
                .with_max_len(1)
                .for_each(one),
        }
    }

    /// Legendre step of vector analysis for all `m`: the phi-analysed
    /// intermediates `spec_t`, `spec_p` of `u_theta`, `u_phi`
    /// (`nfields * spectral_len()` each) to `sph`, `tor` (`nfields * nlm` each).
    pub fn vector_legendre_analysis(
        &self,
        spec_t: &[Complex64],
        spec_p: &[Complex64],
        sph: &mut [Complex64],
        tor: &mut [Complex64],
        par: Parallelism,
    ) -> Result<(), ShtError> {
        let nf = batch("spec_t", spec_t.len(), self.spectral_len())?;
        check_len("spec_p", spec_p.len(), nf * self.spectral_len())?;
        check_len("sph", sph.len(), nf * self.nlm())?;
        check_len("tor", tor.len(), nf * self.nlm())?;
        let (lmax, nt) = (self.lmax(), self.ntheta());
        let chunk = nf * nt;
        let one = |(m, (it, ip)): (usize, (&[Complex64], &[Complex64]))| {
            let nl = lmax - m + 1;
            let mut s = vec![ZERO; nf * nl];
            let mut t = vec![ZERO; nf * nl];
            self.vector_anal_m(m, nf, it, ip, &mut s, &mut t);
            (s, t)
        };
        let per_m: Vec<(Vec<Complex64>, Vec<Complex64>)> = match par {
            Parallelism::None => spec_t
                .chunks(chunk)
                .zip(spec_p.chunks(chunk))
                .enumerate()
                .map(one)
                .collect(),
            Parallelism::Rayon => spec_t
                .par_chunks(chunk)
                .zip(spec_p.par_chunks(chunk))
                .enumerate()
                .with_max_len(1)
                .map(one)
                .collect(),
        };
        let nlm = self.nlm();
        for (m, (s, t)) in per_m.iter().enumerate() {
            let nl = lmax - m + 1;
            let off = self.m_offset(m);
            for f in 0..nf {
                sph[f * nlm + off..f * nlm + off + nl].copy_from_slice(&s[f * nl..(f + 1) * nl]);
                tor[f * nlm + off..f * nlm + off + nl].copy_from_slice(&t[f * nl..(f + 1) * nl]);
            }
        }
        Ok(())
    }

    /// Vector Legendre synthesis for one order `m` and a batch of fields:
    /// `sph_l`, `tor_l` hold, field after field, `S_lm`, `T_lm` for
    /// `l = m..=lmax`; `out_t`, `out_p` receive, field after field, the
    /// Fourier-Legendre components `U_theta,m(theta_j)`, `U_phi,m(theta_j)`
    /// for all `ntheta` latitudes (the layout of
    /// [`legendre_synthesis_m`](Self::legendre_synthesis_m)).
    pub fn vector_legendre_synthesis_m(
        &self,
        m: usize,
        sph_l: &[Complex64],
        tor_l: &[Complex64],
        out_t: &mut [Complex64],
        out_p: &mut [Complex64],
    ) -> Result<(), ShtError> {
        if m > self.lmax() {
            return Err(ShtError::OrderOutOfRange {
                m,
                mmax: self.lmax(),
            });
        }
        let nf = batch("sph_l", sph_l.len(), self.lmax() - m + 1)?;
        check_len("tor_l", tor_l.len(), sph_l.len())?;
        check_len("out_t", out_t.len(), nf * self.ntheta())?;
        check_len("out_p", out_p.len(), nf * self.ntheta())?;
        self.vector_synth_m(m, nf, sph_l, Some(tor_l), out_t, out_p);
        Ok(())
    }

    /// Vector Legendre analysis for one order `m` and a batch of fields:
    /// from `in_t`, `in_p` (field after field, `U_theta,m(theta_j)` and
    /// `U_phi,m(theta_j)` as given by [`phi_analysis`](Self::phi_analysis))
    /// to `sph_l`, `tor_l` (field after field, `S_lm`, `T_lm` for `l = m..=lmax`).
    pub fn vector_legendre_analysis_m(
        &self,
        m: usize,
        in_t: &[Complex64],
        in_p: &[Complex64],
        sph_l: &mut [Complex64],
        tor_l: &mut [Complex64],
    ) -> Result<(), ShtError> {
        if m > self.lmax() {
            return Err(ShtError::OrderOutOfRange {
                m,
                mmax: self.lmax(),
            });
        }
        let nf = batch("in_t", in_t.len(), self.ntheta())?;
        check_len("in_p", in_p.len(), in_t.len())?;
        let nl = self.lmax() - m + 1;
        check_len("sph_l", sph_l.len(), nf * nl)?;
        check_len("tor_l", tor_l.len(), nf * nl)?;
        self.vector_anal_m(m, nf, in_t, in_p, sph_l, tor_l);
        Ok(())
    }

    /// One order of vector synthesis (lengths checked by the callers).
    fn vector_synth_m(
        &self,
        m: usize,
        nf: usize,
        s: &[Complex64],
        t: Option<&[Complex64]>,
        out_t: &mut [Complex64],
        out_p: &mut [Complex64],
    ) {
        let (lmax, nt) = (self.lmax(), self.ntheta());
        let nl = lmax - m + 1;
        let nd = nl + 1; // degrees m..=lmax+1
        let im = Complex64::new(0.0, m as f64);
        let eps = self.eps_m(m);
        // Fields 0..nf: sin theta U_theta; nf..2nf: sin theta U_phi.
        let mut c = take(2 * nf * nd);
        for f in 0..nf {
            let sf = &s[f * nl..(f + 1) * nl];
            let tf = t.map(|t| &t[f * nl..(f + 1) * nl]);
            for i in 0..nd {
                let k = m + i;
                let (s_k, t_k) = if i < nl {
                    (sf[i], tf.map_or(ZERO, |t| t[i]))
                } else {
                    (ZERO, ZERO)
                };
                c[f * nd + i] = dtheta(m, sf, eps, k) + im * t_k;
                c[(nf + f) * nd + i] = match tf {
                    Some(tf) => im * s_k - dtheta(m, tf, eps, k),
                    None => im * s_k,
                };
            }
        }
        let mut tmp = take(2 * nf * nt);
        self.synth_kernel(m, lmax + 1, 2 * nf, &c, &mut tmp);
        let inv_sin = self.inv_sin_theta();
        let (tt, tp) = tmp.split_at(nf * nt);
        scale_rows(self.simd(), tt, inv_sin, &mut out_t[..nf * nt]);
        scale_rows(self.simd(), tp, inv_sin, &mut out_p[..nf * nt]);
        give(c);
        give(tmp);
    }

    /// One order of vector analysis (lengths checked by the callers).
    fn vector_anal_m(
        &self,
        m: usize,
        nf: usize,
        in_t: &[Complex64],
        in_p: &[Complex64],
        s: &mut [Complex64],
        t: &mut [Complex64],
    ) {
        let (lmax, nt) = (self.lmax(), self.ntheta());
        let nl = lmax - m + 1;
        let nd = nl + 1;
        let inv_sin = self.inv_sin_theta();
        let (eps, inv_ll) = (self.eps_m(m), self.inv_ll());
        let mut v = take(2 * nf * nt);
        let (vt, vp) = v.split_at_mut(nf * nt);
        scale_rows(self.simd(), in_t, inv_sin, vt);
        scale_rows(self.simd(), in_p, inv_sin, vp);
        // Fields 0..nf: Q; nf..2nf: R; degrees m..=lmax+1.
        let mut qr = take(2 * nf * nd);
        self.anal_kernel(m, lmax + 1, 2 * nf, &v, &mut qr);
        let im = Complex64::new(0.0, m as f64);
        for f in 0..nf {
            let q = &qr[f * nd..(f + 1) * nd];
            let r = &qr[(nf + f) * nd..(nf + f + 1) * nd];
            // The transpose of `dtheta`: sum_j V (sin dP_l) for l = m + i.
            let d = |x: &[Complex64], i: usize| {
                let l = m + i;
                let mut v = x[i + 1] * (l as f64 * eps[i + 1]);
                if i >= 1 {
                    v -= x[i - 1] * ((l as f64 + 1.0) * eps[i]);
                }
                v
            };
            for i in 0..nl {
                let l = m + i;
                let (sv, tv) = if l == 0 {
                    (ZERO, ZERO)
                } else {
                    let inv = inv_ll[l];
                    ((d(q, i) - im * r[i]) * inv, (-(im * q[i]) - d(r, i)) * inv)
                };
                s[f * nl + i] = sv;
                t[f * nl + i] = tv;
            }
        }
        give(v);
        give(qr);
    }
}
