//! `cargo xtask bench dynamo`: the Christensen et al. 2001 benchmark
//! values, and the time per step and its phases. The dynamo app's
//! bit-exactness suite is [`crate::bitexact::dynamo`].
//!
//! `--case 0|1` runs the benchmark configuration
//! (`apps/dynamo/examples/case0.toml`, `case1.toml`) to its end time and
//! prints each value beside the published one (Christensen et al. 2001,
//! their table of the standard solutions) with the relative error; case 0
//! fails when a value is off by more than 1 %. `--perf` runs both cases at
//! the benchmark resolution with `dt = 1e-4` for `--steps` steps on each of
//! `--ranks` and prints seconds per step and per phase.

use crate::bitexact::dynamo::build;
use crate::util;
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Options of `cargo xtask bench dynamo`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// The benchmark case: 0 (convection) or 1 (dynamo).
    #[arg(long, default_value_t = 0)]
    pub case: u8,
    /// Run to this time instead of the configuration's end time.
    #[arg(long)]
    pub end_time: Option<f64>,
    /// Ranks (comma-separated for --perf).
    #[arg(long, value_delimiter = ',', default_values_t = vec![1usize])]
    pub ranks: Vec<usize>,
    /// Ranks along the latitudes (2d distribution when > 1).
    #[arg(long, default_value_t = 1)]
    pub pi_theta: usize,
    /// Run under mpirun.
    #[arg(long)]
    pub mpi: bool,
    /// Measure the time per step of cases 0 and 1 instead.
    #[arg(long)]
    pub perf: bool,
    /// Steps per --perf run.
    #[arg(long, default_value_t = 100)]
    pub steps: usize,
    /// Use this dynamo binary instead of building one.
    #[arg(long)]
    pub dynamo: Option<PathBuf>,
    /// With --perf: time MagIC too, from this folder of builds
    /// (`build-native`, `build-shtns` made by
    /// `apps/dynamo/magic/build_magic.sh`; default `target/magic` when it
    /// exists), in the same run on the same ranks.
    #[arg(long)]
    pub magic: Option<PathBuf>,
    /// Output folder (default target/bench/dynamo).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Christensen et al. (2001), the standard solutions (their Table 2).
const CASE0: [(&str, f64); 4] = [
    ("Ekin", 58.348),
    ("T", 0.42812),
    ("u_phi", -10.1571),
    ("drift", 0.1824),
];
const CASE1: [(&str, f64); 6] = [
    ("Ekin", 30.773),
    ("Emag", 626.41),
    ("T", 0.37338),
    ("u_phi", -7.6250),
    ("B_theta", -4.9289),
    ("drift", -3.1017),
];

fn example(case: u8) -> Result<PathBuf> {
    let p = util::workspace_root()
        .join("apps/dynamo/examples")
        .join(format!("case{case}.toml"));
    if !p.is_file() {
        bail!("no configuration {}", p.display());
    }
    Ok(p)
}

fn f(v: &Value, path: &[&str]) -> Option<f64> {
    let mut x = v;
    for k in path {
        x = &x[*k];
    }
    x.as_f64()
}

/// The mean drift over the last quarter of the time series (the samples'
/// rates are over equal intervals).
fn mean_drift(csv: &Path) -> Result<f64> {
    let text =
        std::fs::read_to_string(csv).with_context(|| format!("cannot read {}", csv.display()))?;
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().context("empty csv")?.split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).context("missing column");
    let (ct, cd) = (col("time")?, col("drift")?);
    let rows: Vec<(f64, f64)> = lines
        .filter_map(|l| {
            let v: Vec<&str> = l.split(',').collect();
            Some((v.get(ct)?.parse().ok()?, v.get(cd)?.parse().ok()?))
        })
        .collect();
    let t_end = rows.last().map_or(0.0, |r| r.0);
    let tail: Vec<f64> = rows
        .iter()
        .filter(|r| r.0 >= 0.75 * t_end && r.1.is_finite())
        .map(|r| r.1)
        .collect();
    if tail.is_empty() {
        bail!("no drift samples in {}", csv.display());
    }
    Ok(tail.iter().sum::<f64>() / tail.len() as f64)
}

