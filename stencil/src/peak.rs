//! The references for the stencils' GFLOP/s: the core's fused
//! multiply-add peak, checked against the CPU family's documented rate,
//! and the non-temporal copy (`simd::peak`, re-exported here), and the
//! sweep's own operations with their data in the L1 ([`term_rates`]). The
//! sweeps themselves never fuse (their bits must match the device's and
//! the scalar loop's), so a separate multiply and add per term reaches at
//! most half of this figure.

use std::hint::black_box;
use std::time::Instant;

pub use simd::peak::{copy_streaming, fma_peak, Check, FmaPeak, ABOVE_COUNTED, ABOVE_PEAK};

/// Flops per cell of the fused sweep of `order`: one multiply for the
/// centre, then per axis and offset an add of the pair, a multiply by the
/// weight and an add into the sum.
pub fn flops_per_cell(order: usize) -> usize {
    1 + 9 * (order / 2)
}

/// What the operations of one axis's terms reach with every value in the
/// L1 cache: the ceiling of a sweep that keeps the separate multiplies and
/// adds (no fused multiply-add) of the sweeps, measured rather than
/// assumed. The loop is the sweep's term loop, four vectors a step, each
/// adding `w (u(+m) + u(-m))` for `m = 1..=R` with the neighbours loaded,
/// on rows of 128 cells: once with the neighbours in other rows on
/// cache-line boundaries (axes 0 and 1, aligned loads) and once along the
/// row (axis 2, loads across cache lines).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TermRates {
    /// GFLOP/s of one axis's terms with aligned neighbours (3 `R` flops a
    /// cell).
    pub strided: f64,
    /// The same along the row.
    pub contiguous: f64,
    /// GFLOP/s of a whole cell (`flops_per_cell`) with two axes at the
    /// first rate and one at the second: the most a sweep of these
    /// operations reaches on this core with its data in the L1.
    pub cell: f64,
}

/// [`TermRates`] of `order` on AVX-512, the best of `passes` timed runs of
/// `reps` rows each (at least one of each); `None` where the CPU lacks the
/// AVX-512 sweep's instructions ([`Kernel::Avx512`](super::Kernel)) or
/// `order` is not one of 2, 4, .., 20.
pub fn term_rates(order: usize, reps: usize, passes: usize) -> Option<TermRates> {
    #[cfg(target_arch = "x86_64")]
    if super::Kernel::Avx512.available() && (2..=20).contains(&order) && order.is_multiple_of(2) {
        let r = order / 2;
        let reps = reps.max(1);
        let w: Vec<f64> = (1..=r).map(|m| 1.0 / (m * m) as f64).collect();
        let time = |stride: usize| {
            // Rows of `TERM_LEN` cells `TERM_PITCH` apart (a multiple of
            // eight values), the centre row in the middle of `2 r + 1`, or
            // one row with 16 values on either side; all on 64-byte
            // boundaries and in the L1 (23 KB at order 20).
            const LEN: usize = TERM_LEN;
            const PITCH: usize = TERM_PITCH;
            let rows = if stride == 1 { 1 } else { 2 * r + 1 };
            let mut buf = vec![0.0f64; rows * PITCH + 2 * 16 + 8];
            let lead = buf.as_ptr().align_offset(64).min(7);
            for (i, v) in buf.iter_mut().enumerate() {
                *v = (i % 97) as f64 * 1e-2;
            }
            let centre = lead + if stride == 1 { 16 } else { r * PITCH };
            let mut out = vec![0.0f64; LEN];
            (0..passes.max(1))
                .map(|_| {
                    let t = Instant::now();
                    // SAFETY: AVX-512F present (checked above); the rows
                    // `centre +- m stride` for `m <= r` lie in `buf` (`2 r +
                    // 1` rows from `lead`, or `16 >= r` values either side
                    // of the one row), `out` holds `LEN` values.
                    unsafe {
                        x86::terms512(
                            buf.as_ptr().add(centre),
                            out.as_mut_ptr(),
                            (LEN, reps),
                            stride,
                            &w,
                        )
                    };
                    black_box(&mut out);
                    t.elapsed().as_secs_f64() / (reps * LEN) as f64
                })
                .fold(f64::INFINITY, f64::min)
        };
        let (ts, tc) = (time(TERM_PITCH), time(1));
        let axis = (3 * r) as f64;
        return Some(TermRates {
            strided: axis / ts / 1e9,
            contiguous: axis / tc / 1e9,
            cell: flops_per_cell(order) as f64 / (2.0 * ts + tc) / 1e9,
        });
    }
    let _ = (order, reps, passes);
    None
}

