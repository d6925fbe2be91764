//! `cargo xtask bench scaling APP`: an application over rank counts on one
//! machine, each run's JSON report kept and a table printed from them.
//!
//! - `dynamo`: strong scaling at the benchmark's resolution (cases 0 and 1,
//!   `examples/case{0,1}.toml`), the 1d distribution (`pi_theta = 1`) and
//!   the 2d one (`pi_theta` 2 and 4 where they divide the rank count);
//!   seconds a step with the phases (transforms, products,
//!   transpositions, radial, implicit).
//! - `flow`: weak scaling at about 256k cells a rank (n = 64, 80, 96, 128,
//!   160 for 1, 2, 4, 8, 16 ranks), the simple cubic array at c = 0.125,
//!   cut cells, 10 Stokes steps, communication avoidance on and off.
//! - `poisson`: strong scaling of MG-PCG to 1e-10 at the given sizes
//!   (`--sizes`, default 128 and 256), communication avoidance on and off,
//!   the median of 3 solves.
//!
//! Under `--mpi` (default when `mpirun` answers) each run is `mpirun -np P`
//! of the app built with its `mpi` feature; otherwise in-process ranks.
//! The reports go to `--out` (default `target/bench/scaling/APP`).

use crate::util;
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The applications this task scales.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum App {
    /// dynamo strong scaling, 1d and 2d distributions.
    Dynamo,
    /// flow weak scaling, communication avoidance on and off.
    Flow,
    /// poisson strong scaling, communication avoidance on and off.
    Poisson,
}

/// Options of `cargo xtask bench scaling`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The application.
    #[arg(value_enum)]
    pub app: App,
    /// Rank counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16")]
    pub ranks: Vec<usize>,
    /// Steps a dynamo run (its cost is the seconds a step).
    #[arg(long, default_value_t = 100)]
    pub steps: usize,
    /// poisson's grid sizes.
    #[arg(long, value_delimiter = ',', default_value = "128,256")]
    pub sizes: Vec<usize>,
    /// In-process ranks even where mpirun exists.
    #[arg(long)]
    pub in_process: bool,
    /// Folder for the reports (default: target/bench/scaling/APP).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Longest one run may take.
const RUN_LIMIT: Duration = Duration::from_secs(3600);

/// flow's cells per axis for about 256k cells a rank.
fn flow_size(ranks: usize) -> Option<usize> {
    match ranks {
        1 => Some(64),
        2 => Some(80),
        4 => Some(96),
        8 => Some(128),
        16 => Some(160),
        _ => None,
    }
}

/// One run: its label, the app's arguments, and the rank count.
struct Run {
    label: String,
    args: Vec<String>,
    ranks: usize,
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn runs(a: &Args) -> Result<Vec<Run>> {
    let mut out = Vec::new();
    match a.app {
        App::Dynamo => {
            let root = util::workspace_root();
            for case in [0, 1] {
                let config = root.join(format!("apps/dynamo/examples/case{case}.toml"));
                for &p in &a.ranks {
                    for pt in [1, 2, 4] {
                        if p % pt != 0 || pt > p {
                            continue;
                        }
                        let mut args = vec!["--config".to_string(), config.display().to_string()];
                        args.extend(strings(&["--steps", &a.steps.to_string()]));
                        args.extend(strings(&["--diag-every", &a.steps.to_string()]));
                        args.extend(strings(&["--pi-theta", &pt.to_string(), "--no-vtk"]));
                        out.push(Run {
                            label: format!("case{case}_{p}_{pt}"),
                            args,
                            ranks: p,
                        });
                    }
                }
            }
        }
        App::Flow => {
            for &p in &a.ranks {
                let Some(n) = flow_size(p) else {
                    bail!("flow's weak scaling has sizes for 1, 2, 4, 8 and 16 ranks, got {p}");
                };
                for ca in ["true", "false"] {
                    out.push(Run {
                        label: format!("weak_{p}_{ca}"),
                        args: strings(&[
                            "--n",
                            &n.to_string(),
                            "--steps",
                            "10",
                            "--steady-tol",
                            "0",
                            "--comm-avoiding",
                            ca,
                            "--no-vtk",
                        ]),
                        ranks: p,
                    });
                }
            }
        }
        App::Poisson => {
            for &n in &a.sizes {
                for &p in &a.ranks {
                    for ca in ["on", "off"] {
                        out.push(Run {
                            label: format!("{n}_{p}_{ca}"),
                            args: strings(&["--n", &n.to_string(), "--ca", ca, "--repeat", "3"]),
                            ranks: p,
                        });
                    }
                }
            }
        }
    }
    Ok(out)
}

fn name(app: App) -> &'static str {
    match app {
        App::Dynamo => "dynamo",
        App::Flow => "flow",
        App::Poisson => "poisson",
    }
}

