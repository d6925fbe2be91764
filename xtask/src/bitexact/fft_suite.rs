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

use crate::util;
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

impl Suite<'_> {
    fn run_case(&self, case: &Case, json: &Path) -> Ran {
        let bin = match (case.backend, &self.mpi) {
            (Backend::InProcess, _) => &self.plain,
            (Backend::Mpi, Some(b)) => b,
            (Backend::Mpi, None) => return Ran::failed("no MPI build of the app"),
        };
        let mut cmd = util::ranks_command(bin, &[], case.ranks, case.backend == Backend::Mpi);
        cmd.args(&self.args)
            .args(["--protocol", &case.protocol])
            .arg("--json")
            .arg(json);
        if let Some(g) = case.grid {
            cmd.args(["--grid", &util::triple(g)]);
        }
        let ran = util::run_report(cmd, json, CASE_LIMIT, |p| {
            util::read_json::<Report>(self.app, p)
        });
        Ran {
            result: ran.result.and_then(|r| check(case, r)),
            seconds: ran.seconds,
        }
    }

    /// Runs `cases` on `jobs` threads; calls `done` in case order, each as
    /// soon as it and every case before it have finished.
    fn run_all(
        &self,
        dir: &Path,
        label: &str,
        cases: &[Case],
        jobs: usize,
        mut done: impl FnMut(&Case, &Ran),
    ) {
        util::run_ordered(
            cases,
            jobs,
            |i, case| self.run_case(case, &dir.join(format!("{label}{i}.json"))),
            |_, case, ran| done(case, ran),
        );
    }

    /// Runs the in-process 1-rank reference with [`REFERENCE_PROTOCOL`],
    /// then `cases` (`jobs` at a time; MPI cases one at a time); prints the
    /// table and `bitexact NAME: N passed, M failed`, and fails if any case
    /// failed or differed.
    pub fn run(&self, cases: &[Case], jobs: usize) -> Result<()> {
        let mpi = cases.iter().any(|c| c.backend == Backend::Mpi);
        let dir = util::scratch_dir(&format!(
            "bitexact-{}{}",
            self.name,
            if mpi { "-mpi" } else { "" }
        ))?;
        let start = Instant::now();
        println!(
            "bitexact {}: {} {}, protocols {}, {} suite",
            self.name,
            self.app,
            self.args.join(" "),
            protocols()?.join(", "),
            if mpi { "MPI" } else { "in-process" }
        );
        println!(
            "{:>5} {:<7} {:<14} {:<10} {:<16} {:<6} {:>7}",
            "ranks", "grid", "protocol", "backend", "hash", "result", "time"
        );
        let reference = Case {
            ranks: 1,
            grid: None,
            protocol: REFERENCE_PROTOCOL.to_string(),
            backend: Backend::InProcess,
        };
        let (mut passed, mut failed) = (0usize, 0usize);
        let mut ref_hash: Option<String> = None;
        let mut tally = |case: &Case, ran: &Ran, reference: Option<Option<&str>>| {
            let verdict = match (&ran.result, reference) {
                (Ok(_), None) => "ref",
                (Ok(r), Some(Some(h))) if r.hash_hex == h => "OK",
                (Ok(_), Some(Some(_))) => "DIFF",
                (Ok(_), Some(None)) => "NOREF",
                (Err(_), _) => "FAILED",
            };
            if matches!(verdict, "ref" | "OK") {
                passed += 1;
            } else {
                failed += 1;
            }
            println!(
                "{:>5} {:<7} {:<14} {:<10} {:<16} {:<6} {:>6.2}s",
                case.ranks,
                ran.result
                    .as_ref()
                    .map_or("-".to_string(), |r| util::triple(r.grid)),
                case.protocol,
                case.backend.name(),
                ran.result.as_ref().map_or("-", |r| r.hash_hex.as_str()),
                verdict,
                ran.seconds
            );
            match &ran.result {
                Err(e) => {
                    for line in e.lines() {
                        println!("      | {line}");
                    }
                }
                Ok(r) if case.protocol == "auto" && !r.reshape_protocols.is_empty() => {
                    println!("      | auto chose {}", r.reshape_protocols.join(", "));
                }
                Ok(_) => {}
            }
        };
        self.run_all(&dir, "ref", std::slice::from_ref(&reference), 1, |c, r| {
            tally(c, r, None);
            ref_hash = r.result.as_ref().ok().map(|r| r.hash_hex.clone());
        });
        let jobs = if mpi { 1 } else { jobs };
        self.run_all(&dir, "case", cases, jobs, |c, r| {
            tally(c, r, Some(ref_hash.as_deref()));
        });
        let _ = std::fs::remove_dir_all(&dir);
        println!(
            "bitexact {}: {passed} passed, {failed} failed ({} runs in {:.1} s)",
            self.name,
            passed + failed,
            start.elapsed().as_secs_f64()
        );
        if failed > 0 {
            bail!(
                "{failed} of {} {} bit-exactness runs failed or differed",
                passed + failed,
                self.name
            );
        }
        Ok(())
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
