//! The flow app's suite of `cargo xtask bitexact` (`--suite flow`); its
//! benchmark, `cargo xtask bench flow`, is [`crate::bench::flow`].
//!
//! Three problems at [`N`]^3 for [`STEPS`] steps: the simple cubic array
//! at c = 0.125 with cut cells and with ghost cells (Stokes, `--steady-tol
//! 0`, so every case takes the same steps), and the Navier-Stokes
//! Taylor-Green vortex without bodies (advection on, nu = 0.1, dt = 0.002).
//! Each case's `hash` (velocity and pressure) must equal the problem's
//! in-process 1-rank run. In-process: ranks 2, 4, 8 x overlap on/off x
//! communication-avoiding smoothing on/off. MPI: `mpirun -np` 1, 2, 4 with
//! the default options.

use crate::util;
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Cells per axis of the suite.
pub const N: usize = 16;
/// Steps per suite case.
pub const STEPS: usize = 6;
/// In-process rank counts of the suite (each with every overlap and
/// communication-avoidance setting).
pub const RANKS: [usize; 3] = [2, 4, 8];
/// MPI process counts of the suite.
pub const MPI_RANKS: [usize; 3] = [1, 2, 4];
const CASE_LIMIT: Duration = Duration::from_secs(180);

pub(crate) fn build(mpi: bool) -> Result<PathBuf> {
    util::build_binary(
        util::Artifact {
            package: "flow",
            name: "flow",
            example: false,
        },
        mpi,
    )
}

/// The app's JSON report, read as the app writes it.
pub(crate) use flow::Report;

pub(crate) fn read_report(p: &Path) -> std::result::Result<Report, String> {
    util::read_json("flow", p)
}

/// Cells per sphere diameter of a run (box length 1).
pub(crate) fn cells_per_diameter(r: &Report) -> f64 {
    2.0 * r.radius * r.config.n as f64
}

pub(crate) fn b(v: bool) -> &'static str {
    if v {
        "true"
    } else {
        "false"
    }
}

pub(crate) fn on(v: bool) -> &'static str {
    if v {
        "on"
    } else {
        "off"
    }
}

// ---------------------------------------------------------------------------
// Bit-exactness
// ---------------------------------------------------------------------------

/// A problem of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Problem {
    /// The SC array at c = 0.125 with this immersed-boundary method.
    Sc(&'static str),
    /// The Navier-Stokes Taylor-Green vortex, no bodies.
    TaylorGreen,
}

const PROBLEMS: [Problem; 3] = [
    Problem::Sc("cut-cell"),
    Problem::Sc("ghost-cell"),
    Problem::TaylorGreen,
];

impl Problem {
    fn name(self) -> String {
        match self {
            Problem::Sc(m) => format!("sc {m}"),
            Problem::TaylorGreen => "taylor-green".to_string(),
        }
    }

    fn args(self) -> Vec<String> {
        let (n, steps) = (N.to_string(), STEPS.to_string());
        let mut v: Vec<&str> = vec!["--n", &n, "--steps", &steps];
        match self {
            Problem::Sc(m) => v.extend([
                "--bodies",
                "sc",
                "--solid-fraction",
                "0.125",
                "--method",
                m,
                "--steady-tol",
                "0",
            ]),
            Problem::TaylorGreen => v.extend([
                "--bodies",
                "none",
                "--initial",
                "taylor-green",
                "--navier-stokes",
                "true",
                "--nu",
                "0.1",
                "--dt",
                "0.002",
            ]),
        }
        v.into_iter().map(String::from).collect()
    }
}

/// One suite case.
#[derive(Debug, Clone, Copy)]
struct Case {
    problem: Problem,
    ranks: usize,
    overlap: bool,
    ca: bool,
    mpi: bool,
}

fn cases(mpi: bool) -> Vec<Case> {
    let mut v = Vec::new();
    for problem in PROBLEMS {
        if mpi {
            for ranks in MPI_RANKS {
                v.push(Case {
                    problem,
                    ranks,
                    overlap: true,
                    ca: true,
                    mpi,
                });
            }
            continue;
        }
        for ranks in RANKS {
            for overlap in [true, false] {
                for ca in [true, false] {
                    v.push(Case {
                        problem,
                        ranks,
                        overlap,
                        ca,
                        mpi,
                    });
                }
            }
        }
    }
    v
}

/// The in-process 1-rank run of each problem with the default options.
fn references() -> Vec<Case> {
    PROBLEMS
        .iter()
        .map(|&problem| Case {
            problem,
            ranks: 1,
            overlap: true,
            ca: true,
            mpi: false,
        })
        .collect()
}

