//! Heat3D: `du/dt = D lap(u)` on a periodic box, central finite differences
//! of order 2 to 20, distributed with `comm` and `halo`.
//!
//! A step in `overlap` mode posts the halo exchange of `u`, applies the
//! fused stencil update to the interior cells (those whose stencil reads no
//! ghost cell), finishes the exchange, then updates the boundary shell. In
//! `blocking` mode it exchanges first and sweeps the whole box. Both apply
//! the same arithmetic to every cell, so their results are bit-identical,
//! and so are the results for any rank count and process grid.
#![warn(missing_docs)]

pub mod config;
pub mod cost;
#[cfg(feature = "cuda")]
mod device;
pub mod kernels;

use anyhow::{bail, Context, Result};
use appkit::csv::{FloatFormat, Series};
use appkit::progress::Progress;
use appkit::stats::median;
use appkit::vtk;
use comm::{exact, BlockDecomposition, CommExt, Communicator, IndexBox, ProcessGrid, ReduceOp};
use config::{Config, CpuStencil, Initial, Integrator, Mode, Operator, SpectralStep};
use halo::{Exchanger, Field, FieldLayout, HaloSpec, Neighborhood, Region, Topology};
use num_complex::Complex64;
use serde::{Deserialize, Serialize};
use std::time::Instant;
use stencil::wavefront::Wavefront;
use stencil::{all_finite, policy, Kernel, Stores, Sweep};

/// Phase names of the finite-difference step, in the order of [`PhaseTimes`].
pub const PHASES: [&str; 5] = ["post", "interior", "wait", "shell", "update"];
/// Phase names of the spectral step, stored in the same five slots of
/// [`PhaseTimes`] (`post`, `interior`, `wait`, unused, `update`).
pub const SPECTRAL_PHASES: [&str; 5] = ["forward", "multiply", "backward", "", "copy"];

/// Median per-step seconds of the slowest rank, per phase and in total.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct PhaseTimes {
    /// Packing and sending the halo.
    pub post: f64,
    /// Stencil on the interior (the whole box in blocking mode).
    pub interior: f64,
    /// Waiting for and unpacking the halo.
    pub wait: f64,
    /// Stencil on the boundary shell (overlap mode).
    pub shell: f64,
    /// Combining stages and swapping buffers.
    pub update: f64,
    /// The whole step.
    pub step: f64,
}

/// Diagnostics at one step.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Diagnostics {
    /// Step number.
    pub step: usize,
    /// Time.
    pub time: f64,
    /// Mean of u (exact global sum, so the same bits for any rank count).
    pub mean: f64,
    /// Largest |u - exact|.
    pub max_error: f64,
    /// Root mean square of u - exact.
    pub rms_error: f64,
}

/// What a run reports (on every rank; identical everywhere).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// The configuration as run.
    pub config: Config,
    /// Number of ranks.
    pub ranks: usize,
    /// Backend name of the communicator (`in-process` or `mpi`).
    pub backend: String,
    /// What rank 0 computed on: `cpu`, or the GPU's description.
    pub device: String,
    /// How the halo travelled between ranks: `host` (host fields),
    /// `direct`, `staged` or `nccl` (device fields, see `gpu_exchange`), or
    /// `none` (the spectral operator exchanges no halo).
    pub halo: String,
    /// Process grid.
    pub grid: [usize; 3],
    /// Step size.
    pub dt: f64,
    /// The stability limit of the step size.
    pub dt_limit: f64,
    /// Diagnostics at the final step.
    pub last: Diagnostics,
    /// Per-phase median step times of the slowest rank after warm-up.
    pub timings: PhaseTimes,
    /// Steps that entered the timing statistics.
    pub timed_steps: usize,
    /// Wall time of the whole stepping loop on rank 0 (seconds).
    pub wall: f64,
    /// Cell updates per second per step (global cells / median step).
    pub cells_per_second: f64,
    /// The reshape protocol of each reshape of the spectral operator's
    /// forward transform as the plan reports it (`Auto`'s winners; `dfft`'s
    /// `Debug` names; on a GPU `DeviceDirect`, device to device,
    /// `DeviceStaged`, through host buffers and `alltoallv`, or
    /// `DeviceNccl`, through NCCL); empty for the
    /// finite-difference operator and where the transform needs no reshape
    /// (one rank).
    pub reshape_protocols: Vec<String>,
    /// The CPU kernel of the finite-difference sweeps (`portable`, `avx2`,
    /// `avx512`; see [`CpuStencil`]), `none` where no sweep runs on the
    /// host (the spectral operator, a GPU).
    pub cpu_stencil: String,
    /// Order-independent hash of the global field ([`appkit::field_hash`]).
    pub hash: u64,
    /// The same hash as 16 hex digits (JSON readers that hold numbers as
    /// doubles lose the low bits of `hash`).
    pub hash_hex: String,
    /// Files written.
    pub files: Vec<String>,
}

/// Per-axis factor of the analytic solution at time `t` on grid points
/// `x_i = i h`, for the whole global extent of `axis`.
pub fn profile(cfg: &Config, axis: usize, t: f64) -> Vec<f64> {
    let n = cfg.shape()[axis];
    let l = cfg.length.get()[axis];
    let h = l / n as f64;
    let d = cfg.diffusivity;
    match cfg.initial {
        Initial::Sines => {
            let k = 2.0 * std::f64::consts::PI * cfg.modes[axis] as f64 / l;
            let decay = (-d * k * k * t).exp();
            (0..n).map(|i| decay * (k * i as f64 * h).sin()).collect()
        }
        Initial::Gaussian => {
            // Images at j L for |j| <= 3 keep the truncation below 1e-16 for
            // sigma <= 0.2 L up to times where the width has doubled.
            let s0 = (cfg.sigma * l).powi(2);
            let s = s0 + 2.0 * d * t;
            let amp = (s0 / s).sqrt();
            let c = 0.5 * l;
            (0..n)
                .map(|i| {
                    let x = i as f64 * h - c;
                    (-3i32..=3)
                        .map(|j| (-(x + j as f64 * l).powi(2) / (2.0 * s)).exp())
                        .sum::<f64>()
                        * amp
                })
                .collect()
        }
    }
}

/// Fills the owned cells of `u` with the analytic solution at time `t`.
fn fill_analytic(cfg: &Config, t: f64, owned: &IndexBox, u: &mut Field<f64>) {
    let p: [Vec<f64>; 3] = [0, 1, 2].map(|d| profile(cfg, d, t));
    let a = cfg.amplitude;
    u.fill_owned(0, owned, |[i, j, k]| a * (p[0][i] * p[1][j] * p[2][k]));
}

