//! `pfc`: the command-line front end. Defaults < configuration file <
//! command-line flags.

use anyhow::{bail, Result};
use appkit::config::parse_triple;
use clap::Parser;
use pfc::config::{ByName, Config, Initial, PerAxis};
use std::path::PathBuf;

/// Phase-field crystal model (conserved Swift-Hohenberg) on a periodic box,
/// semi-implicit spectral steps through distributed FFTs on in-process ranks
/// (or cuFFT on GPUs with `--backend cuda`).
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// TOML configuration file (every key optional; see examples/pfc.toml).
    #[arg(short, long)]
    config: Option<PathBuf>,
    /// In-process ranks (default: the number of cores; one with
    /// `--backend cuda`, which runs on any rank count). Ignored under
    /// mpirun, whose process count is the rank count.
    #[arg(long)]
    ranks: Option<usize>,
    /// BCC lattice periods per axis: N or NXxNYxNZ.
    #[arg(long, value_parser = parse_triple)]
    periods: Option<[usize; 3]>,
    /// Grid points per lattice period.
    #[arg(long)]
    points_per_period: Option<usize>,
    /// Undercooling parameter r.
    #[arg(long, allow_hyphen_values = true)]
    r: Option<f64>,
    /// Mean density psi0.
    #[arg(long, allow_hyphen_values = true)]
    mean_density: Option<f64>,
    /// Step size.
    #[arg(long, allow_hyphen_values = true)]
    dt: Option<f64>,
    /// Number of steps.
    #[arg(long)]
    steps: Option<usize>,
    /// Initial condition.
    #[arg(long, value_enum)]
    initial: Option<Initial>,
    /// Noise generator seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Seed radius in lattice periods.
    #[arg(long)]
    seed_radius: Option<f64>,
    /// Diagnostics every this many steps.
    #[arg(long)]
    diag_every: Option<usize>,
    /// Reshape protocol of the distributed FFTs, as dfft names them:
    /// alltoallv (default), alltoall, p2p, p2p-pipelined, auto, ... (an
    /// unknown name lists the valid ones).
    #[arg(long, value_name = "NAME")]
    protocol: Option<ByName<dfft::Protocol>>,
    /// Where to compute: cpu, or cuda (NVIDIA GPUs; a build with the
    /// `cuda` feature); any rank count.
    #[arg(long, value_name = "NAME")]
    backend: Option<ByName<gpu::Backend>>,
    /// How the device FFTs' reshapes travel between ranks: device to device on one machine, else through host buffers (auto), through host buffers (staged), or through NCCL (nccl: one GPU per rank, any number of machines).
    #[arg(long, value_enum)]
    gpu_exchange: Option<pfc::config::GpuExchange>,
    /// GPU ordinal of the cuda backend, for every rank (default: each
    /// rank takes its index among the ranks of its machine modulo the
    /// device count).
    #[arg(long)]
    device: Option<usize>,
    /// VTK snapshot every this many steps (0: none).
    #[arg(long)]
    vtk_every: Option<usize>,
    /// Checkpoint every this many steps (0: none).
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
    if let Some(p) = cli.periods {
        c.periods = PerAxis::Each(p);
    }
    appkit::set_from!(
        c,
        cli;
        points_per_period,
        r,
        mean_density,
        dt,
        steps,
        initial,
        seed,
        seed_radius,
        diag_every,
        protocol,
        backend,
        gpu_exchange
    );
    if cli.device.is_some() {
        c.device = cli.device;
    }
    if let Some(v) = cli.vtk_every {
        c.output.vtk_every = v;
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
    let ranks = match cfg.backend.value() {
        gpu::Backend::Cpu => cli.ranks,
        _ => cli.ranks.or(Some(1)),
    };
    let report = appkit::launch::launch("pfc", ranks, |c| {
        pfc::run(c, &cfg, cli.restart.as_deref(), !cli.quiet)
    })?;
    match report {
        Some(r) => finish(cli, &r),
        None => Ok(()),
    }
}

/// Prints the summary and writes the JSON report (rank 0).
fn finish(cli: &Cli, report: &pfc::Report) -> Result<()> {
    println!("{}", report.summary());
    for f in &report.files {
        if !cli.quiet {
            println!("wrote {f}");
        }
    }
    if let Some(p) = &cli.json {
        appkit::output::write_json(p, report)?;
    }
    Ok(())
}
