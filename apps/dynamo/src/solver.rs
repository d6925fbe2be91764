//! The time loop of one rank: the state in the lm layout (all radial
//! points of the rank's `(l, m)` tuples, as [`imex::ModeBlock`]s), the
//! radial loop (spectral to grid through the distributed SHT, nonlinear
//! products, back) and the l-loop (one implicit solve per degree through
//! [`imex::Stepper`]).

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use chebyshev::{RadialGrid, Transform};
use comm::{Communicator, Protocol, ReduceOp};
use imex::{ModeBlock, ModeLayout, Scheme, StepProgress, Stepper};
use num_complex::Complex64;
use sht::{DistConfig, DistSht};

use crate::model::{Collocation, Physics};

pub(crate) const ZERO: Complex64 = Complex64::new(0.0, 0.0);

/// Resolution and geometry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resolution {
    /// Chebyshev-Gauss-Lobatto points in radius.
    pub nr: usize,
    /// Gauss latitudes.
    pub ntheta: usize,
    /// Longitudes.
    pub nphi: usize,
    /// Truncation degree.
    pub lmax: usize,
    /// Azimuthal symmetry: only orders that are multiples of `minc` are held.
    pub minc: usize,
    /// `ri / ro`.
    pub radius_ratio: f64,
}

impl Resolution {
    /// Inner and outer radius for a gap of 1.
    pub fn radii(&self) -> (f64, f64) {
        let eta = self.radius_ratio;
        (eta / (1.0 - eta), 1.0 / (1.0 - eta))
    }
}

/// How the ranks share the work.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Distribution {
    /// Ranks along the radial levels.
    pub pi_r: usize,
    /// Ranks along the latitudes (1: the 1d scheme).
    pub pi_theta: usize,
    /// Scalar components per transposition call.
    pub queue: usize,
    /// Protocol of the theta transposition.
    pub theta_protocol: Protocol,
    /// Protocol of the l transposition.
    pub l_protocol: Protocol,
}

/// The CFL controls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Courant {
    /// Courant factor: `dt <= courant * min(dr / |u_r|, dh / |u_h|)`.
    pub courant: f64,
    /// Alfven factor: the Alfven speed `|B| / sqrt(E Pm)` times this is added to the flow speed.
    pub alfven: f64,
}

/// Seconds spent in each phase since the solver was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Phases {
    /// Spherical harmonic transforms (with the theta transposition of the 2d scheme).
    pub transforms: f64,
    /// Nonlinear products and the CFL scan on the grid.
    pub products: f64,
    /// The l transpositions (lm layout to level layout and back).
    pub transpositions: f64,
    /// Radial derivatives and the assembly of the explicit terms.
    pub radial: f64,
    /// Implicit solves (and refactorisations).
    pub implicit: f64,
    /// Explicit-term evaluations.
    pub evaluations: u64,
}

/// Where a non-finite value was first found on a rank.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NanPlace {
    /// Radius.
    pub r: f64,
    /// Colatitude.
    pub theta: f64,
    /// Longitude.
    pub phi: f64,
    /// Which quantity: an input of the nonlinear products (velocity,
    /// vorticity, temperature gradient, magnetic field, current density),
    /// or the products themselves when every input is finite.
    pub what: &'static str,
    /// Every input is finite and the products overflowed (a blow-up).
    pub overflow: bool,
}

/// The state blocks of the four systems.
#[derive(Debug, Clone)]
pub struct Fields {
    /// `W`, `P`, `T` stacked (`3 Nr` per column).
    pub wpt: ModeBlock,
    /// `Z`.
    pub z: ModeBlock,
    /// `G` (absent without a field).
    pub g: Option<ModeBlock>,
    /// `H` (absent without a field).
    pub h: Option<ModeBlock>,
}

pub(crate) struct Steppers {
    wpt: Stepper,
    z: Stepper,
    g: Option<Stepper>,
    h: Option<Stepper>,
}