/// The decomposition-independent hash of the global field
/// ([`appkit::field_hash`]): the same for any rank count and process grid
/// (collective).
pub fn field_hash(comm: &dyn Communicator, topo: &Topology, u: &Field<f64>) -> Result<u64> {
    let g = topo.decomposition().global();
    Ok(appkit::field_hash(
        comm,
        g,
        &topo.owned(),
        &u.owned_values(0),
    )?)
}

/// Calls `f(offset, len)` for each row of `region`.
fn rows(layout: &FieldLayout, region: &Region, mut f: impl FnMut(usize, usize)) {
    let s = layout.strides();
    let len = region.hi[2] - region.lo[2];
    for i in region.lo[0]..region.hi[0] {
        for j in region.lo[1]..region.hi[1] {
            f(i * s[0] + j * s[1] + region.lo[2], len);
        }
    }
}

/// Per-step phase times of this rank, seconds.
type StepTimes = [f64; 5];

struct Solver<'c> {
    comm: &'c dyn Communicator,
    cfg: Config,
    topo: Topology,
    /// The host halo exchange (the host finite-difference step only).
    ex: Option<Exchanger<f64>>,
    layout: FieldLayout,
    u: Field<f64>,
    a: Field<f64>,
    b: Field<f64>,
    c: Field<f64>,
    spectral: Option<Spectral>,
    euler: Sweep,
    lap: Sweep,
    owned: Region,
    interior: Region,
    shell: Vec<Region>,
    dt: f64,
    /// Host steps a pass (1, or up to [`policy::MAX_HOST_STEPS_PER_PASS`] for one
    /// self-periodic rank: see [`host_steps_per_pass`]).
    host_per_pass: usize,
    /// The rings of the host's multi-step pass (when `host_per_pass > 1`).
    wave: Option<Wavefront>,
    /// The device state with `--backend cuda`; the host fields then hold
    /// only the mirror of `u` (for diagnostics and output).
    #[cfg(feature = "cuda")]
    device: Option<device::DeviceSolver>,
}

impl<'c> Solver<'c> {
    fn new(comm: &'c dyn Communicator, cfg: &Config) -> Result<Self> {
        cfg.validate(comm.size())?;
        // heat3d's own feature decides, not the `gpu` crate's: another
        // crate of the same build may switch `gpu/cuda` (or `gpu/hip`) on.
        let on_device = cfg
            .backend
            .value()
            .on_device_for("heat3d", cfg!(feature = "cuda"))?;
        unused_options(cfg, on_device)?;
        let shape = cfg.shape();
        let grid = match cfg.grid {
            Some(g) => ProcessGrid::new(g, [true; 3])?,
            None => ProcessGrid::for_shape(shape, comm.size(), [true; 3])?,
        };
        let dec = BlockDecomposition::new(shape, grid)?;
        let spectral = cfg.operator == Operator::Spectral;
        let r = if spectral { 0 } else { cfg.order / 2 };
        let spec = HaloSpec::uniform(r, Neighborhood::Faces);
        // Device fields allocate sector-aligned ghosts along the last axis.
        #[cfg(feature = "cuda")]
        let spec = match on_device {
            true => HaloSpec {
                ghost: stencil::device::ghost(r),
                ..spec
            },
            false => spec,
        };
        let topo = Topology::new(comm, &dec, spec).with_context(|| {
            format!(
                "order {} needs {r} ghost layers from each neighbour",
                cfg.order
            )
        })?;
        let layout = topo.layout(1);
        let rk = cfg.integrator == Integrator::Rk4 && !spectral;
        #[cfg(feature = "cuda")]
        let gpu = match on_device {
            true => Some(device::preflight(comm, cfg, &layout, rk, spectral)?),
            false => None,
        };
        let dt = cfg.dt()?;
        let h = cfg.spacing();
        let euler = Sweep::new(cfg.order, h, dt * cfg.diffusivity, true)
            .map_err(anyhow::Error::msg)?
            .with_stores(policy::host_stores(&layout));
        let lap = Sweep::new(cfg.order, h, cfg.diffusivity, false).map_err(anyhow::Error::msg)?;
        let mut u = Field::new(layout);
        fill_analytic(cfg, 0.0, &topo.owned(), &mut u);
        #[cfg(feature = "cuda")]
        let device = match gpu {
            Some(dev) => Some(device::DeviceSolver::new(
                dev,
                comm,
                &topo,
                cfg,
                &u,
                (&euler, &lap),
                dt,
                rk,
                spectral,
            )?),
            None => None,
        };
        let spectral = if spectral && !on_device {
            Some(Spectral::new(comm, cfg, &dec, dt)?)
        } else {
            None
        };
        let scratch = |on: bool| {
            Field::new(if on {
                layout
            } else {
                FieldLayout {
                    owned: [0; 3],
                    ghost: [0; 3],
                    components: 1,
                }
            })
        };
        let host_per_pass = if on_device {
            1
        } else {
            host_steps_per_pass(cfg, comm.size(), &layout)?
        };
        let wave = (host_per_pass > 1).then(|| match cfg.stencil.tile_rows {
            0 => Wavefront::new(&layout, host_per_pass),
            rows => Wavefront::with_tile(&layout, host_per_pass, rows),
        });
        let mut solver = Solver {
            comm,
            cfg: cfg.clone(),
            host_per_pass,
            wave,
            ex: if on_device || cfg.operator == Operator::Spectral {
                None
            } else {
                Some(Exchanger::new(&topo, 1, 0)?)
            },
            owned: layout.owned_region(),
            interior: topo.interior([r; 3]),
            shell: topo.shell([r; 3]),
            topo,
            layout,
            u,
            a: scratch(!on_device && cfg.operator == Operator::Fd),
            spectral,
            b: scratch(rk && !on_device),
            c: scratch(rk && !on_device),
            euler,
            lap,
            dt,
            #[cfg(feature = "cuda")]
            device,
        };
        if !on_device && cfg.operator == Operator::Fd {
            solver.pick_cpu_stencil()?;
        }
        Ok(solver)
    }

