//! The incompressible flow solver on a periodic MAC grid: velocity
//! components on the cell faces, pressure at the cell centres, a body force,
//! implicit diffusion through `multigrid` (one Helmholtz solve per
//! component) and an incremental projection (MG-preconditioned CG on the
//! cut-cell or staircase pressure operator).
//!
//! One step from `u^n`, `p^n`:
//!
//! ```text
//! (1/dt - nu lap) u*  = u^n/dt - grad p^n - N + f w      (fluid velocity points; u* = 0 elsewhere)
//! -div(A grad phi)    = -div(A u*) / dt                   (A: apertures)
//! u^{n+1} = u* - dt grad phi,   p^{n+1} = p^n + phi
//! ```
//!
//! with `N` the centred advective term `(u . grad) u` (Navier-Stokes:
//! forward Euler on the first step, then Adams-Bashforth 2; Stokes: 0), `w`
//! the fluid fraction of the velocity's control volume. No-slip walls: the
//! Laplacian's couplings across a wall are closed and `nu / (t h^2)` is
//! added to the diagonal (the linear extrapolation through the wall point
//! at fraction `t` of the spacing, Gibou et al. 2002). Every operation on
//! a point reads the same operands in the same order on any
//! decomposition, and the multigrid solves are rank independent, so the
//! fields have the same bits on any rank count.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use comm::exact::{allreduce_exact_sums, ExactSum};
use comm::{BlockDecomposition, CommExt, Communicator, IndexBox, ProcessGrid, ReduceOp};
use halo::{Exchanger, Field, FieldLayout, HaloSpec, Neighborhood, Topology};
use multigrid::{Boundary, Coefficients, Hierarchy, MgOptions, Poisson, SolveReport};

use crate::geometry::Geometry;

/// What a solver needs besides the geometry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Box length (the same on every axis).
    pub length: f64,
    /// Kinematic viscosity.
    pub nu: f64,
    /// Step size.
    pub dt: f64,
    /// Body force on the fluid.
    pub force: [f64; 3],
    /// Navier-Stokes (advective term on) or Stokes.
    pub navier_stokes: bool,
    /// Multigrid options of every solve.
    pub mg: MgOptions,
    /// Relative residual of the momentum solves.
    pub momentum_tol: f64,
    /// Relative residual of the pressure solves.
    pub pressure_tol: f64,
    /// The rotational pressure update `p += phi - nu div(A u*)` (Timmermans
    /// et al. 1996) instead of `p += phi`.
    pub rotational: bool,
}

/// Seconds per phase of the steps taken (this rank).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Phases {
    /// Right-hand sides and the three Helmholtz solves.
    pub momentum: f64,
    /// Divergence, the pressure solve and the correction.
    pub projection: f64,
    /// Halo exchanges: the solver's own and those inside the multigrid
    /// solves (waits included).
    pub halo: f64,
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StepStats {
    /// CG iterations of the three momentum solves.
    pub momentum_iterations: [usize; 3],
    /// CG iterations of the pressure solve.
    pub pressure_iterations: usize,
    /// `max |u^{n+1} - u^n| / max |u^{n+1}|`.
    pub change: f64,
    /// Seconds of the step (the slowest rank's).
    pub seconds: f64,
}

/// The four multigrid solves: on the host, or with their fine levels and
/// the step's fields on a GPU.
enum Solvers {
    Host {
        u: Vec<Hierarchy>,
        p: Box<Hierarchy>,
    },
    #[cfg(feature = "cuda")]
    Device(Box<crate::device::State>),
    /// Only while the hierarchies move to the device.
    #[cfg(feature = "cuda")]
    Moving,
}

/// One rank's solver.
pub struct Flow {
    params: Params,
    geom: Arc<Geometry>,
    h: f64,
    owned: IndexBox,
    lay: FieldLayout,
    solvers: Solvers,
    ex3: Exchanger<f64>,
    ex1: Exchanger<f64>,
    /// Velocity components (lower faces of the cells).
    pub u: [Field; 3],
    /// Pressure (divided by the density).
    pub p: Field,
    ustar: [Field; 3],
    rhs: Field,
    phi: Field,
    nl: [Field; 3],
    nl_old: [Field; 3],
    steps: u64,
    time: f64,
    phases: Phases,
    own_halo: f64,
    device_bytes: u64,
}