/// One rank's solver.
pub struct Solver {
    pub(crate) phys: Physics,
    pub(crate) res: Resolution,
    pub(crate) courant: Courant,
    pub(crate) grid: RadialGrid,
    pub(crate) cheb: Transform,
    pub(crate) dist: DistSht,
    /// Tuples of the lm layout.
    pub(crate) tuples: Vec<(usize, usize)>,
    /// Indices into `tuples` of the held (minc-compatible) modes.
    pub(crate) kept: Vec<usize>,
    pub(crate) layout3: ModeLayout,
    pub(crate) steppers: Steppers,
    /// The state.
    pub fields: Fields,
    pub(crate) n: Fields,
    /// Latitude cosines and sines of the own latitudes.
    pub(crate) cos_t: Vec<f64>,
    pub(crate) sin_t: Vec<f64>,
    /// Radial spacing per level and horizontal scale `r / sqrt(lmax (lmax + 1))`.
    pub(crate) dr: Vec<f64>,
    // Work buffers.
    pub(crate) d2_in: Vec<Complex64>,
    pub(crate) d2_d1: Vec<Complex64>,
    pub(crate) d2_d2: Vec<Complex64>,
    pub(crate) d1_in: Vec<Complex64>,
    pub(crate) d1_out: Vec<Complex64>,
    pub(crate) d1_junk: Vec<Complex64>,
    pub(crate) scratch: Vec<Complex64>,
    pub(crate) fwd_lm: Vec<Complex64>,
    pub(crate) fwd_lvl: Vec<Complex64>,
    pub(crate) bwd_lm: Vec<Complex64>,
    pub(crate) bwd_lvl: Vec<Complex64>,
    pub(crate) gs: Vec<f64>,
    pub(crate) gt: Vec<f64>,
    pub(crate) gp: Vec<f64>,
    pub(crate) os: Vec<f64>,
    pub(crate) ot: Vec<f64>,
    pub(crate) op: Vec<f64>,
    pub(crate) phases: Phases,
    pub(crate) nan: Option<NanPlace>,
}

impl std::fmt::Debug for Solver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Solver")
            .field("physics", &self.phys)
            .field("resolution", &self.res)
            .field("dist", &self.dist)
            .finish_non_exhaustive()
    }
}

/// Fields on the grid, forward: scalars and vectors.
fn forward_counts(magnetic: bool) -> (usize, usize) {
    if magnetic {
        (6, 5)
    } else {
        (4, 3)
    }
}

fn backward_counts(magnetic: bool) -> (usize, usize) {
    if magnetic {
        (3, 2)
    } else {
        (2, 1)
    }
}

