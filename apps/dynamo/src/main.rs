//! `dynamo`: the command-line front end. Defaults < configuration file <
//! command-line flags.

use appkit::app::{self, CheckpointArgs, OutputArgs};
use dynamo::config::{ByName, Config, Initial};
use serde::Serialize;

/// The whole command line: the common flags and dynamo's own.
type Cli = app::Command<Flags, OutputArgs, CheckpointArgs>;

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
    let cli: Cli = appkit::parse_command_line!();
    app::main(|| -> anyhow::Result<()> {
        let cfg: Config = cli.configure(dynamo::config::RENAMED)?;
        cfg.validate()?;
        let plan = cli.plan(cfg.output.dir.as_deref());
        Ok(app::execute(plan, |c, progress| {
            dynamo::run(c, &cfg, cli.restart(), progress)
        })?)
    })
}

appkit::shell_test!(Cli, Config, Flags);
