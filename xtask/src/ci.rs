//! `cargo xtask ci`: what CI runs once the system packages are installed
//! (see `.ci/run`), in this order, streaming every command's output and
//! stopping at the first failure:
//!
//! 1. `cargo fmt --all -- --check`, then `cargo xtask msrv` (every crate's
//!    declared `rust-version` against its dependencies'), then `cargo
//!    package --no-verify` of every library crate (published as
//!    `parnum-NAME`)
//! 2. `cargo clippy --workspace --all-targets -- -D warnings`, then the
//!    same with the `mpi` features of every crate that has one
//! 3. `cargo doc --workspace --no-deps` with warnings as errors
//! 4. `cargo test --workspace`, then `imex` with its system LAPACK
//!    backend (`--features lapack`: clippy and tests), then the CUDA
//!    backend of `gpu`, `halo`, `dfft`, `stencil`, `multigrid`, `heat3d`, `pfc`, `poisson` and `flow` (`--features cuda`,
//!    which builds without a CUDA toolkit: clippy, rustdoc and the tests,
//!    whose device cases skip themselves without a GPU, flow's compiled by
//!    clippy only; `cargo xtask gpu` runs them where one is), then the HIP backend (`HIP_PATH=/usr`,
//!    `--features hip`): clippy of `gpu`, `halo`, `dfft`, `stencil`, `heat3d` and
//!    `pfc`, the tests of `gpu` (no AMD GPU needed, the device tests skip
//!    themselves) and the `hip_kernels` tests of the other five (hiprtc
//!    builds every kernel source of the CUDA path for AMD GPUs)
//! 5. the tests of `comm` and `halo` (the in-process backend, scopes,
//!    exchangers) under AddressSanitizer with the nightly toolchain, when
//!    one is installed (`rustup run nightly`); skipped with a message
//!    otherwise
//! 6. `cargo build -p parnum-comm --features mpi --example mpi_selftest`, then the
//!    self-test under `mpirun -np 1`, `2` and `4` (skipped when
//!    `comm/examples/mpi_selftest.rs` does not exist)
//! 7. `cargo xtask bitexact` (in-process suite)
//! 8. `cargo xtask bitexact --mpi` (MPI suite)
//!
//! The two bitexact suites run inside this process (the same code as the
//! `bitexact` task). At the end it prints the elapsed time of every stage.

use crate::bitexact;
use crate::util::{self, MPIRUN_FLAGS};
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Short names of the stages, for `--skip`.
pub const STAGES: [&str; 14] = [
    "fmt",
    "msrv",
    "package",
    "clippy",
    "clippy-mpi",
    "doc",
    "test",
    "asan",
    "lapack",
    "cuda",
    "hip",
    "selftest",
    "bitexact",
    "bitexact-mpi",
];

/// Options of `cargo xtask ci`. CI runs it without any.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Stages to leave out, for local use (comma-separated: fmt, msrv, package, clippy,
    /// clippy-mpi, doc, test, asan, lapack, cuda, hip, selftest, bitexact,
    /// bitexact-mpi).
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(STAGES))]
    pub skip: Vec<String>,
}

/// The library crates, each published on its own (`cargo package`
/// checks their manifests, that every dependency resolves with the
/// workspace's siblings packaged beside it, and their file lists; the
/// build of the same sources is the rest of CI, so `--no-verify` skips
/// building them a second time; `--allow-dirty` because what is checked
/// does not depend on whether a local run has uncommitted edits).
const LIBRARIES: [&str; 12] = [
    "parnum-simd",
    "parnum-comm",
    "parnum-halo",
    "parnum-dfft",
    "parnum-stencil",
    "parnum-sht",
    "parnum-chebyshev",
    "parnum-imex",
    "parnum-multigrid",
    "parnum-ibm",
    "parnum-gpu",
    "parnum-appkit",
];

/// The CUDA features of the crates that have device code.
const CUDA_FEATURES: &str =
    "parnum-gpu/cuda,parnum-halo/cuda,parnum-dfft/cuda,parnum-stencil/cuda,\
     parnum-multigrid/cuda,heat3d/cuda,pfc/cuda,poisson/cuda,flow/cuda";