impl Solver {
    /// Builds the solver (collective): the distributed transform, the
    /// operators of every held degree and the steppers. The state is zero.
    pub fn new(
        comm: &dyn Communicator,
        phys: Physics,
        res: Resolution,
        dist: Distribution,
        scheme: Scheme,
        courant: Courant,
    ) -> Result<Self> {
        let (ri, ro) = res.radii();
        let grid = RadialGrid::new(res.nr, ri, ro).context("radial grid")?;
        let cfg = DistConfig {
            ntheta: res.ntheta,
            nphi: res.nphi,
            lmax: Some(res.lmax),
            nr: res.nr,
            pi_r: dist.pi_r,
            pi_theta: dist.pi_theta,
            queue: dist.queue,
            theta_protocol: dist.theta_protocol,
            l_protocol: dist.l_protocol,
            parallelism: sht::Parallelism::None,
        };
        let sht = DistSht::new(comm, &cfg).context("distributed spherical harmonic transform")?;
        let tuples = sht.lm_tuples().to_vec();
        let kept: Vec<usize> = (0..tuples.len())
            .filter(|&i| tuples[i].1 % res.minc == 0)
            .collect();
        let mut degrees: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for &i in &kept {
            degrees.entry(tuples[i].0).or_default().push(tuples[i].1);
        }
        for ms in degrees.values_mut() {
            ms.sort_unstable();
        }
        let nr = res.nr;
        let layout3 = ModeLayout::new(3 * nr, degrees.clone())?;
        let layout1 = ModeLayout::new(nr, degrees.clone())?;
        let col = Collocation::new(&grid);
        let (mut wpt, mut z, mut g, mut h) = (vec![], vec![], vec![], vec![]);
        for &l in degrees.keys() {
            let ops = col.degree(l, &phys);
            wpt.push(ops.wpt);
            z.push(ops.z);
            g.push(ops.g);
            h.push(ops.h);
        }
        let magnetic = phys.magnetic_prandtl.is_some();
        let mk = |layout: &ModeLayout, ops| Stepper::new(scheme.clone(), layout.clone(), ops);
        let steppers = Steppers {
            wpt: mk(&layout3, wpt)?,
            z: mk(&layout1, z)?,
            g: if magnetic {
                Some(mk(&layout1, g)?)
            } else {
                None
            },
            h: if magnetic {
                Some(mk(&layout1, h)?)
            } else {
                None
            },
        };
        let blank = || Fields {
            wpt: ModeBlock::zeros(&layout3),
            z: ModeBlock::zeros(&layout1),
            g: magnetic.then(|| ModeBlock::zeros(&layout1)),
            h: magnetic.then(|| ModeBlock::zeros(&layout1)),
        };
        let (fields, n) = (blank(), blank());
        let (j0, nj) = sht.latitudes();
        let theta = &sht.sht().theta()[j0..j0 + nj];
        let cos_t = sht.sht().cos_theta()[j0..j0 + nj].to_vec();
        let sin_t = theta.iter().map(|t| t.sin()).collect();
        let r = grid.r();
        let dr = (0..nr)
            .map(|k| {
                let a = if k > 0 {
                    r[k - 1] - r[k]
                } else {
                    f64::INFINITY
                };
                let b = if k + 1 < nr {
                    r[k] - r[k + 1]
                } else {
                    f64::INFINITY
                };
                a.min(b)
            })
            .collect();
        let nt = tuples.len();
        let (ns, nv) = forward_counts(magnetic);
        let (nsb, nvb) = backward_counts(magnetic);
        let (lml, lvl, gl) = (sht.lm_len(), sht.level_len(), sht.grid_len());
        let cheb = Transform::new(&grid);
        let scratch = vec![ZERO; cheb.scratch_len::<Complex64>(chebyshev::Parallelism::None)];
        Ok(Solver {
            phys,
            res,
            courant,
            cheb,
            dist: sht,
            kept,
            layout3,
            steppers,
            fields,
            n,
            cos_t,
            sin_t,
            dr,
            d2_in: vec![ZERO; 2 * nt * nr],
            d2_d1: vec![ZERO; 2 * nt * nr],
            d2_d2: vec![ZERO; 2 * nt * nr],
            d1_in: vec![ZERO; 3 * nt * nr],
            d1_out: vec![ZERO; 3 * nt * nr],
            d1_junk: vec![ZERO; 3 * nt * nr],
            scratch,
            fwd_lm: vec![ZERO; (ns + 2 * nv) * lml],
            fwd_lvl: vec![ZERO; (ns + 2 * nv) * lvl],
            bwd_lm: vec![ZERO; (nsb + 2 * nvb) * lml],
            bwd_lvl: vec![ZERO; (nsb + 2 * nvb) * lvl],
            gs: vec![0.0; ns * gl],
            gt: vec![0.0; nv * gl],
            gp: vec![0.0; nv * gl],
            os: vec![0.0; nsb * gl],
            ot: vec![0.0; nvb * gl],
            op: vec![0.0; nvb * gl],
            tuples,
            grid,
            phases: Phases::default(),
            nan: None,
        })
    }

    /// The physical parameters.
    pub fn physics(&self) -> &Physics {
        &self.phys
    }

    /// The resolution.
    pub fn resolution(&self) -> &Resolution {
        &self.res
    }

    /// The radial grid.
    pub fn radial(&self) -> &RadialGrid {
        &self.grid
    }

    /// The distributed transform.
    pub fn dist(&self) -> &DistSht {
        &self.dist
    }

    /// The tuples of the lm layout.
    pub fn tuples(&self) -> &[(usize, usize)] {
        &self.tuples
    }

    /// Indices of the held tuples.
    pub fn kept(&self) -> &[usize] {
        &self.kept
    }

    /// Whether the run has a magnetic field.
    pub fn magnetic(&self) -> bool {
        self.phys.magnetic_prandtl.is_some()
    }

    /// Time spent per phase.
    pub fn phases(&self) -> Phases {
        self.phases
    }

    /// The simulation time.
    pub fn time(&self) -> f64 {
        self.steppers.wpt.time()
    }

    /// Completed steps.
    pub fn steps(&self) -> u64 {
        self.steppers.wpt.steps()
    }

    /// The steppers, for checkpoints: `wpt`, `z`, `g`, `h`.
    pub fn steppers_mut(
        &mut self,
    ) -> (
        &mut Stepper,
        &mut Stepper,
        Option<&mut Stepper>,
        Option<&mut Stepper>,
    ) {
        let s = &mut self.steppers;
        (&mut s.wpt, &mut s.z, s.g.as_mut(), s.h.as_mut())
    }

