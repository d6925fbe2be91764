//! A warm halo exchange allocates nothing (in-process backend): `post` and
//! `finish` reuse the exchanger's buffers and request slots, and the
//! backend's message buffers were set aside on the first exchange. Counted
//! by a global allocator that tallies the allocations of each thread (each
//! in-process rank is a thread).

use comm::{local, BlockDecomposition, ProcessGrid};
use halo::{Exchanger, Field, HaloError, HaloSpec, Neighborhood, Topology};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a const-initialised
// thread-local `Cell` without destructor, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by this thread while `f` runs.
fn allocations<R>(f: impl FnOnce() -> R) -> (u64, R) {
    let before = ALLOCS.with(Cell::get);
    let r = f();
    (ALLOCS.with(Cell::get) - before, r)
}

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
                let (n, res) = allocations(|| {
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
