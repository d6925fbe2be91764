//! Central second-derivative stencils of even order with exact rational
//! coefficients, and the fused sweep `out = u + dt D lap(u)`.
//!
//! The sweep runs on one of several kernels ([`Kernel`]): the portable
//! scalar loop, or explicit SIMD along the fastest axis (AVX2, AVX-512)
//! picked at run time from what the CPU has. All of them compute every cell
//! with the same operations in the same order, so they give the same bits.
//!
//! ```
//! use halo::{FieldLayout, Region};
//! use stencil::{Kernel, Sweep};
//!
//! // FD-8 on a 16^3 block with 4 ghost cells (radius 4): u + s lap(u).
//! let layout = FieldLayout { owned: [16; 3], ghost: [4; 3], components: 1 };
//! let u = vec![1.0; layout.padded_len()];
//! let region = Region { lo: [4; 3], hi: [20; 3] }; // the owned cells, in padded indices
//! let mut outs = Vec::new();
//! for kernel in Kernel::ALL.into_iter().filter(|k| k.available()) {
//!     let sweep = Sweep::new(8, [0.1; 3], 1e-4, true).unwrap().with_kernel(kernel).unwrap();
//!     let mut out = vec![0.0; layout.padded_len()];
//!     assert!(sweep.apply(&layout, &u, &mut out, &region)); // all finite
//!     outs.push(out);
//! }
//! // Every kernel gives the same bits.
//! assert!(outs.iter().all(|o| o == &outs[0]));
//! ```
//!
//! [`wavefront`] advances several Euler steps in one pass with the same
//! bits, [`policy`] holds the host's tuning rules as data, and [`peak`]
//! measures what the core can reach. [`StencilOptions`] names every tuning
//! choice (kernel, launch shape, steps a pass) on the host and on a GPU;
//! none changes a bit.
//!
//! `device` (feature `cuda`) runs the same sweeps on NVIDIA GPUs over
//! `halo`'s device fields, with the host's bits: four kernels that read
//! the fast-axis neighbours in different ways, an overlapped sweep around
//! a halo exchange, reads across a self-periodic box's faces and two Euler
//! steps a pass. [`kernels`] is their CUDA C source, in every build.

#[cfg(feature = "cuda")]
pub mod device;
pub mod kernels;
mod options;
pub mod peak;
pub mod policy;
mod vsweep;
pub mod wavefront;

pub use options::{CpuKernel, GpuKernel, PeriodicReads, StencilOptions};

use halo::{FieldLayout, Region};

/// The orders the solver accepts.
pub const ORDERS: [usize; 10] = [2, 4, 6, 8, 10, 12, 14, 16, 18, 20];

/// A reduced fraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rational {
    /// Numerator (carries the sign).
    pub num: i128,
    /// Denominator (positive).
    pub den: i128,
}

fn gcd(a: i128, b: i128) -> i128 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

impl Rational {
    fn new(num: i128, den: i128) -> Self {
        let g = gcd(num, den).max(1) * den.signum();
        Rational {
            num: num / g,
            den: den / g,
        }
    }

    /// The nearest double. Every coefficient of orders up to 20 has numerator
    /// and denominator below 2^53, so one division rounds correctly.
    pub fn to_f64(self) -> f64 {
        assert!(
            self.num.unsigned_abs() < 1 << 53 && self.den < 1 << 53,
            "coefficient {self:?} is not exactly representable"
        );
        self.num as f64 / self.den as f64
    }
}

/// Coefficients `c_0, c_1, ..., c_r` of the central second derivative of
/// order `2r`: `f''(x) h^2 ~ c_0 f(x) + sum_m c_m (f(x + m h) + f(x - m h))`,
/// with `c_m = 2 (-1)^(m+1) (r!)^2 / (m^2 (r-m)! (r+m)!)` and
/// `c_0 = -2 sum c_m`, as exact fractions.
pub fn coefficients(order: usize) -> Result<Vec<Rational>, String> {
    if !ORDERS.contains(&order) {
        return Err(format!(
            "unknown stencil order {order}; valid orders: {ORDERS:?}"
        ));
    }
    let r = (order / 2) as i128;
    let mut c = vec![Rational::new(0, 1)];
    let mut c0 = Rational::new(0, 1);
    for m in 1..=r {
        // (r!)^2 / ((r-m)! (r+m)!) = prod_{j=1..m} (r-m+j) / (r+j)
        let (mut num, mut den) = (1i128, 1i128);
        for j in 1..=m {
            num *= r - m + j;
            den *= r + j;
            let g = gcd(num, den);
            num /= g;
            den /= g;
        }
        let sign = if m % 2 == 1 { 2 } else { -2 };
        let cm = Rational::new(sign * num, den * m * m);
        c0 = Rational::new(c0.num * cm.den - 2 * cm.num * c0.den, c0.den * cm.den);
        c.push(cm);
    }
    c[0] = c0;
    Ok(c)
}

/// The largest eigenvalue magnitude of the order-`order` stencil for unit
/// spacing, `max_theta (-c_0 - 2 sum c_m cos(m theta))`, found on a fine
/// grid of theta (the maximum sits at theta = pi for these stencils).
pub fn max_symbol(order: usize) -> Result<f64, String> {
    let c: Vec<f64> = coefficients(order)?
        .into_iter()
        .map(Rational::to_f64)
        .collect();
    let mut best = 0.0f64;
    for i in 0..=2048 {
        let th = std::f64::consts::PI * i as f64 / 2048.0;
        let s = -c[0]
            - 2.0
                * (1..c.len())
                    .map(|m| c[m] * (m as f64 * th).cos())
                    .sum::<f64>();
        best = best.max(s);
    }
    Ok(best)
}

