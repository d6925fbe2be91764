//! `flow`: incompressible Stokes and Navier-Stokes flow through porous
//! sphere beds in a periodic box driven by a body force, on a MAC grid with
//! cut-cell or ghost-cell immersed boundaries (geometry from `ibm`),
//! implicit diffusion and projection through `multigrid`, fields on `halo`.
//!
//! - [`bodies`] and [`geometry`]: the bodies (once per process) and the
//!   geometry arrays the solver reads, over each rank's block and one
//!   ghost layer (memory in proportion to the block);
//! - [`solver`]: the step;
//! - [`config`]: the TOML configuration;
//! - [`run`]: a whole run: march (to a steady state for Stokes), the
//!   permeability and the drag coefficient, output files, the report.
//!
//! **Driving-force convention.** The body force `f` acts on the fluid only:
//! at each fluid velocity point it is weighted by the fluid fraction of the
//! point's control volume (cut cells; 1 with ghost cells), so the force on
//! the fluid is `f V_f`, `V_f` the fluid volume the weights add up to
//! (`f (1 - c) V_box` in the limit); in a steady state the bodies take it
//! up. The flow is the one a mean pressure gradient `G = f` drives through
//! the periodic array (in the fluid the two momentum equations are the
//! same), and the drag of Zick and Homsy (1982) is the force on the
//! spheres in that problem, which adds the mean gradient's buoyancy-like
//! `G V_s`: `F = G V_box = f V_box`, shared by the `N` spheres of radius
//! `a`, `F / N = 6 pi mu a K U` with `U` the superficial velocity (the box
//! average of `u`, solid counted as 0). So the report's
//! `K = f V_box / (6 pi mu a N U)` is theirs (with `F = f (1 - c) V_box`
//! instead it would be `(1 - c)` times theirs), and the permeability is
//! Darcy's `k = mu U / G = mu U / f`, `k / a^2 = 2 / (9 c K)`.
#![warn(missing_docs)]

pub mod bodies;
pub mod config;
#[cfg(feature = "cuda")]
mod device;
pub mod geometry;
pub mod solver;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use appkit::checkpoint::{self as ck, Expected, Header};
use appkit::progress::Progress;
use appkit::vtk;
use comm::{CommExt, Communicator};
use multigrid::{CommAvoiding, MgOptions};
use serde::{Deserialize, Serialize};

use bodies::Bed;
use comm::exact::{allreduce_exact_sums, ExactSum};
use config::{Bodies, Config, Initial};
use geometry::Geometry;
use solver::{Flow, Params, Phases};

/// What a run reports (rank 0).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// The configuration as run.
    pub config: Config,
    /// Ranks.
    pub ranks: usize,
    /// Steps taken in this run.
    pub steps: u64,
    /// Final step number.
    pub final_step: u64,
    /// Final time.
    pub time: f64,
    /// The step size.
    pub dt: f64,
    /// Whether the steady tolerance was reached.
    pub steady: bool,
    /// The last relative change per step.
    pub change: f64,
    /// Solid fraction of the bodies.
    pub solid_fraction: f64,
    /// Spheres in the box.
    pub spheres: usize,
    /// Sphere radius (of the array or packing).
    pub radius: f64,
    /// Mean CG iterations per step of the momentum solves (all three) and of the pressure solve.
    pub iterations: [f64; 2],
    /// CG iterations of the last step: momentum (per component) and pressure.
    pub last_iterations: [usize; 4],
    /// Seconds per step (the slowest rank's, the mean over the steps).
    pub seconds_per_step: f64,
    /// Million cells per second per rank.
    pub mcells_per_rank: f64,
    /// Seconds per step and phase (rank 0's).
    pub phases: Phases,
    /// Superficial velocity (box average) per axis.
    pub superficial_velocity: [f64; 3],
    /// Kinetic energy per unit box volume.
    pub energy: f64,
    /// The body force on the fluid along the force direction, `f V_f`.
    pub fluid_force: f64,
    /// Drag coefficient `K = f V_box / (6 pi mu a N U)` (with bodies and a
    /// force; the module documentation has the convention).
    pub drag_coefficient: Option<f64>,
    /// Permeability over the radius squared, `k / a^2`.
    pub permeability: Option<f64>,
    /// `max |div(A u)| / max |u|` at the end.
    pub divergence: f64,
    /// Hash of the velocity and pressure (decomposition independent).
    pub hash: String,
    /// The GPU the step ran on (`backend = "cuda"`), else absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The device halo transport (`direct`, `staged`), else absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// Rank 0's device memory for the step (fields, geometry, multigrid
    /// levels: [`Flow::device_bytes`]), else absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_bytes: Option<u64>,
    /// Files written.
    pub files: Vec<String>,
}

