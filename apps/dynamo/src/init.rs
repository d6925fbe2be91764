//! Initial states: fields given on the grid and analysed, or single modes.

use anyhow::{bail, Result};
use num_complex::Complex64;

use crate::solver::Solver;

/// A field given at `(r, theta, phi)`.
pub type Scalar<'a> = &'a dyn Fn(f64, f64, f64) -> f64;
/// A vector field `(B_r, B_theta, B_phi)` given at `(r, theta, phi)`.
pub type Vector<'a> = &'a dyn Fn(f64, f64, f64) -> [f64; 3];

/// Which potential of the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Potential {
    /// Poloidal velocity `W`.
    W,
    /// Toroidal velocity `Z`.
    Z,
    /// Temperature.
    T,
    /// Poloidal field `G`.
    G,
    /// Toroidal field `H`.
    H,
}

impl Solver {
    /// Sets the state to rest with the temperature `temperature` and the
    /// magnetic field `field` (ignored without a field), both given on the
    /// grid and analysed (collective). The field's horizontal spheroidal
    /// part is implied by `B_r` (a solenoidal field), so only `B_r` and the
    /// toroidal part of `(B_theta, B_phi)` are used.
    pub fn set_from_grid(
        &mut self,
        temperature: Scalar<'_>,
        field: Option<Vector<'_>>,
    ) -> Result<()> {
        let (r0, nrl) = self.dist.levels();
        let (j0, ntl) = self.dist.latitudes();
        let nphi = self.res.nphi;
        let gl = self.dist.grid_len();
        let r = self.grid.r().to_vec();
        let theta = self.dist.sht().theta()[j0..j0 + ntl].to_vec();
        let phis: Vec<f64> = (0..nphi).map(|k| self.dist.sht().phi(k)).collect();
        let mut t = vec![0.0; gl];
        let mut b = vec![0.0; 3 * gl];
        for lr in 0..nrl {
            for lj in 0..ntl {
                for (k, &phi) in phis.iter().enumerate() {
                    let p = (lr * ntl + lj) * nphi + k;
                    let (rr, th) = (r[r0 + lr], theta[lj]);
                    t[p] = temperature(rr, th, phi);
                    if let Some(f) = field {
                        let v = f(rr, th, phi);
                        b[p] = v[0];
                        b[gl + p] = v[1];
                        b[2 * gl + p] = v[2];
                    }
                }
            }
        }
        let lvl = self.dist.level_len();
        let mut level = vec![Complex64::new(0.0, 0.0); 4 * lvl];
        {
            let (a, rest) = level.split_at_mut(2 * lvl);
            let (s, tt) = rest.split_at_mut(lvl);
            let mut both = t.clone();
            both.extend_from_slice(&b[..gl]);
            self.dist.analysis(&both, a)?;
            self.dist
                .vector_analysis(&b[gl..2 * gl], &b[2 * gl..], s, tt)?;
        }
        let lml = self.dist.lm_len();
        let mut lm = vec![Complex64::new(0.0, 0.0); 4 * lml];
        self.dist.to_lm(&level, &mut lm)?;
        let nr = self.res.nr;
        let nt = self.tuples.len();
        let magnetic = self.magnetic();
        self.fields.wpt.fill(0.0);
        self.fields.z.fill(0.0);
        for &i in &self.kept {
            let (l, m) = self.tuples[i];
            let ll = (l * (l + 1)) as f64;
            let col = |f: usize, k: usize| lm[(f * nt + i) * nr + k];
            let (re, im) = self.fields.wpt.mode_mut(l, m).expect("held mode");
            for k in 0..nr {
                re[2 * nr + k] = col(0, k).re;
                im[2 * nr + k] = col(0, k).im;
            }
            if magnetic {
                let g = self.fields.g.as_mut().expect("magnetic");
                let (re, im) = g.mode_mut(l, m).expect("held mode");
                for k in 0..nr {
                    let v = if l == 0 {
                        Complex64::new(0.0, 0.0)
                    } else {
                        col(1, k) * (r[k] * r[k] / ll)
                    };
                    re[k] = v.re;
                    im[k] = v.im;
                }
                let h = self.fields.h.as_mut().expect("magnetic");
                let (re, im) = h.mode_mut(l, m).expect("held mode");
                for k in 0..nr {
                    let v = if l == 0 {
                        Complex64::new(0.0, 0.0)
                    } else {
                        col(3, k) * r[k]
                    };
                    re[k] = v.re;
                    im[k] = v.im;
                }
            }
        }
        Ok(())
    }

