//! Probe: column-form radix-8x8 FFT of 64 along a strided axis, in place.
#![allow(clippy::all, unsafe_op_in_unsafe_fn)]
use num_complex::Complex64;
use rustfft::{FftDirection, FftPlanner};
use std::arch::x86_64::*;
use std::time::Instant;

#[inline(always)]
unsafe fn neg_odd() -> __m512d {
    _mm512_castsi512_pd(_mm512_set_epi64(
        i64::MIN, 0, i64::MIN, 0, i64::MIN, 0, i64::MIN, 0,
    ))
}
/// (bi, -br): times -i
#[inline(always)]
unsafe fn mni(b: __m512d) -> __m512d {
    let s = _mm512_permute_pd::<0x55>(b);
    _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(s), _mm512_castpd_si512(neg_odd())))
}
#[inline(always)]
unsafe fn add(a: __m512d, b: __m512d) -> __m512d {
    _mm512_add_pd(a, b)
}
#[inline(always)]
unsafe fn sub(a: __m512d, b: __m512d) -> __m512d {
    _mm512_sub_pd(a, b)
}

/// Forward DFT of 8 (sign -1).
#[inline(always)]
unsafe fn dft8(a: [__m512d; 8]) -> [__m512d; 8] {
    let s = _mm512_set1_pd(std::f64::consts::FRAC_1_SQRT_2);
    let b0 = add(a[0], a[4]);
    let b1 = sub(a[0], a[4]);
    let b2 = add(a[2], a[6]);
    let b3 = sub(a[2], a[6]);
    let b4 = add(a[1], a[5]);
    let b5 = sub(a[1], a[5]);
    let b6 = add(a[3], a[7]);
    let b7 = sub(a[3], a[7]);
    let e0 = add(b0, b2);
    let e2 = sub(b0, b2);
    let m3 = mni(b3);
    let e1 = add(b1, m3);
    let e3 = sub(b1, m3);
    let o0 = add(b4, b6);
    let o2 = sub(b4, b6);
    let m7 = mni(b7);
    let o1 = add(b5, m7);
    let o3 = sub(b5, m7);
    // w8 o1 = ((r+i)s, (i-r)s): o1 + (-i) o1 = (r + i, i - r)
    let t1 = _mm512_mul_pd(add(o1, mni(o1)), s);
    let t2 = mni(o2);
    // w8^3 o3 = ((i - r)s, -(r + i)s) = (-i)(o3 + (-i) o3)... use: -i*(r+i, i-r) = (i-r, -(r+i))
    let t3 = _mm512_mul_pd(mni(add(o3, mni(o3))), s);
    [
        add(e0, o0),
        add(e1, t1),
        add(e2, t2),
        add(e3, t3),
        sub(e0, o0),
        sub(e1, t1),
        sub(e2, t2),
        sub(e3, t3),
    ]
}

struct Tw {
    wr: Vec<__m512d>,
    wi: Vec<__m512d>,
}

unsafe fn twiddles() -> Tw {
    let mut wr = vec![];
    let mut wi = vec![];
    for k1 in 0..8 {
        for n2 in 0..8 {
            let ang = -2.0 * std::f64::consts::PI * (n2 * k1) as f64 / 64.0;
            let (s, c) = ang.sin_cos();
            wr.push(_mm512_set1_pd(c));
            wi.push(_mm512_set_pd(s, -s, s, -s, s, -s, s, -s));
        }
    }
    Tw { wr, wi }
}

#[inline(always)]
unsafe fn cmul(a: __m512d, wr: __m512d, wi: __m512d) -> __m512d {
    add(_mm512_mul_pd(a, wr), _mm512_mul_pd(_mm512_permute_pd::<0x55>(a), wi))
}

