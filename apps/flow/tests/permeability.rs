//! Stokes flow through a simple cubic array of spheres (Zick and Homsy
//! 1982), rank independence with every communication option, and the
//! errors of bad input.

use std::sync::Arc;

use flow::config::{Bodies, Config, Method};

fn report(cfg: &Config, ranks: usize) -> flow::Report {
    let (g, n, a) = flow::bodies::build(cfg).unwrap();
    let g = Arc::new(g);
    comm::local::run(ranks, |c| flow::run(c, cfg, g.clone(), (n, a), None, false))
        .unwrap()
        .swap_remove(0)
}

#[test]
fn simple_cubic_drag_matches_zick_and_homsy() {
    // c = 0.125: K = 4.292. At 16 cells per box (10 per diameter) both
    // methods are measured 1 % low and converge at second order (the
    // benchmark has 16, 32, 64); the acceptance bound is 2 %.
    for method in [Method::CutCell, Method::GhostCell] {
        let cfg = Config {
            n: 16,
            method,
            steady_tol: 1e-6,
            ..Config::default()
        };
        let r = report(&cfg, 2);
        assert!(r.steady, "{method:?}: not steady after {} steps", r.steps);
        let k = r.drag_coefficient.unwrap();
        assert!((k / 4.292 - 1.0).abs() < 0.02, "{method:?}: K = {k}");
        // The projection leaves a divergence at the solver tolerance.
        assert!(
            r.divergence < 1e-8,
            "{method:?}: divergence {}",
            r.divergence
        );
        let perm = r.permeability.unwrap();
        assert!((perm - 2.0 / (9.0 * 0.125 * k)).abs() < 1e-12 * perm);
    }
}

#[test]
fn same_bits_on_every_rank_count_and_option() {
    for method in [Method::CutCell, Method::GhostCell] {
        let base = Config {
            n: 16,
            method,
            steps: 5,
            steady_tol: 0.0,
            ..Config::default()
        };
        let reference = report(&base, 1).hash;
        for (ranks, overlap, ca) in [
            (2, true, true),
            (2, false, false),
            (4, true, false),
            (8, false, true),
        ] {
            let cfg = Config {
                overlap,
                comm_avoiding: ca,
                ..base.clone()
            };
            assert_eq!(
                report(&cfg, ranks).hash,
                reference,
                "{method:?}: {ranks} ranks, overlap {overlap}, CA {ca}"
            );
        }
    }
}

#[test]
fn bad_geometry_is_named() {
    let err = |cfg: Config| {
        flow::bodies::build(&cfg)
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap()
    };
    let e = err(Config {
        n: 8,
        solid_fraction: 0.01,
        ..Config::default()
    });
    assert!(
        e.contains("cells per diameter") && e.contains("n >= "),
        "{e}"
    );
    let e = err(Config {
        solid_fraction: 0.6,
        ..Config::default()
    });
    assert!(e.contains("0.6"), "{e}");
    let dir = std::env::temp_dir().join(format!("flow-packing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("bed.txt");
    std::fs::write(&p, "0.5 0.5 0.5 0.1\n0.2 0.2 x 0.1\n").unwrap();
    let e = err(Config {
        bodies: Bodies::File,
        packing: Some(p.clone()),
        ..Config::default()
    });
    assert!(e.contains("line 2"), "{e}");
    std::fs::write(&p, "0.5 0.5 0.5 0.2\n0.6 0.5 0.5 0.2\n").unwrap();
    let e = err(Config {
        bodies: Bodies::File,
        packing: Some(p.clone()),
        ..Config::default()
    });
    assert!(e.contains("overlap"), "{e}");
    std::fs::write(&p, "0.5 0.5 0.5 0.7\n").unwrap();
    let e = err(Config {
        bodies: Bodies::File,
        packing: Some(p),
        ..Config::default()
    });
    assert!(e.contains("line 1") && e.contains("diameter 1.4"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `base` for 6 steps on `ranks[0]` ranks, and for 3 steps on
/// `ranks[1]` ranks, writing a checkpoint, then 3 more from it on
/// `ranks[2]` ranks; asserts that both end with the same hash.
fn check_restart(base: Config, label: &str, ranks: [usize; 3]) {
    let dir = std::env::temp_dir().join(format!("flow-restart-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let whole = report(
        &Config {
            steps: 6,
            ..base.clone()
        },
        ranks[0],
    )
    .hash;
    let first = Config {
        steps: 3,
        output: flow::config::Output {
            dir: Some(dir.clone()),
            vtk: false,
            ..Default::default()
        },
        ..base.clone()
    };
    report(&first, ranks[1]);
    let ck = dir.join("flow_000003.chk");
    let second = Config { steps: 3, ..base };
    let (g, n, a) = flow::bodies::build(&second).unwrap();
    let g = Arc::new(g);
    let r = comm::local::run(ranks[2], |c| {
        flow::run(c, &second, g.clone(), (n, a), Some(&ck), false)
    })
    .unwrap()
    .swap_remove(0);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        r.hash, whole,
        "{label}: the restarted run differs from the uninterrupted one"
    );
}

#[test]
fn a_restart_continues_bit_for_bit_on_another_rank_count() {
    let base = Config {
        n: 16,
        steady_tol: 0.0,
        ..Config::default()
    };
    check_restart(base, "stokes", [2, 1, 4]);
}

#[test]
fn a_navier_stokes_restart_continues_bit_for_bit() {
    let base = Config {
        n: 16,
        bodies: Bodies::None,
        initial: flow::config::Initial::TaylorGreen,
        navier_stokes: true,
        nu: 0.1,
        dt: Some(0.002),
        force: [0.0; 3],
        steady_tol: 0.0,
        ..Config::default()
    };
    check_restart(base, "navier-stokes", [1, 2, 4]);
}
