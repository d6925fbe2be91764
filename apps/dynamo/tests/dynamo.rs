//! Tests of the dynamo against analytic results: the conduction state, free
//! decay modes (roots of spherical Bessel functions), the energy integrals
//! against a direct quadrature on the grid; bit-identity across rank counts,
//! process grids and restarts; errors.

use anyhow::Result;
use appkit::app::Report as _;
use comm::Communicator;
use dynamo::config::{Config, Initial};
use dynamo::init::Potential;
use num_complex::Complex64;
use std::f64::consts::PI;

fn small() -> Config {
    Config {
        nr: 17,
        ntheta: 16,
        diag_every: 5,
        ..Config::default()
    }
}

fn on<R: Send>(ranks: usize, f: impl Fn(&dyn Communicator) -> Result<R> + Sync) -> Vec<R> {
    comm::local::run(ranks, |c| f(c).map_err(|e| format!("{e:#}"))).unwrap()
}

// Spherical Bessel functions of the first and second kind, l = 0, 1, 2.
fn j(l: usize, x: f64) -> f64 {
    let (s, c) = x.sin_cos();
    match l {
        0 => s / x,
        1 => s / (x * x) - c / x,
        2 => (3.0 / (x * x) - 1.0) * s / x - 3.0 * c / (x * x),
        _ => unreachable!(),
    }
}

fn y(l: usize, x: f64) -> f64 {
    let (s, c) = x.sin_cos();
    match l {
        0 => -c / x,
        1 => -c / (x * x) - s / x,
        2 => -(3.0 / (x * x) - 1.0) * c / x - 3.0 * s / (x * x),
        _ => unreachable!(),
    }
}

/// The smallest root above 0.5 of `det(k)`, by a scan and bisection.
fn first_root(det: impl Fn(f64) -> f64) -> f64 {
    let mut a = 0.5;
    let h = 0.01;
    while det(a).signum() == det(a + h).signum() {
        a += h;
        assert!(a < 50.0, "no root found");
    }
    let mut b = a + h;
    for _ in 0..100 {
        let m = 0.5 * (a + b);
        if det(a).signum() == det(m).signum() {
            a = m;
        } else {
            b = m;
        }
    }
    0.5 * (a + b)
}

/// No rotation, no buoyancy: the free decay of one mode.
fn decay_config(magnetic: bool) -> Config {
    Config {
        ekman: 1e12,
        rayleigh: 0.0,
        magnetic_prandtl: magnetic.then_some(1.0),
        initial: Initial::Conduction,
        nr: 25,
        ..small()
    }
}

/// Steps a run from a profile of one mode and returns the ratio of the
/// mode's amplitude (its value at mid-depth) after `steps` steps of `dt`.
fn decay(
    cfg: &Config,
    what: Potential,
    l: usize,
    profile: &(dyn Fn(f64) -> f64 + Sync),
    steps: usize,
    dt: f64,
) -> f64 {
    let out = on(1, |c| {
        let mut s = dynamo::build(c, cfg)?;
        dynamo::initialise(&mut s, cfg)?;
        s.set_temperature_boundaries()?;
        let r = s.radial().r().to_vec();
        let amp = 1e-3;
        let v: Vec<Complex64> = r
            .iter()
            .map(|&x| Complex64::new(amp * profile(x), 0.0))
            .collect();
        s.set_mode(what, l, 0, &v)?;
        let mid = r.len() / 2;
        let before = s.mode(what, l, 0).unwrap()[mid].re;
        for _ in 0..steps {
            s.step(c, |_| Ok(dt))?;
        }
        Ok(s.mode(what, l, 0).unwrap()[mid].re / before)
    });
    out[0]
}

