//! `cargo xtask bench heat3d [--quick] [--out DIR]`: heat3d's performance
//! in four parts, each printed as a table as it finishes, then written to
//! `DIR/heat3d.json` (everything) and `DIR/heat3d.png` (the plot, see
//! [`crate::plot`]). `DIR` defaults to `target/bench/heat3d`.
//!
//! 1. **Weak scaling**: a fixed brick per rank (128³, or 64³ with
//!    `--quick`), 1, 2 and 4 in-process ranks on grids that stack the
//!    bricks (global size = brick × grid), FD-2, both exchange modes; the
//!    per-phase medians of heat3d's report and the efficiency t(1)/t(P).
//! 2. **Order sweep**: orders 2, 4, ..., 20 on one rank at 256³ (128³
//!    quick), blocking mode (heat3d's default steps a pass on one rank; the
//!    weak-scaling runs pass one step at a time, so that every rank count
//!    runs the same sweep). Around each run, measured by this process half
//!    just before and half just after it,
//!    the copy floor ([`crate::stream`]): the faster of the library copy
//!    and a non-temporal copy of one f64 array of the padded size
//!    ((n + order)³ values) into another. The ratio step/floor is how far
//!    the step is from the memory-bandwidth bound; the project's goal is
//!    FD-2 at 256³ within 1.15×. STREAM's scale loop over the same arrays
//!    is printed beside it (it is slower than the floor, so a ratio against
//!    it would flatter the stencil). Each order's sweep rate in GFLOP/s
//!    (`1 + 9 order/2` flops per cell, over the `interior` phase) is set
//!    against the core's FMA peak, measured in the same run by a loop of
//!    independent FMA chains on the widest vectors the CPU has
//!    ([`stencil::peak`]; the best pass, before and after the
//!    sweep), whose reading is checked against the CPU family's documented
//!    flops per cycle; a rate above the peak is printed as such (`>peak`),
//!    never as a share above 100 %. The sweep may not fuse its multiplies
//!    and adds (its bits must match the device kernel's), so half of that
//!    peak is its ceiling.
//! 3. **Steps a pass**: one rank, blocking, at the sweep size, orders 2,
//!    4, 6 and 8, each run with 1, 2 and 4 steps a pass (`--steps-per-pass`),
//!    two interleaved rounds, the best kept: ms a step, the speed-up over
//!    one step a pass and the best against the copy floor measured around
//!    the runs of that order. The runs of an order must give the same
//!    field hash, or the bench fails.
//! 4. **Blocking vs overlap** at 2 and 4 ranks, from the weak-scaling runs:
//!    step time and exposed wait (the `wait` phase) per mode.
//!
//! Every heat3d run uses `--warmup` steps left out of the statistics, and
//! heat3d reports the median over the timed steps of the slowest rank.
//! Runs are sequential: the machine has 2 cores, so the 4-rank runs already
//! oversubscribe it (their efficiency says so).

use crate::stream::{self, Stream};
use crate::util::{self, HeatReport, Timings};
use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use stencil::peak::{self, fma_peak, term_rates, FmaPeak};

/// Options of `cargo xtask bench heat3d`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Smaller sizes (64³ bricks, 128³ sweep) for a run under a minute.
    #[arg(long)]
    pub quick: bool,
    /// Output folder for heat3d.json and heat3d.png
    /// [default: target/bench/heat3d].
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Sizes and step counts of one bench.
#[derive(Debug, Clone, Copy, Serialize)]
struct Plan {
    /// Cells per axis of each rank's brick (weak scaling).
    brick: usize,
    /// Steps and warm-up steps of the weak-scaling runs.
    weak_steps: usize,
    weak_warmup: usize,
    /// Cells per axis of the order sweep.
    sweep_n: usize,
    /// Steps and warm-up steps of the order sweep runs.
    sweep_steps: usize,
    sweep_warmup: usize,
    /// Timed passes of the stream kernel.
    stream_reps: usize,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Plan {
                brick: 64,
                weak_steps: 200,
                weak_warmup: 20,
                sweep_n: 128,
                sweep_steps: 40,
                sweep_warmup: 5,
                stream_reps: 21,
            }
        } else {
            Plan {
                brick: 128,
                weak_steps: 120,
                weak_warmup: 10,
                sweep_n: 256,
                sweep_steps: 24,
                sweep_warmup: 4,
                stream_reps: 21,
            }
        }
    }
}

