//! PFC: the phase-field crystal model in its conserved Swift-Hohenberg form,
//!
//! ```text
//! dpsi/dt = lap[ (r + (1 + lap)^2) psi + psi^3 ],
//! F = mean over cells of [ psi/2 (r + (1 + lap)^2) psi + psi^4/4 ],
//! ```
//!
//! on a periodic box, distributed through `dfft`. Each rank owns one block
//! of the real field (`ProcessGrid::for_shape`, `Layout::new(shape, dims,
//! [0, 1, 2])`); the spectrum stays in the transposed layout of the r2c plan.
//!
//! **Step.** Semi-implicit, linear part implicit and `N = psi^3` explicit:
//!
//! ```text
//! psi_hat' = (psi_hat - dt k^2 N_hat) / (1 + dt k^2 (r + (1 - k^2)^2))
//! ```
//!
//! At `k = 0` the factor is exactly 1 and `dt k^2 N_hat` exactly 0, so the
//! mean density is kept (up to the round-off of one transform pair). The
//! step is a pure function of `psi`, and every transform gives the same bits
//! for every rank count (see `dfft`), so runs on any rank count and runs
//! restarted from a checkpoint (on any rank count) give bit-identical fields.
//!
//! **Backends.** `backend = "cpu"` runs the step above on the host's ranks.
//! `backend = "cuda"` (feature `cuda`) keeps each rank's block of `psi` on
//! a GPU and runs the same step through cuFFT and two kernels (on any
//! number of ranks; several exchange their reshapes through
//! `dfft::cuda::DeviceFft3d`), with the per-mode factors from the same
//! function ([`mode_factors`]); the host
//! `psi` is then a mirror, downloaded for the diagnostics, the hash and
//! the output, which run the host code unchanged. cuFFT rounds differently
//! from the host FFT, so the two backends agree to rounding, not to the
//! bit.
#![warn(missing_docs)]

pub mod checkpoint;
pub mod config;
#[cfg(feature = "cuda")]
mod device;
pub mod kernels;

use anyhow::{bail, Result};
use appkit::csv::{FloatFormat, Series};
/// A 64-bit mixing function (the splitmix64 finaliser).
pub use appkit::hash::mix;
use appkit::progress::Progress;
use appkit::stats::median;
use appkit::vtk;
use comm::{exact, CommExt, Communicator, IndexBox, ProcessGrid, ReduceOp};
use config::{Config, Initial, BCC_SHELL, LATTICE};
use num_complex::Complex64;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A uniform number in [0, 1) from a seed and a global cell index: the same
/// for every rank count.
pub fn uniform(seed: u64, index: u64) -> f64 {
    (mix(mix(seed) ^ mix(index.wrapping_add(0x5851_F42D_4C95_7F2D))) >> 11) as f64
        / (1u64 << 53) as f64
}

/// The factors of one mode of the half spectrum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModeFactors {
    /// `dt k^2`, the weight of `N_hat` in the step.
    pub dtk2: f64,
    /// `1 / (1 + dt k^2 (r + (1 - k^2)^2))`, the implicit factor.
    pub inv: f64,
    /// `(1 - k^2)^2`, the operator of the free energy.
    pub op: f64,
}

/// The factors of the mode with global spectral index `[i, j, k]` (axis 2
/// halved: `k <= n2 / 2`; axes 0 and 1 in FFT order, indices above `n / 2`
/// the negative wavenumbers), `k = 2 pi m / L` per axis. Both backends
/// take their factors from here.
pub fn mode_factors(cfg: &Config) -> impl Fn([usize; 3]) -> ModeFactors {
    let shape = cfg.shape();
    let l = cfg.length();
    let (dt, cfg) = (cfg.dt, cfg.clone());
    move |index| {
        // The last axis is the halved one (indices up to n / 2).
        let k2 = dfft::k_squared(index, shape, l);
        ModeFactors {
            dtk2: dt * k2,
            inv: 1.0 / (1.0 + dt * k2 * cfg.symbol(k2)),
            op: (1.0 - k2) * (1.0 - k2),
        }
    }
}

/// Diagnostics at one step.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Diagnostics {
    /// Step number (counted from the start of the first run).
    pub step: u64,
    /// Time.
    pub time: f64,
    /// Free energy per cell (exact global sum: the same bits for every rank
    /// count).
    pub free_energy: f64,
    /// Mean density (exact global sum).
    pub mean_density: f64,
}

