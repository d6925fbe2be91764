//! Initial states and diagnostics: energies in the benchmark's
//! normalisation, the mid-depth equatorial values of Christensen et al.
//! (2001), and the state hash.
//!
//! Reductions over ranks are exact: every rank writes the values of its
//! own modes into an array indexed by the serial `(l, m)` index (zeros
//! elsewhere), the arrays are summed (one non-zero term per entry, so the
//! sum is that term whatever the order), and every rank then adds the
//! entries in serial order. The diagnostics are therefore the same bits
//! on every rank count and process grid.

use std::f64::consts::PI;

use anyhow::Result;
use comm::{Communicator, ReduceOp};
use num_complex::Complex64;
use serde::{Deserialize, Serialize};

use crate::solver::{Solver, ZERO};

/// Volume-averaged energies (`1/(2V) int |u|^2 dV`, and `1/(2 V E Pm) int
/// |B|^2 dV` for the field), with the poloidal/toroidal and axisymmetric
/// (`m = 0`) parts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Energies {
    /// Kinetic energy.
    pub ekin: f64,
    /// Its poloidal part.
    pub ekin_pol: f64,
    /// Its toroidal part.
    pub ekin_tor: f64,
    /// Axisymmetric poloidal kinetic energy.
    pub ekin_pol_axi: f64,
    /// Axisymmetric toroidal kinetic energy.
    pub ekin_tor_axi: f64,
    /// Magnetic energy.
    pub emag: f64,
    /// Its poloidal part.
    pub emag_pol: f64,
    /// Its toroidal part.
    pub emag_tor: f64,
    /// Axisymmetric poloidal magnetic energy.
    pub emag_pol_axi: f64,
    /// Axisymmetric toroidal magnetic energy.
    pub emag_tor_axi: f64,
}

/// Values at mid-depth in the equatorial plane where `u_r = 0` and
/// `du_r/dphi > 0` (the benchmark's local diagnostics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Midpoint {
    /// Longitude of the point.
    pub phi: f64,
    /// Temperature.
    pub temperature: f64,
    /// Azimuthal velocity.
    pub u_phi: f64,
    /// Colatitudinal field.
    pub b_theta: f64,
}

impl Solver {
    /// The serial index of `(l, m)` in an array over all modes.
    fn serial(&self, l: usize, m: usize) -> usize {
        self.dist.sht().lm_index(l, m)
    }

    fn nlm(&self) -> usize {
        self.dist.sht().nlm()
    }

    /// `W` (or the first `nr` values of a column block) and its radial derivative for `(l, m)`.
    fn column_and_derivative(
        &self,
        re: &[f64],
        im: &[f64],
    ) -> Result<(Vec<Complex64>, Vec<Complex64>)> {
        let nr = self.res.nr;
        let f: Vec<Complex64> = (0..nr).map(|k| Complex64::new(re[k], im[k])).collect();
        let mut d = vec![Complex64::new(0.0, 0.0); nr];
        self.cheb
            .derivative(&f, &mut d, chebyshev::Parallelism::None)?;
        Ok((f, d))
    }

    /// The energies (collective; the same bits on every rank count).
    pub fn energies(&self, comm: &dyn Communicator) -> Result<Energies> {
        let nlm = self.nlm();
        let w = self.grid.clenshaw_curtis_weights();
        let r = self.grid.r();
        let nr = self.res.nr;
        // Per mode: kinetic poloidal, toroidal; magnetic poloidal, toroidal.
        let mut a = vec![0.0; 4 * nlm];
        for &i in &self.kept {
            let (l, m) = self.tuples[i];
            if l == 0 {
                continue;
            }
            let ll = (l * (l + 1)) as f64;
            let fac = if m == 0 { 1.0 } else { 2.0 };
            let idx = self.serial(l, m);
            let pol = |re: &[f64], im: &[f64]| -> Result<f64> {
                let (f, d) = self.column_and_derivative(re, im)?;
                Ok((0..nr)
                    .map(|k| w[k] * ll * (ll / (r[k] * r[k]) * f[k].norm_sqr() + d[k].norm_sqr()))
                    .sum::<f64>())
            };
            let tor = |re: &[f64], im: &[f64]| -> f64 {
                (0..nr)
                    .map(|k| w[k] * ll * (re[k] * re[k] + im[k] * im[k]))
                    .sum()
            };
            let (re, im) = self.fields.wpt.mode(l, m).expect("held mode");
            a[idx] = fac * pol(re, im)?;
            let (re, im) = self.fields.z.mode(l, m).expect("held mode");
            a[nlm + idx] = fac * tor(re, im);
            if let (Some(g), Some(h)) = (&self.fields.g, &self.fields.h) {
                let (re, im) = g.mode(l, m).expect("held mode");
                a[2 * nlm + idx] = fac * pol(re, im)?;
                let (re, im) = h.mode(l, m).expect("held mode");
                a[3 * nlm + idx] = fac * tor(re, im);
            }
        }
        comm.allreduce_f64(&mut a, ReduceOp::Sum)?;
        let (ri, ro) = self.res.radii();
        let vol = 4.0 * PI / 3.0 * (ro.powi(3) - ri.powi(3));
        let kin = 1.0 / (2.0 * vol);
        let mag = kin * self.phys.lorentz();
        let sht = self.dist.sht();
        let (mut tot, mut axi) = ([0.0; 4], [0.0; 4]);
        for q in 0..4 {
            for m in 0..=sht.mmax() {
                for l in m.max(1)..=sht.lmax() {
                    let v = a[q * nlm + sht.lm_index(l, m)];
                    tot[q] += v;
                    if m == 0 {
                        axi[q] += v;
                    }
                }
            }
        }
        Ok(Energies {
            ekin: kin * (tot[0] + tot[1]),
            ekin_pol: kin * tot[0],
            ekin_tor: kin * tot[1],
            ekin_pol_axi: kin * axi[0],
            ekin_tor_axi: kin * axi[1],
            emag: mag * (tot[2] + tot[3]),
            emag_pol: mag * tot[2],
            emag_tor: mag * tot[3],
            emag_pol_axi: mag * axi[2],
            emag_tor_axi: mag * axi[3],
        })
    }

