//! `--backend cuda` against `--backend cpu` where a CUDA device is present;
//! elsewhere, the errors that say why it cannot run (a build without the
//! `cuda` feature, a machine without the driver or without a device).
//!
//! **Tolerance.** The two backends run the same step with the same
//! per-mode factors but different FFTs (cuFFT against the host's), and the
//! device folds the `1 / N` of the backward transform into the update
//! factor, so each step differs by the rounding of a transform pair, a few
//! `eps log2 N`, about `1e-15` relative on the field for the 24^3 grid
//! here. The growing modes amplify a difference by at most the largest
//! linear factor `1 / (1 + dt k^2 (r + (1 - k^2)^2))` per step, 1.152 at
//! `dt = 0.5`, `r = -0.25` (near `k^2 = 1.11`), about 17 over 20 steps;
//! the free energy and the mean density are averages of the field and its
//! powers, so their relative differences should stay near `1e-13` at most
//! (measured on an H200: `1.2e-15` for the free energy and `4.5e-16` for
//! the mean density after 20 steps). `1e-10` leaves a wide margin for
//! other devices and cuFFT versions and is still far below the 4.5 % by
//! which these 20 steps change the free energy, so an error in the device
//! step (a factor, the wavenumbers, the `1 / N`, the cubic term) shows.

use pfc::config::{Config, Initial, PerAxis};
use pfc::{Report, Solver};
use std::path::{Path, PathBuf};

/// Relative agreement of cuda and cpu results (see the module notes).
const TOL: f64 = 1e-10;

fn small() -> Config {
    Config {
        periods: PerAxis::All(3),
        points_per_period: 8,
        initial: Initial::Seed,
        steps: 20,
        seed_radius: 1.0,
        ..Config::default()
    }
}

fn cuda(cfg: &Config) -> Config {
    Config {
        backend: "cuda".parse().unwrap(),
        ..cfg.clone()
    }
}

