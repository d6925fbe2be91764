//! Properties of the snake assignment (`sht::snake`, `snake_orders`,
//! `snake_degrees`) and of the `Decomposition` built from it, on random
//! truncations, weights and rank counts:
//!
//! - every item (order `m`, degree `l`, tuple `(l, m)`) is assigned to
//!   exactly one rank, and the per-rank item counts differ by at most one;
//! - the load imbalance stays within the documented bound (`P - 1` tuples
//!   for the orders and for the degrees of the 1d scheme) and, for any
//!   weights, within the bound of the snake deal proved below;
//! - the decomposition's blocks of levels and latitudes tile their ranges,
//!   its tuple groups partition the tuples of each theta rank in the
//!   documented order, and it is refused exactly when a rank would get no work.

use proptest::prelude::*;
use sht::{snake, snake_degrees, snake_orders, Decomposition};

fn loads(owner: &[usize], weights: &[usize], parts: usize) -> Vec<usize> {
    let mut l = vec![0; parts];
    for (i, &o) in owner.iter().enumerate() {
        l[o] += weights[i];
    }
    l
}

fn spread(v: &[usize]) -> usize {
    v.iter().max().unwrap() - v.iter().min().unwrap()
}

/// The bound of the snake deal for any weights. Sorted decreasingly the
/// weights are `v_0 >= v_1 >= ...`, padded with zeros to whole rounds of
/// `parts` (a rank without an item in the last round gets 0). For ranks
/// `i < j`, a forward round gives `i` an item no lighter than `j`'s, a
/// backward round the reverse, and the positions of the two items of each
/// round span disjoint, increasing stretches of the sorted sequence, so
/// `load_i - load_j` is at most the sum of the drops of `v` over disjoint
/// stretches: at most `v_first - v_last` of the padded sequence (and the
/// same for `load_j - load_i`).
fn snake_bound(weights: &[usize], parts: usize) -> usize {
    let max = weights.iter().copied().max().unwrap_or(0);
    let min = weights.iter().copied().min().unwrap_or(0);
    if weights.len().is_multiple_of(parts) {
        max - min
    } else {
        max
    }
}

fn check_owner(owner: &[usize], n: usize, parts: usize) -> Result<(), TestCaseError> {
    prop_assert_eq!(owner.len(), n);
    prop_assert!(owner.iter().all(|&o| o < parts));
    // Item counts: whole rounds give every rank the same count, the last
    // partial round one more to some ranks.
    let mut count = vec![0usize; parts];
    for &o in owner {
        count[o] += 1;
    }
    prop_assert!(spread(&count) <= 1, "item counts {:?}", count);
    Ok(())
}