impl appkit::app::Report for Report {
    /// A human-readable summary.
    fn summary(&self) -> String {
        let c = &self.config;
        let mut s = format!(
            "flow: {}^3 cells on {} ranks, {:?} {:?} (c = {:.5}, {} spheres, a = {:.5}), {}, dt = {:.3e}\n",
            c.n,
            self.ranks,
            c.method,
            c.bodies,
            self.solid_fraction,
            self.spheres,
            self.radius,
            if c.navier_stokes { "Navier-Stokes" } else { "Stokes" },
            self.dt
        );
        if let Some(d) = &self.device {
            let b = self.device_bytes.unwrap_or(0) as f64;
            let cells = (c.n as f64).powi(3) / self.ranks as f64;
            s += &format!(
                "  on {d} (halo exchange {}), {:.1} MB of device memory a rank ({:.1} doubles a cell)\n",
                self.transport.as_deref().unwrap_or("?"),
                b / 1e6,
                b / 8.0 / cells
            );
        }
        s += &format!(
            "  {} steps to t = {:.5}{}, last change {:.3e}\n",
            self.steps,
            self.time,
            if self.steady { " (steady)" } else { "" },
            self.change
        );
        s += &format!(
            "  CG iterations per step: momentum {:.1} (three solves), pressure {:.1}\n",
            self.iterations[0], self.iterations[1]
        );
        let p = &self.phases;
        s += &format!(
            "  {:.4} s/step ({:.2} Mcell/s per rank): momentum {:.4} s, projection {:.4} s, of which halo {:.4} s\n",
            self.seconds_per_step, self.mcells_per_rank, p.momentum, p.projection, p.halo
        );
        s += &format!(
            "  superficial velocity U = {:.8e}, energy {:.6e}, max |div| / max |u| = {:.2e}\n",
            self.superficial_velocity[0], self.energy, self.divergence
        );
        if let (Some(k), Some(perm)) = (self.drag_coefficient, self.permeability) {
            s += &format!("  drag coefficient K = {k:.6}, permeability k/a^2 = {perm:.6e}\n");
        }
        s += &format!("  hash {}", self.hash);
        s
    }

    fn files(&self) -> &[String] {
        &self.files
    }
}

/// The MG options of `cfg`.
pub fn mg_options(cfg: &Config) -> MgOptions {
    MgOptions {
        overlap: cfg.overlap,
        comm_avoiding: if cfg.comm_avoiding {
            CommAvoiding::ALL
        } else {
            CommAvoiding::OFF
        },
        max_iter: 500,
        ..MgOptions::default()
    }
}

/// The solver parameters of `cfg`.
pub fn params(cfg: &Config) -> Params {
    Params {
        length: cfg.length,
        nu: cfg.nu,
        dt: cfg.dt(),
        force: cfg.force,
        navier_stokes: cfg.navier_stokes,
        mg: mg_options(cfg),
        momentum_tol: cfg.momentum_tol,
        pressure_tol: cfg.pressure_tol,
        rotational: cfg.rotational,
    }
}

