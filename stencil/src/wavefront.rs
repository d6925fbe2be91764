//! The host's multi-step pass: `k` Euler steps of one rank that is its own
//! periodic neighbour, in one sweep over the field in memory (temporal
//! blocking with a wavefront along axis 0).
//!
//! The owned box is cut into tiles of rows along axis 1. For one tile, the
//! pass walks along axis 0 and keeps, for every level `s = 0..k` (level 0
//! is the input, level `s` the field after `s` steps), a ring of the
//! `2R + 1` latest planes of that level, each holding the tile's rows and
//! `(k - s) R` more rows on each side (level `s + 1` needs `R` of them on
//! each side of its own). At position `t` the pass gathers input plane `t`
//! into level 0 (periodic indices on every axis), then computes plane
//! `t - s R` of each level `s = 1..k` from the `2R + 1` planes of level
//! `s - 1` around it, the last level straight into the output field. The
//! rings of a tile stay in a cache (about [`budget`]: the L2 where it holds
//! 2 MiB or more, else the last-level cache), so a pass reads the field
//! from memory about once and writes it once for `k` steps,
//! where `k` single steps move it `k` times. The price is the rows computed
//! twice (`(k - 1) R` on each side of a tile, every level but the last) and
//! the planes past the ends of axis 0, which are the periodic images of
//! planes at the other end and are computed again rather than carried.
//!
//! Every value is computed by [`Sweep::apply_plane`] (the inner levels
//! without looking at the values they write), the sweep's arithmetic in
//! the sweep's order, from the same operands as in a single step, so `k`
//! steps a pass give the bits of `k` single steps. Only the last level's
//! values are checked for non-finite ones; where it has one, the pass
//! runs again checking every level (see [`Wavefront::run`]). At 256^3,
//! FD-2, in seven alternated pairs of runs the build looking at every
//! level took 0.04-0.94 ms a step longer in five and the same time in two
//! (13.4-13.7 ms a step against 12.7-13.7).

use crate::Sweep;
use halo::FieldLayout;

/// The bytes of ring planes a tile aims at where no cache size can be
/// read: 7/32 of the 32 MiB L3 of an AMD EPYC. Rings sized for its 1 MiB L2 measured slower: at 256^3, FD-2,
/// four steps a pass took 20.6 ms a step with tiles of 23 rows (0.77 MiB
/// of rings), 16.5 with 64 and 14.5-15.6 with the whole axis (6.2 MiB); at
/// 512^3 99 ms with 128 rows (6.4 MiB), 109 with 64, 171 with 256 and 211
/// with the whole axis, against 178 for one step a pass.
pub const BUDGET: usize = 7 << 20;

/// The smallest private L2 cache whose rings [`budget`] takes instead of
/// the last-level cache's share.
pub const L2_RINGS_FROM: usize = 2 << 20;

/// The bytes of ring planes a tile aims at on this machine, from the caches
/// of CPU 0 as Linux reports them
/// (`/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}`), read
/// once:
///
/// - 3/4 of the L2 where the L2 holds at least [`L2_RINGS_FROM`] (2 MiB);
/// - else 7/32 of the last-level cache;
/// - [`BUDGET`] where neither can be read.
///
/// The two kinds of machine this was measured on want different levels.
/// On one core of an Intel Xeon with 2 MiB of L2 and a mesh L3 shared by
/// the whole chip (Linux reports 480 MiB), FD-2 at 256^3 with four steps
/// a pass took 14.3-14.5 ms a step with 1.5 MiB of rings (3/4 of the L2,
/// tiles of 52 rows), 15.0-19.5 with 0.75 MiB and 21.8-22.3 with the
/// whole axis in the L3 (6.2 MiB), against a copy of the field in 14.8
/// ms; FD-4 25.7-26.1 against 33.8-34.1 ms and FD-8 45.3-46.3 against
/// 59.4-59.5 ms (`heat3d --n 256 --steps 24 --ranks 1 --mode blocking`,
/// two or three runs each, 2026-12-04). On the AMD EPYC (1 MiB of L2, a 32 MiB L3
/// per core complex) the whole axis in the L3 was fastest (see
/// [`BUDGET`]). A tile can also be set outright: [`Wavefront::with_tile`]
/// (heat3d's `tile_rows`).
pub fn budget() -> usize {
    static BYTES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| budget_for(simd::cache::size(2), simd::cache::last_level()))
}

