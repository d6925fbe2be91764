//! The fused sweep with explicit SIMD along the fastest axis (AVX2 or
//! AVX-512, chosen at run time).
//!
//! Each lane computes one cell with the scalar kernel's operations in the
//! scalar kernel's order (`c u`, then for axes 0, 1, 2 and offsets
//! `1..=R`: `v = v + w * (u(+m) + u(-m))`), as separate multiplies and
//! adds (no fused multiply-add), so every cell has the scalar bits whatever
//! the vector width, the unrolling or the position of the cell in its row.
//!
//! A row of the region is cut into vectors: with plain stores and vectors
//! of a whole cache line (AVX-512), a first vector at the row's start when
//! the input there is not on a line boundary, then vectors from the first
//! cell that is (so that
//! the centre loads, and the stores into an output with the input's
//! layout, do not straddle cache lines; the cells the first vector shares
//! with the next are computed and stored twice, with the same bits); `U` vectors at
//! a time (register blocking: the weights are read once per `U * W` cells
//! and `U` independent chains of additions are in flight), then single
//! vectors, then one last vector that ends at the row's end and overlaps
//! cells already computed, of which only the new lanes are stored. With
//! non-temporal stores every whole 64-byte line of the output row gets
//! streaming stores and the cells before the first and after the last
//! whole line are computed one at a time with plain stores, so no line is
//! written by both kinds of store; the caller fences once at the end of the
//! sweep.
//!
//! With plain stores the sweep takes two planes at a time ([`row_p`],
//! [`cells_p`]): the rows of planes `i` and `i + 1` at the same position
//! share their axis-0 neighbours, which are loaded once for both.
//!
//! At radius 1 the fastest-axis neighbours of a group of `U` vectors come
//! from its centre vectors shifted by one lane (`Vf::back`, `Vf::on`) and
//! the one value past each end, instead of two unaligned loads a vector
//! that cross cache lines: the same operands, so the same bits. In cache
//! (64^3, `sweep_timing 64 2 20`) that took the AVX-512 sweep from 0.126 to
//! 0.116-0.124 ms and the AVX2 one from 0.122 to 0.117.

/// One vector of `W` doubles and the operations the sweep uses, each one
/// IEEE operation per lane.
///
/// The vectors are `simd`'s, built with the token of their instruction
/// set (`()` for the portable [`V1`]), which the sweep carries in its
/// [`Weights`].
pub(super) trait Vf: Copy {
    /// Proof that the CPU runs these vectors.
    type Token: Copy;
    /// Lanes.
    const W: usize;
    /// `v` in every lane.
    fn splat(t: Self::Token, v: f64) -> Self;
    /// `W` doubles from `p`.
    ///
    /// # Safety
    /// `p..p + W` must be readable.
    unsafe fn load(t: Self::Token, p: *const f64) -> Self;
    /// `W` doubles to `p`.
    ///
    /// # Safety
    /// `p..p + W` must be writable.
    unsafe fn store(self, p: *mut f64);
    /// `W` doubles to `p` with a non-temporal store.
    ///
    /// # Safety
    /// `p..p + W` must be writable and `p` aligned to `8 W` bytes.
    unsafe fn stream(self, p: *mut f64);
    /// Lanes `from..W` to `p + from..p + W`; the other lanes of memory are
    /// not touched.
    ///
    /// # Safety
    /// `p + from..p + W` must be writable and `from < W`.
    unsafe fn store_from(self, p: *mut f64, from: usize);
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// Lane `i` of the result is lane `i - 1` of `self`, lane 0 the last
    /// lane of `prev`: the values one place back along a row.
    fn back(self, prev: Self) -> Self;
    /// Lane `i` of the result is lane `i + 1` of `self`, the last lane
    /// lane 0 of `next`: the values one place on along a row.
    fn on(self, next: Self) -> Self;
    /// True when every lane is finite.
    fn all_finite(self) -> bool;
}