/// The hash of the velocity and pressure (collective).
pub fn hash(comm: &dyn Communicator, f: &Flow) -> Result<u64> {
    // The four fields stacked along axis 0: one global field of [4 n, n, n].
    let n = f.geometry().n;
    let shape = [4 * n[0], n[1], n[2]];
    let mut h = 0u64;
    for (i, field) in f.u.iter().chain(std::iter::once(&f.p)).enumerate() {
        let v = field.owned_values(0);
        let mut b = f.owned();
        b.lo[0] += i * n[0];
        b.hi[0] += i * n[0];
        h = h.wrapping_add(appkit::hash::local_field_hash(shape, &b, &v)?);
    }
    Ok(appkit::hash::combine(comm, h)?)
}

const CK_FIELDS: usize = 7;

/// The checkpoint format recorded under the `format` key (3: the
/// geometry hash of [`geometry_hash`]; format 2 hashed the whole grid's
/// arrays in sequence).
const CK_FORMAT: &str = "3";

/// A hash of every geometry array at the owned cells (and the cell size
/// and grid): equal for equal bodies on equal grids, on any rank count
/// (collective). The thirteen arrays (fluid fraction, apertures, wall
/// sums, weights, fluid flags as 0 or 1) are hashed as one field of
/// `[13 n, n, n]`, each at its own offset along the first axis.
pub fn geometry_hash(comm: &dyn Communicator, g: &Geometry) -> Result<u64> {
    let n = g.n;
    let shape = [13 * n[0], n[1], n[2]];
    // Each array's owned values, one array at a time (no copy of a whole
    // array is made).
    let flags = g.fluid.iter().map(|f| {
        g.owned(f)
            .into_iter()
            .map(|b| f64::from(u8::from(b)))
            .collect()
    });
    let owned = std::iter::once(&g.theta)
        .chain(&g.aperture)
        .chain(&g.wall)
        .chain(&g.weight)
        .map(|a| g.owned(a))
        .chain(flags);
    let mut h = 0u64;
    for (i, values) in owned.enumerate() {
        let mut b = g.block();
        b.lo[0] += i * n[0];
        b.hi[0] += i * n[0];
        h = h.wrapping_add(appkit::hash::local_field_hash(shape, &b, &values)?);
    }
    let h = appkit::hash::combine(comm, h)?;
    Ok(appkit::hash::mix(h ^ appkit::hash::mix(g.h.to_bits())))
}

/// The keys a restart must match, with their values as JSON text: the
/// grid (`n`, `length`), the physics (`nu`, `navier_stokes`, `force`), the
/// `method`, the `bodies` with the keys that define them
/// (`solid_fraction` for arrays and random beds, `radius` and `seed` for
/// random beds), and `geometry`, a hash of the geometry arrays (which
/// also covers the spheres of a packing file). The step size, the
/// tolerances, the solver and output options may change on a restart.
fn restart_keys(cfg: &Config, geometry: u64) -> Result<Vec<(&'static str, String)>> {
    use serde_json::to_string as js;
    let mut keys = vec![
        ("n", js(&cfg.n)?),
        ("length", js(&cfg.length)?),
        ("nu", js(&cfg.nu)?),
        ("navier_stokes", js(&cfg.navier_stokes)?),
        ("force", js(&cfg.force)?),
        ("bodies", js(&cfg.bodies)?),
    ];
    // The method shapes the bodies' boundary; without bodies it is not
    // read (and refused away from its default), so not compared either.
    if cfg.bodies != Bodies::None {
        keys.push(("method", js(&cfg.method)?));
    }
    if !matches!(cfg.bodies, Bodies::None | Bodies::File) {
        keys.push(("solid_fraction", js(&cfg.solid_fraction)?));
    }
    if cfg.bodies == Bodies::Random {
        keys.push(("radius", js(&cfg.radius)?));
        keys.push(("seed", js(&cfg.seed)?));
    }
    keys.push(("geometry", appkit::hash::hex(geometry)));
    Ok(keys)
}