/// `cargo xtask bench dynamo`.
pub fn bench(a: &BenchArgs) -> Result<()> {
    let bin = match &a.dynamo {
        Some(b) => b.clone(),
        None => build(a.mpi)?,
    };
    let out = match &a.out {
        Some(d) => d.clone(),
        None => util::target_dir()?.join("bench").join("dynamo"),
    };
    std::fs::create_dir_all(&out)?;
    if a.perf {
        return perf(a, &bin, &out);
    }
    let reference: &[(&str, f64)] = match a.case {
        0 => &CASE0,
        1 => &CASE1,
        c => bail!("--case {c}: the benchmark has cases 0 and 1"),
    };
    let ranks = a.ranks.first().copied().unwrap_or(1);
    let dir = out.join(format!("case{}", a.case));
    let json = dir.join("report.json");
    let mut cmd = util::ranks_command(&bin, &[], ranks, a.mpi);
    cmd.arg("--config")
        .arg(example(a.case)?)
        .args(["--pi-theta", &a.pi_theta.to_string(), "-q", "--no-vtk"])
        .arg("--output")
        .arg(&dir)
        .arg("--json")
        .arg(&json);
    if let Some(t) = a.end_time {
        cmd.args(["--end-time", &t.to_string(), "--steps", "100000000"]);
    }
    println!(
        "bench dynamo case {}: {ranks} rank(s), output in {}",
        a.case,
        dir.display()
    );
    let status = util::run_streamed(cmd, Duration::from_secs(48 * 3600))?;
    if !status.is_some_and(|s| s.success()) {
        bail!("the dynamo run failed ({status:?})");
    }
    let v: Value = util::read_json("dynamo", &json).map_err(anyhow::Error::msg)?;
    let drift = mean_drift(&dir.join("dynamo.csv"))?;
    let ours = |name: &str| -> Option<f64> {
        match name {
            "Ekin" => f(&v, &["last", "energies", "ekin"]),
            "Emag" => f(&v, &["last", "energies", "emag"]),
            "T" => f(&v, &["last", "midpoint", "temperature"]),
            "u_phi" => f(&v, &["last", "midpoint", "u_phi"]),
            "B_theta" => f(&v, &["last", "midpoint", "b_theta"]),
            "drift" => Some(drift),
            _ => None,
        }
    };
    println!(
        "case {} at t = {:.4} ({} steps, {:.4} s/step on {ranks} rank(s)):",
        a.case,
        f(&v, &["time"]).unwrap_or(f64::NAN),
        v["final_step"],
        f(&v, &["seconds_per_step"]).unwrap_or(f64::NAN)
    );
    println!(
        "{:<8} {:>14} {:>14} {:>10}",
        "quantity", "ours", "published", "rel. error"
    );
    let mut worst: f64 = 0.0;
    for (name, published) in reference {
        let x = ours(name).unwrap_or(f64::NAN);
        let err = (x - published).abs() / published.abs();
        worst = worst.max(if err.is_nan() { f64::INFINITY } else { err });
        println!(
            "{name:<8} {x:>14.6} {published:>14.6} {:>9.3}%",
            100.0 * err
        );
    }
    println!("largest relative error {:.3}%", 100.0 * worst);
    if a.case == 0 && worst > 0.01 {
        bail!("case 0: a value is off by more than 1 % of the published one");
    }
    Ok(())
}

