//! A memory-bandwidth reference independent of heat3d: the time to read one
//! f64 array and write another of the same length (STREAM's "scale":
//! `dst[i] = s * src[i]`), single-threaded, as one rank's stencil sweep is.

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

/// One pass of the kernel; kept out of line so the timed loop is this code.
#[inline(never)]
fn scale(dst: &mut [f64], src: &[f64], s: f64) {
    for (d, x) in dst.iter_mut().zip(src) {
        *d = s * *x;
    }
}

/// Allocates two arrays of `elements` f64 (touched before timing, so no
/// page faults are timed), runs one untimed pass, then `reps` timed ones;
/// returns the seconds of each timed pass.
pub fn passes(elements: usize, reps: usize) -> Vec<f64> {
    let src: Vec<f64> = (0..elements).map(|i| (i % 1024) as f64 * 0.5).collect();
    let mut dst = vec![1.0f64; elements];
    let s = black_box(1.000_000_1);
    scale(&mut dst, &src, s);
    black_box(&dst);
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        scale(black_box(&mut dst), black_box(&src), s);
        black_box(&dst);
        times.push(t.elapsed().as_secs_f64());
    }
    times
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
    #[test]
    fn measures_something() {
        let s = super::Stream::from_passes(1 << 16, &super::passes(1 << 16, 3));
        assert_eq!(s.reps, 3);
        assert_eq!(s.bytes, (2 * 8) << 16);
        assert!(s.seconds > 0.0 && s.gb_per_s.is_finite());
    }
}
