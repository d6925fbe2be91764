//! A warm V-cycle allocates nothing (in-process backend): smoothing,
//! residual, restriction and prolongation sweeps, their halo exchanges and
//! the coarse levels' transfers reuse the hierarchy's fields and buffers.
//! Counted by a global allocator that tallies the allocations of each
//! thread (each in-process rank is a thread).

use comm::{local, ProcessGrid};
use multigrid::{Boundary, CommAvoiding, Hierarchy, MgError, MgOptions, Poisson};

#[global_allocator]
static GLOBAL: testkit::Counting = testkit::Counting;

#[test]
fn warm_vcycles_allocate_nothing() {
    let n = 32;
    for bc in [Boundary::Dirichlet, Boundary::Periodic] {
        let p = Poisson::new([n; 3], [1.0; 3], [bc; 3]).unwrap();
        for ranks in [1, 2, 4] {
            for (overlap, ca) in [(false, false), (true, false), (true, true)] {
                let opts = MgOptions {
                    overlap,
                    comm_avoiding: CommAvoiding {
                        fine: ca,
                        coarse: ca,
                    },
                    ..MgOptions::default()
                };
                let counts = local::run(ranks, |c| {
                    let g = ProcessGrid::for_shape(p.shape, c.size(), p.periodic())?;
                    let levels = Hierarchy::max_levels(p.shape);
                    let mut mg = Hierarchy::new(c, g, &p, levels, opts)?;
                    let mut u = mg.new_field();
                    let mut f = mg.new_field();
                    // A right-hand side of zero mean (solvable when periodic).
                    f.fill_owned(0, &mg.owned(), |q| {
                        let x = p.cell_centre(q);
                        (6.0 * x[0]).sin() * (4.0 * x[1]).cos() + (2.0 * x[2]).sin()
                    });
                    for _ in 0..3 {
                        mg.vcycle(c, &mut u, &f)?;
                    }
                    let (k, res) =
                        testkit::allocations(|| (0..3).try_for_each(|_| mg.vcycle(c, &mut u, &f)));
                    res?;
                    Ok::<_, MgError>(k)
                })
                .unwrap();
                for (rank, k) in counts.iter().enumerate() {
                    assert_eq!(
                        *k, 0,
                        "{bc:?}, {ranks} ranks, overlap {overlap}, CA {ca}, rank {rank}: {k} allocations"
                    );
                }
            }
        }
    }
}
