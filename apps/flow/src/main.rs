//! `flow`: the command-line front end. Defaults < configuration file <
//! command-line flags.

use anyhow::{bail, Result};
use clap::Parser;
use flow::config::{Bodies, Config, Initial, Method};
use std::path::PathBuf;
use std::sync::Arc;

/// Incompressible flow through porous sphere beds (cut-cell or ghost-cell
/// immersed boundaries, multigrid solves), on in-process ranks or under mpirun.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// TOML configuration file (every key optional; see examples/*.toml).
    #[arg(short, long)]
    config: Option<PathBuf>,
    /// In-process ranks (default: the number of cores). Ignored under
    /// mpirun, whose process count is the rank count.
    #[arg(long)]
    ranks: Option<usize>,
    /// Cells per axis.
    #[arg(long)]
    n: Option<usize>,
    /// Immersed-boundary method.
    #[arg(long, value_enum)]
    method: Option<Method>,
    /// Bodies.
    #[arg(long, value_enum)]
    bodies: Option<Bodies>,
    /// Solid fraction of the array or random packing.
    #[arg(long)]
    solid_fraction: Option<f64>,
    /// Radius of the random packing's spheres (box lengths).
    #[arg(long)]
    radius: Option<f64>,
    /// Seed of the random packing.
    #[arg(long)]
    seed: Option<u64>,
    /// Packing file (one sphere `x y z r` per line).
    #[arg(long)]
    packing: Option<PathBuf>,
    /// Kinematic viscosity.
    #[arg(long)]
    nu: Option<f64>,
    /// Navier-Stokes instead of Stokes.
    #[arg(long)]
    navier_stokes: Option<bool>,
    /// Step size.
    #[arg(long)]
    dt: Option<f64>,
    /// Step size in units of h^2 / nu (when --dt is absent).
    #[arg(long)]
    dt_factor: Option<f64>,
    /// Steps at most.
    #[arg(long)]
    steps: Option<usize>,
    /// Steady-state tolerance on the relative change per step.
    #[arg(long)]
    steady_tol: Option<f64>,
    /// Initial velocity.
    #[arg(long, value_enum)]
    initial: Option<Initial>,
    /// Rotational pressure update (true/false).
    #[arg(long)]
    rotational: Option<bool>,
    /// Overlap halo exchanges with smoothing (true/false).
    #[arg(long)]
    overlap: Option<bool>,
    /// Communication-avoiding smoothing (true/false).
    #[arg(long)]
    comm_avoiding: Option<bool>,
    /// Relative residual of the momentum solves.
    #[arg(long)]
    momentum_tol: Option<f64>,
    /// Relative residual of the pressure solves.
    #[arg(long)]
    pressure_tol: Option<f64>,
    /// Progress message every this many steps.
    #[arg(long)]
    diag_every: Option<usize>,
    /// VTK snapshots every this many steps (0: at the end only).
    #[arg(long)]
    vtk_every: Option<usize>,
    /// No VTK output.
    #[arg(long)]
    no_vtk: bool,
    /// Checkpoint every this many steps (0: at the end only).
    #[arg(long)]
    checkpoint_every: Option<usize>,
    /// Continue from this checkpoint (any rank count).
    #[arg(long)]
    restart: Option<PathBuf>,
    /// Output folder.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// No progress bar.
    #[arg(short, long)]
    quiet: bool,
}

fn config(cli: &Cli) -> Result<Config> {
    let mut c = match &cli.config {
        Some(p) => Config::from_file(p)?,
        None => Config::default(),
    };
    appkit::set_from!(
        c,
        cli;
        n,
        method,
        bodies,
        solid_fraction,
        radius,
        seed,
        nu,
        navier_stokes,
        dt_factor,
        steps,
        steady_tol,
        initial,
        rotational,
        overlap,
        comm_avoiding,
        momentum_tol,
        pressure_tol,
        diag_every
    );
    if cli.dt.is_some() {
        c.dt = cli.dt;
    }
    if cli.packing.is_some() {
        c.packing = cli.packing.clone();
    }
    if let Some(v) = cli.vtk_every {
        c.output.vtk_every = v;
    }
    if cli.no_vtk {
        c.output.vtk = false;
    }
    if let Some(v) = cli.checkpoint_every {
        c.output.checkpoint_every = v;
    }
    if cli.output.is_some() {
        c.output.dir = cli.output.clone();
    }
    c.validate()?;
    Ok(c)
}

fn main() -> std::process::ExitCode {
    appkit::launch::exit_code(real_main(&Cli::parse()))
}

fn real_main(cli: &Cli) -> Result<()> {
    let cfg = config(cli)?;
    if let Some(p) = &cli.restart {
        if !p.is_file() {
            bail!("checkpoint file {} does not exist", p.display());
        }
    }
    if let Some(p) = &cli.json {
        appkit::output::check_file_target("--json", p)?;
    }
    // The rank count the launch will use, where it is known here (the run
    // checks it again on its communicator).
    let ranks = if comm::is_launched_by_mpirun() {
        comm::launcher_world_size().filter(|_| cfg!(feature = "mpi"))
    } else {
        Some(cli.ranks.unwrap_or_else(comm::local::default_ranks))
    };
    if let Some(r) = ranks.filter(|&r| r > 0) {
        cfg.check_ranks(r)?;
    }
    // The geometry is a pure function of the configuration: built once per
    // process and shared by its ranks.
    let (geom, spheres, radius) = flow::bodies::build(&cfg)?;
    let geom = Arc::new(geom);
    let report = appkit::launch::launch("flow", cli.ranks, |c| {
        flow::run(
            c,
            &cfg,
            geom.clone(),
            (spheres, radius),
            cli.restart.as_deref(),
            !cli.quiet,
        )
    })?;
    if let Some(r) = report {
        println!("{}", r.summary());
        if !cli.quiet {
            for f in &r.files {
                println!("wrote {f}");
            }
        }
        if let Some(p) = &cli.json {
            appkit::output::write_json(p, &r)?;
        }
    }
    Ok(())
}
