//! Scalar synthesis + analysis time per field on one core, at lmax 63..511 on
//! the Gauss grid `ntheta = 3 (lmax + 1) / 2`, `nphi = 2 ntheta`; with
//! `ducc0` (Python) side by side when `python3 -c "import ducc0"` works.

use std::process::Command;
use std::time::Instant;

use num_complex::Complex64;
use sht::{Parallelism, Sht};

const LMAXS: [usize; 4] = [63, 127, 255, 511];

fn time_ours(lmax: usize) -> (f64, f64) {
    let nt = 3 * (lmax + 1) / 2;
    let sht = Sht::new(nt, Some(lmax)).expect("plan");
    let mut s = 12345u64;
    let mut rnd = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    let coeffs: Vec<Complex64> = (0..sht.nlm())
        .map(|_| Complex64::new(rnd(), rnd()))
        .collect();
    let mut grid = vec![0.0; nt * sht.nphi()];
    let mut back = vec![Complex64::new(0.0, 0.0); sht.nlm()];
    let (mut ts, mut ta, mut reps) = (0.0, 0.0, 0);
    while ts + ta < 0.5 || reps < 3 {
        let t0 = Instant::now();
        sht.synthesis(&coeffs, &mut grid, Parallelism::None)
            .expect("synthesis");
        let t1 = Instant::now();
        sht.analysis(&grid, &mut back, Parallelism::None)
            .expect("analysis");
        ts += (t1 - t0).as_secs_f64();
        ta += t1.elapsed().as_secs_f64();
        reps += 1;
    }
    (ts / reps as f64, ta / reps as f64)
}

const PY: &str = r#"
import sys, time, numpy as np, ducc0
for lmax in map(int, sys.argv[1:]):
    nt = 3 * (lmax + 1) // 2; nphi = 2 * nt
    nalm = (lmax + 1) * (lmax + 2) // 2
    rng = np.random.default_rng(1)
    alm = (rng.random((1, nalm)) - 0.5 + 1j * (rng.random((1, nalm)) - 0.5)).astype(np.complex128)
    alm[0, :lmax + 1] = alm[0, :lmax + 1].real
    ts = ta = 0.0; reps = 0
    while ts + ta < 0.5 or reps < 3:
        t0 = time.perf_counter()
        m = ducc0.sht.experimental.synthesis_2d(alm=alm, spin=0, lmax=lmax, geometry="GL", ntheta=nt, nphi=nphi, nthreads=1)
        t1 = time.perf_counter()
        a = ducc0.sht.experimental.analysis_2d(map=m, spin=0, lmax=lmax, geometry="GL", nthreads=1)
        t2 = time.perf_counter()
        ts += t1 - t0; ta += t2 - t1; reps += 1
    print(lmax, ts / reps, ta / reps)
"#;

fn time_ducc0() -> Option<Vec<(f64, f64)>> {
    let args: Vec<String> = LMAXS.iter().map(|l| l.to_string()).collect();
    let out = Command::new("python3")
        .arg("-c")
        .arg(PY)
        .args(&args)
        .env("OMP_NUM_THREADS", "1")
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "ducc0 skipped: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
        return None;
    }
    let v: Vec<(f64, f64)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<f64> = l
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            (w.len() == 3).then(|| (w[1], w[2]))
        })
        .collect();
    (v.len() == LMAXS.len()).then_some(v)
}

fn main() {
    // One core: a single-thread pool (the transforms here run with Parallelism::None anyway).
    let ours: Vec<(f64, f64)> = LMAXS.iter().map(|&l| time_ours(l)).collect();
    let ducc = time_ducc0();
    if ducc.is_none() {
        println!("(ducc0 not available: `python3 -m pip install ducc0` to compare)");
    }
    println!("grid ntheta = 3(lmax+1)/2, nphi = 2 ntheta, one field, one core; times in ms");
    println!(
        "{:>5} {:>6} {:>6} | {:>10} {:>10} {:>10} | {:>10} {:>10} | {:>7}",
        "lmax", "nth", "nphi", "synth", "anal", "sum", "ducc0 syn", "ducc0 ana", "ratio"
    );
    for (i, &l) in LMAXS.iter().enumerate() {
        let nt = 3 * (l + 1) / 2;
        let (s, a) = ours[i];
        match &ducc {
            Some(d) => {
                let (ds, da) = d[i];
                println!(
                    "{:>5} {:>6} {:>6} | {:>10.3} {:>10.3} {:>10.3} | {:>10.3} {:>10.3} | {:>7.2}",
                    l,
                    nt,
                    2 * nt,
                    s * 1e3,
                    a * 1e3,
                    (s + a) * 1e3,
                    ds * 1e3,
                    da * 1e3,
                    (s + a) / (ds + da)
                );
            }
            None => println!(
                "{:>5} {:>6} {:>6} | {:>10.3} {:>10.3} {:>10.3} |",
                l,
                nt,
                2 * nt,
                s * 1e3,
                a * 1e3,
                (s + a) * 1e3
            ),
        }
    }
}