/// Rank counts and grids of the weak-scaling runs.
pub const WEAK: [(usize, [usize; 3]); 3] = [(1, [1, 1, 1]), (2, [2, 1, 1]), (4, [2, 2, 1])];
/// Orders of the sweep.
pub const ORDERS: [usize; 10] = [2, 4, 6, 8, 10, 12, 14, 16, 18, 20];
/// FMAs per chain of one pass of the FMA peak loop.
const PEAK_ITERS: usize = 4_000_000;
/// Passes of the FMA peak loop (before and after the sweep each).
const PEAK_PASSES: usize = 5;
/// Exchange modes.
pub const MODES: [&str; 2] = ["blocking", "overlap"];
/// The project's goal: FD-2 step within this factor of the copy floor.
pub const GOAL_RATIO: f64 = 1.15;

/// One weak-scaling run.
#[derive(Debug, Clone, Serialize)]
pub struct WeakRun {
    /// Ranks.
    pub ranks: usize,
    /// Process grid.
    pub grid: [usize; 3],
    /// Global cells per axis.
    pub n: [usize; 3],
    /// Exchange mode.
    pub mode: &'static str,
    /// Per-phase medians (seconds).
    pub timings: Timings,
    /// Cell updates per second.
    pub cells_per_second: f64,
    /// Steps in heat3d's statistics.
    pub timed_steps: usize,
    /// t(1) / t(P) for the same mode.
    pub efficiency: f64,
}

/// One order of the sweep with its stream reference.
#[derive(Debug, Clone, Serialize)]
pub struct OrderRun {
    /// Stencil order.
    pub order: usize,
    /// Padded cells per axis (n + order).
    pub padded: usize,
    /// Per-phase medians of the heat3d step (seconds).
    pub timings: Timings,
    /// Cell updates per second.
    pub cells_per_second: f64,
    /// Steps in heat3d's statistics.
    pub timed_steps: usize,
    /// The stream reference over the padded array size.
    pub stream: Stream,
    /// Median step / median stream pass.
    pub ratio: f64,
    /// Stencil sweep alone (`interior` phase) / stream pass.
    pub sweep_ratio: f64,
    /// Flops per cell of the fused sweep (`1 + 9 order/2`).
    pub flops_per_cell: usize,
    /// Sweep rate: cells * flops per cell / `interior` phase, in 1e9/s.
    pub gflops: f64,
    /// `gflops` / the FMA peak measured in the same run; `None` where
    /// `gflops` is above that peak (the probe read low:
    /// [`FmaPeak::share`]).
    pub peak_fraction: Option<f64>,
    /// GFLOP/s of the same operations with their data in the L1 cache
    /// (`stencil::peak::term_rates`, AVX-512 only): the most a
    /// sweep without fused multiply-adds reaches on this core.
    pub l1_terms_gflops: Option<f64>,
    /// The CPU kernel of heat3d's sweeps (its default).
    pub kernel: String,
}

/// One order of the steps-a-pass comparison: the one-rank blocking step
/// at each steps-a-pass count against one step a pass and the copy floor.
#[derive(Debug, Clone, Serialize)]
pub struct PassRow {
    /// Stencil order.
    pub order: usize,
    /// Steps a pass of each column (`--steps-per-pass`).
    pub per_pass: Vec<usize>,
    /// Median step (seconds), the best of the rounds, per column.
    pub step: Vec<f64>,
    /// `step` of one step a pass / `step`, per column.
    pub speedup: Vec<f64>,
    /// The copy floor over the padded array (median pass, measured around
    /// the runs of this order).
    pub floor: f64,
    /// The best `step` / `floor`.
    pub best_ratio: f64,
}

