//! `cargo xtask bench flow`: the permeability of sphere arrays against Zick
//! and Homsy (1982) and Hasimoto (1959), the Taylor-Green energy decay, a
//! random bed's iteration counts and the cost of a step. The flow app's
//! bit-exactness suite is [`crate::bitexact::flow`].
//!
//! One or more parts (none: all four):
//!
//! - `--permeability`: (a) the SC array at c = 0.125 at n = 16, 32, 64
//!   (`--quick`: 12, 16, 24) with both methods, Stokes to the app's steady
//!   tolerance: K against Zick and Homsy's 4.292, the observed order from
//!   the three resolutions (self-convergence and against the published
//!   value) and the coarsest resolution within 2 %; (b) the dilute limit,
//!   c = 0.008, 0.027, 0.064 at n = 32 (`--quick`: 20, cut cells only),
//!   against Hasimoto's expansion and Zick and Homsy's table. With the
//!   app's rotational pressure update the steady state takes about 100 /
//!   350 / 440 steps at n = 16 / 32 / 64 (cut cells; fewer with ghost
//!   cells).
//! - `--taylor-green`: the Navier-Stokes Taylor-Green vortex at n = 16, 32,
//!   64 (`--quick`: 16, 32) to t = 0.02 with dt = 0.02 / (n^2 / 64) ~ h^2
//!   (the diffusion step is first order in time), no body force: the energy
//!   ratio against `exp(-4 nu k^2 t)`, the relative error and the order.
//! - `--bed`: a random bed at porosity 0.5 (radius 0.1, seed 1) at 64^3
//!   (`--quick`: 32^3), 20 Stokes steps (10), both methods: CG iterations
//!   per step beside peclet's measured 21-33 (cut cells) and 76-160 (ghost
//!   cells) pressure iterations per step, seconds per step, Mcell/s per
//!   rank.
//! - `--perf`: the SC array with cut cells at 128^3 (`--quick`: 64^3), 10
//!   Stokes steps from rest (5), on each of `--ranks` x overlap x
//!   communication avoidance: seconds per step and per phase, Mcell/s per
//!   rank, iterations.
//!
//! Every run's JSON report stays in `--out` (default `target/bench/flow`).

use crate::bitexact::flow::{b, build, cells_per_diameter, on, read_report, Report};
use crate::util;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Options of `cargo xtask bench flow`. Without a part flag every part runs.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// SC arrays: K at c = 0.125 vs resolution (order, 2 % resolution) and
    /// the dilute limit vs Hasimoto and Zick and Homsy.
    #[arg(long)]
    pub permeability: bool,
    /// Navier-Stokes Taylor-Green vortex: energy decay vs exp(-4 nu k^2 t), order.
    #[arg(long)]
    pub taylor_green: bool,
    /// Random bed at porosity 0.5: CG iterations per step vs peclet's, throughput.
    #[arg(long)]
    pub bed: bool,
    /// Cost of a step at 128^3 on --ranks x overlap x communication avoidance.
    #[arg(long)]
    pub perf: bool,
    /// Smaller resolutions (minutes on a laptop).
    #[arg(long)]
    pub quick: bool,
    /// Ranks: the first for --permeability, --taylor-green and --bed
    /// (default 2), every one for --perf (default 1,2).
    #[arg(long, value_delimiter = ',')]
    pub ranks: Vec<usize>,
    /// Steps per --perf run [default: 10, 5 with --quick].
    #[arg(long)]
    pub steps: Option<usize>,
    /// Run under mpirun.
    #[arg(long)]
    pub mpi: bool,
    /// Use this flow binary instead of building one (with `--gpu`, a build
    /// with the `cuda` feature).
    #[arg(long)]
    pub flow: Option<PathBuf>,
    /// The GPU part alone (see `gpu`): peclet's porous bed on one GPU,
    /// both methods, against peclet's published H100 figures; the 512³
    /// bed's device memory; Zick and Homsy on the GPU against the CPU.
    #[arg(long)]
    pub gpu: bool,
    /// Output folder for the runs' JSON reports [default: target/bench/flow].
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Zick and Homsy (1982), Table 2, simple cubic arrays: solid fraction c
/// and drag coefficient K (`F = 6 pi mu a K U` per sphere, U the
/// superficial velocity). The numbers as Basilisk's test
/// `src/test/spheres.c` quotes that table (the paper itself was not at
/// hand); 4.292 at c = 0.125 is also the value the flow app's tests use.
pub const ZICK_HOMSY_SC: [(f64, f64); 4] = [
    (0.027, 2.008),
    (0.064, 2.810),
    (0.125, 4.292),
    (0.216, 7.442),
];
/// Solid fraction of the resolution study.
pub const C_STUDY: f64 = 0.125;
/// Solid fractions of the dilute-limit study.
pub const C_DILUTE: [f64; 3] = [0.008, 0.027, 0.064];
/// The accuracy the resolution study looks for.
const GOAL: f64 = 0.02;
/// Taylor-Green: end time, viscosity, amplitude.
const TG_T: f64 = 0.02;
const TG_NU: f64 = 0.1;
const TG_A: f64 = 1.0;
/// peclet's porous benchmark at porosity 0.5 (`../shared/seeds/002_*`):
/// pressure CG iterations per step, np 1 to 32, cut cells and ghost cells.
const PECLET_PRESSURE_ITS: [(&str, &str); 2] = [("cut-cell", "21-33"), ("ghost-cell", "76-160")];
const METHODS: [&str; 2] = ["cut-cell", "ghost-cell"];
const LONG: Duration = Duration::from_secs(12 * 3600);
const SHORT: Duration = Duration::from_secs(2 * 3600);