/// Longest the MPI self-test may run at one process count (it hangs rather
/// than fails on a deadlock).
const SELFTEST_LIMIT: Duration = Duration::from_secs(300);

/// One stage's outcome, for the summary.
#[derive(Debug)]
struct Stage {
    name: String,
    seconds: f64,
    ok: bool,
}

/// Runs the stages in order and keeps the timings.
#[derive(Debug, Default)]
struct Pipeline {
    stages: Vec<Stage>,
    skipped: Vec<String>,
}

impl Pipeline {
    /// Runs one stage; returns its error, if any, after recording it.
    /// Stages whose short name `key` is in `skip` are only reported.
    fn stage(
        &mut self,
        skip: &[String],
        key: &str,
        name: &str,
        f: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        if skip.iter().any(|s| s == key) {
            println!("\n==> ci: {name}: skipped (--skip {key})");
            self.skipped.push(name.to_string());
            return Ok(());
        }
        println!("\n==> ci: {name}");
        let t = Instant::now();
        let r = f();
        let seconds = t.elapsed().as_secs_f64();
        self.stages.push(Stage {
            name: name.to_string(),
            seconds,
            ok: r.is_ok(),
        });
        match &r {
            Ok(()) => println!("==> ci: {name}: ok ({seconds:.1} s)"),
            Err(e) => println!("==> ci: {name}: FAILED ({seconds:.1} s): {e:#}"),
        }
        r.with_context(|| format!("ci stage `{name}` failed"))
    }

    fn summary(&self, total: f64) {
        println!("\nci stages:");
        for s in &self.stages {
            println!(
                "  {:<62} {:>8.1} s  {}",
                s.name,
                s.seconds,
                if s.ok { "ok" } else { "FAILED" }
            );
        }
        for s in &self.skipped {
            println!("  {s:<62} {:>10}  skipped", "-");
        }
        println!("  {:<62} {:>8.1} s", "total", total);
    }
}

/// The `mpi` feature of every crate that has one.
const MPI_FEATURES: &str =
    "parnum-comm/mpi,parnum-sht/mpi,heat3d/mpi,pfc/mpi,poisson/mpi,dynamo/mpi,flow/mpi";

/// Runs a prepared command with the output streamed.
fn run_cmd(cmd: &mut Command, what: &str) -> Result<()> {
    let status = cmd.status().with_context(|| format!("cannot run {what}"))?;
    if !status.success() {
        bail!("`{what}` failed with {status}");
    }
    Ok(())
}