/// [`budget`]'s rule for an L2 of `l2` bytes and a last-level cache of
/// `llc` bytes, either unknown.
fn budget_for(l2: Option<usize>, llc: Option<usize>) -> usize {
    match (l2, llc) {
        (Some(l2), _) if l2 >= L2_RINGS_FROM => l2 / 4 * 3,
        (_, Some(llc)) => llc / 32 * 7,
        _ => BUDGET,
    }
}

/// The largest radius a sweep has (order 20).
const MAX_RADIUS: usize = 10;

/// The rings of the multi-step pass for one padded layout (ghost width
/// `R` on every axis, `R` the sweep's radius).
#[derive(Debug)]
pub struct Wavefront {
    /// The most steps one pass advances.
    steps: usize,
    r: usize,
    n: [usize; 3],
    /// Values a row (the padded length of axis 2) and a plane (axis 1 and
    /// 2) of the field.
    s1: usize,
    s0: usize,
    /// Values a row of a ring plane (a multiple of 8), and where in it the
    /// owned values start (a multiple of 8, at least the radius): each
    /// owned row starts on a 64-byte boundary, so the loads of the
    /// centre and of the axis-0 and axis-1 neighbours are aligned.
    rs: usize,
    c0: usize,
    /// Output rows a tile.
    tile: usize,
    /// Values a ring slot: the rows of level 0 of a full tile.
    slot: usize,
    /// Where the rings start in `ring` (its first 64-byte boundary).
    base: usize,
    /// Levels `0..steps`, `2R + 1` slots each, after `base`.
    ring: Vec<f64>,
}

impl Wavefront {
    /// The rings for passes of up to `steps` steps (at least 2) on
    /// `layout`, whose ghost width is the sweep's radius on every axis and
    /// whose owned extents are at least that radius.
    pub fn new(layout: &FieldLayout, steps: usize) -> Self {
        Self::with_tile(layout, steps, tile_for(layout, steps))
    }

    /// As [`Wavefront::new`], with tiles of `tile` rows (at least 1).
    pub fn with_tile(layout: &FieldLayout, steps: usize, tile: usize) -> Self {
        let r = layout.ghost[0];
        assert!(tile >= 1, "tiles of at least one row");
        assert!(steps >= 2, "a multi-step pass advances at least 2 steps");
        assert!(
            layout.ghost == [r; 3] && layout.components == 1,
            "the pass needs one component and ghost width {r} on every axis ({layout:?})"
        );
        assert!(
            layout.owned.iter().all(|&n| n >= r.max(1)),
            "owned extents {:?} below the radius {r}",
            layout.owned
        );
        let [s0, s1, _] = layout.strides();
        let n = layout.owned;
        let tile = tile.min(n[1]);
        let (c0, rs) = ring_row(r, n[2]);
        let slot = (tile + 2 * steps * r) * rs;
        let ring = vec![0.0; steps * (2 * r + 1) * slot + 7];
        // The pointer of a vector of f64 is 8-byte aligned; it never moves,
        // as the vector is never resized.
        let base = (64 - ring.as_ptr() as usize % 64) % 64 / 8;
        Wavefront {
            steps,
            r,
            n,
            s1,
            s0,
            rs,
            c0,
            tile,
            slot,
            base,
            ring,
        }
    }

    /// Advances `k` steps (`2..=steps`) of `sweep` from the owned cells of
    /// `u` into those of `a` (both of the layout given to [`Wavefront::new`];
    /// the ghosts of `u` are not read, those of `a` not written). Returns
    /// the first of the `k` steps (from 1) that wrote a non-finite value,
    /// if one did. `stream` writes the output with non-temporal stores.
    pub fn run(
        &mut self,
        sweep: &Sweep,
        k: usize,
        u: &[f64],
        a: &mut [f64],
        stream: bool,
    ) -> Option<usize> {
        // Only the last level's values are looked at: a non-finite value
        // stays non-finite through every later step (a sum or product with
        // one is infinite or NaN, zero times infinity included), and every
        // value of an inner level has the bits of an owned value of its
        // step (itself, its periodic image, or a row of another tile),
        // which reaches the last level through the centre term. When the
        // last level has one, the pass runs again (writing `a` again)
        // looking at every level, to name the first step that wrote one.
        if self.pass(sweep, k, u, a, stream, false)[k] {
            return None;
        }
        let ok = self.pass(sweep, k, u, a, stream, true);
        ok.iter().skip(1).position(|&o| !o).map(|s| s + 1)
    }