/// The solver state of one rank (collective methods must be called on every
/// rank).
pub struct Solver<'c> {
    comm: &'c dyn Communicator,
    cfg: Config,
    plan: dfft::Fft3d<dfft::R2c>,
    grid: [usize; 3],
    block: IndexBox,
    strides: [usize; 3],
    psi: Vec<f64>,
    work: Vec<f64>,
    spec: Vec<Complex64>,
    spec_n: Vec<Complex64>,
    scratch: Vec<Complex64>,
    /// dt k^2 per mode.
    dtk2: Vec<f64>,
    /// 1 / (1 + dt k^2 (r + (1 - k^2)^2)) per mode.
    inv: Vec<f64>,
    /// (1 - k^2)^2 per mode.
    op: Vec<f64>,
    nonlinear: bool,
    step: u64,
    time: f64,
    /// The device state with `--backend cuda`; `psi` is then the host
    /// mirror of the device's field.
    #[cfg(feature = "cuda")]
    device: Option<device::DeviceSolver>,
}

impl std::fmt::Debug for Solver<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Solver")
            .field("rank", &self.comm.rank())
            .field("grid", &self.grid)
            .field("block", &self.block)
            .field("step", &self.step)
            .finish()
    }
}

impl<'c> Solver<'c> {
    /// Plans the transforms and sets the initial condition, or reads it from
    /// the checkpoint `restart` (collective). With `backend = "cuda"` it
    /// first opens the device and checks its free memory (before anything
    /// is allocated).
    pub fn new(comm: &'c dyn Communicator, cfg: &Config, restart: Option<&Path>) -> Result<Self> {
        cfg.validate()?;
        let on_device = *cfg.backend.value() != gpu::Backend::Cpu;
        gpu_options_unused(cfg, on_device)?;
        #[cfg(feature = "cuda")]
        let dev = if on_device {
            Some(device::preflight(comm, cfg)?)
        } else {
            None
        };
        let shape = cfg.shape();
        let rank = comm.rank();
        let grid = ProcessGrid::for_shape(shape, comm.size(), [true; 3])?.dims();
        let input = dfft::Layout::new(shape, grid, [0, 1, 2])?;
        let opts = dfft::Options {
            protocol: *cfg.protocol.value(),
            output: dfft::Output::Transposed,
            normalization: dfft::Normalization::Full,
            ..dfft::Options::default()
        };
        let plan = dfft::Fft3d::r2c(comm, &input, 2, opts)?;
        let out = plan.output_layout().clone();
        let factors = mode_factors(cfg);
        let len = out.local_len(rank);
        // The device steps with its own copies of the step's factors; the
        // host keeps only the free energy's.
        let step_len = if on_device { 0 } else { len };
        let (mut dtk2, mut inv, mut op) =
            (vec![0.0; step_len], vec![0.0; step_len], vec![0.0; len]);
        out.for_each_local(rank, |q, o| {
            let m = factors(q);
            if !on_device {
                dtk2[o] = m.dtk2;
                inv[o] = m.inv;
            }
            op[o] = m.op;
        });
        let mut s = Solver {
            comm,
            cfg: cfg.clone(),
            grid,
            block: input.box_of(rank),
            strides: input.strides(rank),
            psi: vec![0.0; plan.input_len()],
            work: vec![0.0; plan.input_len()],
            spec: vec![Complex64::default(); plan.output_len()],
            spec_n: vec![Complex64::default(); if on_device { 0 } else { plan.output_len() }],
            scratch: vec![Complex64::default(); plan.scratch_len()],
            plan,
            dtk2,
            inv,
            op,
            nonlinear: true,
            step: 0,
            time: 0.0,
            #[cfg(feature = "cuda")]
            device: None,
        };
        match restart {
            Some(path) => {
                let ck = checkpoint::read(path, shape)?;
                if ck.physics_hash != Some(cfg.physics_hash()) && rank == 0 {
                    eprintln!(
                        "warning: checkpoint {} was written with different r, dt or grid; the continuation will not match an uninterrupted run",
                        path.display()
                    );
                }
                s.step = ck.step;
                s.time = ck.time;
                let g = shape;
                s.set_field(|[i, j, k]| ck.field[(i * g[1] + j) * g[2] + k]);
            }
            None => s.set_initial(),
        }
        #[cfg(feature = "cuda")]
        if let Some(dev) = dev {
            s.device = Some(device::DeviceSolver::new(dev, comm, cfg, &input, &s.psi)?);
        }
        Ok(s)
    }

