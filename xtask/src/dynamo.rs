//! The dynamo app in `cargo xtask`: the `dynamo` suite of `cargo xtask
//! bitexact`, and `cargo xtask bench dynamo` (the Christensen et al. 2001
//! benchmark values, and the time per step and its phases).
//!
//! **Bit-exactness.** Every case runs the dynamo on [`NR`] radial levels
//! and [`NTHETA`] latitudes (lmax 16) with a magnetic field (case 1's
//! initial state, so every potential and every nonlinear term is
//! non-zero) for [`STEPS`] CFL-adaptive CNAB2 steps, and compares the
//! state hash with the in-process 1-rank run. In-process: ranks 2 and 4,
//! every process grid `pi_r x pi_theta` (1d and 2d), every transposition
//! protocol and `auto` (the same for the theta and the l transposition, and
//! crossed pairs), queue lengths 1 and 3. MPI: `mpirun -np` 1, 2, 4, 1d and
//! 2d, three protocols.
//!
//! **Benchmark.** `--case 0|1` runs the benchmark configuration
//! (`apps/dynamo/examples/case0.toml`, `case1.toml`) to its end time and
//! prints each value beside the published one (Christensen et al. 2001,
//! their table of the standard solutions) with the relative error; case 0
//! fails when a value is off by more than 1 %. `--perf` runs both cases at
//! the benchmark resolution with `dt = 1e-4` for `--steps` steps on each of
//! `--ranks` and prints seconds per step and per phase.

use crate::util;
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Radial levels of the suite.
pub const NR: usize = 17;
/// Latitudes of the suite (lmax = 16, nphi = 48).
pub const NTHETA: usize = 24;
/// Steps per case.
pub const STEPS: usize = 12;
const CASE_LIMIT: Duration = Duration::from_secs(120);
const PROTOCOLS: [&str; 6] = ["a2av", "a2aw", "a2ap", "p2p", "pipelined", "auto"];

fn build(mpi: bool) -> Result<PathBuf> {
    util::build_binary(
        util::Artifact {
            package: "dynamo",
            name: "dynamo",
            example: false,
        },
        mpi,
    )
}

/// One suite case.
#[derive(Debug, Clone)]
struct Case {
    ranks: usize,
    pi_theta: usize,
    theta: &'static str,
    l: &'static str,
    queue: usize,
    mpi: bool,
}

fn cases(mpi: bool) -> Vec<Case> {
    let mut v = Vec::new();
    if mpi {
        for (ranks, pi_theta) in [(1, 1), (2, 1), (2, 2), (4, 1), (4, 2)] {
            for p in ["a2av", "a2aw", "p2p"] {
                v.push(Case {
                    ranks,
                    pi_theta,
                    theta: theta_for(pi_theta, p),
                    l: p,
                    queue: 2,
                    mpi,
                });
            }
        }
        return v;
    }
    for (ranks, pi_theta) in [(2, 1), (2, 2), (4, 1), (4, 2), (4, 4)] {
        for queue in [1, 3] {
            for p in PROTOCOLS {
                v.push(Case {
                    ranks,
                    pi_theta,
                    theta: theta_for(pi_theta, p),
                    l: p,
                    queue,
                    mpi,
                });
            }
        }
        // Crossed pairs.
        for (theta, l) in [("p2p", "a2aw"), ("a2ap", "pipelined")] {
            v.push(Case {
                ranks,
                pi_theta,
                theta: theta_for(pi_theta, theta),
                l,
                queue: 2,
                mpi,
            });
        }
    }
    v
}