/// Runs every case, then prints the table.
pub fn run(a: &Args) -> Result<()> {
    if a.ranks.is_empty() || a.ranks.contains(&0) {
        bail!(
            "--ranks must list rank counts of at least 1, got {:?}",
            a.ranks
        );
    }
    let app = name(a.app);
    let mpi = !a.in_process && util::mpirun_available();
    let bin = util::build_binary(
        util::Artifact {
            package: app,
            name: app,
            example: false,
        },
        mpi,
    )?;
    let out = match &a.out {
        Some(d) => d.clone(),
        None => util::target_dir()?.join("bench").join("scaling").join(app),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    println!(
        "bench scaling {app}: {} on {}, reports in {}",
        if mpi { "mpirun" } else { "in-process ranks" },
        util::cpu_model(),
        out.display()
    );
    let mut failed = Vec::new();
    let mut done = Vec::new();
    for r in runs(a)? {
        let json = out.join(format!("{}.json", r.label));
        let mut cmd = util::ranks_command(&bin, &r.args, r.ranks, mpi);
        cmd.args(["--quiet", "--json"]).arg(&json);
        cmd.stdout(std::process::Stdio::null());
        eprintln!("$ {} ranks: {app} {}", r.ranks, r.args.join(" "));
        match util::run_streamed(cmd, RUN_LIMIT)? {
            Some(s) if s.success() => done.push(r.label),
            Some(s) => failed.push(format!("{} ({s})", r.label)),
            None => failed.push(format!("{} (past {} s)", r.label, RUN_LIMIT.as_secs())),
        }
    }
    table(a.app, &out, &done)?;
    if !failed.is_empty() {
        bail!("runs that failed: {}", failed.join(", "));
    }
    Ok(())
}

/// The reports of the runs `labels` in `dir` (this invocation's only: a
/// folder that also holds an earlier run's reports mixes none of them in).
fn read(dir: &Path, labels: &[String]) -> Result<Vec<(String, Value)>> {
    let mut rows = Vec::new();
    for label in labels {
        let p = dir.join(format!("{label}.json"));
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        let v: Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))?;
        rows.push((label.clone(), v));
    }
    Ok(rows)
}

fn f(v: &Value, path: &[&str]) -> f64 {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_f64)
        .unwrap_or(f64::NAN)
}

