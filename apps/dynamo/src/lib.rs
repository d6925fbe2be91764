//! `dynamo`: Boussinesq convection and dynamo action in a rotating
//! spherical shell, pseudo-spectral (spherical harmonics through `sht`,
//! Chebyshev collocation in radius through `chebyshev`) with IMEX time
//! stepping through `imex`, on in-process ranks or under MPI, in the 1d
//! (radial) or 2d (radial x latitude) distribution of the distributed SHT.
//!
//! - [`model`]: the equations, the potentials and the implicit operators
//!   of one degree (the l-loop);
//! - [`solver`]: the state, the radial loop (transforms and nonlinear
//!   products) and the time step;
//! - [`diag`]: energies and the benchmark's mid-depth values, reduced
//!   exactly over ranks;
//! - [`init`]: initial states;
//! - [`checkpoint`]: restart files, any rank count, bit-identical continuation;
//! - [`config`]: the TOML configuration;
//! - [`run`]: a whole run with its output files and report.
#![warn(missing_docs)]

pub mod checkpoint;
pub mod config;
pub mod diag;
pub mod init;
pub mod model;
pub mod output;
pub mod solver;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use appkit::csv::{FloatFormat, Series};
use appkit::progress::Progress;
use comm::{CommExt, Communicator, ReduceOp};
use serde::{Deserialize, Serialize};

use config::{Config, Initial};
use diag::{Energies, Midpoint};
use model::Physics;
use solver::{Courant, Distribution, Phases, Resolution, Solver};

/// One row of the time series.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Step number.
    pub step: u64,
    /// Time.
    pub time: f64,
    /// Size of the step that reached this sample (the step size in use,
    /// or a last step shortened to land on `end_time`).
    pub dt: f64,
    /// Energies.
    pub energies: Energies,
    /// Mid-depth equatorial values (absent at rest).
    pub midpoint: Option<Midpoint>,
    /// Drift frequency of the pattern since the previous sample (`dphi/dt`
    /// of the mid-depth zero of `u_r`), absent for the first sample.
    pub drift: Option<f64>,
}

/// What a run reports (rank 0).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// The configuration the run used (every key, defaults included).
    pub config: Config,
    /// Ranks.
    pub ranks: usize,
    /// Radial and theta ranks.
    pub grid: [usize; 2],
    /// Theta and l transposition protocols in use.
    pub protocols: [String; 2],
    /// Queue length.
    pub queue: usize,
    /// Time scheme.
    pub scheme: String,
    /// Steps taken in this run.
    pub steps: u64,
    /// Final step number.
    pub final_step: u64,
    /// Final time.
    pub time: f64,
    /// The step size in use at the end (what a continuation starts with;
    /// a last step shortened to land on `end_time` is not it).
    pub dt: f64,
    /// Wall seconds of the time loop.
    pub seconds: f64,
    /// Seconds per step.
    pub seconds_per_step: f64,
    /// Seconds per phase (rank 0's).
    pub phases: Phases,
    /// The last sample.
    pub last: Sample,
    /// Hash of the final state (decomposition independent).
    pub state_hash: String,
    /// Files written.
    pub files: Vec<String>,
}

impl appkit::app::Report for Report {
    /// A human-readable summary.
    fn summary(&self) -> String {
        let e = &self.last.energies;
        let mut s = format!(
            "dynamo: {} steps on {} ranks ({} x {}, theta {}, l {}, queue {}), {} to t = {:.6}, dt = {:.3e}\n",
            self.steps,
            self.ranks,
            self.grid[0],
            self.grid[1],
            self.protocols[0],
            self.protocols[1],
            self.queue,
            self.scheme,
            self.time,
            self.dt
        );
        s += &format!(
            "  Ekin = {:.6} (pol {:.6}, tor {:.6}, axisymmetric pol {:.6}, tor {:.6})\n",
            e.ekin, e.ekin_pol, e.ekin_tor, e.ekin_pol_axi, e.ekin_tor_axi
        );
        if e.emag > 0.0 {
            s += &format!(
                "  Emag = {:.6} (pol {:.6}, tor {:.6}, axisymmetric pol {:.6}, tor {:.6})\n",
                e.emag, e.emag_pol, e.emag_tor, e.emag_pol_axi, e.emag_tor_axi
            );
        }
        if let Some(m) = &self.last.midpoint {
            s += &format!(
                "  mid-depth equator at phi = {:.6}: T = {:.6}, u_phi = {:.6}, B_theta = {:.6}\n",
                m.phi, m.temperature, m.u_phi, m.b_theta
            );
        }
        if let Some(d) = self.last.drift {
            s += &format!("  drift frequency = {d:.6}\n");
        }
        let p = &self.phases;
        s += &format!(
            "  {:.4} s/step; per evaluation: transforms {:.4} s, products {:.4} s, transpositions {:.4} s, radial {:.4} s; implicit {:.4} s/step\n",
            self.seconds_per_step,
            p.transforms / p.evaluations.max(1) as f64,
            p.products / p.evaluations.max(1) as f64,
            p.transpositions / p.evaluations.max(1) as f64,
            p.radial / p.evaluations.max(1) as f64,
            p.implicit / self.steps.max(1) as f64
        );
        s += &format!("  state hash {}", self.state_hash);
        s
    }

