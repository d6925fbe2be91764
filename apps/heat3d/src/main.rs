//! `heat3d`: the command-line front end. Defaults < configuration file <
//! command-line flags.

use appkit::app::{self, OutputArgs};
use appkit::config::parse_triple;
use heat3d::config::{
    ByName, Config, CpuStencil, GpuExchange, GpuPeriodic, GpuStencil, Initial, Integrator, Mode,
    Operator, SpectralStep,
};
use serde::Serialize;

/// The whole command line: the common flags and heat3d's own.
type Cli = app::Command<Flags, OutputArgs>;

/// heat3d's operator, grid, time-step and backend flags: each sets the configuration key of its name.
#[derive(Debug, clap::Args, Serialize)]
struct Flags {
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
    /// How device halos travel between ranks: on the device between the ranks of one machine (direct: in-process, or MPI processes through CUDA IPC), through host buffers (staged), through NCCL (nccl: one GPU per rank, any number of machines), or auto (direct where it can, else staged).
    #[arg(long, value_enum)]
    gpu_exchange: Option<GpuExchange>,
    #[command(flatten)]
    stencil: StencilFlags,
}

/// The flags of the `[stencil]` section: each sets the key of its field's
/// name there (`--gpu-stencil` sets `gpu`, `--cpu-stencil` sets `cpu`).
#[derive(Debug, clap::Args, Serialize)]
struct StencilFlags {
    /// Cells per GPU thread along axis 0 (0: the stencil's default; 1: a thread per cell); with two steps a pass, the planes a block marches (0: chosen for whole waves of blocks).
    #[arg(long)]
    gpu_chunk: Option<usize>,
    /// GPU stencil block width along the last axis: 32, 64, 128 or 256 (0: the stencil's default).
    #[arg(long)]
    gpu_block: Option<usize>,
    /// How the GPU stencil reads its fast-axis neighbours.
    #[arg(long = "gpu-stencil", value_enum)]
    gpu: Option<GpuStencil>,
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
    #[arg(long = "cpu-stencil", value_enum)]
    cpu: Option<CpuStencil>,
}

fn main() -> std::process::ExitCode {
    let cli: Cli = appkit::parse_command_line!();
    app::main(|| -> anyhow::Result<()> {
        let cfg: Config = cli.configure(heat3d::config::RENAMED)?;
        // On a GPU one rank holds the grid on the device; more ranks are
        // asked for explicitly.
        let ranks = match cfg.backend.value() {
            gpu::Backend::Cpu => None,
            _ => Some(1),
        };
        let plan = cli.plan(cfg.output.dir.as_deref()).default_ranks(ranks);
        Ok(app::execute(plan, |c, progress| {
            heat3d::run(c, &cfg, progress)
        })?)
    })
}

appkit::shell_test!(Cli, Config, Flags);

#[cfg(test)]
mod tests {
    use super::*;

    /// The stencil flags set the keys of the `[stencil]` section.
    #[test]
    fn stencil_flags_set_the_stencil_section() {
        let cli = <Cli as clap::Parser>::try_parse_from([
            "heat3d",
            "--gpu-stencil",
            "shuffle",
            "--cpu-stencil",
            "scalar",
            "--steps-per-pass",
            "2",
            "--gpu-chunk",
            "5",
            "--order",
            "4",
        ])
        .unwrap();
        let cfg: Config = cli.configure(heat3d::config::RENAMED).unwrap();
        assert_eq!(cfg.stencil.gpu, GpuStencil::Shuffle);
        assert_eq!(cfg.stencil.cpu, CpuStencil::Portable);
        assert_eq!(cfg.stencil.steps_per_pass, 2);
        assert_eq!(cfg.stencil.gpu_chunk, 5);
        assert_eq!(cfg.stencil.gpu_block, 0);
        assert_eq!(cfg.order, 4);
    }
}