/// The symbol `-lambda(theta)` of the stencil: the discrete second
/// derivative of `exp(i theta x / h)` is `-lambda / h^2` times it.
pub fn symbol(order: usize, theta: f64) -> Result<f64, String> {
    let c: Vec<f64> = coefficients(order)?
        .into_iter()
        .map(Rational::to_f64)
        .collect();
    Ok(-c[0]
        - 2.0
            * (1..c.len())
                .map(|m| c[m] * (m as f64 * theta).cos())
                .sum::<f64>())
}

/// The instruction set a [`Sweep`] runs on: `simd`'s one enum
/// (`Portable`, `Avx2`, `Avx512`; the name `scalar` is read as `portable`).
/// Every set computes each cell as `v = c u`, then `v = v + w (u(+m e_d) +
/// u(-m e_d))` for axes `d = 0, 1, 2` and offsets `m = 1..=radius` in that
/// order, one rounding per operation (no fused multiply-add), so all give
/// the same bits. [`policy::host_kernel`] picks one for a radius.
pub use simd::Isa as Kernel;

/// How a SIMD kernel stores the output. Scalar kernels always use plain
/// stores. The choice changes speed only, never a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stores {
    /// Plain stores (the default of [`Sweep::new`]): each output line is
    /// read before it is written and may stay in cache for the next sweep.
    /// [`policy::host_stores`] streams instead at radius 1 on large fields.
    #[default]
    Cached,
    /// Non-temporal stores for every whole 64-byte line of the output: the
    /// lines go to memory without being read first. Scalar cells with
    /// plain stores cover the partial lines at the ends of each row, so no
    /// line is written both ways. On one core of a shared AMD EPYC (1 MiB
    /// L2) this measured the same as `Cached` at 256^3, FD-2, within the
    /// run-to-run spread (21-26 ms both), and 2-4x slower on fields that
    /// stay in cache (64^3, 32^3); on an Intel Xeon core with fields on
    /// huge pages it is faster at radius 1 on large fields (137 MB; the
    /// same at 58 MB, slower at 18 MB) and slower at higher orders, so
    /// [`policy::host_stores`] takes it at radius 1 from 48 MiB.
    Streaming,
}

/// The fused update `out = a_c u + sum_d sum_m a[d][m] (u(+m e_d) + u(-m e_d))`
/// for one order, with the weights folded from `dt D c_m / h_d^2`.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// Stencil radius (order / 2).
    radius: usize,
    center: f64,
    /// Per axis, per offset 1..=radius.
    weights: [Vec<f64>; 3],
    kernel: Kernel,
    stores: Stores,
}

impl Sweep {
    /// The sweep for `u + scale * lap(u)` on spacings `h`, where `scale` is
    /// `dt D` for an Euler step (or the stage factor of another scheme).
    /// With `identity = false` the sweep computes `scale * lap(u)` alone.
    pub fn new(order: usize, h: [f64; 3], scale: f64, identity: bool) -> Result<Self, String> {
        let c: Vec<f64> = coefficients(order)?
            .into_iter()
            .map(Rational::to_f64)
            .collect();
        let r = order / 2;
        let inv: [f64; 3] = h.map(|x| scale / (x * x));
        let center = if identity { 1.0 } else { 0.0 } + c[0] * (inv[0] + inv[1] + inv[2]);
        let weights = [0, 1, 2].map(|d| (1..=r).map(|m| c[m] * inv[d]).collect());
        Ok(Sweep {
            radius: r,
            center,
            weights,
            kernel: policy::host_kernel(r),
            stores: Stores::Cached,
        })
    }

    /// The same sweep on `kernel`; an error when the build or the CPU lacks
    /// it.
    pub fn with_kernel(mut self, kernel: Kernel) -> Result<Self, String> {
        if !kernel.available() {
            let have: Vec<&str> = Kernel::ALL
                .into_iter()
                .filter(|k| k.available())
                .map(|k| k.name())
                .collect();
            return Err(format!(
                "stencil kernel {} is not available on this build or CPU (valid here: {})",
                kernel.name(),
                have.join(", ")
            ));
        }
        self.kernel = kernel;
        Ok(self)
    }

    /// The same sweep with another store policy.
    pub fn with_stores(mut self, stores: Stores) -> Self {
        self.stores = stores;
        self
    }

    /// The stencil radius (order / 2), fixed by [`Sweep::new`] with the
    /// weights.
    ///
    /// ```
    /// let s = stencil::Sweep::new(6, [0.1; 3], 1e-3, true).unwrap();
    /// assert_eq!(s.radius(), 3);
    /// ```
    ///
    /// It cannot be changed apart from them:
    ///
    /// ```compile_fail
    /// let mut s = stencil::Sweep::new(6, [0.1; 3], 1e-3, true).unwrap();
    /// s.radius = 1;
    /// ```
    pub fn radius(&self) -> usize {
        self.radius
    }

    /// The store policy ([`Stores::Cached`] unless set).
    pub fn stores(&self) -> Stores {
        self.stores
    }

    /// The kernel this sweep runs on ([`policy::host_kernel`] its radius
    /// unless set).
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// The centre weight followed by the weights of axes 0, 1, 2 for
    /// offsets 1..=10 (zero past the radius): the device kernel's `Coef`.
    pub fn packed(&self) -> [f64; 31] {
        let mut p = [0.0; 31];
        p[0] = self.center;
        for d in 0..3 {
            for (m, w) in self.weights[d].iter().enumerate() {
                p[1 + 10 * d + m] = *w;
            }
        }
        p
    }

