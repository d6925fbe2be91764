//! The multigrid suite of `cargo xtask bitexact`: the `poisson` app must
//! give the same solution bits and residual history for every rank count,
//! halo overlap, communication-avoiding smoothing and agglomeration
//! threshold, and (with `--mpi`) under MPI as in-process.
//!
//! Every case runs `poisson` on [`SHAPE`] with one of the boundary and
//! solver pairs of [`SETS`], writes the report with `--json` and compares
//! its solution hash (`hash_hex`) and residual-history hash
//! (`residuals_hash_hex`) with the in-process 1-rank run of the same set
//! with blocking sweeps, no communication avoidance and no agglomeration.
//! In-process: ranks [`RANKS`] x overlap on/off x communication-avoiding
//! on/off x [`AGGLOMERATE`]. MPI: `mpirun -np` [`MPI_RANKS`] x
//! [`MPI_OPTIONS`]. [`check_shape`] verifies before anything runs that the
//! app's process grid gives even blocks on every rank count (so the
//! hierarchy can coarsen), and the suite fails if no case agglomerated a
//! level or engaged communication-avoiding smoothing (nothing would have
//! been tested).

use super::runner;
use crate::util;
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Global cells: even blocks on 1, 2, 3, 4, 6 and 8 ranks, five levels
/// (48, 24, 12, 6, bottom 3), coarse blocks that become odd (agglomeration
/// engages even with threshold 0) and blocks of at least 4 on the upper
/// levels (communication avoidance engages).
pub const SHAPE: [usize; 3] = [48, 48, 48];
/// Boundary conditions and solver of each set.
pub const SETS: [(&str, &str); 4] = [
    ("dirichlet", "pcg"),
    ("mixed", "mg"),
    ("neumann", "pcg"),
    ("periodic", "mg"),
];
/// In-process rank counts.
pub const RANKS: [usize; 6] = [1, 2, 3, 4, 6, 8];
/// Agglomeration thresholds: only where blocks turn odd, the default, and
/// every coarse level onto as few ranks as possible.
pub const AGGLOMERATE: [usize; 3] = [0, 512, 1 << 40];
/// MPI process counts.
pub const MPI_RANKS: [usize; 3] = [1, 2, 4];
/// MPI options: (overlap, communication avoidance, agglomeration threshold).
pub const MPI_OPTIONS: [(bool, bool, usize); 3] =
    [(true, true, 512), (false, false, 0), (true, false, 1 << 40)];
/// Longest one case may run before it is killed and counted as failed.
const CASE_LIMIT: Duration = Duration::from_secs(120);

/// Where a case runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    InProcess,
    Mpi,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::InProcess => "in-process",
            Backend::Mpi => "mpi",
        }
    }
}

/// One poisson run.
#[derive(Debug, Clone, Copy)]
struct Case {
    set: usize,
    ranks: usize,
    overlap: bool,
    ca: bool,
    agglomerate: usize,
    backend: Backend,
}

/// poisson's `--json` report, read as the app writes it.
use poisson::Report;

/// What one run gave.
type Ran = util::Ran<Report>;

/// Checks that the grid `poisson` picks for [`SHAPE`] gives even blocks on
/// every rank count of the suites.
pub fn check_shape(shape: [usize; 3]) -> Result<()> {
    let levels = poisson::config::default_levels(shape);
    for &p in RANKS.iter().chain(&MPI_RANKS) {
        for periodic in [[false; 3], [true, false, false], [true; 3]] {
            let g = poisson::config::choose_grid(shape, p, periodic, levels)?;
            if !poisson::config::even_blocks(shape, g.dims()) {
                bail!(
                    "{} on {p} ranks (grid {:?}) has odd blocks: multigrid cannot coarsen it",
                    util::triple(shape),
                    g.dims()
                );
            }
        }
    }
    Ok(())
}

/// Builds `poisson` in release (with the `mpi` feature when `mpi`) and
/// returns a private copy (`target/xtask/bin/poisson` or `poisson-mpi`), so
/// running copies are independent of later builds with other features.
pub fn build_poisson(mpi: bool) -> Result<PathBuf> {
    util::build_binary(
        util::Artifact {
            package: "poisson",
            name: "poisson",
            example: false,
        },
        mpi,
    )
}

/// A case and the binary it runs.
struct Run<'a> {
    bin: &'a Path,
    case: Case,
}