/// MagIC's mean wall time per step on `np` ranks for `case`
/// (`apps/dynamo/magic/run_magic.sh`).
fn run_magic(build: &Path, np: usize, case: u8, steps: usize) -> Result<f64> {
    let script = util::workspace_root().join("apps/dynamo/magic/run_magic.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(build)
        .args([np.to_string(), case.to_string(), steps.to_string()])
        .output()
        .with_context(|| format!("cannot run {}", script.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .find_map(|w| w.strip_prefix("seconds_per_step="))
        .and_then(|v| v.parse().ok())
        .with_context(|| {
            format!(
                "run_magic.sh printed no seconds_per_step ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            )
        })
}

/// The time per step and its phases at the benchmark resolution.
fn perf(a: &BenchArgs, bin: &Path, out: &Path) -> Result<()> {
    println!(
        "bench dynamo --perf: nr 33, lmax 64, ntheta 96, nphi 192, CNAB2, dt = 1e-4, {} steps{}",
        a.steps,
        if a.mpi {
            ", mpirun"
        } else {
            ", in-process ranks"
        }
    );
    println!(
        "{:<5} {:>5} {:>7} {:>10} {:>11} {:>9} {:>9} {:>9} {:>9}",
        "case",
        "ranks",
        "grid",
        "s/step",
        "transforms",
        "products",
        "transp.",
        "radial",
        "implicit"
    );
    let magic = a.magic.clone().or_else(|| {
        let d = util::target_dir().ok()?.join("magic");
        d.is_dir().then_some(d)
    });
    if let Some(m) = &magic {
        println!(
            "MagIC from {} (apps/dynamo/magic/run_magic.sh: its own mean wall time per step, mpirun, the same ranks)",
            m.display()
        );
    }
    for case in [0u8, 1] {
        for &ranks in &a.ranks {
            let json = out.join(format!("perf_case{case}_{ranks}.json"));
            let mut cmd = util::ranks_command(bin, &[], ranks, a.mpi);
            cmd.arg("--config")
                .arg(example(case)?)
                .args([
                    "--steps",
                    &a.steps.to_string(),
                    "--dt",
                    "1e-4",
                    "--dtmax",
                    "1e-4",
                ])
                .args(["--diag-every", &a.steps.to_string(), "-q", "--no-vtk"])
                .args(["--pi-theta", &a.pi_theta.to_string()])
                .arg("--json")
                .arg(&json);
            let ran = util::run_report(cmd, &json, Duration::from_secs(3600), |p| {
                util::read_json::<Value>("dynamo", p)
            });
            let v = match ran.result {
                Ok(v) => v,
                Err(e) => bail!("case {case} on {ranks} ranks: {e}"),
            };
            let steps = v["steps"].as_f64().unwrap_or(1.0).max(1.0);
            let evals = f(&v, &["phases", "evaluations"]).unwrap_or(1.0).max(1.0);
            let per = |k: &str| f(&v, &["phases", k]).unwrap_or(f64::NAN) / evals * (evals / steps);
            let ours = f(&v, &["seconds_per_step"]).unwrap_or(f64::NAN);
            let mut refs = String::new();
            for (label, build) in [
                ("MagIC built-in", "build-native"),
                ("MagIC+SHTns", "build-shtns"),
            ] {
                let Some(dir) = magic.as_ref().map(|m| m.join(build)) else {
                    continue;
                };
                if !dir.join("magic.exe").is_file() {
                    continue;
                }
                match run_magic(&dir, ranks, case, a.steps) {
                    Ok(t) => refs += &format!("  {label} {t:.4} s (ours / it {:.2})", ours / t),
                    Err(e) => refs += &format!("  {label}: {e}"),
                }
            }
            println!(
                "{:<5} {:>5} {:>7} {:>10.4} {:>11.4} {:>9.4} {:>9.4} {:>9.4} {:>9.4}{refs}",
                case,
                ranks,
                format!("{}x{}", v["grid"][0], v["grid"][1]),
                ours,
                per("transforms"),
                per("products"),
                per("transpositions"),
                per("radial"),
                f(&v, &["phases", "implicit"]).unwrap_or(f64::NAN) / steps
            );
        }
    }
    println!("phases are rank 0's seconds per step; transforms include the theta transposition of the 2d scheme");
    Ok(())
}