    /// Applies the sweep on `region` (padded indices) of `u`, writing `out`
    /// (same layout). Returns true when every written value is finite.
    ///
    /// The arithmetic per cell is fixed (centre, then axis 0, 1, 2, offsets
    /// in increasing order), so any split of the box into regions, and any
    /// kernel, gives the same bits. Panics when a cell of `region` reads
    /// outside the padded box (`lo < radius` or `hi + radius > padded` on
    /// some axis) or a slice is shorter than one padded component.
    ///
    /// With non-temporal stores the sweep ends with a store fence, so the
    /// output is ordered before anything this thread does next (a message
    /// to another rank included).
    pub fn apply(&self, layout: &FieldLayout, u: &[f64], out: &mut [f64], region: &Region) -> bool {
        match self.radius {
            1 => self.apply_r::<1>(layout, u, out, region),
            2 => self.apply_r::<2>(layout, u, out, region),
            3 => self.apply_r::<3>(layout, u, out, region),
            4 => self.apply_r::<4>(layout, u, out, region),
            5 => self.apply_r::<5>(layout, u, out, region),
            6 => self.apply_r::<6>(layout, u, out, region),
            7 => self.apply_r::<7>(layout, u, out, region),
            8 => self.apply_r::<8>(layout, u, out, region),
            9 => self.apply_r::<9>(layout, u, out, region),
            10 => self.apply_r::<10>(layout, u, out, region),
            r => unreachable!("radius {r} is not a supported order"),
        }
    }

    /// Applies the sweep on one plane whose axis-0 neighbours lie anywhere
    /// in `src` (the rings of the host's multi-step pass): `planes[R + k]`
    /// is where plane `k = -R..=R` (relative to the computed one) starts in
    /// `src`, each a block of rows of `s1` values. Computes rows
    /// `lines` and, in each, columns `cols` (indices within a row), and
    /// writes row `j`'s values to `out[at + (j - lines.start) * out_s1..]`
    /// (`cols.len()` values). `stream` asks for non-temporal stores, as
    /// [`Stores::Streaming`] does for [`Sweep::apply`], fenced at the end.
    /// Returns true when every written value is finite.
    ///
    /// Same arithmetic per cell as [`Sweep::apply`], so the same bits.
    /// Panics when `planes` does not hold `2R + 1` starts, a read falls
    /// outside `src` (`lines.start < R`, `cols.start < R`,
    /// `cols.end + R > s1`, or a plane shorter than `lines.end + R` rows) or
    /// a write outside `out`.
    #[allow(clippy::too_many_arguments)]
    pub fn apply_plane(
        &self,
        src: &[f64],
        planes: &[usize],
        s1: usize,
        lines: std::ops::Range<usize>,
        cols: std::ops::Range<usize>,
        out: &mut [f64],
        (at, out_s1): (usize, usize),
        stream: bool,
    ) -> bool {
        self.apply_plane_checking(
            true,
            src,
            planes,
            s1,
            lines,
            cols,
            out,
            (at, out_s1),
            stream,
        )
    }

