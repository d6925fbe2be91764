//! `poisson`: an HPGMG-style benchmark of the [`multigrid`] crate.
//!
//! A manufactured-solution Poisson problem `-Δu = f` on a box of cubic
//! cells is solved to a relative residual by multigrid-preconditioned
//! conjugate gradients or by V-cycles, on in-process ranks or under MPI.
//! The run reports the setup and solve times, the iteration and residual
//! history, halo exchanges per V-cycle, per-level and per-phase times (the
//! maximum over ranks), the error against the exact solution, DOF/s (global
//! cells divided by the solve time) and a hash of the solution that depends
//! only on the value at each global index, so it is the same for every
//! rank count, process grid and solver option.
//!
//! **Manufactured solution** ([`Manufactured`]): with `k_d = 2π / L_d`,
//! ```text
//! u(x) = Π_d s_d(k_d x_d) + Σ_d q_d x_d²
//! ```
//! where `s_d = cos` on axes with a Neumann face (its derivative vanishes
//! on both walls) and `sin` otherwise, `q_d = 1/2` on non-periodic axes and
//! 0 on periodic ones. Dirichlet faces get the values of `u`, Neumann faces
//! its outward normal derivative, both through
//! [`multigrid::Hierarchy::add_boundary_values`]; the right-hand side is
//! `f = Σ_d k_d² Π s - Σ_d 2 q_d` at the cell centres. The quadratic part is
//! reproduced exactly by the 7-point stencil; the trigonometric part gives
//! the second-order discretisation error. For the singular problems (all
//! periodic or all Neumann) the discrete right-hand side sums to zero up
//! to round-off, and the error is measured against `u` minus its mean
//! over the cell centres (the solver returns the zero-mean solution).
#![warn(missing_docs)]

pub mod config;
#[cfg(feature = "cuda")]
mod device;

/// V-cycle and copy timings on the device (`Report::device_timing`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceTiming {
    /// Median time of one V-cycle (ms), each run alone and complete.
    pub vcycle_ms: f64,
    /// Every V-cycle's time (ms).
    pub vcycle_ms_all: Vec<f64>,
    /// Median bandwidth of a device-to-device copy of one fine field into
    /// another, bytes read plus bytes written (GB/s).
    pub copy_gbs: f64,
}

use anyhow::Result;
use appkit::hash::mix;
use appkit::stats::median;
use comm::exact::allreduce_exact_sum;
use comm::{CommExt, Communicator, IndexBox, ReduceOp};
use config::{Config, Solver};
use halo::Field;
use multigrid::{Boundary, Hierarchy, LevelStats, Poisson, SolveReport};
use serde::{Deserialize, Serialize};
use std::f64::consts::PI;
use std::time::Instant;

/// The exact solution of the benchmark problem for one set of boundary
/// conditions and box lengths (see the crate documentation).
#[derive(Debug, Clone, Copy)]
pub struct Manufactured {
    faces: [[Boundary; 2]; 3],
    k: [f64; 3],
    cosine: [bool; 3],
    quad: [f64; 3],
}

impl Manufactured {
    /// The solution for the boundary conditions `faces` on a box of
    /// `lengths`.
    pub fn new(faces: [[Boundary; 2]; 3], lengths: [f64; 3]) -> Self {
        let k = lengths.map(|l| 2.0 * PI / l);
        let cosine = faces.map(|f| f.contains(&Boundary::Neumann));
        let quad = faces.map(|f| if f[0] == Boundary::Periodic { 0.0 } else { 0.5 });
        Manufactured {
            faces,
            k,
            cosine,
            quad,
        }
    }

    fn factor(&self, d: usize, x: f64) -> (f64, f64) {
        let t = self.k[d] * x;
        if self.cosine[d] {
            (t.cos(), -self.k[d] * t.sin())
        } else {
            (t.sin(), self.k[d] * t.cos())
        }
    }

    /// `u(x)`.
    pub fn u(&self, x: [f64; 3]) -> f64 {
        let s = [0, 1, 2].map(|d| self.factor(d, x[d]).0);
        s[0] * s[1] * s[2] + (0..3).map(|d| self.quad[d] * x[d] * x[d]).sum::<f64>()
    }

    /// `grad u(x)`.
    pub fn grad(&self, x: [f64; 3]) -> [f64; 3] {
        let f = [0, 1, 2].map(|d| self.factor(d, x[d]));
        [0, 1, 2].map(|d| {
            let (a, b) = ((d + 1) % 3, (d + 2) % 3);
            f[d].1 * f[a].0 * f[b].0 + 2.0 * self.quad[d] * x[d]
        })
    }