    /// Sets the inner-boundary temperature boundary value (`T = 1` at
    /// `ri`, `T = 0` at `ro`) of the held `(0, 0)` mode.
    pub fn set_temperature_boundaries(&mut self) -> Result<()> {
        if self.layout3.orders(0).is_some_and(|ms| ms.contains(&0)) {
            let inner = Complex64::new((4.0 * std::f64::consts::PI).sqrt(), 0.0);
            // Boundary rows of W, P, T for l = 0: 2 nr rows of W and P,
            // then the two of T (outer, inner).
            let n = 2 * self.res.nr;
            self.steppers.wpt.set_boundary_value(0, 0, n + 1, inner)?;
        }
        Ok(())
    }

    /// Gathers the state of tuple `i` into the forward derivative buffers.
    fn gather(&mut self) {
        let (nr, nt) = (self.res.nr, self.tuples.len());
        self.d2_in.fill(ZERO);
        self.d1_in.fill(ZERO);
        let f = &self.fields;
        for &i in &self.kept {
            let (l, m) = self.tuples[i];
            let (re, im) = f.wpt.mode(l, m).expect("held mode");
            for k in 0..nr {
                self.d2_in[i * nr + k] = Complex64::new(re[k], im[k]);
                self.d1_in[(nt + i) * nr + k] = Complex64::new(re[2 * nr + k], im[2 * nr + k]);
            }
            let (re, im) = f.z.mode(l, m).expect("held mode");
            for k in 0..nr {
                self.d1_in[i * nr + k] = Complex64::new(re[k], im[k]);
            }
            if let (Some(g), Some(h)) = (&f.g, &f.h) {
                let (re, im) = g.mode(l, m).expect("held mode");
                for k in 0..nr {
                    self.d2_in[(nt + i) * nr + k] = Complex64::new(re[k], im[k]);
                }
                let (re, im) = h.mode(l, m).expect("held mode");
                for k in 0..nr {
                    self.d1_in[(2 * nt + i) * nr + k] = Complex64::new(re[k], im[k]);
                }
            }
        }
    }

    /// The forward half of the radial loop: radial derivatives, the
    /// quantities of the grid in the lm layout, the l transposition and
    /// the syntheses; the grid values are then in [`grid_fields`](Self::grid_fields).
    fn synthesize(&mut self) -> Result<()> {
        let t0 = Instant::now();
        let magnetic = self.magnetic();
        let (nr, nt) = (self.res.nr, self.tuples.len());
        let par = chebyshev::Parallelism::None;
        self.gather();
        // Radial derivatives: W (and G) twice, Z, T (and H) once.
        let n2 = if magnetic { 2 } else { 1 };
        let n1 = if magnetic { 3 } else { 2 };
        self.cheb.derivatives_with_scratch(
            &self.d2_in[..n2 * nt * nr],
            &mut self.d2_d1[..n2 * nt * nr],
            &mut self.d2_d2[..n2 * nt * nr],
            &mut self.scratch,
            par,
        )?;
        self.cheb.derivative_with_scratch(
            &self.d1_in[..n1 * nt * nr],
            &mut self.d1_out[..n1 * nt * nr],
            &mut self.scratch,
            par,
        )?;
        // The quantities to synthesise, in the lm layout: scalars, then
        // the spheroidal and the toroidal potentials of the vectors.
        let (ns, nv) = forward_counts(magnetic);
        let lml = self.dist.lm_len();
        let r = self.grid.r();
        {
            let q = &mut self.fwd_lm;
            let field = |f: usize, i: usize, k: usize| (f * nt + i) * nr + k;
            let sph = |v: usize| ns + v;
            let tor = |v: usize| ns + nv + v;
            for i in 0..nt {
                let (l, _) = self.tuples[i];
                let ll = (l * (l + 1)) as f64;
                for k in 0..nr {
                    let (rk, c) = (r[k], i * nr + k);
                    let w = self.d2_in[c];
                    let (dw, ddw) = (self.d2_d1[c], self.d2_d2[c]);
                    let z = self.d1_in[c];
                    let dz = self.d1_out[c];
                    let t = self.d1_in[nt * nr + c];
                    let dt = self.d1_out[nt * nr + c];
                    q[field(0, i, k)] = w * (ll / (rk * rk));
                    q[field(1, i, k)] = z * (ll / (rk * rk));
                    q[field(2, i, k)] = t;
                    q[field(3, i, k)] = dt;
                    q[field(sph(0), i, k)] = dw / rk;
                    q[field(tor(0), i, k)] = z / rk;
                    q[field(sph(1), i, k)] = dz / rk;
                    q[field(tor(1), i, k)] = -(ddw - w * (ll / (rk * rk))) / rk;
                    q[field(sph(2), i, k)] = t / rk;
                    q[field(tor(2), i, k)] = ZERO;
                    if magnetic {
                        let g = self.d2_in[nt * nr + c];
                        let (dg, ddg) = (self.d2_d1[nt * nr + c], self.d2_d2[nt * nr + c]);
                        let h = self.d1_in[2 * nt * nr + c];
                        let dh = self.d1_out[2 * nt * nr + c];
                        q[field(4, i, k)] = g * (ll / (rk * rk));
                        q[field(5, i, k)] = h * (ll / (rk * rk));
                        q[field(sph(3), i, k)] = dg / rk;
                        q[field(tor(3), i, k)] = h / rk;
                        q[field(sph(4), i, k)] = dh / rk;
                        q[field(tor(4), i, k)] = -(ddg - g * (ll / (rk * rk))) / rk;
                    }
                }
            }
            debug_assert_eq!(q.len(), (ns + 2 * nv) * lml);
        }
        let t1 = Instant::now();
        self.dist.from_lm(&self.fwd_lm, &mut self.fwd_lvl)?;
        let t2 = Instant::now();
        let lvl = self.dist.level_len();
        let (sc, rest) = self.fwd_lvl.split_at(ns * lvl);
        let (sp, to) = rest.split_at(nv * lvl);
        self.dist.synthesis(sc, &mut self.gs)?;
        self.dist
            .vector_synthesis(sp, to, &mut self.gt, &mut self.gp)?;
        let t3 = Instant::now();
        let ph = &mut self.phases;
        ph.radial += (t1 - t0).as_secs_f64();
        ph.transpositions += (t2 - t1).as_secs_f64();
        ph.transforms += (t3 - t2).as_secs_f64();
        Ok(())
    }