/// True when rustup has a nightly toolchain (needed for `-Zsanitizer`).
fn has_nightly() -> bool {
    Command::new("rustup")
        .args(["run", "nightly", "rustc", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The in-process backend's tests (comm: messages, scopes, collectives;
/// halo: exchangers, leaked and dropped exchanges) under AddressSanitizer,
/// in a target folder of their own. Doc tests are left out: rustdoc does
/// not take the sanitizer's target flags.
fn asan() -> Result<()> {
    let target_dir = util::workspace_root().join("target/asan");
    run_cmd(
        Command::new("rustup")
            .args([
                "run",
                "nightly",
                "cargo",
                "test",
                "-p",
                "parnum-comm",
                "-p",
                "parnum-halo",
            ])
            .args(["--lib", "--tests", "--target", "x86_64-unknown-linux-gnu"])
            .current_dir(util::workspace_root())
            .env("RUSTFLAGS", "-Zsanitizer=address")
            .env("CARGO_TARGET_DIR", target_dir)
            .env_remove("RUSTC")
            .env_remove("RUSTDOC")
            .env_remove("CARGO"),
        "cargo +nightly test (AddressSanitizer)",
    )
}

/// Runs `cargo ARGS` with the output streamed.
fn cargo(args: &[&str]) -> Result<()> {
    println!("$ cargo {}", args.join(" "));
    let status = util::cargo()
        .args(args)
        .status()
        .with_context(|| format!("cannot run cargo {}", args.join(" ")))?;
    if !status.success() {
        bail!("`cargo {}` failed with {status}", args.join(" "));
    }
    Ok(())
}

/// Builds the MPI self-test (output streamed) and returns its executable.
fn build_selftest() -> Result<PathBuf> {
    let args = [
        "build",
        "-p",
        "parnum-comm",
        "--features",
        "mpi",
        "--example",
        "mpi_selftest",
    ];
    println!("$ cargo {}", args.join(" "));
    let mut child = util::cargo()
        .args(args)
        .arg("--message-format=json-render-diagnostics")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot run cargo build")?;
    let mut exe = None;
    let stdout = child.stdout.take().context("no stdout from cargo")?;
    for line in BufReader::new(stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line?) else {
            continue;
        };
        if v["reason"] == "compiler-artifact" && v["target"]["name"] == "mpi_selftest" {
            if let Some(e) = v["executable"].as_str() {
                exe = Some(PathBuf::from(e));
            }
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("`cargo {}` failed with {status}", args.join(" "));
    }
    exe.context("cargo reported no mpi_selftest executable")
}

/// Runs the self-test under `mpirun -np np`, output streamed.
fn selftest(exe: &PathBuf, np: usize) -> Result<()> {
    let mut cmd = Command::new("mpirun");
    cmd.args(MPIRUN_FLAGS)
        .args(["-np", &np.to_string()])
        .arg(exe);
    println!(
        "$ mpirun {} -np {np} {}",
        MPIRUN_FLAGS.join(" "),
        exe.display()
    );
    match util::run_streamed(cmd, SELFTEST_LIMIT)? {
        Some(s) if s.success() => Ok(()),
        Some(s) => bail!("mpi_selftest with {np} process(es) failed with {s}"),
        None => bail!(
            "mpi_selftest with {np} process(es) ran past {} s and was killed",
            SELFTEST_LIMIT.as_secs()
        ),
    }
}

/// Failure modes of the self-test: a rank that returns an error, one that
/// panics, one that panics inside a scope with a receive in flight. Each
/// must end the whole job (no hang) with a message naming the cause.
const ABORT_MODES: [(&str, &str); 3] = [
    ("abort", "deliberate failure on rank 1"),
    ("panic", "deliberate panic on rank 1"),
    ("scope-panic", "MPI transfer in flight"),
];

/// Longest an aborting self-test may take before it counts as a hang.
const ABORT_LIMIT_SECS: &str = "120";

/// Runs `mpi_selftest MODE` on 2 processes and checks that the job ends
/// unsuccessfully, in bounded time, with `says` in its output.
fn selftest_aborts(exe: &PathBuf, mode: &str, says: &str) -> Result<()> {
    println!(
        "$ timeout {ABORT_LIMIT_SECS} mpirun {} -np 2 {} {mode}",
        MPIRUN_FLAGS.join(" "),
        exe.display()
    );
    let out = Command::new("timeout")
        .arg(ABORT_LIMIT_SECS)
        .arg("mpirun")
        .args(MPIRUN_FLAGS)
        .args(["-np", "2"])
        .arg(exe)
        .arg(mode)
        .output()
        .context("cannot run mpirun")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    print!("{text}");
    if out.status.code() == Some(124) {
        bail!("mpi_selftest {mode} hung: killed after {ABORT_LIMIT_SECS} s");
    }
    if out.status.success() {
        bail!("mpi_selftest {mode} exited successfully: the job was not aborted");
    }
    if !text.contains(says) {
        bail!("mpi_selftest {mode} aborted without saying {says:?}");
    }
    Ok(())
}

/// Runs the CI pipeline.
pub fn run(args: &Args) -> Result<()> {
    let skip = args.skip.as_slice();
    let start = Instant::now();
    let mut p = Pipeline::default();
    let result = (|| -> Result<()> {
        p.stage(skip, "fmt", "cargo fmt --all -- --check", || {
            cargo(&["fmt", "--all", "--", "--check"])
        })?;
        p.stage(skip, "msrv", "cargo xtask msrv", crate::msrv::run)?;
        let mut package = vec!["package", "--no-verify", "--locked", "--allow-dirty"];
        for l in LIBRARIES {
            package.extend(["-p", l]);
        }
        p.stage(
            skip,
            "package",
            &format!("cargo {}", package.join(" ")),
            || cargo(&package),
        )?;
        for (stage, features) in [("clippy", None), ("clippy-mpi", Some(MPI_FEATURES))] {
            let mut args = vec!["clippy", "--workspace", "--all-targets"];
            args.extend(features.iter().flat_map(|f| ["--features", f]));
            args.extend(["--", "-D", "warnings"]);
            p.stage(skip, stage, &format!("cargo {}", args.join(" ")), || {
                cargo(&args)
            })?;
        }
        p.stage(
            skip,
            "doc",
            "RUSTDOCFLAGS=\"-D warnings\" cargo doc --workspace --no-deps",
            || {
                run_cmd(
                    util::cargo().env("RUSTDOCFLAGS", "-D warnings").args([
                        "doc",
                        "--workspace",
                        "--no-deps",
                    ]),
                    "cargo doc",
                )
            },
        )?;
        p.stage(skip, "test", "cargo test --workspace", || {
            cargo(&["test", "--workspace"])
        })?;
        // `simd`'s optional serde and clap names (no crate of the
        // workspace enables them).
        p.stage(
            skip,
            "test",
            "cargo clippy/test -p parnum-simd --all-features",
            || {
                cargo(&[
                    "clippy",
                    "-p",
                    "parnum-simd",
                    "--all-targets",
                    "--all-features",
                    "--",
                    "-D",
                    "warnings",
                ])?;
                cargo(&["test", "-p", "parnum-simd", "--all-features"])
            },
        )?;
        if has_nightly() {
            p.stage(
                skip,
                "asan",
                "cargo +nightly test -p parnum-comm -p parnum-halo --lib --tests (AddressSanitizer)",
                asan,
            )?;
        } else {
            println!("\n==> ci: no nightly toolchain (`rustup run nightly rustc`): AddressSanitizer stage skipped");
        }
        // The system LAPACK backend of `imex` (OpenBLAS), against faer.
        p.stage(
            skip,
            "lapack",
            "cargo clippy -p parnum-imex --all-targets --features lapack -- -D warnings",
            || {
                cargo(&[
                    "clippy",
                    "-p",
                    "parnum-imex",
                    "--all-targets",
                    "--features",
                    "lapack",
                    "--",
                    "-D",
                    "warnings",
                ])
            },
        )?;
        p.stage(
            skip,
            "lapack",
            "cargo test -p parnum-imex --features lapack",
            || cargo(&["test", "-p", "parnum-imex", "--features", "lapack"]),
        )?;
        // The CUDA backend (cudarc opens the libraries at run time, so it
        // builds here; the device tests skip themselves without a GPU).
        let cuda_pkgs = [
            "-p",
            "parnum-gpu",
            "-p",
            "parnum-halo",
            "-p",
            "parnum-dfft",
            "-p",
            "parnum-stencil",
            "-p",
            "parnum-multigrid",
            "-p",
            "heat3d",
            "-p",
            "pfc",
            "-p",
            "poisson",
            "-p",
            "flow",
        ];
        let cuda_features = ["--features", CUDA_FEATURES];
        let clippy: Vec<&str> = ["clippy"]
            .into_iter()
            .chain(cuda_pkgs)
            .chain(["--all-targets"])
            .chain(cuda_features)
            .chain(["--", "-D", "warnings"])
            .collect();
        p.stage(skip, "cuda", &format!("cargo {}", clippy.join(" ")), || {
            cargo(&clippy)
        })?;
        let doc: Vec<&str> = ["doc", "--no-deps"]
            .into_iter()
            .chain(cuda_pkgs)
            .chain(cuda_features)
            .collect();
        p.stage(
            skip,
            "cuda",
            &format!("RUSTDOCFLAGS=\"-D warnings\" cargo {}", doc.join(" ")),
            || {
                run_cmd(
                    util::cargo().env("RUSTDOCFLAGS", "-D warnings").args(&doc),
                    "cargo doc --features cuda",
                )
            },
        )?;
        // flow's host tests are the default build's; its `cuda` feature
        // adds the device step and `tests/device.rs`, which the clippy
        // above compiles (`--all-targets`) and which would only skip here
        // without a GPU (`cargo xtask gpu` runs it on one).
        let mut test: Vec<&str> = vec!["test"];
        for pair in cuda_pkgs.chunks(2) {
            if pair[1] != "flow" {
                test.extend(pair);
            }
        }
        let host_features = CUDA_FEATURES.replace(",flow/cuda", "");
        test.extend(["--features", &host_features]);
        p.stage(skip, "cuda", &format!("cargo {}", test.join(" ")), || {
            cargo(&test)
        })?;
        // The HIP backend of `gpu` (ROCm's libamdhip64, which hip-sys's
        // build script finds through HIP_PATH), and the kernel sources of
        // halo, dfft, stencil, heat3d and pfc built for AMD GPUs by hiprtc (their
        // `hip_kernels` tests); no AMD GPU needed.
        let kernel_pkgs = [
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
        ];
        let hip_clippy: Vec<&str> = ["clippy", "-p", "parnum-gpu"]
            .into_iter()
            .chain(kernel_pkgs)
            .chain(["--all-targets", "--features", "hip", "--", "-D", "warnings"])
            .collect();
        p.stage(
            skip,
            "hip",
            &format!("HIP_PATH=/usr cargo {}", hip_clippy.join(" ")),
            || {
                run_cmd(
                    util::cargo().env("HIP_PATH", "/usr").args(&hip_clippy),
                    "cargo clippy --features hip",
                )
            },
        )?;
        p.stage(
            skip,
            "hip",
            "HIP_PATH=/usr cargo test -p parnum-gpu --features hip",
            || {
                run_cmd(
                    util::cargo().env("HIP_PATH", "/usr").args([
                        "test",
                        "-p",
                        "parnum-gpu",
                        "--features",
                        "hip",
                    ]),
                    "cargo test -p parnum-gpu --features hip",
                )
            },
        )?;
        // Only the kernel tests: the rest of these crates' tests run in the
        // test stage and do not change with the feature.
        let hip_kernels: Vec<&str> = ["test"]
            .into_iter()
            .chain(kernel_pkgs)
            .chain(["--features", "hip", "--test", "hip_kernels"])
            .collect();
        p.stage(
            skip,
            "hip",
            &format!("HIP_PATH=/usr cargo {}", hip_kernels.join(" ")),
            || {
                run_cmd(
                    util::cargo().env("HIP_PATH", "/usr").args(&hip_kernels),
                    "cargo test --features hip --test hip_kernels",
                )
            },
        )?;
        if util::workspace_root()
            .join("comm/examples/mpi_selftest.rs")
            .exists()
        {
            let mut exe = PathBuf::new();
            p.stage(
                skip,
                "selftest",
                "cargo build -p parnum-comm --features mpi --example mpi_selftest",
                || {
                    exe = build_selftest()?;
                    Ok(())
                },
            )?;
            for np in [1, 2, 4] {
                p.stage(
                    skip,
                    "selftest",
                    &format!("mpirun -np {np} mpi_selftest"),
                    || selftest(&exe, np),
                )?;
            }
            for (mode, says) in ABORT_MODES {
                p.stage(
                    skip,
                    "selftest",
                    &format!("mpirun -np 2 mpi_selftest {mode} (must abort)"),
                    || selftest_aborts(&exe, mode, says),
                )?;
            }
        } else {
            println!(
                "\n==> ci: comm/examples/mpi_selftest.rs does not exist: MPI self-test skipped"
            );
        }
        p.stage(skip, "bitexact", "cargo xtask bitexact", || {
            bitexact::run(&bitexact::Args {
                mpi: false,
                orders: bitexact::ORDERS.to_vec(),
                jobs: 2,
                suite: bitexact::Suite::All,
            })
        })?;
        p.stage(skip, "bitexact-mpi", "cargo xtask bitexact --mpi", || {
            bitexact::run(&bitexact::Args {
                mpi: true,
                orders: bitexact::ORDERS.to_vec(),
                jobs: 2,
                suite: bitexact::Suite::All,
            })
        })?;
        Ok(())
    })();
    p.summary(start.elapsed().as_secs_f64());
    match &result {
        Ok(()) => println!(
            "ci: all {} stages passed in {:.1} s{}",
            p.stages.len(),
            start.elapsed().as_secs_f64(),
            if p.skipped.is_empty() {
                String::new()
            } else {
                format!(" ({} skipped)", p.skipped.len())
            }
        ),
        Err(_) => println!("ci: FAILED"),
    }
    result
}
