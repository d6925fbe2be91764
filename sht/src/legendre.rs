//! The normalised associated Legendre recurrence, with extended exponent
//! for the sectoral start so that high orders do not underflow at the poles.

use std::f64::consts::PI;

/// Scaling unit of the extended exponent: `2^280`.
pub(crate) const BIG: f64 = 1.942668892225729e84; // 2^280
/// `2^-280`.
pub(crate) const INV_BIG: f64 = 5.147557589468029e-85; // 2^-280

/// Sectoral values `Pbar_mm(cos theta) = val * BIG^-k` for `m = 0..=mmax`,
/// pushed to `val` and `k`, for one `sin(theta)`.
pub(crate) fn sectoral(mmax: usize, sin_theta: f64, mut push: impl FnMut(f64, i32)) {
    let mut val = (1.0 / (4.0 * PI)).sqrt();
    let mut k = 0i32;
    for m in 0..=mmax {
        push(val, k);
        let mf = m as f64;
        val *= ((2.0 * mf + 3.0) / (2.0 * mf + 2.0)).sqrt() * sin_theta;
        if val != 0.0 && val < INV_BIG {
            val *= BIG;
            k += 1;
        }
    }
}

/// Recurrence coefficients for order `m`: entry `i` (for `l = m + 1 + i`)
/// is `[a_lm, b_lm]` with `Pbar_lm = a_lm (x Pbar_{l-1,m} - b_lm Pbar_{l-2,m})`,
/// `a_lm = sqrt((4 l^2 - 1) / (l^2 - m^2))`, `b_lm = 1 / a_{l-1,m}`.
pub(crate) fn coefficients(lmax: usize, m: usize, out: &mut Vec<[f64; 2]>) {
    out.clear();
    let mf = m as f64;
    for l in m + 1..=lmax {
        let lf = l as f64;
        let a = ((4.0 * lf * lf - 1.0) / ((lf - mf) * (lf + mf))).sqrt();
        let l1 = lf - 1.0;
        let b = ((l1 - mf) * (l1 + mf) / (4.0 * l1 * l1 - 1.0)).sqrt();
        out.push([a, b]);
    }
}

/// Runs the recurrence in `l` from the sectoral value `p_start * BIG^-k_start`
/// and calls `visit(l - m, Pbar_lm(x))` for every `l` from the first one where
/// the value is back in the unscaled range. While scaled (`k >= 1`) the stored
/// value stays below 1 in magnitude, so the true value is below `2^-280` and
/// is skipped as negligible.
#[inline(always)]
pub(crate) fn run(
    x: f64,
    p_start: f64,
    k_start: i32,
    ab: &[[f64; 2]],
    mut visit: impl FnMut(usize, f64),
) {
    let n = ab.len();
    let Some((mut i, mut p0, mut p1)) = unscaled_start(x, p_start, k_start, ab) else {
        return;
    };
    loop {
        visit(i, p1);
        if i == n {
            return;
        }
        let [a, b] = ab[i];
        let p2 = a * (x * p1 - b * p0);
        p0 = p1;
        p1 = p2;
        i += 1;
    }
}

/// The orthonormal associated Legendre functions
/// `Pbar_lm(cos theta) = N_lm P_l^m(cos theta)` (no Condon-Shortley phase,
/// `N_lm = sqrt((2l+1)/(4 pi) (l-m)!/(l+m)!)`) for `l = m..=lmax` at one
/// point, written to `out[l - m]`, so that `Y_lm = Pbar_lm e^{i m phi}`.
///
/// Uses the same scaled recurrence as the transforms; values below
/// `2^-280` come out as zero. `out` must hold `lmax - m + 1` values and
/// `m <= lmax`; otherwise an error.
pub fn normalized_legendre(
    lmax: usize,
    m: usize,
    theta: f64,
    out: &mut [f64],
) -> Result<(), crate::ShtError> {
    if m > lmax {
        return Err(crate::ShtError::OrderOutOfRange { m, mmax: lmax });
    }
    crate::check_len("out", out.len(), lmax - m + 1)?;
    let (x, s) = (theta.cos(), theta.sin().abs());
    let mut start = (0.0, 0);
    sectoral(m, s, |v, k| start = (v, k));
    let mut ab = Vec::new();
    coefficients(lmax, m, &mut ab);
    out.iter_mut().for_each(|o| *o = 0.0);
    run(x, start.0, start.1, &ab, |i, p| out[i] = p);
    Ok(())
}

/// Lanes of latitudes run together by [`run_block`].
pub(crate) const LANES: usize = 8;

/// The index `i = l - m` at which the scaled recurrence from
/// `(p_start, k_start)` reaches the unscaled range, with `(p_{i-1}, p_i)`
/// there; `None` if it does not within `l <= lmax` (`ab.len() = lmax - m`).
#[inline(always)]
fn unscaled_start(
    x: f64,
    p_start: f64,
    k_start: i32,
    ab: &[[f64; 2]],
) -> Option<(usize, f64, f64)> {
    let (mut p0, mut p1, mut k, mut i) = (0.0, p_start, k_start, 0usize);
    while k > 0 {
        if i == ab.len() {
            return None;
        }
        let [a, b] = ab[i];
        let p2 = a * (x * p1 - b * p0);
        p0 = p1;
        p1 = p2;
        i += 1;
        if p1.abs() > 1.0 {
            p0 *= INV_BIG;
            p1 *= INV_BIG;
            k -= 1;
        }
    }
    Some((i, p0, p1))
}

/// [`run`] for [`LANES`] latitudes at once: the scaled start of each lane
/// runs alone (calling `visit1(state, lane, l - m, p)`) up to the first index where
/// all lanes are unscaled; from there the lanes advance together
/// (calling `visitn(state, l - m, &p)`), which breaks the recurrence's dependency
/// chain and vectorises. Every value is computed by the same operations as
/// in [`run`].
/// Returns whether any lane had a non-negligible value.
#[inline(always)]
pub(crate) fn run_block<S>(
    x: &[f64; LANES],
    p_start: &[f64; LANES],
    k_start: &[i32; LANES],
    ab: &[[f64; 2]],
    state: &mut S,
    visit1: impl Fn(&mut S, usize, usize, f64),
    visitn: impl Fn(&mut S, usize, &[f64; LANES]),
) -> bool {
    let n = ab.len();
    let starts: [Option<(usize, f64, f64)>; LANES] =
        std::array::from_fn(|q| unscaled_start(x[q], p_start[q], k_start[q], ab));
    let Some(i0) = starts.iter().flatten().map(|s| s.0).max() else {
        return false;
    };
    let mut p0 = [0.0; LANES];
    let mut p1 = [0.0; LANES];
    for q in 0..LANES {
        // Lanes that never leave the scaled range stay zero.
        let Some((mut i, mut a0, mut a1)) = starts[q] else {
            continue;
        };
        while i < i0 {
            visit1(state, q, i, a1);
            let [a, b] = ab[i];
            let a2 = a * (x[q] * a1 - b * a0);
            a0 = a1;
            a1 = a2;
            i += 1;
        }
        p0[q] = a0;
        p1[q] = a1;
    }
    let mut i = i0;
    loop {
        visitn(state, i, &p1);
        if i == n {
            return true;
        }
        let [a, b] = ab[i];
        for q in 0..LANES {
            let p2 = a * (x[q] * p1[q] - b * p0[q]);
            p0[q] = p1[q];
            p1[q] = p2;
        }
        i += 1;
    }
}
