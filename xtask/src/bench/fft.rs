//! `cargo xtask bench fft [--sizes 64,128,256] [--kinds c2c,r2c]
//! [--rounds 3] [--min-time 0.3] [--out DIR] [--no-pocketfft]`: `dfft`'s
//! local 3D transforms on one core against FFTW and scipy's pocketfft in
//! the same run, printed as a table and written to `DIR/fft.json` and
//! `DIR/fft.png` (`DIR` defaults to `target/bench/fft`).
//!
//! Ours and FFTW come from `dfft`'s `fftw_compare` example (feature `fftw`,
//! which links the system FFTW 3: `apt-get install libfftw3-dev`): an
//! `N^3` grid on one in-process rank, unnormalised, out of place, against
//! FFTW's `FFTW_MEASURE` plans, out of place, one thread, each direction
//! timed in interleaved rounds; it checks our spectrum against FFTW's.
//! pocketfft is `scipy.fft.fftn`/`ifftn` and `rfftn`/`irfftn` with
//! `workers=1` (out of place; its inverse includes the 1/N scaling), run
//! after ours; scipy is installed with pip when missing, and skipped with a
//! message when it cannot be.
//!
//! The ratio is ours over FFTW: each round's median repeat of ours over the
//! same round's of FFTW (the two alternate within a round), the median of
//! those ratios printed with their spread; the best repeats' ratio beside
//! it. The goal is at most [`GOAL_RATIO`]: met where every round's ratio
//! is within it, not met where none is, undecided where the spread crosses
//! it (a noisy host: run more rounds). The CPU, its family and dfft's ISA
//! path (capped by `PARNUM_ISA`) head the table.

use crate::util;
use anyhow::{bail, Context, Result};
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Options of `cargo xtask bench fft`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Grid sizes N (N^3 points), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "64,128,256")]
    pub sizes: Vec<usize>,
    /// Transform kinds, comma-separated (c2c, r2c).
    #[arg(long, value_delimiter = ',', default_value = "c2c,r2c")]
    pub kinds: Vec<String>,
    /// Interleaved rounds of FFTW and ours per case.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Seconds each library runs per direction and round (at least 3
    /// repeats).
    #[arg(long, default_value_t = 0.3)]
    pub min_time: f64,
    /// Output directory (default target/bench/fft).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip scipy's pocketfft.
    #[arg(long)]
    pub no_pocketfft: bool,
}

/// The goal: our time at most this factor of FFTW's.
pub const GOAL_RATIO: f64 = 0.8;

const PY: &str = r#"
import sys, time, json
import numpy as np, scipy, scipy.fft as sf

