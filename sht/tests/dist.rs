//! Distributed transforms: snake distributions, bit-identity with the
//! serial transform for every grid, algorithm and queue length, errors.

use comm::{local, Communicator};
use num_complex::Complex64;
use proptest::prelude::*;
use sht::{
    snake, Decomposition, DistConfig, DistError, DistSht, Parallelism, Protocol, Sht, ShtError,
};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    }
}

/// Work of each theta rank in tuples.
fn m_loads(d: &Decomposition) -> Vec<usize> {
    (0..d.pi_theta())
        .map(|t| d.orders(t).iter().map(|&m| d.lmax() + 1 - m).sum())
        .collect()
}

fn spread(v: &[usize]) -> usize {
    v.iter().max().unwrap() - v.iter().min().unwrap()
}

fn check_decomposition(lmax: usize, pr: usize, pt: usize) -> Result<(), TestCaseError> {
    let d = match Decomposition::new(lmax, lmax + 1, 64, pr, pt) {
        Ok(d) => d,
        Err(e) => {
            // Only refused when some theta rank has fewer degrees than pi_r.
            let fewest = (0..pt)
                .map(|t| {
                    lmax + 1
                        - sht::snake_orders(lmax, pt)
                            .iter()
                            .position(|&o| o == t)
                            .unwrap()
                })
                .min()
                .unwrap();
            prop_assert!(pr > fewest, "refused {lmax} {pr}x{pt}: {e}");
            return Ok(());
        }
    };
    // Every order on exactly one theta rank.
    let mut seen_m = vec![0; lmax + 1];
    for t in 0..pt {
        for &m in d.orders(t) {
            seen_m[m] += 1;
        }
    }
    prop_assert!(seen_m.iter().all(|&c| c == 1));
    prop_assert!(spread(&m_loads(&d)) < pt, "m imbalance {:?}", m_loads(&d));
    // Every tuple in exactly one lm layout, and in the level layout of its
    // order's theta rank exactly once.
    let mut seen = vec![0u32; (lmax + 1) * (lmax + 1)];
    for t in 0..pt {
        let mut lv = vec![0u32; (lmax + 1) * (lmax + 1)];
        for &(l, m) in d.level_tuples(t) {
            prop_assert!(m <= l && l <= lmax && d.orders(t).contains(&m));
            lv[l * (lmax + 1) + m] += 1;
        }
        for &m in d.orders(t) {
            for l in m..=lmax {
                prop_assert_eq!(lv[l * (lmax + 1) + m], 1);
            }
        }
        let mut loads = vec![];
        for r in 0..pr {
            let tl = d.lm_tuples(r, t);
            prop_assert!(!tl.is_empty());
            loads.push(tl.len());
            for &(l, m) in tl {
                prop_assert_eq!(d.degree_owner(t, l), r);
                seen[l * (lmax + 1) + m] += 1;
            }
        }
        // The snake over degrees: imbalance below the largest per-degree
        // work (the number of orders of the theta rank); with one theta
        // rank that is the seed's bound of pi_r - 1 tuples.
        let bound = if pt == 1 { pr } else { d.orders(t).len() + 1 };
        prop_assert!(spread(&loads) < bound, "l imbalance {loads:?}");
    }
    for l in 0..=lmax {
        for m in 0..=l {
            prop_assert_eq!(seen[l * (lmax + 1) + m], 1, "tuple ({}, {})", l, m);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn snake_distributions(lmax in 0usize..300, pr in 1usize..12, pt in 1usize..24) {
        let pt = pt.min(lmax + 1);
        check_decomposition(lmax, pr, pt)?;
    }

    #[test]
    fn snake_consecutive_weights(n in 1usize..500, parts in 1usize..40) {
        let w: Vec<usize> = (1..=n).rev().collect();
        let owner = snake(&w, parts);
        let mut load = vec![0; parts];
        for (i, &o) in owner.iter().enumerate() {
            load[o] += w[i];
        }
        let active = &load[..parts.min(n)];
        prop_assert!(spread(active) < parts);
    }
}

/// The serial reference and the per-rank comparison of one configuration.
struct Case {
    ntheta: usize,
    nphi: usize,
    lmax: usize,
    nr: usize,
    nf: usize,
    sht: Sht,
    coeffs: Vec<Complex64>,
    grid: Vec<f64>,
    /// Serial synthesis of `coeffs`, analysis of `grid`.
    synth: Vec<f64>,
    anal: Vec<Complex64>,
    /// A second set of coefficients and grid values, for the toroidal
    /// potential and `u_phi`.
    coeffs2: Vec<Complex64>,
    grid2: Vec<f64>,
    /// Serial vector synthesis of (`coeffs`, `coeffs2`) and analysis of
    /// (`grid`, `grid2`).
    vsynth: (Vec<f64>, Vec<f64>),
    vanal: (Vec<Complex64>, Vec<Complex64>),
}

impl Case {
    fn new(ntheta: usize, nphi: usize, lmax: usize, nr: usize, nf: usize) -> Self {
        let sht = Sht::with_nphi(ntheta, nphi, Some(lmax)).unwrap();
        let mut rng = Rng(ntheta as u64 * 1000 + nr as u64);
        let nb = nf * nr;
        let coeffs: Vec<Complex64> = (0..nb * sht.nlm())
            .map(|_| Complex64::new(rng.next(), rng.next()))
            .collect();
        let grid: Vec<f64> = (0..nb * ntheta * nphi).map(|_| rng.next()).collect();
        let mut synth = vec![0.0; grid.len()];
        sht.synthesis(&coeffs, &mut synth, Parallelism::None)
            .unwrap();
        let mut anal = vec![Complex64::new(0.0, 0.0); coeffs.len()];
        sht.analysis(&grid, &mut anal, Parallelism::None).unwrap();
        let coeffs2: Vec<Complex64> = (0..coeffs.len())
            .map(|_| Complex64::new(rng.next(), rng.next()))
            .collect();
        let grid2: Vec<f64> = (0..grid.len()).map(|_| rng.next()).collect();
        let mut vsynth = (vec![0.0; grid.len()], vec![0.0; grid.len()]);
        sht.vector_synthesis(
            &coeffs,
            &coeffs2,
            &mut vsynth.0,
            &mut vsynth.1,
            Parallelism::None,
        )
        .unwrap();
        let zero = Complex64::new(0.0, 0.0);
        let mut vanal = (vec![zero; coeffs.len()], vec![zero; coeffs.len()]);
        sht.vector_analysis(&grid, &grid2, &mut vanal.0, &mut vanal.1, Parallelism::None)
            .unwrap();
        Self {
            ntheta,
            nphi,
            lmax,
            nr,
            nf,
            sht,
            coeffs,
            grid,
            synth,
            anal,
            coeffs2,
            grid2,
            vsynth,
            vanal,
        }
    }

    fn config(&self, pr: usize, pt: usize) -> DistConfig {
        DistConfig {
            nphi: self.nphi,
            lmax: Some(self.lmax),
            ..DistConfig::new(self.ntheta, self.nr, pr, pt)
        }
    }

    /// The level layout of global coefficients on one rank.
    fn level(&self, d: &DistSht, global: &[Complex64]) -> Vec<Complex64> {
        let (r0, nrl) = d.levels();
        let mut out = vec![];
        for f in 0..self.nf {
            for r in r0..r0 + nrl {
                let base = (f * self.nr + r) * self.sht.nlm();
                out.extend(
                    d.level_tuples()
                        .iter()
                        .map(|&(l, m)| global[base + self.sht.lm_index(l, m)]),
                );
            }
        }
        out
    }

    /// The rank's part of a global grid.
    fn local_grid(&self, d: &DistSht, global: &[f64]) -> Vec<f64> {
        let ((r0, nrl), (t0, ntl)) = (d.levels(), d.latitudes());
        let mut out = vec![];
        for f in 0..self.nf {
            for r in r0..r0 + nrl {
                let base = (f * self.nr + r) * self.ntheta * self.nphi;
                out.extend_from_slice(
                    &global[base + t0 * self.nphi..base + (t0 + ntl) * self.nphi],
                );
            }
        }
        out
    }

    /// Runs synthesis, analysis and both l transpositions on one rank and
    /// checks every value's bits against the serial transform.
    fn check_rank(&self, d: &mut DistSht) -> Result<(), String> {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let cbits = |v: &[Complex64]| {
            v.iter()
                .flat_map(|x| [x.re.to_bits(), x.im.to_bits()])
                .collect::<Vec<_>>()
        };
        let level = self.level(d, &self.coeffs);
        let mut grid = vec![f64::NAN; self.nf * d.grid_len()];
        d.synthesis(&level, &mut grid).map_err(|e| e.to_string())?;
        if bits(&grid) != bits(&self.local_grid(d, &self.synth)) {
            return Err(format!("synthesis differs on rank {:?}", d.coords()));
        }
        let mut back = vec![Complex64::new(f64::NAN, 0.0); level.len()];
        d.analysis(&self.local_grid(d, &self.grid), &mut back)
            .map_err(|e| e.to_string())?;
        if cbits(&back) != cbits(&self.level(d, &self.anal)) {
            return Err(format!("analysis differs on rank {:?}", d.coords()));
        }
        // Vector transforms.
        let level2 = self.level(d, &self.coeffs2);
        let mut vt = vec![f64::NAN; grid.len()];
        let mut vp = vec![f64::NAN; grid.len()];
        d.vector_synthesis(&level, &level2, &mut vt, &mut vp)
            .map_err(|e| e.to_string())?;
        if bits(&vt) != bits(&self.local_grid(d, &self.vsynth.0))
            || bits(&vp) != bits(&self.local_grid(d, &self.vsynth.1))
        {
            return Err(format!("vector synthesis differs on rank {:?}", d.coords()));
        }
        let mut s = vec![Complex64::new(f64::NAN, 0.0); level.len()];
        let mut t = vec![Complex64::new(f64::NAN, 0.0); level.len()];
        d.vector_analysis(
            &self.local_grid(d, &self.grid),
            &self.local_grid(d, &self.grid2),
            &mut s,
            &mut t,
        )
        .map_err(|e| e.to_string())?;
        if cbits(&s) != cbits(&self.level(d, &self.vanal.0))
            || cbits(&t) != cbits(&self.level(d, &self.vanal.1))
        {
            return Err(format!("vector analysis differs on rank {:?}", d.coords()));
        }
        let mut lm = vec![Complex64::new(f64::NAN, 0.0); self.nf * d.lm_len()];
        d.to_lm(&level, &mut lm).map_err(|e| e.to_string())?;
        let nlm = d.lm_tuples().len();
        for f in 0..self.nf {
            for (i, &(l, m)) in d.lm_tuples().iter().enumerate() {
                for r in 0..self.nr {
                    let want =
                        self.coeffs[(f * self.nr + r) * self.sht.nlm() + self.sht.lm_index(l, m)];
                    let got = lm[(f * nlm + i) * self.nr + r];
                    if got != want {
                        return Err(format!(
                            "to_lm: field {f} ({l}, {m}) level {r} on rank {:?}",
                            d.coords()
                        ));
                    }
                }
            }
        }
        let mut level2 = vec![Complex64::new(f64::NAN, 0.0); level.len()];
        d.from_lm(&lm, &mut level2).map_err(|e| e.to_string())?;
        if cbits(&level2) != cbits(&level) {
            return Err(format!("from_lm differs on rank {:?}", d.coords()));
        }
        Ok(())
    }

    /// Every algorithm and the given queue lengths on a `pr x pt` grid.
    fn check_grid(&self, pr: usize, pt: usize, queues: &[usize]) {
        local::run(pr * pt, |c: &dyn Communicator| {
            for &queue in queues {
                for alg in Protocol::ALL {
                    let cfg = DistConfig {
                        queue,
                        theta_protocol: alg,
                        l_protocol: alg,
                        ..self.config(pr, pt)
                    };
                    let mut d = DistSht::new(c, &cfg).map_err(|e| e.to_string())?;
                    self.check_rank(&mut d)
                        .map_err(|e| format!("{pr}x{pt} {alg} queue {queue}: {e}"))?;
                }
            }
            Ok::<_, String>(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    }
}

fn grids(n: usize) -> Vec<(usize, usize)> {
    (1..=n)
        .filter(|a| n.is_multiple_of(*a))
        .map(|a| (a, n / a))
        .collect()
}

#[test]
fn bit_identical_all_ranks_and_grids() {
    // ntheta 12, lmax 8 (the default), 8 levels, 3 fields.
    let case = Case::new(12, 24, 8, 8, 3);
    for n in [1, 2, 3, 4, 6, 8] {
        for (pr, pt) in grids(n) {
            // Queue lengths below, at and above the number of fields.
            case.check_grid(pr, pt, &[1, 2, 3, 5]);
        }
    }
}

#[test]
fn bit_identical_odd_ntheta_and_wide_nphi() {
    // Odd ntheta (an equator row), lmax = ntheta - 1, nphi above 2 ntheta.
    let case = Case::new(13, 30, 12, 5, 2);
    for (pr, pt) in [(1, 1), (1, 4), (2, 3), (5, 1), (1, 13), (4, 2)] {
        case.check_grid(pr, pt, &[1, 2]);
    }
}

#[test]
fn bit_identical_larger_grid() {
    // lmax 31 on 48 latitudes, 6 levels, 2 fields: several latitudes,
    // orders and levels per rank, uneven blocks.
    let case = Case::new(48, 96, 31, 6, 2);
    for (pr, pt) in [(2, 3), (1, 6), (3, 2), (6, 1), (2, 4), (1, 5)] {
        case.check_grid(pr, pt, &[1, 2]);
    }
}

#[test]
fn threads_and_auto_are_bit_identical() {
    let case = Case::new(16, 32, 10, 4, 4);
    for (pr, pt) in [(1, 3), (2, 2), (4, 1)] {
        let algs = local::run(pr * pt, |c: &dyn Communicator| {
            let cfg = DistConfig {
                queue: 3,
                parallelism: Parallelism::Rayon,
                ..case.config(pr, pt)
            };
            let mut d = DistSht::new(c, &cfg).map_err(|e| e.to_string())?;
            case.check_rank(&mut d)?;
            // Auto measured both transpositions (the theta one only in 2d)
            // and picked the fastest it measured.
            let n = sht::Protocol::ALL.len();
            let n_theta = if pt > 1 { n } else { 0 };
            assert_eq!(d.timings().len(), n_theta + n);
            for which in [sht::Transposition::Theta, sht::Transposition::L] {
                let t: Vec<_> = d
                    .timings()
                    .iter()
                    .filter(|t| t.transposition == which)
                    .collect();
                if let Some(best) = t.iter().min_by(|a, b| a.seconds.total_cmp(&b.seconds)) {
                    let chosen = match which {
                        sht::Transposition::Theta => d.theta_protocol(),
                        sht::Transposition::L => d.l_protocol(),
                    };
                    assert_eq!(chosen, best.algorithm);
                    assert!(t.iter().all(|x| x.seconds > 0.0));
                }
            }
            Ok::<_, String>((d.theta_protocol(), d.l_protocol(), d.timings().to_vec()))
        })
        .unwrap();
        // The same choice and the same reported times on every rank.
        assert!(algs.iter().all(|a| a == &algs[0]), "{algs:?}");
    }
}

#[test]
fn round_trip_recovers_band_limited_coefficients() {
    let (ntheta, lmax, nr) = (24, 16, 3);
    let sht = Sht::new(ntheta, Some(lmax)).unwrap();
    let mut rng = Rng(7);
    let mut global = vec![Complex64::new(0.0, 0.0); nr * sht.nlm()];
    for r in 0..nr {
        for m in 0..=lmax {
            for l in m..=lmax {
                let im = if m == 0 { 0.0 } else { rng.next() };
                global[r * sht.nlm() + sht.lm_index(l, m)] = Complex64::new(rng.next(), im);
            }
        }
    }
    let errs = local::run(6, |c: &dyn Communicator| {
        let cfg = DistConfig {
            lmax: Some(lmax),
            theta_protocol: Protocol::Alltoallw,
            l_protocol: Protocol::P2p,
            ..DistConfig::new(ntheta, nr, 3, 2)
        };
        let mut d = DistSht::new(c, &cfg)?;
        let (r0, nrl) = d.levels();
        let level: Vec<Complex64> = (r0..r0 + nrl)
            .flat_map(|r| {
                d.level_tuples()
                    .iter()
                    .map(|&(l, m)| global[r * sht.nlm() + sht.lm_index(l, m)])
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut grid = vec![0.0; d.grid_len()];
        d.synthesis(&level, &mut grid)?;
        let mut back = vec![Complex64::new(0.0, 0.0); level.len()];
        d.analysis(&grid, &mut back)?;
        let err = level
            .iter()
            .zip(&back)
            .map(|(a, b)| (a - b).norm())
            .fold(0.0, f64::max);
        Ok::<_, DistError>(err)
    })
    .unwrap();
    assert!(errs.iter().all(|&e| e < 1e-12), "{errs:?}");
}

/// Builds a plan on `n` ranks with per-rank configurations; returns every
/// rank's error message (all ranks must fail).
fn errors(n: usize, cfg: impl Fn(usize) -> DistConfig + Sync) -> Vec<String> {
    local::run(n, |c: &dyn Communicator| {
        Ok::<_, String>(match DistSht::new(c, &cfg(c.rank())) {
            Ok(_) => "built".to_string(),
            Err(e) => e.to_string(),
        })
    })
    .unwrap()
}

fn same_error(msgs: &[String], needles: &[&str]) {
    assert!(msgs.iter().all(|m| m == &msgs[0]), "{msgs:?}");
    for n in needles {
        assert!(msgs[0].contains(n), "{:?} lacks {n:?}", msgs[0]);
    }
}

#[test]
fn errors_name_the_value_and_range_on_every_rank() {
    let base = |pr, pt| DistConfig {
        theta_protocol: Protocol::P2p,
        l_protocol: Protocol::P2p,
        ..DistConfig::new(8, 6, pr, pt)
    };
    // lmax >= ntheta.
    let e = errors(2, |_| DistConfig {
        lmax: Some(8),
        ..base(1, 2)
    });
    same_error(&e, &["lmax = 8", "0 <= lmax <= 7"]);
    // Odd nphi.
    let e = errors(2, |_| DistConfig {
        nphi: 17,
        ..base(2, 1)
    });
    same_error(&e, &["nphi = 17", "odd"]);
    // More theta ranks than latitudes (lmax 2 < ntheta... orders limit first
    // would be 3; use lmax 7 and 9 theta ranks on 8 latitudes).
    let e = errors(9, |_| DistConfig {
        lmax: Some(7),
        ..base(1, 9)
    });
    same_error(&e, &["pi_theta = 9", "8 latitudes", "1 <= pi_theta <= 8"]);
    // More theta ranks than orders.
    let e = errors(4, |_| DistConfig {
        lmax: Some(2),
        ..base(1, 4)
    });
    same_error(&e, &["pi_theta = 4", "3 orders m", "1 <= pi_theta <= 3"]);
    // More radial ranks than levels.
    let e = errors(8, |_| DistConfig {
        nr: 7,
        ..base(8, 1)
    });
    same_error(&e, &["pi_r = 8", "7 radial levels", "1 <= pi_r <= 7"]);
    // More radial ranks than degrees holding tuples on a theta rank
    // (lmax 3, 2 theta ranks: rank 1 has m = 1, 2: degrees 1..=3).
    let e = errors(8, |_| DistConfig {
        lmax: Some(3),
        nr: 8,
        ..base(4, 2)
    });
    same_error(&e, &["pi_r = 4", "1 <= pi_r <= 3"]);
    // Grid and communicator disagree.
    let e = errors(3, |_| base(2, 2));
    same_error(&e, &["2 x 2", "4 ranks", "communicator has 3"]);
    // Ranks pass different configurations: every rank reports it, no hang.
    let e = errors(3, |r| DistConfig {
        nr: if r == 2 { 5 } else { 6 },
        ..base(3, 1)
    });
    same_error(&e, &["ranks disagree", "rank 2"]);
    // Queue length zero.
    let e = errors(1, |_| DistConfig {
        queue: 0,
        ..base(1, 1)
    });
    same_error(&e, &["queue = 0"]);
    // Wrong buffer lengths are an error, not a panic.
    let e = local::run(2, |c: &dyn Communicator| {
        let mut d = DistSht::new(c, &base(1, 2)).map_err(|e| e.to_string())?;
        let coeffs = vec![Complex64::new(0.0, 0.0); d.level_len() + 1];
        let mut grid = vec![0.0; d.grid_len()];
        Ok::<_, String>(d.synthesis(&coeffs, &mut grid).unwrap_err())
    })
    .unwrap();
    assert!(matches!(
        e[0],
        DistError::Sht(ShtError::BatchLength { what: "coeffs", .. })
    ));
}