/// Columns [0, 4*V) complex of rows `row(n)` (n < 64), in place.
#[inline(always)]
unsafe fn col64<const V: usize>(base: *mut f64, stride: usize, buf: *mut f64, tw: &Tw, pf: *const f64) {
    // pass 1
    for n2 in 0..8 {
        for v in 0..V {
            let mut a = [_mm512_setzero_pd(); 8];
            for n1 in 0..8 {
                a[n1] = _mm512_loadu_pd(base.add((8 * n1 + n2) * stride + 8 * v));
            }
            if v == 0 && !pf.is_null() {
                for n1 in 0..8 {
                    for l in 0..V.div_ceil(1) {
                        _mm_prefetch::<_MM_HINT_T0>(pf.add((8 * n1 + n2) * stride + 8 * l) as *const i8);
                    }
                }
            }
            let y = dft8(a);
            for k1 in 0..8 {
                let t = if n2 == 0 || k1 == 0 { y[k1] } else { cmul(y[k1], tw.wr[8 * k1 + n2], tw.wi[8 * k1 + n2]) };
                _mm512_store_pd(buf.add((8 * k1 + n2) * 8 * V + 8 * v), t);
            }
        }
    }
    for k1 in 0..8 {
        for v in 0..V {
            let mut a = [_mm512_setzero_pd(); 8];
            for n2 in 0..8 {
                a[n2] = _mm512_load_pd(buf.add((8 * k1 + n2) * 8 * V + 8 * v));
            }
            let x = dft8(a);
            for k2 in 0..8 {
                _mm512_storeu_pd(base.add((k1 + 8 * k2) * stride + 8 * v), x[k2]);
            }
        }
    }
}

#[target_feature(enable = "avx512f")]
unsafe fn zpass<const V: usize>(f: &mut [Complex64], n: usize, tw: &Tw, buf: &mut [f64]) {
    let plane = n * n;
    let p = f.as_mut_ptr() as *mut f64;
    let w = 4 * V;
    let blocks = plane / w;
    for b in 0..blocks {
        let pf = if b + 1 < blocks { p.add(2 * (b + 1) * w) as *const f64 } else { std::ptr::null() };
        col64::<V>(p.add(2 * b * w), 2 * plane, buf.as_mut_ptr(), tw, pf);
    }
}

#[target_feature(enable = "avx512f")]
unsafe fn ypass<const V: usize>(f: &mut [Complex64], n: usize, tw: &Tw, buf: &mut [f64]) {
    let plane = n * n;
    let p = f.as_mut_ptr() as *mut f64;
    let w = 4 * V;
    for i in 0..n {
        for b in 0..n / w {
            col64::<V>(p.add(2 * (i * plane + b * w)), 2 * n, buf.as_mut_ptr(), tw, std::ptr::null());
        }
    }
}

fn best(mut f: impl FnMut(), reps: usize) -> f64 {
    let mut b = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        f();
        b = b.min(t.elapsed().as_secs_f64());
    }
    b * 1e3
}

