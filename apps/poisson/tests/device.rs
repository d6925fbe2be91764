//! `backend = "cuda"` gives the cpu backend's bits: the solution hash, the
//! residual history and the iterations, for Dirichlet, periodic and
//! Neumann (both singular) and mixed faces, on 1, 2 and 4 ranks sharing one
//! GPU. Skipped, with a
//! note, where no CUDA device is present (`cargo xtask gpu` runs it on one
//! and fails on a skip).
#![cfg(feature = "cuda")]

use poisson::config::{Bc, Config, PerAxis};

#[test]
fn the_gpu_solve_gives_the_cpu_bits() {
    if let Err(e) = gpu::cuda::Device::open(0) {
        eprintln!("skipped: no CUDA device ({e})");
        return;
    }
    for bc in [Bc::Dirichlet, Bc::Periodic, Bc::Neumann, Bc::Mixed] {
        let cpu = Config {
            n: PerAxis::All(32),
            bc,
            ..Config::default()
        };
        let cuda = Config {
            backend: "cuda".parse().unwrap(),
            ..cpu.clone()
        };
        let host = comm::local::run(1, |c| poisson::run(c, &cpu, false))
            .unwrap()
            .swap_remove(0);
        for ranks in [1, 2, 4] {
            let r = comm::local::run(ranks, |c| poisson::run(c, &cuda, false))
                .unwrap()
                .swap_remove(0);
            assert!(r.device.is_some(), "{bc:?}, {ranks} ranks: not on a GPU");
            assert!(r.device_timing.is_some());
            assert_eq!(r.iterations, host.iterations, "{bc:?}, {ranks} ranks");
            assert_eq!(
                r.residuals_hash_hex, host.residuals_hash_hex,
                "{bc:?}, {ranks} ranks: residual history"
            );
            assert_eq!(r.hash_hex, host.hash_hex, "{bc:?}, {ranks} ranks: solution");
        }
    }
}