/// The weights of one sweep as vectors.
pub(super) struct Weights<V: Vf, const R: usize> {
    /// The vectors' token.
    pub t: V::Token,
    pub c: V,
    pub w: [[V; R]; 3],
}

impl<V: Vf, const R: usize> Weights<V, R> {
    #[inline(always)]
    pub fn new(t: V::Token, c: f64, w: &[[f64; R]; 3]) -> Self {
        Weights {
            t,
            c: V::splat(t, c),
            w: [0, 1, 2].map(|d| std::array::from_fn(|m| V::splat(t, w[d][m]))),
        }
    }
}

/// Where the axis-0 neighbours of a cell are, as offsets in values from
/// the cell: `plus[m]` for `+(m + 1) e_0`, `minus[m]` for `-(m + 1) e_0`.
/// In a padded field they are `+-(m + 1) s0`; in a ring of planes (the
/// host's multi-step pass) each plane sits wherever its slot is.
#[derive(Clone, Copy, Debug)]
pub(super) struct Planes<const R: usize> {
    pub plus: [isize; R],
    pub minus: [isize; R],
}

impl<const R: usize> Planes<R> {
    /// The neighbours along an axis of stride `s0`.
    pub fn strided(s0: usize) -> Self {
        Planes {
            plus: std::array::from_fn(|m| ((m + 1) * s0) as isize),
            minus: std::array::from_fn(|m| -(((m + 1) * s0) as isize)),
        }
    }
}

/// `U` vectors of cells starting at `u` (consecutive along the fastest
/// axis), each with the scalar kernel's order of operations.
///
/// # Safety
/// Every `u + x W + o` for `x < U`, lanes `0..W` and `o` in `0`,
/// `x0.plus[m]`, `x0.minus[m]`, `+-m s1`, `+-m` (`m = 1..=R`) must be
/// readable.
#[inline(always)]
unsafe fn cells<V: Vf, const R: usize, const U: usize>(
    u: *const f64,
    x0: &Planes<R>,
    s1: usize,
    k: &Weights<V, R>,
) -> [V; U] {
    // SAFETY: every address read is one the contract lists.
    unsafe {
        let c: [V; U] = std::array::from_fn(|x| V::load(k.t, u.add(x * V::W)));
        let mut v: [V; U] = std::array::from_fn(|x| k.c.mul(c[x]));
        for (m, wm) in k.w[0].iter().enumerate() {
            for (x, vx) in v.iter_mut().enumerate() {
                let p = u.wrapping_add(x * V::W);
                let (a, b) = (
                    V::load(k.t, p.offset(x0.plus[m])),
                    V::load(k.t, p.offset(x0.minus[m])),
                );
                *vx = vx.add(wm.mul(a.add(b)));
            }
        }
        axis::<V, R, U>(&mut v, u, s1, (k.t, &k.w[1]));
        if R == 1 {
            shifted::<V, R, U>(&mut v, &c, u, k);
        } else {
            axis::<V, R, U>(&mut v, u, 1, (k.t, &k.w[2]));
        }
        v
    }
}

/// At radius 1, the fastest axis of the `U` vectors `c` centred at `u`:
/// `v[x] = v[x] + w (u(+1) + u(-1))` from the centre vectors shifted by one
/// lane and the two values past the ends: the same operands (so the same
/// bits) as two loads a vector, without those loads across cache lines.
///
/// # Safety
/// `u - 1` and `u + U W` must be readable.
#[inline(always)]
unsafe fn shifted<V: Vf, const R: usize, const U: usize>(
    v: &mut [V; U],
    c: &[V; U],
    u: *const f64,
    k: &Weights<V, R>,
) {
    // SAFETY: the two values the contract lists.
    let (before, after) = unsafe { (V::splat(k.t, *u.sub(1)), V::splat(k.t, *u.add(U * V::W))) };
    for (x, vx) in v.iter_mut().enumerate() {
        let b = c[x].back(if x == 0 { before } else { c[x - 1] });
        let a = c[x].on(if x + 1 == U { after } else { c[x + 1] });
        *vx = vx.add(k.w[2][0].mul(a.add(b)));
    }
}