    /// Sets the kernel of the host's sweeps from `cfg.stencil.cpu`: the one
    /// named (an error naming the available ones if this build or CPU does
    /// not have it); `auto` keeps the sweeps' own default
    /// ([`stencil::policy::host_kernel`] their radius).
    fn pick_cpu_stencil(&mut self) -> Result<()> {
        let kernel = match self.cfg.stencil.cpu {
            CpuStencil::Portable => Kernel::Portable,
            CpuStencil::Avx2 => Kernel::Avx2,
            CpuStencil::Avx512 => Kernel::Avx512,
            CpuStencil::Auto => return Ok(()),
        };
        let set = |s: &Sweep| {
            s.clone()
                .with_kernel(kernel)
                .map_err(|e| anyhow::anyhow!("stencil.cpu = {}: {e}", kernel.name()))
        };
        self.euler = set(&self.euler)?;
        self.lap = set(&self.lap)?;
        Ok(())
    }

    /// The kernel of the host's sweeps, `none` where they do not run.
    fn cpu_stencil(&self) -> &'static str {
        #[cfg(feature = "cuda")]
        if self.device.is_some() {
            return "none";
        }
        match self.cfg.operator {
            Operator::Fd => self.euler.kernel().name(),
            Operator::Spectral => "none",
        }
    }

    /// `dst = sweep(src)` on the owned cells, exchanging `src`'s halo first
    /// (blocking) or around the interior sweep (overlap).
    fn apply(
        (comm, ex, mode): (&dyn Communicator, &mut Exchanger<f64>, Mode),
        geometry: (&FieldLayout, &Region, &Region, &[Region]),
        sweep: &Sweep,
        src: &mut Field<f64>,
        dst: &mut Field<f64>,
        t: &mut StepTimes,
    ) -> Result<bool> {
        let (layout, owned, interior, shell) = geometry;
        let mut finite = true;
        let t0 = Instant::now();
        let pending = ex.post(comm, &mut [&mut *src])?;
        let t1 = Instant::now();
        t[0] += (t1 - t0).as_secs_f64();
        match mode {
            Mode::Blocking => {
                pending.finish(&mut [&mut *src])?;
                let t2 = Instant::now();
                t[2] += (t2 - t1).as_secs_f64();
                finite &= sweep.apply(layout, src.as_slice(), dst.as_mut_slice(), owned);
                t[1] += t2.elapsed().as_secs_f64();
            }
            Mode::Overlap => {
                finite &= sweep.apply(layout, src.as_slice(), dst.as_mut_slice(), interior);
                let t2 = Instant::now();
                t[1] += (t2 - t1).as_secs_f64();
                pending.finish(&mut [&mut *src])?;
                let t3 = Instant::now();
                t[2] += (t3 - t2).as_secs_f64();
                for r in shell {
                    finite &= sweep.apply(layout, src.as_slice(), dst.as_mut_slice(), r);
                }
                t[3] += t3.elapsed().as_secs_f64();
            }
        }
        Ok(finite)
    }

    /// The most steps one call of [`Solver::step`] may advance: 2 where a
    /// device pass advances two Euler steps (`steps_per_pass`), else 1.
    fn steps_per_pass(&self) -> usize {
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.device {
            return d.steps_per_pass();
        }
        self.host_per_pass
    }

    /// `steps` Euler steps in one pass over the box (one rank that is its
    /// own periodic neighbour, blocking): see [`wavefront`]. The pass reads
    /// the owned cells of `u` with periodic indices, so no halo exchange
    /// is needed. Returns which of the steps (from 1) first wrote a
    /// non-finite value, if one did.
    fn multi_steps(&mut self, steps: usize, t: &mut StepTimes) -> Result<Option<usize>> {
        let wave = self
            .wave
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("this run has no multi-step pass"))?;
        let t0 = Instant::now();
        let stream = self.euler.stores() == Stores::Streaming;
        let bad = wave.run(
            &self.euler,
            steps,
            self.u.as_slice(),
            self.a.as_mut_slice(),
            stream,
        );
        t[1] += t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        std::mem::swap(&mut self.u, &mut self.a);
        t[4] += t1.elapsed().as_secs_f64();
        Ok(bad)
    }

    /// Advances `steps` steps (1, or up to [`Solver::steps_per_pass`]);
    /// returns which step of them (from 1) first wrote a non-finite value
    /// that the host found, if one did.
    fn step(&mut self, steps: usize, t: &mut StepTimes) -> Result<Option<usize>> {
        let first_bad = |ok: bool| if ok { None } else { Some(1) };
        #[cfg(feature = "cuda")]
        if let Some(d) = &mut self.device {
            let geo = (
                &self.layout,
                &self.owned,
                &self.interior,
                self.shell.as_slice(),
            );
            let x = (self.comm, self.cfg.mode);
            d.step(steps, x, geo, self.cfg.integrator, self.dt, t)?;
            // Non-finite values are flagged on the device and looked at
            // with the diagnostics (`check_device`).
            return Ok(None);
        }
        if steps >= 2 && steps <= self.host_per_pass {
            return self.multi_steps(steps, t);
        }
        if steps != 1 {
            bail!(
                "{steps} steps in one host pass (this run advances 1 to {})",
                self.host_per_pass
            );
        }
        if let Some(sp) = &mut self.spectral {
            return Ok(first_bad(sp.step(
                self.comm,
                &self.layout,
                &mut self.u,
                t,
            )?));
        }
        let geo = (
            &self.layout,
            &self.owned,
            &self.interior,
            self.shell.as_slice(),
        );
        let mode = self.cfg.mode;
        let ex = self.ex.as_mut().ok_or_else(|| {
            anyhow::anyhow!("the host finite-difference step has no halo exchanger")
        })?;
        match self.cfg.integrator {
            Integrator::Euler => {
                let ok = Self::apply(
                    (self.comm, &mut *ex, mode),
                    geo,
                    &self.euler,
                    &mut self.u,
                    &mut self.a,
                    t,
                )?;
                let t0 = Instant::now();
                std::mem::swap(&mut self.u, &mut self.a);
                t[4] += t0.elapsed().as_secs_f64();
                Ok(first_bad(ok))
            }
            Integrator::Rk4 => {
                // a = stage argument, b = stage derivative, c = weighted sum.
                let dt = self.dt;
                let mut ok = Self::apply(
                    (self.comm, &mut *ex, mode),
                    geo,
                    &self.lap,
                    &mut self.u,
                    &mut self.b,
                    t,
                )?;
                let t0 = Instant::now();
                {
                    let (u, a, b, c) = (
                        self.u.as_slice(),
                        self.a.as_mut_slice(),
                        self.b.as_slice(),
                        self.c.as_mut_slice(),
                    );
                    rows(&self.layout, &self.owned, |o, n| {
                        for q in o..o + n {
                            a[q] = u[q] + 0.5 * dt * b[q];
                            c[q] = b[q];
                        }
                    });
                }
                t[4] += t0.elapsed().as_secs_f64();
                for (weight, next) in [(2.0, 0.5 * dt), (2.0, dt)] {
                    ok &= Self::apply(
                        (self.comm, &mut *ex, mode),
                        geo,
                        &self.lap,
                        &mut self.a,
                        &mut self.b,
                        t,
                    )?;
                    let t0 = Instant::now();
                    let (u, a, b, c) = (
                        self.u.as_slice(),
                        self.a.as_mut_slice(),
                        self.b.as_slice(),
                        self.c.as_mut_slice(),
                    );
                    rows(&self.layout, &self.owned, |o, n| {
                        for q in o..o + n {
                            a[q] = u[q] + next * b[q];
                            c[q] += weight * b[q];
                        }
                    });
                    t[4] += t0.elapsed().as_secs_f64();
                }
                ok &= Self::apply(
                    (self.comm, &mut *ex, mode),
                    geo,
                    &self.lap,
                    &mut self.a,
                    &mut self.b,
                    t,
                )?;
                let t0 = Instant::now();
                let (u, b, c) = (self.u.as_mut_slice(), self.b.as_slice(), self.c.as_slice());
                rows(&self.layout, &self.owned, |o, n| {
                    for q in o..o + n {
                        u[q] += dt / 6.0 * (c[q] + b[q]);
                    }
                    ok &= all_finite(&u[o..o + n]);
                });
                t[4] += t0.elapsed().as_secs_f64();
                Ok(first_bad(ok))
            }
        }
    }

    /// The first non-finite owned cell, as a global index and value.
    fn find_bad(&self) -> Option<([usize; 3], f64)> {
        let g = self.layout.ghost;
        let b = self.topo.owned();
        let o = self.owned;
        for i in o.lo[0]..o.hi[0] {
            for j in o.lo[1]..o.hi[1] {
                for k in o.lo[2]..o.hi[2] {
                    let v = self.u.get(0, [i, j, k]);
                    if !v.is_finite() {
                        return Some((
                            [i - g[0] + b.lo[0], j - g[1] + b.lo[1], k - g[2] + b.lo[2]],
                            v,
                        ));
                    }
                }
            }
        }
        None
    }

    /// Brings the host mirror of `u` up to date (device runs); then
    /// returns the first step that wrote a non-finite value, if any.
    fn sync_host(&mut self) -> Result<Option<usize>> {
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.device {
            d.download(&mut self.u)?;
            return d.first_bad_step();
        }
        Ok(None)
    }

    /// Whether the field lives on a device.
    fn on_device(&self) -> bool {
        #[cfg(feature = "cuda")]
        if self.device.is_some() {
            return true;
        }
        false
    }

    /// What the field was computed on, for the report.
    fn device_name(&self) -> String {
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.device {
            return d.device().info().to_string();
        }
        "cpu".to_string()
    }

    /// How each reshape of the spectral transform travels, for the report.
    fn reshape_protocols(&self) -> Vec<String> {
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.device {
            return d.reshape_protocols();
        }
        self.spectral
            .as_ref()
            .map(|sp| reshape_protocols(&sp.plan))
            .unwrap_or_default()
    }

    /// How the halo travels between ranks, for the report.
    fn halo_transport(&self) -> &'static str {
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.device {
            return d.transport().map_or("none", |t| t.name());
        }
        if self.cfg.operator == Operator::Spectral {
            "none"
        } else {
            "host"
        }
    }

    /// Device seconds per step (device runs), else `None`.
    fn device_step_seconds(&mut self) -> Result<Option<Vec<f64>>> {
        #[cfg(feature = "cuda")]
        if let Some(d) = &mut self.device {
            return Ok(Some(d.step_seconds()?));
        }
        Ok(None)
    }

    fn diagnostics(&self, step: usize) -> Result<Diagnostics> {
        let time = step as f64 * self.dt;
        // Row by row over the owned cells, the exact value of each formed
        // as `fill_analytic` forms it: no exact field and no copies (the
        // sums are exact and the maximum is a maximum, so the order of the
        // cells does not matter).
        let p: [Vec<f64>; 3] = [0, 1, 2].map(|d| profile(&self.cfg, d, time));
        let a = self.cfg.amplitude;
        let owned = self.topo.owned();
        let r = self.layout.owned_region();
        let s = self.layout.strides();
        let g = self.layout.ghost;
        let u = self.u.component(0);
        let mut sum_u = exact::ExactSum::new();
        let mut sq = exact::ExactSum::new();
        let mut max = 0.0f64;
        for i in r.lo[0]..r.hi[0] {
            let pi = p[0][i - g[0] + owned.lo[0]];
            for j in r.lo[1]..r.hi[1] {
                let pj = p[1][j - g[1] + owned.lo[1]];
                let o = i * s[0] + j * s[1];
                let row = &u[o + r.lo[2]..o + r.hi[2]];
                sum_u.add_slice(row);
                let pk = &p[2][owned.lo[2]..owned.lo[2] + row.len()];
                for (&x, &pz) in row.iter().zip(pk) {
                    let d = x - a * (pi * pj * pz);
                    sq.add(d * d);
                    max = max.max(d.abs());
                }
            }
        }
        let sums = exact::allreduce_exact_sums(self.comm, &[sum_u, sq])?;
        let max = self.comm.allreduce_scalar(max, ReduceOp::Max)?;
        let n: usize = self.cfg.shape().iter().product();
        Ok(Diagnostics {
            step,
            time,
            mean: sums[0] / n as f64,
            max_error: max,
            rms_error: (sums[1] / n as f64).sqrt(),
        })
    }

    /// Writes `heat3d.pvti` and one `heat3d_rNNNN.vti` piece per rank
    /// (collective); returns the header's path on rank 0.
    fn write_vtk(&self, dir: &std::path::Path) -> Result<Option<std::path::PathBuf>> {
        let image = vtk::Image::new(self.cfg.shape(), self.cfg.spacing());
        let u = self.u.owned_values(0);
        Ok(image.write_parallel(
            self.comm,
            dir,
            "heat3d",
            &self.topo.owned(),
            &[vtk::Field::cell_scalar("u", &u)],
        )?)
    }
}