    /// Brings the host's `psi` up to date with the device's (cuda backend;
    /// nothing on the cpu), and fails if the device flagged a non-finite
    /// field.
    fn sync_host(&mut self) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(d) = &mut self.device {
            if let Some(first) = d.sync_host(&mut self.psi)? {
                let back = self.step.saturating_sub(first) as f64 * self.cfg.dt;
                bail!(
                    "non-finite value in the field at step {first} (time {:.4}; flagged on the device, found at step {}); reduce dt (now {})",
                    self.time - back,
                    self.step,
                    self.cfg.dt
                );
            }
        }
        Ok(())
    }

    /// What the field is computed on: `cpu`, or the GPU's description.
    pub fn device_name(&self) -> String {
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.device {
            return d.device().info().to_string();
        }
        "cpu".to_string()
    }

    /// Device seconds of each step so far (cuda backend), else `None`.
    fn device_step_seconds(&mut self) -> Result<Option<Vec<f64>>> {
        #[cfg(feature = "cuda")]
        if let Some(d) = &mut self.device {
            return Ok(Some(d.step_seconds()?));
        }
        Ok(None)
    }

    /// Sets the owned cells to `f(global index)` (on the cuda backend,
    /// uploaded before the next step).
    pub fn set_field(&mut self, f: impl Fn([usize; 3]) -> f64) {
        #[cfg(feature = "cuda")]
        if let Some(d) = &mut self.device {
            // The host's block is now the newer.
            d.host_written();
        }
        let (b, st) = (self.block, self.strides);
        for i in b.lo[0]..b.hi[0] {
            for j in b.lo[1]..b.hi[1] {
                for k in b.lo[2]..b.hi[2] {
                    let o = (i - b.lo[0]) * st[0] + (j - b.lo[1]) * st[1] + (k - b.lo[2]) * st[2];
                    self.psi[o] = f([i, j, k]);
                }
            }
        }
    }

    /// Calls `f(global index, value)` for every owned cell (on the cuda
    /// backend after downloading the field; an error if it is non-finite).
    pub fn for_each(&mut self, mut f: impl FnMut([usize; 3], f64)) -> Result<()> {
        self.sync_host()?;
        let (b, st) = (self.block, self.strides);
        for i in b.lo[0]..b.hi[0] {
            for j in b.lo[1]..b.hi[1] {
                for k in b.lo[2]..b.hi[2] {
                    let o = (i - b.lo[0]) * st[0] + (j - b.lo[1]) * st[1] + (k - b.lo[2]) * st[2];
                    f([i, j, k], self.psi[o]);
                }
            }
        }
        Ok(())
    }

    fn set_initial(&mut self) {
        let c = self.cfg.clone();
        let g = c.shape();
        let psi0 = c.mean_density;
        match c.initial {
            Initial::Noise => self.set_field(|[i, j, k]| {
                let q = ((i * g[1] + j) * g[2] + k) as u64;
                psi0 + c.noise_amplitude * (2.0 * uniform(c.seed, q) - 1.0)
            }),
            Initial::Seed => {
                let amp = c.seed_amplitude();
                let h = c.spacing();
                let n = c.points_per_period as f64;
                let centre = c.length().map(|l| 0.5 * l);
                let radius = c.seed_radius * LATTICE;
                let width = 0.25 * LATTICE;
                self.set_field(|idx| {
                    let x = idx.map(|i| i as f64 * h);
                    let d = (0..3)
                        .map(|a| (x[a] - centre[a]).powi(2))
                        .sum::<f64>()
                        .sqrt();
                    let mask = 0.5 * (1.0 - ((d - radius) / width).tanh());
                    // q_j . x = 2 pi (q_j . idx) / points_per_period, exactly
                    // periodic on the grid.
                    let wave: f64 = BCC_SHELL
                        .iter()
                        .map(|q| {
                            let m = (0..3).map(|a| q[a] as f64 * idx[a] as f64).sum::<f64>();
                            (2.0 * std::f64::consts::PI * m / n).cos()
                        })
                        .sum();
                    psi0 + amp * mask * wave
                });
            }
        }
    }

    /// Switches the `psi^3` term off or on (for testing the linear part).
    pub fn set_nonlinear(&mut self, on: bool) {
        self.nonlinear = on;
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The process grid.
    pub fn grid(&self) -> [usize; 3] {
        self.grid
    }

    /// This rank's block of the real field (global indices).
    pub fn block(&self) -> IndexBox {
        self.block
    }

    /// The current step number.
    pub fn step_number(&self) -> u64 {
        self.step
    }

    /// The current time.
    pub fn time(&self) -> f64 {
        self.time
    }

    /// The protocol of each reshape of the forward transform as the plan
    /// reports it (`Auto`'s winners), by `dfft`'s `Debug` names (on the
    /// cuda backend `DeviceDirect`, `DeviceStaged` or `DeviceNccl`); empty
    /// when the transform needs no reshape (one rank).
    pub fn reshape_protocols(&self) -> Vec<String> {
        #[cfg(feature = "cuda")]
        if let Some(d) = &self.device {
            return d.reshape_protocols();
        }
        self.plan
            .protocols()
            .iter()
            .map(|(p, _)| format!("{p:?}"))
            .collect()
    }

    /// One semi-implicit step (collective). Returns false when a value is
    /// not finite. On the cuda backend the step is queued on the device and
    /// returns true: non-finite values are flagged there and reported as an
    /// error by the next call that reads the field (diagnostics, hash,
    /// output, [`Self::for_each`]).
    pub fn step(&mut self) -> Result<bool> {
        #[cfg(feature = "cuda")]
        if let Some(d) = &mut self.device {
            d.sync_device(&self.psi)?;
            d.step(self.comm, self.nonlinear, self.step + 1)?;
            self.step += 1;
            self.time += self.cfg.dt;
            return Ok(true);
        }
        self.plan
            .forward(self.comm, &self.psi, &mut self.spec, &mut self.scratch)?;
        if self.nonlinear {
            for (w, p) in self.work.iter_mut().zip(&self.psi) {
                *w = p * p * p;
            }
            self.plan
                .forward(self.comm, &self.work, &mut self.spec_n, &mut self.scratch)?;
            for (((s, n), a), f) in self
                .spec
                .iter_mut()
                .zip(&self.spec_n)
                .zip(&self.dtk2)
                .zip(&self.inv)
            {
                *s = (*s - *n * *a) * *f;
            }
        } else {
            for (s, f) in self.spec.iter_mut().zip(&self.inv) {
                *s *= *f;
            }
        }
        // `spec` is made again from `psi` by every step and diagnostic:
        // the backward transform may use it as work space.
        self.plan.backward_overwriting(
            self.comm,
            &mut self.spec,
            &mut self.psi,
            &mut self.scratch,
        )?;
        self.step += 1;
        self.time += self.cfg.dt;
        let ok = self.psi.iter().all(|v| v.is_finite());
        let bad = self
            .comm
            .allreduce_scalar(if ok { 0.0 } else { 1.0 }, ReduceOp::Max)?;
        Ok(bad == 0.0)
    }

    /// Free energy and mean density (collective; exact sums; on the host,
    /// from the downloaded field on the cuda backend).
    pub fn diagnostics(&mut self) -> Result<Diagnostics> {
        self.sync_host()?;
        self.plan
            .forward(self.comm, &self.psi, &mut self.spec, &mut self.scratch)?;
        for (s, f) in self.spec.iter_mut().zip(&self.op) {
            *s *= *f;
        }
        self.plan.backward_overwriting(
            self.comm,
            &mut self.spec,
            &mut self.work,
            &mut self.scratch,
        )?;
        let r = self.cfg.r;
        let mut energy = exact::ExactSum::new();
        let mut mass = exact::ExactSum::new();
        for (p, lp) in self.psi.iter().zip(&self.work) {
            energy.add(0.5 * p * (r * p + lp) + 0.25 * (p * p) * (p * p));
            mass.add(*p);
        }
        let sums = exact::allreduce_exact_sums(self.comm, &[energy, mass])?;
        let n = self.cfg.shape().iter().product::<usize>() as f64;
        Ok(Diagnostics {
            step: self.step,
            time: self.time,
            free_energy: sums[0] / n,
            mean_density: sums[1] / n,
        })
    }

    /// A hash of the global field that depends only on the value at each
    /// global index ([`appkit::field_hash`]): the same for any rank count
    /// (collective).
    pub fn field_hash(&mut self) -> Result<u64> {
        self.sync_host()?;
        // The input layout is row-major in its block (order [0, 1, 2]).
        Ok(appkit::field_hash(
            self.comm,
            self.cfg.shape(),
            &self.block,
            &self.psi,
        )?)
    }

    /// The global field in row-major order (last axis fastest) on rank 0,
    /// `None` elsewhere (collective).
    pub fn gather(&mut self) -> Result<Option<Vec<f64>>> {
        self.sync_host()?;
        // The input layout is row-major in its block (order [0, 1, 2]).
        Ok(appkit::checkpoint::gather_f64(
            self.comm,
            self.cfg.shape(),
            &self.block,
            &self.psi,
        )?)
    }

    /// Writes the checkpoint `pfc_NNNNNN.chk` into `dir` (collective);
    /// returns its path on rank 0.
    pub fn write_checkpoint(&mut self, dir: &Path) -> Result<Option<PathBuf>> {
        self.sync_host()?;
        let p = dir.join(format!("pfc_{:06}.chk", self.step));
        let header = checkpoint::header(&self.cfg, self.step, self.time);
        appkit::checkpoint::write_distributed_f64(self.comm, &p, &header, &self.block, &self.psi)?;
        Ok((self.comm.rank() == 0).then_some(p))
    }

    /// Writes `pfc_NNNNNN.pvti` and one `.vti` piece per rank into `dir`
    /// (collective).
    pub fn write_vtk(&mut self, dir: &Path) -> Result<Option<PathBuf>> {
        self.sync_host()?;
        let image = vtk::Image::new(self.cfg.shape(), [self.cfg.spacing(); 3]);
        Ok(image.write_parallel(
            self.comm,
            dir,
            &format!("pfc_{:06}", self.step),
            &self.block,
            &[vtk::Field::cell_scalar("psi", &self.psi)],
        )?)
    }
}