fn main() {
    let n = 64;
    let len = n * n * n;
    let mut f: Vec<Complex64> = (0..len).map(|i| Complex64::new((i % 7) as f64, (i % 3) as f64 - 1.0)).collect();
    let orig = f.clone();
    let mut buf = vec![0.0f64; 64 * 8 * 32 + 8];
    let off = (64 - (buf.as_ptr() as usize % 64)) % 64 / 8;
    let buf = &mut buf[off..];
    let tw = unsafe { twiddles() };
    // check z pass against rustfft
    unsafe { zpass::<2>(&mut f, n, &tw, buf) };
    let plan = FftPlanner::<f64>::new().plan_fft(n, FftDirection::Forward);
    let mut maxe: f64 = 0.0;
    for c in [0usize, 5, 77, 4095] {
        let mut line: Vec<Complex64> = (0..n).map(|k| orig[k * n * n + c]).collect();
        plan.process(&mut line);
        for k in 0..n {
            maxe = maxe.max((line[k] - f[k * n * n + c]).norm());
        }
    }
    println!("z check max err {maxe:.2e}");
    let mut g = orig.clone();
    unsafe { ypass::<2>(&mut g, n, &tw, buf) };
    let mut maxe: f64 = 0.0;
    for (i, c) in [(0usize, 0usize), (3, 5), (63, 63)] {
        let mut line: Vec<Complex64> = (0..n).map(|k| orig[i * n * n + k * n + c]).collect();
        plan.process(&mut line);
        for k in 0..n {
            maxe = maxe.max((line[k] - g[i * n * n + k * n + c]).norm());
        }
    }
    println!("y check max err {maxe:.2e}");
    let reps = 200;
    for _ in 0..3 {
        let mut blk: Vec<Complex64> = orig[..64 * 8].to_vec();
        let t = best(|| unsafe { l1_kernel::<1>(&mut blk, &tw, buf, 10000) }, 5);
        let t2 = best(|| unsafe { l1_kernel::<2>(&mut blk, &tw, buf, 10000) }, 5);
        println!("L1 kernel: {:.1} ns a line (W=4), {:.1} (W=8)", t * 1e6 / 40000.0, t2 * 1e6 / 80000.0);
    }
    let mut o = orig.clone();
    let t = best(|| o.copy_from_slice(&f), reps);
    println!("copy 4 MiB -> 4 MiB: {t:.3} ms");
    let t = best(|| f.iter_mut().for_each(|v| *v = *v * 1.0000001), reps);
    println!("in place scale: {t:.3} ms");
    {
        let mut sc = vec![Complex64::default(); plan.get_inplace_scratch_len()];
        let src = orig.clone();
        let mut out = vec![Complex64::default(); len];
        for _ in 0..3 {
            let t = best(|| unsafe {
                for i in 0..n {
                    let o = &mut out[i * n * n..(i + 1) * n * n];
                    o.copy_from_slice(&src[i * n * n..(i + 1) * n * n]);
                    plan.process_with_scratch(o, &mut sc);
                    let p = o.as_mut_ptr() as *mut f64;
                    for b in 0..n / 8 {
                        col64_y(p.add(2 * b * 8), 2 * n, buf.as_mut_ptr(), &tw);
                    }
                }
                zpass::<2>(&mut out, n, &tw, buf);
            }, reps);
            println!("full 64^3 estimate (x rustfft, y, z column): {t:.3} ms");
            for stage in 0..3 {
            let t = best(|| unsafe {
                for i in 0..n {
                    let o = &mut out[i * n * n..(i + 1) * n * n];
                    o.copy_from_slice(&src[i * n * n..(i + 1) * n * n]);
                    if stage >= 1 { plan.process_with_scratch(o, &mut sc); }
                    let p = o.as_mut_ptr() as *mut f64;
                    if stage >= 2 { for b in 0..n / 8 {
                        col64_y(p.add(2 * b * 8), 2 * n, buf.as_mut_ptr(), &tw);
                    } }
                }
            }, reps);
            println!("  pass A stage {stage}: {t:.3} ms");
            }
        }
    }
    for _ in 0..2 {
        let t1 = best(|| unsafe { zpass::<1>(&mut f, n, &tw, buf) }, reps);
        let t2 = best(|| unsafe { zpass::<2>(&mut f, n, &tw, buf) }, reps);
        let t4 = best(|| unsafe { zpass::<4>(&mut f, n, &tw, buf) }, reps);
        let t8 = best(|| unsafe { zpass::<8>(&mut f, n, &tw, buf) }, reps);
        println!("z pass W=4/8/16/32: {t1:.3} {t2:.3} {t4:.3} {t8:.3} ms");
        let t1 = best(|| unsafe { ypass::<1>(&mut f, n, &tw, buf) }, reps);
        let t2 = best(|| unsafe { ypass::<2>(&mut f, n, &tw, buf) }, reps);
        let t4 = best(|| unsafe { ypass::<4>(&mut f, n, &tw, buf) }, reps);
        let t8 = best(|| unsafe { ypass::<8>(&mut f, n, &tw, buf) }, reps);
        println!("y pass W=4/8/16/32: {t1:.3} {t2:.3} {t4:.3} {t8:.3} ms");
        // rustfft contiguous x lines in place (kernel + pass)
        let mut sc = vec![Complex64::default(); plan.get_inplace_scratch_len()];
        let t = best(|| plan.process_with_scratch(&mut f, &mut sc), reps);
        println!("x pass rustfft in place: {t:.3} ms");
        f.iter_mut().for_each(|v| *v = *v * (1.0 / 4096.0));
    }
}

#[target_feature(enable = "avx512f")]
pub unsafe fn l1_kernel<const V: usize>(f: &mut [Complex64], tw: &Tw, buf: &mut [f64], reps: usize) {
    let p = f.as_mut_ptr() as *mut f64;
    for _ in 0..reps {
        col64::<V>(p, 8 * V, buf.as_mut_ptr(), tw, std::ptr::null());
    }
}

#[target_feature(enable = "avx512f")]
unsafe fn col64_y(p: *mut f64, stride: usize, buf: *mut f64, tw: &Tw) {
    col64::<2>(p, stride, buf, tw, std::ptr::null());
}