/// The spectral operator: r2c, multiply each mode by its growth factor,
/// c2r, on the same block decomposition as the finite differences (the
/// spectrum stays in the transposed layout between the two transforms).
struct Spectral {
    plan: dfft::Fft3d<dfft::R2c>,
    real: Vec<f64>,
    spec: Vec<Complex64>,
    scratch: Vec<Complex64>,
    factor: Vec<f64>,
}

/// The FFT layout of the block decomposition's real field (row-major
/// blocks, the same boxes); an error if the two disagree.
pub(crate) fn spectral_input(
    comm: &dyn Communicator,
    cfg: &Config,
    dec: &BlockDecomposition,
) -> Result<dfft::Layout> {
    let input = dfft::Layout::new(cfg.shape(), dec.grid().dims(), [0, 1, 2])?;
    if input.box_of(comm.rank()) != dec.box_of(comm.rank()) {
        bail!(
            "the FFT layout and the block decomposition disagree on rank {}",
            comm.rank()
        );
    }
    Ok(input)
}

/// The step's factor for each mode of this rank's share of the half
/// spectrum in layout `out` (exp(-D k^2 dt) or 1 / (1 + D k^2 dt)),
/// divided by `divisor` (the normalisation a caller folds in).
pub(crate) fn spectral_factors(
    comm: &dyn Communicator,
    cfg: &Config,
    out: &dfft::Layout,
    dt: f64,
    divisor: f64,
) -> Vec<f64> {
    let shape = cfg.shape();
    let l = cfg.length.get();
    let mut factor = vec![0.0; out.local_len(comm.rank())];
    out.for_each_local(comm.rank(), |index, o| {
        // The last axis is the halved one (indices up to n / 2).
        let k2 = dfft::k_squared(index, shape, l);
        let x = cfg.diffusivity * k2 * dt;
        let f = match cfg.spectral_step {
            SpectralStep::Exact => (-x).exp(),
            SpectralStep::Implicit => 1.0 / (1.0 + x),
        };
        factor[o] = f / divisor;
    });
    factor
}