/// Writes a checkpoint (collective): the velocity, the pressure and the
/// last advective term (the Adams-Bashforth history of a Navier-Stokes run,
/// zero for Stokes), seven fields gathered on rank 0 in global order, an
/// `appkit` checkpoint of shape `[7 n, n, n]` with the step and time, and
/// the geometry and physics keys a restart must match (`format = 3`;
/// `geometry` is the [`geometry_hash`]). A restart on any rank count
/// continues bit for bit.
pub fn write_checkpoint(
    comm: &dyn Communicator,
    f: &Flow,
    cfg: &Config,
    geometry: u64,
    path: &Path,
) -> Result<()> {
    let n = f.geometry().n;
    let mut all = Vec::new();
    for field in f.checkpoint_fields() {
        let g = ck::gather_f64(comm, n, &f.owned(), &field.owned_values(0))?;
        if let Some(g) = g {
            all.extend(g);
        }
    }
    let written = if comm.rank() == 0 {
        let mut header = Header::new("flow", &[CK_FIELDS * n[0], n[1], n[2]], f.steps(), f.time());
        header.meta.insert("format".into(), CK_FORMAT.into());
        for (k, v) in restart_keys(cfg, geometry)? {
            header.meta.insert(k.into(), v);
        }
        ck::write_f64(path, &header, &all).with_context(|| format!("writing {}", path.display()))
    } else {
        Ok(())
    };
    let mut ok = [u64::from(written.is_ok())];
    comm.broadcast(&mut ok, 0)?;
    written?;
    if ok[0] == 0 {
        bail!("rank 0 failed to write {}", path.display());
    }
    Ok(())
}

/// Reads a checkpoint into `f` (every rank reads the file). Refuses a
/// checkpoint whose geometry or physics differ from `cfg` (the error names
/// the first key that differs and both values) and one written before the
/// checkpoints recorded those keys.
pub fn read_checkpoint(f: &mut Flow, cfg: &Config, geometry: u64, path: &Path) -> Result<()> {
    let n = f.geometry().n;
    let (header, values) = ck::read_f64(
        path,
        &Expected {
            app: "flow",
            shape: &[CK_FIELDS * n[0], n[1], n[2]],
        },
    )
    .with_context(|| format!("restart from {} (for n = {})", path.display(), n[0]))?;
    match header.meta.get("format") {
        Some(v) if v == CK_FORMAT => {}
        Some(v) => bail!(
            "checkpoint {} has format {v}, this flow reads format {CK_FORMAT}",
            path.display()
        ),
        None => bail!(
            "checkpoint {} was written by an earlier flow that did not record the geometry and physics a restart must match (format {CK_FORMAT} does); start the run afresh",
            path.display()
        ),
    }
    for (key, want) in restart_keys(cfg, geometry)? {
        let got = header.meta.get(key).map_or("absent", |s| s.as_str());
        if got != want {
            let what = if key == "geometry" {
                " (the hash of the geometry arrays: the bodies differ, for bodies = \"file\" the packing file's spheres)"
            } else {
                ""
            };
            bail!(
                "checkpoint {} was written with {key} = {got}, this run has {key} = {want}{what}: a restart must keep the geometry and the physics",
                path.display()
            );
        }
    }
    let m = n[0] * n[1] * n[2];
    let owned = f.owned();
    for (i, field) in f.checkpoint_fields_mut().into_iter().enumerate() {
        let block = ck::block_of(n, &values[i * m..(i + 1) * m], &owned);
        let mut t = 0;
        field.fill_owned(0, &owned, |_| {
            t += 1;
            block[t - 1]
        });
    }
    f.set_clock(header.step, header.time);
    Ok(())
}

