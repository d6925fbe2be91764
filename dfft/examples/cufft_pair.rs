//! The reference for a spectral step on one GPU: a bare cuFFT D2Z and Z2D
//! of an `N^3` grid, repeated; prints one JSON line with the median time of
//! the pair.
//!
//! `cargo run --release -p parnum-dfft --features cuda --example cufft_pair -- N [REPEATS]`

use dfft::cuda::{DeviceComplex, DeviceR2c};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .ok_or("usage: cufft_pair N [REPEATS]")?
        .parse()?;
    let repeats: usize = args.next().map_or(Ok(20), |s| s.parse())?;
    let dev = gpu::cuda::Device::open(0)?;
    let plan = DeviceR2c::new(&dev, [n; 3], 1)?;
    let host: Vec<f64> = (0..plan.real_len())
        .map(|i| ((i % 977) as f64).sin())
        .collect();
    let mut real = dev.upload(&host, "real")?;
    let mut spec = dev.alloc_zeros::<DeviceComplex>(plan.spectrum_len(), "spectrum")?;
    let mut times = Vec::with_capacity(repeats);
    for r in 0..repeats + 3 {
        let a = dev.mark()?;
        plan.forward(&real.slice(..), &mut spec)?;
        plan.backward(&mut spec, &mut real.slice_mut(..))?;
        let b = dev.mark()?;
        let t = a.seconds_until(&b)?;
        if r >= 3 {
            times.push(t);
        }
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{{\"n\": {n}, \"seconds\": {:e}, \"device\": \"{}\"}}",
        times[times.len() / 2],
        dev.info().name
    );
    Ok(())
}