/// [`cells`] for `P` neighbouring planes at once: the `U` vectors of cells
/// at `u + p s0` for `p < P` (`s0` the stride of axis 0), each cell with
/// the scalar kernel's operations in its order. The planes share their
/// axis-0 neighbours: each of the `2R + P` planes around them is loaded
/// once for all (two loads a step, against `2P` plane by plane). In a sweep
/// the planes around a row lie a whole tile of rows apart, so those loads
/// are the ones that miss the L1 cache.
///
/// # Safety
/// [`cells`]'s contract for every `u + p s0`, `p < P`, with `x0` the
/// planes of stride `s0`.
#[inline(always)]
unsafe fn cells_p<V: Vf, const R: usize, const U: usize, const P: usize>(
    u: *const f64,
    s0: usize,
    s1: usize,
    k: &Weights<V, R>,
) -> [[V; U]; P] {
    // SAFETY: every address read is one the contract lists for one of the
    // planes.
    unsafe {
        let row = |p: usize| u.add(p * s0);
        let mut c = [[V::splat(k.t, 0.0); U]; P];
        for (p, cp) in c.iter_mut().enumerate() {
            for (x, cx) in cp.iter_mut().enumerate() {
                *cx = V::load(k.t, row(p).add(x * V::W));
            }
        }
        let mut v = [[V::splat(k.t, 0.0); U]; P];
        for (vp, cp) in v.iter_mut().zip(&c) {
            for (vx, cx) in vp.iter_mut().zip(cp) {
                *vx = k.c.mul(*cx);
            }
        }
        // At step `m` plane `p` takes planes `p + m + 1` (`hi[p]`) and `p -
        // m - 1` (`lo[p]`), counted from `u`'s; from one step to the next
        // the windows move by one plane, and one plane enters each.
        let mut hi = [[V::splat(k.t, 0.0); U]; P];
        let mut lo = [[V::splat(k.t, 0.0); U]; P];
        for p in 0..P {
            for x in 0..U {
                let q = u.wrapping_add(x * V::W);
                hi[p][x] = if p + 1 < P {
                    c[p + 1][x]
                } else {
                    V::load(k.t, q.add(P * s0))
                };
                lo[p][x] = if p > 0 {
                    c[p - 1][x]
                } else {
                    V::load(k.t, q.sub(s0))
                };
            }
        }
        for (m, wm) in k.w[0].iter().enumerate() {
            for p in 0..P {
                for x in 0..U {
                    v[p][x] = v[p][x].add(wm.mul(hi[p][x].add(lo[p][x])));
                }
            }
            if m + 1 < R {
                for x in 0..U {
                    let q = u.wrapping_add(x * V::W);
                    for p in 0..P - 1 {
                        hi[p][x] = hi[p + 1][x];
                    }
                    hi[P - 1][x] = V::load(k.t, q.add((P + m + 1) * s0));
                    for p in (1..P).rev() {
                        lo[p][x] = lo[p - 1][x];
                    }
                    lo[0][x] = V::load(k.t, q.sub((m + 2) * s0));
                }
            }
        }
        for (p, vp) in v.iter_mut().enumerate() {
            axis::<V, R, U>(vp, row(p), s1, (k.t, &k.w[1]));
        }
        for (p, vp) in v.iter_mut().enumerate() {
            if R == 1 {
                shifted::<V, R, U>(vp, &c[p], row(p), k);
            } else {
                axis::<V, R, U>(vp, row(p), 1, (k.t, &k.w[2]));
            }
        }
        v
    }
}

