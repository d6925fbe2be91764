//! Warm distributed transforms allocate nothing (in-process backend): the
//! reshapes are planned redistributions and the local FFTs work in the
//! caller's scratch. Counted by a global allocator that tallies the
//! allocations of each thread (each in-process rank is a thread).

use comm::{local, Protocol};
use dfft::{Fft3d, FftError, Layout, Options};
use num_complex::Complex64;

#[global_allocator]
static GLOBAL: testkit::Counting = testkit::Counting;

#[test]
fn warm_transforms_allocate_nothing() {
    let g = [12, 10, 8];
    for ranks in [1, 2, 4] {
        for protocol in Protocol::ALL {
            let counts = local::run(ranks, |c| {
                let layout = Layout::pencils(g, c.size(), 2)?;
                let options = Options {
                    protocol,
                    ..Options::default()
                };
                let mut plan = Fft3d::c2c(c, &layout, options)?;
                let x: Vec<Complex64> = (0..plan.input_len())
                    .map(|i| Complex64::new(i as f64, 1.0))
                    .collect();
                let mut y = vec![Complex64::default(); plan.output_len()];
                let mut z = vec![Complex64::default(); plan.input_len()];
                let mut s = vec![Complex64::default(); plan.scratch_len()];
                let mut step = || -> Result<(), FftError> {
                    plan.forward(c, &x, &mut y, &mut s)?;
                    plan.backward(c, &y, &mut z, &mut s)
                };
                for _ in 0..3 {
                    step()?;
                }
                let (n, res) = testkit::allocations(|| (0..3).try_for_each(|_| step()));
                res?;
                Ok::<_, FftError>(n)
            })
            .unwrap();
            for (rank, n) in counts.iter().enumerate() {
                assert_eq!(
                    *n, 0,
                    "{ranks} ranks, {protocol}, rank {rank}: {n} allocations"
                );
            }
        }
    }
}
