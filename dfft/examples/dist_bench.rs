//! The distributed 3D FFT on in-process ranks, timed the way HeFFTe's
//! `speed3d` benchmarks time theirs, so that the two can stand side by side
//! (`cargo xtask bench fft-dist` runs both, and mpi4py-fft, in one go).
//!
//! For each kind, an `N^3` grid in bricks over `RANKS` in-process ranks
//! (the default runtime: threads that exchange through shared memory), the
//! spectrum in the input layout (as HeFFTe's `speed3d` leaves it by
//! default) or, with `--output transposed`, in the layout of the last
//! transform (one reshape a direction fewer, as mpi4py-fft leaves it),
//! `Normalization::Full`, the reshape
//! protocol `Protocol::Auto` (timed on the real plan, fastest kept) or the
//! one `--protocol` names: one
//! warm-up forward + backward, then `REPS` timed repeats, each a barrier,
//! a forward and a backward transform, and a barrier. A repeat's time is
//! the slowest rank's, halved (forward + backward over 2, as `speed3d`
//! reports it); the best, the median and the mean repeat are printed. The round trip
//! is checked against the input (maximum difference at most 1e-10) before
//! anything is reported.
//!
//! `cargo run --release -p parnum-dfft --example dist_bench -- [--n 256]
//! [--ranks 2] [--kinds c2c,r2c] [--reps 5] [--output input|transposed]
//! [--protocol auto|alltoall|alltoallv|alltoallw|p2p|p2p_plined]
//! [--json PATH]`

use dfft::{Fft3d, FftError, Layout, Options, Output, Protocol};
use num_complex::Complex64;
use std::time::Instant;

struct Args {
    n: usize,
    ranks: usize,
    kinds: Vec<String>,
    reps: usize,
    output: Output,
    protocol: Protocol,
    json: Option<String>,
}

fn usage(msg: &str) -> ! {
    eprintln!(
        "dist_bench: {msg}\nusage: dist_bench [--n N] [--ranks P] [--kinds c2c,r2c] [--reps K] \
         [--output input|transposed] [--protocol NAME] [--json PATH]"
    );
    std::process::exit(2)
}

fn parse() -> Args {
    let mut a = Args {
        n: 256,
        ranks: 2,
        kinds: vec!["c2c".into(), "r2c".into()],
        reps: 5,
        output: Output::Input,
        protocol: Protocol::Auto,
        json: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{k} needs a value")))
        };
        let num = |s: String, what: &str| -> usize {
            match s.parse::<usize>() {
                Ok(x) if x >= 1 => x,
                _ => usage(&format!(
                    "{what} must be a whole number of at least 1, got '{s}'"
                )),
            }
        };
        match k.as_str() {
            "--n" => a.n = num(v(), "--n"),
            "--ranks" => a.ranks = num(v(), "--ranks"),
            "--reps" => a.reps = num(v(), "--reps"),
            "--kinds" => {
                a.kinds = v().split(',').map(str::to_string).collect();
                if let Some(b) = a.kinds.iter().find(|k| *k != "c2c" && *k != "r2c") {
                    usage(&format!("--kinds takes c2c and r2c, got '{b}'"));
                }
            }
            "--output" => {
                a.output = match v().as_str() {
                    "input" => Output::Input,
                    "transposed" => Output::Transposed,
                    o => usage(&format!("--output takes input or transposed, got '{o}'")),
                }
            }
            "--protocol" => {
                a.protocol = v()
                    .parse()
                    .unwrap_or_else(|e: comm::CommError| usage(&e.to_string()))
            }
            "--json" => a.json = Some(v()),
            _ => usage(&format!("unknown argument '{k}'")),
        }
    }
    a
}

