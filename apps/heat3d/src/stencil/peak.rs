//! The core's fused multiply-add peak, measured: the reference for the
//! stencils' GFLOP/s. The sweeps themselves never fuse (their bits must
//! match the device's and the scalar loop's), so a separate multiply and
//! add per term reaches at most half of this figure.

use std::hint::black_box;
use std::time::Instant;

/// Independent accumulator chains: more than the FMA latency (4 cycles)
/// times the FMA units (2), so the loop is bound by throughput.
const CHAINS: usize = 16;

/// One measurement of the FMA peak.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FmaPeak {
    /// Billions of floating-point operations per second, two per FMA lane.
    pub gflops: f64,
    /// The widest vector the loop used: `avx512`, `avx2` or `scalar`.
    pub isa: &'static str,
    /// Lanes per FMA.
    pub lanes: usize,
}

/// Flops per cell of the fused sweep of `order`: one multiply for the
/// centre, then per axis and offset an add of the pair, a multiply by the
/// weight and an add into the sum.
pub fn flops_per_cell(order: usize) -> usize {
    1 + 9 * (order / 2)
}

/// The fastest of `passes` timed runs of `CHAINS` chains of `iters` FMAs
/// on the widest vectors this CPU has, in GFLOP/s (best pass: a peak).
pub fn fma_peak(iters: usize, passes: usize) -> FmaPeak {
    let (isa, lanes, f): (&'static str, usize, fn(usize) -> f64) = pick();
    f(iters.min(1000)); // warm up (clock ramp, page faults of the code)
    let best = (0..passes.max(1))
        .map(|_| {
            let t = Instant::now();
            black_box(f(black_box(iters)));
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min);
    let flops = (2 * lanes * CHAINS * iters) as f64;
    FmaPeak {
        gflops: flops / best / 1e9,
        isa,
        lanes,
    }
}

/// `dst = src` (the shorter length) with stores that bypass the caches (no
/// read of the destination's lines before they are written): with the
/// library copy, the floor a sweep's bytes are timed against.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
pub fn copy_streaming(dst: &mut [f64], src: &[f64]) {
    use std::arch::x86_64::{_mm_loadu_pd, _mm_sfence, _mm_stream_pd};
    let n = dst.len().min(src.len());
    let mut i = 0;
    // One value first if the destination is not 16-byte aligned.
    if n > 0 && !(dst.as_ptr() as usize).is_multiple_of(16) {
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

/// `dst = src` (the shorter length); without x86-64's streaming stores,
/// the library copy.
#[cfg(not(target_arch = "x86_64"))]
pub fn copy_streaming(dst: &mut [f64], src: &[f64]) {
    let n = dst.len().min(src.len());
    dst[..n].copy_from_slice(&src[..n]);
}

#[allow(clippy::type_complexity)]
fn pick() -> (&'static str, usize, fn(usize) -> f64) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F (checked above).
        return ("avx512", 8, |n| unsafe { x86::chains512(n) });
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA (checked above).
        return ("avx2", 4, |n| unsafe { x86::chains256(n) });
    }
    ("scalar", 1, chains1)
}

/// `CHAINS` scalar chains `a = a * b + c` (one rounding each; without FMA
/// hardware `mul_add` is a library call and the figure is low).
fn chains1(n: usize) -> f64 {
    let mut a = [1.0f64; CHAINS];
    let (b, c) = (black_box(0.999_999_9), black_box(1e-7));
    for _ in 0..n {
        for x in a.iter_mut() {
            *x = x.mul_add(b, c);
        }
    }
    a.iter().sum()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::CHAINS;
    use std::arch::x86_64::*;
    use std::hint::black_box;

    /// `CHAINS` chains of 256-bit FMAs; returns their sum.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    #[allow(unused_unsafe)] // value intrinsics are safe here from Rust 1.87
    pub(super) unsafe fn chains256(n: usize) -> f64 {
        // SAFETY: the caller checked for AVX2 and FMA; the store writes
        // four doubles into `out`.
        unsafe {
            let mut a = [_mm256_set1_pd(1.0); CHAINS];
            let b = _mm256_set1_pd(black_box(0.999_999_9));
            let c = _mm256_set1_pd(black_box(1e-7));
            for _ in 0..n {
                for x in a.iter_mut() {
                    *x = _mm256_fmadd_pd(*x, b, c);
                }
            }
            let mut s = _mm256_setzero_pd();
            for x in a {
                s = _mm256_add_pd(s, x);
            }
            let mut out = [0.0; 4];
            _mm256_storeu_pd(out.as_mut_ptr(), s);
            out.iter().sum()
        }
    }

    /// `CHAINS` chains of 512-bit FMAs; returns their sum.
    ///
    /// # Safety
    /// The CPU must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    #[allow(unused_unsafe)] // value intrinsics are safe here from Rust 1.87
    pub(super) unsafe fn chains512(n: usize) -> f64 {
        // SAFETY: the caller checked for AVX-512F.
        unsafe {
            let mut a = [_mm512_set1_pd(1.0); CHAINS];
            let b = _mm512_set1_pd(black_box(0.999_999_9));
            let c = _mm512_set1_pd(black_box(1e-7));
            for _ in 0..n {
                for x in a.iter_mut() {
                    *x = _mm512_fmadd_pd(*x, b, c);
                }
            }
            let mut s = _mm512_setzero_pd();
            for x in a {
                s = _mm512_add_pd(s, x);
            }
            _mm512_reduce_add_pd(s)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_is_measured_on_the_widest_vectors() {
        let p = fma_peak(20_000, 3);
        assert!(p.gflops.is_finite() && p.gflops > 0.0);
        if super::super::Kernel::Avx512.available() {
            assert_eq!(p.isa, "avx512");
        }
        let lanes = match p.isa {
            "avx512" => 8,
            "avx2" => 4,
            _ => 1,
        };
        assert_eq!(p.lanes, lanes);
    }

    #[test]
    fn flops_of_the_sweep() {
        assert_eq!(flops_per_cell(2), 10);
        assert_eq!(flops_per_cell(20), 91);
    }

    #[test]
    fn the_non_temporal_copy_copies_every_value() {
        // Every alignment of the destination and odd and even lengths.
        let src: Vec<f64> = (0..37).map(|i| i as f64 + 0.5).collect();
        for off in 0..2 {
            for n in [0, 1, 2, 3, 30, 31] {
                let mut buf = vec![-1.0; n + 2];
                copy_streaming(&mut buf[off..off + n], &src[..n]);
                assert_eq!(&buf[off..off + n], &src[..n], "offset {off}, length {n}");
                assert!(buf[..off].iter().chain(&buf[off + n..]).all(|&v| v == -1.0));
            }
        }
    }
}
