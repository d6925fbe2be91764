//! Cost of exact summation: `ExactSum::add_slice` + `to_f64` against a plain
//! `iter().sum()`, a Neumaier (compensated) sum and the `xsum` crate.
//!
//! Run with `cargo bench -p parnum-comm --bench exact_sum`. Prints, for each size,
//! the median time per element over several repetitions and the ratios of
//! the exact sum to the plain sum and to the fastest xsum variant.

use comm::exact::ExactSum;
use std::hint::black_box;
use std::time::Instant;
use xsum::{Xsum, XsumAuto, XsumLarge};

/// SplitMix64: a tiny, fixed-seed generator for reproducible data.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1) times 2^k with k uniform in -20..=20.
    fn value(&mut self) -> f64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        let k = (self.next() % 41) as i32 - 20;
        (2.0 * u - 1.0) * 2f64.powi(k)
    }
}

/// A summation method under test.
type Method = fn(&[f64]) -> f64;

fn plain(xs: &[f64]) -> f64 {
    xs.iter().sum()
}

/// Neumaier's improved Kahan summation.
fn neumaier(xs: &[f64]) -> f64 {
    let (mut s, mut c) = (0.0f64, 0.0f64);
    for &x in xs {
        let t = s + x;
        if s.abs() >= x.abs() {
            c += (s - t) + x;
        } else {
            c += (x - t) + s;
        }
        s = t;
    }
    s + c
}

fn exact(xs: &[f64]) -> f64 {
    let mut acc = ExactSum::new();
    acc.add_slice(xs);
    acc.to_f64()
}

fn xsum_auto(xs: &[f64]) -> f64 {
    let mut acc = XsumAuto::new();
    acc.add_list(xs);
    acc.sum()
}

fn xsum_large(xs: &[f64]) -> f64 {
    let mut acc = XsumLarge::new();
    acc.add_list(xs);
    acc.sum()
}

/// Median over `samples` samples of the time per element, in ns; each sample
/// repeats the sum `inner` times.
fn time(xs: &[f64], f: Method, samples: usize, inner: usize) -> f64 {
    let mut t: Vec<f64> = (0..samples)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..inner {
                black_box(f(black_box(xs)));
            }
            start.elapsed().as_secs_f64() * 1e9 / (inner * xs.len()) as f64
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[samples / 2]
}

fn main() {
    let mut g = SplitMix(0x5eed);
    let all: Vec<f64> = (0..10_000_000).map(|_| g.value()).collect();
    let methods: [(&str, Method); 5] = [
        ("plain", plain),
        ("neumaier", neumaier),
        ("exact", exact),
        ("xsum_auto", xsum_auto),
        ("xsum_large", xsum_large),
    ];
    println!("exact_sum: median ns per element (values (2u-1)*2^k, k in -20..=20)");
    println!(
        "{:>10} {:>9} {:>9} {:>9} {:>10} {:>10} {:>12} {:>11}",
        "n", "plain", "neumaier", "exact", "xsum_auto", "xsum_large", "exact/plain", "exact/xsum"
    );
    for n in [1_000usize, 100_000, 10_000_000] {
        let xs = &all[..n];
        // Each sample covers at least ~1e6 elements; 7 samples (5 for 1e7).
        let inner = (1_000_000 / n).max(1);
        let samples = if n >= 10_000_000 { 5 } else { 7 };
        // Warm up, and compare the exact methods (xsum 0.1.6 can misround
        // negative sums by one ulp, see the tests of `comm::exact`).
        let e = exact(xs);
        let xa = xsum_auto(xs);
        if e.to_bits() != xa.to_bits() {
            println!("   (n = {n}: exact {e:e} differs from xsum {xa:e} in the last place)");
        }
        let t: Vec<f64> = methods
            .iter()
            .map(|&(_, f)| time(xs, f, samples, inner))
            .collect();
        let best_xsum = t[3].min(t[4]);
        println!(
            "{:>10} {:>9.3} {:>9.3} {:>9.3} {:>10.3} {:>10.3} {:>12.2} {:>11.2}",
            n,
            t[0],
            t[1],
            t[2],
            t[3],
            t[4],
            t[2] / t[0],
            t[2] / best_xsum
        );
    }
}