    /// The Fourier coefficients (per order) on the equator at the radii
    /// `radii` (collective): per radius `[u_r, T, u_phi, B_theta, u_theta,
    /// B_r, B_phi]`, each `mmax + 1` complex values `c_m` of
    /// `f(phi) = c_0 + 2 Re sum_{m > 0} c_m e^{i m phi}`.
    pub fn equator(
        &self,
        comm: &dyn Communicator,
        radii: &[f64],
    ) -> Result<Vec<[Vec<Complex64>; 7]>> {
        const Q: usize = 7;
        let nlm = self.nlm();
        let nr = self.res.nr;

        let nrad = radii.len();
        let wts: Vec<Vec<f64>> = radii
            .iter()
            .map(|&r| self.grid.interpolation_weights(r))
            .collect();
        // Per radius and mode: W, W'/r, Z/r, T, G, G'/r, H/r (complex).
        let mut a = vec![0.0; 2 * Q * nlm * nrad];
        let slot =
            |ir: usize, q: usize, part: usize, idx: usize| ((ir * Q + q) * 2 + part) * nlm + idx;
        for &i in &self.kept {
            let (l, m) = self.tuples[i];
            let idx = self.serial(l, m);
            let (re, im) = self.fields.wpt.mode(l, m).expect("held mode");
            let (w, dw) = self.column_and_derivative(re, im)?;
            let t = self.column_and_derivative(&re[2 * nr..], &im[2 * nr..])?.0;
            let (re, im) = self.fields.z.mode(l, m).expect("held mode");
            let z = self.column_and_derivative(re, im)?.0;
            let mag = match (&self.fields.g, &self.fields.h) {
                (Some(g), Some(h)) => {
                    let (re, im) = g.mode(l, m).expect("held mode");
                    let (gg, dg) = self.column_and_derivative(re, im)?;
                    let (re, im) = h.mode(l, m).expect("held mode");
                    let hh = self.column_and_derivative(re, im)?.0;
                    Some((gg, dg, hh))
                }
                _ => None,
            };
            for (ir, (&rr, wt)) in radii.iter().zip(&wts).enumerate() {
                let at = |f: &[Complex64]| -> Complex64 { (0..nr).map(|k| f[k] * wt[k]).sum() };
                let mut vals = [at(&w), at(&dw) / rr, at(&z) / rr, at(&t), ZERO, ZERO, ZERO];
                if let Some((gg, dg, hh)) = &mag {
                    vals[4] = at(gg);
                    vals[5] = at(dg) / rr;
                    vals[6] = at(hh) / rr;
                }
                for (q, v) in vals.iter().enumerate() {
                    a[slot(ir, q, 0, idx)] = v.re;
                    a[slot(ir, q, 1, idx)] = v.im;
                }
            }
        }
        comm.allreduce_f64(&mut a, ReduceOp::Sum)?;
        let sht = self.dist.sht();
        let (lmax, mmax) = (sht.lmax(), sht.mmax());
        let mut result = Vec::with_capacity(nrad);
        let mut p = vec![0.0; lmax + 2];
        // Legendre values and theta derivatives on the equator, per order.
        let mut tables = Vec::with_capacity(mmax + 1);
        for m in 0..=mmax {
            let pm = &mut p[..lmax + 2 - m];
            sht::normalized_legendre(lmax + 1, m, PI / 2.0, pm)?;
            let pbar = |l: usize| if l < m { 0.0 } else { pm[l - m] };
            let eps = |l: usize| {
                if l <= m {
                    0.0
                } else {
                    let (l, m) = (l as f64, m as f64);
                    ((l * l - m * m) / (4.0 * l * l - 1.0)).sqrt()
                }
            };
            let row: Vec<(f64, f64)> = (m..=lmax)
                .map(|l| {
                    let lf = l as f64;
                    let below = if l > m { pbar(l - 1) } else { 0.0 };
                    (
                        pbar(l),
                        lf * eps(l + 1) * pbar(l + 1) - (lf + 1.0) * eps(l) * below,
                    )
                })
                .collect();
            tables.push(row);
        }
        for (ir, &rr) in radii.iter().enumerate() {
            let get = |q: usize, idx: usize| {
                Complex64::new(a[slot(ir, q, 0, idx)], a[slot(ir, q, 1, idx)])
            };
            let mut out: [Vec<Complex64>; Q] = std::array::from_fn(|_| vec![ZERO; mmax + 1]);
            for m in 0..=mmax {
                let im = Complex64::new(0.0, m as f64);
                for l in m..=lmax {
                    let idx = sht.lm_index(l, m);
                    let ll = (l * (l + 1)) as f64;
                    let (pl, dp) = tables[m][l - m];
                    let (su, tu) = (get(1, idx), get(2, idx));
                    let (sb, tb) = (get(5, idx), get(6, idx));
                    out[0][m] += get(0, idx) * (ll / (rr * rr)) * pl;
                    out[1][m] += get(3, idx) * pl;
                    out[2][m] += im * su * pl - tu * dp;
                    out[3][m] += sb * dp + im * tb * pl;
                    out[4][m] += su * dp + im * tu * pl;
                    out[5][m] += get(4, idx) * (ll / (rr * rr)) * pl;
                    out[6][m] += im * sb * pl - tb * dp;
                }
            }
            result.push(out);
        }
        Ok(result)
    }