/// Blocking against overlap at one rank count.
#[derive(Debug, Clone, Serialize)]
pub struct OverlapRow {
    /// Ranks.
    pub ranks: usize,
    /// Process grid.
    pub grid: [usize; 3],
    /// Median step, blocking (seconds).
    pub blocking_step: f64,
    /// Exposed wait, blocking (seconds).
    pub blocking_wait: f64,
    /// Median step, overlap (seconds).
    pub overlap_step: f64,
    /// Exposed wait, overlap (seconds).
    pub overlap_wait: f64,
    /// blocking step / overlap step.
    pub speedup: f64,
}

/// One heat3d run: ranks, grid, global size, order, mode and step counts.
#[derive(Debug, Clone, Copy)]
struct Spec<'a> {
    ranks: usize,
    grid: [usize; 3],
    n: [usize; 3],
    order: usize,
    mode: &'a str,
    steps: usize,
    warmup: usize,
    /// Steps a pass (`--steps-per-pass`; 0: heat3d's default).
    per_pass: usize,
}

/// Runs heat3d once (in-process) and reads its report.
fn heat3d(bin: &Path, dir: &Path, spec: Spec<'_>) -> Result<HeatReport> {
    let Spec {
        ranks,
        grid,
        n,
        order,
        mode,
        steps,
        warmup,
        per_pass,
    } = spec;
    let json = dir.join("run.json");
    let _ = std::fs::remove_file(&json);
    let mut cmd = Command::new(bin);
    cmd.args(["--ranks", &ranks.to_string()])
        .args(["--grid", &util::triple(grid)])
        .args(["--n", &util::triple(n)])
        .args(["--order", &order.to_string()])
        .args(["--mode", mode])
        .args(["--integrator", "euler"])
        .args(["--steps", &steps.to_string()])
        .args(["--warmup", &warmup.to_string()])
        .args(["--steps-per-pass", &per_pass.to_string()])
        .args(["--no-vtk", "-q", "--json"])
        .arg(&json);
    let out = util::run_captured(cmd, Duration::from_secs(600))?;
    if !out.success() {
        bail!(
            "heat3d --ranks {ranks} --grid {} --n {} --order {order} --mode {mode} failed: {}\n{}",
            util::triple(grid),
            util::triple(n),
            out.status_text(),
            out.stderr.trim_end()
        );
    }
    util::read_heat3d(&json)
}

/// The `%peak` column's marker of a rate above the probe's peak.
const ABOVE: &str = ">peak";

/// A share of the FMA peak as a percentage (`"42.0%"`), or [`ABOVE`]
/// where the rate was above the probe's peak.
fn percent(share: Option<f64>) -> String {
    share.map_or(ABOVE.to_string(), |f| format!("{:.1}%", 100.0 * f))
}

fn ms(s: f64) -> f64 {
    s * 1e3
}

/// Part 1: weak scaling.
fn weak(bin: &Path, dir: &Path, plan: &Plan) -> Result<Vec<WeakRun>> {
    let b = plan.brick;
    println!(
        "\n== weak scaling: {b}^3 cells per rank, FD-2, {} steps ({} warm-up), median ms per step of the slowest rank",
        plan.weak_steps, plan.weak_warmup
    );
    println!(
        "{:>5} {:<7} {:<13} {:<8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>10} {:>6}",
        "ranks",
        "grid",
        "n",
        "mode",
        "post",
        "interior",
        "wait",
        "shell",
        "update",
        "step",
        "Mcells/s",
        "eff"
    );
    let mut runs: Vec<WeakRun> = vec![];
    for (ranks, grid) in WEAK {
        for mode in MODES {
            let n = grid.map(|g| g * b);
            let r = heat3d(
                bin,
                dir,
                Spec {
                    ranks,
                    grid,
                    n,
                    order: 2,
                    mode,
                    steps: plan.weak_steps,
                    warmup: plan.weak_warmup,
                    // One rank could pass two steps at a time, several
                    // cannot: the efficiencies compare one step a pass.
                    per_pass: 1,
                },
            )?;
            let t1 = runs
                .iter()
                .find(|w| w.ranks == 1 && w.mode == mode)
                .map_or(r.timings.step, |w| w.timings.step);
            let run = WeakRun {
                ranks,
                grid,
                n,
                mode,
                timings: r.timings,
                cells_per_second: r.cells_per_second,
                timed_steps: r.timed_steps,
                efficiency: if r.timings.step > 0.0 {
                    t1 / r.timings.step
                } else {
                    0.0
                },
            };
            let t = &run.timings;
            println!(
                "{:>5} {:<7} {:<13} {:<8} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>9.3} {:>10.1} {:>6.2}",
                ranks,
                util::triple(grid),
                util::triple(n),
                mode,
                ms(t.post),
                ms(t.interior),
                ms(t.wait),
                ms(t.shell),
                ms(t.update),
                ms(t.step),
                run.cells_per_second / 1e6,
                run.efficiency
            );
            runs.push(run);
        }
    }
    Ok(runs)
}