    /// [`Sweep::apply_plane`], looking at the values written only with
    /// `check` (without, it returns true: the multi-step pass's inner
    /// levels, whose non-finite values reach its last level, see
    /// [`crate::wavefront`]). The same values, bits and panics either way.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn apply_plane_checking(
        &self,
        check: bool,
        src: &[f64],
        planes: &[usize],
        s1: usize,
        lines: std::ops::Range<usize>,
        cols: std::ops::Range<usize>,
        out: &mut [f64],
        at: (usize, usize),
        stream: bool,
    ) -> bool {
        let a = (src, planes, s1, lines, cols);
        if check {
            self.plane::<true>(a, out, at, stream)
        } else {
            self.plane::<false>(a, out, at, stream)
        }
    }

    fn plane<const CHECK: bool>(
        &self,
        a: PlaneSource<'_>,
        out: &mut [f64],
        at: (usize, usize),
        stream: bool,
    ) -> bool {
        match self.radius {
            1 => self.plane_r::<1, CHECK>(a, out, at, stream),
            2 => self.plane_r::<2, CHECK>(a, out, at, stream),
            3 => self.plane_r::<3, CHECK>(a, out, at, stream),
            4 => self.plane_r::<4, CHECK>(a, out, at, stream),
            5 => self.plane_r::<5, CHECK>(a, out, at, stream),
            6 => self.plane_r::<6, CHECK>(a, out, at, stream),
            7 => self.plane_r::<7, CHECK>(a, out, at, stream),
            8 => self.plane_r::<8, CHECK>(a, out, at, stream),
            9 => self.plane_r::<9, CHECK>(a, out, at, stream),
            10 => self.plane_r::<10, CHECK>(a, out, at, stream),
            r => unreachable!("radius {r} is not a supported order"),
        }
    }

    fn plane_r<const R: usize, const CHECK: bool>(
        &self,
        (src, planes, s1, lines, cols): PlaneSource<'_>,
        out: &mut [f64],
        (at, out_s1): (usize, usize),
        stream: bool,
    ) -> bool {
        if lines.is_empty() || cols.is_empty() {
            return true;
        }
        assert_eq!(planes.len(), 2 * R + 1, "a plane and its 2R neighbours");
        // Checked sums and products throughout: arguments near the top of
        // usize must fail here rather than wrap past the checks.
        assert!(
            lines.start >= R && cols.start >= R && cols.end.checked_add(R).is_some_and(|e| e <= s1),
            "rows {lines:?}, columns {cols:?} with radius {R} read outside rows of {s1} values"
        );
        let plane_len = lines.end.checked_add(R).and_then(|l| l.checked_mul(s1));
        for &p in planes {
            assert!(
                plane_len
                    .and_then(|l| l.checked_add(p))
                    .is_some_and(|e| e <= src.len()),
                "a plane at {p} of {} rows of {s1} values ends past the {} values of the source",
                lines.end.saturating_add(R),
                src.len()
            );
        }
        let (len, rows) = (cols.len(), lines.len());
        assert!(
            (rows - 1)
                .checked_mul(out_s1)
                .and_then(|x| x.checked_add(at))
                .and_then(|x| x.checked_add(len))
                .is_some_and(|e| e <= out.len()),
            "{rows} rows of {len} values every {out_s1} from {at} end past the {} values of the output",
            out.len()
        );
        let w: [[f64; R]; 3] = [0, 1, 2].map(|d| std::array::from_fn(|m| self.weights[d][m]));
        let c = planes[R] as isize;
        let x0 = vsweep::Planes::<R> {
            plus: std::array::from_fn(|m| planes[R + m + 1] as isize - c),
            minus: std::array::from_fn(|m| planes[R - m - 1] as isize - c),
        };
        let job = PlaneJob {
            src,
            out,
            x0,
            s1,
            first: planes[R] + lines.start * s1 + cols.start,
            at,
            out_s1,
            rows,
            len,
            c: self.center,
            w,
            stream,
        };
        match self.kernel {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: AVX-512F and AVX2 are present (`policy::host_kernel`,
            // `with_kernel`); the bounds were checked above.
            Kernel::Avx512 => unsafe { plane_avx512::<R, CHECK>(job) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: AVX2 is present; the bounds were checked above.
            Kernel::Avx2 => unsafe { plane_avx2::<R, CHECK>(job) },
            // SAFETY: `V1` needs no instructions; the bounds were checked.
            _ => unsafe { plane_simd::<vsweep::V1, R, 4, CHECK>((), job) },
        }
    }

    fn apply_r<const R: usize>(
        &self,
        layout: &FieldLayout,
        u: &[f64],
        out: &mut [f64],
        region: &Region,
    ) -> bool {
        if region.is_empty() {
            return true;
        }
        // Checked sums and products: a layout or region near the top of
        // usize must fail here rather than wrap past the checks.
        let padded = [0, 1, 2].map(|d| {
            layout.ghost[d]
                .checked_mul(2)
                .and_then(|g| g.checked_add(layout.owned[d]))
        });
        let n = padded
            .iter()
            .try_fold(1usize, |n, p| p.and_then(|p| n.checked_mul(p)));
        let (Some(n), [Some(p0), Some(p1), Some(p2)]) = (n, padded) else {
            panic!("the padded box of {layout:?} overflows usize");
        };
        let padded = [p0, p1, p2];
        for d in 0..3 {
            assert!(
                region.lo[d] >= R && region.hi[d].checked_add(R).is_some_and(|e| e <= padded[d]),
                "region {region:?} with radius {R} reads outside the padded box {padded:?}"
            );
        }
        assert!(
            u.len() >= n && out.len() >= n,
            "fields of {} and {} values, the layout has {n}",
            u.len(),
            out.len()
        );
        let w: [[f64; R]; 3] = [0, 1, 2].map(|d| std::array::from_fn(|m| self.weights[d][m]));
        let stream = self.stores == Stores::Streaming;
        let job = Job {
            u,
            out,
            s: layout.strides(),
            region,
            c: self.center,
            w,
            stream,
        };
        match self.kernel {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `with_kernel` and `policy::host_kernel` only choose
            // AVX-512 where the CPU has AVX-512F and AVX2; the bounds were
            // checked above.
            Kernel::Avx512 => unsafe { sweep_avx512(job) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `with_kernel` and `policy::host_kernel` only choose AVX2
            // where the CPU has it; the bounds were checked above.
            Kernel::Avx2 => unsafe { sweep_avx2(job) },
            _ => self.scalar(layout, u, out, region, &w),
        }
    }

    /// The portable kernel.
    fn scalar<const R: usize>(
        &self,
        layout: &FieldLayout,
        u: &[f64],
        out: &mut [f64],
        region: &Region,
        w: &[[f64; R]; 3],
    ) -> bool {
        let s = layout.strides();
        let c = self.center;
        let len = region.hi[2] - region.lo[2];
        let mut finite = true;
        // Tiles of TILE rows along axis 1, swept through axis 0, keep the
        // 2R + 1 planes a row reads resident in cache. The order of cells
        // does not change what any cell computes.
        const TILE: usize = 16;
        let mut j0 = region.lo[1];
        while j0 < region.hi[1] {
            let j1 = (j0 + TILE).min(region.hi[1]);
            for i in region.lo[0]..region.hi[0] {
                for j in j0..j1 {
                    let base = i * s[0] + j * s[1] + region.lo[2];
                    if len < 8 {
                        // Short rows (the shell slabs normal to the last axis):
                        // plain indexing beats building 4R row slices. Same
                        // arithmetic in the same order as the long-row path.
                        for q in base..base + len {
                            let mut v = c * u[q];
                            for m in 0..R {
                                v += w[0][m] * (u[q + (m + 1) * s[0]] + u[q - (m + 1) * s[0]]);
                            }
                            for m in 0..R {
                                v += w[1][m] * (u[q + (m + 1) * s[1]] + u[q - (m + 1) * s[1]]);
                            }
                            for m in 0..R {
                                v += w[2][m] * (u[q + m + 1] + u[q - m - 1]);
                            }
                            out[q] = v;
                        }
                        finite &= all_finite(&out[base..base + len]);
                        continue;
                    }
                    let row = &mut out[base..base + len];
                    // Slices for every neighbour row, so the inner loop has no
                    // bounds checks and vectorises.
                    let centre = &u[base..base + len];
                    let xm: [&[f64]; R] = std::array::from_fn(|m| {
                        &u[base - (m + 1) * s[0]..base - (m + 1) * s[0] + len]
                    });
                    let xp: [&[f64]; R] = std::array::from_fn(|m| {
                        &u[base + (m + 1) * s[0]..base + (m + 1) * s[0] + len]
                    });
                    let ym: [&[f64]; R] = std::array::from_fn(|m| {
                        &u[base - (m + 1) * s[1]..base - (m + 1) * s[1] + len]
                    });
                    let yp: [&[f64]; R] = std::array::from_fn(|m| {
                        &u[base + (m + 1) * s[1]..base + (m + 1) * s[1] + len]
                    });
                    let zm: [&[f64]; R] =
                        std::array::from_fn(|m| &u[base - (m + 1)..base - (m + 1) + len]);
                    let zp: [&[f64]; R] =
                        std::array::from_fn(|m| &u[base + (m + 1)..base + (m + 1) + len]);
                    for k in 0..len {
                        let mut v = c * centre[k];
                        for m in 0..R {
                            v += w[0][m] * (xp[m][k] + xm[m][k]);
                        }
                        for m in 0..R {
                            v += w[1][m] * (yp[m][k] + ym[m][k]);
                        }
                        for m in 0..R {
                            v += w[2][m] * (zp[m][k] + zm[m][k]);
                        }
                        row[k] = v;
                    }
                    finite &= all_finite(row);
                }
            }
            j0 = j1;
        }
        finite
    }
}

/// One sweep for the SIMD kernels: the bounds of `region` were checked
/// against the layout of `u` and `out` (strides `s`).
struct Job<'a, const R: usize> {
    u: &'a [f64],
    out: &'a mut [f64],
    s: [usize; 3],
    region: &'a Region,
    c: f64,
    w: [[f64; R]; 3],
    stream: bool,
}

/// Rows per tile (along axis 1) of the SIMD sweep for radius `r` and rows
/// of `len` cells. While a tile moves along axis 0, its cells read their
/// own `tile` rows in the `2r + 1` planes around them (axis 0) and, in their
/// own plane only, the `r` rows on either side of the tile (axis 1): the
/// `2r + 1` planes of `tile` rows stay in cache from the plane where they
/// are first read to the last one that reads them, the `2r` rows beside
/// the tile are read once. Those fill about half of a 2 MiB L2 cache.
/// (Counting the `2r` rows beside the tile in every plane, as this rule
/// did before, gave 4-row tiles at order 20 and 256^3 rows, whose cells
/// read each value from memory about six times; 21 rows took a sweep from
/// 92-97 to 82-88 ms on an Intel Xeon core, and 8 to 27 rows measured the
/// same at order 16, 78-83 ms. Cutting rows into segments to
/// allow taller tiles at high orders measured slower at 256^3.) The order
/// of cells does not change what any cell computes.
fn tile_rows(r: usize, len: usize) -> usize {
    const BUDGET: usize = 1 << 20;
    let row = (len + 2 * r) * std::mem::size_of::<f64>();
    (BUDGET.saturating_sub(2 * r * row) / ((2 * r + 1) * row)).max(4)
}

/// The SIMD sweep on vectors `V`, `U` vectors per step along a row; with
/// plain stores, `P` planes at a time with `U2` vectors of each a step
/// ([`vsweep::row_p`]), the planes left over one at a time.
///
/// # Safety
/// The CPU has the instructions of `V`; `job`'s bounds were checked.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn sweep_simd<
    V: vsweep::Vf,
    const R: usize,
    const U: usize,
    const U2: usize,
    const P: usize,
>(
    t: V::Token,
    job: Job<'_, R>,
) -> bool {
    let Job {
        u,
        out,
        s,
        region,
        c,
        w,
        stream,
    } = job;
    let ctx = vsweep::Ctx {
        x0: vsweep::Planes::strided(s[0]),
        s1: s[1],
        k: vsweep::Weights::<V, R>::new(t, c, &w),
        c,
        w: &w,
        stream,
    };
    let mut acc = V::splat(t, 0.0);
    let len = region.hi[2] - region.lo[2];
    let tile = tile_rows(R, len);
    let (up, op) = (u.as_ptr(), out.as_mut_ptr());
    let mut j0 = region.lo[1];
    while j0 < region.hi[1] {
        let j1 = (j0 + tile).min(region.hi[1]);
        let mut i = region.lo[0];
        while i < region.hi[0] {
            let base = i * s[0] + j0 * s[1] + region.lo[2];
            if !stream && i + P <= region.hi[0] {
                // SAFETY: as below, for the rows of planes `i..i + P`.
                unsafe {
                    for j in 0..j1 - j0 {
                        let at = base + j * s[1];
                        vsweep::row_p::<V, R, U2, P>(
                            up.add(at),
                            op.add(at),
                            s[0],
                            len,
                            &ctx,
                            &mut acc,
                        );
                    }
                }
                i += P;
                continue;
            }
            // SAFETY: the cells of rows `j0..j1` of plane `i` lie in
            // `region`, whose cells read only inside the padded box of `u`
            // and write inside that of `out` (checked by `apply_r`), and
            // `u` and `out` are distinct slices.
            unsafe {
                rows_simd::<V, R, U>(
                    &ctx,
                    (up, base, s[1]),
                    (op, base, s[1]),
                    j1 - j0,
                    len,
                    &mut acc,
                )
            };
            i += 1;
        }
        j0 = j1;
    }
    fence(stream);
    // A non-finite sum means a non-finite value or an overflow of the sum
    // of finite ones (values near the largest double); look again.
    acc.all_finite() || rows_finite(out, s, region)
}

/// `rows` rows of `len` cells for [`vsweep::row`]: row `j` centred at
/// `src.0 + src.1 + j src.2` (the neighbours where `ctx` says), written to
/// `out.0 + out.1 + j out.2`; every value is added to `acc`.
///
/// # Safety
/// The CPU has the instructions of `V`, and every row meets
/// [`vsweep::row`]'s contract: it reads only readable values and writes
/// only writable ones that nothing it reads overlaps.
#[inline(always)]
unsafe fn rows_simd<V: vsweep::Vf, const R: usize, const U: usize>(
    ctx: &vsweep::Ctx<'_, V, R>,
    (sp, first, s1): (*const f64, usize, usize),
    (op, at, out_s1): (*mut f64, usize, usize),
    rows: usize,
    len: usize,
    acc: &mut V,
) {
    for j in 0..rows {
        // SAFETY: the caller's contract, row by row.
        unsafe {
            vsweep::row::<V, R, U>(
                sp.add(first + j * s1),
                op.add(at + j * out_s1),
                len,
                ctx,
                acc,
            )
        };
    }
}

/// After non-temporal stores (`stream`), a store fence: it orders them
/// before whatever this thread does next (a message to another rank
/// included).
#[inline(always)]
fn fence(stream: bool) {
    #[cfg(target_arch = "x86_64")]
    if stream {
        // SAFETY: SSE is part of every x86-64 target.
        unsafe { std::arch::x86_64::_mm_sfence() };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = stream;
}

/// Where [`Sweep::apply_plane`] reads: the source, its planes' starts,
/// the row pitch, the rows and the columns.
type PlaneSource<'a> = (
    &'a [f64],
    &'a [usize],
    usize,
    std::ops::Range<usize>,
    std::ops::Range<usize>,
);

/// One plane of the multi-step pass, its bounds checked by
/// [`Sweep::apply_plane`]: `rows` rows of `len` cells, the first centred at
/// `src[first]`, the next ones every `s1`; row `j` writes to
/// `out[at + j out_s1..]`.
struct PlaneJob<'a, const R: usize> {
    src: &'a [f64],
    out: &'a mut [f64],
    x0: vsweep::Planes<R>,
    s1: usize,
    first: usize,
    at: usize,
    out_s1: usize,
    rows: usize,
    len: usize,
    c: f64,
    w: [[f64; R]; 3],
    stream: bool,
}

