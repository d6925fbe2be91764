//! Halo exchange throughput for ghost widths 1 to 10 against a plain memory
//! copy of the same bytes, measured side by side in one run.
//!
//! `cargo bench -p parnum-halo --bench halo_exchange [-- RANKS [N]]` (default: 2
//! in-process ranks, 128^3 cells per rank, faces only).

use comm::{local, BlockDecomposition, CommExt, ProcessGrid, ReduceOp};
use halo::{Exchanger, Field, HaloSpec, Neighborhood, Topology};
use std::hint::black_box;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let ranks: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(2);
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(128);
    let reps = 15;
    println!("halo exchange, {ranks} in-process rank(s), {n}^3 cells per rank, one f64 component, median of {reps}");
    println!(
        "{:>5} {:>10} {:>11} {:>11} {:>11} {:>8} {:>9}",
        "width", "neighbors", "MB/rank", "exchange ms", "memcpy ms", "ratio", "GB/s"
    );
    for nb in [Neighborhood::Faces, Neighborhood::Full] {
        println!("-- {nb:?}");
        for w in 1..=10 {
            let rows = local::run(ranks, |c| {
                let grid = ProcessGrid::for_shape([n * ranks, n, n], ranks, [true; 3])?;
                let shape = [0, 1, 2].map(|d| n * grid.dims()[d]);
                let dec = BlockDecomposition::new(shape, grid)?;
                let topo = Topology::new(c, &dec, HaloSpec::uniform(w, nb))?;
                let mut u = Field::<f64>::new(topo.layout(1));
                u.as_mut_slice()
                    .iter_mut()
                    .enumerate()
                    .for_each(|(i, x)| *x = i as f64);
                let mut ex = Exchanger::new(&topo, 1, 0)?;
                ex.exchange(c, &mut [&mut u])?;
                let s = ex.stats();
                let values = (s.values_sent + s.values_copied) as usize;
                // Reference: copy the same number of bytes twice (pack and
                // unpack each move every value once).
                let src = vec![1.0f64; values];
                let mut dst = vec![0.0f64; values];
                let mut dst2 = vec![0.0f64; values];
                let mut t_ex = vec![];
                let mut t_cp = vec![];
                for _ in 0..reps {
                    c.barrier()?;
                    let t = Instant::now();
                    ex.exchange(c, &mut [&mut u])?;
                    let mut dt = [t.elapsed().as_secs_f64()];
                    c.allreduce_f64(&mut dt, ReduceOp::Max)?;
                    t_ex.push(dt[0]);
                    let t = Instant::now();
                    dst.copy_from_slice(black_box(&src));
                    black_box(&mut dst);
                    dst2.copy_from_slice(black_box(&dst));
                    black_box(&dst2);
                    let mut dt = [t.elapsed().as_secs_f64()];
                    c.allreduce_f64(&mut dt, ReduceOp::Max)?;
                    t_cp.push(dt[0]);
                }
                let _ = c.allreduce_scalar(0.0, ReduceOp::Sum)?;
                Ok::<_, halo::HaloError>((
                    topo.neighbors().len(),
                    values,
                    median(t_ex),
                    median(t_cp),
                ))
            })
            .expect("benchmark run");
            let (neighbors, values, te, tc) = rows[0];
            let mb = values as f64 * 8.0 / 1e6;
            println!(
                "{w:>5} {neighbors:>10} {mb:>11.2} {:>11.3} {:>11.3} {:>8.2} {:>9.2}",
                te * 1e3,
                tc * 1e3,
                te / tc,
                mb / 1e3 / te
            );
        }
    }
}