/// Per repeat: the slowest rank's (forward + backward) / 2, seconds; and
/// the round trip's maximum difference from the input.
fn run(a: &Args, kind: &str) -> Result<(Vec<f64>, f64, Protocol), String> {
    let n = a.n;
    let reps = a.reps;
    let per_rank = comm::local::run(a.ranks, |c| {
        let layout = Layout::bricks([n; 3], c.size())?;
        let opts = Options {
            protocol: a.protocol,
            output: a.output,
            ..Options::default()
        };
        let value = |i: usize| ((i * 2_654_435_761) % 1_000_003) as f64 / 1_000_003.0 - 0.5;
        let mut times = Vec::with_capacity(reps);
        let (err, proto);
        if kind == "c2c" {
            let mut p = Fft3d::c2c(c, &layout, opts)?;
            proto = p
                .protocols()
                .first()
                .map(|x| x.0)
                .unwrap_or(Protocol::Alltoallv);
            let x: Vec<Complex64> = (0..p.input_len())
                .map(|i| Complex64::new(value(i), value(i + 7)))
                .collect();
            let mut y = vec![Complex64::default(); p.output_len()];
            let mut z = vec![Complex64::default(); p.input_len()];
            let mut s = vec![Complex64::default(); p.scratch_len()];
            p.forward(c, &x, &mut y, &mut s)?;
            p.backward(c, &y, &mut z, &mut s)?;
            for _ in 0..reps {
                c.barrier()?;
                let t = Instant::now();
                p.forward(c, &x, &mut y, &mut s)?;
                p.backward(c, &y, &mut z, &mut s)?;
                c.barrier()?;
                times.push(t.elapsed().as_secs_f64() / 2.0);
            }
            err = x
                .iter()
                .zip(&z)
                .map(|(a, b)| (a - b).norm())
                .fold(0.0, f64::max);
        } else {
            let mut p = Fft3d::r2c(c, &layout, 2, opts)?;
            proto = p
                .protocols()
                .first()
                .map(|x| x.0)
                .unwrap_or(Protocol::Alltoallv);
            let x: Vec<f64> = (0..p.input_len()).map(value).collect();
            let mut y = vec![Complex64::default(); p.output_len()];
            let mut z = vec![0.0; p.input_len()];
            let mut s = vec![Complex64::default(); p.scratch_len()];
            p.forward(c, &x, &mut y, &mut s)?;
            p.backward(c, &y, &mut z, &mut s)?;
            for _ in 0..reps {
                c.barrier()?;
                let t = Instant::now();
                p.forward(c, &x, &mut y, &mut s)?;
                p.backward(c, &y, &mut z, &mut s)?;
                c.barrier()?;
                times.push(t.elapsed().as_secs_f64() / 2.0);
            }
            err = x
                .iter()
                .zip(&z)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
        }
        Ok::<_, FftError>((times, err, proto))
    })
    .map_err(|e| e.to_string())?;
    let times = (0..reps)
        .map(|r| per_rank.iter().map(|(t, _, _)| t[r]).fold(0.0, f64::max))
        .collect();
    let err = per_rank.iter().map(|(_, e, _)| *e).fold(0.0, f64::max);
    Ok((times, err, per_rank[0].2))
}

fn main() {
    let a = parse();
    println!(
        "dfft Fft3d, {}^3, {} in-process ranks, bricks, spectrum {:?}, protocol {}; time per run = (forward + backward) / 2, slowest rank",
        a.n, a.ranks, a.output, a.protocol
    );
    let mut rows = Vec::new();
    for kind in &a.kinds {
        let (mut t, err, proto) = run(&a, kind).unwrap_or_else(|e| {
            eprintln!("dist_bench: {kind} failed: {e}");
            std::process::exit(1)
        });
        if err > 1e-10 {
            eprintln!(
                "dist_bench: {kind} round trip differs from the input by {err:.3e} (limit 1e-10)"
            );
            std::process::exit(1);
        }
        let mean = t.iter().sum::<f64>() / t.len() as f64;
        t.sort_by(f64::total_cmp);
        let (best, med) = (t[0], t[t.len() / 2]);
        println!(
            "{kind} {}^3 on {} ranks: best {:.4} s, median {:.4} s, mean {:.4} s per run ({:?}; round-trip error {err:.2e})",
            a.n, a.ranks, best, med, mean, proto
        );
        rows.push(format!(
            "{{\"kind\":\"{kind}\",\"n\":{},\"ranks\":{},\"output\":\"{:?}\",\"best_s\":{best},\"median_s\":{med},\"mean_s\":{mean},\"protocol\":\"{proto:?}\",\"round_trip_error\":{err}}}",
            a.n, a.ranks, a.output
        ));
    }
    if let Some(path) = &a.json {
        let text = format!("[{}]\n", rows.join(","));
        let tmp = format!("{path}.tmp");
        if let Err(e) = std::fs::write(&tmp, text).and_then(|_| std::fs::rename(&tmp, path)) {
            eprintln!("dist_bench: cannot write {path}: {e}");
            std::process::exit(1);
        }
    }
}
