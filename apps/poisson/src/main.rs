//! `poisson`: the command-line front end. Defaults < configuration file <
//! command-line flags.

use appkit::app;
use appkit::config::parse_triple;
use poisson::config::{Bc, ByName, Ca, Config, Solver};
use serde::Serialize;

/// The whole command line: the common flags and the benchmark's.
type Cli = app::Command<Flags>;

/// The benchmark's problem and solver flags: each sets the configuration key of its name.
#[derive(Debug, clap::Args, Serialize)]
struct Flags {
    /// Cells per axis: N or NXxNYxNZ (`--shape` is the same flag).
    #[arg(long, visible_alias = "shape", value_parser = parse_triple)]
    n: Option<[usize; 3]>,
    /// Boundary conditions.
    #[arg(long, value_enum)]
    bc: Option<Bc>,
    /// Solver: MG-preconditioned CG or V-cycles.
    #[arg(long, value_enum)]
    solver: Option<Solver>,
    /// Relative residual to reach.
    #[arg(long)]
    tol: Option<f64>,
    /// Iteration limit.
    #[arg(long)]
    max_iter: Option<usize>,
    /// Levels, finest and bottom included (default: deepest with a bottom
    /// of at least 8 cells).
    #[arg(long)]
    levels: Option<usize>,
    /// Pre-smoothing red-black sweeps.
    #[arg(long)]
    pre: Option<usize>,
    /// Post-smoothing black-red sweeps.
    #[arg(long)]
    post: Option<usize>,
    /// Relaxation factor of the sweeps.
    #[arg(long)]
    omega: Option<f64>,
    /// Blocking halo exchanges in the sweeps (no overlap with smoothing):
    /// sets `overlap = false`.
    #[arg(long = "no-overlap", action = clap::ArgAction::SetFalse)]
    #[serde(skip_serializing_if = "is_true")]
    overlap: bool,
    /// Communication-avoiding smoothing: everywhere, nowhere, or on the
    /// fine or the coarse levels only.
    #[arg(long, value_enum)]
    ca: Option<Ca>,
    /// Gather coarse levels with fewer cells per rank than this onto fewer
    /// ranks.
    #[arg(long)]
    agglomerate_below: Option<usize>,
    /// Largest bottom level (cells) for the dense solve.
    #[arg(long)]
    max_bottom_cells: Option<usize>,
    /// Solve this many times from zero; the median time is reported.
    #[arg(long)]
    repeat: Option<usize>,
    /// Also measure the asymptotic residual factor per V-cycle by power
    /// iteration over this many cycles (0: off).
    #[arg(long)]
    factor_cycles: Option<usize>,
    /// Process grid PXxPYxPZ (default: even blocks, smallest surface).
    #[arg(long, value_parser = parse_triple)]
    grid: Option<[usize; 3]>,
    /// Where the solve runs: cpu, or cuda (an NVIDIA GPU; built with
    /// `--features cuda`).
    #[arg(long)]
    backend: Option<ByName<gpu::Backend>>,
    /// GPU ordinal for every rank (default: rank mod device count).
    #[arg(long)]
    device: Option<usize>,
}

/// A switch left at its default is no key.
fn is_true(b: &bool) -> bool {
    *b
}

fn main() -> std::process::ExitCode {
    let cli: Cli = appkit::parse_command_line!();
    app::main(|| -> anyhow::Result<()> {
        let cfg: Config = cli.configure(&[])?;
        let plan = cli.plan(None);
        Ok(app::execute(plan, |c, progress| {
            poisson::run(c, &cfg, progress)
        })?)
    })
}

appkit::shell_test!(Cli, Config, Flags);