    /// The grid values of the last synthesis ([`to_grid`](Self::to_grid)):
    /// the scalars `u_r, w_r, T, dT/dr` (then `B_r, j_r` with a field), one
    /// field of `grid_len` after the other, and the theta and the phi
    /// components of the vectors `u, w, grad T` (then `B, j`).
    pub fn grid_fields(&self) -> (&[f64], &[f64], &[f64]) {
        (&self.gs, &self.gt, &self.gp)
    }

    /// Synthesises the current state on the grid (collective).
    pub fn to_grid(&mut self) -> Result<()> {
        self.synthesize()
    }

    /// Evaluates the explicit terms of the current state into `self.n`;
    /// with `cfl`, also the CFL limit (collective) and the NaN check.
    /// Returns the CFL limit (infinite without `cfl`).
    fn explicit(&mut self, comm: &dyn Communicator, cfl: bool) -> Result<f64> {
        self.synthesize()?;
        let magnetic = self.magnetic();
        let lvl = self.dist.level_len();
        let t3 = Instant::now();
        let limit_rate = self.products(cfl);
        let t4 = Instant::now();
        let (nsb, nvb) = backward_counts(magnetic);
        {
            let (sc, rest) = self.bwd_lvl.split_at_mut(nsb * lvl);
            let (sp, to) = rest.split_at_mut(nvb * lvl);
            self.dist.analysis(&self.os, sc)?;
            self.dist.vector_analysis(&self.ot, &self.op, sp, to)?;
        }
        let t5 = Instant::now();
        self.dist.to_lm(&self.bwd_lvl, &mut self.bwd_lm)?;
        let t6 = Instant::now();
        self.assemble(nsb, nvb)?;
        let t7 = Instant::now();
        let ph = &mut self.phases;
        ph.radial += (t7 - t6).as_secs_f64();
        ph.transpositions += (t6 - t5).as_secs_f64();
        ph.transforms += (t5 - t4).as_secs_f64();
        ph.products += (t4 - t3).as_secs_f64();
        ph.evaluations += 1;
        if !cfl {
            return Ok(f64::INFINITY);
        }
        // One reduction: the largest rate and whether any rank saw a NaN.
        let mut v = [limit_rate, if self.nan.is_some() { 1.0 } else { 0.0 }];
        comm.allreduce_f64(&mut v, ReduceOp::Max)?;
        if v[1] > 0.0 {
            let step = self.steps() + 1;
            return Err(match self.nan {
                Some(p) if p.overflow => anyhow!(
                    "the nonlinear products overflowed (blow-up) in step {step} (t = {:.6e}) at r = {:.6}, theta = {:.6}, phi = {:.6} (rank {}): every input there is finite; lower dt, courant or the forcing",
                    self.time(),
                    p.r,
                    p.theta,
                    p.phi,
                    comm.rank()
                ),
                Some(p) => anyhow!(
                    "non-finite {} in step {step} (t = {:.6e}) at r = {:.6}, theta = {:.6}, phi = {:.6} (rank {})",
                    p.what,
                    self.time(),
                    p.r,
                    p.theta,
                    p.phi,
                    comm.rank()
                ),
                None => anyhow!(
                    "non-finite values on another rank in step {step} (t = {:.6e})",
                    self.time()
                ),
            });
        }
        let limit = if v[0] > 0.0 {
            self.courant.courant / v[0]
        } else {
            f64::INFINITY
        };
        Ok(limit)
    }