/// What a run reports (on every rank; identical everywhere except `wall`
/// and the timings, which come from rank 0's broadcast).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// The configuration as run.
    pub config: Config,
    /// Grid points per axis.
    pub shape: [usize; 3],
    /// Number of ranks.
    pub ranks: usize,
    /// Backend name of the communicator (`local` or `mpi`).
    pub backend: String,
    /// What the field was computed on: `cpu`, or the GPU's description.
    pub device: String,
    /// Process grid.
    pub grid: [usize; 3],
    /// Amplitude of the seed (0 for noise or a restart).
    pub seed_amplitude: f64,
    /// The checkpoint the run started from.
    pub restart: Option<String>,
    /// Diagnostics at the first step of this run.
    pub first: Diagnostics,
    /// Diagnostics at the final step.
    pub last: Diagnostics,
    /// Wall time of the stepping loop (seconds).
    pub wall: f64,
    /// Mean time per step (seconds, diagnostics and output included).
    pub time_per_step: f64,
    /// Median seconds of the step alone (transforms and update; no
    /// diagnostics or output) of the slowest rank: device events around
    /// each step on the cuda backend, the host clock on the cpu.
    pub median_step: f64,
    /// The protocol of each reshape of the forward transform
    /// ([`Solver::reshape_protocols`]; the requested one is
    /// `config.protocol`).
    pub reshape_protocols: Vec<String>,
    /// Order-independent hash of the global field.
    pub hash: u64,
    /// The same hash as 16 hex digits.
    pub hash_hex: String,
    /// Files written (on rank 0).
    pub files: Vec<String>,
}

