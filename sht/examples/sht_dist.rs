//! The distributed transforms on in-process ranks or, built with feature
//! `mpi` and started by `mpirun`, on MPI ranks.
//!
//! ```text
//! sht_dist hash  [--ranks N]
//!     every legal Pi_r x Pi_theta grid of the rank count, every algorithm,
//!     queue lengths 1, 2, 3: one line per case with a hash of the
//!     synthesised grid, the analysed coefficients, the vector transforms'
//!     results and the lm layout that
//!     does not depend on the decomposition (XOR of per-value mixes of the
//!     global index and the bits).
//! sht_dist bench [--ranks N] [--ntheta T] [--levels L] [--fields F] [--reps R] [--queues 1,2,...]
//!     per algorithm and queue length: the median round-trip time of F
//!     fields through the theta transposition (grid 1 x P, L*P levels) and
//!     the l transposition (grid P x 1, L*P levels), the slowest rank's;
//!     with the theta one also the whole scalar synthesis plus analysis.
//! ```
//!
//! Only the first rank prints.

use comm::{CommExt, Communicator};
use num_complex::Complex64;
use sht::{DistConfig, DistSht, Protocol, Sht, Transposition};

/// The fixed hash case: uneven sizes, an equator row, 3 fields.
const NTHETA: usize = 13;
const NPHI: usize = 28;
const LMAX: usize = 12;
const NR: usize = 8;
const NF: usize = 3;

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn value_hash(kind: u64, index: usize, bits: u64) -> u64 {
    mix(mix((kind << 56) ^ index as u64) ^ bits)
}

fn lcg(state: &mut u64) -> f64 {
    *state = state
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
}

/// The hash of one case on this rank (XOR-combined over ranks by the caller).
fn case_hash(d: &mut DistSht, sht: &Sht) -> Result<u64, String> {
    let e = |e: sht::DistError| e.to_string();
    let ((r0, nrl), (t0, ntl)) = (d.levels(), d.latitudes());
    let nlm = sht.nlm();
    // Global inputs from a fixed generator, indexed globally.
    let mut s = 12345u64;
    let coeffs: Vec<Complex64> = (0..NF * NR * nlm)
        .map(|_| Complex64::new(lcg(&mut s), lcg(&mut s)))
        .collect();
    let grid_in: Vec<f64> = (0..NF * NR * NTHETA * NPHI).map(|_| lcg(&mut s)).collect();
    let coeffs2: Vec<Complex64> = (0..NF * NR * nlm)
        .map(|_| Complex64::new(lcg(&mut s), lcg(&mut s)))
        .collect();
    let grid_in2: Vec<f64> = (0..NF * NR * NTHETA * NPHI).map(|_| lcg(&mut s)).collect();
    let tuples = d.level_tuples().to_vec();
    let (mut level, mut level2, mut grid, mut grid2) = (vec![], vec![], vec![], vec![]);
    for f in 0..NF {
        for r in r0..r0 + nrl {
            let b = f * NR + r;
            let at = |c: &[Complex64], (l, m): (usize, usize)| c[b * nlm + sht.lm_index(l, m)];
            level.extend(tuples.iter().map(|&lm| at(&coeffs, lm)));
            level2.extend(tuples.iter().map(|&lm| at(&coeffs2, lm)));
            let g = b * NTHETA * NPHI;
            grid.extend_from_slice(&grid_in[g + t0 * NPHI..g + (t0 + ntl) * NPHI]);
            grid2.extend_from_slice(&grid_in2[g + t0 * NPHI..g + (t0 + ntl) * NPHI]);
        }
    }
    let mut h = 0u64;
    let mut out = vec![0.0; NF * d.grid_len()];
    d.synthesis(&level, &mut out).map_err(e)?;
    let mut back = vec![Complex64::new(0.0, 0.0); level.len()];
    d.analysis(&grid, &mut back).map_err(e)?;
    let mut lm = vec![Complex64::new(0.0, 0.0); NF * d.lm_len()];
    d.to_lm(&level, &mut lm).map_err(e)?;
    let (mut vt, mut vp) = (vec![0.0; out.len()], vec![0.0; out.len()]);
    d.vector_synthesis(&level, &level2, &mut vt, &mut vp)
        .map_err(e)?;
    let (mut vs, mut vtor) = (back.clone(), back.clone());
    d.vector_analysis(&grid, &grid2, &mut vs, &mut vtor)
        .map_err(e)?;
    for (kind, g) in [(1, &out), (4, &vt), (5, &vp)] {
        let mut k = 0;
        for f in 0..NF {
            for r in r0..r0 + nrl {
                let b = f * NR + r;
                for j in t0..t0 + ntl {
                    for p in 0..NPHI {
                        h ^= value_hash(kind, (b * NTHETA + j) * NPHI + p, g[k].to_bits());
                        k += 1;
                    }
                }
            }
        }
    }
    for (kind, c) in [(2, &back), (6, &vs), (7, &vtor)] {
        let mut k = 0;
        for f in 0..NF {
            for r in r0..r0 + nrl {
                for &(l, m) in &tuples {
                    let i = (f * NR + r) * nlm + sht.lm_index(l, m);
                    h ^= value_hash(kind, 2 * i, c[k].re.to_bits());
                    h ^= value_hash(kind, 2 * i + 1, c[k].im.to_bits());
                    k += 1;
                }
            }
        }
    }
    let mut k = 0;
    for f in 0..NF {
        for &(l, m) in d.lm_tuples() {
            for r in 0..NR {
                let i = (f * NR + r) * nlm + sht.lm_index(l, m);
                h ^= value_hash(3, 2 * i, lm[k].re.to_bits());
                h ^= value_hash(3, 2 * i + 1, lm[k].im.to_bits());
                k += 1;
            }
        }
    }
    Ok(h)
}

