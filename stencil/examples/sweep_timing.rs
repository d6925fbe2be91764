//! One stencil sweep over a cube on every CPU kernel and store policy this
//! machine has, with a copy of the same bytes and the FMA peak beside it:
//!
//! ```text
//! cargo run --release -p parnum-stencil --example sweep_timing -- N ORDER [REPS]
//! ```
//!
//! Every kernel's output is checked bit for bit against the first one's.
//! With AVX-512 it also prints what the sweep's operations reach with their
//! data in the L1 (`stencil::peak::term_rates`), and each kernel's
//! share of that.
//! Times are the median of `REPS` sweeps (default 10) of the `N^3` owned
//! cells of a field with `ORDER / 2` ghost layers; the copy moves one padded
//! array into another, the faster of `copy_from_slice` and a copy with
//! non-temporal stores (the median of each, then the smaller).

use halo::{FieldLayout, Region};
use std::time::Instant;
use stencil::peak::{copy_streaming, flops_per_cell, fma_peak, term_rates};
use stencil::{Kernel, Stores, Sweep};

fn median(mut t: Vec<f64>) -> f64 {
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("arguments: N ORDER [REPS]"))
        .collect();
    let (n, order) = match args[..] {
        [n, order, ..] => (n, order),
        _ => panic!("arguments: N ORDER [REPS]"),
    };
    let reps = args.get(2).copied().unwrap_or(10).max(1);
    let r = order / 2;
    let layout = FieldLayout {
        owned: [n; 3],
        ghost: [r; 3],
        components: 1,
    };
    let len = layout.padded_len();
    // Allocated as the solver's fields are (huge pages offered on Linux).
    let mut u: Vec<f64> = halo::zeroed(len);
    for (i, v) in u.iter_mut().enumerate() {
        *v = ((i * 7919) % 1000) as f64 * 1e-3;
    }
    let mut out: Vec<f64> = halo::zeroed(len);
    let region = Region {
        lo: [r; 3],
        hi: [n + r; 3],
    };
    // The median of `reps` timed copies after an untimed one.
    let mut timed = |copy: fn(&mut [f64], &[f64])| {
        copy(&mut out, &u);
        median(
            (0..reps)
                .map(|_| {
                    let t = Instant::now();
                    copy(&mut out, std::hint::black_box(&u));
                    t.elapsed().as_secs_f64()
                })
                .collect(),
        )
    };
    let library = timed(|d, s| d.copy_from_slice(s));
    let streaming = timed(copy_streaming);
    let copy = library.min(streaming);
    let peak = fma_peak(4_000_000, 5);
    println!(
        "{n}^3, order {order}: copy of the padded array {:.3} ms (memcpy {:.3}, non-temporal {:.3}); FMA peak {:.1} GFLOP/s ({})",
        copy * 1e3,
        library * 1e3,
        streaming * 1e3,
        peak.gflops,
        peak.summary()
    );
    // A rate as a share of the peak; none above it (`FmaPeak::above` says
    // why).
    let of_peak = |gflops: f64| {
        peak.share(gflops).map_or(peak.above().to_string(), |s| {
            format!("{:>5.1}% of the FMA peak", 100.0 * s)
        })
    };
    // What the sweep's operations reach with their data in the L1: one
    // axis's terms on aligned rows and along a row, and a whole cell at
    // those rates (the ceiling of kernels without fused multiply-adds).
    let ceiling = term_rates(order, 20_000, 5);
    if let Some(t) = ceiling {
        println!(
            "terms in the L1 (avx512, separate multiplies and adds): one axis {:.1} GFLOP/s on aligned rows, {:.1} along a row; a whole cell {:.1} GFLOP/s, {}",
            t.strided,
            t.contiguous,
            t.cell,
            of_peak(t.cell)
        );
    }
    let flops = (n * n * n * flops_per_cell(order)) as f64;
    let mut reference: Option<Vec<f64>> = None;
    for kernel in Kernel::ALL.into_iter().filter(|k| k.available()) {
        for stores in [Stores::Cached, Stores::Streaming] {
            if kernel == Kernel::Portable && stores == Stores::Streaming {
                continue; // the scalar kernel always uses plain stores
            }
            let sweep = Sweep::new(order, [0.1; 3], 1e-3, true)
                .and_then(|s| s.with_kernel(kernel))
                .expect("a valid order")
                .with_stores(stores);
            sweep.apply(&layout, &u, &mut out, &region);
            let t = median(
                (0..reps)
                    .map(|_| {
                        let t = Instant::now();
                        sweep.apply(&layout, &u, &mut out, &region);
                        t.elapsed().as_secs_f64()
                    })
                    .collect(),
            );
            match &reference {
                None => reference = Some(out.clone()),
                Some(x) => assert!(
                    x.iter().zip(&out).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{kernel:?} {stores:?} changed the bits"
                ),
            }
            let of_ceiling = ceiling
                .map(|c| {
                    format!(
                        "  {:>5.1}% of the L1 terms",
                        100.0 * flops / t / 1e9 / c.cell
                    )
                })
                .unwrap_or_default();
            println!(
                "{:>7} {:<9} {:>9.3} ms  {:>5.2}x the copy  {:>6.2} GFLOP/s  {}{of_ceiling}",
                kernel.name(),
                format!("{stores:?}"),
                t * 1e3,
                t / copy,
                flops / t / 1e9,
                of_peak(flops / t / 1e9)
            );
        }
    }
}