/// The rows of one [`PlaneJob`] on vectors `V`.
///
/// # Safety
/// The CPU has the instructions of `V`; `job`'s bounds were checked.
#[inline(always)]
unsafe fn plane_simd<V: vsweep::Vf, const R: usize, const U: usize, const CHECK: bool>(
    t: V::Token,
    job: PlaneJob<'_, R>,
) -> bool {
    let PlaneJob {
        src,
        out,
        x0,
        s1,
        first,
        at,
        out_s1,
        rows,
        len,
        c,
        w,
        stream,
    } = job;
    let ctx = vsweep::Ctx {
        x0,
        s1,
        k: vsweep::Weights::<V, R>::new(t, c, &w),
        c,
        w: &w,
        stream,
    };
    let mut acc = V::splat(t, 0.0);
    let (sp, op) = (src.as_ptr(), out.as_mut_ptr());
    // SAFETY: `apply_plane` checked that every row reads inside `src` (its
    // planes, rows and columns with the radius around them) and writes
    // inside `out`; `src` and `out` are distinct slices.
    unsafe { rows_simd::<V, R, U>(&ctx, (sp, first, s1), (op, at, out_s1), rows, len, &mut acc) };
    fence(stream);
    // Without CHECK the sums are never read, and the compiler drops them
    // (every function above is inlined into the kernel's).
    !CHECK || acc.all_finite() || (0..rows).all(|j| all_finite(&out[at + j * out_s1..][..len]))
}