    /// Sets the radial profile of one mode of one potential where this
    /// rank holds it (a no-op elsewhere); `values` has `nr` entries. Other
    /// modes are left as they are.
    pub fn set_mode(
        &mut self,
        what: Potential,
        l: usize,
        m: usize,
        values: &[Complex64],
    ) -> Result<()> {
        let nr = self.res.nr;
        if values.len() != nr {
            bail!(
                "set_mode: {} values given, expected nr = {nr}",
                values.len()
            );
        }
        let f = &mut self.fields;
        let (block, off) = match what {
            Potential::W => (Some(&mut f.wpt), 0),
            Potential::T => (Some(&mut f.wpt), 2 * nr),
            Potential::Z => (Some(&mut f.z), 0),
            Potential::G => (f.g.as_mut(), 0),
            Potential::H => (f.h.as_mut(), 0),
        };
        let Some(block) = block else {
            bail!("set_mode: {what:?} is not a field of a run without a magnetic field");
        };
        if let Some((re, im)) = block.mode_mut(l, m) {
            for k in 0..nr {
                re[off + k] = values[k].re;
                im[off + k] = values[k].im;
            }
        }
        Ok(())
    }

    /// The radial profile of one mode of one potential where this rank holds it.
    pub fn mode(&self, what: Potential, l: usize, m: usize) -> Option<Vec<Complex64>> {
        let nr = self.res.nr;
        let f = &self.fields;
        let (block, off) = match what {
            Potential::W => (Some(&f.wpt), 0),
            Potential::T => (Some(&f.wpt), 2 * nr),
            Potential::Z => (Some(&f.z), 0),
            Potential::G => (f.g.as_ref(), 0),
            Potential::H => (f.h.as_ref(), 0),
        };
        let (re, im) = block?.mode(l, m)?;
        Some(
            (0..nr)
                .map(|k| Complex64::new(re[off + k], im[off + k]))
                .collect(),
        )
    }
}

/// The benchmark's temperature: the conduction profile `ro ri / r - ri`
/// plus `21 / sqrt(17920 pi) (1 - 3x^2 + 3x^4 - x^6) sin^4(theta) cos(4 phi)`
/// with `x = 2r - ri - ro`.
pub fn benchmark_temperature(ri: f64, ro: f64) -> impl Fn(f64, f64, f64) -> f64 {
    move |r, theta, phi| {
        let x = 2.0 * r - ri - ro;
        let x2 = x * x;
        let a = 21.0 / (17920.0 * std::f64::consts::PI).sqrt();
        ro * ri / r - ri
            + a * (1.0 - 3.0 * x2 + 3.0 * x2 * x2 - x2 * x2 * x2)
                * theta.sin().powi(4)
                * (4.0 * phi).cos()
    }
}

/// The benchmark's initial field of case 1.
pub fn benchmark_field(ri: f64, ro: f64) -> impl Fn(f64, f64, f64) -> [f64; 3] {
    move |r, theta, _phi| {
        let ri4 = ri.powi(4);
        [
            5.0 / 8.0 * (8.0 * ro - 6.0 * r - 2.0 * ri4 / r.powi(3)) * theta.cos(),
            5.0 / 8.0 * (9.0 * r - 8.0 * ro - ri4 / r.powi(3)) * theta.sin(),
            5.0 * (std::f64::consts::PI * (r - ri)).sin() * (2.0 * theta).sin(),
        ]
    }
}