/// `v[x] = v[x] + w[m] (u(x W + (m + 1) s) + u(x W - (m + 1) s))` for
/// `m = 0..R` in order.
///
/// # Safety
/// As for [`cells`], with `s` one of its strides.
#[inline(always)]
unsafe fn axis<V: Vf, const R: usize, const U: usize>(
    v: &mut [V; U],
    u: *const f64,
    s: usize,
    (t, w): (V::Token, &[V; R]),
) {
    for (m, wm) in w.iter().enumerate() {
        let o = (m + 1) * s;
        for (x, vx) in v.iter_mut().enumerate() {
            let p = u.wrapping_add(x * V::W);
            // SAFETY: `p + o` and `p - o` are addresses the contract of
            // `cells` lists.
            let (a, b) = unsafe { (V::load(t, p.add(o)), V::load(t, p.sub(o))) };
            *vx = vx.add(wm.mul(a.add(b)));
        }
    }
}

/// One cell, scalar, the same operations in the same order.
///
/// # Safety
/// `u + o` must be readable for `o` in `0`, `x0.plus[m]`, `x0.minus[m]`,
/// `+-m s1`, `+-m`.
#[inline(always)]
unsafe fn cell<const R: usize>(
    u: *const f64,
    x0: &Planes<R>,
    s1: usize,
    c: f64,
    w: &[[f64; R]; 3],
) -> f64 {
    // SAFETY (whole body): every address read is one the contract lists.
    unsafe {
        let mut v = c * *u;
        for m in 0..R {
            v += w[0][m] * (*u.offset(x0.plus[m]) + *u.offset(x0.minus[m]));
        }
        for (d, s) in [(1, s1), (2, 1)] {
            for m in 0..R {
                let o = (m + 1) * s;
                v += w[d][m] * (*u.add(o) + *u.sub(o));
            }
        }
        v
    }
}

use simd::prefetch_read as prefetch;

/// What every row of one sweep shares.
pub(super) struct Ctx<'a, V: Vf, const R: usize> {
    /// The axis-0 neighbours, and the stride of axis 1 (axis 2 has
    /// stride 1).
    pub x0: Planes<R>,
    pub s1: usize,
    /// The weights as vectors.
    pub k: Weights<V, R>,
    /// The weights as scalars (rows shorter than a vector).
    pub c: f64,
    pub w: &'a [[f64; R]; 3],
    /// Non-temporal stores for the whole lines of the output.
    pub stream: bool,
}

/// Where the vectors of a row centred at `u` (`len` cells) start with plain
/// stores: `Some(lead)`, the first cell whose centre value lies on a cache
/// line, when the vectors are a whole line wide (AVX-512), the row does not
/// start on one and is long enough (a whole first vector then covers the
/// cells before `lead`); `None` when they start at the row's first cell.
#[inline(always)]
fn aligned_lead<V: Vf>(u: *const f64, len: usize) -> Option<usize> {
    let w = V::W;
    let lead = (w - (u as usize / 8) % w) % w;
    let whole_lines = 8 * w == 64;
    (whole_lines && lead > 0 && (u as usize).is_multiple_of(8) && len >= lead + w).then_some(lead)
}