impl Spectral {
    fn new(
        comm: &dyn Communicator,
        cfg: &Config,
        dec: &BlockDecomposition,
        dt: f64,
    ) -> Result<Self> {
        let input = spectral_input(comm, cfg, dec)?;
        let opts = dfft::Options {
            protocol: *cfg.protocol.value(),
            output: dfft::Output::Transposed,
            normalization: dfft::Normalization::Full,
            ..dfft::Options::default()
        };
        let plan = dfft::Fft3d::r2c(comm, &input, 2, opts)?;
        // The plan scales the backward transform itself.
        let factor = spectral_factors(comm, cfg, plan.output_layout(), dt, 1.0);
        Ok(Spectral {
            // Swept every step: on huge pages, as the fields are.
            real: halo::zeroed(plan.input_len()),
            spec: halo::zeroed(plan.output_len()),
            scratch: halo::zeroed(plan.scratch_len()),
            factor,
            plan,
        })
    }

    /// One step; phases: forward transform (with the copy in), multiply,
    /// backward transform, -, copy out.
    fn step(
        &mut self,
        comm: &dyn Communicator,
        layout: &FieldLayout,
        u: &mut Field<f64>,
        t: &mut StepTimes,
    ) -> Result<bool> {
        let t0 = Instant::now();
        let owned = layout.owned_region();
        let mut q = 0;
        rows(layout, &owned, |o, n| {
            self.real[q..q + n].copy_from_slice(&u.as_slice()[o..o + n]);
            q += n;
        });
        self.plan
            .forward(comm, &self.real, &mut self.spec, &mut self.scratch)?;
        let t1 = Instant::now();
        for (s, f) in self.spec.iter_mut().zip(&self.factor) {
            *s *= *f;
        }
        let t2 = Instant::now();
        // The spectrum is made again by every application: the backward
        // transform may use it as work space.
        self.plan
            .backward_overwriting(comm, &mut self.spec, &mut self.real, &mut self.scratch)?;
        let t3 = Instant::now();
        let mut q = 0;
        let mut ok = true;
        let data = u.as_mut_slice();
        rows(layout, &owned, |o, n| {
            data[o..o + n].copy_from_slice(&self.real[q..q + n]);
            ok &= all_finite(&data[o..o + n]);
            q += n;
        });
        t[0] += (t1 - t0).as_secs_f64();
        t[1] += (t2 - t1).as_secs_f64();
        t[2] += (t3 - t2).as_secs_f64();
        t[4] += t3.elapsed().as_secs_f64();
        Ok(ok)
    }
}

/// An error naming every option `cfg` sets away from its default that a
/// run on the device (`on_device`) or the host would not use, and what it
/// applies to, so that no setting is silently ignored: the CPU sweeps'
/// options (`cpu_stencil`, `tile_rows`) where no host sweep runs, the GPU
/// options on the CPU backend. (`tile_rows` on the host is checked with
/// the steps a pass, [`host_steps_per_pass`].)
fn unused_options(cfg: &Config, on_device: bool) -> Result<()> {
    let name = |v: &dyn std::fmt::Debug| format!("{v:?}").to_lowercase();
    let d = Config::default();
    let mut unused = vec![];
    if on_device || cfg.operator == Operator::Spectral {
        let run = if on_device {
            format!("backend {}", cfg.backend.value().name())
        } else {
            "operator spectral".to_string()
        };
        if cfg.stencil.cpu != d.stencil.cpu {
            unused.push(format!(
                "stencil.cpu = {} applies to the host's finite-difference sweeps (this run: {run})",
                name(&cfg.stencil.cpu)
            ));
        }
        if cfg.stencil.tile_rows != d.stencil.tile_rows {
            unused.push(format!(
                "stencil.tile_rows = {} applies to the host's multi-step pass (this run: {run})",
                cfg.stencil.tile_rows
            ));
        }
    }
    // The GPU stencil's options where the run has no stencil on the GPU:
    // on the CPU backend, or with the spectral operator (whose device step
    // takes only `gpu_exchange`, for its reshapes, and `device`).
    if !on_device || cfg.operator == Operator::Spectral {
        let run = if on_device {
            "operator spectral".to_string()
        } else {
            format!("backend {}", cfg.backend.value().name())
        };
        let what = if on_device {
            "the GPU finite-difference stencil"
        } else {
            "a GPU backend"
        };
        let gpu: [(&str, String, bool); 6] = [
            (
                "device",
                cfg.device.map_or(String::new(), |i| i.to_string()),
                cfg.device != d.device,
            ),
            (
                "stencil.gpu_chunk",
                cfg.stencil.gpu_chunk.to_string(),
                cfg.stencil.gpu_chunk != d.stencil.gpu_chunk,
            ),
            (
                "stencil.gpu_block",
                cfg.stencil.gpu_block.to_string(),
                cfg.stencil.gpu_block != d.stencil.gpu_block,
            ),
            (
                "stencil.gpu",
                name(&cfg.stencil.gpu),
                cfg.stencil.gpu != d.stencil.gpu,
            ),
            (
                "gpu_exchange",
                name(&cfg.gpu_exchange),
                cfg.gpu_exchange != d.gpu_exchange,
            ),
            (
                "stencil.gpu_periodic",
                name(&cfg.stencil.gpu_periodic),
                cfg.stencil.gpu_periodic != d.stencil.gpu_periodic,
            ),
        ];
        for (key, value, set) in gpu {
            // On the device the spectral step takes `device` and
            // `gpu_exchange`.
            if set && !(on_device && matches!(key, "device" | "gpu_exchange")) {
                unused.push(format!(
                    "{key} = {value} applies to {what} (this run: {run})"
                ));
            }
        }
    }
    Ok(appkit::validate::unused(unused)?)
}

