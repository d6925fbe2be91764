//! `cargo xtask bench method-cost [--quick] [--out DIR]`: equal-accuracy
//! cost of the heat operators on the periodic Gaussian.
//!
//! For each target relative RMS error (1e-2 and 1e-8) and each operator
//! (FD-2, FD-4, FD-8, FD-12, FD-20, spectral) the smallest grid `n^3` that
//! reaches it at the final time comes from heat3d's validated error model
//! (`heat3d::cost`, exact in time; its test checks it against measured
//! runs to 1 %). The cost per step at that grid is measured by running
//! heat3d (production step: the fused Euler sweep with overlap for FD, the
//! exact integrating factor for spectral) on in-process ranks, one per core
//! (one rank for grids thinner than the halo).
//! Grids above the measured limit (256, or 128 with `--quick`) are too large
//! for this machine; their cost is extrapolated from the largest measured
//! grid of that operator (`n^3` for FD, `n^3 log n` for spectral) and
//! marked `~`. Writes `method_cost.json`.

use crate::util;
use anyhow::{bail, Context, Result};
use heat3d::config::{Config, Initial, Operator, PerAxis};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Options of `cargo xtask bench method-cost`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Measure grids up to 128^3 only (extrapolate above).
    #[arg(long)]
    pub quick: bool,
    /// Output folder [default: target/bench/method-cost].
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Final time of the benchmark: the Gaussian (sigma = 0.08 L) widens by a
/// fifth.
const T_FINAL: f64 = 2e-3;
/// Targets (relative RMS error at the final time).
const TARGETS: [f64; 2] = [1e-2, 1e-8];
/// Candidate grids.
const GRIDS: [usize; 24] = [
    8, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1024,
    1536, 2048, 4096,
];

#[derive(Debug, Clone, Serialize)]
struct Row {
    target: f64,
    operator: String,
    n: Option<usize>,
    error: Option<f64>,
    step_seconds: Option<f64>,
    extrapolated: bool,
    ratio_to_cheapest: Option<f64>,
}

fn config(op: Operator, order: usize, n: usize) -> Config {
    Config {
        n: PerAxis::All(n),
        operator: op,
        order,
        initial: Initial::Gaussian,
        sigma: 0.08,
        ..Config::default()
    }
}

/// Relative RMS error of the model at the final time.
fn rel_error(op: Operator, order: usize, n: usize) -> Result<f64> {
    let cfg = config(op, order, n);
    let err = heat3d::cost::model_rms_error(&cfg, T_FINAL)?;
    let norm: f64 = (0..3)
        .map(|d| {
            heat3d::profile(&cfg, d, T_FINAL)
                .iter()
                .map(|x| x * x)
                .sum::<f64>()
        })
        .product::<f64>()
        / (n * n * n) as f64;
    Ok(err / norm.sqrt())
}

/// Median step of heat3d at `n^3` (seconds).
fn step_time(bin: &Path, dir: &Path, op: Operator, order: usize, n: usize) -> Result<f64> {
    let json = dir.join("cost.json");
    let _ = std::fs::remove_file(&json);
    let steps = if op == Operator::Spectral { 8 } else { 40 };
    // Every rank's block must be at least as thick as the halo.
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let ranks = if op == Operator::Fd && n / cores < order / 2 {
        1
    } else {
        cores.min(n)
    };
    let mut cmd = Command::new(bin);
    cmd.args(["--ranks", &ranks.to_string()])
        .args(["--n", &n.to_string()])
        .args(["--order", &order.to_string()])
        .args([
            "--operator",
            if op == Operator::Spectral {
                "spectral"
            } else {
                "fd"
            },
        ])
        .args(["--steps", &steps.to_string()])
        .args(["--warmup", &(steps / 4).to_string()])
        .args(["--no-vtk", "-q", "--json"])
        .arg(&json);
    let out = util::run_captured(cmd, Duration::from_secs(600))?;
    if !out.success() {
        bail!(
            "heat3d at {n}^3 failed: {}\n{}",
            out.status_text(),
            out.stderr.trim_end()
        );
    }
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json)?)?;
    v["timings"]["step"]
        .as_f64()
        .context("no timings.step in the heat3d report")
}