/// One row of `len` cells: reads around `u`, writes `out..out + len`.
/// Adds every value written to `acc` (one lane per cell position; the
/// scalar cells of short rows to every lane): a non-finite value makes a
/// lane non-finite, and so can an overflow of finite values, which the
/// caller tells apart by looking at the output again.
///
/// # Safety
/// For every cell `q < len`, `u + q + o` must be readable for the offsets
/// of [`cells`] (with `ctx.x0` and `ctx.s1`), and `out..out + len` writable and disjoint from what is
/// read.
#[inline(always)]
pub(super) unsafe fn row<V: Vf, const R: usize, const U: usize>(
    u: *const f64,
    out: *mut f64,
    len: usize,
    ctx: &Ctx<'_, V, R>,
    acc: &mut V,
) {
    let Ctx {
        ref x0,
        s1,
        ref k,
        c,
        w: ws,
        stream,
    } = *ctx;
    let w = V::W;
    // SAFETY (whole body): every vector of cells starts at a cell `q` with
    // `q + W <= len` (checked at each loop), so it reads and writes only
    // what the contract allows, and so does every single cell `q < len`;
    // streaming stores go to `out + q` for `q` from the first 64-byte
    // boundary (`head`) in steps of `W` (a divisor of 8) up to the end of
    // the last whole line, so each is aligned and inside the row.
    unsafe {
        if len < w {
            let mut z = 0.0;
            for q in 0..len {
                let v = cell::<R>(u.add(q), x0, s1, c, ws);
                *out.add(q) = v;
                z += v;
            }
            *acc = acc.add(V::splat(k.t, z));
            return;
        }
        let mut q = 0;
        // Cells before the first 64-byte boundary of `out` (0..=7).
        let head = (8 - (out as usize / 8) % 8) % 8;
        let stream = stream && (out as usize).is_multiple_of(8) && len >= head + 8;
        if stream {
            // Whole 64-byte lines of the output get non-temporal stores;
            // the cells before the first and after the last whole line are
            // computed one at a time with plain stores. (A masked vector
            // store beside the streaming ones ran the sweep 2-3x slower on
            // an AMD EPYC core: in a C copy of 256^3 rows laid out this way,
            // 35 ms with masked edges, 14 with scalar ones, 9.8 without
            // edges.)
            let lines_end = head + (len - head) / 8 * 8;
            let mut z = 0.0;
            while q < head {
                let v = cell::<R>(u.add(q), x0, s1, c, ws);
                *out.add(q) = v;
                z += v;
                q += 1;
            }
            // The plane `R` steps ahead along axis 0 is the one a sweep
            // reads from memory for the first time; two rows ahead of the
            // current one it is requested early.
            let ahead = x0.plus[R - 1] + (PFR * s1) as isize;
            let mut sums = [V::splat(k.t, 0.0); U];
            while q + U * w <= lines_end {
                prefetch(u.wrapping_add(q).wrapping_offset(ahead));
                let v = cells::<V, R, U>(u.add(q), x0, s1, k);
                for (x, vx) in v.iter().enumerate() {
                    vx.stream(out.add(q + x * w));
                    sums[x] = sums[x].add(*vx);
                }
                q += U * w;
            }
            fold(acc, &sums);
            while q + w <= lines_end {
                let [v] = cells::<V, R, 1>(u.add(q), x0, s1, k);
                v.stream(out.add(q));
                *acc = acc.add(v);
                q += w;
            }
            while q < len {
                let v = cell::<R>(u.add(q), x0, s1, c, ws);
                *out.add(q) = v;
                z += v;
                q += 1;
            }
            *acc = acc.add(V::splat(k.t, z));
            return;
        } else {
            // The vectors start at the first cell whose centre value lies
            // on a boundary of the vector's size, so that the centre loads
            // (and those of the neighbours along axes 0 and 1 where the
            // row pitch keeps the alignment, and the stores where the
            // output shares it, as arrays of one layout do) do not
            // straddle two cache lines: a whole first vector covers the
            // cells before it, and the cells it shares with the next
            // vector are computed and stored twice, with the same bits.
            // (On an Intel Xeon core, order 20 on 252^3 rows: 78 ms a
            // sweep with the rows on line boundaries against 92-97 ms 16
            // or 32 bytes off.) Only for vectors of a whole cache line
            // (AVX-512): with 32-byte vectors, which straddle a line at
            // only some offsets, the aligned start measured slower at
            // some orders on the same core (order 10 on 256^3: 81 ms a
            // sweep against 54 from the row's first cell).
            if let Some(lead) = aligned_lead::<V>(u, len) {
                let [v] = cells::<V, R, 1>(u, x0, s1, k);
                v.store(out);
                *acc = acc.add(v);
                q = lead;
            }
            let mut sums = [V::splat(k.t, 0.0); U];
            let ahead = x0.plus[R - 1] + (PFR * s1) as isize;
            while q + U * w <= len {
                for x in 0..U {
                    prefetch(u.wrapping_add(q + x * w).wrapping_offset(ahead));
                }
                let v = cells::<V, R, U>(u.add(q), x0, s1, k);
                for (x, vx) in v.iter().enumerate() {
                    vx.store(out.add(q + x * w));
                    sums[x] = sums[x].add(*vx);
                }
                q += U * w;
            }
            fold(acc, &sums);
            while q + w <= len {
                let [v] = cells::<V, R, 1>(u.add(q), x0, s1, k);
                v.store(out.add(q));
                *acc = acc.add(v);
                q += w;
            }
        }
        if q < len {
            // The last W cells of the row; lanes below `q - t` are done.
            let t = len - w;
            let [v] = cells::<V, R, 1>(u.add(t), x0, s1, k);
            v.store_from(out.add(t), q - t);
            *acc = acc.add(v);
        }
    }
}