proptest! {
    // 64 cases per property; the largest case deals 400 items or builds a
    // decomposition of (lmax+1)(lmax+2)/2 <= 20301 tuples, well under a
    // millisecond each.
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any weights: each item exactly once, counts within one, loads within
    /// the snake bound; the heaviest item goes to rank 0.
    #[test]
    fn snake_of_any_weights(weights in prop::collection::vec(0usize..1000, 1..400), parts in 1usize..40) {
        let owner = snake(&weights, parts);
        check_owner(&owner, weights.len(), parts)?;
        let l = loads(&owner, &weights, parts);
        prop_assert!(spread(&l) <= snake_bound(&weights, parts), "loads {:?}", l);
        // Sorted by decreasing weight, ties to the larger index: the first
        // item dealt goes to rank 0.
        let first = (0..weights.len()).max_by_key(|&i| (weights[i], i)).unwrap();
        prop_assert_eq!(owner[first], 0);
    }

    /// The orders `m = 0..=lmax` (work `lmax + 1 - m` tuples): imbalance at
    /// most `P - 1` tuples, as documented in `snake.rs`, whatever `P`
    /// (ranks beyond `lmax + 1` simply get nothing); `m = 0` on rank 0.
    #[test]
    fn orders_within_documented_bound(lmax in 0usize..400, parts in 1usize..64) {
        let owner = snake_orders(lmax, parts);
        check_owner(&owner, lmax + 1, parts)?;
        let w: Vec<usize> = (0..=lmax).map(|m| lmax + 1 - m).collect();
        let l = loads(&owner, &w, parts);
        prop_assert!(spread(&l) < parts, "loads {:?} over {} ranks", l, parts);
        prop_assert_eq!(owner[0], 0);
        // Every tuple counted once.
        prop_assert_eq!(l.iter().sum::<usize>(), (lmax + 1) * (lmax + 2) / 2);
    }

    /// The degrees of the 1d scheme (all orders; work `l + 1`): imbalance
    /// at most `P - 1` tuples, as documented.
    #[test]
    fn degrees_of_the_1d_scheme_within_documented_bound(lmax in 0usize..400, parts in 1usize..64) {
        let orders: Vec<usize> = (0..=lmax).collect();
        let owner = snake_degrees(lmax, &orders, parts);
        check_owner(&owner, lmax + 1, parts)?;
        let w: Vec<usize> = (0..=lmax).map(|l| l + 1).collect();
        let l = loads(&owner, &w, parts);
        prop_assert!(spread(&l) < parts, "loads {:?} over {} ranks", l, parts);
    }

    /// The degrees of one theta rank's orders (2d scheme): every degree
    /// assigned, loads (the tuples `(l, m)` with `m` in the set) within the
    /// snake bound of their weights.
    #[test]
    fn degrees_of_a_set_of_orders(lmax in 0usize..200, pt in 1usize..16, it in 0usize..16, parts in 1usize..16) {
        let pt = pt.min(lmax + 1);
        let it = it % pt;
        let m_owner = snake_orders(lmax, pt);
        let orders: Vec<usize> = (0..=lmax).filter(|&m| m_owner[m] == it).collect();
        let owner = snake_degrees(lmax, &orders, parts);
        check_owner(&owner, lmax + 1, parts)?;
        let w: Vec<usize> = (0..=lmax).map(|l| orders.iter().filter(|&&m| m <= l).count()).collect();
        let l = loads(&owner, &w, parts);
        prop_assert_eq!(l.iter().sum::<usize>(), orders.iter().map(|&m| lmax + 1 - m).sum::<usize>());
        prop_assert!(spread(&l) <= snake_bound(&w, parts), "loads {:?}", l);
    }

    /// The decomposition of a `pi_r x pi_theta` grid: refused exactly when
    /// a rank would get no latitude, order, level or tuple; otherwise every
    /// tuple `(l, m)` is in exactly one rank's lm layout, each theta rank's
    /// level layout is its groups in radial-rank order, and the blocks of
    /// levels and latitudes tile their ranges.
    #[test]
    fn decomposition_partitions_the_tuples(
        lmax in 0usize..60,
        extra_theta in 1usize..8,
        nr in 1usize..12,
        pr in 1usize..8,
        pt in 1usize..10,
    ) {
        let ntheta = lmax + extra_theta;
        let m_owner = snake_orders(lmax, pt);
        let res = Decomposition::new(lmax, ntheta, nr, pr, pt);
        let fewest = (0..pt)
            .filter_map(|t| (0..=lmax).find(|&m| m_owner[m] == t))
            .map(|m0| lmax + 1 - m0)
            .min()
            .unwrap_or(0);
        let valid = pt <= ntheta && pt <= lmax + 1 && pr <= nr && pr <= fewest;
        let d = match res {
            Err(e) => {
                prop_assert!(!valid, "refused a valid grid: {}", e);
                return Ok(());
            }
            Ok(d) => d,
        };
        prop_assert!(valid, "accepted {} x {} for lmax {}, nr {}", pr, pt, lmax, nr);
        for (n, p, blocks) in [
            (nr, pr, (0..pr).map(|i| d.levels(i)).collect::<Vec<_>>()),
            (ntheta, pt, (0..pt).map(|i| d.latitudes(i)).collect()),
        ] {
            let mut next = 0;
            for &(s, c) in &blocks {
                prop_assert_eq!(s, next);
                prop_assert!(c >= 1);
                next += c;
            }
            prop_assert_eq!(next, n);
            let sizes: Vec<usize> = blocks.iter().map(|b| b.1).collect();
            prop_assert!(spread(&sizes) <= 1 && sizes.len() == p);
        }
        let mut seen = vec![0u32; (lmax + 1) * (lmax + 1)];
        for t in 0..pt {
            let orders = d.orders(t);
            prop_assert!(orders.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(orders.iter().all(|&m| m_owner[m] == t));
            prop_assert_eq!(orders.len(), m_owner.iter().filter(|&&o| o == t).count());
            let deg = snake_degrees(lmax, orders, pr);
            let mut concat = vec![];
            for r in 0..pr {
                let lm = d.lm_tuples(r, t);
                prop_assert!(!lm.is_empty(), "rank ({}, {}) has no tuple", r, t);
                prop_assert_eq!(d.group_start(r, t), concat.len());
                // Within a group: by m, then by l.
                prop_assert!(lm.windows(2).all(|w| (w[0].1, w[0].0) < (w[1].1, w[1].0)));
                for &(l, m) in lm {
                    prop_assert!(m <= l && l <= lmax);
                    prop_assert!(orders.contains(&m));
                    prop_assert_eq!(d.degree_owner(t, l), r);
                    prop_assert_eq!(deg[l], r);
                    seen[l * (lmax + 1) + m] += 1;
                }
                concat.extend_from_slice(lm);
            }
            prop_assert_eq!(d.level_tuples(t), &concat[..]);
        }
        for l in 0..=lmax {
            for m in 0..=l {
                prop_assert_eq!(seen[l * (lmax + 1) + m], 1, "tuple ({}, {})", l, m);
            }
        }
    }
}