    /// The pass of [`Wavefront::run`]; entry `s` of the result is false
    /// when level `s` wrote a non-finite value, looked at on the inner
    /// levels only with `every`.
    fn pass(
        &mut self,
        sweep: &Sweep,
        k: usize,
        u: &[f64],
        a: &mut [f64],
        stream: bool,
        every: bool,
    ) -> Vec<bool> {
        assert!(
            (2..=self.steps).contains(&k),
            "{k} steps in a pass of at most {}",
            self.steps
        );
        assert_eq!(
            sweep.radius(),
            self.r,
            "the sweep's radius against the layout's ghosts"
        );
        let len = self.n[0] * self.s0 + 2 * self.r * self.s0;
        assert!(
            u.len() >= len && a.len() >= len,
            "fields of {} and {} values, the layout has {len}",
            u.len(),
            a.len()
        );
        let Wavefront {
            r,
            n,
            s0,
            s1,
            rs,
            c0,
            tile,
            slot,
            base,
            ..
        } = *self;
        let nslots = 2 * r + 1;
        let level = nslots * slot;
        let ring = &mut self.ring;
        let mut ok = vec![true; k + 1];
        // Where plane `q` of level `s` starts in the ring.
        let at =
            |s: usize, q: isize| base + s * level + q.rem_euclid(nslots as isize) as usize * slot;
        let owned = c0..c0 + n[2];
        let (n0, n1) = (n[0] as isize, n[1] as isize);
        let kr = (k * r) as isize;
        for j0 in (0..n[1]).step_by(tile) {
            let rows = tile.min(n[1] - j0);
            // Rows of level s: the tile's and (k - s) r more on each side.
            let lines = |s: usize| rows + 2 * (k - s) * r;
            for t in -kr..n0 + kr {
                for s in 0..=k {
                    let q = t - (s * r) as isize;
                    let ext = ((k - s) * r) as isize;
                    if q < -ext || q >= n0 + ext {
                        continue;
                    }
                    if s == 0 {
                        // Input plane q (periodic), rows j0 - kr.. (periodic).
                        let p = q.rem_euclid(n0) as usize + r;
                        let dst = &mut ring[at(0, q)..][..slot];
                        for l in 0..lines(0) {
                            let j = (j0 as isize - kr + l as isize).rem_euclid(n1) as usize + r;
                            let from = p * s0 + j * s1 + r;
                            let row = &mut dst[l * rs..(l + 1) * rs];
                            row[owned.clone()].copy_from_slice(&u[from..from + n[2]]);
                            row_ghosts(row, c0, r, n[2]);
                        }
                        continue;
                    }
                    // Where planes q - r..=q + r of level s - 1 start.
                    let all: [usize; 2 * MAX_RADIUS + 1] =
                        std::array::from_fn(|d| at(s - 1, q + d.min(2 * r) as isize - r as isize));
                    let planes = &all[..2 * r + 1];
                    if s < k {
                        // Level s from level s - 1: its rows r.. of level
                        // s - 1's, into the rows 0.. of its own plane.
                        let (src, rest) = ring.split_at_mut(base + s * level);
                        let start = at(s, q) - base - s * level;
                        let dst = &mut rest[start..start + slot];
                        ok[s] &= sweep.apply_plane_checking(
                            every,
                            src,
                            planes,
                            rs,
                            r..r + lines(s),
                            owned.clone(),
                            dst,
                            (c0, rs),
                            false,
                        );
                        for l in 0..lines(s) {
                            row_ghosts(&mut dst[l * rs..(l + 1) * rs], c0, r, n[2]);
                        }
                    } else {
                        // The last level: the tile's rows of owned plane q.
                        let to = (q as usize + r) * s0 + (j0 + r) * s1 + r;
                        ok[s] &= sweep.apply_plane(
                            ring,
                            planes,
                            rs,
                            r..r + rows,
                            owned.clone(),
                            a,
                            (to, s1),
                            stream,
                        );
                    }
                }
            }
        }
        ok
    }
}

/// The tile [`Wavefront::new`] takes for passes of up to `steps` steps on
/// `layout`: the widest whose rings fit [`budget`], at least 8 rows (or the
/// whole axis): the rows computed twice are a smaller share of a wider
/// tile.
pub fn tile_for(layout: &FieldLayout, steps: usize) -> usize {
    tile_within(layout, steps, budget())
}

/// [`tile_for`] with a budget of `bytes`.
pub fn tile_within(layout: &FieldLayout, steps: usize, bytes: usize) -> usize {
    let r = layout.ghost[0];
    let per_row = ring_row(r, layout.owned[2]).1 * std::mem::size_of::<f64>();
    // Rows of rings that fit: steps levels of 2r + 1 slots of
    // tile + 2 steps r rows each.
    let fit = (bytes / (steps * (2 * r + 1) * per_row)).saturating_sub(2 * steps * r);
    layout.owned[1].min(fit.max(8))
}