    fn files(&self) -> &[String] {
        &self.files
    }
}

/// The solver for `cfg` on `comm` (collective).
pub fn build(comm: &dyn Communicator, cfg: &Config) -> Result<Solver> {
    let size = comm.size();
    if !size.is_multiple_of(cfg.pi_theta) {
        bail!(
            "pi_theta = {} does not divide the {size} ranks: the process grid is pi_r x pi_theta",
            cfg.pi_theta
        );
    }
    let pi_r = size / cfg.pi_theta;
    if pi_r > cfg.nr {
        bail!(
            "{pi_r} radial ranks for nr = {} radial levels: pi_r = ranks / pi_theta must be at most nr",
            cfg.nr
        );
    }
    let phys = Physics {
        ekman: cfg.ekman,
        rayleigh: cfg.rayleigh,
        prandtl: cfg.prandtl,
        magnetic_prandtl: cfg.magnetic_prandtl,
    };
    let res = Resolution {
        nr: cfg.nr,
        ntheta: cfg.ntheta,
        nphi: cfg.nphi(),
        lmax: cfg.lmax(),
        minc: cfg.minc,
        radius_ratio: cfg.radius_ratio,
    };
    let dist = Distribution {
        pi_r,
        pi_theta: cfg.pi_theta,
        queue: cfg.queue,
        theta_protocol: *cfg.theta_protocol.value(),
        l_protocol: *cfg.l_protocol.value(),
    };
    let courant = Courant {
        courant: cfg.courant,
        alfven: cfg.alfven,
    };
    Solver::new(comm, phys, res, dist, cfg.scheme.value().clone(), courant)
}