    /// The mid-depth equatorial diagnostics (collective): the zero of
    /// `u_r` with `du_r/dphi > 0` nearest to `near` (the smallest
    /// longitude when `None`), and `T`, `u_phi`, `B_theta` there. `None`
    /// when `u_r` has no such zero (a flow at rest).
    pub fn midpoint(&self, comm: &dyn Communicator, near: Option<f64>) -> Result<Option<Midpoint>> {
        let (ri, ro) = self.res.radii();
        let c = self.equator(comm, &[0.5 * (ri + ro)])?.swap_remove(0);
        let eval = fourier;
        let n = 16 * self.res.nphi;
        let scale: f64 = c[0].iter().map(|z| z.norm()).sum();
        if scale == 0.0 {
            return Ok(None);
        }
        let mut roots = Vec::new();
        let h = 2.0 * PI / n as f64;
        let mut prev = eval(&c[0], 0.0);
        for k in 1..=n {
            let phi = k as f64 * h;
            let cur = eval(&c[0], phi);
            if prev < 0.0 && cur >= 0.0 {
                let (mut a, mut b) = (phi - h, phi);
                for _ in 0..60 {
                    let mid = 0.5 * (a + b);
                    if eval(&c[0], mid) < 0.0 {
                        a = mid;
                    } else {
                        b = mid;
                    }
                }
                roots.push((0.5 * (a + b)).rem_euclid(2.0 * PI));
            }
            prev = cur;
        }
        let dist = |a: f64, b: f64| {
            let d = (a - b).rem_euclid(2.0 * PI);
            d.min(2.0 * PI - d)
        };
        let best = match near {
            None => roots.iter().copied().reduce(f64::min),
            Some(p0) => roots
                .iter()
                .copied()
                .reduce(|a, b| if dist(b, p0) < dist(a, p0) { b } else { a }),
        };
        Ok(best.map(|phi| Midpoint {
            phi,
            temperature: eval(&c[1], phi),
            u_phi: eval(&c[2], phi),
            b_theta: eval(&c[3], phi),
        }))
    }
}

/// `c_0 + 2 Re sum_{m > 0} c_m e^{i m phi}`: a real field from its
/// coefficients of orders `m >= 0`.
pub fn fourier(c: &[Complex64], phi: f64) -> f64 {
    let mut v = c[0].re;
    for (m, cm) in c.iter().enumerate().skip(1) {
        v += 2.0 * (cm * Complex64::from_polar(1.0, m as f64 * phi)).re;
    }
    v
}

/// The signed angle from `a` to `b`, in `(-pi, pi]`.
pub fn angle_between(a: f64, b: f64) -> f64 {
    let d = (b - a).rem_euclid(2.0 * PI);
    if d > PI {
        d - 2.0 * PI
    } else {
        d
    }
}
