//! Gradient and Hessian diagonal of a real field: the 1D-transform route
//! (`Derivatives`) against the 3D-transform route (one 3D forward transform,
//! then one 3D backward transform per derivative), timed in the same run,
//! with the largest difference between the two.
//!
//! `cargo run --release -p parnum-dfft --example derivatives [-- N RANKS]`
//! (default 128^3 on 2 in-process ranks, z-pencil input).

use comm::{local, CommExt, ReduceOp};
use dfft::{Derivative, Derivatives, Fft3d, FftError, Layout, Normalization, Options, Protocol};
use num_complex::Complex64;
use std::time::Instant;

fn main() {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let n = a.first().copied().unwrap_or(128);
    let ranks = a.get(1).copied().unwrap_or(2);
    let g = [n; 3];
    use Derivative::*;
    let reqs = [D1(0), D1(1), D1(2), D2(0), D2(1), D2(2)];
    let reps = 5;
    let res = local::run(ranks, |c| {
        let l = Layout::pencils(g, c.size(), 2)?;
        let r = c.rank();
        let b = l.box_of(r);
        let st = l.strides(r);
        let mut f = vec![0.0; l.local_len(r)];
        let tau = 2.0 * std::f64::consts::PI / n as f64;
        for i in b.lo[0]..b.hi[0] {
            for j in b.lo[1]..b.hi[1] {
                for k in b.lo[2]..b.hi[2] {
                    let o = (i - b.lo[0]) * st[0] + (j - b.lo[1]) * st[1] + (k - b.lo[2]) * st[2];
                    f[o] = (tau * i as f64).sin() * (2.0 * tau * j as f64).cos()
                        + (3.0 * tau * k as f64).sin();
                }
            }
        }
        // 1D route.
        let mut d1 = Derivatives::new(c, &l, [1.0; 3], &reqs, Protocol::Alltoallv)?;
        let mut out1 = vec![0.0; d1.output_len()];
        let mut t1 = vec![];
        for _ in 0..reps {
            c.barrier()?;
            let t = Instant::now();
            d1.apply(c, &f, &mut out1)?;
            t1.push(c.allreduce_scalar(t.elapsed().as_secs_f64(), ReduceOp::Max)?);
        }
        // 3D route.
        let opts = Options {
            normalization: Normalization::Full,
            ..Options::default()
        };
        let mut p3 = Fft3d::c2c(c, &l, opts)?;
        let x: Vec<Complex64> = f.iter().map(|&v| Complex64::new(v, 0.0)).collect();
        let mut spec = vec![Complex64::default(); p3.output_len()];
        let mut tmp = vec![Complex64::default(); p3.output_len()];
        let mut back = vec![Complex64::default(); p3.input_len()];
        let mut scratch = vec![Complex64::default(); p3.scratch_len()];
        let ol = p3.output_layout().clone();
        let ob = ol.box_of(r);
        let os = ol.strides(r);
        let kq = |q: usize| {
            let m = if q <= n / 2 {
                q as f64
            } else {
                q as f64 - n as f64
            };
            2.0 * std::f64::consts::PI * m
        };
        let mut out3 = vec![0.0; out1.len()];
        let mut t3 = vec![];
        let nl = l.local_len(r);
        for _ in 0..reps {
            c.barrier()?;
            let t = Instant::now();
            p3.forward(c, &x, &mut spec, &mut scratch)?;
            for (ri, d) in reqs.iter().enumerate() {
                for i in ob.lo[0]..ob.hi[0] {
                    for j in ob.lo[1]..ob.hi[1] {
                        for k in ob.lo[2]..ob.hi[2] {
                            let o = (i - ob.lo[0]) * os[0]
                                + (j - ob.lo[1]) * os[1]
                                + (k - ob.lo[2]) * os[2];
                            let kv = [kq(i), kq(j), kq(k)];
                            let q = [i, j, k];
                            let fac = match d {
                                D1(a) if n % 2 == 0 && q[*a] == n / 2 => Complex64::new(0.0, 0.0),
                                D1(a) => Complex64::new(0.0, kv[*a]),
                                D2(a) => Complex64::new(-kv[*a] * kv[*a], 0.0),
                                _ => unreachable!(),
                            };
                            tmp[o] = spec[o] * fac;
                        }
                    }
                }
                p3.backward(c, &tmp, &mut back, &mut scratch)?;
                for (dst, v) in out3[ri * nl..(ri + 1) * nl].iter_mut().zip(&back) {
                    *dst = v.re;
                }
            }
            t3.push(c.allreduce_scalar(t.elapsed().as_secs_f64(), ReduceOp::Max)?);
        }
        let diff = out1
            .iter()
            .zip(&out3)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        let diff = c.allreduce_scalar(diff, ReduceOp::Max)?;
        t1.sort_by(f64::total_cmp);
        t3.sort_by(f64::total_cmp);
        // Fields moved by the 3D route: every reshape of the forward plan,
        // for one forward and one backward per derivative.
        let moved3 = p3.reshapes() * (1 + reqs.len());
        Ok::<_, FftError>((t1[reps / 2], t3[reps / 2], diff, d1.fields_moved(), moved3))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let (t1, t3, diff, m1, m3) = res[0];
    println!("gradient + Hessian diagonal of a {n}^3 field on {ranks} in-process rank(s), z-pencil input, median of {reps}");
    println!("1D route: {:>9.3} ms, fields moved {m1}", t1 * 1e3);
    println!("3D route: {:>9.3} ms, fields moved {m3}", t3 * 1e3);
    println!(
        "3D / 1D time: {:.2}x;  max |difference| {diff:.3e}",
        t3 / t1
    );
}