fn run_case(bin: &Path, case: &Case, json: &Path) -> util::Ran<Report> {
    let mut cmd = util::ranks_command(bin, &[], case.ranks, case.mpi);
    cmd.args(case.problem.args())
        .args(["--overlap", b(case.overlap)])
        .args(["--comm-avoiding", b(case.ca)])
        .args(["--no-vtk", "-q", "--json"])
        .arg(json);
    let ran = util::run_report(cmd, json, CASE_LIMIT, read_report);
    let result = ran.result.and_then(|r| {
        if r.ranks != case.ranks
            || r.config.overlap != case.overlap
            || r.config.comm_avoiding != case.ca
            || r.steps != STEPS as u64
        {
            return Err(format!(
                "asked for {} rank(s), overlap {}, CA {}, {STEPS} steps; the report says {}, {}, {}, {}",
                case.ranks,
                case.overlap,
                case.ca,
                r.ranks,
                r.config.overlap,
                r.config.comm_avoiding,
                r.steps
            ));
        }
        Ok(r)
    });
    util::Ran {
        result,
        seconds: ran.seconds,
    }
}

/// The `flow` suite of `cargo xtask bitexact`.
pub fn bitexact(mpi: bool, jobs: usize) -> Result<()> {
    let start = Instant::now();
    let plain = build(false)?;
    let bin = if mpi { build(true)? } else { plain.clone() };
    let dir = util::scratch_dir(if mpi {
        "bitexact-flow-mpi"
    } else {
        "bitexact-flow"
    })?;
    let runs_start = Instant::now();
    let refs = references();
    let mut ref_hash: Vec<Option<String>> = vec![None; refs.len()];
    let cs = cases(mpi);
    println!(
        "bitexact flow: n = {N}, {STEPS} steps; SC c = 0.125 (Stokes) with cut and ghost cells, Taylor-Green (Navier-Stokes); {} cases {} + {} references",
        cs.len(),
        if mpi { "under mpirun" } else { "in-process" },
        refs.len()
    );
    let header = || {
        println!(
            "{:<16} {:>5} {:<7} {:<3} {:<10} {:<16} {:<6} {:>6}",
            "problem", "ranks", "overlap", "CA", "backend", "hash", "result", "time"
        )
    };
    header();
    let (mut passed, mut failed) = (0usize, 0usize);
    let mut row = |c: &Case, ran: &util::Ran<Report>, reference: Option<Option<&str>>| {
        let (hash, verdict) = match (&ran.result, reference) {
            (Ok(r), None) => (r.hash.clone(), "ref"),
            (Ok(r), Some(Some(h))) if r.hash == h => (r.hash.clone(), "ok"),
            (Ok(r), Some(Some(_))) => (r.hash.clone(), "DIFF"),
            (Ok(r), Some(None)) => (r.hash.clone(), "NOREF"),
            (Err(_), _) => ("-".to_string(), "FAILED"),
        };
        if matches!(verdict, "ref" | "ok") {
            passed += 1;
        } else {
            failed += 1;
        }
        println!(
            "{:<16} {:>5} {:<7} {:<3} {:<10} {:<16} {:<6} {:>5.1}s",
            c.problem.name(),
            c.ranks,
            on(c.overlap),
            on(c.ca),
            if c.mpi { "mpi" } else { "in-process" },
            hash,
            verdict,
            ran.seconds
        );
        if let Err(e) = &ran.result {
            for line in util::tail(e, 20).lines() {
                println!("      | {line}");
            }
        }
    };
    util::run_ordered(
        &refs,
        jobs,
        |i, c| run_case(&plain, c, &dir.join(format!("ref{i}.json"))),
        |i, c, ran| {
            row(c, ran, None);
            ref_hash[i] = ran.result.as_ref().ok().map(|r| r.hash.clone());
        },
    );
    let jobs = if mpi { 1 } else { jobs };
    util::run_ordered(
        &cs,
        jobs,
        |i, c| run_case(&bin, c, &dir.join(format!("case{i}.json"))),
        |_, c, ran| {
            let k = PROBLEMS.iter().position(|p| *p == c.problem);
            let reference = k.and_then(|k| ref_hash[k].as_deref());
            row(c, ran, Some(reference));
        },
    );
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "({} runs in {:.1} s; {:.1} s with the builds)",
        passed + failed,
        runs_start.elapsed().as_secs_f64(),
        start.elapsed().as_secs_f64()
    );
    println!("bitexact flow: {passed} passed, {failed} failed");
    if failed > 0 {
        bail!("{failed} flow case(s) failed or differed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suite_sizes() {
        assert_eq!(cases(false).len(), PROBLEMS.len() * RANKS.len() * 4);
        assert_eq!(cases(true).len(), PROBLEMS.len() * MPI_RANKS.len());
        assert_eq!(references().len(), 3);
        assert!(cases(false).iter().all(|c| c.ranks > 1 && !c.mpi));
        // The suite's arguments match its constants.
        let a = Problem::Sc("cut-cell").args();
        assert!(a.windows(2).any(|w| w[0] == "--n" && w[1] == N.to_string()));
        assert!(a
            .windows(2)
            .any(|w| w[0] == "--steps" && w[1] == STEPS.to_string()));
    }
}
