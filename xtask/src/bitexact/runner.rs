//! The one runner of the app suites of `cargo xtask bitexact`: the
//! reference runs, then every case compared with its reference, one table
//! row each (its columns, the hash, the verdict, the time, and the error of a
//! failed run), and the tally that fails the suite on any failed or
//! differing case. Each suite says what a case is ([`Case`]) and lists its
//! cases; the runner does the rest the same way for all of them.

use crate::util;
use anyhow::{bail, Result};
use std::path::Path;
use std::time::Instant;

/// One run of a suite.
pub(crate) trait Case: Sync {
    /// What the run reports (read from its `--json` file).
    type Report: Send;
    /// What two runs are compared by (a hash, or several).
    type Key: Clone + PartialEq + Send;
    /// The cells of the case's row, one per column of the suite.
    fn cells(&self) -> Vec<String>;
    /// The index, among the suite's references, of the run this case must
    /// agree with.
    fn reference(&self) -> usize;
    /// Runs the case with its report written to `json`.
    fn run(&self, json: &Path) -> util::Ran<Self::Report>;
    /// What a report is compared by.
    fn key(report: &Self::Report) -> Self::Key;
    /// The hash shown in the table.
    fn shown(key: &Self::Key) -> String;
    /// `None` where `got` agrees with `reference`; else the verdict shown
    /// (`DIFF`, or a suite's finer word).
    fn differs(got: &Self::Key, reference: &Self::Key) -> Option<&'static str> {
        (got != reference).then_some("DIFF")
    }
    /// A line printed under the case's row (what `auto` chose, say).
    fn note(&self, _report: &Self::Report) -> Option<String> {
        None
    }
}

/// A suite's name and table.
pub(crate) struct Suite<'a> {
    /// The suite's name in the summary (`bitexact NAME: ...`).
    pub name: &'a str,
    /// The columns before the hash: header and width (a negative width
    /// aligns right).
    pub columns: &'a [(&'a str, isize)],
    /// Width of the hash column.
    pub hash_width: usize,
}

/// How many runs agreed and how many did not.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    pub passed: usize,
    pub failed: usize,
}

fn cell(text: &str, width: isize) -> String {
    let w = width.unsigned_abs();
    if width < 0 {
        format!("{text:>w$}")
    } else {
        format!("{text:<w$}")
    }
}

