//! Heat3D against the analytic solution, across modes and rank counts.

use heat3d::config::{Config, CpuStencil, Initial, Integrator, Mode, PerAxis, StencilOptions};

fn run(cfg: &Config, ranks: usize) -> heat3d::Report {
    let mut r = comm::local::run(ranks, |c| {
        heat3d::run(c, cfg, false).map_err(|e| format!("{e:#}"))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    r.swap_remove(0)
}

/// A product of sines with `D T |k|^2 = 0.5`, integrated with RK4 at a step
/// small enough that the time error is far below the spatial one.
fn sines(order: usize, m: usize, n: usize, steps: usize) -> Config {
    let k2 = 3.0 * (2.0 * std::f64::consts::PI * m as f64).powi(2);
    let t = 0.5 / k2;
    Config {
        n: PerAxis::All(n),
        order,
        steps,
        dt: Some(t / steps as f64),
        integrator: Integrator::Rk4,
        initial: Initial::Sines,
        modes: [m; 3],
        warmup: 0,
        diag_every: steps,
        ..Config::default()
    }
}

#[test]
fn error_falls_at_the_order_of_each_stencil() {
    // (order, wavenumber, coarse n, fine n, steps): grids in the asymptotic
    // range where the spatial error is far above rounding and time error.
    for (order, m, n1, n2, steps) in [
        (2, 1, 16, 32, 20),
        (4, 1, 16, 32, 40),
        (8, 2, 24, 32, 100),
        (12, 3, 24, 32, 150),
        (20, 4, 24, 32, 200),
    ] {
        // The RMS error: the discrete mean of sin^2 over whole periods is 1/2
        // on any grid, while the maximum depends on where the points fall.
        let e1 = run(&sines(order, m, n1, steps), 2).last.rms_error;
        let e2 = run(&sines(order, m, n2, steps), 2).last.rms_error;
        let rate = (e1 / e2).ln() / (n2 as f64 / n1 as f64).ln();
        println!("order {order}: error {e1:.3e} -> {e2:.3e}, rate {rate:.2}");
        let slack = if order >= 20 { 1.5 } else { 0.5 };
        assert!(
            rate > order as f64 - slack && rate < order as f64 + 1.0,
            "order {order}: measured rate {rate:.2} ({e1:.3e} -> {e2:.3e})"
        );
    }
}

#[test]
fn blocking_overlap_and_rank_counts_give_identical_bits() {
    for (order, integrator) in [
        (2, Integrator::Euler),
        (8, Integrator::Euler),
        (4, Integrator::Rk4),
    ] {
        let base = Config {
            n: PerAxis::Each([24, 20, 22]),
            order,
            integrator,
            steps: 12,
            warmup: 0,
            ..Config::default()
        };
        let reference = run(
            &Config {
                mode: Mode::Blocking,
                ..base.clone()
            },
            1,
        );
        for (ranks, grid) in [
            (1, None),
            (4, None),
            (4, Some([1, 2, 2])),
            (3, Some([3, 1, 1])),
        ] {
            for mode in [Mode::Blocking, Mode::Overlap] {
                let r = run(
                    &Config {
                        mode,
                        grid,
                        ..base.clone()
                    },
                    ranks,
                );
                assert_eq!(
                    r.hash, reference.hash,
                    "order {order} {integrator:?}, {ranks} ranks, grid {grid:?}, {mode:?}"
                );
                assert_eq!(r.last.mean.to_bits(), reference.last.mean.to_bits());
                assert_eq!(
                    r.last.rms_error.to_bits(),
                    reference.last.rms_error.to_bits()
                );
            }
        }
    }
}

/// Two Euler steps a host pass (one rank) give the bits of one step a
/// pass: grids some of whose extents lie between the radius and twice it,
/// block boundaries anywhere, an odd step count (a single step after the
/// pairs) and diagnostics every 3 steps (single steps between pairs).
#[test]
fn several_steps_a_pass_give_the_bits_of_one() {
    for (order, n) in [
        (2, [12, 16, 10]),
        (2, [3, 5, 2]),
        (4, [9, 17, 13]),
        (20, [10, 11, 12]),
    ] {
        // Diagnostics every 3 steps: passes of 2 and 3 steps, and of 4
        // cut short before a diagnostics step.
        for steps in [1, 2, 7] {
            let base = Config {
                n: PerAxis::Each(n),
                order,
                steps,
                mode: Mode::Blocking,
                warmup: 0,
                diag_every: 3,
                ..Config::default()
            };
            let one = run(
                &Config {
                    stencil: StencilOptions {
                        steps_per_pass: 1,
                        ..StencilOptions::default()
                    },
                    ..base.clone()
                },
                1,
            );
            for k in 2..=stencil::policy::MAX_HOST_STEPS_PER_PASS {
                let many = run(
                    &Config {
                        stencil: StencilOptions {
                            steps_per_pass: k,
                            ..StencilOptions::default()
                        },
                        ..base.clone()
                    },
                    1,
                );
                assert_eq!(
                    one.hash, many.hash,
                    "order {order}, {n:?}, {steps} steps, {k} a pass"
                );
            }
            // Tiles set outright (`tile_rows`), narrower and wider than
            // the axis: the same bits.
            for tile_rows in [1, 3, 40] {
                let tiled = run(
                    &Config {
                        stencil: StencilOptions {
                            steps_per_pass: stencil::policy::MAX_HOST_STEPS_PER_PASS,
                            tile_rows,
                            ..StencilOptions::default()
                        },
                        ..base.clone()
                    },
                    1,
                );
                assert_eq!(
                    one.hash, tiled.hash,
                    "order {order}, {n:?}, {steps} steps, tiles of {tile_rows} rows"
                );
            }
        }
    }
    // A non-finite value in the first step of a pass is reported there.
    let e = comm::local::run(1, |c| {
        let cfg = Config {
            n: PerAxis::All(12),
            steps: 4,
            amplitude: f64::MAX,
            initial: Initial::Sines,
            mode: Mode::Blocking,
            stencil: StencilOptions {
                steps_per_pass: 2,
                ..StencilOptions::default()
            },
            ..Config::default()
        };
        heat3d::run(c, &cfg, false).map_err(|e| format!("{e:#}"))
    })
    .unwrap_err();
    assert!(e.reason.contains("at step 1 "), "{}", e.reason);
    // Two where they are not possible: an error naming why.
    let e = comm::local::run(2, |c| {
        let cfg = Config {
            n: PerAxis::All(8),
            steps: 2,
            stencil: StencilOptions {
                steps_per_pass: 2,
                ..StencilOptions::default()
            },
            ..Config::default()
        };
        heat3d::run(c, &cfg, false).map_err(|e| format!("{e:#}"))
    })
    .unwrap_err();
    for want in [
        "steps_per_pass = 2 needs one rank",
        "2 rank(s)",
        "blocking mode (this run: Overlap)",
    ] {
        assert!(e.reason.contains(want), "{want:?} not in {}", e.reason);
    }
}

#[test]
fn gaussian_error_is_small_and_the_hash_sees_every_bit() {
    let cfg = Config {
        n: PerAxis::All(32),
        steps: 30,
        ..Config::default()
    };
    let a = run(&cfg, 2);
    assert!(
        a.last.max_error < 5e-3 && a.last.max_error > 0.0,
        "{}",
        a.last.max_error
    );
    // One more step changes the field and the hash.
    let b = run(&Config { steps: 31, ..cfg }, 2);
    assert_ne!(a.hash, b.hash);
}

#[test]
fn non_finite_values_stop_the_run_with_step_and_cell() {
    // Neighbour sums of values near f64::MAX overflow in the first sweep.
    let cfg = Config {
        n: PerAxis::All(12),
        steps: 5,
        amplitude: f64::MAX,
        initial: Initial::Sines,
        ..Config::default()
    };
    let e = comm::local::run(2, |c| {
        heat3d::run(c, &cfg, false).map_err(|e| format!("{e:#}"))
    })
    .unwrap_err();
    assert!(
        e.reason.contains("non-finite value")
            && e.reason.contains("at step 1")
            && e.reason.contains("global cell"),
        "{}",
        e.reason
    );
}

#[test]
fn a_diagnostics_file_rank_0_cannot_write_stops_every_rank() {
    // `/dev/full` takes no byte: rank 0 cannot write the header, and rank
    // 1 must stop with its reason instead of waiting for it in the steps.
    let dir = std::env::temp_dir().join(format!("heat3d-full-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink("/dev/full", dir.join("diagnostics.csv")).unwrap();
    let cfg = Config {
        n: PerAxis::Each([8, 8, 8]),
        steps: 2,
        output: heat3d::config::Output {
            dir: Some(dir.clone()),
            vtk: false,
            ..Default::default()
        },
        ..Config::default()
    };
    let errors = comm::local::run(2, |c| {
        let r = heat3d::run(c, &cfg, false);
        Ok::<_, String>(r.err().map(|e| format!("{e:#}")).unwrap_or_default())
    })
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(errors[0], errors[1]);
    assert!(errors[0].contains("diagnostics.csv"), "{errors:?}");
}

#[test]
fn output_files_are_complete_and_readable() {
    let dir = std::env::temp_dir().join(format!("heat3d-out-{}", std::process::id()));
    let cfg = Config {
        n: PerAxis::Each([10, 8, 6]),
        steps: 4,
        diag_every: 2,
        output: heat3d::config::Output {
            dir: Some(dir.clone()),
            ..Default::default()
        },
        ..Config::default()
    };
    let r = run(&cfg, 3);
    let csv = std::fs::read_to_string(dir.join("diagnostics.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 3, "{csv}");
    let pvti = std::fs::read_to_string(dir.join("heat3d.pvti")).unwrap();
    assert_eq!(pvti.matches("<Piece").count(), 3);
    // The pieces hold exactly the field: rebuild it and compare with the hash of a 1-rank run.
    let one = run(
        &Config {
            output: Default::default(),
            ..cfg.clone()
        },
        1,
    );
    assert_eq!(r.hash, one.hash);
    let mut total = 0;
    for p in 0..3 {
        let bytes = std::fs::read(dir.join(format!("heat3d_r{p:04}.vti"))).unwrap();
        let start = bytes.windows(2).position(|w| w == b"\n_").unwrap() + 2;
        total += u64::from_le_bytes(bytes[start..start + 8].try_into().unwrap()) / 8;
    }
    assert_eq!(total, 10 * 8 * 6);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn spectral_operator_is_exact_in_time_and_identical_across_ranks() {
    use heat3d::config::{Operator, SpectralStep};
    // sigma = 0.15 L: the Gaussian is resolved to rounding on these grids.
    let base = Config {
        n: PerAxis::Each([24, 20, 18]),
        operator: Operator::Spectral,
        sigma: 0.15,
        steps: 20,
        warmup: 0,
        ..Config::default()
    };
    let one = run(&base, 1);
    // The integrating factor is exact in time and the Gaussian is resolved:
    // only rounding remains (measured 3.3e-15 with values of order 1);
    // 1e-13 leaves a 30x margin.
    assert!(one.last.max_error < 1e-13, "{}", one.last.max_error);
    for (ranks, grid) in [(2, None), (3, Some([1, 3, 1])), (4, Some([2, 1, 2]))] {
        let r = run(
            &Config {
                grid,
                ..base.clone()
            },
            ranks,
        );
        assert_eq!(r.hash, one.hash, "{ranks} ranks, grid {grid:?}");
    }
    // Implicit Euler is first order in time: halving dt halves the error.
    let imp = |dt: f64| {
        let steps = (2e-3 / dt).round() as usize;
        run(
            &Config {
                spectral_step: SpectralStep::Implicit,
                dt: Some(dt),
                steps,
                ..base.clone()
            },
            2,
        )
        .last
        .max_error
    };
    let (e1, e2) = (imp(2e-4), imp(1e-4));
    let rate = (e1 / e2).log2();
    assert!(
        (rate - 1.0).abs() < 0.1,
        "implicit Euler rate {rate:.3} ({e1:.3e} -> {e2:.3e})"
    );
}

/// `--backend cuda`: where a device is present, the host's bits (overlap,
/// RK4, two ranks sharing it) and the host's non-finite report; elsewhere
/// a clear error naming the missing feature, library or device.
#[test]
fn cuda_backend_gives_the_host_bits_or_a_clear_error() {
    let mut cfg = sines(6, 1, 16, 12);
    cfg.mode = Mode::Overlap;
    let host = run(&cfg, 2);
    cfg.backend = "cuda".parse().unwrap();
    let device = comm::local::run(2, |c| {
        heat3d::run(c, &cfg, false).map_err(|e| format!("{e:#}"))
    });
    match device {
        Ok(r) => {
            assert_eq!(r[0].hash, host.hash, "device and host bits differ");
            assert!(r[0].device.contains("CUDA device"), "{}", r[0].device);
            let bad = Config {
                n: PerAxis::All(12),
                steps: 5,
                diag_every: 1,
                amplitude: f64::MAX,
                initial: Initial::Sines,
                backend: "cuda".parse().unwrap(),
                ..Config::default()
            };
            let e = comm::local::run(1, |c| {
                heat3d::run(c, &bad, false).map_err(|e| format!("{e:#}"))
            })
            .unwrap_err();
            assert!(
                e.reason.contains("non-finite value") && e.reason.contains("at step 1"),
                "{}",
                e.reason
            );
        }
        Err(e) if cfg!(feature = "cuda") => assert!(
            e.reason.contains("libcuda") || e.reason.contains("device(s) are present"),
            "{}",
            e.reason
        ),
        Err(e) => assert!(
            e.reason.contains("backend cuda") && e.reason.contains("--features cuda"),
            "{}",
            e.reason
        ),
    }
}

#[test]
fn every_cpu_stencil_gives_the_same_field_and_is_reported() {
    let base = Config {
        n: PerAxis::All(20),
        order: 6,
        steps: 3,
        warmup: 0,
        diag_every: 3,
        ..Config::default()
    };
    let auto = run(&base, 2);
    assert_eq!(auto.cpu_stencil, stencil::policy::host_kernel(3).name());
    // Orders 8 and 10 are where `auto` takes AVX2 first.
    let mid = Config {
        order: 8,
        ..base.clone()
    };
    assert_eq!(
        run(&mid, 2).cpu_stencil,
        stencil::policy::host_kernel(4).name()
    );
    for (choice, name) in [
        (CpuStencil::Portable, "portable"),
        (CpuStencil::Avx2, "avx2"),
        (CpuStencil::Avx512, "avx512"),
    ] {
        let cfg = Config {
            stencil: StencilOptions {
                cpu: choice,
                ..StencilOptions::default()
            },
            ..base.clone()
        };
        let available = stencil::Kernel::ALL
            .into_iter()
            .any(|k| k.available() && k.name() == name);
        let got = comm::local::run(2, |c| {
            heat3d::run(c, &cfg, false).map_err(|e| format!("{e:#}"))
        });
        match (available, got) {
            (true, Ok(mut r)) => {
                let r = r.swap_remove(0);
                assert_eq!(r.cpu_stencil, name);
                assert_eq!(r.hash, auto.hash, "{name}");
            }
            (false, Err(e)) => {
                let e = e.to_string();
                assert!(e.contains(name) && e.contains("valid here"), "{e}")
            }
            (true, Err(e)) => panic!("{name}: {e}"),
            (false, Ok(_)) => panic!("{name} ran although this CPU does not have it"),
        }
    }
}

/// The `heat3d` binary, outside any MPI launcher: `HEAT3D_BIN` where set
/// (`cargo xtask gpu --bin-dir` runs these tests away from the build's
/// target folder), else this build's.
fn heat3d_cmd() -> std::process::Command {
    let bin = std::env::var_os("HEAT3D_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_heat3d").into());
    let mut c = std::process::Command::new(bin);
    for v in comm::LAUNCHER_VARS {
        c.env_remove(v);
    }
    c
}

#[test]
fn a_json_file_that_cannot_be_written_is_refused_before_the_run() {
    let dir = std::env::temp_dir().join(format!("heat3d-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing");
    let out_dir = dir.join("out");
    // A folder that does not exist, and a path that is a folder.
    for (json, want) in [
        (missing.join("r.json"), missing.display().to_string()),
        (dir.clone(), "is a folder".to_string()),
    ] {
        let out = heat3d_cmd()
            .args(["--n", "8", "--steps", "1", "--ranks", "1", "--no-vtk", "-q"])
            .arg("-o")
            .arg(&out_dir)
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{json:?} accepted");
        assert!(err.contains("--json") && err.contains(&want), "{err}");
        // Nothing ran: no summary, no output folder.
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(!out_dir.exists(), "the run wrote {}", out_dir.display());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn warmup_leaves_at_least_the_last_step_timed() {
    let cfg = Config {
        n: PerAxis::All(8),
        steps: 3,
        warmup: 10,
        ..Config::default()
    };
    assert_eq!(run(&cfg, 1).timed_steps, 1);
    assert_eq!(run(&Config { warmup: 1, ..cfg }, 1).timed_steps, 2);
}