/// The relative error allowed after `steps` steps of a decay at rate `z / dt`:
/// Crank-Nicolson's amplification `(1 - z/2) / (1 + z/2)` differs from
/// `exp(-z)` by `z^3 / 12` per step (`z = rate dt`), plus 1e-10 for the
/// Chebyshev error of the profile (~1e-12 at nr = 25) and the nonlinear
/// terms (relative size ~ the amplitude 1e-3 squared, on other modes). A
/// wrong operator changes the rate by percents.
fn bound(rate: f64, dt: f64, steps: usize) -> f64 {
    let z = rate * dt;
    1.5 * steps as f64 * z.powi(3) / 12.0 + 1e-10
}

#[test]
fn toroidal_velocity_decays_at_the_bessel_rate() {
    let cfg = decay_config(false);
    let (ri, ro) = (7.0 / 13.0, 20.0 / 13.0);
    // Z = r f, f = a j_1(k r) + b y_1(k r), Z = 0 at both walls.
    let k = first_root(|k| j(1, k * ri) * y(1, k * ro) - j(1, k * ro) * y(1, k * ri));
    let (a, b) = (y(1, k * ri), -j(1, k * ri));
    let profile = move |r: f64| r * (a * j(1, k * r) + b * y(1, k * r));
    let (steps, dt) = (200, 1e-4);
    let ratio = decay(&cfg, Potential::Z, 1, &profile, steps, dt);
    let exact = (-k * k * steps as f64 * dt).exp();
    assert!(
        (ratio / exact - 1.0).abs() < bound(k * k, dt, steps),
        "ratio {ratio}, exp(-k^2 t) = {exact}, k = {k}"
    );
}

#[test]
fn poloidal_field_decays_at_the_bessel_rate() {
    let cfg = decay_config(true);
    let (ri, ro) = (7.0 / 13.0, 20.0 / 13.0);
    // G = r f, f = a j_1 + b y_1; potential field outside (G' + G/r = 0 at
    // ro, i.e. f matches j_0 / y_0 there) and an insulating inner core
    // (G' - 2G/r = 0 at ri, i.e. f matches j_2 / y_2 there).
    let k = first_root(|k| j(0, k * ro) * y(2, k * ri) - y(0, k * ro) * j(2, k * ri));
    let (a, b) = (y(0, k * ro), -j(0, k * ro));
    let profile = move |r: f64| r * (a * j(1, k * r) + b * y(1, k * r));
    let (steps, dt) = (200, 1e-4);
    let ratio = decay(&cfg, Potential::G, 1, &profile, steps, dt);
    let exact = (-k * k * steps as f64 * dt).exp(); // Pm = 1
    assert!(
        (ratio / exact - 1.0).abs() < bound(k * k, dt, steps),
        "ratio {ratio}, exp(-k^2 t) = {exact}, k = {k}"
    );
}

#[test]
fn conduction_state_stays_steady() {
    let cfg = Config {
        initial: Initial::Conduction,
        nr: 25,
        ..small()
    };
    let (ri, ro) = (7.0 / 13.0, 20.0 / 13.0);
    let out = on(2, |c| {
        let mut s = dynamo::build(c, &cfg)?;
        dynamo::initialise(&mut s, &cfg)?;
        s.set_temperature_boundaries()?;
        for _ in 0..50 {
            s.step(c, |_| Ok(1e-4))?;
        }
        let e = s.energies(c)?;
        let t = s.mode(Potential::T, 0, 0);
        let r = s.radial().r().to_vec();
        Ok((
            e.ekin,
            t.map(|t| {
                t.iter()
                    .zip(&r)
                    .map(|(v, &x)| (v.re / (4.0 * PI).sqrt() - (ro * ri / x - ri)).abs())
                    .fold(0.0, f64::max)
            }),
        ))
    });
    for (ekin, err) in out {
        // The conduction profile is set as the (0, 0) mode exactly, so no
        // other mode is ever non-zero and the fluid stays exactly at rest.
        assert_eq!(ekin, 0.0, "the fluid must stay at rest");
        // 1/r is approximated by a degree-24 polynomial to ~(27/13 +
        // sqrt((27/13)^2 - 1))^-24 ~ 1e-14; 1e-11 leaves room for the
        // rounding of 50 solves.
        if let Some(err) = err {
            assert!(err < 1e-11, "conduction profile drifted by {err}");
        }
    }
}

