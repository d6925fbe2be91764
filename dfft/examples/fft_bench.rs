//! One-core 3D complex-to-complex FFT: forward + backward of an N^3 array on
//! one in-process rank, median of several repetitions (the reference to run
//! beside it: FFTW, or `scipy.fft.fftn(x, workers=1)`).
//!
//! `cargo run --release -p parnum-dfft --example fft_bench [-- N REPS]` (default 256, 5).

use dfft::{Fft3d, FftError, Layout, Options};
use num_complex::Complex64;
use std::time::Instant;

fn usage(msg: &str) -> ! {
    eprintln!("fft_bench: {msg}\nusage: fft_bench [N [REPS]]");
    std::process::exit(2)
}

fn main() {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| match s.parse::<usize>() {
            Ok(v) if v >= 1 => v,
            _ => usage(&format!("'{s}' is not a whole number of at least 1")),
        })
        .collect();
    if a.len() > 2 {
        usage("at most two arguments");
    }
    let n = a.first().copied().unwrap_or(256);
    let reps = a.get(1).copied().unwrap_or(5);
    let res = comm::local::run(1, |c| {
        let l = Layout::bricks([n; 3], 1)?;
        let mut p = Fft3d::c2c(c, &l, Options::default())?;
        let x: Vec<Complex64> = (0..p.input_len())
            .map(|i| Complex64::new((i % 7) as f64, (i % 3) as f64))
            .collect();
        let mut y = vec![Complex64::default(); p.output_len()];
        let mut z = vec![Complex64::default(); p.input_len()];
        let mut s = vec![Complex64::default(); p.scratch_len()];
        let (mut tf, mut tb) = (vec![], vec![]);
        for _ in 0..reps {
            let t = Instant::now();
            p.forward(c, &x, &mut y, &mut s)?;
            tf.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            p.backward(c, &y, &mut z, &mut s)?;
            tb.push(t.elapsed().as_secs_f64());
        }
        tf.sort_by(f64::total_cmp);
        tb.sort_by(f64::total_cmp);
        let err = x
            .iter()
            .zip(&z)
            .map(|(a, b)| (a - b).norm())
            .fold(0.0, f64::max);
        Ok::<_, FftError>((tf[reps / 2], tb[reps / 2], err))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let (tf, tb, err) = res[0];
    println!("dfft c2c {n}^3, one rank: forward {:.3} s, backward {:.3} s (median of {reps}); round-trip error {err:.2e}", tf, tb);
}