/// Sets the initial state of `cfg` (collective).
pub fn initialise(solver: &mut Solver, cfg: &Config) -> Result<()> {
    let (ri, ro) = solver.resolution().radii();
    let field = init::benchmark_field(ri, ro);
    match cfg.initial {
        Initial::Benchmark => {
            let t = init::benchmark_temperature(ri, ro);
            solver.set_from_grid(&t, solver.magnetic().then_some(&field as init::Vector<'_>))?;
        }
        Initial::Conduction => {
            // The (0, 0) mode alone, exactly: no other mode gets rounding noise.
            let zero = |_: f64, _: f64, _: f64| 0.0;
            solver.set_from_grid(&zero, None)?;
            let y00 = (4.0 * std::f64::consts::PI).sqrt();
            let t: Vec<num_complex::Complex64> = solver
                .radial()
                .r()
                .iter()
                .map(|&r| num_complex::Complex64::new(y00 * (ro * ri / r - ri), 0.0))
                .collect();
            solver.set_mode(init::Potential::T, 0, 0, &t)?;
        }
    }
    Ok(())
}

/// The next step size: adaptive (`dt` shrinks to 0.8 of the CFL limit
/// when it exceeds the limit, and grows to `min(dtmax, 0.8 limit)` when
/// that is 25 % above it; it changes, and the matrices are refactored,
/// only then), or fixed (an error when above the limit).
pub fn next_dt(cfg: &Config, dt: f64, limit: f64, step: u64, time: f64) -> Result<f64> {
    if !cfg.adaptive {
        if dt > limit {
            bail!(
                "dt = {dt:e} is above the stability limit {limit:.4e} (CFL, courant = {}, alfven = {}) at step {step}, t = {time:.6}: lower dt or set adaptive = true",
                cfg.courant,
                cfg.alfven
            );
        }
        return Ok(dt);
    }
    let target = cfg.dtmax.min(0.8 * limit);
    if dt > limit || target > 1.25 * dt || (dt > cfg.dtmax) {
        Ok(target)
    } else {
        Ok(dt)
    }
}

/// The state hash (collective): every value of every held mode keyed by
/// its serial position, added with wrapping arithmetic (the same for any
/// rank count).
pub fn state_hash(comm: &dyn Communicator, s: &Solver) -> Result<u64> {
    let nr = s.resolution().nr;
    let nlm = s.dist().sht().nlm() as u64;
    let mut h = 0u64;
    let f = &s.fields;
    let blocks = [Some(&f.wpt), Some(&f.z), f.g.as_ref(), f.h.as_ref()];
    for &i in s.kept() {
        let (l, m) = s.tuples()[i];
        let serial = s.dist().sht().lm_index(l, m) as u64;
        for (b, block) in blocks.iter().enumerate() {
            let Some(block) = block else { continue };
            let (re, im) = block.mode(l, m).expect("held mode");
            for (part, vals) in [re, im].into_iter().enumerate() {
                for (k, v) in vals.iter().enumerate() {
                    let key =
                        (((b as u64 * nlm + serial) * 2 + part as u64) * 3 * nr as u64) + k as u64;
                    h = h.wrapping_add(appkit::hash::mix(appkit::hash::mix(key) ^ v.to_bits()));
                }
            }
        }
    }
    Ok(appkit::hash::combine(comm, h)?)
}

const COLUMNS: [&str; 18] = [
    "step",
    "time",
    "dt",
    "ekin",
    "ekin_pol",
    "ekin_tor",
    "ekin_pol_axi",
    "ekin_tor_axi",
    "emag",
    "emag_pol",
    "emag_tor",
    "emag_pol_axi",
    "emag_tor_axi",
    "phi_mid",
    "temperature_mid",
    "u_phi_mid",
    "b_theta_mid",
    "drift",
];

impl Sample {
    /// The sample of one `dynamo.csv` row (its fields in the file's column
    /// order); `None` when the row does not have that form.
    pub fn from_row(fields: &[&str]) -> Option<Sample> {
        if fields.len() != COLUMNS.len() {
            return None;
        }
        let step = fields[0].trim().parse().ok()?;
        let mut v = [0.0; COLUMNS.len() - 1];
        for (x, f) in v.iter_mut().zip(&fields[1..]) {
            *x = f.trim().parse().ok()?;
        }
        let energies = Energies {
            ekin: v[2],
            ekin_pol: v[3],
            ekin_tor: v[4],
            ekin_pol_axi: v[5],
            ekin_tor_axi: v[6],
            emag: v[7],
            emag_pol: v[8],
            emag_tor: v[9],
            emag_pol_axi: v[10],
            emag_tor_axi: v[11],
        };
        let midpoint = (!v[12].is_nan()).then_some(Midpoint {
            phi: v[12],
            temperature: v[13],
            u_phi: v[14],
            b_theta: v[15],
        });
        Some(Sample {
            step,
            time: v[0],
            dt: v[1],
            energies,
            midpoint,
            drift: (!v[16].is_nan()).then_some(v[16]),
        })
    }
}

/// How far below `end` a time that is the running sum of `steps` step
/// sizes may fall and still count as `end`: each addition rounds by at
/// most half an ulp of a value at most `|end|`, at most `eps |end| / 2`,
/// so the sum is within `steps eps |end| / 2` of the exact one; the
/// tolerance is twice that. It stays far below any step size of a run
/// (below `1e-3 dt` for up to a million steps of `dt = end / steps`).
pub fn end_tolerance(end: f64, steps: u64) -> f64 {
    steps.max(1) as f64 * f64::EPSILON * end.abs()
}

/// Whether `time`, reached after `steps` steps, is at `end_time` (within
/// [`end_tolerance`]); never without an `end_time`.
pub fn reached_end(time: f64, end_time: Option<f64>, steps: u64) -> bool {
    end_time.is_some_and(|end| end - time <= end_tolerance(end, steps))
}

/// The steps a run from `time` after `done` steps will take: `cfg.steps`,
/// or with `end_time` the fewer it takes at the step size `dt` to reach
/// it (an estimate when the step adapts).
pub fn planned_steps(cfg: &Config, time: f64, dt: f64, done: u64) -> u64 {
    let most = cfg.steps as u64;
    match cfg.end_time {
        Some(end) if reached_end(time, Some(end), done) => 0,
        Some(end) => {
            let left = (end - time - end_tolerance(end, done + 1)) / dt;
            if left.is_finite() {
                most.min(left.max(0.0).ceil() as u64)
            } else {
                most
            }
        }
        None => most,
    }
}

/// Opens `dynamo.csv` in `dir` on rank 0 and tells every rank whether that
/// worked (collective). A fresh run creates the file. A restart from step
/// `from` continues it: the rows up to that step are kept (a file of other
/// columns is refused and left as it is), and the samples they hold are
/// returned for the plot.
fn open_series(
    comm: &dyn Communicator,
    path: &Path,
    from: Option<u64>,
) -> Result<(Option<Series>, Vec<Sample>)> {
    let mut earlier = Vec::new();
    let series = appkit::csv::open_series(
        comm,
        path,
        &COLUMNS,
        FloatFormat::ExpDigits(12),
        from,
        |fields| earlier.extend(Sample::from_row(fields)),
    )?;
    Ok((series, earlier))
}

fn log(series: &mut Option<Series>, s: &Sample) -> Result<()> {
    if let Some(out) = series {
        let e = &s.energies;
        let m = s.midpoint.unwrap_or(Midpoint {
            phi: f64::NAN,
            temperature: f64::NAN,
            u_phi: f64::NAN,
            b_theta: f64::NAN,
        });
        out.row(&[
            s.step.into(),
            s.time.into(),
            s.dt.into(),
            e.ekin.into(),
            e.ekin_pol.into(),
            e.ekin_tor.into(),
            e.ekin_pol_axi.into(),
            e.ekin_tor_axi.into(),
            e.emag.into(),
            e.emag_pol.into(),
            e.emag_tor.into(),
            e.emag_pol_axi.into(),
            e.emag_tor_axi.into(),
            m.phi.into(),
            m.temperature.into(),
            m.u_phi.into(),
            m.b_theta.into(),
            s.drift.unwrap_or(f64::NAN).into(),
        ])?;
    }
    Ok(())
}

/// Diagnostics of the current state (collective); updates the drift tracker.
pub fn sample(
    comm: &dyn Communicator,
    s: &Solver,
    dt: f64,
    drift: &mut Option<(f64, f64)>,
) -> Result<Sample> {
    let energies = s.energies(comm)?;
    let midpoint = s.midpoint(comm, drift.map(|d| d.0))?;
    let time = s.time();
    let rate = match (*drift, midpoint) {
        (Some((p0, t0)), Some(m)) if time > t0 => {
            Some(diag::angle_between(p0, m.phi) / (time - t0))
        }
        _ => None,
    };
    *drift = midpoint.map(|m| (m.phi, time));
    Ok(Sample {
        step: s.steps(),
        time,
        dt,
        energies,
        midpoint,
        drift: rate,
    })
}

/// Writes the checkpoint and the snapshot that the output schedule has at
/// the current step and lists them in `files` on rank 0 (collective):
/// `last` is whether this is the run's last step, `snapshot` whether a due
/// snapshot is written (not when the same state's is already).
fn write_due(
    comm: &dyn Communicator,
    s: &mut Solver,
    cfg: &Config,
    extra: &checkpoint::Extra,
    (last, snapshot): (bool, bool),
    files: &mut Vec<String>,
) -> Result<()> {
    let Some(d) = &cfg.output.dir else {
        return Ok(());
    };
    if cfg.output.checkpoint_due(s.steps(), last) {
        let p = d.join(format!("dynamo_{:08}.chk", s.steps()));
        checkpoint::write(comm, s, cfg, extra, &p)?;
        if comm.rank() == 0 {
            files.push(p.display().to_string());
        }
    }
    if snapshot && cfg.output.vtk_due(s.steps(), last) {
        files.extend(output::snapshot(comm, s, d)?);
    }
    Ok(())
}

/// A whole run on `comm` (collective): build, initial state or restart,
/// the time loop with diagnostics, checkpoints and snapshots, and the
/// report (on rank 0).
pub fn run(
    comm: &dyn Communicator,
    cfg: &Config,
    restart: Option<&Path>,
    progress: bool,
) -> Result<Report> {
    let rank = comm.rank();
    let mut s = build(comm, cfg)?;
    let dir = cfg.output.dir.clone();
    if let Some(d) = &dir {
        appkit::output::create_dir(comm, d)?;
    }
    let mut files: Vec<String> = Vec::new();
    let mut drift = None;
    let mut dt = cfg.dt;
    match restart {
        Some(p) => {
            let extra = checkpoint::read(&mut s, cfg, p)?;
            // An adaptive step continues from the checkpoint's (next_dt
            // caps it at dtmax); a fixed one is the configured dt, the
            // variable-step weights of the schemes taking any change.
            if cfg.adaptive {
                dt = extra.dt;
            }
            drift = extra.drift;
        }
        None => initialise(&mut s, cfg)?,
    }
    s.set_temperature_boundaries()?;
    let (mut series, mut history) = match (&dir, cfg.output.diagnostics) {
        (Some(d), true) => {
            let p = d.join("dynamo.csv");
            if rank == 0 {
                files.push(p.display().to_string());
            }
            open_series(comm, &p, restart.map(|_| s.steps()))?
        }
        _ => (None, Vec::new()),
    };
    let first = sample(comm, &s, dt, &mut drift)?;
    // A continued series already holds the row of the restart step (only
    // rank 0 knows; every rank learns whether its write failed).
    let wrote = if history.last().is_none_or(|h| h.step != first.step) {
        history.push(first);
        log(&mut series, &first)
    } else {
        Ok(())
    };
    appkit::output::rank0_result(comm, wrote)?;
    // The initial state of a fresh run is step 0 of the snapshot schedule.
    if let (Some(d), None) = (&dir, restart) {
        if cfg.output.vtk_every > 0 && cfg.output.vtk_due(s.steps(), false) {
            files.extend(output::snapshot(comm, &mut s, d)?);
        }
    }
    let bar = if rank == 0 {
        Progress::steps(planned_steps(cfg, s.time(), dt, s.steps()), progress)
    } else {
        Progress::hidden()
    };
    let start = Instant::now();
    let mut taken = 0u64;
    let end = cfg.end_time;
    let mut last = first;
    while (taken as usize) < cfg.steps && !reached_end(s.time(), end, s.steps()) {
        let (step, time) = (s.steps(), s.time());
        let remaining = end.map_or(f64::INFINITY, |e| e - time);
        let mut in_use = dt;
        let size = s.step(comm, |limit| {
            in_use = next_dt(cfg, dt, limit, step + 1, time)?;
            Ok(in_use.min(remaining))
        })?;
        dt = in_use;
        taken += 1;
        let done = taken as usize == cfg.steps || reached_end(s.time(), end, s.steps());
        if taken.is_multiple_of(cfg.diag_every as u64) || done {
            last = sample(comm, &s, size, &mut drift)?;
            appkit::output::rank0_result(comm, log(&mut series, &last))?;
            history.push(last);
            bar.set_message(format!(
                "t = {:.5}  dt = {:.2e}  Ekin = {:.4}{}",
                last.time,
                dt,
                last.energies.ekin,
                if s.magnetic() {
                    format!("  Emag = {:.4}", last.energies.emag)
                } else {
                    String::new()
                }
            ));
        }
        bar.inc(1);
        let extra = checkpoint::Extra { dt, drift };
        write_due(comm, &mut s, cfg, &extra, (done, true), &mut files)?;
    }
    bar.finish();
    // A fresh run of no steps ends at its initial state (its snapshot is
    // already written when vtk_every > 0).
    if taken == 0 && restart.is_none() {
        let extra = checkpoint::Extra { dt, drift };
        let snapshot = cfg.output.vtk_every == 0;
        write_due(comm, &mut s, cfg, &extra, (true, snapshot), &mut files)?;
    }
    let seconds = comm.allreduce_scalar(start.elapsed().as_secs_f64(), ReduceOp::Max)?;
    let plotted = match (&dir, rank == 0 && series.is_some()) {
        (Some(d), true) => {
            let p: PathBuf = d.join("energies.png");
            files.push(p.display().to_string());
            output::plot_energies(&p, &history).context("plotting the energies")
        }
        _ => Ok(()),
    };
    // Every rank stops with rank 0's reason (the hash below is collective).
    appkit::output::rank0_result(comm, plotted)?;
    let hash = state_hash(comm, &s)?;
    Ok(Report {
        config: cfg.clone(),
        ranks: comm.size(),
        grid: [
            s.dist().decomposition().pi_r(),
            s.dist().decomposition().pi_theta(),
        ],
        protocols: [
            s.dist().theta_protocol().to_string(),
            s.dist().l_protocol().to_string(),
        ],
        queue: s.dist().queue(),
        scheme: cfg.scheme.name().to_string(),
        steps: taken,
        final_step: s.steps(),
        time: s.time(),
        dt,
        seconds,
        seconds_per_step: seconds / taken.max(1) as f64,
        phases: s.phases(),
        last,
        state_hash: appkit::hash::hex(hash),
        files,
    })
}