impl appkit::app::Report for Report {
    /// The human-readable summary printed at the end of a run.
    fn summary(&self) -> String {
        let drift = self.last.mean_density - self.first.mean_density;
        format!(
            "pfc: {:?} grid ({:?} BCC periods x {} points), {} {} rank(s) on grid {:?}\n\
             r {}  psi0 {}  dt {}  steps {} -> {}  final time {:.4}\n\
             reshape protocol {} (reshapes: {})\n\
             free energy: {:.12e} -> {:.12e}\n\
             mean density: {:.15e} (drift {:.3e}, relative {:.3e})\n\
             time per step {:.3} ms (median step {:.3} ms)  wall {:.3} s\n\
             computed on: {}\n\
             field hash: {:016x}",
            self.shape,
            self.config.periods.get(),
            self.config.points_per_period,
            self.ranks,
            self.backend,
            self.grid,
            self.config.r,
            self.config.mean_density,
            self.config.dt,
            self.first.step,
            self.last.step,
            self.last.time,
            self.config.protocol,
            if self.reshape_protocols.is_empty() {
                "none".to_string()
            } else {
                self.reshape_protocols.join(", ")
            },
            self.first.free_energy,
            self.last.free_energy,
            self.last.mean_density,
            drift,
            drift / self.first.mean_density.abs().max(f64::MIN_POSITIVE),
            self.time_per_step * 1e3,
            self.median_step * 1e3,
            self.wall,
            self.device,
            self.hash
        )
    }

