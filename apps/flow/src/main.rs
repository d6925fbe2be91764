//! `flow`: the command-line front end. Defaults < configuration file <
//! command-line flags.

use appkit::app::{self, CheckpointArgs, OutputArgs};
use flow::config::{Bodies, Config, Initial, Method};
use serde::Serialize;
use std::path::PathBuf;

/// The whole command line: the common flags and the flow solver's.
type Cli = app::Command<Flags, OutputArgs, CheckpointArgs>;

/// The flow solver's flags: each sets the configuration key of its name.
#[derive(Debug, clap::Args, Serialize)]
struct Flags {
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
    /// Cut cells: faces open by at most this fraction are closed.
    #[arg(long)]
    min_aperture: Option<f64>,
    /// Progress message every this many steps.
    #[arg(long)]
    diag_every: Option<usize>,
    /// Where the step runs: cpu, or cuda (an NVIDIA GPU; built with
    /// `--features cuda`).
    #[arg(long)]
    backend: Option<appkit::config::ByName<gpu::Backend>>,
    /// GPU ordinal for every rank (default: rank mod device count).
    #[arg(long)]
    device: Option<usize>,
}

fn main() -> std::process::ExitCode {
    let cli: Cli = appkit::parse_command_line!();
    app::main(|| -> anyhow::Result<()> {
        let cfg: Config = cli.configure(&[])?;
        cfg.validate()?;
        let plan = cli.plan(cfg.output.dir.as_deref());
        // The rank count, where it is known before the launch (the run
        // checks it again on its communicator).
        if let Some(r) = plan.ranks().filter(|&r| r > 0) {
            cfg.check_ranks(r)?;
        }
        // The bodies (a sphere list or a lattice) are built once per
        // process and shared by its ranks; each rank builds the geometry
        // of its own block from them.
        let bed = flow::bodies::Bed::new(&cfg)?;
        Ok(app::execute(plan, |c, progress| {
            flow::run(c, &cfg, &bed, cli.restart(), progress)
        })?)
    })
}

appkit::shell_test!(Cli, Config, Flags);
