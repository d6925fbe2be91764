//! The dynamo app's suite of `cargo xtask bitexact` (`--suite dynamo`);
//! its benchmark, `cargo xtask bench dynamo`, is [`crate::bench::dynamo`].
//!
//! Every case runs the dynamo on [`NR`] radial levels and [`NTHETA`]
//! latitudes (lmax 16) with a magnetic field (case 1's initial state, so
//! every potential and every nonlinear term is non-zero) for [`STEPS`]
//! CFL-adaptive CNAB2 steps, and compares the state hash with the
//! in-process 1-rank run. In-process: ranks 2 and 4, every process grid
//! `pi_r x pi_theta` (1d and 2d), every transposition protocol and `auto`
//! (the same for the theta and the l transposition, and crossed pairs),
//! queue lengths 1 and 3. MPI: `mpirun -np` 1, 2, 4, 1d and 2d, three
//! protocols.

use super::runner;
use crate::util;
use anyhow::Result;
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

pub(crate) fn build(mpi: bool) -> Result<PathBuf> {
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

/// A case and the binary it runs.
struct Run<'a> {
    bin: &'a Path,
    case: Case,
}

impl runner::Case for Run<'_> {
    type Report = Got;
    type Key = String;

    fn cells(&self) -> Vec<String> {
        let c = &self.case;
        vec![
            c.ranks.to_string(),
            format!("{}x{}", c.ranks / c.pi_theta, c.pi_theta),
            c.theta.to_string(),
            c.l.to_string(),
            c.queue.to_string(),
            if c.mpi { "mpi" } else { "in-process" }.to_string(),
        ]
    }

    fn reference(&self) -> usize {
        0
    }

    fn run(&self, json: &Path) -> util::Ran<Got> {
        let case = &self.case;
        let mut cmd = util::ranks_command(self.bin, &[], case.ranks, case.mpi);
        cmd.args(base_args())
            .args(["--pi-theta", &case.pi_theta.to_string()])
            .args(["--theta-protocol", case.theta, "--l-protocol", case.l])
            .args(["--queue", &case.queue.to_string()])
            .arg("--json")
            .arg(json);
        let ran = util::run_report(cmd, json, CASE_LIMIT, read_report);
        ran.and_then(|g| {
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
        })
    }

    fn key(g: &Got) -> String {
        g.hash.clone()
    }

    fn shown(k: &String) -> String {
        k.clone()
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
    let reference = [Run {
        bin: &plain,
        case: Case {
            ranks: 1,
            pi_theta: 1,
            theta: theta_for(1, "a2av"),
            l: "a2av",
            queue: 1,
            mpi: false,
        },
    }];
    let cs: Vec<Run<'_>> = cases(mpi)
        .into_iter()
        .map(|case| Run { bin: &bin, case })
        .collect();
    println!(
        "bitexact dynamo: nr {NR}, ntheta {NTHETA}, {STEPS} steps with a field; {} cases {}",
        cs.len(),
        if mpi { "under mpirun" } else { "in-process" }
    );
    let table = runner::Suite {
        name: "dynamo",
        columns: &[
            ("ranks", -5),
            ("grid", -8),
            ("theta", 10),
            ("l", 10),
            ("queue", -5),
            ("backend", 10),
        ],
        hash_width: 16,
    };
    let jobs = if mpi { 1 } else { jobs };
    let result = table.run(&dir, (&reference, 1), (&cs, jobs), |_, _| {});
    let _ = std::fs::remove_dir_all(&dir);
    result.map(|_| ())
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
