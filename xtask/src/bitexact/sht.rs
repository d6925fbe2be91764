//! The distributed spherical harmonic transforms (`sht::DistSht`) in
//! `cargo xtask bitexact`, through the `sht_dist` example of the `sht`
//! crate (which [`crate::bench::sht_transpose`] times too).
//!
//! [`bitexact`]: the sht part of `cargo xtask bitexact`. The example's
//! `hash` mode runs, for one rank count, every legal `Pi_r x Pi_theta` grid
//! with every transposition algorithm and queue lengths 1, 2, 3, and prints
//! per case a hash of the synthesised grid, the analysed coefficients, the
//! vector transforms' results and the lm layout that does not depend on the
//! decomposition. Every case must give the hash of the in-process 1-rank
//! run: in-process at 1, 2, 3, 4, 6 and 8 ranks, or with `--mpi` under
//! `mpirun -np 1, 2, 4`.

use crate::util;
use anyhow::{anyhow, bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// In-process rank counts of the bit-exactness suite.
pub const RANKS: [usize; 6] = [1, 2, 3, 4, 6, 8];
/// MPI process counts of the bit-exactness suite.
pub const MPI_RANKS: [usize; 3] = [1, 2, 4];
/// The five protocols of the redistribution engine, in the example's spelling.
pub const ALGORITHMS: [&str; 5] = ["alltoall", "alltoallv", "alltoallw", "p2p", "p2p_plined"];
const CASE_LIMIT: Duration = Duration::from_secs(300);

/// Builds the `sht_dist` example in release (with feature `mpi` when
/// `mpi`) and returns a private copy (`target/xtask/bin/sht_dist[-mpi]`).
pub fn build_example(mpi: bool) -> Result<PathBuf> {
    util::build_binary(
        util::Artifact {
            package: "parnum-sht",
            name: "sht_dist",
            example: true,
        },
        mpi,
    )
}

/// Runs the example on `ranks` ranks (in-process, or under `mpirun` when
/// `mpi`) and returns its stdout lines.
pub(crate) fn run_example(
    bin: &Path,
    mpi: bool,
    ranks: usize,
    args: &[String],
) -> Result<Vec<String>> {
    let cmd = util::ranks_command(bin, args, ranks, mpi);
    let out = util::run_captured(cmd, CASE_LIMIT)?;
    if !out.success() {
        bail!(
            "sht_dist on {ranks} {} rank(s): {}\n--- stderr ---\n{}",
            if mpi { "MPI" } else { "in-process" },
            out.status_text(),
            out.stderr.trim_end()
        );
    }
    Ok(out.stdout.lines().map(str::to_string).collect())
}

/// `key=value` fields of one example line.
pub(crate) fn fields(line: &str) -> BTreeMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect()
}

/// One `case` line: grid, algorithm, queue, hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HashCase {
    pub(crate) grid: String,
    pub(crate) alg: String,
    pub(crate) queue: usize,
    pub(crate) hash: String,
}

pub(crate) fn parse_cases(lines: &[String]) -> Result<Vec<HashCase>> {
    lines
        .iter()
        .filter(|l| l.starts_with("case "))
        .map(|l| {
            let f = fields(l);
            let get = |k: &str| {
                f.get(k)
                    .map(|s| s.to_string())
                    .ok_or_else(|| anyhow!("sht_dist line without {k}: {l}"))
            };
            Ok(HashCase {
                grid: get("grid")?,
                alg: get("alg")?,
                queue: get("queue")?.parse()?,
                hash: get("hash")?,
            })
        })
        .collect()
}

/// The grids `Pi_r x Pi_theta` of `p` ranks.
fn grids(p: usize) -> Vec<String> {
    (1..=p)
        .filter(|a| p.is_multiple_of(*a))
        .map(|a| format!("{a}x{}", p / a))
        .collect()
}

/// The sht part of `cargo xtask bitexact`: every case must give the hash
/// of the in-process 1-rank run.
pub fn bitexact(mpi: bool) -> Result<()> {
    let start = Instant::now();
    let plain = build_example(false)?;
    let bin = if mpi {
        build_example(true)?
    } else {
        plain.clone()
    };
    let reference = parse_cases(&run_example(&plain, false, 1, &["hash".into()])?)?;
    let ref_hash = reference
        .first()
        .map(|c| c.hash.clone())
        .context("the 1-rank sht_dist run printed no case")?;
    if let Some(c) = reference.iter().find(|c| c.hash != ref_hash) {
        bail!(
            "the 1-rank sht_dist run is not self-consistent: {} {} queue {} gives {} against {ref_hash}",
            c.grid,
            c.alg,
            c.queue,
            c.hash
        );
    }
    println!(
        "bitexact sht: DistSht scalar and vector synthesis and analysis, l transposition, {} suite, reference {ref_hash}",
        if mpi { "MPI" } else { "in-process" }
    );
    println!(
        "{:>5} {:<6} {:<10} {:>5} {:<16} {:<6}",
        "ranks", "grid", "backend", "cases", "hash", "result"
    );
    let (mut passed, mut failed) = (0, 0);
    let ranks: &[usize] = if mpi { &MPI_RANKS } else { &RANKS };
    for &p in ranks {
        let backend = if mpi { "mpi" } else { "in-process" };
        let cases = match run_example(&bin, mpi, p, &["hash".into()]).and_then(|l| parse_cases(&l))
        {
            Ok(c) => c,
            Err(e) => {
                failed += 1;
                println!(
                    "{p:>5} {:<6} {backend:<10} {:>5} {:<16} FAILED",
                    "-", 0, "-"
                );
                for line in format!("{e:#}").lines() {
                    println!("      | {line}");
                }
                continue;
            }
        };
        for g in grids(p) {
            let mine: Vec<&HashCase> = cases.iter().filter(|c| c.grid == g).collect();
            // Every algorithm with queue lengths 1, 2, 3.
            let complete = mine.len() == ALGORITHMS.len() * 3;
            let bad: Vec<&&HashCase> = mine.iter().filter(|c| c.hash != ref_hash).collect();
            let ok = complete && bad.is_empty();
            if ok {
                passed += 1;
            } else {
                failed += 1;
            }
            let shown = bad.first().map_or(ref_hash.as_str(), |c| c.hash.as_str());
            println!(
                "{p:>5} {g:<6} {backend:<10} {:>5} {shown:<16} {}",
                mine.len(),
                if ok {
                    "OK"
                } else if !complete {
                    "MISSING"
                } else {
                    "DIFF"
                }
            );
            for c in bad {
                println!("      | {} queue {}: {}", c.alg, c.queue, c.hash);
            }
        }
    }
    println!(
        "bitexact sht: {passed} passed, {failed} failed ({:.1} s with the builds)",
        start.elapsed().as_secs_f64()
    );
    if failed > 0 {
        bail!("{failed} sht bit-exactness group(s) failed or differed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_of_a_rank_count() {
        assert_eq!(grids(6), vec!["1x6", "2x3", "3x2", "6x1"]);
        assert_eq!(grids(1), vec!["1x1"]);
    }
}