/// One rank, blocking, at the sweep size: the runs of the order sweep and
/// of the steps-a-pass comparison, with `per_pass` steps a pass (0:
/// heat3d's default).
fn sweep_spec(plan: &Plan, order: usize, per_pass: usize) -> Spec<'static> {
    Spec {
        ranks: 1,
        grid: [1, 1, 1],
        n: [plan.sweep_n; 3],
        order,
        mode: "blocking",
        steps: plan.sweep_steps,
        warmup: plan.sweep_warmup,
        per_pass,
    }
}

/// Orders of the steps-a-pass comparison: 2 and 4 (four steps a pass by
/// default at 128^3 and 256^3) and 6 and 8 (two).
const PASS_ORDERS: [usize; 4] = [2, 4, 6, 8];
/// Steps a pass compared.
const PER_PASS: [usize; 3] = [1, 2, stencil::policy::MAX_HOST_STEPS_PER_PASS];
/// Interleaved rounds of the steps-a-pass comparison (best kept).
const PASS_ROUNDS: usize = 2;

/// One rank, blocking, at the sweep size: heat3d's step with each of
/// [`PER_PASS`] steps a pass (the same bits: the field hashes must agree),
/// in [`PASS_ROUNDS`] interleaved rounds, against one step a pass and the
/// copy floor measured around the runs of each order.
fn passes(bin: &Path, dir: &Path, plan: &Plan) -> Result<Vec<PassRow>> {
    let n = plan.sweep_n;
    println!(
        "\n== steps a pass: {n}^3 cells, 1 rank, blocking, {} steps ({} warm-up), the best of {PASS_ROUNDS} interleaved rounds; floor as above",
        plan.sweep_steps, plan.sweep_warmup
    );
    print!("{:>5}", "order");
    for k in PER_PASS {
        print!(" {:>9}", format!("{k}/pass ms"));
    }
    for k in &PER_PASS[1..] {
        print!(" {:>9}", format!("{k} vs 1"));
    }
    println!(" {:>9} {:>10}", "floor ms", "best/floor");
    let mut rows = vec![];
    for order in PASS_ORDERS {
        let padded = n + order;
        let elements = padded * padded * padded;
        let mut times = stream::passes(elements, plan.stream_reps / 2);
        let mut best = [f64::INFINITY; PER_PASS.len()];
        let mut hashes = vec![];
        for _ in 0..PASS_ROUNDS {
            for (c, &k) in PER_PASS.iter().enumerate() {
                let r = heat3d(bin, dir, sweep_spec(plan, order, k))?;
                best[c] = best[c].min(r.timings.step);
                hashes.push(r.hash);
            }
        }
        if hashes.iter().any(|h| *h != hashes[0]) {
            bail!("order {order}: the steps-a-pass runs disagree on the field hash ({hashes:?})");
        }
        times.extend(stream::passes(
            elements,
            plan.stream_reps - plan.stream_reps / 2,
        ));
        let floor = Stream::from_passes(elements, &times).seconds;
        let speedup: Vec<f64> = best.iter().map(|t| best[0] / t).collect();
        let fastest = best.iter().copied().fold(f64::INFINITY, f64::min);
        print!("{order:>5}");
        for t in best {
            print!(" {:>9.3}", ms(t));
        }
        for x in &speedup[1..] {
            print!(" {:>8.2}x", x);
        }
        println!(" {:>9.3} {:>9.2}x", ms(floor), fastest / floor);
        rows.push(PassRow {
            order,
            per_pass: PER_PASS.to_vec(),
            step: best.to_vec(),
            speedup,
            floor,
            best_ratio: fastest / floor,
        });
    }
    Ok(rows)
}

