//! Factor and solve times of one full l-loop: for l = 0..=lmax one dense `nr x nr` matrix
//! `M_l = I - dt/2 L_l` (Chebyshev collocation of the shell Laplacian, Dirichlet rows) and
//! `2 (l + 1)` right-hand sides (real and imaginary parts of m = 0..=l, packed column-major).
//!
//! Columns, all on one thread, side by side in the same process:
//! * `fac faer`, `fac lapack`: factor every M_l (faer `lu_in_place`, LAPACK `dgetrf`);
//! * `cols`: the crate's column-wise batched solve (bit-identical per column, the default);
//! * `faer B`, `faer m`: faer's own solve, all columns in one call / once per m (2 columns);
//! * `getrs B`, `getrs m`: LAPACK `dgetrs`, all columns in one call / once per m.
//!
//! Run: `cargo bench -p parnum-imex --bench imex [--features lapack] [-- --quick]`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use imex::{FaerLu, LapackLu, LuBackend, LuFactors, Matrix};

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    }
}

/// Chebyshev collocation derivative matrix on `n + 1` Gauss-Lobatto points (Trefethen).
fn cheb(n: usize) -> (Vec<f64>, Vec<f64>) {
    let pi = std::f64::consts::PI;
    let nf = n as f64;
    let x: Vec<f64> = (0..=n).map(|j| (pi * j as f64 / nf).cos()).collect();
    let m = n + 1;
    let c = |j: usize| {
        let s = if j.is_multiple_of(2) { 1.0 } else { -1.0 };
        if j == 0 || j == n {
            2.0 * s
        } else {
            s
        }
    };
    let mut d = vec![0.0; m * m]; // column-major
    for i in 0..m {
        let mut sum = 0.0;
        for j in 0..m {
            if i != j {
                let (fi, fj) = (i as f64, j as f64);
                let dx =
                    2.0 * (pi * (fi + fj) / (2.0 * nf)).sin() * (pi * (fj - fi) / (2.0 * nf)).sin();
                d[i + j * m] = c(i) / c(j) / dx;
                sum += d[i + j * m];
            }
        }
        d[i + i * m] = -sum;
    }
    (x, d)
}

/// The implicit matrices of one l-loop.
fn matrices(nr: usize, lmax: usize) -> Vec<Matrix> {
    let (ri, ro) = (7.0 / 13.0, 20.0 / 13.0);
    let (x, d) = cheb(nr - 1);
    let s = 2.0 / (ro - ri);
    let r: Vec<f64> = x
        .iter()
        .map(|&x| ri + 0.5 * (x + 1.0) * (ro - ri))
        .collect();
    let d1: Vec<f64> = d.iter().map(|v| v * s).collect();
    let mut d2 = vec![0.0; nr * nr];
    for j in 0..nr {
        for k in 0..nr {
            let b = d1[k + j * nr];
            for i in 0..nr {
                d2[i + j * nr] += d1[i + k * nr] * b;
            }
        }
    }
    let half_dt = 0.5e-4;
    (0..=lmax)
        .map(|l| {
            let ll = (l * (l + 1)) as f64;
            Matrix::from_fn(nr, nr, |i, j| {
                if i == 0 || i == nr - 1 {
                    return if i == j { 1.0 } else { 0.0 };
                }
                let lap = d2[i + j * nr] + 2.0 / r[i] * d1[i + j * nr]
                    - if i == j { ll / (r[i] * r[i]) } else { 0.0 };
                (if i == j { 1.0 } else { 0.0 }) - half_dt * lap
            })
        })
        .collect()
}

/// Best of `reps` runs; each run prepares its input untimed and returns [`timed`] of its work.
fn best(reps: usize, mut run: impl FnMut() -> Duration) -> Duration {
    (0..reps).map(|_| run()).min().unwrap_or_default()
}