/// The steps one host pass advances (`steps_per_pass`) on `ranks` ranks
/// with the rank's `layout`. More than one need one rank (its own periodic
/// neighbour, every owned extent at least the radius) besides
/// [`multi_step_unmet`]'s conditions; the default is [`policy::auto_steps`]
/// where they are possible.
fn host_steps_per_pass(cfg: &Config, ranks: usize, layout: &FieldLayout) -> Result<usize> {
    let r = layout.ghost[0];
    let mut unmet = multi_step_unmet(cfg);
    if !(ranks == 1 && layout.owned.iter().all(|&n| n >= r)) {
        unmet.insert(
            0,
            format!(
                "one rank, its own periodic neighbour, at least the radius along every axis (this run: {ranks} rank(s), {:?} owned cells)",
                layout.owned
            ),
        );
    }
    // The tiles are those of the multi-step pass; with the default steps a
    // pass where that pass is possible they also decide its steps.
    if cfg.stencil.tile_rows != 0 && (!unmet.is_empty() || cfg.stencil.steps_per_pass == 1) {
        bail!(
            "stencil.tile_rows = {} sets the tiles of the host's multi-step pass, which this run does not take ({}); leave it at 0",
            cfg.stencil.tile_rows,
            if unmet.is_empty() {
                "stencil.steps_per_pass = 1".to_string()
            } else {
                format!("it needs {}", unmet.join(", "))
            }
        );
    }
    let auto = if unmet.is_empty() && cfg.stencil.steps_per_pass == 0 {
        match cfg.stencil.tile_rows {
            0 => policy::auto_steps(layout),
            rows => policy::auto_steps_with_tile(layout, |_| rows),
        }
    } else {
        1
    };
    resolve_steps_per_pass(
        cfg.stencil.steps_per_pass,
        &unmet,
        auto,
        policy::MAX_HOST_STEPS_PER_PASS,
        "the host",
    )
}

/// The conditions for more than one step a pass that every backend has and `cfg`
/// does not meet, each naming what the run has: blocking mode and the
/// Euler finite-difference step.
pub(crate) fn multi_step_unmet(cfg: &Config) -> Vec<String> {
    let mut unmet = vec![];
    if cfg.mode != Mode::Blocking {
        unmet.push(format!("blocking mode (this run: {:?})", cfg.mode));
    }
    if !(cfg.operator == Operator::Fd && cfg.integrator == Integrator::Euler) {
        unmet.push(format!(
            "the Euler finite-difference step (this run: {:?}, {:?})",
            cfg.integrator, cfg.operator
        ));
    }
    unmet
}

/// `steps_per_pass` = `requested` resolved for a run that does not meet
/// the conditions `unmet` for more than one step a pass (none: they are
/// possible) on a backend (`backend`, for messages) that passes at most
/// `max` steps: the default (0) takes `auto` where possible, else 1;
/// asking for more than one where they are not possible is an error naming
/// each unmet condition, and more than `max` an error naming the range.
pub(crate) fn resolve_steps_per_pass(
    requested: usize,
    unmet: &[String],
    auto: usize,
    max: usize,
    backend: &str,
) -> Result<usize> {
    let possible = unmet.is_empty();
    match requested {
        0 => Ok(if possible { auto.clamp(1, max) } else { 1 }),
        1 => Ok(1),
        k if k > max => bail!(
            "stencil.steps_per_pass = {k} is not supported on {backend} (valid: 1 to {max}, or 0 for the default)"
        ),
        k if possible => Ok(k),
        k => bail!(
            "stencil.steps_per_pass = {k} needs {}; use 1, or 0 for the default",
            unmet.join(", ")
        ),
    }
}

