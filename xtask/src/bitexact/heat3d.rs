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

use super::Args;
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

/// Runs one case with its report written to `json`.
fn run_case(heat3d: &Path, case: &Case, json: &Path) -> Ran {
    let mut cmd = util::ranks_command(
        heat3d,
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
    let result = ran.result.and_then(|r| {
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
    });
    Ran {
        result,
        seconds: ran.seconds,
    }
}

/// Runs `cases` on `jobs` threads and calls `done(i, case, ran)` in case
/// order, each as soon as it and every case before it have finished.
fn run_all(
    heat3d: &Path,
    dir: &Path,
    label: &str,
    cases: &[Case],
    jobs: usize,
    done: impl FnMut(usize, &Case, &Ran),
) {
    util::run_ordered(
        cases,
        jobs,
        |i, case| run_case(heat3d, case, &dir.join(format!("{label}{i}.json"))),
        done,
    );
}

/// Prints the table and counts the results.
#[derive(Debug, Default)]
struct Tally {
    passed: usize,
    failed: usize,
}

impl Tally {
    fn header() {
        println!(
            "{:>5} {:>5} {:<7} {:<8} {:<10} {:<16} {:<6} {:>7}",
            "order", "ranks", "grid", "mode", "backend", "hash", "result", "time"
        );
    }

    /// Prints one row; `reference` is the hash it must equal: `None` when
    /// the case is itself the reference, `Some(None)` when the reference run
    /// failed (so the case cannot pass).
    fn row(&mut self, case: &Case, ran: &Ran, reference: Option<Option<u64>>) {
        let (hash, verdict) = match (&ran.result, reference) {
            (Ok(r), None) => (format!("{:016x}", r.hash), "ref"),
            (Ok(r), Some(Some(h))) if r.hash == h => (format!("{:016x}", r.hash), "OK"),
            (Ok(r), Some(Some(_))) => (format!("{:016x}", r.hash), "DIFF"),
            (Ok(r), Some(None)) => (format!("{:016x}", r.hash), "NOREF"),
            (Err(_), _) => ("-".to_string(), "FAILED"),
        };
        if matches!(verdict, "ref" | "OK") {
            self.passed += 1;
        } else {
            self.failed += 1;
        }
        println!(
            "{:>5} {:>5} {:<7} {:<8} {:<10} {:<16} {:<6} {:>6.2}s",
            case.order,
            case.ranks,
            util::triple(case.grid),
            case.mode,
            case.backend.name(),
            hash,
            verdict,
            ran.seconds
        );
        if let Err(e) = &ran.result {
            for line in e.lines() {
                println!("      | {line}");
            }
        }
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

/// Runs the heat3d suite; prints the table and `bitexact: N passed, M
/// failed`, and fails if any case failed or differed.
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
    let refs = references(&args.orders);
    let runs_start = Instant::now();
    let mut tally = Tally::default();
    let mut ref_hash: Vec<Option<u64>> = vec![None; args.orders.len()];
    println!(
        "bitexact: n = {}, {STEPS} Euler steps, orders {:?}, {} suite",
        util::triple(N),
        args.orders,
        if args.mpi { "MPI" } else { "in-process" }
    );
    Tally::header();
    run_all(&plain, &dir, "ref", &refs, 1, |i, case, ran| {
        tally.row(case, ran, None);
        ref_hash[i] = ran.result.as_ref().ok().map(|r| r.hash);
    });
    let (bin, cases, jobs) = match &mpi_bin {
        Some(b) => (
            b.as_path(),
            cases_for(&args.orders, MPI_GRIDS, Backend::Mpi, false),
            1,
        ),
        None => (
            plain.as_path(),
            cases_for(&args.orders, GRIDS, Backend::InProcess, true),
            args.jobs,
        ),
    };
    let order_index = |o: usize| args.orders.iter().position(|&x| x == o);
    run_all(bin, &dir, "case", &cases, jobs, |_, case, ran| {
        let reference = order_index(case.order).and_then(|k| ref_hash[k]);
        tally.row(case, ran, Some(reference));
    });
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "({} runs in {:.1} s; {:.1} s with the builds)",
        tally.passed + tally.failed,
        runs_start.elapsed().as_secs_f64(),
        start.elapsed().as_secs_f64()
    );
    println!("bitexact: {} passed, {} failed", tally.passed, tally.failed);
    if tally.failed > 0 {
        bail!(
            "{} of {} bit-exactness runs failed or differed",
            tally.failed,
            tally.passed + tally.failed
        );
    }
    Ok(())
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
