use heat3d::stencil::Sweep;
use std::time::Instant;
fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap())
        .collect();
    let (rows, nplanes, reps) = (args[0], args[1], args[2]);
    let rs = 272;
    let slot = (rows + 2) * rs;
    let sweep = Sweep::new(2, [1.0; 3], 0.01, true).unwrap();
    let mut src = vec![0.5f64; nplanes * slot + 64];
    let base = (64 - src.as_ptr() as usize % 64) % 64 / 8;
    for (i, v) in src.iter_mut().enumerate() {
        *v = (i % 97) as f64 * 0.01;
    }
    let mut dst = vec![0.0f64; slot * nplanes + 64];
    let dbase = (64 - dst.as_ptr() as usize % 64) % 64 / 8;
    let t = Instant::now();
    let mut cells = 0usize;
    for it in 0..reps {
        for q in 0..nplanes {
            let planes = [
                base + ((q + nplanes - 1) % nplanes) * slot,
                base + q * slot,
                base + ((q + 1) % nplanes) * slot,
            ];
            let at = dbase + ((q + it) % nplanes) * slot + rs + 8;
            sweep.apply_plane(
                &src,
                &planes,
                rs,
                1..1 + rows,
                8..8 + 256,
                &mut dst,
                (at, rs),
                false,
            );
            cells += rows * 256;
        }
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "rows {rows} planes {nplanes}: {:.3} ns/cell ({:.1} KiB/plane)",
        s / cells as f64 * 1e9,
        slot as f64 * 8.0 / 1024.0
    );
}