/// Writes the VTK snapshot (collective): pressure, fluid fraction and the
/// velocity at the cell centres (the mean of the two faces per component).
pub fn write_vtk(comm: &dyn Communicator, f: &mut Flow, dir: &Path) -> Result<Option<PathBuf>> {
    f.divergence(comm)?; // refreshes the velocity ghosts
    let g = f.geometry().clone();
    let n = g.n;
    let b = f.owned();
    let lay = f.layout();
    let s = lay.strides();
    let mut vel = Vec::with_capacity(3 * b.len());
    let mut theta = Vec::with_capacity(b.len());
    let p = f.p.owned_values(0);
    for i in b.lo[0]..b.hi[0] {
        for j in b.lo[1]..b.hi[1] {
            for k in b.lo[2]..b.hi[2] {
                let x = (i - b.lo[0] + lay.ghost[0]) * s[0]
                    + (j - b.lo[1] + lay.ghost[1]) * s[1]
                    + (k - b.lo[2] + lay.ghost[2]);
                for d in 0..3 {
                    let u = f.u[d].as_slice();
                    vel.push(0.5 * (u[x] + u[x + s[d]]));
                }
                theta.push(g.theta[g.idx([i, j, k])]);
            }
        }
    }
    let image = vtk::Image::new(n, [g.h; 3]);
    Ok(image.write_parallel(
        comm,
        dir,
        &format!("flow_{:06}", f.steps()),
        &b,
        &[
            vtk::Field::cell_vector("velocity", &vel),
            vtk::Field::cell_scalar("pressure", &p),
            vtk::Field::cell_scalar("fluid_fraction", &theta),
        ],
    )?)
}

/// Opens the time series `path` on rank 0 (`None` elsewhere) and tells
/// every rank whether that worked (collective). A fresh run creates it; a
/// restart from step `from` continues it: the rows up to that step are
/// kept (those of a run that went on past it are dropped; a row that does
/// not parse is kept as it is), and a file of other columns is refused and
/// left as it is.
fn open_series(
    comm: &dyn Communicator,
    path: &Path,
    from: Option<u64>,
) -> Result<Option<appkit::csv::Series>> {
    let columns = [
        "step", "time", "change", "its_u", "its_v", "its_w", "its_p", "seconds",
    ];
    let format = appkit::csv::FloatFormat::ExpDigits(10);
    Ok(appkit::csv::open_series(
        comm,
        path,
        &columns,
        format,
        from,
        |_| {},
    )?)
}

/// Writes the checkpoint and the snapshot that the output schedule has at
/// the current step (`last`: the run's last), and lists them in `files`
/// (collective).
fn write_due(
    comm: &dyn Communicator,
    f: &mut Flow,
    cfg: &Config,
    geometry: u64,
    last: bool,
    files: &mut Vec<String>,
) -> Result<()> {
    let Some(d) = &cfg.output.dir else {
        return Ok(());
    };
    if cfg.output.checkpoint_due(f.steps(), last) || cfg.output.vtk_due(f.steps(), last) {
        f.download()?;
    }
    if cfg.output.checkpoint_due(f.steps(), last) {
        let p = d.join(format!("flow_{:06}.chk", f.steps()));
        write_checkpoint(comm, f, cfg, geometry, &p)?;
        files.push(p.display().to_string());
    }
    if cfg.output.vtk_due(f.steps(), last) {
        if let Some(p) = write_vtk(comm, f, d)? {
            files.push(p.display().to_string());
        }
    }
    Ok(())
}

/// The geometry of this rank's block of `cfg`'s grid (collective: every
/// rank returns the lowest failing rank's error), with the solid fraction
/// of the whole box.
pub fn block_geometry(comm: &dyn Communicator, cfg: &Config, bed: &Bed) -> Result<Geometry> {
    let block = Flow::block(comm, [cfg.n; 3]);
    let built = block.and_then(|b| bodies::build(cfg, bed.body.as_deref(), b));
    let (built, local) = match built {
        Ok(g) => (Some(g), Ok(())),
        Err(e) => (None, Err(format!("{e:#}"))),
    };
    match comm::agree(comm, local) {
        Ok(()) => {}
        Err(comm::Agreed::Mine(e)) => bail!("{e}"),
        Err(comm::Agreed::Other { message, .. }) => bail!("{message}"),
        Err(comm::Agreed::Comm(e)) => return Err(e.into()),
    }
    let mut g = built.context("the geometry of this rank's block")?;
    g.solid_fraction = bodies::solid_fraction(comm, bed.body.as_deref(), &g)?;
    Ok(g)
}

