//! Synthesis + analysis time per field (one radial level) on one core, scalar
//! and vector (spheroidal/toroidal), at lmax 63..511 on the Gauss grid
//! `ntheta = 3 (lmax + 1) / 2`, `nphi = 2 ntheta`.
//!
//! `cargo bench -p parnum-sht --bench sht [-- --lmax 63,127 --json PATH]`; with
//! SHTns and ducc0 side by side: `cargo xtask bench sht`, which runs this
//! with `--json` and the references in the same run.
//!
//! `--only scalar` or `--only vector` runs one of the two; `--polar EPS`
//! sets the plan's opt-in polar threshold (`Sht::set_polar_threshold`,
//! default 0).
//!
//! Each case is repeated until it has run 0.4 s and at least 5 times (after
//! one warm-up); the best and the median of the repeats are reported.

use std::time::Instant;

use num_complex::Complex64;
use sht::{Parallelism, Sht};

/// Best and median synthesis and analysis times (seconds) of one case.
struct Case {
    synth_best: f64,
    anal_best: f64,
    sum_best: f64,
    sum_median: f64,
    reps: usize,
}

fn rng(seed: u64) -> impl FnMut() -> f64 {
    let mut s = seed;
    move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    }
}

/// Random coefficients: real for `m = 0`, zero for `l = 0` when `tangent`.
fn coeffs(sht: &Sht, seed: u64, tangent: bool) -> Vec<Complex64> {
    let mut r = rng(seed);
    let mut c = vec![Complex64::new(0.0, 0.0); sht.nlm()];
    for m in 0..=sht.lmax() {
        for l in m..=sht.lmax() {
            if tangent && l == 0 {
                continue;
            }
            let im = if m == 0 { 0.0 } else { r() };
            c[sht.lm_index(l, m)] = Complex64::new(r(), im);
        }
    }
    c
}

fn time(mut synth: impl FnMut(), mut anal: impl FnMut()) -> Case {
    synth();
    anal();
    let (mut ts, mut ta) = (Vec::new(), Vec::new());
    let t_start = Instant::now();
    while ts.len() < 5 || t_start.elapsed().as_secs_f64() < 0.4 {
        let t0 = Instant::now();
        synth();
        let t1 = Instant::now();
        anal();
        ts.push((t1 - t0).as_secs_f64());
        ta.push(t1.elapsed().as_secs_f64());
    }
    let mut sums: Vec<f64> = ts.iter().zip(&ta).map(|(a, b)| a + b).collect();
    sums.sort_by(f64::total_cmp);
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    Case {
        synth_best: min(&ts),
        anal_best: min(&ta),
        sum_best: sums[0],
        sum_median: sums[sums.len() / 2],
        reps: sums.len(),
    }
}

fn scalar(sht: &Sht) -> Case {
    let c = coeffs(sht, 12345, false);
    let mut grid = vec![0.0; sht.ntheta() * sht.nphi()];
    let mut back = vec![Complex64::new(0.0, 0.0); sht.nlm()];
    let g = std::cell::RefCell::new(&mut grid);
    time(
        || {
            sht.synthesis(&c, &mut g.borrow_mut(), Parallelism::None)
                .expect("synthesis")
        },
        || {
            sht.analysis(&g.borrow(), &mut back, Parallelism::None)
                .expect("analysis")
        },
    )
}

/// Best times (seconds) of the four steps of the scalar transform, each
/// timed alone: Legendre synthesis, phi synthesis (c2r FFTs), phi analysis
/// (r2c FFTs), Legendre analysis.
struct Steps {
    leg_synth: f64,
    phi_synth: f64,
    phi_anal: f64,
    leg_anal: f64,
}

impl Steps {
    fn phi(&self) -> f64 {
        self.phi_synth + self.phi_anal
    }
    fn legendre(&self) -> f64 {
        self.leg_synth + self.leg_anal
    }
}