// The sweeps never fuse, so their functions enable AVX-512F and AVX2 but
// not FMA (which `Kernel::Avx512` also guarantees): with `fma` enabled the
// compiler built the radius-7 AVX-512 sweep 6 KB larger, and it ran 11 %
// slower at 256^3 on an Intel Xeon core (58-61 ms against 53-56, five
// alternated rounds of `sweep_timing 256 14`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2")]
unsafe fn plane_avx512<const R: usize, const CHECK: bool>(job: PlaneJob<'_, R>) -> bool {
    // SAFETY: the caller checked for `Kernel::Avx512` (AVX-512F, AVX2,
    // FMA) and the bounds.
    unsafe { plane_simd::<simd::F64x8, R, 4, CHECK>(simd::Avx512Token::new_unchecked(), job) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn plane_avx2<const R: usize, const CHECK: bool>(job: PlaneJob<'_, R>) -> bool {
    // SAFETY: the caller checked for `Kernel::Avx2` (AVX2, FMA) and the
    // bounds.
    unsafe { plane_simd::<simd::F64x4, R, 4, CHECK>(simd::Avx2Token::new_unchecked(), job) }
}

/// True when every value of `region` in `out` (strides `s`) is finite.
fn rows_finite(out: &[f64], s: [usize; 3], region: &Region) -> bool {
    let len = region.hi[2] - region.lo[2];
    (region.lo[0]..region.hi[0]).all(|i| {
        (region.lo[1]..region.hi[1]).all(|j| {
            let base = i * s[0] + j * s[1] + region.lo[2];
            all_finite(&out[base..base + len])
        })
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2")]
unsafe fn sweep_avx512<const R: usize>(job: Job<'_, R>) -> bool {
    // Two vectors a step on single planes at radius 7, four at the others.
    // Single planes are few in a sweep (planes go in pairs), but the choice
    // changes how the compiler builds the whole function: at 256^3
    // (`heat3d --n 256 --steps 24 --ranks 1 --order 14 --cpu-stencil
    // avx512`, the two builds alternated, eight pairs) two vectors took
    // 66-80 ms a step against 73-83 with four, 3-16 % less in every pair;
    // at orders 12, 16 and 20 two vectors measured within 5 % of four, at
    // order 18 at 97-99 ms against 77 (a figure the FD-18 sweep with four
    // also reaches in some runs).
    // SAFETY: the caller checked for `Kernel::Avx512` (AVX-512F, AVX2,
    // FMA) and the bounds.
    unsafe {
        let t = simd::Avx512Token::new_unchecked();
        if R == 7 {
            sweep_simd::<simd::F64x8, R, 2, 2, 2>(t, job)
        } else {
            sweep_simd::<simd::F64x8, R, 4, 2, 2>(t, job)
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sweep_avx2<const R: usize>(job: Job<'_, R>) -> bool {
    // SAFETY: the caller checked for `Kernel::Avx2` (AVX2, FMA) and the
    // bounds.
    unsafe { sweep_simd::<simd::F64x4, R, 4, 2, 2>(simd::Avx2Token::new_unchecked(), job) }
}

/// True when no value is infinite or NaN; eight independent lanes so the
/// check vectorises (`x * 0` is `0` for finite `x`, NaN otherwise).
#[inline]
pub fn all_finite(x: &[f64]) -> bool {
    let mut acc = [0.0f64; 8];
    let chunks = x.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for i in 0..8 {
            acc[i] += c[i] * 0.0;
        }
    }
    rest.iter().all(|v| v.is_finite()) && acc.iter().all(|&a| a == 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_coefficients() {
        let c = coefficients(2).unwrap();
        assert_eq!(c, vec![Rational::new(-2, 1), Rational::new(1, 1)]);
        let c = coefficients(4).unwrap();
        assert_eq!(
            c,
            vec![
                Rational::new(-5, 2),
                Rational::new(4, 3),
                Rational::new(-1, 12)
            ]
        );
        let c = coefficients(8).unwrap();
        assert_eq!(c[0], Rational::new(-205, 72));
        assert_eq!(c[4], Rational::new(-1, 560));
        assert!(coefficients(3).unwrap_err().contains("valid orders"));
    }

    #[test]
    fn stencils_are_exact_on_polynomials_up_to_their_order() {
        // A central stencil of order p differentiates x^q exactly for q <= p + 1.
        for order in ORDERS {
            let c = coefficients(order).unwrap();
            for q in 0..=order + 1 {
                // Exact rational evaluation at x = 0 with h = 1: sum_m c_m (m^q + (-m)^q).
                let mut num = 0i128;
                let mut den = 1i128;
                for (m, cm) in c.iter().enumerate().skip(1) {
                    let mq = (m as i128).pow(q as u32);
                    let val = if q % 2 == 0 { 2 * mq } else { 0 };
                    num = num * cm.den + cm.num * val * den;
                    den *= cm.den;
                    let g = gcd(num, den).max(1);
                    num /= g;
                    den /= g;
                }
                if q == 0 {
                    num += c[0].num * den / c[0].den;
                }
                let want = if q == 2 { 2 } else { 0 };
                assert_eq!(num, want * den, "order {order}, x^{q}");
            }
        }
    }

    /// Values with full mantissas (an LCG), so that a change in the order
    /// of operations would change bits.
    fn noise(n: usize, seed: u64) -> Vec<f64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 11) as f64 / (1u64 << 53) as f64 - 0.3
            })
            .collect()
    }

    fn layout(owned: [usize; 3], ghost: usize) -> FieldLayout {
        FieldLayout {
            owned,
            ghost: [ghost; 3],
            components: 1,
        }
    }

    /// Regions of `owned` cells with every remainder of the row length by
    /// the vector widths, short rows, and both ends of the box.
    fn regions(l: &FieldLayout, r: usize) -> Vec<Region> {
        let g = l.ghost[0];
        let o = l.owned;
        let mut v = vec![Region {
            lo: [g; 3],
            hi: [g + o[0], g + o[1], g + o[2]],
        }];
        for lo2 in [g, g + 1, g + 3] {
            for len in [1, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 23, 31, 33] {
                if lo2 + len <= g + o[2] {
                    v.push(Region {
                        lo: [g + 1, g, lo2],
                        hi: [g + 3, g + o[1] - 1, lo2 + len],
                    });
                }
            }
        }
        // A slab normal to the last axis of the stencil's width.
        v.push(Region {
            lo: [g, g, g + o[2] - r],
            hi: [g + o[0], g + o[1], g + o[2]],
        });
        v
    }

    fn run(sweep: &Sweep, l: &FieldLayout, u: &[f64], region: &Region) -> (Vec<f64>, bool) {
        let mut out = vec![-7.25; l.padded_len()];
        let ok = sweep.apply(l, u, &mut out, region);
        (out, ok)
    }

    fn same_bits(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
    }

    fn stores() -> [Stores; 2] {
        [Stores::Cached, Stores::Streaming]
    }

    #[test]
    fn the_default_kernel_is_avx512_but_at_orders_8_and_10() {
        if Kernel::Avx2.available() && Kernel::Avx512.available() {
            for r in 1..=10 {
                let want = if matches!(r, 4 | 5) {
                    Kernel::Avx2
                } else {
                    Kernel::Avx512
                };
                assert_eq!(policy::host_kernel(r), want, "radius {r}");
                let sweep = Sweep::new(2 * r, [0.3, 0.7, 1.1], 0.01, true).unwrap();
                assert_eq!(sweep.kernel(), want, "radius {r}");
            }
        }
        for r in 1..=10 {
            assert!(policy::host_kernel(r).available(), "radius {r}");
        }
    }

    #[test]
    fn every_kernel_gives_the_scalar_bits() {
        let kernels: Vec<Kernel> = Kernel::ALL.into_iter().filter(|k| k.available()).collect();
        for r in 1..=10 {
            assert!(kernels.contains(&policy::host_kernel(r)), "radius {r}");
        }
        // Row lengths that are and are not multiples of 4 and 8, and a
        // ghost wider than the radius (rows start at every alignment).
        for (owned, extra) in [([5, 7, 37], 0), ([4, 6, 40], 1), ([3, 5, 13], 2)] {
            for order in ORDERS {
                let r = order / 2;
                let l = layout(owned, r + extra);
                let u = noise(l.padded_len(), order as u64 + 17 * extra as u64);
                let base = Sweep::new(order, [0.3, 0.7, 1.1], 0.01, true).unwrap();
                let scalar = base.clone().with_kernel(Kernel::Portable).unwrap();
                for region in regions(&l, r) {
                    let (want, ok) = run(&scalar, &l, &u, &region);
                    assert!(ok);
                    for &k in &kernels {
                        for st in stores() {
                            let s = base.clone().with_kernel(k).unwrap().with_stores(st);
                            let (got, ok) = run(&s, &l, &u, &region);
                            assert!(ok, "{k:?} {st:?} order {order}");
                            assert!(
                                same_bits(&got, &want),
                                "{k:?} {st:?} order {order} owned {owned:?} region {region:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn any_split_of_the_box_gives_the_same_bits() {
        let l = layout([6, 5, 29], 3);
        let u = noise(l.padded_len(), 5);
        let s = Sweep::new(6, [0.5; 3], 0.02, true).unwrap();
        let whole = Region {
            lo: [3; 3],
            hi: [9, 8, 32],
        };
        let (want, _) = run(&s, &l, &u, &whole);
        let mut out = vec![-7.25; l.padded_len()];
        // Pieces of 1, 2, ..., cells along the last axis, in reverse order.
        let mut cuts = vec![3];
        while *cuts.last().unwrap() < 32 {
            let c = *cuts.last().unwrap();
            cuts.push((c + cuts.len()).min(32));
        }
        for w in cuts.windows(2).rev() {
            let region = Region {
                lo: [3, 3, w[0]],
                hi: [9, 8, w[1]],
            };
            assert!(s.apply(&l, &u, &mut out, &region));
        }
        assert!(same_bits(&out, &want));
    }

    #[test]
    fn non_finite_values_are_reported_by_every_kernel() {
        let l = layout([4, 4, 21], 2);
        let region = Region {
            lo: [2; 3],
            hi: [6, 6, 23],
        };
        let kernels = Kernel::ALL.into_iter().filter(|k| k.available());
        for k in kernels {
            for st in stores() {
                let s = Sweep::new(4, [1.0; 3], 0.01, true)
                    .unwrap()
                    .with_kernel(k)
                    .unwrap()
                    .with_stores(st);
                for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
                    let mut u = noise(l.padded_len(), 3);
                    u[l.index(0, [3, 4, 20])] = bad;
                    assert!(!run(&s, &l, &u, &region).1, "{k:?} {st:?} {bad}");
                }
                // Finite values whose sum overflows: still finite.
                let u = vec![1e307; l.padded_len()];
                let (out, ok) = run(&s, &l, &u, &region);
                assert!(ok, "{k:?} {st:?}");
                assert_eq!(out[l.index(0, [3, 3, 3])], 1e307);
                // A value that overflows in the sweep itself.
                let mut u = vec![1e307; l.padded_len()];
                u[l.index(0, [3, 3, 9])] = f64::MAX;
                assert!(!run(&s, &l, &u, &region).1, "{k:?} {st:?}");
            }
        }
    }

    #[test]
    #[should_panic(expected = "reads outside the padded box")]
    fn a_region_reaching_past_the_ghosts_is_refused() {
        let l = layout([4, 4, 16], 1);
        let u = vec![0.0; l.padded_len()];
        let s = Sweep::new(4, [1.0; 3], 0.01, true).unwrap();
        let region = Region {
            lo: [1; 3],
            hi: [5, 5, 17],
        };
        run(&s, &l, &u, &region);
    }

    #[test]
    fn bounds_near_the_top_of_usize_are_refused_not_wrapped() {
        use std::panic::{catch_unwind, AssertUnwindSafe};
        let s = Sweep::new(2, [1.0; 3], 0.01, true).unwrap();
        let src = vec![0.0; 3 * 4 * 8];
        let mut out = vec![0.0; 64];
        // Each call would read or write far outside its slices if a sum or
        // product wrapped; each must panic at the checks instead.
        let big = usize::MAX - 4;
        let cases: [(&[usize], std::ops::Range<usize>, usize); 4] = [
            (&[0, big, 32], 1..3, 0),
            (&[0, 32, 64], 1..3, big),
            (&[0, 32, 64], 1..usize::MAX - 1, 0),
            (&[0, 32, 64], 1..3, usize::MAX / 2),
        ];
        for (planes, lines, at) in cases {
            let r = catch_unwind(AssertUnwindSafe(|| {
                s.apply_plane(
                    &src,
                    planes,
                    8,
                    lines.clone(),
                    1..7,
                    &mut out,
                    (at, 8),
                    false,
                )
            }));
            assert!(r.is_err(), "{planes:?}, {lines:?}, at {at}: not refused");
        }
        // A column range whose end plus the radius wraps.
        let r = catch_unwind(AssertUnwindSafe(|| {
            s.apply_plane(
                &src,
                &[0, 32, 64],
                8,
                1..3,
                1..usize::MAX,
                &mut out,
                (0, 8),
                false,
            )
        }));
        assert!(r.is_err(), "columns near usize::MAX: not refused");
        // A region whose end plus the radius wraps.
        let l = layout([4, 4, 16], 1);
        let u = vec![0.0; l.padded_len()];
        let region = Region {
            lo: [1; 3],
            hi: [3, 3, usize::MAX],
        };
        let r = catch_unwind(AssertUnwindSafe(|| run(&s, &l, &u, &region)));
        assert!(r.is_err(), "a region near usize::MAX: not refused");
        // The same call within bounds runs.
        assert!(s.apply_plane(&src, &[0, 32, 64], 8, 1..3, 1..7, &mut out, (0, 8), false));
    }

    #[test]
    fn tiles_hold_their_planes_in_the_budget() {
        // The planes' rows of a tile and the rows beside it fit 1 MiB and
        // one row more would not; four rows where fewer fit.
        for r in 1..=10 {
            for len in [32, 64, 256, 1024] {
                let t = tile_rows(r, len);
                let row = (len + 2 * r) * 8;
                let bytes = |t: usize| ((2 * r + 1) * t + 2 * r) * row;
                if bytes(4) <= 1 << 20 {
                    assert!(bytes(t) <= 1 << 20, "r {r} len {len}: {t} rows overflow");
                    assert!(
                        bytes(t + 1) > 1 << 20,
                        "r {r} len {len}: room past {t} rows"
                    );
                } else {
                    assert_eq!(t, 4, "r {r} len {len}: the floor");
                }
            }
        }
        // Order 20 on 256^3: 21 rows (the old rule gave 4).
        assert_eq!(tile_rows(10, 256), 21);
    }

    #[test]
    fn symbol_maximum_at_nyquist() {
        for order in ORDERS {
            let m = max_symbol(order).unwrap();
            assert!((m - symbol(order, std::f64::consts::PI).unwrap()).abs() < 1e-12);
        }
        assert_eq!(max_symbol(2).unwrap(), 4.0);
    }
}