/// A whole run on `comm` (collective): the geometry of this rank's block
/// from the process's bodies `bed`, the march, the outputs, the report.
pub fn run(
    comm: &dyn Communicator,
    cfg: &Config,
    bed: &Bed,
    restart: Option<&Path>,
    progress: bool,
) -> Result<Report> {
    let rank = comm.rank();
    cfg.check_ranks(comm.size())?;
    // The GPU first: a missing driver or device is reported before the
    // geometry is built.
    #[cfg(feature = "cuda")]
    let device = if cfg.on_device()? {
        let placement = gpu::place::place(comm, cfg.device)?;
        let opened = placement.open();
        let local = opened.as_ref().map(|_| ()).map_err(|e| e.to_string());
        match comm::agree(comm, local) {
            Ok(()) => Some((Arc::new(opened?), placement)),
            Err(comm::Agreed::Mine(e)) => bail!("{e}"),
            Err(comm::Agreed::Other { message, .. }) => bail!("{message}"),
            Err(comm::Agreed::Comm(e)) => return Err(e.into()),
        }
    } else {
        None
    };
    #[cfg(not(feature = "cuda"))]
    cfg.on_device()?;
    let geom = Arc::new(block_geometry(comm, cfg, bed)?);
    let geometry = geometry_hash(comm, &geom)?;
    let mut f = Flow::new(comm, geom.clone(), params(cfg))?;
    if let Some(p) = restart {
        read_checkpoint(&mut f, cfg, geometry, p)?;
    } else if cfg.initial == Initial::TaylorGreen {
        let k = 2.0 * std::f64::consts::PI / cfg.length;
        let a = cfg.amplitude;
        f.set_velocity(0, |x| a * (k * x[0]).sin() * (k * x[1]).cos());
        f.set_velocity(1, |x| -a * (k * x[0]).cos() * (k * x[1]).sin());
    }
    #[cfg(feature = "cuda")]
    if let Some((dev, placement)) = device {
        f.to_device(comm, dev, placement, None)?;
    }
    let dir = cfg.output.dir.clone();
    if let Some(d) = &dir {
        appkit::output::create_dir(comm, d)?;
    }
    let mut files = Vec::new();
    let mut series = match &dir {
        Some(d) if cfg.output.series() => {
            open_series(comm, &d.join("flow.csv"), restart.map(|_| f.steps()))?
        }
        _ => None,
    };
    if let Some(s) = &series {
        files.push(s.path().display().to_string());
    }
    // The initial state of a fresh run is step 0 of the snapshot schedule.
    if let (Some(d), None, true) = (&dir, restart, cfg.steps > 0) {
        if cfg.output.vtk_every > 0 && cfg.output.vtk_due(f.steps(), false) {
            if let Some(p) = write_vtk(comm, &mut f, d)? {
                files.push(p.display().to_string());
            }
        }
    }
    let bar = if rank == 0 {
        Progress::steps(cfg.steps as u64, progress)
    } else {
        Progress::hidden()
    };
    let (mut taken, mut steady, mut change) = (0u64, false, f64::INFINITY);
    let (mut it_m, mut it_p) = (0usize, 0usize);
    let mut last = [0usize; 4];
    let mut seconds = 0.0;
    while (taken as usize) < cfg.steps {
        let st = f.step(comm)?;
        taken += 1;
        seconds += st.seconds;
        change = st.change;
        it_m += st.momentum_iterations.iter().sum::<usize>();
        it_p += st.pressure_iterations;
        last = [
            st.momentum_iterations[0],
            st.momentum_iterations[1],
            st.momentum_iterations[2],
            st.pressure_iterations,
        ];
        let wrote = match &mut series {
            Some(out) => out.row(&[
                f.steps().into(),
                f.time().into(),
                change.into(),
                st.momentum_iterations[0].into(),
                st.momentum_iterations[1].into(),
                st.momentum_iterations[2].into(),
                st.pressure_iterations.into(),
                st.seconds.into(),
            ]),
            None => Ok(()),
        };
        appkit::output::rank0_result(comm, wrote)?;
        if !change.is_finite() {
            bail!("the velocity is not finite after step {}", f.steps());
        }
        if taken % cfg.diag_every as u64 == 0 {
            bar.set_message(format!(
                "t = {:.4e}  change {:.2e}  its {}/{}/{} + {}",
                f.time(),
                change,
                last[0],
                last[1],
                last[2],
                last[3]
            ));
        }
        bar.inc(1);
        steady = !cfg.navier_stokes && cfg.steady_tol > 0.0 && change < cfg.steady_tol;
        let done = steady || taken as usize == cfg.steps;
        write_due(comm, &mut f, cfg, geometry, done, &mut files)?;
        if steady {
            break;
        }
    }
    bar.finish();
    // A fresh run of no steps ends at its initial state.
    if taken == 0 && restart.is_none() {
        write_due(comm, &mut f, cfg, geometry, true, &mut files)?;
    }
    let sums = f.sums(comm)?;
    let vol = cfg.length.powi(3);
    let u_sup = [sums[0] / vol, sums[1] / vol, sums[2] / vol];
    let energy = 0.5 * sums[3] / vol;
    let divergence = f.divergence(comm)?;
    // The applied force along the force direction: f times the weights.
    let fd = (0..3)
        .max_by(|&a, &b| cfg.force[a].abs().total_cmp(&cfg.force[b].abs()))
        .unwrap_or(0);
    let mut weights = ExactSum::new();
    for i in geom.region().owned() {
        weights.add(geom.weight[fd][i]);
    }
    let weights = allreduce_exact_sums(comm, &[weights])?[0];
    let fluid_force = cfg.force[fd] * weights * geom.h.powi(3);
    let (spheres, radius) = (bed.spheres, bed.radius);
    let (drag, perm) = if spheres > 0 && cfg.force[fd] != 0.0 && u_sup[fd] != 0.0 {
        let k = cfg.force[fd] * vol
            / (6.0 * std::f64::consts::PI * cfg.nu * radius * spheres as f64 * u_sup[fd]);
        let perm = cfg.nu * u_sup[fd] / cfg.force[fd] / (radius * radius);
        (Some(k), Some(perm))
    } else {
        (None, None)
    };
    let h = hash(comm, &f)?;
    let ranks = comm.size();
    let sps = seconds / taken.max(1) as f64;
    let cells = (cfg.n as f64).powi(3);
    let ph = f.phases();
    let per = |x: f64| x / taken.max(1) as f64;
    Ok(Report {
        config: cfg.clone(),
        ranks,
        steps: taken,
        final_step: f.steps(),
        time: f.time(),
        dt: cfg.dt(),
        steady,
        change,
        solid_fraction: geom.solid_fraction,
        spheres,
        radius,
        iterations: [
            it_m as f64 / taken.max(1) as f64,
            it_p as f64 / taken.max(1) as f64,
        ],
        last_iterations: last,
        seconds_per_step: sps,
        mcells_per_rank: cells / ranks as f64 / sps / 1e6,
        phases: Phases {
            momentum: per(ph.momentum),
            projection: per(ph.projection),
            halo: per(ph.halo),
        },
        superficial_velocity: u_sup,
        energy,
        fluid_force,
        drag_coefficient: drag,
        permeability: perm,
        divergence,
        hash: appkit::hash::hex(h),
        device: f.device().map(|d| d.0),
        transport: f.device().map(|d| d.1),
        device_bytes: f.device().map(|_| f.device_bytes()),
        files,
    })
}