    /// The right-hand side `f = -Δu` at `x`.
    pub fn rhs(&self, x: [f64; 3]) -> f64 {
        let s = [0, 1, 2].map(|d| self.factor(d, x[d]).0);
        let k2: f64 = self.k.iter().map(|k| k * k).sum();
        k2 * (s[0] * s[1] * s[2]) - 2.0 * (self.quad[0] + self.quad[1] + self.quad[2])
    }

    /// The boundary value on face `side` (0 low, 1 high) of `axis` at the
    /// face centre `x`: `u` on a Dirichlet face, the outward normal
    /// derivative on a Neumann face (0 on periodic faces, never used).
    pub fn boundary(&self, axis: usize, side: usize, x: [f64; 3]) -> f64 {
        match self.faces[axis][side] {
            Boundary::Dirichlet => self.u(x),
            Boundary::Neumann => {
                let g = self.grad(x)[axis];
                if side == 0 {
                    -g
                } else {
                    g
                }
            }
            Boundary::Periodic => 0.0,
        }
    }
}

/// A hash of a global field from each rank's owned box `owned` of the
/// global `shape` and its values (row-major, last axis fastest):
/// [`appkit::field_hash`], the hash heat3d and pfc report too. It depends
/// only on the value at each global index: the same for every rank count
/// and process grid (collective).
pub fn field_hash(
    comm: &dyn Communicator,
    shape: [usize; 3],
    owned: &IndexBox,
    vals: &[f64],
) -> Result<u64> {
    Ok(appkit::field_hash(comm, shape, owned, vals)?)
}

/// A hash of a sequence of numbers' bit patterns (order-dependent).
pub fn history_hash(xs: &[f64]) -> u64 {
    xs.iter()
        .fold(mix(xs.len() as u64), |h, x| mix(h ^ x.to_bits()))
}

/// One level of the per-level table: times and exchanges of the reported
/// solve, each the maximum over ranks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LevelRow {
    /// Level index (0 = finest; the last is the bottom).
    pub level: usize,
    /// Global shape.
    pub global: [usize; 3],
    /// Ranks holding the level.
    pub ranks: usize,
    /// Whether communication-avoiding smoothing is engaged on it.
    pub comm_avoiding: bool,
    /// Smoothing kernels (s).
    pub smooth_s: f64,
    /// Residual kernels (s).
    pub residual_s: f64,
    /// Restriction and prolongation (s).
    pub transfer_s: f64,
    /// Halo exchanges not hidden behind work (s).
    pub halo_s: f64,
    /// Agglomeration traffic to and from the coarser level, or the dense
    /// solve on the bottom level (s).
    pub coarse_s: f64,
    /// Halo exchanges.
    pub halo_events: u64,
    /// Of those, the exchanges inside the smoothing sweeps.
    pub smooth_events: u64,
    /// Visits of the level.
    pub visits: u64,
}

/// Phase totals of the reported solve: each phase summed over the levels
/// on each rank, then the maximum over ranks.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Phases {
    /// Smoothing (s).
    pub smooth_s: f64,
    /// Residuals (s).
    pub residual_s: f64,
    /// Restriction and prolongation (s).
    pub transfer_s: f64,
    /// Exposed halo exchanges (s).
    pub halo_s: f64,
    /// Agglomeration and the bottom solve (s).
    pub coarse_s: f64,
    /// The rest of the solve: vector updates, dot products and norms (the
    /// solve time minus the phases above, per rank) (s).
    pub other_s: f64,
}

