//! Test support shared by the crates of the workspace (a dev-dependency
//! only; not published).
//!
//! [`Counting`] is a global allocator that counts the allocations (and
//! reallocations) of each thread; [`allocations`] measures a closure. A
//! test binary that checks that an exchange path allocates nothing once
//! warm installs it:
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: testkit::Counting = testkit::Counting;
//!
//! let mut v = Vec::with_capacity(4);
//! let (n, ()) = testkit::allocations(|| v.extend([1, 2, 3]));
//! assert_eq!(n, 0);
//! let (n, _) = testkit::allocations(|| vec![0u8; 16]);
//! assert_eq!(n, 1);
//! ```
//!
//! Counts are per thread, so the ranks of `comm::local::run` (one thread
//! each) are measured separately and other threads do not disturb them.
#![warn(missing_docs)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

/// A global allocator that forwards to the system allocator and counts
/// each thread's allocations and reallocations.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counting;

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counter is a const-initialised thread-local `Cell` without destructor,
// which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
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

/// The allocations this thread made while `f` ran (meaningful when
/// [`Counting`] is the global allocator; 0 otherwise), and `f`'s result.
pub fn allocations<R>(f: impl FnOnce() -> R) -> (u64, R) {
    let before = ALLOCS.with(Cell::get);
    let r = f();
    (ALLOCS.with(Cell::get) - before, r)
}