/// Adds the `U` partial sums of a row to `acc`.
#[inline(always)]
fn fold<V: Vf, const U: usize>(acc: &mut V, sums: &[V; U]) {
    for &x in sums {
        *acc = acc.add(x);
    }
}

/// Stores the `N` vectors of each of `P` planes at `out + p os0` and adds
/// them to `acc`.
///
/// # Safety
/// `out + p os0 + x W..+ W` writable for every `p < P`, `x < N`.
#[inline(always)]
unsafe fn put<V: Vf, const N: usize, const P: usize>(
    v: &[[V; N]; P],
    out: *mut f64,
    os0: usize,
    acc: &mut V,
) {
    for (p, vp) in v.iter().enumerate() {
        for (x, vx) in vp.iter().enumerate() {
            // SAFETY: the caller's contract.
            unsafe { vx.store(out.add(p * os0 + x * V::W)) };
            *acc = acc.add(*vx);
        }
    }
}

/// [`row`] for one row of `P` neighbouring planes at once ([`cells_p`]),
/// with plain stores: reads around `u + p s0` (`s0 = ctx.x0.plus[0]`, the
/// planes of `ctx.x0` being strided), writes `out + p os0..out + p os0 +
/// len`, for `p < P`; the vectors start where [`row`] starts them in the
/// first plane.
///
/// # Safety
/// [`row`]'s contract for each of the `P` rows (with `out + p os0` its
/// output), `ctx.x0` the planes of stride `ctx.x0.plus[0]`.
#[inline(always)]
pub(super) unsafe fn row_p<V: Vf, const R: usize, const U: usize, const P: usize>(
    u: *const f64,
    out: *mut f64,
    os0: usize,
    len: usize,
    ctx: &Ctx<'_, V, R>,
    acc: &mut V,
) {
    let Ctx {
        ref x0,
        s1,
        ref k,
        c,
        w: ws,
        ..
    } = *ctx;
    let s0 = x0.plus[0] as usize;
    let w = V::W;
    // SAFETY (whole body): as in `row`, for each of the `P` rows.
    unsafe {
        if len < w {
            let mut z = 0.0;
            for p in 0..P {
                for q in 0..len {
                    let v = cell::<R>(u.add(p * s0 + q), x0, s1, c, ws);
                    *out.add(p * os0 + q) = v;
                    z += v;
                }
            }
            *acc = acc.add(V::splat(k.t, z));
            return;
        }
        let mut q = 0;
        if let Some(lead) = aligned_lead::<V>(u, len) {
            put(&cells_p::<V, R, 1, P>(u, s0, s1, k), out, os0, acc);
            q = lead;
        }
        let ahead = ((R + P - 1) * s0 + PFR * s1) as isize;
        while q + U * w <= len {
            for x in 0..U {
                prefetch(u.wrapping_add(q + x * w).wrapping_offset(ahead));
            }
            put(
                &cells_p::<V, R, U, P>(u.add(q), s0, s1, k),
                out.add(q),
                os0,
                acc,
            );
            q += U * w;
        }
        while q + w <= len {
            put(
                &cells_p::<V, R, 1, P>(u.add(q), s0, s1, k),
                out.add(q),
                os0,
                acc,
            );
            q += w;
        }
        if q < len {
            let t = len - w;
            let v = cells_p::<V, R, 1, P>(u.add(t), s0, s1, k);
            for (p, [vp]) in v.iter().enumerate() {
                vp.store_from(out.add(p * os0 + t), q - t);
                *acc = acc.add(*vp);
            }
        }
    }
}