def timeit(f, min_time):
    f()
    ts = []
    start = time.perf_counter()
    while len(ts) < 3 or time.perf_counter() - start < min_time:
        t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    ts.sort()
    return {"best_s": ts[0], "median_s": ts[len(ts) // 2], "reps": len(ts)}

min_time = float(sys.argv[1]); rounds = int(sys.argv[2]); kinds = sys.argv[3].split(",")
for n in map(int, sys.argv[4:]):
    rng = np.random.default_rng(1)
    for kind in kinds:
        if kind == "c2c":
            x = rng.random((n, n, n)) - 0.5 + 1j * (rng.random((n, n, n)) - 0.5)
            y = sf.fftn(x, workers=1)
            fwd = lambda: sf.fftn(x, workers=1)
            bwd = lambda: sf.ifftn(y, workers=1)
        else:
            x = rng.random((n, n, n)) - 0.5
            y = sf.rfftn(x, workers=1)
            fwd = lambda: sf.rfftn(x, workers=1)
            bwd = lambda: sf.irfftn(y, s=(n, n, n), workers=1)
        best = {}
        for _ in range(rounds):
            for d, f in (("forward", fwd), ("backward", bwd)):
                t = timeit(f, min_time)
                if d not in best or t["best_s"] < best[d]["best_s"]:
                    best[d] = t
        for d in ("forward", "backward"):
            print(json.dumps({"kind": kind, "n": n, "direction": d, "scipy": scipy.__version__, **best[d]}), flush=True)
        del x, y
"#;

/// Whether python3 can import numpy and scipy.fft.
fn scipy_importable() -> bool {
    Command::new("python3")
        .args(["-c", "import numpy, scipy.fft"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// pocketfft's rows, or why it was skipped.
fn pocketfft(args: &Args) -> std::result::Result<Vec<Value>, String> {
    if !scipy_importable() {
        eprintln!("$ python3 -m pip install --quiet numpy scipy");
        let ok = Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "numpy", "scipy"])
            .status()
            .is_ok_and(|s| s.success());
        if !ok || !scipy_importable() {
            return Err("scipy is not installed and `python3 -m pip install scipy` failed".into());
        }
    }
    let mut cmd = Command::new("python3");
    cmd.args(["-c", PY])
        .arg(args.min_time.to_string())
        .arg(args.rounds.max(1).to_string())
        .arg(args.kinds.join(","))
        .args(args.sizes.iter().map(|n| n.to_string()))
        .env("OMP_NUM_THREADS", "1");
    let out = util::run_captured(cmd, Duration::from_secs(3600)).map_err(|e| e.to_string())?;
    if !out.success() {
        return Err(format!(
            "the pocketfft run failed ({}): {}",
            out.status_text(),
            util::tail(&out.stderr, 5)
        ));
    }
    out.stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).map_err(|e| format!("bad pocketfft output: {e}")))
        .collect()
}

/// Ours and FFTW from the `fftw_compare` example.
fn ours_and_fftw(args: &Args, json_path: &Path) -> Result<Value> {
    let join = |v: Vec<String>| v.join(",");
    let sizes = join(args.sizes.iter().map(|n| n.to_string()).collect());
    let mut cmd = util::cargo();
    cmd.args([
        "run",
        "--release",
        "-p",
        "parnum-dfft",
        "--features",
        "fftw",
        "--example",
        "fftw_compare",
        "--",
        "--sizes",
        &sizes,
        "--kinds",
        &args.kinds.join(","),
        "--rounds",
        &args.rounds.max(1).to_string(),
        "--min-time",
        &args.min_time.to_string(),
        "--json",
    ])
    .arg(json_path);
    eprintln!(
        "$ cargo run --release -p parnum-dfft --features fftw --example fftw_compare -- --sizes {sizes} --kinds {} --rounds {} --min-time {} --json {}",
        args.kinds.join(","),
        args.rounds.max(1),
        args.min_time,
        json_path.display()
    );
    let status = cmd
        .status()
        .context("cannot run the fftw_compare example")?;
    if !status.success() {
        bail!(
            "the fftw_compare example failed with {status} (it links the system FFTW 3: apt-get install libfftw3-dev)"
        );
    }
    let text = std::fs::read_to_string(json_path)
        .with_context(|| format!("cannot read {}", json_path.display()))?;
    serde_json::from_str(&text).context("bad JSON from fftw_compare")
}

/// Runs the bench.
pub fn run(args: &Args) -> Result<()> {
    let start = Instant::now();
    if args.sizes.is_empty() || args.kinds.is_empty() {
        bail!("give at least one size and one kind");
    }
    if let Some(k) = args.kinds.iter().find(|k| *k != "c2c" && *k != "r2c") {
        bail!("unknown kind {k:?} (valid: c2c, r2c)");
    }
    let out_dir = match &args.out {
        Some(d) => d.clone(),
        None => util::target_dir()?.join("bench").join("fft"),
    };
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let main = ours_and_fftw(args, &out_dir.join("ours_fftw.json"))?;
    let pocket = if args.no_pocketfft {
        Err("--no-pocketfft".to_string())
    } else {
        pocketfft(args)
    };
    if let Err(why) = &pocket {
        println!("pocketfft skipped: {why}");
    }
    let rows = main["rows"]
        .as_array()
        .context("no rows from fftw_compare")?;
    println!(
        "\nfft: CPU {} ({}), dfft's ISA path {}",
        main["cpu"].as_str().unwrap_or("?"),
        main["cpu_family"].as_str().unwrap_or("?"),
        main["isa"].as_str().unwrap_or("?")
    );
    println!(
        "dfft Fft3d vs {}, one core, N^3, out of place; best repeat in ms; ratio = ours / FFTW per round (median, min-max over {} rounds) and of the best repeats; goal <= {GOAL_RATIO}",
        main["fftw_version"].as_str().unwrap_or("FFTW"),
        args.rounds.max(1)
    );
    println!(
        "{:>4} {:>5} {:>8} | {:>9} {:>9} {:>9} | {:>6} {:>11} {:>6} | {:>9}",
        "kind", "N", "dir", "ours", "FFTW", "pocketfft", "ratio", "spread", "best", "goal"
    );
    let mut table = vec![];
    for r in rows {
        let (kind, n, dir) = (
            r["kind"].as_str().unwrap_or("?"),
            r["n"].as_u64().unwrap_or(0),
            r["direction"].as_str().unwrap_or("?"),
        );
        let o = r["ours_best_s"].as_f64().unwrap_or(f64::NAN);
        let f = r["fftw_best_s"].as_f64().unwrap_or(f64::NAN);
        let p = pocket.as_ref().ok().and_then(|rows| {
            rows.iter().find(|p| {
                p["kind"].as_str() == Some(kind)
                    && p["n"].as_u64() == Some(n)
                    && p["direction"].as_str() == Some(dir)
            })
        });
        let pb = p.and_then(|p| p["best_s"].as_f64());
        let best_ratio = o / f;
        let list = |k: &str| -> Vec<f64> {
            r[k].as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default()
        };
        let rounds: Vec<f64> = list("ours_rounds_s")
            .iter()
            .zip(list("fftw_rounds_s"))
            .map(|(a, b)| a / b)
            .collect();
        let v = Verdict::of(&rounds, GOAL_RATIO);
        println!(
            "{:>4} {:>5} {:>8} | {:>9.3} {:>9.3} {:>9} | {:>6.2} {:>11} {:>6.2} | {:>9}",
            kind,
            n,
            dir,
            o * 1e3,
            f * 1e3,
            pb.map_or("-".to_string(), |v| format!("{:.3}", v * 1e3)),
            v.median,
            format!("{:.2}-{:.2}", v.min, v.max),
            best_ratio,
            v.word
        );
        let ratio = v.median;
        table.push(json!({
            "kind": kind,
            "n": n,
            "direction": dir,
            "ours": { "best_s": o, "median_s": r["ours_median_s"], "reps": r["ours_reps"] },
            "fftw": { "best_s": f, "median_s": r["fftw_median_s"], "reps": r["fftw_reps"] },
            "pocketfft": p,
            "ratio_to_fftw": ratio,
            "round_ratios": rounds,
            "best_ratio": best_ratio,
            "pocketfft_ratio_to_fftw": pb.map(|v| v / f),
            "goal": v.word,
        }));
    }
    let png = out_dir.join("fft.png");
    let labels = draw(&png, &table).context("cannot draw fft.png")?;
    let report = json!({
        "what": "local 3D FFT of an N^3 grid on one core, out of place: dfft Fft3d on one in-process rank (unnormalised), FFTW_MEASURE plans, scipy.fft (pocketfft, workers=1, its inverse scaled by 1/N)",
        "fftw_version": main["fftw_version"],
        "timing": "each round: FFTW, then ours, a direction at a time; a round's time is its median repeat; ratio_to_fftw is the median over the rounds of ours / FFTW, goal met where every round's ratio is within it, not met where none is, else undecided; pocketfft after them",
        "cpu": main["cpu"],
        "cpu_family": main["cpu_family"],
        "isa": main["isa"],
        "rounds": args.rounds.max(1),
        "min_time_s": args.min_time,
        "goal_ratio": GOAL_RATIO,
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "rows": table,
        "pocketfft_skipped": pocket.as_ref().err(),
        "plot": labels,
        "seconds": start.elapsed().as_secs_f64(),
    });
    let path = out_dir.join("fft.json");
    util::write_report(&path, &report, &[&png], start)?;
    Ok(())
}

/// One panel per kind and direction: time over FFTW's against N for ours
/// and pocketfft, with the goal line; returns the panels' labels.
fn draw(path: &Path, rows: &[Value]) -> Result<Vec<Value>> {
    register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| anyhow::anyhow!("the embedded DejaVu Sans font is invalid"))?;
    let root = BitMapBackend::new(path, (1400, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let body = root.titled(
        "local 3D FFT, one core: time / FFTW (FFTW_MEASURE, out of place)",
        ("sans-serif", 22),
    )?;
    let panels = body.split_evenly((1, 4));
    let mut labels = vec![];
    let series: [(&str, RGBColor, &str); 2] = [
        ("dfft / FFTW", RGBColor(31, 119, 180), "ratio_to_fftw"),
        (
            "pocketfft / FFTW",
            RGBColor(44, 160, 44),
            "pocketfft_ratio_to_fftw",
        ),
    ];
    let goal = RGBColor(214, 39, 40);
    let mut k = 0;
    for kind in ["c2c", "r2c"] {
        for dir in ["forward", "backward"] {
            let mine: Vec<&Value> = rows
                .iter()
                .filter(|r| r["kind"] == kind && r["direction"] == dir)
                .collect();
            if mine.is_empty() || k >= 4 {
                continue;
            }
            let lg = |r: &Value| (r["n"].as_u64().unwrap_or(1) as f64).log2();
            let (x0, x1) = mine.iter().fold((f64::MAX, f64::MIN), |(a, b), r| {
                (a.min(lg(r)), b.max(lg(r)))
            });
            let top = mine
                .iter()
                .flat_map(|r| series.iter().filter_map(|s| r[s.2].as_f64()))
                .fold(1.0f64, f64::max)
                * 1.2;
            let title = format!("{kind} {dir}");
            let mut c = ChartBuilder::on(&panels[k])
                .caption(&title, ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(50)
                .build_cartesian_2d((x0 - 0.5)..(x1 + 0.5), 0.0..top)?;
            c.configure_mesh()
                .x_desc("log2 N (grid N^3)")
                .y_desc("time / FFTW's")
                .label_style(("sans-serif", 13))
                .draw()?;
            for (name, color, key) in series {
                let pts: Vec<(f64, f64)> = mine
                    .iter()
                    .filter_map(|r| r[key].as_f64().map(|v| (lg(r), v)))
                    .collect();
                if pts.is_empty() {
                    continue;
                }
                c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                    .label(name)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                    });
                c.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
            }
            c.draw_series(LineSeries::new(
                vec![(x0 - 0.5, GOAL_RATIO), (x1 + 0.5, GOAL_RATIO)],
                goal.stroke_width(1),
            ))?
            .label(format!("goal <= {GOAL_RATIO}"))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], goal.stroke_width(1))
            });
            c.configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 13))
                .draw()?;
            labels.push(json!({
                "panel": k + 1,
                "title": title,
                "x": "log2 N (grid N^3)",
                "y": "best time / FFTW's best time",
                "series": ["dfft / FFTW", "pocketfft / FFTW", format!("goal <= {GOAL_RATIO}")],
            }));
            k += 1;
        }
    }
    root.present()?;
    Ok(labels)
}

