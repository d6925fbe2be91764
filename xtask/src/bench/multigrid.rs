//! `cargo xtask bench multigrid [--quick] [--out DIR] [--no-pyamg]`: the
//! multigrid solver through the `poisson` app, printed as tables and
//! written to `DIR/multigrid.json` and `DIR/multigrid.png` (`DIR` defaults
//! to `target/bench/multigrid`).
//!
//! 1. **Throughput**: MG-preconditioned CG to a relative residual of 1e-10
//!    on the manufactured Dirichlet problem, 128³ and 256³ (64³ and 128³
//!    with `--quick`), 1, 2 and 4 in-process ranks, communication-avoiding
//!    smoothing on and off: iterations, solve time (median of the app's
//!    repeats), DOF/s (cells / solve time), halo exchanges per V-cycle
//!    (all, and those inside the sweeps) and the time per V-cycle.
//! 2. **Residual factor**: V(2,2)-cycles alone (`--solver mg`) at 128³:
//!    the residual history's geometric mean and largest of the last three
//!    ratios, and the asymptotic reduction per cycle by power iteration on
//!    the error equation (`--factor-cycles`, 60 cycles; 30 with `--quick`).
//! 3. **V-cycle against its memory-traffic floor** at 128³, one rank: the
//!    bytes a V(pre, post)-cycle must move ([`vcycle_bytes`]: per smoothing
//!    level, every red-black sweep reads `u` and `f` and writes `u` once,
//!    24 B per cell; the residual with the restriction reads `u` and `f`
//!    and writes the coarse right-hand side, 17 B; the prolongation reads
//!    the coarse correction and updates `u`, 17 B) over the copy floor of
//!    [`crate::stream`] (the faster of `copy_from_slice` and a
//!    non-temporal copy of one array of the padded fine size into another,
//!    median of its passes, half just before and half just after the run),
//!    against the time of a V-cycle alone (`ms_per_vcycle` of the
//!    stationary solve, `--solver mg`: its cycles and nothing else). Beside
//!    it the MG-PCG solve's preconditioner applications (`ms_per_vcycle` of
//!    `--solver pcg`): the same cycle after zeroing `u`, with the CG's two
//!    exact dot products fused into its last pass, work the floor does not
//!    count. Goal: the V-cycle within 2x, and the MG-PCG solve at 5e6 DOF/s
//!    or more.
//! 4. **PyAMG reference** (`pip install pyamg` if it is missing; skipped
//!    with a message if that fails): the 7-point Poisson matrix of the same
//!    size (`pyamg.gallery.poisson`, Dirichlet), smoothed aggregation with
//!    CG acceleration to the same relative residual, one thread, in the same
//!    run; the ratio of DOF/s (ours on 1 rank / PyAMG), solve only and
//!    setup + solve.
//!
//! Runs are sequential; the machine running CI has 2 cores, so 4 ranks
//! oversubscribe it there (the table says how many cores there were).

use crate::stream::{self, Stream};
use crate::util;
use anyhow::{anyhow, bail, Context, Result};
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Options of `cargo xtask bench multigrid`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Smaller grids (64³ and 128³) and one repeat.
    #[arg(long)]
    pub quick: bool,
    /// Output directory (default target/bench/multigrid).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip the PyAMG reference.
    #[arg(long)]
    pub no_pyamg: bool,
    /// Use this poisson binary instead of building one (with `--out`, the
    /// bench then needs no cargo: it can run on a machine without a
    /// toolchain). With `--gpu`, a build with the `cuda` feature.
    #[arg(long)]
    pub poisson: Option<PathBuf>,
    /// The GPU part instead (see `run_gpu`): MG-PCG on one GPU against the
    /// same build on every CPU core, and the V-cycle against its floor at
    /// the GPU's copy bandwidth.
    #[arg(long)]
    pub gpu: bool,
    /// With `--gpu`: rounds of GPU and CPU runs, alternated (default 3).
    #[arg(long)]
    pub rounds: Option<usize>,
}