/// Cells a row of [`term_rates`] and the distance of its aligned rows.
#[cfg(target_arch = "x86_64")]
const TERM_LEN: usize = 128;
#[cfg(target_arch = "x86_64")]
const TERM_PITCH: usize = TERM_LEN + 8;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::hint::black_box;

    /// `out[q] = sum_m w[m] (u[q + (m + 1) s] + u[q - (m + 1) s])` for
    /// `q < len` (a multiple of 32), four vectors a step, each sum from
    /// zero in the order of `m` with separate multiplies and adds, as the
    /// sweeps add one axis's terms; `reps` times over (the row's address
    /// hidden from the compiler each time, so none is left out).
    ///
    /// # Safety
    /// The CPU must have AVX-512F; `u + q +- (m + 1) s` readable for `q <
    /// len`, `m < w.len()`; `out..out + len` writable.
    #[target_feature(enable = "avx512f")]
    #[allow(unused_unsafe)] // value intrinsics are safe here from Rust 1.87
    pub(super) unsafe fn terms512(
        u: *const f64,
        out: *mut f64,
        (len, reps): (usize, usize),
        s: usize,
        w: &[f64],
    ) {
        for _ in 0..reps {
            // SAFETY: the caller's contract.
            unsafe { terms512_once(black_box(u), out, len, s, w) };
        }
    }

    /// One pass of [`terms512`].
    ///
    /// # Safety
    /// As [`terms512`].
    #[inline(always)]
    #[allow(unused_unsafe)]
    unsafe fn terms512_once(u: *const f64, out: *mut f64, len: usize, s: usize, w: &[f64]) {
        match w.len() {
            1 => unsafe { terms::<1>(u, out, len, s, w) },
            2 => unsafe { terms::<2>(u, out, len, s, w) },
            3 => unsafe { terms::<3>(u, out, len, s, w) },
            4 => unsafe { terms::<4>(u, out, len, s, w) },
            5 => unsafe { terms::<5>(u, out, len, s, w) },
            6 => unsafe { terms::<6>(u, out, len, s, w) },
            7 => unsafe { terms::<7>(u, out, len, s, w) },
            8 => unsafe { terms::<8>(u, out, len, s, w) },
            9 => unsafe { terms::<9>(u, out, len, s, w) },
            _ => unsafe { terms::<10>(u, out, len, s, w) },
        }
    }

    /// [`terms512`] for `R = w.len()` (at most 10).
    ///
    /// # Safety
    /// As [`terms512`].
    #[inline(always)]
    #[allow(unused_unsafe)]
    unsafe fn terms<const R: usize>(u: *const f64, out: *mut f64, len: usize, s: usize, w: &[f64]) {
        // SAFETY: the caller's contract (AVX-512F present, every address
        // read or written inside what it lists).
        unsafe {
            let wv: [__m512d; R] = std::array::from_fn(|m| _mm512_set1_pd(w[m]));
            let mut q = 0;
            while q + 32 <= len {
                let p = u.add(q);
                let mut v = [_mm512_setzero_pd(); 4];
                for (m, wm) in wv.iter().enumerate() {
                    let o = (m + 1) * s;
                    for (x, vx) in v.iter_mut().enumerate() {
                        let a = _mm512_loadu_pd(p.add(8 * x + o));
                        let b = _mm512_loadu_pd(p.add(8 * x).sub(o));
                        *vx = _mm512_add_pd(*vx, _mm512_mul_pd(*wm, _mm512_add_pd(a, b)));
                    }
                }
                for (x, vx) in v.iter().enumerate() {
                    _mm512_storeu_pd(out.add(q + 8 * x), *vx);
                }
                q += 32;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_l1_term_rates_are_measured_where_avx512_is() {
        let t = term_rates(20, 200, 2);
        assert_eq!(t.is_some(), crate::Kernel::Avx512.available());
        if let Some(t) = t {
            for g in [t.strided, t.contiguous, t.cell] {
                assert!(g.is_finite() && g > 0.0, "{t:?}");
            }
            // The cell's rate is a weighted harmonic mean of the two.
            assert!(t.cell >= t.strided.min(t.contiguous) * 0.99, "{t:?}");
        }
        for bad in [0, 3, 22] {
            assert_eq!(term_rates(bad, 10, 1), None, "order {bad}");
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_term_loop_computes_the_sweeps_terms() {
        if !crate::Kernel::Avx512.available() {
            return;
        }
        // Against the scalar sum in the same order (so the same bits), on
        // both strides, for every radius.
        let u: Vec<f64> = (0..2000)
            .map(|i| ((i * 37) % 101) as f64 * 0.013 - 0.6)
            .collect();
        for r in 1..=10 {
            let w: Vec<f64> = (1..=r).map(|m| 1.0 / (m as f64 + 0.5)).collect();
            for s in [1, 40] {
                let c = 10 * s + 3;
                let mut out = vec![0.0; 64];
                // SAFETY: AVX-512F present; `c +- m s` for `m <= 10` and
                // `q < 64` lie in `u` (403 +- 400 + 63 < 2000), `out` holds
                // 64 values.
                unsafe { x86::terms512(u.as_ptr().add(c), out.as_mut_ptr(), (64, 2), s, &w) };
                for (q, o) in out.iter().enumerate() {
                    let mut v = 0.0;
                    for (m, wm) in w.iter().enumerate() {
                        let k = (m + 1) * s;
                        v += wm * (u[c + q + k] + u[c + q - k]);
                    }
                    assert_eq!(o.to_bits(), v.to_bits(), "radius {r}, stride {s}, cell {q}");
                }
            }
        }
    }

    #[test]
    fn flops_of_the_sweep() {
        assert_eq!(flops_per_cell(2), 10);
        assert_eq!(flops_per_cell(20), 91);
    }
}
