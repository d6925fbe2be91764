//! The host's tuning policy: which store instructions a sweep uses and how
//! many steps one pass over the box advances, chosen from the field's
//! shape and the caches. Each rule is data (the constants below) and a
//! function of them; none changes a bit, only the time. The measurements
//! behind each rule are in the crate's README ("Tuning policy"), with the
//! CPU they were taken on.

use crate::wavefront;
use crate::{Kernel, Stores};
use halo::FieldLayout;

/// The padded bytes of one field from which the Euler sweep at radius 1
/// stores its output with non-temporal stores (48 MiB: measured on an
/// Intel Xeon with a 2 MiB L2, where 128^3 was faster with plain stores
/// and 192^3 and 256^3 with streaming ones).
pub const STREAM_FROM: usize = 48 << 20;

/// The host kernel for a stencil of radius `radius`: AVX-512 where
/// the CPU has it, then AVX2, except at radius 4 and 5 (orders 8 and
/// 10), AVX2 first; the portable loop where neither exists.
///
/// Measured on an Intel Xeon core (AVX-512, 2 MiB L2) at 256^3, steps
/// of the app with each kernel, the two alternated, fields on huge
/// pages (`halo::Field`), ms a step AVX2 / AVX-512: FD-2 15.3-15.6 /
/// 14.1-15.0 (three pairs), FD-4 26.3-26.6 / 24.5-24.7, FD-6 33.8-34.4 /
/// 30.5-31.6, FD-8 43.6-44.1 / 48.5-49.0 (three), FD-10 51.8-53.5 /
/// 60.5-60.7 (three); from order 12 on AVX-512 took up to 22 % less
/// in 27 of 29 earlier pairs (the others within 1.5 %). The 16-core
/// Xeon host of the GPU machine favoured AVX-512 at orders 2, 4 and 6
/// (8 of 9 pairs) and from 12 on (11 of 15), AVX2 at order 8 (3 of
/// 3). (On small pages this core had AVX2 ahead at order 4 as well.)
pub fn host_kernel(radius: usize) -> Kernel {
    let order = if matches!(radius, 4 | 5) {
        [Kernel::Avx2, Kernel::Avx512]
    } else {
        [Kernel::Avx512, Kernel::Avx2]
    };
    order
        .into_iter()
        .find(|k| k.available())
        .unwrap_or(Kernel::Portable)
}

/// The store policy of the Euler sweep on `layout`: non-temporal stores at
/// radius 1 (order 2) on single-component fields of at least
/// [`STREAM_FROM`] bytes, which the next step reads back from memory
/// anyway, else plain ones (higher orders and several components were as
/// fast or slower streaming).
pub fn host_stores(layout: &FieldLayout) -> Stores {
    let bytes = layout
        .padded_len()
        .saturating_mul(std::mem::size_of::<f64>());
    if layout.ghost[0] == 1 && layout.components == 1 && bytes >= STREAM_FROM {
        Stores::Streaming
    } else {
        Stores::Cached
    }
}

/// The most Euler steps one host pass may advance
/// ([`Wavefront`](crate::wavefront::Wavefront)).
pub const MAX_HOST_STEPS_PER_PASS: usize = 4;

/// The steps a pass the default tries, most first; 1 when none fits.
pub const AUTO_STEPS: [usize; 2] = [MAX_HOST_STEPS_PER_PASS, 2];

/// The most cells, over the owned ones, a default multi-step pass may
/// compute ([`wavefront::redundancy`]): the rows a tile computes twice
/// grow with the steps and the radius, and past this their arithmetic
/// costs more than the traffic saved.
pub const AUTO_REDUNDANCY: f64 = 1.10;

/// The default steps a pass on `layout`: the first of [`AUTO_STEPS`] whose
/// pass computes at most [`AUTO_REDUNDANCY`] times the owned cells with
/// tiles sized to this CPU's caches ([`wavefront::budget`]), else 1.
pub fn auto_steps(layout: &FieldLayout) -> usize {
    auto_steps_within(layout, wavefront::budget())
}

/// [`auto_steps`] with rings of about `bytes` ([`wavefront::tile_within`]).
pub fn auto_steps_within(layout: &FieldLayout, bytes: usize) -> usize {
    auto_steps_with_tile(layout, |k| wavefront::tile_within(layout, k, bytes))
}

/// [`auto_steps`] with tiles of `tile(k)` rows for `k` steps a pass.
pub fn auto_steps_with_tile(layout: &FieldLayout, tile: impl Fn(usize) -> usize) -> usize {
    AUTO_STEPS
        .into_iter()
        .find(|&k| {
            wavefront::redundancy(layout.owned, layout.ghost[0], tile(k), k) <= AUTO_REDUNDANCY
        })
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_large_order_2_fields_stream_their_output() {
        let at = |n: usize, r: usize, components: usize| {
            host_stores(&FieldLayout {
                owned: [n; 3],
                ghost: [r; 3],
                components,
            })
        };
        // 256^3 at radius 1: 258^3 doubles, 137 MB.
        assert_eq!(at(256, 1, 1), Stores::Streaming);
        // The smallest cube at the threshold and the one below it.
        let n = (1..)
            .find(|&n| (n + 2usize).pow(3) * 8 >= STREAM_FROM)
            .unwrap();
        assert_eq!(at(n, 1, 1), Stores::Streaming);
        assert_eq!(at(n - 1, 1, 1), Stores::Cached);
        assert_eq!(at(128, 1, 1), Stores::Cached);
        // Higher orders and several components keep plain stores.
        assert_eq!(at(256, 2, 1), Stores::Cached);
        assert_eq!(at(256, 1, 2), Stores::Cached);
    }

    #[test]
    fn the_default_steps_a_pass_at_the_measured_sizes() {
        // The rule at the sizes it was measured at (the README and the
        // config's doc state it): 4 at FD-2 and FD-4, 2 at FD-6 to FD-12, 1
        // from FD-14.
        let cube = |n: usize, order: usize| FieldLayout {
            owned: [n; 3],
            ghost: [order / 2; 3],
            components: 1,
        };
        for (n, order, want) in [
            (256, 2, 4),
            (256, 4, 4),
            (256, 6, 2),
            (256, 8, 2),
            (256, 10, 2),
            (256, 12, 2),
            (256, 14, 1),
            (256, 20, 1),
            (128, 12, 2),
            (128, 14, 1),
            (128, 2, 4),
            (128, 4, 4),
            (128, 6, 2),
            (128, 8, 2),
        ] {
            let got = auto_steps_within(&cube(n, order), wavefront::BUDGET);
            assert_eq!(got, want, "{n}^3, order {order}");
        }
        // With the 1.5 MiB of rings of a 2 MiB L2 (see `wavefront::budget`;
        // FD-2, FD-4 and FD-8 at 256^3 measured): 4 at FD-2, 2 at FD-4 and
        // FD-6, 1 from FD-8.
        for n in [128, 256] {
            for order in (2..=20).step_by(2) {
                let want = match order {
                    2 => 4,
                    4 | 6 => 2,
                    _ => 1,
                };
                let got = auto_steps_within(&cube(n, order), 3 << 19);
                assert_eq!(got, want, "{n}^3, order {order}, L2 rings");
            }
        }
    }
}
