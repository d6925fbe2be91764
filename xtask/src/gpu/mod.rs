//! `cargo xtask gpu` (the device suite) and `cargo xtask bench gpu`.
//!
//! Both need a CUDA device. On a machine with one and a Rust toolchain they
//! build what they run; for a GPU machine without a toolchain,
//! `--stage DIR` builds everything here (heat3d and pfc with `cuda`, the
//! device tests of `gpu`, `halo`, `dfft`, `heat3d` and `pfc`, the two
//! reference probes, and this xtask) into DIR, and `DIR/xtask gpu --bin-dir DIR` (or
//! `DIR/xtask bench gpu --bin-dir DIR`) runs there from those binaries.

pub(crate) mod scaling;

use crate::util::{self, run_captured, run_report, Ran};
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Options of `cargo xtask gpu`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Build the binaries the GPU suite and benchmark run into DIR (with
    /// this xtask) and stop: for a GPU machine that has no Rust toolchain.
    #[arg(long, value_name = "DIR", conflicts_with = "bin_dir")]
    pub stage: Option<PathBuf>,
    /// Run from the binaries staged in DIR instead of building them.
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// Orders 2, 8 and 20 only.
    #[arg(long)]
    pub quick: bool,
}

/// Options of `cargo xtask bench gpu`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Run from the binaries staged in DIR (see `cargo xtask gpu --stage`).
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// 256^3 only, fewer steps.
    #[arg(long)]
    pub quick: bool,
    /// Folder for the results (`gpu.json`, `gpu.md`); default: the
    /// scratch folder.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The parts to run (comma-separated): shapes (FD-2 launch shapes),
    /// orders (every order with each stencil), periodic (one rank reading
    /// across its faces at the periodic images against self-copies, every
    /// order), passes (two Euler steps a pass against one, order 2), ranks
    /// (blocking vs overlap on ranks sharing the GPU), mpi (the same, and
    /// the spectral step, under mpirun; skipped without it), spectral,
    /// pfc. Default: all.
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(["shapes", "orders", "periodic", "passes", "ranks", "mpi", "spectral", "pfc"]))]
    pub sections: Vec<String>,
    /// The stencil orders of the `orders` and `periodic` parts (default 2,
    /// 4, ..., 20).
    #[arg(long, value_delimiter = ',')]
    pub orders: Vec<usize>,
}

/// The binaries the suite and the benchmark run.
pub(crate) struct Bins {
    heat3d: PathBuf,
    pfc: PathBuf,
    pub(crate) copy: PathBuf,
    cufft: PathBuf,
    tests: Vec<PathBuf>,
    pub(crate) scratch: PathBuf,
}

/// Runs `cargo ARGS --message-format=json` and returns the executables of
/// the artifacts for which `keep(target name, is test)` holds, named by
/// their target (tests: `NAME_KIND`, kind `lib` or `test`).
fn cargo_artifacts(
    args: &[&str],
    keep: impl Fn(&str, bool) -> bool,
) -> Result<Vec<(String, PathBuf)>> {
    let shown = format!("cargo {}", args.join(" "));
    eprintln!("$ {shown}");
    let mut child = util::cargo()
        .args(args)
        .arg("--message-format=json-render-diagnostics")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot run `{shown}`"))?;
    let stdout = child.stdout.take().context("no stdout from cargo")?;
    let mut out = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line?) else {
            continue;
        };
        if v["reason"] != "compiler-artifact" {
            continue;
        }
        let (Some(exe), Some(name)) = (v["executable"].as_str(), v["target"]["name"].as_str())
        else {
            continue;
        };
        let test = v["profile"]["test"].as_bool().unwrap_or(false);
        if keep(name, test) {
            // Tests are named after their package too: several packages
            // have integration tests of the same name (`faults`, `props`).
            let name = if test {
                format!(
                    "{}_{name}_{}",
                    package_name(v["package_id"].as_str().unwrap_or("")),
                    v["target"]["kind"][0].as_str().unwrap_or("test")
                )
            } else {
                name.to_string()
            };
            out.push((name, PathBuf::from(exe)));
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("`{shown}` failed with {status}");
    }
    Ok(out)
}

/// A package's name from its cargo package id: `path+file:///dir/name#1.0`
/// or `path+file:///dir#name@1.0` (a name that differs from the folder),
/// or the older `name 1.0 (path+file:///dir)`.
fn package_name(id: &str) -> &str {
    if let Some((url, frag)) = id.split_once('#') {
        match frag.split_once('@') {
            Some((name, _)) => name,
            None => url.rsplit('/').next().unwrap_or(url),
        }
    } else {
        id.split_whitespace().next().unwrap_or(id)
    }
}

/// The features of every build: the apps with `mpi` too (the suite runs
/// them under mpirun), in the tests' build as well, which writes the same
/// binaries.
const FEATURES: &str = "parnum-gpu/cuda,parnum-halo/cuda,parnum-dfft/cuda,parnum-stencil/cuda,\
     heat3d/cuda,heat3d/mpi,pfc/cuda,pfc/mpi";

/// [`FEATURES`] for the build that selects the apps alone (`--features`
/// names only features of the selected packages; the apps' `cuda` turns on
/// the same features of `gpu`, `halo`, `dfft` and `stencil`, so the resolved features,
/// and the binaries, are those of the tests' build).
const APP_FEATURES: &str = "heat3d/cuda,heat3d/mpi,pfc/cuda,pfc/mpi";

/// Test targets the device runs would only repeat: `hip_kernels` is empty
/// without the `hip` feature (CI builds it with), and `props` holds host
/// property tests (CI runs them). Leaving them out keeps the staged folder
/// within what one device call carries (64 MiB).
const HOST_ONLY_TESTS: [&str; 2] = ["hip_kernels", "props"];