/// The best of at least 5 repeats and 0.1 s of `f` (after one warm-up).
fn best_of(mut f: impl FnMut()) -> f64 {
    f();
    let (mut best, mut reps) = (f64::INFINITY, 0);
    let t_start = Instant::now();
    while reps < 5 || t_start.elapsed().as_secs_f64() < 0.1 {
        let t0 = Instant::now();
        f();
        best = best.min(t0.elapsed().as_secs_f64());
        reps += 1;
    }
    best
}

fn scalar_steps(sht: &Sht) -> Steps {
    let c = coeffs(sht, 12345, false);
    let mut spec = vec![Complex64::new(0.0, 0.0); sht.spectral_len()];
    let mut grid = vec![0.0; sht.ntheta() * sht.nphi()];
    let mut back = vec![Complex64::new(0.0, 0.0); sht.nlm()];
    let p = Parallelism::None;
    let leg_synth = best_of(|| sht.legendre_synthesis(&c, &mut spec, p).expect("synthesis"));
    let phi_synth = best_of(|| sht.phi_synthesis(&spec, &mut grid, p).expect("synthesis"));
    let phi_anal = best_of(|| sht.phi_analysis(&grid, &mut spec, p).expect("analysis"));
    let leg_anal = best_of(|| {
        sht.legendre_analysis(&spec, &mut back, p)
            .expect("analysis")
    });
    Steps {
        leg_synth,
        phi_synth,
        phi_anal,
        leg_anal,
    }
}

/// Nominal flops of one scalar Legendre step (synthesis or analysis) of one
/// field: every `(l, m)` at every pair of latitudes, 7 flops each (the
/// recurrence's multiply and fused multiply-add, two fused multiply-adds
/// for the real and imaginary parts). The kernels skip the negligible
/// values near the poles, so the figure is an effective rate.
fn legendre_flops(sht: &Sht) -> f64 {
    let (l, pairs) = (sht.lmax() as f64, sht.ntheta().div_ceil(2) as f64);
    7.0 * (l + 1.0) * (l + 2.0) / 2.0 * pairs
}

fn vector(sht: &Sht) -> Case {
    let s = coeffs(sht, 1, true);
    let t = coeffs(sht, 2, true);
    let ng = sht.ntheta() * sht.nphi();
    let g = std::cell::RefCell::new((vec![0.0; ng], vec![0.0; ng]));
    let mut s2 = vec![Complex64::new(0.0, 0.0); sht.nlm()];
    let mut t2 = s2.clone();
    time(
        || {
            let (vt, vp) = &mut *g.borrow_mut();
            sht.vector_synthesis(&s, &t, vt, vp, Parallelism::None)
                .expect("vector synthesis")
        },
        || {
            let (vt, vp) = &*g.borrow();
            sht.vector_analysis(vt, vp, &mut s2, &mut t2, Parallelism::None)
                .expect("vector analysis")
        },
    )
}

