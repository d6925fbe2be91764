//! Warm transpositions, and the distributed transforms around the theta
//! transposition, allocate nothing (in-process backend): the theta and `l`
//! transpositions are planned redistributions, reused for every call of the
//! same batch size. Counted
//! by a global allocator that tallies the allocations of each thread (each
//! in-process rank is a thread).

use comm::local;
use num_complex::Complex64;
use sht::{DistConfig, DistError, DistSht, Protocol};

#[global_allocator]
static GLOBAL: testkit::Counting = testkit::Counting;

#[test]
fn warm_transposes_and_transforms_allocate_nothing() {
    // (Pi_r, Pi_theta): the 1d scheme, the 2d scheme, theta ranks only.
    for (pr, pt) in [(1, 1), (2, 1), (2, 2), (1, 3)] {
        for protocol in Protocol::ALL {
            let counts = local::run(pr * pt, |c| {
                let cfg = DistConfig {
                    queue: 2,
                    theta_protocol: protocol,
                    l_protocol: protocol,
                    ..DistConfig::new(24, 6, pr, pt)
                };
                let mut d = DistSht::new(c, &cfg)?;
                let nf = 3;
                let coeffs: Vec<Complex64> = (0..nf * d.level_len())
                    .map(|i| Complex64::new((i % 7) as f64, 0.0))
                    .collect();
                let mut back = vec![Complex64::default(); coeffs.len()];
                let mut grid = vec![0.0; nf * d.grid_len()];
                let mut lm = vec![Complex64::default(); nf * d.lm_len()];
                // With one theta rank the transforms are the serial ones
                // (whose batched Legendre analysis still allocates per
                // order); with several, the distributed path around the
                // theta transposition is checked too.
                let transforms = pt > 1;
                let mut step = |d: &mut DistSht| -> Result<(), DistError> {
                    if transforms {
                        d.synthesis(&coeffs, &mut grid)?;
                        d.analysis(&grid, &mut back)?;
                    }
                    d.to_lm(&coeffs, &mut lm)?;
                    d.from_lm(&lm, &mut back)
                };
                for _ in 0..3 {
                    step(&mut d)?;
                }
                let (n, res) = testkit::allocations(|| (0..3).try_for_each(|_| step(&mut d)));
                res?;
                Ok::<_, DistError>(n)
            })
            .unwrap();
            for (rank, n) in counts.iter().enumerate() {
                assert_eq!(
                    *n, 0,
                    "grid {pr}x{pt}, {protocol}, rank {rank}: {n} allocations"
                );
            }
        }
    }
}
