//! Central second-derivative stencils of even order with exact rational
//! coefficients, and the fused sweep `out = u + dt D lap(u)`.

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

/// The fused update `out = a_c u + sum_d sum_m a[d][m] (u(+m e_d) + u(-m e_d))`
/// for one order, with the weights folded from `dt D c_m / h_d^2`.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// Stencil radius (order / 2).
    pub radius: usize,
    center: f64,
    /// Per axis, per offset 1..=radius.
    weights: [Vec<f64>; 3],
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
        })
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
    /// in increasing order), so any split of the box into regions gives the
    /// same bits.
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
        let s = layout.strides();
        let w: [[f64; R]; 3] = [0, 1, 2].map(|d| std::array::from_fn(|m| self.weights[d][m]));
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

    #[test]
    fn symbol_maximum_at_nyquist() {
        for order in ORDERS {
            let m = max_symbol(order).unwrap();
            assert!((m - symbol(order, std::f64::consts::PI).unwrap()).abs() < 1e-12);
        }
        assert_eq!(max_symbol(2).unwrap(), 4.0);
    }
}
