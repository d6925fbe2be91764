//! End-to-end tests on in-process ranks (small grids, a few seconds).

use pfc::config::{Config, Initial, PerAxis, TomlFile};
use pfc::{Diagnostics, Report, Solver};
use std::path::{Path, PathBuf};

fn small(initial: Initial) -> Config {
    Config {
        periods: PerAxis::All(3),
        points_per_period: 8,
        initial,
        steps: 20,
        // A seed of one period fits the 3-period box (the noise start
        // refuses the key).
        seed_radius: if initial == Initial::Seed {
            1.0
        } else {
            Config::default().seed_radius
        },
        ..Config::default()
    }
}

fn run(ranks: usize, cfg: &Config, restart: Option<&Path>) -> Result<Report, String> {
    comm::local::run(ranks, |c| {
        pfc::run(c, cfg, restart, false).map_err(|e| format!("{e:#}"))
    })
    .map(|mut r| r.swap_remove(0))
    .map_err(|e| e.reason)
}

/// Diagnostics after each of `steps` steps (rank 0's copy).
fn history(ranks: usize, cfg: &Config, steps: usize) -> Vec<Diagnostics> {
    comm::local::run(ranks, |c| {
        let mut s = Solver::new(c, cfg, None)?;
        let mut out = vec![s.diagnostics()?];
        for _ in 0..steps {
            assert!(s.step()?);
            out.push(s.diagnostics()?);
        }
        Ok::<_, anyhow::Error>(out)
    })
    .unwrap()
    .swap_remove(0)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pfc-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn mean_density_is_conserved() {
    let cfg = Config {
        noise_amplitude: 0.2,
        ..small(Initial::Noise)
    };
    let h = history(2, &cfg, 50);
    let m0 = h[0].mean_density;
    // The noise start adds zero-mean noise of amplitude 0.2 to the mean
    // density; its sample mean over the grid stays well inside 0.01.
    assert!((m0 - cfg.mean_density).abs() < 0.01, "{m0}");
    for d in &h {
        // The k = 0 mode is left alone by the step: only the rounding of
        // the transforms and the exact mean remain (a few eps per step).
        assert!(
            (d.mean_density - m0).abs() <= 1e-12 * m0.abs(),
            "step {}: mean {} drifted from {m0}",
            d.step,
            d.mean_density
        );
    }
    // The field did change.
    assert!((h[50].free_energy - h[0].free_energy).abs() > 1e-4);
}

#[test]
fn free_energy_decreases_for_a_seed() {
    let cfg = Config {
        dt: 0.1,
        ..small(Initial::Seed)
    };
    let h = history(2, &cfg, 50);
    for w in h[5..].windows(2) {
        assert!(
            w[1].free_energy <= w[0].free_energy + 1e-13 * w[0].free_energy.abs(),
            "free energy rose at step {}: {} -> {}",
            w[1].step,
            w[0].free_energy,
            w[1].free_energy
        );
    }
    assert!(h[50].free_energy < h[5].free_energy - 1e-6);
}

#[test]
fn every_rank_count_gives_the_same_bits() {
    let cfg = small(Initial::Noise);
    let base = run(1, &cfg, None).unwrap();
    for ranks in 2..=4 {
        let r = run(ranks, &cfg, None).unwrap();
        assert_eq!(r.hash, base.hash, "{ranks} ranks (grid {:?})", r.grid);
        assert_eq!(
            r.last.free_energy.to_bits(),
            base.last.free_energy.to_bits()
        );
        assert_eq!(
            r.last.mean_density.to_bits(),
            base.last.mean_density.to_bits()
        );
    }
    // The hash sees a change of the field.
    let other = run(1, &Config { seed: 2, ..cfg }, None).unwrap();
    assert_ne!(other.hash, base.hash);
}

#[test]
fn restart_continues_bit_identically_on_another_rank_count() {
    let dir = tmp("restart");
    let mut cfg = small(Initial::Seed);
    cfg.steps = 16;
    let whole = run(2, &cfg, None).unwrap();
    let mut half = cfg.clone();
    half.steps = 8;
    half.output.dir = Some(dir.clone());
    half.output.checkpoint_every = 8;
    half.output.vtk_every = 8;
    let first = run(3, &half, None).unwrap();
    let ck = dir.join("pfc_000008.chk");
    assert!(first.files.iter().any(|f| f.ends_with("pfc_000008.chk")));
    assert!(dir.join("pfc_000008.pvti").is_file());
    assert!(dir.join("pfc_000008_r0002.vti").is_file());
    let mut rest = cfg.clone();
    rest.steps = 8;
    for ranks in [1, 4] {
        let second = run(ranks, &rest, Some(&ck)).unwrap();
        assert_eq!(second.first.step, 8);
        assert_eq!(second.last.step, 16);
        assert_eq!(second.hash, whole.hash, "restart on {ranks} ranks");
        assert_eq!(
            second.last.free_energy.to_bits(),
            whole.last.free_energy.to_bits()
        );
    }
    // A checkpoint of another shape is refused with both shapes named.
    let mut bigger = rest.clone();
    bigger.periods = PerAxis::All(4);
    let e = run(2, &bigger, Some(&ck)).unwrap_err();
    assert!(
        e.contains("[24, 24, 24]") && e.contains("[32, 32, 32]"),
        "{e}"
    );
    // A missing checkpoint is named.
    let missing = dir.join("nope.chk");
    let e = run(1, &rest, Some(&missing)).unwrap_err();
    assert!(e.contains("nope.chk"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Amplitude of `cos(2 pi m . idx / n)` in the field after `steps` steps,
/// starting from `eps` times that mode.
fn mode_amplitude(m: [usize; 3], eps: f64, steps: usize, nonlinear: bool) -> (f64, f64) {
    let cfg = Config {
        mean_density: 0.0,
        dt: 0.5,
        ..small(Initial::Noise)
    };
    let n = cfg.shape();
    let phase = move |idx: [usize; 3]| {
        2.0 * std::f64::consts::PI
            * (0..3)
                .map(|a| (m[a] * idx[a]) as f64 / n[a] as f64)
                .sum::<f64>()
    };
    let amp = comm::local::run(2, |c| {
        let mut s = Solver::new(c, &cfg, None)?;
        s.set_field(|idx| eps * phase(idx).cos());
        s.set_nonlinear(nonlinear);
        for _ in 0..steps {
            s.step()?;
        }
        let (mut num, mut den) = (0.0, 0.0);
        s.for_each(|idx, v| {
            let c = phase(idx).cos();
            num += v * c;
            den += c * c;
        })?;
        let mut v = [num, den];
        c.allreduce_f64(&mut v, comm::ReduceOp::Sum)?;
        Ok::<_, anyhow::Error>(v[0] / v[1])
    })
    .unwrap()[0];
    let l = cfg.length();
    let k2: f64 = (0..3)
        .map(|a| (2.0 * std::f64::consts::PI * m[a] as f64 / l[a]).powi(2))
        .sum();
    let g = 1.0 / (1.0 + cfg.dt * k2 * (cfg.r + (1.0 - k2).powi(2)));
    (amp, eps * g.powi(steps as i32))
}

#[test]
fn single_modes_follow_the_discrete_linear_factor() {
    // k = 2 pi m / L with L = 3 a = 26.66: m = 4 gives k = 0.943 (inside
    // the unstable band for r = -0.25), m = (2, 2, 1) gives k = 0.707,
    // (3, 3, 3) gives k = 1.22 (growing) and (6, 1, 0) k = 1.43 (decaying).
    for m in [[4, 0, 0], [2, 2, 1], [3, 3, 3], [6, 1, 0], [0, 0, 9]] {
        let (got, want) = mode_amplitude(m, 0.1, 20, false);
        assert!(
            (got - want).abs() <= 1e-12 * want.abs() + 1e-15,
            "mode {m:?}: {got} vs {want}"
        );
        // With psi^3 on, a tiny amplitude follows the linear law too.
        let (got, want) = mode_amplitude(m, 1e-6, 20, true);
        assert!(
            (got - want).abs() <= 1e-9 * want.abs() + 1e-20,
            "mode {m:?} (nonlinear on): {got} vs {want}"
        );
    }
    // Growth and decay both occur.
    let (_, grow) = mode_amplitude([4, 0, 0], 1.0, 20, false);
    let (_, decay) = mode_amplitude([6, 1, 0], 1.0, 20, false);
    assert!(grow > 1.0 && decay < 1.0, "{grow} {decay}");
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let e = run(
        1,
        &Config {
            dt: 0.0,
            ..small(Initial::Seed)
        },
        None,
    )
    .unwrap_err();
    assert!(e.contains("dt must be positive"), "{e}");
    let e = run(
        1,
        &Config {
            periods: PerAxis::Each([2, 0, 2]),
            ..small(Initial::Seed)
        },
        None,
    )
    .unwrap_err();
    assert!(e.contains("periods must be positive"), "{e}");
    let e = Config::from_toml("steps = 3\n\nradius = 2\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("radius") && e.contains("line 3"), "{e}");
    // Not a checkpoint.
    let dir = tmp("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("junk.chk");
    std::fs::write(&p, b"hello").unwrap();
    let e = run(1, &small(Initial::Seed), Some(&p)).unwrap_err();
    assert!(e.contains("not a pfc checkpoint"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn example_config_parses_and_matches_the_defaults() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/pfc.toml");
    let c = Config::from_file(&p).unwrap();
    assert_eq!(c, Config::default());
}

#[test]
fn restart_into_the_same_folder_continues_the_csv() {
    let mut cfg = small(Initial::Noise);
    cfg.steps = 6;
    cfg.diag_every = 1;
    let whole_dir = tmp("csv-whole");
    let mut whole = cfg.clone();
    whole.output.dir = Some(whole_dir.clone());
    run(1, &whole, None).unwrap();
    let expected = std::fs::read_to_string(whole_dir.join("pfc.csv")).unwrap();
    assert_eq!(expected.lines().count(), 1 + 7, "{expected}");
    // A run that went past its checkpoint at step 3 (rows 0..=5), then a
    // restart from that checkpoint on another rank count into the same
    // folder: rows 4 and 5 are replaced, row 3 is not written twice.
    let dir = tmp("csv-restart");
    let mut first = whole.clone();
    first.steps = 5;
    first.output.dir = Some(dir.clone());
    first.output.checkpoint_every = 3;
    run(1, &first, None).unwrap();
    let mut rest = first.clone();
    rest.steps = 3;
    rest.output.checkpoint_every = 0;
    run(2, &rest, Some(&dir.join("pfc_000003.chk"))).unwrap();
    let got = std::fs::read_to_string(dir.join("pfc.csv")).unwrap();
    assert_eq!(got, expected);
    // A pfc.csv of other columns is refused and left as it is.
    let foreign = "a,b\n1,2\n";
    std::fs::write(dir.join("pfc.csv"), foreign).unwrap();
    let e = run(2, &rest, Some(&dir.join("pfc_000003.chk"))).unwrap_err();
    assert!(e.contains("pfc.csv") && e.contains("a,b"), "{e}");
    assert_eq!(
        std::fs::read_to_string(dir.join("pfc.csv")).unwrap(),
        foreign
    );
    std::fs::remove_dir_all(&whole_dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn json_into_a_missing_folder_is_refused_before_the_run() {
    let dir = tmp("json");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out");
    let json = dir.join("missing").join("r.json");
    // `PFC_BIN` where set (`cargo xtask gpu --bin-dir` runs these tests
    // away from the build's target folder), else this build's.
    let bin = std::env::var_os("PFC_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_pfc").into());
    let run = std::process::Command::new(bin)
        .args(["--ranks", "1", "--periods", "2", "--points-per-period", "4"])
        .args(["--steps", "1", "-q", "-o"])
        .arg(&out)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success(), "{stderr}");
    assert!(
        stderr.contains("--json") && stderr.contains(&dir.join("missing").display().to_string()),
        "{stderr}"
    );
    // Nothing ran: no summary, no output folder.
    assert!(
        run.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&run.stdout)
    );
    assert!(!out.exists());
    assert!(!json.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