fn run(ranks: usize, cfg: &Config, restart: Option<&Path>) -> Result<Report, String> {
    comm::local::run(ranks, |c| {
        pfc::run(c, cfg, restart, false).map_err(|e| format!("{e:#}"))
    })
    .map(|mut r| r.swap_remove(0))
    .map_err(|e| e.reason)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pfc-cuda-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// `got` within [`TOL`] of `want`, relative.
fn close(what: &str, got: f64, want: f64) {
    let rel = (got - want).abs() / want.abs();
    eprintln!("{what}: cuda {got:.17e}, cpu {want:.17e}, relative difference {rel:.2e}");
    assert!(
        rel <= TOL,
        "{what}: cuda {got} vs cpu {want} (relative {rel:.3e} > {TOL:e})"
    );
}

/// Both reports' final free energy and mean density agree.
fn agree(what: &str, dev: &Report, cpu: &Report) {
    assert_eq!(dev.last.step, cpu.last.step, "{what}");
    close(
        &format!("{what}: free energy"),
        dev.last.free_energy,
        cpu.last.free_energy,
    );
    close(
        &format!("{what}: mean density"),
        dev.last.mean_density,
        cpu.last.mean_density,
    );
}

#[test]
fn cuda_backend_agrees_with_the_cpu_or_gives_a_clear_error() {
    let cfg = small();
    let cpu = run(1, &cfg, None).unwrap();
    assert_eq!(cpu.device, "cpu");
    match run(1, &cuda(&cfg), None) {
        Ok(dev) => {
            assert!(dev.device.contains("CUDA device"), "{}", dev.device);
            // The initial diagnostics are the host's code on the host's
            // initial field: the same bits.
            assert_eq!(
                dev.first.free_energy.to_bits(),
                cpu.first.free_energy.to_bits()
            );
            agree("20 steps", &dev, &cpu);
            // The run did move: F changed far beyond the tolerance.
            assert!(
                (cpu.last.free_energy - cpu.first.free_energy).abs()
                    > 1e4 * TOL * cpu.first.free_energy.abs()
            );
            assert!(dev.median_step > 0.0);
            device_checks(&cfg);
        }
        Err(e) if cfg!(feature = "cuda") => {
            eprintln!("skipped: no CUDA device ({e})");
            assert!(
                e.contains("libcuda") || e.contains("device(s) are present"),
                "{e}"
            );
        }
        Err(e) => assert!(
            e.contains("backend cuda") && e.contains("--features cuda"),
            "{e}"
        ),
    }
}

/// With a device: non-finite values, rank counts, ordinals, restarts both
/// ways, the linear factor through `Solver`.
fn device_checks(cfg: &Config) {
    // psi^3 overflows in the first step: the device flag stops the run at
    // the diagnostics of step 1 and names the step, as the cpu does.
    let blow_up = Config {
        amplitude: Some(1e300),
        steps: 5,
        diag_every: 1,
        ..cfg.clone()
    };
    let e = run(1, &blow_up, None).unwrap_err();
    assert!(e.contains("non-finite value in the field at step 1"), "{e}");
    let e = run(1, &cuda(&blow_up), None).unwrap_err();
    assert!(
        e.contains("non-finite value in the field at step 1")
            && e.contains("flagged on the device"),
        "{e}"
    );
    // A grid split over 2 and 3 ranks (the distributed transform on the
    // device, reshapes device to device) agrees with the cpu as one rank
    // does.
    let cpu = run(1, cfg, None).unwrap();
    for ranks in [2, 3] {
        let dev = run(ranks, &cuda(cfg), None).unwrap();
        agree(&format!("{ranks} ranks"), &dev, &cpu);
    }
    // A device that is not there.
    let e = run(
        1,
        &Config {
            device: Some(99),
            ..cuda(cfg)
        },
        None,
    )
    .unwrap_err();
    assert!(e.contains("device 99 was asked for"), "{e}");

    // Restarts: 8 steps on the device write a checkpoint (and VTK from the
    // downloaded field); 8 more on either backend match 16 on the cpu.
    let dir = tmp("restart");
    let whole = run(
        1,
        &Config {
            steps: 16,
            ..cfg.clone()
        },
        None,
    )
    .unwrap();
    let mut half = cuda(cfg);
    half.steps = 8;
    half.output.dir = Some(dir.clone());
    half.output.checkpoint_every = 8;
    half.output.vtk_every = 8;
    run(1, &half, None).unwrap();
    let ck = dir.join("pfc_000008.chk");
    assert!(ck.is_file() && dir.join("pfc_000008.pvti").is_file());
    let rest = Config {
        steps: 8,
        ..cfg.clone()
    };
    for (name, c) in [
        ("cuda from cuda", cuda(&rest)),
        ("cpu from cuda", rest.clone()),
    ] {
        let r = run(1, &c, Some(&ck)).unwrap();
        assert_eq!(r.first.step, 8, "{name}");
        agree(name, &r, &whole);
    }
    // And the device continues a checkpoint the cpu wrote on 3 ranks.
    let mut cpu_half = rest.clone();
    cpu_half.output.dir = Some(dir.join("cpu"));
    cpu_half.output.checkpoint_every = 8;
    run(3, &cpu_half, None).unwrap();
    let r = run(1, &cuda(&rest), Some(&dir.join("cpu/pfc_000008.chk"))).unwrap();
    agree("cuda from cpu", &r, &whole);
    std::fs::remove_dir_all(&dir).unwrap();

    // Single Fourier modes with the nonlinear term off follow the discrete
    // factor, through `set_field`, `set_nonlinear` and `for_each`.
    let lin = Config {
        mean_density: 0.0,
        ..cuda(cfg)
    };
    let n = lin.shape();
    let l = lin.length();
    for m in [[4usize, 0, 0], [2, 2, 1], [6, 1, 0], [0, 0, 9]] {
        let phase = |idx: [usize; 3]| {
            2.0 * std::f64::consts::PI
                * (0..3)
                    .map(|a| (m[a] * idx[a]) as f64 / n[a] as f64)
                    .sum::<f64>()
        };
        let got = comm::local::run(1, |c| {
            let mut s = Solver::new(c, &lin, None)?;
            s.set_field(|idx| 0.1 * phase(idx).cos());
            s.set_nonlinear(false);
            for _ in 0..20 {
                assert!(s.step()?);
            }
            let (mut num, mut den) = (0.0, 0.0);
            s.for_each(|idx, v| {
                let c = phase(idx).cos();
                num += v * c;
                den += c * c;
            })?;
            Ok::<_, anyhow::Error>(num / den)
        })
        .unwrap()[0];
        let k2: f64 = (0..3)
            .map(|a| (2.0 * std::f64::consts::PI * m[a] as f64 / l[a]).powi(2))
            .sum();
        let g = 1.0 / (1.0 + lin.dt * k2 * (lin.r + (1.0 - k2).powi(2)));
        let want = 0.1 * g.powi(20);
        // Relative 1e-12, and 1e-15 absolute for the decaying modes, which
        // end far below the transforms' rounding of a 0.1 amplitude.
        assert!(
            (got - want).abs() <= 1e-12 * want.abs() + 1e-15,
            "mode {m:?}: {got} vs {want}"
        );
    }
}
