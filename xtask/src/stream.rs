//! A memory-bandwidth reference: the fastest way one thread can read one
//! f64 array and write another of the same length, as one rank's stencil
//! sweep does: the faster of the library copy (`copy_from_slice`, i.e.
//! `memcpy`) and a copy with non-temporal stores (x86-64; `stencil`'s
//! `copy_streaming`, which its `sweep_timing` example times too), per
//! pass. A plain read-and-write loop (STREAM's "scale", `dst[i] = s *
//! src[i]`) runs at about half that rate on a core whose stores allocate
//! cache lines, and would flatter any kernel timed against it;
//! `scale_passes` keeps it for comparison.

use serde::Serialize;
use std::hint::black_box;
use std::time::Instant;
use stencil::peak::copy_streaming as copy_nt;

/// One stream measurement.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Stream {
    /// f64 elements per array.
    pub elements: usize,
    /// Bytes moved per pass: one array read plus one written.
    pub bytes: usize,
    /// Timed passes.
    pub reps: usize,
    /// Median seconds per pass.
    pub seconds: f64,
    /// Fastest pass, seconds.
    pub best: f64,
    /// `bytes / seconds` in GB/s (1e9 bytes).
    pub gb_per_s: f64,
}

/// STREAM's scale; kept out of line so the timed loop is this code.
#[inline(never)]
fn scale(dst: &mut [f64], src: &[f64], s: f64) {
    for (d, x) in dst.iter_mut().zip(src) {
        *d = s * *x;
    }
}

/// The library copy.
#[inline(never)]
fn copy(dst: &mut [f64], src: &[f64]) {
    dst.copy_from_slice(src);
}

/// Two arrays of `elements` f64, touched before timing (no page faults are
/// timed), allocated as heat3d's fields are (`halo::zeroed`: transparent
/// huge pages offered on Linux), so that the floor and the sweep see the
/// same address translation.
fn arrays(elements: usize) -> (Vec<f64>, Vec<f64>) {
    let mut src: Vec<f64> = halo::zeroed(elements);
    for (i, v) in src.iter_mut().enumerate() {
        *v = (i % 1024) as f64 * 0.5;
    }
    let mut dst: Vec<f64> = halo::zeroed(elements);
    dst.fill(1.0);
    (src, dst)
}

fn time(mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

/// The copy floor: one untimed pass of each copy, then `reps` passes, each
/// the faster of the library copy and the non-temporal one; returns the
/// seconds of each pass (the copies are checked once).
pub fn passes(elements: usize, reps: usize) -> Vec<f64> {
    let (src, mut dst) = arrays(elements);
    copy(&mut dst, &src);
    copy_nt(&mut dst, &src);
    assert!(dst == src, "the copies must copy");
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let a = time(|| copy(black_box(&mut dst), black_box(&src)));
        let b = time(|| copy_nt(black_box(&mut dst), black_box(&src)));
        black_box(&dst);
        times.push(a.min(b));
    }
    times
}

/// STREAM's scale over the same arrays, for comparison with the floor.
pub fn scale_passes(elements: usize, reps: usize) -> Vec<f64> {
    let (src, mut dst) = arrays(elements);
    let s = black_box(1.000_000_1);
    scale(&mut dst, &src, s);
    (0..reps.max(1))
        .map(|_| time(|| scale(black_box(&mut dst), black_box(&src), s)))
        .collect()
}

impl Stream {
    /// The summary of timed passes over arrays of `elements` f64.
    pub fn from_passes(elements: usize, times: &[f64]) -> Stream {
        let seconds = crate::util::median(times);
        let best = times.iter().copied().fold(f64::INFINITY, f64::min);
        let bytes = 2 * elements * std::mem::size_of::<f64>();
        Stream {
            elements,
            bytes,
            reps: times.len(),
            seconds,
            best,
            gb_per_s: bytes as f64 / seconds / 1e9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_something() {
        let s = Stream::from_passes(1 << 16, &passes(1 << 16, 3));
        assert_eq!(s.reps, 3);
        assert_eq!(s.bytes, (2 * 8) << 16);
        assert!(s.seconds > 0.0 && s.gb_per_s.is_finite());
    }
}
