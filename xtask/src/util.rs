//! Shared helpers: where the workspace and its target folder are, building
//! `heat3d`, running child processes with a time limit, and the part of
//! heat3d's JSON report the tasks read.

use anyhow::{bail, Context, Result};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The flags that let OpenMPI's `mpirun` run as root and start more ranks
/// than there are cores.
pub const MPIRUN_FLAGS: [&str; 2] = ["--allow-run-as-root", "--oversubscribe"];

/// The workspace root (the folder above `xtask/`).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// A `cargo` command (the one that started us, if any) run in the
/// workspace root.
pub fn cargo() -> Command {
    let exe = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut c = Command::new(exe);
    c.current_dir(workspace_root());
    c
}

/// The workspace's target folder, as cargo sees it (honours
/// `CARGO_TARGET_DIR` and `build.target-dir`).
pub fn target_dir() -> Result<PathBuf> {
    let out = cargo()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run `cargo metadata`")?;
    if !out.status.success() {
        bail!("`cargo metadata` failed with {}", out.status);
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("`cargo metadata` printed invalid JSON")?;
    let dir = meta["target_directory"]
        .as_str()
        .context("`cargo metadata` gave no target_directory")?;
    Ok(PathBuf::from(dir))
}

/// A private folder of xtask under the target folder: `target/xtask/NAME`.
pub fn xtask_dir(name: &str) -> Result<PathBuf> {
    let d = target_dir()?.join("xtask").join(name);
    std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
    Ok(d)
}

/// A fresh scratch folder for this process: `target/xtask/tmp/LABEL-PID`.
pub fn scratch_dir(label: &str) -> Result<PathBuf> {
    let d = xtask_dir("tmp")?.join(format!("{label}-{}", std::process::id()));
    if d.exists() {
        std::fs::remove_dir_all(&d).with_context(|| format!("cannot clear {}", d.display()))?;
    }
    std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
    Ok(d)
}

/// A binary target to build: a package's binary or one of its examples.
#[derive(Debug, Clone, Copy)]
pub struct Artifact<'a> {
    /// The package (`-p`).
    pub package: &'a str,
    /// The binary or example name.
    pub name: &'a str,
    /// An example (`--example name`) rather than the package's binary.
    pub example: bool,
}

/// Builds `what` in release (with the `mpi` feature when `mpi`), streaming
/// cargo's progress, and returns a private copy of the executable
/// (`target/xtask/bin/NAME` or `NAME-mpi`). The copy keeps the runs
/// independent of later builds that replace the one in `target/release`
/// with the other feature set.
pub fn build_binary(what: Artifact<'_>, mpi: bool) -> Result<PathBuf> {
    build_with(what, if mpi { Some("mpi") } else { None })
}

/// Builds `what` in release with the package feature `feature` (none:
/// the defaults) and returns a private copy of the executable,
/// `target/xtask/bin/NAME` or `NAME-FEATURE`; see [`build_binary`].
pub fn build_with(what: Artifact<'_>, feature: Option<&str>) -> Result<PathBuf> {
    let mut args = vec!["build", "--release", "-p", what.package];
    if what.example {
        args.extend(["--example", what.name]);
    }
    args.push("--message-format=json-render-diagnostics");
    if let Some(f) = feature {
        args.extend(["--features", f]);
    }
    let shown = format!(
        "cargo {}",
        args.join(" ")
            .replace(" --message-format=json-render-diagnostics", "")
    );
    eprintln!("$ {shown}");
    let mut child = cargo()
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot run `{shown}`"))?;
    let mut exe = None;
    let stdout = child.stdout.take().context("no stdout from cargo")?;
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if v["reason"] == "compiler-artifact" && v["target"]["name"] == what.name {
            if let Some(e) = v["executable"].as_str() {
                exe = Some(PathBuf::from(e));
            }
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("`{shown}` failed with {status}");
    }
    let exe = exe.with_context(|| format!("`{shown}` reported no {} executable", what.name))?;
    let bin = xtask_dir("bin")?;
    let name = match feature {
        Some(f) => format!("{}-{f}", what.name),
        None => what.name.to_string(),
    };
    let dst = bin.join(&name);
    // Copy then rename, so a copy that is still running elsewhere is not
    // overwritten in place ("text file busy").
    let tmp = bin.join(format!(".{name}.{}", std::process::id()));
    std::fs::copy(&exe, &tmp)
        .with_context(|| format!("cannot copy {} to {}", exe.display(), tmp.display()))?;
    std::fs::rename(&tmp, &dst)
        .with_context(|| format!("cannot move {} to {}", tmp.display(), dst.display()))?;
    Ok(dst)
}

