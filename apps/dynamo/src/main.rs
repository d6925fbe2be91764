//! `dynamo`: the command-line front end. Defaults < configuration file <
//! command-line flags.

use appkit::app::{self, CheckpointArgs, OutputArgs, Plan, RunArgs};
use clap::Parser;
use dynamo::config::{ByName, Config, Initial};
use serde::Serialize;

/// Boussinesq convection and dynamo in a rotating spherical shell
/// (Christensen et al. 2001 benchmark), on in-process ranks or under mpirun.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    run: RunArgs,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    checkpoint: CheckpointArgs,
    #[command(flatten)]
    flags: Flags,
}

/// dynamo's own flags: each sets the configuration key of its name.
#[derive(Debug, clap::Args, Serialize)]
struct Flags {
    /// Ekman number.
    #[arg(long)]
    ekman: Option<f64>,
    /// Rayleigh number (MagIC's definition).
    #[arg(long)]
    rayleigh: Option<f64>,
    /// Prandtl number.
    #[arg(long)]
    prandtl: Option<f64>,
    /// Magnetic Prandtl number (turns the magnetic field on).
    #[arg(long)]
    magnetic_prandtl: Option<f64>,
    /// Radial points.
    #[arg(long)]
    nr: Option<usize>,
    /// Gauss latitudes.
    #[arg(long)]
    ntheta: Option<usize>,
    /// Longitudes.
    #[arg(long)]
    nphi: Option<usize>,
    /// Truncation degree.
    #[arg(long)]
    lmax: Option<usize>,
    /// Azimuthal symmetry.
    #[arg(long)]
    minc: Option<usize>,
    /// IMEX scheme: cnab2, sbdf1, sbdf2, sbdf3, ars222, ars343, bpr353.
    #[arg(long, value_name = "NAME")]
    scheme: Option<ByName<imex::Scheme>>,
    /// Initial step size.
    #[arg(long)]
    dt: Option<f64>,
    /// Largest step size.
    #[arg(long)]
    dtmax: Option<f64>,
    /// Adaptive step (true/false).
    #[arg(long)]
    adaptive: Option<bool>,
    /// Courant factor.
    #[arg(long)]
    courant: Option<f64>,
    /// Number of steps.
    #[arg(long)]
    steps: Option<usize>,
    /// Stop at this time.
    #[arg(long)]
    end_time: Option<f64>,
    /// Initial state.
    #[arg(long, value_enum)]
    initial: Option<Initial>,
    /// Ranks along the latitudes (1: the 1d distribution).
    #[arg(long)]
    pi_theta: Option<usize>,
    /// Scalar components per transposition call.
    #[arg(long)]
    queue: Option<usize>,
    /// Theta transposition protocol: a2av, a2aw, a2ap, p2p, pipelined,
    /// auto (`--theta-algorithm`, the old name, is deprecated).
    #[arg(long, value_name = "NAME", alias = "theta-algorithm")]
    theta_protocol: Option<ByName<comm::Protocol>>,
    /// l transposition protocol: a2av, a2aw, a2ap, p2p, pipelined, auto
    /// (`--l-algorithm`, the old name, is deprecated).
    #[arg(long, value_name = "NAME", alias = "l-algorithm")]
    l_protocol: Option<ByName<comm::Protocol>>,
    /// Diagnostics every this many steps.
    #[arg(long)]
    diag_every: Option<usize>,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    app::main(|| -> anyhow::Result<()> {
        let cfg: Config = app::configure_renamed(
            &cli.run,
            &[&cli.output, &cli.checkpoint, &cli.flags],
            dynamo::config::RENAMED,
        )?;
        cfg.validate()?;
        let restart = cli.checkpoint.restart.as_deref();
        let plan = Plan::new(&cli.run)
            .output(cfg.output.dir.as_deref())
            .restart(restart);
        Ok(app::execute(plan, |c, progress| {
            dynamo::run(c, &cfg, restart, progress)
        })?)
    })
}

appkit::shell_test!(Cli, Config, Flags);
