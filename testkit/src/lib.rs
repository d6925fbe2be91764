//! Test support shared by the crates of the workspace (a dev-dependency
//! only; not published).
//!
//! [`Counting`] is a global allocator that counts the allocations (and
//! reallocations) and the bytes held of each thread; [`allocations`] and
//! [`peak_bytes`] measure a closure. A
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
//! let (peak, ()) = testkit::peak_bytes(|| {
//!     let a = vec![0u8; 1000];
//!     drop(a);
//!     let _b = vec![0u8; 600];
//! });
//! assert_eq!(peak, 1000);
//! ```
//!
//! Counts are per thread, so the ranks of `comm::local::run` (one thread
//! each) are measured separately and other threads do not disturb them.
#![warn(missing_docs)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
    /// Bytes this thread allocated less those it freed (may go below 0
    /// where it frees another thread's memory), and the highest value
    /// since [`peak_bytes`] last started.
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

fn grow(by: i64) {
    let live = LIVE.with(|l| {
        let v = l.get() + by;
        l.set(v);
        v
    });
    PEAK.with(|p| p.set(p.get().max(live)));
}

/// A global allocator that forwards to the system allocator and counts
/// each thread's allocations and reallocations and the bytes it holds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counting;

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counters are const-initialised thread-local `Cell`s without destructor,
// which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        grow(layout.size() as i64);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        grow(layout.size() as i64);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        grow(-(layout.size() as i64));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        grow(new_size as i64 - layout.size() as i64);
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

/// The most bytes this thread held at once while `f` ran, above what it
/// held when `f` started (meaningful when [`Counting`] is the global
/// allocator; 0 otherwise), and `f`'s result. Memory another thread
/// frees for it is not seen.
pub fn peak_bytes<R>(f: impl FnOnce() -> R) -> (u64, R) {
    let start = LIVE.with(Cell::get);
    let outer = PEAK.with(|p| p.replace(start));
    let r = f();
    let peak = PEAK.with(Cell::get);
    PEAK.with(|p| p.set(outer.max(peak)));
    ((peak - start).max(0) as u64, r)
}
