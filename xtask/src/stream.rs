//! A memory-bandwidth reference independent of heat3d: the fastest way one
//! thread can read one f64 array and write another of the same length, as
//! one rank's stencil sweep does: the faster of the library copy
//! (`copy_from_slice`, i.e. `memcpy`) and a copy with non-temporal stores
//! (x86-64), per pass. A plain read-and-write loop (STREAM's "scale",
//! `dst[i] = s * src[i]`) runs at about half that rate on a core whose
//! stores allocate cache lines, and would flatter any kernel timed against
//! it; `scale_passes` keeps it for comparison.

use serde::Serialize;
use std::hint::black_box;
use std::time::Instant;

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

/// A copy whose stores bypass the caches (no read of the destination's
/// lines before they are written).
#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn copy_nt(dst: &mut [f64], src: &[f64]) {
    use std::arch::x86_64::{_mm_loadu_pd, _mm_sfence, _mm_stream_pd};
    let n = dst.len().min(src.len());
    let mut i = 0;
    // One value first if the destination is not 16-byte aligned.
    if n > 0 && (dst.as_ptr() as usize) % 16 != 0 {
        dst[0] = src[0];
        i = 1;
    }
    // SAFETY: SSE2 is part of every x86-64 target; `i + 1 < n` keeps both
    // two-value accesses inside the slices, `dst[i]` is 16-byte aligned
    // (f64 slices are 8-byte aligned and the first odd value was copied
    // above), as `_mm_stream_pd` requires, and the fence orders the
    // non-temporal stores before anything that follows.
    unsafe {
        while i + 1 < n {
            let v = _mm_loadu_pd(src.as_ptr().add(i));
            _mm_stream_pd(dst.as_mut_ptr().add(i), v);
            i += 2;
        }
        _mm_sfence();
    }
    if i < n {
        dst[i] = src[i];
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn copy_nt(dst: &mut [f64], src: &[f64]) {
    copy(dst, src);
}

/// Two arrays of `elements` f64, touched before timing (no page faults are
/// timed).
fn arrays(elements: usize) -> (Vec<f64>, Vec<f64>) {
    let src: Vec<f64> = (0..elements).map(|i| (i % 1024) as f64 * 0.5).collect();
    (src, vec![1.0f64; elements])
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

    #[test]
    fn the_non_temporal_copy_copies_every_value() {
        // Every alignment of the destination and odd and even lengths.
        let src: Vec<f64> = (0..37).map(|i| i as f64 + 0.5).collect();
        for off in 0..2 {
            for n in [0, 1, 2, 3, 30, 31] {
                let mut buf = vec![-1.0; n + 2];
                copy_nt(&mut buf[off..off + n], &src[..n]);
                assert_eq!(&buf[off..off + n], &src[..n], "offset {off}, length {n}");
                assert!(buf[..off].iter().chain(&buf[off + n..]).all(|&v| v == -1.0));
            }
        }
    }
}
