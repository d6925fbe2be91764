//! `cargo xtask bench sht [--lmax 63,127,255,511] [--out DIR] [--no-refs]
//! [--polar-opt EPS] [--ours-polar EPS]`: spherical harmonic transforms on one core against
//! SHTns and ducc0 in the same run, printed as a table and written to
//! `DIR/sht.json` (`DIR` defaults to `target/bench/sht`).
//!
//! For each `lmax`, on the Gauss grid `ntheta = 3 (lmax + 1) / 2`,
//! `nphi = 2 ntheta` (one field, i.e. one radial level):
//!
//! - **scalar**: synthesis then analysis;
//! - **vector**: spheroidal/toroidal synthesis (`S, T -> u_theta, u_phi`)
//!   then analysis.
//!
//! Ours comes from the crate benchmark (`cargo bench -p parnum-sht --bench sht --
//! --json`); the references from Python on the same grid, one thread:
//! SHTns (`shtns.sht(lmax, lmax, 1, sht_orthonormal | SHT_NO_CS_PHASE,
//! nthreads=1)`, `set_grid(ntheta, nphi, sht_gauss, polar_opt)`, its native
//! layout, `SH_to_spat`/`spat_to_SH` and `SHsphtor_to_spat`/`spat_to_SHsphtor`;
//! `polar_opt` defaults to SHTns's own 1e-10, which drops values below that
//! near the poles, where ours and ducc0 keep everything above 2^-280 and
//! about 1e-30) and ducc0 (`sht.experimental.synthesis_2d`/`analysis_2d`,
//! `geometry="GL"`, spin 0 and spin 1, `nthreads=1`). A package that is
//! missing is installed with `python3 -m pip install` (SHTns builds from
//! source and needs FFTW, e.g. `apt-get install libfftw3-dev`); one that
//! cannot be is skipped with a message.
//!
//! Every case repeats until it has run 0.4 s and at least 5 times, after a
//! warm-up, in each of `--rounds` (default 3) interleaved rounds of ours,
//! ducc0 and SHTns; the table shows the best repeat of the best round (the
//! JSON also has that round's median).
//! The ratio is ours over the faster reference: each round's best against
//! the same round's, the median over the rounds with its spread; the goal
//! is met where every round is within it, undecided where the spread
//! crosses it. The CPU, its family and the ISA path head the table.

use crate::bench::fft::Verdict;
use crate::util;
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Options of `cargo xtask bench sht`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Truncations, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "63,127,255,511")]
    pub lmax: Vec<usize>,
    /// Output directory (default target/bench/sht).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip SHTns and ducc0.
    #[arg(long)]
    pub no_refs: bool,
    /// SHTns's polar optimisation threshold (its default is 1e-10; 0 keeps
    /// every value).
    #[arg(long, default_value_t = 1e-10)]
    pub polar_opt: f64,
    /// Our opt-in polar threshold (`Sht::set_polar_threshold`; default 0,
    /// off); pass the same value as `--polar-opt` to compare like with like.
    #[arg(long, default_value_t = 0.0)]
    pub ours_polar: f64,
    /// Rounds of (ours, ducc0, SHTns), interleaved; each case keeps its best
    /// round, so a busy moment of the machine hits every library alike.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
}

/// The goal: at or below the faster reference (SHTns or ducc0), one core.
/// (It was 1.5 while the transforms were first built.)
pub const GOAL_RATIO: f64 = 1.0;

const PY: &str = r#"
import sys, time, json
import numpy as np

