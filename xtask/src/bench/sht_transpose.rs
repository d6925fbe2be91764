//! `cargo xtask bench sht-transpose`: the transpositions of the
//! distributed spherical harmonic transforms (`sht::DistSht`), through the
//! `sht_dist` example of the `sht` crate (whose bit-exactness suite is
//! [`crate::bitexact::sht`]).
//!
//! The example's `bench` mode times, per algorithm and queue length 1..13,
//! 13 scalar fields (the seed's four vector fields and one scalar) through
//! the theta transposition (grid `1 x P`) and the `l` transposition (grid
//! `P x 1`) and back, with a fixed number of values per rank (the levels
//! grow with `P`), at 2 and 4 ranks in-process and, when `mpirun` is there,
//! under MPI. Prints a table per transposition and rank count and writes
//! `sht-transpose.json` and `sht-transpose.png`.

use crate::bitexact::sht::{build_example, fields, run_example, ALGORITHMS};
use crate::util;
use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Rank counts of the transposition bench.
pub const BENCH_RANKS: [usize; 2] = [2, 4];

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
    use crate::bitexact::sht::{parse_cases, HashCase};

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
}