/// One app run's parameters.
#[derive(Debug, Clone, Copy)]
struct Case {
    n: usize,
    ranks: usize,
    ca: bool,
    solver: &'static str,
    repeat: usize,
    factor_cycles: usize,
}

/// Runs the app once and returns its JSON report.
fn run_app(bin: &Path, dir: &Path, c: Case) -> Result<Value> {
    run_args(bin, dir, c, &[])
}

/// [`run_app`] with more arguments.
fn run_args(bin: &Path, dir: &Path, c: Case, more: &[&str]) -> Result<Value> {
    let json = dir.join("run.json");
    let _ = std::fs::remove_file(&json);
    let mut cmd = Command::new(bin);
    cmd.args(more);
    cmd.args(["--n", &c.n.to_string()])
        .args(["--factor-cycles", &c.factor_cycles.to_string()])
        .args(["--ranks", &c.ranks.to_string()])
        .args(["--solver", c.solver])
        .args(["--ca", if c.ca { "on" } else { "off" }])
        .args(["--repeat", &c.repeat.to_string()])
        .arg("--quiet")
        .arg("--json")
        .arg(&json);
    let out = util::run_captured(cmd, Duration::from_secs(1800))?;
    if !out.success() {
        bail!(
            "poisson --n {} --ranks {} --solver {} failed: {}\n{}",
            c.n,
            c.ranks,
            c.solver,
            out.status_text(),
            out.stderr.trim_end()
        );
    }
    let text = std::fs::read_to_string(&json)
        .with_context(|| format!("cannot read {}", json.display()))?;
    serde_json::from_str(&text).with_context(|| format!("bad JSON in {}", json.display()))
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or(f64::NAN)
}

/// The project's goals: the 128³ solve at this many DOF/s on one core ...
const GOAL_DOF_PER_S: f64 = 5e6;
/// ... and a V-cycle within this factor of its memory-traffic floor.
const GOAL_FLOOR_RATIO: f64 = 2.0;

/// Bytes a V-cycle with `sweeps` (pre plus post) red-black sweeps per level
/// must move at least, given every level's global shape (finest first, the
/// bottom last; the dense bottom solve is left out). Per smoothing level of
/// `N` cells: each sweep reads `u` and `f` and writes `u` (24 B per cell);
/// the residual with the restriction reads `u` and `f` and writes the
/// coarse right-hand side (16 + 1 B); the prolongation reads the coarse
/// correction and reads and writes `u` (1 + 16 B). Returns the total and
/// the per-level bytes.
fn vcycle_bytes(shapes: &[[usize; 3]], sweeps: usize) -> (f64, Vec<f64>) {
    let smoothing = &shapes[..shapes.len().saturating_sub(1)];
    let per: Vec<f64> = smoothing
        .iter()
        .map(|s| {
            let n = (s[0] * s[1] * s[2]) as f64;
            n * (24.0 * sweeps as f64 + 17.0 + 17.0)
        })
        .collect();
    (per.iter().sum(), per)
}