def timeit(synth, anal):
    synth(); anal()
    ts, ta = [], []
    t_start = time.perf_counter()
    while len(ts) < 5 or time.perf_counter() - t_start < 0.4:
        t0 = time.perf_counter(); synth(); t1 = time.perf_counter(); anal(); t2 = time.perf_counter()
        ts.append(t1 - t0); ta.append(t2 - t1)
    sums = sorted(a + b for a, b in zip(ts, ta))
    return {"synth_best_s": min(ts), "anal_best_s": min(ta), "sum_best_s": sums[0],
            "sum_median_s": sums[len(sums) // 2], "reps": len(sums)}

def coeffs(rng, n, lmax, tangent):
    a = (rng.random(n) - 0.5) + 1j * (rng.random(n) - 0.5)
    a[:lmax + 1] = a[:lmax + 1].real
    if tangent:
        a[0] = 0
    return a.astype(np.complex128)

def ducc(lmax, nt, nphi):
    import ducc0
    sht = ducc0.sht.experimental
    nalm = (lmax + 1) * (lmax + 2) // 2
    rng = np.random.default_rng(1)
    alm = coeffs(rng, nalm, lmax, False).reshape(1, nalm)
    m = np.empty((1, nt, nphi))
    def s(): sht.synthesis_2d(alm=alm, spin=0, lmax=lmax, geometry="GL", ntheta=nt, nphi=nphi, nthreads=1, map=m)
    def a(): sht.analysis_2d(map=m, spin=0, lmax=lmax, geometry="GL", nthreads=1, alm=alm)
    out = {"scalar": timeit(s, a)}
    alm2 = np.stack([coeffs(rng, nalm, lmax, True), coeffs(rng, nalm, lmax, True)])
    m2 = np.empty((2, nt, nphi))
    def s2(): sht.synthesis_2d(alm=alm2, spin=1, lmax=lmax, geometry="GL", ntheta=nt, nphi=nphi, nthreads=1, map=m2)
    def a2(): sht.analysis_2d(map=m2, spin=1, lmax=lmax, geometry="GL", nthreads=1, alm=alm2)
    out["vector"] = timeit(s2, a2)
    out["version"] = ducc0.__version__
    return out

def shtns_ref(lmax, nt, nphi, polar_opt):
    import shtns
    sh = shtns.sht(lmax, lmax, 1, shtns.sht_orthonormal | shtns.SHT_NO_CS_PHASE, nthreads=1)
    sh.set_grid(nt, nphi, shtns.sht_gauss, polar_opt)
    rng = np.random.default_rng(2)
    ylm = coeffs(rng, sh.nlm, lmax, False)
    x = sh.spat_array()
    def s(): sh.SH_to_spat(ylm, x)
    def a(): sh.spat_to_SH(x, ylm)
    out = {"scalar": timeit(s, a)}
    slm, tlm = coeffs(rng, sh.nlm, lmax, True), coeffs(rng, sh.nlm, lmax, True)
    vt, vp = sh.spat_array(), sh.spat_array()
    def s2(): sh.SHsphtor_to_spat(slm, tlm, vt, vp)
    def a2(): sh.spat_to_SHsphtor(vt, vp, slm, tlm)
    out["vector"] = timeit(s2, a2)
    out["version"] = shtns.__version__
    out["polar_opt"] = polar_opt
    return out

which, polar_opt = sys.argv[1], float(sys.argv[2])
for lmax in map(int, sys.argv[3:]):
    nt = 3 * (lmax + 1) // 2; nphi = 2 * nt
    r = ducc(lmax, nt, nphi) if which == "ducc0" else shtns_ref(lmax, nt, nphi, polar_opt)
    r["lmax"] = lmax
    print(json.dumps(r), flush=True)
"#;

/// Whether `python3` can import `module`.
fn importable(module: &str) -> bool {
    Command::new("python3")
        .args(["-c", &format!("import numpy, {module}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Installs `package` with pip if it cannot be imported; `Err` says why not.
fn ensure(package: &str) -> std::result::Result<(), String> {
    if importable(package) {
        return Ok(());
    }
    eprintln!("$ python3 -m pip install --quiet {package}");
    let ok = Command::new("python3")
        .args(["-m", "pip", "install", "--quiet", package])
        .status()
        .is_ok_and(|s| s.success());
    if ok && importable(package) {
        Ok(())
    } else {
        let hint = if package == "shtns" {
            " (SHTns builds from source and needs FFTW: apt-get install libfftw3-dev)"
        } else {
            ""
        };
        Err(format!(
            "{package} is not installed and `python3 -m pip install {package}` failed{hint}"
        ))
    }
}

/// One reference for all `lmax`, by `lmax`; or why it was skipped.
fn reference(which: &str, args: &Args) -> std::result::Result<Vec<Value>, String> {
    ensure(which)?;
    let mut cmd = Command::new("python3");
    cmd.args(["-c", PY, which, &args.polar_opt.to_string()])
        .args(args.lmax.iter().map(|l| l.to_string()))
        .env("OMP_NUM_THREADS", "1");
    let out = util::run_captured(cmd, Duration::from_secs(1800)).map_err(|e| e.to_string())?;
    if !out.success() {
        return Err(format!(
            "the {which} run failed ({}): {}",
            out.status_text(),
            util::tail(&out.stderr, 5)
        ));
    }
    let rows: Vec<Value> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(serde_json::from_str)
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| format!("bad {which} output: {e}"))?;
    if rows.len() != args.lmax.len() {
        return Err(format!(
            "{which} gave {} of {} sizes",
            rows.len(),
            args.lmax.len()
        ));
    }
    Ok(rows)
}

/// Ours, from the crate benchmark.
fn ours(args: &Args, json_path: &std::path::Path) -> Result<Vec<Value>> {
    let list: Vec<String> = args.lmax.iter().map(|l| l.to_string()).collect();
    let mut cmd = util::cargo();
    cmd.args([
        "bench",
        "-p",
        "parnum-sht",
        "--bench",
        "sht",
        "--",
        "--lmax",
    ])
    .arg(list.join(","))
    .arg("--json")
    .arg(json_path)
    .arg("--polar")
    .arg(args.ours_polar.to_string());
    eprintln!(
        "$ cargo bench -p parnum-sht --bench sht -- --lmax {} --json {} --polar {}",
        list.join(","),
        json_path.display(),
        args.ours_polar
    );
    let status = cmd
        .status()
        .context("cannot run cargo bench -p parnum-sht")?;
    if !status.success() {
        bail!("cargo bench -p parnum-sht --bench sht failed with {status}");
    }
    let text = std::fs::read_to_string(json_path)
        .with_context(|| format!("cannot read {}", json_path.display()))?;
    let rows: Vec<Value> = serde_json::from_str(&text).context("bad JSON from the sht bench")?;
    if rows.len() != args.lmax.len() {
        bail!(
            "the sht bench gave {} of {} sizes",
            rows.len(),
            args.lmax.len()
        );
    }
    Ok(rows)
}

/// Row by row and kind by kind (`scalar`, `vector`), the entry of `a` or
/// `b` with the smaller best time.
fn keep_best(a: Vec<Value>, b: Vec<Value>) -> Vec<Value> {
    a.into_iter()
        .zip(b)
        .map(|(mut x, y)| {
            for kind in ["scalar", "vector"] {
                if best(&y, kind).unwrap_or(f64::INFINITY) < best(&x, kind).unwrap_or(f64::INFINITY)
                {
                    x[kind] = y[kind].clone();
                }
            }
            x
        })
        .collect()
}

/// Best synthesis + analysis time (seconds) of `kind` in a row.
fn best(row: &Value, kind: &str) -> Option<f64> {
    row[kind]["sum_best_s"].as_f64()
}

/// `x` in ms, or a dash.
fn ms(x: Option<f64>) -> String {
    x.map_or("-".to_string(), |v| format!("{:.3}", v * 1e3))
}

/// One round's rows: ours, and ducc0's and SHTns's where they ran.
type Round = (Vec<Value>, [Option<Vec<Value>>; 2]);

/// Runs the bench.
pub fn run(args: &Args) -> Result<()> {
    let start = Instant::now();
    if args.lmax.is_empty() {
        bail!("--lmax: give at least one truncation");
    }
    let out_dir = match &args.out {
        Some(d) => d.clone(),
        None => util::target_dir()?.join("bench").join("sht"),
    };
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    // Absolute: the bench binary runs in the crate's folder.
    let out_dir = std::fs::canonicalize(&out_dir)
        .with_context(|| format!("cannot resolve {}", out_dir.display()))?;
    let mut ours_rows: Option<Vec<Value>> = None;
    let mut refs: Vec<(&str, std::result::Result<Vec<Value>, String>)> = vec![
        ("ducc0", Err("not run".into())),
        ("shtns", Err("not run".into())),
    ];
    // Every round's rows, ours and each reference's (None where it did
    // not run), for the per-round ratios.
    let mut per_round: Vec<Round> = vec![];
    for round in 0..args.rounds.max(1) {
        println!("round {} of {}", round + 1, args.rounds.max(1));
        let o = ours(args, &out_dir.join("ours.json"))?;
        let mut this_round = (o.clone(), [None, None]);
        ours_rows = Some(match ours_rows {
            None => o,
            Some(prev) => keep_best(prev, o),
        });
        for (k, which) in ["ducc0", "shtns"].into_iter().enumerate() {
            if args.no_refs {
                refs[k].1 = Err("--no-refs".to_string());
                continue;
            }
            // A reference that failed once is not tried again.
            if round > 0 && refs[k].1.is_err() {
                continue;
            }
            let r = reference(which, args);
            this_round.1[k] = r.as_ref().ok().cloned();
            refs[k].1 = match (std::mem::replace(&mut refs[k].1, Err(String::new())), r) {
                (Ok(prev), Ok(new)) => Ok(keep_best(prev, new)),
                (_, r) => r,
            };
            if let Err(why) = &refs[k].1 {
                println!("{which} skipped: {why}");
            }
        }
        per_round.push(this_round);
    }
    let ours = ours_rows.context("no rounds")?;
    let reference_row =
        |k: usize, i: usize| -> Option<&Value> { refs[k].1.as_ref().ok().map(|v| &v[i]) };

    println!(
        "\nsht: CPU {} ({}), ISA path {}",
        util::cpu_model(),
        simd::peak::CpuFamily::detect().name,
        simd::Isa::detect()
    );
    println!(
        "synthesis + analysis of one field (radial level), one core, grid ntheta = 3(lmax+1)/2, nphi = 2 ntheta;"
    );
    println!("best of the repeats in ms; ratio = ours / faster reference, each round's best against the same round's, the median over the rounds (spread: min-max); goal <= {GOAL_RATIO}: met where every round is within it, undecided where the spread crosses it");
    println!(
        "{:>5} {:>5} {:>5} | {:>8} {:>8} {:>8} {:>6} {:>9} {:>9} | {:>8} {:>8} {:>8} {:>6} {:>9} {:>9}",
        "lmax",
        "nth",
        "nphi",
        "scalar",
        "ducc0",
        "SHTns",
        "ratio",
        "spread",
        "goal",
        "vector",
        "ducc0",
        "SHTns",
        "ratio",
        "spread",
        "goal"
    );
    let mut table = Vec::new();
    for (i, row) in ours.iter().enumerate() {
        let lmax = row["lmax"].as_u64().unwrap_or(0);
        let mut entry = json!({
            "lmax": lmax,
            "ntheta": row["ntheta"],
            "nphi": row["nphi"],
            "ours": { "scalar": row["scalar"], "vector": row["vector"], "scalar_steps": row["scalar_steps"] },
        });
        let mut line = format!(
            "{:>5} {:>5} {:>5}",
            lmax,
            row["ntheta"].as_u64().unwrap_or(0),
            row["nphi"].as_u64().unwrap_or(0)
        );
        for kind in ["scalar", "vector"] {
            let o = best(row, kind);
            let d = reference_row(0, i).and_then(|r| best(r, kind));
            let s = reference_row(1, i).and_then(|r| best(r, kind));
            let faster = match (d, s) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            // Each round: ours against the faster reference of that round.
            let rounds: Vec<f64> = per_round
                .iter()
                .filter_map(|(o, r)| {
                    let f = r
                        .iter()
                        .filter_map(|rows| rows.as_ref().and_then(|v| best(&v[i], kind)))
                        .reduce(f64::min)?;
                    Some(best(&o[i], kind)? / f)
                })
                .collect();
            let v = Verdict::of(&rounds, GOAL_RATIO);
            let ratio = (!rounds.is_empty()).then_some(v.median);
            line += &format!(
                " | {:>8} {:>8} {:>8} {:>6} {:>9} {:>9}",
                ms(o),
                ms(d),
                ms(s),
                ratio.map_or("-".to_string(), |r| format!("{r:.2}")),
                if rounds.is_empty() {
                    "-".to_string()
                } else {
                    format!("{:.2}-{:.2}", v.min, v.max)
                },
                v.word
            );
            entry[kind] = json!({
                "ours_best_s": o,
                "ducc0_best_s": d,
                "shtns_best_s": s,
                "ratio_to_faster": ratio,
                "round_ratios": rounds,
                "best_ratio": o.zip(faster).map(|(o, f)| o / f),
                "goal": v.word,
            });
        }
        for (k, (which, _)) in refs.iter().enumerate() {
            if let Some(r) = reference_row(k, i) {
                entry[*which] = r.clone();
            }
        }
        println!("{line}");
        table.push(entry);
    }
    // Where our scalar time goes (the four steps timed alone, last round),
    // and the Legendre steps' nominal rate against this core's FMA peak.
    let peak = simd::peak::fma_peak(4_000_000, 5);
    // A rate above a plausible peak gets no percentage (`FmaPeak::percent`):
    // the count is nominal (the pair recurrence runs 6 of the 7 flops
    // counted, and the skipped polar values are counted).
    println!(
        "\nours, scalar steps timed alone: Legendre / phi FFT shares; Legendre GFLOP/s (nominal 7 flops per (l, m) and latitude pair) and % of the FMA peak ({:.1} GFLOP/s; {})",
        peak.gflops,
        peak.summary()
    );
    for row in &ours {
        let st = &row["scalar_steps"];
        let get = |k: &str| st[k].as_f64();
        if let (Some(ls), Some(ps), Some(pa), Some(la), Some(fl)) = (
            get("legendre_synth_s"),
            get("phi_synth_s"),
            get("phi_anal_s"),
            get("legendre_anal_s"),
            get("legendre_nominal_flops"),
        ) {
            let (leg, phi) = (ls + la, ps + pa);
            let (gs, ga) = (fl / ls / 1e9, fl / la / 1e9);
            println!(
                "{:>5} | Legendre {:>5.1} %  phi {:>5.1} % | synth {:>6.2} GF/s ({:>6})  anal {:>6.2} GF/s ({:>6})",
                row["lmax"].as_u64().unwrap_or(0),
                100.0 * leg / (leg + phi),
                100.0 * phi / (leg + phi),
                gs,
                peak.percent(gs),
                ga,
                peak.percent(ga)
            );
        }
    }
    let skipped: Vec<Value> = refs
        .iter()
        .filter_map(|(w, r)| {
            r.as_ref()
                .err()
                .map(|e| json!({ "reference": w, "why": e }))
        })
        .collect();
    let report = json!({
        "grid": "Gauss-Legendre, ntheta = 3(lmax+1)/2, nphi = 2 ntheta, one field",
        "threads": 1,
        "timing": "synthesis + analysis, best of >= 5 repeats and >= 0.4 s after a warm-up, in interleaved rounds; times: the best round (that round's median also kept); ratio_to_faster: the median over the rounds of ours / the faster reference of the same round, goal met where every round is within it, not met where none is, else undecided",
        "cpu": util::cpu_model(),
        "cpu_family": simd::peak::CpuFamily::detect().name,
        "isa": simd::Isa::detect().name(),
        "rounds": args.rounds.max(1),
        "shtns_polar_opt": args.polar_opt,
        "ours_polar": args.ours_polar,
        "goal_ratio": GOAL_RATIO,
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "fma_peak_gflops": peak.gflops,
        "fma_peak_check": peak.summary(),
        "rows": table,
        "skipped": skipped,
        "seconds": start.elapsed().as_secs_f64(),
    });
    let path = out_dir.join("sht.json");
    util::write_report(&path, &report, &[], start)?;
    Ok(())
}
