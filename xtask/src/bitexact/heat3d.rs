//! The heat3d suite of `cargo xtask bitexact` (with `--suite heat3d` or
//! `all`), after the SHT suite of [`super::sht::bitexact`].
//!
//! Every case runs heat3d on the fixed uneven global size [`N`] for
//! [`STEPS`] forward-Euler steps, writes the report with `--json` and
//! compares its field hash with the in-process 1-rank blocking run of the
//! same order. The size is chosen so that every grid in [`GRIDS`] leaves each
//! block at least 10 cells wide on every axis, the ghost width of FD-20;
//! [`check_grid`] verifies that before anything runs.
//!
//! In-process cases run two at a time (the machines have 2 cores); MPI cases
//! run one at a time, each `mpirun` oversubscribing the cores already.

use super::{runner, Args};
use crate::util::{self, HeatReport};
use anyhow::{bail, Result};
use std::path::Path;
use std::time::{Duration, Instant};

/// Global cells per axis: uneven, so blocks differ in size, and large enough
/// that every grid in [`GRIDS`] is legal for order 20.
pub const N: [usize; 3] = [42, 34, 41];
/// Steps per run.
pub const STEPS: usize = 10;
/// Stencil orders checked by default.
pub const ORDERS: [usize; 5] = [2, 4, 8, 12, 20];
/// In-process rank counts and two process grids for each (one for 1 rank).
pub const GRIDS: &[(usize, &[[usize; 3]])] = &[
    (1, &[[1, 1, 1]]),
    (2, &[[2, 1, 1], [1, 1, 2]]),
    (3, &[[3, 1, 1], [1, 3, 1]]),
    (4, &[[2, 2, 1], [1, 1, 4]]),
    (6, &[[3, 2, 1], [1, 2, 3]]),
    (8, &[[2, 2, 2], [4, 2, 1]]),
];
/// MPI process counts and their grids.
pub const MPI_GRIDS: &[(usize, &[[usize; 3]])] = &[
    (1, &[[1, 1, 1]]),
    (2, &[[2, 1, 1], [1, 1, 2]]),
    (4, &[[2, 2, 1], [1, 1, 4]]),
];
/// Exchange modes.
pub const MODES: [&str; 2] = ["blocking", "overlap"];
/// Longest one case may run before it is killed and counted as failed.
const CASE_LIMIT: Duration = Duration::from_secs(180);

/// Where a case runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    /// Threads of one heat3d process (`--ranks N`).
    InProcess,
    /// `mpirun -np N heat3d`.
    Mpi,
}

impl Backend {
    /// The name heat3d reports for it.
    fn name(self) -> &'static str {
        match self {
            Backend::InProcess => "in-process",
            Backend::Mpi => "mpi",
        }
    }
}

/// One heat3d run.
#[derive(Debug, Clone, Copy)]
struct Case {
    order: usize,
    ranks: usize,
    grid: [usize; 3],
    mode: &'static str,
    backend: Backend,
}

/// What one run gave: the report, or why there is none.
type Ran = util::Ran<HeatReport>;

/// Checks that `grid` splits `n` into blocks at least `order / 2` cells wide
/// on every axis (the ghost width must not exceed any block's extent).
pub fn check_grid(n: [usize; 3], grid: [usize; 3], order: usize) -> Result<()> {
    let r = order / 2;
    for d in 0..3 {
        if grid[d] == 0 || grid[d] > n[d] {
            bail!("grid {grid:?} does not fit {n:?} on axis {d}");
        }
        // Blocks differ by at most one cell; the smallest has floor(n/p).
        let smallest = n[d] / grid[d];
        if smallest < r {
            bail!(
                "grid {grid:?} on {n:?} leaves blocks of {smallest} cells on axis {d}, \
                 fewer than the ghost width {r} of order {order}"
            );
        }
    }
    Ok(())
}

fn check_orders(orders: &[usize]) -> Result<()> {
    if orders.is_empty() {
        bail!("--orders needs at least one order");
    }
    for &o in orders {
        if !(2..=20).contains(&o) || o % 2 == 1 {
            bail!("order {o} is not one of 2, 4, ..., 20");
        }
        for (_, grids) in GRIDS.iter().chain(MPI_GRIDS) {
            for &g in *grids {
                check_grid(N, g, o)?;
            }
        }
    }
    Ok(())
}

/// A case and the binary it runs.
struct Run<'a> {
    bin: &'a Path,
    case: Case,
    /// The index of the case's order among the suite's orders.
    reference: usize,
}