fn timed(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn ms(d: Duration) -> String {
    format!("{:9.2}", d.as_secs_f64() * 1e3)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let lapack = LapackLu::new().ok();
    if lapack.is_some() {
        LapackLu::set_blas_threads(1).expect("OpenBLAS threads");
    }
    let (nrs, lmaxs): (&[usize], &[usize]) = if quick {
        (&[33, 65], &[63])
    } else {
        (&[33, 65, 129, 257], &[63, 127, 255])
    };
    println!(
        "imex l-loop benchmark (one thread; times in ms for the whole loop l = 0..=lmax; \
         LAPACK {})",
        if lapack.is_some() {
            "= system OpenBLAS, OPENBLAS threads = 1"
        } else {
            "not compiled (feature `lapack`)"
        }
    );
    println!(
        "{:>4} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} | {:>8} {:>8} {:>8}",
        "nr",
        "lmax",
        "fac faer",
        "fac lapk",
        "cols",
        "faer B",
        "faer m",
        "getrs B",
        "getrs m",
        "getrsB/c",
        "getrsm/c",
        "faerB/c"
    );
    let mut rng = Lcg(1);
    let mut bit_report = Vec::new();
    let total = Instant::now();
    for &nr in nrs {
        for &lmax in lmaxs {
            let mats = matrices(nr, lmax);
            let work = (nr * nr) as f64 * ((lmax + 1) * (lmax + 2)) as f64;
            let reps = if work > 2e9 {
                1
            } else if work > 2e8 {
                2
            } else {
                5
            };
            let rhs: Vec<Vec<f64>> = (0..=lmax)
                .map(|l| (0..nr * 2 * (l + 1)).map(|_| rng.next()).collect())
                .collect();
            let mut buf = rhs.clone();
            let reset = |buf: &mut Vec<Vec<f64>>| {
                for (b, r) in buf.iter_mut().zip(&rhs) {
                    b.copy_from_slice(r);
                }
            };

            // Factorisations.
            let mut copies: Vec<Matrix> = Vec::new();
            let mut faer_f: Vec<LuFactors> = Vec::new();
            let t_fac_faer = best(reps, || {
                copies = mats.clone();
                timed(|| {
                    faer_f = copies
                        .drain(..)
                        .map(|m| FaerLu.factor(m).expect("factor"))
                        .collect()
                })
            });
            let mut lapack_f: Vec<LuFactors> = Vec::new();
            let t_fac_lapack = lapack.map(|b| {
                best(reps, || {
                    copies = mats.clone();
                    timed(|| {
                        lapack_f = copies
                            .drain(..)
                            .map(|m| b.factor(m).expect("factor"))
                            .collect()
                    })
                })
            });

            // Solves.
            let mut scratch = vec![0.0; faer_f[0].solve_scratch_len()];
            let t_cols = best(reps, || {
                reset(&mut buf);
                timed(|| {
                    for (l, (f, b)) in faer_f.iter().zip(buf.iter_mut()).enumerate() {
                        f.solve_columns(b, 2 * (l + 1), &mut scratch)
                            .expect("solve");
                    }
                })
            });
            let cols_result = buf.clone();
            let mut fs_all: Vec<_> = (0..=lmax)
                .map(|l| FaerLu.native_scratch(nr, 2 * (l + 1)))
                .collect();
            let t_faer_b = best(reps, || {
                reset(&mut buf);
                timed(|| {
                    for (l, ((f, b), s)) in faer_f
                        .iter()
                        .zip(buf.iter_mut())
                        .zip(fs_all.iter_mut())
                        .enumerate()
                    {
                        FaerLu.solve_native(f, b, 2 * (l + 1), s).expect("solve");
                    }
                })
            });
            let faer_b_result = buf.clone();
            let mut fs2 = FaerLu.native_scratch(nr, 2);
            let t_faer_m = best(reps, || {
                reset(&mut buf);
                timed(|| {
                    for (f, b) in faer_f.iter().zip(buf.iter_mut()) {
                        for pair in b.chunks_mut(2 * nr) {
                            FaerLu.solve_native(f, pair, 2, &mut fs2).expect("solve");
                        }
                    }
                })
            });
            let (t_getrs_b, t_getrs_m) = match lapack {
                Some(b) => {
                    let tb = best(reps, || {
                        reset(&mut buf);
                        timed(|| {
                            for (l, (f, x)) in lapack_f.iter().zip(buf.iter_mut()).enumerate() {
                                b.solve_native(f, x, 2 * (l + 1), &mut ()).expect("solve");
                            }
                        })
                    });
                    let tm = best(reps, || {
                        reset(&mut buf);
                        timed(|| {
                            for (f, x) in lapack_f.iter().zip(buf.iter_mut()) {
                                for pair in x.chunks_mut(2 * nr) {
                                    b.solve_native(f, pair, 2, &mut ()).expect("solve");
                                }
                            }
                        })
                    });
                    (Some(tb), Some(tm))
                }
                None => (None, None),
            };
            black_box(&buf);

            // Bitwise: does a batched solve give the bits of one-column-at-a-time solves?
            // Checked on the largest degree, for each solver.
            let l = lmax;
            let ncols = 2 * (l + 1);
            let differing = |solve: &mut dyn FnMut(&mut [f64], usize)| {
                let mut all = rhs[l].clone();
                solve(&mut all, ncols);
                (0..ncols)
                    .filter(|&c| {
                        let mut one = rhs[l][c * nr..(c + 1) * nr].to_vec();
                        solve(&mut one, 1);
                        one.iter()
                            .zip(&all[c * nr..(c + 1) * nr])
                            .any(|(a, b)| a.to_bits() != b.to_bits())
                    })
                    .count()
            };
            let ours =
                differing(&mut |b, k| faer_f[l].solve_columns(b, k, &mut scratch).expect("solve"));
            let mut fs = FaerLu.native_scratch(nr, ncols);
            let faer = differing(&mut |b, k| {
                FaerLu
                    .solve_native(&faer_f[l], b, k, &mut fs)
                    .expect("solve")
            });
            let getrs = lapack.map(|be| {
                differing(&mut |b, k| be.solve_native(&lapack_f[l], b, k, &mut ()).expect("solve"))
            });
            let max_abs = cols_result
                .iter()
                .flatten()
                .fold(0.0f64, |m, v| m.max(v.abs()));
            let diff = cols_result
                .iter()
                .flatten()
                .zip(faer_b_result.iter().flatten())
                .map(|(a, b)| (a - b).abs())
                .fold(0.0f64, f64::max);
            bit_report.push(format!(
                "nr {nr:>3}, l = {l:>3} ({ncols} columns): columns whose bits change when batched: \
                 column-wise {ours}, faer {faer}, dgetrs {}; column-wise vs faer batched: max \
                 rel diff {:.1e}",
                getrs.map_or("-".to_string(), |g| g.to_string()),
                diff / max_abs
            ));

            let opt = |d: Option<Duration>| d.map_or(format!("{:>9}", "-"), ms);
            let ratio = |a: Option<Duration>, b: Duration| {
                a.map_or(format!("{:>8}", "-"), |a| {
                    format!("{:8.2}", a.as_secs_f64() / b.as_secs_f64())
                })
            };
            println!(
                "{nr:>4} {lmax:>5} {} {} {} {} {} {} {} | {} {} {}",
                ms(t_fac_faer),
                opt(t_fac_lapack),
                ms(t_cols),
                ms(t_faer_b),
                ms(t_faer_m),
                opt(t_getrs_b),
                opt(t_getrs_m),
                ratio(t_getrs_b, t_cols),
                ratio(t_getrs_m, t_cols),
                ratio(Some(t_faer_b), t_cols),
            );
        }
    }
    println!("\nbatched vs one-column-at-a-time solves, bit for bit:");
    for line in bit_report {
        println!("  {line}");
    }
    println!(
        "\ntotal benchmark time {:.1} s",
        total.elapsed().as_secs_f64()
    );
}