/// Hasimoto (1959) for a dilute simple cubic array, to O(c):
/// `1/K = 1 - 1.7601 c^(1/3) + c`.
pub fn hasimoto(c: f64) -> f64 {
    1.0 / (1.0 - 1.7601 * c.cbrt() + c)
}

/// Zick and Homsy's K at solid fraction `c`, if their table has it.
pub fn zick_homsy(c: f64) -> Option<f64> {
    ZICK_HOMSY_SC
        .iter()
        .find(|(cc, _)| (cc - c).abs() < 1e-9)
        .map(|&(_, k)| k)
}

/// The order of convergence from errors `e_coarse` at `n_coarse` and
/// `e_fine` at `n_fine` cells: `ln(e_c / e_f) / ln(n_f / n_c)`.
pub fn order(n_coarse: usize, e_coarse: f64, n_fine: usize, e_fine: f64) -> f64 {
    (e_coarse.abs() / e_fine.abs()).ln() / (n_fine as f64 / n_coarse as f64).ln()
}

/// The observed order from three solutions without the exact value: the
/// `p` with `|K1 - K2| / |K2 - K3| = (h1^p - h2^p) / (h2^p - h3^p)`,
/// `h = 1 / n` (for successive doublings, `log2(|K1 - K2| / |K2 - K3|)`).
/// `None` when no p in (0.01, 20) fits.
pub fn self_order(n: [usize; 3], k: [f64; 3]) -> Option<f64> {
    let target = ((k[0] - k[1]) / (k[1] - k[2])).abs().ln();
    let h = n.map(|n| 1.0 / n as f64);
    let g = |p: f64| ((h[0].powf(p) - h[1].powf(p)) / (h[1].powf(p) - h[2].powf(p))).ln();
    let (mut lo, mut hi) = (0.01, 20.0);
    if !target.is_finite() || target < g(lo) || target > g(hi) {
        return None;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if g(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(0.5 * (lo + hi))
}

/// The resolutions of each part.
#[derive(Debug, Clone, Copy)]
struct Plan {
    study: [usize; 3],
    dilute_n: usize,
    dilute_methods: &'static [&'static str],
    tg: &'static [usize],
    bed_n: usize,
    bed_steps: usize,
    perf_n: usize,
    perf_steps: usize,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Plan {
                study: [12, 16, 24],
                dilute_n: 20,
                dilute_methods: &["cut-cell"],
                tg: &[16, 32],
                bed_n: 32,
                bed_steps: 10,
                perf_n: 64,
                perf_steps: 5,
            }
        } else {
            Plan {
                study: [16, 32, 64],
                dilute_n: 32,
                dilute_methods: &METHODS,
                tg: &[16, 32, 64],
                bed_n: 64,
                bed_steps: 20,
                perf_n: 128,
                perf_steps: 10,
            }
        }
    }
}

