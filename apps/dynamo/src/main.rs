//! `dynamo`: the command-line front end. Defaults < configuration file <
//! command-line flags.

use anyhow::{bail, Result};
use clap::Parser;
use dynamo::config::{ByName, Config, Initial};
use std::path::PathBuf;

/// Boussinesq convection and dynamo in a rotating spherical shell
/// (Christensen et al. 2001 benchmark), on in-process ranks or under mpirun.
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
    /// Theta transposition: a2av, a2aw, a2ap, p2p, pipelined, auto.
    #[arg(long, value_name = "NAME")]
    theta_algorithm: Option<ByName<comm::Protocol>>,
    /// l transposition: a2av, a2aw, a2ap, p2p, pipelined, auto.
    #[arg(long, value_name = "NAME")]
    l_algorithm: Option<ByName<comm::Protocol>>,
    /// Diagnostics every this many steps.
    #[arg(long)]
    diag_every: Option<usize>,
    /// VTK snapshots every this many steps (0: at the end only).
    #[arg(long)]
    vtk_every: Option<usize>,
    /// No VTK snapshots.
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
    /// Write the report as JSON to this file (its folder must exist).
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
        ekman,
        rayleigh,
        prandtl,
        nr,
        ntheta,
        minc,
        scheme,
        dt,
        dtmax,
        adaptive,
        courant,
        steps,
        initial,
        pi_theta,
        queue,
        theta_algorithm,
        l_algorithm,
        diag_every
    );
    if cli.magnetic_prandtl.is_some() {
        c.magnetic_prandtl = cli.magnetic_prandtl;
    }
    if cli.nphi.is_some() {
        c.nphi = cli.nphi;
    }
    if cli.lmax.is_some() {
        c.lmax = cli.lmax;
    }
    if cli.end_time.is_some() {
        c.end_time = cli.end_time;
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
        // Written after the run: its folder is checked before it.
        appkit::output::check_file_target("--json", p)?;
    }
    let report = appkit::launch::launch("dynamo", cli.ranks, |c| {
        dynamo::run(c, &cfg, cli.restart.as_deref(), !cli.quiet)
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
