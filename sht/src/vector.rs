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

use num_complex::Complex64;
use rayon::prelude::*;
use simd::Isa;

use crate::transform::{give, give_aligned, take, take_aligned};
use crate::{batch, check_len, Parallelism, Sht, ShtError};

const ZERO: Complex64 = Complex64::new(0.0, 0.0);

/// `eps_lm = sqrt((l^2 - m^2) / (4 l^2 - 1))` (zero for `l = m`); the
/// plan keeps a table of them ([`Sht::eps_m`]).
pub(crate) fn eps(l: usize, m: usize) -> f64 {
    let (lf, mf) = (l as f64, m as f64);
    ((lf - mf) * (lf + mf) / (4.0 * lf * lf - 1.0)).sqrt()
}

/// What [`dtheta`] adds to the derivative term `d`: nothing (`d + i m 0`,
/// as the transforms without a second potential form it), `d + i m w`, or
/// `i m w - d`.
#[derive(Clone, Copy)]
enum Plus<'a> {
    Nothing,
    Imw(&'a [Complex64]),
    ImwMinus(&'a [Complex64]),
}

/// The coefficients of `sin theta dPbar/dtheta` on the neighbours, with
/// `i m` times the other potential `w` as `plus` says:
/// `sum_l c_l sin dP_l = sum_k P_k [(k-1) eps_k c_{k-1} - (k+2) eps_{k+1} c_{k+1}]`
/// for `k = m..=lmax+1`, `c` (and `w`) given for `l = m..=lmax` (`nl`
/// values, at `c[..nl]`), `eps[i] = eps_{m+i,m}`; `out[i]` for `k = m + i`.
/// Each value is formed as `0 + (k-1) eps_k c_{k-1} - (k+2) eps_{k+1}
/// c_{k+1}` with the terms outside `m..=lmax` left out (`d`), then
/// combined as [`Plus`] says, as `Complex64` computes it.
#[inline(always)]
fn dtheta(m: usize, c: &[Complex64], plus: Plus<'_>, eps: &[f64], out: &mut [Complex64]) {
    let nl = out.len() - 1;
    let (c, eps) = (&c[..nl], &eps[..nl + 2]);
    // (Functions and loops, no closures: a closure would not take the
    // target features of the function this is compiled into.)
    // The two ends (the terms outside m..=lmax left out) ...
    out[0] = dtheta_end(m, c, plus, eps, 0);
    for i in nl.saturating_sub(1).max(1)..=nl {
        out[i] = dtheta_end(m, c, plus, eps, i);
    }
    // ... and the interior `1..nl - 1`, where both terms are present: the
    // same operations without the tests, on the real and imaginary parts
    // (so that the loops vectorise), one loop per case.
    if nl >= 3 {
        let n = nl - 2;
        let o = reals_mut(&mut out[1..nl - 1]);
        let (a, b) = (reals(&c[..n]), reals(&c[2..]));
        let (e0, e1) = (&eps[1..nl - 1], &eps[2..nl]);
        let mf = m as f64;
        match plus {
            // `d + i m 0` is `d`: `d` is never -0 (it starts as `0 + x`).
            Plus::Nothing => {
                for j in 0..n {
                    (o[2 * j], o[2 * j + 1]) = dtheta_inner(m, a, b, e0, e1, j);
                }
            }
            Plus::Imw(w) => {
                let w = reals(&w[1..nl - 1]);
                for j in 0..n {
                    let (dr, di) = dtheta_inner(m, a, b, e0, e1, j);
                    let (wr, wi) = times_im(mf, w[2 * j], w[2 * j + 1]);
                    (o[2 * j], o[2 * j + 1]) = (dr + wr, di + wi);
                }
            }
            Plus::ImwMinus(w) => {
                let w = reals(&w[1..nl - 1]);
                for j in 0..n {
                    let (dr, di) = dtheta_inner(m, a, b, e0, e1, j);
                    let (wr, wi) = times_im(mf, w[2 * j], w[2 * j + 1]);
                    (o[2 * j], o[2 * j + 1]) = (wr - dr, wi - di);
                }
            }
        }
    }
}

/// Value `i` of [`dtheta`] at its ends (`i = 0`, `nl - 1`, `nl`), the terms
/// outside `m..=lmax` left out, as `Complex64` computes it.
#[inline(always)]
fn dtheta_end(m: usize, c: &[Complex64], plus: Plus<'_>, eps: &[f64], i: usize) -> Complex64 {
    let nl = c.len();
    let im = Complex64::new(0.0, m as f64);
    let mut v = ZERO;
    if i >= 1 {
        v += c[i - 1] * (((m + i) as f64 - 1.0) * eps[i]);
    }
    if i + 1 < nl {
        v -= c[i + 1] * (((m + i) as f64 + 2.0) * eps[i + 1]);
    }
    let w = match plus {
        Plus::Imw(w) | Plus::ImwMinus(w) if i < nl => w[i],
        _ => ZERO,
    };
    match plus {
        Plus::Nothing => v + im * ZERO,
        Plus::Imw(_) => v + im * w,
        Plus::ImwMinus(_) => im * w - v,
    }
}

/// The derivative term of `k = m + 1 + j` in the interior of [`dtheta`],
/// as `Complex64` forms `(0 + a lo) - b hi` on the real and imaginary parts.
#[inline(always)]
fn dtheta_inner(m: usize, a: &[f64], b: &[f64], e0: &[f64], e1: &[f64], j: usize) -> (f64, f64) {
    let k = (m + 1 + j) as f64;
    let (lo, hi) = ((k - 1.0) * e0[j], (k + 2.0) * e1[j]);
    (
        (0.0 + a[2 * j] * lo) - b[2 * j] * hi,
        (0.0 + a[2 * j + 1] * lo) - b[2 * j + 1] * hi,
    )
}

/// `i m w` as `Complex64` multiplies `(0, m)` by `w = (wr, wi)`.
#[inline(always)]
fn times_im(mf: f64, wr: f64, wi: f64) -> (f64, f64) {
    (0.0 * wr - mf * wi, 0.0 * wi + mf * wr)
}

/// The real and imaginary parts of `c`, interleaved.
fn reals(c: &[Complex64]) -> &[f64] {
    // SAFETY: `Complex<f64>` is `repr(C)` with fields `re`, `im` of type
    // `f64`: the layout of `[f64; 2]`, so `c` is `2 c.len()` contiguous,
    // initialised, aligned doubles, borrowed for the same lifetime.
    unsafe { std::slice::from_raw_parts(c.as_ptr() as *const f64, 2 * c.len()) }
}

/// [`reals`], writable.
fn reals_mut(c: &mut [Complex64]) -> &mut [f64] {
    // SAFETY: as in `reals`; the one mutable borrow of `c` becomes the one
    // of the result.
    unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr() as *mut f64, 2 * c.len()) }
}

