//! `cargo xtask bench fft-dist [--n 256] [--ranks 2] [--reps 5]
//! [--heffte DIR] [--out DIR] [--no-mpi4py]`: `dfft`'s distributed 3D FFT
//! against HeFFTe (FFTW backend) and mpi4py-fft on the same ranks in the
//! same run, printed as a table and written to `DIR/fft_dist.json` and
//! `DIR/fft_dist.png` (`DIR` defaults to `target/bench/fft-dist`).
//!
//! Every figure is the time of one run, (forward + backward) / 2 of the
//! slowest rank, as HeFFTe's `speed3d` reports it:
//! - ours: `dfft`'s `dist_bench` example on in-process ranks, bricks, with
//!   the spectrum in the input layout (as `speed3d` leaves it) and, for
//!   mpi4py-fft, in the layout of the last transform (as mpi4py-fft leaves
//!   it: one reshape a direction fewer); against HeFFTe the mean of the
//!   repeats (HeFFTe reports the mean of its 5 runs; ours has a barrier
//!   around every repeat, which it has not), against mpi4py-fft the best;
//! - HeFFTe 2.4.1: `speed3d_c2c` / `speed3d_r2c fftw double N N N` under
//!   `mpirun -np RANKS`, its default bricks in and out; its "Time per run"
//!   (the mean over its runs). Built by `dfft/bench/build_heffte.sh` into
//!   `target/heffte` (or `--heffte DIR` with the two binaries); skipped with
//!   a message when absent;
//! - mpi4py-fft: `dfft/bench/mpi4py_fft_bench.py` under `mpirun`, its
//!   default decomposition and FFTW backend; best repeat. Installed with pip
//!   when missing, skipped with a message when that fails.
//!
//! Goals: ours at most [`GOAL_HEFFTE`] times HeFFTe's and [`GOAL_MPI4PY`]
//! times mpi4py-fft's.

use crate::util::{self, MPIRUN_FLAGS};
use anyhow::{bail, Context, Result};
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Options of `cargo xtask bench fft-dist`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Grid size N (N^3 points).
    #[arg(long, default_value_t = 256)]
    pub n: usize,
    /// Ranks (in-process for ours, MPI processes for the references).
    #[arg(long, default_value_t = 2)]
    pub ranks: usize,
    /// Timed repeats of ours and of mpi4py-fft.
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Folder with HeFFTe's speed3d_c2c and speed3d_r2c (default
    /// target/heffte/build/benchmarks, where dfft/bench/build_heffte.sh
    /// puts them).
    #[arg(long)]
    pub heffte: Option<PathBuf>,
    /// Output directory (default target/bench/fft-dist).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip mpi4py-fft.
    #[arg(long)]
    pub no_mpi4py: bool,
}

/// The goal against HeFFTe: our time at most this factor of its time.
pub const GOAL_HEFFTE: f64 = 0.6;
/// The goal against mpi4py-fft.
pub const GOAL_MPI4PY: f64 = 0.9;

const KINDS: [&str; 2] = ["c2c", "r2c"];

/// Ours, through the `dist_bench` example: per kind, the statistic `stat`
/// (`best_s` or `mean_s`) of the repeats.
fn ours(a: &Args, output: &str, stat: &str, json_path: &Path) -> Result<Vec<(String, f64)>> {
    let mut cmd = util::cargo();
    cmd.args([
        "run",
        "--release",
        "-p",
        "parnum-dfft",
        "--example",
        "dist_bench",
        "--",
    ])
    .args(["--n", &a.n.to_string(), "--ranks", &a.ranks.to_string()])
    .args(["--reps", &a.reps.to_string(), "--output", output])
    .arg("--json")
    .arg(json_path);
    println!("$ {cmd:?}");
    let st = util::run_streamed(cmd, Duration::from_secs(3600))?;
    if !st.is_some_and(|s| s.success()) {
        bail!("dist_bench failed ({st:?})");
    }
    let rows: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(json_path)
            .with_context(|| format!("cannot read {}", json_path.display()))?,
    )
    .context("bad JSON from dist_bench")?;
    Ok(rows
        .iter()
        .filter_map(|r| Some((r["kind"].as_str()?.to_string(), r[stat].as_f64()?)))
        .collect())
}

fn mpirun(ranks: usize) -> Command {
    let mut c = Command::new("mpirun");
    c.args(MPIRUN_FLAGS).args(["-np", &ranks.to_string()]);
    c
}