/// What a run reports (on every rank; identical everywhere). The JSON field
/// names are documented in the app's README.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// The configuration as run.
    pub config: Config,
    /// Global cells per axis.
    pub shape: [usize; 3],
    /// Global cells (the degrees of freedom).
    pub cells: usize,
    /// Box lengths.
    pub lengths: [f64; 3],
    /// Number of ranks.
    pub ranks: usize,
    /// Backend name (`in-process` or `mpi`).
    pub backend: String,
    /// The GPU the fine levels ran on (`backend = "cuda"`), else absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Smoothing levels on the GPU (0 on the cpu backend): their per-level
    /// times below are 0, the device path times the solve as a whole.
    #[serde(default)]
    pub device_levels: usize,
    /// On a GPU: five V-cycles timed one by one after the solves, and the
    /// device's copy bandwidth (the floor's yardstick); else absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_timing: Option<DeviceTiming>,
    /// Fine-level process grid.
    pub grid: [usize; 3],
    /// Number of levels, finest and bottom included.
    pub num_levels: usize,
    /// Building the hierarchy and the right-hand side, max over ranks (s).
    pub setup_s: f64,
    /// Median over the repeats of the solve time (each the max over ranks) (s).
    pub solve_s: f64,
    /// Every repeat's solve time, max over ranks (s).
    pub solve_times: Vec<f64>,
    /// CG iterations (`pcg`) or V-cycles (`mg`).
    pub iterations: usize,
    /// V-cycles run (the preconditioner applications for `pcg`).
    pub vcycles: usize,
    /// Seconds inside the V-cycles of the median solve, max over ranks
    /// (`Hierarchy::vcycle_seconds`; for `pcg` with the preconditioner's
    /// zero start; for `mg` with the copy of the right-hand side).
    pub vcycle_s: f64,
    /// `vcycle_s / vcycles` in milliseconds.
    pub ms_per_vcycle: f64,
    /// Whether the tolerance was reached.
    pub converged: bool,
    /// Relative residual norms, the initial one first.
    pub residuals: Vec<f64>,
    /// Geometric mean of the residual reduction per iteration:
    /// `(residuals[last] / residuals[0])^(1 / iterations)` (0 without
    /// iterations).
    pub factor: f64,
    /// Asymptotic residual reduction per V-cycle by power iteration
    /// (`Hierarchy::vcycle_factor` over `factor_cycles` cycles); absent
    /// unless `factor_cycles` is positive.
    pub vcycle_factor: Option<f64>,
    /// Halo exchanges of one solve, max over ranks (all levels, the fine
    /// residuals included).
    pub halo_events: u64,
    /// Of those, the exchanges inside the smoothing sweeps.
    pub smooth_events: u64,
    /// `halo_events / vcycles`.
    pub halo_events_per_vcycle: f64,
    /// `smooth_events / vcycles`.
    pub smooth_events_per_vcycle: f64,
    /// Per-level table, finest first, the bottom last.
    pub levels: Vec<LevelRow>,
    /// Per-phase totals.
    pub phases: Phases,
    /// Largest `|u - u_exact|` over the cells.
    pub error_max: f64,
    /// Root mean square of `u - u_exact`.
    pub error_rms: f64,
    /// Degrees of freedom solved per second: `cells / solve_s`.
    pub dof_per_s: f64,
    /// Decomposition-independent hash of the solution ([`field_hash`]).
    pub hash: u64,
    /// The same as 16 hex digits (JSON readers that hold numbers as doubles
    /// lose the low bits of `hash`).
    pub hash_hex: String,
    /// Hash of the bit patterns of `residuals` ([`history_hash`]), 16 hex
    /// digits.
    pub residuals_hash_hex: String,
}

/// Per-level numbers packed for one max-reduction.
const PER_LEVEL: usize = 8;

fn pack(s: &LevelStats) -> [f64; PER_LEVEL] {
    [
        s.smooth_s,
        s.residual_s,
        s.transfer_s,
        s.halo_s,
        s.coarse_s,
        s.halo_events as f64,
        s.smooth_events as f64,
        s.visits as f64,
    ]
}

/// The hierarchy a run solves with: on the host, or with its fine levels
/// on a GPU.
enum Solve {
    Host(Box<Hierarchy>),
    #[cfg(feature = "cuda")]
    Device(Box<device::Run>),
}

impl Solve {
    fn hierarchy(&self) -> &Hierarchy {
        match self {
            Solve::Host(h) => h,
            #[cfg(feature = "cuda")]
            Solve::Device(d) => d.hierarchy(),
        }
    }

    fn hierarchy_mut(&mut self) -> &mut Hierarchy {
        match self {
            Solve::Host(h) => h,
            #[cfg(feature = "cuda")]
            Solve::Device(d) => d.hierarchy_mut(),
        }
    }

    /// One solve from zero into `u` (on the device: into the device's
    /// solution, complete on return; [`finish`](Self::finish) brings it to
    /// `u`).
    fn solve(
        &mut self,
        comm: &dyn Communicator,
        solver: Solver,
        u: &mut Field,
        f: &Field,
    ) -> Result<SolveReport> {
        match self {
            Solve::Host(h) => {
                // Every repeat starts from zero in the same buffer (as a
                // time stepper reuses its solution field).
                u.as_mut_slice().fill(0.0);
                Ok(match solver {
                    Solver::Pcg => h.solve_pcg(comm, u, f)?,
                    Solver::Mg => h.solve_mg(comm, u, f)?,
                })
            }
            #[cfg(feature = "cuda")]
            Solve::Device(d) => d.solve(comm),
        }
    }