/// Runs the app on `ranks` with `args`, the report written to `json`.
struct Runner<'a> {
    bin: &'a Path,
    mpi: bool,
    out: &'a Path,
    failed: usize,
}

impl Runner<'_> {
    fn run(
        &mut self,
        ranks: usize,
        args: &[String],
        name: &str,
        limit: Duration,
    ) -> Option<Report> {
        let json = self.out.join(format!("{name}.json"));
        let mut cmd = util::ranks_command(self.bin, &[], ranks, self.mpi);
        cmd.args(args).args(["--no-vtk", "-q", "--json"]).arg(&json);
        let ran = util::run_report(cmd, &json, limit, read_report);
        match ran.result {
            Ok(r) => Some(r),
            Err(e) => {
                self.failed += 1;
                println!("{name}: FAILED after {:.1} s", ran.seconds);
                for line in util::tail(&e, 20).lines() {
                    println!("      | {line}");
                }
                None
            }
        }
    }
}

/// The random bed at porosity 0.5 (radius 0.1, seed 1) of peclet's porous
/// benchmark: `n` cells, `method`, `steps` Stokes steps from rest.
fn bed_args(n: usize, method: &str, steps: usize) -> Vec<String> {
    strings(&[
        "--n",
        &n.to_string(),
        "--bodies",
        "random",
        "--solid-fraction",
        "0.5",
        "--radius",
        "0.1",
        "--seed",
        "1",
        "--method",
        method,
        "--steps",
        &steps.to_string(),
        "--steady-tol",
        "0",
    ])
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn sc_args(n: usize, c: f64, method: &str) -> Vec<String> {
    strings(&[
        "--n",
        &n.to_string(),
        "--bodies",
        "sc",
        "--solid-fraction",
        &c.to_string(),
        "--method",
        method,
    ])
}

fn pct(x: f64) -> String {
    format!("{:+.3}%", 100.0 * x)
}

/// `cargo xtask bench flow`.
pub fn bench(a: &BenchArgs) -> Result<()> {
    let start = Instant::now();
    let all = !(a.permeability || a.taylor_green || a.bed || a.perf || a.gpu);
    let bin = match (&a.flow, a.gpu) {
        (Some(b), _) => b.clone(),
        (None, false) => build(a.mpi)?,
        (None, true) => util::build_with(
            util::Artifact {
                package: "flow",
                name: "flow",
                example: false,
            },
            Some("cuda"),
        )?,
    };
    let out = match &a.out {
        Some(d) => d.clone(),
        None => util::target_dir()?.join("bench").join("flow"),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let plan = Plan::new(a.quick);
    let ranks = a.ranks.first().copied().unwrap_or(2);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load = crate::bench::load_average();
    println!(
        "bench flow{}: {} {}, {cores} core(s), load average {}; reports in {}",
        if a.quick { " --quick" } else { "" },
        bin.display(),
        if a.mpi {
            "under mpirun"
        } else {
            "on in-process ranks"
        },
        load.map_or("unknown".to_string(), |l| format!("{l:.2}")),
        out.display()
    );
    let mut r = Runner {
        bin: &bin,
        mpi: a.mpi,
        out: &out,
        failed: 0,
    };
    if all || a.permeability {
        permeability(&mut r, &plan, ranks);
    }
    if all || a.taylor_green {
        taylor_green(&mut r, &plan, ranks)?;
    }
    if all || a.bed {
        bed(&mut r, &plan, ranks);
    }
    if a.gpu {
        gpu(&mut r, a.quick, a.steps, cores);
    }
    if all || a.perf {
        let list = if a.ranks.is_empty() {
            vec![1, 2]
        } else {
            a.ranks.clone()
        };
        perf(&mut r, &plan, &list, a.steps.unwrap_or(plan.perf_steps));
    }
    println!("\nbench flow: {:.1} s", start.elapsed().as_secs_f64());
    if r.failed > 0 {
        bail!("{} flow run(s) failed", r.failed);
    }
    Ok(())
}

/// Part 1: the SC array at c = 0.125 vs resolution, and the dilute limit.
fn permeability(r: &mut Runner<'_>, plan: &Plan, ranks: usize) {
    let ns = plan.study;
    let k_ref = zick_homsy(C_STUDY).unwrap_or(f64::NAN);
    println!(
        "\n== permeability (a): SC array, c = {C_STUDY}, Stokes to the app's steady tolerance, {ranks} rank(s); \
         K = F / (6 pi mu a U) against Zick and Homsy (1982): {k_ref}"
    );
    println!(
        "{:<10} {:>4} {:>9} {:>10} {:>7} {:>9} {:>6} {:>6} {:>11} {:>9}",
        "method", "n", "cells/d", "K", "Z&H", "rel.err", "steps", "steady", "its m/p", "seconds"
    );
    // An effectively unlimited step count: the run ends at the steady state.
    let steps = strings(&["--steps", "1000000"]);
    for method in METHODS {
        let mut ks: Vec<Option<f64>> = vec![];
        for n in ns {
            let t = Instant::now();
            let args = [sc_args(n, C_STUDY, method), steps.clone()].concat();
            let rep = r.run(ranks, &args, &format!("perm_{method}_n{n}"), LONG);
            let k = rep.as_ref().and_then(|x| x.drag_coefficient);
            ks.push(k);
            if let (Some(x), Some(k)) = (&rep, k) {
                println!(
                    "{:<10} {:>4} {:>9.2} {:>10.5} {:>7.3} {:>9} {:>6} {:>6} {:>11} {:>9.1}",
                    method,
                    n,
                    cells_per_diameter(x),
                    k,
                    k_ref,
                    pct(k / k_ref - 1.0),
                    x.steps,
                    if x.steady { "yes" } else { "NO" },
                    format!("{:.1}/{:.1}", x.iterations[0], x.iterations[1]),
                    t.elapsed().as_secs_f64()
                );
            }
        }
        let [Some(k0), Some(k1), Some(k2)] = [ks[0], ks[1], ks[2]] else {
            println!("{method}: a run failed, no order");
            continue;
        };
        let e = [k0, k1, k2].map(|k| (k - k_ref) / k_ref);
        let fmt = |p: Option<f64>| p.map_or("-".to_string(), |p| format!("{p:.2}"));
        println!(
            "{method}: observed order {} from |K{} - K{}| / |K{} - K{}|{}; against {k_ref}: {} (n {} -> {}), {} (n {} -> {}){}",
            fmt(self_order(ns, [k0, k1, k2])),
            ns[0],
            ns[1],
            ns[1],
            ns[2],
            if (k0 - k1) * (k1 - k2) < 0.0 { " (not monotone)" } else { "" },
            fmt(Some(order(ns[0], e[0], ns[1], e[1]))),
            ns[0],
            ns[1],
            fmt(Some(order(ns[1], e[1], ns[2], e[2]))),
            ns[1],
            ns[2],
            if e[0] * e[1] < 0.0 || e[1] * e[2] < 0.0 {
                " (the error changes sign)"
            } else {
                ""
            }
        );
        // The coarsest resolution from which on every finer one is within 2 %.
        let within = (0..3).find(|&i| e[i..].iter().all(|x| x.abs() <= GOAL));
        match within {
            Some(i) => println!(
                "{method}: within {:.0} % of Zick and Homsy from n = {} on ({:+.2} % there)",
                100.0 * GOAL,
                ns[i],
                100.0 * e[i]
            ),
            None => println!(
                "{method}: no resolution up to n = {} is within {:.0} % of Zick and Homsy",
                ns[2],
                100.0 * GOAL
            ),
        }
    }

    let n = plan.dilute_n;
    println!(
        "\n== permeability (b): dilute SC arrays at n = {n}, {ranks} rank(s); K against Hasimoto (1959) \
         1/K = 1 - 1.7601 c^(1/3) + c and Zick and Homsy's table"
    );
    println!(
        "{:<10} {:>6} {:>8} {:>9} {:>9} {:>9} {:>7} {:>9} {:>6} {:>9}",
        "method", "c", "cells/d", "K", "Hasimoto", "rel.err", "Z&H", "rel.err", "steps", "seconds"
    );
    for method in plan.dilute_methods {
        for c in C_DILUTE {
            let t = Instant::now();
            let args = [sc_args(n, c, method), steps.clone()].concat();
            let Some(x) = r.run(ranks, &args, &format!("dilute_{method}_c{c}_n{n}"), LONG) else {
                continue;
            };
            let k = x.drag_coefficient.unwrap_or(f64::NAN);
            let kh = hasimoto(c);
            let zh = zick_homsy(c);
            println!(
                "{:<10} {:>6} {:>8.2} {:>9.4} {:>9.4} {:>9} {:>7} {:>9} {:>6} {:>9.1}{}",
                method,
                c,
                cells_per_diameter(&x),
                k,
                kh,
                pct(k / kh - 1.0),
                zh.map_or("-".to_string(), |z| format!("{z:.3}")),
                zh.map_or("-".to_string(), |z| pct(k / z - 1.0)),
                x.steps,
                t.elapsed().as_secs_f64(),
                if x.steady { "" } else { "  (not steady)" }
            );
        }
    }
    println!(
        "Hasimoto's expansion is good to O(c): at c = 0.064 it is {} off Zick and Homsy",
        pct(hasimoto(0.064) / 2.810 - 1.0)
    );
}

/// Part 2: the Navier-Stokes Taylor-Green vortex.
fn taylor_green(r: &mut Runner<'_>, plan: &Plan, ranks: usize) -> Result<()> {
    let k = 2.0 * std::f64::consts::PI;
    let exact = (-4.0 * TG_NU * k * k * TG_T).exp();
    // The mean of (u^2 + v^2) / 2 for u = A sin kx cos ky, v = -A cos kx sin ky,
    // exactly so on the MAC grid's samples too.
    let e0 = TG_A * TG_A / 4.0;
    // No body force (the default drives a mean flow).
    let cfg = r.out.join("taylor_green.toml");
    std::fs::write(
        &cfg,
        "# cargo xtask bench flow --taylor-green: the vortex without a body force\nforce = [0.0, 0.0, 0.0]\n",
    )
    .with_context(|| format!("cannot write {}", cfg.display()))?;
    println!(
        "\n== taylor-green: Navier-Stokes, nu = {TG_NU}, A = {TG_A}, k = 2 pi, to t = {TG_T} with dt = t / (n^2 / 64), {ranks} rank(s); \
         E(t)/E(0) against exp(-4 nu k^2 t) = {exact:.8}, E(0) = A^2/4"
    );
    println!(
        "{:>4} {:>6} {:>10} {:>12} {:>11} {:>7} {:>10} {:>9}",
        "n", "steps", "dt", "E/E0", "rel.err", "order", "s/step", "seconds"
    );
    let mut prev: Option<(usize, f64)> = None;
    for &n in plan.tg {
        let steps = (n * n / 64).max(1);
        let dt = TG_T / steps as f64;
        let mut args = vec!["--config".to_string(), cfg.display().to_string()];
        args.extend(strings(&[
            "--n",
            &n.to_string(),
            "--bodies",
            "none",
            "--initial",
            "taylor-green",
            "--navier-stokes",
            "true",
            "--nu",
            &TG_NU.to_string(),
            "--dt",
            &dt.to_string(),
            "--steps",
            &steps.to_string(),
        ]));
        let t = Instant::now();
        let Some(x) = r.run(ranks, &args, &format!("tg_n{n}"), SHORT) else {
            continue;
        };
        let ratio = x.energy / e0;
        let err = (ratio - exact) / exact;
        let ord = prev.map_or("-".to_string(), |(pn, pe)| {
            format!("{:.2}", order(pn, pe, n, err))
        });
        println!(
            "{:>4} {:>6} {:>10.3e} {:>12.8} {:>11.3e} {:>7} {:>10.4} {:>9.1}",
            n,
            x.steps,
            dt,
            ratio,
            err,
            ord,
            x.seconds_per_step,
            t.elapsed().as_secs_f64()
        );
        prev = Some((n, err));
    }
    Ok(())
}

/// Part 3: a random bed at porosity 0.5.
fn bed(r: &mut Runner<'_>, plan: &Plan, ranks: usize) {
    let (n, steps) = (plan.bed_n, plan.bed_steps);
    println!(
        "\n== bed: random packing, c = 0.5, radius 0.1, seed 1, n = {n}, {steps} Stokes steps from rest, {ranks} rank(s); \
         CG iterations per step beside peclet's porous benchmark (pressure, porosity 0.5, np 1-32)"
    );
    println!(
        "{:<10} {:>7} {:>7} {:>8} {:>8} {:>8} {:>9} {:>9} {:>11} {:>9}",
        "method",
        "spheres",
        "c",
        "cells/d",
        "mom its",
        "pres its",
        "peclet",
        "s/step",
        "Mcell/s/rk",
        "seconds"
    );
    for method in METHODS {
        let args = bed_args(n, method, steps);
        let t = Instant::now();
        let Some(x) = r.run(ranks, &args, &format!("bed_{method}_n{n}"), SHORT) else {
            continue;
        };
        let peclet = PECLET_PRESSURE_ITS
            .iter()
            .find(|(m, _)| *m == method)
            .map_or("-", |p| p.1);
        println!(
            "{:<10} {:>7} {:>7.4} {:>8.2} {:>8.1} {:>8.1} {:>9} {:>9.4} {:>11.3} {:>9.1}",
            method,
            x.spheres,
            x.solid_fraction,
            cells_per_diameter(&x),
            x.iterations[0],
            x.iterations[1],
            peclet,
            x.seconds_per_step,
            x.mcells_per_rank,
            t.elapsed().as_secs_f64()
        );
    }
    println!("mom its: the three momentum solves together; peclet's counts are at its own step size, ours at the app's default dt = 30 h^2 / nu");
}

/// Part 4: the cost of a step.
fn perf(r: &mut Runner<'_>, plan: &Plan, ranks: &[usize], steps: usize) {
    let n = plan.perf_n;
    let load = crate::bench::load_average();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "\n== perf: SC c = {C_STUDY}, cut cells, n = {n}, {steps} Stokes steps from rest; load average {}",
        load.map_or("unknown".to_string(), |l| format!("{l:.2}"))
    );
    if load.is_some_and(|l| l > 0.5) {
        println!("warning: the machine is busy ({cores} core(s)); times will be noisy");
    }
    println!(
        "{:>5} {:<7} {:<3} {:>9} {:>11} {:>9} {:>10} {:>9} {:>11}",
        "ranks",
        "overlap",
        "CA",
        "s/step",
        "Mcell/s/rk",
        "momentum",
        "projection",
        "halo",
        "its m/p"
    );
    for &p in ranks {
        for overlap in [true, false] {
            for ca in [true, false] {
                let args = [
                    sc_args(n, C_STUDY, "cut-cell"),
                    strings(&[
                        "--steps",
                        &steps.to_string(),
                        "--steady-tol",
                        "0",
                        "--overlap",
                        b(overlap),
                        "--comm-avoiding",
                        b(ca),
                    ]),
                ]
                .concat();
                let name = format!("perf_n{n}_r{p}_ov{}_ca{}", on(overlap), on(ca));
                let Some(x) = r.run(p, &args, &name, SHORT) else {
                    continue;
                };
                println!(
                    "{:>5} {:<7} {:<3} {:>9.4} {:>11.3} {:>9.4} {:>10.4} {:>9.4} {:>11}",
                    p,
                    on(overlap),
                    on(ca),
                    x.seconds_per_step,
                    x.mcells_per_rank,
                    x.phases.momentum,
                    x.phases.projection,
                    x.phases.halo,
                    format!("{:.1}/{:.1}", x.iterations[0], x.iterations[1])
                );
            }
        }
    }
    println!("phases: rank 0's seconds per step (halo: exchanges and waits inside both); its: CG iterations per step, momentum (three solves) / pressure");
}

/// peclet's porous benchmark on one H100 (`../shared/seeds/002_*`): a
/// random sphere bed at porosity 0.5, 256³ cells, cut cells.
const PECLET_MCELLS: f64 = 36.0;
/// Its projection cost per cell and pressure iteration (ns).
const PECLET_NS_PER_CELL_IT: f64 = 0.63;
/// Its ghost-cell projection (ms a step).
const PECLET_GHOST_PROJECTION_MS: f64 = 1650.0;
/// Steps of the GPU-against-CPU bit comparison of `--gpu`.
const BITS_STEPS: usize = 20;
/// Its fat rung: doubles a cell at 512³.
const PECLET_DOUBLES_PER_CELL: f64 = 35.0;

/// `--gpu`: the flow on one GPU (`--backend cuda`, one rank).
///
/// 1. peclet's bed (random packing, c = 0.5, radius 0.1, seed 1) at 256³
///    (`--quick`: 128³), `--steps` Stokes steps from rest (default 10),
///    cut cells and ghost cells: Mcell/s, CG iterations a step, momentum,
///    projection and halo seconds a step, the projection's cost per cell
///    and pressure iteration, against peclet's published H100 figures
///    (36 Mcell/s and 0.63 ns with cut cells, a 1650 ms projection with
///    ghost cells) and the goals (3x peclet, 0.2 ns).
/// 2. Zick and Homsy's SC array, c = 0.125, n = 64 (`--quick`: 16), cut
///    cells, to the steady state on the GPU: K against 4.292; then
///    `BITS_STEPS` steps on the GPU and on every CPU core: the same hash.
/// 3. The bed at 512³ (`--quick`: 256³), 2 steps: the device memory a
///    cell against peclet's 35 doubles (last: its geometry takes one core
///    minutes to build).
fn gpu(r: &mut Runner<'_>, quick: bool, steps: Option<usize>, cores: usize) {
    let n = if quick { 128 } else { 256 };
    let steps = steps.unwrap_or(10);
    let cuda = strings(&["--backend", "cuda"]);
    let bed_args =
        |n: usize, method: &str, steps: usize| [bed_args(n, method, steps), cuda.clone()].concat();
    println!(
        "\n== GPU: peclet's bed, random packing c = 0.5, radius 0.1, seed 1, n = {n}, {steps} Stokes steps from rest, one rank on one GPU; \
         peclet on one H100: {PECLET_MCELLS} Mcell/s, {PECLET_NS_PER_CELL_IT} ns a cell and pressure iteration (cut cells), \
         projection {PECLET_GHOST_PROJECTION_MS} ms a step (ghost cells)"
    );
    println!(
        "{:<10} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>8}",
        "method",
        "mom its",
        "pres its",
        "s/step",
        "Mcell/s",
        "mom s",
        "proj s",
        "halo s",
        "ns/cell/it",
        "vs peclet",
        "goal"
    );
    let cells = (n as f64).powi(3);
    for method in METHODS {
        let Some(x) = r.run(
            1,
            &bed_args(n, method, steps),
            &format!("gpu_bed_{method}_n{n}"),
            SHORT,
        ) else {
            continue;
        };
        if x.device.is_none() {
            println!("{method}: the run did not report a device");
            r.failed += 1;
            continue;
        }
        let mcells = cells / x.seconds_per_step / 1e6;
        let ns = 1e9 * x.phases.projection / (cells * x.iterations[1]);
        let (vs, goal) = if method == "cut-cell" {
            let ratio = mcells / PECLET_MCELLS;
            let met = ratio >= 3.0 && ns <= 0.2;
            (format!("{ratio:.2}x"), if met { "met" } else { "not met" })
        } else {
            let ratio = PECLET_GHOST_PROJECTION_MS / (1e3 * x.phases.projection);
            (
                format!("{ratio:.2}x"),
                if ratio >= 3.0 { "met" } else { "not met" },
            )
        };
        println!(
            "{:<10} {:>8.1} {:>8.1} {:>9.4} {:>9.2} {:>9.4} {:>9.4} {:>9.4} {:>10.3} {:>9} {:>8}",
            method,
            x.iterations[0],
            x.iterations[1],
            x.seconds_per_step,
            mcells,
            x.phases.momentum,
            x.phases.projection,
            x.phases.halo,
            ns,
            vs,
            goal
        );
        if method == "cut-cell" {
            println!("  on {}", x.device.as_deref().unwrap_or("?"));
        }
    }
    println!("vs peclet: cut cells, Mcell/s over peclet's (goal 3x, and at most 0.2 ns a cell and iteration); ghost cells, peclet's projection time over ours (goal 3x). mom its: the three momentum solves together");

    let zn = if quick { 16 } else { 64 };
    println!("\n== GPU: Zick and Homsy, SC array c = {C_STUDY}, n = {zn}, cut cells, Stokes to the steady tolerance on the GPU; then {BITS_STEPS} steps on the GPU (one rank) and on the CPU ({cores} ranks)");
    let args = [
        sc_args(zn, C_STUDY, "cut-cell"),
        strings(&["--steps", "1000000"]),
    ]
    .concat();
    if let Some(g) = r.run(
        1,
        &[args, cuda.clone()].concat(),
        &format!("gpu_zh_n{zn}"),
        LONG,
    ) {
        let k = g.drag_coefficient.unwrap_or(f64::NAN);
        println!(
            "GPU: K = {k:.5} ({} against 4.292), {} steps, {:.4} s a step",
            pct(k / 4.292 - 1.0),
            g.final_step,
            g.seconds_per_step
        );
    }
    // The bits: a fixed number of steps on both (the CPU's run to the
    // steady state takes minutes on a 16-core host).
    let args = [
        sc_args(zn, C_STUDY, "cut-cell"),
        strings(&["--steps", &BITS_STEPS.to_string(), "--steady-tol", "0"]),
    ]
    .concat();
    let g = r.run(
        1,
        &[args.clone(), cuda.clone()].concat(),
        &format!("gpu_zh_bits_n{zn}"),
        SHORT,
    );
    let c = r.run(cores, &args, &format!("cpu_zh_bits_n{zn}"), SHORT);
    if let (Some(g), Some(c)) = (g, c) {
        let same = g.hash == c.hash && g.final_step == c.final_step;
        println!(
            "{BITS_STEPS} steps: GPU hash {}, CPU hash {}: {}",
            g.hash,
            c.hash,
            if same { "the same bits" } else { "DIFFERENT" }
        );
        if !same {
            r.failed += 1;
        }
    }

    let big = if quick { 256 } else { 512 };
    println!("\n== GPU: the bed at {big}³ (peclet's fat rung on one GPU: about {PECLET_DOUBLES_PER_CELL} doubles a cell), 2 steps, cut cells");
    if let Some(x) = r.run(
        1,
        &bed_args(big, "cut-cell", 2),
        &format!("gpu_bed_cut-cell_n{big}"),
        SHORT,
    ) {
        let b = x.device_bytes.unwrap_or(0) as f64;
        let per = b / (big as f64).powi(3);
        println!(
            "device memory {:.2} GB: {:.1} bytes, {:.1} doubles a cell ({}); {:.3} s a step, {:.1} Mcell/s, its {:.1} + {:.1}",
            b / 1e9,
            per,
            per / 8.0,
            if per / 8.0 <= PECLET_DOUBLES_PER_CELL { "met" } else { "not met" },
            x.seconds_per_step,
            (big as f64).powi(3) / x.seconds_per_step / 1e6,
            x.iterations[0],
            x.iterations[1]
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders() {
        // Successive doublings: log2 of the ratios.
        let k = |n: usize| 4.292 + 3.0 / (n * n) as f64;
        let p = self_order([16, 32, 64], [k(16), k(32), k(64)]).unwrap();
        assert!((p - 2.0).abs() < 1e-9, "{p}");
        let e = |n: usize| (k(n) - 4.292) / 4.292;
        assert!((order(16, e(16), 32, e(32)) - 2.0).abs() < 1e-9);
        // Uneven ratios (the quick set) and another order.
        let k1 = |n: usize| 2.0 - 0.7 * (n as f64).powf(-1.5);
        let p = self_order([12, 16, 24], [k1(12), k1(16), k1(24)]).unwrap();
        assert!((p - 1.5).abs() < 1e-9, "{p}");
        assert!((order(12, k1(12) - 2.0, 24, k1(24) - 2.0) - 1.5).abs() < 1e-9);
        // No convergence: no order.
        assert!(self_order([16, 32, 64], [1.0, 1.0, 1.0]).is_none());
        assert!(self_order([16, 32, 64], [1.0, 1.1, 1.3]).is_none());
    }

    #[test]
    fn hasimoto_and_the_table() {
        assert!((1.0 / hasimoto(0.0) - 1.0).abs() < 1e-15);
        // 1/K = 1 - 1.7601 * 0.3 + 0.027 at c = 0.027.
        assert!((1.0 / hasimoto(0.027) - 0.49897).abs() < 1e-12);
        // Within 0.3 % of Zick and Homsy at c = 0.027, 2 % at 0.064.
        assert!((hasimoto(0.027) / 2.008 - 1.0).abs() < 3e-3);
        assert!((hasimoto(0.064) / 2.810 - 1.0).abs() < 2e-2);
        assert_eq!(zick_homsy(0.125), Some(4.292));
        assert_eq!(zick_homsy(0.008), None);
        assert_eq!(zick_homsy(C_STUDY), Some(4.292));
    }
}