/// HeFFTe's "Time per run" for `kind`.
fn heffte(a: &Args, dir: &Path, kind: &str) -> std::result::Result<f64, String> {
    let bin = dir.join(format!("speed3d_{kind}"));
    if !bin.is_file() {
        return Err(format!(
            "{} is missing (build it with dfft/bench/build_heffte.sh HEFFTE_SRC)",
            bin.display()
        ));
    }
    let n = a.n.to_string();
    let mut cmd = mpirun(a.ranks);
    cmd.arg(&bin).args(["fftw", "double", &n, &n, &n]);
    let out = util::run_captured(cmd, Duration::from_secs(3600)).map_err(|e| e.to_string())?;
    if !out.success() {
        return Err(format!(
            "speed3d_{kind} {}: {}",
            out.status_text(),
            util::tail(&out.stderr, 5)
        ));
    }
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix("Time per run:"))
        .and_then(|t| t.trim().trim_end_matches("(s)").trim().parse().ok())
        .ok_or_else(|| {
            format!(
                "speed3d_{kind} printed no time: {}",
                util::tail(&out.stdout, 8)
            )
        })
}

/// mpi4py-fft's best time for `kind`.
fn mpi4py(a: &Args, kind: &str) -> std::result::Result<f64, String> {
    let script = util::workspace_root().join("dfft/bench/mpi4py_fft_bench.py");
    let mut cmd = mpirun(a.ranks);
    cmd.arg("python3")
        .arg(&script)
        .args([a.n.to_string(), kind.to_string(), a.reps.to_string()]);
    let out = util::run_captured(cmd, Duration::from_secs(3600)).map_err(|e| e.to_string())?;
    if !out.success() {
        return Err(format!(
            "{}: {}",
            out.status_text(),
            util::tail(&out.stderr, 5)
        ));
    }
    let v: Value = out
        .stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| format!("no JSON from the script: {}", util::tail(&out.stdout, 5)))?;
    let err = v["round_trip_error"].as_f64().unwrap_or(f64::NAN);
    if err.is_nan() || err > 1e-10 {
        return Err(format!("round trip differs from the input by {err:.3e}"));
    }
    v["best_s"].as_f64().ok_or_else(|| "no best_s".to_string())
}