/// Builds every binary and returns (name, path) pairs.
fn build_all() -> Result<Vec<(String, PathBuf)>> {
    let mut all = cargo_artifacts(
        &[
            "build",
            "--release",
            "-p",
            "heat3d",
            "-p",
            "pfc",
            "--features",
            // `mpi` too: the suite also runs them under mpirun (the
            // binaries detect the launcher, and run in-process ranks
            // otherwise).
            APP_FEATURES,
        ],
        |n, _| n == "heat3d" || n == "pfc",
    )?;
    all.extend(cargo_artifacts(
        &[
            "build",
            "--release",
            "-p",
            "parnum-gpu",
            "-p",
            "parnum-dfft",
            "--features",
            "parnum-gpu/cuda,parnum-dfft/cuda",
            "--example",
            "copy_bandwidth",
            "--example",
            "cufft_pair",
        ],
        |n, _| n == "copy_bandwidth" || n == "cufft_pair",
    )?);
    let tests = cargo_artifacts(
        &[
            "test",
            "--release",
            "--no-run",
            "--lib",
            "-p",
            "parnum-gpu",
            "-p",
            "parnum-halo",
            "-p",
            "parnum-dfft",
            "-p",
            "parnum-stencil",
            "-p",
            "heat3d",
            "-p",
            "pfc",
            // The integration tests too: stencil's compare the device
            // sweeps with the host's, heat3d's and pfc's whole runs.
            "--tests",
            "--features",
            FEATURES,
        ],
        |name, test| test && !HOST_ONLY_TESTS.contains(&name),
    )?;
    all.extend(tests.into_iter().map(|(n, p)| (format!("test_{n}"), p)));
    // The device tests alone of multigrid (the device hierarchy against
    // the host's bits), flow (the whole step on the GPU against the CPU's)
    // and poisson (the app's solve); their other tests are host tests,
    // which CI runs.
    for (package, feature) in [
        ("parnum-multigrid", "parnum-multigrid/cuda"),
        ("flow", "flow/cuda"),
        ("poisson", "poisson/cuda"),
    ] {
        let built = cargo_artifacts(
            &[
                "test",
                "--release",
                "--no-run",
                "-p",
                package,
                "--features",
                feature,
                "--test",
                "device",
            ],
            |name, test| test && name == "device",
        )?;
        let short = package.trim_start_matches("parnum-");
        all.extend(
            built
                .into_iter()
                .map(|(n, p)| (format!("test_{short}_{n}"), p)),
        );
    }
    Ok(all)
}

fn bins_from(list: &[(String, PathBuf)], scratch: PathBuf) -> Result<Bins> {
    let find = |name: &str| {
        list.iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p.clone())
            .with_context(|| format!("no {name} among the built or staged binaries"))
    };
    Ok(Bins {
        heat3d: find("heat3d")?,
        pfc: find("pfc")?,
        copy: find("copy_bandwidth")?,
        cufft: find("cufft_pair")?,
        tests: list
            .iter()
            .filter(|(n, _)| n.starts_with("test_"))
            .map(|(_, p)| p.clone())
            .collect(),
        scratch,
    })
}

/// The binaries: staged in `dir`, or built now.
pub(crate) fn bins(bin_dir: Option<&Path>) -> Result<Bins> {
    match bin_dir {
        Some(d) => {
            let mut list = Vec::new();
            for e in std::fs::read_dir(d).with_context(|| format!("cannot read {}", d.display()))? {
                let p = e?.path();
                let name = p
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                list.push((name, p));
            }
            let scratch = std::env::temp_dir().join(format!("xtask-gpu-{}", std::process::id()));
            std::fs::create_dir_all(&scratch)?;
            bins_from(&list, scratch)
        }
        None => bins_from(&build_all()?, util::scratch_dir("gpu")?),
    }
}

/// `--stage DIR`: builds and copies (stripped where `strip` exists).
fn stage(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut list = build_all()?;
    list.push(("xtask".into(), std::env::current_exe()?));
    for (name, p) in &list {
        let to = dir.join(name);
        std::fs::copy(p, &to)
            .with_context(|| format!("cannot copy {} to {}", p.display(), to.display()))?;
        let _ = Command::new("strip").arg(&to).status();
    }
    let bytes: u64 = list
        .iter()
        .filter_map(|(name, _)| std::fs::metadata(dir.join(name)).ok())
        .map(|m| m.len())
        .sum();
    println!(
        "staged {} binaries in {} ({:.1} MiB)",
        list.len(),
        dir.display(),
        bytes as f64 / (1u64 << 20) as f64
    );
    // One device call carries at most 64 MiB of working tree.
    if bytes > 64 << 20 {
        println!(
            "note: more than the 64 MiB one device call carries; carry the binaries in two folders, or leave out the tests the call does not need"
        );
    }
    Ok(())
}

/// The heat3d report fields this suite reads.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Last {
    pub(crate) max_error: f64,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Report {
    pub(crate) hash_hex: String,
    pub(crate) last: Last,
    pub(crate) timings: util::Timings,
    /// How the halo travelled (`direct`, `staged`; older binaries omit it).
    #[serde(default)]
    pub(crate) halo: String,
    /// The communicator's backend (`local`, `mpi`).
    #[serde(default)]
    backend: String,
    /// How each reshape of the spectral transform travelled.
    #[serde(default)]
    reshape_protocols: Vec<String>,
}

/// Whether a multi-rank device spectral run's reshapes all went device to
/// device.
fn all_direct(r: &Report) -> bool {
    !r.reshape_protocols.is_empty() && r.reshape_protocols.iter().all(|p| p == "DeviceDirect")
}

pub(crate) fn heat3d(b: &Bins, tag: &str, args: &[String], limit: u64) -> Ran<Report> {
    let json = b.scratch.join(format!("{tag}.json"));
    let mut c = Command::new(&b.heat3d);
    c.args(args).arg("-q").arg("--json").arg(&json);
    run_report(c, &json, Duration::from_secs(limit), |p| {
        util::read_json("heat3d", p)
    })
}

/// heat3d under `mpirun -np np` (one process per rank, sharing the GPU).
pub(crate) fn heat3d_mpi(
    b: &Bins,
    tag: &str,
    np: usize,
    args: &[String],
    limit: u64,
) -> Ran<Report> {
    let json = b.scratch.join(format!("{tag}.json"));
    let mut c = util::ranks_command(&b.heat3d, args, np, true);
    c.arg("-q").arg("--json").arg(&json);
    run_report(c, &json, Duration::from_secs(limit), |p| {
        util::read_json("heat3d", p)
    })
}

/// The pfc report fields this suite reads.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PfcLast {
    step: u64,
    pub(crate) free_energy: f64,
    mean_density: f64,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PfcReport {
    pub(crate) last: PfcLast,
    pub(crate) median_step: f64,
    device: String,
}

fn pfc(b: &Bins, tag: &str, args: &[String], limit: u64) -> Ran<PfcReport> {
    pfc_on(b, tag, None, args, limit)
}

/// pfc on in-process ranks (`np` `None`) or under `mpirun -np np`.
pub(crate) fn pfc_on(
    b: &Bins,
    tag: &str,
    np: Option<usize>,
    args: &[String],
    limit: u64,
) -> Ran<PfcReport> {
    let json = b.scratch.join(format!("{tag}.json"));
    let mut c = match np {
        Some(np) => util::ranks_command(&b.pfc, args, np, true),
        None => {
            let mut c = Command::new(&b.pfc);
            c.args(args);
            c
        }
    };
    c.arg("-q").arg("--json").arg(&json);
    run_report(c, &json, Duration::from_secs(limit), |p| {
        util::read_json("pfc", p)
    })
}

