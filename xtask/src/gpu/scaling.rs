//! `cargo xtask bench gpu-scaling`: heat3d and pfc over several GPUs, one
//! rank per GPU, as in-process ranks (one thread per GPU, rank r on device
//! r) and under `mpirun` (one process per GPU); the halo and the FFT's
//! reshapes go device to device between the GPUs of one node
//! (`gpu::links`: peer copies in one process, CUDA IPC between processes),
//! or, with `--exchange nccl`, through NCCL (`gpu::nccl`), or through host
//! buffers with `--exchange staged`.
//!
//! Series (each a table row set, a JSON record and a PNG):
//!
//! - `fd-weak`: FD-2 (and 4, 8, 20) with a fixed block per GPU (256^3 and
//!   512^3), blocking and overlapped: the step time and the weak
//!   efficiency t(1) / t(G).
//!   Every FD run advances one step a pass (`--steps-per-pass 1`):
//!   one GPU alone could pass two Euler steps at a time, several cannot,
//!   so the efficiencies compare the same kernels.
//! - `fd-strong`: FD-2 on a fixed 1024^3 grid: the step time, the speedup
//!   t(1) / t(G) and the efficiency t(1) / (G t(G)); every GPU count must
//!   give the field hash of one GPU (the bits do not depend on the split).
//! - `spectral-weak`: the spectral step (exact factor) with 512^3 per GPU,
//!   and once on a grid no rank count divides evenly (the layout chosen
//!   to need the fewest reshapes); sines, so every run is checked against
//!   the analytic solution.
//! - `pfc-weak`: pfc with 512^3 per GPU (64 lattice periods of 8 points
//!   per GPU and axis), its weak efficiency.
//!
//! The GPU counts run are those of `--gpus` up to the devices present;
//! `--share` runs the counts past it with ranks sharing the GPUs (rank r
//! on device r mod count), which measures the code paths, not scaling.

use crate::gpu::{bins, heat3d, heat3d_mpi, pfc_on, probe, words, Bins};
use crate::util::mpirun_available;
use anyhow::{bail, Context, Result};
use appkit::plot::{Chart, Series};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Options of `cargo xtask bench gpu-scaling`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Run from the binaries staged in DIR (see `cargo xtask gpu --stage`).
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// Folder for the results (`gpu-scaling.json`, `.md`, one PNG per
    /// series); default: the scratch folder.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// GPU counts (default 1, 2, 4, 8, up to the devices present).
    #[arg(long, value_delimiter = ',')]
    pub gpus: Vec<usize>,
    /// Also run the counts past the devices present, ranks sharing GPUs.
    #[arg(long)]
    pub share: bool,
    /// How ranks are started: `local` (threads of one process), `mpi`
    /// (mpirun, one process per rank). Default: both (`mpi` where mpirun
    /// is found).
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(["local", "mpi"]))]
    pub launch: Vec<String>,
    /// The series (comma-separated): fd-weak, fd-strong, spectral-weak,
    /// pfc-weak. Default: all.
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(["fd-weak", "fd-strong", "spectral-weak", "pfc-weak"]))]
    pub series: Vec<String>,
    /// Halved blocks per GPU (128^3 and 256^3, the strong grid 512^3), FD-2
    /// only, fewer steps.
    #[arg(long)]
    pub quick: bool,
    /// How the halo and the reshapes travel between GPUs (heat3d's and
    /// pfc's `--gpu-exchange`): `auto` (device to device on one node),
    /// `staged` (through host buffers) or `nccl` (one GPU per rank: not
    /// with `--share`).
    #[arg(long, default_value = "auto", value_parser = clap::builder::PossibleValuesParser::new(["auto", "staged", "nccl"]))]
    pub exchange: String,
}

/// One measured run.
#[derive(Debug, Clone, serde::Serialize)]
struct Run {
    series: String,
    case: String,
    launch: String,
    gpus: usize,
    /// Devices the ranks ran on (less than `gpus` when sharing).
    devices: usize,
    cells: [usize; 3],
    ms: f64,
    /// t(1) / t(G) (weak), or t(1) / (G t(G)) (strong).
    efficiency: f64,
    /// heat3d's field hash, or the maximum error against the analytic
    /// solution (spectral), or pfc's free energy.
    check: String,
}

/// A balanced process grid of `g` ranks: prime factors, largest first,
/// each onto the axis with the fewest ranks so far (ties to the slowest),
/// so 2 = 2x1x1, 4 = 2x2x1, 8 = 2x2x2, 6 = 3x2x1.
fn grid_of(g: usize) -> [usize; 3] {
    let mut f = Vec::new();
    let (mut n, mut p) = (g, 2);
    while n > 1 {
        while n % p == 0 {
            f.push(p);
            n /= p;
        }
        p += 1;
    }
    let mut d = [1usize; 3];
    for p in f.into_iter().rev() {
        let k = (0..3).min_by_key(|&k| (d[k], k)).unwrap_or(0);
        d[k] *= p;
    }
    d
}