#[test]
fn energies_equal_a_direct_quadrature() {
    let cfg = Config {
        magnetic_prandtl: Some(2.0),
        initial: Initial::Conduction,
        ..small()
    };
    let out = on(1, |c| {
        let mut s = dynamo::build(c, &cfg)?;
        let r = s.radial().r().to_vec();
        let (ri, ro) = (r[r.len() - 1], r[0]);
        // Smooth profiles vanishing at the walls (what the potentials of
        // no-slip flows look like), several degrees and orders.
        let bump = |x: f64, p: i32| ((x - ri) * (ro - x)).powi(p);
        for (what, l, m, p, c0) in [
            (Potential::W, 1, 0, 2, Complex64::new(0.7, 0.0)),
            (Potential::W, 3, 2, 2, Complex64::new(0.2, -0.4)),
            (Potential::Z, 2, 1, 1, Complex64::new(-0.3, 0.5)),
            (Potential::Z, 1, 0, 1, Complex64::new(0.9, 0.0)),
            (Potential::G, 2, 0, 2, Complex64::new(0.4, 0.0)),
            (Potential::G, 4, 3, 1, Complex64::new(0.1, 0.3)),
            (Potential::H, 3, 1, 1, Complex64::new(0.6, -0.2)),
        ] {
            let v: Vec<Complex64> = r.iter().map(|&x| c0 * bump(x, p)).collect();
            s.set_mode(what, l, m, &v)?;
        }
        let e = s.energies(c)?;
        s.to_grid()?;
        let (gs, gt, gp) = s.grid_fields();
        let sht = s.dist().sht();
        let (nt, np) = (sht.ntheta(), sht.nphi());
        let gl = r.len() * nt * np;
        let w = s.radial().clenshaw_curtis_weights();
        let (mut ku, mut kb) = (0.0, 0.0);
        for (k, &rk) in r.iter().enumerate() {
            for jj in 0..nt {
                // Gauss weights integrate over cos theta on [-1, 1].
                let wa = w[k] * rk * rk * sht.weights()[jj] * 2.0 * PI / np as f64;
                for q in 0..np {
                    let p = (k * nt + jj) * np + q;
                    ku += wa * (gs[p].powi(2) + gt[p].powi(2) + gp[p].powi(2));
                    kb += wa
                        * (gs[4 * gl + p].powi(2)
                            + gt[3 * gl + p].powi(2)
                            + gp[3 * gl + p].powi(2));
                }
            }
        }
        let vol = 4.0 * PI / 3.0 * (ro.powi(3) - ri.powi(3));
        Ok((e, ku / (2.0 * vol), kb / (2.0 * vol * cfg.ekman * 2.0)))
    });
    let (e, ku, kb) = out[0];
    assert!(e.ekin > 0.01 && e.emag > 1.0, "{e:?}");
    assert!(
        (e.ekin / ku - 1.0).abs() < 1e-12,
        "Ekin {} vs quadrature {ku}",
        e.ekin
    );
    assert!(
        (e.emag / kb - 1.0).abs() < 1e-12,
        "Emag {} vs quadrature {kb}",
        e.emag
    );
    assert!((e.ekin_pol + e.ekin_tor - e.ekin).abs() < 1e-12 * e.ekin);
    // Only (1,0) of W and (1,0) of Z are axisymmetric velocity modes.
    assert!(e.ekin_pol_axi > 0.0 && e.ekin_pol_axi < e.ekin_pol);
}

fn hash_of(cfg: &Config, ranks: usize, steps: usize) -> u64 {
    let cfg = Config {
        steps,
        ..cfg.clone()
    };
    on(ranks, |c| {
        let mut s = dynamo::build(c, &cfg)?;
        dynamo::initialise(&mut s, &cfg)?;
        s.set_temperature_boundaries()?;
        let mut dt = cfg.dt;
        for _ in 0..steps {
            let (st, t) = (s.steps(), s.time());
            dt = s.step(c, |lim| dynamo::next_dt(&cfg, dt, lim, st + 1, t))?;
        }
        dynamo::state_hash(c, &s)
    })[0]
}