impl runner::Case for Run<'_> {
    type Report = Report;
    /// The solution's hash and the residual history's.
    type Key = (String, String);

    fn cells(&self) -> Vec<String> {
        let c = &self.case;
        let (bc, solver) = SETS[c.set];
        let onoff = |b: bool| if b { "on" } else { "off" };
        vec![
            bc.to_string(),
            solver.to_string(),
            c.ranks.to_string(),
            onoff(c.overlap).to_string(),
            onoff(c.ca).to_string(),
            if c.agglomerate >= 1 << 40 {
                "2^40".to_string()
            } else {
                c.agglomerate.to_string()
            },
            c.backend.name().to_string(),
        ]
    }

    fn reference(&self) -> usize {
        self.case.set
    }

    fn run(&self, json: &Path) -> Ran {
        let case = &self.case;
        let mut cmd = util::ranks_command(
            self.bin,
            &[],
            case.ranks,
            matches!(case.backend, Backend::Mpi),
        );
        let (bc, solver) = SETS[case.set];
        cmd.args(["--shape", &util::triple(SHAPE)])
            .args(["--bc", bc, "--solver", solver])
            .args(["--ca", if case.ca { "on" } else { "off" }])
            .args(["--agglomerate-below", &case.agglomerate.to_string()]);
        if !case.overlap {
            cmd.arg("--no-overlap");
        }
        cmd.args(["--quiet", "--json"]).arg(json);
        let ran = util::run_report(cmd, json, CASE_LIMIT, |p| {
            util::read_json::<Report>("poisson", p)
        });
        ran.and_then(|r| {
            if r.ranks != case.ranks || r.backend != case.backend.name() {
                Err(format!(
                    "asked for {} {} rank(s), the report says {} {}",
                    case.ranks,
                    case.backend.name(),
                    r.ranks,
                    r.backend
                ))
            } else if !r.converged {
                Err(format!("not converged after {} iterations", r.iterations))
            } else {
                Ok(r)
            }
        })
    }

    fn key(r: &Report) -> (String, String) {
        (r.hash_hex.clone(), r.residuals_hash_hex.clone())
    }

    fn shown(k: &(String, String)) -> String {
        k.0.clone()
    }

    /// `HIST`: the same solution by another residual history.
    fn differs(got: &(String, String), reference: &(String, String)) -> Option<&'static str> {
        if got == reference {
            None
        } else if got.0 == reference.0 {
            Some("HIST")
        } else {
            Some("DIFF")
        }
    }
}

/// The reference of each set: 1 in-process rank, blocking sweeps, no
/// communication avoidance, no agglomeration beyond odd blocks.
fn references() -> Vec<Case> {
    (0..SETS.len())
        .map(|set| Case {
            set,
            ranks: 1,
            overlap: false,
            ca: false,
            agglomerate: 0,
            backend: Backend::InProcess,
        })
        .collect()
}

fn in_process_cases() -> Vec<Case> {
    let mut v = vec![];
    for set in 0..SETS.len() {
        for ranks in RANKS {
            for overlap in [false, true] {
                for ca in [false, true] {
                    for agglomerate in AGGLOMERATE {
                        if ranks == 1 && !overlap && !ca && agglomerate == 0 {
                            continue;
                        }
                        v.push(Case {
                            set,
                            ranks,
                            overlap,
                            ca,
                            agglomerate,
                            backend: Backend::InProcess,
                        });
                    }
                }
            }
        }
    }
    v
}

fn mpi_cases() -> Vec<Case> {
    let mut v = vec![];
    for set in 0..SETS.len() {
        for ranks in MPI_RANKS {
            for (overlap, ca, agglomerate) in MPI_OPTIONS {
                v.push(Case {
                    set,
                    ranks,
                    overlap,
                    ca,
                    agglomerate,
                    backend: Backend::Mpi,
                });
            }
        }
    }
    v
}

/// Runs the multigrid suite (in-process, or under MPI when `mpi`) with
/// `jobs` in-process cases at a time; prints the table and
/// `bitexact multigrid: N passed, M failed` (`HIST`: the same solution by
/// another residual history), and fails unless every case agreed and the
/// suite exercised agglomeration and communication-avoiding smoothing.
pub fn run(mpi: bool, jobs: usize) -> Result<()> {
    let start = Instant::now();
    check_shape(SHAPE)?;
    let plain = build_poisson(false)?;
    let mpi_bin = if mpi {
        Some(build_poisson(true)?)
    } else {
        None
    };
    let dir = util::scratch_dir(if mpi {
        "bitexact-mg-mpi"
    } else {
        "bitexact-mg"
    })?;
    println!(
        "bitexact multigrid: {} cells, sets {:?}, {} suite",
        util::triple(SHAPE),
        SETS,
        if mpi { "MPI" } else { "in-process" }
    );
    let runs = |bin, cases: Vec<Case>| -> Vec<Run<'_>> {
        cases.into_iter().map(|case| Run { bin, case }).collect()
    };
    let refs = runs(plain.as_path(), references());
    let (cases, jobs) = match &mpi_bin {
        Some(b) => (runs(b.as_path(), mpi_cases()), 1),
        None => (runs(plain.as_path(), in_process_cases()), jobs),
    };
    let (mut agglomerated, mut comm_avoiding) = (false, false);
    let table = runner::Suite {
        name: "multigrid",
        columns: &[
            ("bc", 9),
            ("solver", 6),
            ("ranks", -5),
            ("overlap", 7),
            ("ca", 3),
            ("agglomerate", -11),
            ("backend", 10),
        ],
        hash_width: 16,
    };
    let result = table.run(&dir, (&refs, 1), (&cases, jobs), |run, r| {
        agglomerated |= r.levels.iter().any(|l| l.ranks < run.case.ranks);
        comm_avoiding |= run.case.ranks > 1 && r.levels.iter().any(|l| l.comm_avoiding);
    });
    let _ = std::fs::remove_dir_all(&dir);
    println!("(with the builds: {:.1} s)", start.elapsed().as_secs_f64());
    result?;
    if !agglomerated || !comm_avoiding {
        bail!(
            "the multigrid suite exercised no {} (check SHAPE)",
            if agglomerated {
                "communication-avoiding smoothing on several ranks"
            } else {
                "agglomeration"
            }
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_has_even_blocks_on_every_rank_count() {
        check_shape(SHAPE).unwrap();
        assert!(check_shape([20, 20, 20]).is_err(), "20 / 3 is not even");
    }

    #[test]
    fn suite_sizes() {
        assert_eq!(in_process_cases().len(), SETS.len() * (6 * 2 * 2 * 3 - 1));
        assert_eq!(mpi_cases().len(), SETS.len() * 9);
    }
}