/// Builds the `heat3d` app; see [`build_binary`].
pub fn build_heat3d(mpi: bool) -> Result<PathBuf> {
    build_binary(
        Artifact {
            package: "heat3d",
            name: "heat3d",
            example: false,
        },
        mpi,
    )
}

/// The CPU's model name (Linux: the first `model name` of
/// `/proc/cpuinfo`) and the logical core count, for a benchmark's header.
pub fn cpu_model() -> String {
    let name = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "an unknown CPU".to_string());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{name} ({cores} cores)")
}

/// Whether an `mpirun` that answers `--version` is on the path.
pub fn mpirun_available() -> bool {
    Command::new("mpirun")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A command running `bin lead...` on `ranks` ranks: under `mpirun` when
/// `mpi`, else as one process with `--ranks N` after `lead` and no
/// launcher variables in its environment (nothing may make the binary think
/// it runs under mpirun). Arguments added later go to `bin`.
pub fn ranks_command(bin: &Path, lead: &[String], ranks: usize, mpi: bool) -> Command {
    if mpi {
        let mut c = Command::new("mpirun");
        c.args(MPIRUN_FLAGS)
            .args(["-np", &ranks.to_string()])
            .arg(bin)
            .args(lead);
        c
    } else {
        let mut c = Command::new(bin);
        c.args(lead).args(["--ranks", &ranks.to_string()]);
        for v in [
            "OMPI_COMM_WORLD_SIZE",
            "PMI_SIZE",
            "PMI_RANK",
            "PMIX_RANK",
            "MV2_COMM_WORLD_SIZE",
            "MPI_LOCALNRANKS",
        ] {
            c.env_remove(v);
        }
        c
    }
}

/// What a finished child process left.
#[derive(Debug)]
pub struct Outcome {
    /// Its exit status; `None` when it ran past its time limit and was killed.
    pub status: Option<ExitStatus>,
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Everything it printed on stderr.
    pub stderr: String,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl Outcome {
    /// Whether it exited with status 0 in time.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// The exit status in words (`exit status: 1`, `timed out`).
    pub fn status_text(&self) -> String {
        match self.status {
            Some(s) => s.to_string(),
            None => "timed out (killed)".to_string(),
        }
    }
}

fn drain(r: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(mut r) = r {
            let _ = r.read_to_end(&mut s);
        }
        String::from_utf8_lossy(&s).into_owned()
    })
}