/// Relative agreement of pfc's cuda and cpu free energy and mean density
/// after 20 steps of a 24^3 seed: the FFTs round differently (a few eps
/// per transform pair, amplified at most about 17 times by the growing
/// modes' linear factor over 20 steps; 1.2e-15 measured on an H200);
/// `apps/pfc/tests/cuda_backend.rs` explains the margin.
const PFC_TOL: f64 = 1e-10;

pub(crate) fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// heat3d's report for `args` on the cpu backend (the reference of the
/// device cases), or `None` with a failed check naming the run.
/// Checks that heat3d with `args` gives `cpu`'s field hash (case `name`).
fn same_hash(b: &Bins, t: &mut Tally, name: &str, args: &str, cpu: &Report) {
    match heat3d(b, "dev", &words(args), 600).result {
        Ok(r) => t.check(
            name,
            r.hash_hex == cpu.hash_hex,
            &format!("{} vs cpu {}", r.hash_hex, cpu.hash_hex),
        ),
        Err(e) => t.check(name, false, &e),
    }
}

fn cpu_reference(b: &Bins, t: &mut Tally, args: &str) -> Option<Report> {
    match heat3d(b, "ref", &words(&format!("{args} --backend cpu")), 600).result {
        Ok(r) => Some(r),
        Err(e) => {
            t.check(&format!("cpu reference: {args}"), false, &e);
            None
        }
    }
}

/// Tallies checks and prints each.
#[derive(Default)]
struct Tally {
    passed: usize,
    failed: Vec<String>,
}

impl Tally {
    fn check(&mut self, name: &str, ok: bool, detail: &str) {
        println!("{} {name}: {detail}", if ok { "ok  " } else { "FAIL" });
        if ok {
            self.passed += 1;
        } else {
            self.failed.push(name.to_string());
        }
    }
}