impl std::fmt::Debug for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flow")
            .field("params", &self.params)
            .field("owned", &self.owned)
            .finish_non_exhaustive()
    }
}

/// Levels of a hierarchy: halve while every extent stays even and at least 8.
pub(crate) fn levels(n: [usize; 3]) -> usize {
    let mut s = n;
    let mut l = 1;
    while s.iter().all(|&x| x % 2 == 0 && x >= 8) {
        s = s.map(|x| x / 2);
        l += 1;
    }
    l
}

/// `f(geometry index)` at the owned cells of `g`, row-major over the block.
fn over_block(g: &Geometry, f: impl Fn(usize) -> f64) -> Vec<f64> {
    g.region().owned().map(f).collect()
}

impl Flow {
    /// The block of cells this rank owns on a grid of `n` cells per axis
    /// (the block whose [`Geometry`] [`new`](Self::new) takes).
    pub fn block(comm: &dyn Communicator, n: [usize; 3]) -> Result<IndexBox> {
        let grid = ProcessGrid::for_shape(n, comm.size(), [true; 3])?;
        Ok(Hierarchy::fine_block(n, grid, comm.rank())?)
    }

    /// Builds the solver (collective): the process grid, the four
    /// hierarchies and the exchangers. `geom` is the geometry of this
    /// rank's [`block`](Self::block). The multigrid coefficients are
    /// arrays over the block, filled here from the geometry. The fields
    /// are zero.
    pub fn new(comm: &dyn Communicator, geom: Arc<Geometry>, params: Params) -> Result<Self> {
        let n = geom.n;
        let h = params.length / n[0] as f64;
        let grid = ProcessGrid::for_shape(n, comm.size(), [true; 3])?;
        let block = Hierarchy::fine_block(n, grid, comm.rank())?;
        if geom.block() != block {
            bail!(
                "the geometry covers the cells {:?}..{:?}, this rank owns {:?}..{:?}: build it for Flow::block",
                geom.block().lo,
                geom.block().hi,
                block.lo,
                block.hi
            );
        }
        let lev = levels(n);
        let g = &*geom;
        let s = g.strides();
        let mut mg_u = Vec::with_capacity(3);
        for d in 0..3 {
            let nu = params.nu;
            let fl = &g.fluid[d];
            // The face below point i along e: open when both points are fluid.
            let faces = std::array::from_fn(|e| {
                over_block(g, |i| if fl[i] && fl[i - s[e]] { nu } else { 0.0 })
            });
            let (dt, h2) = (params.dt, h * h);
            let shift = over_block(g, |i| {
                if fl[i] {
                    1.0 / dt + nu * g.wall[d][i] / h2
                } else {
                    0.0
                }
            });
            let prob = Poisson::new(n, [params.length; 3], [Boundary::Periodic; 3])?;
            let opts = MgOptions {
                tol: params.momentum_tol,
                ..params.mg
            };
            let coef = Coefficients::constant().with_faces(faces).with_shift(shift);
            mg_u.push(Hierarchy::with_coefficients(
                comm, grid, &prob, lev, opts, coef,
            )?);
        }
        let faces = std::array::from_fn(|e| over_block(g, |i| g.aperture[e][i]));
        let prob = Poisson::new(n, [params.length; 3], [Boundary::Periodic; 3])?;
        let opts = MgOptions {
            tol: params.pressure_tol,
            ..params.mg
        };
        let coef = Coefficients::constant().with_faces(faces);
        let mg_p = Hierarchy::with_coefficients(comm, grid, &prob, lev, opts, coef)?;
        let lay = mg_p.layout();
        let dec = BlockDecomposition::new(n, grid)?;
        let spec = HaloSpec {
            ghost: lay.ghost,
            width: [1; 3],
            neighborhood: Neighborhood::Full,
        };
        let topo = Topology::new(comm, &dec, spec)?;
        if topo.owned() != mg_p.owned() {
            bail!("internal error: the flow's and the multigrid's blocks differ");
        }
        let ex3 = Exchanger::new(&topo, 3, 0)?;
        let ex1 = Exchanger::new(&topo, 1, 1)?;
        let f = || Field::new(lay);
        Ok(Flow {
            params,
            h,
            owned: topo.owned(),
            lay,
            solvers: Solvers::Host {
                u: mg_u,
                p: Box::new(mg_p),
            },
            ex3,
            ex1,
            u: [f(), f(), f()],
            p: f(),
            ustar: [f(), f(), f()],
            rhs: f(),
            phi: f(),
            nl: [f(), f(), f()],
            nl_old: [f(), f(), f()],
            geom,
            steps: 0,
            time: 0.0,
            phases: Phases::default(),
            own_halo: 0.0,
            device_bytes: 0,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The geometry.
    pub fn geometry(&self) -> &Geometry {
        &self.geom
    }

    /// This rank's block of cells.
    pub fn owned(&self) -> IndexBox {
        self.owned
    }

    /// Steps taken.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Simulated time.
    pub fn time(&self) -> f64 {
        self.time
    }

    /// Sets the step count and time (restarts).
    pub fn set_clock(&mut self, steps: u64, time: f64) {
        self.steps = steps;
        self.time = time;
    }

    /// Seconds per phase so far.
    pub fn phases(&self) -> Phases {
        let mg: f64 = self
            .hierarchies()
            .flat_map(|m| m.level_stats())
            .map(|s| s.halo_s)
            .sum();
        Phases {
            halo: self.own_halo + mg,
            ..self.phases
        }
    }

    /// The multigrid hierarchies (u, v, w, pressure); on the device, the
    /// host part of each (its coarse levels).
    pub fn hierarchies(&self) -> impl Iterator<Item = &Hierarchy> {
        let v: Vec<&Hierarchy> = match &self.solvers {
            Solvers::Host { u, p } => u.iter().chain(std::iter::once(&**p)).collect(),
            #[cfg(feature = "cuda")]
            Solvers::Device(st) => st
                .mg_u
                .iter()
                .chain(std::iter::once(&st.mg_p))
                .map(|d| d.host())
                .collect(),
            #[cfg(feature = "cuda")]
            Solvers::Moving => Vec::new(),
        };
        v.into_iter()
    }

    /// Moves the step onto the GPU `dev` (collective): the fine multigrid
    /// levels of the four solves, the fields (uploaded from the host's:
    /// set the initial state or read a checkpoint first) and the geometry
    /// the step reads. Every rank first checks that the device has the
    /// memory its `placement` shares out, before any allocates; where one
    /// is short, every rank fails with the bytes needed and free.
    /// `transport`: the device halo exchange's (`None`: direct where every
    /// rank is on this machine, host-staged otherwise).
    ///
    /// From then on [`step`](Self::step) runs on the device and the host
    /// fields ([`u`](Self::u), [`p`](Self::p), the checkpoint's) are
    /// current only after [`download`](Self::download) (which
    /// [`sums`](Self::sums), [`divergence`](Self::divergence) and the
    /// run's outputs call).
    #[cfg(feature = "cuda")]
    pub fn to_device(
        &mut self,
        comm: &dyn Communicator,
        dev: Arc<gpu::cuda::Device>,
        placement: gpu::place::Placement,
        transport: Option<halo::Transport>,
    ) -> Result<()> {
        let bytes = {
            let hs: Vec<&Hierarchy> = self.hierarchies().collect();
            crate::device::bytes(&self.geom, &hs, self.lay.padded_len())
        };
        let n = self.geom.n;
        gpu::place::check_memory(comm, &dev, placement, bytes, || {
            format!("the flow's {n:?} grid (fields, geometry, multigrid levels)")
        })?;
        let Solvers::Host { u, p } = std::mem::replace(&mut self.solvers, Solvers::Moving) else {
            bail!("the flow is already on a device");
        };
        let topo = self.ex1.topology().clone();
        let (free0, _) = dev.memory()?;
        let st = crate::device::State::new(
            comm,
            dev,
            transport,
            &topo,
            &self.geom,
            u,
            *p,
            self.checkpoint_fields(),
        )?;
        let (free1, _) = st.device().memory()?;
        self.device_bytes = free0.saturating_sub(free1) as u64;
        self.solvers = Solvers::Device(Box::new(st));
        Ok(())
    }

    /// The device memory the move to the device took on this rank (the
    /// device's free memory before less after; ranks sharing the device
    /// that moved at the same time count in it too); 0 on the host.
    pub fn device_bytes(&self) -> u64 {
        self.device_bytes
    }

    /// The GPU the step runs on and the halo transport there (`None` on
    /// the host).
    pub fn device(&self) -> Option<(String, String)> {
        match &self.solvers {
            #[cfg(feature = "cuda")]
            Solvers::Device(st) => Some((
                st.device().info().name.clone(),
                st.transport().name().to_string(),
            )),
            _ => None,
        }
    }

    /// Brings the velocity, the pressure and the advective term from the
    /// device into the host fields, where the device is ahead (a no-op on
    /// the host).
    pub fn download(&mut self) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Solvers::Device(st) = &mut self.solvers {
            if st.stale {
                let [a, b, c] = &mut self.u;
                let [d, e, g] = &mut self.nl;
                st.download([a, b, c, &mut self.p, d, e, g])?;
            }
        }
        Ok(())
    }

    /// Sends the host fields (changed on the host: a restart) to the
    /// device (a no-op on the host).
    pub fn upload(&mut self) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Solvers::Device(st) = &mut self.solvers {
            let [a, b, c] = &self.u;
            let [d, e, g] = &self.nl;
            st.upload([a, b, c, &self.p, d, e, g])?;
        }
        Ok(())
    }

    /// Visits the owned cells: `f(global index, padded linear index)`.
    fn for_owned(&self, mut f: impl FnMut([usize; 3], usize)) {
        let (b, g, s) = (self.owned, self.lay.ghost, self.lay.strides());
        for i in b.lo[0]..b.hi[0] {
            for j in b.lo[1]..b.hi[1] {
                let row = (i - b.lo[0] + g[0]) * s[0] + (j - b.lo[1] + g[1]) * s[1];
                for k in b.lo[2]..b.hi[2] {
                    f([i, j, k], row + k - b.lo[2] + g[2]);
                }
            }
        }
    }

    /// Sets velocity component `d` at the owned points from `f(x)`, `x` the
    /// point's position; points that are not fluid get 0.
    pub fn set_velocity(&mut self, d: usize, f: impl Fn([f64; 3]) -> f64) {
        let h = self.h;
        let g = self.geom.clone();
        let owned = self.owned;
        self.u[d].fill_owned(0, &owned, |p| {
            if g.fluid[d][g.idx(p)] {
                let mut x = p.map(|i| (i as f64 + 0.5) * h);
                x[d] -= 0.5 * h;
                f(x)
            } else {
                0.0
            }
        });
    }

    fn exchange3(&mut self, comm: &dyn Communicator, which: bool) -> Result<()> {
        let t = Instant::now();
        let [a, b, c] = if which { &mut self.ustar } else { &mut self.u };
        self.ex3.exchange(comm, &mut [a, b, c])?;
        self.own_halo += t.elapsed().as_secs_f64();
        Ok(())
    }

    fn exchange1(&mut self, comm: &dyn Communicator, pressure: bool) -> Result<()> {
        let t = Instant::now();
        let f = if pressure { &mut self.p } else { &mut self.phi };
        self.ex1.exchange(comm, &mut [f])?;
        self.own_halo += t.elapsed().as_secs_f64();
        Ok(())
    }

    /// The centred advective term at the owned fluid points (ghosts of `u` current).
    fn advection(&mut self) {
        let s = self.lay.strides();
        let ih2 = 0.5 / self.h;
        let g = &*self.geom;
        let (b, gh) = (self.owned, self.lay.ghost);
        let u = [
            self.u[0].as_slice(),
            self.u[1].as_slice(),
            self.u[2].as_slice(),
        ];
        for d in 0..3 {
            let out = self.nl[d].as_mut_slice();
            out.fill(0.0);
            let ud = u[d];
            for i in b.lo[0]..b.hi[0] {
                for j in b.lo[1]..b.hi[1] {
                    let row = (i - b.lo[0] + gh[0]) * s[0] + (j - b.lo[1] + gh[1]) * s[1];
                    let grow = g.idx([i, j, b.lo[2]]);
                    for k in b.lo[2]..b.hi[2] {
                        if !g.fluid[d][grow + k - b.lo[2]] {
                            continue;
                        }
                        let x = row + k - b.lo[2] + gh[2];
                        let mut n = 0.0;
                        for e in 0..3 {
                            let ue = u[e];
                            let adv = if e == d {
                                ud[x]
                            } else {
                                // u_e at the u_d point: the four nearest u_e points.
                                0.25 * ((ue[x] + ue[x + s[e]])
                                    + (ue[x - s[d]] + ue[x - s[d] + s[e]]))
                            };
                            n += adv * (ud[x + s[e]] - ud[x - s[e]]) * ih2;
                        }
                        out[x] = n;
                    }
                }
            }
        }
    }

    /// The step on the device.
    #[cfg(feature = "cuda")]
    fn step_device(&mut self, comm: &dyn Communicator) -> Result<StepStats> {
        let Solvers::Device(st) = &mut self.solvers else {
            bail!("internal error: the flow is not on a device");
        };
        let ab2 = self.params.navier_stokes && self.steps > 0;
        let r = st.step(comm, &self.params, self.h, ab2, self.steps + 1)?;
        self.phases.momentum += r.momentum;
        self.phases.projection += r.projection;
        self.own_halo += r.halo;
        self.steps += 1;
        self.time += self.params.dt;
        let seconds = comm.allreduce_scalar(r.momentum + r.projection, ReduceOp::Max)?;
        Ok(StepStats {
            momentum_iterations: r.its,
            pressure_iterations: r.pressure.iterations,
            change: if r.umax > 0.0 { r.change / r.umax } else { 0.0 },
            seconds,
        })
    }

    /// One step (collective), on the device after
    /// `to_device` (feature `cuda`).
    pub fn step(&mut self, comm: &dyn Communicator) -> Result<StepStats> {
        #[cfg(feature = "cuda")]
        if matches!(self.solvers, Solvers::Device(_)) {
            return self.step_device(comm);
        }
        let t0 = Instant::now();
        let (dt, h) = (self.params.dt, self.h);
        let s = self.lay.strides();
        self.exchange3(comm, false)?;
        self.exchange1(comm, true)?;
        if self.params.navier_stokes {
            std::mem::swap(&mut self.nl, &mut self.nl_old);
            self.advection();
        }
        let ab2 = self.params.navier_stokes && self.steps > 0;
        let geom = self.geom.clone();
        let g = &*geom;
        let mut its = [0usize; 3];
        for d in 0..3 {
            let f = self.params.force[d];
            {
                let (b, gh) = (self.owned, self.lay.ghost);
                let (ud, pp, nl, no) = (
                    self.u[d].as_slice(),
                    self.p.as_slice(),
                    self.nl[d].as_slice(),
                    self.nl_old[d].as_slice(),
                );
                let r = self.rhs.as_mut_slice();
                let ns = self.params.navier_stokes;
                for i in b.lo[0]..b.hi[0] {
                    for j in b.lo[1]..b.hi[1] {
                        let row = (i - b.lo[0] + gh[0]) * s[0] + (j - b.lo[1] + gh[1]) * s[1];
                        let grow = g.idx([i, j, b.lo[2]]);
                        for k in b.lo[2]..b.hi[2] {
                            let (x, gi) = (row + k - b.lo[2] + gh[2], grow + k - b.lo[2]);
                            r[x] = if g.fluid[d][gi] {
                                let n = if !ns {
                                    0.0
                                } else if ab2 {
                                    1.5 * nl[x] - 0.5 * no[x]
                                } else {
                                    nl[x]
                                };
                                ud[x] / dt - (pp[x] - pp[x - s[d]]) / h - n + f * g.weight[d][gi]
                            } else {
                                0.0
                            };
                        }
                    }
                }
            }
            // Warm start from u^n.
            self.ustar[d]
                .as_mut_slice()
                .copy_from_slice(self.u[d].as_slice());
            // Refutable only with the `cuda` feature.
            #[allow(irrefutable_let_patterns)]
            let Solvers::Host { u: mg_u, .. } = &mut self.solvers
            else {
                bail!("internal error: the host step without its hierarchies");
            };
            let rep: SolveReport = mg_u[d]
                .solve_pcg(comm, &mut self.ustar[d], &self.rhs)
                .with_context(|| {
                    format!(
                        "step {}: the momentum solve of component {d}",
                        self.steps + 1
                    )
                })?;
            if !rep.converged {
                bail!(
                    "the momentum solve of component {d} did not converge in step {} ({} iterations, relative residual {:.3e})",
                    self.steps + 1,
                    rep.iterations,
                    rep.residuals.last().copied().unwrap_or(f64::NAN)
                );
            }
            its[d] = rep.iterations;
        }
        let t1 = Instant::now();
        // Projection.
        self.exchange3(comm, true)?;
        {
            let (b, gh) = (self.owned, self.lay.ghost);
            let us = [
                self.ustar[0].as_slice(),
                self.ustar[1].as_slice(),
                self.ustar[2].as_slice(),
            ];
            let r = self.rhs.as_mut_slice();
            let scale = -1.0 / (h * dt);
            for i in b.lo[0]..b.hi[0] {
                for j in b.lo[1]..b.hi[1] {
                    let row = (i - b.lo[0] + gh[0]) * s[0] + (j - b.lo[1] + gh[1]) * s[1];
                    let gs = g.strides();
                    for k in b.lo[2]..b.hi[2] {
                        let (x, p) = (row + k - b.lo[2] + gh[2], [i, j, k]);
                        let gi = g.idx(p);
                        let mut div = 0.0;
                        for d in 0..3 {
                            let up = gi + gs[d];
                            div +=
                                g.aperture[d][up] * us[d][x + s[d]] - g.aperture[d][gi] * us[d][x];
                        }
                        r[x] = div * scale;
                    }
                }
            }
        }
        self.phi.as_mut_slice().fill(0.0);
        // Refutable only with the `cuda` feature.
        #[allow(irrefutable_let_patterns)]
        let Solvers::Host { p: mg_p, .. } = &mut self.solvers
        else {
            bail!("internal error: the host step without its hierarchies");
        };
        let rep = mg_p
            .solve_pcg(comm, &mut self.phi, &self.rhs)
            .with_context(|| format!("step {}: the pressure solve", self.steps + 1))?;
        if !rep.converged {
            bail!(
                "the pressure solve did not converge in step {} ({} iterations, relative residual {:.3e})",
                self.steps + 1,
                rep.iterations,
                rep.residuals.last().copied().unwrap_or(f64::NAN)
            );
        }
        self.exchange1(comm, false)?;
        let mut change: f64 = 0.0;
        let mut umax: f64 = 0.0;
        {
            let (b, gh) = (self.owned, self.lay.ghost);
            let ph = self.phi.as_slice();
            for d in 0..3 {
                let (us, un) = (self.ustar[d].as_slice(), self.u[d].as_mut_slice());
                let fl = &g.fluid[d];
                for i in b.lo[0]..b.hi[0] {
                    for j in b.lo[1]..b.hi[1] {
                        let row = (i - b.lo[0] + gh[0]) * s[0] + (j - b.lo[1] + gh[1]) * s[1];
                        let grow = g.idx([i, j, b.lo[2]]);
                        for k in b.lo[2]..b.hi[2] {
                            let x = row + k - b.lo[2] + gh[2];
                            let v = if fl[grow + k - b.lo[2]] {
                                us[x] - dt * (ph[x] - ph[x - s[d]]) / h
                            } else {
                                0.0
                            };
                            change = change.max((v - un[x]).abs());
                            umax = umax.max(v.abs());
                            un[x] = v;
                        }
                    }
                }
            }
            let (pp, ph, r) = (
                self.p.as_mut_slice(),
                self.phi.as_slice(),
                self.rhs.as_slice(),
            );
            if self.params.rotational {
                // rhs = -div(A u*) / (h dt) per cell: -nu div = nu dt rhs.
                let c = self.params.nu * dt;
                for ((a, b), q) in pp.iter_mut().zip(ph).zip(r) {
                    *a += b + c * q;
                }
            } else {
                for (a, b) in pp.iter_mut().zip(ph) {
                    *a += b;
                }
            }
        }
        let mut m = [change, umax];
        comm.allreduce_f64(&mut m, ReduceOp::Max)?;
        let t2 = Instant::now();
        self.phases.momentum += (t1 - t0).as_secs_f64();
        self.phases.projection += (t2 - t1).as_secs_f64();
        self.steps += 1;
        self.time += dt;
        let seconds = comm.allreduce_scalar((t2 - t0).as_secs_f64(), ReduceOp::Max)?;
        Ok(StepStats {
            momentum_iterations: its,
            pressure_iterations: rep.iterations,
            change: if m[1] > 0.0 { m[0] / m[1] } else { 0.0 },
            seconds,
        })
    }

    /// Exact global sums (collective): `[sum u_x, sum u_y, sum u_z, sum |u|^2]`
    /// over the velocity points, times `h^3` (from the host fields, brought
    /// from the device first).
    pub fn sums(&mut self, comm: &dyn Communicator) -> Result<[f64; 4]> {
        self.download()?;
        let mut acc: [ExactSum; 4] = std::array::from_fn(|_| ExactSum::new());
        let h3 = self.h.powi(3);
        self.for_owned(|_, x| {
            for d in 0..3 {
                let v = self.u[d].as_slice()[x];
                acc[d].add(v * h3);
                acc[3].add(v * v * h3);
            }
        });
        let s = allreduce_exact_sums(comm, &acc)?;
        Ok([s[0], s[1], s[2], s[3]])
    }

    /// The largest `|div(A u)| h^2` over the cells relative to `max |u| h^2`
    /// (collective; ghosts of `u` are refreshed).
    pub fn divergence(&mut self, comm: &dyn Communicator) -> Result<f64> {
        self.download()?;
        self.exchange3(comm, false)?;
        let s = self.lay.strides();
        let g = self.geom.clone();
        let mut m: f64 = 0.0;
        let mut umax: f64 = 0.0;
        let gs = g.strides();
        self.for_owned(|p, x| {
            let mut div = 0.0;
            let gi = g.idx(p);
            for d in 0..3 {
                let u = self.u[d].as_slice();
                div += g.aperture[d][gi + gs[d]] * u[x + s[d]] - g.aperture[d][gi] * u[x];
                umax = umax.max(u[x].abs());
            }
            m = m.max(div.abs());
        });
        let mut v = [m, umax];
        comm.allreduce_f64(&mut v, ReduceOp::Max)?;
        Ok(if v[1] > 0.0 { v[0] / v[1] } else { 0.0 })
    }

    /// The fields a checkpoint holds: the velocity, the pressure and the
    /// last advective term (the next step's Adams-Bashforth history).
    pub fn checkpoint_fields(&self) -> [&Field; 7] {
        let [a, b, c] = &self.u;
        let [d, e, g] = &self.nl;
        [a, b, c, &self.p, d, e, g]
    }

    /// [`checkpoint_fields`](Self::checkpoint_fields), mutable (restarts).
    pub fn checkpoint_fields_mut(&mut self) -> [&mut Field; 7] {
        let [a, b, c] = &mut self.u;
        let [d, e, g] = &mut self.nl;
        [a, b, c, &mut self.p, d, e, g]
    }

    /// The layout of every field.
    pub fn layout(&self) -> FieldLayout {
        self.lay
    }
}