/// Runs Heat3D on `comm` (collective). `progress` shows a progress bar on
/// rank 0 (hidden when stderr is not a terminal).
pub fn run(comm: &dyn Communicator, cfg: &Config, progress: bool) -> Result<Report> {
    let mut s = Solver::new(comm, cfg)?;
    let rank = comm.rank();
    let out_dir = cfg.output.dir.clone();
    if let Some(d) = &out_dir {
        appkit::output::create_dir(comm, d)?;
    }
    let opened = match (&out_dir, rank) {
        (Some(d), 0) if cfg.output.diagnostics => Series::create(
            &d.join("diagnostics.csv"),
            &["step", "time", "mean", "max_error", "rms_error"],
            FloatFormat::Exp,
        )
        .map(Some),
        _ => Ok(None),
    };
    // Every rank stops with rank 0's reason.
    appkit::output::rank0_result(comm, opened.as_ref().map(|_| ()))?;
    let mut diag_file = opened?;
    let bar = Progress::steps(cfg.steps as u64, progress && rank == 0);
    let mut times: Vec<StepTimes> = Vec::with_capacity(cfg.steps);
    let mut last = s.diagnostics(0)?;
    let log = |d: &Diagnostics, f: &mut Option<Series>| -> Result<()> {
        if let Some(f) = f {
            f.row(&[
                d.step.into(),
                d.time.into(),
                d.mean.into(),
                d.max_error.into(),
                d.rms_error.into(),
            ])?;
        }
        Ok(())
    };
    appkit::output::rank0_result(comm, log(&last, &mut diag_file))?;
    let wall = Instant::now();
    let per_pass = s.steps_per_pass();
    let mut step = 0;
    while step < cfg.steps {
        // A pass never crosses a diagnostics step.
        let next_diag = (step / cfg.diag_every + 1) * cfg.diag_every;
        let n = per_pass.min(next_diag.min(cfg.steps) - step);
        let mut t = [0.0; 5];
        let bad = s.step(n, &mut t)?;
        times.extend(std::iter::repeat_n(t.map(|x| x / n as f64), n));
        step += n;
        if let Some(k) = bad {
            let step = step - n + k;
            let (cell, v) = s.find_bad().unwrap_or(([0; 3], f64::NAN));
            bail!("non-finite value {v} in the field at step {step} (time {:e}), global cell {cell:?}, rank {rank}", step as f64 * s.dt);
        }
        if step % cfg.diag_every == 0 || step == cfg.steps {
            // Device runs flag non-finite values on the device and are
            // checked here, on the mirror they just downloaded.
            let flagged = s.sync_host()?;
            if s.on_device() {
                if let Some((cell, v)) = s.find_bad() {
                    let first = flagged.map_or_else(|| "unknown".into(), |f| f.to_string());
                    bail!("non-finite value {v} in the field at step {step} (time {:e}), global cell {cell:?}, rank {rank}; first flagged on the device at step {first}", step as f64 * s.dt);
                }
                if let Some(first) = flagged {
                    bail!("non-finite value flagged on the device at step {first} (time {:e}), rank {rank}", first as f64 * s.dt);
                }
            }
            last = s.diagnostics(step)?;
            appkit::output::rank0_result(comm, log(&last, &mut diag_file))?;
            bar.set_message(format!("max error {:.3e}", last.max_error));
        }
        bar.inc(n as u64);
    }
    let wall = wall.elapsed().as_secs_f64();
    bar.finish();
    // Median over timed steps of the per-step maximum over ranks.
    let warm = cfg.warmup.min(cfg.steps.saturating_sub(1));
    let timed = &times[warm..];
    // Device runs time each step with device events; host runs add up
    // their phases.
    let device_steps = s.device_step_seconds()?;
    let mut flat: Vec<f64> = timed
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            let total = match &device_steps {
                Some(d) => d[warm + i],
                None => t.iter().sum(),
            };
            t.iter().copied().chain([total])
        })
        .collect();
    comm.allreduce_f64(&mut flat, ReduceOp::Max)?;
    let col = |c: usize| median(&flat.chunks(6).map(|r| r[c]).collect::<Vec<_>>());
    let timings = PhaseTimes {
        post: col(0),
        interior: col(1),
        wait: col(2),
        shell: col(3),
        update: col(4),
        step: col(5),
    };
    let mut files = vec![];
    if let Some(f) = diag_file {
        files.push(f.path().display().to_string());
    }
    if let (Some(d), true) = (&out_dir, cfg.output.vtk) {
        files.extend(s.write_vtk(d)?.map(|p| p.display().to_string()));
    }
    let hash = field_hash(comm, &s.topo, &s.u)?;
    let mut wall_v = [wall];
    comm.broadcast(&mut wall_v, 0)?;
    let cells: usize = cfg.shape().iter().product();
    Ok(Report {
        config: cfg.clone(),
        ranks: comm.size(),
        backend: comm.backend().to_string(),
        device: s.device_name(),
        halo: s.halo_transport().to_string(),
        grid: s.topo.decomposition().grid().dims(),
        dt: s.dt,
        dt_limit: cfg.dt_limit()?,
        last,
        timings,
        timed_steps: timed.len(),
        wall: wall_v[0],
        cells_per_second: if timings.step > 0.0 {
            cells as f64 / timings.step
        } else {
            0.0
        },
        reshape_protocols: s.reshape_protocols(),
        cpu_stencil: s.cpu_stencil().to_string(),
        hash,
        hash_hex: appkit::hash::hex(hash),
        files,
    })
}

/// The protocol of each reshape of `plan`'s forward transform, by its
/// `Debug` name (`Auto` reports the winner of each).
pub fn reshape_protocols<T: dfft::Transform>(plan: &dfft::Fft3d<T>) -> Vec<String> {
    plan.protocols()
        .iter()
        .map(|(p, _)| format!("{p:?}"))
        .collect()
}

impl appkit::app::Report for Report {
    /// The human-readable summary printed at the end of a run.
    fn summary(&self) -> String {
        let c = &self.config;
        let t = &self.timings;
        let ms = |x: f64| x * 1e3;
        let (method, names) = match c.operator {
            Operator::Fd => (
                format!(
                    "FD order {}, {:?}, {:?} exchange ({} halo), {} sweeps",
                    c.order, c.integrator, c.mode, self.halo, self.cpu_stencil
                ),
                PHASES,
            ),
            Operator::Spectral => (
                format!(
                    "spectral, {:?} step, protocol {} (reshapes: {})",
                    c.spectral_step,
                    c.protocol,
                    if self.reshape_protocols.is_empty() {
                        "none".to_string()
                    } else {
                        self.reshape_protocols.join(", ")
                    }
                ),
                SPECTRAL_PHASES,
            ),
        };
        let vals = [t.post, t.interior, t.wait, t.shell, t.update];
        let phases: Vec<String> = names
            .iter()
            .zip(vals)
            .filter(|(n, _)| !n.is_empty())
            .map(|(n, v)| format!("{n} {:.3}", ms(v)))
            .collect();
        format!(
            "heat3d: {:?} cells, {method}, {} {} rank(s) on grid {:?}\n\
             steps {}  dt {:.4e} (limit {:.4e})  final time {:.4e}\n\
             error vs analytic: max {:.4e}  rms {:.4e}  (mean {:.6e})\n\
             median step of slowest rank over {} steps: {:.3} ms  ({:.3e} cell updates/s)\n\
             phases (ms): {}\n\
             wall {:.3} s\n\
             computed on: {}\n\
             field hash: {:016x}",
            c.shape(),
            self.ranks,
            self.backend,
            self.grid,
            c.steps,
            self.dt,
            self.dt_limit,
            self.last.time,
            self.last.max_error,
            self.last.rms_error,
            self.last.mean,
            self.timed_steps,
            ms(t.step),
            self.cells_per_second,
            phases.join("  "),
            self.wall,
            self.device,
            self.hash
        )
    }

