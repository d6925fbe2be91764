//! Times MG-PCG on the device against the same build's host solver on one
//! rank: `cargo run --release -p parnum-multigrid --features cuda --example
//! device_pcg -- [n] [rounds]` (default 128, 3 rounds). Prints the GPU and
//! CPU models, then per round the host and device solve times, the
//! iteration counts (which must agree), and the median ratio.
#[cfg(feature = "cuda")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    use comm::{local, ProcessGrid};
    use multigrid::device::DeviceHierarchy;
    use multigrid::{Boundary, Hierarchy, MgError, MgOptions, Poisson};
    use std::sync::Arc;
    use std::time::Instant;

    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map_or(Ok(128), |s| s.parse())?;
    let rounds: usize = args.get(2).map_or(Ok(3), |s| s.parse())?;
    let dev = Arc::new(gpu::cuda::Device::open(0)?);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    println!(
        "GPU: {}; CPU: {cpu} (host solver on one core, {:?})",
        dev.info().name,
        simd::Isa::detect()
    );
    // Variable faces (a porous-like field of closed faces) and periodic
    // walls: the pressure problem of a bed; and the constant Dirichlet one.
    let beta = |d: usize, q: [usize; 3]| {
        let h =
            (q[0] * 73_856_093) ^ (q[1] * 19_349_663) ^ (q[2] * 83_492_791) ^ (d * 2_654_435_761);
        if h.is_multiple_of(7) {
            0.0
        } else {
            0.5 + (h % 11) as f64 / 10.0
        }
    };
    let problems = [
        (
            "constant, Dirichlet",
            Poisson::new([n; 3], [1.0; 3], [Boundary::Dirichlet; 3])?,
        ),
        (
            "variable faces, periodic",
            Poisson::new([n; 3], [1.0; 3], [Boundary::Periodic; 3])?
                .with_coefficient(Arc::new(beta)),
        ),
    ];
    for (name, p) in problems {
        let out = local::run(1, |c| {
            let grid = ProcessGrid::for_shape(p.shape, 1, p.periodic())?;
            // Down to a 4^3 bottom level.
            let levels = Hierarchy::max_levels(p.shape).saturating_sub(2).max(1);
            let opts = MgOptions {
                tol: 1e-10,
                ..MgOptions::default()
            };
            let mut host = Hierarchy::new(c, grid, &p, levels, opts)?;
            let mut f = host.new_field();
            let sign = |q: [usize; 3]| {
                if (q[0] + q[1] + q[2]).is_multiple_of(2) {
                    1.0
                } else {
                    -1.0
                }
            };
            f.fill_owned(0, &host.owned(), |q| sign(q) * (1.0 + (q[0] % 5) as f64));
            let mut times = Vec::new();
            for _ in 0..rounds {
                let mut u = host.new_field();
                let t = Instant::now();
                let r = host.solve_pcg(c, &mut u, &f)?;
                times.push((t.elapsed().as_secs_f64(), r.iterations, 0.0, 0));
            }
            let mut dh = DeviceHierarchy::new(c, host, dev.clone())?;
            let fd = halo::DeviceField::from_host(&dev, &f, "f")?;
            for t in times.iter_mut() {
                let mut u = dh.new_field()?;
                dev.synchronize()?;
                let s = Instant::now();
                let r = dh.solve_pcg(c, &mut u, &fd)?;
                dev.synchronize()?;
                t.2 = s.elapsed().as_secs_f64();
                t.3 = r.iterations;
            }
            Ok::<_, MgError>((times, dh.device_levels(), levels))
        })
        .map_err(|e| e.to_string())?;
        let (times, dl, levels) = &out[0];
        println!("{name}, n = {n}: {levels} levels, {dl} on the device");
        for (h, hi, d, di) in times {
            println!(
                "  host {h:.3} s ({hi} its)   device {d:.3} s ({di} its)   host/device {:.1}",
                h / d
            );
        }
        let mut r: Vec<f64> = times.iter().map(|t| t.0 / t.2).collect();
        r.sort_by(f64::total_cmp);
        println!(
            "  median host/device {:.1} (spread {:.1}..{:.1})",
            r[r.len() / 2],
            r[0],
            r[r.len() - 1]
        );
    }
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("device_pcg needs the `cuda` feature: cargo run --release -p parnum-multigrid --features cuda --example device_pcg");
    std::process::exit(2);
}
