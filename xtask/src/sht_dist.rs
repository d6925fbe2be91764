//! The distributed spherical harmonic transforms (`sht::DistSht`) in
//! xtask, through the `sht_dist` example of the `sht` crate:
//!
//! - [`bitexact`]: the sht part of `cargo xtask bitexact`. The example's
//!   `hash` mode runs, for one rank count, every legal `Pi_r x Pi_theta`
//!   grid with every transposition algorithm and queue lengths 1, 2, 3, and
//!   prints per case a hash of the synthesised grid, the analysed
//!   coefficients, the vector transforms' results and the lm layout that
//!   does not depend on the decomposition. Every case must give the hash
//!   of the in-process 1-rank run: in-process at 1, 2, 3, 4, 6 and 8 ranks,
//!   or with `--mpi` under `mpirun -np 1, 2, 4`.
//! - [`bench()`]: `cargo xtask bench sht-transpose`. The example's `bench`
//!   mode times, per algorithm and queue length 1..13, 13 scalar fields
//!   (the seed's four vector fields and one scalar) through the theta
//!   transposition (grid `1 x P`) and the `l` transposition (grid `P x 1`)
//!   and back, with a fixed number of values per rank (the levels grow with
//!   `P`), at 2 and 4 ranks in-process and, when `mpirun` is there, under
//!   MPI. Prints a table per transposition and rank count and writes
//!   `sht-transpose.json` and `sht-transpose.png`.

use crate::util;
use anyhow::{anyhow, bail, Context, Result};
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// In-process rank counts of the bit-exactness suite.
pub const RANKS: [usize; 6] = [1, 2, 3, 4, 6, 8];
/// MPI process counts of the bit-exactness suite.
pub const MPI_RANKS: [usize; 3] = [1, 2, 4];
/// Rank counts of the transposition bench.
pub const BENCH_RANKS: [usize; 2] = [2, 4];
/// The five protocols of the redistribution engine, in the example's spelling.
pub const ALGORITHMS: [&str; 5] = ["alltoall", "alltoallv", "alltoallw", "p2p", "p2p_plined"];
const CASE_LIMIT: Duration = Duration::from_secs(300);

/// Builds the `sht_dist` example in release (with feature `mpi` when
/// `mpi`) and returns a private copy (`target/xtask/bin/sht_dist[-mpi]`).
pub fn build_example(mpi: bool) -> Result<PathBuf> {
    util::build_binary(
        util::Artifact {
            package: "sht",
            name: "sht_dist",
            example: true,
        },
        mpi,
    )
}

/// Runs the example on `ranks` ranks (in-process, or under `mpirun` when
/// `mpi`) and returns its stdout lines.
fn run_example(bin: &Path, mpi: bool, ranks: usize, args: &[String]) -> Result<Vec<String>> {
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
fn fields(line: &str) -> BTreeMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect()
}

/// One `case` line: grid, algorithm, queue, hash.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HashCase {
    grid: String,
    alg: String,
    queue: usize,
    hash: String,
}

