//! `backend = "cuda"` gives the host's bits: the field hash and every
//! step's iteration counts of cut-cell and ghost-cell Stokes flow through a
//! random bed and of Navier-Stokes flow (Taylor-Green, and the bed), on 1,
//! 2 and 4 ranks sharing one GPU, against one rank on the CPU; and a run
//! continued on the GPU from a checkpoint the GPU wrote ends where the
//! uninterrupted CPU run does. Skipped, with a note, where no CUDA device
//! is present (`cargo xtask gpu` runs it on one and fails on a skip).
#![cfg(feature = "cuda")]

use flow::config::{Bodies, Config, Initial, Method, Output};

fn have_device() -> bool {
    match gpu::cuda::Device::open(0) {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipped: no CUDA device ({e})");
            false
        }
    }
}

fn report(cfg: &Config, ranks: usize, restart: Option<&std::path::Path>) -> flow::Report {
    let bed = flow::bodies::Bed::new(cfg).unwrap();
    comm::local::run(ranks, |c| flow::run(c, cfg, &bed, restart, false))
        .unwrap()
        .swap_remove(0)
}

fn cuda(cfg: &Config) -> Config {
    Config {
        backend: "cuda".parse().unwrap(),
        ..cfg.clone()
    }
}

fn cases() -> Vec<(&'static str, Config)> {
    let bed = Config {
        n: 32,
        bodies: Bodies::Random,
        solid_fraction: 0.3,
        radius: 0.09,
        steps: 4,
        steady_tol: 0.0,
        ..Config::default()
    };
    vec![
        ("random bed, cut cells, Stokes", bed.clone()),
        (
            "random bed, ghost cells, Stokes",
            Config {
                method: Method::GhostCell,
                ..bed.clone()
            },
        ),
        (
            "random bed, cut cells, Navier-Stokes",
            Config {
                navier_stokes: true,
                force: [400.0, 0.0, 0.0],
                ..bed.clone()
            },
        ),
        (
            "Taylor-Green, Navier-Stokes",
            Config {
                n: 32,
                bodies: Bodies::None,
                initial: Initial::TaylorGreen,
                navier_stokes: true,
                force: [0.0; 3],
                nu: 0.01,
                dt: Some(2e-3),
                steps: 4,
                steady_tol: 0.0,
                ..Config::default()
            },
        ),
    ]
}

#[test]
fn the_gpu_step_gives_the_cpu_bits_on_every_rank_count() {
    if !have_device() {
        return;
    }
    for (name, cfg) in cases() {
        let host = report(&cfg, 1, None);
        assert!(host.device.is_none());
        for ranks in [1, 2, 4] {
            let r = report(&cuda(&cfg), ranks, None);
            assert!(r.device.is_some(), "{name}: not on a device");
            assert_eq!(
                r.last_iterations, host.last_iterations,
                "{name}, {ranks} ranks: iterations of the last step"
            );
            assert_eq!(
                r.iterations, host.iterations,
                "{name}, {ranks} ranks: mean iterations"
            );
            assert_eq!(
                r.change.to_bits(),
                host.change.to_bits(),
                "{name}, {ranks} ranks: change"
            );
            assert_eq!(r.hash, host.hash, "{name}, {ranks} ranks: field hash");
        }
    }
}

#[test]
fn a_gpu_run_continues_from_its_own_checkpoint() {
    if !have_device() {
        return;
    }
    let (_, base) = cases().swap_remove(2);
    let dir = std::env::temp_dir().join(format!("flow-device-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = |checkpoint_every| Output {
        dir: Some(dir.clone()),
        vtk: false,
        checkpoint_every,
        ..Default::default()
    };
    let whole = report(
        &Config {
            steps: 5,
            ..base.clone()
        },
        1,
        None,
    );
    let first = cuda(&Config {
        steps: 3,
        output: out(3),
        ..base.clone()
    });
    report(&first, 2, None);
    let second = cuda(&Config {
        steps: 2,
        output: out(0),
        ..base
    });
    let r = report(&second, 2, Some(&dir.join("flow_000003.chk")));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(r.final_step, 5);
    assert_eq!(
        r.hash, whole.hash,
        "the continued GPU run differs from the CPU's"
    );
}

#[test]
fn a_nan_on_the_gpu_stops_every_rank_with_the_step_the_solve_and_the_cell() {
    if !have_device() {
        return;
    }
    let cfg = Config {
        n: 16,
        bodies: Bodies::None,
        force: [0.0; 3],
        ..Config::default()
    };
    let bed = flow::bodies::Bed::new(&cfg).unwrap();
    let errors = comm::local::run(2, |c| {
        let geom = std::sync::Arc::new(flow::block_geometry(c, &cfg, &bed)?);
        let mut f = flow::solver::Flow::new(c, geom, flow::params(&cfg))?;
        let h = cfg.h();
        f.set_velocity(0, |x| {
            let at = [5.0 * h, 6.5 * h, 7.5 * h];
            if (0..3).all(|d| (x[d] - at[d]).abs() < 0.25 * h) {
                f64::NAN
            } else {
                0.0
            }
        });
        let placement = gpu::place::place(c, None)?;
        let dev = std::sync::Arc::new(placement.open()?);
        f.to_device(c, dev, placement, None)?;
        Ok::<_, anyhow::Error>(format!("{:#}", f.step(c).unwrap_err()))
    })
    .unwrap();
    for e in errors {
        assert!(
            e.contains("step 1: the momentum solve of component 0")
                && e.contains("the right-hand side is not finite")
                && e.contains("[5, 6, 7]"),
            "{e}"
        );
    }
}