    fn files(&self) -> &[String] {
        &self.files
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_a_run_would_not_use_are_refused_by_name() {
        let spectral = Config {
            operator: Operator::Spectral,
            stencil: config::StencilOptions {
                cpu: CpuStencil::Avx2,
                ..config::StencilOptions::default()
            },
            ..Config::default()
        };
        let e = unused_options(&spectral, false).unwrap_err().to_string();
        assert!(
            e.contains("this key would have no effect")
                && e.contains("stencil.cpu = avx2 applies to the host's finite-difference sweeps (this run: operator spectral)"),
            "{e}"
        );
        let on_gpu = Config {
            stencil: config::StencilOptions {
                tile_rows: 8,
                cpu: CpuStencil::Portable,
                ..config::StencilOptions::default()
            },
            backend: "cuda".parse().unwrap(),
            ..Config::default()
        };
        let e = unused_options(&on_gpu, true).unwrap_err().to_string();
        assert!(
            e.contains("these keys")
                && e.contains("stencil.cpu = portable")
                && e.contains(
                    "stencil.tile_rows = 8 applies to the host's multi-step pass (this run: backend cuda)"
                ),
            "{e}"
        );
        let gpu_on_cpu = Config {
            stencil: config::StencilOptions {
                gpu_block: 128,
                gpu: config::GpuStencil::Shared,
                ..config::StencilOptions::default()
            },
            device: Some(1),
            ..Config::default()
        };
        let e = unused_options(&gpu_on_cpu, false).unwrap_err().to_string();
        for part in [
            "device = 1 applies to a GPU backend (this run: backend cpu)",
            "stencil.gpu_block = 128",
            "stencil.gpu = shared",
        ] {
            assert!(e.contains(part), "{part}: {e}");
        }
        // What a run uses passes: the CPU options on the host's
        // finite-difference sweeps, the GPU options on the device.
        let host = Config {
            stencil: config::StencilOptions {
                cpu: CpuStencil::Avx2,
                tile_rows: 8,
                ..config::StencilOptions::default()
            },
            ..Config::default()
        };
        unused_options(&host, false).unwrap();
        unused_options(&gpu_on_cpu, true).unwrap();
        // The spectral operator on the device has no stencil there; its
        // reshapes take gpu_exchange.
        let e = unused_options(
            &Config {
                operator: Operator::Spectral,
                ..gpu_on_cpu.clone()
            },
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("stencil.gpu_block = 128 applies to the GPU finite-difference stencil (this run: operator spectral)")
                && e.contains("stencil.gpu = shared")
                && !e.contains("device"),
            "{e}"
        );
        unused_options(
            &Config {
                operator: Operator::Spectral,
                gpu_exchange: config::GpuExchange::Staged,
                device: Some(0),
                ..Config::default()
            },
            true,
        )
        .unwrap();
        unused_options(&Config::default(), false).unwrap();
    }

    #[test]
    fn tile_rows_need_the_multi_step_pass() {
        let layout = FieldLayout {
            owned: [16; 3],
            ghost: [1; 3],
            components: 1,
        };
        let cfg = |mode: Mode, k: usize| Config {
            mode,
            stencil: config::StencilOptions {
                steps_per_pass: k,
                tile_rows: 6,
                ..config::StencilOptions::default()
            },
            ..Config::default()
        };
        // Used: the pass is taken, or its steps are left to the default
        // (which the tile then decides).
        for k in [0, 2, 4] {
            host_steps_per_pass(&cfg(Mode::Blocking, k), 1, &layout).unwrap();
        }
        // Not used: one step a pass asked for, overlap mode, several ranks.
        let e = host_steps_per_pass(&cfg(Mode::Blocking, 1), 1, &layout)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("stencil.tile_rows = 6 sets the tiles of the host's multi-step pass, which this run does not take (stencil.steps_per_pass = 1)"),
            "{e}"
        );
        let e = host_steps_per_pass(&cfg(Mode::Overlap, 0), 1, &layout)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("it needs blocking mode (this run: Overlap)"),
            "{e}"
        );
        let e = host_steps_per_pass(&cfg(Mode::Blocking, 0), 2, &layout)
            .unwrap_err()
            .to_string();
        assert!(e.contains("it needs one rank"), "{e}");
    }

    #[test]
    fn host_steps_a_pass_default_to_the_most_without_much_recomputation() {
        let layout = |r: usize| FieldLayout {
            owned: [16; 3],
            ghost: [r; 3],
            components: 1,
        };
        let cfg = |order: usize, mode: Mode, k: usize| Config {
            order,
            mode,
            stencil: config::StencilOptions {
                steps_per_pass: k,
                ..config::StencilOptions::default()
            },
            ..Config::default()
        };
        let b = Mode::Blocking;
        for order in (2..=20).step_by(2) {
            let got = host_steps_per_pass(&cfg(order, b, 0), 1, &layout(order / 2)).unwrap();
            assert_eq!(got, policy::auto_steps(&layout(order / 2)), "order {order}");
            // Possible at every order when asked for.
            for k in 1..=policy::MAX_HOST_STEPS_PER_PASS {
                let got = host_steps_per_pass(&cfg(order, b, k), 1, &layout(order / 2)).unwrap();
                assert_eq!(got, k, "order {order}");
            }
        }
        let one = |c: &Config, ranks| host_steps_per_pass(c, ranks, &layout(1)).unwrap();
        assert_eq!(one(&cfg(2, Mode::Overlap, 0), 1), 1);
        assert_eq!(one(&cfg(2, b, 0), 2), 1);
        assert_eq!(one(&cfg(2, b, 1), 1), 1);
        let rk = Config {
            integrator: Integrator::Rk4,
            ..cfg(2, b, 0)
        };
        assert_eq!(one(&rk, 1), 1);
        let e = host_steps_per_pass(
            &Config {
                stencil: config::StencilOptions {
                    steps_per_pass: 3,
                    ..rk.stencil
                },
                ..rk
            },
            1,
            &layout(1),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("steps_per_pass = 3 needs")
                && e.contains("the Euler finite-difference step (this run: Rk4"),
            "{e}"
        );
        let over = policy::MAX_HOST_STEPS_PER_PASS + 1;
        let e = host_steps_per_pass(&cfg(2, b, over), 1, &layout(1))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "= {over} is not supported on the host (valid: 1 to {}",
                policy::MAX_HOST_STEPS_PER_PASS
            )),
            "{e}"
        );
    }
}
