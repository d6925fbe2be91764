//! `poisson`: the command-line front end. Defaults < configuration file <
//! command-line flags.

use anyhow::Result;
use appkit::config::parse_triple;
use clap::Parser;
use poisson::config::{Bc, Ca, Config, PerAxis, Solver};
use std::path::PathBuf;

/// HPGMG-style Poisson benchmark: a manufactured solution solved by
/// multigrid-preconditioned CG or V-cycles, on in-process ranks or under
/// MPI; reports times per level and phase, halo exchanges per V-cycle, the
/// error, DOF/s and a decomposition-independent hash of the solution.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// TOML configuration file (every key optional; see README).
    #[arg(short, long)]
    config: Option<PathBuf>,
    /// In-process ranks (default: the number of cores). Ignored under mpirun.
    #[arg(long)]
    ranks: Option<usize>,
    /// Cells per axis: N (or NXxNYxNZ).
    #[arg(long, value_parser = parse_triple)]
    n: Option<[usize; 3]>,
    /// Cells per axis: AxBxC.
    #[arg(long, value_parser = parse_triple, conflicts_with = "n")]
    shape: Option<[usize; 3]>,
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
    /// Blocking halo exchanges in the sweeps (no overlap with smoothing).
    #[arg(long)]
    no_overlap: bool,
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
    /// Write the report as JSON to this file (its folder must exist; checked
    /// before the run).
    #[arg(long)]
    json: Option<PathBuf>,
    /// No progress messages and no table.
    #[arg(short, long)]
    quiet: bool,
}

fn config(cli: &Cli) -> Result<Config> {
    let mut c = match &cli.config {
        Some(p) => Config::from_file(p)?,
        None => Config::default(),
    };
    if let Some(n) = cli.n.or(cli.shape) {
        c.n = PerAxis::Each(n);
    }
    appkit::set_from!(
        c,
        cli;
        bc,
        solver,
        tol,
        max_iter,
        pre,
        post,
        omega,
        ca,
        agglomerate_below,
        max_bottom_cells,
        repeat,
        factor_cycles
    );
    if cli.levels.is_some() {
        c.levels = cli.levels;
    }
    if cli.grid.is_some() {
        c.grid = cli.grid;
    }
    if cli.no_overlap {
        c.overlap = false;
    }
    Ok(c)
}

fn finish(cli: &Cli, report: &poisson::Report) -> Result<()> {
    if !cli.quiet {
        println!("{}", report.summary());
    }
    if let Some(p) = &cli.json {
        appkit::output::write_json(p, report)?;
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    appkit::launch::exit_code(real_main(&Cli::parse()))
}

/// Runs on the MPI world under `mpirun` (feature `mpi`), else on
/// `--ranks` in-process ranks; rank 0 prints and writes the report.
fn real_main(cli: &Cli) -> Result<()> {
    let cfg = config(cli)?;
    if let Some(p) = &cli.json {
        appkit::output::check_file_target("--json", p)?;
    }
    let report =
        appkit::launch::launch("poisson", cli.ranks, |c| poisson::run(c, &cfg, !cli.quiet))?;
    match report {
        Some(r) => finish(cli, &r),
        None => Ok(()),
    }
}