    /// The nonlinear products on the own grid points; returns the largest
    /// CFL rate (speed over spacing), and records the first non-finite value.
    fn products(&mut self, cfl: bool) -> f64 {
        let magnetic = self.magnetic();
        let (r0, nrl) = self.dist.levels();
        let (j0, ntl) = self.dist.latitudes();
        let nphi = self.res.nphi;
        let gl = self.dist.grid_len();
        let r = self.grid.r();
        let e = self.phys.ekman;
        let cor = 2.0 / e;
        let lor = self.phys.lorentz();
        let alf = if magnetic {
            self.courant.alfven * lor.sqrt()
        } else {
            0.0
        };
        let hscale = ((self.res.lmax * (self.res.lmax + 1)) as f64).sqrt();
        let k = Coefficients { cor, lor, alf };
        let mut rate: f64 = 0.0;
        let mut nan: Option<NanPlace> = None;
        let (gs, gt, gp) = (&self.gs, &self.gt, &self.gp);
        let (os, ot, op) = (&mut self.os, &mut self.ot, &mut self.op);
        for lr in 0..nrl {
            let kr = r0 + lr;
            let (rk, drk) = (r[kr], self.dr[kr]);
            let inv = [1.0 / drk, hscale / rk];
            for lj in 0..ntl {
                let cs = [self.cos_t[lj], self.sin_t[lj]];
                let b = (lr * ntl + lj) * nphi;
                fn seg(v: &[f64], at: usize, n: usize) -> &[f64] {
                    &v[at..at + n]
                }
                let row = |v, f: usize| seg(v, f * gl + b, nphi);
                let input = Row {
                    u: [row(gs, 0), row(gt, 0), row(gp, 0)],
                    w: [row(gs, 1), row(gt, 1), row(gp, 1)],
                    g: [row(gs, 3), row(gt, 2), row(gp, 2)],
                    b: if magnetic {
                        [row(gs, 4), row(gt, 3), row(gp, 3)]
                    } else {
                        [&[][..]; 3]
                    },
                    j: if magnetic {
                        [row(gs, 5), row(gt, 4), row(gp, 4)]
                    } else {
                        [&[][..]; 3]
                    },
                };
                let (os0, os1) = os.split_at_mut(gl);
                let (os1, os2) = os1.split_at_mut(gl);
                let (ot0, ot1) = ot.split_at_mut(gl);
                let (op0, op1) = op.split_at_mut(gl);
                let out = RowOut {
                    f: [
                        &mut os0[b..b + nphi],
                        &mut ot0[b..b + nphi],
                        &mut op0[b..b + nphi],
                    ],
                    adv: &mut os1[b..b + nphi],
                    v: if magnetic {
                        Some([
                            &mut os2[b..b + nphi],
                            &mut ot1[b..b + nphi],
                            &mut op1[b..b + nphi],
                        ])
                    } else {
                        None
                    },
                };
                let (m, check) = if magnetic {
                    row_products::<true>(&input, out, cs, &k, inv)
                } else {
                    row_products::<false>(&input, out, cs, &k, inv)
                };
                rate = rate.max(m);
                if cfl && !check.is_finite() && nan.is_none() {
                    let mut products = vec![&os0[b..b + nphi], &ot0[b..b + nphi]];
                    products.extend([&op0[b..b + nphi], &os1[b..b + nphi]]);
                    if magnetic {
                        products.extend([&os2[b..b + nphi], &ot1[b..b + nphi], &op1[b..b + nphi]]);
                    }
                    nan = Some(locate_nan(self.dist.sht(), &input, &products, rk, j0 + lj));
                }
            }
        }
        self.nan = nan;
        rate
    }