fn parse_cases(lines: &[String]) -> Result<Vec<HashCase>> {
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

/// Options of `cargo xtask bench sht-transpose`.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Fewer repetitions (3 instead of 9) for a run under a minute.
    #[arg(long)]
    pub quick: bool,
    /// Skip the MPI runs even when mpirun is available.
    #[arg(long)]
    pub no_mpi: bool,
    /// Latitudes of the grid (lmax and nphi follow the defaults).
    #[arg(long, default_value_t = 64)]
    pub ntheta: usize,
    /// Radial levels per rank.
    #[arg(long, default_value_t = 4)]
    pub levels: usize,
    /// Output folder for sht-transpose.json and sht-transpose.png
    /// [default: target/bench/sht-transpose].
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One measured point.
#[derive(Debug, Clone, serde::Serialize)]
struct Point {
    which: String,
    backend: String,
    ranks: usize,
    alg: String,
    queue: usize,
    fields: usize,
    values_per_rank: usize,
    seconds: f64,
    /// Theta transposition only: scalar synthesis plus analysis of the
    /// same fields (Legendre, transposition and FFT steps).
    transform_seconds: Option<f64>,
}

fn parse_points(lines: &[String]) -> Result<Vec<Point>> {
    lines
        .iter()
        .filter(|l| l.starts_with("bench "))
        .map(|l| {
            let f = fields(l);
            let get = |k: &str| {
                f.get(k)
                    .copied()
                    .ok_or_else(|| anyhow!("sht_dist line without {k}: {l}"))
            };
            Ok(Point {
                which: get("which")?.to_string(),
                backend: get("backend")?.to_string(),
                ranks: get("ranks")?.parse()?,
                alg: get("alg")?.to_string(),
                queue: get("queue")?.parse()?,
                fields: get("fields")?.parse()?,
                values_per_rank: get("values_per_rank")?.parse()?,
                seconds: get("seconds")?.parse()?,
                transform_seconds: f.get("transform_seconds").map(|v| v.parse()).transpose()?,
            })
        })
        .collect()
}

/// `cargo xtask bench sht-transpose`.
pub fn bench(args: &BenchArgs) -> Result<()> {
    let start = Instant::now();
    let out = match &args.out {
        Some(d) => d.clone(),
        None => util::target_dir()?.join("bench").join("sht-transpose"),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let reps = if args.quick { 3 } else { 9 };
    let ex_args: Vec<String> = [
        "bench".to_string(),
        "--ntheta".into(),
        args.ntheta.to_string(),
        "--levels".into(),
        args.levels.to_string(),
        "--fields".into(),
        "13".into(),
        "--reps".into(),
        reps.to_string(),
        "--queues".into(),
        (1..=13)
            .map(|q| q.to_string())
            .collect::<Vec<_>>()
            .join(","),
    ]
    .into();
    let mut backends = vec![(build_example(false)?, false)];
    if args.no_mpi {
        println!("bench sht-transpose: MPI runs skipped (--no-mpi)");
    } else if !util::mpirun_available() {
        println!("bench sht-transpose: mpirun not found; MPI runs skipped");
    } else {
        match build_example(true) {
            Ok(b) => backends.push((b, true)),
            Err(e) => println!("bench sht-transpose: MPI build failed, MPI runs skipped: {e:#}"),
        }
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "bench sht-transpose: {cores} core(s); ntheta {}, {} levels per rank, 13 fields, median of {reps}",
        args.ntheta, args.levels
    );
    let mut points = vec![];
    for (bin, mpi) in &backends {
        for p in BENCH_RANKS {
            let lines = run_example(bin, *mpi, p, &ex_args)?;
            let pts = parse_points(&lines)?;
            print_table(&pts);
            points.extend(pts);
        }
    }
    let png = out.join("sht-transpose.png");
    draw(&png, &points).with_context(|| format!("cannot draw {}", png.display()))?;
    let json_path = out.join("sht-transpose.json");
    let report = json!({
        "ntheta": args.ntheta,
        "levels_per_rank": args.levels,
        "fields": 13,
        "reps": reps,
        "cores": cores,
        "seconds_are": "median round trip (there and back) of 13 fields, slowest rank",
        "points": points,
    });
    util::write_report(&json_path, &report, &[&png], start)?;
    Ok(())
}

/// One table per (transposition, backend, ranks): queue lengths by
/// algorithm, ms per round trip of all fields, the fastest marked; for the
/// theta transposition a second one with the whole synthesis plus analysis
/// and the transposition's share of it.
fn print_table(points: &[Point]) {
    let mut keys: Vec<(String, String, usize)> = points
        .iter()
        .map(|p| (p.which.clone(), p.backend.clone(), p.ranks))
        .collect();
    keys.dedup();
    for (which, backend, ranks) in keys {
        let sel: Vec<&Point> = points
            .iter()
            .filter(|p| p.which == which && p.backend == backend && p.ranks == ranks)
            .collect();
        let Some(first) = sel.first() else { continue };
        let mut queues: Vec<usize> = sel.iter().map(|p| p.queue).collect();
        queues.dedup();
        let table = |title: String, value: &dyn Fn(&Point) -> Option<f64>, share: bool| {
            println!("\n{title}");
            print!("{:>5}", "queue");
            for a in ALGORITHMS {
                print!(" {a:>9}");
            }
            println!(
                "  fastest{}",
                if share { "  transposition share" } else { "" }
            );
            for &q in &queues {
                print!("{q:>5}");
                let mut best: (f64, &str, Option<&Point>) = (f64::INFINITY, "", None);
                for a in ALGORITHMS {
                    let p = sel.iter().find(|p| p.queue == q && p.alg == a);
                    match p.and_then(|p| value(p)) {
                        Some(v) => {
                            print!(" {:>9.3}", v * 1e3);
                            if v < best.0 {
                                best = (v, a, p.copied());
                            }
                        }
                        None => print!(" {:>9}", "-"),
                    }
                }
                match (share, best.2) {
                    (true, Some(p)) => {
                        println!("  {:<7}  {:.0} %", best.1, 100.0 * p.seconds / best.0)
                    }
                    _ => println!("  {}", best.1),
                }
            }
        };
        table(
            format!(
                "{which} transposition, {ranks} {backend} ranks, {} values per rank and field: ms per round trip of {} fields",
                first.values_per_rank, first.fields
            ),
            &|p| Some(p.seconds),
            false,
        );
        if first.transform_seconds.is_some() {
            table(
                format!(
                    "scalar synthesis + analysis of {} fields on 1 x {ranks} ({backend}): ms, and the theta transposition's share",
                    first.fields
                ),
                &|p| p.transform_seconds,
                true,
            );
        }
    }
}

const COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
];

/// Panels: rows theta / l transposition, columns 2 / 4 ranks; time per
/// round trip against the queue length, a line per algorithm, solid
/// in-process, thin with crosses under MPI.
fn draw(path: &Path, points: &[Point]) -> Result<()> {
    register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| anyhow!("the embedded DejaVu Sans font is invalid"))?;
    let root = BitMapBackend::new(path, (1200, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let body = root.titled(
        "sht transpositions: round trip of 13 fields vs queue length (solid: in-process, crosses: MPI)",
        ("sans-serif", 20),
    )?;
    let panels = body.split_evenly((2, BENCH_RANKS.len()));
    for (k, area) in panels.iter().enumerate() {
        let which = if k < BENCH_RANKS.len() { "theta" } else { "l" };
        let ranks = BENCH_RANKS[k % BENCH_RANKS.len()];
        let sel: Vec<&Point> = points
            .iter()
            .filter(|p| p.which == which && p.ranks == ranks)
            .collect();
        let (lo, hi) = sel.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| {
            (lo.min(p.seconds * 1e3), hi.max(p.seconds * 1e3))
        });
        let (lo, hi) = if sel.is_empty() {
            (0.01, 1.0)
        } else {
            (lo * 0.8, hi * 1.25)
        };
        let mut c = ChartBuilder::on(area)
            .caption(
                format!("{which} transposition, {ranks} ranks"),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.5f64..13.5, (lo..hi).log_scale())?;
        c.configure_mesh()
            .x_desc("queue length (fields per transposition)")
            .y_desc("ms per round trip")
            .x_labels(13)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.2}"))
            .draw()?;
        for (ai, a) in ALGORITHMS.iter().enumerate() {
            let color = COLORS[ai];
            for backend in ["in-process", "mpi"] {
                let mut pts: Vec<(f64, f64)> = sel
                    .iter()
                    .filter(|p| p.alg == *a && p.backend == backend)
                    .map(|p| (p.queue as f64, p.seconds * 1e3))
                    .collect();
                pts.sort_by(|x, y| x.0.total_cmp(&y.0));
                if pts.is_empty() {
                    continue;
                }
                if backend == "in-process" {
                    c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                        .label(*a)
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                        });
                } else {
                    c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(1)))?;
                    c.draw_series(pts.iter().map(|&p| Cross::new(p, 4, color.stroke_width(1))))?;
                }
            }
        }
        c.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_example_lines() {
        let lines = vec![
            "case ranks=2 grid=1x2 alg=alltoallw queue=3 backend=in-process hash=00ff".to_string(),
            "bench which=theta ranks=2 backend=mpi ntheta=64 lmax=43 levels=8 fields=13 alg=p2p queue=5 values_per_rank=100 seconds=1.5e-3 transform_seconds=4e-3".to_string(),
        ];
        let c = parse_cases(&lines).unwrap();
        assert_eq!(
            c,
            vec![HashCase {
                grid: "1x2".into(),
                alg: "alltoallw".into(),
                queue: 3,
                hash: "00ff".into()
            }]
        );
        let p = parse_points(&lines).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].queue, p[0].seconds), (5, 1.5e-3));
        assert_eq!(p[0].transform_seconds, Some(4e-3));
        assert!(parse_cases(&["case grid=1x1".to_string()]).is_err());
    }

    #[test]
    fn grids_of_a_rank_count() {
        assert_eq!(grids(6), vec!["1x6", "2x3", "3x2", "6x1"]);
        assert_eq!(grids(1), vec!["1x1"]);
    }
}
