//! Shared helpers of the integration tests: a deterministic generator,
//! independent reference formulas and a few norms.
#![allow(dead_code)]

use std::f64::consts::PI;

/// The dynamo-benchmark shell.
pub const RI: f64 = 7.0 / 13.0;
/// The dynamo-benchmark shell.
pub const RO: f64 = 20.0 / 13.0;

/// SplitMix64: a small deterministic generator of test data.
#[derive(Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
    pub fn vec(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.uniform()).collect()
    }
}

/// The direct O(Nr^2) evaluation of `c sum''_j v_j cos(pi i j / N)`, the
/// formula of both directions, with the angle reduced exactly.
pub fn direct_transform(v: &[f64]) -> Vec<f64> {
    let nr = v.len();
    let n = nr - 1;
    let c = (2.0 / n as f64).sqrt();
    (0..nr)
        .map(|i| {
            let mut s = 0.0;
            for (j, vj) in v.iter().enumerate() {
                let h = if j == 0 || j == n { 0.5 } else { 1.0 };
                let p = (i * j) % (2 * n);
                s += h * vj * (PI * p as f64 / n as f64).cos();
            }
            c * s
        })
        .collect()
}

/// A polynomial of degree `deg` in product form `prod (r - z_j)` with
/// its first and second derivatives, by exact forward accumulation.
#[derive(Debug)]
pub struct Poly {
    pub roots: Vec<f64>,
}

impl Poly {
    pub fn random(rng: &mut Rng, deg: usize, lo: f64, hi: f64) -> Self {
        let roots = (0..deg)
            .map(|_| lo + (hi - lo) * 0.5 * (rng.uniform() + 1.0))
            .collect();
        Self { roots }
    }
    /// (p, p', p'') at r.
    pub fn eval(&self, r: f64) -> (f64, f64, f64) {
        let (mut p, mut d, mut dd) = (1.0, 0.0, 0.0);
        for z in &self.roots {
            let t = r - z;
            dd = dd * t + 2.0 * d;
            d = d * t + p;
            p *= t;
        }
        (p, d, dd)
    }
}

pub fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m, x| m.max(x.abs()))
}

pub fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0.0, |m, (x, y)| m.max((x - y).abs()))
}

/// Relative max-norm error of `got` against `want`.
pub fn rel_err(got: &[f64], want: &[f64]) -> f64 {
    max_diff(got, want) / max_abs(want)
}

/// Row-major `Nr x Nr` matrix (ndarray) times a vector, plain loops.
pub fn matvec(m: &ndarray::Array2<f64>, v: &[f64]) -> Vec<f64> {
    m.rows()
        .into_iter()
        .map(|row| row.iter().zip(v).map(|(a, b)| a * b).sum())
        .collect()
}

/// `exp(r) sin(3 r)` and its first two derivatives.
pub fn smooth(r: f64) -> (f64, f64, f64) {
    let (s, c) = (3.0 * r).sin_cos();
    let e = r.exp();
    (e * s, e * (s + 3.0 * c), e * (-8.0 * s + 6.0 * c))
}
