//! Warm distributed transforms allocate nothing (in-process backend): the
//! reshapes are planned redistributions and the local FFTs work in the
//! caller's scratch. Counted by a global allocator that tallies the
//! allocations of each thread (each in-process rank is a thread).

use comm::{local, Protocol};
use dfft::{Fft3d, FftError, Kind, Layout, Options};
use num_complex::Complex64;
use std::alloc::{GlobalAlloc, Layout as MemLayout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a const-initialised
// thread-local `Cell` without destructor, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: MemLayout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: MemLayout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: MemLayout, new_size: usize) -> *mut u8 {
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
                let mut plan = Fft3d::new(c, &layout, Kind::C2C, options)?;
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
                let (n, res) = allocations(|| (0..3).try_for_each(|_| step()));
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