/// The level shapes of an app report.
fn level_shapes(v: &Value) -> Vec<[usize; 3]> {
    v["levels"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|l| {
                    let g = l["global"].as_array()?;
                    let d = |i: usize| g.get(i).and_then(Value::as_u64).map(|x| x as usize);
                    Some([d(0)?, d(1)?, d(2)?])
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The asymptotic factor: the largest of the last three residual ratios.
fn asymptotic(res: &[f64]) -> f64 {
    let r: Vec<f64> = res.windows(2).map(|w| w[1] / w[0]).collect();
    r.iter().rev().take(3).cloned().fold(f64::NAN, f64::max)
}

const PYAMG: &str = r#"
import json, sys, time
import numpy as np, pyamg
n = int(sys.argv[1])
A = pyamg.gallery.poisson((n, n, n), format='csr')
b = np.random.default_rng(1).standard_normal(A.shape[0])
t0 = time.perf_counter()
ml = pyamg.smoothed_aggregation_solver(A)
t1 = time.perf_counter()
res = []
x = ml.solve(b, tol=1e-10, accel='cg', residuals=res, maxiter=200)
t2 = time.perf_counter()
rel = float(np.linalg.norm(b - A @ x) / np.linalg.norm(b))
print(json.dumps({"n": n, "cells": A.shape[0], "setup_s": t1 - t0, "solve_s": t2 - t1,
                  "iterations": len(res) - 1, "relative_residual": rel,
                  "pyamg": pyamg.__version__, "levels": len(ml.levels)}))
"#;

/// PyAMG on the same size, or why it was skipped.
fn pyamg(n: usize) -> std::result::Result<Value, String> {
    let have = |()| {
        Command::new("python3")
            .args(["-c", "import pyamg, scipy"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !have(()) {
        eprintln!("$ python3 -m pip install --quiet pyamg");
        let ok = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "pyamg"])
            .status()
            .is_ok_and(|s| s.success());
        if !ok || !have(()) {
            return Err("PyAMG is not installed and `python3 -m pip install pyamg` failed".into());
        }
    }
    let mut cmd = Command::new("python3");
    cmd.args(["-c", PYAMG, &n.to_string()])
        .env("OMP_NUM_THREADS", "1")
        .env("OPENBLAS_NUM_THREADS", "1");
    let out = util::run_captured(cmd, Duration::from_secs(1800)).map_err(|e| e.to_string())?;
    if !out.success() {
        return Err(format!(
            "the PyAMG run failed: {}",
            util::tail(&out.stderr, 5)
        ));
    }
    serde_json::from_str(out.stdout.trim()).map_err(|e| format!("bad PyAMG output: {e}"))
}

/// Runs the bench.
pub fn run(args: &Args) -> Result<()> {
    if args.gpu {
        return run_gpu(args);
    }
    let start = Instant::now();
    let out_dir = match &args.out {
        Some(d) => d.clone(),
        None => util::target_dir()?.join("bench").join("multigrid"),
    };
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let bin = match &args.poisson {
        Some(p) => p.clone(),
        None => crate::bitexact::poisson::build_poisson(false)?,
    };
    let dir = out_dir.join(format!(".scratch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let sizes: [usize; 2] = if args.quick { [64, 128] } else { [128, 256] };
    // The app reports the median of the repeats (the mean of two); its
    // setup writes every page of the solver's fields, so the first repeat
    // pays no page faults (on a fresh virtual machine 17 ms a 2 MiB huge
    // page) and two suffice for --quick.
    let repeat = if args.quick { 2 } else { 3 };
    println!("bench multigrid{}: {cores} core(s), in-process ranks (threads); MG-PCG V(2,2) to 1e-10, Dirichlet", if args.quick { " --quick" } else { "" });

    // 1. Throughput.
    println!(
        "\n{:>5} {:>5} {:>4} {:>5} {:>9} {:>11} {:>9} {:>8} {:>9}",
        "n", "ranks", "CA", "its", "solve s", "DOF/s", "ms/V", "halo/V", "smooth/V"
    );
    let mut runs = Vec::new();
    for &n in &sizes {
        for ranks in [1usize, 2, 4] {
            for ca in [true, false] {
                let c = Case {
                    n,
                    ranks,
                    ca,
                    solver: "pcg",
                    repeat,
                    factor_cycles: 0,
                };
                let v = run_app(&bin, &dir, c)?;
                let vc = v["vcycles"].as_f64().unwrap_or(f64::NAN);
                let ms_v = 1e3 * f(&v, "solve_s") / vc;
                println!(
                    "{:>5} {:>5} {:>4} {:>5} {:>9.3} {:>11.3e} {:>9.2} {:>8.1} {:>9.1}",
                    n,
                    ranks,
                    if ca { "on" } else { "off" },
                    v["iterations"],
                    f(&v, "solve_s"),
                    f(&v, "dof_per_s"),
                    ms_v,
                    f(&v, "halo_events_per_vcycle"),
                    f(&v, "smooth_events_per_vcycle"),
                );
                runs.push(json!({
                    "n": n, "ranks": ranks, "comm_avoiding": ca,
                    "iterations": v["iterations"], "vcycles": v["vcycles"],
                    "setup_s": v["setup_s"], "solve_s": v["solve_s"], "dof_per_s": v["dof_per_s"],
                    "ms_per_vcycle": ms_v,
                    "halo_events_per_vcycle": v["halo_events_per_vcycle"],
                    "smooth_events_per_vcycle": v["smooth_events_per_vcycle"],
                    "error_max": v["error_max"], "hash_hex": v["hash_hex"], "levels": v["levels"],
                }));
            }
        }
    }

    // 2. Residual factor of the V-cycle alone: the residual history of a
    // solve, and the power iteration on the error equation.
    let nf = sizes[0].max(128).min(sizes[1]);
    let factor_cycles = if args.quick { 30 } else { 60 };
    let v = run_app(
        &bin,
        &dir,
        Case {
            n: nf,
            ranks: 1,
            ca: true,
            solver: "mg",
            repeat: 1,
            factor_cycles,
        },
    )?;
    let res: Vec<f64> = v["residuals"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    let last3 = asymptotic(&res);
    let power = f(&v, "vcycle_factor");
    println!(
        "\nV(2,2) alone at {nf}³: {} cycles to 1e-10 (mean factor {:.4}, largest of the last three {last3:.4}); \
         asymptotic factor by power iteration over {factor_cycles} cycles {power:.4} (goal <= 0.12)",
        v["iterations"],
        f(&v, "factor")
    );

    // 3. The V-cycle against its memory-traffic floor, at the reference
    // size on one rank; the copy floor measured around the run.
    let n_ref = sizes[0].max(128).min(sizes[1]);
    let stream_reps = if args.quick { 6 } else { 10 };
    let floor_case = Case {
        n: n_ref,
        ranks: 1,
        ca: true,
        solver: "pcg",
        repeat,
        factor_cycles: 0,
    };
    // The padded fine field: ghost width 2 with communication avoidance.
    let elements = (n_ref + 4).pow(3);
    let cycle_case = Case {
        solver: "mg",
        ..floor_case
    };
    let mut copy_times = stream::passes(elements, stream_reps / 2);
    let fv = run_app(&bin, &dir, floor_case)?;
    let cv = run_app(&bin, &dir, cycle_case)?;
    copy_times.extend(stream::passes(elements, stream_reps - stream_reps / 2));
    let copy = Stream::from_passes(elements, &copy_times);
    let sweeps =
        fv["config"]["pre"].as_u64().unwrap_or(2) + fv["config"]["post"].as_u64().unwrap_or(2);
    let shapes = level_shapes(&fv);
    let (bytes, level_bytes) = vcycle_bytes(&shapes, sweeps as usize);
    let floor_ms = 1e3 * bytes / (copy.gb_per_s * 1e9);
    let ours_ms = f(&cv, "ms_per_vcycle");
    let floor_ratio = ours_ms / floor_ms;
    let pcg_ms = f(&fv, "ms_per_vcycle");
    let dof = f(&fv, "dof_per_s");
    println!(
        "\nV-cycle vs memory traffic at {n_ref}³, 1 rank: copy floor {:.2} GB/s ({} f64 per array, median of {} passes around the run); \
         V({},{}) must move {:.1} MB ({:.1} B per fine cell)",
        copy.gb_per_s,
        elements,
        copy_times.len(),
        fv["config"]["pre"],
        fv["config"]["post"],
        bytes / 1e6,
        bytes / (n_ref.pow(3) as f64)
    );
    println!(
        "  floor {floor_ms:.2} ms per V-cycle, ours {ours_ms:.2} ms (a V-cycle alone, `--solver mg`) -> {floor_ratio:.2}x the floor (goal <= {GOAL_FLOOR_RATIO}x: {}); \
         MG-PCG preconditioner application (the cycle with u zeroed and two exact dot products fused in) {pcg_ms:.2} ms, {:.2}x; \
         MG-PCG solve {:.3e} DOF/s (goal >= {GOAL_DOF_PER_S:.0e}: {})",
        if floor_ratio <= GOAL_FLOOR_RATIO { "met" } else { "NOT met" },
        pcg_ms / floor_ms,
        dof,
        if dof >= GOAL_DOF_PER_S { "met" } else { "NOT met" }
    );
    let floor = json!({
        "n": n_ref, "ranks": 1, "sweeps_per_level": sweeps,
        "model": "per smoothing level of N cells: 24 N B per red-black sweep (read u, f; write u), 17 N B residual + restriction (read u, f; write coarse f), 17 N B prolongation (read coarse u; read and write u); bottom solve left out",
        "level_shapes": shapes, "level_bytes": level_bytes, "bytes": bytes,
        "copy": copy, "copy_passes": copy_times,
        "floor_ms_per_vcycle": floor_ms, "ms_per_vcycle": ours_ms, "ratio": floor_ratio,
        "pcg_ms_per_application": pcg_ms, "pcg_ratio": pcg_ms / floor_ms,
        "cycle_iterations": cv["iterations"], "cycle_hash_hex": cv["hash_hex"],
        "goal_ratio": GOAL_FLOOR_RATIO, "dof_per_s": dof, "goal_dof_per_s": GOAL_DOF_PER_S,
        "solve_s": fv["solve_s"], "iterations": fv["iterations"], "vcycles": fv["vcycles"],
        "hash_hex": fv["hash_hex"],
    });

    // 4. PyAMG.
    // Ours: the run beside the copy floor (the same configuration as the
    // throughput table's 1-rank row).
    let ours =
        json!({"solve_s": fv["solve_s"], "setup_s": fv["setup_s"], "iterations": fv["iterations"]});
    let reference = if args.no_pyamg {
        Err("skipped (--no-pyamg)".to_string())
    } else {
        pyamg(n_ref)
    };
    let comparison = match &reference {
        Ok(p) => {
            let cells = (n_ref * n_ref * n_ref) as f64;
            let ours_solve = f(&ours, "solve_s");
            let ours_total = ours_solve + f(&ours, "setup_s");
            let p_solve = f(p, "solve_s");
            let p_total = p_solve + f(p, "setup_s");
            println!(
                "\nPyAMG {} (smoothed aggregation + CG, 1 thread) at {n_ref}³: setup {:.2} s, solve {:.2} s, {} iterations, {:.3e} DOF/s",
                p["pyamg"].as_str().unwrap_or("?"),
                f(p, "setup_s"),
                p_solve,
                p["iterations"],
                cells / p_solve
            );
            println!(
                "ours (1 rank): setup {:.2} s, solve {:.2} s, {} iterations, {:.3e} DOF/s -> {:.2}x PyAMG's DOF/s (solve), {:.2}x (setup + solve)",
                f(&ours, "setup_s"),
                ours_solve,
                ours["iterations"],
                cells / ours_solve,
                p_solve / ours_solve,
                p_total / ours_total
            );
            json!({"pyamg": p, "ours": ours, "ratio_solve": p_solve / ours_solve, "ratio_setup_solve": p_total / ours_total})
        }
        Err(why) => {
            println!("\nPyAMG reference skipped: {why}");
            json!({"skipped": why})
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    let report = json!({
        "quick": args.quick,
        "cores": cores,
        "problem": "manufactured Poisson, Dirichlet, cell-centred 7-point; MG-PCG, V(2,2), tol 1e-10",
        "dof_per_s": "cells / solve time (median of repeats)",
        "runs": runs,
        "factor": {"n": nf, "residuals": res, "last_three": last3, "mean": v["factor"], "cycles": v["iterations"],
                   "power_iteration": power, "power_cycles": factor_cycles, "goal": 0.12},
        "floor": floor,
        "reference": comparison,
        "plot": "multigrid.png",
        "seconds": start.elapsed().as_secs_f64(),
    });
    let png = out_dir.join("multigrid.png");
    let pyamg_dof = comparison["pyamg"]["solve_s"]
        .as_f64()
        .map(|s| (n_ref.pow(3)) as f64 / s);
    draw(&png, n_ref, floor_ms, ours_ms, dof, pyamg_dof)
        .with_context(|| format!("cannot draw {}", png.display()))?;
    let path = out_dir.join("multigrid.json");
    util::write_report(&path, &report, &[&png], start)?;
    Ok(())
}

/// The plot: time per V-cycle against its floor, and DOF/s against PyAMG
/// and the goal.
fn draw(
    path: &Path,
    n: usize,
    floor_ms: f64,
    ours_ms: f64,
    ours_dof: f64,
    pyamg_dof: Option<f64>,
) -> Result<()> {
    register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| anyhow!("the embedded DejaVu Sans font is invalid"))?;
    let root = BitMapBackend::new(path, (1100, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let body = root.titled(
        &format!("multigrid, {n}³ Poisson, one core: MG-PCG V(2,2) to 1e-10"),
        ("sans-serif", 20),
    )?;
    let panels = body.split_evenly((1, 2));
    let bars = |area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
                caption: &str,
                unit: &str,
                items: &[(&str, f64, RGBColor)],
                goal: Option<(f64, &str)>,
                log: bool|
     -> Result<()> {
        let top = items
            .iter()
            .map(|i| i.1)
            .chain(goal.map(|g| g.0))
            .fold(0.0f64, f64::max)
            * 1.3;
        let bottom = items
            .iter()
            .map(|i| i.1)
            .chain(goal.map(|g| g.0))
            .fold(f64::INFINITY, f64::min)
            * 0.5;
        let mut builder = ChartBuilder::on(area);
        builder
            .caption(caption, ("sans-serif", 17))
            .margin(14)
            .x_label_area_size(36)
            .y_label_area_size(70);
        let c = &mut builder;
        let labels: Vec<String> = items.iter().map(|i| i.0.to_string()).collect();
        let nx = items.len() as f64;
        let xfmt = move |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-9 && i >= 0.0 && (i as usize) < labels.len() {
                labels[i as usize].clone()
            } else {
                String::new()
            }
        };
        macro_rules! body {
            ($chart:expr, $lo:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .disable_x_mesh()
                    .x_labels(items.len() * 2 + 1)
                    .x_label_formatter(&xfmt)
                    .y_desc(unit)
                    .y_labels(8)
                    .y_label_formatter(&|y| format!("{y:.2}"))
                    .draw()?;
                for (i, (_, v, col)) in items.iter().enumerate() {
                    let x = i as f64;
                    chart.draw_series(std::iter::once(Rectangle::new(
                        [(x - 0.3, $lo), (x + 0.3, *v)],
                        col.filled(),
                    )))?;
                    chart.draw_series(std::iter::once(Text::new(
                        format!("{v:.3}"),
                        (
                            x - 0.15,
                            *v * if log { 1.08 } else { 1.0 } + if log { 0.0 } else { top * 0.02 },
                        ),
                        ("sans-serif", 15),
                    )))?;
                }
                if let Some((g, label)) = goal {
                    chart.draw_series(std::iter::once(PathElement::new(
                        vec![(-0.5, g), (nx - 0.5, g)],
                        RED.stroke_width(2),
                    )))?;
                    chart.draw_series(std::iter::once(Text::new(
                        label.to_string(),
                        (-0.45, g * if log { 1.1 } else { 1.03 }),
                        ("sans-serif", 14).into_font().color(&RED),
                    )))?;
                }
            }};
        }
        if log {
            body!(
                c.build_cartesian_2d(-0.5..nx - 0.5, (bottom..top).log_scale())?,
                bottom
            );
        } else {
            body!(c.build_cartesian_2d(-0.5..nx - 0.5, 0.0..top)?, 0.0);
        }
        Ok(())
    };
    let blue = RGBColor(31, 119, 180);
    let grey = RGBColor(150, 150, 150);
    let orange = RGBColor(255, 127, 14);
    bars(
        &panels[0],
        "time per V-cycle (ms)",
        "ms",
        &[
            ("memory-traffic floor", floor_ms, grey),
            ("ours", ours_ms, blue),
        ],
        Some((GOAL_FLOOR_RATIO * floor_ms, "goal: 2x the floor")),
        false,
    )?;
    let mut items = vec![("ours", ours_dof / 1e6, blue)];
    if let Some(p) = pyamg_dof {
        items.push(("PyAMG (SA + CG)", p / 1e6, orange));
    }
    bars(
        &panels[1],
        "solve throughput (million DOF/s, log scale)",
        "MDOF/s",
        &items,
        Some((GOAL_DOF_PER_S / 1e6, "goal")),
        true,
    )?;
    root.present()?;
    Ok(())
}

/// `--gpu`: on one GPU through `poisson --backend cuda` (the fine levels on
/// the device, the coarse ones and the bottom on the host), at 256³ and
/// 512³ (`--quick`: 128³ and 256³), Dirichlet, constant coefficients:
///
/// 1. **MG-PCG to 1e-10** on one rank on the GPU against the same build's
///    CPU solver on every core of the machine (in-process ranks), in
///    alternating rounds (`--rounds`, default 3): the median solve time of
///    each (each run's own median of 3 repeats), the spread over the
///    rounds, the iterations (which must agree: the two give the same
///    bits), DOF/s and the ratio.
/// 2. **One V-cycle against its memory-traffic floor**: five V-cycles
///    timed one by one on the device after the solves (median), against
///    the floor's bytes ([`vcycle_bytes`], the same count as the CPU
///    table's) at the device-to-device copy bandwidth the same run
///    measures (a copy of one fine field into another, median of ten).
///    Goal: within 2x.
fn run_gpu(args: &Args) -> Result<()> {
    let out_dir = match &args.out {
        Some(d) => d.clone(),
        None => util::target_dir()?.join("bench").join("multigrid-gpu"),
    };
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let bin = match &args.poisson {
        Some(p) => p.clone(),
        None => util::build_with(
            util::Artifact {
                package: "poisson",
                name: "poisson",
                example: false,
            },
            Some("cuda"),
        )?,
    };
    let dir = out_dir.join(format!(".scratch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let sizes: [usize; 2] = if args.quick { [128, 256] } else { [256, 512] };
    let rounds = args.rounds.unwrap_or(3).max(1);
    let case = |n| Case {
        n,
        ranks: 1,
        ca: true,
        solver: "pcg",
        repeat: 3,
        factor_cycles: 0,
    };
    // The header: the GPU from a first small run.
    let probe = run_args(
        &bin,
        &dir,
        Case {
            repeat: 1,
            ..case(32)
        },
        &["--backend", "cuda"],
    )?;
    println!(
        "bench multigrid --gpu: GPU {}; CPU {} ({cores} cores, in-process ranks, the same build)",
        probe["device"].as_str().unwrap_or("?"),
        util::cpu_model()
    );
    println!("MG-PCG V(2,2) to 1e-10, Dirichlet, constant coefficients; {rounds} rounds, GPU and CPU alternated, each run the median of 3 solves");
    println!(
        "\n{:>5} {:>10} {:>15} {:>5} {:>11} {:>10} {:>15} {:>5} {:>11} {:>8}",
        "n",
        "GPU s",
        "GPU spread",
        "its",
        "GPU DOF/s",
        "CPU s",
        "CPU spread",
        "its",
        "CPU DOF/s",
        "GPU/CPU"
    );
    let mut floors = Vec::new();
    let mut results = Vec::new();
    for &n in &sizes {
        let (mut g, mut c) = (Vec::new(), Vec::new());
        let (mut gits, mut cits) = (0.0, 0.0);
        let mut last = Value::Null;
        for _ in 0..rounds {
            let v = run_args(&bin, &dir, case(n), &["--backend", "cuda"])?;
            g.push(f(&v, "solve_s"));
            gits = f(&v, "iterations");
            last = v;
            let v = run_args(
                &bin,
                &dir,
                Case {
                    ranks: cores,
                    ..case(n)
                },
                &[],
            )?;
            c.push(f(&v, "solve_s"));
            cits = f(&v, "iterations");
        }
        let (gm, cm) = (util::median(&g), util::median(&c));
        let spread = |v: &[f64]| {
            let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = v.iter().cloned().fold(0.0, f64::max);
            format!("{lo:.4}..{hi:.4}")
        };
        let cells = (n * n * n) as f64;
        println!(
            "{:>5} {:>10.4} {:>15} {:>5} {:>11.3e} {:>10.4} {:>15} {:>5} {:>11.3e} {:>8.2}",
            n,
            gm,
            spread(&g),
            gits,
            cells / gm,
            cm,
            spread(&c),
            cits,
            cells / cm,
            cm / gm
        );
        if gits != cits {
            println!(
                "  note: the GPU took {gits} iterations and the CPU {cits}: they should agree"
            );
        }
        let shapes = level_shapes(&last);
        let (bytes, _) = vcycle_bytes(&shapes, 4);
        let t = &last["device_timing"];
        let (vms, gbs) = (f(t, "vcycle_ms"), f(t, "copy_gbs"));
        let floor_ms = 1e3 * bytes / (gbs * 1e9);
        floors.push((n, vms, bytes, gbs, floor_ms));
        results.push(json!({
            "n": n, "gpu_solve_s": g, "cpu_solve_s": c, "gpu_iterations": gits,
            "cpu_iterations": cits, "vcycle_ms": vms, "floor_bytes": bytes,
            "copy_gbs": gbs, "floor_ms": floor_ms, "device": last["device"],
        }));
    }
    println!(
        "\n{:>5} {:>11} {:>12} {:>11} {:>10} {:>10} {:>6}",
        "n", "V-cycle ms", "floor bytes", "copy GB/s", "floor ms", "V/floor", "goal"
    );
    for (n, vms, bytes, gbs, floor_ms) in &floors {
        let ratio = vms / floor_ms;
        println!(
            "{:>5} {:>11.3} {:>12.3e} {:>11.0} {:>10.3} {:>10.2} {:>6}",
            n,
            vms,
            bytes,
            gbs,
            floor_ms,
            ratio,
            if ratio <= GOAL_FLOOR_RATIO {
                "met"
            } else {
                "not met"
            }
        );
    }
    println!("floor: per smoothing level 24 B a cell a sweep (read u and f, write u), 17 B for the residual and restriction, 17 B for the prolongation; the dense bottom left out");
    let path = out_dir.join("multigrid-gpu.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&json!({ "cases": results }))?,
    )
    .with_context(|| format!("cannot write {}", path.display()))?;
    let _ = std::fs::remove_dir_all(&dir);
    println!("wrote {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{asymptotic, vcycle_bytes};

    #[test]
    fn vcycle_bytes_counts_every_smoothing_level_once() {
        // Two smoothing levels (64 and 8 cells) and the bottom (1 cell).
        let (total, per) = vcycle_bytes(&[[4, 4, 4], [2, 2, 2], [1, 1, 1]], 4);
        assert_eq!(per, vec![64.0 * 130.0, 8.0 * 130.0]);
        assert_eq!(total, 72.0 * 130.0);
        // V(1,1): 2 sweeps of 24 B plus 34 B of transfers per cell.
        assert_eq!(vcycle_bytes(&[[2, 2, 2], [1, 1, 1]], 2).0, 8.0 * 82.0);
        assert_eq!(vcycle_bytes(&[[2, 2, 2]], 4).0, 0.0);
    }

    #[test]
    fn asymptotic_factor_takes_the_worst_of_the_last_three() {
        let r = [1.0, 0.5, 0.1, 0.02, 0.002, 0.0008];
        // ratios 0.5, 0.2, 0.2, 0.1, 0.4 -> last three 0.2, 0.1, 0.4
        assert!((asymptotic(&r) - 0.4).abs() < 1e-12);
    }
}