/// `cargo xtask gpu`.
pub fn run(a: &Args) -> Result<()> {
    if let Some(d) = &a.stage {
        return stage(d);
    }
    let start = Instant::now();
    let b = bins(a.bin_dir.as_deref())?;
    let mut t = Tally::default();
    // A device must be there: the tests below would skip without one.
    let probe = run_captured(
        {
            let mut c = Command::new(&b.copy);
            c.args(["64", "3"]);
            c
        },
        Duration::from_secs(120),
    )?;
    if !probe.success() {
        bail!("no usable CUDA device: {}", probe.stderr.trim());
    }
    println!("device: {}", probe.stdout.trim());
    // The apps' tests that start the app find it here, not in the build's
    // target folder (absent where staged binaries run).
    let app = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (heat3d_bin, pfc_bin) = (app(&b.heat3d), app(&b.pfc));
    for test in &b.tests {
        let out = run_captured(
            {
                let mut c = Command::new(test);
                c.args(["--test-threads=1", "--nocapture"])
                    .env("HEAT3D_BIN", &heat3d_bin)
                    .env("PFC_BIN", &pfc_bin);
                c
            },
            Duration::from_secs(600),
        )?;
        let skipped = out.stderr.contains("skipped: no CUDA device");
        let name = test.file_name().unwrap_or_default().to_string_lossy();
        let summary = out
            .stdout
            .lines()
            .find(|l| l.starts_with("test result"))
            .unwrap_or("no summary")
            .to_string();
        t.check(
            &format!("tests {name}"),
            out.success() && !skipped,
            &if skipped {
                "a device test skipped".to_string()
            } else if out.success() {
                summary
            } else {
                util::tail(&format!("{}\n{}", out.stdout, out.stderr), 30)
            },
        );
    }
    // The device gives the host's bits: every order, blocking and
    // overlapped, 1, 2 and 4 ranks sharing the GPU, Euler and RK4.
    let orders: Vec<usize> = if a.quick {
        vec![2, 8, 20]
    } else {
        (1..=10).map(|r| 2 * r).collect()
    };
    let base = "--n 40 --steps 12 --initial gaussian";
    for &o in &orders {
        for integ in ["euler", "rk4"] {
            if integ == "rk4" && ![2, 8, 20].contains(&o) {
                continue;
            }
            let Some(cpu) = cpu_reference(
                &b,
                &mut t,
                &format!("{base} --order {o} --integrator {integ} --ranks 1 --mode blocking"),
            ) else {
                continue;
            };
            for case in [
                "--ranks 1 --mode blocking",
                "--ranks 1 --mode overlap",
                "--ranks 1 --mode overlap --gpu-chunk 1",
                "--ranks 1 --mode overlap --gpu-chunk 7",
                "--ranks 1 --mode overlap --gpu-stencil shared",
                "--ranks 2 --mode overlap --gpu-stencil shared --gpu-chunk 3",
                "--ranks 1 --mode blocking --gpu-stencil cached --steps-per-pass 1",
                "--ranks 1 --mode blocking --gpu-stencil shared --steps-per-pass 1",
                "--ranks 1 --mode blocking --gpu-stencil shuffle --steps-per-pass 1",
                "--ranks 1 --mode overlap --gpu-stencil pairs --gpu-chunk 3",
                "--ranks 4 --mode overlap --grid 1x2x2 --gpu-stencil pairs",
                "--ranks 1 --mode overlap --gpu-stencil shuffle",
                "--ranks 4 --mode overlap --grid 1x2x2 --gpu-stencil shuffle --gpu-chunk 5",
                "--ranks 2 --mode overlap",
                "--ranks 4 --mode overlap",
                "--ranks 4 --mode blocking --grid 1x2x2",
                "--ranks 4 --mode overlap --gpu-exchange staged",
                "--ranks 2 --mode blocking --gpu-exchange staged --gpu-stencil pairs",
                "--ranks 1 --mode overlap --gpu-exchange nccl",
                "--ranks 1 --mode blocking --gpu-periodic copy --gpu-exchange nccl --steps-per-pass 1",
            ] {
                let r = heat3d(
                    &b,
                    "dev",
                    &words(&format!(
                        "{base} --order {o} --integrator {integ} --backend cuda {case}"
                    )),
                    600,
                );
                let name = format!("order {o} {integ} cuda {case}");
                // In-process ranks share the GPU's buffers directly unless
                // told to stage through the host (or to use NCCL, which one
                // rank alone can).
                let halo = if case.contains("staged") {
                    "staged"
                } else if case.contains("nccl") {
                    "nccl"
                } else {
                    "direct"
                };
                match r.result {
                    Ok(r) => t.check(
                        &name,
                        r.hash_hex == cpu.hash_hex
                            && ((case.contains("--ranks 1 ") && halo == "direct")
                                || r.halo == halo),
                        &format!("{} vs cpu {}, {} halo", r.hash_hex, cpu.hash_hex, r.halo),
                    ),
                    Err(e) => t.check(&name, false, &e),
                }
            }
        }
    }
    // One rank's blocking stencils read across the faces at the periodic
    // images (no ghost read, no exchange) or from ghosts filled by the
    // self-copies, each on a small grid some of whose extents lie between
    // the radius and twice it, so that a cell has two images.
    for (o, integ) in [
        (2, "euler"),
        (4, "euler"),
        (12, "euler"),
        (20, "euler"),
        (2, "rk4"),
        (20, "rk4"),
    ] {
        let small = format!("--n 12x16x10 --steps 7 --initial gaussian --order {o} --integrator {integ} --mode blocking --ranks 1");
        let Some(cpu) = cpu_reference(&b, &mut t, &small) else {
            continue;
        };
        for (stencil, periodic) in ["cached", "pairs", "shuffle", "shared"]
            .into_iter()
            .flat_map(|s| [(s, "read"), (s, "copy")])
        {
            // One step a pass, explicitly: these cases test the stencil,
            // whatever the default for two steps a pass.
            let args = format!(
                "--backend cuda --gpu-stencil {stencil} --gpu-periodic {periodic} --steps-per-pass 1"
            );
            same_hash(
                &b,
                &mut t,
                &format!("order {o} {integ} cuda 12x16x10 blocking {args}"),
                &format!("{small} {args}"),
                &cpu,
            );
        }
    }
    // Two Euler steps a pass (fd_two) give the one-step passes' bits: grids
    // whose extents the output tiles and axis-0 chunks do not divide, some
    // shorter than the tile's overlap (several periodic images of a cell in
    // one tile), 1 to 33 planes a block, and diagnostics every 3 steps (one
    // step alone between pairs of them).
    let diag3 = b.scratch.join("diag3.toml");
    std::fs::create_dir_all(&b.scratch)?;
    std::fs::write(&diag3, "diag_every = 3\n")?;
    {
        let o = 2;
        for grid in ["12x16x10", "33x17x29", "3x5x2", "64x40x72"] {
            let run = format!(
                "--n {grid} --steps 11 --initial gaussian --order {o} --mode blocking --ranks 1"
            );
            let Some(cpu) = cpu_reference(&b, &mut t, &run) else {
                continue;
            };
            let diag = format!("--config {}", diag3.display());
            for (label, extra) in [
                ("", ""),
                ("--gpu-chunk 1", "--gpu-chunk 1"),
                ("--gpu-chunk 5", "--gpu-chunk 5"),
                ("--gpu-chunk 33", "--gpu-chunk 33"),
                ("diagnostics every 3 steps", diag.as_str()),
            ] {
                same_hash(
                    &b,
                    &mut t,
                    &format!("two steps a pass: order {o} {grid} {label}"),
                    &format!("{run} --backend cuda --steps-per-pass 2 {extra}"),
                    &cpu,
                );
            }
        }
    }
    // Spectral: the exact integrating factor reaches the analytic solution
    // to rounding on both backends, so both errors below 1e-12 bound their
    // difference by 2e-12; a Gaussian converges as the grid is refined.
    let mut errs = Vec::new();
    for (n, init) in [(32, "sines"), (8, "gaussian"), (16, "gaussian")] {
        let mut e = [0.0; 2];
        for (i, be) in ["cpu", "cuda"].iter().enumerate() {
            let r = heat3d(&b, "spec", &words(&format!("--operator spectral --spectral-step exact --initial {init} --n {n} --steps 20 --ranks 1 --backend {be}")), 600);
            match r.result {
                Ok(r) => e[i] = r.last.max_error,
                Err(err) => {
                    t.check(&format!("spectral {init} {n} {be}"), false, &err);
                    e[i] = f64::NAN;
                }
            }
        }
        errs.push(e);
        if init == "sines" {
            t.check(
                &format!("spectral sines {n}: cuda and cpu at the analytic solution"),
                e[0] < 1e-12 && e[1] < 1e-12,
                &format!("max errors cpu {:.3e}, cuda {:.3e}", e[0], e[1]),
            );
        }
    }
    t.check(
        "spectral gaussian converges on the device",
        errs[2][1] < 0.01 * errs[1][1] && (errs[2][1] - errs[2][0]).abs() < 1e-12,
        &format!(
            "max error 8^3 {:.3e}, 16^3 {:.3e} (cpu {:.3e})",
            errs[1][1], errs[2][1], errs[2][0]
        ),
    );
    // The distributed device transform (reshapes packed on the device,
    // exchanged through the host): sines reach the analytic solution to
    // rounding on 2, 3 and 4 ranks (bricks, pencils and slabs), and a
    // Gaussian gives the host's error at the same rank count.
    for case in [
        // One rank: cuFFT's 3D plan, no reshape; the NCCL communicator is
        // made all the same.
        "--ranks 1 --gpu-exchange nccl",
        "--ranks 2",
        "--ranks 2 --gpu-exchange direct",
        "--ranks 2 --gpu-exchange staged",
        "--ranks 3",
        "--ranks 4",
        "--ranks 4 --grid 2x2x1",
        "--ranks 4 --grid 1x1x4",
    ] {
        let mut e = [f64::NAN; 3];
        for (i, (init, n, be)) in [
            ("sines", 32, "cuda"),
            ("gaussian", 16, "cuda"),
            ("gaussian", 16, "cpu"),
        ]
        .iter()
        .enumerate()
        {
            // The host's run takes the case's ranks and grid, not its
            // device exchange (an option the CPU backend refuses).
            let on_be = if *be == "cpu" {
                let w: Vec<&str> = case.split_whitespace().collect();
                let mut keep = vec![];
                let mut i = 0;
                while i < w.len() {
                    if w[i] == "--gpu-exchange" {
                        i += 2;
                    } else {
                        keep.push(w[i]);
                        i += 1;
                    }
                }
                keep.join(" ")
            } else {
                case.to_string()
            };
            let r = heat3d(&b, "spec", &words(&format!("--operator spectral --spectral-step exact --initial {init} --n {n} --steps 20 --backend {be} {on_be}")), 600);
            match r.result {
                Ok(r) => {
                    e[i] = r.last.max_error;
                    // In-process ranks reshape device to device unless
                    // told to stage; one rank does not reshape.
                    let want = if case.contains("staged") {
                        Some("DeviceStaged")
                    } else if case.contains("--ranks 1 ") {
                        None
                    } else {
                        Some("DeviceDirect")
                    };
                    let p = &r.reshape_protocols;
                    if let (true, Some(w)) = (*be == "cuda", want) {
                        if p.is_empty() || p.iter().any(|x| x != w) {
                            t.check(
                                &format!("spectral {init} {n} {be} {case}: reshapes {w}"),
                                false,
                                &format!("{p:?}"),
                            );
                        }
                    }
                }
                Err(err) => t.check(&format!("spectral {init} {n} {be} {case}"), false, &err),
            }
        }
        t.check(
            &format!("spectral on the device, {case}: sines at the analytic solution, gaussian as on the cpu"),
            e[0] < 1e-12 && (e[1] - e[2]).abs() < 1e-12,
            &format!("sines {:.3e}; gaussian cuda {:.3e}, cpu {:.3e}", e[0], e[1], e[2]),
        );
    }
    // pfc: the semi-implicit spectral step on cuFFT against the host's FFT.
    let base = "--periods 3 --points-per-period 8 --seed-radius 1 --initial seed \
                --steps 20 --diag-every 20";
    let mut pf = Vec::new();
    for (be, ranks) in [("cpu", 1), ("cuda", 1), ("cuda", 2), ("cuda", 4)] {
        let args = words(&format!("{base} --backend {be} --ranks {ranks}"));
        match pfc(&b, "pfc", &args, 600).result {
            Ok(r) => pf.push((ranks, r)),
            Err(e) => t.check(&format!("pfc {be} {ranks} rank(s)"), false, &e),
        }
    }
    let cpu = pf
        .first()
        .filter(|(_, r)| r.device == "cpu")
        .map(|(_, r)| r.clone());
    for (ranks, dev) in pf.iter().skip(1) {
        let Some(cpu) = &cpu else { break };
        let rel = |a: f64, b: f64| (a - b).abs() / b.abs();
        let ef = rel(dev.last.free_energy, cpu.last.free_energy);
        let em = rel(dev.last.mean_density, cpu.last.mean_density);
        t.check(
            &format!("pfc cuda on {ranks} rank(s) agrees with cpu"),
            ef <= PFC_TOL
                && em <= PFC_TOL
                && dev.last.step == cpu.last.step
                && dev.device.contains("CUDA device"),
            &format!(
                "step {}: free energy {:.15e} vs cpu {:.15e} (relative {ef:.2e}), \
                 mean density relative {em:.2e}, tolerance {PFC_TOL:e}; on {}",
                dev.last.step, dev.last.free_energy, cpu.last.free_energy, dev.device
            ),
        );
    }
    // MPI processes sharing the GPU: the halo and the FFT's reshapes go
    // device to device through CUDA IPC (`gpu::links`), or through the
    // host when told; either way the host's bits (FD) or its error
    // (spectral, pfc).
    if util::mpirun_available() {
        mpi_cases(&b, &mut t, cpu.as_ref());
    } else {
        println!("skipped: the MPI cases (no mpirun)");
    }
    // Bad input: each a clear error naming what was asked and what is there.
    for (name, args, want) in [
        (
            "pfc missing device",
            "--backend cuda --device 99 --periods 2 --steps 1 --ranks 1",
            &["device 99 was asked for"][..],
        ),
        (
            "pfc NCCL reshapes with two ranks on one GPU",
            "--backend cuda --periods 2 --steps 1 --ranks 2 --gpu-exchange nccl",
            &["NCCL needs one GPU per rank, but ranks 0 and 1 are on the same GPU"][..],
        ),
        (
            "pfc grid larger than the device",
            "--backend cuda --periods 256 --steps 1 --ranks 1",
            &["out of device memory", "[2048, 2048, 2048]"][..],
        ),
    ] {
        let mut c = Command::new(&b.pfc);
        c.args(words(args)).arg("-q");
        let out = run_captured(c, Duration::from_secs(300))?;
        t.check(
            &format!("bad input: {name}"),
            !out.success() && want.iter().all(|w| out.stderr.contains(w)),
            out.stderr.lines().last().unwrap_or(""),
        );
    }
    for (name, args, want) in [
        (
            "missing device",
            "--backend cuda --device 99 --n 16 --steps 1",
            "device 99 was asked for",
        ),
        (
            "grid larger than the device",
            "--backend cuda --n 2200 --steps 1",
            "out of device memory",
        ),
        (
            "two steps a pass on two ranks",
            "--backend cuda --n 16 --steps 2 --ranks 2 --mode blocking --steps-per-pass 2",
            "steps_per_pass = 2 needs one rank that is its own periodic neighbour",
        ),
        (
            "NCCL with two ranks on one GPU",
            "--backend cuda --n 16 --steps 1 --ranks 2 --gpu-exchange nccl",
            "NCCL needs one GPU per rank, but ranks 0 and 1 are on the same GPU",
        ),
        (
            "NCCL reshapes of the spectral step with two ranks on one GPU",
            "--backend cuda --n 16 --steps 1 --ranks 2 --operator spectral --gpu-exchange nccl",
            "NCCL needs one GPU per rank, but ranks 0 and 1 are on the same GPU",
        ),
        (
            "two steps a pass at order 6",
            "--backend cuda --n 16 --steps 2 --ranks 1 --order 6 --mode blocking --steps-per-pass 2",
            "order 2 (this run: 6)",
        ),
    ] {
        let mut c = Command::new(&b.heat3d);
        c.args(words(args)).arg("-q");
        let out = run_captured(c, Duration::from_secs(300))?;
        t.check(
            &format!("bad input: {name}"),
            !out.success() && out.stderr.contains(want),
            out.stderr.lines().last().unwrap_or(""),
        );
    }
    println!(
        "gpu suite: {} passed, {} failed ({:.0} s)",
        t.passed,
        t.failed.len(),
        start.elapsed().as_secs_f64()
    );
    if !t.failed.is_empty() {
        bail!("failed: {}", t.failed.join("; "));
    }
    Ok(())
}