/// Rows ahead that the plain-store rows ask for in the plane `R` (and,
/// two planes at a time, `R + 1`) ahead, the one a sweep reads from memory
/// (or, in the multi-step pass, from the L2) for the first time, as the
/// streaming rows do. 256^3, one rank, alternated builds, same hashes, ms
/// a step: FD-2 (four steps a pass) 13.7-14.4 -> 13.2-13.4, FD-8
/// 44.8-45.2 -> 42.9-43.4; FD-4, 12, 16 and 20 within the spread.
const PFR: usize = 2;

/// One double: the portable kernel where a sweep needs [`row`] (the
/// multi-step pass's planes), with the same operations in the same order.
#[derive(Clone, Copy)]
pub(super) struct V1(f64);

impl Vf for V1 {
    type Token = ();
    const W: usize = 1;
    #[inline(always)]
    fn splat(_: (), v: f64) -> Self {
        V1(v)
    }
    #[inline(always)]
    unsafe fn load(_: (), p: *const f64) -> Self {
        // SAFETY: one readable double (caller).
        V1(unsafe { *p })
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f64) {
        // SAFETY: one writable double (caller).
        unsafe { *p = self.0 }
    }
    #[inline(always)]
    unsafe fn stream(self, p: *mut f64) {
        // SAFETY: as `store`.
        unsafe { *p = self.0 }
    }
    #[inline(always)]
    unsafe fn store_from(self, p: *mut f64, from: usize) {
        // SAFETY: `from < 1`, so the one lane is writable (caller).
        debug_assert_eq!(from, 0);
        unsafe { *p = self.0 }
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        V1(self.0 + o.0)
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        V1(self.0 * o.0)
    }
    #[inline(always)]
    fn back(self, prev: Self) -> Self {
        prev
    }
    #[inline(always)]
    fn on(self, next: Self) -> Self {
        next
    }
    #[inline(always)]
    fn all_finite(self) -> bool {
        self.0.is_finite()
    }
}

/// `simd`'s vectors, one method each.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Vf;

    macro_rules! vf {
        ($v:ty, $t:ty, $w:expr) => {
            impl Vf for $v {
                type Token = $t;
                const W: usize = $w;
                #[inline(always)]
                fn splat(t: $t, v: f64) -> Self {
                    <$v>::splat(t, v)
                }
                #[inline(always)]
                unsafe fn load(t: $t, p: *const f64) -> Self {
                    // SAFETY: `W` readable doubles (caller).
                    unsafe { <$v>::load_ptr(t, p) }
                }
                #[inline(always)]
                unsafe fn store(self, p: *mut f64) {
                    // SAFETY: `W` writable doubles (caller).
                    unsafe { self.store_ptr(p) }
                }
                #[inline(always)]
                unsafe fn stream(self, p: *mut f64) {
                    // SAFETY: `W` writable doubles, aligned to `8 W` bytes (caller).
                    unsafe { <$v>::stream(self, p) }
                }
                #[inline(always)]
                unsafe fn store_from(self, p: *mut f64, from: usize) {
                    // SAFETY: lanes `from..W` writable, `from < W` (caller).
                    unsafe { <$v>::store_from(self, p, from) }
                }
                #[inline(always)]
                fn add(self, o: Self) -> Self {
                    self + o
                }
                #[inline(always)]
                fn mul(self, o: Self) -> Self {
                    self * o
                }
                #[inline(always)]
                fn back(self, prev: Self) -> Self {
                    <$v>::back(self, prev)
                }
                #[inline(always)]
                fn on(self, next: Self) -> Self {
                    <$v>::on(self, next)
                }
                #[inline(always)]
                fn all_finite(self) -> bool {
                    <$v>::all_finite(self)
                }
            }
        };
    }

    vf!(simd::F64x4, simd::Avx2Token, 4);
    vf!(simd::F64x8, simd::Avx512Token, 8);
}
