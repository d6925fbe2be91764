//! `heat3d`: the command-line front end. Defaults < configuration file <
//! command-line flags.

use anyhow::Result;
use appkit::config::parse_triple;
use clap::Parser;
use heat3d::config::{
    ByName, Config, CpuStencil, GpuExchange, GpuPeriodic, GpuStencil, Initial, Integrator, Mode,
    Operator, PerAxis, SpectralStep,
};
use std::path::PathBuf;

/// Heat equation du/dt = D lap(u) on a periodic box with central finite
/// differences of order 2 to 20, on in-process ranks or under MPI.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// TOML configuration file (every key optional; apps/heat3d/examples/heat3d.toml lists each with its default).
    #[arg(short, long)]
    config: Option<PathBuf>,
    /// In-process ranks (default: the number of cores; one with a GPU
    /// backend, which keeps the whole grid on the device). Ignored under mpirun.
    #[arg(long)]
    ranks: Option<usize>,
    /// Cells per axis: N or NXxNYxNZ.
    #[arg(long, value_parser = parse_triple)]
    n: Option<[usize; 3]>,
    /// Stencil order: 2, 4, 6, ..., 20.
    #[arg(long)]
    order: Option<usize>,
    /// Number of steps.
    #[arg(long)]
    steps: Option<usize>,
    /// Step size (default: cfl times the stability limit).
    #[arg(long)]
    dt: Option<f64>,
    /// Fraction of the stability limit when dt is not given.
    #[arg(long)]
    cfl: Option<f64>,
    /// Diffusivity D.
    #[arg(long)]
    diffusivity: Option<f64>,
    /// Exchange mode.
    #[arg(long, value_enum)]
    mode: Option<Mode>,
    /// Time integrator.
    #[arg(long, value_enum)]
    integrator: Option<Integrator>,
    /// Initial condition.
    #[arg(long, value_enum)]
    initial: Option<Initial>,
    /// Spatial operator.
    #[arg(long, value_enum)]
    operator: Option<Operator>,
    /// Time step of the spectral operator.
    #[arg(long, value_enum)]
    spectral_step: Option<SpectralStep>,
    /// Reshape protocol of the spectral operator's distributed FFTs, as dfft
    /// names them: alltoallv (default), alltoall, p2p, p2p-pipelined, auto, ...
    /// (an unknown name lists the valid ones). Refused by the
    /// finite-difference operator, which does not reshape.
    #[arg(long, value_name = "NAME")]
    protocol: Option<ByName<dfft::Protocol>>,
    /// Process grid PXxPYxPZ (default: smallest halo surface).
    #[arg(long, value_parser = parse_triple)]
    grid: Option<[usize; 3]>,
    /// Steps left out of the timing statistics; at least the last step is
    /// timed (with warmup >= steps, only the last; the report's
    /// timed_steps says how many were).
    #[arg(long)]
    warmup: Option<usize>,
    /// Where to compute: cpu, or cuda (a build with the `cuda` feature).
    #[arg(long, value_name = "NAME")]
    backend: Option<ByName<gpu::Backend>>,
    /// GPU ordinal for every rank (default: rank mod device count).
    #[arg(long)]
    device: Option<usize>,
    /// Cells per GPU thread along axis 0 (0: the stencil's default; 1: a thread per cell); with two steps a pass, the planes a block marches (0: chosen for whole waves of blocks).
    #[arg(long)]
    gpu_chunk: Option<usize>,
    /// GPU stencil block width along the last axis: 32, 64, 128 or 256 (0: the stencil's default).
    #[arg(long)]
    gpu_block: Option<usize>,
    /// How the GPU stencil reads its fast-axis neighbours.
    #[arg(long, value_enum)]
    gpu_stencil: Option<GpuStencil>,
    /// How device halos travel between ranks: on the device between the ranks of one machine (direct: in-process, or MPI processes through CUDA IPC), through host buffers (staged), through NCCL (nccl: one GPU per rank, any number of machines), or auto (direct where it can, else staged).
    #[arg(long, value_enum)]
    gpu_exchange: Option<GpuExchange>,
    /// How the GPU stencil of one rank that is its own periodic neighbour reads across its faces in blocking mode: at their periodic images in the owned cells (read), from ghosts filled by self-copies (copy), or auto.
    #[arg(long, value_enum)]
    gpu_periodic: Option<GpuPeriodic>,
    /// Euler steps one pass over the box advances: 1 to 4 on the host, 1 or 2 on a GPU (one rank, blocking, Euler finite differences; on a GPU order 2 only: the intermediate values stay in cache or on the chip; same bits); 0: the default, several where possible and faster (host: 4, else 2, where the pass computes at most 1.1 times the owned cells; GPU: 2 from 2^24 cells).
    #[arg(long)]
    steps_per_pass: Option<usize>,
    /// Rows of axis 1 a tile of the host's multi-step pass holds; 0: the default (the widest whose rings fit 3/4 of an L2 of 2 MiB or more, else 7/32 of the last-level cache); same bits.
    #[arg(long)]
    tile_rows: Option<usize>,
    /// The CPU kernel of the finite-difference sweeps: auto (AVX-512 where the CPU has it, then AVX2, but AVX2 first at orders 8 and 10; else the portable loop), scalar, avx2 or avx512; same bits.
    #[arg(long, value_enum)]
    cpu_stencil: Option<CpuStencil>,
    /// Output folder for diagnostics.csv and the VTK files.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Do not write the VTK files.
    #[arg(long)]
    no_vtk: bool,
    /// Write the report as JSON to this file (its folder must exist; checked
    /// before the run).
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
    if let Some(n) = cli.n {
        c.n = PerAxis::Each(n);
    }
    appkit::set_from!(
        c,
        cli;
        order,
        steps,
        cfl,
        diffusivity,
        mode,
        integrator,
        initial,
        warmup,
        operator,
        spectral_step,
        protocol,
        backend,
        gpu_chunk,
        gpu_block,
        gpu_stencil,
        gpu_exchange,
        gpu_periodic,
        steps_per_pass,
        tile_rows,
        cpu_stencil
    );
    if cli.device.is_some() {
        c.device = cli.device;
    }
    if cli.dt.is_some() {
        c.dt = cli.dt;
    }
    if cli.grid.is_some() {
        c.grid = cli.grid;
    }
    if cli.output.is_some() {
        c.output.dir = cli.output.clone();
    }
    if cli.no_vtk {
        c.output.vtk = false;
    }
    Ok(c)
}

fn finish(cli: &Cli, report: &heat3d::Report) -> Result<()> {
    println!("{}", report.summary());
    for f in &report.files {
        println!("wrote {f}");
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
    // On a GPU one rank holds the grid on the device; more ranks are asked
    // for explicitly.
    let ranks = match cfg.backend.value() {
        gpu::Backend::Cpu => cli.ranks,
        _ => cli.ranks.or(Some(1)),
    };
    let report = appkit::launch::launch("heat3d", ranks, |c| heat3d::run(c, &cfg, !cli.quiet))?;
    match report {
        Some(r) => finish(cli, &r),
        None => Ok(()),
    }
}