fn mpi4py_ready() -> std::result::Result<(), String> {
    let importable = || {
        Command::new("python3")
            .args(["-c", "import mpi4py_fft"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if importable() {
        return Ok(());
    }
    println!("installing mpi4py and mpi4py-fft with pip");
    let _ = Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", "mpi4py", "mpi4py-fft"])
        .status();
    if importable() {
        Ok(())
    } else {
        Err("mpi4py_fft cannot be imported and pip could not install it".into())
    }
}

/// Runs the bench.
pub fn run(a: &Args) -> Result<()> {
    let start = Instant::now();
    if a.n < 2 || a.ranks < 1 || a.reps < 1 {
        bail!(
            "--n must be at least 2, --ranks and --reps at least 1 (got {}, {}, {})",
            a.n,
            a.ranks,
            a.reps
        );
    }
    let out_dir = match &a.out {
        Some(d) => d.clone(),
        None => util::target_dir()?.join("bench").join("fft-dist"),
    };
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let mine_in = ours(a, "input", "mean_s", &out_dir.join("ours_input.json"))?;
    let mine_tr = ours(
        a,
        "transposed",
        "best_s",
        &out_dir.join("ours_transposed.json"),
    )?;
    let mpi = util::mpirun_available();
    let heffte_dir = match &a.heffte {
        Some(d) => d.clone(),
        None => util::target_dir()?.join("heffte/build/benchmarks"),
    };
    let m4 = if a.no_mpi4py {
        Err("--no-mpi4py".to_string())
    } else if !mpi {
        Err("mpirun is not available".to_string())
    } else {
        mpi4py_ready()
    };
    let mut rows = vec![];
    println!(
        "\nfft-dist: {}^3 on {} ranks, time per run = (forward + backward) / 2, slowest rank, s; \
         ratio = ours / reference (goals: HeFFTe <= {GOAL_HEFFTE}, mpi4py-fft <= {GOAL_MPI4PY})",
        a.n, a.ranks
    );
    println!(
        "{:>4} | {:>10} {:>10} {:>6} {:>4} | {:>10} {:>10} {:>6} {:>4}",
        "kind", "ours mean", "HeFFTe", "ratio", "goal", "ours (tr)", "mpi4py-fft", "ratio", "goal"
    );
    for kind in KINDS {
        let find = |v: &[(String, f64)]| v.iter().find(|r| r.0 == kind).map(|r| r.1);
        let (oi, ot) = (find(&mine_in), find(&mine_tr));
        let h = if mpi {
            heffte(a, &heffte_dir, kind)
        } else {
            Err("mpirun is not available".into())
        };
        let m = m4.clone().and_then(|_| mpi4py(a, kind));
        for (what, r) in [("HeFFTe", &h), ("mpi4py-fft", &m)] {
            if let Err(why) = r {
                println!("{what} {kind} skipped: {why}");
            }
        }
        let rh = oi.zip(h.as_ref().ok()).map(|(o, h)| o / h);
        let rm = ot.zip(m.as_ref().ok()).map(|(o, m)| o / m);
        let f = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |x| format!("{x:.*}", p));
        let goal = |r: Option<f64>, g: f64| r.map_or("-", |r| if r <= g { "met" } else { "not" });
        println!(
            "{:>4} | {:>10} {:>10} {:>6} {:>4} | {:>10} {:>10} {:>6} {:>4}",
            kind,
            f(oi, 4),
            f(h.as_ref().ok().copied(), 4),
            f(rh, 2),
            goal(rh, GOAL_HEFFTE),
            f(ot, 4),
            f(m.as_ref().ok().copied(), 4),
            f(rm, 2),
            goal(rm, GOAL_MPI4PY)
        );
        rows.push(json!({
            "kind": kind,
            "ours_input_layout_mean_s": oi,
            "heffte_s": h.as_ref().ok(),
            "heffte_skipped": h.as_ref().err(),
            "ratio_to_heffte": rh,
            "goal_heffte_met": rh.map(|r| r <= GOAL_HEFFTE),
            "ours_transposed_best_s": ot,
            "mpi4py_fft_s": m.as_ref().ok(),
            "mpi4py_fft_skipped": m.as_ref().err(),
            "ratio_to_mpi4py_fft": rm,
            "goal_mpi4py_fft_met": rm.map(|r| r <= GOAL_MPI4PY),
        }));
    }
    let png = out_dir.join("fft_dist.png");
    draw(&png, a, &rows).context("cannot draw fft_dist.png")?;
    let report = json!({
        "what": "distributed 3D FFT, (forward + backward) / 2 of the slowest rank: dfft Fft3d on in-process ranks (bricks, Protocol::Auto, spectrum in the input layout and transposed), HeFFTe 2.4.1 speed3d with FFTW (mpirun, its default bricks), mpi4py-fft with FFTW (mpirun, its default decomposition)",
        "statistic": "against HeFFTe: the mean of our repeats (HeFFTe's Time per run is the mean of its 5); against mpi4py-fft: the best repeat of each",
        "n": a.n,
        "ranks": a.ranks,
        "reps": a.reps,
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "goals": {"heffte": GOAL_HEFFTE, "mpi4py_fft": GOAL_MPI4PY},
        "rows": rows,
        "seconds": start.elapsed().as_secs_f64(),
    });
    let path = out_dir.join("fft_dist.json");
    util::write_report(&path, &report, &[&png], start)?;
    Ok(())
}

/// Bars per kind: ours (input layout), HeFFTe, ours (transposed),
/// mpi4py-fft, in seconds.
fn draw(path: &Path, a: &Args, rows: &[Value]) -> Result<()> {
    register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| anyhow::anyhow!("the embedded DejaVu Sans font is invalid"))?;
    let root = BitMapBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let series: [(&str, &str, RGBColor); 4] = [
        (
            "dfft, spectrum in the input layout (mean)",
            "ours_input_layout_mean_s",
            RGBColor(31, 119, 180),
        ),
        ("HeFFTe (FFTW, mean)", "heffte_s", RGBColor(255, 127, 14)),
        (
            "dfft, spectrum transposed (best)",
            "ours_transposed_best_s",
            RGBColor(44, 160, 44),
        ),
        (
            "mpi4py-fft (FFTW, best)",
            "mpi4py_fft_s",
            RGBColor(148, 103, 189),
        ),
    ];
    let top = rows
        .iter()
        .flat_map(|r| series.iter().filter_map(|s| r[s.1].as_f64()))
        .fold(0.0f64, f64::max)
        .max(1e-6)
        * 1.25;
    let title = format!(
        "distributed 3D FFT, {}^3 on {} ranks: (forward + backward) / 2, s",
        a.n, a.ranks
    );
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..rows.len() as f64, 0.0..top)?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(2 * rows.len() + 1)
        .x_label_formatter(&|x| {
            // A kind's name under the middle of its group (x = i + 1/2).
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 1e-6 {
                rows.get(i)
                    .and_then(|r| r["kind"].as_str())
                    .unwrap_or("")
                    .to_string()
            } else {
                String::new()
            }
        })
        .y_desc("seconds per run")
        .label_style(("sans-serif", 14))
        .draw()?;
    for (k, (name, key, color)) in series.iter().enumerate() {
        let bars: Vec<(f64, f64)> = rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                r[*key]
                    .as_f64()
                    .map(|v| (i as f64 + 0.1 + 0.2 * k as f64, v))
            })
            .collect();
        let color = *color;
        c.draw_series(
            bars.iter()
                .map(|&(x, v)| Rectangle::new([(x, 0.0), (x + 0.18, v)], color.filled())),
        )?
        .label(*name)
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()?;
    root.present()?;
    Ok(())
}
