//! `cargo xtask bench TARGET`: the benchmarks, one module each
//! ([`self::heat3d`], [`multigrid`], [`fft`], [`fft_dist`], [`sht`],
//! [`sht_transpose`], [`method_cost`], [`mod@dynamo`], [`mod@flow`],
//! [`scaling`]; the GPU
//! ones in [`crate::gpu`]), and those that live in their crates (run with
//! `cargo bench`).

pub(crate) mod dynamo;
pub(crate) mod fft;
mod fft_dist;
pub(crate) mod flow;
pub(crate) mod heat3d;
mod method_cost;
mod multigrid;
mod scaling;
mod sht;
pub(crate) mod sht_transpose;

use crate::util;
use anyhow::{Context, Result};

/// What `cargo xtask bench` can measure.
#[derive(Debug, clap::Subcommand)]
pub enum Target {
    /// The heat3d application: weak scaling, order sweep vs stream, overlap.
    Heat3d(heat3d::Args),
    /// imex: factor and solve of one l-loop, faer vs LAPACK vs dgetrs per m
    /// (`cargo bench -p parnum-imex --bench imex --features lapack`).
    Imex(CrateArgs),
    /// chebyshev: DCT-I transforms and derivatives vs dense products
    /// (`cargo bench -p parnum-chebyshev --bench dct`).
    Chebyshev(CrateArgs),
    /// heat3d: grid and cost per step each operator needs for a target
    /// error (FD-2..FD-20 vs spectral, 1e-2 and 1e-8).
    MethodCost(method_cost::Args),
    /// comm: exact sum vs plain, Neumaier and xsum
    /// (`cargo bench -p parnum-comm --bench exact_sum`).
    ExactSum(CrateArgs),
    /// halo: exchange throughput for widths 1 to 10 vs memcpy
    /// (`cargo bench -p parnum-halo --bench halo_exchange`).
    Halo(CrateArgs),
    /// multigrid (through the poisson app): DOF/s at 128³ and 256³ on 1, 2
    /// and 4 ranks, communication-avoiding smoothing on and off, the
    /// V-cycle residual factor, PyAMG on the same problem.
    Multigrid(multigrid::Args),
    /// sht: the theta and l transposition algorithms of the distributed
    /// transforms at 2 and 4 ranks, queue lengths 1 to 13.
    ShtTranspose(sht_transpose::BenchArgs),
    /// sht: scalar and vector synthesis + analysis on one core at lmax 63
    /// to 511, with SHTns and ducc0 on the same grid in the same run.
    Sht(sht::Args),
    /// The dynamo app: the Christensen et al. (2001) benchmark values
    /// (`--case 0|1`) or the time per step and its phases (`--perf`).
    Dynamo(dynamo::BenchArgs),
    /// dfft: local 3D transforms (c2c, r2c) on one core against FFTW
    /// (MEASURE, out of place) and scipy's pocketfft in the same run.
    Fft(fft::Args),
    /// dfft: the distributed 3D FFT (c2c, r2c) against HeFFTe (FFTW
    /// backend, dfft/bench/build_heffte.sh) and mpi4py-fft on the same
    /// ranks in the same run.
    FftDist(fft_dist::Args),
    /// The flow app: sphere-array drag vs Zick and Homsy and Hasimoto
    /// (`--permeability`), Taylor-Green decay (`--taylor-green`), a random
    /// bed (`--bed`), the cost of a step (`--perf`).
    Flow(flow::BenchArgs),
    /// heat3d on a CUDA device: the copy bandwidth, FD-2 to FD-20 at 256^3
    /// and 512^3 as a fraction of it, blocking vs overlapped on ranks
    /// sharing the GPU, the spectral step vs a bare cuFFT pair.
    Gpu(crate::gpu::BenchArgs),
    /// heat3d and pfc over several GPUs, one rank per GPU, in-process and
    /// under mpirun: FD weak and strong scaling, spectral and pfc weak
    /// scaling; table, JSON and a PNG per series.
    GpuScaling(crate::gpu::scaling::Args),
    /// An application over rank counts under mpirun (or in-process ranks):
    /// dynamo strong scaling (1d and 2d), flow weak scaling, poisson strong
    /// scaling; the reports kept, a table printed.
    Scaling(scaling::Args),
}

/// Options of the benchmarks that live in their crates.
#[derive(Debug, Clone, clap::Args)]
pub struct CrateArgs {
    /// Arguments passed on to the benchmark binary (after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs a crate's `harness = false` benchmark with its output streamed.
fn crate_bench(package: &str, bench: &str, features: &[&str], rest: &[String]) -> Result<()> {
    let mut cmd = util::cargo();
    cmd.args(["bench", "-p", package, "--bench", bench]);
    for f in features {
        cmd.args(["--features", f]);
    }
    cmd.arg("--").args(rest);
    let status = cmd
        .status()
        .with_context(|| format!("cannot run cargo bench -p {package}"))?;
    if !status.success() {
        anyhow::bail!("cargo bench -p {package} --bench {bench} failed with {status}");
    }
    Ok(())
}

/// Runs the benchmark `target` names.
pub fn run(target: &Target) -> Result<()> {
    match target {
        Target::Heat3d(a) => heat3d::run(a),
        Target::Imex(a) => crate_bench("parnum-imex", "imex", &["lapack"], &a.rest),
        Target::Chebyshev(a) => crate_bench("parnum-chebyshev", "dct", &[], &a.rest),
        Target::ExactSum(a) => crate_bench("parnum-comm", "exact_sum", &[], &a.rest),
        Target::Halo(a) => crate_bench("parnum-halo", "halo_exchange", &[], &a.rest),
        Target::Multigrid(a) => multigrid::run(a),
        Target::ShtTranspose(a) => sht_transpose::bench(a),
        Target::Sht(a) => sht::run(a),
        Target::MethodCost(a) => method_cost::run(a),
        Target::Dynamo(a) => dynamo::bench(a),
        Target::Flow(a) => flow::bench(a),
        Target::Fft(a) => fft::run(a),
        Target::FftDist(a) => fft_dist::run(a),
        Target::Gpu(a) => crate::gpu::bench(a),
        Target::GpuScaling(a) => crate::gpu::scaling::bench(a),
        Target::Scaling(a) => scaling::run(a),
    }
}

/// The 1-minute load average (Linux), to flag a busy machine.
pub(crate) fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