    /// The explicit terms of every system from the analysed products (lm layout).
    fn assemble(&mut self, nsb: usize, nvb: usize) -> Result<()> {
        let (nr, nt) = (self.res.nr, self.tuples.len());
        let r = self.grid.r();
        let magnetic = self.magnetic();
        let at = |f: usize, i: usize| (f * nt + i) * nr;
        let (sph, tor) = (|v: usize| nsb + v, |v: usize| nsb + nvb + v);
        let q = &self.bwd_lm;
        if magnetic {
            // (r S_V)' for the H equation.
            for i in 0..nt {
                for k in 0..nr {
                    self.d1_in[i * nr + k] = q[at(sph(1), i) + k] * r[k];
                }
            }
            self.cheb.derivative_with_scratch(
                &self.d1_in[..nt * nr],
                &mut self.d1_junk[..nt * nr],
                &mut self.scratch,
                chebyshev::Parallelism::None,
            )?;
        }
        for &i in &self.kept {
            let (l, m) = self.tuples[i];
            let (re, im) = self.n.wpt.mode_mut(l, m).expect("held mode");
            for k in 0..nr {
                let fr = q[at(0, i) + k];
                let sf = q[at(sph(0), i) + k] * r[k];
                let adv = q[at(1, i) + k];
                re[k] = fr.re;
                im[k] = fr.im;
                re[nr + k] = sf.re;
                im[nr + k] = sf.im;
                re[2 * nr + k] = adv.re;
                im[2 * nr + k] = adv.im;
            }
            let (re, im) = self.n.z.mode_mut(l, m).expect("held mode");
            for k in 0..nr {
                let v = q[at(tor(0), i) + k] * r[k];
                re[k] = v.re;
                im[k] = v.im;
            }
            if let (Some(g), Some(h)) = (&mut self.n.g, &mut self.n.h) {
                let (re, im) = g.mode_mut(l, m).expect("held mode");
                for k in 0..nr {
                    let v = q[at(tor(1), i) + k] * r[k];
                    re[k] = v.re;
                    im[k] = v.im;
                }
                let (re, im) = h.mode_mut(l, m).expect("held mode");
                for k in 0..nr {
                    let v = q[at(2, i) + k] - self.d1_junk[i * nr + k];
                    re[k] = v.re;
                    im[k] = v.im;
                }
            }
        }
        Ok(())
    }

    /// One step (collective). `choose` is called with the CFL limit of the
    /// current state before the step is taken; it returns the step size to
    /// use (or an error, e.g. when a fixed `dt` exceeds the limit). Returns
    /// the step size taken.
    pub fn step(
        &mut self,
        comm: &dyn Communicator,
        choose: impl FnOnce(f64) -> Result<f64>,
    ) -> Result<f64> {
        let limit = self.explicit(comm, true)?;
        let dt = choose(limit)?;
        let mut t0 = Instant::now();
        let s = &mut self.steppers;
        s.wpt.begin_step(dt)?;
        s.z.begin_step(dt)?;
        if let (Some(g), Some(h)) = (&mut s.g, &mut s.h) {
            g.begin_step(dt)?;
            h.begin_step(dt)?;
        }
        loop {
            let s = &mut self.steppers;
            let f = &mut self.fields;
            let n = &self.n;
            let p = s.wpt.advance(&mut f.wpt, &n.wpt)?;
            let pz = s.z.advance(&mut f.z, &n.z)?;
            if let (Some(g), Some(h), Some(fg), Some(fh), Some(ng), Some(nh)) =
                (&mut s.g, &mut s.h, &mut f.g, &mut f.h, &n.g, &n.h)
            {
                g.advance(fg, ng)?;
                h.advance(fh, nh)?;
            }
            if std::mem::discriminant(&p) != std::mem::discriminant(&pz) {
                bail!("internal error: the steppers disagree on the stage");
            }
            self.phases.implicit += t0.elapsed().as_secs_f64();
            match p {
                StepProgress::Done { .. } => break,
                StepProgress::NeedExplicit { .. } => {
                    self.explicit(comm, false)?;
                    t0 = Instant::now();
                }
            }
        }
        Ok(dt)
    }
}

/// The factors of the nonlinear terms.
struct Coefficients {
    /// Coriolis, `2/E`.
    cor: f64,
    /// Lorentz, `1/(E Pm)`.
    lor: f64,
    /// Alfven factor times `sqrt(1/(E Pm))`.
    alf: f64,
}