    /// The last solution into `u`, and the host hierarchy back.
    fn finish(self, u: &mut Field) -> Result<Hierarchy> {
        match self {
            Solve::Host(h) => {
                // The host solves wrote into `u` itself.
                let _ = u;
                Ok(*h)
            }
            #[cfg(feature = "cuda")]
            Solve::Device(d) => d.finish(u),
        }
    }

    /// The GPU and the levels on it.
    fn device(&self) -> (Option<String>, usize) {
        match self {
            Solve::Host(_) => (None, 0),
            #[cfg(feature = "cuda")]
            Solve::Device(d) => d.device(),
        }
    }
}

/// Runs the benchmark on `comm` (collective). `progress` prints what it is
/// doing on rank 0 (stderr).
pub fn run(comm: &dyn Communicator, cfg: &Config, progress: bool) -> Result<Report> {
    cfg.validate(comm.size())?;
    let on_device = cfg.on_device()?;
    let say = |msg: String| {
        if progress && comm.rank() == 0 {
            eprintln!("poisson: {msg}");
        }
    };
    let shape = cfg.shape();
    let lengths = cfg.lengths();
    let faces = cfg.bc.faces();
    let problem = Poisson::with_faces(shape, lengths, faces)?;
    let exact = Manufactured::new(faces, lengths);
    let levels = cfg.levels();
    let grid = match cfg.grid {
        Some(g) => comm::ProcessGrid::new(g, problem.periodic())?,
        None => config::choose_grid(shape, comm.size(), problem.periodic(), levels)?,
    };
    say(format!(
        "{} cells, {levels} levels, {} rank(s) on grid {:?}: setting up",
        heat3d_triple(shape),
        comm.size(),
        grid.dims()
    ));
    comm.barrier()?;
    let t = Instant::now();
    let mut mg = Hierarchy::new(comm, grid, &problem, levels, cfg.options())?;
    // The right-hand side less its mean only for a singular problem.
    let most = match cfg.solver {
        Solver::Pcg => multigrid::PCG_FIELDS,
        Solver::Mg => multigrid::MG_FIELDS,
    };
    mg.reserve_fields(most - usize::from(!problem.is_singular()));
    let owned = mg.owned();
    let mut f = mg.new_field();
    f.fill_owned(0, &owned, |p| exact.rhs(problem.cell_centre(p)));
    mg.add_boundary_values(&mut f, |axis, side, x| exact.boundary(axis, side, x))?;
    let setup_s = comm.allreduce_scalar(t.elapsed().as_secs_f64(), ReduceOp::Max)?;

    let mut u = mg.new_field();
    let mut solve = if on_device {
        #[cfg(feature = "cuda")]
        {
            say("moving the fine levels onto the GPU".to_string());
            Solve::Device(Box::new(device::Run::new(comm, cfg, mg, &f)?))
        }
        #[cfg(not(feature = "cuda"))]
        unreachable!("Config::on_device refuses cuda in a build without it")
    } else {
        Solve::Host(Box::new(mg))
    };
    let mut times = Vec::with_capacity(cfg.repeat);
    let mut runs = Vec::with_capacity(cfg.repeat);
    for k in 0..cfg.repeat {
        solve.hierarchy_mut().reset_stats();
        comm.barrier()?;
        let t = Instant::now();
        let rep = solve.solve(comm, cfg.solver, &mut u, &f)?;
        let secs = t.elapsed().as_secs_f64();
        say(format!(
            "solve {}/{}: {} iterations, relative residual {:.3e}, {secs:.4} s",
            k + 1,
            cfg.repeat,
            rep.iterations,
            rep.residuals.last().copied().unwrap_or(0.0)
        ));
        times.push(secs);
        let h = solve.hierarchy();
        runs.push((rep, h.level_stats(), h.vcycle_seconds()));
    }
    let (device, device_levels) = solve.device();
    let device_timing = match &mut solve {
        Solve::Host(_) => None,
        #[cfg(feature = "cuda")]
        Solve::Device(d) => Some(d.timing(comm, 5, 10)?),
    };
    let mut mg = solve.finish(&mut u)?;
    let local_times = times.clone();
    comm.allreduce_f64(&mut times, ReduceOp::Max)?;
    let solve_s = median(&times);
    // The repeat at the median position (the lower middle for an even count).
    let mut order: Vec<usize> = (0..times.len()).collect();
    order.sort_by(|&a, &b| times[a].total_cmp(&times[b]));
    let pick = order[(times.len() - 1) / 2];
    let (rep, stats, vcycle_s) = &runs[pick];
    let vcycle_s = comm.allreduce_scalar(*vcycle_s, ReduceOp::Max)?;

    // Per level and per phase, max over ranks; the solve's exchange counts.
    let nl = stats.len();
    let mut flat = Vec::with_capacity(nl * PER_LEVEL + 8);
    let mut phase = [0.0; 5];
    for s in stats {
        let p = pack(s);
        for (acc, v) in phase.iter_mut().zip(&p[..5]) {
            *acc += v;
        }
        flat.extend_from_slice(&p);
    }
    // Time outside the multigrid kernels on this rank.
    let other = (local_times[pick] - phase.iter().sum::<f64>()).max(0.0);
    flat.extend_from_slice(&phase);
    flat.push(other);
    flat.push(rep.halo_events as f64);
    flat.push(rep.smooth_events as f64);
    comm.allreduce_f64(&mut flat, ReduceOp::Max)?;
    let levels_out: Vec<LevelRow> = stats
        .iter()
        .enumerate()
        .map(|(l, s)| {
            let v = &flat[l * PER_LEVEL..(l + 1) * PER_LEVEL];
            LevelRow {
                level: l,
                global: s.global,
                ranks: s.ranks,
                comm_avoiding: s.comm_avoiding,
                smooth_s: v[0],
                residual_s: v[1],
                transfer_s: v[2],
                halo_s: v[3],
                coarse_s: v[4],
                halo_events: v[5] as u64,
                smooth_events: v[6] as u64,
                visits: v[7] as u64,
            }
        })
        .collect();
    let tail = &flat[nl * PER_LEVEL..];
    let phases = Phases {
        smooth_s: tail[0],
        residual_s: tail[1],
        transfer_s: tail[2],
        halo_s: tail[3],
        coarse_s: tail[4],
        other_s: tail[5],
    };
    let (halo_events, smooth_events) = (tail[6] as u64, tail[7] as u64);

    // Error against the exact solution (minus its cell mean when singular).
    let vals = u.owned_values(0);
    let s = owned.shape();
    let mut ex = Vec::with_capacity(vals.len());
    for i in 0..s[0] {
        for j in 0..s[1] {
            for k in 0..s[2] {
                let p = [owned.lo[0] + i, owned.lo[1] + j, owned.lo[2] + k];
                ex.push(exact.u(problem.cell_centre(p)));
            }
        }
    }
    let cells: usize = shape.iter().product();
    let shift = if problem.is_singular() {
        allreduce_exact_sum(comm, &ex)? / cells as f64
    } else {
        0.0
    };
    let diff: Vec<f64> = vals.iter().zip(&ex).map(|(v, e)| v - (e - shift)).collect();
    let local_max = diff.iter().fold(0.0f64, |m, d| m.max(d.abs()));
    let error_max = comm.allreduce_scalar(local_max, ReduceOp::Max)?;
    let sq: Vec<f64> = diff.iter().map(|d| d * d).collect();
    let error_rms = (allreduce_exact_sum(comm, &sq)? / cells as f64).sqrt();
    let hash = field_hash(comm, shape, &owned, &vals)?;

    let vcycle_factor = if cfg.factor_cycles > 0 {
        say(format!(
            "measuring the V-cycle factor over {} cycles",
            cfg.factor_cycles
        ));
        Some(mg.vcycle_factor(comm, cfg.factor_cycles)?)
    } else {
        None
    };
    let it = rep.iterations;
    let factor = if it > 0 && rep.residuals[0] > 0.0 {
        (rep.residuals[it] / rep.residuals[0]).powf(1.0 / it as f64)
    } else {
        0.0
    };
    let per = |x: u64| {
        if rep.vcycles > 0 {
            x as f64 / rep.vcycles as f64
        } else {
            0.0
        }
    };
    Ok(Report {
        config: cfg.clone(),
        shape,
        cells,
        lengths,
        ranks: comm.size(),
        backend: comm.backend().to_string(),
        device,
        device_levels,
        device_timing,
        grid: grid.dims(),
        num_levels: mg.num_levels(),
        setup_s,
        solve_s,
        solve_times: times.clone(),
        iterations: it,
        vcycles: rep.vcycles,
        vcycle_s,
        ms_per_vcycle: if rep.vcycles > 0 {
            1e3 * vcycle_s / rep.vcycles as f64
        } else {
            0.0
        },
        converged: rep.converged,
        residuals: rep.residuals.clone(),
        factor,
        vcycle_factor,
        halo_events,
        smooth_events,
        halo_events_per_vcycle: per(halo_events),
        smooth_events_per_vcycle: per(smooth_events),
        levels: levels_out,
        phases,
        error_max,
        error_rms,
        dof_per_s: if solve_s > 0.0 {
            cells as f64 / solve_s
        } else {
            0.0
        },
        hash,
        hash_hex: appkit::hash::hex(hash),
        residuals_hash_hex: format!("{:016x}", history_hash(&rep.residuals)),
    })
}