/// Part 2: the order sweep against the stream reference and the FMA peak
/// (measured before and after the sweep; the best pass is the peak).
fn orders(bin: &Path, dir: &Path, plan: &Plan) -> Result<(Vec<OrderRun>, FmaPeak)> {
    let n = plan.sweep_n;
    let before = fma_peak(PEAK_ITERS, PEAK_PASSES);
    println!(
        "\n== order sweep: {n}^3 cells, 1 rank, blocking, {} steps ({} warm-up); stream = the copy floor (the faster of memcpy and a non-temporal copy) of one f64 array of the padded size, median of {} passes (half before, half after each run)",
        plan.sweep_steps, plan.sweep_warmup, plan.stream_reps
    );
    println!(
        "stencil kernel: heat3d's default (last column); FMA peak before the sweep {:.1} GFLOP/s ({}, {} lanes, {} chains; %peak below is of this figure; {})",
        before.gflops,
        before.isa,
        before.lanes,
        before.chains,
        before.summary()
    );
    println!(
        "{:>5} {:>6} {:>9} {:>9} {:>10} {:>10} {:>8} {:>10} {:>12} {:>8} {:>7} {:>7} {:>7}",
        "order",
        "padded",
        "step ms",
        "sweep ms",
        "Mcells/s",
        "stream ms",
        "GB/s",
        "step/strm",
        "sweep/strm",
        "GFLOP/s",
        "%peak",
        "%L1",
        "kernel"
    );
    let mut runs = vec![];
    let mut above = false;
    for order in ORDERS {
        // The stream passes bracket the heat3d run: half before, half after.
        let padded = n + order;
        let elements = padded * padded * padded;
        let mut times = stream::passes(elements, plan.stream_reps / 2);
        let r = heat3d(bin, dir, sweep_spec(plan, order, 0))?;
        times.extend(stream::passes(
            elements,
            plan.stream_reps - plan.stream_reps / 2,
        ));
        let s = Stream::from_passes(elements, &times);
        let flops_per_cell = peak::flops_per_cell(order);
        let gflops = if r.timings.interior > 0.0 {
            (n * n * n * flops_per_cell) as f64 / r.timings.interior / 1e9
        } else {
            0.0
        };
        let run = OrderRun {
            order,
            padded,
            timings: r.timings,
            cells_per_second: r.cells_per_second,
            timed_steps: r.timed_steps,
            stream: s,
            ratio: r.timings.step / s.seconds,
            sweep_ratio: r.timings.interior / s.seconds,
            flops_per_cell,
            gflops,
            peak_fraction: before.share(gflops),
            l1_terms_gflops: term_rates(order, 20_000, 5).map(|t| t.cell),
            kernel: r.cpu_stencil.clone(),
        };
        let of_l1 = run.l1_terms_gflops.map_or("-".to_string(), |c| {
            format!("{:.1}%", 100.0 * run.gflops / c)
        });
        println!(
            "{:>5} {:>6} {:>9.3} {:>9.3} {:>10.1} {:>10.3} {:>8.2} {:>9.2}x {:>11.2}x {:>8.2} {:>7} {:>7} {:>7}",
            order,
            padded,
            ms(run.timings.step),
            ms(run.timings.interior),
            run.cells_per_second / 1e6,
            ms(s.seconds),
            s.gb_per_s,
            run.ratio,
            run.sweep_ratio,
            run.gflops,
            percent(run.peak_fraction),
            of_l1,
            run.kernel
        );
        above |= run.peak_fraction.is_none();
        runs.push(run);
    }
    let after = fma_peak(PEAK_ITERS, PEAK_PASSES);
    let best = if after.gflops > before.gflops {
        after
    } else {
        before
    };
    for r in &mut runs {
        r.peak_fraction = best.share(r.gflops);
        above |= r.peak_fraction.is_none();
    }
    if above {
        println!("%peak {ABOVE}: the sweep's rate is {}", best.above());
    }
    println!(
        "FMA peak (best pass before and after): {:.1} GFLOP/s ({}); the sweep's ceiling without fused multiply-adds is half of it at two operations a cycle, and its operations with their data in the L1 (%L1: of that rate) reach {}; best order: {}",
        best.gflops,
        best.summary(),
        match runs.iter().filter_map(|r| r.l1_terms_gflops).reduce(f64::max) {
            Some(c) => match best.share(c) {
                Some(f) => format!("at most {:.1} GFLOP/s, {:.1}% of the peak", c, 100.0 * f),
                None => format!("at most {c:.1} GFLOP/s, {}", best.above()),
            },
            None => "- (measured with AVX-512 only)".to_string(),
        },
        runs.iter()
            .max_by(|a, b| a.gflops.total_cmp(&b.gflops))
            .map_or(String::new(), |r| match r.peak_fraction {
                Some(f) => format!("FD-{} at {:.2} GFLOP/s, {:.1}% of peak", r.order, r.gflops, 100.0 * f),
                None => format!("FD-{} at {:.2} GFLOP/s, {}", r.order, r.gflops, best.above()),
            })
    );
    if let Some(r) = runs.iter().find(|r| r.order == 2) {
        let scale = Stream::from_passes(
            r.stream.elements,
            &stream::scale_passes(r.stream.elements, plan.stream_reps),
        );
        println!(
            "copy floor over the FD-2 arrays {:.2} GB/s; STREAM scale (dst = s src) over the same {:.2} GB/s, {:.2}x the floor's time",
            r.stream.gb_per_s,
            scale.gb_per_s,
            scale.seconds / r.stream.seconds
        );
        println!(
            "goal: FD-2 at {n}^3 within {GOAL_RATIO}x of the copy floor: {:.2}x, {}",
            r.ratio,
            if r.ratio <= GOAL_RATIO {
                "met"
            } else {
                "NOT met"
            }
        );
    }
    Ok((runs, best))
}