#[test]
fn bit_identical_on_every_process_grid_and_protocol() {
    let base = Config {
        magnetic_prandtl: Some(5.0),
        ..small()
    };
    let reference = hash_of(&base, 1, 6);
    for (ranks, pi_theta, theta, l, queue) in [
        (2, 1, "auto", "a2av", 1),
        (3, 1, "auto", "a2aw", 2),
        (2, 2, "a2aw", "p2p", 1),
        (4, 2, "a2ap", "pipelined", 3),
        (4, 4, "p2p", "a2av", 4),
    ] {
        let cfg = Config {
            pi_theta,
            theta_protocol: theta.parse().unwrap(),
            l_protocol: l.parse().unwrap(),
            queue,
            ..base.clone()
        };
        assert_eq!(
            hash_of(&cfg, ranks, 6),
            reference,
            "{ranks} ranks, pi_theta {pi_theta}, {theta}/{l}, queue {queue}"
        );
    }
}

#[test]
fn a_restart_continues_bit_for_bit_on_another_rank_count() {
    let dir = std::env::temp_dir().join(format!("dynamo-restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for scheme in ["cnab2", "sbdf3", "ars222"] {
        let cfg = Config {
            magnetic_prandtl: Some(5.0),
            scheme: scheme.parse().unwrap(),
            ..small()
        };
        let whole = hash_of(&cfg, 2, 8);
        let first = Config {
            steps: 4,
            output: dynamo::config::Output {
                dir: Some(dir.join(scheme)),
                vtk: false,
                diagnostics: false,
                ..Default::default()
            },
            ..cfg.clone()
        };
        on(1, |c| dynamo::run(c, &first, None, false));
        let ck = dir.join(scheme).join("dynamo_00000004.chk");
        let second = Config {
            steps: 4,
            output: dynamo::config::Output {
                dir: Some(dir.join(format!("{scheme}-b"))),
                vtk: false,
                diagnostics: false,
                ..Default::default()
            },
            pi_theta: 2,
            ..cfg.clone()
        };
        let r = on(4, |c| dynamo::run(c, &second, Some(&ck), false));
        let h = u64::from_str_radix(&r[0].state_hash, 16).unwrap();
        assert_eq!(
            h, whole,
            "{scheme}: restarted run differs from the uninterrupted one"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn errors_name_the_value() {
    let err = |cfg: &Config, ranks: usize| -> String {
        let r = comm::local::run(ranks, |c| {
            dynamo::build(c, cfg)
                .map(|_| ())
                .map_err(|e| format!("{e:#}"))
        });
        match r {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        }
    };
    let few = Config { nr: 5, ..small() };
    let e = err(&few, 6);
    assert!(e.contains("nr = 5") && e.contains("6 radial ranks"), "{e}");
    let e = err(
        &Config {
            pi_theta: 4,
            ..small()
        },
        6,
    );
    assert!(e.contains("pi_theta = 4"), "{e}");

    // A fixed dt above the CFL limit.
    let fixed = Config {
        adaptive: false,
        dt: 1e-4,
        dtmax: 1e-4,
        courant: 1e-6,
        ..small()
    };
    let r = comm::local::run(1, |c| {
        let mut s = dynamo::build(c, &fixed).map_err(|e| e.to_string())?;
        dynamo::initialise(&mut s, &fixed).map_err(|e| e.to_string())?;
        let mut dt = fixed.dt;
        for _ in 0..3 {
            let (st, t) = (s.steps(), s.time());
            dt = s
                .step(c, |lim| dynamo::next_dt(&fixed, dt, lim, st + 1, t))
                .map_err(|e| format!("{e:#}"))?;
        }
        Ok::<_, String>(())
    });
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("dt = 1e-4") && e.contains("stability limit") && e.contains("step 2"),
        "{e}"
    );

    // A NaN stops the run with the step and the place.
    let r = comm::local::run(2, |c| {
        let cfg = small();
        let mut s = dynamo::build(c, &cfg).map_err(|e| e.to_string())?;
        dynamo::initialise(&mut s, &cfg).map_err(|e| e.to_string())?;
        s.step(c, |_| Ok(1e-4)).map_err(|e| e.to_string())?;
        let nr = cfg.nr;
        let mut v = vec![Complex64::new(0.0, 0.0); nr];
        v[nr / 2] = Complex64::new(f64::NAN, 0.0);
        s.set_mode(Potential::Z, 2, 1, &v)
            .map_err(|e| e.to_string())?;
        s.step(c, |_| Ok(1e-4)).map_err(|e| format!("{e:#}"))?;
        Ok::<_, String>(())
    });
    let e = r.unwrap_err().to_string();
    assert!(e.contains("non-finite") && e.contains("step 2"), "{e}");
}

#[test]
fn a_checkpoint_of_another_resolution_is_refused() {
    let dir = std::env::temp_dir().join(format!("dynamo-ckres-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = Config {
        steps: 1,
        output: dynamo::config::Output {
            dir: Some(dir.clone()),
            vtk: false,
            diagnostics: false,
            ..Default::default()
        },
        ..small()
    };
    on(1, |c| dynamo::run(c, &cfg, None, false));
    let ck = dir.join("dynamo_00000001.chk");
    let other = Config {
        nr: 21,
        ..cfg.clone()
    };
    let r = comm::local::run(1, |c| {
        dynamo::run(c, &other, Some(&ck), false).map_err(|e| format!("{e:#}"))
    });
    let e = r.unwrap_err().to_string();
    assert!(e.contains("nr = 17") && e.contains("nr = 21"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn output_to(dir: &std::path::Path, diagnostics: bool) -> dynamo::config::Output {
    dynamo::config::Output {
        dir: Some(dir.to_path_buf()),
        vtk: false,
        diagnostics,
        ..Default::default()
    }
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("dynamo-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn a_plot_rank_0_cannot_write_stops_every_rank() {
    // A folder where the plot goes: rank 0 fails to write it at the end,
    // and rank 1 must stop with its reason, not wait in the state hash.
    let dir = temp_dir("plot");
    std::fs::create_dir_all(dir.join("energies.png")).unwrap();
    let cfg = Config {
        steps: 2,
        diag_every: 1,
        output: output_to(&dir, true),
        ..small()
    };
    let errors = comm::local::run(2, |c| {
        let r = dynamo::run(c, &cfg, None, false);
        Ok::<_, String>(r.err().map(|e| format!("{e:#}")).unwrap_or_default())
    })
    .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(errors[0], errors[1]);
    assert!(
        errors[0].contains("plotting the energies") && errors[0].contains("energies.png"),
        "{errors:?}"
    );
}

#[test]
fn a_run_to_end_time_takes_the_steps_that_reach_it() {
    // 25 additions of 1e-4 give 0.0024999999999999996 < 0.0025.
    let dir = temp_dir("end-time");
    let cfg = Config {
        adaptive: false,
        steps: 1000,
        end_time: Some(0.0025),
        diag_every: 100,
        output: output_to(&dir, true),
        ..small()
    };
    assert_eq!(dynamo::planned_steps(&cfg, 0.0, cfg.dt, 0), 25);
    let r = on(1, |c| dynamo::run(c, &cfg, None, false));
    assert_eq!(
        (r[0].steps, r[0].final_step),
        (25, 25),
        "{}",
        r[0].summary()
    );
    assert_eq!(r[0].dt, 1e-4);
    assert_eq!(r[0].last.dt, 1e-4);
    assert!((r[0].time - 0.0025).abs() < 1e-15, "t = {}", r[0].time);
    assert!(dir.join("dynamo_00000025.chk").is_file());
    assert!(!dir.join("dynamo_00000026.chk").exists());
    let csv = std::fs::read_to_string(dir.join("dynamo.csv")).unwrap();
    let last = csv.lines().last().unwrap();
    assert!(
        last.starts_with("25,") && last.contains(",1.000000000000e-4,"),
        "{last}"
    );
    // An end_time between steps: the last step is shortened, the report
    // and the checkpoint keep the step size in use.
    let between = Config {
        end_time: Some(2.5e-4),
        output: output_to(&dir.join("b"), false),
        ..cfg.clone()
    };
    let r = on(1, |c| dynamo::run(c, &between, None, false));
    assert_eq!(r[0].steps, 3);
    assert!((r[0].last.dt - 5e-5).abs() < 1e-15, "{}", r[0].last.dt);
    assert_eq!(r[0].dt, 1e-4);
    let ck = dir.join("b").join("dynamo_00000003.chk");
    let extra = on(1, |c| {
        let mut s = dynamo::build(c, &between)?;
        dynamo::checkpoint::read(&mut s, &between, &ck)
    });
    assert_eq!(extra[0].dt, 1e-4);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_progress_bar_counts_the_steps_to_end_time() {
    let cfg = Config::from_file(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/case0.toml"
    )))
    .unwrap();
    assert_eq!(dynamo::planned_steps(&cfg, 0.0, cfg.dt, 0), 10_000);
    assert_eq!(dynamo::planned_steps(&cfg, 0.5, cfg.dt, 5000), 5000);
    let mut t = 0.0;
    for _ in 0..10_000 {
        t += 1e-4;
    }
    assert!(t < 1.0);
    assert_eq!(dynamo::planned_steps(&cfg, t, cfg.dt, 10_000), 0);
    assert!(dynamo::reached_end(t, cfg.end_time, 10_000));
    assert!(!dynamo::reached_end(1.0 - 1e-4, cfg.end_time, 9_999));
    let steps = Config {
        end_time: None,
        steps: 300,
        ..cfg.clone()
    };
    assert_eq!(dynamo::planned_steps(&steps, 0.0, 1e-4, 0), 300);
}

#[test]
fn a_fixed_step_restart_runs_with_the_configured_dt() {
    let dir = temp_dir("restart-dt");
    let cfg = Config {
        adaptive: false,
        initial: Initial::Conduction,
        steps: 2,
        output: output_to(&dir, false),
        ..small()
    };
    on(1, |c| dynamo::run(c, &cfg, None, false));
    let ck = dir.join("dynamo_00000002.chk");
    let smaller = Config {
        dt: 5e-5,
        dtmax: 5e-5,
        output: output_to(&dir.join("b"), false),
        ..cfg.clone()
    };
    let r = on(1, |c| dynamo::run(c, &smaller, Some(&ck), false));
    assert_eq!(r[0].dt, 5e-5, "{}", r[0].summary());
    assert!((r[0].time - 3e-4).abs() < 1e-15, "t = {}", r[0].time);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_restart_into_the_same_folder_continues_the_time_series() {
    let dir = temp_dir("restart-csv");
    let cfg = Config {
        steps: 6,
        diag_every: 2,
        output: dynamo::config::Output {
            checkpoint_every: 4,
            ..output_to(&dir, true)
        },
        ..small()
    };
    on(1, |c| dynamo::run(c, &cfg, None, false));
    let csv = dir.join("dynamo.csv");
    let whole = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(whole.lines().count(), 5, "{whole}"); // header, steps 0, 2, 4, 6
                                                     // From step 4: the row of step 6 is replaced by the same one.
    let again = Config {
        steps: 2,
        ..cfg.clone()
    };
    let ck = dir.join("dynamo_00000004.chk");
    on(2, |c| dynamo::run(c, &again, Some(&ck), false));
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), whole);
    // A file of other columns is refused and kept.
    std::fs::write(&csv, "a,b\n1,2\n").unwrap();
    let r = comm::local::run(2, |c| {
        dynamo::run(c, &again, Some(&ck), false).map_err(|e| format!("{e:#}"))
    });
    let e = r.unwrap_err().to_string();
    assert!(e.contains("dynamo.csv") && e.contains("\"a,b\""), "{e}");
    assert_eq!(std::fs::read_to_string(&csv).unwrap(), "a,b\n1,2\n");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_blow_up_is_reported_as_an_overflow() {
    let r = comm::local::run(1, |c| {
        let cfg = Config {
            initial: Initial::Conduction,
            ..small()
        };
        let mut s = dynamo::build(c, &cfg).map_err(|e| e.to_string())?;
        dynamo::initialise(&mut s, &cfg).map_err(|e| e.to_string())?;
        // Finite, but its square is not.
        let nr = cfg.nr;
        let mut v = vec![Complex64::new(0.0, 0.0); nr];
        v[nr / 2] = Complex64::new(1e200, 0.0);
        s.set_mode(Potential::Z, 2, 1, &v)
            .map_err(|e| e.to_string())?;
        s.step(c, |_| Ok(1e-4)).map_err(|e| format!("{e:#}"))?;
        Ok::<_, String>(())
    });
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("overflowed (blow-up)")
            && e.contains("step 1")
            && !e.contains("current density"),
        "{e}"
    );
}

#[test]
fn a_json_report_records_the_configuration_and_a_missing_folder_is_refused() {
    let dir = temp_dir("json");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out");
    let bin = env!("CARGO_BIN_EXE_dynamo");
    let run = std::process::Command::new(bin)
        .args([
            "--nr", "17", "--ntheta", "16", "--steps", "1", "--ranks", "1",
        ])
        .args(["--no-vtk", "--quiet", "-o"])
        .arg(&out)
        .arg("--json")
        .arg(dir.join("no/such/report.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(
        err.contains("no/such") && err.contains("does not exist"),
        "{err}"
    );
    assert!(!out.exists(), "the run started");
    // Into a folder that exists: the report records the configuration.
    let report = dir.join("report.json");
    let run = std::process::Command::new(bin)
        .args([
            "--nr", "17", "--ntheta", "16", "--steps", "1", "--ranks", "1",
        ])
        .args(["--no-vtk", "--quiet", "--json"])
        .arg(&report)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let config = &json["config"];
    assert_eq!(
        (&config["nr"], &config["ntheta"]),
        (&17.into(), &16.into()),
        "{json}"
    );
    assert_eq!(config["steps"], 1, "{json}");
    assert_eq!(config["ekman"], Config::default().ekman, "{json}");
    assert_eq!(json["steps"], 1, "{json}");
}

/// The documented benchmark command: the report inside the output folder
/// the run itself creates (refused before the shell knew of the folder).
#[test]
fn a_json_report_may_go_into_the_output_folder_the_run_creates() {
    let dir = temp_dir("json-in-output");
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.join("new/out");
    let report = out.join("report.json");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_dynamo"))
        .args([
            "--nr", "17", "--ntheta", "16", "--steps", "2", "--ranks", "2",
        ])
        .args(["--vtk-every", "1", "--checkpoint-every", "5", "-q", "-o"])
        .arg(&out)
        .arg("--json")
        .arg(&report)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        !stdout.contains("wrote"),
        "--quiet lists no files: {stdout}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    // Snapshots at steps 0 (the initial state), 1 and 2; one checkpoint,
    // after the last step (5 is past the run's end).
    let files: Vec<String> = json["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    let chk: Vec<&String> = files.iter().filter(|f| f.ends_with(".chk")).collect();
    assert_eq!(chk.len(), 1, "{files:?}");
    assert!(chk[0].ends_with("dynamo_00000002.chk"), "{files:?}");
    for step in 0..=2 {
        let name = format!("{step:08}");
        assert!(
            files
                .iter()
                .any(|f| f.ends_with(".pvts") && f.contains(&name)),
            "no snapshot of step {step}: {files:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