/// The cells a pass of `k` steps with tiles of `tile` rows computes on `n`
/// owned cells at radius `r`, over the `k` steps' owned cells: above 1 by
/// the rows a tile computes twice and the planes past the ends of axis 0.
pub fn redundancy(n: [usize; 3], r: usize, tile: usize, k: usize) -> f64 {
    let [n0, n1, _] = n;
    let tile = tile.clamp(1, n1);
    let mut cells = 0;
    for j0 in (0..n1).step_by(tile) {
        let rows = tile.min(n1 - j0);
        for s in 1..=k {
            let e = 2 * (k - s) * r;
            cells += (rows + e) * (n0 + e);
        }
    }
    cells as f64 / (k * n0 * n1) as f64
}

/// Where the owned values of a ring row start and the values a ring row
/// holds, for radius `r` and `n` owned values: both multiples of 8, the
/// row at least `r` wider than the owned values on each side.
fn ring_row(r: usize, n: usize) -> (usize, usize) {
    let c0 = r.div_ceil(8) * 8;
    (c0, (c0 + n + r).div_ceil(8) * 8)
}

/// Fills the `r` ghost values on each side of the `n` owned values of a
/// row, which start at `c0`, with their periodic images.
fn row_ghosts(row: &mut [f64], c0: usize, r: usize, n: usize) {
    for m in 1..=r {
        row[c0 - m] = row[c0 + (n - m % n) % n];
        row[c0 + n - 1 + m] = row[c0 + (n - 1 + m) % n];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use halo::Region;

    /// The periodic images into every ghost of a one-rank padded field.
    fn periodic_ghosts(l: &FieldLayout, u: &mut [f64]) {
        let p = l.padded();
        let r = l.ghost[0] as isize;
        let s = l.strides();
        for i in 0..p[0] {
            for j in 0..p[1] {
                for z in 0..p[2] {
                    let src = [i, j, z]
                        .iter()
                        .zip(l.owned)
                        .map(|(&x, n)| {
                            (x as isize - r).rem_euclid(n as isize) as usize + r as usize
                        })
                        .collect::<Vec<_>>();
                    u[i * s[0] + j * s[1] + z] = u[src[0] * s[0] + src[1] * s[1] + src[2]];
                }
            }
        }
    }

    /// `k` single sweeps, each after a periodic ghost fill.
    fn reference(sweep: &Sweep, l: &FieldLayout, u: &[f64], k: usize) -> Vec<f64> {
        let mut u = u.to_vec();
        let mut a = vec![0.0; u.len()];
        let region: Region = l.owned_region();
        for _ in 0..k {
            periodic_ghosts(l, &mut u);
            assert!(sweep.apply(l, &u, &mut a, &region));
            std::mem::swap(&mut u, &mut a);
        }
        u
    }

    fn owned_of(l: &FieldLayout, u: &[f64]) -> Vec<u64> {
        let s = l.strides();
        let r = l.ghost[0];
        let mut v = vec![];
        for i in 0..l.owned[0] {
            for j in 0..l.owned[1] {
                for z in 0..l.owned[2] {
                    v.push(u[(i + r) * s[0] + (j + r) * s[1] + z + r].to_bits());
                }
            }
        }
        v
    }

    #[test]
    fn passes_give_the_bits_of_single_steps() {
        // Extents between the radius and twice it, odd ones, and one that
        // needs several tiles; orders 2, 4 and 8; 2 to 4 steps a pass.
        for (order, owned) in [
            (2, [3, 5, 2]),
            (2, [7, 40, 9]),
            (4, [5, 3, 4]),
            (4, [9, 11, 13]),
            (8, [6, 9, 4]),
        ] {
            let r = order / 2;
            let l = FieldLayout {
                owned,
                ghost: [r; 3],
                components: 1,
            };
            let h = [0.7, 0.9, 1.1];
            let sweep = Sweep::new(order, h, 0.02, true).unwrap();
            let mut u = vec![0.0; l.padded_len()];
            for (q, v) in u.iter_mut().enumerate() {
                *v = ((q * 7919) % 1013) as f64 / 1013.0 - 0.5;
            }
            for steps in [2, 4] {
                // The default tile (the whole axis here), and tiles of 1, 2
                // and 3 rows.
                for tile in [0, 1, 2, 3] {
                    let mut w = match tile {
                        0 => Wavefront::new(&l, steps),
                        t => Wavefront::with_tile(&l, steps, t),
                    };
                    for k in 2..=steps {
                        let want = owned_of(&l, &reference(&sweep, &l, &u, k));
                        // Plain and non-temporal stores of the output.
                        for stream in [false, true] {
                            let mut a = vec![f64::NAN; u.len()];
                            assert_eq!(w.run(&sweep, k, &u, &mut a, stream), None);
                            assert_eq!(
                                owned_of(&l, &a),
                                want,
                                "order {order}, {owned:?}, tile {tile}, {k} steps, stream {stream}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn redundancy_counts_the_cells_computed() {
        // One tile of 10 rows, 6 planes, radius 1, 2 steps: level 1 computes
        // 12 rows of 8 planes, level 2 10 of 6.
        assert_eq!(
            redundancy([6, 10, 4], 1, 10, 2),
            (12.0 * 8.0 + 60.0) / 120.0
        );
        // Tiles of 4 rows (4, 4, 2), radius 2, 2 steps: level 1 computes
        // 4 more rows a tile and 4 more planes.
        assert_eq!(
            redundancy([6, 10, 4], 2, 4, 2),
            ((8.0 + 8.0 + 6.0) * 10.0 + 60.0) / 120.0
        );
    }

    #[test]
    fn tiles_follow_the_budget() {
        let l = |n: usize, r: usize| FieldLayout {
            owned: [n; 3],
            ghost: [r; 3],
            components: 1,
        };
        // Ring rows: owned values from a multiple of 8, at least the radius
        // in; the row a multiple of 8 with the radius after the owned ones.
        assert_eq!(ring_row(1, 256), (8, 272));
        assert_eq!(ring_row(10, 5), (16, 32));
        assert_eq!(ring_row(8, 8), (8, 24));
        // Boxes whose rings fit take the whole axis.
        assert_eq!(tile_within(&l(16, 1), 4, BUDGET), 16);
        assert_eq!(tile_within(&l(256, 1), 4, BUDGET), 256);
        for (n, r, k) in [(512, 1, 4), (512, 2, 3), (1024, 1, 2)] {
            let tile = tile_within(&l(n, r), k, BUDGET);
            let bytes = |t: usize| k * (2 * r + 1) * (t + 2 * k * r) * ring_row(r, n).1 * 8;
            assert!(bytes(tile) <= BUDGET || tile == 8, "{n} {r} {k}");
            assert!(bytes(tile + 1) > BUDGET, "{n} {r} {k}: not the widest");
        }
        // No fewer than 8 rows, whatever the budget.
        assert_eq!(tile_within(&l(64, 1), 4, 1), 8);
        // The machine's budget is a positive fraction of a cache.
        assert!(budget() > 0);
    }

    #[test]
    fn the_budget_takes_the_l2_from_2_mib() {
        // The two machines measured (see `budget`): an Intel Xeon's 2 MiB
        // L2 and 480 MiB L3, an AMD EPYC's 1 MiB L2 and 32 MiB L3.
        assert_eq!(budget_for(Some(2 << 20), Some(480 << 20)), 3 << 19);
        assert_eq!(budget_for(Some(1 << 20), Some(32 << 20)), 7 << 20);
        assert_eq!(budget_for(Some(2 << 20), None), 3 << 19);
        assert_eq!(budget_for(Some(1 << 20), None), BUDGET);
        assert_eq!(budget_for(None, Some(32 << 20)), 7 << 20);
        assert_eq!(budget_for(None, None), BUDGET);
    }

    #[test]
    fn a_non_finite_value_is_reported_at_its_step() {
        let l = FieldLayout {
            owned: [6, 7, 5],
            ghost: [1; 3],
            components: 1,
        };
        let sweep = Sweep::new(2, [1.0; 3], 0.1, true).unwrap();
        let mut u = vec![1.0; l.padded_len()];
        let s = l.strides();
        u[3 * s[0] + 4 * s[1] + 2] = f64::INFINITY;
        let mut w = Wavefront::new(&l, 3);
        let mut a = vec![0.0; u.len()];
        assert_eq!(w.run(&sweep, 3, &u, &mut a, false), Some(1));
        // A value that grows about 6e60 times a step: finite after the
        // first step (6e260), infinite after the second.
        let mut u = vec![1.0; l.padded_len()];
        u[3 * s[0] + 4 * s[1] + 2] = 1e200;
        let big = Sweep::new(2, [1.0; 3], 1e60, true).unwrap();
        assert_eq!(w.run(&big, 3, &u, &mut a, false), Some(2));
    }
}