impl runner::Case for Run<'_> {
    type Report = HeatReport;
    type Key = u64;

    fn cells(&self) -> Vec<String> {
        let c = &self.case;
        vec![
            c.order.to_string(),
            c.ranks.to_string(),
            util::triple(c.grid),
            c.mode.to_string(),
            c.backend.name().to_string(),
        ]
    }

    fn reference(&self) -> usize {
        self.reference
    }

    fn run(&self, json: &Path) -> Ran {
        let case = &self.case;
        let mut cmd = util::ranks_command(
            self.bin,
            &[],
            case.ranks,
            matches!(case.backend, Backend::Mpi),
        );
        cmd.args(["--n", &util::triple(N)])
            .args(["--grid", &util::triple(case.grid)])
            .args(["--order", &case.order.to_string()])
            .args(["--steps", &STEPS.to_string()])
            .args(["--mode", case.mode])
            .args(["--integrator", "euler"])
            .args(["--warmup", "0", "--no-vtk", "-q", "--json"])
            .arg(json);
        let ran = util::run_report(cmd, json, CASE_LIMIT, |p| {
            util::read_heat3d(p).map_err(|e| format!("{e:#}"))
        });
        ran.and_then(|r| {
            if r.ranks != case.ranks || r.grid != case.grid || r.backend != case.backend.name() {
                Err(format!(
                    "asked for {} {} rank(s) on grid {:?}, the report says {} {} on {:?}",
                    case.ranks,
                    case.backend.name(),
                    case.grid,
                    r.ranks,
                    r.backend,
                    r.grid
                ))
            } else {
                Ok(r)
            }
        })
    }

    fn key(r: &HeatReport) -> u64 {
        r.hash
    }

    fn shown(k: &u64) -> String {
        format!("{k:016x}")
    }
}

fn cases_for(
    orders: &[usize],
    grids: &[(usize, &[[usize; 3]])],
    backend: Backend,
    skip_reference: bool,
) -> Vec<Case> {
    let mut v = vec![];
    for &order in orders {
        for &(ranks, gs) in grids {
            for &grid in gs {
                for mode in MODES {
                    let is_ref = ranks == 1 && mode == "blocking";
                    if skip_reference && is_ref {
                        continue;
                    }
                    v.push(Case {
                        order,
                        ranks,
                        grid,
                        mode,
                        backend,
                    });
                }
            }
        }
    }
    v
}

/// The in-process 1-rank blocking run of each order.
fn references(orders: &[usize]) -> Vec<Case> {
    orders
        .iter()
        .map(|&order| Case {
            order,
            ranks: 1,
            grid: [1, 1, 1],
            mode: "blocking",
            backend: Backend::InProcess,
        })
        .collect()
}

/// The runs of `cases` with `bin`, each compared with the reference of its
/// order among `orders`.
fn runs<'a>(bin: &'a Path, cases: Vec<Case>, orders: &[usize]) -> Vec<Run<'a>> {
    cases
        .into_iter()
        .map(|case| Run {
            bin,
            reference: orders
                .iter()
                .position(|&x| x == case.order)
                .unwrap_or(usize::MAX),
            case,
        })
        .collect()
}

/// Runs the heat3d suite; prints the table and `bitexact heat3d: N
/// passed, M failed`, and fails if any case failed or differed.
pub(super) fn run_heat3d(args: &Args) -> Result<()> {
    let start = Instant::now();
    check_orders(&args.orders)?;
    // The distributed SHT suite first (seconds), then heat3d's.
    super::sht::bitexact(args.mpi)?;
    let plain = util::build_heat3d(false)?;
    let mpi_bin = if args.mpi {
        Some(util::build_heat3d(true)?)
    } else {
        None
    };
    let dir = util::scratch_dir(if args.mpi { "bitexact-mpi" } else { "bitexact" })?;
    println!(
        "bitexact: n = {}, {STEPS} Euler steps, orders {:?}, {} suite",
        util::triple(N),
        args.orders,
        if args.mpi { "MPI" } else { "in-process" }
    );
    let o = &args.orders;
    let refs = runs(&plain, references(o), o);
    let (cases, jobs) = match &mpi_bin {
        Some(b) => (runs(b, cases_for(o, MPI_GRIDS, Backend::Mpi, false), o), 1),
        None => (
            runs(&plain, cases_for(o, GRIDS, Backend::InProcess, true), o),
            args.jobs,
        ),
    };
    let table = runner::Suite {
        name: "heat3d",
        columns: &[
            ("order", -5),
            ("ranks", -5),
            ("grid", 7),
            ("mode", 8),
            ("backend", 10),
        ],
        hash_width: 16,
    };
    let result = table.run(&dir, (&refs, 1), (&cases, jobs), |_, _| {});
    let _ = std::fs::remove_dir_all(&dir);
    println!("(with the builds: {:.1} s)", start.elapsed().as_secs_f64());
    result.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_grid_is_legal_for_every_order() {
        check_orders(&ORDERS).unwrap();
        for &(p, gs) in GRIDS.iter().chain(MPI_GRIDS) {
            for g in gs {
                assert_eq!(g.iter().product::<usize>(), p, "{g:?}");
            }
        }
    }

    #[test]
    fn too_thin_blocks_are_rejected() {
        assert!(check_grid([42, 34, 41], [1, 1, 5], 20).is_err());
        assert!(check_grid([42, 34, 41], [1, 4, 1], 20).is_err());
        assert!(check_grid([42, 34, 41], [1, 4, 1], 16).is_ok());
    }

    #[test]
    fn suite_sizes() {
        assert_eq!(
            cases_for(&ORDERS, GRIDS, Backend::InProcess, true).len(),
            105
        );
        assert_eq!(cases_for(&ORDERS, MPI_GRIDS, Backend::Mpi, false).len(), 50);
    }
}