/// Part 3: blocking against overlap, from the weak-scaling runs.
fn overlap(weak: &[WeakRun]) -> Vec<OverlapRow> {
    println!("\n== blocking vs overlap (weak-scaling runs above), median ms per step");
    println!(
        "{:>5} {:<7} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "ranks", "grid", "blk step", "blk wait", "ovl step", "ovl wait", "speedup"
    );
    let mut rows = vec![];
    for (ranks, grid) in WEAK.iter().copied().filter(|(r, _)| *r > 1) {
        let find = |m: &str| weak.iter().find(|w| w.ranks == ranks && w.mode == m);
        let (Some(b), Some(o)) = (find("blocking"), find("overlap")) else {
            continue;
        };
        let row = OverlapRow {
            ranks,
            grid,
            blocking_step: b.timings.step,
            blocking_wait: b.timings.wait,
            overlap_step: o.timings.step,
            overlap_wait: o.timings.wait,
            speedup: b.timings.step / o.timings.step,
        };
        println!(
            "{:>5} {:<7} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>7.2}x",
            ranks,
            util::triple(grid),
            ms(row.blocking_step),
            ms(row.blocking_wait),
            ms(row.overlap_step),
            ms(row.overlap_wait),
            row.speedup
        );
        rows.push(row);
    }
    rows
}

