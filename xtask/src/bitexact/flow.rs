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

use super::runner;
use crate::util;
use anyhow::Result;
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

/// A case and the binary it runs.
struct Run<'a> {
    bin: &'a Path,
    case: Case,
}

impl runner::Case for Run<'_> {
    type Report = Report;
    type Key = String;

    fn cells(&self) -> Vec<String> {
        let c = &self.case;
        vec![
            c.problem.name().to_string(),
            c.ranks.to_string(),
            on(c.overlap).to_string(),
            on(c.ca).to_string(),
            if c.mpi { "mpi" } else { "in-process" }.to_string(),
        ]
    }

    fn reference(&self) -> usize {
        PROBLEMS
            .iter()
            .position(|p| *p == self.case.problem)
            .unwrap_or(usize::MAX)
    }

    fn run(&self, json: &Path) -> util::Ran<Report> {
        let case = &self.case;
        let mut cmd = util::ranks_command(self.bin, &[], case.ranks, case.mpi);
        cmd.args(case.problem.args())
            .args(["--overlap", b(case.overlap)])
            .args(["--comm-avoiding", b(case.ca)])
            .args(["--no-vtk", "-q", "--json"])
            .arg(json);
        let ran = util::run_report(cmd, json, CASE_LIMIT, read_report);
        ran.and_then(|r| {
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
        })
    }

    fn key(r: &Report) -> String {
        r.hash.clone()
    }

    fn shown(k: &String) -> String {
        k.clone()
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
    let refs: Vec<Run<'_>> = references()
        .into_iter()
        .map(|case| Run { bin: &plain, case })
        .collect();
    let cs: Vec<Run<'_>> = cases(mpi)
        .into_iter()
        .map(|case| Run { bin: &bin, case })
        .collect();
    println!(
        "bitexact flow: n = {N}, {STEPS} steps; SC c = 0.125 (Stokes) with cut and ghost cells, Taylor-Green (Navier-Stokes); {} cases {} + {} references",
        cs.len(),
        if mpi { "under mpirun" } else { "in-process" },
        refs.len()
    );
    let table = runner::Suite {
        name: "flow",
        columns: &[
            ("problem", 16),
            ("ranks", -5),
            ("overlap", 7),
            ("CA", 3),
            ("backend", 10),
        ],
        hash_width: 16,
    };
    let jobs_cases = if mpi { 1 } else { jobs };
    let result = table.run(&dir, (&refs, jobs), (&cs, jobs_cases), |_, _| {});
    let _ = std::fs::remove_dir_all(&dir);
    println!("(with the builds: {:.1} s)", start.elapsed().as_secs_f64());
    result.map(|_| ())
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