/// Runs the comparison.
pub fn run(args: &Args) -> Result<()> {
    let limit = if args.quick { 128 } else { 256 };
    let out = match &args.out {
        Some(d) => d.clone(),
        None => util::target_dir()?.join("bench").join("method-cost"),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let bin = util::build_heat3d(false)?;
    let dir = util::scratch_dir("method-cost")?;
    let ops = [
        ("FD-2", Operator::Fd, 2),
        ("FD-4", Operator::Fd, 4),
        ("FD-8", Operator::Fd, 8),
        ("FD-12", Operator::Fd, 12),
        ("FD-20", Operator::Fd, 20),
        ("spectral", Operator::Spectral, 2),
    ];
    println!(
        "method cost: periodic Gaussian (sigma = 0.08 L), final time {T_FINAL}, relative RMS error from the validated model; \
         step cost measured on {} in-process rank(s) up to {limit}^3, extrapolated (~) above",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let mut measured: BTreeMap<(String, usize), f64> = BTreeMap::new();
    let mut rows = vec![];
    for target in TARGETS {
        let mut table = vec![];
        for (name, op, order) in ops {
            let mut found = None;
            for n in GRIDS {
                let e = rel_error(op, order, n)?;
                if e <= target {
                    found = Some((n, e));
                    break;
                }
            }
            let (n, err, time, extrapolated) = match found {
                None => (None, None, None, false),
                Some((n, e)) => {
                    let m = n.min(limit);
                    let key = (name.to_string(), m);
                    let t = match measured.get(&key) {
                        Some(&t) => t,
                        None => {
                            let t = step_time(&bin, &dir, op, order, m)?;
                            measured.insert(key, t);
                            t
                        }
                    };
                    let scale = (n as f64 / m as f64).powi(3)
                        * if op == Operator::Spectral {
                            (n as f64).ln() / (m as f64).ln()
                        } else {
                            1.0
                        };
                    (Some(n), Some(e), Some(t * scale), n > m)
                }
            };
            table.push(Row {
                target,
                operator: name.to_string(),
                n,
                error: err,
                step_seconds: time,
                extrapolated,
                ratio_to_cheapest: None,
            });
        }
        let best = table
            .iter()
            .filter_map(|r| r.step_seconds)
            .fold(f64::INFINITY, f64::min);
        println!("\n== target relative RMS error {target:e}");
        println!(
            "{:<10} {:>6} {:>12} {:>14} {:>10}",
            "operator", "n", "error", "ms per step", "vs best"
        );
        for r in &mut table {
            r.ratio_to_cheapest = r.step_seconds.map(|t| t / best);
            match (r.n, r.error, r.step_seconds) {
                (Some(n), Some(e), Some(t)) => println!(
                    "{:<10} {:>6} {:>12.3e} {:>13.3}{} {:>9.2}x",
                    r.operator,
                    n,
                    e,
                    t * 1e3,
                    if r.extrapolated { "~" } else { " " },
                    t / best
                ),
                _ => println!(
                    "{:<10} {:>6} {:>12} {:>14} {:>10}",
                    r.operator, "-", "not reached", "-", "-"
                ),
            }
        }
        if let Some(c) = table
            .iter()
            .filter(|r| r.step_seconds == Some(best))
            .map(|r| r.operator.clone())
            .next()
        {
            println!("cheapest at {target:e}: {c}");
        }
        rows.extend(table);
    }
    let path = out.join("method_cost.json");
    std::fs::write(&path, serde_json::to_string_pretty(&rows)?)?;
    println!("\nwrote {}", path.display());
    Ok(())
}