/// The theta protocol a case names: `p`, or `auto` with one theta rank
/// (no theta transposition, and dynamo refuses another protocol there).
fn theta_for(pi_theta: usize, p: &'static str) -> &'static str {
    if pi_theta == 1 {
        "auto"
    } else {
        p
    }
}

fn base_args() -> Vec<String> {
    [
        "--nr",
        &NR.to_string(),
        "--ntheta",
        &NTHETA.to_string(),
        "--magnetic-prandtl",
        "5",
        "--steps",
        &STEPS.to_string(),
        "--diag-every",
        "4",
        "--no-vtk",
        "-q",
    ]
    .map(String::from)
    .to_vec()
}

/// The fields of the report the suite reads.
#[derive(Debug, Clone)]
struct Got {
    hash: String,
    grid: [u64; 2],
    protocols: [String; 2],
}

fn read_report(p: &Path) -> std::result::Result<Got, String> {
    let v: Value = util::read_json("dynamo", p)?;
    let s = |x: &Value| x.as_str().map(str::to_string).ok_or("missing string");
    let grid = v["grid"]
        .as_array()
        .and_then(|a| Some([a.first()?.as_u64()?, a.get(1)?.as_u64()?]))
        .ok_or("report without grid")?;
    Ok(Got {
        hash: s(&v["state_hash"])?,
        grid,
        protocols: [s(&v["protocols"][0])?, s(&v["protocols"][1])?],
    })
}

fn run_case(bin: &Path, case: &Case, json: &Path) -> util::Ran<Got> {
    let mut cmd = util::ranks_command(bin, &[], case.ranks, case.mpi);
    cmd.args(base_args())
        .args(["--pi-theta", &case.pi_theta.to_string()])
        .args(["--theta-algorithm", case.theta, "--l-algorithm", case.l])
        .args(["--queue", &case.queue.to_string()])
        .arg("--json")
        .arg(json);
    let ran = util::run_report(cmd, json, CASE_LIMIT, read_report);
    let result = ran.result.and_then(|g| {
        let want = [(case.ranks / case.pi_theta) as u64, case.pi_theta as u64];
        if g.grid != want {
            return Err(format!("ran on a {:?} grid, asked for {want:?}", g.grid));
        }
        for (i, (asked, used)) in [case.theta, case.l].iter().zip(&g.protocols).enumerate() {
            let same = asked
                .parse::<dfft::Protocol>()
                .is_ok_and(|a| a == dfft::Protocol::Auto || a.to_string() == *used);
            // With one theta rank there is no theta transposition to run.
            let no_theta = i == 0 && case.pi_theta == 1;
            if !(same || no_theta) {
                return Err(format!("asked for {asked}, the report says {used}"));
            }
        }
        Ok(g)
    });
    util::Ran {
        result,
        seconds: ran.seconds,
    }
}

/// The `dynamo` suite of `cargo xtask bitexact`.
pub fn bitexact(mpi: bool, jobs: usize) -> Result<()> {
    let plain = build(false)?;
    let bin = if mpi { build(true)? } else { plain.clone() };
    let dir = util::scratch_dir(if mpi {
        "bitexact-dynamo-mpi"
    } else {
        "bitexact-dynamo"
    })?;
    let reference = Case {
        ranks: 1,
        pi_theta: 1,
        theta: theta_for(1, "a2av"),
        l: "a2av",
        queue: 1,
        mpi: false,
    };
    let r = run_case(&plain, &reference, &dir.join("ref.json"));
    let ref_hash = match r.result {
        Ok(g) => g.hash,
        Err(e) => bail!("the 1-rank reference failed: {e}"),
    };
    let cs = cases(mpi);
    println!(
        "bitexact dynamo: nr {NR}, ntheta {NTHETA}, {STEPS} steps with a field; {} cases {}; reference hash {ref_hash}",
        cs.len(),
        if mpi { "under mpirun" } else { "in-process" }
    );
    println!(
        "{:>5} {:>8} {:<10} {:<10} {:>5} {:<16} {:<6} {:>6}",
        "ranks", "grid", "theta", "l", "queue", "hash", "result", "time"
    );
    let (mut passed, mut failed) = (0, 0);
    let jobs = if mpi { 1 } else { jobs };
    util::run_ordered(
        &cs,
        jobs,
        |i, c| run_case(&bin, c, &dir.join(format!("case{i}.json"))),
        |_, c, ran| {
            let grid = format!("{}x{}", c.ranks / c.pi_theta, c.pi_theta);
            let (hash, ok, why) = match &ran.result {
                Ok(g) if g.hash == ref_hash => (g.hash.clone(), true, String::new()),
                Ok(g) => (g.hash.clone(), false, "hash differs".to_string()),
                Err(e) => ("-".to_string(), false, e.clone()),
            };
            println!(
                "{:>5} {:>8} {:<10} {:<10} {:>5} {:<16} {:<6} {:>5.1}s",
                c.ranks,
                grid,
                c.theta,
                c.l,
                c.queue,
                hash,
                if ok { "ok" } else { "FAIL" },
                ran.seconds
            );
            if ok {
                passed += 1;
            } else {
                failed += 1;
                eprintln!("{}", util::tail(&why, 20));
            }
        },
    );
    println!("bitexact dynamo: {passed} passed, {failed} failed");
    if failed > 0 {
        bail!("{failed} dynamo case(s) failed or differed");
    }
    Ok(())
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suite_sizes() {
        assert_eq!(cases(false).len(), 5 * (2 * PROTOCOLS.len() + 2));
        assert_eq!(cases(true).len(), 15);
        for p in PROTOCOLS {
            p.parse::<dfft::Protocol>().unwrap();
        }
    }
}