/// Ends `child` after a time-out: SIGTERM first (mpirun forwards it to its
/// ranks and cleans up), SIGKILL if it is still there 5 seconds later.
fn terminate(child: &mut Child) {
    let _ = Command::new("sh")
        .args(["-c", &format!("kill -TERM {} 2>/dev/null", child.id())])
        .status();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Runs `cmd` with stdout and stderr captured, killing it after `limit`.
pub fn run_captured(mut cmd: Command, limit: Duration) -> Result<Outcome> {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if start.elapsed() > limit {
            terminate(&mut child);
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Ok(Outcome {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Runs `cmd` with its output streamed to ours, killing it after `limit`;
/// returns the exit status (`None` on time-out).
pub fn run_streamed(mut cmd: Command, limit: Duration) -> Result<Option<ExitStatus>> {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(Some(s));
        }
        if start.elapsed() > limit {
            terminate(&mut child);
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Per-phase median step times (seconds): heat3d's own type.
pub use heat3d::PhaseTimes as Timings;

/// heat3d's `--json` report, read as the app writes it.
pub use heat3d::Report as HeatReport;

/// Reads a report that heat3d wrote with `--json`.
pub fn read_heat3d(path: &Path) -> Result<HeatReport> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("heat3d wrote no report to {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("cannot parse heat3d's report {}", path.display()))
}

/// `AxBxC` as heat3d's `--n` and `--grid` take it.
pub fn triple(v: [usize; 3]) -> String {
    format!("{}x{}x{}", v[0], v[1], v[2])
}

/// The median of `v` (0 for an empty slice).
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        0.5 * (s[n / 2 - 1] + s[n / 2])
    }
}

/// The last `n` lines of `s`, for error messages.
pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// What one case of a suite gave: its parsed report, or why there is none,
/// and how long it ran.
#[derive(Debug)]
pub struct Ran<R> {
    /// The report, or the reason there is none.
    pub result: std::result::Result<R, String>,
    /// Wall-clock seconds of the run (0 when it did not start).
    pub seconds: f64,
}

impl<R> Ran<R> {
    /// A case that could not run.
    pub fn failed(why: impl Into<String>) -> Self {
        Ran {
            result: Err(why.into()),
            seconds: 0.0,
        }
    }

    /// The same run with its report passed through `check` (which may
    /// turn it into the reason the run does not count).
    pub fn and_then(self, check: impl FnOnce(R) -> std::result::Result<R, String>) -> Self {
        Ran {
            result: self.result.and_then(check),
            seconds: self.seconds,
        }
    }
}

/// Runs `cmd` (which writes its report to `json`) within `limit` and reads
/// the report with `read`. A failed run gives its status, its stderr and the
/// tail of its stdout; a missing or unreadable report, `read`'s error and
/// the stderr.
pub fn run_report<R>(
    cmd: Command,
    json: &Path,
    limit: Duration,
    read: impl FnOnce(&Path) -> std::result::Result<R, String>,
) -> Ran<R> {
    let _ = std::fs::remove_file(json);
    let out = match run_captured(cmd, limit) {
        Ok(o) => o,
        Err(e) => return Ran::failed(format!("{e:#}")),
    };
    let seconds = out.seconds;
    if !out.success() {
        return Ran {
            result: Err(format!(
                "{}\n--- stderr ---\n{}\n--- stdout (tail) ---\n{}",
                out.status_text(),
                out.stderr.trim_end(),
                tail(&out.stdout, 10)
            )),
            seconds,
        };
    }
    Ran {
        result: read(json).map_err(|e| format!("{e}\n--- stderr ---\n{}", out.stderr.trim_end())),
        seconds,
    }
}

/// Writes a bench's JSON `report` to `path` (pretty, through a temporary
/// file renamed into place, so no half-written report is left) and prints
/// where it and the `extra` files (the plot) went, with the bench's time.
pub fn write_report(
    path: &Path,
    report: &serde_json::Value,
    extra: &[&Path],
    start: Instant,
) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(report)? + "\n")
        .and_then(|_| std::fs::rename(&tmp, path))
        .with_context(|| format!("cannot write {}", path.display()))?;
    let names: Vec<String> = std::iter::once(path)
        .chain(extra.iter().copied())
        .map(|p| p.display().to_string())
        .collect();
    println!(
        "\nwrote {} ({:.1} s)",
        names.join(" and "),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Reads a JSON report of type `R`; the error names the app and the file.
pub fn read_json<R: serde::de::DeserializeOwned>(
    app: &str,
    json: &Path,
) -> std::result::Result<R, String> {
    let text = std::fs::read_to_string(json)
        .map_err(|e| format!("{app} wrote no report to {}: {e}", json.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("cannot parse {}: {e}", json.display()))
}

/// Runs `run(i, case)` for every case on `jobs` threads and calls
/// `done(i, case, result)` in case order, each as soon as it and every case
/// before it have finished.
pub fn run_ordered<C: Sync, T: Send>(
    cases: &[C],
    jobs: usize,
    run: impl Fn(usize, &C) -> T + Sync,
    mut done: impl FnMut(usize, &C, &T),
) {
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(usize, T)>();
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, cases.len().max(1)) {
            let tx = tx.clone();
            let (next, run) = (&next, &run);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(case) = cases.get(i) else { break };
                if tx.send((i, run(i, case))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut slots: Vec<Option<T>> = (0..cases.len()).map(|_| None).collect();
        let mut printed = 0;
        for (i, r) in rx {
            slots[i] = Some(r);
            while let Some(Some(r)) = slots.get(printed) {
                done(printed, &cases[printed], r);
                printed += 1;
            }
        }
    });
}
