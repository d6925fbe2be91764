//! What the suites over `dfft`'s reshape protocols share
//! ([`super::spectral`], [`super::pfc`]): the protocol
//! names, one app run per case with its `--json` report, the table and the
//! verdicts.
//!
//! A case is an app run on some ranks (in-process or under `mpirun`), an
//! optional process grid and a reshape protocol. It passes when the app
//! exits cleanly, its report names the ranks, backend, grid and protocol
//! asked for, every reshape of its forward transform used that protocol
//! (any concrete one for `auto`; a run on more than one rank must reshape),
//! and its field hash equals the hash of the in-process 1-rank run with the
//! default protocol.

use super::runner;
use crate::util;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longest one case may run before it is killed and counted as failed.
const CASE_LIMIT: Duration = Duration::from_secs(120);

/// The protocol the references run with: the apps' default.
pub const REFERENCE_PROTOCOL: &str = "alltoallv";

/// The command-line name of `p`: its `Debug` name in kebab case
/// (`P2pPipelined` -> `p2p-pipelined`), checked to parse back to `p`.
pub fn protocol_name(p: dfft::Protocol) -> Result<String> {
    let mut name = String::new();
    for (i, c) in format!("{p:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('-');
        }
        name.push(c.to_ascii_lowercase());
    }
    match name.parse::<dfft::Protocol>() {
        Ok(q) if q == p => Ok(name),
        Ok(q) => bail!("the protocol name {name:?} (of {p:?}) parses to {q:?}"),
        Err(e) => bail!("cannot name protocol {p:?} on the command line: {e}"),
    }
}

/// Every concrete protocol of `dfft` (`Protocol::ALL`, so protocols added
/// there are covered without a change here), then `auto`.
pub fn protocols() -> Result<Vec<String>> {
    let mut v = dfft::Protocol::ALL
        .iter()
        .map(|&p| protocol_name(p))
        .collect::<Result<Vec<_>>>()?;
    if !v.iter().any(|n| n == REFERENCE_PROTOCOL) {
        bail!("dfft::Protocol::ALL lacks the reference protocol {REFERENCE_PROTOCOL}");
    }
    v.push("auto".to_string());
    Ok(v)
}

/// Where a case runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Threads of one process (`--ranks N`).
    InProcess,
    /// `mpirun -np N`.
    Mpi,
}

impl Backend {
    /// The name the apps report for it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::InProcess => "in-process",
            Backend::Mpi => "mpi",
        }
    }
}

/// One app run.
#[derive(Debug, Clone)]
pub struct Case {
    /// Ranks.
    pub ranks: usize,
    /// Process grid (`--grid`), or the app's choice.
    pub grid: Option<[usize; 3]>,
    /// Protocol name (`--protocol`).
    pub protocol: String,
    /// Where it runs.
    pub backend: Backend,
}

/// The part of the configuration in the report that the suites read.
#[derive(Debug, Clone, Deserialize)]
struct ReportConfig {
    protocol: String,
}

/// The fields of heat3d's and pfc's `--json` reports that the suites read.
#[derive(Debug, Clone, Deserialize)]
pub struct Report {
    config: ReportConfig,
    ranks: usize,
    backend: String,
    grid: [usize; 3],
    reshape_protocols: Vec<String>,
    /// The field hash, 16 hex digits.
    pub hash_hex: String,
}

/// What one run gave.
pub type Ran = util::Ran<Report>;

/// A suite: an app binary (and its MPI build), the arguments every case
/// shares, and a name for the table.
#[derive(Debug)]
pub struct Suite<'a> {
    /// Shown in the table's title and summary (`spectral`, `pfc`).
    pub name: &'a str,
    /// The binary's name in messages.
    pub app: &'a str,
    /// The in-process build.
    pub plain: PathBuf,
    /// The MPI build, for MPI cases.
    pub mpi: Option<PathBuf>,
    /// Arguments of every case (problem size, steps, quiet).
    pub args: Vec<String>,
}

/// A case of a suite: the case and the suite it runs in.
struct Run<'a> {
    suite: &'a Suite<'a>,
    case: Case,
}

impl runner::Case for Run<'_> {
    type Report = Report;
    type Key = String;

    fn cells(&self) -> Vec<String> {
        let c = &self.case;
        vec![
            c.ranks.to_string(),
            c.grid.map_or("auto".to_string(), util::triple),
            c.protocol.clone(),
            c.backend.name().to_string(),
        ]
    }

    fn reference(&self) -> usize {
        0
    }

    fn run(&self, json: &Path) -> Ran {
        let (suite, case) = (self.suite, &self.case);
        let bin = match (case.backend, &suite.mpi) {
            (Backend::InProcess, _) => &suite.plain,
            (Backend::Mpi, Some(b)) => b,
            (Backend::Mpi, None) => return Ran::failed("no MPI build of the app"),
        };
        let mut cmd = util::ranks_command(bin, &[], case.ranks, case.backend == Backend::Mpi);
        cmd.args(&suite.args)
            .args(["--protocol", &case.protocol])
            .arg("--json")
            .arg(json);
        if let Some(g) = case.grid {
            cmd.args(["--grid", &util::triple(g)]);
        }
        let ran = util::run_report(cmd, json, CASE_LIMIT, |p| {
            util::read_json::<Report>(suite.app, p)
        });
        ran.and_then(|r| check(case, r))
    }

    fn key(r: &Report) -> String {
        r.hash_hex.clone()
    }

    fn shown(k: &String) -> String {
        k.clone()
    }

    fn note(&self, r: &Report) -> Option<String> {
        (self.case.protocol == "auto" && !r.reshape_protocols.is_empty())
            .then(|| format!("auto chose {}", r.reshape_protocols.join(", ")))
    }
}