fn xor_over_ranks(c: &dyn Communicator, h: u64) -> Result<u64, String> {
    let mut all = vec![0u64; c.size()];
    c.allgather(&[h], &mut all).map_err(|e| e.to_string())?;
    Ok(all.iter().fold(0, |a, b| a ^ b))
}

fn hash_suite(c: &dyn Communicator) -> Result<Vec<String>, String> {
    let p = c.size();
    let sht = Sht::with_nphi(NTHETA, NPHI, Some(LMAX)).map_err(|e| e.to_string())?;
    let mut lines = vec![];
    for pr in (1..=p).filter(|a| p.is_multiple_of(*a)) {
        let pt = p / pr;
        // Skip grids this problem cannot give work to (the same test on
        // every rank, no communication).
        if sht::Decomposition::new(LMAX, NTHETA, NR, pr, pt).is_err() {
            continue;
        }
        for queue in [1, 2, 3] {
            for alg in Protocol::ALL {
                let cfg = DistConfig {
                    nphi: NPHI,
                    lmax: Some(LMAX),
                    queue,
                    theta_protocol: alg,
                    l_protocol: alg,
                    ..DistConfig::new(NTHETA, NR, pr, pt)
                };
                let mut d = DistSht::new(c, &cfg).map_err(|e| e.to_string())?;
                let h = xor_over_ranks(c, case_hash(&mut d, &sht)?)?;
                lines.push(format!(
                    "case ranks={p} grid={pr}x{pt} alg={alg} queue={queue} backend={} hash={h:016x}",
                    c.backend()
                ));
            }
        }
    }
    Ok(lines)
}

struct BenchArgs {
    ntheta: usize,
    levels: usize,
    fields: usize,
    reps: usize,
    queues: Vec<usize>,
}

