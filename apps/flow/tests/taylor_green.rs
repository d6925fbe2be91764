//! The Taylor-Green vortex (a 2D mode in a 3D periodic box, no bodies):
//! the discrete amplitude factor of the implicit diffusion step, the
//! analytic energy decay at second order in space, rank independence.

use std::f64::consts::PI;
use std::sync::Arc;

use flow::geometry::Geometry;
use flow::solver::{Flow, Params};
use multigrid::MgOptions;

fn params(nu: f64, dt: f64, ns: bool, tol: f64) -> Params {
    Params {
        length: 1.0,
        nu,
        dt,
        force: [0.0; 3],
        navier_stokes: ns,
        mg: MgOptions::default(),
        momentum_tol: tol,
        pressure_tol: tol,
        rotational: false,
    }
}

/// Runs `steps` steps of the mode `u = A sin(kx) cos(ky)`, `v = -A cos(kx)
/// sin(ky)` on `ranks` ranks; returns (energy ratio, max relative
/// deviation of u from `factor^steps u0` when `factor` is given, every
/// rank's owned u values).
fn run(n: usize, ranks: usize, p: Params, steps: usize, factor: Option<f64>) -> (f64, f64, u64) {
    let k = 2.0 * PI;
    let out = comm::local::run(ranks, |c| {
        let block = Flow::block(c, [n; 3])?;
        let region = ibm::Region::new(block, 1, [n; 3])?;
        let geom = Arc::new(Geometry::open([n; 3], 1.0 / n as f64, region));
        let mut f = Flow::new(c, geom, p)?;
        f.set_velocity(0, |x| (k * x[0]).sin() * (k * x[1]).cos());
        f.set_velocity(1, |x| -(k * x[0]).cos() * (k * x[1]).sin());
        let u0 = f.u[0].owned_values(0);
        let e0 = f.sums(c)?[3];
        for _ in 0..steps {
            f.step(c)?;
        }
        let e1 = f.sums(c)?[3];
        let u1 = f.u[0].owned_values(0);
        let dev = match factor {
            Some(g) => {
                let gn = g.powi(steps as i32);
                u0.iter()
                    .zip(&u1)
                    .map(|(a, b)| (b - gn * a).abs())
                    .fold(0.0f64, f64::max)
                    / gn
            }
            None => 0.0,
        };
        let hash = appkit::field_hash(c, [n; 3], &f.owned(), &u1)?;
        Ok::<_, anyhow::Error>((e1 / e0, dev, hash))
    })
    .unwrap();
    let dev = out.iter().map(|o| o.1).fold(0.0f64, f64::max);
    (out[0].0, dev, out[0].2)
}

#[test]
fn stokes_amplitude_factor_is_exact() {
    // On the MAC grid the mode is discretely divergence free and an
    // eigenvector of the 7-point Laplacian with eigenvalue
    // -8 sin^2(k h / 2) / h^2, so each backward-Euler step multiplies it by
    // 1 / (1 + 8 nu dt sin^2(k h/2) / h^2) exactly; the solves stop at a
    // relative residual of 1e-13.
    let (n, nu, dt) = (16, 0.05, 0.01);
    let h = 1.0 / n as f64;
    let g = 1.0 / (1.0 + 8.0 * nu * dt * (PI * h).sin().powi(2) / (h * h));
    let (_, dev, _) = run(n, 2, params(nu, dt, false, 1e-13), 10, Some(g));
    assert!(dev < 1e-11, "deviation from the discrete factor: {dev}");
}

#[test]
fn navier_stokes_energy_decays_at_the_analytic_rate_second_order() {
    let (nu, t) = (0.1, 0.02);
    let k = 2.0 * PI;
    let exact = (-4.0 * nu * k * k * t).exp();
    let mut errs = vec![];
    for n in [16usize, 32] {
        // dt = t / (n^2 / 64) ~ h^2, so the first-order time error falls
        // with h^2 too.
        let steps = n * n / 64;
        let dt = t / steps as f64;
        let (ratio, _, _) = run(n, 1, params(nu, dt, true, 1e-12), steps, None);
        errs.push((ratio - exact).abs() / exact);
    }
    let order = (errs[0] / errs[1]).log2();
    assert!(order > 1.8 && order < 2.3, "errors {errs:?}, order {order}");
    assert!(errs[1] < 5e-3, "errors {errs:?}");
}

#[test]
fn same_bits_on_every_rank_count() {
    let p = params(0.1, 0.002, true, 1e-10);
    let (_, _, reference) = run(16, 1, p, 4, None);
    for ranks in [2, 4, 8] {
        let (_, _, h) = run(16, ranks, p, 4, None);
        assert_eq!(h, reference, "{ranks} ranks");
    }
}