/// The suite's cases under `mpirun` (one process per rank, all on the
/// GPU): FD orders 2, 8 and 20 give the host's hash with the direct
/// (IPC) halo, and with the staged one when asked; the spectral step on
/// 2 and 4 processes reaches the analytic solution and the host's error;
/// pfc on 2 and 4 processes agrees with `pfc_cpu`.
fn mpi_cases(b: &Bins, t: &mut Tally, pfc_cpu: Option<&PfcReport>) {
    let base = "--n 40 --steps 12 --initial gaussian --integrator euler";
    for (o, np, case, want) in [
        (2, 2, "--mode blocking", "direct"),
        (2, 2, "--mode overlap", "direct"),
        (2, 4, "--mode overlap --grid 1x2x2", "direct"),
        (8, 4, "--mode blocking", "direct"),
        (20, 2, "--mode overlap --gpu-stencil shuffle", "direct"),
        (8, 2, "--mode overlap --gpu-exchange staged", "staged"),
    ] {
        let name = format!("mpirun -np {np}: order {o} cuda {case}");
        let Some(c) = cpu_reference(
            b,
            t,
            &format!("{base} --order {o} --ranks 1 --mode blocking"),
        ) else {
            continue;
        };
        let dev = heat3d_mpi(
            b,
            "mpi",
            np,
            &words(&format!("{base} --backend cuda --order {o} {case}")),
            600,
        );
        match dev.result {
            Ok(d) => t.check(
                &name,
                d.hash_hex == c.hash_hex && d.halo == want && d.backend == "mpi",
                &format!(
                    "{} vs cpu {}, {} halo, {} communicator",
                    d.hash_hex, c.hash_hex, d.halo, d.backend
                ),
            ),
            Err(e) => t.check(&name, false, &e),
        }
    }
    // NCCL refuses two processes on one GPU; so does heat3d, on every
    // process, before NCCL is asked (and nobody hangs).
    {
        let name = "mpirun -np 2: NCCL with two processes on one GPU is refused";
        let r = heat3d_mpi(
            b,
            "mpi-nccl",
            2,
            &words(&format!(
                "{base} --backend cuda --order 2 --gpu-exchange nccl"
            )),
            300,
        );
        match r.result {
            Ok(_) => t.check(name, false, "it ran"),
            Err(e) => t.check(
                name,
                e.contains("NCCL needs one GPU per rank, but ranks 0 and 1 are on the same GPU"),
                e.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(""),
            ),
        }
    }
    for np in [2, 4] {
        let mut e = [f64::NAN; 3];
        for (i, (init, n, be)) in [
            ("sines", 32, "cuda"),
            ("gaussian", 16, "cuda"),
            ("gaussian", 16, "cpu"),
        ]
        .iter()
        .enumerate()
        {
            let args = words(&format!(
                "--operator spectral --spectral-step exact --initial {init} --n {n} \
                 --steps 20 --backend {be}"
            ));
            let r = if *be == "cpu" {
                heat3d(
                    b,
                    "spec",
                    &[args, words(&format!("--ranks {np}"))].concat(),
                    600,
                )
            } else {
                heat3d_mpi(b, "spec", np, &args, 600)
            };
            match r.result {
                Ok(r) => {
                    e[i] = r.last.max_error;
                    if *be == "cuda" && !all_direct(&r) {
                        t.check(
                            &format!(
                                "mpirun -np {np}: spectral {init} {n}: reshapes through CUDA IPC"
                            ),
                            false,
                            &format!("{:?}", r.reshape_protocols),
                        );
                    }
                }
                Err(err) => t.check(
                    &format!("mpirun -np {np}: spectral {init} {n} {be}"),
                    false,
                    &err,
                ),
            }
        }
        t.check(
            &format!("mpirun -np {np}: spectral on the device, sines at the analytic solution, gaussian as on the cpu"),
            e[0] < 1e-12 && (e[1] - e[2]).abs() < 1e-12,
            &format!("sines {:.3e}; gaussian cuda {:.3e}, cpu {:.3e}", e[0], e[1], e[2]),
        );
    }
    let base = "--periods 3 --points-per-period 8 --seed-radius 1 --initial seed \
                --steps 20 --diag-every 20 --backend cuda";
    for np in [2, 4] {
        let name = format!("mpirun -np {np}: pfc cuda agrees with cpu");
        let r = pfc_on(b, "pfc-mpi", Some(np), &words(base), 600);
        match (r.result, pfc_cpu) {
            (Ok(dev), Some(cpu)) => {
                let rel = |a: f64, b: f64| (a - b).abs() / b.abs();
                let ef = rel(dev.last.free_energy, cpu.last.free_energy);
                let em = rel(dev.last.mean_density, cpu.last.mean_density);
                t.check(
                    &name,
                    ef <= PFC_TOL && em <= PFC_TOL && dev.last.step == cpu.last.step,
                    &format!("free energy relative {ef:.2e}, mean density {em:.2e} (tolerance {PFC_TOL:e})"),
                );
            }
            (Ok(_), None) => t.check(&name, false, "no cpu reference (its run failed)"),
            (Err(e), _) => t.check(&name, false, &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::package_name;

    #[test]
    fn package_names_from_ids() {
        assert_eq!(package_name("path+file:///work/main/halo#0.1.0"), "halo");
        assert_eq!(
            package_name("path+file:///work/main/apps/x#heat3d@0.1.0"),
            "heat3d"
        );
        assert_eq!(
            package_name("dfft 0.1.0 (path+file:///work/main/dfft)"),
            "dfft"
        );
    }
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub(crate) struct Probe {
    seconds: f64,
    #[serde(default)]
    bandwidth: f64,
    device: String,
    /// The number of devices (`copy_bandwidth` only).
    #[serde(default)]
    pub(crate) devices: usize,
}

pub(crate) fn probe(bin: &Path, args: &[&str]) -> Result<Probe> {
    let mut c = Command::new(bin);
    c.args(args);
    let out = run_captured(c, Duration::from_secs(300))?;
    if !out.success() {
        bail!("{} failed: {}", bin.display(), out.stderr.trim());
    }
    let line = out.stdout.lines().last().unwrap_or("");
    serde_json::from_str(line).with_context(|| format!("cannot parse {line:?}"))
}

/// One timed configuration of the benchmark.
#[derive(Debug, Clone, serde::Serialize)]
struct Row {
    case: String,
    n: usize,
    ms: f64,
    /// Bytes moved per step over the step time, over the copy bandwidth.
    fraction: f64,
    reference: String,
    ratio: f64,
}

/// OpenPFC's figure for its Tungsten PFC model at 256^3: about 20 ms per
/// step on one MI250X GCD, the reference of the pfc row.
const OPENPFC_MS: f64 = 20.0;

/// `cargo xtask bench gpu`.
pub fn bench(a: &BenchArgs) -> Result<()> {
    let b = bins(a.bin_dir.as_deref())?;
    let out = match &a.out {
        Some(d) => d.clone(),
        None => b.scratch.clone(),
    };
    std::fs::create_dir_all(&out)?;
    let copy = probe(&b.copy, &["2048", "30"])?;
    println!(
        "device {}: copy bandwidth {:.3} TB/s (2 GiB device-to-device, read + write)",
        copy.device,
        copy.bandwidth * 1e-12
    );
    let sizes: Vec<usize> = if a.quick { vec![256] } else { vec![256, 512] };
    let steps = if a.quick { 60 } else { 200 };
    let mut rows: Vec<Row> = Vec::new();
    // heat3d's step time on in-process ranks (`np` `None`) or under
    // `mpirun -np np`.
    // heat3d's report of a timed run (the step time printed).
    let run_on = |case: &str, n: usize, extra: &str, np: Option<usize>| -> Result<Report> {
        let cfg = b.scratch.join("bench.toml");
        std::fs::write(&cfg, format!("diag_every = {steps}\nwarmup = 10\n"))?;
        let args = words(&format!(
            "--config {} --n {n} --steps {steps} --backend cuda {extra}",
            cfg.display()
        ));
        let r = match np {
            Some(np) => heat3d_mpi(&b, "bench", np, &args, 600),
            None => heat3d(&b, "bench", &args, 600),
        };
        let r = r
            .result
            .map_err(|e| anyhow::anyhow!("{case} at {n}^3: {e}"))?;
        let ms = r.timings.step * 1e3;
        println!("  {case:<44} {n:>4}^3  {ms:>9.4} ms/step");
        Ok(r)
    };
    let time_on = |case: &str, n: usize, extra: &str, np: Option<usize>| -> Result<f64> {
        Ok(run_on(case, n, extra, np)?.timings.step * 1e3)
    };
    let time = |case: &str, n: usize, extra: &str| time_on(case, n, extra, None);
    let part = |name: &str| a.sections.is_empty() || a.sections.iter().any(|s| s == name);
    // The MPI rows only where mpirun is.
    let mpi = util::mpirun_available();
    let orders: Vec<usize> = if a.orders.is_empty() {
        (1..=10).map(|r| 2 * r).collect()
    } else {
        a.orders.clone()
    };
    let bw = copy.bandwidth;
    // Bytes a stencil step must move: read u once, write the result once.
    let fd_fraction = |n: usize, ms: f64| 16.0 * (n as f64).powi(3) / (ms * 1e-3) / bw;
    // A stencil row: its time against the copy of the bytes it must move.
    let fd_row = |case: String, n: usize, ms: f64| Row {
        case,
        n,
        ms,
        fraction: fd_fraction(n, ms),
        reference: "copy".into(),
        ratio: 1.0 / fd_fraction(n, ms),
    };
    // An FD case against another of the same run (`name`, `reference` ms).
    let fd_vs = |case: String, n: usize, ms: f64, name: &str, reference: f64| Row {
        case,
        n,
        ms,
        fraction: fd_fraction(n, ms),
        reference: format!("{name} {reference:.4} ms"),
        ratio: ms / reference,
    };
    if part("shapes") {
        println!("FD-2, Euler, 1 rank, blocking: cells per thread along axis 0 (0 = the default) x block width");
        for &n in &sizes {
            for chunk in [0, 1, 8, 32] {
                for block in [32, 128] {
                    let case = format!("fd2 chunk {chunk} block {block}");
                    let ms = time(&case, n, &format!("--ranks 1 --order 2 --mode blocking --steps-per-pass 1 --gpu-chunk {chunk} --gpu-block {block}"))?;
                    rows.push(fd_row(case, n, ms));
                }
            }
        }
    }
    if part("orders") {
        // A copy of the bytes one step moves (n^3 doubles, read + write):
        // below 2 GiB the copy itself reaches less than the 2 GiB rate.
        for &n in &sizes {
            let mib = (n * n * n * 8).div_ceil(1 << 20);
            let c = probe(&b.copy, &[&mib.to_string(), "30"])?;
            let ms = 2.0 * (n * n * n * 8) as f64 / c.bandwidth * 1e3;
            println!(
                "  copy of one field ({mib} MiB)                      {n:>4}^3  {ms:>9.4} ms ({:.1} % of the 2 GiB rate)",
                100.0 * c.bandwidth / bw
            );
            rows.push(Row {
                case: format!("copy {mib} MiB"),
                n,
                ms,
                fraction: c.bandwidth / bw,
                reference: "copy".into(),
                ratio: bw / c.bandwidth,
            });
        }
        println!("stencil orders, Euler, 1 rank, blocking, default launch shapes, each stencil");
        for &n in &sizes {
            for &o in &orders {
                for stencil in ["cached", "pairs", "shuffle", "shared"] {
                    let case = format!("fd{o} {stencil}");
                    let ms = time(
                        &case,
                        n,
                        &format!("--ranks 1 --order {o} --mode blocking --steps-per-pass 1 --gpu-stencil {stencil}"),
                    )?;
                    rows.push(fd_row(case, n, ms));
                }
            }
        }
    }
    if part("periodic") {
        println!(
            "one self-periodic rank, Euler, blocking, the default stencil: reading across the \
             faces at the periodic images against ghosts filled by self-copies"
        );
        for &n in &sizes {
            for &o in &orders {
                let run = |how: &str| {
                    time(
                        &format!("fd{o} periodic {how}"),
                        n,
                        &format!("--ranks 1 --order {o} --mode blocking --steps-per-pass 1 --gpu-periodic {how}"),
                    )
                };
                let (read, copy) = (run("read")?, run("copy")?);
                rows.push(fd_vs(format!("fd{o} periodic read"), n, read, "copy", copy));
            }
        }
    }
    if part("passes") {
        println!(
            "one self-periodic rank, Euler, blocking: two steps a pass (fd_two, the intermediate \
             field kept on the chip) against one (the default stencil reading across the faces); \
             ms a step, and the copy of one step's bytes"
        );
        for &n in &sizes {
            for &o in orders.iter().filter(|&&o| o == 2) {
                let run = |k: usize| {
                    run_on(
                        &format!("fd{o} {k} step(s) a pass"),
                        n,
                        &format!("--ranks 1 --order {o} --mode blocking --steps-per-pass {k}"),
                        None,
                    )
                };
                let (one, two) = (run(1)?, run(2)?);
                // Both give the same field.
                if one.hash_hex != two.hash_hex {
                    bail!(
                        "fd{o} at {n}^3: two steps a pass give field hash {}, one step a pass {}",
                        two.hash_hex,
                        one.hash_hex
                    );
                }
                let (one, two) = (one.timings.step * 1e3, two.timings.step * 1e3);
                rows.push(fd_row(format!("fd{o} one step a pass"), n, one));
                rows.push(fd_vs(
                    format!("fd{o} two steps a pass"),
                    n,
                    two,
                    "one step a pass",
                    one,
                ));
            }
        }
    }
    if part("ranks") {
        println!(
            "blocking against overlapped, ranks sharing the GPU, FD-2 and FD-8; \
             the halo direct on the device, and staged through the host"
        );
        for ranks in [1, 2, 4] {
            for o in [2, 8] {
                let n = 256;
                let bl = time(
                    &format!("fd{o} {ranks} rank(s) blocking"),
                    n,
                    &format!("--order {o} --ranks {ranks} --mode blocking --steps-per-pass 1"),
                )?;
                let ov = time(
                    &format!("fd{o} {ranks} rank(s) overlap"),
                    n,
                    &format!("--order {o} --ranks {ranks} --mode overlap"),
                )?;
                rows.push(Row {
                    case: format!("fd{o} {ranks} rank(s) overlap"),
                    n,
                    ms: ov,
                    fraction: fd_fraction(n, ov),
                    reference: "blocking".into(),
                    ratio: ov / bl,
                });
                if ranks > 1 {
                    let st = time(
                        &format!("fd{o} {ranks} rank(s) overlap, staged"),
                        n,
                        &format!(
                            "--order {o} --ranks {ranks} --mode overlap --gpu-exchange staged"
                        ),
                    )?;
                    rows.push(fd_vs(
                        format!("fd{o} {ranks} rank(s) overlap, direct"),
                        n,
                        ov,
                        "staged",
                        st,
                    ));
                }
            }
        }
    }
    if part("mpi") && mpi {
        println!(
            "MPI processes sharing the GPU (mpirun): the halo and the reshapes direct on the \
             device through CUDA IPC, against staged through the host"
        );
        let n = 256;
        for np in [2, 4] {
            for o in [2, 8] {
                let bl = time_on(
                    &format!("fd{o} mpirun -np {np} blocking"),
                    n,
                    &format!("--order {o} --mode blocking"),
                    Some(np),
                )?;
                let ov = time_on(
                    &format!("fd{o} mpirun -np {np} overlap"),
                    n,
                    &format!("--order {o} --mode overlap"),
                    Some(np),
                )?;
                let st = time_on(
                    &format!("fd{o} mpirun -np {np} blocking, staged"),
                    n,
                    &format!("--order {o} --mode blocking --gpu-exchange staged"),
                    Some(np),
                )?;
                rows.push(fd_vs(
                    format!("fd{o} mpirun -np {np} blocking, direct"),
                    n,
                    bl,
                    "staged",
                    st,
                ));
                rows.push(Row {
                    case: format!("fd{o} mpirun -np {np} overlap, direct"),
                    n,
                    ms: ov,
                    fraction: fd_fraction(n, ov),
                    reference: "blocking".into(),
                    ratio: ov / bl,
                });
            }
            let pair = probe(&b.cufft, &[&n.to_string(), "20"])?;
            let case = format!("spectral mpirun -np {np}");
            let ms = time_on(&case, n, "--operator spectral --initial sines", Some(np))?;
            rows.push(Row {
                case,
                n,
                ms,
                fraction: 0.0,
                reference: format!("cufft {:.4} ms", pair.seconds * 1e3),
                ratio: ms * 1e-3 / pair.seconds,
            });
        }
    } else if part("mpi") {
        println!("skipped: the mpi section (no mpirun)");
    }
    if part("spectral") {
        println!("spectral step (exact factor, 1 rank) against a bare cuFFT D2Z + Z2D");
        for &n in &sizes {
            let pair = probe(&b.cufft, &[&n.to_string(), "20"])?;
            let ms = time(
                "spectral",
                n,
                "--operator spectral --initial sines --ranks 1",
            )?;
            println!(
                "  bare cuFFT D2Z + Z2D                         {n:>4}^3  {:>9.4} ms",
                pair.seconds * 1e3
            );
            rows.push(Row {
                case: "spectral".into(),
                n,
                ms,
                fraction: 0.0,
                reference: format!("cufft {:.4} ms", pair.seconds * 1e3),
                ratio: ms * 1e-3 / pair.seconds,
            });
            // Split over in-process ranks sharing the GPU: the reshapes go
            // device to device (`gpu::links`).
            for ranks in [2, 4] {
                let case = format!("spectral {ranks} ranks");
                let ms = time(
                    &case,
                    n,
                    &format!("--operator spectral --initial sines --ranks {ranks}"),
                )?;
                rows.push(Row {
                    case,
                    n,
                    ms,
                    fraction: 0.0,
                    reference: format!("cufft {:.4} ms", pair.seconds * 1e3),
                    ratio: ms * 1e-3 / pair.seconds,
                });
            }
        }
        // OpenPFC reports about 20 ms per step for its Tungsten PFC model at
        // 256^3 on one MI250X GCD; pfc's model is the one-field form of it.
    }
    if part("pfc") {
        println!("pfc, one rank, semi-implicit step (three cuFFT transforms and two kernels)");
        let n = 256;
        let args = words(&format!(
            "--periods 32 --points-per-period 8 --steps {steps} --diag-every {steps} --backend cuda --ranks 1"
        ));
        let r = pfc(&b, "bench-pfc", &args, 600)
            .result
            .map_err(|e| anyhow::anyhow!("pfc at {n}^3: {e}"))?;
        let ms = r.median_step * 1e3;
        println!("  {:<44} {n:>4}^3  {ms:>9.4} ms/step", "pfc");
        println!(
            "  OpenPFC Tungsten, one MI250X GCD (reference) {n:>4}^3  {:>9.4} ms/step",
            OPENPFC_MS
        );
        rows.push(Row {
            case: "pfc".into(),
            n,
            ms,
            fraction: 0.0,
            reference: format!("OpenPFC Tungsten {OPENPFC_MS} ms (MI250X GCD)"),
            ratio: ms / OPENPFC_MS,
        });
    }
    let mut md = format!(
        "Device: {}; copy bandwidth {:.3} TB/s (read + write).\n\n| case | n | ms/step | of copy bandwidth | reference | ratio |\n|---|---|---|---|---|---|\n",
        copy.device,
        bw * 1e-12
    );
    for r in &rows {
        md.push_str(&format!(
            "| {} | {}^3 | {:.4} | {} | {} | {:.3} |\n",
            r.case,
            r.n,
            r.ms,
            if r.fraction > 0.0 {
                format!("{:.1} %", 100.0 * r.fraction)
            } else {
                "-".into()
            },
            r.reference,
            r.ratio
        ));
    }
    println!("\n{md}");
    std::fs::write(out.join("gpu.md"), &md)?;
    std::fs::write(
        out.join("gpu.json"),
        serde_json::to_string_pretty(&serde_json::json!({ "copy": copy, "rows": rows }))?,
    )?;
    println!("wrote {}", out.join("gpu.md").display());
    Ok(())
}