/// Median time of one scalar synthesis and one analysis of `nf` fields
/// (random values), the slowest rank's.
fn time_transforms(
    c: &dyn Communicator,
    d: &mut DistSht,
    nf: usize,
    reps: usize,
) -> Result<f64, String> {
    let e = |e: sht::DistError| e.to_string();
    let mut s = 99u64;
    let level: Vec<Complex64> = (0..nf * d.level_len())
        .map(|_| Complex64::new(lcg(&mut s), lcg(&mut s)))
        .collect();
    let mut back = level.clone();
    let mut grid = vec![0.0; nf * d.grid_len()];
    let mut times = vec![];
    for k in 0..=reps.max(1) {
        c.barrier().map_err(|e| e.to_string())?;
        let t = std::time::Instant::now();
        d.synthesis(&level, &mut grid).map_err(e)?;
        d.analysis(&grid, &mut back).map_err(e)?;
        if k > 0 {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    times.sort_by(f64::total_cmp);
    c.allreduce_scalar(times[times.len() / 2], comm::ReduceOp::Max)
        .map_err(|e| e.to_string())
}

fn bench_suite(c: &dyn Communicator, a: &BenchArgs) -> Result<Vec<String>, String> {
    let p = c.size();
    let mut lines = vec![];
    for (which, pr, pt) in [(Transposition::Theta, 1, p), (Transposition::L, p, 1)] {
        if which == Transposition::Theta && p == 1 {
            continue;
        }
        for &queue in &a.queues {
            for alg in Protocol::ALL {
                let cfg = DistConfig {
                    queue,
                    theta_protocol: alg,
                    l_protocol: alg,
                    ..DistConfig::new(a.ntheta, a.levels * p, pr, pt)
                };
                let mut d = DistSht::new(c, &cfg).map_err(|e| e.to_string())?;
                let t = d
                    .measure(which, alg, a.fields, a.reps)
                    .map_err(|e| e.to_string())?;
                let per_rank = match which {
                    Transposition::Theta => d.levels().1 * d.sht().ntheta() * d.orders().len(),
                    Transposition::L => d.level_len(),
                };
                // With the theta transposition: the whole scalar synthesis
                // and analysis of the same fields, for its share.
                let full = if which == Transposition::Theta {
                    format!(
                        " transform_seconds={:.6e}",
                        time_transforms(c, &mut d, a.fields, a.reps)?
                    )
                } else {
                    String::new()
                };
                lines.push(format!(
                    "bench which={} ranks={p} backend={} ntheta={} lmax={} levels={} fields={} alg={alg} queue={queue} values_per_rank={per_rank} seconds={t:.6e}{full}",
                    match which {
                        Transposition::Theta => "theta",
                        Transposition::L => "l",
                    },
                    c.backend(),
                    d.sht().ntheta(),
                    d.sht().lmax(),
                    a.levels * p,
                    a.fields,
                ));
            }
        }
    }
    Ok(lines)
}

fn parse() -> Result<(String, Option<usize>, BenchArgs), String> {
    let mut args = std::env::args().skip(1);
    let mode = args
        .next()
        .ok_or("usage: sht_dist hash|bench [--ranks N] ...")?;
    let mut ranks = None;
    let mut b = BenchArgs {
        ntheta: 64,
        levels: 4,
        fields: 13,
        reps: 5,
        queues: (1..=13).collect(),
    };
    while let Some(k) = args.next() {
        let v = args.next().ok_or(format!("{k} needs a value"))?;
        let n = || v.parse::<usize>().map_err(|e| format!("{k} {v}: {e}"));
        match k.as_str() {
            "--ranks" => ranks = Some(n()?),
            "--ntheta" => b.ntheta = n()?,
            "--levels" => b.levels = n()?,
            "--fields" => b.fields = n()?,
            "--reps" => b.reps = n()?,
            "--queues" => {
                b.queues = v
                    .split(',')
                    .map(|x| x.parse::<usize>().map_err(|e| format!("--queues {v}: {e}")))
                    .collect::<Result<_, _>>()?
            }
            _ => return Err(format!("unknown option {k}")),
        }
    }
    if mode != "hash" && mode != "bench" {
        return Err(format!("unknown mode {mode:?}: hash or bench"));
    }
    Ok((mode, ranks, b))
}

fn body(c: &dyn Communicator, mode: &str, b: &BenchArgs) -> Result<Vec<String>, String> {
    if mode == "hash" {
        hash_suite(c)
    } else {
        bench_suite(c, b)
    }
}

#[cfg(feature = "mpi")]
fn under_mpi() -> bool {
    comm::mpi::is_launched_by_mpirun()
}

#[cfg(not(feature = "mpi"))]
fn under_mpi() -> bool {
    false
}

fn main() -> std::process::ExitCode {
    let (mode, ranks, b) = match parse() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let lines: Result<Vec<String>, String> = if under_mpi() {
        #[cfg(feature = "mpi")]
        {
            comm::mpi::run(|c| body(c, &mode, &b).map(|l| if c.rank() == 0 { l } else { vec![] }))
        }
        #[cfg(not(feature = "mpi"))]
        unreachable!()
    } else {
        let n = ranks.unwrap_or(1);
        comm::local::run(n, |c| body(c, &mode, &b))
            .map(|mut v| v.swap_remove(0))
            .map_err(|e| e.to_string())
    };
    match lines {
        Ok(lines) => {
            for l in lines {
                println!("{l}");
            }
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
