//! A warm halo exchange allocates nothing (in-process backend): `post` and
//! `finish` reuse the exchanger's buffers and request slots, and the
//! backend's message buffers were set aside on the first exchange. Counted
//! by a global allocator that tallies the allocations of each thread (each
//! in-process rank is a thread).

use comm::{local, BlockDecomposition, ProcessGrid};
use halo::{Exchanger, Field, HaloError, HaloSpec, Neighborhood, Topology};

#[global_allocator]
static GLOBAL: testkit::Counting = testkit::Counting;

#[test]
fn warm_exchanges_allocate_nothing() {
    for ranks in [1, 2, 3, 4] {
        for neighborhood in [Neighborhood::Faces, Neighborhood::Full] {
            let counts = local::run(ranks, |c| {
                let grid = ProcessGrid::for_shape([12, 10, 8], c.size(), [true; 3])?;
                let dec = BlockDecomposition::new([12, 10, 8], grid)?;
                let topo = Topology::new(c, &dec, HaloSpec::uniform(2, neighborhood))?;
                let mut u = Field::<f64>::new(topo.layout(1));
                let mut v = Field::<f64>::new(topo.layout(2));
                let mut ex = Exchanger::new(&topo, 3, 1)?;
                let mut step = |ex: &mut Exchanger, overlap: bool| {
                    if overlap {
                        let pending = ex.post(c, &mut [&mut u, &mut v])?;
                        pending.finish(&mut [&mut u, &mut v])
                    } else {
                        ex.exchange(c, &mut [&mut u, &mut v])
                    }
                };
                for _ in 0..3 {
                    step(&mut ex, false)?;
                    step(&mut ex, true)?;
                }
                let (n, res) = testkit::allocations(|| {
                    (0..5).try_for_each(|_| {
                        step(&mut ex, false)?;
                        step(&mut ex, true)
                    })
                });
                res?;
                Ok::<_, HaloError>(n)
            })
            .unwrap();
            for (rank, n) in counts.iter().enumerate() {
                assert_eq!(
                    *n, 0,
                    "{ranks} ranks, {neighborhood:?}, rank {rank}: {n} allocations"
                );
            }
        }
    }
}
