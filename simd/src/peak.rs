//! The core's fused multiply-add peak, measured, and a non-temporal copy:
//! the floors that compute-bound and memory-bound kernels are timed
//! against.

use crate::Isa;
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
    /// The instruction set of the loop: the widest this CPU has
    /// ([`Isa::detect`]).
    pub isa: Isa,
    /// Lanes per FMA.
    pub lanes: usize,
}

/// The fastest of `passes` timed runs of `CHAINS` chains of `iters` FMAs
/// on the widest vectors this CPU has, in GFLOP/s (the best pass: a peak).
pub fn fma_peak(iters: usize, passes: usize) -> FmaPeak {
    let isa = Isa::detect();
    let f = |n: usize| -> f64 {
        #[cfg(target_arch = "x86_64")]
        {
            if let Some(t) = crate::Avx512Token::detect() {
                return x86::chains512(t, n);
            }
            if let Some(t) = crate::Avx2Token::detect() {
                return x86::chains256(t, n);
            }
        }
        chains1(n)
    };
    f(iters.min(1000)); // warm up (clock ramp, page faults of the code)
    let best = (0..passes.max(1))
        .map(|_| {
            let t = Instant::now();
            black_box(f(black_box(iters)));
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min);
    let flops = (2 * isa.lanes() * CHAINS * iters) as f64;
    FmaPeak {
        gflops: flops / best / 1e9,
        isa,
        lanes: isa.lanes(),
    }
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

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::CHAINS;
    use crate::{Avx2Token, Avx512Token, F64x4, F64x8};
    use std::hint::black_box;

    /// `CHAINS` chains of 256-bit FMAs; returns their sum.
    pub(super) fn chains256(t: Avx2Token, n: usize) -> f64 {
        #[target_feature(enable = "avx2,fma")]
        fn run(t: Avx2Token, n: usize) -> f64 {
            let mut a = [F64x4::splat(t, 1.0); CHAINS];
            let b = F64x4::splat(t, black_box(0.999_999_9));
            let c = F64x4::splat(t, black_box(1e-7));
            for _ in 0..n {
                for x in a.iter_mut() {
                    *x = x.fma(b, c);
                }
            }
            a.iter()
                .fold(F64x4::zero(t), |s, x| s + *x)
                .to_array()
                .iter()
                .sum()
        }
        // SAFETY: the token proves AVX2 and FMA.
        unsafe { run(t, n) }
    }

    /// `CHAINS` chains of 512-bit FMAs; returns their sum.
    pub(super) fn chains512(t: Avx512Token, n: usize) -> f64 {
        #[target_feature(enable = "avx512f,avx2,fma")]
        fn run(t: Avx512Token, n: usize) -> f64 {
            let mut a = [F64x8::splat(t, 1.0); CHAINS];
            let b = F64x8::splat(t, black_box(0.999_999_9));
            let c = F64x8::splat(t, black_box(1e-7));
            for _ in 0..n {
                for x in a.iter_mut() {
                    *x = x.fma(b, c);
                }
            }
            a.iter()
                .fold(F64x8::zero(t), |s, x| s + *x)
                .to_array()
                .iter()
                .sum()
        }
        // SAFETY: the token proves AVX-512F, AVX2 and FMA.
        unsafe { run(t, n) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_is_measured_on_the_widest_vectors() {
        let p = fma_peak(20_000, 3);
        assert!(p.gflops.is_finite() && p.gflops > 0.0);
        assert_eq!(p.isa, Isa::detect());
        assert_eq!(p.lanes, p.isa.lanes());
    }

    #[test]
    fn every_chain_computes_the_scalar_chains() {
        // The vector chains are the scalar chains lane by lane (the same
        // FMAs), so their sums are the scalar sum times the lanes, up to
        // the order of the final additions.
        let one = chains1(1000);
        #[cfg(target_arch = "x86_64")]
        {
            if let Some(t) = crate::Avx2Token::detect() {
                let v = x86::chains256(t, 1000);
                assert!((v - 4.0 * one).abs() <= 1e-12 * v.abs(), "{v} {one}");
            }
            if let Some(t) = crate::Avx512Token::detect() {
                let v = x86::chains512(t, 1000);
                assert!((v - 8.0 * one).abs() <= 1e-12 * v.abs(), "{v} {one}");
            }
        }
        assert!(one.is_finite() && one > 0.0);
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