fn json_case(c: &Case) -> String {
    format!(
        "{{\"synth_best_s\": {:e}, \"anal_best_s\": {:e}, \"sum_best_s\": {:e}, \"sum_median_s\": {:e}, \"reps\": {}}}",
        c.synth_best, c.anal_best, c.sum_best, c.sum_median, c.reps
    )
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut lmaxs = vec![63usize, 127, 255, 511];
    let mut json = None;
    let mut only: Option<String> = None;
    let mut polar = 0.0;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--lmax" => {
                lmaxs = args
                    .get(i + 1)
                    .expect("--lmax needs a list")
                    .split(',')
                    .map(|v| v.parse().expect("--lmax: a list of integers"))
                    .collect();
                i += 1;
            }
            "--json" => {
                json = Some(args.get(i + 1).expect("--json needs a path").clone());
                i += 1;
            }
            "--polar" => {
                polar = args
                    .get(i + 1)
                    .expect("--polar needs a threshold")
                    .parse()
                    .expect("--polar: a number");
                i += 1;
            }
            "--only" => {
                only = Some(args.get(i + 1).expect("--only scalar|vector").clone());
                i += 1;
            }
            _ => {} // cargo bench passes `--bench`
        }
        i += 1;
    }
    println!("one field (radial level), one core, grid ntheta = 3(lmax+1)/2, nphi = 2 ntheta, polar threshold {polar:e}; ms, best of the repeats (median)");
    println!(
        "{:>5} {:>5} {:>5} | {:>8} {:>8} {:>17} | {:>8} {:>8} {:>17}",
        "lmax", "nth", "nphi", "synth", "anal", "scalar sum", "vsynth", "vanal", "vector sum"
    );
    let mut rows = Vec::new();
    let mut split = Vec::new();
    for &lmax in &lmaxs {
        let nt = 3 * (lmax + 1) / 2;
        let mut sht = Sht::new(nt, Some(lmax)).expect("plan");
        sht.set_polar_threshold(polar).expect("polar threshold");
        let skip = |what: &str| only.as_deref().is_some_and(|o| o != what);
        let none = || Case {
            synth_best: f64::NAN,
            anal_best: f64::NAN,
            sum_best: f64::NAN,
            sum_median: f64::NAN,
            reps: 0,
        };
        let s = if skip("scalar") { none() } else { scalar(&sht) };
        let v = if skip("vector") { none() } else { vector(&sht) };
        println!(
            "{:>5} {:>5} {:>5} | {:>8.3} {:>8.3} {:>8.3} ({:>6.3}) | {:>8.3} {:>8.3} {:>8.3} ({:>6.3})",
            lmax,
            nt,
            sht.nphi(),
            s.synth_best * 1e3,
            s.anal_best * 1e3,
            s.sum_best * 1e3,
            s.sum_median * 1e3,
            v.synth_best * 1e3,
            v.anal_best * 1e3,
            v.sum_best * 1e3,
            v.sum_median * 1e3,
        );
        let st = (!skip("scalar")).then(|| scalar_steps(&sht));
        let steps_json = st.as_ref().map_or("null".to_string(), |st| {
            format!(
                "{{\"legendre_synth_s\": {:e}, \"phi_synth_s\": {:e}, \"phi_anal_s\": {:e}, \"legendre_anal_s\": {:e}, \"legendre_nominal_flops\": {:e}}}",
                st.leg_synth, st.phi_synth, st.phi_anal, st.leg_anal, legendre_flops(&sht)
            )
        });
        if let Some(st) = st {
            split.push((lmax, st, legendre_flops(&sht)));
        }
        rows.push(format!(
            "  {{\"lmax\": {lmax}, \"ntheta\": {nt}, \"nphi\": {}, \"scalar\": {}, \"vector\": {}, \"scalar_steps\": {steps_json}}}",
            sht.nphi(),
            json_case(&s),
            json_case(&v)
        ));
    }
    if !split.is_empty() {
        println!("scalar steps timed alone (ms, best): Legendre and phi FFT (with its copies), their shares of the sum, Legendre GFLOP/s (nominal: 7 flops per (l, m) and latitude pair)");
        println!(
            "{:>5} | {:>8} {:>8} {:>8} {:>8} | {:>6} {:>6} | {:>6} {:>6}",
            "lmax",
            "leg syn",
            "phi syn",
            "phi ana",
            "leg ana",
            "leg %",
            "phi %",
            "GF syn",
            "GF ana"
        );
        for (lmax, st, fl) in &split {
            let sum = st.legendre() + st.phi();
            println!(
                "{:>5} | {:>8.3} {:>8.3} {:>8.3} {:>8.3} | {:>6.1} {:>6.1} | {:>6.2} {:>6.2}",
                lmax,
                st.leg_synth * 1e3,
                st.phi_synth * 1e3,
                st.phi_anal * 1e3,
                st.leg_anal * 1e3,
                100.0 * st.legendre() / sum,
                100.0 * st.phi() / sum,
                fl / st.leg_synth / 1e9,
                fl / st.leg_anal / 1e9,
            );
        }
    }
    if let Some(path) = json {
        let text = format!("[\n{}\n]\n", rows.join(",\n"));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
    }
}