/// One latitude row of the synthesised fields: `(r, theta, phi)` components.
pub(crate) struct Row<'a> {
    u: [&'a [f64]; 3],
    w: [&'a [f64]; 3],
    g: [&'a [f64]; 3],
    b: [&'a [f64]; 3],
    j: [&'a [f64]; 3],
}

/// One latitude row of the products.
struct RowOut<'a> {
    f: [&'a mut [f64]; 3],
    adv: &'a mut [f64],
    v: Option<[&'a mut [f64]; 3]>,
}

/// The products of one row: `F = u x w - (2/E) z x u (+ (1/(E Pm)) j x B)`,
/// `-u . grad T` (and `V = u x B`). Returns the largest CFL rate (speed
/// over spacing, `inv = [1/dr, 1/dh]`) and a sum that is finite exactly
/// when every input is.
#[inline(always)]
fn row_products<const MAG: bool>(
    x: &Row<'_>,
    out: RowOut<'_>,
    [c, s]: [f64; 2],
    k: &Coefficients,
    inv: [f64; 2],
) -> (f64, f64) {
    let n = x.u[0].len();
    let [fr_o, ft_o, fp_o] = out.f;
    let adv_o = out.adv;
    let mut vo = out.v;
    let (mut rate, mut check) = (0.0f64, 0.0f64);
    for i in 0..n {
        let (ur, ut, up) = (x.u[0][i], x.u[1][i], x.u[2][i]);
        let (wr, wt, wp) = (x.w[0][i], x.w[1][i], x.w[2][i]);
        let (tr, tt, tp) = (x.g[0][i], x.g[1][i], x.g[2][i]);
        let mut fr = ut * wp - up * wt + k.cor * s * up;
        let mut ft = up * wr - ur * wp + k.cor * c * up;
        let mut fp = ur * wt - ut * wr - k.cor * (c * ut + s * ur);
        let adv = -(ur * tr + ut * tt + up * tp);
        let (mut br, mut bh) = (0.0, 0.0);
        if MAG {
            let (bbr, bt, bp) = (x.b[0][i], x.b[1][i], x.b[2][i]);
            let (jr, jt, jp) = (x.j[0][i], x.j[1][i], x.j[2][i]);
            fr += k.lor * (jt * bp - jp * bt);
            ft += k.lor * (jp * bbr - jr * bp);
            fp += k.lor * (jr * bt - jt * bbr);
            if let Some([v0, v1, v2]) = &mut vo {
                v0[i] = ut * bp - up * bt;
                v1[i] = up * bbr - ur * bp;
                v2[i] = ur * bt - ut * bbr;
            }
            br = bbr.abs();
            bh = (bt * bt + bp * bp).sqrt();
            check += jr + jt + jp;
        }
        fr_o[i] = fr;
        ft_o[i] = ft;
        fp_o[i] = fp;
        adv_o[i] = adv;
        let uh = (ut * ut + up * up).sqrt();
        let m = ((ur.abs() + k.alf * br) * inv[0]).max((uh + k.alf * bh) * inv[1]);
        rate = rate.max(m);
        check += fr + ft + fp + adv + br + bh;
    }
    (rate, check)
}

/// Where in one row of the grid the first non-finite input is; when
/// every input is finite (the products overflowed), where the first
/// non-finite product is, or else (only their sum overflowed) the largest.
fn locate_nan(sht: &sht::Sht, row: &Row<'_>, products: &[&[f64]], r: f64, j: usize) -> NanPlace {
    let n = row.u[0].len();
    let bad =
        |v: &[&[f64]]| (0..n).find(|&k| v.iter().any(|c| c.get(k).is_some_and(|x| !x.is_finite())));
    let inputs = [
        ("velocity", &row.u),
        ("vorticity", &row.w),
        ("temperature gradient", &row.g),
        ("magnetic field", &row.b),
        ("current density", &row.j),
    ];
    let found = inputs
        .iter()
        .find_map(|(what, v)| bad(&v[..]).map(|k| (*what, k, false)));
    let (what, k, overflow) = found.unwrap_or_else(|| {
        let k = bad(products).unwrap_or_else(|| {
            let size = |k: usize| products.iter().map(|c| c[k].abs()).fold(0.0, f64::max);
            (0..n)
                .max_by(|&a, &b| size(a).total_cmp(&size(b)))
                .unwrap_or(0)
        });
        ("nonlinear products", k, true)
    });
    NanPlace {
        r,
        theta: sht.theta()[j],
        phi: sht.phi(k),
        what,
        overflow,
    }
}
