//! `pfc`: the command-line front end. Defaults < configuration file <
//! command-line flags.

use appkit::app::{self, CheckpointArgs, OutputArgs};
use appkit::config::parse_triple;
use pfc::config::{ByName, Config, Initial};
use serde::Serialize;

/// The whole command line: the common flags and the PFC model's.
type Cli = app::Command<Flags, OutputArgs, CheckpointArgs>;

/// The PFC model's flags: each sets the configuration key of its name.
#[derive(Debug, clap::Args, Serialize)]
struct Flags {
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
}

fn main() -> std::process::ExitCode {
    let cli: Cli = appkit::parse_command_line!();
    app::main(|| -> anyhow::Result<()> {
        let cfg: Config = cli.configure(&[])?;
        cfg.validate()?;
        // On a GPU one rank drives the device unless more are asked for.
        let ranks = match cfg.backend.value() {
            gpu::Backend::Cpu => None,
            _ => Some(1),
        };
        let plan = cli.plan(cfg.output.dir.as_deref()).default_ranks(ranks);
        Ok(app::execute(plan, |c, progress| {
            pfc::run(c, &cfg, cli.restart(), progress)
        })?)
    })
}

appkit::shell_test!(Cli, Config, Flags);