/// Runs the heat3d bench.
pub(super) fn run(args: &Args) -> Result<()> {
    let start = Instant::now();
    let plan = Plan::new(args.quick);
    let out = match &args.out {
        Some(d) => d.clone(),
        None => util::target_dir()?.join("bench").join("heat3d"),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let bin = util::build_heat3d(false)?;
    let dir = util::scratch_dir("bench")?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load = super::load_average();
    println!(
        "bench heat3d{}: {cores} core(s), load average {}; in-process ranks (threads)",
        if args.quick { " --quick" } else { "" },
        load.map_or("unknown".to_string(), |l| format!("{l:.2}"))
    );
    if load.is_some_and(|l| l > 0.5) {
        println!("warning: the machine is busy before the bench starts; times will be noisy");
    }
    let weak_runs = weak(&bin, &dir, &plan)?;
    let (order_runs, peak) = orders(&bin, &dir, &plan)?;
    let pass_rows = passes(&bin, &dir, &plan)?;
    let overlap_rows = overlap(&weak_runs);
    let _ = std::fs::remove_dir_all(&dir);

    let png = out.join("heat3d.png");
    let plot_labels = crate::plot::draw(&png, &plan_text(&plan), &weak_runs, &order_runs)
        .with_context(|| format!("cannot draw {}", png.display()))?;
    let fd2 = order_runs.iter().find(|r| r.order == 2);
    let brick = [plan.brick; 3];
    let sweep_n = [plan.sweep_n; 3];
    let report = json!({
        "quick": args.quick,
        "cores": cores,
        "load_average_before": load,
        "plan": plan,
        "weak": {
            "order": 2,
            "brick": brick,
            "efficiency": "t(1) / t(P), same mode",
            "runs": weak_runs,
        },
        "orders": {
            "n": sweep_n,
            "ranks": 1,
            "mode": "blocking",
            "stream": "copy floor: per pass the faster of copy_from_slice and a non-temporal-store copy of (n + order)^3 f64, single thread, median of the passes (half just before, half just after the heat3d run); bytes = 2 * 8 * padded^3",
            "kernel": "heat3d's default, per run in runs[].kernel",
            "fma_peak": {
                "gflops": peak.gflops,
                "isa": peak.isa.name(),
                "lanes": peak.lanes,
                "chains": peak.chains,
                "flops_per_tsc_tick": peak.flops_per_tick,
                "family": peak.family.name,
                "documented_flops_per_cycle": peak.expected.map(|r| [r.min, r.max]),
                "turbo_allowance": peak.turbo,
                "check": peak.check.describe(),
                "summary": peak.summary(),
                "what": format!("best pass (before or after the sweep) of {} independent chains of FMAs on the widest vectors, 2 flops per lane, checked per TSC tick against the CPU family's documented flops per cycle (documented_flops_per_cycle: fewest and most FMA units of the family); the sweeps do not fuse, so half of it is their ceiling; runs[].peak_fraction is null where the sweep's rate is above the peak", peak.chains),
            },
            "gflops": "cells * (1 + 9 order/2) flops / interior phase (the sweep alone)",
            "runs": order_runs,
            "goal": {
                "order": 2,
                "max_ratio": GOAL_RATIO,
                "ratio": fd2.map(|r| r.ratio),
                "met": fd2.map(|r| r.ratio <= GOAL_RATIO),
                "at_256": plan.sweep_n == 256,
            },
        },
        "passes": {
            "n": sweep_n,
            "ranks": 1,
            "mode": "blocking",
            "step": "median step of heat3d's report, the best of the rounds; every run of an order gives the same field hash",
            "rows": pass_rows,
        },
        "overlap": overlap_rows,
        "plot": { "file": png.file_name().map(|f| f.to_string_lossy().into_owned()), "panels": plot_labels },
        "seconds": start.elapsed().as_secs_f64(),
    });
    let json_path = out.join("heat3d.json");
    util::write_report(&json_path, &report, &[&png], start)?;
    Ok(())
}

fn plan_text(plan: &Plan) -> String {
    format!(
        "heat3d, FD-2 weak scaling {}^3/rank; order sweep {}^3, 1 rank",
        plan.brick, plan.sweep_n
    )
}