/// The table of the reports of the runs `labels` in `dir`.
fn table(app: App, dir: &Path, labels: &[String]) -> Result<()> {
    let mut rows = read(dir, labels)?;
    let parts = |l: &str| -> Vec<String> { l.split('_').map(str::to_string).collect() };
    match app {
        App::Dynamo => {
            // case{c}_{p}_{pt}
            rows.sort_by_key(|(l, _)| {
                let p = parts(l);
                (
                    p[0].clone(),
                    p[1].parse::<usize>().unwrap_or(0),
                    p[2].clone(),
                )
            });
            println!(
                "{:>5} {:>3} {:>6} {:>8} {:>8} {:>8} {:>7} {:>8} {:>7} {:>8}  theta/l protocols",
                "case",
                "P",
                "grid",
                "s/step",
                "speedup",
                "transf.",
                "prod.",
                "transp.",
                "radial",
                "implicit"
            );
            let mut base = std::collections::HashMap::new();
            for (l, r) in &rows {
                let p = parts(l);
                let s = f(r, &["seconds_per_step"]);
                if p[1] == "1" {
                    base.insert(p[0].clone(), s);
                }
                let n = f(r, &["steps"]).max(1.0);
                let ph = |k: &str| f(r, &["phases", k]) / n;
                println!(
                    "{:>5} {:>3} {:>3}x{:<2} {:>8.4} {:>8.2} {:>8.4} {:>7.4} {:>8.4} {:>7.4} {:>8.4}  {}/{}",
                    &p[0][4..],
                    p[1],
                    r["grid"][0],
                    r["grid"][1],
                    s,
                    base.get(&p[0]).copied().unwrap_or(s) / s,
                    ph("transforms"),
                    ph("products"),
                    ph("transpositions"),
                    ph("radial"),
                    ph("implicit"),
                    r["protocols"][0].as_str().unwrap_or("?"),
                    r["protocols"][1].as_str().unwrap_or("?")
                );
            }
        }
        App::Flow => {
            // weak_{p}_{ca}
            rows.sort_by_key(|(l, _)| {
                let p = parts(l);
                (p[2].clone(), p[1].parse::<usize>().unwrap_or(0))
            });
            println!(
                "{:>3} {:>4} {:>5} {:>8} {:>12} {:>6} {:>9} {:>10} {:>7} {:>10}",
                "P",
                "n",
                "CA",
                "s/step",
                "Mcell/s/rank",
                "eff",
                "momentum",
                "projection",
                "halo",
                "its m/p"
            );
            let mut base = std::collections::HashMap::new();
            for (l, r) in &rows {
                let p = parts(l);
                let m = f(r, &["mcells_per_rank"]);
                if p[1] == "1" {
                    base.insert(p[2].clone(), m);
                }
                println!(
                    "{:>3} {:>4} {:>5} {:>8.3} {:>12.3} {:>6.2} {:>9.3} {:>10.3} {:>7.3} {:>5.1}/{:<4.1}",
                    p[1],
                    r["config"]["n"],
                    p[2],
                    f(r, &["seconds_per_step"]),
                    m,
                    m / base.get(&p[2]).copied().unwrap_or(m),
                    f(r, &["phases", "momentum"]),
                    f(r, &["phases", "projection"]),
                    f(r, &["phases", "halo"]),
                    r["iterations"][0].as_f64().unwrap_or(f64::NAN),
                    r["iterations"][1].as_f64().unwrap_or(f64::NAN)
                );
            }
        }
        App::Poisson => {
            // {n}_{p}_{ca}
            rows.sort_by_key(|(l, _)| {
                let p = parts(l);
                (
                    p[0].parse::<usize>().unwrap_or(0),
                    p[2].clone(),
                    p[1].parse::<usize>().unwrap_or(0),
                )
            });
            println!(
                "{:>4} {:>3} {:>3} {:>4} {:>9} {:>8} {:>8} {:>7}  hash",
                "n", "P", "CA", "its", "solve s", "MDOF/s", "speedup", "halo/V"
            );
            let mut base = std::collections::HashMap::new();
            for (l, r) in &rows {
                let p = parts(l);
                let s = f(r, &["solve_s"]);
                if p[1] == "1" {
                    base.insert((p[0].clone(), p[2].clone()), s);
                }
                println!(
                    "{:>4} {:>3} {:>3} {:>4} {:>9.3} {:>8.2} {:>8.2} {:>7.1}  {}",
                    p[0],
                    p[1],
                    p[2],
                    r["iterations"].as_u64().unwrap_or(0),
                    s,
                    f(r, &["dof_per_s"]) / 1e6,
                    base.get(&(p[0].clone(), p[2].clone()))
                        .copied()
                        .unwrap_or(f64::NAN)
                        / s,
                    f(r, &["halo_events_per_vcycle"]),
                    r["hash_hex"].as_str().unwrap_or("?")
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(app: App, ranks: &[usize]) -> Args {
        Args {
            app,
            ranks: ranks.to_vec(),
            steps: 100,
            sizes: vec![128],
            in_process: true,
            out: None,
        }
    }

    #[test]
    fn the_run_matrices() {
        // dynamo: pi_theta in {1, 2, 4} where it divides P.
        let d = runs(&args(App::Dynamo, &[1, 2, 4])).unwrap();
        let labels: Vec<&str> = d.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "case0_1_1",
                "case0_2_1",
                "case0_2_2",
                "case0_4_1",
                "case0_4_2",
                "case0_4_4",
                "case1_1_1",
                "case1_2_1",
                "case1_2_2",
                "case1_4_1",
                "case1_4_2",
                "case1_4_4"
            ]
        );
        // flow: a size only for the counts it has one for.
        assert_eq!(runs(&args(App::Flow, &[1, 16])).unwrap().len(), 4);
        let e = runs(&args(App::Flow, &[3])).err().unwrap().to_string();
        assert!(e.contains("got 3"), "{e}");
        assert_eq!(runs(&args(App::Poisson, &[1, 2])).unwrap().len(), 4);
    }
}