impl Suite<'_> {
    fn line(&self, cells: &[String], hash: &str, verdict: &str, time: &str) -> String {
        let mut s: Vec<String> = cells
            .iter()
            .zip(self.columns)
            .map(|(c, &(_, w))| cell(c, w))
            .collect();
        s.push(cell(hash, self.hash_width as isize));
        s.push(cell(verdict, 6));
        s.push(cell(time, -7));
        s.join(" ")
    }

    /// Runs `references` on `jobs` threads, then `cases` on `case_jobs`
    /// threads, each compared with its reference ([`Case::reference`]),
    /// every row printed as soon as it and the rows before it are done;
    /// `seen` sees every report (for a suite's own checks of what its cases
    /// exercised). The reports go to `dir`. Prints the table and the
    /// summary, and fails if any run failed or differed.
    pub fn run<C: Case>(
        &self,
        dir: &Path,
        (references, jobs): (&[C], usize),
        (cases, case_jobs): (&[C], usize),
        mut seen: impl FnMut(&C, &C::Report),
    ) -> Result<Tally> {
        let start = Instant::now();
        let headers: Vec<String> = self.columns.iter().map(|(h, _)| h.to_string()).collect();
        println!("{}", self.line(&headers, "hash", "result", "time"));
        let mut tally = Tally::default();
        let mut row = |case: &C, ran: &util::Ran<C::Report>, reference: Option<Option<&C::Key>>| {
            let key = ran.result.as_ref().ok().map(C::key);
            let verdict = match (&key, reference) {
                (Some(_), None) => "ref",
                (Some(k), Some(Some(want))) => C::differs(k, want).unwrap_or("OK"),
                (Some(_), Some(None)) => "NOREF",
                (None, _) => "FAILED",
            };
            if let Ok(r) = &ran.result {
                seen(case, r);
            }
            if matches!(verdict, "ref" | "OK") {
                tally.passed += 1;
            } else {
                tally.failed += 1;
            }
            let hash = key.as_ref().map_or("-".to_string(), C::shown);
            let time = format!("{:.2}s", ran.seconds);
            println!("{}", self.line(&case.cells(), &hash, verdict, &time));
            match &ran.result {
                Err(e) => {
                    for line in util::tail(e, 20).lines() {
                        println!("      | {line}");
                    }
                }
                Ok(r) => {
                    if let Some(n) = case.note(r) {
                        println!("      | {n}");
                    }
                }
            }
            key
        };
        let mut keys: Vec<Option<C::Key>> = vec![None; references.len()];
        util::run_ordered(
            references,
            jobs,
            |i, c| c.run(&dir.join(format!("ref{i}.json"))),
            |i, c, ran| keys[i] = row(c, ran, None),
        );
        util::run_ordered(
            cases,
            case_jobs,
            |i, c| c.run(&dir.join(format!("case{i}.json"))),
            |_, c, ran| {
                let want = keys.get(c.reference()).and_then(Option::as_ref);
                row(c, ran, Some(want));
            },
        );
        println!(
            "({} runs in {:.1} s)",
            tally.passed + tally.failed,
            start.elapsed().as_secs_f64()
        );
        println!(
            "bitexact {}: {} passed, {} failed",
            self.name, tally.passed, tally.failed
        );
        if tally.failed > 0 {
            bail!(
                "{} of {} {} runs failed or differed",
                tally.failed,
                tally.passed + tally.failed,
                self.name
            );
        }
        Ok(tally)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A case that "runs" by returning a fixed hash (or an error).
    struct Fake {
        name: &'static str,
        reference: usize,
        hash: Result<u64, &'static str>,
    }

    impl Case for Fake {
        type Report = u64;
        type Key = u64;
        fn cells(&self) -> Vec<String> {
            vec![self.name.to_string()]
        }
        fn reference(&self) -> usize {
            self.reference
        }
        fn run(&self, _: &Path) -> util::Ran<u64> {
            util::Ran {
                result: self.hash.map_err(String::from),
                seconds: 0.0,
            }
        }
        fn key(r: &u64) -> u64 {
            *r
        }
        fn shown(k: &u64) -> String {
            format!("{k:016x}")
        }
    }

    fn fake(name: &'static str, reference: usize, hash: Result<u64, &'static str>) -> Fake {
        Fake {
            name,
            reference,
            hash,
        }
    }

    const SUITE: Suite<'static> = Suite {
        name: "fake",
        columns: &[("case", 6)],
        hash_width: 16,
    };

    #[test]
    fn cases_pass_only_where_they_equal_their_reference() {
        let dir = std::env::temp_dir();
        let refs = [fake("r0", 0, Ok(1)), fake("r1", 1, Ok(2))];
        let good = [fake("a", 0, Ok(1)), fake("b", 1, Ok(2))];
        let t = SUITE.run(&dir, (&refs, 1), (&good, 2), |_, _| {}).unwrap();
        assert_eq!(
            t,
            Tally {
                passed: 4,
                failed: 0
            }
        );
        // A different hash, a failed run, and a case whose reference failed.
        let bad = [fake("a", 0, Ok(2)), fake("b", 1, Err("crashed"))];
        let e = SUITE
            .run(&dir, (&refs, 1), (&bad, 2), |_, _| {})
            .unwrap_err();
        assert!(e.to_string().contains("2 of 4 fake runs"), "{e}");
        let broken = [fake("r0", 0, Err("no reference"))];
        let e = SUITE
            .run(&dir, (&broken, 1), (&good[..1], 1), |_, _| {})
            .unwrap_err();
        assert!(e.to_string().contains("2 of 2"), "{e}");
        // Every report is seen once.
        let mut seen = 0;
        SUITE
            .run(&dir, (&refs, 1), (&good, 1), |_, _| seen += 1)
            .unwrap();
        assert_eq!(seen, 4);
    }
}
