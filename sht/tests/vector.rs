//! Vector (spheroidal/toroidal) transforms and the horizontal gradient.

use std::f64::consts::PI;

use approx::{abs_diff_eq, assert_abs_diff_eq};
use num_complex::Complex64;
use sht::{Parallelism, Sht, ShtError};

const ZERO: Complex64 = Complex64::new(0.0, 0.0);

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Random band-limited potentials: real for `m = 0`, zero for `l = 0`
/// (which no tangent field carries).
fn random_potential(sht: &Sht, nf: usize, seed: u64) -> Vec<Complex64> {
    let mut r = Rng(seed);
    let mut c = vec![ZERO; nf * sht.nlm()];
    for f in 0..nf {
        for m in 0..=sht.lmax() {
            for l in m.max(1)..=sht.lmax() {
                let im = if m == 0 { 0.0 } else { r.next() - 0.5 };
                c[f * sht.nlm() + sht.lm_index(l, m)] = Complex64::new(r.next() - 0.5, im);
            }
        }
    }
    c
}

/// Unnormalised `P_l^m` (no Condon-Shortley phase) by the textbook
/// recurrence, times `N_lm` from the factorial ratio; zero for `m > l`.
fn direct_plm(l: usize, m: usize, theta: f64) -> f64 {
    if m > l {
        return 0.0;
    }
    let (x, s) = (theta.cos(), theta.sin());
    let mut pmm = 1.0;
    for k in 1..=m {
        pmm *= (2 * k - 1) as f64 * s;
    }
    let (mut p0, mut p1) = (0.0, pmm);
    for ll in m + 1..=l {
        let p2 = ((2 * ll - 1) as f64 * x * p1 - (ll + m - 1) as f64 * p0) / (ll - m) as f64;
        p0 = p1;
        p1 = p2;
    }
    let mut ratio = 1.0;
    for k in l - m + 1..=l + m {
        ratio /= k as f64;
    }
    ((2 * l + 1) as f64 / (4.0 * PI) * ratio).sqrt() * p1
}

/// `dPbar_lm / dtheta` by the ladder in `m` (independent of the recurrence
/// in `l` the transforms use):
/// `dPbar_lm/dtheta = (sqrt((l+m)(l-m+1)) Pbar_{l,m-1} - sqrt((l-m)(l+m+1)) Pbar_{l,m+1}) / 2`,
/// and `dPbar_l0/dtheta = -sqrt(l(l+1)) Pbar_l1`.
fn direct_dplm(l: usize, m: usize, theta: f64) -> f64 {
    let (lf, mf) = (l as f64, m as f64);
    if m == 0 {
        return -(lf * (lf + 1.0)).sqrt() * direct_plm(l, 1, theta);
    }
    0.5 * (((lf + mf) * (lf - mf + 1.0)).sqrt() * direct_plm(l, m - 1, theta)
        - ((lf - mf) * (lf + mf + 1.0)).sqrt() * direct_plm(l, m + 1, theta))
}

fn max_rel(a: &[Complex64], b: &[Complex64]) -> f64 {
    let scale = b.iter().map(|z| z.norm()).fold(0.0, f64::max);
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).norm())
        .fold(0.0, f64::max)
        / scale
}