fn heat3d_triple(v: [usize; 3]) -> String {
    format!("{}x{}x{}", v[0], v[1], v[2])
}

impl appkit::app::Report for Report {
    /// The human-readable summary printed at the end of a run.
    fn summary(&self) -> String {
        let c = &self.config;
        let onoff = |b: bool| if b { "on" } else { "off" };
        let mut s = String::new();
        let mut line = |t: String| {
            s.push_str(&t);
            s.push('\n');
        };
        line(format!(
            "poisson: {} cells ({:?} boundaries), {} levels, {} {} rank(s) on grid {}",
            heat3d_triple(self.shape),
            c.bc,
            self.num_levels,
            self.ranks,
            self.backend,
            heat3d_triple(self.grid)
        ));
        if let Some(d) = &self.device {
            line(format!(
                "on {d}: {} finest level(s) on the device, the rest on the host",
                self.device_levels
            ));
        }
        line(format!(
            "solver {:?}, V({},{}), omega {}, overlap {}, communication-avoiding {:?}, agglomerate below {}, tol {:e}",
            c.solver,
            c.pre,
            c.post,
            c.omega,
            onoff(c.overlap),
            c.ca,
            c.agglomerate_below,
            c.tol
        ));
        line(format!(
            "setup {:.4} s   solve {:.4} s (median of {})   {:.4e} DOF/s",
            self.setup_s,
            self.solve_s,
            self.solve_times.len(),
            self.dof_per_s
        ));
        line(format!(
            "iterations {}   V-cycles {} ({:.2} ms each)   converged {}   factor {:.4} per iteration",
            self.iterations,
            self.vcycles,
            self.ms_per_vcycle,
            if self.converged { "yes" } else { "NO" },
            self.factor
        ));
        if let Some(v) = self.vcycle_factor {
            line(format!(
                "asymptotic V-cycle factor {v:.4} (power iteration over {} cycles)",
                self.config.factor_cycles
            ));
        }
        let hist: Vec<String> = self.residuals.iter().map(|r| format!("{r:.2e}")).collect();
        line(format!("residuals: {}", hist.join(" ")));
        line(format!(
            "halo exchanges per V-cycle {:.2} (smoothing {:.2}); per solve {} ({})",
            self.halo_events_per_vcycle,
            self.smooth_events_per_vcycle,
            self.halo_events,
            self.smooth_events
        ));
        line(format!(
            "error vs exact: max {:.4e}  rms {:.4e}",
            self.error_max, self.error_rms
        ));
        line(format!(
            "{:>5} {:>12} {:>5} {:>3} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6}",
            "level",
            "global",
            "ranks",
            "CA",
            "smooth_s",
            "resid_s",
            "transf_s",
            "halo_s",
            "coarse_s",
            "exch",
            "smooth"
        ));
        for l in &self.levels {
            line(format!(
                "{:>5} {:>12} {:>5} {:>3} {:>9.5} {:>9.5} {:>9.5} {:>9.5} {:>9.5} {:>6} {:>6}",
                l.level,
                heat3d_triple(l.global),
                l.ranks,
                if l.comm_avoiding { "yes" } else { "no" },
                l.smooth_s,
                l.residual_s,
                l.transfer_s,
                l.halo_s,
                l.coarse_s,
                l.halo_events,
                l.smooth_events
            ));
        }
        let p = &self.phases;
        line(format!(
            "phases (s): smooth {:.4}  residual {:.4}  transfer {:.4}  halo {:.4}  coarse {:.4}  other {:.4}",
            p.smooth_s, p.residual_s, p.transfer_s, p.halo_s, p.coarse_s, p.other_s
        ));
        line(format!("solution hash: {}", self.hash_hex));
        s.pop();
        s
    }
}
