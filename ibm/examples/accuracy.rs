//! Prints the accuracy of the cut-cell geometry (fluid volume and wetted
//! area of one sphere and of a simple cubic array against the exact
//! values) at several resolutions and sub-sampling depths, and the cost of
//! distance queries on a random packing.
//!
//! `cargo run --release -p parnum-ibm --example accuracy`

use comm::IndexBox;
use ibm::{Body, CutCells, CutOptions, Lattice, LatticeKind, MacGrid, Packing};
use std::f64::consts::PI;
use std::time::Instant;

fn measure(name: &str, body: &dyn Body, area: f64) {
    let c = body.solid_fraction_exact().unwrap();
    println!(
        "{name}: exact fluid fraction {:.6}, area {:.6}",
        1.0 - c,
        area
    );
    println!("   n  depth   volume err    rel area err   seconds");
    for n in [16usize, 32, 64] {
        let grid = MacGrid::new([n; 3], [1.0; 3]).unwrap();
        for depth in 0..=3 {
            let t = Instant::now();
            let cut = CutCells::with_options(
                body,
                &grid,
                IndexBox::from_shape([n; 3]),
                1,
                CutOptions { depth },
            )
            .unwrap();
            let secs = t.elapsed().as_secs_f64();
            let fluid: f64 = cut.owned_volume_fractions().sum::<f64>() / (n * n * n) as f64;
            let mut a = 0.0;
            for i in 0..n as i64 {
                for j in 0..n as i64 {
                    for k in 0..n as i64 {
                        let v = cut.wall_area([i, j, k]).unwrap();
                        a += (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt();
                    }
                }
            }
            println!(
                "{n:4} {depth:6} {:13.3e} {:14.3e} {secs:9.3}",
                fluid - (1.0 - c),
                a / area - 1.0
            );
        }
    }
}

struct Counting<'a>(&'a dyn Body, std::sync::atomic::AtomicUsize);
impl Body for Counting<'_> {
    fn distance(&self, x: [f64; 3]) -> f64 {
        self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.0.distance(x)
    }
    fn lengths(&self) -> [f64; 3] {
        self.0.lengths()
    }
}

fn main() {
    if std::env::var_os("IBM_PACKING_ONLY").is_none() {
        spheres();
    }
    packing();
}

fn spheres() {
    let r = 0.3;
    let one = Packing::single([0.51, 0.47, 0.53], r, [1.0; 3]).unwrap();
    measure("one sphere r = 0.3", &one, 4.0 * PI * r * r);
    let sc = Lattice::for_solid_fraction(LatticeKind::Sc, [1.0; 3], [1; 3], 0.4).unwrap();
    let rs = sc.radius();
    measure(
        "SC array, one sphere per box, c = 0.4",
        &sc,
        4.0 * PI * rs * rs,
    );
}

fn packing() {
    let t = Instant::now();
    let p = Packing::random([1.0; 3], 0.0508, 0.55, 1).unwrap();
    println!(
        "random packing: {} spheres at c = {:.4} in {:.3} s",
        p.len(),
        p.solid_fraction(),
        t.elapsed().as_secs_f64()
    );
    let n = 256;
    let h = 1.0 / n as f64;
    let t = Instant::now();
    let mut solid = 0usize;
    for i in 0..n {
        for j in 0..n {
            for k in 0..n {
                let x = [
                    (i as f64 + 0.5) * h,
                    (j as f64 + 0.5) * h,
                    (k as f64 + 0.5) * h,
                ];
                solid += usize::from(p.distance(x) <= 0.0);
            }
        }
    }
    println!(
        "{n}^3 distance queries: {:.2} s (solid fraction of centres {:.4})",
        t.elapsed().as_secs_f64(),
        solid as f64 / (n * n * n) as f64
    );
    let n = 128;
    let grid = MacGrid::new([n; 3], [1.0; 3]).unwrap();
    for depth in [0, 1, 2] {
        let opts = CutOptions { depth };
        let whole = IndexBox::from_shape([n; 3]);
        let t = Instant::now();
        let cut = CutCells::with_options(&p, &grid, whole, 0, opts).unwrap();
        let secs = t.elapsed().as_secs_f64();
        let fluid: f64 = cut.owned_volume_fractions().sum::<f64>() / (n * n * n) as f64;
        let cutn = cut
            .volume_fractions()
            .iter()
            .filter(|&&v| v > 0.0 && v < 1.0)
            .count();
        let counting = Counting(&p, Default::default());
        CutCells::with_options(&counting, &grid, whole, 0, opts).unwrap();
        println!(
            "cut cells of the packing on {n}^3, depth {depth}: {secs:.2} s, {} distance evaluations, {cutn} cut cells, fluid fraction error {:.3e}",
            counting.1.into_inner(),
            fluid - (1.0 - p.solid_fraction())
        );
    }
}