fn bits_eq(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

fn cbits_eq(a: &[Complex64], b: &[Complex64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.re.to_bits() == y.re.to_bits() && x.im.to_bits() == y.im.to_bits())
}

#[test]
fn derivative_ladder_matches_closed_forms() {
    // The test's own reference against closed forms: Pbar_10, Pbar_11, Pbar_21, Pbar_22.
    for th in [0.1, 0.7, 1.9, 3.0] {
        let (c, s) = (f64::cos(th), f64::sin(th));
        let d10 = -(3.0 / (4.0 * PI)).sqrt() * s;
        let d11 = (3.0 / (8.0 * PI)).sqrt() * c;
        let d21 = (15.0 / (8.0 * PI)).sqrt() * (c * c - s * s); // d/dth (s c)
        let d22 = (15.0 / (32.0 * PI)).sqrt() * 2.0 * s * c; // d/dth s^2
                                                             // Values < 1.1: a few roundings of two evaluation orders. Measured
                                                             // at most 1.1e-16, a 9x margin.
        assert_abs_diff_eq!(direct_dplm(1, 0, th), d10, epsilon = 1e-15);
        assert_abs_diff_eq!(direct_dplm(1, 1, th), d11, epsilon = 1e-15);
        assert_abs_diff_eq!(direct_dplm(2, 1, th), d21, epsilon = 1e-15);
        assert_abs_diff_eq!(direct_dplm(2, 2, th), d22, epsilon = 1e-15);
    }
}

fn roundtrip(nt: usize, lmax: usize, nf: usize, par: Parallelism) -> f64 {
    let sht = Sht::new(nt, Some(lmax)).unwrap();
    let s = random_potential(&sht, nf, 17 + lmax as u64);
    let t = random_potential(&sht, nf, 91 + lmax as u64);
    let ng = nf * nt * sht.nphi();
    let (mut vt, mut vp) = (vec![0.0; ng], vec![0.0; ng]);
    sht.vector_synthesis(&s, &t, &mut vt, &mut vp, par).unwrap();
    let (mut s2, mut t2) = (vec![ZERO; s.len()], vec![ZERO; t.len()]);
    sht.vector_analysis(&vt, &vp, &mut s2, &mut t2, par)
        .unwrap();
    max_rel(&s2, &s).max(max_rel(&t2, &t))
}

#[test]
fn vector_roundtrip_to_lmax_127() {
    for (nt, lmax, nf) in [
        (4, 3, 1),
        (32, 31, 3),
        (33, 31, 1),
        (48, 31, 2),
        (128, 127, 1),
        (193, 127, 2),
    ] {
        // Measured at most 5.5e-13 (lmax 127), a 1.8x margin; 7.9e-14 for
        // the rayon case below.
        let e = roundtrip(nt, lmax, nf, Parallelism::None);
        assert!(e < 1e-12, "nt {nt} lmax {lmax}: {e:e} >= 1e-12");
    }
    let e = roundtrip(96, 63, 2, Parallelism::Rayon);
    assert!(e < 1e-12, "rayon: {e:e} >= 1e-12");
}

#[test]
fn vector_synthesis_matches_direct_evaluation() {
    // Odd ntheta (an equator node) and even; random points of the grid.
    for nt in [31usize, 44] {
        let lmax = 20;
        let sht = Sht::new(nt, Some(lmax)).unwrap();
        let s = random_potential(&sht, 1, 5);
        let t = random_potential(&sht, 1, 6);
        let np = sht.nphi();
        let (mut vt, mut vp) = (vec![0.0; nt * np], vec![0.0; nt * np]);
        sht.vector_synthesis(&s, &t, &mut vt, &mut vp, Parallelism::None)
            .unwrap();
        let mut r = Rng(3);
        for _ in 0..60 {
            let j = (r.next() * nt as f64) as usize;
            let k = (r.next() * np as f64) as usize;
            let (th, ph) = (sht.theta()[j], sht.phi(k));
            let (mut ut, mut up) = (0.0, 0.0);
            for m in 0..=lmax {
                let w = if m == 0 { 1.0 } else { 2.0 };
                let e = Complex64::from_polar(1.0, m as f64 * ph);
                let im = Complex64::new(0.0, m as f64);
                for l in m.max(1)..=lmax {
                    let (p, dp) = (direct_plm(l, m, th), direct_dplm(l, m, th));
                    let (sl, tl) = (s[sht.lm_index(l, m)], t[sht.lm_index(l, m)]);
                    let sl = if m == 0 {
                        Complex64::new(sl.re, 0.0)
                    } else {
                        sl
                    };
                    let tl = if m == 0 {
                        Complex64::new(tl.re, 0.0)
                    } else {
                        tl
                    };
                    ut += w * ((sl * dp + tl * im * (p / th.sin())) * e).re;
                    up += w * ((sl * im * (p / th.sin()) - tl * dp) * e).re;
                }
            }
            let (gt, gp) = (vt[j * np + k], vp[j * np + k]);
            // Against the direct double sum, relative to the values (up to
            // 47 next to the poles, where 1 / sin theta is 13): both sides
            // add about (lmax + 1)^2 = 441 rounded terms and a recurrence
            // of lmax steps. Measured at most 2.7e-14 (1.3e-12 at 47; with
            // the recurrence in l instead of the pair recurrence 1.8e-14),
            // a 3.7x margin.
            let tol = 1e-13 * ut.abs().max(up.abs()).max(1.0);
            assert!(
                abs_diff_eq!(gt, ut, epsilon = tol),
                "nt {nt} j {j} k {k}: {gt} vs {ut}"
            );
            assert!(
                abs_diff_eq!(gp, up, epsilon = tol),
                "nt {nt} j {j} k {k}: {gp} vs {up}"
            );
        }
    }
}

#[test]
fn rigid_rotation_from_t10() {
    // T = c Y_10: u_theta = 0, u_phi = -dT/dtheta = c sqrt(3/(4 pi)) sin theta.
    let sht = Sht::new(24, Some(15)).unwrap();
    let c = 0.75;
    let s = vec![ZERO; sht.nlm()];
    let mut t = vec![ZERO; sht.nlm()];
    t[sht.lm_index(1, 0)] = Complex64::new(c, 0.0);
    let np = sht.nphi();
    let (mut vt, mut vp) = (vec![0.0; 24 * np], vec![0.0; 24 * np]);
    sht.vector_synthesis(&s, &t, &mut vt, &mut vp, Parallelism::None)
        .unwrap();
    for j in 0..24 {
        let want = c * (3.0 / (4.0 * PI)).sqrt() * sht.theta()[j].sin();
        for k in 0..np {
            // u_theta has no source (S = 0, m = 0): measured exactly 0;
            // u_phi, values < 0.4: measured at most 3.9e-16, a 2.6x margin.
            assert!(
                abs_diff_eq!(vt[j * np + k], 0.0, epsilon = 1e-15),
                "u_theta at {j},{k}: {}",
                vt[j * np + k]
            );
            assert!(
                abs_diff_eq!(vp[j * np + k], want, epsilon = 1e-15),
                "u_phi at {j},{k}: {} vs {want}",
                vp[j * np + k]
            );
        }
    }
    // And back: only T_10.
    let (mut s2, mut t2) = (vec![ZERO; sht.nlm()], vec![ZERO; sht.nlm()]);
    sht.vector_analysis(&vt, &vp, &mut s2, &mut t2, Parallelism::None)
        .unwrap();
    // Measured 1.4e-17 (S) and at most 4.4e-16 (T), 73x and 2.3x margins.
    let s2max = s2.iter().map(|z| z.norm()).fold(0.0, f64::max);
    assert!(s2max < 1e-15, "spheroidal part {s2max:e} >= 1e-15");
    for (i, z) in t2.iter().enumerate() {
        let e = if i == sht.lm_index(1, 0) { c } else { 0.0 };
        assert!((z - e).norm() < 1e-15, "T[{i}] = {z}, bound 1e-15");
    }
}

#[test]
fn gradient_is_spheroidal_with_the_scalar_as_potential() {
    let (nt, lmax, nf) = (64, 42, 2);
    let sht = Sht::new(nt, Some(lmax)).unwrap();
    let f = random_potential(&sht, nf, 23);
    let ng = nf * nt * sht.nphi();
    let (mut gt, mut gp) = (vec![0.0; ng], vec![0.0; ng]);
    sht.gradient(&f, &mut gt, &mut gp, Parallelism::None)
        .unwrap();
    // Equal to the vector synthesis with T = 0, bit for bit.
    let zero = vec![ZERO; f.len()];
    let (mut vt, mut vp) = (vec![0.0; ng], vec![0.0; ng]);
    sht.vector_synthesis(&f, &zero, &mut vt, &mut vp, Parallelism::None)
        .unwrap();
    assert!(bits_eq(&gt, &vt) && bits_eq(&gp, &vp));
    let (mut s, mut t) = (vec![ZERO; f.len()], vec![ZERO; f.len()]);
    sht.vector_analysis(&gt, &gp, &mut s, &mut t, Parallelism::None)
        .unwrap();
    // Measured 3.2e-14 (round trip) and 2.3e-14 (toroidal leak): 31x and
    // 4.4x margins.
    let e = max_rel(&s, &f);
    assert!(e < 1e-12, "{e:e} >= 1e-12");
    let tmax = t.iter().map(|z| z.norm()).fold(0.0, f64::max);
    assert!(tmax < 1e-13, "toroidal part {tmax:e} >= 1e-13");
    // The gradient of Y_10 = sqrt(3/(4 pi)) cos theta: (-sqrt(3/(4 pi)) sin theta, 0).
    let mut y10 = vec![ZERO; sht.nlm()];
    y10[sht.lm_index(1, 0)] = Complex64::new(1.0, 0.0);
    let n1 = nt * sht.nphi();
    let (mut gt1, mut gp1) = (vec![0.0; n1], vec![0.0; n1]);
    sht.gradient(&y10, &mut gt1, &mut gp1, Parallelism::None)
        .unwrap();
    for j in 0..nt {
        let want = -(3.0 / (4.0 * PI)).sqrt() * sht.theta()[j].sin();
        let (g, h) = (gt1[j * sht.nphi() + 5], gp1[j * sht.nphi() + 5]);
        // Measured at most 2.1e-15 (4.8x margin); u_phi exactly 0 (m = 0).
        assert!(
            abs_diff_eq!(g, want, epsilon = 1e-14) && abs_diff_eq!(h, 0.0, epsilon = 1e-15),
            "{j}: {g} vs {want}, {h}"
        );
    }
}

#[test]
fn vector_parallel_is_bitwise_serial_and_per_m_steps_compose() {
    let (nt, nf) = (50, 3);
    let sht = Sht::new(nt, None).unwrap();
    let s = random_potential(&sht, nf, 41);
    let t = random_potential(&sht, nf, 42);
    let ng = nf * nt * sht.nphi();
    let (mut vt1, mut vp1) = (vec![0.0; ng], vec![0.0; ng]);
    let (mut vt2, mut vp2) = (vec![0.0; ng], vec![0.0; ng]);
    sht.vector_synthesis(&s, &t, &mut vt1, &mut vp1, Parallelism::None)
        .unwrap();
    sht.vector_synthesis(&s, &t, &mut vt2, &mut vp2, Parallelism::Rayon)
        .unwrap();
    assert!(bits_eq(&vt1, &vt2) && bits_eq(&vp1, &vp2));
    let (mut s1, mut t1) = (vec![ZERO; s.len()], vec![ZERO; s.len()]);
    let (mut s2, mut t2) = (vec![ZERO; s.len()], vec![ZERO; s.len()]);
    sht.vector_analysis(&vt1, &vp1, &mut s1, &mut t1, Parallelism::None)
        .unwrap();
    sht.vector_analysis(&vt1, &vp1, &mut s2, &mut t2, Parallelism::Rayon)
        .unwrap();
    assert!(cbits_eq(&s1, &s2) && cbits_eq(&t1, &t2));
    // One field of the batch alone gives the same bits.
    let n1 = nt * sht.nphi();
    let nlm = sht.nlm();
    let (mut vt3, mut vp3) = (vec![0.0; n1], vec![0.0; n1]);
    sht.vector_synthesis(
        &s[2 * nlm..],
        &t[2 * nlm..],
        &mut vt3,
        &mut vp3,
        Parallelism::None,
    )
    .unwrap();
    assert!(bits_eq(&vt3, &vt1[2 * n1..]) && bits_eq(&vp3, &vp1[2 * n1..]));
    // Per-m Legendre steps with the phi steps reproduce the full transforms.
    let len = nf * sht.spectral_len();
    let (mut st, mut sp) = (vec![ZERO; len], vec![ZERO; len]);
    sht.phi_analysis(&vt1, &mut st, Parallelism::None).unwrap();
    sht.phi_analysis(&vp1, &mut sp, Parallelism::None).unwrap();
    for m in 0..=sht.lmax() {
        let nl = sht.lmax() - m + 1;
        let blk = m * nf * nt..(m + 1) * nf * nt;
        let (mut sl, mut tl) = (vec![ZERO; nf * nl], vec![ZERO; nf * nl]);
        sht.vector_legendre_analysis_m(m, &st[blk.clone()], &sp[blk.clone()], &mut sl, &mut tl)
            .unwrap();
        for f in 0..nf {
            let o = f * nlm + sht.m_offset(m);
            assert!(cbits_eq(&sl[f * nl..(f + 1) * nl], &s1[o..o + nl]));
            assert!(cbits_eq(&tl[f * nl..(f + 1) * nl], &t1[o..o + nl]));
        }
        let (mut ot, mut op) = (vec![ZERO; nf * nt], vec![ZERO; nf * nt]);
        sht.vector_legendre_synthesis_m(m, &sl, &tl, &mut ot, &mut op)
            .unwrap();
        st[blk.clone()].copy_from_slice(&ot);
        sp[blk].copy_from_slice(&op);
    }
    let (mut vt4, mut vp4) = (vec![0.0; ng], vec![0.0; ng]);
    sht.phi_synthesis(&st, &mut vt4, Parallelism::None).unwrap();
    sht.phi_synthesis(&sp, &mut vp4, Parallelism::None).unwrap();
    let err = vt4
        .iter()
        .zip(&vt1)
        .chain(vp4.iter().zip(&vp1))
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let scale = vt1.iter().chain(&vp1).map(|v| v.abs()).fold(0.0, f64::max);
    // Measured 8.3e-15 relative, a 12x margin.
    assert!(err < 1e-13 * scale, "{err:e} >= 1e-13 * {scale:e}");
    // The all-m Legendre steps equal the per-m ones.
    let (mut st2, mut sp2) = (vec![ZERO; len], vec![ZERO; len]);
    sht.vector_legendre_synthesis(&s1, &t1, &mut st2, &mut sp2, Parallelism::Rayon)
        .unwrap();
    assert!(cbits_eq(&st2, &st) && cbits_eq(&sp2, &sp));
}

#[test]
fn vector_errors() {
    let sht = Sht::new(16, None).unwrap(); // lmax 11, nphi 32
    let c = vec![ZERO; sht.nlm()];
    let ng = 16 * 32;
    let (mut a, mut b) = (vec![0.0; ng], vec![0.0; ng]);
    assert_eq!(
        sht.vector_synthesis(&c, &c[1..], &mut a, &mut b, Parallelism::None),
        Err(ShtError::LengthMismatch {
            what: "tor",
            expected: sht.nlm(),
            got: sht.nlm() - 1
        })
    );
    assert!(matches!(
        sht.vector_synthesis(&c[1..], &c[1..], &mut a, &mut b, Parallelism::None),
        Err(ShtError::BatchLength { what: "sph", .. })
    ));
    assert!(matches!(
        sht.vector_synthesis(&c, &c, &mut a, &mut b[1..], Parallelism::None),
        Err(ShtError::LengthMismatch { what: "vp", .. })
    ));
    assert!(matches!(
        sht.gradient(&c, &mut a[1..], &mut b, Parallelism::None),
        Err(ShtError::LengthMismatch { what: "vt", .. })
    ));
    let (mut s, mut t) = (vec![ZERO; sht.nlm()], vec![ZERO; sht.nlm() + 1]);
    assert!(matches!(
        sht.vector_analysis(&a, &b, &mut s, &mut t, Parallelism::None),
        Err(ShtError::LengthMismatch { what: "tor", .. })
    ));
    assert!(matches!(
        sht.vector_analysis(&a[1..], &b, &mut s, &mut t, Parallelism::None),
        Err(ShtError::BatchLength { what: "vt", .. })
    ));
    let mut o = vec![ZERO; 16];
    let mut o2 = vec![ZERO; 16];
    assert_eq!(
        sht.vector_legendre_synthesis_m(12, &c[..1], &c[..1], &mut o, &mut o2),
        Err(ShtError::OrderOutOfRange { m: 12, mmax: 11 })
    );
    assert!(matches!(
        sht.vector_legendre_synthesis_m(3, &c[..9], &c[..9], &mut o, &mut o2[1..]),
        Err(ShtError::LengthMismatch { what: "out_p", .. })
    ));
    let (mut sl, mut tl) = (vec![ZERO; 9], vec![ZERO; 8]);
    assert!(matches!(
        sht.vector_legendre_analysis_m(3, &o, &o2, &mut sl, &mut tl),
        Err(ShtError::LengthMismatch { what: "tor_l", .. })
    ));
    let len = sht.spectral_len();
    let (st, sp) = (vec![ZERO; len], vec![ZERO; len - 1]);
    assert!(matches!(
        sht.vector_legendre_analysis(&st, &sp, &mut s, &mut t[..sht.nlm()], Parallelism::None),
        Err(ShtError::LengthMismatch { what: "spec_p", .. })
    ));
}