/// A goal's verdict from per-round ratios (lower is better).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    /// `met` (every round within the goal), `not met` (none), `undecided`
    /// (the spread crosses it), `-` (no rounds).
    pub(crate) word: &'static str,
}

impl Verdict {
    pub(crate) fn of(ratios: &[f64], goal: f64) -> Verdict {
        let v: Vec<f64> = ratios.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Verdict {
                median: f64::NAN,
                min: f64::NAN,
                max: f64::NAN,
                word: "-",
            };
        }
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let word = if max <= goal {
            "met"
        } else if min > goal {
            "not met"
        } else {
            "undecided"
        };
        Verdict {
            median: util::median(&v),
            min,
            max,
            word,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_needs_every_round_on_one_side_of_the_goal() {
        let v = Verdict::of(&[0.70, 0.75, 0.79], 0.8);
        assert_eq!((v.word, v.min, v.max, v.median), ("met", 0.70, 0.79, 0.75));
        assert_eq!(Verdict::of(&[0.81, 0.9, 1.2], 0.8).word, "not met");
        // A spread that crosses the goal decides nothing.
        assert_eq!(Verdict::of(&[0.75, 0.85], 0.8).word, "undecided");
        // The goal itself counts as met; non-finite rounds are left out.
        assert_eq!(Verdict::of(&[0.8, f64::NAN], 0.8).word, "met");
        assert_eq!(Verdict::of(&[], 0.8).word, "-");
    }
}