    fn files(&self) -> &[String] {
        &self.files
    }
}

/// The columns of `pfc.csv`.
const COLUMNS: [&str; 4] = ["step", "time", "free_energy", "mean_density"];

/// Opens the diagnostics series `path` on rank 0 (collective): a new file,
/// or on a restart from step `from` the existing one continued after its
/// rows up to that step (rows of later steps are cut off; a missing file is
/// created). Every rank fails with rank 0's reason. Returns the series
/// (rank 0) and the step of the last row kept.
fn open_series(
    comm: &dyn Communicator,
    path: &Path,
    from: Option<u64>,
) -> Result<(Option<Series>, Option<u64>)> {
    let mut kept = None;
    let series = appkit::csv::open_series(
        comm,
        path,
        &COLUMNS,
        FloatFormat::ExpDigits(17),
        from,
        |fields| {
            if let Some(step) = fields.first().and_then(|f| f.parse::<u64>().ok()) {
                kept = Some(step);
            }
        },
    )?;
    Ok((series, kept))
}

fn log(f: &mut Option<Series>, d: &Diagnostics) -> Result<()> {
    if let Some(f) = f {
        f.row(&[
            d.step.into(),
            d.time.into(),
            d.free_energy.into(),
            d.mean_density.into(),
        ])?;
    }
    Ok(())
}

/// An error naming the GPU options `cfg` sets away from their defaults on
/// the CPU backend, which would not use them (no setting is silently
/// ignored).
fn gpu_options_unused(cfg: &Config, on_device: bool) -> Result<()> {
    if on_device {
        return Ok(());
    }
    let run = format!("this run: backend {}", cfg.backend.value().name());
    let mut unused = vec![];
    // The defaults: no device named, `auto` exchange.
    if let Some(i) = cfg.device {
        unused.push(format!("device = {i} applies to a GPU backend ({run})"));
    }
    if cfg.gpu_exchange != Config::default().gpu_exchange {
        unused.push(format!(
            "gpu_exchange = {} applies to a GPU backend ({run})",
            format!("{:?}", cfg.gpu_exchange).to_lowercase()
        ));
    }
    Ok(appkit::validate::unused(unused)?)
}

