//! The device's copy bandwidth: the reference every memory-bound kernel is
//! measured against. A device-to-device copy of `MIB` mebibytes (default
//! 2048, far past the L2 cache), repeated; prints one JSON line with the
//! median time and the bandwidth counting bytes read plus bytes written (and
//! the number of devices present).
//!
//! `cargo run --release -p parnum-gpu --features cuda --example copy_bandwidth -- [MIB] [REPEATS]`

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mib: usize = args.next().map_or(Ok(2048), |s| s.parse())?;
    let repeats: usize = args.next().map_or(Ok(30), |s| s.parse())?;
    let dev = gpu::cuda::Device::open(0)?;
    let n = mib * (1 << 20) / 8;
    let src = dev.upload(
        &(0..n).map(|i| (i as f64).sqrt()).collect::<Vec<f64>>(),
        "source",
    )?;
    let mut dst = dev.alloc_zeros::<f64>(n, "destination")?;
    let mut times = Vec::with_capacity(repeats);
    for r in 0..repeats + 3 {
        let a = dev.mark()?;
        dev.main()
            .memcpy_dtod(&src, &mut dst)
            .map_err(|e| format!("cuMemcpyDtoDAsync: {e:?}"))?;
        let b = dev.mark()?;
        let t = a.seconds_until(&b)?;
        if r >= 3 {
            times.push(t);
        }
    }
    // Every value arrived.
    let back = dev.download(&dst)?;
    if back
        .iter()
        .enumerate()
        .any(|(i, v)| *v != (i as f64).sqrt())
    {
        return Err("the copy is wrong".into());
    }
    times.sort_by(f64::total_cmp);
    let t = times[times.len() / 2];
    let bytes = n * 8;
    println!(
        "{{\"bytes\": {bytes}, \"seconds\": {t:e}, \"bandwidth\": {:e}, \"device\": \"{}\", \"devices\": {}}}",
        2.0 * bytes as f64 / t,
        dev.info().name,
        gpu::cuda::device_count()?
    );
    Ok(())
}