fn triple(a: [usize; 3]) -> String {
    format!("{}x{}x{}", a[0], a[1], a[2])
}

/// The devices present: `copy_bandwidth` reports the count.
fn device_count(b: &Bins) -> Result<usize> {
    let p = probe(&b.copy, &["64", "3"])?;
    Ok(p.devices.max(1))
}

/// `cargo xtask bench gpu-scaling`.
pub fn bench(a: &Args) -> Result<()> {
    let start = Instant::now();
    let b = bins(a.bin_dir.as_deref())?;
    let out = match &a.out {
        Some(d) => d.clone(),
        None => b.scratch.clone(),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let devices = device_count(&b)?;
    let wanted = if a.gpus.is_empty() {
        vec![1, 2, 4, 8]
    } else {
        a.gpus.clone()
    };
    if let Some(&bad) = wanted.iter().find(|&&g| g == 0) {
        bail!("--gpus {bad}: a GPU count is at least 1");
    }
    let counts: Vec<usize> = wanted
        .iter()
        .copied()
        .filter(|&g| g <= devices || a.share)
        .collect();
    let left: Vec<usize> = wanted
        .iter()
        .copied()
        .filter(|g| !counts.contains(g))
        .collect();
    if !left.is_empty() {
        println!(
            "skipped: {left:?} GPUs ({devices} device(s) present; --share runs them with \
             ranks sharing GPUs)"
        );
    }
    if !counts.contains(&1) {
        bail!("the efficiencies need the one-GPU run: put 1 in --gpus");
    }
    if a.exchange == "nccl" {
        if let Some(g) = counts.iter().find(|&&g| g > devices) {
            bail!(
                "--exchange nccl needs one GPU per rank, and {g} ranks would share the {devices} \
                 device(s) present (drop --share, or use --exchange auto or staged)"
            );
        }
    }
    let mpi = mpirun_available();
    let launches: Vec<&str> = if a.launch.is_empty() {
        if mpi {
            vec!["local", "mpi"]
        } else {
            println!("skipped: the mpirun runs (no mpirun)");
            vec!["local"]
        }
    } else {
        a.launch.iter().map(String::as_str).collect()
    };
    if launches.contains(&"mpi") && !mpi {
        bail!("--launch mpi: no mpirun on this machine");
    }
    let part = |s: &str| a.series.is_empty() || a.series.iter().any(|x| x == s);
    let steps = if a.quick { 40 } else { 100 };
    let cfg = b.scratch.join("scaling.toml");
    std::fs::write(&cfg, format!("diag_every = {steps}\nwarmup = 5\n"))?;
    println!(
        "{devices} device(s); GPU counts {counts:?}; launch {}; exchange {}",
        launches.join(", "),
        a.exchange
    );
    let mut runs: Vec<Run> = Vec::new();
    // heat3d on g ranks, one per GPU (rank r on device r mod count).
    let run_heat = |launch: &str, g: usize, extra: &str| -> Result<crate::gpu::Report> {
        let args = words(&format!(
            "--config {} --steps {steps} --backend cuda --gpu-exchange {} --grid {} {extra}",
            cfg.display(),
            a.exchange,
            triple(grid_of(g))
        ));
        let r = if launch == "mpi" {
            heat3d_mpi(&b, "scaling", g, &args, 600)
        } else {
            heat3d(
                &b,
                "scaling",
                &[args, words(&format!("--ranks {g}"))].concat(),
                600,
            )
        };
        r.result
            .map_err(|e| anyhow::anyhow!("heat3d {extra} on {g} GPU(s), {launch}: {e}"))
    };
    // Prints and keeps one run; the efficiencies follow from the series'
    // one-GPU runs once every run is in (`efficiencies`).
    let add = |runs: &mut Vec<Run>,
               (series, case, launch): (&str, &str, &str),
               g: usize,
               cells: [usize; 3],
               ms: f64,
               check: String| {
        println!(
            "  {series:<14} {case:<26} {launch:<5} {g:>2} GPU(s) {:>14}  {ms:>9.4} ms  {check}",
            triple(cells)
        );
        runs.push(Run {
            series: series.into(),
            case: case.into(),
            launch: launch.into(),
            gpus: g,
            devices: g.min(devices),
            cells,
            ms,
            efficiency: f64::NAN,
            check,
        });
    };
    for &launch in &launches {
        if part("fd-weak") {
            let blocks: &[usize] = if a.quick { &[128, 256] } else { &[256, 512] };
            let orders: &[usize] = if a.quick { &[2] } else { &[2, 4, 8, 20] };
            for &n in blocks {
                for &o in orders {
                    for mode in ["blocking", "overlap"] {
                        let case = format!("fd{o} {n}^3/GPU {mode}");
                        for &g in &counts {
                            let d = grid_of(g);
                            let cells = d.map(|x| x * n);
                            let r = run_heat(
                                launch,
                                g,
                                &format!(
                                    "--order {o} --mode {mode} --steps-per-pass 1 --n {}",
                                    triple(cells)
                                ),
                            )?;
                            add(
                                &mut runs,
                                ("fd-weak", &case, launch),
                                g,
                                cells,
                                r.timings.step * 1e3,
                                format!("hash {} ({} halo)", r.hash_hex, r.halo),
                            );
                        }
                    }
                }
            }
        }
        if part("fd-strong") {
            let n = if a.quick { 512 } else { 1024 };
            for mode in ["blocking", "overlap"] {
                let case = format!("fd2 {n}^3 {mode}");
                let mut h1 = String::new();
                for &g in &counts {
                    let r = run_heat(
                        launch,
                        g,
                        &format!("--order 2 --mode {mode} --steps-per-pass 1 --n {n}"),
                    )?;
                    if g == 1 {
                        h1 = r.hash_hex.clone();
                    }
                    if r.hash_hex != h1 {
                        bail!(
                            "{case} on {g} GPU(s), {launch}: field hash {} differs from one \
                             GPU's {h1}",
                            r.hash_hex
                        );
                    }
                    add(
                        &mut runs,
                        ("fd-strong", &case, launch),
                        g,
                        [n; 3],
                        r.timings.step * 1e3,
                        format!("hash {} = 1 GPU's", r.hash_hex),
                    );
                }
            }
        }
        if part("spectral-weak") {
            let n = if a.quick { 256 } else { 512 };
            for uneven in [false, true] {
                let case = if uneven {
                    format!("spectral ~{n}^3/GPU, uneven")
                } else {
                    format!("spectral {n}^3/GPU")
                };
                for &g in &counts {
                    let d = grid_of(g);
                    // Uneven: one cell more along the first axis and one
                    // less along the last, so no split divides both.
                    let cells = if uneven {
                        [d[0] * n + 1, d[1] * n, d[2] * n - 1]
                    } else {
                        d.map(|x| x * n)
                    };
                    let r = run_heat(
                        launch,
                        g,
                        &format!(
                            "--operator spectral --spectral-step exact --initial sines --n {}",
                            triple(cells)
                        ),
                    )?;
                    // The exact integrating factor keeps sines at the
                    // analytic solution to rounding (as the suite checks).
                    if r.last.max_error.is_nan() || r.last.max_error >= 1e-10 {
                        bail!(
                            "{case} on {g} GPU(s), {launch}: max error {:e} against the analytic \
                             solution (expected rounding, below 1e-10)",
                            r.last.max_error
                        );
                    }
                    add(
                        &mut runs,
                        ("spectral-weak", &case, launch),
                        g,
                        cells,
                        r.timings.step * 1e3,
                        format!("max error {:.2e}", r.last.max_error),
                    );
                }
            }
        }
        if part("pfc-weak") {
            let periods = if a.quick { 32 } else { 64 };
            let case = format!("pfc {}^3/GPU", periods * 8);
            for &g in &counts {
                let d = grid_of(g);
                let p = d.map(|x| x * periods);
                let mut args = words(&format!(
                    "--periods {} --points-per-period 8 --steps {steps} --diag-every {steps} \
                     --backend cuda --gpu-exchange {}",
                    triple(p),
                    a.exchange
                ));
                let np = if launch == "mpi" {
                    Some(g)
                } else {
                    args.extend(words(&format!("--ranks {g}")));
                    None
                };
                let r = pfc_on(&b, "scaling-pfc", np, &args, 600)
                    .result
                    .map_err(|e| anyhow::anyhow!("{case} on {g} GPU(s), {launch}: {e}"))?;
                add(
                    &mut runs,
                    ("pfc-weak", &case, launch),
                    g,
                    p.map(|x| x * 8),
                    r.median_step * 1e3,
                    format!("free energy {:.6e}", r.last.free_energy),
                );
            }
        }
    }
    efficiencies(&mut runs);
    write(&out, devices, &a.exchange, &runs)?;
    println!(
        "gpu-scaling: {} runs in {:.0} s; results in {}",
        runs.len(),
        start.elapsed().as_secs_f64(),
        out.display()
    );
    Ok(())
}

/// Each run's efficiency against the one-GPU run of its series, case and
/// launch: t(1) / t(G) for weak scaling, t(1) / (G t(G)) for strong
/// (`fd-strong`).
fn efficiencies(runs: &mut [Run]) {
    let one: Vec<(String, String, String, f64)> = runs
        .iter()
        .filter(|r| r.gpus == 1)
        .map(|r| (r.series.clone(), r.case.clone(), r.launch.clone(), r.ms))
        .collect();
    for r in runs.iter_mut() {
        let t1 = one
            .iter()
            .find(|o| o.0 == r.series && o.1 == r.case && o.2 == r.launch)
            .map_or(f64::NAN, |o| o.3);
        let per = if r.series == "fd-strong" {
            r.gpus as f64
        } else {
            1.0
        };
        r.efficiency = t1 / (per * r.ms);
    }
}

/// The table (`gpu-scaling.md`), the JSON and one PNG per series:
/// efficiency against GPU count, a line per case and launch.
fn write(out: &Path, devices: usize, exchange: &str, runs: &[Run]) -> Result<()> {
    let mut md = format!(
        "{devices} device(s), exchange {exchange}. Efficiency: weak t(1)/t(G), strong \
         t(1)/(G t(G)).\n\n\
         | series | case | launch | GPUs | devices | cells | ms/step | efficiency | check |\n\
         |---|---|---|---|---|---|---|---|---|\n"
    );
    for r in runs {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.4} | {:.3} | {} |\n",
            r.series,
            r.case,
            r.launch,
            r.gpus,
            r.devices,
            triple(r.cells),
            r.ms,
            r.efficiency,
            r.check
        ));
    }
    println!("\n{md}");
    std::fs::write(out.join("gpu-scaling.md"), &md)?;
    std::fs::write(
        out.join("gpu-scaling.json"),
        serde_json::to_string_pretty(
            &serde_json::json!({ "devices": devices, "exchange": exchange, "runs": runs }),
        )?,
    )?;
    let mut names: Vec<&str> = runs.iter().map(|r| r.series.as_str()).collect();
    names.dedup();
    for s in names {
        let mut lines: Vec<(String, Vec<f64>, Vec<f64>)> = Vec::new();
        for r in runs.iter().filter(|r| r.series == s) {
            let name = format!("{} ({})", r.case, r.launch);
            match lines.iter_mut().find(|l| l.0 == name) {
                Some(l) => {
                    l.1.push(r.gpus as f64);
                    l.2.push(r.efficiency);
                }
                None => lines.push((name, vec![r.gpus as f64], vec![r.efficiency])),
            }
        }
        let series: Vec<Series<'_>> = lines.iter().map(|(n, x, y)| Series::new(n, x, y)).collect();
        let path = out.join(format!("gpu-scaling-{s}.png"));
        Chart::new(
            format!("{s}: efficiency ({devices} device(s))"),
            "GPUs",
            "efficiency",
        )
        .write(&path, &series)
        .with_context(|| format!("cannot draw {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{efficiencies, grid_of, Run};

    #[test]
    fn efficiencies_follow_from_the_one_gpu_runs() {
        let run = |series: &str, launch: &str, gpus: usize, ms: f64| Run {
            series: series.into(),
            case: "c".into(),
            launch: launch.into(),
            gpus,
            devices: gpus,
            cells: [1; 3],
            ms,
            efficiency: f64::NAN,
            check: String::new(),
        };
        let mut runs = vec![
            run("fd-weak", "local", 1, 2.0),
            run("fd-weak", "local", 4, 2.5),
            run("fd-strong", "local", 1, 8.0),
            run("fd-strong", "local", 4, 2.5),
            run("fd-weak", "mpi", 2, 1.0),
        ];
        efficiencies(&mut runs);
        let e: Vec<f64> = runs.iter().map(|r| r.efficiency).collect();
        assert_eq!(&e[..4], &[1.0, 0.8, 1.0, 0.8]);
        // No one-GPU run of that launch: no efficiency.
        assert!(e[4].is_nan());
    }

    #[test]
    fn grids_are_balanced() {
        assert_eq!(grid_of(1), [1, 1, 1]);
        assert_eq!(grid_of(2), [2, 1, 1]);
        assert_eq!(grid_of(4), [2, 2, 1]);
        assert_eq!(grid_of(8), [2, 2, 2]);
        assert_eq!(grid_of(6), [3, 2, 1]);
        assert_eq!(grid_of(16), [4, 2, 2]);
        for g in 1..=64 {
            assert_eq!(grid_of(g).iter().product::<usize>(), g);
        }
    }
}