/// What the per-order coefficient steps of the vector transforms share:
/// the order, the fields, where field `f` starts (`f * stride`) and
/// `eps[i] = eps_{m+i,m}` (`i = 0..=lmax - m + 2`).
struct Coeffs<'a> {
    m: usize,
    nf: usize,
    stride: usize,
    eps: &'a [f64],
}

/// Runs `f(args)` compiled for the widest instruction set of `simd` (the
/// same IEEE operations in each: no contraction into fused multiply-adds).
macro_rules! dispatch {
    ($simd:expr, $f:ident($($a:expr),*)) => {{
        #[cfg(target_arch = "x86_64")]
        {
            match $simd {
                // SAFETY: `Isa::Avx512` is only made after AVX-512F was found.
                Isa::Avx512 => unsafe { $f::avx512($($a),*) },
                // SAFETY: `Isa::Avx2` is only made after AVX2 was found.
                Isa::Avx2 => unsafe { $f::avx2($($a),*) },
                Isa::Portable => $f::body($($a),*),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = $simd;
            $f::body($($a),*)
        }
    }};
}
/// Declares `name::body` (inlined) and, on x86-64, `name::avx512` and
/// `name::avx2`: the same body compiled for those instruction sets.
macro_rules! simd_fn {
    ($(#[$m:meta])* fn $name:ident($($a:ident: $t:ty),*) $b:block) => {
        $(#[$m])*
        mod $name {
            use super::*;
            #[inline(always)]
            pub(super) fn body($($a: $t),*) $b
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx2")]
            pub(super) unsafe fn avx512($($a: $t),*) {
                body($($a),*)
            }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2")]
            pub(super) unsafe fn avx2($($a: $t),*) {
                body($($a),*)
            }
        }
    };
}

simd_fn! {
    /// The coefficients of vector synthesis for one order: `c[f nd + i]`
    /// (field `f`, `k = m + i`, `nd = nl + 1`) `= A_k + i m T_k` (`u_theta`)
    /// and `c[(nf + f) nd + i] = i m S_k - B_k` (`u_phi`; `i m S_k` alone
    /// without `t`), from `s[f stride..][..nl]` and `t[f stride..][..nl]`.
    fn synth_coeffs(cf: &Coeffs<'_>, s: &[Complex64], t: Option<&[Complex64]>, c: &mut [Complex64]) {
        let Coeffs { m, nf, stride, eps } = *cf;
        let nl = eps.len() - 2;
        let nd = nl + 1;
        let im = Complex64::new(0.0, m as f64);
        let (ct, cp) = c.split_at_mut(nf * nd);
        for f in 0..nf {
            let sf = &s[f * stride..f * stride + nl];
            let tf = t.map(|t| &t[f * stride..f * stride + nl]);
            let (ctf, cpf) = (&mut ct[f * nd..(f + 1) * nd], &mut cp[f * nd..(f + 1) * nd]);
            dtheta(m, sf, tf.map_or(Plus::Nothing, Plus::Imw), eps, ctf);
            match tf {
                Some(tf) => dtheta(m, tf, Plus::ImwMinus(sf), eps, cpf),
                None => {
                    for (o, &v) in cpf.iter_mut().zip(sf) {
                        *o = im * v;
                    }
                    cpf[nl] = im * ZERO;
                }
            }
        }
    }
}

simd_fn! {
    /// The potentials of vector analysis for one order from the Legendre
    /// sums `qr` (`Q` of the `nf` fields, then `R`, `nd = nl + 1` degrees
    /// each): `S_lm` to `s[f stride + i]`, `T_lm` to `t[f stride + i]`, `l
    /// = m + i` (see the module docs; zero at `l = 0`); `inv_ll[i] = 1 /
    /// (l (l + 1))`.
    fn anal_coeffs(
        cf: &Coeffs<'_>,
        qr: &[Complex64],
        inv_ll: &[f64],
        s: &mut [Complex64],
        t: &mut [Complex64]
    ) {
        let Coeffs { m, nf, stride, eps } = *cf;
        let nl = eps.len() - 2;
        let nd = nl + 1;
        let inv_ll = &inv_ll[..nl];
        let im = Complex64::new(0.0, m as f64);
        // The transpose of `dtheta`: sum_j V (sin dP_l) for l = m + i, with
        // `hi_i = (m + i) eps[i + 1]` and `lo_i = (m + i + 1) eps[i]`
        // (written out, no closures: see `dtheta`).
        for f in 0..nf {
            let q = &qr[f * nd..(f + 1) * nd];
            let r = &qr[(nf + f) * nd..(nf + f + 1) * nd];
            let sf = &mut s[f * stride..f * stride + nl];
            let tf = &mut t[f * stride..f * stride + nl];
            // i = 0 (l = 0 has no potentials), then the others, where the
            // lower neighbour is present.
            (sf[0], tf[0]) = if m == 0 {
                (ZERO, ZERO)
            } else {
                let h0 = m as f64 * eps[1];
                let (dq, dr) = (q[1] * h0, r[1] * h0);
                let inv = inv_ll[0];
                ((dq - im * r[0]) * inv, (-(im * q[0]) - dr) * inv)
            };
            // The others on the real and imaginary parts (so that the loop
            // vectorises), as `Complex64` computes the value at 0.
            let (qv, rv) = (reals(q), reals(r));
            let (sv, tv) = (reals_mut(&mut sf[1..]), reals_mut(&mut tf[1..]));
            let mf = m as f64;
            for j in 0..nl - 1 {
                let i = j + 1;
                let (h, l) = ((m + i) as f64 * eps[i + 1], ((m + i) as f64 + 1.0) * eps[i]);
                let (a, b) = (2 * i + 2, 2 * i - 2);
                let (dq0, dq1) = (qv[a] * h - qv[b] * l, qv[a + 1] * h - qv[b + 1] * l);
                let (dr0, dr1) = (rv[a] * h - rv[b] * l, rv[a + 1] * h - rv[b + 1] * l);
                // i m r and i m q: (0, m) times r, q.
                let (imr0, imr1) = times_im(mf, rv[2 * i], rv[2 * i + 1]);
                let (imq0, imq1) = times_im(mf, qv[2 * i], qv[2 * i + 1]);
                let inv = inv_ll[i];
                (sv[2 * j], sv[2 * j + 1]) = ((dq0 - imr0) * inv, (dq1 - imr1) * inv);
                (tv[2 * j], tv[2 * j + 1]) = ((-imq0 - dr0) * inv, (-imq1 - dr1) * inv);
            }
        }
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
        let mut st = take_aligned(nf * self.spectral_len());
        let mut sp = take_aligned(nf * self.spectral_len());
        self.vector_legendre_synthesis_impl(nf, sph, tor, &mut st, &mut sp, par);
        let r = self
            .phi_synthesis(&st, vt, par)
            .and_then(|()| self.phi_synthesis(&sp, vp, par));
        give_aligned(st);
        give_aligned(sp);
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
        let mut st = take_aligned(nf * self.spectral_len());
        let mut sp = take_aligned(nf * self.spectral_len());
        let r = self
            .phi_analysis(vt, &mut st, par)
            .and_then(|()| self.phi_analysis(vp, &mut sp, par))
            .and_then(|()| self.vector_legendre_analysis(&st, &sp, sph, tor, par));
        give_aligned(st);
        give_aligned(sp);
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
        let (nlm, nt) = (self.nlm(), self.ntheta());
        // Order m of field f at `f * nlm + m_offset(m)`: read in place.
        let one = |(m, (ot, op)): (usize, (&mut [Complex64], &mut [Complex64]))| {
            let off = self.m_offset(m);
            let t = tor.map(|t| &t[off..]);
            self.vector_synth_m(m, nf, &sph[off..], t, nlm, ot, op);
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
        let (lmax, nt, nlm) = (self.lmax(), self.ntheta(), self.nlm());
        let chunk = nf * nt;
        if par == Parallelism::None {
            // In order: straight into `sph` and `tor`.
            for (m, (it, ip)) in spec_t.chunks(chunk).zip(spec_p.chunks(chunk)).enumerate() {
                let off = self.m_offset(m);
                let (s, t) = (&mut sph[off..], &mut tor[off..]);
                self.vector_anal_m(m, nf, it, ip, s, t, nlm);
            }
            return Ok(());
        }
        let one = |(m, (it, ip)): (usize, (&[Complex64], &[Complex64]))| {
            let nl = lmax - m + 1;
            let mut s = vec![ZERO; nf * nl];
            let mut t = vec![ZERO; nf * nl];
            self.vector_anal_m(m, nf, it, ip, &mut s, &mut t, nl);
            (s, t)
        };
        // Rayon (the serial case returned above): each order into buffers
        // of its own, copied into place after.
        let per_m: Vec<(Vec<Complex64>, Vec<Complex64>)> = spec_t
            .par_chunks(chunk)
            .zip(spec_p.par_chunks(chunk))
            .enumerate()
            .with_max_len(1)
            .map(one)
            .collect();
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
        let nl = self.lmax() - m + 1;
        self.vector_synth_m(m, nf, sph_l, Some(tor_l), nl, out_t, out_p);
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
        self.vector_anal_m(m, nf, in_t, in_p, sph_l, tor_l, nl);
        Ok(())
    }

    /// One order of vector synthesis (lengths checked by the callers):
    /// field `f`'s `S_lm`, `T_lm` (`l = m..=lmax`) at `s[f * stride..]`,
    /// `t[f * stride..]`.
    #[allow(clippy::too_many_arguments)]
    fn vector_synth_m(
        &self,
        m: usize,
        nf: usize,
        s: &[Complex64],
        t: Option<&[Complex64]>,
        stride: usize,
        out_t: &mut [Complex64],
        out_p: &mut [Complex64],
    ) {
        let (lmax, nt) = (self.lmax(), self.ntheta());
        let nl = lmax - m + 1;
        let nd = nl + 1; // degrees m..=lmax+1
        let eps = self.eps_m(m);
        // Fields 0..nf: sin theta U_theta; nf..2nf: sin theta U_phi.
        let mut c = take(2 * nf * nd);
        let cf = Coeffs { m, nf, stride, eps };
        dispatch!(self.simd(), synth_coeffs(&cf, s, t, &mut c));
        self.synth_kernel_vector(m, nf, &c, &mut out_t[..nf * nt], &mut out_p[..nf * nt]);
        give(c);
    }

    /// One order of vector analysis (lengths checked by the callers):
    /// field `f`'s `S_lm`, `T_lm` (`l = m..=lmax`) to `s[f * stride..]`,
    /// `t[f * stride..]`.
    #[allow(clippy::too_many_arguments)]
    fn vector_anal_m(
        &self,
        m: usize,
        nf: usize,
        in_t: &[Complex64],
        in_p: &[Complex64],
        s: &mut [Complex64],
        t: &mut [Complex64],
        stride: usize,
    ) {
        let (lmax, nt) = (self.lmax(), self.ntheta());
        let nl = lmax - m + 1;
        let nd = nl + 1;
        let (eps, inv_ll) = (self.eps_m(m), &self.inv_ll()[m..=lmax]);
        // Fields 0..nf: Q; nf..2nf: R; degrees m..=lmax+1.
        let mut qr = take(2 * nf * nd);
        self.anal_kernel_vector(m, nf, &in_t[..nf * nt], &in_p[..nf * nt], &mut qr);
        let cf = Coeffs { m, nf, stride, eps };
        dispatch!(self.simd(), anal_coeffs(&cf, &qr, inv_ll, s, t));
        give(qr);
    }
}