impl Suite<'_> {
    /// Runs the in-process 1-rank reference with [`REFERENCE_PROTOCOL`],
    /// then `cases` (`jobs` at a time; MPI cases one at a time) through the
    /// suites' runner ([`runner::Suite`]).
    pub fn run(&self, cases: &[Case], jobs: usize) -> Result<()> {
        let mpi = cases.iter().any(|c| c.backend == Backend::Mpi);
        let dir = util::scratch_dir(&format!(
            "bitexact-{}{}",
            self.name,
            if mpi { "-mpi" } else { "" }
        ))?;
        println!(
            "bitexact {}: {} {}, protocols {}, {} suite",
            self.name,
            self.app,
            self.args.join(" "),
            protocols()?.join(", "),
            if mpi { "MPI" } else { "in-process" }
        );
        let reference = [Run {
            suite: self,
            case: Case {
                ranks: 1,
                grid: None,
                protocol: REFERENCE_PROTOCOL.to_string(),
                backend: Backend::InProcess,
            },
        }];
        let runs: Vec<Run<'_>> = cases
            .iter()
            .map(|c| Run {
                suite: self,
                case: c.clone(),
            })
            .collect();
        let table = runner::Suite {
            name: self.name,
            columns: &[
                ("ranks", -5),
                ("grid", 7),
                ("protocol", 14),
                ("backend", 10),
            ],
            hash_width: 16,
        };
        let jobs = if mpi { 1 } else { jobs };
        let result = table.run(&dir, (&reference, 1), (&runs, jobs), |_, _| {});
        let _ = std::fs::remove_dir_all(&dir);
        result.map(|_| ())
    }
}

/// Checks that the report describes the run asked for.
fn check(case: &Case, r: Report) -> std::result::Result<Report, String> {
    if r.ranks != case.ranks || r.backend != case.backend.name() {
        return Err(format!(
            "asked for {} {} rank(s), the report says {} {}",
            case.ranks,
            case.backend.name(),
            r.ranks,
            r.backend
        ));
    }
    if let Some(g) = case.grid {
        if r.grid != g {
            return Err(format!(
                "asked for grid {g:?}, the report says {:?}",
                r.grid
            ));
        }
    }
    if r.config.protocol != case.protocol {
        return Err(format!(
            "asked for protocol {}, the report says {}",
            case.protocol, r.config.protocol
        ));
    }
    if case.ranks > 1 && r.reshape_protocols.is_empty() {
        return Err("no reshape on several ranks: no protocol was exercised".into());
    }
    let want = case
        .protocol
        .parse::<dfft::Protocol>()
        .map_err(|e| e.to_string())?;
    let fits = |name: &str| {
        if want == dfft::Protocol::Auto {
            dfft::Protocol::ALL.iter().any(|p| format!("{p:?}") == name)
        } else {
            format!("{want:?}") == name
        }
    };
    if let Some(bad) = r.reshape_protocols.iter().find(|n| !fits(n)) {
        return Err(format!(
            "asked for protocol {}, a reshape used {bad} (all: {})",
            case.protocol,
            r.reshape_protocols.join(", ")
        ));
    }
    Ok(r)
}

/// The grids of one suite per rank count: `None` lets the app choose.
pub type Grids<'a> = &'a [(usize, &'a [Option<[usize; 3]>])];

/// Builds `app` (and its MPI build when `mpi`) and runs the suite `name`
/// over `grids` in-process, or over `mpi_grids` under MPI, with `args` for
/// every case and `jobs` in-process cases at a time.
pub fn run_app(
    name: &str,
    app: &str,
    args: Vec<String>,
    (grids, mpi_grids): (Grids<'_>, Grids<'_>),
    mpi: bool,
    jobs: usize,
) -> Result<()> {
    let protocols = protocols()?;
    let plain = build_app(app, false)?;
    let mpi_bin = if mpi {
        Some(build_app(app, true)?)
    } else {
        None
    };
    let cases = if mpi {
        cases(mpi_grids, &protocols, Backend::Mpi)
    } else {
        cases(grids, &protocols, Backend::InProcess)
    };
    Suite {
        name,
        app,
        plain,
        mpi: mpi_bin,
        args,
    }
    .run(&cases, jobs)
}

/// Builds `package`'s binary (with feature `mpi` when `mpi`); see
/// [`util::build_binary`].
pub fn build_app(package: &str, mpi: bool) -> Result<PathBuf> {
    util::build_binary(
        util::Artifact {
            package,
            name: package,
            example: false,
        },
        mpi,
    )
    .with_context(|| format!("building {package}"))
}

/// The cases `ranks x grids x protocols` on `backend`, leaving out the
/// reference (1 in-process rank with [`REFERENCE_PROTOCOL`]).
pub fn cases(
    grids: &[(usize, &[Option<[usize; 3]>])],
    protocols: &[String],
    backend: Backend,
) -> Vec<Case> {
    let mut v = vec![];
    for &(ranks, gs) in grids {
        for &grid in gs {
            for p in protocols {
                if ranks == 1 && p == REFERENCE_PROTOCOL && backend == Backend::InProcess {
                    continue;
                }
                v.push(Case {
                    ranks,
                    grid,
                    protocol: p.clone(),
                    backend,
                });
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_protocol_has_a_command_line_name() {
        let names = protocols().unwrap();
        assert_eq!(names.len(), dfft::Protocol::ALL.len() + 1);
        for n in &names {
            n.parse::<dfft::Protocol>().unwrap();
        }
        assert!(names.contains(&"p2p-pipelined".to_string()), "{names:?}");
    }
}