/// Runs PFC on `comm` (collective), from the initial condition or from the
/// checkpoint `restart`. `progress` shows a progress bar on rank 0.
pub fn run(
    comm: &dyn Communicator,
    cfg: &Config,
    restart: Option<&Path>,
    progress: bool,
) -> Result<Report> {
    let mut s = Solver::new(comm, cfg, restart)?;
    let rank = comm.rank();
    let out = cfg.output.dir.clone();
    if let Some(d) = &out {
        appkit::output::create_dir(comm, d)?;
    }
    let (mut csv, kept) = match &out {
        Some(d) if cfg.output.diagnostics => {
            open_series(comm, &d.join("pfc.csv"), restart.map(|_| s.step_number()))?
        }
        _ => (None, None),
    };
    let mut files = vec![];
    let mut keep = |p: Option<PathBuf>| {
        if let Some(p) = p {
            files.push(p.display().to_string());
        }
    };
    let first = s.diagnostics()?;
    // A continued series already holds the row of the restart step (only
    // rank 0 knows; every rank learns whether its write failed).
    let wrote = if kept != Some(first.step) {
        log(&mut csv, &first)
    } else {
        Ok(())
    };
    appkit::output::rank0_result(comm, wrote)?;
    // The initial state of a fresh run is step 0 of the snapshot schedule.
    if let (Some(d), None) = (&out, restart) {
        if cfg.output.vtk_every > 0 && cfg.output.vtk_due(s.step_number(), false) {
            keep(s.write_vtk(d)?);
        }
    }
    // A fresh run of no steps ends at its initial state.
    if let (Some(d), None, 0) = (&out, restart, cfg.steps) {
        if cfg.output.vtk_due(s.step_number(), true) && cfg.output.vtk_every == 0 {
            keep(s.write_vtk(d)?);
        }
        if cfg.output.checkpoint_due(s.step_number(), true) {
            keep(s.write_checkpoint(d)?);
        }
    }
    let bar = Progress::steps(cfg.steps as u64, progress && rank == 0);
    let mut last = first;
    let mut step_times = Vec::with_capacity(cfg.steps);
    let wall = Instant::now();
    for i in 1..=cfg.steps {
        let t0 = Instant::now();
        let finite = s.step()?;
        step_times.push(t0.elapsed().as_secs_f64());
        // The cuda backend flags non-finite values on the device; the
        // diagnostics and the output below report them.
        if !finite {
            bail!(
                "non-finite value in the field at step {} (time {:.4}); reduce dt (now {})",
                s.step_number(),
                s.time(),
                cfg.dt
            );
        }
        let n = s.step_number();
        if n % cfg.diag_every as u64 == 0 || i == cfg.steps {
            last = s.diagnostics()?;
            appkit::output::rank0_result(comm, log(&mut csv, &last))?;
            bar.set_message(format!("F {:.6e}", last.free_energy));
        }
        if let Some(d) = &out {
            let done = i == cfg.steps;
            if cfg.output.vtk_due(n, done) {
                keep(s.write_vtk(d)?);
            }
            if cfg.output.checkpoint_due(n, done) {
                keep(s.write_checkpoint(d)?);
            }
        }
        bar.inc(1);
    }
    let mut wall = [wall.elapsed().as_secs_f64()];
    bar.finish();
    comm.broadcast(&mut wall, 0)?;
    if let Some(d) = s.device_step_seconds()? {
        step_times = d;
    }
    comm.allreduce_f64(&mut step_times, ReduceOp::Max)?;
    if let Some(f) = csv {
        files.insert(0, f.path().display().to_string());
    }
    let hash = s.field_hash()?;
    Ok(Report {
        config: cfg.clone(),
        shape: cfg.shape(),
        ranks: comm.size(),
        backend: comm.backend().to_string(),
        device: s.device_name(),
        grid: s.grid(),
        seed_amplitude: if restart.is_none() && cfg.initial == Initial::Seed {
            cfg.seed_amplitude()
        } else {
            0.0
        },
        restart: restart.map(|p| p.display().to_string()),
        first,
        last,
        wall: wall[0],
        time_per_step: wall[0] / cfg.steps.max(1) as f64,
        median_step: median(&step_times),
        reshape_protocols: s.reshape_protocols(),
        hash,
        hash_hex: appkit::hash::hex(hash),
        files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_options_on_the_cpu_backend_are_refused_by_name() {
        let cfg = Config {
            gpu_exchange: config::GpuExchange::Staged,
            ..Config::default()
        };
        let e = gpu_options_unused(&cfg, false).unwrap_err().to_string();
        assert!(
            e.contains(
                "this key would have no effect on this run: gpu_exchange = staged applies to a GPU backend (this run: backend cpu)"
            ),
            "{e}"
        );
        let both = Config {
            device: Some(2),
            ..cfg.clone()
        };
        let e = gpu_options_unused(&both, false).unwrap_err().to_string();
        assert!(
            e.contains("these keys") && e.contains("device = 2 applies to a GPU backend"),
            "{e}"
        );
        gpu_options_unused(&both, true).unwrap();
        gpu_options_unused(&Config::default(), false).unwrap();
    }
}
